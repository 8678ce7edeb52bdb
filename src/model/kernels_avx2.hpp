// kernels_avx2.hpp - the AVX2 + FMA bodies of model/kernels.hpp's stages, one row or chunk each; compiled
// with -mavx2 -mfma (kernels_avx2.cpp alone) and called only when the CPU has both (kernels.cpp checks).
#pragma once
#include <cstddef>

namespace attnmap::kernels {
struct PanelEpilogue;
}

namespace attnmap::kernels::avx2 {

void layernorm_row(float* y, const float* x, const float* w, const float* b, int D, float eps);
void gelu(float* x, size_t n);
void quick_gelu(float* x, size_t n);
void silu(float* x, size_t n);
void gelu_tanh(float* x, size_t n);
void softmax_row(float* row, int n);
/// x[j] += y[j], or x[j] += gamma[j] * y[j] (a product, then a sum: no FMA, residual_add's bits), n floats.
void residual_add_row(float* x, const float* y, const float* gamma, size_t n);
/// One pass of kernels::gemm_panels over one panel: C (m, nc <= 16) = start + A (m, kc; rows lda apart) times
/// the panel's kc rows P (16 floats each), start = C's values (from_c), else the bias (nc floats) or 0; the
/// micro-tiles down the rows, 6 rows x 16 columns each in 12 ymm accumulators.
/// With `epilogue` (not null; its x, or its gelu) as kernels::PanelEpilogue says.
/// `next` (next_floats floats, or null): the panel pass that follows, fetched into L2 while this one runs
/// (kernels::NextLines); no value of it is read.
void gemm_panel_pass(float* C, size_t ldc, const float* A, size_t lda, int m, const float* P, int kc, int nc,
                     const float* bias, bool from_c, const PanelEpilogue* epilogue, const float* next,
                     size_t next_floats);
}  // namespace attnmap::kernels::avx2
