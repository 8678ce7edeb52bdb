#include "engine/render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include "core/names.hpp"
#include "core/setting_ref.hpp"
#include "engine/provenance.hpp"
#include "engine/text/score_words.hpp"
#include "model/cait.hpp"
#include "model/classify.hpp"
#include "draw/colormap.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "model/vit.hpp"

namespace attnmap {

namespace fs = std::filesystem;

int requested_layer(const HParams& hp, const ViewRequest& opt) {
  return opt.layer.value_or(opt.rollout ? -1 : hp.default_layer.value_or(-1));
}

HeadSelect requested_head(const HParams& hp, const ViewRequest& opt) {
  if (opt.head) return *opt.head;
  return opt.rollout ? HeadSelect{} : parse_head(hp.default_head.value_or("mean"));
}

void apply_model_flags(const std::string& act, const std::string& pool, ModelOverrides& ov) {
  try {
    if (!act.empty()) ov.act = parse_activation(act);
  } catch (const Error& e) {
    throw Error(setting_ref("act") + ": " + e.what());
  }
  try {
    if (!pool.empty()) ov.pool = parse_pool(pool);
  } catch (const Error& e) {
    throw Error(setting_ref("pool") + ": " + e.what());
  }
}

SelectedView select_view(const HParams& hp, const ViewRequest& opt) {
  // A bad value from the weights' config (not from the command line) says so, or the user looks for an option.
  auto from_config = [&hp](const char* key, const Error& e) {
    const auto it = hp.source.find(key);
    return Error(std::string("the weights' config ") + key + (it == hp.source.end() ? "" : " (" + it->second + ")") +
                 ": " + e.what() + " (pass " + setting_ref("layer") + " / " + setting_ref("head") + " to choose another view)");
  };
  SelectedView v;
  try {
    v.layer = resolve_layer(requested_layer(hp, opt), hp.depth);
  } catch (const Error& e) {
    if (opt.layer) throw Error(setting_ref("layer") + ": " + e.what());
    if (opt.rollout || !hp.default_layer) throw;
    throw from_config("default_layer", e);
  }
  try {
    v.head = requested_head(hp, opt);
    const std::vector<float> probe(static_cast<size_t>(hp.num_heads), 0.0f);
    fuse_heads(probe.data(), hp.num_heads, 1, v.head);  // throws for a head index out of range
  } catch (const Error& e) {
    const std::string m = e.what();
    if (opt.head) throw Error(m.rfind(setting_ref("head"), 0) == 0 ? m : setting_ref("head") + ": " + m);
    if (opt.rollout || !hp.default_head) throw;
    throw from_config("default_head", e);
  }
  return v;
}

RenderContext make_render_context(const ViTWeights& model, const RenderOptions& opt) {
  const HParams& hp = model.hp;
  RenderContext ctx;
  ctx.model = &model;
  ctx.opt = &opt;
  const SelectedView view = select_view(hp, opt);
  ctx.layer = view.layer;
  ctx.head = view.head;
  ctx.cmap = opt.colormap.table;
  if (opt.heads_grid || opt.panel || opt.strip_layers) {  // before any image: a missing font is one usage error
    ctx.font_family = figure_font();
    if (const char* env = std::getenv("ATTNMAP_FONT"); env && *env) ctx.font_file = env;
  } else if (draws_legend(opt)) {  // NAME.png's legend is text too
    try {
      ctx.font_family = figure_font();
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (or pass " + setting_ref("no_legend") + ": overlays without the legend need no font)");
    }
    if (const char* env = std::getenv("ATTNMAP_FONT"); env && *env) ctx.font_file = env;
  }
  make_views_context(ctx, model, opt);
  ctx.clip_tally = std::make_shared<ClipTally>();
  return ctx;
}

DrawnBar drawn_bar(const std::vector<const std::vector<float>*>& maps, const Scale& s) {
  DrawnBar b{s, clip_stats(maps, s)};
  b.scale.clip_max = b.clip.above > 0 && !s.flat();
  return b;
}

void ClipTally::add_image(const std::vector<DrawnBar>& bars) {
  std::map<std::string, double> share;  // this image's largest share per unit
  std::lock_guard<std::mutex> lock(mu_);
  for (const DrawnBar& b : bars) {
    Unit& u = units_[b.scale.units];
    share.emplace(b.scale.units, 0.0);
    share[b.scale.units] = std::max(share[b.scale.units], b.clip.share());
    if (b.clip.share() > kClipNoteShare) u.data_max = std::max(u.data_max, b.clip.data_max);
    u.vmax = b.scale.vmax;
  }
  for (const auto& [units, sh] : share) {
    Unit& u = units_[units];
    ++u.images;
    u.clipped += sh > kClipNoteShare;
    u.share = std::max(u.share, sh);
  }
}

std::vector<std::string> ClipTally::notes(const ViewRequest& opt) const {
  std::vector<std::string> out;
  if (!opt.scale || opt.scale->kind != ScaleKind::Fixed) return out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [units, u] : units_) {
    if (u.clipped == 0) continue;
    char buf[480];
    std::snprintf(buf, sizeof buf, "%s %s,%s: the %s bar clipped more than %.1f%% of the cells of %zu of %zu "
                  "images' figures (up to %.1f%% of a bar's cells; their maps reach %.3g, the bar ends at %.3g): drawn "
                  "in its top colour, each such bar marked with a triangle and '+'; a larger VMAX shows them",
                  setting_ref("scale").c_str(), shown_number(opt.scale->vmin).c_str(),
                  shown_number(opt.scale->vmax).c_str(), units.c_str(),
                  100.0 * kClipNoteShare, u.clipped, u.images, 100.0 * u.share, u.data_max, u.vmax);
    out.push_back(buf);
  }
  return out;
}

