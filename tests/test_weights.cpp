// Weights loading: the JSON v1 SAX parser and the loader's messages for broken files.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "test_util.hpp"
#include "checkpoint/weights.hpp"

using namespace attnmap;

namespace {

std::string error_of(const std::string& text) {
  try {
    build_model(parse_weights_json(text, "w.json"));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A minimal seed-layout model: D = 3*P*P with P = 1 (3 features), d_k = 2, grid 2x2.
std::string seed_json(const std::string& extra = "") {
  return R"({"W_Q": [[1,0],[0,1],[1,1]], "W_K": [[1,0],[0,1],[1,1]], "W_V": [[1,0],[0,1],[1,1]],)"
         R"( "config": {"patch_size": 1, "image_size": 2})" + extra + "}";
}

}  // namespace

TEST(WeightsJson, ParsesShapesAndConfig) {
  const RawWeights raw = parse_weights_json(R"({"a": [[1, 2.5, -3e2], [4, 5, 6]], "s": 7, "e": [],)"
                                            R"( "config": {"num_heads": 2, "mean": [0.5, 0.5, 0.5], "x": {"y": [1, [2]]}}})",
                                            "w.json");
  ASSERT_EQ(raw.tensors.size(), 3u);
  EXPECT_EQ(raw.tensors.at("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(raw.tensors.at("a").data, (std::vector<float>{1, 2.5f, -300, 4, 5, 6}));
  EXPECT_EQ(raw.tensors.at("s").shape, (std::vector<int64_t>{}));
  EXPECT_EQ(raw.tensors.at("e").shape, (std::vector<int64_t>{0}));
  EXPECT_EQ(raw.config["num_heads"].get<int>(), 2);
  EXPECT_EQ(raw.config["x"]["y"][1][0].get<int>(), 2);
}

TEST(WeightsJson, RefusesBrokenTensors) {
  auto msg = [](const std::string& t) {
    try {
      parse_weights_json(t, "w.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg(R"({"a": [[1, 2], [3]]})").find("tensor 'a' is ragged"), std::string::npos);
  EXPECT_NE(msg(R"({"a": [[1, 2], 3]})").find("tensor 'a' is ragged"), std::string::npos);
  EXPECT_NE(msg(R"({"a": [1, [2]]})").find("tensor 'a' is ragged"), std::string::npos);
  EXPECT_NE(msg(R"({"a": [1, "2"]})").find("tensor 'a' holds a string"), std::string::npos);
  EXPECT_NE(msg(R"({"a": [1, null]})").find("tensor 'a' holds null"), std::string::npos);
  EXPECT_EQ(msg(R"({"a": [1e39]})"), "w.json: tensor 'a' holds 1e39, beyond float32's range (largest magnitude about 3.4e38)");
  EXPECT_NE(msg(R"({"a": [1], "a": [2]})").find("appears twice"), std::string::npos);
  EXPECT_NE(msg(R"({"a": [[[[[[[[[1]]]]]]]]]})").find("deeper than 8"), std::string::npos);
  EXPECT_NE(msg("{\"a\": [1, 2,\n  3,, 4]}").find("w.json: malformed JSON at line 2, column 5"), std::string::npos)
      << msg("{\"a\": [1, 2,\n  3,, 4]}");
  EXPECT_EQ(msg("{\"a\": tru}").find("parse error at"), std::string::npos) << msg("{\"a\": tru}");  // position once
  EXPECT_NE(msg("[1, 2]").find("top level must be a JSON object"), std::string::npos);
  EXPECT_NE(msg("").find("empty"), std::string::npos);
  EXPECT_NE(msg(R"({"a": NaN})").find("malformed JSON"), std::string::npos);
  const std::string deep = "{\"a\": " + std::string(10000, '[') + std::string(10000, ']') + "}";
  EXPECT_NE(msg(deep).find("deeper than 8"), std::string::npos);
}

TEST(WeightsLoader, SeedLayout) {
  const ViTWeights w = build_model(parse_weights_json(seed_json(), "w.json"));
  EXPECT_EQ(layout_name(w.hp.layout), "seed");
  EXPECT_EQ(w.hp.dim, 3);
  EXPECT_EQ(w.hp.head_dim, 2);
  EXPECT_EQ(w.hp.patch, 1);
  EXPECT_EQ(w.hp.grid_w, 2);
  EXPECT_TRUE(w.hp.cls_is_mean);
  // Stacked as nn.Linear weight (3*d_k, D): row c of the Q block is column c of W_Q.
  EXPECT_EQ(w.blocks[0].qkv.weight, (std::vector<float>{1, 0, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1}));
}

TEST(WeightsLoader, NamesMissingAndMisshapenTensors) {
  EXPECT_EQ(error_of(R"({"W_Q": [[1,0],[0,1],[1,1]], "W_V": [[1,0],[0,1],[1,1]], "config": {"patch_size": 1}})"),
            "w.json: missing tensor 'W_K' (expected shape (3, 2))");
  EXPECT_EQ(error_of(R"({"W_Q": [[1,0],[0,1],[1,1]], "W_K": [[1,0,1],[0,1,1]], "W_V": [[1,0],[0,1],[1,1]], "config": {"patch_size": 1}})"),
            "w.json: tensor 'W_K' has shape (2, 3), expected (3, 2)");
  EXPECT_NE(error_of(seed_json(R"(, "pos_embed": [[0,0,0],[0,0,0]])")).find("pos_embed"), std::string::npos);
  EXPECT_NE(error_of(R"({"W_Q": [[1,0],[0,1]], "W_K": [[1,0],[0,1]], "W_V": [[1,0],[0,1]]})").find("not 3*P*P"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"foo": [1]})").find("unknown weights layout"), std::string::npos);
  EXPECT_NE(error_of(seed_json().replace(seed_json().find("\"patch_size\": 1"), 15, "\"patch_size\": \"1\"")).find(
                "config \"patch_size\" must be an integer"),
            std::string::npos);
}

TEST(WeightsLoader, TimmFixtureMissingTensorAndHeads) {
  RawWeights raw = load_weights_json(fixture("timm_small/weights.json"));
  const ViTWeights w = build_model(raw);
  EXPECT_EQ(layout_name(w.hp.layout), "timm");
  EXPECT_EQ(w.hp.depth, 2);
  EXPECT_EQ(w.hp.num_heads, 4);
  EXPECT_EQ(w.hp.grid_w, 4);
  EXPECT_EQ(w.hp.source.at("num_heads"), "config (" + fixture("timm_small/weights.json") + ")");
  // --heads overrides the config; a count that does not divide D is refused.
  ModelOverrides ov;
  ov.num_heads = 2;
  EXPECT_EQ(build_model(raw, ov).hp.num_heads, 2);
  ov.num_heads = 3;
  EXPECT_THROW(build_model(raw, ov), Error);
  // Without num_heads in the config, a D that is no multiple of 64 is refused with what to give (issue 24:
  // never a guessed head count).
  raw.config.erase("num_heads");
  try {
    build_model(raw);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the number of heads is not in the file, and D = 32 is not a multiple of 64"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("give {setting:heads} H"), std::string::npos) << e.what();
  }
  // A transposed qkv is refused by name with both shapes.
  RawWeights broken = load_weights_json(fixture("timm_small/weights.json"));
  Tensor& qkv = broken.tensors.at("blocks.1.attn.qkv.weight");
  qkv.shape = {qkv.shape[1], qkv.shape[0]};
  try {
    build_model(broken);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blocks.1.attn.qkv.weight' has shape (32, 96), expected (96, 32)"),
              std::string::npos)
        << e.what();
  }
  // A block missing in the middle (blocks 0 and 2 present) is a missing tensor, not a model cut after block 0.
  broken = load_weights_json(fixture("timm_small/weights.json"));
  for (auto it = broken.tensors.begin(); it != broken.tensors.end();) {
    if (it->first.rfind("blocks.1.", 0) == 0) {
      broken.tensors.emplace("blocks.2." + it->first.substr(9), it->second);
      it = broken.tensors.erase(it);
    } else {
      ++it;
    }
  }
  try {
    build_model(broken);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'blocks.1.norm1.weight'"), std::string::npos) << e.what();
  }
  // A bias missing in one block while the others have it is a lost tensor: refused by name.
  auto error_of = [](const RawWeights& r) {
    try {
      build_model(r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  for (const char* b : {"blocks.0.mlp.fc2.bias", "blocks.1.mlp.fc1.bias", "blocks.0.attn.proj.bias", "blocks.1.attn.qkv.bias"}) {
    broken = load_weights_json(fixture("timm_small/weights.json"));
    ASSERT_EQ(broken.tensors.erase(b), 1u) << b;
    EXPECT_NE(error_of(broken).find(std::string("missing tensor '") + b + "' (expected shape ("), std::string::npos)
        << error_of(broken);
    EXPECT_NE(error_of(broken).find("the other blocks have it"), std::string::npos);
  }
  // Absent in every block (nn.Linear(bias=False), timm qkv_bias=False): zero, with a notice that says so.
  broken = load_weights_json(fixture("timm_small/weights.json"));
  for (int i = 0; i < 2; ++i) broken.tensors.erase("blocks." + std::to_string(i) + ".mlp.fc2.bias");
  broken.tensors.erase("patch_embed.proj.bias");
  const ViTWeights no_bias = build_model(broken);
  EXPECT_TRUE(no_bias.blocks[0].fc2.bias.empty());
  std::string notes;
  for (const auto& n : no_bias.notices) notes += n + "\n";
  EXPECT_NE(notes.find("no bias tensors (computed as zero, as nn.Linear(bias=False)): blocks.*.mlp.fc2.bias, "
                       "patch_embed.proj.bias"),
            std::string::npos)
      << notes;
  broken.tensors.erase("blocks.0.norm2.weight");
  EXPECT_THROW(build_model(broken), Error);
  // The final LayerNorm: half of it, or none of it under a classifier head, is a missing tensor.
  broken = load_weights_json(fixture("timm_small/weights.json"));
  ASSERT_EQ(broken.tensors.count("head.weight"), 1u);
  broken.tensors.erase("norm.weight");
  EXPECT_NE(error_of(broken).find("missing tensor 'norm.weight'"), std::string::npos) << error_of(broken);
  broken.tensors.erase("norm.bias");
  EXPECT_NE(error_of(broken).find("missing tensor 'norm.weight' (expected shape (32,); the classifier head reads the final LayerNorm)"),
            std::string::npos)
      << error_of(broken);
  broken.tensors.erase("head.weight");
  broken.tensors.erase("head.bias");
  EXPECT_EQ(error_of(broken), "accepted");  // no head: the final LayerNorm changes no attention map
  // A tensor that is there in a dtype attnmap skips (safetensors I32, BOOL, FP8) is named with its dtype.
  broken = load_weights_json(fixture("timm_small/weights.json"));
  broken.tensors.erase("blocks.1.attn.qkv.weight");
  broken.skipped["blocks.1.attn.qkv.weight"] = "I32";
  EXPECT_NE(error_of(broken).find("tensor 'blocks.1.attn.qkv.weight' has dtype I32, which attnmap does not read "
                                  "(expected F32, F16, BF16 or F64 of shape (96, 32))"),
            std::string::npos)
      << error_of(broken);
  // ... also when the tensor is optional (a bias, the classifier): never silently zero or absent.
  for (const char* name : {"patch_embed.proj.bias", "head.weight", "blocks.0.mlp.fc1.bias"}) {
    broken = load_weights_json(fixture("timm_small/weights.json"));
    ASSERT_EQ(broken.tensors.erase(name), 1u) << name;
    broken.skipped[name] = "F8_E4M3";
    EXPECT_NE(error_of(broken).find(std::string("tensor '") + name + "' has dtype F8_E4M3, which attnmap does not read"),
              std::string::npos)
        << error_of(broken);
  }
  // The command line wins over the file's config, with a notice saying what it replaced.
  ModelOverrides ov2;
  ov2.num_heads = 2;
  ov2.mean = std::array<float, 3>{0.5f, 0.5f, 0.5f};
  const ViTWeights over = build_model(load_weights_json(fixture("timm_small/weights.json")), ov2);
  EXPECT_EQ(over.hp.num_heads, 2);
  std::string over_notes;
  for (const auto& n : over.notices) over_notes += n + "\n";
  EXPECT_NE(over_notes.find("{setting:heads} 2 overrides num_heads 4 from config ("), std::string::npos) << over_notes;
  EXPECT_NE(over_notes.find("{setting:mean} 0.5, 0.5, 0.5 overrides mean 0.485, 0.456, 0.406 from config ("), std::string::npos)
      << over_notes;
}

// Issue 6: hostile weight files beyond RefusesBrokenTensors - each refused with the file, the tensor or
// position, and the reason, before any computation.
TEST(WeightsJson, RefusesHostileFiles) {
  auto msg = [](const std::string& t) {
    try {
      build_model(parse_weights_json(t, "w.json"));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(msg(R"({"a": [1e400]})"), "w.json: tensor 'a' holds 1e400, beyond float32's range (largest magnitude about 3.4e38)");
  EXPECT_NE(msg(R"({"a": [-Infinity]})").find("w.json: malformed JSON at line 1, column 9"), std::string::npos);
  EXPECT_NE(msg(R"({"a": [Infinity]})").find("w.json: malformed JSON"), std::string::npos);
  EXPECT_NE(msg(R"({"a": ["1.5"]})").find("tensor 'a' holds a string (\"1.5\") where a number is expected"),
            std::string::npos);
  EXPECT_NE(msg(R"({"a": [true]})").find("tensor 'a' holds"), std::string::npos);
  // Trailing bytes after the object: text, and NUL padding (which nlohmann/json alone would ignore).
  EXPECT_NE(msg(R"({"a": [1]} xyz)").find("w.json: malformed JSON at line 1, column 12"), std::string::npos);
  EXPECT_EQ(msg(std::string("{\"a\": [1, 2]}\n\0\0", 16)),
            "w.json: malformed JSON at line 2, column 1: NUL byte (binary data or padding in a text file)");
  EXPECT_NE(msg(std::string("{\"a\": [1,\0 2]}", 14)).find("line 1, column 10: NUL byte"), std::string::npos);
  // Config values of the wrong type or absurd size are refused by name.
  EXPECT_EQ(msg(R"({"a": [1], "config": [1]})"), "w.json: tensor 'config' must be an object");
  EXPECT_EQ(msg(R"({"a": [1], "config": "{\"num_heads\": 4}"})"),
            "w.json: \"config\" must be an object, found a string (a config as a JSON string is the safetensors "
            "__metadata__ convention, not JSON weights')");
  EXPECT_NE(msg(seed_json().replace(seed_json().find("\"patch_size\": 1"), 15, "\"patch_size\": 1e300"))
                .find("config \"patch_size\" must be an integer"),
            std::string::npos);
  // 10 000-deep nesting inside the config object too (not only inside a tensor).
  const std::string deep = R"({"a": [1], "config": {"x": )" + std::string(10000, '[') + std::string(10000, ']') + "}}";
  EXPECT_EQ(msg(deep), "w.json: \"config\" is nested deeper than 32 levels");
}
