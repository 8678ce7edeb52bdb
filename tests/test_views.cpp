// The views of issue 3: rollout (+ discard), DINO threshold masks, position-embedding resampling (--size),
// heads grid and --all-heads - against PyTorch fixtures (tools/make_view_fixtures.py) and hand-made cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "maps/attention_maps.hpp"
#include "core/error.hpp"
#include "draw/figures.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "model/pos_embed.hpp"
#include "test_util.hpp"
#include "model/vit.hpp"
#include "checkpoint/weights.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

std::vector<float> slice(const std::vector<float>& v, size_t index, size_t len) {
  return std::vector<float>(v.begin() + static_cast<long>(index * len),
                            v.begin() + static_cast<long>((index + 1) * len));
}

HeadSelect head_select(const std::string& s) {
  return parse_head(s);
}

// The rollout fixture model (non-square: 40 x 24 pixels, patch 8, grid 3 x 5) run on its input.
ForwardResult rollout_fixture_forward(ViTWeights* model) {
  *model = load_model(fixture("views_rollout/weights.json"));
  std::vector<int64_t> shape;
  const std::vector<float> x = read_npy(fixture("views_rollout/input.npy"), &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 24, 40}));
  ForwardOptions fo;
  fo.keep_full = true;
  return vit_forward(*model, x.data(), fo);
}

}  // namespace

TEST(Rollout, MatchesPyTorchAtEveryLayerAndRowsSumToOne) {
  ViTWeights model;
  const ForwardResult r = rollout_fixture_forward(&model);
  ASSERT_EQ(model.hp.grid_w, 5);
  ASSERT_EQ(model.hp.grid_h, 3);
  std::vector<int64_t> shape;
  const std::vector<float> attn = read_npy(fixture("views_rollout/attn.npy"), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{3, 4, 16, 16}));
  EXPECT_TRUE(all_close(r.attn, attn, 1e-5, "attention probabilities"));
  const size_t TT = 16 * 16;
  struct Case {
    const char* file;
    const char* head;
    double discard;
  };
  for (const Case& c : {Case{"rollout_mean.npy", "mean", 0.0}, Case{"rollout_max_discard0.5.npy", "max", 0.5},
                        Case{"rollout_mean_discard0.9.npy", "mean", 0.9}}) {
    const std::vector<float> want = read_npy(fixture(std::string("views_rollout/") + c.file), &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{3, 16, 16}));
    for (int l = 0; l < 3; ++l) {
      const std::vector<float> R = attention_rollout(r, l, head_select(c.head), c.discard);
      EXPECT_TRUE(all_close(R, slice(want, static_cast<size_t>(l), TT), 1e-5,
                            std::string(c.file) + " layer " + std::to_string(l)));
      for (int i = 0; i < 16; ++i) {
        double s = 0;
        for (int j = 0; j < 16; ++j) s += R[static_cast<size_t>(i * 16 + j)];
        EXPECT_NEAR(s, 1.0, 1e-5) << c.file << " layer " << l << " row " << i;
      }
    }
  }
  // The map is the class row's patch columns, (grid_h, grid_w) row-major.
  const std::vector<float> R = attention_rollout(r, 2, head_select("mean"));
  const std::vector<float> m = class_row_map(R, model.hp, 16);
  ASSERT_EQ(m.size(), 15u);
  EXPECT_EQ(m[7], R[8]);  // patch row 1, column 2 = token 1 + 1*5 + 2
  // Without the full matrices rollout refuses, naming what it needs.
  ForwardResult cls_only = r;
  cls_only.attn.clear();
  EXPECT_THROW(attention_rollout(cls_only, 0, head_select("mean")), Error);
  EXPECT_THROW(attention_rollout(r, 0, head_select("mean"), 1.5), Error);
}

