// Bad input never crashes attnmap or loses a result (issue 6): the image corpus made by
// tools/make_bad_inputs.py, EXIF orientation, size limits, and the decoder's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/batch.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"
#include "model/preprocess.hpp"
#include "model/sgemm.hpp"
#include "test_util.hpp"
#include "checkpoint/weights.hpp"
#include "checkpoint/weights_pth.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "../fuzz/clip_text_input.hpp"  // the replay of fuzz/regressions/clip_text/

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
    EXPECT_TRUE(std::none_of(msg.begin(), msg.end(), [](char c) { return c >= 0 && c < 0x20; }))
        << "no control codes: " << msg;
  }
}

// A header declaring 20000x20000 or 23169x23169 RGBA is refused from the header alone: quickly, and
// without mapping the gigabyte-sized buffer a decoder would need.
TEST(Corpus, HugeHeadersAreRefusedBeforeAnyAllocation) {
  const long before = vm_peak_kb();
  const auto t0 = std::chrono::steady_clock::now();
  for (const char* name : {"huge_20000x20000.png", "huge_23169x23169_rgba.png", "huge_jpeg_30000.jpg"}) {
    const std::string msg = error_of(kCorpus / "bad" / name);
    EXPECT_NE(msg.find("exceeds the limit of 100000000 pixels ({setting:max_pixels})"), std::string::npos) << msg;
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
  // The decoders would need 1.2 to 2.7 GB; thread start-up (malloc arenas of 64 MB, OpenBLAS buffers) may
  // add a few hundred MB of address space on its own, so the bound sits between the two.
  EXPECT_LT(after - before, 512 * 1024) << "peak virtual memory grew by " << (after - before) << " kB";
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

// ---------------------------------------------------------------------------------------------------
// The binary end to end on the corpus, on unwritable outputs, and killed mid-run.

namespace {

class Robust : public TempDirTest {
 protected:
  // Every file under `root`, relative, sorted.
  static std::set<std::string> tree(const fs::path& root) {
    std::set<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root))
      if (!e.is_directory()) out.insert(fs::relative(e.path(), root).u8string());
    return out;
  }
};

const std::string kPhoto = std::string(ATTNMAP_DATA_DIR) + "/chelsea.png";

}  // namespace

// One folder holding every good and every bad corpus file: all good ones rendered at their displayed
// size, every bad one reported on its own line with its reason, exit status 1, nothing else written.
TEST_F(Robust, MixedFolderRendersGoodReportsBad) {
  const nlohmann::json ex = expectations();
  fs::create_directories(dir / "in");
  for (const char* sub : {"good", "bad"})
    for (const auto& e : fs::directory_iterator(kCorpus / sub)) fs::copy_file(e.path(), dir / "in" / e.path().filename());
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " --no-legend");  // bare overlays
  EXPECT_EQ(r.status, 1) << r.err;
  std::set<std::string> want;
  for (const auto& [name, spec] : ex["good"].items()) {
    const std::string out = fs::u8path(name).stem().u8string() + ".png";
    want.insert(out);
    const Image ref = load_image((kCorpus / "ref" / fs::u8path(name + ".png")).string());
    const fs::path got = dir / "out" / fs::u8path(out);
    ASSERT_TRUE(fs::exists(got)) << out << "\n" << r.err;
    const Image img = load_image(got.string());
    EXPECT_EQ(img.width, ref.width) << out;
    EXPECT_EQ(img.height, ref.height) << out;
  }
  EXPECT_EQ(tree(dir / "out"), want) << "only the good files' overlays, no temporary files";
  size_t error_lines = 0;
  for (size_t at = r.err.find("attnmap: error: "); at != std::string::npos; at = r.err.find("attnmap: error: ", at + 1))
    ++error_lines;
  EXPECT_EQ(error_lines, ex["bad"].size()) << r.err;
  for (const auto& [name, reason] : ex["bad"].items()) {
    const std::string line = "attnmap: error: " + (dir / "in" / name).string() + ": ";
    const size_t at = r.err.find(line);
    ASSERT_NE(at, std::string::npos) << name << "\n" << r.err;
    const std::string rest = r.err.substr(at, r.err.find('\n', at) - at);
    EXPECT_NE(rest.find(reason.get<std::string>()), std::string::npos) << rest;
  }
  EXPECT_NE(r.err.find(std::to_string(ex["good"].size()) + " done, " + std::to_string(ex["bad"].size()) + " failed"),
            std::string::npos)
      << r.err;
}

