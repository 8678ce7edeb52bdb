// The views end to end through the attnmap binary: a hand-built model whose class token looks at one known
// patch (non-square grid and photo, --size), --rollout, --threshold, --heads-grid, --all-heads, bad values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "maps/attention_maps.hpp"
#include "draw/figures.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "model/preprocess.hpp"
#include "test_util.hpp"
#include "model/vit.hpp"
#include "checkpoint/weights.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {


// A seed-layout model (the guide's single attention layer) built by hand: patch 4, no W_E (the token is the
// 48-value pixel vector), one head with d_k = 1, input 48 x 16 pixels -> grid 4 rows x 12 columns.
// The class token is e_0 and W_Q reads component 0, so q_cls = 1; W_K reads component 1, and the position
// embedding adds 50 to component 1 of patch (hot_row, hot_col) only. Pixel values are in [0, 1] (mean 0,
// std 1), so that patch's key beats every other by at least 49: the class token's attention is one-hot on
// it (e^-49 elsewhere).
void write_one_hot_model(const fs::path& path, int hot_row, int hot_col) {
  const int P = 4, D = 3 * P * P, gh = 4, gw = 12, T = 1 + gh * gw;
  nlohmann::json j;
  std::vector<std::vector<float>> wq(D, std::vector<float>(1, 0.0f)), wk = wq, wv = wq;
  wq[0][0] = 1.0f;
  wk[1][0] = 1.0f;
  wv[2][0] = 1.0f;
  std::vector<float> cls(D, 0.0f);
  cls[0] = 1.0f;
  std::vector<std::vector<float>> pos(T, std::vector<float>(D, 0.0f));
  pos[static_cast<size_t>(1 + hot_row * gw + hot_col)][1] = 50.0f;
  j["W_Q"] = wq;
  j["W_K"] = wk;
  j["W_V"] = wv;
  j["cls_token"] = cls;
  j["pos_embed"] = pos;
  j["config"] = {{"patch_size", P}, {"image_size", {16, 48}}, {"mean", {0, 0, 0}}, {"std", {1, 1, 1}}};
  std::ofstream(path) << j.dump();
}

// A 3:1 photo (96 x 32) with a soft gradient, so that the overlay differs from a blank.
void write_wide_photo(const fs::path& path) {
  Image img;
  img.width = 96;
  img.height = 32;
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 96; ++x)
      img.rgb.insert(img.rgb.end(), {static_cast<uint8_t>(60 + x), static_cast<uint8_t>(80 + 2 * y), 100});
  write_png(path.string(), img);
}

// Bounding box of the pixels whose first channel is the image's maximum.
struct Bright {
  int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1;
};
Bright brightest(const Image& img) {
  int mx = 0;
  for (size_t i = 0; i < img.rgb.size(); i += 3) mx = std::max(mx, static_cast<int>(img.rgb[i]));
  Bright b;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x)
      if (img.rgb[(static_cast<size_t>(y) * static_cast<size_t>(img.width) + static_cast<size_t>(x)) * 3] ==
          mx) {
        b.x0 = std::min(b.x0, x);
        b.y0 = std::min(b.y0, y);
        b.x1 = std::max(b.x1, x);
        b.y1 = std::max(b.y1, y);
      }
  return b;
}

class ViewsCli : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    write_one_hot_model(dir / "bottom_left.json", 3, 0);
    write_one_hot_model(dir / "top_right.json", 0, 11);
    write_wide_photo(dir / "wide.png");
  }
  std::string render(const std::string& model, const std::string& extra, const std::string& out = "out",
                     const std::string& alpha = "1") const {
    return "render " + q(dir / "wide.png") + " -w " + q(dir / model) + " -o " + q(dir / out) +
           " --colormap gray --alpha " + alpha + " --no-legend " + extra;  // bare overlays: their pixels are checked
  }
};

const std::string kData = ATTNMAP_DATA_DIR;

}  // namespace

