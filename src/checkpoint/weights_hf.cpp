#include "checkpoint/weights_hf.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "checkpoint/weights_safetensors.hpp"
#include "core/error.hpp"
#include "hub/hub_name.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"

namespace attnmap {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The folder a file's relative names (shards, side configs) are taken from, as load_model does.
std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

bool is_regular(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(fs::status(p, ec));
}

// A safetensors index as a DOM, read once; `sha256` gets the SHA-256 of the bytes parsed. false when it
// does not exist.
bool read_index_json(const std::string& file, json& out, std::string& sha256) {
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (!fs::exists(st)) return false;
  if (!fs::is_regular_file(st)) throw Error(file + ": not a regular file (a folder, device or FIFO), read as a safetensors index");
  const std::vector<uint8_t> bytes = read_file(file);
  const std::string text(bytes.begin(), bytes.end());
  sha256 = sha256_text(text);
  try {
    out = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(file + ": " + json_syntax_error(text, e.byte) + " (read as a safetensors index)");
  } catch (const json::exception&) {  // out_of_range 406: a number beyond a double
    throw Error(file + ": malformed JSON: a number beyond the range of a double (read as a safetensors index)");
  }
  if (!out.is_object()) throw Error(file + ": a safetensors index is not a JSON object");
  return true;
}

// weight_map of an index: tensor -> shard name, every value a string. Throws naming the index.
// `sha256` (if not null) gets the SHA-256 of the index's bytes parsed.
std::map<std::string, std::string> read_weight_map(const std::string& index_path, std::string* sha256 = nullptr) {
  std::error_code ec;
  if (fs::file_size(index_path, ec) > (uint64_t{64} << 20))
    throw Error(index_path + ": over 64 MiB, too large for a safetensors index");
  json idx;
  std::string sha;
  if (sha256 == nullptr) sha256 = &sha;
  if (!read_index_json(index_path, idx, *sha256))
    throw Error(index_path + ": cannot open safetensors index: " + std::strerror(ENOENT));
  if (!idx.contains("weight_map") || !idx["weight_map"].is_object())
    throw Error(index_path + ": safetensors index has no \"weight_map\" object (expected {\"metadata\": {...}, "
                "\"weight_map\": {tensor: shard file}})");
  if (idx.contains("metadata") && !idx["metadata"].is_object() && !idx["metadata"].is_null())
    throw Error(index_path + ": safetensors index \"metadata\" is not an object");
  std::map<std::string, std::string> map;
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      throw Error(index_path + ": weight_map entry for tensor '" + it.key() + "' is not a shard file name, found " +
                  it.value().dump().substr(0, 60));
    map[it.key()] = it.value().get<std::string>();
  }
  if (map.empty()) throw Error(index_path + ": safetensors index lists no tensors (empty weight_map)");
  return map;
}

// A shard name must stay inside the index's folder: relative, no '..' component, no NUL.
void check_shard_name(const std::string& index_path, const std::string& shard, const std::string& tensor) {
  auto refuse = [&](const std::string& why) {
    throw Error(index_path + ": shard '" + shard + "' (for tensor '" + tensor + "') " + why);
  };
  if (shard.empty()) refuse("is an empty name");
  if (shard.find('\0') != std::string::npos) refuse("has a NUL byte in its name");
  if (shard.front() == '/') refuse("is an absolute path: shards must lie in the index's folder");
  std::stringstream parts(shard);
  for (std::string part; std::getline(parts, part, '/');)
    if (part == "..") refuse("has a '..' component: shards must lie in the index's folder");
  if (ends_with(shard, ".bin"))  // pytorch_model.bin.index.json lists torch.save shards
    refuse("is a torch.save (.bin) shard: .bin weights come with the .pth (torch.save) reader, not in this build");
}

std::string skipped_notice(const std::map<std::string, std::string>& skipped) {
  std::string s;
  size_t i = 0;
  for (auto it = skipped.begin(); it != skipped.end() && i < 4; ++it, ++i)
    s += (i ? ", " : "") + it->first + " (" + it->second + ")";
  if (skipped.size() > 4) s += ", ... (" + std::to_string(skipped.size()) + " in all)";
  return "skipped non-float tensors: " + s;
}

