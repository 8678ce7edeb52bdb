#!/usr/bin/python3
"""Fixtures for CLIP's text tower in OpenCLIP's and Hugging Face's layouts (src/model/clip_text.cpp,
clip_text_config.cpp), made by running each family's OWN code. The OpenAI case is tools/make_clip_text_fixtures.py.

Writes tests/fixtures/clip_text/<case>/ (tests/fixtures/clip_text/README.md says what each holds):
  model.safetensors   the text tower's tensors of the family's state dict (visual.* left out), F32, its names
  config.json         the family's config as its own save path writes it: open_clip's save_config_for_hf
                      ({"model_cfg": ..., "preprocess_cfg": ...}), HF's CLIPModel.save_pretrained config.json
  meta.json           the token ids, tolerances, the measured float32 / float64 spread, sanity, shims, commit
  features.npy        (N, E) the family's encode_text / get_text_features, float64 run on the stored float32
                      weights, cast to float32
  image_features.npy  (M, E) a random image-feature batch (float32)
  logits.npy          (M, N) the family's logits_per_image for those image features and the texts (float64 run)

Cases:
  open_clip_clip    open_clip.model.CLIP (top-level names): LayerScale (ls_init_value, gammas random),
                    pool_type 'eos' with eos_id 5, exact GELU (quick_gelu false), norm_kwargs eps 1e-6,
                    mlp_ratio 2, proj_bias (text_projection is an nn.Linear), init_logit_bias (logit_bias)
  open_clip_custom  open_clip.model.CustomTextCLIP (text.* names): no_causal_mask, pool_type 'last' (SigLIP-style,
                    so the padding counts), act_kwargs approximate tanh, nonscalar_logit_scale ((1,) scale)
  hf_legacy_eos     transformers CLIPModel, text_config eos_token_id 2 (configs before PR #24773): argmax of the ids
  hf_eos            transformers CLIPModel, eos_token_id 60 (not the highest id): the first position holding it;
                    hidden_act gelu, layer_norm_eps 1e-6

The families' code is NOT part of attnmap: extract it outside the project and pass the paths:

  git --git-dir=<open_clip.git> archive <commit> src/open_clip | tar -x -C /tmp/oc
  git --git-dir=<transformers.git> archive 298b3f19303294293f7af075609481d64cb13de3 src | tar -x -C /tmp/hf
  /usr/bin/python3 tools/make_clip_text_family_fixtures.py --open-clip /tmp/oc --open-clip-commit <40 hex> \\
      --transformers /tmp/hf

Runs on Debian 12's /usr/bin/python3 (torch 1.13, numpy); no pip packages. The shims are those of
tools/make_family_fixtures_clip.py (open_clip: OPEN_CLIP_SHIMS) and tools/make_family_fixtures_hf.py
(transformers: SHIMS_HF), plus LOGIT_SHIMS below; each case's meta.json lists those it used.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixture_lib import save_npy, write_meta  # noqa: E402
import make_family_fixtures_clip as mfc  # noqa: E402
import make_family_fixtures_hf as mfh  # noqa: E402
from make_clip_text_fixtures import write_safetensors_f32  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "clip_text")
GENERATOR = "tools/make_clip_text_family_fixtures.py"
SANITY_FACTOR = 100.0
C, V, W, E = 16, 64, 16, 8          # context, vocabulary, width, joint embedding: tens of kB per case
SOT, EOT = V - 2, V - 1              # as 49406 / 49407 are the last two of 49408
TINY_VISION_OC = {"image_size": 16, "layers": 1, "width": 16, "head_width": 8, "patch_size": 8}
TINY_VISION_HF = dict(image_size=16, patch_size=8, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2)
LOGIT_SCALE = 3.0

LOGIT_SHIMS = [
    "logits: the family's forward (open_clip get_logits; HF CLIPModel.forward) run with the image side replaced "
    "by the given image features (open_clip: _encode_image returns them, then its own F.normalize; HF: "
    "vision_model returns (None, features) and visual_projection is nn.Identity), so the family's own "
    "normalisation, logit_scale.exp(), logit_bias and product run on its text features",
]


def id_rows(gen, eos, pad, pool):
    """(what, ids) sequences of C ids: <|startoftext|> ... end-of-text, padded with `pad` to C."""
    def content(n, hi=SOT, avoid=()):
        out = []
        while len(out) < n:
            v = int(torch.randint(0, hi, (1,), generator=gen))
            if v not in avoid:
                out.append(v)
        return out

    def row(ids):
        return ids + [pad] * (C - len(ids))

    av = (eos,)
    rows = [
        ("4 tokens then padding", row([SOT] + content(4, avoid=av) + [eos])),
        ("empty text", row([SOT, eos])),
        ("full context", row([SOT] + content(C - 2, avoid=av) + [eos])),
        ("9 tokens with zeros among them", row([SOT, 0, 7, 0] + content(6, avoid=av) + [eos])),
        ("end-of-text twice (at 4 and 9)", row([SOT] + content(3, avoid=av) + [eos] + content(4, avoid=av) + [eos])),
    ]
    if eos != EOT:  # a higher id after eos: argmax would pick it, the family's eos rule must not
        rows.append(("end-of-text at 3, the highest id (63) after it", row([SOT, 9, 11, eos, EOT, 3])))
    return rows


# ---- open_clip --------------------------------------------------------------------------------------------

def oc_cfg(case):
    if case == "open_clip_clip":
        text = {"context_length": C, "vocab_size": V, "width": W, "heads": 2, "layers": 2, "mlp_ratio": 2.0,
                "ls_init_value": 0.5, "pool_type": "eos", "eos_id": 5, "norm_kwargs": {"eps": 1e-6},
                "proj_bias": True}
        return {"embed_dim": E, "vision_cfg": TINY_VISION_OC, "text_cfg": text, "quick_gelu": False,
                "init_logit_bias": -2.0}
    text = {"context_length": C, "vocab_size": V, "width": W, "heads": 4, "layers": 2, "no_causal_mask": True,
            "pool_type": "last", "act_kwargs": {"approximate": "tanh"}}
    return {"embed_dim": E, "vision_cfg": TINY_VISION_OC, "text_cfg": text, "quick_gelu": False,
            "custom_text": True, "nonscalar_logit_scale": True}


def oc_build(fam, cfg):
    kw = {k: v for k, v in cfg.items() if k != "custom_text"}
    cls = fam.model.CustomTextCLIP if cfg.get("custom_text") else fam.model.CLIP
    model = fam.prepare(cls(**kw)).eval()
    # open_clip.factory.create_model sets these (save_config_for_hf writes them as preprocess_cfg)
    model.visual.image_mean = fam.constants.OPENAI_DATASET_MEAN
    model.visual.image_std = fam.constants.OPENAI_DATASET_STD
    return model


def oc_encode(model, text, dtype):
    m = model.to(dtype)
    with torch.no_grad():
        return m.encode_text(text)


def oc_logits(model, img, text, dtype):
    m = model.to(dtype)
    m._encode_image = lambda image, normalize=False: \
        torch.nn.functional.normalize(image, dim=-1) if normalize else image
    try:
        with torch.no_grad():
            per_image, per_text = m.get_logits(img.to(dtype), text)
    finally:
        del m._encode_image
    assert torch.equal(per_text, per_image.t())
    return per_image


def oc_text_module(model):
    return model.text if hasattr(model, "text") else model


def oc_variants(fam, case, model):
    t = oc_text_module(model)
    blocks = t.transformer.resblocks
    out = []
    if case == "open_clip_clip":
        def no_ls(undo):
            if undo:
                for b, (a, c) in zip(blocks, saved):
                    b.ls_1, b.ls_2 = a, c
            else:
                for b in blocks:
                    b.ls_1, b.ls_2 = nn.Identity(), nn.Identity()
        saved = [(b.ls_1, b.ls_2) for b in blocks]
        out.append(("LayerScale -> identity", no_ls))
        pool = t.text_pool_type if hasattr(t, "text_pool_type") else t.pool_type

        def argmax(undo):
            setattr(t, "text_pool_type", pool if undo else "argmax")
        out.append(("pool_type eos -> argmax", argmax))
        gelus = [b.mlp.gelu for b in blocks]

        def quick(undo):
            for b, g in zip(blocks, gelus):
                b.mlp.gelu = g if undo else fam.layers.QuickGELU()
        out.append(("exact GELU -> QuickGELU", quick))
        bias = t.text_projection.bias.data.clone()

        def nobias(undo):
            t.text_projection.bias.data.copy_(bias if undo else torch.zeros_like(bias))
        out.append(("no projection bias", nobias))
    else:
        mask = t.attn_mask

        def causal(undo):
            t.attn_mask = mask if undo else t.build_causal_mask().to(next(t.parameters()).dtype)
        out.append(("causal mask added", causal))
        pool = t.pool_type

        def argmax(undo):
            t.pool_type = pool if undo else "argmax"
        out.append(("pool_type last -> argmax", argmax))
        gelus = [b.mlp.gelu for b in blocks]

        def exact(undo):
            for b, g in zip(blocks, gelus):
                b.mlp.gelu = g if undo else nn.GELU()
        out.append(("tanh GELU -> exact GELU", exact))
    return out


def case_open_clip(fam, commit, case):
    cfg = oc_cfg(case)
    torch.manual_seed(431 if case == "open_clip_clip" else 432)
    model = oc_build(fam, cfg)
    gen = torch.Generator().manual_seed(4310 if case == "open_clip_clip" else 4320)
    prefix = "text." if cfg.get("custom_text") else ""
    extra = {prefix + "positional_embedding": 0.5, "visual.class_embedding": 0.5,
             "visual.positional_embedding": 0.5, "visual.proj": 0.25}
    if not cfg["text_cfg"].get("proj_bias"):
        extra[prefix + "text_projection"] = W ** -0.5
    mfc.randomize(model, gen, extra, keep=("logit_scale", "logit_bias"))
    with torch.no_grad():
        model.logit_scale.fill_(LOGIT_SCALE)
    tc = cfg["text_cfg"]
    eos = tc.get("eos_id", EOT)
    rows = id_rows(gen, eos, 0, tc.get("pool_type"))
    return finish_case(case, model, rows, cfg, commit_source(fam, commit), mfc.OPEN_CLIP_SHIMS,
                       lambda m, x, d: oc_encode(m, x, d), oc_logits,
                       oc_variants(fam, case, model), fam=fam,
                       write_config=lambda folder: fam.save_config_for_hf(model, Path(folder) / "config.json", cfg),
                       desc="open_clip.model.%s(**model_cfg) with model_cfg = config.json's model_cfg"
                            % ("CustomTextCLIP" if cfg.get("custom_text") else "CLIP"))


def commit_source(fam, commit):
    files = ["src/open_clip/model.py", "src/open_clip/transformer.py", "src/open_clip/layers.py"]
    return {"repo": "mlfoundations/open_clip", "commit": commit, "files": files}


# ---- Hugging Face -----------------------------------------------------------------------------------------

def hf_case_cfg(T, case):
    text = dict(vocab_size=V, hidden_size=W, intermediate_size=3 * W, num_hidden_layers=2, num_attention_heads=2,
                max_position_embeddings=C, bos_token_id=SOT, pad_token_id=1)
    if case == "hf_legacy_eos":
        text.update(eos_token_id=2, hidden_act="quick_gelu")
    else:
        text.update(eos_token_id=60, hidden_act="gelu", layer_norm_eps=1e-6)
    return T.CLIPConfig(text_config=text, vision_config=TINY_VISION_HF, projection_dim=E,
                        attn_implementation="eager")


class f64_default:
    """float64 run only: torch's default dtype float64 (HF_F64_SHIM)."""

    def __init__(self, dtype):
        self.on = dtype == torch.float64

    def __enter__(self):
        if self.on:
            torch.set_default_dtype(torch.float64)

    def __exit__(self, *a):
        torch.set_default_dtype(torch.float32)


