// The attnmap binary end to end: exit statuses, output files, sizes and the .npy against PyTorch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stb_image.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
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
  // --no-legend: the bare overlay (the legend strip under the photo is ctest LegendCli.*'s).
  const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " -o " + q(dir) + " --no-legend");
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
  const CliRun r = run_attnmap("render " + q(kImages) + " -o " + q(dir) + " --colormap inferno --upsample bicubic --alpha 0.7 --no-legend");
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

TEST_F(Cli, ControlCharactersInNamesAreEscapedOnTheTerminal) {
  // A newline, an escape sequence or a carriage return in a file name must not split or repaint the terminal
  // line: they are printed as \xNN; the output file keeps the real name.
  fs::create_directories(dir / "in");
  const std::string good = "good\n\x1b[31mname.png", bad = "bro\rken.png";
  fs::copy_file(kData + "/chelsea.png", dir / "in" / good);
  std::ofstream(dir / "in" / bad) << "not an image";
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / good));
  EXPECT_NE(r.out.find("good\\x0a\\x1b[31mname.png -> "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("/bro\\x0dken.png: not a readable image"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
}

TEST(Printable, EscapesControlsC1AndBytesThatAreNotUtf8) {
  EXPECT_EQ(printable("plain name.png"), "plain name.png");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe7\x8c\xab \xf0\x9f\x90\x88.png"), "caf\xc3\xa9 \xe7\x8c\xab \xf0\x9f\x90\x88.png");
  EXPECT_EQ(printable("a\tb\x7f"), "a\\x09b\\x7f");
  EXPECT_EQ(printable("raw\x9b" "31m.png"), "raw\\x9b31m.png");        // a lone 8-bit CSI
  EXPECT_EQ(printable("c1\xc2\x9b" "31m"), "c1\\xc2\\x9b31m");          // U+009B, well-formed but a control
  EXPECT_EQ(printable("bad\xff\xfe"), "bad\\xff\\xfe");
  EXPECT_EQ(printable("cut\xe7\x8c"), "cut\\xe7\\x8c");                // a sequence cut short
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");              // a UTF-16 surrogate
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                      // an overlong '/'
}

TEST_F(Cli, CollidingStemsKeepTheirExtension) {
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/rocket.jpg", dir / "in" / "a.jpg");
  fs::copy_file(kData + "/camera.png", dir / "in" / "a.png");
  const CliRun r = run_attnmap("render " + q(dir / "in") + " " + q(dir / "in" / "a.png") + " -o " + q(dir / "out"));
  // a.jpg and a.png share the stem a: both outputs keep their extension.
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "a.jpg.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "a.png.png"));
  EXPECT_FALSE(fs::exists(dir / "out" / "a.png"));
  const Image still = load_image((dir / "in" / "a.png").string());
  EXPECT_EQ(still.width, 512);  // camera.png untouched
}

TEST_F(Cli, OutputFolderEqualToAnInputFolderIsRefused) {
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/camera.png", dir / "in" / "a.png");
  // Also through another spelling of the same folder.
  for (const fs::path& out : {dir / "in", dir / "in" / "." }) {
    const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(out));
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err, "attnmap: error: the output folder is the input folder " + (dir / "in").string() +
                         "; choose another --out\n");
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "in")) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"a.png"});
}

