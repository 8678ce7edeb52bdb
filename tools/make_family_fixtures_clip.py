#!/usr/bin/python3
"""Family fixtures for the CLIP-like layouts, made by running each family's OWN model code.

Writes tests/fixtures/families/<case>/ (format: tests/fixtures/families/FORMAT.md) for
  openai_clip_visual, openai_clip_full       openai/CLIP            clip/model.py
  open_clip_vit, open_clip_ls                mlfoundations/open_clip src/open_clip/{transformer,model,layers}.py
  vit_pytorch_vit, vit_pytorch_vit_mean,     lucidrains/vit-pytorch vit_pytorch/vit.py, vit_pytorch/simple_vit.py
  vit_pytorch_simple

The families' repositories are NOT part of attnmap: fetch them, extract a work tree outside the
project and pass the paths (and the commits, which a `git archive` work tree does not record):

  git --git-dir=<CLIP.git> archive HEAD | tar -x -C /work/ext/clip
  git --git-dir=<open_clip.git> archive HEAD src | tar -x -C /work/ext/open_clip
  git --git-dir=<vit-pytorch.git> archive HEAD vit_pytorch | tar -x -C /work/ext/vit-pytorch
  # optional cross-check against OpenCLIP's last nn.MultiheadAttention version (commit 6dc9461, the
  # parent of 5e587f4 "Get rid of nn.MultiheadAttention"):
  git --git-dir=<open_clip.git> archive 6dc946137276d3f0488a702116642f28deec3c23 src | tar -x -C /work/ext/open_clip_mha

  /usr/bin/python3 tools/make_family_fixtures_clip.py \
      --clip /work/ext/clip --clip-commit <40 hex> \
      --open-clip /work/ext/open_clip --open-clip-commit <40 hex> \
      --vit-pytorch /work/ext/vit-pytorch --vit-pytorch-commit <40 hex> \
      [--open-clip-mha /work/ext/open_clip_mha --open-clip-mha-commit <40 hex>] [--only CASE ...]

(a path that is a git checkout needs no --*-commit: `git rev-parse HEAD` is asked.)
Runs on Debian's /usr/bin/python3 (torch 1.13, numpy); no pip packages.  What torch 1.13 / this
machine lacks is shimmed here, every shim listed in the case's meta.json "shims":
  * einops (vit-pytorch): a small generic rearrange / repeat / Rearrange (names, parenthesised groups,
    '...', '1'), self-tested against explicit permutes of the patterns vit-pytorch uses;
  * torchvision / ftfy (imported, never called by the vision forward): stub modules;
  * the families' package __init__ files (they import torchvision transforms, tokenizers, factories)
    are not executed: the model modules are imported from a stub package whose __path__ is the family's
    source folder;
  * OpenAI CLIP's LayerNorm (an fp16 guard: x.type(torch.float32) then back) is replaced by plain
    nn.LayerNorm.forward in the float64 run only (with float64 weights the guard raises);
  * OpenCLIP Attention: F.scaled_dot_product_attention(..., scale=) needs torch >= 2.1, so every
    Attention gets use_sdpa = False: OpenCLIP's own explicit path (q * scale, q @ k^T, softmax,
    attn_drop, @ v) runs and the probabilities are taken from a forward hook on attn_drop;
  * OpenCLIP's save_config_for_hf is taken from push_to_hf_hub.py with ast and run as is (importing
    that module pulls factory -> loss.py, which needs torch.compiler, torch >= 2.1).
"""

import argparse
import ast
import contextlib
import copy
import json
import math
import os
import re
import subprocess
import sys
import types
import importlib
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixture_lib import save_npy, write_meta  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "families")
GENERATOR = "tools/make_family_fixtures_clip.py"
TARGET_ROW_MAX = 0.7   # peaky attention: mean row max of every block tuned to this (> 0.5)
SANITY_FACTOR = 100.0  # a family-specific piece must move some probability by > 100 x tolerance


# --------------------------------------------------------------------------
# Shims
# --------------------------------------------------------------------------

def _parse_side(side):
    groups, cur = [], None
    for tok in side.replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
            cur = []
        elif tok == ")":
            groups.append(cur)
            cur = None
        elif cur is not None:
            cur.append(tok)
        else:
            groups.append([tok])
    return groups


def _einops_repeat(t, pattern, **axes):
    """einops.rearrange / einops.repeat for names, (groups), '...' and '1'."""
    left, right = (_parse_side(s) for s in pattern.split("->"))
    sizes = dict(axes)
    has_ell = ["..."] in left
    n_ell = t.ndim - (len(left) - (1 if has_ell else 0))
    elem, d = [], 0
    for g in left:
        if g == ["..."]:
            for j in range(n_ell):
                sizes["...%d" % j] = t.shape[d]
                elem.append("...%d" % j)
                d += 1
            continue
        total = t.shape[d]
        d += 1
        names = [a for a in g if a != "1"]
        unknown = [a for a in names if a not in sizes]
        known = 1
        for a in names:
            if a in sizes:
                known *= sizes[a]
        if len(unknown) > 1:
            raise ValueError("einops shim: cannot infer %s in %r" % (unknown, pattern))
        if unknown:
            if known == 0 or total % known:
                raise ValueError("einops shim: %r does not divide" % pattern)
            sizes[unknown[0]] = total // known
        elif known != total:
            raise ValueError("einops shim: shape %s does not match %r" % (tuple(t.shape), pattern))
        elem.extend(names)
    x = t.reshape([sizes[a] for a in elem])
    rgroups = []
    for g in right:
        if g == ["..."]:
            rgroups.extend([["...%d" % j] for j in range(n_ell)])
        else:
            rgroups.append([a for a in g if a != "1"])
    relem = [a for g in rgroups for a in g]
    missing = [a for a in elem if a not in relem]
    if missing:
        raise ValueError("einops shim: %s dropped in %r" % (missing, pattern))
    x = x.permute([elem.index(a) for a in relem if a in elem])
    x = x.reshape([sizes[a] if a in elem else 1 for a in relem])
    x = x.expand([sizes[a] for a in relem])
    out_shape = []
    for g in rgroups:
        n = 1
        for a in g:
            n *= sizes[a]
        out_shape.append(n)
    return x.reshape(out_shape)


