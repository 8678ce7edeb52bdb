// BEiT / BEiT v2 relative position bias (issue 29): what the generic family test (test_families.cpp: every
// head of the first, middle and last block at the trained size and at meta other_size, against timm's own
// Beit) does not cover - the bias gathered by timm's index, the index buffers checked, rollout against numpy,
// the refusals, and the class-row fast path. Fixtures: tests/fixtures/families/beit_* (tools/make_family_fixtures_beit.py).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "checkpoint/rel_pos.hpp"
#include "checkpoint/weights.hpp"
#include "checkpoint/weights_pth.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "maps/attention_maps.hpp"
#include "model/pos_embed.hpp"
#include "model/rel_pos_resize.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "load_errors.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

std::string beit_dir(const std::string& c) { return fixture("families/" + c) + "/"; }

nlohmann::json beit_meta(const std::string& c) {
  std::ifstream f(beit_dir(c) + "meta.json");
  return nlohmann::json::parse(f);
}

const char* const kCases[] = {"beit_relpos", "beit_abs_relpos", "beitv2_shared"};


}  // namespace

// timm beit.py gen_relative_position_index((2, 3)), printed by torch: the patch offsets and the three class entries.
TEST(Beit, RelativePositionIndexIsTimms) {
  const std::vector<int64_t> idx = beit_relative_position_index(2, 3);  // T = 7, table rows 3*5+3 = 18
  ASSERT_EQ(idx.size(), 49u);
  const std::vector<int64_t> row0 = {17, 15, 15, 15, 15, 15, 15};
  const std::vector<int64_t> row1 = {16, 7, 6, 5, 2, 1, 0};  // patch (0,0) to (0,0) (0,1) (0,2) (1,0) (1,1) (1,2)
  const std::vector<int64_t> row6 = {16, 14, 13, 12, 9, 8, 7};
  EXPECT_EQ(std::vector<int64_t>(idx.begin(), idx.begin() + 7), row0);
  EXPECT_EQ(std::vector<int64_t>(idx.begin() + 7, idx.begin() + 14), row1);
  EXPECT_EQ(std::vector<int64_t>(idx.begin() + 42, idx.begin() + 49), row6);
}

// Each fixture: every tensor accounted for, the bias present in every block, rollout of every block equal to
// numpy's rollout of timm's own float64 attention, and the class-row fast path (the drawn layer alone) equal
// to the full matrices' row 0.
TEST(Beit, FixturesRolloutAndClassRowFastPath) {
  for (const char* c : kCases) {
    SCOPED_TRACE(c);
    const auto meta = beit_meta(c);
    const ViTWeights w = load_model(beit_dir(c) + "model.pth");
    ASSERT_EQ(w.hp.layout, Layout::Beit);
    ASSERT_TRUE(w.hp.rel_pos);
    for (const BlockWeights& b : w.blocks) ASSERT_TRUE(b.attn_bias);
    std::vector<int64_t> shape;
    const std::vector<float> input = read_npy(beit_dir(c) + "input.npy", &shape);
    ForwardOptions full;
    full.keep_full = true;
    const ForwardResult r = vit_forward(w, input.data(), full);
    const std::vector<float> roll = attention_rollout(r, w.hp.depth - 1, HeadSelect{});
    const std::vector<float> want = read_npy(beit_dir(c) + "rollout.npy", &shape);
    ASSERT_EQ(meta["rollout"]["layers"].get<int>(), w.hp.depth);
    EXPECT_TRUE(all_close(roll, want, meta["rollout"]["tolerance"].get<double>(), std::string(c) + " rollout"));
    for (int l = 0; l < w.hp.depth; ++l) {
      ForwardOptions fast;
      fast.last_layer = l;
      const ForwardResult f = vit_forward(w, input.data(), fast);
      const int H = w.hp.num_heads, T = w.hp.tokens();
      std::vector<float> rows;
      for (int h = 0; h < H; ++h) {
        const float* p = &r.attn[(static_cast<size_t>(l) * H + h) * T * T];
        rows.insert(rows.end(), p, p + T);
      }
      const std::vector<float> got(f.cls_attn.begin() + static_cast<long>(l) * H * T, f.cls_attn.begin() + static_cast<long>(l + 1) * H * T);
      // the same bits on the own kernels (class_scores_row packs the keys as the full attention does)
      EXPECT_TRUE(all_close(got, rows, own_attention_products(Precision::F32) ? 0.0 : 1e-6,
                            std::string(c) + " class row of block " + std::to_string(l)));
    }
  }
}

