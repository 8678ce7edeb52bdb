#include "checkpoint/schemes.hpp"

#include <cctype>

#include "core/error.hpp"

namespace attnmap {

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// Replaces the leading `from` of `s` by `to`; true when it matched.
bool swap_prefix(std::string& s, const std::string& from, const std::string& to) {
  if (!starts_with(s, from)) return false;
  s = to + s.substr(from.size());
  return true;
}

// Splits "blocks.{i}.rest" into i and rest; false when `canon` is not a block tensor.
bool split_block(const std::string& canon, std::string& idx, std::string& rest) {
  if (!starts_with(canon, "blocks.")) return false;
  const size_t dot = canon.find('.', 7);
  if (dot == std::string::npos) return false;
  idx = canon.substr(7, dot - 7);
  rest = canon.substr(dot + 1);
  return true;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The name without wrapper prefixes; `cut` receives what was removed.
std::string strip_wrappers(const std::string& name, std::string& cut) {
  std::string k = name;
  cut.clear();
  for (bool again = true; again;) {
    again = false;
    for (const char* p : {"module.", "backbone.", "model."}) {
      const std::string ps = p;
      if (starts_with(k, ps) && k.size() > ps.size()) {
        cut += ps;
        k = k.substr(ps.size());
        again = true;
      }
    }
  }
  return k;
}

// facebookresearch DINOv2 BlockChunk: "blocks.C.I.rest" holds block I (a global index) -> "blocks.I.rest".
std::string unchunk(const std::string& k) {
  std::string idx, rest;
  if (!split_block(k, idx, rest) || !all_digits(idx)) return k;
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || !all_digits(rest.substr(0, dot))) return k;
  return "blocks." + rest;
}

// ---- the schemes ----------------------------------------------------------------------------------------

// torchvision.models.VisionTransformer (torchvision/models/vision_transformer.py).
Scheme torchvision_scheme(const KeyIndex& idx) {
  Scheme sc;
  sc.layout = Layout::Torchvision;
  const bool old_mlp = idx.has("encoder.layers.encoder_layer_0.mlp.linear_1.weight");
  sc.name = [old_mlp](const std::string& c) {
    std::string idx_s, rest, s = c;
    if (split_block(c, idx_s, rest)) {
      const std::string b = "encoder.layers.encoder_layer_" + idx_s + ".";
      if (swap_prefix(rest, "norm1.", "ln_1.") || swap_prefix(rest, "norm2.", "ln_2.") ||
          swap_prefix(rest, "attn.proj.", "self_attention.out_proj.") ||
          swap_prefix(rest, "mlp.fc1.", old_mlp ? "mlp.linear_1." : "mlp.0.") ||
          swap_prefix(rest, "mlp.fc2.", old_mlp ? "mlp.linear_2." : "mlp.3."))
        return b + rest;
      if (rest == "attn.qkv.weight") return b + "self_attention.in_proj_weight";
      if (rest == "attn.qkv.bias") return b + "self_attention.in_proj_bias";
      return b + "torchvision:" + rest;
    }
    if (c == "cls_token") return std::string("class_token");
    if (c == "pos_embed") return std::string("encoder.pos_embedding");
    if (swap_prefix(s, "patch_embed.proj.", "conv_proj.") || swap_prefix(s, "norm.", "encoder.ln.") ||
        swap_prefix(s, "head.", "heads.head."))
      return s;
    return "torchvision:" + c;  // no such tensor in this layout
  };
  return sc;
}

// Hugging Face ViT / DeiT / Dinov2 (models/{vit,deit,dinov2,dinov2_with_registers}/modeling_*.py): `m` is
// the base model's attribute ("vit.", "deit.", "dinov2.", ...) or "" for a bare base model.
Scheme hf_scheme(Layout layout, const std::string& m, const KeyIndex& keys) {
  Scheme sc;
  sc.layout = layout;
  sc.separate_qkv = true;
  const bool dinov2 = layout == Layout::HfDinov2;
  // DeiTForImageClassificationWithTeacher: cls_classifier (+ distillation_classifier); without: classifier.
  const std::string head = keys.has("cls_classifier.weight") ? "cls_classifier." : "classifier.";
  sc.name = [m, dinov2, layout, head](const std::string& c) {
    std::string idx, rest, s = c;
    if (split_block(c, idx, rest)) {
      const std::string b = m + "encoder.layer." + idx + ".";
      if (swap_prefix(rest, "attn.q.", "attention.attention.query.") ||
          swap_prefix(rest, "attn.k.", "attention.attention.key.") ||
          swap_prefix(rest, "attn.v.", "attention.attention.value.") ||
          swap_prefix(rest, "attn.proj.", "attention.output.dense."))
        return b + rest;
      if (dinov2) {
        if (swap_prefix(rest, "norm1.", "norm1.") || swap_prefix(rest, "norm2.", "norm2.") ||
            swap_prefix(rest, "mlp.fc1.", "mlp.fc1.") || swap_prefix(rest, "mlp.fc2.", "mlp.fc2.") ||
            swap_prefix(rest, "mlp.w12.", "mlp.weights_in.") || swap_prefix(rest, "mlp.w3.", "mlp.weights_out."))
          return b + rest;
        if (rest == "ls1.gamma") return b + "layer_scale1.lambda1";
        if (rest == "ls2.gamma") return b + "layer_scale2.lambda1";
      } else if (swap_prefix(rest, "norm1.", "layernorm_before.") || swap_prefix(rest, "norm2.", "layernorm_after.") ||
                 swap_prefix(rest, "mlp.fc1.", "intermediate.dense.") || swap_prefix(rest, "mlp.fc2.", "output.dense.")) {
        return b + rest;
      }
      return b + "hf:" + rest;
    }
    if (c == "cls_token") return m + "embeddings.cls_token";
    if (c == "dist_token") return m + "embeddings.distillation_token";
    if (c == "register_tokens") return m + "embeddings.register_tokens";
    if (c == "pos_embed") return m + "embeddings.position_embeddings";
    if (swap_prefix(s, "patch_embed.proj.", "embeddings.patch_embeddings.projection.") || swap_prefix(s, "norm.", "layernorm."))
      return m + s;
    if (layout == Layout::HfDeit && (swap_prefix(s, "head.", head) || swap_prefix(s, "head_dist.", "distillation_classifier.")))
      return s;
    if (layout == Layout::HfVit && swap_prefix(s, "head.", "classifier.")) return s;
    return m + "hf:" + c;
  };
  return sc;
}

// Hugging Face BeitModel / BeitForImageClassification (models/beit/modeling_beit.py, issue 44) onto the beit
// layout's canonical names: `m` is "beit.", "data2vec_vision." (Data2VecVision*, the same modules) or "" (a bare
// BeitModel). LayerScale lambda_1 / lambda_2; the relative position table per layer
// (attention.attention.relative_position_bias.*) or shared (encoder.relative_position_bias.*), each with the
// relative_position_index buffer files of transformers before 4.31 hold; use_mean_pooling's pooler.layernorm is
// timm's fc_norm, layernorm (use_mean_pooling false) the final norm; the classifier is outside `m`.
Scheme hf_beit_scheme(const std::string& m) {
  Scheme sc;
  sc.layout = Layout::HfBeit;
  sc.separate_qkv = true;
  sc.name = [m](const std::string& c) {
    std::string idx, rest, s = c;
    const std::string rel = "attention.attention.relative_position_bias.";
    if (split_block(c, idx, rest)) {
      const std::string b = m + "encoder.layer." + idx + ".";
      if (swap_prefix(rest, "norm1.", "layernorm_before.") || swap_prefix(rest, "norm2.", "layernorm_after.") ||
          swap_prefix(rest, "attn.q.", "attention.attention.query.") ||
          swap_prefix(rest, "attn.k.", "attention.attention.key.") ||
          swap_prefix(rest, "attn.v.", "attention.attention.value.") ||
          swap_prefix(rest, "attn.proj.", "attention.output.dense.") ||
          swap_prefix(rest, "mlp.fc1.", "intermediate.dense.") || swap_prefix(rest, "mlp.fc2.", "output.dense.") ||
          swap_prefix(rest, "attn.relative_position_", rel + "relative_position_"))
        return b + rest;
      if (rest == "ls1.gamma") return b + "lambda_1";
      if (rest == "ls2.gamma") return b + "lambda_2";
      return b + "hf:" + rest;
    }
    if (c == "cls_token") return m + "embeddings.cls_token";
    if (c == "pos_embed") return m + "embeddings.position_embeddings";
    if (swap_prefix(s, "patch_embed.proj.", "embeddings.patch_embeddings.projection.") ||
        swap_prefix(s, "rel_pos_bias.", "encoder.relative_position_bias.") || swap_prefix(s, "norm.", "layernorm.") ||
        swap_prefix(s, "fc_norm.", "pooler.layernorm."))
      return m + s;
    if (swap_prefix(s, "head.", "classifier.")) return s;
    return m + "hf:" + c;
  };
  return sc;
}

// The base-model attribute of a Hugging Face BEiT file ("beit.", "data2vec_vision.", or "" for a bare BeitModel,
// told from a ViTModel by BEiT's own tensors); nullopt when the file is none.
std::optional<std::string> hf_beit_prefix(const KeyIndex& idx) {
  for (const char* m : {"beit.", "data2vec_vision."})
    if (idx.has(std::string(m) + "embeddings.patch_embeddings.projection.weight")) return std::string(m);
  if (!idx.has("embeddings.patch_embeddings.projection.weight")) return std::nullopt;
  const std::string l0 = "encoder.layer.0.";
  if (idx.has(l0 + "lambda_1") || idx.has(l0 + "attention.attention.relative_position_bias.relative_position_bias_table") ||
      idx.has("encoder.relative_position_bias.relative_position_bias_table") || idx.has("pooler.layernorm.weight") ||
      (idx.has(l0 + "attention.attention.query.bias") && !idx.has(l0 + "attention.attention.key.bias")))
    return std::string();
  return std::nullopt;
}

// A Swin Transformer (timm swin_transformer(_v2).py `layers.S.blocks.B.*`, Hugging Face Swin / Swinv2
// `swin.encoder.layers.S.blocks.B.*`): the tensor that tells it, "" when the file is none.
std::string swin_tell(const KeyIndex& idx) {
  for (const char* n : {"layers.0.blocks.0.attn.relative_position_bias_table", "layers.0.blocks.0.norm1.weight",
                        "swin.encoder.layers.0.blocks.0.layernorm_before.weight",
                        "swinv2.encoder.layers.0.blocks.0.layernorm_before.weight",
                        "encoder.layers.0.blocks.0.layernorm_before.weight"})
    if (idx.has(n)) return n;
  return "";
}

// Hugging Face CLIPVisionModel (models/clip/modeling_clip.py); `m` is "vision_model." (CLIPVisionModel,
// CLIPModel) or "" (CLIPVisionTransformer).
// A block's canonical name `c` as Hugging Face's CLIP and SigLIP encoders name it (CLIPEncoderLayer,
// SiglipEncoderLayer: the same names) into `out`; false when `c` is no block's.
bool hf_encoder_block_name(const std::string& m, const std::string& c, std::string& out) {
  std::string idx, rest;
  if (!split_block(c, idx, rest)) return false;
  const std::string b = m + "encoder.layers." + idx + ".";
  if (swap_prefix(rest, "norm1.", "layer_norm1.") || swap_prefix(rest, "norm2.", "layer_norm2.") ||
      swap_prefix(rest, "attn.q.", "self_attn.q_proj.") || swap_prefix(rest, "attn.k.", "self_attn.k_proj.") ||
      swap_prefix(rest, "attn.v.", "self_attn.v_proj.") || swap_prefix(rest, "attn.proj.", "self_attn.out_proj.") ||
      swap_prefix(rest, "mlp.fc1.", "mlp.fc1.") || swap_prefix(rest, "mlp.fc2.", "mlp.fc2."))
    out = b + rest;
  else
    out = b + "hf:" + rest;
  return true;
}

Scheme hf_clip_scheme(const std::string& m) {
  Scheme sc;
  sc.layout = Layout::HfClip;
  sc.separate_qkv = true;
  sc.name = [m](const std::string& c) {
    std::string s = c, block;
    if (hf_encoder_block_name(m, c, block)) return block;
    if (c == "cls_token") return m + "embeddings.class_embedding";
    if (c == "pos_embed") return m + "embeddings.position_embedding.weight";
    if (swap_prefix(s, "patch_embed.proj.", "embeddings.patch_embedding.") || swap_prefix(s, "norm_pre.", "pre_layrnorm.") ||
        swap_prefix(s, "norm.", "post_layernorm."))
      return m + s;
    return m + "hf:" + c;
  };
  return sc;
}

// Hugging Face SiglipVisionModel / SiglipModel's vision tower (models/siglip/modeling_siglip.py), read as timm's
// vit_*_siglip_* (the same model: no class token, post_layernorm is timm's final norm, and the MAP head
// SiglipMultiheadAttentionPoolingHead is timm's AttentionPoolLatent with nn.MultiheadAttention's fused in_proj,
// the canonical attn_pool.in_proj.*, which take_attn_pool splits into q = rows [0, D) and kv = rows [D, 3D)).
// `m` is "vision_model." (SiglipVisionModel, SiglipModel) or "" (SiglipVisionTransformer).
Scheme hf_siglip_scheme(const std::string& m) {
  Scheme sc;
  sc.layout = Layout::TimmSiglip;
  sc.separate_qkv = true;
  sc.act = Activation::GeluTanh;
  sc.act_why = "default (Hugging Face SiglipVisionConfig hidden_act gelu_pytorch_tanh: no config says otherwise)";
  sc.name = [m](const std::string& c) {
    std::string s = c, block;
    if (hf_encoder_block_name(m, c, block)) return block;
    if (c == "pos_embed") return m + "embeddings.position_embedding.weight";
    if (c == "attn_pool.latent") return m + "head.probe";
    if (c == "attn_pool.in_proj.weight") return m + "head.attention.in_proj_weight";
    if (c == "attn_pool.in_proj.bias") return m + "head.attention.in_proj_bias";
    if (swap_prefix(s, "patch_embed.proj.", "embeddings.patch_embedding.") || swap_prefix(s, "norm.", "post_layernorm.") ||
        swap_prefix(s, "attn_pool.proj.", "head.attention.out_proj.") || swap_prefix(s, "attn_pool.norm.", "head.layernorm.") ||
        swap_prefix(s, "attn_pool.mlp.", "head.mlp."))
      return m + s;
    return m + "hf:" + c;
  };
  return sc;
}

// OpenAI CLIP clip/model.py VisionTransformer and OpenCLIP open_clip/transformer.py VisionTransformer;
// `v` is "visual." inside a whole CLIP model, "" for the visual tower alone.
Scheme clip_scheme(const std::string& v) {
  Scheme sc;
  sc.layout = Layout::Clip;
  sc.name = [v](const std::string& c) {
    std::string idx, rest, s = c;
    if (split_block(c, idx, rest)) {
      const std::string b = v + "transformer.resblocks." + idx + ".";
      if (swap_prefix(rest, "norm1.", "ln_1.") || swap_prefix(rest, "norm2.", "ln_2.") ||
          swap_prefix(rest, "attn.proj.", "attn.out_proj.") || swap_prefix(rest, "mlp.fc1.", "mlp.c_fc.") ||
          swap_prefix(rest, "mlp.fc2.", "mlp.c_proj."))
        return b + rest;
      if (rest == "attn.qkv.weight") return b + "attn.in_proj_weight";
      if (rest == "attn.qkv.bias") return b + "attn.in_proj_bias";
      if (rest == "ls1.gamma") return b + "ls_1.gamma";
      if (rest == "ls2.gamma") return b + "ls_2.gamma";
      return b + "clip:" + rest;
    }
    if (c == "cls_token") return v + "class_embedding";
    if (c == "pos_embed") return v + "positional_embedding";
    if (swap_prefix(s, "patch_embed.proj.", "conv1.") || swap_prefix(s, "norm_pre.", "ln_pre.") ||
        swap_prefix(s, "norm.", "ln_post."))
      return v + s;
    return v + "clip:" + c;
  };
  return sc;
}

// lucidrains/vit-pytorch vit.py ViT / simple_vit.py SimpleViT: to_patch_embedding = (Rearrange, LayerNorm,
// Linear, LayerNorm); transformer.layers.i = (Attention with its own norm, FeedForward whose net starts
// with a LayerNorm); transformer.norm; mlp_head (ViT) / linear_head (SimpleViT).
Scheme vit_pytorch_scheme(const KeyIndex& idx, Layout layout) {
  Scheme sc;
  sc.layout = layout;
  // FeedForward.net: (LayerNorm, Linear, GELU, Dropout, Linear, Dropout) in ViT, without the Dropouts in SimpleViT.
  const std::string fc2 = idx.has("transformer.layers.0.1.net.4.weight") ? "net.4." : "net.3.";
  const std::string head = layout == Layout::SimpleVit ? "linear_head." : "mlp_head.";
  // Attention.to_out: Sequential(Linear, Dropout) in ViT, a bare Linear (no bias) in SimpleViT.
  const std::string to_out = idx.has("transformer.layers.0.0.to_out.weight") ? "0.to_out." : "0.to_out.0.";
  sc.name = [fc2, head, to_out](const std::string& c) {
    std::string idx_s, rest, s = c;
    if (split_block(c, idx_s, rest)) {
      const std::string b = "transformer.layers." + idx_s + ".";
      if (swap_prefix(rest, "norm1.", "0.norm.") || swap_prefix(rest, "attn.proj.", to_out) ||
          swap_prefix(rest, "norm2.", "1.net.0.") || swap_prefix(rest, "mlp.fc1.", "1.net.1.") ||
          swap_prefix(rest, "mlp.fc2.", "1." + fc2))
        return b + rest;
      if (rest == "attn.qkv.weight") return b + "0.to_qkv.weight";
      return b + "vit-pytorch:" + rest;
    }
    if (c == "cls_token") return std::string("cls_token");
    if (c == "pos_embed") return std::string("pos_embedding");
    if (swap_prefix(s, "patch_norm_in.", "to_patch_embedding.1.") || swap_prefix(s, "patch_embed.proj.", "to_patch_embedding.2.") ||
        swap_prefix(s, "patch_norm_out.", "to_patch_embedding.3.") || swap_prefix(s, "norm.", "transformer.norm.") ||
        swap_prefix(s, "head.", head))
      return s;
    return "vit-pytorch:" + c;
  };
  return sc;
}

// timm and the families that kept its names: DeiT-III's and BEiT's LayerScale is gamma_1 / gamma_2.
Scheme timm_scheme(Layout layout) {
  Scheme sc;
  sc.layout = layout;
  if (layout == Layout::Deit3 || layout == Layout::Beit) {
    sc.name = [](const std::string& c) {
      std::string idx, rest;
      if (split_block(c, idx, rest)) {
        if (rest == "ls1.gamma") return "blocks." + idx + ".gamma_1";
        if (rest == "ls2.gamma") return "blocks." + idx + ".gamma_2";
      }
      return c;
    };
  }
  return sc;
}

Layout timm_family(const KeyIndex& idx) {
  if (idx.has("decoder_embed.weight") || idx.has("decoder_pred.weight")) return Layout::Mae;
  if (idx.has("register_tokens") || idx.has("mask_token") || idx.has("blocks.0.mlp.w12.weight")) return Layout::Dinov2;
  // CaiT before DeiT-III: its blocks carry gamma_1 / gamma_2 too.
  if (idx.has("blocks_token_only.0.norm1.weight") || idx.has("blocks.0.attn.proj_l.weight")) return Layout::Cait;
  // BEiT (issue 29): a relative position table, shared or per block. (A BEiT without one reads as timm / deit3:
  // its q_bias / v_bias are read by every timm-named layout.)
  if (idx.has("blocks.0.attn.relative_position_bias_table") || idx.has("rel_pos_bias.relative_position_bias_table"))
    return Layout::Beit;
  if (idx.has("blocks.0.gamma_1") || idx.has("blocks.0.gamma_2")) return Layout::Deit3;
  if (idx.has("norm_pre.weight")) return Layout::TimmClip;
  if (idx.has("attn_pool.latent") && !idx.has("cls_token")) return Layout::TimmSiglip;
  return Layout::Timm;
}

// A whole OpenCLIP model whose image tower is a timm trunk (open_clip timm_model.py TimmModel, `visual.trunk.*`;
// ViT-B-16-SigLIP and the other SigLIP configs: timm_model_name vit_*_siglip_*, timm_proj none): the trunk's timm
// names under "visual.trunk.". Its text tower (`text.*`), logit_scale and logit_bias are the timm-siglip layout's
// ignored tensors (handed over for texts). Other timm trunks are refused: save the tower alone.
Scheme open_clip_trunk_scheme(const KeyIndex& idx, const std::string& path) {
  KeyIndex sub;
  for (const auto& kv : idx.names)
    if (starts_with(kv.first, "visual.trunk.")) sub.names[kv.first.substr(13)] = kv.second;
  const Layout l = timm_family(sub);
  if (l != Layout::TimmSiglip)
    throw Error(path + ": an OpenCLIP model with a timm image tower ('visual.trunk.*') that is not a SigLIP ViT "
                "(attn_pool.latent without cls_token): save the tower alone (model.visual.trunk.state_dict()) and "
                "pass that file");
  Scheme sc = timm_scheme(l);
  sc.name = [](const std::string& c) { return "visual.trunk." + c; };
  return sc;
}

}  // namespace

