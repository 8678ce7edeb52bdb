// Checkpoint layouts (issue 3): every layout's fixture in JSON and safetensors F32 / F16 / BF16 against the
// PyTorch references made by tools/make_fixtures.py (make_layouts), config resolution and `attnmap inspect`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "maps/attention_maps.hpp"
#include "engine/batch.hpp"
#include "core/error.hpp"
#include "engine/inspect/inspect.hpp"
#include "io/npy.hpp"
#include "test_util.hpp"
#include "model/vit.hpp"
#include "checkpoint/weights.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const char* kLayouts[] = {"timm",    "hf",        "torchvision",      "hf_model",     "deit_distilled",
                          "qv_bias", "dinov2_fb", "timm_reg_noembed", "timm_reg_full"};

struct Format {
  const char* file;
  const char* reference;  // attention computed by PyTorch from exactly the values in `file`
  double drift_tol;       // against the float32 reference: the dtype's own rounding (measured, see README)
};
// F16 keeps 11 significant bits (relative rounding 2^-11 = 4.9e-4 per weight), BF16 8 bits (2^-8 = 3.9e-3);
// through two random blocks with sharp attention the probabilities moved by at most 1.7e-3 (F16) and
// 1.43e-2 (BF16) in tools/make_fixtures.py's run (meta.json dtype_drift).
const Format kFormats[] = {{"weights.json", "attn.npy", 0},
                           {"weights.safetensors", "attn.npy", 0},
                           {"weights.f16.safetensors", "attn_f16.npy", 2e-3},
                           {"weights.bf16.safetensors", "attn_bf16.npy", 2e-2}};

nlohmann::json read_meta(const std::string& dir) {
  std::ifstream f(dir + "meta.json");
  return nlohmann::json::parse(f);
}

std::string layout_dir(const std::string& name) { return fixture("layouts/" + name) + "/"; }

using LayoutCase = std::tuple<const char*, Format>;
class Layouts : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(Layouts, EveryLayerAndHeadMatchesPyTorch) {
  const std::string name = std::get<0>(GetParam());
  const Format fmt = std::get<1>(GetParam());
  const std::string dir = layout_dir(name);
  const auto meta = read_meta(dir);
  const ViTWeights w = load_model(dir + fmt.file);
  EXPECT_EQ(w.format, std::string(fmt.file) == "weights.json" ? "json" : "safetensors");
  EXPECT_EQ(layout_name(w.hp.layout), meta["layout"].get<std::string>());
  EXPECT_EQ(w.hp.depth, meta["L"].get<int>());
  EXPECT_EQ(w.hp.num_heads, meta["H"].get<int>());
  EXPECT_EQ(w.hp.tokens(), meta["T"].get<int>());
  EXPECT_EQ(w.hp.num_prefix, meta["num_prefix"].get<int>());
  EXPECT_EQ(w.hp.pos_prefix, meta["pos_prefix"].get<int>());
  EXPECT_FLOAT_EQ(w.hp.eps, meta["eps"].get<float>());

