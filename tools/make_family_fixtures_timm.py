#!/usr/bin/python3
"""Family fixtures from timm, facebookresearch/deit (DeiT III) and facebookresearch/mae, made by
running each family's OWN model code (see tests/fixtures/families/FORMAT.md).

    /usr/bin/python3 tools/make_family_fixtures_timm.py \\
        --timm /work/ext/timm --deit /work/ext/deit --mae /work/ext/mae \\
        [--out tests/fixtures/families] [--cases timm_clip,deit3,...]

The three paths are work trees of the family repositories, extracted outside this repository, e.g.
    git --git-dir=<bare git dir> archive HEAD | tar -x -C /work/ext/timm
    git --git-dir=<bare git dir> rev-parse HEAD > /work/ext/timm/.commit
Their commits (from --timm-commit / --deit-commit / --mae-commit, else the work tree's `.commit` file,
else `git rev-parse HEAD` in it) are written to each case's meta.json.  None of their code is copied here.

Needs only Debian's python3 (torch 1.13, numpy).  Deterministic (fixed seeds).

Shims (recorded per case in meta.json "shims"):
  * torchvision is not installed: an import hook answers `import torchvision...` / `from torchvision.x
    import Y` with placeholder modules/classes.  timm imports torchvision at import time only for data
    transforms, datasets and FrozenBatchNorm2d; no torchvision code runs in any forward used here.
  * MAE: numpy 1.24 removed `np.float`, used by mae/util/pos_embed.py -> `np.float = float`.
  * MAE: models_mae.py passes `qk_scale=None` to timm's Block, a keyword newer timm no longer has ->
    models_mae.Block is replaced by a subclass that drops qk_scale when it is None (None meant the
    default head_dim ** -0.5 scale, which timm's Attention uses).
  * deit / MAE `args`: their main scripts cannot be imported here (deit main.py needs
    timm.data.transforms._pil_interp, gone from newer timm; MAE main_pretrain.py asserts timm 0.3.2 and
    imports tensorboard), so their own `get_args_parser` function is taken out of the file with `ast`
    and run alone to build the argparse.Namespace saved in the checkpoint.
  * MAE optimizer: main_pretrain.py uses timm's `optim_factory.add_weight_decay`, renamed
    `param_groups_weight_decay` in newer timm (same groups).
"""

import argparse
import ast
import copy
import math
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "tools/make_family_fixtures_timm.py"
S, P = 32, 8                      # image size, patch size: 4x4 grid, 16 patches
NUM_CLASSES = 5

SHIM_TORCHVISION = ("torchvision is not installed: an import hook answers timm's import-time "
                    "`from torchvision... import X` (data transforms/datasets, FrozenBatchNorm2d) with "
                    "placeholder modules; no torchvision code runs in the model forward")


# --------------------------------------------------------------------------
# Shims
# --------------------------------------------------------------------------

def install_torchvision_stub():
    import importlib.abc
    import importlib.machinery
    import types

    class _PMeta(type):
        def __getattr__(cls, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _PMeta(cls.__name__ + "." + name, (), {})

    class _Mod(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            v = _PMeta(self.__name__ + "." + name, (), {})
            setattr(self, name, v)
            return v

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            if fullname == "torchvision" or fullname.startswith("torchvision."):
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            m = _Mod(spec.name)
            m.__path__ = []
            return m

        def exec_module(self, module):
            pass

    try:
        import torchvision  # noqa: F401
        return False
    except ImportError:
        sys.meta_path.insert(0, _Finder())
        return True


def load_get_args_parser(path):
    """The family's own get_args_parser(), taken out of its main script with ast and run alone."""
    src = Path(path).read_text()
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_args_parser")
    ns = {"argparse": argparse}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(path), "exec"), ns)
    return ns["get_args_parser"]


def git_commit(path, given):
    if given:
        return given
    f = os.path.join(path, ".commit")
    if os.path.exists(f):
        c = Path(f).read_text().strip()
        assert len(c) == 40, c
        return c
    for d in (path, os.path.join(path, ".git")):
        try:
            return subprocess.check_output(["git", "-C", d, "rev-parse", "HEAD"], stderr=subprocess.DEVNULL,
                                           text=True).strip()
        except Exception:
            pass
    raise SystemExit("cannot find the commit of %s: pass it with --<family>-commit" % path)


# --------------------------------------------------------------------------
# Random weights
# --------------------------------------------------------------------------

def rn(gen, shape, std, mean=0.0):
    return torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * std + mean


TOKEN_PARAMS = ("cls_token", "reg_token", "pos_embed", "latent", "mask_token", "dist_token")


def randomise(model, gen, skip=()):
    """Every LayerNorm weight 1+N(0,.3), bias N(0,.2); Linear/Conv weight N(0, 1/fan_in), bias N(0,.1);
    tokens / pos_embed / latent N(0,.5); LayerScale gammas 0.6+N(0,.3)."""
    with torch.no_grad():
        for _, mod in model.named_modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(rn(gen, mod.weight.shape, 0.3, 1.0))
                mod.bias.copy_(rn(gen, mod.bias.shape, 0.2))
            elif isinstance(mod, (nn.Linear, nn.Conv2d)):
                fan_in = mod.weight[0].numel()
                mod.weight.copy_(rn(gen, mod.weight.shape, 1.0 / math.sqrt(fan_in)))
                if mod.bias is not None:
                    mod.bias.copy_(rn(gen, mod.bias.shape, 0.1))
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if name in skip:
                continue
            if leaf in TOKEN_PARAMS:
                p.copy_(rn(gen, p.shape, 0.5))
            elif leaf == "gamma" or leaf.startswith("gamma_"):
                p.copy_(rn(gen, p.shape, 0.3, 0.6))


def row_max_mean(a):
    return float(a.max(-1).values.mean())


# --------------------------------------------------------------------------
# Capture from the family's own forward
# --------------------------------------------------------------------------

class Capture:
    """Registers forward pre-hooks on each attention module's attn_drop (its input is the softmax
    output) and, optionally, records the softmax inside an attention-pool module's forward."""

    def __init__(self, attn_modules, pool_module=None):
        self.attn_modules = attn_modules
        self.pool_module = pool_module

    def run(self, model, x, forward):
        rec, pool_rec, handles = [], [], []
        for m in self.attn_modules:
            if hasattr(m, "fused_attn"):
                m.fused_attn = False
            handles.append(m.attn_drop.register_forward_pre_hook(lambda mod, inp: rec.append(inp[0].detach().clone())))
        if self.pool_module is not None:
            self.pool_module.fused_attn = False
            orig = torch.Tensor.softmax
            state = {}

            def patched(t, *a, **k):
                out = orig(t, *a, **k)
                pool_rec.append(out.detach().clone())
                return out

            def pre(mod, inp):
                state["orig"] = torch.Tensor.softmax
                torch.Tensor.softmax = patched

            def post(mod, inp, out):
                torch.Tensor.softmax = state["orig"]

            handles.append(self.pool_module.register_forward_pre_hook(pre))
            handles.append(self.pool_module.register_forward_hook(post))
        orig_softmax = torch.Tensor.softmax
        try:
            with torch.no_grad():
                out = forward(model, x)
        finally:
            torch.Tensor.softmax = orig_softmax
            for h in handles:
                h.remove()
        assert len(rec) == len(self.attn_modules), (len(rec), len(self.attn_modules))
        attn = torch.stack([r[0] for r in rec], 0)          # (L, H, T, T), batch 1
        pool = None
        if self.pool_module is not None:
            assert len(pool_rec) == 1, len(pool_rec)
            pool = pool_rec[0][0, :, 0, :]                    # (H, T): latent_len 1
        return attn, pool, (None if out is None else out[0].detach())


