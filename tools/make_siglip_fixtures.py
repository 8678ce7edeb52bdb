#!/usr/bin/python3
"""SigLIP fixtures (issue 43 point 6) made by running the families' OWN code: a tiny Hugging Face SiglipModel
(transformers v4.48.3) and a tiny open_clip SigLIP (CustomTextCLIP whose image tower is a timm
vit_*_siglip_* trunk), random weights, with the expected outputs for one small image and a few texts.

Writes tests/fixtures/siglip/ (tests/fixtures/siglip/README.md says what each file holds):
  image.png                 the 64 x 64 RGB picture
                            both families run on SiglipImageProcessor's pixel_values for it (rescale 1/255,
                            normalise mean 0.5 std 0.5; no resize at 64 x 64), which equal bit for bit
                            float32(byte * (1/255) in float64), then (v - 0.5) / 0.5 in float32 (INPUT)
  texts.json                the texts and HF SiglipTokenizer's ids for them (padding="max_length", 16)
  hf/                       SiglipModel.save_pretrained (config.json, model.safetensors),
                            SiglipTokenizer.save_pretrained (spiece.model, tokenizer_config.json,
                            special_tokens_map.json, added_tokens.json if written),
                            SiglipImageProcessor.save_pretrained (preprocessor_config.json)
  hf/expected.json          the family's outputs (float64 run on the stored weights) + the float32 spread
  open_clip/                open_clip_config.json (open_clip's save_config_for_hf: model_cfg + preprocess_cfg),
                            open_clip_pytorch_model.bin (torch.save(model.state_dict())), expected.json

Both models store their weights as float16 (every parameter rounded to float16 before any output is computed,
so the stored values are exactly the ones the outputs were computed with): the folder must stay small.

The families' code is NOT part of attnmap: extract it outside the project and pass the paths:

  git --git-dir=/work/.mirror/TonyRHouston+huggingface-transformers/repo archive \\
      298b3f19303294293f7af075609481d64cb13de3 src | tar -x -C /tmp/sig/hf
  git --git-dir=/work/.mirror/mlfoundations+open_clip/repo archive HEAD src | tar -x -C /tmp/sig/oc
  git --git-dir=/work/.mirror/huggingface+pytorch-image-models/repo archive HEAD timm | tar -x -C /tmp/sig/timm
  /usr/bin/python3 tools/make_siglip_fixtures.py --transformers /tmp/sig/hf \\
      --open-clip /tmp/sig/oc --open-clip-commit <40 hex> --timm /tmp/sig/timm --timm-commit <40 hex>

Debian 12's /usr/bin/python3: torch 1.13, numpy, PIL, python3-sentencepiece, python3-protobuf (SiglipTokenizer
re-serialises spiece.model through sentencepiece_model_pb2). Shims: SHIMS below, recorded in expected.json.
Deterministic: a second run writes the same bytes.
"""

import argparse
import json
import math
import os
import shutil
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture_lib as fl  # noqa: E402
import make_family_fixtures_hf as mfh  # noqa: E402

ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "tests", "fixtures", "siglip")
GENERATOR = "tools/make_siglip_fixtures.py"
SPIECE = os.path.join(OUT, "spiece.model")

S, P, D, HEADS, LAYERS, MLP = 64, 16, 64, 4, 2, 32   # image, patch, width, heads, blocks, MLP hidden
V, C = 1000, 16                                         # vocabulary (spiece.model), context
LOGIT_SCALE = math.log(10.0)
LOGIT_BIAS = -2.0
PEAK_TARGET = 0.5       # mean row max of each block's attention (and the pool's) after q/k scaling
INPUT = ("../image.png as SiglipImageProcessor(size 64 x 64).preprocess makes pixel_values (1, 3, 64, 64): "
         "float32(byte * (1/255) computed in float64), then (v - 0.5) / 0.5 in float32 (checked bit for bit)")
TEXTS = ["a dog", "a photo of a cat", "A Red CAR!", "two birds, flying.", "café au lait"]

