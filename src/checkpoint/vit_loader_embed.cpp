// vit_loader_embed.cpp - build_vit's patch embedding, prefix tokens and positions (see vit_loader.hpp)
#include <algorithm>
#include <cmath>

#include "checkpoint/vit_loader_internal.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {
namespace detail {

namespace {

bool timm_like(Layout l) {
  return l == Layout::Timm || l == Layout::TimmClip || l == Layout::TimmSiglip || l == Layout::Deit3 ||
         l == Layout::Mae || l == Layout::Dinov2 || l == Layout::Eva ||
         l == Layout::Beit;
}

}  // namespace

// A patch embedding conv (D, 3, P, P) into w.patch_embed: sets hp.dim and hp.patch (checked against a config
// patch_size) and returns D.
int64_t take_patch_conv(Loader& ld, const FileConfig& fc, ViTWeights& w) {
  const std::string& path = ld.path();
  HParams& hp = w.hp;
  const std::string pe_name = ld.file_name("patch_embed.proj.weight");
  const Tensor& pe = ld.need("patch_embed.proj.weight", "(D, 3, P, P)");
  if (pe.rank() != 4 || dim(pe, 1) != 3 || dim(pe, 2) != dim(pe, 3))
    throw ld.shape_error("patch_embed.proj.weight", "(D, 3, P, P)", pe.shape);
  const int64_t D = dim(pe, 0);
  hp.dim = to_int(D, path + ": " + pe_name);
  hp.patch = to_int(dim(pe, 2), path + ": patch size");
  if (fc.patch_size && *fc.patch_size != hp.patch) {
    throw Error(path + ": " + src_of(fc, "patch_size") + " patch_size " + std::to_string(*fc.patch_size) +
                " does not match " + pe_name + " " + shape_str(pe.shape));
  }
  // A config that states it (and agrees, checked above) is the source, as for the weight-less fields.
  hp.source["patch_size"] = fc.patch_size ? src_of(fc, "patch_size") : "inferred from " + pe_name;
  w.patch_embed.weight = pe.data;  // (D, 3, P, P) == (D, 3*P*P) in (channel, row, column) order
  w.patch_embed.out = hp.dim;
  w.patch_embed.in = 3 * hp.patch * hp.patch;
  w.patch_embed.bias = ld.take_opt("patch_embed.proj.bias", {D});
  return D;
}

// vit-pytorch: Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)'), LayerNorm(3 P P), Linear(3 P P, D),
// LayerNorm(D). The Linear's columns and the first LayerNorm are reordered from (row, column, channel) to
// attnmap's (channel, row, column) patch vector; a LayerNorm of a permuted vector is the permuted LayerNorm.
int64_t take_patch_linear(Loader& ld, const FileConfig& fc, ViTWeights& w) {
  HParams& hp = w.hp;
  const std::string pe_name = ld.file_name("patch_embed.proj.weight");
  const Tensor& pe = ld.need("patch_embed.proj.weight", "(D, 3*P*P)");
  if (pe.rank() != 2) throw ld.shape_error("patch_embed.proj.weight", "(D, 3*P*P)", pe.shape);
  const int64_t D = dim(pe, 0), PD = dim(pe, 1);
  const auto P = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(PD) / 3.0)));
  if (P <= 0 || 3 * P * P != PD)
    throw Error(ld.path() + ": tensor '" + pe_name + "' has " + std::to_string(PD) +
                " input features, which is not 3*P*P for a square patch (non-square patches are not supported)");
  hp.dim = to_int(D, ld.path() + ": " + pe_name);
  hp.patch = static_cast<int>(P);
  if (fc.patch_size && *fc.patch_size != hp.patch)
    throw Error(ld.path() + ": " + src_of(fc, "patch_size") + " patch_size " + std::to_string(*fc.patch_size) +
                " does not match " + pe_name + " " + shape_str(pe.shape));
  hp.source["patch_size"] = fc.patch_size ? src_of(fc, "patch_size") : "inferred from " + pe_name;
  auto reorder = [P](const float* src, float* dst, int64_t rows) {  // (rows, P*P*3) -> (rows, 3*P*P)
    const int64_t PP = P * P;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t i = 0; i < PP; ++i) dst[r * 3 * PP + c * PP + i] = src[r * 3 * PP + i * 3 + c];
  };
  w.patch_embed.weight.resize(static_cast<size_t>(D * PD));
  reorder(pe.data.data(), w.patch_embed.weight.mutable_data(), D);
  w.patch_embed.out = hp.dim;
  w.patch_embed.in = static_cast<int>(PD);
  w.patch_embed.bias = ld.take_opt("patch_embed.proj.bias", {D});
  const LayerNormW in = take_norm_opt(ld, "patch_norm_in", PD);
  if (in.present()) {
    w.patch_norm_in.weight.resize(static_cast<size_t>(PD));
    w.patch_norm_in.bias.resize(static_cast<size_t>(PD));
    reorder(in.weight.data(), w.patch_norm_in.weight.mutable_data(), 1);
    reorder(in.bias.data(), w.patch_norm_in.bias.mutable_data(), 1);
  }
  w.patch_norm_out = take_norm_opt(ld, "patch_norm_out", D);
  return D;
}