  std::vector<int64_t> in_shape, shape;
  const std::vector<float> input = read_npy(dir + "input.npy", &in_shape);
  ASSERT_EQ(in_shape, (std::vector<int64_t>{3, w.hp.image_h, w.hp.image_w}));
  ForwardOptions fo;
  fo.keep_full = true;
  fo.to_end = true;
  const ForwardResult r = vit_forward(w, input.data(), fo);
  const std::vector<float> exact = read_npy(dir + fmt.reference, &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{w.hp.depth, w.hp.num_heads, w.hp.tokens(), w.hp.tokens()}));
  EXPECT_TRUE(all_close(r.attn, exact, 1e-5, name + "/" + fmt.file + " vs " + fmt.reference));
  if (fmt.drift_tol > 0) {
    const std::vector<float> f32 = read_npy(dir + "attn.npy", &shape);
    EXPECT_TRUE(all_close(r.attn, f32, fmt.drift_tol, name + "/" + fmt.file + " vs the float32 reference"));
  } else {
    const std::vector<float> tokens = read_npy(dir + "tokens.npy", &shape);
    EXPECT_TRUE(all_close(r.tokens_out, tokens, 1e-4, name + "/" + fmt.file + " final tokens"));
  }

  // The maps cover the patch tokens only: row 0, columns num_prefix.., as (grid_h, grid_w), every layer/head.
  const int T = w.hp.tokens(), N = w.hp.grid_w * w.hp.grid_h, H = w.hp.num_heads;
  for (int l = 0; l < w.hp.depth; ++l)
    for (int h = 0; h < H; ++h) {
      HeadSelect sel;
      sel.fusion = HeadSelect::Fusion::Index;
      sel.index = h;
      const std::vector<float> map = class_attention_map(r, w.hp, l, sel);
      ASSERT_EQ(map.size(), static_cast<size_t>(N));
      const size_t row0 = (static_cast<size_t>(l) * H + h) * T * T;
      const std::vector<float> want(exact.begin() + static_cast<long>(row0) + w.hp.num_prefix,
                                    exact.begin() + static_cast<long>(row0) + T);
      EXPECT_TRUE(all_close(map, want, 1e-5, name + " map layer " + std::to_string(l) + " head " + std::to_string(h)));
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Layouts, ::testing::Combine(::testing::ValuesIn(kLayouts), ::testing::ValuesIn(kFormats)),
                         [](const ::testing::TestParamInfo<LayoutCase>& p) {
                           std::string f = std::get<1>(p.param).file;
                           for (char& c : f)
                             if (c == '.') c = '_';
                           return std::string(std::get<0>(p.param)) + "_" + f;
                         });

TEST(Layouts, SameWeightsInTimmHfTorchvisionGiveTheSameMaps) {
  std::vector<ForwardResult> rs;
  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(layout_dir("timm") + "input.npy", &shape);
  for (const char* name : {"timm", "hf", "torchvision"}) {
    const ViTWeights w = load_model(layout_dir(name) + "weights.safetensors");
    ForwardOptions fo;
    fo.keep_full = true;
    fo.to_end = true;
    rs.push_back(vit_forward(w, input.data(), fo));
    EXPECT_EQ(w.head.out, 5) << name << ": classifier head (timm head, HF classifier, torchvision heads.head)";
  }
  for (size_t i = 1; i < rs.size(); ++i) {
    EXPECT_TRUE(all_close(rs[i].attn, rs[0].attn, 1e-6, "attention vs timm"));
    EXPECT_TRUE(all_close(rs[i].tokens_out, rs[0].tokens_out, 1e-5, "tokens vs timm"));
    EXPECT_TRUE(all_close(rs[i].logits, rs[0].logits, 1e-5, "logits vs timm"));
  }
}

// ---- refusals by name ---------------------------------------------------------------------------------------