TEST_F(Robust, NoExifKeepsStoredOrientation) {
  const fs::path in = kCorpus / "good" / "exif_orient_6.jpg";
  ASSERT_EQ(run_attnmap("render " + q(in) + " --no-legend -o " + q(dir / "a")).status, 0);  // bare overlays
  ASSERT_EQ(run_attnmap("render " + q(in) + " --no-legend --no-exif -o " + q(dir / "b")).status, 0);
  const Image shown = load_image((dir / "a" / "exif_orient_6.png").string());
  const Image stored = load_image((dir / "b" / "exif_orient_6.png").string());
  EXPECT_EQ(shown.width, 48);  // turned upright, as viewers show it
  EXPECT_EQ(shown.height, 32);
  EXPECT_EQ(stored.width, 32);  // the stored pixel order
  EXPECT_EQ(stored.height, 48);
}

TEST_F(Robust, NonAsciiAndSpacesKeptInOutputName) {
  fs::create_directories(dir / "in dir");
  fs::copy_file(kCorpus / "good" / fs::u8path("café 猫.png"), dir / "in dir" / fs::u8path("café 猫.png"));
  const CliRun r = run_attnmap("render " + q(dir / "in dir") + " -o " + q(dir / fs::u8path("out 出力")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / fs::u8path("out 出力") / fs::u8path("café 猫.png")));
}

// An output folder that cannot be created (its parent is a regular file - this blocks root too, unlike
// chmod 0555) is a per-file error: every image fails with the reason, status 1, no crash.
TEST_F(Robust, UnwritableOutputFolderIsOneUsageError) {
  std::ofstream(dir / "file") << "x";
  const CliRun r = run_attnmap("render " + q(kCorpus / "good" / "png_grey8.png") + " " + q(kCorpus / "good" / "bmp.bmp") +
                        " -o " + q(dir / "file" / "out"));
  // The output folder is created once, before any image: one line, status 2, not one error per image.
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err, "attnmap: error: " + (dir / "file" / "out").string() +
                       ": cannot create the output folder: Not a directory\n");
  const CliRun f = run_attnmap("render " + q(kCorpus / "good" / "png_grey8.png") + " -o " + q(dir / "file"));
  EXPECT_EQ(f.status, 2) << f.err;
  EXPECT_EQ(f.err, "attnmap: error: " + (dir / "file").string() + ": the output folder exists and is not a folder\n");
}

// A full disk mid-write (simulated with a file-size limit: write() fails with EFBIG once the limit is
// reached, SIGXFSZ ignored): a per-file error, and neither the final name nor a temporary file is left.
TEST_F(Robust, FullDiskMidWriteLeavesNothing) {
  const CliRun r = run_attnmap("render " + q(kPhoto) + " " + q(kCorpus / "good" / "png_1x1.png") + " -o " + q(dir / "out"),
                        "trap '' XFSZ; ulimit -f 20; ");  // 20 KiB: the photo's overlay is larger
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("chelsea.png: write failed: File too large"), std::string::npos) << r.err;
  EXPECT_EQ(tree(dir / "out"), (std::set<std::string>{"png_1x1.png"}));
}

// Issue 26: the same with --save-raw: the photo's .npy and sidecar fit, its overlay does not; the failed image
// leaves neither under its final name (the 1x1 image keeps all three of its files).
TEST_F(Robust, FullDiskAfterTheNpyLeavesNoneOfTheImagesFiles) {
  const CliRun r = run_attnmap("render " + q(kPhoto) + " " + q(kCorpus / "good" / "png_1x1.png") + " --save-raw -o " +
                                   q(dir / "out"),
                               "trap '' XFSZ; ulimit -f 20; ");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("chelsea.png: write failed: File too large"), std::string::npos) << r.err;
  EXPECT_EQ(tree(dir / "out"), (std::set<std::string>{"png_1x1.npy", "png_1x1.npy.json", "png_1x1.png"}));
}