TEST_F(Cli, ManifestNeverTruncatesAnInputTheWeightsOrAnOutput) {
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/camera.png", dir / "in" / "a.png");
  fs::copy_file(fixture("seed_embed/weights.json"), dir / "w.json");
  fs::create_directories(dir / "out");
  std::ofstream(dir / "out" / "a.png") << "previous overlay";
  const auto photo = slurp(dir / "in" / "a.png"), weights = slurp(dir / "w.json");
  const std::string base = "render " + q(dir / "in") + " -w " + q(dir / "w.json") + " -o " + q(dir / "out");
  for (const fs::path& m : {dir / "in" / "a.png", dir / "in" / "sub" / ".." / "a.png", dir / "w.json", dir / "out" / "a.png"}) {
    const CliRun r = run_attnmap(base + " --manifest " + q(m));
    EXPECT_EQ(r.status, 2) << m << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("--manifest " + m.string() + " is "), std::string::npos) << r.err;
  }
  EXPECT_EQ(slurp(dir / "in" / "a.png"), photo);
  EXPECT_EQ(slurp(dir / "w.json"), weights);
  EXPECT_EQ(slurp(dir / "out" / "a.png"), "previous overlay");
  // A file given directly: the manifest may not be it either.
  const CliRun r = run_attnmap("render " + q(dir / "in" / "a.png") + " -w " + q(dir / "w.json") + " -o " +
                               q(dir / "out2") + " --manifest " + q(dir / "in" / "a.png"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(slurp(dir / "in" / "a.png"), photo);
  EXPECT_FALSE(fs::exists(dir / "out2" / "a.png"));
}

// The output folder, the manifest and the run figures that would replace a file known before the model loads
// are refused before it loads: weights that cannot be read are never opened (their error would come first).
TEST_F(Cli, PathsKnownBeforeTheModelAreRefusedBeforeItLoads) {
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/camera.png", dir / "in" / "a.png");
  std::ofstream(dir / "broken.pth") << "not a checkpoint";
  std::ofstream(dir / "file") << "x";
  const std::string base = "render " + q(dir / "in") + " -w " + q(dir / "broken.pth");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" -o " + q(dir / "file"), (dir / "file").string() + ": the output folder exists and is not a folder"},
      {" -o " + q(dir / "out") + " --manifest " + q(dir / "in" / "a.png"), "--manifest " + (dir / "in" / "a.png").string() + " is an input"},
      {" -o " + q(dir / "out") + " --manifest " + q(dir / "broken.pth"), "--manifest " + (dir / "broken.pth").string() + " is "},
      {" -o " + q(dir / "out") + " --contact-sheet " + q(dir / "in" / "a.png"), "--contact-sheet " + (dir / "in" / "a.png").string() + " is "},
      {" -o " + q(dir / "out") + " --gallery " + q(dir / "file"), "--gallery " + (dir / "file").string() + " is an existing file"},
  };
  for (const auto& [args, says] : cases) {
    const CliRun r = run_attnmap(base + args);
    EXPECT_EQ(r.status, 2) << args << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << says << "\n" << r.err;
    EXPECT_EQ(r.err.find("broken.pth:"), std::string::npos) << r.err;  // the weights were not opened
  }
  EXPECT_FALSE(fs::exists(dir / "out"));
  // The same weights alone: their own error, so the cases above were refused before the load.
  const CliRun r = run_attnmap(base + " -o " + q(dir / "out"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("broken.pth"), std::string::npos) << r.err;
}

// Everything after "--" is an input, also when inputs come before it (CLI11 alone called them "not
// expected"); a switch given a value is refused, never taken as given ("--panel=no" drew a panel).
TEST_F(Cli, InputsOnBothSidesOfDashesAndSwitchesWithoutValues) {
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/camera.png", dir / "in" / "a.png");
  fs::copy_file(kData + "/camera.png", dir / "in" / "-b.png");
  const std::string a = q(dir / "in" / "a.png"), b = q(dir / "in" / "-b.png");
  CliRun r = run_attnmap("render " + a + " -o " + q(dir / "out") + " -q -- " + b);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "a.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "-b.png"));
  r = run_attnmap("render " + a + " -o " + q(dir / "o2") + " --panel=no");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "attnmap: error: --panel takes no value, found 'no' (leave it out for the default)\n");
  r = run_attnmap("render " + a + " -o " + q(dir / "o2") + " --panel=");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--panel takes no value, found '=' (give --panel alone)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "o2"));
  // "-o=DIR" is DIR, as Python's argparse reads it (CLI11 made a folder named "=DIR").
  r = run_attnmap("render " + a + " -o=" + q(dir / "o3") + " -q");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "o3" / "a.png"));
}

