#!/usr/bin/env python3
"""Localisation-friendly composites: Fashion-MNIST items pasted onto natural photos.

Each composite is a 224x224 RGB image made of
  * a 224x224 crop of a (darkened, randomly flipped, randomly scaled) scikit-image
    sample photo,
  * 0-4 small clutter fragments cut from OTHER Fashion-MNIST items,
  * one Fashion-MNIST item, scaled to 60-140 px, tinted with a random bright colour
    and alpha-blended by its own intensity.
Ground-truth mask = placed item intensity > 0.1; label = Fashion-MNIST class.

Everything is deterministic: composite number i of a set with seed S is generated
from numpy.random.default_rng([S, i]) only, so any sub-range can be regenerated.

Splits: the "train" split uses Fashion-MNIST train-*.gz, "test" uses t10k-*.gz.
Use different seeds for the two sets (defaults: train 1, test 2026).

Usage:
  make_composites.py folder OUT_DIR [--n 24] [--seed 2026] [--split test]
        writes OUT_DIR/NAME.png, OUT_DIR/masks/NAME.png (0/255), OUT_DIR/labels.csv
  make_composites.py npy OUT_PREFIX [--n 50000] [--seed 1] [--split train]
        writes OUT_PREFIX_images.npy (uint8 N,224,224,3 memmap), OUT_PREFIX_masks.npy
        (uint8 N,224,224 0/1), OUT_PREFIX_labels.npy (int64 N)
  make_composites.py pairs SRC_DIR OUT_DIR [--n 24] [--seed 2027]
        two items of different classes per composite, for class-specific pointing, made from a folder
        that `folder` wrote (its images, masks/ and labels.csv; no Fashion-MNIST needed): composite i is
        SRC composite i with the item of another SRC composite of a different class pasted where it does
        not overlap the first (its pixels under its mask, scaled 0.5-1.0 to fit). Writes
        OUT_DIR/NNNN_<class1>_<class2>.png, OUT_DIR/masks/NAME.<class>.png per item (0/255),
        OUT_DIR/masks/NAME.png (both items, for the ordinary scores) and OUT_DIR/items.csv
  make_composites.py bench            time the generator

Library use:  g = CompositeGenerator('train', seed=1); img, mask, label = g.make(i)
              imgs, masks, labels = g.batch(start, n)
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np
from PIL import Image

FMNIST_DIR = '/usr/share/datasets/fashion-mnist'
SKIMAGE_DIR = '/usr/lib/python3/dist-packages/skimage/data'
BACKGROUNDS = ['grass.png', 'gravel.png', 'brick.png', 'coffee.png', 'chelsea.png',
               'astronaut.png', 'rocket.jpg', 'hubble_deep_field.jpg',
               'motorcycle_left.png', 'retina.jpg']
LABELS = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt',
          'Sneaker', 'Bag', 'Ankle boot']
SIZE = 224


def load_fmnist(split):
    pre = 'train' if split == 'train' else 't10k'
    with gzip.open(os.path.join(FMNIST_DIR, pre + '-images-idx3-ubyte.gz'), 'rb') as f:
        imgs = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(os.path.join(FMNIST_DIR, pre + '-labels-idx1-ubyte.gz'), 'rb') as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return imgs, labels


def load_backgrounds():
    """Each background at 3 scales (short side 224, ~320, ~448/native), float32 RGB."""
    out = []
    for name in BACKGROUNDS:
        im = Image.open(os.path.join(SKIMAGE_DIR, name)).convert('RGB')
        w, h = im.size
        scales = []
        for short in (SIZE, 320, min(448, min(w, h))):
            short = max(SIZE, min(short, min(w, h)))
            f = short / min(w, h)
            nw, nh = max(SIZE, round(w * f)), max(SIZE, round(h * f))
            scales.append(np.asarray(im.resize((nw, nh), Image.BILINEAR), np.float32) / 255.0)
        out.append(scales)
    return out


def hsv_to_rgb(h, s, v):
    i = int(h * 6.0) % 6
    f = h * 6.0 - int(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    return [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]


class CompositeGenerator:
    def __init__(self, split='train', seed=1):
        self.split = split
        self.seed = int(seed)
        self.items, self.labels = load_fmnist(split)
        self.bgs = load_backgrounds()

    def _resize(self, arr28, w, h):
        return np.asarray(Image.fromarray(arr28).resize((w, h), Image.BILINEAR),
                          np.float32) / 255.0

    def make(self, i):
        rng = np.random.default_rng([self.seed, int(i)])
        # background crop
        b = rng.integers(len(self.bgs))
        self.last_background = BACKGROUNDS[b]
        bg = self.bgs[b][rng.integers(3)]
        y0 = rng.integers(bg.shape[0] - SIZE + 1)
        x0 = rng.integers(bg.shape[1] - SIZE + 1)
        img = bg[y0:y0 + SIZE, x0:x0 + SIZE].copy()
        if rng.random() < 0.5:
            img = img[:, ::-1]
        if rng.random() < 0.5:
            img = img[::-1]
        img *= rng.uniform(0.25, 0.6)  # darken
        # the item
        k = rng.integers(len(self.items))
        label = int(self.labels[k])
        # clutter fragments from other items
        for _ in range(rng.integers(0, 5)):
            k2 = rng.integers(len(self.items))
            while k2 == k:
                k2 = rng.integers(len(self.items))
            src = self.items[k2]
            fh, fw = rng.integers(7, 15), rng.integers(7, 15)
            sy, sx = rng.integers(0, 28 - fh + 1), rng.integers(0, 28 - fw + 1)
            frag = np.ascontiguousarray(src[sy:sy + fh, sx:sx + fw])
            sc = rng.uniform(1.5, 3.0)
            th, tw = max(4, round(fh * sc)), max(4, round(fw * sc))
            a = self._resize(frag, tw, th) * rng.uniform(0.5, 0.85)
            py, px = rng.integers(0, SIZE - th + 1), rng.integers(0, SIZE - tw + 1)
            col = np.array(hsv_to_rgb(rng.random(), rng.uniform(0.3, 1.0),
                                      rng.uniform(0.7, 1.0)), np.float32)
            a3 = a[..., None]
            reg = img[py:py + th, px:px + tw]
            img[py:py + th, px:px + tw] = reg * (1 - a3) + a3 * col * (0.5 + 0.5 * a3)
        s = int(rng.integers(60, 141))
        a = self._resize(self.items[k], s, s)
        if rng.random() < 0.5:
            a = a[:, ::-1]
        py, px = rng.integers(0, SIZE - s + 1), rng.integers(0, SIZE - s + 1)
        col = np.array(hsv_to_rgb(rng.random(), rng.uniform(0.3, 1.0),
                                  rng.uniform(0.75, 1.0)), np.float32)
        a3 = a[..., None]
        reg = img[py:py + s, px:px + s]
        img[py:py + s, px:px + s] = reg * (1 - a3) + a3 * col * (0.5 + 0.5 * a3)
        mask = np.zeros((SIZE, SIZE), np.uint8)
        mask[py:py + s, px:px + s] = a > 0.1
        img8 = np.clip(img * 255.0 + 0.5, 0, 255).astype(np.uint8)
        return img8, mask, label

    def batch(self, start, n):
        imgs = np.empty((n, SIZE, SIZE, 3), np.uint8)
        masks = np.empty((n, SIZE, SIZE), np.uint8)
        labels = np.empty((n,), np.int64)
        for j in range(n):
            imgs[j], masks[j], labels[j] = self.make(start + j)
        return imgs, masks, labels


def safe_name(label):
    return LABELS[label].lower().replace('/', '_').replace(' ', '_').replace('-', '')


def write_folder(out, n, seed, split):
    g = CompositeGenerator(split, seed)
    os.makedirs(os.path.join(out, 'masks'), exist_ok=True)
    rows = ['file,label_index,label,background']
    for i in range(n):
        img, mask, label = g.make(i)
        name = '%04d_%s.png' % (i, safe_name(label))
        Image.fromarray(img).save(os.path.join(out, name), optimize=True)
        Image.fromarray(mask * 255).save(os.path.join(out, 'masks', name), optimize=True)
        rows.append('%s,%d,"%s",%s' % (name, label, LABELS[label], g.last_background))
    with open(os.path.join(out, 'labels.csv'), 'w') as f:
        f.write('\n'.join(rows) + '\n')


def read_folder(src):
    """(name, image uint8 HxWx3, mask 0/1 HxW, label) of a folder written by write_folder."""
    import csv
    out = []
    with open(os.path.join(src, 'labels.csv')) as f:
        for row in csv.DictReader(f):
            img = np.asarray(Image.open(os.path.join(src, row['file'])).convert('RGB'))
            mask = (np.asarray(Image.open(os.path.join(src, 'masks', row['file'])).convert('L')) > 0)
            out.append((row['file'], img, mask.astype(np.uint8), int(row['label_index'])))
    return out


def bbox(mask):
    ys, xs = np.nonzero(mask)
    return ys.min(), ys.max() + 1, xs.min(), xs.max() + 1


def paste_item(dst, dst_mask, src, src_mask, rng):
    """Pastes src's item (its pixels under src_mask, cut to its bounding box, scaled by the largest of
    1.0, 0.9, ..., 0.5 that fits) where its box does not overlap dst_mask's box. Returns the new
    image and the pasted item's mask, or None when it cannot be placed."""
    y0, y1, x0, x1 = bbox(src_mask)
    dy0, dy1, dx0, dx1 = bbox(dst_mask)
    cut = Image.fromarray(src[y0:y1, x0:x1])
    cm = Image.fromarray(src_mask[y0:y1, x0:x1] * 255)
    for scale in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5):
        h, w = max(8, round((y1 - y0) * scale)), max(8, round((x1 - x0) * scale))
        spots = [(py, px) for py in range(0, SIZE - h + 1, 4) for px in range(0, SIZE - w + 1, 4)
                 if py + h <= dy0 or dy1 <= py or px + w <= dx0 or dx1 <= px]
        if not spots:
            continue
        py, px = spots[rng.integers(len(spots))]
        ci = np.asarray(cut.resize((w, h), Image.BILINEAR))
        mi = np.asarray(cm.resize((w, h), Image.NEAREST)) > 127
        out = dst.copy()
        region = out[py:py + h, px:px + w]
        region[mi] = ci[mi]
        m = np.zeros((SIZE, SIZE), np.uint8)
        m[py:py + h, px:px + w] = mi
        return out, m
    return None


