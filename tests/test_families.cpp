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
#include <unistd.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/inspect/inspect.hpp"
#include "checkpoint/weights.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "checkpoint/weights_pth.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "io/image_io.hpp"
#include "model/preprocess.hpp"
#include "model/pos_embed.hpp"
#include "model/vit.hpp"
#include "load_errors.hpp"
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
  // SimpleViT, and a DINOv3 as facebookresearch saves it (rotary positions only, no size in the file): any size (--size)
  if ((hp.pos_sincos || hp.layout == Layout::Dinov3) && hp.image_w != S) resample_pos_embed(w, S, S);
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
  // The same file at a second input size (--size): the family's own code built at that size, its own rule
  // for position embeddings / relative position tables / rotary grids (meta "other_size").
  if (meta.contains("other_size")) {
    const auto& os = meta["other_size"];
    const int S2 = os["image_size"].get<int>();
    ViTWeights w2 = load_model(dir + ff.path, ov);
    resample_pos_embed(w2, S2, S2);
    const std::vector<float> in2 = read_npy(dir + os["input"].get<std::string>(), &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{3, S2, S2}));
    const ForwardResult r2 = vit_forward(w2, in2.data(), fo);
    const std::vector<float> want2 = read_npy(dir + os["attn"].get<std::string>(), &shape);
    const int T2 = w2.hp.tokens();
    ASSERT_EQ(shape, (std::vector<int64_t>{static_cast<int64_t>(blocks.size()), H, T2, T2}));
    const double tol2 = os.value("tolerance", tol);
    const std::vector<float> got2 = pick_blocks(r2.attn, blocks, H, T2);
    EXPECT_TRUE(all_close(got2, want2, tol2, ff.case_name + "/" + ff.path + " attention at " + std::to_string(S2) + " px"));
    double largest2 = 0;
    for (size_t i = 0; i < got2.size() && i < want2.size(); ++i) largest2 = std::max(largest2, std::fabs(double(got2[i]) - want2[i]));
    std::printf("family parity: %s/%s at %d px largest attention difference %.2g (tolerance %.2g)\n", ff.case_name.c_str(),
                ff.path.c_str(), S2, largest2, tol2);
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

// ---- what the loader refuses, and how it says it ----------------------------------------------------------


