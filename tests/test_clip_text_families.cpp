// test_clip_text_families.cpp - CLIP's text tower (src/model/clip_text.hpp) in OpenCLIP's and Hugging Face's
// layouts, against each family's own code (tests/fixtures/clip_text/<case>/, made by
// tools/make_clip_text_family_fixtures.py; provenance in tests/fixtures/clip_text/README.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/weights_safetensors.hpp"
#include "io/npy.hpp"
#include "model/clip_text.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// One fixture case: its tensors, the family's config as the loader hands it over, its layout.
struct Case {
  std::string name, layout;
  TensorMap tensors;
  nlohmann::json config, meta;
};

const Case& fixture_case(const std::string& name) {
  static std::map<std::string, Case> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Case c;
  c.name = name;
  const std::string dir = fixture("clip_text/" + name + "/");
  c.tensors = load_weights_safetensors(dir + "model.safetensors").tensors;
  const nlohmann::json file = read_json(dir + "config.json");
  const bool oc = name.rfind("open_clip", 0) == 0;
  c.layout = oc ? "open_clip" : "hugging_face";
  c.config = oc ? file["model_cfg"] : file;  // API.md: open_clip's "model_cfg" object, HF's whole config.json
  c.meta = read_json(dir + "meta.json");
  return cache.emplace(name, std::move(c)).first->second;
}

ClipTextConfig config_of(const Case& c) { return clip_text_config(c.layout, c.config, c.tensors, c.name); }

std::vector<std::vector<int32_t>> ids_of(const Case& c) {
  std::vector<std::vector<int32_t>> ids;
  for (const auto& row : c.meta["cases"]) ids.push_back(row["ids"].get<std::vector<int32_t>>());
  return ids;
}

std::string build_error(const TensorMap& t, const ClipTextConfig& cfg) {
  return thrown_message([&] { build_clip_text(t, cfg, "m.safetensors"); });
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

const char* const kCases[] = {"open_clip_clip", "open_clip_custom", "hf_legacy_eos", "hf_eos"};

}  // namespace

// Each family's settings as its config says them (and CLIPTextCfg's / CLIPTextConfig's defaults).
TEST(ClipTextFamilies, ConfigsReadAsTheFamiliesDo) {
  const ClipTextConfig a = config_of(fixture_case("open_clip_clip"));
  EXPECT_EQ(a.prefix, "");
  EXPECT_EQ(a.heads, 2);
  EXPECT_EQ(a.pool, ClipTextPool::eos);
  EXPECT_EQ(a.eos_id, 5);
  EXPECT_EQ(a.act, Activation::Gelu);  // quick_gelu false: nn.GELU
  EXPECT_FLOAT_EQ(a.eps, 1e-6f);       // norm_kwargs
  EXPECT_TRUE(a.layer_scale && a.causal);
  EXPECT_EQ(a.mlp_hidden, 32);         // int(16 * 2.0)
  EXPECT_EQ(a.rules, ClipTextRules::open_clip);
  EXPECT_EQ(a.source.at("heads"), "open_clip_config.json model_cfg.text_cfg.heads");
  EXPECT_EQ(a.source.at("pad_id"), "open_clip CLIPTextCfg default pad_id");
  const ClipTextConfig b = config_of(fixture_case("open_clip_custom"));
  EXPECT_EQ(b.prefix, "text.");
  EXPECT_EQ(b.heads, 4);
  EXPECT_EQ(b.pool, ClipTextPool::last);
  EXPECT_FALSE(b.causal);
  EXPECT_EQ(b.act, Activation::GeluTanh);  // act_kwargs approximate tanh
  EXPECT_FALSE(b.layer_scale);
  // the whole open_clip_config.json works too
  const Case& cb = fixture_case("open_clip_custom");
  const nlohmann::json whole = read_json(fixture("clip_text/open_clip_custom/config.json"));
  EXPECT_EQ(clip_text_config("open_clip", whole, cb.tensors, "x").heads, 4);
  const ClipTextConfig c = config_of(fixture_case("hf_legacy_eos"));
  EXPECT_EQ(c.prefix, "text_model.");
  EXPECT_EQ(c.pool, ClipTextPool::argmax);  // eos_token_id 2: legacy argmax
  EXPECT_EQ(c.act, Activation::QuickGelu);
  EXPECT_FLOAT_EQ(c.eps, 1e-5f);            // CLIPTextConfig default
  EXPECT_EQ(c.source.at("eps"), "transformers CLIPTextConfig default layer_norm_eps");
  EXPECT_EQ(c.rules, ClipTextRules::hugging_face);
  const ClipTextConfig d = config_of(fixture_case("hf_eos"));
  EXPECT_EQ(d.pool, ClipTextPool::eos);
  EXPECT_EQ(d.eos_id, 60);
  EXPECT_EQ(d.act, Activation::Gelu);
  EXPECT_FLOAT_EQ(d.eps, 1e-6f);
  EXPECT_EQ(d.mlp_hidden, 48);
  EXPECT_EQ(d.embed_dim, 8);
  const ClipTextConfig o = clip_text_config("openai", nullptr, {}, "x");
  EXPECT_EQ(o.heads, 0);  // width // 64 at build time
  EXPECT_EQ(o.rules, ClipTextRules::openai);
}

