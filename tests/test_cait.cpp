// CaiT against timm's own Cait (issue 29): tests/fixtures/cait/<case>/, written by
// tools/make_family_fixtures_cait.py (timm at a recorded commit; the folder's files are described there).
// CaiT does not fit test_families.cpp's (n, H, T, T) attention: its self-attention blocks run over the patches
// only and its class-attention blocks compute only the class token's row. Checked here, for model.pth and
// model.safetensors, at the trained size and at meta.other_size (--size): every head of the first, middle and
// last self-attention block (the talking-heads softmax, (H, N, N)) and of every class-attention block (the
// class row, (H, T)) within max(1e-5, 2 x timm's float32-vs-float64 spread), the logits, and how
// ForwardResult lays them out (model/cait.hpp); then what the CLI says and refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/inspect/inspect.hpp"
#include "checkpoint/weights.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "core/error.hpp"
#include "io/npy.hpp"
#include "maps/attention_maps.hpp"
#include "model/cait.hpp"
#include "model/pos_embed.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

const std::string kCase = "cait/cait_tiny/";

nlohmann::json cait_meta() {
  std::ifstream f(fixture(kCase + "meta.json"));
  return nlohmann::json::parse(f);
}

double largest_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

// From a CaiT ForwardResult with keep_full: the self-attention blocks `blocks` as (n, H, N, N) (the patch
// rows and columns of each (T, T) matrix), and the class-attention blocks' class rows as (C, H, T).
std::vector<float> sa_blocks(const ForwardResult& r, const std::vector<int>& blocks) {
  const int H = r.heads, T = r.tokens, N = T - 1;
  std::vector<float> out;
  for (int l : blocks)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < N; ++i) {
        const float* row = &r.attn[((static_cast<size_t>(l) * H + h) * T + 1 + i) * T + 1];
        out.insert(out.end(), row, row + N);
      }
  return out;
}
std::vector<float> ca_rows(const ForwardResult& r, int first_ca) {
  const size_t per = static_cast<size_t>(r.heads) * r.tokens;
  return std::vector<float>(r.cls_attn.begin() + static_cast<long>(first_ca * per), r.cls_attn.end());
}

// One size: attnmap's forward of `w` on `input` against the fixture's arrays.
void check_size(const ViTWeights& w, const std::string& input, const std::string& sa_file, const std::string& ca_file,
                const std::string& logits_file, double tol, double ltol, const std::string& what) {
  const nlohmann::json meta = cait_meta();
  const std::string dir = fixture(kCase);
  const HParams& hp = w.hp;
  std::vector<int64_t> shape;
  const std::vector<float> in = read_npy(dir + input, &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{3, hp.image_h, hp.image_w}));
  ForwardOptions fo;
  fo.keep_full = true;
  fo.to_end = true;
  const ForwardResult r = vit_forward(w, in.data(), fo);
  const int H = hp.num_heads, N = hp.grid_w * hp.grid_h, T = N + 1, SA = meta["depth_sa"].get<int>();
  ASSERT_EQ(r.layers, hp.depth);
  ASSERT_EQ(r.tokens, T);
  const std::vector<int> blocks = meta["blocks_sa"].get<std::vector<int>>();
  const std::vector<float> want_sa = read_npy(dir + sa_file, &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{static_cast<int64_t>(blocks.size()), H, N, N}));
  const std::vector<float> got_sa = sa_blocks(r, blocks);
  EXPECT_TRUE(all_close(got_sa, want_sa, tol, what + " self-attention (talking-heads softmax)"));
  const std::vector<float> want_ca = read_npy(dir + ca_file, &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{meta["depth_ca"].get<int64_t>(), H, T}));
  const std::vector<float> got_ca = ca_rows(r, SA);
  EXPECT_TRUE(all_close(got_ca, want_ca, tol, what + " class attention"));
  const std::vector<float> logits = read_npy(dir + logits_file, &shape);
  EXPECT_TRUE(all_close(r.logits, logits, ltol, what + " logits"));
  std::printf("cait parity: %s largest differences: self-attention %.2g, class attention %.2g (tolerance %.2g), "
              "logits %.2g (tolerance %.2g)\n", what.c_str(), largest_diff(got_sa, want_sa),
              largest_diff(got_ca, want_ca), tol, largest_diff(r.logits, logits), ltol);

  // The layout of ForwardResult (model/cait.hpp): in self-attention blocks the class row and column are zero
  // and cls_attn is the patch-query mean of the softmax; in class-attention blocks cls_attn is the class row.
  for (int l = 0; l < hp.depth; ++l)
    for (int h = 0; h < H; ++h) {
      const float* m = &r.attn[(static_cast<size_t>(l) * H + h) * T * T];
      const float* row = &r.cls_attn[(static_cast<size_t>(l) * H + h) * T];
      if (l < SA) {
        for (int j = 0; j < T; ++j) ASSERT_EQ(m[j], 0.0f) << l << " " << h;
        for (int i = 0; i < T; ++i) ASSERT_EQ(m[static_cast<size_t>(i) * T], 0.0f) << l << " " << h;
        EXPECT_EQ(row[0], 0.0f);
        for (int j = 1; j < T; ++j) {
          double mean = 0;
          for (int i = 1; i < T; ++i) mean += m[static_cast<size_t>(i) * T + j];
          EXPECT_NEAR(row[j], mean / N, 1e-6);
        }
      } else {
        for (int j = 0; j < T; ++j) EXPECT_EQ(row[j], m[j]);
        for (size_t k = T; k < static_cast<size_t>(T) * T; ++k) ASSERT_EQ(m[k], 0.0f);
      }
    }
}

}  // namespace

