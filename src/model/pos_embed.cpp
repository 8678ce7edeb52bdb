#include "model/pos_embed.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/tensor.hpp"

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

// For each output index along one axis: the four clamped source indices and their weights.
struct Taps {
  std::vector<int> idx;    // (out, 4)
  std::vector<double> wt;  // (out, 4)
};

Taps make_taps(int in, int out, bool cubic) {
  Taps t;
  t.idx.resize(static_cast<size_t>(out) * 4);
  t.wt.resize(static_cast<size_t>(out) * 4);
  const double scale = static_cast<double>(in) / out;  // PyTorch: in/out when a size is given
  for (int o = 0; o < out; ++o) {
    double src = scale * (o + 0.5) - 0.5;  // align_corners=False
    if (!cubic) src = std::max(0.0, src);  // PyTorch clamps the linear source coordinate at 0, not the cubic
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

std::vector<float> resize_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h, int out_w,
                                 bool cubic) {
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
  const Taps ty = make_taps(in_h, out_h, cubic), tx = make_taps(in_w, out_w, cubic);
  std::vector<double> rows(static_cast<size_t>(in_h) *
                           static_cast<size_t>(out_w));  // (in_h, out_w) one plane
  for (int c = 0; c < C; ++c) {
    const float* p = in.data() + static_cast<size_t>(c) * in_plane;  // (in_h, in_w)
    for (int y = 0; y < in_h; ++y)                                   // along the width first
      for (int x = 0; x < out_w; ++x) {
        double s = 0;
        for (int k = 0; k < 4; ++k)
          s += tx.wt[static_cast<size_t>(x) * 4 + static_cast<size_t>(k)] *
               p[static_cast<size_t>(y) * in_w +
                 static_cast<size_t>(tx.idx[static_cast<size_t>(x) * 4 + static_cast<size_t>(k)])];
        rows[static_cast<size_t>(y) * out_w + static_cast<size_t>(x)] = s;
      }
    float* o = out.data() + static_cast<size_t>(c) * out_plane;  // (out_h, out_w)
    for (int y = 0; y < out_h; ++y)
      for (int x = 0; x < out_w; ++x) {
        double s = 0;
        for (int k = 0; k < 4; ++k)
          s += ty.wt[static_cast<size_t>(y) * 4 + static_cast<size_t>(k)] *
               rows[static_cast<size_t>(ty.idx[static_cast<size_t>(y) * 4 + static_cast<size_t>(k)]) * out_w +
                    static_cast<size_t>(x)];
        o[static_cast<size_t>(y) * out_w + static_cast<size_t>(x)] = static_cast<float>(s);
      }
  }
  return out;
}

}  // namespace

std::vector<float> bicubic_resize_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h,
                                         int out_w) {
  return resize_planes(in, C, in_h, in_w, out_h, out_w, true);
}

std::vector<float> bilinear_resize_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h,
                                          int out_w) {
  return resize_planes(in, C, in_h, in_w, out_h, out_w, false);
}

void resample_pos_embed(ViTWeights& w, int image_w, int image_h) {
  HParams& hp = w.hp;
  const std::string size = std::to_string(image_w) + "x" + std::to_string(image_h);
  if (image_w <= 0 || image_h <= 0 || image_w % hp.patch != 0 || image_h % hp.patch != 0)
    throw Error("--size " + size + " (width x height) is not a positive multiple of the patch size " +
                std::to_string(hp.patch) + " in both directions");
  const int gw = image_w / hp.patch, gh = image_h / hp.patch;
  // Attention memory grows with the square of the token count (T x T floats per head): beyond 96x96 patches
  // (--size 1536 at patch 16) one image's attention would need gigabytes.
  constexpr int64_t kMaxPatches = 96 * 96;
  if (static_cast<int64_t>(gw) * gh > kMaxPatches)
    throw Error("--size " + size + " gives " + std::to_string(static_cast<int64_t>(gw) * gh) +
                " patch tokens; at most " + std::to_string(kMaxPatches) +
                " are allowed (each head's attention matrix holds tokens x tokens floats)");
  if (gw == hp.grid_w && gh == hp.grid_h) {
    hp.image_w = image_w;
    hp.image_h = image_h;
    return;  // as timm: the same grid leaves the embeddings untouched
  }
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
        bicubic_resize_planes(planes, D, hp.grid_h, hp.grid_w, gh, gw);  // (D, gh', gw')
    const size_t n_new = static_cast<size_t>(gw) * static_cast<size_t>(gh);
    std::vector<float> pos(checked_mul(prefix + n_new, static_cast<size_t>(D), "pos_embed"));
    std::copy_n(w.pos_embed.begin(), prefix * static_cast<size_t>(D),
                pos.begin());  // prefix rows as they are
    for (size_t n = 0; n < n_new; ++n)
      for (int d = 0; d < D; ++d)
        pos[(prefix + n) * static_cast<size_t>(D) + static_cast<size_t>(d)] =
            res[static_cast<size_t>(d) * n_new + n];
    w.pos_embed.swap(pos);
  }
  hp.image_w = image_w;
  hp.image_h = image_h;
  hp.grid_w = gw;
  hp.grid_h = gh;
  hp.source["image_size"] = "command line (--size; position embeddings resampled bicubically)";
}

}  // namespace attnmap
