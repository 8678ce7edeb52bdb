#!/usr/bin/python3
"""Family fixtures for BEiT / BEiT v2 (relative position bias), made by running timm's OWN Beit code
(timm/models/beit.py) - see tests/fixtures/families/FORMAT.md.

    /usr/bin/python3 tools/make_family_fixtures_beit.py --timm /work/ext/timm \\
        [--out tests/fixtures/families] [--cases beit_relpos,...]

--timm is a work tree of huggingface/pytorch-image-models (its commit from --timm-commit, else its `.commit`
file, else `git rev-parse HEAD`), recorded in meta.json; none of its code is copied here. Needs only Debian's
python3 (torch 1.13, numpy). Deterministic (fixed seeds). Uses the case machinery of
tools/make_family_fixtures_timm.py (randomise, make_peaky, Capture, run_case, its torchvision import stub).

Each case also has:
  * `other_size`: the same checkpoint loaded into timm's Beit built at OTHER_S px through timm's own
    beit.checkpoint_filter_fn (resize_rel_pos_bias_table for the tables, resample_abs_pos_embed for pos_embed),
    run in float64 (and float32 for the spread) on input_other.npy -> attn_other.npy;
  * `rollout`: Abnar & Zuidema's rollout (heads averaged, (A + I) / 2, rows normalised, R = A_L-1 ... A_0) of
    the family's own float64 attention of every block, in numpy -> rollout.npy (T, T).
"""

import argparse
import copy
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402
import make_family_fixtures_timm as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "tools/make_family_fixtures_beit.py"
S, P = mt.S, mt.P          # 32 px, patch 8: 4x4 grid
OTHER_S = 48               # 6x6 grid
NUM_CLASSES = mt.NUM_CLASSES


def rollout_np(attn):
    """attn (L, H, T, T) float64 numpy -> (T, T): mean over heads, (A + I) / 2, rows normalised, A_L-1 ... A_0."""
    L, H, T, _ = attn.shape
    R = np.eye(T)
    for l in range(L):
        a = attn[l].mean(0)
        a = (a + np.eye(T)) / 2
        a = a / a.sum(-1, keepdims=True)
        R = a @ R
    return R