namespace {

std::string map_units(const RenderOptions& opt) { return opt.rollout ? "rollout mass" : "attention probability"; }

}  // namespace

Scale figure_scale(const RenderContext& ctx, const std::vector<const std::vector<float>*>& maps,
                   const std::string& units) {
  const ScaleSpec spec = ctx.opt->scale.value_or(ScaleSpec{ScaleKind::Figure, 0.0, 1.0});
  const Scale data = scale_over(maps, units);
  Scale s = data;
  if (spec.kind == ScaleKind::Run) {
    const auto it = ctx.run_scales.find(units);
    if (it != ctx.run_scales.end()) s = it->second;
  } else if (spec.kind == ScaleKind::Fixed) {
    s = resolve_scale(spec, {}, data);
  }
  // The colour bar's "extend" mark only where this figure's own values go past the top (matplotlib's
  // extend='max' drawn when it says something).
  s.clip_max = !maps.empty() && data.vmax > s.vmax && !s.flat();
  return s;
}

Scale single_scale(const RenderContext& ctx, const std::vector<float>& map, const std::string& units) {
  return figure_scale(ctx, {&map}, units);
}

StyleOptions style_of(const RenderContext& ctx) {
  StyleOptions st;
  st.style = ctx.opt->style;
  st.alpha_by_value = ctx.opt->alpha_by_value;
  st.alpha = ctx.opt->alpha;
  st.cmap = ctx.cmap;
  st.upsample = ctx.opt->upsample;
  return st;
}

