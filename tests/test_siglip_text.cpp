// test_siglip_text.cpp - SigLIP's text tower and its zero-shot classes (issue 43 item 6; docs/text.md "SigLIP"):
// Hugging Face SiglipModel (layout hugging_face_siglip) and open_clip's SigLIP (layout open_clip with SigLIP's
// tokenizer) against each family's own code (tests/fixtures/siglip/, made by tools/make_siglip_fixtures.py:
// transformers v4.48.3, open_clip 89fb801; expected.json holds text_embeds, logits_per_image and the sigmoid
// probabilities of texts.json's five texts, run in float64 on the stored weights), and what is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"
#include "engine/text/zero_shot.hpp"
#include "io/hash.hpp"
#include "model/classify.hpp"
#include "model/clip_text.hpp"
#include "siglip_fixture.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

nlohmann::json json_file(const std::string& path) { return nlohmann::json::parse(slurp(path)); }

std::vector<float> values(const nlohmann::json& e) {
  std::vector<float> v;
  for (const auto& x : e["values"]) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

// One family's fixture: the folder, the weights as -w names them, and its expected outputs.
struct Family {
  std::string name, weights, dir, layout;
};
const Family kHf{"hf", "siglip/hf", "siglip/hf", "hugging_face_siglip"};
const Family kOpenClip{"open_clip", "siglip/open_clip/open_clip_pytorch_model.bin", "siglip/open_clip", "open_clip"};

// The model with its text tower kept (as render --text loads it).
ViTWeights load_with_text(const Family& f) {
  ModelOverrides ov;
  ov.keep_text = true;
  return load_model(fixture(f.weights), ov);
}

std::vector<std::vector<int32_t>> fixture_ids() {
  return json_file(fixture("siglip/texts.json"))["ids"].get<std::vector<std::vector<int32_t>>>();
}

std::vector<float> normalised(std::vector<float> v, int rows) {
  l2_normalize_rows(v.data(), rows, static_cast<int>(v.size()) / rows);
  return v;
}

}  // namespace

