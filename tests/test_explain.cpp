// Explanation maps (issue 19): the native backward pass against PyTorch autograd (tests/fixtures/explain/,
// made by tools/make_explain_fixtures.py) for every layout with a classifier head, in JSON and safetensors
// F32 / F16 / BF16; finite differences of the C++ forward as a check independent of the fixture script;
// --class parsing and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/provenance.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "maps/explain.hpp"
#include "model/classify.hpp"
#include "model/preprocess.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

struct Case {
  const char* name;
  const char* weights;  // folder under fixtures/ holding the weights files
  const char* input;    // folder holding input.npy
  const char* refs;     // folder holding the autograd references
};
// hf and torchvision hold timm's values under their own names (checked by the fixture script): timm's
// references are theirs.
const Case kCases[] = {{"timm", "layouts/timm", "layouts/timm", "explain/timm"},
                       {"hf", "layouts/hf", "layouts/timm", "explain/timm"},
                       {"torchvision", "layouts/torchvision", "layouts/timm", "explain/timm"},
                       {"deit_distilled", "layouts/deit_distilled", "layouts/deit_distilled", "explain/deit_distilled"},
                       {"dinov2_fb", "explain/dinov2_fb", "layouts/dinov2_fb", "explain/dinov2_fb"},
                       {"timm_reg_full", "explain/timm_reg_full", "layouts/timm_reg_full", "explain/timm_reg_full"}};

struct Format {
  const char* file;
  const char* suffix;  // of the reference computed from exactly the values in `file`
};
const Format kFormats[] = {{"weights.json", ""},
                           {"weights.safetensors", ""},
                           {"weights.f16.safetensors", "_f16"},
                           {"weights.bf16.safetensors", "_bf16"}};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
void PrintTo(const Format& f, std::ostream* os) { *os << f.file; }

