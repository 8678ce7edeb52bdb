#!/usr/bin/python3
"""CaiT fixtures (issue 29) made by running timm's own Cait (timm/models/cait.py) on random weights.

    /usr/bin/python3 tools/make_family_fixtures_cait.py --timm /work/ext/timm [--out tests/fixtures/cait]

--timm is a work tree of huggingface/pytorch-image-models outside this repository; its commit (--timm-commit,
else its `.commit` file, else `git rev-parse HEAD`) goes into meta.json. No timm code is copied here; the
shared helpers (torchvision stub, random weights, commit lookup) come from tools/make_family_fixtures_timm.py.

CaiT does not fit tests/fixtures/families/FORMAT.md's attn.npy (n, H, T, T): its self-attention blocks run
over the N patches only (no class token) and its class-attention blocks compute only the class token's row
over [class; patches]. So a case folder here holds (read by tests/test_cait.cpp):
  input.npy        (3, S, S) float32, the normalised image
  attn_sa.npy      (n, H, N, N) float32: the talking-heads SOFTMAX output (after proj_l, before proj_w: a
                   probability distribution per row), of self-attention blocks meta.blocks_sa, every head,
                   taken by a forward pre-hook on attn.proj_w (its input is the softmax, permuted to (B, N, N, H))
  attn_ca.npy      (C, H, T) float32, T = 1 + N: every class-attention block's class-token row over
                   [class; patches], taken by a forward pre-hook on attn.attn_drop (its input is the softmax)
  logits.npy       (classes,) float32
  attn_ca_keep.npy, logits_keep.npy: the class attention (C, H, 1 + K) and logits with only the K patches
                   meta.keep.patches in the sequence (attnmap's token dropping, eval --perturb drop), from timm's
                   own modules run in forward_features' order on (patch_embed(x) + pos_embed)[:, keep]
  input_other.npy, attn_sa_other.npy, attn_ca_other.npy, logits_other.npy: the same at meta.other_size
                   (timm's Cait built at that img_size; the checkpoint's pos_embed resized by timm's
                   resample_abs_pos_embed with num_prefix_tokens=0, since cait.checkpoint_filter_fn only strips
                   'module.' and CaiT's pos_embed covers the patches only)
  model.pth        torch.save(model.state_dict()), timm's names; model.safetensors the same tensors (F32)
  meta.json        sizes, tolerances (max(1e-5, 2 x timm's own float32-vs-float64 spread)), traps, source
  explain.json, explain_*.npy, rollout.npy: the class-specific maps and rollout of issue 44 (write_explain:
                   autograd through timm's Cait in float64 and numpy; explain.json says what each array holds)
All references are timm's forward in float64 on the stored float32 weights and input.
Traps (asserted > 100 x tolerance): talking heads dropped (proj_l / proj_w identity), LayerScale dropped
(gammas 1), class-attention blocks dropped (the last self-attention block's patch-query mean drawn instead).
"""

import argparse
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402
import make_family_fixtures_timm as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "tools/make_family_fixtures_cait.py"
S, P, S2 = 32, 8, 48
DIM, HEADS, DEPTH, DEPTH_CA, CLASSES = 64, 4, 3, 2, 5
KW = dict(patch_size=P, embed_dim=DIM, depth=DEPTH, num_heads=HEADS, depth_token_only=DEPTH_CA,
          mlp_ratio=2.0, mlp_ratio_token_only=3.0, num_classes=CLASSES, init_values=1e-5)


def build(img_size):
    from timm.models.cait import Cait
    return Cait(img_size=img_size, **KW)


def forward_kept(keep):
    """timm's Cait.forward with only the patches `keep` (indices into the grid) in the sequence, cut after
    pos_embed is added (attnmap's token dropping, eval --perturb drop): timm's own modules, in forward_features'
    order."""
    def fwd(model, x):
        t = (model.patch_embed(x) + model.pos_embed)[:, keep]
        t = model.blocks(t)
        cls = model.cls_token.expand(t.shape[0], -1, -1)
        for blk in model.blocks_token_only:
            cls = blk(t, cls)
        return model.forward_head(model.norm(torch.cat((cls, t), dim=1)))
    return fwd


