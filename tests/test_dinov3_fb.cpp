// DINOv3 as facebookresearch saves it (issue 44 point 3), beyond the family parity of test_families.cpp (which
// runs tests/fixtures/families/dinov3_fb_*, at 32 and 48 px, against DinoVisionTransformer's own attention):
// what the loader takes from Meta's names (heads and rotary periods from rope_embed.periods, the key bias
// masked by qkv.bias_mask), that the stored periods are the ones that match, and what is refused and how it
// is said. Fixtures: tools/make_family_fixtures_dinov3.py (facebookresearch/dinov3 at a recorded commit).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "checkpoint/weights.hpp"
#include "checkpoint/weights_pth.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "model/pos_embed.hpp"
#include "model/vit.hpp"
#include "load_errors.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

std::string case_path(const std::string& name) { return fixture("families/" + name) + "/model.pth"; }

nlohmann::json case_meta(const std::string& name) {
  std::ifstream f(fixture("families/" + name) + "/meta.json");
  return nlohmann::json::parse(f);
}

// The largest |attention - attn.npy| of the case at its 32 px input.
double attention_gap(ViTWeights w, const std::string& name) {
  resample_pos_embed(w, 32, 32);
  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(fixture("families/" + name) + "/input.npy", &shape);
  const std::vector<float> want = read_npy(fixture("families/" + name) + "/attn.npy", &shape);
  ForwardOptions fo;
  fo.keep_full = true;
  const ForwardResult r = vit_forward(w, input.data(), fo);
  double gap = 0;
  for (size_t i = 0; i < want.size(); ++i) gap = std::max(gap, std::fabs(double(r.attn[i]) - want[i]));
  return gap;
}

}  // namespace

// What Meta's names give: the layout, heads and rotary periods from rope_embed.periods, storage tokens as
// registers, the key third of the qkv bias zeroed by bias_mask, SwiGLU w1 / w2 / w3, the training-only norm listed.
TEST(Dinov3Fb, ReadsMetasOwnNames) {
  const ViTWeights w = load_model(case_path("dinov3_fb_mlp"));
  const HParams& hp = w.hp;
  EXPECT_EQ(hp.layout, Layout::Dinov3);
  EXPECT_EQ(hp.num_heads, 3);  // D 48 / d_head 16: 4 periods
  EXPECT_NE(hp.source.at("num_heads").find("rope_embed.periods (4,)"), std::string::npos) << hp.source.at("num_heads");
  EXPECT_EQ(hp.rope, Rope::Dinov3);
  EXPECT_TRUE(hp.rope_half);
  const auto periods = case_meta("dinov3_fb_mlp")["settings"]["periods"].get<std::vector<float>>();
  EXPECT_EQ(hp.rope_periods, periods);  // the bfloat16 values as stored
  EXPECT_FLOAT_EQ(hp.eps, 1e-5f);
  EXPECT_EQ(hp.num_registers, 4);
  EXPECT_TRUE(w.pos_embed.empty());
  EXPECT_TRUE(hp.layer_scale);
  const int D = hp.dim;
  for (const BlockWeights& b : w.blocks) {
    ASSERT_EQ(b.qkv.bias.size(), static_cast<size_t>(3 * D));
    for (int j = D; j < 2 * D; ++j) EXPECT_EQ(b.qkv.bias[static_cast<size_t>(j)], 0.0f) << j;  // k: masked
    EXPECT_NE(b.qkv.bias[0], 0.0f);
  }
  bool mask_listed = false;
  for (const auto& t : w.tensors) {
    if (t.name == "mask_token") mask_listed = t.reason.find("0 * mask_token") != std::string::npos;
    if (t.name.find("bias_mask") != std::string::npos) {
      EXPECT_TRUE(t.reason.empty()) << t.name;  // consumed
    }
  }
  EXPECT_TRUE(mask_listed);

  const ViTWeights s = load_model(case_path("dinov3_fb_swiglu"));
  EXPECT_EQ(s.hp.num_heads, 2);  // D 64 with d_head 32: not D/64
  EXPECT_TRUE(s.hp.swiglu);
  EXPECT_EQ(s.hp.mlp_dim, 64);
  EXPECT_TRUE(s.blocks[0].qkv.bias.empty());
  bool local_listed = false;
  for (const auto& t : s.tensors)
    if (t.name == "local_cls_norm.weight") local_listed = t.reason.find("training only") != std::string::npos;
  EXPECT_TRUE(local_listed);
}

// The released distilled models hold their periods in bfloat16: those, not base 100's, give DINOv3's numbers.
TEST(Dinov3Fb, TheStoredPeriodsAreTheOnesThatMatch) {
  ViTWeights w = load_model(case_path("dinov3_fb_mlp"));
  const double tol = case_meta("dinov3_fb_mlp")["tolerance"].get<double>();
  EXPECT_LT(attention_gap(w, "dinov3_fb_mlp"), tol);
  w.hp.rope_periods.clear();  // 100^(2j/(d_k/2)) in float32, as timm computes them
  w.rope = RopeTables{};
  EXPECT_GT(attention_gap(w, "dinov3_fb_mlp"), 100 * tol);
}

// What cannot be read faithfully is refused, naming the tensor or setting.
TEST(Dinov3Fb, WhatIsRefused) {
  const RawWeights raw = load_weights_pth(case_path("dinov3_fb_mlp"), "");
  const auto refused = [&](const std::function<void(RawWeights&)>& change, const ModelOverrides& ov, const std::string& want) {
    RawWeights r = raw;
    change(r);
    const std::string e = build_error(r, ov);
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  ModelOverrides four;
  four.num_heads = 4;
  refused([](RawWeights&) {}, four, "the command line gives 4 heads, but inferred from rope_embed.periods (4,)");
  refused([](RawWeights& r) { r.tensors["rope_embed.periods"].shape = {5}; r.tensors["rope_embed.periods"].data.assign(5, 1.0f); },
          {}, "heads of width 4 x 5 = 20, which does not divide D = 48");
  refused([](RawWeights& r) { r.tensors.erase("rope_embed.periods"); }, {}, "missing tensor 'rope_embed.periods'");
  refused([](RawWeights& r) { r.tensors["blocks.1.attn.qkv.bias_mask"].data.assign(144, std::nanf("")); }, {},
          "fills it with NaN");
  refused([](RawWeights& r) { r.tensors.erase("blocks.1.attn.qkv.bias_mask"); }, {},
          "missing tensor 'blocks.1.attn.qkv.bias_mask'");
  refused([](RawWeights& r) { r.tensors["mask_token"].data.assign(48, std::numeric_limits<float>::infinity()); }, {},
          "0 * mask_token");
  refused([](RawWeights& r) { r.tensors.erase("blocks.0.norm1.bias"); }, {}, "norm_layer 'rmsnorm'");
  refused([](RawWeights& r) { r.tensors.erase("storage_tokens"); }, {}, "a DINOv3 without storage tokens");
  refused([](RawWeights& r) { r.tensors["projectors.0.weight"] = r.tensors.at("norm.weight"); }, {},
          "projectors.0.weight (48,): not part of this layout");
}