TEST(Rollout, DiscardZeroesSmallestOffDiagonalNonClassEntries) {
  // 4 x 4: row 0 and column 0 (class token) and the diagonal hold the smallest values, so a rule that
  // forgot to protect them would zero them first. Eligible entries: (1,2)=.30 (1,3)=.05 (2,1)=.20 (2,3)=.05
  // (3,1)=.40 (3,2)=.10 -> n = 6.
  const std::vector<float> m0 = {0.001f, 0.002f, 0.003f, 0.004f,  //
                                 0.006f, 0.007f, 0.30f,  0.05f,   //
                                 0.008f, 0.20f,  0.009f, 0.05f,   //
                                 0.011f, 0.40f,  0.10f,  0.012f};
  std::vector<float> m = m0;
  discard_smallest(m.data(), 4, 0.5);  // floor(0.5 * 6) = 3: the two 0.05 (tie) and 0.10
  std::vector<float> want = m0;
  want[7] = want[11] = want[14] = 0.0f;
  EXPECT_EQ(m, want);
  m = m0;
  discard_smallest(m.data(), 4, 0.2);  // floor(1.2) = 1: of the tied 0.05s, the lower index (1,3) goes
  want = m0;
  want[7] = 0.0f;
  EXPECT_EQ(m, want);
  m = m0;
  discard_smallest(m.data(), 4, 1.0);  // all six eligible entries; the class entries and diagonal stay
  want = {0.001f, 0.002f, 0.003f, 0.004f, 0.006f, 0.007f, 0, 0, 0.008f, 0, 0.009f, 0, 0.011f, 0, 0, 0.012f};
  EXPECT_EQ(m, want);
  m = m0;
  discard_smallest(m.data(), 4, 0.0);
  EXPECT_EQ(m, m0);
  EXPECT_THROW(discard_smallest(m.data(), 4, -0.1), Error);
  EXPECT_THROW(discard_smallest(m.data(), 4, std::nan("")), Error);
}

TEST(Threshold, KeepsTheSmallestSetOfLargestEntriesReachingTheMass) {
  // Masses 1/16, 8/16, 2/16, 5/16 (exact in binary). Sorted ascending the cumulative mass is 1/16, 3/16,
  // 8/16, 1; an entry is kept when it exceeds 1 - T.
  const float a[4] = {1, 8, 2, 5};  // unnormalised: the rule normalises
  EXPECT_EQ(threshold_mask(a, 4, 0.5f), (std::vector<uint8_t>{0, 1, 0, 0}));   // 8/16 reaches 0.5 alone
  EXPECT_EQ(threshold_mask(a, 4, 0.51f), (std::vector<uint8_t>{0, 1, 0, 1}));  // needs 5/16 too: 13/16
  EXPECT_EQ(threshold_mask(a, 4, 0.9f), (std::vector<uint8_t>{0, 1, 1, 1}));   // 15/16
  EXPECT_EQ(threshold_mask(a, 4, 1.0f), (std::vector<uint8_t>{1, 1, 1, 1}));
  EXPECT_EQ(threshold_mask(a, 4, 0.01f), (std::vector<uint8_t>{0, 1, 0, 0}));  // the largest is always kept
  EXPECT_THROW(threshold_mask(a, 4, 0.0f), Error);
  EXPECT_THROW(threshold_mask(a, 4, 1.5f), Error);
  const float zeros[3] = {0, 0, 0};
  EXPECT_THROW(threshold_mask(zeros, 3, 0.6f), Error);
}

TEST(Threshold, MatchesDinoVisualizeAttention) {
  ViTWeights model;
  const ForwardResult r = rollout_fixture_forward(&model);
  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy(fixture("views_rollout/dino_mask_t0.6.npy"), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{4, 3, 5}));
  for (int h = 0; h < 4; ++h) {
    HeadSelect one;
    one.fusion = HeadSelect::Fusion::Index;
    one.index = h;
    const std::vector<float> m = class_attention_map(r, model.hp, 2, one);
    const std::vector<uint8_t> mask = threshold_mask(m.data(), 15, 0.6f);
    EXPECT_EQ(std::vector<float>(mask.begin(), mask.end()), slice(want, static_cast<size_t>(h), 15))
        << "head " << h;
  }
}

