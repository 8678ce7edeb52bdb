#include "weights.hpp"

#include <cmath>
#include <set>

#include "error.hpp"

namespace attnmap {

namespace {

using nlohmann::json;

// Looks tensors up by name, checks shapes, remembers which keys were used.
class Loader {
 public:
  explicit Loader(const RawWeights& raw) : raw_(raw) {}

  const Tensor* find(const std::string& name) {
    auto it = raw_.tensors.find(name);
    if (it == raw_.tensors.end()) return nullptr;
    used_.insert(name);
    return &it->second;
  }
  bool has(const std::string& name) const { return raw_.tensors.count(name) != 0; }

  const Tensor& need(const std::string& name, const std::string& expected) {
    const Tensor* t = find(name);
    if (!t) throw Error(raw_.path + ": missing tensor '" + name + "' (expected shape " + expected + ")");
    return *t;
  }

  /// The tensor's data, which must have exactly `shape`.
  std::vector<float> take(const std::string& name, const std::vector<int64_t>& shape) {
    const Tensor& t = need(name, shape_str(shape));
    if (t.shape != shape) throw shape_error(name, shape_str(shape), t.shape);
    return t.data;
  }
  /// Optional tensor of exactly `shape`; empty when absent.
  std::vector<float> take_opt(const std::string& name, const std::vector<int64_t>& shape) {
    if (!has(name)) return {};
    return take(name, shape);
  }

  Error shape_error(const std::string& name, const std::string& expected, const std::vector<int64_t>& found) const {
    return Error(raw_.path + ": tensor '" + name + "' has shape " + shape_str(found) + ", expected " + expected);
  }

  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (const auto& kv : raw_.tensors)
      if (!used_.count(kv.first)) out.push_back(kv.first);
    return out;
  }

  const std::string& path() const { return raw_.path; }

 private:
  const RawWeights& raw_;
  std::set<std::string> used_;
};

int64_t dim(const Tensor& t, int i) { return t.shape[static_cast<size_t>(i)]; }

int to_int(int64_t v, const std::string& what) {
  if (v <= 0 || v > (1 << 24)) throw Error(what + ": dimension " + std::to_string(v) + " out of range");
  return static_cast<int>(v);
}

// ---- config -----------------------------------------------------------------------------------------

struct FileConfig {
  std::optional<int> num_heads, patch_size, image_w, image_h, default_layer;
  std::optional<float> eps;
  std::optional<std::array<float, 3>> mean, std;
  std::optional<std::string> default_head;
  std::vector<std::string> labels;
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

FileConfig parse_config(const std::string& path, const json& c) {
  FileConfig fc;
  if (c.contains("num_heads")) fc.num_heads = config_int(path, c, "num_heads");
  if (c.contains("patch_size")) fc.patch_size = config_int(path, c, "patch_size");
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
  }
  if (c.contains("layer_norm_eps")) {
    const json& v = c.at("layer_norm_eps");
    if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
      config_error(path, "layer_norm_eps", "a non-negative number", v);
    fc.eps = v.get<float>();
  }
  if (c.contains("mean")) fc.mean = config_rgb(path, c, "mean");
  if (c.contains("std")) fc.std = config_rgb(path, c, "std");
  if (c.contains("labels")) {
    const json& v = c.at("labels");
    if (!v.is_array()) config_error(path, "labels", "an array of strings", v);
    for (const json& s : v) {
      if (!s.is_string()) config_error(path, "labels", "an array of strings", v);
      fc.labels.push_back(s.get<std::string>());
    }
  }
  if (c.contains("default_layer")) fc.default_layer = config_int(path, c, "default_layer");
  if (c.contains("default_head")) {
    const json& v = c.at("default_head");
    if (v.is_string()) {
      fc.default_head = v.get<std::string>();
    } else if (v.is_number_integer()) {
      fc.default_head = std::to_string(v.get<int>());
    } else {
      config_error(path, "default_head", "\"mean\", \"max\", \"min\" or a head index", v);
    }
  }
  return fc;
}

// Applies config + overrides that every layout shares.
void apply_common(HParams& hp, const FileConfig& fc, const ModelOverrides& ov, const std::string& path) {
  const std::string from_file = "config (" + path + ")";
  hp.source["layer_norm_eps"] = "default (timm 1e-6)";
  if (fc.eps) {
    hp.eps = *fc.eps;
    hp.source["layer_norm_eps"] = from_file;
  }
  hp.source["mean"] = hp.source["std"] = "default (ImageNet)";
  if (fc.mean) {
    hp.mean = *fc.mean;
    hp.source["mean"] = from_file;
  }
  if (fc.std) {
    hp.std = *fc.std;
    hp.source["std"] = from_file;
  }
  if (ov.mean) {
    hp.mean = *ov.mean;
    hp.source["mean"] = "command line";
  }
  if (ov.std) {
    hp.std = *ov.std;
    hp.source["std"] = "command line";
  }
  for (float s : hp.std)
    if (!(s > 0)) throw Error(path + ": std must be positive in every channel");
  hp.labels = fc.labels;
  hp.default_layer = fc.default_layer;
  hp.default_head = fc.default_head;
}

// Grid from the config's image size or, failing that, a square number of positions.
void resolve_grid(HParams& hp, const FileConfig& fc, int64_t n_patches, bool have_positions,
                  const std::string& path, const std::string& pos_name) {
  if (fc.image_w) {
    if (*fc.image_w <= 0 || *fc.image_h <= 0 || *fc.image_w % hp.patch || *fc.image_h % hp.patch) {
      throw Error(path + ": config image_size " + std::to_string(*fc.image_h) + "x" + std::to_string(*fc.image_w) +
                  " is not a positive multiple of the patch size " + std::to_string(hp.patch));
    }
    hp.image_w = *fc.image_w;
    hp.image_h = *fc.image_h;
    hp.source["image_size"] = "config (" + path + ")";
  } else if (have_positions) {
    const auto g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n_patches))));
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

