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
  * write_safetensors(path, tensors, dtype) -- F32 / F16 / BF16 safetensors.
  * layout variants (DeiT distilled, DINOv2 registers, LayerScale, q/v bias),
    renamers to Hugging Face / torchvision names and their references.
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


# --------------------------------------------------------------------------
# safetensors writer (Debian 12 has no `safetensors` module; the format is
# an 8-byte little-endian header length, a JSON header, raw little-endian data)
# --------------------------------------------------------------------------

SAFETENSORS_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (None, 2)}


def round_to_dtype(a, dtype):
    """float32 array -> float32 array holding exactly the values stored as `dtype`
    (round to nearest even, as torch's .to(dtype) does)."""
    a = tensor_to_f32(a)
    if dtype == "F32":
        return a
    if dtype == "F16":
        return a.astype(np.float16).astype(np.float32)
    if dtype == "BF16":
        return torch.from_numpy(a.copy()).to(torch.bfloat16).to(torch.float32).numpy()
    raise ValueError(dtype)


def _dtype_bytes(a, dtype):
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    bits = torch.from_numpy(a.copy()).to(torch.bfloat16).view(torch.int16).numpy()
    return bits.astype("<i2").tobytes()


def write_safetensors(path, tensors, dtype="F32", metadata=None, pad_to=8, keep_0d=False):
    """Write {name: array} as a safetensors file with every tensor in `dtype`
    (F32, F16 or BF16).  Tensors are laid out in name order, contiguously; the
    header is padded with spaces to a multiple of `pad_to` bytes, as the
    reference implementation does.  A 0-d tensor is stored with shape (1,)
    unless `keep_0d` (shape (), as torch's OpenAI CLIP logit_scale).  Returns
    {name: float32 array of the values actually stored} for reference
    computations."""
    stored, header, blobs, off = {}, {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        a = tensor_to_f32(tensors[name])
        stored[name] = round_to_dtype(a, dtype)
        b = _dtype_bytes(a, dtype)
        shape = list(tensors[name].shape) if keep_0d and len(tensors[name].shape) == 0 else list(a.shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % pad_to)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)
    return stored


# --------------------------------------------------------------------------
# Layout variants: random canonical (timm-named) weights with the extras of
# DeiT / DINOv2 / BEiT-style models, renamers to Hugging Face and torchvision
# names, and explicit float64 references that follow each source literally.
# --------------------------------------------------------------------------

def random_vit_state(gen, *, image_hw, patch, dim, depth, mlp, std, head_classes=0,
                     n_dist=0, n_reg=0, reg_name="reg_token", pos_rows="all",
                     layer_scale=False, qv_bias=False, extra=()):
    """Canonical timm-named state dict (float64) with optional extras.

    n_dist      1 adds `dist_token` (DeiT distilled) and `head_dist`.
    n_reg       register tokens, named `reg_name` ("reg_token": timm,
                "register_tokens": facebookresearch DINOv2).
    pos_rows    "all": pos_embed covers every prefix token (timm default,
                DeiT); "cls": class token only (facebookresearch DINOv2);
                "none": patches only (timm no_embed_class).
    layer_scale adds blocks.{i}.ls1.gamma / ls2.gamma.
    qv_bias     replaces attn.qkv.bias by attn.q_bias / attn.v_bias (BEiT).
    extra       names of unused tensors to add (e.g. "mask_token").
    """
    gh, gw = image_hw[0] // patch, image_hw[1] // patch
    n = gh * gw
    sq = random_timm_state(gen, image_size=patch, patch=patch, dim=dim, depth=depth, mlp=mlp,
                           std=std, head_classes=head_classes)

    def tn(shape, s):
        return trunc_normal(gen, shape, s)

    npos = {"all": 1 + n_dist + n_reg, "cls": 1, "none": 0}[pos_rows] + n
    sd = {}
    for k, v in sq.items():
        if k == "pos_embed":
            continue
        sd[k] = v
        if k == "cls_token":
            if n_dist:
                sd["dist_token"] = tn((1, 1, dim), std["cls"])
            if n_reg:
                sd[reg_name] = tn((1, n_reg, dim), std["cls"])
            sd["pos_embed"] = tn((1, npos, dim), std["pos"])
    for i in range(depth):
        p = "blocks.%d." % i
        if qv_bias:
            b = sd.pop(p + "attn.qkv.bias")
            sd[p + "attn.q_bias"] = b[:dim].clone()
            sd[p + "attn.v_bias"] = b[2 * dim:].clone()
        if layer_scale:
            sd[p + "ls1.gamma"] = 0.5 + tn((dim,), 0.3)
            sd[p + "ls2.gamma"] = 0.5 + tn((dim,), 0.3)
    if n_dist and head_classes:
        sd["head_dist.weight"] = tn((head_classes, dim), std.get("head", 0.02))
        sd["head_dist.bias"] = tn((head_classes,), 0.1)
    for name in extra:
        sd[name] = tn((1, dim), 0.1)
    return sd


