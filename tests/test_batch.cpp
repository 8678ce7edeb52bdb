// Batch behaviour of `attnmap render` on folders: sharding, resuming, the manifest, -j, --ext; and the
// helpers behind them (map statistics, option parsing).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <spng.h>
#include <zlib.h>

#include "maps/attention_maps.hpp"
#include "engine/batch.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"
#include "io/image_io_internal.hpp"
#include "io/npy.hpp"
#include "same_tensors.hpp"
#include "test_util.hpp"
#include "checkpoint/weights_json.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {




/// Every regular file under `root`: relative path -> bytes.
std::map<std::string, std::string> tree(const fs::path& root) {
  std::map<std::string, std::string> m;
  if (!fs::exists(root)) return m;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) m[fs::relative(e.path(), root).string()] = slurp(e.path());
  return m;
}

/// A manifest's rows, without its header lines ({"attnmap_manifest": 1, ...}).
std::vector<nlohmann::json> read_manifest(const fs::path& p) {
  std::vector<nlohmann::json> v;
  std::ifstream f(p);
  std::string line;
  while (std::getline(f, line)) {
    nlohmann::json j = nlohmann::json::parse(line);  // throws on a malformed line
    if (!j.contains("attnmap_manifest")) v.push_back(std::move(j));
  }
  return v;
}

const std::string kData = ATTNMAP_DATA_DIR;

class Batch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("attnmap_batch_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    // in/: 7 images in three folders, a broken .png, a text file, a hidden image.
    const fs::path in = dir / "in";
    fs::create_directories(in / "a");
    fs::create_directories(in / "b" / "c");
    fs::copy_file(kData + "/composites/0000_trouser.png", in / "a" / "t0.png");
    fs::copy_file(kData + "/composites/0001_sneaker.png", in / "a" / "t1.png");
    fs::copy_file(kData + "/composites/0002_bag.png", in / "b" / "bag.png");
    fs::copy_file(kData + "/composites/0003_coat.png", in / "b" / "c" / "coat.PNG");
    fs::copy_file(kData + "/composites/0004_sneaker.png", in / "b" / "c" / "s4.png");
    fs::copy_file(kData + "/rocket.jpg", in / "rocket.jpg");
    fs::copy_file(kData + "/composites/0005_sandal.png", in / "z.png");
    fs::copy_file(kData + "/composites/0006_ankle_boot.png", in / ".hidden.png");
    std::ofstream(in / "b" / "broken.png") << "not a png at all";
    std::ofstream(in / "notes.txt") << "text";
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

}  // namespace

TEST(MapStatistics, MaxArgmaxEntropy) {
  // 2x3 map; max 0.4 at row 1, column 0; entropy of the renormalised map.
  const std::vector<float> m = {0.1f, 0.2f, 0.1f, 0.4f, 0.1f, 0.1f};
  const MapStats s = map_statistics(m, 2, 3);
  EXPECT_FLOAT_EQ(s.max, 0.4f);
  EXPECT_EQ(s.argmax_row, 1);
  EXPECT_EQ(s.argmax_col, 0);
  ASSERT_TRUE(s.entropy_valid);
  const double h = -(4 * 0.1 * std::log(0.1) + 0.2 * std::log(0.2) + 0.4 * std::log(0.4));
  EXPECT_NEAR(s.entropy, h, 1e-6);
  // Uniform: ln(n); one-hot: 0; not renormalised by the caller: scaling changes max but not entropy.
  EXPECT_NEAR(map_statistics(std::vector<float>(6, 0.05f), 2, 3).entropy, std::log(6.0), 1e-6);
  EXPECT_NEAR(map_statistics({0, 0, 3, 0}, 2, 2).entropy, 0.0, 1e-12);
  EXPECT_EQ(map_statistics({0, 0, 3, 0}, 2, 2).argmax_row, 1);
  EXPECT_FALSE(map_statistics({0, 0, 0, 0}, 2, 2).entropy_valid);
  EXPECT_THROW(map_statistics({1, 2, 3}, 2, 2), Error);
}

