// test_stats.cpp - `attnmap stats` (issue 27) against NumPy references written by
// tools/make_stats_fixtures.py from the explicit float64 PyTorch pass (fixture_lib.vit_reference): the maths on
// the saved attentions and hidden states, the same numbers through attnmap's forward pass, and the command on
// data/composites against the reference of the bundled model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/provenance.hpp"
#include "draw/colormap.hpp"
#include "draw/plots.hpp"
#include "io/image_io.hpp"
#include "checkpoint/weights.hpp"
#include "io/npy.hpp"
#include "maps/head_stats.hpp"
#include "model/vit.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(slurp(path)); }

/// A JSON (L, H) or (L) array (null = NaN) flattened into floats.
std::vector<float> flat(const nlohmann::json& j) {
  std::vector<float> v;
  if (j.is_array()) {
    for (const auto& e : j) {
      const std::vector<float> s = flat(e);
      v.insert(v.end(), s.begin(), s.end());
    }
  } else {
    v.push_back(j.is_null() ? NAN : j.get<float>());
  }
  return v;
}

/// The statistics of one image as the expected.json arrays are laid out (L, H) / (L, H, P-1) / (L).
struct Got {
  std::vector<float> distance, entropy, cls_self, cls_to, cls_patches;
  std::vector<float> cls, registers, patch_mean, patch_median, patch_max, threshold, outliers;
};

void add_block(Got& g, const BlockHeadStats& b, const NormSummary& n) {
  g.distance.insert(g.distance.end(), b.distance_px.begin(), b.distance_px.end());
  g.entropy.insert(g.entropy.end(), b.entropy.begin(), b.entropy.end());
  g.cls_self.insert(g.cls_self.end(), b.cls_self.begin(), b.cls_self.end());
  g.cls_to.insert(g.cls_to.end(), b.cls_prefix.begin(), b.cls_prefix.end());
  g.cls_patches.insert(g.cls_patches.end(), b.cls_patches.begin(), b.cls_patches.end());
  for (auto [dst, v] : {std::pair{&g.cls, n.cls}, {&g.registers, n.registers}, {&g.patch_mean, n.patch_mean},
                        {&g.patch_median, n.patch_median}, {&g.patch_max, n.patch_max}, {&g.threshold, n.threshold},
                        {&g.outliers, static_cast<double>(n.outliers)}})
    dst->push_back(static_cast<float>(v));
}

/// NaN in both places counts as equal (a model without registers); all_close on the rest.
std::vector<float> nan_to_zero(std::vector<float> v) {
  for (float& x : v)
    if (std::isnan(x)) x = 0.0f;
  return v;
}

/// Compares every statistic with expected.json; `scale` multiplies the tolerances (1: same float32 inputs).
void expect_matches(const Got& g, const nlohmann::json& e, double scale) {
  const auto& h = e["heads"];
  const auto& n = e["norms"];
  EXPECT_TRUE(all_close(g.distance, flat(h["mean_distance_px"]), 1e-4 * scale, "mean distance (px)"));
  EXPECT_TRUE(all_close(g.entropy, flat(h["entropy_nats"]), 1e-6 * scale, "entropy (nats)"));
  EXPECT_TRUE(all_close(g.cls_self, flat(h["cls_self"]), 1e-7 * scale, "class token to itself"));
  EXPECT_TRUE(all_close(g.cls_to, flat(h["cls_to"]), 1e-7 * scale, "class token to the other prefix tokens"));
  EXPECT_TRUE(all_close(g.cls_patches, flat(h["cls_patches"]), 1e-7 * scale, "class token to the patches"));
  EXPECT_TRUE(all_close(g.cls, flat(n["cls"]), 1e-5 * scale, "class token norm"));
  EXPECT_TRUE(all_close(nan_to_zero(g.registers), nan_to_zero(flat(n["registers"])), 1e-5 * scale, "register norm"));
  EXPECT_TRUE(all_close(g.patch_mean, flat(n["patch_mean"]), 1e-5 * scale, "patch norm mean"));
  EXPECT_TRUE(all_close(g.patch_median, flat(n["patch_median"]), 1e-5 * scale, "patch norm median"));
  EXPECT_TRUE(all_close(g.patch_max, flat(n["patch_max"]), 1e-5 * scale, "patch norm max"));
  EXPECT_TRUE(all_close(g.threshold, flat(n["threshold"]), 1e-5 * scale, "outlier threshold"));
  EXPECT_TRUE(all_close(g.outliers, flat(n["outliers"]), 0.0, "outlier count"));
}

