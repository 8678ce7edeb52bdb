"""Shared helpers for attnmap's Python tooling (fixtures + default weights).

Python is tooling only; nothing here is needed at run time by the C++ CLI.
Run with Debian's interpreter: /usr/bin/python3 (torch 1.13, numpy).

Contents
  * write_attnmap_json(path, tensors, config)  -- "attnmap JSON v1" writer,
    compact (no spaces), each float as the shortest text that round-trips to
    the same float32.
  * save_npy(path, arr)  -- float32 little-endian C-order .npy (format v1.0).
  * random timm-layout state-dict generator and explicit float64 reference
    forward passes for the timm layout and the one-layer "seed" layout.
"""

import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# --------------------------------------------------------------------------
# Serialisation
# --------------------------------------------------------------------------

def _f32_text(x):
    """Shortest decimal text that parses back to exactly this float32."""
    s = repr(np.float32(x))  # numpy >= 1.14: shortest round-trip repr
    if s in ("nan", "inf", "-inf"):
        raise ValueError("non-finite value cannot be written to JSON")
    return s


def _array_text(a):
    if a.ndim == 0:
        return _f32_text(a)
    if a.ndim == 1:
        return "[" + ",".join(_f32_text(v) for v in a) + "]"
    return "[" + ",".join(_array_text(sub) for sub in a) + "]"


def tensor_to_f32(t):
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(t, dtype=np.float32))


def write_attnmap_json(path, tensors, config=None):
    """Write {name: nested list} (+ optional "config") with float32 shortest text.

    `tensors` is an ordered mapping name -> array-like (torch or numpy); every
    value is rounded to float32 first.  Returns the dict of float32 numpy
    arrays actually written (use these for reference computations so the
    references see exactly the stored numbers).
    """
    stored = {}
    parts = []
    for name, t in tensors.items():
        a = tensor_to_f32(t)
        stored[name] = a
        parts.append(json.dumps(name) + ":" + _array_text(a))
    if config is not None:
        parts.append('"config":' + json.dumps(config, separators=(",", ":")))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="ascii") as f:
        f.write("{" + ",".join(parts) + "}\n")
    return stored


def save_npy(path, arr):
    """float32, little-endian, C order, .npy format version 1.0."""
    a = np.ascontiguousarray(np.asarray(arr, dtype="<f4"))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=(1, 0), allow_pickle=False)
    return a


# --------------------------------------------------------------------------
# Random weights
# --------------------------------------------------------------------------

def trunc_normal(gen, shape, std, a=-2.0, b=2.0):
    """Normal(0, std) truncated to [a*std, b*std] (resampling), float64."""
    out = torch.empty(shape, dtype=torch.float64)
    flat = out.view(-1)
    n = flat.numel()
    filled = 0
    while filled < n:
        s = torch.randn(max(2 * (n - filled), 16), generator=gen, dtype=torch.float64)
        s = s[(s >= a) & (s <= b)][: n - filled]
        flat[filled:filled + s.numel()] = s
        filled += s.numel()
    return out * std


