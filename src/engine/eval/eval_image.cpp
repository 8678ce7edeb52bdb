// eval_image.cpp - scoring one image for `attnmap eval`: every view's map (view_map) against the mask and the
// centre prior, class-specific pointing of the items, the perturbation test and the sanity passes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <limits>
#include <set>

#include "engine/eval/eval.hpp"
#include "core/error.hpp"
#include "draw/overlay.hpp"
#include "maps/evaluate.hpp"
#include "model/classify.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

// One image's passes through one model (the trained one or a randomised copy): the forward pass (the full
// matrices with a rollout view; to the logits with a head) and, for the class-specific views, its tape.
struct ImagePass {
  ForwardResult fwd;
  std::optional<ForwardTape> tape;
  Box box;  // the model input's box in the photo: pixel queries
  ViewPass on(const ViTWeights& model) const { return {&model, &fwd, tape ? &*tape : nullptr, &box}; }
};

ImagePass run_passes(const EvalContext& ctx, const ViTWeights& model, const ModelInput& in) {
  ForwardOptions fo;
  fo.last_layer = model.hp.depth - 1;
  fo.keep_full = ctx.keep_full;  // rollout and token queries read every block's full matrices
  fo.to_end = model.has_classes();
  ImagePass p;
  p.fwd = vit_forward(model, in.chw.data(), fo);
  p.box = in.box;
  if (ctx.class_specific && !p.fwd.logits.empty()) p.tape = vit_forward_tape(model, in.chw.data());
  return p;
}

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

// The image's mask with its area share and notes into ev. Throws attnmap::Error for an empty mask.
Mask image_mask(const EvalOptions& opt, const std::string& mask_path, const Image& photo, ImageEval& ev) {
  Mask mask = load_mask(opt, mask_path, photo.width, photo.height);
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
  return mask;
}

// Every view's map (explaining `target`) scored against the mask into ev.views; returns the maps (grid_h,
// grid_w). A class-specific map without a score (map_score_undefined) marks its view undefined on the image.
std::vector<std::vector<float>> score_views(const EvalContext& ctx, const ViewPass& pass, int target,
                                            const ModelInput& in, const Image& photo, const Mask& mask, ImageEval& ev) {
  std::vector<std::vector<float>> grids;
  for (size_t i = 0; i < ctx.views.size(); ++i) {
    std::vector<float> grid = view_map(pass, ctx.views[i], target);
    ViewScore s;
    if (ctx.views[i].class_specific) s.undefined = map_score_undefined(grid);
    if (s.undefined.empty()) {
      s.peak = peak_to_mean(grid);
      if (i == ctx.selected) {
        bool flat = false;
        normalize_minmax(grid, &flat);
        if (flat) ev.notes.push_back("the selected view's map is constant; its pointing-game hit is arbitrary");
      }
      const std::vector<float> m = on_photo(ctx, grid, in, photo.width, photo.height);  // (H, W)
      s.hit = pointing_game(m, mask, ctx.opt->tolerance_px);
      s.energy = energy_in_mask(m, mask);
    }
    ev.views.push_back(std::move(s));
    grids.push_back(std::move(grid));
  }
  return grids;
}