// One view of `map` (grid_h, grid_w) over `photo` inside the box (x, y, w, h): a heatmap, or with
// --threshold the DINO mask, filled and outlined. Sets *flat for a constant heatmap; fills *mask.
Image draw_view(const Image& photo, int bx, int by, int bw, int bh, const std::vector<float>& map,
                const RenderContext& ctx, bool* flat, std::vector<uint8_t>* mask, const std::string& units,
                int marked) {
  const HParams& hp = ctx.model->hp;
  const RenderOptions& opt = *ctx.opt;
  *flat = false;
  if (opt.threshold) {
    *mask = threshold_mask(map.data(), static_cast<int>(map.size()), *opt.threshold);
    const std::vector<float> m01(mask->begin(), mask->end());
    // The 0/1 patch mask follows --upsample and is cut at 0.5: nearest gives DINO's exact patch blocks.
    const std::vector<float> up = upsample_map(m01, hp.grid_w, hp.grid_h, bw, bh, opt.upsample);  // (bh, bw)
    const int outline = std::max(1, static_cast<int>(std::lround(std::min(bw, bh) / 150.0)));
    Image out = draw_mask_overlay(photo, up, bw, bh, bx, by, colormap_lookup(ctx.cmap, 1.0f), opt.alpha, outline);
    outline_patch(out, PhotoBox{bx, by, bw, bh}, hp.grid_w, hp.grid_h, marked);
    return out;
  }
  // One map is its own figure: --scale map and figure both mean its min-max (today's overlay, byte for byte).
  const Scale scale = single_scale(ctx, map, units.empty() ? map_units(opt) : units);
  *flat = scale.flat();
  return draw_styled(photo, PhotoBox{bx, by, bw, bh}, GridMap{map, hp.grid_w, hp.grid_h, marked}, scale, style_of(ctx));
}

namespace {

std::string tile_label(const std::string& name, const std::vector<float>& map,
                       const std::vector<uint8_t>& mask) {
  char buf[96];
  if (!mask.empty()) {
    const auto kept = std::count(mask.begin(), mask.end(), uint8_t{1});
    std::snprintf(buf, sizeof buf, "%s  %ld/%zu patches", name.c_str(), static_cast<long>(kept), mask.size());
  } else {
    std::snprintf(buf, sizeof buf, "%s  max %.3g%s", name.c_str(),
                  static_cast<double>(*std::max_element(map.begin(), map.end())),
                  is_flat_contrast(peak_to_mean(map)) ? " (flat)" : "");
  }
  return buf;
}

}  // namespace

std::string top1_phrase(const std::vector<std::pair<std::string, float>>& top5, int num_classes, ScoreRule rule) {
  if (top5.empty()) return "";
  char buf[160];
  const double p = static_cast<double>(top5[0].second);
  // Near uniform (1/C): no class to crown. Twice uniform, but at most 10 points above it (2/C would ask a
  // 2-class head for 100 %).
  if (rule == ScoreRule::softmax && num_classes > 1 && p < std::min(2.0 / num_classes, 1.0 / num_classes + 0.1)) {
    std::snprintf(buf, sizeof buf, "no confident class (top-1 %.2g%%, uniform %.2g%%)", 100.0 * p, 100.0 / num_classes);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%s %.1f%%", top5[0].first.c_str(), 100.0 * p);
  return buf;
}

// "chelsea.png - timm ViT, 4 blocks x 4 heads, 224x224 input (14x14 patches of 16 px) - top-1 Coat 63.2%"
std::string figure_title(const Job& job, const HParams& hp, const std::vector<std::pair<std::string, float>>& top5,
                         bool query_rows, int num_classes, bool zero_shot, ScoreRule rule) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s \u2014 %s ViT, %d blocks \u00d7 %d heads, %d\u00d7%d input (%d\u00d7%d patches of %d px)",
                fs::path(job.input).filename().string().c_str(), layout_name(hp.layout).c_str(), hp.depth, hp.num_heads,
                hp.image_w, hp.image_h, hp.grid_w, hp.grid_h, hp.patch);
  std::string t = buf;
  // A model without a class token: the map is not a class token's row, and the title says what it is.
  if (!hp.class_token && query_rows) t += " — no class token: mean of the patch queries' rows (attention received)";
  const std::string top1 = top1_phrase(top5, num_classes, rule);
  const std::string of = zero_shot ? "zero-shot top-1 of " + counted(static_cast<size_t>(num_classes), "text") +
                                         zero_shot_rule_parenthesis(rule)
                                   : "top-1";
  if (!top1.empty()) t += top1.rfind("no confident", 0) == 0 ? " \u2014 " + top1 : " \u2014 " + of + ": " + top1;
  return t;
}

