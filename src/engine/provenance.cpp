#include "engine/provenance.hpp"

#include <cctype>
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/session.hpp"
#include "engine/text/score_words.hpp"
#include "core/error.hpp"
#include "draw/figure_metadata.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"

namespace attnmap {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

ojson float_json(float v) {
  char buf[32];
  for (int prec = 6; prec <= 9; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return std::strtod(buf, nullptr);
}

namespace {

ojson rgb_json(const std::array<float, 3>& v) { return ojson::array({float_json(v[0]), float_json(v[1]), float_json(v[2])}); }

// The run's views as their canonical names (maps/views.hpp), comma-separated: "L3/mean", "rollout@L2",
// "chefer", "L0/mean,rollout".
std::string view_names(const RenderContext& ctx) {
  std::string names;
  for (size_t i = 0; i < ctx.user_views; ++i) names += (i ? "," : "") + ctx.views[i].name;
  return names;
}

const char* upsample_name(Upsample u) {
  return u == Upsample::Nearest ? "nearest" : u == Upsample::Bicubic ? "bicubic" : "bilinear";
}

/// --scale as written: map (the default of NAME.png), figure, run or [VMIN, VMAX].
ojson scale_json(const ViewRequest& opt) {
  if (!opt.scale) return "map";
  switch (opt.scale->kind) {
    case ScaleKind::Figure: return "figure";
    case ScaleKind::Run: return "run";
    case ScaleKind::Fixed: return {opt.scale->vmin, opt.scale->vmax};
    default: return "map";
  }
}

}  // namespace

namespace {

// Whose attention row the maps read: the model's default row ("class token" or "mean over patch queries"), the
// one token query the views share ("query patch (7, 3)", "register 0's row", "attention received"), or, when
// the views name different ones, "as each view names it (default: class token)".
std::string query_record(const RenderContext& ctx) {
  const std::string default_row = ctx.model->hp.query_name();
  if (!any_user_view(ctx, has_token_query)) return default_row;
  const std::optional<TokenQuery> q = shared_user_query(ctx);  // the strips' (ctx.query) must agree too
  return q && describe_query(*q) == describe_query(ctx.query) ? describe_query(*q)
                                                              : "as each view names it (default: " + default_row + ")";
}

}  // namespace

ojson make_provenance(const RenderContext& ctx, const std::string& weights_path) {
  const HParams& hp = ctx.model->hp;
  const RenderOptions& opt = *ctx.opt;
  ojson r;
  r["attnmap_version"] = ATTNMAP_VERSION;
  const std::optional<HubRef>& hub = ctx.model->hub;
  r["weights"] = hub ? hub->repo : fs::path(weights_path).filename().string();
  const std::vector<std::string> files = model_files(weights_path);
  // Hashed by the loader from the very bytes it read (ViTWeights::weights_sha256): never by opening again.
  r["weights_sha256"] = ctx.model->weights_sha256;
  if (hub) r["hub"] = hub_ref_json(*hub);
  ojson configs = ojson::object();
  for (size_t i = 1; i < files.size(); ++i)
    if (const std::string* h = ctx.model->file_sha256(files[i])) configs[fs::path(files[i]).filename().string()] = *h;
  r["weights_configs"] = configs;
  r["layout"] = layout_name(hp.layout);
  r["query"] = query_record(ctx);  // whose attention row the maps are: "class token", "query patch (7, 3)", ...
  // The settings a file may not hold (--heads, --act, --pool, --key): a map made with others is not this one.
  r["num_heads"] = hp.num_heads;
  r["act"] = activation_name(hp.act);
  r["pool"] = pool_name(hp.pool);
  if (!ctx.model->pth_used.empty()) r["state_dict"] = ctx.model->pth_used;
  r["view"] = view_names(ctx);
  const bool rollout = any_user_view(ctx, [](const ResolvedView& v) { return v.spec.kind == ViewKind::Rollout; });
  r["discard"] = rollout ? ojson(opt.discard) : ojson(nullptr);
  r["threshold"] = opt.threshold ? float_json(*opt.threshold) : ojson(nullptr);
  r["size"] = {hp.image_w, hp.image_h};
  r["resize"] = opt.resize == ResizeMode::Crop ? "crop" : "squash";
  r["crop_pct"] = opt.resize == ResizeMode::Crop ? float_json(hp.crop_pct.value_or(0.875f)) : ojson(nullptr);
  r["mean"] = rgb_json(hp.mean);
  r["std"] = rgb_json(hp.std);
  r["colormap"] = opt.colormap.name;
  r["alpha"] = float_json(opt.alpha);
  r["upsample"] = upsample_name(opt.upsample);
  r["scale"] = scale_json(opt);
  r["exif"] = opt.load.apply_exif;
  r["all_heads"] = opt.all_heads;
  // Only when set (a record of a run without them is as before): how --size resampled, the explanation
  // method and class, the figures' style and resolution.
  // bfloat16 products (issue 30): maps made in float32 are other maps; a float32 record stays as before.
  if (opt.precision == Precision::BF16) r["precision"] = "bf16";
  if (opt.size) r["pos_interp"] = pos_interp_name(opt.pos_interp ? *opt.pos_interp : default_pos_interp(hp).mode);
  if (opt.explain) {
    r["explain"] = opt.explain->written;
    r["class"] = opt.class_spec.value_or(ClassSpec{}).written;
    if (opt.explain->kind == ViewKind::GradCam) r["gradcam_layer"] = opt.gradcam_layer.value_or(-1);
    if (ctx.views.front().spec.kind == ViewKind::AttnGrad) r["attn_grad_layer"] = ctx.views.front().spec.layer;
  }
  if (any_user_view(ctx, [](const ResolvedView& v) { return v.class_specific; }) && !r.contains("class"))
    r["class"] = opt.class_spec.value_or(ClassSpec{}).written;
  // A named gradcam / attn-grad without @L: its block comes from --gradcam-layer / --layer, which its name
  // ("gradcam") does not say; the resolved block is recorded so a run with another is not skipped.
  for (size_t i = 0; !opt.explain && i < ctx.user_views; ++i) {  // (--explain records its own above)
    const ResolvedView& v = ctx.views[i];
    if (v.spec.layer_given || !v.class_specific || v.spec.kind == ViewKind::Chefer) continue;
    r[v.spec.kind == ViewKind::GradCam ? "gradcam_block" : "attn_grad_block"] = v.spec.layer;
  }
  // The strips' block and fusion (--layer / --head) when the named views do not imply them: a strip made with
  // others is not this one.
  if ((opt.heads_grid || opt.strip_layers) && (ctx.views_given || opt.explain)) {
    r["strip_block"] = ctx.layer;
    r["strip_heads"] = fusion_name(ctx.head, "h");
  }
  if (opt.style != Style::Overlay) r["style"] = opt.style == Style::Mask ? "mask" : "contour";
  if (opt.alpha_by_value) r["alpha_by_value"] = true;
  // NAME.png's legend strip (issue 28): an overlay without it (an earlier version's, --no-legend) is another file.
  if (draws_legend(opt)) r["legend"] = true;
  if (opt.dpi) r["dpi"] = *opt.dpi;
  // The figures' physical width and the strips' columns (issue 28), when given: another width or column count
  // is another figure (the defaults keep the record, and NAME.png, as a run without figures has them).
  if (opt.width_in) r["width_in"] = *opt.width_in;
  if (opt.strip_columns) r["strip_columns"] = *opt.strip_columns;
  // Words the author chose (issue 28), when given: another title or numbering is another figure.
  if (opt.title) r["title"] = *opt.title;
  if (opt.block_base != 0) r["block_numbering"] = opt.block_base;
  if (opt.notes) r["notes"] = true;
  // Class names not from the weights' config: a --labels file (its name and SHA-256), or ImageNet-1k's assumed
  // for a 1000-class head.
  if (const auto it = hp.source.find("labels"); it != hp.source.end()) {
    if (!opt.labels_file.empty() && it->second.rfind(kLabelsFromFile, 0) == 0)
      r["labels"] = {{"file", fs::path(opt.labels_file).filename().string()}, {"sha256", sha256_file(opt.labels_file)}};
    else if (it->second.rfind(kLabelsAssumedImagenet, 0) == 0)
      r["labels"] = it->second;
  }
  // Texts as the classes (issue 43): the texts, templates, vocabulary file and SHA-256, tokenizer rules;
  // "score_rule": "sigmoid" for SigLIP's scores (score_words.hpp).
  if (nlohmann::ordered_json z = zero_shot_settings(*ctx.model); !z.is_null()) r["zero_shot"] = std::move(z);
  if (opt.writes(OutputKind::Explore))  // the explorer's data (--explore, attnmap explore): what it stores
    r["explore"] = {{"budget_mb", opt.explore_budget_mb}, {"blocks", opt.explore_blocks}, {"discard", opt.discard}};
  return r;
}

ojson hub_ref_json(const HubRef& hub) {
  return {{"repo", hub.repo}, {"revision", hub.revision}, {"commit", hub.commit}};
}

std::string provenance_text(const ojson& record) {
  return record.dump(-1, ' ', true, ojson::error_handler_t::replace);
}

bool same_settings(const nlohmann::json& a, const nlohmann::json& b) {
  if (!a.is_object() || !b.is_object()) return false;
  nlohmann::json x = a, y = b;
  // Names (the weights' hash says what they are), and a figure's results (what its colour bars hide).
  for (const char* informative : {"weights", "hub", "colour_bars", "explained_class"}) {
    x.erase(informative);
    y.erase(informative);
  }
  return x == y;
}

std::string settings_change(const nlohmann::json& was, const nlohmann::json& now) {
  if (!was.is_object() || !was.contains("attnmap_version")) return "no settings recorded";
  std::string out;
  auto show = [](const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    std::string s = v.dump();
    return s.size() > 20 ? s.substr(0, 12) + "..." : s;
  };
  auto informative = [](const std::string& k) {
    return k == "weights" || k == "hub" || k == "colour_bars" || k == "explained_class";
  };
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (informative(it.key())) continue;
    const nlohmann::json old = was.contains(it.key()) ? was[it.key()] : nlohmann::json();
    if (old != it.value() && it.key() == "input_sha256")  // the photo under this name is another one
      out += std::string(out.empty() ? "" : ", ") +
             (old.is_string() ? "the input changed (sha256 " + old.get<std::string>().substr(0, 12) + " -> " +
                                    show(it.value()).substr(0, 12) + ")"
                              : "no input fingerprint recorded");
    else if (old != it.value()) out += (out.empty() ? "" : ", ") + it.key() + " " + show(old) + " -> " + show(it.value());
  }
  for (auto it = was.begin(); it != was.end(); ++it)
    if (!now.contains(it.key()) && !informative(it.key())) out += (out.empty() ? "" : ", ") + it.key() + " " + show(it.value()) + " -> none";
  return out.empty() ? "same settings" : out;
}

namespace {
bool is_record(const nlohmann::ordered_json& j) { return j.is_object() && j.contains("attnmap_version"); }

std::optional<nlohmann::ordered_json> parse_record(const std::string& text) {
  try {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
    if (is_record(j)) return j;
  } catch (const nlohmann::json::exception&) {
  }
  return std::nullopt;
}

std::optional<nlohmann::ordered_json> png_record(const std::string& png) {
  for (const PngText& t : read_png_text(png))
    if (t.keyword == kProvenanceKeyword) return parse_record(t.text);
  return std::nullopt;
}

// The record of a figure: the Subject of a PDF, the <metadata id="attnmap"> of an SVG (Canvas::save).
std::optional<nlohmann::ordered_json> figure_record(const std::string& path) {
  const std::optional<std::string> text = read_figure_metadata(path);
  return text ? parse_record(*text) : std::nullopt;
}

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

std::optional<nlohmann::ordered_json> sidecar_record(const std::string& sidecar) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(sidecar, ec)) || fs::file_size(sidecar, ec) > (1u << 20)) return std::nullopt;
  std::ifstream f(sidecar, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_record(ss.str());
}