std::string build_error(RawWeights raw) {
  try {
    ModelOverrides ov;
    ov.num_heads = 3;  // every layout fixture has D = 24, 3 heads (the side config.json is not read here)
    build_model(raw, SideConfig{}, ov);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

RawWeights fixture_raw(const std::string& name) { return load_weights_json(layout_dir(name) + "weights.json"); }

void transpose2d(Tensor& t) {
  const int64_t a = t.shape[0], b = t.shape[1];
  std::vector<float> d(t.data.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j) d[static_cast<size_t>(j * a + i)] = t.data[static_cast<size_t>(i * b + j)];
  t.data = d;
  t.shape = {b, a};
}

TEST(Layouts, TransposedJaxStyleQkvIsRefusedByName) {
  RawWeights raw = fixture_raw("torchvision");
  transpose2d(raw.tensors.at("encoder.layers.encoder_layer_1.self_attention.in_proj_weight"));
  const std::string e = build_error(raw);
  EXPECT_NE(e.find("tensor 'encoder.layers.encoder_layer_1.self_attention.in_proj_weight' has shape (24, 72), expected (72, 24)"),
            std::string::npos) << e;
  EXPECT_NE(e.find("transposed"), std::string::npos) << e;

  raw = fixture_raw("timm");
  transpose2d(raw.tensors.at("blocks.0.attn.qkv.weight"));
  EXPECT_NE(build_error(raw).find("'blocks.0.attn.qkv.weight' has shape (24, 72)"), std::string::npos);
}

TEST(Layouts, WrongRankOrMissingTensorsAreNamedInTheLayoutsOwnNames) {
  RawWeights raw = fixture_raw("hf");
  raw.tensors.at("vit.encoder.layer.0.attention.attention.key.weight").shape = {24, 24, 1};
  EXPECT_NE(build_error(raw).find("tensor 'vit.encoder.layer.0.attention.attention.key.weight' has shape (24, 24, 1), expected (24, 24)"),
            std::string::npos) << build_error(raw);
  raw = fixture_raw("hf");
  raw.tensors.erase("vit.encoder.layer.1.layernorm_after.bias");
  EXPECT_NE(build_error(raw).find("missing tensor 'vit.encoder.layer.1.layernorm_after.bias'"), std::string::npos)
      << build_error(raw);
  raw = fixture_raw("qv_bias");
  // q_bias / v_bias in timm names is timm's Eva (EVA-02: rotary positions) unless a config names another
  // architecture (issue 29); the fixture's config.json does, beside weights.json.
  raw.config["architecture"] = "beit_tiny_patch8_32.fixture";
  raw.tensors.erase("backbone.blocks.1.attn.v_bias");
  EXPECT_NE(build_error(raw).find("missing tensor 'backbone.blocks.1.attn.v_bias'"), std::string::npos) << build_error(raw);
  raw = fixture_raw("dinov2_fb");
  raw.tensors.at("blocks.0.ls1.gamma").shape = {1, 24};
  EXPECT_NE(build_error(raw).find("tensor 'blocks.0.ls1.gamma' has shape (1, 24), expected (24,)"), std::string::npos)
      << build_error(raw);
  raw = fixture_raw("torchvision");
  raw.tensors.at("encoder.pos_embedding").shape = {1, 16, 24};
  raw.tensors.at("encoder.pos_embedding").data.resize(16 * 24);
  EXPECT_NE(build_error(raw).find("'encoder.pos_embedding' has 15 patch positions, not a square grid"), std::string::npos)
      << build_error(raw);
}

TEST(Layouts, QvBiasMeansZeroKeyBias) {
  const ViTWeights w = load_model(layout_dir("qv_bias") + "weights.json");
  ASSERT_EQ(w.blocks[0].qkv.bias.size(), 72u);
  for (size_t i = 24; i < 48; ++i) EXPECT_EQ(w.blocks[0].qkv.bias[i], 0.0f);
  EXPECT_NE(w.blocks[0].qkv.bias[0], 0.0f);
}

// ---- config resolution ------------------------------------------------------------------------------------

class ConfigFiles : public TempDirTest {
 protected:
  void write(const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; }
};

TEST_F(ConfigFiles, HuggingFaceConfigThenJsonConfigThenCommandLine) {
  fs::copy_file(layout_dir("hf") + "weights.safetensors", dir / "model.safetensors");
  write("config.json", R"({"num_attention_heads": 3, "layer_norm_eps": 1e-5, "image_size": 32, "patch_size": 8})");
  write("preprocessor_config.json", R"({"image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25]})");
  ViTWeights w = load_model((dir / "model.safetensors").string());
  EXPECT_EQ(w.hp.num_heads, 3);
  EXPECT_FLOAT_EQ(w.hp.eps, 1e-5f);
  EXPECT_EQ(w.hp.mean[0], 0.5f);
  EXPECT_EQ(w.hp.std[2], 0.25f);
  EXPECT_NE(w.hp.source.at("num_heads").find("config.json"), std::string::npos);
  EXPECT_NE(w.hp.source.at("num_heads").find("num_attention_heads"), std::string::npos);
  EXPECT_NE(w.hp.source.at("mean").find("preprocessor_config.json"), std::string::npos);
  EXPECT_NE(w.hp.source.at("image_size").find("config.json"), std::string::npos);

  // The weights file's own "config" beats config.json; the command line beats both.
  RawWeights raw = load_weights_json(layout_dir("hf") + "weights.json");
  raw.config = nlohmann::json::parse(R"({"layer_norm_eps": 1e-6, "mean": [0.1, 0.2, 0.3], "num_heads": 6})");
  ModelOverrides ov;
  ov.num_heads = 2;
  w = build_model(raw, read_side_config(dir.string()), ov);
  EXPECT_FLOAT_EQ(w.hp.eps, 1e-6f);
  EXPECT_EQ(w.hp.source.at("layer_norm_eps"), "config (" + raw.path + ")");
  EXPECT_EQ(w.hp.mean[1], 0.2f);
  EXPECT_EQ(w.hp.std[0], 0.25f);  // still from preprocessor_config.json
  EXPECT_EQ(w.hp.num_heads, 2);
  EXPECT_EQ(w.hp.source.at("num_heads"), "command line");
}