// For both families: the tower's settings as the family builds them, its text embeddings from the fixture's token
// ids equal the family's text_embeds (1e-5), scale * cos + bias its logits_per_image and the sigmoid its
// probabilities (1e-4); then the same through the engine (SigLIP's tokenizer on the texts, spiece.model from the
// HF folder or --vocab), which hands bias and rule to the zero-shot head.
TEST(SiglipText, TowersAndZeroShotEqualTheFamilies) {
  for (const Family& f : {kHf, kOpenClip}) {
    SCOPED_TRACE(f.name);
    const nlohmann::json want = json_file(fixture(f.dir + "/expected.json"));
    ViTWeights model = load_with_text(f);
    ASSERT_EQ(model.text_layout, f.layout);
    const TextTower tower = build_text_tower(model);
    const ClipTextWeights& w = tower.weights;
    EXPECT_TRUE(tower.siglip);
    EXPECT_EQ(tower.siglip_rules, f.name == "hf" ? SiglipTextRules::hugging_face : SiglipTextRules::open_clip);
    EXPECT_FALSE(w.hp.causal);
    EXPECT_EQ(w.hp.pool, ClipTextPool::last);
    EXPECT_EQ(w.hp.pad_id, 1);  // </s>, as SiglipTokenizer / HFTokenizer pad
    EXPECT_FLOAT_EQ(w.hp.eps, 1e-6f);
    // HF: SiglipTextConfig's default gelu_pytorch_tanh; open_clip: quick_gelu absent, no act_kwargs: exact nn.GELU
    EXPECT_EQ(w.hp.act, f.name == "hf" ? Activation::GeluTanh : Activation::Gelu);
    EXPECT_EQ(w.hp.context_length, 16);
    EXPECT_EQ(w.hp.heads, 4);
    EXPECT_EQ(w.hp.embed_dim, 64);
    EXPECT_EQ(w.rule, ScoreRule::sigmoid);
    const std::vector<std::vector<int32_t>> ids = fixture_ids();
    const std::vector<float> text = encode_text(w, ids);
    EXPECT_TRUE(all_close(text, values(want["text_embeds"]), 1e-5, "text_embeds"));
    // ids without their padding are padded with </s> by the tower, as the tokenizer pads: the same features
    std::vector<std::vector<int32_t>> short_ids = ids;
    for (auto& s : short_ids) s.resize(static_cast<size_t>(std::find(s.begin(), s.end(), 1) - s.begin()) + 1);
    EXPECT_LT(short_ids[0].size(), 16u);
    EXPECT_TRUE(all_close(encode_text(w, short_ids), text, 0.0, "unpadded ids"));
    // logits_per_image = logit_scale.exp() * cos + logit_bias; probabilities = torch.sigmoid(logits)
    const std::vector<float> image = normalised(values(want["image_embeds"]), 1);
    const std::vector<float> t = normalised(text, 5);
    std::vector<float> logits = image_text_logits(image.data(), 1, t.data(), 5, 64, clip_logit_scale(w));
    for (float& l : logits) l += w.logit_bias;
    EXPECT_TRUE(all_close(logits, values(want["logits_per_image"]), 1e-4, "logits_per_image"));
    const std::vector<double> p = class_probabilities(logits, w.rule);
    EXPECT_TRUE(all_close(std::vector<float>(p.begin(), p.end()), values(want["probabilities"]), 1e-4, "probabilities"));
    // the engine: the texts through SigLIP's tokenizer (HF: the folder's spiece.model; open_clip: --vocab)
    ModelSpec spec;
    spec.text.texts = json_file(fixture("siglip/texts.json"))["texts"].get<std::vector<std::string>>();
    if (f.name == "open_clip") spec.text.vocab = fixture("siglip/spiece.model");
    const TextFeatures tf = encode_texts(tower, spec, true);
    EXPECT_TRUE(all_close(tf.text, t, 1e-5, "engine text features"));
    EXPECT_FLOAT_EQ(tf.bias, w.logit_bias);
    EXPECT_NEAR(tf.bias, -2.0f, 1e-3f);
    EXPECT_EQ(tf.rule, ScoreRule::sigmoid);
    EXPECT_EQ(tf.record["vocab"]["file"], "spiece.model");
    EXPECT_EQ(tf.record["vocab"]["sha256"], sha256_file(fixture(f.name == "hf" ? "siglip/hf/spiece.model" : "siglip/spiece.model")));
    EXPECT_EQ(tf.record["rules"], f.name == "hf" ? "hugging_face" : "open_clip");
    EXPECT_EQ(tf.record["tokenizer"], "siglip");
    set_text_classes(model, tf);
    EXPECT_EQ(model.zero_shot.rule, ScoreRule::sigmoid);
    EXPECT_FLOAT_EQ(model.zero_shot.bias, w.logit_bias);
    EXPECT_TRUE(model.notices.empty());  // no "100% by construction" note: that is the softmax's
  }
}

