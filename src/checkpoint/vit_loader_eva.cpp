// vit_loader_eva.cpp - timm Eva (timm/models/eva.py: EVA-02, DINOv3 as timm builds them; issue 29): its
// naming scheme, its rotary position settings (from the architecture name and the config's model_args),
// the SwiGLU with separate gate / value projections, and the defaults its files do not hold. And DINOv3 as
// facebookresearch saves it (dinov3/models/vision_transformer.py; issue 44): the same blocks under Meta's names,
// its heads and rotary periods from rope_embed.periods, its masked key bias (qkv.bias_mask).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "checkpoint/vit_loader_internal.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
bool contains(const std::string& s, const char* p) { return s.find(p) != std::string::npos; }

// timm Eva architectures (eva.py's registry): EVA-01 eva_*, EVA-02 eva02_*, DINOv3 vit_*_dinov3*, the SBB /
// ROPE-ViT / Perception Encoder vit_*_rope_* and vit_pe_* models.
bool eva_architecture(const std::string& a) {
  return starts_with(a, "eva_") || starts_with(a, "eva02_") || contains(a, "_dinov3") || contains(a, "_rope_") ||
         starts_with(a, "vit_pe_");
}

// Tensors only timm's Eva has among the timm-named families (BEiT also has q_bias, with a relative position
// table, and is not Eva).
bool eva_tensors(const KeyIndex& idx) {
  if (idx.has("blocks.0.attn.relative_position_bias_table") || idx.has("rel_pos_bias.relative_position_bias_table"))
    return false;
  return idx.has("blocks.0.attn.q_bias") || idx.has("blocks.0.mlp.fc1_g.weight") ||
         idx.has("blocks.0.attn.q_proj.weight") ||
         (idx.has("reg_token") && idx.has("blocks.0.gamma_1") && !idx.has("pos_embed"));
}

// facebookresearch DINOv3 (DinoVisionTransformer) names onto the canonical ones: storage_tokens are the
// registers, SwiGLUFFN's w1 (gate) / w2 / w3 timm's fc1_g / fc1_x / fc2; the rest (norm1, attn.qkv, attn.proj,
// ls1.gamma, norm2, mlp.fc1 / fc2, norm) are the canonical names already.
Scheme dinov3_scheme(const KeyIndex& idx) {
  Scheme sc;
  sc.layout = Layout::Dinov3;
  const bool swiglu = idx.has("blocks.0.mlp.w1.weight");
  sc.name = [swiglu](const std::string& c) {
    if (c == "reg_token") return std::string("storage_tokens");
    const size_t dot = starts_with(c, "blocks.") ? c.find('.', 7) : std::string::npos;
    if (dot == std::string::npos) return c;
    const std::string b = c.substr(0, dot + 1), rest = c.substr(dot + 1);
    if (starts_with(rest, "mlp.fc1_g.")) return b + "mlp.w1." + rest.substr(10);
    if (starts_with(rest, "mlp.fc1_x.")) return b + "mlp.w2." + rest.substr(10);
    if (swiglu && starts_with(rest, "mlp.fc2.")) return b + "mlp.w3." + rest.substr(8);
    return c;
  };
  return sc;
}

}  // namespace

