// stats_report.cpp - what stats writes once every image is computed (stats.hpp,
// write_stats_report): heads.csv, heads_per_image.csv, norms.csv, stats.json, the attention-distance figure
// and the token-norm histogram (docs/stats.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "engine/stats/stats.hpp"
#include "draw/plots.hpp"
#include "io/image_io.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {
// The report's files in its folder (write_stats_report, stats_report_paths).
constexpr const char* kHeadsCsv = "heads.csv";
constexpr const char* kPerImageCsv = "heads_per_image.csv";
constexpr const char* kNormsCsv = "norms.csv";
constexpr const char* kStatsJson = "stats.json";
constexpr const char* kDistanceFigure = "attention_distance";  // + each figure format's extension
constexpr const char* kNormsFigure = "token_norms";
}  // namespace

std::vector<std::string> stats_report_paths(const std::string& out_dir, const std::vector<FigureFormat>& formats) {
  const fs::path dir(out_dir);
  std::vector<std::string> out;
  for (const char* name : {kHeadsCsv, kPerImageCsv, kNormsCsv, kStatsJson}) out.push_back((dir / name).string());
  for (const char* name : {kDistanceFigure, kNormsFigure})
    for (const FigureFormat f : formats) out.push_back((dir / name).string() + figure_extension(f));
  return out;
}


