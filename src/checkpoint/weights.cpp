#include "checkpoint/weights.hpp"

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <iterator>
#include <set>
#include <sstream>

#include "checkpoint/file_config.hpp"
#include "checkpoint/schemes.hpp"
#include "checkpoint/vit_loader.hpp"
#include "checkpoint/weights_hf.hpp"
#include "checkpoint/weights_pth.hpp"
#include "checkpoint/weights_safetensors.hpp"

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "io/mapped_file.hpp"

namespace attnmap {

namespace {

using nlohmann::json;

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// ---- config -----------------------------------------------------------------------------------------

[[noreturn]] void config_error(const std::string& path, const std::string& key, const std::string& expected,
                               const json& found) {
  throw Error(path + ": config \"" + key + "\" must be " + expected + ", found " + found.dump().substr(0, 60));
}

int config_int(const std::string& path, const json& c, const char* key) {
  const json& v = c.at(key);
  if (!v.is_number_integer()) config_error(path, key, "an integer", v);
  if (v.is_number_unsigned() ? v.get<uint64_t>() > (1u << 24) : (v.get<int64_t>() < -(1 << 24) || v.get<int64_t>() > (1 << 24)))
    config_error(path, key, "an integer from -16777216 to 16777216 (2^24)", v);
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

// A string value parsed by `parse` (parse_activation, parse_pool); anything else is a config error naming `names`.
template <class Parse>
auto config_named(const std::string& path, const json& c, const char* key, Parse parse, const char* names) {
  try {
    return parse(config_string(path, c, key));
  } catch (const Error&) {
    config_error(path, key, std::string("one of ") + names, c.at(key));
  }
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
  if (c.contains("architecture")) {  // timm's model name; a hub id "hf-hub:timm/NAME" or "timm/NAME" names the same
    std::string a = config_string(path, c, "architecture");
    for (const char* prefix : {"hf-hub:", "timm/"})
      if (a.rfind(prefix, 0) == 0) a.erase(0, std::char_traits<char>::length(prefix));
    fc.architecture = a, mark("architecture");
  }
  if (c.contains("labels")) {
    const json& v = c.at("labels");
    if (!v.is_array()) config_error(path, "labels", "an array of strings", v);
    for (const json& s : v) {
      if (!s.is_string()) config_error(path, "labels", "an array of strings", v);
      fc.labels.push_back(s.get<std::string>());
    }
    mark("labels");
  }
  if (c.contains("act")) fc.act = config_named(path, c, "act", parse_activation, "gelu, gelu-tanh or quickgelu"), mark("act");
  if (c.contains("pool")) fc.pool = config_named(path, c, "pool", parse_pool, "cls, mean, mean-all or map"), mark("pool");
  if (c.contains("hf_config")) fc.hf_config = true;
  for (const char* k : kEvaArgs)  // timm Eva's rotary settings, checked where they are read (vit_loader_eva.cpp)
    if (c.contains(k)) fc.eva_args[k] = c.at(k), mark(k);
  for (const char* k : kHfBeitArgs)  // Hugging Face BeitConfig's switches, checked in vit_loader_beit.cpp
    if (c.contains(k)) fc.beit_args[k] = c.at(k), mark(k);
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
  take(lo.act, hi.act);
  take(lo.pool, hi.pool);
  if (!hi.labels.empty()) lo.labels = hi.labels;
  for (const auto& kv : hi.eva_args.items()) lo.eva_args[kv.key()] = kv.value();
  for (const auto& kv : hi.beit_args.items()) lo.beit_args[kv.key()] = kv.value();
  lo.hf_config = lo.hf_config || hi.hf_config;
  for (const auto& kv : hi.src) lo.src[kv.first] = kv.second;
  return lo;
}

}  // namespace

std::string src_of(const FileConfig& fc, const std::string& key) {
  auto it = fc.src.find(key);
  return it == fc.src.end() ? std::string("config") : it->second;
}

namespace {

// Applies config + overrides that every layout shares.
void apply_common(HParams& hp, const FileConfig& fc, const ModelOverrides& ov, const std::string& path) {
  const LayoutInfo& info = layout_info(hp.layout);
  hp.eps = info.eps;
  hp.source["layer_norm_eps"] = info.eps_why;
  // A value given replaces the default, and its source is recorded under `key` (inspect's source column).
  auto take = [&hp](const auto& given, auto& value, const char* key, const std::string& source) {
    if (!given) return;
    value = *given;
    hp.source[key] = source;
  };
  take(fc.eps, hp.eps, "layer_norm_eps", src_of(fc, "layer_norm_eps"));
  if (info.stats == Stats::Clip) {  // OpenAI CLIP's _transform (OPENAI_CLIP_MEAN / STD in timm)
    hp.mean = {0.48145466f, 0.4578275f, 0.40821073f};
    hp.std = {0.26862954f, 0.26130258f, 0.27577711f};
    hp.source["mean"] = hp.source["std"] = std::string("default (CLIP, for the ") + info.name + " layout)";
  } else if (info.stats == Stats::Half) {  // SigLIP: (0.5, 0.5, 0.5) both
    hp.mean = hp.std = {0.5f, 0.5f, 0.5f};
    hp.source["mean"] = hp.source["std"] = std::string("default (0.5, for the ") + info.name + " layout)";
  } else {
    hp.source["mean"] = hp.source["std"] = "default (ImageNet)";
  }
  if (hp.layout == Layout::Eva) {  // DINOv3 eps 1e-5, EVA-02 CLIP mean / std (vit_loader_eva.cpp)
    eva_defaults(hp);
    take(fc.eps, hp.eps, "layer_norm_eps", src_of(fc, "layer_norm_eps"));
  }
  take(fc.mean, hp.mean, "mean", src_of(fc, "mean"));
  take(fc.std, hp.std, "std", src_of(fc, "std"));
  take(ov.mean, hp.mean, "mean", "command line");
  take(ov.std, hp.std, "std", "command line");
  for (float s : hp.std)
    if (!(s > 0)) throw Error(path + ": std must be positive in every channel");
  if (hp.layout == Layout::Clip || hp.layout == Layout::HfClip) {
    // OpenAI CLIP's _transform, open_clip's image_transform and HF's CLIPImageProcessor: the shorter side to the
    // input size, then a centre crop of it (timm's crop_pct 1.0), not timm's 0.875
    hp.crop_pct = 1.0f;
    hp.source["crop_pct"] = std::string("default (CLIP's preprocessing: shorter side to the input size, centre "
                                        "crop; for the ") + info.name + " layout)";
  }
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

}  // namespace

int to_int(int64_t v, const std::string& what) {
  if (v <= 0 || v > (1 << 24)) throw Error(what + ": dimension " + std::to_string(v) + " out of range");
  return static_cast<int>(v);
}

void resolve_grid(HParams& hp, const FileConfig& fc, int64_t n_patches, bool have_positions,
                  const std::string& path, const std::string& pos_name, const std::string& default_why) {
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
    hp.source["image_size"] = default_why;
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



int heads_from_architecture(const std::string& arch, int dim) {
  // Size words of timm's vision_transformer.py / deit.py model definitions: their token width and heads.
  static const struct {
    const char* word;
    int dim, heads;
  } kSizes[] = {
      {"tiny", 192, 3},     {"small", 384, 6},     {"base", 768, 12},    {"large", 1024, 16}, {"huge", 1280, 16},
      {"giant", 1408, 16},  {"gigantic", 1664, 16}, {"medium", 512, 8},  {"mediumd", 512, 8}, {"so400m", 1152, 16},
      {"little", 320, 5},   {"betwixt", 640, 10},   {"wee", 256, 4},      {"pwee", 256, 4},
  };
  std::string a = arch.substr(0, arch.find('.'));  // drop a pretrained tag such as ".augreg_in21k"
  // DINOv2's giant (vit_giant_patch14_dinov2 and its _reg4 form): D = 1536, 24 heads, unlike timm's giant.
  if (a.find("giant") != std::string::npos && a.find("dinov2") != std::string::npos)
    return dim == 0 || dim == 1536 ? 24 : 0;
  for (const char* fam : {"vit_", "deit3_", "deit_", "beit_", "beitv2_", "mae_vit_"}) {
    if (!starts_with(a, fam)) continue;
    const std::string rest = a.substr(std::string(fam).size());
    const std::string word = rest.substr(0, rest.find('_'));
    for (const auto& s : kSizes)
      if (word == s.word) return dim == 0 || dim == s.dim ? s.heads : 0;
  }
  return 0;
}

namespace {

// OpenCLIP's hub export (open_clip/push_to_hf_hub.py): {"model_cfg": {"quick_gelu", "vision_cfg": {"width",
// "head_width", "image_size", "patch_size", ...}}, "preprocess_cfg": {"mean", "std"}}.
template <class ReadJson>
void read_open_clip_config(const std::string& file, ReadJson read_json, SideConfig& sc) {
  json c;
  if (!read_json(file, c)) return;
  auto put = [&](const char* key, const json& v, const std::string& from) {
    sc.values[key] = v;
    sc.source[key] = "open_clip_config.json (" + file + ": " + from + ")";
  };
  const json mc = c.value("model_cfg", json::object());
  if (!mc.is_object()) throw Error(file + ": \"model_cfg\" must be an object");
  put("act", mc.value("quick_gelu", false) ? "quickgelu" : "gelu", "model_cfg.quick_gelu");
  const json vc = mc.value("vision_cfg", json::object());
  if (vc.is_object() && vc.contains("timm_model_name")) {  // a timm trunk (timm_model.py TimmModel): timm's settings
    put("architecture", vc["timm_model_name"], "model_cfg.vision_cfg.timm_model_name");
    if (vc.contains("image_size")) put("image_size", vc["image_size"], "model_cfg.vision_cfg.image_size");
    std::string act_from = "model_cfg.vision_cfg.timm_model_name: a timm trunk, whose blocks use timm's nn.GELU "
                           "(model_cfg.quick_gelu is for open_clip's own towers)";
    json act = "gelu";
    const json kw = vc.value("timm_model_kwargs", json::object());  // passed to timm.create_model
    if (kw.is_object()) {
      for (const char* k : {"num_heads", "img_size", "patch_size"})
        if (kw.contains(k))
          put(std::string(k) == "img_size" ? "image_size" : k, kw[k], std::string("model_cfg.vision_cfg.timm_model_kwargs.") + k);
      if (kw.contains("act_layer")) act = kw["act_layer"], act_from = "model_cfg.vision_cfg.timm_model_kwargs.act_layer";
    }
    put("act", act, act_from);
  } else if (vc.is_object()) {
    if (vc.contains("image_size")) put("image_size", vc["image_size"], "model_cfg.vision_cfg.image_size");
    if (vc.contains("patch_size")) put("patch_size", vc["patch_size"], "model_cfg.vision_cfg.patch_size");
    const json nk = vc.value("norm_kwargs", json::object());
    if (nk.is_object() && nk.contains("eps")) put("layer_norm_eps", nk["eps"], "model_cfg.vision_cfg.norm_kwargs.eps");
    if (vc.contains("act_kwargs") && !vc["act_kwargs"].empty())
      throw Error(file + ": model_cfg.vision_cfg.act_kwargs " + vc["act_kwargs"].dump().substr(0, 60) +
                  ": attnmap runs OpenCLIP's activations without arguments");
    if (vc.contains("width") && vc["width"].is_number_integer()) {
      const int64_t width = vc["width"].get<int64_t>();
      const int64_t hw = vc.contains("head_width") && vc["head_width"].is_number_integer() ? vc["head_width"].get<int64_t>() : 64;
      if (hw > 0 && width % hw == 0) put("num_heads", width / hw, "model_cfg.vision_cfg.width / head_width");
    }
  }
  const json pc = c.value("preprocess_cfg", json::object());
  if (pc.is_object()) {
    if (pc.contains("mean")) put("mean", pc["mean"], "preprocess_cfg.mean");
    if (pc.contains("std")) put("std", pc["std"], "preprocess_cfg.std");
  }
}

// The folder whose config.json / preprocessor_config.json go with the weights file `path`.
std::string side_config_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}
}  // namespace

std::vector<std::string> model_files(const std::string& path) {
  if (auto hf = model_files_hf(path)) return *hf;  // a Hugging Face folder or sharded index (weights_hf.cpp)
  const std::string d = side_config_dir(path);
  return {path, d + "/config.json", d + "/preprocessor_config.json", d + "/open_clip_config.json"};
}

bool read_side_json(SideConfig& sc, const std::string& file, json& out, const char* what) {
  auto cached = sc.texts.find(file);
  if (cached == sc.texts.end()) {
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::status(file, ec);
    if (!std::filesystem::exists(st)) return false;
    if (!std::filesystem::is_regular_file(st))
      throw Error(file + ": not a regular file (a folder, device or FIFO), read as " + what);
    const std::vector<uint8_t> bytes = read_file(file);  // one read: parsed and hashed from these bytes
    cached = sc.texts.emplace(file, std::string(bytes.begin(), bytes.end())).first;
    sc.files.push_back({file, sha256_text(cached->second)});
  }
  try {
    out = json::parse(cached->second);
  } catch (const json::parse_error& e) {
    throw Error(file + ": " + json_syntax_error(cached->second, e.byte) + " (read as " + what + ")");
  } catch (const json::exception&) {  // out_of_range 406: a number beyond a double
    throw Error(file + ": malformed JSON: a number beyond the range of a double (read as " + std::string(what) + ")");
  }
  if (!out.is_object()) throw Error(file + ": not a JSON object (read as " + std::string(what) + ")");
  return true;
}

SideConfig read_side_config(const std::string& dir) {
  SideConfig sc;
  auto read_json = [&sc](const std::string& file, json& out) { return read_side_json(sc, file, out); };
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
        for (const char* k : kEvaArgs)  // timm Eva's rotary settings (vit_loader_eva.cpp)
          if (ma.contains(k)) put(k, ma[k], std::string("model_args.") + k);
        if (c.contains("global_pool") && !ma.contains("global_pool")) put("global_pool", c["global_pool"], "global_pool");
      }
      if (c.contains("label_names")) put("labels", c["label_names"], "label_names");
    } else {  // Hugging Face PretrainedConfig; CLIPConfig keeps the vision tower's under "vision_config"
      const bool nested = c.contains("vision_config") && c["vision_config"].is_object();
      const json& v = nested ? c["vision_config"] : c;
      const std::string at = nested ? "vision_config." : "";
      sc.values["hf_config"] = true;
      if (v.contains("num_attention_heads")) {
        put("num_heads", v["num_attention_heads"], at + "num_attention_heads");
      } else if (c.contains("model_type")) {  // save_pretrained drops values equal to the class default
        put("num_heads", 12, "num_attention_heads not given: the config class's default 12");
      }
      if (v.contains("layer_norm_eps")) put("layer_norm_eps", v["layer_norm_eps"], at + "layer_norm_eps");
      if (v.contains("image_size")) put("image_size", v["image_size"], at + "image_size");
      if (v.contains("patch_size")) put("patch_size", v["patch_size"], at + "patch_size");
      if (v.contains("hidden_act")) put("act", v["hidden_act"], at + "hidden_act");
      // BeitConfig / Data2VecVisionConfig (issue 44): what the classifier reads; save_pretrained omits the default true
      const std::string type = c.contains("model_type") && c["model_type"].is_string() ? c["model_type"].get<std::string>() : "";
      if (v.contains("use_mean_pooling") && v["use_mean_pooling"].is_boolean())
        put("pool", v["use_mean_pooling"].get<bool>() ? "mean" : "cls", at + "use_mean_pooling");
      else if (type == "beit" || type == "data2vec-vision")
        put("pool", "mean", "use_mean_pooling not given: the config class's default true");
      for (const char* k : kHfBeitArgs) {
        if (v.contains(k))
          put(k, v[k], at + k);
        else if (type == "beit" || type == "data2vec-vision")  // BeitConfig's defaults
          put(k, std::string(k) == "layer_scale_init_value" ? json(0.1) : json(false), std::string(k) + " not given: the config class's default");
      }
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
  read_open_clip_config(d + "/open_clip_config.json", read_json, sc);
  json p;
  const std::string pre = d + "/preprocessor_config.json";
  if (read_json(pre, p)) {
    if (p.contains("image_mean")) sc.values["mean"] = p["image_mean"], sc.source["mean"] = "preprocessor_config.json (" + pre + ")";
    if (p.contains("image_std")) sc.values["std"] = p["image_std"], sc.source["std"] = "preprocessor_config.json (" + pre + ")";
  }
  add_hf_side_config(d, sc);  // the other Hugging Face keys (weights_hf.cpp)
  return sc;
}

namespace {

// A CLIP's text tower, handed over raw (checkpoint cannot build it; model/clip_text.hpp does): which family's
// names (text_layout), the file's text settings (text_config: open_clip_config.json "model_cfg", a Hugging
// Face config.json whole), and with ov.keep_text its tensors (names with wrappers removed), then listed as read.
// A whole SigLIP (issue 43) likewise: Hugging Face SiglipModel ("hugging_face_siglip": text_model.*, logit_scale,
// logit_bias; config.json whole) and OpenCLIP's ("open_clip": text.*, logit_scale, logit_bias; model_cfg).
void hand_over_text(ViTWeights& w, const RawWeights& raw, const KeyIndex& idx, const SideConfig& side,
                    const ModelOverrides& ov) {
  const bool siglip = w.hp.layout == Layout::TimmSiglip;
  if (w.hp.layout != Layout::Clip && w.hp.layout != Layout::HfClip && !siglip) return;
  std::map<std::string, std::string> norm_of;  // name in the file -> normalised
  for (const auto& kv : idx.names) norm_of[kv.second] = kv.first;
  bool any = false;
  for (ViTWeights::TensorUse& u : w.tensors) {
    if (u.reason.rfind(siglip ? "SigLIP text tower" : "CLIP text tower", 0) != 0) continue;
    any = true;
    if (!ov.keep_text) continue;
    auto n = norm_of.find(u.name);
    auto t = raw.tensors.find(u.name);
    if (n == norm_of.end() || t == raw.tensors.end()) continue;  // a dtype attnmap does not read: left unread
    w.text_tensors[n->second] = t->second;
    u.reason.clear();
  }
  if (!any) return;
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  const bool hf = w.hp.layout == Layout::HfClip || (siglip && idx.names.count("text_model.embeddings.token_embedding.weight"));
  w.text_layout = hf ? (siglip ? "hugging_face_siglip" : "hugging_face") : siglip ? "open_clip" : "openai";
  for (const auto& kv : side.texts) {
    if (!hf && ends_with(kv.first, "open_clip_config.json")) {
      const json c = json::parse(kv.second, nullptr, false);
      w.text_layout = "open_clip";
      if (c.is_object() && c.contains("model_cfg")) w.text_config = c["model_cfg"];
    } else if (hf && ends_with(kv.first, "/config.json")) {
      const json c = json::parse(kv.second, nullptr, false);
      if (c.is_object()) w.text_config = c;
    }
  }
}

}  // namespace

ViTWeights build_model(const RawWeights& raw_in, const SideConfig& side, const ModelOverrides& ov) {
  const FileConfig side_fc = parse_config(raw_in.path + " (side config)", side.values, [&](const std::string& k) {
    auto it = side.source.find(k);
    return it == side.source.end() ? std::string("config.json") : it->second;
  });
  const FileConfig file_fc =
      parse_config(raw_in.path, raw_in.config,
                   [&](const std::string&) { return raw_in.config_where + " (" + raw_in.path + ")"; });
  const FileConfig fc = merge_config(side_fc, file_fc);
  if (ov.num_heads && *ov.num_heads <= 0) throw Error("the head count must be positive, found " + std::to_string(*ov.num_heads));
  const RawWeights& raw = raw_in;
  const KeyIndex idx = index_keys(raw);
  ViTWeights w = idx.has("W_Q") ? build_seed(raw, idx, fc, ov)
                                : build_vit(raw, idx, eva_or(detect_scheme(idx, raw.path), idx, fc.architecture, raw.path), fc, ov);
  apply_common(w.hp, fc, ov, raw.path);
  // The command line wins over the weights' own config, but a user should see that it did.
  auto rgb = [](const std::array<float, 3>& v) {
    std::ostringstream o;
    o << v[0] << ", " << v[1] << ", " << v[2];
    return o.str();
  };
  if (ov.mean && fc.mean && *ov.mean != *fc.mean)
    w.notices.push_back(setting_ref("mean") + " " + rgb(*ov.mean) + " overrides mean " + rgb(*fc.mean) + " from " + src_of(fc, "mean"));
  if (ov.std && fc.std && *ov.std != *fc.std)
    w.notices.push_back(setting_ref("std") + " " + rgb(*ov.std) + " overrides std " + rgb(*fc.std) + " from " + src_of(fc, "std"));
  const size_t pos_rows = w.pos_embed.size() / static_cast<size_t>(w.hp.dim);
  const size_t want_rows = static_cast<size_t>(w.hp.layout == Layout::Seed ? w.hp.tokens() : w.hp.pos_prefix + w.hp.grid_w * w.hp.grid_h);
  if (!w.pos_embed.empty() && pos_rows != want_rows)
    throw Error(raw.path + ": pos_embed has " + std::to_string(pos_rows) + " rows, expected " + std::to_string(want_rows));
  if (!w.head.present() && !w.hp.labels.empty()) w.notices.push_back("config labels given but no classifier head");
  if (w.head.present() && !w.hp.labels.empty() && static_cast<int>(w.hp.labels.size()) != w.head.out)
    w.notices.push_back("config has " + std::to_string(w.hp.labels.size()) + " labels but the classifier head has " +
                        std::to_string(w.head.out) + " classes");
  // BEiT (issue 29): index buffers whose values were read and checked (the tensor list says so) are not "skipped".
  bool only_checked_ints = (w.hp.layout == Layout::Beit || w.hp.layout == Layout::HfBeit) && !raw.skipped.empty();
  for (const auto& kv : raw.skipped)
    only_checked_ints = only_checked_ints && raw.ints.count(kv.first) && kv.first.find("relative_position_index") != std::string::npos;
  for (auto& n : raw.notices)
    if (!(only_checked_ints && n.rfind("skipped non-float tensors: ", 0) == 0)) w.notices.push_back(n);
  w.files = raw.files;  // what was read, with the hashes of the bytes read (provenance)
  w.files.insert(w.files.end(), side.files.begin(), side.files.end());
  w.notices.insert(w.notices.end(), side.notices.begin(), side.notices.end());
  check_hf_side_config(w, side);  // config.json hidden_size / num_hidden_layers against the weights
  hand_over_text(w, raw, idx, side, ov);
  for (const auto& kv : raw_in.tensors) w.param_count += kv.second.numel();
  return w;
}

ViTWeights build_model(const RawWeights& raw, const ModelOverrides& ov) { return build_model(raw, SideConfig{}, ov); }

namespace {

// The weights file mapped once: everything load_model reads of it (its first bytes to tell the format, the
// parse, the SHA-256) comes from this one mapping, so a file replaced by rename meanwhile changes nothing.
std::shared_ptr<const MappedFile> map_weights(const std::string& path) {
  std::error_code ec;  // a FIFO or device would hang the open; a folder would mislead
  const std::filesystem::file_status fst = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(fst) && !std::filesystem::is_regular_file(fst)) throw Error(path + ": not a regular file");
  try {
    return std::make_shared<const MappedFile>(path);
  } catch (const Error& e) {
    const std::string what = e.what(), head = path + ": cannot open: ";
    if (what.rfind(head, 0) == 0) throw Error(path + ": cannot open weights file: " + what.substr(head.size()));
    throw;
  }
}

// Reads the mapped weights file by its content: safetensors when the first 8 bytes are a little-endian
// length that fits in the file and the header after them opens with '{'; otherwise JSON when the first
// non-blank byte is '{'; otherwise safetensors when byte 8 is '{' (a broken length, reported as such);
// a torch.save zip or a legacy pickle by their first bytes; anything else is not a weights file.
RawWeights parse_mapped(const std::shared_ptr<const MappedFile>& file, const std::string& path, const ModelOverrides& ov,
                        PthInfo& pth_info, std::string& format) {
  const uint8_t* d = file->data();
  const size_t size = file->size();
  bool st = false, broken_st = false;
  if (size >= 9) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | d[i];
    st = d[8] == '{' && n <= size - 8;
    broken_st = d[8] == '{' && !st;  // a safetensors header whose length is wrong: say so
  }
  char first = 0;
  for (size_t i = 0; !st && i < size; ++i)  // first non-blank byte
    if (d[i] != ' ' && d[i] != '\n' && d[i] != '\r' && d[i] != '\t') {
      first = static_cast<char>(d[i]);
      break;
    }
  const bool is_json = !st && first == '{';
  const PthSniff pth = st ? PthSniff::NotPth : sniff_pth(d, std::min<size_t>(size, 9));
  if (pth == PthSniff::LegacyPickle) refuse_legacy_pth(path);
  if (ov.key && pth != PthSniff::Zip)
    throw Error(path + ": " + setting_ref("key") + " picks an entry of a PyTorch checkpoint (torch.save); this file is " +
                (is_json ? "attnmap JSON" : st ? "safetensors" : "not a PyTorch checkpoint"));
  format = pth == PthSniff::Zip ? "pth" : is_json ? "json" : "safetensors";
  if (pth == PthSniff::Zip) return parse_weights_pth(d, size, path, ov.key.value_or(""), &pth_info);
  if (is_json) return parse_weights_json_mapped(d, size, path);
  if (st || broken_st) return parse_weights_safetensors(d, size, path, file, /*keep_is_file_mapping=*/true);
  try {
    return parse_weights_safetensors(d, size, path, file, /*keep_is_file_mapping=*/true);
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.rfind(path + ": ", 0) == 0) why = why.substr(path.size() + 2);
    throw Error(path + ": not a weights file: not attnmap JSON (does not start with '{') and not safetensors (" +
                why + ")");
  }
}

}  // namespace