// Moves one loaded shard's tensors into `out`: refuses a tensor already found in another shard; keeps the
// ones the map gives to this shard; lists the rest in `unlisted`.
void take_shard(RawWeights& shard, const std::string& name, const std::string& shard_path,
                const std::map<std::string, std::string>& map, std::map<std::string, std::string>& found_in,
                RawWeights& out, std::vector<std::string>& unlisted) {
  auto claim = [&](const std::string& t) {
    const auto [it, fresh] = found_in.emplace(t, name);
    if (!fresh) {
      const auto m = map.find(t);
      throw Error(shard_path + ": tensor '" + t + "' is also in shard '" + it->second + "' (" + out.path +
                  (m == map.end() ? " lists it for neither" : " lists it for '" + m->second + "'") +
                  "); a tensor must be in one shard only");
    }
    const auto m = map.find(t);
    if (m == map.end()) unlisted.push_back(t);
    return m != map.end() && m->second == name;
  };
  for (auto& kv : shard.tensors)
    if (claim(kv.first)) out.tensors.emplace(kv.first, std::move(kv.second));
  for (const auto& kv : shard.skipped)
    if (claim(kv.first)) out.skipped.emplace(kv.first, kv.second);
  if (shard.config_where == "__metadata__ config") {
    if (out.config_where == "config") {
      out.config = shard.config;
      out.config_where = "__metadata__ config of shard " + name;
    } else if (out.config != shard.config) {
      throw Error(shard_path + ": __metadata__ config differs from the one in " +
                  out.config_where.substr(std::string("__metadata__ config of ").size()));
    }
  }
  for (const std::string& n : shard.notices)
    if (n.rfind("skipped non-float tensors", 0) != 0) out.notices.push_back(name + ": " + n);
}

}  // namespace

bool is_safetensors_index(const std::string& path) {
  if (!is_regular(path)) return false;
  if (ends_with(path, ".index.json")) return true;
  std::ifstream f(path, std::ios::binary);
  char buf[4096];
  f.read(buf, sizeof buf);
  const std::string head(buf, static_cast<size_t>(f.gcount()));
  size_t i = head.find_first_not_of(" \t\r\n");
  if (i == std::string::npos || head[i] != '{') return false;
  i = head.find_first_not_of(" \t\r\n", i + 1);
  if (i == std::string::npos || head[i] != '"') return false;
  const size_t end = head.find('"', i + 1);
  if (end == std::string::npos) return false;
  const std::string key = head.substr(i + 1, end - i - 1);
  return key == "metadata" || key == "weight_map";
}

RawWeights load_weights_safetensors_index(const std::string& index_path) {
  std::string index_sha;
  const std::map<std::string, std::string> map = read_weight_map(index_path, &index_sha);
  const std::string dir = folder_of(index_path);
  std::map<std::string, std::string> first_tensor;  // shard -> first tensor listed for it (for messages)
  for (const auto& kv : map) {
    check_shard_name(index_path, kv.second, kv.first);
    first_tensor.emplace(kv.second, kv.first);
  }
  // Every shard is there before any is read: a missing one is one line, not after minutes of loading.
  for (const auto& kv : first_tensor) {
    const std::string p = join(dir, kv.first);
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (!fs::exists(st))
      throw Error(index_path + ": shard '" + kv.first + "' (listed for tensor '" + kv.second + "') not found: " +
                  p + ": " + std::strerror(ENOENT));
    if (!fs::is_regular_file(st))
      throw Error(index_path + ": shard '" + kv.first + "' (listed for tensor '" + kv.second + "') is not a regular file");
  }
  RawWeights out;
  out.path = index_path;
  out.files = {{index_path, index_sha}};
  std::map<std::string, std::string> found_in;  // tensor -> shard it was found in
  std::vector<std::string> unlisted;
  for (const auto& kv : first_tensor) {
    const std::string p = join(dir, kv.first);
    RawWeights shard = load_weights_safetensors(p);  // memory-mapped and checked as a single file
    out.files.insert(out.files.end(), shard.files.begin(), shard.files.end());  // in name order, as index_shard_files
    take_shard(shard, kv.first, p, map, found_in, out, unlisted);
  }
  for (const auto& kv : map) {
    if (out.tensors.count(kv.first) || out.skipped.count(kv.first)) continue;
    const auto f = found_in.find(kv.first);
    throw Error(join(dir, kv.second) + ": tensor '" + kv.first + "' is listed for this shard by " + index_path +
                " but is not in it" + (f == found_in.end() ? "" : " (it is in shard '" + f->second + "')"));
  }
  if (!out.skipped.empty()) out.notices.push_back(skipped_notice(out.skipped));
  if (!unlisted.empty()) {
    std::sort(unlisted.begin(), unlisted.end());
    std::string s;
    for (size_t i = 0; i < unlisted.size() && i < 4; ++i) s += (i ? ", " : "") + unlisted[i];
    if (unlisted.size() > 4) s += ", ... (" + std::to_string(unlisted.size()) + " in all)";
    out.notices.push_back("tensors in the shards but not in the index's weight_map, not read: " + s);
  }
  return out;
}