def write_pairs(src, out, n, seed):
    items = read_folder(src)
    os.makedirs(os.path.join(out, 'masks'), exist_ok=True)
    rows = ['file,item,mask,label_index,label,source']
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        a = items[i % len(items)]
        while True:
            b = items[rng.integers(len(items))]
            if b[3] == a[3]:
                continue
            placed = paste_item(a[1], a[2], b[1], b[2], rng)
            if placed is not None:
                break
        img, mb = placed
        pair = [(a[2], a[3], a[0]), (mb, b[3], b[0])]
        stem = '%04d_%s_%s' % (i, safe_name(a[3]), safe_name(b[3]))
        Image.fromarray(img).save(os.path.join(out, stem + '.png'), optimize=True)
        for j, (m, label, source) in enumerate(pair):
            mname = '%s.%s.png' % (stem, safe_name(label))
            Image.fromarray(m * 255).save(os.path.join(out, 'masks', mname), optimize=True)
            rows.append('%s.png,%d,masks/%s,%d,"%s",%s' % (stem, j + 1, mname, label, LABELS[label], source))
        Image.fromarray((a[2] | mb) * 255).save(os.path.join(out, 'masks', stem + '.png'), optimize=True)
    with open(os.path.join(out, 'items.csv'), 'w') as f:
        f.write('\n'.join(rows) + '\n')


