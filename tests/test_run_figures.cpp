// test_run_figures.cpp - the figures of a whole run through the attnmap binary: render --contact-sheet
// (labels, thumbnails, a failed input's tile, pages, skipped images from disk) and --gallery (one row per
// input with the manifest's values, working links), and their usage errors. The gallery in a real browser:
// ctest Gallery.Browser (tests/browser).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/provenance.hpp"
#include "core/error.hpp"
#include "draw/colormap.hpp"
#include "draw/figures.hpp"
#include "draw/gallery.hpp"
#include "draw/overlay.hpp"
#include "io/image_io.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::string kData = ATTNMAP_DATA_DIR;

/// The manifest's rows (its header line left out).
std::vector<nlohmann::json> manifest_rows(const fs::path& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("attnmap_manifest")) rows.push_back(j);
  }
  return rows;
}

/// Positions where `small` lies in `big` pixel for pixel.
int count_exact(const Image& big, const Image& small) {
  int n = 0;
  const size_t row = static_cast<size_t>(small.width) * 3;
  for (int y = 0; y + small.height <= big.height; ++y)
    for (int x = 0; x + small.width <= big.width; ++x) {
      bool same = true;
      for (int r = 0; r < small.height && same; ++r)
        same = std::equal(small.rgb.begin() + static_cast<long>(r * row), small.rgb.begin() + static_cast<long>((r + 1) * row),
                          big.rgb.begin() + static_cast<long>((static_cast<size_t>(y + r) * big.width + x) * 3));
      n += same;
    }
  return n;
}

/// An overlay PNG's photo part, as the sheet shows it: the top-left photo_px of its stats chunk (the legend
/// strip under the photo left out), or all of it.
Image photo_part(const std::string& png) {
  Image im = load_image(png);
  for (const PngText& t : read_png_text(png)) {
    if (t.keyword != kStatsKeyword) continue;
    const nlohmann::json j = nlohmann::json::parse(t.text);
    if (!j.contains("photo_px")) break;
    const int w = j["photo_px"][0].get<int>(), h = j["photo_px"][1].get<int>();
    Image out;
    out.width = w;
    out.height = h;
    for (int y = 0; y < h; ++y)
      out.rgb.insert(out.rgb.end(), im.rgb.begin() + static_cast<long>(y) * im.width * 3,
                     im.rgb.begin() + (static_cast<long>(y) * im.width + w) * 3);
    return out;
  }
  return im;
}

/// A thumbnail as the sheet makes it: the longer side 256 pixels, stb_image_resize.
Image thumb256(const Image& overlay) {
  const double s = 256.0 / std::max(overlay.width, overlay.height);
  const int w = std::max(1, static_cast<int>(std::lround(overlay.width * s)));
  const int h = std::max(1, static_cast<int>(std::lround(overlay.height * s)));
  return w == overlay.width && h == overlay.height ? overlay : resize_photo(overlay, w, h);
}

/// The sheet's second line for a manifest row, as docs/figures.md states it: "Bag 99% · peak 0.301".
std::string detail_of(const nlohmann::json& row) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %.0f%% \u00b7 peak %.3g", row["top5"][0]["label"].get<std::string>().c_str(),
                100.0 * row["top5"][0]["probability"].get<double>(), row["map_max"].get<double>());
  return buf;
}

/// The contact sheet the library draws for these rows (labels: file names; failed rows: placeholders), for
/// comparison with what render wrote.
std::vector<std::string> library_sheet(const fs::path& path, const std::string& title, const std::vector<nlohmann::json>& rows,
                                       int columns, std::vector<Image>* keep) {
  keep->clear();
  keep->reserve(rows.size());
  std::vector<SheetItem> items;
  for (const auto& r : rows) {
    SheetItem it;
    it.name = fs::path(r["input"].get<std::string>()).filename().string();
    if (r["status"] == "failed") {
      std::string e = r["error"].get<std::string>();
      e.erase(0, r["input"].get<std::string>().size() + 2);
      it.detail = "failed";
      it.placeholder = "failed: " + e;
    } else {
      keep->push_back(photo_part(r["outputs"][0].get<std::string>()));
      it.overlay = &keep->back();
      it.detail = detail_of(r);
    }
    items.push_back(it);
  }
  SheetOptions so;
  so.columns = columns;
  so.cmap = colormap_table("viridis");  // the default run's bar: each overlay on its own min-max
  return write_contact_sheet(path.string(), title, items, so);
}

bool same_pixels(const std::string& a, const std::string& b) {
  const Image x = load_image(a), y = load_image(b);
  return x.width == y.width && x.height == y.height && x.rgb == y.rgb;
}