TokenLayout layout_of(const nlohmann::json& e, int heads) {
  return TokenLayout{heads, e["prefix"].get<int>(), true, e["grid"][0].get<int>(), e["grid"][1].get<int>(), e["patch"].get<int>()};
}

const char* const kModels[] = {"timm_small", "deit_distilled", "dinov2_fb"};

}  // namespace

// The maths alone, on the attentions and hidden states the reference PyTorch pass saved.
TEST(StatsMaths, MatchesNumPyOnTheSavedAttentionsAndHiddenStates) {
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    const std::string dir = fixture(std::string("stats/") + name + "/");
    const nlohmann::json e = read_json(dir + "expected.json");
    std::vector<int64_t> as, hs;
    const std::vector<float> attn = read_npy(dir + "attn.npy", &as), hid = read_npy(dir + "hidden.npy", &hs);
    ASSERT_EQ(as.size(), 4u);
    ASSERT_EQ(hs.size(), 3u);
    const TokenLayout lay = layout_of(e, static_cast<int>(as[1]));
    ASSERT_EQ(lay.tokens(), as[2]);
    const std::vector<double> dist = patch_distances(lay.grid_w, lay.grid_h, lay.patch);
    Got g;
    const size_t T = static_cast<size_t>(as[2]), D = static_cast<size_t>(hs[2]);
    for (int64_t l = 0; l < as[0]; ++l) {
      const BlockHeadStats b = block_head_stats(&attn[static_cast<size_t>(l) * static_cast<size_t>(as[1]) * T * T], lay, dist);
      const std::vector<float> norms = token_norms(&hid[static_cast<size_t>(l) * T * D], static_cast<int>(T), static_cast<int>(D));
      add_block(g, b, summarize_norms(norms, lay, e["registers"].get<int>(), e["outlier_k"].get<double>()));
    }
    expect_matches(g, e, 1.0);
  }
}

// The same numbers from attnmap's own forward pass (float32) on the fixture's input, through on_probs and
// on_tokens; the callbacks change nothing else (the class rows agree with a pass without them).
TEST(StatsForward, MatchesNumPyThroughTheModelsForwardPass) {
  const char* const folders[] = {"timm_small", "layouts/deit_distilled", "layouts/dinov2_fb"};
  for (int m = 0; m < 3; ++m) {
    SCOPED_TRACE(kModels[m]);
    const nlohmann::json e = read_json(fixture(std::string("stats/") + kModels[m] + "/expected.json"));
    const ViTWeights w = load_model(fixture(std::string(folders[m]) + "/weights.json"));
    std::vector<int64_t> shape;
    const std::vector<float> x = read_npy(fixture(std::string(folders[m]) + "/input.npy"), &shape);
    const TokenLayout lay = layout_of(e, w.hp.num_heads);
    ASSERT_EQ(lay.tokens(), w.hp.tokens());
    const std::vector<double> dist = patch_distances(lay.grid_w, lay.grid_h, lay.patch);
    std::vector<BlockHeadStats> blocks(static_cast<size_t>(w.hp.depth));
    std::vector<std::vector<float>> norms(blocks.size());
    ForwardOptions fo;
    fo.on_probs = [&](int, int l, const float* p) { blocks[static_cast<size_t>(l)] = block_head_stats(p, lay, dist); };
    fo.on_tokens = [&](int, int l, const float* t) { norms[static_cast<size_t>(l)] = token_norms(t, w.hp.tokens(), w.hp.dim); };
    const ForwardResult with = vit_forward(w, x.data(), fo);
    Got g;
    for (size_t l = 0; l < blocks.size(); ++l)
      add_block(g, blocks[l], summarize_norms(norms[l], lay, e["registers"].get<int>(), e["outlier_k"].get<double>()));
    expect_matches(g, e, 20.0);
    const ForwardResult plain = vit_forward(w, x.data(), ForwardOptions{});
    // (the plain pass computes the last block's class row alone: equal to 1e-6, docs/computation.md)
    EXPECT_TRUE(all_close(with.cls_attn, plain.cls_attn, 1e-6, "class rows with and without the callbacks"));
  }
}

