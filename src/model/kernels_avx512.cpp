// Compiled with -mavx512f -mavx512bf16 -mfma (CMakeLists.txt); see kernels_isa.hpp.
#include "model/kernels_isa.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/kernels.hpp"

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
#include <sleef.h>

namespace attnmap::kernels::avx512 {

void to_bf16(uint16_t* out, const float* in, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + i));
    std::memcpy(out + i, &v, 32);
  }
  if (i < n) {  // the tail through a zero-filled register, so that it is rounded by the same instruction
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, in + i));
    std::memcpy(out + i, &v, 2 * (n - i));
  }
}

namespace {

// One of erf_float's tables (8 floats) in the low half of a zmm (the high half zero), for VPERMPS.
inline __m512 erf_column(const float* row8) {
  return _mm512_maskz_loadu_ps(0x00ff, row8);
}

// kernels::erf_float of 16 floats, its operations lane by lane (the interval's coefficients by VPERMPS). The
// maskz_ forms with all lanes set: GCC 12's plain ones warn of an undefined source.
inline __m512 erf16(__m512 z) {
  using namespace erf_table;
  constexpr __mmask16 all = 0xffff;
  const __m512 a = _mm512_maskz_min_ps(all, _mm512_set1_ps(4.0f), _mm512_abs_ps(z));  // a NaN stays NaN
  const __m512i i = _mm512_maskz_min_epi32(all, _mm512_maskz_cvttps_epi32(all, _mm512_mul_ps(a, _mm512_set1_ps(2.0f))),
                                           _mm512_set1_epi32(kIntervals - 1));
  const auto column = [&](const float* table8) { return _mm512_maskz_permutexvar_ps(all, i, erf_column(table8)); };
  const __mmask16 first = _mm512_cmpeq_epi32_mask(i, _mm512_setzero_si512());
  const __m512 t = _mm512_sub_ps(a, column(kErfCentre));
  const __m512 u = _mm512_mask_mul_ps(t, first, a, a);
  __m512 q = column(kErfPoly[kPowers - 1]);
  for (int p = kPowers - 2; p >= 0; --p) q = _mm512_fmadd_ps(q, u, column(kErfPoly[p]));
  const __m512 hi = _mm512_mask_blend_ps(first, column(kErfStart), a);
  const __mmask16 one = _mm512_cmp_ps_mask(a, _mm512_set1_ps(kErfOne), _CMP_GE_OQ);
  const __m512 r = _mm512_mask_blend_ps(one, _mm512_add_ps(hi, _mm512_fmadd_ps(t, q, column(kErfStartLow))), _mm512_set1_ps(1.0f));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(z), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}

// exact GELU of 16 floats: 0.5 x (1 + erf(x / sqrt 2)), in the scalar formula's order.
inline __m512 gelu16(__m512 x) {
  const __m512 e = erf16(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)));
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

}  // namespace