def vit_reference(sd, x, num_heads, eps, *, pos_rows="all", reg_name="reg_token", hidden=None):
    """Explicit float64 forward of the canonical layout, the token assembly
    written as each source does it:
      timm VisionTransformer._pos_embed: no_embed_class -> x = x + pos, then
        cat(prefix, x); else cat(prefix, x) + pos  (prefix = cls, dist, reg);
      facebookresearch DINOv2 prepare_tokens_with_masks: x = cat(cls, x) + pos,
        then cat(x[:, :1], register_tokens, x[:, 1:]).
    Blocks: x += ls1 * proj(attn(norm1(x))); x += ls2 * mlp(norm2(x)).
    Returns (attn (L,H,T,T), tokens after the final norm (T,D)). With a list
    `hidden`, each block's output (the residual stream, (T,D)) is appended to it."""
    W = {k: _t64(v) for k, v in sd.items()}
    img = _t64(x).unsqueeze(0)
    pw = W["patch_embed.proj.weight"]
    P, D = pw.shape[-1], pw.shape[0]
    tok = F.conv2d(img, pw, W["patch_embed.proj.bias"], stride=P).flatten(2).transpose(1, 2)[0]  # (N,D)
    pos = W["pos_embed"].reshape(-1, D)
    cls = W["cls_token"].reshape(1, D)
    reg = W[reg_name].reshape(-1, D) if reg_name in W else torch.zeros(0, D, dtype=torch.float64)
    dist = W["dist_token"].reshape(1, D) if "dist_token" in W else torch.zeros(0, D, dtype=torch.float64)
    if pos_rows == "cls":     # facebookresearch DINOv2
        h = torch.cat([cls, tok], 0) + pos
        h = torch.cat([h[:1], reg, h[1:]], 0)
    elif pos_rows == "none":  # timm no_embed_class
        h = torch.cat([cls, dist, reg, tok + pos], 0)
    else:                     # timm default / DeiT
        h = torch.cat([cls, dist, reg, tok], 0) + pos
    T, H = h.shape[0], num_heads
    dh = D // H
    attns = []
    for i in range(timm_depth(sd)):
        p = "blocks.%d." % i
        y = F.layer_norm(h, (D,), W[p + "norm1.weight"], W[p + "norm1.bias"], eps)
        if p + "attn.q_bias" in W:  # BEiT-style: no key bias
            bias = torch.cat([W[p + "attn.q_bias"], torch.zeros(D, dtype=torch.float64), W[p + "attn.v_bias"]])
        else:
            bias = W[p + "attn.qkv.bias"]
        qkv = y @ W[p + "attn.qkv.weight"].T + bias
        q, k, v = (qkv[:, j * D:(j + 1) * D].reshape(T, H, dh).transpose(0, 1) for j in range(3))
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), dim=-1)
        attns.append(a)
        o = (a @ v).transpose(0, 1).reshape(T, D) @ W[p + "attn.proj.weight"].T + W[p + "attn.proj.bias"]
        h = h + (W[p + "ls1.gamma"] * o if p + "ls1.gamma" in W else o)
        y = F.layer_norm(h, (D,), W[p + "norm2.weight"], W[p + "norm2.bias"], eps)
        y = F.gelu(y @ W[p + "mlp.fc1.weight"].T + W[p + "mlp.fc1.bias"]) @ W[p + "mlp.fc2.weight"].T + W[p + "mlp.fc2.bias"]
        h = h + (W[p + "ls2.gamma"] * y if p + "ls2.gamma" in W else y)
        if hidden is not None:
            hidden.append(h)
    h = F.layer_norm(h, (D,), W["norm.weight"], W["norm.bias"], eps)
    return torch.stack(attns, 0), h


