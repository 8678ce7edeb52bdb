// test_hub.cpp - models by name (issue 40, docs/hub.md): Hub names parsed, huggingface_hub's cache laid out and
// read, and the whole fetch against a stand-in for the Hub's endpoints that each test starts on 127.0.0.1
// (tests/hub/fake_hub.py through tests/hub_server.hpp: bounded in time and requests), serving repositories
// made from the committed fixtures. No test reaches any other address.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "hub/hub_cache.hpp"
#include "hub/hub_name.hpp"
#include "hub_server.hpp"
#include "io/hash.hpp"
#include "io/npy.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;

namespace {

// Two commits of one repository: kOld (v1.0) holds the hf_folder fixture (a tiny HF ViT), kNew (main) the
// hf_dinov2 fixture, so a map tells which commit was read.
const std::string kOld = "0123456789abcdef0123456789abcdef01234567";
const std::string kNew = "fedcba9876543210fedcba9876543210fedcba98";
const std::string kRepo = "test-org/tiny-vit";

std::string photo() { return std::string(ATTNMAP_TEST_DIR) + "/../data/chelsea.png"; }

std::vector<HubRepoFile> folder_files(const std::string& fixture_dir) {
  std::vector<HubRepoFile> files;
  for (const auto& e : fs::directory_iterator(fixture(fixture_dir))) {
    const std::string n = e.path().filename().string();
    if (n == "model.safetensors" || n.find("config.json") != std::string::npos || n.find("-of-") != std::string::npos ||
        n == "model.safetensors.index.json")
      files.push_back({n, e.path().string()});
  }
  return files;
}

class Hub : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    root = dir / "repos";
    cache = dir / "cache";
    // The old commit: the tiny ViT plus files attnmap must never fetch (an ONNX copy, a README, a pickle the
    // safetensors file is preferred to).
    std::vector<HubRepoFile> old_files = folder_files("hf_folder");
    old_files.push_back({"model.onnx", fixture("hf_folder/config.json")});
    old_files.push_back({"README.md", fixture("hf_folder/config.json")});
    old_files.push_back({".gitattributes", fixture("hf_folder/config.json")});
    old_files.push_back({"pytorch_model.bin", fixture("families/open_clip_vit/model.pth")});
    make_hub_repo(root, kRepo, {{"v1.0", kOld}}, kOld, old_files);
    make_hub_repo(root, kRepo, {{"main", kNew}}, kNew, folder_files("families/hf_dinov2"));
  }
  // The environment of one attnmap run against `endpoint` (nothing from the user's own Hub settings).
  std::string env(const std::string& endpoint, const std::string& extra = "") const {
    return "env -u HF_HUB_OFFLINE -u TRANSFORMERS_OFFLINE -u HF_TOKEN -u HUGGING_FACE_HUB_TOKEN -u HF_HUB_CACHE "
           "HF_ENDPOINT=" + endpoint + " HF_HUB_CACHE=" + q(cache) + " HF_HOME=" + q(dir / "hf_home") + " " + extra + " ";
  }
  // The raw map of `photo()` rendered with -w `weights` (first view), as floats.
  std::vector<float> map_of(const std::string& weights, const std::string& env_prefix, CliRun* run = nullptr) {
    const fs::path out = dir / ("out" + std::to_string(renders++));
    const CliRun r = run_attnmap("render " + q(photo()) + " -w " + q(weights) + " -o " + q(out) + " --save-raw", env_prefix);
    if (run) *run = r;
    EXPECT_EQ(r.status, 0) << r.err;
    for (const auto& e : fs::directory_iterator(out, ec))
      if (e.path().extension() == ".npy") return attnmap::read_npy(e.path().string(), nullptr);
    return {};
  }
  fs::path repo_cache() const { return cache / "models--test-org--tiny-vit"; }
  fs::path root, cache;
  int renders = 0;
  std::error_code ec;
};

}  // namespace

