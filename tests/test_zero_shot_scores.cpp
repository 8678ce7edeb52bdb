// test_zero_shot_scores.cpp - zero-shot probabilities said as they were computed (issue 43 point 6,
// docs/text.md "Zero-shot classes"; engine/text/score_words.hpp): a model whose zero_shot.rule is
// ScoreRule::sigmoid (SigLIP's rule: each text's own sigmoid, they need not sum to 1) shows those numbers,
// and says so, in render's top-5 line, map labels and title, the manifest and the records, the figure's
// captions and key line, the explorer and the perturbation curves. The rule is set here on the small CLIP
// fixture (tests/fixtures/clip_zero_shot/, logits.npy 3.083, 1.377, -1.616: sigmoids 95.6%, 79.8%, 16.6%,
// summing to 1.92), so the softmax outputs of the same texts (pinned by the CLIP tests) stand beside them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/flags.hpp"
#include "engine/batch.hpp"
#include "engine/figure/figure.hpp"
#include "engine/figure/figure_text.hpp"
#include "engine/render.hpp"
#include "engine/session.hpp"
#include "engine/text/score_words.hpp"
#include "engine/text/zero_shot.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "maps/faithfulness.hpp"
#include "model/vit.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::string F = fixture("clip_zero_shot");

// The fixture's texts as given to every run here.
GivenSettings with_texts(GivenSettings s) {
  s.push_back({"weights", {F + "/model.safetensors"}});
  s.push_back({"vocab", {F}});
  s.push_back({"text", {"a dog", "a cat", "a photo of a bird"}});
  return s;
}

// The CLIP fixture prepared for a run (its texts applied by finish_run_model), then scored as SigLIP scores.
ModelSource sigmoid_clip() {
  ModelOverrides ov;
  keep_text_tower(ov, true);
  auto base = std::make_shared<const ViTWeights>(load_model(F + "/model.safetensors", ov));
  return [base](const RenderOptions& opt, bool backward) {
    auto w = std::make_shared<ViTWeights>(*base);
    finish_run_model(*w, opt, backward);
    w->zero_shot.rule = ScoreRule::sigmoid;
    return std::shared_ptr<const ViTWeights>(w);
  };
}

// torch.sigmoid of the fixture's logits_per_image (openai/CLIP's, for input.png).
std::vector<double> fixture_sigmoids() {
  std::vector<int64_t> shape;
  std::vector<double> s;
  for (const float l : read_npy(F + "/logits.npy", &shape)) s.push_back(1.0 / (1.0 + std::exp(-static_cast<double>(l))));
  return s;
}

// A PNG's tEXt `keyword` (the record), "" when absent.
std::string png_text(const fs::path& png, const std::string& keyword) {
  for (const PngText& t : read_png_text(png.string()))
    if (t.keyword == keyword) return t.text;
  return "";
}

class ZeroShotScores : public TempDirTest {};

}  // namespace

// The words: the sigmoid's own, the softmax's as before SigLIP (byte for byte).
TEST(ZeroShotScoreWords, SigmoidSaysEachTextAloneSoftmaxAsBefore) {
  EXPECT_EQ(zero_shot_key(3, ScoreRule::sigmoid),
            "Percentages under the maps: each text's zero-shot probability for that image, SigLIP's sigmoid score of "
            "each text alone (they need not sum to 1; not a classifier's classes).");
  EXPECT_EQ(zero_shot_key(3), "Percentages under the maps: each text's zero-shot probability for that image, CLIP's "
                              "softmax over the 3 texts given (not a classifier's classes).");
  EXPECT_EQ(probability_caption(0.956, ScoreRule::sigmoid), "sigmoid 95.6%");
  EXPECT_EQ(probability_caption(0.956), "95.6%");
  EXPECT_EQ(zero_shot_rule_aside(ScoreRule::softmax), "");
  Job job;
  job.input = "x.png";
  HParams hp;
  // A sigmoid's top-1 is never "no confident class": there is no uniform share to compare it with.
  EXPECT_NE(figure_title(job, hp, {{"a dog", 0.2f}}, false, 3, true, ScoreRule::sigmoid)
                .find(" \u2014 zero-shot top-1 of 3 texts (sigmoid, each text alone): a dog 20.0%"),
            std::string::npos);
  EXPECT_NE(figure_title(job, hp, {{"a dog", 0.2f}}, false, 3, true).find("no confident class"), std::string::npos);
}