namespace {

// --scale map on a strip: each tile on its own min-max, so no colour bar can stand for them all.
bool own_scales(const RenderOptions& opt) { return opt.scale && opt.scale->kind == ScaleKind::Map; }
// The note drawn under such a strip: words of the figure, so the setting is spelled as the flag (the same
// pixels whichever front end asked).
std::string own_scales_note() {
  return spelled_settings("; each tile on its own min\u2013max (" + setting_ref("scale") +
                    " map): colours do not compare across tiles.");
}

// NAME.png is the heads' fusion that the heads sheet ends with: the single attention view of --layer / --head.
bool shows_fused_map(const RenderContext& ctx) {
  return !ctx.views_given && ctx.user_views == 1 && ctx.views[0].spec.kind == ViewKind::Attention;
}

// "head 3" or "heads fused by mean".
std::string heads_phrase(const HeadSelect& sel) {
  return sel.fusion == HeadSelect::Fusion::Index ? fusion_name(sel, "head ") : "heads fused by " + fusion_name(sel, "head ");
}

}  // namespace

std::string with_colour_bars(const std::string& record, const std::vector<DrawnBar>& bars) {
  if (record.empty()) return record;
  nlohmann::ordered_json r = nlohmann::ordered_json::parse(record);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const DrawnBar& b : bars)
    list.push_back({{"units", b.scale.units}, {"vmin", b.scale.vmin}, {"vmax", b.scale.vmax},
                    {"data_max", float_json(static_cast<float>(b.clip.data_max))},  // the maps' float, as drawn
                    {"clipped", b.clip.above > 0}, {"clipped_share", b.clip.share()}});
  r["colour_bars"] = list;
  return provenance_text(r);
}

FigureOptions figure_options(const RenderContext& ctx, const std::vector<DrawnBar>& bars) {
  const RenderOptions& opt = *ctx.opt;
  FigureOptions fo;
  fo.formats = opt.figure_formats;
  fo.dpi = opt.dpi.value_or(300.0);
  fo.width_in = opt.width_in.value_or(0.0);
  fo.provenance = with_colour_bars(ctx.provenance, bars);
  fo.in_memory = ctx.figures_in_memory;
  return fo;
}

