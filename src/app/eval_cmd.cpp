#include "app/eval_cmd.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include <unistd.h>

#include "app/batch.hpp"
#include "model/classify.hpp"
#include "core/error.hpp"
#include "maps/evaluate.hpp"
#include "model/pos_embed.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

const char kLabelsCsv[] = "labels.csv";

/// Where an input's class truth is looked up, in order: labels.csv in the masks folder, then in the image's
/// own folder.
std::array<fs::path, 2> truth_folders(const std::string& masks_dir, const std::string& input) {
  const fs::path parent = fs::path(input).parent_path();
  return {fs::path(masks_dir), parent.empty() ? fs::path(".") : parent};
}

// A head index made non-negative (checked against H), so "L3/h-1" and "L3/h3" are the same view.
HeadSelect resolve_head(HeadSelect h, int H) {
  const std::vector<float> probe(static_cast<size_t>(H), 0.0f);
  fuse_heads(probe.data(), H, 1, h);  // throws for an index out of range
  if (h.fusion == HeadSelect::Fusion::Index && h.index < 0) h.index += H;
  return h;
}

bool is_image_file(const fs::path& p) {
  std::string e = p.extension().string();
  if (e.empty()) return false;
  std::transform(e.begin(), e.end(), e.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto& exts = default_image_extensions();  // lower case, no dot
  return std::find(exts.begin(), exts.end(), e.substr(1)) != exts.end();
}

// Masks by relative path without extension ("sub/0003_coat") and by bare stem ("0003_coat"). Two masks for
// one key (0003_coat.png and 0003_coat.bmp) are not guessed between: the image fails, naming both.
struct MaskIndex {
  std::map<std::string, std::vector<std::string>> by_rel, by_stem;

  explicit MaskIndex(const std::string& dir) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec) && is_image_file(it->path())) files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const fs::path rel = f.lexically_relative(dir);
      by_rel[(rel.parent_path() / rel.stem()).generic_string()].push_back(f.string());
      by_stem[f.stem().string()].push_back(f.string());
    }
  }

  // rel_stem: the image's path below its input folder without extension. Throws attnmap::Error when
  // several masks match.
  std::optional<std::string> find(const std::string& rel_stem, const std::string& stem) const {
    const std::vector<std::string>* hit = nullptr;
    if (!rel_stem.empty()) {
      auto it = by_rel.find(rel_stem);
      if (it != by_rel.end()) hit = &it->second;
    }
    if (!hit) {
      auto it = by_stem.find(stem);
      if (it != by_stem.end()) hit = &it->second;
    }
    if (!hit) return std::nullopt;
    if (hit->size() > 1) {
      std::string list;
      for (size_t i = 0; i < hit->size() && i < 4; ++i) list += (i ? ", " : "") + (*hit)[i];
      if (hit->size() > 4) list += ", ...";
      throw Error("several masks share the stem '" + stem + "' (" + list + "); keep one");
    }
    return hit->front();
  }
};

