#!/usr/bin/python3
"""Fixtures for CLIP's text tower (src/model/clip_text.cpp), made by running OpenAI CLIP's OWN code.

Writes tests/fixtures/clip_text/ (what each file holds: tests/fixtures/clip_text/README.md):
  model.safetensors   the text tower's tensors of a clip.model.CLIP state dict, F32, OpenAI's names
  meta.json           the config, the token ids, tolerances, the measured float32 / float64 spread, sanity
  features.npy        (N, E) CLIP.encode_text(ids), float64 run on the stored float32 weights, cast to float32
  image_features.npy  (M, E) a random image-feature batch (float32)
  logits.npy          (M, N) CLIP.forward's logits_per_image for those image features and the texts (float64 run)

openai/CLIP is NOT part of attnmap: fetch it, extract the clip/ folder outside the project, pass the path:

  git --git-dir=<CLIP.git> archive HEAD clip | tar -x -C /tmp/clipsrc
  /usr/bin/python3 tools/make_clip_text_fixtures.py --clip /tmp/clipsrc --clip-commit <40 hex>

(a path that is a git checkout needs no --clip-commit: `git rev-parse HEAD` is asked.)
Runs on Debian's /usr/bin/python3 (torch 1.13, numpy); no pip packages. Shims (listed in meta.json "shims"):
  * clip/__init__.py is not executed (it imports clip/clip.py: torchvision, the tokenizer, ftfy);
    clip/model.py is imported from a stub package 'clip' whose __path__ is the snapshot's clip/ folder;
  * float64 run only: clip.model.LayerNorm.forward (its fp16 guard casts to float32) is replaced by plain
    nn.LayerNorm.forward, as tools/make_family_fixtures_clip.py does;
  * the logits: CLIP.forward is run with encode_image replaced by a function returning the given image
    features (the visual tower is not what is tested here), so CLIP's own normalisation and logit code runs.
"""

import argparse
import importlib
import os
import sys
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import json  # noqa: E402

from fixture_lib import save_npy, write_meta, write_safetensors  # noqa: E402
from make_family_fixtures_clip import f64_layernorm, randomize, repo_commit, stub_package  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "clip_text")
GENERATOR = "tools/make_clip_text_fixtures.py"
# The text tower: OpenAI's 77-token context, a small vocabulary (the ids are ours), width 128 so that
# build_model's rule (heads = width // 64) gives 2 heads, 2 blocks, embed_dim 32.
TXT = dict(context_length=77, vocab_size=64, transformer_width=128, transformer_heads=128 // 64,
           transformer_layers=2)
EMBED = 32
# A minimal visual tower: clip.model.CLIP always builds one (encode_text reads its dtype); not saved.
VIS = dict(image_resolution=16, vision_layers=1, vision_width=64, vision_patch_size=16)
SOT, EOT = TXT["vocab_size"] - 2, TXT["vocab_size"] - 1  # as 49406 / 49407 are the last two of 49408
LOGIT_SCALE = 4.0   # log of the scale; exp(4) = 54.6 (OpenAI's trained models: 4.6052, exp = 100)
SANITY_FACTOR = 100.0

SHIMS = [
    "clip/__init__.py not executed (it imports clip/clip.py: torchvision transforms, the tokenizer, ftfy); "
    "clip/model.py imported from a stub package 'clip' whose __path__ is the snapshot's clip/ folder",
    "float64 run only: clip.model.LayerNorm.forward (fp16 guard: x.type(torch.float32), LayerNorm, cast back) "
    "replaced by nn.LayerNorm.forward (with float64 weights the guard raises); the float32 run uses the original",
    "logits: CLIP.forward run with encode_image replaced by a function returning image_features.npy, so that "
    "CLIP's own normalisation, logit_scale.exp() and product run on the text features",
]


