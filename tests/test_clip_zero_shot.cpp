// CLIP zero-shot classes and text-conditioned explanation maps, vision side (issue 43): the texts' features as
// a classifier head of the vision model (ViTWeights::zero_shot), against OpenAI CLIP's own code run by
// tools/make_clip_explain_fixtures.py (tests/fixtures/clip_zero_shot/: a tiny random CLIP, three texts,
// logits_per_image and its softmax, and per text the chefer / gradcam / attn-grad maps by autograd through
// CLIP.forward; hf/: the same by transformers' CLIPModel). The text features come from the fixture, so the text
// tower is not under test here. chefer_last.npy: Chefer's CLIP notebook's default (the last block only), the view
// chefer@L-1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "maps/explain.hpp"
#include "maps/views.hpp"
#include "model/preprocess.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

// The family, its fixture folder, the text layout the loader names and the family's tensor names: the visual
// projection, the token embedding (with the text width), the text projection and a text block's attention.
struct Family {
  const char* name;
  const char* folder;
  const char* text_layout;
  const char* proj = "visual.proj";
  const char* token_embedding = "token_embedding.weight";
  int64_t text_width = 64;
  const char* text_projection = "text_projection";
  const char* text_block = "transformer.resblocks.0.attn.in_proj_weight";
};
const Family kFamilies[] = {
    {"openai", "clip_zero_shot/", "openai"},
    {"open_clip", "clip_zero_shot/open_clip/", "open_clip"},
    // transformers CLIPModel.save_pretrained (config.json beside model.safetensors)
    {"hf", "clip_zero_shot/hf/", "hugging_face", "visual_projection.weight", "text_model.embeddings.token_embedding.weight", 32,
     "text_projection.weight", "text_model.encoder.layers.0.self_attn.q_proj.weight"}};
void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

std::string kDir;  // the current family's folder (set by the fixture)

std::vector<float> npy(const std::string& name, std::vector<int64_t>* shape = nullptr) {
  std::vector<int64_t> s;
  std::vector<float> v = read_npy(kDir + name, &s);
  if (shape) *shape = s;
  return v;
}

nlohmann::json meta() {
  std::ifstream f(kDir + "meta.json");
  return nlohmann::json::parse(f);
}

class ClipZeroShot : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override { kDir = std::string(ATTNMAP_TEST_DIR) + "/fixtures/" + GetParam().folder; }
};

// The fixture's CLIP with its texts as the zero-shot head (features from the family's encode_text).
ViTWeights model_with_texts() {
  ViTWeights w = load_model(kDir + "model.safetensors");
  std::vector<int64_t> s;
  const std::vector<float> t = npy("text_features.npy", &s);
  w.zero_shot.text = Floats(t);
  w.zero_shot.classes = static_cast<int>(s[0]);
  const nlohmann::json m = meta();  // kept: a range-for over meta()["texts"] would iterate a destroyed temporary
  w.zero_shot.scale = static_cast<float>(m["scale"].get<double>());
  for (const auto& x : m["texts"]) w.zero_shot.labels.push_back(x.get<std::string>());
  prepare_weights(w, true);
  return w;
}

