#!/usr/bin/python3
"""Family fixtures for facebookresearch DINOv3's OWN checkpoints (issue 44 point 3), made by running its own
DinoVisionTransformer (dinov3/models/vision_transformer.py, dinov3/layers/*.py) - see
tests/fixtures/families/FORMAT.md:

  * dinov3_fb_mlp     as the released distilled ViT-S/B/L (hub/backbones.py dinov3_vits16 ...): GELU MLP
                      fc1 / fc2, qkv bias with LinearKMaskedBias's `bias_mask` buffer (mask_k_bias=True),
                      4 storage tokens, LayerScale, norm_layer 'layernormbf16', rope periods held in bfloat16
                      (their training config pos_embed_rope_dtype bf16, as the released .pth files hold them)
  * dinov3_fb_swiglu  as the released ViT-7B (dinov3_vit7b16): SwiGLU w1 / w2 / w3 (swiglu64), no qkv bias,
                      untie_global_and_local_cls_norm (local_cls_norm.*), rope periods in float32 (its
                      training config pos_embed_rope_dtype fp32)

Both are 32 px, patch 8, depth 3, with other head counts than D/64 (the head count comes from the periods buffer:
D_head = 4 * len(periods)). The weights are saved as Meta saves them: torch.save(model.state_dict()) -> model.pth.
The reference run is the hub's: a DinoVisionTransformer built with pos_embed_rope_dtype='fp32' (every
hub/backbones.py entry) and the state dict loaded into it (a bfloat16 periods buffer copied into its float32
one). It runs in float64 except the rotary part, which the code runs in the rope module's dtype (float32):
RopePositionEmbedding computes sin / cos in float32 from the stored periods, and SelfAttention.apply_rope casts
q and k to that dtype, rotates them and casts them back. `other_size`: the same weights at 48 px (the rope
computes its tables for any H x W).

    /usr/bin/python3 tools/make_family_fixtures_dinov3.py --dinov3 /work/ext/dinov3 [--out ...] [--cases a,b]

--dinov3 is a work tree of facebookresearch/dinov3 (its commit from --dinov3-commit, else its `.commit` file,
else `git rev-parse HEAD`), recorded in meta.json; none of its code is copied here. Needs only Debian's python3
(torch 1.13, numpy). Deterministic (fixed seeds).

Shims (torch 1.13 lacks three things the code touches; recorded in meta.json "shims"):
  * torch.nn.functional.scaled_dot_product_attention (torch >= 2.0; SelfAttention.compute_attention calls it
    with no mask, no dropout, the default scale): replaced by softmax(q k^T * d_head^-0.5) v in q's dtype, which
    also records the probabilities (the capture);
  * torch._dynamo (dinov3/layers/block.py sets two torch._dynamo.config values at import): a stub module;
  * torch.compiler.allow_in_graph (a decorator in dinov3/layers/fp8_linear.py, not used by this model): identity.
"""

import argparse
import copy
import json
import math
import os
import sys
import types

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402
import make_family_fixtures_timm as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "tools/make_family_fixtures_dinov3.py"
S, P, OTHER_S = 32, 8, 48
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]

SHIMS = [
    "torch 1.13 has no F.scaled_dot_product_attention (SelfAttention.compute_attention calls it without mask, "
    "dropout or scale): replaced by softmax(q k^T * d_head^-0.5) v in q's dtype, which records the probabilities",
    "torch 1.13 has no torch._dynamo (dinov3/layers/block.py sets torch._dynamo.config values at import): a stub module",
    "torch 1.13 has no torch.compiler (dinov3/layers/fp8_linear.py decorates with torch.compiler.allow_in_graph; "
    "fp8 is not used): an identity decorator",
]

RECORD = []  # the attention probabilities of each SDPA call, in call order


def sdpa_shim(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    assert attn_mask is None and dropout_p == 0.0 and not is_causal and scale is None
    a = torch.softmax(q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5), dim=-1)
    RECORD.append(a.detach().clone())
    return a @ v


def import_dinov3(path):
    torch.set_num_threads(1)
    if not hasattr(torch, "_dynamo"):
        d = types.ModuleType("torch._dynamo")
        d.config = types.SimpleNamespace()
        sys.modules["torch._dynamo"] = d
        torch._dynamo = d
    if not hasattr(torch, "compiler"):
        torch.compiler = types.SimpleNamespace(allow_in_graph=lambda f: f)
    torch.nn.functional.scaled_dot_product_attention = sdpa_shim
    sys.path.insert(0, os.path.abspath(path))
    from dinov3.models import vision_transformer as vt
    assert os.path.abspath(vt.__file__).startswith(os.path.abspath(path)), vt.__file__
    return vt


