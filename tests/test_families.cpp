// The model families, each against its own code (issue 24): every folder under tests/fixtures/families/
// (written by tools/make_family_fixtures_*.py, which run the family's repository at a recorded commit; the
// format is tests/fixtures/families/FORMAT.md). For every weights file of a case: the layout detected, the
// shape read, every head of the first, middle and last block within the case's tolerance (max(1e-5, twice
// the family's own float32-vs-float64 spread)) of the family's forward in float64, the logits and an
// attention-pool probe's attention likewise, and every tensor of the file accounted for.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/inspect.hpp"
#include "checkpoint/weights.hpp"
#include "io/npy.hpp"
#include "model/pos_embed.hpp"
#include "model/vit.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

struct FamilyFile {
  std::string case_name, path, key;
};
void PrintTo(const FamilyFile& f, std::ostream* os) { *os << f.case_name << "/" << f.path << (f.key.empty() ? "" : " --key " + f.key); }

std::string family_dir(const std::string& name) { return fixture("families/" + name) + "/"; }

nlohmann::json read_meta(const std::string& dir) {
  std::ifstream f(dir + "meta.json");
  return nlohmann::json::parse(f);
}

std::vector<FamilyFile> all_files() {
  std::vector<FamilyFile> out;
  std::vector<std::string> cases;
  for (const auto& e : fs::directory_iterator(fixture("families")))
    if (e.is_directory() && fs::exists(e.path() / "meta.json")) cases.push_back(e.path().filename().string());
  std::sort(cases.begin(), cases.end());
  for (const std::string& c : cases) {
    const auto meta = read_meta(family_dir(c));
    for (const auto& f : meta["files"]) {
      const std::string key = f.contains("key") && f["key"].is_string() ? f["key"].get<std::string>() : "";
      out.push_back({c, f["path"].get<std::string>(), key});
    }
  }
  return out;
}

ModelOverrides overrides_of(const nlohmann::json& meta, const std::string& key) {
  ModelOverrides ov;
  if (meta.contains("heads_arg") && meta["heads_arg"].is_number_integer()) ov.num_heads = meta["heads_arg"].get<int>();
  if (meta.contains("act_arg") && meta["act_arg"].is_string()) ov.act = parse_activation(meta["act_arg"].get<std::string>());
  if (meta.contains("pool_arg") && meta["pool_arg"].is_string()) {
    const std::string p = meta["pool_arg"].get<std::string>();
    ov.pool = p == "mean" ? Pool::MeanAll : Pool::ClassToken;  // vit-pytorch: pool='mean' averages every token
  }
  if (!key.empty()) ov.key = key;
  return ov;
}

// (L, H, T, T) -> the blocks `blocks` of it, (n, H, T, T).
std::vector<float> pick_blocks(const std::vector<float>& attn, const std::vector<int>& blocks, int H, int T) {
  const size_t per = static_cast<size_t>(H) * T * T;
  std::vector<float> out;
  for (int b : blocks) out.insert(out.end(), attn.begin() + static_cast<long>(b * per), attn.begin() + static_cast<long>((b + 1) * per));
  return out;
}

