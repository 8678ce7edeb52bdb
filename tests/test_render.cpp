// Pictures: preprocessing, patch order, colour maps, upsampling and blending - exact pixels on small images.
#include <gtest/gtest.h>
#include <tuple>
#include <cmath>

#include "draw/colormap.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "draw/overlay.hpp"
#include "model/preprocess.hpp"
#include "test_util.hpp"

using namespace attnmap;

TEST(Colormap, EndpointsMatchMatplotlibTables) {
  // matplotlib's published tables (_cm_listed.py / _cm.py) at 0 and 1; our tables hold (x*255) as uint8.
  struct End {
    const char* name;
    float lo[3], hi[3];
  };
  const End ends[] = {
      {"viridis", {0.267004f, 0.004874f, 0.329415f}, {0.993248f, 0.906157f, 0.143936f}},
      {"inferno", {0.001462f, 0.000466f, 0.013866f}, {0.988362f, 0.998364f, 0.644924f}},
      {"magma", {0.001462f, 0.000466f, 0.013866f}, {0.987053f, 0.991438f, 0.749504f}},
      {"plasma", {0.050383f, 0.029803f, 0.527975f}, {0.940015f, 0.975158f, 0.131326f}},
      {"turbo", {0.18995f, 0.07176f, 0.23217f}, {0.47960f, 0.01583f, 0.01055f}},
      {"jet", {0.0f, 0.0f, 0.5f}, {0.5f, 0.0f, 0.0f}},
      {"gray", {0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}},
  };
  for (const End& e : ends) {
    const uint8_t* t = colormap_table(e.name);
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(t[c], static_cast<int>(e.lo[c] * 255.0f)) << e.name << " at 0, channel " << c;
      EXPECT_EQ(t[255 * 3 + c], static_cast<int>(e.hi[c] * 255.0f)) << e.name << " at 1, channel " << c;
    }
  }
  EXPECT_EQ(colormap_lookup(colormap_table("gray"), 0.5f)[0], 128);  // index round(0.5*255) = 128
  EXPECT_THROW(colormap_table("rainbow"), Error);
}

TEST(Patchify, ChannelRowColumnOrder) {
  // (3, 4, 4) tensor with value = c*100 + y*10 + x; patch 2 -> 4 patches of 12 values.
  std::vector<float> chw(48);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x) chw[static_cast<size_t>(c * 16 + y * 4 + x)] = static_cast<float>(c * 100 + y * 10 + x);
  const std::vector<float> p = patchify(chw.data(), 4, 4, 2);
  ASSERT_EQ(p.size(), 48u);
  // Patch 1 = grid row 0, column 1: pixels x in {2,3}, y in {0,1}.
  const std::vector<float> want = {2, 3, 12, 13, 102, 103, 112, 113, 202, 203, 212, 213};
  EXPECT_EQ(std::vector<float>(p.begin() + 12, p.begin() + 24), want);
  // Patch 2 = grid row 1, column 0.
  EXPECT_EQ(p[24], 20.0f);
  EXPECT_THROW(patchify(chw.data(), 4, 4, 3), Error);
}

TEST(Preprocess, NormalisesAndKeepsExactSize) {
  Image img;
  img.width = 2;
  img.height = 1;
  img.rgb = {255, 0, 51, 0, 255, 102};
  const float mean[3] = {0.5f, 0.5f, 0.5f}, sd[3] = {0.5f, 0.25f, 1.0f};
  const ModelInput in = preprocess(img, 2, 1, ResizeMode::Squash, mean, sd);
  // (v/255 - mean) / std, channel planes.
  EXPECT_TRUE(all_close(in.chw, {1.0f, -1.0f, -2.0f, 2.0f, -0.3f, -0.1f}, 1e-6, "normalised"));
}