namespace {

using Json = nlohmann::ordered_json;

/// %.9g; "nan" as an empty CSV cell.
std::string num(double v) {
  if (!std::isfinite(v)) return "";
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

/// A CSV cell: quoted (with "" for ") when it holds a comma, quote or line break.
std::string cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void write_text(const std::string& path, const std::string& text) {
  write_file_atomic(path, std::vector<uint8_t>(text.begin(), text.end()));
}

/// The per-(block, head) quantities of one image (or of the mean over images) as (L, H) arrays, and the class
/// token's attention to each other prefix token as (L, H) arrays by name.
struct HeadTable {
  std::vector<std::vector<double>> distance, entropy, cls_self, cls_patches;  // (L, H)
  std::vector<std::vector<std::vector<double>>> cls_to;                        // (P-1, L, H)
};

HeadTable head_table(const StatsRun& run, const std::vector<const ImageStatsResult*>& images) {
  const int L = run.depth, H = run.layout.heads;
  const size_t np = run.prefix_names.size();
  const bool cls = run.layout.class_token;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::vector<double>> zero(static_cast<size_t>(L), std::vector<double>(static_cast<size_t>(H), 0.0));
  HeadTable t{zero, zero, zero, zero, std::vector<std::vector<std::vector<double>>>(np, zero)};
  const double n = static_cast<double>(images.size());
  for (const ImageStatsResult* im : images)
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const BlockHeadStats& b = im->blocks[static_cast<size_t>(l)];
        const size_t lh = static_cast<size_t>(h);
        t.distance[l][lh] += b.distance_px[lh] / n;
        t.entropy[l][lh] += b.entropy[lh] / n;
        t.cls_self[l][lh] += cls ? b.cls_self[lh] / n : nan;
        t.cls_patches[l][lh] += cls ? b.cls_patches[lh] / n : nan;
        for (size_t k = 0; k < np; ++k) t.cls_to[k][l][lh] += cls ? b.cls_prefix[lh * np + k] / n : nan;
      }
  return t;
}

Json head_json(const StatsRun& run, const HeadTable& t) {
  Json j;
  j["mean_distance_px"] = t.distance;
  j["entropy_nats"] = t.entropy;
  j["cls_self"] = run.layout.class_token ? Json(t.cls_self) : Json(nullptr);
  j["cls_patches"] = run.layout.class_token ? Json(t.cls_patches) : Json(nullptr);
  Json to = Json::object();
  for (size_t k = 0; k < run.prefix_names.size(); ++k) to[run.prefix_names[k]] = run.layout.class_token ? Json(t.cls_to[k]) : Json(nullptr);
  j["cls_to"] = to;
  return j;
}

/// One line per (block, head): the prefix "INPUT," (or "") then the quantities.
void head_rows(std::string& csv, const std::string& prefix, const StatsRun& run, const HeadTable& t) {
  for (int l = 0; l < run.depth; ++l)
    for (int h = 0; h < run.layout.heads; ++h) {
      const size_t lh = static_cast<size_t>(h);
      csv += prefix + std::to_string(l) + "," + std::to_string(h) + "," + num(t.distance[l][lh]) + "," + num(t.entropy[l][lh]) +
             "," + num(t.cls_self[l][lh]) + "," + num(t.cls_patches[l][lh]);
      for (size_t k = 0; k < run.prefix_names.size(); ++k) csv += "," + num(t.cls_to[k][l][lh]);
      csv += "\n";
    }
}

std::string head_header(const StatsRun& run) {
  std::string h = "block,head,mean_distance_px,entropy_nats,cls_self,cls_patches";
  for (const std::string& n : run.prefix_names) h += ",cls_to_" + n;
  return h + "\n";
}

Json norm_json(const std::vector<NormSummary>& s, bool per_image) {
  Json j;
  auto col = [&](double NormSummary::*f) {
    Json a = Json::array();
    for (const NormSummary& x : s) a.push_back(std::isfinite(x.*f) ? Json(x.*f) : Json(nullptr));
    return a;
  };
  j["cls"] = col(&NormSummary::cls);
  j["registers_mean"] = col(&NormSummary::registers);
  j["patch_mean"] = col(&NormSummary::patch_mean);
  j["patch_median"] = col(&NormSummary::patch_median);
  j["patch_max"] = col(&NormSummary::patch_max);
  if (per_image) j["outlier_threshold"] = col(&NormSummary::threshold);
  Json o = Json::array();
  for (const NormSummary& x : s) o.push_back(per_image ? Json(x.outliers) : Json(x.threshold));  // mean: see below
  j["outliers"] = o;
  return j;
}

/// The mean of each block's summary over the images (outliers: the mean count per image, in `threshold`).
std::vector<NormSummary> mean_norms(const StatsRun& run, const std::vector<const ImageStatsResult*>& images) {
  std::vector<NormSummary> m(static_cast<size_t>(run.depth));
  const double n = static_cast<double>(images.size());
  for (const ImageStatsResult* im : images)
    for (size_t l = 0; l < m.size(); ++l) {
      const NormSummary& s = im->norm_summary[l];
      m[l].cls += s.cls / n;
      m[l].registers += s.registers / n;
      m[l].patch_mean += s.patch_mean / n;
      m[l].patch_median += s.patch_median / n;
      m[l].patch_max += s.patch_max / n;
      m[l].threshold += s.outliers / n;
    }
  return m;
}

std::string norms_csv(const StatsRun& run, const std::vector<const ImageStatsResult*>& images) {
  std::string csv = "input,block,cls_norm,registers_norm_mean,patch_norm_mean,patch_norm_median,patch_norm_max,outlier_threshold,outliers\n";
  for (const ImageStatsResult* im : images)
    for (int l = 0; l < run.depth; ++l) {
      const NormSummary& s = im->norm_summary[static_cast<size_t>(l)];
      csv += cell(im->input) + "," + std::to_string(l) + "," + num(s.cls) + "," + num(s.registers) + "," + num(s.patch_mean) +
             "," + num(s.patch_median) + "," + num(s.patch_max) + "," + num(s.threshold) + "," + std::to_string(s.outliers) + "\n";
    }
  return csv;
}

std::string size_text(const StatsRun& run) {
  const Json& s = run.record["size"];
  return s.is_array() && s.size() == 2 ? std::to_string(s[0].get<int>()) + "\u00d7" + std::to_string(s[1].get<int>()) : "";
}

std::vector<std::string> distance_figure(const StatsRun& run, const HeadTable& t, size_t n) {
  DotPlot p;
  const std::string weights = run.record.value("weights", std::string());
  p.title = "Mean attention distance per head, " + std::to_string(n) + (n == 1 ? " image" : " images") + " (" + weights + ")";
  p.x_label = spelled_settings("block (0 = first, as " + setting_ref("layer") + " counts)");  // drawn: the flag's words
  p.y_label = "mean attention distance (pixels of the " + size_text(run) + " input)";
  const int H = run.layout.heads;
  const std::vector<Rgb> colors = series_colors(H);
  for (int l = 0; l < run.depth; ++l) p.categories.push_back(std::to_string(l));
  for (int h = 0; h < H; ++h) {
    DotSeries s{"head " + std::to_string(h), colors[static_cast<size_t>(h)], {}, {}};
    const double off = H > 1 ? (static_cast<double>(h) / (H - 1) - 0.5) * 0.5 : 0.0;
    for (int l = 0; l < run.depth; ++l) {
      s.x.push_back(l + off);
      s.y.push_back(t.distance[static_cast<size_t>(l)][static_cast<size_t>(h)]);
    }
    p.series.push_back(std::move(s));
  }
  if (run.notes)
    p.note = "Attention-weighted distance between query and key patch centres (patch " + std::to_string(run.layout.patch) +
           " px), summed over patch keys (prefix tokens left out, weights not renormalised), averaged over patch queries and "
           "images; a block's heads are spread sideways in head order.";
  return write_dot_plot((fs::path(run.out_dir) / kDistanceFigure).string(), p, run.width_in, run.figures);
}

std::vector<std::string> norm_histogram(const StatsRun& run, const std::vector<const ImageStatsResult*>& images) {
  const size_t nb = static_cast<size_t>(run.norm_block);
  const int P = run.layout.num_prefix;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const ImageStatsResult* im : images)
    for (size_t t = static_cast<size_t>(P); t < im->norms[nb].size(); ++t) lo = std::min<double>(lo, im->norms[nb][t]), hi = std::max<double>(hi, im->norms[nb][t]);
  HistogramPlot p;
  p.edges = histogram_edges(lo, hi, run.bins);
  p.layers.assign(2, std::vector<double>(static_cast<size_t>(run.bins), 0.0));
  for (const ImageStatsResult* im : images)
    for (size_t t = static_cast<size_t>(P); t < im->norms[nb].size(); ++t) {
      const double v = im->norms[nb][t];
      const int b = histogram_bin(p.edges, v);
      if (b >= 0) p.layers[v > im->norm_summary[nb].threshold ? 1 : 0][static_cast<size_t>(b)] += 1;
    }
  char k[32];
  std::snprintf(k, sizeof k, "%g", run.outlier_k);
  p.labels = {"patch tokens", "high-norm outliers"};
  p.colors = {Rgb{31, 119, 180}, Rgb{214, 39, 40}};
  const bool outliers = std::any_of(p.layers[1].begin(), p.layers[1].end(), [](double c) { return c > 0; });
  if (!outliers) {  // the legend lists only what is drawn; the note says there are none
    p.layers.pop_back();
    p.labels.pop_back();
    p.colors.pop_back();
  }
  p.title = "Patch-token norms after block " + std::to_string(run.norm_block) + " (0-based, of " + std::to_string(run.depth) + "), " +
            std::to_string(images.size()) + (images.size() == 1 ? " image" : " images");
  p.x_label = "L2 norm of the token (residual stream, before the final LayerNorm)";
  p.y_label = "tokens (log scale)";
  if (run.notes)
    p.note = std::string(outliers ? "High-norm outliers: " : "No high-norm outliers at this block (") + "norm > median + " +
             std::string(k) + "\u00b71.4826\u00b7MAD of their image's patch-token norms" +
             (outliers ? " at this block. " : "). ") + std::to_string(run.bins) + " equal bins from the smallest to the largest norm.";
  return write_histogram((fs::path(run.out_dir) / kNormsFigure).string(), p, run.width_in, run.figures);
}

}  // namespace