def install_einops_shim():
    einops = types.ModuleType("einops")
    einops.__path__ = []
    einops.rearrange = _einops_repeat
    einops.repeat = _einops_repeat
    layers = types.ModuleType("einops.layers")
    layers.__path__ = []
    torch_layers = types.ModuleType("einops.layers.torch")

    class Rearrange(nn.Module):
        def __init__(self, pattern, **axes_lengths):
            super().__init__()
            self.pattern = pattern
            self.axes_lengths = axes_lengths

        def forward(self, x):
            return _einops_repeat(x, self.pattern, **self.axes_lengths)

        def extra_repr(self):
            return repr(self.pattern)

    torch_layers.Rearrange = Rearrange
    einops.layers = layers
    layers.torch = torch_layers
    sys.modules.update({"einops": einops, "einops.layers": layers, "einops.layers.torch": torch_layers})
    # self-test on the patterns vit-pytorch uses, against explicit reshapes / permutes
    g = torch.Generator().manual_seed(0)
    img = torch.randn(2, 3, 16, 24, generator=g)
    ref = img.reshape(2, 3, 2, 8, 3, 8).permute(0, 2, 4, 3, 5, 1).reshape(2, 6, 8 * 8 * 3)
    assert torch.equal(Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=8, p2=8)(img), ref)
    t = torch.randn(2, 5, 12, generator=g)
    assert torch.equal(_einops_repeat(t, "b n (h d) -> b h n d", h=3), t.reshape(2, 5, 3, 4).permute(0, 2, 1, 3))
    u = torch.randn(2, 3, 5, 4, generator=g)
    assert torch.equal(_einops_repeat(u, "b h n d -> b n (h d)"), u.permute(0, 2, 1, 3).reshape(2, 5, 12))
    c = torch.randn(1, 7, generator=g)
    assert torch.equal(_einops_repeat(c, "... d -> b ... d", b=2), c.unsqueeze(0).expand(2, 1, 7))
    assert _einops_repeat(torch.zeros(0, 7), "... d -> b ... d", b=2).shape == (2, 0, 7)
    assert torch.equal(_einops_repeat(c.reshape(1, 1, 7), "1 1 d -> b 1 d", b=3), c.reshape(1, 1, 7).expand(3, 1, 7))


def _stub_module(name, parent=None):
    """A module whose every attribute is a class that raises when used (imported, never called)."""
    m = types.ModuleType(name)
    m.__path__ = []

    def ga(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)

        def init(self, *a, **k):
            raise RuntimeError("stub %s.%s called" % (name, attr))

        class Meta(type):  # class attributes (e.g. InterpolationMode.BICUBIC) read at import: their names
            def __getattr__(cls, a):
                if a.startswith("__"):
                    raise AttributeError(a)
                return "%s.%s" % (attr, a)
        return Meta(attr, (object,), {"__init__": init})
    m.__getattr__ = ga
    sys.modules[name] = m
    if parent is not None:
        setattr(parent, name.rsplit(".", 1)[1], m)
    return m


def install_import_stubs():
    if "torchvision" not in sys.modules:
        tv = _stub_module("torchvision")
        ops = _stub_module("torchvision.ops", tv)
        _stub_module("torchvision.ops.misc", ops)
        tr = _stub_module("torchvision.transforms", tv)
        _stub_module("torchvision.transforms.functional", tr)
    for n in ("ftfy",):
        try:
            importlib.import_module(n)
        except ImportError:
            _stub_module(n)


def stub_package(name, folder):
    pkg = types.ModuleType(name)
    pkg.__path__ = [folder]
    sys.modules[name] = pkg
    return pkg


def repo_commit(path, given):
    if given:
        if not re.fullmatch(r"[0-9a-f]{40}", given):
            raise SystemExit("commit must be 40 hex digits: %r" % given)
        return given
    try:
        return subprocess.check_output(["git", "-C", path, "rev-parse", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        raise SystemExit("%s is no git checkout: pass its commit (--*-commit)" % path)


# --------------------------------------------------------------------------
# Random weights, input, capture, tuning
# --------------------------------------------------------------------------

def _n(gen, shape, std):
    return torch.randn(shape, generator=gen, dtype=torch.float64) * std


def randomize(model, gen, extra=None, keep=()):
    """Every parameter random: Linear/Conv weights N(0, 1/fan_in), biases N(0, 0.1), LayerNorm weight
    1 + N(0, 0.2) and bias N(0, 0.2), LayerScale gamma U(0.2, 0.9), Embedding N(0, 0.5); `extra`
    maps a parameter name to (std) for the rest (class / positional embeddings, projections).
    Asserts that every parameter except `keep` was set."""
    extra = extra or {}
    done = set()
    names = {id(p): n for n, p in model.named_parameters()}

    def put(p, v):
        with torch.no_grad():
            p.copy_(v.to(p.dtype))
        done.add(names[id(p)])

    for mod in model.modules():
        cls = type(mod).__name__
        if isinstance(mod, nn.LayerNorm):
            put(mod.weight, 1.0 + _n(gen, mod.weight.shape, 0.2))
            put(mod.bias, _n(gen, mod.bias.shape, 0.2))
        elif isinstance(mod, (nn.Linear, nn.Conv2d)):
            fan_in = mod.weight[0].numel()
            put(mod.weight, _n(gen, mod.weight.shape, fan_in ** -0.5))
            if mod.bias is not None:
                put(mod.bias, _n(gen, mod.bias.shape, 0.1))
        elif isinstance(mod, nn.Embedding):
            put(mod.weight, _n(gen, mod.weight.shape, 0.5))
        elif cls == "LayerScale":
            put(mod.gamma, 0.2 + 0.7 * torch.rand(mod.gamma.shape, generator=gen, dtype=torch.float64))
        elif isinstance(mod, nn.MultiheadAttention) or cls == "Attention" and hasattr(mod, "in_proj_weight"):
            if getattr(mod, "in_proj_weight", None) is not None:
                put(mod.in_proj_weight, _n(gen, mod.in_proj_weight.shape, mod.in_proj_weight.shape[1] ** -0.5))
            if getattr(mod, "in_proj_bias", None) is not None:
                put(mod.in_proj_bias, _n(gen, mod.in_proj_bias.shape, 0.1))
    for n, p in model.named_parameters():
        if n in extra:
            put(p, _n(gen, p.shape, extra[n]))
    left = [n for n, p in model.named_parameters() if n not in done and n not in keep and p.numel()]
    assert not left, "parameters left at their init: %s" % left


def smooth_picture(gen, size, noise):
    """A smooth synthetic RGB picture (3, size, size) in [0, 1], float64: gradients, three blobs a channel and,
    when `noise` > 0, Gaussian noise of that standard deviation."""
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size, dtype=torch.float64),
                            torch.linspace(0, 1, size, dtype=torch.float64), indexing="ij")
    chans = []
    for c in range(3):
        v = 0.3 + 0.4 * (xx * (c - 1) + yy * (1 - c) * 0.5)
        for _ in range(3):
            cy, cx = torch.rand(2, generator=gen, dtype=torch.float64)
            r = 0.08 + 0.2 * torch.rand(1, generator=gen, dtype=torch.float64)
            v = v + 0.4 * torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r ** 2))
        if noise > 0:
            v = v + noise * torch.randn(size, size, generator=gen, dtype=torch.float64)
        chans.append(v.clamp(0, 1))
    return torch.stack(chans)