// render --panel --manifest --explore with three texts, chefer of each, the rule sigmoid: every number is the
// text's own sigmoid of openai/CLIP's logit (1e-5) and every place says it is a sigmoid, each text alone.
TEST_F(ZeroShotScores, RenderFigureExploreAndCurvesFollowTheSigmoidRule) {
  const std::vector<double> s = fixture_sigmoids();
  ASSERT_EQ(s.size(), 3u);
  const ModelSource model_for = sigmoid_clip();
  std::mutex mu;
  std::vector<std::string> out;
  std::vector<nlohmann::json> rows;
  BatchHooks h;
  h.model = model_for;
  h.on_line = [&](LineStream st, const std::string& t) {
    std::lock_guard<std::mutex> lock(mu);
    if (st == LineStream::Out) out.push_back(t);
  };
  h.on_row = [&](const BatchRow& r) {
    std::lock_guard<std::mutex> lock(mu);
    rows.push_back(nlohmann::json::parse(r.json));
  };
  const CheckedRequest r = make_request(
      "render", with_texts({{"inputs", {F + "/input.png"}}, {"out", {(dir / "out").string()}}, {"jobs", {"1"}},
                            {"views", {"chefer"}}, {"class_spec", {"top3"}}, {"panel", {}}, {"explore", {}},
                            {"manifest", {(dir / "m.jsonl").string()}}}));
  ASSERT_EQ(run_render(r.ro, r.bo, h), 0);
  std::string all;
  for (const std::string& l : out) all += l + "\n";
  EXPECT_NE(all.find("  top-3 of 3 texts (zero-shot; sigmoid, each text alone): a dog 95.6%, a cat 79.8%, a photo of "
                     "a bird 16.6%\n"), std::string::npos) << all;
  EXPECT_NE(all.find("chefer maps of the top 3 texts:\n  a dog, sigmoid 95.6% -> "), std::string::npos) << all;
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0]["top5"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(rows[0]["top5"][i]["probability"].get<double>(), s[i], 1e-5) << i;
  const nlohmann::json settings = nlohmann::json::parse(slurp(dir / "m.jsonl").substr(0, slurp(dir / "m.jsonl").find('\n')))["settings"];
  EXPECT_EQ(settings["zero_shot"]["score_rule"], "sigmoid");
  const nlohmann::json rec = nlohmann::json::parse(png_text(dir / "out" / "input.panel.png", "attnmap"));
  EXPECT_EQ(rec["zero_shot"]["score_rule"], "sigmoid");
  // The explorer: the sigmoids listed, the note saying what they are.
  const std::string html = slurp(dir / "out" / "input.explore" / "index.html");
  const std::string open = "<script type=\"application/json\" id=\"attnmap-meta\">";
  const size_t a = html.find(open);
  ASSERT_NE(a, std::string::npos);
  const nlohmann::json meta = nlohmann::json::parse(html.substr(a + open.size(), html.find("</script>", a) - a - open.size()));
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(meta["texts"]["probs"][i].get<double>(), s[i], 1e-5) << i;
  EXPECT_EQ(meta["texts"]["rule"], "sigmoid");
  EXPECT_EQ(meta["texts"]["note"], "Zero-shot probabilities of the 3 texts given: SigLIP's sigmoid score of each text "
                                   "alone (they need not sum to 1; the sigmoid of exp(logit_scale) \u00d7 cos(image, "
                                   "text) + logit_bias), so another list of texts leaves each text's number as it is.");

  // figure: a chefer column per text, each cell captioned with its sigmoid, the key line under it.
  const CheckedRequest fr = make_request("figure", with_texts({{"inputs", {F + "/input.png"}}, {"views", {"photo,chefer"}}}));
  std::vector<FigurePhoto> photos{{"input.png", load_image(F + "/input.png"), sha256_file(F + "/input.png")}};
  const FigureResult fig = figure_in_memory(fr.figure, "png", std::move(photos), model_for, F + "/model.safetensors");
  ASSERT_TRUE(fig.error.empty()) << fig.error;
  const nlohmann::json frec = nlohmann::json::parse(fig.record);
  EXPECT_EQ(frec["zero_shot"]["score_rule"], "sigmoid");
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(frec["images"][0]["probabilities"][i].get<double>(), s[i], 1e-5) << i;
  if (const char* keep = std::getenv("ATTNMAP_KEEP_PICTURES")) {  // to look at: the panel, figure and explorer
    write_file_atomic(std::string(keep) + "/sigmoid_clip_figure.png", fig.bytes);
    const auto over = fs::copy_options::overwrite_existing | fs::copy_options::recursive;
    fs::copy(dir / "out" / "input.panel.png", std::string(keep) + "/sigmoid_clip_panel.png", over);
    fs::copy(dir / "out" / "input.explore", std::string(keep) + "/sigmoid_clip_explore", over);
  }

  // The deletion curve of text 0: its own sigmoid at each step (here step 1: patch 0 dropped).
  const std::shared_ptr<const ViTWeights> w = model_for(r.ro, false);
  std::vector<int64_t> shape;
  const std::vector<float> chw = read_npy(F + "/input.npy", &shape);
  std::vector<int> order(16);
  for (int i = 0; i < 16; ++i) order[static_cast<size_t>(i)] = i;
  const std::vector<double> curve = perturbation_curve(*w, chw.data(), order, PerturbMode::Drop, 0, s[0]);
  ForwardOptions fo;
  fo.to_end = true;
  fo.keep_patches = std::vector<int>(order.begin() + 1, order.end());
  const std::vector<float> logits = vit_forward(*w, chw.data(), fo).logits;
  ASSERT_EQ(logits.size(), 3u);
  EXPECT_NEAR(curve[1], 1.0 / (1.0 + std::exp(-static_cast<double>(logits[0]))), 1e-12);
  EXPECT_EQ(curve[0], s[0]);
}

