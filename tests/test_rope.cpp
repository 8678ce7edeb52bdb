// Rotary position embeddings and SwiGLU (issue 29), beyond the family parity of test_families.cpp (which
// runs every case of tests/fixtures/families/, these included, at both sizes): what is refused and how it is
// said, rollout against numpy's rollout of the family's own attention, the rotary tables themselves, and
// what inspect says. Fixtures: tools/make_family_fixtures_rope.py (timm at a recorded commit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "checkpoint/weights.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "maps/attention_maps.hpp"
#include "model/pos_embed.hpp"
#include "model/rope.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "load_errors.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

std::string case_dir(const std::string& name) { return fixture("families/" + name) + "/"; }


// A copy of a case's weights alone (no config.json beside it) in a fresh folder.
fs::path lone_copy(const std::string& name, const std::string& file) {
  const fs::path dir = fs::temp_directory_path() / ("attnmap_rope_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(case_dir(name) + file, dir / file);
  return dir;
}

}  // namespace

// The model's settings: the rope, its layout and grid scaling, the SwiGLU forms and the sub-LayerNorm.
TEST(Rope, EachCaseReadsItsFamilysSettings) {
  const ViTWeights eva = load_model(case_dir("eva02_tiny") + "model.safetensors");
  EXPECT_EQ(eva.hp.layout, Layout::Eva);
  EXPECT_EQ(eva.hp.rope, Rope::EvaCat);
  EXPECT_FALSE(eva.hp.rope_half);
  EXPECT_EQ(eva.hp.rope_ref_h, 16);
  EXPECT_TRUE(eva.hp.swiglu);  // packed GluMlp
  EXPECT_EQ(eva.hp.pool, Pool::MeanPatches);
  EXPECT_NEAR(eva.hp.mean[0], 0.48145466f, 1e-7);  // eva02 pretrained_cfg: OPENAI_CLIP_MEAN
  const ViTWeights base = load_model(case_dir("eva02_base") + "model.pth");
  EXPECT_TRUE(base.hp.swiglu);
  EXPECT_TRUE(base.hp.has_mlp_norm);
  const ViTWeights gelu = load_model(case_dir("eva02_gelu") + "model.pth");
  EXPECT_EQ(gelu.hp.rope, Rope::EvaCat);
  EXPECT_FALSE(gelu.hp.swiglu);
  EXPECT_TRUE(gelu.hp.layer_scale);
  EXPECT_EQ(gelu.hp.pool, Pool::ClassToken);
  const ViTWeights d3 = load_model(case_dir("dinov3_small") + "model.safetensors");
  EXPECT_EQ(d3.hp.rope, Rope::Dinov3);
  EXPECT_TRUE(d3.hp.rope_half);
  EXPECT_FLOAT_EQ(d3.hp.eps, 1e-5f);
  EXPECT_EQ(d3.hp.num_registers, 4);
  EXPECT_TRUE(d3.pos_embed.empty());
  const ViTWeights packed = load_model(case_dir("timm_swiglu_packed") + "model.pth");
  EXPECT_EQ(packed.hp.layout, Layout::Timm);
  EXPECT_TRUE(packed.hp.swiglu);
  EXPECT_EQ(packed.hp.mlp_dim, 128);
}

// The tables: EVA-02's first row is the angle 0 (sin 0, cos 1); DINOv3's centre-symmetric coordinates give
// opposite angles for mirrored patches.
TEST(Rope, TablesFollowEachFamilysCoordinates) {
  HParams hp;
  hp.head_dim = 16;
  hp.rope = Rope::EvaCat;
  hp.rope_ref_h = hp.rope_ref_w = 16;
  RopeTables t = rope_tables(hp, 4, 4);
  for (int c = 0; c < 16; ++c) EXPECT_FLOAT_EQ(t.cos[static_cast<size_t>(c)], 1.0f);
  // patch (row 1, column 0): channel 0 (row band 0, frequency 1) has angle 1 * 16 / 4 = 4.
  EXPECT_NEAR(t.sin[4 * 16 + 0], std::sin(4.0), 1e-6);
  EXPECT_NEAR(t.sin[4 * 16 + 1], std::sin(4.0), 1e-6);  // interleaved: pairs share an angle
  hp.rope = Rope::Dinov3;
  hp.rope_half = true;
  hp.rope_temperature = 100.0f;
  t = rope_tables(hp, 4, 4);
  // rows 0 and 3 are at -0.75 and +0.75: channel 0 (row, period 1) angles -+ 2 pi 0.75.
  EXPECT_NEAR(t.sin[0], std::sin(-2 * M_PI * 0.75), 1e-6);
  EXPECT_NEAR(t.sin[12 * 16], std::sin(2 * M_PI * 0.75), 1e-6);
  EXPECT_NEAR(t.sin[0 + 8], t.sin[0], 1e-7);  // rotate-half: the table is tiled
}

