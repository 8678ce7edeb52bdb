// Parity of the whole forward pass with PyTorch: tests/fixtures/* made by tools/make_fixtures.py.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "maps/attention_maps.hpp"
#include "io/npy.hpp"
#include "test_util.hpp"
#include "model/vit.hpp"
#include "checkpoint/weights.hpp"

using namespace attnmap;

namespace {

struct Case {
  const char* name;
  double attn_tol;
  double token_tol;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Parity : public ::testing::TestWithParam<Case> {};

TEST_P(Parity, AttentionProbabilitiesAndTokens) {
  const Case c = GetParam();
  const std::string dir = fixture(c.name) + "/";
  const ViTWeights w = load_model(dir + "weights.json");
  std::ifstream mf(dir + "meta.json");
  const auto meta = nlohmann::json::parse(mf);
  EXPECT_EQ(layout_name(w.hp.layout), meta["layout"].get<std::string>());
  EXPECT_EQ(w.hp.depth, meta["L"].get<int>());
  EXPECT_EQ(w.hp.num_heads, meta["H"].get<int>());
  EXPECT_EQ(w.hp.tokens(), meta["T"].get<int>());

  std::vector<int64_t> in_shape, attn_shape, tok_shape;
  const std::vector<float> input = read_npy(dir + "input.npy", &in_shape);
  ASSERT_EQ(in_shape, (std::vector<int64_t>{3, w.hp.image_h, w.hp.image_w}));
  const std::vector<float> want_attn = read_npy(dir + "attn.npy", &attn_shape);
  ASSERT_EQ(attn_shape, (std::vector<int64_t>{w.hp.depth, w.hp.num_heads, w.hp.tokens(), w.hp.tokens()}));

  ForwardOptions fo;
  fo.keep_full = true;
  fo.to_end = true;
  const ForwardResult r = vit_forward(w, input.data(), fo);
  EXPECT_TRUE(all_close(r.attn, want_attn, c.attn_tol, std::string(c.name) + " attention probabilities"));

  const std::vector<float> want_tok = read_npy(dir + "tokens.npy", &tok_shape);
  EXPECT_TRUE(all_close(r.tokens_out, want_tok, c.token_tol, std::string(c.name) + " final tokens"));

  // The class row recorded for the maps is row 0 of the full matrices, for every layer and head.
  const int T = w.hp.tokens();
  for (int l = 0; l < w.hp.depth; ++l)
    for (int h = 0; h < w.hp.num_heads; ++h)
      for (int j = 0; j < T; ++j)
        ASSERT_EQ(r.cls_attn[(static_cast<size_t>(l) * w.hp.num_heads + h) * T + j],
                  r.attn[((static_cast<size_t>(l) * w.hp.num_heads + h) * T) * T + j]);

  // Computing only up to the first layer gives the same first-layer probabilities, to float rounding: the
  // drawn layer computes the class row alone, a 1-row product, which OpenBLAS's kernels may round
  // differently from row 0 of the T-row product (equal on the AVX-512 machine the suite was written on; up to 2.7e-7 on an AVX2 AMD EPYC).
  ForwardOptions first;
  first.last_layer = 0;
  const ForwardResult r0 = vit_forward(w, input.data(), first);
  EXPECT_EQ(r0.layers, 1);
  EXPECT_TRUE(all_close(r0.cls_attn, std::vector<float>(r.cls_attn.begin(), r.cls_attn.begin() + w.hp.num_heads * T),
                        1e-6, "layer 0 alone"));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity,
                         ::testing::Values(Case{"timm_small", 1e-5, 1e-4}, Case{"timm_224", 1e-5, 1e-4},
                                           Case{"seed_embed", 1e-5, 1e-5}, Case{"seed_raw", 1e-5, 1e-5}),
                         [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

TEST(Parity, BatchedEqualsSingle) {
  const std::string dir = fixture("timm_small") + "/";
  const ViTWeights w = load_model(dir + "weights.json");
  std::vector<int64_t> shape;
  const std::vector<float> a = read_npy(dir + "input.npy", &shape);
  std::vector<float> b(a.rbegin(), a.rend());  // a second, different image
  ForwardOptions fo;
  fo.to_end = true;
  const auto batch = vit_forward(w, {a.data(), b.data()}, fo);
  const ForwardResult ra = vit_forward(w, a.data(), fo), rb = vit_forward(w, b.data(), fo);
  EXPECT_TRUE(all_close(batch[0].cls_attn, ra.cls_attn, 1e-6, "batch[0]"));
  EXPECT_TRUE(all_close(batch[1].cls_attn, rb.cls_attn, 1e-6, "batch[1]"));
  EXPECT_FALSE(all_close(batch[0].cls_attn, batch[1].cls_attn, 1e-3, "different images differ"));
}

}  // namespace
