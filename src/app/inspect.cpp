#include "app/inspect.hpp"

#include <cstdio>
#include <sstream>

#include "core/error.hpp"
#include "app/render.hpp"
#include "model/pos_embed.hpp"

namespace attnmap {

namespace {

std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

std::string rgb(const std::array<float, 3>& v) { return fmt_float(v[0]) + ", " + fmt_float(v[1]) + ", " + fmt_float(v[2]); }

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string layout_name(const std::string& l) {
  if (l == "timm") return "timm (timm / DINO / DeiT names)";
  if (l == "dinov2") return "dinov2 (facebookresearch DINOv2 names)";
  if (l == "hf-vit") return "hf-vit (Hugging Face ViTModel / ViTForImageClassification)";
  if (l == "torchvision") return "torchvision (torchvision.models.VisionTransformer)";
  if (l == "seed") return "seed (single attention layer W_Q / W_K / W_V)";
  return l;
}

}  // namespace

std::string describe_model(const ViTWeights& w, const std::string& path) {
  const HParams& hp = w.hp;
  std::ostringstream o;
  auto src = [&](const std::string& key) {
    auto it = hp.source.find(key);
    return it == hp.source.end() ? std::string("-") : it->second;
  };
  auto row = [&](const std::string& key, const std::string& value, const std::string& from) {
    std::string k = "  " + key;
    k.resize(18, ' ');
    std::string v = value;
    if (v.size() < 22) v.resize(22, ' ');
    o << k << v << "  " << from << "\n";
  };
  const int N = hp.grid_w * hp.grid_h;
  o << "weights:     " << path << "\n";
  o << "format:      " << (w.format.empty() ? "json" : w.format == "pth" ? "pth (torch.save zip archive)" : w.format) << "\n";
  if (w.format == "pth") {
    o << "holds:       " << w.pth_holds << "\n";
    o << "state dict:  " << w.pth_used << "\n";
  }
  o << "layout:      " << layout_name(hp.layout) << "\n";
  o << "tokens:      " << hp.tokens() << " = " << (hp.cls_is_mean ? "1 class (mean of patches)" : "1 class") << " + "
    << hp.num_dist << " distillation + " << hp.num_registers << " register + " << N << " patch\n";
  o << "grid:        " << hp.grid_h << " x " << hp.grid_w << " patches (rows x columns) of " << hp.patch << " px, input "
    << hp.image_h << " x " << hp.image_w << " px (height x width)\n";
  if (!w.pos_embed.empty()) {
    std::string who = hp.pos_prefix == 0 ? "patches only"
                      : hp.pos_prefix == hp.num_prefix ? "every prefix token and the patches"
                      : hp.pos_prefix == 1 ? "the class token and the patches; the other prefix tokens have none"
                                                       : std::to_string(hp.pos_prefix) + " prefix token(s) and the patches";
    o << "positions:   " << (hp.pos_prefix + N) << " rows: " << who << "\n";
  } else {
    o << "positions:   none\n";
  }
  o << "depth:       " << hp.depth << (hp.depth == 1 ? " block\n" : " blocks\n");
  o << "heads:       " << hp.num_heads << " (head dim " << hp.head_dim << ", D = " << hp.dim << ")\n";
  o << "mlp:         " << (hp.mlp_dim ? std::to_string(hp.mlp_dim) : std::string("none")) << "\n";
  o << "layer scale: " << (hp.layer_scale ? "yes (ls1 / ls2)" : "no") << "\n";
  o << "classifier:  " << (w.head.present() ? std::to_string(w.head.out) + " classes" : std::string("none")) << "\n";
  o << "parameters:  " << with_commas(w.param_count) << " (every floating-point tensor in the file)\n";
  o << "config:\n";
  row("image_size", std::to_string(hp.image_h) + "x" + std::to_string(hp.image_w), src("image_size"));
  row("patch_size", std::to_string(hp.patch), src("patch_size"));
  row("depth", std::to_string(hp.depth), src("depth"));
  row("num_heads", std::to_string(hp.num_heads), src("num_heads"));
  row("layer_norm_eps", fmt_float(hp.eps), src("layer_norm_eps"));
  row("mean", rgb(hp.mean), src("mean"));
  row("std", rgb(hp.std), src("std"));
  if (hp.crop_pct) row("crop_pct", fmt_float(*hp.crop_pct), src("crop_pct"));
  if (!hp.interpolation.empty()) row("interpolation", hp.interpolation, src("interpolation"));
  if (!hp.architecture.empty()) row("architecture", hp.architecture, src("architecture"));
  if (hp.source.count("pos_prefix")) row("pos_prefix", std::to_string(hp.pos_prefix), src("pos_prefix"));
  if (!w.pos_embed.empty()) {  // what --size would do without --pos-interp
    const PosInterpChoice pi = default_pos_interp(hp);
    row("pos_interp", pos_interp_name(pi.mode), "default for --size: " + pi.why + "; " + pos_interp_call(pi.mode));
  }
  if (!hp.labels.empty()) {
    // All names when there are few (the bundled model's 10); the first five of a long list (ImageNet's 1000).
    std::string names;
    const size_t shown = hp.labels.size() <= 12 ? hp.labels.size() : 5;
    for (size_t i = 0; i < shown; ++i) names += (i ? ", " : "") + hp.labels[i];
    if (shown < hp.labels.size()) names += ", ...";
    row("labels", std::to_string(hp.labels.size()) + " names: " + names, src("labels"));
  }
  if (hp.default_layer) row("default_layer", std::to_string(*hp.default_layer), src("default_layer"));
  if (hp.default_head) row("default_head", *hp.default_head, src("default_head"));
  std::vector<std::string> notes = w.notices;
  try {  // the default view render and eval would draw: a bad config default is shown here, not first there
    select_view(w.hp, RenderOptions{});
  } catch (const Error& e) {
    notes.push_back(std::string("render/eval will refuse the default view: ") + e.what());
  }
  if (!notes.empty()) {
    o << "notes:\n";
    for (const auto& n : notes) o << "  " << n << "\n";
  }
  return o.str();
}

}  // namespace attnmap