def make_input(gen, size, mean, std):
    """A smooth synthetic RGB picture in [0, 1] (gradients, blobs, a little noise), normalised with
    the family's mean / std in float32: exactly what enters the patch embedding."""
    img = smooth_picture(gen, size, 0.05).float()
    m = torch.tensor(mean, dtype=torch.float32).view(3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(3, 1, 1)
    return (img - m) / s


@contextlib.contextmanager
def capture(targets):
    """targets: [(module, how)], how = "mha" (nn.MultiheadAttention: its forward is wrapped so that it
    is called with need_weights=True, average_attn_weights=False and the weights are recorded) or
    "hook" (forward hook: the module's output is the probabilities, e.g. Softmax / attn Dropout)."""
    maps, undo = [], []
    for mod, how in targets:
        if how == "mha":
            orig = mod.forward

            def fwd(*a, _orig=orig, **k):
                k["need_weights"] = True
                k["average_attn_weights"] = False
                out, w = _orig(*a, **k)
                maps.append(w.detach()[0].clone())
                return out, w
            mod.forward = fwd
            undo.append(lambda m=mod: m.__dict__.pop("forward"))
        else:
            h = mod.register_forward_hook(lambda m, i, o: maps.append(o.detach()[0].clone()))
            undo.append(h.remove)
    try:
        yield maps
    finally:
        for u in undo:
            u()


class Family:
    """What a family's code needs to be run: subclasses fill in."""
    f64_context = staticmethod(contextlib.nullcontext)

    def forward(self, model, x):
        return model(x)

    def targets(self, model):
        raise NotImplementedError

    def qk_rows(self, model):
        """per block: [(parameter, rows)] holding the query and key projections (weights and biases)."""
        raise NotImplementedError


def run(fam, model, x, dtype):
    """(attn (L,H,T,T), output) of the family's own forward, model and input cast to `dtype`."""
    m = model if next(model.parameters()).dtype == dtype else copy.deepcopy(model).to(dtype)
    m.eval()
    ctx = fam.f64_context() if dtype == torch.float64 else contextlib.nullcontext()
    with torch.no_grad(), ctx, capture(fam.targets(m)) as maps:
        out = fam.forward(m, x.to(dtype).unsqueeze(0))
    return torch.stack(maps, 0), out


def run_plain(fam, model, x, dtype):
    m = copy.deepcopy(model).to(dtype).eval()
    ctx = fam.f64_context() if dtype == torch.float64 else contextlib.nullcontext()
    with torch.no_grad(), ctx:
        return fam.forward(m, x.to(dtype).unsqueeze(0))


def tune_peaky(fam, model, x, target=TARGET_ROW_MAX):
    """Scale each block's query and key rows (weights and biases) by one factor s, block by block
    (the logits scale by s^2), so that its mean row max in float64 is `target`."""
    report = []
    for i, rows in enumerate(fam.qk_rows(model)):
        base = [(p, r, p.detach()[r].clone().double()) for p, r in rows]

        def metric(s):
            with torch.no_grad():
                for p, r, b in base:
                    p[r] = (b * s).to(p.dtype)
            a, _ = run(fam, model, x, torch.float64)
            return a[i].max(-1).values.mean().item()
        lo, hi = 0.02, 1.0
        while metric(hi) < target:
            lo, hi = hi, hi * 2
            assert hi < 1e5, "cannot make block %d peaky" % i
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            if metric(mid) < target:
                lo = mid
            else:
                hi = mid
        got = metric(hi)
        report.append({"block": i, "qk_scale": round(hi, 6), "mean_row_max": round(got, 4)})
    return report


def sanity(fam, model, x, ref64, tol, variants):
    """Each variant: a family-specific piece changed (on a float64 copy); must move some attention
    probability by more than SANITY_FACTOR x tolerance."""
    out = {}
    for name, change in variants:
        m = copy.deepcopy(model).double().eval()
        change(m)
        a, _ = run(fam, m, x, torch.float64)
        d = (a - ref64).abs().max().item()
        assert d > SANITY_FACTOR * tol, "sanity %s: only %.3g" % (name, d)
        out[name] = {"max_abs_change": float("%.4g" % d), "times_tolerance": float("%.4g" % (d / tol))}
    return out


def shapes(sd):
    return OrderedDict((k, list(v.shape)) for k, v in sd.items())


# --------------------------------------------------------------------------
# OpenAI CLIP
# --------------------------------------------------------------------------


@contextlib.contextmanager
def f64_layernorm(m):
    """openai/CLIP's LayerNorm (clip/model.py) casts to float32 and back, for fp16; in a float64 run it is
    plain nn.LayerNorm."""
    LN = m.LayerNorm
    orig = LN.forward
    LN.forward = lambda self_, x: nn.LayerNorm.forward(self_, x)
    try:
        yield
    finally:
        LN.forward = orig

class OpenAIClip(Family):
    def __init__(self, path):
        stub_package("clip", os.path.join(path, "clip"))
        self.m = importlib.import_module("clip.model")
        src = open(os.path.join(path, "clip", "clip.py")).read()
        nums = re.search(r"Normalize\(\(([^)]*)\),\s*\(([^)]*)\)\)", src)
        self.mean = [float(v) for v in nums.group(1).split(",")]
        self.std = [float(v) for v in nums.group(2).split(",")]

    def f64_context(self):
        return f64_layernorm(self.m)

    def visual(self, model):
        return model.visual if hasattr(model, "visual") else model

    def forward(self, model, x):
        return model.encode_image(x) if hasattr(model, "encode_image") else model(x)

    def targets(self, model):
        return [(b.attn, "mha") for b in self.visual(model).transformer.resblocks]

    def qk_rows(self, model):
        out = []
        for b in self.visual(model).transformer.resblocks:
            D = b.attn.embed_dim
            out.append([(b.attn.in_proj_weight, slice(0, 2 * D)), (b.attn.in_proj_bias, slice(0, 2 * D))])
        return out

    def variants(self):
        def no_ln_pre(m):
            self.visual(m).ln_pre = nn.Identity()

        def gelu(m):
            for b in self.visual(m).transformer.resblocks:
                b.mlp.gelu = nn.GELU()
        return [("ln_pre -> identity", no_ln_pre), ("QuickGELU -> GELU (exact erf)", gelu)]


CLIP_SHIMS = [
    "clip/__init__.py not executed (it imports clip/clip.py: torchvision transforms, the tokenizer); "
    "clip/model.py imported from a stub package 'clip' whose __path__ is the repository's clip/ folder",
    "float64 run only: clip.model.LayerNorm.forward (fp16 guard: x.type(torch.float32), LayerNorm, cast back) "
    "replaced by nn.LayerNorm.forward, since with float64 weights the guard raises 'expected scalar type Float "
    "but found Double'; the float32 run uses the original (where the cast is a no-op)",
    "attention capture: each visual nn.MultiheadAttention's forward wrapped so that it is called with "
    "need_weights=True, average_attn_weights=False (CLIP calls it with need_weights=False); output compared "
    "with the unwrapped run (see capture_output_change)",
]

VIS = dict(input_resolution=32, patch_size=8, width=128, layers=3, output_dim=16)


def clip_extra(prefix=""):
    return {prefix + "class_embedding": 0.5, prefix + "positional_embedding": 0.5, prefix + "proj": 128 ** -0.5}


def case_openai_clip_visual(args, fam, commit):
    torch.manual_seed(101)
    heads = VIS["width"] // 64          # what CLIP's build_model derives: vision_width // 64
    model = fam.m.VisionTransformer(heads=heads, **VIS).eval()
    gen = torch.Generator().manual_seed(1101)
    randomize(model, gen, clip_extra())
    x = make_input(gen, 32, fam.mean, fam.std)
    peaky = tune_peaky(fam, model, x)
    sd = model.state_dict()
    folder = os.path.join(OUT, "openai_clip_visual")
    os.makedirs(folder, exist_ok=True)
    torch.save(sd, os.path.join(folder, "model.pth"))   # model.pth only: a model.safetensors copy would duplicate it
    res = finish(fam, model, x, folder, peaky)
    # the file reproduces the model
    m2 = fam.m.VisionTransformer(heads=heads, **VIS)
    m2.load_state_dict(torch.load(os.path.join(folder, "model.pth")), strict=True)
    assert torch.equal(run(fam, m2, x, torch.float64)[0], res["attn64"])
    write_meta(folder, case="openai_clip_visual", family="OpenAI CLIP", layout="clip",
               files=[{"path": "model.pth", "key": None}],
               heads_arg=None, act_arg="quickgelu",
               **dims(32, 8, VIS["width"], VIS["layers"], heads, res, num_prefix=1, class_token=True),
               mean=fam.mean, std=fam.std,
               source={"repo": "openai/CLIP", "commit": commit, "files": ["clip/model.py", "clip/clip.py"]},
               shims=CLIP_SHIMS, generator=GENERATOR,
               description="clip.model.VisionTransformer(input_resolution=32, patch_size=8, width=128, layers=3, "
                           "heads=2 (= width // 64, CLIP build_model's rule), output_dim=16); model.pth = "
                           "torch.save(visual.state_dict()); QuickGELU "
                           "MLP (not in the file: act_arg). Attention from each visual nn.MultiheadAttention "
                           "(need_weights=True, average_attn_weights=False). No classifier: no logits.npy.",
               peaky=peaky, capture_output_change=res["capture_change"], sanity=res["sanity"],
               tensors=shapes(sd))
    return res


def case_openai_clip_full(args, fam, commit):
    torch.manual_seed(102)
    txt = dict(context_length=8, vocab_size=64, transformer_width=64, transformer_heads=64 // 64,
               transformer_layers=1)
    model = fam.m.CLIP(embed_dim=16, image_resolution=32, vision_layers=3, vision_width=128,
                       vision_patch_size=8, **txt).eval()
    gen = torch.Generator().manual_seed(1102)
    randomize(model, gen, dict(clip_extra("visual."), positional_embedding=0.5, text_projection=64 ** -0.5),
              keep=("logit_scale",))
    x = make_input(gen, 32, fam.mean, fam.std)
    peaky = tune_peaky(fam, model, x)
    sd = model.state_dict()
    folder = os.path.join(OUT, "openai_clip_full")
    os.makedirs(folder, exist_ok=True)
    # only model_openai.pth is written (a plain state_dict model.pth would duplicate its tensors); the
    # checks below that need the plain dict use `sd` in memory.
    # the dict as OpenAI ships it: build_model deletes these three int entries before load_state_dict
    sd_openai = OrderedDict()
    for k, v in sd.items():
        sd_openai[k] = v
        if k == "logit_scale":
            sd_openai["input_resolution"] = torch.tensor(32)
            sd_openai["context_length"] = torch.tensor(txt["context_length"])
            sd_openai["vocab_size"] = torch.tensor(txt["vocab_size"])
    torch.save(sd_openai, os.path.join(folder, "model_openai.pth"))
    res = finish(fam, model, x, folder, peaky)
    # OpenAI's own loader accepts the file and the plain state_dict (it converts to fp16, so no attention
    # comparison there)
    loaded = torch.load(os.path.join(folder, "model_openai.pth"))
    built = fam.m.build_model(dict(loaded))
    assert len(built.visual.transformer.resblocks) == 3 and built.visual.transformer.resblocks[0].attn.num_heads == 2
    fam.m.build_model(dict(sd))
    # the file is the state_dict plus the three int entries: without them, the same names, order and tensors
    plain = OrderedDict((k, v) for k, v in loaded.items()
                        if k not in ("input_resolution", "context_length", "vocab_size"))
    assert list(plain) == list(sd) and all(torch.equal(plain[k], sd[k]) for k in sd)
    m2 = fam.m.CLIP(embed_dim=16, image_resolution=32, vision_layers=3, vision_width=128, vision_patch_size=8, **txt)
    m2.load_state_dict(plain, strict=True)
    assert torch.equal(run(fam, m2, x, torch.float64)[0], res["attn64"])
    write_meta(folder, case="openai_clip_full", family="OpenAI CLIP", layout="clip",
               files=[{"path": "model_openai.pth", "key": None}],
               heads_arg=None, act_arg="quickgelu",
               **dims(32, 8, 128, 3, 2, res, num_prefix=1, class_token=True),
               mean=fam.mean, std=fam.std,
               source={"repo": "openai/CLIP", "commit": commit, "files": ["clip/model.py", "clip/clip.py"]},
               shims=CLIP_SHIMS + ["OpenAI's clip.model.build_model run on the file and on the in-memory state dict as a check"],
               generator=GENERATOR,
               description="clip.model.CLIP(embed_dim=16, image_resolution=32, vision_layers=3, vision_width=128, "
                           "vision_patch_size=8, context_length=8, vocab_size=64, transformer_width=64, "
                           "transformer_heads=1, transformer_layers=1): model_openai.pth = torch.save(model.state_dict()) "
                           "(visual.* + the text tower) plus the 0-d int64 entries "
                           "input_resolution=32, context_length=8, vocab_size=64 (after logit_scale, as OpenAI's "
                           "released dicts hold them; build_model deletes them). The attention is the visual "
                           "tower's (model.encode_image). logit_scale left at log(1/0.07).",
               peaky=peaky, capture_output_change=res["capture_change"], sanity=res["sanity"],
               build_model_loads=True, tensors=shapes(sd_openai))
    return res


# --------------------------------------------------------------------------
# OpenCLIP
# --------------------------------------------------------------------------

class OpenClip(Family):
    def __init__(self, path, pkg="open_clip"):
        install_import_stubs()
        src = os.path.join(path, "src", "open_clip")
        stub_package(pkg, src)
        self.pkg = pkg
        self.src = src
        self.t = importlib.import_module(pkg + ".transformer")
        has_layers = os.path.exists(os.path.join(src, "layers.py"))
        self.layers = importlib.import_module(pkg + ".layers") if has_layers else self.t

    def load_model_module(self):
        self.model = importlib.import_module(self.pkg + ".model")
        self.transform = importlib.import_module(self.pkg + ".transform")
        self.constants = importlib.import_module(self.pkg + ".constants")
        path = os.path.join(self.src, "push_to_hf_hub.py")
        tree = ast.parse(open(path).read(), path)
        fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "save_config_for_hf"]
        ns = {"json": json, "Optional": __import__("typing").Optional}
        exec(compile(ast.Module(body=fn, type_ignores=[]), path, "exec"), ns)
        self.save_config_for_hf = ns["save_config_for_hf"]

    def prepare(self, model):
        """torch 1.13 has no F.scaled_dot_product_attention: OpenCLIP's own non-sdpa path."""
        for mod in model.modules():
            if hasattr(self.t, "Attention") and isinstance(mod, self.t.Attention) and hasattr(mod, "use_sdpa"):
                mod.use_sdpa = False
        return model

    def targets(self, model):
        blocks = model.transformer.resblocks
        if isinstance(blocks[0].attn, nn.MultiheadAttention):
            return [(b.attn, "mha") for b in blocks]
        return [(b.attn.attn_drop, "hook") for b in blocks]

    def qk_rows(self, model):
        out = []
        for b in model.transformer.resblocks:
            D = b.attn.in_proj_weight.shape[1]
            out.append([(b.attn.in_proj_weight, slice(0, 2 * D)), (b.attn.in_proj_bias, slice(0, 2 * D))])
        return out

    def variants(self, ls=False):
        def no_ln_pre(m):
            m.ln_pre = nn.Identity()

        def quick(m):
            for b in m.transformer.resblocks:
                b.mlp.gelu = self.layers.QuickGELU()

        def no_ls(m):
            for b in m.transformer.resblocks:
                b.ls_1 = nn.Identity()
                b.ls_2 = nn.Identity()
        v = [("ln_pre -> identity", no_ln_pre), ("GELU -> QuickGELU", quick)]
        if ls:
            v.append(("LayerScale ls_1/ls_2 -> identity (gamma = 1)", no_ls))
        return v


