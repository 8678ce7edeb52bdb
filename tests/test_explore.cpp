// test_explore.cpp - the explorer's data (app/explore_pack.hpp: quantised rows, block payloads, deflate,
// base64, the budget's choice) and attnmap explore's command-line errors (docs/explore.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/explore.hpp"
#include "engine/explore_pack.hpp"
#include "core/error.hpp"
#include "imagenet_head_model.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

// T rows of T softmax-like weights (positive, rows sum to 1), with row 2 constant over its patch keys.
std::vector<float> test_rows(int T, int P, unsigned seed) {
  std::mt19937 g(seed);
  std::exponential_distribution<float> e(1.0f);
  std::vector<float> m(static_cast<size_t>(T) * T);
  for (int i = 0; i < T; ++i) {
    float s = 0;
    for (int k = 0; k < T; ++k) s += m[i * T + k] = (i == 2 && k >= P) ? 0.5f : std::pow(e(g), 3.0f);
    for (int k = 0; k < T; ++k) m[i * T + k] /= s;
  }
  return m;
}

}  // namespace

// Every patch key within half a level of its row's patch range, (hi - lo) / 510; prefix keys exact; a
// constant row exact; the level is the colour-map index render's per-map min-max scale gives the value.
TEST(Explore, QuantisedRowsWithinHalfALevel) {
  const int T = 50, P = 2, N = T - P;
  const std::vector<float> m = test_rows(T, P, 7);
  QuantisedRows r;
  quantise_rows(m.data(), T, P, &r);
  ASSERT_EQ(r.q.size(), static_cast<size_t>(T * N));
  double worst = 0;
  for (int i = 0; i < T; ++i) {
    const float lo = r.lo[i], hi = r.hi[i];
    for (int k = 0; k < P; ++k) EXPECT_EQ(dequantised(r, i, k), m[i * T + k]);
    for (int k = P; k < T; ++k) {
      const double v = m[i * T + k], err = std::abs(dequantised(r, i, k) - v);
      EXPECT_LE(err, (hi - lo) / 510.0 + 1e-7 * hi) << "row " << i << " key " << k;
      if (hi > lo) {
        worst = std::max(worst, err / (hi - lo));
        const int level = static_cast<int>(static_cast<float>((v - lo) / (hi - lo)) * 255.0f + 0.5f);
        EXPECT_EQ(r.q[i * N + k - P], level);
      }
    }
  }
  EXPECT_GT(worst, 0.0015);  // the bound is reached, not loose: 1/510 = 0.00196
  EXPECT_LE(worst, 1.0 / 510 + 1e-6);
  for (int k = P; k < T; ++k) EXPECT_EQ(dequantised(r, 2, k), m[2 * T + P]);  // a constant row: exact
  EXPECT_THROW(quantise_rows(m.data(), T, T, &r), Error);
}

// The block file's bytes: every map's floats, then every map's levels; deflate and inflate are inverse;
// base64 as RFC 4648's test vectors.
TEST(Explore, PayloadDeflateBase64RoundTrip) {
  const int T = 17, P = 1;
  const std::vector<float> a = test_rows(T, P, 1), b = test_rows(T, P, 2);
  std::vector<QuantisedRows> maps(2);
  quantise_rows(a.data(), T, P, &maps[0]);
  quantise_rows(b.data(), T, P, &maps[1]);
  const std::vector<uint8_t> raw = block_payload(maps);
  const size_t floats = 2 * (2 * T + T * P) * sizeof(float);
  ASSERT_EQ(raw.size(), floats + 2 * static_cast<size_t>(T) * (T - P));
  float first_hi_of_second = 0;
  std::memcpy(&first_hi_of_second, raw.data() + (2 * T + T * P + T) * sizeof(float), sizeof(float));
  EXPECT_EQ(first_hi_of_second, maps[1].hi[0]);
  EXPECT_EQ(raw[floats + T * (T - P)], maps[1].q[0]);
  const std::vector<uint8_t> packed = deflate_bytes(raw);
  EXPECT_EQ(packed[0], 0x78);  // a zlib (RFC 1950) stream: what DecompressionStream('deflate') reads
  EXPECT_EQ(inflate_bytes(packed, raw.size()), raw);
  EXPECT_THROW(inflate_bytes(packed, raw.size() + 1), Error);
  auto b64 = [](const std::string& s) { return base64_encode(std::vector<uint8_t>(s.begin(), s.end())); };
  EXPECT_EQ(b64(""), "");
  EXPECT_EQ(b64("f"), "Zg==");
  EXPECT_EQ(b64("fo"), "Zm8=");
  EXPECT_EQ(b64("foo"), "Zm9v");
  EXPECT_EQ(b64("foobar"), "Zm9vYmFy");
}

