// Compiled with -mavx2 -mfma (CMakeLists.txt); see kernels_isa.hpp.
#include "model/kernels_isa.hpp"

#include "model/kernels.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <sleef.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnmap::kernels::avx2 {

namespace {

// Sum of the 4 doubles of v in a fixed order: ((v0 + v2) + (v1 + v3)).
double hsum(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// The 8 floats at p (n < 8 of them: the rest filled with `fill`).
__m256 load_part(const float* p, int n, float fill) {
  alignas(32) float t[8];
  for (int i = 0; i < 8; ++i) t[i] = i < n ? p[i] : fill;
  return _mm256_load_ps(t);
}

void store_part(float* p, __m256 v, int n) {
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  for (int i = 0; i < n; ++i) p[i] = t[i];
}

// Adds the 8 floats of v, widened to double, to two accumulators of 4.
inline void acc_double(__m256d& a, __m256d& b, __m256 v) {
  a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  b = _mm256_add_pd(b, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// kernels::erf_float of 8 floats, its operations lane by lane (the interval's coefficients by VPERMPS).
inline __m256 erf8(__m256 z) {
  using namespace erf_table;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_min_ps(_mm256_set1_ps(4.0f), _mm256_andnot_ps(sign, z));  // a NaN stays NaN
  const __m256i i = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_mul_ps(a, _mm256_set1_ps(2.0f))),
                                     _mm256_set1_epi32(kIntervals - 1));
  const auto column = [&](const float* table8) { return _mm256_permutevar8x32_ps(_mm256_loadu_ps(table8), i); };
  const __m256 first = _mm256_castsi256_ps(_mm256_cmpeq_epi32(i, _mm256_setzero_si256()));
  const __m256 t = _mm256_sub_ps(a, column(kErfCentre));
  const __m256 u = _mm256_blendv_ps(t, _mm256_mul_ps(a, a), first);
  __m256 q = column(kErfPoly[kPowers - 1]);
  for (int p = kPowers - 2; p >= 0; --p) q = _mm256_fmadd_ps(q, u, column(kErfPoly[p]));
  const __m256 hi = _mm256_blendv_ps(column(kErfStart), a, first);
  const __m256 one = _mm256_cmp_ps(a, _mm256_set1_ps(kErfOne), _CMP_GE_OQ);
  const __m256 r = _mm256_blendv_ps(_mm256_add_ps(hi, _mm256_fmadd_ps(t, q, column(kErfStartLow))), _mm256_set1_ps(1.0f), one);
  return _mm256_or_ps(r, _mm256_and_ps(sign, z));
}

// exact GELU of 8 floats: 0.5 x (1 + erf(x / sqrt 2)), in the scalar formula's order.
inline __m256 gelu8(__m256 x) {
  const __m256 e = erf8(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// QuickGELU of 8 floats: x / (1 + exp(-1.702 x)), in the scalar formula's order.
inline __m256 quick_gelu8(__m256 x) {
  const __m256 e = Sleef_expf8_u10avx2(_mm256_mul_ps(x, _mm256_set1_ps(-1.702f)));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// SiLU of 8 floats: x / (1 + exp(-x)) (x * sigmoid(x)), in the scalar formula's order.
inline __m256 silu8(__m256 x) {
  const __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// GELU's tanh form of 8 floats: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in the scalar order.
inline __m256 gelu_tanh8(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 in = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                  _mm256_add_ps(x, _mm256_mul_ps(_mm256_set1_ps(0.044715f), x3)));
  const __m256 t = Sleef_tanhf8_u10avx2(in);
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}

// In place, f8 on every 8 floats (the tail padded with zeros).
template <class F>
void map8(float* x, size_t n, F f8) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, f8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    store_part(x + i, f8(load_part(x + i, rest, 0.0f)), rest);
  }
}

}  // namespace

void quick_gelu(float* x, size_t n) { map8(x, n, quick_gelu8); }

void gelu_tanh(float* x, size_t n) { map8(x, n, gelu_tanh8); }

void silu(float* x, size_t n) { map8(x, n, silu8); }

void layernorm_row(float* y, const float* x, const float* w, const float* b, int D, float eps) {
  const int full = D / 8 * 8, rest = D - full;
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (int j = 0; j < full; j += 8) acc_double(s0, s1, _mm256_loadu_ps(x + j));
  if (rest) acc_double(s0, s1, load_part(x + full, rest, 0.0f));
  const double mean = hsum(_mm256_add_pd(s0, s1)) / D;
  const __m256d m = _mm256_set1_pd(mean);
  __m256d v0 = _mm256_setzero_pd(), v1 = _mm256_setzero_pd();
  auto var_acc = [&](__m256 xv, int n) {
    __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), m);
    __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), m);
    if (n < 8) {  // padded lanes contribute 0
      alignas(32) double t[8];
      _mm256_store_pd(t, d0);
      _mm256_store_pd(t + 4, d1);
      for (int i = n; i < 8; ++i) t[i] = 0.0;
      d0 = _mm256_load_pd(t);
      d1 = _mm256_load_pd(t + 4);
    }
    // fused, written out: the same bits from GCC (which contracts) and clang
    v0 = _mm256_fmadd_pd(d0, d0, v0);
    v1 = _mm256_fmadd_pd(d1, d1, v1);
  };
  for (int j = 0; j < full; j += 8) var_acc(_mm256_loadu_ps(x + j), 8);
  if (rest) var_acc(load_part(x + full, rest, 0.0f), rest);
  const double var = hsum(_mm256_add_pd(v0, v1)) / D;
  const __m256d r = _mm256_set1_pd(1.0 / std::sqrt(var + static_cast<double>(eps)));
  auto norm8 = [&](__m256 xv, __m256 wv, __m256 bv) {
    const __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), m), r));
    const __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), m), r));
    const __m256 z = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    return _mm256_fmadd_ps(z, wv, bv);  // float(z) * w + b, fused (the scalar code rounds the product first)
  };
  for (int j = 0; j < full; j += 8)
    _mm256_storeu_ps(y + j, norm8(_mm256_loadu_ps(x + j), _mm256_loadu_ps(w + j), _mm256_loadu_ps(b + j)));
  if (rest)
    store_part(y + full, norm8(load_part(x + full, rest, 0.0f), load_part(w + full, rest, 0.0f),
                               load_part(b + full, rest, 0.0f)), rest);
}

