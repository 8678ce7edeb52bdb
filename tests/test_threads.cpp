// The thread pool, the tiled sgemm and the vectorised kernels: results are the same bits whatever the
// number of threads, and the kernels agree with double-precision references (tails of rows that are not a
// multiple of the vector width included).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "checkpoint/weights.hpp"
#include "io/npy.hpp"
#include "model/kernels.hpp"
#include "model/sgemm.hpp"
#include "model/thread_pool.hpp"
#include "model/vit.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::vector<float> randoms(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

struct PoolSize {  // restores the single-threaded default after a test
  ~PoolSize() { set_blas_threads(1); }
};

TEST(ThreadPool, RunsEveryTaskOnceNestedInlineAndRethrows) {
  PoolSize restore;
  set_blas_threads(2);
  EXPECT_EQ(pool_threads(), 2);
  std::vector<std::atomic<int>> hits(1000);
  parallel_for(1000, [&](int i) {
    hits[static_cast<size_t>(i)]++;
    parallel_for(3, [&](int) { hits[static_cast<size_t>(i)]++; });  // nested: inline on this thread
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 4);
  EXPECT_THROW(parallel_for(50, [](int i) { if (i == 17) throw std::runtime_error("task 17"); }), std::runtime_error);
  int after = 0;
  parallel_for(1, [&](int) { ++after; });  // the pool still works after an exception
  EXPECT_EQ(after, 1);
}

TEST(Sgemm, TilesGiveTheSameBitsOnOneTwoAndThreeThreads) {
  PoolSize restore;
  // 1576 x 768 (ViT-B batch 8's proj: 9 x 3 tiles, one row block added to make them even) and an odd shape.
  for (auto mnk : {std::array<int, 3>{1576, 768, 96}, {197, 301, 37}}) {
    const int M = mnk[0], N = mnk[1], K = mnk[2];
    const std::vector<float> A = randoms(static_cast<size_t>(M) * K, 1), W = randoms(static_cast<size_t>(N) * K, 2),
                             b = randoms(static_cast<size_t>(N), 3);
    std::vector<std::vector<float>> Y;
    for (int t : {1, 2, 3}) {
      set_blas_threads(t);
      Y.emplace_back(static_cast<size_t>(M) * N);
      linear(Y.back().data(), A.data(), W.data(), b.data(), M, N, K);
    }
    EXPECT_TRUE(same_bits(Y[0], Y[1]));
    EXPECT_TRUE(same_bits(Y[0], Y[2]));
    for (int i : {0, M / 2, M - 1})  // every tile computed, bias included: spot rows against double
      for (int j : {0, N / 3, N - 1}) {
        double s = b[static_cast<size_t>(j)];
        for (int k = 0; k < K; ++k)
          s += static_cast<double>(A[static_cast<size_t>(i) * K + k]) * W[static_cast<size_t>(j) * K + k];
        EXPECT_NEAR(Y[0][static_cast<size_t>(i) * N + j], s, 1e-4 * std::sqrt(K)) << i << "," << j;
      }
  }
}

TEST(Kernels, AgreeWithDoubleReferencesIncludingRowTails) {
  PoolSize restore;
  set_blas_threads(2);
  for (int n : {1, 7, 13, 197, 785}) {
    const int M = 5;
    std::vector<float> x = randoms(static_cast<size_t>(M) * n, static_cast<unsigned>(n), 4.0f), s = x;
    kernels::softmax_rows(s.data(), M, n);
    for (int i = 0; i < M; ++i) {
      const float* r = &x[static_cast<size_t>(i) * n];
      double mx = r[0], sum = 0;
      for (int j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(r[j]));
      for (int j = 0; j < n; ++j) sum += std::exp(r[j] - mx);
      for (int j = 0; j < n; ++j)
        EXPECT_NEAR(s[static_cast<size_t>(i) * n + j], std::exp(r[j] - mx) / sum, 2e-7) << n << " " << i << " " << j;
    }
    std::vector<float> g = x;
    kernels::gelu(g.data(), g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      const double v = x[i], want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      EXPECT_NEAR(g[i], want, 4e-7 * std::max(1.0, std::fabs(want))) << n << " " << i;
    }
    const std::vector<float> w = randoms(static_cast<size_t>(n), 7), b = randoms(static_cast<size_t>(n), 8);
    std::vector<float> y(x.size());
    kernels::layernorm(y.data(), x.data(), w.data(), b.data(), M, n, 1e-6f);
    for (int i = 0; i < M; ++i) {
      const float* r = &x[static_cast<size_t>(i) * n];
      double mean = 0, var = 0;
      for (int j = 0; j < n; ++j) mean += r[j];
      mean /= n;
      for (int j = 0; j < n; ++j) var += (r[j] - mean) * (r[j] - mean);
      var /= n;
      for (int j = 0; j < n; ++j) {
        const double want = (r[j] - mean) / std::sqrt(var + 1e-6) * w[static_cast<size_t>(j)] + b[static_cast<size_t>(j)];
        EXPECT_NEAR(y[static_cast<size_t>(i) * n + j], want, 2e-6 * std::max(1.0, std::fabs(want))) << n << " " << j;
      }
    }
  }
}

TEST(Threads, ForwardGivesTheSameBitsOnOneAndTwoPoolThreads) {
  PoolSize restore;
  const std::string dir = fixture("timm_224") + "/";
  const ViTWeights w = load_model(dir + "weights.json");
  std::vector<int64_t> shape;
  const std::vector<float> a = read_npy(dir + "input.npy", &shape);
  const std::vector<float> b(a.rbegin(), a.rend()), c = randoms(a.size(), 4), d = randoms(a.size(), 5);
  ForwardOptions fo;
  fo.to_end = true;
  fo.keep_full = true;
  std::vector<std::vector<ForwardResult>> runs;
  for (int t : {1, 2, 3}) {
    set_blas_threads(t);
    runs.push_back(vit_forward(w, {a.data(), b.data(), c.data(), d.data()}, fo));  // 4 x 197 rows
  }
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(same_bits(runs[0][i].cls_attn, runs[r][i].cls_attn)) << r << " " << i;
      EXPECT_TRUE(same_bits(runs[0][i].attn, runs[r][i].attn)) << r << " " << i;
      EXPECT_TRUE(same_bits(runs[0][i].tokens_out, runs[r][i].tokens_out)) << r << " " << i;
    }
  // The drawn-layer path (class rows only, heads and images spread over the pool) too.
  ForwardOptions maps;
  std::vector<std::vector<float>> rows;
  for (int t : {1, 2}) {
    set_blas_threads(t);
    rows.push_back(vit_forward(w, {a.data(), b.data(), c.data()}, maps)[2].cls_attn);
  }
  EXPECT_TRUE(same_bits(rows[0], rows[1]));
  EXPECT_EQ(rows[0].size(), 3u * 197u);
}