KeyIndex index_keys(const RawWeights& raw) {
  KeyIndex idx;
  bool student = false, teacher = false;
  for (const auto& kv : raw.tensors) {
    std::string cut;
    const std::string k = strip_wrappers(kv.first, cut);
    student = student || starts_with(k, "student.");
    teacher = teacher || starts_with(k, "teacher.");
  }
  const bool pick_teacher = student && teacher;
  bool first = true;
  auto add = [&](std::map<std::string, std::string>& into, const std::string& name) {
    std::string cut;
    std::string k = strip_wrappers(name, cut);
    if (pick_teacher && starts_with(k, "student.")) {
      idx.set_aside[name] = "the student of a DINO / DINOv2 training state dict: its teacher is drawn (as DINO's "
                            "visualize_attention.py does)";
      return;
    }
    if (pick_teacher && starts_with(k, "teacher.")) {
      std::string inner;
      k = strip_wrappers(k.substr(8), inner);
      cut += "teacher." + inner;
    }
    k = unchunk(k);
    if (first) idx.stripped = cut, first = false;
    auto ins = into.emplace(k, name);
    if (!ins.second)
      throw Error(raw.path + ": tensor '" + name + "' and tensor '" + ins.first->second + "' are both '" + k +
                  "' once the wrapper prefixes (module. / backbone. / model.) are removed");
  };
  for (const auto& kv : raw.tensors) add(idx.names, kv.first);
  for (const auto& kv : raw.skipped) add(idx.skipped, kv.first);
  return idx;
}

