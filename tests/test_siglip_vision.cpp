// SigLIP, vision side (issue 43 point 6): Hugging Face SiglipModel / SiglipVisionModel names and an OpenCLIP
// SigLIP (a timm vit_*_siglip_* trunk under visual.trunk.*) read as the timm-siglip layout, the text tower handed
// over for the texts, and the image embedding (the attention-pool head's output, no projection) and the sigmoid
// scores' logits against the families' own code: tests/fixtures/siglip/ (tools/make_siglip_fixtures.py:
// transformers v4.48.3 SiglipModel, open_clip CustomTextCLIP with timm; random float16 weights, 64x64 image).
// The text features come from the fixture's expected.json, so the text tower is not under test here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "checkpoint/weights.hpp"
#include "engine/text/zero_shot.hpp"
#include "io/image_io.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "siglip_fixture.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

struct Family {
  const char* name;
  const char* weights;      // under tests/fixtures/siglip/
  const char* text_layout;  // ViTWeights::text_layout
  const char* act;          // the MLP activation the family's config gives
  size_t text_tensors;      // text tower + logit_scale + logit_bias
  const char* token_embedding;
};
const Family kFamilies[] = {
    {"hf", "hf", "hugging_face_siglip", "gelu-tanh", 40, "text_model.embeddings.token_embedding.weight"},
    {"open_clip", "open_clip/open_clip_pytorch_model.bin", "open_clip", "gelu", 32, "text.token_embedding.weight"}};
void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

std::string dir() { return fixture("siglip/"); }

nlohmann::json expected(const Family& f) {
  std::ifstream in(dir() + (std::string(f.name) == "hf" ? "hf" : "open_clip") + "/expected.json");
  return nlohmann::json::parse(in);
}

std::vector<float> values(const nlohmann::json& e, const char* key) {
  std::vector<float> v;
  for (const auto& x : e[key]["values"]) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

// The families' input: SiglipImageProcessor's pixel_values for image.png (64 x 64: no resize), which are
// float32(byte * (1/255) in double), then (v - 0.5) / 0.5 in float32 (the fixture script checks this bit for bit).
std::vector<float> input_chw() {
  const Image img = load_image(dir() + "image.png", LoadOptions{});
  EXPECT_EQ(img.width, 64);
  EXPECT_EQ(img.height, 64);
  std::vector<float> x(3 * 64 * 64);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 64 * 64; ++i) {
      const float v = static_cast<float>(img.rgb[static_cast<size_t>(i) * 3 + c] * (1.0 / 255));
      x[static_cast<size_t>(c) * 64 * 64 + i] = (v - 0.5f) / 0.5f;
    }
  return x;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float f : v) m = std::max(m, static_cast<double>(std::fabs(f)));
  return m;
}

class SiglipVision : public ::testing::TestWithParam<Family> {};