TEST(HubName, ParsesTheSpellingsTimmAndOpenClipTake) {
  auto n = attnmap::parse_hub_name("facebook/dinov2-small");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->repo, "facebook/dinov2-small");
  EXPECT_EQ(n->revision, "main");
  n = attnmap::parse_hub_name("hf-hub:timm/vit_base_patch16_224.augreg2_in21k_ft_in1k@refs/pr/1");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->repo, "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k");
  EXPECT_EQ(n->revision, "refs/pr/1");
  EXPECT_TRUE(attnmap::parse_hub_name("hf_hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K"));
  std::string why;
  for (const char* bad : {"vit.safetensors", "a/b/c", "weights/model.safetensors", "org/na--me", "-org/x", "org/x@",
                          "org/x@../../etc", "org/x@a b", "/abs/path", "org/", "./org"})
    EXPECT_FALSE(attnmap::parse_hub_name(bad, &why)) << bad;
  EXPECT_FALSE(attnmap::parse_hub_name("weights/vit.pth", &why));
  EXPECT_EQ(why, "it ends in .pth, as a file does");
  EXPECT_TRUE(attnmap::is_commit_hash(kOld));
  EXPECT_FALSE(attnmap::is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));
}

TEST(HubSettings, CacheAndTokenFollowHuggingfaceHubsPrecedence) {
  auto with = [](std::vector<std::pair<const char*, const char*>> vars) {
    for (const char* v : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_TOKEN",
                          "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"})
      ::unsetenv(v);
    for (auto [k, v] : vars) ::setenv(k, v, 1);
    return attnmap::hub_settings_from_env();
  };
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  EXPECT_EQ(with({}).cache, home + "/.cache/huggingface/hub");
  EXPECT_EQ(with({}).endpoint, "https://huggingface.co");
  EXPECT_EQ(with({{"XDG_CACHE_HOME", "/x"}}).cache, "/x/huggingface/hub");
  EXPECT_EQ(with({{"XDG_CACHE_HOME", "/x"}, {"HF_HOME", "/h"}}).cache, "/h/hub");
  EXPECT_EQ(with({{"HF_HOME", "/h"}, {"HUGGINGFACE_HUB_CACHE", "/legacy"}}).cache, "/legacy");
  EXPECT_EQ(with({{"HF_HUB_CACHE", "/c"}, {"HUGGINGFACE_HUB_CACHE", "/legacy"}}).cache, "/c");
  EXPECT_EQ(with({{"HF_ENDPOINT", "http://127.0.0.1:9/"}}).endpoint, "http://127.0.0.1:9");
  EXPECT_TRUE(with({{"HF_HUB_OFFLINE", "1"}}).offline);
  EXPECT_TRUE(with({{"TRANSFORMERS_OFFLINE", "yes"}}).offline);
  EXPECT_FALSE(with({{"HF_HUB_OFFLINE", "0"}}).offline);
  EXPECT_FALSE(with({{"HF_HUB_OFFLINE", "0"}, {"TRANSFORMERS_OFFLINE", "1"}}).offline);  // _is_true(a or b)
  EXPECT_EQ(with({{"HF_HOME", "${HOME}/hf"}}).cache, home + "/hf/hub");                   // os.path.expandvars
  EXPECT_EQ(with({{"HF_HUB_CACHE", "$NO_SUCH_VARIABLE_X/c"}}).cache, "$NO_SUCH_VARIABLE_X/c");
  EXPECT_EQ(attnmap::shown_endpoint(with({{"HF_ENDPOINT", "http://user:secret@127.0.0.1:9/hub"}})), "http://127.0.0.1:9/hub");
  const fs::path tok = fs::temp_directory_path() / ("attnmap_tok_" + std::to_string(::getpid()));
  fs::create_directories(tok);
  std::ofstream(tok / "token") << "hf_fromfile\n";
  EXPECT_EQ(with({{"HF_HOME", tok.c_str()}}).token, "hf_fromfile");
  EXPECT_EQ(with({{"HF_HOME", tok.c_str()}, {"HF_TOKEN", "hf_env"}}).token, "hf_env");
  fs::remove_all(tok);
  ::setenv("HF_HUB_ETAG_TIMEOUT", "soon", 1);
  EXPECT_THROW(attnmap::hub_settings_from_env(), attnmap::Error);
  ::unsetenv("HF_HUB_ETAG_TIMEOUT");
  with({});
}