class RunFigures : public TempDirTest {
 protected:
  /// Copies `names` (under data/) into dir/in, plus broken.png (not an image) when asked.
  void inputs(const std::vector<std::string>& names, bool broken) const {
    fs::create_directories(dir / "in");
    for (const auto& n : names) fs::copy_file(kData + "/" + n, dir / "in" / fs::path(n).filename());
    if (broken) std::ofstream(dir / "in" / "broken.png") << "not an image";
  }
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

// Every input in a labelled grid in manifest order: each overlay's 256-pixel thumbnail found pixel for pixel,
// the failed input a grey tile with its error, the sheet exactly what write_contact_sheet draws for the
// manifest's rows, 2 columns wide, and it records the run's settings.
TEST_F(RunFigures, ContactSheetShowsEveryInputAndTheFailedOne) {
  inputs({"chelsea.png", "composites/0002_bag.png", "composites/0005_sandal.png"}, true);
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " --manifest " + q(dir / "m.jsonl") +
                               " --contact-sheet " + q(dir / "sheet.png") + " --sheet-columns 2");
  ASSERT_EQ(r.status, 1) << r.err;  // broken.png fails; the sheet is still written
  EXPECT_NE(r.out.find("contact sheet -> " + (dir / "sheet.png").string() + "\n"), std::string::npos) << r.out;
  const std::vector<nlohmann::json> rows = manifest_rows(dir / "m.jsonl");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[2]["status"], "failed");  // sorted: 0002_bag, 0005_sandal, broken, chelsea
  EXPECT_EQ(detail_of(rows[0]), "Bag 99% \u00b7 peak 0.301");  // the bundled model on 0002_bag.png
  const Image sheet = load_image((dir / "sheet.png").string());
  // Margins and gap of text_px(256) = 16 pixels, 2 thumbnails, then the colour bar (issue 28).
  EXPECT_GT(sheet.width, 2 * 16 + 2 * 256 + 16 + 16);
  EXPECT_LT(sheet.width, 2 * 16 + 2 * 256 + 16 + 120);
  for (const auto& row : rows) {
    if (row["status"] == "failed") continue;
    EXPECT_EQ(count_exact(sheet, thumb256(photo_part(row["outputs"][0].get<std::string>()))), 1) << row["input"];
  }
  // The failed input: a light grey tile 256 wide and as high as the tallest thumbnail (256 here), less its text.
  long tile = 0;
  for (size_t i = 0; i + 2 < sheet.rgb.size(); i += 3)
    tile += sheet.rgb[i] == 236 && sheet.rgb[i + 1] == 236 && sheet.rgb[i + 2] == 236;
  EXPECT_GT(tile, 254L * 254 - 40L * 256);
  EXPECT_LE(tile, 254L * 254);
  std::vector<Image> keep;
  const std::string title = (dir / "out").string() + " \u2014 4 inputs, view L1/h3, weights default.json \u2014 1 failed (grey tiles)";
  const auto lib = library_sheet(dir / "lib.png", title, rows, 2, &keep);
  ASSERT_EQ(lib.size(), 1u);
  EXPECT_TRUE(same_pixels((dir / "sheet.png").string(), lib[0]));
  const auto rec = read_png_provenance((dir / "sheet.png").string());
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ((*rec)["view"], "L1/h3");
}

