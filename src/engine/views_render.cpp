// views_render.cpp - how `attnmap render` draws views (issue 25: the one view engine). Every run is a list of
// views (maps/views.hpp): the user's --views / --layers all, or the single view that --layer, --head,
// --rollout or --explain name, then the auxiliary views the strips and --all-heads need. Each image: one pass
// (compute_job_views), then its files (draw_job_views), with --scale run the maps computed first and drawn
// once the run's scale is known.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "engine/explore.hpp"
#include "engine/provenance.hpp"
#include "core/setting_ref.hpp"
#include "engine/output_plan.hpp"
#include "engine/outputs.hpp"
#include "engine/render.hpp"
#include "engine/text/score_words.hpp"
#include "engine/text/zero_shot.hpp"
#include "core/error.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "model/vit.hpp"
#include "model/classify.hpp"
#include "maps/explain.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

// "--query, --column and --received" (as references): the settings that choose an attention view's row.
std::string row_settings() {
  return setting_ref("query") + ", " + setting_ref("column") + " and " + setting_ref("received");
}

void refuse_with_views(const RenderOptions& opt) {
  const std::string views = setting_ref("views");
  const std::string what = opt.rollout ? setting_ref("rollout") + " (name the view 'rollout' in " + views + ")"
                           : opt.explain
                               ? setting_ref("explain") + " (name the method in " + views + ": chefer, gradcam, attn-grad)"
                           : opt.all_heads ? setting_ref("all_heads") + " (" + setting_ref("strip") + " heads draws every head)"
                                           : "";
  if (!what.empty()) throw Error(views + " / " + setting_ref("layers") + " cannot be combined with " + what);
}

// The single view that --layer / --head / --rollout / --explain name, as a view: "L1/h3", "rollout@L2",
// "gradcam". attn-grad's block and gradcam's come from the run's settings (--layer, --gradcam-layer).
ViewSpec single_view(const RenderContext& ctx, const RenderOptions& opt) {
  ViewSpec v;
  if (opt.explain) {
    v = *opt.explain;
    const std::string flag = setting_ref("explain") + " " + v.written;
    if (opt.rollout) throw Error(flag + " cannot be combined with " + setting_ref("rollout") + ": both name the map to draw");
    if (opt.all_heads)
      throw Error(flag + " cannot be combined with " + setting_ref("all_heads") + ": it saves the heads of an attention view");
    if (opt.query)
      throw Error(flag + " explains a class; " + row_settings() + " choose the row of an attention view");
    return v;
  }
  v.kind = opt.rollout ? ViewKind::Rollout : ViewKind::Attention;
  v.layer = ctx.layer;
  v.head = ctx.head;
  v.written = (opt.rollout ? "rollout/" : "L" + std::to_string(ctx.layer) + "/") + fusion_name(ctx.head, "h") +
              (opt.rollout ? "@L" + std::to_string(ctx.layer) : "") + (opt.query ? ":" + opt.query->written : "");
  v.query = ctx.query;
  return v;
}

// The strips' and --all-heads' views, after the user's: every block fused by ctx.head (--strip layers; with
// --rollout the rollouts through blocks 0..l for every l up to ctx.layer), every head of ctx.layer, their mean
// and ctx.head's fusion (--strip heads, --all-heads).
void add_auxiliary_views(RenderContext& ctx, const HParams& hp, bool has_head) {
  const RenderOptions& opt = *ctx.opt;
  auto add = [&](ViewSpec v) {  // one by one: they may repeat a user's view (not drawn twice as files)
    v.query = ctx.query;        // the strips follow the run's query token
    ctx.views.push_back(resolve_views({v}, hp, has_head, ctx.view_settings).front());
  };
  if (opt.strip_layers) {
    ctx.aux.layers = ctx.views.size();
    const int n = opt.rollout ? ctx.layer + 1 : hp.depth;
    for (ViewSpec v : every_layer_views(n, ctx.head)) {
      if (opt.rollout) v.kind = ViewKind::Rollout;
      add(v);
    }
    ctx.aux.layers_n = static_cast<size_t>(n);
  }
  if (opt.heads_grid || opt.all_heads) {
    ctx.aux.heads = ctx.views.size();
    for (int h = 0; h < hp.num_heads; ++h) add(every_layer_views(ctx.layer + 1, HeadSelect{HeadSelect::Fusion::Index, h}).back());
    add(every_layer_views(ctx.layer + 1, HeadSelect{}).back());
    add(every_layer_views(ctx.layer + 1, ctx.head).back());
  }
}