// A tensor no layout reads stops the load with its name, shape and what it looks like, never a map without it.
TEST(FamilyRefusals, AnUnknownTensorStopsTheLoadByName) {
  RawWeights raw = load_weights_json(fixture("timm_small/weights.json"));
  Tensor t;
  t.shape = {4, 17, 17};
  t.data.assign(static_cast<size_t>(4 * 17 * 17), 0.5f);
  raw.tensors["blocks.1.attn.relative_position_bias_table"] = t;
  const std::string e = build_error(raw);
  EXPECT_NE(e.find("1 tensor that the timm layout does not read and that could change the maps: "
                   "blocks.1.attn.relative_position_bias_table (4, 17, 17): a relative position bias"),
            std::string::npos) << e;
  // The CLI: exit 2, one line.
  const fs::path dir = fs::temp_directory_path() / ("attnmap_unknown_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string text = slurp(fixture("timm_small/weights.json"));
  text.insert(1, "\"blocks.0.attn.q_norm.weight\":[1,1,1,1,1,1,1,1],\"blocks.0.attn.k_norm.weight\":[1,1,1,1,1,1,1,1],");
  { std::ofstream(dir / "w.json") << text; }
  const CliRun r = run_attnmap("inspect " + q(dir / "w.json"));
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("missing tensor 'blocks.0.attn.q_norm.bias'"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// A timm VisionTransformer on the mean patch token with neither norm nor fc_norm (a fresh user's find) is
// refused naming both (vision_transformer.py:800-902: one of them unless final_norm=False, as model_args may say).
TEST(FamilyRefusals, AMeanPoolWithoutAnyFinalNormIsRefused) {
  RawWeights raw = load_weights_pth(family_dir("timm_gap_reg") + "model.pth", "");
  for (const char* n : {"norm.weight", "norm.bias", "fc_norm.weight", "fc_norm.bias"}) raw.tensors.erase(n);
  raw.config = {{"architecture", "vit_betwixt_patch16_reg4_gap_256"}, {"num_heads", 3}, {"image_size", 32}};
  const std::string e = build_error(raw);
  EXPECT_NE(e.find("missing tensor 'fc_norm.weight' or 'norm.weight' (expected shape (48,)"), std::string::npos) << e;
  EXPECT_NE(e.find("{\"final_norm\": false}"), std::string::npos) << e;
  raw.config["fc_norm"] = false;  // model_args fc_norm=False (the *_gap_* models): norm is the one
  EXPECT_NE(build_error(raw).find("missing tensor 'norm.weight' (expected"), std::string::npos);
  raw.config["final_norm"] = false;
  const ViTWeights w = build_model(raw);
  EXPECT_EQ(w.hp.pool, Pool::MeanPatches);
  EXPECT_FALSE(w.norm.present() || w.fc_norm.present());
}

// timm's config.json global_pool decides a VisionTransformer's pooling, as timm's forward_head does (it used to be
// read for Eva only: a class-token file saved with global_pool='avg' was pooled on its class token).
TEST(FamilyRefusals, TimmGlobalPoolFromTheConfigIsThePooling) {
  RawWeights raw = load_weights_safetensors(family_dir("timm_clip") + "model.safetensors");
  raw.config = {{"architecture", "vit_base_patch16_clip_224"}, {"num_heads", 3}, {"image_size", 32}, {"act", "gelu"}};
  EXPECT_EQ(build_model(raw).hp.pool, Pool::ClassToken);
  raw.config["global_pool"] = "avg";
  const ViTWeights w = build_model(raw);
  EXPECT_EQ(w.hp.pool, Pool::MeanPatches);
  EXPECT_NE(w.hp.source.at("pool").find("global_pool"), std::string::npos) << w.hp.source.at("pool");
  raw.config["global_pool"] = "avgmax";  // a pooling attnmap does not compute: refused, naming it
  EXPECT_NE(build_error(raw).find("global_pool \"avgmax\""), std::string::npos) << build_error(raw);
}

// The six that used to give a confident wrong map (issue 24): each now matches its family (Families.*) or
// is refused by name when the file cannot say what its family's code fixes.
TEST(FamilyRefusals, SettingsAFileCannotHoldAreAskedForNotGuessed) {
  // OpenAI CLIP vs OpenCLIP: QuickGELU or GELU, not in a visual tower's state dict.
  const std::string clip = load_error(family_dir("openai_clip_visual") + "model.pth");
  EXPECT_NE(clip.find("the MLP activation is not in the file"), std::string::npos) << clip;
  EXPECT_NE(clip.find("give {setting:act} quickgelu or {setting:act} gelu"), std::string::npos) << clip;
  // timm's CLIP ViT without its config.json: GELU (vit_*_clip_*) or QuickGELU (*_clip_quickgelu_*).
  const fs::path dir = fs::temp_directory_path() / ("attnmap_timmclip_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(family_dir("timm_clip") + "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  ModelOverrides three;
  three.num_heads = 3;
  const std::string tc = load_error((dir / "model.safetensors").string(), three);
  EXPECT_NE(tc.find("timm's vit_*_clip_* use GELU, vit_*_clip_quickgelu_* QuickGELU; give {setting:act}"), std::string::npos) << tc;
  // The head count where D/64 is not what the family uses: ViT-H (D = 1280) has 16 heads, not 20.
  RawWeights big;
  big.path = "vit_huge.safetensors";
  auto put = [&](const std::string& n, std::vector<int64_t> shape) {
    Tensor t;
    t.shape = shape;
    size_t count = 1;
    for (int64_t s : shape) count *= static_cast<size_t>(s);
    t.data.assign(count, 0.01f);
    big.tensors[n] = t;
  };
  put("patch_embed.proj.weight", {1280, 3, 1, 1});
  put("cls_token", {1, 1, 1280});
  put("pos_embed", {1, 2, 1280});
  put("blocks.0.norm1.weight", {1280});
  const std::string huge = build_error(big);
  EXPECT_NE(huge.find("for D = 1280 timm's vit_huge_* has 16 heads (D/64 would be 20); give {setting:heads} H"), std::string::npos)
      << huge;
  fs::remove_all(dir);
}

// A model without a class token: the figure and the record say whose row the map is.
TEST(FamilyRefusals, NoClassTokenIsNamedOnTheFigureAndInTheRecord) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_nocls_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const CliRun r = run_attnmap("render " + q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png") + " -w " +
                               q(family_dir("timm_siglip") + "model.safetensors") + " -o " + q(out) +
                               " --panel --save-raw -q");
  ASSERT_EQ(r.status, 0) << r.err;
  const CliRun rec = run_attnmap("inspect " + q(out / "chelsea.npy"));
  EXPECT_NE(rec.out.find("mean over patch queries"), std::string::npos) << rec.out;
  const CliRun fig = run_attnmap("inspect " + q(out / "chelsea.panel.png"));
  EXPECT_EQ(fig.status, 0) << fig.err;
  // Class-specific views follow the attention-pool probe (issue 44; tests/test_explain_pools.cpp checks them
  // against autograd through timm): chefer renders.
  const CliRun ex = run_attnmap("render " + q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png") + " -w " +
                                q(family_dir("timm_siglip") + "model.safetensors") + " -o " + q(out) +
                                " --explain chefer -q");
  EXPECT_EQ(ex.status, 0) << ex.err;
  // eval scores them too, with no note that they are left out.
  const CliRun ev = run_attnmap("eval -q --masks " + q(std::string(ATTNMAP_DATA_DIR) + "/composites/masks") + " " +
                                q(std::string(ATTNMAP_DATA_DIR) + "/composites/0002_bag.png") + " -w " +
                                q(family_dir("timm_siglip") + "model.safetensors"));
  EXPECT_EQ(ev.status, 0) << ev.err;
  EXPECT_EQ(ev.err.find("those views are left out"), std::string::npos) << ev.err;
  fs::remove_all(out);
}

// torchvision's representation layer: the head after it is not used, and both are listed with the reason.
TEST(FamilyRefusals, TorchvisionPreLogitsHeadIsListedNotRead) {
  RawWeights raw = load_weights_json(fixture("layouts/torchvision/weights.json"));
  for (const char* n : {"heads.pre_logits.weight", "heads.pre_logits.bias"}) {
    Tensor t;
    t.shape = std::string(n).find("weight") != std::string::npos ? std::vector<int64_t>{24, 24} : std::vector<int64_t>{24};
    t.data.assign(t.shape.size() == 2 ? 576 : 24, 0.1f);
    raw.tensors[n] = t;
  }
  ModelOverrides ov;
  ov.num_heads = 3;
  const ViTWeights w = build_model(raw, ov);
  EXPECT_FALSE(w.head.present());
  int listed = 0;
  for (const auto& t : w.tensors)
    if (t.reason.find("representation layer (pre_logits)") != std::string::npos) ++listed;
  EXPECT_EQ(listed, 4);
}

// Hugging Face DeiTForImageClassification (no teacher) names its head 'classifier': read as the head.
TEST(FamilyRefusals, HfDeitWithoutTeacherReadsItsClassifier) {
  RawWeights raw = load_weights_safetensors(family_dir("hf_deit_teacher") + "model.safetensors");
  raw.tensors["classifier.weight"] = raw.tensors.at("cls_classifier.weight");
  raw.tensors["classifier.bias"] = raw.tensors.at("cls_classifier.bias");
  for (const char* n : {"cls_classifier.weight", "cls_classifier.bias", "distillation_classifier.weight",
                        "distillation_classifier.bias"})
    raw.tensors.erase(n);
  ModelOverrides ov;
  ov.num_heads = 3;
  const ViTWeights w = build_model(raw, ov);
  EXPECT_EQ(w.hp.layout, Layout::HfDeit);
  EXPECT_TRUE(w.head.present());
  EXPECT_FALSE(w.head_dist.present());
  for (const auto& t : w.tensors) EXPECT_TRUE(t.reason.empty()) << t.name << ": " << t.reason;
}

// Fresh-eyes findings (issue 24 review): each a map that was wrong or stale without a word.
TEST(FamilyRefusals, ReviewFindingsAreRefusedOrNamed) {
  // A Hugging Face CLIP safetensors without its config.json: QuickGELU (OpenAI) or GELU (LAION) is asked for.
  const fs::path dir = fs::temp_directory_path() / ("attnmap_review_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(family_dir("hf_clip_vision") + "model.safetensors", dir / "model.safetensors");
  ModelOverrides three;
  three.num_heads = 3;
  EXPECT_NE(load_error((dir / "model.safetensors").string(), three).find("no config.json is beside it"), std::string::npos);
  // vit-pytorch keeps neither heads nor dim_head.
  EXPECT_NE(load_error(family_dir("vit_pytorch_vit") + "model.pth").find("vit-pytorch's ViT(heads=..., dim_head=...) keeps neither"),
            std::string::npos);
  // LayerScale in one block only: a tensor was lost.
  RawWeights raw = load_weights_json(fixture("timm_small/weights.json"));
  Tensor g;
  g.shape = {32};
  g.data.assign(32, 0.5f);
  raw.tensors["blocks.1.ls1.gamma"] = g;
  raw.tensors["blocks.1.ls2.gamma"] = g;
  EXPECT_NE(build_error(raw).find("missing tensor 'blocks.0.ls1.gamma' (expected shape (32,); LayerScale is in some blocks"),
            std::string::npos) << build_error(raw);
  // --act over what the file's family fixes is said.
  ModelOverrides act;
  act.act = Activation::QuickGelu;
  const ViTWeights timm = load_model(fixture("timm_small/weights.json"), act);
  bool said = false;
  for (const auto& n : timm.notices) said = said || n.find("{setting:act} quickgelu replaces gelu") != std::string::npos;
  EXPECT_TRUE(said);
  fs::remove_all(dir);
}

// DINOv2's trainer saves both networks in one dict ("student.*", "teacher.*"): the teacher is read, the
// student set aside with the reason; the maps are the teacher's own.
TEST(FamilyRefusals, Dinov2TrainingStateDictReadsItsTeacher) {
  const std::string dir = family_dir("dinov2_chunked");
  const RawWeights plain = load_weights_pth(dir + "model.pth", "", nullptr);
  RawWeights both;
  both.path = "ssl_meta_arch.pth";
  for (const auto& kv : plain.tensors) {
    both.tensors["teacher.backbone." + kv.first] = kv.second;
    Tensor other = kv.second;
    for (size_t i = 0; i < other.data.size(); ++i) other.data.mutable_data()[i] *= 0.5f;
    both.tensors["student.backbone." + kv.first] = other;
  }
  ModelOverrides three;
  three.num_heads = 3;
  const ViTWeights a = build_model(plain, three), b = build_model(both, three);
  EXPECT_EQ(b.hp.layout, Layout::Dinov2);
  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(dir + "input.npy", &shape);
  ForwardOptions fo;
  fo.keep_full = true;
  EXPECT_EQ(vit_forward(a, input.data(), fo).attn, vit_forward(b, input.data(), fo).attn);
  size_t aside = 0;
  for (const auto& t : b.tensors) aside += t.reason.find("the student of a DINO / DINOv2 training state dict") == 0;
  EXPECT_EQ(aside, plain.tensors.size());
}

// --skip-existing redoes a map made with another --key, --act, --heads or --pool (they are in the record).
TEST(FamilyRefusals, ResumeRedoesAMapMadeWithOtherModelFlags) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_resume_flags_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string img = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  const std::string w = q(family_dir("dino_train") + "checkpoint.pth") + " --heads 3";
  ASSERT_EQ(run_attnmap("render " + img + " -w " + w + " -o " + q(out) + " --save-raw -q").status, 0);
  const CliRun same = run_attnmap("render " + img + " -w " + w + " -o " + q(out) + " --save-raw --skip-existing");
  EXPECT_NE(same.err.find("1 skipped"), std::string::npos) << same.err;
  const CliRun student = run_attnmap("render " + img + " -w " + w + " --key student -o " + q(out) + " --save-raw --skip-existing");
  EXPECT_NE(student.err.find("1 done"), std::string::npos) << student.err;
  const CliRun heads = run_attnmap("render " + img + " -w " + q(family_dir("dino_train") + "checkpoint.pth") +
                                   " --key student --heads 6 -o " + q(out) +
                                   " --save-raw --skip-existing");
  EXPECT_NE(heads.err.find("1 done"), std::string::npos) << heads.err;
  fs::remove_all(out);
}

// Families attnmap knows but does not read are named, not reported as a missing tensor. (Hugging Face SigLIP
// names were in this list until issue 43 point 6: they are read now, so a misshaped one is named as such.)
TEST(FamilyRefusals, KnownUnreadFamiliesAreNamed) {
  auto with = [](std::initializer_list<const char*> names) { return raw_with_names("x.safetensors", names, 0.0f); };
  EXPECT_NE(build_error(with({"vision_model.head.probe", "vision_model.embeddings.patch_embedding.weight"}))
                .find("tensor 'vision_model.embeddings.patch_embedding.weight' has shape (4,), expected (D, 3, P, P)"),
            std::string::npos);
  EXPECT_NE(build_error(with({"visual.layer1.0.conv1.weight", "visual.attnpool.c_proj.weight"}))
                .find("a ResNet (e.g. OpenAI CLIP RN50's visual tower), not a Vision Transformer"), std::string::npos);
}

// Issue 24/25: a SigLIP-style attention-pool probe is a view: `--views probe` draws the probe's attention over
// the patches (heads averaged), the numbers vit_forward computes (matched to timm's own AttentionPoolLatent by
// Families.MatchTheFamilysOwnCode/timm_siglip); a model without such a head refuses it by name.
TEST(FamilyViews, AttentionPoolProbeIsAView) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_probe_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string img = std::string(ATTNMAP_DATA_DIR) + "/chelsea.png";
  const std::string weights = family_dir("timm_siglip") + "model.safetensors";
  const CliRun r = run_attnmap("render " + q(img) + " -w " + q(weights) + " -o " + q(out) +
                               " --views probe,probe/h1 --save-raw --panel -q");
  ASSERT_EQ(r.status, 0) << r.err;
  const ViTWeights w = load_model(weights);
  const Image photo = load_image(img, LoadOptions{});
  const ModelInput in = preprocess(photo, w.hp.image_w, w.hp.image_h, ResizeMode::Squash, w.hp.mean.data(), w.hp.std.data());
  ForwardOptions fo;
  fo.to_end = true;
  const ForwardResult fr = vit_forward(w, in.chw.data(), fo);
  const int T = fr.tokens, H = w.hp.num_heads;
  ASSERT_EQ(fr.pool_attn.size(), static_cast<size_t>(H * T));
  std::vector<float> mean(static_cast<size_t>(T), 0.0f);
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) mean[static_cast<size_t>(t)] += fr.pool_attn[static_cast<size_t>(h * T + t)];
    mean[static_cast<size_t>(t)] /= static_cast<float>(H);
  }
  std::vector<int64_t> shape;
  const std::vector<float> got = read_npy((out / "chelsea.probe.npy").string(), &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{w.hp.grid_h, w.hp.grid_w}));
  EXPECT_TRUE(all_close(got, std::vector<float>(mean.begin() + w.hp.num_prefix, mean.end()), 1e-6, "probe mean"));
  const std::vector<float> h1 = read_npy((out / "chelsea.probe-h1.npy").string(), &shape);
  EXPECT_TRUE(all_close(h1, std::vector<float>(fr.pool_attn.begin() + T + w.hp.num_prefix, fr.pool_attn.begin() + 2 * T),
                        1e-6, "probe head 1"));
  EXPECT_TRUE(fs::exists(out / "chelsea.panel.png"));
  const CliRun no = run_attnmap("render " + q(img) + " -w " + q(family_dir("timm_clip") + "model.safetensors") +
                                " -o " + q(out) + " --views probe -q");
  EXPECT_EQ(no.status, 2);
  EXPECT_NE(no.err.find("--views: 'probe': the model has no attention-pool (MAP) head"), std::string::npos) << no.err;
  fs::remove_all(out);
}

