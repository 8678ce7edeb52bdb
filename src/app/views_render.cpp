// views_render.cpp - `attnmap render --views LIST` / `--layers all` (issue 17): several views of each image
// from one forward pass, each view's files named after it, panels with a row per view, strips from the same
// pass, and --scale run (the maps computed first, drawn after the run's scale is known).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "app/provenance.hpp"
#include "app/render.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "model/vit.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

void refuse_with_views(const RenderOptions& opt) {
  const char* what = opt.rollout ? "--rollout (name the view 'rollout' in --views)"
                     : !opt.explain.empty()
                         ? "--explain (name the method in --views: chefer, gradcam, attn-grad)"
                     : opt.all_heads ? "--all-heads (--strip heads draws every head)"
                                     : nullptr;
  if (what) throw Error(std::string("--views / --layers cannot be combined with ") + what);
}

// The strips' views, after the user's: every block fused by ctx.head (--strip layers), every head of
// ctx.layer and their mean (--strip heads).
std::vector<ViewSpec> strip_views(const RenderContext& ctx, const HParams& hp) {
  std::vector<ViewSpec> out;
  if (ctx.opt->strip_layers) out = every_layer_views(hp.depth, ctx.head);
  if (ctx.opt->heads_grid) {
    for (int h = 0; h < hp.num_heads; ++h) {
      HeadSelect one;
      one.fusion = HeadSelect::Fusion::Index;
      one.index = h;
      out.push_back(every_layer_views(ctx.layer + 1, one).back());
    }
    out.push_back(every_layer_views(ctx.layer + 1, HeadSelect{}).back());
    out.push_back(every_layer_views(ctx.layer + 1, ctx.head).back());
  }
  return out;
}

// --layer / --head with --views only choose what a view name does not: attn-grad's block (no @L), --layers all's
// fusion, the strips' block and fusion. Given for none of them, they would be ignored: refused instead.
void check_layer_and_head_apply(const RenderContext& ctx, const RenderOptions& opt) {
  if (opt.views.empty()) return;  // --layers all alone, or the single view run the views way
  const bool strips = opt.heads_grid || opt.strip_layers;
  const bool attn_grad_default = std::any_of(ctx.views.begin(), ctx.views.end(), [](const ResolvedView& v) {
    return v.spec.kind == ViewKind::AttnGrad && !v.spec.layer_given;
  });
  if (opt.layer && !strips && !attn_grad_default)
    throw Error("--layer does not apply to --views: name the block in the view (L2/mean, attn-grad@L2; rollout runs "
                "through every block); --layer chooses only attn-grad's block and the strips'");
  if (opt.head && !strips && !opt.layers_all)
    throw Error("--head does not apply to --views: name the fusion in the view (L2/max, L2/h3, rollout/max); --head "
                "chooses only --layers all's fusion and the strips'");
}

bool any_class_specific(const std::vector<ResolvedView>& views) {
  return std::any_of(views.begin(), views.end(), [](const ResolvedView& v) { return v.class_specific; });
}

// A class-specific view's per-class file names: with --class topK, K >= 2.
bool per_class_files(const RenderContext& ctx) {
  return ctx.classes.kind == ClassSpec::Kind::TopK && ctx.classes.k > 1;
}

std::string view_base(const RenderContext& ctx, const Job& job, const ResolvedView& v) {
  return ctx.user_views == 1 ? job.out_base : job.out_base + "." + v.tag;
}

std::string map_base(const RenderContext& ctx, const Job& job, const ViewMap& m) {
  const ResolvedView& v = ctx.views[m.view];
  std::string base = view_base(ctx, job, v);
  if (v.class_specific && per_class_files(ctx))
    base += ".class-" + class_file_label(m.class_index, ctx.model->hp.labels);
  return base;
}

}  // namespace

namespace {

// --scale run without --views: the single view as a view name, so that it runs the views way (computed
// first, drawn after the run's scale is known); its files keep the single view's names.
std::string single_view_name(const RenderContext& ctx, const HParams& hp, const RenderOptions& opt) {
  if (!opt.explain.empty()) return opt.explain;
  const std::string fusion = fusion_name(ctx.head, "h");
  if (opt.rollout && ctx.layer == hp.depth - 1)
    return ctx.head.fusion == HeadSelect::Fusion::Mean ? "rollout" : "rollout/" + fusion;
  if (opt.rollout)
    throw Error("--scale run with --rollout through blocks 0.." + std::to_string(ctx.layer) +
                ": only the rollout through every block is a view (drop --layer, or use --scale figure)");
  return "L" + std::to_string(ctx.layer) + "/" + fusion;
}

}  // namespace

