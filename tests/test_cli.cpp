// The attnmap binary end to end: exit statuses, output files, sizes and the .npy against PyTorch.
#include <gtest/gtest.h>

#include <stb_image.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "image_io.hpp"
#include "npy.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {


class Cli : public TempDirTest {
 protected:
};

const std::string kData = ATTNMAP_DATA_DIR;
const std::string kImages = std::string(ATTNMAP_TEST_DIR) + "/images/basic";

}  // namespace

TEST_F(Cli, RendersPhotoAtItsOwnSize) {
  const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir));
  ASSERT_EQ(r.status, 0) << r.err;
  const Image photo = load_image(kData + "/chelsea.png");
  const Image out = load_image((dir / "chelsea.png").string());
  EXPECT_EQ(out.width, photo.width);
  EXPECT_EQ(out.height, photo.height);
  size_t changed = 0;
  for (size_t i = 0; i < out.rgb.size(); ++i) changed += out.rgb[i] != photo.rgb[i];
  EXPECT_GT(changed, out.rgb.size() / 2) << "the overlay should change most pixels at alpha 0.5";
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename().string()[0] != '.', true) << e.path();
}

TEST_F(Cli, SaveRawMatchesPyTorch) {
  const std::string fx = fixture("e2e_224");
  const CliRun r = run_attnmap("render " + q(fx + "/image.png") + " -w " + q(fixture("timm_224/weights.json")) +
                    " --save-raw -o " + q(dir));
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<int64_t> got_shape, want_shape;
  const std::vector<float> got = read_npy((dir / "image.npy").string(), &got_shape);
  const std::vector<float> want = read_npy(fx + "/map.npy", &want_shape);
  EXPECT_EQ(got_shape, (std::vector<int64_t>{14, 14}));
  EXPECT_EQ(got_shape, want_shape);
  EXPECT_TRUE(all_close(got, want, 1e-5, "class-token map vs PyTorch"));
}

TEST_F(Cli, GreyAlphaPaletteAnd16BitPngsRender) {
  const CliRun r = run_attnmap("render " + q(kImages) + " -o " + q(dir) + " --colormap inferno --upsample bicubic --alpha 0.7");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* name : {"grey", "grey_alpha", "rgba", "palette", "grey16"}) {
    const fs::path out = dir / (std::string(name) + ".png");
    ASSERT_TRUE(fs::exists(out)) << out;
    const Image img = load_image(out.string());
    EXPECT_EQ(img.width, 90);
    EXPECT_EQ(img.height, 60);
  }
}

TEST_F(Cli, MissingTensorIsOneLineAndStatus2) {
  std::ifstream in(fixture("seed_embed/weights.json"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const auto at = text.find("\"W_K\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 5, "\"W_X\"");
  const fs::path w = dir / "broken.json";
  std::ofstream(w) << text;
  const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " -w " + q(w) + " -o " + q(dir / "out"));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "attnmap: error: " + w.string() + ": missing tensor 'W_K' (expected shape (24, 16))\n");
  EXPECT_FALSE(fs::exists(dir / "out" / "chelsea.png"));
}

TEST_F(Cli, BadFileFailsAloneWithStatus1) {
  fs::create_directories(dir / "in" / "sub");
  fs::copy_file(kData + "/coffee.png", dir / "in" / "sub" / "coffee.png");
  fs::copy_file(kData + "/rocket.jpg", dir / "in" / "rocket.jpg");
  std::ofstream(dir / "in" / "notes.png") << "this is not an image";
  std::ofstream(dir / "in" / "readme.txt") << "not an image extension: skipped";
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find((dir / "in" / "notes.png").string() + ": not a readable image"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "sub" / "coffee.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "rocket.png"));
  EXPECT_FALSE(fs::exists(dir / "out" / "notes.png"));
  EXPECT_FALSE(fs::exists(dir / "out" / "readme.png"));
}

TEST_F(Cli, CollidingStemsKeepTheirExtension) {
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/rocket.jpg", dir / "in" / "a.jpg");
  fs::copy_file(kData + "/camera.png", dir / "in" / "a.png");
  const CliRun r = run_attnmap("render " + q(dir / "in") + " " + q(dir / "in" / "a.png") + " -o " + q(dir / "in"));
  // Output folder == input folder: a.png would be overwritten by its own overlay; outputs get the extension.
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "in" / "a.jpg.png"));
  EXPECT_TRUE(fs::exists(dir / "in" / "a.png.png"));
  const Image still = load_image((dir / "in" / "a.png").string());
  EXPECT_EQ(still.width, 512);  // camera.png untouched
}

TEST_F(Cli, OutputNeverOverwritesAnInput) {
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/camera.png", dir / "in" / "cam.png");
  const auto before = fs::file_size(dir / "in" / "cam.png");
  const CliRun r = run_attnmap("render " + q(dir / "in" / "cam.png") + " -o " + q(dir / "in"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("would overwrite an input file"), std::string::npos) << r.err;
  EXPECT_EQ(fs::file_size(dir / "in" / "cam.png"), before);
}

TEST_F(Cli, UsageErrorsAreStatus2) {
  EXPECT_EQ(run_attnmap("render").status, 2);
  EXPECT_EQ(run_attnmap("frobnicate x").status, 2);
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " --layer 99 -o " + q(dir)).status, 2);
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " --head 17 -o " + q(dir)).status, 2);
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " --colormap rainbow -o " + q(dir)).status, 2);
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " --alpha 2 -o " + q(dir)).status, 2);
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " --mean 1,2 -o " + q(dir)).status, 2);
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " -w /nonexistent.json -o " + q(dir)).status, 2);
  EXPECT_EQ(run_attnmap("--version").status, 0);
  EXPECT_EQ(run_attnmap("render --help").status, 0);
  EXPECT_FALSE(fs::exists(dir / "chelsea.png"));
}

TEST_F(Cli, CropModeDrawsInsideTheCropBoxOnly) {
  const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " --resize crop -o " + q(dir));
  ASSERT_EQ(r.status, 0) << r.err;
  const Image photo = load_image(kData + "/chelsea.png");  // 451 x 300
  const Image out = load_image((dir / "chelsea.png").string());
  // Crop box: shorter side 300 -> 256, so the box is 224/256*300 = 262.5 px wide, centred.
  const size_t left_col = 10, mid_col = 225;
  EXPECT_EQ(out.rgb[left_col * 3], photo.rgb[left_col * 3]);
  EXPECT_NE(std::vector<uint8_t>(out.rgb.begin() + mid_col * 3 + static_cast<long>(150 * 451 * 3),
                                 out.rgb.begin() + mid_col * 3 + static_cast<long>(150 * 451 * 3) + 3),
            std::vector<uint8_t>(photo.rgb.begin() + mid_col * 3 + static_cast<long>(150 * 451 * 3),
                                 photo.rgb.begin() + mid_col * 3 + static_cast<long>(150 * 451 * 3) + 3));
}