TEST_F(ConfigFiles, TimmHubConfigGivesHeadsFromTheArchitectureAndPretrainedCfg) {
  fs::copy_file(layout_dir("timm_reg_noembed") + "weights.safetensors", dir / "model.safetensors");
  write("config.json", R"({"architecture": "vit_small_patch14_reg4_dinov2.lvd142m", "pretrained_cfg":
        {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "input_size": [3, 42, 42], "crop_pct": 1.0,
         "interpolation": "bicubic"}})");
  // The name says ViT-S (D = 384), the weights have D = 24: its head count is not taken (issue 24: a name
  // describing another model gave 12 heads to a D = 384 file); nothing else says the heads, so it is asked for.
  try {
    load_model((dir / "model.safetensors").string());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("D = 24 is not a multiple of 64"), std::string::npos) << e.what();
  }
  EXPECT_EQ(heads_from_architecture("vit_small_patch14_reg4_dinov2.lvd142m", 384), 6);
  EXPECT_EQ(heads_from_architecture("vit_small_patch14_reg4_dinov2.lvd142m", 24), 0);
  EXPECT_EQ(heads_from_architecture("vit_base_patch16_224", 384), 0);
  EXPECT_EQ(heads_from_architecture("vit_giant_patch14_reg4_dinov2", 1536), 24);  // DINOv2's giant, not timm's
  write("config.json", R"({"architecture": "vit_small_patch14_reg4_dinov2.lvd142m", "model_args": {"num_heads": 6},
        "pretrained_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "input_size": [3, 42, 42],
         "crop_pct": 1.0, "interpolation": "bicubic"}})");
  const ViTWeights w = load_model((dir / "model.safetensors").string());
  EXPECT_EQ(w.hp.num_heads, 6);
  EXPECT_NE(w.hp.source.at("num_heads").find("model_args.num_heads"), std::string::npos) << w.hp.source.at("num_heads");
  EXPECT_EQ(w.hp.std[1], 0.5f);
  EXPECT_FLOAT_EQ(*w.hp.crop_pct, 1.0f);
  EXPECT_EQ(w.hp.interpolation, "bicubic");
  EXPECT_EQ(w.hp.image_w, 42);
  EXPECT_NE(w.hp.source.at("image_size").find("pretrained_cfg.input_size"), std::string::npos);
  EXPECT_EQ(w.hp.source.at("layer_norm_eps"), "default (timm 1e-6)");
}

TEST_F(ConfigFiles, MalformedConfigJsonIsRefusedByName) {
  fs::copy_file(layout_dir("hf") + "weights.safetensors", dir / "model.safetensors");
  write("config.json", R"({"num_attention_heads": "three"})");
  try {
    load_model((dir / "model.safetensors").string());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"num_heads\" must be an integer"), std::string::npos) << e.what();
  }
  write("config.json", "{not json");
  try {
    load_model((dir / "model.safetensors").string());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: malformed JSON"), std::string::npos) << e.what();
  }
}

TEST(Config, HeadsFromTimmArchitectureNames) {
  EXPECT_EQ(heads_from_architecture("vit_tiny_patch16_224.augreg_in21k"), 3);
  EXPECT_EQ(heads_from_architecture("vit_small_patch14_dinov2.lvd142m"), 6);
  EXPECT_EQ(heads_from_architecture("vit_base_patch16_224"), 12);
  EXPECT_EQ(heads_from_architecture("vit_large_patch14_clip_224"), 16);
  EXPECT_EQ(heads_from_architecture("vit_huge_patch14_224"), 16);  // 16 heads of 80, not D/64 = 20
  EXPECT_EQ(heads_from_architecture("deit_tiny_distilled_patch16_224"), 3);
  EXPECT_EQ(heads_from_architecture("deit3_base_patch16_224"), 12);
  EXPECT_EQ(heads_from_architecture("resnet50"), 0);
}

