#include "app/eval_cmd.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include <unistd.h>

#include "app/paths.hpp"
#include "app/session.hpp"
#include "app/walk.hpp"
#include "model/classify.hpp"
#include "core/error.hpp"
#include "maps/faithfulness.hpp"
#include "maps/evaluate.hpp"
#include "model/pos_embed.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"

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
      const std::string stem = f.stem().string();
      const size_t dot = stem.rfind('.');
      if (dot != std::string::npos && dot > 0) {  // STEM.<class>: an item mask of image STEM
        items_by_rel[(rel.parent_path() / stem.substr(0, dot)).generic_string()].push_back(f.string());
        items_by_stem[stem.substr(0, dot)].push_back(f.string());
      }
    }
  }

  // Item masks of an image: STEM.<class>.<ext> whose <class> names one of `labels` (find_label), found by
  // relative path first, else by bare stem; in file-name order.
  std::vector<ItemMask> find_items(const std::string& rel_stem, const std::string& stem,
                                   const std::vector<std::string>& labels) const {
    const std::vector<std::string>* hit = nullptr;
    auto it = items_by_rel.find(rel_stem);
    if (!rel_stem.empty() && it != items_by_rel.end()) hit = &it->second;
    auto is = items_by_stem.find(stem);
    if (!hit && is != items_by_stem.end()) hit = &is->second;
    std::vector<ItemMask> out;
    if (!hit) return out;
    for (const std::string& f : *hit) {
      const std::string st = fs::path(f).stem().string();
      if (const auto cls = find_label(labels, st.substr(st.rfind('.') + 1))) out.push_back({*cls, f});
    }
    return out;
  }

  // Some mask STEM.<anything> exists for the image (an item mask, whether or not <anything> is a class).
  bool has_item_masks(const std::string& rel_stem, const std::string& stem) const {
    return (!rel_stem.empty() && items_by_rel.count(rel_stem)) || items_by_stem.count(stem);
  }

  std::map<std::string, std::vector<std::string>> items_by_rel, items_by_stem;

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

// The class token's attention at `layer`, heads fused by `h`.
EvalView attention_view(const std::string& name, int layer, HeadSelect h) {
  return {name, false, [layer, h](const ViewInput& vi) { return class_attention_map(vi.fwd, vi.model.hp, layer, h); }};
}

// Attention rollout through blocks 0..layer (Abnar & Zuidema 2020): its class row over the patches.
EvalView rollout_view(const std::string& name, int layer, HeadSelect h, double discard) {
  return {name, false, [layer, h, discard](const ViewInput& vi) {
            return class_row_map(attention_rollout(vi.fwd, layer, h, discard), vi.model.hp, vi.fwd.tokens);
          }};
}

// A class-specific explanation (maps/explain.hpp) of vi.target: from vi.tape when given, else from a tape of
// its own (one forward pass with the activations kept).
EvalView explain_view(const ExplainRequest& req) {
  return {explain_method_name(req.method), true, [req](const ViewInput& vi) {
            if (vi.tape) return explain_map(vi.model, *vi.tape, vi.target, req);
            const ForwardTape tape = vit_forward_tape(vi.model, vi.in.chw.data());
            return explain_map(vi.model, tape, vi.target, req);
          }};
}

