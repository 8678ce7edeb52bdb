// test_eval_flags.cpp - eval's flags (issue 28): the bootstrap interval, median, max/mean and brightness map
// against NumPy (tools/make_eval_flags_fixtures.py), and the verdict of the view table: a random-weight model
// with the bundled model's shapes has flat maps and no view that beats the baselines; the bundled model has.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.hpp"
#include "maps/evaluate.hpp"
#include "maps/faithfulness.hpp"
#include "random_model.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const json& reference() {
  static const json j = json::parse(slurp(fixture("eval_flags/reference.json")));
  return j;
}

}  // namespace

TEST(EvalFlags, SplitMixAndBootstrapIntervalAsNumPy) {
  const json& r = reference();
  uint64_t state = 28;
  for (const auto& z : r["splitmix64_seed28_first4"]) EXPECT_EQ(std::to_string(splitmix64(&state)), z.get<std::string>());
  for (const auto& c : r["bootstrap"]) {
    const Interval ci = bootstrap_interval(c["x"].get<std::vector<double>>(), c["resamples"].get<int>(),
                                           c["seed"].get<uint64_t>(), c["level"].get<double>());
    EXPECT_NEAR(ci.lo, c["lo"].get<double>(), 1e-12) << c.dump();
    EXPECT_NEAR(ci.hi, c["hi"].get<double>(), 1e-12) << c.dump();
  }
  EXPECT_THROW(bootstrap_interval({}), Error);
  EXPECT_THROW(bootstrap_interval({1.0}, 1), Error);
  EXPECT_THROW(bootstrap_interval({1.0}, 10, 1, 1.0), Error);
}

TEST(EvalFlags, MedianPeakToMeanAndBrightnessAsNumPy) {
  const json& r = reference();
  for (const auto& c : r["median"]) EXPECT_DOUBLE_EQ(median(c["x"].get<std::vector<double>>()), c["median"].get<double>());
  for (const auto& c : r["peak_to_mean"])
    EXPECT_NEAR(peak_to_mean(c["map"].get<std::vector<float>>()), c["peak_to_mean"].get<double>(), 1e-6);
  EXPECT_EQ(peak_to_mean({0.f, 0.f}), 0.0);
  const json& b = r["brightness"];
  Image img;
  img.width = b["width"].get<int>();
  img.height = b["height"].get<int>();
  img.rgb = b["rgb"].get<std::vector<uint8_t>>();
  const std::vector<float> got = brightness_map(img);
  const std::vector<double> want = b["luma"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
  img.rgb.assign(img.rgb.size(), 0);  // an all-black photo: uniform
  for (float v : brightness_map(img)) EXPECT_EQ(v, 1.0f);
}

namespace {


class EvalVerdict : public ::testing::Test {
 protected:
  const fs::path src = fs::path(ATTNMAP_TEST_DIR) / "..";
  fs::path dir = fs::temp_directory_path() / ("attnmap_eval_flags_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  // eval -q on the 24 composites of data/composites with these weights; the JSON's summary.
  json eval(const fs::path& weights, std::string* out) {
    const fs::path js = dir / "eval.json";
    const CliRun r = run_attnmap("eval -q --masks " + q(src / "data/composites/masks") + " " +
                                 q(src / "data/composites") + " -w " + q(weights) + " --json " + q(js));
    EXPECT_EQ(r.status, 0) << r.err;
    *out = r.out;
    return json::parse(slurp(js));
  }
};

}  // namespace

// The bundled model: its default head L1/h3 beats every baseline beyond the interval, and is named.
TEST_F(EvalVerdict, TrainedModelNamesABestView) {
  std::string out;
  const json all = eval(src / "weights/default.json", &out);
  const json& j = all["summary"];
  EXPECT_EQ(j["images"].get<int>(), 24);
  EXPECT_EQ(j["best_pointing_view"], "L1/h3") << out;
  EXPECT_FALSE(j["best_energy_view"].is_null()) << out;
  EXPECT_TRUE(j["views"]["L1/h3"]["margin_pointing_over"]["beats_every_baseline"].get<bool>());
  EXPECT_GT(j["views"]["L1/h3"]["margin_pointing_over"]["interval"][0].get<double>(), 0.0);
  EXPECT_FALSE(j["views"]["L1/h3"]["flat"].get<bool>());
  EXPECT_GT(j["views"]["L1/h3"]["max_over_mean"].get<double>(), 1.5);
  EXPECT_EQ(out.find("no view beats the baselines"), std::string::npos) << out;
  EXPECT_EQ(out.find("flat maps ("), std::string::npos) << out;
  EXPECT_NE(out.find("best pointing game: L1/h3"), std::string::npos) << out;
  EXPECT_NE(out.find("(brightness)"), std::string::npos) << out;
  // The brightness row is the photo's luma scored as a view: its figures are the mean of the images'.
  double e = 0;
  for (const auto& im : all["images"]) e += im["brightness"]["energy"].get<double>();
  EXPECT_NEAR(j["baselines"]["brightness"]["energy_in_mask"].get<double>(), e / 24, 1e-12);
}

// A random-weight model with the bundled model's shapes: nearly flat maps, none beats the baselines, and
// the summary says both without a manual.
TEST_F(EvalVerdict, RandomWeightModelIsFlatAndBeatsNoBaseline) {
  const fs::path wp = dir / "random.json";
  attnmap_test::write_random_weights(src / "weights/default.json", wp, 28);
  std::string out;
  const json all = eval(wp, &out);
  const json& j = all["summary"];
  EXPECT_TRUE(j["best_pointing_view"].is_null()) << out;
  EXPECT_TRUE(j["best_energy_view"].is_null()) << out;
  EXPECT_NE(out.find("best pointing game: none, best energy: none"), std::string::npos) << out;
  EXPECT_NE(out.find("no view beats the baselines: on neither pointing (best baseline: brightness 0.708) nor energy "
                     "(best baseline: brightness 0.189)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("flat maps (6 of 9 views: L0/mean, L1/mean, L2/mean, L3/mean, L1/h3, rollout)"), std::string::npos)
      << out;
  EXPECT_FALSE(j["views"]["chefer"]["flat"].get<bool>());  // max/mean 1.6: peaked, yet it beats no baseline
  for (const char* v : {"L0/mean", "L1/mean", "L2/mean", "L3/mean", "L1/h3", "rollout"}) {
    EXPECT_TRUE(j["views"][v]["flat"].get<bool>()) << v << " " << out;
    EXPECT_LT(j["views"][v]["max_over_mean"].get<double>(), 1.25) << v;
    EXPECT_FALSE(j["views"][v]["margin_pointing_over"]["beats_every_baseline"].get<bool>()) << v;
  }
}