std::vector<std::string> write_stats_report(const StatsRun& run, const std::vector<ImageStatsResult>& images) {
  std::vector<const ImageStatsResult*> done;
  Json failed = Json::array();
  for (const ImageStatsResult& im : images) {
    if (im.error.empty()) done.push_back(&im);
    else failed.push_back({{"input", im.input}, {"error", im.error}});
  }
  if (done.empty()) throw Error("stats: no image was computed");
  const HeadTable mean = head_table(run, done);
  const fs::path dir(run.out_dir);
  std::vector<std::string> wrote;
  std::string csv = head_header(run);
  head_rows(csv, "", run, mean);
  write_text((dir / kHeadsCsv).string(), csv);
  std::string per = "input," + head_header(run);
  Json per_image = Json::array();
  for (const ImageStatsResult* im : done) {
    const HeadTable t = head_table(run, {im});
    head_rows(per, cell(im->input) + ",", run, t);
    per_image.push_back({{"input", im->input}, {"outlier_map", im->outlier_map}, {"milliseconds", im->milliseconds},
                         {"heads", head_json(run, t)}, {"norms", norm_json(im->norm_summary, true)}});
  }
  write_text((dir / kPerImageCsv).string(), per);
  write_text((dir / kNormsCsv).string(), norms_csv(run, done));
  wrote.insert(wrote.end(), {(dir / kHeadsCsv).string(), (dir / kPerImageCsv).string(), (dir / kNormsCsv).string()});
  Json j;
  j["attnmap_stats"] = 1;
  j["settings"] = run.record;
  j["model"] = {{"blocks", run.depth}, {"heads", run.layout.heads}, {"tokens", run.layout.tokens()},
                {"prefix_tokens", run.layout.num_prefix}, {"class_token", run.layout.class_token},
                {"prefix_names", run.prefix_names}, {"grid", {run.layout.grid_w, run.layout.grid_h}}, {"patch", run.layout.patch}};
  j["units"] = {{"mean_distance_px", "pixels of the model input"}, {"entropy_nats", "nats"}, {"cls", "attention probability"},
                {"norms", "L2 norm of the residual stream after the block"}};
  j["images"] = done.size();
  j["failed"] = failed;
  j["heads"] = head_json(run, mean);
  Json norms = norm_json(mean_norms(run, done), false);
  norms["outliers_mean_per_image"] = norms["outliers"];
  norms.erase("outliers");
  j["norms"] = norms;
  j["per_image"] = per_image;
  write_text((dir / kStatsJson).string(), j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n");
  wrote.push_back((dir / kStatsJson).string());
  for (const std::string& f : distance_figure(run, mean, done.size())) wrote.push_back(f);
  for (const std::string& f : norm_histogram(run, done)) wrote.push_back(f);
  return wrote;
}

}  // namespace attnmap
