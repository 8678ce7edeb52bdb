// The own matrix-product kernels (kernels::gemm_panels, issue 45): each element is the bias plus chunk sums of
// fused multiply-adds in k order, exactly, on the AVX2 and the AVX-512 path alike (so both give the same bits);
// linear() on them gives the same bits whatever the thread count and the row count, and is as accurate as
// oneDNN's matmul against a double reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/weights.hpp"
#include "model/kernels.hpp"
#include "model/sgemm.hpp"
#include "model/thread_pool.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

#if defined(__x86_64__)
#define CPU_HAS(isa) __builtin_cpu_supports(isa)
#else
#define CPU_HAS(isa) false
#endif

// C (m, n) with rows ldc apart, the kernels' contract (kernels::kGemmChunk) written out: bias (or 0), then per
// chunk of k a sum from 0 by fmaf in k order, added.
std::vector<float> fma_chain(const std::vector<float>& A, size_t lda, const std::vector<float>& W, const float* bias,
                             int m, int n, int K, size_t ldc) {
  std::vector<float> C(static_cast<size_t>(m) * ldc, -7.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float c = bias != nullptr ? bias[j] : 0.0f;
      for (int k0 = 0; k0 < K; k0 += kernels::kGemmChunk) {
        float s = 0.0f;
        for (int k = k0; k < std::min(K, k0 + kernels::kGemmChunk); ++k)
          s = std::fma(A[static_cast<size_t>(i) * lda + static_cast<size_t>(k)], W[static_cast<size_t>(j) * K + k], s);
        c += s;
      }
      C[static_cast<size_t>(i) * ldc + static_cast<size_t>(j)] = c;
    }
  return C;
}

// RAII 64-byte aligned floats (the panels are read with aligned loads).
struct Aligned {
  float* p = nullptr;
  explicit Aligned(size_t n) { p = static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(64, (n * 4 + 63) / 64 * 64))); }
  ~Aligned() { std::free(p); }
};

// x (rows ldx apart) + the product C, or + gamma * C (the product rounded before the sum):
// residual_add_tile's operations written out.
std::vector<float> plus_residual(std::vector<float> x, size_t ldx, const std::vector<float>& C, size_t ldc,
                                 const float* gamma, int m, int n) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      volatile float y = C[static_cast<size_t>(i) * ldc + static_cast<size_t>(j)];  // volatile: never an FMA
      if (gamma != nullptr) y = gamma[j] * y;
      x[static_cast<size_t>(i) * ldx + static_cast<size_t>(j)] += y;
    }
  return x;
}

// One path (panel width, function) on shapes with row tails (m not a multiple of 6 or 8), row sweeps (m = 101 >
// 2 x gemm_sweep_rows on the AVX2 path, the last sweep short), column tails (n not
// a multiple of 16 or 48), one and several depth passes (K up to 1600 > kGemmDepthMax), strided A and C, with
// and without bias, stored, stored through GELU or added to a residual stream (with and without LayerScale):
// every element equal to the FMA chain (through activation's GELU; plus the residual), and nothing written
// past a row's n columns.
void expect_fma_chain(int width) {
  for (int m : {1, 5, 8, 13, 101}) {
    for (int n : {1, 16, 47, 80, 97}) {  // 80: a panel and 32 columns (two registers of 16)
      for (int K : {1, 7, 300, 1600}) {
        for (int mode = 0; mode < 5; ++mode) {  // stored without, with bias; added, with bias; with
                                                // LayerScale; stored through GELU, with bias
          const bool with_bias = mode == 1 || mode == 2 || mode == 4, residual = mode == 2 || mode == 3;
          // the epilogues on one row and on a full tile plus a tail, one pass and three (for the time)
          if (mode >= 2 && (m == 5 || m == 8 || K == 1 || K == 300)) continue;
          const size_t lda = static_cast<size_t>(K) + 3, ldc = static_cast<size_t>(n) + 5,
                       ldx = static_cast<size_t>(n) + 2;
          const std::vector<float> A = randoms(static_cast<size_t>(m) * lda, 1),
                                   W = randoms(static_cast<size_t>(n) * K, 2),
                                   b = randoms(static_cast<size_t>(n), 3),
                                   g = randoms(static_cast<size_t>(n), 4),
                                   x0 = randoms(static_cast<size_t>(m) * ldx, 5);
          Aligned panels(kernels::gemm_panel_floats(n, K, width));
          kernels::pack_panels(panels.p, W.data(), n, K, width);
          const float* bias = with_bias ? b.data() : nullptr;
          const float* gamma = mode == 3 ? g.data() : nullptr;
          std::vector<float> C(static_cast<size_t>(m) * ldc, -7.0f), x = x0;
          const kernels::PanelEpilogue res{x.data(), ldx, gamma, false}, gelu{nullptr, 0, nullptr, true};
          kernels::gemm_panels_on(width, C.data(), ldc, A.data(), lda, m, n, K, panels.p, bias,
                                  residual    ? &res
                                  : mode == 4 ? &gelu
                                              : nullptr);
          std::vector<float> want = fma_chain(A, lda, W, bias, m, n, K, ldc);
          if (mode == 4)
            kernels::activation_tile(want.data(), ldc, static_cast<size_t>(m), static_cast<size_t>(n),
                                     Activation::Gelu);
          const std::string where = "width " + std::to_string(width) + ", m " + std::to_string(m) + ", n " +
                                    std::to_string(n) + ", K " + std::to_string(K) + ", mode " +
                                    std::to_string(mode);
          if (!residual) {
            ASSERT_EQ(std::memcmp(C.data(), want.data(), C.size() * sizeof(float)), 0) << where;
            continue;
          }
          const std::vector<float> want_x = plus_residual(x0, ldx, want, ldc, gamma, m, n);
          ASSERT_EQ(std::memcmp(x.data(), want_x.data(), x.size() * sizeof(float)), 0) << where;
        }
      }
    }
  }
}