TEST(PosEmbed, BicubicMatchesTorchInterpolate) {
  std::ifstream f(fixture("views_posembed/meta.json"));
  ASSERT_TRUE(f.good());
  const auto meta = nlohmann::json::parse(f);
  const int D = meta["D"].get<int>();
  ASSERT_EQ(meta["cases"].size(), 8u);
  for (const auto& c : meta["cases"]) {
    std::vector<int64_t> shape;
    const std::vector<float> src = read_npy(fixture("views_posembed/" + c["src"].get<std::string>()), &shape);
    const std::vector<float> want =
        read_npy(fixture("views_posembed/" + c["out"].get<std::string>()), &shape);
    const int gh = c["grid_h"], gw = c["grid_w"], nh = c["new_h"], nw = c["new_w"], prefix = c["prefix"];
    ViTWeights w;
    w.hp.patch = 14;
    w.hp.dim = D;
    w.hp.grid_w = gw;
    w.hp.grid_h = gh;
    w.hp.image_w = gw * 14;
    w.hp.image_h = gh * 14;
    w.hp.num_prefix = prefix;
    w.pos_embed = src;
    // The fixture is F.interpolate(size=, bicubic, align_corners=False, antialias=False): timm 0.6's and Hugging
    // Face's call, --pos-interp timm-legacy / hf (the default of this timm-layout model is timm >= 0.9's
    // antialiased call since issue 18; tests/fixtures/posinterp covers it).
    resample_pos_embed(w, nw * 14, nh * 14, PosInterp::TimmLegacy);
    EXPECT_EQ(shape, (std::vector<int64_t>{prefix + nh * nw, D}));
    EXPECT_EQ(w.hp.grid_w, nw);
    EXPECT_EQ(w.hp.grid_h, nh);
    EXPECT_EQ(w.hp.image_w, nw * 14);
    EXPECT_TRUE(all_close(w.pos_embed, want, 1e-6, c["out"].get<std::string>()));
    // Prefix rows are copied bit for bit.
    EXPECT_EQ(std::vector<float>(w.pos_embed.begin(), w.pos_embed.begin() + prefix * D),
              std::vector<float>(src.begin(), src.begin() + prefix * D));
    if (nh == gh && nw == gw) {
      EXPECT_EQ(w.pos_embed, src);
    }
  }
  ViTWeights w;
  w.hp.patch = 16;
  w.hp.dim = 2;
  w.pos_embed.assign(2 * 197, 0.5f);
  EXPECT_THROW(resample_pos_embed(w, 440, 448), Error);  // 440 is not a multiple of 16
  EXPECT_THROW(resample_pos_embed(w, 0, 448), Error);
  for (PosInterp m : {PosInterp::Timm, PosInterp::TimmLegacy, PosInterp::Dino, PosInterp::Hf, PosInterp::HfLegacy,
                      PosInterp::Torchvision}) {  // a constant embedding stays constant (the taps sum to 1)
    ViTWeights c = w;
    resample_pos_embed(c, 448, 224, m);
    EXPECT_EQ(c.hp.grid_w, 28);
    EXPECT_EQ(c.hp.grid_h, 14);
    ASSERT_EQ(c.pos_embed.size(), 2u * (1 + 28 * 14));
    for (float v : c.pos_embed) ASSERT_NEAR(v, 0.5f, 1e-6) << pos_interp_name(m);
    c = w;
    resample_pos_embed(c, 112, 64, m);  // shrinking too
    ASSERT_EQ(c.pos_embed.size(), 2u * (1 + 7 * 4));
    for (float v : c.pos_embed) ASSERT_NEAR(v, 0.5f, 1e-6) << pos_interp_name(m);
  }
}

TEST(PosEmbed, CubicKernelIsPyTorchs) {
  // One row [0, 1, 0, 0] from 4 to 8 samples; PyTorch (a = -0.75, clamped border) gives these values
  // (F.interpolate(torch.tensor([[[[0., 1, 0, 0]]]]), size=(1, 8), mode='bicubic', align_corners=False)).
  const std::vector<float> out = bicubic_resize_planes({0, 1, 0, 0}, 1, 1, 4, 1, 8);
  const std::vector<float> want = {-0.10546875f, 0.26171875f,  0.87890625f,  0.87890625f,
                                   0.26171875f,  -0.10546875f, -0.03515625f, 0.0f};
  EXPECT_TRUE(all_close(out, want, 1e-6, "bicubic 4 -> 8"));
}

TEST(HeadsGrid, TilePhotoAndFont) {
  // Tiles: the photo scaled to 224 px on its longer side, its map box scaled alike.
  Image photo;
  photo.width = 451;
  photo.height = 300;
  photo.rgb.assign(451 * 300 * 3, 100);
  const TilePhoto t = tile_photo(photo, PhotoBox{0, 0, 451, 300});
  EXPECT_EQ(t.photo.width, 224);
  EXPECT_EQ(t.photo.height, 149);  // round(300 * 224 / 451)
  EXPECT_EQ(t.box.w, 224);
  EXPECT_EQ(t.box.h, 149);
  const TilePhoto crop = tile_photo(photo, PhotoBox{75, 0, 300, 300});  // a centre crop box
  EXPECT_EQ(crop.box.x0, 37);   // round(75 * 224/451) = round(37.25)
  EXPECT_EQ(crop.box.w, 149);   // round(375 * 224/451) - 37 = 186 - 37
  photo.width = 32;
  photo.height = 96;
  photo.rgb.assign(32 * 96 * 3, 100);
  const TilePhoto tall = tile_photo(photo, PhotoBox{0, 0, 32, 96});
  EXPECT_EQ(tall.photo.width, 75);
  EXPECT_EQ(tall.photo.height, 224);
  EXPECT_THROW(tile_photo(photo, PhotoBox{0, 0, 32, 96}, 8), Error);
  // The labels are set in DejaVu Sans, found by fontconfig (fonts-dejavu-core).
  EXPECT_EQ(figure_font(), "DejaVu Sans");
}