HF_F64_SHIM = ("HF float64 run only: torch.set_default_dtype(torch.float64) around the call, because "
               "modeling_attn_mask_utils._make_causal_mask's torch.full((T, T), torch.finfo(float64).min) creates "
               "a default-dtype (float32) tensor and overflows on torch 1.13; the float32 run is unchanged")


def hf_encode(model, text, dtype):
    m = model.to(dtype)
    with torch.no_grad(), f64_default(dtype):
        return m.get_text_features(input_ids=text)


class _GivenImage(nn.Module):
    def __init__(self, feats):
        super().__init__()
        self.feats = feats

    def forward(self, pixel_values=None, **_):
        return (None, self.feats)


def hf_logits(model, img, text, dtype):
    m = model.to(dtype)
    vm, vp = m.vision_model, m.visual_projection
    m.vision_model, m.visual_projection = _GivenImage(img.to(dtype)), nn.Identity()
    try:
        with torch.no_grad(), f64_default(dtype):
            out = m(input_ids=text, pixel_values=torch.zeros(1), return_dict=True)
    finally:
        m.vision_model, m.visual_projection = vm, vp
    assert torch.equal(out.logits_per_text, out.logits_per_image.t())
    return out.logits_per_image


def hf_variants(case, model):
    tm = model.text_model
    out = []
    eos = tm.eos_token_id

    def other_pool(undo):  # legacy: argmax and the first 63 agree on CLIP's ids, so pool <|startoftext|>
        tm.eos_token_id = eos if undo else (SOT if eos == 2 else 2)
    out.append(("eos_token_id 2 -> 62 (<|startoftext|>'s position)" if eos == 2 else
                "eos_token_id 60 -> 2 (argmax of the ids)", other_pool))
    acts = [layer.mlp.activation_fn for layer in tm.encoder.layers]

    def act(undo):
        for layer, a in zip(tm.encoder.layers, acts):
            layer.mlp.activation_fn = a if undo else nn.GELU(approximate="tanh")
    out.append(("activation -> tanh GELU", act))
    if case == "hf_eos":
        eps = [mod.eps for mod in tm.modules() if isinstance(mod, nn.LayerNorm)]

        def eps_(undo):
            for mod, e in zip([mm for mm in tm.modules() if isinstance(mm, nn.LayerNorm)], eps):
                mod.eps = e if undo else 1e-5
        out.append(("layer_norm_eps 1e-6 -> 1e-5 (features change little: not asserted)", eps_))
    return out


