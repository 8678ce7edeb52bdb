// explain_render.cpp - `attnmap render --explain`: class-specific explanation maps (issue 19) drawn like the
// attention views. The options are checked once per run (make_explain_context), the maps per image.
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "app/provenance.hpp"
#include "app/render.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"

namespace attnmap {

namespace fs = std::filesystem;

void make_explain_context(RenderContext& ctx, const ViTWeights& model, const RenderOptions& opt) {
  if (opt.explain.empty()) {
    if (opt.class_spec) throw Error("--class chooses the class of --explain: add --explain chefer|gradcam|attn-grad");
    if (opt.gradcam_layer) throw Error("--gradcam-layer applies to --explain gradcam only");
    return;
  }
  const HParams& hp = model.hp;
  ExplainRequest req;
  req.method = parse_explain_method(opt.explain);
  const std::string m = "--explain " + explain_method_name(req.method);
  const std::string unavailable = explanations_unavailable(hp, model.head.present());
  if (!unavailable.empty())
    throw Error(m + ": " + unavailable + " (the attention views, without --explain, still work)");
  if (opt.rollout || opt.heads_grid || opt.all_heads)
    throw Error(m + " cannot be combined with " +
                std::string(opt.rollout ? "--rollout" : opt.heads_grid ? "--heads-grid" : "--all-heads") +
                ": it draws one map per class");
  if (opt.head) throw Error(m + ": --head does not apply (the methods average the heads' attention x gradient)");
  if (opt.layer && req.method != ExplainMethod::AttnGrad)
    throw Error(m + ": --layer does not apply (" +
                (req.method == ExplainMethod::Chefer ? std::string("chefer runs through every block")
                                                     : std::string("gradcam takes --gradcam-layer")) + ")");
  if (opt.gradcam_layer && req.method != ExplainMethod::GradCam)
    throw Error("--gradcam-layer applies to --explain gradcam only");
  req.layer = ctx.layer;  // attn-grad: --layer, else the config's default view, else the last block
  try {
    req.gradcam_layer = resolve_layer(opt.gradcam_layer.value_or(-1), hp.depth);
  } catch (const Error& e) {
    throw Error(std::string("--gradcam-layer: ") + e.what());
  }
  ctx.classes = parse_class_spec(opt.class_spec.value_or("top1"));
  check_class_spec(ctx.classes, model.head.out, hp.labels);
  ctx.explain = req;
}

namespace {

// "Bag 98.9%": the class's label (or "class N" without labels) and its softmax probability.
std::string class_phrase(int c, const std::vector<std::string>& labels, const std::vector<double>& probs) {
  char p[32];
  std::snprintf(p, sizeof p, " %.1f%%", 100.0 * probs[static_cast<size_t>(c)]);
  const bool named = labels.size() == probs.size();
  return (named ? labels[static_cast<size_t>(c)] : "class " + std::to_string(c)) + p;
}

// An explanation PNG carries what render's PNGs carry: the run's record (tEXt `attnmap`) and the image's
// statistics (tEXt `attnmap:stats`: this map's statistics, the top-5, and the class it explains), and the
// --dpi pHYs.
PngOptions explained_png_options(const RenderContext& ctx, const MapStats& stats,
                                 const std::vector<std::pair<std::string, float>>& top5, int c,
                                 const std::vector<double>& probs) {
  PngOptions po;
  po.dpi = ctx.opt->dpi.value_or(0.0);
  if (ctx.provenance.empty()) return po;
  const std::vector<std::string>& labels = ctx.model->hp.labels;
  nlohmann::ordered_json st;
  put_image_stats(st, stats, top5);
  st["explained_class"] = {{"index", c},
                           {"label", labels.size() == probs.size() ? nlohmann::ordered_json(labels[static_cast<size_t>(c)])
                                                                   : nlohmann::ordered_json(nullptr)},
                           {"probability", probs[static_cast<size_t>(c)]}};
  po.text = {{kProvenanceKeyword, ctx.provenance},
             {kStatsKeyword, st.dump(-1, ' ', true, nlohmann::ordered_json::error_handler_t::replace)}};
  return po;
}

// NAME.npy and, with a record, its sidecar NAME.npy.json: removed before the .npy is replaced and written after
// it, as render_image does, so a sidecar never describes a .npy of other settings.
void write_explained_npy(const RenderContext& ctx, const std::string& npy, const std::vector<float>& map) {
  const HParams& hp = ctx.model->hp;
  const std::string side = npy_sidecar_path(npy);
  if (!ctx.provenance.empty()) ::unlink(side.c_str());
  write_npy(npy, map, {hp.grid_h, hp.grid_w});
  if (ctx.provenance.empty()) return;
  const std::string line = ctx.provenance + "\n";
  write_file_atomic(side, std::vector<uint8_t>(line.begin(), line.end()));
}

}  // namespace

RenderResult render_explained(const RenderContext& ctx, const Job& job) {
  const ViTWeights& model = *ctx.model;
  const HParams& hp = model.hp;
  const RenderOptions& opt = *ctx.opt;
  RenderResult res;
  const Image photo = load_image(job.input, opt.load);
  const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, opt.resize, hp.mean.data(), hp.std.data(),
                                   hp.crop_pct.value_or(0.875f));
  const ForwardTape tape = vit_forward_tape(model, in.chw.data());
  res.top5 = top_k_classes(tape.logits, hp.labels, 5);
  const std::vector<int> classes = resolve_classes(ctx.classes, tape.logits, hp.labels);
  int bx = 0, by = 0, bw = 0, bh = 0;
  box_pixels(in.box, photo.width, photo.height, &bx, &by, &bw, &bh);
  fs::create_directories(fs::path(job.out_base + ".png").parent_path());
  const bool per_class = ctx.classes.kind == ClassSpec::Kind::TopK && ctx.classes.k > 1;
  auto base_of = [&](int c) { return per_class ? job.out_base + ".class-" + class_file_label(c, hp.labels) : job.out_base; };
  // NAME.png / NAME.npy are checked by the batch (batch.cpp); the per-class names only here, as it does: a
  // file attnmap did not write, or anything but a regular file, is never replaced. All before any is written.
  if (per_class)
    for (const int c : classes)
      for (const std::string& out : {base_of(c) + ".png", base_of(c) + ".npy"}) {
        const bool is_npy = out.size() > 4 && out.compare(out.size() - 4, 4, ".npy") == 0;
        if (is_npy && !opt.save_raw) continue;
        std::error_code ec;
        const fs::file_status st = fs::symlink_status(out, ec);
        if (!fs::exists(st)) continue;
        if (!fs::is_regular_file(st) || !(is_npy ? looks_written_by_attnmap_npy(out) : written_by_attnmap(out)))
          throw Error("output " + out + " already exists and was not written by attnmap (or is not a regular file); "
                      "it is left alone: choose another --out or move it away");
      }
  const std::vector<double> probs = class_probabilities(tape.logits);
  const std::string method = explain_method_name(ctx.explain->method);
  for (const int c : classes) {
    const std::vector<float> map = explain_map(model, tape, c, *ctx.explain);  // (grid_h, grid_w)
    const std::string base = base_of(c);
    bool flat = false;
    std::vector<uint8_t> mask;
    const Image out = draw_view(photo, bx, by, bw, bh, map, ctx, &flat, &mask);
    if (flat) res.notes.push_back("the " + method + " map for class " + std::to_string(c) + " is constant; drawn flat (no contrast)");
    const MapStats stats = map_statistics(map, hp.grid_h, hp.grid_w);
    if (opt.save_raw) write_explained_npy(ctx, base + ".npy", map);
    write_png(base + ".png", out, explained_png_options(ctx, stats, res.top5, c, probs));
    res.outputs.push_back(base + ".png");
    if (opt.save_raw) res.outputs.push_back(base + ".npy");
    const std::string what = class_phrase(c, hp.labels, probs);
    if (per_class)
      res.shown_more.push_back(what + " -> " + base + ".png");
    else
      res.shown = base + ".png (" + method + ", class " + what + ")";
    if (res.map.empty()) {  // the manifest's statistics: the first (most probable / chosen) class
      res.map = map;
      res.mask = mask;
      res.stats = stats;
    }
  }
  if (per_class) res.shown = method + " maps of the top " + std::to_string(classes.size()) + " classes:";
  return res;
}

}  // namespace attnmap