// ---- inspect ----------------------------------------------------------------------------------------------

// stdout and stderr of one run, as a user sees them on the terminal.
std::string run_stdout(const std::string& args, int* status) {
  const CliRun r = run_attnmap(args);
  *status = r.status;
  return r.out + r.err;
}

TEST(Inspect, PrintsLayoutTokensConfigAndProvenance) {
  int status = -1;
  const std::string path = layout_dir("dinov2_fb") + "weights.f16.safetensors";
  const std::string out = run_stdout("inspect '" + path + "'", &status);
  EXPECT_EQ(status, 0) << out;
  for (const char* want : {"format:      safetensors", "layout:      dinov2 (facebookresearch DINOv2 DinoVisionTransformer names)",
                           "tokens:      14 = 1 class + 0 distillation + 4 register + 9 patch",
                           "grid:        3 x 3 patches (rows x columns) of 14 px, input 42 x 42 px",
                           "positions:   10 rows: the class token and the patches", "depth:       2 blocks",
                           "heads:       3 (head dim 8, D = 24)", "layer scale: yes", "parameters:  24,408",
                           "num_heads       3                       config.json (", "inferred from pos_embed",
                           "layer_norm_eps  1e-06                   default (DINOv2 1e-6)",
                           "  mask_token (1, 24): mask token: replaces masked patches in masked-image pre-training only"})
    EXPECT_NE(out.find(want), std::string::npos) << "missing '" << want << "' in\n" << out;

  const std::string deit = run_stdout("inspect '" + layout_dir("deit_distilled") + "weights.json' --heads 6", &status);
  EXPECT_EQ(status, 0) << deit;
  EXPECT_NE(deit.find("tokens:      18 = 1 class + 1 distillation + 0 register + 16 patch"), std::string::npos) << deit;
  EXPECT_NE(deit.find("num_heads       6                       command line"), std::string::npos) << deit;
  EXPECT_NE(deit.find("classifier:  5 classes"), std::string::npos) << deit;
  // The bundled model's class names are listed (ten of them: all).
  const std::string def = run_stdout("inspect '" + attnmap::default_weights_path() + "'", &status);
  EXPECT_EQ(status, 0) << def;
  EXPECT_NE(def.find("10 names: T-shirt/top, Trouser, Pullover, Dress, Coat, Sandal, Shirt, Sneaker, Bag, Ankle boot"),
            std::string::npos)
      << def;
  // A patch size the config states (and the patch embedding agrees with) is reported as the config's.
  EXPECT_NE(def.find("patch_size      16                      config ("), std::string::npos) << def;
  EXPECT_NE(def.find("Ankle boot  config ("), std::string::npos) << def;  // where the labels came from
  // Its default view is reported as the config's, with the config's value (whatever model is bundled).
  const attnmap::HParams& dhp = attnmap::load_model(attnmap::default_weights_path()).hp;
  ASSERT_TRUE(dhp.default_layer) << "weights/default.json names no default layer";
  std::string layer_field = std::to_string(*dhp.default_layer);
  layer_field.resize(24, ' ');  // inspect's value column
  EXPECT_NE(def.find("default_layer   " + layer_field + "config ("), std::string::npos) << def;
}

TEST(Inspect, UnusableFileIsOneLineAndStatus2) {
  const fs::path bad = fs::temp_directory_path() / ("attnmap_bad_" + std::to_string(::getpid()) + ".safetensors");
  std::ofstream(bad, std::ios::binary) << std::string("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}", 16);
  int status = -1;
  const std::string out = run_stdout("inspect '" + bad.string() + "'", &status);
  fs::remove(bad);
  EXPECT_EQ(status, 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("attnmap: error: " + bad.string() + ":"), std::string::npos) << out;
}