// The explanation views, appended to ctx.views when the model has a classifier head (and residual MLP
// blocks: the seed layout has no backward): chefer, gradcam at --gradcam-layer (default -1), attn-grad at
// the selected view's block. Throws attnmap::Error for a --gradcam-layer out of range.
void add_explain_views(EvalContext& ctx, const ViTWeights& model, const EvalOptions& opt, int sel_layer) {
  const std::string unavailable = explanations_unavailable(model.hp, model.head.present());
  if (!unavailable.empty()) {
    if (opt.view.gradcam_layer) throw Error("--gradcam-layer: eval scores no gradcam view: " + unavailable);
    return;  // the note saying so is printed before the first image
  }
  ExplainRequest req;
  req.layer = sel_layer;
  try {
    req.gradcam_layer = resolve_layer(opt.view.gradcam_layer.value_or(-1), model.hp.depth);
  } catch (const Error& e) {
    throw Error(std::string("--gradcam-layer: ") + e.what());
  }
  ctx.explain = req;
  for (const ExplainMethod m : {ExplainMethod::Chefer, ExplainMethod::GradCam, ExplainMethod::AttnGrad}) {
    req.method = m;
    ctx.views.push_back(explain_view(req));
  }
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
      if (!dup) ctx.views.push_back(attention_view(name, l, h));
    }
  const std::string standard_rollout = "rollout";
  const SelectedView view = select_view(hp, opt.view);
  const int sel_layer = view.layer;
  const HeadSelect sel_head = resolve_head(view.head, H);
  std::string sel_name = "L" + std::to_string(sel_layer) + "/" + fusion_name(sel_head, "h");
  EvalView sel = attention_view(sel_name, sel_layer, sel_head);
  if (opt.view.rollout) {  // --rollout [--discard F]: rollout through layers 0..sel_layer
    if (!(opt.view.discard >= 0.0 && opt.view.discard <= 1.0)) throw Error("--discard must be in [0, 1]");
    const double discard = opt.view.discard;
    sel_name = sel_layer == hp.depth - 1 && sel_head.fusion == HeadSelect::Fusion::Mean && discard == 0.0
                   ? standard_rollout
                   : "rollout L0-" + std::to_string(sel_layer) + "/" + fusion_name(sel_head, "h") +
                         (discard > 0.0 ? fmt(" discard %g", discard) : "");
    sel = rollout_view(sel_name, sel_layer, sel_head, discard);
  }
  ctx.selected = ctx.views.size();
  for (size_t i = 0; i < ctx.views.size(); ++i)
    if (ctx.views[i].name == sel.name) ctx.selected = i;
  if (ctx.selected == ctx.views.size() && sel.name != standard_rollout) ctx.views.push_back(sel);
  ctx.views.push_back(rollout_view(standard_rollout, hp.depth - 1, HeadSelect{}, 0.0));
  if (sel.name == standard_rollout) ctx.selected = ctx.views.size() - 1;
  add_explain_views(ctx, model, opt, sel_layer);
  if (opt.sanity)  // cascading: the top k blocks re-initialised, k = 1..depth (fixed seed)
    for (int k = 1; k <= hp.depth; ++k) ctx.randomised.push_back(randomise_blocks(model, hp.depth - k, 20181));
  return ctx;
}

namespace {

// A view's (grid_h, grid_w) map on the photo's pixels (photo_h, photo_w).
std::vector<float> on_photo(const EvalContext& ctx, const std::vector<float>& grid, const ModelInput& in, int w, int h) {
  const HParams& hp = ctx.model->hp;
  return map_to_photo(grid, hp.grid_w, hp.grid_h, in.box, w, h, ctx.opt->view.upsample);
}

Mask load_mask(const EvalOptions& opt, const std::string& path, int width, int height) {
  LoadOptions mask_load = opt.view.load;
  mask_load.keep_nonzero = true;  // a 16-bit mask's object may be marked 1 (or any small value)
  Mask mask = mask_from_image(load_image(path, mask_load), path);
  if (mask.width != width || mask.height != height)
    throw Error("mask " + path + " is " + std::to_string(mask.width) + "x" + std::to_string(mask.height) +
                ", the image is " + std::to_string(width) + "x" + std::to_string(height) +
                " (a mask must have the image's size)");
  return mask;
}

// Class-specific pointing: for each item, every view's map for the item's class (a class-agnostic view's
// map is the same for every class) must peak on that item's mask; `other` when it peaks on another item.
std::vector<ItemScore> score_items(const EvalContext& ctx, const ViewInput& vi, const std::vector<std::vector<float>>& grids,
                                   const std::vector<float>& centre, int w, int h, const std::vector<ItemMask>& items) {
  const int tol = ctx.opt->tolerance_px;
  std::vector<Mask> masks;
  for (const ItemMask& it : items) masks.push_back(load_mask(*ctx.opt, it.path, w, h));
  std::vector<std::vector<float>> agnostic(ctx.views.size());  // on the photo, made once
  auto score = [&](const std::vector<float>& m, size_t i, bool* asked, bool* other) {
    *asked = pointing_game(m, masks[i], tol);
    *other = false;
    for (size_t j = 0; j < masks.size() && !*asked; ++j)
      if (j != i && items[j].cls != items[i].cls) *other = *other || pointing_game(m, masks[j], tol);
  };
  std::vector<ItemScore> out;
  for (size_t i = 0; i < items.size(); ++i) {
    ItemScore s;
    s.cls = items[i].cls;
    s.mask = items[i].path;
    s.area_share = random_pointing_expectation(masks[i], tol);
    for (size_t v = 0; v < ctx.views.size(); ++v) {
      std::vector<float> m;
      if (ctx.views[v].class_specific) {
        ViewInput asked_for{vi.model, vi.in, vi.fwd, items[i].cls, vi.tape};
        m = on_photo(ctx, ctx.views[v].map(asked_for), vi.in, w, h);
      } else {
        if (agnostic[v].empty()) agnostic[v] = on_photo(ctx, grids[v], vi.in, w, h);
      }
      bool asked = false, other = false;
      score(ctx.views[v].class_specific ? m : agnostic[v], i, &asked, &other);
      s.asked.push_back(asked);
      s.other.push_back(other);
    }
    score(centre, i, &s.centre_asked, &s.centre_other);
    out.push_back(std::move(s));
  }
  return out;
}

// FNV-1a of the file name: a per-image seed for the random removal orders that does not depend on the path.
uint64_t name_seed(const std::string& input) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : fs::path(input).filename().string()) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The perturbation test: each view's map orders the patches (most relevant first for the positive curve,
// least first for the negative); random orders are the baseline. Target: the model's top-1.
PerturbEval perturb_image(const EvalContext& ctx, const ViewInput& vi, const std::vector<std::vector<float>>& grids,
                          const std::string& input) {
  const ViTWeights& model = *ctx.model;
  const PerturbMode mode = *ctx.opt->perturb;
  PerturbEval pe;
  pe.target = vi.target;
  const double p0 = class_probabilities(vi.fwd.logits)[static_cast<size_t>(vi.target)];
  // Every order of the image in one batch per step: views' positive and negative, then the random ones.
  std::vector<std::vector<int>> orders;
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    orders.push_back(removal_order(grids[v], true));
    orders.push_back(removal_order(grids[v], false));
  }
  const int seeds = std::max(1, ctx.opt->perturb_seeds);
  const int N = model.hp.grid_w * model.hp.grid_h;
  for (int k = 0; k < seeds; ++k) orders.push_back(random_order(N, name_seed(input) + static_cast<uint64_t>(k)));
  const std::vector<std::vector<double>> c = perturbation_curves(model, vi.in.chw.data(), orders, mode, vi.target, p0);
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    pe.positive.push_back(c[2 * v]);
    pe.negative.push_back(c[2 * v + 1]);
  }
  pe.random.assign(10, 0.0);
  for (int k = 0; k < seeds; ++k)
    for (size_t i = 0; i < 10; ++i) pe.random[i] += c[2 * ctx.views.size() + static_cast<size_t>(k)][i] / seeds;
  pe.forwards = 9 * static_cast<long>(orders.size());
  return pe;
}

