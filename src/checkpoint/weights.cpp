#include "checkpoint/weights.hpp"

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "checkpoint/weights_hf.hpp"
#include "checkpoint/weights_pth.hpp"
#include "checkpoint/weights_safetensors.hpp"

#include "core/error.hpp"

namespace attnmap {

namespace {

using nlohmann::json;

// How a layout names the canonical (timm) tensors: canonical name -> the name in the file.
struct Scheme {
  std::string layout = "timm";
  bool separate_qkv = false;  // Hugging Face: attn.q / attn.k / attn.v instead of a fused attn.qkv
  std::function<std::string(const std::string&)> name = [](const std::string& c) { return c; };
};

// Looks tensors up by canonical name through the layout's scheme, checks shapes, remembers which keys were
// used. Messages name the tensor as it is in the file (with any stripped module./backbone./model. prefix).
class Loader {
 public:
  Loader(const RawWeights& raw, const Scheme& scheme, std::string stripped)
      : raw_(raw), scheme_(scheme), stripped_(std::move(stripped)) {}

  std::string file_name(const std::string& canon) const { return stripped_ + scheme_.name(canon); }

  const Tensor* find(const std::string& canon) {
    auto it = raw_.tensors.find(scheme_.name(canon));
    if (it == raw_.tensors.end()) return nullptr;
    used_.insert(it->first);
    return &it->second;
  }
  /// True when the file has the tensor, also in a dtype attnmap skips (safetensors I32, BOOL, FP8): taking
  /// it then names that dtype, so an optional tensor is never silently treated as absent.
  bool has(const std::string& canon) const {
    return raw_.tensors.count(scheme_.name(canon)) != 0 || raw_.skipped.count(file_name(canon)) != 0;
  }

  const Tensor& need(const std::string& canon, const std::string& expected) {
    const Tensor* t = find(canon);
    if (!t) {
      auto sk = raw_.skipped.find(file_name(canon));
      if (sk != raw_.skipped.end())
        throw Error(raw_.path + ": tensor '" + file_name(canon) + "' has dtype " + sk->second +
                    ", which attnmap does not read (expected F32, F16, BF16 or F64 of shape " + expected + ")");
      missing(canon, expected);
    }
    return *t;
  }

  /// The tensor's data, which must have exactly `shape` (a view of the file's mapping stays a view).
  Floats take(const std::string& canon, const std::vector<int64_t>& shape) {
    const Tensor& t = need(canon, shape_str(shape));
    if (t.shape != shape) throw shape_error(canon, shape_str(shape), t.shape);
    return t.data;
  }
  /// Optional tensor of exactly `shape`; empty when absent.
  Floats take_opt(const std::string& canon, const std::vector<int64_t>& shape) {
    if (!has(canon)) return {};
    return take(canon, shape);
  }

  /// Throws the missing-tensor error for `canon`, with `why` (if any) after the expected shape.
  [[noreturn]] void missing(const std::string& canon, const std::string& expected, const std::string& why = "") const {
    throw Error(raw_.path + ": missing tensor '" + file_name(canon) + "' (expected shape " + expected +
                (why.empty() ? "" : "; " + why) + ")");
  }

  Error shape_error(const std::string& canon, const std::string& expected, const std::vector<int64_t>& found) const {
    return Error(raw_.path + ": tensor '" + file_name(canon) + "' has shape " + shape_str(found) + ", expected " + expected);
  }

  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (const auto& kv : raw_.tensors)
      if (!used_.count(kv.first)) out.push_back(stripped_ + kv.first);
    return out;
  }

  const std::string& path() const { return raw_.path; }
  const Scheme& scheme() const { return scheme_; }

 private:
  const RawWeights& raw_;
  const Scheme& scheme_;
  std::string stripped_;
  std::set<std::string> used_;
};

int64_t dim(const Tensor& t, int i) { return t.shape[static_cast<size_t>(i)]; }

int to_int(int64_t v, const std::string& what) {
  if (v <= 0 || v > (1 << 24)) throw Error(what + ": dimension " + std::to_string(v) + " out of range");
  return static_cast<int>(v);
}

// ---- config -----------------------------------------------------------------------------------------

// Config values from one or more sources; `src` says where each came from.
struct FileConfig {
  std::optional<int> num_heads, patch_size, image_w, image_h, default_layer;
  std::optional<float> eps, crop_pct;
  std::optional<std::array<float, 3>> mean, std;
  std::optional<std::string> default_head, interpolation, architecture;
  std::vector<std::string> labels;
  std::map<std::string, std::string> src;
};

[[noreturn]] void config_error(const std::string& path, const std::string& key, const std::string& expected,
                               const json& found) {
  throw Error(path + ": config \"" + key + "\" must be " + expected + ", found " + found.dump().substr(0, 60));
}

int config_int(const std::string& path, const json& c, const char* key) {
  const json& v = c.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < -(1 << 24) || v.get<int64_t>() > (1 << 24))
    config_error(path, key, "an integer", v);
  return v.get<int>();
}

std::array<float, 3> config_rgb(const std::string& path, const json& c, const char* key) {
  const json& v = c.at(key);
  if (!v.is_array() || v.size() != 3) config_error(path, key, "an array of 3 numbers", v);
  std::array<float, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    if (!v[i].is_number()) config_error(path, key, "an array of 3 numbers", v);
    out[i] = v[i].get<float>();
    if (!std::isfinite(out[i])) config_error(path, key, "finite numbers", v);
  }
  return out;
}

float config_float(const std::string& path, const json& c, const char* key) {
  const json& v = c.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() >= 0))
    config_error(path, key, "a non-negative number", v);
  return v.get<float>();
}

std::string config_string(const std::string& path, const json& c, const char* key) {
  const json& v = c.at(key);
  if (!v.is_string()) config_error(path, key, "a string", v);
  return v.get<std::string>();
}

// Parses attnmap config keys from `c`. `path` names the file in messages; `src(key)` is the provenance.
FileConfig parse_config(const std::string& path, const json& c, const std::function<std::string(const std::string&)>& src) {
  FileConfig fc;
  if (!c.is_object()) return fc;
  auto mark = [&](const char* key) { fc.src[key] = src(key); };
  if (c.contains("num_heads")) fc.num_heads = config_int(path, c, "num_heads"), mark("num_heads");
  if (c.contains("patch_size")) fc.patch_size = config_int(path, c, "patch_size"), mark("patch_size");
  if (c.contains("image_size")) {
    const json& v = c.at("image_size");
    if (v.is_number_integer()) {
      fc.image_w = fc.image_h = v.get<int>();
    } else if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer()) {
      fc.image_h = v[0].get<int>();  // (height, width), as timm's img_size tuple
      fc.image_w = v[1].get<int>();
    } else {
      config_error(path, "image_size", "an integer or [height, width]", v);
    }
    mark("image_size");
  }
  if (c.contains("layer_norm_eps")) fc.eps = config_float(path, c, "layer_norm_eps"), mark("layer_norm_eps");
  if (c.contains("mean")) fc.mean = config_rgb(path, c, "mean"), mark("mean");
  if (c.contains("std")) fc.std = config_rgb(path, c, "std"), mark("std");
  if (c.contains("crop_pct")) fc.crop_pct = config_float(path, c, "crop_pct"), mark("crop_pct");
  if (c.contains("interpolation")) fc.interpolation = config_string(path, c, "interpolation"), mark("interpolation");
  if (c.contains("architecture")) fc.architecture = config_string(path, c, "architecture"), mark("architecture");
  if (c.contains("labels")) {
    const json& v = c.at("labels");
    if (!v.is_array()) config_error(path, "labels", "an array of strings", v);
    for (const json& s : v) {
      if (!s.is_string()) config_error(path, "labels", "an array of strings", v);
      fc.labels.push_back(s.get<std::string>());
    }
    mark("labels");
  }
  if (c.contains("default_layer")) fc.default_layer = config_int(path, c, "default_layer"), mark("default_layer");
  if (c.contains("default_head")) {
    const json& v = c.at("default_head");
    if (v.is_string()) {
      fc.default_head = v.get<std::string>();
    } else if (v.is_number_integer()) {
      fc.default_head = std::to_string(v.get<int>());
    } else {
      config_error(path, "default_head", "\"mean\", \"max\", \"min\" or a head index", v);
    }
    mark("default_head");
  }
  return fc;
}