float peak(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace

TEST_P(ClipZeroShot, ProjIsReadAndTheTextTowerHandedOverOnlyOnRequest) {
  const ViTWeights w = load_model(kDir + "model.safetensors");
  ASSERT_TRUE(w.proj.present());
  EXPECT_EQ(w.proj.out, 16);
  EXPECT_EQ(w.proj.in, 32);
  EXPECT_FALSE(w.has_classes());
  EXPECT_EQ(w.num_classes(), 0);
  EXPECT_TRUE(w.text_tensors.empty());
  EXPECT_EQ(w.text_layout, GetParam().text_layout);
  int text_unread = 0;
  for (const auto& u : w.tensors) {
    if (u.name == GetParam().proj) {
      EXPECT_EQ(u.reason, "") << u.name << " is read";
    }
    if (u.reason.rfind("CLIP text tower", 0) == 0) ++text_unread;
  }
  EXPECT_GT(text_unread, 5);
  // proj (E, D) is visual.proj (D, E) transposed: proj(ln_post(class token)) is CLIP.encode_image.
  ViTWeights p = w;
  prepare_weights(p, false);
  ForwardOptions fo;
  fo.to_end = true;
  const std::vector<float> x = npy("input.npy");
  const ForwardResult r = vit_forward(p, x.data(), fo);
  const std::vector<float> want = npy("image_features.npy");
  ASSERT_EQ(want.size(), 16u);
  for (int e = 0; e < 16; ++e) {
    double acc = 0;
    for (int d = 0; d < 32; ++d) acc += static_cast<double>(p.proj.weight[static_cast<size_t>(e) * 32 + d]) * r.tokens_out[static_cast<size_t>(d)];
    EXPECT_NEAR(acc, want[static_cast<size_t>(e)], 1e-4) << e;
  }
  EXPECT_TRUE(r.logits.empty()) << "a CLIP without texts has no classes";
  // A CLIP without texts: the class-specific views say how to get classes, naming the setting.
  EXPECT_EQ(explanations_unavailable(w.hp, w.has_classes()),
            "a CLIP image tower has no classifier head: give texts ({setting:text}) to explain their image-text logits");

  ModelOverrides ov;
  ov.keep_text = true;
  const ViTWeights k = load_model(kDir + "model.safetensors", ov);
  EXPECT_EQ(k.text_layout, GetParam().text_layout);
  EXPECT_EQ(k.text_config.is_null(), std::string(GetParam().name) == "openai") << k.text_config.dump();
  ASSERT_TRUE(k.text_tensors.count(GetParam().token_embedding));
  EXPECT_EQ(k.text_tensors.at(GetParam().token_embedding).shape, (std::vector<int64_t>{534, GetParam().text_width}));
  EXPECT_TRUE(k.text_tensors.count(GetParam().text_projection));
  EXPECT_TRUE(k.text_tensors.count("logit_scale"));
  EXPECT_TRUE(k.text_tensors.count(GetParam().text_block));
  for (const auto& u : k.tensors) EXPECT_EQ(u.reason, "") << u.name << " is read with keep_text";
}

INSTANTIATE_TEST_SUITE_P(All, ClipZeroShot, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<Family>& i) { return std::string(i.param.name); });

