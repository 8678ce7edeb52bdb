// test_clip_text.cpp - CLIP's text tower (src/model/clip_text.hpp) against OpenAI CLIP's own encode_text and
// forward (tests/fixtures/clip_text/, tools/make_clip_text_fixtures.py; provenance in its README.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/weights_pth.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "io/npy.hpp"
#include "model/clip_text.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

const std::string kDir = "clip_text/";

nlohmann::json meta() {
  std::ifstream f(fixture(kDir + "meta.json"));
  return nlohmann::json::parse(f);
}

const TensorMap& text_tensors() {
  static const RawWeights raw = load_weights_safetensors(fixture(kDir + "model.safetensors"));
  return raw.tensors;
}

const ClipTextWeights& weights() {
  static const ClipTextWeights w = build_clip_text(text_tensors(), "model.safetensors");
  return w;
}

std::vector<std::vector<int32_t>> fixture_ids() {
  std::vector<std::vector<int32_t>> ids;
  const nlohmann::json m = meta();
  for (const auto& c : m["cases"]) ids.push_back(c["ids"].get<std::vector<int32_t>>());
  return ids;
}

std::string build_error(const TensorMap& t) {
  return thrown_message([&] { build_clip_text(t, "clip.pth"); });
}

std::string encode_error(const std::vector<int32_t>& seq) {
  return thrown_message([&] { encode_text(weights(), {seq}); });
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

}  // namespace

// Hyper-parameters as clip/model.py build_model derives them, every tensor consumed.
TEST(ClipText, BuildsFromOpenAINames) {
  const ClipTextWeights& w = weights();
  const nlohmann::json cfg = meta()["config"];
  EXPECT_EQ(w.hp.context_length, 77);
  EXPECT_EQ(w.hp.vocab_size, cfg["vocab_size"].get<int>());
  EXPECT_EQ(w.hp.width, 128);
  EXPECT_EQ(w.hp.heads, 2);  // width // 64
  EXPECT_EQ(w.hp.layers, 2);
  EXPECT_EQ(w.hp.embed_dim, 32);
  EXPECT_EQ(w.hp.eot_id(), meta()["eot"].get<int>());
  EXPECT_FLOAT_EQ(w.logit_scale, 4.0f);
  EXPECT_FLOAT_EQ(clip_logit_scale(w), std::exp(4.0f));
  std::set<std::string> all, read(w.tensors.begin(), w.tensors.end());
  for (const auto& kv : text_tensors()) all.insert(kv.first);
  EXPECT_EQ(read, all);
  EXPECT_EQ(w.tensors.size(), all.size());  // each once
}

// CLIP.encode_text in float64 on the same weights: within 1e-5 absolute (features up to 2.7 in size).
TEST(ClipText, FeaturesMatchOpenAIEncodeText) {
  const nlohmann::json m = meta();
  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy(fixture(kDir + "features.npy"), &shape);
  const std::vector<std::vector<int32_t>> ids = fixture_ids();
  ASSERT_EQ(shape, (std::vector<int64_t>{static_cast<int64_t>(ids.size()), 32}));
  for (const auto& seq : ids) ASSERT_EQ(seq.size(), 77u);
  const std::vector<float> got = encode_text(weights(), ids);
  const double tol = m["features"]["tolerance"].get<double>();
  EXPECT_LE(tol, 1e-5);
  const ::testing::AssertionResult r = all_close(got, want, tol, "text features");
  EXPECT_TRUE(r);
  std::printf("  %s (tolerance %g)\n", r.message(), tol);
  // the same texts without their padding (ids up to <|endoftext|>): the same rows are computed, bit for bit
  std::vector<std::vector<int32_t>> cut = ids;
  for (auto& seq : cut) seq.resize(std::max_element(seq.begin(), seq.end()) - seq.begin() + 1);
  EXPECT_EQ(encode_text(weights(), cut), got);
  // one text alone gives its row of the batch (to rounding where the GEMM's row blocks change it)
  EXPECT_TRUE(all_close(encode_text(weights(), {ids[4]}), std::vector<float>(got.begin() + 4 * 32, got.begin() + 5 * 32),
                        tol, "text 4 alone"));
  EXPECT_TRUE(encode_text(weights(), {}).empty());
}

// CLIP.forward's logits_per_image for a random image-feature batch: within 1e-4 absolute (logits up to 21).
TEST(ClipText, LogitsMatchOpenAIForward) {
  const nlohmann::json m = meta();
  std::vector<int64_t> ishape, lshape;
  std::vector<float> image = read_npy(fixture(kDir + "image_features.npy"), &ishape);
  const std::vector<float> want = read_npy(fixture(kDir + "logits.npy"), &lshape);
  const int M = static_cast<int>(ishape[0]), E = static_cast<int>(ishape[1]);
  std::vector<float> text = encode_text(weights(), fixture_ids());
  const int N = static_cast<int>(text.size()) / E;
  ASSERT_EQ(lshape, (std::vector<int64_t>{M, N}));
  l2_normalize_rows(image.data(), M, E);
  l2_normalize_rows(text.data(), N, E);
  for (int n = 0; n < N; ++n) {
    double ss = 0;
    for (int i = 0; i < E; ++i) ss += static_cast<double>(text[n * E + i]) * text[n * E + i];
    EXPECT_NEAR(ss, 1.0, 1e-6);
  }
  const std::vector<float> got = image_text_logits(image.data(), M, text.data(), N, E, clip_logit_scale(weights()));
  const double tol = m["logits"]["tolerance"].get<double>();
  EXPECT_LE(tol, 1e-4);
  const ::testing::AssertionResult r = all_close(got, want, tol, "logits_per_image");
  EXPECT_TRUE(r);
  std::printf("  %s (tolerance %g)\n", r.message(), tol);
  std::vector<float> zero(E, 0.0f);
  EXPECT_TRUE(has(thrown_message([&] { l2_normalize_rows(zero.data(), 1, E); }), "feature row 0 has L2 norm 0"));
}

