// Provenance and resume (issue 18): every output records the settings that made it, --skip-existing keeps
// only outputs of the same settings, and the manifest survives interruption, resuming and sharding.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/provenance.hpp"
#include "core/error.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace attnmap;

namespace {

const std::string kData = ATTNMAP_DATA_DIR;

/// Every line of a manifest, header lines included (throws on a line that is not JSON).
std::vector<json> manifest_lines(const fs::path& p) {
  std::vector<json> v;
  std::ifstream f(p);
  for (std::string line; std::getline(f, line);) v.push_back(json::parse(line));
  return v;
}

/// `sha256sum FILE`'s digest, computed by coreutils (not by attnmap).
std::string coreutils_sha256(const fs::path& p) {
  FILE* f = ::popen(("sha256sum " + q(p)).c_str(), "r");
  char buf[65] = {};
  const size_t n = f ? std::fread(buf, 1, 64, f) : 0;
  if (f) ::pclose(f);
  return std::string(buf, n);
}

class Resume : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir / "in");
    fs::copy_file(kData + "/composites/0000_trouser.png", dir / "in" / "t0.png");
    fs::copy_file(kData + "/composites/0002_bag.png", dir / "in" / "bag.png");
  }
  /// render in/ -o out/ with `args`.
  CliRun render(const std::string& args) { return run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " " + args); }
};

}  // namespace

TEST(ProvenanceHash, Sha256MatchesCoreutils) {
  EXPECT_EQ(sha256_file(ATTNMAP_SOURCE_WEIGHTS), coreutils_sha256(ATTNMAP_SOURCE_WEIGHTS));
  const fs::path empty = fs::temp_directory_path() / ("attnmap_empty_" + std::to_string(::getpid()));
  std::ofstream(empty).flush();
  EXPECT_EQ(sha256_file(empty.string()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  fs::remove(empty);
  EXPECT_THROW(sha256_file("/nonexistent/weights.json"), Error);
}

TEST(ProvenancePng, TextChunksReadBackAndPixelsUnchanged) {
  const Image img = load_image(kData + "/chelsea.png");
  const fs::path p = fs::temp_directory_path() / ("attnmap_text_" + std::to_string(::getpid()) + ".png");
  write_png(p.string(), img, PngOptions{0.0, {{"attnmap", "{\"attnmap_version\":\"x\"}"}, {"attnmap:stats", "{}"}}});
  const std::vector<PngText> t = read_png_text(p.string());
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].keyword, "Software");
  EXPECT_EQ(t[0].text, "attnmap");
  EXPECT_EQ(t[1].keyword, "attnmap");
  EXPECT_EQ(t[1].text, "{\"attnmap_version\":\"x\"}");
  EXPECT_EQ(t[2].keyword, "attnmap:stats");
  EXPECT_TRUE(written_by_attnmap(p.string()));
  EXPECT_TRUE(load_image(p.string()).rgb == img.rgb);
  EXPECT_EQ(read_png_provenance(p.string())->at("attnmap_version"), "x");
  EXPECT_THROW(encode_png(img, PngOptions{0.0, {{"", "x"}}}), Error);
  EXPECT_THROW(encode_png(img, PngOptions{0.0, {{std::string(80, 'k'), "x"}}}), Error);
  fs::remove(p);
}