// --layer / --head beside named views (--views, --explain) only choose what a view name does not:
// attn-grad's block (no @L), --layers all's fusion, the strips' block and fusion. Given for none of them,
// they would be ignored: refused instead (one rule for --views and --explain).
void check_layer_and_head_apply(const RenderContext& ctx, const RenderOptions& opt) {
  const bool named = !opt.views.empty() || opt.explain;
  if (!named) return;  // --layers all alone, or the single view of --layer / --head
  const std::string what = opt.views.empty() ? setting_ref("explain") + " " + opt.explain->written : setting_ref("views");
  const bool strips = opt.heads_grid || opt.strip_layers;
  const bool attn_grad_default =
      any_user_view(ctx, [](const ResolvedView& v) { return v.spec.kind == ViewKind::AttnGrad && !v.spec.layer_given; });
  if (opt.layer && !strips && !attn_grad_default)
    throw Error(setting_ref("layer") + " does not apply to " + what + ": name the block in the view (L2/mean, attn-grad@L2, "
                "rollout@L2, chefer@L2 from block 2; gradcam takes " + setting_ref("gradcam_layer") + "); " +
                setting_ref("layer") + " chooses only "
                "attn-grad's block and the strips'");
  if (opt.head && !strips && !opt.layers_all)
    throw Error(setting_ref("head") + " does not apply to " + what + ": name the fusion in the view (L2/max, L2/h3, rollout/max; "
                "the class-specific methods average the heads); " + setting_ref("head") + " chooses only " +
                setting_ref("layers") + " all's fusion and the "
                "strips'");
}

// With --views: --query / --column / --received apply to --layers all and the strips only; without them the
// strips follow the query every attention or rollout view of --views names (or the default row when they differ).
void choose_strip_query(RenderContext& ctx, const RenderOptions& opt) {
  if (opt.query) {
    if (!opt.layers_all && !opt.strip_layers && !opt.heads_grid)
      throw Error(row_settings() + " choose the row of the single view, " + setting_ref("layers") + " all and the strips; "
                  "with " + setting_ref("views") + " name the query in each view (L5/h3:q=r7c3, rollout:k=r2c4, L3/mean:received)");
    return;
  }
  if (const std::optional<TokenQuery> q = shared_user_query(ctx)) ctx.query = *q;
}

// --discard, --class and --gradcam-layer each apply to one kind of view; without it they are refused.
void check_view_settings_apply(RenderContext& ctx, const ViTWeights& model, const RenderOptions& opt) {
  const bool named = ctx.views_given;
  if (opt.discard > 0.0 && !any_user_view(ctx, [](const ResolvedView& v) { return v.spec.kind == ViewKind::Rollout; }))
    throw Error(named ? setting_ref("discard") + " applies to the rollout views only: add rollout to " + setting_ref("views")
                      : setting_ref("discard") + " applies to " + setting_ref("rollout") + " only");
  if (any_user_view(ctx, [](const ResolvedView& v) { return v.class_specific; })) {
    ctx.classes = opt.class_spec.value_or(ClassSpec{});  // unset: top1
    with_prefix(setting_ref("class_spec"),
                [&] { check_class_spec(ctx.classes, model.num_classes(), model.hp.labels, has_text_classes(model)); });
  } else if (opt.class_spec) {
    const std::string why = class_views_unavailable(model);  // adding such a view would be refused: say why
    if (!why.empty() && has_text_classes(model))
      throw Error(setting_ref("class_spec") + " chooses the text of a class-specific view, and " + texts_not_maps(why) +
                  "; without " + setting_ref("class_spec") + " " + texts_scores_where());
    if (!why.empty())
      throw Error(setting_ref("class_spec") + " chooses the class of a class-specific view (chefer, gradcam, attn-grad), "
                  "which this model cannot draw: " + why);
    throw Error(setting_ref("class_spec") + " chooses the class of a class-specific view: add " + setting_ref("explain") +
                " chefer|gradcam|attn-grad, or "
                "chefer, gradcam or attn-grad to " + setting_ref("views"));
  }
  if (opt.gradcam_layer &&
      !any_user_view(ctx, [](const ResolvedView& v) { return v.spec.kind == ViewKind::GradCam && !v.spec.layer_given; }))
    throw Error(setting_ref("gradcam_layer") + " applies to the gradcam view without @L<layer> only: add " +
                setting_ref("explain") + " gradcam, or "
                "gradcam to " + setting_ref("views"));
}

