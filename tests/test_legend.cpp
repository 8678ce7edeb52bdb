// test_legend.cpp - issue 28, "a flat map looks flat" and "a shared scale shows every image": NAME.png's
// legend strip (draw/figures_legend.cpp), the flat word in the terminal, manifest and PNG statistics for a
// random-weight model and not for the bundled one, --scale run's percentile top on hand values, and the
// contact sheet's colour bar, names and minimum width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/eval/eval_parts.hpp"
#include "engine/provenance.hpp"
#include "draw/canvas.hpp"
#include "draw/colormap.hpp"
#include "draw/figures.hpp"
#include "draw/scale.hpp"
#include "io/image_io.hpp"
#include "maps/attention_maps.hpp"
#include "random_model.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kData = ATTNMAP_DATA_DIR;

// eval's flat threshold and render's are one number.
static_assert(kFlatMaxOverMean == eval::kFlatPeakToMean, "render and eval call a map flat at the same max/mean");

Image solid(int w, int h, uint8_t r, uint8_t g, uint8_t b) {
  Image im;
  im.width = w;
  im.height = h;
  for (int i = 0; i < w * h; ++i) im.rgb.insert(im.rgb.end(), {r, g, b});
  return im;
}

const uint8_t* px(const Image& im, int x, int y) { return &im.rgb[(static_cast<size_t>(y) * im.width + x) * 3]; }
bool is(const uint8_t* p, const uint8_t* c) { return p[0] == c[0] && p[1] == c[1] && p[2] == c[2]; }
bool near(const uint8_t* p, const uint8_t* c, int tol) {
  for (int k = 0; k < 3; ++k)
    if (std::abs(static_cast<int>(p[k]) - static_cast<int>(c[k])) > tol) return false;
  return true;
}

// Pixels of the strip (rows y0..height) that are strongly red: the flat line's ink (190, 30, 30).
int red_pixels(const Image& im, int y0) {
  int n = 0;
  for (int y = y0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x) {
      const uint8_t* p = px(im, x, y);
      n += p[0] > 140 && p[1] < 90 && p[2] < 90;
    }
  return n;
}

// The manifest's rows (its header line left out).
std::vector<json> manifest_rows(const fs::path& path) {
  std::vector<json> rows;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    const json j = json::parse(line);
    if (!j.contains("attnmap_manifest")) rows.push_back(j);
  }
  return rows;
}

// tEXt attnmap:stats of a PNG.
json png_stats(const fs::path& png) {
  for (const PngText& t : read_png_text(png.string()))
    if (t.keyword == kStatsKeyword) return json::parse(t.text);
  return json();
}


}  // namespace

TEST(LegendScale, RunScaleTopIsThe99thPercentileOfEveryValue) {
  // 0, 1, ..., 99 in two maps: numpy.percentile(range(100), 99) = 98.01; the minimum stays the bottom.
  std::vector<float> a, b;
  for (int i = 0; i < 50; ++i) a.push_back(static_cast<float>(i));
  for (int i = 50; i < 100; ++i) b.push_back(static_cast<float>(i));
  EXPECT_NEAR(percentile_over({&a, &b}, 99.0), 98.01, 1e-9);
  EXPECT_NEAR(percentile_over({&b, &a}, 50.0), 49.5, 1e-9);
  EXPECT_DOUBLE_EQ(percentile_over({&a}, 100.0), 49.0);
  EXPECT_TRUE(std::isnan(percentile_over({}, 99.0)));
  const Scale s = robust_scale_over({&a, &b}, "attention probability");
  EXPECT_DOUBLE_EQ(s.vmin, 0.0);
  EXPECT_NEAR(s.vmax, 98.01, 1e-9);
  EXPECT_TRUE(s.clip_max);
  EXPECT_EQ(s.units, "attention probability");
  // The case: one composite peaks at 0.745, photos at 0.03-0.15 (every map's other values small).
  std::vector<std::vector<float>> maps(20, std::vector<float>(196, 0.004f));
  maps[0][7] = 0.745f;
  for (size_t i = 1; i < maps.size(); ++i)
    for (int k = 0; k < 3; ++k) maps[i][static_cast<size_t>(k)] = 0.03f + 0.006f * static_cast<float>(i);
  std::vector<const std::vector<float>*> all;
  for (const auto& m : maps) all.push_back(&m);
  const Scale old = scale_over(all, "");
  EXPECT_EQ(maps_peaking_below(all, old, kDimPeakFraction), 19u);  // the min-max scale: 19 of 20 photos dim
  const Scale r = robust_scale_over(all, "");
  // 3920 values, 3862 of them 0.004; rank 0.99 x 3919 = 3879.81 falls among the 57 photo peaks (0.036 ..
  // 0.144 in steps of 0.006, three each): sorted values 3879 and 3880 are 0.066 and 0.072, so the top is
  // 0.066 + 0.81 x 0.006 = 0.07086 (the composite's 0.745 drawn in the top colour).
  EXPECT_NEAR(r.vmax, 0.07086, 1e-6);
  EXPECT_TRUE(r.clip_max);
  EXPECT_EQ(maps_peaking_below(all, r, kDimPeakFraction), 0u);  // every photo above a quarter of the scale
  // Nearly all values equal: the percentile is the minimum, the maximum is the top (nothing clipped).
  std::vector<float> c(196, 1.0f);
  c[3] = 2.0f;
  const Scale f = robust_scale_over({&c}, "");
  EXPECT_DOUBLE_EQ(f.vmax, 2.0);
  EXPECT_FALSE(f.clip_max);
}