def capture(model, x, forward=None):
    """timm's forward with hooks: (SA softmax (L, H, N, N), CA softmax rows (C, H, T), logits)."""
    sa, ca, hs = [], [], []
    for blk in model.blocks:
        hs.append(blk.attn.proj_w.register_forward_pre_hook(
            lambda m, inp: sa.append(inp[0].detach().permute(0, 3, 1, 2)[0].clone())))
    for blk in model.blocks_token_only:
        blk.attn.fused_attn = False
        hs.append(blk.attn.attn_drop.register_forward_pre_hook(
            lambda m, inp: ca.append(inp[0].detach()[0, :, 0, :].clone())))
    try:
        with torch.no_grad():
            out = model(x) if forward is None else forward(model, x)
    finally:
        for h in hs:
            h.remove()
    return torch.stack(sa), torch.stack(ca), out[0].detach()


def make_peaky(model, x):
    """Scale each block's query and key projections (weights and biases) until its mean row max >= 0.6."""
    chosen = []
    groups = []
    for blk in model.blocks:
        w, b = blk.attn.qkv.weight, blk.attn.qkv.bias
        groups.append([(w, slice(0, 2 * DIM)), (b, slice(0, 2 * DIM))])
    for blk in model.blocks_token_only:
        groups.append([(blk.attn.q.weight, None), (blk.attn.q.bias, None), (blk.attn.k.weight, None),
                       (blk.attn.k.bias, None)])
    for i, g in enumerate(groups):
        gb = mt.with_base(g)
        for s in mt.CANDIDATES:
            mt.scale_rows(gb, s)
            sa, ca, _ = capture(model, x)
            a = sa[i] if i < DEPTH else ca[i - DEPTH]
            if mt.row_max_mean(a) >= mt.TARGET:
                break
        else:
            raise RuntimeError("block %d never gets peaky" % i)
        chosen.append(s)
    return chosen


def runs(model, x32):
    m64 = copy.deepcopy(model).double()
    s32, c32, l32 = capture(model, x32)
    s64, c64, l64 = capture(m64, x32.double())
    spread = max(mt.max_diff(s32.double(), s64), mt.max_diff(c32.double(), c64))
    return m64, s64, c64, l64, spread, mt.max_diff(l32.double(), l64)


def explain_capture(model, x, target):
    """timm's float64 forward with hooks and autograd of logit[target]: per self-attention block the mixed
    weights W = proj_w(P) that multiply V (the output of attn.attn_drop) and P (proj_w's input), per
    class-attention block the class rows (attn_drop's output); each block's norm1 output; their gradients."""
    got = {"w": [], "p": [], "ca": [], "n1": []}
    hs = []

    def keep(key, t):
        t.retain_grad()
        got[key].append(t)

    for blk in model.blocks:
        hs.append(blk.attn.attn_drop.register_forward_hook(lambda m, i, o: keep("w", o)))
        hs.append(blk.attn.proj_w.register_forward_pre_hook(lambda m, i: got["p"].append(i[0].detach())))
    for blk in model.blocks_token_only:
        blk.attn.fused_attn = False
        hs.append(blk.attn.attn_drop.register_forward_hook(lambda m, i, o: keep("ca", o)))
    for blk in list(model.blocks) + list(model.blocks_token_only):
        hs.append(blk.norm1.register_forward_hook(lambda m, i, o: keep("n1", o)))
    try:
        logits = model(x)
        logits[0, target].backward()
    finally:
        for h in hs:
            h.remove()
    return got, logits[0].detach()