TEST(Preprocess, CropBoxFollowsTimmEval) {
  Image img;
  img.width = 400;
  img.height = 200;
  img.rgb.assign(400 * 200 * 3, 128);
  const float mean[3] = {0, 0, 0}, sd[3] = {1, 1, 1};
  const ModelInput in = preprocess(img, 224, 224, ResizeMode::Crop, mean, sd);
  // shorter side 200 -> 256 (224/0.875), longer 400 -> 512; centre crop 224 at (144, 16) in resized pixels.
  EXPECT_NEAR(in.box.x0, 144 * 400.0 / 512, 1e-9);
  EXPECT_NEAR(in.box.x1, 368 * 400.0 / 512, 1e-9);
  EXPECT_NEAR(in.box.y0, 16 * 200.0 / 256, 1e-9);
  EXPECT_NEAR(in.box.y1, 240 * 200.0 / 256, 1e-9);
  EXPECT_NEAR(in.chw[0], 128.0f / 255.0f, 1e-6);
  // A half-pixel border rounds half to even as torchvision's CenterCrop (Python round): 451x300 at 64 ->
  // scale 73 -> 109x73; left = round(22.5) = 22, top = round(4.5) = 4.
  img.width = 451;
  img.height = 300;
  img.rgb.assign(451 * 300 * 3, 128);
  const ModelInput small = preprocess(img, 64, 64, ResizeMode::Crop, mean, sd);
  EXPECT_NEAR(small.box.x0, 22 * 451.0 / 109, 1e-9);
  EXPECT_NEAR(small.box.y0, 4 * 300.0 / 73, 1e-9);
  // A non-square (H, W) size resizes to exactly (floor(H / 0.875), floor(W / 0.875)) as timm does: 64x32 ->
  // 73x36, crop at (round(4.5), round(2)) = (4, 2).
  const ModelInput wide = preprocess(img, 64, 32, ResizeMode::Crop, mean, sd);
  EXPECT_NEAR(wide.box.x0, 4 * 451.0 / 73, 1e-9);
  EXPECT_NEAR(wide.box.y0, 2 * 300.0 / 36, 1e-9);
  EXPECT_NEAR(wide.box.x1, 68 * 451.0 / 73, 1e-9);
  // crop_pct as a float (a preprocessor's 32 / 40 = 0.8f, 0.800000012): 32 / 0.8f resizes to 40, as timm's
  // double and CLIPImageProcessor's shortest_edge 40 do, not to floor(39.9999994) = 39. 50x40 stays 50x40: the
  // crop is (9, 4) to (41, 36) in the photo's own pixels.
  img.width = 50;
  img.height = 40;
  img.rgb.assign(50 * 40 * 3, 128);
  const ModelInput hf = preprocess(img, 32, 32, ResizeMode::Crop, mean, sd, 32.0f / 40.0f);
  EXPECT_NEAR(hf.box.x0, 9, 1e-9);
  EXPECT_NEAR(hf.box.y0, 4, 1e-9);
  EXPECT_NEAR(hf.box.x1, 41, 1e-9);
  EXPECT_NEAR(hf.box.y1, 36, 1e-9);
}

// --resize crop computes only the crop box of the resized picture; it must equal resizing the whole
// picture and cutting the box out (what timm/torchvision do), byte for byte.
TEST(Preprocess, CropBoxEqualsResizeThenCut) {
  for (const auto& [w, h, out] : {std::tuple<int, int, int>{451, 300, 224}, {300, 451, 224}, {97, 61, 32},
                                  {40, 40, 32}, {1000, 9, 64}}) {
    Image img;
    img.width = w;
    img.height = h;
    img.rgb.resize(static_cast<size_t>(w) * h * 3);
    for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    const float mean[3] = {0, 0, 0}, sd[3] = {1, 1, 1};
    const ModelInput crop = preprocess(img, out, out, ResizeMode::Crop, mean, sd);
    // The reference: squash to the whole resized size, then cut the box.
    const int scale = static_cast<int>(std::floor(out / 0.875));
    const int rw = w <= h ? scale : static_cast<int>(static_cast<double>(scale) * w / h);
    const int rh = w <= h ? static_cast<int>(static_cast<double>(scale) * h / w) : scale;
    const ModelInput full = preprocess(img, rw, rh, ResizeMode::Squash, mean, sd);
    const int left = static_cast<int>(std::nearbyint((rw - out) / 2.0)), top = static_cast<int>(std::nearbyint((rh - out) / 2.0));
    size_t diff = 0;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < out; ++y)
        for (int x = 0; x < out; ++x)
          diff += crop.chw[(static_cast<size_t>(c) * out + y) * out + x] !=
                  full.chw[(static_cast<size_t>(c) * rh + y + top) * rw + x + left];
    EXPECT_EQ(diff, 0u) << w << "x" << h << " -> " << out;
  }
  // A 1x8000 strip: the resized picture would be 256x2048000 pixels; only the 224x224 box is made.
  Image strip;
  strip.width = 1;
  strip.height = 8000;
  strip.rgb.assign(8000 * 3, 77);
  const float mean[3] = {0, 0, 0}, sd[3] = {1, 1, 1};
  const ModelInput in = preprocess(strip, 224, 224, ResizeMode::Crop, mean, sd);
  EXPECT_NEAR(in.chw[0], 77.0f / 255.0f, 1e-6);
  EXPECT_NEAR(in.box.y0, std::nearbyint((2048000 - 224) / 2.0) * 8000.0 / 2048000, 1e-6);
  // Squash of a tall strip (transposed inside the resize): a vertical ramp stays a vertical ramp.
  strip.height = 20000;
  strip.rgb.resize(20000 * 3);
  for (int y = 0; y < 20000; ++y)
    for (int c = 0; c < 3; ++c) strip.rgb[static_cast<size_t>(y) * 3 + static_cast<size_t>(c)] = static_cast<uint8_t>(y * 255 / 19999);
  const ModelInput sq = preprocess(strip, 224, 224, ResizeMode::Squash, mean, sd);
  for (int y = 0; y < 224; y += 37) {
    const float want = ((static_cast<float>(y) + 0.5f) * 20000.0f / 224.0f) * 255.0f / 19999.0f / 255.0f;
    EXPECT_NEAR(sq.chw[static_cast<size_t>(y) * 224 + 100], want, 2.0f / 255) << y;
    EXPECT_EQ(sq.chw[static_cast<size_t>(y) * 224 + 100], sq.chw[static_cast<size_t>(y) * 224]);
  }
}