// Several images through one forward (their B*T rows in one product per linear layer) are NOT bit-identical
// to each image alone: the row tiles of a product depend on M = B*T (model/sgemm.cpp), and OpenBLAS's results
// for a row depend on where its tile cuts it. They agree to rounding. Pinned here because a `render --batch N`
// that must write the bytes of --batch 1 cannot simply pass N images to vit_forward (docs/performance.md).
TEST(Threads, BatchOfImagesAgreesWithEachImageAloneToRoundingOnly) {
  PoolSize restore;
  const std::string dir = fixture("timm_224") + "/";
  const ViTWeights w = load_model(dir + "weights.json");
  std::vector<int64_t> shape;
  const std::vector<float> a = read_npy(dir + "input.npy", &shape);
  const std::vector<float> b(a.rbegin(), a.rend()), c = randoms(a.size(), 6), d = randoms(a.size(), 7), e = randoms(a.size(), 8);
  const std::vector<const float*> imgs{a.data(), b.data(), c.data(), d.data(), e.data()};
  ForwardOptions fo;
  fo.keep_full = true;
  const std::vector<ForwardResult> batch = vit_forward(w, imgs, fo);  // 5 x 197 rows
  double worst = 0;
  bool all_same = true;
  for (size_t i = 0; i < imgs.size(); ++i) {
    const ForwardResult one = vit_forward(w, imgs[i], fo);
    ASSERT_EQ(batch[i].attn.size(), one.attn.size());
    all_same = all_same && same_bits(batch[i].attn, one.attn);
    for (size_t k = 0; k < one.attn.size(); ++k) worst = std::max(worst, std::fabs(double(batch[i].attn[k]) - one.attn[k]));
  }
  std::printf("batched vs alone: max |diff| of the probabilities %.3g, bit-identical: %d\n", worst, int(all_same));
  EXPECT_LT(worst, 5e-6);  // measured 8.3e-7 (timm_224 fixture, OpenBLAS Haswell kernels); parity tolerance is 1e-5
}

}  // namespace
