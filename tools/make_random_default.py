#!/usr/bin/python3
"""A random-weight model with the bundled model's shapes (issue 28): weights/default.json with every tensor
re-drawn as timm initialises a ViT - weights and embeddings N(0, 0.02), biases 0, LayerNorm weights 1 - and
its config kept. Its attention maps are nearly flat; `attnmap eval` must say that no view beats the
baselines (docs/evaluation.md, "Does any view beat the baselines?").

    /usr/bin/python3 tools/make_random_default.py random.json [--seed 28]

(tests/test_eval_flags.cpp draws the same kind of model in C++ with std::mt19937_64; the numbers differ,
the shapes and the init rule do not.)
"""
import argparse
import json
import os

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=28)
    a = ap.parse_args()
    src = os.path.join(os.path.dirname(__file__), "..", "weights", "default.json")
    with open(src) as f:
        w = json.load(f)
    rng = np.random.default_rng(a.seed)
    out = {}
    for name, t in w.items():
        if name == "config":
            out[name] = t
            continue
        shape = np.asarray(t).shape
        if name.endswith(".bias"):
            v = np.zeros(shape)
        elif "norm" in name and name.endswith(".weight"):
            v = np.ones(shape)
        else:
            v = rng.normal(0.0, 0.02, shape)
        out[name] = v.astype(np.float32).tolist()
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
