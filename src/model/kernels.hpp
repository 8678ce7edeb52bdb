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

/// The own matrix product's sums: each element of C is start + s_0 + s_1 + ... (start: the bias or 0), added
/// in that order, where s_c = the sum over the c-th chunk of kGemmChunk steps of k (k from 0, the last chunk
/// shorter) of A(i, k) W(j, k), each chunk summed in k order by fused multiply-adds from 0 (rounded once per
/// step). Chunks keep the error of a long sum near a library's (one chain over K = 3072 was 2.5-5x oneDNN's
/// error against a double reference; chunks of 128: GemmKernels tests). The bits depend on K alone.
constexpr int kGemmChunk = 128;

/// The depth of the own product's passes over a block of C: the whole K up to kGemmDepthMax; past it,
/// ceil(K / kGemmDepthMax) passes of equal depth (rounded up to a whole number of chunks, the last shorter),
/// so that a row block's A (rows x depth) stays in a core's L2 cache with the panel it meets. A pass adds its
/// chunks to C's values: passes do not change the sums' order.
constexpr int kGemmDepthMax = 768;
inline int gemm_depth(int K) {
  if (K <= kGemmDepthMax) return K;
  const int passes = (K + kGemmDepthMax - 1) / kGemmDepthMax;
  return ((K + passes - 1) / passes + kGemmChunk - 1) / kGemmChunk * kGemmChunk;
}

/// Width of the own matrix product's weight panels on this CPU: 48 columns (AVX-512 F, BW, DQ, VL: 3 zmm), 16
/// (AVX2 + FMA: 2 ymm), 0 where neither runs (the library's product is used). $ONEDNN_MAX_CPU_ISA caps it as it
/// caps oneDNN (AVX2...: 16; AVX, SSE41: 0), so a run capped to AVX2 times the AVX2 kernels of both.
int gemm_panel_width();

/// W (N, K) row-major (a PyTorch nn.Linear weight) into panels of `width` = gemm_panel_width() columns:
/// panel p holds W's rows [p * width, p * width + width) transposed, K rows of `width` floats (k-major), the
/// rows past N zero; out holds gemm_panel_floats(N, K) floats, 64-byte aligned. On the calling thread.
void pack_panels(float* out, const float* W, int N, int K, int width);

/// Floats of pack_panels' output: ceil(N / width) * width * K (0 when width is 0).
size_t gemm_panel_floats(int N, int K, int width);

/// C (m, n) = A (m, K) * W^T (+ bias (n) when not null), C's rows ldc apart and A's lda apart, W packed by
/// pack_panels (`panels`: the panels of C's n columns, from the first). Each element of C is summed as
/// kGemmChunk says, the same operations whatever m, the row and column where the call's block starts, the
/// thread and the ISA path (AVX-512 or AVX2): a row's bits depend on W, K and the row alone. On the calling
/// thread (a pool task's). BLIS-style (Van Zee and van de Geijn, "BLIS: A Framework for Rapidly Instantiating
/// BLAS Functionality", 2015): a register-blocked micro-tile that reads the panel's rows from cache.
void gemm_panels(float* C, size_t ldc, const float* A, size_t lda, int m, int n, int K, const float* panels,
                 const float* bias);

/// gemm_panels on the path of panel width w: 48 (AVX-512F) or 16 (AVX2 + FMA), which the CPU must have, on
/// panels packed for that width (the tests run each path this way).
void gemm_panels_on(int w, float* C, size_t ldc, const float* A, size_t lda, int m, int n, int K, const float* panels,
                    const float* bias);

}  // namespace attnmap::kernels