TEST(LegendDraw, StripUnderThePhotoWithBarRangeAndFlatWord) {
  const uint8_t* cmap = colormap_table("viridis");
  const Image photo = solid(400, 100, 10, 200, 30);
  OverlayLegend lg{Scale{0.004, 0.0062, "attention probability"}, 0.0062, 1.22, true};
  const Image out = add_legend(photo, lg, cmap);
  const int f = legend_text_px(400);
  EXPECT_EQ(f, 10);
  EXPECT_EQ(out.width, 400);
  EXPECT_GT(out.height, 100 + 4 * f);
  EXPECT_LT(out.height, 100 + 6 * f);
  for (int y = 0; y < 100; ++y)  // the photo untouched
    ASSERT_TRUE(std::equal(photo.rgb.begin() + y * 1200, photo.rgb.begin() + (y + 1) * 1200, out.rgb.begin() + y * 1200));
  // The bar: the colour map from its first entry at the left to its last at the right, in the strip's first rows.
  const int m = static_cast<int>(std::round(0.6 * f)), bar_y = 100 + m + static_cast<int>(std::round(0.45 * f));
  EXPECT_TRUE(is(px(out, m + 1, bar_y), cmap)) << int(px(out, m + 1, bar_y)[0]);
  EXPECT_TRUE(near(px(out, 400 - m - 3, bar_y), cmap + 3 * 255, 6));
  EXPECT_GT(red_pixels(out, 100), 50);  // "flat map: ..." in red
  // A peaked map: the same strip in ink, no red; clip_max adds the extend triangle after the bar's end.
  lg = OverlayLegend{Scale{0.0, 0.1, "attention probability"}, 0.3, 59.0, false};
  lg.scale.clip_max = true;
  const Image peaked = add_legend(photo, lg, cmap);
  EXPECT_EQ(peaked.height, out.height);
  EXPECT_EQ(red_pixels(peaked, 100), 0);
  const int tri = static_cast<int>(std::round(0.9 * f));
  EXPECT_TRUE(near(px(peaked, 400 - m - tri - 3, bar_y), cmap + 3 * 255, 6));  // the bar's end
  EXPECT_TRUE(is(px(peaked, 400 - m - tri + 2, bar_y), cmap + 3 * 255));  // the triangle, in the top colour
  EXPECT_TRUE(near(px(out, 400 - m - tri + 2, bar_y), cmap + 3 * 251, 6));  // without it: the bar goes on
  // A photo narrower than the legend: the canvas is kLegendMinWidth wide, white right of the photo.
  const Image thin = add_legend(solid(37, 211, 0, 0, 0), lg, cmap);
  EXPECT_EQ(thin.width, kLegendMinWidth);
  EXPECT_TRUE(is(px(thin, 0, 0), std::vector<uint8_t>{0, 0, 0}.data()));
  EXPECT_TRUE(is(px(thin, 100, 100), std::vector<uint8_t>{255, 255, 255}.data()));
  // Large photos: bigger text, up to 40 px.
  EXPECT_EQ(legend_text_px(1000), 25);
  EXPECT_EQ(legend_text_px(4000), 40);
  EXPECT_EQ(contrast_phrase(0.0062, 1.2154, true), "flat map: max 0.0062 = 1.22\u00d7 uniform");
  EXPECT_EQ(contrast_phrase(0.301, 59.04, false), "max 0.301 = 59.0\u00d7 uniform");
  EXPECT_EQ(contrast_phrase(0.301, 0.0, false), "max 0.301");
}

