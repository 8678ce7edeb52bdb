#include "model/pos_embed.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "core/tensor.hpp"
#include "model/rope.hpp"
#include "model/rel_pos_resize.hpp"

namespace attnmap {

namespace {

// The four cubic-convolution weights for the taps at floor(x) - 1 .. floor(x) + 2, t = x - floor(x);
// Keys' kernel with a = -0.75 as PyTorch's get_cubic_upsample_coefficients.
void cubic_weights(double t, double w[4]) {
  const double a = -0.75;
  auto near = [a](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [a](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// For each output index along one axis: k source indices (clamped to the border) and their weights.
struct Taps {
  int k = 4;
  std::vector<int> idx;    // (out, k)
  std::vector<double> wt;  // (out, k)
};

// How one axis is sampled, as PyTorch's upsample kernels see it: `scale` is the source step per output
// sample (area_pixel_compute_scale: in/out for a size, 1/scale_factor for a given scale factor, (in-1)/(out-1)
// with align_corners), `antialias` picks the _upsample_bicubic2d_aa kernel.
struct AxisRule {
  double scale = 1.0;
  bool align_corners = false;
  bool antialias = false;
};

// PyTorch's upsample_bicubic2d / upsample_bilinear2d taps (antialias=False): source coordinate
// scale * (dst + 0.5) - 0.5 (align_corners: scale * dst); linear clamps it at 0, cubic does not.
Taps make_taps(int in, int out, const AxisRule& r, bool cubic) {
  Taps t;
  t.idx.resize(static_cast<size_t>(out) * 4);
  t.wt.resize(static_cast<size_t>(out) * 4);
  for (int o = 0; o < out; ++o) {
    double src = r.align_corners ? r.scale * o : r.scale * (o + 0.5) - 0.5;
    if (!cubic && !r.align_corners) src = std::max(0.0, src);  // area_pixel_compute_source_index, linear
    const double f = std::floor(src);
    double w[4] = {0.0, 1.0 - (src - f), src - f, 0.0};  // linear: the taps at floor(x) and floor(x) + 1
    if (cubic) cubic_weights(src - f, w);
    for (int k = 0; k < 4; ++k) {
      t.idx[static_cast<size_t>(o) * 4 + static_cast<size_t>(k)] =
          std::clamp(static_cast<int>(f) - 1 + k, 0, in - 1);
      t.wt[static_cast<size_t>(o) * 4 + static_cast<size_t>(k)] = w[k];
    }
  }
  return t;
}

// PyTorch's antialiased bicubic (_upsample_bicubic2d_aa, _compute_weights_aa; PIL's resampling): Keys'
// kernel with a = -0.5, widened by the scale when shrinking (support 2 * scale), centre scale * (dst + 0.5);
// taps outside the input are dropped (not clamped) and the rest renormalised to sum 1.
double aa_cubic(double x) {
  const double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

Taps make_aa_taps(int in, int out, const AxisRule& r) {
  const double support = r.scale >= 1.0 ? 2.0 * r.scale : 2.0;
  const double invscale = r.scale >= 1.0 ? 1.0 / r.scale : 1.0;
  std::vector<int> lo(static_cast<size_t>(out)), n(static_cast<size_t>(out));
  Taps t;
  t.k = 1;
  for (int o = 0; o < out; ++o) {
    const double center = r.scale * (o + 0.5);
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);  // truncation, as PyTorch's cast
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in);
    lo[static_cast<size_t>(o)] = xmin;
    n[static_cast<size_t>(o)] = std::max(xmax - xmin, 0);
    t.k = std::max(t.k, n[static_cast<size_t>(o)]);
  }
  const size_t K = static_cast<size_t>(t.k);
  t.idx.assign(static_cast<size_t>(out) * K, 0);
  t.wt.assign(static_cast<size_t>(out) * K, 0.0);
  for (int o = 0; o < out; ++o) {
    const double center = r.scale * (o + 0.5);
    const size_t row = static_cast<size_t>(o) * K;
    double total = 0.0;
    for (int j = 0; j < n[static_cast<size_t>(o)]; ++j) {
      const int x = lo[static_cast<size_t>(o)] + j;
      const double w = aa_cubic((x - center + 0.5) * invscale);
      t.idx[row + static_cast<size_t>(j)] = x;
      t.wt[row + static_cast<size_t>(j)] = w;
      total += w;
    }
    if (total != 0.0)
      for (int j = 0; j < n[static_cast<size_t>(o)]; ++j) t.wt[row + static_cast<size_t>(j)] /= total;
  }
  return t;
}

Taps axis_taps(int in, int out, const AxisRule& r, bool cubic) {
  return r.antialias ? make_aa_taps(in, out, r) : make_taps(in, out, r, cubic);
}

// One pass along a strided axis: out[i] = sum_k wt[i, k] * in[idx[i, k]].
double apply_taps(const Taps& t, int i, const double* base, size_t stride) {
  const size_t K = static_cast<size_t>(t.k), row = static_cast<size_t>(i) * K;
  double s = 0;
  for (size_t k = 0; k < K; ++k) s += t.wt[row + k] * base[static_cast<size_t>(t.idx[row + k]) * stride];
  return s;
}

std::vector<float> resize_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h, int out_w,
                                 bool cubic, const AxisRule& ry, const AxisRule& rx) {
  const std::string what = cubic ? "bicubic resize" : "bilinear resize";
  if (C <= 0 || in_h <= 0 || in_w <= 0 || out_h <= 0 || out_w <= 0)
    throw Error(what + ": empty size " + std::to_string(in_h) + "x" + std::to_string(in_w) + " -> " +
                std::to_string(out_h) + "x" + std::to_string(out_w));
  const size_t in_plane = checked_mul(static_cast<size_t>(in_h), static_cast<size_t>(in_w), what.c_str());
  const size_t out_plane =
      checked_mul(static_cast<size_t>(out_h), static_cast<size_t>(out_w), what.c_str());
  if (in.size() != checked_mul(in_plane, static_cast<size_t>(C), what.c_str()))
    throw Error(what + ": " + std::to_string(in.size()) + " values are not (" + std::to_string(C) +
                ", " + std::to_string(in_h) + ", " + std::to_string(in_w) + ")");
  std::vector<float> out(checked_mul(out_plane, static_cast<size_t>(C), what.c_str()));
  const Taps ty = axis_taps(in_h, out_h, ry, cubic), tx = axis_taps(in_w, out_w, rx, cubic);
  std::vector<double> plane(in_plane);                                      // (in_h, in_w) one channel
  std::vector<double> rows(static_cast<size_t>(in_h) * static_cast<size_t>(out_w));  // (in_h, out_w)
  for (int c = 0; c < C; ++c) {
    std::copy_n(in.begin() + static_cast<long>(static_cast<size_t>(c) * in_plane), in_plane, plane.begin());
    for (int y = 0; y < in_h; ++y)  // along the width first
      for (int x = 0; x < out_w; ++x)
        rows[static_cast<size_t>(y) * out_w + static_cast<size_t>(x)] =
            apply_taps(tx, x, plane.data() + static_cast<size_t>(y) * in_w, 1);
    float* o = out.data() + static_cast<size_t>(c) * out_plane;  // (out_h, out_w)
    for (int y = 0; y < out_h; ++y)
      for (int x = 0; x < out_w; ++x)
        o[static_cast<size_t>(y) * out_w + static_cast<size_t>(x)] =
            static_cast<float>(apply_taps(ty, y, rows.data() + x, static_cast<size_t>(out_w)));
  }
  return out;
}

// The axis rule of a mode for in -> out samples (see PosInterp in the header).
AxisRule axis_rule(PosInterp m, int in, int out) {
  AxisRule r;
  r.scale = static_cast<double>(in) / out;  // size=: in/out
  switch (m) {
    case PosInterp::Timm:
      r.antialias = true;
      break;
    case PosInterp::Dino:
    case PosInterp::HfLegacy:
      // scale_factor = (g + 0.1) / M; PyTorch samples at 1 / scale_factor (output size floor(M * sf) = g).
      r.scale = 1.0 / ((out + 0.1) / in);
      break;
    case PosInterp::Torchvision:
      r.align_corners = true;
      r.scale = out > 1 ? static_cast<double>(in - 1) / (out - 1) : 0.0;
      break;
    case PosInterp::TimmLegacy:
    case PosInterp::Hf:
      break;
  }
  return r;
}

}  // namespace

std::vector<float> bicubic_resize_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h,
                                         int out_w) {
  return resize_planes(in, C, in_h, in_w, out_h, out_w, true, axis_rule(PosInterp::Hf, in_h, out_h),
                       axis_rule(PosInterp::Hf, in_w, out_w));
}

std::vector<float> interpolate_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h,
                                      int out_w, PosInterp mode) {
  return resize_planes(in, C, in_h, in_w, out_h, out_w, true, axis_rule(mode, in_h, out_h),
                       axis_rule(mode, in_w, out_w));
}

