#include "model/sgemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>

#include "model/thread_pool.hpp"

#if defined(ATTNMAP_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

namespace attnmap {

namespace {

// Tiles of one product: C (M, N) is cut into rb x cb tiles by a rule of the shape alone, so every call
// computes each tile with the same cblas_sgemm call whether the tiles then run one after another or on
// several threads. Columns: ceil(N / 256) blocks of equal width rounded up to 16; rows: ceil(M / 192)
// blocks rounded up to 8, one more when the tile count is odd (so that 2 threads get equal shares).
constexpr int kColTarget = 256;
constexpr int kColAlign = 16;
constexpr int kRowTarget = 192;
constexpr int kRowAlign = 8;

int cut(int n, int blocks, int align) {
  const int w = (n + blocks - 1) / blocks;
  return (w + align - 1) / align * align;
}

struct Tiling {
  int width = 0, height = 0, cols = 0, rows = 0;
};

Tiling tiling(int M, int N) {
  Tiling t;
  t.width = cut(N, (N + kColTarget - 1) / kColTarget, kColAlign);
  t.cols = (N + t.width - 1) / t.width;
  int rb = (M + kRowTarget - 1) / kRowTarget;
  if (rb * t.cols % 2 == 1 && M >= 2 * kRowAlign * (rb + 1)) ++rb;
  t.height = cut(M, rb, kRowAlign);
  t.rows = (M + t.height - 1) / t.height;
  return t;
}

// One tile: C(m, n) = alpha op(A) op(B) + beta C, row-major, on the calling thread. The back-end is chosen
// at configure time (-DATTNMAP_GEMM=openblas|onednn); this is the only place that knows it.
void gemm_tile(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* A, int lda,
               const float* B, int ldb, float beta, float* C, int ldc) {
#if defined(ATTNMAP_GEMM_ONEDNN)
  // oneDNN's sgemm would start an OpenMP team of its own from every pool thread; one thread each, so the
  // tile's rounding never depends on a thread count.
  thread_local const bool one_thread = (omp_set_num_threads(1), true);
  (void)one_thread;
  dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
#else
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

// OpenBLAS starts with a thread per core; one thread of its own from the first product on, in every program
// that links this (render, eval, tests, bench), unless the user's environment chose a count.
void own_threads_off() {
  static const bool done = [] {
    const bool user_set =
        blas_threads_to_set(1, 1, std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS")) == 0;
    if (!user_set) openblas_set_num_threads(1);
    return true;
  }();
  (void)done;
}

// C = alpha op(A) op(B) + beta C tile by tile on the pool; before each tile's product, `prepare(i0, mi,
// j0, nj)` may fill the tile of C (the bias of linear()).
template <class Prepare>
void tiled(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc, Prepare prepare) {
  own_threads_off();
  if (M <= 0 || N <= 0) return;
  const Tiling t = tiling(M, N);
  parallel_for(t.rows * t.cols, [&](int k) {
    const int i0 = (k / t.cols) * t.height, mi = std::min(t.height, M - i0);
    const int j0 = (k % t.cols) * t.width, nj = std::min(t.width, N - j0);
    // op(A)'s rows i0.. are A's columns when A is stored transposed (K, M), its rows when (M, K); op(B)'s
    // columns j0.. are B's rows when B is stored transposed (N, K), its columns when (K, N).
    const size_t si = static_cast<size_t>(i0), sj = static_cast<size_t>(j0);
    const float* Ai = trans_a ? A + si : A + si * static_cast<size_t>(lda);
    const float* Bj = trans_b ? B + sj * static_cast<size_t>(ldb) : B + sj;
    float* Cij = C + si * static_cast<size_t>(ldc) + sj;
    prepare(i0, mi, j0, nj);
    gemm_tile(trans_a, trans_b, mi, nj, K, alpha, Ai, lda, Bj, ldb, beta, Cij, ldc);
  });
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  tiled(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, [](int, int, int, int) {});
}

void linear(float* Y, const float* X, const float* W, const float* b, int M, int N, int K) {
  const size_t n = static_cast<size_t>(N);
  auto bias = [&](int i0, int mi, int j0, int nj) {
    if (b == nullptr) return;
    for (int i = i0; i < i0 + mi; ++i) std::copy_n(b + j0, nj, Y + static_cast<size_t>(i) * n + static_cast<size_t>(j0));
  };
  tiled(false, true, M, N, K, 1.0f, X, K, W, K, b != nullptr ? 1.0f : 0.0f, Y, N, bias);
}

void set_blas_threads(int n) {
  openblas_set_num_threads(1);
  set_pool_threads(std::max(1, n));
}

int blas_threads_to_set(int workers, int cores, const char* openblas_env, const char* omp_env) {
  const bool user_set =
      (openblas_env != nullptr && openblas_env[0] != '\0') || (omp_env != nullptr && omp_env[0] != '\0');
  if (user_set) return 0;
  return workers > 1 ? 1 : (cores > 0 ? cores : 1);
}

}  // namespace attnmap