# --------------------------------------------------------------------------
# Case machinery
# --------------------------------------------------------------------------

class Case:
    """name, family, layout, build() -> model (family init), attn_modules(model), pool_module(model),
    forward(model, x) -> logits or None, qk_groups(model) -> per block list of (param, rows) to scale,
    pool_qk(model) -> list of (param, rows), skip (params randomise() leaves alone), sanity list."""

    def __init__(self, **kw):
        self.pool_module = lambda m: None
        self.pool_qk = None
        self.skip = ()
        self.sanity = []
        self.info = {}
        self.__dict__.update(kw)


def scale_rows(items, s):
    with torch.no_grad():
        for p, rows, base in items:
            if rows is None:
                p.copy_(base * s)
            else:
                p[rows].copy_(base * s)


def with_base(items):
    return [(p, rows, (p.detach().clone() if rows is None else p[rows].detach().clone())) for p, rows in items]


CANDIDATES = [0.5 * 1.15 ** k for k in range(40)]
TARGET = 0.6


def make_peaky(case, model, x):
    """Scale each block's q/k projections (block by block, in order) until that block's mean row max
    of the attention probabilities is >= TARGET; then the attention pool's (if any)."""
    cap = Capture(case.attn_modules(model), case.pool_module(model))
    groups = [with_base(g) for g in case.qk_groups(model)]
    chosen = []
    for i, g in enumerate(groups):
        for s in CANDIDATES:
            scale_rows(g, s)
            attn, _, _ = cap.run(model, x, case.forward)
            if row_max_mean(attn[i]) >= TARGET:
                break
        else:
            raise RuntimeError("%s: block %d never gets peaky" % (case.name, i))
        chosen.append(s)
    pool_s = None
    if case.pool_qk is not None:
        g = with_base(case.pool_qk(model))
        for s in CANDIDATES:
            scale_rows(g, s)
            _, pool, _ = cap.run(model, x, case.forward)
            if row_max_mean(pool) >= TARGET:
                pool_s = s
                break
        else:
            raise RuntimeError("%s: pool never gets peaky" % case.name)
    return chosen, pool_s


def max_diff(a, b):
    return float((a - b).abs().max())


