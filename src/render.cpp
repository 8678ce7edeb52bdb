#include "render.hpp"

#include <filesystem>

#include "colormap.hpp"
#include "error.hpp"
#include "npy.hpp"
#include "vit.hpp"

namespace attnmap {

namespace fs = std::filesystem;

RenderContext make_render_context(const ViTWeights& model, const RenderOptions& opt) {
  const HParams& hp = model.hp;
  RenderContext ctx;
  ctx.model = &model;
  ctx.opt = &opt;
  ctx.layer = resolve_layer(opt.layer.value_or(hp.default_layer.value_or(-1)), hp.depth);
  ctx.head = parse_head(opt.head.value_or(hp.default_head.value_or("mean")));
  const std::vector<float> probe(static_cast<size_t>(hp.num_heads), 0.0f);
  fuse_heads(probe.data(), hp.num_heads, 1, ctx.head);  // throws for a head index out of range
  ctx.cmap = colormap_table(opt.colormap);
  if (!(opt.alpha >= 0.0f && opt.alpha <= 1.0f)) throw Error("--alpha must be in [0, 1]");
  return ctx;
}

RenderResult render_image(const RenderContext& ctx, const Job& job) {
  const ViTWeights& model = *ctx.model;
  const HParams& hp = model.hp;
  const RenderOptions& opt = *ctx.opt;
  RenderResult res;
  const Image photo = load_image(job.input, opt.load);
  const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, opt.resize, hp.mean.data(), hp.std.data(),
                                   hp.crop_pct.value_or(0.875f));  // timm pretrained_cfg crop_pct, when given
  ForwardOptions fo;
  fo.last_layer = ctx.layer;
  const ForwardResult r = vit_forward(model, in.chw.data(), fo);
  res.map = class_attention_map(r, hp, ctx.layer, ctx.head);  // (grid_h, grid_w)
  bool flat = false;
  const std::vector<float> map01 = normalize_minmax(res.map, &flat);
  if (flat) res.notes.push_back("the attention map is constant; drawn flat (no contrast)");
  int bx = 0, by = 0, bw = 0, bh = 0;
  box_pixels(in.box, photo.width, photo.height, &bx, &by, &bw, &bh);
  const std::vector<float> up = upsample_map(map01, hp.grid_w, hp.grid_h, bw, bh, opt.upsample);  // (bh, bw)
  const Image out = blend_overlay(photo, up, bw, bh, bx, by, ctx.cmap, opt.alpha);
  const std::string png = job.out_base + ".png";
  fs::create_directories(fs::path(png).parent_path());
  if (opt.save_raw) {
    write_npy(job.out_base + ".npy", res.map, {hp.grid_h, hp.grid_w});
    res.outputs.push_back(job.out_base + ".npy");
  }
  write_png(png, out);
  res.outputs.insert(res.outputs.begin(), png);
  return res;
}

}  // namespace attnmap
