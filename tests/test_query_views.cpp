// Issue 27: any token's row as a view - a query patch (grid position or photo pixel), a prefix token (class,
// distillation, register), a key patch's column and the column means - against the PyTorch reference
// attentions of the fixture models (tools/make_view_fixtures.py, tools/make_fixtures.py: attn.npy (L, H, T, T),
// rollout_mean.npy (L, T, T)), which the expected maps index directly. Non-square grids (3 x 5, 4 x 6),
// registers, a distillation token, the taped pass (with a class-specific view) and the CLI (flags, strips,
// a pixel query at the edge of a --resize crop box, refusals).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/weights.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "maps/views.hpp"
#include "model/vit.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

struct Reference {
  ViTWeights model;
  std::vector<float> input;  // (3, H, W)
  std::vector<float> attn;   // (L, H, T, T) from PyTorch
  int L = 0, H = 0, T = 0;
  float at(int l, int h, int i, int j) const {
    return attn[((static_cast<size_t>(l) * H + h) * T + i) * T + j];
  }
};

Reference load_reference(const std::string& folder) {
  Reference r;
  r.model = load_model(fixture(folder + "/weights.json"));
  std::vector<int64_t> shape;
  r.input = read_npy(fixture(folder + "/input.npy"), &shape);
  r.attn = read_npy(fixture(folder + "/attn.npy"), &shape);
  r.L = static_cast<int>(shape[0]);
  r.H = static_cast<int>(shape[1]);
  r.T = static_cast<int>(shape[2]);
  return r;
}

// How a reference line fuses over heads: one head, or mean / max / min of the heads' values.
float fuse(const std::vector<float>& per_head, const std::string& how) {
  if (how == "mean") {
    double s = 0;
    for (float v : per_head) s += v;
    return static_cast<float>(s / static_cast<double>(per_head.size()));
  }
  if (how == "max") return *std::max_element(per_head.begin(), per_head.end());
  if (how == "min") return *std::min_element(per_head.begin(), per_head.end());
  return per_head[static_cast<size_t>(std::stoi(how.substr(1)))];
}

// The expected map of view "L<l>/<how>" reading `line`: Row token t -> attn[l, :, t, P + j]; Column token t
// -> attn[l, :, P + i, t]; ColumnMean -> mean over every query i of attn[l, :, i, P + j].
std::vector<float> expected_map(const Reference& r, int l, const std::string& how, TokenLine line) {
  const HParams& hp = r.model.hp;
  const int N = hp.grid_w * hp.grid_h, P = hp.num_prefix;
  std::vector<float> out(static_cast<size_t>(N));
  for (int j = 0; j < N; ++j) {
    std::vector<float> per_head(static_cast<size_t>(r.H));
    for (int h = 0; h < r.H; ++h) {
      if (line.kind == TokenLine::Kind::Row) {
        per_head[static_cast<size_t>(h)] = r.at(l, h, line.token, P + j);
      } else if (line.kind == TokenLine::Kind::Column) {
        per_head[static_cast<size_t>(h)] = r.at(l, h, P + j, line.token);
      } else {
        double s = 0;
        for (int i = 0; i < r.T; ++i) s += r.at(l, h, i, P + j);
        per_head[static_cast<size_t>(h)] = static_cast<float>(s / r.T);
      }
    }
    out[static_cast<size_t>(j)] = fuse(per_head, how);
  }
  return out;
}

struct Case {
  std::string view;
  std::vector<float> want;
};

// Computes every case's view in one compute_views call (no class-specific view: one plain forward) and
// compares each map with its reference.
void check_cases(const Reference& r, const std::vector<Case>& cases, const std::string& extra_view = "",
                 double tol = 2e-6) {
  std::string list = extra_view;
  for (const Case& c : cases) list += (list.empty() ? "" : ",") + c.view;
  const std::vector<ResolvedView> views = resolve_views(parse_views(list), r.model.hp, r.model.head.present(), {});
  std::vector<float> logits;
  const std::vector<ViewMap> maps = compute_views(r.model, r.input.data(), views, parse_class_spec("top1"), &logits);
  const size_t first = extra_view.empty() ? 0 : 1;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto it = std::find_if(maps.begin(), maps.end(), [&](const ViewMap& m) { return m.view == first + c; });
    ASSERT_NE(it, maps.end()) << cases[c].view;
    EXPECT_TRUE(all_close(it->map, cases[c].want, tol, cases[c].view));
  }
}

}  // namespace

