"""Autograd references of the class-specific maps for a family fixture (issue 44), through the family's OWN
model code (the case's timm model, built and loaded as the generator made it):

  grad_attn.npy  (L, H, T, T)  dlogit_c / dA of every block, A = the input of each block's attn.attn_drop
                               (the softmax output, after q/k norms and rope: what timm's attention multiplies V by)
  with a class-token classifier (global_pool 'token'), also, as tools/make_explain_fixtures.py defines them:
  chefer.npy     (gh, gw)      Chefer et al. rules 5-6: R = I; R += mean_h (dA * A)^+ @ R; R[0, prefix:]
  gradcam.npy    (L, gh, gw)   Grad-CAM, block l's norm1 output as activation (weights = mean of its gradient
                               over the patch tokens), ReLU of the weighted sum
  attn_grad.npy  (L, gh, gw)   mean_h (dA * A)^+ class-token row, patch columns

c = the most probable class (argmax of the float64 logits). float64; the float32 run gives the spread.
Used by tools/make_family_fixtures_rope.py and make_family_fixtures_timm.py (`--explain-only` writes these
files and meta.json's "explain" entry alone, leaving every other file as it is).
"""

import json
import os
from pathlib import Path

import numpy as np
import torch

import fixture_lib as fl


def _run(case, sd, x, dtype, target=None):
    m = case.build().to(dtype).eval()
    m.load_state_dict(sd)
    for b in m.blocks:  # timm's manual softmax path, the one attn_drop sees
        b.attn.fused_attn = False
    probs, ln1 = [], []

    def keep_probs(mod, inp):
        inp[0].retain_grad()
        probs.append(inp[0])

    def keep_ln1(mod, inp, out):
        out.retain_grad()
        ln1.append(out)
    hs = [b.attn.attn_drop.register_forward_pre_hook(keep_probs) for b in m.blocks]
    hs += [b.norm1.register_forward_hook(keep_ln1) for b in m.blocks]
    logits = m(x.to(dtype).unsqueeze(0))[0]
    c = int(logits.argmax()) if target is None else target
    logits[c].backward()
    for h in hs:
        h.remove()
    return c, [p.detach()[0].double() for p in probs], [p.grad[0].double() for p in probs], \
        [y.detach()[0].double() for y in ln1], [y.grad[0].double() for y in ln1]


def _maps(A, G, Y, GY, prefix, gh, gw):
    T = A[0].shape[-1]
    R = torch.eye(T, dtype=torch.float64)
    ag, gc = [], []
    for a, g in zip(A, G):  # Chefer et al.: avg_heads, apply_self_attention_rules
        cam = (g * a).clamp(min=0).mean(dim=0)
        R = R + cam @ R
        ag.append(cam[0, prefix:].reshape(gh, gw))
    for y, g in zip(Y, GY):  # pytorch-grad-cam GradCAM on norm1's output
        w = g[prefix:].mean(dim=0)
        gc.append(torch.relu((y[prefix:] * w).sum(-1)).reshape(gh, gw))
    return R[0, prefix:].reshape(gh, gw), torch.stack(gc, 0), torch.stack(ag, 0)


def add_explain(case, folder, class_token_pool, rule_source):
    """Writes grad_attn.npy (and with a class-token pool chefer / gradcam / attn_grad .npy) into folder and
    meta.json's "explain" entry; returns that entry."""
    meta = json.loads(Path(folder, "meta.json").read_text())
    sd = case.load_sd(folder) if hasattr(case, "load_sd") else \
        torch.load(os.path.join(folder, "model.pth"), map_location="cpu")
    x = torch.from_numpy(np.load(os.path.join(folder, "input.npy")))
    c, A, G, Y, GY = _run(case, sd, x, torch.float64)
    c32, A32, G32, Y32, GY32 = _run(case, sd, x, torch.float32, target=c)
    g64, g32 = torch.stack(G, 0), torch.stack(G32, 0)
    spread = float((g64 - g32).abs().max())
    fl.save_npy(os.path.join(folder, "grad_attn.npy"), g64.numpy())
    ex = {"file": "grad_attn.npy", "target_class": c, "spread_f32_f64": spread,
          "tolerance": max(1e-5, 2 * spread), "max_abs": float(g64.abs().max()),
          "rule": "torch autograd of logits[c] (c = argmax, float64) through %s; d/dA for A = the input of each "
                  "block's attn.attn_drop (after q/k norms and rope)" % rule_source,
          "generator": "tools/fixture_explain.py"}
    if class_token_pool:
        P = meta["patch"]
        gh = gw = meta["image_size"] // P
        prefix = meta["num_prefix"]
        maps64 = _maps(A, G, Y, GY, prefix, gh, gw)
        maps32 = _maps(A32, G32, Y32, GY32, prefix, gh, gw)
        ex["maps"] = {}
        for name, m64, m32 in zip(("chefer", "gradcam", "attn_grad"), maps64, maps32):
            fl.save_npy(os.path.join(folder, name + ".npy"), m64.numpy())
            ex["maps"][name] = {"file": name + ".npy", "shape": list(m64.shape),
                                "spread_f32_f64": float((m64 - m32).abs().max()), "peak": float(m64.abs().max())}
    meta["explain"] = ex
    fl.write_meta(folder, **meta)
    print("    explain: class %d, dA spread %.1e (max |g| %.2g)%s" % (
        c, spread, ex["max_abs"], ", maps" if class_token_pool else ""))
    return ex
