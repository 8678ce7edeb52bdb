// --precision bf16 (issue 30): the rounding to bfloat16, the bf16 products against a double-precision
// reference of the same rounded inputs, their independence of the tile and the thread count, the forward pass
// close to float32, the 16-wide GELU's bits, and the command line (refusals, the setting recorded and resumed).
// The bf16 tests are skipped on a CPU without native bf16 kernels (model/sgemm.hpp bf16_supported); the
// refusal there is tested instead.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <vector>

#include "checkpoint/weights.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "model/kernels.hpp"
#include "model/kernels_isa.hpp"
#include "model/sgemm.hpp"
#include "model/thread_pool.hpp"
#include "model/vit.hpp"
#include "maps/attention_maps.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

float bits_to_float(uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t float_to_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}

uint16_t bf16_of(float f) {
  uint16_t b = 0;
  kernels::to_bf16(&b, &f, 1);
  return b;
}

float float_of_bf16(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

struct PoolSize {  // restores the single-threaded default after a test
  ~PoolSize() { set_blas_threads(1); }
};

}  // namespace

// Round to nearest even at bit 16, denormals to zero, NaN kept; the vector body (17 values: one register and a
// tail) gives what one value at a time gives.
TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_of(1.0f), 0x3f80);
  EXPECT_EQ(bf16_of(bits_to_float(0x3f808000u)), 0x3f80);  // halfway, even below: down
  EXPECT_EQ(bf16_of(bits_to_float(0x3f818000u)), 0x3f82);  // halfway, odd below: up
  EXPECT_EQ(bf16_of(bits_to_float(0x3f808001u)), 0x3f81);  // above halfway: up
  EXPECT_EQ(bf16_of(-2.0f), 0xc000);
  EXPECT_EQ(bf16_of(bits_to_float(0x00400000u)), 0x0000);  // a denormal: zero
  EXPECT_TRUE(std::isnan(float_of_bf16(bf16_of(std::nanf("")))));
  const std::vector<float> x = randoms(17, 5, 3.0f);
  std::vector<uint16_t> all(17);
  kernels::to_bf16(all.data(), x.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(all[i], bf16_of(x[i])) << i;
    EXPECT_LE(std::fabs(float_of_bf16(all[i]) - x[i]), std::fabs(x[i]) * (1.0f / 256.0f)) << i;  // half an ulp of 8 bits
  }
}

