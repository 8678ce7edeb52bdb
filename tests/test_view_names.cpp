// Named views (maps/views.hpp; issue 17 --views, issue 19's methods as views): the grammar, resolving against
// a model, and compute_views' maps equal to the functions each view stands for, from one pass per image.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "io/npy.hpp"
#include "maps/views.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

std::string names_of(const std::vector<ResolvedView>& v) {
  std::string s;
  for (const auto& r : v) s += (s.empty() ? "" : ",") + r.name + "=" + r.tag;
  return s;
}

HParams four_by_four() {
  HParams hp;
  hp.depth = 4;
  hp.num_heads = 4;
  hp.residual_mlp = true;
  return hp;
}

std::string error_of(const std::string& list, bool has_head = true) {
  try {
    resolve_views(parse_views(list), four_by_four(), has_head, ViewSettings{});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ViewNames, ParseAndResolveToEvalsNames) {
  const HParams hp = four_by_four();
  ViewSettings st;
  st.gradcam_layer = 2;
  const auto v =
      resolve_views(parse_views("L1/h3,L-1/mean,Llast/max,L0/min,rollout,rollout/max,chefer,gradcam,"
                                "gradcam@L1,attn-grad,attn-grad@L-2,photo,L2/h-1"),
                    hp, true, st);
  EXPECT_EQ(
      names_of(v),
      "L1/h3=L1-h3,L3/mean=L3-mean,L3/max=L3-max,L0/min=L0-min,rollout=rollout,rollout/max=rollout-max,"
      "chefer=chefer,gradcam=gradcam,gradcam@L1=gradcam-L1,attn-grad=attn-grad,attn-grad@L2=attn-grad-L2,"
      "photo=photo,L2/h3=L2-h3");
  EXPECT_EQ(v[7].spec.layer, 2);  // gradcam without @L: the run's --gradcam-layer
  EXPECT_EQ(v[9].spec.layer,
            3);  // attn-grad without @L: ViewSettings::attn_grad_layer (default the last block)
  EXPECT_TRUE(v[6].class_specific);
  EXPECT_FALSE(v[4].class_specific);
  EXPECT_EQ(v[0].units, "attention probability");
  EXPECT_EQ(v[4].units, "rollout mass");
  const auto all = every_layer_views(3, parse_head("max"));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2].written, "L2/max");
}

TEST(ViewNames, BadNamesAreRefusedNamingTheItem) {
  EXPECT_NE(error_of("L3/avg").find("'L3/avg': 'avg' is not a head fusion"), std::string::npos)
      << error_of("L3/avg");
  EXPECT_NE(error_of("L9/mean").find("'L9/mean'"), std::string::npos);
  EXPECT_NE(error_of("L-5/mean").find("'L-5/mean'"), std::string::npos);
  EXPECT_NE(error_of("L1/h4").find("head 4 is out of range for 4 heads"), std::string::npos);
  EXPECT_NE(error_of("L1/h-5").find("head -5 is out of range"), std::string::npos);
  EXPECT_NE(error_of("L1").find("unknown view"), std::string::npos);
  EXPECT_NE(error_of("rolout").find("'rolout': unknown view"), std::string::npos);
  EXPECT_NE(error_of("Lx/mean").find("'x' is not a block index"), std::string::npos);
  EXPECT_NE(error_of("L3/mean,,rollout").find("an empty view"), std::string::npos);
  EXPECT_NE(error_of("").find("an empty view"), std::string::npos);
  // chefer@L<k> is Chefer's relevance from block k (issue 43; it was refused before): its refusals
  EXPECT_NE(error_of("chefer@L4").find("'chefer@L4': layer 4 out of range"), std::string::npos) << error_of("chefer@L4");
  EXPECT_NE(error_of("chefer@1").find("after '@' comes L<layer>"), std::string::npos);
  EXPECT_NE(error_of("gradcam@3").find("after '@' comes L<layer>"), std::string::npos);
  EXPECT_NE(error_of("L-1/mean,L3/mean").find("names the view L3/mean a second time"), std::string::npos);
  EXPECT_NE(error_of("L1/h3,L1/h-1").find("'L1/h-1' names the view L1/h3 a second time"), std::string::npos);
  EXPECT_NE(error_of("gradcam,gradcam@L3").find("names the view gradcam a second time"), std::string::npos);
  EXPECT_NE(error_of("attn-grad@L-1,attn-grad").find("names the view attn-grad@L3 a second time"),
            std::string::npos);
  EXPECT_EQ(error_of("gradcam,gradcam@L2"), "");
  EXPECT_NE(error_of("chefer", false).find("no classifier head"), std::string::npos);
  EXPECT_EQ(error_of("L3/mean,rollout", false), "");
  EXPECT_EQ(error_of(" L3/mean , rollout "), "");  // spaces around an item are not part of its name
  EXPECT_NE(error_of("L3/mean, ,rollout").find("an empty view"), std::string::npos);
}