TEST(Cait, MatchesTimmsOwnCaitAtTheTrainedAndAnotherSize) {
  const nlohmann::json meta = cait_meta();
  for (const char* file : {"model.pth", "model.safetensors"}) {
    const std::string path = fixture(kCase + file);
    ViTWeights w = load_model(path);
    const HParams& hp = w.hp;
    EXPECT_EQ(layout_name(hp.layout), "cait");
    EXPECT_EQ(hp.image_w, meta["image_size"].get<int>());
    EXPECT_EQ(hp.patch, meta["patch"].get<int>());
    EXPECT_EQ(hp.dim, meta["dim"].get<int>());
    EXPECT_EQ(hp.depth, meta["depth"].get<int>());
    EXPECT_EQ(hp.class_attn_blocks, meta["depth_ca"].get<int>());
    EXPECT_EQ(hp.num_heads, meta["heads"].get<int>());
    EXPECT_NE(hp.source.at("num_heads").find("blocks.0.attn.proj_l.weight (4, 4)"), std::string::npos);
    EXPECT_EQ(hp.tokens(), meta["tokens"].get<int>());
    EXPECT_EQ(hp.pos_prefix, 0);
    EXPECT_EQ(w.blocks[3].fc1.out, meta["mlp_ca"].get<int>());
    for (const auto& t : w.tensors) EXPECT_TRUE(t.reason.empty()) << t.name << ": " << t.reason;  // every one read
    check_size(w, "input.npy", "attn_sa.npy", "attn_ca.npy", "logits.npy", meta["tolerance"].get<double>(),
               meta["logits_tolerance"].get<double>(), std::string(file));
    // --size: timm's resample_abs_pos_embed with num_prefix_tokens=0 (CaiT's pos_embed is patches only).
    const auto& os = meta["other_size"];
    const int S2 = os["image_size"].get<int>();
    ViTWeights w2 = load_model(path);
    resample_pos_embed(w2, S2, S2);
    EXPECT_EQ(w2.hp.tokens(), 1 + (S2 / 8) * (S2 / 8));
    check_size(w2, os["input"].get<std::string>(), os["attn_sa"].get<std::string>(), os["attn_ca"].get<std::string>(),
               os["logits"].get<std::string>(), os["tolerance"].get<double>(), os["logits_tolerance"].get<double>(),
               std::string(file) + " at " + std::to_string(S2) + " px");
    EXPECT_NE(describe_model(w, path).find("class-attention block 4:"), std::string::npos);
  }
}

// The maps' forward (only up to the drawn block, batched, without keep_full) records what the full pass does.
TEST(Cait, TheDrawnBlockAloneAndABatchRecordTheSameRows) {
  ViTWeights w = load_model(fixture(kCase + "model.safetensors"));
  std::vector<int64_t> shape;
  const std::vector<float> in = read_npy(fixture(kCase + "input.npy"), &shape);
  std::vector<float> in2(in.rbegin(), in.rend());
  ForwardOptions full;
  full.to_end = true;
  const ForwardResult ref = vit_forward(w, in.data(), full);
  const ForwardResult ref2 = vit_forward(w, in2.data(), full);
  const size_t per = static_cast<size_t>(ref.heads) * ref.tokens;
  for (int l : {0, 2, 3, -1}) {
    ForwardOptions fo;
    fo.last_layer = l;
    const std::vector<ForwardResult> rs = vit_forward(w, {in.data(), in2.data()}, fo);
    const int L = resolve_layer(l, w.hp.depth);
    ASSERT_EQ(rs[0].layers, L + 1);
    for (int b = 0; b < 2; ++b) {
      const ForwardResult& want = b == 0 ? ref : ref2;
      const std::vector<float> got(rs[b].cls_attn.begin() + static_cast<long>(L * per), rs[b].cls_attn.begin() + static_cast<long>((L + 1) * per));
      const std::vector<float> exp(want.cls_attn.begin() + static_cast<long>(L * per), want.cls_attn.begin() + static_cast<long>((L + 1) * per));
      EXPECT_TRUE(all_close(got, exp, 1e-6, "block " + std::to_string(L) + " image " + std::to_string(b)));
    }
  }
  // The default view (-1) is the last class-attention block.
  EXPECT_TRUE(w.hp.is_class_attention(resolve_layer(-1, w.hp.depth)));
  EXPECT_EQ(block_name(w.hp, 4), "class-attention block 4");
  EXPECT_EQ(block_name(w.hp, 2), "block 2");
}

