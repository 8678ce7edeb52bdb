#!/usr/bin/python3
"""Family fixtures made by the families' OWN code: Hugging Face transformers (CLIP, DINOv2,
DINOv2-with-registers, DeiT-with-teacher), facebookresearch/dinov2 and facebookresearch/dino.
Format: tests/fixtures/families/FORMAT.md.  Read by tests/test_families.cpp.

Run (from anywhere; nothing here is needed at run time by attnmap):

    apt-get install python3-packaging python3-filelock python3-regex python3-tqdm   # Debian 12
    /usr/bin/python3 tools/make_family_fixtures_hf.py \\
        --transformers /work/ext/transformers --dinov2 /work/ext/dinov2 --dino /work/ext/dino \\
        [--only hf_clip_vision,dino_train] [--out tests/fixtures/families]

where each path is a work tree of the family's repository at the commit recorded below (never
committed to attnmap; extract one with `git --git-dir=<bare> archive <commit> | tar -x -C <dir>`):

    huggingface/transformers     298b3f19303294293f7af075609481d64cb13de3  (tag v4.48.3)
    facebookresearch/dinov2      85a24602099d397264d5b30461ad7f3bfd726ca1  (2024-10-26; the last commit
                                 whose Attention computes an explicit softmax + attn_drop; later ones
                                 call F.scaled_dot_product_attention, which torch 1.13 lacks)
    facebookresearch/dino        7c446df5b9f45747937fb0d72314eb9f7b66930a  (main, 2023-04-27)

(The fixtures were made from the transformers commit taken out of the history of
github:TonyRHouston/huggingface-transformers, a fork that holds upstream's commits: the upstream
snapshot is larger than the fetch tool allows. Any clone holding that commit gives the same tree.)
The script refuses a tree at another version (transformers __version__ must be 4.48.3; the dinov2
and dino files are checked by SHA-1 of their git blobs).

Interpreter: Debian 12's /usr/bin/python3 with Debian's torch 1.13 and numpy.  Debian has no
transformers / safetensors / huggingface_hub / tokenizers packages, so the shims listed in SHIMS
(below; each is also recorded in every case's meta.json) stand in for what transformers imports but
these vision models never call; the models' own modules (modeling_*.py, configuration_*.py,
image_processing_*.py, modeling_utils.PreTrainedModel.save_pretrained, configuration_utils) run
unchanged.  Weights, configs and processor configs are written by the families' own save paths:
HF `model.save_pretrained()` / `ImageProcessor.save_pretrained()`, `torch.save(model.state_dict())`
for dinov2 (as its hub checkpoints), DINO's `utils.save_on_master(save_dict, ...)` for dino_train.

Every case: random seeded weights (LayerNorm weight/bias random, LayerScale gammas random in
[0.2, 0.9], every bias non-zero), the q/k projections of each block scaled until that block's mean
row max of the attention probabilities is >= 0.6; attention taken from the family's own forward
(HF: output_attentions=True with attn_implementation="eager"; dinov2/dino: forward hooks on
attn.attn_drop, whose input is the softmax output) once in float32 and once in float64 on the stored
float32 weights and input; attn.npy = the float64 result as float32; "spread_f32_f64" /
"tolerance" as FORMAT.md says; meta "sanity" lists family-specific changes, each verified to move
some attention probability by more than 100 x tolerance.  hf_clip_full's attention is taken with
CLIPModel.vision_model(...) (what CLIPModel.forward runs for the image; checked identical to the full
forward in float32): the text tower's causal mask, torch.full(..., finfo(float64).min) in float32,
overflows on torch 1.13 in float64.  Importing transformers creates <tmp>/attnmap-no-hf-home/hub.
Deterministic: two runs write identical files.
"""
import argparse
import copy
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import json
import math
import os
import shutil
import sys
import tempfile
import types
import warnings
from functools import partial

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "tools/make_family_fixtures_hf.py"

TRANSFORMERS_COMMIT = "298b3f19303294293f7af075609481d64cb13de3"
TRANSFORMERS_VERSION = "4.48.3"
DINOV2_COMMIT = "85a24602099d397264d5b30461ad7f3bfd726ca1"
DINO_COMMIT = "7c446df5b9f45747937fb0d72314eb9f7b66930a"
# git blob SHA-1s of the files whose code runs, at the commits above
DINOV2_BLOBS = {
    "dinov2/models/vision_transformer.py": "74df767eb3f3e45c8012e2637580d4927febd048",
    "dinov2/layers/attention.py": "0fb76ef2816164729a58cceb18d0f000cfb18777",
    "dinov2/layers/block.py": "930787b262faac4f2264797496faff75ac56b7cc",
    "dinov2/layers/swiglu_ffn.py": "5e9dafa4592a408f6874d54853e8f60db5c41f74",
    "dinov2/layers/layer_scale.py": "51df0d7ce61f2b41fa9e6369f52391dd7fe7d386",
    "dinov2/layers/mlp.py": "bbf9432aae9258612caeae910a7bde17999e328e",
    "dinov2/layers/patch_embed.py": "8b7c0804784a42cf80c0297d110dcc68cc85b339",
}
DINO_BLOBS = {
    "vision_transformer.py": "f69a7ad0522500ca2a85305a789be5ca6ac474d0",
    "utils.py": "9586250123a125a83ea2679e121b1b0ef8089916",
    "main_dino.py": "cade9873dcb1d1c6c69ddba61dbdcf3f01dd7540",
}

OPENAI_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
OPENAI_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]

PEAK_TARGET = 0.6       # mean row max of each block's attention probabilities after q/k scaling
SANITY_FACTOR = 100.0   # a family-specific change must move some probability by > 100 x tolerance

SHIMS_HF = [
    "Debian 12 packages python3-packaging/-filelock/-regex/-tqdm are used as they are (real code).",
    "huggingface_hub, tokenizers: stub packages from a sys.meta_path finder (every attribute a no-op "
    "callable, names ending in Error/Exception/Enabled are Exception subclasses); "
    "huggingface_hub.constants holds real values (HF_HOME under the temp dir, HF_HUB_OFFLINE=True, "
    "HF_HUB_DISABLE_TELEMETRY=True). Only import-time names; the vision models never call them.",
    "huggingface_hub.split_torch_state_dict_into_shards: returns one shard named "
    "filename_pattern.format(suffix='') (= model.safetensors), as the real one does below max_shard_size.",
    "safetensors.torch: storage_ptr/storage_size as in safetensors (tensor.storage() on torch 1.13); "
    "save_file = tools/fixture_lib.write_safetensors (F32, tensors in name order, header padded to 8, "
    "__metadata__ passed through = {'format': 'pt'}), 0-d tensors recorded with shape [] as safetensors does.",
    "transformers.dependency_versions_check: replaced by an empty module with a no-op dep_version_check "
    "(its import-time check needs pip metadata of tokenizers/huggingface-hub/safetensors); "
    "transformers/__init__.py (the lazy import table) runs unchanged.",
    "transformers.modeling_utils.is_safetensors_available patched to True and safe_save_file set to the "
    "shim above, so PreTrainedModel.save_pretrained(safe_serialization=True) runs its own code.",
]
SHIMS_DINOV2 = [
    "none in the model code: xFormers is absent, so dinov2/layers fall back to their own pure-PyTorch "
    "Attention / SwiGLUFFN / Block (the code path the library takes without xFormers)."
]
SHIMS_DINO = [
    "torchvision: stub package (torchvision, .datasets, .transforms, .models as empty modules) so that "
    "main_dino.py imports; only its get_args_parser, DINOLoss and the save_dict code are used.",
    "torch.hub.list patched to return [] while main_dino.get_args_parser() builds its --arch choices "
    "(it would fetch facebookresearch/xcit from GitHub).",
    "args: parsed by main_dino.get_args_parser() from a fixed argv; rank/gpu/world_size = 0/0/1 set as "
    "utils.init_distributed_mode does on one GPU (that function itself exits without CUDA).",
    "torch.distributed: a one-process gloo group (FileStore in a temp dir, GLOO_SOCKET_IFNAME=lo) so the "
    "student is wrapped in the real nn.parallel.DistributedDataParallel as main_dino.py does.",
    "DINOHead built with hidden_dim=32, bottleneck_dim=16 (main_dino.py uses the defaults 2048/256, which "
    "would make the checkpoint ~20 MB); out_dim 64 via --out_dim.",
]


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