// kill -9 at several moments of a run: every PNG under its final name decodes completely (the only
// leftovers of a killed run are hidden .NAME.tmp.* files in the output folder).
TEST_F(Robust, KilledRunNeverLeavesATruncatedPng) {
  fs::create_directories(dir / "in");
  // 48 photos: ~0.5 s in a Release build on 2 cores (PNG writing got ~3x faster: 12 photos now end in 0.14 s,
  // before the first kill), several seconds under the sanitizers.
  for (int i = 0; i < 48; ++i) fs::copy_file(kPhoto, dir / "in" / ("p" + std::to_string(i) + ".png"));
  int killed = 0;
  size_t checked = 0;
  for (int delay_ms : {50, 150, 400, 1500}) {
    const fs::path out = dir / ("out" + std::to_string(delay_ms));
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::execl(ATTNMAP_BIN, ATTNMAP_BIN, "render", (dir / "in").c_str(), "-q", "-o", out.c_str(), (char*)nullptr);
      ::_exit(127);
    }
    ::usleep(static_cast<useconds_t>(delay_ms) * 1000);
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    killed += WIFSIGNALED(st) ? 1 : 0;
    if (!fs::exists(out)) continue;
    for (const auto& e : fs::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      if (name[0] == '.') {
        EXPECT_NE(name.find(".tmp."), std::string::npos) << name;
        continue;
      }
      const Image img = load_image(e.path().string());  // throws on a truncated file
      EXPECT_EQ(img.width, 451) << name;
      ++checked;
    }
  }
  EXPECT_GE(killed, 1) << "no run was killed mid-way";
  EXPECT_GE(checked, 1u) << "no run got as far as writing an output";
}

// Output names never leave the output folder: inputs given with "..", as absolute paths, or through
// symbolic links all land directly under out_dir.
TEST_F(Robust, OutputNamesStayInsideTheOutputFolder) {
  fs::create_directories(dir / "a" / "b");
  fs::copy_file(kCorpus / "good" / "bmp.bmp", dir / "a" / "x.bmp");
  fs::copy_file(kCorpus / "good" / "tga.tga", dir / "a" / "b" / "y.tga");
  fs::create_symlink(dir / "a" / "x.bmp", dir / "link.png");
  fs::create_directory_symlink(dir / "a", dir / "a" / "b" / "loop");
  std::vector<std::string> missing;
  const std::vector<Job> jobs =
      plan_jobs({(dir / "a" / "b" / ".." / "x.bmp").string(), (dir / "a" / "b" / "..").string(),
                 (dir / "link.png").string(), fs::relative(dir / "a" / "x.bmp", fs::current_path()).string()},
                (dir / "out").string(), &missing);
  EXPECT_TRUE(missing.empty());
  ASSERT_FALSE(jobs.empty());
  for (const Job& j : jobs) {
    const fs::path rel = fs::path(j.out_base).lexically_relative(dir / "out");
    EXPECT_FALSE(rel.empty()) << j.out_base;
    for (const auto& part : rel) EXPECT_NE(part.string(), "..") << j.out_base;
  }
}

// Every input that once broke a fuzz target (fuzz/regressions/TARGET/) is replayed through the same code:
// it must end in a result or an attnmap::Error, never a crash (the ASan + UBSan build runs this too).
TEST(FuzzRegressions, ReplayedWithoutCrash) {
  const fs::path root = fs::path(ATTNMAP_TEST_DIR).parent_path() / "fuzz" / "regressions";
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().extension() == ".md") continue;
    const std::string target = e.path().parent_path().filename().string();
    const std::vector<uint8_t> bytes = read_file(e.path().string());
    SCOPED_TRACE(e.path().string());
    ++n;
    try {
      if (target == "image") {
        LoadOptions opt;
        opt.max_pixels = 4'000'000;
        const Image img = decode_image(bytes.data(), bytes.size(), "fuzz", opt);
        const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.5f, 0.5f, 0.5f};
        preprocess(img, 32, 32, ResizeMode::Crop, mean, std);
      } else if (target == "weights_json") {
        build_model(parse_weights_json(std::string(bytes.begin(), bytes.end()), "fuzz.json"));
      } else if (target == "safetensors") {
        build_model(parse_weights_safetensors(bytes.data(), bytes.size(), "fuzz.safetensors"));
      } else if (target == "pth") {  // fuzz/fuzz_pth.cpp: a zip archive (a bare data.pkl there is kept zipped here)
        build_model(parse_weights_pth(bytes.data(), bytes.size(), "fuzz.pth", ""));
      } else if (target == "clip_text") {  // fuzz/fuzz_clip_text.cpp's own code: it catches the Errors
        const fs::path files = fs::temp_directory_path() / ("attnmap_fuzz_replay_" + std::to_string(::getpid()));
        fs::create_directories(files);
        attnmap::fuzz::run_clip_text_input(bytes.data(), bytes.size(), files);
        fs::remove_all(files);
      }
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("fuzz"), std::string::npos) << err.what();
    }
  }
  EXPECT_GE(n, 1u);
}

// ---------------------------------------------------------------------------------------------------
// Hostile safetensors files: every one refused with the file, the tensor and the reason, no allocation of
// the claimed size, no crash.

