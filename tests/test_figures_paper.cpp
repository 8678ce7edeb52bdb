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
#include "draw/figures_internal.hpp"
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

// Every word of a PDF page (pdftotext -bbox): its text and box in points, y down.
struct Word {
  std::string text;
  double x0, y0, x1, y1;
};
std::vector<Word> pdf_words(const fs::path& pdf, const fs::path& dir) {
  const fs::path html = dir / "words.html";
  std::vector<Word> out;
  if (std::system(("pdftotext -bbox " + q(pdf) + " " + q(html) + " 2>/dev/null").c_str()) != 0) return out;
  const std::string s = slurp(html);
  const std::regex re(R"re(xMin="([0-9.]+)" yMin="([0-9.]+)" xMax="([0-9.]+)" yMax="([0-9.]+)">([^<]*)</word>)re");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(Word{(*it)[5].str(), std::stod((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3]), std::stod((*it)[4])});
  return out;
}

bool is_number(const std::string& w) {
  return !w.empty() && w.find_first_not_of("0123456789.\u2212-") == std::string::npos && std::isdigit(static_cast<unsigned char>(w.back()));
}

}  // namespace

// The vertical colour bar at every length from a sliver to a tall bar: its tick labels never overlap (the
// densest nice tick set whose labels keep apart, as matplotlib's MaxNLocator), stay inside the width the
// layout reserved, and a bar long enough keeps nice_ticks' 4..7 ticks. The units are at the tick size.
TEST(FiguresPaper, ColorBarTicksThinOutAndNeverOverlap) {
  Canvas c(1, 1, 300, FigureFormat::Png);
  const std::vector<Scale> scales = {{0.0, 0.2, "attention probability"}, {3.73e-7, 0.745, "attention probability"},
                                     {4.0e-3, 6.2e-3, "attention probability"}, {-1.0, 1.0, "relevance"},
                                     {0.0, 37.5, "token norm"}};
  for (const Scale& s : scales)
    for (const double h : {20.0, 40.0, 70.0, 120.0, 250.0, 600.0}) {
      const detail::ColorBar bar(c, s, 12.0, h);
      const std::vector<detail::TextBox> b = bar.label_boxes(c, 100.0, 50.0, h);
      ASSERT_GE(b.size(), 1u) << s.vmax << " " << h;
      for (size_t i = 1; i < b.size(); ++i)
        EXPECT_FALSE(detail::overlap(b[i - 1], b[i])) << s.vmin << ".." << s.vmax << " h " << h << " label " << i;
      for (const auto& x : b) EXPECT_LE(x.x1, 100.0 + bar.width() + 1e-6) << s.vmax << " h " << h;
      if (h >= 250.0) {
        EXPECT_EQ(b.size(), nice_ticks(s).size()) << s.vmax;
      }
      EXPECT_EQ(bar.units_style().px, bar.tick_style().px);
    }
  // 0 .. 0.2 on a 40 px bar at 12 px text: 0.00 .. 0.20 at 0.05 would be 10 px apart (labels ~12 px high),
  // so the bar shows 0.0, 0.1, 0.2 (step 0.1: 20 px apart).
  const Scale s{0.0, 0.2, "attention probability"};
  const detail::ColorBar bar(c, s, 12.0, 40.0);
  const size_t k = bar.tick_set(40.0);
  EXPECT_EQ(bar.sets.ticks[k], (std::vector<double>{0.0, 0.1, 0.2}));
  EXPECT_EQ(bar.sets.labels[k], (std::vector<std::string>{"0.0", "0.1", "0.2"}));
  EXPECT_EQ(sparser_ticks(s).front(), nice_ticks(s));
  EXPECT_EQ(sparser_ticks(Scale{0.5, 0.5, ""}).size(), 1u);
}