TEST(LegendDraw, MapStatisticsSayFlatBelowOnePointTwentyFive) {
  std::vector<float> m(196, 1.0f / 196);
  MapStats s = map_statistics(m, 14, 14);
  EXPECT_NEAR(s.max_over_mean, 1.0, 1e-6);
  EXPECT_TRUE(s.flat());
  m[0] *= 1.24f;  // max/mean just under 1.24
  EXPECT_TRUE(map_statistics(m, 14, 14).flat());
  m[0] = 1.3f / 196;
  s = map_statistics(m, 14, 14);
  EXPECT_NEAR(s.max_over_mean, 1.3 / (1.0 + 0.3 / 196), 1e-5);
  EXPECT_FALSE(s.flat());
  EXPECT_FALSE(map_statistics(std::vector<float>(4, 0.0f), 2, 2).flat());  // no mean: no contrast, not "flat"
  nlohmann::ordered_json j;
  put_image_stats(j, s, {});
  EXPECT_FALSE(j["flat"].get<bool>());
  EXPECT_NEAR(j["max_over_mean"].get<double>(), s.max_over_mean, 1e-12);
  EXPECT_NEAR(get_image_stats(json::parse(j.dump()))->stats.max_over_mean, s.max_over_mean, 1e-12);
}

class LegendCli : public TempDirTest {
 protected:
  // Renders the five photos of data/ and the first eight composites into `out` with `weights` (empty: the
  // bundled model) and a manifest; returns the run.
  CliRun render(const std::string& weights, const std::string& out, const std::string& more = "") {
    fs::create_directories(dir / ("in_" + out));
    for (const char* f : {"astronaut.png", "camera.png", "chelsea.png", "coffee.png", "rocket.jpg"})
      fs::copy_file(kData + "/" + f, dir / ("in_" + out) / f, fs::copy_options::overwrite_existing);
    for (int i = 0; i < 8; ++i) {
      for (const auto& e : fs::directory_iterator(kData + "/composites")) {
        const std::string n = e.path().filename().string();
        if (n.rfind("000" + std::to_string(i), 0) == 0 && e.path().extension() == ".png")
          fs::copy_file(e.path(), dir / ("in_" + out) / n, fs::copy_options::overwrite_existing);
      }
    }
    return run_attnmap("render " + q(dir / ("in_" + out)) + (weights.empty() ? "" : " -w " + q(weights)) + " -o " +
                       q(dir / out) + " --manifest " + q(dir / (out + ".jsonl")) + " " + more);
  }
  fs::path random_weights() {
    const fs::path wp = dir / "random.json";
    attnmap_test::write_random_weights(fs::path(kData) / ".." / "weights" / "default.json", wp, 28);
    return wp;
  }
};