OPEN_CLIP_SHIMS = [
    "open_clip/__init__.py not executed (factory, tokenizer, torchvision transforms): model.py / transformer.py / "
    "layers.py / transform.py / constants.py imported from a stub package 'open_clip' whose __path__ is "
    "src/open_clip",
    "torchvision (utils.py: FrozenBatchNorm2d; transform.py) and ftfy: stub modules, never called by the vision "
    "tower",
    "Attention.use_sdpa = False on every open_clip.transformer.Attention: F.scaled_dot_product_attention(..., scale=) "
    "needs torch >= 2.1; OpenCLIP's own explicit path runs instead (q * head_dim**-0.5, q @ k^T, softmax, "
    "attn_drop, @ v); the probabilities are taken from a forward hook on attn.attn_drop (identity in eval)",
    "save_config_for_hf taken from push_to_hf_hub.py with ast and run unchanged (importing push_to_hf_hub pulls "
    "factory -> loss.py, which needs torch.compiler, torch >= 2.1)",
]


def open_clip_cfg(ls=None):
    vision = {"image_size": 32, "layers": 3, "width": 128, "head_width": 64, "patch_size": 8}
    if ls is not None:
        vision["ls_init_value"] = ls
    return {"embed_dim": 16,
            "vision_cfg": vision,
            "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 64, "heads": 1, "layers": 1},
            "quick_gelu": False}