// Every output carries one record: the PNG, the heads grid and the .npy's sidecar hold the same text, with
// the values the run used; `attnmap inspect` prints it.
TEST_F(Resume, EveryOutputRecordsTheSettings) {
  const CliRun r = render("-q --save-raw --heads-grid --layer 0 --head max --colormap magma --alpha 0.25 --upsample bicubic");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::optional<json> png = read_png_provenance((dir / "out" / "t0.png").string());
  ASSERT_TRUE(png);
  std::optional<json> heads = read_png_provenance((dir / "out" / "t0.heads.png").string());
  ASSERT_TRUE(heads && heads->contains("colour_bars"));  // and what its colour bar hides (issue 41): results
  heads->erase("colour_bars");
  EXPECT_EQ(*png, *heads);
  EXPECT_EQ(*png, *read_sidecar((dir / "out" / "t0.npy.json").string()));
  EXPECT_EQ(png->at("attnmap_version"), ATTNMAP_VERSION);
  EXPECT_EQ(png->at("weights"), "default.json");
  EXPECT_EQ(png->at("weights_sha256"), coreutils_sha256(ATTNMAP_SOURCE_WEIGHTS));
  EXPECT_EQ(png->at("layout"), "timm");
  EXPECT_EQ(png->at("view"), "L0/max");
  EXPECT_EQ(png->at("size"), json::parse("[224, 224]"));
  EXPECT_EQ(png->at("resize"), "squash");
  EXPECT_EQ(png->at("mean"), json::parse("[0.485, 0.456, 0.406]"));  // float values written as typed
  EXPECT_EQ(png->at("std"), json::parse("[0.229, 0.224, 0.225]"));
  EXPECT_EQ(png->at("colormap"), "magma");
  EXPECT_EQ(png->at("alpha"), 0.25);
  EXPECT_EQ(png->at("upsample"), "bicubic");
  EXPECT_EQ(png->at("scale"), "map");
  EXPECT_TRUE(png->at("threshold").is_null());
  // The PNG's statistics are the map's (the .npy's), exactly.
  std::vector<int64_t> shape;
  const std::vector<float> map = read_npy((dir / "out" / "t0.npy").string(), &shape);
  const MapStats want = map_statistics(map, 14, 14);
  const std::optional<ImageStats> st = read_png_stats((dir / "out" / "t0.png").string());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->stats.max, want.max);
  EXPECT_EQ(st->stats.argmax_row, want.argmax_row);
  EXPECT_EQ(st->stats.argmax_col, want.argmax_col);
  EXPECT_EQ(st->stats.entropy, want.entropy);
  EXPECT_EQ(st->top5.size(), 5u);  // the bundled model has a classifier head
  const CliRun i = run_attnmap("inspect " + q(dir / "out" / "t0.png"));
  EXPECT_EQ(i.status, 0) << i.err;
  EXPECT_NE(i.out.find("  view             L0/max\n"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("  colormap         magma\n"), std::string::npos) << i.out;
  const CliRun n = run_attnmap("inspect " + q(dir / "out" / "t0.npy"));
  EXPECT_EQ(n.status, 0) << n.err;
  EXPECT_NE(n.out.find("  alpha            0.25\n"), std::string::npos) << n.out;
}

