// Hugging Face BEiT (issue 44): what the generic family test (test_families.cpp: every head of every block, the
// logits, and the 48 px run against transformers' own BeitForImageClassification) does not cover - a bare
// BeitModel and Data2VecVision's names, the relative_position_index buffer older transformers saved (checked
// against transformers' own index, or refused), the pooling config.json says, and Swin Transformers refused by
// name; dlogit/dA and the class-specific maps against autograd through transformers' model. Fixtures: tests/fixtures/families/hf_beit_* (tools/make_family_fixtures_hf_beit.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "checkpoint/rel_pos.hpp"
#include "checkpoint/weights.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "io/npy.hpp"
#include "maps/explain.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "load_errors.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

std::string case_dir(const std::string& c) { return fixture("families/" + c) + "/"; }

nlohmann::json case_meta(const std::string& c) {
  std::ifstream f(case_dir(c) + "meta.json");
  return nlohmann::json::parse(f);
}

// The case's model.safetensors with "beit." replaced by `prefix`; the classifier dropped when `keep_head` is false.
RawWeights renamed(const std::string& c, const std::string& prefix, bool keep_head) {
  const RawWeights raw = load_weights_safetensors(case_dir(c) + "model.safetensors");
  RawWeights out;
  out.path = raw.path;
  for (const auto& kv : raw.tensors) {
    const std::string& n = kv.first;
    if (n.rfind("classifier.", 0) == 0) {
      if (keep_head) out.tensors[n] = kv.second;
      continue;
    }
    EXPECT_EQ(n.rfind("beit.", 0), 0u) << n;
    out.tensors[prefix + n.substr(5)] = kv.second;
  }
  return out;
}

// The model's attention (every block) and logits against the case's attn.npy / logits.npy.
void expect_matches(const ViTWeights& w, const std::string& c, bool logits) {
  const nlohmann::json meta = case_meta(c);
  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(case_dir(c) + "input.npy", &shape);
  ForwardOptions fo;
  fo.keep_full = true;
  fo.to_end = true;
  const ForwardResult r = vit_forward(w, input.data(), fo);
  EXPECT_TRUE(all_close(r.attn, read_npy(case_dir(c) + "attn.npy", &shape), meta["tolerance"].get<double>(), c + " attention"));
  if (logits) {
    EXPECT_TRUE(all_close(r.logits, read_npy(case_dir(c) + "logits.npy", &shape), meta["logits_tolerance"].get<double>(), c + " logits"));
  }
}

double peak(const std::vector<float>& v) {
  double p = 0;
  for (float x : v) p = std::max(p, static_cast<double>(std::fabs(x)));
  return p;
}

std::string reason_of(const ViTWeights& w, const std::string& name) {
  for (const auto& t : w.tensors)
    if (t.name == name) return t.reason;
  return "(not listed)";
}

}  // namespace

// A bare BeitModel (no "beit." prefix, no classifier: attention views only) and Data2VecVisionForImageClassification
// (the same modules under "data2vec_vision.", checked identical by the generator) read as hf-beit with the same maps.
TEST(HfBeit, BareBeitModelAndData2VecVisionNames) {
  for (const char* c : {"hf_beit_relpos_mean", "hf_beit_shared_cls"}) {
    const ViTWeights bare = build_model(renamed(c, "", false));
    EXPECT_EQ(layout_name(bare.hp.layout), "hf-beit") << c;
    EXPECT_FALSE(bare.head.present()) << c;
    EXPECT_EQ(bare.hp.num_heads, 2) << c;  // from the table's shape: no config here
    expect_matches(bare, c, false);
    const nlohmann::json d2v = case_meta(c)["data2vec_vision"];
    ASSERT_TRUE(d2v["same_attention_and_logits"].get<bool>());
    const ViTWeights w = build_model(renamed(c, "data2vec_vision.", true));
    EXPECT_EQ(layout_name(w.hp.layout), "hf-beit") << c;
    expect_matches(w, c, true);
  }
}

