// test_figure_cmd.cpp - `attnmap figure` end to end with the tiny committed model tests/fixtures/timm_small:
// a figure of 2 images x 3 views against a golden image (tolerance: tests/golden_util.hpp), the PDF rendered
// back by pdftoppm and compared with the PNG, the scales it records recomputed from the model, the usage
// errors (status 2 before any image is read) and a failing image (status 1, nothing written).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/provenance.hpp"
#include "checkpoint/weights.hpp"
#include "draw/overlay.hpp"
#include "draw/scale.hpp"
#include "io/image_io.hpp"
#include "maps/views.hpp"
#include "model/preprocess.hpp"
#include "golden_util.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::string kModel = fixture("timm_small/weights.json");

class FigureCmd : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // Two small photos of different aspect: rows of different heights.
    write_png((dir / "cat.png").string(), resize_photo(load_image(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png"), 120, 80));
    write_png((dir / "cup.png").string(), resize_photo(load_image(std::string(ATTNMAP_DATA_DIR) + "/coffee.png"), 90, 90));
  }
  std::string images() const { return q(dir / "cat.png") + " " + q(dir / "cup.png"); }
  CliRun figure(const std::string& views, const std::string& out, const std::string& extra = "") const {
    return run_attnmap("figure " + images() + " -w " + q(kModel) + " --views " + views + " -o " + q(dir / out) +
                       " --width-in 3.5 --dpi 100 " + extra);
  }
};

// min and max over every map of each unit, recomputed from the model for the two photos (what --scale run is).
// The figure's default --scale run per unit, computed here from the maps: vmin the smallest value, vmax the
// 99th percentile of every value with numpy.percentile's linear interpolation (rank 0.99 x (n - 1)).
std::map<std::string, std::pair<double, double>> run_bounds(const fs::path& dir, const std::string& views_list) {
  const ViTWeights model = load_model(kModel);
  const HParams& hp = model.hp;
  const std::vector<ResolvedView> views = resolve_views(parse_views(views_list), hp, true, ViewSettings{});
  std::map<std::string, std::vector<double>> values;
  for (const char* name : {"cat.png", "cup.png"}) {
    const Image photo = load_image((dir / name).string());
    const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, ResizeMode::Squash, hp.mean.data(), hp.std.data());
    std::vector<float> logits;
    for (const ViewMap& m : compute_views(model, in.chw.data(), views, ClassSpec{}, &logits))
      for (const float v : m.map) values[views[m.view].units].push_back(static_cast<double>(v));
  }
  std::map<std::string, std::pair<double, double>> out;
  for (auto& [units, v] : values) {
    std::sort(v.begin(), v.end());
    const double rank = 0.99 * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(rank);
    const double top = v[lo] + (rank - static_cast<double>(lo)) * (v[std::min(lo + 1, v.size() - 1)] - v[lo]);
    out[units] = {v.front(), top > v.front() ? top : v.back()};
  }
  return out;
}

double mean_abs_diff(const Image& a, const Image& b) {
  double sum = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) sum += std::abs(int(a.rgb[i]) - int(b.rgb[i]));
  return sum / static_cast<double>(a.rgb.size());
}

}  // namespace