def cross_check_mha(args, fam, sd, cfg, x, attn64):
    """The same state dict in OpenCLIP's last nn.MultiheadAttention version (older checkpoints come from it)."""
    if not args.open_clip_mha:
        return None
    old = OpenClip(args.open_clip_mha, pkg="open_clip_mha")
    v = cfg["vision_cfg"]
    m = old.t.VisionTransformer(image_size=v["image_size"], patch_size=v["patch_size"], width=v["width"],
                                layers=v["layers"], heads=v["width"] // v["head_width"], mlp_ratio=4.0,
                                ls_init_value=v.get("ls_init_value"), output_dim=cfg["embed_dim"],
                                act_layer=nn.GELU, norm_layer=old.t.LayerNorm).eval()
    assert isinstance(m.transformer.resblocks[0].attn, nn.MultiheadAttention)
    m.load_state_dict(sd, strict=True)
    a, out = run(old, m, x, torch.float64)
    plain = run_plain(old, m, x, torch.float64)
    return {"repo": "mlfoundations/open_clip",
            "commit": repo_commit(args.open_clip_mha, args.open_clip_mha_commit),
            "what": "the same model.pth loaded (strict) into that commit's VisionTransformer (nn.MultiheadAttention, "
                    "batch_first=True; captured with need_weights=True, average_attn_weights=False)",
            "max_abs_attn_diff_float64": float("%.3g" % (a - attn64).abs().max().item()),
            "capture_output_change": float("%.3g" % (out - plain).abs().max().item())}


