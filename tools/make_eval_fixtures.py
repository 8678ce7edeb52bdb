#!/usr/bin/python3
"""Fixtures for `attnmap eval` and the top-5 class report (tests/test_evaluate.cpp).

Run with Debian's interpreter:  /usr/bin/python3 tools/make_eval_fixtures.py
Writes (byte-for-byte reproducible, fixed seeds):

tests/fixtures/eval_onehot/   a hand-built one-layer seed-layout model whose class token attends to exactly
    one patch: the one that is pure red.  Image 16x16, patch 4 (grid 4x4), D = 48 (the token is the raw
    patch vector, no W_E), mean 0 / std 1.  cls_token = e_32 (a blue component), W_Q = e_32 (so q_cls = 1),
    W_K = 12.5 on the 16 red components (so k = 200 for a red patch, 0 for a black one and for the class
    token).  Scores 200 vs 0: softmax gives 1 on the red patch and exp(-200) = 0 (float32) elsewhere.
    images/*.png (black, one red 4x4 patch), masks/*.png (0/255) - expected values are worked out by hand
    in the test.
tests/fixtures/eval_top5/     a random timm-layout model with a 7-class head and config labels, image 32,
    patch 16 (grid 2x2), D 16, 2 blocks, 2 heads; images/NNNN_<class>.png (random RGB, 32x32, exactly the
    model size so preprocessing is the identity), masks/*.png (unions of 8x8 blocks), and expected.json:
    per image the class probabilities softmax(head(LN(x)[0])) and, for the views L0/mean, L1/mean and
    rollout (mean over heads, (A+I)/2 row-normalised, multiplied from the first layer), the pointing-game hit
    and energy-in-mask of the map upsampled to 32x32 with F.interpolate(bilinear, align_corners=False).
    Computed in float64 (tools/fixture_lib.py timm_forward) from the stored float32 weights.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")
LABELS = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt"]


def save_png(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(arr).save(path, optimize=False)


def onehot():
    out = os.path.join(ROOT, "eval_onehot")
    D = 48
    cls = np.zeros(D, np.float32)
    cls[32] = 1.0
    wq = np.zeros((D, 1), np.float32)
    wq[32, 0] = 1.0
    wk = np.zeros((D, 1), np.float32)
    wk[:16, 0] = 12.5
    wv = np.zeros((D, 1), np.float32)
    wv[:, 0] = 1.0
    fl.write_attnmap_json(os.path.join(out, "weights.json"),
                          {"W_Q": wq, "W_K": wk, "W_V": wv, "cls_token": cls},
                          {"num_heads": 1, "patch_size": 4, "image_size": 16,
                           "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]})

    def image(r, c):
        a = np.zeros((16, 16, 3), np.uint8)
        a[4 * r:4 * r + 4, 4 * c:4 * c + 4, 0] = 255
        return a

    def mask(y0, y1, x0, x1):
        m = np.zeros((16, 16), np.uint8)
        m[y0:y1, x0:x1] = 255
        return m

    # a: red patch (1,1), mask = that patch.  b: red patch (2,1), mask = its left half.
    # c: red patch (0,3), mask = patch (3,0), far from it.
    cases = {"a": ((1, 1), (4, 8, 4, 8)), "b": ((2, 1), (8, 12, 4, 6)), "c": ((0, 3), (12, 16, 0, 4))}
    for name, (rc, box) in cases.items():
        save_png(os.path.join(out, "images", name + ".png"), image(*rc))
        save_png(os.path.join(out, "masks", name + ".png"), mask(*box))
    # The reference forward agrees: the class row is one-hot on the red patch.
    sd = {"W_Q": wq, "W_K": wk, "W_V": wv, "cls_token": cls}
    for name, (rc, _) in cases.items():
        x = image(*rc).transpose(2, 0, 1).astype(np.float64) / 255.0
        attn, _ = fl.seed_forward(sd, x, 4)
        row = attn[0, 0, 0, 1:].numpy().astype(np.float32)
        want = np.zeros(16, np.float32)
        want[rc[0] * 4 + rc[1]] = 1.0
        assert np.array_equal(row, want), (name, row)


def top5():
    out = os.path.join(ROOT, "eval_top5")
    gen = torch.Generator().manual_seed(404)
    std = {"patch": 0.05, "pos": 0.5, "cls": 0.5, "qkv": 0.4, "proj": 0.2, "fc1": 0.2, "fc2": 0.2,
           "head": 1.0, "bias": 0.1, "ln_w_jitter": 0.1, "ln_b": 0.1}
    sd = fl.random_timm_state(gen, image_size=32, patch=16, dim=16, depth=2, mlp=32, std=std,
                              head_classes=len(LABELS))
    mean, sdv = fl.IMAGENET_MEAN, fl.IMAGENET_STD
    stored = fl.write_attnmap_json(os.path.join(out, "weights.json"), sd,
                                   {"num_heads": 2, "layer_norm_eps": 1e-6, "mean": list(mean),
                                    "std": list(sdv), "patch_size": 16, "image_size": 32, "labels": LABELS})
    rng = np.random.default_rng(404)
    names = ["0000_coat", "0001_dress", "0002_t_shirt_top", "0003_trouser"]
    expected = {"labels": LABELS, "images": {}}
    for i, name in enumerate(names):
        img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
        blocks = rng.integers(0, 2, (4, 4)).astype(np.uint8)
        blocks[i % 4, (i * 3) % 4] = 1  # never empty
        m = np.kron(blocks, np.ones((8, 8), np.uint8)) * 255
        save_png(os.path.join(out, "images", name + ".png"), img)
        save_png(os.path.join(out, "masks", name + ".png"), m)
        x = (img.astype(np.float64) / 255.0 - np.array(mean)) / np.array(sdv)
        attn, tok = fl.timm_forward(stored, x.transpose(2, 0, 1), 2, 1e-6)
        W = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in stored.items()}
        logits = tok[0] @ W["head.weight"].T + W["head.bias"]
        probs = torch.softmax(logits, -1)
        views = {}
        maps = {"L%d/mean" % l: attn[l].mean(0)[0, 1:] for l in range(attn.shape[0])}
        T = attn.shape[-1]
        R = torch.eye(T, dtype=torch.float64)
        for l in range(attn.shape[0]):
            a = (attn[l].mean(0) + torch.eye(T, dtype=torch.float64)) / 2
            a = a / a.sum(-1, keepdim=True)
            R = a @ R
        maps["rollout"] = R[0, 1:]
        mk = torch.from_numpy(m > 0).reshape(-1)
        for k, v in maps.items():
            up = F.interpolate(v.reshape(1, 1, 2, 2), size=(32, 32), mode="bilinear",
                               align_corners=False).reshape(-1)
            hit = bool(mk[int(torch.argmax(up))])
            energy = float((up * mk).sum() / up.sum())
            views[k] = {"hit": hit, "energy": energy}
        expected["images"][name + ".png"] = {
            "probs": [float(p) for p in probs],
            "predicted": int(torch.argmax(probs)),
            "mask_area_share": float(mk.double().mean()),
            "views": views,
        }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    onehot()
    top5()
    print("wrote", os.path.join(ROOT, "eval_onehot"), "and", os.path.join(ROOT, "eval_top5"))