std::vector<float> npy(const std::string& path, std::vector<int64_t>* shape = nullptr) {
  std::vector<int64_t> s;
  std::vector<float> v = read_npy(path, &s);
  if (shape) *shape = s;
  return v;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

std::vector<float> slice(const std::vector<float>& v, size_t i, size_t n) {
  return std::vector<float>(v.begin() + static_cast<long>(i * n), v.begin() + static_cast<long>((i + 1) * n));
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// The tolerance: 1e-5 absolute, relative to the reference's scale where it exceeds 1 (gradients can).
double tol_for(const std::vector<float>& ref) { return 1e-5 * std::max(1.0, max_abs(ref)); }

using ExplainCase = std::tuple<Case, Format>;
class ExplainParity : public ::testing::TestWithParam<ExplainCase> {};

TEST_P(ExplainParity, GradientsAndMapsMatchAutograd) {
  const Case c = std::get<0>(GetParam());
  const Format f = std::get<1>(GetParam());
  const std::string refs = fixture(c.refs) + "/", sfx = f.suffix;
  const ViTWeights w = load_model(fixture(c.weights) + "/" + f.file);
  std::ifstream mf(refs + "meta.json");
  const auto meta = nlohmann::json::parse(mf);
  const std::vector<int> classes = meta["classes"].get<std::vector<int>>();
  const std::vector<float> input = npy(fixture(c.input) + "/input.npy");
  const ForwardTape tape = vit_forward_tape(w, input.data());

  const std::vector<float> logits = npy(refs + "logits" + sfx + ".npy");
  EXPECT_TRUE(all_close(tape.logits, logits, tol_for(logits), std::string(c.name) + " logits"));
  // The tape's forward is vit_forward's: the same logits and probabilities.
  ForwardOptions fo;
  fo.to_end = true;
  fo.keep_full = true;
  const ForwardResult fr = vit_forward(w, input.data(), fo);
  EXPECT_TRUE(all_close(tape.logits, fr.logits, 0, "tape vs vit_forward logits"));
  const int L = w.hp.depth, H = w.hp.num_heads, T = w.hp.tokens(), N = w.hp.grid_w * w.hp.grid_h;
  const size_t HTT = static_cast<size_t>(H) * T * T;
  for (int l = 0; l < L; ++l)
    EXPECT_TRUE(all_close(tape.blocks[static_cast<size_t>(l)].probs, slice(fr.attn, static_cast<size_t>(l), HTT), 0,
                          "tape vs vit_forward probabilities"));

  std::vector<int64_t> shape;
  const std::vector<float> grad_attn = npy(refs + "grad_attn" + sfx + ".npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{2, L, H, T, T}));
  const std::vector<float> chefer = npy(refs + "chefer" + sfx + ".npy");
  const std::vector<float> gradcam = npy(refs + "gradcam" + sfx + ".npy");
  const std::vector<float> attn_grad = npy(refs + "attn_grad" + sfx + ".npy");
  double worst[4] = {0, 0, 0, 0};  // dA, chefer, gradcam, attn-grad: printed for the record
  for (size_t k = 0; k < classes.size(); ++k) {
    const std::string what = std::string(c.name) + "/" + f.file + " class " + std::to_string(classes[k]);
    std::vector<float> got(static_cast<size_t>(L) * HTT);
    BackwardOptions bo;
    bo.on_attn_grad = [&](int l, const float*, const float* dp) {
      std::copy(dp, dp + HTT, got.begin() + static_cast<long>(static_cast<size_t>(l) * HTT));
    };
    vit_backward(w, tape, classes[k], bo);
    const std::vector<float> want = slice(grad_attn, k, static_cast<size_t>(L) * HTT);
    EXPECT_TRUE(all_close(got, want, tol_for(want), what + " dlogit/dA"));
    worst[0] = std::max(worst[0], max_diff(got, want));

    ExplainRequest req;
    req.method = ViewKind::Chefer;
    const std::vector<float> ch = explain_map(w, tape, classes[k], req), ch_want = slice(chefer, k, static_cast<size_t>(N));
    EXPECT_TRUE(all_close(ch, ch_want, 1e-5, what + " chefer"));
    worst[1] = std::max(worst[1], max_diff(ch, ch_want));
    for (int l = 0; l < L; ++l) {
      const size_t at = k * static_cast<size_t>(L) + static_cast<size_t>(l);
      req.method = ViewKind::GradCam;
      req.layer = l;
      const std::vector<float> gc = explain_map(w, tape, classes[k], req), gc_want = slice(gradcam, at, static_cast<size_t>(N));
      EXPECT_TRUE(all_close(gc, gc_want, 1e-5, what + " gradcam layer " + std::to_string(l)));
      worst[2] = std::max(worst[2], max_diff(gc, gc_want));
      req.method = ViewKind::AttnGrad;
      req.layer = l;
      const std::vector<float> ag = explain_map(w, tape, classes[k], req), ag_want = slice(attn_grad, at, static_cast<size_t>(N));
      EXPECT_TRUE(all_close(ag, ag_want, 1e-5, what + " attn-grad layer " + std::to_string(l)));
      worst[3] = std::max(worst[3], max_diff(ag, ag_want));
    }
  }
  std::printf("%s/%s max |diff|: dA %.2e (scale %.2f), chefer %.2e, gradcam %.2e, attn-grad %.2e\n", c.name, f.file,
              worst[0], max_abs(grad_attn), worst[1], worst[2], worst[3]);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ExplainParity, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::ValuesIn(kFormats)),
                         [](const ::testing::TestParamInfo<ExplainCase>& p) {
                           std::string f = std::get<1>(p.param).file;
                           for (char& ch : f)
                             if (ch == '.') ch = '_';
                           return std::string(std::get<0>(p.param).name) + "_" + f;
                         });

// ---- finite differences: the backward against the C++ forward itself ------------------------------------

double logit_of(const ViTWeights& w, const float* x0, int c, const TapeOptions& to) {
  return vit_forward_tape_tokens(w, x0, to).logits[static_cast<size_t>(c)];
}

TEST(ExplainBackward, AttentionGradientsMatchFiniteDifferences) {
  // LayerScale, registers, and a second block below the perturbed one: every backward step is crossed.
  const ViTWeights w = load_model(fixture("explain/dinov2_fb/weights.json"));
  const std::vector<float> input = npy(fixture("layouts/dinov2_fb/input.npy"));
  const int T = w.hp.tokens(), H = w.hp.num_heads, D = w.hp.dim;
  std::vector<float> x0(static_cast<size_t>(T) * D);
  embed_tokens(x0.data(), w, input.data());
  const ForwardTape tape = vit_forward_tape_tokens(w, x0.data());
  const int c = 3;
  std::vector<std::vector<float>> dp(static_cast<size_t>(w.hp.depth));
  BackwardOptions bo;
  bo.input_grad = true;
  bo.on_attn_grad = [&](int l, const float*, const float* d) { dp[static_cast<size_t>(l)].assign(d, d + static_cast<size_t>(H) * T * T); };
  const BackwardResult br = vit_backward(w, tape, c, bo);
  const float eps = 1e-2f;
  int checked = 0;
  for (int l = 0; l < w.hp.depth; ++l)
    for (const size_t at : {size_t{0}, size_t{5}, static_cast<size_t>(T) + 3, static_cast<size_t>(T) * T + 7,
                            static_cast<size_t>(2) * T * T + static_cast<size_t>(T) * 4 + 9}) {
      auto run = [&](float delta) {
        TapeOptions to;
        to.edit_probs = [&](int layer, float* p) {
          if (layer == l) p[at] += delta;
        };
        return logit_of(w, x0.data(), c, to);
      };
      const double fd = (run(eps) - run(-eps)) / (2.0 * eps);
      const double g = dp[static_cast<size_t>(l)][at];
      EXPECT_NEAR(g, fd, 1e-3 + 1e-2 * std::fabs(fd)) << "layer " << l << " entry " << at;
      ++checked;
    }
  EXPECT_EQ(checked, 10);
  // dlogit/dx0 (through both blocks, LN1 and the qkv product included) against perturbed tokens.
  for (const size_t at : {size_t{0}, static_cast<size_t>(D) + 1, static_cast<size_t>(7) * D + 13, static_cast<size_t>(T - 1) * D + 23}) {
    std::vector<float> xp = x0, xm = x0;
    xp[at] += eps;
    xm[at] -= eps;
    const double fd = (logit_of(w, xp.data(), c, {}) - logit_of(w, xm.data(), c, {})) / (2.0 * eps);
    EXPECT_NEAR(br.x0_grad[at], fd, 1e-3 + 1e-2 * std::fabs(fd)) << "token entry " << at;
  }
}

TEST(ExplainBackward, ChefersRowEqualsTheFullMatrixProduct) {
  // explain_map keeps R's class row only; the paper's T x T recursion gives the same row.
  const ViTWeights w = load_model(fixture("layouts/deit_distilled/weights.json"));
  const std::vector<float> input = npy(fixture("layouts/deit_distilled/input.npy"));
  const ForwardTape tape = vit_forward_tape(w, input.data());
  const int T = w.hp.tokens(), H = w.hp.num_heads;
  std::vector<std::vector<float>> abar(static_cast<size_t>(w.hp.depth));
  BackwardOptions bo;
  bo.on_attn_grad = [&](int l, const float* p, const float* d) { abar[static_cast<size_t>(l)] = chefer_block_matrix(p, d, H, T); };
  vit_backward(w, tape, 1, bo);
  std::vector<double> R(static_cast<size_t>(T) * T, 0.0), next(R.size());
  for (int i = 0; i < T; ++i) R[static_cast<size_t>(i) * T + i] = 1.0;
  for (const auto& a : abar) {  // R <- R + Abar R, first block to last
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j) {
        double s = R[static_cast<size_t>(i) * T + j];
        for (int k = 0; k < T; ++k) s += a[static_cast<size_t>(i) * T + k] * R[static_cast<size_t>(k) * T + j];
        next[static_cast<size_t>(i) * T + j] = s;
      }
    R.swap(next);
  }
  std::vector<float> want(R.begin() + w.hp.num_prefix, R.begin() + T);
  ExplainRequest req;
  EXPECT_TRUE(all_close(explain_map(w, tape, 1, req), want, 1e-6, "row vs matrix"));
}

// ---- classes and refusals -------------------------------------------------------------------------------

TEST(ExplainClasses, ParseResolveAndRefuse) {
  const std::vector<std::string> labels = {"coat", "T-shirt/top", "bag"};
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f};
  EXPECT_EQ(resolve_classes(parse_class_spec("top1"), logits, labels), std::vector<int>{1});
  EXPECT_EQ(resolve_classes(parse_class_spec("top3"), logits, labels), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(resolve_classes(parse_class_spec("2"), logits, labels), std::vector<int>{2});
  EXPECT_EQ(resolve_classes(parse_class_spec("coat"), logits, labels), std::vector<int>{0});
  EXPECT_EQ(class_file_label(1, labels), "T-shirt_top");
  EXPECT_EQ(class_file_label(2, {}), "2");
  auto err = [&](const std::string& spec, const std::vector<std::string>& l) {
    try {
      check_class_spec(parse_class_spec(spec), 3, l);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // The stage names no option (the options layer puts --class in front).
  EXPECT_EQ(err("hat", labels), "'hat' is not one of the labels: coat, T-shirt/top, bag");
  EXPECT_NE(err("hat", {}).find("no class labels"), std::string::npos);
  EXPECT_NE(err("3", labels).find("out of range: 0..2"), std::string::npos);
  EXPECT_NE(err("top4", labels).find("more classes than there are"), std::string::npos);
  EXPECT_THROW(parse_class_spec("top0"), Error);
  EXPECT_THROW(parse_class_spec("topx"), Error);
  EXPECT_THROW(parse_class_spec(""), Error);
}

TEST(ExplainBackward, HeadlessModelIsRefused) {
  const ViTWeights w = load_model(fixture("layouts/hf_model/weights.json"));
  const std::vector<float> input = npy(fixture("layouts/hf_model/input.npy"));
  try {
    vit_forward_tape(w, input.data());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "class-specific views (chefer, gradcam, attn-grad) are not available: the model has "
                                     "no classifier head, so there is no class to explain");
  }
}

// ---- attnmap render --explain ---------------------------------------------------------------------------

class ExplainCli : public TempDirTest {};

// One image's taped pass, as render computes it (squash to the model's size).
ForwardTape taped_pass(const ViTWeights& w, const std::string& img) {
  const Image photo = load_image(img, LoadOptions{});
  const ModelInput in = preprocess(photo, w.hp.image_w, w.hp.image_h, ResizeMode::Squash, w.hp.mean.data(), w.hp.std.data());
  return vit_forward_tape(w, in.chw.data());
}

TEST_F(ExplainCli, TopKWritesOneMapPerClassAsTheLibraryComputesIt) {
  const std::string weights = fixture("explain/dinov2_fb/weights.json");
  const std::string img = std::string(ATTNMAP_TEST_DIR) + "/images/basic/rgba.png";
  const CliRun r = run_attnmap("render " + q(img) + " -q --save-raw --explain gradcam --gradcam-layer 0 --class top2 -w " +
                               q(weights) + " -o " + q(dir));
  ASSERT_EQ(r.status, 0) << r.err;
  const ViTWeights w = load_model(weights);
  const ForwardTape tape = taped_pass(w, img);
  ExplainRequest req;
  req.method = ViewKind::GradCam;
  req.layer = 0;
  const std::vector<int> top = top_k_indices(tape.logits, 2);
  for (const int c : top) {
    const std::string base = (dir / ("rgba.class-" + class_file_label(c, w.hp.labels))).string();
    EXPECT_TRUE(std::filesystem::exists(base + ".png")) << base;
    std::vector<int64_t> shape;
    const std::vector<float> got = npy(base + ".npy", &shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{3, 3}));
    EXPECT_TRUE(all_close(got, explain_map(w, tape, c, req), 0, base));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "rgba.png"));  // topK names every map by its class
  // One class: NAME.png / NAME.npy, the label's map.
  const CliRun one = run_attnmap("render " + q(img) + " -q --save-raw --explain chefer --class T-shirt/top -w " + q(weights) +
                                 " -o " + q(dir));
  ASSERT_EQ(one.status, 0) << one.err;
  req.method = ViewKind::Chefer;
  EXPECT_TRUE(all_close(npy((dir / "rgba.npy").string()), explain_map(w, tape, 1, req), 0, "chefer T-shirt/top"));
  // A per-class name that holds a user's file is left alone: that image fails (exit 1), nothing replaced.
  const std::string users = (dir / ("rgba.class-" + class_file_label(top[1], w.hp.labels) + ".png")).string();
  std::ofstream(users) << "mine";
  const CliRun again = run_attnmap("render " + q(img) + " -q --explain chefer --class top2 -w " + q(weights) + " -o " + q(dir));
  EXPECT_EQ(again.status, 1) << again.err;
  EXPECT_NE(again.err.find("was not written by attnmap"), std::string::npos) << again.err;
  EXPECT_EQ(slurp(users), "mine");
}