// Class-specific pointing: for each item, every view's map for the item's class (a class-agnostic view's
// map is the same for every class) must peak on that item's mask; `other` when it peaks on another item. A
// class-specific map without a score leaves that (item, view) out.
std::vector<ItemScore> score_items(const EvalContext& ctx, const ViewPass& pass, const std::vector<std::vector<float>>& grids,
                                   const ModelInput& in, const std::vector<float>& centre, int w, int h,
                                   const std::vector<ItemMask>& items) {
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
      const ResolvedView& view = ctx.views[v];
      std::vector<float> m;
      if (view.class_specific) {
        const std::vector<float> grid = view_map(pass, view, items[i].cls);
        std::string why = map_score_undefined(grid);
        if (!why.empty()) {
          s.asked.push_back(0), s.other.push_back(0), s.undefined.push_back(std::move(why));
          continue;
        }
        m = on_photo(ctx, grid, in, w, h);
      } else if (agnostic[v].empty()) {
        agnostic[v] = on_photo(ctx, grids[v], in, w, h);
      }
      bool asked = false, other = false;
      score(view.class_specific ? m : agnostic[v], i, &asked, &other);
      s.asked.push_back(asked);
      s.other.push_back(other);
      s.undefined.emplace_back();
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
// least first for the negative); random orders are the baseline. Target: the model's top-1. A view undefined
// on the image (`scores`) gets no curves.
PerturbEval perturb_image(const EvalContext& ctx, const ModelInput& in, const ForwardResult& fwd, int target,
                          const std::vector<std::vector<float>>& grids, const std::vector<ViewScore>& scores,
                          const std::string& input) {
  const ViTWeights& model = *ctx.model;
  PerturbEval pe;
  pe.target = target;
  const double p0 = class_probabilities(fwd.logits, model.zero_shot.rule)[static_cast<size_t>(target)];  // as the curve's
  // Every order of the image in one batch per step: views' positive and negative, then the random ones.
  std::vector<std::vector<int>> orders;
  std::vector<size_t> scored;  // the views with curves, in order
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    if (!scores[v].undefined.empty()) continue;
    scored.push_back(v);
    orders.push_back(removal_order(grids[v], true));
    orders.push_back(removal_order(grids[v], false));
  }
  const int seeds = std::max(1, ctx.opt->perturb_seeds);
  const int N = model.hp.grid_w * model.hp.grid_h;
  for (int k = 0; k < seeds; ++k) orders.push_back(random_order(N, name_seed(input) + static_cast<uint64_t>(k)));
  const std::vector<std::vector<double>> c =
      perturbation_curves(model, in.chw.data(), orders, *ctx.opt->perturb, target, p0);
  pe.positive.assign(ctx.views.size(), {});
  pe.negative.assign(ctx.views.size(), {});
  for (size_t s = 0; s < scored.size(); ++s) {
    pe.positive[scored[s]] = c[2 * s];
    pe.negative[scored[s]] = c[2 * s + 1];
  }
  pe.random.assign(10, 0.0);
  for (int k = 0; k < seeds; ++k)
    for (size_t i = 0; i < 10; ++i) pe.random[i] += c[2 * scored.size() + static_cast<size_t>(k)][i] / seeds;
  pe.forwards = 9 * static_cast<long>(orders.size());
  return pe;
}

// Model randomisation: each view's map from the model with its top k blocks re-initialised (the class-specific
// views explain the trained model's target class), ranked against the trained model's map. [k - 1][view];
// NaN for a view undefined on the image.
std::vector<std::vector<double>> sanity_image(const EvalContext& ctx, const ModelInput& in,
                                              const std::vector<std::vector<float>>& grids,
                                              const std::vector<ViewScore>& scores, int target) {
  std::vector<std::vector<double>> rho;
  for (const ViTWeights& rnd : ctx.randomised) {
    const ImagePass p = run_passes(ctx, rnd, in);
    std::vector<double> row;
    for (size_t v = 0; v < ctx.views.size(); ++v)
      row.push_back(scores[v].undefined.empty() ? spearman(grids[v], view_map(p.on(rnd), ctx.views[v], target))
                                                : std::numeric_limits<double>::quiet_NaN());
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
  const Mask mask = image_mask(opt, mask_path, photo, ev);

  const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, opt.view.resize, hp.mean.data(), hp.std.data(),
                                   hp.crop_pct.value_or(0.875f));  // as render: the config's crop_pct, when given
  const ImagePass p = run_passes(ctx, model, in);
  int target = -1;
  if (!p.fwd.logits.empty()) {
    ev.top5 = top_k_classes(p.fwd.logits, hp.labels, 5, model.zero_shot.rule);  // SigLIP: each text's own sigmoid
    ev.predicted = static_cast<int>(std::max_element(p.fwd.logits.begin(), p.fwd.logits.end()) - p.fwd.logits.begin());
    target = *ev.predicted;
  }
  const ViewPass pass = p.on(model);
  const std::vector<std::vector<float>> grids = score_views(ctx, pass, target, in, photo, mask, ev);
  const std::vector<float> centre = centre_prior_map(photo.width, photo.height);
  ev.centre = {pointing_game(centre, mask, opt.tolerance_px), energy_in_mask(centre, mask), 0, ""};
  ev.random_pointing = random_pointing_expectation(mask, opt.tolerance_px);
  const std::vector<float> bright = brightness_map(photo);
  ev.brightness = {pointing_game(bright, mask, opt.tolerance_px), energy_in_mask(bright, mask), 0, ""};
  std::set<int> classes;
  for (const ItemMask& it : items) classes.insert(it.cls);
  if (classes.size() >= 2 && target >= 0)
    ev.items = score_items(ctx, pass, grids, in, centre, photo.width, photo.height, items);
  auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  if (opt.perturb && target >= 0) ev.perturbation = perturb_image(ctx, in, p.fwd, target, grids, ev.views, input);
  ev.perturb_cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  auto t1 = std::chrono::steady_clock::now();
  if (opt.sanity) ev.sanity = sanity_image(ctx, in, grids, ev.views, target);
  ev.perturb_secs = std::chrono::duration<double>(t1 - t0).count();
  ev.sanity_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  return ev;
}

}  // namespace attnmap