// `hi` over `lo`: every value `hi` sets wins, with its provenance.
FileConfig merge_config(FileConfig lo, const FileConfig& hi) {
  auto take = [&](auto& dst, const auto& v) {
    if (v) dst = v;
  };
  take(lo.num_heads, hi.num_heads);
  take(lo.patch_size, hi.patch_size);
  if (hi.image_w) lo.image_w = hi.image_w, lo.image_h = hi.image_h;
  take(lo.default_layer, hi.default_layer);
  take(lo.eps, hi.eps);
  take(lo.crop_pct, hi.crop_pct);
  take(lo.mean, hi.mean);
  take(lo.std, hi.std);
  take(lo.default_head, hi.default_head);
  take(lo.interpolation, hi.interpolation);
  take(lo.architecture, hi.architecture);
  if (!hi.labels.empty()) lo.labels = hi.labels;
  for (const auto& kv : hi.src) lo.src[kv.first] = kv.second;
  return lo;
}

std::string src_of(const FileConfig& fc, const std::string& key) {
  auto it = fc.src.find(key);
  return it == fc.src.end() ? std::string("config") : it->second;
}

// Applies config + overrides that every layout shares.
void apply_common(HParams& hp, const FileConfig& fc, const ModelOverrides& ov, const std::string& path,
                  float default_eps, const std::string& eps_default_src) {
  hp.eps = default_eps;
  hp.source["layer_norm_eps"] = eps_default_src;
  // A value given replaces the default, and its source is recorded under `key` (inspect's source column).
  auto take = [&hp](const auto& given, auto& value, const char* key, const std::string& source) {
    if (!given) return;
    value = *given;
    hp.source[key] = source;
  };
  take(fc.eps, hp.eps, "layer_norm_eps", src_of(fc, "layer_norm_eps"));
  hp.source["mean"] = hp.source["std"] = "default (ImageNet)";
  take(fc.mean, hp.mean, "mean", src_of(fc, "mean"));
  take(fc.std, hp.std, "std", src_of(fc, "std"));
  take(ov.mean, hp.mean, "mean", "command line");
  take(ov.std, hp.std, "std", "command line");
  for (float s : hp.std)
    if (!(s > 0)) throw Error(path + ": std must be positive in every channel");
  if (fc.crop_pct && !(*fc.crop_pct > 0 && *fc.crop_pct <= 1)) throw Error(path + ": crop_pct must be in (0, 1]");
  if (fc.crop_pct) {
    hp.crop_pct = fc.crop_pct;
    hp.source["crop_pct"] = src_of(fc, "crop_pct");
  }
  take(fc.interpolation, hp.interpolation, "interpolation", src_of(fc, "interpolation"));
  take(fc.architecture, hp.architecture, "architecture", src_of(fc, "architecture"));
  hp.labels = fc.labels;
  if (!fc.labels.empty()) hp.source["labels"] = src_of(fc, "labels");
  hp.default_layer = fc.default_layer;
  if (fc.default_layer) hp.source["default_layer"] = src_of(fc, "default_layer");
  hp.default_head = fc.default_head;
  if (fc.default_head) hp.source["default_head"] = src_of(fc, "default_head");
}

// Image size and grid from the config, or from the number of patch positions (a square grid).
void resolve_grid(HParams& hp, const FileConfig& fc, int64_t n_patches, bool have_positions,
                  const std::string& path, const std::string& pos_name) {
  if (fc.image_w) {
    if (*fc.image_w <= 0 || *fc.image_h <= 0 || *fc.image_w % hp.patch || *fc.image_h % hp.patch) {
      throw Error(path + ": config image_size " + std::to_string(*fc.image_h) + "x" + std::to_string(*fc.image_w) +
                  " is not a positive multiple of the patch size " + std::to_string(hp.patch));
    }
    hp.image_w = *fc.image_w;
    hp.image_h = *fc.image_h;
    hp.source["image_size"] = src_of(fc, "image_size");
  } else if (have_positions) {
    const auto g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(n_patches, 0)))));
    if (g * g != n_patches || g <= 0) {
      throw Error(path + ": tensor '" + pos_name + "' has " + std::to_string(n_patches) +
                  " patch positions, not a square grid; set config image_size");
    }
    hp.image_w = hp.image_h = static_cast<int>(g) * hp.patch;
    hp.source["image_size"] = "inferred from " + pos_name;
  } else {
    hp.image_w = hp.image_h = 224;
    hp.source["image_size"] = "default (224)";
  }
  hp.grid_w = hp.image_w / hp.patch;
  hp.grid_h = hp.image_h / hp.patch;
  if (have_positions && static_cast<int64_t>(hp.grid_w) * hp.grid_h != n_patches) {
    throw Error(path + ": tensor '" + pos_name + "' has " + std::to_string(n_patches) + " patch positions, expected " +
                std::to_string(hp.grid_h) + "x" + std::to_string(hp.grid_w) + " = " +
                std::to_string(hp.grid_w * hp.grid_h) + " for image size " + std::to_string(hp.image_h) + "x" +
                std::to_string(hp.image_w) + " and patch " + std::to_string(hp.patch));
  }
}

// ---- layouts ----------------------------------------------------------------------------------------

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// Splits "blocks.{i}.rest" into i and rest; false when `canon` is not a block tensor.
bool split_block(const std::string& canon, std::string& idx, std::string& rest) {
  if (!starts_with(canon, "blocks.")) return false;
  const size_t dot = canon.find('.', 7);
  if (dot == std::string::npos) return false;
  idx = canon.substr(7, dot - 7);
  rest = canon.substr(dot + 1);
  return true;
}

// Replaces the leading `from` of `s` by `to`; true when it matched.
bool swap_prefix(std::string& s, const std::string& from, const std::string& to) {
  if (!starts_with(s, from)) return false;
  s = to + s.substr(from.size());
  return true;
}