// Rollout works from the recorded probabilities: against numpy's rollout of timm's own attention.
TEST(Rope, RolloutMatchesNumpyRolloutOfTheFamilysAttention) {
  for (const char* name : {"eva02_tiny", "dinov3_small", "timm_swiglu_packed"}) {
    const std::string dir = case_dir(name);
    const ViTWeights w = load_model(dir + "model.pth");
    std::vector<int64_t> shape;
    const std::vector<float> input = read_npy(dir + "input.npy", &shape);
    ForwardOptions fo;
    fo.keep_full = true;
    fo.to_end = true;
    const ForwardResult r = vit_forward(w, input.data(), fo);
    HeadSelect mean;
    const std::vector<float> got = attention_rollout(r, w.hp.depth - 1, mean);
    const std::vector<float> want = read_npy(dir + "rollout.npy", &shape);
    EXPECT_TRUE(all_close(got, want, 2e-5, std::string(name) + " rollout"));
  }
}

// Class-specific views are available through rope and SwiGLU since issue 44 (their numbers against timm's
// autograd: test_explain_families.cpp); inspect names the rope.
TEST(Rope, ClassSpecificViewsAreAvailableAndInspectNamesTheRope) {
  const ViTWeights eva = load_model(case_dir("eva02_gelu") + "model.pth");
  EXPECT_EQ(explanations_unavailable(eva.hp, true), "");
  const ViTWeights packed = load_model(case_dir("timm_swiglu_packed") + "model.pth");
  EXPECT_EQ(explanations_unavailable(packed.hp, true), "");
  const CliRun in = run_attnmap("inspect " + q(case_dir("eva02_tiny") + "model.safetensors"));
  EXPECT_EQ(in.status, 0) << in.err;
  EXPECT_NE(in.out.find("rotary:      EVA-02 RoPE on the patch tokens' queries and keys (interleaved layout"),
            std::string::npos) << in.out;
}

// Without the config naming the architecture, whether the model rotates (EVA-02, DINOv3) or not (EVA-01) is
// not in its tensors: asked for, never guessed.
TEST(Rope, EvaWithoutItsArchitectureIsAskedFor) {
  for (const char* name : {"eva02_gelu", "dinov3_small"}) {
    const std::string file = std::string(name) == "dinov3_small" ? "model.safetensors" : "model.pth";
    const fs::path dir = lone_copy(name, file);
    ModelOverrides three;
    three.num_heads = 3;
    const std::string e = load_error((dir / file).string(), three);
    EXPECT_NE(e.find("timm Eva tensors"), std::string::npos) << e;
    EXPECT_NE(e.find("is not in its tensors"), std::string::npos) << e;
    const CliRun r = run_attnmap("inspect --heads 3 " + q(dir / file));
    EXPECT_EQ(r.status, 2) << r.out;
    fs::remove_all(dir);
  }
  // Eva variants whose rotary positions attnmap does not compute are named.
  const fs::path dir = lone_copy("eva02_tiny", "model.pth");
  { std::ofstream(dir / "config.json") << R"({"architecture": "vit_base_patch16_rope_mixed_224", "model_args": {"num_heads": 3}})"; }
  const std::string e = load_error((dir / "model.pth").string());
  EXPECT_NE(e.find("is a timm Eva variant whose rotary positions attnmap does not compute"), std::string::npos) << e;
  { std::ofstream(dir / "config.json") << R"({"architecture": "eva02_tiny_patch14_224", "model_args": {"num_heads": 3, "rope_grid_indexing": "xy"}})"; }
  const std::string xy = load_error((dir / "model.pth").string());
  EXPECT_NE(xy.find("rope_grid_indexing = \"xy\": expected \"ij\""), std::string::npos) << xy;
  { std::ofstream(dir / "config.json") << R"({"architecture": "eva02_enormous_patch14_clip_224", "model_args": {"num_heads": 3}})"; }
  const std::string post = load_error((dir / "model.pth").string());
  EXPECT_NE(post.find("timm's post-norm Eva block (EvaBlockPostNorm"), std::string::npos) << post;
  fs::remove_all(dir);
  // facebookresearch DINOv3's own names (storage_tokens) are its layout, not DINOv2's (mask_token): a timm file
  // half renamed is refused by the tensor its rotary positions need (tests/test_dinov3_fb.cpp reads whole ones).
  RawWeights raw = load_weights_safetensors(case_dir("dinov3_small") + "model.safetensors");
  raw.tensors["storage_tokens"] = raw.tensors.at("reg_token");
  raw.tensors.erase("reg_token");
  raw.tensors["mask_token"] = raw.tensors.at("cls_token");
  const std::string fb = build_error(raw);
  EXPECT_NE(fb.find("missing tensor 'rope_embed.periods'"), std::string::npos) << fb;
}