SHIMS = mfh.SHIMS_HF + [
    "safetensors save_file for float16: the shim above with dtype F16 (tools/fixture_lib.write_safetensors "
    "writes the float16 values as stored; 0-d tensors none here).",
    "AddedToken: transformers' own fallback (used when the tokenizers package is absent) is a dataclass with "
    "eq=True and so unhashable, and the slow tokenizer's __init__ hashes it; it is replaced, in the transformers "
    "modules that bound it, by a small class with the Rust library's behaviour that the slow "
    "tokenizer relies on: attributes content / single_word / lstrip / rstrip / special / normalized (default "
    "not special), str() = content, __getstate__ = the attributes, equality and hash by content (the library's "
    "AddedToken compares and hashes its content). SiglipTokenizer is the slow, sentencepiece one.",
    "SiglipImageProcessor.preprocess run with do_resize=False: PIL is asked for no resize because the picture "
    "is already 64 x 64, the processor's size (Image.resize to the same size returns a copy); the rescale and "
    "normalise steps are the processor's own.",
    "timm: imported from its work tree with tools/make_family_fixtures_timm.py's torchvision stub (import-time "
    "names only; no torchvision code runs in the forward).",
    "open_clip: tools/make_family_fixtures_clip.py's OpenClip (open_clip/__init__.py not executed; model.py, "
    "transformer.py, timm_model.py imported from a stub package whose __path__ is src/open_clip; ftfy stub); "
    "every open_clip.transformer.Attention use_sdpa=False (torch 1.13 lacks scaled_dot_product_attention's "
    "scale=); timm set_fused_attn(False) (timm's own explicit softmax path).",
    "open_clip's save_config_for_hf taken from push_to_hf_hub.py with ast and run unchanged.",
    "open_clip's tokenizer (HFTokenizer('timm/ViT-B-16-SigLIP', clean='canonicalize')) needs the Hub: the "
    "open_clip model is run on HF SiglipTokenizer's ids (the same spiece.model, padded with </s> = 1 as both "
    "tokenizers pad).",
]


class AddedToken:
    """tokenizers.AddedToken as the slow tokenizers use it (SHIMS)."""

    def __init__(self, content="", single_word=False, lstrip=False, rstrip=False, special=False, normalized=None):
        self.content = content
        self.single_word = single_word
        self.lstrip = lstrip
        self.rstrip = rstrip
        self.special = special
        self.normalized = normalized if normalized is not None else not special

    def __getstate__(self):
        return dict(self.__dict__)

    def __setstate__(self, d):
        self.__dict__.update(d)

    def __str__(self):
        return self.content

    def __repr__(self):
        return "AddedToken(%r, special=%r)" % (self.content, self.special)

    def __eq__(self, other):
        return isinstance(other, AddedToken) and other.content == self.content

    def __hash__(self):
        return hash(self.content)


def install_added_token():
    """transformers' AddedToken (its fallback dataclass, unhashable: transformers requires tokenizers) replaced in
    the modules that bound it, before tokenization_siglip is imported (it binds it from tokenization_utils)."""
    assert "transformers.models.siglip.tokenization_siglip" not in sys.modules
    import transformers.tokenization_utils  # noqa: F401
    old = sys.modules["transformers.tokenization_utils_base"].AddedToken
    for name, mod in list(sys.modules.items()):
        if name.startswith("transformers") and getattr(mod, "AddedToken", None) is old:
            mod.AddedToken = AddedToken


# ---- helpers ------------------------------------------------------------------------------------------------

