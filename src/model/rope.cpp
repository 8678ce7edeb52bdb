#include "model/rope.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"

namespace attnmap {

namespace {

// EVA-02 (timm RotaryEmbeddingCat, in_pixels=False, grid_offset 0): angle (d_k/2) of patch (r, c).
void eva_angles(float* ang, const HParams& hp, int r, int c, int gh, int gw, int dk) {
  const int nb = dk / 4;
  float ty = static_cast<float>(r), tx = static_cast<float>(c);
  if (hp.rope_ref_h > 0 && hp.rope_ref_w > 0) {  // timm: t / feat_shape * ref_feat_shape, float32
    ty = ty / static_cast<float>(gh) * static_cast<float>(hp.rope_ref_h);
    tx = tx / static_cast<float>(gw) * static_cast<float>(hp.rope_ref_w);
  }
  for (int j = 0; j < nb; ++j) {
    const float e = static_cast<float>(j) / static_cast<float>(nb);
    const float band = 1.0f / std::pow(hp.rope_temperature, e);  // freq_bands(step=1)
    ang[j] = ty * band;
    ang[nb + j] = tx * band;
  }
}

// DINOv3 (timm RotaryEmbeddingDinoV3 / dinov3 RopePositionEmbedding, normalize_coords 'separate', no augmentation):
// angle (d_k/2), in float32 as both compute it: (2 pi * coord) / period.
void dinov3_angles(float* ang, const HParams& hp, int r, int c, int gh, int gw, int dk) {
  const int nb = dk / 4;
  const float cy = 2.0f * ((static_cast<float>(r) + 0.5f) / static_cast<float>(gh)) - 1.0f;
  const float cx = 2.0f * ((static_cast<float>(c) + 0.5f) / static_cast<float>(gw)) - 1.0f;
  const float two_pi = static_cast<float>(2.0 * M_PI);
  for (int j = 0; j < nb; ++j) {
    const float e = 2.0f * static_cast<float>(j) / static_cast<float>(dk / 2);
    // facebookresearch's file holds the periods (hp.rope_periods): its RopePositionEmbedding divides by those
    const float period = hp.rope_periods.empty() ? std::pow(hp.rope_temperature, e) : hp.rope_periods[static_cast<size_t>(j)];
    ang[j] = two_pi * cy / period;
    ang[nb + j] = two_pi * cx / period;
  }
}

}  // namespace

RopeTables rope_tables(const HParams& hp, int gh, int gw) {
  const int dk = hp.head_dim;
  if (dk % 4 != 0 || dk <= 0)
    throw Error("rotary position embedding needs a head width divisible by 4, found d_k = " + std::to_string(dk));
  if (!hp.rope_periods.empty() && hp.rope_periods.size() != static_cast<size_t>(dk / 4))
    throw Error("rotary position embedding: " + std::to_string(hp.rope_periods.size()) + " stored periods for d_k = " +
                std::to_string(dk) + " (expected d_k / 4 = " + std::to_string(dk / 4) + ")");
  RopeTables t;
  t.grid_h = gh;
  t.grid_w = gw;
  const size_t N = static_cast<size_t>(gh) * gw;
  t.sin.resize(N * dk);
  t.cos.resize(N * dk);
  std::vector<float> ang(static_cast<size_t>(dk / 2));
  const int half = dk / 2;
  for (int r = 0; r < gh; ++r)
    for (int c = 0; c < gw; ++c) {
      if (hp.rope == Rope::EvaCat)
        eva_angles(ang.data(), hp, r, c, gh, gw, dk);
      else
        dinov3_angles(ang.data(), hp, r, c, gh, gw, dk);
      const size_t n = static_cast<size_t>(r) * gw + c;
      for (int ch = 0; ch < dk; ++ch) {
        // rotate-half: [a_0..a_{d/2-1}, a_0..a_{d/2-1}] (tile); interleaved: [a_0, a_0, a_1, a_1, ...]
        const float a = hp.rope_half ? ang[static_cast<size_t>(ch % half)] : ang[static_cast<size_t>(ch / 2)];
        t.sin[n * dk + ch] = static_cast<float>(std::sin(static_cast<double>(a)));
        t.cos[n * dk + ch] = static_cast<float>(std::cos(static_cast<double>(a)));
      }
    }
  return t;
}

void prepare_rope(ViTWeights& w) {
  if (w.hp.rope == Rope::None) {
    w.rope = RopeTables{};
    return;
  }
  if (w.rope.grid_h == w.hp.grid_h && w.rope.grid_w == w.hp.grid_w && !w.rope.sin.empty()) return;
  w.rope = rope_tables(w.hp, w.hp.grid_h, w.hp.grid_w);
}

namespace {

// Calls f(v, s, c) for the query and the key (v: d_k floats, in place) of every head of every patch token t >=
// num_prefix of one image's qkv (T, 3*inner), with that patch's sin and cos rows s, c (d_k) of `tab`.
template <class F>
void for_each_patch_head(float* qkv, const RopeTables& tab, const HParams& hp, int T, const int* patch_index, F f) {
  const int H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  for (int t = hp.num_prefix; t < T; ++t) {
    const int n = patch_index ? patch_index[t - hp.num_prefix] : t - hp.num_prefix;
    const float* s = &tab.sin[static_cast<size_t>(n) * dk];  // (d_k)
    const float* c = &tab.cos[static_cast<size_t>(n) * dk];  // (d_k)
    for (int part = 0; part < 2; ++part)                      // 0: queries, 1: keys
      for (int h = 0; h < H; ++h)
        f(qkv + static_cast<size_t>(t) * 3 * inner + static_cast<size_t>(part) * inner + static_cast<size_t>(h) * dk, s, c);
  }
}

// rot(x)[ch] = sign * x[src]: the interleaved pair rotation (-x1, x0, -x3, x2, ...) or rotate-half
// (-x_{d/2..}, x_{..d/2}).
void rotation_source(int ch, int dk, bool half_layout, int* src, float* sign) {
  const int half = dk / 2;
  if (half_layout) {
    *src = ch < half ? ch + half : ch - half;
    *sign = ch < half ? -1.0f : 1.0f;
  } else {
    *src = ch % 2 == 0 ? ch + 1 : ch - 1;
    *sign = ch % 2 == 0 ? -1.0f : 1.0f;
  }
}

}  // namespace

void rope_forward(float* qkv, const RopeTables& tab, const HParams& hp, int T, const int* patch_index) {
  const int dk = hp.head_dim;
  std::vector<float> x(static_cast<size_t>(dk));  // (d_k) one head's query or key before the rotation
  for_each_patch_head(qkv, tab, hp, T, patch_index, [&](float* v, const float* s, const float* c) {
    std::copy_n(v, dk, x.begin());
    for (int ch = 0; ch < dk; ++ch) {
      int src;
      float sign;
      rotation_source(ch, dk, hp.rope_half, &src, &sign);
      v[ch] = x[static_cast<size_t>(ch)] * c[ch] + sign * x[static_cast<size_t>(src)] * s[ch];
    }
  });
}

void rope_backward(float* dqkv, const RopeTables& tab, const HParams& hp, int T, const int* patch_index) {
  const int dk = hp.head_dim;
  std::vector<float> g(static_cast<size_t>(dk));  // (d_k) d(rotated) of one head
  for_each_patch_head(dqkv, tab, hp, T, patch_index, [&](float* d, const float* s, const float* c) {
    std::copy_n(d, dk, g.begin());
    for (int ch = 0; ch < dk; ++ch) d[ch] = g[static_cast<size_t>(ch)] * c[ch];
    for (int ch = 0; ch < dk; ++ch) {  // rot(x)[ch] = sign * x[src]: its share sign * s[ch] g[ch] goes to src
      int src;
      float sign;
      rotation_source(ch, dk, hp.rope_half, &src, &sign);
      d[src] += sign * s[ch] * g[static_cast<size_t>(ch)];
    }
  });
}

}  // namespace attnmap