ViTWeights load_model(const std::string& path, const ModelOverrides& ov,
                      const std::function<void(ViTWeights&)>& while_hashing) {
  if (auto hf = load_model_hf(path, ov)) {  // a Hugging Face folder or sharded index (hashed as it is read)
    if (while_hashing) while_hashing(*hf);
    // the weights files' descriptors are closed by now: a write since they were opened is seen by path
    for (const FileHash& f : hf->files) throw_if_changed(f.path, f.stamp);
    return std::move(*hf);
  }
  const std::shared_ptr<const MappedFile> file = map_weights(path);
  // Hashed from the file the parse's mapping was made from (pread of its open file: the same bytes, the
  // mapping's pages left alone), on a second thread while the parse, the build and `while_hashing` run; their
  // error is the one reported (the hash is stopped and joined).
  Sha256InBackground hash(*file, path);
  PthInfo pth_info;
  std::string format;
  RawWeights raw;
  try {
    raw = parse_mapped(file, path, ov, pth_info, format);
  } catch (const std::bad_alloc&) {  // a safety net: the readers check declared sizes before allocating
    throw Error(path + ": not enough memory to read the weights (" + std::to_string(file->size()) + " bytes on disk)");
  }
  raw.files = {{path, "", file->stamp()}};  // the hash is set below, once the thread has it
  const SideConfig side = read_side_config(side_config_dir(path));
  ViTWeights w = build_model(raw, side, ov);
  w.format = format;
  w.pth_holds = pth_info.holds;
  w.pth_used = pth_info.used;
  if (while_hashing) while_hashing(w);
  w.weights_sha256 = hash.get();
  throw_if_changed(*file, path);
  file->close_file();  // hashed: the tensors viewed in place keep the mapping, not a descriptor
  w.files.front().sha256 = w.weights_sha256;  // build_model puts the weights file first, side configs after
  return w;
}

std::vector<std::string> config_keys() {
  // parse_config's keys read by name, then the arrays it reads in a loop.
  std::vector<std::string> keys = {"num_heads", "patch_size", "image_size", "layer_norm_eps", "mean", "std",
                                   "crop_pct", "interpolation", "architecture", "labels", "act", "pool",
                                   "default_layer", "default_head"};
  keys.insert(keys.end(), std::begin(kEvaArgs), std::end(kEvaArgs));
  keys.insert(keys.end(), std::begin(kHfBeitArgs), std::end(kHfBeitArgs));
  return keys;
}

}  // namespace attnmap