// Every layout fixture (tests/fixtures/layouts, made by tools/make_fixtures.py): the map is the class row's
// patch columns only (never a class, distillation or register column), rollout rows sum to 1 and rollout of
// our probabilities matches rollout of PyTorch's, and --size resampling keeps the prefix rows and runs.
class LayoutViews : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutViews, PatchColumnsRolloutAndResizedGrid) {
  const std::string dir = fixture("layouts/" + GetParam());
  std::ifstream mf(dir + "/meta.json");
  ASSERT_TRUE(mf.good());
  const auto meta = nlohmann::json::parse(mf);
  ViTWeights model = load_model(dir + "/weights.safetensors");
  const HParams hp = model.hp;
  EXPECT_EQ(hp.num_prefix, meta["num_prefix"].get<int>());
  std::vector<int64_t> shape;
  const std::vector<float> x = read_npy(dir + "/input.npy", &shape);
  const std::vector<float> attn = read_npy(dir + "/attn.npy", &shape);  // (L, H, T, T)
  const int L = static_cast<int>(shape[0]), H = static_cast<int>(shape[1]), T = static_cast<int>(shape[2]);
  const int N = hp.grid_w * hp.grid_h;
  ASSERT_EQ(T, hp.num_prefix + N);
  ForwardOptions fo;
  fo.keep_full = true;
  const ForwardResult r = vit_forward(model, x.data(), fo);
  ForwardResult ref = r;  // PyTorch's probabilities in our container
  ref.attn = attn;
  const size_t TT = static_cast<size_t>(T) * static_cast<size_t>(T);
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < H; ++h) {
      HeadSelect one;
      one.fusion = HeadSelect::Fusion::Index;
      one.index = h;
      const std::vector<float> m = class_attention_map(r, hp, l, one);
      const size_t row0 = (static_cast<size_t>(l) * static_cast<size_t>(H) + static_cast<size_t>(h)) * TT;
      const std::vector<float> want(attn.begin() + static_cast<long>(row0) + hp.num_prefix,
                                    attn.begin() + static_cast<long>(row0) + T);
      EXPECT_TRUE(all_close(m, want, 1e-5,
                            GetParam() + " map layer " + std::to_string(l) + " head " + std::to_string(h)));
    }
    const std::vector<float> R = attention_rollout(r, l, head_select("mean"), 0.5);
    EXPECT_TRUE(
        all_close(R, attention_rollout(ref, l, head_select("mean"), 0.5), 1e-5, GetParam() + " rollout"));
    for (int i = 0; i < T; ++i) {
      double s = 0;
      for (int j = 0; j < T; ++j) s += R[static_cast<size_t>(i * T + j)];
      ASSERT_NEAR(s, 1.0, 1e-5) << GetParam() << " layer " << l << " row " << i;
    }
    EXPECT_EQ(class_row_map(R, hp, T).size(), static_cast<size_t>(N));
  }
  // One more patch row and two more columns: the prefix rows of pos_embed are kept bit for bit.
  const std::vector<float> pos0 = model.pos_embed;
  const size_t pre = pos0.size() / static_cast<size_t>(hp.dim) - static_cast<size_t>(N);
  resample_pos_embed(model, hp.image_w + 2 * hp.patch, hp.image_h + hp.patch);
  EXPECT_EQ(model.hp.grid_w, hp.grid_w + 2);
  EXPECT_EQ(model.hp.grid_h, hp.grid_h + 1);
  const size_t N2 = static_cast<size_t>(model.hp.grid_w * model.hp.grid_h);
  ASSERT_EQ(model.pos_embed.size(), (pre + N2) * static_cast<size_t>(hp.dim));
  EXPECT_EQ(
      std::vector<float>(model.pos_embed.begin(), model.pos_embed.begin() + static_cast<long>(pre) * hp.dim),
      std::vector<float>(pos0.begin(), pos0.begin() + static_cast<long>(pre) * hp.dim));
  const std::vector<float> x2(
      3 * static_cast<size_t>(model.hp.image_w) * static_cast<size_t>(model.hp.image_h), 0.25f);
  ForwardOptions fo2;
  const ForwardResult r2 = vit_forward(model, x2.data(), fo2);
  EXPECT_EQ(r2.tokens, hp.num_prefix + static_cast<int>(N2));
  EXPECT_EQ(class_attention_map(r2, model.hp, r2.layers - 1, head_select("max")).size(), N2);
}

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutViews,
                         ::testing::Values("timm", "hf", "hf_model", "torchvision", "deit_distilled",
                                           "qv_bias", "dinov2_fb", "timm_reg_full", "timm_reg_noembed"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
