// The bundled default model (weights/default.json) on the committed held-out composites (data/composites):
// its attention must land on the garment and its head must classify. Issue 4's targets, on 1000 composites,
// are pointing game 0.90, energy 4x the uniform baseline, top-1 75 %; the shipped model's default view (block 1,
// head 3) reaches 0.945, 8.0x and 82.6 % on the 1000 test composites of weights/README.md; on these 24 it scores
// 1.000, 9.3x and 75.0 %. The bounds keep a margin under those figures (24 images: one image is 0.042 of pointing
// or top-1).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/batch.hpp"
#include "test_util.hpp"
#include "checkpoint/weights.hpp"

namespace fs = std::filesystem;


TEST(DefaultModel, LocalisesAndClassifiesTheComposites) {
  const attnmap::ViTWeights model = attnmap::load_model(attnmap::default_weights_path());
  ASSERT_TRUE(model.head.present()) << "weights/default.json has no classifier head";
  ASSERT_EQ(model.hp.labels.size(), static_cast<size_t>(model.head.out))
      << "config labels do not match the head";

  const std::string comp = std::string(ATTNMAP_DATA_DIR) + "/composites";
  const fs::path js =
      fs::temp_directory_path() / ("attnmap_default_eval_" + std::to_string(::getpid()) + ".json");
  // The model's own default view (config default_layer / default_head), bilinear, no pointing tolerance.
  const std::string cmd = std::string("'") + ATTNMAP_BIN + "' eval -q --masks '" + comp + "/masks' '" + comp +
                          "' --json '" + js.string() + "' >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const nlohmann::json j = nlohmann::json::parse(slurp(js));
  fs::remove(js);
  const auto& s = j["summary"];
  EXPECT_EQ(s["images"].get<int>(), 24);
  EXPECT_EQ(s["failed"].get<int>(), 0);
  EXPECT_EQ(s["top1"]["labelled"].get<int>(), 24);  // every composite's class comes from labels.csv
  const auto& v = s["views"][j["selected_view"].get<std::string>()];
  const double pointing = v["pointing_game"].get<double>();
  const double ratio = v["energy_ratio"].get<double>();
  const double top1 = s["top1"]["accuracy"].get<double>();
  std::printf("default model on data/composites: view %s, pointing %.3f, energy ratio %.2fx, top-1 %.3f\n",
              j["selected_view"].get<std::string>().c_str(), pointing, ratio, top1);
  EXPECT_GE(pointing, 0.90);  // shipped model: 1.000 (issue 4: "e.g. pointing >= 0.80")
  EXPECT_GE(ratio, 6.0);      // shipped model: 9.31x
  EXPECT_GE(top1, 0.70);      // shipped model: 0.750
}
