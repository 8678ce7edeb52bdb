// siglip_fixture.hpp - a Hugging Face SiglipVisionModel folder made from the SiglipModel fixture
// (tests/fixtures/siglip/hf): its vision_model.* tensors alone (offsets rewritten) and its vision_config as
// config.json, as SiglipVisionModel.save_pretrained writes them. Shared by the SigLIP vision and text tests.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.hpp"

/// Writes `folder`/model.safetensors and `folder`/config.json from the SiglipModel folder `hf_dir` (created).
inline void write_siglip_vision_only(const std::string& hf_dir, const std::filesystem::path& folder) {
  std::filesystem::create_directories(folder);
  const std::string bytes = slurp(hf_dir + "/model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  nlohmann::json out = nlohmann::json::object();
  std::string data;
  for (const auto& kv : h.items()) {
    if (kv.key().rfind("vision_model.", 0) != 0) continue;
    const auto off = kv.value()["data_offsets"];
    const std::string piece = bytes.substr(8 + n + off[0].get<size_t>(), off[1].get<size_t>() - off[0].get<size_t>());
    out[kv.key()] = {{"dtype", kv.value()["dtype"]}, {"shape", kv.value()["shape"]},
                     {"data_offsets", {data.size(), data.size() + piece.size()}}};
    data += piece;
  }
  std::string head = out.dump();
  head.append((8 - head.size() % 8) % 8, ' ');
  {
    std::ofstream st(folder / "model.safetensors", std::ios::binary);
    const uint64_t hn = head.size();
    st.write(reinterpret_cast<const char*>(&hn), 8);
    st << head << data;
  }
  std::ifstream cfg(hf_dir + "/config.json");
  nlohmann::json vc = nlohmann::json::parse(cfg)["vision_config"];
  vc["architectures"] = {"SiglipVisionModel"};
  std::ofstream(folder / "config.json") << vc.dump(2);
}