// Token dropping (eval --perturb drop): only meta.keep.patches in the sequence, cut after pos_embed, against
// timm's own modules run the same way; the class attention over [class; kept patches] and the logits.
TEST(Cait, TokenDroppingMatchesTimmOnTheKeptPatches) {
  const nlohmann::json meta = cait_meta();
  const auto& k = meta["keep"];
  std::vector<int64_t> shape;
  const std::vector<float> in = read_npy(fixture(kCase + "input.npy"), &shape);
  const ViTWeights w = load_model(fixture(kCase + "model.pth"));
  ForwardOptions fo;
  fo.to_end = true;
  fo.keep_patches = k["patches"].get<std::vector<int>>();
  const ForwardResult r = vit_forward(w, in.data(), fo);
  ASSERT_EQ(r.tokens, 1 + static_cast<int>(fo.keep_patches->size()));
  const std::vector<float> want = read_npy(fixture(kCase + k["attn_ca"].get<std::string>()), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{2, w.hp.num_heads, r.tokens}));
  const double tol = k["tolerance"].get<double>();
  EXPECT_TRUE(all_close(ca_rows(r, 3), want, tol, "class attention, kept patches"));
  const std::vector<float> logits = read_npy(fixture(kCase + k["logits"].get<std::string>()), &shape);
  EXPECT_TRUE(all_close(r.logits, logits, meta["logits_tolerance"].get<double>(), "logits, kept patches"));
  std::printf("cait parity: token dropping largest differences: class attention %.2g, logits %.2g\n",
              largest_diff(ca_rows(r, 3), want), largest_diff(r.logits, logits));
}

// What a reader dropping a CaiT piece would draw is far from the model's own numbers (meta "traps", asserted
// by the generator at > 100 x tolerance); here: the same file with the talking heads or the LayerScale
// replaced by identity in attnmap's own pass moves the default map by far more than the tolerance.
TEST(Cait, TalkingHeadsAndLayerScaleChangeTheMap) {
  const nlohmann::json meta = cait_meta();
  const double tol = meta["tolerance"].get<double>();
  std::vector<int64_t> shape;
  const std::vector<float> in = read_npy(fixture(kCase + "input.npy"), &shape);
  const ViTWeights w = load_model(fixture(kCase + "model.safetensors"));
  const ForwardResult ref = vit_forward(w, in.data(), ForwardOptions{});
  const auto moved = [&](ViTWeights v) {
    const ForwardResult r = vit_forward(v, in.data(), ForwardOptions{});
    return largest_diff(r.cls_attn, ref.cls_attn);
  };
  ViTWeights no_th = w;
  for (int l = 0; l < 3; ++l) {
    BlockWeights& b = no_th.blocks[static_cast<size_t>(l)];
    for (LinearW* p : {&b.proj_l, &b.proj_w}) {
      std::vector<float> eye(16, 0.0f);
      for (int i = 0; i < 4; ++i) eye[static_cast<size_t>(i * 5)] = 1.0f;
      p->weight = Floats(eye);
      p->bias = Floats(std::vector<float>(4, 0.0f));
    }
  }
  EXPECT_GT(moved(no_th), 100 * tol);
  ViTWeights no_ls = w;
  for (BlockWeights& b : no_ls.blocks) b.ls1 = b.ls2 = Floats{};
  EXPECT_GT(moved(no_ls), 100 * tol);
}

// Heads: the proj_l side, and a --heads or config that says otherwise is refused by name.
TEST(Cait, HeadsComeFromProjLAndAContradictionIsRefused) {
  ModelOverrides ov;
  ov.num_heads = 8;
  try {
    load_model(fixture(kCase + "model.safetensors"), ov);
    ADD_FAILURE() << "--heads 8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("{setting:heads} says 8 heads, but blocks.0.attn.proj_l.weight (4, 4) (the "
                                         "talking-heads mixing) has 4"), std::string::npos) << e.what();
  }
  ov.num_heads = 4;
  EXPECT_EQ(load_model(fixture(kCase + "model.safetensors"), ov).hp.num_heads, 4);
}