std::vector<float> bilinear_resize_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h,
                                          int out_w) {
  return resize_planes(in, C, in_h, in_w, out_h, out_w, false, axis_rule(PosInterp::Hf, in_h, out_h),
                       axis_rule(PosInterp::Hf, in_w, out_w));
}

namespace {

struct ModeName {
  PosInterp mode;
  const char* name;
  const char* call;
};

constexpr ModeName kModes[] = {
    {PosInterp::Timm, "timm", "F.interpolate(size=(h, w), mode='bicubic', antialias=True)"},
    {PosInterp::TimmLegacy, "timm-legacy", "F.interpolate(size=(h, w), mode='bicubic', align_corners=False)"},
    {PosInterp::Dino, "dino",
     "F.interpolate(scale_factor=((h + 0.1) / M, (w + 0.1) / M), mode='bicubic', align_corners=False)"},
    {PosInterp::Hf, "hf", "F.interpolate(size=(h, w), mode='bicubic', align_corners=False)"},
    {PosInterp::HfLegacy, "hf-legacy",
     "F.interpolate(scale_factor=((h + 0.1) / M, (w + 0.1) / M), mode='bicubic', align_corners=False)"},
    {PosInterp::Torchvision, "torchvision", "F.interpolate(size=(h, w), mode='bicubic', align_corners=True)"},
};

}  // namespace