// "Bag 98.9%": the class's label (or "class N" without labels) and its softmax probability; a SigLIP's text
// with its own sigmoid: "a dog, sigmoid 12.0%" (score_percent).
std::string class_phrase(int c, const std::vector<std::string>& labels, const std::vector<double>& probs,
                         ScoreRule rule) {
  const auto i = static_cast<size_t>(c);
  const std::string p = i >= probs.size() ? "" : (rule == ScoreRule::sigmoid ? ", " : " ") + score_percent(probs[i], rule);
  return (labels.size() == probs.size() && i < labels.size() ? labels[i] : "class " + std::to_string(c)) + p;
}

// A view that cannot be computed for this model: its name (as the user wrote it) is in the message; the
// option that asked for it is added here ("--views: 'chefer': ...", "--explain chefer: ...").
std::vector<ResolvedView> resolve_for(const std::string& flag, const std::vector<ViewSpec>& specs, const HParams& hp,
                                      bool has_head, const ViewSettings& settings) {
  try {
    return resolve_views(specs, hp, has_head, settings);
  } catch (const Error& e) {
    const std::string msg = e.what(), quoted = "'" + specs.front().written + "': ";
    if (flag == setting_ref("explain") && msg.rfind(quoted, 0) == 0)
      throw Error(flag + " " + specs.front().written + ": " + msg.substr(quoted.size()));
    throw Error(flag + ": " + msg);
  }
}

}  // namespace

std::vector<int> explore_blocks(const OutputSpec& opt, int depth) {
  std::vector<int> out;
  for (const int l : opt.explore_blocks) {
    const int b = with_prefix(setting_ref("explore_blocks"), [&] { return resolve_layer(l, depth); });
    if (std::find(out.begin(), out.end(), b) != out.end())
      throw Error(setting_ref("explore_blocks") + " names block " + std::to_string(b) + " twice");
    out.push_back(b);
  }
  return out;
}

std::optional<TokenQuery> shared_user_query(const RenderContext& ctx) {
  std::optional<TokenQuery> shared;
  for (size_t i = 0; i < ctx.user_views; ++i) {
    const ResolvedView& v = ctx.views[i];
    if (v.spec.kind != ViewKind::Attention && v.spec.kind != ViewKind::Rollout) continue;
    if (!shared) shared = v.spec.query;
    else if (describe_query(v.spec.query) != describe_query(*shared)) return std::nullopt;
  }
  return shared;
}

bool any_user_view(const RenderContext& ctx, bool (*pred)(const ResolvedView&)) {
  return std::any_of(ctx.views.begin(), ctx.views.begin() + static_cast<long>(ctx.user_views), pred);
}

