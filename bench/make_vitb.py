#!/usr/bin/python3
"""Random ViT-B/16 (D=768, 12 blocks, 12 heads, MLP 3072, 224 px) for bench/run.sh, written three times
with identical values: safetensors (OUT.safetensors, F32; the forward benchmarks load it), attnmap JSON v1
(OUT.json, values rounded to 5 decimals to keep the text ~0.7 GB; the JSON loading benchmark) and a
PyTorch state dict (OUT.pt, the PyTorch and ONNX Runtime peers). Heads: D/64, attnmap's default for
safetensors. --dim 384 gives ViT-S/16 (6 heads, MLP 1536); --size 448 a 448-px model (785 tokens).

    /usr/bin/python3 bench/make_vitb.py OUT_PREFIX [--seed 0] [--dim 768] [--size 224] [--no-json]

Init: normal std 0.02 (timm), q/k rows std 0.06 so the attention is not flat; zero biases; LayerNorm 1/0.
"""
import argparse
import json
import os

import numpy as np
import torch

DEPTH, P = 12, 16
DIM, SIZE = [768], [224]  # set by --dim / --size


def state(seed):
    g = np.random.default_rng(seed)
    D, MLP, S = DIM[0], 4 * DIM[0], SIZE[0]
    n = (S // P) ** 2

    def r(*shape, std=0.02):
        return np.round(g.standard_normal(shape) * std, 5).astype(np.float32)

    sd = {"cls_token": r(1, 1, D), "pos_embed": r(1, 1 + n, D),
          "patch_embed.proj.weight": r(D, 3, P, P, std=1.0 / np.sqrt(3 * P * P)),
          "patch_embed.proj.bias": np.zeros(D, np.float32)}
    for i in range(DEPTH):
        p = "blocks.%d." % i
        qkv = r(3 * D, D)
        qkv[: 2 * D] = np.round(qkv[: 2 * D].astype(np.float64) * 3, 5).astype(np.float32)
        sd.update({p + "norm1.weight": np.ones(D, np.float32), p + "norm1.bias": np.zeros(D, np.float32),
                   p + "attn.qkv.weight": qkv, p + "attn.qkv.bias": np.zeros(3 * D, np.float32),
                   p + "attn.proj.weight": r(D, D), p + "attn.proj.bias": np.zeros(D, np.float32),
                   p + "norm2.weight": np.ones(D, np.float32), p + "norm2.bias": np.zeros(D, np.float32),
                   p + "mlp.fc1.weight": r(MLP, D), p + "mlp.fc1.bias": np.zeros(MLP, np.float32),
                   p + "mlp.fc2.weight": r(D, MLP), p + "mlp.fc2.bias": np.zeros(D, np.float32)})
    sd["norm.weight"] = np.ones(D, np.float32)
    sd["norm.bias"] = np.zeros(D, np.float32)
    return sd


def text(a):
    # Values are float32(d) for 5-decimal numbers d: the text is d ("-0.01234"), and parsing d to float32
    # gives exactly the stored value.
    if a.ndim == 1:
        return "[" + ",".join(map(repr, np.round(a.astype(np.float64), 5).tolist())) + "]"
    return "[" + ",".join(text(s) for s in a) + "]"


def write_safetensors(path, sd):
    # Format: u64 little-endian header length, JSON header, raw little-endian tensors in order.
    header, off = {}, 0
    for k, v in sd.items():
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + v.nbytes]}
        off += v.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for v in sd.values():
            f.write(np.ascontiguousarray(v, dtype="<f4").tobytes())
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prefix")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only-safetensors", action="store_true", help="the .json and .pt exist already")
    ap.add_argument("--no-json", action="store_true", help="safetensors and .pt only")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--size", type=int, default=224)
    args = ap.parse_args()
    DIM[0], SIZE[0] = args.dim, args.size
    sd = state(args.seed)
    write_safetensors(args.prefix + ".safetensors", sd)
    if args.only_safetensors:
        return
    if args.no_json:
        torch.save({k: torch.from_numpy(v) for k, v in sd.items()}, args.prefix + ".pt")
        return
    with open(args.prefix + ".json.tmp", "w") as f:
        f.write("{")
        for k, v in sd.items():
            f.write(json.dumps(k) + ":" + text(v) + ",")
        f.write('"config":' + json.dumps({"num_heads": DIM[0] // 64, "layer_norm_eps": 1e-6}) + "}\n")
    os.replace(args.prefix + ".json.tmp", args.prefix + ".json")
    torch.save({k: torch.from_numpy(v) for k, v in sd.items()}, args.prefix + ".pt")
    print("wrote %s.json (%.0f MB) and %s.pt" % (args.prefix, os.path.getsize(args.prefix + ".json") / 1e6, args.prefix))


if __name__ == "__main__":
    main()
