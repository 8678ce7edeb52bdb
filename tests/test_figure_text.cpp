// attnmap figure with a CLIP's texts (issue 43 point 5, docs/text.md "Figures", docs/figures.md): a column per
// text for each class-specific view, titled with its text, each cell captioned with that text's zero-shot
// probability and a line under the figure saying what the percentages are; --class keeps one column; the
// refusals. On tests/fixtures/clip_zero_shot (a 32x32 CLIP made by OpenAI's own code, three texts).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "draw/colormap.hpp"
#include "draw/figures.hpp"
#include "engine/provenance.hpp"
#include "engine/text/zero_shot.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::vector<std::string> kTexts = {"a dog", "a cat", "a photo of a bird"};

class FigureText : public TempDirTest {
 protected:
  const std::string F = fixture("clip_zero_shot");
  void SetUp() override {
    TempDirTest::SetUp();
    // Two 32x32 rows: the fixture's photo and its mirror image (each fills the model's input: no crop).
    Image img = load_image(F + "/input.png");
    fs::copy_file(F + "/input.png", dir / "input.png");
    Image flip = img;
    for (int y = 0; y < img.height; ++y)
      for (int x = 0; x < img.width; ++x)
        for (int c = 0; c < 3; ++c)
          flip.rgb[static_cast<size_t>((y * img.width + x) * 3 + c)] =
              img.rgb[static_cast<size_t>((y * img.width + img.width - 1 - x) * 3 + c)];
    write_png((dir / "flipped.png").string(), flip);
  }
  std::string common() const {
    return q(dir / "input.png") + " " + q(dir / "flipped.png") + " -w " + q(F + "/model.safetensors") + " --vocab " +
           q(F) + " -q --text 'a dog' --text 'a cat' --text 'a photo of a bird' ";
  }
  CliRun figure(const std::string& extra) const { return run_attnmap("figure " + common() + extra); }
};

std::string percent(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * p);
  return buf;
}

}  // namespace

// Three texts: photo + a chefer column per text. The record names the columns by their texts and gives each
// image's probabilities (OpenAI CLIP's softmax, from the fixture, for input.png); the figure is, pixel for
// pixel, the comparison figure drawn here from render's per-text maps (--save-raw) with those titles, the
// probabilities under the cells and the line saying what they are: each cell is render's map of its text.
TEST_F(FigureText, AColumnPerTextTitledWithItEachCellRendersMapAndProbability) {
  const CliRun rr = run_attnmap("render " + common() + "--views chefer --class top3 --save-raw -o " + q(dir / "out"));
  ASSERT_EQ(rr.status, 0) << rr.err;
  const CliRun r = figure("--views photo,chefer -o " + q(dir / "fig.png") + " --width-in 4 --dpi 100");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rec = read_png_provenance((dir / "fig.png").string());
  ASSERT_TRUE(rec);
  const std::vector<std::string> titles = {"photo", "Chefer relevance, text: a dog", "Chefer relevance, text: a cat",
                                           "Chefer relevance, text: a photo of a bird"};
  EXPECT_EQ((*rec)["column_titles"], nlohmann::json(titles));
  EXPECT_EQ((*rec)["view"], "photo,chefer");
  EXPECT_EQ((*rec)["zero_shot"]["texts"], nlohmann::json(kTexts));
  const nlohmann::json meta = nlohmann::json::parse(slurp(F + "/meta.json"));
  const nlohmann::json& images = (*rec)["images"];
  ASSERT_EQ(images.size(), 2u);
  for (size_t t = 0; t < 3; ++t)
    EXPECT_NEAR(images[0]["probabilities"][t].get<double>(), meta["probs"][t].get<double>(), 1e-4) << t;
  const nlohmann::json& b = (*rec)["scale_bounds"];
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0]["columns"], nlohmann::json({"chefer \u00b7 a dog", "chefer \u00b7 a cat", "chefer \u00b7 a photo of a bird"}));

  // The figure drawn from render's maps: one scale (the record's), the same words.
  const std::vector<std::string> names = text_file_labels(kTexts);
  std::vector<Image> photos = {load_image((dir / "input.png").string()), load_image((dir / "flipped.png").string())};
  std::vector<FigureRow> rows;
  ComparisonOptions co;
  co.width_in = 4;
  co.dpi = 100;
  double vmin = 1e9;
  for (size_t i = 0; i < 2; ++i) {
    const std::string stem = i == 0 ? "input" : "flipped";
    FigureRow row{stem + ".png", &photos[i], PhotoBox{0, 0, 32, 32}, {}};
    co.captions.emplace_back();
    for (size_t t = 0; t < 3; ++t) {
      const std::vector<float> m = read_npy((dir / "out" / (stem + ".class-" + names[t] + ".npy")).string(), nullptr);
      ASSERT_EQ(m.size(), 16u);
      for (const float v : m) vmin = std::min(vmin, static_cast<double>(v));
      row.maps.push_back(GridMap{m, 4, 4, -1});
      co.captions.back().push_back(percent(images[i]["probabilities"][t].get<double>()));
    }
    rows.push_back(std::move(row));
  }
  EXPECT_EQ(co.captions[0], (std::vector<std::string>{"84.0%", "15.2%", "0.8%"}));  // render's top-3 line's numbers
  EXPECT_NEAR(b[0]["vmin"].get<double>(), vmin, 1e-7);  // --scale run's bottom: the smallest value of the maps
  ComparisonScales cs;
  cs.scales = {Scale{b[0]["vmin"].get<double>(), b[0]["vmax"].get<double>(), "Chefer relevance"}};
  cs.scales[0].clip_max = b[0]["clipped"].get<bool>();
  cs.column_scale = {0, 0, 0};
  co.note = "Percentages under the maps: each text's zero-shot probability for that image, CLIP's softmax over the 3 "
            "texts given (not a classifier's classes).";
  StyleOptions st;
  st.cmap = colormap_table("viridis");
  write_comparison((dir / "want.png").string(), titles, rows, cs, st, co);
  const Image got = load_image((dir / "fig.png").string()), want = load_image((dir / "want.png").string());
  ASSERT_EQ(got.width, 400);
  ASSERT_EQ(got.width, want.width);
  ASSERT_EQ(got.height, want.height);
  EXPECT_TRUE(got.rgb == want.rgb);

  // --class TEXT: that text's column alone, titled with it; its cells are the same maps.
  const CliRun one = figure("--views photo,chefer --class 'a cat' -o " + q(dir / "cat.png"));
  ASSERT_EQ(one.status, 0) << one.err;
  const auto rec1 = read_png_provenance((dir / "cat.png").string());
  ASSERT_TRUE(rec1);
  EXPECT_EQ((*rec1)["column_titles"], nlohmann::json({"photo", "Chefer relevance, text: a cat"}));
  EXPECT_EQ((*rec1)["images"][1]["probabilities"], images[1]["probabilities"]);
}

