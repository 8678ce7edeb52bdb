// figure.cpp - the paper figure (figure.hpp): the inputs and -o against them, the model and the views, every
// image's maps, the scales, labels and record, the file. The views are maps/views.hpp's, the scales
// draw/scale.hpp's, the drawing draw/figures.hpp's; no maths here.
#include "engine/figure/figure.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "core/error.hpp"
#include "core/names.hpp"
#include "core/setting_ref.hpp"
#include "draw/canvas.hpp"
#include "draw/colormap.hpp"
#include "engine/figure/figure_text.hpp"
#include "engine/text/zero_shot.hpp"
#include "engine/paths.hpp"
#include "engine/provenance.hpp"
#include "engine/session.hpp"
#include "engine/walk.hpp"
#include "io/hash.hpp"
#include "model/sgemm.hpp"

namespace attnmap {

namespace fs = std::filesystem;

std::vector<std::string> split_label_list(const std::string& list) {
  std::vector<std::string> items(1);
  for (size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (c == '\\') {
      if (i + 1 < list.size() && (list[i + 1] == ',' || list[i + 1] == '\\')) {
        items.back() += list[++i];
        continue;
      }
      throw Error("'" + list + "': a backslash escapes a comma (\\,) or a backslash (\\\\) only");
    }
    if (c == ',') items.emplace_back();
    else items.back() += c;
  }
  return items;
}

namespace {

// ---- step 2: inputs, -o against them, the model and the views ---------------------------------------------

/// The images, one row each, in the order given (folders walked and sorted as render walks them).
struct FigureInputs {
  std::vector<std::string> roots;  ///< the inputs as given (files and folders)
  std::vector<std::string> files;
  std::vector<std::string> failed;  ///< "PATH: why" for inputs that do not exist or cannot be walked
};

FigureInputs plan_inputs(const FigurePlan& p) {
  FigureInputs in;
  in.roots = p.ro.inputs;
  in.files = figure_input_files(p.ro.inputs, &in.failed);
  return in;
}

/// -o must not replace an input, the weights, their configs, the program, the label font or the --labels file.
std::string check_out_file(const std::string& out, const std::string& weights_path, const FigureInputs& in,
                           const std::string& labels_file) {
  std::vector<ReadFile> reads = model_reads(weights_path);
  for (const std::string& f : in.files) reads.push_back({f, "an input"});
  if (const char* env = std::getenv("ATTNMAP_FONT"); env && *env) reads.push_back({env, "the label font"});
  if (!labels_file.empty()) reads.push_back({labels_file, "the " + setting_ref("labels") + " file"});
  // A PNG figure inside an input folder would be walked as a photo by the next run over that folder.
  const std::string target = fs::absolute(out).lexically_normal().parent_path().string();
  for (const std::string& input : in.roots) {
    std::error_code ec;
    if (!fs::is_directory(input, ec) || fs::path(out).extension() != ".png") continue;
    const std::string dir = canonical_or_empty(input), parent = canonical_or_empty(target);
    if (!dir.empty() && !parent.empty() && (parent == dir || parent.rfind(dir + "/", 0) == 0))
      throw Error("-o " + out + " is inside the input folder " + input +
                  ": the next run over that folder would take the figure for a photo; write it elsewhere (or as .pdf/.svg)");
  }
  return check_output_file("-o", out, reads);
}

std::vector<ResolvedView> resolve_figure_views(const FigurePlan& p, const ViTWeights& model) {
  ViewSettings settings = p.settings;  // attn-grad without @L: the config's default view's block, as render
  settings.attn_grad_layer = model.hp.default_layer.value_or(-1);
  std::vector<ResolvedView> views = with_prefix(
      setting_ref("views") + ":", [&] { return resolve_views(p.views, model.hp, model.has_classes(), settings); });
  for (const ResolvedView& v : views)
    if (v.class_specific) {
      with_prefix(setting_ref("class_spec"),
                  [&] { check_class_spec(p.classes, model.num_classes(), model.hp.labels, has_text_classes(model)); });
      break;
    }
  return views;
}

// ---- step 3: every image read, then every image's maps ----------------------------------------------------

/// One row: the photo, where its map lies, and its maps in map-column order.
struct FigureImage {
  std::string input;
  Image photo;
  PhotoBox box;
  std::vector<ViewMap> maps;
  int class_index = -1;  ///< the class the class-specific views explain (-1: none asked, or a column per text)
  std::string sha256;    ///< of the input's bytes (the record's images[].sha256)
  std::vector<double> probs;  ///< with texts: each text's zero-shot probability (softmax over the texts, or SigLIP's sigmoid)
};

std::string class_name(int c, const HParams& hp) {
  return c >= 0 && static_cast<size_t>(c) < hp.labels.size() ? hp.labels[static_cast<size_t>(c)] : "class " + std::to_string(c);
}

/// Each row's maps of `views` (one forward pass each); `current` names the row being computed.
void compute_row_maps(const FigurePlan& p, const ViTWeights& model, const FigureColumns& cols,
                      std::vector<FigureImage>* rows, std::string* current) {
  const HParams& hp = model.hp;
  const ClassSpec classes = computed_classes(p, cols, model.num_classes());
  for (FigureImage& r : *rows) {
    *current = r.input;
    const ModelInput mi = preprocess(r.photo, hp.image_w, hp.image_h, p.ro.resize, hp.mean.data(), hp.std.data(),
                                     hp.crop_pct.value_or(0.875f));
    box_pixels(mi.box, r.photo.width, r.photo.height, &r.box.x0, &r.box.y0, &r.box.w, &r.box.h);
    std::vector<float> logits;
    r.maps = column_maps(cols, compute_views(model, mi.chw.data(), cols.computed, classes, &logits, &mi.box));
    if (cols.zero_shot && !logits.empty()) r.probs = class_probabilities(logits, cols.rule);
    for (const ViewMap& m : r.maps)
      if (m.class_index >= 0 && !cols.per_text) r.class_index = m.class_index;
  }
}

/// The warning line of a photo too small for the model ("" when it is not, or under quiet).
std::string small_photo_line(const FigurePlan& p, const std::string& name, const Image& photo, const HParams& hp) {
  const std::string w = small_image_warning(photo.width, photo.height, hp);
  if (w.empty() || p.ro.quiet) return "";
  return "attnmap: warning: " + printable(name + ": " + w.substr(std::string(kWarningNote).size()));
}

/// A row's failure: "ROW: why" (a message that names the row already kept as it is), "; no figure written".
std::string row_failure(const std::string& row, const std::string& msg) {
  return (msg.compare(0, row.size(), row) == 0 ? msg : row + ": " + msg) + "; no figure written";
}

std::vector<std::string> column_titles(const FigurePlan& p, const FigureColumns& cols, const HParams& hp, int fixed_class);
void check_labels_fit(const std::vector<std::string>& titles, const std::vector<FigureRow>& rows,
                      const ComparisonScales& cs, const ComparisonOptions& co, const std::string& fewer = "views",
                      bool as_drawn = false);

/// Refuses (usage error, status 2) a figure laid out as `titles`, `rows`, `cs`, `co` when a side is over cairo's
/// kMaxCanvas pixels: its size, the limit, the largest whole dpi that fits it (laid out again at lower dpi; with
/// `at_least`, cs is an estimate from below and the dpi is found without colour bars - the widest cells, the
/// tallest rows - with room for bars under them), what else makes it smaller, and for a PDF or SVG that it is
/// held to the same pixels.
void check_figure_pixels(const std::vector<std::string>& titles, const std::vector<FigureRow>& rows,
                         const ComparisonScales& cs, ComparisonOptions co, const std::string& format,
                         bool at_least = false) {
  ComparisonScales widest;  // every map column on its own min-max: no colour bar narrows the cells
  widest.column_scale.assign(cs.column_scale.size(), -1);
  const double room = at_least ? 0.98 * kMaxCanvas : kMaxCanvas;
  const auto fits = [&](double dpi) {
    co.dpi = dpi;
    const auto [w, h] = comparison_pixels(titles, rows, at_least ? widest : cs, co);
    return w <= room && h <= room;
  };
  const double dpi = co.dpi;
  std::pair<int, int> size;
  try {
    size = comparison_pixels(titles, rows, cs, co);
  } catch (const Error&) {
    if (at_least) return;  // cells under 16 pixels beside the placeholder bars: the figure as drawn is checked
    throw;
  }
  const auto [w, h] = size;
  if (w <= kMaxCanvas && h <= kMaxCanvas) return;
  int fit = 0;
  try {
    co.dpi = dpi;  // sizes scale with the dpi: the first guess from the layout the dpi is found with
    const auto [gw, gh] = comparison_pixels(titles, rows, at_least ? widest : cs, co);
    fit = static_cast<int>(std::floor(dpi * room / std::max(gw, gh)));
    for (int tries = 0; fit >= 1 && !fits(fit); ++tries)
      fit = tries < 12 ? std::min(fit - 1, static_cast<int>(std::floor(0.99 * fit))) : 0;
  } catch (const Error&) {  // cells under 16 pixels at that dpi: no dpi to suggest
    fit = 0;
  }
  std::string msg = over_canvas_limit("figure", w, h, at_least) + " (" + shown_number(co.width_in) + " in wide at " +
                    shown_number(dpi) + " dpi, " + counted(rows.size(), "image") + " \u00d7 " +
                    counted(titles.size(), "view") + ")";
  if (format == "pdf" || format == "svg")
    msg += std::string(format == "pdf" ? "; a PDF" : "; an SVG") + " figure is laid out in the same pixels at " +
           setting_ref("dpi") + " and held to the same limit";
  msg += "; make it smaller: ";
  if (fit >= 1) msg += setting_ref("dpi") + " " + std::to_string(fit) + " or lower, ";
  else msg += "a lower " + setting_ref("dpi") + ", ";
  throw Error(msg + "a smaller " + setting_ref("width_in") + ", or fewer images in one figure");
}

/// check_figure_pixels before any map exists, once the photos are known: the layout of `images` with the views'
/// labels as column titles and, per unit, a placeholder scale whose colour bar is wider than a real one (its
/// tick labels of 6 digits and a '+'): cells no wider than the figure's, so its height is a lower bound and a
/// figure that can be drawn is never refused here (draw_figure_rows checks the figure as drawn again).
void check_figure_size(const FigurePlan& p, const FigureColumns& cols, const HParams& hp,
                       const std::vector<FigureImage>& images, const std::string& format) {
  std::vector<std::string> titles = column_titles(p, cols, hp, -1);
  std::vector<std::string> captions;  // with texts: a placeholder as wide as the widest probability
  ComparisonScales cs;
  std::map<std::string, int> unit_index;
  for (size_t j = 0; j < cols.views.size(); ++j) {
    const ResolvedView& v = cols.views[j];
    if (!cols.zero_shot) titles[j] = view_label(v, p.ro.block_base);  // as before texts, byte for byte
    if (v.spec.kind == ViewKind::Photo) continue;
    captions.push_back(cols.zero_shot && v.class_specific ? probability_caption(1.0, cols.rule) : "");
    if (p.scale.kind == ScaleKind::Map) {
      cs.column_scale.push_back(-1);
      continue;
    }
    const auto it = unit_index.emplace(v.units, static_cast<int>(unit_index.size())).first;
    if (static_cast<size_t>(it->second) == cs.scales.size()) {
      cs.scales.push_back(Scale{-9876.5, 9876.5, v.units});
      cs.scales.back().clip_max = true;
    }
    cs.column_scale.push_back(it->second);
  }
  std::vector<FigureRow> rows;
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string label = p.row_labels ? (*p.row_labels)[i] : fs::path(images[i].input).filename().string();
    rows.push_back(FigureRow{label, &images[i].photo, PhotoBox{}, std::vector<GridMap>(cs.column_scale.size())});
  }
  ComparisonOptions co;
  co.width_in = p.width_in;
  co.dpi = p.ro.dpi.value_or(300.0);
  if (p.ro.title) co.title = *p.ro.title;
  if (p.column_labels) co.column_labels = *p.column_labels;
  if (cols.zero_shot && cols.class_specific) co.captions.assign(rows.size(), captions);
  if (cols.per_text) {  // a column per text: labels that cannot fit refused before any map
    ComparisonScales widest;  // no bars, the widest cells: a figure that can be drawn is never refused here
    widest.column_scale.assign(cs.column_scale.size(), -1);
    // the width named is the placeholder bars' (wider than the real ones): at it the figure is drawn
    if (!comparison_fits(titles, rows, widest, co, true)) check_labels_fit(titles, rows, cs, co, "views or texts", true);
  }
  check_figure_pixels(titles, rows, cs, co, format, true);
}

/// Reads every image first (a bad file is found before any forward pass), then computes each one's views.
/// Returns false, the failure said as one line naming the file (hooks, Err), when an image fails.
bool compute_rows(const FigurePlan& p, const ViTWeights& model, const FigureColumns& cols,
                  const FigureInputs& in, std::vector<FigureImage>* rows, const BatchHooks& hooks) {
  for (const std::string& f : in.failed) {
    say(hooks, LineStream::Err, "attnmap: error: " + printable(f) + "; no figure written");
    return false;
  }
  const HParams& hp = model.hp;
  std::string current;
  try {
    for (const std::string& f : in.files) {
      current = f;
      const std::vector<uint8_t> bytes = read_file(f);  // hashed and decoded from the same bytes
      rows->push_back(FigureImage{f, decode_image(bytes.data(), bytes.size(), f, p.ro.load), {}, {}, -1,
                                  sha256_bytes(bytes.data(), bytes.size()), {}});
      say(hooks, LineStream::Err, small_photo_line(p, f, rows->back().photo, hp));
    }
  } catch (const std::exception& e) {
    say(hooks, LineStream::Err, "attnmap: error: " + printable(row_failure(current, failure_text(e))));
    return false;
  }
  check_figure_size(p, cols, hp, *rows, fs::path(p.out).extension().string().substr(1));  // usage error, before any map
  try {
    compute_row_maps(p, model, cols, rows, &current);
  } catch (const std::exception& e) {
    say(hooks, LineStream::Err, "attnmap: error: " + printable(row_failure(current, failure_text(e))));
    return false;
  }
  return true;
}

// ---- step 4: scales, labels, the record, the file ---------------------------------------------------------

/// The scales of the map columns: --scale map -> each map its own (no bar); otherwise one scale per unit
/// (views of one unit share it: run over all their maps with the top at the 99th percentile as render's --scale
/// run, figure their plain min-max, or the fixed bounds); `warnings` gets a line per scale on which most maps
/// peak in its bottom quarter; `clips` how much of each scale's maps lies above its top (clip_stats; a scale
/// with any value above gets clip_max: its bar's triangle and "+").
ComparisonScales figure_scales(const FigurePlan& p, const std::vector<ResolvedView>& views,
                               const std::vector<FigureImage>& rows, std::vector<std::string>* warnings,
                               std::vector<ClipStats>* clips) {
  ComparisonScales cs;
  std::map<std::string, int> unit_index;
  std::vector<std::vector<const std::vector<float>*>> unit_maps;
  size_t k = 0;  // map column
  for (const ResolvedView& v : views) {
    if (v.spec.kind == ViewKind::Photo) continue;
    if (p.scale.kind == ScaleKind::Map) {
      cs.column_scale.push_back(-1);
      ++k;
      continue;
    }
    const auto it = unit_index.emplace(v.units, static_cast<int>(unit_index.size())).first;
    if (static_cast<size_t>(it->second) == unit_maps.size()) unit_maps.emplace_back();
    for (const FigureImage& r : rows) unit_maps[static_cast<size_t>(it->second)].push_back(&r.maps[k].map);
    cs.column_scale.push_back(it->second);
    ++k;
  }
  std::vector<std::string> units(unit_index.size());
  for (const auto& [u, i] : unit_index) units[static_cast<size_t>(i)] = u;
  for (size_t i = 0; i < units.size(); ++i) {
    // run (the default) as render's --scale run: the top at the 99th percentile of every value, so one image's
    // peak does not leave the other rows dark (issue 28); figure: the plain min-max of the figure's maps.
    const bool robust = p.scale.kind == ScaleKind::Run;
    Scale s = robust ? robust_scale_over(unit_maps[i], units[i]) : scale_over(unit_maps[i], units[i]);
    if (p.scale.kind == ScaleKind::Fixed) s = resolve_scale(p.scale, {}, s);
    clips->push_back(clip_stats(unit_maps[i], s));
    s.clip_max = clips->back().above > 0 && !s.flat();
    const size_t dim = robust ? maps_peaking_below(unit_maps[i], s, kDimPeakFraction) : 0;
    if (2 * dim > unit_maps[i].size()) {
      char buf[320];
      std::snprintf(buf, sizeof buf, "%zu of %zu %s maps peak below %.0f%% of the figure's scale (under %.3g): they "
                    "are drawn in its darkest colours; %s map gives each map its own", dim, unit_maps[i].size(),
                    units[i].c_str(), 100 * kDimPeakFraction, s.vmin + kDimPeakFraction * (s.vmax - s.vmin),
                    setting_ref("scale").c_str());
      warnings->push_back(buf);
    }
    cs.scales.push_back(s);
  }
  return cs;
}

/// Column titles (view_label: the words every figure uses for a view; with one fixed class, the class after a
/// class-specific view's).
/// With texts: a column per text titled "Chefer relevance, text: a dog" (a fixed class likewise). `fixed`: the
/// fixed class's index (-1: not known yet, the view's words alone).
std::vector<std::string> column_titles(const FigurePlan& p, const FigureColumns& cols, const HParams& hp, int fixed_class) {
  std::vector<std::string> t;
  for (size_t j = 0; j < cols.views.size(); ++j) {
    const ResolvedView& v = cols.views[j];
    const bool fixed = p.classes.kind != ClassSpec::Kind::TopK && fixed_class >= 0;
    const std::string label = view_label(v, p.ro.block_base);
    std::string title = v.class_specific && fixed ? label + ", " + class_name(fixed_class, hp) : label;
    if (cols.zero_shot && v.class_specific && (fixed || cols.text[j] >= 0))
      title = text_column_title(label, class_name(fixed ? fixed_class : cols.text[j], hp));
    if (!hp.class_token && reads_query_rows(v)) title += " \u00b7 patch-query mean (no class token)";
    t.push_back(title);
  }
  return t;
}

/// Row labels: the file name; with --class top1 and a class-specific view, the class each row explains.
std::string row_label(const FigurePlan& p, const FigureImage& r, const HParams& hp) {
  const std::string name = fs::path(r.input).filename().string();
  if (r.class_index < 0 || p.classes.kind != ClassSpec::Kind::TopK) return name;
  return name + " \u00b7 " + class_name(r.class_index, hp);
}

/// The settings record of the figure: render's (make_provenance), with the figure's views, its scales and
/// their bounds, its size and the images' names and SHA-256; with texts also the column titles and each
/// image's probabilities (in the texts' order).
std::string figure_record(const FigurePlan& p, const ViTWeights& model, const std::string& weights_path,
                          const FigureColumns& fc, const std::vector<std::string>& titles, const ComparisonScales& cs,
                          const std::vector<ClipStats>& clips, const std::vector<FigureImage>& rows) {
  const std::vector<ResolvedView>& views = fc.views;
  RenderContext ctx;
  ctx.model = &model;
  ctx.opt = &p.ro;
  nlohmann::ordered_json r = make_provenance(ctx, weights_path);
  r["command"] = "figure";
  std::string names;
  bool rollout = false;
  for (const ResolvedView& v : fc.computed) {  // the views as given (a column per text counted once)
    names += (names.empty() ? "" : ",") + v.name;
    rollout = rollout || v.spec.kind == ViewKind::Rollout;
  }
  r["view"] = names;
  r["discard"] = rollout ? nlohmann::ordered_json(p.settings.discard) : nlohmann::ordered_json(nullptr);
  nlohmann::ordered_json bounds = nlohmann::ordered_json::array();
  for (size_t i = 0; i < cs.scales.size(); ++i) {
    nlohmann::ordered_json cols = nlohmann::ordered_json::array();
    size_t k = 0;  // map column
    for (size_t c = 0; c < views.size(); ++c) {
      if (views[c].spec.kind == ViewKind::Photo) continue;
      if (cs.column_scale[k++] != static_cast<int>(i)) continue;
      const int t = fc.text[c];  // the record: names ("chefer \u00b7 a dog" for a text's column)
      cols.push_back(t < 0 ? views[c].name : views[c].name + " \u00b7 " + class_name(t, model.hp));
    }
    // What the bar hides: the largest value drawn on it, and whether (and for what share of the maps' cells)
    // values lie above its top, drawn in the top colour.
    bounds.push_back({{"units", cs.scales[i].units}, {"vmin", cs.scales[i].vmin}, {"vmax", cs.scales[i].vmax},
                      {"columns", cols}, {"data_max", clips[i].data_max}, {"clipped", clips[i].above > 0},
                      {"clipped_share", clips[i].share()}});
  }
  r["scale_bounds"] = bounds;
  r["width_in"] = p.width_in;
  if (p.row_labels) r["row_labels"] = *p.row_labels;
  if (p.column_labels) r["column_labels"] = *p.column_labels;
  if (fc.zero_shot) r["column_titles"] = titles;
  nlohmann::ordered_json images = nlohmann::ordered_json::array();
  for (const FigureImage& im : rows) {
    images.push_back({{"name", fs::path(im.input).filename().string()}, {"sha256", im.sha256}});
    if (fc.zero_shot) images.back()["probabilities"] = im.probs;
  }
  r["images"] = images;
  return provenance_text(r);
}

/// A line per colour bar that hides more than kClipNoteShare of its maps' cells above its top (the bar's
/// triangle and "+" say so on the page; this says how much on the terminal).
std::vector<std::string> clip_notes(const FigurePlan& p, const ComparisonScales& cs, const std::vector<ClipStats>& clips) {
  std::vector<std::string> out;
  for (size_t i = 0; i < cs.scales.size(); ++i) {
    if (clips[i].share() <= kClipNoteShare) continue;
    char buf[400];
    std::snprintf(buf, sizeof buf, "the %s bar ends at %.3g but the maps reach %.3g: %.1f%% of their cells lie above "
                  "it, drawn in its top colour (the bar's triangle and '+'); %s", cs.scales[i].units.c_str(),
                  cs.scales[i].vmax, clips[i].data_max, 100.0 * clips[i].share(),
                  (p.scale.kind == ScaleKind::Fixed ? "a larger VMAX in " + setting_ref("scale") + " shows them"
                                                    : setting_ref("scale") + " figure puts the top at the largest value")
                      .c_str());
    out.push_back(buf);
  }
  return out;
}

/// Refuses (usage error, status 2) a figure whose labels would have to be cut at --width-in: names the label
/// and the width at which every label fits whole (comparison_fit, `as_drawn` as it says), and suggests fewer
/// `fewer` ("views", or "views or texts" for a column per text).
void check_labels_fit(const std::vector<std::string>& titles, const std::vector<FigureRow>& rows,
                      const ComparisonScales& cs, const ComparisonOptions& co, const std::string& fewer,
                      bool as_drawn) {
  const ComparisonFit fit = comparison_fit(titles, rows, cs, co, as_drawn);
  if (fit.fits) return;
  std::string msg = "the " + fit.what + " '" + fit.label + "' does not fit its place at " + setting_ref("width_in") +
                    " " +
                    shown_number(co.width_in) + ", even wrapped and at " + shown_number(kMinLabelPt) +
                    " pt (words are never cut): ";
  if (fit.needed_in > 0)
    msg += "the figure needs " + setting_ref("width_in") + " " + shown_number(fit.needed_in) + " or more";
  else msg += "no width up to 100 in holds it";
  throw Error(msg + " (or fewer " + fewer + ", or shorter " + setting_ref("row_labels") + " / " + setting_ref("column_labels") + ")");
}

/// The folders make_output_folder made for -o: removed again (when empty) unless the figure was written.
struct MadeFolders {
  std::vector<std::string> made;
  bool keep = false;
  ~MadeFolders() {
    if (!keep) remove_made_folders(made);
  }
};

/// --row-labels counted against the rows (usage error).
void check_row_label_count(const FigurePlan& p, size_t rows) {
  if (p.row_labels && p.row_labels->size() != rows)
    // "1 labels" kept: WordsCli.FigureTitleRowAndColumnLabels asserts it (counted() would say "1 label")
    throw Error(setting_ref("row_labels") + " has " + std::to_string(p.row_labels->size()) + " labels for " +
                counted(rows, "image") + " (one per row, in the order of the rows)");
}

/// The figure's views resolved for `model` and its columns (figure_columns: with texts a column per text); bf16
/// refused with a class-specific view, and a column per text too narrow for --width-in (usage errors).
FigureColumns figure_views(const FigurePlan& p, const ViTWeights& model) {
  std::vector<ResolvedView> views = resolve_figure_views(p, model);
  if (p.ro.precision == Precision::BF16 &&
      std::any_of(views.begin(), views.end(), [](const ResolvedView& v) { return v.class_specific; }))
    throw Error(setting_ref("precision") + " bf16: the class-specific views and explanations run in float32 only, not with "
                "bfloat16 products");
  FigureColumns cols = figure_columns(p, model, views);
  if (cols.per_text)  // the columns the texts add, checked as check_figure_args checks the views' count
    with_prefix(setting_ref("width_in") + " / " + setting_ref("dpi") + ":", [&] {
      check_comparison_width(static_cast<int>(cols.views.size()), p.width_in, p.ro.dpi.value_or(300.0));
    });
  return cols;
}

/// Steps 4 on in memory: the scales, labels and record of the computed rows, and the figure drawn as the file
/// `path` would hold it (its extension picks the format), into *out (its lines as they come: a caller prints
/// them also when a label that does not fit throws a usage error); a drawing that fails is FigureResult::error.
void draw_figure_rows(const FigurePlan& p, const ViTWeights& model, const std::string& weights_path,
                      const FigureColumns& cols, const std::vector<FigureImage>& images,
                      const std::string& path, FigureResult* out) {
  const std::vector<ResolvedView>& views = cols.views;
  FigureResult& res = *out;
  const HParams& hp = model.hp;
  std::vector<std::string> scale_warnings;
  std::vector<ClipStats> clips;
  const ComparisonScales cs = figure_scales(p, views, images, &scale_warnings, &clips);
  for (const std::string& w : scale_warnings) {
    res.lines.push_back("attnmap: warning: " + spelled_settings(w));
    res.notes.push_back("warning: " + w);
  }
  for (const std::string& n : clip_notes(p, cs, clips)) {
    if (!p.ro.quiet) res.lines.push_back("attnmap: note: " + printable(spelled_settings(n)));
    res.notes.push_back(n);
  }
  const std::vector<std::string> titles = column_titles(p, cols, hp, images[0].class_index);
  std::vector<FigureRow> rows;
  ComparisonOptions co;
  for (size_t i = 0; i < images.size(); ++i) {
    const FigureImage& im = images[i];
    FigureRow r{p.row_labels ? (*p.row_labels)[i] : row_label(p, im, hp), &im.photo, im.box, {}};
    std::vector<std::string> captions;  // with texts: each text cell's zero-shot probability
    for (const ViewMap& m : im.maps) {
      r.maps.push_back(GridMap{m.map, hp.grid_w, hp.grid_h, m.marked});
      const bool p_known = m.class_index >= 0 && static_cast<size_t>(m.class_index) < im.probs.size();
      captions.push_back(p_known ? probability_caption(im.probs[static_cast<size_t>(m.class_index)], cols.rule) : "");
    }
    if (cols.zero_shot && cols.class_specific) co.captions.push_back(std::move(captions));
    rows.push_back(std::move(r));
  }
  co.width_in = p.width_in;
  co.dpi = p.ro.dpi.value_or(300.0);
  co.provenance = figure_record(p, model, weights_path, cols, titles, cs, clips, images);
  if (p.ro.title) co.title = *p.ro.title;
  if (p.column_labels) co.column_labels = *p.column_labels;
  // The note of --scale map: drawn only when asked (--notes); otherwise said on the terminal (a figure carries
  // no words its author did not choose).
  if (p.scale.kind == ScaleKind::Map) {
    const std::string words = "Each map on its own min\u2013max (" + setting_ref("scale") +
                              " map): colours do not compare across cells, so there is no colour bar.";
    const std::string note = spelled_settings(words);
    if (p.ro.notes) co.note = note;  // drawn: the flag's words, whichever front end asked
    const std::string undrawn = words.substr(0, words.size() - 1) + " (not drawn in the figure; " + setting_ref("notes") +
                                " draws it)";
    if (!p.ro.notes && !p.ro.quiet) res.lines.push_back("attnmap: note: " + spelled_settings(undrawn));
    if (!p.ro.notes) res.notes.push_back(undrawn);
  }
  // The percentages under the maps say on the page what they are (as a bar's units say what its colours are).
  if (!co.captions.empty()) co.note += (co.note.empty() ? "" : " ") + zero_shot_key(model.num_classes(), cols.rule);
  check_labels_fit(titles, rows, cs, co, cols.per_text ? "views or texts" : "views", cols.per_text);
  check_figure_pixels(titles, rows, cs, co, fs::path(path).extension().string().substr(1));
  std::vector<FigureFile> drawn;
  co.in_memory = &drawn;
  try {
    write_comparison(path, titles, rows, cs, p.style, co);
  } catch (const std::exception& e) {
    res.error = spelled_settings(failure_text(e));
    return;
  }
  res.bytes = std::move(drawn.at(0).bytes);
  res.format = std::string(figure_extension(drawn.at(0).format)).substr(1);
  res.record = co.provenance;
  res.images = rows.size();
  res.views = titles.size();
}

}  // namespace

