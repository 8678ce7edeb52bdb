#!/usr/bin/python3
"""Reference numbers for `attnmap stats` (issue 27), computed with NumPy from the attention probabilities
and hidden states of the explicit float64 PyTorch forward pass (fixture_lib.vit_reference), never from
attnmap's own output.

Writes tests/fixtures/stats/:
  * <model>/attn.npy (L,H,T,T), hidden.npy (L,T,D) (the residual stream after each block, float32) and
    expected.json (the statistics computed by NumPy from exactly those float32 arrays, in float64), for the
    fixture models timm_small (class token), layouts/deit_distilled (class + distillation token) and
    layouts/dinov2_fb (class token + 4 registers), each on its committed input.npy;
  * composites.json: the mean over data/composites/*.png of every statistic for the bundled
    weights/default.json (images decoded here, normalised with the config's mean/std; they are 224x224, the
    model's size, so no resize), computed from the reference pass of each image.

Definitions (docs/stats.md):
  mean distance (px) = mean over patch queries i of sum over patch keys j of p(i,j) * patch * |pos_i - pos_j|
                       (prefix queries and keys dropped, no renormalisation)
  entropy (nats)     = mean over patch queries of -sum_j p ln p over the full row (every key)
  cls_self = p(0,0); cls_to = p(0,k), k = 1..P-1; cls_patches = sum_{j>=P} p(0,j)
  norms: L2 norm of each token of the residual stream after a block; outlier threshold = median + k * 1.4826 *
         MAD over the patch tokens (k = 5), np.median.

Run: /usr/bin/python3 tools/make_stats_fixtures.py
"""
import glob
import json
import os
import struct
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(FIX, "stats")
K = 5.0

MODELS = [  # name, folder, patch (checked against the weights), grid (w, h), prefix, registers, forward keyword arguments
    ("timm_small", "timm_small", 16, (4, 4), 1, 0, {}),
    ("deit_distilled", "layouts/deit_distilled", 0, None, 2, 0, {"pos_rows": "all"}),
    ("dinov2_fb", "layouts/dinov2_fb", 0, None, 5, 4, {"pos_rows": "cls", "reg_name": "register_tokens"}),
]


def load_weights(path):
    d = json.load(open(path))
    cfg = d.pop("config", {})
    return {k: np.asarray(v, dtype=np.float32) for k, v in d.items()}, cfg


def distances(gw, gh, patch):
    r, c = np.divmod(np.arange(gw * gh), gw)
    return patch * np.sqrt((r[:, None] - r[None, :]) ** 2.0 + (c[:, None] - c[None, :]) ** 2.0)  # (N,N)


def head_stats(attn, prefix, gw, gh, patch):
    """attn (L,H,T,T) float32 -> dict of (L,H) arrays (cls_to: (L,H,P-1))."""
    a = attn.astype(np.float64)
    P = prefix
    d = distances(gw, gh, patch)
    pq = a[:, :, P:, :]                                          # patch queries (L,H,N,T)
    dist = (pq[:, :, :, P:] * d[None, None]).sum(-1).mean(-1)     # (L,H)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(pq > 0, pq * np.log(np.where(pq > 0, pq, 1.0)), 0.0)
    ent = (-plogp.sum(-1)).mean(-1)
    return {"mean_distance_px": dist, "entropy_nats": ent, "cls_self": a[:, :, 0, 0],
            "cls_to": a[:, :, 0, 1:P], "cls_patches": a[:, :, 0, P:].sum(-1)}


def norm_stats(hidden, prefix, registers):
    """hidden (L,T,D) float32 -> per block: cls, registers mean, patch mean/median/max, threshold, outliers."""
    n = np.sqrt((hidden.astype(np.float64) ** 2).sum(-1))       # (L,T)
    out = {"norms": n}
    pn = n[:, prefix:]
    med = np.median(pn, axis=1)
    mad = np.median(np.abs(pn - med[:, None]), axis=1)
    thr = med + K * 1.4826 * mad
    out.update(cls=n[:, 0], patch_mean=pn.mean(1), patch_median=med, patch_max=pn.max(1), threshold=thr,
               outliers=(pn > thr[:, None]).sum(1))
    out["registers"] = n[:, prefix - registers:prefix].mean(1) if registers else np.full(n.shape[0], np.nan)
    return out


