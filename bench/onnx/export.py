#!/usr/bin/python3
"""Exports bench/torch_vit.py's ViT (the benchmark's own weights, OUT of bench/make_vitb.py) to ONNX for the
ONNX Runtime peer of bench/run.sh: opset 17, dynamic batch, output the class-token map of the last block
averaged over heads, (B, N) - what attnmap_bench computes.

    /usr/bin/python3 bench/onnx/export.py WEIGHTS.pt OUT.onnx
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_vit import ViT  # noqa: E402


class MapModel(torch.nn.Module):
    def __init__(self, vit):
        super().__init__()
        self.vit = vit

    def forward(self, x):
        return self.vit(x).mean(1)  # (B, H, N) -> (B, N)


def main():
    sd = torch.load(sys.argv[1])
    D = sd["patch_embed.proj.weight"].shape[0]
    P = sd["patch_embed.proj.weight"].shape[-1]
    size = P * int(math.isqrt(sd["pos_embed"].shape[1] - 1))
    model = MapModel(ViT(sd, heads=D // 64)).eval()
    x = torch.zeros(1, 3, size, size)
    with torch.no_grad():
        torch.onnx.export(model, (x,), sys.argv[2] + ".tmp", opset_version=17, input_names=["x"],
                          output_names=["map"], dynamic_axes={"x": {0: "batch"}, "map": {0: "batch"}})
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])
    print("wrote %s (D=%d, %d px)" % (sys.argv[2], D, size))


if __name__ == "__main__":
    main()
