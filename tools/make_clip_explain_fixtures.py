#!/usr/bin/python3
"""Fixtures for CLIP zero-shot classes and text-conditioned explanation maps (issue 43), made by running
OpenAI CLIP's OWN code (clip/model.py for the model, clip/simple_tokenizer.py for the token ids).

Writes tests/fixtures/clip_zero_shot/ (what each file holds: meta.json "files"):
  model.safetensors  a whole clip.model.CLIP state dict (vision + text tower), F16 (the model's values are
                     F16-rounded before any run, so every reference is of exactly the stored values);
                     __metadata__ config {"num_heads": 2, "act": "quickgelu"} (the vision width 32 is below
                     CLIP's width // 64 head rule)
  vocab.json, merges.txt  a small byte-level BPE vocabulary in Hugging Face's format: the 256 byte characters,
                     their "</w>" forms, the first MERGES merges of OpenAI's bpe_simple_vocab_16e6.txt.gz,
                     <|startoftext|>, <|endoftext|> (last, so argmax pooling finds it); bpe_small.txt.gz the same
                     merges as OpenAI's SimpleTokenizer reads them (the ids come from SimpleTokenizer)
  input.png          a 32x32 RGB picture (the model's input size: resize and centre crop are identities)
  input.npy          (3, 32, 32) CLIP's _transform of input.png as torchvision computes it in float32:
                     (u8 / 255 - OPENAI_CLIP_MEAN) / OPENAI_CLIP_STD
  image_features.npy (E)       CLIP.encode_image(input) (not normalised)
  text_features.npy  (N, E)    CLIP.encode_text(ids), L2-normalised as CLIP.forward does
  logits.npy         (N)       CLIP.forward(input, ids)[0][0] = logits_per_image
  probs.npy          (N)       logits_per_image.softmax(dim=-1): the zero-shot probabilities
  chefer.npy         (N, gh, gw)     per text j: Chefer et al. rules 5-6 on dlogit_j/dA (all blocks)
  gradcam.npy        (N, L, gh, gw)  per text j and block l: Grad-CAM with block l's ln_1 output as activation
  attn_grad.npy      (N, L, gh, gw)  per text j and block l: mean_h (dA * A)^+, class-token row
  chefer_last.npy    (N, gh, gw)     per text j: the image relevance of Chefer's CLIP notebook at its default
                     (hila-chefer/Transformer-MM-Explainability CLIP_explainability.ipynb, interpret() with
                     start_layer = -1, which it turns into len(blocks) - 1: the last block only), recomputed here
                     as that notebook computes it: the image repeated once per text, the one-hot sum of
                     logits_per_image's diagonal, autograd.grad per block; attnmap's chefer@L-1.
                     chefer_last.json says how (the notebook's code is not copied here)
The maps follow tools/make_explain_fixtures.py's definitions exactly (docs/explain.md), with the target
one-hot on the image-text logit j; the gradients are autograd through CLIP.forward in float64.

Optional cases in subfolders, each with the same input.png, texts and definitions:
  open_clip/  (--open-clip) open_clip.model.CLIP, F16 model.safetensors + open_clip_config.json
  hf/         (--transformers) a transformers v4.48.3 CLIPModel (vision 32x32 patch 8 width 32, 2 layers, 2 heads;
              text width 32, 1 layer, vocab 534, bos 532, eos_token_id 533, pad_token_id HF's default 1;
              projection_dim 16) as its own save_pretrained writes it (config.json + F32 model.safetensors) and
              CLIPImageProcessor.save_pretrained (preprocessor_config.json: CLIP's mean / std, resize and crop to
              32), with vocab.json + merges.txt copied beside them (no tokenizer.json: transformers makes one only
              with the tokenizers package); ids from transformers' slow CLIPTokenizer on those files (meta "ids"),
              the batch padded as CLIPProcessor(padding=True) does; logits_per_image of CLIPModel.forward in
              float64 and the maps by autograd through it (attention from output_attentions=True, eager)

The families' code is NOT part of attnmap: extract it outside the project and pass the paths:
  git --git-dir=<CLIP.git> archive HEAD | tar -x -C /tmp/clipsrc
  git --git-dir=<transformers.git> archive 298b3f19303294293f7af075609481d64cb13de3 src | tar -x -C /tmp/hf
  /usr/bin/python3 tools/make_clip_explain_fixtures.py --clip /tmp/clipsrc --clip-commit <40 hex> \
      [--open-clip /tmp/oc --open-clip-commit <40 hex>] [--transformers /tmp/hf]
(transformers is imported as tools/make_family_fixtures_hf.py does, with its shims SHIMS_HF, plus HF_SHIMS here.)
Runs on Debian's /usr/bin/python3 (torch 1.13, numpy, regex, PIL for the PNG); shims in meta.json "shims".
"""