// Each setting changed between two --skip-existing runs re-renders every image and says so; the same
// command again skips them all. The weights are compared by content, not by name.
TEST_F(Resume, EachChangedSettingRerendersAndTheSameRunSkips) {
  fs::create_directories(dir / "w");
  fs::copy_file(ATTNMAP_SOURCE_WEIGHTS, dir / "w" / "same.json");
  fs::copy_file(ATTNMAP_SOURCE_WEIGHTS, dir / "w" / "other.json");
  std::ofstream(dir / "w" / "other.json", std::ios::app) << "\n";  // one byte more: other content, same model
  const std::string base = "--save-raw --skip-existing";
  ASSERT_EQ(render(base).status, 0);
  const CliRun again = render(base);
  EXPECT_NE(again.err.find("attnmap: 0 done, 0 failed, 2 skipped"), std::string::npos) << again.err;
  const CliRun renamed = render(base + " -w " + q(dir / "w" / "same.json"));
  EXPECT_NE(renamed.err.find("attnmap: 0 done, 0 failed, 2 skipped"), std::string::npos) << renamed.err;
  // (options, the key the note names as changed)
  const std::vector<std::pair<std::string, std::string>> changes = {
      {"-w " + q(dir / "w" / "other.json"), "weights_sha256 "},
      {"--layer 0", "view L1/h3 -> L0/h3"},
      {"--head 1", "view L0/h3 -> L1/h1"},
      {"--head mean", "view L1/h1 -> L1/mean"},
      {"--colormap inferno", "colormap viridis -> inferno"},
      {"--alpha 0.6", "alpha 0.5 -> 0.6"},
      {"--size 160", "size [224,224] -> [160,160]"},
      {"--resize crop", "resize squash -> crop"},
      {"--mean 0.5,0.5,0.5 --std 0.5,0.5,0.5", "mean [0.485,0.456,0.406] -> [0.5,0.5,0.5]"},
      {"--upsample nearest", "upsample bilinear -> nearest"},
      {"--rollout", "view L1/h3 -> rollout"},
      {"--rollout --layer 0 --discard 0.5", "discard 0.0 -> 0.5, view rollout -> rollout@L0"},
      {"--threshold 0.6", "threshold null -> 0.6"},
      {"--no-exif", "exif true -> false"},
      {"--all-heads", "all_heads false -> true"},
  };
  for (const auto& [opts, what] : changes) {
    const CliRun r = render(base + " " + opts);
    EXPECT_EQ(r.status, 0) << opts << ": " << r.err;
    EXPECT_NE(r.err.find("attnmap: 2 done (2 redone: settings changed), 0 failed, 0 skipped"), std::string::npos)
        << opts << ": " << r.err;
    EXPECT_NE(r.err.find("rendered again, its outputs were made with other settings ("), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << opts << ": " << r.err;
    const CliRun s = render(base + " " + opts);
    EXPECT_NE(s.err.find("attnmap: 0 done, 0 failed, 2 skipped"), std::string::npos) << opts << ": " << s.err;
  }
}

// Issue 26: another photo under the same name is rendered again (its outputs record the input's SHA-256);
// the record holds the hash of the bytes decoded, and an unchanged input is still skipped.
TEST_F(Resume, ChangedInputUnderTheSameNameIsRenderedAgain) {
  const std::string base = "--save-raw --panel --figure-format png,svg --skip-existing";
  ASSERT_EQ(render(base).status, 0);
  const std::optional<json> rec = read_png_provenance((dir / "out" / "t0.png").string());
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->value("input_sha256", ""), coreutils_sha256(dir / "in" / "t0.png"));
  const std::optional<json> side = read_sidecar((dir / "out" / "t0.npy.json").string());
  ASSERT_TRUE(side.has_value());
  EXPECT_EQ(side->value("input_sha256", ""), coreutils_sha256(dir / "in" / "t0.png"));
  const std::vector<uint8_t> old_map = read_file((dir / "out" / "t0.npy").string());
  fs::copy_file(kData + "/composites/0001_sneaker.png", dir / "in" / "t0.png", fs::copy_options::overwrite_existing);
  const CliRun r = render(base);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("attnmap: 1 done (1 redone: settings changed), 0 failed, 1 skipped"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("t0.png: rendered again, its outputs were made with other settings (the input changed (sha256 "),
            std::string::npos)
      << r.err;
  EXPECT_NE(read_file((dir / "out" / "t0.npy").string()), old_map);  // the new photo's map
  EXPECT_EQ(read_png_provenance((dir / "out" / "t0.png").string())->value("input_sha256", ""),
            coreutils_sha256(dir / "in" / "t0.png"));
  EXPECT_EQ(read_figure_record((dir / "out" / "t0.panel.svg").string())->value("input_sha256", ""),
            coreutils_sha256(dir / "in" / "t0.png"));
  const CliRun s = render(base);
  EXPECT_NE(s.err.find("attnmap: 0 done, 0 failed, 2 skipped"), std::string::npos) << s.err;
}

namespace {
// Takes flock `op` on `path` (a folder or a file, created), as a running attnmap does (run_lock.hpp).
int hold_lock(const fs::path& path, int op, bool folder) {
  if (folder) fs::create_directories(path);
  const int fd = folder ? ::open(path.c_str(), O_RDONLY | O_DIRECTORY) : ::open(path.c_str(), O_RDONLY | O_CREAT, 0644);
  EXPECT_EQ(::flock(fd, op | LOCK_NB), 0);
  return fd;
}
}  // namespace