TEST(QueryViews, EveryPatchRowOfEveryBlockAndHeadMatchesPyTorchOnANonSquareGrid) {
  const Reference r = load_reference("views_rollout");  // 40 x 24 px, patch 8: grid 3 x 5, class token, 4 heads
  const HParams& hp = r.model.hp;
  ASSERT_EQ(hp.grid_h, 3);
  ASSERT_EQ(hp.grid_w, 5);
  std::vector<Case> cases;
  for (int l = 0; l < r.L; ++l)
    for (const std::string how : {"h0", "h1", "h2", "h3", "mean", "max", "min"})
      for (int row = 0; row < hp.grid_h; ++row)
        for (int col = 0; col < hp.grid_w; ++col) {
          const int t = hp.num_prefix + row * hp.grid_w + col;
          const std::string cell = "r" + std::to_string(row) + "c" + std::to_string(col);
          const std::string v = "L" + std::to_string(l) + "/" + how;
          cases.push_back({v + ":q=" + cell, expected_map(r, l, how, {TokenLine::Kind::Row, t})});
          cases.push_back({v + ":k=" + cell, expected_map(r, l, how, {TokenLine::Kind::Column, t})});
        }
  check_cases(r, cases);
  // Negative positions count from the end; the column means; q=cls is the class row (the default view).
  check_cases(r, {{"L-1/h2:q=r-1c-1", expected_map(r, 2, "h2", {TokenLine::Kind::Row, 1 + 2 * 5 + 4})},
                  {"L1/mean:received", expected_map(r, 1, "mean", {TokenLine::Kind::ColumnMean, 0})},
                  {"L0/max:received", expected_map(r, 0, "max", {TokenLine::Kind::ColumnMean, 0})},
                  {"L2/h1:q=cls", expected_map(r, 2, "h1", {TokenLine::Kind::Row, 0})}});
}

TEST(QueryViews, RolloutRowsAndColumnMeansMatchPyTorch) {
  const Reference r = load_reference("views_rollout");
  std::vector<int64_t> shape;
  const std::vector<float> R = read_npy(fixture("views_rollout/rollout_mean.npy"), &shape);  // (L, T, T)
  ASSERT_EQ(shape, (std::vector<int64_t>{3, 16, 16}));
  const int T = 16, P = 1;
  auto rollout_at = [&](int l, int i, int j) { return R[(static_cast<size_t>(l) * T + i) * T + j]; };
  std::vector<Case> cases;
  for (int l = 0; l < 3; ++l) {
    const std::string at = l == 2 ? "" : "@L" + std::to_string(l);
    std::vector<float> row(15), col(15), received(15);
    for (int j = 0; j < 15; ++j) {
      row[static_cast<size_t>(j)] = rollout_at(l, 1 + 7, P + j);  // query patch (1, 2) = token 8
      col[static_cast<size_t>(j)] = rollout_at(l, P + j, 1 + 12);  // key patch (2, 2) = token 13
      double s = 0;
      for (int i = 0; i < T; ++i) s += rollout_at(l, i, P + j);
      received[static_cast<size_t>(j)] = static_cast<float>(s / T);
    }
    cases.push_back({"rollout" + at + ":q=r1c2", row});
    cases.push_back({"rollout" + at + ":k=r2c2", col});
    cases.push_back({"rollout" + at + ":received", received});
  }
  check_cases(r, cases, "", 1e-5);
}

TEST(QueryViews, RegisterAndDistillationTokensRowsMatchPyTorch) {
  const Reference reg = load_reference("layouts/timm_reg_full");  // 32 x 48: grid 4 x 6, class + 2 registers
  ASSERT_EQ(reg.model.hp.num_registers, 2);
  check_cases(reg, {{"L0/h1:q=reg0", expected_map(reg, 0, "h1", {TokenLine::Kind::Row, 1})},
                    {"L1/mean:q=reg1", expected_map(reg, 1, "mean", {TokenLine::Kind::Row, 2})},
                    {"L1/h2:q=r3c5", expected_map(reg, 1, "h2", {TokenLine::Kind::Row, 3 + 23})},
                    {"L1/h0:k=r0c5", expected_map(reg, 1, "h0", {TokenLine::Kind::Column, 3 + 5})}});
  const Reference deit = load_reference("layouts/deit_distilled");  // class + distillation token
  ASSERT_EQ(deit.model.hp.num_dist, 1);
  check_cases(deit, {{"L1/h2:q=dist", expected_map(deit, 1, "h2", {TokenLine::Kind::Row, 1})},
                     {"L0/max:q=r0c0", expected_map(deit, 0, "max", {TokenLine::Kind::Row, 2})}});
  // The taped pass (a class-specific view in the list) reads the same rows.
  if (deit.model.head.present())
    check_cases(deit, {{"L1/h2:q=dist", expected_map(deit, 1, "h2", {TokenLine::Kind::Row, 1})},
                       {"L0/mean:received", expected_map(deit, 0, "mean", {TokenLine::Kind::ColumnMean, 0})}},
                "chefer", 2e-5);
  // view_map from a pass that kept the full matrices (eval's path) gives the same map.
  ForwardOptions fo;
  fo.keep_full = true;
  fo.to_end = true;
  const ForwardResult fwd = vit_forward(deit.model, deit.input.data(), fo);
  const ResolvedView v = resolve_views(parse_views("L1/h2:q=dist"), deit.model.hp, false, {}).front();
  EXPECT_TRUE(all_close(view_map(ViewPass{&deit.model, &fwd, nullptr}, v, -1),
                        expected_map(deit, 1, "h2", {TokenLine::Kind::Row, 1}), 2e-6, "view_map"));
}