def random_timm_state(gen, *, image_size, patch, dim, depth, mlp, std,
                      head_classes=0):
    """Ordered timm/DINO-named state dict (float64 torch tensors).

    `std` maps a role to a standard deviation:
      patch, pos, cls, qkv, proj, fc1, fc2, head   -> weights
      bias                                         -> all linear/conv biases
      ln_w_jitter, ln_b                            -> LayerNorm weight = 1 + N(0, jitter),
                                                      bias = N(0, ln_b)
    A std of 0 for bias / LayerNorm gives timm's defaults (zeros, ones).
    """
    n = (image_size // patch) ** 2

    def tn(shape, s):
        return trunc_normal(gen, shape, s) if s > 0 else torch.zeros(shape, dtype=torch.float64)

    def ln(prefix, sd):
        sd[prefix + ".weight"] = 1.0 + tn((dim,), std.get("ln_w_jitter", 0.0))
        sd[prefix + ".bias"] = tn((dim,), std.get("ln_b", 0.0))

    b = std.get("bias", 0.0)
    sd = {}
    sd["cls_token"] = tn((1, 1, dim), std["cls"])
    sd["pos_embed"] = tn((1, 1 + n, dim), std["pos"])
    sd["patch_embed.proj.weight"] = tn((dim, 3, patch, patch), std["patch"])
    sd["patch_embed.proj.bias"] = tn((dim,), b)
    for i in range(depth):
        p = "blocks.%d." % i
        ln(p + "norm1", sd)
        sd[p + "attn.qkv.weight"] = tn((3 * dim, dim), std["qkv"])
        sd[p + "attn.qkv.bias"] = tn((3 * dim,), b)
        sd[p + "attn.proj.weight"] = tn((dim, dim), std["proj"])
        sd[p + "attn.proj.bias"] = tn((dim,), b)
        ln(p + "norm2", sd)
        sd[p + "mlp.fc1.weight"] = tn((mlp, dim), std["fc1"])
        sd[p + "mlp.fc1.bias"] = tn((mlp,), b)
        sd[p + "mlp.fc2.weight"] = tn((dim, mlp), std["fc2"])
        sd[p + "mlp.fc2.bias"] = tn((dim,), b)
    ln("norm", sd)
    if head_classes:
        sd["head.weight"] = tn((head_classes, dim), std.get("head", 0.02))
        sd["head.bias"] = tn((head_classes,), b)
    return sd


# --------------------------------------------------------------------------
# Reference forward passes (explicit, float64)
# --------------------------------------------------------------------------

def _t64(a):
    return torch.as_tensor(np.asarray(a), dtype=torch.float64)


def timm_depth(sd):
    idx = set()
    for k in sd:
        if k.startswith("blocks."):
            idx.add(int(k.split(".")[1]))
    return len(idx)


def timm_forward(sd, x, num_heads, eps):
    """timm VisionTransformer (pre-norm) forward on one image.

    sd: name -> array (float32 values, computed in float64)
    x:  (3, S, S) normalised image
    Returns (attn (L,H,T,T), tokens after final LayerNorm (T,D)), float64.
    """
    W = {k: _t64(v) for k, v in sd.items()}
    img = _t64(x).unsqueeze(0)
    pw = W["patch_embed.proj.weight"]
    P = pw.shape[-1]
    D = pw.shape[0]
    tok = F.conv2d(img, pw, W["patch_embed.proj.bias"], stride=P)  # (1,D,g,g)
    tok = tok.flatten(2).transpose(1, 2)[0]                          # (N,D) row-major
    x = torch.cat([W["cls_token"].reshape(1, D), tok], 0) + W["pos_embed"].reshape(-1, D)
    T = x.shape[0]
    H = num_heads
    dh = D // H
    attns = []
    for i in range(timm_depth(sd)):
        p = "blocks.%d." % i
        h = F.layer_norm(x, (D,), W[p + "norm1.weight"], W[p + "norm1.bias"], eps)
        qkv = h @ W[p + "attn.qkv.weight"].T + W[p + "attn.qkv.bias"]   # (T,3D)
        q, k, v = qkv[:, :D], qkv[:, D:2 * D], qkv[:, 2 * D:]
        q = q.reshape(T, H, dh).transpose(0, 1)                          # (H,T,dh)
        k = k.reshape(T, H, dh).transpose(0, 1)
        v = v.reshape(T, H, dh).transpose(0, 1)
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), dim=-1)  # (H,T,T)
        attns.append(a)
        o = (a @ v).transpose(0, 1).reshape(T, D)
        x = x + o @ W[p + "attn.proj.weight"].T + W[p + "attn.proj.bias"]
        h = F.layer_norm(x, (D,), W[p + "norm2.weight"], W[p + "norm2.bias"], eps)
        h = F.gelu(h @ W[p + "mlp.fc1.weight"].T + W[p + "mlp.fc1.bias"])  # exact erf GELU
        x = x + h @ W[p + "mlp.fc2.weight"].T + W[p + "mlp.fc2.bias"]
    x = F.layer_norm(x, (D,), W["norm.weight"], W["norm.bias"], eps)
    return torch.stack(attns, 0), x


def patch_vectors(x, P):
    """(3,S,S) -> (N, 3*P*P): patches in row-major order, each flattened (c,row,col)."""
    img = _t64(x)
    C, S, _ = img.shape
    g = S // P
    v = img.reshape(C, g, P, g, P).permute(1, 3, 0, 2, 4)  # (gy,gx,C,py,px)
    return v.reshape(g * g, C * P * P)


def seed_forward(sd, x, P):
    """One-layer seed-layout attention.  Returns (attn (1,1,T,T), out (T,d_k)), float64."""
    W = {k: _t64(v) for k, v in sd.items()}
    pv = patch_vectors(x, P)
    if "W_E" in W:
        tok = pv @ W["W_E"]
        if "b_E" in W:
            tok = tok + W["b_E"]
        # cross-check: the same thing as a PyTorch conv with weight W_E^T
        D = W["W_E"].shape[1]
        conv = F.conv2d(_t64(x).unsqueeze(0), W["W_E"].T.reshape(D, 3, P, P),
                        W.get("b_E"), stride=P).flatten(2).transpose(1, 2)[0]
        tol = 1e-10 if tok.dtype == torch.float64 else 1e-4
        assert torch.allclose(conv, tok, atol=tol), "patch order mismatch"
    else:
        tok = pv
    D = tok.shape[1]
    cls = W["cls_token"].reshape(1, D) if "cls_token" in W else tok.mean(0, keepdim=True)
    X = torch.cat([cls, tok], 0)
    if "pos_embed" in W:
        X = X + W["pos_embed"].reshape(X.shape[0], D)
    Q, K, V = X @ W["W_Q"], X @ W["W_K"], X @ W["W_V"]
    dk = Q.shape[1]
    a = torch.softmax(Q @ K.T / math.sqrt(dk), dim=-1)
    return a.reshape(1, 1, *a.shape), a @ V
