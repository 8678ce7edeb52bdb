#!/usr/bin/python3
"""ViT-B/16-sized random checkpoints (D=768, 12 blocks, 12 heads, MLP 3072, 224 px, patch 16) in every
family's own tensor names, for bench/families.sh: the speed of each family's variant against a plain timm
ViT-B of the same size in the same run. Speed only: the numbers are random (correctness is
tests/test_families.cpp, against each family's own code). Written as safetensors (F32) with a config in
__metadata__ where the family's file cannot say a setting (heads, activation), as attnmap reads it.

    /usr/bin/python3 bench/make_families.py OUT_DIR [--seed 0]

Writes OUT_DIR/<family>.safetensors for: timm (plain), timm-clip (norm_pre, QuickGELU), clip (OpenAI CLIP
visual names), hf-clip, timm-qknorm, timm-ls (LayerScale), timm-siglip (no class token, MAP head),
timm-gap (no class token, mean pooling), dinov2-swiglu (SwiGLU MLP, registers), vit-pytorch, simple-vit,
cait (10 talking-heads self-attention + 2 class-attention blocks),
eva02 (timm Eva as eva02_base: RoPE, q_bias / v_bias, SwiGLU fc1_g / fc1_x + sub-LayerNorm; issue 29),

beit (relative position bias per block, q_bias / v_bias, gamma_1 / gamma_2, no pos_embed, mean pooling).
"""
import argparse
import json
import os
import struct

import numpy as np