def run_case(case, out_root, x32):
    gen = torch.Generator().manual_seed(case.seed)
    torch.manual_seed(case.seed)                 # the family's own init draws from the global generator
    model = case.build().float().eval()
    init_model = copy.deepcopy(model)           # the family's own initialisation (used by deit3's EMA)
    randomise(model, gen, skip=case.skip)
    scales, pool_scale = make_peaky(case, model, x32.unsqueeze(0))
    folder = os.path.join(out_root, case.name)
    os.makedirs(folder, exist_ok=True)
    for fn in os.listdir(folder):
        os.remove(os.path.join(folder, fn))

    # float32 and float64 runs of the family's own forward on the stored float32 weights / input
    x = x32.unsqueeze(0)
    m32 = model
    m64 = copy.deepcopy(model).double()
    cap32 = Capture(case.attn_modules(m32), case.pool_module(m32))
    cap64 = Capture(case.attn_modules(m64), case.pool_module(m64))
    a32, p32, l32 = cap32.run(m32, x, case.forward)
    a64, p64, l64 = cap64.run(m64, x.double(), case.forward)
    L = a64.shape[0]
    blocks = sorted({0, L // 2, L - 1})
    spread = max_diff(a32[blocks].double(), a64[blocks])
    tol = max(1e-5, 2 * spread)
    meta_extra = {}
    fl.save_npy(os.path.join(folder, "input.npy"), x32.numpy())
    fl.save_npy(os.path.join(folder, "attn.npy"), a64[blocks].numpy())
    if l64 is not None:
        fl.save_npy(os.path.join(folder, "logits.npy"), l64.numpy())
        lspread = max_diff(l32.double(), l64)
        meta_extra["logits_spread_f32_f64"] = lspread
        meta_extra["logits_tolerance"] = max(1e-4, 2 * lspread)
    if p64 is not None:
        fl.save_npy(os.path.join(folder, "pool_attn.npy"), p64.numpy())
        pspread = max_diff(p32.double(), p64)
        meta_extra["pool_spread_f32_f64"] = pspread
        meta_extra["pool_tolerance"] = max(1e-5, 2 * pspread)
        meta_extra["pool_mean_row_max"] = row_max_mean(p64)

    # weights, written as the family writes them
    files, saved_info = case.save(folder, model, init_model)

    # round trip: the saved file, loaded into a fresh model, gives the same attention (float64)
    fresh = case.build().double().eval()
    fresh.load_state_dict(case.load_sd(folder))
    fa, fp, fo = Capture(case.attn_modules(fresh), case.pool_module(fresh)).run(fresh, x.double(), case.forward)
    rt = max_diff(fa, a64)
    assert rt == 0.0, (case.name, rt)

    # sanity: dropping the family-specific pieces changes the numbers by far more than the tolerance
    sanity = []
    for s in case.sanity:
        mm = copy.deepcopy(m64)
        s["apply"](mm)
        sa, sp, so = Capture(case.attn_modules(mm), case.pool_module(mm)).run(mm, x.double(), case.forward)
        target = s.get("target", "attn")
        if target == "attn":
            d, t = max_diff(sa[blocks], a64[blocks]), tol
        elif target == "pool":
            d, t = max_diff(sp, p64), meta_extra["pool_tolerance"]
        else:
            d, t = max_diff(so, l64), meta_extra["logits_tolerance"]
        entry = {"change": s["what"], "compares": target, "max_abs_diff": d, "ratio_to_tolerance": d / t}
        if s.get("required", True):
            assert d > 100 * t, (case.name, s["what"], d, t)
            entry["passes_100x"] = True
        else:
            entry["info_only"] = True
            entry["passes_100x"] = bool(d > 100 * t)
        sanity.append(entry)
    for extra in case.extra_checks(m64, x.double(), a64, l64, blocks) if hasattr(case, "extra_checks") else []:
        if extra["compares"] == "logits":
            extra["ratio_to_tolerance"] = extra["max_abs_diff"] / meta_extra["logits_tolerance"]
            extra["passes_100x"] = bool(extra["ratio_to_tolerance"] > 100)
        sanity.append(extra)
    for what, sd in case.traps(folder) if hasattr(case, "traps") else []:
        mm = case.build().double().eval()
        mm.load_state_dict(sd)
        ta, _, _ = Capture(case.attn_modules(mm), case.pool_module(mm)).run(mm, x.double(), case.forward)
        d = max_diff(ta[blocks], a64[blocks])
        assert d > 100 * tol, (case.name, what, d)
        sanity.append({"change": what, "compares": "attn", "max_abs_diff": d, "ratio_to_tolerance": d / tol,
                       "passes_100x": True})

    H, T = a64.shape[1], a64.shape[-1]
    meta = {"case": case.name, "family": case.family, "layout": case.layout, "files": files,
            "heads_arg": case.heads_arg,
            "image_size": S, "patch": P, "dim": case.dim, "depth": L, "heads": H, "tokens": T,
            "num_prefix": case.num_prefix, "class_token": case.class_token, "blocks": blocks,
            "spread_f32_f64": spread, "tolerance": tol}
    meta.update({k: v for k, v in meta_extra.items() if k in ("logits_tolerance",)})
    meta.update({"mean": list(case.mean), "std": list(case.std),
                 "source": case.source, "shims": case.shims, "generator": GENERATOR,
                 "description": case.description})
    meta.update({k: v for k, v in meta_extra.items() if k != "logits_tolerance"})
    meta["pos_prefix"] = case.pos_prefix
    meta["settings"] = case.settings
    meta["weights"] = {"seed": case.seed, "randomise": "LayerNorm w 1+N(0,.3) b N(0,.2); Linear/Conv w N(0,1/fan_in) "
                       "b N(0,.1); cls/reg/pos/latent/mask tokens N(0,.5); LayerScale gamma 0.6+N(0,.3)"
                       + ("; except " + ", ".join(case.skip) + " (family init kept)" if case.skip else ""),
                       "qk_scale_per_block": scales, "pool_qk_scale": pool_scale,
                       "mean_row_max": [row_max_mean(a64[i]) for i in range(L)]}
    meta["capture"] = case.capture
    meta["roundtrip_max_abs_diff"] = rt
    meta["sanity"] = sanity
    meta.update(saved_info)
    meta["state_dict"] = {k: list(v.shape) for k, v in case.load_sd(folder).items()}
    fl.write_meta(folder, **meta)
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print("%-20s T=%-2d H=%d spread %.1e tol %.1e row-max %s  %.0f KB" % (
        case.name, T, H, spread, tol, ["%.2f" % v for v in meta["weights"]["mean_row_max"]], size / 1024))
    for s_ in sanity:
        print("    sanity %-60s %.3e (x%s tol)" % (s_["change"][:60], s_["max_abs_diff"],
                                                   "%.0f" % s_["ratio_to_tolerance"] if "ratio_to_tolerance" in s_ else "-"))
    return meta


# --------------------------------------------------------------------------
# timm cases
# --------------------------------------------------------------------------

def timm_cases(timm_commit):
    import timm
    from timm.layers import LayerScale
    from timm.models._hub import save_config_for_hf
    from timm.models.vision_transformer import global_pool_nlc

    src = {"repo": "huggingface/pytorch-image-models", "commit": timm_commit,
           "files": ["timm/models/vision_transformer.py", "timm/layers/attention.py",
                     "timm/layers/attention_pool.py", "timm/layers/mlp.py", "timm/layers/patch_embed.py",
                     "timm/layers/norm.py", "timm/layers/layer_scale.py", "timm/layers/activations.py",
                     "timm/models/_hub.py"]}
    tiny = dict(img_size=S, patch_size=P, embed_dim=48, depth=3, num_heads=3)

    def builder(arch, **extra):
        def build():
            m = timm.create_model(arch, pretrained=False, num_classes=NUM_CLASSES, **tiny, **extra)
            cfg = dict(m.pretrained_cfg)
            cfg["input_size"] = (3, S, S)
            cfg["num_classes"] = NUM_CLASSES
            m.pretrained_cfg = cfg
            return m
        return build

    def attn_modules(m):
        return [b.attn for b in m.blocks]

    def qk_qkv(m):
        D = m.embed_dim
        out = []
        for b in m.blocks:
            g = [(b.attn.qkv.weight, slice(0, 2 * D))]
            if b.attn.qkv.bias is not None:
                g.append((b.attn.qkv.bias, slice(0, 2 * D)))
            out.append(g)
        return out

    def qk_norms(m):
        return [[(b.attn.q_norm.weight, None), (b.attn.q_norm.bias, None),
                 (b.attn.k_norm.weight, None), (b.attn.k_norm.bias, None)] for b in m.blocks]

    def forward(m, x):
        return m(x)

    def saver(arch, model_args, config, safetensors=False):
        # model.pth always; model.safetensors (the same tensors) only where asked (timm_clip, timm_siglip):
        # one safetensors copy per timm layout family is enough, the rest would only duplicate bytes
        def save(folder, model, _init):
            sd = model.state_dict()
            torch.save(sd, os.path.join(folder, "model.pth"))
            files = [{"path": "model.pth", "key": None}]
            if safetensors:
                fl.write_safetensors(os.path.join(folder, "model.safetensors"), sd, "F32", metadata={"format": "pt"})
                files.append({"path": "model.safetensors"})
            info = {}
            if config:
                save_config_for_hf(model, Path(folder) / "config.json", model_args=model_args)
                info["config"] = {"path": "config.json", "written_by": "timm.models._hub.save_config_for_hf",
                                  "architecture": arch, "model_args": model_args}
            return files, info
        return save

    def load_sd(folder):
        return torch.load(os.path.join(folder, "model.pth"), map_location="cpu")

    def set_eps(eps):
        def f(m):
            for mod in m.modules():
                if isinstance(mod, nn.LayerNorm):
                    mod.eps = eps
        return f

    def gammas_to_one(m):
        for mod in m.modules():
            if isinstance(mod, LayerScale):
                with torch.no_grad():
                    mod.gamma.fill_(1.0)

    def tanh_gelu(m):
        for b in list(m.blocks) + ([m.attn_pool] if getattr(m, "attn_pool", None) is not None else []):
            b.mlp.act = nn.GELU(approximate="tanh")

    capture = ("timm's own VisionTransformer.forward (fused_attn=False on every Attention); attention "
               "probabilities = the input of each block's attn.attn_drop (forward pre-hook)")
    common = dict(family="timm", source=src, shims=[SHIM_TORCHVISION], attn_modules=attn_modules,
                  forward=forward, load_sd=load_sd, dim=48, capture=capture)

    def norm_settings(eps):
        return {"norm1/norm2/norm/norm_pre/fc_norm/attn_pool.norm eps": eps}

    cases = []

    # 1. CLIP
    clip_args = dict(tiny)
    cases.append(Case(
        name="timm_clip", layout="timm-clip", seed=71001, build=builder("vit_base_patch16_clip_224"),
        qk_groups=qk_qkv, save=saver("vit_base_patch16_clip_224", clip_args, True, safetensors=True), heads_arg=None,
        num_prefix=1, class_token=True, pos_prefix=1,
        mean=timm.data.OPENAI_CLIP_MEAN, std=timm.data.OPENAI_CLIP_STD,
        settings={"architecture": "vit_base_patch16_clip_224",
                  "model_args (timm registry)": "patch_size=16, embed_dim=768, depth=12, num_heads=12, pre_norm=True, "
                                                "norm_layer=partial(LayerNorm, eps=1e-5)",
                  "norm eps": "1e-5 for every LayerNorm (norm_pre, norm1, norm2, norm)",
                  "act": "nn.GELU (exact erf)", "global_pool": "token (class token, x[:,0])",
                  "fc_norm": "none (Identity); final norm = norm", "qkv_bias": True,
                  "patch_embed bias": "absent (pre_norm=True -> PatchEmbed(bias=False))",
                  "pos_embed": "(1, 1+N, D), class token included; cat(cls, patches) then + pos_embed",
                  "norm_pre": "LayerNorm applied to tokens after pos_embed, before blocks",
                  "no_embed_class": False, "dynamic_img_size": False,
                  "heads": "config.json model_args.num_heads (3); name alone says 12",
                  "mean/std": "OPENAI_CLIP_MEAN/STD (pretrained_cfg of the default tag laion2b_ft_in12k_in1k)"},
        sanity=[{"what": "norm_pre -> Identity", "apply": lambda m: setattr(m, "norm_pre", nn.Identity())},
                {"what": "every LayerNorm eps 1e-5 -> 1e-6 (info)", "apply": set_eps(1e-6), "required": False}],
        description="timm VisionTransformer as vit_base_patch16_clip_224 (pre_norm -> norm_pre, LayerNorm eps 1e-5, "
                    "no patch_embed bias, GELU, class-token pool) but tiny (32px, patch 8, D 48, depth 3, 3 heads), "
                    "with a 5-class head. config.json from timm's own save_config_for_hf.",
        **common))

    # 2. CLIP QuickGELU
    cases.append(Case(
        name="timm_clip_quickgelu", layout="timm-clip", seed=71002, build=builder("vit_base_patch16_clip_quickgelu_224"),
        qk_groups=qk_qkv, save=saver("vit_base_patch16_clip_quickgelu_224", dict(tiny), True), heads_arg=None,
        num_prefix=1, class_token=True, pos_prefix=1,
        mean=timm.data.OPENAI_CLIP_MEAN, std=timm.data.OPENAI_CLIP_STD,
        settings={"architecture": "vit_base_patch16_clip_quickgelu_224",
                  "model_args (timm registry)": "patch_size=16, embed_dim=768, depth=12, num_heads=12, pre_norm=True, "
                                                "norm_layer=partial(LayerNorm, eps=1e-5), act_layer='quick_gelu'",
                  "norm eps": "1e-5 for every LayerNorm", "act": "QuickGELU: x * sigmoid(1.702 * x)",
                  "global_pool": "token", "fc_norm": "none; final norm = norm", "qkv_bias": True,
                  "patch_embed bias": "absent", "pos_embed": "(1, 1+N, D), cat then add",
                  "no_embed_class": False, "dynamic_img_size": False,
                  "heads": "config.json model_args.num_heads (3)",
                  "QuickGELU source": "only the architecture name (*_clip_quickgelu_*) says it; tensors identical to timm_clip's",
                  "mean/std": "OPENAI_CLIP_MEAN/STD (default tag metaclip_2pt5b)"},
        sanity=[{"what": "mlp act QuickGELU -> nn.GELU (blocks 1, 2 change; block 0's attention comes before any MLP)",
                 "apply": lambda m: [setattr(b.mlp, "act", nn.GELU()) for b in m.blocks]},
                {"what": "norm_pre -> Identity", "apply": lambda m: setattr(m, "norm_pre", nn.Identity())}],
        description="As timm_clip but vit_base_patch16_clip_quickgelu_224 (act_layer='quick_gelu'); the only "
                    "difference visible in the folder is config.json's architecture name.",
        **common))

    # 3. qk_norm + LayerScale
    cases.append(Case(
        name="timm_qknorm", layout="timm", seed=71003,
        build=builder("vit_base_patch16_224", qk_norm=True, init_values=0.5),
        qk_groups=qk_norms, save=saver("vit_base_patch16_224", None, False), heads_arg=3,
        num_prefix=1, class_token=True, pos_prefix=1,
        mean=timm.data.IMAGENET_INCEPTION_MEAN, std=timm.data.IMAGENET_INCEPTION_STD,
        settings={"built_as": "timm.create_model('vit_base_patch16_224', qk_norm=True, init_values=0.5, **tiny)",
                  "norm eps": "1e-6 for every LayerNorm incl. attn.q_norm / attn.k_norm (timm.layers.LayerNorm "
                              "default; Block passes the model's norm_layer to Attention)",
                  "q_norm/k_norm": "LayerNorm over head_dim (16), applied per head to q and k after the qkv split, "
                                   "before the head_dim**-0.5 scale",
                  "LayerScale": "x = x + ls1.gamma * attn(...); x = x + ls2.gamma * mlp(...)",
                  "act": "nn.GELU (exact)", "global_pool": "token", "fc_norm": "none; final norm = norm",
                  "qkv_bias": True, "patch_embed bias": "present", "pos_embed": "(1, 1+N, D), cat then add",
                  "no_embed_class": False, "dynamic_img_size": False,
                  "heads": "not in the file (no config.json): heads_arg 3; note q_norm.weight has head_dim (16) "
                           "entries, so D / 16 = 3",
                  "mean/std": "IMAGENET_INCEPTION (0.5) (vit_base_patch16_224 default tag augreg2_in21k_ft_in1k)"},
        sanity=[{"what": "attn.q_norm and attn.k_norm -> Identity",
                 "apply": lambda m: [(setattr(b.attn, "q_norm", nn.Identity()), setattr(b.attn, "k_norm", nn.Identity()))
                                     for b in m.blocks]},
                {"what": "ls1/ls2 gamma -> 1", "apply": gammas_to_one},
                {"what": "q_norm/k_norm eps 1e-6 -> 1e-5 (info)",
                 "apply": lambda m: [setattr(n, "eps", 1e-5) for b in m.blocks for n in (b.attn.q_norm, b.attn.k_norm)],
                 "required": False}],
        description="Plain timm ViT with qk_norm=True (attn.q_norm/k_norm LayerNorm(head_dim), eps 1e-6) and "
                    "init_values=0.5 LayerScale (ls1/ls2.gamma, randomised), tiny, 5-class head; no config.json.",
        **common))

    # 4. GAP (vit_medium_patch16_gap_256)
    cases.append(Case(
        name="timm_gap", layout="timm", seed=71004, build=builder("vit_medium_patch16_gap_256"),
        qk_groups=qk_qkv, save=saver("vit_medium_patch16_gap_256", dict(tiny), True), heads_arg=None,
        num_prefix=0, class_token=False, pos_prefix=0,
        mean=timm.data.IMAGENET_INCEPTION_MEAN, std=timm.data.IMAGENET_INCEPTION_STD,
        settings={"architecture": "vit_medium_patch16_gap_256",
                  "model_args (timm registry)": "patch_size=16, embed_dim=512, depth=12, num_heads=8, class_token=False, "
                                                "global_pool='avg', qkv_bias=False, init_values=1e-6, fc_norm=False",
                  "norm eps": "1e-6 (timm LayerNorm default)", "act": "nn.GELU (exact)",
                  "global_pool": "avg over all tokens (no prefix tokens)",
                  "fc_norm": "fc_norm=False -> final norm is `norm` (applied to every token before the pool); no fc_norm tensors",
                  "qkv_bias": "False -> no attn.qkv.bias tensor (proj.bias present)",
                  "LayerScale": "ls1/ls2.gamma (init_values 1e-6, randomised here)",
                  "patch_embed bias": "present", "pos_embed": "(1, N, D): no prefix tokens, x + pos_embed",
                  "no_embed_class": False, "dynamic_img_size": False,
                  "heads": "config.json model_args.num_heads (3)",
                  "mean/std": "IMAGENET_INCEPTION (0.5) (default tag sw_in12k_ft_in1k)",
                  "logits": "head(mean_t(norm(x)_t))"},
        sanity=[{"what": "ls1/ls2 gamma -> 1", "apply": gammas_to_one}],
        description="timm VisionTransformer as vit_medium_patch16_gap_256 (no class token, avg pool, fc_norm=False so "
                    "the final `norm` is kept, qkv_bias=False, LayerScale) but tiny; 5-class head.",
        **common))

    # 5. GAP + registers (vit_betwixt_patch16_reg4_gap_256)
    def gap_reg_extra(m, x, a64, l64, blocks):
        with torch.no_grad():
            f = m.forward_features(x)
            alt = m.head(m.fc_norm(global_pool_nlc(f, "avg", m.num_prefix_tokens, reduce_include_prefix=True)))[0]
        return [{"change": "logits with the 4 register tokens included in the average", "compares": "logits",
                 "max_abs_diff": max_diff(alt, l64), "info_only": True}]  # ratio added by run_case

    c = Case(
        name="timm_gap_reg", layout="timm", seed=71005, build=builder("vit_betwixt_patch16_reg4_gap_256"),
        qk_groups=qk_qkv, save=saver("vit_betwixt_patch16_reg4_gap_256", dict(tiny), True), heads_arg=None,
        num_prefix=4, class_token=False, pos_prefix=0,
        mean=timm.data.IMAGENET_INCEPTION_MEAN, std=timm.data.IMAGENET_INCEPTION_STD,
        settings={"architecture": "vit_betwixt_patch16_reg4_gap_256",
                  "model_args (timm registry)": "patch_size=16, embed_dim=640, depth=12, num_heads=10, init_values=1e-5, "
                                                "class_token=False, no_embed_class=True, reg_tokens=4, global_pool='avg'",
                  "norm eps": "1e-6", "act": "nn.GELU (exact)",
                  "token order": "[reg_token x4, patches]",
                  "pos_embed": "(1, N, D) patches only (no_embed_class=True): x = patches + pos_embed, then "
                               "cat(reg_token, x); registers get no position",
                  "global_pool": "avg over the patch tokens only (x[:, 4:], num_prefix_tokens=4)",
                  "fc_norm": "fc_norm=None + avg -> use_fc_norm: `norm` is Identity (no norm.* tensors), "
                             "fc_norm LayerNorm applied after the pool",
                  "qkv_bias": True, "LayerScale": "ls1/ls2.gamma", "patch_embed bias": "present",
                  "no_embed_class": True, "dynamic_img_size": False,
                  "heads": "config.json model_args.num_heads (3)",
                  "mean/std": "IMAGENET_INCEPTION (0.5) (default tag sbb2_e200_in12k_ft_in1k)",
                  "logits": "head(fc_norm(mean_{t>=4}(x_t)))"},
        sanity=[{"what": "reg_token -> 0", "apply": lambda m: m.reg_token.data.zero_()},
                {"what": "ls1/ls2 gamma -> 1", "apply": gammas_to_one},
                {"what": "pos_embed -> 0",
                 "apply": lambda m: m.pos_embed.data.zero_()}],
        description="timm VisionTransformer as vit_betwixt_patch16_reg4_gap_256 (4 register tokens, no class token, "
                    "no_embed_class, avg pool over patches, fc_norm instead of norm, LayerScale) but tiny; 5-class head.",
        **common)
    c.extra_checks = gap_reg_extra
    cases.append(c)

    # 6. SigLIP (MAP head)
    def pool_qk(m):
        D = m.embed_dim
        ap = m.attn_pool
        return [(ap.q.weight, None), (ap.q.bias, None), (ap.kv.weight, slice(0, D)), (ap.kv.bias, slice(0, D))]

    c = Case(
        name="timm_siglip", layout="timm-siglip", seed=71006, build=builder("vit_base_patch16_siglip_224"),
        qk_groups=qk_qkv, save=saver("vit_base_patch16_siglip_224", dict(tiny), True, safetensors=True), heads_arg=None,
        num_prefix=0, class_token=False, pos_prefix=0,
        mean=timm.data.IMAGENET_INCEPTION_MEAN, std=timm.data.IMAGENET_INCEPTION_STD,
        pool_module=lambda m: m.attn_pool, pool_qk=pool_qk,
        settings={"architecture": "vit_base_patch16_siglip_224",
                  "model_args (timm registry)": "patch_size=16, embed_dim=768, depth=12, num_heads=12, "
                                                "class_token=False, global_pool='map'  (no act_layer, no norm_layer)",
                  "norm eps": "1e-6 everywhere (timm LayerNorm default), incl. attn_pool.norm",
                  "act": "nn.GELU() exact erf in blocks and in attn_pool.mlp (timm's siglip entries do NOT set "
                         "gelu_tanh; big_vision's SigLIP uses tanh-GELU, timm does not)",
                  "global_pool": "map: AttentionPoolLatent(D, num_heads=heads, mlp_ratio=4, norm_layer, act_layer), "
                                 "latent_len 1, pool_type 'token', qkv_bias True, no q_norm/k_norm, no pos_embed",
                  "attn_pool forward": "q = attn_pool.q(latent) split in heads; k,v = attn_pool.kv(tokens) "
                                       "([k|v] rows 0..D-1 are k, D..2D-1 are v); attn = softmax(q*hd^-0.5 @ k^T); "
                                       "o = attn_pool.proj(attn @ v); o = o + attn_pool.mlp(attn_pool.norm(o)); "
                                       "pooled = o[:, 0]",
                  "pool input": "norm(x) of all tokens (no prefix tokens)",
                  "fc_norm": "none (Identity); final norm = norm (before the pool)",
                  "qkv_bias": True, "patch_embed bias": "present", "pos_embed": "(1, N, D), x + pos_embed",
                  "no_embed_class": False, "dynamic_img_size": False,
                  "heads": "config.json model_args.num_heads (3); the pool uses the same head count",
                  "mean/std": "IMAGENET_INCEPTION (0.5): siglip pretrained_cfg sets no mean/std, _cfg default",
                  "head": "5-class head added here (timm's siglip tags have num_classes=0)",
                  "logits": "head(attn_pool(norm(x)))"},
        sanity=[{"what": "attn_pool.q -> Identity (latent used as the query directly)", "target": "pool",
                 "apply": lambda m: setattr(m.attn_pool, "q", nn.Identity())},
                {"what": "attn_pool.latent -> 0", "target": "pool",
                 "apply": lambda m: m.attn_pool.latent.data.zero_()},
                {"what": "GELU exact -> tanh approximation (blocks and pool mlp) (info)", "apply": tanh_gelu,
                 "required": False},
                {"what": "GELU exact -> tanh approximation, logits (info)", "apply": tanh_gelu,
                 "target": "logits", "required": False}],
        description="timm VisionTransformer as vit_base_patch16_siglip_224 (no class token, MAP attention-pool head "
                    "AttentionPoolLatent, exact GELU, LayerNorm eps 1e-6) but tiny; 5-class head; pool_attn.npy = "
                    "the pool probe's attention (H, T) recorded from the softmax inside AttentionPoolLatent.forward.",
        **common)
    c.capture = capture + ("; pool_attn: torch.Tensor.softmax wrapped only while attn_pool.forward runs "
                           "(fused_attn=False), its output (1, H, 1, T) recorded")
    cases.append(c)
    return cases


# --------------------------------------------------------------------------
# DeiT III
# --------------------------------------------------------------------------

def deit3_case(deit_path, deit_commit, timm_commit):
    sys.path.insert(0, deit_path)
    import models_v2
    from timm.optim import create_optimizer
    from timm.scheduler import create_scheduler
    from timm.utils import ModelEma, NativeScaler, get_state_dict

    D, H = 24, 3

    def build():
        # deit_tiny_patch16_LS's arguments, tiny sizes
        return models_v2.vit_models(img_size=S, patch_size=P, embed_dim=D, depth=3, num_heads=H, mlp_ratio=4,
                                    qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6),
                                    block_layers=models_v2.Layer_scale_init_Block, num_classes=NUM_CLASSES)

    def qk(m):
        return [[(b.attn.qkv.weight, slice(0, 2 * D)), (b.attn.qkv.bias, slice(0, 2 * D))] for b in m.blocks]

    def save(folder, model, init_model):
        args = load_get_args_parser(os.path.join(deit_path, "main.py"))().parse_args(
            ["--model", "deit_tiny_patch16_LS", "--input-size", str(S), "--output_dir", "output"])
        # optimizer / scheduler / scaler as main.py makes them; the optimizer has taken one step on a
        # throw-away copy so that its state holds exp_avg / exp_avg_sq tensors shaped like the weights
        work = copy.deepcopy(model).train()
        optimizer = create_optimizer(args, work)
        lr_scheduler, _ = create_scheduler(args, optimizer)
        loss_scaler = NativeScaler()
        g = torch.Generator().manual_seed(7)
        loss = work(torch.randn(2, 3, S, S, generator=g)).logsumexp(-1).mean()
        loss.backward()
        optimizer.step()
        epoch = 0
        lr_scheduler.step(epoch)
        # EMA as main.py keeps it: created from the model at its (family) initialisation, updated once
        model_ema = ModelEma(init_model, decay=args.model_ema_decay, device="cpu", resume="")
        model_ema.update(model)
        ckpt = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "lr_scheduler": lr_scheduler.state_dict(), "epoch": epoch,
                "model_ema": get_state_dict(model_ema), "scaler": loss_scaler.state_dict(), "args": args}
        torch.save(ckpt, os.path.join(folder, "model.pth"))
        info = {"checkpoint": {"keys": list(ckpt.keys()), "model_key": "model",
                               "saved_like": "deit main.py utils.save_on_master({'model', 'optimizer', 'lr_scheduler', "
                                             "'epoch', 'model_ema', 'scaler', 'args'})",
                               "optimizer": "timm create_optimizer(args) AdamW, one step on a copy",
                               "lr_scheduler": "timm create_scheduler(args) (cosine)",
                               "model_ema": "timm ModelEma created from the family init, updated once: its weights "
                                            "are NOT the model's",
                               "scaler": "NativeScaler state (empty dict on CPU)",
                               "args": "argparse.Namespace from deit main.py get_args_parser()"}}
        return [{"path": "model.pth", "key": None}], info

    def load_sd(folder):
        return torch.load(os.path.join(folder, "model.pth"), map_location="cpu")["model"]

    def traps(folder):
        ck = torch.load(os.path.join(folder, "model.pth"), map_location="cpu")
        return [("weights taken from the checkpoint's 'model_ema' instead of 'model'", ck["model_ema"])]

    def gammas_to_one(m):
        for b in m.blocks:
            b.gamma_1.data.fill_(1.0)
            b.gamma_2.data.fill_(1.0)

    def timm_pos(m):
        # the timm order (cat then add) is impossible with N rows; instead: the class token ALSO gets
        # pos row 0 (a loader that treats deit3 pos_embed as if it covered the class token and shifted rows)
        pe = m.pos_embed.data.clone()
        m.pos_embed = nn.Parameter(pe)

        def fwd_features(x):
            B = x.shape[0]
            x = m.patch_embed(x)
            x = torch.cat((m.cls_token.expand(B, -1, -1) + pe[:, :1], x + pe), dim=1)
            for blk in m.blocks:
                x = blk(x)
            return m.norm(x)[:, 0]
        m.forward_features = fwd_features

    case = Case(
        name="deit3", family="DeiT III (facebookresearch/deit models_v2.py)", layout="deit3", seed=71007,
        build=build, qk_groups=qk, attn_modules=lambda m: [b.attn for b in m.blocks],
        forward=lambda m, x: m(x), save=save, load_sd=load_sd, heads_arg=3, dim=D,
        num_prefix=1, class_token=True, pos_prefix=0,
        mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
        source={"repo": "facebookresearch/deit", "commit": deit_commit, "files": ["models_v2.py", "main.py"],
                "uses": {"repo": "huggingface/pytorch-image-models", "commit": timm_commit,
                         "files": ["timm/layers/patch_embed.py", "timm/layers/mlp.py", "timm/optim", "timm/scheduler",
                                   "timm/utils/model_ema.py"]}},
        shims=[SHIM_TORCHVISION,
               "args: deit main.py's own get_args_parser() taken out with ast and run alone (main.py cannot be "
               "imported with this timm: augment.py needs timm.data.transforms._pil_interp)",
               "deit pins timm 0.3.2; run with the timm commit in source.uses (models_v2 imports PatchEmbed/Mlp/"
               "DropPath/trunc_normal_/register_model from it unchanged)"],
        settings={"built_as": "models_v2.vit_models(..., qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6), "
                              "block_layers=Layer_scale_init_Block) = deit_tiny_patch16_LS's arguments, tiny sizes",
                  "norm eps": "1e-6 every LayerNorm (all deit_*_LS entries pass eps=1e-6; vit_models' own default "
                              "nn.LayerNorm would be 1e-5)",
                  "act": "nn.GELU (exact)", "block": "x = x + gamma_1 * attn(norm1(x)); x = x + gamma_2 * mlp(norm2(x))",
                  "attention": "deit's own Attention: qkv (bias), scale head_dim**-0.5, softmax, attn_drop, proj",
                  "pos_embed": "(1, N, D) patches only: x = patch_embed(x) + pos_embed; then cat(cls_token, x); "
                               "the class token gets NO position",
                  "global_pool": "class token: head(norm(x)[:, 0])", "fc_norm": "none",
                  "patch_embed bias": "present (timm PatchEmbed)", "dynamic_img_size": "not supported",
                  "heads": "not in the file: heads_arg 3 (args.model names deit_tiny_patch16_LS, whose registry "
                           "entry says 3 heads; the tiny D here is 24)",
                  "mean/std": "IMAGENET_DEFAULT (deit datasets.py)"},
        sanity=[{"what": "gamma_1/gamma_2 -> 1", "apply": gammas_to_one},
                {"what": "class token also given pos_embed row 0 (timm-style misreading)", "apply": timm_pos}],
        capture="deit's own vit_models.forward; attention = input of each block's attn.attn_drop (forward pre-hook)",
        description="DeiT III vit_models with Layer_scale_init_Block (gamma_1/gamma_2), tiny (D 24, 3 heads, depth 3), "
                    "5-class head, saved as deit main.py saves a checkpoint: {'model', 'optimizer', 'lr_scheduler', "
                    "'epoch', 'model_ema', 'scaler', 'args': Namespace}; the weights are under 'model'.")
    case.traps = traps
    return case