// Both files load whole: the image tower as timm-siglip (no class token, the MAP head), every text tensor listed
// with its reason, or handed over with keep_text; the image embedding equals the family's to 1e-5 of its peak.
TEST_P(SiglipVision, LoadsAndMatchesTheFamilysImageEmbedding) {
  const Family& f = GetParam();
  ViTWeights w = load_model(dir() + f.weights);
  EXPECT_EQ(w.hp.layout, Layout::TimmSiglip);
  EXPECT_FALSE(w.hp.class_token);
  EXPECT_EQ(w.hp.pool, Pool::Map);
  EXPECT_EQ(w.hp.num_heads, 4);
  EXPECT_EQ(w.hp.depth, 2);
  EXPECT_EQ(w.hp.image_w, 64);
  EXPECT_EQ(activation_name(w.hp.act), f.act);
  EXPECT_EQ(w.hp.mean, (std::array<float, 3>{0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(w.hp.std, (std::array<float, 3>{0.5f, 0.5f, 0.5f}));
  EXPECT_FALSE(w.proj.present());
  EXPECT_FALSE(w.has_classes());
  EXPECT_TRUE(w.text_tensors.empty());
  EXPECT_EQ(w.text_layout, f.text_layout);
  size_t text = 0;
  for (const auto& u : w.tensors)
    if (!u.reason.empty()) {
      EXPECT_EQ(u.reason, "SigLIP text tower (the image's attention maps never read it)") << u.name;
      ++text;
    }
  EXPECT_EQ(text, f.text_tensors);

  ModelOverrides keep;
  keep.keep_text = true;
  const ViTWeights k = load_model(dir() + f.weights, keep);
  EXPECT_EQ(k.text_layout, f.text_layout);
  EXPECT_EQ(k.text_tensors.size(), f.text_tensors);
  EXPECT_EQ(k.text_tensors.at(f.token_embedding).shape, (std::vector<int64_t>{1000, 64}));
  EXPECT_TRUE(k.text_tensors.count("logit_scale") && k.text_tensors.count("logit_bias"));
  for (const auto& u : k.tensors) EXPECT_EQ(u.reason, "") << u.name << " is read with keep_text";
  ASSERT_TRUE(k.text_config.is_object());
  if (std::string(f.name) == "hf") {
    EXPECT_EQ(k.text_config["text_config"]["vocab_size"], 1000);  // config.json whole
  } else {
    EXPECT_EQ(k.text_config["text_cfg"]["pool_type"], "last");  // open_clip_config.json model_cfg
  }

  prepare_weights(w, false);
  const std::vector<float> x = input_chw();
  ForwardOptions fo;
  fo.to_end = true;
  const ForwardResult r = vit_forward(w, x.data(), fo);
  const nlohmann::json e = expected(f);
  const std::vector<float> want = values(e, "image_embeds");
  EXPECT_TRUE(all_close(r.pooled, want, 1e-5 * max_abs(want), "image_embeds"));
  EXPECT_EQ(r.pool_attn.size(), 4u * 16u);
  // The test tells the activations apart: the other GELU moves the embedding by far more than the tolerance.
  ModelOverrides other;
  other.act = std::string(f.act) == "gelu" ? Activation::GeluTanh : Activation::Gelu;
  ViTWeights o = load_model(dir() + f.weights, other);
  prepare_weights(o, false);
  const std::vector<float> moved = vit_forward(o, x.data(), fo).pooled;
  double d = 0;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, std::fabs(static_cast<double>(moved[i]) - want[i]));
  EXPECT_GT(d, 10 * 1e-5 * max_abs(want)) << "the other GELU";
}

// With the family's text embeddings as the texts: logits = exp(logit_scale) cos + logit_bias equal the family's
// logits_per_image, the sigmoid its probabilities; encode_images gives the normalised embedding; the
// class-specific views' forward (through the attention-pool head, issue 44) gives the same logits.
TEST_P(SiglipVision, ZeroShotLogitsWithBias) {
  const Family& f = GetParam();
  ModelOverrides keep;
  keep.keep_text = true;
  ViTWeights w = load_model(dir() + f.weights, keep);
  const float logit_scale = w.text_tensors.at("logit_scale").data[0];  // ln 10 as float16 stores it
  const float logit_bias = w.text_tensors.at("logit_bias").data[0];
  EXPECT_NEAR(logit_scale, std::log(10.0), 1e-3);
  EXPECT_EQ(logit_bias, -2.0f);
  const nlohmann::json e = expected(f);
  const std::vector<float> t = values(e, "text_embeds");
  std::vector<float> tn(t.size());
  for (size_t j = 0; j < 5; ++j) {
    double n = 0;
    for (size_t c = 0; c < 64; ++c) n += static_cast<double>(t[j * 64 + c]) * t[j * 64 + c];
    for (size_t c = 0; c < 64; ++c) tn[j * 64 + c] = static_cast<float>(t[j * 64 + c] / std::sqrt(n));
  }
  w.zero_shot.text = Floats(tn);
  w.zero_shot.classes = 5;
  w.zero_shot.scale = static_cast<float>(std::exp(static_cast<double>(logit_scale)));
  w.zero_shot.bias = logit_bias;
  w.zero_shot.rule = ScoreRule::sigmoid;
  w.zero_shot.labels = {"a", "b", "c", "d", "e"};
  prepare_weights(w, false);
  const std::vector<float> x = input_chw();
  ForwardOptions fo;
  fo.to_end = true;
  const ForwardResult r = vit_forward(w, x.data(), fo);
  const std::vector<float> logits = values(e, "logits_per_image"), probs = values(e, "probabilities");
  ASSERT_EQ(r.logits.size(), 5u);
  for (size_t j = 0; j < 5; ++j) {
    EXPECT_NEAR(r.logits[j], logits[j], 1e-4) << j;
    EXPECT_NEAR(1.0 / (1.0 + std::exp(-r.logits[j])), probs[j], 1e-5) << j;
  }
  const std::vector<float> emb = encode_images(w, {x.data()});
  const std::vector<float> img = values(e, "image_embeds");
  double n = 0;
  for (float v : img) n += static_cast<double>(v) * v;
  std::vector<float> want(img.size());
  for (size_t c = 0; c < img.size(); ++c) want[c] = static_cast<float>(img[c] / std::sqrt(n));
  EXPECT_TRUE(all_close(emb, want, 1e-5, "encode_images"));
  // the class-specific views' forward (issue 44: through the attention-pool head) gives the same logits
  const ForwardTape tape = vit_forward_tape(w, x.data());
  ASSERT_EQ(tape.logits.size(), 5u);
  for (size_t j = 0; j < 5; ++j) EXPECT_NEAR(tape.logits[j], r.logits[j], 1e-5) << j;
}

INSTANTIATE_TEST_SUITE_P(Families, SiglipVision, ::testing::ValuesIn(kFamilies),
                         [](const auto& i) { return std::string(i.param.name); });

// A Hugging Face SiglipVisionModel folder (vision_model.* only, a SiglipVisionConfig config.json): the same
// tower as the whole model's, with nothing left to hand over.
TEST(SiglipVisionOnly, HuggingFaceVisionModelFolderReads) {
  const fs::path tmp = fs::temp_directory_path() / ("attnmap_siglip_vision_" + std::to_string(::getpid()));
  write_siglip_vision_only(dir() + "hf", tmp);  // SiglipVisionModel.save_pretrained's folder
  const ViTWeights w = load_model(tmp.string());
  EXPECT_EQ(w.hp.layout, Layout::TimmSiglip);
  EXPECT_EQ(w.hp.num_heads, 4);
  EXPECT_EQ(activation_name(w.hp.act), "gelu-tanh");
  EXPECT_EQ(w.hp.source.at("act"),
            "default (Hugging Face SiglipVisionConfig hidden_act gelu_pytorch_tanh: no config says otherwise)");
  EXPECT_TRUE(w.text_layout.empty());
  for (const auto& u : w.tensors) EXPECT_EQ(u.reason, "") << u.name;
  ViTWeights p = w;
  prepare_weights(p, false);
  const std::vector<float> x = input_chw();
  ForwardOptions fo;
  fo.to_end = true;
  const std::vector<float> want = values(expected(kFamilies[0]), "image_embeds");
  EXPECT_TRUE(all_close(vit_forward(p, x.data(), fo).pooled, want, 1e-5 * max_abs(want), "image_embeds"));
  fs::remove_all(tmp);
}

// The command line on both whole-model files: inspect names the text tower; render draws the attention maps and
// the probe's attention of the random-weight towers; with texts, chefer renders (issue 44).
TEST(SiglipVisionOnly, InspectAndRenderBothFiles) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_siglip_render_" + std::to_string(::getpid()));
  const CliRun in = run_attnmap("inspect " + q(dir() + "hf"));
  EXPECT_EQ(in.status, 0) << in.err;
  EXPECT_NE(in.out.find("layout:      timm-siglip"), std::string::npos) << in.out;
  EXPECT_NE(in.out.find("activation      gelu-tanh               default (Hugging Face SiglipVisionConfig"), std::string::npos)
      << in.out;
  EXPECT_NE(in.out.find("SigLIP text tower (the image's attention maps never read it)"), std::string::npos) << in.out;
  for (const char* f : {"hf", "open_clip/open_clip_pytorch_model.bin"}) {
    const CliRun r = run_attnmap("render " + q(dir() + "image.png") + " -w " + q(dir() + f) + " -o " + q(out) +
                                 " --views L-1/mean,probe -q");
    EXPECT_EQ(r.status, 0) << r.err;
    size_t pngs = 0;
    for (const auto& e : fs::directory_iterator(out)) pngs += e.path().extension() == ".png";
    EXPECT_GE(pngs, 1u);
    fs::remove_all(out);
    if (std::string(f) == "hf") continue;  // (hf's texts' maps: test_explain_pools.cpp, against its autograd)
    // with texts, chefer draws a text's logit through the attention-pool probe (issue 44)
    const CliRun ex = run_attnmap("render " + q(dir() + "image.png") + " -w " + q(dir() + f) + " -o " + q(out) +
                                  " --text 'a dog' --text 'a cat' --vocab " + q(dir() + "spiece.model") +
                                  " --explain chefer -q");
    EXPECT_EQ(ex.status, 0) << ex.err;
    fs::remove_all(out);
  }
}

}  // namespace
