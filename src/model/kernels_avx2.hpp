// kernels_avx2.hpp - the AVX2 + FMA bodies of model/kernels.hpp's stages, one row or chunk each; compiled
// with -mavx2 -mfma (kernels_avx2.cpp alone) and called only when the CPU has both (kernels.cpp checks).
#pragma once
#include <cstddef>

namespace attnmap::kernels::avx2 {

void layernorm_row(float* y, const float* x, const float* w, const float* b, int D, float eps);
void gelu(float* x, size_t n);
void quick_gelu(float* x, size_t n);
void silu(float* x, size_t n);
void gelu_tanh(float* x, size_t n);
void softmax_row(float* row, int n);
/// kernels::gemm_panels on panels of 16 columns: micro-tiles of 6 rows x 16 columns in 12 ymm accumulators.
void gemm_panels(float* C, size_t ldc, const float* A, size_t lda, int m, int n, int K, const float* panels,
                 const float* bias);

}  // namespace attnmap::kernels::avx2
