#!/usr/bin/python3
"""Fixtures for eval's faithfulness figures (tests/test_faithfulness.cpp): token dropping and the
perturbation test (Chefer et al. 2021, sec. 4) against an explicit PyTorch forward.

Run with Debian's interpreter:  /usr/bin/python3 tools/make_faithful_fixtures.py
Writes (byte-for-byte reproducible, fixed seeds) tests/fixtures/faithful/:

weights.json   a random timm-layout model: image 32, patch 8 (grid 4x4, N = 16), D 16, 2 blocks, 2 heads,
               MLP 32, a 5-class head, mean 0.5 / std 0.25 per channel (so "black" is -2 after
               normalisation).
input.npy      the normalised input (3, 32, 32): (pixel - 0.5) / 0.25 of a random image in [0, 1].
expected.json  computed in float64 from the stored float32 values:
  "drop":  for several keep lists (patch indices kept; the class token always stays), the logits of the
           forward pass with only those patch tokens, cut after the position embedding is added
           (x = cat(cls, patches) + pos; x = cat(x[:1], x[1 + keep])).
  "map":   a 4x4 map (the class token's attention at block 1, mean over heads, float32) with two of its
           values tied on purpose; "target": argmax of the unperturbed logits; "p0" its probability.
  "curves": {order: {mode: [10 probabilities]}} for orders "positive" (decreasing map, ties by lower index),
           "negative" (increasing) and "given" (a fixed permutation, stored as "given_order"); modes "drop"
           (token dropped) and "zero" (its pixels set to 0 before normalisation, as Chefer et al.'s
           perturbation code does: data.scatter_(-1, idx, 0) on the [0, 1] image, then normalize).
           Step i removes floor(16 * i / 10) patches, i = 0..9.
  "auc":   the trapezoid area of each curve over the fractions 0, 0.1, ..., 0.9 (numpy.trapz).
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "faithful")
HEADS, EPS, P, G = 2, 1e-6, 8, 4
MEAN, STD = 0.5, 0.25


def forward_kept(W, x, keep):
    """Logits of the timm forward with only the patch tokens `keep` after the position embedding."""
    D = W["cls_token"].shape[-1]
    tok = F.conv2d(x.unsqueeze(0), W["patch_embed.proj.weight"], W["patch_embed.proj.bias"],
                   stride=P).flatten(2).transpose(1, 2)[0]
    h = torch.cat([W["cls_token"].reshape(1, D), tok], 0) + W["pos_embed"].reshape(-1, D)
    h = torch.cat([h[:1], h[1 + torch.tensor(keep, dtype=torch.long)]], 0)
    T, dh = h.shape[0], D // HEADS
    attn = []
    for i in range(2):
        p = "blocks.%d." % i
        y = F.layer_norm(h, (D,), W[p + "norm1.weight"], W[p + "norm1.bias"], EPS)
        qkv = y @ W[p + "attn.qkv.weight"].T + W[p + "attn.qkv.bias"]
        q, k, v = (qkv[:, j * D:(j + 1) * D].reshape(T, HEADS, dh).transpose(0, 1) for j in range(3))
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), dim=-1)
        attn.append(a)
        h = h + (a @ v).transpose(0, 1).reshape(T, D) @ W[p + "attn.proj.weight"].T + W[p + "attn.proj.bias"]
        y = F.layer_norm(h, (D,), W[p + "norm2.weight"], W[p + "norm2.bias"], EPS)
        h = h + F.gelu(y @ W[p + "mlp.fc1.weight"].T + W[p + "mlp.fc1.bias"]) @ W[p + "mlp.fc2.weight"].T \
            + W[p + "mlp.fc2.bias"]
    h = F.layer_norm(h, (D,), W["norm.weight"], W["norm.bias"], EPS)
    return h[0] @ W["head.weight"].T + W["head.bias"], attn


def zero_patches(pixels, removed):
    """Chefer et al.'s perturbation: the removed patches' pixels set to 0 in [0, 1] space, then normalised."""
    z = pixels.clone()
    for p in removed:
        r, c = divmod(int(p), G)
        z[:, r * P:(r + 1) * P, c * P:(c + 1) * P] = 0
    return (z - MEAN) / STD


def curve(W, pixels, x, order, mode, target, p0):
    out = [p0]
    for i in range(1, 10):
        removed = order[:16 * i // 10]
        if mode == "drop":
            logits, _ = forward_kept(W, x, sorted(set(range(16)) - set(removed)))
        else:
            logits, _ = forward_kept(W, zero_patches(pixels, removed), list(range(16)))
        out.append(float(torch.softmax(logits, -1)[target]))
    return out


def main():
    gen = torch.Generator().manual_seed(1919)
    std = {"patch": 0.1, "pos": 0.5, "cls": 0.5, "qkv": 0.4, "proj": 0.3, "fc1": 0.3, "fc2": 0.3,
           "head": 0.6, "bias": 0.1, "ln_w_jitter": 0.1, "ln_b": 0.1}
    sd = fl.random_timm_state(gen, image_size=32, patch=P, dim=16, depth=2, mlp=32, std=std, head_classes=5)
    stored = fl.write_attnmap_json(os.path.join(OUT, "weights.json"), sd,
                                   {"num_heads": HEADS, "layer_norm_eps": EPS, "mean": [MEAN] * 3,
                                    "std": [STD] * 3, "patch_size": P, "image_size": 32,
                                    "labels": ["a", "b", "c", "d", "e"]})
    W = {k: torch.as_tensor(np.asarray(v), dtype=torch.float64) for k, v in stored.items()}
    rng = np.random.default_rng(1919)
    pixels32 = rng.integers(0, 256, (3, 32, 32)).astype(np.float32) / np.float32(255)
    x32 = ((pixels32 - np.float32(MEAN)) / np.float32(STD)).astype(np.float32)
    fl.save_npy(os.path.join(OUT, "input.npy"), x32)
    pixels = torch.as_tensor(pixels32, dtype=torch.float64)
    x = torch.as_tensor(x32, dtype=torch.float64)

    full, attn = forward_kept(W, x, list(range(16)))
    ref, _ = fl.timm_forward(stored, x32, HEADS, EPS)  # the library's forward agrees with keep = all
    assert torch.allclose(ref[1], attn[1], atol=1e-12)
    drop = []
    for keep in [list(range(16)), [0, 2, 5, 7, 8, 15], [3], [], [1, 4, 6, 9, 10, 11, 12, 13, 14]]:
        logits, _ = forward_kept(W, x, keep)
        drop.append({"keep": keep, "logits": [float(v) for v in logits]})
    m = attn[1].mean(0)[0, 1:].numpy().astype(np.float32)
    m[5] = m[9]  # a tie: the lower index goes first in both directions
    target = int(torch.argmax(full))
    p0 = float(torch.softmax(full, -1)[target])
    orders = {"positive": sorted(range(16), key=lambda i: (-float(m[i]), i)),
              "negative": sorted(range(16), key=lambda i: (float(m[i]), i)),
              "given": [int(v) for v in rng.permutation(16)]}
    fr = [i / 10 for i in range(10)]
    curves, auc = {}, {}
    for name, order in orders.items():
        curves[name], auc[name] = {}, {}
        for mode in ("drop", "zero"):
            c = curve(W, pixels, x, order, mode, target, p0)
            curves[name][mode] = c
            auc[name][mode] = float(np.trapz(c, fr))
    expected = {"drop": drop, "map": [float(v) for v in m], "target": target, "p0": p0,
                "orders": orders, "given_order": orders["given"], "curves": curves, "auc": auc}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
