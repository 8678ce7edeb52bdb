// attnmap eval on the one view engine (issue 25): --views chooses the scored views (render's grammar, the
// first one selected); a classifier head that passes no gradient (its weights all 0, as a freshly initialised
// torchvision vit_b_16) leaves the class-specific views undefined, and eval still scores every other view,
// prints every row and exits 0.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"
#include "io/image_io.hpp"
#include "imagenet_head_model.hpp"
#include "test_util.hpp"

using namespace attnmap;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

class EvalViews : public TempDirTest {};

const fs::path kTop5 = fs::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_top5";  // 2 blocks, 7 classes, 4 images

// eval_top5's model with its classifier head's weights set to 0 (the bias kept): every logit is a constant,
// so no gradient reaches the blocks and every class-specific map is 0.
fs::path write_zero_head_model(const fs::path& dir) {
  json w = json::parse(slurp(kTop5 / "weights.json"));
  for (json& row : w["head.weight"])
    for (json& x : row) x = 0.0;
  const fs::path p = dir / "zero_head.json";
  const std::string text = w.dump();
  write_file_atomic(p.string(), std::vector<uint8_t>(text.begin(), text.end()));
  return p;
}

// eval_top5's masks plus two item masks per image (its own mask as its class, the complement as "sandal").
void write_masks_with_items(const fs::path& masks) {
  fs::create_directories(masks);
  for (const auto& e : fs::directory_iterator(kTop5 / "masks")) {
    const std::string stem = e.path().stem().string();
    const Image m = load_image(e.path().string());
    Image c = m;
    for (auto& v : c.rgb) v = v ? 0 : 255;
    fs::copy_file(e.path(), masks / e.path().filename());
    write_png((masks / (stem + "." + stem.substr(5) + ".png")).string(), m);
    write_png((masks / (stem + ".sandal.png")).string(), c);
  }
}

// The line of `table` (the text after `header`) that starts with `name` followed by a space.
std::string row_of(const std::string& out, const std::string& header, const std::string& name) {
  const size_t t = out.find(header);
  if (t == std::string::npos) return "";
  const size_t at = out.find("\n" + name + " ", t);
  if (at == std::string::npos) return "";
  return out.substr(at + 1, out.find('\n', at + 1) - at - 1);
}

}  // namespace