TEST(BatchOptionParsing, ShardAndExtensions) {
  int k = 0, n = 0;
  parse_shard("2/5", &k, &n);
  EXPECT_EQ(k, 2);
  EXPECT_EQ(n, 5);
  for (const char* bad : {"0/2", "3/2", "1/0", "1", "/2", "1/", "a/b", "1/2x", "-1/2", "1/-2"})
    EXPECT_THROW(parse_shard(bad, &k, &n), Error) << bad;
  EXPECT_EQ(parse_extensions({".JPG,png", "tif"}), (std::vector<std::string>{"jpg", "png", "tif"}));
  EXPECT_THROW(parse_extensions({"jpg,,png"}), Error);
}

TEST_F(Batch, ShardsTogetherMakeExactlyTheFullRun) {
  const CliRun full = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "full") + " -q -j 1");
  EXPECT_EQ(full.status, 1) << full.err;  // the broken file
  const CliRun s1 = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "sh") + " -q --shard 1/2");
  const CliRun s2 = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "sh") + " -q --shard 2/2");
  const auto a = tree(dir / "full"), b = tree(dir / "sh");
  ASSERT_EQ(a.size(), 7u);  // 8 files, one broken
  EXPECT_EQ(a, b);
  // Sorted: a/t0 a/t1 b/bag b/broken b/c/coat b/c/s4 rocket z; broken (index 3) fails in shard 2 only.
  EXPECT_EQ(s1.status, 0) << s1.err;
  EXPECT_EQ(s2.status, 1) << s2.err;
  const CliRun only1 = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "one") + " -q --shard 1/2");
  EXPECT_EQ(tree(dir / "one").size(), 4u);  // sorted indices 0, 2, 4, 6 of 8
  EXPECT_TRUE(fs::exists(dir / "one" / "rocket.png"));
  EXPECT_FALSE(fs::exists(dir / "one" / "z.png"));
}

TEST_F(Batch, SkipExistingResumes) {
  ASSERT_EQ(run_attnmap("render " + q(dir / "in" / "a") + " -o " + q(dir / "out") + " -q").status, 0);
  // Mark one output so that re-rendering it would be visible (bytes after IEND: still attnmap's PNG), and
  // delete the other.
  std::ofstream(dir / "out" / "t0.png", std::ios::app) << "kept";
  fs::remove(dir / "out" / "t1.png");
  const CliRun r = run_attnmap("render " + q(dir / "in" / "a") + " -o " + q(dir / "out") + " --skip-existing --manifest " +
                    q(dir / "m.jsonl"));
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string marked = slurp(dir / "out" / "t0.png");
  EXPECT_EQ(marked.substr(marked.size() - 4), "kept");
  EXPECT_EQ(load_image((dir / "out" / "t1.png").string()).width, 224);
  EXPECT_NE(r.err.find("1 done, 0 failed, 1 skipped"), std::string::npos) << r.err;
  const auto m = read_manifest(dir / "m.jsonl");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["status"], "skipped");
  EXPECT_EQ(m[1]["status"], "done");
  // Without the flag the marked output is rendered again.
  ASSERT_EQ(run_attnmap("render " + q(dir / "in" / "a") + " -o " + q(dir / "out") + " -q").status, 0);
  EXPECT_NE(slurp(dir / "out" / "t0.png"), marked);
  // A file attnmap did not write (0 bytes, text) is not "already done": refused as in a plain run, left alone.
  std::ofstream(dir / "out" / "t0.png", std::ios::trunc).flush();
  std::ofstream(dir / "out" / "t1.png", std::ios::trunc) << "my notes";
  const CliRun foreign = run_attnmap("render " + q(dir / "in" / "a") + " -o " + q(dir / "out") + " --skip-existing");
  EXPECT_EQ(foreign.status, 1) << foreign.err;
  EXPECT_NE(foreign.err.find("0 done, 2 failed, 0 skipped"), std::string::npos) << foreign.err;
  EXPECT_NE(foreign.err.find("t0.png already exists and was not written by attnmap"), std::string::npos) << foreign.err;
  EXPECT_EQ(slurp(dir / "out" / "t1.png"), "my notes");
}

