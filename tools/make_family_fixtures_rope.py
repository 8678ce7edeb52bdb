#!/usr/bin/python3
"""Family fixtures for rotary position embeddings and SwiGLU (issue 29), made by running timm's OWN model
code (see tests/fixtures/families/FORMAT.md):

  * timm_swiglu_packed  timm VisionTransformer as vit_giant_patch14_dinov2 (SwiGLUPacked: mlp.fc1 (2M, D),
                        mlp.fc2 (D, M), LayerScale), shrunk
  * eva02_tiny          timm Eva as eva02_tiny_patch14_224: fused qkv with q_bias / v_bias, EVA-02 RoPE
                        ('cat', interleaved, ref_feat_shape (16, 16)), packed SwiGLU (GluMlp), avg pool + fc_norm
  * eva02_base          timm Eva as eva02_base_patch14_224: q_proj / k_proj / v_proj, SwiGLU with mlp.fc1_g /
                        mlp.fc1_x and the sub-LayerNorm mlp.norm
  * eva02_gelu          timm Eva as eva02_tiny_patch14_224 with swiglu_mlp=False (a plain GELU MLP: the case
                        that used to render with RoPE dropped), LayerScale gamma_1 / gamma_2, class-token pool
  * dinov3_small        timm Eva as vit_small_patch16_dinov3: DINOv3 RoPE (rotate-half, temperature 100,
                        [-1, 1] coordinates), 4 registers, LayerScale, no pos_embed, LayerNorm eps 1e-5
  * dinov3_splus_qkvb   timm Eva as vit_small_plus_patch16_dinov3_qkvb: q_bias / v_bias, SwiGLU fc1_g / fc1_x
                        (align_to 8)

Each case also has an `other_size`: timm's own model built at the second size, the checkpoint loaded through
timm's checkpoint_filter_fn for the family (pos_embed resampled by resample_abs_pos_embed; the rotary tables
computed by the model for its grid). Each case also has the autograd references of the class-specific maps
(issue 44, tools/fixture_explain.py): grad_attn.npy, and for a class-token classifier chefer / gradcam /
attn_grad .npy; `--explain-only` writes them alone for the existing cases.

    /usr/bin/python3 tools/make_family_fixtures_rope.py --timm /work/ext/timm [--out ...] [--cases a,b]

Needs only Debian's python3 (torch 1.13, numpy). Deterministic (fixed seeds). The helpers (random weights,
capture hooks, the case runner) are tools/make_family_fixtures_timm.py's.
"""

import argparse
import copy
import json
import os
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_explain  # noqa: E402
import fixture_lib as fl  # noqa: E402
import make_family_fixtures_timm as mtf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "tools/make_family_fixtures_rope.py"
NUM_CLASSES = 5

_base_randomise = mtf.randomise


def randomise(model, gen, skip=()):
    """timm's helper, plus what it leaves alone in Eva: q_bias / v_bias N(0, .1) (EvaAttention parameters,
    not nn.Linear biases)."""
    _base_randomise(model, gen, skip)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".q_bias") or name.endswith(".v_bias"):
                p.copy_(mtf.rn(gen, p.shape, 0.1))


mtf.randomise = randomise  # run_case calls the module's randomise


