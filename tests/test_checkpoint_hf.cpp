// Hugging Face checkpoints as save_pretrained writes them (issue 18): sharded safetensors behind
// model.safetensors.index.json, and model folders (weights + config.json + preprocessor_config.json).
// Fixtures: tests/fixtures/hf_sharded and hf_folder, made by tools/make_hf_fixtures.py from the tensors of
// tests/fixtures/layouts/hf/weights.safetensors (tools/make_fixtures.py, PyTorch).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/weights.hpp"
#include "checkpoint/weights_hf.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "core/error.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::string kSharded = fixture("hf_sharded");
const std::string kIndex = fixture("hf_sharded/model.safetensors.index.json");
const std::string kFolder = fixture("hf_folder");
const std::string kSingle = fixture("layouts/hf/weights.safetensors");
const char* kShard1 = "model-00001-of-00003.safetensors";

// The message load_model (or `f`) throws; "" when it does not throw.
template <class F>
std::string error_of(F f) { return thrown_message(f); }

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// `dir` gets copies of the three shards and an index with weight_map = the fixture's, changed by `edit`:
// pairs (tensor, shard); an empty shard removes the tensor.
void make_index(const fs::path& dir, const std::vector<std::pair<std::string, std::string>>& edit) {
  for (const auto& e : fs::directory_iterator(kSharded))
    if (e.path().extension() == ".safetensors") fs::copy_file(e.path(), dir / e.path().filename(), fs::copy_options::overwrite_existing);
  nlohmann::json idx = nlohmann::json::parse(slurp(kIndex));
  for (const auto& kv : edit) {
    if (kv.second.empty())
      idx["weight_map"].erase(kv.first);
    else
      idx["weight_map"][kv.first] = kv.second;
  }
  write(dir / "model.safetensors.index.json", idx.dump(2));
  fs::copy_file(fs::path(kIndex).parent_path() / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
}

std::string one_line(const std::string& s) { return std::count(s.begin(), s.end(), '\n') == 0 ? s : "(several lines) " + s; }

}  // namespace

// ---- sharded safetensors --------------------------------------------------------------------------------

TEST(HfShard, IndexGivesTheSameTensorsAsTheSingleFile) {
  const RawWeights sharded = load_weights_safetensors_index(kIndex);
  const RawWeights single = load_weights_safetensors(kSingle);
  ASSERT_EQ(single.tensors.size(), 40u);
  ASSERT_EQ(sharded.tensors.size(), single.tensors.size());
  for (const auto& kv : single.tensors) {
    const auto it = sharded.tensors.find(kv.first);
    ASSERT_NE(it, sharded.tensors.end()) << kv.first;
    EXPECT_EQ(it->second.shape, kv.second.shape) << kv.first;
    EXPECT_EQ(it->second.data, kv.second.data) << kv.first;  // bit for bit: the same F32 bytes
  }
  EXPECT_EQ(sharded.path, kIndex);
  EXPECT_TRUE(sharded.notices.empty()) << sharded.notices.front();
  // Each tensor from the shard the map names: the embeddings live in shard 1 only.
  const RawWeights s1 = load_weights_safetensors(kSharded + "/" + kShard1);
  EXPECT_EQ(s1.tensors.count("vit.embeddings.cls_token"), 1u);
  EXPECT_EQ(s1.tensors.count("classifier.weight"), 0u);
  EXPECT_EQ(index_shard_files(kIndex).size(), 3u);
}

TEST(HfShard, IndexRendersTheSameMapAsTheSingleFile) {
  const ViTWeights a = load_model(kIndex), b = load_model(kSingle);
  EXPECT_EQ(a.format, "safetensors, sharded (3 files listed by model.safetensors.index.json)");
  EXPECT_EQ(a.hp.num_heads, 3);
  EXPECT_EQ(a.param_count, b.param_count);
  const fs::path out = fs::temp_directory_path() / ("attnmap_hfshard_" + std::to_string(::getpid()));
  std::string maps[2];
  int k = 0;
  for (const std::string& w : {kIndex, kSingle}) {
    fs::remove_all(out);
    const CliRun r = run_attnmap("render " + q(std::string(ATTNMAP_TEST_DIR) + "/images/basic/rgba.png") +
                                 " -q --save-raw --all-heads -w " + q(w) + " -o " + q(out));
    ASSERT_EQ(r.status, 0) << w << ": " << r.err;
    maps[k++] = slurp(out / "rgba.npy");
  }
  fs::remove_all(out);
  ASSERT_EQ(maps[0].size(), 128u + 3 * 4 * 4 * 4) << "expected a (3, 4, 4) float32 .npy";  // 32 px / patch 8
  EXPECT_EQ(maps[0], maps[1]);
}