def case_open_clip(args, fam, commit, ls):
    name = "open_clip_ls" if ls else "open_clip_vit"
    if not hasattr(fam, "model"):
        fam.load_model_module()
    cfg = open_clip_cfg(ls=0.1 if ls else None)
    torch.manual_seed(103 if not ls else 104)
    # exactly what open_clip.model.CLIP.__init__ does for its image tower
    model = fam.prepare(fam.model._build_vision_tower(cfg["embed_dim"], cfg["vision_cfg"], cfg["quick_gelu"])).eval()
    # the config builds a whole CLIP whose visual.* names are model.pth's
    full = fam.model.CLIP(**cfg)
    assert (sorted("visual." + k for k in model.state_dict())
            == sorted(k for k in full.state_dict() if k.startswith("visual.")))
    pp = dict(fam.transform.PreprocessCfg().__dict__)
    pp["size"] = model.image_size  # as factory.create_model sets it
    fam.model.set_model_preprocess_cfg(model, pp)
    gen = torch.Generator().manual_seed(1103 if not ls else 1104)
    randomize(model, gen, clip_extra())
    x = make_input(gen, 32, list(model.image_mean), list(model.image_std))
    peaky = tune_peaky(fam, model, x)
    sd = model.state_dict()
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    torch.save(sd, os.path.join(folder, "model.pth"))
    fam.save_config_for_hf(types.SimpleNamespace(visual=model), Path(folder) / "open_clip_config.json",
                           model_config=cfg)
    res = finish(fam, model, x, folder, peaky, ls_variants=ls)
    m2 = fam.prepare(fam.model._build_vision_tower(cfg["embed_dim"], cfg["vision_cfg"], cfg["quick_gelu"]))
    m2.load_state_dict(torch.load(os.path.join(folder, "model.pth")), strict=True)
    assert torch.equal(run(fam, m2, x, torch.float64)[0], res["attn64"])
    extra = {}
    if ls:
        extra["pool_variants"] = pool_variants(fam, cfg, sd, x, res["attn64"])
    cc = cross_check_mha(args, fam, sd, cfg, x, res["attn64"])
    if cc is not None:
        assert cc["max_abs_attn_diff_float64"] < 1e-9
        extra["cross_check_mha_version"] = cc
    desc = ("open_clip.model._build_vision_tower(16, vision_cfg, quick_gelu=False) -> "
            "open_clip.transformer.VisionTransformer(image_size=32, patch_size=8, width=128, layers=3, heads=2 "
            "(= width // head_width 64), mlp_ratio=4, nn.GELU, LayerNorm eps 1e-5, ln_pre, pool_type 'tok', "
            "final_ln_after_pool False, proj 128x16%s); model.pth = torch.save(visual.state_dict()); "
            "open_clip_config.json as push_to_hf_hub.save_config_for_hf writes it (model_cfg + preprocess_cfg). "
            "No classifier: no logits.npy." % (", ls_init_value 0.1 (LayerScale ls_1/ls_2, gammas randomised)"
                                               if ls else ""))
    write_meta(folder, case=name, family="OpenCLIP", layout="clip",
               files=[{"path": "model.pth", "key": None}],
               config="open_clip_config.json", heads_arg=None, act_arg=None,
               **dims(32, 8, 128, 3, 2, res, num_prefix=1, class_token=True),
               mean=list(model.image_mean), std=list(model.image_std),
               source={"repo": "mlfoundations/open_clip", "commit": commit,
                       "files": ["src/open_clip/transformer.py", "src/open_clip/layers.py", "src/open_clip/model.py",
                                 "src/open_clip/push_to_hf_hub.py", "src/open_clip/transform.py",
                                 "src/open_clip/constants.py"]},
               shims=OPEN_CLIP_SHIMS, generator=GENERATOR, description=desc,
               peaky=peaky, capture_output_change=res["capture_change"], sanity=res["sanity"],
               tensors=shapes(sd), **extra)
    return res