// The download draws the same bits as the same files read from disk, and the cache is huggingface_hub's.
TEST_F(Hub, DownloadDrawsTheFilesBitsInHuggingfaceHubsCacheLayout) {
  FakeHub hub(root);
  CliRun run;
  const std::vector<float> by_name = map_of(kRepo + "@v1.0", env(hub.endpoint()), &run);
  const std::vector<float> by_path = map_of(fixture("hf_folder"), "");
  ASSERT_FALSE(by_name.empty());
  EXPECT_EQ(by_name, by_path);
  EXPECT_NE(run.err.find("downloaded " + kRepo + " model.safetensors"), std::string::npos) << run.err;
  // refs, snapshot links, blobs named by their etag, .no_exist for the files the repo lacks, the lock.
  EXPECT_EQ(slurp(repo_cache() / "refs" / "v1.0"), kOld);
  const fs::path snap = repo_cache() / "snapshots" / kOld;
  const std::string sha = attnmap::sha256_file(fixture("hf_folder/model.safetensors"));
  ASSERT_TRUE(fs::is_symlink(snap / "model.safetensors"));
  EXPECT_EQ(fs::read_symlink(snap / "model.safetensors").string(), "../../blobs/" + sha);
  EXPECT_EQ(attnmap::sha256_file((repo_cache() / "blobs" / sha).string()), sha);
  ASSERT_TRUE(fs::is_symlink(snap / "config.json"));
  EXPECT_EQ(fs::read_symlink(snap / "config.json").string().size(), std::string("../../blobs/").size() + 40);  // git sha1
  EXPECT_TRUE(fs::is_regular_file(repo_cache() / ".no_exist" / kOld / "open_clip_config.json"));
  EXPECT_TRUE(fs::exists(cache / ".locks" / "models--test-org--tiny-vit" / (sha + ".lock")));
  // Only the files render reads: never the ONNX copy, the README, or the pickle beside the safetensors.
  for (const char* never : {"model.onnx", "README.md", ".gitattributes", "pytorch_model.bin"}) {
    EXPECT_EQ(hub.count("", never), 0) << never;
    EXPECT_FALSE(fs::exists(snap / never));
  }
  for (const auto& e : fs::recursive_directory_iterator(cache)) EXPECT_NE(e.path().extension(), ".incomplete") << e.path();
  // The record names the repository, revision and commit beside the weights' hash.
  const CliRun ins = run_attnmap("inspect " + q(kRepo + "@v1.0"), env(hub.endpoint()));
  EXPECT_EQ(ins.status, 0) << ins.err;
  EXPECT_NE(ins.out.find("hub:         " + kRepo + " (revision v1.0, commit " + kOld), std::string::npos) << ins.out;
  const fs::path png = dir / "rec";
  ASSERT_EQ(run_attnmap("render " + q(photo()) + " -q -w " + q(kRepo + "@v1.0") + " -o " + q(png), env(hub.endpoint())).status, 0);
  const CliRun rec = run_attnmap("inspect " + q(png / "chelsea.png"));
  EXPECT_NE(rec.out.find(kOld), std::string::npos) << rec.out;
}

// A branch and a commit pin different files; a commit whose files are cached asks nothing of the Hub.
TEST_F(Hub, RevisionsPinByBranchTagAndCommit) {
  FakeHub hub(root);
  const std::vector<float> main_map = map_of(kRepo, env(hub.endpoint()));
  const std::vector<float> v1_map = map_of(kRepo + "@v1.0", env(hub.endpoint()));
  EXPECT_EQ(main_map, map_of(fixture("families/hf_dinov2"), ""));
  EXPECT_EQ(v1_map, map_of(fixture("hf_folder"), ""));
  EXPECT_EQ(slurp(repo_cache() / "refs" / "main"), kNew);
  const size_t before = hub.log().size();
  EXPECT_EQ(map_of(kRepo + "@" + kOld, env(hub.endpoint())), v1_map);
  EXPECT_EQ(hub.log().size(), before) << "a cached commit made a request";
  CliRun r;
  map_of("hf-hub:" + kRepo + "@" + kNew, env(hub.endpoint()), &r);
  EXPECT_EQ(hub.log().size(), before);
}