namespace {

struct Fixture {
  ViTWeights model;
  std::vector<float> input;
};

Fixture timm_fixture() {
  Fixture f{load_model(fixture("layouts/timm/weights.json")),
            read_npy(fixture("layouts/timm/input.npy"), nullptr)};
  return f;
}

}  // namespace

TEST(ViewNames, AttentionAndRolloutMapsEqualTheirFunctionsFromOnePass) {
  const Fixture f = timm_fixture();
  const HParams& hp = f.model.hp;
  ViewSettings st;
  st.discard = 0.3;
  const auto views = resolve_views(parse_views("L0/h1,rollout/max,photo,L-1/mean"), hp, true, st);
  std::vector<float> logits;
  const auto maps = compute_views(f.model, f.input.data(), views, ClassSpec{}, &logits);
  ASSERT_EQ(maps.size(), 3u);  // the photo has no map
  ForwardOptions fo;
  fo.keep_full = true;
  fo.to_end = true;
  const ForwardResult r = vit_forward(f.model, f.input.data(), fo);
  EXPECT_EQ(maps[0].view, 0u);
  EXPECT_TRUE(all_close(maps[0].map, class_attention_map(r, hp, 0, parse_head("1")), 0, "L0/h1"));
  EXPECT_EQ(maps[1].view, 1u);
  EXPECT_TRUE(all_close(
      maps[1].map, class_row_map(attention_rollout(r, hp.depth - 1, parse_head("max"), 0.3), hp, r.tokens), 0,
      "rollout/max discard 0.3"));
  EXPECT_EQ(maps[2].view, 3u);
  EXPECT_TRUE(all_close(maps[2].map, class_attention_map(r, hp, hp.depth - 1, HeadSelect{}), 0, "L-1/mean"));
  EXPECT_TRUE(all_close(logits, r.logits, 0, "logits"));
  for (const auto& m : maps) EXPECT_EQ(m.class_index, -1);
}