class HfShardRefuses : public TempDirTest {
 protected:
  std::string refusal() {
    return error_of([&] { load_model((dir / "model.safetensors.index.json").string()); });
  }
};

TEST_F(HfShardRefuses, AMissingShardNamingTheIndexShardAndTensor) {
  make_index(dir, {{"classifier.bias", "model-00004-of-00003.safetensors"}});
  const std::string e = refusal();
  EXPECT_EQ(e, one_line(e));
  EXPECT_EQ(e.rfind((dir / "model.safetensors.index.json").string() + ": shard 'model-00004-of-00003.safetensors' "
                    "(listed for tensor 'classifier.bias') not found: ", 0), 0u) << e;
  EXPECT_NE(e.find("No such file or directory"), std::string::npos) << e;
}

TEST_F(HfShardRefuses, ATensorTheMapListsButItsShardLacks) {
  make_index(dir, {{"vit.encoder.layer.9.output.dense.bias", "model-00002-of-00003.safetensors"}});
  const std::string e = refusal();
  EXPECT_EQ(e, (dir / "model-00002-of-00003.safetensors").string() +
                   ": tensor 'vit.encoder.layer.9.output.dense.bias' is listed for this shard by " +
                   (dir / "model.safetensors.index.json").string() + " but is not in it");
  // Listed for the wrong shard: the message says where it is.
  fs::remove_all(dir);
  fs::create_directories(dir);
  make_index(dir, {{"classifier.bias", kShard1}});
  const std::string e2 = refusal();
  EXPECT_EQ(e2, one_line(e2));
  EXPECT_NE(e2.find((dir / kShard1).string() + ": tensor 'classifier.bias' is listed for this shard"), std::string::npos) << e2;
  EXPECT_NE(e2.find("(it is in shard 'model-00003-of-00003.safetensors')"), std::string::npos) << e2;
}

TEST_F(HfShardRefuses, ATensorPresentInTwoShards) {
  // dup.safetensors is a copy of shard 1, listed for one tensor: every other tensor of shard 1 is in both.
  make_index(dir, {{"vit.embeddings.cls_token", "dup.safetensors"}});
  fs::copy_file(dir / kShard1, dir / "dup.safetensors");
  const std::string e = refusal();
  // Shards are read in name order: dup.safetensors first, then shard 1 repeats its first tensor.
  EXPECT_EQ(e, (dir / kShard1).string() + ": tensor 'vit.embeddings.cls_token' is also in shard 'dup.safetensors' (" +
               (dir / "model.safetensors.index.json").string() +
               " lists it for 'dup.safetensors'); a tensor must be in one shard only");
  // Listed for neither: a copy of shard 3 that no entry names is never read, so it cannot clash.
  make_index(dir, {});
  fs::copy_file(dir / "model-00003-of-00003.safetensors", dir / "unlisted.safetensors");
  EXPECT_EQ(refusal(), "");
}