Scheme eva_or(const Scheme& detected, const KeyIndex& idx, const std::optional<std::string>& architecture,
              const std::string& path) {
  if (idx.has("storage_tokens") || idx.has("rope_embed.periods")) return dinov3_scheme(idx);  // facebookresearch's
  const std::string arch = architecture ? *architecture : "";
  // ROPE-ViT / Perception Encoder (timm Eva models whose rotary positions attnmap does not compute) are refused
  // whatever layout their tensors look like (a Perception Encoder's norm_pre reads as timm-clip).
  if (contains(arch, "_rope_") || starts_with(arch, "vit_pe_"))
    throw Error(path + ": architecture " + arch + " is a timm Eva variant whose rotary positions attnmap does not "
                "compute (ROPE-ViT / Perception Encoder: 'xy' grid indexing, grid offsets or learned per-layer "
                "'mixed' frequencies); EVA-02 (eva02_*) and DINOv3 (vit_*_dinov3*) are read");
  if (detected.layout != Layout::Timm && detected.layout != Layout::Deit3) return detected;
  // Tensors only timm's Eva (or a BEiT without its relative table) has, with an architecture that is neither:
  // an unknown or contradicting name cannot say whether the model rotates its queries and keys.
  if (!arch.empty() && !eva_architecture(arch) && eva_tensors(idx) && !starts_with(arch, "beit"))
    throw Error(path + ": the config names architecture " + arch + ", but the tensors are a timm Eva's "
                "(attn.q_bias / v_bias, mlp.fc1_g / fc1_x, q_proj, or registers with gamma_1 and no pos_embed), which "
                "that architecture does not have: whether and how the model rotates its queries and keys (EVA-02 "
                "'cat' RoPE, DINOv3 RoPE, or none as EVA-01) cannot be told. Name the timm architecture the file "
                "was saved from (eva02_*, eva_*, vit_*_dinov3*; beit_* for a BEiT without relative position tables)");
  // An architecture that is not timm Eva's (BEiT: q_bias / v_bias too) is trusted.
  if (!arch.empty() && !eva_architecture(arch)) return detected;
  if (!eva_tensors(idx) && !eva_architecture(arch)) return detected;
  Scheme sc;
  sc.layout = Layout::Eva;
  sc.separate_qkv = idx.has("blocks.0.attn.q_proj.weight");
  sc.name = [](const std::string& c) {
    if (!starts_with(c, "blocks.")) return c;
    const size_t dot = c.find('.', 7);
    if (dot == std::string::npos) return c;
    const std::string b = c.substr(0, dot + 1), rest = c.substr(dot + 1);
    if (rest == "ls1.gamma") return b + "gamma_1";
    if (rest == "ls2.gamma") return b + "gamma_2";
    for (const char* p : {"q", "k", "v"})  // EvaAttention(qkv_fused=False): q_proj / k_proj / v_proj
      if (starts_with(rest, (std::string("attn.") + p + ".").c_str())) return b + "attn." + p + "_proj." + rest.substr(7);
    return c;
  };
  return sc;
}

void eva_defaults(HParams& hp) {
  if (hp.rope == Rope::Dinov3) {
    hp.eps = 1e-5f;
    hp.source["layer_norm_eps"] = "default (timm vit_*_dinov3: norm_layer=partial(LayerNorm, eps=1e-5))";
  } else {
    hp.source["layer_norm_eps"] = "default (timm Eva: LayerNorm eps 1e-6)";
  }
  if (starts_with(hp.architecture, "eva02_") || starts_with(hp.architecture, "eva_")) {
    hp.mean = {0.48145466f, 0.4578275f, 0.40821073f};
    hp.std = {0.26862954f, 0.26130258f, 0.27577711f};
    hp.source["mean"] = hp.source["std"] = "default (timm " + hp.architecture + " pretrained_cfg: OPENAI_CLIP_MEAN / STD)";
  }
}