def pool_variants(fam, cfg, sd, x, attn64):
    """pool_type 'avg' and final_ln_after_pool: the same tensors, the same attention, another pooled output."""
    base = fam.prepare(fam.model._build_vision_tower(cfg["embed_dim"], cfg["vision_cfg"], False)).eval()
    base.load_state_dict(sd)
    ref_out = run_plain(fam, base, x, torch.float64)
    out = {}
    for label, kw in (("pool_type avg", {"pool_type": "avg"}),
                      ("final_ln_after_pool", {"final_ln_after_pool": True}),
                      ("pool_type avg + final_ln_after_pool", {"pool_type": "avg", "final_ln_after_pool": True})):
        vc = dict(cfg["vision_cfg"], **kw)
        m = fam.prepare(fam.model._build_vision_tower(cfg["embed_dim"], vc, False)).eval()
        m.load_state_dict(sd, strict=True)   # same names and shapes
        a, o = run(fam, m, x, torch.float64)
        out[label] = {"vision_cfg": kw, "loads_same_state_dict": True,
                      "max_abs_attn_diff": float("%.3g" % (a - attn64).abs().max().item()),
                      "max_abs_pooled_output_diff": float("%.3g" % (o - ref_out).abs().max().item()),
                      "written": False}
        assert out[label]["max_abs_attn_diff"] == 0.0
    # with 'tok' pooling the per-token LayerNorm commutes with taking token 0: final_ln_after_pool alone
    # changes nothing; with 'avg' it does
    assert out["final_ln_after_pool"]["max_abs_pooled_output_diff"] < 1e-12
    assert out["pool_type avg"]["max_abs_pooled_output_diff"] > 1e-3
    assert (out["pool_type avg + final_ln_after_pool"]["max_abs_pooled_output_diff"] > 1e-3)
    return out


# --------------------------------------------------------------------------
# vit-pytorch
# --------------------------------------------------------------------------

