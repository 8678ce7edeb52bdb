#!/usr/bin/env python3
"""Evaluate a ViT (training checkpoint or attnmap JSON) on held-out composites.

Reports top-1 accuracy and, for every layer x head fusion (mean/max/min and each
single head) plus attention rollout (Abnar & Zuidema 2020), the
  * pointing game (Zhang et al. 2016): is the argmax of the class-token attention map
    (14x14, bilinearly upsampled to the mask size) inside the ground-truth mask,
  * energy-in-mask: share of the upsampled map's mass inside the mask, compared with
    the uniform baseline (mask area share).
Rollout: per layer fuse heads by mean, A' = (A + I)/2, row-normalise, multiply from the
first layer up (R = A'_L ... A'_1), take the class row over the patch tokens.

The held-out set is a folder written by
  python3 tools/make_composites.py folder DIR --n 1000 --seed 2026 --split test
(DIR/*.png, DIR/masks/*.png, DIR/labels.csv).

Usage:
  eval_default.py --ckpt /work/train/ckpt.pt --data /work/train/heldout1000 [--out res.json]
  eval_default.py --weights weights/default.json --data /work/train/heldout1000
"""
import argparse
import csv
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_default import ViT, build_model, to_input  # noqa: E402


def load_model(a):
    if a.weights:
        d = json.load(open(a.weights))
        cfg = d.pop('config')
        sd = {k: torch.tensor(v, dtype=torch.float32) for k, v in d.items()}
        D = sd['cls_token'].shape[-1]
        depth = len({k.split('.')[1] for k in sd if k.startswith('blocks.')})
        hidden = sd['blocks.0.mlp.fc1.weight'].shape[0]
        m = ViT(dim=D, depth=depth, num_heads=cfg['num_heads'], mlp_ratio=hidden / D,
                num_classes=sd['head.weight'].shape[0])
        m.load_state_dict(sd, strict=True)
        return m, cfg
    ck = torch.load(a.ckpt, map_location='cpu')
    m = build_model(ck['cfg'])
    m.load_state_dict(ck['model'])
    return m, ck['cfg']


def load_data(folder, limit=None):
    rows = list(csv.DictReader(open(os.path.join(folder, 'labels.csv'))))
    if limit:
        rows = rows[:limit]
    imgs = np.stack([np.asarray(Image.open(os.path.join(folder, r['file'])).convert('RGB'))
                     for r in rows])
    masks = np.stack([np.asarray(Image.open(os.path.join(folder, 'masks', r['file'])).convert('L'))
                      > 127 for r in rows])
    labels = np.array([int(r['label_index']) for r in rows])
    return imgs, masks, labels


def maps_for(attns):
    """attns: list over layers of (B,H,N,N). Returns dict view-name -> (B,g,g) maps."""
    B, H, N, _ = attns[0].shape
    g = int(round((N - 1) ** 0.5))
    out = {}
    L = len(attns)
    for li, A in enumerate(attns):
        cls = A[:, :, 0, 1:]  # (B,H,196)
        out['L%d/mean' % li] = cls.mean(1)
        out['L%d/max' % li] = cls.max(1).values
        out['L%d/min' % li] = cls.min(1).values
        for h in range(H):
            out['L%d/h%d' % (li, h)] = cls[:, h]
    eye = torch.eye(N).unsqueeze(0)
    R = None
    for A in attns:
        Am = (A.mean(1) + eye) / 2
        Am = Am / Am.sum(-1, keepdim=True)
        R = Am if R is None else Am @ R
    out['rollout'] = R[:, 0, 1:]
    return {k: v.reshape(B, g, g) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--ckpt', default='/work/train/ckpt.pt')
    ap.add_argument('--weights', help='attnmap JSON instead of --ckpt')
    ap.add_argument('--data', default='/work/train/heldout1000')
    ap.add_argument('--limit', type=int)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--out', help='write results JSON here')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model, cfg = load_model(a)
    model.eval()
    imgs, masks, labels = load_data(a.data, a.limit)
    n = len(labels)
    correct = 0
    pg = {}
    en = {}
    area = masks.reshape(n, -1).mean(1)
    bs = 50
    with torch.no_grad():
        for i in range(0, n, bs):
            logits, attns = model(to_input(imgs[i:i + bs]), return_attn=True)
            correct += (logits.argmax(1).numpy() == labels[i:i + bs]).sum()
            mk = torch.from_numpy(masks[i:i + bs])
            Hm, Wm = mk.shape[1:]
            for k, m in maps_for(attns).items():
                up = F.interpolate(m.unsqueeze(1), size=(Hm, Wm), mode='bilinear',
                                   align_corners=False)[:, 0]
                flat = up.reshape(len(up), -1)
                am = flat.argmax(1)
                hit = mk.reshape(len(mk), -1).gather(1, am[:, None])[:, 0].float()
                e = (flat * mk.reshape(len(mk), -1)).sum(1) / flat.sum(1).clamp_min(1e-12)
                pg.setdefault(k, []).append(hit.numpy())
                en.setdefault(k, []).append(e.numpy())
    acc = correct / n
    res = {'n': n, 'top1': float(acc), 'uniform_energy_baseline': float(area.mean()),
           'views': {}}
    for k in pg:
        p = np.concatenate(pg[k])
        e = np.concatenate(en[k])
        res['views'][k] = {'pointing_game': float(p.mean()), 'energy_in_mask': float(e.mean()),
                           'energy_ratio': float(e.mean() / area.mean()),
                           'energy_ratio_per_image': float((e / area).mean())}
    print('n=%d top-1 %.4f  uniform energy baseline (mean mask area share) %.4f' % (
        n, acc, area.mean()))
    print('%-12s %8s %8s %8s' % ('view', 'pointing', 'energy', 'ratio'))
    for k, v in res['views'].items():
        if '/h' in k:
            continue
        print('%-12s %8.3f %8.3f %8.2f' % (k, v['pointing_game'], v['energy_in_mask'],
                                           v['energy_ratio']))
    best = sorted(res['views'].items(), key=lambda kv: (-kv[1]['pointing_game'],
                                                         -kv[1]['energy_in_mask']))[:8]
    print('best views (incl. single heads):')
    for k, v in best:
        print('  %-12s pointing %.3f energy %.3f ratio %.2f' % (
            k, v['pointing_game'], v['energy_in_mask'], v['energy_ratio']))
    if a.out:
        json.dump(res, open(a.out, 'w'), indent=1)


if __name__ == '__main__':
    main()
