// Bad input never crashes attnmap or loses a result (issue 6): the image corpus made by
// tools/make_bad_inputs.py, EXIF orientation, size limits, and the decoder's refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "error.hpp"
#include "image_io.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const fs::path kCorpus = fs::path(ATTNMAP_TEST_DIR) / "images" / "corpus";

nlohmann::json expectations() {
  std::ifstream f(kCorpus / "expect.json");
  return nlohmann::json::parse(f);
}

std::string error_of(const fs::path& p, const LoadOptions& opt = {}) {
  try {
    load_image(p.string(), opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Peak virtual memory of this process in kB (VmPeak), to check that no large buffer was ever mapped.
long vm_peak_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmPeak:", 0) == 0) return std::stol(line.substr(7));
  return -1;
}

}  // namespace

// Every good corpus file decodes to its reference picture (exact for lossless formats; JPEG within the
// mean tolerance in expect.json, since stb_image's IDCT and upsampling differ slightly from libjpeg's).
TEST(Corpus, GoodFilesDecodeToTheirReference) {
  const nlohmann::json ex = expectations();
  ASSERT_GE(ex["good"].size(), 30u);
  for (const auto& [name, spec] : ex["good"].items()) {
    SCOPED_TRACE(name);
    const Image got = load_image((kCorpus / "good" / fs::u8path(name)).string());
    const Image want = load_image((kCorpus / "ref" / fs::u8path(name + ".png")).string());
    ASSERT_EQ(got.width, want.width);
    ASSERT_EQ(got.height, want.height);
    double sum = 0;
    int worst = 0;
    for (size_t i = 0; i < got.rgb.size(); ++i) {
      const int d = std::abs(int(got.rgb[i]) - int(want.rgb[i]));
      sum += d;
      worst = std::max(worst, d);
    }
    const double mean = sum / double(got.rgb.size());
    const double tol = spec["tol"].get<double>();
    if (tol == 0.0) {
      EXPECT_EQ(worst, 0) << "lossless format must decode exactly";
    } else {
      EXPECT_LE(mean, tol) << "largest difference " << worst;
      EXPECT_LE(worst, 64) << "mean " << mean;  // no region of wrong colour or orientation
    }
  }
}

TEST(Corpus, BadFilesAreRefusedWithTheirReason) {
  const nlohmann::json ex = expectations();
  ASSERT_GE(ex["bad"].size(), 8u);
  for (const auto& [name, reason] : ex["bad"].items()) {
    const fs::path p = kCorpus / "bad" / name;
    const std::string msg = error_of(p);
    EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << name << ": " << msg;
    EXPECT_NE(msg.find(reason.get<std::string>()), std::string::npos) << name << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

// A header declaring 20000x20000 or 23169x23169 RGBA is refused from the header alone: quickly, and
// without mapping the gigabyte-sized buffer a decoder would need.
TEST(Corpus, HugeHeadersAreRefusedBeforeAnyAllocation) {
  const long before = vm_peak_kb();
  const auto t0 = std::chrono::steady_clock::now();
  for (const char* name : {"huge_20000x20000.png", "huge_23169x23169_rgba.png", "huge_jpeg_30000.jpg"}) {
    const std::string msg = error_of(kCorpus / "bad" / name);
    EXPECT_NE(msg.find("exceeds the limit of 100000000 pixels (--max-pixels)"), std::string::npos) << msg;
  }
  EXPECT_NE(error_of(kCorpus / "bad" / "huge_20000x20000.png").find("20000x20000 = 400000000 pixels"),
            std::string::npos);
  // A lower limit refuses a normal picture by the same rule.
  LoadOptions small;
  small.max_pixels = 1000;
  EXPECT_NE(error_of(kCorpus / "good" / "png_grey8.png", small).find("48x32 = 1536 pixels exceeds the limit of 1000"),
            std::string::npos);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 5.0);
  const long after = vm_peak_kb();
  ASSERT_GT(before, 0);
  EXPECT_LT(after - before, 64 * 1024) << "peak virtual memory grew by " << (after - before) << " kB";
}

// The EXIF orientation is applied: files 2..8 store the picture turned or mirrored and all display as
// orientation 1; with apply_exif off they keep their stored pixel order (turned ones swap width/height).
TEST(Exif, OrientationsTwoToEightDisplayUpright) {
  const Image upright = load_image((kCorpus / "good" / "exif_orient_1.jpg").string());
  LoadOptions raw;
  raw.apply_exif = false;
  for (int k = 1; k <= 8; ++k) {
    SCOPED_TRACE(k);
    const std::string p = (kCorpus / "good" / ("exif_orient_" + std::to_string(k) + ".jpg")).string();
    const std::vector<uint8_t> bytes = read_file(p);
    EXPECT_EQ(exif_orientation(bytes.data(), bytes.size()), k);
    const Image shown = load_image(p);
    ASSERT_EQ(shown.width, 48);
    ASSERT_EQ(shown.height, 32);
    double diff = 0;
    for (size_t i = 0; i < shown.rgb.size(); ++i) diff += std::abs(int(shown.rgb[i]) - int(upright.rgb[i]));
    EXPECT_LT(diff / double(shown.rgb.size()), 4.0);
    const Image stored = load_image(p, raw);
    EXPECT_EQ(stored.width, k >= 5 ? 32 : 48);
    // Turning the stored pixels ourselves gives exactly what load_image showed.
    const Image turned = apply_orientation(stored, k);
    EXPECT_EQ(turned.rgb, shown.rgb);
  }
}

TEST(Exif, ApplyOrientationExactPixels) {
  // 3x2 picture, pixel value = index: stored [[0 1 2] [3 4 5]] (grey written to all channels).
  Image img;
  img.width = 3;
  img.height = 2;
  for (uint8_t v = 0; v < 6; ++v) img.rgb.insert(img.rgb.end(), {v, v, v});
  auto grey = [](const Image& im) {
    std::vector<int> g;
    for (size_t i = 0; i < im.rgb.size(); i += 3) g.push_back(im.rgb[i]);
    return g;
  };
  EXPECT_EQ(grey(apply_orientation(img, 2)), (std::vector<int>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(grey(apply_orientation(img, 3)), (std::vector<int>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(grey(apply_orientation(img, 4)), (std::vector<int>{3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(grey(apply_orientation(img, 5)), (std::vector<int>{0, 3, 1, 4, 2, 5}));  // transpose
  EXPECT_EQ(grey(apply_orientation(img, 6)), (std::vector<int>{3, 0, 4, 1, 5, 2}));  // 90 clockwise
  EXPECT_EQ(grey(apply_orientation(img, 7)), (std::vector<int>{5, 2, 4, 1, 3, 0}));
  EXPECT_EQ(grey(apply_orientation(img, 8)), (std::vector<int>{2, 5, 1, 4, 0, 3}));  // 90 counter-clockwise
  EXPECT_EQ(apply_orientation(img, 6).width, 2);
}

TEST(Jpeg, MarkerWalk) {
  const std::vector<uint8_t> base = read_file((kCorpus / "good" / "jpeg_baseline.jpg").string());
  JpegInfo j = inspect_jpeg(base.data(), base.size());
  EXPECT_TRUE(j.is_jpeg);
  EXPECT_TRUE(j.complete);
  EXPECT_EQ(j.end, base.size());
  EXPECT_EQ(j.components, 3);
  const std::vector<uint8_t> cmyk = read_file((kCorpus / "good" / "jpeg_cmyk.jpg").string());
  j = inspect_jpeg(cmyk.data(), cmyk.size());
  EXPECT_EQ(j.components, 4);
  EXPECT_EQ(j.adobe_transform, 0);
  const std::vector<uint8_t> ycck = read_file((kCorpus / "good" / "jpeg_ycck.jpg").string());
  EXPECT_EQ(inspect_jpeg(ycck.data(), ycck.size()).adobe_transform, 2);
  const std::vector<uint8_t> junk = read_file((kCorpus / "good" / "jpeg_junk_after_eoi.jpg").string());
  j = inspect_jpeg(junk.data(), junk.size());
  EXPECT_TRUE(j.complete);
  EXPECT_EQ(j.end, junk.size() - 100);
  for (size_t cut : {size_t(2), size_t(3), base.size() / 2, base.size() - 1}) {
    EXPECT_FALSE(inspect_jpeg(base.data(), cut).complete) << cut;
  }
  const uint8_t png[] = {0x89, 'P', 'N', 'G'};
  EXPECT_FALSE(inspect_jpeg(png, sizeof png).is_jpeg);
}
