#!/usr/bin/python3
"""The PyTorch peer of `attnmap_bench explain`: Chefer et al.'s relevance map (ICCV 2021, rules 5-6) the way
their ViT notebook computes it -- eager autograd, a hook saving each block's attention gradient, a one-hot
backward on the class logit, then R = I; R += mean_h (grad * attn)^+ @ R -- on the bench's random ViT-B/16
(plus a random 1000-class head, as attnmap_bench adds), against torch_vit.py's forward to the last block's
class-token map.

    torch_explain.py WEIGHTS.pt ITERS [ATTNMAP_CHEFER_MS]

Prints ms (best of ITERS after one warm-up) and the ratios; with ATTNMAP_CHEFER_MS (attnmap_bench's
explain_chefer_ms) also how many times faster attnmap is.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_vit import ViT, cores  # noqa: E402


def chefer(model, head_w, head_b, x):
    W, D, H = model.sd, model.D, model.heads
    t = F.conv2d(x, W["patch_embed.proj.weight"], W["patch_embed.proj.bias"], stride=model.P).flatten(2).transpose(1, 2)
    B, N, _ = t.shape
    t = torch.cat([W["cls_token"].expand(B, 1, D), t], 1) + W["pos_embed"]
    T, dh = N + 1, D // H
    attns, grads = [], []
    for i in range(model.depth):
        p = "blocks.%d." % i
        h = F.layer_norm(t, (D,), W[p + "norm1.weight"], W[p + "norm1.bias"], model.eps)
        q, k, v = F.linear(h, W[p + "attn.qkv.weight"], W[p + "attn.qkv.bias"]).reshape(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1) * (dh ** -0.5)).softmax(-1)
        attn.register_hook(grads.append)  # Chefer's save_attn_gradients (called last block first)
        attns.append(attn)
        t = t + F.linear((attn @ v).transpose(1, 2).reshape(B, T, D), W[p + "attn.proj.weight"], W[p + "attn.proj.bias"])
        h = F.layer_norm(t, (D,), W[p + "norm2.weight"], W[p + "norm2.bias"], model.eps)
        t = t + F.linear(F.gelu(F.linear(h, W[p + "mlp.fc1.weight"], W[p + "mlp.fc1.bias"])), W[p + "mlp.fc2.weight"], W[p + "mlp.fc2.bias"])
    t = F.layer_norm(t, (D,), W["norm.weight"], W["norm.bias"], model.eps)
    logits = F.linear(t[:, 0], head_w, head_b)
    index = int(logits[0].argmax())
    one_hot = torch.zeros_like(logits)
    one_hot[0, index] = 1
    model_out = (one_hot * logits).sum()
    model_out.backward()
    grads = grads[::-1]
    R = torch.eye(T)
    with torch.no_grad():
        for a, g in zip(attns, grads):
            cam = (g[0] * a[0]).clamp(min=0).mean(dim=0)
            R = R + cam @ R
    return R[0, 1:]


def best(iters, f):
    f()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    torch.set_num_threads(cores())
    path, iters = sys.argv[1], int(sys.argv[2])
    sd = torch.load(path)
    model = ViT(sd, heads=12)
    gen = torch.Generator().manual_seed(3)
    head_w = torch.randn(1000, model.D, generator=gen) * 0.02
    head_b = torch.zeros(1000)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0), requires_grad=True)

    def fwd():
        with torch.inference_mode():
            model(x.detach()).mean(1)

    f = best(iters, fwd)
    c = best(iters, lambda: chefer(model, head_w, head_b, x))
    print("torch_forward_ms %.2f\ntorch_chefer_ms %.2f\ntorch_chefer_over_forward %.2f" % (f * 1e3, c * 1e3, c / f))
    if len(sys.argv) > 3:
        print("attnmap_chefer_speedup_over_torch %.2f" % (c * 1e3 / float(sys.argv[3])))


if __name__ == "__main__":
    main()
