#!/usr/bin/python3
"""A folder of N "real photos" of mixed sizes for bench/run.sh: random crops and resizes of data/*.png|jpg
and the photos shipped with Debian's scikit-image (never committed; written to OUT).

    /usr/bin/python3 bench/make_photos.py OUT [N=240] [--seed 0]

Long sides 256..1280 px, aspect ratios from the crops, saved alternately as JPEG (quality 90) and PNG.
"""
import argparse
import glob
import os
import random

from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SK = "/usr/lib/python3/dist-packages/skimage/data"
SK_PHOTOS = ["astronaut.png", "brick.png", "camera.png", "chelsea.png", "coffee.png", "coins.png", "color.png",
             "grass.png", "gravel.png", "hubble_deep_field.jpg", "ihc.png", "moon.png", "motorcycle_left.png",
             "page.png", "retina.jpg", "rocket.jpg", "text.png"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("n", type=int, nargs="?", default=240)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    srcs = sorted(glob.glob(os.path.join(ROOT, "data", "*.png")) + glob.glob(os.path.join(ROOT, "data", "*.jpg")))
    srcs += [os.path.join(SK, f) for f in SK_PHOTOS if os.path.exists(os.path.join(SK, f))]
    imgs = [Image.open(s).convert("RGB") for s in srcs]
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    for i in range(a.n):
        im = imgs[i % len(imgs)]
        w, h = im.size
        cw, ch = int(w * rng.uniform(0.5, 1.0)), int(h * rng.uniform(0.5, 1.0))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        crop = im.crop((x, y, x + cw, y + ch))
        long_side = rng.randint(256, 1280)
        s = long_side / max(cw, ch)
        crop = crop.resize((max(16, round(cw * s)), max(16, round(ch * s))), Image.BICUBIC)
        sub = os.path.join(a.out, "set%d" % (i % 3))
        os.makedirs(sub, exist_ok=True)
        if i % 2:
            crop.save(os.path.join(sub, "photo%04d.png" % i))
        else:
            crop.save(os.path.join(sub, "photo%04d.jpg" % i), quality=90)
    print("wrote %d photos from %d sources into %s" % (a.n, len(srcs), a.out))


if __name__ == "__main__":
    main()