// Features within the case's tolerance (<= 1e-5) of the family's float64 run, logits of its logits_per_image;
// every tensor of the text tower consumed.
TEST(ClipTextFamilies, FeaturesAndLogitsMatchEachFamily) {
  for (const char* name : kCases) {
    SCOPED_TRACE(name);
    const Case& c = fixture_case(name);
    const ClipTextWeights w = build_clip_text(c.tensors, config_of(c), name);
    std::set<std::string> all, read(w.tensors.begin(), w.tensors.end());
    for (const auto& kv : c.tensors) all.insert(kv.first);
    EXPECT_EQ(read, all);
    EXPECT_EQ(w.tensors.size(), all.size());
    EXPECT_EQ(w.hp.width, 16);
    EXPECT_EQ(w.hp.layers, 2);
    EXPECT_EQ(w.hp.context_length, 16);
    EXPECT_EQ(w.hp.embed_dim, 8);
    const std::vector<std::vector<int32_t>> ids = ids_of(c);
    std::vector<int64_t> shape;
    const std::vector<float> want = read_npy(fixture("clip_text/" + std::string(name) + "/features.npy"), &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{static_cast<int64_t>(ids.size()), 8}));
    std::vector<float> got = encode_text(w, ids);
    const double tol = c.meta["features"]["tolerance"].get<double>();
    EXPECT_LE(tol, 1e-5);
    const ::testing::AssertionResult r = all_close(got, want, tol, "text features");
    EXPECT_TRUE(r);
    std::printf("  %s: %s (tolerance %g)\n", name, r.message(), tol);
    // logits_per_image: scale * normalised image @ normalised text^T (+ open_clip's logit_bias)
    std::vector<int64_t> ishape, lshape;
    std::vector<float> image = read_npy(fixture("clip_text/" + std::string(name) + "/image_features.npy"), &ishape);
    const std::vector<float> lwant = read_npy(fixture("clip_text/" + std::string(name) + "/logits.npy"), &lshape);
    const int M = static_cast<int>(ishape[0]), N = static_cast<int>(ids.size());
    l2_normalize_rows(image.data(), M, 8);
    l2_normalize_rows(got.data(), N, 8);
    std::vector<float> logits = image_text_logits(image.data(), M, got.data(), N, 8, clip_logit_scale(w));
    for (float& v : logits) v += w.logit_bias;
    const double ltol = c.meta["logits"]["tolerance"].get<double>();
    EXPECT_LE(ltol, 1e-4);
    const ::testing::AssertionResult lr = all_close(logits, lwant, ltol, "logits_per_image");
    EXPECT_TRUE(lr);
    std::printf("  %s: %s (tolerance %g)\n", name, lr.message(), ltol);
  }
  EXPECT_FLOAT_EQ(build_clip_text(fixture_case("open_clip_clip").tensors, config_of(fixture_case("open_clip_clip")), "x")
                      .logit_bias, -2.0f);
}