// Issue 26: a second run into a folder in use is refused in one line naming the other process (exit 2, nothing
// written); the shards of one split run side by side; one manifest has one writer; no file is added.
TEST_F(Resume, AFolderInUseRefusesASecondRun) {
  const std::string me = "(process " + std::to_string(::getpid()) + ")";
  int fd = hold_lock(dir / "out", LOCK_EX, true);  // "another run" without shards
  CliRun r = render("");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("out: another attnmap run " + me + " is writing images into this folder; wait for it to end or "
                       "choose another output folder"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir / "out"));
  r = render("--shard 1/2");
  EXPECT_EQ(r.status, 2) << r.err;
  ::close(fd);
  fd = hold_lock(dir / "out", LOCK_SH, true);  // "another run": a shard
  r = render("--shard 2/2");
  EXPECT_EQ(r.status, 0) << r.err;  // the other shard runs beside it
  r = render("");
  EXPECT_EQ(r.status, 2) << r.err;
  ::close(fd);
  r = render("--manifest " + q(dir / "m.jsonl"));
  EXPECT_EQ(r.status, 0) << r.err;  // the lock is gone with its holder
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "out")) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"bag.png", "t0.png"}));
  fd = hold_lock(dir / "m.jsonl", LOCK_EX, false);
  r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out2") + " --manifest " + q(dir / "m.jsonl"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("m.jsonl: another attnmap run " + me + " is writing this manifest"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out2"));  // the refused run leaves no folder behind
  ::close(fd);
}

// Issue 26: a manifest that cannot be made is refused before the output folder is made.
TEST_F(Resume, AManifestThatCannotBeMadeIsRefusedFirst) {
  const CliRun r = render("--manifest /proc/attnmap-no-such-folder/m.jsonl");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("attnmap: error: --manifest /proc/attnmap-no-such-folder/m.jsonl: cannot create the manifest in "
                       "/proc/attnmap-no-such-folder: "), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// Issue 26 review: a named gradcam / attn-grad without @L takes its block from --gradcam-layer / --layer, which
// its name does not say: the record holds the resolved block, so another block is not skipped.
TEST_F(Resume, ANamedGradcamsBlockIsRecorded) {
  ASSERT_EQ(render("--views gradcam,L1/h3 --gradcam-layer 1 --skip-existing").status, 0);
  EXPECT_EQ(read_png_provenance((dir / "out" / "t0.gradcam.png").string())->value("gradcam_block", -1), 1);
  const CliRun r = render("--views gradcam,L1/h3 --skip-existing");  // the last block, 3
  EXPECT_NE(r.err.find("attnmap: 2 done (2 redone: settings changed)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gradcam_block 1 -> 3"), std::string::npos) << r.err;
  const CliRun a = render("--views L1/h3,attn-grad --layer 2 --skip-existing");
  EXPECT_EQ(read_png_provenance((dir / "out" / "t0.attn-grad.png").string())->value("attn_grad_block", -1), 2);
  const CliRun b = render("--views L1/h3,attn-grad --layer 0 --skip-existing");
  EXPECT_NE(b.err.find("attn_grad_block 2 -> 0"), std::string::npos) << b.err;
  // Out-of-range values found once the model is known name their flag.
  EXPECT_NE(render("--layer 9").err.find("attnmap: error: --layer: layer 9 out of range"), std::string::npos);
  EXPECT_NE(render("--head 9").err.find("attnmap: error: --head: head 9 out of range"), std::string::npos);
  EXPECT_NE(render("--colormap foo").err.find("attnmap: error: --colormap unknown colormap 'foo'"), std::string::npos);
}

// Only the colour map changed: the image is rendered again (PNG new), its .npy has the same bytes.
TEST_F(Resume, ColormapChangeRewritesThePngAndKeepsTheNpyValues) {
  ASSERT_EQ(render("-q --save-raw").status, 0);
  const std::string png = slurp(dir / "out" / "bag.png"), npy = slurp(dir / "out" / "bag.npy");
  const CliRun r = render("--save-raw --skip-existing --colormap gray");
  EXPECT_NE(r.err.find("2 done (2 redone: settings changed)"), std::string::npos) << r.err;
  EXPECT_NE(slurp(dir / "out" / "bag.png"), png);
  EXPECT_EQ(slurp(dir / "out" / "bag.npy"), npy);
  EXPECT_EQ(read_sidecar((dir / "out" / "bag.npy.json").string())->at("colormap"), "gray");
}

// Outputs that record no settings (written before outputs recorded them) count as changed; an image whose
// .npy sidecar is missing (a write interrupted between the two) is redone without being called changed;
// a user's file under the sidecar's name is left alone.
TEST_F(Resume, UnrecordedOutputsAreRedoneAndAForeignSidecarIsRefused) {
  ASSERT_EQ(render("-q --save-raw").status, 0);
  write_png((dir / "out" / "t0.png").string(), load_image((dir / "out" / "t0.png").string()));  // no record
  fs::remove(dir / "out" / "bag.npy.json");
  const CliRun r = render("--save-raw --skip-existing");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("attnmap: 2 done (1 redone: settings changed), 0 failed, 0 skipped"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("t0.png: rendered again, its outputs were made with other settings (no settings recorded)"),
            std::string::npos) << r.err;
  EXPECT_TRUE(read_sidecar((dir / "out" / "bag.npy.json").string()));
  std::ofstream(dir / "out" / "bag.npy.json", std::ios::trunc) << "{\"mine\": true}\n";
  const CliRun f = render("--save-raw --skip-existing -q");
  EXPECT_EQ(f.status, 1) << f.err;
  EXPECT_NE(f.err.find("bag.npy.json already exists and was not written by attnmap"), std::string::npos) << f.err;
  EXPECT_EQ(slurp(dir / "out" / "bag.npy.json"), "{\"mine\": true}\n");
}

// The manifest's first line is the run's header: its settings (the outputs' record), shard, folder, rows.
TEST_F(Resume, ManifestHeaderNamesTheRunsSettings) {
  ASSERT_EQ(render("-q --manifest " + q(dir / "m.jsonl") + " --shard 1/1 --layer 0").status, 0);
  const std::vector<json> m = manifest_lines(dir / "m.jsonl");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0]["attnmap_manifest"], 1);
  EXPECT_EQ(m[0]["shard"], "1/1");
  EXPECT_EQ(m[0]["rows"], 2);
  EXPECT_EQ(m[0]["out"], (dir / "out").string());
  EXPECT_EQ(m[0]["started"].get<std::string>().size(), 20u);  // 2026-12-01T19:32:37Z
  json png_record = *read_png_provenance((dir / "out" / "t0.png").string());
  EXPECT_EQ(png_record["input_sha256"], coreutils_sha256(dir / "in" / "t0.png"));  // per image, not in the header
  png_record.erase("input_sha256");
  EXPECT_EQ(m[0]["settings"], png_record);
  EXPECT_EQ(m[0]["settings"]["view"], "L0/h3");
  EXPECT_EQ(m[1]["input"], (dir / "in" / "bag.png").string());
  EXPECT_EQ(m[2]["input"], (dir / "in" / "t0.png").string());
}