// torchvision.models.VisionTransformer (torchvision/models/vision_transformer.py).
Scheme torchvision_scheme(const RawWeights& raw) {
  Scheme sc;
  sc.layout = "torchvision";
  const bool old_mlp = raw.tensors.count("encoder.layers.encoder_layer_0.mlp.linear_1.weight") != 0;
  sc.name = [old_mlp](const std::string& c) {
    std::string idx, rest, s = c;
    if (split_block(c, idx, rest)) {
      const std::string b = "encoder.layers.encoder_layer_" + idx + ".";
      if (swap_prefix(rest, "norm1.", "ln_1.") || swap_prefix(rest, "norm2.", "ln_2.") ||
          swap_prefix(rest, "attn.proj.", "self_attention.out_proj.") ||
          swap_prefix(rest, "mlp.fc1.", old_mlp ? "mlp.linear_1." : "mlp.0.") ||
          swap_prefix(rest, "mlp.fc2.", old_mlp ? "mlp.linear_2." : "mlp.3."))
        return b + rest;
      if (rest == "attn.qkv.weight") return b + "self_attention.in_proj_weight";
      if (rest == "attn.qkv.bias") return b + "self_attention.in_proj_bias";
      return b + rest;
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

// Hugging Face transformers ViTModel / ViTForImageClassification (models/vit/modeling_vit.py).
Scheme hf_scheme(bool vit_prefix) {
  Scheme sc;
  sc.layout = "hf-vit";
  sc.separate_qkv = true;
  const std::string v = vit_prefix ? "vit." : "";
  sc.name = [v](const std::string& c) {
    std::string idx, rest, s = c;
    if (split_block(c, idx, rest)) {
      const std::string b = v + "encoder.layer." + idx + ".";
      if (swap_prefix(rest, "norm1.", "layernorm_before.") || swap_prefix(rest, "norm2.", "layernorm_after.") ||
          swap_prefix(rest, "attn.q.", "attention.attention.query.") ||
          swap_prefix(rest, "attn.k.", "attention.attention.key.") ||
          swap_prefix(rest, "attn.v.", "attention.attention.value.") ||
          swap_prefix(rest, "attn.proj.", "attention.output.dense.") ||
          swap_prefix(rest, "mlp.fc1.", "intermediate.dense.") || swap_prefix(rest, "mlp.fc2.", "output.dense."))
        return b + rest;
      return b + "hf:" + rest;
    }
    if (c == "cls_token") return v + "embeddings.cls_token";
    if (c == "pos_embed") return v + "embeddings.position_embeddings";
    if (swap_prefix(s, "patch_embed.proj.", "embeddings.patch_embeddings.projection.") || swap_prefix(s, "norm.", "layernorm."))
      return v + s;
    if (swap_prefix(s, "head.", "classifier.")) return s;
    return v + "hf:" + c;
  };
  return sc;
}

LayerNormW take_norm(Loader& ld, const std::string& prefix, int64_t d) {
  LayerNormW n;
  n.weight = ld.take(prefix + ".weight", {d});
  n.bias = ld.take(prefix + ".bias", {d});
  return n;
}

LinearW take_linear(Loader& ld, const std::string& prefix, int64_t out, int64_t in, bool bias_required = false) {
  LinearW l;
  l.weight = ld.take(prefix + ".weight", {out, in});
  l.bias = bias_required ? ld.take(prefix + ".bias", {out}) : ld.take_opt(prefix + ".bias", {out});
  l.out = static_cast<int>(out);
  l.in = static_cast<int>(in);
  return l;
}

// A prefix token tensor (1, K, D) or (K, D) or, for K = 1, (D); returns its K rows.
Floats take_tokens(Loader& ld, const std::string& canon, int64_t D, int64_t& K) {
  const Tensor& t = ld.need(canon, "(1, K, " + std::to_string(D) + ")");
  const bool ok = (t.rank() == 3 && dim(t, 0) == 1 && dim(t, 2) == D) || (t.rank() == 2 && dim(t, 1) == D) ||
                  (t.rank() == 1 && dim(t, 0) == D);
  if (!ok || t.numel() == 0) throw ld.shape_error(canon, "(1, K, " + std::to_string(D) + ")", t.shape);
  K = t.numel() / D;
  return t.data;
}

// The attention's fused (3D, D) input projection and its bias, from whichever form the layout stores:
// a fused qkv (timm, torchvision in_proj), separate query/key/value (Hugging Face), or a bias split into
// q_bias / v_bias with no key bias (BEiT-style; the key bias is zero).
LinearW take_qkv(Loader& ld, const std::string& b, int64_t D) {
  LinearW l;
  l.out = static_cast<int>(3 * D);
  l.in = static_cast<int>(D);
  if (ld.scheme().separate_qkv) {
    const char* parts[3] = {"q", "k", "v"};
    std::vector<float> bias;
    int with_bias = 0;
    for (const char* p : parts) {
      const Floats w = ld.take(b + "attn." + p + ".weight", {D, D});
      l.weight.insert_back(w.begin(), w.end());
      Floats bb = ld.take_opt(b + "attn." + p + ".bias", {D});
      if (!bb.empty()) ++with_bias;
      if (bb.empty()) bb.assign(static_cast<size_t>(D), 0.0f);
      bias.insert(bias.end(), bb.begin(), bb.end());
    }
    if (with_bias > 0 && with_bias < 3) {  // HF ViTConfig.qkv_bias gives all three or none
      for (const char* p : parts)
        if (!ld.has(b + "attn." + p + ".bias")) ld.missing(b + "attn." + p + ".bias", shape_str({D}), "query, key and value biases come together");
    }
    if (with_bias) l.bias = std::move(bias);
    return l;
  }
  const std::string qkv = b + "attn.qkv";
  const std::string want = "(" + std::to_string(3 * D) + ", " + std::to_string(D) + ")";
  const Tensor& w = ld.need(qkv + ".weight", want);
  if (w.shape != std::vector<int64_t>{3 * D, D}) {
    std::string why = want;
    if (w.shape == std::vector<int64_t>{D, 3 * D}) why += " (3D x D as nn.Linear stores it; this looks transposed, JAX/Flax style)";
    throw ld.shape_error(qkv + ".weight", why, w.shape);
  }
  l.weight = w.data;
  l.bias = ld.take_opt(qkv + ".bias", {3 * D});
  if (l.bias.empty() && ld.has(b + "attn.q_bias")) {
    const Floats q = ld.take(b + "attn.q_bias", {D});
    const Floats v = ld.take(b + "attn.v_bias", {D});
    Floats k = ld.take_opt(b + "attn.k_bias", {D});
    if (k.empty()) k.assign(static_cast<size_t>(D), 0.0f);
    l.bias = q;
    l.bias.insert_back(k.begin(), k.end());
    l.bias.insert_back(v.begin(), v.end());
  }
  return l;
}

// The patch embedding (D, 3, P, P) into w.patch_embed: sets hp.dim and hp.patch (checked against a config
// patch_size) and returns D.
int64_t take_patch_embed(Loader& ld, const FileConfig& fc, ViTWeights& w) {
  const std::string& path = ld.path();
  HParams& hp = w.hp;
  const std::string pe_name = ld.file_name("patch_embed.proj.weight");
  const Tensor& pe = ld.need("patch_embed.proj.weight", "(D, 3, P, P)");
  if (pe.rank() != 4 || dim(pe, 1) != 3 || dim(pe, 2) != dim(pe, 3))
    throw ld.shape_error("patch_embed.proj.weight", "(D, 3, P, P)", pe.shape);
  const int64_t D = dim(pe, 0);
  hp.dim = to_int(D, path + ": " + pe_name);
  hp.patch = to_int(dim(pe, 2), path + ": patch size");
  if (fc.patch_size && *fc.patch_size != hp.patch) {
    throw Error(path + ": " + src_of(fc, "patch_size") + " patch_size " + std::to_string(*fc.patch_size) +
                " does not match " + pe_name + " " + shape_str(pe.shape));
  }
  // A config that states it (and agrees, checked above) is the source, as for the weight-less fields.
  hp.source["patch_size"] = fc.patch_size ? src_of(fc, "patch_size") : "inferred from " + pe_name;
  w.patch_embed.weight = pe.data;  // (D, 3, P, P) == (D, 3*P*P) in (channel, row, column) order
  w.patch_embed.out = hp.dim;
  w.patch_embed.in = 3 * hp.patch * hp.patch;
  w.patch_embed.bias = ld.take_opt("patch_embed.proj.bias", {D});
  return D;
}

// The prefix tokens, each (1, K, D): the class token into w.cls_token, a distillation token (DeiT), then
// registers (timm reg_token or facebookresearch DINOv2 register_tokens) into w.extra_tokens; sets
// hp.num_dist, num_registers, num_prefix. Returns whether the registers are facebookresearch's.
bool take_prefix_tokens(Loader& ld, int64_t D, ViTWeights& w) {
  HParams& hp = w.hp;
  int64_t k = 0;
  w.cls_token = take_tokens(ld, "cls_token", D, k);
  if (k != 1) throw ld.shape_error("cls_token", shape_str({1, 1, D}), ld.need("cls_token", "").shape);
  // Distillation token (DeiT), then registers: timm reg_token or facebookresearch DINOv2 register_tokens.
  if (ld.has("dist_token")) {
    w.extra_tokens = take_tokens(ld, "dist_token", D, k);
    if (k != 1) throw ld.shape_error("dist_token", shape_str({1, 1, D}), ld.need("dist_token", "").shape);
    hp.num_dist = 1;
  }
  bool fb_registers = false;
  for (const char* reg : {"reg_token", "register_tokens"}) {
    if (!ld.has(reg)) continue;
    if (hp.num_registers) throw Error(ld.path() + ": both reg_token and register_tokens present");
    const Floats r = take_tokens(ld, reg, D, k);
    w.extra_tokens.insert_back(r.begin(), r.end());
    hp.num_registers = static_cast<int>(k);
    fb_registers = std::string(reg) == "register_tokens";
  }
  hp.num_prefix = 1 + hp.num_dist + hp.num_registers;
  return fb_registers;
}

// How many prefix tokens have a position row, of a pos_embed with `rows` rows: facebookresearch registers
// get none (pos_embed 1+N rows); timm reg_token models either embed every prefix token (1+R+N) or none
// (no_embed_class, N rows): the row count tells them apart, the config image size settles a tie.
int pos_prefix_rows(const HParams& hp, const std::string& layout, const FileConfig& fc, bool fb_registers,
                    int64_t rows) {
  std::vector<int> candidates;
  if (fb_registers) {
    candidates = {1};
  } else if (layout != "timm" && layout != "dinov2") {
    candidates = {hp.num_prefix};  // Hugging Face and torchvision always embed the class token
  } else if (hp.num_registers) {
    candidates = {0, hp.num_prefix};
  } else {
    candidates = {hp.num_prefix, 0};
  }
  int pp = -1;
  if (fc.image_w && *fc.image_w > 0 && *fc.image_h > 0 && hp.patch > 0) {
    const int64_t n = static_cast<int64_t>(*fc.image_w / hp.patch) * (*fc.image_h / hp.patch);
    for (int c : candidates)
      if (rows - c == n) pp = c;
  } else {
    for (int c : candidates) {
      const int64_t n = rows - c;
      const auto g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(n, 0)))));
      if (pp < 0 && n > 0 && g * g == n) pp = c;
    }
  }
  if (pp < 0) pp = candidates.front();  // resolve_grid reports the mismatch
  return pp;
}