std::string pos_interp_name(PosInterp m) {
  for (const auto& e : kModes)
    if (e.mode == m) return e.name;
  return "?";
}

std::string pos_interp_call(PosInterp m) {
  for (const auto& e : kModes)
    if (e.mode == m) return e.call;
  return "?";
}

PosInterp parse_pos_interp(const std::string& s) {
  std::string names;
  for (const auto& e : kModes) {
    if (s == e.name) return e.mode;
    names += std::string(names.empty() ? "" : ", ") + e.name;
  }
  throw Error("expects one of " + names + ", found '" + s + "'");
}

PosInterpChoice default_pos_interp(const HParams& hp) {
  const LayoutInfo& info = layout_info(hp.layout);
  if (hp.layout == Layout::Dinov2 && hp.num_registers > 0)
    return {PosInterp::Timm,
            "facebookresearch DINOv2 names with register tokens: its hub's *_reg models set interpolate_offset=0 "
            "and interpolate_antialias=True, timm's call"};
  if (hp.layout == Layout::HfDinov2 && hp.num_registers > 0)
    return {PosInterp::Timm, "Hugging Face Dinov2WithRegistersEmbeddings.interpolate_pos_encoding: size=, bicubic, "
                             "antialias=True (timm's call)"};
  return {info.pos_interp, info.pos_why};
}