// The prefix tokens, each (1, K, D): the class token into w.cls_token (absent: no class token, where the
// layout allows it), a distillation token (DeiT), then registers (timm reg_token or DINOv2's
// register_tokens) into w.extra_tokens; sets hp.class_token, num_dist, num_registers, num_prefix. Returns
// whether the registers are DINOv2's (inserted after the position embedding is added).
bool take_prefix_tokens(Loader& ld, int64_t D, ViTWeights& w) {
  HParams& hp = w.hp;
  const Layout l = ld.scheme().layout;
  int64_t k = 0;
  const bool may_lack = l == Layout::Timm || l == Layout::TimmSiglip || l == Layout::SimpleVit;
  if (l == Layout::SimpleVit || (may_lack && !ld.has("cls_token"))) {
    hp.class_token = false;
  } else if (l == Layout::VitPytorch && ld.need("cls_token", "(1, D)").numel() == 0) {
    hp.class_token = false;  // vit-pytorch since 2025-11: pool='mean' stores a (0, D) class token
  } else {
    w.cls_token = take_tokens(ld, "cls_token", D, k);
    if (k != 1) throw ld.shape_error("cls_token", shape_str({1, 1, D}), ld.need("cls_token", "").shape);
  }
  if (ld.has("dist_token")) {
    w.extra_tokens = take_tokens(ld, "dist_token", D, k);
    if (k != 1) throw ld.shape_error("dist_token", shape_str({1, 1, D}), ld.need("dist_token", "").shape);
    hp.num_dist = 1;
  }
  bool fb_registers = false;
  for (const char* reg : {"reg_token", "register_tokens"}) {
    if (!ld.has(reg)) continue;
    if (hp.num_registers) throw Error(ld.path() + ": both reg_token and register_tokens present");
    const Floats r = take_tokens(ld, reg, D, k);
    w.extra_tokens.insert_back(r.begin(), r.end());
    hp.num_registers = static_cast<int>(k);
    fb_registers = std::string(reg) == "register_tokens";
  }
  hp.num_prefix = (hp.class_token ? 1 : 0) + hp.num_dist + hp.num_registers;
  return fb_registers;
}

namespace {

// How many prefix tokens have a position row, of a pos_embed with `rows` rows: DINOv2 registers get none
// (pos_embed 1+N rows); timm reg_token models either embed every prefix token (1+R+N) or none
// (no_embed_class, N rows): the row count tells them apart, the config image size settles a tie.
int pos_prefix_rows(const HParams& hp, Layout layout, const FileConfig& fc, bool fb_registers, int64_t rows) {
  std::vector<int> candidates;
  if (layout == Layout::Cait) {
    candidates = {0};  // CaiT: pos_embed (1, N, D) over the patches; the class token joins after the blocks
  } else if (fb_registers) {
    candidates = {1};
  } else if (!timm_like(layout)) {
    candidates = {hp.num_prefix};  // Hugging Face, torchvision, CLIP and vit-pytorch embed the class token
  } else if (hp.num_registers) {
    candidates = {0, hp.num_prefix};
  } else {
    candidates = {hp.num_prefix, 0};
  }
  int pp = -1;
  if (fc.image_w && *fc.image_w > 0 && *fc.image_h > 0 && hp.patch > 0) {
    const int64_t n = static_cast<int64_t>(*fc.image_w / hp.patch) * (*fc.image_h / hp.patch);
    for (int c : candidates)
      if (rows - c == n) pp = c;
  } else {
    for (int c : candidates) {
      const int64_t n = rows - c;
      const auto g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(n, 0)))));
      if (pp < 0 && n > 0 && g * g == n) pp = c;
    }
  }
  if (pp < 0) pp = candidates.front();  // resolve_grid reports the mismatch
  return pp;
}

}  // namespace

// The position embedding (1, pos_prefix+N, D) into w.pos_embed; sets hp.pos_prefix and the grid. SimpleViT
// has none in its file: its 2-D sin-cos table is computed for the grid (hp.pos_sincos).
void take_pos_embed(Loader& ld, const FileConfig& fc, bool fb_registers, int64_t D, ViTWeights& w) {
  HParams& hp = w.hp;
  if (ld.scheme().layout == Layout::SimpleVit) {
    if (D % 4 != 0) throw Error(ld.path() + ": SimpleViT's sin-cos position table needs D divisible by 4, found D = " + std::to_string(D));
    hp.pos_sincos = true;
    hp.pos_prefix = 0;
    resolve_grid(hp, fc, 0, false, ld.path(), "",
                 "default (224; SimpleViT computes its sin-cos positions for any grid: " + setting_ref("size") +
                     " or config image_size)");
    return;
  }
  // DINOv3 (timm use_abs_pos_emb=False; facebookresearch's has none at all): rotary only
  if ((ld.scheme().layout == Layout::Eva && !ld.has("pos_embed")) || ld.scheme().layout == Layout::Dinov3) {
    hp.pos_prefix = 0;
    resolve_grid(hp, fc, 0, false, ld.path(), "",
                 "default (224; no position table: the rotary positions are computed for any grid, " + setting_ref("size") +
                     " or config image_size)");
    return;
  }
  const std::string pos_name = ld.file_name("pos_embed");
  const Tensor& pos = ld.need("pos_embed", "(1, 1+N, D)");
  if (!((pos.rank() == 3 && dim(pos, 0) == 1) || pos.rank() == 2) || pos.shape.back() != D || dim(pos, pos.rank() - 2) < 1)
    throw ld.shape_error("pos_embed", "(1, 1+N, " + std::to_string(D) + ")", pos.shape);
  const int64_t rows = dim(pos, pos.rank() - 2);
  const int pp = pos_prefix_rows(hp, ld.scheme().layout, fc, fb_registers, rows);
  hp.pos_prefix = pp;
  hp.source["pos_prefix"] = "inferred from " + pos_name + " rows (" + std::to_string(rows) + ")";
  resolve_grid(hp, fc, rows - pp, true, ld.path(), pos_name);
  w.pos_embed = pos.data;
}

}  // namespace detail
}  // namespace attnmap