// The own erf (kernels::erf_float, tools/fit_erf.py) against glibc's double erf, on every 401st float of
// [0, 4.5] (2.7 million), the floats next to each interval's ends, tiny and denormal values: within one ULP
// of the float32 result everywhere (all 2^31 positive floats, swept once outside the suite: 0.886), odd,
// erf(inf) = 1 and erf(NaN) NaN.
TEST(Kernels, ErfIsWithinOneUlp) {
  std::vector<float> z;
  const uint32_t top = float_to_bits(4.5f);
  for (uint32_t b = 0; b <= top; b += 401) z.push_back(bits_to_float(b));
  for (int i = 1; i <= 9; ++i)
    for (float d : {-2.0f, -1.0f, 0.0f, 1.0f, 2.0f})
      z.push_back(bits_to_float(static_cast<uint32_t>(static_cast<int64_t>(float_to_bits(0.5f * static_cast<float>(i))) + static_cast<int64_t>(d))));
  for (float v : {1e-45f, 1e-38f, 1e-30f, 1e-8f, 3.9f, 3.92f, 4.0f, 10.0f, 1e30f}) z.push_back(v);
  double worst = 0;
  float worst_at = 0;
  for (float v : z) {
    const float r = kernels::erf_float(v);
    const double ref = std::erf(static_cast<double>(v));
    const float rf = static_cast<float>(ref);
    const double ulp = static_cast<double>(std::nextafter(rf, 2.0f) - rf);
    const double e = std::fabs(static_cast<double>(r) - ref) / (ulp > 0 ? ulp : 1.4e-45);
    if (e > worst) worst = e, worst_at = v;
    ASSERT_EQ(float_to_bits(kernels::erf_float(-v)), float_to_bits(-r)) << v;
  }
  EXPECT_LE(worst, 1.0) << "at " << worst_at;
  EXPECT_EQ(kernels::erf_float(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(kernels::erf_float(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_EQ(float_to_bits(kernels::erf_float(-0.0f)), float_to_bits(-0.0f));
  EXPECT_TRUE(std::isnan(kernels::erf_float(std::nanf(""))));
}

// The 16-wide GELU (AVX-512), the 8-wide one (AVX2) and the scalar formula on erf_float give the same bits,
// tails included.
TEST(Kernels, GeluIsTheSameOnEveryPath) {
  std::vector<float> x = randoms(100003, 9, 4.0f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 10.0f, -10.0f, 80.0f, -80.0f, 2.8284271f, -2.8284271f, 0.70710678f})
    x.push_back(v);
  std::vector<float> a = x, s = x;
  kernels::gelu(a.data(), a.size());
  for (float& v : s) v = 0.5f * v * (1.0f + kernels::erf_float(v * 0.70710678118654752f));
  EXPECT_EQ(std::memcmp(a.data(), s.data(), a.size() * sizeof(float)), 0);
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> b = x;
  kernels::avx2::gelu(b.data(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// The tile forms of the epilogues (model/kernels.hpp), which linear() runs on its tiles: activation_tile gives
// activation's bits row by row, and residual_add_tile (vectorised) x + gamma * y as a product then a sum, on
// rows of every tail length, with and without LayerScale.
TEST(Kernels, TileEpiloguesGiveTheWholeArraysBits) {
  for (size_t n : {1, 7, 8, 9, 15, 16, 17, 31, 768, 771}) {
    const size_t m = 3, ld = n + 5;
    const std::vector<float> y = randoms(m * ld, 30 + static_cast<unsigned>(n), 4.0f), g = randoms(n, 31, 0.5f);
    for (Activation act : {Activation::Gelu, Activation::GeluTanh, Activation::QuickGelu}) {
      std::vector<float> tile = y, whole = y;
      kernels::activation_tile(tile.data(), ld, m, n, act);
      for (size_t r = 0; r < m; ++r) kernels::activation(whole.data() + r * ld, n, act);
      EXPECT_EQ(std::memcmp(tile.data(), whole.data(), tile.size() * sizeof(float)), 0) << n;
    }
    for (const float* gamma : {static_cast<const float*>(nullptr), g.data()}) {
      std::vector<float> x = randoms(m * ld, 40 + static_cast<unsigned>(n)), want = x;
      kernels::residual_add_tile(x.data(), ld, y.data(), ld, gamma, m, n);
      for (size_t r = 0; r < m; ++r)
        for (size_t j = 0; j < n; ++j) {
          volatile float product = gamma != nullptr ? gamma[j] * y[r * ld + j] : y[r * ld + j];  // no FMA
          want[r * ld + j] += product;
        }
      EXPECT_EQ(std::memcmp(x.data(), want.data(), x.size() * sizeof(float)), 0) << n;
    }
  }
}

// The 16-wide softmax (AVX-512) gives the 8-wide one's bits (the same max, SLEEF exp and order of the double
// sum), for every row length's tail.
TEST(Kernels, SoftmaxIsTheSameOnEveryPath) {
  if (!kernels::has_bf16_instructions()) GTEST_SKIP() << "no AVX-512 bf16 here: softmax_row is the AVX2 row itself";
  std::vector<int> lengths = {197, 257, 785, 1025};
  for (int n = 1; n <= 48; ++n) lengths.push_back(n);
  for (int n : lengths) {
    const std::vector<float> x = randoms(static_cast<size_t>(n), 20 + static_cast<unsigned>(n), 12.0f);
    std::vector<float> a = x, b = x;
    kernels::softmax_row(a.data(), n);
    kernels::avx2::softmax_row(b.data(), n);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "row of " << n;
  }
}

// LayerNorm: the AVX-512 row (8 doubles a step) gives the AVX2 row's bits, on row lengths with every tail.
TEST(Kernels, LayerNormIsTheSameOnEveryPath) {
  if (!kernels::has_bf16_instructions())
    GTEST_SKIP() << "no AVX-512 bf16 here: layernorm is the AVX2 row itself";
  std::vector<int> lengths = {192, 384, 768, 1024, 1280};
  for (int n = 1; n <= 40; ++n) lengths.push_back(n);
  for (int n : lengths) {
    const size_t sn = static_cast<size_t>(n);
    const std::vector<float> x = randoms(sn, 40 + static_cast<unsigned>(n), 3.0f), w = randoms(sn, 41, 1.0f),
                             b = randoms(sn, 42, 0.5f);
    std::vector<float> a(sn), c(sn);
    kernels::layernorm(a.data(), x.data(), w.data(), b.data(), 1, n, 1e-6f);
    kernels::avx2::layernorm_row(c.data(), x.data(), w.data(), b.data(), n, 1e-6f);
    EXPECT_EQ(std::memcmp(a.data(), c.data(), sn * sizeof(float)), 0) << "row of " << n;
  }
}

// linear() in bf16 is the product of the bf16-rounded X and W accumulated in float32 (+ the float32 bias):
// against the same rounded inputs summed in double, to float32 accumulation's rounding; each row the same
// bits whatever the rows around it and the thread count.
TEST(Bf16, LinearIsTheProductOfTheRoundedInputs) {
  if (!bf16_supported()) GTEST_SKIP() << "no native bf16 matmul on this CPU";
  PoolSize restore;
  const int M = 1576, N = 2304, K = 768;
  LinearW lin;
  lin.out = N;
  lin.in = K;
  lin.weight = randoms(static_cast<size_t>(N) * K, 11, 0.05f);
  lin.bias = randoms(static_cast<size_t>(N), 12);
  const std::vector<float> X = randoms(static_cast<size_t>(M) * K, 13);
  std::vector<float> y2(static_cast<size_t>(M) * N), y1(y2.size());
  set_blas_threads(2);
  linear(y2.data(), X.data(), lin, M, Precision::BF16);
  set_blas_threads(1);
  linear(y1.data(), X.data(), lin, M, Precision::BF16);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0) << "1 and 2 threads differ";
  std::vector<uint16_t> xb(X.size()), wb(lin.weight.size());
  kernels::to_bf16(xb.data(), X.data(), X.size());
  kernels::to_bf16(wb.data(), lin.weight.data(), wb.size());
  double worst = 0, worst_f32 = 0;
  for (int i : {0, 1, 196, 197, 800, M - 1})
    for (int j : {0, 127, 128, 1000, N - 1}) {
      double s = lin.bias[static_cast<size_t>(j)], s32 = s;
      for (int k = 0; k < K; ++k) {
        s += static_cast<double>(float_of_bf16(xb[static_cast<size_t>(i) * K + k])) * float_of_bf16(wb[static_cast<size_t>(j) * K + k]);
        s32 += static_cast<double>(X[static_cast<size_t>(i) * K + k]) * lin.weight[static_cast<size_t>(j) * K + k];
      }
      const float got = y2[static_cast<size_t>(i) * N + j];
      worst = std::max(worst, std::fabs(got - s));
      worst_f32 = std::max(worst_f32, std::fabs(got - s32));
    }
  std::printf("bf16 linear vs the rounded inputs in double: %.2e; vs the float32 inputs: %.2e\n", worst, worst_f32);
  EXPECT_LT(worst, 2e-5);      // float32 accumulation of 768 products of size ~0.05
  EXPECT_GT(worst_f32, 1e-3);  // the inputs were rounded: this is not the float32 product
  for (int rows : {1, 197, 333}) {  // a row's bits do not depend on the rows around it
    std::vector<float> part(static_cast<size_t>(rows) * N);
    linear(part.data(), X.data() + static_cast<size_t>(500) * K, lin, rows, Precision::BF16);
    EXPECT_EQ(std::memcmp(part.data(), &y1[static_cast<size_t>(500) * N], part.size() * sizeof(float)), 0) << rows;
  }
}

// A bf16 forward pass of the timm_224 fixture: every block's class-token rows close to float32's (the budget
// measured on this fixture by bench/bf16_budget.py-style comparison: a few per cent of the row's peak), never
// equal to them, and a batch gives each image its bits alone.
TEST(Bf16, ForwardStaysNearFloat32AndBatchesKeepTheBits) {
  if (!bf16_supported()) GTEST_SKIP() << "no native bf16 matmul on this CPU";
  PoolSize restore;
  set_blas_threads(2);
  ViTWeights f32 = load_model(fixture("timm_224") + "/weights.json");
  ViTWeights b16 = load_model(fixture("timm_224") + "/weights.json");
  b16.precision = Precision::BF16;
  prepare_weights(b16, false);
  std::vector<int64_t> shape;
  const std::vector<float> img = read_npy(fixture("timm_224") + "/input.npy", &shape);
  const std::vector<float> other = randoms(img.size(), 4);
  ForwardOptions fo;
  fo.keep_full = true;
  const ForwardResult a = vit_forward(f32, img.data(), fo), b = vit_forward(b16, img.data(), fo);
  ASSERT_EQ(a.cls_attn.size(), b.cls_attn.size());
  double worst = 0, peak = 0;
  for (size_t i = 0; i < a.cls_attn.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a.cls_attn[i] - b.cls_attn[i])));
    peak = std::max(peak, static_cast<double>(a.cls_attn[i]));
  }
  std::printf("timm_224 bf16 vs fp32 class rows: max |diff| %.2e, peak %.3f\n", worst, peak);
  EXPECT_GT(worst, 0.0);
  EXPECT_LT(worst, 0.1 * peak);
  const std::vector<ForwardResult> batch = vit_forward(b16, std::vector<const float*>{other.data(), img.data()}, fo);
  EXPECT_EQ(std::memcmp(batch[1].attn.data(), b.attn.data(), b.attn.size() * sizeof(float)), 0);
  b16.precision = Precision::BF16;
  EXPECT_THROW(prepare_weights(b16, /*backward=*/true), Error);  // the class-specific views stay float32
}

class Precision_ : public TempDirTest {};

// The command line: bf16 recorded in the outputs and treated as a setting by --skip-existing; refused for eval,
// the class-specific views, a bad value, and (any CPU) with oneDNN limited to AVX2, where no bf16 kernel runs.
TEST_F(Precision_, RecordedResumedAndRefusedWhereItCannotRun) {
  const std::string img = q(fs::path(ATTNMAP_TEST_DIR).parent_path() / "data" / "astronaut.png");
  const std::string out = " -o " + q(dir / "out") + " --save-raw --skip-existing";
  const CliRun avx2 = run_attnmap("render " + img + out + " --precision bf16", "ONEDNN_MAX_CPU_ISA=AVX2 ");
  EXPECT_EQ(avx2.status, 2);
  EXPECT_NE(avx2.err.find("--precision bf16: bfloat16 products need a CPU with AVX512_BF16"), std::string::npos) << avx2.err;
  const CliRun bad = run_attnmap("render " + img + out + " --precision bf32");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--precision expects fp32 or bf16, found 'bf32'"), std::string::npos) << bad.err;
  if (!bf16_supported()) {
    const CliRun r = run_attnmap("render " + img + out + " --precision bf16");
    EXPECT_EQ(r.status, 2) << r.err;
    GTEST_SKIP() << "no native bf16 matmul on this CPU: the refusal is what runs";
  }
  const CliRun chefer = run_attnmap("render " + img + out + " --precision bf16 --explain chefer");
  EXPECT_EQ(chefer.status, 2);
  EXPECT_NE(chefer.err.find("class-specific views and explanations run in float32 only"), std::string::npos) << chefer.err;
  ASSERT_EQ(run_attnmap("render " + img + out).status, 0);
  const CliRun b = run_attnmap("render " + img + out + " --precision bf16");
  EXPECT_EQ(b.status, 0) << b.err;
  EXPECT_NE(b.err.find("1 redone: settings changed"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("precision null -> bf16"), std::string::npos) << b.err;
  EXPECT_NE(slurp(dir / "out" / "astronaut.npy.json").find("\"precision\":\"bf16\""), std::string::npos);
  const CliRun again = run_attnmap("render " + img + out + " --precision bf16");
  EXPECT_NE(again.err.find("0 done, 0 failed, 1 skipped"), std::string::npos) << again.err;
  const CliRun back = run_attnmap("render " + img + out + " --precision fp32");
  EXPECT_NE(back.err.find("1 redone: settings changed"), std::string::npos) << back.err;
}
