#include "app/render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "model/classify.hpp"
#include "draw/colormap.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "model/vit.hpp"

namespace attnmap {

namespace fs = std::filesystem;

int requested_layer(const HParams& hp, const RenderOptions& opt) {
  return opt.layer.value_or(opt.rollout ? -1 : hp.default_layer.value_or(-1));
}

std::string requested_head(const HParams& hp, const RenderOptions& opt) {
  return opt.head.value_or(opt.rollout ? "mean" : hp.default_head.value_or("mean"));
}

SelectedView select_view(const HParams& hp, const RenderOptions& opt) {
  // A bad value from the weights' config (not from the command line) says so, or the user looks for an option.
  auto from_config = [&hp](const char* key, const Error& e) {
    const auto it = hp.source.find(key);
    return Error(std::string("the weights' config ") + key + (it == hp.source.end() ? "" : " (" + it->second + ")") +
                 ": " + e.what() + " (pass --layer / --head to choose another view)");
  };
  SelectedView v;
  try {
    v.layer = resolve_layer(requested_layer(hp, opt), hp.depth);
  } catch (const Error& e) {
    if (opt.layer || opt.rollout || !hp.default_layer) throw;
    throw from_config("default_layer", e);
  }
  try {
    v.head = parse_head(requested_head(hp, opt));
    const std::vector<float> probe(static_cast<size_t>(hp.num_heads), 0.0f);
    fuse_heads(probe.data(), hp.num_heads, 1, v.head);  // throws for a head index out of range
  } catch (const Error& e) {
    if (opt.head || opt.rollout || !hp.default_head) throw;
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
  ctx.cmap = colormap_table(opt.colormap);
  if (!(opt.alpha >= 0.0f && opt.alpha <= 1.0f)) throw Error("--alpha must be in [0, 1]");
  if (!(opt.discard >= 0.0 && opt.discard <= 1.0))
    throw Error("--discard must be a fraction in [0, 1], found " + std::to_string(opt.discard));
  if (opt.discard > 0.0 && !opt.rollout) throw Error("--discard applies to --rollout only");
  if (opt.threshold && !(*opt.threshold > 0.0f && *opt.threshold <= 1.0f))
    throw Error("--threshold must be an attention mass in (0, 1], found " + std::to_string(*opt.threshold));
  if (opt.all_heads && !opt.save_raw) throw Error("--all-heads is a --save-raw option: add --save-raw");
  if (opt.all_heads && opt.rollout)
    throw Error("--all-heads cannot be combined with --rollout: rollout fuses the heads of every layer");
  if (opt.heads_grid) ctx.font = std::make_shared<const Font>(find_font());
  make_explain_context(ctx, model, opt);
  return ctx;
}

// One view of `map` (grid_h, grid_w) over `photo` inside the box (x, y, w, h): a heatmap, or with
// --threshold the DINO mask, filled and outlined. Sets *flat for a constant heatmap; fills *mask.
Image draw_view(const Image& photo, int bx, int by, int bw, int bh, const std::vector<float>& map,
                const RenderContext& ctx, bool* flat, std::vector<uint8_t>* mask) {
  const HParams& hp = ctx.model->hp;
  const RenderOptions& opt = *ctx.opt;
  *flat = false;
  if (opt.threshold) {
    *mask = threshold_mask(map.data(), static_cast<int>(map.size()), *opt.threshold);
    const std::vector<float> m01(mask->begin(), mask->end());
    // The 0/1 patch mask follows --upsample and is cut at 0.5: nearest gives DINO's exact patch blocks.
    const std::vector<float> up = upsample_map(m01, hp.grid_w, hp.grid_h, bw, bh, opt.upsample);  // (bh, bw)
    const int outline = std::max(1, static_cast<int>(std::lround(std::min(bw, bh) / 150.0)));
    return draw_mask_overlay(photo, up, bw, bh, bx, by, colormap_lookup(ctx.cmap, 1.0f), opt.alpha, outline);
  }
  const std::vector<float> map01 = normalize_minmax(map, flat);
  const std::vector<float> up = upsample_map(map01, hp.grid_w, hp.grid_h, bw, bh, opt.upsample);  // (bh, bw)
  return blend_overlay(photo, up, bw, bh, bx, by, ctx.cmap, opt.alpha);
}

namespace {

std::string tile_label(const std::string& name, const std::vector<float>& map,
                       const std::vector<uint8_t>& mask) {
  char buf[96];
  if (!mask.empty()) {
    const auto kept = std::count(mask.begin(), mask.end(), uint8_t{1});
    std::snprintf(buf, sizeof buf, "%s  %ld/%zu patches", name.c_str(), static_cast<long>(kept), mask.size());
  } else {
    std::snprintf(buf, sizeof buf, "%s  max %.3f", name.c_str(),
                  static_cast<double>(*std::max_element(map.begin(), map.end())));
  }
  return buf;
}

}  // namespace

RenderResult render_image(const RenderContext& ctx, const Job& job) {
  const ViTWeights& model = *ctx.model;
  const HParams& hp = model.hp;
  const RenderOptions& opt = *ctx.opt;
  if (ctx.explain) return render_explained(ctx, job);
  RenderResult res;
  const Image photo = load_image(job.input, opt.load);
  const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, opt.resize, hp.mean.data(), hp.std.data(),
                                   hp.crop_pct.value_or(0.875f));  // timm pretrained_cfg crop_pct, when given
  ForwardOptions fo;
  fo.last_layer = ctx.layer;
  fo.to_end = model.head.present();  // the logits need every block; without a head stop at the drawn layer
  // Rollout needs every row of layers 0..layer: consumed layer by layer, so (T, T) is kept, not (L, H, T, T).
  std::optional<RolloutAccumulator> acc;
  if (opt.rollout) {
    acc.emplace(hp.tokens(), hp.num_heads, ctx.head, opt.discard);
    const int last = ctx.layer;
    fo.on_probs = [&acc, last](int, int l, const float* probs) {
      if (l <= last) acc->add_layer(probs);  // with to_end the later blocks run too, for the logits
    };
  }
  const ForwardResult r = vit_forward(model, in.chw.data(), fo);
  if (!r.logits.empty()) res.top5 = top_k_classes(r.logits, hp.labels, 5);
  if (opt.rollout) {
    if (acc->layers() != ctx.layer + 1)
      throw Error("rollout: the forward pass reported " + std::to_string(acc->layers()) + " layers");
    res.map = class_row_map(acc->rollout(), hp, r.tokens);  // (grid_h, grid_w)
  } else {
    res.map = class_attention_map(r, hp, ctx.layer, ctx.head);  // (grid_h, grid_w)
  }
  std::vector<std::vector<float>> head_maps;  // H x (grid_h, grid_w)
  if (opt.heads_grid || opt.all_heads) {
    for (int h = 0; h < hp.num_heads; ++h) {
      HeadSelect one;
      one.fusion = HeadSelect::Fusion::Index;
      one.index = h;
      head_maps.push_back(class_attention_map(r, hp, ctx.layer, one));
    }
  }
  int bx = 0, by = 0, bw = 0, bh = 0;
  box_pixels(in.box, photo.width, photo.height, &bx, &by, &bw, &bh);
  bool flat = false;
  const Image out = draw_view(photo, bx, by, bw, bh, res.map, ctx, &flat, &res.mask);
  if (flat) res.notes.push_back("the attention map is constant; drawn flat (no contrast)");

  Image sheet;
  if (opt.heads_grid) {
    const GridLayout g = grid_layout(hp.num_heads + 1, photo.width, photo.height);
    const Image small = resize_photo(photo, g.tile_w, g.tile_h);
    const double sx = static_cast<double>(g.tile_w) / photo.width,
                 sy = static_cast<double>(g.tile_h) / photo.height;
    Box sbox{in.box.x0 * sx, in.box.y0 * sy, in.box.x1 * sx, in.box.y1 * sy};
    int tx = 0, ty = 0, tw = 0, th = 0;
    box_pixels(sbox, g.tile_w, g.tile_h, &tx, &ty, &tw, &th);
    std::vector<Image> tiles;
    std::vector<std::string> labels;
    std::vector<uint8_t> mask;
    bool tile_flat = false;
    for (int h = 0; h < hp.num_heads; ++h) {
      const std::vector<float>& m = head_maps[static_cast<size_t>(h)];
      tiles.push_back(draw_view(small, tx, ty, tw, th, m, ctx, &tile_flat, &mask));
      labels.push_back(tile_label("head " + std::to_string(h), m, mask));
    }
    // The fused tile: what NAME.png shows; for a single --head without rollout, the mean over heads.
    std::vector<float> fused = res.map;
    std::string name = opt.rollout ? "rollout 0-" + std::to_string(ctx.layer) + " " + fusion_name(ctx.head, "head ")
                                   : fusion_name(ctx.head, "head ");
    if (!opt.rollout && ctx.head.fusion == HeadSelect::Fusion::Index) {
      fused = class_attention_map(r, hp, ctx.layer, HeadSelect{});
      name = "mean";
    }
    tiles.push_back(draw_view(small, tx, ty, tw, th, fused, ctx, &tile_flat, &mask));
    labels.push_back(tile_label(name, fused, mask));
    sheet = compose_grid(g, tiles, labels, *ctx.font);
  }

  const std::string png = job.out_base + ".png";
  fs::create_directories(fs::path(png).parent_path());
  if (opt.save_raw) {
    if (opt.all_heads) {
      std::vector<float> all;
      for (const auto& m : head_maps) all.insert(all.end(), m.begin(), m.end());
      write_npy(job.out_base + ".npy", all, {hp.num_heads, hp.grid_h, hp.grid_w});
    } else {
      write_npy(job.out_base + ".npy", res.map, {hp.grid_h, hp.grid_w});
    }
    res.outputs.push_back(job.out_base + ".npy");
  }
  if (opt.heads_grid) {
    write_png(job.out_base + ".heads.png", sheet);
    res.outputs.insert(res.outputs.begin(), job.out_base + ".heads.png");
  }
  write_png(png, out);
  res.outputs.insert(res.outputs.begin(), png);
  return res;
}

}  // namespace attnmap