// The configs and tokenizers a SigLIP tower does not follow are refused by name: SigLIP 2 (its Gemma tokenizer,
// model_type siglip2), another Hugging Face tokenizer, other tokenizer_kwargs; a SiglipModel without logit_bias.
TEST(SiglipText, RefusesSiglip2AndOtherTokenizers) {
  const ViTWeights m = load_with_text(kOpenClip);
  const auto oc = [&](const std::string& name, const nlohmann::json& kwargs) {
    nlohmann::json c = m.text_config;
    c["text_cfg"]["hf_tokenizer_name"] = name;
    c["text_cfg"]["tokenizer_kwargs"] = kwargs;
    return thrown_message([&] { clip_text_config("open_clip", c, m.text_tensors, "m"); });
  };
  const nlohmann::json canon = {{"clean", "canonicalize"}};
  EXPECT_EQ(oc("timm/ViT-B-16-SigLIP", canon), "");
  EXPECT_TRUE(has(oc("timm/ViT-B-16-SigLIP2-256", canon), "SigLIP 2's Gemma tokenizer")) << oc("timm/ViT-B-16-SigLIP2-256", canon);
  EXPECT_TRUE(has(oc("google/gemma-2b", canon), "SigLIP 2's Gemma tokenizer"));
  EXPECT_TRUE(has(oc("bert-base-uncased", canon), "hf_tokenizer_name = \"bert-base-uncased\": a Hugging Face "
                                                  "tokenizer other than CLIP's or SigLIP's"));
  EXPECT_TRUE(has(oc("timm/ViT-B-16-SigLIP", {{"clean", "lower"}}), "tokenizer_kwargs"));
  const ViTWeights h = load_with_text(kHf);
  nlohmann::json c2 = h.text_config;
  c2["model_type"] = "siglip2";
  EXPECT_TRUE(has(thrown_message([&] { clip_text_config("hugging_face_siglip", c2, h.text_tensors, "m"); }),
                  "m: config.json model_type \"siglip2\": SigLIP 2"));
  const ClipTextConfig cfg = clip_text_config("hugging_face_siglip", h.text_config, h.text_tensors, "m");
  EXPECT_EQ(cfg.mlp_hidden, 32);
  EXPECT_EQ(cfg.source.at("act"), "transformers SiglipTextConfig default hidden_act");
  TensorMap t = h.text_tensors;
  t.erase("logit_bias");
  EXPECT_EQ(thrown_message([&] { build_clip_text(t, cfg, "m"); }), "m: missing tensor 'logit_bias' (expected shape ())");
}