def id_sequences(gen):
    """Token ids (N, 77): <|startoftext|> ... <|endoftext|>, then 0 padding as clip.tokenize pads, except where
    a case says otherwise. Content ids are random in [0, SOT)."""
    C = TXT["context_length"]

    def content(n, low=0):
        return torch.randint(low, SOT, (n,), generator=gen).tolist()

    def row(ids, after=None):
        ids = ids + (after if after is not None else [])
        return ids + [0] * (C - len(ids))

    cases = [
        ("5 tokens, end-of-text at 6, zero padding", row([SOT] + content(5) + [EOT])),
        ("empty text: end-of-text at 1", row([SOT, EOT])),
        ("full context: end-of-text at 76, no padding", row([SOT] + content(C - 2) + [EOT])),
        ("20 tokens with zeros among them (id 0 is a real token)",
         row([SOT] + [0, 3, 0] + content(17) + [EOT])),
        ("end-of-text at 31, then 45 non-zero ids after it (the causal mask keeps them out)",
         row([SOT] + content(30) + [EOT], content(C - 32, low=1))),
        ("two end-of-text ids (at 11 and 17): argmax takes the first", row([SOT] + content(10) + [EOT] + content(5) + [EOT])),
    ]
    for _, ids in cases:
        assert len(ids) == C and max(ids) == EOT
    return cases


def write_safetensors_f32(path, sd):
    """sd's float32 tensors as safetensors, shapes as they are (OpenAI's logit_scale is 0-d)."""
    assert all(t.dtype == torch.float32 for t in sd.values())
    write_safetensors(path, sd, keep_0d=True)


def encode(m, model, text, dtype):
    mm = model.to(dtype)
    with torch.no_grad():
        if dtype == torch.float64:
            with f64_layernorm(m):
                return mm.encode_text(text)
        return mm.encode_text(text)


def logits(m, model, image_features, text, dtype):
    mm = model.to(dtype)
    mm.encode_image = lambda image: image   # shim: the batch given is the image features
    try:
        with torch.no_grad():
            if dtype == torch.float64:
                with f64_layernorm(m):
                    per_image, per_text = mm(image_features.to(dtype), text)
            else:
                per_image, per_text = mm(image_features.to(dtype), text)
    finally:
        del mm.encode_image
    assert torch.equal(per_text, per_image.t())
    return per_image