// Past 8000 pixels the sheet is split into numbered pages: 29 inputs in one column make two pages,
// sheet-1.png and sheet-2.png (no sheet.png), each what the library draws; a resumed run whose images are
// all skipped draws the same pages from the overlays on disk - also after a run in two shards.
TEST_F(RunFigures, ContactSheetPagesAndSkippedImagesFromDisk) {
  std::vector<std::string> names = {"astronaut.png", "camera.png", "chelsea.png", "coffee.png", "rocket.jpg"};
  for (int i = 0; i < 24; ++i)
    for (const auto& e : fs::directory_iterator(kData + "/composites"))
      if (e.path().filename().string().rfind((i < 10 ? "000" : "00") + std::to_string(i) + "_", 0) == 0)
        names.push_back("composites/" + e.path().filename().string());
  ASSERT_EQ(names.size(), 29u);
  inputs(names, false);
  const std::string base = "render " + q(dir / "in") + " -o " + q(dir / "out") + " -q";
  // Two shards, then one run that skips every image and draws the sheet.
  ASSERT_EQ(run_attnmap(base + " --shard 1/2").status, 0);
  ASSERT_EQ(run_attnmap(base + " --shard 2/2").status, 0);
  const CliRun skip = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " --skip-existing --manifest " +
                                  q(dir / "m.jsonl") + " --contact-sheet " + q(dir / "sheet.png") + " --sheet-columns 1");
  ASSERT_EQ(skip.status, 0) << skip.err;
  EXPECT_NE(skip.err.find("0 done, 0 failed, 29 skipped"), std::string::npos) << skip.err;
  EXPECT_EQ(skip.out, "contact sheet -> " + (dir / "sheet-1.png").string() + "\ncontact sheet -> " +
                          (dir / "sheet-2.png").string() + "\n");
  EXPECT_FALSE(fs::exists(dir / "sheet.png"));
  const std::vector<nlohmann::json> rows = manifest_rows(dir / "m.jsonl");
  ASSERT_EQ(rows.size(), 29u);
  std::vector<Image> keep;
  const auto lib = library_sheet(dir / "lib.png", (dir / "out").string() + " \u2014 29 inputs, view L1/h3, weights default.json",
                                 rows, 1, &keep);
  ASSERT_EQ(lib.size(), 2u);
  EXPECT_TRUE(same_pixels((dir / "sheet-1.png").string(), lib[0]));
  EXPECT_TRUE(same_pixels((dir / "sheet-2.png").string(), lib[1]));
  const Image p1 = load_image((dir / "sheet-1.png").string()), p2 = load_image((dir / "sheet-2.png").string());
  EXPECT_GT(p1.width, 2 * 16 + 256 + 16);  // one column and the colour bar
  EXPECT_EQ(p2.width, p1.width);
  EXPECT_LE(p1.height, 8000);
  EXPECT_GT(p1.height, 8000 - 350);  // as many rows as fit: less than one more row is left
  EXPECT_LT(p2.height, p1.height);
  // Every thumbnail on exactly one page, in manifest order: the first rows on page 1, the rest on page 2.
  size_t on1 = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Image t = thumb256(photo_part(rows[i]["outputs"][0].get<std::string>()));
    const int a = count_exact(p1, t), b = count_exact(p2, t);
    EXPECT_EQ(a + b, 1) << i;
    if (a == 1) {
      EXPECT_EQ(i, on1++) << "page 1 holds the first rows";
    }
  }
  EXPECT_GT(on1, 20u);
  EXPECT_LT(on1, 29u);
}

// One row per input in manifest order, with the manifest's values: status, error, statistics (data-v holds
// them exactly), links relative to the gallery to files that exist, a thumbnail per overlay (192 pixels on
// its longer side), the subtitle naming the weights and the view; nothing loaded from outside.
TEST_F(RunFigures, GalleryRowsAreTheManifestsWithWorkingLinks) {
  inputs({"chelsea.png", "composites/0002_bag.png", "rocket.jpg"}, true);
  const CliRun r = run_attnmap("render " + q(dir / "in") + " " + q(dir / "nope.png") + " -o " + q(dir / "out") +
                               " --save-raw --manifest " + q(dir / "m.jsonl") + " --gallery " + q(dir / "out" / "gallery"));
  ASSERT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.out.find("gallery -> " + (dir / "out" / "gallery" / "index.html").string() + " (3 thumbnails)\n"),
            std::string::npos) << r.out;
  const std::string html = slurp(dir / "out" / "gallery" / "index.html");
  const std::vector<nlohmann::json> rows = manifest_rows(dir / "m.jsonl");
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(count(html, "<tr data-status=\"done\">"), 3u);
  EXPECT_EQ(count(html, "<tr data-status=\"failed\">"), 2u);
  EXPECT_NE(html.find("weights default.json (sha256 "), std::string::npos);
  EXPECT_NE(html.find("view L1/h3, 5 inputs"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  size_t at = 0;
  int thumbs = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const size_t p = html.find("<div class=\"name\" title=\"" + html_escape(row["input"].get<std::string>()) + "\">", at);
    ASSERT_NE(p, std::string::npos) << row["input"];  // rows in manifest order
    at = p;
    const std::string tr = html.substr(html.rfind("<tr", p), html.find("</tr>", p) - html.rfind("<tr", p));
    if (row["status"] == "failed") {
      EXPECT_NE(tr.find(html_escape(row["error"].get<std::string>())), std::string::npos) << tr;
      EXPECT_NE(tr.find("no image"), std::string::npos);
      continue;
    }
    char v[64];
    std::snprintf(v, sizeof v, "data-v=\"%.9g\"", row["map_max"].get<double>());
    EXPECT_NE(tr.find(v), std::string::npos) << v << "\n" << tr;
    std::snprintf(v, sizeof v, "data-v=\"%.9g\"", row["entropy"].get<double>());
    EXPECT_NE(tr.find(v), std::string::npos) << v;
    EXPECT_NE(tr.find(">" + row["top5"][0]["label"].get<std::string>() + "<"), std::string::npos);
    // Every link resolves, from the gallery folder, to one of the row's outputs.
    ASSERT_EQ(row["outputs"].size(), 2u);  // NAME.png, NAME.npy
    for (const auto& o : row["outputs"]) {
      const std::string href = "href=\"../" + fs::path(o.get<std::string>()).filename().string() + "\"";
      EXPECT_NE(tr.find(href), std::string::npos) << href << "\n" << tr;
      EXPECT_TRUE(fs::exists(dir / "out" / "gallery" / ".." / fs::path(o.get<std::string>()).filename()));
    }
    char t[48];
    std::snprintf(t, sizeof t, "thumbs/%06zu.png", i);
    EXPECT_NE(tr.find(std::string("src=\"") + t + "\""), std::string::npos) << tr;
    const Image thumb = load_image((dir / "out" / "gallery" / t).string());
    EXPECT_EQ(std::max(thumb.width, thumb.height), 128);  // GalleryOptions::thumb_size
    ++thumbs;
  }
  EXPECT_EQ(thumbs, 3);
  EXPECT_TRUE(is_attnmap_gallery((dir / "out" / "gallery" / "index.html").string()));
}