TEST_F(LegendCli, TrainedModelIsMostlyNotFlatAndItsOverlaysCarryTheLegend) {
  const CliRun r = render("", "trained");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = manifest_rows(dir / "trained.jsonl");
  ASSERT_EQ(rows.size(), 13u);
  int flat = 0;
  for (const auto& j : rows) {
    ASSERT_TRUE(j["flat"].is_boolean()) << j.dump();
    flat += j["flat"].get<bool>();
    if (!j["flat"].get<bool>()) {
      EXPECT_GE(j["max_over_mean"].get<double>(), kFlatMaxOverMean) << j.dump();
    }
    // NAME.png: the photo on top, the legend under it; the stats chunk says where the photo is.
    const fs::path png = j["outputs"][0].get<std::string>();
    const Image im = load_image(png.string());
    const Image photo = load_image(j["input"].get<std::string>());
    const json st = png_stats(png);
    ASSERT_TRUE(st.contains("photo_px")) << st.dump();
    EXPECT_EQ(st["photo_px"][0].get<int>(), photo.width);
    EXPECT_EQ(st["photo_px"][1].get<int>(), photo.height);
    EXPECT_EQ(st["flat"], j["flat"]);
    EXPECT_EQ(im.width, std::max(photo.width, kLegendMinWidth));
    const int f = legend_text_px(im.width);
    EXPECT_GT(im.height - photo.height, 4 * f) << png;
    EXPECT_LT(im.height - photo.height, 6 * f) << png;
  }
  EXPECT_LE(flat, 2) << "the bundled model's maps are mostly peaked";
  EXPECT_EQ(r.out.find("flat map"), std::string::npos) << r.out;
  // --no-legend: the bare overlay, exactly the legend PNG's photo part.
  const CliRun bare = render("", "bare", "--no-legend");
  ASSERT_EQ(bare.status, 0) << bare.err;
  for (const auto& j : manifest_rows(dir / "bare.jsonl")) {
    const std::string name = fs::path(j["outputs"][0].get<std::string>()).filename().string();
    const Image b = load_image((dir / "bare" / name).string()), l = load_image((dir / "trained" / name).string());
    const Image photo = load_image(j["input"].get<std::string>());
    ASSERT_EQ(b.width, photo.width);
    ASSERT_EQ(b.height, photo.height);
    for (int y = 0; y < b.height; ++y)
      ASSERT_TRUE(std::equal(b.rgb.begin() + static_cast<long>(y) * b.width * 3, b.rgb.begin() + static_cast<long>(y + 1) * b.width * 3,
                             l.rgb.begin() + static_cast<long>(y) * l.width * 3))
          << name << " row " << y;
    EXPECT_FALSE(png_stats(dir / "bare" / name).contains("photo_px"));
  }
  // The record says whether the legend was drawn (a resumed run redraws overlays of the other kind).
  const CliRun rec = run_attnmap("inspect " + q(dir / "trained" / "chelsea.png"));
  EXPECT_NE(rec.out.find("\n  legend "), std::string::npos) << rec.out;
  EXPECT_EQ(run_attnmap("inspect " + q(dir / "bare" / "chelsea.png")).out.find("\n  legend "), std::string::npos);
}

TEST_F(LegendCli, RandomWeightModelIsFlatInTerminalManifestPngAndPanel) {
  const fs::path w = random_weights();
  const CliRun r = render(w.string(), "random", "--panel --figure-format png,pdf --width-in 7");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = manifest_rows(dir / "random.jsonl");
  ASSERT_EQ(rows.size(), 13u);
  int flat = 0;
  for (const auto& j : rows) {
    flat += j["flat"].get<bool>();
    if (j["flat"].get<bool>()) {
      EXPECT_LT(j["max_over_mean"].get<double>(), 1.25);
      const std::string png = j["outputs"][0].get<std::string>();
      EXPECT_TRUE(png_stats(png)["flat"].get<bool>());
      // The terminal line names it: "IN -> OUT.png (flat map: max 0.0061 = 1.19× uniform)".
      EXPECT_NE(r.out.find(png + " (flat map: max "), std::string::npos) << r.out;
      // The legend's flat line is red.
      const Image im = load_image(png);
      EXPECT_GT(red_pixels(im, png_stats(png)["photo_px"][1].get<int>()), 50) << png;
    }
  }
  EXPECT_GE(flat, 11) << "a random-weight ViT's class-token maps are nearly uniform";
  // The panel's row label says so too (its text, read back from the PDF when pdftotext is there).
  if (std::system("pdftotext -v >/dev/null 2>&1") == 0) {
    const fs::path txt = dir / "panel.txt";
    ASSERT_EQ(std::system(("pdftotext " + q(dir / "random" / "chelsea.panel.pdf") + " " + q(txt)).c_str()), 0);
    EXPECT_NE(slurp(txt).find("(flat)"), std::string::npos) << slurp(txt);
  }
}

