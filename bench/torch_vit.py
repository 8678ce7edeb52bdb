#!/usr/bin/python3
"""The PyTorch peers of bench/run.sh: a timm-style ViT in plain torch (Debian python3-torch; timm is not
packaged), written the way a researcher would to get class-token attention maps.

    torch_vit.py forward WEIGHTS.pt BATCH ITERS     ViT-B forward + class-token map, ms per image
    torch_vit.py folder  WEIGHTS IN OUT [--layer L] [--head mean|max|min|I] [--save-raw]
                                                    the end-to-end job: PIL decode + bicubic resize
                                                    (squash), forward, map, matplotlib colormap, blend,
                                                    PIL PNG save

folder's WEIGHTS: attnmap JSON (the bundled weights/default.json; heads, mean/std from its config) or a
PyTorch state dict .pt (bench/make_vitb.py's ViT-B: D/64 heads, ImageNet mean/std). The map: block --layer
(default -1, the last; negative counts from the end), heads fused by --head (default mean) - what attnmap
renders for a model without a config (pass the same --layer / --head to attnmap to draw the same map; the
bundled model's config draws block 1, head 3 by default). --save-raw also writes OUT/.../NAME.npy, the
(g, g) float32 map before scaling (as attnmap render --save-raw).

Both use torch.set_num_threads(number of usable cores) and torch.inference_mode(). The model runs up to
the drawn block's attention (as attnmap does; the rest of that block does not change the map).
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


class ViT(torch.nn.Module):
    def __init__(self, sd, heads, eps=1e-6):
        super().__init__()
        self.sd = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in sd.items()}
        self.heads, self.eps = heads, eps
        self.depth = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
        w = self.sd["patch_embed.proj.weight"]
        self.D, self.P = w.shape[0], w.shape[-1]

    def embed(self, x):  # x (B, 3, S, S) -> tokens (B, 1 + N, D) with positions, and B, N
        W, D = self.sd, self.D
        t = F.conv2d(x, W["patch_embed.proj.weight"], W["patch_embed.proj.bias"], stride=self.P)
        t = t.flatten(2).transpose(1, 2)
        B, N, _ = t.shape
        return torch.cat([W["cls_token"].expand(B, 1, D), t], 1) + W["pos_embed"], B, N

    def forward(self, x, layer=-1):  # x (B, 3, S, S) -> class-token attention of block `layer` (B, H, N)
        W, D, H = self.sd, self.D, self.heads
        t, B, N = self.embed(x)
        T, dh = N + 1, D // H
        layer = layer % self.depth
        for i in range(self.depth):
            p = "blocks.%d." % i
            h = F.layer_norm(t, (D,), W[p + "norm1.weight"], W[p + "norm1.bias"], self.eps)
            qkv = F.linear(h, W[p + "attn.qkv.weight"], W[p + "attn.qkv.bias"])
            q, k, v = qkv.reshape(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)
            attn = (q @ k.transpose(-2, -1) * (dh ** -0.5)).softmax(-1)  # (B, H, T, T)
            if i == layer:
                return attn[:, :, 0, 1:]
            o = (attn @ v).transpose(1, 2).reshape(B, T, D)
            t = t + F.linear(o, W[p + "attn.proj.weight"], W[p + "attn.proj.bias"])
            h = F.layer_norm(t, (D,), W[p + "norm2.weight"], W[p + "norm2.bias"], self.eps)
            h = F.gelu(F.linear(h, W[p + "mlp.fc1.weight"], W[p + "mlp.fc1.bias"]))
            t = t + F.linear(h, W[p + "mlp.fc2.weight"], W[p + "mlp.fc2.bias"])


def cores():
    return len(os.sched_getaffinity(0))


def forward(path, batch, iters):
    sd = torch.load(path)
    model = ViT(sd, heads=sd["patch_embed.proj.weight"].shape[0] // 64)  # D/64 heads, as make_vitb.py
    g = int(math.isqrt(sd["pos_embed"].shape[1] - 1))
    s = g * sd["patch_embed.proj.weight"].shape[-1]
    x = torch.randn(batch, 3, s, s, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        model(x).mean(1).reshape(batch, g, g)  # warm-up
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            model(x).mean(1).reshape(batch, g, g)
            times.append(time.perf_counter() - t0)
    # Best of `iters` (as for attnmap and the sgemm peak), and the mean.
    print("torch_forward_ms_per_image %.2f" % (min(times) / batch * 1e3))
    print("torch_forward_median_ms_per_image %.2f" % (sorted(times)[len(times) // 2] / batch * 1e3))
    print("torch_forward_mean_ms_per_image %.2f" % (sum(times) / iters / batch * 1e3))


def fuse(attn, head):  # (B, H, N) -> (B, N)
    if head == "mean":
        return attn.mean(1)
    if head in ("max", "min"):
        return attn.amax(1) if head == "max" else attn.amin(1)
    return attn[:, int(head)]


def folder(weights, src, out, layer=-1, head="mean", save_raw=False):
    from PIL import Image
    from matplotlib import cm
    if weights.endswith(".json"):
        with open(weights) as f:
            raw = json.load(f)
        cfg = raw.pop("config", {})
        model = ViT({k: np.asarray(v, dtype=np.float32) for k, v in raw.items()}, heads=cfg.get("num_heads", 4),
                    eps=cfg.get("layer_norm_eps", 1e-6))
    else:  # a PyTorch state dict (bench/make_vitb.py): D/64 heads, ImageNet mean/std
        sd = torch.load(weights)
        cfg = {}
        model = ViT(sd, heads=sd["patch_embed.proj.weight"].shape[0] // 64)
    mean = torch.tensor(cfg.get("mean", [0.485, 0.456, 0.406])).view(3, 1, 1)
    std = torch.tensor(cfg.get("std", [0.229, 0.224, 0.225])).view(3, 1, 1)
    g = int(math.isqrt(model.sd["pos_embed"].shape[1] - 1))
    size = g * model.P
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs
                   if f.lower().endswith((".png", ".jpg", ".jpeg")))
    viridis = cm.get_cmap("viridis")
    t0 = time.perf_counter()
    with torch.inference_mode():
        for path in files:
            photo = Image.open(path).convert("RGB")
            x = torch.from_numpy(np.asarray(photo.resize((size, size), Image.BICUBIC), dtype=np.float32) / 255.0)
            x = ((x.permute(2, 0, 1) - mean) / std).unsqueeze(0)
            m = fuse(model(x, layer), head).reshape(1, 1, g, g)
            rel = os.path.relpath(path, src)
            dst = os.path.join(out, os.path.splitext(rel)[0] + ".png")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if save_raw:
                np.save(dst[:-4] + ".npy", m[0, 0].numpy().astype(np.float32))
            m = (m - m.min()) / (m.max() - m.min() + 1e-12)
            up = F.interpolate(m, size=(photo.height, photo.width), mode="bilinear", align_corners=False)[0, 0]
            heat = viridis(up.numpy())[..., :3] * 255.0
            blended = 0.5 * np.asarray(photo, dtype=np.float32) + 0.5 * heat
            Image.fromarray(np.clip(blended + 0.5, 0, 255).astype(np.uint8)).save(dst)
    s = time.perf_counter() - t0
    print("python_folder_images %d\npython_folder_seconds %.2f" % (len(files), s))


if __name__ == "__main__":
    torch.set_num_threads(cores())
    if sys.argv[1] == "forward":
        forward(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "folder":
        import argparse
        ap = argparse.ArgumentParser(prog="torch_vit.py folder")
        ap.add_argument("weights")
        ap.add_argument("src")
        ap.add_argument("out")
        ap.add_argument("--layer", type=int, default=-1, help="encoder block, negative from the end (default -1)")
        ap.add_argument("--head", default="mean", help="mean | max | min | a head index (default mean)")
        ap.add_argument("--save-raw", action="store_true", help="also write NAME.npy, the map before scaling")
        a = ap.parse_args(sys.argv[2:])
        folder(a.weights, a.src, a.out, a.layer, a.head, a.save_raw)
