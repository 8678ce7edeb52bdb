// sgemm.hpp - the one wrapper around the GEMM library (oneDNN or OpenBLAS) that every matrix product goes
// through; the only file that knows which library runs the products.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/layouts.hpp"
#include "checkpoint/weights.hpp"

namespace attnmap {

/// C(M,N) = alpha * op(A) * op(B) + beta * C, row-major, where op(A) is (M,K) and op(B) is (K,N).
/// trans_a / trans_b: the stored matrix is the transpose of op(X), i.e. A is stored (K,M) / B is (N,K).
/// lda/ldb/ldc: row strides in floats of the stored matrices (allows column slices such as one head of
/// a fused QKV buffer without copying). Calls the back-end's sgemm (oneDNN dnnl_sgemm by default, or OpenBLAS
/// cblas_sgemm: -DATTNMAP_GEMM) once per tile of C: columns cut into
/// blocks of about 256, rows into blocks of about 192 (one more row block when that makes the tile count
/// even), a rule of (M, N) alone; the tiles run on the thread pool (model/thread_pool.hpp, sized by
/// set_blas_threads), inline when called from a pool task. OpenBLAS's own threads split a product by the
/// thread count, and that split changes the rounding (seen on an AVX2 AMD EPYC: maps from -j 1, OpenBLAS
/// on 2 threads, and -j 2 differed by up to 3e-7), so cutting by shape keeps the bits the same whatever the
/// thread count.
void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

/// Y(M,N) = X(M,K) * W(N,K)^T + b(N): a PyTorch nn.Linear on M rows. `b` may be null. W is used as it is
/// (no packed copy is kept): for weights that change, or products made once.
void linear(float* Y, const float* X, const float* W, const float* b, int M, int N, int K);

/// Y(M, lin.out) = X(M, lin.in) * lin.weight^T + lin.bias: a model's nn.Linear on M rows, the product the
/// forward pass spends its time in. With the oneDNN back-end the weights are packed once into the layout of
/// its matmul kernels, one block of output columns at a time (the tiles' column blocks), kept with
/// lin.weight (Floats::derived; a change to the weights drops it) and reused by every later call, as ONNX
/// Runtime pre-packs its initializers (the column blocks packed in parallel on the thread pool, into one
/// allocation per layer whose whole 2 MiB pieces ask for transparent huge pages; the packed values do not
/// depend on either); a weight tensor viewed in place from a file mapping then hands its
/// pages back to the system (the packed copy replaces them in memory). Each row of Y is computed the same
/// way whatever M is, so a batch of images gives each image the bits it gets alone. OpenBLAS back-end: the
/// same as linear(Y, X, W, b, M, N, K). Throws attnmap::Error when the back-end refuses the shape.
void linear(float* Y, const float* X, const LinearW& lin, int M);

/// The same product in `precision`: F32 as linear(Y, X, lin, M); BF16 (oneDNN only, bf16_supported()): X's
/// rows rounded to bfloat16 (round to nearest even), times lin.weight packed once in bfloat16, accumulated and
/// written in float32 with the float32 bias. Rows are computed the same way whatever M and the thread count,
/// as in F32. Throws attnmap::Error when bf16 is asked for and not supported.
void linear(float* Y, const float* X, const LinearW& lin, int M, Precision precision);

/// What linear() does with each tile of its product while the tile is still in cache (fused, as ONNX Runtime
/// fuses a MatMul's bias and activation): nothing (Y = X W^T + b); `act`: Y = act(X W^T + b), the MLP's
/// activation in place; `residual` (M, N): residual += gamma * (X W^T + b) (gamma (N) may be null: + 1 *),
/// Y not written (may be null). Each element gets the same operations, in the same order, as the separate
/// passes (kernels::gelu ..., kernels::residual_add), so the bits are those of the unfused forward.
struct Epilogue {
  const Activation* act = nullptr;
  float* residual = nullptr;
  const float* gamma = nullptr;
};

/// linear(Y, X, lin, M, precision) followed by `epilogue` on each tile.
void linear(float* Y, const float* X, const LinearW& lin, int M, Precision precision, const Epilogue& epilogue);

/// Columns [n0, n0 + n) of linear(Y, X, lin, M) in float32, with the bits linear() gives them: Y (M, n), rows
/// ldy apart, from X (M, lin.in), rows ldx apart. Only on the own kernels (gemm_kernels() Own) and where n0
/// starts a weight panel; returns false and writes nothing otherwise (the caller then runs linear()). For a
/// product most of whose columns no view reads (the drawn block's keys and class query, model/vit.cpp).
bool linear_columns(float* Y, size_t ldy, const float* X, size_t ldx, const LinearW& lin, int M, int n0, int n);

/// C(M, N) = alpha * A(M, K) * op(B) on the calling thread with bfloat16 inputs (raw bits, uint16) and float32
/// accumulation and output: the attention products of one head in Precision::BF16 (as matmul_dense).
/// Throws attnmap::Error when the back-end has no bf16 matmul.
void matmul_dense_bf16(float* C, const uint16_t* A, const uint16_t* B, int M, int N, int K, bool trans_b, float alpha);

/// True when this CPU runs oneDNN's bfloat16 matmul kernels natively (AVX512_BF16 or AMX: oneDNN's "brgemm"
/// kernels, and respecting ONEDNN_MAX_CPU_ISA) and has the AVX512_BF16 conversion instructions; false with
/// OpenBLAS. A bf16 run is refused where this is false, never run slower in emulation.
bool bf16_supported();

/// True when the back-end keeps a packed copy of each layer's weights (oneDNN), false when it multiplies the
/// weights as they are (OpenBLAS).
bool linear_packs_weights();

/// Packs lin's weights now, as linear() would on its first call (oneDNN; a file-mapped view then hands its
/// pages back); nothing with OpenBLAS. Throws attnmap::Error when the back-end refuses the shape.
void prepack_linear(const LinearW& lin);

/// Packs lin's weights for `precision` now (F32: as prepack_linear; BF16: the bfloat16 copy).
void prepack_linear(const LinearW& lin, Precision precision);

/// C(M, N) = alpha * A(M, K) * op(B) on the calling thread, every matrix dense and row-major: op(B) = B
/// stored (K, N), or with trans_b B stored (N, K). The attention products of one head (Q K^T / sqrt(d_k),
/// then P V) on per-head copies. oneDNN: its matmul, one primitive per shape made once (alpha as an output
/// scale); OpenBLAS: cblas_sgemm. Throws attnmap::Error when the back-end refuses the shape.
void matmul_dense(float* C, const float* A, const float* B, int M, int N, int K, bool trans_b, float alpha);

/// Which kernels run float32 linear() products on packed weights: the project's own (kernels::gemm_panels,
/// where the CPU has AVX2 + FMA or AVX-512F: the default), or the back-end library's (oneDNN's matmul; with
/// OpenBLAS, linear() always multiplies the weights as they are). Set before a run's products: for benchmarks
/// that compare the two in one process (bench/bench.cpp). Weights packed for the other kind are packed again
/// on their next product. The own kernels' bits do not depend on the ISA path (AVX-512 or AVX2).
enum class GemmKernels { Own, Library };
void set_gemm_kernels(GemmKernels kind);

/// The kind linear() uses now: Own only where it is set (the default) and the CPU runs the own kernels.
GemmKernels gemm_kernels();

/// Which code runs the products on this CPU, one line for `attnmap --version`, e.g. "matrix products: attnmap's
/// own AVX-512 kernels (float32 layers and attention); oneDNN (bfloat16, the rest)", or "...: OpenBLAS (all)".
std::string gemm_description();

/// The GEMM back-end this build runs linear() and sgemm() on: "onednn" or "openblas" (-DATTNMAP_GEMM).
const char* gemm_backend();

/// True when each row of a linear() product is computed the same way whatever the product's row count, so
/// that B images through one forward pass get exactly the bits each gets alone: the own kernels (any CPU with
/// AVX2 + FMA), or oneDNN's blocked (brgemm) kernels, chosen on CPUs with AVX-512. False with OpenBLAS, and
/// with oneDNN's fallback on older CPUs when the own kernels are set aside (set_gemm_kernels(Library)): their
/// rounding of a row depends on the tile it falls in; the results agree to rounding. bf16 products are on
/// brgemm wherever they run.
bool linear_rows_independent();

/// Number of threads the forward pass may use: sizes the one thread pool (set_pool_threads) that sgemm's
/// tiles, the attention heads and the element-wise kernels run on (1 inside image-parallel batch runs);
/// with the OpenBLAS back-end, OpenBLAS is set to one thread of its own, so that the result never depends
/// on n (the oneDNN build does not link OpenBLAS).
void set_blas_threads(int n);

/// The thread count a run should give set_blas_threads: 1 with several image workers (each image's products
/// on its own thread); with one worker `cores`, or fewer when the user's environment asks for fewer
/// (`openblas_env` = $OPENBLAS_NUM_THREADS, else `omp_env` = $OMP_NUM_THREADS, a whole number >= 1; other
/// values are ignored), e.g. 1 on a busy shared machine. The back-ends' own threads stay at one either way,
/// so the bits never depend on it. Never 0.
int blas_threads_to_set(int workers, int cores, const char* openblas_env, const char* omp_env);

}  // namespace attnmap