std::string with_path(const std::string& input, const std::string& msg) {
  return msg.compare(0, input.size(), input) == 0 ? msg : input + ": " + msg;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

EvalContext make_eval_context(const ViTWeights& model, const EvalOptions& opt) {
  const HParams& hp = model.hp;
  const int H = hp.num_heads;
  EvalContext ctx;
  ctx.model = &model;
  ctx.opt = &opt;
  if (opt.tolerance_px < 0) throw Error("--tolerance must be >= 0 pixels");
  std::vector<HeadSelect> fusions;
  for (const std::string& f : opt.fusions) {
    try {
      fusions.push_back(resolve_head(parse_head(f), H));
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.rfind("--head", 0) == 0)
        msg = "--fusions: each" + msg.substr(6);
      else
        msg = "--fusions " + f + ": " + msg;
      throw Error(msg);
    }
  }
  for (int l = 0; l < hp.depth; ++l)
    for (const HeadSelect& h : fusions) {
      const std::string name = "L" + std::to_string(l) + "/" + fusion_name(h, "h");
      bool dup = false;
      for (const auto& v : ctx.views) dup |= v.name == name;
      if (!dup) ctx.views.push_back({name, l, h, false});
    }
  const EvalView standard_rollout{"rollout", hp.depth - 1, HeadSelect{}, true, 0.0};
  const SelectedView view = select_view(hp, opt.view);
  const int sel_layer = view.layer;
  const HeadSelect sel_head = resolve_head(view.head, H);
  EvalView sel{"L" + std::to_string(sel_layer) + "/" + fusion_name(sel_head, "h"), sel_layer, sel_head, false,
               0.0};
  if (opt.view.rollout) {  // --rollout [--discard F]: rollout through layers 0..sel_layer
    if (!(opt.view.discard >= 0.0 && opt.view.discard <= 1.0)) throw Error("--discard must be in [0, 1]");
    sel.rollout = true;
    sel.discard = opt.view.discard;
    sel.name = sel_layer == hp.depth - 1 && sel_head.fusion == HeadSelect::Fusion::Mean && sel.discard == 0.0
                   ? standard_rollout.name
                   : "rollout L0-" + std::to_string(sel_layer) + "/" + fusion_name(sel_head, "h") +
                         (sel.discard > 0.0 ? fmt(" discard %g", sel.discard) : "");
  }
  ctx.selected = ctx.views.size();
  for (size_t i = 0; i < ctx.views.size(); ++i)
    if (ctx.views[i].name == sel.name) ctx.selected = i;
  if (ctx.selected == ctx.views.size() && sel.name != standard_rollout.name) ctx.views.push_back(sel);
  ctx.views.push_back(standard_rollout);
  if (sel.name == standard_rollout.name) ctx.selected = ctx.views.size() - 1;
  return ctx;
}

ImageEval evaluate_image(const EvalContext& ctx, const std::string& input, const std::string& mask_path,
                         std::optional<int> truth) {
  const ViTWeights& model = *ctx.model;
  const HParams& hp = model.hp;
  const EvalOptions& opt = *ctx.opt;
  ImageEval ev;
  ev.input = input;
  ev.mask = mask_path;
  ev.truth = truth;
  const Image photo = load_image(input, opt.view.load);
  ev.notes = photo.notes;  // the decoder's (a multi-page TIFF's page count)
  LoadOptions mask_load = opt.view.load;
  mask_load.keep_nonzero = true;  // a 16-bit mask's object may be marked 1 (or any small value)
  const Mask mask = mask_from_image(load_image(mask_path, mask_load), mask_path);
  if (mask.width != photo.width || mask.height != photo.height)
    throw Error("mask " + mask_path + " is " + std::to_string(mask.width) + "x" +
                std::to_string(mask.height) + ", the image is " + std::to_string(photo.width) + "x" +
                std::to_string(photo.height) + " (a mask must have the image's size)");
  ev.area_share = mask_area_share(mask);
  if (ev.area_share <= 0)
    throw Error("mask " + mask_path + " is empty (no non-zero pixel in its colour channels; alpha is ignored)");
  if (ev.area_share >= 1)
    ev.notes.push_back("mask " + mask_path + " covers the whole image: every map hits and scores 1.00x the baseline");
  if (mask.grey_levels)
    ev.notes.push_back(
        "mask " + mask_path +
        " has more than one non-zero value (JPEG noise, or labels such as instance ids); every non-zero pixel "
        "counts as object");

  const ModelInput in =
      preprocess(photo, hp.image_w, hp.image_h, opt.view.resize, hp.mean.data(), hp.std.data());
  ForwardOptions fo;
  fo.last_layer = hp.depth - 1;
  fo.keep_full = true;  // rollout needs every layer's full matrices
  fo.to_end = model.head.present();
  const ForwardResult r = vit_forward(model, in.chw.data(), fo);
  if (!r.logits.empty()) {
    ev.top5 = top_k_classes(r.logits, hp.labels, 5);
    ev.predicted = static_cast<int>(std::max_element(r.logits.begin(), r.logits.end()) - r.logits.begin());
  }
  for (size_t i = 0; i < ctx.views.size(); ++i) {
    const EvalView& v = ctx.views[i];
    std::vector<float> grid;  // (grid_h, grid_w)
    if (v.rollout) {
      grid = class_row_map(attention_rollout(r, v.layer, v.head, v.discard), hp, r.tokens);  // R: (T, T)
    } else {
      grid = class_attention_map(r, hp, v.layer, v.head);
    }
    if (i == ctx.selected) {
      bool flat = false;
      normalize_minmax(grid, &flat);
      if (flat) ev.notes.push_back("the selected view's map is constant; its pointing-game hit is arbitrary");
    }
    const std::vector<float> on_photo = map_to_photo(grid, hp.grid_w, hp.grid_h, in.box, photo.width,
                                                     photo.height, opt.view.upsample);  // (H, W)
    ev.views.push_back({pointing_game(on_photo, mask, opt.tolerance_px), energy_in_mask(on_photo, mask)});
  }
  return ev;
}