TEST_F(HfShardRefuses, AShardPathThatEscapesTheFolder) {
  const std::string idx = (dir / "model.safetensors.index.json").string();
  make_index(dir, {{"classifier.bias", "/tmp/model-00003-of-00003.safetensors"}});
  EXPECT_EQ(refusal(), idx + ": shard '/tmp/model-00003-of-00003.safetensors' (for tensor 'classifier.bias') is an "
                       "absolute path: shards must lie in the index's folder");
  for (const char* up : {"../hf_sharded/model-00003-of-00003.safetensors", "sub/../../x.safetensors"}) {
    make_index(dir, {{"classifier.bias", up}});
    EXPECT_EQ(refusal(), idx + ": shard '" + up + "' (for tensor 'classifier.bias') has a '..' component: shards must "
                         "lie in the index's folder");
  }
  make_index(dir, {{"classifier.bias", "pytorch_model-00003-of-00003.bin"}});
  EXPECT_EQ(refusal(), idx + ": shard 'pytorch_model-00003-of-00003.bin' (for tensor 'classifier.bias') is a torch.save "
                       "(.bin) shard: .bin weights come with the .pth (torch.save) reader, not in this build");
  // A subfolder is inside: allowed.
  fs::create_directories(dir / "sub");
  fs::copy_file(dir / "model-00003-of-00003.safetensors", dir / "sub" / "last.safetensors");
  make_index(dir, {{"classifier.bias", "sub/last.safetensors"}, {"classifier.weight", "sub/last.safetensors"},
                   {"vit.layernorm.bias", "sub/last.safetensors"}, {"vit.layernorm.weight", "sub/last.safetensors"}});
  fs::remove(dir / "model-00003-of-00003.safetensors");
  EXPECT_EQ(refusal(), "");
}