// The position embedding (1, pos_prefix+N, D) into w.pos_embed; sets hp.pos_prefix and the grid.
void take_pos_embed(Loader& ld, const FileConfig& fc, bool fb_registers, int64_t D, ViTWeights& w) {
  HParams& hp = w.hp;
  const std::string pos_name = ld.file_name("pos_embed");
  const Tensor& pos = ld.need("pos_embed", "(1, 1+N, D)");
  if (!((pos.rank() == 3 && dim(pos, 0) == 1) || pos.rank() == 2) || pos.shape.back() != D || dim(pos, pos.rank() - 2) < 1)
    throw ld.shape_error("pos_embed", "(1, 1+N, " + std::to_string(D) + ")", pos.shape);
  const int64_t rows = dim(pos, pos.rank() - 2);
  const int pp = pos_prefix_rows(hp, ld.scheme().layout, fc, fb_registers, rows);
  hp.pos_prefix = pp;
  hp.source["pos_prefix"] = "inferred from " + pos_name + " rows (" + std::to_string(rows) + ")";
  resolve_grid(hp, fc, rows - pp, true, ld.path(), pos_name);
  w.pos_embed = pos.data;
}

// Depth = 1 + the highest block index present (probed up to 4096), so that a block missing in the middle
// is named by the block loop as a missing tensor instead of silently ending the model there.
int count_blocks(Loader& ld) {
  int depth = 0;
  for (int i = 0; i < 4096; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    if (ld.has(b + "norm1.weight") || ld.has(b + "attn.qkv.weight") || ld.has(b + "attn.q.weight")) depth = i + 1;
  }
  if (depth == 0)
    throw Error(ld.path() + ": missing tensor '" + ld.file_name("blocks.0.norm1.weight") + "' (no encoder blocks found)");
  return depth;
}

// hp.num_heads (and head_dim) from --heads, else the config, else the architecture name, else D/64 (with a
// notice). Throws attnmap::Error when it is not positive or does not divide D.
void resolve_heads(const FileConfig& fc, const ModelOverrides& ov, const std::string& path, ViTWeights& w) {
  HParams& hp = w.hp;
  if (ov.num_heads) {
    hp.num_heads = *ov.num_heads;
    hp.source["num_heads"] = "command line";
    const int said = fc.num_heads ? *fc.num_heads : fc.architecture ? heads_from_architecture(*fc.architecture) : 0;
    if (said > 0 && said != hp.num_heads)
      w.notices.push_back("--heads " + std::to_string(hp.num_heads) + " overrides num_heads " + std::to_string(said) +
                          " from " + src_of(fc, fc.num_heads ? "num_heads" : "architecture"));
  } else if (fc.num_heads) {
    hp.num_heads = *fc.num_heads;
    hp.source["num_heads"] = src_of(fc, "num_heads");
  } else if (fc.architecture && heads_from_architecture(*fc.architecture) > 0) {
    hp.num_heads = heads_from_architecture(*fc.architecture);
    hp.source["num_heads"] = "inferred from architecture " + *fc.architecture + " (" + src_of(fc, "architecture") + ")";
  } else {
    hp.num_heads = hp.dim % 64 == 0 ? hp.dim / 64 : 1;
    hp.source["num_heads"] = "default (D/64)";
    w.notices.push_back("number of heads not given; assuming D/64 = " + std::to_string(hp.num_heads) +
                        (hp.dim % 64 == 0 ? std::string() : " (D = " + std::to_string(hp.dim) + " is not a multiple of 64: one head)") +
                        " (set config num_heads or --heads)");
  }
  if (hp.num_heads <= 0)
    throw Error(path + ": " + hp.source["num_heads"] + " num_heads " + std::to_string(hp.num_heads) + " must be positive");
  if (hp.dim % hp.num_heads != 0) {
    throw Error(path + ": " + std::to_string(hp.num_heads) + " heads do not divide the token width D = " +
                std::to_string(hp.dim));
  }
  hp.head_dim = hp.dim / hp.num_heads;
}