// An architecture that is not the tensors' is refused, never trusted into a map without rotary positions
// (a fresh user's find, issue 29): an unknown name, a timm ViT name, a Perception Encoder (norm_pre: read as
// timm-clip otherwise), EVA-02 tensors named DINOv3 and the other way round. A hub id names the model.
TEST(Rope, AnArchitectureThatIsNotTheTensorsIsRefused) {
  const fs::path dir = lone_copy("eva02_tiny", "model.pth");
  const auto with_arch = [&](const std::string& arch) {
    { std::ofstream(dir / "config.json") << R"({"architecture": ")" + arch + R"(", "model_args": {"num_heads": 3}})"; }
    return load_error((dir / "model.pth").string());
  };
  for (const char* arch : {"my_custom_eva", "vit_small_patch16_224", "EVA02-Ti"}) {
    const std::string e = with_arch(arch);
    EXPECT_NE(e.find(std::string("the config names architecture ") + arch + ", but the tensors are a timm Eva's"),
              std::string::npos) << e;
  }
  const std::string pe = with_arch("vit_pe_core_tiny_patch16_384");
  EXPECT_NE(pe.find("architecture vit_pe_core_tiny_patch16_384 is a timm Eva variant whose rotary positions attnmap "
                    "does not compute"), std::string::npos) << pe;
  const std::string dv3 = with_arch("vit_small_patch16_dinov3.lvd1689m");
  EXPECT_NE(dv3.find("builds a model without an absolute position embedding (pos_embed), but the file has it"),
            std::string::npos) << dv3;
  for (const char* arch : {"hf-hub:timm/eva02_tiny_patch14_224", "timm/eva02_tiny_patch14_224.mim_in22k"}) {
    EXPECT_EQ(with_arch(arch), "") << arch;
    ModelOverrides none;
    EXPECT_EQ(load_model((dir / "model.pth").string(), none).hp.rope, Rope::EvaCat) << arch;
  }
  fs::remove_all(dir);
  // DINOv3 tensors (registers, no pos_embed) named as an EVA-02.
  const fs::path d3 = lone_copy("dinov3_small", "model.safetensors");
  { std::ofstream(d3 / "config.json") << R"({"architecture": "eva02_tiny_patch14_224", "model_args": {"img_size": 32, "num_heads": 3}})"; }
  const std::string e = load_error((d3 / "model.safetensors").string());
  EXPECT_NE(e.find("builds a model with an absolute position embedding (pos_embed), but the file has none"),
            std::string::npos) << e;
  const CliRun r = run_attnmap("inspect " + q(d3 / "model.safetensors"));
  EXPECT_EQ(r.status, 2) << r.out;
  fs::remove_all(d3);
}

// --size: the rotary tables follow the grid (prepare_rope), EVA-02's still scaled to ref_feat_shape.
TEST(Rope, SizeRecomputesTheTables) {
  ViTWeights w = load_model(case_dir("eva02_tiny") + "model.pth");
  prepare_weights(w, false);
  EXPECT_EQ(w.rope.grid_h, 3);
  resample_pos_embed(w, 56, 56);
  EXPECT_EQ(w.rope.grid_h, 4);
  EXPECT_EQ(w.rope.sin.size(), static_cast<size_t>(16 * 16));
  EXPECT_NE(w.hp.source["image_size"].find("rotary positions computed for the grid"), std::string::npos);
}