namespace {

// 8-byte little-endian header length, the header, then `data`.
std::vector<uint8_t> safetensors(const std::string& header, const std::vector<uint8_t>& data, int64_t claim = -1) {
  std::vector<uint8_t> out(8);
  const uint64_t n = claim >= 0 ? static_cast<uint64_t>(claim) : header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> f32(std::initializer_list<float> v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.begin(), out.size());
  return out;
}

std::string st_error(const std::vector<uint8_t>& file) {
  try {
    parse_weights_safetensors(file.data(), file.size(), "w.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(SafetensorsHostile, RefusedWithFileTensorAndReason) {
  const std::string ok_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const RawWeights ok = parse_weights_safetensors(safetensors(ok_header, f32({1.5f, -2})).data(),
                                                  safetensors(ok_header, f32({1.5f, -2})).size(), "w.safetensors");
  EXPECT_EQ(ok.tensors.at("a").data, (std::vector<float>{1.5f, -2}));

  // Header length past the end of the file, a 2 GB claim, and a length whose + 8 would wrap around.
  EXPECT_NE(st_error(safetensors(ok_header, f32({1, 2}), 4096)).find("w.safetensors: safetensors header length 4096 does not fit"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors(ok_header, f32({1, 2}), int64_t{2} << 30)).find("header length 2147483648 does not fit"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors(ok_header, f32({1, 2}), INT64_MAX)).find("does not fit in the file"), std::string::npos);
  EXPECT_NE(st_error({1, 2, 3}).find("shorter than the 8-byte header length"), std::string::npos);
  // Offsets out of range, overlapping, with a gap, inconsistent with the shape.
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,80]}})", f32({1, 2})))
                .find("tensor 'a' has data_offsets [0, 80] outside the data area of 8 bytes"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                 f32({1, 2})))
                .find("overlaps the previous tensor"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32({1, 2})))
                .find("tensor 'a' starts at byte 4 of the data area, expected 0 (gap"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32({1, 2})))
                .find("tensor 'a' has 8 bytes, expected (3,) x F32 = 12"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", f32({1, 2})))
                .find("tensor 'a' has data_offsets [8, 0]"),
            std::string::npos);
  // A shape whose product overflows, a negative dimension, an unknown dtype.
  const std::string big = std::to_string(uint64_t{1} << 40);
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F32","shape":[)" + big + "," + big + R"(],"data_offsets":[0,8]}})",
                                 f32({1, 2})))
                .find("w.safetensors: tensor 'a'"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32({1, 2})))
                .find("tensor 'a' has a shape entry that is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F8_E9","shape":[2],"data_offsets":[0,8]}})", f32({1, 2})))
                .find("tensor 'a' has unknown dtype 'F8_E9'"),
            std::string::npos);
  // Trailing bytes after the last tensor, a duplicate name, NaN and infinite values.
  std::vector<uint8_t> trailing = f32({1, 2});
  trailing.push_back(0);
  EXPECT_NE(st_error(safetensors(ok_header, trailing)).find("1 trailing bytes after the last tensor"), std::string::npos);
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                 R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                 f32({1, 2})))
                .find("tensor 'a' appears twice"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors(ok_header, f32({1, std::nanf("")}))).find("w.safetensors: tensor 'a'"), std::string::npos);
  EXPECT_NE(st_error(safetensors(ok_header, f32({HUGE_VALF, 2}))).find("w.safetensors: tensor 'a'"), std::string::npos);
  // Malformed or 10 000-deep header JSON.
  EXPECT_NE(st_error(safetensors(R"({"a":)", {})).find("header is not valid JSON"), std::string::npos);
  const std::string deep = std::string(10000, '[') + std::string(10000, ']');
  EXPECT_NE(st_error(safetensors(R"({"a":{"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,8]}})", f32({1, 2})))
                .find("tensor 'a' has"),
            std::string::npos);
  const std::vector<uint8_t> meta = safetensors(R"({"__metadata__":)" + deep + "}", {});
  EXPECT_NE(st_error(meta).find("w.safetensors: safetensors __metadata__ is not a JSON object"), std::string::npos);
}

// The same refusals end to end: one line, exit status 2, nothing rendered.
TEST_F(Robust, HostileSafetensorsIsOneLineAndStatus2) {
  const fs::path w = dir / "w.safetensors";
  const std::vector<uint8_t> file =
      safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32({1, 2}), int64_t{2} << 30);
  std::ofstream(w, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  const CliRun r = run_attnmap("render " + q(kPhoto) + " -w " + q(w) + " -o " + q(dir / "out"));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "attnmap: error: " + w.string() + ": safetensors header length 2147483648 does not fit in the file (" +
                       std::to_string(file.size()) + " bytes)\n");
  EXPECT_FALSE(fs::exists(dir / "out" / "chelsea.png"));
}

