#!/usr/bin/python3
"""Exports bench/torch_vit.py's ViT (the benchmark's own weights, OUT of bench/make_vitb.py) to ONNX for the
ONNX Runtime peers of bench/run.sh: opset 17, dynamic batch, output the class-token map of the last block
averaged over heads, (B, N) - what attnmap_bench computes.

    /usr/bin/python3 bench/onnx/export.py WEIGHTS.pt OUT.onnx [--fused-attention]

Without the option the attention is the MatMul / Softmax graph torch.onnx writes for torch_vit.py (the last
block computes its whole (T, T) probabilities and keeps the class row). With --fused-attention (e.g.
OUT = vitb.fused.onnx) every block but the last runs its attention as ONNX Runtime's fused contrib op
com.microsoft.Attention (input (B, T, D), weights (D, 3D) = qkv.weight^T, bias (3D), attribute num_heads;
scale 1/sqrt(head dim), no mask): the op does the qkv projection, scores, softmax and probs.V in one kernel
and does not output the probabilities. The last block, whose attention output the map does not need, does
what attnmap's forward does there: LayerNorm, the full qkv projection, then only the class query's row of
softmax(q K^T / sqrt(dk)) per head (a small MatMul / Softmax), averaged over heads. Written with a
torch.autograd.Function whose symbolic emits com.microsoft::Attention, so no onnx package is needed.
"""
import math
import os
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_vit import ViT  # noqa: E402


class MapModel(torch.nn.Module):
    def __init__(self, vit):
        super().__init__()
        self.vit = vit

    def forward(self, x):
        return self.vit(x).mean(1)  # (B, H, N) -> (B, N)


class FusedAttention(torch.autograd.Function):
    """com.microsoft.Attention: x (B, T, D), w (D, 3D) columns [Q | K | V] with head h at h*dh..(h+1)*dh in
    each, b (3D) -> softmax(Q K^T / sqrt(dh)) V per head, heads concatenated, (B, T, D)."""

    @staticmethod
    def forward(ctx, x, w, b, heads):
        B, T, D = x.shape
        qkv = (x @ w + b).reshape(B, T, 3, heads, D // heads).permute(2, 0, 3, 1, 4)
        p = (qkv[0] @ qkv[1].transpose(-2, -1) * (D // heads) ** -0.5).softmax(-1)
        return (p @ qkv[2]).transpose(1, 2).reshape(B, T, D)

    @staticmethod
    def symbolic(g, x, w, b, heads):
        out = g.op("com.microsoft::Attention", x, w, b, num_heads_i=heads)
        out.setType(x.type())
        return out


class FusedMapModel(torch.nn.Module):
    """torch_vit.ViT's weights, every block's attention but the last's as com.microsoft.Attention; the output
    is the last block's class-token attention row averaged over heads, (B, N)."""

    def __init__(self, vit):
        super().__init__()
        self.vit = vit
        self.W, self.D, self.P, self.H, self.eps, self.depth = vit.sd, vit.D, vit.P, vit.heads, vit.eps, vit.depth
        # The fused op's weights layout, made once so the export stores it as a constant.
        self.qkv_t = [vit.sd["blocks.%d.attn.qkv.weight" % i].t().contiguous() for i in range(self.depth)]

    def forward(self, x):
        W, D, H = self.W, self.D, self.H
        t, B, N = self.vit.embed(x)
        T, dh = N + 1, D // H
        for i in range(self.depth):
            p = "blocks.%d." % i
            h = F.layer_norm(t, (D,), W[p + "norm1.weight"], W[p + "norm1.bias"], self.eps)
            if i == self.depth - 1:  # the map: the class query's row only, as attnmap's forward does
                qkv = F.linear(h, W[p + "attn.qkv.weight"], W[p + "attn.qkv.bias"])
                q = qkv[:, :1, :D].reshape(B, 1, H, dh).transpose(1, 2)  # (B, H, 1, dh)
                k = qkv[:, :, D:2 * D].reshape(B, T, H, dh).permute(0, 2, 3, 1)  # (B, H, dh, T)
                a = (q @ k * (dh ** -0.5)).softmax(-1)  # (B, H, 1, T)
                return a[:, :, 0, 1:].mean(1)
            o = FusedAttention.apply(h, self.qkv_t[i], W[p + "attn.qkv.bias"], H)
            t = t + F.linear(o, W[p + "attn.proj.weight"], W[p + "attn.proj.bias"])
            h = F.layer_norm(t, (D,), W[p + "norm2.weight"], W[p + "norm2.bias"], self.eps)
            h = F.gelu(F.linear(h, W[p + "mlp.fc1.weight"], W[p + "mlp.fc1.bias"]))
            t = t + F.linear(h, W[p + "mlp.fc2.weight"], W[p + "mlp.fc2.bias"])


def main():
    args = [a for a in sys.argv[1:] if a != "--fused-attention"]
    fused = len(args) != len(sys.argv) - 1
    if len(args) != 2:
        sys.exit("usage: export.py WEIGHTS.pt OUT.onnx [--fused-attention]")
    sd = torch.load(args[0])
    D = sd["patch_embed.proj.weight"].shape[0]
    P = sd["patch_embed.proj.weight"].shape[-1]
    size = P * int(math.isqrt(sd["pos_embed"].shape[1] - 1))
    vit = ViT(sd, heads=D // 64)
    model = (FusedMapModel(vit) if fused else MapModel(vit)).eval()
    x = torch.zeros(1, 3, size, size)
    # torch 1.13 has no shape inference for the contrib op (ONNX Runtime has its own) and calls g.op deprecated.
    warnings.filterwarnings("ignore", message=".*com.microsoft::Attention.*")
    warnings.filterwarnings("ignore", message=".*_graph_op.*", category=FutureWarning)
    if fused:  # the fused model against the plain one before writing anything (float32 rounding only)
        xr = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            d = (model(xr) - MapModel(vit)(xr)).abs().max().item()
        if not d <= 1e-5:
            sys.exit("export.py: the fused model's map differs from torch_vit.py's by %g" % d)
    with torch.no_grad():
        torch.onnx.export(model, (x,), args[1] + ".tmp", opset_version=17, input_names=["x"],
                          output_names=["map"], dynamic_axes={"x": {0: "batch"}, "map": {0: "batch"}},
                          custom_opsets={"com.microsoft": 1} if fused else None)
    os.replace(args[1] + ".tmp", args[1])
    print("wrote %s (D=%d, %d px%s)" % (args[1], D, size, ", com.microsoft.Attention" if fused else ""))


if __name__ == "__main__":
    main()