void residual_add_row(float* x, const float* y, const float* gamma, size_t n) {
  // GCC contracts a product and a sum into an FMA here (-mfma, -ffp-contract=fast), intrinsics included: the
  // empty asm makes the product opaque, so it is rounded before the sum. Masked loads and stores for the tail
  // only (VMASKMOVPS stores are slow on AMD).
  const auto sum = [&](__m256 xv, __m256 yv, __m256 gv) {
    if (gamma != nullptr) {
      yv = _mm256_mul_ps(gv, yv);
      asm("" : "+x"(yv));
    }
    return _mm256_add_ps(xv, yv);
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, sum(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i),
                                gamma != nullptr ? _mm256_loadu_ps(gamma + i) : _mm256_setzero_ps()));
  if (i < n) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(x + i, m, sum(_mm256_maskload_ps(x + i, m), _mm256_maskload_ps(y + i, m),
                                      gamma != nullptr ? _mm256_maskload_ps(gamma + i, m) : _mm256_setzero_ps()));
  }
}

void gelu(float* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, gelu8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    store_part(x + i, gelu8(load_part(x + i, rest, 0.0f)), rest);
  }
}

void softmax_row(float* row, int n) {
  const int full = n / 8 * 8, rest = n - full;
  const float ninf = -std::numeric_limits<float>::infinity();
  __m256 mx = _mm256_set1_ps(ninf);
  for (int j = 0; j < full; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(row + j));
  if (rest) mx = _mm256_max_ps(mx, load_part(row + full, rest, ninf));
  alignas(32) float t[8];
  _mm256_store_ps(t, mx);
  float m = t[0];
  for (int i = 1; i < 8; ++i) m = std::max(m, t[i]);
  const __m256 mv = _mm256_set1_ps(m);
  // exp over the row first, then its sum: the loop around SLEEF's call keeps nothing else live (the sums
  // were stored and reloaded around every call); the same additions in the same order
  for (int j = 0; j < full; j += 8) _mm256_storeu_ps(row + j, Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_loadu_ps(row + j), mv)));
  __m256 e_rest = _mm256_setzero_ps();
  if (rest) {
    e_rest = Sleef_expf8_u10avx2(_mm256_sub_ps(load_part(row + full, rest, ninf), mv));  // exp(-inf) = 0
    store_part(row + full, e_rest, rest);
  }
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (int j = 0; j < full; j += 8) acc_double(s0, s1, _mm256_loadu_ps(row + j));
  if (rest) acc_double(s0, s1, e_rest);
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / hsum(_mm256_add_pd(s0, s1))));
  for (int j = 0; j < full; j += 8) _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
  const float inv1 = _mm256_cvtss_f32(inv);
  for (int j = full; j < n; ++j) row[j] *= inv1;
}

