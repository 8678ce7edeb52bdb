// gemm_backends.cpp - bench tooling (not part of attnmap): one thread of each candidate GEMM on the float32
// products a ViT forward runs, C (M, N) = A (M, K) W^T with W a layer's (N, K) weights, as linear() does:
// qkv, proj, fc1 and fc2 of ViT-S/16 and ViT-B/16 at batch 1 (M = 197). Built by bench/gemm_backends.sh once
// per candidate, since OpenBLAS and BLIS both define cblas_sgemm:
//   -DUSE_OPENBLAS  cblas_sgemm (OpenBLAS, W as it is)
//   -DUSE_BLIS      bli_sgemm (BLIS, W as it is)
//   -DUSE_XSMM      libxsmm 1.17's JIT kernels (libxsmm_smmdispatch) per block of 64 columns, W transposed once
//   -DUSE_DNNL      dnnl_sgemm (oneDNN's BLAS-like call, W as it is; linear() itself runs oneDNN's matmul on
//                   weights packed once: attnmap_bench linear compares that one with the own kernels)
//   -DUSE_OWN       attnmap's own kernels (model/kernels.hpp gemm_panels, W packed once by pack_panels)
//
//   gemm_backends REPS     prints gemm_<candidate>_<model>_gflops (best of REPS per product, the products'
//                          FLOPs over their summed best times) and the checksum of the last C
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#if defined(USE_OPENBLAS)
#include <cblas.h>
static const char* kName = "openblas";
struct Gemm {
  Gemm(const float*, int, int) {}
  void run(int M, int N, int K, const float* A, const float* W, float* C) const {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K, 0.0f, C, N);
  }
};
static void init() { openblas_set_num_threads(1); }
#elif defined(USE_BLIS)
#include <blis.h>
static const char* kName = "blis";
struct Gemm {
  Gemm(const float*, int, int) {}
  void run(int M, int N, int K, const float* A, const float* W, float* C) const {
    float one = 1.0f, zero = 0.0f;
    bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_TRANSPOSE, M, N, K, &one, const_cast<float*>(A), K, 1, const_cast<float*>(W), K,
              1, &zero, C, N, 1);
  }
};
static void init() {
  bli_thread_set_num_threads(1);
  std::printf("blis_arch %s\n", bli_arch_string(bli_arch_query_id()));  // the sub-configuration it runs
}
#elif defined(USE_XSMM)
#include <libxsmm.h>
static const char* kName = "libxsmm";
// libxsmm's JIT kernels are for small products (its libxsmm_sgemm hands large ones to a BLAS): W transposed
// once into (K, N) rows, then one dispatched kernel per block of kXsmmCols columns of C, column-major
// C^T (cols, M) = Wt (cols, K) A^T (K, M) with leading dimensions N, K, N.
constexpr int kXsmmCols = 64;
struct Gemm {
  std::vector<float> wt;
  Gemm(const float* W, int N, int K) : wt(static_cast<size_t>(N) * K) {
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k) wt[static_cast<size_t>(k) * N + n] = W[static_cast<size_t>(n) * K + k];
  }
  void run(int M, int N, int K, const float* A, const float*, float* C) const {
    const libxsmm_blasint lda = N, ldb = K, ldc = N;
    const float one = 1.0f, zero = 0.0f;
    const int flags = LIBXSMM_GEMM_FLAG_NONE, prefetch = LIBXSMM_PREFETCH_NONE;
    for (int n0 = 0; n0 < N; n0 += kXsmmCols) {
      const int nb = std::min(kXsmmCols, N - n0);
      const libxsmm_smmfunction f = libxsmm_smmdispatch(nb, M, K, &lda, &ldb, &ldc, &one, &zero, &flags, &prefetch);
      if (f == nullptr) { std::fprintf(stderr, "libxsmm: no kernel for %d x %d x %d\n", nb, M, K); std::exit(1); }
      f(wt.data() + n0, A, C + n0);
    }
  }
};
static void init() { libxsmm_init(); }
#elif defined(USE_DNNL)
#include <oneapi/dnnl/dnnl.h>
static const char* kName = "onednn_sgemm";
struct Gemm {
  Gemm(const float*, int, int) {}
  void run(int M, int N, int K, const float* A, const float* W, float* C) const {
    dnnl_sgemm('N', 'T', M, N, K, 1.0f, A, K, W, K, 0.0f, C, N);
  }
};
extern "C" void omp_set_num_threads(int);
static void init() { omp_set_num_threads(1); }
#elif defined(USE_OWN)
#include "model/kernels.hpp"
static const char* kName = "own";
struct Gemm {
  float* panels = nullptr;
  Gemm(const float* W, int N, int K) {
    const int w = attnmap::kernels::gemm_panel_width();
    const size_t bytes = attnmap::kernels::gemm_panel_floats(N, K, w) * sizeof(float);
    panels = static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    attnmap::kernels::pack_panels(panels, W, N, K, w);
  }
  ~Gemm() { std::free(panels); }
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  void run(int M, int N, int K, const float* A, const float*, float* C) const {
    attnmap::kernels::gemm_panels(C, static_cast<size_t>(N), A, static_cast<size_t>(K), M, N, K, panels, nullptr);
  }
};
static void init() {}
#endif

int main(int argc, char** argv) {
  init();
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  struct Model { const char* name; int D; };
  double checksum = 0;
  for (const Model& model : {Model{"vits", 384}, Model{"vitb", 768}}) {
    const int M = 197, D = model.D;
    const int shapes[4][2] = {{3 * D, D}, {D, D}, {4 * D, D}, {D, 4 * D}};  // (N, K): qkv, proj, fc1, fc2
    std::mt19937 g(1);
    std::uniform_real_distribution<float> u(-1, 1);
    double best_total = 0, flops = 0;
    for (const auto& s : shapes) {
      const int N = s[0], K = s[1];
      std::vector<float> A(static_cast<size_t>(M) * K), W(static_cast<size_t>(N) * K), C(static_cast<size_t>(M) * N);
      for (auto& v : A) v = u(g);
      for (auto& v : W) v = u(g);
      const Gemm gemm(W.data(), N, K);
      gemm.run(M, N, K, A.data(), W.data(), C.data());
      double best = 1e30;
      for (int r = 0; r < reps; ++r) {
        const auto t = std::chrono::steady_clock::now();
        for (int i = 0; i < 5; ++i) gemm.run(M, N, K, A.data(), W.data(), C.data());
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() / 5);
      }
      best_total += best;
      flops += 2.0 * M * N * K;
      for (float c : C) checksum += c;
    }
    std::printf("gemm_%s_%s_gflops %.2f\n", kName, model.name, flops / best_total / 1e9);
  }
  std::printf("gemm_%s_checksum %.6g\n", kName, checksum);
  return 0;
}