// Padding: the tower pads where the family's padding counts (no causal mask, pool last) and needs none where it
// cannot (causal mask, the pooled row is the end-of-text one).
TEST(ClipTextFamilies, PaddingAsTheFamilyPads) {
  for (const char* name : {"open_clip_custom", "hf_eos"}) {
    SCOPED_TRACE(name);
    const Case& c = fixture_case(name);
    const ClipTextConfig cfg = config_of(c);
    const ClipTextWeights w = build_clip_text(c.tensors, cfg, name);
    std::vector<std::vector<int32_t>> ids = ids_of(c), cut = ids;
    const int32_t pad = name == std::string("hf_eos") ? 1 : 0;
    for (auto& seq : cut)
      while (seq.size() > 2 && seq.back() == pad) seq.pop_back();
    EXPECT_TRUE(all_close(encode_text(w, cut), encode_text(w, ids), 1e-6, "unpadded vs padded"));
  }
  // hf_eos: a text without id 60 is refused (HF would read position 0 silently)
  const Case& c = fixture_case("hf_eos");
  const ClipTextWeights w = build_clip_text(c.tensors, config_of(c), "x");
  EXPECT_EQ(thrown_message([&] { encode_text(w, {{62, 7, 63}}); }),
            "token sequence 0 has no end-of-text id 60: the text tower reads a text's feature at that token");
}

// Every tower's missing or misshaped tensor is named with the shape expected and found; a shape that
// contradicts the config names both; a tensor the family's tower does not have is refused.
TEST(ClipTextFamilies, RefusesMissingOrMisshapedTensors) {
  const Case& a = fixture_case("open_clip_clip");
  const ClipTextConfig ca = config_of(a);
  TensorMap t = a.tensors;
  t.erase("transformer.resblocks.1.ls_2.gamma");
  EXPECT_EQ(build_error(t, ca), "m.safetensors: missing tensor 'transformer.resblocks.1.ls_2.gamma' (expected shape (16,))");
  t = a.tensors;
  t.erase("text_projection.bias");
  EXPECT_EQ(build_error(t, ca), "m.safetensors: missing tensor 'text_projection.bias' (expected shape (8,))");
  t = a.tensors;
  t["transformer.resblocks.0.mlp.c_fc.weight"].shape = {64, 16};
  EXPECT_EQ(build_error(t, ca), "m.safetensors: tensor 'transformer.resblocks.0.mlp.c_fc.weight' has shape (64, 16), "
                                "expected (32, 16)");
  {  // OpenAI's layout (no config) refuses what only open_clip's config explains: a SigLIP-style logit_bias
    TensorMap o = load_weights_safetensors(fixture("clip_text/model.safetensors")).tensors;
    o["logit_bias"] = a.tensors.at("logit_bias");
    EXPECT_EQ(thrown_message([&] { build_clip_text(o, "m"); }),
              "m: tensor 'logit_bias' () is not part of OpenAI CLIP's text tower (clip/model.py); this layout cannot use it");
  }
  t = a.tensors;
  t.erase("logit_bias");  // optional: a CLIP without it
  EXPECT_FLOAT_EQ(build_clip_text(t, ca, "x").logit_bias, 0.0f);
  // open_clip's attn_mask buffer, when a file holds it: the causal mask is read; anything else is refused
  std::vector<float> mask(16 * 16, 0.0f);
  for (int i = 0; i < 16; ++i)
    for (int j = i + 1; j < 16; ++j) mask[i * 16 + j] = -std::numeric_limits<float>::infinity();
  t = a.tensors;
  t["attn_mask"] = Tensor{{16, 16}, mask};
  EXPECT_EQ(build_clip_text(t, ca, "x").tensors.back(), "attn_mask");
  t["attn_mask"].data = std::vector<float>(16 * 16, 0.0f);
  EXPECT_EQ(build_error(t, ca), "m.safetensors: tensor 'attn_mask' is not the causal mask the config implies at (0, 1)");
  ClipTextConfig no_ls = ca;
  no_ls.layer_scale = false;  // gammas in the file, none in the config: refused, not dropped
  EXPECT_TRUE(has(build_error(a.tensors, no_ls), "tensor 'transformer.resblocks.0.ls_1.gamma' (16,) is not part of "
                                                "OpenCLIP's text tower"));
  ClipTextConfig wide = ca;
  wide.width = 32;
  EXPECT_EQ(build_error(a.tensors, wide), "m.safetensors: tensor 'ln_final.weight' gives width 16, but "
                                          "open_clip_config.json model_cfg.text_cfg.width says 32");
  ClipTextConfig heads = ca;
  heads.heads = 3;
  EXPECT_EQ(build_error(a.tensors, heads), "m.safetensors: text width 16 (ln_final.weight) is not divisible by the 3 "
                                           "heads of open_clip_config.json model_cfg.text_cfg.heads");

  const Case& b = fixture_case("open_clip_custom");
  const ClipTextConfig cb = config_of(b);
  t = b.tensors;
  t.erase("text.positional_embedding");
  EXPECT_EQ(build_error(t, cb), "m.safetensors: missing tensor 'text.positional_embedding' (expected shape (C, 16))");
  t = b.tensors;
  t["logit_scale"].shape = {2};
  EXPECT_EQ(build_error(t, cb), "m.safetensors: tensor 'logit_scale' has shape (2,), expected ()");
  t = b.tensors;
  t["text.attn_mask"] = Tensor{{16, 16}, mask};  // no_causal_mask: a causal mask in the file contradicts it
  EXPECT_EQ(build_error(t, cb), "m.safetensors: tensor 'text.attn_mask' is not the causal mask the config implies "
                                "(no_causal_mask: none) at (0, 0)");
  t = b.tensors;
  t["text.cls_emb"] = t.at("text.ln_final.bias");  // CoCa's class token: not this tower
  EXPECT_TRUE(has(build_error(t, cb), "tensor 'text.cls_emb' (16,) is not part of OpenCLIP's text tower"));

  const Case& d = fixture_case("hf_eos");
  const ClipTextConfig cd = config_of(d);
  t = d.tensors;
  t.erase("text_model.encoder.layers.1.self_attn.k_proj.bias");
  EXPECT_EQ(build_error(t, cd),
            "m.safetensors: missing tensor 'text_model.encoder.layers.1.self_attn.k_proj.bias' (expected shape (16,))");
  t = d.tensors;
  t["text_projection.weight"].shape = {16, 8};
  EXPECT_EQ(build_error(t, cd), "m.safetensors: tensor 'text_projection.weight' has shape (16, 8), expected (E, 16)");
  t = d.tensors;
  t["text_model.embeddings.position_embedding.weight"].shape = {77, 16};
  EXPECT_EQ(build_error(t, cd), "m.safetensors: tensor 'text_model.embeddings.position_embedding.weight' gives "
                                "context_length 77, but config.json text_config.max_position_embeddings says 16");
  t = d.tensors;
  t.erase("text_model.final_layer_norm.bias");
  EXPECT_EQ(build_error(t, cd), "m.safetensors: missing tensor 'text_model.final_layer_norm.bias' (expected shape (16,))");
}