def make_cases(timm_commit):
    import timm
    from timm.models._hub import save_config_for_hf
    from timm.models import eva as eva_mod
    from timm.models import vision_transformer as vt_mod

    files = ["timm/models/eva.py", "timm/layers/pos_embed_sincos.py", "timm/layers/mlp.py",
             "timm/models/vision_transformer.py", "timm/layers/patch_embed.py", "timm/models/_hub.py"]
    src = {"repo": "huggingface/pytorch-image-models", "commit": timm_commit, "files": files}

    def builder(arch, args):
        def build(size=None):
            a = dict(args)
            if size is not None:
                a["img_size"] = size
            return timm.create_model(arch, pretrained=False, num_classes=NUM_CLASSES, **a)
        return build

    def attn_modules(m):
        return [b.attn for b in m.blocks]

    def qk_groups(m):
        out = []
        for b in m.blocks:
            a = b.attn
            if getattr(a, "qkv", None) is not None:
                D = a.qkv.weight.shape[0] // 3
                g = [(a.qkv.weight, slice(0, 2 * D))]
                if a.qkv.bias is not None:
                    g.append((a.qkv.bias, slice(0, 2 * D)))
                if getattr(a, "q_bias", None) is not None:
                    g.append((a.q_bias, None))
            else:
                g = [(a.q_proj.weight, None), (a.k_proj.weight, None)]
                if a.q_proj.bias is not None:
                    g.append((a.q_proj.bias, None))
            out.append(g)
        return out

    def forward(m, x):
        return m(x)

    def saver(arch, model_args, safetensors):
        def save(folder, model, _init):
            sd = model.state_dict()
            torch.save(sd, os.path.join(folder, "model.pth"))
            out = [{"path": "model.pth", "key": None}]
            if safetensors:
                fl.write_safetensors(os.path.join(folder, "model.safetensors"), sd, "F32", metadata={"format": "pt"})
                out.append({"path": "model.safetensors"})
            save_config_for_hf(model, Path(folder) / "config.json", model_args=model_args)
            return out, {"config": {"path": "config.json", "written_by": "timm.models._hub.save_config_for_hf",
                                    "architecture": arch, "model_args": model_args}}
        return save

    def load_sd(folder):
        return torch.load(os.path.join(folder, "model.pth"), map_location="cpu")

    def gammas_to_one(m):
        with torch.no_grad():
            for n, p in m.named_parameters():
                if n.endswith("gamma_1") or n.endswith("gamma_2") or n.endswith(".gamma"):
                    p.fill_(1.0)

    def no_rope(m):
        m.rope = None

    def rope_layout_swapped(m):
        for b in m.blocks:
            b.attn.rotate_half = not b.attn.rotate_half

    def rope_no_ref(m):  # EVA-02's grid scaled to ref_feat_shape dropped: integer patch coordinates
        m.rope.ref_feat_shape = None
        with torch.no_grad():
            m.rope.pos_embed = m.rope._get_pos_embed_values(m.rope.feat_shape).to(torch.float64)

    def gate_swapped(m):  # GluMlp: act(x2) * x1 instead of act(x1) * x2
        for b in m.blocks:
            b.mlp.gate_last = True

    def mlp_norm_off(m):
        for b in m.blocks:
            b.mlp.norm = nn.Identity()

    capture = ("timm's own forward (fused_attn=False on every attention module); attention probabilities = "
               "the input of each block's attn.attn_drop (forward pre-hook)")
    common = dict(family="timm", source=src, shims=[mtf.SHIM_TORCHVISION], attn_modules=attn_modules,
                  forward=forward, load_sd=load_sd, dim=48, capture=capture, qk_groups=qk_groups, heads_arg=None)
    cases = []

    # 1. vit_giant_patch14_dinov2's packed SwiGLU (timm VisionTransformer)
    args = dict(img_size=42, patch_size=14, embed_dim=48, depth=3, num_heads=3)
    c = mtf.Case(
        name="timm_swiglu_packed", layout="timm", seed=72001, build=builder("vit_giant_patch14_dinov2", args),
        save=saver("vit_giant_patch14_dinov2", args, False), num_prefix=1, class_token=True, pos_prefix=1,
        mean=timm.data.IMAGENET_DEFAULT_MEAN, std=timm.data.IMAGENET_DEFAULT_STD,
        settings={"architecture": "vit_giant_patch14_dinov2",
                  "model_args (timm registry)": "patch_size=14, embed_dim=1536, depth=40, num_heads=24, "
                                                "init_values=1e-5, mlp_ratio=2.66667*2, mlp_layer=SwiGLUPacked, "
                                                "act_layer=nn.SiLU",
                  "mlp": "SwiGLUPacked = GluMlp(act SiLU, gate_last=False): h = fc1(x) (2M); x1, x2 = h.chunk(2); "
                         "fc2(silu(x1) * x2); fc1 (256, 48), fc2 (48, 128)",
                  "LayerScale": "ls1/ls2.gamma", "global_pool": "token", "eps": "1e-6"},
        sanity=[{"what": "GluMlp gate_last=True (x1 * silu(x2): the other half gated)", "apply": gate_swapped},
                {"what": "ls1/ls2 gamma -> 1", "apply": gammas_to_one}],
        description="timm VisionTransformer as vit_giant_patch14_dinov2 (SwiGLUPacked MLP, LayerScale) at 42 px, "
                    "patch 14, D 48, depth 3, 3 heads; 5-class head; config.json from save_config_for_hf.",
        other=dict(size=56, filter=vt_mod.checkpoint_filter_fn), **common)
    cases.append(c)

    # 2. EVA-02 tiny: fused qkv + q/v bias, RoPE cat, packed SwiGLU, avg + fc_norm
    args = dict(img_size=42, patch_size=14, embed_dim=48, depth=3, num_heads=3)
    cases.append(mtf.Case(
        name="eva02_tiny", layout="eva", seed=72002, build=builder("eva02_tiny_patch14_224", args),
        save=saver("eva02_tiny_patch14_224", args, True), num_prefix=1, class_token=True, pos_prefix=1,
        mean=timm.data.OPENAI_CLIP_MEAN, std=timm.data.OPENAI_CLIP_STD,
        settings={"architecture": "eva02_tiny_patch14_224",
                  "model_args (timm registry)": "patch_size=14, embed_dim=192, depth=12, num_heads=3, "
                                                "mlp_ratio=4*2/3, swiglu_mlp=True, use_rot_pos_emb=True, "
                                                "ref_feat_shape=(16, 16)",
                  "rope": "RotaryEmbeddingCat(dim=head_dim 16, in_pixels=False, temperature 10000, "
                          "ref_feat_shape (16, 16)): grid 3x3 coordinates scaled by 16/3; interleaved rot "
                          "(rope_rotate_half False); class token unrotated",
                  "qkv": "qkv.weight (no bias) + q_bias, zero k_bias buffer, v_bias",
                  "mlp": "GluMlp(hidden 2*128, SiLU, gate_last=False) packed: fc1 (256, 48), fc2 (48, 128)",
                  "global_pool": "avg over patches, fc_norm; norm Identity", "eps": "1e-6"},
        sanity=[{"what": "rope -> None (no rotary positions)", "apply": no_rope},
                {"what": "rope without ref_feat_shape scaling", "apply": rope_no_ref},
                {"what": "rotate-half layout instead of interleaved", "apply": rope_layout_swapped},
                {"what": "GluMlp gate_last=True", "apply": gate_swapped}],
        description="timm Eva as eva02_tiny_patch14_224 at 42 px (grid 3x3, rope ref_feat_shape 16x16), D 48, "
                    "depth 3, 3 heads; 5-class head; config.json from save_config_for_hf.",
        other=dict(size=56, filter=eva_mod.checkpoint_filter_fn), **common))

    # 3. EVA-02 base: separate q/k/v projections, SwiGLU fc1_g / fc1_x + sub-LN mlp.norm
    args = dict(img_size=42, patch_size=14, embed_dim=48, depth=3, num_heads=3)
    cases.append(mtf.Case(
        name="eva02_base", layout="eva", seed=72003, build=builder("eva02_base_patch14_224", args),
        save=saver("eva02_base_patch14_224", args, False), num_prefix=1, class_token=True, pos_prefix=1,
        mean=timm.data.OPENAI_CLIP_MEAN, std=timm.data.OPENAI_CLIP_STD,
        settings={"architecture": "eva02_base_patch14_224",
                  "model_args (timm registry)": "qkv_fused=False, mlp_ratio=4*2/3, swiglu_mlp=True, scale_mlp=True, "
                                                "use_rot_pos_emb=True, ref_feat_shape=(16, 16)",
                  "qkv": "attn.q_proj (weight, bias), attn.k_proj (weight only), attn.v_proj (weight, bias)",
                  "mlp": "SwiGLU: fc2(norm(silu(fc1_g(x)) * fc1_x(x))), fc1_g/fc1_x (128, 48), norm LayerNorm(128)",
                  "global_pool": "avg + fc_norm", "eps": "1e-6"},
        sanity=[{"what": "rope -> None", "apply": no_rope},
                {"what": "mlp.norm -> Identity", "apply": mlp_norm_off}],
        description="timm Eva as eva02_base_patch14_224 (separate q/k/v, SwiGLU fc1_g/fc1_x with sub-LayerNorm) at "
                    "42 px, D 48, depth 3, 3 heads; 5-class head.",
        other=dict(size=56, filter=eva_mod.checkpoint_filter_fn), **common))

    # 4. EVA-02 with a plain GELU MLP, LayerScale, class-token pool
    args = dict(img_size=42, patch_size=14, embed_dim=48, depth=3, num_heads=3, swiglu_mlp=False,
                mlp_ratio=4.0, init_values=0.5, global_pool="token")
    cases.append(mtf.Case(
        name="eva02_gelu", layout="eva", seed=72004, build=builder("eva02_tiny_patch14_224", args),
        save=saver("eva02_tiny_patch14_224", args, False), num_prefix=1, class_token=True, pos_prefix=1,
        mean=timm.data.OPENAI_CLIP_MEAN, std=timm.data.OPENAI_CLIP_STD,
        settings={"architecture": "eva02_tiny_patch14_224 with swiglu_mlp=False, mlp_ratio=4, init_values=0.5, "
                                  "global_pool='token'",
                  "mlp": "Mlp fc1 (192, 48), exact GELU, fc2", "LayerScale": "gamma_1 / gamma_2",
                  "global_pool": "token: norm then the class token (no fc_norm)"},
        sanity=[{"what": "rope -> None", "apply": no_rope},
                {"what": "gamma_1/gamma_2 -> 1", "apply": gammas_to_one}],
        description="timm Eva as eva02_tiny_patch14_224 but with a plain GELU MLP (its tensors are a timm ViT's "
                    "plus q_bias / v_bias), LayerScale, class-token pool; the case that rendered with RoPE dropped.",
        other=dict(size=56, filter=eva_mod.checkpoint_filter_fn), **common))

    # 5. DINOv3 small: rope dinov3, 4 registers, LayerScale, no pos_embed, no qkv bias
    args = dict(img_size=32, patch_size=8, embed_dim=48, depth=3, num_heads=3)
    cases.append(mtf.Case(
        name="dinov3_small", layout="eva", seed=72005, build=builder("vit_small_patch16_dinov3", args),
        save=saver("vit_small_patch16_dinov3", args, True), num_prefix=5, class_token=True, pos_prefix=0,
        mean=timm.data.IMAGENET_DEFAULT_MEAN, std=timm.data.IMAGENET_DEFAULT_STD,
        settings={"architecture": "vit_small_patch16_dinov3",
                  "model_args (timm registry)": "dynamic_img_size=True, qkv_bias=False, init_values=1e-5, "
                                                "rope_type='dinov3', rope_temperature=100, rope_rotate_half=True, "
                                                "use_abs_pos_emb=False, num_reg_tokens=4, use_fc_norm=False, "
                                                "norm_layer=partial(LayerNorm, eps=1e-5)",
                  "rope": "RotaryEmbeddingDinoV3: coords (i + 0.5) / g * 2 - 1, periods 100^(2j/(d/2)), "
                          "angles 2 pi c / p, rotate-half; 5 prefix tokens unrotated",
                  "global_pool": "avg over patches (default) after norm; no fc_norm"},
        sanity=[{"what": "rope -> None", "apply": no_rope},
                {"what": "interleaved layout instead of rotate-half", "apply": rope_layout_swapped},
                {"what": "gamma_1/gamma_2 -> 1", "apply": gammas_to_one},
                {"what": "reg_token -> 0", "apply": lambda m: m.reg_token.data.zero_()}],
        description="timm Eva as vit_small_patch16_dinov3 at 32 px, patch 8 (grid 4x4), D 48, depth 3, 3 heads, "
                    "4 registers; 5-class head; config.json from save_config_for_hf.",
        other=dict(size=48, filter=eva_mod.checkpoint_filter_fn), **common))

    # 6. DINOv3 S+ with q/v bias: SwiGLU fc1_g / fc1_x (align_to 8)
    args = dict(img_size=32, patch_size=8, embed_dim=48, depth=3, num_heads=3)
    cases.append(mtf.Case(
        name="dinov3_splus_qkvb", layout="eva", seed=72006, build=builder("vit_small_plus_patch16_dinov3_qkvb", args),
        save=saver("vit_small_plus_patch16_dinov3_qkvb", args, False), num_prefix=5, class_token=True, pos_prefix=0,
        mean=timm.data.IMAGENET_DEFAULT_MEAN, std=timm.data.IMAGENET_DEFAULT_STD,
        settings={"architecture": "vit_small_plus_patch16_dinov3_qkvb",
                  "model_args (timm registry)": "qkv_bias=True, mlp_ratio=6, swiglu_mlp=True, swiglu_align_to=8, "
                                                "rope_type='dinov3', rope_rotate_half=True, num_reg_tokens=4",
                  "mlp": "SwiGLU fc1_g / fc1_x (288, 48), no norm, fc2 (48, 288)"},
        sanity=[{"what": "rope -> None", "apply": no_rope}],
        description="timm Eva as vit_small_plus_patch16_dinov3_qkvb at 32 px, patch 8, D 48, depth 3, 3 heads.",
        other=dict(size=48, filter=eva_mod.checkpoint_filter_fn), **common))
    return cases