// The horizontal colour bar of `attnmap figure`: every label inside the bar's extent (0.20 at the right end
// moved in, not hanging past it), no two closer than 0.6 f, the units at the tick size wrapped to the bar.
TEST(FiguresPaper, HorizontalBarLabelsStayInsideTheBar) {
  Canvas c(1, 1, 300, FigureFormat::Png);
  for (const Scale& s : std::vector<Scale>{{0.0, 0.2, "attention probability"}, {0.0, 0.745, "rollout mass"},
                                           {4.0e-3, 6.2e-3, "attention probability"}})
    for (const double w : {40.0, 80.0, 150.0, 400.0}) {
      const detail::HBar bar(c, s, 12.0, w);
      const std::vector<detail::TextBox> b = bar.label_boxes(c, 30.0, 10.0);
      ASSERT_GE(b.size(), 1u);
      for (const auto& x : b) {
        EXPECT_GE(x.x0, 30.0 - 1e-9) << s.vmax << " w " << w;
        EXPECT_LE(x.x1, 30.0 + w + 1e-9) << s.vmax << " w " << w;
      }
      for (size_t i = 1; i < b.size(); ++i) EXPECT_GE(b[i].x0 - b[i - 1].x1, 0.6 * 12.0 - 1e-9) << s.vmax << " w " << w;
      EXPECT_EQ(bar.units_style().px, bar.tick_style().px);
      EXPECT_GE(bar.units_h + 0.5, c.measure(bar.units, bar.units_style()).h);
    }
}

// What a colour bar hides above its top (issue 41): clip_stats counts the cells above vmax, and the top's
// label carries two significant digits (at least the ticks' decimals) and "+".
TEST(FiguresPaper, ClipStatsAndTheTopLabel) {
  const std::vector<float> a = {0.01f, 0.02f, 0.5f, NAN}, b = {0.03f, 0.08f};
  const ClipStats st = clip_stats({&a, &b}, Scale{0.0, 0.05, "attention probability"});
  EXPECT_EQ(st.values, 5u);
  EXPECT_EQ(st.above, 2u);  // 0.5 and 0.08
  EXPECT_DOUBLE_EQ(st.share(), 0.4);
  EXPECT_DOUBLE_EQ(st.data_max, 0.5);
  EXPECT_EQ(clip_stats({&a}, Scale{0.0, 1.0, ""}).above, 0u);
  EXPECT_EQ(over_range_label(0.07570, 0, 2), "0.076+");
  EXPECT_EQ(over_range_label(0.02880, 0, 3), "0.029+");
  EXPECT_EQ(over_range_label(0.05, 0, 2), "0.050+");
  EXPECT_EQ(over_range_label(0.6624, 0, 1), "0.66+");
  EXPECT_EQ(over_range_label(7.57e-3, -3, 0), "7.6+");  // in the ticks' units of 10^-3
  EXPECT_EQ(over_range_label(123.4, 0, 0), "123+");
  EXPECT_EQ(over_range_label(-0.5, 0, 1), "\u22120.50+");
}

namespace {
// The colour of `img` at (x, y).
Rgb at(const Image& img, int x, int y) {
  const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(img.width) + static_cast<size_t>(x)) * 3;
  return Rgb{img.rgb[i], img.rgb[i + 1], img.rgb[i + 2]};
}
// Within 12 levels in every channel (the gradient's last columns are the colour map's last entries).
bool same(Rgb a, Rgb b) { return std::abs(a.r - b.r) <= 12 && std::abs(a.g - b.g) <= 12 && std::abs(a.b - b.b) <= 12; }
}  // namespace