// A user's picture that has an output's name is never replaced (photos/cat.jpg rendered into photos/
// would write photos/cat.png); an output attnmap wrote itself is (the PNG's tEXt Software = attnmap).
TEST_F(Batch, NeverReplacesAUsersFileWithAnOutputsName) {
  fs::create_directories(dir / "photos");
  fs::copy_file(dir / "in" / "a" / "t0.png", dir / "photos" / "cat.png");
  fs::copy_file(dir / "in" / "a" / "t1.png", dir / "photos" / "dog.png");
  const std::string user = slurp(dir / "photos" / "cat.png");
  ASSERT_FALSE(written_by_attnmap((dir / "photos" / "cat.png").string()));
  // cat.png as an input of the same run: its overlay would be cat.png too -> named cat.png.png; here the
  // input is dog.png alone, rendered to photos/ under the name cat.png by a symlink.
  fs::create_symlink(dir / "photos" / "dog.png", dir / "cat.jpg");
  const CliRun r = run_attnmap("render " + q(dir / "cat.jpg") + " -o " + q(dir / "photos"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("already exists and was not written by attnmap"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir / "photos" / "cat.png"), user);
  // Into a fresh folder it renders; a second run replaces its own output.
  ASSERT_EQ(run_attnmap("render " + q(dir / "cat.jpg") + " -o " + q(dir / "o2") + " -q").status, 0);
  EXPECT_TRUE(written_by_attnmap((dir / "o2" / "cat.png").string()));
  EXPECT_EQ(run_attnmap("render " + q(dir / "cat.jpg") + " -o " + q(dir / "o2") + " -q").status, 0);
}

// The same for --save-raw's NAME.npy (attnmap's own: a '<f4' .npy as it writes them), and nothing but a
// regular file is replaced (a FIFO, link or folder under an output's name); nothing of the image is written.
TEST_F(Batch, NeverReplacesAUsersNpyOrANonRegularFile) {
  fs::create_directories(dir / "o");
  std::ofstream(dir / "o" / "t0.npy") << "user data";
  const CliRun r = run_attnmap("render " + q(dir / "in" / "a" / "t0.png") + " -o " + q(dir / "o") + " --save-raw -q");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("t0.npy already exists and was not written by attnmap"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir / "o" / "t0.npy"), "user data");
  EXPECT_FALSE(fs::exists(dir / "o" / "t0.png"));  // checked before anything of the image is written
  fs::remove(dir / "o" / "t0.npy");
  ASSERT_EQ(run_attnmap("render " + q(dir / "in" / "a" / "t0.png") + " -o " + q(dir / "o") + " --save-raw -q").status, 0);
  EXPECT_TRUE(looks_written_by_attnmap_npy((dir / "o" / "t0.npy").string()));
  EXPECT_EQ(run_attnmap("render " + q(dir / "in" / "a" / "t0.png") + " -o " + q(dir / "o") + " --save-raw -q").status, 0);
  ASSERT_EQ(::mkfifo((dir / "o" / "t1.png").c_str(), 0644), 0);
  const CliRun f = run_attnmap("render " + q(dir / "in" / "a" / "t1.png") + " -o " + q(dir / "o") + " -q", "timeout 20 ");
  EXPECT_EQ(f.status, 1) << f.err;
  EXPECT_NE(f.err.find("t1.png exists and is not a regular file"), std::string::npos) << f.err;
  EXPECT_TRUE(fs::is_fifo(dir / "o" / "t1.png"));
  // A FIFO where a side config is read beside the weights is refused, not waited on.
  fs::create_directories(dir / "w");
  fs::copy_file(attnmap::default_weights_path(), dir / "w" / "m.json");
  ASSERT_EQ(::mkfifo((dir / "w" / "config.json").c_str(), 0644), 0);
  const CliRun c = run_attnmap("render " + q(dir / "in" / "a" / "t0.png") + " -w " + q(dir / "w" / "m.json") + " -o " +
                               q(dir / "o3") + " -q", "timeout 20 ");
  EXPECT_EQ(c.status, 2) << c.err;
  EXPECT_NE(c.err.find("config.json: not a regular file"), std::string::npos) << c.err;
}