TEST_P(ClipZeroShot, ProbabilitiesAndMapsMatchClipForwardAutograd) {
  const ViTWeights w = model_with_texts();
  EXPECT_TRUE(w.has_classes());
  EXPECT_EQ(w.num_classes(), 3);
  EXPECT_EQ(explanations_unavailable(w.hp, w.has_classes()), "");
  // The PNG's preprocessing is CLIP's (32x32: resize and crop are identities) to float32 rounding.
  const std::vector<float> x = npy("input.npy");
  const ModelInput in = preprocess(load_image(std::string(ATTNMAP_TEST_DIR) + "/fixtures/clip_zero_shot/input.png", LoadOptions{}), 32, 32, ResizeMode::Squash,
                                   w.hp.mean.data(), w.hp.std.data());
  ASSERT_EQ(in.chw.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(in.chw[i], x[i], 1e-5) << i;

  ForwardOptions fo;
  fo.to_end = true;
  const ForwardResult r = vit_forward(w, x.data(), fo);
  const std::vector<float> logits = npy("logits.npy"), probs = npy("probs.npy");
  ASSERT_EQ(r.logits.size(), 3u);
  double z = 0, mx = *std::max_element(r.logits.begin(), r.logits.end());
  for (float l : r.logits) z += std::exp(l - mx);
  double worst_p = 0;
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_NEAR(r.logits[j], logits[j], 1e-4) << j;
    EXPECT_NEAR(std::exp(r.logits[j] - mx) / z, probs[j], 1e-4) << j;
    worst_p = std::max(worst_p, std::fabs(std::exp(r.logits[j] - mx) / z - probs[j]));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", worst_p);
  RecordProperty("max_prob_diff", buf);
  const ForwardTape tape = vit_forward_tape(w, x.data());
  for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(tape.logits[j], logits[j], 1e-4) << j;

  const std::vector<float> chefer = npy("chefer.npy"), gradcam = npy("gradcam.npy"), attn_grad = npy("attn_grad.npy");
  const int L = 2, N = 16;
  double worst = 0;
  auto check = [&](const std::vector<float>& got, const float* want, const char* what, int j, int l) {
    const std::vector<float> ref(want, want + N);
    const float tol = 1e-4f * peak(ref);
    ASSERT_GT(peak(ref), 1e-3f) << what << " text " << j << " block " << l << ": a flat reference";
    ASSERT_EQ(got.size(), static_cast<size_t>(N));
    for (int i = 0; i < N; ++i) {
      EXPECT_NEAR(got[static_cast<size_t>(i)], ref[static_cast<size_t>(i)], tol) << what << " text " << j << " block " << l << " patch " << i;
      worst = std::max(worst, std::fabs(got[static_cast<size_t>(i)] - ref[static_cast<size_t>(i)]) / static_cast<double>(peak(ref)));
    }
  };
  for (int j = 0; j < 3; ++j) {
    check(explain_map(w, tape, j, {ViewKind::Chefer, 0}), &chefer[static_cast<size_t>(j) * N], "chefer", j, -1);
    for (int l = 0; l < L; ++l) {
      const size_t at = (static_cast<size_t>(j) * L + l) * N;
      check(explain_map(w, tape, j, {ViewKind::GradCam, l}), &gradcam[at], "gradcam", j, l);
      check(explain_map(w, tape, j, {ViewKind::AttnGrad, l}), &attn_grad[at], "attn-grad", j, l);
    }
  }
  std::snprintf(buf, sizeof buf, "%.3g", worst);
  RecordProperty("max_map_diff_of_peak", buf);
  EXPECT_THROW(vit_backward(w, tape, 3, {}), Error);
}

// Chefer's CLIP notebook (Transformer-MM-Explainability CLIP_explainability.ipynb, interpret() at its default
// start_layer = -1 = the last block only) recomputed through openai/CLIP's own CLIP.forward
// (chefer_last.npy): the view chefer@L-1, through the view engine and through render, <= 1e-4 of its peak.
TEST(ClipZeroShotChefer, LastBlockViewEqualsChefersClipNotebook) {
  kDir = std::string(ATTNMAP_TEST_DIR) + "/fixtures/clip_zero_shot/";
  const ViTWeights w = model_with_texts();
  const std::vector<float> x = npy("input.npy");
  const ForwardTape tape = vit_forward_tape(w, x.data());
  std::vector<int64_t> shape;
  const std::vector<float> want = npy("chefer_last.npy", &shape), all = npy("chefer.npy");
  ASSERT_EQ(shape, (std::vector<int64_t>{3, 4, 4}));
  const std::vector<ResolvedView> v = resolve_views(parse_views("chefer@L-1,chefer,attn-grad@L-1"), w.hp, true, ViewSettings{});
  EXPECT_EQ(v[0].name, "chefer@L1");
  const ViewPass pass{&w, nullptr, &tape};
  const size_t N = 16;
  double worst = 0;
  for (int j = 0; j < 3; ++j) {
    const std::vector<float> ref(want.begin() + j * static_cast<long>(N), want.begin() + (j + 1) * static_cast<long>(N));
    const std::vector<float> got = view_map(pass, v[0], j);
    ASSERT_EQ(got.size(), N);
    ASSERT_GT(peak(ref), 1e-3f) << j;
    for (size_t i = 0; i < N; ++i) {
      EXPECT_NEAR(got[i], ref[i], 1e-4f * peak(ref)) << "text " << j << " patch " << i;
      worst = std::max(worst, std::fabs(got[i] - ref[i]) / static_cast<double>(peak(ref)));
    }
    // R = I + Abar_last: its class row past the class token is attn-grad at the last block, exactly.
    EXPECT_EQ(got, view_map(pass, v[2], j)) << j;
    EXPECT_EQ(got, explain_map(w, tape, j, ExplainRequest{ViewKind::Chefer, 0, 1})) << j;
    // "chefer" stays every block (the generic method), another map.
    const std::vector<float> every = view_map(pass, v[1], j);
    EXPECT_EQ(every, explain_map(w, tape, j, ExplainRequest{ViewKind::Chefer, 0, 0}));
    float apart = 0;
    for (size_t i = 0; i < N; ++i) {
      EXPECT_NEAR(every[i], all[static_cast<size_t>(j) * N + i], 1e-4f * peak(every)) << j << " " << i;
      apart = std::max(apart, std::fabs(every[i] - got[i]));
    }
    EXPECT_GT(apart, 0.1f * peak(every)) << j;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", worst);
  RecordProperty("max_map_diff_of_peak", buf);
  EXPECT_THROW(explain_map(w, tape, 0, ExplainRequest{ViewKind::Chefer, 0, 2}), Error);

  // render: --views and --explain take it; files, terminal and map label name it.
  const std::filesystem::path out = std::filesystem::temp_directory_path() / ("attnmap_chefer_last_" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  const std::string common = q(kDir + "input.png") + " --save-raw -w " + q(kDir + "model.safetensors") + " --vocab " + q(kDir) +
                             " --text 'a dog' --text 'a cat' --text 'a photo of a bird' -o " + q(out);
  const CliRun r = run_attnmap("render " + common + " --views chefer,chefer@L-1 --class top3");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("chefer@L1, text: a dog "), std::string::npos) << r.out;
  const char* files[] = {"input.chefer-L1.class-a_dog.npy", "input.chefer-L1.class-a_cat.npy", "input.chefer-L1.class-a_photo_of_a_bird.npy"};
  for (int j = 0; j < 3; ++j) {
    const std::vector<float> got = read_npy((out / files[j]).string(), nullptr);
    const std::vector<float> ref(want.begin() + j * static_cast<long>(N), want.begin() + (j + 1) * static_cast<long>(N));
    ASSERT_EQ(got.size(), N) << files[j];
    for (size_t i = 0; i < N; ++i) EXPECT_NEAR(got[i], ref[i], 1e-4f * peak(ref)) << files[j] << " " << i;
  }
  const CliRun e = run_attnmap("render " + common + " -q --explain chefer@L-1 --class 'a cat'");
  ASSERT_EQ(e.status, 0) << e.err;
  const std::vector<float> cat = read_npy((out / "input.npy").string(), nullptr);
  ASSERT_EQ(cat.size(), N);
  for (size_t i = 0; i < N; ++i) EXPECT_NEAR(cat[i], want[N + i], 1e-4f * peak(cat)) << i;
  std::filesystem::remove_all(out);
}

// chefer@L<k>: Chefer's rules from block k to the last; names canonical, words say which blocks.
TEST(ClipZeroShotChefer, FromBlockNamesLabelsAndRefusals) {
  HParams hp;
  hp.depth = 12;
  hp.num_heads = 2;
  hp.residual_mlp = true;
  const auto v = resolve_views(parse_views("chefer,chefer@L-1,chefer@L-2,chefer@L9"), hp, true, ViewSettings{});
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].name, "chefer");
  EXPECT_EQ(v[0].spec.layer, 0);
  EXPECT_EQ(view_label(v[0]), "Chefer relevance");
  EXPECT_EQ(v[1].name, "chefer@L11");
  EXPECT_EQ(v[1].tag, "chefer-L11");
  EXPECT_EQ(v[1].units, "Chefer relevance");
  EXPECT_TRUE(v[1].class_specific);
  EXPECT_EQ(view_label(v[1]), "Chefer relevance (last block)");
  EXPECT_EQ(view_label(v[1], 1), "Chefer relevance (last block)");
  EXPECT_EQ(v[2].name, "chefer@L10");
  EXPECT_EQ(view_label(v[2]), "Chefer relevance, blocks 10\u201311");
  EXPECT_EQ(view_label(v[3]), "Chefer relevance, blocks 9\u201311");
  EXPECT_EQ(view_label(v[3], 1), "Chefer relevance, blocks 10\u201312");
  auto error_of = [&](const std::string& list) {
    try {
      resolve_views(parse_views(list), hp, true, ViewSettings{});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("chefer,chefer@L0").find("'chefer@L0' names the view chefer a second time"), std::string::npos);
  EXPECT_NE(error_of("chefer@Llast,chefer@L11").find("names the view chefer@L11 a second time"), std::string::npos);
  EXPECT_NE(error_of("chefer@L12").find("'chefer@L12'"), std::string::npos);
  EXPECT_NE(error_of("chefer@3").find("after '@' comes L<layer>"), std::string::npos);
  EXPECT_NE(view_grammar().find("chefer[@L<first block>]"), std::string::npos);
  // render's --explain: chefer@L<k> is the method; gradcam's and attn-grad's blocks are run settings there.
  EXPECT_EQ(parse_class_specific_view("chefer@L-1").written, "chefer@L-1");
  EXPECT_EQ(parse_class_specific_view("chefer@L-1").layer, -1);
  try {
    parse_class_specific_view("gradcam@L1");
    ADD_FAILURE() << "gradcam@L1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the block of gradcam is {setting:gradcam_layer}"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_class_specific_view("chefer@"), Error);
}
