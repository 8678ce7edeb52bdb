// Faithfulness figures: baselines (centre prior, random map), Spearman with ties, the trapezoid AUC, token
// dropping and the perturbation curves against PyTorch (tools/make_faithful_fixtures.py), and the
// model-randomisation copy.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "maps/faithfulness.hpp"
#include "model/classify.hpp"
#include "model/vit.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

Mask box_mask(int w, int h, int x0, int y0, int x1, int y1) {
  Mask m;
  m.width = w;
  m.height = h;
  m.inside.assign(static_cast<size_t>(w * h), 0);
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) m.inside[static_cast<size_t>(y * w + x)] = 1;
  return m;
}

}  // namespace

TEST(Baselines, CentrePriorIsAGaussianOnPixelCentres) {
  // 4x2, sigma = 0.5 * min(4, 2) = 1, centre (2, 1): pixel (1, 0) has centre (1.5, 0.5), r^2 = 0.5.
  const std::vector<float> m = centre_prior_map(4, 2, 0.5);
  ASSERT_EQ(m.size(), 8u);
  EXPECT_FLOAT_EQ(m[1], static_cast<float>(std::exp(-0.25)));       // (1, 0)
  EXPECT_FLOAT_EQ(m[0], static_cast<float>(std::exp(-(2.25 + 0.25) / 2)));  // (0, 0): r^2 = 2.5
  EXPECT_FLOAT_EQ(m[7], m[0]);                                       // symmetric
  // The four centre pixels tie; the pointing game takes the first in row-major order, (1, 0).
  EXPECT_EQ(argmax_pixel(m), 1u);
  // Energy of the prior on the left half: exactly one half by symmetry.
  EXPECT_NEAR(energy_in_mask(m, box_mask(4, 2, 0, 0, 2, 2)), 0.5, 1e-7);
  EXPECT_TRUE(pointing_game(m, box_mask(4, 2, 1, 0, 2, 1)));
  EXPECT_FALSE(pointing_game(m, box_mask(4, 2, 2, 0, 4, 2)));
  EXPECT_THROW(centre_prior_map(0, 2), Error);
}

TEST(Baselines, RandomMapPointingIsTheHitAreaShare) {
  const Mask m = box_mask(10, 10, 4, 4, 5, 5);  // one pixel
  EXPECT_DOUBLE_EQ(random_pointing_expectation(m, 0), 0.01);
  // Tolerance 1 px: the pixel and its 4 neighbours (a disc of radius 1) count: 5 / 100.
  EXPECT_DOUBLE_EQ(random_pointing_expectation(m, 1), 0.05);
  // Radius 2: 13 pixels (|dx|^2 + |dy|^2 <= 4).
  EXPECT_DOUBLE_EQ(random_pointing_expectation(m, 2), 0.13);
  EXPECT_THROW(random_pointing_expectation(m, -1), Error);
}

TEST(Sanity, SpearmanWithTiesAsScipy) {
  // scipy.stats.spearmanr([1, 2, 2, 3], [1, 3, 2, 4]) = 0.9486832980505138 (ranks 1, 2.5, 2.5, 4).
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 3, 2, 4}), 0.9486832980505138, 1e-12);
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0, 1e-12);
  // spearmanr([0, 0, 1, 1, 2], [5, 1, 4, 2, 3]) = 0.0 ; ([3, 1, 2], [1, 2, 3]) = -0.5
  EXPECT_NEAR(spearman({0, 0, 1, 1, 2}, {5, 1, 4, 2, 3}), 0.0, 1e-12);
  EXPECT_NEAR(spearman({3, 1, 2}, {1, 2, 3}), -0.5, 1e-12);
  EXPECT_EQ(spearman({1, 1, 1}, {2, 2, 2}), 1.0);  // both constant
  EXPECT_EQ(spearman({1, 1, 1}, {1, 2, 3}), 0.0);  // one constant
  EXPECT_THROW(spearman({1, 2}, {1, 2, 3}), Error);
}

TEST(Perturbation, TrapezoidAucOnHandValues) {
  EXPECT_DOUBLE_EQ(trapezoid_auc({0, 0.5, 1}, {1, 1, 0}), 0.75);
  const std::vector<double> f = perturbation_fractions();
  ASSERT_EQ(f.size(), 10u);
  EXPECT_DOUBLE_EQ(f[9], 0.9);
  EXPECT_NEAR(trapezoid_auc(f, std::vector<double>(10, 1.0)), 0.9, 1e-15);
  // y = 1 - x over 0..0.9: 0.9 - 0.81 / 2 = 0.495
  std::vector<double> y;
  for (double x : f) y.push_back(1 - x);
  EXPECT_NEAR(trapezoid_auc(f, y), 0.495, 1e-15);
  EXPECT_EQ(removed_at_step(196, 3), 58);  // Chefer et al.: int(196 * 0.3) = 58
  EXPECT_EQ(removed_at_step(196, 7), 137);
  EXPECT_THROW(trapezoid_auc({0, 1}, {1}), Error);
}

