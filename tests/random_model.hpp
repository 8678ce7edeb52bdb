// attnmap tests: a random-weight model with the bundled model's shapes, for the checks that a model which
// learnt nothing gets flat maps, no crowned view and no confident class (issue 28).
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace attnmap_test {

/// One tensor (nested JSON arrays) re-drawn as timm initialises a ViT: weights N(0, 0.02), biases 0,
/// LayerNorm weights 1 (as tools/make_random_default.py), from `rng`.
inline void randomise(nlohmann::json& t, const std::string& name, std::mt19937_64& rng) {
  if (t.is_array()) {
    for (auto& e : t) randomise(e, name, rng);
    return;
  }
  const bool norm = name.find("norm") != std::string::npos && name.size() > 7 && name.substr(name.size() - 7) == ".weight";
  const bool bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
  std::normal_distribution<double> nd(0.0, 0.02);
  t = norm ? 1.0 : bias ? 0.0 : nd(rng);
}

/// The attnmap JSON weights `trained` with every tensor re-drawn (std::mt19937_64(seed)), the config kept,
/// written to `out`.
inline void write_random_weights(const std::filesystem::path& trained, const std::filesystem::path& out, unsigned seed) {
  std::ifstream in(trained);
  nlohmann::json w = nlohmann::json::parse(in);
  std::mt19937_64 rng(seed);
  for (auto& [name, t] : w.items())
    if (name != "config") randomise(t, name, rng);
  std::ofstream(out) << w.dump();
}

}  // namespace attnmap_test