// A zero-gradient head: the table has every row, the class-specific ones (and their rows in the
// class-specific pointing, perturbation and sanity tables) say "undefined" with the count and the reason, the
// other views are scored on every image, one note says it for the run, and eval exits 0. The JSON carries
// null with the count.
TEST_F(EvalViews, ZeroGradientHeadLeavesTheClassSpecificRowsUndefined) {
  const fs::path w = write_zero_head_model(dir);
  write_masks_with_items(dir / "masks");
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(dir / "masks") + " " + q(kTop5 / "images") + " -w " + q(w) +
                               " --perturb drop --sanity --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
  const std::string note = "attnmap: note: chefer, gradcam, attn-grad: no score on 4 of 4 images (the map sums to 0)";
  ASSERT_NE(r.err.find(note), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(note), r.err.rfind("attnmap: note: chefer")) << "one note for the run\n" << r.err;
  const std::string views = "view             pointing";
  for (const char* v : {"L0/mean", "L1/mean *", "rollout"}) {
    const std::string row = row_of(r.out, views, v);
    EXPECT_NE(row, "") << v << "\n" << r.out;
    EXPECT_EQ(row.find("undefined"), std::string::npos) << row;
  }
  for (const char* m : {"chefer", "gradcam", "attn-grad"}) {
    EXPECT_NE(row_of(r.out, views, m).find("undefined (4 of 4 images: the map sums to 0)"), std::string::npos)
        << m << "\n" << r.out;
    EXPECT_NE(row_of(r.out, "class-specific pointing:", m).find("undefined (8 of 8 items: the map sums to 0)"),
              std::string::npos) << m << "\n" << r.out;
    EXPECT_NE(row_of(r.out, "\nperturbation (", m).find("undefined (4 of 4 images"), std::string::npos) << r.out;
    EXPECT_NE(row_of(r.out, "\nsanity (", m).find("undefined (4 of 4 images"), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("best pointing game: "), std::string::npos) << r.out;

  const json j = json::parse(slurp(js));
  const json& s = j["summary"];
  EXPECT_EQ(s["images"], 4);
  EXPECT_EQ(s["failed"], 0);
  for (const char* m : {"chefer", "gradcam", "attn-grad"}) {
    EXPECT_TRUE(s["views"][m]["pointing_game"].is_null()) << m;
    EXPECT_TRUE(s["views"][m]["energy_in_mask"].is_null()) << m;
    EXPECT_EQ(s["views"][m]["undefined"], json({{"images", 4}, {"why", "the map sums to 0"}})) << m;
    EXPECT_TRUE(s["class_pointing"]["views"][m]["asked"].is_null()) << m;
    EXPECT_EQ(s["class_pointing"]["views"][m]["undefined"]["items"], 8) << m;
    EXPECT_TRUE(s["perturbation"]["views"][m]["positive_auc"].is_null()) << m;
    EXPECT_TRUE(s["sanity"]["views"][m]["spearman"].is_null()) << m;
    for (const json& im : j["images"]) {
      EXPECT_TRUE(im["views"][m]["hit"].is_null()) << m;
      EXPECT_EQ(im["views"][m]["undefined"], "the map sums to 0") << m;
    }
  }
  for (const char* v : {"L0/mean", "L1/mean", "rollout"}) {
    EXPECT_TRUE(s["views"][v]["pointing_game"].is_number()) << v;
    EXPECT_FALSE(s["views"][v].contains("undefined")) << v;
    EXPECT_TRUE(s["perturbation"]["views"][v]["positive_auc"].is_number()) << v;
    EXPECT_EQ(s["sanity"]["views"][v]["spearman"].size(), 2u) << v;
  }
}

// --views chooses the rows (the first is the selected view, starred; the attention views keep their numbers);
// --fusions, --head and --rollout beside it, photo, and a view the model does not have are refused with one
// line naming --views (exit 2, nothing evaluated).
TEST_F(EvalViews, ViewsChooseTheRows) {
  const fs::path w = write_zero_head_model(dir);
  const std::string base = "eval -q --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images");
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap(base + " -w " + q(w) + " --views L0/mean,chefer --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(slurp(js));  // the views in table order
  EXPECT_EQ(j["selected_view"], "L0/mean");
  std::vector<std::string> names;
  for (const auto& [name, v] : j["summary"]["views"].items()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"L0/mean", "chefer"}));
  EXPECT_NE(r.out.find("\nL0/mean *"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nchefer          undefined (4 of 4 images: the map sums to 0)"), std::string::npos) << r.out;
  for (const char* absent : {"\nL1/mean ", "\nrollout ", "\ngradcam ", "\nattn-grad "})
    EXPECT_EQ(r.out.find(absent), std::string::npos) << absent << "\n" << r.out;
  EXPECT_NE(r.out.find("* selected view (the first of --views)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("attnmap: note: chefer: no score on 4 of 4 images"), std::string::npos) << r.err;

  // The same view in the default list scores the same.
  const fs::path all = dir / "all.json";
  ASSERT_EQ(run_attnmap(base + " -w " + q(w) + " --json " + q(all)).status, 0);
  EXPECT_EQ(nlohmann::ordered_json::parse(slurp(all))["summary"]["views"]["L0/mean"], j["summary"]["views"]["L0/mean"]);

  // A trained head: the first view (here class-specific) is the selected one, scored on every image.
  const CliRun t = run_attnmap(base + " -w " + q(kTop5 / "weights.json") + " --views chefer,L1/mean,rollout@L0 --json " + q(js));
  ASSERT_EQ(t.status, 0) << t.err;
  const json tj = json::parse(slurp(js));
  EXPECT_EQ(tj["selected_view"], "chefer");
  EXPECT_TRUE(tj["summary"]["views"]["chefer"]["pointing_game"].is_number());
  EXPECT_TRUE(tj["summary"]["views"].contains("rollout@L0"));
  EXPECT_EQ(t.err, "");

  auto refused = [&](const std::string& extra, const std::string& why) {
    const CliRun e = run_attnmap(base + " -w " + q(kTop5 / "weights.json") + extra);
    EXPECT_EQ(e.status, 2) << extra << ": " << e.err;
    EXPECT_EQ(e.err.rfind("attnmap: error: " + why, 0), 0u) << extra << ": " << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << extra << ": " << e.err;
    EXPECT_EQ(e.out, "") << extra;
  };
  refused(" --views L0/mean --fusions mean,max", "--fusions does not apply with --views");
  refused(" --views L0/mean --head max", "--head does not apply with --views");
  refused(" --views L0/mean --rollout", "--rollout does not apply with --views");
  refused(" --views photo,L0/mean", "--views: 'photo' is a column of `attnmap figure`");
  refused(" --views L2/mean", "--views: 'L2/mean': ");
  refused(" --views L0/mean,bogus", "--views: 'bogus': unknown view");
  refused(" --views L0/mean,L-2/mean", "--views: 'L-2/mean' names the view L0/mean a second time");
  refused(" --views L0/mean --discard 0.5", "--discard applies to the rollout views only");
  refused(" --views L0/mean --gradcam-layer 0", "--gradcam-layer applies to the gradcam view without @L<layer>");
}

// The selected rollout with its own --discard sits beside the standard rollout, under its canonical name.
TEST_F(EvalViews, SelectedRolloutWithItsDiscardKeepsTheStandardOne) {
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images") + " -w " +
                               q(kTop5 / "weights.json") + " --rollout --layer 0 --discard 0.5 --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(slurp(js));  // the views in table order
  EXPECT_EQ(j["selected_view"], "rollout@L0 discard 0.5");
  std::vector<std::string> names;
  for (const auto& [name, v] : j["summary"]["views"].items()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"L0/mean", "L1/mean", "rollout@L0 discard 0.5", "rollout", "chefer",
                                             "gradcam", "attn-grad"}));
  EXPECT_NE(r.out.find("\nrollout@L0 discard 0.5 *"), std::string::npos) << r.out;
}

// Issue 41: ground-truth names of another label set - the garment names of eval_top5's file names and of a
// labels.csv (with label_index in that set) on a torchvision-like ImageNet head - are not counted against
// the model's classes: accuracy not computed (null in the JSON, said on the terminal), one note naming the
// names, no per-row notes, every view still scored, exit 0. --labels FILE holding a map of those names to the
// model's classes computes it; a map that misses a name says so; a bad map is a usage error.
TEST_F(EvalViews, ForeignLabelNamesLeaveAccuracyUncomputedUntilMapped) {
  const fs::path w = attnmap_test::write_imagenet_head_model(dir / "imnet.json");
  const fs::path js = dir / "r.json";
  std::string base = "eval -q --masks " + q(kTop5 / "masks") + " -w " + q(w) + " --json " + q(js) + " ";
  // File names none of which names an ImageNet class: just names, no truth, no note.
  CliRun r = run_attnmap(base + q(kTop5 / "images"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("top-1 accuracy: no image has a known class"), std::string::npos) << r.out;
  EXPECT_TRUE(json::parse(slurp(js))["summary"]["top1"]["accuracy"].is_null());
  // One of them (a sandal, ImageNet class 774) names a class: the file names are labels, and the others
  // are of another label set - accuracy over the sandal alone would not be the run's.
  fs::create_directories(dir / "fimg");
  fs::create_directories(dir / "fmasks");
  for (const auto& e : fs::directory_iterator(kTop5 / "images")) {
    fs::copy_file(e.path(), dir / "fimg" / e.path().filename());
    fs::copy_file(kTop5 / "masks" / e.path().filename(), dir / "fmasks" / e.path().filename());
  }
  fs::copy_file(kTop5 / "images" / "0000_coat.png", dir / "fimg" / "0004_sandal.png");
  fs::copy_file(kTop5 / "masks" / "0000_coat.png", dir / "fmasks" / "0004_sandal.png");
  const std::string note = "attnmap: note: labels 'coat', 'dress', 't_shirt_top', 'trouser' (the file names) are not among "
                           "the model's 1000 class names (ImageNet-1k's, assumed for a 1000-class head without names): "
                           "top-1 accuracy not computed; --labels FILE maps them to the model's classes (docs/evaluation.md)\n";
  r = run_attnmap("eval -q --masks " + q(dir / "fmasks") + " -w " + q(w) + " --json " + q(js) + " " + q(dir / "fimg"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, note);  // the one line on stderr
  EXPECT_NE(r.out.find("top-1 accuracy not computed: the ground-truth labels are not the model's class names"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("top-1 accuracy 0"), std::string::npos) << r.out;
  json j = json::parse(slurp(js));
  EXPECT_TRUE(j["summary"]["top1"]["accuracy"].is_null()) << j["summary"]["top1"].dump();
  EXPECT_TRUE(j["summary"]["top1"]["correct"].is_null());
  EXPECT_EQ(j["summary"]["top1"]["unknown_labels"], json({"coat", "dress", "t_shirt_top", "trouser"}));
  EXPECT_EQ(j["summary"]["top1"]["not_computed"], note.substr(15, note.size() - 16));
  for (const json& im : j["images"]) {
    EXPECT_TRUE(im["truth"].is_null()) << im.dump();
    EXPECT_FALSE(im["views"]["L0/mean"]["energy"].is_null());  // every view still scored
  }
  EXPECT_EQ(j["images"].size(), 5u);

  // A labels.csv of that label set, label_index in its own numbering: the same one note, no row notes.
  fs::create_directories(dir / "img");
  for (const auto& e : fs::directory_iterator(kTop5 / "images")) fs::copy_file(e.path(), dir / "img" / e.path().filename());
  std::ofstream(dir / "img" / "labels.csv") << "file,label_index,label\n0000_coat.png,4,Coat\n0001_dress.png,3,Dress\n"
                                               "0002_t_shirt_top.png,0,T-shirt/top\n0003_trouser.png,1,Trouser\n";
  r = run_attnmap(base + q(dir / "img"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "attnmap: note: labels 'Coat', 'Dress', 'T-shirt/top', 'Trouser' (" + (dir / "img" / "labels.csv").string() +
                       ") are not among the model's 1000 class names (ImageNet-1k's, assumed for a 1000-class head "
                       "without names): top-1 accuracy not computed; --labels FILE maps them to the model's classes "
                       "(docs/evaluation.md)\n");
  EXPECT_TRUE(json::parse(slurp(js))["summary"]["top1"]["accuracy"].is_null());

  // --labels FILE mapping the names (Trouser: no counterpart, its image unlabelled): accuracy over the other 3.
  std::ofstream(dir / "map.json") << R"({"Coat": "trench coat", "Dress": "gown", "T-shirt/top": 610, "Trouser": null})";
  r = run_attnmap(base + q(dir / "img") + " --labels " + q(dir / "map.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "") << "no note: every name is mapped";
  j = json::parse(slurp(js));
  EXPECT_EQ(j["summary"]["top1"]["labelled"], 3);
  EXPECT_TRUE(j["summary"]["top1"]["accuracy"].is_number());
  std::vector<json> truths;
  for (const json& im : j["images"]) truths.push_back(im["truth"]);
  EXPECT_EQ(json(truths), json({869, 578, 610, nullptr}));
  EXPECT_NE(r.out.find(" correct of 3 images with a known class"), std::string::npos) << r.out;
  // The same map as CSV applies to the file names too.
  std::ofstream(dir / "map.csv") << "label,class,class_index\ncoat,trench coat,\ndress,gown,\nt_shirt_top,,610\ntrouser,,\n";
  r = run_attnmap(base + q(kTop5 / "images") + " --labels " + q(dir / "map.csv"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(slurp(js))["summary"]["top1"]["labelled"], 3);
  // A map that misses a name: the one note says so, accuracy not computed.
  std::ofstream(dir / "part.json") << R"({"Coat": "trench coat"})";
  r = run_attnmap(base + q(dir / "img") + " --labels " + q(dir / "part.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("labels 'Dress', 'T-shirt/top', 'Trouser' ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" nor in --labels " + (dir / "part.json").string() + ": top-1 accuracy not computed"), std::string::npos) << r.err;
  EXPECT_TRUE(json::parse(slurp(js))["summary"]["top1"]["accuracy"].is_null());
  // A bad map: a usage error naming the entry, before any image; render refuses a map.
  std::ofstream(dir / "bad.json") << R"({"Coat": "overcoat"})";
  r = run_attnmap(base + q(dir / "img") + " --labels " + q(dir / "bad.json"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("\"Coat\": 'overcoat' is not one of the model's 1000 class names"), std::string::npos) << r.err;
  r = run_attnmap("render " + q(kTop5 / "images" / "0000_coat.png") + " -w " + q(w) + " -o " + q(dir / "out") + " --labels " +
                  q(dir / "map.json"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("only attnmap eval reads"), std::string::npos) << r.err;
}
