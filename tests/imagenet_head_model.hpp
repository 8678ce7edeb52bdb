// attnmap tests: a small model with a torchvision-like ImageNet head - 1000 classes and no class names in
// the weights, so attnmap assumes ImageNet-1k's (checkpoint/labels.hpp) - for the checks of what a run does
// with class names of another label set (issue 41). eval_top5's blocks (2 blocks, 32 px, 16 px patches), its
// head re-drawn N(0, 0.02) with 1000 outputs (std::mt19937_64(41)), biases 0, config labels removed.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace attnmap_test {

/// Writes the model to `out` (attnmap JSON) and returns it.
inline std::filesystem::path write_imagenet_head_model(const std::filesystem::path& out) {
  std::ifstream in(std::filesystem::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_top5" / "weights.json");
  nlohmann::json w = nlohmann::json::parse(in);
  const size_t dim = w["head.weight"][0].size();
  std::mt19937_64 rng(41);
  std::normal_distribution<double> nd(0.0, 0.02);
  nlohmann::json head = nlohmann::json::array(), bias = nlohmann::json::array();
  for (int c = 0; c < 1000; ++c) {
    nlohmann::json row = nlohmann::json::array();
    for (size_t k = 0; k < dim; ++k) row.push_back(nd(rng));
    head.push_back(std::move(row));
    bias.push_back(0.0);
  }
  w["head.weight"] = std::move(head);
  w["head.bias"] = std::move(bias);
  w["config"].erase("labels");
  std::ofstream(out) << w.dump();
  return out;
}

}  // namespace attnmap_test