std::vector<std::string> index_shard_files(const std::string& index_path) {
  std::set<std::string> names;
  try {
    for (const auto& kv : read_weight_map(index_path)) names.insert(kv.second);
  } catch (const Error&) {
    return {};
  }
  std::vector<std::string> out;
  for (const std::string& n : names) out.push_back(join(folder_of(index_path), n));
  return out;
}

std::string hf_folder_weights(const std::string& dir, std::vector<std::string>& notes) {
  // The first of the Hub's weights files the folder has (hub/hub_name.hpp: the order a Hub name is fetched in,
  // transformers' own for the first two), so that a folder and its Hub snapshot read the same file.
  const std::string single = join(dir, "model.safetensors"), index = join(dir, "model.safetensors.index.json");
  if (is_regular(single) && is_regular(index))
    notes.push_back(index + " not read: the folder has model.safetensors, which transformers reads first too");
  for (const char* name : kHubWeightsFiles)
    if (is_regular(join(dir, name))) return join(dir, name);
  if (is_regular(join(dir, "pytorch_model.bin.index.json")))
    throw Error(dir + ": holds pytorch_model.bin.index.json and no model.safetensors: sharded .bin weights are not "
                "read; convert with safetensors.torch.save_file(model.state_dict(), \"model.safetensors\")");
  std::vector<std::string> seen;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) seen.push_back(it->path().filename().string());
  std::sort(seen.begin(), seen.end());
  std::string s;
  for (size_t i = 0; i < seen.size() && i < 6; ++i) s += (i ? ", " : "") + seen[i];
  if (seen.size() > 6) s += ", ...";
  throw Error(dir + ": a folder without model.safetensors, model.safetensors.index.json or pytorch_model.bin " +
              "(what a Hugging Face model folder holds; open_clip's open_clip_model.safetensors or " +
              "open_clip_pytorch_model.bin are read too); it has " + (seen.empty() ? std::string("nothing") : s));
}

namespace {

// The weights hash of a folder or a "*.index.json" (ViTWeights::weights_sha256): the SHA-256 of the listing
// `sha256sum` prints for the weights files (the weights file, or the index then its shards), then the
// config.json, preprocessor_config.json and open_clip_config.json that were read, from the hashes of the bytes read.
std::string listing_sha256(const std::vector<FileHash>& weights, const std::vector<FileHash>& side) {
  std::string listing;
  auto line = [&](const FileHash& f) { listing += f.sha256 + "  " + fs::path(f.path).filename().string() + "\n"; };
  for (const FileHash& f : weights) line(f);
  for (const char* name : {"config.json", "preprocessor_config.json", "open_clip_config.json"})
    for (const FileHash& f : side)
      if (fs::path(f.path).filename() == name) {
        line(f);
        break;
      }
  return sha256_text(listing);
}

ViTWeights load_index_model(const std::string& index_path, const ModelOverrides& ov) {
  const RawWeights raw = load_weights_safetensors_index(index_path);
  const SideConfig side = read_side_config(folder_of(index_path));
  ViTWeights w = build_model(raw, side, ov);
  const size_t n = raw.files.size() - 1;  // the shards read (the index is not read again to count them)
  w.format = "safetensors, sharded (" + std::to_string(n) + (n == 1 ? " file" : " files") + " listed by " +
             fs::path(index_path).filename().string() + ")";
  // A "*.index.json" is hashed as its listing; an index told by content only, as one file (provenance's rule).
  w.weights_sha256 = ends_with(index_path, ".index.json") ? listing_sha256(raw.files, side.files) : raw.files[0].sha256;
  return w;
}

}  // namespace

std::optional<ViTWeights> load_model_hf(const std::string& path, const ModelOverrides& ov) {
  std::error_code ec;
  if (fs::is_directory(fs::status(path, ec))) {
    std::vector<std::string> notes;
    const std::string file = hf_folder_weights(path, notes);
    const bool index = is_safetensors_index(file);
    ViTWeights w = index ? load_index_model(file, ov) : load_model(file, ov);
    if (w.format == "safetensors") w.format += " (" + fs::path(file).filename().string() + ")";
    w.notices.insert(w.notices.begin(), notes.begin(), notes.end());
    if (!index && !w.files.empty()) {  // one weights file, then the side configs read
      const std::vector<FileHash> side(w.files.begin() + 1, w.files.end());
      w.weights_sha256 = listing_sha256({w.files[0]}, side);
    }
    return w;
  }
  if (is_safetensors_index(path)) return load_index_model(path, ov);
  return std::nullopt;
}