TEST(Render, EveryLayoutRendersUnchangedInBothFormats) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_layout_render_" + std::to_string(::getpid()));
  for (const char* name : kLayouts)
    for (const char* file : {"weights.json", "weights.bf16.safetensors"}) {
      fs::remove_all(out);
      int status = -1;
      const std::string log = run_stdout("render '" + std::string(ATTNMAP_TEST_DIR) + "/images/basic' -q --save-raw -w '" +
                                             layout_dir(name) + file + "' -o '" + out.string() + "'",
                                         &status);
      EXPECT_EQ(status, 0) << name << "/" << file << ": " << log;
      size_t npys = 0;
      for (const auto& e : fs::directory_iterator(out)) {
        if (e.path().extension() != ".npy") continue;
        std::vector<int64_t> shape;
        read_npy(e.path().string(), &shape);
        const ViTWeights w = load_model(layout_dir(name) + file);
        EXPECT_EQ(shape, (std::vector<int64_t>{w.hp.grid_h, w.hp.grid_w})) << name << " " << e.path();
        ++npys;
      }
      EXPECT_GT(npys, 0u) << name;
    }
  fs::remove_all(out);
}

TEST(Render, PrefixTokenLayoutsWorkWithTheOtherViews) {
  // Registers with and without position rows, distillation token: --size resamples the patch positions only,
  // --rollout and --all-heads follow the new grid; the maps never include a prefix column.
  const fs::path out = fs::temp_directory_path() / ("attnmap_layout_views_" + std::to_string(::getpid()));
  struct V {
    const char* name;
    const char* args;
    std::vector<int64_t> shape;
  };
  const V cases[] = {{"dinov2_fb", "--size 56", {4, 4}},
                     {"timm_reg_noembed", "--size 70,28 --rollout", {2, 5}},
                     {"deit_distilled", "--all-heads", {3, 4, 4}},
                     {"timm_reg_full", "--size 48,32 --all-heads", {3, 4, 6}}};
  for (const V& c : cases) {
    fs::remove_all(out);
    int status = -1;
    const std::string log = run_stdout("render '" + std::string(ATTNMAP_TEST_DIR) + "/images/basic/rgba.png' -q --save-raw " +
                                           c.args + " -w '" + layout_dir(c.name) + "weights.f16.safetensors' -o '" +
                                           out.string() + "'",
                                       &status);
    ASSERT_EQ(status, 0) << c.name << " " << c.args << ": " << log;
    std::vector<int64_t> shape;
    const std::vector<float> m = read_npy((out / "rgba.npy").string(), &shape);
    EXPECT_EQ(shape, c.shape) << c.name << " " << c.args;
    for (float v : m) EXPECT_TRUE(v >= 0 && v <= 1) << c.name;
  }
  fs::remove_all(out);
}

}  // namespace

// Issue 20: load_model of an F32 safetensors file uses every weight in place from the file's mapping (the
// mapping lives with the ViTWeights, also after a copy), an F16 file's are converted; the maps are the same
// as from the JSON of the same weights, bit for bit.
TEST(Layouts, SafetensorsF32WeightsAreUsedInPlaceAndGiveTheJsonMaps) {
  const std::string dir = fixture("layouts/timm/");
  std::optional<ViTWeights> st = load_model(dir + "weights.safetensors");
  const ViTWeights js = load_model(dir + "weights.json");
  const ViTWeights f16 = load_model(dir + "weights.f16.safetensors");
  for (const BlockWeights& b : st->blocks)
    for (const Floats* t : {&b.norm1.weight, &b.qkv.weight, &b.qkv.bias, &b.proj.weight, &b.fc1.weight, &b.fc2.weight})
      EXPECT_TRUE(t->is_view());
  EXPECT_TRUE(st->patch_embed.weight.is_view());
  EXPECT_TRUE(st->pos_embed.is_view());
  EXPECT_FALSE(f16.blocks[0].qkv.weight.is_view());
  EXPECT_FALSE(js.blocks[0].qkv.weight.is_view());
  const ViTWeights copy = *st;  // shares the mapping
  st.reset();
  std::vector<int64_t> shape;
  const std::vector<float> img = read_npy(dir + "input.npy", &shape);
  ForwardOptions opt;
  opt.keep_full = true;
  opt.to_end = true;
  const ForwardResult a = vit_forward(copy, img.data(), opt), b = vit_forward(js, img.data(), opt);
  ASSERT_EQ(a.attn.size(), b.attn.size());
  EXPECT_EQ(a.attn, b.attn);
  EXPECT_EQ(a.tokens_out, b.tokens_out);
}
