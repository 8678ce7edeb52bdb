// gemm_backends.cpp - bench tooling (not part of attnmap): one thread of each candidate GEMM library on the
// tiles attnmap's sgemm wrapper cuts ViT-B/16's batch-1 products into (rows <= 192 x columns <= 256),
// C = A B^T as linear() does. Built by bench/run.sh once per library (-DUSE_OPENBLAS / -DUSE_BLIS /
// -DUSE_DNNL), since OpenBLAS and BLIS both define cblas_sgemm:
//
//   gemm_backends REPS     prints gemm_<library>_gflops (best of REPS) and the checksum of C
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#if defined(USE_OPENBLAS)
#include <cblas.h>
static const char* kName = "openblas";
static void gemm(int M, int N, int K, const float* A, const float* B, float* C) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
}
static void init() { openblas_set_num_threads(1); }
#elif defined(USE_BLIS)
#include <blis.h>
static const char* kName = "blis";
static void gemm(int M, int N, int K, const float* A, const float* B, float* C) {
  float one = 1.0f, zero = 0.0f;
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_TRANSPOSE, M, N, K, &one, const_cast<float*>(A), K, 1, const_cast<float*>(B),
            K, 1, &zero, C, N, 1);
}
static void init() { bli_thread_set_num_threads(1); }
#elif defined(USE_DNNL)
#include <oneapi/dnnl/dnnl.h>
static const char* kName = "onednn";
static void gemm(int M, int N, int K, const float* A, const float* B, float* C) {
  dnnl_sgemm('N', 'T', M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
}
static void init() {}
#endif

int main(int argc, char** argv) {
  init();
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  // ViT-B/16 at batch 1, as tiles: (197 rows -> 2 blocks of 104 / 93), qkv / fc1 columns of 256, proj and
  // fc2 columns of 256 with K = 768 / 3072.
  struct Shape { int M, N, K; };
  const Shape shapes[] = {{104, 256, 768}, {93, 256, 768}, {104, 256, 3072}, {93, 256, 3072}};
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-1, 1);
  double best_total = 0, flops = 0, checksum = 0;
  for (const Shape& s : shapes) {
    std::vector<float> A(static_cast<size_t>(s.M) * s.K), B(static_cast<size_t>(s.N) * s.K),
        C(static_cast<size_t>(s.M) * s.N);
    for (auto& v : A) v = u(g);
    for (auto& v : B) v = u(g);
    gemm(s.M, s.N, s.K, A.data(), B.data(), C.data());
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < 20; ++i) gemm(s.M, s.N, s.K, A.data(), B.data(), C.data());
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() / 20);
    }
    best_total += best;
    flops += 2.0 * s.M * s.N * s.K;
    for (float c : C) checksum += c;
  }
  std::printf("gemm_%s_gflops %.2f\ngemm_%s_checksum %.6g\n", kName, flops / best_total / 1e9, kName, checksum);
  return 0;
}