def run(model, x):
    """The family's own forward (eval); returns the attention (L, H, T, T) of the one image."""
    RECORD.clear()
    with torch.no_grad():
        model(x)
    assert len(RECORD) == len(model.blocks), len(RECORD)
    return torch.stack([r[0] for r in RECORD], 0)


def randomise(model, gen):
    """LayerNorm w 1+N(0,.3) b N(0,.2); Linear/Conv w N(0,1/fan_in) b N(0,.1) (the key third of the qkv bias
    too: bias_mask is what zeroes it); cls / storage / mask tokens N(0,.5); LayerScale gamma 0.6+N(0,.3).
    The buffers (rope periods, bias_mask) keep the family's own init."""
    rn = mt.rn
    with torch.no_grad():
        for _, mod in model.named_modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(rn(gen, mod.weight.shape, 0.3, 1.0))
                mod.bias.copy_(rn(gen, mod.bias.shape, 0.2))
            elif isinstance(mod, (nn.Linear, nn.Conv2d)):
                mod.weight.copy_(rn(gen, mod.weight.shape, 1.0 / math.sqrt(mod.weight[0].numel())))
                if mod.bias is not None:
                    mod.bias.copy_(rn(gen, mod.bias.shape, 0.1))
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf in ("cls_token", "storage_tokens", "mask_token"):
                p.copy_(rn(gen, p.shape, 0.5))
            elif leaf == "gamma":
                p.copy_(rn(gen, p.shape, 0.3, 0.6))


def make_peaky(model, x):
    """Scales each block's q / k rows of qkv (and their bias) until its mean row max is >= 0.6."""
    chosen = []
    for i, b in enumerate(model.blocks):
        D = b.attn.qkv.in_features
        w0 = b.attn.qkv.weight[: 2 * D].detach().clone()
        b0 = None if b.attn.qkv.bias is None else b.attn.qkv.bias[: 2 * D].detach().clone()
        for s in mt.CANDIDATES:
            with torch.no_grad():
                b.attn.qkv.weight[: 2 * D].copy_(w0 * s)
                if b0 is not None:
                    b.attn.qkv.bias[: 2 * D].copy_(b0 * s)
            if mt.row_max_mean(run(model, x)[i]) >= mt.TARGET:
                break
        else:
            raise RuntimeError("block %d never gets peaky" % i)
        chosen.append(s)
    return chosen


def hub_model(vt, kw, sd, dtype):
    """The model as hub/backbones.py builds it (pos_embed_rope_dtype 'fp32') with `sd` loaded, in `dtype`
    except the rope module, which keeps the float32 its constructor gave it (float64 runs: see the docstring)."""
    m = vt.DinoVisionTransformer(**dict(kw, pos_embed_rope_dtype="fp32")).eval()
    m.load_state_dict(sd, strict=True)
    m = m.to(dtype)
    m.rope_embed.periods.data = m.rope_embed.periods.data.float()
    return m


CASES = {
    "dinov3_fb_mlp": dict(
        seed=74001, train_rope_dtype="bf16",
        kw=dict(img_size=S, patch_size=P, embed_dim=48, depth=3, num_heads=3, ffn_ratio=4, qkv_bias=True,
                layerscale_init=1e-5, norm_layer="layernormbf16", ffn_layer="mlp", n_storage_tokens=4,
                mask_k_bias=True, pos_embed_rope_base=100, pos_embed_rope_normalize_coords="separate",
                pos_embed_rope_rescale_coords=2),
        description="facebookresearch DinoVisionTransformer as the released ViT-S/B/L/H+ (hub dinov3_vits16: "
                    "mask_k_bias, 4 storage tokens, LayerScale, layernormbf16, GELU MLP) at 32 px, patch 8, D 48, "
                    "depth 3, 3 heads (d_head 16; D is no multiple of 64), rope periods stored in bfloat16"),
    "dinov3_fb_swiglu": dict(
        seed=74002, train_rope_dtype="fp32",
        kw=dict(img_size=S, patch_size=P, embed_dim=64, depth=3, num_heads=2, ffn_ratio=1.5, qkv_bias=False,
                layerscale_init=1e-5, norm_layer="layernormbf16", ffn_layer="swiglu64", n_storage_tokens=4,
                mask_k_bias=True, untie_global_and_local_cls_norm=True, pos_embed_rope_base=100,
                pos_embed_rope_normalize_coords="separate", pos_embed_rope_rescale_coords=2),
        description="facebookresearch DinoVisionTransformer as the released ViT-7B (hub dinov3_vit7b16: SwiGLU "
                    "w1/w2/w3 swiglu64, no qkv bias, untie_global_and_local_cls_norm, 4 storage tokens, "
                    "LayerScale; ffn_ratio 1.5 for a small file: hidden 64) at 32 px, patch 8, D 64, depth 3, 2 heads "
                    "(d_head 32, not D/64), rope periods in float32"),
}