void resample_pos_embed(ViTWeights& w, int image_w, int image_h, PosInterp mode) {
  HParams& hp = w.hp;
  const std::string size = std::to_string(image_w) + "x" + std::to_string(image_h);
  if (image_w <= 0 || image_h <= 0 || image_w % hp.patch != 0 || image_h % hp.patch != 0)
    throw Error(size + " (width x height) is not a positive multiple of the patch size " +
                std::to_string(hp.patch) + " in both directions");
  const int gw = image_w / hp.patch, gh = image_h / hp.patch;
  // Attention memory grows with the square of the token count (T x T floats per head): beyond 96x96 patches
  // (--size 1536 at patch 16) one image's attention would need gigabytes.
  constexpr int64_t kMaxPatches = 96 * 96;
  if (static_cast<int64_t>(gw) * gh > kMaxPatches)
    throw Error(size + " gives " + std::to_string(static_cast<int64_t>(gw) * gh) +
                " patch tokens; at most " + std::to_string(kMaxPatches) +
                " are allowed (each head's attention matrix holds tokens x tokens floats)");
  if (gw == hp.grid_w && gh == hp.grid_h) {
    hp.image_w = image_w;
    hp.image_h = image_h;
    hp.source["pos_interp"] = pos_interp_name(mode) + " (same grid: the embeddings are unchanged)";
    return;  // as timm: the same grid leaves the embeddings untouched
  }
  check_rel_pos_resizable(hp);  // BEiT: refused before anything changes
  const int D = hp.dim;
  if (!w.pos_embed.empty()) {
    const size_t n_old = static_cast<size_t>(hp.grid_w) * static_cast<size_t>(hp.grid_h);
    const size_t rows = w.pos_embed.size() / static_cast<size_t>(D);
    if (rows < n_old || rows * static_cast<size_t>(D) != w.pos_embed.size())
      throw Error("pos_embed has " + std::to_string(rows) + " rows, fewer than the " +
                  std::to_string(hp.grid_h) + "x" + std::to_string(hp.grid_w) + " patch grid");
    const size_t prefix = rows - n_old;
    // (N, D) patch rows -> (D, gh, gw) planes, the layout F.interpolate sees after permute(0, 3, 1, 2).
    std::vector<float> planes(checked_mul(n_old, static_cast<size_t>(D), "pos_embed"));
    for (size_t n = 0; n < n_old; ++n)
      for (int d = 0; d < D; ++d)
        planes[static_cast<size_t>(d) * n_old + n] =
            w.pos_embed[(prefix + n) * static_cast<size_t>(D) + static_cast<size_t>(d)];
    const std::vector<float> res =
        interpolate_planes(planes, D, hp.grid_h, hp.grid_w, gh, gw, mode);  // (D, gh', gw')
    const size_t n_new = static_cast<size_t>(gw) * static_cast<size_t>(gh);
    std::vector<float> pos(checked_mul(prefix + n_new, static_cast<size_t>(D), "pos_embed"));
    std::copy_n(w.pos_embed.begin(), prefix * static_cast<size_t>(D),
                pos.begin());  // prefix rows as they are
    for (size_t n = 0; n < n_new; ++n)
      for (int d = 0; d < D; ++d)
        pos[(prefix + n) * static_cast<size_t>(D) + static_cast<size_t>(d)] =
            res[static_cast<size_t>(d) * n_new + n];
    w.pos_embed = std::move(pos);
  }
  hp.image_w = image_w;
  hp.image_h = image_h;
  hp.grid_w = gw;
  hp.grid_h = gh;
  resample_rel_pos(w, gh, gw);  // BEiT: the relative position tables as timm resizes them (issue 29)
  hp.source["image_size"] = hp.pos_sincos ? "command line (" + setting_ref("size") + "; SimpleViT's sin-cos positions computed for the grid)"
                                          : "command line (" + setting_ref("size") + "; position embeddings resampled: " + setting_ref("pos_interp") + " " +
                                                pos_interp_name(mode) + ")";
  hp.source["pos_interp"] = pos_interp_name(mode);
  if (hp.rope != Rope::None) {  // timm Eva: the rotary tables for the new grid (EVA-02 ref_feat_shape, DINOv3 [-1, 1])
    hp.source["image_size"] += "; rotary positions computed for the grid";
    prepare_rope(w);
  }
}

void resample_pos_embed(ViTWeights& w, int image_w, int image_h) {
  resample_pos_embed(w, image_w, image_h, default_pos_interp(w.hp).mode);
}

// SimpleViT's sin-cos table (model/pos_embed.hpp).
void sincos_2d(float* out, int gh, int gw, int D) {
  if (D % 4 != 0 || D < 8) throw Error("sin-cos positions need D a multiple of 4 and at least 8, found " + std::to_string(D));
  const int q = D / 4;
  std::vector<float> omega(static_cast<size_t>(q));  // float32 as torch computes it
  for (int i = 0; i < q; ++i)
    omega[static_cast<size_t>(i)] = 1.0f / std::pow(10000.0f, static_cast<float>(i) / static_cast<float>(q - 1));
  for (int y = 0; y < gh; ++y)
    for (int x = 0; x < gw; ++x) {
      float* row = out + (static_cast<size_t>(y) * gw + x) * D;
      for (int i = 0; i < q; ++i) {
        const float ax = static_cast<float>(x) * omega[static_cast<size_t>(i)];
        const float ay = static_cast<float>(y) * omega[static_cast<size_t>(i)];
        row[i] = std::sin(ax);
        row[q + i] = std::cos(ax);
        row[2 * q + i] = std::sin(ay);
        row[3 * q + i] = std::cos(ay);
      }
    }
}

}  // namespace attnmap