void make_views_context(RenderContext& ctx, const ViTWeights& model, const RenderOptions& opt) {
  const HParams& hp = model.hp;
  const bool has_head = model.has_classes();  // a head or zero-shot texts
  ctx.views_given = !opt.views.empty() || opt.layers_all;
  if (opt.query) ctx.query = *opt.query;
  std::vector<ViewSpec> specs;
  std::string flag = setting_ref("views");
  if (ctx.views_given) {
    refuse_with_views(opt);
    specs = opt.views;
    for (const ViewSpec& v : specs)
      if (v.kind == ViewKind::Photo)
        throw Error(setting_ref("views") + ": 'photo' is a column of `attnmap figure`; a render panel shows the photo already");
  } else {
    specs = {single_view(ctx, opt)};
    using Q = TokenQuery::Kind;
    const Q q = opt.query ? opt.query->kind : Q::ClassRow;
    flag = opt.explain              ? setting_ref("explain")
           : q == Q::KeyPatch       ? setting_ref("column")
           : q == Q::Received       ? setting_ref("received")
           : q != Q::ClassRow       ? setting_ref("query")
           : opt.rollout            ? setting_ref("rollout")
                                    : setting_ref("layer") + " / " + setting_ref("head");
  }
  ctx.view_settings.discard = opt.discard;
  try {
    ctx.view_settings.gradcam_layer = resolve_layer(opt.gradcam_layer.value_or(-1), hp.depth);
  } catch (const Error& e) {
    throw Error(setting_ref("gradcam_layer") + ": " + e.what());
  }
  ctx.view_settings.attn_grad_layer = ctx.layer;  // --layer, else the config's default, else the last block
  if (!specs.empty()) ctx.views = resolve_for(flag, specs, hp, has_head, ctx.view_settings);
  if (opt.layers_all)  // every block with the chosen fusion, after --views; a block --views names already is kept once
    for (ViewSpec v : every_layer_views(hp.depth, ctx.head)) {
      v.query = ctx.query;
      ResolvedView r = resolve_views({v}, hp, has_head, ctx.view_settings).front();
      if (std::none_of(ctx.views.begin(), ctx.views.end(), [&r](const ResolvedView& u) { return u.name == r.name; }))
        ctx.views.push_back(std::move(r));
    }
  ctx.user_views = ctx.views.size();
  if (!opt.views.empty()) choose_strip_query(ctx, opt);
  check_layer_and_head_apply(ctx, opt);
  check_view_settings_apply(ctx, model, opt);
  (void)explore_blocks(opt, hp.depth);  // --explore-blocks in range, each once: a usage error before any image
  add_auxiliary_views(ctx, hp, has_head);
}

ComputedViews compute_job_views(const RenderContext& ctx, const Job& job) {
  const RenderOptions& opt = *ctx.opt;
  const std::vector<uint8_t> bytes = read_file(job.input);  // read once: hashed and decoded from the same bytes
  std::string sha = sha256_bytes(bytes.data(), bytes.size());
  return compute_photo_views(ctx, decode_image(bytes.data(), bytes.size(), job.input, opt.load), std::move(sha));
}

ComputedViews compute_photo_views(const RenderContext& ctx, Image photo, std::string input_sha256) {
  const ViTWeights& model = *ctx.model;
  const HParams& hp = model.hp;
  const RenderOptions& opt = *ctx.opt;
  ComputedViews cv;
  cv.input_sha256 = std::move(input_sha256);
  cv.notes = photo.notes;
  if (std::string w = small_image_warning(photo.width, photo.height, hp); !w.empty()) cv.notes.push_back(std::move(w));
  const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, opt.resize, hp.mean.data(), hp.std.data(),
                                   hp.crop_pct.value_or(0.875f));
  cv.box = in.box;
  std::vector<float> logits;
  cv.maps = compute_views(model, in.chw.data(), ctx.views, ctx.classes, &logits, &in.box);
  if (!logits.empty()) {
    cv.top5 = top_k_classes(logits, hp.labels, 5, model.zero_shot.rule);  // softmax, or SigLIP's sigmoid per text
    cv.probs = class_probabilities(logits, model.zero_shot.rule);
  }
  const auto first = std::find_if(cv.maps.begin(), cv.maps.end(), [](const ViewMap& m) { return m.class_index >= 0; });
  for (auto it = first; it != cv.maps.end() && it->view == first->view; ++it)  // the explained classes, in order
    cv.classes.push_back(it->class_index);
  if (!(opt.scale && opt.scale->kind == ScaleKind::Run)) cv.photo = std::move(photo);
  return cv;
}

