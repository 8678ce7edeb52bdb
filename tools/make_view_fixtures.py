#!/usr/bin/python3
"""PyTorch reference fixtures for attnmap's views (rollout, DINO threshold masks, --size).

    /usr/bin/python3 tools/make_view_fixtures.py [--out tests/fixtures]

Writes tests/fixtures/views_rollout/ and tests/fixtures/views_posembed/ (see
tests/fixtures/README.md).  Deterministic (fixed seeds); needs Debian's
python3-torch 1.13 and numpy.  CI does not run this: the outputs are committed.

References are computed in float64 from the float32 values actually stored,
then cast to float32.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------
# Attention rollout (Abnar & Zuidema 2020) with the discard rule attnmap uses
# --------------------------------------------------------------------------

def fuse(a, how):
    """a: (H, T, T) -> (T, T)."""
    if how == "mean":
        return a.mean(0)
    if how == "max":
        return a.max(0).values
    if how == "min":
        return a.min(0).values
    return a[int(how)]


def discard_smallest(m, frac):
    """Zero floor(frac * n) of the smallest entries of (T, T) `m` among the n
    eligible ones: not in row 0, not in column 0 (the class token's entries),
    not on the diagonal.  Ties: the lower flat index counts as smaller
    (stable sort), as attnmap does."""
    T = m.shape[0]
    m = m.clone()
    i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    eligible = ((i != 0) & (j != 0) & (i != j)).reshape(-1)
    flat_idx = np.nonzero(eligible)[0]
    vals = m.reshape(-1).numpy()[flat_idx]
    k = int(np.floor(frac * len(flat_idx)))
    order = np.argsort(vals, kind="stable")[:k]
    flat = m.reshape(-1)
    flat[torch.as_tensor(flat_idx[order], dtype=torch.long)] = 0.0
    return m


def rollout(attn, how, discard):
    """attn: (L, H, T, T) float64.  Returns (L, T, T): the rollout after each layer."""
    L, H, T, _ = attn.shape
    R = torch.eye(T, dtype=torch.float64)
    out = []
    for l in range(L):
        a = fuse(attn[l], how)
        if discard > 0:
            a = discard_smallest(a, discard)
        a = (a + torch.eye(T, dtype=torch.float64)) / 2
        a = a / a.sum(dim=-1, keepdim=True)
        R = a @ R
        out.append(R.clone())
    return torch.stack(out, 0)


# --------------------------------------------------------------------------
# DINO's threshold mask, verbatim from facebookresearch/dino visualize_attention.py
# --------------------------------------------------------------------------

def dino_threshold(attentions, threshold, h_featmap, w_featmap):
    """attentions: (nh, N) class-row patch attentions.  Returns (nh, h, w) 0/1."""
    nh = attentions.shape[0]
    val, idx = torch.sort(attentions)
    val /= torch.sum(val, dim=1, keepdim=True)
    cumval = torch.cumsum(val, dim=1)
    th_attn = cumval > (1 - threshold)
    idx2 = torch.argsort(idx)
    for head in range(nh):
        th_attn[head] = th_attn[head][idx2[head]]
    return th_attn.reshape(nh, h_featmap, w_featmap).float()


def make_rollout(folder):
    """A non-square timm model (image 40 wide x 24 high, patch 8: grid 3 x 5)."""
    gen = torch.Generator().manual_seed(3031)
    img_h, img_w, patch, dim, depth, heads, mlp, eps = 24, 40, 8, 16, 3, 4, 32, 1e-6
    gh, gw = img_h // patch, img_w // patch
    std = {"patch": 0.05, "pos": 0.5, "cls": 0.5, "qkv": 0.35, "proj": 0.1, "fc1": 0.1, "fc2": 0.1,
           "bias": 0.05, "ln_w_jitter": 0.1, "ln_b": 0.05}
    sd = fl.random_timm_state(gen, image_size=img_w, patch=patch, dim=dim, depth=depth, mlp=mlp, std=std)
    sd["pos_embed"] = fl.trunc_normal(gen, (1, 1 + gh * gw, dim), std["pos"])
    config = {"num_heads": heads, "layer_norm_eps": eps, "patch_size": patch, "image_size": [img_h, img_w]}
    stored = fl.write_attnmap_json(os.path.join(folder, "weights.json"), sd, config)
    x = torch.randn((3, img_h, img_w), generator=gen, dtype=torch.float64).numpy().astype(np.float32)
    x = fl.save_npy(os.path.join(folder, "input.npy"), x)
    attn, _ = fl.timm_forward(stored, x, heads, eps)  # (L, H, T, T) float64
    fl.save_npy(os.path.join(folder, "attn.npy"), attn.numpy())
    cases = {"rollout_mean.npy": ("mean", 0.0), "rollout_max_discard0.5.npy": ("max", 0.5),
             "rollout_mean_discard0.9.npy": ("mean", 0.9)}
    sums = {}
    for name, (how, d) in cases.items():
        r = rollout(attn, how, d)
        sums[name] = float((r.sum(-1) - 1).abs().max())
        fl.save_npy(os.path.join(folder, name), r.numpy())
    # DINO masks on the last layer's class row, threshold 0.6.
    cls = attn[-1, :, 0, 1:].clone()  # (H, N)
    th = dino_threshold(cls.clone(), 0.6, gh, gw)
    fl.save_npy(os.path.join(folder, "dino_mask_t0.6.npy"), th.numpy())
    fl.write_meta(folder, layout="timm", L=depth, H=heads, T=1 + gh * gw, D=dim, patch=patch,
               image_h=img_h, image_w=img_w, grid_h=gh, grid_w=gw, eps=eps, seed=3031,
               compute_dtype="float64", storage_dtype="float32",
               files={"weights.json": "attnmap JSON v1, timm names, config image_size [h, w]",
                      "input.npy": "(3, 24, 40) normalised image",
                      "attn.npy": "(L,H,T,T) softmax attention probabilities",
                      "rollout_mean.npy": "(L,T,T) rollout through layers 0..l, heads mean, no discard",
                      "rollout_max_discard0.5.npy": "(L,T,T) heads max, discard 0.5",
                      "rollout_mean_discard0.9.npy": "(L,T,T) heads mean, discard 0.9",
                      "dino_mask_t0.6.npy": "(H,gh,gw) DINO visualize_attention threshold 0.6 masks, last layer"},
               max_row_sum_err=sums,
               description="Rollout (Abnar & Zuidema 2020): fuse heads, zero floor(F*n) smallest eligible "
                           "entries (not row 0, not column 0, not the diagonal; stable ties), (A+I)/2, "
                           "row-normalise, R = A_l ... A_0.")
    print("views_rollout: T=%d, rollout row-sum err %s, mask kept per head %s" % (
        1 + gh * gw, max(sums.values()), th.sum((1, 2)).tolist()))


# --------------------------------------------------------------------------
# Position-embedding resampling (timm resample_abs_pos_embed, antialias=False)
# --------------------------------------------------------------------------

def make_posembed(folder):
    gen = torch.Generator().manual_seed(4041)
    D = 6
    cases = []
    for (gh, gw, prefix) in [(3, 5, 1), (4, 4, 2)]:
        src = fl.trunc_normal(gen, (prefix + gh * gw, D), 1.0)
        src = torch.as_tensor(fl.save_npy(os.path.join(folder, "src_%dx%d.npy" % (gh, gw)), src.numpy()),
                              dtype=torch.float64)
        for (nh, nw) in [(7, 8), (2, 3), (gh, gw), (5, 9)]:
            grid = src[prefix:].reshape(1, gh, gw, D).permute(0, 3, 1, 2)  # (1, D, gh, gw)
            new = F.interpolate(grid, size=(nh, nw), mode="bicubic", align_corners=False)
            new32 = F.interpolate(grid.float(), size=(nh, nw), mode="bicubic", align_corners=False)
            d32 = float((new32.double() - new).abs().max())
            out = torch.cat([src[:prefix], new.permute(0, 2, 3, 1).reshape(nh * nw, D)], 0)
            name = "out_%dx%d_to_%dx%d.npy" % (gh, gw, nh, nw)
            fl.save_npy(os.path.join(folder, name), out.numpy())
            cases.append({"src": "src_%dx%d.npy" % (gh, gw), "grid_h": gh, "grid_w": gw, "prefix": prefix,
                          "new_h": nh, "new_w": nw, "out": name, "float32_vs_float64": d32})
    # For the record: antialias=True (newer timm's default) uses a different kernel (a = -0.5).
    g = torch.zeros(1, 1, 4, 4, dtype=torch.float64)
    g[0, 0, 1, 2] = 1
    aa = float((F.interpolate(g, size=(8, 8), mode="bicubic", align_corners=False, antialias=True)
                - F.interpolate(g, size=(8, 8), mode="bicubic", align_corners=False)).abs().max())
    fl.write_meta(folder, D=D, cases=cases, compute_dtype="float64", storage_dtype="float32",
               antialias_true_vs_false_max_diff_4to8=aa,
               description="rows (prefix + gh*gw, D); patch rows row-major over the grid. Reference: "
                           "F.interpolate(grid (1,D,gh,gw), size=(new_h,new_w), mode='bicubic', "
                           "align_corners=False, antialias=False) in float64, prefix rows unchanged, "
                           "as timm's resample_abs_pos_embed.")
    print("views_posembed: %d cases; antialias True vs False differ by %.3g on a 4->8 one-hot" % (len(cases), aa))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name, fn in [("views_rollout", make_rollout), ("views_posembed", make_posembed)]:
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        fn(folder)


if __name__ == "__main__":
    main()
