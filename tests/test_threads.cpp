// The thread pool, the tiled sgemm and the vectorised kernels: results are the same bits whatever the
// number of threads, and the kernels agree with double-precision references (tails of rows that are not a
// multiple of the vector width included).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <unistd.h>

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

// The timm_224 fixture's input image (3, 224, 224).
std::vector<float> fixture_input() {
  std::vector<int64_t> shape;
  return read_npy(fixture("timm_224") + "/input.npy", &shape);
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

// Y (M, N) = X W^T + b in double, for checking a float product.
double linear_ref(const std::vector<float>& X, const std::vector<float>& W, const std::vector<float>& b, int K, int i,
                  int j) {
  double s = b[static_cast<size_t>(j)];
  for (int k = 0; k < K; ++k)
    s += static_cast<double>(X[static_cast<size_t>(i) * K + k]) * W[static_cast<size_t>(j) * K + k];
  return s;
}

// linear(Y, X, LinearW, M): with oneDNN the weights are packed once and kept with them (Floats::derived); a
// change to the weights drops the packed copy, so a product never uses stale weights; copies share it.
TEST(Sgemm, LinearWeightsArePackedOnceAndNeverStale) {
  PoolSize restore;
  set_blas_threads(2);
  const int M = 37, N = 70, K = 45;
  LinearW lin = random_linear(N, K, 11);
  const std::vector<float> X = randoms(static_cast<size_t>(M) * K, 13);
  std::vector<float> Y(static_cast<size_t>(M) * N);
  auto check = [&](const char* when) {
    const std::vector<float> W = lin.weight.vec(), b = lin.bias.vec();
    double worst = 0;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        worst = std::max(worst, std::fabs(Y[static_cast<size_t>(i) * N + j] - linear_ref(X, W, b, K, i, j)));
    EXPECT_LT(worst, 1e-4) << when;
  };
  linear(Y.data(), X.data(), lin, M);
  check("first product");
  const bool onednn = std::string(gemm_backend()) == "onednn";
  EXPECT_EQ(lin.weight.derived() != nullptr, onednn);
  const std::shared_ptr<const void> packed = lin.weight.derived();
  linear(Y.data(), X.data(), lin, M);
  EXPECT_EQ(lin.weight.derived(), packed);  // reused, not packed again
  const LinearW copy = lin;
  EXPECT_EQ(copy.weight.derived(), packed);
  lin.weight.mutable_data()[5] += 3.0f;  // row 0, column 5 of W: column 0 of Y changes
  EXPECT_EQ(lin.weight.derived(), nullptr);
  linear(Y.data(), X.data(), lin, M);
  check("after a change to the weights");
  std::vector<float> Yc(Y.size());
  linear(Yc.data(), X.data(), copy, M);  // the unchanged copy still gives the old product
  EXPECT_NE(Yc[0], Y[0]);
  EXPECT_EQ(copy.weight.derived(), packed);
}

// With oneDNN's blocked kernels (AVX-512) each row of a linear() product is computed the same way whatever the
// product's row count and wherever the row tiles cut it, so B images through one forward get exactly the bits
// each gets alone. OpenBLAS, and oneDNN's fallback on older CPUs (ctest Sgemm.OneDnnAvx2Fallback runs these
// tests with ONEDNN_MAX_CPU_ISA=AVX2), round a row by the tile it falls in: there, rounding only.
TEST(Sgemm, PackedRowsDoNotDependOnTheTile) {
  PoolSize restore;
  set_blas_threads(2);
  const int M = 1576, N = 768, K = 96;
  const LinearW lin = random_linear(N, K, 21);
  const std::vector<float> X = randoms(static_cast<size_t>(M) * K, 23);
  std::vector<float> all(static_cast<size_t>(M) * N);
  linear(all.data(), X.data(), lin, M);
  const bool exact = linear_rows_independent();
  std::printf("%s, rows independent of the tile: %d\n", gemm_backend(), int(exact));
  double worst = 0;
  for (int rows : {1, 5, 197, 1000}) {
    for (int i0 : {0, 333, M - rows}) {
      std::vector<float> part(static_cast<size_t>(rows) * N);
      linear(part.data(), X.data() + static_cast<size_t>(i0) * K, lin, rows);
      const std::vector<float> want(all.begin() + static_cast<long>(i0) * N, all.begin() + static_cast<long>(i0 + rows) * N);
      if (exact) {
        EXPECT_TRUE(same_bits(part, want)) << rows << " rows from row " << i0;
      }
      for (size_t k = 0; k < part.size(); ++k) worst = std::max(worst, std::fabs(double(part[k]) - want[k]));
    }
  }
  EXPECT_LT(worst, 1e-4);
  for (int i : {0, 700, M - 1})
    for (int j : {0, 400, N - 1})
      EXPECT_NEAR(all[static_cast<size_t>(i) * N + j], linear_ref(X, lin.weight.vec(), lin.bias.vec(), K, i, j), 1e-4);
}

// After prepare_weights the forward pass reads nothing from a safetensors file used in place: the file
// rewritten with other values, then truncated, during a run changes no later result and cannot crash it
// (SIGBUS on a page past the end). With `backward` every tensor is an owned copy.
TEST(Threads, PreparedWeightsNoLongerReadTheFile) {
  PoolSize restore;
  set_blas_threads(2);
  // One folder per process: ctest runs this test twice at once (here and in Sgemm.OneDnnAvx2Fallback).
  const std::string dir = ::testing::TempDir() + "attnmap_prepared_" + std::to_string(::getpid()) + "/";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "weights.safetensors";
  std::filesystem::copy_file(fixture("layouts/timm/weights.safetensors"), path,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(fixture("layouts/timm/config.json"), dir + "config.json",
                             std::filesystem::copy_options::overwrite_existing);  // the head count
  ViTWeights w = load_model(path);
  ASSERT_TRUE(w.blocks[0].qkv.weight.is_view());  // in place from the mapping
  ASSERT_TRUE(w.blocks[0].qkv.bias.is_view());
  prepare_weights(w, /*backward=*/false);
  EXPECT_FALSE(w.blocks[0].qkv.bias.is_view());
  EXPECT_FALSE(w.pos_embed.is_view());
  EXPECT_EQ(w.blocks[0].qkv.weight.is_view(), linear_packs_weights());  // packed: the view's pages handed back
  const std::vector<float> img = randoms(static_cast<size_t>(3) * w.hp.image_h * w.hp.image_w, 31);
  ForwardOptions fo;
  fo.to_end = true;
  const ForwardResult before = vit_forward(w, img.data(), fo);
  {
    const auto size = std::filesystem::file_size(path);
    std::FILE* f = std::fopen(path.c_str(), "r+b");  // every byte after the header rewritten in place
    ASSERT_NE(f, nullptr);
    const std::vector<char> junk(size - 4096, 0x3f);
    std::fseek(f, 4096, SEEK_SET);
    ASSERT_EQ(std::fwrite(junk.data(), 1, junk.size(), f), junk.size());
    std::fclose(f);
  }
  const ForwardResult rewritten = vit_forward(w, img.data(), fo);
  EXPECT_TRUE(same_bits(before.cls_attn, rewritten.cls_attn));
  EXPECT_TRUE(same_bits(before.tokens_out, rewritten.tokens_out));
  std::filesystem::resize_file(path, 0);
  const ForwardResult truncated = vit_forward(w, img.data(), fo);
  EXPECT_TRUE(same_bits(before.cls_attn, truncated.cls_attn));
  EXPECT_TRUE(same_bits(before.logits, truncated.logits));

  std::filesystem::copy_file(fixture("layouts/timm/weights.safetensors"), path,
                             std::filesystem::copy_options::overwrite_existing);
  ViTWeights wb = load_model(path);
  prepare_weights(wb, /*backward=*/true);
  for (const BlockWeights& b : wb.blocks)
    for (const LinearW* l : {&b.qkv, &b.proj, &b.fc1, &b.fc2}) EXPECT_FALSE(l->weight.is_view() || l->bias.is_view());
  EXPECT_TRUE(same_bits(vit_forward(wb, img.data(), fo).cls_attn, before.cls_attn));
  std::filesystem::remove_all(dir);
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
  const ViTWeights w = load_model(fixture("timm_224") + "/weights.json");
  const std::vector<float> a = fixture_input();
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

// Several images through one forward (their B*T rows in one product per linear layer): with oneDNN's blocked
// kernels each image gets exactly the bits it gets alone (Sgemm.PackedRowsDoNotDependOnTheTile);
// with OpenBLAS the row tiles of a product depend on M = B*T and a row's rounding on where its tile cuts it,
// so they agree to rounding only.
TEST(Threads, BatchOfImagesGivesEachImageItsBitsAlone) {
  PoolSize restore;
  const ViTWeights w = load_model(fixture("timm_224") + "/weights.json");
  const std::vector<float> a = fixture_input();
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
  std::printf("batched vs alone (%s): max |diff| of the probabilities %.3g, bit-identical: %d\n", gemm_backend(), worst,
              int(all_same));
  if (linear_rows_independent()) {
    EXPECT_TRUE(all_same);
  }
  EXPECT_LT(worst, 5e-6);  // OpenBLAS: measured 8.3e-7 (timm_224 fixture, Haswell kernels); parity tolerance is 1e-5
}

}  // namespace
