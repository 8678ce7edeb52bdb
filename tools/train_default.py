#!/usr/bin/env python3
"""Train attnmap's default model: a small timm-layout ViT on Fashion-MNIST composites.

Model: timm VisionTransformer layout (patch 16, 224x224, class token, learned
pos_embed (1,197,D), pre-norm blocks with LayerNorm eps 1e-6, fused qkv with bias,
exact-erf GELU MLP, final norm, head on the class token).  state_dict keys are
exactly timm's, so tools/export_weights.py can write them out unchanged.

Data: composites generated on the fly by tools/make_composites.py (train split of
Fashion-MNIST, seed --data-seed); composite index = step*batch + j, so a resumed run
sees exactly the same data stream.  A background thread prefetches batches.

Progressive resizing (optional, --lowres-frac): the first fraction of the steps is
run at 112x112 (7x7 patches, pos_embed average-pooled 2x2 from the 14x14 grid that
is the only stored parameter), the rest at the full 224x224.

Schedule: AdamW, linear warm-up then cosine decay to 0 over --steps.
Checkpoints to --ckpt every --ckpt-minutes and at the end; restarting the same
command resumes from the checkpoint.

Example (the default-model run):
  nice -n 10 nohup /usr/bin/python3 tools/train_default.py --steps 3000 \
      > /work/train/train.log 2>&1 &
"""
import argparse
import math
import os
import sys
import multiprocessing as mp
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_composites import CompositeGenerator, LABELS  # noqa: E402

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, return_attn=False):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        return (x, attn) if return_attn else x


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()  # exact erf GELU
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x, return_attn=False):
        if return_attn:
            y, a = self.attn(self.norm1(x), True)
            x = x + y
            return x + self.mlp(self.norm2(x)), a
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, dim, patch=16):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class ViT(nn.Module):
    def __init__(self, dim=128, depth=4, num_heads=4, mlp_ratio=2.0, num_classes=10,
                 img_size=224, patch=16):
        super().__init__()
        self.grid = img_size // patch
        self.patch_embed = PatchEmbed(dim, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, self.grid * self.grid + 1, dim) * .02)
        self.blocks = nn.ModuleList([Block(dim, num_heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)
        nn.init.trunc_normal_(self.pos_embed, std=.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def pos(self, gh, gw):
        if gh == self.grid and gw == self.grid:
            return self.pos_embed
        cls_pos, p = self.pos_embed[:, :1], self.pos_embed[:, 1:]
        D = p.shape[-1]
        p = p.reshape(1, self.grid, self.grid, D).permute(0, 3, 1, 2)
        if self.grid % gh == 0 and self.grid % gw == 0:
            p = F.avg_pool2d(p, (self.grid // gh, self.grid // gw))
        else:
            p = F.interpolate(p, size=(gh, gw), mode='bilinear', align_corners=False)
        return torch.cat([cls_pos, p.permute(0, 2, 3, 1).reshape(1, gh * gw, D)], 1)

    def forward(self, x, return_attn=False):
        gh, gw = x.shape[2] // 16, x.shape[3] // 16
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos(gh, gw)
        attns = []
        for blk in self.blocks:
            if return_attn:
                x, a = blk(x, True)
                attns.append(a)
            else:
                x = blk(x)
        x = self.norm(x)
        logits = self.head(x[:, 0])
        return (logits, attns) if return_attn else logits


def to_input(imgs_u8):
    """uint8 (N,H,W,3) numpy -> normalised float tensor (N,3,H,W)."""
    x = torch.from_numpy(imgs_u8).permute(0, 3, 1, 2).float().div_(255.0)
    m = torch.tensor(MEAN).view(1, 3, 1, 1)
    s = torch.tensor(STD).view(1, 3, 1, 1)
    return (x - m) / s


def build_model(cfg):
    return ViT(dim=cfg['dim'], depth=cfg['depth'], num_heads=cfg['heads'],
               mlp_ratio=cfg['mlp_ratio'])


def lr_at(step, total, warmup, base):
    if step < warmup:
        return base * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


class Prefetcher:
    """Generates the batches in a separate process (composite generation is pure numpy/PIL
    and would otherwise hold the GIL against the training loop), in step order, so the
    data stream is the same whatever the speed of either side."""

    def __init__(self, gen, batch, start_step, total, depth=4, offset=0):
        ctx = mp.get_context('fork')
        self.q = ctx.Queue(maxsize=depth)
        self.gen, self.batch, self.offset = gen, batch, offset
        self.p = ctx.Process(target=self.run, args=(start_step, total), daemon=True)
        self.p.start()

    def run(self, s0, total):
        torch.set_num_threads(1)
        for s in range(s0, total):
            imgs, _, labels = self.gen.batch(self.offset + s * self.batch, self.batch)
            self.q.put((s, imgs, labels))

    def get(self):
        return self.q.get()


_POOL_GEN = {}


def _pool_chunk(args):
    split, seed, lo, hi = args
    g = _POOL_GEN.get((split, seed))
    if g is None:
        g = _POOL_GEN[(split, seed)] = CompositeGenerator(split, seed)
    imgs, _, labels = g.batch(lo, hi - lo)
    # 2x2 average pool in integers, rounded: (N,224,224,3) -> (N,112,112,3)
    a = imgs.reshape(hi - lo, 112, 2, 112, 2, 3)
    s = (a[:, :, 0, :, 0].astype(np.uint16) + a[:, :, 1, :, 0] + a[:, :, 0, :, 1]
         + a[:, :, 1, :, 1])
    return lo, ((s + 2) // 4).astype(np.uint8), labels


def build_pool(n, seed, cache, workers=2, chunk=2000):
    """Composites 0..n-1 of the train split at 112x112 (2x2-pooled), cached in `cache`."""
    if cache and os.path.exists(cache + '_images.npy'):
        imgs = np.load(cache + '_images.npy')
        labels = np.load(cache + '_labels.npy')
        if len(labels) == n:
            print('pool: %d composites loaded from %s' % (n, cache), flush=True)
            return imgs, labels
    t0 = time.time()
    imgs = np.empty((n, 112, 112, 3), np.uint8)
    labels = np.empty((n,), np.int64)
    jobs = [('train', seed, lo, min(n, lo + chunk)) for lo in range(0, n, chunk)]
    with mp.get_context('fork').Pool(workers) as pool:
        for lo, im, lb in pool.imap_unordered(_pool_chunk, jobs):
            imgs[lo:lo + len(lb)] = im
            labels[lo:lo + len(lb)] = lb
    print('pool: %d composites generated in %.0f s' % (n, time.time() - t0), flush=True)
    if cache:
        np.save(cache + '_images.npy.tmp.npy', imgs)
        np.save(cache + '_labels.npy', labels)
        os.replace(cache + '_images.npy.tmp.npy', cache + '_images.npy')
    return imgs, labels


def pool_batch(pool_imgs, pool_labels, step, batch, seed):
    """Batch `step` of the low-resolution phase: epoch-wise seeded permutations of the pool
    and a seeded horizontal flip per image, so the stream depends on the step only."""
    n = len(pool_labels)
    per_epoch = n // batch
    epoch, pos = divmod(step, per_epoch)
    perm = np.random.default_rng([seed, 991, epoch]).permutation(n)
    idx = np.sort(perm[pos * batch:(pos + 1) * batch])
    imgs = pool_imgs[idx]
    flip = np.random.default_rng([seed, 992, step]).random(batch) < 0.5
    imgs[flip] = imgs[flip][:, :, ::-1]
    return imgs, pool_labels[idx]


@torch.no_grad()
def quick_eval(model, test_imgs, test_labels, bs=100, res=224):
    model.eval()
    correct = 0
    for i in range(0, len(test_imgs), bs):
        x = to_input(test_imgs[i:i + bs])
        if res == 112:
            x = F.avg_pool2d(x, 2)
        logits = model(x)
        correct += (logits.argmax(1).numpy() == test_labels[i:i + bs]).sum()
    model.train()
    return correct / len(test_imgs)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--dim', type=int, default=128)
    ap.add_argument('--depth', type=int, default=4)
    ap.add_argument('--heads', type=int, default=4)
    ap.add_argument('--mlp-ratio', type=float, default=2.0)
    ap.add_argument('--batch', type=int, default=96)
    ap.add_argument('--lr', type=float, default=1e-3)
    ap.add_argument('--wd', type=float, default=0.05)
    ap.add_argument('--steps', type=int, default=3000)
    ap.add_argument('--warmup', type=int, default=150)
    ap.add_argument('--lowres-frac', type=float, default=0.0,
                    help='fraction of steps trained at 112x112 (default 0)')
    ap.add_argument('--budget-min', type=float, default=0,
                    help='time-budget mode: the cosine schedule and the 112->224 switch '
                    'follow training wall-clock (progress = elapsed/budget, switch at '
                    '--lowres-frac of it) and training stops when the budget is used; '
                    '--steps is then only an upper bound. Every step\'s lr and resolution '
                    'are appended to --schedule-log so the run can be replayed.')
    ap.add_argument('--schedule-log', default='/work/train/schedule.tsv')
    ap.add_argument('--replay', help='schedule.tsv of an earlier run: use its per-step lr '
                    'and resolution (and its number of steps) instead of computing them')
    ap.add_argument('--pool', type=int, default=0,
                    help='low-resolution phase trains on a fixed pool of this many train '
                    'composites (generated once, 112x112, epochs with seeded shuffles and '
                    'flips) instead of fresh ones; the 224 phase then streams fresh '
                    'composites numbered from POOL on (default 0: always stream)')
    ap.add_argument('--pool-cache', default='',
                    help='PREFIX: keep the pool in PREFIX_images.npy / PREFIX_labels.npy')
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--data-seed', type=int, default=1)
    ap.add_argument('--ckpt', default='/work/train/ckpt.pt')
    ap.add_argument('--ckpt-minutes', type=float, default=3.0)
    ap.add_argument('--log-every', type=int, default=10)
    ap.add_argument('--eval-every', type=int, default=250)
    ap.add_argument('--eval-n', type=int, default=300)
    ap.add_argument('--bench', type=float, default=0,
                    help='benchmark: run this many seconds, report images/s, no checkpoint')
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    cfg = dict(dim=a.dim, depth=a.depth, heads=a.heads, mlp_ratio=a.mlp_ratio,
               labels=LABELS, patch_size=16, image_size=224, mean=MEAN, std=STD,
               layer_norm_eps=1e-6)
    model = build_model(cfg)
    nparam = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and 'pos_embed' not in n
             and 'cls_token' not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and 'pos_embed'
                not in n and 'cls_token' not in n)]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': a.wd},
                             {'params': no_decay, 'weight_decay': 0.0}],
                            lr=a.lr, betas=(0.9, 0.999))
    start = 0
    elapsed_prev = 0.0
    if not a.bench and os.path.exists(a.ckpt):
        ck = torch.load(a.ckpt, map_location='cpu')
        model.load_state_dict(ck['model'])
        opt.load_state_dict(ck['opt'])
        start = ck['step']
        elapsed_prev = ck.get('elapsed', 0.0)
        print('resumed from %s at step %d' % (a.ckpt, start), flush=True)
    print('config %s params %d args %s' % (
        {k: cfg[k] for k in ('dim', 'depth', 'heads', 'mlp_ratio')}, nparam, vars(a)),
        flush=True)

    gen = CompositeGenerator('train', a.data_seed)
    test_imgs = test_labels = None
    if a.eval_every and not a.bench:
        tg = CompositeGenerator('test', 7777)
        test_imgs, _, test_labels = tg.batch(0, a.eval_n)

    def save(step, elapsed):
        tmp = a.ckpt + '.tmp'
        torch.save({'model': model.state_dict(), 'opt': opt.state_dict(), 'step': step,
                    'cfg': cfg, 'elapsed': elapsed, 'args': vars(a)}, tmp)
        os.replace(tmp, a.ckpt)

    lowres_steps = int(a.lowres_frac * a.steps)
    replay = None
    if a.replay:
        replay = {}
        for ln in open(a.replay):
            st, lr_s, res_s = ln.split()
            replay[int(st)] = (float(lr_s), int(res_s))
        a.steps = max(replay) + 1
    pool_imgs = pool_labels = None
    if a.pool:
        pool_imgs, pool_labels = build_pool(a.pool, a.data_seed, a.pool_cache)
        pf = None  # started at the first full-resolution step
    else:
        pf = Prefetcher(gen, a.batch, start, a.steps)
    sched = open(a.schedule_log, 'a') if (a.budget_min and not a.bench) else None
    budget = a.budget_min * 60
    model.train()
    t0 = time.time()
    t_ck = t0
    t_log = t0
    n_log = 0
    loss_sum = 0.0
    acc_sum = 0
    img_log = 0
    step = start
    for step in range(start, a.steps):
        if replay is not None:
            lr, res = replay[step]
        elif a.budget_min:
            prog = (elapsed_prev + time.time() - t0) / budget
            if prog >= 1.0:
                break
            res = 112 if prog < a.lowres_frac else 224
            if step < a.warmup:
                lr = a.lr * (step + 1) / a.warmup
            else:
                lr = a.lr * 0.5 * (1 + math.cos(math.pi * prog))
        else:
            res = 112 if step < lowres_steps else 224
            lr = lr_at(step, a.steps, a.warmup, a.lr)
        if pool_imgs is not None and res == 112:
            imgs, labels = pool_batch(pool_imgs, pool_labels, step, a.batch, a.seed)
            x = to_input(imgs)
        else:
            if pf is None:
                pf = Prefetcher(gen, a.batch, step, a.steps, offset=a.pool)
            s, imgs, labels = pf.get()
            assert s == step
            x = to_input(imgs)
            if res == 112:
                x = F.avg_pool2d(x, 2)
        if sched:
            sched.write('%d %.8g %d\n' % (step, lr, res))
            sched.flush()
        y = torch.from_numpy(labels)
        for g in opt.param_groups:
            g['lr'] = lr
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_sum += loss.item() * len(y)
        acc_sum += (logits.argmax(1) == y).sum().item()
        img_log += len(y)
        n_log += 1
        now = time.time()
        if n_log >= a.log_every or step == a.steps - 1:
            ips = img_log / (now - t_log)
            done = step + 1 - start
            rate = done / (now - t0)
            eta = (a.steps - step - 1) / rate
            if a.budget_min:
                eta = budget - (elapsed_prev + now - t0)
            print('step %d/%d res %d lr %.2e loss %.4f acc %.3f img/s %.1f elapsed %.1fmin '
                  'ETA %.1fmin' % (step + 1, a.steps, x.shape[-1], lr, loss_sum / img_log,
                                   acc_sum / img_log, ips, (elapsed_prev + now - t0) / 60,
                                   eta / 60), flush=True)
            t_log, n_log, loss_sum, acc_sum, img_log = now, 0, 0.0, 0, 0
        if a.bench and now - t0 > a.bench:
            print('BENCH threads %d batch %d: %.1f img/s' % (
                a.threads, a.batch, (step + 1 - start) * a.batch / (now - t0)), flush=True)
            return
        if test_imgs is not None and ((step + 1) % a.eval_every == 0 or step == a.steps - 1):
            acc = quick_eval(model, test_imgs, test_labels)
            msg = ''
            if res == 112:
                msg = ' @112 %.3f' % quick_eval(model, test_imgs, test_labels, res=112)
            print('EVAL step %d test-acc(%d held-out composites @224) %.3f%s' % (
                step + 1, len(test_labels), acc, msg), flush=True)
        if now - t_ck > a.ckpt_minutes * 60:
            save(step + 1, elapsed_prev + now - t0)
            t_ck = now
    else:
        step += 1
    if test_imgs is not None:
        print('EVAL final test-acc(%d held-out composites @224) %.3f' % (
            len(test_labels), quick_eval(model, test_imgs, test_labels)), flush=True)
    if a.budget_min and not a.bench:
        step_done = step if step < a.steps else a.steps
    else:
        step_done = a.steps
    save(step_done, elapsed_prev + time.time() - t0)
    print('final step %d' % step_done, flush=True)
    print('DONE total training time %.1f min' % ((elapsed_prev + time.time() - t0) / 60),
          flush=True)


if __name__ == '__main__':
    main()