// Which tokenizer file: a CLIP vocabulary given to a SigLIP tower and a SigLIP model given to a CLIP tower are
// refused naming both; a missing spiece.model says where it was looked for and that --vocab can name it;
// SigLIP 2's Gemma tokenizer (tokenizer_config.json) is refused by name.
TEST(SiglipText, TokenizerFileIsTheTowers) {
  ModelSpec spec;
  spec.text.texts = {"a dog", "a cat"};
  const TextTower oc = build_text_tower(load_with_text(kOpenClip));
  const std::string none = thrown_message([&] { encode_texts(oc, spec, true); });
  EXPECT_TRUE(has(none, "needs SigLIP's SentencePiece tokenizer model, spiece.model: not found in " +
                            fixture("siglip/open_clip") + " (the weights' folder); name it with ")) << none;
  EXPECT_TRUE(has(none, "vocab} FILE (the spiece.model of the model's Hugging Face repository, or a folder holding it)") ||
              has(none, "--vocab FILE (the spiece.model")) << none;  // spelled {setting:vocab} below the CLI
  spec.text.vocab = fixture("clip_zero_shot/bpe_small.txt.gz");
  const std::string clip_vocab = thrown_message([&] { encode_texts(oc, spec, true); });
  EXPECT_TRUE(has(clip_vocab, "bpe_small.txt.gz is a CLIP vocabulary, but the text tower of ")) << clip_vocab;
  EXPECT_TRUE(has(clip_vocab, " is SigLIP's, which reads SigLIP's SentencePiece tokenizer model (spiece.model)"));
  // a CLIP tower given SigLIP's spiece.model
  ModelOverrides ov;
  ov.keep_text = true;
  const TextTower clip = build_text_tower(load_model(fixture("clip_zero_shot/model.safetensors"), ov));
  spec.text.vocab = fixture("siglip/spiece.model");
  const std::string sp = thrown_message([&] { encode_texts(clip, spec, true); });
  EXPECT_TRUE(has(sp, "spiece.model is SigLIP's SentencePiece tokenizer model, but the text tower of ")) << sp;
  EXPECT_TRUE(has(sp, " is CLIP's (layout openai)")) << sp;
  // SigLIP 2's Gemma tokenizer beside the model file
  TextTower g = build_text_tower(load_with_text(kHf));
  const fs::path dir = fs::temp_directory_path() / ("attnmap_siglip_gemma_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fixture("siglip/spiece.model"), dir / "spiece.model", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << R"({"tokenizer_class": "GemmaTokenizerFast"})";
  g.folder = dir.string();
  spec.text.vocab.clear();
  const std::string gemma = thrown_message([&] { encode_texts(g, spec, true); });
  fs::remove_all(dir);
  EXPECT_TRUE(has(gemma, "tokenizer_config.json: tokenizer_class \"GemmaTokenizerFast\" is SigLIP 2's Gemma tokenizer"))
      << gemma;
}

// End to end: render -w FOLDER --text ... on a SiglipModel folder: the manifest's probabilities are the family's
// sigmoid probabilities (each text alone: the same whatever the other texts), the record names spiece.model.
TEST(SiglipText, RenderGivesTheFamilysSigmoidProbabilities) {
  const fs::path dir = fs::temp_directory_path() / ("attnmap_siglip_render_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const nlohmann::json want = json_file(fixture("siglip/hf/expected.json"));
  const CliRun r = run_attnmap("render " + q(fixture("siglip/image.png")) + " -w " + q(fixture("siglip/hf")) +
                               " --text 'a dog' --text 'a photo of a cat' -q -o " + q(dir / "out") + " --manifest " +
                               q(dir / "m.jsonl"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(slurp(dir / "m.jsonl"));
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  fs::remove_all(dir);
  const nlohmann::json settings = nlohmann::json::parse(header)["settings"], image = nlohmann::json::parse(row);
  const std::vector<float> p = values(want["probabilities"]);
  ASSERT_EQ(image["top5"].size(), 2u) << image;
  // logits -1.41 ("a photo of a cat") and -1.68 ("a dog"): the cat first
  EXPECT_EQ(image["top5"][0]["label"], "a photo of a cat");
  EXPECT_NEAR(image["top5"][0]["probability"].get<double>(), p[1], 1e-4);
  EXPECT_EQ(image["top5"][1]["label"], "a dog");
  EXPECT_NEAR(image["top5"][1]["probability"].get<double>(), p[0], 1e-4);
  const nlohmann::json& z = settings["zero_shot"];
  EXPECT_EQ(z["vocab"]["file"], "spiece.model");
  EXPECT_EQ(z["tokenizer"], "siglip");
}

// open_clip proj_type "none" (ViT-SO400M-16-SigLIP-i18n-256: TextTransformer.text_projection = None): the feature
// is the final-normed last row, which the fixture's own projection then maps to its features.
TEST(SiglipText, ProjTypeNoneReadsThePooledRow) {
  const ViTWeights m = load_with_text(kOpenClip);
  const ClipTextWeights with = build_clip_text(m.text_tensors, clip_text_config("open_clip", m.text_config, m.text_tensors, "m"), "m");
  nlohmann::json c = m.text_config;
  c["text_cfg"]["proj_type"] = "none";
  c["text_cfg"].erase("proj_bias");
  TensorMap t = m.text_tensors;
  EXPECT_TRUE(has(thrown_message([&] { build_clip_text(t, clip_text_config("open_clip", c, t, "m"), "m"); }),
                  "tensor 'text.text_projection.bias' (64,) is not part of OpenCLIP's text tower"));
  t.erase("text.text_projection.weight");
  t.erase("text.text_projection.bias");
  const ClipTextWeights none = build_clip_text(t, clip_text_config("open_clip", c, t, "m"), "m");
  EXPECT_EQ(none.hp.embed_dim, 64);
  EXPECT_TRUE(none.text_projection.empty());
  const std::vector<std::vector<int32_t>> ids = fixture_ids();
  const std::vector<float> rows = encode_text(none, ids), want = encode_text(with, ids);
  std::vector<float> projected(want.size(), 0.0f);  // rows (5, 64) @ text_projection (64, 64) + bias
  for (size_t n = 0; n < 5; ++n)
    for (size_t e = 0; e < 64; ++e) {
      double acc = with.text_projection_bias[e];
      for (size_t i = 0; i < 64; ++i) acc += static_cast<double>(rows[n * 64 + i]) * with.text_projection[i * 64 + e];
      projected[n * 64 + e] = static_cast<float>(acc);
    }
  EXPECT_TRUE(all_close(projected, want, 1e-5, "rows through the projection"));
}

// The class checks and the context apply to SigLIP's ids too: texts that tokenize alike (SigLIP's clean-up
// lower-cases and drops punctuation) are one class; a text over the context (16 here) is refused, or cut with a
// note under truncate.
TEST(SiglipText, SameTokensAndLongTextsAsForClip) {
  const TextTower hf = build_text_tower(load_with_text(kHf));
  ModelSpec spec;
  spec.text.texts = {"a dog", "A DOG!"};
  const std::string same = thrown_message([&] { encode_texts(hf, spec, true); });
  EXPECT_TRUE(has(same, "'A DOG!' is the same tokens as 'a dog' (SigLIP's tokenizer lower-cases, drops punctuation")) << same;
  EXPECT_EQ(encode_texts(hf, spec, false).count, 2);  // as embeddings (encode_text) both are fine
  std::string long_text = "a";
  for (int i = 0; i < 20; ++i) long_text += " dog";
  spec.text.texts = {"a dog", long_text};
  const std::string over = thrown_message([&] { encode_texts(hf, spec, true); });
  EXPECT_TRUE(has(over, "tokens with </s>, more than SigLIP's context of 16")) << over;
  EXPECT_TRUE(has(over, "truncate_text") && has(over, " to cut it as SigLIP's tokenizers do)")) << over;
  spec.text.truncate = true;
  const TextFeatures cut = encode_texts(hf, spec, true);
  ASSERT_EQ(cut.notes.size(), 1u);
  EXPECT_TRUE(has(cut.notes[0], " tokens, cut to 16 (")) << cut.notes[0];
}

// What SigLIP's tokenizer cannot read is not scored silently: a text with nothing left after the clean-up
// ("!!!": punctuation only) is refused as a class (a note as an embedding); a text whose pieces are all <unk>
// (CJK or an emoji in the fixture's English vocabulary of 1,000 pieces) gets a note, one with some <unk> pieces
// none; two all-<unk> texts are refused as one class saying so; texts of a --texts FILE are named by its
// file and line.
TEST(SiglipText, TextsTheTokenizerCannotReadAreRefusedOrSaid) {
  const TextTower hf = build_text_tower(load_with_text(kHf));
  const TextTower oc = build_text_tower(load_with_text(kOpenClip));
  ModelSpec spec;
  spec.text.texts = {"dog", "!!!"};
  EXPECT_TRUE(has(thrown_message([&] { encode_texts(hf, spec, true); }),
                  "'!!!' is empty after SigLIP's clean-up (punctuation removed): a class needs words"));
  const TextFeatures emb = encode_texts(hf, spec, false);  // as embeddings (encode_text): a note, not an error
  EXPECT_EQ(emb.count, 2);
  ASSERT_EQ(emb.notes.size(), 1u);
  EXPECT_TRUE(has(emb.notes[0], "'!!!' is empty after SigLIP's clean-up (punctuation removed): its feature reads no text"))
      << emb.notes[0];
  ModelSpec ocs = spec;
  ocs.text.texts = {"dog", "?! _"};  // open_clip's clean-up: "_" a space, punctuation removed
  ocs.text.vocab = fixture("siglip/spiece.model");
  EXPECT_TRUE(has(thrown_message([&] { encode_texts(oc, ocs, true); }), "'?! _' is empty after SigLIP's clean-up"));
  spec.text.texts = {"dog", "猫", "a猫"};
  const TextFeatures unk = encode_texts(hf, spec, true);
  ASSERT_EQ(unk.notes.size(), 1u);  // 'a猫' reads its "a": no note (as "café" with "é" unknown, test above)
  EXPECT_EQ(unk.notes[0], "every piece of '猫' is unknown to the tokenizer (<unk>): its score does not read the text");
  spec.text.texts = {"🐶", "猫"};
  EXPECT_TRUE(has(thrown_message([&] { encode_texts(hf, spec, true); }),
                  "'猫' is the same tokens as '🐶': every piece of both is unknown to the tokenizer (<unk>), so the "
                  "model cannot tell them apart"));
  // texts from a --texts FILE (after the --text ones): the file and the line, of both texts
  const fs::path file = fs::temp_directory_path() / ("attnmap_siglip_texts_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(file) << "a dog\n\n犬\n猫\n";
  spec.text.texts = {"a cat"};
  const std::vector<std::string> lines = read_texts_file(file.string());
  spec.text.texts.insert(spec.text.texts.end(), lines.begin(), lines.end());
  spec.text.texts_file = file.string();
  const std::string from_file = thrown_message([&] { encode_texts(hf, spec, true); });
  EXPECT_TRUE(has(from_file, file.string() + ": line 4: '猫' is the same tokens as '犬' on line 3: every piece")) << from_file;
  std::ofstream(file) << "a dog\nA DOG!\n";  // the same tokens for SigLIP's clean-up
  spec.text.texts = {"a cat", "a dog", "A DOG!"};
  const std::string same = thrown_message([&] { encode_texts(hf, spec, true); });
  EXPECT_TRUE(has(same, file.string() + ": line 2: 'A DOG!' is the same tokens as 'a dog' on line 1 (SigLIP's")) << same;
  spec.text.texts = {"A DOG!", "a dog"};  // the file no longer matches the texts: named as --text
  EXPECT_FALSE(has(thrown_message([&] { encode_texts(hf, spec, true); }), ": line "));
  fs::remove(file);
  // the command line: exit 2, the flag spelled
  const CliRun r = run_attnmap("render " + q(fixture("siglip/image.png")) + " -w " + q(fixture("siglip/hf")) +
                               " --text '!!!' --text dog -q -o " + q(fs::temp_directory_path() / "attnmap_siglip_never"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.err, "--text '!!!' is empty after SigLIP's clean-up (punctuation removed): a class needs words"))
      << r.err;
}

// A SigLIP image tower alone (a Hugging Face SiglipVisionModel folder: vision_model.* only) with texts: refused
// naming SigLIP's whole checkpoints, not CLIP's (the model's attention-pool head says it is a SigLIP).
TEST(SiglipText, VisionOnlyFolderNamesSiglipsWholeCheckpoint) {
  const fs::path tmp = fs::temp_directory_path() / ("attnmap_siglip_vonly_" + std::to_string(::getpid()));
  write_siglip_vision_only(fixture("siglip/hf"), tmp);
  ModelOverrides ov;
  ov.keep_text = true;
  const std::string msg = thrown_message([&] { build_text_tower(load_model(tmp.string(), ov)); });
  const CliRun r = run_attnmap("render " + q(fixture("siglip/image.png")) + " -w " + q(tmp) + " --text dog -q -o " +
                               q(tmp / "out"));
  fs::remove_all(tmp);
  EXPECT_TRUE(has(msg, tmp.string() + "/model.safetensors holds no SigLIP text tower (a SigLIP image tower alone")) << msg;
  EXPECT_TRUE(has(msg, "texts need the whole SigLIP checkpoint (a Hugging Face SiglipModel folder with its "
                       "spiece.model, or open_clip's SigLIP open_clip_pytorch_model.bin")) << msg;
  EXPECT_FALSE(has(msg, "CLIPModel")) << msg;
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.err, "--text: ") && has(r.err, "holds no SigLIP text tower")) << r.err;
}