class VitPytorch(Family):
    def __init__(self, path):
        install_einops_shim()
        stub_package("vit_pytorch", os.path.join(path, "vit_pytorch"))
        self.vit = importlib.import_module("vit_pytorch.vit")
        self.simple = importlib.import_module("vit_pytorch.simple_vit")
        self.einops = sys.modules["einops"]

    def targets(self, model):
        return [(layer[0].attend, "hook") for layer in model.transformer.layers]

    def qk_rows(self, model):
        out = []
        for layer in model.transformer.layers:
            w = layer[0].to_qkv.weight
            out.append([(w, slice(0, 2 * w.shape[0] // 3))])
        return out

    def variants(self, simple=False):
        R = sys.modules["einops.layers.torch"].Rearrange

        def no_ln_patch(m):
            m.to_patch_embedding[1] = nn.Identity()

        def no_ln_dim(m):
            m.to_patch_embedding[3] = nn.Identity()

        def flatten_c_first(m):
            p = m.patch_size[0]
            m.to_patch_embedding[0] = R("b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=p, p2=p)
        v = [("patch LayerNorm(patch_dim) (to_patch_embedding.1) -> identity", no_ln_patch),
             ("LayerNorm(dim) after the patch Linear (to_patch_embedding.3) -> identity", no_ln_dim),
             ("patch flattened (c p1 p2) like a conv instead of (p1 p2 c)", flatten_c_first)]
        if simple:
            def zero_pos(m):
                m.pos_embedding = torch.zeros_like(m.pos_embedding)

            def xy_swapped(m):
                pe = m.pos_embedding
                q = pe.shape[1] // 4
                m.pos_embedding = torch.cat([pe[:, 2 * q:], pe[:, :2 * q]], 1)   # (y.sin, y.cos, x.sin, x.cos)

            def cos_sin(m):
                pe = m.pos_embedding
                q = pe.shape[1] // 4
                m.pos_embedding = torch.cat([pe[:, q:2 * q], pe[:, :q], pe[:, 3 * q:], pe[:, 2 * q:3 * q]], 1)
            v += [("sin-cos positions -> zero", zero_pos),
                  ("sin-cos blocks x/y swapped (y.sin, y.cos, x.sin, x.cos)", xy_swapped),
                  ("sin/cos swapped within x and y (x.cos, x.sin, y.cos, y.sin)", cos_sin)]
        return v


VITP_SHIMS = [
    "einops (not installed): a minimal einops module in sys.modules (rearrange, repeat, einops.layers.torch."
    "Rearrange) implementing names, parenthesised groups, '...' and '1', self-tested against explicit "
    "reshape/permute for 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)', 'b n (h d) -> b h n d', "
    "'b h n d -> b n (h d)', '... d -> b ... d'",
    "vit_pytorch/__init__.py not executed (it imports mae, dino, ...): vit.py / simple_vit.py imported from a "
    "stub package 'vit_pytorch' whose __path__ is the repository's vit_pytorch/ folder",
    "attention capture: forward hook on each Attention.attend (nn.Softmax)",
]

VITP = dict(image_size=32, patch_size=8, num_classes=5, dim=48, depth=3, heads=3, dim_head=16, mlp_dim=96)


def vitp_extra(pool):
    return {"cls_token": 0.5, "pos_embedding": 0.5} if pool is not None else {}


def case_vit_pytorch(args, fam, commit, kind):
    name = {"cls": "vit_pytorch_vit", "mean": "vit_pytorch_vit_mean", "simple": "vit_pytorch_simple"}[kind]
    seed = {"cls": 105, "mean": 106, "simple": 107}[kind]
    torch.manual_seed(seed)
    if kind == "simple":
        build = lambda: fam.simple.SimpleViT(**VITP)  # noqa: E731
    else:
        build = lambda: fam.vit.ViT(pool=kind, **VITP)  # noqa: E731
    model = build().eval()
    gen = torch.Generator().manual_seed(1000 + seed)
    randomize(model, gen, vitp_extra(None if kind == "simple" else kind))
    # vit-pytorch's ViT / SimpleViT normalise nothing; the library's own training wrappers (dino.py, es_vit.py,
    # lejepa.py) normalise with ImageNet's statistics: those are used
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    x = make_input(gen, 32, mean, std)
    peaky = tune_peaky(fam, model, x)
    sd = model.state_dict()
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    torch.save(sd, os.path.join(folder, "model.pth"))
    res = finish(fam, model, x, folder, peaky, simple=(kind == "simple"), logits=True)
    m2 = build()
    m2.load_state_dict(torch.load(os.path.join(folder, "model.pth")), strict=True)
    a2, o2 = run(fam, m2, x, torch.float64)
    assert torch.equal(a2, res["attn64"]) and torch.equal(o2, res["out64"])
    n_cls = 1 if kind == "cls" else 0
    meta = dict(case=name, family="vit-pytorch", layout="vit-pytorch-simple" if kind == "simple" else "vit-pytorch",
                files=[{"path": "model.pth", "key": None}], heads_arg=3)
    if kind == "mean":
        meta["pool_arg"] = "mean"
    if kind == "simple":
        desc = ("vit_pytorch.simple_vit.SimpleViT(image_size=32, patch_size=8, num_classes=5, dim=48, depth=3, "
                "heads=3, dim_head=16, mlp_dim=96): no class token, posemb_sincos_2d computed (not in the state "
                "dict, float32, temperature 10000), mean over all tokens, linear_head.")
        src_files = ["vit_pytorch/simple_vit.py"]
    else:
        desc = ("vit_pytorch.vit.ViT(image_size=32, patch_size=8, num_classes=5, dim=48, depth=3, heads=3, "
                "dim_head=16, mlp_dim=96, pool=%r)%s." % (kind, "" if kind == "cls" else
                ": at this commit pool='mean' builds NO class token (cls_token (0, 48), pos_embedding (16, 48)) "
                "and averages every (patch) token"))
        src_files = ["vit_pytorch/vit.py"]
    meta.update(**dims(32, 8, 48, 3, 3, res, num_prefix=n_cls, class_token=bool(n_cls)),
                logits_tolerance=res["logits_tolerance"], mean=mean, std=std,
                source={"repo": "lucidrains/vit-pytorch", "commit": commit, "files": src_files},
                shims=VITP_SHIMS, generator=GENERATOR,
                description=desc + " model.pth = torch.save(model.state_dict()); heads_arg 3 (dim_head is not in "
                                   "the file); logits.npy = the float64 forward's output. mean/std: ViT itself "
                                   "normalises nothing; vit-pytorch's training wrappers use ImageNet's.",
                peaky=peaky, capture_output_change=res["capture_change"], sanity=res["sanity"], tensors=shapes(sd))
    write_meta(folder, **meta)
    return res


# --------------------------------------------------------------------------
# Common tail
# --------------------------------------------------------------------------

def dims(S, P, D, L, H, res, num_prefix, class_token):
    T = res["attn64"].shape[-1]
    assert res["attn64"].shape == (L, H, T, T) and T == (S // P) ** 2 + num_prefix
    return dict(image_size=S, patch=P, dim=D, depth=L, heads=H, tokens=T, num_prefix=num_prefix,
                class_token=class_token, blocks=[0, L // 2, L - 1],
                spread_f32_f64=float("%.3g" % res["spread"]), tolerance=float("%.3g" % res["tolerance"]))


def finish(fam, model, x, folder, peaky, ls_variants=False, simple=False, logits=False):
    assert all(p["mean_row_max"] > 0.5 for p in peaky)
    a32, o32 = run(fam, model, x, torch.float32)
    a64, o64 = run(fam, model, x, torch.float64)
    plain64 = run_plain(fam, model, x, torch.float64)
    plain32 = run_plain(fam, model, x, torch.float32)
    change = max((o64 - plain64).abs().max().item(), (o32 - plain32).abs().max().item())
    assert change == 0.0, "capturing changed the output by %g" % change
    spread = (a32.double() - a64).abs().max().item()
    tol = max(1e-5, 2 * spread)
    L = a64.shape[0]
    blocks = [0, L // 2, L - 1]
    assert torch.allclose(a64.sum(-1), torch.ones((), dtype=torch.float64), atol=1e-12)
    if isinstance(fam, OpenAIClip):
        variants = fam.variants()
    elif isinstance(fam, OpenClip):
        variants = fam.variants(ls=ls_variants)
    else:
        variants = fam.variants(simple=simple)
    res = {"attn64": a64, "out64": o64, "spread": spread, "tolerance": tol, "capture_change": change,
           "sanity": sanity(fam, model, x, a64, tol, variants)}
    save_npy(os.path.join(folder, "input.npy"), x.numpy())
    save_npy(os.path.join(folder, "attn.npy"), a64[blocks].float().numpy())
    if logits:
        lspread = (o32.double() - o64).abs().max().item()
        res["logits_tolerance"] = float("%.3g" % max(1e-4, 2 * lspread))
        save_npy(os.path.join(folder, "logits.npy"), o64[0].float().numpy())
    return res


CASES = ["openai_clip_visual", "openai_clip_full", "open_clip_vit", "open_clip_ls",
         "vit_pytorch_vit", "vit_pytorch_vit_mean", "vit_pytorch_simple"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clip", help="openai/CLIP work tree")
    ap.add_argument("--clip-commit")
    ap.add_argument("--open-clip", help="mlfoundations/open_clip work tree (with src/open_clip)")
    ap.add_argument("--open-clip-commit")
    ap.add_argument("--open-clip-mha", help="optional: open_clip work tree at its last nn.MultiheadAttention commit")
    ap.add_argument("--open-clip-mha-commit")
    ap.add_argument("--vit-pytorch", help="lucidrains/vit-pytorch work tree (with vit_pytorch/)")
    ap.add_argument("--vit-pytorch-commit")
    ap.add_argument("--only", nargs="*", choices=CASES)
    args = ap.parse_args()
    torch.set_num_threads(1)
    todo = args.only or CASES
    if any(c.startswith("openai") for c in todo):
        if not args.clip:
            raise SystemExit("--clip is needed")
        fam, commit = OpenAIClip(args.clip), repo_commit(args.clip, args.clip_commit)
        for c in ("openai_clip_visual", "openai_clip_full"):
            if c in todo:
                globals()["case_" + c](args, fam, commit)
                print("wrote", c)
    if any(c.startswith("open_clip") for c in todo):
        if not args.open_clip:
            raise SystemExit("--open-clip is needed")
        fam, commit = OpenClip(args.open_clip), repo_commit(args.open_clip, args.open_clip_commit)
        for c, ls in (("open_clip_vit", False), ("open_clip_ls", True)):
            if c in todo:
                case_open_clip(args, fam, commit, ls)
                print("wrote", c)
    if any(c.startswith("vit_pytorch") for c in todo):
        if not args.vit_pytorch:
            raise SystemExit("--vit-pytorch is needed")
        fam, commit = VitPytorch(args.vit_pytorch), repo_commit(args.vit_pytorch, args.vit_pytorch_commit)
        for c, kind in (("vit_pytorch_vit", "cls"), ("vit_pytorch_vit_mean", "mean"), ("vit_pytorch_simple", "simple")):
            if c in todo:
                case_vit_pytorch(args, fam, commit, kind)
                print("wrote", c)


if __name__ == "__main__":
    main()
