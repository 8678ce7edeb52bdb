// Compiled with -mavx512f -mavx512bf16 -mfma (CMakeLists.txt); see kernels_avx512.hpp.
#include "model/kernels_avx512.hpp"

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

}  // namespace attnmap::kernels::avx512

#else  // another CPU family: never called (kernels.cpp checks the CPU first)

namespace attnmap::kernels::avx512 {
void to_bf16(uint16_t*, const float*, size_t) {}
void gelu(float*, size_t) {}
}  // namespace attnmap::kernels::avx512

#endif