TEST_F(Hub, CacheServesWhenTheHubIsDownAndOfflineAsksNothing) {
  std::vector<float> first;
  std::string endpoint;
  {
    FakeHub hub(root);
    endpoint = hub.endpoint();
    first = map_of(kRepo, env(endpoint));
  }  // stopped: its port refuses connections now
  CliRun r;
  EXPECT_EQ(map_of(kRepo, env(endpoint), &r), first);
  EXPECT_NE(r.err.find("could not be reached"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the cached snapshot " + kNew.substr(0, 12)), std::string::npos) << r.err;
  FakeHub hub(root);
  EXPECT_EQ(map_of(kRepo, env(hub.endpoint(), "HF_HUB_OFFLINE=1"), &r), first);
  EXPECT_EQ(hub.log().size(), 0u);
  EXPECT_EQ(r.err.find("could not be reached"), std::string::npos) << r.err;
  const CliRun missing = run_attnmap("render " + q(photo()) + " -w " + q(kRepo + "@v1.0") + " -o " + q(dir / "o"),
                                     env(hub.endpoint(), "HF_HUB_OFFLINE=1"));
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("is not in the Hub cache"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("HF_HUB_OFFLINE is set"), std::string::npos) << missing.err;
  EXPECT_EQ(hub.log().size(), 0u);
  // Neither cached nor reachable.
  const CliRun gone = run_attnmap("render " + q(photo()) + " -w org/never-cached -o " + q(dir / "o"), env(endpoint));
  EXPECT_EQ(gone.status, 2);
  EXPECT_NE(gone.err.find("could not be reached"), std::string::npos) << gone.err;
  EXPECT_NE(gone.err.find("no such file or folder; as a Hugging Face Hub name"), std::string::npos) << gone.err;
}

TEST_F(Hub, ShardedSafetensorsAndTheirShardsAreFetched) {
  const std::string c = "5555555555555555555555555555555555555555";
  make_hub_repo(root, "test-org/sharded", {{"main", c}}, c, folder_files("hf_sharded"));
  // An index whose shard would leave the snapshot is refused before anything is fetched.
  const fs::path evil = dir / "evil.index.json";
  std::ofstream(evil) << R"({"metadata": {}, "weight_map": {"a": "../../../x.safetensors"}})";
  make_hub_repo(root, "test-org/evil", {{"main", c}}, c, {{"model.safetensors.index.json", evil.string()}});
  FakeHub hub(root);
  const CliRun bad = run_attnmap("download test-org/evil", env(hub.endpoint()));
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("lists the shard '../../../x.safetensors', which is not a file of the repository"),
            std::string::npos) << bad.err;
  EXPECT_EQ(map_of("test-org/sharded", env(hub.endpoint())), map_of(fixture("hf_sharded"), ""));
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors"})
    EXPECT_TRUE(fs::is_symlink(cache / "models--test-org--sharded" / "snapshots" / c / shard)) << shard;
}

TEST_F(Hub, ACutConnectionIsResumedWithRange) {
  FakeHub hub(root, {"--cut-after", "20000"});
  EXPECT_EQ(map_of(kRepo + "@v1.0", env(hub.endpoint())), map_of(fixture("hf_folder"), ""));
  int ranged = 0;
  for (const auto& line : hub.log())
    if (line.value("listener", "") == "cdn" && line["range"].is_string()) ++ranged;
  EXPECT_GE(ranged, 1);
}

TEST_F(Hub, TwoProcessesDownloadABlobOnce) {
  FakeHub hub(root, {"--rate", "40000"});
  const std::string cmd = env(hub.endpoint()) + "'" + ATTNMAP_BIN + "' download -q " + kRepo + "@v1.0 >/dev/null 2>&1";
  pid_t pids[2];
  for (pid_t& p : pids) {
    p = ::fork();
    if (p == 0) ::_exit(std::system(cmd.c_str()) == 0 ? 0 : 1);
  }
  for (pid_t p : pids) {
    int st = 0;
    ::waitpid(p, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  const std::string sha = attnmap::sha256_file(fixture("hf_folder/model.safetensors"));
  EXPECT_EQ(hub.count("GET", "/cdn/" + sha, "cdn"), 1);
  EXPECT_EQ(attnmap::sha256_file((repo_cache() / "blobs" / sha).string()), sha);
}

TEST_F(Hub, GatedAndPrivateModelsNeedAToken) {
  const std::string c = "6666666666666666666666666666666666666666";
  make_hub_repo(root, "test-org/gated", {{"main", c}}, c, folder_files("hf_folder"),
                {{"gated", true}, {"tokens", {"hf_good"}}});
  FakeHub hub(root);
  const std::string img = " -o " + q(dir / "o");
  CliRun r = run_attnmap("render " + q(photo()) + " -w test-org/gated" + img, env(hub.endpoint()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("test-org/gated is a gated model (HTTP 401) and no token was sent"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("set HF_TOKEN"), std::string::npos) << r.err;
  r = run_attnmap("render " + q(photo()) + " -w test-org/gated" + img, env(hub.endpoint(), "HF_TOKEN=hf_other"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the token has no access to it (HTTP 403)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("hf_other"), std::string::npos) << "the token was printed";
  EXPECT_EQ(map_of("test-org/gated", env(hub.endpoint(), "HF_TOKEN=hf_good")), map_of(fixture("hf_folder"), ""));
  for (const auto& line : hub.log()) {
    if (line.value("listener", "") == "cdn") {
      EXPECT_FALSE(line.value("auth", true)) << "the token went to the CDN";
    }
  }
  // The token file in HF_HOME serves too.
  fs::remove_all(cache);
  fs::create_directories(dir / "hf_home");
  std::ofstream(dir / "hf_home" / "token") << "hf_good\n";
  EXPECT_EQ(map_of("test-org/gated", env(hub.endpoint())), map_of(fixture("hf_folder"), ""));
}

TEST_F(Hub, UnknownRepositoryRevisionAndWeightsSayWhat) {
  const std::string c = "7777777777777777777777777777777777777777";
  make_hub_repo(root, "test-org/no-weights", {{"main", c}}, c,
                {{"README.md", fixture("hf_folder/config.json")}, {"model.onnx", fixture("hf_folder/config.json")}});
  FakeHub hub(root);
  const std::string o = " -o " + q(dir / "o");
  CliRun r = run_attnmap("render " + q(photo()) + " -w test-org/missing" + o, env(hub.endpoint()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("test-org/missing: no such file or folder; as a Hugging Face Hub name: no model repository "
                       "test-org/missing on " + hub.endpoint()),
            std::string::npos)
      << r.err;
  r = run_attnmap("render " + q(photo()) + " -w " + kRepo + "@v9" + o, env(hub.endpoint()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(kRepo + " has no revision 'v9'"), std::string::npos) << r.err;
  // A token that would end the header is refused, and not printed.
  r = run_attnmap("download " + kRepo, env(hub.endpoint(), "HF_TOKEN=\"$(printf 'hf_x\\r\\nX-Injected: 1')\""));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the Hub token from HF_TOKEN holds a line break"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("X-Injected"), std::string::npos) << r.err;
  r = run_attnmap("render " + q(photo()) + " -w test-org/no-weights" + o, env(hub.endpoint()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("has none of the weights files attnmap reads"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("it holds README.md, model.onnx"), std::string::npos) << r.err;
  // A path that is not a name keeps the loader's own message; a path always wins over a name.
  r = run_attnmap("render " + q(photo()) + " -w weights/missing.safetensors" + o, env(hub.endpoint()));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.find("Hub"), std::string::npos) << r.err;
  fs::create_directories(dir / "cwd" / "test-org");
  fs::copy(fixture("hf_folder"), dir / "cwd" / "test-org" / "missing");
  const size_t before = hub.log().size();
  r = run_attnmap("render " + q(photo()) + " -w test-org/missing" + o, "cd " + q(dir / "cwd") + " && " + env(hub.endpoint()));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(hub.log().size(), before);
}

TEST_F(Hub, ACorruptDownloadOrBlobIsRefusedAndNothingHalfIsKept) {
  {
    FakeHub hub(root, {"--corrupt", "model.safetensors"});
    const CliRun r = run_attnmap("download " + kRepo + "@v1.0", env(hub.endpoint()));
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("checksum mismatch"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the download was discarded"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(repo_cache() / "snapshots" / kOld / "model.safetensors"));
    for (const auto& e : fs::directory_iterator(repo_cache() / "blobs"))
      EXPECT_EQ(e.path().filename().string().size(), 40u) << e.path();  // only the json blobs
  }
  FakeHub hub(root);
  ASSERT_EQ(run_attnmap("download -q " + kRepo + "@v1.0", env(hub.endpoint())).status, 0);
  // A cached blob damaged afterwards: the load's own hash notices it.
  const std::string sha = attnmap::sha256_file(fixture("hf_folder/model.safetensors"));
  const fs::path blob = repo_cache() / "blobs" / sha;
  std::string bytes = slurp(blob);
  bytes[bytes.size() - 3] ^= 1;
  std::ofstream(blob, std::ios::binary | std::ios::trunc) << bytes;
  const CliRun r = run_attnmap("render " + q(photo()) + " -w " + kRepo + "@" + kOld + " -o " + q(dir / "o"), env(hub.endpoint()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the Hub cache is damaged"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("delete that blob"), std::string::npos) << r.err;
}

// Offline, a snapshot a loader filled only in part (a config neither cached nor recorded absent) is refused:
// the config may set the mean, std or heads; a whole-repository snapshot (.gitattributes) is read as it is.
TEST_F(Hub, OfflineRefusesASnapshotThatMaySilentlyLackAConfig) {
  FakeHub hub(root);
  ASSERT_EQ(run_attnmap("download -q " + kRepo, env(hub.endpoint())).status, 0);
  fs::remove(repo_cache() / "snapshots" / kNew / "preprocessor_config.json");
  fs::remove_all(repo_cache() / ".no_exist");
  const CliRun r = run_attnmap("render " + q(photo()) + " -w " + kRepo + " -o " + q(dir / "o"), env(hub.endpoint(), "HF_HUB_OFFLINE=1"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the model's preprocessor_config.json, which the cached snapshot " + kNew.substr(0, 12) +
                       " neither holds nor records absent"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("attnmap download " + kRepo), std::string::npos) << r.err;
  // Online, the same run settles it: the file is fetched again, and .no_exist records the absent ones.
  EXPECT_EQ(map_of(kRepo, env(hub.endpoint())), map_of(fixture("families/hf_dinov2"), ""));
  EXPECT_TRUE(fs::is_symlink(repo_cache() / "snapshots" / kNew / "preprocessor_config.json"));
  // A config that cannot change these weights' numbers (open_clip's, beside transformers weights) need not be
  // settled: a cache transformers filled never asks for it.
  fs::remove_all(repo_cache() / ".no_exist");
  EXPECT_EQ(map_of(kRepo, env(hub.endpoint(), "HF_HUB_OFFLINE=1")), map_of(fixture("families/hf_dinov2"), ""));
  // The snapshot folder given as a path keeps its name in the record.
  const fs::path out = dir / "by_path";
  ASSERT_EQ(run_attnmap("render " + q(photo()) + " -q -w " + q(repo_cache() / "snapshots" / kNew) + " -o " + q(out)).status, 0);
  const std::string rec = run_attnmap("inspect " + q(out / "chelsea.png")).out;
  EXPECT_NE(rec.find("hub              {\"repo\":\"" + kRepo + "\",\"revision\":\"" + kNew), std::string::npos) << rec;
}

// A cached blob cut short no longer parses: the message says the cache is damaged, and download checks every
// blob it serves, so a login node's cache is known good before the compute nodes read it.
TEST_F(Hub, ADamagedBlobThatDoesNotParseIsNamedAndDownloadChecksTheCache) {
  FakeHub hub(root);
  ASSERT_EQ(run_attnmap("download -q " + kRepo + "@v1.0", env(hub.endpoint())).status, 0);
  const std::string sha = attnmap::sha256_file(fixture("hf_folder/model.safetensors"));
  fs::resize_file(repo_cache() / "blobs" / sha, 1000);
  CliRun r = run_attnmap("render " + q(photo()) + " -w " + kRepo + "@v1.0 -o " + q(dir / "o"), env(hub.endpoint()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the Hub cache is damaged"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(the load said: "), std::string::npos) << r.err;
  r = run_attnmap("download " + kRepo + "@v1.0", env(hub.endpoint()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the Hub cache is damaged: the blob"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

// An interrupted download keeps its .incomplete file, says so, and the next run resumes it with a Range.
TEST_F(Hub, AnInterruptedDownloadIsKeptAndResumed) {
  FakeHub hub(root, {"--rate", "10000"});  // 64 kB: about 6 s, interrupted once a byte has come
  const std::string sha = attnmap::sha256_file(fixture("hf_folder/model.safetensors"));
  const fs::path partial = repo_cache() / "blobs" / (sha + ".incomplete");
  // Ctrl-C once the partial file holds a byte (at most 20 s), not after a fixed time: on a busy machine the
  // download may not have begun by then (the .incomplete file is made before the first byte comes). set -m:
  // a background job of a shell without job control would ignore SIGINT.
  const std::string interrupt = "bash -c 'set -m; \"$@\" & p=$!; for i in $(seq 400); do [ -s \"" + partial.string() +
                                "\" ] && break; sleep 0.05; done; kill -INT $p; wait $p' _ ";
  const CliRun r = run_attnmap("download " + kRepo + "@v1.0", interrupt + env(hub.endpoint()));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("attnmap: the partial download " + partial.string() + " is kept: the next run resumes it"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(fs::exists(partial));
  EXPECT_GT(fs::file_size(partial), 0u);
  EXPECT_EQ(map_of(kRepo + "@v1.0", env(hub.endpoint())), map_of(fixture("hf_folder"), ""));
  int resumed = 0;
  for (const auto& line : hub.log())
    if (line.value("listener", "") == "cdn" && line["range"].is_string()) ++resumed;
  EXPECT_EQ(resumed, 1);
  EXPECT_FALSE(fs::exists(partial));
}

// A file larger than the process may write (ulimit -f, as a full disk): exit 2, no partial blob left.
TEST_F(Hub, AWriteFailureLeavesNoPartialBlob) {
  FakeHub hub(root);
  const CliRun r = run_attnmap("download " + kRepo + "@v1.0", "trap '' XFSZ; ulimit -f 16; " + env(hub.endpoint()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the partial file was removed"), std::string::npos) << r.err;
  for (const auto& e : fs::recursive_directory_iterator(cache))
    EXPECT_NE(e.path().extension(), ".incomplete") << e.path();
}

// A cache written by an independent client (@huggingface/hub's snapshotDownload) is read offline.
TEST_F(Hub, ACacheWrittenByHuggingfaceHubJsIsReadOffline) {
  FakeHub hub(root);
  const int rc = run_node_snapshot(hub.endpoint(), cache, kRepo, "v1.0");
  if (rc == -2) GTEST_SKIP() << "tests/hub/node_modules missing: run (cd tests/hub && npm ci) as tools/test.sh does";
  ASSERT_EQ(rc, 0);
  const size_t before = hub.log().size();
  EXPECT_EQ(map_of(kRepo + "@v1.0", env(hub.endpoint(), "HF_HUB_OFFLINE=1")), map_of(fixture("hf_folder"), ""));
  EXPECT_EQ(hub.log().size(), before);
}