namespace {

// The micro-tile: R <= kTileRows rows x 16 columns (2 registers of 8) of C, 12 accumulators, with
// avx512::gemm_panels' operations element by element (start; per chunk of kGemmChunk steps a sum from 0 by
// one FMA per k in k order, then added): the same bits.
constexpr int kTileRows = 6;

// Lanes [0, c) of a register of 8 (c clamped to 0..8), as a mask for maskload / maskstore.
__m256i lanes_below(int c) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(std::clamp(c, 0, 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The micro-tile's sums added to the residual stream, with residual_add_row's operations (x + gamma * t, the
// product rounded first).
template <int R>
inline void add_to_residual(const PanelEpilogue& res, const float (*total)[16], __m256i m0, __m256i m1, bool full) {
  const __m256i mask[2] = {m0, m1};
#pragma GCC unroll 2
  for (int v = 0; v < 2; ++v) {
    const __m256 g =
        res.gamma != nullptr ? _mm256_maskload_ps(res.gamma + 8 * v, mask[v]) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      float* const x = res.x + static_cast<size_t>(i) * res.ldx + 8 * v;
      __m256 t = _mm256_load_ps(total[i] + 8 * v);
      if (res.gamma != nullptr) {
        t = _mm256_mul_ps(g, t);
        asm("" : "+x"(t));
      }
      if (full)
        _mm256_storeu_ps(x, _mm256_add_ps(_mm256_loadu_ps(x), t));
      else
        _mm256_maskstore_ps(x, mask[v], _mm256_add_ps(_mm256_maskload_ps(x, mask[v]), t));
    }
  }
}

// The micro-tile: C (R, nc) = start + A (R, kc) P, then added to the residual (`res`), or stored, after exact
// GELU when `gelu`. Full-width tiles store with plain stores: VMASKMOVPS stores are microcoded on AMD Zen 2
// (its forward ran 7 % slower with them on every tile).
// Steps [k, k + 8) of a 6-row micro-tile's chunk: for each k in order, for each row i, acc[i][v] = A(i, k) *
// P(k, 8v..8v+8) + acc[i][v] by one FMA (micro_tile's loop, the same operations). Written out in assembly:
// GCC's own schedule of the 8 steps moved loads ahead and spilled sums to the stack. A: row 0 at k; P: row k.
static_assert(kNextEvery == 8, "micro_tile fetches one line of the next pass per eight_steps6");
inline void eight_steps6(__m256 (&acc)[6][2], const float* A, size_t lda, const float* P) {
  const float* a3 = A + 3 * lda;
  const size_t ld = lda * sizeof(float);
  asm("" "vmovaps 0(%[p]), %%ymm12\n\tvmovaps 32(%[p]), %%ymm13\n\t"
      "vbroadcastss 0(%[a0]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c00]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c01]\n\t"
      "vbroadcastss 0(%[a0],%[ld]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c10]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
      "vbroadcastss 0(%[a0],%[ld],2), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c20]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c21]\n\t"
      "vbroadcastss 0(%[a3]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c30]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c31]\n\t"
      "vbroadcastss 0(%[a3],%[ld]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c40]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c41]\n\t"
      "vbroadcastss 0(%[a3],%[ld],2), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c50]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c51]\n\t"
      "vmovaps 64(%[p]), %%ymm12\n\tvmovaps 96(%[p]), %%ymm13\n\t"
      "vbroadcastss 4(%[a0]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c00]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c01]\n\t"
      "vbroadcastss 4(%[a0],%[ld]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c10]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
      "vbroadcastss 4(%[a0],%[ld],2), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c20]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c21]\n\t"
      "vbroadcastss 4(%[a3]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c30]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c31]\n\t"
      "vbroadcastss 4(%[a3],%[ld]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c40]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c41]\n\t"
      "vbroadcastss 4(%[a3],%[ld],2), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c50]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c51]\n\t"
      "vmovaps 128(%[p]), %%ymm12\n\tvmovaps 160(%[p]), %%ymm13\n\t"
      "vbroadcastss 8(%[a0]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c00]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c01]\n\t"
      "vbroadcastss 8(%[a0],%[ld]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c10]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
      "vbroadcastss 8(%[a0],%[ld],2), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c20]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c21]\n\t"
      "vbroadcastss 8(%[a3]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c30]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c31]\n\t"
      "vbroadcastss 8(%[a3],%[ld]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c40]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c41]\n\t"
      "vbroadcastss 8(%[a3],%[ld],2), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c50]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c51]\n\t"
      "vmovaps 192(%[p]), %%ymm12\n\tvmovaps 224(%[p]), %%ymm13\n\t"
      "vbroadcastss 12(%[a0]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c00]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c01]\n\t"
      "vbroadcastss 12(%[a0],%[ld]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c10]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
      "vbroadcastss 12(%[a0],%[ld],2), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c20]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c21]\n\t"
      "vbroadcastss 12(%[a3]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c30]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c31]\n\t"
      "vbroadcastss 12(%[a3],%[ld]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c40]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c41]\n\t"
      "vbroadcastss 12(%[a3],%[ld],2), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c50]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c51]\n\t"
      "vmovaps 256(%[p]), %%ymm12\n\tvmovaps 288(%[p]), %%ymm13\n\t"
      "vbroadcastss 16(%[a0]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c00]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c01]\n\t"
      "vbroadcastss 16(%[a0],%[ld]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c10]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
      "vbroadcastss 16(%[a0],%[ld],2), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c20]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c21]\n\t"
      "vbroadcastss 16(%[a3]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c30]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c31]\n\t"
      "vbroadcastss 16(%[a3],%[ld]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c40]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c41]\n\t"
      "vbroadcastss 16(%[a3],%[ld],2), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c50]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c51]\n\t"
      "vmovaps 320(%[p]), %%ymm12\n\tvmovaps 352(%[p]), %%ymm13\n\t"
      "vbroadcastss 20(%[a0]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c00]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c01]\n\t"
      "vbroadcastss 20(%[a0],%[ld]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c10]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
      "vbroadcastss 20(%[a0],%[ld],2), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c20]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c21]\n\t"
      "vbroadcastss 20(%[a3]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c30]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c31]\n\t"
      "vbroadcastss 20(%[a3],%[ld]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c40]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c41]\n\t"
      "vbroadcastss 20(%[a3],%[ld],2), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c50]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c51]\n\t"
      "vmovaps 384(%[p]), %%ymm12\n\tvmovaps 416(%[p]), %%ymm13\n\t"
      "vbroadcastss 24(%[a0]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c00]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c01]\n\t"
      "vbroadcastss 24(%[a0],%[ld]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c10]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
      "vbroadcastss 24(%[a0],%[ld],2), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c20]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c21]\n\t"
      "vbroadcastss 24(%[a3]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c30]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c31]\n\t"
      "vbroadcastss 24(%[a3],%[ld]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c40]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c41]\n\t"
      "vbroadcastss 24(%[a3],%[ld],2), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c50]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c51]\n\t"
      "vmovaps 448(%[p]), %%ymm12\n\tvmovaps 480(%[p]), %%ymm13\n\t"
      "vbroadcastss 28(%[a0]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c00]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c01]\n\t"
      "vbroadcastss 28(%[a0],%[ld]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c10]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
      "vbroadcastss 28(%[a0],%[ld],2), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c20]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c21]\n\t"
      "vbroadcastss 28(%[a3]), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c30]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c31]\n\t"
      "vbroadcastss 28(%[a3],%[ld]), %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %[c40]\n\tvfmadd231ps %%ymm13, %%ymm14, %[c41]\n\t"
      "vbroadcastss 28(%[a3],%[ld],2), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %[c50]\n\tvfmadd231ps %%ymm13, %%ymm15, %[c51]\n\t"
      : [c00] "+x"(acc[0][0]), [c01] "+x"(acc[0][1]), [c10] "+x"(acc[1][0]), [c11] "+x"(acc[1][1]), [c20] "+x"(acc[2][0]), [c21] "+x"(acc[2][1]), [c30] "+x"(acc[3][0]), [c31] "+x"(acc[3][1]), [c40] "+x"(acc[4][0]), [c41] "+x"(acc[4][1]), [c50] "+x"(acc[5][0]), [c51] "+x"(acc[5][1])
      : [a0] "r"(A), [a3] "r"(a3), [ld] "r"(ld), [p] "r"(P)
      : "xmm12", "xmm13", "xmm14", "xmm15", "memory");
}

template <int R>
inline void micro_tile(float* C, size_t ldc, const float* A, size_t lda, const float* P, int kc, int nc,
                       const float* bias, bool from_c, const PanelEpilogue* res, bool gelu, const NextLines& next) {
  const __m256i m0 = lanes_below(nc), m1 = lanes_below(nc - 8);
  alignas(32) float total[R][16];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    const float* ci = C + static_cast<size_t>(i) * ldc;
    _mm256_store_ps(total[i], from_c ? _mm256_maskload_ps(ci, m0)
                              : bias != nullptr ? _mm256_maskload_ps(bias, m0) : _mm256_setzero_ps());
    _mm256_store_ps(total[i] + 8, from_c ? _mm256_maskload_ps(ci + 8, m1)
                                  : bias != nullptr ? _mm256_maskload_ps(bias + 8, m1) : _mm256_setzero_ps());
  }
  for (int k0 = 0; k0 < kc; k0 += kGemmChunk) {
    __m256 acc[R][2];
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    const int k1 = std::min(kc, k0 + kGemmChunk);
    int k = k0;
    if constexpr (R == 6) {
      for (; k + kNextEvery <= k1; k += kNextEvery) {  // k0 is a multiple of kNextEvery
        if (k / kNextEvery < next.lines) _mm_prefetch(next.at(k / kNextEvery), _MM_HINT_T1);
        eight_steps6(acc, A + k, lda, P + static_cast<size_t>(k) * 16);
      }
    }
#pragma GCC unroll 4
    for (; k < k1; ++k) {
      const float* pk = P + static_cast<size_t>(k) * 16;
      if (k % kNextEvery == 0 && k / kNextEvery < next.lines)
        _mm_prefetch(next.at(k / kNextEvery), _MM_HINT_T1);
      const __m256 b0 = _mm256_load_ps(pk), b1 = _mm256_load_ps(pk + 8);
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) {
        const __m256 a = _mm256_broadcast_ss(A + static_cast<size_t>(i) * lda + static_cast<size_t>(k));
        acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
      }
    }
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      _mm256_store_ps(total[i], _mm256_add_ps(_mm256_load_ps(total[i]), acc[i][0]));
      _mm256_store_ps(total[i] + 8, _mm256_add_ps(_mm256_load_ps(total[i] + 8), acc[i][1]));
    }
  }
  if (res != nullptr) return add_to_residual<R>(*res, total, m0, m1, nc == 16);
  if (gelu) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      _mm256_store_ps(total[i], gelu8(_mm256_load_ps(total[i])));
      _mm256_store_ps(total[i] + 8, gelu8(_mm256_load_ps(total[i] + 8)));
    }
  }
  if (nc == 16) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      _mm256_storeu_ps(C + static_cast<size_t>(i) * ldc, _mm256_load_ps(total[i]));
      _mm256_storeu_ps(C + static_cast<size_t>(i) * ldc + 8, _mm256_load_ps(total[i] + 8));
    }
    return;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    _mm256_maskstore_ps(C + static_cast<size_t>(i) * ldc, m0, _mm256_load_ps(total[i]));
    _mm256_maskstore_ps(C + static_cast<size_t>(i) * ldc + 8, m1, _mm256_load_ps(total[i] + 8));
  }
}