// microsoft/unilm saves relative_position_index (int64) in its checkpoints: read, checked against the index
// of the grid, listed as checked; one changed entry stops the load by name.
TEST(Beit, IndexBuffersAreCheckedNotTrusted) {
  for (const std::string file : {"beit_relpos/model_unilm.pth", "beitv2_shared/model.safetensors"}) {
    SCOPED_TRACE(file);
    const std::string path = fixture("families/" + file);
    const ViTWeights w = load_model(path);
    int checked = 0;
    for (const auto& t : w.tensors)
      if (t.name.find("relative_position_index") != std::string::npos) {
        EXPECT_NE(t.reason.find("checked equal to the index attnmap computes for the 4x4 grid"), std::string::npos) << t.reason;
        ++checked;
      }
    EXPECT_EQ(checked, file.find("v2") != std::string::npos ? 1 : 3);
    RawWeights raw = file.find(".pth") != std::string::npos ? load_weights_pth(path, "") : load_weights_safetensors(path);
    const std::string name = file.find("v2") != std::string::npos ? "rel_pos_bias.relative_position_index"
                                                                   : "blocks.1.attn.relative_position_index";
    ASSERT_TRUE(raw.ints.count(name)) << name;
    std::swap(raw.ints[name][18], raw.ints[name][19]);  // row 1, columns 1 and 2
    const std::string e = build_error(raw);
    EXPECT_NE(e.find("tensor '" + name + "' differs from the relative position index of a 4x4 grid (timm "
                     "gen_relative_position_index) at (1, 1): "),
              std::string::npos) << e;
  }
}

// A table missing in one block, or one of the wrong size, is named; a BEiT with neither pos_embed nor a table
// asks for pos_embed.
TEST(Beit, MissingOrMisshapenTablesAreNamed) {
  const std::string path = beit_dir("beit_relpos") + "model.pth";
  RawWeights raw = load_weights_pth(path, "");
  RawWeights one = raw;
  one.tensors.erase("blocks.1.attn.relative_position_bias_table");
  std::string e = build_error(one);
  EXPECT_NE(e.find("missing tensor 'blocks.1.attn.relative_position_bias_table' (expected shape (52, 3); BEiT's "
                   "use_rel_pos_bias gives every block a table)"),
            std::string::npos) << e;
  RawWeights bad = raw;
  Tensor& t = bad.tensors.at("blocks.2.attn.relative_position_bias_table");
  t.shape = {53, 3};
  t.data.resize(159);
  e = build_error(bad);
  EXPECT_NE(e.find("tensor 'blocks.2.attn.relative_position_bias_table' has shape (53, 3), expected (52, 3)"), std::string::npos) << e;
  RawWeights none = raw;
  for (int i = 0; i < 3; ++i) none.tensors.erase("blocks." + std::to_string(i) + ".attn.relative_position_bias_table");
  // Without its tables a BEiT's tensors are those of a timm Eva (q_bias / v_bias, gamma_1, no pos_embed), which
  // needs its architecture; the refusal says what a BEiT would hold.
  ModelOverrides h3;
  h3.num_heads = 3;
  e = build_error(none, h3);
  EXPECT_NE(e.find("without a config naming the architecture"), std::string::npos) << e;
  EXPECT_NE(e.find("A BEiT file would hold relative_position_bias_table tensors; this one has none."), std::string::npos) << e;
}

// --size: timm's resize_rel_pos_bias_table keeps the class-token entries and the centre offset; a trained
// non-square grid is refused before anything changes.
TEST(Beit, TableResizeKeepsClassEntriesAndRefusesNonSquare) {
  const int H = 2;
  std::vector<float> table((7 * 7 + 3) * H);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  const std::vector<float> out = resize_rel_pos_bias_table(table, H, 4, 6, 6);
  ASSERT_EQ(out.size(), static_cast<size_t>((11 * 11 + 3) * H));
  for (int k = 0; k < 3 * H; ++k) EXPECT_EQ(out[out.size() - 3 * H + k], table[table.size() - 3 * H + k]);
  for (int h = 0; h < H; ++h) EXPECT_FLOAT_EQ(out[(5 * 11 + 5) * H + h], table[(3 * 7 + 3) * H + h]);  // offset (0, 0)
  ViTWeights w = load_model(beit_dir("beit_relpos") + "model.pth");
  w.hp.rel_pos_grid_w = 5;  // as if trained on a 4x5 grid
  try {
    resample_pos_embed(w, 48, 48);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timm's resize_rel_pos_bias_table (BEiT) reads a square one only"), std::string::npos) << e.what();
  }
  EXPECT_EQ(w.hp.grid_w, 4);
}