TEST_F(HfShardRefuses, AMalformedIndexAndOnTheCommandLineStatus2) {
  write(dir / "model.safetensors.index.json", "{\"metadata\": {}, \"weight_map\": {\"a\": 3}}");
  EXPECT_EQ(refusal(), (dir / "model.safetensors.index.json").string() +
                           ": weight_map entry for tensor 'a' is not a shard file name, found 3");
  write(dir / "model.safetensors.index.json", "{\"metadata\": {}}");
  EXPECT_NE(refusal().find("has no \"weight_map\" object"), std::string::npos) << refusal();
  make_index(dir, {{"classifier.bias", "gone.safetensors"}});
  const CliRun r = run_attnmap("inspect " + q(dir / "model.safetensors.index.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("shard 'gone.safetensors' (listed for tensor 'classifier.bias') not found"), std::string::npos) << r.err;
}

TEST_F(HfShardRefuses, TensorsOutsideTheMapAreNotReadWithANote) {
  make_index(dir, {{"classifier.bias", ""}});  // in shard 3, no longer listed
  const RawWeights raw = load_weights_safetensors_index((dir / "model.safetensors.index.json").string());
  EXPECT_EQ(raw.tensors.count("classifier.bias"), 0u);
  ASSERT_EQ(raw.notices.size(), 1u);
  EXPECT_EQ(raw.notices[0], "tensors in the shards but not in the index's weight_map, not read: classifier.bias");
}

// ---- Hugging Face model folders -------------------------------------------------------------------------

TEST(HfFolder, LoadsWithConfigValuesAndTheirSourcesAsInspectPrintsThem) {
  const CliRun r = run_attnmap("inspect " + q(kFolder));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string cfg = "config.json (" + kFolder + "/config.json: ";
  const std::string pre = "preprocessor_config.json (" + kFolder + "/preprocessor_config.json";
  for (const std::string& want :
       {"weights:     " + kFolder + "\n", std::string("format:      safetensors (model.safetensors)\n"),
        std::string("layout:      hf-vit (Hugging Face ViTModel / ViTForImageClassification)\n"),
        std::string("heads:       3 (head dim 8, D = 24)\n"), std::string("classifier:  5 classes, reading the class token\n"),
        "  image_size      32x32                   " + cfg + "image_size)\n",
        "  patch_size      8                       " + cfg + "patch_size)\n",
        "  depth           2                       " + cfg + "num_hidden_layers)\n",
        "  num_heads       3                       " + cfg + "num_attention_heads)\n",
        "  layer_norm_eps  1e-06                   " + cfg + "layer_norm_eps)\n",
        "  mean            0.485, 0.456, 0.406     " + pre + ")\n",
        "  std             0.229, 0.224, 0.225     " + pre + ")\n",
        "  interpolation   bilinear                " + pre + ": resample 2)\n",
        "  labels          5 names: class_0, class_1, class_2, class_3, class_4  " + cfg + "id2label)\n"})
    EXPECT_NE(r.out.find(want), std::string::npos) << "missing '" << want << "' in\n" << r.out;
  // The same model as the single file: same tensors, same map.
  const ViTWeights w = load_model(kFolder), s = load_model(kSingle);
  EXPECT_EQ(w.blocks[1].qkv.weight, s.blocks[1].qkv.weight);
  EXPECT_EQ(w.head.weight, s.head.weight);
  EXPECT_FLOAT_EQ(w.hp.eps, 1e-6f);
  // The files an output must not replace.
  const std::vector<std::string> files = model_files(kFolder);
  EXPECT_EQ(files, (std::vector<std::string>{kFolder + "/model.safetensors", kFolder + "/config.json",
                                             kFolder + "/preprocessor_config.json", kFolder + "/open_clip_config.json"}));
}

TEST(HfFolder, AShardedFolderReadsItsIndex) {
  const ViTWeights w = load_model(kSharded);
  EXPECT_EQ(w.format, "safetensors, sharded (3 files listed by model.safetensors.index.json)");
  EXPECT_EQ(w.hp.source.at("num_heads"), "config.json (" + kSharded + "/config.json: num_attention_heads)");
  EXPECT_EQ(w.blocks[0].fc1.weight, load_model(kSingle).blocks[0].fc1.weight);
  const std::vector<std::string> files = model_files(kSharded);
  ASSERT_EQ(files.size(), 7u);
  EXPECT_EQ(files[0], kIndex);
  EXPECT_EQ(files[1], kSharded + "/" + kShard1);
  EXPECT_EQ(files[5], kSharded + "/preprocessor_config.json");
  EXPECT_EQ(files[6], kSharded + "/open_clip_config.json");
}

TEST(HfFolder, CommandLineStillWinsOverConfigJson) {
  const CliRun r = run_attnmap("inspect " + q(kFolder) + " --heads 6");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  num_heads       6                       command line\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--heads 6 overrides num_heads 3 from config.json (" + kFolder + "/config.json: num_attention_heads)"),
            std::string::npos)
      << r.out;
}

class HfFolderTmp : public TempDirTest {
 protected:
  void copy_model() {
    for (const char* f : {"model.safetensors", "config.json", "preprocessor_config.json"})
      fs::copy_file(kFolder + "/" + f, dir / f);
  }
  std::string refusal() { return error_of([&] { load_model(dir.string()); }); }
};

TEST_F(HfFolderTmp, ProcessorCropResampleAndNormalisation) {
  copy_model();
  // DeiTImageProcessor style: resize to 40x40, centre-crop 32x32, bicubic; no normalisation.
  write(dir / "preprocessor_config.json",
        R"({"crop_size": {"height": 32, "width": 32}, "do_center_crop": true, "do_normalize": false,
            "do_rescale": true, "do_resize": true, "resample": 3, "rescale_factor": 0.00392156862745098,
            "size": {"height": 40, "width": 40}})");
  const ViTWeights w = load_model(dir.string());
  const std::string pre = "preprocessor_config.json (" + (dir / "preprocessor_config.json").string() + ": ";
  ASSERT_TRUE(w.hp.crop_pct);
  EXPECT_FLOAT_EQ(*w.hp.crop_pct, 0.8f);
  EXPECT_EQ(w.hp.source.at("crop_pct"), pre + "crop_size / size)");
  EXPECT_EQ(w.hp.interpolation, "bicubic");
  EXPECT_EQ(w.hp.mean, (std::array<float, 3>{0, 0, 0}));
  EXPECT_EQ(w.hp.std, (std::array<float, 3>{1, 1, 1}));
  EXPECT_EQ(w.hp.source.at("mean"), pre + "do_normalize false)");
  // config.json's image_size (32) is the model's; the crop agrees, no note.
  EXPECT_EQ(w.hp.source.at("image_size"), "config.json (" + (dir / "config.json").string() + ": image_size)");
  for (const auto& n : w.notices) EXPECT_EQ(n.find("output size"), std::string::npos) << n;

  // Pixels rescaled by 1/127.5 (x in 0..2) normalised by mean 1, std 0.5: the same as x/255 by 0.5, 0.25.
  write(dir / "preprocessor_config.json",
        R"({"image_mean": [1, 1, 1], "image_std": [0.5, 0.5, 0.5], "rescale_factor": 0.00784313725490196,
            "size": {"height": 64, "width": 64}})");
  const ViTWeights r = load_model(dir.string());
  EXPECT_FLOAT_EQ(r.hp.mean[0], 0.5f);
  EXPECT_FLOAT_EQ(r.hp.std[2], 0.25f);
  EXPECT_NE(r.hp.source.at("std").find("/ (255 x rescale factor 0.007843)"), std::string::npos) << r.hp.source.at("std");
  ASSERT_EQ(std::count_if(r.notices.begin(), r.notices.end(),
                          [](const std::string& n) { return n.find("output size 64x64 differs") != std::string::npos; }),
            1);
}