// Encoder block i: LN1, fused qkv (3D, D), proj (D, D), LN2, MLP fc1 (M, D) / fc2 (D, M), LayerScale gammas
// (D) if present; sets hp.mlp_dim and hp.layer_scale. Refuses a SwiGLU MLP.
BlockWeights take_block(Loader& ld, const RawWeights& raw, const std::string& stripped, int i, int64_t D,
                        HParams& hp) {
  const std::string& path = raw.path;
  const std::string b = "blocks." + std::to_string(i) + ".";
  BlockWeights blk;
  blk.norm1 = take_norm(ld, b + "norm1", D);
  blk.qkv = take_qkv(ld, b, D);
  blk.proj = take_linear(ld, b + "attn.proj", D, D);
  blk.norm2 = take_norm(ld, b + "norm2", D);
  if (!ld.has(b + "mlp.fc1.weight") && raw.tensors.count(b + "mlp.w12.weight"))
    throw Error(path + ": tensor '" + stripped + b + "mlp.w12.weight': SwiGLU MLP (DINOv2 ViT-g/14) is not supported; "
                "attnmap runs the GELU MLP (mlp.fc1 / mlp.fc2)");
  const Tensor& fc1 = ld.need(b + "mlp.fc1.weight", "(M, D)");
  if (fc1.rank() != 2 || dim(fc1, 1) != D) throw ld.shape_error(b + "mlp.fc1.weight", "(M, " + std::to_string(D) + ")", fc1.shape);
  const int64_t M = dim(fc1, 0);
  blk.fc1 = take_linear(ld, b + "mlp.fc1", M, D);
  blk.fc2 = take_linear(ld, b + "mlp.fc2", D, M);
  blk.ls1 = ld.take_opt(b + "ls1.gamma", {D});
  blk.ls2 = ld.take_opt(b + "ls2.gamma", {D});
  if (!blk.ls1.empty() || !blk.ls2.empty()) hp.layer_scale = true;
  hp.mlp_dim = static_cast<int>(M);
  return blk;
}

// A bias is a model-wide choice (timm qkv_bias / proj_bias / Mlp bias, nn.Linear(bias=False)): present in
// some blocks and not in others means a tensor was lost, and is refused by the name of the first missing one.
// Appends to no_bias the block biases no block has.
void check_block_biases(Loader& ld, const ViTWeights& w, int64_t D, std::vector<std::string>& no_bias) {
  const Scheme& sc = ld.scheme();
  const int depth = w.hp.depth;
  const struct {
    const char* canon;          // canonical name after "blocks.{i}."
    const LinearW BlockWeights::*lin;
  } kinds[] = {{"attn.qkv.bias", &BlockWeights::qkv},
               {"attn.proj.bias", &BlockWeights::proj},
               {"mlp.fc1.bias", &BlockWeights::fc1},
               {"mlp.fc2.bias", &BlockWeights::fc2}};
  for (const auto& bk : kinds) {
    const std::string kind = bk.canon;
    const std::string rest = sc.separate_qkv && kind == "attn.qkv.bias" ? "attn.q.bias" : kind;  // HF names
    int with = 0;
    for (const BlockWeights& blk : w.blocks) with += !(blk.*(bk.lin)).bias.empty();
    if (with == 0) {
      if (rest == "attn.q.bias") {
        for (const char* part : {"attn.q.bias", "attn.k.bias", "attn.v.bias"}) no_bias.push_back(ld.file_name(std::string("blocks.*.") + part));
      } else {
        no_bias.push_back(ld.file_name("blocks.*." + rest));
      }
      continue;
    }
    if (with == depth) continue;
    const auto has_bias = [&](const BlockWeights& blk) { return !(blk.*(bk.lin)).bias.empty(); };
    const auto first_missing = std::find_if_not(w.blocks.begin(), w.blocks.end(), has_bias);
    const Floats& sibling = ((*std::find_if(w.blocks.begin(), w.blocks.end(), has_bias)).*(bk.lin)).bias;
    const int64_t n = sc.separate_qkv && kind == "attn.qkv.bias" ? D : static_cast<int64_t>(sibling.size());
    ld.missing("blocks." + std::to_string(first_missing - w.blocks.begin()) + "." + rest, shape_str({n}),
               "the other blocks have it");
  }
}

// The final LayerNorm (D) and the classifier head (C, D) with a DeiT head_dist, when present; a head with
// fc_norm (global average pooling) is dropped with a notice. Appends a missing head bias to no_bias.
void take_norm_and_head(Loader& ld, const RawWeights& raw, int64_t D, ViTWeights& w, std::vector<std::string>& no_bias) {
  const Scheme& sc = ld.scheme();
  const HParams& hp = w.hp;
  if (ld.has("norm.weight") || ld.has("norm.bias")) w.norm = take_norm(ld, "norm", D);
  if (ld.has("head.weight") && !(sc.layout == "torchvision" && raw.tensors.count("heads.pre_logits.weight"))) {
    const Tensor& h = ld.need("head.weight", "(C, D)");
    if (h.rank() != 2 || dim(h, 1) != D) throw ld.shape_error("head.weight", "(C, " + std::to_string(D) + ")", h.shape);
    w.head = take_linear(ld, "head", dim(h, 0), D);
    // timm VisionTransformerDistilled (DeiT): in eval mode the logits average both heads.
    if (hp.num_dist == 1 && ld.has("head_dist.weight")) w.head_dist = take_linear(ld, "head_dist", dim(h, 0), D);
  }
  if (w.head.present() && ld.has("fc_norm.weight")) {
    // timm global_pool="avg" (fc_norm): the head reads the mean patch token, not the class token; not supported.
    w.head = LinearW{};
    w.head_dist = LinearW{};
    w.notices.push_back("fc_norm present (timm global average pooling): classifier head not used, no top-5");
  }
  // The classifier reads the class token after the final LayerNorm (timm forward_head, HF layernorm,
  // torchvision encoder.ln): a head without it would give other probabilities than the model's.
  if (w.head.present() && !w.norm.present()) ld.missing("norm.weight", shape_str({D}),
                                                        "the classifier head reads the final LayerNorm");
  if (w.head.present() && w.head.bias.empty()) no_bias.push_back(ld.file_name("head.bias"));
}

