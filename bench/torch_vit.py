#!/usr/bin/python3
"""The PyTorch peers of bench/run.sh: a timm-style ViT in plain torch (Debian python3-torch; timm is not
packaged), written the way a researcher would to get class-token attention maps.

    torch_vit.py forward WEIGHTS.pt BATCH ITERS     ViT-B forward + class-token map, ms per image
    torch_vit.py folder  WEIGHTS.json IN OUT        the end-to-end job: PIL decode + resize, forward,
                                                     map, matplotlib colormap, blend, PIL PNG save

Both use torch.set_num_threads(number of usable cores) and torch.inference_mode(). The model runs up to
the last block's attention (as attnmap does; the rest of that block does not change the map).
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

    def forward(self, x):  # x (B, 3, S, S) -> class-token attention of the last block (B, H, N)
        W, D, H = self.sd, self.D, self.heads
        t = F.conv2d(x, W["patch_embed.proj.weight"], W["patch_embed.proj.bias"], stride=self.P)
        t = t.flatten(2).transpose(1, 2)
        B, N, _ = t.shape
        t = torch.cat([W["cls_token"].expand(B, 1, D), t], 1) + W["pos_embed"]
        T, dh = N + 1, D // H
        for i in range(self.depth):
            p = "blocks.%d." % i
            h = F.layer_norm(t, (D,), W[p + "norm1.weight"], W[p + "norm1.bias"], self.eps)
            qkv = F.linear(h, W[p + "attn.qkv.weight"], W[p + "attn.qkv.bias"])
            q, k, v = qkv.reshape(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)
            attn = (q @ k.transpose(-2, -1) * (dh ** -0.5)).softmax(-1)  # (B, H, T, T)
            if i == self.depth - 1:
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


def folder(weights, src, out):
    from PIL import Image
    from matplotlib import cm
    with open(weights) as f:
        raw = json.load(f)
    cfg = raw.pop("config", {})
    model = ViT({k: np.asarray(v, dtype=np.float32) for k, v in raw.items()}, heads=cfg.get("num_heads", 4))
    mean = torch.tensor(cfg.get("mean", [0.485, 0.456, 0.406])).view(3, 1, 1)
    std = torch.tensor(cfg.get("std", [0.229, 0.224, 0.225])).view(3, 1, 1)
    g = int(math.isqrt(model.sd["pos_embed"].shape[1] - 1))
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs
                   if f.lower().endswith((".png", ".jpg", ".jpeg")))
    viridis = cm.get_cmap("viridis")
    t0 = time.perf_counter()
    with torch.inference_mode():
        for path in files:
            photo = Image.open(path).convert("RGB")
            x = torch.from_numpy(np.asarray(photo.resize((224, 224), Image.BICUBIC), dtype=np.float32) / 255.0)
            x = ((x.permute(2, 0, 1) - mean) / std).unsqueeze(0)
            m = model(x).mean(1).reshape(1, 1, g, g)
            m = (m - m.min()) / (m.max() - m.min() + 1e-12)
            up = F.interpolate(m, size=(photo.height, photo.width), mode="bilinear", align_corners=False)[0, 0]
            heat = viridis(up.numpy())[..., :3] * 255.0
            blended = 0.5 * np.asarray(photo, dtype=np.float32) + 0.5 * heat
            rel = os.path.relpath(path, src)
            dst = os.path.join(out, os.path.splitext(rel)[0] + ".png")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            Image.fromarray(np.clip(blended + 0.5, 0, 255).astype(np.uint8)).save(dst)
    s = time.perf_counter() - t0
    print("python_folder_images %d\npython_folder_seconds %.2f" % (len(files), s))


if __name__ == "__main__":
    torch.set_num_threads(cores())
    if sys.argv[1] == "forward":
        forward(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "folder":
        folder(sys.argv[2], sys.argv[3], sys.argv[4])