def case_hf(T, case):
    torch.manual_seed(441 if case == "hf_legacy_eos" else 442)
    model = T.CLIPModel(hf_case_cfg(T, case)).eval()
    gen = torch.Generator().manual_seed(4410 if case == "hf_legacy_eos" else 4420)
    mfc.randomize(model, gen, {"vision_model.embeddings.class_embedding": 0.5}, keep=("logit_scale",))
    with torch.no_grad():
        model.logit_scale.fill_(LOGIT_SCALE)
    eos = model.config.text_config.eos_token_id
    rows = id_rows(gen, EOT if eos == 2 else eos, EOT if eos == 2 else 1, None)
    src = mfh.hf_source(["models/clip/modeling_clip.py", "models/clip/configuration_clip.py"])

    def write_config(folder):
        tmp = tempfile.mkdtemp()
        try:
            mfh.hf_save(model, tmp, None)
            shutil.copy(os.path.join(tmp, "config.json"), os.path.join(folder, "config.json"))
            saved = mfh_state(os.path.join(tmp, "model.safetensors"))
        finally:
            shutil.rmtree(tmp)
        return saved
    return finish_case(case, model, rows, None, src, mfh.SHIMS_HF + [HF_F64_SHIM], hf_encode, hf_logits, hf_variants(case, model),
                       write_config=write_config, desc="transformers CLIPModel(CLIPConfig from config.json), "
                       "attn_implementation eager; features = get_text_features(input_ids)")