template <int R>
inline void rows_tile(int r, float* C, size_t ldc, const float* A, size_t lda, const float* P, int kc, int nc,
                      const float* bias, bool from_c, const PanelEpilogue* res, bool gelu, const NextLines& next) {
  if constexpr (R > 1) {
    if (r < R) return rows_tile<R - 1>(r, C, ldc, A, lda, P, kc, nc, bias, from_c, res, gelu, next);
  }
  micro_tile<R>(C, ldc, A, lda, P, kc, nc, bias, from_c, res, gelu, next);
}

}  // namespace

void gemm_panel_pass(float* C, size_t ldc, const float* A, size_t lda, int m, const float* P, int kc, int nc,
                     const float* bias, bool from_c, const PanelEpilogue* epilogue, const float* next,
                     size_t next_floats) {
  for (int i = 0; i < m; i += kTileRows) {
    PanelEpilogue rows;  // this micro-tile's rows of the residual stream (kernels.cpp applies GELU after)
    const bool to_x = epilogue != nullptr && epilogue->x != nullptr;
    const bool gelu = epilogue != nullptr && epilogue->gelu && !to_x;
    if (to_x) rows = {epilogue->x + static_cast<size_t>(i) * epilogue->ldx, epilogue->ldx, epilogue->gamma};
    rows_tile<kTileRows>(std::min(kTileRows, m - i), C + static_cast<size_t>(i) * ldc, ldc,
                         A + static_cast<size_t>(i) * lda, lda, P, kc, nc, bias, from_c,
                         to_x ? &rows : nullptr, gelu,
                         next_slice(next, next_floats, i / kTileRows, (m + kTileRows - 1) / kTileRows));
  }
}

}  // namespace attnmap::kernels::avx2

#else  // not an x86 build with AVX2: model/kernels.cpp never calls these
#include <cstdlib>
namespace attnmap::kernels::avx2 {
void layernorm_row(float*, const float*, const float*, const float*, int, float) { std::abort(); }
void gelu(float*, size_t) { std::abort(); }
void quick_gelu(float*, size_t) { std::abort(); }
void gelu_tanh(float*, size_t) { std::abort(); }
void silu(float*, size_t) { std::abort(); }
void softmax_row(float*, int) { std::abort(); }
void residual_add_row(float*, const float*, const float*, size_t) { std::abort(); }
void gemm_panel_pass(float*, size_t, const float*, size_t, int, const float*, int, int, const float*, bool,
                     const PanelEpilogue*, const float*, size_t) {
  std::abort();
}
}  // namespace attnmap::kernels::avx2
#endif