TEST(QueryViews, TokensTheModelLacksAndPositionsOffTheGridAreRefusedByName) {
  const Reference r = load_reference("views_rollout");
  const HParams& hp = r.model.hp;
  auto refusal = [&](const std::string& list) {
    try {
      resolve_views(parse_views(list), hp, false, {});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal("L0/mean:q=dist").find("no distillation token"), std::string::npos) << refusal("L0/mean:q=dist");
  EXPECT_NE(refusal("L0/mean:q=reg0").find("no register 0 (it has 0 registers)"), std::string::npos);
  EXPECT_NE(refusal("L0/mean:q=r3c0").find("patch (3, 0) is outside the 3x5 patch grid"), std::string::npos)
      << refusal("L0/mean:q=r3c0");
  EXPECT_NE(refusal("L0/mean:k=r0c-6").find("outside the 3x5 patch grid"), std::string::npos);
  EXPECT_NE(refusal("probe:q=r0c0").find("a token query follows an attention or rollout view only"), std::string::npos);
  EXPECT_NE(refusal("L0/mean:q=eye").find("'eye' is not a query token"), std::string::npos);
  EXPECT_NE(refusal("L0/mean:z=r0c0").find("is not a token query"), std::string::npos);
  EXPECT_NE(refusal("L2/mean:q=r0c0,L-1/mean:q=r0c0").find("a second time"), std::string::npos);
  EXPECT_NE(refusal("L2/mean,L2/mean:q=cls").find("a second time"), std::string::npos);  // the class row twice
}

TEST(QueryViews, APhotoPixelFindsThePatchUnderItInsideTheBoxOnly) {
  const Reference r = load_reference("views_rollout");
  const HParams& hp = r.model.hp;  // grid 3 x 5
  const ResolvedView v = resolve_views(parse_views("L0/mean:q=x99.5y10"), hp, false, {}).front();
  // The box of a 200 x 60 photo whose middle part [50, 150) x [0, 60) the model saw (a crop).
  const Box box{50, 0, 150, 60};
  const ResolvedView p = place_query(v, hp, box);  // u = 0.495 -> column 2; w = 1/6 -> row 0
  EXPECT_EQ(p.spec.query.row, 0);
  EXPECT_EQ(p.spec.query.col, 2);
  EXPECT_EQ(p.spec.query.token, 1 + 2);
  EXPECT_EQ(marked_patch(p, hp), 2);
  EXPECT_EQ(place_query(resolve_views(parse_views("L0/mean:q=x149.9y59.9"), hp, false, {}).front(), hp, box)
                .spec.query.token,
            1 + 14);  // the last patch, at the box's far corner
  try {
    place_query(resolve_views(parse_views("L0/mean:q=x150y10"), hp, false, {}).front(), hp, box);
    ADD_FAILURE() << "x = 150 lies outside the box";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the part of the photo the model sees (x 50..150, y 0..60)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(describe_view(p), "block 0, mean, query pixel (99.5, 10)");
  EXPECT_EQ(view_label(resolve_views(parse_views("L1/h3:q=r2c4"), hp, false, {}).front()),
            "block 1, head 3, query patch (2, 4)");
  EXPECT_EQ(describe_view(resolve_views(parse_views("rollout:received"), hp, false, {}).front()),
            "rollout 0\u20132, mean, attention received");
}

class QueryViewsCli : public TempDirTest {};

// A photo of w x h pixels with some structure.
void write_photo(const fs::path& path, int w, int h) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i * 37 + i / 97) % 251);
  write_png(path.string(), img);
}

std::vector<float> npy(const fs::path& p) {
  std::vector<int64_t> shape;
  return read_npy(p.string(), &shape);
}

