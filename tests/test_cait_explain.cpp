// CaiT's class-specific maps and rollout (issue 44; docs/explain.md "CaiT") against timm's own Cait:
// tests/fixtures/cait/cait_tiny/explain*.npy and rollout.npy, written by tools/make_family_fixtures_cait.py by
// autograd through timm's cait.py in float64 (explain.json says what each array holds and for which class).
// Checked: the tape's logits, dlogit/dA of every block (the talking heads' proj_w(P) of the self-attention
// blocks, the class rows of the class-attention blocks), Chefer (from block 0 and from the first
// class-attention block), attn-grad and Grad-CAM at every block, and rollout, each within 1e-4 of its peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"
#include "io/npy.hpp"
#include "maps/attention_maps.hpp"
#include "maps/explain.hpp"
#include "maps/views.hpp"
#include "model/cait.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

const std::string kDir = "cait/cait_tiny/";

struct Fixture {
  ViTWeights w;
  std::vector<float> image;
  nlohmann::json info;
  int cls = 0;
};

const Fixture& fx() {
  static const Fixture f = [] {
    Fixture r;
    r.w = load_model(fixture(kDir + "model.safetensors"));
    std::vector<int64_t> shape;
    r.image = read_npy(fixture(kDir + "input.npy"), &shape);
    std::ifstream in(fixture(kDir + "explain.json"));
    r.info = nlohmann::json::parse(in);
    r.cls = r.info["class"].get<int>();
    return r;
  }();
  return f;
}

std::vector<float> npy(const std::string& name, std::vector<int64_t>* shape = nullptr) {
  std::vector<int64_t> s;
  return read_npy(fixture(kDir + name), shape ? shape : &s);
}

// max |a - b| over max |b| (b the reference), both of n values from the given offsets.
double rel_err(const float* a, const float* b, size_t n) {  // NOLINT
  static const bool show = std::getenv("ATTNMAP_SHOW_ERR") != nullptr;
  double d = 0, peak = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, std::fabs(double(a[i]) - b[i])), peak = std::max(peak, std::fabs(double(b[i])));
  if (show) std::printf("  max err %.2e of peak %.3e\n", d, peak);
  return peak > 0 ? d / peak : d;
}

}  // namespace

TEST(CaitExplain, TheTapesLogitsAndEveryBlocksAttentionGradientMatchTimmsAutograd) {
  const Fixture& f = fx();
  const HParams& hp = f.w.hp;
  const ForwardTape tape = vit_forward_tape(f.w, f.image.data());
  ASSERT_TRUE(tape.cait);
  const std::vector<float> logits = npy("logits.npy");
  ASSERT_EQ(tape.logits.size(), logits.size());
  EXPECT_LT(rel_err(tape.logits.data(), logits.data(), logits.size()), 1e-4);
  const int H = hp.num_heads, T = hp.tokens(), N = T - 1, L = hp.depth, SA = L - hp.class_attn_blocks;
  const std::vector<float> w_sa = npy("explain_w_sa.npy"), dw_sa = npy("explain_dw_sa.npy"), da_ca = npy("explain_da_ca.npy");
  const size_t NN = static_cast<size_t>(N) * N, TT = static_cast<size_t>(T) * T;
  int seen = 0;
  BackwardOptions bo;
  bo.on_attn_grad = [&](int l, const float* a, const float* da) {
    ++seen;
    std::vector<float> got_a, got_da;  // the block's own layout, from the (H, T, T) embedding
    for (int h = 0; h < H; ++h) {
      if (l < SA) {
        for (int i = 0; i < N; ++i) {
          const size_t at = h * TT + static_cast<size_t>(1 + i) * T + 1;
          got_a.insert(got_a.end(), a + at, a + at + N);
          got_da.insert(got_da.end(), da + at, da + at + N);
        }
        EXPECT_EQ(a[h * TT], 0.0f);  // no class row / column in a self-attention block
      } else {
        got_da.insert(got_da.end(), da + h * TT, da + h * TT + T);
        EXPECT_EQ(da[h * TT + TT - 1], 0.0f);  // patch rows: no queries in a class-attention block
      }
    }
    if (l < SA) {
      EXPECT_LT(rel_err(got_a.data(), &w_sa[static_cast<size_t>(l) * H * NN], H * NN), 1e-5) << "block " << l;
      EXPECT_LT(rel_err(got_da.data(), &dw_sa[static_cast<size_t>(l) * H * NN], H * NN), 1e-4) << "block " << l;
    } else {
      EXPECT_LT(rel_err(got_da.data(), &da_ca[static_cast<size_t>(l - SA) * H * T], static_cast<size_t>(H) * T), 1e-4)
          << "block " << l;
    }
  };
  vit_backward(f.w, tape, f.cls, bo);
  EXPECT_EQ(seen, L);
}