D, DEPTH, H, MLP, P, S = 768, 12, 12, 3072, 16, 224
N = (S // P) ** 2


def rng_state(g, cls=True, extra=None):
    """A timm-named ViT-B state dict (float32), q/k rows scaled so the attention is not flat."""
    def r(*shape, std=0.02):
        return (g.standard_normal(shape) * std).astype(np.float32)

    sd = {"pos_embed": r(1, (1 if cls else 0) + N, D), "patch_embed.proj.weight": r(D, 3, P, P, std=1 / np.sqrt(3 * P * P)),
          "patch_embed.proj.bias": r(D)}
    if cls:
        sd["cls_token"] = r(1, 1, D)
    for i in range(DEPTH):
        b = "blocks.%d." % i
        qkv = r(3 * D, D)
        qkv[: 2 * D] *= 3
        sd.update({b + "norm1.weight": 1 + r(D), b + "norm1.bias": r(D), b + "attn.qkv.weight": qkv,
                   b + "attn.qkv.bias": r(3 * D), b + "attn.proj.weight": r(D, D), b + "attn.proj.bias": r(D),
                   b + "norm2.weight": 1 + r(D), b + "norm2.bias": r(D), b + "mlp.fc1.weight": r(MLP, D),
                   b + "mlp.fc1.bias": r(MLP), b + "mlp.fc2.weight": r(D, MLP), b + "mlp.fc2.bias": r(D)})
        if extra:
            extra(sd, b, r)
    sd["norm.weight"] = 1 + r(D)
    sd["norm.bias"] = r(D)
    return sd, r


def write_safetensors(path, sd, config=None):
    header, off, blobs = {}, 0, []
    for k in sorted(sd):
        a = np.ascontiguousarray(sd[k], dtype="<f4")
        header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    if config is not None:
        header["__metadata__"] = {"config": json.dumps(config)}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rename(sd, fn):
    return {fn(k): v for k, v in sd.items() if fn(k) is not None}


def clip_names(k):
    m = {"cls_token": "class_embedding", "pos_embed": "positional_embedding", "patch_embed.proj.weight": "conv1.weight",
         "norm_pre.weight": "ln_pre.weight", "norm_pre.bias": "ln_pre.bias", "norm.weight": "ln_post.weight",
         "norm.bias": "ln_post.bias"}
    if k == "patch_embed.proj.bias":
        return None
    if k in m:
        return m[k]
    i, rest = k.split(".")[1], ".".join(k.split(".")[2:])
    rest = {"attn.qkv.weight": "attn.in_proj_weight", "attn.qkv.bias": "attn.in_proj_bias"}.get(rest, rest)
    for a, b in (("norm1.", "ln_1."), ("norm2.", "ln_2."), ("attn.proj.", "attn.out_proj."), ("mlp.fc1.", "mlp.c_fc."),
                 ("mlp.fc2.", "mlp.c_proj.")):
        if rest.startswith(a):
            rest = b + rest[len(a):]
    return "transformer.resblocks.%s.%s" % (i, rest)


def hf_clip(sd):
    out = {}
    for k, v in sd.items():
        if k == "cls_token":
            out["vision_model.embeddings.class_embedding"] = v.reshape(D)
        elif k == "pos_embed":
            out["vision_model.embeddings.position_embedding.weight"] = v.reshape(-1, D)
        elif k == "patch_embed.proj.weight":
            out["vision_model.embeddings.patch_embedding.weight"] = v
        elif k.startswith("norm_pre."):
            out["vision_model.pre_layrnorm." + k.split(".")[1]] = v
        elif k.startswith("norm."):
            out["vision_model.post_layernorm." + k.split(".")[1]] = v
        elif k.startswith("blocks."):
            i, rest = k.split(".")[1], ".".join(k.split(".")[2:])
            b = "vision_model.encoder.layers.%s." % i
            if rest.startswith("attn.qkv."):
                kind = rest.split(".")[-1]
                for j, n in enumerate(("q_proj", "k_proj", "v_proj")):
                    out[b + "self_attn.%s.%s" % (n, kind)] = v[j * D:(j + 1) * D]
                continue
            for a, c in (("norm1.", "layer_norm1."), ("norm2.", "layer_norm2."), ("attn.proj.", "self_attn.out_proj."),
                         ("mlp.fc1.", "mlp.fc1."), ("mlp.fc2.", "mlp.fc2.")):
                if rest.startswith(a):
                    out[b + c + rest[len(a):]] = v
    return out


def vit_pytorch(sd, simple):
    out = {}
    perm = np.arange(3 * P * P).reshape(3, P, P).transpose(1, 2, 0).reshape(-1)  # (p1 p2 c) <- (c p1 p2)
    for k, v in sd.items():
        if k == "cls_token":
            if not simple:
                out["cls_token"] = v.reshape(1, D)
        elif k == "pos_embed":
            if not simple:
                out["pos_embedding"] = v.reshape(-1, D)
        elif k == "patch_embed.proj.weight":
            out["to_patch_embedding.2.weight"] = v.reshape(D, -1)[:, perm]
        elif k == "patch_embed.proj.bias":
            out["to_patch_embedding.2.bias"] = v
        elif k.startswith("norm."):
            out["transformer.norm." + k.split(".")[1]] = v
        elif k.startswith("blocks."):
            i, rest = k.split(".")[1], ".".join(k.split(".")[2:])
            b = "transformer.layers.%s." % i
            if rest == "attn.qkv.weight":
                out[b + "0.to_qkv.weight"] = v
            elif rest == "attn.qkv.bias":
                continue
            elif rest.startswith("attn.proj."):
                out[b + ("0.to_out." if simple else "0.to_out.0.") + rest.split(".")[-1]] = v
            elif rest.startswith("norm1."):
                out[b + "0.norm." + rest.split(".")[-1]] = v
            elif rest.startswith("norm2."):
                out[b + "1.net.0." + rest.split(".")[-1]] = v
            elif rest.startswith("mlp.fc1."):
                out[b + "1.net.1." + rest.split(".")[-1]] = v
            elif rest.startswith("mlp.fc2."):
                out[b + ("1.net.3." if simple else "1.net.4.") + rest.split(".")[-1]] = v
    g = np.random.default_rng(1)
    out["to_patch_embedding.1.weight"] = (1 + 0.02 * g.standard_normal(3 * P * P)).astype(np.float32)
    out["to_patch_embedding.1.bias"] = (0.02 * g.standard_normal(3 * P * P)).astype(np.float32)
    out["to_patch_embedding.3.weight"] = (1 + 0.02 * g.standard_normal(D)).astype(np.float32)
    out["to_patch_embedding.3.bias"] = (0.02 * g.standard_normal(D)).astype(np.float32)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    g = np.random.default_rng(a.seed)
    heads = {"num_heads": H}
    plain, r = rng_state(g)
    write_safetensors(os.path.join(a.out, "timm.safetensors"), plain, heads)
    clip = dict(plain, **{"norm_pre.weight": 1 + r(D), "norm_pre.bias": r(D)})
    write_safetensors(os.path.join(a.out, "timm-clip.safetensors"), clip, dict(heads, act="quickgelu"))
    write_safetensors(os.path.join(a.out, "clip.safetensors"), rename(clip, clip_names), dict(act="quickgelu"))
    write_safetensors(os.path.join(a.out, "hf-clip.safetensors"), hf_clip(clip), dict(heads, act="quickgelu"))
    qk = dict(plain)
    for i in range(DEPTH):
        for n in ("q_norm", "k_norm"):
            qk["blocks.%d.attn.%s.weight" % (i, n)] = 1 + r(D // H)
            qk["blocks.%d.attn.%s.bias" % (i, n)] = r(D // H)
    write_safetensors(os.path.join(a.out, "timm-qknorm.safetensors"), qk, heads)
    ls = dict(plain)
    for i in range(DEPTH):
        ls["blocks.%d.ls1.gamma" % i] = 0.5 + r(D)
        ls["blocks.%d.ls2.gamma" % i] = 0.5 + r(D)
    write_safetensors(os.path.join(a.out, "timm-ls.safetensors"), ls, heads)
    gap, _ = rng_state(g, cls=False)
    write_safetensors(os.path.join(a.out, "timm-gap.safetensors"), gap, heads)
    sig = dict(gap, **{"attn_pool.latent": r(1, 1, D), "attn_pool.q.weight": r(D, D), "attn_pool.q.bias": r(D),
                       "attn_pool.kv.weight": r(2 * D, D), "attn_pool.kv.bias": r(2 * D),
                       "attn_pool.proj.weight": r(D, D), "attn_pool.proj.bias": r(D),
                       "attn_pool.norm.weight": 1 + r(D), "attn_pool.norm.bias": r(D),
                       "attn_pool.mlp.fc1.weight": r(MLP, D), "attn_pool.mlp.fc1.bias": r(MLP),
                       "attn_pool.mlp.fc2.weight": r(D, MLP), "attn_pool.mlp.fc2.bias": r(D),
                       "head.weight": r(1000, D), "head.bias": r(1000)})
    write_safetensors(os.path.join(a.out, "timm-siglip.safetensors"), sig, heads)
    hidden = (int(MLP * 2 / 3) + 7) // 8 * 8  # DINOv2's SwiGLU width rule
    sw = {k: v for k, v in plain.items() if ".mlp." not in k}
    sw["register_tokens"] = r(1, 4, D)
    for i in range(DEPTH):
        b = "blocks.%d." % i
        sw.update({b + "mlp.w12.weight": r(2 * hidden, D), b + "mlp.w12.bias": r(2 * hidden),
                   b + "mlp.w3.weight": r(D, hidden), b + "mlp.w3.bias": r(D),
                   b + "ls1.gamma": 0.5 + r(D), b + "ls2.gamma": 0.5 + r(D)})
    write_safetensors(os.path.join(a.out, "dinov2-swiglu.safetensors"), sw, heads)
    # EVA-02 as timm's Eva builds eva02_base_patch14_224 (issue 29), at patch 16 / 224 px to keep ViT-B/16's
    # token count: fused qkv with q_bias / v_bias, EVA-02 RoPE, SwiGLU fc1_g / fc1_x with the sub-LayerNorm
    # mlp.norm, avg pool + fc_norm (no final norm).
    ev_hidden = int(D * 4 * 2 / 3)
    ev = {k: v for k, v in plain.items() if ".mlp." not in k and not k.endswith("attn.qkv.bias") and not k.startswith("norm.")}
    for i in range(DEPTH):
        b = "blocks.%d." % i
        ev.update({b + "attn.q_bias": r(D), b + "attn.v_bias": r(D),
                   b + "mlp.fc1_g.weight": r(ev_hidden, D), b + "mlp.fc1_g.bias": r(ev_hidden),
                   b + "mlp.fc1_x.weight": r(ev_hidden, D), b + "mlp.fc1_x.bias": r(ev_hidden),
                   b + "mlp.norm.weight": 1 + r(ev_hidden), b + "mlp.norm.bias": r(ev_hidden),
                   b + "mlp.fc2.weight": r(D, ev_hidden), b + "mlp.fc2.bias": r(D)})
    ev["fc_norm.weight"], ev["fc_norm.bias"] = 1 + r(D), r(D)
    write_safetensors(os.path.join(a.out, "eva02.safetensors"), ev, dict(heads, architecture="eva02_base_patch14_224"))
    write_safetensors(os.path.join(a.out, "vit-pytorch.safetensors"), vit_pytorch(plain, False), heads)
    write_safetensors(os.path.join(a.out, "simple-vit.safetensors"), vit_pytorch(plain, True),
                      dict(heads, image_size=S))
    write_safetensors(os.path.join(a.out, "cait.safetensors"), cait(plain, r))  # heads from proj_l (H, H)
    # BEiT (issue 29), as beit_base_patch16_224 is released: no absolute pos_embed, a relative position table
    # ((2*14-1)^2 + 3, H) per block, q_bias / v_bias (no key bias), LayerScale gamma_1 / gamma_2, mean pooling
    # + fc_norm (no final norm), a 1000-class head.
    bt = {k: v for k, v in plain.items() if k != "pos_embed" and not k.endswith("attn.qkv.bias") and not k.startswith("norm.")}
    for i in range(DEPTH):
        b = "blocks.%d." % i
        bt.update({b + "attn.q_bias": r(D), b + "attn.v_bias": r(D), b + "gamma_1": 0.1 + r(D), b + "gamma_2": 0.1 + r(D),
                   b + "attn.relative_position_bias_table": r((2 * (S // P) - 1) ** 2 + 3, H, std=1.0)})
    bt.update({"fc_norm.weight": 1 + r(D), "fc_norm.bias": r(D), "head.weight": r(1000, D), "head.bias": r(1000)})
    write_safetensors(os.path.join(a.out, "beit.safetensors"), bt, heads)


def cait(plain, r, ca=2):
    """CaiT names (timm cait.py) at ViT-B size: DEPTH - ca talking-heads self-attention blocks (proj_l / proj_w,
    gamma_1 / gamma_2) and ca class-attention blocks (q / k / v), 12 blocks in all as the plain ViT-B; pos_embed
    over the patches only."""
    sa = DEPTH - ca
    out = {k: v for k, v in plain.items() if not k.startswith("blocks.") or int(k.split(".")[1]) < sa}
    out["pos_embed"] = plain["pos_embed"][:, 1:]
    for i in range(sa):
        b = "blocks.%d." % i
        for n in ("proj_l", "proj_w"):
            out[b + "attn.%s.weight" % n] = (np.eye(H) + r(H, H, std=0.1)).astype(np.float32)
            out[b + "attn.%s.bias" % n] = r(H)
        out[b + "gamma_1"] = 0.5 + r(D)
        out[b + "gamma_2"] = 0.5 + r(D)
    for j in range(ca):
        src, b = "blocks.%d." % (sa + j), "blocks_token_only.%d." % j
        for k, v in plain.items():
            if not k.startswith(src):
                continue
            rest = k[len(src):]
            if rest.startswith("attn.qkv."):
                kind = rest.split(".")[-1]
                for n, part in enumerate(("q", "k", "v")):
                    out[b + "attn.%s.%s" % (part, kind)] = v[n * D:(n + 1) * D]
            else:
                out[b + rest] = v
        out[b + "gamma_1"] = 0.5 + r(D)
        out[b + "gamma_2"] = 0.5 + r(D)
    return out


if __name__ == "__main__":
    main()