TEST_F(HfFolderTmp, ConfigThatContradictsTheWeightsIsRefused) {
  copy_model();
  nlohmann::json c = nlohmann::json::parse(slurp(dir / "config.json"));
  c["num_hidden_layers"] = 12;
  write(dir / "config.json", c.dump(2));
  EXPECT_EQ(refusal(), "config.json (" + (dir / "config.json").string() +
                           ": num_hidden_layers) says 12, but the weights' block count is 2 (from the tensor shapes)");
  c["num_hidden_layers"] = 2;
  c["hidden_size"] = 768;
  write(dir / "config.json", c.dump(2));
  EXPECT_EQ(refusal(), "config.json (" + (dir / "config.json").string() +
                           ": hidden_size) says 768, but the weights' token width D is 24 (from the tensor shapes)");
  c["hidden_size"] = "24";
  write(dir / "config.json", c.dump(2));
  EXPECT_EQ(refusal(), (dir / "config.json").string() + ": \"hidden_size\" must be a positive integer, found \"24\"");
}

TEST_F(HfFolderTmp, PytorchBinOnlyOrNoWeightsIsRefused) {
  EXPECT_EQ(refusal(), dir.string() + ": a folder without model.safetensors, model.safetensors.index.json or "
                                      "pytorch_model.bin (what a Hugging Face model folder holds; open_clip's open_clip_model.safetensors or "
                                      "open_clip_pytorch_model.bin are read too); it has nothing");
  write(dir / "config.json", "{}");
  write(dir / "pytorch_model.bin.index.json", "{}");
  const std::string e = refusal();
  EXPECT_EQ(e.rfind(dir.string() + ": holds pytorch_model.bin.index.json and no model.safetensors: sharded .bin", 0), 0u)
      << e;
  EXPECT_EQ(e, one_line(e));
  const CliRun r = run_attnmap("inspect " + q(dir));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // A folder's pytorch_model.bin (a torch.save zip) is read by the .pth reader: the same tensors as model.safetensors.
  fs::copy_file(fixture("layouts/hf/weights.pth"), dir / "pytorch_model.bin");
  fs::copy_file(fixture("layouts/hf/config.json"), dir / "config.json", fs::copy_options::overwrite_existing);
  const ViTWeights bin = load_model(dir.string());
  const ViTWeights st = load_model(fixture("layouts/hf/weights.safetensors"));
  EXPECT_EQ(bin.blocks.size(), st.blocks.size());
  EXPECT_EQ(bin.pos_embed, st.pos_embed);
  EXPECT_EQ(bin.format, "pth");
}

TEST_F(HfFolderTmp, ModelSafetensorsIsReadBeforeAnIndexBesideIt) {
  copy_model();
  write(dir / "model.safetensors.index.json", "{\"weight_map\": {\"x\": \"missing.safetensors\"}}");
  const ViTWeights w = load_model(dir.string());
  EXPECT_EQ(w.format, "safetensors (model.safetensors)");
  ASSERT_FALSE(w.notices.empty());
  EXPECT_EQ(w.notices[0], (dir / "model.safetensors.index.json").string() +
                              " not read: the folder has model.safetensors, which transformers reads first too");
}