TEST_F(LegendCli, ScaleRunNotesItsPercentileAndTheSheetHasItsBar) {
  const CliRun r = render("", "run", "--views L1/h3 --scale run --contact-sheet " + q(dir / "sheet.png") +
                                         " --sheet-columns 4");
  ASSERT_EQ(r.status, 0) << r.err;
  // The run's top is the 99th percentile of every value (the composites' high peaks clipped).
  EXPECT_NE(r.err.find("(the 99th percentile of "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("drawn in the top colour"), std::string::npos) << r.err;
  // The sheet: 4 columns of 256-pixel cells plus the colour bar at the right; its top colour (viridis' last
  // entry) in a column right of the grid.
  const Image sheet = load_image((dir / "sheet.png").string());
  const int f = 16, grid_w = 2 * f + 4 * 256 + 3 * f;
  EXPECT_GT(sheet.width, grid_w + f);
  const uint8_t* top = colormap_table("viridis") + 3 * 255;
  const uint8_t* bottom = colormap_table("viridis");
  int top_px = 0, bottom_px = 0;
  for (int y = 0; y < sheet.height; ++y)
    for (int x = grid_w; x < sheet.width; ++x) {
      top_px += is(px(sheet, x, y), top);
      bottom_px += is(px(sheet, x, y), bottom);
    }
  EXPECT_GT(top_px, 20);  // the bar's top rows and the extend triangle
  EXPECT_GT(bottom_px, 5);
  // Thumbnails without the legend strip: the top-left photo part of each overlay.
  const CliRun rec = run_attnmap("inspect " + q(dir / "sheet.png"));
  EXPECT_EQ(rec.status, 0);
}

TEST(LegendSheet, ThinPicturesGetAMinimumWidthAndNamesAreCutCleanly) {
  Canvas c(10, 10, 72, FigureFormat::Png);
  TextStyle ts;
  ts.px = 13.6;
  const std::string name = "composites2/0001_trouser_coat.png";
  const std::string cut = cut_middle(c, name, ts, 150);
  EXPECT_LE(c.measure(cut, ts).w, 150.0);
  const size_t e = cut.find("\u2026");
  ASSERT_NE(e, std::string::npos) << cut;
  EXPECT_EQ(name.compare(0, e, cut, 0, e), 0) << cut;  // the start kept as it is
  const std::string tail = cut.substr(e + 3);
  EXPECT_EQ(name.substr(name.size() - tail.size()), tail) << cut;  // the end kept as it is
  EXPECT_NE(cut[e - 1], ' ');
  EXPECT_NE(tail[0], ' ');
  EXPECT_GT(tail.size(), e);  // more of the end (the file name) than of the start
  EXPECT_EQ(cut_middle(c, "a.png", ts, 150), "a.png");
  // A 37 x 211 picture on a sheet: a 64-pixel-wide thumbnail (a quarter of 256), centred on a light cell.
  const uint8_t* cmap = colormap_table("viridis");
  Image thin = solid(37, 211, 200, 0, 0), wide = solid(300, 200, 0, 0, 200);
  std::vector<SheetItem> items(2);
  items[0].overlay = &thin;
  items[0].name = name;
  items[0].detail = "peak 0.1 \u00b7 flat";
  items[1].overlay = &wide;
  items[1].name = "w.png";
  SheetOptions so;
  so.columns = 2;
  so.cmap = cmap;
  so.scale = Scale{0.0, 0.2, "attention probability"};
  so.scale->clip_max = true;
  const fs::path p = fs::temp_directory_path() / ("attnmap_legend_sheet_" + std::to_string(::getpid()) + ".png");
  ASSERT_EQ(write_contact_sheet(p.string(), "t", items, so).size(), 1u);
  const Image s = load_image(p.string());
  fs::remove(p);
  int red_w = 0;
  for (int y = 0; y < s.height; ++y) {
    int n = 0;
    for (int x = 0; x < s.width; ++x) n += is(px(s, x, y), std::vector<uint8_t>{200, 0, 0}.data());
    red_w = std::max(red_w, n);
  }
  EXPECT_EQ(red_w, 64);
  // The bar: the colour map's both ends right of the two cells, and the extend triangle above its top.
  const int f = 16, grid_w = 2 * f + 2 * 256 + f;
  int top_px = 0;
  for (int y = 0; y < s.height; ++y)
    for (int x = grid_w; x < s.width; ++x) top_px += is(px(s, x, y), cmap + 3 * 255);
  EXPECT_GT(top_px, 40);
  EXPECT_GT(s.width, grid_w + 2 * f);
}