def git_blob_sha1(path):
    data = open(path, "rb").read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def make_input(seed, size, mean, std):
    """A smooth random RGB image in [0, 1], normalised with the family's mean / std: (3, S, S) float32."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 3, 5, 5, generator=g, dtype=torch.float64)
    img = torch.nn.functional.interpolate(coarse, size=(size, size), mode="bilinear", align_corners=True)[0]
    img = (0.7 * img + 0.3 * torch.rand(3, size, size, generator=g, dtype=torch.float64)).clamp(0, 1)
    m = torch.tensor(mean, dtype=torch.float64).view(3, 1, 1)
    s = torch.tensor(std, dtype=torch.float64).view(3, 1, 1)
    return ((img - m) / s).to(torch.float32)


LAYERSCALE_NAMES = ("lambda1", "gamma")
TOKEN_NAMES = ("cls_token", "class_embedding", "register_tokens", "mask_token", "distillation_token",
               "position_embeddings", "pos_embed")


def randomise(model, seed, keep=()):
    """Seeded random values for every parameter (float32): Linear/Conv weight N(0, 1/fan_in), bias
    N(0, 0.1^2); LayerNorm weight U(0.6, 1.4), bias N(0, 0.2^2); LayerScale U(0.2, 0.9); tokens and
    position embeddings N(0, 0.5^2); Embedding N(0, 0.5^2); weight_norm v like a Linear weight."""
    g = torch.Generator().manual_seed(seed)

    def normal(shape, std):
        return torch.randn(shape, generator=g, dtype=torch.float64) * std

    def uniform(shape, lo, hi):
        return lo + (hi - lo) * torch.rand(shape, generator=g, dtype=torch.float64)

    with torch.no_grad():
        for mname, mod in model.named_modules():
            for pname, p in mod.named_parameters(recurse=False):
                full = (mname + "." if mname else "") + pname
                if any(full.endswith(k) for k in keep):
                    continue
                if isinstance(mod, nn.LayerNorm):
                    v = uniform(p.shape, 0.6, 1.4) if pname == "weight" else normal(p.shape, 0.2)
                elif isinstance(mod, (nn.Linear, nn.Conv2d)) and pname in ("weight", "weight_v"):
                    fan_in = p[0].numel()
                    v = normal(p.shape, 1.0 / math.sqrt(fan_in))
                elif pname == "weight_g":
                    v = uniform(p.shape, 0.5, 1.5)
                elif pname == "bias":
                    v = normal(p.shape, 0.1)
                elif isinstance(mod, nn.Embedding):
                    v = normal(p.shape, 0.5)
                elif pname in LAYERSCALE_NAMES:
                    v = uniform(p.shape, 0.2, 0.9)
                elif pname in TOKEN_NAMES:
                    v = normal(p.shape, 0.5)
                elif pname == "logit_scale":
                    continue  # CLIP's temperature scalar (not used by the vision attention)
                else:
                    raise RuntimeError("no randomisation rule for %s (%s)" % (full, type(mod).__name__))
                p.copy_(v.to(p.dtype))


def row_max_mean(a):
    return float(a.max(-1).values.mean())


def make_peaky(model, attn_fn, qk_fn, x, target=PEAK_TARGET):
    """Scale each block's q and k projections (weights and biases, by the same factor) until that
    block's mean row max >= target.  Blocks are tuned in order (block i depends only on blocks < i)."""
    factors = []
    blocks = qk_fn(model)
    for i, pieces in enumerate(blocks):
        f = 1.0
        for _ in range(80):
            with torch.no_grad():
                a = attn_fn(model, x)[i]
            if row_max_mean(a) >= target:
                break
            with torch.no_grad():
                for p, sl in pieces:
                    if sl is None:
                        p.mul_(1.15)
                    else:
                        p[sl] *= 1.15
            f *= 1.15
        else:
            raise RuntimeError("block %d: could not make attention peaky" % i)
        factors.append(f)
    with torch.no_grad():
        final = [row_max_mean(a) for a in attn_fn(model, x)]
    return factors, final


def run_precisions(model, attn_fn, x32, extra_fn=None):
    """(attn64 list, attn32 list, extra64, extra32): the family's forward in float32 and float64 on the
    same (float32) weights and input."""
    m32 = copy.deepcopy(model).float().eval()
    m64 = copy.deepcopy(model).double().eval()
    with torch.no_grad():
        a32 = [a.double() for a in attn_fn(m32, x32)]
        a64 = attn_fn(m64, x32.double())
        e32 = extra_fn(m32, x32).double() if extra_fn else None
        e64 = extra_fn(m64, x32.double()) if extra_fn else None
    return a64, a32, e64, e32, m64


def pick(attns, blocks):
    return torch.stack([attns[b] for b in blocks], 0)


def sanity_entry(desc, ref, changed, tol):
    d = float((changed - ref).abs().max())
    if not d > SANITY_FACTOR * tol:
        raise RuntimeError("sanity '%s' moved attention by only %.3g (tolerance %.3g)" % (desc, d, tol))
    return {"change": desc, "max_abs_attn_diff": float("%.6g" % d), "times_tolerance": float("%.4g" % (d / tol))}


