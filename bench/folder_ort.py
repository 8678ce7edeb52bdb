#!/usr/bin/python3
"""The ONNX Runtime peer of bench/run.sh's ViT-B/16 folder job, written the usual way: PIL decode (convert
RGB), PIL bicubic resize to the model size (squash, as torch_vit.py's folder mode and attnmap's default),
numpy normalisation (ImageNet mean/std), an ONNX Runtime session at full threads, the class-token map of the
last block averaged over heads, min-max scaled, PIL bilinear upsample to the photo (pixel-centre aligned,
as F.interpolate(align_corners=False)), matplotlib viridis, blended at alpha 0.5, PIL PNG save into OUT.

    /usr/bin/python3 bench/folder_ort.py MODEL.onnx IN OUT [--batch N] [--threads T] [--save-raw]

MODEL.onnx: bench/onnx/export.py's model (input x (B, 3, S, S), output map (B, N), already the mean over
heads; a per-head (B, H, N) output is averaged here). Python's onnxruntime is not installable on the bench
machine, so the session lives in ONE node co-process, bench/onnx/ort_server.js (onnxruntime-node from
bench/onnx/node_modules), spawned at start and fed over pipes; its intra-op threads default to the usable
cores. Images go one at a time (batch 1, as a usual script does) unless --batch N. --save-raw also writes
OUT/.../NAME.npy, the (g, g) float32 map before scaling (as attnmap render --save-raw). Prints
ort_folder_images and ort_folder_seconds (the loop only, session start-up excluded, as torch_vit.py).
"""
import argparse
import math
import os
import struct
import subprocess
import time

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


class OrtSession:
    """ONNX Runtime in a node co-process (bench/onnx/ort_server.js): run(x (B, 3, S, S) float32) -> map."""

    def __init__(self, model, threads=None):
        cmd = ["node", os.path.join(HERE, "onnx", "ort_server.js"), model] + ([str(threads)] if threads else [])
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if self._read(8) != b"ORTREADY":
            raise RuntimeError("ort_server.js did not start (see its message above)")

    def _read(self, n):
        b = self.p.stdout.read(n)
        if len(b) != n:
            raise RuntimeError("ort_server.js: short read (%d of %d bytes); it stopped" % (len(b), n))
        return b

    def run(self, x):
        x = np.ascontiguousarray(x, dtype="<f4")
        self.p.stdin.write(struct.pack("<II", x.shape[0], x.shape[2]))
        self.p.stdin.write(memoryview(x).cast("B"))
        self.p.stdin.flush()
        ndim = struct.unpack("<I", self._read(4))[0]
        dims = struct.unpack("<%dI" % ndim, self._read(4 * ndim))
        return np.frombuffer(self._read(4 * math.prod(dims)), "<f4").reshape(dims)

    def close(self):
        self.p.stdin.write(struct.pack("<II", 0, 0))
        self.p.stdin.close()
        self.p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=1, help="images per ONNX Runtime call (default 1)")
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads (default: the usable cores)")
    ap.add_argument("--size", type=int, default=224, help="model input size (default 224)")
    ap.add_argument("--save-raw", action="store_true", help="also write NAME.npy, the map before scaling")
    a = ap.parse_args()
    import matplotlib
    viridis = matplotlib.colormaps["viridis"]
    session = OrtSession(a.model, a.threads)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(a.src) for f in fs
                   if f.lower().endswith((".png", ".jpg", ".jpeg")))
    S = a.size
    t0 = time.perf_counter()
    for i in range(0, len(files), a.batch):
        paths = files[i:i + a.batch]
        photos = [Image.open(p).convert("RGB") for p in paths]
        x = np.stack([((np.asarray(ph.resize((S, S), Image.BICUBIC), dtype=np.float32) / 255.0 - MEAN) / STD)
                      .transpose(2, 0, 1) for ph in photos])
        maps = session.run(x)
        if maps.ndim == 3:  # (B, H, N): one map per head
            maps = maps.mean(1)
        g = int(math.isqrt(maps.shape[1]))
        for path, photo, m in zip(paths, photos, maps.reshape(-1, g, g)):
            rel = os.path.relpath(path, a.src)
            dst = os.path.join(a.out, os.path.splitext(rel)[0])
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if a.save_raw:
                np.save(dst + ".npy", m.astype(np.float32))
            m = (m - m.min()) / (m.max() - m.min() + 1e-12)
            up = np.asarray(Image.fromarray(m.astype(np.float32), "F").resize(photo.size, Image.BILINEAR))
            heat = viridis(up)[..., :3] * 255.0
            blended = 0.5 * np.asarray(photo, dtype=np.float32) + 0.5 * heat
            Image.fromarray(np.clip(blended + 0.5, 0, 255).astype(np.uint8)).save(dst + ".png")
    s = time.perf_counter() - t0
    session.close()
    print("ort_folder_images %d\nort_folder_seconds %.2f" % (len(files), s))


if __name__ == "__main__":
    main()