// ---- timm / DINO layout -----------------------------------------------------------------------------

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

ViTWeights build_timm(const RawWeights& raw, const FileConfig& fc, const ModelOverrides& ov) {
  Loader ld(raw);
  const std::string& path = raw.path;
  ViTWeights w;
  HParams& hp = w.hp;
  hp.layout = "timm";

  const Tensor& pe = ld.need("patch_embed.proj.weight", "(D, 3, P, P)");
  if (pe.rank() != 4 || dim(pe, 1) != 3 || dim(pe, 2) != dim(pe, 3))
    throw ld.shape_error("patch_embed.proj.weight", "(D, 3, P, P)", pe.shape);
  const int64_t D = dim(pe, 0);
  hp.dim = to_int(D, path + ": patch_embed.proj.weight");
  hp.patch = to_int(dim(pe, 2), path + ": patch size");
  hp.source["patch_size"] = "inferred from patch_embed.proj.weight";
  if (fc.patch_size && *fc.patch_size != hp.patch) {
    throw Error(path + ": config patch_size " + std::to_string(*fc.patch_size) +
                " does not match patch_embed.proj.weight " + shape_str(pe.shape));
  }
  w.patch_embed.weight = pe.data;  // (D, 3, P, P) == (D, 3*P*P) in (channel, row, column) order
  w.patch_embed.out = hp.dim;
  w.patch_embed.in = 3 * hp.patch * hp.patch;
  w.patch_embed.bias = ld.take_opt("patch_embed.proj.bias", {D});

  const Tensor& cls = ld.need("cls_token", "(1, 1, D)");
  if (cls.numel() != D) throw ld.shape_error("cls_token", shape_str({1, 1, D}), cls.shape);
  w.cls_token = cls.data;

  const Tensor& pos = ld.need("pos_embed", "(1, 1+N, D)");
  if (!((pos.rank() == 3 && dim(pos, 0) == 1) || pos.rank() == 2) || pos.shape.back() != D || dim(pos, pos.rank() - 2) < 2)
    throw ld.shape_error("pos_embed", "(1, 1+N, " + std::to_string(D) + ")", pos.shape);
  const int64_t n_pos = dim(pos, pos.rank() - 2);
  resolve_grid(hp, fc, n_pos - 1, true, path, "pos_embed");
  w.pos_embed = pos.data;

  int depth = 0;
  while (ld.has("blocks." + std::to_string(depth) + ".attn.qkv.weight") ||
         ld.has("blocks." + std::to_string(depth) + ".norm1.weight"))
    ++depth;
  if (depth == 0) throw Error(path + ": missing tensor 'blocks.0.attn.qkv.weight' (no encoder blocks found)");
  hp.depth = depth;
  hp.source["depth"] = "inferred from the block count";

  if (ov.num_heads) {
    hp.num_heads = *ov.num_heads;
    hp.source["num_heads"] = "command line";
  } else if (fc.num_heads) {
    hp.num_heads = *fc.num_heads;
    hp.source["num_heads"] = "config (" + path + ")";
  } else {
    hp.num_heads = hp.dim % 64 == 0 ? hp.dim / 64 : 1;
    hp.source["num_heads"] = "default (D/64)";
    w.notices.push_back("number of heads not given; assuming D/64 = " + std::to_string(hp.num_heads) +
                        " (set config num_heads or --heads)");
  }
  if (hp.num_heads <= 0 || hp.dim % hp.num_heads != 0) {
    throw Error(path + ": " + std::to_string(hp.num_heads) + " heads do not divide the token width D = " +
                std::to_string(hp.dim));
  }
  hp.head_dim = hp.dim / hp.num_heads;

  for (int i = 0; i < depth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    BlockWeights blk;
    blk.norm1 = take_norm(ld, b + "norm1", D);
    blk.qkv = take_linear(ld, b + "attn.qkv", 3 * D, D);
    blk.proj = take_linear(ld, b + "attn.proj", D, D);
    blk.norm2 = take_norm(ld, b + "norm2", D);
    const Tensor& fc1 = ld.need(b + "mlp.fc1.weight", "(M, D)");
    if (fc1.rank() != 2 || dim(fc1, 1) != D) throw ld.shape_error(b + "mlp.fc1.weight", "(M, " + std::to_string(D) + ")", fc1.shape);
    const int64_t M = dim(fc1, 0);
    blk.fc1 = take_linear(ld, b + "mlp.fc1", M, D);
    blk.fc2 = take_linear(ld, b + "mlp.fc2", D, M);
    hp.mlp_dim = static_cast<int>(M);
    w.blocks.push_back(std::move(blk));
  }
  if (ld.has("norm.weight")) w.norm = take_norm(ld, "norm", D);
  if (ld.has("head.weight")) {
    const Tensor& h = ld.need("head.weight", "(C, D)");
    if (h.rank() != 2 || dim(h, 1) != D) throw ld.shape_error("head.weight", "(C, " + std::to_string(D) + ")", h.shape);
    w.head = take_linear(ld, "head", dim(h, 0), D);
  }
  const auto unused = ld.unused();
  if (!unused.empty()) {
    std::string s;
    for (size_t i = 0; i < unused.size() && i < 8; ++i) s += (i ? ", " : "") + unused[i];
    if (unused.size() > 8) s += ", ... (" + std::to_string(unused.size()) + " in all)";
    w.notices.push_back("ignored tensors not used for attention maps: " + s);
  }
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
  Loader ld(raw);
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
  const std::vector<float> q = wq.data;
  const std::vector<float> k = ld.take("W_K", {D, dk});
  const std::vector<float> v = ld.take("W_V", {D, dk});

  if (ld.has("W_E")) {
    const Tensor& we = ld.need("W_E", "(3*P*P, D)");
    if (we.rank() != 2 || dim(we, 1) != D) throw ld.shape_error("W_E", "(3*P*P, " + std::to_string(D) + ")", we.shape);
    hp.patch = patch_from(dim(we, 0), fc.patch_size, path, "W_E");
    const int64_t in = dim(we, 0);
    w.patch_embed.out = hp.dim;
    w.patch_embed.in = static_cast<int>(in);
    w.patch_embed.weight.resize(static_cast<size_t>(in * D));
    for (int64_t r = 0; r < in; ++r)
      for (int64_t c = 0; c < D; ++c) w.patch_embed.weight[static_cast<size_t>(c * in + r)] = we.data[static_cast<size_t>(r * D + c)];
    w.patch_embed.bias = ld.take_opt("b_E", {D});
    hp.source["patch_size"] = fc.patch_size ? "config (" + path + ")" : "inferred from W_E";
  } else {
    hp.patch = patch_from(D, fc.patch_size, path, "W_Q (no W_E: the token is the pixel vector)");
    hp.source["patch_size"] = fc.patch_size ? "config (" + path + ")" : "inferred from D = 3*P*P";
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
  const std::vector<float>* mats[3] = {&q, &k, &v};
  for (int m = 0; m < 3; ++m)
    for (int64_t r = 0; r < D; ++r)
      for (int64_t c = 0; c < dk; ++c)
        blk.qkv.weight[static_cast<size_t>((m * dk + c) * D + r)] = (*mats[m])[static_cast<size_t>(r * dk + c)];
  w.blocks.push_back(std::move(blk));
  const auto unused = ld.unused();
  if (!unused.empty()) w.notices.push_back("ignored tensors: " + unused.front() + (unused.size() > 1 ? ", ..." : ""));
  return w;
}

}  // namespace