TEST(StatsMaths, DistancesMediansAndTheOutlierRule) {
  const std::vector<double> d = patch_distances(3, 2, 16);  // 2 rows of 3 patches
  EXPECT_DOUBLE_EQ(d[0 * 6 + 5], 16 * std::sqrt(5.0));      // (0,0) to (1,2)
  EXPECT_DOUBLE_EQ(d[1 * 6 + 4], 16.0);                     // (0,1) to (1,1)
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2, 10}), 2.5);
  // norms 1..9 and 100: median 5.5, MAD 2.5 -> threshold 5.5 + 5 * 1.4826 * 2.5; only 100 is over it.
  const std::vector<float> n = {0.0f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100};  // token 0: the class token
  const NormSummary s = summarize_norms(n, TokenLayout{1, 1, true, 10, 1, 16}, 0, 5.0);
  EXPECT_DOUBLE_EQ(s.threshold, 5.5 + 5 * 1.4826 * 2.5);
  EXPECT_EQ(s.outliers, 1);
  EXPECT_EQ(prefix_token_names(1, 2), (std::vector<std::string>{"dist", "reg0", "reg1"}));
}

class StatsCli : public TempDirTest {};

namespace {
bool same(const uint8_t* p, const uint8_t* q) { return p[0] == q[0] && p[1] == q[1] && p[2] == q[2]; }
// Pixels darker than 100 in every channel in rows [y0, y1): text ink.
int ink(const Image& im, int y0, int y1) {
  int n = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = 0; x < im.width; ++x) {
      const uint8_t* p = &im.rgb[(static_cast<size_t>(y) * im.width + x) * 3];
      n += p[0] < 100 && p[1] < 100 && p[2] < 100;
    }
  return n;
}
}  // namespace

// An outlier map is a figure: the picture 1:1 under a title, the norms' colour bar at its right (viridis
// from vmax at the top to vmin at the bottom, the picture's height) with the threshold marked white across
// it at its place on the scale.
TEST_F(StatsCli, OutlierFigureHasTitlePictureAndColourBarWithTheThreshold) {
  Image pic;
  pic.width = 120;
  pic.height = 80;
  for (int i = 0; i < pic.width * pic.height; ++i) pic.rgb.insert(pic.rgb.end(), {17, 200, 90});
  OutlierFigure fig;
  fig.title = "Token norms after block 3 (0-based, of 4); outlined: 2 of 196 patches above the outlier threshold 41.5";
  fig.scale = Scale{10.0, 50.0, "token norm (L2, residual stream)"};
  fig.threshold = 40.0;
  fig.cmap = colormap_table("viridis");
  const fs::path path = dir / "o.png";
  write_outlier_figure(path.string(), pic, fig, 72.0, "{\"command\":\"stats\"}");
  const Image im = load_image(path.string());
  bool recorded = false;
  for (const PngText& t : read_png_text(path.string())) recorded = recorded || (t.keyword == "attnmap" && t.text == "{\"command\":\"stats\"}");
  EXPECT_TRUE(recorded);
  // The picture, whole, once: its top-left corner and every one of its pixels.
  int px = -1, py = -1, n = 0;
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x)
      if (same(&im.rgb[(static_cast<size_t>(y) * im.width + x) * 3], pic.rgb.data())) {
        if (px < 0) px = x, py = y;
        ++n;
      }
  ASSERT_EQ(n, 120 * 80);
  EXPECT_GT(ink(im, 0, py), 200);  // the title over it
  // The colour bar: the first column right of the picture whose second row is viridis near its top (the
  // 256-colour gradient drawn 80 rows high: row 1 samples about 1 - 1.5/80) and whose second-last row is
  // near its bottom; the threshold 40 on 10..50 a quarter of the way down, drawn white across the bar.
  auto near = [](const uint8_t* p, const uint8_t* q) {
    return std::abs(p[0] - q[0]) <= 12 && std::abs(p[1] - q[1]) <= 12 && std::abs(p[2] - q[2]) <= 12;
  };
  const auto at = [&](int x, int y) { return &im.rgb[(static_cast<size_t>(y) * im.width + x) * 3]; };
  const uint8_t* top = colormap_lookup(fig.cmap, 1.0f - 1.5f / 80.0f);
  const uint8_t* bottom = colormap_lookup(fig.cmap, 1.5f / 80.0f);
  int bx = -1;
  for (int x = px + 120; x < im.width && bx < 0; ++x)
    if (near(at(x, py + 1), top) && near(at(x + 2, py + 78), bottom)) bx = x;
  ASSERT_GE(bx, 0);
  const int ty = py + static_cast<int>(std::lround(80 * (1.0 - 30.0 / 40.0)));
  const uint8_t white[3] = {255, 255, 255};
  bool marked = false;
  for (int y = ty - 1; y <= ty + 1; ++y) marked = marked || same(at(bx + 4, y), white);
  EXPECT_TRUE(marked);
  EXPECT_FALSE(same(at(bx + 4, ty + 8), white));  // the mark is a line, not the bar
  EXPECT_GT(ink(im, py, py + 80), 100);  // tick labels and the units beside the bar
  EXPECT_GT(im.width, 120 + 60);
}