namespace {

// --masks must name a folder, and not one of the input folders: masks beside the images in the same folder
// would score every image against itself.
void check_masks_folder(const EvalOptions& opt) {
  const RenderOptions& ro = opt.view;
  if (opt.masks_dir.empty()) throw Error("--masks is required");
  std::error_code ec;
  if (!fs::is_directory(opt.masks_dir, ec))
    throw Error("--masks " + opt.masks_dir +
                (fs::exists(opt.masks_dir, ec) ? ": not a folder (name the folder that holds the masks)" : ": no such folder"));
  const std::string masks_canon = canonical_or_empty(opt.masks_dir);
  for (const std::string& in : ro.inputs) {
    if (!masks_canon.empty() && fs::is_directory(in, ec) && canonical_or_empty(in) == masks_canon)
      throw Error("--masks " + opt.masks_dir + " is also an input folder (" + in +
                  "); keep the masks in a folder of their own, e.g. DIR/masks");
  }
}

// One image at a time: every core for its products (the user's OPENBLAS_NUM_THREADS wins), as render -j 1.
void set_eval_blas_threads() {
  const int blas = blas_threads_to_set(1, usable_cores(), std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS"));
  if (blas > 0) set_blas_threads(blas);
}

// Where --json writes.
struct JsonTarget {
  std::string path;               // resolved: what is checked is what is written
  std::vector<std::string> made;  // folders made for it, deepest first: removed when no JSON is written
};

// --json must not replace a file this run reads (an input, a mask, a labels.csv, the weights or their side
// configs); checked, and a missing folder made, before any image is evaluated. Empty without --json.
JsonTarget prepare_json(const EvalOptions& opt, const std::string& weights_path, const std::vector<Job>& jobs,
                        const MaskIndex& masks) {
  JsonTarget json;
  if (opt.json_out.empty()) return json;
  std::vector<ReadFile> reads = model_reads(weights_path);
  for (const std::string& in : opt.view.inputs) reads.push_back({in, "an input"});
  std::set<fs::path> truth_dirs{fs::path(opt.masks_dir)};  // where a labels.csv would be read (the class truth)
  for (const Job& j : jobs) {
    reads.push_back({j.input, "an input"});
    truth_dirs.insert(truth_folders(opt.masks_dir, j.input)[1]);
  }
  for (const auto& kv : masks.by_rel)
    for (const std::string& f : kv.second) reads.push_back({f, "a mask"});
  for (const fs::path& d : truth_dirs) reads.push_back({(d / kLabelsCsv).string(), "a labels.csv that eval reads"});
  json.path = check_output_file("--json", opt.json_out, reads);
  json.made = make_output_folder("--json", opt.json_out, json.path);
  return json;
}

// Ground truth: labels.csv in the masks folder, else in the image's own folder; else the file name. A
// labels.csv is read when an image first needs it, and once.
class TruthLookup {
 public:
  TruthLookup(const std::string& masks_dir, const HParams& hp, bool classify, int num_classes)
      : masks_dir_(masks_dir), hp_(hp), classify_(classify), num_classes_(num_classes) {}

  std::optional<int> truth_for(const std::string& input) {
    if (!classify_) return std::nullopt;
    const fs::path p(input);
    for (const fs::path& folder : truth_folders(masks_dir_, input)) {
      if (const auto* m = csv_for(folder)) {
        for (const std::string& k : {p.filename().string(), p.stem().string()}) {
          auto it = m->find(k);
          if (it != m->end()) return it->second;
        }
      }
    }
    return label_from_filename(input, hp_.labels);
  }

 private:
  // The folder's labels.csv, read on first use (its notes printed then); nullptr when it has none.
  const std::map<std::string, int>* csv_for(const fs::path& folder) {
    const std::string key = folder.string();
    auto it = csv_cache_.find(key);
    if (it == csv_cache_.end()) {
      std::optional<std::map<std::string, int>> m;
      const fs::path p = folder / kLabelsCsv;
      std::error_code e;
      if (fs::is_regular_file(p, e)) {
        std::vector<std::string> notes;
        m = read_labels_csv(p.string(), hp_.labels, num_classes_, &notes);
        // Printed under -q too, like the per-image mask notes: they bear on the figures.
        for (size_t i = 0; i < notes.size() && i < 5; ++i) std::cerr << "attnmap: note: " << printable(notes[i]) << "\n";
        if (notes.size() > 5)
          std::cerr << "attnmap: note: " << printable(p.string()) << ": " << notes.size() - 5 << " more such rows\n";
      }
      it = csv_cache_.emplace(key, std::move(m)).first;
    }
    return it->second ? &*it->second : nullptr;
  }

  const std::string& masks_dir_;
  const HParams& hp_;
  const bool classify_;
  const int num_classes_;
  std::map<std::string, std::optional<std::map<std::string, int>>> csv_cache_;
};

// What a run produced: the images evaluated, and the failures (counted, and as JSON error entries).
struct EvalRun {
  std::vector<ImageEval> done;
  int failed = 0;
  nlohmann::ordered_json errors = nlohmann::ordered_json::array();
  double secs = 0;  // evaluating the images
};

// Inputs plan_jobs could not use: an error line and a JSON error entry each, counted as failed.
void report_unusable_inputs(const std::vector<std::string>& missing,
                            const std::vector<std::pair<std::string, std::string>>& unreadable, EvalRun& run) {
  for (const auto& m : missing) {
    std::cerr << "attnmap: error: " << printable(m) << ": no such file or folder\n";
    run.errors.push_back({{"file", m}, {"error", "no such file or folder"}});
    ++run.failed;
  }
  for (const auto& u : unreadable) {
    std::cerr << "attnmap: error: " << printable(u.second) << "\n";
    run.errors.push_back({{"file", u.first}, {"error", u.second}});
    ++run.failed;
  }
}

// The job's mask. Throws attnmap::Error for an image inside the masks folder (masks_prefix: the canonical
// masks folder with a trailing '/', empty when unknown) or without a mask of its own.
std::string mask_for_job(const Job& job, const std::string& masks_dir, const std::string& masks_prefix,
                         const MaskIndex& masks) {
  if (!masks_prefix.empty() && canonical_or_empty(job.input).rfind(masks_prefix, 0) == 0)
    throw Error("is inside the masks folder " + masks_dir + " (a mask would be scored as an image)");
  const fs::path rel = fs::path(job.out_base).lexically_relative(masks_dir);
  const auto mask_path = masks.find(rel.generic_string(), fs::path(job.input).stem().string());
  if (!mask_path)
    throw Error("no mask named '" + fs::path(job.input).stem().string() + ".*' in " + masks_dir);
  return *mask_path;
}

// The per-image line: the selected view's hit and energy, and with a classifier the top-5 and the truth.
std::string image_line(const EvalContext& ctx, const ImageEval& ev, int num_classes) {
  const HParams& hp = ctx.model->hp;
  const ViewScore& s = ev.views[ctx.selected];
  std::string line = ev.input + ": " + ctx.views[ctx.selected].name + (s.hit ? " hit" : " miss") +
                     fmt(", energy %.3f", s.energy) + fmt(" (mask area %.3f,", ev.area_share) +
                     fmt(" %.2fx)", s.energy / ev.area_share);
  if (!ev.top5.empty()) {
    line += "; top-5: " + format_top_k(ev.top5);
    if (ev.truth) {
      const std::string t = hp.labels.size() == static_cast<size_t>(num_classes)
                                ? hp.labels[static_cast<size_t>(*ev.truth)]
                                : "class " + std::to_string(*ev.truth);
      line += std::string(" [truth ") + t + (ev.predicted == ev.truth ? ", correct]" : ", wrong]");
    }
  }
  return line;
}

// Evaluates every job in order into run.done; an image that fails is reported and counted in run.
void evaluate_jobs(const EvalContext& ctx, const std::vector<Job>& jobs, const MaskIndex& masks, TruthLookup& truth,
                   int num_classes, EvalRun& run) {
  const EvalOptions& opt = *ctx.opt;
  const std::string masks_canon = canonical_or_empty(opt.masks_dir);
  const std::string masks_prefix = masks_canon.empty() ? std::string() : (fs::path(masks_canon) / "").string();
  const auto t0 = std::chrono::steady_clock::now();
  for (const Job& job : jobs) {
    try {
      const std::string mask_path = mask_for_job(job, opt.masks_dir, masks_prefix, masks);
      ImageEval ev = evaluate_image(ctx, job.input, mask_path, truth.truth_for(job.input));
      for (const auto& n : ev.notes) std::cerr << "attnmap: note: " << printable(job.input + ": " + n) << "\n";
      if (!opt.view.quiet) std::cout << printable(image_line(ctx, ev, num_classes)) << "\n";
      run.done.push_back(std::move(ev));
    } catch (const std::exception& e) {
      ++run.failed;
      std::cerr << "attnmap: error: " << printable(with_path(job.input, e.what())) << "\n";
      run.errors.push_back({{"file", job.input}, {"error", e.what()}});
    }
  }
  run.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One view's summary: pointing = hits / n; energy = mean per-image energy; ratio = energy / mean mask area
// share (ratio of means); ratio_img = mean of energy_i / area_i.
struct Row {
  double pointing = 0, energy = 0, ratio = 0, ratio_img = 0;
};

struct Summary {
  size_t n = 0;      // images evaluated
  double area = 0;   // mean mask area share: the uniform baseline
  int labelled = 0, correct = 0;
  std::vector<Row> rows;  // per view, in the order of ctx.views; zeros when n == 0
};

Summary summarise(const EvalContext& ctx, const std::vector<ImageEval>& done) {
  Summary s;
  s.n = done.size();
  const size_t n = s.n;
  for (const auto& ev : done) {
    s.area += ev.area_share;
    if (ev.truth && ev.predicted) {
      ++s.labelled;
      s.correct += *ev.truth == *ev.predicted;
    }
  }
  if (n) s.area /= static_cast<double>(n);
  s.rows.resize(ctx.views.size());
  for (size_t v = 0; v < ctx.views.size() && n; ++v) {
    Row& r = s.rows[v];
    for (const auto& ev : done) {
      r.pointing += ev.views[v].hit ? 1.0 : 0.0;
      r.energy += ev.views[v].energy;
      r.ratio_img += ev.views[v].energy / ev.area_share;
    }
    r.pointing /= static_cast<double>(n);
    r.energy /= static_cast<double>(n);
    r.ratio_img /= static_cast<double>(n);
    r.ratio = r.energy / s.area;
  }
  return s;
}

// The table of views (pointing, energy, ratio; the selected one starred) and the line naming the best.
void print_view_table(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  const std::vector<Row>& rows = s.rows;
  size_t width = 13;  // name column: the longest view name plus " *"
  for (const auto& v : ctx.views) width = std::max(width, v.name.size() + 2);
  out << std::string("view") + std::string(width - 4, ' ') + "  pointing   energy    ratio\n";
  size_t best_p = 0, best_e = 0;
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const Row& r = rows[v];
    std::string name = ctx.views[v].name + (v == ctx.selected ? " *" : "");
    name.resize(width, ' ');
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s %9.3f %8.3f %7.2fx\n", name.c_str(), r.pointing, r.energy, r.ratio);
    out << buf;
    if (r.pointing > rows[best_p].pointing ||
        (r.pointing == rows[best_p].pointing && r.energy > rows[best_p].energy))
      best_p = v;
    if (r.energy > rows[best_e].energy) best_e = v;
  }
  out << "* selected view (--layer/--head/--rollout or the model's default); pointing tolerance "
      << ctx.opt->tolerance_px << " px; best pointing game: " << ctx.views[best_p].name
      << ", best energy: " << ctx.views[best_e].name << "\n";
}

// The summary on standard output (nothing when no image was evaluated).
void print_summary(std::ostream& out, const EvalContext& ctx, const Summary& s, int failed, bool classify) {
  const size_t n = s.n;
  if (n && !ctx.opt->view.quiet) out << "\n";
  if (!n) return;
  out << "attnmap eval: " << n << " images"
      << (failed ? ", " + std::to_string(failed) + " failed" : std::string())
      << fmt("; uniform baseline (mean mask area share) %.4f", s.area) << "\n";
  if (classify) {
    if (s.labelled)
      out << "top-1 accuracy " << fmt("%.4f", static_cast<double>(s.correct) / s.labelled) << " (" << s.correct
          << " correct of " << s.labelled << " images with a known class)\n";
    else
      out << "top-1 accuracy: no image has a known class (labels.csv or a class name in the file name)\n";
  }
  print_view_table(out, ctx, s);
}

// One image's JSON entry.
nlohmann::ordered_json image_json(const EvalContext& ctx, const ImageEval& ev) {
  nlohmann::ordered_json e;
  e["file"] = ev.input;
  e["mask"] = ev.mask;
  e["mask_area_share"] = ev.area_share;
  e["truth"] = ev.truth ? nlohmann::ordered_json(*ev.truth) : nlohmann::ordered_json();
  e["predicted"] = ev.predicted ? nlohmann::ordered_json(*ev.predicted) : nlohmann::ordered_json();
  nlohmann::ordered_json t = nlohmann::ordered_json::array();
  for (const auto& [name, p] : ev.top5) t.push_back({{"label", name}, {"probability", p}});
  e["top5"] = t;
  nlohmann::ordered_json vs = nlohmann::ordered_json::object();
  for (size_t v = 0; v < ctx.views.size(); ++v)
    vs[ctx.views[v].name] = {{"hit", ev.views[v].hit}, {"energy", ev.views[v].energy}};
  e["views"] = vs;
  return e;
}

// The --json document: the run's settings, the summary, every image, every error.
nlohmann::ordered_json eval_json(const EvalContext& ctx, const std::string& weights_path, const Summary& sum,
                                 const EvalRun& run, bool classify) {
  const EvalOptions& opt = *ctx.opt;
  const RenderOptions& ro = opt.view;
  nlohmann::ordered_json views = nlohmann::ordered_json::object();
  for (size_t v = 0; v < ctx.views.size() && sum.n; ++v) {
    const Row& r = sum.rows[v];
    views[ctx.views[v].name] = {{"pointing_game", r.pointing},
                                {"energy_in_mask", r.energy},
                                {"energy_ratio", r.ratio},
                                {"energy_ratio_per_image", r.ratio_img}};
  }
  nlohmann::ordered_json j;
  j["weights"] = weights_path;
  j["masks"] = opt.masks_dir;
  j["tolerance_px"] = opt.tolerance_px;
  j["upsample"] = ro.upsample == Upsample::Nearest   ? "nearest"
                  : ro.upsample == Upsample::Bicubic ? "bicubic"
                                                     : "bilinear";
  j["resize"] = ro.resize == ResizeMode::Crop ? "crop" : "squash";
  if (ro.size) {  // only then: the JSON of a run without --size is as before
    const HParams& hp = ctx.model->hp;
    j["size"] = {hp.image_w, hp.image_h};
    j["pos_interp"] = hp.source.at("pos_interp");
  }
  j["selected_view"] = ctx.views[ctx.selected].name;
  nlohmann::ordered_json s;
  s["images"] = sum.n;
  s["failed"] = run.failed;
  s["mask_area_share"] = sum.area;
  if (classify) {
    s["top1"] = {{"correct", sum.correct},
                 {"labelled", sum.labelled},
                 {"accuracy", sum.labelled ? nlohmann::ordered_json(static_cast<double>(sum.correct) / sum.labelled)
                                           : nlohmann::ordered_json()}};
  } else {
    s["top1"] = nullptr;
  }
  s["views"] = views;
  j["summary"] = s;
  nlohmann::ordered_json imgs = nlohmann::ordered_json::array();
  for (const auto& ev : run.done) imgs.push_back(image_json(ctx, ev));
  j["images"] = imgs;
  j["errors"] = run.errors;
  return j;
}

// Writes the --json document; false (the error printed, the folders made for it removed) when it fails.
bool write_eval_json(const JsonTarget& json, const nlohmann::ordered_json& j) {
  try {
    // File names are bytes; one that is not UTF-8 gets U+FFFD in the JSON (as in render's manifest).
    const std::string text = j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    write_file_atomic(json.path, std::vector<uint8_t>(text.begin(), text.end()));
  } catch (const std::exception& e) {
    std::cerr << "attnmap: error: " << printable(e.what()) << "\n";
    remove_made_folders(json.made);
    return false;
  }
  return true;
}

}  // namespace

int run_eval(const EvalOptions& opt) {
  const RenderOptions& ro = opt.view;
  check_masks_folder(opt);
  if (!opt.json_out.empty()) check_output_name("--json", opt.json_out);  // before the model loads
  const std::string weights_path = ro.weights.empty() ? default_weights_path() : ro.weights;
  const ViTWeights model = [&] {
    ViTWeights m = load_model(weights_path, ro.overrides);
    if (ro.size)
      resample_pos_embed(m, (*ro.size)[0], (*ro.size)[1], ro.pos_interp ? *ro.pos_interp : default_pos_interp(m.hp).mode);
    return m;
  }();
  if (!ro.quiet)
    for (const auto& n : model.notices) std::cerr << "attnmap: note: " << printable(weights_path + ": " + n) << "\n";
  const EvalContext ctx = make_eval_context(model, opt);
  set_eval_blas_threads();
  const bool classify = model.head.present();
  const int num_classes = classify ? model.head.out : 0;

  // Inputs: plan_jobs walks folders (sorted, hidden entries skipped) and skips the masks folder given as its
  // "output" folder; out_base relative to it is the image's path below its input folder, without extension.
  std::vector<std::string> missing;
  std::vector<std::pair<std::string, std::string>> unreadable;
  const std::vector<Job> jobs = plan_jobs(ro.inputs, opt.masks_dir, &missing, {}, &unreadable);
  const MaskIndex masks(opt.masks_dir);
  const JsonTarget json = prepare_json(opt, weights_path, jobs, masks);
  TruthLookup truth(opt.masks_dir, model.hp, classify, num_classes);

  EvalRun run;
  report_unusable_inputs(missing, unreadable, run);
  if (jobs.empty() && missing.empty() && unreadable.empty()) {
    std::cerr << "attnmap: error: no images found in the inputs\n";
    remove_made_folders(json.made);
    return 1;
  }
  evaluate_jobs(ctx, jobs, masks, truth, num_classes, run);
  const Summary sum = summarise(ctx, run.done);
  print_summary(std::cout, ctx, sum, run.failed, classify);
  if (!opt.json_out.empty() && !write_eval_json(json, eval_json(ctx, weights_path, sum, run, classify))) return 1;
  if (!ro.quiet) {
    char line[160];
    std::snprintf(line, sizeof line, "attnmap: %zu evaluated, %d failed, %.2f s\n", sum.n, run.failed, run.secs);
    std::cerr << line;
  }
  return run.failed || sum.n == 0 ? 1 : 0;
}

}  // namespace attnmap