// A bar whose scale clips (clip_max) draws matplotlib's extend='max' triangle and ends in "0.076+", in both
// orientations; the same bar without clip_max draws neither. Pixels: above the vertical bar's top (inside the
// triangle) the top colour, beside the triangle's tip white; the horizontal bar's last corner is white (the
// triangle's edge) where the plain bar's gradient is.
TEST(FiguresPaper, ClippingBarsDrawTheTriangleAndAPlusLabel) {
  const uint8_t* cmap = colormap_table("viridis");
  const Rgb top{cmap[255 * 3], cmap[255 * 3 + 1], cmap[255 * 3 + 2]}, white{255, 255, 255};
  for (const bool clip : {false, true}) {
    Scale s{4e-6, 0.0757, "attention probability"};
    s.clip_max = clip;
    Canvas c(400, 400, 72, FigureFormat::Png);
    c.fill_rect(0, 0, 400, 400, white);
    const detail::ColorBar v(c, s, 12.0, 200.0);
    EXPECT_EQ(v.top_label, clip ? "0.076+" : "");
    const std::vector<detail::TextBox> vb = v.label_boxes(c, 40.0, 60.0, 200.0);
    for (size_t i = 1; i < vb.size(); ++i) EXPECT_FALSE(detail::overlap(vb[i - 1], vb[i])) << clip << " " << i;
    for (const auto& b : vb) EXPECT_LE(b.x1, 40.0 + v.width() + 1e-6);  // inside the width the layout reserved
    if (clip) {
      EXPECT_LT((vb.back().y0 + vb.back().y1) / 2, 60.0 - 4.0);  // the top label centred on the triangle
    }
    v.draw(c, cmap, 40.0, 60.0, 200.0);
    const detail::HBar h(c, s, 12.0, 240.0);
    EXPECT_EQ(h.top_label, clip ? "0.076+" : "");
    const std::vector<detail::TextBox> hb = h.label_boxes(c, 100.0, 330.0);
    ASSERT_FALSE(hb.empty());
    for (size_t i = 1; i < hb.size(); ++i) EXPECT_GE(hb[i].x0 - hb[i - 1].x1, 0.6 * 12.0 - 1e-9) << clip;
    EXPECT_LE(hb.back().x1, 100.0 + 240.0 + 1e-9);
    if (clip) {
      EXPECT_NEAR(hb.back().x1, 340.0, 1e-9);  // "0.076+" ends under the triangle's tip
    }
    h.draw(c, cmap, 100.0, 330.0);
    const Image img = c.pixels();
    // Vertical: 4 px above the bar's top, at its middle: inside the triangle (clip) or white.
    EXPECT_TRUE(same(at(img, 46, 56), clip ? top : white)) << clip;
    // Horizontal: 2 px in from the bar's right end, 1 px below its top edge: the triangle's outside (white)
    // when it clips, the gradient's top colour when it does not.
    EXPECT_TRUE(same(at(img, 337, 332), clip ? white : top)) << clip;
    EXPECT_TRUE(same(at(img, 334, 330 + 5), top)) << clip;  // the triangle's middle, or the gradient's end
  }
}