namespace detail {

// ---- facebookresearch DINOv3 (issue 44 point 3) ----

FileConfig dinov3_config(Loader& ld, const FileConfig& fc, const ModelOverrides& ov, int64_t D) {
  // norm_layer 'rmsnorm' (dinov3/layers/rms_norm.py): a weight and no bias, x / rms(x) * weight
  if (ld.has("blocks.0.norm1.weight") && !ld.has("blocks.0.norm1.bias"))
    throw Error(ld.path() + ": tensor '" + ld.file_name("blocks.0.norm1.weight") + "' has no bias beside it: DINOv3's "
                "norm_layer 'rmsnorm' (RMSNorm), which attnmap does not compute (it reads 'layernorm' / 'layernormbf16')");
  const std::string pn = ld.file_name("rope_embed.periods");
  const Tensor& p = ld.need("rope_embed.periods", "(D_head / 4)");
  if (p.rank() != 1 || dim(p, 0) < 1) throw ld.shape_error("rope_embed.periods", "(D_head / 4)", p.shape);
  const int64_t dh = 4 * dim(p, 0);
  if (D % dh != 0)
    throw Error(ld.path() + ": tensor '" + pn + "' " + shape_str(p.shape) + " holds the periods of heads of width 4 x " +
                std::to_string(dim(p, 0)) + " = " + std::to_string(dh) + ", which does not divide D = " + std::to_string(D));
  const int heads = static_cast<int>(D / dh);
  const std::string why = "inferred from " + pn + " " + shape_str(p.shape) + " (RopePositionEmbedding holds D_head / 4 "
                          "periods: D_head " + std::to_string(dh) + ", D / D_head heads)";
  const std::optional<int> given = ov.num_heads ? ov.num_heads : fc.num_heads;
  if (given && *given != heads)
    throw Error(ld.path() + ": " + (ov.num_heads ? std::string("the command line") : src_of(fc, "num_heads")) + " gives " +
                std::to_string(*given) + " heads, but " + why + " there are " + std::to_string(heads) +
                ": DINOv3 computes its rotary angles per head from these periods");
  FileConfig out = fc;
  if (!given) {
    out.num_heads = heads;
    out.src["num_heads"] = why;
  }
  return out;
}

void take_dinov3_rope(Loader& ld, ViTWeights& w) {
  HParams& hp = w.hp;
  const Floats p = ld.take("rope_embed.periods", {hp.head_dim / 4});
  double worst = 0;  // against the periods of base 100 (every released config) as timm computes them
  for (size_t j = 0; j < p.size(); ++j) {
    if (!(std::isfinite(p[j]) && p[j] > 0))
      throw Error(ld.path() + ": tensor '" + ld.file_name("rope_embed.periods") + "' holds " + std::to_string(p[j]) +
                  " at " + std::to_string(j) + ": periods must be positive and finite");
    const double base = std::pow(100.0f, 2.0f * static_cast<float>(j) / static_cast<float>(hp.head_dim / 2));
    worst = std::max(worst, std::fabs(p[j] - base) / base);
  }
  hp.rope = Rope::Dinov3;
  hp.rope_half = true;         // rope_rotate_half, angles tiled twice (RopePositionEmbedding.forward)
  hp.rope_temperature = 100;   // pos_embed_rope_base of every hub backbone; the stored periods are what is used
  hp.rope_periods.assign(p.begin(), p.end());
  char diff[32];
  std::snprintf(diff, sizeof diff, "%.3g%%", 100 * worst);
  hp.source["rope"] = "facebookresearch DINOv3 RopePositionEmbedding from the stored " + ld.file_name("rope_embed.periods") +
                      " (as the hub's float32 buffer holds them; " +
                      (worst == 0 ? std::string("equal to") : "up to " + std::string(diff) + " off") +
                      " base 100's 100^(2j/(d_k/2)), bfloat16 in the released distilled models): coordinates 2 (i + 0.5) / g "
                      "- 1 per axis (normalize_coords 'separate', every hub backbone), no shift / jitter / rescale "
                      "(eval), rotate-half; class and storage tokens unrotated";
}

void take_dinov3_masks(Loader& ld, const FileConfig& fc, ViTWeights& w) {
  const int64_t n = 3 * w.hp.inner();
  bool masked = false;
  for (int i = 0; i < w.hp.depth; ++i) {
    const std::string m = "blocks." + std::to_string(i) + ".attn.qkv.bias_mask";
    if (i > 0 && ld.has(m) != masked)
      ld.missing(masked ? m : "blocks.0.attn.qkv.bias_mask", shape_str({n}), "mask_k_bias holds for every block");
    masked = ld.has(m);
    if (!masked) continue;
    LinearW& qkv = w.blocks[static_cast<size_t>(i)].qkv;
    if (qkv.bias.empty())
      ld.missing("blocks." + std::to_string(i) + ".attn.qkv.bias", shape_str({n}), "LinearKMaskedBias keeps bias_mask only with a bias");
    const Floats mask = ld.take(m, {n});
    float* b = qkv.bias.mutable_data();  // (3 inner) rows [q; k; v]: F.linear(x, weight, bias * bias_mask)
    for (int64_t j = 0; j < n; ++j) {
      if (!std::isfinite(mask[static_cast<size_t>(j)]))
        throw Error(ld.path() + ": tensor '" + ld.file_name(m) + "' holds " + std::to_string(mask[static_cast<size_t>(j)]) +
                    " at " + std::to_string(j) + " (LinearKMaskedBias fills it with NaN until a state dict is loaded)");
      b[j] *= mask[static_cast<size_t>(j)];
    }
  }
  // prepare_tokens_with_masks: cls_token + 0 * mask_token, which only a non-finite value would change
  auto mt = ld.raw().tensors.find(ld.file_name("mask_token"));
  if (mt != ld.raw().tensors.end())
    for (float v : mt->second.data)
      if (!std::isfinite(v))
        throw Error(ld.path() + ": tensor '" + mt->first + "' holds " + std::to_string(v) + ": DINOv3 adds 0 * mask_token "
                    "to the class token, which is then not a number");
  // The eps is not in the file: 1e-5 for every config with storage tokens (the released ones), 1e-6 for the rest.
  if (!fc.eps && !ld.has("reg_token"))
    throw Error(ld.path() + ": a DINOv3 without storage tokens, whose LayerNorm eps the file does not say: the released "
                "models (4 storage tokens) use norm_layer 'layernormbf16' (eps 1e-5), dinov3's ssl_default_config "
                "'layernorm' (eps 1e-6). Put a config.json {\"layer_norm_eps\": 1e-6} (or 1e-5) beside the file");
}

namespace {

// A model_args value, or the architecture's default `def` (with `why` recorded).
const nlohmann::json* rope_arg(const FileConfig& fc, const char* key) {
  return fc.eva_args.contains(key) && !fc.eva_args.at(key).is_null() ? &fc.eva_args.at(key) : nullptr;
}

[[noreturn]] void bad_arg(const Loader& ld, const FileConfig& fc, const char* key, const char* expected) {
  throw Error(ld.path() + ": " + src_of(fc, key) + " " + key + " = " + fc.eva_args.at(key).dump() + ": expected " +
              expected);
}

// The architecture's own absolute position embedding and register tokens against the file's: an EVA-02 / EVA-01
// has pos_embed and no registers, a DINOv3 registers and no pos_embed (timm's registry; model_args
// use_abs_pos_emb / num_reg_tokens over it). A file that does not fit is refused (timm's strict load would be).
void check_architecture_fits(const Loader& ld, const FileConfig& fc, const std::string& arch, const std::string& said,
                             bool dinov3) {
  bool abs = !dinov3, regs = dinov3;
  if (const nlohmann::json* v = rope_arg(fc, "use_abs_pos_emb"))
    if (v->is_boolean()) abs = v->get<bool>();
  if (const nlohmann::json* v = rope_arg(fc, "num_reg_tokens"))
    if (v->is_number_integer()) regs = v->get<int>() > 0;
  const auto refuse = [&](const char* tensor, bool want) {
    throw Error(ld.path() + ": " + said + " builds a model " + (want ? "with " : "without ") + tensor + ", but the file " +
                (want ? "has none" : "has it") + ": the architecture does not describe these tensors (timm's strict "
                "load refuses them). Name the architecture the file was saved from (" +
                (dinov3 ? "an EVA-02 is eva02_*" : "a DINOv3 is vit_*_dinov3*") + ")");
  };
  if (arch.empty()) return;
  if (ld.has("pos_embed") != abs) refuse("an absolute position embedding (pos_embed)", abs);
  if (ld.has("reg_token") != regs) refuse("register tokens (reg_token)", regs);
}

}  // namespace

void resolve_rope(Loader& ld, const FileConfig& fc, ViTWeights& w) {
  HParams& hp = w.hp;
  if (hp.layout == Layout::Dinov3) return take_dinov3_rope(ld, w);
  if (hp.layout != Layout::Eva) return;
  const std::string arch = fc.architecture ? *fc.architecture : "";
  const std::string said = arch.empty() ? "" : "architecture " + arch + " (" + src_of(fc, "architecture") + ")";
  // Which rope: the architecture's registry entry, then model_args (use_rot_pos_emb, rope_type) over it.
  bool use_rope = false;
  std::string type = "cat";
  if (starts_with(arch, "eva02_")) {
    use_rope = arch.rfind("eva02_enormous", 0) != 0;  // eva02_enormous_patch14_clip_224: abs positions only
  } else if (contains(arch, "_dinov3")) {
    use_rope = true, type = "dinov3";
  } else if (starts_with(arch, "eva_")) {
    use_rope = false;  // EVA-01: absolute positions only
  } else if (!arch.empty() && eva_architecture(arch)) {
    throw Error(ld.path() + ": " + said + " is a timm Eva variant whose rotary positions attnmap does not compute "
                "(ROPE-ViT / Perception Encoder: 'xy' grid indexing, grid offsets or learned per-layer 'mixed' "
                "frequencies); EVA-02 (eva02_*) and DINOv3 (vit_*_dinov3*) are read");
  } else {
    throw Error(ld.path() + ": timm Eva tensors (attn.q_bias / v_bias, mlp.fc1_g / fc1_x, q_proj, or registers "
                "with gamma_1 and no pos_embed) without a config naming the architecture: whether and how the model "
                "rotates its queries and keys (EVA-02 'cat' RoPE, DINOv3 RoPE, or none as EVA-01) is not in its "
                "tensors. Put the config.json timm saves with it (save_config_for_hf, or the hub's) beside the file, "
                "or a config {\"architecture\": \"eva02_tiny_patch14_224\"} (or vit_small_patch16_dinov3, ...). (A BEiT "
                "file would hold relative_position_bias_table tensors; this one has none.)");
  }
  // EvaBlockPostNorm (eva02_enormous_patch14_clip_224, use_post_norm): x + norm1(attn(x)), the same tensor names
  // as the pre-norm block, so only the architecture / model_args can say it.
  const nlohmann::json* post = rope_arg(fc, "use_post_norm");
  if (starts_with(arch, "eva02_enormous") || (post && post->is_boolean() && post->get<bool>()))
    throw Error(ld.path() + ": " + (post ? src_of(fc, "use_post_norm") + " use_post_norm" : said) +
                ": timm's post-norm Eva block (EvaBlockPostNorm: x + norm1(attn(x)), x + norm2(mlp(x))), which "
                "attnmap does not run; its tensors are named as the pre-norm block's");
  check_architecture_fits(ld, fc, arch, said, contains(arch, "_dinov3"));
  if (const nlohmann::json* v = rope_arg(fc, "use_rot_pos_emb")) {
    if (!v->is_boolean()) bad_arg(ld, fc, "use_rot_pos_emb", "true or false");
    use_rope = v->get<bool>();
  }
  if (const nlohmann::json* v = rope_arg(fc, "rope_type")) {
    if (!v->is_string()) bad_arg(ld, fc, "rope_type", "a string");
    type = v->get<std::string>();
  }
  if (!use_rope) {
    hp.source["rope"] = "none (" + (said.empty() ? std::string("config") : said) + ": absolute positions only)";
    return;
  }
  if (type != "cat" && type != "dinov3")
    throw Error(ld.path() + ": rope_type '" + type + "' (" + src_of(fc, "rope_type") +
                "): attnmap computes timm's 'cat' (EVA-02) and 'dinov3' rotary embeddings only");
  if (const nlohmann::json* v = rope_arg(fc, "rope_grid_indexing"))
    if (!v->is_string() || v->get<std::string>() != "ij") bad_arg(ld, fc, "rope_grid_indexing", "\"ij\" (the only grid indexing attnmap computes)");
  if (const nlohmann::json* v = rope_arg(fc, "rope_grid_offset"))
    if (!v->is_number() || v->get<double>() != 0.0) bad_arg(ld, fc, "rope_grid_offset", "0 (the only grid offset attnmap computes)");
  const bool dinov3 = type == "dinov3";
  hp.rope = dinov3 ? Rope::Dinov3 : Rope::EvaCat;
  hp.rope_half = dinov3;  // registry: DINOv3 rope_rotate_half=True, EVA-02 the Eva default False
  hp.rope_temperature = dinov3 ? 100.0f : 10000.0f;
  std::string how = dinov3 ? "timm RotaryEmbeddingDinoV3 (temperature 100, rotate-half)" : "timm RotaryEmbeddingCat (temperature 10000, interleaved)";
  if (const nlohmann::json* v = rope_arg(fc, "rope_rotate_half")) {
    if (!v->is_boolean()) bad_arg(ld, fc, "rope_rotate_half", "true or false");
    hp.rope_half = v->get<bool>();
    how += std::string("; rope_rotate_half ") + (hp.rope_half ? "true" : "false") + " from " + src_of(fc, "rope_rotate_half");
  }
  if (const nlohmann::json* v = rope_arg(fc, "rope_temperature")) {
    if (!v->is_number() || !(v->get<double>() > 0)) bad_arg(ld, fc, "rope_temperature", "a positive number");
    hp.rope_temperature = v->get<float>();
    how += "; rope_temperature " + v->dump() + " from " + src_of(fc, "rope_temperature");
  }
  if (!dinov3) {  // EVA-02: every eva02_* registry entry sets ref_feat_shape=(16, 16); model_args may override
    hp.rope_ref_h = hp.rope_ref_w = 16;
    std::string ref_why = "the eva02_* registry's ref_feat_shape (16, 16)";
    if (const nlohmann::json* v = rope_arg(fc, "ref_feat_shape")) {
      if (v->is_number_integer() && v->get<int>() > 0) {
        hp.rope_ref_h = hp.rope_ref_w = v->get<int>();
      } else if (v->is_array() && v->size() == 2 && (*v)[0].is_number_integer() && (*v)[1].is_number_integer() &&
                 (*v)[0].get<int>() > 0 && (*v)[1].get<int>() > 0) {
        hp.rope_ref_h = (*v)[0].get<int>();
        hp.rope_ref_w = (*v)[1].get<int>();
      } else {
        bad_arg(ld, fc, "ref_feat_shape", "[height, width] in patches");
      }
      ref_why = "ref_feat_shape from " + src_of(fc, "ref_feat_shape");
    }
    how += "; grid coordinates scaled to ref_feat_shape " + std::to_string(hp.rope_ref_h) + "x" +
           std::to_string(hp.rope_ref_w) + " (" + ref_why + ")";
  }
  if (hp.head_dim % 4 != 0)
    throw Error(ld.path() + ": rotary position embedding needs d_k divisible by 4, found " + std::to_string(hp.head_dim));
  hp.source["rope"] = how + (said.empty() ? "" : ", by " + said);
}

LinearW take_split_swiglu(Loader& ld, const std::string& b, int64_t D, int64_t& M) {
  const Tensor& g = ld.need(b + "mlp.fc1_g.weight", "(M, D)");
  if (g.rank() != 2 || dim(g, 1) != D) throw ld.shape_error(b + "mlp.fc1_g.weight", "(M, " + std::to_string(D) + ")", g.shape);
  M = dim(g, 0);
  const LinearW gate = take_linear(ld, b + "mlp.fc1_g", M, D), x = take_linear(ld, b + "mlp.fc1_x", M, D);
  if (gate.bias.empty() != x.bias.empty())
    ld.missing(b + (gate.bias.empty() ? "mlp.fc1_g.bias" : "mlp.fc1_x.bias"), shape_str({M}), "the gate and value biases come together");
  LinearW l;
  l.out = static_cast<int>(2 * M);
  l.in = static_cast<int>(D);
  l.weight = gate.weight;  // rows [gate; x]: swiglu_forward computes silu(first half) * second half
  l.weight.insert_back(x.weight.begin(), x.weight.end());
  if (!gate.bias.empty()) {
    l.bias = gate.bias;
    l.bias.insert_back(x.bias.begin(), x.bias.end());
  }
  return l;
}

EvaHead eva_head(const FileConfig& fc, const std::string& arch, const Pool* pool) {
  EvaHead h;
  const bool clip = (starts_with(arch, "eva02_") || starts_with(arch, "eva_")) && contains(arch, "_clip_");
  const bool dinov3 = contains(arch, "_dinov3");
  h.pool = pool ? *pool : clip ? Pool::ClassToken : Pool::MeanPatches;
  h.why = clip     ? "eva.py:1996-2078: eva_giant / eva02_*_clip_* pass global_pool='token'"
          : dinov3 ? "eva.py:2762-3091: vit_*_dinov3* keep Eva's global_pool='avg' with use_fc_norm=False"
                   : "eva.py:540: Eva's global_pool='avg'";
  h.fc_norm = !dinov3 && h.pool == Pool::MeanPatches;  // eva.py:644-647: activate_fc_norm = global_pool == 'avg'
  if (const nlohmann::json* v = rope_arg(fc, "use_fc_norm"))
    if (v->is_boolean()) h.fc_norm = v->get<bool>();
  h.norm = !h.fc_norm;  // eva.py:648-651: activate_post_norm = not activate_fc_norm
  if (const nlohmann::json* v = rope_arg(fc, "use_post_transformer_norm"))
    if (v->is_boolean()) h.norm = v->get<bool>();
  return h;
}

Pool eva_default_pool(const Loader& ld, const FileConfig& fc, const ViTWeights& w, bool check, std::string& why) {
  const std::string& arch = *fc.architecture;
  const EvaHead h = eva_head(fc, arch, nullptr);
  why = "timm's default for architecture " + arch + " (" + src_of(fc, "architecture") + "; " + h.why + ")";
  const bool has_norm = w.norm.present(), has_fc = w.fc_norm.present();
  if (!check || !ld.has("head.weight") || (!has_norm && !has_fc) || (has_norm == h.norm && has_fc == h.fc_norm)) return h.pool;
  const auto list = [&](bool norm, bool fc_norm) {
    return norm && fc_norm ? "norm and fc_norm" : norm ? "norm, no fc_norm" : fc_norm ? "fc_norm, no norm" : "neither norm nor fc_norm";
  };
  throw Error(ld.path() + ": the config gives no global_pool and the file's final LayerNorms (" + list(has_norm, has_fc) +
              ") are not what timm builds for " + arch + " by default (" + list(h.norm, h.fc_norm) + "; " + h.why +
              "): the model was saved with another global_pool, and which token the classifier reads is not in the "
              "file. Give global_pool in its config.json (timm saves it there) or " + setting_ref("pool") + " cls|mean");
}

}  // namespace detail
}  // namespace attnmap