std::vector<std::string> figure_input_files(const std::vector<std::string>& inputs, std::vector<std::string>* failed,
                                            const BatchHooks& hooks) {
  FigureInputs in;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (!fs::is_directory(input, ec)) {  // a file is a row as given (named twice: two rows), a missing one fails
      if (fs::exists(fs::symlink_status(input, ec))) in.files.push_back(input);
      else in.failed.push_back(input + ": no such file or folder");
      continue;
    }
    std::vector<std::string> missing;
    std::vector<std::pair<std::string, std::string>> unreadable;
    std::map<std::string, size_t> passed_over;  // attnmap's own outputs in a walked folder: not photos
    for (const Job& j : plan_jobs({input}, "", &missing, {}, &unreadable, &passed_over)) in.files.push_back(j.input);
    if (const std::string note = passed_over_summary(passed_over); !note.empty())
      say(hooks, LineStream::Err, "attnmap: note: " + printable(input + ": " + note));
    for (const auto& u : unreadable) in.failed.push_back(u.second);
  }
  if (in.files.empty() && in.failed.empty()) throw Error(no_images_message(inputs) + ": a figure needs at least one");
  std::vector<std::string> missing;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(input, ec))) missing.push_back(input);
  }
  if (const std::string none = all_inputs_missing(inputs, missing, "draw"); !none.empty()) throw Error(none);
  *failed = std::move(in.failed);
  return in.files;
}