std::optional<std::vector<std::string>> model_files_hf(const std::string& path) {
  std::error_code ec;
  std::string file = path, dir;
  if (fs::is_directory(fs::status(path, ec))) {
    std::vector<std::string> notes;
    try {
      file = hf_folder_weights(path, notes);
    } catch (const Error&) {
      file = join(path, "model.safetensors");
    }
    dir = path;
  } else if (is_safetensors_index(path)) {
    dir = folder_of(path);
  } else {
    return std::nullopt;
  }
  std::vector<std::string> out{file};
  if (is_safetensors_index(file))
    for (const std::string& s : index_shard_files(file)) out.push_back(s);
  out.push_back(join(dir, "config.json"));
  out.push_back(join(dir, "preprocessor_config.json"));
  out.push_back(join(dir, "open_clip_config.json"));
  return out;
}

namespace {

// An integer size from preprocessor_config.json: a number or {"height": h, "width": w} / {"shortest_edge": s}.
// Returns false when absent; throws for another form.
bool hf_size(const json& p, const char* key, const std::string& file, int& h, int& w, bool& shortest) {
  if (!p.contains(key) || p[key].is_null()) return false;
  const json& v = p[key];
  auto as_int = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() <= 0 || x.get<int64_t>() > (1 << 16))
      throw Error(file + ": \"" + key + "\" must be a positive integer or {\"height\", \"width\"} / {\"shortest_edge\"}, found " +
                  v.dump().substr(0, 60));
    return x.get<int>();
  };
  shortest = false;
  if (v.is_number()) {
    h = w = as_int(v);
  } else if (v.is_object() && v.contains("height") && v.contains("width")) {
    h = as_int(v["height"]);
    w = as_int(v["width"]);
  } else if (v.is_object() && v.contains("shortest_edge")) {
    h = w = as_int(v["shortest_edge"]);
    shortest = true;
  } else {
    as_int(json());  // throws with the message above
  }
  return true;
}

bool flag(const json& p, const char* key, bool dflt, const std::string& file) {
  if (!p.contains(key)) return dflt;
  if (!p[key].is_boolean()) throw Error(file + ": \"" + std::string(key) + "\" must be true or false, found " + p[key].dump().substr(0, 60));
  return p[key].get<bool>();
}

// preprocessor_config.json (transformers image processors: ViTImageProcessor, DeiTImageProcessor, ...).
void add_preprocessor(const std::string& pre, const json& p, SideConfig& sc, bool cfg_has_image_size) {
  auto src = [&](const std::string& keys) { return "preprocessor_config.json (" + pre + ": " + keys + ")"; };
  if (p.contains("resample")) {
    static const char* kPil[] = {"nearest", "lanczos", "bilinear", "bicubic", "box", "hamming"};
    const json& r = p["resample"];
    if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > 5)
      throw Error(pre + ": \"resample\" must be a PIL resampling code 0..5, found " + r.dump().substr(0, 60));
    sc.values["interpolation"] = kPil[r.get<int>()];
    sc.source["interpolation"] = src("resample " + std::to_string(r.get<int>()));
  }
  int sh = 0, sw = 0, ch = 0, cw = 0;
  bool shortest = false, crop_shortest = false;
  const bool has_size = flag(p, "do_resize", true, pre) && hf_size(p, "size", pre, sh, sw, shortest);
  const bool crop = flag(p, "do_center_crop", false, pre) && hf_size(p, "crop_size", pre, ch, cw, crop_shortest);
  if (crop && has_size) {
    sc.values["crop_pct"] = static_cast<double>(ch) / std::min(sh, sw);
    sc.source["crop_pct"] = src("crop_size / size");
  }
  const int in_h = crop ? ch : sh, in_w = crop ? cw : sw;
  if (crop || (has_size && !shortest)) {  // the processor's output size, which the model is fed
    if (!cfg_has_image_size) {
      sc.values["image_size"] = json::array({in_h, in_w});
      sc.source["image_size"] = src(crop ? "crop_size" : "size");
    } else {
      const json& v = sc.values["image_size"];
      const bool same = (v.is_number_integer() && v.get<int64_t>() == in_h && in_h == in_w) ||
                        (v.is_array() && v == json::array({in_h, in_w}));
      if (!same)
        sc.notices.push_back(pre + ": the processor's output size " + std::to_string(in_h) + "x" + std::to_string(in_w) +
                             " differs from config.json image_size " + v.dump() + "; attnmap uses config.json's");
    }
  }
  const bool norm = flag(p, "do_normalize", true, pre);
  if (!norm) {
    sc.values["mean"] = json::array({0.0, 0.0, 0.0});
    sc.values["std"] = json::array({1.0, 1.0, 1.0});
    sc.source["mean"] = sc.source["std"] = src("do_normalize false");
  }
  double r = 1.0 / 255.0;
  if (!flag(p, "do_rescale", true, pre)) {
    r = 1.0;
  } else if (p.contains("rescale_factor")) {
    if (!p["rescale_factor"].is_number() || !(p["rescale_factor"].get<double>() > 0))
      throw Error(pre + ": \"rescale_factor\" must be a positive number, found " + p["rescale_factor"].dump().substr(0, 60));
    r = p["rescale_factor"].get<double>();
  }
  const double scale = 255.0 * r;  // attnmap's pixels are x/255; the processor's are x*r
  if (std::fabs(scale - 1.0) > 1e-6) {
    for (const char* k : {"mean", "std"}) {
      if (!sc.values.contains(k) || !sc.values[k].is_array() || sc.source[k].rfind("preprocessor_config.json", 0) != 0)
        continue;  // only the processor's own normalisation is applied to its rescaled pixels
      json& v = sc.values[k];
      for (json& x : v)
        if (x.is_number()) x = x.get<double>() / scale;
      sc.source[k] += " / (255 x rescale factor " + std::to_string(r) + ")";
    }
  }
}

}  // namespace