def sanity(m, model, text, ref64, tol):
    """Each piece the C++ must get right moves the features by far more than the tolerance."""
    out = {}

    def variant(name, change, undo):
        change()
        try:
            d = (encode(m, model, text, torch.float64) - ref64).abs().max().item()
        finally:
            undo()
        assert d > SANITY_FACTOR * tol, "%s changes the features by only %g" % (name, d)
        out[name] = d

    blocks = model.transformer.resblocks
    masks = [b.attn_mask for b in blocks]
    variant("no causal mask", lambda: [setattr(b, "attn_mask", None) for b in blocks],
            lambda: [setattr(b, "attn_mask", k) for b, k in zip(blocks, masks)])
    gelus = [b.mlp.gelu for b in blocks]
    variant("QuickGELU -> exact GELU", lambda: [setattr(b.mlp, "gelu", nn.GELU()) for b in blocks],
            lambda: [setattr(b.mlp, "gelu", g) for b, g in zip(blocks, gelus)])
    lnf = model.ln_final
    variant("ln_final -> identity", lambda: setattr(model, "ln_final", nn.Identity()),
            lambda: setattr(model, "ln_final", lnf))
    pos = model.positional_embedding.data.clone()
    variant("no positional embedding", lambda: model.positional_embedding.data.zero_(),
            lambda: model.positional_embedding.data.copy_(pos))
    # the pooled position: the last one instead of the end-of-text token's (argmax)
    x = model.token_embedding(text).double() + model.positional_embedding.double()
    with f64_layernorm(m), torch.no_grad():
        x = model.ln_final(model.transformer(x.permute(1, 0, 2)).permute(1, 0, 2))
        last = x[:, -1] @ model.text_projection
    d = (last - ref64).abs().max().item()
    assert d > SANITY_FACTOR * tol
    out["feature of the last position instead of end-of-text"] = d
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clip", required=True, help="a folder holding openai/CLIP's clip/ (git archive or checkout)")
    ap.add_argument("--clip-commit", help="its commit (40 hex digits), when the folder is no git checkout")
    args = ap.parse_args()
    commit = repo_commit(args.clip, args.clip_commit)
    stub_package("clip", os.path.join(args.clip, "clip"))
    m = importlib.import_module("clip.model")

    torch.manual_seed(143)
    model = m.CLIP(embed_dim=EMBED, **VIS, **TXT).eval()
    gen = torch.Generator().manual_seed(1143)
    # every parameter random (LayerNorm weights 1 + N(0, 0.2), biases N(0, 0.2); Linear N(0, 1/fan_in), biases
    # N(0, 0.1); token embedding N(0, 0.5)); positions N(0, 0.5), text_projection N(0, 1/width)
    randomize(model, gen, dict(positional_embedding=0.5, text_projection=TXT["transformer_width"] ** -0.5,
                               **{"visual.class_embedding": 0.5, "visual.positional_embedding": 0.5,
                                  "visual.proj": 0.125}),
              keep=("logit_scale",))
    with torch.no_grad():
        model.logit_scale.fill_(LOGIT_SCALE)
    sd = model.state_dict()
    text_sd = OrderedDict((k, v) for k, v in sd.items() if not k.startswith("visual."))
    os.makedirs(OUT, exist_ok=True)
    write_safetensors_f32(os.path.join(OUT, "model.safetensors"), text_sd)

    cases = id_sequences(gen)
    text = torch.tensor([ids for _, ids in cases], dtype=torch.long)
    f64 = encode(m, model, text, torch.float64)
    f32 = encode(m, model, text, torch.float32)
    spread = (f32.double() - f64).abs().max().item()
    tol = max(1e-5, 2 * spread)
    # the causal mask in CLIP's own code: ids after end-of-text do not change its feature
    zeroed = text.clone()
    zeroed[4, 32:] = 0
    causal = (encode(m, model, zeroed, torch.float64)[4] - f64[4]).abs().max().item()
    assert causal < 1e-12, causal
    sane = sanity(m, model, text, f64, tol)

    img = torch.randn(3, EMBED, generator=gen, dtype=torch.float64).float()
    l64 = logits(m, model, img, text, torch.float64)
    l32 = logits(m, model, img, text, torch.float32)
    lspread = (l32.double() - l64).abs().max().item()
    ltol = max(1e-4, 2 * lspread)

    save_npy(os.path.join(OUT, "features.npy"), f64.numpy())
    save_npy(os.path.join(OUT, "image_features.npy"), img.numpy())
    save_npy(os.path.join(OUT, "logits.npy"), l64.numpy())
    write_meta(OUT, family="OpenAI CLIP", source={"repo": "openai/CLIP", "commit": commit, "files": ["clip/model.py"]},
               generator=GENERATOR, shims=SHIMS,
               config=dict(embed_dim=EMBED, heads=TXT["transformer_heads"], eps=1e-5, **TXT),
               sot=SOT, eot=EOT, logit_scale=LOGIT_SCALE,
               cases=[{"what": w, "eot_at": ids.index(EOT), "ids": ids} for w, ids in cases],
               features={"file": "features.npy", "shape": list(f64.shape), "max_abs": f64.abs().max().item(),
                         "spread_f32_f64": spread, "tolerance": tol},
               logits={"file": "logits.npy", "image_features": "image_features.npy", "shape": list(l64.shape),
                       "max_abs": l64.abs().max().item(), "spread_f32_f64": lspread, "tolerance": ltol},
               causal_check=causal, sanity=sane,
               tensors=OrderedDict((k, list(v.shape)) for k, v in text_sd.items()),
               description="clip.model.CLIP(embed_dim=32, image_resolution=16, vision_layers=1, vision_width=64, "
                           "vision_patch_size=16, context_length=77, vocab_size=64, transformer_width=128, "
                           "transformer_heads=2 (= width // 64, build_model's rule), transformer_layers=2); "
                           "model.safetensors = its state_dict() without visual.*; features = "
                           "model.encode_text(ids) in float64 on the stored float32 weights; logits = "
                           "model(image_features, ids)[0] (logits_per_image) in float64.")
    print("features: max |f32 - f64| %.3g (tolerance %.3g), max |feature| %.3g; logits spread %.3g (tol %.3g)"
          % (spread, tol, f64.abs().max().item(), lspread, ltol))
    print("sanity:", sane)


if __name__ == "__main__":
    main()