# --------------------------------------------------------------------------
# MAE
# --------------------------------------------------------------------------

def mae_case(mae_path, mae_commit, timm_commit):
    np.float = float  # shim: numpy 1.24 removed np.float (mae/util/pos_embed.py uses it)
    sys.path.insert(0, mae_path)
    import models_mae
    from timm.models.vision_transformer import Block as TimmBlock
    import timm.optim._param_groups as pg
    if not getattr(models_mae, "_attnmap_block_shim", False):
        class Block(TimmBlock):
            def __init__(self, *a, qk_scale=None, **k):
                assert qk_scale is None
                super().__init__(*a, **k)
        models_mae.Block = Block
        models_mae._attnmap_block_shim = True
    import util.misc as misc

    D, H = 24, 3

    def build():
        # mae_vit_*_dec512d8b's arguments (norm_layer eps 1e-6, mlp_ratio 4), tiny sizes
        return models_mae.MaskedAutoencoderViT(img_size=S, patch_size=P, embed_dim=D, depth=3, num_heads=H,
                                               decoder_embed_dim=16, decoder_depth=4, decoder_num_heads=2,
                                               mlp_ratio=4, norm_layer=partial(nn.LayerNorm, eps=1e-6))

    def qk(m):
        return [[(b.attn.qkv.weight, slice(0, 2 * D)), (b.attn.qkv.bias, slice(0, 2 * D))] for b in m.blocks]

    def forward(m, x):
        # the model's own forward_encoder with random_masking replaced by the identity (mask_ratio 0 would
        # still shuffle the tokens): patch_embed, + pos_embed[:, 1:], cls_token + pos_embed[:, :1], blocks, norm
        def no_mask(xx, mask_ratio):
            N, L, _ = xx.shape
            return xx, torch.zeros(N, L, dtype=xx.dtype), torch.arange(L).expand(N, L)
        m.random_masking = no_mask
        try:
            latent, _, _ = m.forward_encoder(x, 0.0)
        finally:
            del m.random_masking
        return None

    def cross_check(m, x, a64, l64, blocks):
        # the encoder modules composed by hand give the same tokens as forward_encoder without masking
        def no_mask(xx, mask_ratio):
            N, L, _ = xx.shape
            return xx, torch.zeros(N, L, dtype=xx.dtype), torch.arange(L).expand(N, L)
        m.random_masking = no_mask
        with torch.no_grad():
            latent, _, _ = m.forward_encoder(x, 0.0)
            del m.random_masking
            t = m.patch_embed(x) + m.pos_embed[:, 1:, :]
            t = torch.cat((m.cls_token + m.pos_embed[:, :1, :], t), 1)
            for b in m.blocks:
                t = b(t)
            t = m.norm(t)
        d = float((t - latent).abs().max())
        assert d == 0.0, d
        return [{"change": "none: hand-composed patch_embed/pos_embed/cls_token/blocks/norm vs forward_encoder "
                           "without masking (tokens)", "compares": "tokens", "max_abs_diff": d, "info_only": True}]

    def save(folder, model, _init):
        args = load_get_args_parser(os.path.join(mae_path, "main_pretrain.py"))().parse_args(
            ["--model", "mae_vit_base_patch16", "--input_size", str(S), "--norm_pix_loss"])
        work = copy.deepcopy(model).train()
        param_groups = pg.param_groups_weight_decay(work, args.weight_decay)
        optimizer = torch.optim.AdamW(param_groups, lr=1.5e-4, betas=(0.9, 0.95))
        loss_scaler = misc.NativeScalerWithGradNormCount()
        torch.manual_seed(7)
        loss, _, _ = work(torch.randn(2, 3, S, S, generator=torch.Generator().manual_seed(7)), mask_ratio=args.mask_ratio)
        loss.backward()
        optimizer.step()
        epoch = 0
        to_save = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                   "scaler": loss_scaler.state_dict(), "args": args}
        torch.save(to_save, os.path.join(folder, "model.pth"))
        info = {"checkpoint": {"keys": list(to_save.keys()), "model_key": "model",
                               "saved_like": "mae util/misc.py save_model: {'model', 'optimizer', 'epoch', 'scaler', "
                                             "'args'}",
                               "optimizer": "AdamW(param_groups_weight_decay, betas (0.9, 0.95)), one step on a copy",
                               "args": "argparse.Namespace from main_pretrain.py get_args_parser()"}}
        return [{"path": "model.pth", "key": None}], info

    def load_sd(folder):
        return torch.load(os.path.join(folder, "model.pth"), map_location="cpu")["model"]

    def set_eps(eps):
        def f(m):
            for mod in m.modules():
                if isinstance(mod, nn.LayerNorm):
                    mod.eps = eps
        return f

    case = Case(
        name="mae", family="MAE (facebookresearch/mae models_mae.py)", layout="mae", seed=71008,
        build=build, qk_groups=qk, attn_modules=lambda m: [b.attn for b in m.blocks], forward=forward,
        save=save, load_sd=load_sd, heads_arg=3, dim=D, num_prefix=1, class_token=True, pos_prefix=1,
        skip=("pos_embed", "decoder_pos_embed"),
        mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
        source={"repo": "facebookresearch/mae", "commit": mae_commit,
                "files": ["models_mae.py", "util/pos_embed.py", "util/misc.py", "main_pretrain.py"],
                "uses": {"repo": "huggingface/pytorch-image-models", "commit": timm_commit,
                         "files": ["timm/models/vision_transformer.py (Block)", "timm/layers/attention.py",
                                   "timm/layers/patch_embed.py", "timm/optim/_param_groups.py"]}},
        shims=[SHIM_TORCHVISION,
               "np.float = float (numpy 1.24 removed it; mae/util/pos_embed.py uses dtype=np.float)",
               "models_mae.Block replaced by a subclass of timm's Block that drops qk_scale=None (newer timm has no "
               "qk_scale; None meant the default head_dim**-0.5, which timm's Attention uses)",
               "mae pins timm 0.3.2; run with the timm commit in source.uses",
               "args: main_pretrain.py's own get_args_parser() taken out with ast and run alone (main_pretrain.py "
               "asserts timm 0.3.2 and imports tensorboard)",
               "optimizer groups: timm optim_factory.add_weight_decay (used by main_pretrain.py) is "
               "timm.optim._param_groups.param_groups_weight_decay in newer timm"],
        settings={"built_as": "MaskedAutoencoderViT(..., mlp_ratio=4, norm_layer=partial(nn.LayerNorm, eps=1e-6)) = "
                              "mae_vit_*_dec512d8b's arguments, tiny sizes (decoder D 16, depth 4, 2 heads)",
                  "norm eps": "1e-6 every LayerNorm (encoder norm1/norm2/norm, decoder too)",
                  "act": "nn.GELU (exact), timm Block / Mlp", "qkv_bias": True,
                  "pos_embed": "(1, 1+N, D) fixed 2-D sin-cos from the family's initialize_weights (NOT randomised; "
                               "row 0, the class token's, is all zeros); saved in the state_dict (requires_grad False)",
                  "token assembly": "x = patch_embed(x) + pos_embed[:, 1:]; cls = cls_token + pos_embed[:, :1]; "
                                    "cat(cls, x) (numerically the same as timm's cat-then-add)",
                  "encoder": "blocks.* then norm (decoder_* / mask_token / decoder_pred are the decoder, unused here; "
                             "decoder_blocks has 4 blocks > the encoder's 3)",
                  "patch_embed bias": "present", "head": "none (pretraining model): no logits.npy",
                  "heads": "not in the file: heads_arg 3 (args.model says mae_vit_base_patch16, 12 heads, which is "
                           "NOT the tiny model's count)",
                  "dynamic_img_size": "no",
                  "mean/std": "IMAGENET_DEFAULT (main_pretrain.py transforms.Normalize)"},
        sanity=[{"what": "pos_embed -> 0", "apply": lambda m: m.pos_embed.data.zero_()},
                {"what": "LayerNorm eps 1e-6 -> 1e-5 (info)", "apply": set_eps(1e-5), "required": False}],
        capture="MAE's own forward_encoder(x, 0.0) with model.random_masking replaced by the identity (no "
                "masking, no shuffling), i.e. its patch_embed, pos_embed, cls_token, blocks, norm; attention = input "
                "of each encoder block's attn.attn_drop (timm Attention, fused_attn=False); the same modules "
                "composed by hand give bit-identical tokens (asserted, see sanity)",
        description="MAE MaskedAutoencoderViT, tiny encoder (D 24, 3 heads, depth 3) with its decoder, saved as its "
                    "training code saves ({'model', 'optimizer', 'epoch', 'scaler', 'args'}); attention of the "
                    "ENCODER blocks on the full, unmasked image.")
    case.extra_checks = cross_check
    return case