TEST_F(HfFolderTmp, OutputsNeverReplaceAShardOrAFoldersWeights) {
  const fs::path sharded = dir / "sharded", folder = dir / "folder";
  fs::create_directories(sharded);
  fs::create_directories(folder);
  for (const auto& e : fs::directory_iterator(kSharded)) fs::copy_file(e.path(), sharded / e.path().filename());
  for (const auto& e : fs::directory_iterator(kFolder)) fs::copy_file(e.path(), folder / e.path().filename());
  const std::string img = q(std::string(ATTNMAP_TEST_DIR) + "/images/basic/rgba.png");
  const std::string shard = slurp(sharded / "model-00002-of-00003.safetensors");
  CliRun r = run_attnmap("render " + img + " -q -w " + q(sharded) + " -o " + q(dir / "out") + " --manifest " +
                         q(sharded / "model-00002-of-00003.safetensors"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("model-00002-of-00003.safetensors is a weights file read with -w; choose another file"),
            std::string::npos) << r.err;
  EXPECT_EQ(slurp(sharded / "model-00002-of-00003.safetensors"), shard);
  r = run_attnmap("render " + img + " -q -w " + q(folder) + " -o " + q(dir / "out") + " --manifest " +
                  q(folder / "model.safetensors"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("model.safetensors is a weights file read with -w"), std::string::npos) << r.err;
  r = run_attnmap("render " + img + " -q -w " + q(folder) + " -o " + q(dir / "out") + " --manifest " +
                  q(folder / "config.json"));
  EXPECT_NE(r.err.find("config.json is a config file read with the weights"), std::string::npos) << r.err;
}

TEST_F(HfFolderTmp, AHubCacheSnapshotOfSymbolicLinksLoads) {
  // huggingface_hub's cache: snapshots/REV/NAME are links to ../../blobs/HASH; the names stay inside.
  fs::create_directories(dir / "blobs");
  fs::create_directories(dir / "snapshots" / "rev");
  for (const auto& e : fs::directory_iterator(kSharded)) {
    const std::string blob = "blob_" + e.path().filename().string();
    fs::copy_file(e.path(), dir / "blobs" / blob);
    fs::create_symlink(fs::path("../../blobs") / blob, dir / "snapshots" / "rev" / e.path().filename());
  }
  const ViTWeights w = load_model((dir / "snapshots" / "rev").string());
  EXPECT_EQ(w.format, "safetensors, sharded (3 files listed by model.safetensors.index.json)");
  EXPECT_EQ(w.blocks[1].fc2.weight, load_model(kSingle).blocks[1].fc2.weight);
}

namespace {
// Rewrites the safetensors file `p` with __metadata__ {"config": config} (same tensors, same data bytes).
void set_metadata_config(const fs::path& p, const std::string& config) {
  const std::string bytes = slurp(p);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  h["__metadata__"] = {{"format", "pt"}, {"config", config}};
  std::string hs = h.dump();
  hs.append((8 - hs.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (size_t i = 0; i < 8; ++i) len[i] = static_cast<char>((hs.size() >> (8 * i)) & 0xff);
  write(p, len + hs + bytes.substr(8 + n));
}
}  // namespace

TEST_F(HfShardRefuses, AShardsEmbeddedConfigWinsOverConfigJsonAndShardsMustAgree) {
  make_index(dir, {});
  // make_index copied config.json beside the index
  set_metadata_config(dir / kShard1, "{\"num_heads\": 6, \"default_head\": \"max\"}");
  const std::string idx = (dir / "model.safetensors.index.json").string();
  const ViTWeights w = load_model(idx);
  EXPECT_EQ(w.hp.num_heads, 6);  // config.json says 3: the weights' own config is above the side config
  EXPECT_EQ(w.hp.source.at("num_heads"), std::string("__metadata__ config of shard ") + kShard1 + " (" + idx + ")");
  EXPECT_EQ(w.hp.source.at("layer_norm_eps"), "config.json (" + (dir / "config.json").string() + ": layer_norm_eps)");
  ASSERT_TRUE(w.hp.default_head);
  EXPECT_EQ(*w.hp.default_head, "max");
  // The same config in another shard is fine; a different one is refused.
  set_metadata_config(dir / "model-00002-of-00003.safetensors", "{\"num_heads\": 6, \"default_head\": \"max\"}");
  EXPECT_EQ(refusal(), "");
  set_metadata_config(dir / "model-00003-of-00003.safetensors", "{\"num_heads\": 3}");
  EXPECT_EQ(refusal(), (dir / "model-00003-of-00003.safetensors").string() +
                           ": __metadata__ config differs from the one in shard " + kShard1);
}
