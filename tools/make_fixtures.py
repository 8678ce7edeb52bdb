#!/usr/bin/python3
"""Generate PyTorch reference fixtures for attnmap's C++ parity tests.

    /usr/bin/python3 tools/make_fixtures.py [--out tests/fixtures]

Deterministic (fixed seeds).  Needs Debian's python3-torch (1.13) and numpy;
CI does not run this -- the outputs under tests/fixtures/ are committed and
this script is their source of truth.  See tests/fixtures/README.md.

All reference numbers are computed in float64 from the float32 values that
are actually stored in weights.json / input.npy, then cast to float32.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def random_input(gen, image_size):
    x = torch.randn((3, image_size, image_size), generator=gen, dtype=torch.float64)
    return x.numpy().astype(np.float32)


def row_stats(attn):
    a = np.asarray(attn, dtype=np.float64)
    sums = a.sum(-1)
    return dict(max_row_sum_err=float(np.abs(sums - 1).max()),
                mean_row_max=float(a.max(-1).mean()),
                uniform=1.0 / a.shape[-1])


# --------------------------------------------------------------------------

def torchvision_crosscheck(sd, x, heads, eps, image_size, patch, attn_ref, tok_ref):
    """Run the same weights through torchvision's VisionTransformer encoder
    (nn.MultiheadAttention inside) and compare.  Returns max abs diffs."""
    from functools import partial
    from torchvision.models.vision_transformer import VisionTransformer

    D = sd["patch_embed.proj.weight"].shape[0]
    M = sd["blocks.0.mlp.fc1.weight"].shape[0]
    L = fl.timm_depth(sd)
    vt = VisionTransformer(image_size=image_size, patch_size=patch, num_layers=L,
                           num_heads=heads, hidden_dim=D, mlp_dim=M, num_classes=10,
                           norm_layer=partial(torch.nn.LayerNorm, eps=eps)).double().eval()
    m = {"conv_proj.weight": "patch_embed.proj.weight", "conv_proj.bias": "patch_embed.proj.bias",
         "class_token": "cls_token", "encoder.pos_embedding": "pos_embed",
         "encoder.ln.weight": "norm.weight", "encoder.ln.bias": "norm.bias"}
    for i in range(L):
        a, b = "encoder.layers.encoder_layer_%d." % i, "blocks.%d." % i
        m.update({a + "ln_1.weight": b + "norm1.weight", a + "ln_1.bias": b + "norm1.bias",
                  a + "self_attention.in_proj_weight": b + "attn.qkv.weight",
                  a + "self_attention.in_proj_bias": b + "attn.qkv.bias",
                  a + "self_attention.out_proj.weight": b + "attn.proj.weight",
                  a + "self_attention.out_proj.bias": b + "attn.proj.bias",
                  a + "ln_2.weight": b + "norm2.weight", a + "ln_2.bias": b + "norm2.bias",
                  a + "mlp.0.weight": b + "mlp.fc1.weight", a + "mlp.0.bias": b + "mlp.fc1.bias",
                  a + "mlp.3.weight": b + "mlp.fc2.weight", a + "mlp.3.bias": b + "mlp.fc2.bias"})
    vsd = vt.state_dict()
    new = {}
    for k in vsd:
        if k.startswith("heads."):
            new[k] = vsd[k]
            continue
        new[k] = torch.as_tensor(sd[m[k]], dtype=torch.float64).reshape(vsd[k].shape)
    vt.load_state_dict(new)
    with torch.no_grad():
        img = torch.as_tensor(x, dtype=torch.float64).unsqueeze(0)
        h = vt._process_input(img)
        h = torch.cat([vt.class_token.expand(1, -1, -1), h], 1) + vt.encoder.pos_embedding
        attn_diff = 0.0
        for i, layer in enumerate(vt.encoder.layers):
            y = layer.ln_1(h)
            _, w = layer.self_attention(y, y, y, need_weights=True, average_attn_weights=False)
            attn_diff = max(attn_diff, float((w[0] - attn_ref[i]).abs().max()))
            h = layer(h)
        h = vt.encoder.ln(h)[0]
        tok_diff = float((h - tok_ref).abs().max())
    return attn_diff, tok_diff


def make_timm(folder, name, seed, *, image_size, patch, dim, depth, heads, mlp, eps,
              std, head_classes, description, crosscheck=False):
    gen = torch.Generator().manual_seed(seed)
    sd = fl.random_timm_state(gen, image_size=image_size, patch=patch, dim=dim, depth=depth,
                              mlp=mlp, std=std, head_classes=head_classes)
    config = {"num_heads": heads, "layer_norm_eps": eps, "mean": list(fl.IMAGENET_MEAN),
              "std": list(fl.IMAGENET_STD), "patch_size": patch, "image_size": image_size}
    stored = fl.write_attnmap_json(os.path.join(folder, "weights.json"), sd, config)
    x = fl.save_npy(os.path.join(folder, "input.npy"), random_input(gen, image_size))
    attn, tok = fl.timm_forward(stored, x, heads, eps)
    fl.save_npy(os.path.join(folder, "attn.npy"), attn.numpy())
    fl.save_npy(os.path.join(folder, "tokens.npy"), tok.numpy())
    T = attn.shape[-1]
    info = {"layout": "timm", "L": depth, "H": heads, "T": T, "D": dim, "mlp": mlp,
            "patch": patch, "image_size": image_size, "grid": image_size // patch,
            "eps": eps, "seed": seed, "has_head": bool(head_classes),
            "compute_dtype": "float64", "storage_dtype": "float32",
            "files": {"weights.json": "attnmap JSON v1, timm names, with config",
                      "input.npy": "(3,S,S) normalised image fed to patch_embed",
                      "attn.npy": "(L,H,T,T) softmax attention probabilities, rows = queries",
                      "tokens.npy": "(T,D) tokens after the final LayerNorm 'norm'"},
            "stats": row_stats(attn.numpy()),
            "description": description}
    if crosscheck:
        ad, td = torchvision_crosscheck(stored, x, heads, eps, image_size, patch, attn, tok)
        info["torchvision_crosscheck"] = {"max_abs_diff_attn": ad, "max_abs_diff_tokens": td,
                                          "module": "torchvision.models.VisionTransformer "
                                                    "(nn.MultiheadAttention), float64"}
        assert ad < 1e-10 and td < 1e-10, (ad, td)
    fl.write_meta(folder, **info)
    print("%-15s T=%d attn-row-max(mean)=%.3f (uniform %.4f)%s" % (
        name, T, info["stats"]["mean_row_max"], info["stats"]["uniform"],
        "  torchvision diff attn %.1e tokens %.1e" % (ad, td) if crosscheck else ""))


def make_seed(folder, name, seed, *, image_size, patch, dk, embed_dim, description, wstd):
    gen = torch.Generator().manual_seed(seed)
    n = (image_size // patch) ** 2
    pdim = 3 * patch * patch
    D = embed_dim if embed_dim else pdim
    sd = {}

    def rn(shape, s):
        return torch.randn(shape, generator=gen, dtype=torch.float64) * s

    if embed_dim:
        sd["W_E"] = rn((pdim, D), 1.0 / math.sqrt(pdim))
        sd["b_E"] = rn((D,), 0.3)
    sd["W_Q"] = rn((D, dk), wstd)
    sd["W_K"] = rn((D, dk), wstd)
    sd["W_V"] = rn((D, dk), wstd)
    if embed_dim:
        sd["cls_token"] = rn((D,), 0.5)
        sd["pos_embed"] = rn((1 + n, D), 0.3)
    config = {"num_heads": 1, "mean": list(fl.IMAGENET_MEAN), "std": list(fl.IMAGENET_STD),
              "patch_size": patch, "image_size": image_size}
    stored = fl.write_attnmap_json(os.path.join(folder, "weights.json"), sd, config)
    x = fl.save_npy(os.path.join(folder, "input.npy"), random_input(gen, image_size))
    attn, out = fl.seed_forward(stored, x, patch)
    fl.save_npy(os.path.join(folder, "attn.npy"), attn.numpy())
    fl.save_npy(os.path.join(folder, "tokens.npy"), out.numpy())
    T = attn.shape[-1]
    info = {"layout": "seed", "L": 1, "H": 1, "T": T, "D": D, "d_k": dk,
            "patch": patch, "image_size": image_size, "grid": image_size // patch,
            "eps": None, "seed": seed,
            "has_W_E": bool(embed_dim), "has_cls_token": bool(embed_dim),
            "has_pos_embed": bool(embed_dim),
            "compute_dtype": "float64", "storage_dtype": "float32",
            "files": {"weights.json": "attnmap JSON v1, seed names, with config",
                      "input.npy": "(3,S,S) normalised image",
                      "attn.npy": "(1,1,T,T) softmax(Q K^T / sqrt(d_k)), rows = queries",
                      "tokens.npy": "(T,d_k) attention output = attn @ V"},
            "stats": row_stats(attn.numpy()),
            "description": description}
    fl.write_meta(folder, **info)
    print("%-15s T=%d attn-row-max(mean)=%.3f (uniform %.4f)" % (
        name, T, info["stats"]["mean_row_max"], info["stats"]["uniform"]))


def make_worked(folder):
    os.makedirs(folder, exist_ok=True)
    q = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    K = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    V = K.clone()
    dk = 2
    scores = q @ K.T / math.sqrt(dk)
    w = torch.softmax(scores, -1)
    out = w @ V
    res = {
        "description": "Worked example from the guide, computed by torch in float64. "
                       "scores = q K^T / sqrt(d_k); weights = softmax(scores); output = weights V.",
        "query": q[0].tolist(), "keys": K.tolist(), "values": V.tolist(), "d_k": dk,
        "scores": scores[0].tolist(),
        "weights": w[0].tolist(),
        "output": out[0].tolist(),
        "softmax_2_1_0": torch.softmax(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64), 0).tolist(),
        "softmax_20_10_0": torch.softmax(torch.tensor([20.0, 10.0, 0.0], dtype=torch.float64), 0).tolist(),
        "rounded": {"weights": [0.40, 0.20, 0.40], "output": [0.80, 0.60]},
    }
    with open(os.path.join(folder, "worked.json"), "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    fl.write_meta(folder, layout="worked", description="Not a model: see worked.json")
    print("worked_example  weights=%s output=%s" % (
        [round(v, 4) for v in res["weights"]], [round(v, 4) for v in res["output"]]))


def make_e2e(folder, weights_folder, seed):
    """End-to-end CLI fixture: a 224x224 RGB PNG (no resize needed) rendered with timm_224's weights.
    map.npy is the class token's attention over the 196 patches in the last block, mean over heads,
    computed by PyTorch from (png / 255 - mean) / std - exactly what `attnmap render --save-raw` writes."""
    from PIL import Image
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    # Smooth colour blobs plus noise, so the picture has structure.
    yy, xx = np.mgrid[0:224, 0:224] / 224.0
    base = np.stack([np.sin(6 * xx + c) * np.cos(4 * yy - c) for c in (0.0, 1.0, 2.0)], -1)
    img = np.clip(127.5 + 90 * base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)
    Image.fromarray(img, "RGB").save(os.path.join(folder, "image.png"))
    with open(os.path.join(weights_folder, "weights.json")) as f:
        stored = {k: np.asarray(v, dtype=np.float32) for k, v in json.load(f).items() if k != "config"}
    with open(os.path.join(weights_folder, "meta.json")) as f:
        meta = json.load(f)
    mean = np.asarray(fl.IMAGENET_MEAN, dtype=np.float64).reshape(3, 1, 1)
    std = np.asarray(fl.IMAGENET_STD, dtype=np.float64).reshape(3, 1, 1)
    x = ((img.transpose(2, 0, 1).astype(np.float64) / 255.0) - mean) / std
    attn, _ = fl.timm_forward(stored, x, meta["H"], meta["eps"])
    g = meta["grid"]
    cls_map = attn[-1, :, 0, 1:].mean(0).reshape(g, g)
    fl.save_npy(os.path.join(folder, "map.npy"), cls_map.numpy().astype(np.float32))
    fl.write_meta(folder, layout="e2e", weights="../timm_224/weights.json", layer=-1, head="mean",
               description="224x224 PNG rendered with timm_224 weights; map.npy = (14,14) class-token "
                           "attention over patches, last block, mean over heads, float64 -> float32.")
    print("e2e_224         map max %.4f min %.4f" % (float(cls_map.max()), float(cls_map.min())))


# --------------------------------------------------------------------------
# Checkpoint layouts (issue 3): every layout in JSON and safetensors F32/F16/BF16
# --------------------------------------------------------------------------

LAYOUT_STD = {"patch": 0.05, "pos": 0.5, "cls": 0.5, "qkv": 0.35, "proj": 0.2, "fc1": 0.2, "fc2": 0.2,
              "bias": 0.1, "ln_w_jitter": 0.3, "ln_b": 0.2, "head": 0.2}
DTYPES = ("F32", "F16", "BF16")


def write_layout(folder, name, file_sd, x, reference, *, json_config, side_files, meta):
    """Writes weights.json (+ "config" when json_config), weights.safetensors (F32),
    weights.f16.safetensors, weights.bf16.safetensors, the side config files, input.npy and, per dtype,
    the reference computed by `reference(stored_values)` from exactly the values in that file:
    attn.npy / tokens.npy (F32), attn_f16.npy, attn_bf16.npy."""
    os.makedirs(folder, exist_ok=True)
    for fn in os.listdir(folder):
        os.remove(os.path.join(folder, fn))
    stored_json = fl.write_attnmap_json(os.path.join(folder, "weights.json"), file_sd, json_config)
    for fn, content in side_files.items():
        with open(os.path.join(folder, fn), "w") as f:
            json.dump(content, f, indent=1)
            f.write("\n")
    fl.save_npy(os.path.join(folder, "input.npy"), x)
    attn32, tok32 = reference(stored_json)
    fl.save_npy(os.path.join(folder, "attn.npy"), attn32.numpy())
    fl.save_npy(os.path.join(folder, "tokens.npy"), tok32.numpy())
    drift = {}
    for dt in DTYPES:
        fn = "weights.safetensors" if dt == "F32" else "weights.%s.safetensors" % dt.lower()
        stored = fl.write_safetensors(os.path.join(folder, fn), file_sd, dt,
                                      metadata={"format": "pt", "attnmap": "fixture"})
        if dt == "F32":
            for k in stored:
                assert np.array_equal(stored[k], stored_json[k]), k
            continue
        a, _ = reference(stored)
        fl.save_npy(os.path.join(folder, "attn_%s.npy" % dt.lower()), a.numpy())
        drift[dt] = float((a - attn32).abs().max())
    meta = dict(meta)
    meta.update({"name": name, "L": int(attn32.shape[0]), "H": int(attn32.shape[1]), "T": int(attn32.shape[2]),
                 "compute_dtype": "float64", "storage_dtype": "float32",
                 "dtype_drift": drift,
                 "files": {"weights.json": "attnmap JSON v1" + (" with config" if json_config else " (no config)"),
                           "weights.safetensors": "same tensors, F32",
                           "weights.f16.safetensors": "same tensors rounded to F16",
                           "weights.bf16.safetensors": "same tensors rounded to BF16",
                           "attn.npy": "(L,H,T,T) probabilities from the F32 values",
                           "attn_f16.npy": "(L,H,T,T) from the F16-rounded values",
                           "attn_bf16.npy": "(L,H,T,T) from the BF16-rounded values",
                           "tokens.npy": "(T,D) after the final LayerNorm (F32 values)",
                           "input.npy": "(3,H,W) normalised image"},
                 "side_files": sorted(side_files)})
    fl.write_meta(folder, **meta)
    print("%-22s T=%-3d L=%d H=%d drift F16 %.2e BF16 %.2e" % (name, meta["T"], meta["L"], meta["H"],
                                                              drift["F16"], drift["BF16"]))


def timm_hub_config(arch, hw, mean=fl.IMAGENET_MEAN, std=fl.IMAGENET_STD, **model_args):
    cfg = {"architecture": arch, "num_classes": 5, "num_features": 24,
           "pretrained_cfg": {"tag": "fixture", "input_size": [3, hw[0], hw[1]], "interpolation": "bicubic",
                              "crop_pct": 0.9, "mean": list(mean), "std": list(std), "num_classes": 5}}
    if model_args:
        cfg["model_args"] = model_args
    return cfg


def make_layouts(out):
    """Small random models in every layout attnmap reads, with PyTorch references (see fixtures README)."""
    D, L, M, heads, P, S = 24, 2, 48, 3, 8, 32
    gen = torch.Generator().manual_seed(6006)
    x = random_input(gen, S)

    # One set of weights written three ways: timm, Hugging Face, torchvision -> the same maps.
    sd = fl.random_vit_state(gen, image_hw=(S, S), patch=P, dim=D, depth=L, mlp=M, std=LAYOUT_STD, head_classes=5)
    write_layout(os.path.join(out, "timm"), "timm", sd, x,
                 lambda st: fl.vit_reference(st, x, heads, 1e-6),
                 json_config={"num_heads": heads},
                 side_files={"config.json": timm_hub_config("vit_tiny_patch8_32.fixture", (S, S), num_heads=3)},
                 meta={"layout": "timm", "reference": "fixture_lib.vit_reference (explicit float64)",
                       "num_prefix": 1, "pos_prefix": 1, "eps": 1e-6, "same_weights_as": ["hf", "torchvision"],
                       "description": "timm names, head (5 classes); heads from the timm hub config.json "
                                      "architecture (vit_tiny: 3) for the safetensors files, from the JSON config "
                                      "for weights.json."})
    hf_sd = fl.to_hf(sd, prefix="vit.", classifier=True)
    write_layout(os.path.join(out, "hf"), "hf", hf_sd, x,
                 lambda st: fl.hf_reference(st, x, heads, 1e-6, prefix="vit."),
                 json_config=None,
                 side_files={"config.json": {"architectures": ["ViTForImageClassification"], "model_type": "vit",
                                             "hidden_size": D, "num_hidden_layers": L, "num_attention_heads": heads,
                                             "intermediate_size": M, "hidden_act": "gelu", "layer_norm_eps": 1e-6,
                                             "image_size": S, "patch_size": P, "num_channels": 3, "qkv_bias": True,
                                             "id2label": {str(i): "class_%d" % i for i in range(5)}},
                             "preprocessor_config.json": {"image_processor_type": "ViTImageProcessor",
                                                          "image_mean": list(fl.IMAGENET_MEAN),
                                                          "image_std": list(fl.IMAGENET_STD),
                                                          "size": {"height": S, "width": S}}},
                 meta={"layout": "hf-vit", "reference": "fixture_lib.hf_reference (explicit float64, HF names)",
                       "num_prefix": 1, "pos_prefix": 1, "eps": 1e-6,
                       "description": "ViTForImageClassification names (vit. prefix, classifier), the same "
                                      "weights as timm/; config.json gives heads and eps 1e-6."})
    tv_sd = fl.to_torchvision(sd)
    write_layout(os.path.join(out, "torchvision"), "torchvision", tv_sd, x,
                 lambda st: fl.torchvision_reference(st, x, heads, S),
                 json_config={"num_heads": heads},
                 side_files={"config.json": {"num_attention_heads": heads}},
                 meta={"layout": "torchvision", "num_prefix": 1, "pos_prefix": 1, "eps": 1e-6,
                       "reference": "torchvision.models.VisionTransformer itself (nn.MultiheadAttention "
                                    "need_weights=True), float64",
                       "description": "torchvision names (class_token, conv_proj, encoder.layers.encoder_layer_i, "
                                      "in_proj fused, mlp.0/mlp.3, heads.head), the same weights as timm/."})

    # Hugging Face ViTModel without the vit. prefix, wrapped in DataParallel's module., default eps 1e-12.
    gen = torch.Generator().manual_seed(6106)
    sd = fl.random_vit_state(gen, image_hw=(S, S), patch=P, dim=D, depth=L, mlp=M, std=LAYOUT_STD)
    hf_model = fl.to_hf(sd, prefix="", classifier=False, pooler=True, gen=gen)
    write_layout(os.path.join(out, "hf_model"), "hf_model", {"module." + k: v for k, v in hf_model.items()},
                 x,
                 lambda st: fl.hf_reference({k[len("module."):]: v for k, v in st.items()}, x, heads, 1e-12, prefix=""),
                 json_config=None,
                 side_files={"config.json": {"model_type": "vit", "num_attention_heads": heads, "hidden_size": D}},
                 meta={"layout": "hf-vit", "num_prefix": 1, "pos_prefix": 1, "eps": 1e-12,
                       "reference": "fixture_lib.hf_reference (explicit float64, HF names)",
                       "description": "ViTModel names without prefix, under DataParallel's module., with an unused "
                                      "pooler; config.json has no layer_norm_eps so the HF default 1e-12 applies."})

    # DeiT distilled: dist_token, pos_embed 2+N rows, head_dist unused.
    gen = torch.Generator().manual_seed(6206)
    sd = fl.random_vit_state(gen, image_hw=(S, S), patch=P, dim=D, depth=L, mlp=M, std=LAYOUT_STD,
                             head_classes=5, n_dist=1, pos_rows="all")
    write_layout(os.path.join(out, "deit_distilled"), "deit_distilled", sd, x,
                 lambda st: fl.vit_reference(st, x, heads, 1e-6, pos_rows="all"),
                 json_config={"num_heads": heads},
                 side_files={"config.json": timm_hub_config("deit_tiny_distilled_patch8_32.fixture", (S, S), num_heads=3)},
                 meta={"layout": "timm", "num_prefix": 2, "pos_prefix": 2, "eps": 1e-6,
                       "reference": "fixture_lib.vit_reference (explicit float64)",
                       "description": "DeiT distilled: class + distillation token, pos_embed (1, 2+N, D)."})

    # BEiT-style q_bias / v_bias without a key bias, under DINO's backbone. prefix.
    gen = torch.Generator().manual_seed(6306)
    sd = fl.random_vit_state(gen, image_hw=(S, S), patch=P, dim=D, depth=L, mlp=M, std=LAYOUT_STD, qv_bias=True)
    write_layout(os.path.join(out, "qv_bias"), "qv_bias", {"backbone." + k: v for k, v in sd.items()}, x,
                 lambda st: fl.vit_reference({k[len("backbone."):]: v for k, v in st.items()}, x, heads, 1e-6),
                 json_config={"num_heads": heads},
                 # a BEiT without relative position tables (timm Beit use_rel_pos_bias=False, use_abs_pos_emb=True):
                 # q_bias / v_bias with another architecture name are timm Eva's and refused (issue 29)
                 side_files={"config.json": timm_hub_config("beit_tiny_patch8_32.fixture", (S, S), num_heads=3)},
                 meta={"layout": "timm", "num_prefix": 1, "pos_prefix": 1, "eps": 1e-6,
                       "reference": "fixture_lib.vit_reference (explicit float64)",
                       "description": "attn.q_bias / attn.v_bias, no key bias (zero), backbone. prefix."})

    # facebookresearch DINOv2 with 4 registers: pos_embed 1+N, registers after cls, LayerScale, patch 14.
    P14, S14 = 14, 42
    x14 = random_input(torch.Generator().manual_seed(6406), S14)
    gen = torch.Generator().manual_seed(6506)
    sd = fl.random_vit_state(gen, image_hw=(S14, S14), patch=P14, dim=D, depth=L, mlp=M, std=LAYOUT_STD,
                             n_reg=4, reg_name="register_tokens", pos_rows="cls", layer_scale=True,
                             extra=("mask_token",))
    write_layout(os.path.join(out, "dinov2_fb"), "dinov2_fb", sd, x14,
                 lambda st: fl.vit_reference(st, x14, heads, 1e-6, pos_rows="cls", reg_name="register_tokens"),
                 json_config={"num_heads": heads},
                 side_files={"config.json": {"num_attention_heads": heads}},
                 meta={"layout": "dinov2", "num_prefix": 5, "pos_prefix": 1, "eps": 1e-6,
                       "reference": "fixture_lib.vit_reference, DINOv2 prepare_tokens_with_masks order",
                       "description": "facebookresearch DINOv2 reg4: register_tokens (1,4,D), pos_embed (1,1+N,D), "
                                      "registers inserted after the class token once positions are added; "
                                      "ls1/ls2.gamma LayerScale; mask_token unused; patch 14, 42x42 (3x3 grid)."})

    # timm DINOv2 reg4: reg_token, no_embed_class (pos_embed N rows), LayerScale, patch 14.
    gen = torch.Generator().manual_seed(6606)
    sd = fl.random_vit_state(gen, image_hw=(S14, S14), patch=P14, dim=D, depth=L, mlp=M, std=LAYOUT_STD,
                             n_reg=4, reg_name="reg_token", pos_rows="none", layer_scale=True)
    write_layout(os.path.join(out, "timm_reg_noembed"), "timm_reg_noembed", sd, x14,
                 lambda st: fl.vit_reference(st, x14, 6, 1e-6, pos_rows="none"),
                 json_config=None,
                 side_files={"config.json": timm_hub_config("vit_small_patch14_reg4_dinov2.fixture", (S14, S14),
                                                            mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), num_heads=6)},
                 meta={"layout": "timm", "num_prefix": 5, "pos_prefix": 0, "eps": 1e-6,
                       "reference": "fixture_lib.vit_reference, timm _pos_embed no_embed_class",
                       "description": "timm vit_small_patch14_reg4_dinov2 style: reg_token (1,4,D), pos_embed (1,N,D) "
                                      "(no_embed_class), LayerScale; 6 heads from the architecture name (D=24, dh=4)."})

    # timm reg_token with positions for every prefix token (1+R+N rows), non-square 32x48 input.
    HW = (32, 48)
    xr = torch.randn((3, HW[0], HW[1]), generator=torch.Generator().manual_seed(6706), dtype=torch.float64).numpy().astype(np.float32)
    gen = torch.Generator().manual_seed(6806)
    sd = fl.random_vit_state(gen, image_hw=HW, patch=P, dim=D, depth=L, mlp=M, std=LAYOUT_STD,
                             n_reg=2, reg_name="reg_token", pos_rows="all")
    write_layout(os.path.join(out, "timm_reg_full"), "timm_reg_full", sd, xr,
                 lambda st: fl.vit_reference(st, xr, heads, 1e-6, pos_rows="all"),
                 json_config={"num_heads": heads, "image_size": list(HW)},
                 side_files={"config.json": timm_hub_config("vit_tiny_reg2_patch8.fixture", HW, num_heads=3)},
                 meta={"layout": "timm", "num_prefix": 3, "pos_prefix": 3, "eps": 1e-6,
                       "image_hw": list(HW), "grid_hw": [HW[0] // P, HW[1] // P],
                       "reference": "fixture_lib.vit_reference, timm _pos_embed (class and registers embedded)",
                       "description": "timm reg_token (1,2,D) with pos_embed (1,1+2+N,D); non-square 32x48 input "
                                      "(4x6 grid) from the config image_size / pretrained_cfg input_size."})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures"))
    args = ap.parse_args()
    out = args.out
    torch.set_num_threads(1)

    make_timm(os.path.join(out, "timm_small"), "timm_small", 1001,
              image_size=64, patch=16, dim=32, depth=2, heads=4, mlp=64, eps=1e-6,
              std={"patch": 0.05, "pos": 0.5, "cls": 0.5, "qkv": 0.35, "proj": 0.2,
                   "fc1": 0.2, "fc2": 0.2, "bias": 0.1, "ln_w_jitter": 0.3, "ln_b": 0.2,
                   "head": 0.2},
              head_classes=10, crosscheck=True,
              description="Random timm-layout ViT: 64x64 image, patch 16 (4x4 grid, T=17), "
                          "D=32, 2 blocks, 4 heads (dh=8), mlp 64, eps 1e-6. Random non-trivial "
                          "LayerNorm weights/biases, non-zero biases everywhere, qkv std 0.35 so "
                          "attention is far from uniform. Includes an unused head.{weight,bias} "
                          "(10 classes) that loaders must tolerate.")
    make_timm(os.path.join(out, "timm_224"), "timm_224", 2002,
              image_size=224, patch=16, dim=48, depth=1, heads=3, mlp=96, eps=1e-6,
              std={"patch": 0.04, "pos": 0.3, "cls": 0.5, "qkv": 0.3, "proj": 0.2,
                   "fc1": 0.2, "fc2": 0.2, "bias": 0.1, "ln_w_jitter": 0.3, "ln_b": 0.2},
              head_classes=0, crosscheck=True,
              description="Random timm-layout ViT at realistic token count: 224x224 image, "
                          "patch 16 (14x14 grid, T=197), D=48, 1 block, 3 heads (dh=16), mlp 96, "
                          "eps 1e-6. No head.")
    make_seed(os.path.join(out, "seed_embed"), "seed_embed", 3003,
              image_size=64, patch=16, dk=16, embed_dim=24, wstd=0.35,
              description="Seed layout with patch embedding: W_E (768,24), b_E (24), "
                          "W_Q/W_K/W_V (24,16), cls_token (24), pos_embed (17,24); 64x64 image, "
                          "patch 16 (4x4 grid, T=17). One head, no LayerNorm, no MLP.")
    make_seed(os.path.join(out, "seed_raw"), "seed_raw", 4004,
              image_size=16, patch=4, dk=8, embed_dim=0, wstd=0.2,
              description="Seed layout without W_E/b_E/cls_token/pos_embed: token = raw patch "
                          "vector (D = 3*4*4 = 48, flattened channel,row,col), class token = mean "
                          "of the 16 patch tokens, pos = 0. W_Q/W_K/W_V (48,8); 16x16 image, "
                          "patch 4 (4x4 grid, T=17).")
    make_worked(os.path.join(out, "worked_example"))
    make_e2e(os.path.join(out, "e2e_224"), os.path.join(out, "timm_224"), 5005)
    make_layouts(os.path.join(out, "layouts"))


if __name__ == "__main__":
    main()