TEST_F(ViewsCli, HotSpotLandsInTheRightCornerOfANonSquarePhoto) {
  for (const char* model : {"bottom_left.json", "top_right.json"}) {
    const bool bl = std::string(model) == "bottom_left.json";
    const CliRun r = run_attnmap(render(model, "--save-raw --upsample nearest"));
    ASSERT_EQ(r.status, 0) << r.err;
    std::vector<int64_t> shape;
    const std::vector<float> map = read_npy((dir / "out" / "wide.npy").string(), &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{4, 12}));  // (grid_h, grid_w): 4 rows, 12 columns, not transposed
    const size_t hot = bl ? 3 * 12 + 0 : 11;
    EXPECT_GT(map[hot], 0.999f);
    const Image out = load_image((dir / "out" / "wide.png").string());
    ASSERT_EQ(out.width, 96);
    ASSERT_EQ(out.height, 32);
    // Photo 96 x 32, grid 12 x 4: each patch covers 8 x 8 photo pixels; gray map at alpha 1 -> white = hot.
    const Bright b = brightest(out);
    EXPECT_EQ(out.rgb[(static_cast<size_t>(b.y0) * 96 + static_cast<size_t>(b.x0)) * 3], 255);
    if (bl) {
      EXPECT_EQ(b.x0, 0);
      EXPECT_EQ(b.x1, 7);
      EXPECT_EQ(b.y0, 24);
      EXPECT_EQ(b.y1, 31);
    } else {
      EXPECT_EQ(b.x0, 88);
      EXPECT_EQ(b.x1, 95);
      EXPECT_EQ(b.y0, 0);
      EXPECT_EQ(b.y1, 7);
    }
  }
}