// The paths render takes: the last layer's class rows alone (no full matrices), a batch of two images, and
// every patch kept (token dropping gathers the rotary rows) give the full forward's numbers.
TEST(Rope, FastPathsBatchesAndKeptPatchesAgree) {
  for (const char* name : {"eva02_tiny", "dinov3_small"}) {
    const std::string dir = case_dir(name);
    ViTWeights w = load_model(dir + "model.pth");
    prepare_weights(w, false);
    std::vector<int64_t> shape;
    const std::vector<float> input = read_npy(dir + "input.npy", &shape);
    std::vector<float> other(input.rbegin(), input.rend());
    ForwardOptions full;
    full.keep_full = true;
    const ForwardResult a = vit_forward(w, input.data(), full);
    ForwardOptions rows;  // the drawn layer's class rows only (cls_row_attention)
    const ForwardResult b = vit_forward(w, input.data(), rows);
    EXPECT_TRUE(all_close(b.cls_attn, a.cls_attn, 1e-6, std::string(name) + " class rows"));
    const std::vector<ForwardResult> two = vit_forward(w, {other.data(), input.data()}, full);
    EXPECT_TRUE(all_close(two[1].attn, a.attn, 1e-6, std::string(name) + " batch of two"));
    ForwardOptions kept = full;
    kept.keep_patches = std::vector<int>();
    for (int i = 0; i < w.hp.grid_w * w.hp.grid_h; ++i) kept.keep_patches->push_back(i);
    const ForwardResult c = vit_forward(w, input.data(), kept);
    EXPECT_TRUE(all_close(c.attn, a.attn, 1e-6, std::string(name) + " every patch kept"));
  }
}

// timm Eva's final LayerNorm and default pool (a fresh user's finds): a mean pool with neither norm nor fc_norm
// is refused by the tensor timm builds (eva.py:644-651) unless model_args say the model has none; a DINOv3 whose
// config gives no global_pool is pooled as timm builds vit_*_dinov3* ('avg', eva.py:2762-3091: the family's
// logits), and a file whose final norms are not what the architecture's default builds is asked for its pool.
TEST(Rope, EvaFinalNormAndDefaultPoolFollowTimm) {
  const auto drop = [](RawWeights& raw, const std::string& prefix) {
    for (auto it = raw.tensors.begin(); it != raw.tensors.end();)
      it = it->first.rfind(prefix, 0) == 0 ? raw.tensors.erase(it) : std::next(it);
  };
  RawWeights eva = load_weights_safetensors(case_dir("eva02_tiny") + "model.safetensors");
  drop(eva, "fc_norm.");
  eva.config = {{"architecture", "eva02_tiny_patch14_224"}, {"num_heads", 3}, {"global_pool", "avg"}};
  const std::string e = build_error(eva);
  EXPECT_NE(e.find("missing tensor 'fc_norm.weight' (expected shape (48,); timm's Eva applies fc_norm"), std::string::npos) << e;
  EXPECT_NE(e.find("\"use_fc_norm\": false, \"use_post_transformer_norm\": false"), std::string::npos) << e;
  eva.config["use_fc_norm"] = false;
  eva.config["use_post_transformer_norm"] = false;
  EXPECT_EQ(build_error(eva), "");  // the config says the model has neither
  eva.config.erase("use_fc_norm");
  eva.config.erase("use_post_transformer_norm");
  eva.config.erase("global_pool");  // eva02_tiny's default: 'avg' with fc_norm, so the same refusal
  EXPECT_NE(build_error(eva).find("missing tensor 'fc_norm.weight'"), std::string::npos);
  RawWeights token = load_weights_safetensors(case_dir("eva02_tiny") + "model.safetensors");
  token.tensors["norm.weight"] = token.tensors.at("fc_norm.weight");  // as saved with global_pool='token'
  token.tensors["norm.bias"] = token.tensors.at("fc_norm.bias");
  drop(token, "fc_norm.");
  token.config = eva.config;
  const std::string asked = build_error(token);
  EXPECT_NE(asked.find("are not what timm builds for eva02_tiny_patch14_224 by default (fc_norm, no norm"), std::string::npos) << asked;
  ModelOverrides cls;
  cls.pool = Pool::ClassToken;
  EXPECT_EQ(build_model(token, cls).hp.pool, Pool::ClassToken);

  const std::string dir = case_dir("dinov3_small");
  RawWeights d3 = load_weights_safetensors(dir + "model.safetensors");
  d3.config = {{"architecture", "vit_small_patch16_dinov3"}, {"num_heads", 3}, {"image_size", 32}};
  ViTWeights w = build_model(d3);
  EXPECT_EQ(w.hp.pool, Pool::MeanPatches);
  EXPECT_NE(w.hp.source["pool"].find("timm's default for architecture vit_small_patch16_dinov3"), std::string::npos);
  prepare_weights(w, false);
  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(dir + "input.npy", &shape);
  ForwardOptions fo;
  fo.to_end = true;
  const std::vector<float> logits = read_npy(dir + "logits.npy", &shape);
  EXPECT_TRUE(all_close(vit_forward(w, input.data(), fo).logits, logits, 1e-4, "dinov3 without global_pool"));
  drop(d3, "norm.");
  const std::string d3e = build_error(d3);
  EXPECT_NE(d3e.find("missing tensor 'norm.weight' (expected shape (48,); timm's Eva applies norm"), std::string::npos) << d3e;
}