// Issue 41: the terminal names every file render wrote for an image - the panel, the layer strip, the .npy
// files, the explorer - not only NAME.png (the view maps are named on their own lines already).
TEST_F(RunFigures, TerminalNamesEveryFileWritten) {
  const std::string img = q(kData + "/chelsea.png"), out = (dir / "out").string();
  CliRun r = run_attnmap("render " + img + " -o " + q(out) + " --panel --strip layers --save-raw");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(" -> " + out + "/chelsea.png\n  also wrote: " + out + "/chelsea.npy, " + out + "/chelsea.layers.png, " +
                       out + "/chelsea.panel.png\n"), std::string::npos) << r.out;
  r = run_attnmap("render " + img + " -o " + q(out) + " --views L1/h3,rollout --panel");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  rollout -> " + out + "/chelsea.rollout.png\n  also wrote: " + out + "/chelsea.panel.png\n"),
            std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("also wrote: " + out + "/chelsea.L1-h3.png"), std::string::npos) << r.out;
  r = run_attnmap("render " + img + " -o " + q(dir / "plain"));  // one file: nothing more to name
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("also wrote"), std::string::npos) << r.out;
}

// Issue 41: a figure's record says what its colour bars hide - per bar data_max (the largest value of its
// maps), clipped, clipped_share - and a fixed --scale that clips past kClipNoteShare (0.5 %) of a figure's
// cells is one note for the run, not a line per image. These are results: a --skip-existing rerun skips.
TEST_F(RunFigures, FigureRecordsSayWhatTheirColourBarsHide) {
  inputs({"chelsea.png", "composites/0002_bag.png"}, false);
  const std::string base = "render " + q(dir / "in") + " -o " + q(dir / "out") + " --panel --strip layers";
  CliRun r = run_attnmap(base + " --scale 0,0.02 --contact-sheet " + q(dir / "sheet.png"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string note = "attnmap: note: --scale 0,0.02: the attention probability bar clipped more than 0.5% of "
                           "the cells of 2 of 2 images' figures";
  EXPECT_NE(r.err.find(note), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("the attention probability bar clipped"), r.err.rfind("the attention probability bar clipped"))
      << r.err;  // one line for the run
  for (const char* name : {"chelsea", "0002_bag"}) {
    const std::string stem = (dir / "out" / name).string();
    const auto map_max = read_png_stats(stem + ".png")->stats.max;  // the panel's one map
    const auto panel = read_figure_record(stem + ".panel.png");
    ASSERT_TRUE(panel && (*panel)["colour_bars"].size() == 1u) << name;
    const auto& bar = (*panel)["colour_bars"][0];
    EXPECT_EQ(bar["units"], "attention probability");
    EXPECT_EQ(bar["vmax"], 0.02);
    EXPECT_EQ(bar["data_max"].get<float>(), map_max) << name;
    EXPECT_EQ(bar["clipped"], true);
    EXPECT_GT(bar["clipped_share"].get<double>(), 0.005);
    EXPECT_LT(bar["clipped_share"].get<double>(), 1.0);
    const auto layers = read_figure_record(stem + ".layers.png");  // every block's map: its own largest value
    ASSERT_TRUE(layers && (*layers)["colour_bars"].size() == 1u) << name;
    EXPECT_GE((*layers)["colour_bars"][0]["data_max"].get<float>(), map_max);
    EXPECT_EQ((*layers)["colour_bars"][0]["clipped"], true);
  }
  const auto sheet = read_png_provenance((dir / "sheet.png").string());  // drawn from the manifest's statistics
  ASSERT_TRUE(sheet && (*sheet)["colour_bars"].size() == 1u);
  EXPECT_EQ((*sheet)["colour_bars"][0]["clipped_images"], 2);
  EXPECT_EQ((*sheet)["colour_bars"][0]["images"], 2);
  EXPECT_EQ((*sheet)["colour_bars"][0]["clipped"], true);
  // The same run again with --skip-existing: the records' results do not count as other settings.
  r = run_attnmap(base + " --scale 0,0.02 --skip-existing");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("0 done, 0 failed, 2 skipped"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bar clipped"), std::string::npos) << r.err;  // nothing drawn, nothing to say
  // --scale figure ends the bar at the figure's largest value: nothing clipped, no note.
  r = run_attnmap(base + " --scale figure");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("bar clipped"), std::string::npos) << r.err;
  const auto panel = read_figure_record((dir / "out" / "chelsea.panel.png").string());
  ASSERT_TRUE(panel && (*panel)["colour_bars"].size() == 1u);
  EXPECT_EQ((*panel)["colour_bars"][0]["clipped"], false);
  EXPECT_EQ((*panel)["colour_bars"][0]["clipped_share"], 0.0);
  EXPECT_EQ((*panel)["colour_bars"][0]["data_max"].get<float>(), (*panel)["colour_bars"][0]["vmax"].get<float>());
}

// Issue 25: the step after a sharded run that draws the gallery and the sheet (every image skipped) showed
// every image "skipped" with this run's 0.2 ms. Each manifest row now carries the status and time of the
// run that made its outputs: the shards' (docs/batch.md's recipe: one manifest per shard in --out), read by
// the last step with its own --manifest and without one; without the shards' manifests the rows say
// "skipped" as before. The summary line and the exit status are those of a run that skipped every image.
TEST_F(RunFigures, GalleryAfterShardsShowsTheShardsStatusAndTimes) {
  inputs({"chelsea.png", "composites/0002_bag.png", "rocket.jpg", "coffee.png"}, false);
  const std::string base = "render " + q(dir / "in") + " -o " + q(dir / "out");
  std::map<std::string, nlohmann::json> shard_row;  // by input
  for (const std::string k : {"1", "2"}) {
    const fs::path m = dir / "out" / ("manifest-" + k + ".jsonl");
    ASSERT_EQ(run_attnmap(base + " -q --skip-existing --shard " + k + "/2 --manifest " + q(m)).status, 0);
    for (const nlohmann::json& r : manifest_rows(m)) {
      EXPECT_EQ(r["status"], "done");
      EXPECT_EQ(r["carried"], false);
      shard_row[r["input"].get<std::string>()] = r;
    }
  }
  ASSERT_EQ(shard_row.size(), 4u);
  // The gallery's row of `input`: <tr ...>...</tr>.
  auto gallery_row = [](const std::string& html, const std::string& input) {
    const size_t p = html.find("<div class=\"name\" title=\"" + html_escape(input) + "\">");
    if (p == std::string::npos) return std::string();
    const size_t tr = html.rfind("<tr", p);
    return html.substr(tr, html.find("</tr>", p) - tr);
  };
  auto ms_cell = [](const nlohmann::json& row) {
    char v[64];
    std::snprintf(v, sizeof v, "data-v=\"%.9g\"", row["milliseconds"].get<double>());
    return std::string(v);
  };
  // With its own manifest, and without one (the shards' manifests are found in --out).
  for (const bool own : {true, false}) {
    const std::string g = own ? "gallery" : "gallery-2";
    const CliRun fin = run_attnmap(base + " --skip-existing --gallery " + q(dir / g) + " --contact-sheet " +
                                   q(dir / (g + ".png")) + (own ? " --manifest " + q(dir / "all.jsonl") : ""));
    ASSERT_EQ(fin.status, 0) << fin.err;
    EXPECT_NE(fin.err.find("attnmap: 0 done, 0 failed, 4 skipped"), std::string::npos) << fin.err;
    const std::string html = slurp(dir / g / "index.html");
    EXPECT_EQ(count(html, "<tr data-status=\"done\">"), 4u) << g;
    EXPECT_EQ(count(html, "<tr data-status=\"skipped\">"), 0u) << g;
    for (const auto& [input, s] : shard_row) {
      EXPECT_GT(s["milliseconds"].get<double>(), 1.0) << input;  // a rendered image, not a skipped one's 0.2 ms
      const std::string tr = gallery_row(html, input);
      EXPECT_NE(tr.find("data-status=\"done\""), std::string::npos) << tr;
      EXPECT_NE(tr.find(ms_cell(s)), std::string::npos) << ms_cell(s) << "\n" << tr;
    }
    if (!own) continue;
    const std::vector<nlohmann::json> rows = manifest_rows(dir / "all.jsonl");
    ASSERT_EQ(rows.size(), 4u);
    for (const nlohmann::json& r : rows) {
      const nlohmann::json& s = shard_row.at(r["input"].get<std::string>());
      EXPECT_EQ(r["status"], "done") << r.dump();
      EXPECT_EQ(r["carried"], true) << r.dump();
      EXPECT_TRUE(r["error"].is_null());
      for (const char* k : {"outputs", "milliseconds", "map_max", "argmax_row", "argmax_col", "entropy", "top5"})
        EXPECT_EQ(r[k], s[k]) << k << ": " << r.dump();
    }
  }
  // The same step once more with its own manifest: the carried rows are carried again, unchanged.
  const nlohmann::json before = manifest_rows(dir / "all.jsonl");
  ASSERT_EQ(run_attnmap(base + " -q --skip-existing --manifest " + q(dir / "all.jsonl")).status, 0);
  EXPECT_EQ(nlohmann::json(manifest_rows(dir / "all.jsonl")), before);
  // Without any earlier manifest (the shards' moved away, a new --manifest): "skipped", this run's time.
  for (const std::string k : {"1", "2"})
    fs::rename(dir / "out" / ("manifest-" + k + ".jsonl"), dir / ("shard-" + k + ".jsonl.kept"));
  const CliRun plain = run_attnmap(base + " -q --skip-existing --manifest " + q(dir / "fresh.jsonl") + " --gallery " +
                                   q(dir / "gallery-3"));
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(count(slurp(dir / "gallery-3" / "index.html"), "<tr data-status=\"skipped\">"), 4u);
  for (const nlohmann::json& r : manifest_rows(dir / "fresh.jsonl")) {
    EXPECT_EQ(r["status"], "skipped") << r.dump();
    EXPECT_EQ(r["carried"], false) << r.dump();
    EXPECT_LT(r["milliseconds"].get<double>(), shard_row.at(r["input"].get<std::string>())["milliseconds"].get<double>());
  }
}

// Refused before any image is rendered: exit 2, one line, no output folder made.
TEST_F(RunFigures, UsageErrorsBeforeAnyImage) {
  inputs({"chelsea.png", "coffee.png"}, false);
  fs::copy_file(kData + "/camera.png", dir / "in" / "x-2.png");  // renders to out/x-2.png: a page of out/x.png
  fs::create_directories(dir / "in" / "thumbs");
  fs::copy_file(kData + "/rocket.jpg", dir / "in" / "thumbs" / "000001.jpg");  // out/thumbs/000001.png
  std::ofstream(dir / "file") << "x";
  std::ofstream(dir / "mine.png") << "a file of the user's";
  fs::create_directories(dir / "theirs");
  std::ofstream(dir / "theirs" / "index.html") << "<html>their page</html>";
  fs::create_directories(dir / "folder.png");
  std::ofstream((dir / "fonts.conf").string()) << "<?xml version=\"1.0\"?>\n<fontconfig></fontconfig>\n";
  struct Case {
    std::string args, says, env;
  };
  const std::string out = (dir / "out").string();
  const std::vector<Case> cases = {
      {"--contact-sheet " + q(dir / "sheet.jpg"), "a contact sheet is a PNG; name a .png file", ""},
      {"--contact-sheet " + q(dir / "file" / "sheet.png"), "cannot be written (" + (dir / "file").string() + " is not a folder)", ""},
      {"--contact-sheet " + q(dir / "folder.png"), "is a folder", ""},
      {"--contact-sheet " + q(dir / "s.png") + " --sheet-columns 0", "--sheet-columns must be >= 1, found 0", ""},
      {"--sheet-columns 3", "--sheet-columns applies to --contact-sheet", ""},
      {"--contact-sheet ''", "--contact-sheet expects a file name", ""},
      {"--gallery ''", "--gallery expects a folder", ""},
      {"--gallery " + q(dir / "file"), "is an existing file; name a folder", ""},
      {"--gallery " + q(dir / "file" / "g"), "cannot be written", ""},
      {"--contact-sheet " + q(dir / "in" / "chelsea.png"), "is an input; choose another file", ""},
      {"--contact-sheet " + q(dir / "out" / "coffee.png"), "is an output of this run; choose another file", ""},
      {"--contact-sheet " + q(dir / "out" / "x.png"), "its page " + out + "/x-2.png would replace an output of this run", ""},
      {"--manifest " + q(dir / "m.png") + " --contact-sheet " + q(dir / "m.png"), "is the --manifest file", ""},
      {"--gallery " + q(dir / "out"), "its thumbs/ folder would replace " + out + "/thumbs/000001.png", ""},
      {"--gallery " + q(dir / "in" / "g"), "is inside the input folder", ""},
      {"--contact-sheet " + q(dir / "in" / "sheet.png"), "is inside the input folder", ""},
      {"--contact-sheet " + q(dir / "g" / "thumbs" / "a.png") + " --gallery " + q(dir / "g"), "inside the gallery's thumbs/", ""},
      {"--contact-sheet " + q(dir / "mine.png"), "already exists and was not written by attnmap", ""},
      {"--gallery " + q(dir / "theirs"), "is not an attnmap gallery; it is left alone", ""},
      {"--gallery " + q(dir / "g") + " --shard 1/2", "--shard 1/2 renders only part of it", ""},
      {"--contact-sheet " + q(dir / "s.png") + " --shard 2/3", "without --shard and with --skip-existing", ""},
      {"--contact-sheet " + q(dir / "s.png"), "install fonts-dejavu-core", "FONTCONFIG_FILE=" + q(dir / "fonts.conf") + " "},
  };
  for (const Case& c : cases) {
    const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " " + c.args, c.env);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("attnmap: error: ", 0), 0u) << r.err;
    EXPECT_FALSE(fs::exists(dir / "out")) << c.args;  // nothing rendered
    EXPECT_FALSE(fs::exists(dir / "s.png") || fs::exists(dir / "g")) << c.args;
  }
  EXPECT_EQ(slurp(dir / "mine.png"), "a file of the user's");
  EXPECT_EQ(slurp(dir / "theirs" / "index.html"), "<html>their page</html>");
  // The same paths, given sensibly, work: a sheet and a gallery of an earlier run are replaced.
  for (int i = 0; i < 2; ++i) {
    const CliRun ok = run_attnmap("render " + q(dir / "in" / "chelsea.png") + " -o " + q(dir / "out") + " -q --contact-sheet " +
                                  q(dir / "s.png") + " --gallery " + q(dir / "g"));
    EXPECT_EQ(ok.status, 0) << ok.err;
  }
  EXPECT_TRUE(written_by_attnmap((dir / "s.png").string()));
  EXPECT_TRUE(is_attnmap_gallery((dir / "g" / "index.html").string()));
}

