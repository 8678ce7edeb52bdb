// kernels.hpp - the forward pass's element-wise stages (LayerNorm, GELU, softmax, residual add), each
// parallel over rows on the thread pool (model/thread_pool.hpp) and vectorised (AVX2 + FMA when the CPU has
// them, with SLEEF's exp/erf; otherwise scalar code with SLEEF's scalar functions). Every element is
// computed the same way whatever the thread count and wherever its row or chunk is cut, so results never
// depend on the number of threads. exp and erf are SLEEF's 1.0-ULP functions (Sleef_expf*_u10,
// Sleef_erff*_u10): not bit-identical to glibc's std::exp / std::erf, both within 1 ULP of the true value.
#pragma once
#include <cstddef>
#include <cstdint>

#include "checkpoint/layouts.hpp"

namespace attnmap::kernels {

/// out(M, D) = LayerNorm(in(M, D)) * weight(D) + bias(D): mean and biased variance accumulated in double,
/// eps inside the square root (PyTorch nn.LayerNorm). out may not alias in. Rows in parallel.
void layernorm(float* out, const float* in, const float* weight, const float* bias, int M, int D, float eps);

/// In place, n floats: exact GELU x * 0.5 * (1 + erf(x / sqrt(2))) (PyTorch nn.GELU(), approximate='none').
/// Chunks in parallel.
void gelu(float* x, size_t n);

/// In place, n floats: QuickGELU x / (1 + exp(-1.702 x)) = x * sigmoid(1.702 x) (OpenAI CLIP clip/model.py).
/// Chunks in parallel.
void quick_gelu(float* x, size_t n);

/// In place, n floats: GELU's tanh form 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (PyTorch
/// nn.GELU(approximate='tanh'), timm 'gelu_tanh'). Chunks in parallel.
void gelu_tanh(float* x, size_t n);

/// In place, n floats: the MLP activation `act` (gelu, gelu_tanh or quick_gelu above).
void activation(float* x, size_t n, Activation act);

/// SwiGLU: out (M, hidden) = silu(x1) * x2 for each row [x1 | x2] of in (M, 2 * hidden); silu(x) =
/// x / (1 + exp(-x)) (PyTorch F.silu). Rows in parallel; out must not overlap in.
void swiglu(float* out, const float* in, int M, int hidden);

/// In place: each of M rows of length n (n >= 1) becomes its softmax, computed stably (row max subtracted,
/// exp summed in double). Rows in parallel.
void softmax_rows(float* x, int M, int n);

/// One row, on the calling thread (for callers that are already a pool task).
void softmax_row(float* row, int n);

/// out[i] = in[i] rounded to bfloat16 (raw bits): round to nearest even, denormals to zero (AVX512_BF16's
/// VCVTNEPS2BF16, or the same rule in scalar code). On the calling thread.
void to_bf16(uint16_t* out, const float* in, size_t n);

/// True when the CPU has AVX512_BF16 (and AVX-512F, FMA): to_bf16 runs on VCVTNEPS2BF16.
bool has_bf16_instructions();

/// x(M, D) += y(M, D), or x += gamma(D) * y with LayerScale (gamma non-null). Rows in parallel.
void residual_add(float* x, const float* y, const float* gamma, size_t M, int D);

/// The same on a tile, on the calling thread (a pool task's: no nested parallel_for per row): m rows of n
/// floats, x's rows ldx apart, y's ldy apart, gamma n floats or null; each element gets residual_add's
/// operations (gamma * y, then +=), so the bits are residual_add's.
void residual_add_tile(float* x, size_t ldx, const float* y, size_t ldy, const float* gamma, size_t m, size_t n);

}  // namespace attnmap::kernels
