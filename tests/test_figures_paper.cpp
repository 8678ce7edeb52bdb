// test_figures_paper.cpp - figures at paper size (issue 28): panels and strips in PDF/SVG at a physical
// width with point-size text (FigureOptions::width_in, render --width-in), the layer strip wrapped
// (layer_strip_columns, --strip-columns), and names in any script drawn with glyphs from the font stack,
// never boxes (Canvas::unknown_glyphs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.hpp"
#include "draw/colormap.hpp"
#include "draw/figures.hpp"
#include "io/image_io.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

fs::path tmpdir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("attnmap_paper_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The first /MediaBox of a PDF: its width and height in points.
std::pair<double, double> media_box(const std::string& pdf) {
  std::smatch m;
  const std::regex re(R"(/MediaBox \[ 0 0 ([0-9.]+) ([0-9.]+) \])");
  if (!std::regex_search(pdf, m, re)) return {0, 0};
  return {std::stod(m[1]), std::stod(m[2])};
}

bool have(const char* tool) {
  return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0;
}

// The smallest text on a PDF page, in points: pdftotext -bbox gives each word's box, whose height is the
// font's ascent + descent (DejaVu Sans: 0.928 + 0.236 = 1.164 em) across the line, so the smaller side of
// the box of a word of 3 or more characters (vertical labels included); shorter words are left out.
double smallest_text_pt(const fs::path& pdf, const fs::path& dir) {
  const fs::path html = dir / "bbox.html";
  if (std::system(("pdftotext -bbox " + q(pdf) + " " + q(html) + " 2>/dev/null").c_str()) != 0) return -1;
  const std::string s = slurp(html);
  const std::regex re(R"re(xMin="([0-9.]+)" yMin="([0-9.]+)" xMax="([0-9.]+)" yMax="([0-9.]+)">([^<]*)</word>)re");
  double smallest = 1e9;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it) {
    if ((*it)[5].str().size() < 3) continue;  // vertical text (row labels, units): its box's width is the size
    const double w = std::stod((*it)[3]) - std::stod((*it)[1]), h = std::stod((*it)[4]) - std::stod((*it)[2]);
    smallest = std::min(smallest, std::min(h, w) / 1.164);
  }
  return smallest;
}

}  // namespace

// Every script the issue names has glyphs in the font stack (fonts-dejavu-core, fonts-noto-core,
// fonts-noto-cjk); a private-use character, which no font has, is counted, so the check can fail.
TEST(FiguresPaper, NamesInAnyScriptHaveGlyphs) {
  Canvas c(1, 1, 300, FigureFormat::Png);
  TextStyle ts;
  for (const char* name : {"\u732b\u306e\u5199\u771f.jpg",                     // Japanese 猫の写真
                           "\u0635\u0648\u0631\u0629 \u0642\u0637\u0629.jpg",  // Arabic
                           "\u05ea\u05de\u05d5\u05e0\u05d4 \u05d7\u05ea\u05d5\u05dc.jpg",  // Hebrew
                           "\u092c\u093f\u0932\u094d\u0932\u0940.jpg",         // Devanagari
                           "\u03b3\u03ac\u03c4\u03b1.jpg",                     // Greek
                           "\u043a\u043e\u0448\u043a\u0430.jpg",               // Cyrillic
                           "\u9ad8\uc591\uc774 \u732b.png"}) {                 // Hanja, Hangul
    EXPECT_EQ(c.unknown_glyphs(name, ts), 0) << name;
    TextStyle bold = ts;
    bold.bold = true;
    EXPECT_EQ(c.unknown_glyphs(name, bold), 0) << name << " (bold: titles)";
  }
  EXPECT_EQ(c.unknown_glyphs("a\ue000b", ts), 1);
  EXPECT_EQ(figure_font_stack("DejaVu Sans").rfind("DejaVu Sans,Noto Sans,Noto Sans CJK JP", 0), 0u);
}

// A render of photos named in six scripts: panel, strips and contact sheet written (their text checked by
// NamesInAnyScriptHaveGlyphs; the pictures were looked at), the PDF panel 3.5 in wide by default.
TEST(FiguresPaper, PanelStripAndSheetOfNamesInOtherScripts) {
  const fs::path d = tmpdir("scripts");
  const std::vector<std::string> names = {"\u732b\u306e\u5199\u771f.jpg", "\u0635\u0648\u0631\u0629.jpg",
                                          "\u05ea\u05de\u05d5\u05e0\u05d4.jpg", "\u092c\u093f\u0932\u094d\u0932\u0940.jpg",
                                          "\u03b3\u03ac\u03c4\u03b1.jpg", "\u043a\u043e\u0448\u043a\u0430.jpg"};
  fs::create_directories(d / "in");
  for (const auto& n : names) fs::copy_file(std::string(ATTNMAP_DATA_DIR) + "/rocket.jpg", d / "in" / n);
  const CliRun r = run_attnmap("render " + q(d / "in") + " -o " + q(d / "out") +
                               " --panel --strip layers --figure-format png,pdf --contact-sheet " +
                               q(d / "out" / "sheet.png") + " --sheet-columns 3");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const auto& n : names) {
    const std::string stem = fs::path(n).stem().string();
    for (const char* ext : {".panel.png", ".panel.pdf", ".layers.png", ".layers.pdf"})
      EXPECT_TRUE(fs::exists(d / "out" / (stem + ext))) << stem << ext;
    EXPECT_NEAR(media_box(slurp(d / "out" / (stem + ".panel.pdf"))).first, 3.5 * 72, 0.01) << stem;
  }
  EXPECT_TRUE(fs::exists(d / "out" / "sheet.png"));
  if (!::testing::Test::HasFailure() && !std::getenv("ATTNMAP_KEEP_TEST_FILES")) fs::remove_all(d);
}