// Class-specific views: the bias is a constant added to the scores, so the backward of the scores is the plain
// one; the tape's forward adds it as vit_forward does. dlogit/dA of every block and head against torch autograd
// through timm's own Beit (class-token head); a mean-pooling BEiT (as released) follows the patch-query mean
// (issue 44; that pooling's backward is checked against timm's autograd in tests/test_explain_pools.cpp).
TEST(Beit, AttentionGradientsMatchAutogradThroughTimmsBeit) {
  const auto meta = beit_meta("beit_abs_relpos");
  const ViTWeights w = load_model(beit_dir("beit_abs_relpos") + "model.pth");
  EXPECT_EQ(w.hp.pool, Pool::ClassToken);
  EXPECT_EQ(explanations_unavailable(w.hp, true), "");
  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(beit_dir("beit_abs_relpos") + "input.npy", &shape);
  const ForwardTape tape = vit_forward_tape(w, input.data());
  const std::vector<float> logits = read_npy(beit_dir("beit_abs_relpos") + "logits.npy", &shape);
  EXPECT_TRUE(all_close(tape.logits, logits, meta["logits_tolerance"].get<double>(), "tape logits"));
  const int c = meta["explain"]["target_class"].get<int>();
  const int L = w.hp.depth, H = w.hp.num_heads, T = w.hp.tokens();
  std::vector<float> grads(static_cast<size_t>(L) * H * T * T);
  BackwardOptions bo;
  bo.on_attn_grad = [&](int l, const float*, const float* dA) {
    std::copy(dA, dA + static_cast<size_t>(H) * T * T, grads.begin() + static_cast<long>(l) * H * T * T);
  };
  vit_backward(w, tape, c, bo);
  const std::vector<float> want = read_npy(beit_dir("beit_abs_relpos") + "grad_attn.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{L, H, T, T}));
  const double tol = meta["explain"]["tolerance"].get<double>();
  EXPECT_TRUE(all_close(grads, want, tol, "dlogit/dA"));
  double largest = 0;
  for (size_t i = 0; i < grads.size(); ++i) largest = std::max(largest, std::fabs(double(grads[i]) - want[i]));
  std::printf("beit autograd: largest dlogit/dA difference %.2g (tolerance %.2g, max |g| %.2g)\n", largest, tol,
              meta["explain"]["max_abs"].get<double>());
  const ViTWeights released = load_model(beit_dir("beit_relpos") + "model.pth");
  EXPECT_EQ(explanations_unavailable(released.hp, true), "");
  EXPECT_EQ(explain_query(released.hp), ExplainQuery::PatchMean);
}

// From the CLI: chefer and rollout render for a class-token BEiT, and chefer for a mean-pooling BEiT (issue 44); --size renders a shared-table BEiT v2; inspect names the family, the bias and the checked index.
TEST(Beit, CliRendersExplainsRefusesAndInspects) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_beit_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string img = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  const std::string wt = q(beit_dir("beit_abs_relpos") + "model.pth");
  const CliRun ex = run_attnmap("render " + img + " -w " + wt + " -o " + q(out) + " --explain chefer -q");
  EXPECT_EQ(ex.status, 0) << ex.err;
  const CliRun no = run_attnmap("render " + img + " -w " + q(beit_dir("beit_relpos") + "model.pth") + " -o " + q(out) +
                                " --explain chefer -q");
  EXPECT_EQ(no.status, 0) << no.err;
  const CliRun ro = run_attnmap("render " + img + " -w " + wt + " -o " + q(out) + " --rollout -q");
  EXPECT_EQ(ro.status, 0) << ro.err;
  const CliRun sz = run_attnmap("render " + img + " -w " + q(beit_dir("beitv2_shared") + "model.safetensors") + " -o " +
                                q(out) + " --size 48 -q");
  EXPECT_EQ(sz.status, 0) << sz.err;
  const CliRun in = run_attnmap("inspect " + q(beit_dir("beit_relpos") + "model_unilm.pth"));
  EXPECT_EQ(in.status, 0) << in.err;
  EXPECT_NE(in.out.find("beit (timm Beit / microsoft/unilm BEiT"), std::string::npos) << in.out;
  EXPECT_NE(in.out.find("rel. bias:   a table per block, 4 x 4 grid, added to the scores before the softmax (BEiT)"),
            std::string::npos) << in.out;
  EXPECT_NE(in.out.find("checked equal to the index attnmap computes for the 4x4 grid"), std::string::npos) << in.out;
  EXPECT_EQ(in.out.find("skipped non-float tensors"), std::string::npos) << in.out;  // read and checked, not skipped
  fs::remove_all(out);
}