ViTWeights build_model(const RawWeights& raw, const ModelOverrides& ov) {
  const FileConfig fc = parse_config(raw.path, raw.config);
  if (ov.num_heads && *ov.num_heads <= 0) throw Error("--heads must be positive");
  ViTWeights w;
  if (raw.tensors.count("W_Q")) {
    w = build_seed(raw, fc, ov);
  } else if (raw.tensors.count("patch_embed.proj.weight") || raw.tensors.count("cls_token")) {
    w = build_timm(raw, fc, ov);
  } else {
    throw Error(raw.path + ": unknown weights layout: no 'patch_embed.proj.weight' (timm/DINO) and no 'W_Q' (seed)");
  }
  apply_common(w.hp, fc, ov, raw.path);
  const size_t pos_rows = w.pos_embed.size() / static_cast<size_t>(w.hp.dim);
  if (!w.pos_embed.empty() && pos_rows != static_cast<size_t>(w.hp.tokens()))
    throw Error(raw.path + ": pos_embed has " + std::to_string(pos_rows) + " rows, expected " +
                std::to_string(w.hp.tokens()));
  if (!w.head.present() && !w.hp.labels.empty()) w.notices.push_back("config labels given but no classifier head");
  for (auto& n : raw.notices) w.notices.push_back(n);
  return w;
}

ViTWeights load_model(const std::string& path, const ModelOverrides& ov) {
  return build_model(load_weights_json(path), ov);
}

}  // namespace attnmap