// render's figures over cairo's 32767 pixels a side: a PNG panel wider than that at --width-in x --dpi and a
// sheet row of more thumbnails than that holds are usage errors before any image (a PDF panel is not held to
// it); a panel too tall for its photo fails that input, naming its size, the limit and a --dpi that fits it.
TEST_F(RunFigures, FiguresOverCairosLimitSayWhatFits) {
  inputs({"chelsea.png"}, false);
  const std::string base = "render " + q(dir / "in") + " -o " + q(dir / "out") + " -q ";
  CliRun r = run_attnmap(base + "--panel --width-in 100 --dpi 400");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err, "attnmap: error: figures 100 in wide at 400 dpi would be 40000 pixels wide, over cairo's limit of "
                   "32767 pixels a side: --dpi 327 or lower at this width, or --width-in 81.9 or less at this dpi (a PDF "
                   "or SVG, --figure-format pdf, is not held to this limit)\n");
  // A sheet's row holds its columns or the run's images, when fewer: 200 columns for 120 images is a row of 120.
  fs::create_directories(dir / "many");
  const Image tiny = resize_photo(load_image(kData + "/chelsea.png"), 8, 8);
  for (int i = 0; i < 120; ++i) write_png((dir / "many" / ("p" + std::to_string(i) + ".png")).string(), tiny);
  r = run_attnmap("render " + q(dir / "many") + " -o " + q(dir / "out") + " -q --contact-sheet " + q(dir / "s.png") +
                  " --sheet-columns 200");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err, "attnmap: error: --sheet-columns 200: a row of 120 thumbnails is wider than cairo's limit of 32767 "
                   "pixels a side; 119 or fewer\n");
  EXPECT_FALSE(fs::exists(dir / "out"));
  r = run_attnmap(base + "--contact-sheet " + q(dir / "s.png") + " --sheet-columns 200");  // one image: one thumbnail
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "s.png"));
  fs::remove_all(dir / "out");
  EXPECT_EQ(run_attnmap(base + "--panel --width-in 100 --dpi 400 --figure-format pdf").status, 0);
  fs::remove_all(dir / "out");
  write_png((dir / "in" / "chelsea.png").string(), resize_photo(load_image(kData + "/chelsea.png"), 4, 3000));
  r = run_attnmap(base + "--panel --width-in 2 --dpi 300");
  EXPECT_EQ(r.status, 1) << r.err;
  const std::string says = "chelsea.png: the figure would be 600 \u00d7 ";
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pixels, over cairo's limit of 32767 pixels a side (a PNG 2 in wide at 300 dpi)"), std::string::npos) << r.err;
  const size_t at = r.err.find("make it smaller: --dpi ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const int fit = std::stoi(r.err.substr(at + 23));
  r = run_attnmap(base + "--panel --width-in 2 --dpi " + std::to_string(fit));
  EXPECT_EQ(r.status, 0) << r.err;
  const Image panel = load_image((dir / "out" / "chelsea.panel.png").string());
  EXPECT_LE(panel.height, 32767);
  EXPECT_GT(panel.height, 32767 - 400);  // the largest dpi that fits
}