// Explanation outputs carry the settings record as the other outputs do: PNG tEXt `attnmap` (inspect prints
// it, with the view named as eval names it and the class asked), the image's statistics with the class each
// map explains, the .npy's sidecar; the manifest row has the first map's statistics; the terminal names every
// class and file; a second run with the same settings skips the image, another method redoes it.
TEST_F(ExplainCli, OutputsCarryTheSettingsRecordAndTheLineNamesEveryMap) {
  const std::string weights = fixture("explain/dinov2_fb/weights.json");
  const std::string img = std::string(ATTNMAP_TEST_DIR) + "/images/basic/rgba.png";
  const std::string man = (dir / "m.jsonl").string();
  const CliRun r = run_attnmap("render " + q(img) + " --save-raw --explain gradcam --gradcam-layer 0 --class top2 -w " +
                               q(weights) + " -o " + q(dir) + " --manifest " + q(man));
  ASSERT_EQ(r.status, 0) << r.err;
  const ViTWeights w = load_model(weights);
  const ForwardTape tape = taped_pass(w, img);
  const std::vector<int> top = top_k_indices(tape.logits, 2);
  const std::vector<double> p = class_probabilities(tape.logits);
  std::string want = img + " -> gradcam maps of the top 2 classes:\n";
  for (const int c : top) {
    char pc[16];
    std::snprintf(pc, sizeof pc, " %.1f%%", 100.0 * p[static_cast<size_t>(c)]);
    want += "  " + w.hp.labels[static_cast<size_t>(c)] + pc + " -> " +
            (dir / ("rgba.class-" + class_file_label(c, w.hp.labels) + ".png")).string() + "\n";
  }
  EXPECT_NE(r.out.find(want), std::string::npos) << r.out << "\nwanted:\n" << want;
  ExplainRequest req;
  req.method = ViewKind::GradCam;
  req.layer = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    const std::string base = (dir / ("rgba.class-" + class_file_label(top[i], w.hp.labels))).string();
    const CliRun ins = run_attnmap("inspect " + q(base + ".png"));
    ASSERT_EQ(ins.status, 0) << ins.err;
    for (const char* line : {"\n  view             gradcam\n", "\n  explain          gradcam\n", "\n  class            top2\n",
                             "\n  gradcam_layer    0\n", "\n  layout           dinov2\n"})
      EXPECT_NE(ins.out.find(line), std::string::npos) << line << ins.out;
    const std::string cls = "\"explained_class\":{\"index\":" + std::to_string(top[i]) + ",\"label\":\"" +
                            w.hp.labels[static_cast<size_t>(top[i])] + "\"";
    EXPECT_NE(ins.out.find(cls), std::string::npos) << cls << "\n" << ins.out;
    const std::optional<ImageStats> st = read_png_stats(base + ".png");
    ASSERT_TRUE(st);
    const std::vector<float> map = explain_map(w, tape, top[i], req);
    EXPECT_EQ(st->stats.max, *std::max_element(map.begin(), map.end()));
    const CliRun npy_ins = run_attnmap("inspect " + q(base + ".npy"));
    EXPECT_EQ(npy_ins.status, 0) << npy_ins.err;
    EXPECT_NE(npy_ins.out.find("\n  view             gradcam\n"), std::string::npos) << npy_ins.out;
    if (i == 0) {  // the manifest row: the most probable class's map
      const std::string rows = slurp(man);
      const nlohmann::json row = nlohmann::json::parse(rows.substr(rows.find('\n') + 1));
      EXPECT_EQ(row["map_max"].get<float>(), *std::max_element(map.begin(), map.end())) << rows;
      EXPECT_EQ(row["outputs"].size(), 4u) << rows;
    }
  }
  // One class: NAME.png with the record; the same settings again: skipped; another method: redone.
  const std::string one = "render " + q(img) + " --explain attn-grad --layer 0 --class 2 -w " + q(weights) + " -o " + q(dir);
  const CliRun a = run_attnmap(one);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_NE(a.out.find(img + " -> " + (dir / "rgba.png").string() + " (attn-grad, class " + w.hp.labels[2]), std::string::npos)
      << a.out;
  const std::optional<nlohmann::json> rec = read_png_provenance((dir / "rgba.png").string());
  ASSERT_TRUE(rec);
  EXPECT_EQ((*rec)["view"], "attn-grad");
  EXPECT_EQ((*rec)["attn_grad_layer"], 0);
  EXPECT_EQ((*rec)["class"], "2");
  const CliRun skip = run_attnmap(one + " --skip-existing");
  EXPECT_EQ(skip.status, 0) << skip.err;
  EXPECT_NE(skip.err.find("0 done, 0 failed, 1 skipped"), std::string::npos) << skip.err;
  const CliRun redo = run_attnmap("render " + q(img) + " --explain chefer --class 2 -w " + q(weights) + " -o " + q(dir) +
                                  " --skip-existing");
  EXPECT_NE(redo.err.find("1 done (1 redone: settings changed)"), std::string::npos) << redo.err;
}

