#include "engine/run_figures.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "core/names.hpp"
#include "core/setting_ref.hpp"
#include "engine/paths.hpp"
#include "engine/provenance.hpp"
#include "engine/text/score_words.hpp"
#include "core/error.hpp"
#include "draw/canvas.hpp"
#include "draw/figures.hpp"
#include "draw/gallery.hpp"
#include "io/image_io.hpp"
#include "maps/views.hpp"

namespace attnmap {

namespace fs = std::filesystem;

void check_run_figure_options(const BatchOptions& bopt) {
  if (bopt.sheet_columns_given && bopt.contact_sheet.empty())
    throw Error(setting_ref("sheet_columns") + " applies to " + setting_ref("contact_sheet") + ": add " +
                setting_ref("contact_sheet") + " FILE.png");
  if (bopt.sheet_columns < 1) throw Error(setting_ref("sheet_columns") + " must be >= 1, found " + std::to_string(bopt.sheet_columns));
  if (!bopt.contact_sheet.empty()) {
    check_output_name(setting_ref("contact_sheet"), bopt.contact_sheet);
    if (fs::path(bopt.contact_sheet).extension() != ".png")
      throw Error(setting_ref("contact_sheet") + " " + bopt.contact_sheet + ": a contact sheet is a PNG; name a .png file");
  }
  if (bopt.shard_count > 1 && wants_run_figures(bopt))
    throw Error(setting_ref(bopt.contact_sheet.empty() ? "gallery" : "contact_sheet") +
                " shows a whole run, but " + setting_ref("shard") + " " + std::to_string(bopt.shard_index) + "/" +
                std::to_string(bopt.shard_count) + " renders only part of it: once every shard is done, run the same "
                "command without " + setting_ref("shard") + " and with " + setting_ref("skip_existing") +
                " to draw it from the written overlays");
}

namespace {

bool under(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (dir.back() == '/' || path[dir.size()] == '/');
}

/// Neither the figure nor anything in it may lie in an input folder outside --out: the next run's walk
/// would pick it up as a photo.
void check_outside_input_folders(const std::string& flag, const std::string& path, const RenderOptions& opt) {
  const std::string target = canonical_or_empty(path), out = canonical_or_empty(opt.out_dir);
  if (target.empty() || target == out || under(target, out)) return;
  for (const std::string& in : opt.inputs) {
    std::error_code ec;
    if (!fs::is_directory(in, ec)) continue;
    const std::string dir = canonical_or_empty(in);
    if (target == dir || under(target, dir))
      throw Error(flag + " " + path + " is inside the input folder " + in +
                  ": the next run would render it as a photo; put it under " + setting_ref("out") + " or elsewhere");
  }
}

/// "STEM.png" or "STEM-<digits>.png": a page of the sheet STEM.png.
bool is_sheet_page(const std::string& name, const std::string& stem) {
  if (name == stem + ".png") return true;
  if (name.size() <= stem.size() + 5 || name.compare(0, stem.size() + 1, stem + "-") != 0 ||
      name.compare(name.size() - 4, 4, ".png") != 0)
    return false;
  const std::string digits = name.substr(stem.size() + 1, name.size() - stem.size() - 5);
  return std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

/// The run's files by resolved path (canonical_or_empty), each with what it is.
using RunFiles = std::map<std::string, std::string>;

/// The sheet's pages (STEM.png, STEM-1.png, ...): none may be a file of the run, and those already there
/// must be attnmap's own. Throws attnmap::Error.
void check_sheet_pages(const std::string& sheet, const std::string& target, const RunFiles& files) {
  const fs::path t(target);
  const std::string stem = t.stem().string(), dir = t.parent_path().string();
  for (const auto& [c, what] : files)
    if (fs::path(c).parent_path() == t.parent_path() && is_sheet_page(fs::path(c).filename().string(), stem))
      throw Error(setting_ref("contact_sheet") + " " + sheet + ": its page " + c + " would replace " + what + "; choose another name");
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_sheet_page(name, stem)) continue;
    const fs::file_status st = fs::symlink_status(it->path(), ec);
    if (!fs::is_regular_file(st) || !written_by_attnmap(it->path().string()))
      throw Error(setting_ref("contact_sheet") + " " + sheet + ": " + it->path().string() + " already exists and was not written by "
                  "attnmap; it is left alone: choose another name or move it away");
  }
}

void check_sheet_path(const RenderOptions& opt, const BatchOptions& bopt, const std::vector<ReadFile>& reads,
                      const RunFiles& files) {
  const std::string& sheet = bopt.contact_sheet;
  try {
    check_figure_path(sheet);
  } catch (const Error& e) {
    throw Error(setting_ref("contact_sheet") + " " + e.what());
  }
  const std::string target = check_output_file(setting_ref("contact_sheet"), sheet, reads);
  check_sheet_pages(sheet, target, files);
  check_outside_input_folders(setting_ref("contact_sheet"), sheet, opt);
  if (!bopt.gallery.empty()) {
    const std::string thumbs = canonical_or_empty(fs::path(bopt.gallery) / "thumbs");
    if (target == thumbs || under(target, thumbs))
      throw Error(setting_ref("contact_sheet") + " " + sheet + " is inside the gallery's thumbs/ folder, which " +
                  setting_ref("gallery") + " rewrites");
  }
  (void)figure_font();  // a missing font is one usage error now, not a failure after the run
}

void check_gallery_path(const RenderOptions& opt, const BatchOptions& bopt, const std::vector<ReadFile>& reads,
                        const RunFiles& files) {
  const std::string& dir = bopt.gallery;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(setting_ref("gallery") + " " + dir + " is an existing file; name a folder (it gets index.html and thumbs/)");
  const std::string index = (fs::path(dir) / "index.html").string();
  try {
    check_figure_path(index);
  } catch (const Error& e) {
    throw Error(setting_ref("gallery") + " " + e.what());
  }
  const std::string target = check_output_file(setting_ref("gallery"), index, reads);
  if (fs::exists(target, ec) && !is_attnmap_gallery(target))
    throw Error(setting_ref("gallery") + " " + dir + ": " + index + " already exists and is not an attnmap gallery; it is left alone: "
                "choose another folder or move it away");
  const std::string thumbs = canonical_or_empty(fs::path(dir) / "thumbs");
  for (const auto& [c, what] : files)
    if (under(c, thumbs))
      throw Error(setting_ref("gallery") + " " + dir + ": its thumbs/ folder would replace " + c + ", " + what + "; choose another folder");
  check_outside_input_folders(setting_ref("gallery"), dir, opt);
}

}  // namespace

