#include "model/sgemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <vector>

namespace attnmap {

namespace {

std::atomic<int> g_threads{1};  // threads one sgemm call may use (set_blas_threads); OpenBLAS itself runs 1

// Column blocks of one product: N is cut into ceil(N / 256) blocks of equal width (rounded up to 16
// columns), a rule of the shape alone, so every call computes each block with the same cblas_sgemm call
// whether the blocks then run one after another or on several threads.
constexpr int kBlockTarget = 256;
constexpr int kBlockAlign = 16;

int block_width(int N) {
  const int blocks = (N + kBlockTarget - 1) / kBlockTarget;
  const int w = (N + blocks - 1) / blocks;
  return (w + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  // OpenBLAS starts with a thread per core; one thread of its own from the first product on, in every
  // program that links this (render, eval, tests, bench), unless the user's environment chose a count.
  static const bool own_threads_off = [] {
    const bool user_set =
        blas_threads_to_set(1, 1, std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS")) == 0;
    if (!user_set) openblas_set_num_threads(1);
    return true;
  }();
  (void)own_threads_off;
  if (M <= 0 || N <= 0) return;
  const int width = block_width(N);
  const int blocks = (N + width - 1) / width;
  auto block = [&](int b) {
    const int j0 = b * width, nj = std::min(width, N - j0);
    // op(B)'s columns j0.. are B's rows j0.. when B is stored transposed (N, K), its columns when (K, N).
    const float* Bj = trans_b ? B + static_cast<size_t>(j0) * static_cast<size_t>(ldb) : B + j0;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, nj,
                K, alpha, A, lda, Bj, ldb, beta, C + j0, ldc);
  };
  const int threads = std::min(g_threads.load(std::memory_order_relaxed), blocks);
  if (threads <= 1) {
    for (int b = 0; b < blocks; ++b) block(b);
    return;
  }
  std::atomic<int> next{0};
  auto work = [&]() {
    for (int b = next++; b < blocks; b = next++) block(b);
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {  // no thread to be had: the blocks left run on this one
      break;
    }
  }
  work();
  for (auto& h : helpers) h.join();
}

void linear(float* Y, const float* X, const float* W, const float* b, int M, int N, int K) {
  float beta = 0.0f;
  if (b != nullptr) {
    for (int i = 0; i < M; ++i) {
      float* row = Y + static_cast<size_t>(i) * static_cast<size_t>(N);
      for (int j = 0; j < N; ++j) row[j] = b[j];
    }
    beta = 1.0f;
  }
  sgemm(false, true, M, N, K, 1.0f, X, K, W, K, beta, Y, N);
}

void set_blas_threads(int n) {
  openblas_set_num_threads(1);
  g_threads.store(std::max(1, n), std::memory_order_relaxed);
}

int blas_threads_to_set(int workers, int cores, const char* openblas_env, const char* omp_env) {
  const bool user_set =
      (openblas_env != nullptr && openblas_env[0] != '\0') || (omp_env != nullptr && omp_env[0] != '\0');
  if (user_set) return 0;
  return workers > 1 ? 1 : (cores > 0 ? cores : 1);
}

}  // namespace attnmap