// The notices on bias tensors absent everywhere and on tensors the file has that were not used.
void add_load_notices(const Loader& ld, const std::vector<std::string>& no_bias, ViTWeights& w) {
  if (!no_bias.empty()) {
    std::string s;
    for (size_t i = 0; i < no_bias.size(); ++i) s += (i ? ", " : "") + no_bias[i];
    w.notices.push_back("no bias tensors (computed as zero, as nn.Linear(bias=False)): " + s);
  }
  const auto unused = ld.unused();
  if (!unused.empty()) {
    std::string s;
    for (size_t i = 0; i < unused.size() && i < 8; ++i) s += (i ? ", " : "") + unused[i];
    if (unused.size() > 8) s += ", ... (" + std::to_string(unused.size()) + " in all)";
    w.notices.push_back("ignored tensors not used for attention maps: " + s);
  }
}

// Every ViT layout but the seed one, through its naming scheme.
ViTWeights build_vit(const RawWeights& raw, const Scheme& sc, const std::string& stripped, const FileConfig& fc,
                     const ModelOverrides& ov) {
  Loader ld(raw, sc, stripped);
  ViTWeights w;
  HParams& hp = w.hp;
  hp.layout = sc.layout;
  const int64_t D = take_patch_embed(ld, fc, w);
  const bool fb_registers = take_prefix_tokens(ld, D, w);
  take_pos_embed(ld, fc, fb_registers, D, w);
  hp.depth = count_blocks(ld);
  hp.source["depth"] = "inferred from the block count";
  resolve_heads(fc, ov, raw.path, w);
  for (int i = 0; i < hp.depth; ++i) w.blocks.push_back(take_block(ld, raw, stripped, i, D, hp));
  std::vector<std::string> no_bias;
  check_block_biases(ld, w, D, no_bias);
  if (w.patch_embed.bias.empty()) no_bias.push_back(ld.file_name("patch_embed.proj.bias"));
  take_norm_and_head(ld, raw, D, w, no_bias);
  add_load_notices(ld, no_bias, w);
  return w;
}

// ---- seed layout (the guide's single attention layer) ---------------------------------------------------

int patch_from(int64_t features, const std::optional<int>& cfg, const std::string& path, const std::string& what) {
  if (cfg) {
    if (static_cast<int64_t>(3) * *cfg * *cfg != features)
      throw Error(path + ": " + what + " has " + std::to_string(features) + " input features, expected 3*P*P = " +
                  std::to_string(3 * *cfg * *cfg) + " for config patch_size " + std::to_string(*cfg));
    return *cfg;
  }
  const auto p = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(features) / 3.0)));
  if (p <= 0 || 3 * p * p != features)
    throw Error(path + ": " + what + " has " + std::to_string(features) +
                " input features, which is not 3*P*P for any patch size P");
  return static_cast<int>(p);
}

ViTWeights build_seed(const RawWeights& raw, const FileConfig& fc, const ModelOverrides& ov) {
  Scheme sc;
  Loader ld(raw, sc, "");
  const std::string& path = raw.path;
  ViTWeights w;
  HParams& hp = w.hp;
  hp.layout = "seed";
  hp.residual_mlp = false;
  hp.depth = 1;
  hp.num_heads = 1;
  hp.source["num_heads"] = "seed layout (one head)";
  hp.source["depth"] = "seed layout (one layer)";
  if (ov.num_heads && *ov.num_heads != 1) throw Error(path + ": the seed layout has exactly one head");

  const Tensor& wq = ld.need("W_Q", "(D, d_k)");
  if (wq.rank() != 2) throw ld.shape_error("W_Q", "(D, d_k)", wq.shape);
  const int64_t D = dim(wq, 0), dk = dim(wq, 1);
  hp.dim = to_int(D, path + ": W_Q");
  hp.head_dim = to_int(dk, path + ": W_Q");
  const Floats q = wq.data;
  const Floats k = ld.take("W_K", {D, dk});
  const Floats v = ld.take("W_V", {D, dk});

  if (ld.has("W_E")) {
    const Tensor& we = ld.need("W_E", "(3*P*P, D)");
    if (we.rank() != 2 || dim(we, 1) != D) throw ld.shape_error("W_E", "(3*P*P, " + std::to_string(D) + ")", we.shape);
    hp.patch = patch_from(dim(we, 0), fc.patch_size, path, "W_E");
    const int64_t in = dim(we, 0);
    w.patch_embed.out = hp.dim;
    w.patch_embed.in = static_cast<int>(in);
    w.patch_embed.weight.resize(static_cast<size_t>(in * D));
    float* pe = w.patch_embed.weight.mutable_data();
    for (int64_t r = 0; r < in; ++r)
      for (int64_t c = 0; c < D; ++c) pe[static_cast<size_t>(c * in + r)] = we.data[static_cast<size_t>(r * D + c)];
    w.patch_embed.bias = ld.take_opt("b_E", {D});
    hp.source["patch_size"] = fc.patch_size ? src_of(fc, "patch_size") : "inferred from W_E";
  } else {
    hp.patch = patch_from(D, fc.patch_size, path, "W_Q (no W_E: the token is the pixel vector)");
    hp.source["patch_size"] = fc.patch_size ? src_of(fc, "patch_size") : "inferred from D = 3*P*P";
  }

  const Tensor* pos = ld.find("pos_embed");
  int64_t n_pos = 0;
  if (pos) {
    if (pos->rank() < 2 || pos->shape.back() != D || (pos->rank() == 3 && dim(*pos, 0) != 1) || pos->rank() > 3)
      throw ld.shape_error("pos_embed", "(1+N, " + std::to_string(D) + ")", pos->shape);
    n_pos = dim(*pos, pos->rank() - 2);
  }
  resolve_grid(hp, fc, n_pos - 1, pos != nullptr, path, "pos_embed");
  if (pos) w.pos_embed = pos->data;

  if (const Tensor* cls = ld.find("cls_token")) {
    if (cls->numel() != D) throw ld.shape_error("cls_token", "(" + std::to_string(D) + ",)", cls->shape);
    w.cls_token = cls->data;
  } else {
    hp.cls_is_mean = true;
    w.notices.push_back("no cls_token: the class token is the mean of the patch tokens");
  }

  // Q = X W_Q  <=>  nn.Linear with weight W_Q^T: stack [W_Q^T; W_K^T; W_V^T] as a fused (3 d_k, D) qkv.
  BlockWeights blk;
  blk.qkv.out = static_cast<int>(3 * dk);
  blk.qkv.in = hp.dim;
  blk.qkv.weight.resize(static_cast<size_t>(3 * dk * D));
  float* qkv = blk.qkv.weight.mutable_data();
  const Floats* mats[3] = {&q, &k, &v};
  for (int m = 0; m < 3; ++m)
    for (int64_t r = 0; r < D; ++r)
      for (int64_t c = 0; c < dk; ++c)
        qkv[static_cast<size_t>((m * dk + c) * D + r)] = (*mats[m])[static_cast<size_t>(r * dk + c)];
  w.blocks.push_back(std::move(blk));
  const auto unused = ld.unused();
  if (!unused.empty()) w.notices.push_back("ignored tensors: " + unused.front() + (unused.size() > 1 ? ", ..." : ""));
  return w;
}