def add_other_size(case, folder, seed):
    """The saved weights in timm's model built at the second size (loaded through the family's
    checkpoint_filter_fn), on a second input; attn_other.npy and meta other_size."""
    S2 = case.other["size"]
    sd = case.load_sd(folder)
    gen = torch.Generator().manual_seed(seed)
    x2 = torch.randn((1, 3, S2, S2), generator=gen, dtype=torch.float64).float()
    runs = {}
    for dt in (torch.float32, torch.float64):
        m = case.build(S2).eval()
        m.load_state_dict(case.other["filter"](copy.deepcopy(sd), m))
        m = m.to(dt)
        a, _, _ = mtf.Capture(case.attn_modules(m), None).run(m, x2.to(dt), case.forward)
        runs[dt] = a
    meta = json.loads(Path(folder, "meta.json").read_text())
    blocks = meta["blocks"]
    a64, a32 = runs[torch.float64], runs[torch.float32]
    spread = mtf.max_diff(a32[blocks].double(), a64[blocks])
    fl.save_npy(os.path.join(folder, "input_other.npy"), x2[0].numpy())
    fl.save_npy(os.path.join(folder, "attn_other.npy"), a64[blocks].numpy())
    meta["other_size"] = {"image_size": S2, "input": "input_other.npy", "attn": "attn_other.npy",
                          "tolerance": max(1e-5, 2 * spread), "spread_f32_f64": spread,
                          "built": "timm.create_model(arch, img_size=%d, ...) + %s.%s" % (
                              S2, case.other["filter"].__module__, case.other["filter"].__name__),
                          "mean_row_max": [mtf.row_max_mean(a64[i]) for i in range(a64.shape[0])]}
    meta["generator"] = GENERATOR
    fl.write_meta(folder, **meta)
    print("    other_size %d: T=%d spread %.1e" % (S2, a64.shape[-1], spread))


