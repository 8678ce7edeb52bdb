#include "sgemm.hpp"

#include <cblas.h>

#include <cstddef>

namespace attnmap {

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
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

void set_blas_threads(int n) { openblas_set_num_threads(n); }

int blas_threads_to_set(int workers, int cores, const char* openblas_env, const char* omp_env) {
  const bool user_set =
      (openblas_env != nullptr && openblas_env[0] != '\0') || (omp_env != nullptr && omp_env[0] != '\0');
  if (user_set) return 0;
  return workers > 1 ? 1 : (cores > 0 ? cores : 1);
}

}  // namespace attnmap