def jsonable(d):
    return {k: (np.where(np.isnan(v), None, v).tolist() if isinstance(v, np.ndarray) and v.dtype.kind == "f"
                else v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}


def model_fixture(name, folder, patch, grid, prefix, registers, kw):
    sd, cfg = load_weights(os.path.join(FIX, folder, "weights.json"))
    meta = json.load(open(os.path.join(FIX, folder, "meta.json")))
    heads = cfg.get("num_heads", meta.get("H"))
    x = np.load(os.path.join(FIX, folder, "input.npy"))
    hidden = []
    attn, _ = fl.vit_reference(sd, x, heads, 1e-6, hidden=hidden, **kw)
    out = os.path.join(OUT, name)
    attn = fl.save_npy(os.path.join(out, "attn.npy"), attn.numpy())
    hid = fl.save_npy(os.path.join(out, "hidden.npy"), np.stack([h.numpy() for h in hidden]))
    patch = sd["patch_embed.proj.weight"].shape[-1]
    gw, gh = grid if grid else (x.shape[2] // patch, x.shape[1] // patch)
    hs, ns = head_stats(attn, prefix, gw, gh, patch), norm_stats(hid, prefix, registers)
    ns.pop("norms")
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"model": folder, "patch": patch, "grid": [gw, gh], "prefix": prefix, "registers": registers,
                   "outlier_k": K, "heads": jsonable(hs), "norms": jsonable(ns)}, f, indent=1)
        f.write("\n")
    print(name, "attn", attn.shape, "hidden", hid.shape)


def read_png_rgb(path):
    """8-bit RGB / RGBA, non-interlaced PNG -> (H,W,3) uint8 (zlib and the five PNG row filters)."""
    b = open(path, "rb").read()
    assert b[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, w = 8, b"", 0
    while pos < len(b):
        n, typ = struct.unpack(">I4s", b[pos:pos + 8])
        data = b[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype, _, _, inter = struct.unpack(">IIBBBBB", data)
            assert depth == 8 and ctype in (2, 6) and inter == 0, path
            ch = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += data
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * ch)
    img = np.zeros((h, w * ch), dtype=np.int32)
    for y in range(h):
        f, row = raw[y, 0], raw[y, 1:].astype(np.int32)
        up = img[y - 1] if y else np.zeros(w * ch, np.int32)
        if f == 0:
            cur = row
        elif f == 2:
            cur = (row + up) & 255
        else:
            cur = np.zeros(w * ch, np.int32)
            for i in range(w * ch):
                left = cur[i - ch] if i >= ch else 0
                ul = up[i - ch] if i >= ch else 0
                if f == 1:
                    pred = left
                elif f == 3:
                    pred = (left + up[i]) // 2
                else:
                    p = left + up[i] - ul
                    pa, pb, pc = abs(p - left), abs(p - up[i]), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else up[i] if pb <= pc else ul
                cur[i] = (row[i] + pred) & 255
        img[y] = cur
    return img.reshape(h, w, ch)[:, :, :3].astype(np.uint8)


def composites_fixture():
    sd, cfg = load_weights(os.path.join(ROOT, "weights", "default.json"))
    mean, std = np.asarray(cfg["mean"], np.float32), np.asarray(cfg["std"], np.float32)
    files = sorted(glob.glob(os.path.join(ROOT, "data", "composites", "*.png")))
    per = []
    for f in files:
        rgb = read_png_rgb(f).astype(np.float32) / np.float32(255.0)
        x = ((rgb - mean) / std).transpose(2, 0, 1)              # (3,224,224)
        hidden = []
        attn, _ = fl.vit_reference(sd, x, cfg["num_heads"], cfg["layer_norm_eps"], hidden=hidden)
        a = attn.numpy().astype(np.float32)
        hid = np.stack([h.numpy() for h in hidden]).astype(np.float32)
        hs, ns = head_stats(a, 1, 14, 14, 16), norm_stats(hid, 1, 0)
        ns.pop("norms")
        per.append((os.path.basename(f), hs, ns))
    mean_of = lambda key, i: np.mean([p[i][key] for p in per], axis=0)  # noqa: E731
    heads = {k: mean_of(k, 1) for k in ("mean_distance_px", "entropy_nats", "cls_self", "cls_patches")}
    norms = {k: mean_of(k, 2) for k in ("cls", "patch_mean", "patch_median", "patch_max")}
    norms["outliers_mean_per_image"] = mean_of("outliers", 2).astype(np.float64)
    with open(os.path.join(OUT, "composites.json"), "w") as f:
        json.dump({"weights": "weights/default.json", "images": [p[0] for p in per], "outlier_k": K,
                   "heads": jsonable(heads), "norms": jsonable(norms),
                   "per_image_mean_distance_px": {p[0]: p[1]["mean_distance_px"].tolist() for p in per}}, f, indent=1)
        f.write("\n")
    print("composites", len(per), "images")


def main():
    for m in MODELS:
        model_fixture(*m)
    composites_fixture()


if __name__ == "__main__":
    main()