TEST_F(ExplainCli, RefusalsAreOneLineAndStatus2) {
  const std::string img = std::string(ATTNMAP_TEST_DIR) + "/images/basic/rgba.png";
  const std::string dino = fixture("explain/dinov2_fb/weights.json");
  struct R {
    std::string args, want;
  };
  const R cases[] = {
      {"--explain chefer -w " + q(fixture("layouts/hf_model/weights.json")),
       "attnmap: error: --explain chefer: the model has no classifier head, so there is no class to explain"},
      {"--explain chefer --class hat -w " + q(dino),
       "attnmap: error: --class 'hat' is not one of the labels: coat, T-shirt/top, bag, sandal, dress"},
      {"--explain gradcam --class top6 -w " + q(dino), "asks for more classes than there are (the classifier has 5"},
      {"--explain gradcam --class 5 -w " + q(dino), "--class 5 out of range: 0..4"},
      {"--explain attn-grad --gradcam-layer 0 -w " + q(dino), "--gradcam-layer applies to the gradcam view without @L<layer> only"},
      {"--explain gradcam --gradcam-layer 2 -w " + q(dino), "layer 2 out of range"},
      {"--explain chefer --rollout -w " + q(dino), "cannot be combined with --rollout"},
      {"--class 1 -w " + q(dino), "--class chooses the class of a class-specific view: add --explain"},
      {"--explain shap -w " + q(dino), "--explain expects chefer, gradcam or attn-grad, found 'shap'"}};
  for (const R& c : cases) {
    const CliRun r = run_attnmap("render " + q(img) + " -q " + c.args + " -o " + q(dir));
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.want), std::string::npos) << c.args << ": " << r.err;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

}  // namespace