// render --panel --figure-format pdf at default settings: a 3.5 in page whose smallest text is >= 7 pt;
// --width-in 7 a 7 in page with the same point sizes; a PNG with --width-in is width x dpi pixels; without it
// the PNG keeps its pixels (NAME.png inside it 1:1: FiguresCli.PanelStripsDpiAndRefusals).
TEST(FiguresPaper, PanelPdfIsAColumnWideWithReadableText) {
  const fs::path d = tmpdir("width");
  const std::string cat = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  ASSERT_EQ(run_attnmap("render " + cat + " -o " + q(d / "a") + " --panel --strip heads --figure-format pdf,svg").status, 0);
  const auto box = media_box(slurp(d / "a" / "chelsea.panel.pdf"));
  EXPECT_NEAR(box.first, 252.0, 0.01);  // 3.5 in
  EXPECT_GT(box.second, 50.0);
  EXPECT_NEAR(media_box(slurp(d / "a" / "chelsea.heads.pdf")).first, 6.5 * 72, 0.01);
  EXPECT_NE(slurp(d / "a" / "chelsea.panel.svg").find("width=\"252pt\""), std::string::npos);
  ASSERT_EQ(run_attnmap("render " + cat + " -o " + q(d / "b") + " --panel --figure-format pdf,png --width-in 7 --dpi 100")
                .status,
            0);
  EXPECT_NEAR(media_box(slurp(d / "b" / "chelsea.panel.pdf")).first, 504.0, 0.01);
  EXPECT_EQ(load_image((d / "b" / "chelsea.panel.png").string()).width, 700);
  if (have("pdftotext")) {
    for (const fs::path& pdf : {d / "a" / "chelsea.panel.pdf", d / "b" / "chelsea.panel.pdf", d / "a" / "chelsea.heads.pdf"}) {
      const double pt = smallest_text_pt(pdf, d);
      EXPECT_GE(pt, 7.0) << pdf;
      EXPECT_LE(pt, 8.0) << pdf;  // the ticks, 0.85 x 8.5 pt
    }
  }
  // Refusals: one line, exit 2.
  for (const char* bad : {"--panel --width-in 0", "--panel --width-in x", "--width-in 3", "--strip layers --strip-columns 0",
                          "--panel --strip-columns 2", "--panel --width-in 0.2"}) {
    const CliRun e = run_attnmap("render " + cat + " -o " + q(d / "bad") + " " + bad);
    EXPECT_EQ(e.status, bad == std::string("--panel --width-in 0.2") ? 1 : 2) << bad << ": " << e.err;
    EXPECT_NE(e.err.find("error"), std::string::npos) << bad;
  }
  fs::remove_all(d);
}

// The layer strip wraps: at most 6 tiles a row by default (12 blocks: 2 rows of 6), --strip-columns N.
TEST(FiguresPaper, LayerStripWraps) {
  EXPECT_EQ(layer_strip_columns(1), 1);
  EXPECT_EQ(layer_strip_columns(4), 4);
  EXPECT_EQ(layer_strip_columns(6), 6);
  EXPECT_EQ(layer_strip_columns(7), 4);
  EXPECT_EQ(layer_strip_columns(12), 6);
  EXPECT_EQ(layer_strip_columns(13), 5);
  EXPECT_EQ(layer_strip_columns(24), 6);
  const fs::path d = tmpdir("wrap");
  // Twelve 224 x 149 tiles (a 3:2 photo), as a 12-block model's strip: 2 rows of 6, and a PDF 6.5 in wide.
  std::vector<Image> tiles(12);
  std::vector<std::string> labels;
  for (int i = 0; i < 12; ++i) {
    tiles[static_cast<size_t>(i)].width = 224;
    tiles[static_cast<size_t>(i)].height = 149;
    tiles[static_cast<size_t>(i)].rgb.assign(224 * 149 * 3, static_cast<uint8_t>(20 * i));
    labels.push_back("block " + std::to_string(i));
  }
  const Scale s{0.0, 0.5, "attention probability"};
  TileFigure fig;
  fig.title = "strip";
  fig.cols = layer_strip_columns(12);
  fig.scale = &s;
  fig.cmap = colormap_table("viridis");
  FigureOptions fo;
  fo.formats = parse_figure_formats("png,pdf");
  const auto paths = write_tiles((d / "x.layers").string(), fig, tiles, labels, fo);
  const Image png = load_image(paths.at(0));
  EXPECT_GT(png.width, 6 * 224);
  EXPECT_LT(png.width, 7 * 224);
  EXPECT_GT(png.height, 2 * 149);
  EXPECT_LT(png.height, 3 * 149 + 100);
  const auto box = media_box(slurp(paths.at(1)));
  EXPECT_NEAR(box.first, 6.5 * 72, 0.01);
  EXPECT_LT(box.second, 9.0 * 72);  // fits a letter / A4 page's text area
  // The CLI: the bundled 4-block model's strip in 2 columns is 2 rows.
  const std::string cat = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  ASSERT_EQ(run_attnmap("render " + cat + " -o " + q(d / "c1") + " --strip layers").status, 0);
  ASSERT_EQ(run_attnmap("render " + cat + " -o " + q(d / "c2") + " --strip layers --strip-columns 2").status, 0);
  const Image one = load_image((d / "c1" / "chelsea.layers.png").string());
  const Image two = load_image((d / "c2" / "chelsea.layers.png").string());
  EXPECT_LT(two.width, one.width * 2 / 3);
  EXPECT_GT(two.height, one.height * 3 / 2);
  fs::remove_all(d);
}