// The library's lazy items: a picture given by its size and a load function draws the same sheet as the
// picture itself, each load is called once (while its page is drawn, never before: the sizes come from the
// item), and a load that throws becomes a grey tile instead of failing the sheet.
TEST(ContactSheetLibrary, LazyPicturesEqualInMemoryOnesAndAThrowIsATile) {
  const fs::path d = fs::temp_directory_path() / ("attnmap_sheetlib_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  std::vector<Image> photos = {load_image(kData + "/chelsea.png"), load_image(kData + "/composites/0002_bag.png"),
                               load_image(kData + "/rocket.jpg")};
  std::vector<SheetItem> eager, lazy;
  std::atomic<int> loads{0};
  for (size_t i = 0; i < photos.size(); ++i) {
    SheetItem e;
    e.overlay = &photos[i];
    e.name = "item " + std::to_string(i);
    e.detail = "peak 0.1";
    eager.push_back(e);
    SheetItem l = e;
    l.overlay = nullptr;
    l.width = photos[i].width;
    l.height = photos[i].height;
    const Image* p = &photos[i];
    l.load = [p, &loads] {
      ++loads;
      return *p;
    };
    lazy.push_back(l);
  }
  SheetOptions so;
  so.columns = 2;
  const auto a = write_contact_sheet((d / "eager.png").string(), "t", eager, so);
  EXPECT_EQ(loads.load(), 0);
  const auto b = write_contact_sheet((d / "lazy.png").string(), "t", lazy, so);
  EXPECT_EQ(loads.load(), 3);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_TRUE(same_pixels(a[0], b[0]));
  // A load that throws: its tile is the placeholder with the message, the others unchanged. (The first
  // item, chelsea, is not the tallest: the picture row keeps its height.)
  lazy[0].load = []() -> Image { throw Error("gone.png: cannot open"); };
  SheetItem ph = eager[0];
  ph.overlay = nullptr;
  ph.placeholder = "gone.png: cannot open";
  std::vector<SheetItem> with_placeholder = {ph, eager[1], eager[2]};
  const auto c = write_contact_sheet((d / "thrown.png").string(), "t", lazy, so);
  const auto e = write_contact_sheet((d / "placeholder.png").string(), "t", with_placeholder, so);
  EXPECT_TRUE(same_pixels(c[0], e[0]));
  EXPECT_FALSE(same_pixels(c[0], a[0]));
  EXPECT_EQ(count_exact(load_image(c[0]), thumb256(photos[0])), 0);
  EXPECT_EQ(count_exact(load_image(c[0]), thumb256(photos[1])), 1);
  // An item with no picture, no size and no placeholder is refused.
  lazy[1].width = 0;
  EXPECT_THROW(write_contact_sheet((d / "bad.png").string(), "t", lazy, so), Error);
  fs::remove_all(d);
}

