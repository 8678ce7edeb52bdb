// Issue 44: the class-specific views of classifiers that read no class-token row (timm global_pool='avg' with
// and without fc_norm, vit-pytorch pool='mean', SigLIP's attention-pool head, with a head or with texts), against
// torch autograd through the family's own model (tools/make_explain_pool_fixtures.py: grad_attn.npy,
// probe_grad.npy, explain_maps.npy, explain.json).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "checkpoint/weights.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "model/vit.hpp"
#include "maps/explain.hpp"
#include "model/vit_backward.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

std::string case_dir(const std::string& c) { return fixture("families/" + c) + "/"; }

// Largest |got - want| over `want`'s peak |want|.
double relative_to_peak(const std::vector<float>& got, const float* want, size_t n) {
  double peak = 0, err = 0;
  for (size_t i = 0; i < n; ++i) {
    peak = std::max(peak, std::fabs(static_cast<double>(want[i])));
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return err / std::max(peak, 1e-30);
}

// dlogit/dA of every block (and dlogit/dA_p of the MAP probe) and the chefer / attn-grad / gradcam maps of every
// block within 1e-4 of the reference's peak (folder's explain.json and its files), for model w on input.
void check_against(const std::string& folder, const std::string& c, const ViTWeights& w, const std::vector<float>& input,
                   ExplainQuery query) {
  std::ifstream jf(folder + "explain.json");
  const nlohmann::json info = nlohmann::json::parse(jf);
  ASSERT_EQ(explain_query(w.hp), query);
  ASSERT_EQ(explanations_unavailable(w.hp, true), "");
  std::vector<int64_t> shape;
  const ForwardTape tape = vit_forward_tape(w, input.data());
  const int target = info["target_class"].get<int>();
  const int L = w.hp.depth, H = w.hp.num_heads, T = w.hp.tokens(), N = w.hp.grid_w * w.hp.grid_h;
  const size_t HTT = static_cast<size_t>(H) * T * T;
  std::vector<float> grads(static_cast<size_t>(L) * HTT), probe_grad;
  BackwardOptions bo;
  bo.on_attn_grad = [&](int l, const float*, const float* dA) { std::copy(dA, dA + HTT, grads.begin() + l * HTT); };
  bo.on_probe_grad = [&](const float*, const float* dAp) { probe_grad.assign(dAp, dAp + static_cast<size_t>(H) * T); };
  vit_backward(w, tape, target, bo);
  const std::vector<float> want = read_npy(folder + "grad_attn.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{L, H, T, T}));
  const double eg = relative_to_peak(grads, want.data(), want.size());
  EXPECT_LT(eg, 1e-4) << c << " dlogit/dA";
  double ep = 0;
  if (query == ExplainQuery::Probe) {
    const std::vector<float> pw = read_npy(folder + "probe_grad.npy", &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{H, T}));
    ASSERT_EQ(probe_grad.size(), pw.size());
    ep = relative_to_peak(probe_grad, pw.data(), pw.size());
    EXPECT_LT(ep, 1e-4) << c << " dlogit/dA_p";
  }
  const std::vector<float> maps = read_npy(folder + "explain_maps.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{1 + 2 * L, N}));
  double worst = 0;
  for (int row = 0; row < 1 + 2 * L; ++row) {
    ExplainRequest req;
    req.method = row == 0 ? ViewKind::Chefer : row <= L ? ViewKind::AttnGrad : ViewKind::GradCam;
    req.layer = row == 0 ? 0 : (row - 1) % L;
    const std::vector<float> got = explain_map(w, tape, target, req);
    ASSERT_EQ(got.size(), static_cast<size_t>(N));
    const double e = relative_to_peak(got, maps.data() + static_cast<size_t>(row) * N, static_cast<size_t>(N));
    EXPECT_LT(e, 1e-4) << c << " " << info["maps"]["rows"][static_cast<size_t>(row)].get<std::string>();
    worst = std::max(worst, e);
  }
  std::printf("%s: dA %.1e, dA_p %.1e, maps %.1e of the peak (vs the family's autograd)\n", c.c_str(), eg, ep, worst);
}

void check_case(const std::string& c, ExplainQuery query, int heads = 0) {
  std::vector<int64_t> shape;
  ModelOverrides ov;
  if (heads > 0) ov.num_heads = heads;  // vit-pytorch: the head count is not in the state dict (meta heads_arg)
  check_against(case_dir(c), c, load_model(case_dir(c) + "model.pth", ov), read_npy(case_dir(c) + "input.npy", &shape),
                query);
}

}  // namespace

TEST(ExplainPools, MeanPatchesMatchAutogradThroughTimm) { check_case("timm_gap", ExplainQuery::PatchMean); }

TEST(ExplainPools, MeanPatchesWithRegistersAndFcNormMatchAutogradThroughTimm) {
  check_case("timm_gap_reg", ExplainQuery::PatchMean);
}

// vit-pytorch's pool='mean' builds no class token at this commit: the mean of every token is the mean of the
// patch tokens (the loader says MeanPatches; the reference's 'token_mean' rows are the same rows).
TEST(ExplainPools, MeanOfEveryTokenMatchesAutogradThroughVitPytorch) {
  check_case("vit_pytorch_vit_mean", ExplainQuery::PatchMean, 3);
}

TEST(ExplainPools, SiglipMapHeadMatchesAutogradThroughTimm) { check_case("timm_siglip", ExplainQuery::Probe); }

// SigLIP with zero-shot texts (Hugging Face SiglipModel, tests/fixtures/siglip/hf): a text's logit
// exp(logit_scale) cos + logit_bias (the logit, not its sigmoid) through the MAP head, against autograd through
// transformers' SiglipModel.forward. The texts' features are the family's (expected.json), as test_siglip_vision.
TEST(ExplainPools, SiglipTextLogitMatchesAutogradThroughTransformers) {
  const std::string folder = fixture("siglip/hf") + "/";
  ModelOverrides keep;
  keep.keep_text = true;
  ViTWeights w = load_model(folder, keep);
  std::ifstream ef(folder + "expected.json");
  const nlohmann::json e = nlohmann::json::parse(ef);
  std::vector<float> t;
  for (const auto& x : e["text_embeds"]["values"]) t.push_back(static_cast<float>(x.get<double>()));
  const size_t n = 5, E = t.size() / n;
  for (size_t j = 0; j < n; ++j) {  // L2-normalised rows, as the zero-shot head holds them
    double s = 0;
    for (size_t c = 0; c < E; ++c) s += static_cast<double>(t[j * E + c]) * t[j * E + c];
    for (size_t c = 0; c < E; ++c) t[j * E + c] = static_cast<float>(t[j * E + c] / std::sqrt(s));
  }
  w.zero_shot.text = Floats(t);
  w.zero_shot.classes = static_cast<int>(n);
  w.zero_shot.scale = static_cast<float>(std::exp(static_cast<double>(w.text_tensors.at("logit_scale").data[0])));
  w.zero_shot.bias = w.text_tensors.at("logit_bias").data[0];
  w.zero_shot.rule = ScoreRule::sigmoid;
  w.zero_shot.labels = {"a", "b", "c", "d", "e"};
  prepare_weights(w, true);
  const Image img = load_image(fixture("siglip/image.png"), LoadOptions{});
  std::vector<float> x(static_cast<size_t>(3) * img.width * img.height);  // SiglipImageProcessor's pixel_values
  const size_t P = static_cast<size_t>(img.width) * img.height;
  for (size_t c = 0; c < 3; ++c)
    for (size_t i = 0; i < P; ++i) x[c * P + i] = (static_cast<float>(img.rgb[i * 3 + c] * (1.0 / 255)) - 0.5f) / 0.5f;
  const ForwardTape tape = vit_forward_tape(w, x.data());
  for (size_t j = 0; j < n; ++j)
    EXPECT_NEAR(tape.logits[j], e["logits_per_image"]["values"][j].get<double>(), 1e-4) << j;
  check_against(folder, "siglip/hf texts", w, x, ExplainQuery::Probe);
}

// The mean of every token with a class token among them (Pool::MeanAll: a vit-pytorch 'mean' whose class token
// is averaged too; no family fixture has one): dlogit/dx0 against central differences of attnmap's own forward,
// and attn-grad's row is the mean of every row of mean_h (dA * A)^+ (the 'token-query mean').
TEST(ExplainPools, MeanOfEveryTokenWithAClassTokenMatchesFiniteDifferences) {
  ModelOverrides ov;
  ov.num_heads = 3;
  ov.pool = Pool::MeanAll;
  const ViTWeights w = load_model(case_dir("vit_pytorch_vit") + "model.pth", ov);
  ASSERT_EQ(w.hp.num_prefix, 1);
  ASSERT_EQ(explain_query(w.hp), ExplainQuery::TokenMean);
  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(case_dir("vit_pytorch_vit") + "input.npy", &shape);
  const int T = w.hp.tokens(), D = w.hp.dim, H = w.hp.num_heads, N = T - 1;
  std::vector<float> x0(static_cast<size_t>(T) * D);
  embed_tokens(x0.data(), w, input.data());
  const ForwardTape tape = vit_forward_tape_tokens(w, x0.data());
  const int c = 2;
  std::vector<float> abar;
  BackwardOptions bo;
  bo.input_grad = true;
  bo.on_attn_grad = [&](int l, const float* p, const float* d) {
    if (l == w.hp.depth - 1) abar = chefer_block_matrix(p, d, H, T);
  };
  const BackwardResult br = vit_backward(w, tape, c, bo);
  const auto logit = [&](const std::vector<float>& x) { return vit_forward_tape_tokens(w, x.data()).logits[c]; };
  const float eps = 1e-2f;
  for (const size_t at : {size_t{0}, size_t{5}, static_cast<size_t>(D) + 1, static_cast<size_t>(7) * D + 13,
                          static_cast<size_t>(T - 1) * D + 23}) {
    std::vector<float> xp = x0, xm = x0;
    xp[at] += eps;
    xm[at] -= eps;
    const double fd = (static_cast<double>(logit(xp)) - logit(xm)) / (2.0 * eps);
    EXPECT_NEAR(br.x0_grad[at], fd, 1e-3 + 1e-2 * std::fabs(fd)) << "token entry " << at;
  }
  ExplainRequest req;
  req.method = ViewKind::AttnGrad;
  req.layer = w.hp.depth - 1;
  const std::vector<float> got = explain_map(w, tape, c, req);
  ASSERT_EQ(got.size(), static_cast<size_t>(N));
  for (int j = 0; j < N; ++j) {
    double want = 0;
    for (int i = 0; i < T; ++i) want += abar[static_cast<size_t>(i) * T + 1 + j] / static_cast<float>(T);
    EXPECT_NEAR(got[static_cast<size_t>(j)], want, 1e-6 * (1 + std::fabs(want))) << j;
  }
}

// From the CLI: chefer renders for a mean-pooling model and for a MAP head (exit 0).
TEST(ExplainPools, CliRendersChefer) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_pools_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string img = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  for (const char* c : {"timm_gap_reg", "timm_siglip"}) {
    const CliRun r = run_attnmap("render " + img + " -w " + q(case_dir(c) + "model.pth") + " -o " + q(out) +
                                 " --explain chefer -q");
    EXPECT_EQ(r.status, 0) << c << ": " << r.err;
  }
  fs::remove_all(out);
}