// What cannot be drawn: exit 2, one line naming the setting, nothing written.
TEST_F(FigureText, RefusalsNameTheSetting) {
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases = {
      {"--views photo,chefer --class top2", "--class takes top1, a class index or a label here"},
      {"--views photo,L-1/mean", "has none: the figure would not show them; add chefer to --views"},
      {"--views photo,chefer --column-labels 'a,b'", "--column-labels has 2 labels for the 4 columns of the figure"},
  };
  for (const Case& c : cases) {
    const CliRun r = figure(c.args + " -o " + q(dir / "no.png"));
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "no.png")) << c.args;
  }
  // 30 texts in 6.5 in (cells of 0.2 in: too narrow for the words): refused before any map with the width
  // they need; at that width they are drawn.
  std::string many;
  for (int i = 0; i < 30; ++i) many += " --text 'thing " + std::to_string(i) + "'";
  const std::string base = "figure " + q(dir / "input.png") + " -w " + q(F + "/model.safetensors") + " --vocab " + q(F) +
                           " -q" + many + " --views photo,chefer -o " + q(dir / "wide.png") + " --dpi 150";
  const CliRun narrow = run_attnmap(base);
  ASSERT_EQ(narrow.status, 2) << narrow.err;
  const size_t at = narrow.err.find("needs --width-in ");
  ASSERT_NE(at, std::string::npos) << narrow.err;
  const std::string need = narrow.err.substr(at + 17, narrow.err.find(' ', at + 17) - at - 17);
  const CliRun wide = run_attnmap(base + " --width-in " + need);
  ASSERT_EQ(wide.status, 0) << need << "\n" << wide.err;
  const auto rec = read_png_provenance((dir / "wide.png").string());
  ASSERT_TRUE(rec);
  EXPECT_EQ((*rec)["column_titles"].size(), 31u);
  EXPECT_EQ((*rec)["column_titles"][30], "Chefer relevance, text: thing 29");
}

// A SigLIP's texts are class-specific views through its attention-pool probe (issue 44): a figure of its texts
// without one gets CLIP's advice to add chefer; with chefer, its columns name the probe's query and the texts
// (tests/fixtures/siglip/hf; the maps' values: tests/test_explain_pools.cpp against transformers' autograd).
class FigureSiglipText : public TempDirTest {};

TEST_F(FigureSiglipText, TextsAreMapsThroughTheProbe) {
  const CliRun r = run_attnmap("figure " + q(fixture("siglip/image.png")) + " -w " + q(fixture("siglip/hf")) +
                               " -q --text cat --views photo,L1/mean -o " + q(dir / "no.png"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--views has none: the figure would not show them; add chefer to --views"), std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_empty(dir));
  const CliRun ok = run_attnmap("figure " + q(fixture("siglip/image.png")) + " -w " + q(fixture("siglip/hf")) +
                                " -q --text cat --views photo,chefer -o " + q(dir / "yes.png"));
  ASSERT_EQ(ok.status, 0) << ok.err;
  const CliRun in = run_attnmap("inspect " + q(dir / "yes.png"));
  EXPECT_NE(in.out.find("Chefer relevance \u00b7 pool-probe query, text: cat"), std::string::npos) << in.out;
}