Scheme detect_scheme(const KeyIndex& idx, const std::string& path) {
  // Hugging Face SigLIP before CLIP, whose embeddings have the same names: its MAP head's probe, or (a tower
  // saved with vision_use_head false, e.g. PaliGemma's) no class embedding and no pre-LayerNorm.
  for (const char* m : {"vision_model.", ""}) {
    const std::string ms = m;
    if (idx.has(ms + "embeddings.patch_embedding.weight") &&
        (idx.has(ms + "head.probe") || (!idx.has(ms + "embeddings.class_embedding") && !idx.has(ms + "pre_layrnorm.weight"))))
      return hf_siglip_scheme(m);
  }
  // Families attnmap knows but does not read: said by name rather than as a missing tensor.
  if (idx.has("visual.layer1.0.conv1.weight") || idx.has("layer1.0.conv1.weight") || idx.has("visual.attnpool.c_proj.weight"))
    throw Error(path + ": a ResNet (e.g. OpenAI CLIP RN50's visual tower), not a Vision Transformer: attnmap draws "
                "ViT attention");
  if (const std::string swin = swin_tell(idx); !swin.empty())
    throw Error(path + ": a Swin Transformer ('" + swin + "'): windowed attention without a global token; not read "
                "(attnmap draws the attention of Vision Transformers over all patches)");
  for (const char* m : {"vision_model.", ""})
    if (idx.has(std::string(m) + "embeddings.patch_embedding.weight")) return hf_clip_scheme(m);
  if (const std::optional<std::string> m = hf_beit_prefix(idx)) return hf_beit_scheme(*m);
  for (const char* m : {"", "vit.", "deit.", "dinov2.", "dinov2_with_registers."}) {
    const std::string ms = m;
    if (!idx.has(ms + "embeddings.patch_embeddings.projection.weight")) continue;
    Layout l = Layout::HfVit;
    if (ms == "deit." || idx.has(ms + "embeddings.distillation_token")) l = Layout::HfDeit;
    if (starts_with(ms, "dinov2") || idx.has(ms + "encoder.layer.0.layer_scale1.lambda1") ||
        idx.has(ms + "embeddings.register_tokens"))
      l = Layout::HfDinov2;
    return hf_scheme(l, ms, idx);
  }
  if (idx.has("conv_proj.weight") || idx.has("class_token")) return torchvision_scheme(idx);
  if (idx.has("visual.conv1.weight") || idx.has("visual.class_embedding")) return clip_scheme("visual.");
  if (idx.has("conv1.weight") || idx.has("class_embedding")) return clip_scheme("");
  if (idx.has("to_patch_embedding.2.weight") || idx.has("transformer.layers.0.0.to_qkv.weight"))
    return vit_pytorch_scheme(idx, idx.has("cls_token") ? Layout::VitPytorch : Layout::SimpleVit);
  if (idx.has("patch_embed.proj.weight") || idx.has("cls_token")) return timm_scheme(timm_family(idx));
  if (idx.has("visual.trunk.patch_embed.proj.weight")) return open_clip_trunk_scheme(idx, path);
  throw Error(path +
              ": unknown weights layout: none of 'patch_embed.proj.weight' (timm / DINO / DeiT / DINOv2 / MAE), "
              "'embeddings.patch_embeddings.projection.weight' (Hugging Face ViT / DeiT / Dinov2), "
              "'vision_model.embeddings.patch_embedding.weight' (Hugging Face CLIP), 'conv1.weight' or "
              "'visual.conv1.weight' (OpenAI CLIP / OpenCLIP), 'conv_proj.weight' (torchvision), "
              "'to_patch_embedding.2.weight' (vit-pytorch), 'W_Q' (seed)");
}

}  // namespace attnmap