// Shards together write one full run's files: a shard's manifest may not be another shard's overlay.
TEST_F(Batch, ShardManifestIsCheckedAgainstEveryShardsOutputs) {
  const CliRun r = run_attnmap("render " + q(dir / "in" / "a") + " -o " + q(dir / "out") + " --shard 1/2 -q --manifest " +
                               q(dir / "out" / "t1.png"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("is an output of this run"), std::string::npos) << r.err;
}

TEST_F(Batch, ManifestLinesMatchTheNpyMaps) {
  const CliRun r = run_attnmap("render " + q(dir / "in") + " " + q(dir / "nothing.png") + " -o " + q(dir / "out") +
                    " --save-raw -q --manifest " + q(dir / "m.jsonl"));
  EXPECT_EQ(r.status, 1) << r.err;
  const auto m = read_manifest(dir / "m.jsonl");
  ASSERT_EQ(m.size(), 9u);  // 8 files found (7 images + broken.png) and one missing input
  // The missing input first, then the sorted walk.
  EXPECT_EQ(m[0]["input"], (dir / "nothing.png").string());
  EXPECT_EQ(m[0]["status"], "failed");
  EXPECT_NE(m[0]["error"].get<std::string>().find("no such file"), std::string::npos);
  EXPECT_EQ(m[1]["input"], (dir / "in" / "a" / "t0.png").string());
  int done = 0;
  for (const auto& j : m) {
    for (const char* key : {"input", "outputs", "status", "error", "milliseconds", "map_max", "argmax_row",
                            "argmax_col", "entropy"})
      EXPECT_TRUE(j.contains(key)) << key << " in " << j.dump();
    if (j["input"] == (dir / "in" / "b" / "broken.png").string()) {
      EXPECT_EQ(j["status"], "failed");
      EXPECT_NE(j["error"].get<std::string>().find("not a readable image"), std::string::npos) << j.dump();
      EXPECT_TRUE(j["map_max"].is_null());
      EXPECT_TRUE(j["outputs"].empty());
      continue;
    }
    if (j["status"] != "done") continue;
    ++done;
    EXPECT_TRUE(j["error"].is_null());
    EXPECT_GT(j["milliseconds"].get<double>(), 0.0);
    ASSERT_EQ(j["outputs"].size(), 2u);
    const std::string png = j["outputs"][0], npy = j["outputs"][1];
    EXPECT_EQ(fs::path(png).extension(), ".png");
    EXPECT_TRUE(fs::exists(png));
    std::vector<int64_t> shape;
    const std::vector<float> map = read_npy(npy, &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{14, 14}));
    size_t best = 0;
    double sum = 0;
    for (size_t i = 0; i < map.size(); ++i) {
      if (map[i] > map[best]) best = i;
      sum += map[i];
    }
    double h = 0;
    for (float v : map) h -= v > 0 ? (v / sum) * std::log(v / sum) : 0.0;
    EXPECT_EQ(j["argmax_row"].get<int>(), static_cast<int>(best / 14)) << npy;
    EXPECT_EQ(j["argmax_col"].get<int>(), static_cast<int>(best % 14)) << npy;
    EXPECT_FLOAT_EQ(j["map_max"].get<float>(), map[best]) << npy;
    EXPECT_NEAR(j["entropy"].get<double>(), h, 1e-6) << npy;
    EXPECT_LT(j["entropy"].get<double>(), std::log(196.0));
  }
  EXPECT_EQ(done, 7);
}

TEST_F(Batch, TwoJobsWriteTheSameBytesAsOne) {
  ASSERT_EQ(run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "j1") + " -q -j 1 --save-raw --manifest " +
                q(dir / "m1.jsonl")).status, 1);
  ASSERT_EQ(run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "j2") + " -q -j 2 --save-raw --manifest " +
                q(dir / "m2.jsonl")).status, 1);
  const auto a = tree(dir / "j1"), b = tree(dir / "j2");
  EXPECT_EQ(a.size(), 21u);  // 7 x (NAME.png, NAME.npy, NAME.npy.json)
  EXPECT_EQ(a, b);
  // Manifests agree except for the timings and output folder.
  auto m1 = read_manifest(dir / "m1.jsonl"), m2 = read_manifest(dir / "m2.jsonl");
  ASSERT_EQ(m1.size(), m2.size());
  for (size_t i = 0; i < m1.size(); ++i) {
    for (auto* m : {&m1[i], &m2[i]}) {
      m->erase("milliseconds");
      m->erase("outputs");
    }
    EXPECT_EQ(m1[i], m2[i]);
  }
}