std::optional<nlohmann::json> unordered(const std::optional<nlohmann::ordered_json>& r) {
  if (!r) return std::nullopt;
  return nlohmann::json::parse(r->dump());
}
}  // namespace

std::string image_provenance(const std::string& run_record, const std::string& input_sha256) {
  if (run_record.empty()) return run_record;
  nlohmann::ordered_json r = nlohmann::ordered_json::parse(run_record);
  r["input_sha256"] = input_sha256;
  return provenance_text(r);
}

std::optional<nlohmann::json> read_png_provenance(const std::string& png) { return unordered(png_record(png)); }

void put_image_stats(nlohmann::ordered_json& j, const std::optional<MapStats>& stats,
                     const std::vector<std::pair<std::string, float>>& top5) {
  if (stats) {
    j["map_max"] = stats->max;
    j["argmax_row"] = stats->argmax_row;
    j["argmax_col"] = stats->argmax_col;
    j["entropy"] = stats->entropy_valid ? nlohmann::ordered_json(stats->entropy) : nlohmann::ordered_json(nullptr);
    j["max_over_mean"] = stats->max_over_mean > 0 ? nlohmann::ordered_json(stats->max_over_mean) : nlohmann::ordered_json(nullptr);
    j["flat"] = stats->flat();
  } else {
    for (const char* k : {"map_max", "argmax_row", "argmax_col", "entropy", "max_over_mean", "flat"}) j[k] = nullptr;
  }
  if (!top5.empty()) {
    nlohmann::ordered_json t = nlohmann::ordered_json::array();
    for (const auto& [label, p] : top5) t.push_back({{"label", label}, {"probability", p}});
    j["top5"] = t;
  } else {
    j["top5"] = nullptr;
  }
}