def write_explain(folder, m64, x, commit):
    """The class-specific maps of issue 44 (docs/explain.md "CaiT") by autograd through timm's own Cait, float64,
    in numpy from dlogit/dA; and attention rollout from timm's attention. New files only: explain.json and
    explain_*.npy / rollout*.npy (meta.json and the forward fixtures stay as they are)."""
    import numpy as np
    mm = copy.deepcopy(m64)
    mm.zero_grad()
    with torch.no_grad():
        target = int(torch.argmax(mm(x.double())[0]))
    got, logits = explain_capture(mm, x.double(), target)
    N, T, L, SA = (S // P) ** 2, (S // P) ** 2 + 1, DEPTH + DEPTH_CA, DEPTH
    W = np.stack([t.detach()[0].numpy() for t in got["w"]])          # (SA, H, N, N)
    dW = np.stack([t.grad[0].numpy() for t in got["w"]])
    Pm = np.stack([t.permute(0, 3, 1, 2)[0].numpy() for t in got["p"]])  # (SA, H, N, N) the softmax
    A_ca = np.stack([t.detach()[0, :, 0, :].numpy() for t in got["ca"]])  # (C, H, T)
    dA_ca = np.stack([t.grad[0, :, 0, :].numpy() for t in got["ca"]])
    act = [t.detach()[0].numpy() for t in got["n1"]]                # SA (N, D), CA (T, D)
    grad = [t.grad[0].numpy() for t in got["n1"]]

    def abar_sa(l):
        return np.maximum(dW[l] * W[l], 0).mean(axis=0)              # (N, N)

    def abar_ca(j):
        return np.maximum(dA_ca[j] * A_ca[j], 0).mean(axis=0)        # (T)

    def chefer(first):
        r = np.zeros(T)
        r[0] = 1.0
        for l in range(L - 1, first - 1, -1):
            if l >= SA:
                r = r + r[0] * abar_ca(l - SA)
            else:
                r[1:] = r[1:] + r[1:] @ abar_sa(l)
        return r[1:]

    attn_grad = np.stack([abar_sa(l).mean(axis=0) if l < SA else abar_ca(l - SA)[1:] for l in range(L)])
    gradcam = []
    for l in range(L):
        a, g = (act[l], grad[l]) if l < SA else (act[l][1:], grad[l][1:])
        gradcam.append(np.maximum(a @ g.mean(axis=0), 0))
    # rollout (docs/explain.md): per block the head mean of what the attention views record, in (T, T): a
    # self-attention block's softmax P over the patch rows / columns, a class-attention block's class row; + I,
    # rows normalised to 1; R = Ahat_last ... Ahat_0.
    R = np.eye(T)
    for l in range(L):
        A = np.zeros((T, T))
        if l < SA:
            A[1:, 1:] = Pm[l].mean(axis=0)
        else:
            A[0] = A_ca[l - SA].mean(axis=0)
        A = A + np.eye(T)
        A = A / A.sum(axis=1, keepdims=True)
        R = A @ R
    fl.save_npy(os.path.join(folder, "explain_chefer.npy"), np.stack([chefer(0), chefer(SA)]).astype(np.float64))
    fl.save_npy(os.path.join(folder, "explain_attn_grad.npy"), attn_grad)
    fl.save_npy(os.path.join(folder, "explain_gradcam.npy"), np.stack(gradcam))
    fl.save_npy(os.path.join(folder, "explain_w_sa.npy"), W)
    fl.save_npy(os.path.join(folder, "explain_dw_sa.npy"), dW)
    fl.save_npy(os.path.join(folder, "explain_da_ca.npy"), dA_ca)
    fl.save_npy(os.path.join(folder, "rollout.npy"), R)
    info = {"case": "cait_tiny", "class": target, "logit": float(logits[target]), "generator": GENERATOR,
            "source": {"repo": "huggingface/pytorch-image-models", "commit": commit, "files": ["timm/models/cait.py"]},
            "input": "input.npy; weights model.pth (float64 copy of the stored float32 weights)",
            "autograd": "torch.autograd on timm's Cait in float64: logits[0, class].backward(); tensors kept with "
                        "retain_grad from forward hooks",
            "files": {
                "explain_w_sa.npy": "(SA, H, N, N) per self-attention block the talking heads' proj_w(P), the "
                                    "weights that multiply V (output of blocks.i.attn.attn_drop)",
                "explain_dw_sa.npy": "(SA, H, N, N) dlogit/d of the above",
                "explain_da_ca.npy": "(C, H, T) per class-attention block dlogit/d(class row of softmax(q k^T scale)) "
                                     "(output of blocks_token_only.j.attn.attn_drop, fused_attn off)",
                "explain_chefer.npy": "(2, N) Chefer from block 0 (chefer) and from block SA (chefer@L<SA>): r = e_cls; "
                                      "class-attention blocks last to first r <- r + r_cls mean_h (dA*A)^+; then "
                                      "self-attention blocks r_p <- r_p + r_p mean_h (dW*W)^+; the patch part",
                "explain_attn_grad.npy": "(L, N) per block: class-attention block: mean_h (dA*A)^+ class row; "
                                         "self-attention block: mean over the N patch queries of mean_h (dW*W)^+",
                "explain_gradcam.npy": "(L, N) per block: ReLU(act . mean_i grad_i) over the patch rows of that "
                                      "block's norm1 output (self-attention: all N rows; class-attention: rows 1..N)",
                "rollout.npy": "(T, T) rollout R = Ahat_{L-1} ... Ahat_0, Ahat = rownorm(mean_h A + I), A (T, T): "
                               "self-attention blocks the softmax P (proj_w's input) in rows / columns 1..N, "
                               "class-attention blocks the class row in row 0"},
            "tolerance_relative_to_peak": 1e-4}
    with open(os.path.join(folder, "explain.json"), "w") as f:
        import json
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    print("explain: class %d, chefer peak %.3e, rollout row sum %.6f" % (target, chefer(0).max(), R[0].sum()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timm", required=True)
    ap.add_argument("--timm-commit")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "cait"))
    args = ap.parse_args()
    timm, commit = mt.import_timm(args.timm, args.timm_commit)
    from timm.layers import resample_abs_pos_embed

    gen = torch.Generator().manual_seed(70029)
    x = torch.randn((1, 3, S, S), generator=gen, dtype=torch.float64).float()
    x2 = torch.randn((1, 3, S2, S2), generator=gen, dtype=torch.float64).float()
    torch.manual_seed(29)
    model = build(S).float().eval()
    mt.randomise(model, gen)     # LayerNorm, Linear (qkv, q/k/v, proj, proj_l, proj_w, mlp, head), tokens, gammas
    scales = make_peaky(model, x)
    folder = os.path.join(args.out, "cait_tiny")
    os.makedirs(folder, exist_ok=True)
    for fn in os.listdir(folder):
        os.remove(os.path.join(folder, fn))

    m64, s64, c64, l64, spread, lspread = runs(model, x)
    tol, ltol = max(1e-5, 2 * spread), max(1e-4, 2 * lspread)
    blocks_sa = sorted({0, DEPTH // 2, DEPTH - 1})
    fl.save_npy(os.path.join(folder, "input.npy"), x[0].numpy())
    fl.save_npy(os.path.join(folder, "attn_sa.npy"), s64[blocks_sa].numpy())
    fl.save_npy(os.path.join(folder, "attn_ca.npy"), c64.numpy())
    fl.save_npy(os.path.join(folder, "logits.npy"), l64.numpy())

    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.save(sd, os.path.join(folder, "model.pth"))
    fl.write_safetensors(os.path.join(folder, "model.safetensors"), {k: v.numpy() for k, v in sd.items()}, "F32",
                         metadata={"format": "pt"})
    # round trip through the saved file
    fresh = build(S).double().eval()
    fresh.load_state_dict(torch.load(os.path.join(folder, "model.pth")))
    fs_, fc_, _ = capture(fresh, x.double())
    rt = max(mt.max_diff(fs_, s64), mt.max_diff(fc_, c64))
    assert rt == 0.0, rt

    # the other size: timm's Cait at S2, pos_embed (1, N, D) resized by timm's resample_abs_pos_embed
    g2 = S2 // P
    sd2 = dict(sd)
    sd2["pos_embed"] = resample_abs_pos_embed(sd["pos_embed"], new_size=[g2, g2], num_prefix_tokens=0)
    model2 = build(S2).float().eval()
    model2.load_state_dict(sd2)
    _, s64b, c64b, l64b, spread2, lspread2 = runs(model2, x2)
    tol2, ltol2 = max(1e-5, 2 * spread2), max(1e-4, 2 * lspread2)
    fl.save_npy(os.path.join(folder, "input_other.npy"), x2[0].numpy())
    fl.save_npy(os.path.join(folder, "attn_sa_other.npy"), s64b[blocks_sa].numpy())
    fl.save_npy(os.path.join(folder, "attn_ca_other.npy"), c64b.numpy())
    fl.save_npy(os.path.join(folder, "logits_other.npy"), l64b.numpy())

    # token dropping: half the patches kept, the others leave the sequence (eval --perturb drop)
    keep = [0, 2, 3, 5, 8, 9, 13, 15]
    k32, kc32, kl32 = capture(model, x, forward_kept(keep))
    k64, kc64, kl64 = capture(m64, x.double(), forward_kept(keep))
    ktol = max(1e-5, 2 * max(mt.max_diff(k32.double(), k64), mt.max_diff(kc32.double(), kc64)))
    fl.save_npy(os.path.join(folder, "attn_ca_keep.npy"), kc64.numpy())
    fl.save_npy(os.path.join(folder, "logits_keep.npy"), kl64.numpy())

    # traps: what a reader dropping a CaiT piece would draw, against the reference, in tolerances
    def patched(fn):
        mm = copy.deepcopy(m64)
        with torch.no_grad():
            fn(mm)
        return capture(mm, x.double())

    def eye_mix(mm, which):
        for blk in mm.blocks:
            lin = getattr(blk.attn, which)
            lin.weight.copy_(torch.eye(HEADS, dtype=lin.weight.dtype))
            lin.bias.zero_()

    def gammas_one(mm):
        for blk in list(mm.blocks) + list(mm.blocks_token_only):
            blk.gamma_1.fill_(1.0)
            blk.gamma_2.fill_(1.0)

    def diff_all(sa, ca):
        return max(mt.max_diff(sa[blocks_sa], s64[blocks_sa]), mt.max_diff(ca, c64))

    traps = []
    for what, fn in [("talking heads proj_l dropped (identity, no bias)", lambda mm: eye_mix(mm, "proj_l")),
                     ("talking heads proj_w dropped (identity, no bias)", lambda mm: eye_mix(mm, "proj_w")),
                     ("LayerScale dropped (gamma_1 = gamma_2 = 1)", gammas_one)]:
        sa, ca, _ = patched(fn)
        d = diff_all(sa, ca)
        assert d > 100 * tol, (what, d, tol)
        traps.append({"change": what, "max_abs_diff": d, "ratio_to_tolerance": d / tol})
    # class-attention blocks dropped: the last self-attention block's patch-query mean (per head, patches)
    # drawn instead of the last class-attention block's class row (per head, patch columns)
    sa_mean = s64[-1].mean(dim=1)                      # (H, N)
    d = mt.max_diff(sa_mean, c64[-1][:, 1:])
    assert d > 100 * tol, d
    traps.append({"change": "class-attention blocks dropped (last self-attention block's patch-query mean drawn)",
                  "max_abs_diff": d, "ratio_to_tolerance": d / tol})

    N, T = (S // P) ** 2, (S // P) ** 2 + 1
    meta = {"case": "cait_tiny", "family": "CaiT (timm Cait)", "layout": "cait",
            "files": [{"path": "model.pth"}, {"path": "model.safetensors"}],
            "image_size": S, "patch": P, "dim": DIM, "heads": HEADS, "depth_sa": DEPTH, "depth_ca": DEPTH_CA,
            "depth": DEPTH + DEPTH_CA, "patches": N, "tokens": T, "blocks_sa": blocks_sa,
            "mlp": int(DIM * KW["mlp_ratio"]), "mlp_ca": int(DIM * KW["mlp_ratio_token_only"]),
            "spread_f32_f64": spread, "tolerance": tol, "logits_spread_f32_f64": lspread, "logits_tolerance": ltol,
            "other_size": {"image_size": S2, "input": "input_other.npy", "attn_sa": "attn_sa_other.npy",
                           "attn_ca": "attn_ca_other.npy", "logits": "logits_other.npy",
                           "spread_f32_f64": spread2, "tolerance": tol2, "logits_tolerance": ltol2,
                           "pos_embed": "timm.layers.resample_abs_pos_embed(pos_embed, new_size=[%d, %d], "
                                        "num_prefix_tokens=0) (bicubic, antialias=True)" % (g2, g2)},
            "keep": {"patches": keep, "attn_ca": "attn_ca_keep.npy", "logits": "logits_keep.npy", "tolerance": ktol,
                     "forward": "timm's own modules on (patch_embed(x) + pos_embed)[:, keep], as forward_features"},
            "mean": list(timm.data.IMAGENET_DEFAULT_MEAN), "std": list(timm.data.IMAGENET_DEFAULT_STD),
            "source": {"repo": "huggingface/pytorch-image-models", "commit": commit,
                       "files": ["timm/models/cait.py", "timm/layers/pos_embed.py"]},
            "model_args": dict(KW, img_size=S),
            "shims": [mt.SHIM_TORCHVISION], "generator": GENERATOR,
            "capture": {"attn_sa": "forward pre-hook on blocks.i.attn.proj_w: its input is softmax(proj_l(q k^T "
                                   "* scale)) permuted to (B, N, N, H); stored as (H, N, N)",
                        "attn_ca": "forward pre-hook on blocks_token_only.j.attn.attn_drop (fused_attn off): "
                                   "softmax(q_cls k^T * scale) (B, H, 1, T); stored as (H, T)"},
            "weights": {"seed": 70029, "randomise": "make_family_fixtures_timm.randomise (LayerNorm w 1+N(0,.3) "
                        "b N(0,.2); Linear w N(0,1/fan_in) b N(0,.1), proj_l / proj_w included; cls_token, "
                        "pos_embed N(0,.5); gamma_1 / gamma_2 0.6+N(0,.3))",
                        "qk_scale_per_block": scales,
                        "mean_row_max": [mt.row_max_mean(s64[i]) for i in range(DEPTH)] +
                                        [mt.row_max_mean(c64[j]) for j in range(DEPTH_CA)]},
            "roundtrip_max_abs_diff": rt, "traps": traps,
            "state_dict": {k: list(v.shape) for k, v in sd.items()},
            "description": "timm Cait, 32x32 patch 8, D 64, 4 heads, 3 talking-heads self-attention blocks "
                           "(mlp_ratio 2) + 2 class-attention blocks (mlp_ratio_token_only 3), 5 classes"}
    fl.write_meta(folder, **meta)
    write_explain(folder, m64, x, commit)
    print("cait_tiny spread %.1e tol %.1e (other %.1e) logits tol %.1e row-max %s" % (
        spread, tol, tol2, ltol, ["%.2f" % v for v in meta["weights"]["mean_row_max"]]))
    for t in traps:
        print("    trap %-70s %.3e (x%.0f tol)" % (t["change"][:70], t["max_abs_diff"], t["ratio_to_tolerance"]))


if __name__ == "__main__":
    main()