def add_rollout(folder):
    """rollout.npy (T, T): numpy attention rollout (Abnar & Zuidema 2020: heads averaged, (A + I) / 2, rows
    normalised, R = A_L-1 ... A_0) of timm's own float64 attention, every block (depth 3 = meta blocks)."""
    import numpy as np
    meta = json.loads(Path(folder, "meta.json").read_text())
    assert meta["blocks"] == list(range(meta["depth"])), meta["blocks"]
    attn = np.load(os.path.join(folder, "attn.npy")).astype(np.float64)  # (L, H, T, T)
    T = attn.shape[-1]
    R = np.eye(T)
    for a in attn:
        A = (a.mean(0) + np.eye(T)) / 2
        A = A / A.sum(-1, keepdims=True)
        R = A @ R
    fl.save_npy(os.path.join(folder, "rollout.npy"), R.astype(np.float32))
    meta["rollout"] = {"path": "rollout.npy", "what": "numpy rollout of attn.npy (every block): mean over heads, "
                       "(A + I) / 2, rows normalised, R = A_2 A_1 A_0"}
    fl.write_meta(folder, **meta)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timm", required=True, help="work tree of huggingface/pytorch-image-models")
    ap.add_argument("--timm-commit")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "families"))
    ap.add_argument("--cases", default="", help="comma-separated subset of case names")
    ap.add_argument("--explain-only", action="store_true",
                    help="write only the autograd explanation references (tools/fixture_explain.py) of the existing cases")
    args = ap.parse_args()
    timm, tc = mtf.import_timm(args.timm, args.timm_commit, fused_attn=False)
    want = [c for c in args.cases.split(",") if c]
    for c in make_cases(tc):
        if want and c.name not in want:
            continue
        build_at = c.build
        S = build_at().patch_embed.img_size[0]
        P = build_at().patch_embed.patch_size[0]
        mtf.S, mtf.P = S, P  # run_case writes them to meta.json
        c.build = lambda size=None, b=build_at: b(size)
        folder = os.path.join(args.out, c.name)
        token_pool = c.settings.get("global_pool", "").startswith("token")
        if args.explain_only:
            fixture_explain.add_explain(c, folder, token_pool, "timm's own model (%s)" % c.name)
            continue
        gen = torch.Generator().manual_seed(c.seed + 1)
        x = torch.randn((3, S, S), generator=gen, dtype=torch.float64).float()
        mtf.run_case(c, args.out, x)
        add_other_size(c, os.path.join(args.out, c.name), c.seed + 2)
        add_rollout(os.path.join(args.out, c.name))
        fixture_explain.add_explain(c, folder, token_pool, "timm's own model (%s)" % c.name)


if __name__ == "__main__":
    main()