// Settings the tower cannot follow are refused by name, never guessed.
TEST(ClipTextFamilies, RefusesConfigsItCannotFollow) {
  const Case& a = fixture_case("open_clip_clip");
  auto oc_error = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json cfg = a.config;
    cfg["text_cfg"][key] = value;
    return thrown_message([&] { clip_text_config("open_clip", cfg, a.tensors, "m"); });
  };
  EXPECT_EQ(oc_error("pool_type", "none"), "m: open_clip_config.json model_cfg.text_cfg.pool_type = \"none\": no pooled "
                                           "text feature (none) or an unknown pooling; this text tower cannot follow it");
  EXPECT_TRUE(has(oc_error("embed_cls", true), "text_cfg.embed_cls = true: CoCa's appended class token"));
  EXPECT_TRUE(has(oc_error("hf_model_name", "xlm-roberta-base"), "a Hugging Face text encoder"));
  EXPECT_TRUE(has(oc_error("scaled_cosine_attn", true), "CustomResidualAttentionBlock"));
  EXPECT_TRUE(has(oc_error("norm_kwargs", {{"elementwise_affine", false}}), "LayerNorm settings other than eps"));
  EXPECT_TRUE(has(oc_error("heads", "two"), "text_cfg.heads is \"two\", not a value of the expected type"));
  const Case& d = fixture_case("hf_eos");
  nlohmann::json cfg = d.config;
  cfg["text_config"]["hidden_act"] = "relu";
  EXPECT_EQ(thrown_message([&] { clip_text_config("hugging_face", cfg, d.tensors, "m"); }),
            "m: config.json text_config.hidden_act = \"relu\": an activation this text tower does not compute "
            "(quick_gelu, gelu, gelu_new, gelu_pytorch_tanh)");
  EXPECT_TRUE(has(thrown_message([&] { clip_text_config("hugging_face", nullptr, d.tensors, "m"); }),
                  "m: a Hugging Face CLIP text tower needs config.json's text_config"));
  EXPECT_EQ(thrown_message([&] { clip_text_config("siglip", nullptr, d.tensors, "m"); }),
            "m: unknown text tower layout 'siglip' (expected openai, open_clip, hugging_face or hugging_face_siglip)");
}