// NAME.heads.*: one tile per head of the drawn block plus the fused map, one scale (or each head's own DINO
// mask with --threshold), a colour bar.
std::vector<std::string> write_heads(const RenderContext& ctx, const Job& job, const Image& photo, const PhotoBox& box,
                                     const std::vector<float>& mean_map, const std::vector<std::vector<float>>& head_maps,
                                     const std::vector<float>& map, const std::string& title, int marked,
                                     std::vector<DrawnBar>* bars) {
  const HParams& hp = ctx.model->hp;
  const RenderOptions& opt = *ctx.opt;
  // The fused tile: what NAME.png shows; for a single --head, and with --rollout (whose rollout mass is another
  // unit than the heads' attention probability, so it cannot share their scale), the mean over heads.
  std::vector<float> fused = map;
  std::string name = fusion_name(ctx.head, "head ");
  if (opt.rollout || ctx.head.fusion == HeadSelect::Fusion::Index) {
    fused = mean_map;
    name = "mean";
  }
  std::vector<const std::vector<float>*> all;
  for (const auto& m : head_maps) all.push_back(&m);
  all.push_back(&fused);
  const TilePhoto tp = tile_photo(photo, box);
  const std::string units = "attention probability";  // every tile is one block's class-token attention
  const Scale scale = figure_scale(ctx, all, units);
  std::vector<Image> tiles;
  std::vector<std::string> labels;
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<uint8_t> mask;
    bool flat = false;
    if (opt.threshold) {
      tiles.push_back(draw_view(tp.photo, tp.box.x0, tp.box.y0, tp.box.w, tp.box.h, *all[i], ctx, &flat, &mask, "", marked));
    } else {
      tiles.push_back(draw_styled(tp.photo, tp.box, GridMap{*all[i], hp.grid_w, hp.grid_h, marked},
                                  own_scales(opt) ? single_scale(ctx, *all[i], units) : scale, style_of(ctx)));
    }
    labels.push_back(tile_label(i + 1 == all.size() ? name : "head " + std::to_string(i), *all[i], mask));
  }
  TileFigure fig;
  const std::string block = std::to_string(ctx.layer + opt.block_base);
  fig.title = opt.title ? *opt.title
                        : title + "\nheads of " + block_name(hp, ctx.layer, opt.block_base) +
                              (hp.class_attn_blocks > 0 && !hp.is_class_attention(ctx.layer)
                                   ? " (no class token in it: the mean of the patch queries' rows)" : "") +
                              (opt.rollout ? " (the last block of the rollout)" : "") +
                              (opt.threshold ? ", DINO masks" : "");
  char mass[32] = "";
  if (opt.threshold) std::snprintf(mass, sizeof mass, "%g", static_cast<double>(*opt.threshold));
  const bool mean_of_heads = opt.rollout || ctx.head.fusion == HeadSelect::Fusion::Index;
  fig.note = "Tiles: heads 0\u2013" + std::to_string(hp.num_heads - 1) + " of block " + block +
             ", then " + (mean_of_heads ? "their mean"
                          : shows_fused_map(ctx) ? "the fused map shown in " + fs::path(job.out_base).filename().string() + ".png"
                                                 : "the heads fused by " + fusion_name(ctx.head, "head ")) +
             (opt.threshold ? "; each tile its own DINO mask (" + std::string(mass) + " of the mass)."
                            : own_scales(opt) ? own_scales_note() : "; one colour scale for all tiles.");
  std::vector<DrawnBar> drawn;
  if (!opt.threshold && !own_scales(opt)) {
    fig.scale = &scale;
    drawn.push_back(drawn_bar(all, scale));
  }
  if (!opt.notes) fig.note.clear();  // drawn only with --notes (--scale map's part: undrawn_figure_notes)
  fig.cmap = ctx.cmap;
  fig.cols = opt.strip_columns.value_or(0);
  if (bars) bars->insert(bars->end(), drawn.begin(), drawn.end());
  return write_tiles(job.out_base + ".heads", fig, tiles, labels, figure_options(ctx, drawn));
}

namespace {

// The layer strip's words for the blocks whose tiles show the patch queries' mean row, as the figure's map
// labels say it (ResolvedView::patch_query_mean: CaiT's self-attention blocks, no class token in them):
// " · blocks 0–2: patch-query mean (no class token in them)"; "" when no tile does.
std::string patch_mean_phrase(const RenderContext& ctx) {
  int first = -1, last = -1;
  for (size_t l = 0; l < ctx.aux.layers_n; ++l)
    if (ctx.views[ctx.aux.layers + l].patch_query_mean) {
      if (first < 0) first = static_cast<int>(l);
      last = static_cast<int>(l);
    }
  if (first < 0) return "";
  const int base = ctx.opt->block_base;
  return first == last ? " \u00b7 block " + std::to_string(first + base) + ": patch-query mean (no class token in it)"
                       : " \u00b7 blocks " + std::to_string(first + base) + "\u2013" + std::to_string(last + base) +
                             ": patch-query mean (no class token in them)";
}

}  // namespace