// Strips the wrapper prefixes training code adds (DataParallel "module.", DINO "backbone.", Lightning /
// hub "model."), repeatedly; returns the prefix stripped from the first key (for messages).
RawWeights strip_prefixes(const RawWeights& raw, std::string& stripped) {
  RawWeights out;
  out.path = raw.path;
  out.config = raw.config;
  out.config_where = raw.config_where;
  out.skipped = raw.skipped;
  out.notices = raw.notices;
  stripped.clear();
  bool first = true;
  for (const auto& kv : raw.tensors) {
    std::string k = kv.first, cut;
    for (bool again = true; again;) {
      again = false;
      for (const char* p : {"module.", "backbone.", "model."}) {
        if (starts_with(k, p) && k.size() > std::string(p).size()) {
          cut += p;
          k = k.substr(std::string(p).size());
          again = true;
        }
      }
    }
    if (first) stripped = cut, first = false;
    if (!out.tensors.emplace(k, kv.second).second)
      throw Error(raw.path + ": tensor '" + kv.first + "' collides with another tensor once its prefix '" + cut +
                  "' is stripped");
  }
  return out;
}

void add_side_notice(ViTWeights& w, const std::vector<std::string>& n) { w.notices.insert(w.notices.end(), n.begin(), n.end()); }

}  // namespace

int heads_from_architecture(const std::string& arch) {
  // Size words of timm's vision_transformer.py / deit.py model definitions and their head counts.
  static const std::pair<const char*, int> kSizes[] = {
      {"tiny", 3}, {"small", 6}, {"base", 12}, {"large", 16}, {"huge", 16}, {"giant", 16}, {"gigantic", 16},
      {"medium", 8}, {"mediumd", 8}, {"so400m", 16}, {"little", 5}, {"betwixt", 4}, {"wee", 4}, {"pwee", 4},
  };
  std::string a = arch.substr(0, arch.find('.'));  // drop a pretrained tag such as ".augreg_in21k"
  for (const char* fam : {"vit_", "deit3_", "deit_", "beit_", "beitv2_"}) {
    if (!starts_with(a, fam)) continue;
    const std::string rest = a.substr(std::string(fam).size());
    const std::string word = rest.substr(0, rest.find('_'));
    for (const auto& s : kSizes)
      if (word == s.first) return s.second;
  }
  return 0;
}

namespace {
// The folder whose config.json / preprocessor_config.json go with the weights file `path`.
std::string side_config_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}
}  // namespace

std::vector<std::string> model_files(const std::string& path) {
  if (auto hf = model_files_hf(path)) return *hf;  // a Hugging Face folder or sharded index (weights_hf.cpp)
  const std::string d = side_config_dir(path);
  return {path, d + "/config.json", d + "/preprocessor_config.json"};
}

SideConfig read_side_config(const std::string& dir) {
  SideConfig sc;
  auto read_json = [](const std::string& file, json& out) {
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::status(file, ec);
    if (!std::filesystem::exists(st)) return false;
    if (!std::filesystem::is_regular_file(st)) throw Error(file + ": not a regular file (a folder, device or FIFO), read as a side config");
    std::ifstream f(file, std::ios::binary);
    if (!f) return false;
    std::stringstream ss;
    ss << f.rdbuf();
    try {
      out = json::parse(ss.str());
    } catch (const json::exception& e) {
      throw Error(file + ": malformed JSON: " + std::string(e.what()).substr(0, 120));
    }
    if (!out.is_object()) throw Error(file + ": not a JSON object");
    return true;
  };
  const std::string d = dir.empty() ? std::string(".") : dir;
  json c;
  const std::string cfg = d + "/config.json";
  if (read_json(cfg, c)) {
    auto put = [&](const char* key, const json& v, const std::string& from) {
      sc.values[key] = v;
      sc.source[key] = "config.json (" + cfg + (from.empty() ? "" : ": " + from) + ")";
    };
    if (c.contains("architecture") || c.contains("pretrained_cfg")) {  // timm hub config
      if (c.contains("architecture")) put("architecture", c["architecture"], "architecture");
      const json pc = c.value("pretrained_cfg", json::object());
      if (!pc.is_object()) throw Error(cfg + ": \"pretrained_cfg\" must be an object");
      if (pc.contains("mean")) put("mean", pc["mean"], "pretrained_cfg.mean");
      if (pc.contains("std")) put("std", pc["std"], "pretrained_cfg.std");
      if (pc.contains("crop_pct")) put("crop_pct", pc["crop_pct"], "pretrained_cfg.crop_pct");
      if (pc.contains("interpolation")) put("interpolation", pc["interpolation"], "pretrained_cfg.interpolation");
      if (pc.contains("input_size")) {
        const json& in = pc["input_size"];
        if (!in.is_array() || in.size() != 3) throw Error(cfg + ": pretrained_cfg.input_size must be [3, H, W]");
        put("image_size", json::array({in[1], in[2]}), "pretrained_cfg.input_size");
      }
      const json ma = c.value("model_args", json::object());
      if (ma.is_object()) {
        if (ma.contains("num_heads")) put("num_heads", ma["num_heads"], "model_args.num_heads");
        if (ma.contains("img_size")) put("image_size", ma["img_size"], "model_args.img_size");
        if (ma.contains("patch_size")) put("patch_size", ma["patch_size"], "model_args.patch_size");
      }
      if (c.contains("label_names")) put("labels", c["label_names"], "label_names");
    } else {  // Hugging Face PretrainedConfig
      if (c.contains("num_attention_heads")) put("num_heads", c["num_attention_heads"], "num_attention_heads");
      if (c.contains("layer_norm_eps")) put("layer_norm_eps", c["layer_norm_eps"], "layer_norm_eps");
      if (c.contains("image_size")) put("image_size", c["image_size"], "image_size");
      if (c.contains("patch_size")) put("patch_size", c["patch_size"], "patch_size");
      if (c.contains("hidden_act") && c["hidden_act"] != "gelu")
        sc.notices.push_back(cfg + ": hidden_act " + c["hidden_act"].dump() +
                             " is not \"gelu\"; attnmap uses exact GELU (later layers may differ)");
      if (c.contains("id2label") && c["id2label"].is_object()) {
        const json& m = c["id2label"];
        json labels = json::array();
        for (size_t i = 0; i < m.size(); ++i) {
          const std::string k = std::to_string(i);
          if (!m.contains(k) || !m[k].is_string()) {
            labels = json();
            break;
          }
          labels.push_back(m[k]);
        }
        if (labels.is_array()) put("labels", labels, "id2label");
      }
    }
  }
  json p;
  const std::string pre = d + "/preprocessor_config.json";
  if (read_json(pre, p)) {
    if (p.contains("image_mean")) sc.values["mean"] = p["image_mean"], sc.source["mean"] = "preprocessor_config.json (" + pre + ")";
    if (p.contains("image_std")) sc.values["std"] = p["image_std"], sc.source["std"] = "preprocessor_config.json (" + pre + ")";
  }
  add_hf_side_config(d, sc);  // the other Hugging Face keys (weights_hf.cpp)
  return sc;
}