// Model randomisation: each view's map from the model with its top k blocks re-initialised, ranked against
// the trained model's map. [k - 1][view].
std::vector<std::vector<double>> sanity_image(const EvalContext& ctx, const ModelInput& in, const ForwardOptions& fo,
                                              const std::vector<std::vector<float>>& grids, int target) {
  std::vector<std::vector<double>> rho;
  for (const ViTWeights& rnd : ctx.randomised) {
    const ForwardResult r = vit_forward(rnd, in.chw.data(), fo);
    std::optional<ForwardTape> tape;  // the explanation views explain the trained model's target class
    if (ctx.explain && target >= 0) tape = vit_forward_tape(rnd, in.chw.data());
    const ViewInput vi{rnd, in, r, target, tape ? &*tape : nullptr};
    std::vector<double> row;
    for (size_t v = 0; v < ctx.views.size(); ++v) row.push_back(spearman(grids[v], ctx.views[v].map(vi)));
    rho.push_back(std::move(row));
  }
  return rho;
}

}  // namespace

ImageEval evaluate_image(const EvalContext& ctx, const std::string& input, const std::string& mask_path,
                         const std::vector<ItemMask>& items, std::optional<int> truth) {
  const ViTWeights& model = *ctx.model;
  const HParams& hp = model.hp;
  const EvalOptions& opt = *ctx.opt;
  ImageEval ev;
  ev.input = input;
  ev.mask = mask_path;
  ev.truth = truth;
  const Image photo = load_image(input, opt.view.load);
  ev.notes = photo.notes;  // the decoder's (a multi-page TIFF's page count)
  const Mask mask = load_mask(opt, mask_path, photo.width, photo.height);
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

  const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, opt.view.resize, hp.mean.data(), hp.std.data(),
                                   hp.crop_pct.value_or(0.875f));  // as render: the config's crop_pct, when given
  ForwardOptions fo;
  fo.last_layer = hp.depth - 1;
  fo.keep_full = true;  // rollout needs every layer's full matrices
  fo.to_end = model.head.present();
  const ForwardResult r = vit_forward(model, in.chw.data(), fo);
  int target = -1;
  if (!r.logits.empty()) {
    ev.top5 = top_k_classes(r.logits, hp.labels, 5);
    ev.predicted = static_cast<int>(std::max_element(r.logits.begin(), r.logits.end()) - r.logits.begin());
    target = *ev.predicted;
  }
  std::optional<ForwardTape> tape;  // for the explanation views: one tape per image, every class
  if (ctx.explain && target >= 0) tape = vit_forward_tape(model, in.chw.data());
  const ViewInput vi{model, in, r, target, tape ? &*tape : nullptr};
  std::vector<std::vector<float>> grids;  // per view (grid_h, grid_w)
  for (size_t i = 0; i < ctx.views.size(); ++i) {
    std::vector<float> grid = ctx.views[i].map(vi);
    if (i == ctx.selected) {
      bool flat = false;
      normalize_minmax(grid, &flat);
      if (flat) ev.notes.push_back("the selected view's map is constant; its pointing-game hit is arbitrary");
    }
    const std::vector<float> m = on_photo(ctx, grid, in, photo.width, photo.height);  // (H, W)
    ev.views.push_back({pointing_game(m, mask, opt.tolerance_px), energy_in_mask(m, mask)});
    grids.push_back(std::move(grid));
  }
  const std::vector<float> centre = centre_prior_map(photo.width, photo.height);
  ev.centre = {pointing_game(centre, mask, opt.tolerance_px), energy_in_mask(centre, mask)};
  ev.random_pointing = random_pointing_expectation(mask, opt.tolerance_px);
  std::set<int> classes;
  for (const ItemMask& it : items) classes.insert(it.cls);
  if (classes.size() >= 2 && target >= 0) ev.items = score_items(ctx, vi, grids, centre, photo.width, photo.height, items);
  auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  if (opt.perturb && target >= 0) ev.perturbation = perturb_image(ctx, vi, grids, input);
  ev.perturb_cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  auto t1 = std::chrono::steady_clock::now();
  if (opt.sanity) ev.sanity = sanity_image(ctx, in, fo, grids, target);
  ev.perturb_secs = std::chrono::duration<double>(t1 - t0).count();
  ev.sanity_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
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