TEST_F(ViewsCli, SizeResamplesPositionsAndKeepsTheCorner) {
  // --size 96,32 (W,H): grid 8 rows x 24 columns; the resampled hot position stays bottom-left.
  const CliRun r = run_attnmap(render("bottom_left.json", "--size 96,32 --save-raw"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<int64_t> shape;
  const std::vector<float> map = read_npy((dir / "out" / "wide.npy").string(), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{8, 24}));
  EXPECT_GT(map[7 * 24 + 0], 0.99f);  // bicubic 4->8 rows, 12->24 columns: (3, 0) -> (7, 0) is the peak
  const Image out = load_image((dir / "out" / "wide.png").string());
  const Bright b =
      brightest(out);  // bilinear upsampling: the hottest pixels sit in the corner cell (4 x 4 px)
  EXPECT_LE(b.x1, 3);
  EXPECT_GE(b.y0, 28);
  // --size 64 (square) on the same photo: grid 16 x 16; still bottom-left of the (squashed) photo.
  ASSERT_EQ(run_attnmap(render("bottom_left.json", "--size 64 --save-raw", "sq")).status, 0);
  const std::vector<float> sq = read_npy((dir / "sq" / "wide.npy").string(), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(std::max_element(sq.begin(), sq.end()) - sq.begin(), 15 * 16 + 0);
}

TEST_F(ViewsCli, RolloutOfOneLayerIsHalfResidual) {
  // One layer: (A + I)/2 row-normalised; the class row is 0.5 on itself and ~0.5 on the hot patch.
  const CliRun r = run_attnmap(render("top_right.json", "--rollout --save-raw"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<int64_t> shape;
  const std::vector<float> map = read_npy((dir / "out" / "wide.npy").string(), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{4, 12}));
  EXPECT_NEAR(map[11], 0.5f, 1e-6);
  for (size_t i = 0; i < 11; ++i) EXPECT_LT(map[i], 1e-6f);
  ASSERT_EQ(run_attnmap(render("top_right.json", "--rollout --discard 0.9 --save-raw", "d")).status, 0);
  EXPECT_NEAR(read_npy((dir / "d" / "wide.npy").string(), &shape)[11], 0.5f, 1e-6);
}

TEST_F(ViewsCli, ThresholdFillsOnlyTheKeptPatch) {
  const CliRun r = run_attnmap(render("top_right.json", "--threshold 0.6 --upsample nearest", "out", "0.5"));
  ASSERT_EQ(r.status, 0) << r.err;
  const Image photo = load_image((dir / "wide.png").string());
  const Image out = load_image((dir / "out" / "wide.png").string());
  // The mask is the one hot patch (columns 88..95, rows 0..7): the rest of the photo is untouched, the patch
  // is filled (white at 50%) inside and outlined opaque white (1 px at this size) along its contour.
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 96; ++x) {
      const size_t i = (static_cast<size_t>(y) * 96 + static_cast<size_t>(x)) * 3;
      const bool in = x >= 88 && y < 8;
      if (!in) {
        ASSERT_EQ(out.rgb[i], photo.rgb[i]) << x << "," << y;
      } else if (x == 88 || x == 95 || y == 0 || y == 7) {
        ASSERT_EQ(out.rgb[i], 255) << "outline at " << x << "," << y;
      } else {
        ASSERT_EQ(out.rgb[i], static_cast<uint8_t>(std::lround(0.5 * photo.rgb[i] + 0.5 * 255)))
            << x << "," << y;
      }
    }
}

TEST_F(ViewsCli, HeadsGridSheetAndAllHeadsNpy) {
  // The bundled default model has 4 heads: 5 tiles -> 3 columns x 2 rows of 224 x 149 (chelsea is 451 x 300),
  // a colour bar at the right (the layout itself is pinned by the golden test Figures.HeadsGridMatchesGolden).
  const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir / "g") +
                          " --heads-grid --save-raw --all-heads");
  ASSERT_EQ(r.status, 0) << r.err;
  const Image sheet = load_image((dir / "g" / "chelsea.heads.png").string());
  EXPECT_GT(sheet.width, 3 * 224 + 100);
  EXPECT_LT(sheet.width, 3 * 224 + 300);
  EXPECT_GT(sheet.height, 2 * 149 + 60);
  EXPECT_LT(sheet.height, 2 * 149 + 250);
  // --strip heads is the same figure (the same pixels; the settings records differ by --all-heads).
  ASSERT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir / "sh") + " --strip heads").status, 0);
  EXPECT_TRUE(load_image((dir / "sh" / "chelsea.heads.png").string()).rgb == sheet.rgb);
  EXPECT_TRUE(fs::exists(dir / "g" / "chelsea.png"));
  std::vector<int64_t> shape;
  const std::vector<float> all = read_npy((dir / "g" / "chelsea.npy").string(), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{4, 14, 14}));
  // Slice 2 is exactly what --head 2 writes.
  ASSERT_EQ(
      run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir / "h2") + " --head 2 --save-raw").status, 0);
  const std::vector<float> h2 = read_npy((dir / "h2" / "chelsea.npy").string(), &shape);
  EXPECT_EQ(std::vector<float>(all.begin() + 2 * 196, all.begin() + 3 * 196), h2);
  // With --size 448 the sheet keeps its tiles and the .npy follows the 28 x 28 grid.
  ASSERT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir / "s") +
                " --size 448 --save-raw --all-heads")
                .status,
            0);
  read_npy((dir / "s" / "chelsea.npy").string(), &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{4, 28, 28}));
  // A font that is not there is a clear usage error.
  const CliRun nofont =
      run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir / "nf") + " --heads-grid");
  EXPECT_EQ(nofont.status, 0);
  const std::string env = "ATTNMAP_FONT=/nonexistent.ttf ";
  const std::string cmd = env + "'" + ATTNMAP_BIN + "' render " + q(kData + "/chelsea.png") + " -o " +
                          q(dir / "nf2") + " --heads-grid >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  EXPECT_FALSE(fs::exists(dir / "nf2" / "chelsea.png"));
  // A font file FreeType cannot read is a usage error naming it; NAME.png's legend needs the font too (the
  // error then says --no-legend), a bare overlay (--no-legend) none at all.
  const fs::path empty = dir / "empty.ttf";
  std::ofstream(empty, std::ios::binary).flush();
  const CliRun bad = run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir / "nf3") + " --heads-grid",
                                 "ATTNMAP_FONT=" + q(empty) + " ");
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_NE(bad.err.find("not a font FreeType can read (0 bytes)"), std::string::npos) << bad.err;
  const CliRun legend = run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir / "nf4"), "ATTNMAP_FONT=" + q(empty) + " ");
  EXPECT_EQ(legend.status, 2) << legend.err;
  EXPECT_NE(legend.err.find("--no-legend"), std::string::npos) << legend.err;
  EXPECT_FALSE(fs::exists(dir / "nf4" / "chelsea.png"));
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir / "nf5") + " --no-legend",
                        "ATTNMAP_FONT=" + q(empty) + " ")
                .status,
            0);
  EXPECT_FALSE(fs::exists(dir / "nf3" / "chelsea.png"));
}