// The friction: a resumed run with the same --manifest kept every statistic null for skipped rows.
// Now they come from the earlier manifest, from the PNG, or from the .npy - each path checked exactly. With
// the earlier manifest, a skipped row also keeps the status and time of the run that made its outputs
// ("carried": true); without one it says "skipped", with this run's time.
TEST_F(Resume, SkippedRowsKeepTheirStatistics) {
  const std::string man = " --manifest " + q(dir / "m.jsonl");
  ASSERT_EQ(render("-q" + man).status, 0);
  const std::vector<json> first = manifest_lines(dir / "m.jsonl");
  auto expect_same_stats = [&](const std::vector<json>& m, const std::string& how, bool carried = false) {
    ASSERT_EQ(m.size(), first.size()) << how;
    EXPECT_TRUE(m[0].contains("attnmap_manifest")) << how;
    for (size_t i = 1; i < m.size(); ++i) {
      EXPECT_EQ(m[i]["status"], carried ? "done" : "skipped") << how;
      EXPECT_EQ(m[i]["carried"], carried) << how;
      if (carried) {
        EXPECT_EQ(m[i]["milliseconds"], first[i]["milliseconds"]) << how;
      }
      for (const char* k : {"input", "outputs", "map_max", "argmax_row", "argmax_col", "entropy", "top5"})
        EXPECT_EQ(m[i][k], first[i][k]) << how << ": " << k;
    }
  };
  // From the earlier manifest (the PNGs' statistics removed, so only the manifest can give them).
  for (const char* f : {"t0.png", "bag.png"}) {
    const fs::path p = dir / "out" / f;
    const std::vector<PngText> t = read_png_text(p.string());
    write_png(p.string(), load_image(p.string()), PngOptions{0.0, {t[1]}});  // Software + the settings record only
  }
  ASSERT_EQ(render("-q --skip-existing" + man).status, 0);
  expect_same_stats(manifest_lines(dir / "m.jsonl"), "from the manifest", true);
  // From the PNGs (a fresh manifest path).
  ASSERT_EQ(render("-q").status, 0);
  ASSERT_EQ(render("-q --skip-existing --manifest " + q(dir / "m2.jsonl")).status, 0);
  expect_same_stats(manifest_lines(dir / "m2.jsonl"), "from the PNG");
  // From the .npy: neither a manifest nor statistics in the PNG.
  ASSERT_EQ(render("-q --save-raw").status, 0);
  for (const char* f : {"t0.png", "bag.png"}) {
    const fs::path p = dir / "out" / f;
    write_png(p.string(), load_image(p.string()), PngOptions{0.0, {read_png_text(p.string())[1]}});
  }
  const CliRun r = render("--save-raw --skip-existing --manifest " + q(dir / "m3.jsonl"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<json> m3 = manifest_lines(dir / "m3.jsonl");
  ASSERT_EQ(m3.size(), 3u);
  for (size_t i = 1; i < 3; ++i)
    for (const char* k : {"map_max", "argmax_row", "argmax_col", "entropy"}) EXPECT_EQ(m3[i][k], first[i][k]) << k;
  EXPECT_TRUE(m3[1]["top5"].is_null());  // the .npy has no class probabilities
  // Without any of them: null, and the run says so.
  for (const char* f : {"t0.npy", "bag.npy", "t0.npy.json", "bag.npy.json"}) fs::remove(dir / "out" / f);
  const CliRun none = render("--skip-existing --manifest " + q(dir / "m4.jsonl"));
  EXPECT_NE(none.err.find("note: 2 skipped image(s) have no statistics"), std::string::npos) << none.err;
}

// Ctrl-C in the middle of a run with --manifest, then the same command with --skip-existing: the manifest
// ends with one header and one row per input, every row with the statistics a full run writes.
TEST_F(Resume, InterruptedRunResumedHasEveryRowWithStatistics) {
  fs::remove_all(dir / "in");
  fs::create_directories(dir / "in");
  const std::vector<std::string> sources = {"0000_trouser", "0001_sneaker", "0002_bag", "0003_coat", "0004_sneaker",
                                            "0005_sandal", "0006_ankle_boot", "0007_trouser", "0008_ankle_boot"};
  for (int copy = 0; copy < 5; ++copy)
    for (const auto& s : sources)
      fs::create_hard_link(kData + "/composites/" + s + ".png", dir / "in" / (std::to_string(copy) + "_" + s + ".png"));
  const size_t total = 5 * sources.size();
  ASSERT_EQ(run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "ref") + " -q --manifest " + q(dir / "ref.jsonl")).status, 0);
  const std::vector<json> ref = manifest_lines(dir / "ref.jsonl");
  ASSERT_EQ(ref.size(), total + 1);

  const fs::path man = dir / "out" / "manifest.jsonl";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    ::execl(ATTNMAP_BIN, "attnmap", "render", (dir / "in").c_str(), "-o", (dir / "out").c_str(), "-q", "-j", "1",
            "--manifest", man.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto lines = [&]() {
    const std::string m = slurp(man);
    return static_cast<size_t>(std::count(m.begin(), m.end(), '\n'));
  };
  while (lines() < 6 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it was interrupted";
  const std::vector<json> cut = manifest_lines(man);  // complete lines only (each parses)
  ASSERT_GE(cut.size(), 6u);
  ASSERT_LT(cut.size(), total + 1);
  EXPECT_TRUE(cut[0].contains("attnmap_manifest"));

  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " --skip-existing --manifest " + q(man));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(" skipped, "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no statistics"), std::string::npos) << r.err;
  const std::vector<json> m = manifest_lines(man);
  ASSERT_EQ(m.size(), total + 1);  // rewritten: this run's header and rows alone
  EXPECT_TRUE(m[0].contains("attnmap_manifest"));
  // Every row the interrupted run wrote is carried: its status and time, not "skipped".
  std::map<std::string, json> cut_rows;
  for (size_t i = 1; i < cut.size(); ++i) cut_rows[cut[i]["input"].get<std::string>()] = cut[i];
  size_t skipped = 0;
  for (size_t i = 1; i < m.size(); ++i) {
    EXPECT_EQ(m[i]["input"], ref[i]["input"]);
    EXPECT_FALSE(m[i].contains("attnmap_manifest"));
    skipped += m[i]["status"] == "skipped" || m[i]["carried"] == true;
    const auto c = cut_rows.find(m[i]["input"].get<std::string>());
    if (c != cut_rows.end()) {
      EXPECT_EQ(m[i]["status"], "done") << m[i]["input"];
      EXPECT_EQ(m[i]["carried"], true) << m[i]["input"];
      EXPECT_EQ(m[i]["milliseconds"], c->second["milliseconds"]) << m[i]["input"];
    }
    for (const char* k : {"map_max", "argmax_row", "argmax_col", "entropy", "top5"}) {
      EXPECT_FALSE(m[i][k].is_null()) << i << ": " << k;
      EXPECT_EQ(m[i][k], ref[i][k]) << m[i]["input"] << ": " << k;
    }
  }
  EXPECT_GE(skipped, cut.size() - 1);  // every row the interrupted run wrote, at least
}

// Shards, each with its own manifest, concatenate into one valid set: one header per shard, each input
// once, the same rows as one full run.
TEST_F(Resume, ShardManifestsConcatenate) {
  fs::copy_file(kData + "/composites/0003_coat.png", dir / "in" / "coat.png");
  ASSERT_EQ(run_attnmap("render " + q(dir / "in") + " " + q(dir / "gone.png") + " -o " + q(dir / "full") +
                        " -q --manifest " + q(dir / "full.jsonl")).status, 1);
  for (const char* k : {"1", "2"}) {  // a missing input fails in every shard, and is listed once
    const CliRun r = run_attnmap("render " + q(dir / "in") + " " + q(dir / "gone.png") + " -o " + q(dir / "sh") +
                                 " -q --shard " + k + "/2 --manifest " + q(dir / (std::string("m-") + k + ".jsonl")));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("gone.png: no such file or folder"), std::string::npos) << r.err;
  }
  std::ofstream(dir / "all.jsonl") << slurp(dir / "m-1.jsonl") << slurp(dir / "m-2.jsonl");  // cat m-*.jsonl
  std::set<std::string> shards;
  std::map<std::string, json> rows;
  for (const json& j : manifest_lines(dir / "all.jsonl")) {
    if (j.contains("attnmap_manifest")) {
      shards.insert(j["shard"].get<std::string>());
      continue;
    }
    EXPECT_TRUE(rows.emplace(j["input"].get<std::string>(), j).second) << "twice: " << j["input"];
  }
  EXPECT_EQ(shards, (std::set<std::string>{"1/2", "2/2"}));
  const std::vector<json> full = manifest_lines(dir / "full.jsonl");
  ASSERT_EQ(rows.size(), full.size() - 1);
  for (size_t i = 1; i < full.size(); ++i) {
    const json& s = rows.at(full[i]["input"].get<std::string>());
    for (const char* k : {"status", "error", "map_max", "argmax_row", "argmax_col", "entropy", "top5"})
      EXPECT_EQ(s[k], full[i][k]) << k;
  }
}

// A manifest left by an interrupted run holds its earlier rows and the new run's: the rows of an image are
// read back last-one-wins, and rows under other settings are never carried to a skipped image.
TEST_F(Resume, RowsOfOtherSettingsAreNotCarried) {
  const std::string man = " --manifest " + q(dir / "m.jsonl");
  ASSERT_EQ(render("-q --layer 0" + man).status, 0);  // rows of view L0/h3
  ASSERT_EQ(run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "o2") + " -q").status, 0);  // L1/h3 outputs
  for (const char* f : {"t0.png", "bag.png"}) {  // without statistics in the PNGs
    const fs::path p = dir / "o2" / f;
    write_png(p.string(), load_image(p.string()), PngOptions{0.0, {read_png_text(p.string())[1]}});
  }
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "o2") + " --skip-existing" + man);
  EXPECT_NE(r.err.find("note: 2 skipped image(s) have no statistics"), std::string::npos) << r.err;
  const std::vector<json> m = manifest_lines(dir / "m.jsonl");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(m[1]["map_max"].is_null());  // the L0 rows' values would be wrong for L1 maps
}