// Token dropping (eval's perturbation test): the bias is taken at the kept tokens' rows and columns. Keeping
// every patch gives the usual numbers; keeping some gives the numbers of the same forward with the dropped
// patches' rows and columns of every block's bias removed (computed here from the full bias).
TEST(Beit, TokenDroppingTakesTheKeptTokensBias) {
  const ViTWeights w = load_model(beit_dir("beit_abs_relpos") + "model.pth");
  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(beit_dir("beit_abs_relpos") + "input.npy", &shape);
  ForwardOptions all;
  all.to_end = true;
  all.keep_full = true;
  const ForwardResult full = vit_forward(w, input.data(), all);
  ForwardOptions every = all;
  every.keep_patches = std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const ForwardResult same = vit_forward(w, input.data(), every);
  EXPECT_EQ(same.attn, full.attn);
  EXPECT_EQ(same.logits, full.logits);
  // Keep 6 patches: the reference is a model whose patch grid is the full one but whose tokens are only the
  // kept ones, i.e. the same forward run by hand through attention_forward with the gathered bias.
  const std::vector<int> keep = {0, 3, 5, 6, 10, 15};
  ForwardOptions some = all;
  some.keep_patches = keep;
  const ForwardResult part = vit_forward(w, input.data(), some);
  const int T = 1 + static_cast<int>(keep.size()), H = w.hp.num_heads, Tf = w.hp.tokens();
  ASSERT_EQ(part.tokens, T);
  // block 0's probabilities by hand: tokens embedded in full, the kept rows, LN1, qkv, bias rows/columns.
  std::vector<float> x(static_cast<size_t>(Tf) * w.hp.dim);
  embed_tokens(x.data(), w, input.data());
  std::vector<int> idx = {0};
  for (int p : keep) idx.push_back(1 + p);
  std::vector<float> xk, xn(static_cast<size_t>(T) * w.hp.dim), qkv(static_cast<size_t>(T) * 3 * w.hp.dim);
  for (int t : idx) xk.insert(xk.end(), x.begin() + static_cast<long>(t) * w.hp.dim, x.begin() + static_cast<long>(t + 1) * w.hp.dim);
  const BlockWeights& b0 = w.blocks[0];
  layernorm_forward(xn.data(), xk.data(), b0.norm1.weight.data(), b0.norm1.bias.data(), T, w.hp.dim, w.hp.eps);
  linear(qkv.data(), xn.data(), b0.qkv, T);
  std::vector<float> bias(static_cast<size_t>(H) * T * T), probs(bias.size()), out(static_cast<size_t>(T) * w.hp.dim);
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j)
        bias[(static_cast<size_t>(h) * T + i) * T + j] = (*b0.attn_bias)[(static_cast<size_t>(h) * Tf + idx[i]) * Tf + idx[j]];
  attention_forward(out.data(), probs.data(), qkv.data(), T, H, w.hp.head_dim, bias.data());
  const std::vector<float> got(part.attn.begin(), part.attn.begin() + static_cast<long>(H) * T * T);
  EXPECT_TRUE(all_close(got, probs, 1e-6, "block 0 with 6 kept patches"));
  attention_forward(out.data(), probs.data(), qkv.data(), T, H, w.hp.head_dim);  // the bias dropped: far off
  double d = 0;
  for (size_t i = 0; i < probs.size(); ++i) d = std::max(d, std::fabs(double(got[i]) - probs[i]));
  EXPECT_GT(d, 0.05);
}
