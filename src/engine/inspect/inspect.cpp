// inspect.cpp - what attnmap made of a checkpoint (inspect.hpp: describe_model).
#include "engine/inspect/inspect.hpp"

#include <cstdio>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "engine/render.hpp"
#include "model/cait.hpp"
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

// Every tensor of the file: how many were read, and those not read grouped by the reason they cannot change
// the maps (a tensor neither read nor listed stops the load, so none is left unexplained).
void describe_tensors(std::ostringstream& o, const ViTWeights& w) {
  if (w.tensors.empty()) return;
  std::vector<std::string> reasons;
  std::map<std::string, std::vector<const ViTWeights::TensorUse*>> by_reason;
  size_t read = 0;
  for (const auto& t : w.tensors) {
    if (t.reason.empty()) {
      ++read;
      continue;
    }
    if (!by_reason.count(t.reason)) reasons.push_back(t.reason);
    by_reason[t.reason].push_back(&t);
  }
  o << "tensors:     " << w.tensors.size() << " in the file: " << read << " read";
  if (reasons.empty()) {
    o << ", every one\n";
    return;
  }
  o << ", " << (w.tensors.size() - read) << " not read (they cannot change the maps):\n";
  for (const std::string& r : reasons) {
    const auto& ts = by_reason[r];
    std::string names;
    for (size_t i = 0; i < ts.size() && i < 4; ++i) names += (i ? ", " : "") + ts[i]->name + " " + ts[i]->shape;
    if (ts.size() > 4) names += ", ... (" + std::to_string(ts.size()) + " tensors)";
    o << "  " << names << ": " << r << "\n";
  }
}

}  // namespace

namespace {

// CaiT (model/cait.hpp): which blocks are self-attention and which class-attention, as --layer counts them;
// "" for any other model.
std::string cait_blocks(const ViTWeights& w) {
  const HParams& hp = w.hp;
  if (hp.class_attn_blocks == 0) return "";
  std::ostringstream o;
  const int sa = hp.depth - hp.class_attn_blocks;
  const auto span = [](int a, int b) { return a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b); };
  if (sa > 0)
    o << "  blocks " << span(0, sa - 1) << ":  self-attention (talking heads proj_l / proj_w, LayerScale), over the "
      << "patches only (no class token: the map is the mean of the patch queries' rows of the softmax, before proj_w)\n";
  for (int l = sa; l < hp.depth; ++l)
    o << "  " << block_name(hp, l) << ":  the class token alone attends over [class; patches] (blocks_token_only."
      << (l - sa) << ", mlp " << w.blocks[static_cast<size_t>(l)].fc1.out << ")" << (l == hp.depth - 1 ? "; the default view" : "")
      << "\n";
  return o.str();
}

// BEiT's relative position bias (issue 29): which tables, for which grid.
std::string rel_bias_line(const ViTWeights& w) {
  bool own = false;
  for (const BlockWeights& b : w.blocks) own = own || !b.rel_pos_table.empty();
  const std::string kind = own && !w.rel_pos_table_shared.empty() ? "per block plus a shared table"
                           : own                                   ? "a table per block"
                                                                   : "one table shared by every block";
  return "rel. bias:   " + kind + ", " + std::to_string(w.hp.rel_pos_grid_h) + " x " + std::to_string(w.hp.rel_pos_grid_w) +
         " grid, added to the scores before the softmax (BEiT)\n";
}

// The positions line(s): the absolute embedding's rows, or a BEiT's relative position bias (issue 29).
std::string positions_lines(const ViTWeights& w) {
  const HParams& hp = w.hp;
  const int N = hp.grid_w * hp.grid_h;
  std::ostringstream o;
  if (!w.pos_embed.empty()) {
    std::string who = hp.pos_prefix == 0 ? "patches only"
                      : hp.pos_prefix == hp.num_prefix ? "every prefix token and the patches"
                      : hp.pos_prefix == 1 ? "the class token and the patches; the other prefix tokens have none"
                                                       : std::to_string(hp.pos_prefix) + " prefix token(s) and the patches";
    o << "positions:   " << (hp.pos_prefix + N) << " rows: " << who << "\n";
  } else {
    o << (hp.rel_pos                 ? "positions:   no absolute embedding (a relative position bias, below)\n"
          : hp.rope != Rope::None ? "positions:   no absolute embedding (rotary positions, below)\n"
                                  : "positions:   none\n");
  }
  if (hp.rel_pos) o << rel_bias_line(w);  // BEiT (issue 29)
  return o.str();
}

