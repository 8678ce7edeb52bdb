// attnmap eval with the explanation views (issue 19): chefer, gradcam and attn-grad are scored like the
// attention views, from the maps maps/explain.hpp computes; class-specific pointing asks each item's class;
// a hand-built model whose two classes read two different items shows the asked item follow the class.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"
#include "io/image_io.hpp"
#include "maps/evaluate.hpp"
#include "maps/explain.hpp"
#include "maps/views.hpp"
#include "model/preprocess.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class EvalExplain : public TempDirTest {};

const fs::path kTop5 = fs::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_top5";
const fs::path kOneHot = fs::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_onehot";

Mask read_mask(const fs::path& p) {
  LoadOptions lo;
  lo.keep_nonzero = true;
  return mask_from_image(load_image(p.string(), lo), p.string());
}

// What eval must compute for one image: the input as eval preprocesses it (squash) and its tape.
struct Explained {
  Image photo;
  ModelInput in;
  ForwardTape tape;
  int top1 = 0;
};

Explained explain_input(const ViTWeights& w, const fs::path& img) {
  Explained e;
  e.photo = load_image(img.string());
  const HParams& hp = w.hp;
  e.in = preprocess(e.photo, hp.image_w, hp.image_h, ResizeMode::Squash, hp.mean.data(), hp.std.data(),
                    hp.crop_pct.value_or(0.875f));
  e.tape = vit_forward_tape(w, e.in.chw.data());
  e.top1 = static_cast<int>(std::max_element(e.tape.logits.begin(), e.tape.logits.end()) - e.tape.logits.begin());
  return e;
}

// The method's map for `cls` on the photo's pixels (bilinear, eval's default).
std::vector<float> on_photo(const ViTWeights& w, const Explained& e, int cls, const ExplainRequest& req) {
  return map_to_photo(explain_map(w, e.tape, cls, req), w.hp.grid_w, w.hp.grid_h, e.in.box, e.photo.width,
                      e.photo.height, Upsample::Bilinear);
}

// eval_top5's item masks: the image's mask as its own class, the complement as "sandal" (as
// test_faithfulness.cpp), and the union as the image's mask.
void write_item_masks(const fs::path& masks) {
  fs::create_directories(masks);
  for (const auto& e : fs::directory_iterator(kTop5 / "masks")) {
    const std::string stem = e.path().stem().string();
    const Image m = load_image(e.path().string());
    Image c = m, all = m;
    for (auto& v : c.rgb) v = v ? 0 : 255;
    for (auto& v : all.rgb) v = 255;
    write_png((masks / (stem + "." + stem.substr(5) + ".png")).string(), m);
    write_png((masks / (stem + ".sandal.png")).string(), c);
    write_png((masks / (stem + ".png")).string(), all);
  }
}

const char* const kMethods[] = {"chefer", "gradcam", "attn-grad"};

ExplainRequest request(const std::string& method, int layer, int gradcam_layer) {
  ExplainRequest r;
  r.method = parse_class_specific_view(method).kind;
  r.layer = r.method == ViewKind::GradCam ? gradcam_layer : layer;
  return r;
}

}  // namespace

// Each explanation row is the pointing game and energy of the maps maps/explain.hpp makes for the image's
// top-1 class (attn-grad at the selected view's block, here the last of 2; gradcam at --gradcam-layer 0),
// per image and summed; the same maps for the attention view are not these (the rows are not copies).
TEST_F(EvalExplain, RowsArePointingAndEnergyOfTheirOwnMaps) {
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images") + " -w " +
                               q(kTop5 / "weights.json") + " --gradcam-layer 0 --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  const ViTWeights w = load_model((kTop5 / "weights.json").string());
  ASSERT_EQ(j["images"].size(), 4u);
  EXPECT_EQ(j["summary"]["explain"], json({{"target", "top-1"}, {"gradcam_layer", 0}, {"attn_grad_layer", 1}}));
  for (const char* m : kMethods) {
    double hits = 0, energy = 0;
    for (const json& im : j["images"]) {
      const fs::path img = im["file"].get<std::string>();
      const Mask mask = read_mask(kTop5 / "masks" / img.filename());
      const Explained e = explain_input(w, img);
      EXPECT_EQ(im["predicted"].get<int>(), e.top1) << img;
      const std::vector<float> map = on_photo(w, e, e.top1, request(m, 1, 0));
      const bool hit = pointing_game(map, mask, 0);
      const double en = energy_in_mask(map, mask);
      EXPECT_EQ(im["views"][m]["hit"].get<bool>(), hit) << img << " " << m;
      EXPECT_NEAR(im["views"][m]["energy"].get<double>(), en, 1e-12) << img << " " << m;
      EXPECT_GT(std::fabs(im["views"][m]["energy"].get<double>() - im["views"]["L1/mean"]["energy"].get<double>()), 1e-6)
          << img << " " << m;
      hits += hit;
      energy += en / 4;
    }
    EXPECT_DOUBLE_EQ(j["summary"]["views"][m]["pointing_game"].get<double>(), hits / 4) << m;
    EXPECT_NEAR(j["summary"]["views"][m]["energy_in_mask"].get<double>(), energy, 1e-12) << m;
    const double best = j["summary"]["baselines"]["best_pointing"].get<double>();
    EXPECT_NEAR(j["summary"]["views"][m]["margin_pointing"].get<double>(), hits / 4 - best, 1e-15) << m;
  }
}

