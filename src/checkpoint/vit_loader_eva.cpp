// vit_loader_eva.cpp - timm Eva (timm/models/eva.py: EVA-02, DINOv3 as timm builds them; issue 29): its
// naming scheme, its rotary position settings (from the architecture name and the config's model_args),
// the SwiGLU with separate gate / value projections, and the defaults its files do not hold.
#include <algorithm>

#include "checkpoint/vit_loader_internal.hpp"
#include "core/error.hpp"

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

}  // namespace

Scheme eva_or(const Scheme& detected, const KeyIndex& idx, const std::optional<std::string>& architecture,
              const std::string& path) {
  if (idx.has("storage_tokens") || idx.has("rope_embed.periods"))
    throw Error(path + ": facebookresearch DINOv3 names (storage_tokens, rope_embed.periods), which attnmap does not "
                "read yet; timm's vit_*_dinov3 checkpoints of the same models (timm/ on the Hugging Face hub, or "
                "timm's checkpoint_filter_fn) are read");
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

}  // namespace detail
}  // namespace attnmap