void add_hf_side_config(const std::string& dir, SideConfig& sc) {
  const std::string d = dir.empty() ? std::string(".") : dir;
  const std::string cfg = join(d, "config.json"), pre = join(d, "preprocessor_config.json");
  json c;
  const bool have_cfg = read_side_json(sc, cfg, c);
  const bool timm = have_cfg && (c.contains("architecture") || c.contains("pretrained_cfg"));
  if (have_cfg && !timm) {  // Hugging Face PretrainedConfig (ViTConfig)
    const bool nested = c.contains("vision_config") && c["vision_config"].is_object();  // CLIPConfig
    const json& v = nested ? c["vision_config"] : c;
    for (const char* key : {"hidden_size", "num_hidden_layers", "intermediate_size"}) {
      if (!v.contains(key)) continue;
      const std::string at = std::string(nested ? "vision_config." : "") + key;
      if (!v[key].is_number_integer() || v[key].get<int64_t>() <= 0 || v[key].get<int64_t>() > (1 << 24))
        throw Error(cfg + ": \"" + at + "\" must be a positive integer, found " + v[key].dump().substr(0, 60));
      sc.values[key] = v[key];
      sc.source[key] = "config.json (" + cfg + ": " + at + ")";
    }
    static const std::set<std::string> kTypes = {"vit", "deit", "dinov2", "dinov2_with_registers", "clip",
                                                 "clip_vision_model", "siglip", "siglip_vision_model", "beit",
                                                 "data2vec-vision"};
    if (c.contains("model_type") && (!c["model_type"].is_string() || !kTypes.count(c["model_type"].get<std::string>())))
      sc.notices.push_back(cfg + ": model_type " + c["model_type"].dump() +
                           " is not one attnmap knows (vit, deit, dinov2, dinov2_with_registers, clip, "
                           "clip_vision_model, siglip, siglip_vision_model, beit, data2vec-vision): the tensor "
                           "names decide the layout");
  }
  const bool cfg_has_image_size = sc.values.contains("image_size") &&
                                  sc.source.count("image_size") && sc.source["image_size"].rfind("config.json", 0) == 0;
  json p;
  if (read_side_json(sc, pre, p)) add_preprocessor(pre, p, sc, cfg_has_image_size);
}

void check_hf_side_config(ViTWeights& w, const SideConfig& side) {
  HParams& hp = w.hp;
  const struct {
    const char* key;
    int have;
    const char* what;
  } checks[] = {{"hidden_size", hp.dim, "the weights' token width D"},
                {"num_hidden_layers", hp.depth, "the weights' block count"},
                {"intermediate_size", hp.mlp_dim, "the weights' MLP width"}};
  for (const auto& ck : checks) {
    if (!side.values.contains(ck.key) || (ck.have == 0 && std::string(ck.key) == "intermediate_size")) continue;
    const int said = side.values[ck.key].get<int>();
    const std::string from = side.source.count(ck.key) ? side.source.at(ck.key) : std::string("config.json");
    if (said != ck.have)
      throw Error(from + " says " + std::to_string(said) + ", but " + ck.what + " is " + std::to_string(ck.have) +
                  " (from the tensor shapes)");
    if (std::string(ck.key) == "num_hidden_layers") hp.source["depth"] = from;
  }
}

}  // namespace attnmap