// A missing or misshaped tensor is named, with the shape expected and found.
TEST(ClipText, RefusesMissingOrMisshapedTensors) {
  TensorMap t = text_tensors();
  t.erase("transformer.resblocks.1.mlp.c_fc.bias");
  EXPECT_EQ(build_error(t), "clip.pth: missing tensor 'transformer.resblocks.1.mlp.c_fc.bias' (expected shape (512,))");
  t = text_tensors();
  t["transformer.resblocks.0.attn.in_proj_weight"].shape = {384, 64};
  EXPECT_EQ(build_error(t),
            "clip.pth: tensor 'transformer.resblocks.0.attn.in_proj_weight' has shape (384, 64), expected (384, 128)");
  t = text_tensors();
  t["text_projection"].shape = {32, 128};
  EXPECT_EQ(build_error(t), "clip.pth: tensor 'text_projection' has shape (32, 128), expected (128, E)");
  t = text_tensors();
  t["logit_scale"].shape = {1};
  EXPECT_EQ(build_error(t), "clip.pth: tensor 'logit_scale' has shape (1,), expected ()");
  t = text_tensors();
  t.erase("positional_embedding");
  EXPECT_EQ(build_error(t), "clip.pth: missing tensor 'positional_embedding' (expected shape (C, 128))");
  t = text_tensors();  // a block missing below the highest
  for (const char* s : {"ln_1.weight", "ln_1.bias"}) t["transformer.resblocks.3." + std::string(s)] = t.at("ln_final.weight");
  EXPECT_EQ(build_error(t), "clip.pth: missing tensor 'transformer.resblocks.2.ln_1.weight' (expected shape (128,))");
  t = text_tensors();  // a tensor OpenAI's text tower does not have (OpenCLIP's LayerScale) would be dropped
  t["transformer.resblocks.0.ls_1.gamma"] = t.at("ln_final.weight");
  EXPECT_TRUE(has(build_error(t), "'transformer.resblocks.0.ls_1.gamma' (128,) is not part of OpenAI CLIP's text tower"));
  t = text_tensors();
  t["ln_final.weight"].shape = {32};
  EXPECT_TRUE(has(build_error(t), "text width 32 (ln_final.weight) gives width // 64 = 0 heads"));
}

// A sequence without <|endoftext|>, longer than the context, empty, or with an id outside the vocabulary.
TEST(ClipText, RefusesBadTokenSequences) {
  std::vector<int32_t> seq(77, 0);
  seq[0] = 62;
  EXPECT_EQ(encode_error(seq), "token sequence 0 has no <|endoftext|> (id 63): CLIP reads a text's feature at that token");
  seq.assign(78, 0);
  seq[77] = 63;
  EXPECT_EQ(encode_error(seq), "token sequence 0 has 78 ids, more than the text tower's context of 77");
  EXPECT_EQ(encode_error({}), "token sequence 0 is empty: expected <|startoftext|> ... <|endoftext|> ids");
  EXPECT_EQ(encode_error({62, 64, 63}), "token sequence 0: id 64 at position 1 is outside the vocabulary (0..63)");
  EXPECT_EQ(encode_error({62, -1, 63}), "token sequence 0: id -1 at position 1 is outside the vocabulary (0..63)");
  EXPECT_TRUE(has(thrown_message([&] { encode_text(weights(), {{62, 63}, {62, 5}}); }), "token sequence 1 has no"));
}

// The names of a real OpenAI state dict (families/openai_clip_full: clip.model.CLIP's state_dict plus the int
// entries OpenAI's files hold): the text tower is read, visual.* left alone.
TEST(ClipText, ReadsOpenAIStateDictNames) {
  const RawWeights raw = load_weights_pth(fixture("families/openai_clip_full/model_openai.pth"), "");
  const ClipTextWeights w = build_clip_text(raw.tensors, raw.path);
  EXPECT_EQ(w.hp.context_length, 8);
  EXPECT_EQ(w.hp.vocab_size, 64);
  EXPECT_EQ(w.hp.width, 64);
  EXPECT_EQ(w.hp.heads, 1);
  EXPECT_EQ(w.hp.layers, 1);
  EXPECT_EQ(w.hp.embed_dim, 16);
  size_t text = 0;
  for (const auto& kv : raw.tensors) text += kv.first.rfind("visual.", 0) != 0;
  EXPECT_EQ(w.tensors.size(), text);
  const std::vector<float> f = encode_text(w, {{62, 7, 63, 0, 0, 0, 0, 0}});
  ASSERT_EQ(f.size(), 16u);
  for (float v : f) EXPECT_TRUE(std::isfinite(v));
}