// One image at a time: every core for its products (capped by the user's OPENBLAS_NUM_THREADS), as render -j 1.
void set_eval_blas_threads() {
  const int blas = blas_threads_to_set(1, usable_cores(), std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS"));
  set_blas_threads(blas);
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
  bool noted_headless_items = false;
  for (const Job& job : jobs) {
    try {
      const std::string mask_path = mask_for_job(job, opt.masks_dir, masks_prefix, masks);
      const fs::path rel = fs::path(job.out_base).lexically_relative(opt.masks_dir);
      const std::string stem = fs::path(job.input).stem().string();
      const std::vector<ItemMask> items = masks.find_items(rel.generic_string(), stem, ctx.model->hp.labels);
      if (!ctx.model->head.present() && !noted_headless_items && masks.has_item_masks(rel.generic_string(), stem)) {
        std::cerr << "attnmap: note: class-specific pointing: item masks such as " << printable(stem)
                  << ".<class>.* are present, but the model has no classifier head (no class to ask for); skipped\n";
        noted_headless_items = true;
      }
      ImageEval ev = evaluate_image(ctx, job.input, mask_path, items, truth.truth_for(job.input));
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

// Class-specific pointing over the images with items: per view the share of items whose asked map peaks on
// them (asked), on another item (other), and the share of images where every item is hit as asked (all).
struct ClassRow {
  double asked = 0, other = 0, all = 0;
};

struct Summary {
  size_t n = 0;      // images evaluated
  double area = 0;   // mean mask area share: the uniform baseline
  int labelled = 0, correct = 0;
  std::vector<Row> rows;  // per view, in the order of ctx.views; zeros when n == 0
  Row centre;             // the centre prior's pointing and energy
  double random_pointing = 0;  // a random map's expected pointing
  // class-specific pointing
  size_t item_images = 0, items = 0;
  std::vector<ClassRow> class_rows;
  ClassRow centre_class;
  double random_asked = 0;  // mean asked-item area share
  // perturbation (mean curves over the images perturbed)
  size_t perturbed = 0;
  long forwards = 0;
  double perturb_secs = 0, perturb_cpu = 0;
  std::vector<std::vector<double>> pos, neg;  // per view, (10)
  std::vector<double> random;                 // (10)
  // sanity: mean Spearman, [k - 1][view]
  size_t sanity_n = 0;
  std::vector<std::vector<double>> rho;
  double sanity_secs = 0;
};

// The best baselines: pointing max(centre prior, random map), energy max(uniform map, centre prior).
double best_pointing_baseline(const Summary& s) { return std::max(s.centre.pointing, s.random_pointing); }
double best_energy_baseline(const Summary& s) { return std::max(s.area, s.centre.energy); }
// Class-specific pointing's best baseline: max(centre prior asked, random map asked).
double best_asked_baseline(const Summary& s) { return std::max(s.centre_class.asked, s.random_asked); }

// Adds each image's class-specific pointing, perturbation curves and sanity correlations into s.
void summarise_faithfulness(const EvalContext& ctx, const std::vector<ImageEval>& done, Summary& s) {
  const size_t V = ctx.views.size();
  s.class_rows.assign(V, {});
  s.pos.assign(V, std::vector<double>(10, 0.0));
  s.neg = s.pos;
  s.random.assign(10, 0.0);
  s.rho.assign(ctx.randomised.size(), std::vector<double>(V, 0.0));
  for (const ImageEval& ev : done) {
    if (!ev.items.empty()) {
      ++s.item_images;
      std::vector<bool> all(V, true);
      bool centre_all = true;
      for (const ItemScore& it : ev.items) {
        ++s.items;
        for (size_t v = 0; v < V; ++v) {
          s.class_rows[v].asked += it.asked[v];
          s.class_rows[v].other += it.other[v];
          all[v] = all[v] && it.asked[v];
        }
        s.centre_class.asked += it.centre_asked;
        s.centre_class.other += it.centre_other;
        centre_all = centre_all && it.centre_asked;
        s.random_asked += it.area_share;
      }
      for (size_t v = 0; v < V; ++v) s.class_rows[v].all += all[v];
      s.centre_class.all += centre_all;
    }
    s.perturb_secs += ev.perturb_secs;
    s.perturb_cpu += ev.perturb_cpu;
    s.sanity_secs += ev.sanity_secs;
    if (ev.perturbation) {
      ++s.perturbed;
      s.forwards += ev.perturbation->forwards;
      for (size_t v = 0; v < V; ++v)
        for (size_t i = 0; i < 10; ++i) {
          s.pos[v][i] += ev.perturbation->positive[v][i];
          s.neg[v][i] += ev.perturbation->negative[v][i];
        }
      for (size_t i = 0; i < 10; ++i) s.random[i] += ev.perturbation->random[i];
    }
    if (!ev.sanity.empty()) {
      ++s.sanity_n;
      for (size_t k = 0; k < s.rho.size(); ++k)
        for (size_t v = 0; v < V; ++v) s.rho[k][v] += ev.sanity[k][v];
    }
  }
  const double ni = static_cast<double>(std::max<size_t>(s.items, 1)), nm = static_cast<double>(std::max<size_t>(s.item_images, 1));
  for (ClassRow* r : {&s.centre_class}) *r = {r->asked / ni, r->other / ni, r->all / nm};
  for (ClassRow& r : s.class_rows) r = {r.asked / ni, r.other / ni, r.all / nm};
  s.random_asked /= ni;
  const double np = static_cast<double>(std::max<size_t>(s.perturbed, 1));
  for (auto* c : {&s.pos, &s.neg})
    for (auto& curve : *c)
      for (double& x : curve) x /= np;
  for (double& x : s.random) x /= np;
  const double ns = static_cast<double>(std::max<size_t>(s.sanity_n, 1));
  for (auto& row : s.rho)
    for (double& x : row) x /= ns;
}

Summary summarise(const EvalContext& ctx, const std::vector<ImageEval>& done) {
  Summary s;
  s.n = done.size();
  const size_t n = s.n;
  for (const auto& ev : done) {
    s.area += ev.area_share;
    s.centre.pointing += ev.centre.hit ? 1.0 : 0.0;
    s.centre.energy += ev.centre.energy;
    s.random_pointing += ev.random_pointing;
    if (ev.truth && ev.predicted) {
      ++s.labelled;
      s.correct += *ev.truth == *ev.predicted;
    }
  }
  if (n) {
    s.area /= static_cast<double>(n);
    s.centre.pointing /= static_cast<double>(n);
    s.centre.energy /= static_cast<double>(n);
    s.centre.ratio = s.centre.energy / s.area;
    s.random_pointing /= static_cast<double>(n);
  }
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
  summarise_faithfulness(ctx, done, s);
  return s;
}

// Width of the view-name column: the longest view name plus " *", at least 15.
size_t name_width(const EvalContext& ctx) {
  size_t width = 15;
  for (const auto& v : ctx.views) width = std::max(width, v.name.size() + 2);
  return width;
}

std::string padded(std::string s, size_t width) {
  s.resize(std::max(width, s.size()), ' ');
  return s;
}

// The table of views (pointing, energy, ratio, the margins over the best baseline; the selected one
// starred), the baselines' rows, and the line naming the best.
void print_view_table(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  const std::vector<Row>& rows = s.rows;
  const size_t width = name_width(ctx);
  const double bp = best_pointing_baseline(s), be = best_energy_baseline(s);
  out << padded("view", width) + "  pointing   energy    ratio  pointing-base  energy-base\n";
  size_t best_p = 0, best_e = 0;
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const Row& r = rows[v];
    const std::string name = padded(ctx.views[v].name + (v == ctx.selected ? " *" : ""), width);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %9.3f %8.3f %7.2fx %+14.3f %+12.3f\n", name.c_str(), r.pointing, r.energy,
                  r.ratio, r.pointing - bp, r.energy - be);
    out << buf;
    if (r.pointing > rows[best_p].pointing ||
        (r.pointing == rows[best_p].pointing && r.energy > rows[best_p].energy))
      best_p = v;
    if (r.energy > rows[best_e].energy) best_e = v;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %9.3f %8.3f %7.2fx\n", padded("(centre prior)", width).c_str(), s.centre.pointing,
                s.centre.energy, s.centre.ratio);
  out << buf;
  std::snprintf(buf, sizeof buf, "%s %9s %8.3f %7.2fx\n", padded("(uniform map)", width).c_str(), "-", s.area, 1.0);
  out << buf;
  std::snprintf(buf, sizeof buf, "%s %9.3f %8s\n", padded("(random map)", width).c_str(), s.random_pointing, "-");
  out << buf;
  if (!ctx.model->hp.class_token)
    out << "maps: the model has no class token: each attention view is the mean of the patch queries' rows "
           "(the attention each patch receives)\n";
  out << "* selected view (--layer/--head/--rollout or the model's default); pointing tolerance "
      << ctx.opt->tolerance_px << " px; best pointing game: " << ctx.views[best_p].name
      << ", best energy: " << ctx.views[best_e].name << "\n";
  if (ctx.explain)
    out << "chefer, gradcam (block " << ctx.explain->gradcam_layer << " norm1), attn-grad (block "
        << ctx.explain->layer << "): class-specific, here each image's top-1 class; the other views are "
                                 "class-agnostic\n";
  out << "baselines (no model): centre prior = Gaussian at the image centre, sigma 0.25 x the shorter side; "
         "uniform map: energy = mask area share; random map: expected pointing = mask area share; "
         "pointing-base = pointing - "
      << fmt("%.3f", bp) << ", energy-base = energy - " << fmt("%.3f", be) << " (the best baseline of each)\n";
}

// Class-specific pointing: each item's class asked in turn (printed when images have two or more items).
void print_class_table(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  if (!s.item_images) return;
  const size_t width = name_width(ctx) + 12;  // " (any class)"
  out << "\nclass-specific pointing: " << s.item_images << " images, " << s.items
      << " items of different classes; each item's class asked in turn\n";
  out << padded("view", width) + "     asked    other  all items  asked-base\n";
  const double ba = best_asked_baseline(s);
  auto row = [&](const std::string& name, const ClassRow& r, bool margin) {
    char buf[192];
    std::snprintf(buf, sizeof buf, "%s %9.3f %8.3f %10.3f", padded(name, width).c_str(), r.asked, r.other, r.all);
    out << buf;
    if (margin) out << fmt(" %+11.3f", r.asked - ba);
    out << "\n";
  };
  for (size_t v = 0; v < ctx.views.size(); ++v)
    row(ctx.views[v].name + (ctx.views[v].class_specific ? "" : " (any class)"), s.class_rows[v], true);
  row("(centre prior)", s.centre_class, false);
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %9.3f %8s %10s\n", padded("(random map)", width).c_str(), s.random_asked, "-", "-");
  out << buf;
  out << "asked: the map for an item's class peaks on that item; other: on another item instead; all items: every "
         "item of the image hit as asked; asked-base = asked - "
      << fmt("%.3f", ba)
      << " (the better of centre prior and random map). A view marked (any class) gives one map whatever the "
         "class, so it cannot score all items on images whose items do not overlap\n";
}

// Perturbation AUCs: per view, positive (most relevant patches removed first; lower is better) and negative
// (least relevant first; higher is better), with random orders as the baseline.
void print_perturbation_table(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  if (!s.perturbed) return;
  const size_t width = name_width(ctx);
  const std::vector<double> f = perturbation_fractions();
  out << "\nperturbation (" << (*ctx.opt->perturb == PerturbMode::Drop ? "drop: patch tokens leave the sequence"
                                                                   : "zero: patch pixels set to black")
      << "; target = each image's top-1; AUC of its probability over 0-90 % of the patches removed)\n";
  out << padded("view", width) + "  positive  negative  neg-pos  positive-base  negative-base\n";
  const double rnd = trapezoid_auc(f, s.random);
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const double p = trapezoid_auc(f, s.pos[v]), n = trapezoid_auc(f, s.neg[v]);
    char buf[192];
    std::snprintf(buf, sizeof buf, "%s %9.3f %9.3f %+8.3f %+14.3f %+14.3f\n",
                  padded(ctx.views[v].name + (v == ctx.selected ? " *" : ""), width).c_str(), p, n, n - p, rnd - p, n - rnd);
    out << buf;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s %9.3f %9.3f %+8.3f\n", padded("(random order)", width).c_str(), rnd, rnd, 0.0);
  out << buf;
  std::snprintf(buf, sizeof buf,
                "positive: lower is better, negative: higher is better; positive-base = random - positive, "
                "negative-base = negative - random (> 0: better than the random order); random: mean of %d fixed-seed orders; "
                "%zu images, %ld forward passes, %.2f s (processor time %.2f s)\n",
                std::max(1, ctx.opt->perturb_seeds), s.perturbed, s.forwards, s.perturb_secs, s.perturb_cpu);
  out << buf;
}

// Sanity: mean Spearman of each view's maps with the trained model's, top k blocks randomised.
void print_sanity_table(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  if (!s.sanity_n) return;
  const size_t width = name_width(ctx);
  const int depth = static_cast<int>(ctx.randomised.size());
  out << "\nsanity (model randomisation, Adebayo et al. 2018): mean Spearman rank correlation with the trained "
         "model's maps, blocks re-initialised from the top\n";
  std::string head = padded("view", width);
  for (int k = 1; k <= depth; ++k) head += (k == depth ? "    all " : "    top ") + std::to_string(k);
  out << head << "\n";
  std::vector<std::string> flagged;
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    std::string line = padded(ctx.views[v].name, width);
    for (int k = 0; k < depth; ++k) line += fmt(" %8.3f", s.rho[static_cast<size_t>(k)][v]);
    const bool flag = s.rho.back()[v] > ctx.opt->sanity_flag;
    if (flag) flagged.push_back(ctx.views[v].name);
    out << line << (flag ? "  <- unchanged" : "") << "\n";
  }
  std::string list;
  for (const auto& f : flagged) list += (list.empty() ? "" : ", ") + f;
  out << "flagged (correlation > " << fmt("%.2f", ctx.opt->sanity_flag)
      << " with every block randomised: the map does not depend on the weights): "
      << (list.empty() ? "none" : list) << fmt("; %.2f s\n", s.sanity_secs);
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
  print_class_table(out, ctx, s);
  print_perturbation_table(out, ctx, s);
  print_sanity_table(out, ctx, s);
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
  e["centre_prior"] = {{"hit", ev.centre.hit}, {"energy", ev.centre.energy}};
  e["random_pointing"] = ev.random_pointing;
  if (!ev.items.empty()) {
    nlohmann::ordered_json items = nlohmann::ordered_json::array();
    for (const ItemScore& it : ev.items) {
      nlohmann::ordered_json iv = nlohmann::ordered_json::object();
      for (size_t v = 0; v < ctx.views.size(); ++v)
        iv[ctx.views[v].name] = {{"asked", static_cast<bool>(it.asked[v])}, {"other", static_cast<bool>(it.other[v])}};
      items.push_back({{"class", it.cls}, {"mask", it.mask}, {"area_share", it.area_share},
                       {"centre_prior", {{"asked", it.centre_asked}, {"other", it.centre_other}}}, {"views", iv}});
    }
    e["items"] = items;
  }
  if (ev.perturbation) {
    const std::vector<double> f = perturbation_fractions();
    nlohmann::ordered_json pv = nlohmann::ordered_json::object();
    for (size_t v = 0; v < ctx.views.size(); ++v)
      pv[ctx.views[v].name] = {{"positive_auc", trapezoid_auc(f, ev.perturbation->positive[v])},
                               {"negative_auc", trapezoid_auc(f, ev.perturbation->negative[v])}};
    e["perturbation"] = {{"target", ev.perturbation->target},
                         {"random_auc", trapezoid_auc(f, ev.perturbation->random)}, {"views", pv}};
  }
  return e;
}

// The faithfulness figures of the summary: baselines, margins (into each view), class-specific pointing,
// perturbation and sanity (null when not run).
void faithfulness_json(const EvalContext& ctx, const Summary& sum, nlohmann::ordered_json& s) {
  using J = nlohmann::ordered_json;
  const double bp = best_pointing_baseline(sum), be = best_energy_baseline(sum);
  s["baselines"] = {{"uniform_energy", sum.area},
                    {"centre_prior", {{"pointing_game", sum.centre.pointing}, {"energy_in_mask", sum.centre.energy}}},
                    {"random_pointing_game", sum.random_pointing},
                    {"best_pointing", bp},
                    {"best_energy", be}};
  for (size_t v = 0; v < ctx.views.size() && sum.n; ++v) {
    s["views"][ctx.views[v].name]["margin_pointing"] = sum.rows[v].pointing - bp;
    s["views"][ctx.views[v].name]["margin_energy"] = sum.rows[v].energy - be;
  }
  J cp = nullptr;
  if (sum.item_images) {
    J views = J::object();
    for (size_t v = 0; v < ctx.views.size(); ++v)
      views[ctx.views[v].name] = {{"asked", sum.class_rows[v].asked}, {"other", sum.class_rows[v].other},
                                  {"all_items", sum.class_rows[v].all}, {"class_specific", ctx.views[v].class_specific},
                                  {"margin_asked", sum.class_rows[v].asked - best_asked_baseline(sum)}};
    cp = {{"images", sum.item_images}, {"items", sum.items}, {"views", views},
          {"centre_prior", {{"asked", sum.centre_class.asked}, {"other", sum.centre_class.other}, {"all_items", sum.centre_class.all}}},
          {"random_asked", sum.random_asked}, {"best_asked", best_asked_baseline(sum)}};
  }
  s["class_pointing"] = cp;
  J pt = nullptr;
  if (sum.perturbed) {
    const std::vector<double> f = perturbation_fractions();
    J views = J::object();
    for (size_t v = 0; v < ctx.views.size(); ++v)
      views[ctx.views[v].name] = {{"positive_auc", trapezoid_auc(f, sum.pos[v])}, {"negative_auc", trapezoid_auc(f, sum.neg[v])},
                                  {"margin_positive", trapezoid_auc(f, sum.random) - trapezoid_auc(f, sum.pos[v])},
                                  {"margin_negative", trapezoid_auc(f, sum.neg[v]) - trapezoid_auc(f, sum.random)},
                                  {"positive_curve", sum.pos[v]}, {"negative_curve", sum.neg[v]}};
    pt = {{"mode", *ctx.opt->perturb == PerturbMode::Drop ? "drop" : "zero"}, {"target", "top-1"},
          {"fractions", f}, {"images", sum.perturbed}, {"forward_passes", sum.forwards}, {"seconds", sum.perturb_secs}, {"cpu_seconds", sum.perturb_cpu},
          {"random_seeds", std::max(1, ctx.opt->perturb_seeds)},
          {"random", {{"auc", trapezoid_auc(f, sum.random)}, {"curve", sum.random}}}, {"views", views}};
  }
  s["perturbation"] = pt;
  J sn = nullptr;
  if (sum.sanity_n) {
    J views = J::object();
    for (size_t v = 0; v < ctx.views.size(); ++v) {
      std::vector<double> r;
      for (const auto& row : sum.rho) r.push_back(row[v]);
      views[ctx.views[v].name] = {{"spearman", r}, {"flagged", r.back() > ctx.opt->sanity_flag}};
    }
    sn = {{"images", sum.sanity_n}, {"blocks_randomised_from_top", J::array()}, {"flag_above", ctx.opt->sanity_flag},
          {"seconds", sum.sanity_secs}, {"views", views}};
    for (size_t k = 1; k <= sum.rho.size(); ++k) sn["blocks_randomised_from_top"].push_back(k);
  }
  s["sanity"] = sn;
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
  j["query"] = ctx.model->hp.query_name();  // whose attention row the maps are: "class token" or "mean over patch queries"
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
  s["explain"] = ctx.explain ? nlohmann::ordered_json{{"target", "top-1"},
                                                      {"gradcam_layer", ctx.explain->gradcam_layer},
                                                      {"attn_grad_layer", ctx.explain->layer}}
                             : nlohmann::ordered_json(nullptr);
  faithfulness_json(ctx, sum, s);
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
    prepare_weights(m, /*backward=*/true);  // eval scores the class-specific maps too
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
  // After the usage checks (a usage error is the only line), before any image.
  if (opt.perturb && !classify)
    std::cerr << "attnmap: note: --perturb: the model has no classifier head, so there is no class probability to "
                 "perturb against; perturbation skipped\n";
  if (!ctx.explain)
    std::cerr << "attnmap: note: chefer, gradcam, attn-grad: "
              << explanations_unavailable(ctx.model->hp, ctx.model->head.present()) << "; those views are left out\n";
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