int figure_to_file(const FigurePlan& p, const BatchHooks& hooks) {
  const FigureInputs in = plan_inputs(p);
  check_row_label_count(p, in.files.size() + in.failed.size());
  const RunWeights weights = run_weights(p.ro.weights, p.ro.quiet, hooks);  // a path, or a Hub name fetched into the cache
  const std::string& weights_path = weights.path;
  const std::string target = check_out_file(p.out, weights_path, in, p.ro.labels_file);
  const std::shared_ptr<const ViTWeights> loaded = load_run_model(p.ro, weights, false, hooks);
  const ViTWeights& model = *loaded;
  const FigureColumns views = figure_views(p, model);
  MadeFolders made{make_output_folder("-o", p.out, target)};  // -o's folder, probed; removed unless written
  // Once every usage check has passed (a refusal stays one line), as render.
  say(hooks, LineStream::Err, default_model_note(p.ro, false));
  say(hooks, LineStream::Err, precision_speed_note(p.ro));
  const int blas = blas_threads_to_set(1, usable_cores(), std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS"));
  set_blas_threads(blas);  // one image at a time, every core on its matrix products

  std::vector<FigureImage> images;
  if (!compute_rows(p, model, views, in, &images, hooks)) return 1;
  FigureResult fig;
  const auto say_lines = [&fig, &hooks] {
    for (const std::string& line : fig.lines) say(hooks, LineStream::Err, line);
  };
  try {
    draw_figure_rows(p, model, weights_path, views, images, target, &fig);
  } catch (...) {
    say_lines();
    throw;
  }
  say_lines();
  try {
    if (!fig.error.empty()) throw Error(fig.error);
    write_file_atomic(target, fig.bytes);  // the bytes figure_in_memory returns, written
    made.keep = true;
  } catch (const std::exception& e) {
    say(hooks, LineStream::Err, "attnmap: error: " + printable(failure_text(e)));
    return 1;
  }
  if (!p.ro.quiet)
    say(hooks, LineStream::Err, "attnmap: wrote " + printable(p.out) + " (" + std::to_string(fig.images) +
                                    (fig.images == 1 ? " image" : " images") + " \u00d7 " + std::to_string(fig.views) +
                                    (fig.views == 1 ? " view" : " views") + ")");
  return 0;
}

FigureResult figure_in_memory(const FigurePlan& p, const std::string& format, std::vector<FigurePhoto> photos,
                              const ModelSource& model_for, const std::string& weights_path) {
  const std::string path = "figure." + format;
  if (format != "png" && format != "pdf" && format != "svg")
    throw Error("a figure is drawn as png, pdf or svg, found '" + format + "'");
  if (photos.empty()) throw Error("a figure needs at least one image");
  check_row_label_count(p, photos.size());
  const std::shared_ptr<const ViTWeights> loaded = model_for(p.ro, false);
  const ViTWeights& model = *loaded;
  const FigureColumns views = figure_views(p, model);
  std::vector<FigureImage> images;
  std::vector<std::string> lines, notes;
  for (FigurePhoto& ph : photos) {
    if (const std::string w = small_photo_line(p, ph.name, ph.photo, model.hp); !w.empty()) lines.push_back(w);
    if (const std::string w = small_image_warning(ph.photo.width, ph.photo.height, model.hp); !w.empty())
      notes.push_back(kWarningNote + ph.name + ": " + w.substr(std::string(kWarningNote).size()));
    images.push_back(FigureImage{ph.name, std::move(ph.photo), {}, {}, -1, std::move(ph.sha256), {}});
  }
  check_figure_size(p, views, model.hp, images, format);  // a usage error, before any map
  std::string current;
  try {
    compute_row_maps(p, model, views, &images, &current);
  } catch (const std::exception& e) {
    throw InputFailure(row_failure(current, spelled_settings(failure_text(e))));
  }
  FigureResult fig;
  fig.lines = std::move(lines);
  fig.notes = std::move(notes);
  draw_figure_rows(p, model, weights_path, views, images, path, &fig);
  if (!fig.error.empty()) throw InputFailure(fig.error);
  return fig;
}

}  // namespace attnmap