def mfh_state(path):
    """The names save_pretrained wrote (checked against the state dict written here)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    return sorted(k for k in header if k != "__metadata__")


# ---- common ----------------------------------------------------------------------------------------------

def finish_case(case, model, rows, cfg, source, shims, encode, logits, variants, write_config, desc, fam=None):
    folder = os.path.join(OUT, case)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    sd = model.state_dict()
    text_sd = OrderedDict((k, v.float()) for k, v in sd.items()
                          if not k.startswith(("visual.", "vision_model.", "visual_projection.")))
    saved = write_config(folder)
    if saved is not None:  # HF: the names save_pretrained writes are those of the state dict
        assert set(text_sd) <= set(saved), set(text_sd) - set(saved)
    write_safetensors_f32(os.path.join(folder, "model.safetensors"), text_sd)
    text = torch.tensor([ids for _, ids in rows], dtype=torch.long)
    f64 = encode(model, text, torch.float64)
    f32 = encode(model, text, torch.float32)
    model.double()
    spread = (f32.double() - f64).abs().max().item()
    tol = max(1e-5, 2 * spread)
    assert tol <= 1e-5, spread
    sane = {}
    for name, change in variants:
        change(False)
        try:
            d = (encode(model, text, torch.float64) - f64).abs().max().item()
        finally:
            change(True)
        factor = 10.0 if "GELU" in name else SANITY_FACTOR  # tanh vs erf GELU: a small but real change
        if "not asserted" not in name:
            assert d > factor * tol, "%s: %s changes the features by only %g" % (case, name, d)
        sane[name] = d
    assert (encode(model, text, torch.float64) - f64).abs().max().item() == 0.0  # every variant undone
    gen = torch.Generator().manual_seed(7)
    img = torch.randn(3, E, generator=gen, dtype=torch.float64).float()
    l64 = logits(model, img, text, torch.float64)
    l32 = logits(model, img, text, torch.float32)
    lspread = (l32.double() - l64).abs().max().item()
    ltol = max(1e-4, 2 * lspread)
    save_npy(os.path.join(folder, "features.npy"), f64.numpy())
    save_npy(os.path.join(folder, "image_features.npy"), img.numpy())
    save_npy(os.path.join(folder, "logits.npy"), l64.numpy())
    write_meta(folder, family=source["repo"], source=source, generator=GENERATOR, shims=shims + LOGIT_SHIMS,
               sot=SOT, eot=EOT, logit_scale=LOGIT_SCALE,
               cases=[{"what": w, "ids": ids} for w, ids in rows],
               features={"file": "features.npy", "shape": list(f64.shape), "max_abs": f64.abs().max().item(),
                         "spread_f32_f64": spread, "tolerance": tol},
               logits={"file": "logits.npy", "image_features": "image_features.npy", "shape": list(l64.shape),
                       "max_abs": l64.abs().max().item(), "spread_f32_f64": lspread, "tolerance": ltol},
               sanity=sane, tensors=OrderedDict((k, list(v.shape)) for k, v in text_sd.items()),
               description=desc + "; model.safetensors = its state_dict() without the image side; features in "
                                  "float64 on the stored float32 weights; logits = logits_per_image (float64)")
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print("%s: features spread %.3g (tol %.3g) max %.3g; logits spread %.3g; %d bytes; sanity %s"
          % (case, spread, tol, f64.abs().max().item(), lspread, size,
             {k: float("%.3g" % v) for k, v in sane.items()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--open-clip", required=True, help="a folder holding open_clip's src/open_clip")
    ap.add_argument("--open-clip-commit", help="its commit (40 hex digits), when the folder is no git checkout")
    ap.add_argument("--transformers", required=True, help="a transformers tree at v4.48.3 (holding src/)")
    ap.add_argument("--only", help="comma-separated case names")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    commit = mfc.repo_commit(args.open_clip, args.open_clip_commit)
    fam = mfc.OpenClip(args.open_clip)
    fam.load_model_module()
    for case in ("open_clip_clip", "open_clip_custom"):
        if only is None or case in only:
            case_open_clip(fam, commit, case)
    # the open_clip import stubs (torchvision, ftfy; never called) are taken out again: transformers probes
    # for those packages with importlib.util.find_spec, which a stub without __spec__ breaks
    for name in [n for n, m in sys.modules.items() if n.split(".")[0] in ("torchvision", "ftfy")]:
        if getattr(sys.modules[name], "__spec__", None) is None:
            del sys.modules[name]
    T = mfh.import_transformers(args.transformers)
    for case in ("hf_legacy_eos", "hf_eos"):
        if only is None or case in only:
            case_hf(T, case)


if __name__ == "__main__":
    main()