// The pool's thread count: one per worker with several workers; with one, every core, or fewer when the
// user's OPENBLAS_NUM_THREADS (else OMP_NUM_THREADS) asks for fewer; values that are not a count ignored.
TEST(BlasThreads, OneWithSeveralWorkersElseCoresCappedByTheEnvironment) {
  EXPECT_EQ(blas_threads_to_set(1, 8, nullptr, nullptr), 8);
  EXPECT_EQ(blas_threads_to_set(4, 8, nullptr, nullptr), 1);
  EXPECT_EQ(blas_threads_to_set(1, 8, "", ""), 8);
  EXPECT_EQ(blas_threads_to_set(1, 8, "1", nullptr), 1);
  EXPECT_EQ(blas_threads_to_set(1, 8, nullptr, "3"), 3);
  EXPECT_EQ(blas_threads_to_set(4, 8, nullptr, "2"), 1);
  EXPECT_EQ(blas_threads_to_set(1, 2, "16", "1"), 2);  // OPENBLAS_NUM_THREADS first, capped at the cores
  EXPECT_EQ(blas_threads_to_set(1, 8, "two", "0"), 8);
  EXPECT_EQ(blas_threads_to_set(0, 0, nullptr, nullptr), 1);
}

TEST_F(Robust, RegisteredTemporaryFilesAreRemovedOnInterrupt) {
  const fs::path tmp = dir / ".out.png.tmp.1.0", other = dir / "out.png";
  std::ofstream(tmp) << "partial";
  std::ofstream(other) << "finished";
  {
    const TempFileGuard guard(tmp.string());
    remove_registered_temp_files();  // what the SIGINT/SIGTERM/SIGHUP handler does first
    EXPECT_FALSE(fs::exists(tmp));
    EXPECT_TRUE(fs::exists(other));
    std::ofstream(tmp) << "partial";
  }
  remove_registered_temp_files();  // the guard has ended (renamed into place): the name is no longer touched
  EXPECT_TRUE(fs::exists(tmp));
}

TEST_F(Robust, InterruptedRunEndsBySignalAndLeavesNoTemporaryFile) {
  // Ctrl-C (SIGINT) or a scheduler's kill (SIGTERM) in the middle of a folder: the run ends by that signal,
  // every output already written is complete, and no .NAME.tmp.* is left beside them.
  fs::create_directories(dir / "in");
  for (int i = 0; i < 400; ++i)
    fs::create_hard_link(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png", dir / "in" / ("p" + std::to_string(i) + ".png"));
  for (const int sig : {SIGINT, SIGTERM}) {
    const fs::path out = dir / ("out" + std::to_string(sig));
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string in = (dir / "in").string(), o = out.string();
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
      ::execl(ATTNMAP_BIN, "attnmap", "render", in.c_str(), "-o", o.c_str(), "--save-raw", "-q", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto count = [&]() {
      std::error_code ec;
      size_t n = 0;
      for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) ++n;
      return n;
    };
    while (count() < 20 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    // Stop the run at moments until one finds a temporary file in the folder, then interrupt it there.
    int status = 0;
    fs::path caught;
    for (int tries = 0; tries < 3000 && caught.empty(); ++tries) {
      ::kill(pid, SIGSTOP);
      ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
      if (!WIFSTOPPED(status)) break;  // it has finished
      std::error_code ec;
      for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().filename().string().find(".tmp.") != std::string::npos) caught = it->path();
      if (caught.empty()) {
        ::kill(pid, SIGCONT);
        std::this_thread::sleep_for(std::chrono::microseconds(300));
      }
    }
    ::kill(pid, sig);
    ::kill(pid, SIGCONT);
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_FALSE(caught.empty()) << "signal " << sig << ": no moment with a temporary file was found";
    if (!caught.empty()) {
      EXPECT_FALSE(fs::exists(caught)) << caught;
    }
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << sig << ": the run finished before it was interrupted";
    EXPECT_EQ(WTERMSIG(status), sig);
    size_t overlays = 0;
    for (const auto& e : fs::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
      EXPECT_NE(name[0], '.') << name;
      if (e.path().extension() == ".png") {
        ++overlays;
        EXPECT_TRUE(written_by_attnmap(e.path().string())) << name;
        EXPECT_NO_THROW(load_image(e.path().string())) << name;  // complete: decodes to its end
      }
    }
    EXPECT_GE(overlays, 1u);  // it was interrupted after 20 files, some .npy, some .png
  }
}
