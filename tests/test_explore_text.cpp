// test_explore_text.cpp - the explorer's text selector (issue 43 point 5, docs/explore.md "Texts"): with a CLIP
// given texts, the page holds each text's chefer / gradcam / attn-grad map, equal to the maps render --save-raw
// writes for that text, and the texts' zero-shot probabilities; render --explore writes the same; without
// texts the page has no text part; the maps count in --budget-mb. Fixture: tests/fixtures/clip_zero_shot/ (a
// tiny OpenAI CLIP, 32x32, 4x4 patches; its probabilities and chefer maps by autograd through openai/CLIP). A
// SigLIP (tests/fixtures/siglip/hf): its texts' sigmoid scores and their maps through the attention-pool probe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/explore.hpp"
#include "io/npy.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const char* const kTexts[] = {"a dog", "a cat", "a photo of a bird"};
const char* const kFileNames[] = {"a_dog", "a_cat", "a_photo_of_a_bird"};
const char* const kMethods[] = {"chefer", "gradcam", "attn-grad"};

class ExploreText : public TempDirTest {
 protected:
  std::string model_args() const {
    const std::string f = fixture("clip_zero_shot");
    std::string a = q(f + "/input.png") + " -w " + q(f + "/model.safetensors") + " --vocab " + q(f) + " -q";
    for (const char* t : kTexts) a += " --text '" + std::string(t) + "'";
    return a;
  }
};

// The page's settings (index.html's <script id="attnmap-meta">).
nlohmann::json meta_of(const fs::path& index) {
  const std::string html = slurp(index), open = "<script type=\"application/json\" id=\"attnmap-meta\">";
  const size_t a = html.find(open), b = html.find("</script>", a);
  if (a == std::string::npos || b == std::string::npos) return nullptr;
  return nlohmann::json::parse(html.substr(a + open.size(), b - a - open.size()));
}

// data/texts.js: attnmapTexts("<base64 of float32 little-endian>"); its floats.
std::vector<float> text_maps(const fs::path& file) {
  const std::string js = slurp(file), open = "attnmapTexts(\"", close = "\");\n";
  EXPECT_EQ(js.rfind(open, 0), 0u) << js.substr(0, 40);
  EXPECT_EQ(js.substr(js.size() - close.size()), close);
  const std::string b64 = js.substr(open.size(), js.size() - open.size() - close.size());
  std::vector<uint8_t> bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : b64) {
    if (c == '=') break;
    const char* p = std::strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", c);
    acc = (acc << 6) | static_cast<uint32_t>(p - "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
    if ((bits += 6) >= 8) bytes.push_back(static_cast<uint8_t>(acc >> (bits -= 8)));
  }
  std::vector<float> f(bytes.size() / 4);
  std::memcpy(f.data(), bytes.data(), f.size() * 4);
  return f;
}

}  // namespace

