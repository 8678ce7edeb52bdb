// Issue 18: --pos-interp, each framework's own position-embedding resampling, against fixtures made with the
// frameworks' F.interpolate calls on the committed layout weights (tools/make_posinterp_fixtures.py).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/inspect/inspect.hpp"
#include "checkpoint/weights.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "model/pos_embed.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

nlohmann::json posinterp_meta() {
  std::ifstream f(fixture("posinterp/meta.json"));
  return nlohmann::json::parse(f);
}

std::vector<float> fixture_npy(const std::string& name, std::vector<int64_t>* shape = nullptr) {
  std::vector<int64_t> s;
  std::vector<float> v = read_npy(fixture("posinterp/" + name), &s);
  if (shape) *shape = s;
  return v;
}

ViTWeights layout_model(const std::string& layout) {
  return load_model(fixture("layouts/" + layout + "/weights.json"));
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace

// Every (layout, size, mode) case: attnmap's resampled pos_embed equals the framework call's within 1e-5,
// the prefix rows bit for bit.
TEST(PosInterp, ResampledEmbeddingsMatchEachFrameworksCall) {
  const nlohmann::json meta = posinterp_meta();
  ASSERT_EQ(meta["cases"].size(), 40u);
  std::map<std::string, double> worst;  // mode -> largest difference over its cases
  for (const auto& c : meta["cases"]) {
    const std::string what = c["file"].get<std::string>() + " as " + c["mode"].get<std::string>();
    ViTWeights w = layout_model(c["layout"]);
    const std::vector<float> pos0 = w.pos_embed;
    const PosInterp mode = parse_pos_interp(c["mode"]);
    resample_pos_embed(w, c["width"], c["height"], mode);
    EXPECT_EQ(w.hp.grid_h, c["grid_h"].get<int>()) << what;
    EXPECT_EQ(w.hp.grid_w, c["grid_w"].get<int>()) << what;
    std::vector<int64_t> shape;
    const std::vector<float> want = fixture_npy(c["file"], &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{c["prefix"].get<int>() + c["grid_h"].get<int>() * c["grid_w"].get<int>(),
                                           w.hp.dim}))
        << what;
    EXPECT_TRUE(all_close(w.pos_embed, want, 1e-5, what));
    const size_t pre = static_cast<size_t>(c["prefix"].get<int>() * w.hp.dim);
    EXPECT_EQ(std::vector<float>(w.pos_embed.begin(), w.pos_embed.begin() + static_cast<long>(pre)),
              std::vector<float>(pos0.begin(), pos0.begin() + static_cast<long>(pre)))
        << what;
    EXPECT_EQ(w.hp.source["pos_interp"], c["mode"].get<std::string>());
    double& m = worst[c["mode"].get<std::string>()];
    m = std::max(m, max_abs_diff(w.pos_embed, want));
  }
  for (const auto& kv : worst) std::cout << "  --pos-interp " << kv.first << ": max |attnmap - torch| " << kv.second << "\n";
}

// The fixtures tell the modes apart: each mode's result misses the other formulas' fixtures by far more than the
// tolerance (so the test above would catch a wrong formula), and the antialiased kernel differs when shrinking.
TEST(PosInterp, TheFormulasDiffer) {
  const nlohmann::json meta = posinterp_meta();
  for (const char* size : {"160x112", "224x224", "24x16"}) {
    const std::string base = std::string("pos_timm_") + size + "_";
    const std::vector<float> timm = fixture_npy(base + "timm.npy"), legacy = fixture_npy(base + "timm-legacy.npy"),
                             dino = fixture_npy(base + "dino.npy"), tv = fixture_npy(base + "torchvision.npy");
    EXPECT_GT(max_abs_diff(timm, legacy), 1e-3) << size;
    EXPECT_GT(max_abs_diff(dino, legacy), 1e-3) << size;
    EXPECT_GT(max_abs_diff(tv, legacy), 1e-3) << size;
    EXPECT_GT(max_abs_diff(dino, timm), 1e-3) << size;
  }
  // Same call, same numbers: hf = timm-legacy, hf-legacy = dino (the generator asserts the tensors equal).
  for (const auto& c : meta["cases"]) {
    const std::string mode = c["mode"];
    if (mode == "hf" || mode == "hf-legacy") {
      EXPECT_TRUE(c["shares_file_with_an_earlier_mode"].get<bool>()) << c["file"];
    }
  }
}