def write_safetensors_with_ints(path, tensors, ints):
    """F32 tensors (name -> tensor) and I64 tensors (name -> LongTensor) in one safetensors file, name order."""
    import json
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    allt = {k: ("F32", fl.tensor_to_f32(v)) for k, v in tensors.items()}
    allt.update({k: ("I64", v.numpy().astype("<i8")) for k, v in ints.items()})
    for name in sorted(allt):
        dt, a = allt[name]
        b = a.astype("<f4").tobytes() if dt == "F32" else a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def beit_cases(timm_commit):
    import timm
    from timm.models import beit as beit_mod

    src = {"repo": "huggingface/pytorch-image-models", "commit": timm_commit,
           "files": ["timm/models/beit.py", "timm/layers/pos_embed_rel.py", "timm/layers/interpolate.py",
                     "timm/layers/pos_embed.py", "timm/layers/mlp.py", "timm/layers/patch_embed.py"]}
    tiny = dict(img_size=S, patch_size=P, embed_dim=48, depth=3, num_heads=3)

    def builder(arch, img_size=S, **extra):
        def build():
            args = dict(tiny, img_size=img_size)
            return timm.create_model(arch, pretrained=False, num_classes=NUM_CLASSES, **args, **extra)
        return build

    def attn_modules(m):
        return [b.attn for b in m.blocks]

    def qk_groups(m):
        D = m.embed_dim
        return [[(b.attn.qkv.weight, slice(0, 2 * D)), (b.attn.q_bias, None)] for b in m.blocks]

    def forward(m, x):
        return m(x)

    def load_sd(folder):
        return torch.load(os.path.join(folder, "model.pth"), map_location="cpu")

    def index_buffers(model):
        return {k: v.clone() for k, v in model.named_buffers() if k.endswith("relative_position_index")}

    def saver(unilm_pth=False, safetensors=False):
        """model.pth: timm's state_dict (no index buffers: timm's are non-persistent). model_unilm.pth:
        {"model": state_dict + every relative_position_index as int64}, as microsoft/unilm's BEiT saves them.
        model.safetensors: the state dict plus the I64 index buffers."""
        def save(folder, model, _init):
            sd = model.state_dict()
            torch.save(sd, os.path.join(folder, "model.pth"))
            files = [{"path": "model.pth", "key": None}]
            idx = index_buffers(model)
            if unilm_pth:
                full = dict(sd)
                full.update(idx)
                torch.save({"model": full}, os.path.join(folder, "model_unilm.pth"))
                files.append({"path": "model_unilm.pth", "key": None})
            if safetensors:
                write_safetensors_with_ints(os.path.join(folder, "model.safetensors"), sd, idx)
                files.append({"path": "model.safetensors"})
            return files, {"index_buffers_in": [f["path"] for f in files if f["path"] != "model.pth"],
                           "index_buffers": sorted(idx)}
        return save

    def zero_tables(m):
        with torch.no_grad():
            for n, p in m.named_parameters():
                if n.endswith("relative_position_bias_table"):
                    p.zero_()

    def gammas_to_one(m):
        with torch.no_grad():
            for b in m.blocks:
                b.gamma_1.fill_(1.0)
                b.gamma_2.fill_(1.0)

    def zero_qv_bias(m):
        with torch.no_grad():
            for b in m.blocks:
                b.attn.q_bias.zero_()
                b.attn.v_bias.zero_()

    def zero_pos(m):
        with torch.no_grad():
            m.pos_embed.zero_()

    def class_rows_to_patch_mean(m):
        """The 3 class-token entries replaced by 0: a map that gathers the class rows wrongly changes."""
        with torch.no_grad():
            for n, p in m.named_parameters():
                if n.endswith("relative_position_bias_table"):
                    p[-3:].zero_()

    capture = ("timm's own Beit.forward (fused_attn=False on every Attention); attention probabilities = the "
               "input of each block's attn.attn_drop (forward pre-hook), i.e. softmax(q k^T * scale + rel_pos_bias)")
    common = dict(family="BEiT (timm Beit)", source=src, shims=[mt.SHIM_TORCHVISION], attn_modules=attn_modules,
                  forward=forward, load_sd=load_sd, dim=48, capture=capture, qk_groups=qk_groups,
                  heads_arg=None, num_prefix=1, class_token=True, mean=timm.data.IMAGENET_DEFAULT_MEAN,
                  std=timm.data.IMAGENET_DEFAULT_STD)
    bias_sanity = [{"what": "every relative_position_bias_table -> 0 (the bias dropped)", "apply": zero_tables},
                   {"what": "the 3 class-token table rows -> 0", "apply": class_rows_to_patch_mean},
                   {"what": "gamma_1 / gamma_2 -> 1 (LayerScale dropped; blocks 1, 2)", "apply": gammas_to_one},
                   {"what": "q_bias / v_bias -> 0", "apply": zero_qv_bias}]
    cases = []

    cases.append(mt.Case(
        name="beit_relpos", layout="beit", seed=72901,
        arch="beit_base_patch16_224", extra={},
        build=builder("beit_base_patch16_224"), save=saver(unilm_pth=True), pos_prefix=1,
        settings={"built_as": "timm.create_model('beit_base_patch16_224', img_size=32, patch_size=8, embed_dim=48, "
                              "depth=3, num_heads=3, num_classes=5)",
                  "model_args (timm registry)": "use_abs_pos_emb=False, use_rel_pos_bias=True, init_values=0.1",
                  "global_pool": "avg (mean of the patch tokens) -> fc_norm; norm = Identity",
                  "qkv bias": "q_bias, v_bias (k_bias a zero non-persistent buffer)",
                  "norm eps": "1e-6 (timm.layers.LayerNorm)"},
        sanity=bias_sanity,
        description="BEiT as released (beit_base_patch16_224's args: relative position bias per block, no absolute "
                    "pos_embed, LayerScale, mean pooling + fc_norm), tiny. model_unilm.pth holds the same tensors "
                    "plus every blocks.i.attn.relative_position_index (int64) under 'model', as unilm saves it.",
        **common))

    cases.append(mt.Case(
        name="beit_abs_relpos", layout="beit", seed=72902,
        arch="beit_base_patch16_224", extra=dict(use_abs_pos_emb=True, global_pool="token"),
        build=builder("beit_base_patch16_224", use_abs_pos_emb=True, global_pool="token"),
        save=saver(), pos_prefix=1,
        settings={"built_as": "timm.create_model('beit_base_patch16_224', use_abs_pos_emb=True, global_pool='token', "
                              "img_size=32, patch_size=8, embed_dim=48, depth=3, num_heads=3, num_classes=5)",
                  "pos_embed": "(1, 1+N, D) added after cat(cls, patches)",
                  "global_pool": "token (class token) after norm; fc_norm = Identity"},
        sanity=bias_sanity + [{"what": "pos_embed -> 0", "apply": zero_pos}],
        description="BEiT with an absolute pos_embed AND per-block relative position bias (the case attnmap used to "
                    "draw with the bias dropped), class-token head.",
        **common))

    cases.append(mt.Case(
        name="beitv2_shared", layout="beit", seed=72903,
        arch="beitv2_base_patch16_224", extra=dict(use_rel_pos_bias=False, use_shared_rel_pos_bias=True),
        build=builder("beitv2_base_patch16_224", use_rel_pos_bias=False, use_shared_rel_pos_bias=True),
        save=saver(safetensors=True), pos_prefix=1,
        settings={"built_as": "timm.create_model('beitv2_base_patch16_224', use_rel_pos_bias=False, "
                              "use_shared_rel_pos_bias=True, img_size=32, patch_size=8, embed_dim=48, depth=3, "
                              "num_heads=3, num_classes=5)",
                  "rel_pos_bias": "one table rel_pos_bias.relative_position_bias_table added in every block",
                  "global_pool": "avg -> fc_norm"},
        sanity=[{"what": "rel_pos_bias.relative_position_bias_table -> 0 (the shared bias dropped)",
                 "apply": zero_tables}] + bias_sanity[1:],
        description="BEiT v2 args with a shared relative position bias (use_shared_rel_pos_bias: BEiT pre-training "
                    "and BEiT v2's shared form), no absolute pos_embed, mean pooling. model.safetensors holds the "
                    "same tensors plus rel_pos_bias.relative_position_index as I64.",
        **common))

    return cases, beit_mod