// timm Eva's rotary positions on the patch queries and keys (issue 29); "" without.
std::string rotary_line(const HParams& hp) {
  if (hp.rope == Rope::None) return "";
  std::ostringstream o;
  o << "rotary:      " << (hp.rope == Rope::Dinov3 ? "DINOv3" : "EVA-02") << " RoPE on the patch tokens' queries and keys ("
    << (hp.rope_half ? "rotate-half" : "interleaved") << " layout, "
    << (hp.rope_periods.empty() ? "temperature " + fmt_float(hp.rope_temperature) : std::string("the periods stored in the file"))
    << (hp.rope_ref_h ? ", grid scaled to " + std::to_string(hp.rope_ref_h) + "x" + std::to_string(hp.rope_ref_w) : std::string())
    << "); prefix tokens unrotated\n";
  return o.str();
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
  if (w.hub)
    o << "hub:         " << w.hub->repo << " (revision " << w.hub->revision << ", commit " << w.hub->commit
      << "; huggingface_hub's cache)\n";
  o << "format:      " << (w.format.empty() ? "json" : w.format == "pth" ? "pth (torch.save zip archive)" : w.format) << "\n";
  if (w.format == "pth") {
    o << "holds:       " << w.pth_holds << "\n";
    o << "state dict:  " << w.pth_used << "\n";
  }
  o << "layout:      " << layout_info(hp.layout).family << "\n";
  o << "tokens:      " << hp.tokens() << " = "
    << (hp.cls_is_mean ? "1 class (mean of patches)" : hp.class_token ? "1 class" : "no class token") << " + "
    << hp.num_dist << " distillation + " << hp.num_registers << " register + " << N << " patch\n";
  o << "grid:        " << hp.grid_h << " x " << hp.grid_w << " patches (rows x columns) of " << hp.patch << " px, input "
    << hp.image_h << " x " << hp.image_w << " px (height x width)\n";
  o << positions_lines(w);
  o << "depth:       " << hp.depth << (hp.depth == 1 ? " block\n" : " blocks\n");
  o << cait_blocks(w);
  o << "heads:       " << hp.num_heads << " (head dim " << hp.head_dim << ", D = " << hp.dim << ")\n";
  o << "mlp:         "
    << (!hp.mlp_dim ? std::string("none")
                    : std::to_string(hp.mlp_dim) + (hp.swiglu ? " (SwiGLU)" : " (" + activation_name(hp.act) + ")"))
    << "\n";
  if (hp.has_mlp_norm) o << "mlp norm:    yes (sub-LayerNorm of the hidden units before fc2)\n";
  o << "layer scale: " << (hp.layer_scale ? "yes" : "no") << "\n";
  o << rotary_line(hp);
  o << "qk norm:     " << (hp.qk_norm ? "yes (per-head LayerNorm of queries and keys)" : "no") << "\n";
  if (w.norm_pre.present()) o << "pre-norm:    yes (LayerNorm of the tokens before the first block)\n";
  if (hp.class_attn_blocks > 0)
    o << "map row:     the class token's row in class-attention blocks; the mean of the patch queries' rows in "
         "self-attention blocks\n";
  else
    o << "map row:     " << (hp.class_token ? "the class token's attention row"
                                            : "no class token: the mean of the patch queries' rows (attention received)")
      << "\n";
  o << "classifier:  " << (w.head.present() ? std::to_string(w.head.out) + " classes, reading the " + pool_name(hp.pool)
                                            : std::string("none")) << "\n";
  o << "parameters:  " << with_commas(w.param_count) << " (every floating-point tensor in the file)\n";
  o << "config:\n";
  row("image_size", std::to_string(hp.image_h) + "x" + std::to_string(hp.image_w), src("image_size"));
  row("patch_size", std::to_string(hp.patch), src("patch_size"));
  row("depth", std::to_string(hp.depth), src("depth"));
  row("num_heads", std::to_string(hp.num_heads), src("num_heads"));
  row("layer_norm_eps", fmt_float(hp.eps), src("layer_norm_eps"));
  if (hp.source.count("act")) row("activation", activation_name(hp.act), src("act"));
  if (hp.source.count("mlp")) row("mlp", "SwiGLU (packed)", src("mlp"));
  if (hp.source.count("rope")) row("rope", hp.rope == Rope::None ? "none" : hp.rope == Rope::Dinov3 ? "dinov3" : "eva02 cat", src("rope"));
  if (hp.source.count("pool")) row("pool", pool_name(hp.pool), src("pool"));
  row("mean", rgb(hp.mean), src("mean"));
  row("std", rgb(hp.std), src("std"));
  if (hp.crop_pct) row("crop_pct", fmt_float(*hp.crop_pct), src("crop_pct"));
  if (!hp.interpolation.empty()) row("interpolation", hp.interpolation, src("interpolation"));
  if (!hp.architecture.empty()) row("architecture", hp.architecture, src("architecture"));
  if (hp.source.count("pos_prefix")) row("pos_prefix", std::to_string(hp.pos_prefix), src("pos_prefix"));
  if (!w.pos_embed.empty()) {  // what --size would do without --pos-interp
    const PosInterpChoice pi = default_pos_interp(hp);
    row("pos_interp", pos_interp_name(pi.mode), "default for " + setting_ref("size") + ": " + pi.why + "; " + pos_interp_call(pi.mode));
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
  describe_tensors(o, w);
  if (!notes.empty()) {
    o << "notes:\n";
    for (const auto& n : notes) o << "  " << n << "\n";
  }
  return spelled_settings(o.str());  // the same text from either front end
}

}  // namespace attnmap