// Two-item pointing of a class-specific view asks the item's class: for every item its method's map for
// that class (not the top-1) must peak on the item, or on the other item ("other"), as computed here.
TEST_F(EvalExplain, ItemsAreAskedTheirOwnClass) {
  write_item_masks(dir / "masks");
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(dir / "masks") + " " + q(kTop5 / "images") + " -w " +
                               q(kTop5 / "weights.json") + " --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  const ViTWeights w = load_model((kTop5 / "weights.json").string());
  int asked_not_top1 = 0;
  for (const json& im : j["images"]) {
    const Explained e = explain_input(w, im["file"].get<std::string>());
    ASSERT_EQ(im["items"].size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const json& item = im["items"][i];
      const int cls = item["class"].get<int>();
      asked_not_top1 += cls != e.top1;
      const Mask own = read_mask(item["mask"].get<std::string>());
      const Mask other = read_mask(im["items"][1 - i]["mask"].get<std::string>());
      for (const char* m : kMethods) {
        const std::vector<float> map = on_photo(w, e, cls, request(m, 1, 1));
        const bool asked = pointing_game(map, own, 0);
        EXPECT_EQ(item["views"][m]["asked"].get<bool>(), asked) << im["file"] << " " << cls << " " << m;
        EXPECT_EQ(item["views"][m]["other"].get<bool>(), !asked && pointing_game(map, other, 0)) << m;
      }
    }
  }
  EXPECT_GE(asked_not_top1, 4);  // one item per image at least is not the top-1 class
  for (const char* m : kMethods) EXPECT_TRUE(j["summary"]["class_pointing"]["views"][m]["class_specific"].get<bool>());
}