// Issue 26: file names that are not UTF-8. Two photos x\xff.png and x\xfe.png get two outputs, x%FF.png and
// x%FE.png; the manifest's rows list files that exist and keep the names' bytes (input_bytes); the gallery
// links to them; the contact sheet draws both overlays, no failure tile.
TEST_F(RunFigures, NamesThatAreNotUtf8PointAtTheirRealFiles) {
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/composites/0000_trouser.png", dir / "in" / "x\xff.png");
  fs::copy_file(kData + "/composites/0002_bag.png", dir / "in" / "x\xfe.png");
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " --manifest " + q(dir / "m.jsonl") +
                               " --gallery " + q(dir / "out" / "gallery") + " --contact-sheet " + q(dir / "sheet.png"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "x%FF.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "x%FE.png"));
  std::set<std::string> bytes;
  for (const nlohmann::json& row : manifest_rows(dir / "m.jsonl")) {
    EXPECT_EQ(row["status"], "done") << row.dump();
    for (const auto& o : row["outputs"]) EXPECT_TRUE(fs::exists(o.get<std::string>())) << o;
    bytes.insert(row.value("input_bytes", ""));
  }
  const std::string in_hex = [&] {
    std::string h;
    for (const unsigned char c : (dir / "in").string()) {
      char b[3];
      std::snprintf(b, sizeof b, "%02x", c);
      h += b;
    }
    return h;
  }();
  EXPECT_EQ(bytes, (std::set<std::string>{in_hex + "2f78ff2e706e67", in_hex + "2f78fe2e706e67"}));  // ".../x\xff.png"
  std::ifstream html(dir / "out" / "gallery" / "index.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("href=\"../x%25FF.png\""), std::string::npos);
  EXPECT_NE(page.find("href=\"../x%25FE.png\""), std::string::npos);
  // The sheet: each overlay's thumbnail, exactly (a failure tile would be grey).
  const Image sheet = load_image((dir / "sheet.png").string());
  EXPECT_EQ(count_exact(sheet, thumb256(photo_part((dir / "out" / "x%FF.png").string()))), 1);
  EXPECT_EQ(count_exact(sheet, thumb256(photo_part((dir / "out" / "x%FE.png").string()))), 1);
}