// The comparison figure never cuts a word (issue 41): long row labels wrap at their spaces at the label size;
// a word too long for its cell even at kMinLabelPt refuses the figure with the width it needs, and at that
// width (not 0.1 in less) it is drawn, the label in one piece.
TEST(FiguresPaper, ComparisonLabelsWrapOrTheFigureNamesTheWidthItNeeds) {
  Image photo;
  photo.width = 120;
  photo.height = 80;
  photo.rgb.assign(120 * 80 * 3, 128);
  GridMap m{std::vector<float>(16, 0.0f), 4, 4, -1};
  for (size_t i = 0; i < 16; ++i) m.values[i] = static_cast<float>(i) / 100.0f;
  ComparisonScales cs;
  cs.scales = {Scale{0.0, 0.15, "attention probability"}};
  cs.column_scale = {0, 0};
  const std::vector<std::string> titles = {"photo", "L1/mean", "L2/mean"};
  ComparisonOptions opt;
  opt.width_in = 3.3;
  opt.dpi = 100;
  FigureRow row{"a tabby cat, front view", &photo, PhotoBox{0, 0, 120, 80}, {m, m}};
  ComparisonFit fit = comparison_fit(titles, {row}, cs, opt);
  EXPECT_TRUE(fit.fits) << fit.label;
  row.label = "Supercalifragilisticexpialidocious";
  fit = comparison_fit(titles, {row}, cs, opt);
  ASSERT_FALSE(fit.fits);
  EXPECT_EQ(fit.what, "row label");
  EXPECT_EQ(fit.label, row.label);
  ASSERT_GT(fit.needed_in, opt.width_in);
  const fs::path d = tmpdir("fit");
  EXPECT_THROW(write_comparison((d / "no.png").string(), titles, {row}, cs, StyleOptions{}, opt), Error);
  EXPECT_FALSE(fs::exists(d / "no.png"));
  ComparisonOptions less = opt, enough = opt;
  less.width_in = fit.needed_in - 0.1;
  enough.width_in = fit.needed_in;
  EXPECT_FALSE(comparison_fit(titles, {row}, cs, less).fits);
  EXPECT_TRUE(comparison_fit(titles, {row}, cs, enough).fits);
  StyleOptions st;
  st.cmap = colormap_table("viridis");
  EXPECT_NO_THROW(write_comparison((d / "yes.pdf").string(), titles, {row}, cs, st, enough));
  if (have("pdftotext")) {
    bool whole = false;
    for (const Word& w : pdf_words(d / "yes.pdf", d)) {
      EXPECT_EQ(w.text.find("\u2026"), std::string::npos) << w.text;
      whole = whole || w.text == row.label;
    }
    EXPECT_TRUE(whole) << slurp(d / "words.html");
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(d);
}

// `attnmap figure --width-in 3.3` with two scales (attention probability, rollout mass: a bar under each
// column): every word on the page, the two bars' units in one size, every tick label inside the page.
TEST(FiguresPaper, NarrowComparisonFigureLabelsOneSizeInsideThePage) {
  if (!have("pdftotext")) GTEST_SKIP() << "pdftotext (poppler-utils) is not installed";
  const fs::path d = tmpdir("narrow");
  const std::string cat = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  const CliRun r = run_attnmap("figure " + cat + " -w " + q(fixture("timm_small/weights.json")) +
                               " --views photo,L1/mean,rollout --width-in 3.3 -o " + q(d / "f.pdf"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto page = media_box(slurp(d / "f.pdf"));
  const std::vector<Word> words = pdf_words(d / "f.pdf", d);
  ASSERT_GT(words.size(), 8u);
  double attention_h = 0, rollout_h = 0;
  for (const Word& w : words) {
    EXPECT_GE(w.x0, 0.0) << w.text;
    EXPECT_LE(w.x1, page.first + 1e-6) << w.text;
    if (w.text == "attention") attention_h = w.y1 - w.y0;
    if (w.text == "rollout") rollout_h = w.y1 - w.y0;
    EXPECT_EQ(w.text.find("\u2026"), std::string::npos) << w.text;
  }
  ASSERT_GT(attention_h, 0.0);
  EXPECT_NEAR(attention_h, rollout_h, 0.01);
  // Tick labels of one bar do not overlap.
  for (size_t i = 0; i < words.size(); ++i)
    for (size_t j = i + 1; j < words.size(); ++j)
      if (is_number(words[i].text) && is_number(words[j].text)) {
        EXPECT_FALSE(detail::overlap({words[i].x0, words[i].y0, words[i].x1, words[i].y1},
                                     {words[j].x0, words[j].y0, words[j].x1, words[j].y1}, 0.05))
            << words[i].text << " / " << words[j].text;
      }
  if (!::testing::Test::HasFailure()) fs::remove_all(d);
}

// render --panel --figure-format pdf at the default 3.5 in: the row label, the column titles and the units
// are whole (wrapped, never "…"), every text >= 7 pt, no two tick labels overlap, everything on the page.
TEST(FiguresPaper, DefaultPanelPdfLabelsAreWholeAndTicksApart) {
  if (!have("pdftotext")) GTEST_SKIP() << "pdftotext (poppler-utils) is not installed";
  const fs::path d = tmpdir("whole");
  const std::string cat = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  for (const std::string extra : {"", " --views L3/mean,rollout --alpha 0.45"}) {
    fs::remove_all(d / "out");
    const CliRun r = run_attnmap("render " + cat + " -o " + q(d / "out") + " --panel --figure-format pdf" + extra);
    ASSERT_EQ(r.status, 0) << r.err;
    for (const auto& e : fs::directory_iterator(d / "out")) {
      if (e.path().extension() != ".pdf") continue;
      const auto page = media_box(slurp(e.path()));
      EXPECT_NEAR(page.first, 252.0, 0.01);
      const std::vector<Word> words = pdf_words(e.path(), d);
      std::string all;
      for (const Word& w : words) {
        all += w.text + " ";
        EXPECT_EQ(w.text.find("\u2026"), std::string::npos) << e.path() << ": " << w.text;
        EXPECT_GE(w.x0, -1e-6) << w.text;
        EXPECT_LE(w.x1, page.first + 1e-6) << w.text;
        EXPECT_LE(w.y1, page.second + 1e-6) << w.text;
      }
      for (const char* want : {"attention", "probability", "photo", "map", "overlay,", "opacity"})
        EXPECT_NE(all.find(want), std::string::npos) << e.path() << " lacks " << want << " in: " << all;
      for (size_t i = 0; i < words.size(); ++i)
        for (size_t j = i + 1; j < words.size(); ++j)
          if (is_number(words[i].text) && is_number(words[j].text)) {
            EXPECT_FALSE(detail::overlap({words[i].x0, words[i].y0, words[i].x1, words[i].y1},
                                         {words[j].x0, words[j].y0, words[j].x1, words[j].y1}, 0.05))
                << e.path() << ": " << words[i].text << " / " << words[j].text;
          }
      EXPECT_GE(smallest_text_pt(e.path(), d), 7.0) << e.path();
      // Two bars: their units placed alike (both across under their bars, or both upward beside them), so
      // one bar's units never sit beside the next bar as if they were its label.
      const Word* prob = nullptr;
      const Word* mass = nullptr;
      for (const Word& w : words) {
        if (w.text == "probability") prob = &w;
        if (w.text == "mass") mass = &w;
      }
      if (prob && mass)
        EXPECT_EQ(prob->x1 - prob->x0 > prob->y1 - prob->y0, mass->x1 - mass->x0 > mass->y1 - mass->y0) << e.path();
      else
        EXPECT_TRUE(extra.empty()) << e.path() << ": the two units not found in: " << all;
    }
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(d);
}

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

namespace attnmap_bidi_test {
// The leftmost inked column of a PNG canvas (-1: none).
int first_ink_column(const attnmap::Image& im) {
  for (int x = 0; x < im.width; ++x)
    for (int y = 0; y < im.height; ++y) {
      const size_t i = 3 * (static_cast<size_t>(y) * static_cast<size_t>(im.width) + static_cast<size_t>(x));
      if (im.rgb[i] < 128) return x;
    }
  return -1;
}
}  // namespace attnmap_bidi_test

// Every line runs left to right, as the figure does: "صورة.png" keeps its Arabic letters first (at the left,
// as the bare Arabic word is drawn) and ".png" at the end, instead of the paragraph taking the first letter's
// direction ("png.صورة", the Arabic at the right).
TEST(FiguresPaper, AFileNameInArabicKeepsItsExtensionAtTheEnd) {
  using attnmap_bidi_test::first_ink_column;
  TextStyle ts;
  ts.px = 20;
  auto draw = [&](const std::string& s) {
    Canvas c(400, 40, 100, FigureFormat::Png);
    c.text(s, 10, 5, ts);
    return c.pixels();
  };
  const Image word = draw("\u0635\u0648\u0631\u0629");
  const Image name = draw("\u0635\u0648\u0631\u0629.pngpngpng");
  const int x0 = first_ink_column(word);
  ASSERT_GE(x0, 0);
  EXPECT_EQ(first_ink_column(name), x0);
  // The first 20 columns of ink are the Arabic word's own.
  int differ = 0;
  for (int x = x0; x < x0 + 20; ++x)
    for (int y = 0; y < word.height; ++y) {
      const size_t i = 3 * (static_cast<size_t>(y) * 400u + static_cast<size_t>(x));
      differ += std::abs(int(word.rgb[i]) - int(name.rgb[i])) > 2;
    }
  EXPECT_EQ(differ, 0);
}