def sanity_checks(vt, case, sd, x, a64, tol):
    """Each piece of the file that is DINOv3's own, dropped or replaced: the attention moves by far more
    than the tolerance. Entries marked info_only are reported, not required."""
    kw = case["kw"]
    out = []

    def check(what, change_sd=None, change_model=None, required=True):
        s = copy.deepcopy(sd)
        if change_sd:
            change_sd(s)
        m = hub_model(vt, kw, s, torch.float64)
        if change_model:
            change_model(m)
        d = mt.max_diff(run(m, x), a64)
        e = {"change": what, "compares": "attn", "max_abs_diff": d, "ratio_to_tolerance": d / tol,
             "passes_100x": bool(d > 100 * tol)}
        if required:
            assert d > 100 * tol, (what, d, tol)
        else:
            e["info_only"] = True
        out.append(e)

    def base_periods(m):  # what timm / attnmap's Rope::Dinov3 compute from the base in float32
        dh = m.rope_embed.D_head
        m.rope_embed.periods.data = 100.0 ** (2 * torch.arange(dh // 4, dtype=torch.float32) / (dh // 2))

    check("rope periods recomputed from base 100 in float32 instead of the stored ones", change_model=base_periods,
          required=case["train_rope_dtype"] == "bf16")
    check("no rope (rope_embed = None)", change_model=lambda m: setattr(m, "rope_embed", None))
    check("ls1 / ls2 gamma -> 1", change_sd=lambda s: [s[k].fill_(1.0) for k in s if k.endswith(".gamma")])
    check("storage_tokens -> 0", change_sd=lambda s: s["storage_tokens"].zero_())
    if kw["qkv_bias"]:
        check("qkv.bias_mask -> 1 (the key bias not masked)",
              change_sd=lambda s: [s[k].fill_(1.0) for k in s if k.endswith("bias_mask")])
    return out


def make_case(vt, name, case, out_root, commit):
    kw = case["kw"]
    gen = torch.Generator().manual_seed(case["seed"])
    torch.manual_seed(case["seed"])
    model = vt.DinoVisionTransformer(**dict(kw, pos_embed_rope_dtype=case["train_rope_dtype"]))
    model.init_weights()
    model.eval()
    randomise(model, gen)
    x = torch.randn((1, 3, S, S), generator=torch.Generator().manual_seed(case["seed"] + 1),
                    dtype=torch.float64).float()
    # peaky on the hub's float32 model; the scaled weights go back into the saved model
    hub32 = hub_model(vt, kw, model.state_dict(), torch.float32)
    scales = make_peaky(hub32, x)
    with torch.no_grad():
        for b_save, b_hub in zip(model.blocks, hub32.blocks):
            b_save.attn.qkv.weight.copy_(b_hub.attn.qkv.weight)
            if b_save.attn.qkv.bias is not None:
                b_save.attn.qkv.bias.copy_(b_hub.attn.qkv.bias)
    sd = model.state_dict()
    folder = os.path.join(out_root, name)
    os.makedirs(folder, exist_ok=True)
    for fn in os.listdir(folder):
        os.remove(os.path.join(folder, fn))
    torch.save(sd, os.path.join(folder, "model.pth"))
    sd = torch.load(os.path.join(folder, "model.pth"), map_location="cpu")
    a32 = run(hub_model(vt, kw, sd, torch.float32), x)
    a64 = run(hub_model(vt, kw, sd, torch.float64), x.double())
    blocks = [0, 1, 2]
    spread = mt.max_diff(a32.double(), a64)
    tol = max(1e-5, 2 * spread)
    fl.save_npy(os.path.join(folder, "input.npy"), x[0].numpy())
    fl.save_npy(os.path.join(folder, "attn.npy"), a64[blocks].numpy())
    # the same weights at 48 px
    x2 = torch.randn((1, 3, OTHER_S, OTHER_S), generator=torch.Generator().manual_seed(case["seed"] + 2),
                     dtype=torch.float64).float()
    b32 = run(hub_model(vt, dict(kw, img_size=OTHER_S), sd, torch.float32), x2)
    b64 = run(hub_model(vt, dict(kw, img_size=OTHER_S), sd, torch.float64), x2.double())
    spread2 = mt.max_diff(b32.double(), b64)
    fl.save_npy(os.path.join(folder, "input_other.npy"), x2[0].numpy())
    fl.save_npy(os.path.join(folder, "attn_other.npy"), b64[blocks].numpy())
    periods = sd["rope_embed.periods"]
    dh = kw["embed_dim"] // kw["num_heads"]
    base = 100.0 ** (2 * torch.arange(dh // 4, dtype=torch.float32) / (dh // 2))
    H, T = a64.shape[1], a64.shape[-1]
    meta = {"case": name, "family": "facebookresearch DINOv3", "layout": "dinov3",
            "files": [{"path": "model.pth", "key": None}], "heads_arg": None,
            "image_size": S, "patch": P, "dim": kw["embed_dim"], "depth": kw["depth"], "heads": H, "tokens": T,
            "num_prefix": 1 + kw["n_storage_tokens"], "class_token": True, "blocks": blocks,
            "spread_f32_f64": spread, "tolerance": tol, "mean": IMAGENET_MEAN, "std": IMAGENET_STD,
            "source": {"repo": "facebookresearch/dinov3", "commit": commit,
                       "files": ["dinov3/models/vision_transformer.py", "dinov3/layers/attention.py",
                                 "dinov3/layers/block.py", "dinov3/layers/ffn_layers.py",
                                 "dinov3/layers/rope_position_encoding.py", "dinov3/layers/layer_scale.py",
                                 "dinov3/layers/patch_embed.py", "dinov3/hub/backbones.py"]},
            "shims": SHIMS, "generator": GENERATOR, "description": case["description"],
            "settings": {"DinoVisionTransformer": {k: v for k, v in kw.items()},
                         "saved_with": "pos_embed_rope_dtype=%r (the training config's)" % case["train_rope_dtype"],
                         "run_with": "pos_embed_rope_dtype='fp32' (hub/backbones.py), load_state_dict(strict=True)",
                         "periods_dtype": str(periods.dtype),
                         "periods": [float(v) for v in periods.float()],
                         "periods_from_base_fp32": [float(v) for v in base],
                         "periods_max_rel_diff": float(((periods.float() - base) / base).abs().max())},
            "other_size": {"image_size": OTHER_S, "input": "input_other.npy", "attn": "attn_other.npy",
                           "tolerance": max(1e-5, 2 * spread2), "spread_f32_f64": spread2,
                           "built": "DinoVisionTransformer(img_size=%d, ...) + load_state_dict" % OTHER_S,
                           "mean_row_max": [mt.row_max_mean(b64[i]) for i in blocks]},
            "weights": {"seed": case["seed"], "randomise": randomise.__doc__.replace("\n    ", " "),
                        "qk_scale_per_block": scales, "mean_row_max": [mt.row_max_mean(a64[i]) for i in blocks]},
            "capture": "the family's own forward; attention probabilities recorded inside the scaled_dot_product_"
                       "attention shim (softmax(q k^T * d_head^-0.5) of the q, k SelfAttention passes it after its "
                       "own apply_rope); float64 run with the rope module (periods, sin / cos, apply_rope) in its "
                       "float32, as hub/backbones.py builds it",
            "sanity": sanity_checks(vt, case, sd, x.double(), a64, tol),
            "state_dict": {k: [list(v.shape), str(v.dtype)] for k, v in sd.items()}}
    fl.write_meta(folder, **meta)
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print("%-18s T=%d H=%d spread %.1e tol %.1e (48 px %.1e) row-max %s %.0f KB" % (
        name, T, H, spread, tol, spread2, ["%.2f" % v for v in meta["weights"]["mean_row_max"]], size / 1024))
    for s in meta["sanity"]:
        print("    sanity %-70s %.2e (x%.0f tol)" % (s["change"][:70], s["max_abs_diff"], s["ratio_to_tolerance"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dinov3", required=True, help="work tree of facebookresearch/dinov3")
    ap.add_argument("--dinov3-commit")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "families"))
    ap.add_argument("--cases", default="", help="comma-separated subset of case names")
    args = ap.parse_args()
    vt = import_dinov3(args.dinov3)
    commit = mt.git_commit(args.dinov3, args.dinov3_commit)
    want = [c for c in args.cases.split(",") if c]
    for name, case in CASES.items():
        if not want or name in want:
            make_case(vt, name, case, args.out, commit)


if __name__ == "__main__":
    main()