// NAME.layers.*: the map at every block (rollout 0..l for every l with --rollout), one row, one scale.
std::vector<std::string> write_layers(const RenderContext& ctx, const Job& job, const Image& photo, const PhotoBox& box,
                                      const std::vector<std::vector<float>>& layer_maps, const std::string& title,
                                      int marked, std::vector<DrawnBar>* bars) {
  const HParams& hp = ctx.model->hp;
  const RenderOptions& opt = *ctx.opt;
  std::vector<const std::vector<float>*> all;
  for (const auto& m : layer_maps) all.push_back(&m);
  const std::string units = map_units(opt);
  const Scale scale = figure_scale(ctx, all, units);
  const TilePhoto tp = tile_photo(photo, box);
  std::vector<Image> tiles;
  std::vector<std::string> labels;
  for (size_t l = 0; l < layer_maps.size(); ++l) {
    tiles.push_back(draw_styled(tp.photo, tp.box, GridMap{layer_maps[l], hp.grid_w, hp.grid_h, marked},
                                own_scales(opt) ? single_scale(ctx, layer_maps[l], units) : scale, style_of(ctx)));
    const std::string base = std::to_string(opt.block_base);
    labels.push_back(tile_label(opt.rollout ? "rollout " + base + "\u2013" + std::to_string(static_cast<int>(l) + opt.block_base)
                                            : block_name(hp, static_cast<int>(l), opt.block_base),  // CaiT: class-attention block
                                layer_maps[l], {}));
  }
  TileFigure fig;
  fig.title = opt.title ? *opt.title
                        : title + "\n" +
                              (opt.rollout ? "attention rollout through blocks " + std::to_string(opt.block_base) +
                                                 "\u2026l for every block l, "
                                           : std::string("every block, ")) +
                              heads_phrase(ctx.head) + patch_mean_phrase(ctx) +
                              (opt.rollout && opt.discard > 0.0 ? ", discard " + shown_number(opt.discard) : "") +
                              (own_scales(opt) ? "" : "; one colour scale");
  fig.note = own_scales(opt) && opt.notes ? own_scales_note().substr(2) : "";
  fig.cols = opt.strip_columns.value_or(layer_strip_columns(static_cast<int>(tiles.size())));
  std::vector<DrawnBar> drawn;
  if (!own_scales(opt)) {
    fig.scale = &scale;
    drawn.push_back(drawn_bar(all, scale));
  }
  fig.cmap = ctx.cmap;
  if (bars) bars->insert(bars->end(), drawn.begin(), drawn.end());
  return write_tiles(job.out_base + ".layers", fig, tiles, labels, figure_options(ctx, drawn));
}

std::string small_image_warning(int width, int height, const HParams& hp) {
  if (width >= kSmallImageSide && height >= kSmallImageSide) return "";
  return std::string(kWarningNote) + "the image is " + std::to_string(width) + "\u00d7" + std::to_string(height) +
         " pixels, upsampled to the model's " + std::to_string(hp.image_w) + "\u00d7" + std::to_string(hp.image_h) +
         " input: its map is the model's answer to a few flat colours, not to detail";
}

std::vector<std::string> undrawn_figure_notes(const RenderOptions& opt) {
  std::vector<std::string> out;
  if (opt.notes || !(opt.strip_layers || opt.heads_grid) || !own_scales(opt)) return out;
  out.push_back(setting_ref("scale") + " map: each strip tile is drawn on its own min\u2013max, so colours do not compare "
                "across tiles and the strips have no colour bar (" + setting_ref("notes") + " writes this under the tiles)");
  return out;
}

std::string also_wrote_line(const std::vector<std::string>& outputs, const std::string& shown,
                            const std::vector<std::string>& shown_more) {
  // A path is named when a line holds it followed by nothing, a space or a ')' (not as part of a longer name).
  auto named_in = [](const std::string& line, const std::string& p) {
    for (size_t at = line.find(p); at != std::string::npos; at = line.find(p, at + 1)) {
      const size_t end = at + p.size();
      if ((at == 0 || line[at - 1] == ' ') && (end == line.size() || line[end] == ' ' || line[end] == ')')) return true;
    }
    return false;
  };
  std::string out;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& p = outputs[i];
    bool named = (i == 0 && shown.empty()) || named_in(shown, p);
    for (const std::string& l : shown_more) named = named || named_in(l, p);
    if (!named) out += (out.empty() ? "also wrote: " : ", ") + p;
  }
  return out;
}

RenderResult render_image(const RenderContext& ctx, const Job& job) {
  return draw_job_views(ctx, job, compute_job_views(ctx, job));
}