std::string file_label(const testing::TestParamInfo<FamilyFile>& info) {
  std::string s = info.param.case_name + "_" + info.param.path + (info.param.key.empty() ? "" : "_" + info.param.key);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class Families : public ::testing::TestWithParam<FamilyFile> {};

TEST_P(Families, MatchTheFamilysOwnCode) {
  const FamilyFile& ff = GetParam();
  const std::string dir = family_dir(ff.case_name);
  const auto meta = read_meta(dir);
  ModelOverrides ov = overrides_of(meta, ff.key);
  if (ff.path == "model_openai.pth") ov.act.reset();  // OpenAI's own file says QuickGELU (input_resolution)
  ViTWeights w = load_model(dir + ff.path, ov);
  const HParams& hp = w.hp;
  const int S = meta["image_size"].get<int>();
  if (hp.pos_sincos && hp.image_w != S) resample_pos_embed(w, S, S);  // SimpleViT: any size (--size)
  EXPECT_EQ(layout_name(hp.layout), meta["layout"].get<std::string>());
  EXPECT_EQ(hp.image_w, meta["image_size"].get<int>());
  EXPECT_EQ(hp.patch, meta["patch"].get<int>());
  EXPECT_EQ(hp.dim, meta["dim"].get<int>());
  EXPECT_EQ(hp.depth, meta["depth"].get<int>());
  EXPECT_EQ(hp.num_heads, meta["heads"].get<int>());
  EXPECT_EQ(hp.tokens(), meta["tokens"].get<int>());
  EXPECT_EQ(hp.num_prefix, meta["num_prefix"].get<int>());
  EXPECT_EQ(hp.class_token, meta["class_token"].get<bool>());
  for (const auto& t : w.tensors) EXPECT_TRUE(t.reason.empty() || t.reason.size() > 10) << t.name;

  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(dir + "input.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{3, hp.image_h, hp.image_w}));
  ForwardOptions fo;
  fo.keep_full = true;
  fo.to_end = true;
  const ForwardResult r = vit_forward(w, input.data(), fo);
  const std::vector<int> blocks = meta["blocks"].get<std::vector<int>>();
  const std::vector<float> want = read_npy(dir + "attn.npy", &shape);
  const int H = hp.num_heads, T = hp.tokens();
  ASSERT_EQ(shape, (std::vector<int64_t>{static_cast<int64_t>(blocks.size()), H, T, T}));
  const double tol = meta["tolerance"].get<double>();
  const std::vector<float> got = pick_blocks(r.attn, blocks, H, T);
  EXPECT_TRUE(all_close(got, want, tol, ff.case_name + "/" + ff.path + " attention"));
  double largest = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) largest = std::max(largest, std::fabs(double(got[i]) - want[i]));
  std::printf("family parity: %s/%s largest attention difference %.2g (tolerance %.2g)\n", ff.case_name.c_str(),
              ff.path.c_str(), largest, tol);
  if (fs::exists(dir + "logits.npy") && w.head.present()) {
    const std::vector<float> logits = read_npy(dir + "logits.npy", &shape);
    const double ltol = meta.value("logits_tolerance", 1e-4);
    EXPECT_TRUE(all_close(r.logits, logits, ltol, ff.case_name + "/" + ff.path + " logits"));
  } else if (fs::exists(dir + "logits.npy")) {
    ADD_FAILURE() << ff.case_name << ": the family's model has a classifier, attnmap read none";
  }
  if (fs::exists(dir + "pool_attn.npy")) {
    const std::vector<float> pool = read_npy(dir + "pool_attn.npy", &shape);
    EXPECT_TRUE(all_close(r.pool_attn, pool, meta.value("pool_tolerance", tol), ff.case_name + " probe attention"));
  }
  // The family's own preprocessing, where attnmap's default follows the layout (CLIP, SigLIP).
  if (meta.contains("mean") && meta.value("check_stats", hp.layout == Layout::Clip || hp.layout == Layout::TimmClip ||
                                                              hp.layout == Layout::TimmSiglip || hp.layout == Layout::HfClip)) {
    const auto mean = meta["mean"].get<std::vector<float>>(), stdv = meta["std"].get<std::vector<float>>();
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(hp.mean[static_cast<size_t>(c)], mean[static_cast<size_t>(c)], 1e-6);
      EXPECT_NEAR(hp.std[static_cast<size_t>(c)], stdv[static_cast<size_t>(c)], 1e-6);
    }
  }
  // inspect names the family and lists every tensor.
  const std::string d = describe_model(w, dir + ff.path);
  EXPECT_NE(d.find(layout_info(hp.layout).family), std::string::npos) << d;
}

INSTANTIATE_TEST_SUITE_P(All, Families, ::testing::ValuesIn(all_files()), file_label);

}  // namespace