# --------------------------------------------------------------------------

# Cases with a class-token classifier whose blocks issue 44 made differentiable: grad_attn / chefer / gradcam /
# attn_grad .npy and meta "explain" by tools/fixture_explain.py.
EXPLAIN_CASES = ("timm_qknorm",)


def import_timm(path, commit=None, fused_attn=True):
    """Imports timm from its work tree `path` (one torch thread, the torchvision stub installed first) and returns
    (the timm module, its commit: `commit`, else git_commit's rule). fused_attn=False switches timm to its manual
    softmax path (the one the attention hooks see)."""
    torch.set_num_threads(1)
    install_torchvision_stub()
    sys.path.insert(0, os.path.abspath(path))
    import timm
    assert os.path.abspath(timm.__file__).startswith(os.path.abspath(path)), timm.__file__
    if not fused_attn:
        timm.layers.set_fused_attn(False)
    return timm, git_commit(path, commit)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timm", required=True, help="work tree of huggingface/pytorch-image-models")
    ap.add_argument("--deit", help="work tree of facebookresearch/deit")
    ap.add_argument("--mae", help="work tree of facebookresearch/mae")
    ap.add_argument("--timm-commit")
    ap.add_argument("--deit-commit")
    ap.add_argument("--mae-commit")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "families"))
    ap.add_argument("--cases", default="", help="comma-separated subset of case names")
    ap.add_argument("--explain-only", action="store_true",
                    help="write only the autograd explanation references (tools/fixture_explain.py) of EXPLAIN_CASES")
    args = ap.parse_args()
    _, tc = import_timm(args.timm, args.timm_commit)

    cases = timm_cases(tc)
    if args.deit:
        cases.append(deit3_case(os.path.abspath(args.deit), git_commit(args.deit, args.deit_commit), tc))
    if args.mae:
        cases.append(mae_case(os.path.abspath(args.mae), git_commit(args.mae, args.mae_commit), tc))
    want = [c for c in args.cases.split(",") if c]
    gen = torch.Generator().manual_seed(70000)
    x = torch.randn((3, S, S), generator=gen, dtype=torch.float64).float()   # normalised image
    for c in cases:
        if want and c.name not in want:
            continue
        if not args.explain_only:
            run_case(c, args.out, x)
        if c.name in EXPLAIN_CASES:  # issue 44: autograd references of the class-specific maps
            import fixture_explain
            fixture_explain.add_explain(c, os.path.join(args.out, c.name), True, "timm's own model (%s)" % c.name)


if __name__ == "__main__":
    main()