ViTWeights build_model(const RawWeights& raw_in, const SideConfig& side, const ModelOverrides& ov) {
  const FileConfig side_fc = parse_config(raw_in.path + " (side config)", side.values, [&](const std::string& k) {
    auto it = side.source.find(k);
    return it == side.source.end() ? std::string("config.json") : it->second;
  });
  const FileConfig file_fc =
      parse_config(raw_in.path, raw_in.config,
                   [&](const std::string&) { return raw_in.config_where + " (" + raw_in.path + ")"; });
  const FileConfig fc = merge_config(side_fc, file_fc);
  if (ov.num_heads && *ov.num_heads <= 0) throw Error("--heads must be positive");
  std::string stripped;
  bool wrapped = false;
  for (const auto& kv : raw_in.tensors)
    for (const char* p : {"module.", "backbone.", "model."}) wrapped = wrapped || starts_with(kv.first, p);
  RawWeights stripped_raw;
  if (wrapped) stripped_raw = strip_prefixes(raw_in, stripped);  // a copy only when some name is wrapped
  const RawWeights& raw = wrapped ? stripped_raw : raw_in;
  auto has = [&](const std::string& k) { return raw.tensors.count(k) != 0; };
  ViTWeights w;
  float eps = 1e-6f;
  std::string eps_src = "default (timm 1e-6)";
  if (has("W_Q")) {
    w = build_seed(raw, fc, ov);
  } else if (has("embeddings.patch_embeddings.projection.weight") || has("vit.embeddings.patch_embeddings.projection.weight")) {
    const Scheme sc = hf_scheme(has("vit.embeddings.patch_embeddings.projection.weight"));
    w = build_vit(raw, sc, stripped, fc, ov);
    eps = 1e-12f;
    eps_src = "default (Hugging Face ViTConfig 1e-12)";
  } else if (has("conv_proj.weight") || has("class_token")) {
    const Scheme sc = torchvision_scheme(raw);
    w = build_vit(raw, sc, stripped, fc, ov);
    eps_src = "default (torchvision 1e-6)";
  } else if (has("patch_embed.proj.weight") || has("cls_token")) {
    Scheme sc;
    if (has("register_tokens") || has("mask_token")) sc.layout = "dinov2";
    w = build_vit(raw, sc, stripped, fc, ov);
  } else {
    throw Error(raw.path +
                ": unknown weights layout: none of 'patch_embed.proj.weight' (timm/DINO), "
                "'embeddings.patch_embeddings.projection.weight' (Hugging Face), 'conv_proj.weight' (torchvision), "
                "'W_Q' (seed)");
  }
  apply_common(w.hp, fc, ov, raw.path, eps, eps_src);
  // The command line wins over the weights' own config, but a user should see that it did.
  auto rgb = [](const std::array<float, 3>& v) {
    std::ostringstream o;
    o << v[0] << ", " << v[1] << ", " << v[2];
    return o.str();
  };
  if (ov.mean && fc.mean && *ov.mean != *fc.mean)
    w.notices.push_back("--mean " + rgb(*ov.mean) + " overrides mean " + rgb(*fc.mean) + " from " + src_of(fc, "mean"));
  if (ov.std && fc.std && *ov.std != *fc.std)
    w.notices.push_back("--std " + rgb(*ov.std) + " overrides std " + rgb(*fc.std) + " from " + src_of(fc, "std"));
  const size_t pos_rows = w.pos_embed.size() / static_cast<size_t>(w.hp.dim);
  const size_t want_rows = static_cast<size_t>(w.hp.layout == "seed" ? w.hp.tokens() : w.hp.pos_prefix + w.hp.grid_w * w.hp.grid_h);
  if (!w.pos_embed.empty() && pos_rows != want_rows)
    throw Error(raw.path + ": pos_embed has " + std::to_string(pos_rows) + " rows, expected " + std::to_string(want_rows));
  if (!w.head.present() && !w.hp.labels.empty()) w.notices.push_back("config labels given but no classifier head");
  if (w.head.present() && !w.hp.labels.empty() && static_cast<int>(w.hp.labels.size()) != w.head.out)
    w.notices.push_back("config has " + std::to_string(w.hp.labels.size()) + " labels but the classifier head has " +
                        std::to_string(w.head.out) + " classes");
  for (auto& n : raw.notices) w.notices.push_back(n);
  add_side_notice(w, side.notices);
  check_hf_side_config(w, side);  // config.json hidden_size / num_hidden_layers against the weights
  for (const auto& kv : raw_in.tensors) w.param_count += kv.second.numel();
  return w;
}

ViTWeights build_model(const RawWeights& raw, const ModelOverrides& ov) { return build_model(raw, SideConfig{}, ov); }

ViTWeights load_model(const std::string& path, const ModelOverrides& ov) {
  if (auto hf = load_model_hf(path, ov)) return std::move(*hf);  // a Hugging Face folder or sharded index
  // Dispatch by content: safetensors when the first 8 bytes are a little-endian length that fits in the file
  // and the header after them opens with '{'; otherwise JSON when the first non-blank byte is '{'; otherwise
  // safetensors when byte 8 is '{' (a broken length, reported as such); anything else is not a weights file.
  char first = 0;
  bool st = false, broken_st = false;
  unsigned char head[9] = {};
  {
    std::error_code ec;  // a FIFO or device would hang the read below; a folder would mislead
    const std::filesystem::file_status fst = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(fst) && !std::filesystem::is_regular_file(fst)) throw Error(path + ": not a regular file");
    errno = 0;
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) {
      const int err = errno;  // ifstream over open(2): errno says why (No such file, Permission denied)
      throw Error(path + ": cannot open weights file" + (err ? std::string(": ") + std::strerror(err) : std::string()));
    }
    const auto size = static_cast<uint64_t>(f.tellg());
    f.seekg(0);
    if (size >= 9 && f.read(reinterpret_cast<char*>(head), 9)) {
      uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | head[i];
      st = head[8] == '{' && n <= size - 8;
      broken_st = head[8] == '{' && !st;  // a safetensors header whose length is wrong: say so
    }
    f.clear();
    f.seekg(0);
    char c = 0;
    while (!st && f.get(c)) {  // first non-blank byte
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
        first = c;
        break;
      }
    }
  }
  const bool is_json = !st && first == '{';
  const PthSniff pth = st ? PthSniff::NotPth : sniff_pth(reinterpret_cast<const uint8_t*>(head), sizeof head);
  if (pth == PthSniff::LegacyPickle) refuse_legacy_pth(path);
  if (ov.key && pth != PthSniff::Zip)
    throw Error(path + ": --key picks an entry of a PyTorch checkpoint (torch.save); this file is " +
                (is_json ? "attnmap JSON" : st ? "safetensors" : "not a PyTorch checkpoint"));
  RawWeights raw;
  PthInfo pth_info;
  if (pth == PthSniff::Zip) {
    raw = load_weights_pth(path, ov.key.value_or(""), &pth_info);
  } else if (is_json || st || (broken_st && first != '{')) {
    raw = is_json ? load_weights_json(path) : load_weights_safetensors(path);
  } else {
    try {
      raw = load_weights_safetensors(path);
    } catch (const Error& e) {
      std::string why = e.what();
      if (why.rfind(path + ": ", 0) == 0) why = why.substr(path.size() + 2);
      throw Error(path + ": not a weights file: not attnmap JSON (does not start with '{') and not safetensors (" +
                  why + ")");
    }
  }
  const SideConfig side = read_side_config(side_config_dir(path));
  ViTWeights w = build_model(raw, side, ov);
  w.format = pth == PthSniff::Zip ? "pth" : is_json ? "json" : "safetensors";
  w.pth_holds = pth_info.holds;
  w.pth_used = pth_info.used;
  return w;
}

}  // namespace attnmap