void gelu(float* x, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, gelu16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(x + i, m, gelu16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

void softmax_row(float* row, int n) {
  // avx2::softmax_row's bits: its max; the same SLEEF exp; the sum in double lane k of 8 (k = j mod 8, j
  // ascending), the 16 floats of a step added as two 8s in turn; then ((v0 + v2) + (v1 + v3)), v = lanes 0..3
  // + lanes 4..7, as its hsum.
  const int full = n / 16 * 16;
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 mx = ninf;
  // (the maskz_ forms throughout, all lanes set: GCC 12's plain ones warn of an undefined source)
  for (int j = 0; j < full; j += 16) mx = _mm512_maskz_max_ps(0xffff, mx, _mm512_loadu_ps(row + j));
  if (full < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - full)) - 1u);
    mx = _mm512_maskz_max_ps(0xffff, mx, _mm512_mask_loadu_ps(ninf, m, row + full));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, mx);
  const __m512 mv = _mm512_set1_ps(*std::max_element(lanes, lanes + 16));
  // exp over the row first (whole vectors stored unmasked; the tail through the mask: exp(-inf) = 0 past the
  // row), then its sum: the loop around SLEEF's call keeps nothing else live, as the AVX2 row's (10 % faster
  // rows on an AMD Zen 5 than the sum beside each call); the same additions in the same order
  for (int j = 0; j < full; j += 16)
    _mm512_storeu_ps(row + j, Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_loadu_ps(row + j), mv)));
  __m512 e_rest = _mm512_setzero_ps();
  if (full < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - full)) - 1u);
    e_rest = Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, m, row + full), mv));
    _mm512_mask_storeu_ps(row + full, m, e_rest);
  }
  __m512d acc = _mm512_setzero_pd();
  const auto add16 = [&](__m512 e, bool high) {  // the 8 low floats as doubles, then the 8 high ones
    const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, _mm512_castps_pd(e), 0));
    acc = _mm512_add_pd(acc, _mm512_maskz_cvtps_pd(0xff, lo));
    if (high) {
      const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, _mm512_castps_pd(e), 1));
      acc = _mm512_add_pd(acc, _mm512_maskz_cvtps_pd(0xff, hi));
    }
  };
  for (int j = 0; j < full; j += 16) add16(_mm512_loadu_ps(row + j), true);
  if (full < n) add16(e_rest, n - full > 8);
  alignas(64) double t[8];
  _mm512_store_pd(t, acc);
  const double v0 = t[0] + t[4], v1 = t[1] + t[5], v2 = t[2] + t[6], v3 = t[3] + t[7];
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / ((v0 + v2) + (v1 + v3))));
  for (int j = 0; j < full; j += 16) _mm512_storeu_ps(row + j, _mm512_mul_ps(_mm512_loadu_ps(row + j), inv));
  if (full < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - full)) - 1u);
    _mm512_mask_storeu_ps(row + full, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + full), inv));
  }
}

// avx2::layernorm_row's bits, 8 floats a step in one register of 8 doubles: the sums in double lane k of 8
// (k = j mod 8, j ascending), then ((t0 + t2) + (t1 + t3)) of t = lanes 0..3 + lanes 4..7, as its hsum; the
// squares added by FMA and float(z) * w + b fused, as that row does. AVX-512F only (no VL).
namespace {

inline double hsum8(__m512d v) {
  alignas(64) double t[8];
  _mm512_store_pd(t, v);
  const double t0 = t[0] + t[4], t1 = t[1] + t[5], t2 = t[2] + t[6], t3 = t[3] + t[7];
  return (t0 + t2) + (t1 + t3);
}

// The 8 floats at p as doubles; n < 8 of them: the rest 0, as avx2's load_part(p, n, 0).
inline __m512d load8_pd(const float* p, int n) {
  if (n >= 8) return _mm512_maskz_cvtps_pd(0xff, _mm256_loadu_ps(p));
  alignas(32) float t[8] = {};
  std::copy_n(p, n, t);
  return _mm512_maskz_cvtps_pd(0xff, _mm256_load_ps(t));
}

}  // namespace

void layernorm_row(float* y, const float* x, const float* w, const float* b, int D, float eps) {
  __m512d s = _mm512_setzero_pd();
  for (int j = 0; j < D; j += 8) s = _mm512_add_pd(s, load8_pd(x + j, D - j));
  const __m512d m = _mm512_set1_pd(hsum8(s) / D);
  __m512d q = _mm512_setzero_pd();
  for (int j = 0; j < D; j += 8) {
    const __mmask8 k = static_cast<__mmask8>(D - j >= 8 ? 0xffu : (1u << (D - j)) - 1u);
    const __m512d d = _mm512_maskz_sub_pd(k, load8_pd(x + j, D - j), m);  // padded lanes: 0
    q = _mm512_fmadd_pd(d, d, q);
  }
  const __m512d r = _mm512_set1_pd(1.0 / std::sqrt(hsum8(q) / D + static_cast<double>(eps)));
  for (int j = 0; j < D; j += 8) {
    const __m256 z = _mm512_maskz_cvtpd_ps(0xff, _mm512_mul_pd(_mm512_sub_pd(load8_pd(x + j, D - j), m), r));
    if (D - j >= 8) {
      _mm256_storeu_ps(y + j, _mm256_fmadd_ps(z, _mm256_loadu_ps(w + j), _mm256_loadu_ps(b + j)));
      continue;
    }
    alignas(32) float zt[8], out[8];
    _mm256_store_ps(zt, z);
    for (int i = 0; i < D - j; ++i) out[i] = std::fma(zt[i], w[j + i], b[j + i]);
    std::copy_n(out, D - j, y + j);
  }
}

