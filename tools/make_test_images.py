#!/usr/bin/python3
"""Writes small test images in the PNG colour types stb_image must turn into RGB (tests/images/basic/).

    /usr/bin/python3 tools/make_test_images.py

Deterministic; the outputs are committed so CI needs no Python.
"""
import os

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "images", "basic")


def main():
    os.makedirs(OUT, exist_ok=True)
    yy, xx = np.mgrid[0:60, 0:90]
    grey = ((xx * 2 + yy) % 256).astype(np.uint8)
    Image.fromarray(grey, "L").save(os.path.join(OUT, "grey.png"))
    Image.fromarray(np.stack([grey, 255 - grey], -1), "LA").save(os.path.join(OUT, "grey_alpha.png"))
    rgba = np.stack([grey, 255 - grey, (yy * 4 % 256).astype(np.uint8), np.full_like(grey, 128)], -1)
    Image.fromarray(rgba, "RGBA").save(os.path.join(OUT, "rgba.png"))
    rgb = Image.fromarray(rgba[..., :3], "RGB")
    rgb.quantize(colors=16).save(os.path.join(OUT, "palette.png"))
    grey16 = (xx * 700 + yy * 10).astype(np.uint16)
    Image.fromarray(grey16.astype(np.int32), "I").convert("I;16").save(os.path.join(OUT, "grey16.png"))
    for name in sorted(os.listdir(OUT)):
        im = Image.open(os.path.join(OUT, name))
        print(name, im.mode, im.size)


if __name__ == "__main__":
    main()
