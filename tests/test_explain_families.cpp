// Class-specific maps through the encoder block variants (issue 44 point 1): rotary positions (EVA-02
// interleaved, DINOv3 rotate-half), SwiGLU (packed fc1 and fc1_g / fc1_x), EVA-02's MLP sub-LayerNorm, q/k
// LayerNorms, q_bias / v_bias, LayerScale. attnmap's dlogit/dA against torch autograd through timm's own model
// (grad_attn.npy of tests/fixtures/families/<case>/, tools/fixture_explain.py), and for the class-token
// classifiers the chefer / gradcam / attn-grad maps against autograd's; the block backward's pieces against
// finite differences of the C++ forward; and the CLI renders --explain chefer for EVA-02 and DINOv3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "io/npy.hpp"
#include "maps/explain.hpp"
#include "model/rope.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

std::string case_dir(const std::string& name) { return fixture("families/" + name) + "/"; }

std::vector<float> npy(const std::string& path) {
  std::vector<int64_t> shape;
  return read_npy(path, &shape);
}

nlohmann::json case_meta(const std::string& name) {
  std::ifstream f(case_dir(name) + "meta.json");
  return nlohmann::json::parse(f);
}

// The fixture's heads_arg (timm_qknorm: no config.json, D = 48), as the family parity tests give it.
ModelOverrides overrides(const std::string& name) {
  ModelOverrides o;
  const auto m = case_meta(name);
  if (m.contains("heads_arg") && !m["heads_arg"].is_null()) o.num_heads = m["heads_arg"].get<int>();
  return o;
}

double peak(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

struct FamilyCase {
  const char* name;
  const char* file;  // the weights file in the case folder
  bool maps;         // class-token classifier: chefer / gradcam / attn-grad references too
};
// The block variants each case crosses: eva02_gelu (EVA-02 rope, q_bias / v_bias, LayerScale, GELU),
// dinov3_small (DINOv3 rope, registers), dinov3_splus_qkvb (DINOv3 rope, SwiGLU fc1_g / fc1_x), eva02_tiny
// (EVA-02 rope scaled to ref_feat_shape, packed SwiGLU), eva02_base (q_proj / k_proj / v_proj, SwiGLU fc1_g /
// fc1_x, mlp.norm), timm_swiglu_packed (SwiGLUPacked, LayerScale), timm_qknorm (q/k LayerNorms, LayerScale).
// The avg-pool cases' heads are issue 44's pooling part (vit_backward.cpp head_backward).
const FamilyCase kFamilies[] = {{"eva02_gelu", "model.pth", true},           {"timm_swiglu_packed", "model.pth", true},
                                {"timm_qknorm", "model.pth", true},          {"dinov3_small", "model.safetensors", false},
                                {"dinov3_splus_qkvb", "model.pth", false},   {"eva02_tiny", "model.safetensors", false},
                                {"eva02_base", "model.pth", false}};

void PrintTo(const FamilyCase& c, std::ostream* os) { *os << c.name; }

// dlogit_c/dx0 (T, D) at three entries of the tokens x0 (first, second and last token) against central
// differences of the tape's forward (step 1e-2).
void expect_input_grad_is_central_difference(const ViTWeights& w, const std::vector<float>& x0,
                                             const std::vector<float>& grad, int c, const std::string& name) {
  const int T = w.hp.tokens(), D = w.hp.dim;
  const float eps = 1e-2f;
  for (const size_t at : {size_t{3}, static_cast<size_t>(D) + 5, static_cast<size_t>(T - 1) * D + 7}) {
    std::vector<float> xp = x0, xm = x0;
    xp[at] += eps;
    xm[at] -= eps;
    const double fd = (vit_forward_tape_tokens(w, xp.data()).logits[c] - vit_forward_tape_tokens(w, xm.data()).logits[c]) /
                      (2.0 * eps);
    EXPECT_NEAR(grad[at], fd, 2e-3 + 1e-2 * std::fabs(fd)) << name << " token entry " << at;
  }
}

class ExplainFamilies : public ::testing::TestWithParam<FamilyCase> {};

}  // namespace