TEST_F(Cli, EvalJsonNeverTruncatesAnInputTheWeightsOrAMask) {
  const fs::path oh = fs::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_onehot";
  fs::copy(oh, dir / "oh", fs::copy_options::recursive);
  std::vector<fs::path> targets;
  for (const auto& e : fs::directory_iterator(dir / "oh" / "images")) targets.push_back(e.path());
  ASSERT_FALSE(targets.empty());
  const fs::path img = targets.front();
  const fs::path mask = dir / "oh" / "masks" / img.filename();
  ASSERT_TRUE(fs::exists(mask)) << mask;
  const fs::path w = dir / "oh" / "weights.json";
  const auto img_b = slurp(img), mask_b = slurp(mask), w_b = slurp(w);
  for (const fs::path& js : {img, mask, w}) {
    const CliRun r = run_attnmap("eval -q --masks " + q(dir / "oh" / "masks") + " " + q(dir / "oh" / "images") +
                                 " -w " + q(w) + " --json " + q(js));
    EXPECT_EQ(r.status, 2) << js << r.err;
    EXPECT_EQ(r.err, "attnmap: error: --json " + js.string() + " is " +
                         (js == img ? "an input" : js == mask ? "a mask" : "the weights file") +
                         "; choose another file\n");
  }
  EXPECT_EQ(slurp(img), img_b);
  EXPECT_EQ(slurp(mask), mask_b);
  EXPECT_EQ(slurp(w), w_b);
}

TEST_F(Cli, UnreadableFoldersFailAloneAndTheWalkGoesOn) {
  // As root (CI) mode 000 does not block reading: the binary runs as nobody through setpriv.
  const bool root = ::geteuid() == 0;
  if (root && std::system("command -v setpriv >/dev/null 2>&1") != 0) GTEST_SKIP() << "setpriv (util-linux) missing";
  fs::create_directories(dir / "in" / "a_locked");
  fs::create_directories(dir / "in" / "b");
  fs::create_directories(dir / "locked2");
  fs::copy_file(kData + "/camera.png", dir / "in" / "a_locked" / "x.png");
  fs::copy_file(kData + "/camera.png", dir / "in" / "b" / "y.png");
  fs::copy_file(kData + "/camera.png", dir / "in" / "z.png");
  fs::create_directories(dir / "out");
  const fs::path w = dir / "w.json";
  fs::copy_file(fixture("seed_embed/weights.json"), w);
  std::system(("chmod -R a+rwX " + q(dir)).c_str());
  fs::permissions(dir / "in" / "a_locked", fs::perms::none);
  fs::permissions(dir / "locked2", fs::perms::none);
  const std::string as_nobody =
      std::string("timeout 60 ") + (root ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "");
  const CliRun r = run_attnmap("render -q " + q(dir / "in") + " -w " + q(w) + " -o " + q(dir / "out"), as_nobody);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err, "attnmap: error: " + (dir / "in" / "a_locked").string() + ": cannot read folder: Permission denied\n");
  EXPECT_TRUE(fs::exists(dir / "out" / "b" / "y.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "z.png"));
  // Named directly, the unreadable folder is a failure line too, not "no images found".
  const CliRun r2 = run_attnmap("render -q " + q(dir / "locked2") + " -w " + q(w) + " -o " + q(dir / "out"), as_nobody);
  EXPECT_EQ(r2.status, 1) << r2.err;
  EXPECT_EQ(r2.err, "attnmap: error: " + (dir / "locked2").string() + ": cannot read folder: Permission denied\n");
  fs::permissions(dir / "in" / "a_locked", fs::perms::owner_all);
  fs::permissions(dir / "locked2", fs::perms::owner_all);
}

TEST_F(Cli, NonRegularFilesAreRefusedUpFront) {
  const fs::path fifo = dir / "pipe.png";
  ASSERT_EQ(std::system(("mkfifo " + q(fifo)).c_str()), 0);
  const CliRun r = run_attnmap("render " + q(fifo) + " " + q(kData + "/chelsea.png") + " -o " + q(dir / "out"), "timeout 20 ");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("attnmap: error: " + fifo.string() + ": not a regular file\n"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "chelsea.png"));
  const CliRun w = run_attnmap("render " + q(kData + "/chelsea.png") + " -w " + q(fifo) + " -o " + q(dir / "out2"), "timeout 20 ");
  EXPECT_EQ(w.status, 2) << w.err;
  EXPECT_EQ(w.err, "attnmap: error: " + fifo.string() + ": not a regular file\n");
  const CliRun i = run_attnmap("inspect " + q(fifo), "timeout 20 ");
  EXPECT_EQ(i.status, 2) << i.err;
  EXPECT_EQ(i.err, "attnmap: error: " + fifo.string() + ": not a regular file\n");
  const CliRun d = run_attnmap("inspect /dev/zero", "timeout 20 ");
  EXPECT_EQ(d.status, 2) << d.err;
  EXPECT_EQ(d.err, "attnmap: error: /dev/zero: not a regular file\n");
  // Found by a folder walk, a FIFO, a dangling link and a link loop with an image's name each fail with a line
  // and a manifest entry (they were dropped without a word); a link to an image is that image, once.
  fs::create_directories(dir / "walk");
  fs::copy_file(kData + "/chelsea.png", dir / "walk" / "a.png");
  fs::create_symlink("a.png", dir / "walk" / "b.png");
  fs::create_symlink("/nonexistent/x.png", dir / "walk" / "dangling.png");
  fs::create_symlink("loop.png", dir / "walk" / "loop.png");
  ASSERT_EQ(std::system(("mkfifo " + q(dir / "walk" / "pipe.png")).c_str()), 0);
  const CliRun f = run_attnmap("render " + q(dir / "walk") + " -o " + q(dir / "wout") + " --manifest " +
                               q(dir / "m.jsonl"), "timeout 20 ");
  EXPECT_EQ(f.status, 1) << f.err;
  EXPECT_NE(f.err.find("1 done, 3 failed"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("/walk/pipe.png: not a regular file"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("/walk/dangling.png: cannot open"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("/walk/loop.png: cannot open"), std::string::npos) << f.err;
  const std::string m = slurp(dir / "m.jsonl");
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 5) << m;  // the run's header line, then one row per input
}

TEST_F(Cli, BadDefaultViewInTheWeightsConfigSaysSo) {
  // A default_head / default_layer the checkpoint's config got wrong is not reported as a bad --head/--layer.
  std::ifstream in(fixture("timm_small/weights.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& [key, value] : {std::pair<std::string, nlohmann::json>{"default_head", "avg"}, {"default_layer", 7}}) {
    nlohmann::json bad = j;
    bad["config"][key] = value;
    const fs::path w = dir / (key + ".json");
    std::ofstream(w) << bad.dump();
    const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " -w " + q(w) + " -o " + q(dir / "out"));
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("the weights' config " + key + " (config (" + w.string() + ")): "), std::string::npos) << r.err;
    // Given on the command line, the option wins and the config's value is not looked at.
    EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " -w " + q(w) + " -q --layer 0 --head 0 -o " +
                          q(dir / "out")).status, 0);
  }
}