def other_size(case, folder, meta, beit_mod):
    """The checkpoint in timm's Beit built at OTHER_S through beit.checkpoint_filter_fn; float64 and float32."""
    sd = case.load_sd(folder)
    gen = torch.Generator().manual_seed(case.seed + 5)
    x = torch.randn((1, 3, OTHER_S, OTHER_S), generator=gen, dtype=torch.float64).float()
    import timm
    build = lambda: timm.create_model(case.arch, pretrained=False, num_classes=NUM_CLASSES,  # noqa: E731
                                      img_size=OTHER_S, patch_size=P, embed_dim=48, depth=3, num_heads=3, **case.extra)
    m = build().eval()
    m.load_state_dict(beit_mod.checkpoint_filter_fn(copy.deepcopy(sd), m))
    m32, m64 = m.float(), copy.deepcopy(m).double()
    a32, _, _ = mt.Capture(case.attn_modules(m32)).run(m32, x, case.forward)
    a64, _, _ = mt.Capture(case.attn_modules(m64)).run(m64, x.double(), case.forward)
    blocks = meta["blocks"]
    spread = mt.max_diff(a32[blocks].double(), a64[blocks])
    tol = max(1e-5, 2 * spread)
    fl.save_npy(os.path.join(folder, "input_other.npy"), x[0].numpy())
    fl.save_npy(os.path.join(folder, "attn_other.npy"), a64[blocks].numpy())
    sanity = []
    # the bias dropped at the other size, and the trained table gathered without timm's resize (nearest
    # offsets clamped): both must change the maps by far more than the tolerance
    mm = copy.deepcopy(m64)
    with torch.no_grad():
        for n, p in mm.named_parameters():
            if n.endswith("relative_position_bias_table"):
                p.zero_()
    d = mt.max_diff(mt.Capture(case.attn_modules(mm)).run(mm, x.double(), case.forward)[0][blocks], a64[blocks])
    assert d > 100 * tol, (case.name, "other size: bias dropped", d, tol)
    sanity.append({"change": "at %d px: every relative position table -> 0" % OTHER_S, "max_abs_diff": d,
                   "ratio_to_tolerance": d / tol, "passes_100x": True})
    mm = copy.deepcopy(m64)
    with torch.no_grad():
        for n, p in mm.named_parameters():
            if n.endswith("relative_position_bias_table"):
                src = sd[n].double()
                s = int(round((src.shape[0] - 3) ** 0.5))
                d2 = int(round((p.shape[0] - 3) ** 0.5))
                grid = src[:-3].view(s, s, -1)
                iy = (torch.arange(d2) - d2 // 2 + s // 2).clamp(0, s - 1)
                p[:-3].copy_(grid[iy][:, iy].reshape(d2 * d2, -1))
                p[-3:].copy_(src[-3:])
    d = mt.max_diff(mt.Capture(case.attn_modules(mm)).run(mm, x.double(), case.forward)[0][blocks], a64[blocks])
    sanity.append({"change": "at %d px: the tables extended by clamping offsets instead of timm's resize "
                             "(info)" % OTHER_S, "max_abs_diff": d, "ratio_to_tolerance": d / tol,
                   "passes_100x": bool(d > 100 * tol), "info_only": True})
    return {"image_size": OTHER_S, "input": "input_other.npy", "attn": "attn_other.npy", "tolerance": tol,
            "spread_f32_f64": spread,
            "built_as": "timm.create_model('%s', img_size=%d, ...) + load_state_dict(beit.checkpoint_filter_fn(sd, "
                        "model))" % (case.arch, OTHER_S),
            "mean_row_max": [mt.row_max_mean(a64[i]) for i in range(a64.shape[0])]}, sanity


def add_rollout(case, folder, meta):
    """numpy rollout of the family's own attention of every block, float64 (and float32 for the spread)."""
    sd = case.load_sd(folder)
    x = torch.from_numpy(np.load(os.path.join(folder, "input.npy"))).unsqueeze(0)
    m64 = case.build().double().eval()
    m64.load_state_dict(sd)
    m32 = case.build().float().eval()
    m32.load_state_dict(sd)
    a64 = mt.Capture(case.attn_modules(m64)).run(m64, x.double(), case.forward)[0].numpy()
    a32 = mt.Capture(case.attn_modules(m32)).run(m32, x, case.forward)[0].double().numpy()
    r64, r32 = rollout_np(a64), rollout_np(a32)
    fl.save_npy(os.path.join(folder, "rollout.npy"), r64)
    spread = float(np.abs(r64 - r32).max())
    return {"file": "rollout.npy", "layers": int(a64.shape[0]), "spread_f32_f64": spread,
            "tolerance": max(1e-5, 2 * spread),
            "rule": "numpy: heads averaged, (A + I) / 2, rows normalised, R = A_L-1 ... A_0 (Abnar & Zuidema 2020)"}


def add_grads(case, folder, meta):
    """dlogit_c / dA of every block (c = the most probable class), by torch autograd through timm's own Beit
    (float64; float32 for the spread): the attention probabilities are the input of attn.attn_drop, kept with
    retain_grad. -> grad_attn.npy (L, H, T, T)."""
    sd = case.load_sd(folder)
    x = torch.from_numpy(np.load(os.path.join(folder, "input.npy"))).unsqueeze(0)

    def run(dtype):
        m = case.build().to(dtype).eval()
        m.load_state_dict(sd)
        rec = []

        def keep(mod, inp):
            inp[0].retain_grad()
            rec.append(inp[0])
        hs = [b.attn.attn_drop.register_forward_pre_hook(keep) for b in m.blocks]
        logits = m(x.to(dtype))[0]
        c = int(logits.argmax())
        logits[c].backward()
        for h in hs:
            h.remove()
        return c, torch.stack([r.grad[0] for r in rec]).double()

    c64, g64 = run(torch.float64)
    c32, g32 = run(torch.float32)
    assert c32 == c64
    fl.save_npy(os.path.join(folder, "grad_attn.npy"), g64.numpy())
    spread = mt.max_diff(g32, g64)
    return {"file": "grad_attn.npy", "target_class": c64, "spread_f32_f64": spread,
            "tolerance": max(1e-5, 2 * spread), "max_abs": float(g64.abs().max()),
            "rule": "torch autograd of logits[c] (c = argmax) through timm's Beit.forward, float64; "
                    "d/dA for A = the input of each block's attn.attn_drop"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timm", required=True, help="work tree of huggingface/pytorch-image-models")
    ap.add_argument("--timm-commit")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "families"))
    ap.add_argument("--cases", default="", help="comma-separated subset of case names")
    args = ap.parse_args()
    timm, tc = mt.import_timm(args.timm, args.timm_commit, fused_attn=False)
    cases, beit_mod = beit_cases(tc)
    orig = mt.randomise   # run_case calls the module's randomise: BEiT's extras added to it
    mt.randomise = lambda model, gen, skip=(): randomise_with(orig, model, gen)

    want = [c for c in args.cases.split(",") if c]
    gen = torch.Generator().manual_seed(70000)
    x = torch.randn((3, S, S), generator=gen, dtype=torch.float64).float()   # as the timm generator's image
    for c in cases:
        if want and c.name not in want:
            continue
        meta = mt.run_case(c, args.out, x)
        folder = os.path.join(args.out, c.name)
        meta["generator"] = GENERATOR
        meta["weights"]["randomise"] += ("; q_bias / v_bias N(0,.1); relative_position_bias_table N(0,1)")
        meta["other_size"], extra_sanity = other_size(c, folder, meta, beit_mod)
        meta["sanity"] += extra_sanity
        meta["rollout"] = add_rollout(c, folder, meta)
        if c.extra.get("global_pool") == "token":  # class-token head: the class-specific views apply
            meta["explain"] = add_grads(c, folder, meta)
            print("    autograd dlogit/dA: spread %.1e tol %.1e (max |g| %.2g)" % (
                meta["explain"]["spread_f32_f64"], meta["explain"]["tolerance"], meta["explain"]["max_abs"]))
        fl.write_meta(folder, **meta)
        print("    other size %d px: spread %.1e tol %.1e; rollout tol %.1e" % (
            OTHER_S, meta["other_size"]["spread_f32_f64"], meta["other_size"]["tolerance"],
            meta["rollout"]["tolerance"]))
        for s_ in extra_sanity:
            print("    sanity %-60s %.3e (x%.0f tol)" % (s_["change"][:60], s_["max_abs_diff"], s_["ratio_to_tolerance"]))


def randomise_with(orig, model, gen):
    """timm generator's randomise, plus BEiT's q_bias / v_bias N(0, .1) and relative tables N(0, 1)."""
    orig(model, gen)
    with torch.no_grad():
        for n, p in model.named_parameters():
            leaf = n.rsplit(".", 1)[-1]
            if leaf in ("q_bias", "v_bias"):
                p.copy_(mt.rn(gen, p.shape, 0.1))
            elif leaf == "relative_position_bias_table":
                p.copy_(mt.rn(gen, p.shape, 1.0))


if __name__ == "__main__":
    main()