def write_case(folder, *, meta, x32, attn64, blocks, spread, logits=None, logits_spread=None):
    os.makedirs(folder, exist_ok=True)
    fl.save_npy(os.path.join(folder, "input.npy"), x32.numpy())
    fl.save_npy(os.path.join(folder, "attn.npy"), attn64.numpy())
    tol = max(1e-5, 2 * spread)
    meta = dict(meta)
    meta["blocks"] = blocks
    meta["spread_f32_f64"] = float("%.6g" % spread)
    meta["tolerance"] = float("%.6g" % tol)
    if logits is not None:
        fl.save_npy(os.path.join(folder, "logits.npy"), logits.numpy())
        meta["logits_tolerance"] = float("%.6g" % max(1e-4, 2 * logits_spread))
    order = ["case", "family", "layout", "files", "heads_arg", "image_size", "patch", "dim", "depth", "heads",
             "tokens", "num_prefix", "class_token", "blocks", "spread_f32_f64", "tolerance", "logits_tolerance",
             "mean", "std", "source", "shims", "generator", "description"]
    ordered = {k: meta[k] for k in order if k in meta}
    ordered.update({k: v for k, v in meta.items() if k not in ordered})
    fl.write_meta(folder, **ordered)
    return tol


def fresh(folder):
    """An empty case folder (a previous run's files removed)."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder


def folder_size(folder):
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))


# ----------------------------------------------------------------------------------------------
# transformers, with the shims
# ----------------------------------------------------------------------------------------------

class _NoOp:
    """Stand-in for a huggingface_hub / tokenizers object: callable (returns its argument when used as
    a decorator, else another stand-in), any attribute is another stand-in."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _NoOp(self._name + "()")

    def __getattr__(self, n):
        if n.startswith("__"):
            raise AttributeError(n)
        return _NoOp(self._name + "." + n)

    def __repr__(self):
        return "<shim %s>" % self._name


class _StubModule(types.ModuleType):
    def __getattr__(self, n):
        if n.startswith("__"):
            raise AttributeError(n)
        if n.endswith(("Error", "Exception", "Enabled")):
            v = type(n, (Exception,), {"__module__": self.__name__})
        else:
            v = _NoOp(self.__name__ + "." + n)
        setattr(self, n, v)
        return v


class _StateDictSplit:
    def __init__(self, names, filename):
        self.is_sharded = False
        self.metadata = {}
        self.filename_to_tensors = {filename: list(names)}
        self.tensor_to_filename = {n: filename for n in names}


def _split_torch_state_dict_into_shards(state_dict, *, filename_pattern="model{suffix}.safetensors", **_):
    return _StateDictSplit(list(state_dict.keys()), filename_pattern.format(suffix=""))


def _storage_ptr(tensor):
    try:
        return tensor.untyped_storage().data_ptr()
    except AttributeError:
        try:
            return tensor.storage().data_ptr()
        except NotImplementedError:
            return 0


def _storage_size(tensor):
    try:
        return tensor.untyped_storage().nbytes()
    except AttributeError:
        return tensor.storage().size() * tensor.element_size()


def _save_file(tensors, filename, metadata=None):
    """safetensors.torch.save_file for F32 tensors, via fixture_lib.write_safetensors; a 0-d tensor (CLIP's
    logit_scale) keeps shape [] as safetensors writes it (write_safetensors would record [1])."""
    for n, t in tensors.items():
        assert t.dtype == torch.float32, (n, t.dtype)
    fl.write_safetensors(filename, {n: t.detach().cpu() for n, t in tensors.items()}, "F32", metadata=metadata)
    scalars = [n for n, t in tensors.items() if t.dim() == 0]
    if scalars:
        with open(filename, "rb") as f:
            data = f.read()
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        for name in scalars:
            assert header[name]["shape"] == [1]
            header[name]["shape"] = []
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * ((-len(h)) % 8)
        with open(filename, "wb") as f:
            f.write(len(h).to_bytes(8, "little") + h + data[8 + n:])


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    ROOTS = ("huggingface_hub", "tokenizers", "safetensors")

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.ROOTS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, m):
        if m.__name__ == "huggingface_hub.constants":
            home = os.path.join(tempfile.gettempdir(), "attnmap-no-hf-home")
            m.HF_HOME = home
            m.HF_HUB_CACHE = os.path.join(home, "hub")
            m.default_cache_path = m.HF_HUB_CACHE
            m.HF_HUB_OFFLINE = True
            m.HF_HUB_DISABLE_TELEMETRY = True
        elif m.__name__ == "huggingface_hub":
            m.constants = importlib.import_module("huggingface_hub.constants")
            m.split_torch_state_dict_into_shards = _split_torch_state_dict_into_shards
        elif m.__name__ == "safetensors.torch":
            m.storage_ptr = _storage_ptr
            m.storage_size = _storage_size
            m.save_file = _save_file


def import_transformers(tree):
    src = os.path.join(tree, "src")
    sys.meta_path.insert(0, _StubFinder())
    dvc = types.ModuleType("transformers.dependency_versions_check")
    dvc.dep_version_check = lambda pkg, hint=None: None
    sys.modules[dvc.__name__] = dvc
    sys.path.insert(0, src)
    import transformers
    if transformers.__version__ != TRANSFORMERS_VERSION:
        raise SystemExit("--transformers must be a tree at v%s (%s), found %s"
                         % (TRANSFORMERS_VERSION, TRANSFORMERS_COMMIT, transformers.__version__))
    if not os.path.abspath(transformers.__file__).startswith(os.path.abspath(src)):
        raise SystemExit("imported transformers from %s, not from --transformers" % transformers.__file__)
    import transformers.modeling_utils as mu
    mu.is_safetensors_available = lambda: True
    mu.safe_save_file = _save_file
    return transformers


def hf_attn_fn(call):
    """attn_fn for an HF model: `call(model, pixel_values)` returns the outputs holding .attentions."""
    def fn(model, x):
        out = call(model, x.unsqueeze(0))
        return [a[0] for a in out.attentions]
    return fn


def hf_qk(layers_of, q="attention.attention.query", k="attention.attention.key"):
    def fn(model):
        out = []
        for layer in layers_of(model):
            pieces = []
            for path in (q, k):
                lin = layer.get_submodule(path)
                pieces += [(lin.weight, None), (lin.bias, None)]
            out.append(pieces)
        return out
    return fn


def hf_save(model, folder, processor):
    model.save_pretrained(folder, safe_serialization=True)
    if processor is not None:
        processor.save_pretrained(folder)
    names = sorted(os.listdir(folder))
    expect = ["config.json", "model.safetensors"] + (["preprocessor_config.json"] if processor is not None else [])
    if names != sorted(expect):
        raise RuntimeError("save_pretrained wrote %s" % names)


def hf_source(files):
    return {"repo": "huggingface/transformers", "commit": TRANSFORMERS_COMMIT,
            "files": ["src/transformers/" + f for f in files],
            "obtained_from": "git history of github:TonyRHouston/huggingface-transformers (a fork holding "
                             "huggingface/transformers' commits; the upstream snapshot exceeds the fetch "
                             "size limit); the commit is upstream's tag v4.48.3"}


# ---- CLIP --------------------------------------------------------------------------------------

CLIP_VISION = dict(image_size=32, patch_size=8, hidden_size=48, intermediate_size=192, num_hidden_layers=3,
                   num_attention_heads=3)