// The fused maps always; single heads from the last block down as they fit, or only the chosen blocks;
// a budget below the fused maps is refused with what they need.
TEST(Explore, BudgetChoosesBlocks) {
  const std::vector<size_t> fused = {10, 10, 10}, heads = {50, 50, 50};
  BlockChoice c = choose_blocks(fused, heads, 1000);
  EXPECT_EQ(c.heads, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(c.bytes, 180u);
  EXPECT_TRUE(c.left_out.empty());
  c = choose_blocks(fused, heads, 130);
  EXPECT_EQ(c.heads, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(c.bytes, 130u);
  EXPECT_EQ(c.left_out, std::vector<int>{0});
  c = choose_blocks(fused, heads, 1000, {0});  // only the chosen block: the others are not "left out"
  EXPECT_EQ(c.heads, (std::vector<bool>{true, false, false}));
  EXPECT_TRUE(c.left_out.empty());
  c = choose_blocks(fused, {10, 10, 100}, 60);  // the last block does not fit: nothing after it is taken
  EXPECT_EQ(c.heads, (std::vector<bool>{false, false, false}));
  EXPECT_EQ(c.left_out, (std::vector<int>{0, 1, 2}));
  c = choose_blocks(fused, heads, 90, {2, 0});  // in the order chosen, until one does not fit
  EXPECT_EQ(c.heads, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(c.left_out, std::vector<int>{0});
  c = choose_blocks(fused, heads, 30);
  EXPECT_EQ(c.left_out, (std::vector<int>{0, 1, 2}));
  c = choose_blocks(fused, heads, 29);  // the fusions of the last two blocks fit: block 0 is left out entirely
  EXPECT_EQ(c.fused, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(c.dropped, std::vector<int>{0});
  EXPECT_EQ(c.heads, (std::vector<bool>{false, false, false}));
  EXPECT_EQ(c.left_out, (std::vector<int>{1, 2}));
  EXPECT_EQ(c.bytes, 20u);
  try {
    choose_blocks(fused, heads, 9);
    FAIL() << "a budget below the last block's fused maps must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("raise --budget-mb"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_blocks(fused, heads, 1000, {3}), Error);
}

class ExploreCli : public TempDirTest {};

// Exit 2 for bad options (before any image is read), 1 for an image that cannot be read; a page written
// with what it stores; a budget too small for the heads leaves some out and says so.
TEST_F(ExploreCli, ErrorsAndBudget) {
  const std::string img = std::string(ATTNMAP_DATA_DIR) + "/chelsea.png", out = q(dir / "x");
  for (const char* bad : {"--budget-mb 0", "--budget-mb x", "--explore-blocks 1,,2", "--explore-blocks 4",
                          "--explore-blocks -1,3", "--layer 2",
                                 "--colormap nope", "--alpha 2", "--resize odd", "--size 100", "--budget-mb ''"}) {
    const CliRun bad_run = run_attnmap("explore " + q(img) + " -o " + out + " " + std::string(bad));
    EXPECT_EQ(bad_run.status, 2) << bad << ": " << bad_run.err;
    EXPECT_FALSE(fs::exists(dir / "x" / "index.html")) << bad;
  }
  EXPECT_EQ(run_attnmap("explore " + q(img)).status, 2);  // -o is required
  EXPECT_EQ(run_attnmap("render " + q(img) + " -o " + out + " --budget-mb 4").status, 2);  // without --explore
  // A missing image: nothing to explore is bad usage, as render's nothing to render (issue 41: it was 1).
  const CliRun missing = run_attnmap("explore " + q(dir / "nope.png") + " -o " + out);
  EXPECT_EQ(missing.status, 2) << missing.err;
  EXPECT_NE(missing.err.find("nope.png: no such file or folder; nothing to explore"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(dir / "x" / "index.html")) << "nothing made";
  const CliRun ok = run_attnmap("explore " + q(img) + " -o " + out + " --budget-mb 1");
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("LEFT OUT"), std::string::npos) << ok.out;
  EXPECT_NE(ok.err.find("single heads left out"), std::string::npos) << ok.err;
  const auto rec = read_explorer_record((dir / "x" / "index.html").string());
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ((*rec)["view"], "explore");
  EXPECT_EQ((*rec)["explore"]["budget_mb"], 1.0);
  EXPECT_TRUE(fs::exists(dir / "x" / "attention.npy.json"));
  // An explorer replaces only an explorer: a folder holding the input or another file is refused (exit 2).
  fs::create_directories(dir / "own");
  fs::copy_file(img, dir / "own" / "photo.png");
  CliRun r = run_attnmap("explore " + q(dir / "own" / "photo.png") + " -o " + q(dir / "own"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("holds the input"), std::string::npos) << r.err;
  std::ofstream(dir / "x" / "notes.txt") << "mine";
  r = run_attnmap("explore " + q(img) + " -o " + out);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("notes.txt, which is not an attnmap explorer's file"), std::string::npos) << r.err;
  fs::remove(dir / "x" / "notes.txt");
  // A budget below the fused maps of every block: the last blocks' are stored, the others left out and said.
  const CliRun part = run_attnmap("explore " + q(img) + " -o " + out + " --budget-mb 0.4");
  ASSERT_EQ(part.status, 0) << part.err;
  EXPECT_NE(part.out.find("entirely"), std::string::npos) << part.out;
  EXPECT_NE(part.err.find("blocks left out entirely by --budget-mb"), std::string::npos) << part.err;
  EXPECT_FALSE(fs::exists(dir / "x" / "data" / "block00.js"));
  EXPECT_TRUE(fs::exists(dir / "x" / "data" / "block03.js"));
  const CliRun tiny = run_attnmap("explore " + q(img) + " -o " + out + " --budget-mb 0.1");
  EXPECT_EQ(tiny.status, 1) << tiny.err;
  EXPECT_NE(tiny.err.find("raise --budget-mb"), std::string::npos) << tiny.err;
}

namespace {

// The page's settings (index.html's <script id="attnmap-meta">).
nlohmann::json page_meta(const fs::path& index) {
  const std::string html = slurp(index), open = "<script type=\"application/json\" id=\"attnmap-meta\">";
  const size_t a = html.find(open), b = html.find("</script>", a);
  if (a == std::string::npos || b == std::string::npos) return nullptr;
  return nlohmann::json::parse(html.substr(a + open.size(), b - a - open.size()));
}

}  // namespace

// Issue 41: the page opens on the class token's row of the model's default view (the config's default_layer
// / default_head, else the last block's mean), pinned, and says so; a budget that left that view's heads out
// opens on the block's mean and says why. explore and stats use no classifier: no note on the head's class
// names (a 1000-class head without names gets one from render and eval).
TEST_F(ExploreCli, OpensOnTheDefaultViewsClassTokenRowAndNamesNoClass) {
  const std::string img = std::string(ATTNMAP_DATA_DIR) + "/chelsea.png";
  CliRun r = run_attnmap("explore " + q(img) + " -o " + q(dir / "full") + " --no-npy -q");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json m = page_meta(dir / "full" / "index.html");
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["start"]["view"], "L1/h3");  // the bundled model's config: default_layer 1, default_head 3
  EXPECT_EQ(m["start"]["block"], 1);
  EXPECT_EQ(m["start"]["head"], "h3");
  EXPECT_EQ(m["start"]["query"], 0);
  EXPECT_EQ(m["start"]["text"], "Opened on the class token's row of the model's default view L1/h3 (the weights' config "
                                "default_layer / default_head).");
  const std::string html = slurp(dir / "full" / "index.html");
  EXPECT_NE(html.find("query: M.start.query, pinned: true"), std::string::npos);
  EXPECT_NE(html.find("per row (its own min..max)"), std::string::npos);  // the scale control names both kinds
  EXPECT_NE(html.find("shared 0..block max"), std::string::npos);
  // A budget that keeps only the last blocks' heads: block 1's mean, and the page says why.
  r = run_attnmap("explore " + q(img) + " -o " + q(dir / "small") + " --no-npy -q --explore-blocks 3");
  ASSERT_EQ(r.status, 0) << r.err;
  m = page_meta(dir / "small" / "index.html");
  EXPECT_EQ(m["start"]["block"], 1);
  EXPECT_EQ(m["start"]["head"], "mean");
  EXPECT_NE(m["start"]["text"].get<std::string>().find("the single heads of block 1 are not stored (--budget-mb, "
                                                       "--explore-blocks): opened on the mean over heads"), std::string::npos) << m["start"].dump();
  // A torchvision-like ImageNet head without names: no note from explore or stats; a model without a
  // default view opens on the last block's mean.
  const fs::path w = attnmap_test::write_imagenet_head_model(dir / "imnet.json");
  const std::string photo = std::string(ATTNMAP_TEST_DIR) + "/fixtures/eval_top5/images/0000_coat.png";
  r = run_attnmap("explore " + q(photo) + " -w " + q(w) + " -o " + q(dir / "imnet"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("ImageNet-1k"), std::string::npos) << r.err;
  m = page_meta(dir / "imnet" / "index.html");
  EXPECT_EQ(m["start"]["view"], "L1/mean");
  EXPECT_EQ(m["start"]["text"], "Opened on the class token's row of the model's default view L1/mean (the last block, mean "
                                "over heads).");
  r = run_attnmap("stats " + q(photo) + " -w " + q(w) + " -o " + q(dir / "stats"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("ImageNet-1k"), std::string::npos) << r.err;
  r = run_attnmap("render " + q(photo) + " -w " + q(w) + " -o " + q(dir / "render"));  // render names classes
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("assumed to be ImageNet-1k's"), std::string::npos) << r.err;
}