// transformers before 4.31 saved each table's relative_position_index (int64): attnmap computes the index
// transformers gathers with (its generate_relative_position_index, in meta.json), checks a saved buffer against
// it and lists it as checked, and refuses one that differs, by name.
TEST(HfBeit, RelativePositionIndexBufferCheckedOrRefused) {
  const std::string c = "hf_beit_relpos_mean";
  std::vector<int64_t> hf_index;
  const nlohmann::json meta = case_meta(c);
  for (const auto& row : meta["relative_position_index_4x4"])
    for (const auto& v : row) hf_index.push_back(v.get<int64_t>());
  ASSERT_EQ(hf_index, beit_relative_position_index(4, 4));
  RawWeights raw = load_weights_safetensors(case_dir(c) + "model.safetensors");
  const std::string name = "beit.encoder.layer.1.attention.attention.relative_position_bias.relative_position_index";
  raw.skipped[name] = "I64";
  raw.ints[name] = hf_index;
  const ViTWeights w = build_model(raw);
  EXPECT_NE(reason_of(w, name).find("checked equal to the index attnmap computes for the 4x4 grid"), std::string::npos)
      << reason_of(w, name);
  raw.ints[name][20] += 1;
  const std::string e = build_error(raw);
  EXPECT_NE(e.find("tensor '" + name + "' differs from the relative position index of a 4x4 grid"), std::string::npos) << e;
}