def write_npy(prefix, n, seed, split):
    g = CompositeGenerator(split, seed)
    imgs = np.lib.format.open_memmap(prefix + '_images.npy', 'w+', np.uint8, (n, SIZE, SIZE, 3))
    masks = np.lib.format.open_memmap(prefix + '_masks.npy', 'w+', np.uint8, (n, SIZE, SIZE))
    labels = np.empty((n,), np.int64)
    t0 = time.time()
    for i in range(n):
        imgs[i], masks[i], labels[i] = g.make(i)
        if (i + 1) % 5000 == 0:
            print('%d/%d %.1fs' % (i + 1, n, time.time() - t0), flush=True)
    imgs.flush()
    masks.flush()
    np.save(prefix + '_labels.npy', labels)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('mode', choices=['folder', 'pairs', 'npy', 'bench'])
    ap.add_argument('out', nargs='?')
    ap.add_argument('out2', nargs='?', help='pairs: OUT_DIR (the first argument is SRC_DIR)')
    ap.add_argument('--n', type=int, default=None)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--split', choices=['train', 'test'], default=None)
    a = ap.parse_args()
    if a.mode == 'bench':
        g = CompositeGenerator('train', 1)
        t0 = time.time()
        g.batch(0, 500)
        print('%.2f ms / composite' % ((time.time() - t0) / 500 * 1000))
        return
    if not a.out:
        ap.error('OUT required')
    if a.mode == 'pairs':
        if not a.out2:
            ap.error('pairs: SRC_DIR OUT_DIR required')
        write_pairs(a.out, a.out2, a.n or 24, 2027 if a.seed is None else a.seed)
    elif a.mode == 'folder':
        write_folder(a.out, a.n or 24, 2026 if a.seed is None else a.seed, a.split or 'test')
    else:
        split = a.split or 'train'
        write_npy(a.out, a.n or 50000, (1 if split == 'train' else 2026) if a.seed is None
                  else a.seed, split)


if __name__ == '__main__':
    main()
