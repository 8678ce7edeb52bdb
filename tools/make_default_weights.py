#!/usr/bin/python3
"""Write a small deterministic random ViT in "attnmap JSON v1" (timm layout).

    /usr/bin/python3 tools/make_default_weights.py [--out weights/default.json] [--seed 20240601]

Image 224, patch 16 (14x14 grid, T=197), D=64, 2 blocks, 4 heads (dh=16),
MLP hidden 128, LayerNorm eps 1e-6, ImageNet mean/std.

This is a PLACEHOLDER: the weights are random, so the attention maps it
produces have no semantic meaning.  They are not flat though: q/k weights are
scaled up (std --qk-std, default 0.15, instead of timm's 0.02) so the class
token attends to patches selectively, driven by the image's colours/texture.

Init: trunc-normal std 0.02 (cut at +-2 std) for proj / fc1 / fc2 / cls_token /
pos_embed, std 1/sqrt(3*16*16) for the patch embedding (so tokens are about
unit scale), --qk-std for the q and k rows of qkv, 0.05 for the v rows,
zero biases, LayerNorm weight 1 bias 0.  Fixed seed -> byte-identical output.
"""

import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

IMAGE, PATCH, DIM, DEPTH, HEADS, MLP, EPS = 224, 16, 64, 2, 4, 128, 1e-6


def build(seed, qk_std):
    gen = torch.Generator().manual_seed(seed)
    sd = fl.random_timm_state(
        gen, image_size=IMAGE, patch=PATCH, dim=DIM, depth=DEPTH, mlp=MLP,
        std={"patch": 1.0 / math.sqrt(3 * PATCH * PATCH), "pos": 0.02, "cls": 0.02,
             "qkv": 1.0, "proj": 0.02, "fc1": 0.02, "fc2": 0.02})
    # qkv was drawn with std 1 (truncated at +-2): rescale q,k and v rows separately.
    for i in range(DEPTH):
        w = sd["blocks.%d.attn.qkv.weight" % i]
        w[: 2 * DIM] *= qk_std
        w[2 * DIM:] *= 0.05
    config = {"num_heads": HEADS, "layer_norm_eps": EPS,
              "mean": list(fl.IMAGENET_MEAN), "std": list(fl.IMAGENET_STD),
              "patch_size": PATCH, "image_size": IMAGE}
    return sd, config


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "weights", "default.json"))
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--qk-std", type=float, default=0.15)
    ap.add_argument("--check-image", default=None,
                    help="optional photo: print the class-token attention grid (last block, head mean)")
    args = ap.parse_args()
    sd, config = build(args.seed, args.qk_std)
    stored = fl.write_attnmap_json(args.out, sd, config)
    n = sum(a.size for a in stored.values())
    print("wrote %s: %d tensors, %d floats, %d bytes" % (
        args.out, len(stored), n, os.path.getsize(args.out)))
    if args.check_image:
        from skimage import io, transform, color
        img = io.imread(args.check_image)
        if img.ndim == 2:
            img = color.gray2rgb(img)
        img = transform.resize(img[..., :3], (IMAGE, IMAGE), anti_aliasing=True)  # float in [0,1]
        x = (img - np.array(fl.IMAGENET_MEAN)) / np.array(fl.IMAGENET_STD)
        x = x.transpose(2, 0, 1).astype(np.float32)
        attn, _ = fl.timm_forward(stored, x, HEADS, EPS)
        g = IMAGE // PATCH
        cls = attn[-1].mean(0)[0, 1:].numpy().reshape(g, g)
        np.set_printoptions(linewidth=200, precision=0, suppress=True)
        print("last-block CLS->patch attention x1000 (head mean); max/min = %.1f, cls->cls %.3f" % (
            cls.max() / cls.min(), float(attn[-1].mean(0)[0, 0])))
        print(cls * 1000)


if __name__ == "__main__":
    main()