TEST_F(Batch, ExtTakesOneValueAndLeavesTheInputsAfterIt) {
  // "--ext png DIR -o OUT FILE": DIR is an input, not a second extension (it was dropped, with exit 0).
  const CliRun r = run_attnmap("render --ext jpg " + q(dir / "in") + " -o " + q(dir / "out") + " " +
                               q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png") + " -q");
  EXPECT_EQ(r.status, 0) << r.err;
  const auto t = tree(dir / "out");
  EXPECT_EQ(t.size(), 2u);
  EXPECT_TRUE(t.count("rocket.png"));
  EXPECT_TRUE(t.count("chelsea.png"));
}

TEST_F(Batch, ExtFilterPicksOnlyTheListedExtensions) {
  EXPECT_EQ(run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "jpg") + " -q --ext jpg").status, 0);
  EXPECT_EQ(tree(dir / "jpg").size(), 1u);
  EXPECT_TRUE(fs::exists(dir / "jpg" / "rocket.png"));
  // Case-insensitive, leading dot allowed, repeated or comma lists; hidden files still skipped.
  EXPECT_EQ(run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "png") + " -q --ext .PNG --ext jpeg").status, 1);
  const auto t = tree(dir / "png");
  EXPECT_EQ(t.size(), 6u);  // t0 t1 bag coat(.PNG) s4 z; broken.png fails
  EXPECT_TRUE(t.count("b/c/coat.png"));
  EXPECT_FALSE(t.count("rocket.png"));
  EXPECT_FALSE(t.count(".hidden.png"));
  EXPECT_EQ(run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "x") + " --ext ,").status, 2);
}

