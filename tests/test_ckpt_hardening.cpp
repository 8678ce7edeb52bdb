// Checkpoint hardening: the weights hash is of the very bytes loaded (a file replaced by rename after the
// load does not change it), and the loaders' messages are attnmap's own words (no library text), naming the
// file and the tensor. (The .pth decompression bombs: test_pth_bombs.cpp.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <cfloat>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/pickle.hpp"
#include "checkpoint/weights.hpp"
#include "checkpoint/weights_json.hpp"
#include "checkpoint/weights_pth.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "core/error.hpp"
#include "io/hash.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("attnmap_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

// Replaces `target` by `replacement`'s bytes with rename(2), as an atomic writer (or a user's `mv`) does.
void replace_by_rename(const fs::path& target, const std::string& bytes) {
  const fs::path tmp = target.string() + ".new";
  write(tmp, bytes);
  fs::rename(tmp, target);
}

// provenance's definition of a folder / index hash: SHA-256 of the "HASH  NAME\n" listing of every file
// model_files names that exists, each hashed from disk (what engine/provenance.cpp computed before).
std::string listing_hash_from_disk(const std::string& weights_path) {
  std::string listing;
  for (const std::string& f : model_files(weights_path))
    if (fs::is_regular_file(f)) listing += sha256_file(f) + "  " + fs::path(f).filename().string() + "\n";
  return sha256_text(listing);
}

}  // namespace

// One file of each format: the recorded hash is sha256sum of the bytes loaded, and stays so when the file is
// replaced by rename right after the load (the old code hashed the path again: the new file's hash).
TEST(WeightsHash, IsOfTheBytesLoadedForEveryFormat) {
  const fs::path dir = temp_dir("formats");
  const std::string other = slurp(fixture("layouts/timm/weights.json"));
  for (const char* name : {"weights.safetensors", "weights.pth", "weights.json", "weights.f16.pth"}) {
    SCOPED_TRACE(name);
    const std::string original = slurp(fixture(std::string("layouts/timm/") + name));
    ASSERT_FALSE(original.empty());
    const fs::path p = dir / name;
    write(p, original);
    fs::copy_file(fixture("layouts/timm/config.json"), dir / "config.json", fs::copy_options::overwrite_existing);
    const std::string want = sha256_text(original);
    ASSERT_EQ(want, sha256_file(p.string()));  // the value definition: `sha256sum FILE`
    const ViTWeights w = load_model(p.string());
    replace_by_rename(p, other + " ");
    EXPECT_EQ(w.weights_sha256, want);
    EXPECT_NE(sha256_file(p.string()), want);  // what re-opening the path would now record
    ASSERT_NE(w.file_sha256(p.string()), nullptr);
    EXPECT_EQ(*w.file_sha256(p.string()), want);
  }
  fs::remove_all(dir);
}

// load_model's while_hashing (a run's packing, overlapping the hash) runs once on the built model; the hash is
// filled in after it (still sha256sum of the bytes loaded), and its error is the load's.
TEST(WeightsHash, WhileHashingRunsOnTheBuiltModelThenTheHashIsFilledIn) {
  const std::string st = fixture("layouts/timm/weights.safetensors"), folder = fixture("hf_folder"),
                    sharded = fixture("hf_sharded");
  for (const std::string& path : {st, folder, sharded}) {
    SCOPED_TRACE(path);
    int calls = 0, dim = 0;
    const ViTWeights w = load_model(path, {}, [&](ViTWeights& m) {
      ++calls;
      dim = m.hp.dim;
      if (path == st) {
        EXPECT_TRUE(m.weights_sha256.empty());  // a single file: hashed while this runs
      }
    });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(dim, w.hp.dim);
    EXPECT_GT(dim, 0);
    EXPECT_EQ(w.weights_sha256, path == st ? sha256_file(st) : listing_hash_from_disk(path));
    ASSERT_FALSE(w.files.empty());
    EXPECT_EQ(w.files.front().sha256, sha256_file(w.files.front().path));
    // The model (its tensors viewed in the mappings) holds no descriptor of its files: a program may keep many.
    for (const FileHash& f : w.files) {
      const std::string real = fs::canonical(f.path).string();
      for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        EXPECT_NE(fs::read_symlink(e.path(), ec).string(), real);
      }
    }
  }
  try {
    (void)load_model(st, {}, [](ViTWeights&) { throw Error("packing failed"); });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "packing failed");
  }
}