// The probe beside a class-specific view: that run takes the taped forward (model/vit_backward.cpp), whose
// probe attention (ForwardTape::probe_attn) must give the probe view the very map a probe-alone run draws
// (same layer functions, same order: bit for bit), not "the forward pass did not run the attention pool".
TEST(FamilyViews, ProbeBesideClassSpecificViewMatchesProbeAlone) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_probe_chefer_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string img = std::string(ATTNMAP_DATA_DIR) + "/chelsea.png";
  const std::string weights = family_dir("timm_siglip") + "model.safetensors";
  const CliRun both = run_attnmap("render " + q(img) + " -w " + q(weights) + " -o " + q(out / "both") +
                                  " --views probe,chefer --save-raw -q");
  ASSERT_EQ(both.status, 0) << both.err;
  const CliRun alone = run_attnmap("render " + q(img) + " -w " + q(weights) + " -o " + q(out / "alone") +
                                   " --views probe --save-raw -q");
  ASSERT_EQ(alone.status, 0) << alone.err;
  std::vector<int64_t> shape, shape_alone;
  const std::vector<float> got = read_npy((out / "both" / "chelsea.probe.npy").string(), &shape);
  const std::vector<float> want = read_npy((out / "alone" / "chelsea.npy").string(), &shape_alone);
  EXPECT_EQ(shape, shape_alone);
  EXPECT_EQ(got, want);  // bit for bit
  EXPECT_TRUE(fs::exists(out / "both" / "chelsea.chefer.npy"));
  fs::remove_all(out);
}