namespace {

// The micro-tile: R <= kTileRows rows x 16 V columns (V <= 3 registers of 16; the panel's rows are 48 floats
// apart whatever V) of C, R V accumulators, with gemm_panels' operations: c = start (C's values, or the bias, or
// 0); for each chunk of kGemmChunk steps of k, s = 0, s = fma(A(i, k), P(k, j), s) in k order, c = c + s. nc <=
// 16 V of the columns are C's (the rest: the panel's zero padding, not stored); a panel's last 16 or 32 columns
// take V = 1 or 2, so no multiply-adds are spent on padding past them. The running sums c wait in `total` (L1)
// between chunks; the last chunk's go from the registers to the store or the epilogue.
constexpr int kTileRows = 8, kVecs = 3;

// The micro-tile's element (i, v) finished: stored in C, its GELU stored in C, or added to the residual stream
// (x += t, or x += gamma * t with the product rounded before the sum: the empty asm keeps GCC from contracting
// the two into an FMA, as avx2::residual_add_row does).
inline void finish(float* c, const PanelEpilogue* res, int i, int v, __mmask16 mask, __m512 t) {
  if (res != nullptr && res->x != nullptr) {
    float* const x = res->x + static_cast<size_t>(i) * res->ldx + 16 * v;
    if (res->gamma != nullptr) {
      t = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, res->gamma + 16 * v), t);
      asm("" : "+v"(t));
    }
    _mm512_mask_storeu_ps(x, mask, _mm512_add_ps(_mm512_maskz_loadu_ps(mask, x), t));
    return;
  }
  _mm512_mask_storeu_ps(c, mask, res != nullptr && res->gelu ? gelu16(t) : t);
}

template <int R, int V>
inline void micro_tile(float* C, size_t ldc, const float* A, size_t lda, const float* P, int kc, int nc,
                       const float* bias, bool from_c, const PanelEpilogue* res, const NextLines& next) {
  __mmask16 mask[V];
  for (int v = 0; v < V; ++v) {
    const int c = std::clamp(nc - 16 * v, 0, 16);
    mask[v] = static_cast<__mmask16>(c == 16 ? 0xffffu : (1u << c) - 1u);
  }
  if (res != nullptr && res->x != nullptr) {  // the residual rows it adds to (V or V + 1 lines each), fetched now
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const char* x = reinterpret_cast<const char*>(res->x + static_cast<size_t>(i) * res->ldx);
      for (int v = 0; v < V; ++v) _mm_prefetch(x + 64 * v, _MM_HINT_T0);
      _mm_prefetch(x + 64 * V - 1, _MM_HINT_T0);
    }
  }
  // the start of element (i, v)'s sum: C's values, the bias, or 0
  const auto start = [&](int i, int v) {
    return from_c ? _mm512_maskz_loadu_ps(mask[v], C + static_cast<size_t>(i) * ldc + 16 * v)
                  : bias != nullptr ? _mm512_maskz_loadu_ps(mask[v], bias + 16 * v) : _mm512_setzero_ps();
  };
  __m512 acc[R][V];
  // acc = chunk k0's sums (kGemmChunk steps of k from k0, or to kc)
  const auto chunk = [&](int k0) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
    }
    const int k1 = std::min(kc, k0 + kGemmChunk);