TEST(PosInterp, NamesRoundTripAndUnknownNamesAreRefused) {
  for (const char* n : {"timm", "timm-legacy", "dino", "hf", "hf-legacy", "torchvision"})
    EXPECT_EQ(pos_interp_name(parse_pos_interp(n)), n);
  try {
    parse_pos_interp("DINO");
    FAIL() << "accepted DINO";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expects one of timm, timm-legacy, dino, hf, hf-legacy, "
                                         "torchvision, found 'DINO'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(pos_interp_call(PosInterp::Dino).find("+ 0.1"), std::string::npos);
  EXPECT_NE(pos_interp_call(PosInterp::Timm).find("antialias=True"), std::string::npos);
  EXPECT_NE(pos_interp_call(PosInterp::Torchvision).find("align_corners=True"), std::string::npos);
}

// The default follows the layout; timm, hf and torchvision hold the same weights in three namings, so each one's
// default resampling must equal its framework's fixture.
TEST(PosInterp, DefaultFollowsTheLayout) {
  const std::map<std::string, std::string> want = {
      {"timm", "timm"},         {"hf", "hf"},          {"hf_model", "hf"},          {"torchvision", "torchvision"},
      {"deit_distilled", "timm"}, {"qv_bias", "timm"}, {"dinov2_fb", "timm"},        {"timm_reg_noembed", "timm"},
      {"timm_reg_full", "timm"}};
  for (const auto& kv : want) {
    const ViTWeights w = layout_model(kv.first);
    const PosInterpChoice c = default_pos_interp(w.hp);
    EXPECT_EQ(pos_interp_name(c.mode), kv.second) << kv.first << ": " << c.why;
    EXPECT_FALSE(c.why.empty());
  }
  // DINOv2 without register tokens: DINO's rule (interpolate_offset=0.1).
  ViTWeights d = layout_model("dinov2_fb");
  d.hp.num_registers = 0;
  EXPECT_EQ(default_pos_interp(d.hp).mode, PosInterp::Dino);
  EXPECT_NE(default_pos_interp(d.hp).why.find("interpolate_offset=0.1"), std::string::npos);
  for (const char* layout : {"timm", "hf", "torchvision"}) {
    ViTWeights w = layout_model(layout);
    const std::string mode = pos_interp_name(default_pos_interp(w.hp).mode);
    resample_pos_embed(w, 160, 112);  // the default
    const std::string file = std::string("pos_timm_160x112_") + (mode == "hf" ? "timm-legacy" : mode) + ".npy";
    EXPECT_TRUE(all_close(w.pos_embed, fixture_npy(file), 1e-5, std::string(layout) + " default vs " + file));
  }
}

TEST(PosInterp, InspectSaysWhichRuleAppliesAndWhy) {
  const std::string dv2 = describe_model(layout_model("dinov2_fb"), "dinov2_fb");
  EXPECT_NE(dv2.find("pos_interp"), std::string::npos) << dv2;
  EXPECT_NE(dv2.find("timm"), std::string::npos) << dv2;
  EXPECT_NE(dv2.find("interpolate_antialias=True"), std::string::npos) << dv2;
  const std::string tv = describe_model(layout_model("torchvision"), "torchvision");
  EXPECT_NE(tv.find("torchvision"), std::string::npos);
  EXPECT_NE(tv.find("interpolate_embeddings"), std::string::npos) << tv;
  const std::string hf = describe_model(layout_model("hf"), "hf");
  EXPECT_NE(hf.find("ViTEmbeddings.interpolate_pos_encoding"), std::string::npos) << hf;
}

class PosInterpCli : public TempDirTest {};

// attnmap render at --size 322,224 on the DINOv2 fixture: the saved maps of both layers equal the class-token
// attention of a PyTorch forward whose position embeddings were resampled with DINO's rule (--pos-interp dino),
// with timm's call (the default for DINOv2 with registers), and with attnmap's old rule (timm-legacy).
TEST_F(PosInterpCli, RenderMatchesAPyTorchForwardWithEachRule) {
  const nlohmann::json r = posinterp_meta()["render"];
  const std::string photo = fixture("posinterp/" + r["photo"].get<std::string>());
  const std::string weights = fixture(r["weights"].get<std::string>());
  const int gh = r["grid_h"], gw = r["grid_w"], H = r["heads"];
  const size_t per_layer = static_cast<size_t>(H) * static_cast<size_t>(gh) * static_cast<size_t>(gw);
  for (const char* mode : {"dino", "timm", "timm-legacy", ""}) {
    const std::string want_mode = *mode ? mode : "timm";
    std::vector<int64_t> shape;
    const std::vector<float> want = fixture_npy(r["maps"][want_mode].get<std::string>(), &shape);  // (L, H, gh, gw)
    ASSERT_EQ(shape.size(), 4u);
    for (int layer = 0; layer < shape[0]; ++layer) {
      const fs::path out = dir / (std::string(*mode ? mode : "default") + std::to_string(layer));
      const std::string flag = *mode ? std::string(" --pos-interp ") + mode : "";
      const CliRun run = run_attnmap("render " + q(photo) + " -w " + q(weights) + " -o " + q(out) +
                                     " -q --size 322,224 --save-raw --all-heads --layer " + std::to_string(layer) +
                                     flag);
      ASSERT_EQ(run.status, 0) << run.err;
      std::vector<int64_t> s;
      const std::vector<float> got = read_npy((out / "photo_322x224.npy").string(), &s);
      ASSERT_EQ(s, (std::vector<int64_t>{H, gh, gw}));
      const std::vector<float> w(want.begin() + static_cast<long>(static_cast<size_t>(layer) * per_layer),
                                 want.begin() + static_cast<long>(static_cast<size_t>(layer + 1) * per_layer));
      EXPECT_TRUE(all_close(got, w, 1e-5, "render layer " + std::to_string(layer) + " --pos-interp " + want_mode));
      std::cout << "  render --pos-interp " << (*mode ? "" : "(default) ") << want_mode << " layer " << layer << ": max |attnmap - torch| "
                << max_abs_diff(got, w) << "\n";
    }
  }
  // DINO's maps are not timm's: the rule matters on these weights.
  EXPECT_GT(r["max_map_diff_dino_vs_timm"].get<double>(), 1e-3);
}

TEST_F(PosInterpCli, UsageErrors) {
  const std::string base = "render " + q(fixture("posinterp/photo_322x224.png")) + " -o " + q(dir / "o") + " ";
  const std::string dv2 = " -w " + q(fixture("layouts/dinov2_fb/weights.json"));
  const CliRun no_size = run_attnmap(base + "--pos-interp dino");
  EXPECT_EQ(no_size.status, 2);
  EXPECT_NE(no_size.err.find("--pos-interp applies with --size"), std::string::npos) << no_size.err;
  const CliRun bad = run_attnmap(base + "--size 448 --pos-interp bilinear");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--pos-interp expects one of"), std::string::npos) << bad.err;
  const CliRun empty = run_attnmap(base + "--size 448 --pos-interp ''");
  EXPECT_EQ(empty.status, 2);
  EXPECT_FALSE(fs::exists(dir / "o"));
  // eval takes --size and --pos-interp too.
  const CliRun ev = run_attnmap("eval " + q(fixture("posinterp/photo_322x224.png")) + " --masks " + q(dir) + dv2 +
                                " --pos-interp dino");
  EXPECT_EQ(ev.status, 2);
  EXPECT_NE(ev.err.find("--pos-interp applies with --size"), std::string::npos) << ev.err;
}

// eval takes --size and --pos-interp: its JSON records both (the default as the layout implies), and a run without
// --size writes neither key (its JSON is as before).
TEST_F(PosInterpCli, EvalTakesSizeAndRecordsTheRule) {
  fs::create_directories(dir / "img");
  fs::create_directories(dir / "masks");
  fs::copy_file(fixture("posinterp/photo_322x224.png"), dir / "img" / "p.png");
  fs::copy_file(fixture("posinterp/photo_322x224.png"), dir / "masks" / "p.png");  // every pixel non-zero
  const std::string base = "eval " + q(dir / "img") + " --masks " + q(dir / "masks") + " -q -w " +
                           q(fixture("layouts/dinov2_fb/weights.json")) + " ";
  auto json_of = [&](const std::string& args, const std::string& name) {
    const CliRun r = run_attnmap(base + args + " --json " + q(dir / name));
    EXPECT_EQ(r.status, 0) << args << ": " << r.err;
    std::ifstream f(dir / name);
    return nlohmann::json::parse(f);
  };
  const nlohmann::json dino = json_of("--size 322,224 --pos-interp dino", "dino.json");
  EXPECT_EQ(dino["size"], (nlohmann::json{322, 224}));
  EXPECT_EQ(dino["pos_interp"], "dino");
  const nlohmann::json dflt = json_of("--size 322,224", "default.json");
  EXPECT_EQ(dflt["pos_interp"], "timm");  // DINOv2 with registers
  const nlohmann::json none = json_of("", "none.json");
  EXPECT_FALSE(none.contains("size"));
  EXPECT_FALSE(none.contains("pos_interp"));
}