def to_hf(sd, prefix="vit.", classifier=True, pooler=False, gen=None):
    """timm names -> Hugging Face ViTModel (prefix "") / ViTForImageClassification
    (prefix "vit.", head -> classifier); qkv split into query/key/value."""
    D = sd["patch_embed.proj.weight"].shape[0]
    out = {prefix + "embeddings.cls_token": sd["cls_token"],
           prefix + "embeddings.position_embeddings": sd["pos_embed"],
           prefix + "embeddings.patch_embeddings.projection.weight": sd["patch_embed.proj.weight"],
           prefix + "embeddings.patch_embeddings.projection.bias": sd["patch_embed.proj.bias"]}
    for i in range(timm_depth(sd)):
        a, b = "blocks.%d." % i, prefix + "encoder.layer.%d." % i
        for j, n in enumerate(("query", "key", "value")):
            out[b + "attention.attention.%s.weight" % n] = sd[a + "attn.qkv.weight"][j * D:(j + 1) * D]
            out[b + "attention.attention.%s.bias" % n] = sd[a + "attn.qkv.bias"][j * D:(j + 1) * D]
        for src, dst in (("attn.proj", "attention.output.dense"), ("mlp.fc1", "intermediate.dense"),
                         ("mlp.fc2", "output.dense"), ("norm1", "layernorm_before"), ("norm2", "layernorm_after")):
            out[b + dst + ".weight"] = sd[a + src + ".weight"]
            out[b + dst + ".bias"] = sd[a + src + ".bias"]
    out[prefix + "layernorm.weight"] = sd["norm.weight"]
    out[prefix + "layernorm.bias"] = sd["norm.bias"]
    if classifier and "head.weight" in sd:
        out["classifier.weight"] = sd["head.weight"]
        out["classifier.bias"] = sd["head.bias"]
    if pooler:
        out[prefix + "pooler.dense.weight"] = trunc_normal(gen, (D, D), 0.02)
        out[prefix + "pooler.dense.bias"] = torch.zeros(D, dtype=torch.float64)
    return out


def hf_reference(sd, x, num_heads, eps, prefix="vit."):
    """Explicit float64 forward written against Hugging Face ViT names
    (modeling_vit.py: ViTEmbeddings, ViTSelfAttention with separate query /
    key / value, layernorm_before / layernorm_after, final layernorm)."""
    W = {k: _t64(v) for k, v in sd.items()}
    e = prefix + "embeddings."
    pw = W[e + "patch_embeddings.projection.weight"]
    P, D = pw.shape[-1], pw.shape[0]
    tok = F.conv2d(_t64(x).unsqueeze(0), pw, W[e + "patch_embeddings.projection.bias"], stride=P).flatten(2).transpose(1, 2)[0]
    h = torch.cat([W[e + "cls_token"].reshape(1, D), tok], 0) + W[e + "position_embeddings"].reshape(-1, D)
    T, H = h.shape[0], num_heads
    dh = D // H
    attns = []
    i = 0
    while prefix + "encoder.layer.%d.layernorm_before.weight" % i in W:
        b = prefix + "encoder.layer.%d." % i
        lin = lambda name, v: v @ W[b + name + ".weight"].T + W[b + name + ".bias"]  # noqa: E731
        y = F.layer_norm(h, (D,), W[b + "layernorm_before.weight"], W[b + "layernorm_before.bias"], eps)
        q, k, v = (lin("attention.attention." + n, y).reshape(T, H, dh).transpose(0, 1) for n in ("query", "key", "value"))
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), dim=-1)
        attns.append(a)
        h = h + lin("attention.output.dense", (a @ v).transpose(0, 1).reshape(T, D))
        y = F.layer_norm(h, (D,), W[b + "layernorm_after.weight"], W[b + "layernorm_after.bias"], eps)
        h = h + lin("output.dense", F.gelu(lin("intermediate.dense", y)))
        i += 1
    h = F.layer_norm(h, (D,), W[prefix + "layernorm.weight"], W[prefix + "layernorm.bias"], eps)
    return torch.stack(attns, 0), h