TEST(CaitExplain, CheferAttnGradAndGradCamMatchNumpyOnTimmsGradients) {
  const Fixture& f = fx();
  const HParams& hp = f.w.hp;
  const ForwardTape tape = vit_forward_tape(f.w, f.image.data());
  const int N = hp.grid_w * hp.grid_h, L = hp.depth, SA = L - hp.class_attn_blocks;
  const std::vector<float> chefer = npy("explain_chefer.npy"), ag = npy("explain_attn_grad.npy"), gc = npy("explain_gradcam.npy");
  const std::vector<float> c0 = explain_map(f.w, tape, f.cls, ExplainRequest{ViewKind::Chefer, 0, 0});
  const std::vector<float> cs = explain_map(f.w, tape, f.cls, ExplainRequest{ViewKind::Chefer, 0, SA});
  ASSERT_EQ(c0.size(), static_cast<size_t>(N));
  EXPECT_LT(rel_err(c0.data(), chefer.data(), N), 1e-4);
  EXPECT_LT(rel_err(cs.data(), chefer.data() + N, N), 1e-4);
  EXPECT_GT(*std::max_element(c0.begin(), c0.end()), 1e-3f);  // not an empty map
  for (int l = 0; l < L; ++l) {
    const std::vector<float> a = explain_map(f.w, tape, f.cls, ExplainRequest{ViewKind::AttnGrad, l});
    EXPECT_LT(rel_err(a.data(), &ag[static_cast<size_t>(l) * N], N), 1e-4) << "attn-grad block " << l;
    const std::vector<float> g = explain_map(f.w, tape, f.cls, ExplainRequest{ViewKind::GradCam, l});
    EXPECT_LT(rel_err(g.data(), &gc[static_cast<size_t>(l) * N], N), 1e-4) << "gradcam block " << l;
    EXPECT_GT(*std::max_element(a.begin(), a.end()), 0.0f) << l;
  }
  // Grad-CAM's input gradient path: x0_grad exists and the class token's part is not zero.
  BackwardOptions bo;
  bo.input_grad = true;
  const BackwardResult r = vit_backward(f.w, tape, f.cls, bo);
  ASSERT_EQ(r.x0_grad.size(), static_cast<size_t>(hp.tokens()) * hp.dim);
  EXPECT_GT(std::fabs(r.x0_grad[0]) + std::fabs(r.x0_grad[1]), 0.0f);
}

TEST(CaitExplain, RolloutMatchesNumpyOnTimmsAttention) {
  const Fixture& f = fx();
  const HParams& hp = f.w.hp;
  const int T = hp.tokens();
  ForwardOptions fo;
  fo.keep_full = true;
  const ForwardResult r = vit_forward(f.w, f.image.data(), fo);
  const std::vector<float> R = attention_rollout(r, hp.depth - 1, HeadSelect{});
  const std::vector<float> ref = npy("rollout.npy");
  ASSERT_EQ(R.size(), static_cast<size_t>(T) * T);
  EXPECT_LT(rel_err(R.data(), ref.data(), R.size()), 1e-4);
  // The tape records the same (T, T) matrices: a rollout from it is the same.
  const ForwardTape tape = vit_forward_tape(f.w, f.image.data());
  RolloutAccumulator acc(T, hp.num_heads, HeadSelect{});
  for (const BlockTape& b : tape.blocks) acc.add_layer(b.probs.data());
  EXPECT_LT(rel_err(acc.rollout().data(), ref.data(), ref.size()), 1e-4);
  const ForwardResult rows = r;
  EXPECT_LT(rel_err(tape.cait->cls_attn.data(), rows.cls_attn.data(), rows.cls_attn.size()), 1e-6);
}

// What the figures' titles say: the class-attention query for Chefer and attn-grad at a class-attention block,
// the patch-query mean for attn-grad at a self-attention block, no query for Grad-CAM.
TEST(CaitExplain, TheTitlesNameTheQueryEachViewFollows) {
  const HParams& hp = fx().w.hp;
  const std::vector<ResolvedView> v =
      resolve_views(parse_views("chefer,attn-grad@L4,attn-grad@L1,gradcam,rollout"), hp, true, ViewSettings{});
  ASSERT_EQ(v.size(), 5u);
  EXPECT_NE(view_label(v[0], 0).find("class-attention query"), std::string::npos) << view_label(v[0], 0);
  EXPECT_NE(view_label(v[1], 0).find("class-attention query"), std::string::npos) << view_label(v[1], 0);
  EXPECT_NE(view_label(v[2], 0).find("patch-query mean"), std::string::npos) << view_label(v[2], 0);
  EXPECT_EQ(view_label(v[3], 0).find("query"), std::string::npos) << view_label(v[3], 0);
  EXPECT_EQ(view_label(v[4], 0), "rollout 0\u20134, mean");
}