struct KernelsKind {  // restores the default after a test
  ~KernelsKind() {
    set_gemm_kernels(GemmKernels::Own);
    set_blas_threads(1);
  }
};

}  // namespace

TEST(GemmKernels, Avx2PathIsTheChunkedFmaSum) {
  if (!CPU_HAS("avx2") || !CPU_HAS("fma")) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  expect_fma_chain(16);
}

TEST(GemmKernels, Avx512PathIsTheChunkedFmaSum) {
  if (!CPU_HAS("avx512f") || !CPU_HAS("avx512bw") || !CPU_HAS("avx512dq") || !CPU_HAS("avx512vl"))
    GTEST_SKIP() << "no AVX-512 F, BW, DQ and VL on this CPU";
  expect_fma_chain(48);
}

// K = 0: no products, C is the bias (or 0), as from a library's GEMM.
TEST(GemmKernels, NoDepthGivesTheBias) {
  const float bias[3] = {1, 2, 3};
  for (int w : {16, 48}) {
    if (w != kernels::gemm_panel_width() && w != 16) continue;  // the path the CPU runs, and AVX2's
    if (kernels::gemm_panel_width() == 0) GTEST_SKIP() << "no own kernels on this CPU";
    std::vector<float> C(6, -9.0f);
    kernels::gemm_panels_on(w, C.data(), 3, nullptr, 0, 2, 3, 0, nullptr, bias);
    EXPECT_EQ(C, (std::vector<float>{1, 2, 3, 1, 2, 3}));
    kernels::gemm_panels_on(w, C.data(), 3, nullptr, 0, 2, 3, 0, nullptr, nullptr);
    EXPECT_EQ(C, std::vector<float>(6, 0.0f));
    std::vector<float> x = {10, 20, 30, 40, 50, 60, 70, 80};  // rows 4 apart: 40 and 80 are not the tile's
    const float gamma[3] = {2, 2, 0.5f};
    const kernels::PanelEpilogue res{x.data(), 4, gamma};
    kernels::gemm_panels_on(w, C.data(), 3, nullptr, 0, 2, 3, 0, nullptr, bias, &res);
    EXPECT_EQ(x, (std::vector<float>{12, 24, 31.5f, 40, 52, 64, 71.5f, 80}));
  }
}

TEST(GemmKernels, DepthPassesAreARuleOfKAlone) {
  EXPECT_EQ(kernels::gemm_depth(1), 1);
  EXPECT_EQ(kernels::gemm_depth(768), 768);
  EXPECT_EQ(kernels::gemm_depth(769), 512);  // 2 passes: 385 rounded up to whole chunks of 128
  EXPECT_EQ(kernels::gemm_depth(1536), 768);
  EXPECT_EQ(kernels::gemm_depth(3072), 768);
  EXPECT_EQ(kernels::gemm_panel_floats(49, 10, 48), 2u * 48u * 10u);
  EXPECT_EQ(kernels::gemm_panel_floats(49, 10, 0), 0u);
}

// The next panel's lines are split over a pass's micro-tiles once each, in order, and a null panel gives none
// (the prefetch reads no value: the products' bits are checked by the other tests here, with it on).
TEST(GemmKernels, NextPanelLinesAreSplitOverTheMicroTilesOnce) {
  alignas(64) static float panel[768 * 48];
  for (const int tiles : {1, 7, 25, 197}) {
    size_t covered = 0;
    for (int t = 0; t < tiles; ++t) {
      const kernels::NextLines s = kernels::next_slice(panel, 768 * 48, t, tiles);
      EXPECT_EQ(s.first, reinterpret_cast<const char*>(panel) + 64 * covered)
          << tiles << " tiles, tile " << t;
      covered += static_cast<size_t>(s.lines);
    }
    EXPECT_EQ(covered, 768u * 48u * 4u / 64u) << tiles << " tiles";
  }
  EXPECT_EQ(kernels::next_slice(panel, 17, 0, 1).lines, 2);  // 68 bytes: a partial line counts
  EXPECT_EQ(kernels::next_slice(nullptr, 768, 0, 4).lines, 0);
}