import argparse
import gzip
import importlib
import json
import math
import os
import shutil
import sys
import tempfile
import types
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixture_lib import save_npy, write_meta, write_safetensors  # noqa: E402
from make_family_fixtures_clip import f64_layernorm, randomize, repo_commit, smooth_picture, stub_package  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "clip_zero_shot")
GENERATOR = "tools/make_clip_explain_fixtures.py"
MERGES = 20
TEXTS = ["a dog", "a cat", "a photo of a bird"]
EMBED = 16
VIS = dict(input_resolution=32, patch_size=8, width=32, layers=2, heads=2, output_dim=EMBED)
TXT = dict(context_length=77, transformer_width=64, transformer_heads=1, transformer_layers=1)
LOGIT_SCALE = 3.0  # exp(3) = 20.1 (trained OpenAI models: 4.6052, exp = 100)
TARGET_ROW_MAX = 0.7

SHIMS = [
    "clip/__init__.py not executed (it imports clip/clip.py: torchvision); clip/model.py and "
    "clip/simple_tokenizer.py imported from a stub package 'clip' whose __path__ is the snapshot's clip/ folder",
    "ftfy (imported by simple_tokenizer.py) stubbed: fix_text returns the text unchanged (the texts are ASCII)",
    "the visual tower is a clip.model.VisionTransformer(width=32, heads=2) set as model.visual after "
    "CLIP(...) is built (CLIP.__init__ derives vision heads = width // 64, 0 for width 32)",
    "float64 run only: clip.model.LayerNorm.forward (fp16 guard) replaced by nn.LayerNorm.forward, as "
    "tools/make_family_fixtures_clip.py does; the float32 run uses the original",
    "attention probabilities with their gradients: while each visual block's nn.MultiheadAttention runs, "
    "torch.nn.functional.softmax is wrapped to keep its output (the probabilities that multiply V inside "
    "F.multi_head_attention_forward) with retain_grad; ln_1 outputs kept by forward hooks with retain_grad",
    "preprocessing: CLIP's _transform (Resize(32, bicubic), CenterCrop(32), ToTensor, Normalize) is computed "
    "directly as (u8 / 255 - mean) / std in float32 (resize and crop are identities on a 32x32 picture); "
    "mean / std read from clip/clip.py",
]


def install_ftfy_stub():
    ftfy = types.ModuleType("ftfy")
    ftfy.fix_text = lambda s: s
    sys.modules["ftfy"] = ftfy


def small_bpe(clip_dir, folder):
    """The first MERGES merges of OpenAI's vocabulary as a SimpleTokenizer bpe file and as HF vocab/merges."""
    lines = gzip.open(os.path.join(clip_dir, "clip", "bpe_simple_vocab_16e6.txt.gz")).read().decode("utf-8").split("\n")
    header, merges = lines[0], lines[1:1 + MERGES]
    path = os.path.join(folder, "bpe_small.txt.gz")
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # no trailing newline: SimpleTokenizer would read '' as a merge
        f.write(("\n".join([header] + merges)).encode("utf-8"))
    return path, merges