TEST(Perturbation, OrdersAndRandomPermutation) {
  const std::vector<float> m{0.2f, 0.5f, 0.2f, 0.1f};
  EXPECT_EQ(removal_order(m, true), (std::vector<int>{1, 0, 2, 3}));
  EXPECT_EQ(removal_order(m, false), (std::vector<int>{3, 0, 2, 1}));
  std::vector<int> r = random_order(50, 7);
  EXPECT_EQ(r, random_order(50, 7));
  EXPECT_NE(r, random_order(50, 8));
  std::sort(r.begin(), r.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(r[static_cast<size_t>(i)], i);
}

namespace {

const std::string kDir = fixture("faithful/");

nlohmann::json expected_json() { return nlohmann::json::parse(slurp(kDir + "expected.json")); }

std::vector<float> fixture_input() {
  std::vector<int64_t> shape;
  return read_npy(kDir + "input.npy", &shape);
}

}  // namespace

TEST(TokenDrop, KeepingEveryPatchIsBitIdentical) {
  const ViTWeights w = load_model(kDir + "weights.json");
  const std::vector<float> x = fixture_input();
  ForwardOptions fo;
  fo.to_end = true;
  fo.keep_full = true;
  const ForwardResult a = vit_forward(w, x.data(), fo);
  fo.keep_patches = std::vector<int>{};
  for (int i = 0; i < 16; ++i) fo.keep_patches->push_back(i);
  const ForwardResult b = vit_forward(w, x.data(), fo);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.attn, b.attn);
  EXPECT_EQ(a.tokens_out, b.tokens_out);
}

TEST(TokenDrop, DroppedPatchesMatchPyTorch) {
  const ViTWeights w = load_model(kDir + "weights.json");
  const std::vector<float> x = fixture_input();
  for (const auto& c : expected_json()["drop"]) {
    ForwardOptions fo;
    fo.to_end = true;
    fo.keep_patches = c["keep"].get<std::vector<int>>();
    const ForwardResult r = vit_forward(w, x.data(), fo);
    EXPECT_EQ(r.tokens, 1 + static_cast<int>(fo.keep_patches->size()));
    EXPECT_TRUE(all_close(r.logits, c["logits"].get<std::vector<float>>(), 1e-5, "logits keep " + c["keep"].dump()));
  }
  ForwardOptions bad;
  bad.to_end = true;
  bad.keep_patches = std::vector<int>{3, 2};
  EXPECT_THROW(vit_forward(w, x.data(), bad), Error);
  bad.keep_patches = std::vector<int>{16};
  EXPECT_THROW(vit_forward(w, x.data(), bad), Error);
}

TEST(Perturbation, CurvesMatchPyTorchInBothModes) {
  const ViTWeights w = load_model(kDir + "weights.json");
  const std::vector<float> x = fixture_input();
  const nlohmann::json e = expected_json();
  const std::vector<float> map = e["map"].get<std::vector<float>>();
  const int target = e["target"].get<int>();
  ForwardOptions fo;
  fo.to_end = true;
  const ForwardResult full = vit_forward(w, x.data(), fo);
  const double p0 = class_probabilities(full.logits)[static_cast<size_t>(target)];
  EXPECT_NEAR(p0, e["p0"].get<double>(), 1e-6);
  EXPECT_EQ(removal_order(map, true), e["orders"]["positive"].get<std::vector<int>>());
  EXPECT_EQ(removal_order(map, false), e["orders"]["negative"].get<std::vector<int>>());
  for (const char* order : {"positive", "negative", "given"}) {
    const std::vector<int> ord = e["orders"][order].get<std::vector<int>>();
    for (const auto& [mode_name, mode] : {std::pair{"drop", PerturbMode::Drop}, std::pair{"zero", PerturbMode::Zero}}) {
      const std::vector<double> c = perturbation_curve(w, x.data(), ord, mode, target, p0);
      const std::vector<double> want = e["curves"][order][mode_name].get<std::vector<double>>();
      ASSERT_EQ(c.size(), want.size());
      for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], want[i], 1e-5) << order << " " << mode_name << " step " << i;
      EXPECT_NEAR(trapezoid_auc(perturbation_fractions(), c), e["auc"][order][mode_name].get<double>(), 1e-5);
    }
  }
  EXPECT_THROW(perturbation_curve(w, x.data(), {0, 1, 2}, PerturbMode::Drop, target, p0), Error);
  EXPECT_THROW(perturbation_curve(w, x.data(), e["orders"]["given"].get<std::vector<int>>(), PerturbMode::Drop, 9, p0), Error);
}

TEST(Sanity, RandomisedBlocksKeepScaleAndTheRest) {
  const ViTWeights w = load_model(kDir + "weights.json");
  const ViTWeights r = randomise_blocks(w, 1, 42);
  EXPECT_EQ(r.blocks[0].qkv.weight, w.blocks[0].qkv.weight);  // below from_block: untouched
  EXPECT_EQ(r.patch_embed.weight, w.patch_embed.weight);
  EXPECT_EQ(r.head.weight, w.head.weight);
  const std::vector<float>& a = w.blocks[1].qkv.weight;
  const std::vector<float>& b = r.blocks[1].qkv.weight;
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);
  auto sd = [](const std::vector<float>& v) {
    double m = 0, s = 0;
    for (float x : v) m += x;
    m /= static_cast<double>(v.size());
    for (float x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  EXPECT_NEAR(sd(b) / sd(a), 1.0, 0.1);  // 768 draws: the std within 10 %
  EXPECT_EQ(randomise_blocks(w, 1, 42).blocks[1].qkv.weight, b);  // fixed seed
  EXPECT_THROW(randomise_blocks(w, 3, 42), Error);
}