// SigLIP end to end (tests/fixtures/siglip/: a tiny SigLIP made by transformers' SiglipModel and by open_clip,
// five texts): render's top-5 line says the numbers are each text's own sigmoid and gives the family's
// torch.sigmoid(logits_per_image) (expected.json), most probable first; the manifest's top5 holds them (1e-5;
// measured 2e-7) and its settings say "score_rule": "sigmoid". (Its texts' maps through the attention-pool
// probe, issue 44: ExplainPools.SiglipTextLogitMatchesAutogradThroughTransformers,
// ExploreText.SiglipScoresAndMapsThroughTheProbe, FigureSiglipText.TextsAreMapsThroughTheProbe.)
TEST_F(ZeroShotScores, SiglipTopFiveLineAndManifestAreEachTextsOwnSigmoid) {
  const std::string S = fixture("siglip");
  const std::vector<std::string> texts = nlohmann::json::parse(slurp(S + "/texts.json"))["texts"];
  ASSERT_EQ(texts.size(), 5u);
  for (const std::string family : {"hf", "open_clip"}) {
    const fs::path out = dir / family;
    std::string args = "render " + q(S + "/image.png") + " -w " + q(S + "/" + family) + " -o " + q(out) + " --manifest " +
                       q(out / "m.jsonl");
    if (family == "open_clip") args += " --vocab " + q(S + "/spiece.model");  // its folder holds no spiece.model
    for (const std::string& t : texts) args += " --text '" + t + "'";
    const CliRun r = run_attnmap(args);
    ASSERT_EQ(r.status, 0) << family << ": " << r.err;
    const nlohmann::json e = nlohmann::json::parse(slurp(S + "/" + family + "/expected.json"))["probabilities"]["values"];
    ASSERT_EQ(e.size(), 5u) << family;
    std::vector<size_t> order{0, 1, 2, 3, 4};
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return e[a].get<double>() > e[b].get<double>(); });
    std::string line = "  top-5 of 5 texts (zero-shot; sigmoid, each text alone): ";
    for (size_t k = 0; k < 5; ++k) line += (k ? ", " : "") + texts[order[k]] + " " + score_percent(e[order[k]].get<double>(), ScoreRule::softmax);
    EXPECT_NE(r.out.find(line + "\n"), std::string::npos) << family << ": " << r.out << "\nwanted: " << line;
    const std::string m = slurp(out / "m.jsonl");
    const nlohmann::json header = nlohmann::json::parse(m.substr(0, m.find('\n')));
    const nlohmann::json row = nlohmann::json::parse(m.substr(m.find('\n') + 1));
    EXPECT_EQ(header["settings"]["zero_shot"]["score_rule"], "sigmoid") << family;
    ASSERT_EQ(row["top5"].size(), 5u) << family;
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(row["top5"][k]["label"], texts[order[k]]) << family << " " << k;
      EXPECT_NEAR(row["top5"][k]["probability"].get<double>(), e[order[k]].get<double>(), 1e-5) << family << " " << k;
    }
  }
}