// One map per text and method, equal to render's --save-raw maps of that text; the texts as given, their
// probabilities (the softmax over the 3 texts) equal openai/CLIP's to 1e-5 and the chefer maps its autograd's
// to 1e-4 of the peak; render --explore writes the same maps; the stored line and the data size count them.
TEST_F(ExploreText, OneMapPerTextEqualToRendersAndTheProbabilities) {
  CliRun r = run_attnmap("explore " + model_args() + " -o " + q(dir / "x") + " --no-npy");
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_attnmap("render " + model_args() + " -o " + q(dir / "r") +
                  " --views chefer,gradcam,attn-grad --class top3 --save-raw --explore");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json m = meta_of(dir / "x" / "index.html");
  ASSERT_TRUE(m.is_object() && m.contains("texts")) << m.dump().substr(0, 300);
  const nlohmann::json& t = m["texts"];
  ASSERT_EQ(t["labels"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(t["labels"][i], kTexts[i]);
  EXPECT_EQ(t["mapped"], nlohmann::json({0, 1, 2}));
  EXPECT_EQ(t["start"], 0);  // "a dog", the most probable
  EXPECT_EQ(t["file"], "data/texts.js");
  ASSERT_EQ(t["methods"].size(), 3u);
  std::vector<int64_t> shape;
  const std::vector<float> probs = read_npy(fixture("clip_zero_shot/probs.npy"), &shape);
  ASSERT_EQ(probs.size(), 3u);
  double sum = 0, z = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(t["probs"][i].get<double>(), probs[i], 1e-5) << kTexts[i];
    sum += t["probs"][i].get<double>();
    z += std::exp(t["logits"][i].get<double>() - t["logits"][0].get<double>());
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(t["probs"][0].get<double>(), 1.0 / z, 1e-12);  // softmax of the logits over the 3 texts
  const std::vector<float> maps = text_maps(dir / "x" / "data" / "texts.js");
  ASSERT_EQ(maps.size(), 3u * 3u * 16u);
  EXPECT_EQ(t["bytes"], fs::file_size(dir / "x" / "data" / "texts.js"));
  const std::vector<float> chefer = read_npy(fixture("clip_zero_shot/chefer.npy"), &shape);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(t["methods"][k]["view"], kMethods[k]);
    for (size_t i = 0; i < 3; ++i) {
      const std::string npy = (dir / "r" / ("input." + std::string(kMethods[k]) + ".class-" + kFileNames[i] + ".npy")).string();
      const std::vector<float> raw = read_npy(npy, &shape);
      ASSERT_EQ(raw.size(), 16u) << npy;
      float peak = 0;
      for (size_t p = 0; p < 16; ++p) {
        EXPECT_EQ(maps[(k * 3 + i) * 16 + p], raw[p]) << kMethods[k] << " " << kTexts[i] << " patch " << p;
        peak = std::max(peak, std::abs(chefer[i * 16 + p]));
      }
      if (k == 0) {
        for (size_t p = 0; p < 16; ++p) EXPECT_NEAR(maps[i * 16 + p], chefer[i * 16 + p], 1e-4 * peak) << kTexts[i];
      }
    }
  }
  EXPECT_NE(m["stored"].get<std::string>().find("the chefer, gradcam and attn-grad maps of 3 texts"), std::string::npos)
      << m["stored"];
  size_t data = fs::file_size(dir / "x" / "data" / "texts.js");
  for (const auto& e : fs::directory_iterator(dir / "x" / "data"))
    if (e.path().filename() != "texts.js") data += fs::file_size(e.path());
  EXPECT_EQ(m["data_bytes"], data);
  EXPECT_NE(slurp(dir / "x" / "index.html").find("setupTexts();"), std::string::npos);  // the selector's script
  // render --explore: the same maps (its own pass over the same model and photo).
  EXPECT_EQ(slurp(dir / "r" / "input.explore" / "data" / "texts.js"), slurp(dir / "x" / "data" / "texts.js"));
  EXPECT_EQ(meta_of(dir / "r" / "input.explore" / "index.html")["texts"]["probs"], t["probs"]);
}

// Without texts the page has no text part, and a rerun over an explorer with texts removes its texts.js; a
// budget smaller than the texts' maps fails the image (exit 1) saying so.
TEST_F(ExploreText, WithoutTextsNoneAndTheBudgetCountsThem) {
  const std::string f = fixture("clip_zero_shot");
  ASSERT_EQ(run_attnmap("explore " + model_args() + " -o " + q(dir / "x") + " --no-npy").status, 0);
  ASSERT_TRUE(fs::exists(dir / "x" / "data" / "texts.js"));
  const CliRun r = run_attnmap("explore " + q(f + "/input.png") + " -w " + q(f + "/model.safetensors") + " -q --no-npy -o " +
                               q(dir / "x"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x" / "data" / "texts.js"));
  EXPECT_FALSE(meta_of(dir / "x" / "index.html").contains("texts"));
  const std::string html = slurp(dir / "x" / "index.html");
  EXPECT_EQ(html.find("setupTexts"), std::string::npos);
  EXPECT_EQ(html.find("attnmapTexts"), std::string::npos);
  // The texts' maps: 3 x 3 x 16 floats, 786 bytes of script; a budget of 500 bytes cannot hold them.
  const CliRun small = run_attnmap("explore " + model_args() + " -o " + q(dir / "y") + " --budget-mb 0.0005");
  EXPECT_EQ(small.status, 1) << small.err;
  EXPECT_NE(small.err.find("the texts' relevance maps alone need"), std::string::npos) << small.err;
  EXPECT_NE(small.err.find("raise --budget-mb"), std::string::npos) << small.err;
  EXPECT_FALSE(fs::exists(dir / "y" / "index.html"));
}

// SigLIP (tests/fixtures/siglip/hf): its texts' logits read the attention-pool head, which the backward pass
// follows (issue 44): explore and render --explore write the page (exit 0) with the texts as given, their sigmoid
// scores (transformers' torch.sigmoid(logits_per_image), expected.json, to 1e-5), what they are, and one map per
// text and method (an earlier texts.js replaced), the chefer map of the most probable text equal to the one from
// transformers' autograd (hf/explain_maps.npy, tools/make_explain_pool_fixtures.py) to 1e-4 of its peak.
TEST_F(ExploreText, SiglipScoresAndMapsThroughTheProbe) {
  const std::string S = fixture("siglip");
  const std::vector<std::string> texts = nlohmann::json::parse(slurp(S + "/texts.json"))["texts"];
  const nlohmann::json e = nlohmann::json::parse(slurp(S + "/hf/expected.json"))["probabilities"]["values"];
  ASSERT_EQ(texts.size(), 5u);
  ASSERT_EQ(e.size(), 5u);
  std::string args = " -w " + q(S + "/hf") + " -q";
  for (const std::string& t : texts) args += " --text '" + t + "'";
  fs::create_directories(dir / "x" / "data");
  std::ofstream(dir / "x" / "data" / "texts.js") << "attnmapTexts(\"\");\n";  // an earlier page's maps
  const CliRun r = run_attnmap("explore " + q(S + "/image.png") + args + " --no-npy -o " + q(dir / "x"));
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json m = meta_of(dir / "x" / "index.html");
  ASSERT_TRUE(m.is_object() && m.contains("texts")) << m.dump().substr(0, 300);
  const nlohmann::json& t = m["texts"];
  ASSERT_EQ(t["labels"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t["labels"][i], texts[i]);
    EXPECT_NEAR(t["probs"][i].get<double>(), e[i].get<double>(), 1e-5) << texts[i];
    EXPECT_NEAR(t["probs"][i].get<double>(), 1.0 / (1.0 + std::exp(-t["logits"][i].get<double>())), 1e-12) << texts[i];
  }
  EXPECT_EQ(t["rule"], "sigmoid");
  ASSERT_EQ(t["methods"].size(), 3u);
  EXPECT_EQ(t["methods"][0]["label"], "Chefer relevance \u00b7 pool-probe query");
  EXPECT_EQ(t["mapped"], nlohmann::json({0, 1, 2, 3, 4}));
  EXPECT_EQ(t["file"], "data/texts.js");
  EXPECT_FALSE(t.contains("no_maps"));
  EXPECT_EQ(t["note"], "Zero-shot probabilities of the 5 texts given: SigLIP's sigmoid score of each text alone (they "
                       "need not sum to 1; the sigmoid of exp(logit_scale) \u00d7 cos(image, text) + logit_bias), so "
                       "another list of texts leaves each text's number as it is.");
  const int j = nlohmann::json::parse(slurp(S + "/hf/explain.json"))["target_class"].get<int>();
  EXPECT_EQ(t["start"], j);  // the most probable text, the one the reference explains
  const std::vector<float> maps = text_maps(dir / "x" / "data" / "texts.js");
  ASSERT_EQ(maps.size(), 3u * 5u * 16u);
  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy(S + "/hf/explain_maps.npy", &shape);  // row 0: chefer
  float peak = 0;
  for (size_t p = 0; p < 16; ++p) peak = std::max(peak, std::abs(want[p]));
  for (size_t p = 0; p < 16; ++p) EXPECT_NEAR(maps[static_cast<size_t>(j) * 16 + p], want[p], 1e-4 * peak) << p;
  EXPECT_NE(m["stored"].get<std::string>().find("the chefer, gradcam and attn-grad maps of 5 texts"), std::string::npos)
      << m["stored"];
  const std::string html = slurp(dir / "x" / "index.html");
  EXPECT_NE(html.find("setupTexts();"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "x" / "data" / "block00.js"));
  // render --explore over two images: both pages, no image failed; the same scores and maps for the same photo.
  fs::copy_file(S + "/image.png", dir / "b.png");
  const CliRun rr = run_attnmap("render " + q(S + "/image.png") + " " + q(dir / "b.png") + args + " --explore -o " + q(dir / "r"));
  ASSERT_EQ(rr.status, 0) << rr.err;
  for (const char* name : {"image", "b"}) {
    const nlohmann::json rm = meta_of(dir / "r" / (std::string(name) + ".explore") / "index.html");
    ASSERT_TRUE(rm.is_object() && rm.contains("texts")) << name;
    EXPECT_EQ(rm["texts"]["probs"], t["probs"]) << name;
    EXPECT_EQ(slurp(dir / "r" / (std::string(name) + ".explore") / "data" / "texts.js"),
              slurp(dir / "x" / "data" / "texts.js")) << name;
  }
}
