#!/usr/bin/python3
"""PyTorch reference fixtures for --pos-interp (issue 18: framework-exact position-embedding resampling).

    /usr/bin/python3 tools/make_posinterp_fixtures.py [--out tests/fixtures]

Writes tests/fixtures/posinterp/ (see tests/fixtures/README.md).  Reads the committed layout weights
(tests/fixtures/layouts/*/weights.json), so the references are computed on exactly the weights the C++ tests
load.  Deterministic; needs Debian's python3-torch 1.13, numpy and PIL.  CI does not run this: the outputs are
committed.

Each framework's resampling is written below as that framework calls F.interpolate (the call, its arguments
and the grid/offset arithmetic; the surrounding bookkeeping - class-token split, reshape, permute - is the
same in all of them).  Versions followed:
  timm          timm/layers/pos_embed.py resample_abs_pos_embed (timm >= 0.9): size=new_size, bicubic,
                antialias=True (align_corners left at False)
  timm-legacy   timm 0.6 vision_transformer.resize_pos_embed: size=gs_new, bicubic, align_corners=False
  dino          facebookresearch/dino vision_transformer.py interpolate_pos_encoding (main, 2023):
                w0, h0 = w0 + 0.1, h0 + 0.1; scale_factor=(w0 / sqrt(N), h0 / sqrt(N)), bicubic
                (its "w" is the image's dim 2, i.e. rows); facebookresearch/dinov2 (main, 2025) with its default
                interpolate_offset=0.1, interpolate_antialias=False is the same call
  dinov2-reg    facebookresearch/dinov2 hub *_reg models: interpolate_offset=0.0 -> size=(w0, h0),
                antialias=True (interpolate_antialias=True): the timm call
  hf            transformers ViTEmbeddings.interpolate_pos_encoding (2024 on): size=(new_height, new_width),
                bicubic, align_corners=False
  hf-legacy     the same before: h0, w0 = h0 + 0.1, w0 + 0.1; scale_factor=(h0 / sqrt(N), w0 / sqrt(N)),
                bicubic, align_corners=False
  torchvision   torchvision/models/vision_transformer.py interpolate_embeddings: size=new_seq_length_1d,
                bicubic, align_corners=True (torchvision takes one square image_size; a non-square size is
                passed here as size=(h, w), the same call per axis)
References are computed in float64 from the float32 values stored in weights.json (the frameworks run the
call in float32: that difference is recorded per case as float32_vs_float64) and stored as float32.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUTS = os.path.join(ROOT, "tests", "fixtures", "layouts")


# --------------------------------------------------------------------------
# Each framework's call on the patch grid g: (1, D, M, M) (timm also (1, D, gh, gw)), new grid (nh, nw)
# --------------------------------------------------------------------------

def timm_call(g, nh, nw):
    return F.interpolate(g, size=(nh, nw), mode="bicubic", antialias=True)


def timm_legacy_call(g, nh, nw):
    return F.interpolate(g, size=(nh, nw), mode="bicubic", align_corners=False)


def dino_call(g, nh, nw):
    N = g.shape[2] * g.shape[3]
    w0, h0 = nh + 0.1, nw + 0.1  # DINO's w0 counts rows (B, nc, w, h = x.shape)
    out = F.interpolate(g, scale_factor=(w0 / math.sqrt(N), h0 / math.sqrt(N)), mode="bicubic")
    assert int(w0) == out.shape[-2] and int(h0) == out.shape[-1]
    return out


def dinov2_call(g, nh, nw, interpolate_offset=0.1, interpolate_antialias=False):
    M = g.shape[2]
    kwargs = {}
    if interpolate_offset:
        kwargs["scale_factor"] = (float(nh + interpolate_offset) / M, float(nw + interpolate_offset) / M)
    else:
        kwargs["size"] = (nh, nw)
    out = F.interpolate(g, mode="bicubic", antialias=interpolate_antialias, **kwargs)
    assert (nh, nw) == tuple(out.shape[-2:])
    return out


def dinov2_reg_call(g, nh, nw):
    return dinov2_call(g, nh, nw, interpolate_offset=0.0, interpolate_antialias=True)


def hf_call(g, nh, nw):
    return F.interpolate(g, size=(nh, nw), mode="bicubic", align_corners=False)


def hf_legacy_call(g, nh, nw):
    n = g.shape[2] * g.shape[3]
    h0, w0 = nh + 0.1, nw + 0.1
    return F.interpolate(g, scale_factor=(h0 / math.sqrt(n), w0 / math.sqrt(n)), mode="bicubic",
                         align_corners=False)


def torchvision_call(g, nh, nw):
    return F.interpolate(g, size=(nh, nw) if nh != nw else nh, mode="bicubic", align_corners=True)


# mode name (attnmap --pos-interp) -> the framework calls that define it (the first one's result is stored;
# the others must give the same numbers exactly)
MODES = {
    "timm": [("timm.resample_abs_pos_embed", timm_call), ("dinov2 hub *_reg", dinov2_reg_call)],
    "timm-legacy": [("timm 0.6 resize_pos_embed", timm_legacy_call)],
    "dino": [("dino interpolate_pos_encoding", dino_call), ("dinov2 interpolate_pos_encoding", dinov2_call)],
    "hf": [("transformers ViT interpolate_pos_encoding", hf_call)],
    "hf-legacy": [("transformers ViT interpolate_pos_encoding (legacy)", hf_legacy_call)],
    "torchvision": [("torchvision interpolate_embeddings", torchvision_call)],
}


def load_weights(name):
    with open(os.path.join(LAYOUTS, name, "weights.json")) as f:
        d = json.load(f)
    d.pop("config", None)
    return {k: np.asarray(v, dtype=np.float32) for k, v in d.items()}


def resample(pos, prefix, gh, gw, nh, nw, call, dtype):
    """pos (rows, D) float32 -> (prefix + nh*nw, D) in `dtype`, prefix rows as they are."""
    p = torch.as_tensor(pos, dtype=dtype)
    D = p.shape[1]
    g = p[prefix:].reshape(1, gh, gw, D).permute(0, 3, 1, 2)
    new = call(g, nh, nw).permute(0, 2, 3, 1).reshape(nh * nw, D)
    return torch.cat([p[:prefix], new], 0)


# Sources: (layout folder, pos_embed prefix rows, grid (h, w), patch, sizes (W, H) in pixels, modes).
# The timm-named fixtures have patch 8: --size 160,112 and 224 give the 14x20 and 28x28 grids that 320x224 and
# 448 give at patch 16; DINOv2's (patch 14) uses 322x224 (16x23; 320 is no multiple of 14) and 448 (32x32).
# The last size of each shrinks the grid (where antialias=True widens the kernel).
SOURCES = [
    ("timm", 1, (4, 4), 8, [(160, 112), (224, 224), (24, 16)], list(MODES)),
    ("dinov2_fb", 1, (3, 3), 14, [(322, 224), (448, 448), (28, 28)], list(MODES)),
    ("timm_reg_full", 3, (4, 6), 8, [(160, 112), (24, 16)], ["timm", "timm-legacy"]),
]


def make_posembed_cases(folder):
    cases = []
    for (layout, prefix, (gh, gw), patch, sizes, modes) in SOURCES:
        pos = load_weights(layout)["pos_embed"].reshape(-1, 24)
        assert pos.shape[0] == prefix + gh * gw
        for (W, H) in sizes:
            nh, nw = H // patch, W // patch
            stored = []  # (tensor, file) of this size: a mode whose numbers equal an earlier one's shares its file
            for mode in modes:
                outs = []
                for (who, call) in MODES[mode]:
                    if gh != gw and who.startswith("dinov2"):
                        continue  # DINOv2's code needs a square grid
                    outs.append((who, resample(pos, prefix, gh, gw, nh, nw, call, torch.float64)))
                ref = outs[0][1]
                for who, o in outs[1:]:
                    assert torch.equal(o, ref), (layout, mode, who)
                f32 = resample(pos, prefix, gh, gw, nh, nw, MODES[mode][0][1], torch.float32)
                name = next((f for (t, f) in stored if torch.equal(t, ref)), None)
                same = name is not None
                if not same:
                    name = "pos_%s_%dx%d_%s.npy" % (layout, W, H, mode)
                    fl.save_npy(os.path.join(folder, name), ref.numpy())
                    stored.append((ref, name))
                cases.append({"layout": layout, "mode": mode, "width": W, "height": H, "grid_h": nh, "grid_w": nw,
                              "prefix": prefix, "file": name, "calls": [w for w, _ in outs],
                              "shares_file_with_an_earlier_mode": same,
                              "float32_vs_float64": float((f32.double() - ref).abs().max())})
    # How far apart the modes are (the reason the flag exists), on the timm source at 160x112 (grid 14x20).
    spread = {}
    by = {(c["layout"], c["width"], c["height"], c["mode"]): c["file"] for c in cases}
    base = np.load(os.path.join(folder, by[("timm", 160, 112, "timm-legacy")]))
    for mode in MODES:
        other = np.load(os.path.join(folder, by[("timm", 160, 112, mode)]))
        spread[mode] = float(np.abs(other - base).max())
    return cases, spread


# --------------------------------------------------------------------------
# End to end: DINOv2 fixture, a 322x224 photo, DINO's rule vs the default (timm's call, the _reg hub models)
# --------------------------------------------------------------------------

def make_render_case(folder):
    W, H, P = 322, 224, 14
    rng = np.random.default_rng(1818)
    # A smooth picture with a bright blob (peaky attention on some heads) plus noise, 8-bit RGB.
    yy, xx = np.mgrid[0:H, 0:W]
    blob = np.exp(-(((xx - 230) / 30.0) ** 2 + ((yy - 70) / 25.0) ** 2))
    img = np.clip(60 + 150 * blob[..., None] + rng.normal(0, 25, (H, W, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(img, "RGB").save(os.path.join(folder, "photo_322x224.png"))
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    # attnmap's normalisation: v * (1 / (255 std)) - mean / std, in float32 (preprocess.cpp)
    sc = (np.float32(1.0) / (np.float32(255.0) * std.astype(np.float32))).astype(np.float32)
    sh = (mean.astype(np.float32) / std.astype(np.float32)).astype(np.float32)
    x = (img.astype(np.float32) * sc - sh).astype(np.float32).transpose(2, 0, 1).copy()  # (3, H, W)
    sd = load_weights("dinov2_fb")
    nh, nw = H // P, W // P
    R, heads = sd["register_tokens"].reshape(-1, 24).shape[0], 3
    maps = {}
    for mode in ["dino", "timm", "timm-legacy"]:
        st = dict(sd)
        pos = resample(sd["pos_embed"].reshape(-1, 24), 1, 3, 3, nh, nw, MODES[mode][0][1], torch.float64)
        st["pos_embed"] = pos.numpy().reshape(1, -1, 24)  # float64: the resampled values before rounding
        attn, _ = fl.vit_reference(st, x, heads, 1e-6, pos_rows="cls", reg_name="register_tokens")
        cls_rows = attn[:, :, 0, 1 + R:].reshape(attn.shape[0], heads, nh, nw)  # (L, H, gh, gw)
        maps[mode] = cls_rows.numpy()
        fl.save_npy(os.path.join(folder, "render_dinov2_fb_322x224_%s.npy" % mode), maps[mode])
    return {"photo": "photo_322x224.png", "weights": "layouts/dinov2_fb/weights.json", "width": W, "height": H,
            "grid_h": nh, "grid_w": nw, "registers": R, "heads": heads,
            "maps": {m: "render_dinov2_fb_322x224_%s.npy" % m for m in maps},
            "map_shape": "(L, H, grid_h, grid_w): class-token attention over the patch columns (registers skipped)",
            "max_map_diff_dino_vs_timm": float(np.abs(maps["dino"] - maps["timm"]).max()),
            "max_map_diff_dino_vs_timm_legacy": float(np.abs(maps["dino"] - maps["timm-legacy"]).max()),
            "max_map_value": float(max(maps["dino"].max(), maps["timm"].max())),
            "normalisation": "ImageNet mean/std, v * (1/(255 std)) - mean/std in float32 as attnmap's preprocess"}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    folder = os.path.join(args.out, "posinterp")
    os.makedirs(folder, exist_ok=True)
    cases, spread = make_posembed_cases(folder)
    render = make_render_case(folder)
    fl.write_meta(folder, cases=cases, render=render, torch_version=torch.__version__,
                  compute_dtype="float64", storage_dtype="float32",
                  max_diff_vs_timm_legacy_timm_160x112=spread,
                  description="pos_<layout>_<W>x<H>_<mode>.npy: (prefix + gh*gw, D) position embeddings after "
                              "resampling the layout's pos_embed with that mode's framework call(s) (see "
                              "tools/make_posinterp_fixtures.py); prefix rows unchanged. render_*: class-token "
                              "attention of a float64 forward on photo_322x224.png with DINO's rule and with "
                              "timm's (the default for DINOv2 with registers) and timm-legacy's (attnmap before issue 18).")
    print("posinterp: %d cases; modes vs timm-legacy on the timm source at 160x112: %s; maps dino vs timm differ "
          "by %.3g (peak %.3g)" % (len(cases), ", ".join("%s %.3g" % kv for kv in spread.items()),
                                   render["max_map_diff_dino_vs_timm"], render["max_map_value"]))


if __name__ == "__main__":
    main()