// Issue 25: --explain is a view like any other, so every figure option draws with it (it used to write the
// overlay alone, exit 0, with --panel / --strip layers / PDF, and refuse --strip heads), with the same files
// and layout as the attention view's, and the NAME.png beside them is the explanation's.
TEST_F(ExplainCli, PanelStripsAndPdfDrawWithAnExplanation) {
  const std::string weights = fixture("explain/dinov2_fb/weights.json");
  const std::string img = std::string(ATTNMAP_TEST_DIR) + "/images/basic/rgba.png";
  const std::string figs = " --panel --strip layers --strip heads --figure-format png,pdf";
  for (const char* method : {"chefer", "gradcam", "attn-grad"}) {
    const std::filesystem::path out = dir / method;
    const CliRun r = run_attnmap("render " + q(img) + " -q --save-raw --explain " + method + figs + " -w " + q(weights) +
                                 " -o " + q(out));
    ASSERT_EQ(r.status, 0) << method << ": " << r.err;
    for (const char* f : {"rgba.png", "rgba.npy", "rgba.panel.png", "rgba.panel.pdf", "rgba.layers.png",
                          "rgba.layers.pdf", "rgba.heads.png", "rgba.heads.pdf"})
      EXPECT_TRUE(std::filesystem::exists(out / f)) << method << ": " << f;
  }
  // The same figures of the attention view: one panel row each, so the same size; the strips are the same
  // attention maps (the explanation changes NAME.png and the panel's row, not the strips).
  const std::filesystem::path att = dir / "attention";
  ASSERT_EQ(run_attnmap("render " + q(img) + " -q" + figs + " -w " + q(weights) + " -o " + q(att)).status, 0);
  const Image a = load_image((att / "rgba.panel.png").string(), LoadOptions{});
  const Image c = load_image((dir / "chefer" / "rgba.panel.png").string(), LoadOptions{});
  EXPECT_EQ(a.height, c.height);
  EXPECT_NEAR(a.width, c.width, 40);  // the colour bars' tick labels differ in width
  const Image la = load_image((att / "rgba.layers.png").string(), LoadOptions{});
  const Image lc = load_image((dir / "chefer" / "rgba.layers.png").string(), LoadOptions{});
  ASSERT_EQ(la.width, lc.width);
  ASSERT_EQ(la.height, lc.height);
  // The explanation's NAME.npy is the library's map for the top-1 class.
  const ViTWeights w = load_model(weights);
  const ForwardTape tape = taped_pass(w, img);
  ExplainRequest req;
  req.method = ViewKind::Chefer;
  const std::vector<float> want = explain_map(w, tape, top_k_indices(tape.logits, 1)[0], req);
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy((dir / "chefer" / "rgba.npy").string(), &shape), want);
}
