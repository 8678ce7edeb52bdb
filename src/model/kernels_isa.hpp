// kernels_isa.hpp - the AVX2 + FMA and the AVX-512 bodies of model/kernels.hpp's stages, one row or chunk each.
// kernels_avx2.cpp is compiled with -mavx2 -mfma, kernels_avx512.cpp with -mavx512f -mavx512bf16 -mfma (each
// alone), and their functions are called only when the CPU has those instructions (kernels.cpp checks).
#pragma once
#include <cstddef>
#include <cstdint>

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

namespace attnmap::kernels::avx512 {

/// out[i] = in[i] rounded to bfloat16 (round to nearest even; VCVTNEPS2BF16, denormals to zero), n floats.
void to_bf16(uint16_t* out, const float* in, size_t n);

/// Exact GELU in place, 16 floats at a time with kernels::erf_float's operations (the same bits as
/// avx2::gelu, twice as wide).
void gelu(float* x, size_t n);

/// In place, one row of n >= 1 floats: its softmax with avx2::softmax_row's bits (row max subtracted, SLEEF's
/// 1.0-ULP exp, the sum in double in the same order), 16 floats at a time.
void softmax_row(float* row, int n);

/// avx2::layernorm_row's result bit for bit, 8 floats a step in one register of 8 doubles: y (D) =
/// (x - mean) / sqrt(var + eps) * w + b, the statistics in double.
void layernorm_row(float* y, const float* x, const float* w, const float* b, int D, float eps);

/// One pass of kernels::gemm_panels over one panel: C (m, nc <= 48) = start + A (m, kc; rows lda apart) times
/// the panel's kc rows P (48 floats each), start = C's values (from_c), else the bias (nc floats) or 0; the
/// micro-tiles down the rows, 8 rows x 48 columns each in 24 zmm accumulators.
/// With `epilogue` (not null; its x, or its gelu on the AVX-512 path only) as kernels::PanelEpilogue says.
/// `next` (next_floats floats, or null): the panel pass that follows, fetched into L2 while this one runs
/// (kernels::NextLines); no value of it is read.
void gemm_panel_pass(float* C, size_t ldc, const float* A, size_t lda, int m, const float* P, int kc, int nc,
                     const float* bias, bool from_c, const PanelEpilogue* epilogue, const float* next,
                     size_t next_floats);

}  // namespace attnmap::kernels::avx512