// dlogit_c/dA of every block against timm's autograd (within the fixture's f32/f64 tolerance and 1e-4 of the
// peak), and the three maps within 1e-4 of their peak.
TEST_P(ExplainFamilies, GradientsAndMapsMatchAutogradThroughTheFamilysModel) {
  const FamilyCase fc = GetParam();
  const auto meta = case_meta(fc.name);
  ASSERT_TRUE(meta.contains("explain")) << fc.name;
  const auto& ex = meta["explain"];
  const ViTWeights w = load_model(case_dir(fc.name) + fc.file, overrides(fc.name));
  ASSERT_EQ(explanations_unavailable(w.hp, true), "") << fc.name;
  const std::vector<float> input = npy(case_dir(fc.name) + "input.npy");
  const ForwardTape tape = vit_forward_tape(w, input.data());
  const std::vector<float> logits = npy(case_dir(fc.name) + "logits.npy");
  EXPECT_TRUE(all_close(tape.logits, logits, meta["logits_tolerance"].get<double>(), std::string(fc.name) + " tape logits"));
  const int c = ex["target_class"].get<int>();
  const int L = w.hp.depth, H = w.hp.num_heads, T = w.hp.tokens(), N = w.hp.grid_w * w.hp.grid_h;
  const size_t HTT = static_cast<size_t>(H) * T * T;
  std::vector<float> got(static_cast<size_t>(L) * HTT);
  BackwardOptions bo;
  bo.on_attn_grad = [&](int l, const float*, const float* dA) {
    std::copy(dA, dA + HTT, got.begin() + static_cast<long>(static_cast<size_t>(l) * HTT));
  };
  vit_backward(w, tape, c, bo);
  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy(case_dir(fc.name) + "grad_attn.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{L, H, T, T}));
  const double tol = std::max(ex["tolerance"].get<double>(), 1e-4 * peak(want));
  EXPECT_TRUE(all_close(got, want, tol, std::string(fc.name) + " dlogit/dA"));
  std::printf("%s: dlogit/dA max |diff| %.2e (peak %.2f, tolerance %.1e)\n", fc.name, max_diff(got, want), peak(want), tol);
  if (!fc.maps) return;
  const std::vector<float> chefer = npy(case_dir(fc.name) + "chefer.npy");
  const std::vector<float> gradcam = npy(case_dir(fc.name) + "gradcam.npy");
  const std::vector<float> attn_grad = npy(case_dir(fc.name) + "attn_grad.npy");
  ExplainRequest req;
  req.method = ViewKind::Chefer;
  const std::vector<float> ch = explain_map(w, tape, c, req);
  EXPECT_TRUE(all_close(ch, chefer, 1e-4 * peak(chefer), std::string(fc.name) + " chefer"));
  double worst[2] = {0, 0};
  for (int l = 0; l < L; ++l) {
    const auto at = [&](const std::vector<float>& v) {
      return std::vector<float>(v.begin() + static_cast<long>(l) * N, v.begin() + static_cast<long>(l + 1) * N);
    };
    req.layer = l;
    req.method = ViewKind::GradCam;
    const std::vector<float> gc = explain_map(w, tape, c, req);
    EXPECT_TRUE(all_close(gc, at(gradcam), 1e-4 * peak(gradcam), std::string(fc.name) + " gradcam " + std::to_string(l)));
    worst[0] = std::max(worst[0], max_diff(gc, at(gradcam)));
    req.method = ViewKind::AttnGrad;
    const std::vector<float> ag = explain_map(w, tape, c, req);
    EXPECT_TRUE(all_close(ag, at(attn_grad), 1e-4 * peak(attn_grad), std::string(fc.name) + " attn-grad " + std::to_string(l)));
    worst[1] = std::max(worst[1], max_diff(ag, at(attn_grad)));
  }
  std::printf("%s: chefer %.2e (peak %.3f), gradcam %.2e (peak %.3f), attn-grad %.2e (peak %.3f)\n", fc.name,
              max_diff(ch, chefer), peak(chefer), worst[0], peak(gradcam), worst[1], peak(attn_grad));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ExplainFamilies, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<FamilyCase>& p) { return std::string(p.param.name); });

// rope_backward is the transpose of rope_forward (both layouts): <R x, y> = <x, R^T y> for random x, y.
TEST(ExplainBlocks, RopeBackwardIsTheTransposeRotation) {
  for (const char* name : {"eva02_gelu", "dinov3_small"}) {
    const ViTWeights w = load_model(case_dir(name) + (std::string(name) == "dinov3_small" ? "model.safetensors" : "model.pth"));
    const HParams& hp = w.hp;
    const int T = hp.tokens(), inner = hp.inner();
    const RopeTables tab = rope_tables(hp, hp.grid_h, hp.grid_w);
    std::vector<float> x(static_cast<size_t>(T) * 3 * inner), y(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
      y[i] = std::cos(0.53f * static_cast<float>(i) - 0.2f);
    }
    std::vector<float> rx = x, ry = y;
    rope_forward(rx.data(), tab, hp, T, nullptr);
    rope_backward(ry.data(), tab, hp, T, nullptr);
    double a = 0, b = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      a += static_cast<double>(rx[i]) * y[i];
      b += static_cast<double>(x[i]) * ry[i];
    }
    EXPECT_NEAR(a, b, 1e-4 * std::max(1.0, std::fabs(a))) << name;
  }
}