void check_run_figure_paths(const RenderOptions& opt, const BatchOptions& bopt, std::vector<ReadFile> reads) {
  if (const char* env = std::getenv("ATTNMAP_FONT"); env && *env && !bopt.contact_sheet.empty())
    reads.push_back({env, "the label font"});
  RunFiles files;
  for (const ReadFile& r : reads)
    if (std::string c = canonical_or_empty(r.path); !c.empty()) files.emplace(std::move(c), r.what);
  if (!bopt.contact_sheet.empty()) check_sheet_path(opt, bopt, reads, files);
  if (!bopt.gallery.empty()) {
    if (!bopt.contact_sheet.empty()) reads.push_back({bopt.contact_sheet, "the " + setting_ref("contact_sheet") + " file"});
    check_gallery_path(opt, bopt, reads, files);
  }
}

std::string run_row_label(const std::string& input, const std::string& out_base, const std::string& out_dir) {
  const fs::path rel = fs::path(out_base).lexically_normal().lexically_relative(fs::path(out_dir).lexically_normal());
  if (rel.empty() || *rel.begin() == "..") return input;
  return (rel.parent_path() / fs::path(input).filename()).generic_string();
}

namespace {

/// A PNG's width and height from its IHDR chunk (the first 24 bytes), without decoding it; false when the
/// file cannot be read or is not a PNG.
bool png_size(const std::string& path, int* w, int* h) {
  std::ifstream f(path, std::ios::binary);
  unsigned char b[24] = {};
  if (!f.read(reinterpret_cast<char*>(b), 24)) return false;
  if (std::string(reinterpret_cast<char*>(b), 8) != "\x89PNG\r\n\x1a\n" || std::string(reinterpret_cast<char*>(b) + 12, 4) != "IHDR")
    return false;
  auto be = [&](int o) { return (static_cast<long>(b[o]) << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]; };
  const long ww = be(16), hh = be(20);
  if (ww <= 0 || hh <= 0 || ww > (1L << 30) || hh > (1L << 30)) return false;
  *w = static_cast<int>(ww);
  *h = static_cast<int>(hh);
  return true;
}

/// The error of a failed row without the input's path in front (the tile's first line names the input).
std::string error_without_input(const nlohmann::json& j) {
  std::string e = j.value("error", nlohmann::json()).is_string() ? j["error"].get<std::string>() : "failed";
  const std::string in = j.value("input", std::string());
  if (!in.empty() && e.compare(0, in.size() + 2, in + ": ") == 0) e.erase(0, in.size() + 2);
  return e;
}

/// The sheet's second line from the manifest's statistics: "Bag 99% · peak 0.301" ("peak 0.301" without a
/// classifier head).
std::string sheet_detail(const nlohmann::json& j) {
  const std::optional<ImageStats> st = get_image_stats(j);
  if (!st) return "no statistics";
  char buf[160];
  if (!st->top5.empty())
    std::snprintf(buf, sizeof buf, "%s %.0f%% \u00b7 peak %.3g", st->top5[0].first.c_str(),
                  100.0 * static_cast<double>(st->top5[0].second), static_cast<double>(st->stats.max));
  else
    std::snprintf(buf, sizeof buf, "peak %.3g", static_cast<double>(st->stats.max));
  return std::string(buf) + (st->stats.flat() ? " \u00b7 flat" : "");
}

/// The photo's part of an overlay PNG (w x h): the stats chunk's photo_px when it has a legend strip under
/// the photo, else the whole PNG.
std::array<int, 2> photo_px(const std::string& png, int w, int h) {
  try {
    for (const PngText& t : read_png_text(png)) {
      if (t.keyword != kStatsKeyword) continue;
      const nlohmann::json j = nlohmann::json::parse(t.text);
      if (j.contains("photo_px") && j["photo_px"].is_array() && j["photo_px"].size() == 2) {
        const int pw = j["photo_px"][0].get<int>(), ph = j["photo_px"][1].get<int>();
        if (pw > 0 && ph > 0 && pw <= w && ph <= h) return {pw, ph};
      }
    }
  } catch (const std::exception&) {  // unreadable text: the whole PNG
  }
  return {w, h};
}

/// The top-left w x h of `img` (all of it when it is that size).
Image top_left(Image img, int w, int h) {
  if (img.width == w && img.height == h) return img;
  if (img.width < w || img.height < h) throw Error("the overlay is smaller than its photo_px");
  Image out;
  out.width = w;
  out.height = h;
  out.rgb.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  for (int y = 0; y < h; ++y)
    std::copy_n(img.rgb.data() + static_cast<size_t>(y) * static_cast<size_t>(img.width) * 3, static_cast<size_t>(w) * 3,
                out.rgb.data() + static_cast<size_t>(y) * static_cast<size_t>(w) * 3);
  return out;
}

/// One tile per row: the overlay (the row's first output) read from disk when its page is drawn, or a
/// placeholder saying why there is none. Counts the failed rows in *failed.
std::vector<SheetItem> sheet_items(const RenderOptions& opt, const std::vector<RunRow>& rows, size_t* failed) {
  std::vector<SheetItem> items;
  items.reserve(rows.size());
  LoadOptions lo = opt.load;
  lo.apply_exif = false;  // the overlay stands as drawn
  for (const RunRow& r : rows) {
    const nlohmann::json j = nlohmann::json::parse(r.manifest);
    SheetItem it;
    it.name = r.label;
    const std::vector<std::string> outs = j.value("outputs", std::vector<std::string>{});
    if (j.value("status", std::string()) == "failed" || outs.empty()) {
      ++*failed;
      it.detail = "failed";
      it.placeholder = "failed: " + error_without_input(j);
    } else if (png_size(outs.front(), &it.width, &it.height)) {
      const std::string overlay = outs.front();
      const std::array<int, 2> photo = photo_px(overlay, it.width, it.height);
      it.width = photo[0];
      it.height = photo[1];
      it.load = [overlay, lo, photo] { return top_left(load_image(overlay, lo), photo[0], photo[1]); };
      it.detail = sheet_detail(j);
    } else {
      it.detail = sheet_detail(j);
      it.placeholder = outs.front() + ": cannot be read as a PNG";
    }
    items.push_back(std::move(it));
  }
  return items;
}

std::string setting(const nlohmann::json& settings, const char* key) {
  if (!settings.contains(key)) return "?";
  const nlohmann::json& v = settings[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

/// A row's manifest fields as a gallery entry: the same values the manifest has.
GalleryEntry gallery_entry(const nlohmann::json& j) {
  GalleryEntry e;
  e.input = j.value("input", std::string());
  e.status = j.value("status", std::string());
  e.error = j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : "";
  e.outputs = j.value("outputs", std::vector<std::string>{});
  if (j.contains("milliseconds") && j["milliseconds"].is_number()) e.milliseconds = j["milliseconds"].get<double>();
  if (const std::optional<ImageStats> st = get_image_stats(j)) {
    e.has_stats = true;
    e.map_max = st->stats.max;
    e.argmax_row = st->stats.argmax_row;
    e.argmax_col = st->stats.argmax_col;
    e.entropy = st->stats.entropy;
    e.entropy_valid = st->stats.entropy_valid;
    if (!st->top5.empty()) {
      e.top1 = st->top5[0].first;
      e.top1_probability = st->top5[0].second;
    }
  }
  return e;
}

// "view L1/h3", or with several views "view L1/h3 (the first of --views L1/h3,L3/mean,rollout)": the sheet's
// thumbnails and the gallery's statistics are the first view's. Words of those files: the setting spelled as the flag.
// With a class-specific view chosen by --class other than top1, the tiles are that class's maps while their
// labels give each image's top-1: "(class 'a cat')", "(class top3: the first of each image's)". With texts as the
// classes: ", zero-shot over 2 texts"; a SigLIP's (record "score_rule": "sigmoid"): ", zero-shot over 2 texts
// (sigmoid, each text alone)".
std::string shown_view(const nlohmann::json& settings) {
  const std::string views = setting(settings, "view");
  const size_t comma = views.find(',');
  std::string s = comma == std::string::npos ? "view " + views
                                             : "view " + views.substr(0, comma) + " (the first of " +
                                                   spelled_settings(setting_ref("views")) + " " + views + ")";
  const std::string cls = settings.contains("class") && settings["class"].is_string() ? settings["class"].get<std::string>() : "";
  bool specific = false;  // the first view's kind, by the view grammar (a record's view is written by it)
  try {
    specific = is_class_specific(parse_views(views.substr(0, comma)).front().kind);
  } catch (const Error&) {
  }
  if (specific && !cls.empty() && cls != "top1") {
    const bool top = cls.size() > 3 && cls.compare(0, 3, "top") == 0;
    s += top ? " (class " + cls + ": the first of each image's)" : " (class '" + cls + "')";
  }
  if (settings.contains("zero_shot") && settings["zero_shot"].is_object() && settings["zero_shot"].contains("texts")) {
    const nlohmann::json& z = settings["zero_shot"];
    const bool sigmoid = z.contains("score_rule") && z["score_rule"] == score_rule_name(ScoreRule::sigmoid);
    s += ", zero-shot over " + counted(z["texts"].size(), "text") +
         zero_shot_rule_parenthesis(sigmoid ? ScoreRule::sigmoid : ScoreRule::softmax);
  }
  return s;
}

/// The sheet's record: the run's with "colour_bars", its bar's entry (as a figure's, with_colour_bars) when
/// it has one: data_max the largest map_max of the rows (the overlays' maps), clipped when one lies above
/// vmax, and instead of a share of cells (the sheet is drawn from the manifest's statistics, not the maps)
/// "clipped_images" of "images" (the rows with statistics).
std::string sheet_record(const std::string& provenance, const std::vector<RunRow>& rows, const SheetScale& sheet) {
  if (provenance.empty() || !sheet.scale || !sheet.cmap) return provenance;
  const Scale& s = *sheet.scale;
  double data_max = 0.0;
  size_t images = 0, clipped = 0;
  for (const RunRow& r : rows)
    if (const auto st = get_image_stats(nlohmann::json::parse(r.manifest))) {
      const double mx = static_cast<double>(st->stats.max);
      data_max = images++ ? std::max(data_max, mx) : mx;
      clipped += mx > s.vmax;
    }
  nlohmann::ordered_json r = nlohmann::ordered_json::parse(provenance);
  r["colour_bars"] = nlohmann::ordered_json::array();
  r["colour_bars"].push_back({{"units", s.units}, {"vmin", s.vmin}, {"vmax", s.vmax},
                              {"data_max", float_json(static_cast<float>(data_max))}, {"clipped", clipped > 0},
                              {"clipped_images", clipped}, {"images", images}});
  return provenance_text(r);
}

/// The contact sheet written; returns its pages' paths.
std::vector<std::string> write_sheet(const RenderOptions& opt, const BatchOptions& bopt, const std::vector<RunRow>& rows,
                                     const nlohmann::json& settings, const std::string& provenance,
                                     const SheetScale& sheet_scale) {
  size_t failed = 0;
  const std::vector<SheetItem> items = sheet_items(opt, rows, &failed);
  std::string title = opt.out_dir + " \u2014 " + std::to_string(rows.size()) + " input" + (rows.size() == 1 ? "" : "s") +
                      ", " + shown_view(settings) + ", weights " + setting(settings, "weights");
  if (failed > 0) title += " \u2014 " + std::to_string(failed) + " failed (grey tiles)";
  SheetOptions so;
  so.columns = bopt.sheet_columns;
  so.dpi = opt.dpi.value_or(300.0);
  so.provenance = sheet_record(provenance, rows, sheet_scale);
  so.scale = sheet_scale.scale;
  so.cmap = sheet_scale.cmap;
  std::error_code ec;
  const fs::path parent = fs::path(bopt.contact_sheet).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  return write_contact_sheet(bopt.contact_sheet, title, items, so);
}

/// The gallery written; returns the line that says so.
std::string write_page(const RenderOptions& opt, const BatchOptions& bopt, const std::vector<RunRow>& rows,
                       const nlohmann::json& settings, const std::string& provenance) {
  std::vector<GalleryEntry> entries;
  entries.reserve(rows.size());
  for (const RunRow& r : rows) entries.push_back(gallery_entry(nlohmann::json::parse(r.manifest)));
  GalleryOptions go;
  go.title = "attnmap gallery \u2014 " + opt.out_dir;
  go.subtitle = "weights " + setting(settings, "weights") + " (sha256 " + setting(settings, "weights_sha256").substr(0, 12) +
                "\u2026), " + shown_view(settings) + ", " + counted(rows.size(), "input");
  go.thumb_text = {{kProvenanceKeyword, provenance}};
  const int thumbs = write_gallery(bopt.gallery, entries, go);
  return "gallery -> " + (fs::path(bopt.gallery) / "index.html").string() + " (" + counted(static_cast<size_t>(thumbs), "thumbnail") + ")";
}

}  // namespace

SheetScale sheet_scale(const RenderContext& ctx, const std::vector<RunRow>& rows) {
  const RenderOptions& opt = *ctx.opt;
  SheetScale sheet;
  if (opt.threshold || ctx.views.empty()) return sheet;
  sheet.cmap = ctx.cmap;
  const std::string& units = ctx.views[0].units;
  if (opt.scale && opt.scale->kind == ScaleKind::Run) {
    if (const auto it = ctx.run_scales.find(units); it != ctx.run_scales.end()) sheet.scale = it->second;
  } else if (opt.scale && opt.scale->kind == ScaleKind::Fixed) {
    Scale s{opt.scale->vmin, opt.scale->vmax, units};
    for (const RunRow& r : rows)  // the extend mark when some overlay's map goes past the top
      if (const auto st = get_image_stats(nlohmann::json::parse(r.manifest)); st && st->stats.max > s.vmax) s.clip_max = true;
    sheet.scale = s;
  }
  return sheet;
}

int write_run_figures(const RenderOptions& opt, const BatchOptions& bopt, const std::vector<RunRow>& rows,
                      const nlohmann::json& settings, const std::string& provenance, const SheetScale& sheet_scale,
                      const BatchHooks& hooks) {
  int status = 0;
  if (rows.empty()) return status;
  auto attempt = [&](const char* id, const std::string& path, auto&& write) {
    try {
      write();
    } catch (const std::exception& e) {
      say(hooks, LineStream::Err, "attnmap: error: " + printable(spelled_settings(setting_ref(id)) + " " + path + ": " + spelled_settings(e.what())));
      status = 1;
    }
  };
  if (!bopt.contact_sheet.empty())
    attempt("contact_sheet", bopt.contact_sheet, [&] {
      for (const std::string& p : write_sheet(opt, bopt, rows, settings, provenance, sheet_scale))
        if (!opt.quiet) say(hooks, LineStream::Out, printable("contact sheet -> " + p));
    });
  if (!bopt.gallery.empty())
    attempt("gallery", bopt.gallery, [&] {
      const std::string line = write_page(opt, bopt, rows, settings, provenance);
      if (!opt.quiet) say(hooks, LineStream::Out, printable(line));
    });
  return status;
}

}  // namespace attnmap