TEST(Overlay, ExactPixelsNearestGray) {
  // 2x2 map [[0, 1], [0.5, 0.25]] on a 4x2 photo of (100, 50, 0); nearest upsampling, gray map, alpha 0.5.
  const std::vector<float> up = upsample_map({0.0f, 1.0f, 0.5f, 0.25f}, 2, 2, 4, 2, Upsample::Nearest);
  EXPECT_EQ(up, (std::vector<float>{0, 0, 1, 1, 0.5f, 0.5f, 0.25f, 0.25f}));
  Image photo;
  photo.width = 4;
  photo.height = 2;
  for (int i = 0; i < 8; ++i) photo.rgb.insert(photo.rgb.end(), {100, 50, 0});
  const Image out = blend_overlay(photo, up, 4, 2, 0, 0, colormap_table("gray"), 0.5f);
  // gray(v) = (x*255) truncated at index round(v*255): 0 -> 0, 1 -> 255, 0.5 -> 128, 0.25 -> 64.
  EXPECT_EQ(std::vector<uint8_t>(out.rgb.begin(), out.rgb.begin() + 6), (std::vector<uint8_t>{50, 25, 0, 50, 25, 0}));
  EXPECT_EQ(std::vector<uint8_t>(out.rgb.begin() + 6, out.rgb.begin() + 9), (std::vector<uint8_t>{178, 153, 128}));
  EXPECT_EQ(std::vector<uint8_t>(out.rgb.begin() + 12, out.rgb.begin() + 15), (std::vector<uint8_t>{114, 89, 64}));
  EXPECT_EQ(std::vector<uint8_t>(out.rgb.begin() + 18, out.rgb.begin() + 21), (std::vector<uint8_t>{82, 57, 32}));
  // alpha 0 leaves the photo untouched; alpha 1 is the colour alone.
  EXPECT_EQ(blend_overlay(photo, up, 4, 2, 0, 0, colormap_table("gray"), 0.0f).rgb, photo.rgb);
  EXPECT_EQ(blend_overlay(photo, up, 4, 2, 0, 0, colormap_table("gray"), 1.0f).rgb[6], 255);
  EXPECT_THROW(blend_overlay(photo, up, 4, 2, 0, 0, colormap_table("gray"), 1.5f), Error);
}

TEST(Overlay, BilinearIsPixelCentreAligned) {
  // A 1x2 map [0, 1] to 4 pixels: centres at 0.125, 0.375, 0.625, 0.875 of the width ->
  // PyTorch F.interpolate(mode='bilinear', align_corners=False) gives [0, 0.25, 0.75, 1].
  const std::vector<float> up = upsample_map({0.0f, 1.0f}, 2, 1, 4, 1, Upsample::Bilinear);
  EXPECT_TRUE(all_close(up, {0.0f, 0.25f, 0.75f, 1.0f}, 1e-6, "bilinear"));
  const std::vector<float> cub = upsample_map({0.0f, 1.0f, 0.0f}, 3, 1, 9, 1, Upsample::Bicubic);
  for (float v : cub) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, 1.0f);
  }
  EXPECT_NEAR(cub[4], 1.0f, 1e-6);  // the centre pixel sits on the centre sample
}