// 2 images x (photo, one head of block 1, rollout): attention probability and rollout mass are different
// units, so each map column gets its own scale and a colour bar under it.
TEST_F(FigureCmd, TwoImagesThreeViewsMatchGoldenAndThePdfRendersBackLikeThePng) {
  const CliRun r = figure("photo,L1/h2,rollout", "fig.png");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string png = (dir / "fig.png").string();
  EXPECT_TRUE(matches_golden(png, "figure_cmd.png"));
  const Image img = load_image(png);
  EXPECT_EQ(img.width, 350);  // 3.5 in at 100 dpi
  EXPECT_NE(slurp(png).find(std::string("pHYs\0\0\x0f\x61", 8)), std::string::npos);  // 100 dpi = 3937 px/m
  // The record: the views, one scale per unit whose bounds are the min and the 99th percentile over both
  // images' maps (render's --scale run rule, issue 28).
  const auto rec = read_png_provenance(png);
  ASSERT_TRUE(rec);
  EXPECT_EQ((*rec)["command"], "figure");
  EXPECT_EQ((*rec)["view"], "photo,L1/h2,rollout");
  EXPECT_EQ((*rec)["scale"], "run");
  EXPECT_EQ((*rec)["width_in"], 3.5);
  ASSERT_EQ((*rec)["images"].size(), 2u);
  EXPECT_EQ((*rec)["images"][1]["name"], "cup.png");
  const auto want = run_bounds(dir, "L1/h2,rollout");
  const auto& bounds = (*rec)["scale_bounds"];
  ASSERT_EQ(bounds.size(), 2u);
  for (const auto& b : bounds) {
    const auto& w = want.at(b["units"].get<std::string>());
    EXPECT_NEAR(b["vmin"].get<double>(), w.first, 1e-7) << b.dump();
    EXPECT_NEAR(b["vmax"].get<double>(), w.second, 1e-7) << b.dump();
    EXPECT_EQ(b["columns"].size(), 1u);
  }
  EXPECT_EQ(bounds[0]["columns"][0], "L1/h2");
  // The PDF of the same figure, rendered back by poppler at the PNG's size, looks like the PNG.
  ASSERT_EQ(figure("photo,L1/h2,rollout", "fig.pdf").status, 0);
  EXPECT_NE(slurp(dir / "fig.pdf").find("%PDF-"), std::string::npos);
  for (const char* tool : {"pdftoppm", "pdftocairo"})
    if (std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << tool << " is not installed (Debian poppler-utils: tools/deps.sh test)";
  const std::string size = " -scale-to-x " + std::to_string(img.width) + " -scale-to-y " + std::to_string(img.height) + " ";
  Image white = img;
  std::fill(white.rgb.begin(), white.rgb.end(), uint8_t{255});
  // Mean absolute difference over the page, in levels. pdftocairo draws with cairo again: the same figure
  // (measured 0.53). pdftoppm's Splash renderer sets the 8 pt glyphs with its own rasteriser and resamples
  // the embedded full-resolution photos with its own filter (measured 5.7, nearly all of it in the text
  // lines): a looser bound, still far below a blank or shifted page (a blank page is 106 away).
  const std::vector<std::pair<std::string, double>> tools = {{"pdftoppm", 8.0}, {"pdftocairo", 1.5}};
  for (const auto& [tool, limit] : tools) {
    const std::string cmd = tool + " -png -singlefile" + size + q(dir / "fig.pdf") + " " + q(dir / tool) + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const Image back = load_image((dir / (tool + ".png")).string());
    ASSERT_EQ(back.width, img.width) << tool;
    ASSERT_EQ(back.height, img.height) << tool;
    EXPECT_LT(mean_abs_diff(back, img), limit) << tool;
  }
  EXPECT_GT(mean_abs_diff(white, img), 60.0);
  // The PDF records the same settings as its Subject (pdfinfo shows it).
  EXPECT_NE(slurp(dir / "fig.pdf").find("scale_bounds"), std::string::npos);
}

// One unit (two attention views): one scale over both columns, one vertical bar; fixed bounds and
// --scale map are recorded as asked; `inspect` prints the record.
TEST_F(FigureCmd, ScalesFollowScaleAndUnits) {
  ASSERT_EQ(figure("photo,L0/mean,L1/mean", "one.png").status, 0);
  auto rec = read_png_provenance((dir / "one.png").string());
  ASSERT_TRUE(rec);
  ASSERT_EQ((*rec)["scale_bounds"].size(), 1u);
  EXPECT_EQ((*rec)["scale_bounds"][0]["columns"].size(), 2u);
  const auto want = run_bounds(dir, "L0/mean,L1/mean").at("attention probability");
  EXPECT_NEAR((*rec)["scale_bounds"][0]["vmax"].get<double>(), want.second, 1e-7);
  ASSERT_EQ(figure("L0/mean,rollout", "fixed.svg", "--scale 0,0.5").status, 0);
  const std::string svg = slurp(dir / "fixed.svg");
  EXPECT_NE(svg.find("<metadata id=\"attnmap\">"), std::string::npos);
  EXPECT_NE(svg.find("\"vmin\":0.0,\"vmax\":0.5"), std::string::npos);
  ASSERT_EQ(figure("L0/mean,rollout", "own.png", "--scale map").status, 0);
  rec = read_png_provenance((dir / "own.png").string());
  EXPECT_EQ((*rec)["scale"], "map");
  EXPECT_TRUE((*rec)["scale_bounds"].empty());
  // A figure with bars under the columns is taller than one without any bar, at the same width.
  ASSERT_EQ(figure("L0/mean,rollout", "run.png").status, 0);
  EXPECT_LT(load_image((dir / "own.png").string()).height, load_image((dir / "run.png").string()).height);
  const CliRun ins = run_attnmap("inspect " + q(dir / "own.png"));
  EXPECT_EQ(ins.status, 0) << ins.err;
  EXPECT_NE(ins.out.find("command"), std::string::npos);
  EXPECT_NE(ins.out.find("L0/mean,rollout"), std::string::npos);
}

// Issue 41: what each colour bar hides above its top. --scale run (the top at the 99th percentile) clips the
// peaks: the record says per bar data_max (the largest value of its maps, recomputed here), clipped and
// clipped_share (the share of cells above vmax), the terminal says so, and the PDF's bar ends in "N+"; --scale
// figure (the min-max) clips nothing; a fixed top under the data clips too.
TEST_F(FigureCmd, RecordsAndNotesWhatEachBarClips) {
  // Every map value of each unit for the two photos, as run_bounds computes them.
  const ViTWeights model = load_model(kModel);
  const std::vector<ResolvedView> views = resolve_views(parse_views("L1/h2,rollout"), model.hp, true, ViewSettings{});
  std::map<std::string, std::vector<double>> values;
  for (const char* name : {"cat.png", "cup.png"}) {
    const ModelInput in = preprocess(load_image((dir / name).string()), model.hp.image_w, model.hp.image_h,
                                     ResizeMode::Squash, model.hp.mean.data(), model.hp.std.data());
    std::vector<float> logits;
    for (const ViewMap& m : compute_views(model, in.chw.data(), views, ClassSpec{}, &logits))
      for (const float v : m.map) values[views[m.view].units].push_back(static_cast<double>(v));
  }
  const CliRun r = figure("photo,L1/h2,rollout", "clip.png");
  ASSERT_EQ(r.status, 0) << r.err;
  auto rec = read_png_provenance((dir / "clip.png").string());
  ASSERT_TRUE(rec);
  ASSERT_EQ((*rec)["scale_bounds"].size(), 2u);
  for (const auto& b : (*rec)["scale_bounds"]) {
    const std::vector<double>& v = values.at(b["units"].get<std::string>());
    const double vmax = b["vmax"].get<double>();
    const double above = static_cast<double>(std::count_if(v.begin(), v.end(), [&](double x) { return x > vmax; }));
    EXPECT_NEAR(b["data_max"].get<double>(), *std::max_element(v.begin(), v.end()), 1e-7) << b.dump();
    EXPECT_GT(b["data_max"].get<double>(), vmax) << b.dump();
    EXPECT_EQ(b["clipped"], true) << b.dump();
    EXPECT_NEAR(b["clipped_share"].get<double>(), above / static_cast<double>(v.size()), 1e-12) << b.dump();
    if (b["clipped_share"].get<double>() > kClipNoteShare) {
      EXPECT_NE(r.err.find("note: the " + b["units"].get<std::string>() + " bar ends at"), std::string::npos) << r.err;
    }
  }
  // The bars' top labels, in the PDF's text: a number and "+".
  ASSERT_EQ(figure("photo,L1/h2,rollout", "clip.pdf", "-q").status, 0);
  if (std::system("command -v pdftotext >/dev/null 2>&1") == 0) {
    ASSERT_EQ(std::system(("pdftotext " + q(dir / "clip.pdf") + " " + q(dir / "clip.txt")).c_str()), 0);
    const std::string text = slurp(dir / "clip.txt");
    size_t plus = 0;
    for (size_t at = text.find('+'); at != std::string::npos; at = text.find('+', at + 1))
      plus += at > 0 && std::isdigit(static_cast<unsigned char>(text[at - 1]));
    EXPECT_EQ(plus, 2u) << text;
  }
  // The min-max: nothing above the top, nothing said.
  const CliRun f = figure("photo,L1/h2,rollout", "minmax.png", "--scale figure");
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_EQ(f.err.find("bar ends at"), std::string::npos) << f.err;
  rec = read_png_provenance((dir / "minmax.png").string());
  for (const auto& b : (*rec)["scale_bounds"]) {
    EXPECT_EQ(b["clipped"], false) << b.dump();
    EXPECT_EQ(b["clipped_share"].get<double>(), 0.0) << b.dump();
    EXPECT_EQ(b["data_max"].get<double>(), b["vmax"].get<double>()) << b.dump();
  }
  // A fixed top under the attention maps' values, above the rollout's (rollout mass stays under 1).
  ASSERT_EQ(figure("photo,L1/h2,rollout", "fixed.png", "--scale 0,0.02 -q").status, 0);
  rec = read_png_provenance((dir / "fixed.png").string());
  EXPECT_EQ((*rec)["scale_bounds"][0]["clipped"], true);
  EXPECT_GT((*rec)["scale_bounds"][0]["data_max"].get<double>(), 0.02);
}

// Issue 41: a narrow figure never cuts a word. Row labels wrap at their spaces; a word too long for its row
// even at kMinLabelPt is a usage error (status 2, nothing written) naming the width at which it fits, and at
// that width the figure is drawn.
TEST_F(FigureCmd, NarrowFiguresWrapOrNameTheWidthTheyNeed) {
  const std::string base = "figure " + images() + " -w " + q(kModel) + " --views photo,L0/mean,L1/mean --dpi 100 -q ";
  CliRun r = run_attnmap(base + "--width-in 3 --row-labels 'a cat seen from the front,a cup of coffee' -o " + q(dir / "w.png"));
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string label = "Supercalifragilisticexpialidocious";
  r = run_attnmap(base + "--width-in 3 --row-labels '" + label + ",cup' -o " + q(dir / "no.png"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("row label '" + label + "'"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "no.png"));
  const size_t at = r.err.find("needs --width-in ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const double need = std::stod(r.err.substr(at + 17));
  EXPECT_NE(r.err.find(" or more"), std::string::npos) << r.err;
  EXPECT_GT(need, 3.0);
  char less[32];
  std::snprintf(less, sizeof less, "%g", need - 0.1);
  EXPECT_EQ(run_attnmap(base + "--width-in " + less + " --row-labels '" + label + ",cup' -o " + q(dir / "no.png")).status, 2);
  r = run_attnmap(base + "--width-in " + std::to_string(need) + " --row-labels '" + label + ",cup' -o " + q(dir / "yes.png"));
  EXPECT_EQ(r.status, 0) << r.err;
}

// Usage errors: one line, status 2, before any image is read (a garbage image among the inputs would
// otherwise give status 1 naming it), nothing written.
TEST_F(FigureCmd, UsageErrorsExit2BeforeAnyImage) {
  std::ofstream((dir / "garbage.png").string()) << "not an image";
  std::ofstream((dir / "a_file").string()) << "x";
  const std::string in = images() + " " + q(dir / "garbage.png");
  const std::string w = " -w " + q(kModel);
  const std::string out = " -o " + q(dir / "out" / "f.png");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {in + w + out + " --views L1/avg", "not a head fusion"},           // unknown fusion
      {in + w + out + " --views nope", "unknown view"},                 // unknown view
      {in + w + out + " --views L7/mean", "out of range"},              // the tiny model has 2 blocks
      {in + w + out, "--views"},                                        // no views
      {in + w + out + " --views photo", "no map"},                      // photo alone: no map
      {in + w + out + " --views ''", "--views"},                        // empty list
      {w + out + " --views L1/mean", "IMAGE... is required"},           // no images
      {in + w + out + " --views L1/mean --scale 0.5,0.1", "VMIN"},      // VMIN >= VMAX
      {in + w + out + " --views L1/mean --scale 1,1", "VMIN"},
      {in + w + " -o " + q(dir / "a_file" / "f.png") + " --views L1/mean", "a_file"},  // unwritable: under a file
      {in + w + " -o " + q(dir / "f.jpg") + " --views L1/mean", ".jpg"},             // unknown extension
      {in + w + " -o " + q(dir / "cat.png") + " --views L1/mean", "an input"},       // would replace an input
      {in + w + out + " --views L1/mean,chefer --class top2", "one map"},            // topK
      {in + w + out + " --views L1/mean --class 1", "class-specific"},               // --class without such a view
      {in + w + out + " --views L1/mean --discard 0.5", "rollout"},                  // --discard without rollout
      {in + w + out + " --views L1/mean,L1/mean", "second time"},                    // the same view twice
      {in + w + out + " --views L0/mean,L1/mean,L0/max --width-in 0.2", "16 pixels"},// cells too small
      {in + w + out + " --views L1/mean --dpi 0", "--dpi"},
      {in + w + out + " --views L1/mean --dpi 0.001", "[1, 100000]"},  // pHYs would say 0 pixels per metre
      {in + w + out + " --views L1/mean --style heat", "--style"},
      {in + " -w " + q(dir / "a_file") + out + " --views L1/mean", "a_file"},        // unreadable weights
  };
  for (const auto& [args, says] : cases) {
    const CliRun r = run_attnmap("figure " + args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("garbage.png"), std::string::npos) << args << "\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_FALSE(fs::exists(dir / "f.jpg"));
}

// A figure with a missing row is not what was asked: an image that cannot be read is one line naming it,
// status 1, and nothing is written (not even the folder -o would have needed).
TEST_F(FigureCmd, AFailedImageWritesNothing) {
  std::ofstream((dir / "garbage.png").string()) << "not an image";
  const std::string out = (dir / "new" / "sub" / "f.pdf").string();
  for (const std::string& bad : {q(dir / "garbage.png"), q(dir / "missing.png")}) {
    const CliRun r = run_attnmap("figure " + images() + " " + bad + " -w " + q(kModel) + " --views photo,L1/mean -o " + q(out));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(bad.substr(1, bad.size() - 2)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no figure written"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "new")) << r.err;
  }
  // The same without the bad image: written, the missing folders made.
  const CliRun ok = run_attnmap("figure " + images() + " -w " + q(kModel) + " --views photo,L1/mean -q -o " + q(out));
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_TRUE(ok.err.empty()) << ok.err;
  EXPECT_TRUE(fs::exists(out));
}

// A figure over cairo's 32767 pixels a side is a usage error (status 2, one line, nothing written) said before
// any map is computed: its size, the limit, a --dpi that fits (and that figure is then written), and for a PDF
// that the limit holds for it too. Wider than the limit from --width-in x --dpi alone: refused before the
// weights are read (a file that is no weights is not named).
TEST_F(FigureCmd, AFigureOverCairosLimitIsRefusedBeforeAnyMap) {
  write_png((dir / "tall.png").string(), resize_photo(load_image(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png"), 10, 1000));
  const std::string two = q(dir / "tall.png") + " " + q(dir / "tall.png") + " -w " + q(kModel) + " --views L1/mean ";
  CliRun r = run_attnmap("figure " + two + "-q --width-in 3 --dpi 100 -o " + q(dir / "big.png"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // no clip note: no map was computed
  for (const char* says : {"the figure would be at least 300 \u00d7 ", "over cairo's limit of 32767 pixels a side",
                           "2 images \u00d7 1 view", "a smaller --width-in", "fewer images"})
    EXPECT_NE(r.err.find(says), std::string::npos) << says << "\n" << r.err;
  EXPECT_EQ(r.err.find("PDF"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "big.png"));
  const size_t at = r.err.find("make it smaller: --dpi ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const int fit = std::stoi(r.err.substr(at + 23));
  EXPECT_GT(fit, 30);
  EXPECT_LT(fit, 100);
  const CliRun pdf = run_attnmap("figure " + two + "-q --width-in 3 --dpi 100 -o " + q(dir / "big.pdf"));
  EXPECT_EQ(pdf.status, 2) << pdf.err;
  EXPECT_NE(pdf.err.find("a PDF figure is laid out in the same pixels at --dpi and held to the same limit"),
            std::string::npos) << pdf.err;
  r = run_attnmap("figure " + two + "-q --width-in 3 --dpi " + std::to_string(fit) + " -o " + q(dir / "fits.png"));
  EXPECT_EQ(r.status, 0) << r.err;
  const Image fits = load_image((dir / "fits.png").string());
  EXPECT_LE(fits.height, 32767);
  // The dpi suggested fits whatever the maps' colour bars (found without them: this narrow figure's bar takes
  // a fifth of its width), so it is below the largest that fits, not far below.
  EXPECT_GT(fits.height, 32767 * 0.7);
  std::ofstream((dir / "a_file").string()) << "x";
  r = run_attnmap("figure " + q(dir / "tall.png") + " -w " + q(dir / "a_file") +
                  " --views L1/mean --width-in 100 --dpi 400 -o " + q(dir / "wide.svg"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err, "attnmap: error: figures 100 in wide at 400 dpi would be 40000 pixels wide, over cairo's limit of "
                   "32767 pixels a side: --dpi 327 or lower at this width, or --width-in 81.9 or less at this dpi; an SVG "
                   "figure is laid out in the same pixels at --dpi and held to the same limit\n");
}
