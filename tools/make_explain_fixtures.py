#!/usr/bin/python3
"""PyTorch autograd references for attnmap's explanation maps (issue 19).

    /usr/bin/python3 tools/make_explain_fixtures.py [--out tests/fixtures/explain]

For the layout fixtures with a classifier head (tests/fixtures/layouts/{timm,deit_distilled}; hf and
torchvision hold the same weights as timm) and for copies of two headless layouts given a small random
head (dinov2_fb: registers without position rows + LayerScale; timm_reg_full: registers with position rows,
non-square grid), runs a float64 forward with autograd, the attention probabilities of every block kept with
retain_grad (as Chefer et al.'s ViT code hooks the softmax output) and every block's norm1 output kept (the
Grad-CAM target pytorch-grad-cam documents for ViTs, blocks[-1].norm1), and writes for two target classes
(the most and the least probable), as float32 .npy:

  logits.npy     (C)                the classifier output (DeiT distilled: mean of head and head_dist)
  grad_attn.npy  (K, L, H, T, T)    dlogit_c / dA for every block and head
  chefer.npy     (K, gh, gw)        Chefer, Gur & Wolf ICCV 2021 rules 5-6: R = I; R += mean_h (dA*A)^+ @ R;
                                    R[0, prefix:] (the reference notebook's avg_heads / apply_self_attention_rules)
  gradcam.npy    (K, L, gh, gw)     Grad-CAM with block l's norm1 output as activation, for every l
  attn_grad.npy  (K, L, gh, gw)     mean_h (dA*A)^+ class-token row, for every block l

and the same from the F16- and BF16-rounded weights with suffixes _f16 / _bf16 (the values stored in the
layout's weights.f16/.bf16.safetensors). The target is one-hot on the class logit (Chefer's one_hot,
pytorch-grad-cam's ClassifierOutputTarget). Deterministic; CI does not run this, the outputs are committed.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUTS = os.path.join(ROOT, "tests", "fixtures", "layouts")
DTYPES = ("F32", "F16", "BF16")


def read_json_weights(path):
    with open(path) as f:
        d = json.load(f)
    cfg = d.pop("config", None)
    return {k: np.asarray(v, dtype=np.float32) for k, v in d.items()}, cfg


def forward_autograd(sd, x, heads, eps, *, pos_rows="all", reg_name="reg_token"):
    """fixture_lib.vit_reference's forward (canonical timm names, float64) with autograd, through the final
    norm and the head. Returns (logits (C), attns [L x (H,T,T)], ln1 outputs [L x (T,D)], prefix)."""
    W = {k: torch.as_tensor(np.asarray(v), dtype=torch.float64) for k, v in sd.items()}
    pw = W["patch_embed.proj.weight"]
    P, D = pw.shape[-1], pw.shape[0]
    if isinstance(x, torch.Tensor):  # the caller's image, already requiring grad
        img = x.unsqueeze(0)
    else:
        img = torch.as_tensor(np.asarray(x), dtype=torch.float64).unsqueeze(0).requires_grad_(True)
    tok = F.conv2d(img, pw, W["patch_embed.proj.bias"], stride=P).flatten(2).transpose(1, 2)[0]
    pos = W["pos_embed"].reshape(-1, D)
    cls = W["cls_token"].reshape(1, D)
    reg = W[reg_name].reshape(-1, D) if reg_name in W else torch.zeros(0, D, dtype=torch.float64)
    dist = W["dist_token"].reshape(1, D) if "dist_token" in W else torch.zeros(0, D, dtype=torch.float64)
    if pos_rows == "cls":     # facebookresearch DINOv2 prepare_tokens_with_masks
        h = torch.cat([cls, tok], 0) + pos
        h = torch.cat([h[:1], reg, h[1:]], 0)
    elif pos_rows == "none":  # timm no_embed_class
        h = torch.cat([cls, dist, reg, tok + pos], 0)
    else:                     # timm default / DeiT
        h = torch.cat([cls, dist, reg, tok], 0) + pos
    prefix = 1 + dist.shape[0] + reg.shape[0]
    T, H = h.shape[0], heads
    dh = D // H
    attns, ln1s = [], []
    for i in range(fl.timm_depth(sd)):
        p = "blocks.%d." % i
        y = F.layer_norm(h, (D,), W[p + "norm1.weight"], W[p + "norm1.bias"], eps)
        y.retain_grad()
        ln1s.append(y)
        qkv = y @ W[p + "attn.qkv.weight"].T + W[p + "attn.qkv.bias"]
        q, k, v = (qkv[:, j * D:(j + 1) * D].reshape(T, H, dh).transpose(0, 1) for j in range(3))
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), dim=-1)
        a.retain_grad()
        attns.append(a)
        o = (a @ v).transpose(0, 1).reshape(T, D) @ W[p + "attn.proj.weight"].T + W[p + "attn.proj.bias"]
        h = h + (W[p + "ls1.gamma"] * o if p + "ls1.gamma" in W else o)
        y = F.layer_norm(h, (D,), W[p + "norm2.weight"], W[p + "norm2.bias"], eps)
        y = F.gelu(y @ W[p + "mlp.fc1.weight"].T + W[p + "mlp.fc1.bias"]) @ W[p + "mlp.fc2.weight"].T + W[p + "mlp.fc2.bias"]
        h = h + (W[p + "ls2.gamma"] * y if p + "ls2.gamma" in W else y)
    h = F.layer_norm(h, (D,), W["norm.weight"], W["norm.bias"], eps)
    logits = h[0] @ W["head.weight"].T + W["head.bias"]
    if "head_dist.weight" in W:  # timm VisionTransformerDistilled at inference: (x + x_dist) / 2
        logits = (logits + h[1] @ W["head_dist.weight"].T + W["head_dist.bias"]) / 2
    return logits, attns, ln1s, prefix


def explain_refs(sd, x, heads, eps, classes, grid, **kw):
    """Gradients and the three maps for each class in `classes` (fresh graph per class)."""
    gh, gw = grid
    out = {"grad_attn": [], "chefer": [], "gradcam": [], "attn_grad": []}
    logits0 = None
    for c in classes:
        logits, attns, ln1s, prefix = forward_autograd(sd, x, heads, eps, **kw)
        logits0 = logits.detach()
        logits[c].backward()
        grads = [a.grad for a in attns]
        out["grad_attn"].append(torch.stack(grads, 0))
        T = attns[0].shape[-1]
        R = torch.eye(T, dtype=torch.float64)
        ag = []
        for a, g in zip(attns, grads):  # Chefer et al.: avg_heads, apply_self_attention_rules
            cam = (g * a.detach()).clamp(min=0).mean(dim=0)
            R = R + cam @ R
            ag.append(cam[0, prefix:].reshape(gh, gw))
        out["chefer"].append(R[0, prefix:].reshape(gh, gw))
        out["attn_grad"].append(torch.stack(ag, 0))
        gc = []
        for y in ln1s:  # pytorch-grad-cam GradCAM: weights = mean of the gradient over the patch tokens
            act, g = y.detach()[prefix:], y.grad[prefix:]
            w = g.mean(dim=0)
            gc.append(torch.relu((act * w).sum(-1)).reshape(gh, gw))
        out["gradcam"].append(torch.stack(gc, 0))
    return logits0, {k: torch.stack(v, 0) for k, v in out.items()}


def torchvision_crosscheck(tv_sd, sd, x, heads, c):
    """torchvision.models.VisionTransformer itself (float64, autograd) against forward_autograd on the same
    weights: the logits, and dlogit_c / d(input image) -- the whole backward through nn.MultiheadAttention,
    the encoder's LayerNorms and heads.head on the class token. Returns the two max abs diffs."""
    from functools import partial
    from torchvision.models.vision_transformer import VisionTransformer
    W = {k: torch.as_tensor(np.asarray(v), dtype=torch.float64) for k, v in tv_sd.items()}
    D, _, P, _ = W["conv_proj.weight"].shape
    L = len({k.split(".")[2] for k in W if k.startswith("encoder.layers.")})
    vt = VisionTransformer(image_size=x.shape[-1], patch_size=P, num_layers=L, num_heads=heads, hidden_dim=D,
                           mlp_dim=W["encoder.layers.encoder_layer_0.mlp.0.weight"].shape[0],
                           num_classes=W["heads.head.weight"].shape[0],
                           norm_layer=partial(torch.nn.LayerNorm, eps=1e-6)).double().eval()
    ref = vt.state_dict()
    vt.load_state_dict({k: W[k].reshape(ref[k].shape) for k in ref})
    img = torch.as_tensor(np.asarray(x), dtype=torch.float64).unsqueeze(0).requires_grad_(True)
    lt = vt(img)[0]
    lt[c].backward()
    g_tv = img.grad.clone()
    img2 = torch.as_tensor(np.asarray(x), dtype=torch.float64).unsqueeze(0).requires_grad_(True)
    # forward_autograd from an image that requires grad: rebuild its first step with img2
    lo, _, _, _ = forward_autograd(sd, img2[0], heads, 1e-6)
    lo[c].backward()
    return float((lt - lo).abs().max()), float((g_tv - img2.grad).abs().max())