def case_hf_clip(T, out, full):
    from transformers import CLIPImageProcessor
    case = "hf_clip_full" if full else "hf_clip_vision"
    seed = 1101 if full else 1001
    if full:
        from transformers import CLIPConfig, CLIPModel
        cfg = CLIPConfig(text_config=dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=2, max_position_embeddings=16),
                         vision_config=dict(CLIP_VISION), projection_dim=16, attn_implementation="eager")
        model = CLIPModel(cfg).eval()
        input_ids = torch.tensor([[0, 5, 9, 17, 2]])

        def call(m, px):
            # what CLIPModel.forward runs for the image (vision_outputs = self.vision_model(...)); the full
            # forward is not used in float64 because the text tower's causal mask does
            # torch.full(..., torch.finfo(float64).min) in the default float32 dtype, which torch 1.13 rejects
            return m.vision_model(pixel_values=px, output_attentions=True)

        def full_call(m, px):
            return m(input_ids=input_ids, pixel_values=px, output_attentions=True).vision_model_output
        vision = lambda m: m.vision_model  # noqa: E731
    else:
        from transformers import CLIPVisionConfig, CLIPVisionModel
        cfg = CLIPVisionConfig(**CLIP_VISION, attn_implementation="eager")
        model = CLIPVisionModel(cfg).eval()

        def call(m, px):
            return m(pixel_values=px, output_attentions=True)
        vision = lambda m: m.vision_model  # noqa: E731
    assert type(vision(model).encoder.layers[0].self_attn).__name__ == "CLIPAttention"
    randomise(model, seed)
    x32 = make_input(seed, 32, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    attn_fn = hf_attn_fn(call)
    qk = hf_qk(lambda m: vision(m).encoder.layers, "self_attn.q_proj", "self_attn.k_proj")
    factors, peaks = make_peaky(model, attn_fn, qk, x32)
    folder = fresh(os.path.join(out, case))
    proc = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    hf_save(model, folder, proc)
    a64, a32, _, _, m64 = run_precisions(model, attn_fn, x32)
    blocks = [0, 1, 2]
    ref = pick(a64, blocks)
    spread = float((pick(a32, blocks) - ref).abs().max())
    tol = max(1e-5, 2 * spread)
    if full:  # the full CLIPModel forward (float32) gives the same vision attentions
        with torch.no_grad():
            fa = hf_attn_fn(full_call)(model, x32)
        assert all(torch.equal(u, v) for u, v in zip(fa, attn_fn(model, x32)))
    mod = copy.deepcopy(m64)
    vision(mod).pre_layrnorm = nn.Identity()
    with torch.no_grad():
        changed = pick(attn_fn(mod, x32.double()), blocks)
    sanity = [sanity_entry("vision_model.pre_layrnorm -> identity", ref, changed, tol)]
    sd_names = set(model.state_dict().keys())
    meta = dict(
        case=case, family="Hugging Face transformers CLIP" + (" (CLIPModel)" if full else " (CLIPVisionModel)"),
        layout="hf-clip", files=[{"path": "model.safetensors"}, {"path": "."}], heads_arg=None,
        image_size=32, patch=8, dim=48, depth=3, heads=3, tokens=17, num_prefix=1, class_token=True,
        mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD,
        source=hf_source(["models/clip/modeling_clip.py", "models/clip/configuration_clip.py",
                          "models/clip/image_processing_clip.py", "modeling_utils.py"]),
        shims=SHIMS_HF, generator=GENERATOR,
        description=("transformers v4.48.3 %s, random seeded weights, saved with save_pretrained; attention of "
                     "the vision tower's encoder layers 0,1,2 (output_attentions, eager CLIPAttention)"
                     % ("CLIPModel (text tower too)" if full else "CLIPVisionModel")),
        sanity=sanity, peaky_qk_factors=[float("%.4g" % f) for f in factors],
        mean_row_max=[float("%.4f" % p) for p in peaks],
        position_ids_saved=any(n.endswith("position_ids") for n in sd_names),
        forward=dict(layer_norm_eps=1e-5, hidden_act="quick_gelu: x * sigmoid(1.702 x)",
                     pre_layrnorm="LayerNorm (eps 1e-5) on [class; patches] + position_embedding, before layer 0",
                     attention="q = q_proj(x) * head_dim^-0.5, then softmax(q k^T)",
                     position_interpolation="none by default (ValueError if the input is not image_size); "
                                            "interpolate_pos_encoding=True: bicubic, align_corners=False, to "
                                            "(H/patch, W/patch), class row kept"),
    )
    write_case(folder, meta=meta, x32=x32, attn64=ref.float(), blocks=blocks, spread=spread)
    return folder


# ---- DINOv2 (HF) --------------------------------------------------------------------------------

def case_hf_dinov2(T, out, registers):
    from transformers import BitImageProcessor
    seed = 1301 if registers else 1201
    common = dict(image_size=42, patch_size=14, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
                  mlp_ratio=4, attn_implementation="eager")
    if registers:
        if not hasattr(T, "Dinov2WithRegistersModel"):
            return None
        from transformers import Dinov2WithRegistersConfig, Dinov2WithRegistersModel
        model = Dinov2WithRegistersModel(Dinov2WithRegistersConfig(num_register_tokens=4, **common)).eval()
        case, tokens, prefix = "hf_dinov2_reg", 14, 5
    else:
        from transformers import Dinov2Config, Dinov2Model
        model = Dinov2Model(Dinov2Config(**common)).eval()
        case, tokens, prefix = "hf_dinov2", 10, 1
    assert type(model.encoder.layer[0].attention.attention).__name__.endswith("SelfAttention")
    assert "Sdpa" not in type(model.encoder.layer[0].attention.attention).__name__
    randomise(model, seed)
    x32 = make_input(seed, 42, IMAGENET_MEAN, IMAGENET_STD)

    def call(m, px):
        return m(pixel_values=px, output_attentions=True)
    attn_fn = hf_attn_fn(call)
    factors, peaks = make_peaky(model, attn_fn, hf_qk(lambda m: m.encoder.layer), x32)
    folder = fresh(os.path.join(out, case))
    proc = BitImageProcessor(size={"shortest_edge": 48}, crop_size={"height": 42, "width": 42},
                             resample=3, image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD, do_convert_rgb=True)
    hf_save(model, folder, proc)
    a64, a32, _, _, m64 = run_precisions(model, attn_fn, x32)
    blocks = [0, 1, 2]
    ref = pick(a64, blocks)
    spread = float((pick(a32, blocks) - ref).abs().max())
    tol = max(1e-5, 2 * spread)
    sanity = []
    mod = copy.deepcopy(m64)
    with torch.no_grad():
        for layer in mod.encoder.layer:
            layer.layer_scale1.lambda1.fill_(1.0)
            layer.layer_scale2.lambda1.fill_(1.0)
        sanity.append(sanity_entry("every layer_scale1/2.lambda1 -> 1", ref,
                                   pick(attn_fn(mod, x32.double()), blocks), tol))
    if registers:
        mod = copy.deepcopy(m64)
        with torch.no_grad():
            mod.embeddings.register_tokens.zero_()
            sanity.append(sanity_entry("embeddings.register_tokens -> 0", ref,
                                       pick(attn_fn(mod, x32.double()), blocks), tol))
    interp = ("when the input grid differs from config.image_size/patch (or H != W): class row kept; the "
              "(image_size/patch)^2 patch rows reshaped to a square grid, torch bicubic interpolate to "
              "size=(H/patch, W/patch) (integer division), align_corners=False, %s, computed in float32 "
              "and cast back; no +0.1 offset / scale_factor (unlike facebookresearch/dinov2)"
              % ("antialias=True" if registers else "antialias=False"))
    meta = dict(
        case=case, family="Hugging Face transformers " + ("Dinov2WithRegistersModel" if registers else "Dinov2Model"),
        layout="hf-dinov2", files=[{"path": "model.safetensors"}, {"path": "."}], heads_arg=None,
        image_size=42, patch=14, dim=48, depth=3, heads=3, tokens=tokens, num_prefix=prefix, class_token=True,
        mean=IMAGENET_MEAN, std=IMAGENET_STD,
        source=hf_source(
            (["models/dinov2_with_registers/modeling_dinov2_with_registers.py",
              "models/dinov2_with_registers/configuration_dinov2_with_registers.py"] if registers else
             ["models/dinov2/modeling_dinov2.py", "models/dinov2/configuration_dinov2.py"])
            + ["models/bit/image_processing_bit.py", "modeling_utils.py"]),
        shims=SHIMS_HF, generator=GENERATOR,
        description=("transformers v4.48.3 %s (patch 14, image 42, LayerScale lambda1 random, mask_token "
                     "random but unused%s), saved with save_pretrained; attention of layers 0,1,2 "
                     "(output_attentions, eager self-attention)"
                     % ("Dinov2WithRegistersModel" if registers else "Dinov2Model",
                        ", 4 register tokens" if registers else "")),
        sanity=sanity, peaky_qk_factors=[float("%.4g" % f) for f in factors],
        mean_row_max=[float("%.4f" % p) for p in peaks],
        forward=dict(layer_norm_eps=1e-6, hidden_act="gelu (exact erf)",
                     mlp="fc1 -> gelu -> fc2 (use_swiglu_ffn false)",
                     layer="h += lambda1_1 * attn(norm1(h)); h += lambda1_2 * mlp(norm2(h)); final layernorm",
                     token_order=("[CLS, reg x4, patches]: position_embeddings (1+N rows) are added to [CLS, "
                                  "patches] first, then the registers are inserted after CLS (registers get no "
                                  "position embedding)") if registers else "[CLS, patches] + position_embeddings",
                     position_interpolation=interp,
                     attention="softmax(q k^T / sqrt(head_dim))"),
    )
    write_case(folder, meta=meta, x32=x32, attn64=ref.float(), blocks=blocks, spread=spread)
    return folder


# ---- DeiT with teacher (HF) ---------------------------------------------------------------------

def case_hf_deit(T, out):
    from transformers import DeiTConfig, DeiTForImageClassificationWithTeacher, DeiTImageProcessor
    seed = 1401
    labels = {i: "class_%d" % i for i in range(5)}
    cfg = DeiTConfig(image_size=32, patch_size=8, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
                     intermediate_size=192, encoder_stride=8, id2label=labels,
                     label2id={v: k for k, v in labels.items()}, attn_implementation="eager")
    model = DeiTForImageClassificationWithTeacher(cfg).eval()
    assert model.config.num_labels == 5
    assert "Sdpa" not in type(model.deit.encoder.layer[0].attention.attention).__name__
    randomise(model, seed)
    x32 = make_input(seed, 32, IMAGENET_MEAN, IMAGENET_STD)

    def call(m, px):
        return m(pixel_values=px, output_attentions=True)
    attn_fn = hf_attn_fn(call)
    logits_fn = lambda m, x: m(pixel_values=x.unsqueeze(0)).logits[0]  # noqa: E731
    factors, peaks = make_peaky(model, attn_fn, hf_qk(lambda m: m.deit.encoder.layer), x32)
    folder = fresh(os.path.join(out, "hf_deit_teacher"))
    # DeiTImageProcessor's defaults are IMAGENET_STANDARD (0.5); facebook/deit-* checkpoints set ImageNet's
    proc = DeiTImageProcessor(size={"height": 36, "width": 36}, crop_size={"height": 32, "width": 32},
                              image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD)
    hf_save(model, folder, proc)
    a64, a32, l64, l32, m64 = run_precisions(model, attn_fn, x32, logits_fn)
    blocks = [0, 1, 2]
    ref = pick(a64, blocks)
    spread = float((pick(a32, blocks) - ref).abs().max())
    lspread = float((l32 - l64).abs().max())
    tol = max(1e-5, 2 * spread)
    ltol = max(1e-4, 2 * lspread)
    with torch.no_grad():
        out64 = m64(pixel_values=x32.double().unsqueeze(0))
        assert torch.allclose(out64.logits, (out64.cls_logits + out64.distillation_logits) / 2)
        mod = copy.deepcopy(m64)
        mod.deit.embeddings.distillation_token.zero_()
        sanity = [sanity_entry("deit.embeddings.distillation_token -> 0", ref,
                               pick(attn_fn(mod, x32.double()), blocks), tol)]
        d = float((out64.cls_logits[0] - out64.logits[0]).abs().max())
        if not d > SANITY_FACTOR * ltol:
            raise RuntimeError("cls-only logits too close to the mean of the two heads")
        sanity.append({"change": "logits = cls_classifier only (instead of the mean of the two heads)",
                       "max_abs_logits_diff": float("%.6g" % d), "times_logits_tolerance": float("%.4g" % (d / ltol))})
    meta = dict(
        case="hf_deit_teacher", family="Hugging Face transformers DeiTForImageClassificationWithTeacher",
        layout="hf-deit", files=[{"path": "model.safetensors"}, {"path": "."}], heads_arg=None,
        image_size=32, patch=8, dim=48, depth=3, heads=3, tokens=18, num_prefix=2, class_token=True,
        mean=IMAGENET_MEAN, std=IMAGENET_STD,
        source=hf_source(["models/deit/modeling_deit.py", "models/deit/configuration_deit.py",
                          "models/deit/image_processing_deit.py", "modeling_utils.py"]),
        shims=SHIMS_HF, generator=GENERATOR,
        description=("transformers v4.48.3 DeiTForImageClassificationWithTeacher (cls + distillation token, "
                     "cls_classifier + distillation_classifier, 5 classes), saved with save_pretrained; "
                     "attention of layers 0,1,2; logits.npy = its logits = (cls_logits + distillation_logits) / 2"),
        sanity=sanity, peaky_qk_factors=[float("%.4g" % f) for f in factors],
        mean_row_max=[float("%.4f" % p) for p in peaks],
        forward=dict(layer_norm_eps=1e-12, hidden_act="gelu (exact erf)",
                     token_order="[CLS, DIST, patches] + position_embeddings (N+2 rows)",
                     logits="(cls_classifier(final_layernorm(h)[0]) + "
                            "distillation_classifier(final_layernorm(h)[1])) / 2",
                     position_interpolation="none by default (input must be image_size); "
                                            "interpolate_pos_encoding=True: bicubic, size=(H/patch, W/patch), "
                                            "align_corners=False, first 2 rows kept"),
    )
    write_case(folder, meta=meta, x32=x32, attn64=ref.float(), blocks=blocks, spread=spread,
               logits=l64.float(), logits_spread=lspread)
    return folder


# ----------------------------------------------------------------------------------------------
# facebookresearch/dinov2
# ----------------------------------------------------------------------------------------------

def check_blobs(tree, blobs, commit, repo):
    bad = [f for f, sha in blobs.items() if sha is not None and git_blob_sha1(os.path.join(tree, f)) != sha]
    if bad:
        raise SystemExit("%s is not %s at %s (changed: %s)" % (tree, repo, commit, ", ".join(bad)))


def hook_attn_drop(blocks_in_order):
    """attn_fn capturing the input of each block's attn.attn_drop (the softmax output), in block order."""
    def fn(model, x, _forward=None):
        got = []
        hs = [b.attn.attn_drop.register_forward_hook(lambda mod, inp, out: got.append(inp[0][0].detach()))
              for b in blocks_in_order(model)]
        try:
            _forward(model, x.unsqueeze(0)) if _forward else model(x.unsqueeze(0))
        finally:
            for h in hs:
                h.remove()
        return got
    return fn


def fused_qk(blocks_in_order):
    def fn(model):
        out = []
        for b in blocks_in_order(model):
            D = b.attn.qkv.weight.shape[1]
            sl = slice(0, 2 * D)
            out.append([(b.attn.qkv.weight, sl), (b.attn.qkv.bias, sl)])
        return out
    return fn


def case_dinov2(tree, out, swiglu):
    sys.path.insert(0, tree)
    os.environ.setdefault("XFORMERS_DISABLED", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from dinov2.models.vision_transformer import DinoVisionTransformer
        from dinov2.layers import MemEffAttention, NestedTensorBlock as Block
        from dinov2.layers.block import Block as PlainBlock
    case = "dinov2_swiglu" if swiglu else "dinov2_chunked"
    seed = 1601 if swiglu else 1501
    torch.manual_seed(seed)
    model = DinoVisionTransformer(
        img_size=42, patch_size=14, embed_dim=48, depth=4, num_heads=3, mlp_ratio=4,
        block_fn=partial(Block, attn_class=MemEffAttention),  # as vit_small/base/large/giant2 do
        init_values=1.0, ffn_layer="swiglufused" if swiglu else "mlp", block_chunks=0 if swiglu else 2,
        num_register_tokens=4, interpolate_antialias=True, interpolate_offset=0.0,  # as the *_reg hub models
    ).eval()
    blocks_of = lambda m: [b for b in m.modules() if isinstance(b, PlainBlock)]  # noqa: E731
    assert len(blocks_of(model)) == 4
    randomise(model, seed)
    x32 = make_input(seed, 42, IMAGENET_MEAN, IMAGENET_STD)
    attn_fn = hook_attn_drop(blocks_of)
    factors, peaks = make_peaky(model, attn_fn, fused_qk(blocks_of), x32)
    folder = fresh(os.path.join(out, case))
    sd = model.state_dict()
    torch.save(sd, os.path.join(folder, "model.pth"))
    a64, a32, _, _, m64 = run_precisions(model, attn_fn, x32)
    blocks = [0, 2, 3]
    ref = pick(a64, blocks)
    spread = float((pick(a32, blocks) - ref).abs().max())
    tol = max(1e-5, 2 * spread)
    sanity = []
    mod = copy.deepcopy(m64)
    with torch.no_grad():
        for b in blocks_of(mod):
            b.ls1.gamma.fill_(1.0)
            b.ls2.gamma.fill_(1.0)
        sanity.append(sanity_entry("every ls1.gamma / ls2.gamma -> 1", ref,
                                   pick(attn_fn(mod, x32.double()), blocks), tol))
        mod = copy.deepcopy(m64)
        mod.register_tokens.zero_()
        sanity.append(sanity_entry("register_tokens -> 0", ref, pick(attn_fn(mod, x32.double()), blocks), tol))
        if swiglu:
            import torch.nn.functional as F
            mod = copy.deepcopy(m64)
            for b in blocks_of(mod):
                w12, w3 = b.mlp.w12, b.mlp.w3

                def swapped(x, w12=w12, w3=w3):
                    x1, x2 = w12(x).chunk(2, dim=-1)
                    return w3(F.silu(x2) * x1)
                b.mlp.forward = swapped
            sanity.append(sanity_entry("SwiGLU halves swapped: w3(silu(x2) * x1) instead of w3(silu(x1) * x2)",
                                       ref, pick(attn_fn(mod, x32.double()), blocks), tol))
            mod = copy.deepcopy(m64)
            for b in blocks_of(mod):
                w12, w3 = b.mlp.w12, b.mlp.w3

                def gelu_mlp(x, w12=w12, w3=w3):
                    x1, x2 = w12(x).chunk(2, dim=-1)
                    return w3(F.gelu(x1) * x2)
                b.mlp.forward = gelu_mlp
            sanity.append(sanity_entry("SwiGLU gate silu -> gelu", ref, pick(attn_fn(mod, x32.double()), blocks), tol))
    files = ["dinov2/models/vision_transformer.py", "dinov2/layers/block.py", "dinov2/layers/attention.py",
             "dinov2/layers/layer_scale.py", "dinov2/layers/patch_embed.py",
             "dinov2/layers/swiglu_ffn.py" if swiglu else "dinov2/layers/mlp.py"]
    hidden = (int(48 * 4 * 2 / 3) + 7) // 8 * 8
    meta = dict(
        case=case,
        family="facebookresearch/dinov2 DinoVisionTransformer" + (" (SwiGLU FFN)" if swiglu else " (block_chunks=2)"),
        layout="dinov2", files=[{"path": "model.pth", "key": None}], heads_arg=3,
        image_size=42, patch=14, dim=48, depth=4, heads=3, tokens=14, num_prefix=5, class_token=True,
        mean=IMAGENET_MEAN, std=IMAGENET_STD,
        source={"repo": "facebookresearch/dinov2", "commit": DINOV2_COMMIT, "files": files},
        shims=SHIMS_DINOV2, generator=GENERATOR,
        description=("DinoVisionTransformer(img_size=42, patch_size=14, embed_dim=48, depth=4, num_heads=3, "
                     "mlp_ratio=4, block_fn=partial(NestedTensorBlock, attn_class=MemEffAttention), init_values=1.0 "
                     "then random gammas, ffn_layer=%r, block_chunks=%d, num_register_tokens=4, "
                     "interpolate_antialias=True, interpolate_offset=0.0), random seeded weights, saved as "
                     "torch.save(model.state_dict()); attention of blocks "
                     "0,2,3 (hooks on attn.attn_drop)" % ("swiglufused" if swiglu else "mlp", 0 if swiglu else 2)),
        sanity=sanity, peaky_qk_factors=[float("%.4g" % f) for f in factors],
        mean_row_max=[float("%.4f" % p) for p in peaks],
        forward=dict(layer_norm_eps=1e-6,
                     mlp=("SwiGLUFFNFused: x1, x2 = w12(x).chunk(2) (x1 = first %d rows of w12); "
                          "w3(silu(x1) * x2); hidden = (int(mlp_ratio*dim * 2/3) + 7) // 8 * 8 = %d for dim 48"
                          % (hidden, hidden)) if swiglu else "fc1 -> GELU (exact erf) -> fc2",
                     layer="x += ls1.gamma * attn(norm1(x)); x += ls2.gamma * mlp(norm2(x)); final norm",
                     block_names=("blocks.<i>.*" if swiglu else
                                  "blocks.<chunk>.<i>.* with chunk = i // (depth // block_chunks): blocks.0.0, "
                                  "blocks.0.1, blocks.1.2, blocks.1.3 (BlockChunk pads with nn.Identity, "
                                  "which has no tensors)"),
                     token_order=("[CLS, reg x4, patches]: pos_embed (1+N rows) is added to [CLS, patches], then "
                                  "register_tokens are inserted after CLS without position embedding"),
                     attention="q = qkv[0:D] * head_dim^-0.5; softmax(q k^T); qkv rows = [q; k; v], heads "
                               "contiguous inside each",
                     position_interpolation=("when the grid differs from pos_embed's: bicubic in float32, "
                                             "interpolate_offset 0.1 (constructor default) -> scale_factor "
                                             "((w0+0.1)/M, (h0+0.1)/M), antialias=False; this fixture was built "
                                             "with the *_reg hub settings interpolate_offset=0 -> size=(w0,h0), "
                                             "interpolate_antialias=True. Neither setting is in the state_dict."),
                     mask_token="present (1, dim), unused without masks"),
    )
    write_case(folder, meta=meta, x32=x32, attn64=ref.float(), blocks=blocks, spread=spread)
    return folder


# ----------------------------------------------------------------------------------------------
# facebookresearch/dino
# ----------------------------------------------------------------------------------------------

def import_dino(tree):
    sys.path.insert(0, tree)
    tv = types.ModuleType("torchvision")
    tv.__path__ = []
    for sub in ("datasets", "transforms", "models"):
        m = types.ModuleType("torchvision." + sub)
        setattr(tv, sub, m)
        sys.modules[m.__name__] = m
    sys.modules["torchvision"] = tv
    import utils as dino_utils
    import vision_transformer as vits
    import main_dino
    return dino_utils, vits, main_dino


def case_dino(tree, out):
    dino_utils, vits, main_dino = import_dino(tree)
    seed = 1701
    real_list = torch.hub.list
    torch.hub.list = lambda *a, **k: []
    try:
        parser = argparse.ArgumentParser("DINO", parents=[main_dino.get_args_parser()])
    finally:
        torch.hub.list = real_list
    tmp = tempfile.mkdtemp(prefix="attnmap-dino-")
    args = parser.parse_args(["--arch", "vit_tiny", "--patch_size", "8", "--out_dim", "64", "--optimizer", "sgd",
                              "--use_fp16", "false", "--epochs", "1", "--warmup_teacher_temp_epochs", "0",
                              "--warmup_epochs", "0", "--batch_size_per_gpu", "2", "--local_crops_number", "2",
                              "--data_path", "/path/to/imagenet/train/"])
    # utils.init_distributed_mode(args), one-GPU branch (python main_dino.py on a single GPU)
    args.rank, args.gpu, args.world_size = 0, 0, 1
    args.arch = args.arch.replace("deit", "vit")

    def backbone(**kw):
        # vit_small / vit_tiny's constructor with a tiny width and depth
        return vits.VisionTransformer(img_size=[32], patch_size=args.patch_size, embed_dim=48, depth=3, num_heads=3,
                                      mlp_ratio=4, qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6), **kw)
    torch.manual_seed(seed)
    student = dino_utils.MultiCropWrapper(backbone(drop_path_rate=args.drop_path_rate), vits.DINOHead(
        48, args.out_dim, use_bn=args.use_bn_in_head, norm_last_layer=args.norm_last_layer,
        hidden_dim=32, bottleneck_dim=16))
    teacher = dino_utils.MultiCropWrapper(backbone(), vits.DINOHead(48, args.out_dim, args.use_bn_in_head,
                                                                     hidden_dim=32, bottleneck_dim=16))
    assert not dino_utils.has_batchnorms(student)
    randomise(student, seed, keep=("last_layer.weight_g",))
    randomise(teacher, seed + 50, keep=("last_layer.weight_g",))
    x32 = make_input(seed, 32, IMAGENET_MEAN, IMAGENET_STD)
    blocks_of = lambda m: list(m.backbone.blocks)  # noqa: E731
    attn_fn = hook_attn_drop(blocks_of)
    attn_bb = lambda m, x: hook_attn_drop(lambda mm: list(mm.blocks))(m, x)  # noqa: E731
    qk_bb = fused_qk(lambda m: list(m.blocks))
    tf, tpeaks = make_peaky(teacher.backbone.eval(), attn_bb, qk_bb, x32)
    sf, speaks = make_peaky(student.backbone.eval(), attn_bb, qk_bb, x32)

    # main_dino.py: DDP student, DINOLoss, SGD over get_params_groups, one real step
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    store = os.path.join(tmp, "store")
    torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
    try:
        student_ddp = nn.parallel.DistributedDataParallel(student)
        for p in teacher.parameters():
            p.requires_grad = False
        dino_loss = main_dino.DINOLoss(args.out_dim, args.local_crops_number + 2, args.warmup_teacher_temp,
                                       args.teacher_temp, args.warmup_teacher_temp_epochs, args.epochs)
        optimizer = torch.optim.SGD(dino_utils.get_params_groups(student_ddp), lr=0, momentum=0.9)
        for i, pg in enumerate(optimizer.param_groups):
            pg["lr"] = 1e-3
            if i == 0:
                pg["weight_decay"] = args.weight_decay
        g = torch.Generator().manual_seed(seed + 7)
        images = [torch.randn(args.batch_size_per_gpu, 3, 32, 32, generator=g) for _ in range(2)] + \
                 [torch.randn(args.batch_size_per_gpu, 3, 16, 16, generator=g) for _ in range(args.local_crops_number)]
        student_ddp.train()
        teacher.train()
        # 32 -> 16 crops change the token count: DINO interpolates pos_embed for the local crops
        teacher_output = teacher(images[:2])
        student_output = student_ddp(images)
        loss = dino_loss(student_output, teacher_output, 0)
        optimizer.zero_grad()
        loss.backward()
        dino_utils.cancel_gradients_last_layer(0, student_ddp, args.freeze_last_layer)
        optimizer.step()
        save_dict = {
            'student': student_ddp.state_dict(),
            'teacher': teacher.state_dict(),
            'optimizer': optimizer.state_dict(),
            'epoch': 0 + 1,
            'args': args,
            'dino_loss': dino_loss.state_dict(),
        }
        folder = fresh(os.path.join(out, "dino_train"))
        dino_utils.save_on_master(save_dict, os.path.join(folder, "checkpoint.pth"))
    finally:
        torch.distributed.destroy_process_group()
        shutil.rmtree(tmp, ignore_errors=True)
    student.eval()
    teacher.eval()
    # the teacher's backbone (MultiCropWrapper.forward runs exactly self.backbone(x) before the head)
    a64, a32, _, _, t64 = run_precisions(teacher.backbone, attn_bb, x32)
    blocks = [0, 1, 2]
    ref = pick(a64, blocks)
    spread = float((pick(a32, blocks) - ref).abs().max())
    tol = max(1e-5, 2 * spread)
    with torch.no_grad():
        full = attn_fn(teacher, x32)  # through MultiCropWrapper + head: same attention as the backbone alone
        assert all(torch.equal(u, v) for u, v in zip(full, attn_bb(teacher.backbone, x32)))
        s64 = backbone().double().eval()
        s64.load_state_dict({k[len("module.backbone."):]: v for k, v in save_dict["student"].items()
                             if k.startswith("module.backbone.")})
        sanity = [sanity_entry("teacher backbone -> student backbone ('module.backbone.*')", ref,
                               pick(attn_bb(s64, x32.double()), blocks), tol)]
        # the teacher's backbone alone, as visualize_attention.py loads it (prefix 'backbone.' stripped)
        vis = backbone().double().eval()
        sdt = {k.replace("backbone.", ""): v for k, v in save_dict["teacher"].items() if k.startswith("backbone.")}
        missing = vis.load_state_dict(sdt, strict=False)
        assert not missing.missing_keys, missing
        last = vis.get_last_selfattention(x32.double().unsqueeze(0))[0]
        assert float((last - a64[-1]).abs().max()) < 1e-12
    files = ["vision_transformer.py", "utils.py", "main_dino.py"]
    meta = dict(
        case="dino_train", family="facebookresearch/dino training checkpoint (main_dino.py save_dict)",
        layout="timm", files=[{"path": "checkpoint.pth", "key": "teacher"}, {"path": "checkpoint.pth", "key": None}],
        heads_arg=3, image_size=32, patch=8, dim=48, depth=3, heads=3, tokens=17, num_prefix=1, class_token=True,
        mean=IMAGENET_MEAN, std=IMAGENET_STD,
        source={"repo": "facebookresearch/dino", "commit": DINO_COMMIT, "files": files},
        shims=SHIMS_DINO, generator=GENERATOR,
        description=("DINO checkpoint.pth as main_dino.py saves it: 'student' (DDP-wrapped MultiCropWrapper: "
                     "module.backbone.* / module.head.*), 'teacher' (backbone.* / head.*), 'optimizer' (SGD, "
                     "momentum buffers after one real step), 'epoch', 'args' (argparse.Namespace from "
                     "main_dino.get_args_parser, arch 'vit_tiny', patch_size 8), 'dino_loss' (center). Backbone: "
                     "vision_transformer.VisionTransformer(img_size=[32], patch_size=8, embed_dim=48, depth=3, "
                     "num_heads=3, mlp_ratio=4, qkv_bias=True, LayerNorm eps 1e-6); student and teacher have "
                     "independent random weights. attn.npy = the TEACHER backbone's blocks 0,1,2 (hooks on "
                     "attn.attn_drop); the last one equals visualize_attention.py's get_last_selfattention"),
        sanity=sanity, peaky_qk_factors={"teacher": [float("%.4g" % f) for f in tf],
                                         "student": [float("%.4g" % f) for f in sf]},
        mean_row_max={"teacher": [float("%.4f" % p) for p in tpeaks], "student": [float("%.4f" % p) for p in speaks]},
        forward=dict(layer_norm_eps=1e-6, mlp="fc1 -> GELU (exact erf) -> fc2", no_layerscale=True,
                     attention="softmax((q k^T) * head_dim^-0.5)",
                     position_interpolation=("when the grid differs: bicubic with scale_factor ((w0+0.1)/sqrt(N), "
                                             "(h0+0.1)/sqrt(N)), align_corners default (False), no antialias"),
                     default_key=("visualize_attention.py: checkpoint_key default 'teacher'; if that key is "
                                  "present it takes state_dict[key], strips 'module.' then 'backbone.', and "
                                  "loads with strict=False (head.* ignored)")),
    )
    write_case(folder, meta=meta, x32=x32, attn64=ref.float(), blocks=blocks, spread=spread)
    return folder


# ----------------------------------------------------------------------------------------------

CASES = ["hf_clip_vision", "hf_clip_full", "hf_dinov2", "hf_dinov2_reg", "hf_deit_teacher",
         "dinov2_chunked", "dinov2_swiglu", "dino_train"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transformers", required=True, help="work tree of huggingface/transformers @ v4.48.3")
    ap.add_argument("--dinov2", required=True, help="work tree of facebookresearch/dinov2 @ " + DINOV2_COMMIT[:10])
    ap.add_argument("--dino", required=True, help="work tree of facebookresearch/dino @ " + DINO_COMMIT[:10])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "families"))
    ap.add_argument("--only", default="", help="comma-separated case names")
    a = ap.parse_args()
    only = [c for c in a.only.split(",") if c] or CASES
    for c in only:
        if c not in CASES:
            raise SystemExit("unknown case %s" % c)
    torch.set_num_threads(1)
    check_blobs(a.dinov2, DINOV2_BLOBS, DINOV2_COMMIT, "facebookresearch/dinov2")
    check_blobs(a.dino, DINO_BLOBS, DINO_COMMIT, "facebookresearch/dino")
    T = import_transformers(a.transformers) if any(c.startswith("hf_") for c in only) else None
    done = []
    for c in only:
        if c == "hf_clip_vision":
            f = case_hf_clip(T, a.out, full=False)
        elif c == "hf_clip_full":
            f = case_hf_clip(T, a.out, full=True)
        elif c == "hf_dinov2":
            f = case_hf_dinov2(T, a.out, registers=False)
        elif c == "hf_dinov2_reg":
            f = case_hf_dinov2(T, a.out, registers=True)
        elif c == "hf_deit_teacher":
            f = case_hf_deit(T, a.out)
        elif c == "dinov2_chunked":
            f = case_dinov2(a.dinov2, a.out, swiglu=False)
        elif c == "dinov2_swiglu":
            f = case_dinov2(a.dinov2, a.out, swiglu=True)
        else:
            f = case_dino(a.dino, a.out)
        if f is None:
            print("%-16s skipped (not in this transformers version)" % c)
            continue
        m = json.load(open(os.path.join(f, "meta.json")))
        print("%-16s %7d bytes  tol %.3g  spread %.3g  sanity %s" % (
            c, folder_size(f), m["tolerance"], m["spread_f32_f64"],
            ", ".join("%.3gx" % s.get("times_tolerance", s.get("times_logits_tolerance", 0)) for s in m["sanity"])))
        done.append(c)
    return done


if __name__ == "__main__":
    main()