TEST_F(ViewsCli, BadViewValuesAreStatus2) {
  const std::string base = "render " + q(kData + "/chelsea.png") + " -o " + q(dir / "bad") + " ";
  for (const char* bad :
       {"--rollout --discard -0.1", "--rollout --discard 1.5", "--rollout --discard abc", "--discard 0.5",
        "--threshold 0", "--threshold 1.2", "--threshold -1", "--threshold x", "--size 100", "--size 0",
        "--size abc", "--size 64,32,16", "--size 224,", "--size 448,100", "--size 4096", "--size 65536", "--all-heads",
        "--rollout --save-raw --all-heads"}) {
    const CliRun r = run_attnmap(base + bad);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << bad;
  }
  EXPECT_FALSE(fs::exists(dir / "bad"));
  // Happy paths of each option on the default model.
  for (const char* ok :
       {"--rollout", "--rollout --discard 0.9 --head max", "--threshold 0.6", "--threshold 1", "--size 448",
        "--size 320,224", "--heads-grid --threshold 0.5", "--layer 0 --head 1 --heads-grid"}) {
    const CliRun r = run_attnmap(base + ok);
    EXPECT_EQ(r.status, 0) << ok << ": " << r.err;
  }
}

TEST_F(ViewsCli, HeadsSheetNeverReplacesAnotherInputsOverlay) {
  // Inputs x.png and x.heads.png: x's sheet would be x.heads.png, the other input's overlay - refused.
  fs::create_directories(dir / "in");
  fs::copy_file(dir / "wide.png", dir / "in" / "x.png");
  fs::copy_file(dir / "wide.png", dir / "in" / "x.heads.png");
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -w " + q(dir / "top_right.json") + " -o " +
                          q(dir / "o") + " --heads-grid");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("would overwrite the overlay of another input"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "o" / "x.heads.png"));
  EXPECT_TRUE(fs::exists(dir / "o" / "x.heads.heads.png"));
  EXPECT_FALSE(fs::exists(dir / "o" / "x.png"));
}

TEST_F(ViewsCli, RolloutFileEqualsRolloutOfTheFullMatrices) {
  // The CLI consumes each layer's probabilities as they are computed (RolloutAccumulator via on_probs); the
  // result must equal attention_rollout over keep_full's (L, H, T, T) for the same image and model
  // (the non-square views_rollout model, whose rollout matches PyTorch in test_views.cpp; and timm_small,
  // which has a classifier head, so the forward pass runs past the drawn layer for the logits).
  for (const char* fx : {"views_rollout", "timm_small"}) {
    const std::string w = fixture(std::string(fx) + "/weights.json");
    for (const char* layer : {"0", "-1"}) {
      const std::string out = std::string(fx) + layer;
      const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " -w " + q(w) + " -o " + q(dir / out) +
                              " --rollout --discard 0.5 --head max --save-raw --layer " + layer);
      ASSERT_EQ(r.status, 0) << r.err;
      std::vector<int64_t> shape;
      const std::vector<float> got = read_npy((dir / out / "chelsea.npy").string(), &shape);
      const ViTWeights model = load_model(w);
      ASSERT_EQ(shape, (std::vector<int64_t>{model.hp.grid_h, model.hp.grid_w}));
      const Image photo = load_image(kData + "/chelsea.png");
      const ModelInput in = preprocess(photo, model.hp.image_w, model.hp.image_h, ResizeMode::Squash,
                                       model.hp.mean.data(), model.hp.std.data());
      ForwardOptions fo;
      fo.keep_full = true;
      const ForwardResult fr = vit_forward(model, in.chw.data(), fo);
      const int l = std::string(layer) == "0" ? 0 : model.hp.depth - 1;
      const std::vector<float> want =
          class_row_map(attention_rollout(fr, l, parse_head("max"), 0.5), model.hp, fr.tokens);
      EXPECT_TRUE(all_close(got, want, 1e-7, std::string(fx) + " rollout through layer " + layer));
    }
  }
}