def write_case(folder, name, sd, x, heads, eps, grid, meta, **kw):
    os.makedirs(folder, exist_ok=True)
    logits, _ = explain_refs(sd, x, heads, eps, [0], grid, **kw)
    order = torch.argsort(logits, descending=True).tolist()
    classes = [order[0], order[-1]]
    scales = {}
    for dt in DTYPES:
        st = {k: fl.round_to_dtype(v, dt) for k, v in sd.items()}
        lg, refs = explain_refs(st, x, heads, eps, classes, grid, **kw)
        suf = "" if dt == "F32" else "_" + dt.lower()
        fl.save_npy(os.path.join(folder, "logits%s.npy" % suf), lg.numpy())
        for k, v in refs.items():
            fl.save_npy(os.path.join(folder, "%s%s.npy" % (k, suf)), v.numpy())
        if dt == "F32":
            scales = {k: float(v.abs().max()) for k, v in refs.items()}
            gmax = refs["grad_attn"].abs().max()
    meta = dict(meta)
    meta.update({"name": name, "classes": classes, "num_heads": heads, "eps": eps, "grid_hw": list(grid),
                 "compute_dtype": "float64", "max_abs": scales,
                 "files": {"logits*.npy": "(C) classifier output", "grad_attn*.npy": "(K,L,H,T,T) dlogit/dA",
                           "chefer*.npy": "(K,gh,gw)", "gradcam*.npy": "(K,L,gh,gw) activation = block l norm1",
                           "attn_grad*.npy": "(K,L,gh,gw) block l", "suffix _f16/_bf16": "from rounded weights"}})
    fl.write_meta(folder, **meta)
    print("%-16s classes %s  max|dA| %.3g  chefer max %.3g  gradcam max %.3g" % (
        name, classes, float(gmax), scales["chefer"], scales["gradcam"]))