// use_mean_pooling (config.json, or BeitConfig's default true when save_pretrained left it out) says what the
// classifier reads; a file whose norms contradict it is refused by the missing tensor's name; likewise the switches
// saying which tables, position embeddings and LayerScale BeitModel has.
TEST(HfBeit, ConfigSwitchesAgainstTheTensors) {
  const ViTWeights mean = load_model(case_dir("hf_beit_relpos_mean"));
  EXPECT_EQ(mean.hp.pool, Pool::MeanPatches);
  EXPECT_NE(mean.hp.source.at("pool").find("use_mean_pooling"), std::string::npos) << mean.hp.source.at("pool");
  EXPECT_TRUE(mean.fc_norm.present());
  const ViTWeights cls = load_model(case_dir("hf_beit_shared_cls"));
  EXPECT_EQ(cls.hp.pool, Pool::ClassToken);
  EXPECT_TRUE(cls.norm.present());
  EXPECT_FLOAT_EQ(cls.hp.eps, 1e-12f);
  const fs::path dir = fs::temp_directory_path() / ("attnmap_hfbeit_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(case_dir("hf_beit_relpos_mean") + "model.safetensors", dir / "model.safetensors");
  nlohmann::json cfg = nlohmann::json::parse(slurp(case_dir("hf_beit_relpos_mean") + "config.json"));
  cfg["use_mean_pooling"] = false;  // the file still has pooler.layernorm, not beit.layernorm
  { std::ofstream(dir / "config.json") << cfg.dump(); }
  const std::string e = load_error(dir.string());
  EXPECT_NE(e.find("missing tensor 'beit.layernorm.weight'"), std::string::npos) << e;
  cfg.erase("use_mean_pooling");  // save_pretrained's diff form: BeitConfig's default (true)
  { std::ofstream(dir / "config.json") << cfg.dump(); }
  EXPECT_EQ(load_model(dir.string()).hp.pool, Pool::MeanPatches);
  // The switches that say which tensors BeitModel has, against the file (absent: BeitConfig's defaults).
  const struct {
    const char* key;
    nlohmann::json value;
    const char* words;
  } lies[] = {
      {"use_relative_position_bias", false, "use_relative_position_bias = false (config.json"},
      {"use_shared_relative_position_bias", true, "but the file has no tensor 'beit.encoder.relative_position_bias.relative_position_bias_table'"},
      {"use_absolute_position_embeddings", true, "but the file has no tensor 'beit.embeddings.position_embeddings'"},
      {"layer_scale_init_value", 0.0, "but the file has tensor 'beit.encoder.layer.0.lambda_1': BeitModel built from this config would not use it"},
  };
  for (const auto& l : lies) {
    nlohmann::json c2 = cfg;
    c2[l.key] = l.value;
    { std::ofstream(dir / "config.json") << c2.dump(); }
    const std::string e2 = load_error(dir.string());
    EXPECT_NE(e2.find(l.words), std::string::npos) << l.key << ": " << e2;
  }
  cfg.erase("use_relative_position_bias");  // BeitConfig's default false: the file's per-layer tables refused
  { std::ofstream(dir / "config.json") << cfg.dump(); }
  EXPECT_NE(load_error(dir.string()).find("use_relative_position_bias not given: the config class's default"), std::string::npos);
  fs::remove_all(dir);
}

// Swin Transformers (timm's and Hugging Face's names): windowed attention without a global token, named as such
// instead of a missing 'pos_embed'; the CLI exits 2 with the same words.
TEST(HfBeit, SwinTransformersAreRefusedByName) {
  auto with = [](std::initializer_list<const char*> names) { return raw_with_names("swin.safetensors", names, 0.5f); };
  const char* const words = "a Swin Transformer";
  const char* const what = "windowed attention without a global token; not read";
  for (const RawWeights& raw :
       {with({"patch_embed.proj.weight", "layers.0.blocks.0.attn.relative_position_bias_table",
              "layers.0.blocks.0.norm1.weight", "layers.0.downsample.reduction.weight"}),
        with({"swin.embeddings.patch_embeddings.projection.weight",
              "swin.encoder.layers.0.blocks.0.layernorm_before.weight",
              "swin.encoder.layers.0.blocks.0.attention.self.relative_position_bias_table", "classifier.weight"}),
        with({"embeddings.patch_embeddings.projection.weight", "encoder.layers.0.blocks.0.layernorm_before.weight"})}) {
    const std::string e = build_error(raw);
    EXPECT_NE(e.find(words), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_EQ(e.find("pos_embed"), std::string::npos) << e;
  }
  const fs::path dir = fs::temp_directory_path() / ("attnmap_swin_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  { std::ofstream(dir / "swin.json") << R"({"patch_embed.proj.weight":[[[[1.0]]]],"layers.0.blocks.0.norm1.weight":[1.0,1.0]})"; }
  const CliRun r = run_attnmap("inspect " + q(dir / "swin.json"));
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// dlogit_c/dA of every layer against torch autograd through BeitForImageClassification (meta "explain"), and for
// the class-token case the chefer / gradcam / attn-grad maps against tools/fixture_explain.py's references.
TEST(HfBeit, AttentionGradientsAndMapsMatchAutograd) {
  for (const char* c : {"hf_beit_relpos_mean", "hf_beit_shared_cls"}) {
    const nlohmann::json meta = case_meta(c);
    const nlohmann::json& ex = meta["explain"];
    const ViTWeights w = load_model(case_dir(c));
    ASSERT_EQ(explanations_unavailable(w.hp, true), "") << c;
    std::vector<int64_t> shape;
    const std::vector<float> input = read_npy(case_dir(c) + "input.npy", &shape);
    const ForwardTape tape = vit_forward_tape(w, input.data());
    const int cls = ex["target_class"].get<int>();
    const size_t HTT = static_cast<size_t>(w.hp.num_heads) * w.hp.tokens() * w.hp.tokens();
    std::vector<float> got(static_cast<size_t>(w.hp.depth) * HTT);
    BackwardOptions bo;
    bo.on_attn_grad = [&](int l, const float*, const float* dA) {
      std::copy(dA, dA + HTT, got.begin() + static_cast<long>(static_cast<size_t>(l) * HTT));
    };
    vit_backward(w, tape, cls, bo);
    const std::vector<float> want = read_npy(case_dir(c) + "grad_attn.npy", &shape);
    const double tol = std::max(ex["tolerance"].get<double>(), 1e-4 * peak(want));
    EXPECT_TRUE(all_close(got, want, tol, std::string(c) + " dlogit/dA"));
    double worst = 0;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    std::printf("%s: dlogit/dA max |diff| %.2e (peak %.2f, tolerance %.1e)\n", c, worst, peak(want), tol);
    if (!ex.contains("maps")) continue;
    ExplainRequest req;
    req.method = ViewKind::Chefer;
    const std::vector<float> chefer = read_npy(case_dir(c) + "chefer.npy", &shape);
    EXPECT_TRUE(all_close(explain_map(w, tape, cls, req), chefer, 1e-4 * peak(chefer), std::string(c) + " chefer"));
    const std::vector<float> gradcam = read_npy(case_dir(c) + "gradcam.npy", &shape);
    const std::vector<float> attn_grad = read_npy(case_dir(c) + "attn_grad.npy", &shape);
    const size_t N = static_cast<size_t>(w.hp.grid_w) * w.hp.grid_h;
    for (int l = 0; l < w.hp.depth; ++l) {
      const auto at = [&](const std::vector<float>& v) {
        return std::vector<float>(v.begin() + static_cast<long>(l * N), v.begin() + static_cast<long>((l + 1) * N));
      };
      req.layer = l;
      req.method = ViewKind::GradCam;
      EXPECT_TRUE(all_close(explain_map(w, tape, cls, req), at(gradcam), 1e-4 * peak(gradcam), std::string(c) + " gradcam"));
      req.method = ViewKind::AttnGrad;
      EXPECT_TRUE(all_close(explain_map(w, tape, cls, req), at(attn_grad), 1e-4 * peak(attn_grad), std::string(c) + " attn-grad"));
    }
  }
}