// The done-when of issue 27: the composites folder run reproduces the NumPy reference of the bundled model
// (tests/fixtures/stats/composites.json): distances within 2e-3 px, entropies 1e-4 nats, class-token
// attention 1e-5, norms 2e-3; the CSV and JSON shapes; the figures with their record.
TEST_F(StatsCli, CompositesFolderReproducesTheNumPyReference) {
  const CliRun r = run_attnmap("stats " + q(std::string(ATTNMAP_DATA_DIR) + "/composites") + " -o " + q(dir) +
                               " -q -j 2 --figure-format png,svg");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json ref = read_json(fixture("stats/composites.json"));
  const nlohmann::json got = read_json((dir / "stats.json").string());
  EXPECT_EQ(got["images"].get<size_t>(), ref["images"].size());
  EXPECT_TRUE(all_close(flat(got["heads"]["mean_distance_px"]), flat(ref["heads"]["mean_distance_px"]), 2e-3, "mean distance (px)"));
  EXPECT_TRUE(all_close(flat(got["heads"]["entropy_nats"]), flat(ref["heads"]["entropy_nats"]), 1e-4, "entropy"));
  EXPECT_TRUE(all_close(flat(got["heads"]["cls_self"]), flat(ref["heads"]["cls_self"]), 1e-5, "class token to itself"));
  EXPECT_TRUE(all_close(flat(got["heads"]["cls_patches"]), flat(ref["heads"]["cls_patches"]), 1e-5, "class token to patches"));
  for (const char* k : {"cls", "patch_mean", "patch_median", "patch_max", "outliers_mean_per_image"})
    EXPECT_TRUE(all_close(flat(got["norms"][k]), flat(ref["norms"][k]), 2e-3, k));
  const int L = 4, H = 4, n = 24;
  auto lines = [](const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); };
  const std::string heads = slurp(dir / "heads.csv");
  EXPECT_EQ(heads.substr(0, heads.find('\n')), "block,head,mean_distance_px,entropy_nats,cls_self,cls_patches");
  EXPECT_EQ(lines(heads), 1 + L * H);
  EXPECT_EQ(lines(slurp(dir / "heads_per_image.csv")), 1 + n * L * H);
  EXPECT_EQ(lines(slurp(dir / "norms.csv")), 1 + n * L);
  EXPECT_EQ(got["per_image"].size(), static_cast<size_t>(n));
  for (const char* f : {"attention_distance.png", "attention_distance.svg", "token_norms.png", "token_norms.svg"}) {
    const auto rec = read_figure_record((dir / f).string());
    ASSERT_TRUE(rec) << f;
    EXPECT_EQ((*rec)["command"], "stats") << f;
  }
  int maps = 0;
  for (const auto& e : fs::directory_iterator(dir / "outliers")) {
    maps += read_png_provenance(e.path().string()) ? 1 : 0;
    // A figure: the photo (as wide) with a colour bar beside it, a title above.
    const Image photo = load_image(std::string(ATTNMAP_DATA_DIR) + "/composites/" + e.path().filename().string());
    const Image map = load_image(e.path().string());
    EXPECT_GT(map.width, photo.width + 40) << e.path();
    EXPECT_GT(map.height, photo.height + 20) << e.path();
  }
  EXPECT_EQ(maps, n);
}

// Exit 1 when an input fails (the others' statistics are still written, the failure listed); 2 for usage
// errors, before any image. Registers: the class token's attention to each register is a column.
TEST_F(StatsCli, ExitCodesAndPrefixColumns) {
  const std::string bad = (dir / "broken.png").string();
  std::ofstream(bad) << "not a png";
  const std::string photo = std::string(ATTNMAP_DATA_DIR) + "/composites/0002_bag.png";
  const std::string w = " -w " + q(fixture("layouts/dinov2_fb/weights.json"));
  const CliRun r = run_attnmap("stats " + q(photo) + " " + q(bad) + w + " -o " + q(dir / "out") + " -q");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("broken.png"), std::string::npos) << r.err;
  const std::string heads = slurp(dir / "out" / "heads.csv");
  EXPECT_EQ(heads.substr(0, heads.find('\n')),
            "block,head,mean_distance_px,entropy_nats,cls_self,cls_patches,cls_to_reg0,cls_to_reg1,cls_to_reg2,cls_to_reg3");
  const nlohmann::json j = read_json((dir / "out" / "stats.json").string());
  EXPECT_EQ(j["images"], 1);
  EXPECT_EQ(j["failed"].size(), 1u);
  for (const char* args : {"--bins 0", "--outlier-k -1", "--figure-format gif", "--norm-block 9", "--size 0"}) {
    const CliRun u = run_attnmap("stats " + q(photo) + w + " -o " + q(dir / "usage") + " " + std::string(args));
    EXPECT_EQ(u.status, 2) << args << ": " << u.err;
    EXPECT_FALSE(fs::exists(dir / "usage" / "stats.json")) << args;
  }
  EXPECT_EQ(run_attnmap("stats " + q(photo)).status, 2);  // no -o
}