def add_head(sd, gen, C, D):
    sd = dict(sd)
    sd["head.weight"] = fl.tensor_to_f32(fl.trunc_normal(gen, (C, D), 0.2))
    sd["head.bias"] = fl.tensor_to_f32(fl.trunc_normal(gen, (C,), 0.1))
    return sd


def write_weights(folder, sd, config):
    """weights.json with the config, and weights{,.f16,.bf16}.safetensors with it in __metadata__["config"]."""
    os.makedirs(folder, exist_ok=True)
    fl.write_attnmap_json(os.path.join(folder, "weights.json"), sd, config)
    md = {"format": "pt", "config": json.dumps(config, separators=(",", ":"))}
    for dt in DTYPES:
        fn = "weights.safetensors" if dt == "F32" else "weights.%s.safetensors" % dt.lower()
        fl.write_safetensors(os.path.join(folder, fn), sd, dt, metadata=md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "explain"))
    out = ap.parse_args().out
    torch.set_num_threads(1)

    sd, _ = read_json_weights(os.path.join(LAYOUTS, "timm", "weights.json"))
    x = np.load(os.path.join(LAYOUTS, "timm", "input.npy"))
    for other, conv in (("hf", lambda s: fl.to_hf(s, prefix="vit.", classifier=True)), ("torchvision", fl.to_torchvision)):
        o, _ = read_json_weights(os.path.join(LAYOUTS, other, "weights.json"))
        for k, v in conv(sd).items():  # hf/ and torchvision/ hold exactly timm/'s values under their names
            assert np.array_equal(np.asarray(v).reshape(o[k].shape), o[k]), (other, k)
    tv_sd, _ = read_json_weights(os.path.join(LAYOUTS, "torchvision", "weights.json"))
    tv_logits, tv_grad = torchvision_crosscheck(tv_sd, sd, x, 3, 2)
    assert tv_logits < 1e-12 and tv_grad < 1e-12, (tv_logits, tv_grad)
    print("torchvision VisionTransformer vs the reference: logits %.1e, dlogit/dimage %.1e" % (tv_logits, tv_grad))
    write_case(os.path.join(out, "timm"), "timm", sd, x, 3, 1e-6, (4, 4),
               {"weights": "layouts/timm", "same_weights_as": ["layouts/hf", "layouts/torchvision"],
                "torchvision_crosscheck": {"max_abs_diff_logits": tv_logits, "max_abs_diff_dlogit_dimage": tv_grad,
                                           "module": "torchvision.models.VisionTransformer, float64 autograd"},
                "description": "layouts/timm (head, 5 classes); hf/ and torchvision/ hold the same values, so "
                               "these references are theirs too (checked by this script)."})

    sd, _ = read_json_weights(os.path.join(LAYOUTS, "deit_distilled", "weights.json"))
    x = np.load(os.path.join(LAYOUTS, "deit_distilled", "input.npy"))
    write_case(os.path.join(out, "deit_distilled"), "deit_distilled", sd, x, 3, 1e-6, (4, 4),
               {"weights": "layouts/deit_distilled",
                "description": "DeiT distilled: logit = (head(class) + head_dist(distillation)) / 2."})

    labels = ["coat", "T-shirt/top", "bag", "sandal", "dress"]
    gen = torch.Generator().manual_seed(1919)
    sd, _ = read_json_weights(os.path.join(LAYOUTS, "dinov2_fb", "weights.json"))
    sd = add_head(sd, gen, 5, 24)
    folder = os.path.join(out, "dinov2_fb")
    write_weights(folder, sd, {"num_heads": 3, "labels": labels})
    x = np.load(os.path.join(LAYOUTS, "dinov2_fb", "input.npy"))
    write_case(folder, "dinov2_fb", sd, x, 3, 1e-6, (3, 3),
               {"weights": "explain/dinov2_fb", "pos_rows": "cls", "labels": labels,
                "description": "layouts/dinov2_fb (4 registers without position rows, LayerScale, mask_token) "
                               "with a random head of 5 classes and labels added (seed 1919)."},
               pos_rows="cls", reg_name="register_tokens")

    sd, _ = read_json_weights(os.path.join(LAYOUTS, "timm_reg_full", "weights.json"))
    sd = add_head(sd, gen, 5, 24)
    folder = os.path.join(out, "timm_reg_full")
    write_weights(folder, sd, {"num_heads": 3, "image_size": [32, 48]})
    x = np.load(os.path.join(LAYOUTS, "timm_reg_full", "input.npy"))
    write_case(folder, "timm_reg_full", sd, x, 3, 1e-6, (4, 6),
               {"weights": "explain/timm_reg_full", "pos_rows": "all",
                "description": "layouts/timm_reg_full (2 registers with position rows, 32x48 input, 4x6 grid) "
                               "with a random head of 5 classes (seed 1919, after dinov2_fb's)."},
               pos_rows="all", reg_name="reg_token")


if __name__ == "__main__":
    main()