#pragma GCC unroll 4
    for (int k = k0; k < k1; ++k) {
      const float* pk = P + static_cast<size_t>(k) * (16 * kVecs);
      _mm_prefetch(reinterpret_cast<const char*>(pk + 16 * kVecs * 8), _MM_HINT_T0);
      if (k % kNextEvery == 0 && k / kNextEvery < next.lines)
        _mm_prefetch(next.at(k / kNextEvery), _MM_HINT_T1);
      __m512 b[V];
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) b[v] = _mm512_load_ps(pk + 16 * v);
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const __m512 a = _mm512_set1_ps(A[static_cast<size_t>(i) * lda + static_cast<size_t>(k)]);
#pragma GCC unroll 3
        for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
      }
    }
  };
  chunk(0);
  if (kc <= kGemmChunk) {  // one chunk: start + its sums, from the registers to the store or the epilogue
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v)
        finish(C + static_cast<size_t>(i) * ldc + 16 * v, res, i, v, mask[v], _mm512_add_ps(start(i, v), acc[i][v]));
    }
    return;
  }
  alignas(64) float total[R][16 * V];  // the running sums c between chunks
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) _mm512_store_ps(total[i] + 16 * v, _mm512_add_ps(start(i, v), acc[i][v]));
  }
  for (int k0 = kGemmChunk; k0 < kc; k0 += kGemmChunk) {
    chunk(k0);
    const bool last = k0 + kGemmChunk >= kc;
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) {
        const __m512 t = _mm512_add_ps(_mm512_load_ps(total[i] + 16 * v), acc[i][v]);
        if (last) finish(C + static_cast<size_t>(i) * ldc + 16 * v, res, i, v, mask[v], t);
        else _mm512_store_ps(total[i] + 16 * v, t);
      }
    }
  }
}

// micro_tile<r, V> for 1 <= r <= R.
template <int R, int V>
inline void rows_tile(int r, float* C, size_t ldc, const float* A, size_t lda, const float* P, int kc, int nc,
                      const float* bias, bool from_c, const PanelEpilogue* res, const NextLines& next) {
  if constexpr (R > 1) {
    if (r < R) return rows_tile<R - 1, V>(r, C, ldc, A, lda, P, kc, nc, bias, from_c, res, next);
  }
  micro_tile<R, V>(C, ldc, A, lda, P, kc, nc, bias, from_c, res, next);
}

// rows_tile for the registers the panel's nc columns need: V = ceil(nc / 16).
template <int R>
inline void cols_tile(int r, float* C, size_t ldc, const float* A, size_t lda, const float* P, int kc, int nc,
                      const float* bias, bool from_c, const PanelEpilogue* res, const NextLines& next) {
  if (nc > 32) return rows_tile<R, 3>(r, C, ldc, A, lda, P, kc, nc, bias, from_c, res, next);
  if (nc > 16) return rows_tile<R, 2>(r, C, ldc, A, lda, P, kc, nc, bias, from_c, res, next);
  rows_tile<R, 1>(r, C, ldc, A, lda, P, kc, nc, bias, from_c, res, next);
}

}  // namespace

void gemm_panel_pass(float* C, size_t ldc, const float* A, size_t lda, int m, const float* P, int kc, int nc,
                     const float* bias, bool from_c, const PanelEpilogue* epilogue, const float* next,
                     size_t next_floats) {
  for (int i = 0; i < m; i += kTileRows) {
    PanelEpilogue rows;  // this micro-tile's rows of the epilogue
    if (epilogue != nullptr) {
      rows = *epilogue;
      if (rows.x != nullptr) rows.x += static_cast<size_t>(i) * rows.ldx;
    }
    cols_tile<kTileRows>(std::min(kTileRows, m - i), C + static_cast<size_t>(i) * ldc, ldc,
                         A + static_cast<size_t>(i) * lda, lda, P, kc, nc, bias, from_c,
                         epilogue != nullptr ? &rows : nullptr,
                         next_slice(next, next_floats, i / kTileRows, (m + kTileRows - 1) / kTileRows));
  }
}

}  // namespace attnmap::kernels::avx512

#else  // another CPU family, or no AVX512_BF16 in the compiler: never called (kernels.cpp checks the
       // CPU first); a call stops rather than leave its output unwritten, as kernels_avx2.cpp's do
#include <cstdlib>
namespace attnmap::kernels::avx512 {
void to_bf16(uint16_t*, const float*, size_t) {
  std::abort();
}
void gelu(float*, size_t) {
  std::abort();
}
void softmax_row(float*, int) {
  std::abort();
}
void layernorm_row(float*, const float*, const float*, const float*, int, float) {
  std::abort();
}
void gemm_panel_pass(float*, size_t, const float*, size_t, int, const float*, int, int, const float*, bool,
                     const PanelEpilogue*, const float*, size_t) {
  std::abort();
}
}  // namespace attnmap::kernels::avx512

#endif