// The check that lets a run replace its own .npy takes only what npy_encode writes: the exact header for a
// rank-2 or rank-3 shape, then exactly that many float32 values.
TEST(Npy, OwnFileCheckWantsTheExactHeaderAndDataSize) {
  const fs::path p = fs::temp_directory_path() / ("attnmap_npy_check_" + std::to_string(::getpid()) + ".npy");
  auto check = [&](const std::vector<uint8_t>& b) {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return looks_written_by_attnmap_npy(p.string());
  };
  const std::vector<uint8_t> ok = npy_encode(std::vector<float>(6, 0.5f), {2, 3});
  EXPECT_TRUE(check(ok));
  EXPECT_TRUE(check(npy_encode(std::vector<float>(24, 0.f), {2, 3, 4})));
  std::vector<uint8_t> b = ok;
  b.push_back(0);  // a byte after the data
  EXPECT_FALSE(check(b));
  b = ok;
  b.pop_back();  // data cut short
  EXPECT_FALSE(check(b));
  b = ok;
  b[62] = 'x';  // text in the header's padding, after the dict
  EXPECT_FALSE(check(b));
  b = ok;
  std::memcpy(b.data() + 10 + std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (").size(), "9", 1);
  EXPECT_FALSE(check(b));  // shape (9, 3): 27 values, the file holds 6
  EXPECT_FALSE(check(npy_encode(std::vector<float>(6, 1.f), {6})));  // rank 1: not a map
  EXPECT_FALSE(check({}));
  fs::remove(p);
}

namespace {

// `png` decoded by libspng with every check on (chunk CRCs, the zlib stream's Adler-32; its default), as 8-bit
// RGB; the tEXt chunks and the pHYs chunk's pixels per metre (0 without one) into *texts and *ppm.
Image strict_decode(const std::vector<uint8_t>& png, std::vector<std::pair<std::string, std::string>>* texts,
                    uint32_t* ppm) {
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(0), spng_ctx_free);
  spng_set_png_buffer(ctx.get(), png.data(), png.size());
  spng_ihdr ihdr{};
  EXPECT_EQ(spng_get_ihdr(ctx.get(), &ihdr), 0);
  size_t n = 0;
  EXPECT_EQ(spng_decoded_image_size(ctx.get(), SPNG_FMT_RGB8, &n), 0);
  Image img;
  img.width = static_cast<int>(ihdr.width);
  img.height = static_cast<int>(ihdr.height);
  img.rgb.resize(n);
  EXPECT_EQ(spng_decode_image(ctx.get(), img.rgb.data(), n, SPNG_FMT_RGB8, 0), 0);
  uint32_t count = 0;
  if (spng_get_text(ctx.get(), nullptr, &count) == 0) {
    std::vector<spng_text> t(count);
    spng_get_text(ctx.get(), t.data(), &count);
    for (const spng_text& x : t) texts->push_back({x.keyword, std::string(x.text, x.length)});
  }
  spng_phys phys{};
  *ppm = spng_get_phys(ctx.get(), &phys) == 0 ? phys.ppu_x : 0;
  return img;
}

}  // namespace

// encode_png (libdeflate) against the source pixels, stb_image_write's encoder and libspng's strict decoder
// (CRCs, Adler-32), with its tEXt chunks and pHYs.
TEST(PngEncoder, PixelsEqualStbAndTheSourceUnderAStrictDecoder) {
  // A photo plus a noisy synthetic image with odd sizes (row filters see every edge case), and one pixel.
  std::vector<Image> imgs = {load_image(kData + "/chelsea.png")};
  Image noise;
  noise.width = 37;
  noise.height = 23;
  uint32_t st = 12345;
  for (int i = 0; i < 37 * 23 * 3; ++i) {
    st = st * 1664525u + 1013904223u;
    noise.rgb.push_back(static_cast<uint8_t>(i % 7 == 0 ? st >> 24 : (i / 3) % 256));
  }
  imgs.push_back(noise);
  Image one;
  one.width = one.height = 1;
  one.rgb = {255, 0, 7};
  imgs.push_back(one);
  for (const Image& img : imgs) {
    const fs::path dir = fs::temp_directory_path() / ("attnmap_png_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    PngOptions opt;
    opt.dpi = 300;
    opt.text = {{"attnmap", "{\"a\": 1}"}, {"Title", "x"}};
    const std::vector<uint8_t> png = encode_png(img, opt);
    write_file_atomic((dir / "ours.png").string(), png);
    write_file_atomic((dir / "stb.png").string(), encode_png_stb(img));
    const Image a = load_image((dir / "ours.png").string()), b = load_image((dir / "stb.png").string());
    EXPECT_EQ(read_png_text((dir / "ours.png").string()).size(), 3u);
    fs::remove_all(dir);
    EXPECT_EQ(a.width, img.width);
    EXPECT_EQ(a.height, img.height);
    EXPECT_TRUE(a.rgb == img.rgb);
    EXPECT_TRUE(a.rgb == b.rgb);
    std::vector<std::pair<std::string, std::string>> texts;
    uint32_t ppm = 0;
    const Image c = strict_decode(png, &texts, &ppm);
    EXPECT_TRUE(c.rgb == img.rgb);
    const std::vector<std::pair<std::string, std::string>> want = {
        {"Software", "attnmap"}, {"attnmap", "{\"a\": 1}"}, {"Title", "x"}};
    EXPECT_EQ(texts, want);
    EXPECT_EQ(ppm, 11811u);  // round(300 / 0.0254)
  }
  EXPECT_THROW(encode_png(Image{}), Error);
}

// The image data cut into IDAT chunks of 1000 bytes (encode_png cuts at 1 GiB: the same code, moved pieces and
// their CRCs), and a large image's zlib stream made 64 rows at a time, still decode strictly to the source
// pixels; tEXt keywords and texts PNG does not allow are refused, not written.
TEST(PngEncoder, ImageDataInManyChunksAndTextRules) {
  Image img;
  img.width = 301;
  img.height = 97;
  uint32_t st = 7;
  for (int i = 0; i < img.width * img.height * 3; ++i) {
    st = st * 1664525u + 1013904223u;
    img.rgb.push_back(static_cast<uint8_t>(st >> 24));  // noise: ~87 KB of stream, ~88 chunks
  }
  std::vector<uint8_t> png(detail::kPngSignature, detail::kPngSignature + 8);
  std::vector<uint8_t> ihdr = {0, 0, 1, 45, 0, 0, 0, 97, 8, 2, 0, 0, 0};
  png.insert(png.end(), {0, 0, 0, 13, 'I', 'H', 'D', 'R'});
  png.insert(png.end(), ihdr.begin(), ihdr.end());
  const std::vector<uint8_t> type_ihdr = {'I', 'H', 'D', 'R'};
  std::vector<uint8_t> crc_in(type_ihdr);
  crc_in.insert(crc_in.end(), ihdr.begin(), ihdr.end());
  const uint32_t crc = static_cast<uint32_t>(::crc32(0, crc_in.data(), static_cast<unsigned>(crc_in.size())));
  png.insert(png.end(), {static_cast<uint8_t>(crc >> 24), static_cast<uint8_t>(crc >> 16), static_cast<uint8_t>(crc >> 8),
                         static_cast<uint8_t>(crc)});
  const std::vector<uint8_t> head = png;
  detail::put_image_data(png, img, 1000, size_t{64} << 20);
  size_t idat = 0;
  for (size_t pos = 8; pos + 8 <= png.size();) {
    const size_t len = detail::read_be32(png.data() + pos);
    if (std::memcmp(png.data() + pos + 4, "IDAT", 4) == 0) {
      ++idat;
      EXPECT_LE(len, 1000u);
    }
    pos += 12 + len;
  }
  EXPECT_GT(idat, 80u);
  std::vector<std::pair<std::string, std::string>> texts;
  uint32_t ppm = 0;
  EXPECT_TRUE(strict_decode(png, &texts, &ppm).rgb == img.rgb);
  std::vector<uint8_t> banded = head;  // a large image's path: zlib, 64 rows at a time (here from 0 bytes on)
  detail::put_image_data(banded, img, 1000, 0);
  EXPECT_NE(banded, png);
  EXPECT_TRUE(strict_decode(banded, &texts, &ppm).rgb == img.rgb);
  for (const PngText& bad : std::vector<PngText>{{" lead", "x"}, {"trail ", "x"}, {"two  spaces", "x"},
                                                 {"tab\there", "x"}, {std::string("n\0ul", 4), "x"},
                                                 {"ok", std::string("a\0b", 3)}, {std::string(80, 'k'), "x"}}) {
    PngOptions opt;
    opt.text = {bad};
    EXPECT_THROW(encode_png(img, opt), Error) << bad.keyword;
  }
  PngOptions latin;
  latin.text = {{"caf\xe9 key", "text \xe9"}};
  EXPECT_NO_THROW(encode_png(img, latin));
  for (const double dpi : {0.001, 0.0126, -1.0, 2e6}) {  // pHYs would say 0 pixels per metre; out of range
    PngOptions opt;
    opt.dpi = dpi;
    EXPECT_THROW(encode_png(img, opt), Error) << dpi;
  }
  PngOptions smallest;  // 0.0254 dpi: 1 pixel per metre
  smallest.dpi = 0.0254;
  EXPECT_TRUE(strict_decode(encode_png(img, smallest), &texts, &ppm).rgb == img.rgb);
  EXPECT_EQ(ppm, 1u);
}

namespace {
std::string read_text(const std::string& p) { return slurp(p); }
void expect_same(const RawWeights& a, const RawWeights& b, const std::string& what) {
  EXPECT_EQ(a.config, b.config) << what;
  EXPECT_EQ(a.notices, b.notices) << what;
  expect_same_tensors(a, b, what);
}
}  // namespace

TEST(WeightsJsonFastPath, SameTensorsAsTheSaxParser) {
  // Real files, then number forms that exercise every branch: exponents, -0, long mantissas (fast_float),
  // integers, denormal-range float32 values, values just inside float32 range, [[]] shapes.
  for (const std::string& f : {std::string(ATTNMAP_SOURCE_WEIGHTS), std::string(ATTNMAP_TEST_DIR) + "/fixtures/timm_224/weights.json",
                              std::string(ATTNMAP_TEST_DIR) + "/fixtures/seed_embed/weights.json"}) {
    const std::string text = read_text(f);
    expect_same(parse_weights_json(text, f), parse_weights_json_sax(text, f), f);
    expect_same(load_weights_json(f), parse_weights_json_sax(text, f), f + " (mapped)");
  }
  const std::string text =
      R"({ "a" : [ [1, -0, -0.0, 0.0, 1e-3, 1E+2, -2.5e-7] , [3.4028234e38, -3.4028234e38, 1.4e-45, 123456789012345, 0.1234567890123456789, 12345678901234567890e-20, 7e-30]],)"
      "\n\t\"e\": [[]], \"s\": -12, \"config\": {\"x\": [1, {\"y\": \"]}\"}], \"n\": null}}";
  const RawWeights fast = parse_weights_json(text, "t.json"), sax = parse_weights_json_sax(text, "t.json");
  expect_same(fast, sax, "synthetic");
  ASSERT_EQ(fast.tensors.at("a").shape, (std::vector<int64_t>{2, 7}));
  EXPECT_FALSE(std::signbit(fast.tensors.at("a").data[1]));  // integer -0 is +0 as in nlohmann
  EXPECT_TRUE(std::signbit(fast.tensors.at("a").data[2]));
  EXPECT_EQ(fast.tensors.at("e").shape, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(fast.config["x"][1]["y"], "]}");
}