def write_hf_vocab(tok, merges, folder):
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(tok.encoder, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")


def make_png(gen, folder, mean, std):
    """A smooth 32x32 picture (gradients and blobs) as uint8; the PNG and its exact preprocessed tensor."""
    from PIL import Image
    S = VIS["input_resolution"]
    u8 = (smooth_picture(gen, S, 0.0) * 255).round().to(torch.uint8)
    Image.fromarray(u8.permute(1, 2, 0).numpy(), "RGB").save(os.path.join(folder, "input.png"))
    back = torch.from_numpy(np.asarray(Image.open(os.path.join(folder, "input.png")).convert("RGB")).copy())
    assert torch.equal(back.permute(2, 0, 1), u8)
    x = u8.float().div(255)  # torchvision ToTensor
    return (x - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)  # Normalize


class Recorder:
    """Each visual block's attention probabilities and ln_1 output, in the graph, gradients retained."""

    def __init__(self, visual):
        self.probs, self.ln1, self.undo = [], [], []
        for b in visual.transformer.resblocks:
            h = b.ln_1.register_forward_hook(self.keep_ln1)
            self.undo.append(h.remove)
            if not isinstance(b.attn, nn.MultiheadAttention):  # OpenCLIP Attention (use_sdpa off): attn_drop(A)
                h = b.attn.attn_drop.register_forward_hook(self.keep_probs)
                self.undo.append(h.remove)
                continue
            orig = b.attn.forward

            def fwd(*a, _orig=orig, **k):
                sm = F.softmax

                def rec(t, *aa, **kk):
                    p = sm(t, *aa, **kk)
                    if p.requires_grad:
                        p.retain_grad()
                    self.probs.append(p)
                    return p
                F.softmax = rec
                try:
                    return _orig(*a, **k)
                finally:
                    F.softmax = sm
            b.attn.forward = fwd
            self.undo.append(lambda m=b.attn: m.__dict__.pop("forward"))

    def keep_probs(self, mod, inp, out):
        if out.requires_grad:
            out.retain_grad()
        self.probs.append(out)

    def keep_ln1(self, mod, inp, out):
        if out.requires_grad:
            out.retain_grad()
        self.ln1.append(out)

    def close(self):
        for u in self.undo:
            u()


def clip_forward(m, model, x, text, dtype, record=False):
    mm = model.to(dtype)
    rec = Recorder(mm.visual) if record else None
    try:
        ctx = f64_layernorm(m) if dtype == torch.float64 else torch.enable_grad()
        with ctx:
            per_image, _ = mm(x.to(dtype).unsqueeze(0), text)
    finally:
        if rec:
            rec.close()
    return per_image[0], rec


def probs_of(a):
    return a[0] if a.dim() == 4 else a  # (B, H, T, T) OpenCLIP, (B*H, T, T) nn.MultiheadAttention


def tokens_of(y):
    return y[0] if y.shape[0] == 1 else y[:, 0]  # (B, T, D) batch-first, (T, B, D) OpenAI's LND


def explain(m, model, x, text, forward=None):
    """For each text j, fresh graph: chefer (gh, gw), gradcam (L, gh, gw), attn_grad (L, gh, gw)."""
    g = VIS["input_resolution"] // VIS["patch_size"]
    out = {"chefer": [], "gradcam": [], "attn_grad": []}
    for j in range(text.shape[0]):
        logits, rec = (forward or clip_forward)(m, model, x, text, torch.float64, record=True)
        assert len(rec.probs) == VIS["layers"] and probs_of(rec.probs[0]).shape[0] == VIS["heads"]
        logits[j].backward()
        T = rec.probs[0].shape[-1]
        R = torch.eye(T, dtype=torch.float64)
        ag, gc = [], []
        for a, y in zip(rec.probs, rec.ln1):  # blocks 0..L-1, as make_explain_fixtures.py
            cam = (probs_of(a.grad) * probs_of(a.detach())).clamp(min=0).mean(dim=0)
            R = R + cam @ R
            ag.append(cam[0, 1:].reshape(g, g))
            act, gr = tokens_of(y.detach())[1:], tokens_of(y.grad)[1:]
            w = gr.mean(dim=0)
            gc.append(torch.relu((act * w).sum(-1)).reshape(g, g))
        out["chefer"].append(R[0, 1:].reshape(g, g))
        out["gradcam"].append(torch.stack(gc))
        out["attn_grad"].append(torch.stack(ag))
        model.zero_grad(set_to_none=True)
    return {k: torch.stack(v) for k, v in out.items()}


NOTEBOOK = {"repo": "hila-chefer/Transformer-MM-Explainability", "commit": "58eaea85ac9c34aff052f368514b35d2e4c8dd3c",
            "file": "CLIP_explainability.ipynb", "function": "interpret(image, texts, model, device, start_layer=-1)"}


def notebook_last_block(m, model, x, text):
    """Chefer's CLIP notebook's image_relevance at its default start_layer = -1 (N, gh, gw), as the notebook
    computes it (described, not copied): images = the image repeated N times; target = sum of one_hot * logits_per_image
    with one_hot on the diagonal (image i with text i); start_layer = -1 becomes len(blocks) - 1; R = I (T x T) per
    image; for each visual block i >= start_layer: grad = d target / d attn_probs, cam = mean over heads of
    (grad * attn_probs) clamped at 0, R = R + cam @ R; image_relevance = R[:, 0, 1:]. float64 on the F16 values."""
    N, g = text.shape[0], VIS["input_resolution"] // VIS["patch_size"]
    mm = model.to(torch.float64)
    rec = Recorder(mm.visual)
    try:
        with f64_layernorm(m):
            per_image, _ = mm(x.double().unsqueeze(0).repeat(N, 1, 1, 1), text)
    finally:
        rec.close()
    target = (torch.eye(N, dtype=torch.float64) * per_image).sum()
    blocks = rec.probs
    start = len(blocks) - 1
    T = blocks[0].shape[-1]
    R = torch.eye(T, dtype=torch.float64).unsqueeze(0).expand(N, T, T)
    for i, a in enumerate(blocks):
        if i < start:
            continue
        grad = torch.autograd.grad(target, [a], retain_graph=True)[0].detach()
        cam = (grad * a.detach()).reshape(N, -1, T, T).clamp(min=0).mean(dim=1)
        R = R + torch.bmm(cam, R)
    model.zero_grad(set_to_none=True)
    return R[:, 0, 1:].reshape(N, g, g), start


def save_notebook_case(m, model, x, text, maps, clip_commit):
    """chefer_last.npy and chefer_last.json: new files beside the others (which stay as they were)."""
    last, start = notebook_last_block(m, model, x, text)
    same_as_attn_grad = (last - maps["attn_grad"][:, -1]).abs().max().item()
    assert same_as_attn_grad < 1e-9, same_as_attn_grad  # R = I + Abar_last: its row 0 past the class token
    assert (last - maps["chefer"]).abs().max().item() > 1e-3, "the last block alone equals every block"
    save_npy(os.path.join(OUT, "chefer_last.npy"), last.float().numpy())
    with open(os.path.join(OUT, "chefer_last.json"), "w") as f:
        json.dump({"file": "chefer_last.npy (N, 4, 4) float32, per text of meta.json's texts",
                   "generator": GENERATOR, "notebook": NOTEBOOK,
                   "model": {"repo": "openai/CLIP", "commit": clip_commit, "files": ["clip/model.py"]},
                   "start_layer": {"given": -1, "used": start, "blocks": VIS["layers"]},
                   "definition": "images = the input repeated once per text; target = sum_i logits_per_image[i, i]; "
                                 "R = I (T x T); for visual blocks i >= start_layer: R <- R + mean_h((dtarget/dA_i * "
                                 "A_i)^+) R; the map R[i, 0, 1:] (the patch tokens). float64 autograd through "
                                 "clip.model.CLIP.forward (shims as meta.json's)",
                   "max_abs": float(last.abs().max()),
                   "max_diff_from_attn_grad_last_block": same_as_attn_grad,
                   "max_diff_from_chefer_all_blocks": (last - maps["chefer"]).abs().max().item()}, f, indent=1)
        f.write("\n")
    print("chefer_last (notebook, start_layer %d) max %.4g, vs attn_grad[-1] %.3g" % (start, last.abs().max(), same_as_attn_grad))


def peaky_scale(metric):
    """The smallest q/k scale (by bisection in log scale, from 0.02) whose block's mean row max metric(scale)
    reaches TARGET_ROW_MAX."""
    lo, hi = 0.02, 1.0
    while metric(hi) < TARGET_ROW_MAX:
        lo, hi = hi, hi * 2
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if metric(mid) < TARGET_ROW_MAX else (lo, mid)
    return hi


def tune_peaky(m, model, x, text, forward=None):
    """Each visual block's query and key rows scaled by one factor so its mean row max (float64) is TARGET."""
    report = []
    for i, b in enumerate(model.visual.transformer.resblocks):
        D = b.attn.in_proj_weight.shape[1]
        base_w = b.attn.in_proj_weight.detach()[:2 * D].clone()
        base_b = b.attn.in_proj_bias.detach()[:2 * D].clone()

        def metric(s):
            with torch.no_grad():
                b.attn.in_proj_weight[:2 * D] = base_w * s
                b.attn.in_proj_bias[:2 * D] = base_b * s
            with torch.no_grad():
                _, rec = (forward or clip_forward)(m, model, x, text, torch.float64, record=True)
            return probs_of(rec.probs[i]).max(-1).values.mean().item()
        hi = peaky_scale(metric)
        report.append({"block": i, "qk_scale": round(hi, 6), "mean_row_max": round(metric(hi), 4)})
    return report


def save_arrays(folder, x, img_f, txt_f, logits, probs, maps):
    """The case's arrays: the input, both features, the logits, their softmax and each map (float32 .npy)."""
    save_npy(os.path.join(folder, "input.npy"), x.numpy())
    save_npy(os.path.join(folder, "image_features.npy"), img_f.float().numpy())
    save_npy(os.path.join(folder, "text_features.npy"), txt_f.float().numpy())
    save_npy(os.path.join(folder, "logits.npy"), logits.float().numpy())
    save_npy(os.path.join(folder, "probs.npy"), probs.float().numpy())
    for k, v in maps.items():
        save_npy(os.path.join(folder, k + ".npy"), v.float().numpy())


def write_safetensors_f16(path, sd, config):
    """sd as F16 safetensors (its values are F16-exact: checked), the model's config in the metadata."""
    md = {"format": "pt"}
    if config is not None:
        md["config"] = json.dumps(config, separators=(",", ":"))
    for name in sorted(sd):
        a = sd[name].double().numpy()
        assert np.array_equal(a.astype("<f2").astype(np.float64), a), name  # the values are F16-exact
    write_safetensors(path, sd, dtype="F16", metadata=md, keep_0d=True)


OPEN_CLIP_SHIMS = [
    "open_clip/__init__.py not executed: model.py / transformer.py / layers.py imported from a stub package "
    "(tools/make_family_fixtures_clip.py's OpenClip, with its torchvision / ftfy stubs)",
    "Attention.use_sdpa = False on every open_clip Attention (F.scaled_dot_product_attention(scale=) needs "
    "torch >= 2.1): OpenCLIP's own explicit path; the probabilities with their gradients from a forward hook on "
    "attn.attn_drop (identity in eval) with retain_grad; ln_1 outputs by forward hooks",
    "logits: CLIP.forward returns the normalised features and logit_scale.exp(); logits_per_image = "
    "scale * image_features @ text_features.T as open_clip's ClipLoss / zero-shot code computes it",
    "token ids: OpenAI's SimpleTokenizer on the small vocabulary (open_clip's SimpleTokenizer is the same code)",
]


def open_clip_case(args, ids, vocab_size, png_x_fn):
    from make_family_fixtures_clip import OpenClip
    commit = repo_commit(args.open_clip, args.open_clip_commit)
    fam = OpenClip(args.open_clip)
    fam.load_model_module()
    folder = os.path.join(OUT, "open_clip")
    os.makedirs(folder, exist_ok=True)
    cfg = dict(embed_dim=EMBED, quick_gelu=False,
               vision_cfg=dict(image_size=32, layers=VIS["layers"], width=VIS["width"], head_width=16, patch_size=8),
               text_cfg=dict(context_length=77, vocab_size=vocab_size, width=64, heads=1, layers=1))
    torch.manual_seed(343)
    model = fam.prepare(fam.model.CLIP(**cfg)).eval()
    pp = dict(fam.transform.PreprocessCfg().__dict__)
    pp["size"] = model.visual.image_size  # as factory.create_model sets it
    fam.model.set_model_preprocess_cfg(model.visual, pp)
    gen = torch.Generator().manual_seed(1343)
    randomize(model, gen, {"visual.class_embedding": 0.5, "visual.positional_embedding": 0.5,
                           "visual.proj": VIS["width"] ** -0.5, "positional_embedding": 0.5,
                           "text_projection": 64 ** -0.5}, keep=("logit_scale",))
    with torch.no_grad():
        model.logit_scale.fill_(LOGIT_SCALE)
    text = torch.zeros(len(ids), 77, dtype=torch.long)
    for i, r in enumerate(ids):
        text[i, :len(r)] = torch.tensor(r)
    x = png_x_fn(list(model.visual.image_mean), list(model.visual.image_std))

    def fwd(_m, mdl, xx, tt, dtype, record=False):
        mm = mdl.to(dtype)
        rec = Recorder(mm.visual) if record else None
        try:
            imf, txf, scale = mm(xx.to(dtype).unsqueeze(0), tt)[:3]
        finally:
            if rec:
                rec.close()
        return (scale * imf @ txf.T)[0], rec
    peaky = tune_peaky(None, model, x, text, forward=fwd)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    sd = OrderedDict((k, v.detach().clone()) for k, v in model.state_dict().items() if v.is_floating_point())
    write_safetensors_f16(os.path.join(folder, "model.safetensors"), sd, None)
    fam.save_config_for_hf(types.SimpleNamespace(visual=model.visual), __import__("pathlib").Path(folder) /
                           "open_clip_config.json", model_config=cfg)
    with torch.no_grad():
        l64, _ = fwd(None, model, x, text, torch.float64)
        mm = model.to(torch.float64)
        txt_f = mm.encode_text(text, normalize=True)
        img_f = mm.encode_image(x.double().unsqueeze(0))[0]
        l32, _ = fwd(None, model, x, text, torch.float32)
    spread = (l32.double() - l64).abs().max().item()
    probs = l64.softmax(dim=-1)
    maps = explain(None, model.double(), x, text, forward=fwd)
    save_arrays(folder, x, img_f, txt_f, l64, probs, maps)
    write_meta(folder, family="OpenCLIP", generator=GENERATOR, shims=OPEN_CLIP_SHIMS,
               source={"repo": "mlfoundations/open_clip", "commit": commit,
                       "files": ["src/open_clip/model.py", "src/open_clip/transformer.py", "src/open_clip/layers.py",
                                 "src/open_clip/push_to_hf_hub.py"]},
               model_cfg=cfg, texts=TEXTS, ids=ids, peaky=peaky, scale=math.exp(model.logit_scale.item()),
               logits_spread_f32_f64=spread, max_abs={k: float(v.abs().max()) for k, v in maps.items()},
               probs=probs.tolist(),
               description="open_clip.model.CLIP(**model_cfg) (exact GELU), F16 values, open_clip_config.json by "
                           "save_config_for_hf; the same input.png, texts and ids as the OpenAI case; maps by "
                           "autograd through CLIP.forward, target scale * <image, text_j>.")
    print("open_clip probs", probs.tolist(), "spread %.3g" % spread, "peaky", peaky)

HF_SHIMS = [
    "ftfy and the other cases' import stubs (ftfy, torchvision) taken out of sys.modules before transformers is "
    "imported (transformers probes packages with importlib.util.find_spec, which a stub without __spec__ breaks): "
    "CLIPTokenizer then takes its own no-ftfy path (BasicTokenizer(strip_accents=False, do_split_on_punc=False), "
    "lower case), the path transformers takes without ftfy",
    "transformers.tokenization_utils_base.AddedToken (its stand-in when the tokenizers package is absent: "
    "@dataclass(frozen=False, eq=True), so unhashable) given __hash__ = hash(content) and "
    "__setstate__ = update its fields, as tokenizers' AddedToken has; without them PreTrainedTokenizer.__init__ fails "
    "(`token not in self._added_tokens_encoder`, then `token.__setstate__(...)` in _add_tokens)",
    "peaky attention: each vision layer's self_attn.q_proj and k_proj (weight and bias) scaled by one factor so the "
    "block's mean row max (float64) is TARGET_ROW_MAX, as the other cases scale the q / k rows of in_proj",
    "attention probabilities with their gradients: CLIPModel.forward(output_attentions=True) with "
    "attn_implementation='eager'; vision_model_output.attentions[l] (the softmax output, (B, H, T, T), a view "
    "the attention product reads) with retain_grad; layer_norm1 outputs of the vision layers by forward hooks",
    "pixel_values: the OpenAI case's input.npy ((u8 / 255 - mean) / std in float32 of ../input.png); "
    "CLIPImageProcessor (the saved preprocessor_config.json) on input.png is checked equal to it to 1e-6",
]


def hf_tune_peaky(model, forward):
    """Each vision layer's q_proj / k_proj scaled by one factor so its mean row max (float64) is TARGET."""
    report = []
    for i, layer in enumerate(model.vision_model.encoder.layers):
        lins = [layer.self_attn.q_proj, layer.self_attn.k_proj]
        base = [(l.weight.detach().clone(), l.bias.detach().clone()) for l in lins]

        def metric(s):
            with torch.no_grad():
                for l, (w, b) in zip(lins, base):
                    l.weight.copy_(w * s)
                    l.bias.copy_(b * s)
                _, rec = forward(None, model, None, None, torch.float64, record=True)
            return probs_of(rec.probs[i]).max(-1).values.mean().item()
        hi = peaky_scale(metric)
        report.append({"block": i, "qk_scale": round(hi, 6), "mean_row_max": round(metric(hi), 4)})
    return report


class HfRecorder:
    """The vision layers' layer_norm1 outputs (hooks) and, once the forward returned, its attentions."""

    def __init__(self, vision):
        self.probs, self.ln1 = [], []
        self.handles = [layer.layer_norm1.register_forward_hook(self.keep_ln1) for layer in vision.encoder.layers]

    def keep_ln1(self, mod, inp, out):
        if out.requires_grad:
            out.retain_grad()
        self.ln1.append(out)

    def keep_probs(self, attentions):
        for a in attentions:
            if a.requires_grad:
                a.retain_grad()
            self.probs.append(a)

    def close(self):
        for h in self.handles:
            h.remove()


def hf_case(args, x, ids_openai, vocab_size, mean, std):
    """tests/fixtures/clip_zero_shot/hf/: a transformers CLIPModel saved by save_pretrained, the vocabulary files
    beside it, ids from transformers' CLIPTokenizer, probabilities and maps by autograd through CLIPModel."""
    for name in [n for n, mod in sys.modules.items() if n.split(".")[0] in ("torchvision", "ftfy")]:
        if getattr(sys.modules[name], "__spec__", None) is None:
            del sys.modules[name]
    import make_family_fixtures_hf as mfh
    from make_clip_text_family_fixtures import HF_F64_SHIM, f64_default
    T = mfh.import_transformers(args.transformers)
    folder = mfh.fresh(os.path.join(OUT, "hf"))
    V = vocab_size  # the OpenAI case's vocabulary: <|startoftext|> V - 2, <|endoftext|> V - 1
    text_cfg = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                    max_position_embeddings=77, bos_token_id=V - 2, eos_token_id=V - 1)
    vision_cfg = dict(image_size=32, patch_size=8, hidden_size=VIS["width"], intermediate_size=64,
                      num_hidden_layers=VIS["layers"], num_attention_heads=VIS["heads"])
    torch.manual_seed(446)
    model = T.CLIPModel(T.CLIPConfig(text_config=text_cfg, vision_config=vision_cfg, projection_dim=EMBED,
                                     attn_implementation="eager")).eval()
    assert type(model.vision_model.encoder.layers[0].self_attn).__name__ == "CLIPAttention"
    gen = torch.Generator().manual_seed(1446)
    randomize(model, gen, {"vision_model.embeddings.class_embedding": 0.5}, keep=("logit_scale",))
    with torch.no_grad():
        model.logit_scale.fill_(LOGIT_SCALE)
    for f in ("vocab.json", "merges.txt"):  # the vocabulary files, read by transformers' slow CLIPTokenizer
        shutil.copy(os.path.join(OUT, f), os.path.join(folder, f))
    import transformers.tokenization_utils_base as tub
    if not tub.is_tokenizers_available():  # HF_SHIMS: tokenizers' AddedToken is hashable by its content
        tub.AddedToken.__hash__ = lambda self: hash(self.content)
        tub.AddedToken.__setstate__ = lambda self, state: self.__dict__.update(state)
    tok = T.CLIPTokenizer(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"))
    ids = [tok(t)["input_ids"] for t in TEXTS]
    batch = tok(TEXTS, padding=True)  # as CLIPProcessor(text=..., padding=True): <|endoftext|> pads, with a mask
    input_ids = torch.tensor(batch["input_ids"])
    mask = torch.tensor(batch["attention_mask"])

    def fwd(_m, mdl, _x, _t, dtype, record=False):
        mm = mdl.to(dtype)
        rec = HfRecorder(mm.vision_model) if record else None
        try:
            with f64_default(dtype):
                out = mm(input_ids=input_ids, attention_mask=mask, pixel_values=x.to(dtype).unsqueeze(0),
                         output_attentions=record, return_dict=True)
        finally:
            if rec:
                rec.close()
        if rec:
            rec.keep_probs(out.vision_model_output.attentions)
        return out.logits_per_image[0], rec
    peaky = hf_tune_peaky(model, fwd)
    model.float()
    proc = T.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32},
                                image_mean=mean, image_std=std)
    from PIL import Image
    px = proc(images=Image.open(os.path.join(OUT, "input.png")), return_tensors="pt")["pixel_values"][0]
    proc_diff = (px.float() - x).abs().max().item()
    assert proc_diff <= 1e-6, proc_diff
    tmp = tempfile.mkdtemp()
    try:  # save_pretrained into an empty folder (hf_save checks what it wrote), then moved beside the vocabulary
        mfh.hf_save(model, tmp, proc)
        for f in sorted(os.listdir(tmp)):
            shutil.move(os.path.join(tmp, f), os.path.join(folder, f))
    finally:
        shutil.rmtree(tmp)
    with torch.no_grad():
        l64, _ = fwd(None, model, None, None, torch.float64)
        mm = model.to(torch.float64)
        with f64_default(torch.float64):
            img_f = mm.get_image_features(pixel_values=x.double().unsqueeze(0))[0]
            txt_f = mm.get_text_features(input_ids=input_ids, attention_mask=mask)
        txt_f = txt_f / txt_f.norm(dim=1, keepdim=True)
        l32, _ = fwd(None, model, None, None, torch.float32)
    spread = (l32.double() - l64).abs().max().item()
    probs = l64.softmax(dim=-1)
    again = math.exp(LOGIT_SCALE) * (txt_f @ (img_f / img_f.norm()))
    assert (again - l64).abs().max().item() < 1e-12
    maps = explain(None, model.double(), x, input_ids, forward=fwd)
    assert (maps["chefer"][0] - maps["chefer"][1]).abs().max() > 1e-3, "the texts' maps do not differ"
    save_arrays(folder, x, img_f, txt_f, l64, probs, maps)
    write_meta(folder, family="Hugging Face transformers CLIPModel", generator=GENERATOR,
               shims=mfh.SHIMS_HF + [HF_F64_SHIM] + HF_SHIMS,
               source=mfh.hf_source(["models/clip/modeling_clip.py", "models/clip/configuration_clip.py",
                                     "models/clip/tokenization_clip.py", "models/clip/image_processing_clip.py",
                                     "modeling_utils.py"]),
               text_config=text_cfg, vision_config=vision_cfg, projection_dim=EMBED, pad_token_id=model.config.text_config.pad_token_id,
               texts=TEXTS, ids=ids, ids_equal_openai_simple_tokenizer=ids == ids_openai,
               input_ids_padded=batch["input_ids"], attention_mask=batch["attention_mask"],
               logit_scale=LOGIT_SCALE, scale=math.exp(LOGIT_SCALE), peaky=peaky, processor_max_diff=proc_diff,
               logits_spread_f32_f64=spread, max_abs={k: float(v.abs().max()) for k, v in maps.items()},
               logits=l64.tolist(), probs=probs.tolist(),
               files={"config.json / model.safetensors / preprocessor_config.json": "CLIPModel.save_pretrained "
                      "(F32) and CLIPImageProcessor.save_pretrained", "vocab.json / merges.txt": "copies of ../",
                      "input.npy": "pixel_values (3, 32, 32) of ../input.png"},
               description="transformers CLIPModel(CLIPConfig(text_config, vision_config, projection_dim=16)), "
                           "eager attention, random weights; ids by CLIPTokenizer on vocab.json / merges.txt; "
                           "logits_per_image[0] and its softmax in float64 on the stored float32 weights; maps by "
                           "autograd through CLIPModel.forward, target one-hot on logits_per_image[0, j].")
    print("hf ids", ids, "equal to SimpleTokenizer's:", ids == ids_openai)
    print("hf probs", probs.tolist(), "spread %.3g" % spread, "peaky", peaky, "processor diff %.3g" % proc_diff)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clip", required=True, help="a folder holding openai/CLIP (git archive or checkout)")
    ap.add_argument("--clip-commit", help="its commit (40 hex digits), when the folder is no git checkout")
    ap.add_argument("--open-clip", help="a folder holding mlfoundations/open_clip's src/ (optional second case)")
    ap.add_argument("--open-clip-commit", help="its commit (40 hex digits)")
    ap.add_argument("--transformers", help="a transformers tree at v4.48.3 holding src/ (optional third case: hf/)")
    args = ap.parse_args()
    commit = repo_commit(args.clip, args.clip_commit)
    torch.set_num_threads(1)
    install_ftfy_stub()
    stub_package("clip", os.path.join(args.clip, "clip"))
    m = importlib.import_module("clip.model")
    st = importlib.import_module("clip.simple_tokenizer")
    src = open(os.path.join(args.clip, "clip", "clip.py")).read()
    import re
    nums = re.search(r"Normalize\(\(([^)]*)\),\s*\(([^)]*)\)\)", src)
    mean = [float(v) for v in nums.group(1).split(",")]
    std = [float(v) for v in nums.group(2).split(",")]
    os.makedirs(OUT, exist_ok=True)

    bpe_path, merges = small_bpe(args.clip, OUT)
    tok = st.SimpleTokenizer(bpe_path=bpe_path)
    vocab_size = len(tok.encoder)
    assert vocab_size == 512 + MERGES + 2 and tok.encoder["<|endoftext|>"] == vocab_size - 1
    write_hf_vocab(tok, merges, OUT)
    sot, eot = tok.encoder["<|startoftext|>"], tok.encoder["<|endoftext|>"]
    ids = [[sot] + tok.encode(t) + [eot] for t in TEXTS]
    text = torch.zeros(len(TEXTS), TXT["context_length"], dtype=torch.long)  # clip.tokenize: zero padding
    for i, r in enumerate(ids):
        text[i, :len(r)] = torch.tensor(r)

    torch.manual_seed(243)
    model = m.CLIP(embed_dim=EMBED, image_resolution=32, vision_layers=1, vision_width=64, vision_patch_size=8,
                   vocab_size=vocab_size, **TXT).eval()
    model.visual = m.VisionTransformer(**VIS)
    gen = torch.Generator().manual_seed(1243)
    randomize(model, gen, {"visual.class_embedding": 0.5, "visual.positional_embedding": 0.5,
                           "visual.proj": VIS["width"] ** -0.5, "positional_embedding": 0.5,
                           "text_projection": TXT["transformer_width"] ** -0.5}, keep=("logit_scale",))
    with torch.no_grad():
        model.logit_scale.fill_(LOGIT_SCALE)
    x = make_png(gen, OUT, mean, std)
    peaky = tune_peaky(m, model, x, text)
    with torch.no_grad():  # the stored values: F16-rounded, and every run below is of them
        for p in model.parameters():
            p.copy_(p.half().float())
    sd = OrderedDict((k, v.detach().clone()) for k, v in model.state_dict().items())
    write_safetensors_f16(os.path.join(OUT, "model.safetensors"), sd, {"num_heads": VIS["heads"], "act": "quickgelu"})

    with torch.no_grad():
        l64, _ = clip_forward(m, model, x, text, torch.float64)
        mm = model.to(torch.float64)
        with f64_layernorm(m):
            img_f = mm.encode_image(x.double().unsqueeze(0))[0]
            txt_f = mm.encode_text(text)
        txt_f = txt_f / txt_f.norm(dim=1, keepdim=True)
        l32, _ = clip_forward(m, model, x, text, torch.float32)
    spread = (l32.double() - l64).abs().max().item()
    probs = l64.softmax(dim=-1)
    # CLIP.forward's logits from the recorded features: the features are what the test feeds attnmap
    again = math.exp(model.logit_scale.item()) * (txt_f @ (img_f / img_f.norm()))
    assert (again - l64).abs().max().item() < 1e-12
    maps = explain(m, model.double(), x, text)
    assert (maps["chefer"][0] - maps["chefer"][1]).abs().max() > 1e-3, "the texts' maps do not differ"
    save_arrays(OUT, x, img_f, txt_f, l64, probs, maps)
    write_meta(OUT, family="OpenAI CLIP", generator=GENERATOR, shims=SHIMS,
               source={"repo": "openai/CLIP", "commit": commit,
                       "files": ["clip/model.py", "clip/simple_tokenizer.py", "clip/clip.py",
                                 "clip/bpe_simple_vocab_16e6.txt.gz (first %d merges)" % MERGES]},
               vision=dict(VIS, grid=[4, 4], tokens=17, num_prefix=1, act="quickgelu", eps=1e-5, mean=mean, std=std),
               text=dict(TXT, vocab_size=vocab_size, sot=sot, eot=eot, embed_dim=EMBED),
               logit_scale=LOGIT_SCALE, scale=math.exp(model.logit_scale.item()),
               texts=TEXTS, ids=ids, peaky=peaky,
               logits_spread_f32_f64=spread, max_abs={k: float(v.abs().max()) for k, v in maps.items()},
               probs=probs.tolist(),
               files={"model.safetensors": "clip.model.CLIP state_dict, F16 values, config in __metadata__",
                      "vocab.json / merges.txt": "HF byte-level BPE: 512 byte tokens, %d merges, SOT, EOT" % MERGES,
                      "bpe_small.txt.gz": "the same merges for OpenAI's SimpleTokenizer",
                      "input.png": "32x32 RGB; input.npy its exact preprocessing (3, 32, 32)",
                      "image_features.npy": "(E) encode_image", "text_features.npy": "(N, E) normalised",
                      "logits.npy": "(N) logits_per_image[0]", "probs.npy": "(N) softmax",
                      "chefer.npy": "(N, 4, 4)", "gradcam.npy": "(N, L, 4, 4) activation = block l ln_1",
                      "attn_grad.npy": "(N, L, 4, 4) block l"},
               description="clip.model.CLIP(embed_dim=16, vocab_size=%d, context_length=77, transformer_width=64, "
                           "transformer_heads=1, transformer_layers=1) with visual = VisionTransformer("
                           "input_resolution=32, patch_size=8, width=32, layers=2, heads=2, output_dim=16); "
                           "references in float64 on the stored F16 values; maps by autograd through "
                           "CLIP.forward, target one-hot on logits_per_image[0, j]." % vocab_size)
    save_notebook_case(m, model, x, text, maps, commit)
    if args.open_clip:
        def png(mean_, std_):  # the same picture: OpenCLIP's default mean / std are OpenAI's
            assert np.allclose(mean_, mean, atol=0) and np.allclose(std_, std, atol=0), (mean_, std_)
            return x
        open_clip_case(args, ids, vocab_size, png)
    if args.transformers:
        hf_case(args, x, ids, vocab_size, mean, std)
    print("ids", ids)
    print("probs", probs.tolist(), "logit spread f32/f64 %.3g" % spread)
    print("max", {k: float(v.abs().max()) for k, v in maps.items()}, "peaky", peaky)


if __name__ == "__main__":
    main()