void make_views_context(RenderContext& ctx, const ViTWeights& model, const RenderOptions& opt) {
  const bool run_scale = opt.scale && opt.scale->kind == ScaleKind::Run;
  if (opt.views.empty() && !opt.layers_all && !run_scale) return;
  const HParams& hp = model.hp;
  std::vector<ViewSpec> specs;
  if (opt.views.empty() && !opt.layers_all) {
    if (opt.all_heads) throw Error("--scale run cannot be combined with --all-heads");
    specs = parse_views(single_view_name(ctx, hp, opt));
  } else {
    refuse_with_views(opt);
  }
  if (!opt.views.empty()) specs = parse_views(opt.views);
  for (const ViewSpec& v : specs)
    if (v.kind == ViewKind::Photo)
      throw Error("--views: 'photo' is a column of `attnmap figure`; a render panel shows the photo already");
  ctx.view_settings.discard = opt.discard;
  ctx.view_settings.gradcam_layer = opt.gradcam_layer.value_or(-1);
  ctx.view_settings.attn_grad_layer =
      ctx.layer;  // as --explain attn-grad: --layer, else the config's default
  const bool has_head = model.head.present();
  if (!specs.empty()) ctx.views = resolve_views(specs, hp, has_head, ctx.view_settings);
  if (opt.layers_all)  // every block with the chosen fusion, after --views; a block --views names already is
                       // kept once
    for (const ViewSpec& v : every_layer_views(hp.depth, ctx.head)) {
      ResolvedView r = resolve_views({v}, hp, has_head, ctx.view_settings).front();
      if (std::none_of(ctx.views.begin(), ctx.views.end(),
                       [&r](const ResolvedView& u) { return u.name == r.name; }))
        ctx.views.push_back(std::move(r));
    }
  ctx.user_views = ctx.views.size();
  check_layer_and_head_apply(ctx, opt);
  if (opt.discard > 0.0 && std::none_of(ctx.views.begin(), ctx.views.end(), [](const ResolvedView& v) {
        return v.spec.kind == ViewKind::Rollout;
      }))
    throw Error("--discard applies to the rollout views only: add rollout to --views");
  if (any_class_specific(ctx.views)) {
    ctx.classes = parse_class_spec(opt.class_spec.value_or("top1"));
    check_class_spec(ctx.classes, model.head.out, hp.labels);
  } else if (opt.class_spec) {
    throw Error(
        "--class chooses the class of a class-specific view: add chefer, gradcam or attn-grad to --views");
  }
  if (opt.gradcam_layer && std::none_of(ctx.views.begin(), ctx.views.end(), [](const ResolvedView& v) {
        return v.spec.kind == ViewKind::GradCam && !v.spec.layer_given;
      }))
    throw Error("--gradcam-layer applies to the gradcam view without @L<layer> only: add gradcam to --views");
  for (const ViewSpec& v :
       strip_views(ctx, hp))  // one by one: they may repeat a view (not drawn twice as files)
    ctx.views.push_back(resolve_views({v}, hp, has_head, ctx.view_settings).front());
}

JobFiles job_files(const RenderContext& ctx, const Job& job) {
  JobFiles f;
  const RenderOptions& opt = *ctx.opt;
  if (opt.heads_grid) f.sheet = job.out_base + ".heads.png";
  if (ctx.views.empty()) {
    f.overlays.push_back(job.out_base + ".png");
    if (opt.save_raw) f.npys.push_back(job.out_base + ".npy");
    return f;
  }
  for (size_t i = 0; i < ctx.user_views; ++i) {
    if (ctx.views[i].class_specific && per_class_files(ctx)) {  // named once the classes are known
      f.names_unknown = true;
      continue;
    }
    f.overlays.push_back(view_base(ctx, job, ctx.views[i]) + ".png");
    if (opt.save_raw) f.npys.push_back(view_base(ctx, job, ctx.views[i]) + ".npy");
  }
  return f;
}

ComputedViews compute_job_views(const RenderContext& ctx, const Job& job) {
  const ViTWeights& model = *ctx.model;
  const HParams& hp = model.hp;
  const RenderOptions& opt = *ctx.opt;
  ComputedViews cv;
  Image photo = load_image(job.input, opt.load);
  cv.notes = photo.notes;
  const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, opt.resize, hp.mean.data(), hp.std.data(),
                                   hp.crop_pct.value_or(0.875f));
  cv.box = in.box;
  std::vector<float> logits;
  cv.maps = compute_views(model, in.chw.data(), ctx.views, ctx.view_settings, ctx.classes, &logits);
  if (!logits.empty()) cv.top5 = top_k_classes(logits, hp.labels, 5);
  if (!(opt.scale && opt.scale->kind == ScaleKind::Run)) cv.photo = std::move(photo);
  return cv;
}