namespace {

// A one-block timm ViT made by hand, 16x16 images of 4x4 patches, D 8, one head, classes "red" and "green".
// Tokens keep a red pair (R, -R), a green pair (G, -G) and a constant pair (1, -1), so every token has mean 0
// and LayerNorm only rescales it (a zero channel stays zero). The class token's query meets a key that reads
// the green channel: it attends mostly to green patches (raw attention peaks on the green item whatever the
// class). The values carry red and green into the class token; logit(red) = 4 (red - green) of the final
// norm's output, logit(green) the negative. So d logit(red)/dA is > 0 on red patches, < 0 on green ones and
// 0 on the black background, and every method's map for "red" is 0 except on the red item (for gradcam also
// through the key's gradient: see docs/faithfulness.md). The same for "green".
json two_class_weights() {
  const int D = 8, P = 4, N = 16, M = 4;
  auto zeros = [](std::vector<int> shape) {
    std::function<json(size_t)> make = [&](size_t d) {
      json a = json::array();
      for (int i = 0; i < shape[d]; ++i) a.push_back(d + 1 == shape.size() ? json(0.0) : make(d + 1));
      return a;
    };
    return make(0);
  };
  json w;
  w["cls_token"] = zeros({1, 1, D});
  w["cls_token"][0][0][4] = 1.0;
  w["cls_token"][0][0][5] = -1.0;
  w["pos_embed"] = zeros({1, 1 + N, D});
  w["patch_embed.proj.weight"] = zeros({D, 3, P, P});
  for (int y = 0; y < P; ++y)
    for (int x = 0; x < P; ++x) {
      w["patch_embed.proj.weight"][0][0][y][x] = 1.0 / 16;  // R
      w["patch_embed.proj.weight"][1][0][y][x] = -1.0 / 16;
      w["patch_embed.proj.weight"][2][1][y][x] = 1.0 / 16;  // G
      w["patch_embed.proj.weight"][3][1][y][x] = -1.0 / 16;
    }
  w["patch_embed.proj.bias"] = zeros({D});
  w["patch_embed.proj.bias"][4] = 1.0;
  w["patch_embed.proj.bias"][5] = -1.0;
  json ones = json::array();
  for (int i = 0; i < D; ++i) ones.push_back(1.0);
  for (const char* n : {"blocks.0.norm1", "blocks.0.norm2", "norm"}) {
    w[std::string(n) + ".weight"] = ones;
    w[std::string(n) + ".bias"] = zeros({D});
  }
  json qkv = zeros({3 * D, D});
  qkv[0][4] = 1.0;          // q0 = the constant channel (the class token's)
  qkv[D + 0][2] = 3.0;      // k0 = 3 x green
  qkv[2 * D + 0][0] = 1.0;  // v0 = red
  qkv[2 * D + 1][2] = 1.0;  // v1 = green
  w["blocks.0.attn.qkv.weight"] = qkv;
  w["blocks.0.attn.qkv.bias"] = zeros({3 * D});
  json proj = zeros({D, D});
  proj[0][0] = 1.0, proj[1][0] = -1.0, proj[2][1] = 1.0, proj[3][1] = -1.0;  // back into the pairs
  w["blocks.0.attn.proj.weight"] = proj;
  w["blocks.0.attn.proj.bias"] = zeros({D});
  w["blocks.0.mlp.fc1.weight"] = zeros({M, D});
  w["blocks.0.mlp.fc1.bias"] = zeros({M});
  w["blocks.0.mlp.fc2.weight"] = zeros({D, M});
  w["blocks.0.mlp.fc2.bias"] = zeros({D});
  json head = zeros({2, D});
  const double red[4] = {2.0, -2.0, -2.0, 2.0};
  for (int c = 0; c < 4; ++c) head[0][c] = red[c], head[1][c] = -red[c];
  w["head.weight"] = head;
  w["head.bias"] = zeros({2});
  w["config"] = {{"num_heads", 1}, {"layer_norm_eps", 1e-6}, {"mean", {0, 0, 0}}, {"std", {1, 1, 1}},
                 {"patch_size", P}, {"image_size", 16}, {"labels", {"red", "green"}}};
  return w;
}

// A 16x16 black image with a red patch at grid (ry, rx) and a green one at (gy, gx); its masks: the union,
// and one per item named by `red_as` / `green_as`.
void write_pair(const fs::path& images, const fs::path& masks, const std::string& stem, int ry, int rx, int gy,
                int gx, const std::string& red_as, const std::string& green_as) {
  Image img, mr, mg, all;
  for (Image* i : {&img, &mr, &mg, &all}) {
    i->width = i->height = 16;
    i->rgb.assign(16 * 16 * 3, 0);
  }
  auto fill = [](Image& i, int py, int px, int c, uint8_t v) {
    for (int y = py * 4; y < py * 4 + 4; ++y)
      for (int x = px * 4; x < px * 4 + 4; ++x)
        for (int k = 0; k < 3; ++k)
          if (c < 0 || k == c) i.rgb[static_cast<size_t>((y * 16 + x) * 3 + k)] = v;
  };
  fill(img, ry, rx, 0, 255);
  fill(img, gy, gx, 1, 255);
  fill(mr, ry, rx, -1, 255);
  fill(mg, gy, gx, -1, 255);
  fill(all, ry, rx, -1, 255);
  fill(all, gy, gx, -1, 255);
  write_png((images / (stem + ".png")).string(), img);
  write_png((masks / (stem + ".png")).string(), all);
  write_png((masks / (stem + "." + red_as + ".png")).string(), mr);
  write_png((masks / (stem + "." + green_as + ".png")).string(), mg);
}

}  // namespace