TEST_F(Cli, UnusableOutputFolderIsOneUsageError) {
  std::ofstream(dir / "file") << "x";
  for (const std::string& out : {std::string("''"), q(dir / "file" / "sub")}) {
    const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " " + q(kData + "/coffee.png") + " -o " + out);
    EXPECT_EQ(r.status, 2) << out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(Cli, BadNumericOptionsAreStatus2) {
  const std::string base = "render " + q(kData + "/chelsea.png") + " -o " + q(dir);
  const std::pair<const char*, const char*> cases[] = {
      {"--mean nan,0,0", "--mean values must be finite"},
      {"--mean inf,0,0", "--mean values must be finite"},
      {"--std 0,1,1", "--std values must be positive"},
      {"--std -1,1,1", "--std values must be positive"},
      {"--std nan,1,1", "--std values must be finite"},
      {"--std 1e-50,1,1", "--std value '1e-50' is too small"}, {"--mean 1e39,0,0", "--mean value '1e39' is out of range"},
      {"--max-pixels -1", "--max-pixels must be >= 1"},
      {"--max-pixels 0", "--max-pixels must be >= 1"},
      {"--progress-every -5", "--progress-every must be >= 0"},
      {"--ext png,,jpg", "--ext expects extensions"},
  };
  for (const auto& [opt, msg] : cases) {
    const CliRun r = run_attnmap(base + " " + opt);
    EXPECT_EQ(r.status, 2) << opt << r.err;
    EXPECT_NE(r.err.find(msg), std::string::npos) << opt << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "chelsea.png"));
  // A tiny but usable std (below FLT_MIN, 1/std still a float) is accepted, not "expects R,G,B numbers".
  const CliRun ok = run_attnmap("render -q " + q(kData + "/chelsea.png") + " --std 1e-38,1,1 -o " + q(dir / "ok"));
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_TRUE(fs::exists(dir / "ok" / "chelsea.png"));
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
  const CliRun head17 = run_attnmap("render " + q(kData + "/chelsea.png") + " --head 17 -o " + q(dir));
  EXPECT_EQ(head17.status, 2);
  EXPECT_NE(head17.err.find("head 17 out of range: the model has 4 heads (0..3, or -1..-4)"), std::string::npos)
      << head17.err;
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " --colormap rainbow -o " + q(dir)).status, 2);
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " --alpha 2 -o " + q(dir)).status, 2);
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " --mean 1,2 -o " + q(dir)).status, 2);
  EXPECT_EQ(run_attnmap("render " + q(kData + "/chelsea.png") + " -w /nonexistent.json -o " + q(dir)).status, 2);
  // An empty value is not "option not given" (which would silently use the default view or size).
  for (const char* opt : {"--layer", "--head", "--size", "--discard", "--threshold", "--mean", "--std", "--shard"}) {
    const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " " + opt + " '' -o " + q(dir));
    EXPECT_EQ(r.status, 2) << opt;
    EXPECT_NE(r.err.find(std::string(opt) + " expects a value, found ''"), std::string::npos) << r.err;
  }
  // Every option that takes a value, including numbers (--alpha '' was 0) and the weights (-w '' was the default).
  const std::pair<const char*, const char*> more[] = {
      {"-w", "--weights expects a file name"}, {"-j", "--jobs expects a value"},
      {"--alpha", "--alpha expects a value"},  {"--progress-every", "--progress-every expects a value"},
      {"--heads", "--heads expects a value"},  {"--max-pixels", "--max-pixels expects a value"},
      {"--ext", "--ext expects a value"},      {"--colormap", "--colormap expects a value"}};
  for (const auto& [opt, msg] : more) {
    const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " " + opt + " '' -o " + q(dir));
    EXPECT_EQ(r.status, 2) << opt;
    EXPECT_NE(r.err.find(std::string(msg) + ", found ''"), std::string::npos) << r.err;
  }
  const CliRun tol = run_attnmap("eval --masks " + q(kData + "/composites/masks") + " " +
                                 q(kData + "/composites/0000_trouser.png") + " --tolerance ''");
  EXPECT_EQ(tol.status, 2);
  EXPECT_NE(tol.err.find("--tolerance expects a value, found ''"), std::string::npos) << tol.err;
  // CLI11's own refusals are attnmap lines too, one per error, control characters escaped.
  for (const std::string& bad : {std::string("-j abc"), std::string("--bogus"), std::string("-j 'a\033[31mb'")}) {
    const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " " + bad + " -o " + q(dir));
    EXPECT_EQ(r.status, 2) << bad;
    EXPECT_EQ(r.err.rfind("attnmap: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  }
  // "--head= 2": an '=' with nothing after it; CLI11 alone would take the next argument ("2") as the value.
  for (const char* opt : {"--head=", "--layer=", "--out="}) {
    const CliRun r = run_attnmap("render " + q(kData + "/chelsea.png") + " " + opt + " 2 -o " + q(dir));
    EXPECT_EQ(r.status, 2) << opt;
    const std::string name(opt, std::char_traits<char>::length(opt) - 1);
    EXPECT_NE(r.err.find(name + " expects a value, found ''"), std::string::npos) << r.err;
  }
  const CliRun masks_empty = run_attnmap("eval --masks '' " + q(kData + "/composites/0000_trouser.png"));
  EXPECT_EQ(masks_empty.status, 2);
  EXPECT_NE(masks_empty.err.find("--masks expects a folder, found ''"), std::string::npos) << masks_empty.err;
  const CliRun eval_head = run_attnmap("eval --masks " + q(kData + "/composites/masks") + " " +
                                       q(kData + "/composites/0000_trouser.png") + " --head ''");
  EXPECT_EQ(eval_head.status, 2);
  EXPECT_NE(eval_head.err.find("--head expects a value, found ''"), std::string::npos) << eval_head.err;
  const auto version = run_attnmap("--version");
  EXPECT_EQ(version.status, 0);
  // the second line says which code runs the products here
  EXPECT_NE(version.out.find("matrix products: "), std::string::npos) << version.out;
  EXPECT_EQ(run_attnmap("render --help").status, 0);
  const CliRun unknown = run_attnmap("rendr " + q(kData + "/chelsea.png"));
  EXPECT_EQ(unknown.status, 2);
  EXPECT_EQ(unknown.err, "attnmap: error: unknown command 'rendr'; did you mean 'render'? (commands: render, eval, "
                        "inspect, figure, explore, stats, download; attnmap --help)\n");
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