def write_png(path, rgb):
    """8-bit RGB PNG, no filter, zlib level 9 (deterministic)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def picture():
    """A 64 x 64 picture: gradients, a bright disc, a dark square (uint8 H, W, 3)."""
    y, x = np.mgrid[0:S, 0:S].astype(np.float64) / (S - 1)
    r = 0.2 + 0.6 * x
    g = 0.3 + 0.5 * y
    b = 0.5 + 0.3 * np.sin(6 * x * y)
    disc = ((x - 0.3) ** 2 + (y - 0.35) ** 2) < 0.04
    sq = (x > 0.6) & (x < 0.85) & (y > 0.55) & (y < 0.8)
    img = np.stack([r, g, b], -1)
    img[disc] = [0.95, 0.9, 0.2]
    img[sq] = [0.1, 0.15, 0.4]
    return np.clip(np.round(img * 255), 0, 255).astype(np.uint8)


def rnd(gen, shape, std):
    return torch.randn(shape, generator=gen, dtype=torch.float64) * std


def randomize(model, gen, extra):
    """Linear / Conv2d weights N(0, 1/fan_in), biases N(0, 0.1); LayerNorm weight 1 + N(0, 0.2), bias N(0, 0.2);
    Embedding N(0, 0.5); nn.MultiheadAttention's (and open_clip Attention's) in_proj N(0, 1/D), bias N(0, 0.1); `extra` name -> std for the
    rest. Every parameter but logit_scale / logit_bias must be set."""
    done = set()
    names = {id(p): n for n, p in model.named_parameters()}

    def put(p, v):
        with torch.no_grad():
            p.copy_(v.to(p.dtype))
        done.add(names[id(p)])
    for mod in model.modules():
        if isinstance(mod, nn.LayerNorm):
            put(mod.weight, 1.0 + rnd(gen, mod.weight.shape, 0.2))
            put(mod.bias, rnd(gen, mod.bias.shape, 0.2))
        elif isinstance(mod, (nn.Linear, nn.Conv2d)):
            put(mod.weight, rnd(gen, mod.weight.shape, mod.weight[0].numel() ** -0.5))
            if mod.bias is not None:
                put(mod.bias, rnd(gen, mod.bias.shape, 0.1))
        elif isinstance(mod, nn.Embedding):
            put(mod.weight, rnd(gen, mod.weight.shape, 0.5))
        elif isinstance(mod, nn.MultiheadAttention) or isinstance(getattr(mod, "in_proj_weight", None), nn.Parameter):
            put(mod.in_proj_weight, rnd(gen, mod.in_proj_weight.shape, mod.in_proj_weight.shape[1] ** -0.5))
            put(mod.in_proj_bias, rnd(gen, mod.in_proj_bias.shape, 0.1))
    for n, p in model.named_parameters():
        if n in extra:
            put(p, rnd(gen, p.shape, extra[n]))
    left = [n for n, _ in model.named_parameters() if n not in done and n not in ("logit_scale", "logit_bias")]
    assert not left, left
    with torch.no_grad():
        model.logit_scale.fill_(LOGIT_SCALE)
        model.logit_bias.fill_(LOGIT_BIAS)


def make_peaky(groups, row_max_fn):
    """Scales every q/k group (list of (parameter, rows or None)) by the smallest factor 1.15^k whose mean
    attention row max (row_max_fn() -> list of means, one per block / pool) is >= PEAK_TARGET everywhere."""
    base = [[(p, rows, p.detach().clone()) for p, rows in g] for g in groups]
    for k in range(40):
        s = 1.15 ** k
        with torch.no_grad():
            for g in base:
                for p, rows, orig in g:
                    if rows is None:
                        p.copy_(orig * s)
                    else:
                        p[rows] = orig[rows] * s
        means = row_max_fn()
        if min(means) >= PEAK_TARGET:
            return s, means
    raise RuntimeError("attention not peaky: %s" % means)


def round_f16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())


def outputs(encode_image, encode_text, logits, x, ids):
    """image_embeds, text_embeds (as the family returns them, not normalised), logits_per_image, sigmoid."""
    with torch.no_grad():
        img = encode_image(x)
        txt = encode_text(ids)
        lg = logits(x, ids)
    return {"image_embeds": img, "text_embeds": txt, "logits_per_image": lg, "probabilities": torch.sigmoid(lg)}


def run_both(model, fns, x, ids):
    """float64 run (the expected values) and float32 run (the spread), model cast back to float32 after."""
    model.double()
    r64 = outputs(*fns, x.double(), ids)
    model.float()
    r32 = outputs(*fns, x, ids)
    spread = {k: (r32[k].double() - r64[k]).abs().max().item() for k in r64}
    return r64, spread


def write_expected(folder, r64, spread, extra):
    out = dict(extra)
    for k, v in r64.items():
        out[k] = {"shape": list(v.shape), "max_abs": v.abs().max().item(), "spread_f32_f64": spread[k],
                  "values": [float(f) for f in v.reshape(-1).tolist()]}
    text = json.dumps(out, indent=1)
    # each "values" list on one line (small file)
    import re
    text = re.sub(r'"values": \[[^\]]*\]', lambda m: re.sub(r"\s+", " ", m.group(0)), text)
    with open(os.path.join(folder, "expected.json"), "w") as f:
        f.write(text + "\n")


# ---- Hugging Face -------------------------------------------------------------------------------------------

def save_file_f16(tensors, filename, metadata=None):
    for n, t in tensors.items():
        assert t.dtype == torch.float16 and t.dim() > 0, (n, t.dtype)
    fl.write_safetensors(filename, {n: t.detach().cpu().float() for n, t in tensors.items()}, "F16",
                         metadata=metadata)


def case_hf(T, folder, img_u8):
    cfg = T.SiglipConfig(
        text_config=dict(vocab_size=V, hidden_size=D, intermediate_size=MLP, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, max_position_embeddings=C),
        vision_config=dict(hidden_size=D, intermediate_size=MLP, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                           image_size=S, patch_size=P),
        attn_implementation="eager")
    torch.manual_seed(4361)
    model = T.SiglipModel(cfg).eval()
    gen = torch.Generator().manual_seed(43610)
    randomize(model, gen, {"vision_model.head.probe": 1.0})
    proc = T.SiglipImageProcessor(size={"height": S, "width": S})
    x = proc.preprocess([img_u8], do_resize=False, return_tensors="pt")["pixel_values"]
    assert x.shape == (1, 3, S, S) and x.dtype == torch.float32
    vm = model.vision_model
    groups = [[(l.self_attn.q_proj.weight, None), (l.self_attn.q_proj.bias, None),
               (l.self_attn.k_proj.weight, None), (l.self_attn.k_proj.bias, None)] for l in vm.encoder.layers]
    groups.append([(vm.head.attention.in_proj_weight, slice(0, 2 * D)), (vm.head.attention.in_proj_bias, slice(0, 2 * D))])

    def row_max():
        with torch.no_grad():
            out = vm(pixel_values=x, output_attentions=True)
            probe = vm.head.probe.repeat(1, 1, 1)  # last_hidden_state is post_layernorm's output, the head's input
            _, pool = vm.head.attention(probe, out.last_hidden_state, out.last_hidden_state, need_weights=True,
                                        average_attn_weights=False)
        return [a.max(-1).values.mean().item() for a in out.attentions] + [pool.max(-1).values.mean().item()]
    scale, peaks = make_peaky(groups, row_max)
    round_f16(model)
    tok = T.SiglipTokenizer(vocab_file=SPIECE, model_max_length=C)
    ids = tok(TEXTS, padding="max_length", max_length=C, return_tensors="pt")["input_ids"]
    assert ids.shape == (len(TEXTS), C), ids.shape
    fns = (lambda im: model.get_image_features(pixel_values=im),
           lambda t: model.get_text_features(input_ids=t),
           lambda im, t: model(input_ids=t, pixel_values=im).logits_per_image)
    r64, spread = run_both(model, fns, x, ids)
    # save as the family saves: float16 weights, save_pretrained's own code
    import transformers.modeling_utils as mu
    mu.safe_save_file = save_file_f16
    model.half().save_pretrained(folder, safe_serialization=True)
    model.float()
    tok.save_pretrained(folder)
    proc.save_pretrained(folder)
    write_expected(folder, r64, spread, {
        "family": "huggingface/transformers SiglipModel", "source": mfh.hf_source(
            ["models/siglip/modeling_siglip.py", "models/siglip/configuration_siglip.py",
             "models/siglip/tokenization_siglip.py", "models/siglip/image_processing_siglip.py"]),
        "generator": GENERATOR, "shims": SHIMS, "input": INPUT, "texts": "../texts.json",
        "qk_scale": scale, "attention_row_max_mean": peaks,
        "how": "float64 run of the stored float16 weights: image_embeds = get_image_features(pixel_values) "
               "(vision_model pooler_output: the MAP head, no projection); text_embeds = get_text_features("
               "input_ids) (text_model.head of the last position); logits_per_image = SiglipModel.forward's; "
               "probabilities = torch.sigmoid(logits_per_image)"})
    return x, ids, tok


# ---- open_clip ------------------------------------------------------------------------------------------------

def oc_model_cfg():
    return {"embed_dim": D, "init_logit_bias": LOGIT_BIAS, "custom_text": True,
            "vision_cfg": {"image_size": S, "timm_model_name": "vit_base_patch16_siglip_224",
                           "timm_model_pretrained": False, "timm_pool": "map", "timm_proj": "none",
                           "timm_model_kwargs": {"img_size": S, "patch_size": P, "embed_dim": D, "depth": LAYERS,
                                                 "num_heads": HEADS, "mlp_ratio": MLP / D}},
            "text_cfg": {"context_length": C, "vocab_size": V, "hf_tokenizer_name": "timm/ViT-B-16-SigLIP",
                         "tokenizer_kwargs": {"clean": "canonicalize"}, "width": D, "heads": HEADS,
                         "layers": LAYERS, "mlp_ratio": MLP / D, "no_causal_mask": True, "proj_bias": True,
                         "pool_type": "last", "norm_kwargs": {"eps": 1e-6}}}


def case_open_clip(fam, timm, folder, x, ids, commits):
    cfg = oc_model_cfg()
    torch.manual_seed(4362)
    kw = {k: v for k, v in cfg.items() if k != "custom_text"}
    model = fam.prepare(fam.model.CustomTextCLIP(**kw)).eval()
    model.visual.image_mean = (0.5, 0.5, 0.5)
    model.visual.image_std = (0.5, 0.5, 0.5)
    model.visual.preprocess_cfg = {"interpolation": "bicubic", "resize_mode": "squash"}  # pretrained._slpcfg
    gen = torch.Generator().manual_seed(43620)
    trunk = model.visual.trunk
    randomize(model, gen, {"visual.trunk.pos_embed": 0.5, "visual.trunk.attn_pool.latent": 1.0,
                           "text.positional_embedding": 0.5})
    groups = [[(b.attn.qkv.weight, slice(0, 2 * D)), (b.attn.qkv.bias, slice(0, 2 * D))] for b in trunk.blocks]
    groups.append([(trunk.attn_pool.q.weight, None), (trunk.attn_pool.q.bias, None),
                   (trunk.attn_pool.kv.weight, slice(0, D)), (trunk.attn_pool.kv.bias, slice(0, D))])
    got = []
    hooks = [b.attn.attn_drop.register_forward_hook(lambda m, i, o: got.append(i[0])) for b in trunk.blocks]
    real_softmax = torch.Tensor.softmax

    def row_max():
        got.clear()
        pool = []

        def sm(t, *a, **k):
            r = real_softmax(t, *a, **k)
            pool.append(r)
            return r
        ap_fwd = trunk.attn_pool.forward

        def wrapped(*a, **k):
            torch.Tensor.softmax = sm
            try:
                return ap_fwd(*a, **k)
            finally:
                torch.Tensor.softmax = real_softmax
        trunk.attn_pool.forward = wrapped
        try:
            with torch.no_grad():
                model.encode_image(x)
        finally:
            del trunk.attn_pool.forward
        assert len(got) == LAYERS and len(pool) == 1, (len(got), len(pool))
        return [a.max(-1).values.mean().item() for a in got] + [pool[0].max(-1).values.mean().item()]
    scale, peaks = make_peaky(groups, row_max)
    for h in hooks:
        h.remove()
    round_f16(model)
    fns = (lambda im: model.encode_image(im), lambda t: model.encode_text(t),
           lambda im, t: model.get_logits(im, t)[0])
    r64, spread = run_both(model, fns, x, ids)
    torch.save(model.half().state_dict(), os.path.join(folder, "open_clip_pytorch_model.bin"))
    model.float()
    fam.save_config_for_hf(model, Path(folder) / "open_clip_config.json", cfg)
    write_expected(folder, r64, spread, {
        "family": "mlfoundations/open_clip CustomTextCLIP with timm vit_base_patch16_siglip_224 (tiny by "
                  "timm_model_kwargs)",
        "source": {"open_clip": {"repo": "mlfoundations/open_clip", "commit": commits["open_clip"],
                                 "files": ["src/open_clip/model.py", "src/open_clip/transformer.py",
                                           "src/open_clip/timm_model.py", "src/open_clip/push_to_hf_hub.py"]},
                   "timm": {"repo": "huggingface/pytorch-image-models", "commit": commits["timm"],
                            "files": ["timm/models/vision_transformer.py", "timm/layers/attention_pool.py"]}},
        "generator": GENERATOR, "shims": SHIMS, "input": INPUT, "texts": "../texts.json",
        "qk_scale": scale, "attention_row_max_mean": peaks,
        "how": "float64 run of the stored float16 weights: image_embeds = encode_image(x) (normalize=False: the "
               "trunk's MAP-pooled features, timm_proj none); text_embeds = encode_text(ids) (normalize=False); "
               "logits_per_image = get_logits(x, ids)[0] (scale.exp() * cos + logit_bias); probabilities = "
               "torch.sigmoid(logits_per_image)"})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transformers", required=True, help="a transformers tree at v4.48.3 (holding src/)")
    ap.add_argument("--open-clip", required=True, help="a folder holding open_clip's src/open_clip")
    ap.add_argument("--open-clip-commit")
    ap.add_argument("--timm", required=True, help="a timm work tree (holding timm/)")
    ap.add_argument("--timm-commit")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for sub in ("hf", "open_clip"):
        if os.path.isdir(os.path.join(OUT, sub)):
            shutil.rmtree(os.path.join(OUT, sub))
        os.makedirs(os.path.join(OUT, sub))
    img = picture()
    write_png(os.path.join(OUT, "image.png"), img)
    # transformers first: it probes for torchvision at import, which the timm / open_clip stubs would answer
    T = mfh.import_transformers(args.transformers)
    install_added_token()
    x, ids, tok = case_hf(T, os.path.join(OUT, "hf"), img)
    # the processor's pixel_values are exactly this float32 formula of the PNG's bytes (checked bit for bit), so
    # a test recomputes them instead of storing 49 kB: float32(u8 * (1/255) in float64), then (v - 0.5) / 0.5
    v = (img.astype(np.float64) * (1 / 255)).astype(np.float32)
    v = (v - np.float32(0.5)) / np.float32(0.5)
    assert np.array_equal(v.transpose(2, 0, 1)[None], x.numpy()), "pixel_values differ from the formula"
    rows = lambda xs: "[\n  " + ",\n  ".join(json.dumps(r, ensure_ascii=False) for r in xs) + "\n ]"
    with open(os.path.join(OUT, "texts.json"), "w") as f:
        f.write('{\n "tokenizer": %s,\n "texts": %s,\n "ids": %s,\n "pieces": %s\n}\n' % (
            json.dumps("transformers SiglipTokenizer(vocab_file=spiece.model, model_max_length=16), called with "
                       "padding='max_length', max_length=16"),
            rows(TEXTS), rows(ids.tolist()), rows([tok.convert_ids_to_tokens(r) for r in ids.tolist()])))
    import make_family_fixtures_timm as mft
    import make_family_fixtures_clip as mfc
    timm, timm_commit = mft.import_timm(args.timm, args.timm_commit, fused_attn=False)
    fam = mfc.OpenClip(args.open_clip)
    fam.load_model_module()
    commits = {"open_clip": mfc.repo_commit(args.open_clip, args.open_clip_commit), "timm": timm_commit}
    case_open_clip(fam, timm, os.path.join(OUT, "open_clip"), x, ids, commits)
    total = 0
    for dp, _, fs in os.walk(OUT):
        for f in fs:
            total += os.path.getsize(os.path.join(dp, f))
    print("tests/fixtures/siglip: %d bytes" % total)


if __name__ == "__main__":
    main()