TV_MAP = (("norm1", "ln_1"), ("norm2", "ln_2"), ("attn.proj", "self_attention.out_proj"),
          ("mlp.fc1", "mlp.0"), ("mlp.fc2", "mlp.3"))


def to_torchvision(sd):
    """timm names -> torchvision VisionTransformer names (fused in_proj)."""
    out = {"class_token": sd["cls_token"], "conv_proj.weight": sd["patch_embed.proj.weight"],
           "conv_proj.bias": sd["patch_embed.proj.bias"], "encoder.pos_embedding": sd["pos_embed"],
           "encoder.ln.weight": sd["norm.weight"], "encoder.ln.bias": sd["norm.bias"]}
    for i in range(timm_depth(sd)):
        a, b = "blocks.%d." % i, "encoder.layers.encoder_layer_%d." % i
        out[b + "self_attention.in_proj_weight"] = sd[a + "attn.qkv.weight"]
        out[b + "self_attention.in_proj_bias"] = sd[a + "attn.qkv.bias"]
        for src, dst in TV_MAP:
            out[b + dst + ".weight"] = sd[a + src + ".weight"]
            out[b + dst + ".bias"] = sd[a + src + ".bias"]
    if "head.weight" in sd:
        out["heads.head.weight"] = sd["head.weight"]
        out["heads.head.bias"] = sd["head.bias"]
    return out


def torchvision_reference(tv_sd, x, num_heads, image_size, eps=1e-6):
    """Attention probabilities and final tokens from torchvision's own
    VisionTransformer (nn.MultiheadAttention, need_weights=True), float64."""
    from functools import partial
    from torchvision.models.vision_transformer import VisionTransformer
    W = {k: _t64(v) for k, v in tv_sd.items()}
    D, _, P, _ = W["conv_proj.weight"].shape
    L = len({k.split(".")[2] for k in W if k.startswith("encoder.layers.")})
    M = W["encoder.layers.encoder_layer_0.mlp.0.weight"].shape[0]
    C = W["heads.head.weight"].shape[0] if "heads.head.weight" in W else 1000
    vt = VisionTransformer(image_size=image_size, patch_size=P, num_layers=L, num_heads=num_heads,
                           hidden_dim=D, mlp_dim=M, num_classes=C,
                           norm_layer=partial(torch.nn.LayerNorm, eps=eps)).double().eval()
    ref = vt.state_dict()
    vt.load_state_dict({k: (W[k].reshape(ref[k].shape) if k in W else ref[k]) for k in ref})
    with torch.no_grad():
        img = _t64(x).unsqueeze(0)
        h = vt._process_input(img)
        h = torch.cat([vt.class_token.expand(1, -1, -1), h], 1) + vt.encoder.pos_embedding
        attns = []
        for layer in vt.encoder.layers:
            y = layer.ln_1(h)
            _, w = layer.self_attention(y, y, y, need_weights=True, average_attn_weights=False)
            attns.append(w[0])
            h = layer(h)
        h = vt.encoder.ln(h)[0]
    return torch.stack(attns, 0), h


def write_meta(folder, **meta):
    """Writes folder/meta.json (indent 1, trailing newline): what a fixture holds and how it was made."""
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