// A CaiT tensor the loader does not take (or one missing) stops the load by name.
TEST(Cait, AMissingOrUnknownTensorIsRefusedByName) {
  const std::string path = fixture(kCase + "model.safetensors");
  const auto error_of = [&](const std::function<void(RawWeights&)>& edit) {
    RawWeights raw = load_weights_safetensors(path);
    edit(raw);
    try {
      build_model(raw);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string e = error_of([](RawWeights& r) { r.tensors.erase("blocks.1.attn.proj_w.weight"); });
  EXPECT_NE(e.find("missing tensor 'blocks.1.attn.proj_w.weight' (expected shape (4, 4))"), std::string::npos) << e;
  e = error_of([](RawWeights& r) { r.tensors.erase("blocks_token_only.1.gamma_2"); });
  EXPECT_NE(e.find("missing tensor 'blocks_token_only.1.gamma_2' (expected shape (64,))"), std::string::npos) << e;
  e = error_of([](RawWeights& r) { r.tensors["blocks_token_only.0.attn.rel_pos"] = r.tensors.at("blocks.0.gamma_1"); });
  EXPECT_NE(e.find("1 tensor that the cait layout does not read and that could change the maps: "
                   "blocks_token_only.0.attn.rel_pos (64,): a relative position bias"), std::string::npos) << e;
}

// Rollout, the class-specific views and patch queries in the self-attention blocks work (issue 44; their
// numbers: test_cait_explain.cpp); what CaiT's blocks do not have (a class row in a self-attention block, patch
// queries in a class-attention block, column means) is refused by name with one line, exit 2; stats (every
// block's attention over every token) stays refused; the explorer is written; the attention views say which block is which.
TEST(Cait, TheCliDrawsRolloutExplanationsAndPatchQueriesAndRefusesWhatCaitLacks) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_cait_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string ws = " -w " + q(fixture(kCase + "model.safetensors")) + " -q";
  const std::string w = ws + " -o " + q(out);
  const std::string img = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  CliRun r = run_attnmap("render " + img + w + " --rollout");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  for (const char* view : {"chefer", "gradcam", "attn-grad"}) {
    r = run_attnmap("render " + img + w + " --explain " + view);
    EXPECT_EQ(r.status, 0) << view << r.err;
  }
  r = run_attnmap("render " + img + w + " --views 'L1/mean:q=r1c1,L1/mean:k=r0c0,rollout:q=r2c2,L4/mean:q=cls'");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const std::pair<const char*, const char*> refused[] = {
      {"rollout@L1", "a CaiT rollout ending at self-attention block 1 has no class-token row"},
      {"L1/mean:q=cls", "CaiT's class token is not in self-attention block 1"},
      {"L4/mean:q=r1c1", "in CaiT's class-attention block 4 only the class token queries"},
      {"L1/mean:received", "CaiT has no block in which every token is a query"}};
  for (const auto& [view, words] : refused) {
    r = run_attnmap("render " + img + w + " --views '" + view + "'");
    EXPECT_EQ(r.status, 2) << view << r.out << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  }

  r = run_attnmap("stats " + img + w);
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("attnmap stats reads every block's attention over every token"), std::string::npos) << r.err;
  r = run_attnmap("render " + img + w + " --explore");  // the explorer marks absent what CaiT lacks (test_explore_cait.cpp)
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  // eval's default list has rollout and the class-specific views, without a note.
  r = run_attnmap("eval -q --masks " + q(std::string(ATTNMAP_DATA_DIR) + "/composites/masks") + " " +
                  q(std::string(ATTNMAP_DATA_DIR) + "/composites/0002_bag.png") + ws);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("note: rollout"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("note: chefer, gradcam, attn-grad"), std::string::npos) << r.err;
  for (const char* view : {"\nrollout ", "\nchefer ", "\ngradcam ", "\nattn-grad "})
    EXPECT_NE(r.out.find(view), std::string::npos) << view << r.out;
  EXPECT_NE(r.out.find("L4/mean *"), std::string::npos) << r.out;  // the default view: the last class-attention block

  r = run_attnmap("render " + img + w + " --strip heads --strip layers --panel");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "chelsea.png"));
  r = run_attnmap("render " + img + ws + " --layer 0 --strip heads -o " + q(out / "l0"));
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_attnmap("inspect " + q(out / "l0" / "chelsea.png"));  // the record says whose row the map is
  EXPECT_NE(r.out.find("mean over patch queries (self-attention blocks)"), std::string::npos) << r.out;
  r = run_attnmap("render " + img + ws + " --size 48 -o " + q(out / "s48"));  // --size: timm's resample, patches only
  ASSERT_EQ(r.status, 0) << r.err;
  fs::remove_all(out);
}