std::map<std::string, RunScale> run_scales_over(const RenderContext& ctx,
                                                const std::vector<const ComputedViews*>& computed) {
  std::map<std::string, std::vector<const std::vector<float>*>> by_units;
  for (const ComputedViews* cv : computed)
    for (const ViewMap& m : cv->maps) by_units[ctx.views[m.view].units].push_back(&m.map);
  std::map<std::string, RunScale> out;
  for (const auto& [units, maps] : by_units) {
    RunScale r;
    r.scale = robust_scale_over(maps, units);
    r.maps = maps.size();
    r.dim = maps_peaking_below(maps, r.scale, kDimPeakFraction);
    for (const auto* m : maps)
      for (float v : *m) {
        if (!std::isfinite(v)) continue;
        ++r.values;
        if (v > r.scale.vmax) ++r.above;
        r.data_max = std::max(r.data_max, static_cast<double>(v));
      }
    out.emplace(units, r);
  }
  return out;
}

namespace {

// What a class is called after a view's name: ", class " ("chefer, class Coat 63.2%"); CLIP's texts are its
// classes: ", text: " ("chefer, text: a dog 84.6%", the softmax over the texts given; a SigLIP's "chefer, text:
// a dog, sigmoid 12.0%", class_phrase).
std::string class_word(const RenderContext& ctx) { return ctx.model->zero_shot.present() ? ", text: " : ", class "; }
// How the model's probabilities were computed (a classifier head: softmax; texts: ZeroShotHead::rule).
ScoreRule rule_of(const RenderContext& ctx) { return ctx.model->zero_shot.rule; }
// class_word + class_phrase: ", class Coat 63.2%"; without class names ", class 3 24.9%" (class_phrase's own
// "class N", not "class class 3").
std::string class_suffix(const RenderContext& ctx, const ComputedViews& cv, int c) {
  const bool named = ctx.model->hp.labels.size() == cv.probs.size();
  return (named ? class_word(ctx) : std::string(", ")) + class_phrase(c, ctx.model->hp.labels, cv.probs, rule_of(ctx));
}

// A map's label in figures and notes: view_label ("block 3, mean of heads"); for a class-specific view with
// its class: "Grad-CAM, block 3, class Coat 63.2%".
std::string map_label(const RenderContext& ctx, const ComputedViews& cv, const ViewMap& m) {
  const ResolvedView& v = ctx.views[m.view];
  const int base = ctx.opt->block_base;
  if (m.class_index < 0) return view_label(v, base);
  return view_label(v, base) + class_suffix(ctx, cv, m.class_index);
}

// " (flat)" after a figure's label of a map whose max / mean is below kFlatMaxOverMean (1.25), else "".
std::string flat_mark(const std::vector<float>& map) { return is_flat_contrast(peak_to_mean(map)) ? " (flat)" : ""; }

// tEXt `attnmap:stats` of one map's PNG: its statistics, the image's top-5, with --views the file's view (and
// block), and for a class-specific view the class it explains with its probability.
// With a legend, `photo_px`: the photo's [width, height] at the top left of the PNG (the legend under it).
std::string stats_text(const RenderContext& ctx, const ComputedViews& cv, const ViewMap& m,
                       const std::optional<std::array<int, 2>>& photo_px) {
  const HParams& hp = ctx.model->hp;
  nlohmann::ordered_json st;
  put_image_stats(st, map_statistics(m.map, hp.grid_h, hp.grid_w), cv.top5);
  const ResolvedView& v = ctx.views[m.view];
  if (ctx.views_given) {
    st["view"] = v.name;
    if (v.spec.kind == ViewKind::GradCam || v.spec.kind == ViewKind::AttnGrad) st["view_block"] = v.spec.layer;
  }
  if (m.marked >= 0) st["query_patch"] = {m.marked / hp.grid_w, m.marked % hp.grid_w};  // [row, col]: a pixel query's, placed
  if (m.class_index >= 0) {
    const auto c = static_cast<size_t>(m.class_index);
    st["explained_class"] = {
        {"index", m.class_index},
        {"label", c < hp.labels.size() ? nlohmann::ordered_json(hp.labels[c]) : nlohmann::ordered_json(nullptr)},
        {"probability", c < cv.probs.size() ? nlohmann::ordered_json(cv.probs[c]) : nlohmann::ordered_json(nullptr)}};
  }
  if (photo_px) st["photo_px"] = {(*photo_px)[0], (*photo_px)[1]};  // last: the legend strip is under it
  return st.dump(-1, ' ', true, nlohmann::ordered_json::error_handler_t::replace);
}

// The maps of views [at, at + n): the auxiliary views have one map each (they are class-agnostic).
std::vector<std::vector<float>> maps_of(const ComputedViews& cv, size_t at, size_t n) {
  std::vector<std::vector<float>> out;
  for (const ViewMap& m : cv.maps)
    if (m.view >= at && m.view < at + n) out.push_back(m.map);
  return out;
}

std::vector<float> concat(const std::vector<std::vector<float>>& maps) {
  std::vector<float> out;
  for (const auto& m : maps) out.insert(out.end(), m.begin(), m.end());
  return out;
}

// One map's files from the plan, in memory: with --save-raw its .npy (with --all-heads every head of the block,
// (H, grid_h, grid_w)) and sidecar, then its PNG; their paths (not the sidecar's) in out->result.outputs.
void view_files(const RenderContext& ctx, const ComputedViews& cv, const Image& overlay, const ViewMap& m,
                ImageOutputs* out, const std::optional<std::array<int, 2>>& photo_px) {
  const HParams& hp = ctx.model->hp;
  MapOutputs data{&m.map, {hp.grid_h, hp.grid_w}, &overlay, stats_text(ctx, cv, m, photo_px)};
  std::vector<float> heads;
  if (ctx.opt->all_heads) {
    heads = concat(maps_of(cv, ctx.aux.heads, static_cast<size_t>(hp.num_heads)));
    data.raw = &heads;
    data.raw_shape = {hp.num_heads, hp.grid_h, hp.grid_w};
  }
  for (OutputFile& f : map_file_outputs(ctx, out->plan, m.view, m.class_index, data)) {
    if (f.file.kind != OutputKind::Sidecar) out->result.outputs.push_back(f.file.path);
    out->files.push_back(std::move(f));
  }
}

// A figure drawn in memory as one of the image's files.
OutputFile figure_file(FigureFile&& f) {
  std::string ext = figure_extension(f.format);
  return OutputFile{PlannedFile{std::move(f.path), OutputKind::Figure, 0, -1}, ext.substr(1), std::move(f.bytes),
                    std::move(f.record)};
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

// The panel's colour bars: one per distinct scale of its rows (rows of one unit share one), each with the
// maps drawn on it.
std::vector<DrawnBar> panel_bars(const std::vector<const ViewMap*>& rows, const std::vector<Scale>& scales) {
  std::vector<Scale> distinct;
  std::vector<std::vector<const std::vector<float>*>> maps;
  for (size_t i = 0; i < rows.size(); ++i) {
    size_t j = 0;
    while (j < distinct.size() && !(distinct[j].units == scales[i].units && distinct[j].vmin == scales[i].vmin &&
                                    distinct[j].vmax == scales[i].vmax))
      ++j;
    if (j == distinct.size()) {
      distinct.push_back(scales[i]);
      maps.emplace_back();
    }
    maps[j].push_back(&rows[i]->map);
  }
  std::vector<DrawnBar> out;
  for (size_t j = 0; j < distinct.size(); ++j) out.push_back(drawn_bar(maps[j], distinct[j]));
  return out;
}

// The strips from the auxiliary views' maps; `bars` gets their colour bars.
std::vector<std::string> write_view_strips(const RenderContext& ctx, const Job& job, const Image& photo,
                                           const PhotoBox& box, const ComputedViews& cv, const std::string& title,
                                           std::vector<DrawnBar>* bars) {
  const HParams& hp = ctx.model->hp;
  std::vector<std::string> out;
  int marked = -1;  // the strips' query patch (every auxiliary view reads the same token)
  for (const ViewMap& m : cv.maps)
    if (m.view >= ctx.user_views) marked = m.marked;
  const std::string asked = describe_query(ctx.query);
  const std::string strip_title = asked.empty() || ctx.opt->title ? title : title + " \u2014 " + asked;
  if (ctx.opt->strip_layers)
    out = write_layers(ctx, job, photo, box, maps_of(cv, ctx.aux.layers, ctx.aux.layers_n), strip_title, marked, bars);
  if (ctx.opt->heads_grid) {
    const auto H = static_cast<size_t>(hp.num_heads);
    const std::vector<std::vector<float>> heads = maps_of(cv, ctx.aux.heads, H + 2);  // H heads, mean, fused
    const std::vector<std::vector<float>> head_maps(heads.begin(), heads.begin() + static_cast<long>(H));
    const auto w = write_heads(ctx, job, photo, box, heads[H], head_maps, heads[H + 1], strip_title, marked, bars);
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

// The terminal lines of one image: one map -> "INPUT -> NAME.png" (a class-specific one with its class:
// "NAME.png (chefer, class Bag 98.9%)"); one class-specific view's classes -> "gradcam maps of the top 2
// classes:" and a line per class; else "3 maps:" and a line per map.
void set_shown_lines(const RenderContext& ctx, const ComputedViews& cv, const std::vector<const ViewMap*>& rows,
                     const std::vector<std::string>& pngs, RenderResult* res) {
  const auto& labels = ctx.model->hp.labels;
  if (rows.size() == 1) {
    if (rows[0]->class_index >= 0)
      res->shown = pngs[0] + " (" + ctx.views[rows[0]->view].name + class_suffix(ctx, cv, rows[0]->class_index) + ")";
    return;
  }
  const bool one_view = std::all_of(rows.begin(), rows.end(), [&](const ViewMap* m) { return m->view == rows[0]->view; });
  if (one_view && rows[0]->class_index >= 0) {
    const char* what = ctx.model->zero_shot.present() ? " texts:" : " classes:";
    res->shown = ctx.views[rows[0]->view].name + " maps of the top " + std::to_string(rows.size()) + what;
    for (size_t i = 0; i < rows.size(); ++i)
      res->shown_more.push_back(class_phrase(rows[i]->class_index, labels, cv.probs, rule_of(ctx)) + " -> " + pngs[i]);
    return;
  }
  res->shown = std::to_string(rows.size()) + " maps:";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResolvedView& v = ctx.views[rows[i]->view];
    res->shown_more.push_back(
        (rows[i]->class_index < 0 ? v.name
                                  : v.name + class_suffix(ctx, cv, rows[i]->class_index)) +
        " -> " + pngs[i]);
  }
}

}  // namespace

ImageOutputs image_outputs(const RenderContext& run_ctx, const Job& job, const ComputedViews& cv, const Image* given) {
  RenderContext ctx = run_ctx;  // this image's record: the run's with the input's fingerprint
  ctx.provenance = image_provenance(run_ctx.provenance, cv.input_sha256);
  std::vector<FigureFile> drawn_figures;
  ctx.figures_in_memory = &drawn_figures;
  const HParams& hp = ctx.model->hp;
  const RenderOptions& opt = *ctx.opt;
  ImageOutputs out;
  out.record = ctx.provenance;
  RenderResult& res = out.result;
  res.notes = cv.notes;
  res.top5 = cv.top5;
  std::optional<Image> reread;  // --scale run kept no photo: decoded again; otherwise the one computed from
  if (!cv.photo && !given) {
    const std::vector<uint8_t> bytes = read_file(job.input);
    if (sha256_bytes(bytes.data(), bytes.size()) != cv.input_sha256)
      throw Error(job.input + ": the file changed while the run computed its maps; nothing written for it");
    reread = decode_image(bytes.data(), bytes.size(), job.input, opt.load);
  }
  const Image& photo = cv.photo ? *cv.photo : given ? *given : *reread;
  int bx = 0, by = 0, bw = 0, bh = 0;
  box_pixels(cv.box, photo.width, photo.height, &bx, &by, &bw, &bh);
  out.plan = plan_outputs(ctx, job, &cv.classes);
  const PhotoBox box{bx, by, bw, bh};
  const bool query_rows = opt.heads_grid || opt.strip_layers ||
                          any_user_view(ctx, [](const ResolvedView& v) { return reads_query_rows(v); });
  const std::string title = opt.title ? *opt.title : figure_title(job, hp, res.top5, query_rows, ctx.model->num_classes(),
                                                                 ctx.model->zero_shot.present(), rule_of(ctx));
  std::vector<const ViewMap*> rows;
  for (const ViewMap& m : cv.maps)
    if (m.view < ctx.user_views) rows.push_back(&m);
  std::vector<DrawnBar> bars;  // every colour bar of the image's figures and overlays: the run's ClipTally
  std::vector<std::string> figures = write_view_strips(ctx, job, photo, box, cv, title, &bars);
  out.explorer_at = figures.size();  // the explorer is the render's to write (draw_job_views)
  if (opt.panel) {
    const std::vector<Scale> scales = panel_scales(ctx, rows);
    std::vector<PanelRow> panel;
    for (size_t i = 0; i < rows.size(); ++i)
      panel.push_back(PanelRow{map_label(ctx, cv, *rows[i]) + flat_mark(rows[i]->map), GridMap{rows[i]->map, hp.grid_w, hp.grid_h, rows[i]->marked}, scales[i]});
    const std::vector<DrawnBar> drawn = panel_bars(rows, scales);
    bars.insert(bars.end(), drawn.begin(), drawn.end());
    const auto w = write_panel(job.out_base + ".panel", title, photo, box, panel, style_of(ctx), figure_options(ctx, drawn));
    figures.insert(figures.end(), w.begin(), w.end());
  }
  std::vector<std::string> pngs, shown;
  for (const ViewMap* m : rows) {
    bool flat = false;
    std::vector<uint8_t> mask;
    const std::string& units = ctx.views[m->view].units;
    Image overlay = draw_view(photo, bx, by, bw, bh, m->map, ctx, &flat, &mask, units, m->marked);
    if (flat) res.notes.push_back("the " + map_label(ctx, cv, *m) + " map is constant; drawn flat (no contrast)");
    const MapStats st = map_statistics(m->map, hp.grid_h, hp.grid_w);
    if (!opt.threshold) bars.push_back(drawn_bar({&m->map}, single_scale(ctx, m->map, units)));
    if (draws_legend(opt)) {  // the strip under the photo: the scale NAME.png is drawn on, and the contrast
      const OverlayLegend lg{single_scale(ctx, m->map, units), static_cast<double>(st.max), st.max_over_mean, st.flat()};
      overlay = add_legend(overlay, lg, ctx.cmap);
    }
    view_files(ctx, cv, overlay, *m, &out, draws_legend(opt) ? std::optional<std::array<int, 2>>({photo.width, photo.height})
                                                             : std::nullopt);
    pngs.push_back(res.outputs.back());
    // The terminal names a flat map (max / mean below 1.25) after its file.
    shown.push_back(pngs.back() + (st.flat() ? " (" + contrast_phrase(st.max, st.max_over_mean, true) + ")" : ""));
    if (res.map.empty()) {  // the manifest's statistics: the first view's (most probable class's) map
      res.map = m->map;
      res.mask = mask;
    }
  }
  res.stats = map_statistics(res.map, hp.grid_h, hp.grid_w);
  if (ctx.clip_tally) ctx.clip_tally->add_image(bars);
  set_shown_lines(ctx, cv, rows, shown, &res);
  if (res.shown.empty() && shown.size() == 1 && shown[0] != pngs[0]) res.shown = shown[0];
  // The overlays first (the first is what the terminal line names), then the figures.
  std::stable_partition(res.outputs.begin(), res.outputs.end(), [](const std::string& p) {
    return p.size() > 4 && p.compare(p.size() - 4, 4, ".png") == 0;
  });
  out.explorer_at += res.outputs.size();
  res.outputs.insert(res.outputs.end(), figures.begin(), figures.end());
  // The figures first in writing order, the overlays last: a run interrupted in between leaves no NAME.png
  // that --skip-existing would take for a finished image.
  std::vector<OutputFile> files;
  for (FigureFile& f : drawn_figures) files.push_back(figure_file(std::move(f)));
  for (OutputFile& f : out.files) files.push_back(std::move(f));
  out.files = std::move(files);
  return out;
}

}  // namespace attnmap
