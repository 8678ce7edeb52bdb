// Compiled with -mavx512f -mavx512bf16 -mfma (CMakeLists.txt); see kernels_avx512.hpp.
#include "model/kernels_avx512.hpp"

#include <algorithm>
#include <cstring>

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

// exact GELU of 16 floats: 0.5 x (1 + erf(x / sqrt 2)), in the scalar formula's order.
inline __m512 gelu16(__m512 x) {
  const __m512 e = Sleef_erff16_u10avx512f(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)));
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
  __m512d acc = _mm512_setzero_pd();
  for (int j = 0; j < n; j += 16) {
    const int k = std::min(16, n - j);
    const __mmask16 m = static_cast<__mmask16>(k == 16 ? 0xffffu : (1u << k) - 1u);
    const __m512 e = Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, m, row + j), mv));
    _mm512_mask_storeu_ps(row + j, m, e);  // exp(-inf) = 0 in the lanes past the row: they add 0
    const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, _mm512_castps_pd(e), 0));
    acc = _mm512_add_pd(acc, _mm512_maskz_cvtps_pd(0xff, lo));
    if (k > 8) {
      const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, _mm512_castps_pd(e), 1));
      acc = _mm512_add_pd(acc, _mm512_maskz_cvtps_pd(0xff, hi));
    }
  }
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

}  // namespace attnmap::kernels::avx512

#else  // another CPU family: never called (kernels.cpp checks the CPU first)

namespace attnmap::kernels::avx512 {
void to_bf16(uint16_t*, const float*, size_t) {}
void gelu(float*, size_t) {}
void softmax_row(float*, int) {}
}  // namespace attnmap::kernels::avx512

#endif