void add_to_run_scales(const RenderContext& ctx, const ComputedViews& cv,
                       std::map<std::string, Scale>* scales) {
  for (const ViewMap& m : cv.maps) {
    const std::string& units = ctx.views[m.view].units;
    const Scale s = scale_over({&m.map}, units);
    auto it = scales->find(units);
    if (it == scales->end()) {
      scales->emplace(units, s);
    } else {
      it->second.vmin = std::min(it->second.vmin, s.vmin);
      it->second.vmax = std::max(it->second.vmax, s.vmax);
    }
  }
}

namespace {

// A view's row label: "L3/mean", "chefer, class Coat".
std::string map_label(const RenderContext& ctx, const ViewMap& m) {
  const ResolvedView& v = ctx.views[m.view];
  if (m.class_index < 0) return v.name;
  const bool default_block =
      (v.spec.kind == ViewKind::GradCam || v.spec.kind == ViewKind::AttnGrad) && !v.spec.layer_given;
  const std::string name = default_block ? v.name + "@L" + std::to_string(v.spec.layer) : v.name;
  const auto& labels = ctx.model->hp.labels;
  const std::string cls = static_cast<size_t>(m.class_index) < labels.size()
                              ? labels[static_cast<size_t>(m.class_index)]
                              : std::to_string(m.class_index);
  return name + ", class " + cls;
}

// Per-class files must not replace a file attnmap did not write (the batch checked the names it knew).
void check_per_class_outputs(const RenderContext& ctx, const Job& job, const ComputedViews& cv) {
  if (!per_class_files(ctx)) return;
  for (const ViewMap& m : cv.maps) {
    if (m.view >= ctx.user_views || !ctx.views[m.view].class_specific) continue;
    const std::string png = map_base(ctx, job, m) + ".png";
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(png, ec);
    if (fs::exists(st) && (!fs::is_regular_file(st) || !written_by_attnmap(png)))
      throw Error("output " + png +
                  " already exists and was not written by attnmap (or is not a regular file); "
                  "it is left alone: choose another --out or move it away");
  }
}

// Writes one map's overlay PNG (with the run's record) and, with --save-raw, its .npy and sidecar.
void write_view_files(const RenderContext& ctx, const std::string& base, const Image& overlay,
                      const ViewMap& m, RenderResult* res) {
  const HParams& hp = ctx.model->hp;
  const std::vector<float>& map = m.map;
  std::vector<PngText> text;
  if (!ctx.provenance.empty()) {  // the run's record; this file's view and class go with its statistics
    text.push_back({kProvenanceKeyword, ctx.provenance});
    nlohmann::ordered_json st;
    put_image_stats(st, map_statistics(map, hp.grid_h, hp.grid_w), res->top5);
    const ResolvedView& v = ctx.views[m.view];
    st["view"] = v.name;
    if (v.spec.kind == ViewKind::GradCam || v.spec.kind == ViewKind::AttnGrad)
      st["view_block"] = v.spec.layer;
    if (m.class_index >= 0) {
      const auto& labels = hp.labels;
      st["explained_class"] = {
          {"index", m.class_index},
          {"label", static_cast<size_t>(m.class_index) < labels.size()
                        ? nlohmann::ordered_json(labels[static_cast<size_t>(m.class_index)])
                        : nlohmann::ordered_json(nullptr)}};
    }
    text.push_back({kStatsKeyword, st.dump(-1, ' ', true, nlohmann::ordered_json::error_handler_t::replace)});
  }
  if (ctx.opt->save_raw) {
    const std::string npy = base + ".npy", side = npy_sidecar_path(npy);
    if (!ctx.provenance.empty()) ::unlink(side.c_str());
    write_npy(npy, map, {hp.grid_h, hp.grid_w});
    if (!ctx.provenance.empty()) {
      const std::string line = ctx.provenance + "\n";
      write_file_atomic(side, std::vector<uint8_t>(line.begin(), line.end()));
    }
    res->outputs.push_back(npy);
  }
  PngOptions po;
  po.dpi = ctx.opt->dpi.value_or(0.0);
  po.text = text;
  write_png(base + ".png", overlay, po);
  res->outputs.push_back(base + ".png");
}

// The panel's scale of each row: --scale map -> its own; figure (default) -> shared by the rows of one unit;
// run -> the run's; fixed -> the bounds.
std::vector<Scale> panel_scales(const RenderContext& ctx, const std::vector<const ViewMap*>& rows) {
  std::map<std::string, std::vector<const std::vector<float>*>> by_units;
  for (const ViewMap* m : rows) by_units[ctx.views[m->view].units].push_back(&m->map);
  const bool own = ctx.opt->scale && ctx.opt->scale->kind == ScaleKind::Map;
  std::vector<Scale> out;
  for (const ViewMap* m : rows) {
    const std::string& units = ctx.views[m->view].units;
    out.push_back(own ? single_scale(ctx, m->map, units) : figure_scale(ctx, by_units[units], units));
  }
  return out;
}

// The strips from the strip views' maps (after the user's views in ctx.views).
std::vector<std::string> write_view_strips(const RenderContext& ctx, const Job& job, const Image& photo,
                                           const PhotoBox& box, const ComputedViews& cv,
                                           const std::string& title) {
  const HParams& hp = ctx.model->hp;
  std::vector<const std::vector<float>*> extra;
  for (const ViewMap& m : cv.maps)
    if (m.view >= ctx.user_views) extra.push_back(&m.map);
  std::vector<std::string> out;
  size_t at = 0;
  if (ctx.opt->strip_layers) {
    std::vector<std::vector<float>> layer_maps;
    for (int l = 0; l < hp.depth; ++l) layer_maps.push_back(*extra[at++]);
    out = write_layers(ctx, job, photo, box, layer_maps, title);
  }
  if (ctx.opt->heads_grid) {
    std::vector<std::vector<float>> head_maps;
    for (int h = 0; h < hp.num_heads; ++h) head_maps.push_back(*extra[at++]);
    const std::vector<float>& mean_map = *extra[at++];
    const std::vector<float>& fused = *extra[at++];
    const auto w = write_heads(ctx, job, photo, box, mean_map, head_maps, fused, title);
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

}  // namespace

RenderResult draw_job_views(const RenderContext& ctx, const Job& job, const ComputedViews& cv) {
  const HParams& hp = ctx.model->hp;
  const RenderOptions& opt = *ctx.opt;
  RenderResult res;
  res.notes = cv.notes;
  res.top5 = cv.top5;
  std::optional<Image> reread;  // --scale run kept no photo: decoded again; otherwise the one computed from
  if (!cv.photo) reread = load_image(job.input, opt.load);
  const Image& photo = cv.photo ? *cv.photo : *reread;
  int bx = 0, by = 0, bw = 0, bh = 0;
  box_pixels(cv.box, photo.width, photo.height, &bx, &by, &bw, &bh);
  check_per_class_outputs(ctx, job, cv);
  fs::create_directories(fs::path(job.out_base + ".png").parent_path());
  std::vector<const ViewMap*> rows;
  for (const ViewMap& m : cv.maps) {
    if (m.view >= ctx.user_views) continue;
    rows.push_back(&m);
    bool flat = false;
    std::vector<uint8_t> mask;
    const Image out = draw_view(photo, bx, by, bw, bh, m.map, ctx, &flat, &mask, ctx.views[m.view].units);
    if (flat) res.notes.push_back("the " + map_label(ctx, m) + " map is constant; drawn flat (no contrast)");
    write_view_files(ctx, map_base(ctx, job, m), out, m, &res);
    res.shown_more.push_back(map_label(ctx, m) + " -> " + map_base(ctx, job, m) + ".png");
    if (res.map.empty()) {  // the manifest's statistics: the first view's (most probable class's) map
      res.map = m.map;
      res.mask = mask;
    }
  }
  res.stats = map_statistics(res.map, hp.grid_h, hp.grid_w);
  if (res.shown_more.size() == 1) {
    res.shown_more.clear();  // one map: the usual "INPUT -> NAME.png"
  } else {
    res.shown = std::to_string(res.shown_more.size()) + " maps:";
  }
  const PhotoBox box{bx, by, bw, bh};
  const std::string title = figure_title(job, hp, res.top5);
  std::vector<std::string> figures = write_view_strips(ctx, job, photo, box, cv, title);
  if (opt.panel) {
    const std::vector<Scale> scales = panel_scales(ctx, rows);
    std::vector<PanelRow> panel;
    for (size_t i = 0; i < rows.size(); ++i)
      panel.push_back(
          PanelRow{map_label(ctx, *rows[i]), GridMap{rows[i]->map, hp.grid_w, hp.grid_h}, scales[i]});
    const auto w =
        write_panel(job.out_base + ".panel", title, photo, box, panel, style_of(ctx), figure_options(ctx));
    figures.insert(figures.end(), w.begin(), w.end());
  }
  // The overlays first (the first is what the terminal line names), then the figures.
  std::stable_partition(res.outputs.begin(), res.outputs.end(), [](const std::string& p) {
    return p.size() > 4 && p.compare(p.size() - 4, 4, ".png") == 0;
  });
  res.outputs.insert(res.outputs.end(), figures.begin(), figures.end());
  return res;
}

}  // namespace attnmap