std::optional<ImageStats> get_image_stats(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("map_max") || !j["map_max"].is_number()) return std::nullopt;
  try {
    ImageStats r;
    r.stats.max = j["map_max"].get<float>();
    r.stats.argmax_row = j.at("argmax_row").get<int>();
    r.stats.argmax_col = j.at("argmax_col").get<int>();
    r.stats.entropy_valid = j.contains("entropy") && j["entropy"].is_number();
    if (r.stats.entropy_valid) r.stats.entropy = j["entropy"].get<double>();
    if (j.contains("max_over_mean") && j["max_over_mean"].is_number())  // absent in rows of earlier versions
      r.stats.max_over_mean = j["max_over_mean"].get<double>();
    if (j.contains("top5") && j["top5"].is_array())
      for (const auto& t : j["top5"]) r.top5.push_back({t.at("label").get<std::string>(), t.at("probability").get<float>()});
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::optional<ImageStats> read_png_stats(const std::string& png) {
  for (const PngText& t : read_png_text(png)) {
    if (t.keyword != kStatsKeyword) continue;
    try {
      return get_image_stats(nlohmann::json::parse(t.text));
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string npy_sidecar_path(const std::string& npy) { return npy + ".json"; }

std::optional<nlohmann::json> read_figure_record(const std::string& path) {
  return unordered(ends_with(path, ".png") ? png_record(path) : figure_record(path));
}

std::optional<nlohmann::json> read_sidecar(const std::string& sidecar) { return unordered(sidecar_record(sidecar)); }

bool looks_like_output(const std::string& path) {
  auto ends = [&](const std::string& e) { return ends_with(path, e); };
  if (ends(".npy") || ends(".npy.json") || ends(".pdf") || ends(".svg")) return true;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;  // a FIFO is not opened here (load_model refuses it)
  std::ifstream f(path, std::ios::binary);
  char sig[8] = {};
  f.read(sig, 8);
  return f.gcount() == 8 && std::string(sig, 8) == "\x89PNG\r\n\x1a\n";
}

std::string describe_output(const std::string& path) {
  const bool npy = ends_with(path, ".npy"), side = ends_with(path, ".npy.json");
  const bool pdf = ends_with(path, ".pdf"), svg = ends_with(path, ".svg");
  const std::optional<nlohmann::ordered_json> r = npy   ? sidecar_record(npy_sidecar_path(path))
                                                  : side ? sidecar_record(path)
                                                  : pdf || svg ? figure_record(path)
                                                               : png_record(path);
  if (!r)
    throw Error(path + (npy ? ": no settings recorded (its sidecar " + npy_sidecar_path(path) + " is missing or not attnmap's)"
                            : ": no attnmap settings recorded in it (not attnmap's output, or written before outputs recorded them)"));
  std::string out = "settings of " + path +
                    (pdf ? " (the PDF's Subject):\n" : svg ? " (<metadata id=\"attnmap\">):\n"
                                                       : " (tEXt '" + std::string(kProvenanceKeyword) + "' / NAME.npy.json):\n");
  for (auto it = r->begin(); it != r->end(); ++it) {
    std::string k = "  " + it.key();
    k.resize(std::max<size_t>(k.size() + 1, 19), ' ');
    out += k + (it.value().is_string() ? it.value().get<std::string>() : it.value().dump()) + "\n";
  }
  if (!npy && !side && !pdf && !svg)
    for (const PngText& t : read_png_text(path))
      if (t.keyword == kStatsKeyword) out += "statistics of this image (tEXt '" + std::string(kStatsKeyword) + "'):\n  " + t.text + "\n";
  return out;
}

}  // namespace attnmap