TEST(ViewNames, ClassSpecificViewsGiveOneMapPerClassFromOneTape) {
  const Fixture f = timm_fixture();
  const HParams& hp = f.model.hp;
  ViewSettings st;
  const auto views = resolve_views(parse_views("L1/mean,chefer,gradcam@L0,attn-grad,rollout"), hp, true, st);
  ClassSpec top2;
  top2.k = 2;
  std::vector<float> logits;
  const auto maps = compute_views(f.model, f.input.data(), views, top2, &logits);
  ASSERT_EQ(maps.size(), 1u + 2 + 2 + 2 + 1);
  const ForwardTape tape = vit_forward_tape(f.model, f.input.data());
  EXPECT_TRUE(all_close(logits, tape.logits, 0, "logits"));
  const std::vector<int> cls = top_k_indices(tape.logits, 2);
  // The attention views from the tape equal vit_forward's (the same layer functions, same order).
  ForwardOptions fo;
  fo.keep_full = true;
  fo.to_end = true;
  const ForwardResult r = vit_forward(f.model, f.input.data(), fo);
  EXPECT_TRUE(
      all_close(maps[0].map, class_attention_map(r, hp, 1, HeadSelect{}), 0, "L1/mean from the tape"));
  EXPECT_TRUE(all_close(maps[7].map,
                        class_row_map(attention_rollout(r, hp.depth - 1, HeadSelect{}, 0.0), hp, r.tokens), 0,
                        "rollout from the tape"));
  ExplainRequest req;
  for (size_t k = 0; k < 2; ++k) {
    req.method = ViewKind::Chefer;
    EXPECT_EQ(maps[1 + k].class_index, cls[k]);
    EXPECT_TRUE(all_close(maps[1 + k].map, explain_map(f.model, tape, cls[k], req), 0, "chefer"));
    req.method = ViewKind::GradCam;
    req.layer = 0;
    EXPECT_TRUE(all_close(maps[3 + k].map, explain_map(f.model, tape, cls[k], req), 0, "gradcam@L0"));
    req.method = ViewKind::AttnGrad;
    req.layer = hp.depth - 1;
    EXPECT_TRUE(all_close(maps[5 + k].map, explain_map(f.model, tape, cls[k], req), 0, "attn-grad"));
  }
  EXPECT_NE(maps[1].map, maps[2].map);  // two classes, two different relevance maps
}

// Issue 25: a view has one label in every figure - the plain panel of --layer 1 --head 3 and a --views L1/h3
// panel both say "block 1, head 3" (the file and terminal names stay "L1/h3").
TEST(ViewNames, OneLabelPerViewInEveryFigure) {
  const auto views = resolve_views(parse_views("L1/h3,L-1/mean,rollout,rollout/max@L1,chefer,gradcam@L2,attn-grad"),
                                   four_by_four(), true, ViewSettings{});
  const std::vector<std::string> want = {"block 1, head 3", "block 3, mean", "rollout 0\u20133, mean",
                                         "rollout 0\u20131, max", "Chefer relevance", "Grad-CAM, block 2",
                                         "attn \u00d7 grad, block 3"};
  ASSERT_EQ(views.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(view_label(views[i]), want[i]) << views[i].name;
  EXPECT_EQ(views[3].name, "rollout/max@L1");
  EXPECT_EQ(views[3].tag, "rollout-max-L1");
}

// The run's --discard changes the rollout map (its peak 2.5x at 0.9 on the composites): its name, its label in
// every figure and eval's row say so; the file-name tag stays the plain "rollout". A view's own discard (eval's
// "rollout@L2 discard 0.1") is named once, not twice. Issue 41 item 6.
TEST(ViewNames, TheRunsDiscardIsNamedInTheRolloutsNameAndLabel) {
  ViewSettings st;
  st.discard = 0.9;
  const auto views = resolve_views(parse_views("rollout,rollout/max@L1,L1/mean"), four_by_four(), true, st);
  ASSERT_EQ(views.size(), 3u);
  EXPECT_EQ(views[0].name, "rollout discard 0.9");
  EXPECT_EQ(views[0].tag, "rollout");
  EXPECT_EQ(view_label(views[0]), "rollout 0\u20133, mean, discard 0.9");
  EXPECT_EQ(views[1].name, "rollout/max@L1 discard 0.9");
  EXPECT_EQ(view_label(views[1]), "rollout 0\u20131, max, discard 0.9");
  EXPECT_EQ(views[2].name, "L1/mean");  // not a rollout: no discard
  ViewSpec own = parse_views("rollout@L2")[0];
  own.discard = 0.1;
  const auto one = resolve_views({own}, four_by_four(), true, st);
  EXPECT_EQ(one[0].name, "rollout@L2 discard 0.1");
  EXPECT_EQ(view_label(one[0]), "rollout 0\u20132, mean, discard 0.1");
  const auto none = resolve_views(parse_views("rollout"), four_by_four(), true, ViewSettings{});
  EXPECT_EQ(none[0].name, "rollout");
  EXPECT_EQ(view_label(none[0]), "rollout 0\u20133, mean");
}