TEST(Overlay, BilinearShrinkIsPyTorchsAndDoesNotAbort) {
  // A map drawn on an image smaller than the patch grid. Debian's stb_image_resize aborts (assertion) for
  // 14 -> 10 and many other shrinking ratios of its triangle filter; these values are PyTorch's
  // F.interpolate(mode='bilinear', align_corners=False) for the same sizes.
  EXPECT_TRUE(all_close(upsample_map({0, 1, 2, 3}, 4, 1, 2, 1, Upsample::Bilinear), {0.5f, 2.5f}, 1e-6, "4->2"));
  EXPECT_TRUE(all_close(upsample_map({0, 1, 2}, 3, 1, 2, 1, Upsample::Bilinear), {0.25f, 1.75f}, 1e-6, "3->2"));
  std::vector<float> m(196);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i);  // torch.arange(196.).view(14, 14)
  const std::vector<float> o = upsample_map(m, 14, 14, 10, 3, Upsample::Bilinear);  // (3, 10)
  ASSERT_EQ(o.size(), 30u);
  EXPECT_TRUE(all_close({o[0], o[1], o[2], o[3]}, {25.8667f, 27.2667f, 28.6667f, 30.0667f}, 1e-3, "row 0"));
  EXPECT_TRUE(all_close({o[20], o[21], o[22], o[23]}, {156.5333f, 157.9333f, 159.3333f, 160.7333f}, 1e-3, "row 2"));
  EXPECT_TRUE(all_close(upsample_map(m, 14, 14, 1, 1, Upsample::Bilinear), {97.5f}, 1e-6, "1x1"));
  // Every shrink of a 14 x 14 map to 1..13 on one axis (the other grown to 20) returns, in range.
  for (int n = 1; n < 14; ++n) {
    for (const auto& [w, h] : {std::pair{n, 20}, std::pair{20, n}}) {
      const std::vector<float> r = upsample_map(m, 14, 14, w, h, Upsample::Bilinear);
      ASSERT_EQ(r.size(), static_cast<size_t>(w) * static_cast<size_t>(h));
      for (float v : r) ASSERT_TRUE(v >= 0.0f && v <= 195.0f) << w << "x" << h;
    }
  }
  // Growing on both axes still goes through stb_image_resize, with the same interpolation.
  const std::vector<float> g = upsample_map(m, 14, 14, 28, 28, Upsample::Bilinear);
  EXPECT_NEAR(g[0], 0.0f, 1e-5);
  EXPECT_NEAR(g[1], 0.25f, 1e-5);  // centre 1.5 / 2 - 0.5 = 0.25 of the way from m[0] to m[1]
}

TEST(Overlay, ConstantMapIsFlatNotNaN) {
  bool flat = false;
  const std::vector<float> n = normalize_minmax(std::vector<float>(196, 1.0f / 196), &flat);
  EXPECT_TRUE(flat);
  for (float v : n) EXPECT_EQ(v, 0.0f);
  const std::vector<float> m = normalize_minmax({0.1f, 0.3f, 0.2f}, &flat);
  EXPECT_FALSE(flat);
  EXPECT_TRUE(all_close(m, {0.0f, 1.0f, 0.5f}, 1e-6, "minmax"));
}

TEST(Npy, HeaderAsNumpyWritesIt) {
  const std::vector<float> v = {1.5f, -2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  const std::vector<uint8_t> b = npy_encode(v, {2, 3});
  ASSERT_EQ(b.size(), 128u + 24u);  // numpy pads magic + header to a multiple of 64 bytes
  EXPECT_EQ(b[8] | (b[9] << 8), 118);  // what numpy.save writes for a (2, 3) float32 array
  const std::string header(b.begin() + 10, b.begin() + 128);
  EXPECT_EQ(header.substr(0, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(header.back(), '\n');
  const std::string path = ::testing::TempDir() + "attnmap_npy_test.npy";
  write_npy(path, v, {2, 3});
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy(path, &shape), v);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));
  // A fixture written by numpy reads back with its shape.
  read_npy(fixture("e2e_224/map.npy"), &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{14, 14}));
}