// The manifest is appended to, never truncated while a run goes on: a resumed run killed half-way still
// leaves the first run's rows, so the next resume has every image's statistics even where only the
// manifest holds them (the PNGs' attnmap:stats chunks removed). A run that truncated its manifest at the
// start lost the rows of the images it had not reached.
TEST_F(Resume, KilledResumeLosesNoEarlierRow) {
  fs::remove_all(dir / "in");
  fs::create_directories(dir / "in");
  const std::vector<std::string> sources = {"0000_trouser", "0001_sneaker", "0002_bag", "0003_coat", "0004_sneaker",
                                            "0005_sandal", "0006_ankle_boot", "0007_trouser", "0008_ankle_boot"};
  std::vector<std::string> names;
  for (int copy = 0; copy < 5; ++copy)
    for (const auto& s : sources) {
      names.push_back(std::to_string(copy) + "_" + s);
      fs::create_hard_link(kData + "/composites/" + s + ".png", dir / "in" / (names.back() + ".png"));
    }
  std::sort(names.begin(), names.end());
  const fs::path man = dir / "m.jsonl";
  ASSERT_EQ(render("-q -j 1 --manifest " + q(man)).status, 0);
  const std::vector<json> ref = manifest_lines(man);
  ASSERT_EQ(ref.size(), names.size() + 1);
  for (const auto& n : names) {  // statistics only in the manifest from now on
    const fs::path p = dir / "out" / (n + ".png");
    write_png(p.string(), load_image(p.string()), PngOptions{0.0, {read_png_text(p.string())[1]}});
  }
  // The first 30 images must be rendered again, the last 15 stay: the run is killed before it reaches them.
  for (size_t i = 0; i < 30; ++i) fs::remove(dir / "out" / (names[i] + ".png"));
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    ::execl(ATTNMAP_BIN, "attnmap", "render", (dir / "in").c_str(), "-o", (dir / "out").c_str(), "-q", "-j", "1",
            "--skip-existing", "--manifest", man.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const size_t first_run = names.size() + 1;
  auto lines = [&]() {
    const std::string m = slurp(man);
    return static_cast<size_t>(std::count(m.begin(), m.end(), '\n'));
  };
  const auto t0 = std::chrono::steady_clock::now();
  while (lines() < first_run + 1 + 3 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the resumed run finished before it was killed";
  const std::vector<json> cut = manifest_lines(man);
  ASSERT_GT(cut.size(), first_run + 1);
  ASSERT_LT(cut.size(), first_run + 1 + 30);  // killed before the images that only the first run's rows describe
  for (size_t i = 0; i < first_run; ++i) EXPECT_EQ(cut[i], ref[i]) << i;  // the first run's lines, untouched
  EXPECT_TRUE(cut[first_run].contains("attnmap_manifest"));

  const CliRun r = render("--skip-existing --manifest " + q(man));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("no statistics"), std::string::npos) << r.err;
  const std::vector<json> m = manifest_lines(man);
  ASSERT_EQ(m.size(), first_run);
  for (size_t i = 1; i < m.size(); ++i)
    for (const char* k : {"input", "map_max", "argmax_row", "argmax_col", "entropy", "top5"})
      EXPECT_EQ(m[i][k], ref[i][k]) << m[i]["input"] << ": " << k;
}