TEST_F(QueryViewsCli, FlagsStripsAndPixelQueriesAtTheEdgeOfACropBox) {
  const std::string w = q(fixture("timm_small/weights.json"));  // 64 x 64, patch 16: grid 4 x 4, 2 blocks
  write_photo(dir / "wide.png", 120, 80);
  // --resize crop: the shorter side to floor(64 / 0.875) = 73 px, then the centre 64 x 64: the model sees the
  // photo's middle ~70 x 70 pixels, about x 25..95. x = 93 lies in the last column, x = 27 in the first; x = 5
  // and x = 115 were cropped away.
  CliRun run = run_attnmap("render " + q(dir / "wide.png") + " -w " + w + " -o " + q(dir / "a") +
                           " --resize crop --save-raw --views 'L-1/mean:q=x93y40,L-1/mean:q=r2c3,L-1/mean:q=x27y40,"
                           "L-1/mean:q=r2c0' -q");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(all_close(npy(dir / "a/wide.L1-mean-q-x93y40.npy"), npy(dir / "a/wide.L1-mean-q-r2c3.npy"), 0, "x93"));
  EXPECT_TRUE(all_close(npy(dir / "a/wide.L1-mean-q-x27y40.npy"), npy(dir / "a/wide.L1-mean-q-r2c0.npy"), 0, "x27"));
  std::string stats;
  for (const PngText& t : read_png_text((dir / "a/wide.L1-mean-q-x93y40.png").string()))
    if (t.keyword == "attnmap:stats") stats = t.text;
  EXPECT_EQ(nlohmann::json::parse(stats)["query_patch"], nlohmann::json({2, 3})) << stats;
  for (const char* x : {"5", "115"}) {
    run = run_attnmap("render " + q(dir / "wide.png") + " -w " + w + " -o " + q(dir / ("out" + std::string(x))) +
                      " --resize crop --query x" + x + "y40 -q");
    EXPECT_EQ(run.status, 1) << x;  // this input failed
    EXPECT_NE(run.err.find("is outside the part of the photo the model sees"), std::string::npos) << run.err;
  }
  // The flag on the single view, the strips and --save-raw: the single view's file is the --views one's.
  run = run_attnmap("render " + q(dir / "wide.png") + " -w " + w + " -o " + q(dir / "b") +
                    " --query r1c2 --layer 1 --head 1 --strip heads --strip layers --panel --save-raw -q");
  ASSERT_EQ(run.status, 0) << run.err;
  run = run_attnmap("render " + q(dir / "wide.png") + " -w " + w + " -o " + q(dir / "c") +
                    " --views L1/h1:q=r1c2 --save-raw -q");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(all_close(npy(dir / "b/wide.npy"), npy(dir / "c/wide.npy"), 0, "--query = :q="));
  for (const char* f : {"b/wide.heads.png", "b/wide.layers.png", "b/wide.panel.png"}) EXPECT_TRUE(fs::exists(dir / f)) << f;
  // The record says whose row: the query the views share, or that each view names its own.
  EXPECT_NE(run_attnmap("inspect " + q(dir / "b/wide.png")).out.find("query patch (1, 2)"), std::string::npos);
  EXPECT_NE(run_attnmap("inspect " + q(dir / "a/wide.L1-mean-q-r2c3.png")).out.find("as each view names it"),
            std::string::npos);
  // --column and --received are views of their own.
  run = run_attnmap("render " + q(dir / "wide.png") + " -w " + w + " -o " + q(dir / "d") + " --column r0c0 --save-raw -q");
  ASSERT_EQ(run.status, 0) << run.err;
  run = run_attnmap("render " + q(dir / "wide.png") + " -w " + w + " -o " + q(dir / "e") +
                    " --views L-1/mean:k=r0c0 --save-raw -q");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(all_close(npy(dir / "d/wide.npy"), npy(dir / "e/wide.npy"), 0, "--column = :k="));
}

TEST_F(QueryViewsCli, RefusalsNameTheFlag) {
  const std::string base = "render " + q(fixture("../../data/chelsea.png")) + " -w " +
                           q(fixture("timm_small/weights.json")) + " -o " + q(dir / "o") + " -q ";
  struct Refusal {
    std::string args, says;
  };
  for (const Refusal& c :
       {Refusal{"--query r9c0", "--query: 'L1/mean:q=r9c0': patch (9, 0) is outside the 4x4 patch grid"},
        Refusal{"--query eye", "--query 'q=eye': 'eye' is not a query token (r<row>c<col>, x<x>y<y>, cls, dist or reg<k>)\n"},
        Refusal{"--query cls --received", "--query, --column and --received each name the line to read"},
        Refusal{"--query dist", "no distillation token"},
        Refusal{"--explain chefer --query r0c0", "--query, --column and --received choose the row of an attention view"},
        Refusal{"--views L0/mean:q=r0c0 --query r1c1", "with --views name the query in each view"},
        Refusal{"--views probe:q=r0c0", "a token query follows an attention or rollout view only"}}) {
    const CliRun run = run_attnmap(base + c.args);
    EXPECT_EQ(run.status, 2) << c.args << "\n" << run.err;
    EXPECT_NE(run.err.find(c.says), std::string::npos) << c.args << "\n" << run.err;
  }
}