// The readers' own entry points record the same hash.
TEST(WeightsHash, ReadersRecordTheHashOfTheFileTheyParsed) {
  const std::string st = fixture("layouts/timm/weights.safetensors"), pth = fixture("layouts/timm/weights.pth"),
                    js = fixture("layouts/timm/weights.json");
  ASSERT_EQ(load_weights_safetensors(st).files.size(), 1u);
  EXPECT_EQ(load_weights_safetensors(st).files[0].sha256, sha256_file(st));
  EXPECT_EQ(load_weights_pth(pth, "").files[0].sha256, sha256_file(pth));
  EXPECT_EQ(load_weights_json(js).files[0].sha256, sha256_file(js));
  EXPECT_EQ(load_weights_json(js).files[0].path, js);
}

// Hugging Face folders and sharded indexes keep provenance's listing value, computed from the bytes read:
// the same as hashing the files on disk before any change, and unchanged when a shard and config.json are
// replaced after the load.
TEST(WeightsHash, FoldersAndShardedIndexesKeepTheListingValue) {
  const fs::path dir = temp_dir("sharded");
  fs::copy(fixture("hf_sharded"), dir / "m");
  fs::copy(fixture("hf_folder"), dir / "f");
  struct Case {
    std::string path;
    std::vector<std::string> replaced;
  } cases[] = {{(dir / "m").string(), {"model-00002-of-00003.safetensors", "config.json"}},
               {(dir / "m/model.safetensors.index.json").string(), {"model-00001-of-00003.safetensors", "preprocessor_config.json"}},
               {(dir / "f").string(), {"model.safetensors", "config.json"}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    const std::string want = listing_hash_from_disk(c.path);
    const ViTWeights w = load_model(c.path);
    EXPECT_EQ(w.weights_sha256, want);
    const fs::path folder = fs::is_directory(c.path) ? fs::path(c.path) : fs::path(c.path).parent_path();
    for (const std::string& f : c.replaced) {
      const std::string old = slurp(folder / f);
      ASSERT_NE(w.file_sha256((folder / f).string()), nullptr) << f;
      EXPECT_EQ(*w.file_sha256((folder / f).string()), sha256_text(old)) << f;
      replace_by_rename(folder / f, old + " ");
    }
    EXPECT_NE(listing_hash_from_disk(c.path), want);  // re-hashing the files now gives another value
    EXPECT_EQ(w.weights_sha256, want);
    for (const std::string& f : c.replaced) replace_by_rename(folder / f, slurp(folder / f).substr(0, slurp(folder / f).size() - 1));
  }
  fs::remove_all(dir);
}

// ---- messages -----------------------------------------------------------------------------------------

namespace {

std::string json_error(const std::string& text) {
  try {
    parse_weights_json(text, "w.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

bool has_library_text(const std::string& s) {
  return s.find("json.exception") != std::string::npos || s.find("parse_error") != std::string::npos ||
         s.find("syntax error while parsing") != std::string::npos || s.find("bad_alloc") != std::string::npos;
}

}  // namespace

TEST(CheckpointMessages, JsonValuesBeyondFloat32AreRefusedByTensor) {
  EXPECT_EQ(json_error(R"({"a": [1, 1e-400]})"),
            "w.json: tensor 'a' holds 1e-400, which underflows float32 (it would read as 0; smallest magnitude about 1.4e-45)");
  EXPECT_EQ(json_error(R"({"b": [[1e-50]]})").find("w.json: tensor 'b' holds 1e-50, which underflows float32"), 0u);
  EXPECT_EQ(json_error(R"({"a": [1e400]})"),
            "w.json: tensor 'a' holds 1e400, beyond float32's range (largest magnitude about 3.4e38)");
  EXPECT_EQ(json_error(R"({"a": [-3.5e38]})"),
            "w.json: tensor 'a' holds -3.5e38, beyond float32's range (largest magnitude about 3.4e38)");
  // float32's largest value as numpy prints it (3.4028235e+38, a little above FLT_MAX as a double) rounds to
  // FLT_MAX: a value, as it is for numpy and torch; only what rounds to infinity is refused.
  for (const std::string& t : {std::string(R"({"a": [3.4028235e38, -3.4028235e+38]})"),
                               std::string(R"({"a": [3.4028235e38, -3.4028235e+38], "c": "x"})")}) {
    const RawWeights raw = parse_weights_json(t, "w.json");
    EXPECT_EQ(raw.tensors.at("a").data[0], FLT_MAX);
    EXPECT_EQ(raw.tensors.at("a").data[1], -FLT_MAX);
  }
  // 3.4028236e38 is past the halfway point to 2^128: float32 infinity (numpy too), refused.
  EXPECT_EQ(json_error(R"({"a": [3.4028236e38]})"),
            "w.json: tensor 'a' holds 3.4028236e38, beyond float32's range (largest magnitude about 3.4e38)");
  // Zero as written, and a float32 subnormal, are values, not underflows (fast scanner and SAX agree).
  for (const std::string& t : {std::string(R"({"a": [0e-400, 0.0, 1e-40]})"), std::string(R"({"a": [0e-400, 0.0, 1e-40], "c": "x"})")}) {
    const RawWeights raw = parse_weights_json(t, "w.json");
    ASSERT_EQ(raw.tensors.at("a").data.size(), 3u);
    EXPECT_EQ(raw.tensors.at("a").data[0], 0.0f);
    EXPECT_FLOAT_EQ(raw.tensors.at("a").data[2], 1e-40f);
  }
}

TEST(CheckpointMessages, MalformedJsonIsDescribedInAttnmapsWords) {
  const std::string cut = json_error("{\"a\": [1, 2");
  EXPECT_EQ(cut, "w.json: malformed JSON at line 1, column 12: the text ends before the JSON value is complete");
  const std::string bad = json_error("{\"a\": [1, 2,\n  3,, 4]}");
  EXPECT_EQ(bad, "w.json: malformed JSON at line 2, column 5: unexpected ','");
  EXPECT_FALSE(has_library_text(bad));
  // A side config and a safetensors header.
  const fs::path dir = temp_dir("sidecfg");
  fs::copy_file(fixture("layouts/timm/weights.safetensors"), dir / "weights.safetensors");
  write(dir / "config.json", "{\"architecture\": \"vit_tiny_patch16_224\", \"pretrained_cfg\": {\"mean\": [0.5,");
  try {
    load_model((dir / "weights.safetensors").string());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    const std::string s = e.what();
    EXPECT_EQ(s, (dir / "config.json").string() +
                     ": malformed JSON at line 1, column 74: the text ends before the JSON value is complete "
                     "(read as a side config)");
  }
  fs::remove_all(dir);
  std::vector<uint8_t> st(8);
  const std::string header = "{\"a\": {\"dtype\": \"F32\", \"shape\": [1] \"data_offsets\": [0, 4]}}";
  st[0] = static_cast<uint8_t>(header.size());
  st.insert(st.end(), header.begin(), header.end());
  st.insert(st.end(), 4, 0);
  try {
    parse_weights_safetensors(st.data(), st.size(), "m.safetensors");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "m.safetensors: safetensors header is not valid JSON: at line 1, column 37: unexpected string "
                                       "\"data_offsets\"");
  }
}

TEST(CheckpointMessages, ConfigIntegerOutOfRangeSaysTheRange) {
  RawWeights raw = load_weights_safetensors(fixture("layouts/timm/weights.safetensors"));
  raw.config["patch_size"] = 1099511627776LL;
  try {
    build_model(raw);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config \"patch_size\" must be an integer from -16777216 to 16777216 (2^24), "
                                         "found 1099511627776"),
              std::string::npos)
        << e.what();
  }
}

TEST(CheckpointMessages, PickleStackAtStopIsNamedPlainly) {
  auto err = [](const std::string& bytes) {
    try {
      unpickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "p.pth");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string P = "\x80\x02";
  EXPECT_EQ(err(P + "(N."), "p.pth: data.pkl: the pickle stops with 1 MARK not closed (a well-formed pickle closes "
                            "each MARK before STOP)");
  EXPECT_EQ(err(P + "NN."), "p.pth: data.pkl: the pickle stops with 2 values on its stack, expected exactly one (the "
                            "object pickled)");
  EXPECT_EQ(err(P + "."), "p.pth: data.pkl: the pickle stops with 0 values on its stack, expected exactly one (the "
                          "object pickled)");
}