void check_drawing_options(const RenderOptions& ro) {
  if (!(ro.alpha >= 0.0f && ro.alpha <= 1.0f))
    throw Error(setting_ref("alpha") + " must be in [0, 1], found " + shown_number(ro.alpha));
  if (ro.alpha_by_value && ro.style != Style::Overlay)
    throw Error(setting_ref("alpha_by_value") + " applies to " + setting_ref("style") +
                " overlay (mask and contour have no opacity)");
  if (ro.dpi && !(*ro.dpi >= 1.0 && *ro.dpi <= 100000.0))  // below 1 a figure has fewer pixels than inches
    throw Error(setting_ref("dpi") + " must be in [1, 100000], found " + shown_number(*ro.dpi));
  if (!(ro.discard >= 0.0 && ro.discard <= 1.0))
    throw Error(setting_ref("discard") + " must be in [0, 1], found " + shown_number(ro.discard));
  if (ro.threshold && !(*ro.threshold > 0.0f && *ro.threshold <= 1.0f))
    throw Error(setting_ref("threshold") + " must be in (0, 1], found " + shown_number(*ro.threshold));
  if (ro.threshold && (ro.panel || ro.strip_layers || ro.style != Style::Overlay || ro.alpha_by_value || ro.scale))
    throw Error(setting_ref("threshold") + " draws the DINO mask; " + setting_ref("panel") + ", " +
                setting_ref("strip") + " layers, " + setting_ref("style") + ", " +
                setting_ref("alpha_by_value") + " and " + setting_ref("scale") +
                " "
                "apply to heatmaps");
  if (ro.all_heads && !ro.writes(OutputKind::MapNpy))
    throw Error(setting_ref("all_heads") + " is a " + setting_ref("save_raw") + " option: add " +
                setting_ref("save_raw"));
  if (ro.all_heads && ro.rollout)
    throw Error(setting_ref("all_heads") + " cannot be combined with " + setting_ref("rollout") +
                ": rollout fuses the heads of every layer");
  if (ro.pos_interp && !ro.size)
    throw Error(setting_ref("pos_interp") + " applies with " + setting_ref("size") + " (it chooses how " +
                setting_ref("size") + " resamples the position embeddings)");
  if (ro.load.max_pixels < 1) throw Error(setting_ref("max_pixels") + " must be >= 1, found 0");
  if (ro.figure_formats.empty())
    throw Error(setting_ref("figure_format") + " needs at least one of png, pdf, svg");
  if (ro.width_in && !(*ro.width_in > 0.0 && *ro.width_in <= 100.0))
    throw Error(setting_ref("width_in") + " must be in (0, 100] inches, found " + shown_number(*ro.width_in));
  if (ro.width_in && !(ro.panel || ro.strip_layers || ro.heads_grid))
    throw Error(setting_ref("width_in") + " sizes the figures: add " + setting_ref("panel") + " or " +
                setting_ref("strip") + " layers|heads");
  if (ro.strip_columns && *ro.strip_columns < 1)
    throw Error(setting_ref("strip_columns") + " must be >= 1, found " + std::to_string(*ro.strip_columns));
  if (ro.strip_columns && !(ro.strip_layers || ro.heads_grid))
    throw Error(setting_ref("strip_columns") + " lays out the strips: add " + setting_ref("strip") +
                " layers or " + setting_ref("strip") + " heads");
  const bool figures = ro.panel || ro.strip_layers || ro.heads_grid;
  if (ro.title && !figures)
    throw Error(setting_ref("title") + " titles the figures: add " + setting_ref("panel") + " or " +
                setting_ref("strip") + " layers|heads");
  if (ro.block_base != 0 && !figures)
    throw Error(setting_ref("block_numbering") + " numbers the blocks in the figures: add " +
                setting_ref("panel") + " or " + setting_ref("strip") + " layers|heads");
  if (ro.notes && !figures)
    throw Error(setting_ref("notes") + " draws notes into the figures: add " + setting_ref("panel") + " or " +
                setting_ref("strip") + " layers|heads");
}

}  // namespace attnmap