// --manifest never replaces a file that is not a manifest, as render's: an input, the weights, another image,
// one of the run's own outputs (each refused, exit 2, the file's bytes untouched); a bad -o is one usage error
// in render's words; a manifest of its own is appended to again.
TEST_F(StatsCli, AManifestNeverReplacesAnotherFileAndABadOutIsOneUsageError) {
  fs::create_directories(dir / "in");
  const std::string photo = (dir / "in" / "bag.png").string(), other = (dir / "in" / "coat.png").string();
  fs::copy_file(std::string(ATTNMAP_DATA_DIR) + "/composites/0002_bag.png", photo);
  fs::copy_file(std::string(ATTNMAP_DATA_DIR) + "/composites/0003_coat.png", other);
  const std::string weights = (dir / "w.json").string();
  fs::copy_file(fixture("layouts/dinov2_fb/weights.json"), weights);
  fs::copy_file(fixture("layouts/dinov2_fb/config.json"), dir / "config.json");  // its heads, beside it
  const std::string out = (dir / "out").string();
  ASSERT_EQ(run_attnmap("stats " + q(photo) + " -w " + q(weights) + " -o " + q(out) + " -q").status, 0);
  for (const std::string& victim : {photo, other, weights, out + "/heads.csv", out + "/outliers/bag.png"}) {
    const std::string before = slurp(victim);
    const CliRun r = run_attnmap("stats " + q(photo) + " -w " + q(weights) + " -o " + q(out) + " -q --manifest " + q(victim));
    EXPECT_EQ(r.status, 2) << victim << ": " << r.err;
    EXPECT_NE(r.err.find("--manifest " + victim), std::string::npos) << r.err;
    EXPECT_EQ(slurp(victim), before) << victim;
  }
  const CliRun file_as_out = run_attnmap("stats " + q(photo) + " -w " + q(weights) + " -o " + q(other) + " -q");
  EXPECT_EQ(file_as_out.status, 2);
  EXPECT_NE(file_as_out.err.find(other + ": the output folder exists and is not a folder"), std::string::npos) << file_as_out.err;
  const std::string manifest = (dir / "m.jsonl").string();
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(run_attnmap("stats " + q(photo) + " -w " + q(weights) + " -o " + q(out) + " -q --manifest " + q(manifest)).status, 0);
  const std::string rows = slurp(manifest);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 2) << "a header and one row: " << rows;
}

// stats' figures wider than cairo's 32767 pixels (--width-in x --dpi) and a negative -j are usage errors before
// the model loads, -j in render's words.
TEST_F(StatsCli, TooWideFiguresAndABadJobsAreRendersUsageErrors) {
  const std::string photo = q(std::string(ATTNMAP_DATA_DIR) + "/composites/0002_bag.png");
  std::ofstream((dir / "not_weights.json").string()) << "x";
  const std::string args = photo + " -w " + q(dir / "not_weights.json") + " -o " + q(dir / "out");
  CliRun r = run_attnmap("stats " + args + " --width-in 100 --dpi 400 --figure-format png,svg");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err, "attnmap: error: figures 100 in wide at 400 dpi would be 40000 pixels wide, over cairo's limit of "
                   "32767 pixels a side: --dpi 327 or lower at this width, or --width-in 81.9 or less at this dpi; its "
                   "PDF and SVG figures are laid out in the same pixels at --dpi and held to the same limit\n");
  r = run_attnmap("stats " + args + " -j -1");
  EXPECT_EQ(r.status, 2) << r.err;
  const CliRun render = run_attnmap("render " + args + " -j -1");
  EXPECT_EQ(render.status, 2) << render.err;
  EXPECT_EQ(r.err, render.err);
  EXPECT_EQ(r.err, "attnmap: error: --jobs must be >= 1 (or 0 for the number of cores), found -1\n");
  EXPECT_FALSE(fs::exists(dir / "out"));
  r = run_attnmap("stats " + photo + " -w " + q(fixture("layouts/dinov2_fb/weights.json")) + " -o " + q(dir / "one"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(" (1 image)\n"), std::string::npos) << r.err;  // not "1 images"
}