// On the hand-built model each method's map for a class is non-zero on that class's item only (checked
// here on the maps themselves), so two-item pointing must hit every item as asked, and raw attention (on
// the green item for both classes) only half of them. With the masks' class names swapped, the same maps
// must now peak on the *other* item for every item.
TEST_F(EvalExplain, TwoItemPointingFollowsTheClassAsked) {
  const fs::path wpath = dir / "two.json";
  {
    const std::string text = two_class_weights().dump();
    write_file_atomic(wpath.string(), std::vector<uint8_t>(text.begin(), text.end()));
  }
  const ViTWeights w = load_model(wpath.string());
  for (const bool swapped : {false, true}) {
    const fs::path images = dir / (swapped ? "img_s" : "img"), masks = dir / (swapped ? "masks_s" : "masks");
    fs::create_directories(images);
    fs::create_directories(masks);
    const std::string red = swapped ? "green" : "red", green = swapped ? "red" : "green";
    write_pair(images, masks, "pair_a", 0, 1, 2, 3, red, green);
    write_pair(images, masks, "pair_b", 3, 2, 0, 0, red, green);
    if (!swapped) {  // the fixture does what it claims: a class's map lives on its item only
      const Explained e = explain_input(w, images / "pair_a.png");
      const size_t red_patch = 0 * 4 + 1, green_patch = 2 * 4 + 3;
      for (const char* m : kMethods)
        for (const int cls : {0, 1}) {
          const std::vector<float> map = explain_map(w, e.tape, cls, request(m, 0, 0));
          const size_t own = cls == 0 ? red_patch : green_patch;
          for (size_t p = 0; p < map.size(); ++p) {
            if (p == own) EXPECT_GT(map[p], 1e-4f) << m << " class " << cls;
            else EXPECT_EQ(map[p], 0.0f) << m << " class " << cls << " patch " << p;
          }
        }
    }
    const fs::path js = dir / "r.json";
    const CliRun r = run_attnmap("eval -q --masks " + q(masks) + " " + q(images) + " -w " + q(wpath) + " --json " + q(js));
    ASSERT_EQ(r.status, 0) << r.err;
    const json cp = json::parse(slurp(js))["summary"]["class_pointing"];
    ASSERT_EQ(cp["items"].get<int>(), 4) << r.out;
    for (const char* m : kMethods) {
      EXPECT_DOUBLE_EQ(cp["views"][m]["asked"].get<double>(), swapped ? 0.0 : 1.0) << m << " swapped " << swapped;
      EXPECT_DOUBLE_EQ(cp["views"][m]["other"].get<double>(), swapped ? 1.0 : 0.0) << m;
      EXPECT_DOUBLE_EQ(cp["views"][m]["all_items"].get<double>(), swapped ? 0.0 : 1.0) << m;
    }
    for (const char* v : {"L0/mean", "rollout"}) {  // class-agnostic: the green item, whatever is asked
      EXPECT_DOUBLE_EQ(cp["views"][v]["asked"].get<double>(), 0.5) << v;
      EXPECT_DOUBLE_EQ(cp["views"][v]["all_items"].get<double>(), 0.0) << v;
    }
  }
}

// The table: the explanation rows in the view, class-specific and perturbation tables (class-specific ones
// not marked "(any class)"), the footnote naming their blocks; a headless model: one note line, no rows.
TEST_F(EvalExplain, TablesHoldTheRowsAndAHeadlessModelSaysWhyNot) {
  write_item_masks(dir / "masks");
  const CliRun r = run_attnmap("eval -q --masks " + q(dir / "masks") + " " + q(kTop5 / "images") + " -w " +
                               q(kTop5 / "weights.json") + " --perturb drop");
  ASSERT_EQ(r.status, 0) << r.err;
  auto lines_starting = [&](const std::string& prefix) {
    int n = 0;
    for (size_t at = 0; (at = r.out.find("\n" + prefix, at)) != std::string::npos; ++at) ++n;
    return n;
  };
  for (const std::string m : {"chefer ", "gradcam ", "attn-grad "}) {
    EXPECT_EQ(lines_starting(m), 3) << m << "\n" << r.out;  // view, class-specific and perturbation tables
    EXPECT_EQ(r.out.find(m + "(any class)"), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("\nL1/mean (any class) "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chefer, gradcam (block 1 norm1), attn-grad (block 1): class-specific, here each image's top-1"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("asked-base"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("positive-base  negative-base"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("no class to explain"), std::string::npos) << r.err;

  const CliRun h = run_attnmap("eval -q --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images") + " -w " +
                               q(kOneHot / "weights.json"));
  ASSERT_EQ(h.status, 0) << h.err;
  EXPECT_EQ(h.err, "attnmap: note: chefer, gradcam, attn-grad: the model has no classifier head, so there is no "
                   "class to explain; those views are left out\n");
  for (const char* m : kMethods) EXPECT_EQ(h.out.find(std::string("\n") + m + " "), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("\nL0/mean *"), std::string::npos) << h.out;
  const CliRun g = run_attnmap("eval -q --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images") + " -w " +
                               q(kOneHot / "weights.json") + " --gradcam-layer 0");
  EXPECT_EQ(g.status, 2) << g.err;
  EXPECT_NE(g.err.find("--gradcam-layer: eval scores no gradcam view: "), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("has no classifier head"), std::string::npos) << g.err;
  const CliRun bad = run_attnmap("eval -q --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images") + " -w " +
                                 q(kTop5 / "weights.json") + " --gradcam-layer 2");
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_NE(bad.err.find("--gradcam-layer: layer 2 out of range"), std::string::npos) << bad.err;
}