// linear() on the own kernels: ViT-B's proj and fc2 depths (one pass, four) on 1, 2 and 3 threads give the
// same bits; a block of rows computed alone gives the rows' bits in the whole product; and the error against
// a double reference is of the size of oneDNN's (both measured here, same data).
TEST(GemmKernels, LinearIsTheSameOnEveryThreadCountAndAsAccurateAsTheLibrary) {
  if (gemm_kernels() != GemmKernels::Own) GTEST_SKIP() << "the own kernels do not run on this CPU or build";
  KernelsKind restore;
  for (int K : {768, 3072}) {
    const int M = 61, N = 200;
    const LinearW lin = random_linear(N, K, 5);
    const std::vector<float> X = randoms(static_cast<size_t>(M) * K, 7);
    std::vector<std::vector<float>> Y;
    for (int t : {1, 2, 3}) {
      set_blas_threads(t);
      Y.emplace_back(static_cast<size_t>(M) * N);
      linear(Y.back().data(), X.data(), lin, M);
    }
    EXPECT_EQ(std::memcmp(Y[0].data(), Y[1].data(), Y[0].size() * 4), 0) << K;
    EXPECT_EQ(std::memcmp(Y[0].data(), Y[2].data(), Y[0].size() * 4), 0) << K;
    std::vector<float> rows(static_cast<size_t>(7) * N);
    linear(rows.data(), X.data() + static_cast<size_t>(20) * K, lin, 7);
    EXPECT_EQ(std::memcmp(rows.data(), Y[0].data() + static_cast<size_t>(20) * N, rows.size() * 4), 0) << K;

    LinearW other = lin;  // its own packed copy
    other.weight = std::vector<float>(lin.weight.vec());
    set_gemm_kernels(GemmKernels::Library);
    std::vector<float> lib(Y[0].size());
    linear(lib.data(), X.data(), other, M);
    set_gemm_kernels(GemmKernels::Own);
    double err_own = 0, err_lib = 0;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double s = lin.bias.data()[j];
        for (int k = 0; k < K; ++k)
          s += static_cast<double>(X[static_cast<size_t>(i) * K + k]) * lin.weight.data()[static_cast<size_t>(j) * K + k];
        err_own = std::max(err_own, std::fabs(Y[0][static_cast<size_t>(i) * N + j] - s));
        err_lib = std::max(err_lib, std::fabs(lib[static_cast<size_t>(i) * N + j] - s));
      }
    std::printf("K %d: largest error against double: own kernels %.3g, %s %.3g\n", K, err_own, gemm_backend(), err_lib);
    EXPECT_LT(err_own, 1.25 * err_lib) << K;  // one chain over K: 2.5-5x the library's error
  }
}

// linear_columns gives columns of linear()'s product with linear()'s bits, from rows ldx apart into rows ldy
// apart (the drawn block's keys and class queries, model/vit.cpp), on 1 and 2 threads; it refuses a first
// column inside a panel and the library's kernels, writing nothing.
TEST(GemmKernels, LinearColumnsAreTheWholeProductsColumns) {
  if (gemm_kernels() != GemmKernels::Own) GTEST_SKIP() << "the own kernels do not run on this CPU or build";
  KernelsKind restore;
  const int M = 300, N = 3 * 96, K = 200, w = kernels::gemm_panel_width();
  const LinearW lin = random_linear(N, K, 21);
  const std::vector<float> X = randoms(static_cast<size_t>(M) * K, 22);
  std::vector<float> whole(static_cast<size_t>(M) * N);
  linear(whole.data(), X.data(), lin, M);
  for (int threads : {1, 2})
    for (int n0 : {0, 96, 2 * w}) {
      set_blas_threads(threads);
      const int n = std::min(96, N - n0), every = 3;  // every third row of X, into rows of ldy = n + 5
      const int m = M / every;
      const size_t ldy = static_cast<size_t>(n) + 5;
      std::vector<float> Y(static_cast<size_t>(m) * ldy, -7.0f);
      ASSERT_TRUE(linear_columns(Y.data(), ldy, X.data(), static_cast<size_t>(K) * every, lin, m, n0, n));
      for (int i = 0; i < m; ++i) {
        const float* want = whole.data() + static_cast<size_t>(i) * every * N + static_cast<size_t>(n0);
        ASSERT_EQ(std::memcmp(Y.data() + static_cast<size_t>(i) * ldy, want, static_cast<size_t>(n) * 4), 0)
            << "row " << i << ", n0 " << n0 << ", threads " << threads;
        for (size_t j = static_cast<size_t>(n); j < ldy; ++j) ASSERT_EQ(Y[static_cast<size_t>(i) * ldy + j], -7.0f);
      }
    }
  std::vector<float> Y(static_cast<size_t>(M) * N, -7.0f);
  EXPECT_FALSE(linear_columns(Y.data(), N, X.data(), K, lin, M, 1, 10));  // not at a panel's first column
  set_gemm_kernels(GemmKernels::Library);
  EXPECT_FALSE(linear_columns(Y.data(), N, X.data(), K, lin, M, 0, 10));
  EXPECT_TRUE(std::all_of(Y.begin(), Y.end(), [](float v) { return v == -7.0f; }));
}