// dlogit/dx0 (every block's backward below the attention: rope, q/k norms, SwiGLU, mlp.norm, LN1) against
// central differences of the C++ forward on the tokens entering block 0.
TEST(ExplainBlocks, InputGradientsMatchFiniteDifferences) {
  for (const char* name : {"eva02_base", "timm_qknorm", "dinov3_splus_qkvb"}) {
    const ViTWeights w = load_model(case_dir(name) + "model.pth", overrides(name));
    const std::vector<float> input = npy(case_dir(name) + "input.npy");
    const int T = w.hp.tokens(), D = w.hp.dim;
    std::vector<float> x0(static_cast<size_t>(T) * D);
    embed_tokens(x0.data(), w, input.data());
    const ForwardTape tape = vit_forward_tape_tokens(w, x0.data());
    const int c = 1;
    BackwardOptions bo;
    bo.input_grad = true;
    const BackwardResult br = vit_backward(w, tape, c, bo);
    expect_input_grad_is_central_difference(w, x0, br.x0_grad, c, name);
  }
}

// GELU-tanh (timm / SigLIP GELUTanh) and no attention output projection (vit-pytorch without to_out), which no
// class-token family fixture has: eva02_gelu's weights made so in memory (inner == D). The tape's forward gives
// vit_forward's logits and probabilities, and dlogit/dx0 and dlogit/dA match central differences.
TEST(ExplainBlocks, GeluTanhAndNoProjectionMatchFiniteDifferences) {
  ViTWeights w = load_model(case_dir("eva02_gelu") + "model.pth");
  w.hp.act = Activation::GeluTanh;
  w.hp.attn_proj = false;
  for (BlockWeights& b : w.blocks) b.proj = LinearW{};
  ASSERT_EQ(explanations_unavailable(w.hp, true), "");
  const std::vector<float> input = npy(case_dir("eva02_gelu") + "input.npy");
  const int T = w.hp.tokens(), D = w.hp.dim, H = w.hp.num_heads;
  std::vector<float> x0(static_cast<size_t>(T) * D);
  embed_tokens(x0.data(), w, input.data());
  const ForwardTape tape = vit_forward_tape_tokens(w, x0.data());
  ForwardOptions fo;
  fo.to_end = true;
  fo.keep_full = true;
  const ForwardResult fr = vit_forward(w, input.data(), fo);
  EXPECT_TRUE(all_close(tape.logits, fr.logits, 1e-5, "tape vs vit_forward logits"));
  EXPECT_TRUE(all_close(tape.blocks.back().probs,
                        std::vector<float>(fr.attn.end() - static_cast<long>(H) * T * T, fr.attn.end()), 1e-6, "probs"));
  const int c = 2;
  std::vector<std::vector<float>> dp(static_cast<size_t>(w.hp.depth));
  BackwardOptions bo;
  bo.input_grad = true;
  bo.on_attn_grad = [&](int l, const float*, const float* d) { dp[static_cast<size_t>(l)].assign(d, d + static_cast<size_t>(H) * T * T); };
  const BackwardResult br = vit_backward(w, tape, c, bo);
  expect_input_grad_is_central_difference(w, x0, br.x0_grad, c, "gelu-tanh, no proj");
  const float eps = 1e-2f;
  for (int l = 0; l < w.hp.depth; ++l)
    for (const size_t at : {size_t{1}, static_cast<size_t>(T) + 4}) {
      auto run = [&](float delta) {
        TapeOptions to;
        to.edit_probs = [&](int layer, float* p) {
          if (layer == l) p[at] += delta;
        };
        return static_cast<double>(vit_forward_tape_tokens(w, x0.data(), to).logits[c]);
      };
      const double fd = (run(eps) - run(-eps)) / (2.0 * eps);
      EXPECT_NEAR(dp[static_cast<size_t>(l)][at], fd, 1e-3 + 1e-2 * std::fabs(fd)) << "layer " << l << " entry " << at;
    }
}

// From the CLI: --explain chefer renders for EVA-02 (class-token head) and DINOv3, where it was refused.
TEST(ExplainBlocks, CliRendersCheferForRopeModels) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_explain_blocks_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string img = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  for (const char* wt : {"eva02_gelu/model.pth", "dinov3_small/model.safetensors"}) {
    const CliRun ex = run_attnmap("render " + img + " -w " + q(fixture("families/") + wt) + " -o " + q(out) +
                                  " --explain chefer -q");
    EXPECT_EQ(ex.status, 0) << wt << ": " << ex.err;
  }
  fs::remove_all(out);
}
