// Faithfulness figures: baselines (centre prior, random map), Spearman with ties, the trapezoid AUC, token
// dropping and the perturbation curves against PyTorch (tools/make_faithful_fixtures.py), and the
// model-randomisation copy.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"
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
  const nlohmann::json e = expected_json();  // kept alive: a range-for over a temporary's member dangles
  for (const auto& c : e["drop"]) {
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

// The batched form (one forward pass per step over every order, eval's path) gives PyTorch's curves too.
TEST(Perturbation, BatchedCurvesMatchPyTorch) {
  const ViTWeights w = load_model(kDir + "weights.json");
  const std::vector<float> x = fixture_input();
  const nlohmann::json e = expected_json();
  const int target = e["target"].get<int>();
  const double p0 = e["p0"].get<double>();
  std::vector<std::vector<int>> orders;
  for (const char* order : {"positive", "negative", "given"}) orders.push_back(e["orders"][order].get<std::vector<int>>());
  for (const auto& [mode_name, mode] : {std::pair{"drop", PerturbMode::Drop}, std::pair{"zero", PerturbMode::Zero}}) {
    const std::vector<std::vector<double>> c = perturbation_curves(w, x.data(), orders, mode, target, p0);
    ASSERT_EQ(c.size(), 3u);
    size_t k = 0;
    for (const char* order : {"positive", "negative", "given"}) {
      const std::vector<double> want = e["curves"][order][mode_name].get<std::vector<double>>();
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(c[k][i], want[i], 1e-5) << order << " " << mode_name << " " << i;
      ++k;
    }
  }
  ForwardOptions bad;
  bad.to_end = true;
  bad.keep_patches_each = {{0, 1}, {2}};
  EXPECT_THROW(vit_forward(w, {x.data(), x.data()}, bad), Error);  // different lengths
  bad.keep_patches_each = {{0, 1}};
  EXPECT_THROW(vit_forward(w, {x.data(), x.data()}, bad), Error);  // one list for two images
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

// ---- attnmap eval: baselines, class-specific pointing, perturbation, sanity ----------------------------

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class Faithful : public TempDirTest {};

const fs::path kOneHot = fs::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_onehot";
const fs::path kTop5 = fs::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_top5";

}  // namespace

// The one-hot fixture's three 16x16 masks: a = patch (1, 1) (pixels 4..7), b = rows 8..11 x cols 4..5,
// c = rows 12..15 x cols 0..3. The centre prior (sigma 4, centre (8, 8)) peaks on the four centre pixels;
// the first, (7, 7), lies in a only. Its energies (numpy, float32 map): a 0.12821296826285708,
// b 0.05625775173601565, c 0.020144583160902358.
TEST_F(Faithful, BaselinesAndMarginsOnTheOneHotModel) {
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images") + " -w " +
                               q(kOneHot / "weights.json") + " --upsample nearest --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  const json& b = j["summary"]["baselines"];
  EXPECT_NEAR(b["centre_prior"]["pointing_game"].get<double>(), 1.0 / 3, 1e-15);
  EXPECT_NEAR(b["centre_prior"]["energy_in_mask"].get<double>(), 0.06820510105325837, 1e-7);
  EXPECT_NEAR(b["random_pointing_game"].get<double>(), 40.0 / 768, 1e-15);
  EXPECT_NEAR(b["uniform_energy"].get<double>(), 40.0 / 768, 1e-15);
  // The one-hot model's map is the bright patch of each image: the brightness baseline (the photo's luma)
  // scores what the views score, so it is the best baseline of both, and the views' margins are 0.
  EXPECT_NEAR(b["brightness"]["pointing_game"].get<double>(), 2.0 / 3, 1e-15);
  EXPECT_NEAR(b["brightness"]["energy_in_mask"].get<double>(), 0.5, 1e-7);
  EXPECT_NEAR(b["best_pointing"].get<double>(), 2.0 / 3, 1e-15);
  EXPECT_NEAR(b["best_energy"].get<double>(), 0.5, 1e-7);
  EXPECT_EQ(b["best_pointing_name"], "brightness");
  // Views: pointing 2/3, energy 0.5 (test_evaluate's hand values): margins over the best baselines.
  EXPECT_NEAR(j["summary"]["views"]["L0/mean"]["margin_pointing"].get<double>(), 0.0, 1e-15);
  EXPECT_NEAR(j["summary"]["views"]["L0/mean"]["margin_energy"].get<double>(), 0.0, 1e-7);
  EXPECT_TRUE(j["summary"]["best_pointing_view"].is_null());
  EXPECT_TRUE(j["images"][0]["centre_prior"]["hit"].get<bool>());
  EXPECT_FALSE(j["images"][1]["centre_prior"]["hit"].get<bool>());
  EXPECT_TRUE(j["summary"]["perturbation"].is_null());
  EXPECT_TRUE(j["summary"]["sanity"].is_null());
  EXPECT_TRUE(j["summary"]["class_pointing"].is_null());
  EXPECT_NE(r.out.find("(centre prior)      0.333    0.068    1.31x"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("L0/mean *           0.667    0.500    9.60x         +0.000 [+0.000, +0.000]        +0.000 [+0.000, +0.000]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(brightness)        0.667    0.500    9.60x"), std::string::npos) << r.out;
}

// No head: nothing to perturb against. One note line, the rest of eval as usual (exit 0). A bad mode is a
// usage error.
TEST_F(Faithful, PerturbRefusals) {
  const std::string base = "eval -q --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images") + " -w " +
                           q(kOneHot / "weights.json");
  const CliRun r = run_attnmap(base + " --perturb drop");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("--perturb: the model has no classifier head"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("perturbation ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("L0/mean *"), std::string::npos) << r.out;
  const CliRun bad = run_attnmap(base + " --perturb blur");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--perturb expects drop or zero, found 'blur'"), std::string::npos) << bad.err;
  // Item masks for a headless model: no class to ask for; one note, the rest scored.
  fs::create_directories(dir / "masks");
  for (const auto& e : fs::directory_iterator(kOneHot / "masks")) fs::copy_file(e.path(), dir / "masks" / e.path().filename());
  fs::copy_file(kOneHot / "masks" / "a.png", dir / "masks" / "a.coat.png");
  const CliRun items = run_attnmap("eval -q --masks " + q(dir / "masks") + " " + q(kOneHot / "images") + " -w " +
                                   q(kOneHot / "weights.json"));
  EXPECT_EQ(items.status, 0) << items.err;
  EXPECT_NE(items.err.find("class-specific pointing: item masks such as a.<class>.* are present, but the model has no "
                           "classifier head"), std::string::npos) << items.err;
  EXPECT_EQ(items.out.find("class-specific pointing:"), std::string::npos) << items.out;
}

namespace {

// eval_top5's images with two item masks each: the image's mask as its own class (coat, dress, ...) and
// the complement as "sandal" (no image there is a sandal), plus the union mask.
void write_item_masks(const fs::path& masks) {
  fs::create_directories(masks);
  for (const auto& e : fs::directory_iterator(kTop5 / "masks")) {
    const std::string stem = e.path().stem().string();
    Image m = load_image(e.path().string());
    Image c = m;
    for (auto& v : c.rgb) v = v ? 0 : 255;
    const std::string cls = stem.substr(5);
    write_png((masks / (stem + "." + cls + ".png")).string(), m);
    write_png((masks / (stem + ".sandal.png")).string(), c);
    Image all = m;
    for (auto& v : all.rgb) v = 255;
    write_png((masks / (stem + ".png")).string(), all);
  }
}

}  // namespace

// Class-specific pointing with raw attention: the same map answers for both classes, so for each image the
// item holding the map's maximum is "asked" for its own class and "other" for the other one: against the
// PyTorch hits of tools/make_eval_fixtures.py (expected.json: the view's hit on the item's own mask).
TEST_F(Faithful, ClassPointingOfAClassAgnosticViewFollowsItsMaximum) {
  write_item_masks(dir / "masks");
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(dir / "masks") + " " + q(kTop5 / "images") + " -w " +
                               q(kTop5 / "weights.json") + " --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  const json want = json::parse(slurp(kTop5 / "expected.json"));
  ASSERT_EQ(j["images"].size(), 4u);
  int asked = 0;
  for (const json& im : j["images"]) {
    const std::string name = fs::path(im["file"].get<std::string>()).filename().string();
    ASSERT_EQ(im["items"].size(), 2u) << name;
    // file-name order: "<stem>.<class>.png" before "<stem>.sandal.png" for every class here but t_shirt_top
    const bool own_first = name.substr(5) < std::string("sandal.png");
    const json& own = im["items"][own_first ? 0 : 1];
    const json& rest = im["items"][own_first ? 1 : 0];
    EXPECT_EQ(rest["class"].get<int>(), 5);  // Sandal
    for (const char* v : {"L0/mean", "L1/mean", "rollout"}) {
      const bool hit = want["images"][name]["views"][v]["hit"].get<bool>();
      EXPECT_EQ(own["views"][v]["asked"].get<bool>(), hit) << name << " " << v;
      EXPECT_EQ(own["views"][v]["other"].get<bool>(), !hit) << name << " " << v;
      EXPECT_EQ(rest["views"][v]["asked"].get<bool>(), !hit) << name << " " << v;
      asked += hit;
    }
  }
  const json& cp = j["summary"]["class_pointing"];
  EXPECT_EQ(cp["images"].get<int>(), 4);
  EXPECT_EQ(cp["items"].get<int>(), 8);
  for (const char* v : {"L0/mean", "L1/mean", "rollout"}) {
    EXPECT_DOUBLE_EQ(cp["views"][v]["asked"].get<double>(), 0.5) << v;  // one of the two items, always
    EXPECT_DOUBLE_EQ(cp["views"][v]["all_items"].get<double>(), 0.0) << v;
    EXPECT_FALSE(cp["views"][v]["class_specific"].get<bool>());
  }
  EXPECT_GT(asked, 0);
  EXPECT_NE(r.out.find("class-specific pointing: 4 images, 8 items"), std::string::npos) << r.out;
}

// Perturbation through the CLI: 4 images x (6 views x 18 + 3 random orders x 9) forward passes (L0/mean,
// L1/mean, rollout and the explanation views chefer, gradcam, attn-grad); the unperturbed point of every
// curve is the top-1's probability from expected.json (PyTorch).
TEST_F(Faithful, PerturbationTableAndJson) {
  const fs::path js = dir / "r.json";
  for (const char* mode : {"drop", "zero"}) {
    const CliRun r = run_attnmap("eval -q --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images") + " -w " +
                                 q(kTop5 / "weights.json") + " --perturb " + mode + " --json " + q(js));
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(slurp(js));
    const json want = json::parse(slurp(kTop5 / "expected.json"));
    const json& p = j["summary"]["perturbation"];
    EXPECT_EQ(p["mode"], mode);
    EXPECT_EQ(p["forward_passes"].get<long>(), 4 * (6 * 18 + 3 * 9));
    double p0 = 0;
    for (const auto& [name, im] : want["images"].items()) p0 += im["probs"][im["predicted"].get<size_t>()].get<double>() / 4;
    for (const char* v : {"L0/mean", "L1/mean", "rollout", "chefer", "gradcam", "attn-grad"}) {
      EXPECT_NEAR(p["views"][v]["positive_curve"][0].get<double>(), p0, 1e-6) << v;
      EXPECT_NEAR(p["views"][v]["negative_curve"][0].get<double>(), p0, 1e-6) << v;
    }
    EXPECT_NEAR(p["random"]["curve"][0].get<double>(), p0, 1e-6);
    EXPECT_NE(r.out.find("(random order)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("4 images, 540 forward passes"), std::string::npos) << r.out;
  }
}

// Sanity: randomising the top block of two leaves block 0's attention as it was (Spearman exactly 1); with
// both blocks randomised nothing stays.
TEST_F(Faithful, SanityKeepsTheUntouchedBlocksMaps) {
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images") + " -w " +
                               q(kTop5 / "weights.json") + " --sanity --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  const json& s = j["summary"]["sanity"];
  EXPECT_EQ(s["blocks_randomised_from_top"], json::array({1, 2}));
  EXPECT_DOUBLE_EQ(s["views"]["L0/mean"]["spearman"][0].get<double>(), 1.0);
  EXPECT_LT(s["views"]["L1/mean"]["spearman"][0].get<double>(), 1.0);
  EXPECT_LT(s["views"]["L0/mean"]["spearman"][1].get<double>(), 1.0);
  EXPECT_NE(r.out.find("sanity (model randomisation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    top 1    all 2"), std::string::npos) << r.out;
}
