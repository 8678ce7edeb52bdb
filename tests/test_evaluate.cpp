// Localisation metrics (pointing game, energy-in-mask) on hand-made maps, the `attnmap eval` command on a
// one-hot model with hand-computed results and on a random timm model against PyTorch (tools/
// make_eval_fixtures.py), and the top-5 class report.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <spng.h>
#include <sys/stat.h>

#include "engine/batch.hpp"
#include "model/classify.hpp"
#include "core/error.hpp"
#include "app/commands/eval_cmd.hpp"
#include "maps/evaluate.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "engine/render.hpp"
#include "test_util.hpp"
#include "model/vit.hpp"

namespace fs = std::filesystem;
using namespace attnmap;
using nlohmann::json;

namespace {

Mask make_mask(int w, int h, const std::vector<int>& inside) {
  Mask m;
  m.width = w;
  m.height = h;
  m.inside.assign(inside.begin(), inside.end());
  return m;
}

const std::vector<std::string> kFashion = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                           "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

}  // namespace

// ---- metric functions ------------------------------------------------------------------------------------

TEST(Metrics, PointingGameHitMissAndTolerance) {
  // 3x3 map, maximum at (x=2, y=1).
  const std::vector<float> map = {0, 1, 2, 3, 4, 9, 5, 6, 7};
  EXPECT_TRUE(pointing_game(map, make_mask(3, 3, {0, 0, 0, 0, 0, 1, 0, 0, 0})));
  EXPECT_FALSE(pointing_game(map, make_mask(3, 3, {1, 1, 1, 1, 1, 0, 1, 1, 1})));
  // Object only at (x=1, y=1): distance 1 from the maximum.
  const Mask left = make_mask(3, 3, {0, 0, 0, 0, 1, 0, 0, 0, 0});
  EXPECT_FALSE(pointing_game(map, left, 0));
  EXPECT_TRUE(pointing_game(map, left, 1));
  // Object only at (x=1, y=0): distance sqrt(2).
  const Mask diag = make_mask(3, 3, {0, 1, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_FALSE(pointing_game(map, diag, 1));
  EXPECT_TRUE(pointing_game(map, diag, 2));
  EXPECT_THROW(pointing_game(map, diag, -1), Error);
  EXPECT_THROW(pointing_game({1, 2}, diag), Error);
}

TEST(Metrics, PointingGameTiesTakeTheFirstMaximumInRowMajorOrder) {
  const std::vector<float> map = {0, 0, 5, 0, 1, 0, 5, 0, 0};  // equal maxima at flat index 2 and 6
  EXPECT_EQ(argmax_pixel(map), 2u);
  EXPECT_TRUE(pointing_game(map, make_mask(3, 3, {0, 0, 1, 0, 0, 0, 0, 0, 0})));
  EXPECT_FALSE(pointing_game(map, make_mask(3, 3, {0, 0, 0, 0, 0, 0, 1, 0, 0})));
  EXPECT_EQ(argmax_pixel({NAN, 1.0f, 3.0f, NAN}), 2u);
  EXPECT_THROW(argmax_pixel({NAN, NAN}), Error);
}

TEST(Metrics, EnergyInMaskIsTheShareOfMassOnTheObject) {
  EXPECT_DOUBLE_EQ(energy_in_mask({1, 2, 3, 4}, make_mask(2, 2, {0, 1, 0, 1})), 0.6);
  EXPECT_DOUBLE_EQ(energy_in_mask({1, 2, 3, 4}, make_mask(2, 2, {1, 1, 1, 1})), 1.0);
  EXPECT_DOUBLE_EQ(energy_in_mask({0, 0, 0, 2}, make_mask(2, 2, {1, 1, 1, 0})), 0.0);
  // A uniform map scores the mask's area share: the baseline.
  const Mask m = make_mask(4, 1, {1, 0, 0, 0});
  EXPECT_DOUBLE_EQ(energy_in_mask({0.25f, 0.25f, 0.25f, 0.25f}, m), mask_area_share(m));
  EXPECT_DOUBLE_EQ(mask_area_share(m), 0.25);
  EXPECT_THROW(energy_in_mask({1, -1, 0, 0}, m), Error);
  EXPECT_THROW(energy_in_mask({0, 0, 0, 0}, m), Error);
  EXPECT_THROW(energy_in_mask({1, NAN, 0, 0}, m), Error);
  EXPECT_THROW(energy_in_mask({1, 2}, m), Error);
}

TEST(Metrics, MaskFromImageCountsAnyNonZeroChannel) {
  Image img;
  img.width = 4;
  img.height = 1;
  img.rgb = {0, 0, 0, 0, 0, 1, 255, 255, 255, 3, 0, 0};
  const Mask m = mask_from_image(img, "m.png");
  EXPECT_EQ(m.inside, (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_TRUE(m.grey_levels);
  img.rgb = {0, 0, 0, 255, 255, 255, 0, 0, 0, 255, 255, 255};
  EXPECT_FALSE(mask_from_image(img, "m.png").grey_levels);
  img.rgb = {0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0};  // 0/1 masks (a 16-bit PNG marking 1, numpy uint8 saves)
  EXPECT_FALSE(mask_from_image(img, "m.png").grey_levels);
  img.rgb = {0, 0, 0, 1, 1, 1, 0, 0, 0, 2, 2, 2};  // two object values: instance ids, not one mask
  EXPECT_TRUE(mask_from_image(img, "m.png").grey_levels);
  EXPECT_THROW(mask_from_image(Image{}, "m.png"), Error);
}

TEST(Metrics, MapToPhotoFillsTheCropBoxOnly) {
  Box box;
  box.x0 = 2;
  box.x1 = 6;
  box.y0 = 0;
  box.y1 = 2;
  const std::vector<float> m = map_to_photo({1, 2, 3, 4}, 2, 2, box, 8, 2, Upsample::Nearest);
  EXPECT_EQ(m, (std::vector<float>{0, 0, 1, 1, 2, 2, 0, 0, 0, 0, 3, 3, 4, 4, 0, 0}));
}

TEST(Labels, FromFileName) {
  EXPECT_EQ(label_from_filename("data/composites/0006_ankle_boot.png", kFashion), 9);
  EXPECT_EQ(label_from_filename("0002_t_shirt_top.png", kFashion), 0);
  EXPECT_EQ(label_from_filename("0014_shirt.png", kFashion), 6);
  EXPECT_EQ(label_from_filename("/x/Coat.jpg", kFashion), 4);
  EXPECT_EQ(label_from_filename("cat.jpg", kFashion), std::nullopt);
  EXPECT_EQ(label_from_filename("12345.png", kFashion), std::nullopt);
  EXPECT_EQ(label_from_filename("bag_0001.png", kFashion), std::nullopt);  // the label must be the whole rest
  // The numbered form NNNN_<class> is meant as a class; a plain stem or a date is not (issue 41).
  bool numbered = false;
  EXPECT_EQ(filename_label("data/composites/0006_ankle_boot.png", &numbered), "ankle_boot");
  EXPECT_TRUE(numbered);
  EXPECT_EQ(filename_label("cat.jpg", &numbered), "cat");
  EXPECT_FALSE(numbered);
  EXPECT_EQ(filename_label("2024-05-01_beach.jpg", &numbered), "05-01_beach");
  EXPECT_FALSE(numbered);
}

TEST(Labels, FromCsvByNameThenIndex) {
  const fs::path p = fs::temp_directory_path() / ("attnmap_labels_" + std::to_string(::getpid()) + ".csv");
  {
    std::ofstream f(p, std::ios::binary);
    f << "\xEF\xBB\xBF"
      << "file,label_index,label,background\r\n"
      << "0000_trouser.png,1,\"Trouser\",x.png\r\n"
      << "a.png,7,\"a \"\"quoted\"\" name\",y\n"  // unknown name: another label set, its index not used
      << "\n"
      << "b.png,,\"T-shirt/top\",z\n"
      << "c.png,42,nothing,z\n";  // index out of range, name unknown: left out
  }
  std::vector<std::string> notes;
  const auto m = read_labels_csv(p.string(), kFashion, 10, &notes);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("0000_trouser.png"), 1);
  EXPECT_EQ(m.count("a.png"), 0u);  // a name the model does not have: its label_index is of that other label set
  EXPECT_EQ(m.at("b.png"), 0);
  // Each row that names no class of the model says so, by line.
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], p.string() + ": line 3: label 'a \"quoted\" name' is not one of the model's class names");
  EXPECT_EQ(notes[1], p.string() + ": line 6: label 'nothing' is not one of the model's class names");
  // A model whose classes have no names: label_index is the only link, and used.
  const auto unnamed = read_labels_csv(p.string(), {}, 10);
  EXPECT_EQ(unnamed.at("a.png"), 7);
  EXPECT_EQ(unnamed.at("0000_trouser.png"), 1);
  EXPECT_EQ(unnamed.count("b.png"), 0u);
  // The raw rows: label and label_index as written, the line of each.
  const auto rows = read_label_rows(p.string());
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows.at("a.png").label, "a \"quoted\" name");
  EXPECT_EQ(rows.at("a.png").index, "7");
  EXPECT_EQ(rows.at("c.png").line, 6);
  notes.clear();
  {
    std::ofstream f(p);
    f << "file,label_index\nx.png,12\n";
  }
  EXPECT_TRUE(read_labels_csv(p.string(), kFashion, 10, &notes).empty());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], p.string() + ": line 2: label_index '12' is not in 0..9; the row names no class");
  {
    std::ofstream f(p);
    f << "file,label,label_index\nx.png,Coat,5\n";
  }
  notes.clear();
  EXPECT_EQ(read_labels_csv(p.string(), kFashion, 10, &notes).at("x.png"), 4);  // the name wins
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("line 2: label 'Coat' and label_index 5 disagree; the label is used"), std::string::npos) << notes[0];
  {
    std::ofstream f(p);
    f << "file,label_index\nx.png,seven\n";
  }
  EXPECT_THROW(read_labels_csv(p.string(), kFashion, 10), Error);
  {
    std::ofstream f(p);
    f << "file,colour\nx.png,red\n";
  }
  EXPECT_THROW(read_labels_csv(p.string(), kFashion, 10), Error);
  fs::remove(p);
}

// A label map (eval --labels FILE, issue 41): the user's names -> the model's classes, by name, index or none;
// told from a file of class names by its content; resolved against the model's names with errors that name
// the entry; matched before the model's own names.
TEST(Labels, MapReadResolvedAndMatched) {
  const fs::path dir = fs::temp_directory_path() / ("attnmap_map_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  const std::vector<std::string> imnet = {"tench", "purse", "sandal", "jersey, T-shirt, tee shirt"};
  const auto j = read_label_map(write("m.json", "{\"Bag\": \"purse\", \"Sandal\": 2, \"Trouser\": null}"));
  ASSERT_TRUE(j.has_value());
  ASSERT_EQ(j->size(), 3u);
  const LabelMap m = resolve_label_map(*j, imnet, 4);
  EXPECT_EQ(m.at("bag"), 1);
  EXPECT_EQ(m.at("sandal"), 2);
  EXPECT_EQ(m.at("trouser"), std::nullopt);
  // A CSV with a header label,class / class_index; quoted names with commas; an empty class: no counterpart.
  const auto c = read_label_map(write("m.csv", "label,class,class_index\nT-shirt/top,\"jersey, T-shirt, tee shirt\",\nBag,,1\nCoat,,\n"));
  ASSERT_TRUE(c.has_value());
  const LabelMap mc = resolve_label_map(*c, imnet, 4);
  EXPECT_EQ(mc.at("tshirttop"), 3);
  EXPECT_EQ(mc.at("bag"), 1);
  EXPECT_EQ(mc.at("coat"), std::nullopt);
  // Class-name files are not maps: one a line, a JSON list, keys 0..C-1, a Hugging Face config.
  EXPECT_FALSE(read_label_map(write("n.txt", "tench\npurse\n")).has_value());
  EXPECT_FALSE(read_label_map(write("n.json", "[\"tench\", \"purse\"]")).has_value());
  EXPECT_FALSE(read_label_map(write("o.json", "{\"0\": \"tench\", \"1\": \"purse\"}")).has_value());
  EXPECT_FALSE(read_label_map(write("c.json", "{\"id2label\": {\"0\": \"tench\"}, \"label2id\": {\"tench\": 0}}")).has_value());
  // Errors name the entry.
  auto error_of = [&](const std::string& text, const std::string& name) {
    try {
      resolve_label_map(*read_label_map(write(name, text)), imnet, 4);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("{\"Bag\": \"handbag\"}", "e1.json").find("\"Bag\": 'handbag' is not one of the model's 4 class names"), std::string::npos);
  EXPECT_NE(error_of("{\"Bag\": 4}", "e2.json").find("class index 4 is not in 0..3"), std::string::npos);
  EXPECT_NE(error_of("label,class\nBag,purse\nbag,tench\n", "e3.csv").find("line 3: 'bag' is mapped twice"), std::string::npos);
  EXPECT_THROW(read_label_map(write("e4.json", "{\"Bag\": [1, 2]}")), Error);
  // Matching: the map first, then the model's names; `known` false for a name neither has.
  EXPECT_EQ(match_label("BAG", imnet, m).cls, 1);
  EXPECT_TRUE(match_label("trouser", imnet, m).known);
  EXPECT_EQ(match_label("trouser", imnet, m).cls, std::nullopt);
  EXPECT_EQ(match_label("Tench", imnet, m).cls, 0);
  EXPECT_FALSE(match_label("Sneaker", imnet, m).known);
  // A row mapped through the map: its label_index is the user's, no disagreement note.
  std::vector<std::string> notes;
  bool unknown = false;
  EXPECT_EQ(row_class(LabelRow{"Bag", "8", 2}, imnet, m, 4, "", &unknown, &notes), 1);
  EXPECT_FALSE(unknown);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(row_class(LabelRow{"Sneaker", "1", 3}, imnet, m, 4, "", &unknown, &notes), std::nullopt);
  EXPECT_TRUE(unknown);
  fs::remove_all(dir);
}

TEST(Classify, TopKIsSoftmaxSortedWithNames) {
  // softmax(0, ln 2, ln 4, 0) = (1, 2, 4, 1) / 8.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(4.0f), 0.0f};
  const auto top = top_k_classes(logits, {"a", "b", "c", "d"}, 5);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].first, "c");
  EXPECT_NEAR(top[0].second, 0.5, 1e-7);
  EXPECT_EQ(top[1].first, "b");
  EXPECT_NEAR(top[1].second, 0.25, 1e-7);
  EXPECT_EQ(top[2].first, "a");  // tie with "d": the lower index first
  EXPECT_NEAR(top[2].second, 0.125, 1e-7);
  EXPECT_EQ(top[3].first, "d");
  const auto unnamed = top_k_classes(logits, {"only one"}, 2);
  EXPECT_EQ(unnamed[0].first, "class 2");
  EXPECT_EQ(unnamed.size(), 2u);
  EXPECT_EQ(format_top_k({{"coat", 0.8125f}, {"bag", 0.1f}}), "coat 81.2%, bag 10.0%");
  EXPECT_THROW(top_k_classes({}, {}, 5), Error);
}

// ---- the eval command ------------------------------------------------------------------------------------

namespace {



class Eval : public TempDirTest {
 protected:
};

const fs::path kOneHot = fs::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_onehot";
const fs::path kTop5 = fs::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_top5";

}  // namespace

// The class token attends only to the red patch, so every view's map is one-hot there (rollout: 0.5 there,
// 0 on the other patches). Nearest upsampling puts all the mass on that patch's 4x4 pixels.
TEST_F(Eval, OneHotModelNearestGivesHandComputedScores) {
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images") + " -w " +
                           q(kOneHot / "weights.json") + " --upsample nearest --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  EXPECT_EQ(j["selected_view"], "L0/mean");
  ASSERT_EQ(j["images"].size(), 3u);
  // a: mask = the patch (hit, all mass); b: mask = the patch's left half (first maximum pixel = its top-left
  // corner: hit; half the mass); c: mask far away (miss, no mass).
  const double want_energy[3] = {1.0, 0.5, 0.0};
  const bool want_hit[3] = {true, true, false};
  const double want_area[3] = {16.0 / 256, 8.0 / 256, 16.0 / 256};
  for (size_t i = 0; i < 3; ++i) {
    const json& im = j["images"][i];
    EXPECT_EQ(fs::path(im["file"].get<std::string>()).filename().string(),
              std::string(1, char('a' + i)) + ".png");
    EXPECT_DOUBLE_EQ(im["mask_area_share"].get<double>(), want_area[i]);
    for (const char* v : {"L0/mean", "rollout"}) {
      EXPECT_EQ(im["views"][v]["hit"].get<bool>(), want_hit[i]) << i << " " << v;
      EXPECT_DOUBLE_EQ(im["views"][v]["energy"].get<double>(), want_energy[i]) << i << " " << v;
    }
  }
  const json& s = j["summary"];
  EXPECT_EQ(s["images"], 3);
  EXPECT_EQ(s["failed"], 0);
  EXPECT_TRUE(s["top1"].is_null());  // no classifier head
  const double area = (16.0 + 8.0 + 16.0) / 256 / 3;
  EXPECT_NEAR(s["mask_area_share"].get<double>(), area, 1e-15);
  for (const char* v : {"L0/mean", "rollout"}) {
    EXPECT_NEAR(s["views"][v]["pointing_game"].get<double>(), 2.0 / 3, 1e-15);
    EXPECT_NEAR(s["views"][v]["energy_in_mask"].get<double>(), 0.5, 1e-15);
    EXPECT_NEAR(s["views"][v]["energy_ratio"].get<double>(), 0.5 / area, 1e-12);
    EXPECT_NEAR(s["views"][v]["energy_ratio_per_image"].get<double>(), (16.0 + 16.0 + 0.0) / 3, 1e-12);
  }
  EXPECT_NE(r.out.find("L0/mean *"), std::string::npos) << r.out;
}

// Bilinear (pixel-centre, 4x): a one-hot interior patch spreads with 1-D weights 1/8, 3/8, 5/8, 7/8, 7/8,
// 5/8, 3/8, 1/8 (sum 4) over 8 pixels, 3 of the 4 units on the patch's own 4 pixels: (3/4)^2 = 0.5625 of
// the mass on the patch. The left half of the patch: (5/8 + 7/8) / 4 * 3/4 = 0.28125.
TEST_F(Eval, OneHotModelBilinearSpreadsTheMassAsComputedByHand) {
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images") + " -w " +
                           q(kOneHot / "weights.json") + " --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  const double want[3] = {0.5625, 0.28125, 0.0};
  const bool hit[3] = {true, true, false};
  for (size_t i = 0; i < 3; ++i)
    for (const char* v : {"L0/mean", "rollout"}) {
      EXPECT_NEAR(j["images"][i]["views"][v]["energy"].get<double>(), want[i], 1e-6) << i << " " << v;
      EXPECT_EQ(j["images"][i]["views"][v]["hit"].get<bool>(), hit[i]) << i << " " << v;
    }
}

TEST_F(Eval, ToleranceTurnsANearMissIntoAHit) {
  // Image c (nearest): first maximum pixel (x=12, y=0) on the red patch (0,3); the object is patch (3,0),
  // its nearest pixel (x=3, y=12) at distance sqrt(81 + 144) = 15: a miss within 14 pixels, a hit within 15.
  const fs::path js = dir / "r.json";
  const CliRun r =
      run_attnmap("eval -q --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images" / "c.png") + " -w " +
              q(kOneHot / "weights.json") + " --upsample nearest --tolerance 14 --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(json::parse(slurp(js))["images"][0]["views"]["L0/mean"]["hit"].get<bool>());
  const CliRun r2 =
      run_attnmap("eval -q --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images" / "c.png") + " -w " +
              q(kOneHot / "weights.json") + " --upsample nearest --tolerance 15 --json " + q(js));
  ASSERT_EQ(r2.status, 0) << r2.err;
  EXPECT_TRUE(json::parse(slurp(js))["images"][0]["views"]["L0/mean"]["hit"].get<bool>());
}

TEST_F(Eval, BadImagesFailAloneAndTheRestIsStillScored) {
  fs::create_directories(dir / "img");
  fs::create_directories(dir / "masks");
  for (const char* n : {"a", "b"}) {
    fs::copy_file(kOneHot / "images" / (std::string(n) + ".png"), dir / "img" / (std::string(n) + ".png"));
  }
  fs::copy_file(kOneHot / "masks" / "a.png", dir / "masks" / "a.png");
  Image small;  // b's mask has the wrong size
  small.width = 8;
  small.height = 8;
  small.rgb.assign(8 * 8 * 3, 255);
  write_png((dir / "masks" / "b.png").string(), small);
  fs::copy_file(kOneHot / "images" / "c.png", dir / "img" / "nomask.png");
  Image empty;  // an all-black mask
  empty.width = empty.height = 16;
  empty.rgb.assign(16 * 16 * 3, 0);
  fs::copy_file(kOneHot / "images" / "c.png", dir / "img" / "z.png");
  write_png((dir / "masks" / "z.png").string(), empty);
  const fs::path js = dir / "r.json";
  const CliRun r =
      run_attnmap("eval --masks " + q(dir / "masks") + " " + q(dir / "img") + " " + q(dir / "missing.png") +
              " -w " + q(kOneHot / "weights.json") + " --json " + q(js));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("is 8x8, the image is 16x16"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no mask named 'nomask.*'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("z.png is empty"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing.png: no such file"), std::string::npos) << r.err;
  const json j = json::parse(slurp(js));
  EXPECT_EQ(j["summary"]["images"], 1);
  EXPECT_EQ(j["summary"]["failed"], 4);
  EXPECT_EQ(j["errors"].size(), 4u);
  EXPECT_NEAR(j["images"][0]["views"]["L0/mean"]["energy"].get<double>(), 0.5625, 1e-6);
}

namespace {

// A 16-bit greyscale PNG of `v` (row-major, w x h), encoded with libspng.
std::vector<uint8_t> png16(int w, int h, const std::vector<uint16_t>& v) {
  std::vector<uint16_t> px(v);  // libspng's SPNG_FMT_PNG takes 16-bit samples in host byte order
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(w);
  ihdr.height = static_cast<uint32_t>(h);
  ihdr.bit_depth = 16;
  ihdr.color_type = SPNG_COLOR_TYPE_GRAYSCALE;
  spng_set_ihdr(ctx, &ihdr);
  int e = spng_encode_image(ctx, px.data(), px.size() * 2, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  size_t len = 0;
  void* buf = e ? nullptr : spng_get_png_buffer(ctx, &len, &e);
  std::vector<uint8_t> out;
  if (buf) out.assign(static_cast<uint8_t*>(buf), static_cast<uint8_t*>(buf) + len);
  std::free(buf);
  spng_ctx_free(ctx);
  return out;
}

// A 16-bit binary PGM (P5, maxval 65535) of `v`.
std::vector<uint8_t> pgm16(int w, int h, const std::vector<uint16_t>& v) {
  const std::string head = "P5\n" + std::to_string(w) + " " + std::to_string(h) + "\n65535\n";
  std::vector<uint8_t> out(head.begin(), head.end());
  for (uint16_t x : v) {
    out.push_back(static_cast<uint8_t>(x >> 8));
    out.push_back(static_cast<uint8_t>(x & 0xff));
  }
  return out;
}

void spit(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

}  // namespace

// Photos keep stb_image's 8-bit reading of 16-bit samples (v >> 8; PGM: scaled to 0..255, rounded); a mask
// read with keep_nonzero keeps every non-zero sample non-zero.
TEST(Metrics, SixteenBitSamplesStayNonZeroForMasks) {
  const std::vector<uint16_t> v = {0, 1, 255, 256, 65535};
  LoadOptions keep;
  keep.keep_nonzero = true;
  auto red = [](const Image& im) {
    std::vector<int> r;
    for (size_t i = 0; i < im.rgb.size(); i += 3) r.push_back(im.rgb[i]);
    return r;
  };
  const std::vector<uint8_t> png = png16(5, 1, v);
  ASSERT_FALSE(png.empty());
  EXPECT_EQ(red(decode_image(png.data(), png.size(), "m.png")), (std::vector<int>{0, 0, 0, 1, 255}));
  EXPECT_EQ(red(decode_image(png.data(), png.size(), "m.png", keep)), (std::vector<int>{0, 1, 1, 1, 255}));
  const std::vector<uint8_t> pgm = pgm16(5, 1, v);
  EXPECT_EQ(red(decode_image(pgm.data(), pgm.size(), "m.pgm")), (std::vector<int>{0, 0, 1, 1, 255}));
  EXPECT_EQ(red(decode_image(pgm.data(), pgm.size(), "m.pgm", keep)), (std::vector<int>{0, 1, 1, 1, 255}));
}

// The one-hot model's masks as 16-bit files whose object is 1 (PNG for a, PGM for b): scored as the 8-bit
// masks are (nearest: energies 1 and 0.5), not refused as empty.
TEST_F(Eval, SixteenBitMasksMarkedWithOneAreScored) {
  fs::create_directories(dir / "img");
  fs::create_directories(dir / "masks");
  for (const char* n : {"a", "b"}) {
    fs::copy_file(kOneHot / "images" / (std::string(n) + ".png"), dir / "img" / (std::string(n) + ".png"));
    const Image m = load_image((kOneHot / "masks" / (std::string(n) + ".png")).string());
    std::vector<uint16_t> v;
    for (size_t i = 0; i < m.rgb.size(); i += 3) v.push_back(m.rgb[i] | m.rgb[i + 1] | m.rgb[i + 2] ? 1 : 0);
    spit(dir / "masks" / (std::string(n) + (n[0] == 'a' ? ".png" : ".pgm")),
         n[0] == 'a' ? png16(m.width, m.height, v) : pgm16(m.width, m.height, v));
  }
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(dir / "masks") + " " + q(dir / "img") + " -w " +
                               q(kOneHot / "weights.json") + " --upsample nearest --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  ASSERT_EQ(j["images"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["images"][0]["views"]["L0/mean"]["energy"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["images"][1]["views"]["L0/mean"]["energy"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["images"][1]["mask_area_share"].get<double>(), 8.0 / 256);
}

TEST_F(Eval, UsageErrorsExitTwo) {
  EXPECT_EQ(run_attnmap("eval " + q(kOneHot / "images")).status, 2);  // --masks missing
  EXPECT_EQ(run_attnmap("eval --masks " + q(dir / "nope") + " " + q(kOneHot / "images") + " -w " +
                    q(kOneHot / "weights.json"))
                .status,
            2);
  EXPECT_EQ(run_attnmap("eval --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images") + " -w " +
                    q(kOneHot / "weights.json") + " --layer 3")
                .status,
            2);
  EXPECT_EQ(run_attnmap("eval --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images") + " -w " +
                    q(kOneHot / "weights.json") + " --fusions mean,bogus")
                .status,
            2);
}

// --json is a file name: a name ending in a folder, an empty --fusions, a FIFO or a link to nothing are refused
// (exit 2, nothing evaluated); a link to a file is written through; a mask named as an input fails alone.
TEST_F(Eval, JsonTargetKindsAndOwnMask) {
  const std::string base =
      "eval -q --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "images") + " -w " + q(kOneHot / "weights.json");
  auto refused = [&](const std::string& extra, const std::string& why) {
    const CliRun r = run_attnmap(base + extra);
    EXPECT_EQ(r.status, 2) << extra << ": " << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << extra << ": " << r.err;
    EXPECT_EQ(r.out, "") << extra;
  };
  refused(" --json " + q((dir / "newdir").string() + "/"), "names a folder");
  EXPECT_FALSE(fs::exists(dir / "newdir"));  // not created for a refused name
  refused(" --json " + q(dir / "x" / ".."), "names a folder");
  refused(" --json " + q(dir / (std::string(300, 'n') + ".json")), "a name of 305 bytes is too long");
  refused(" --fusions ''", "--fusions expects a value, found ''");
  refused(" --fusions mean,", "--fusions expects a comma-separated list");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  refused(" --json " + q(dir / "fifo"), "is not a regular file");
  EXPECT_TRUE(fs::is_fifo(dir / "fifo"));
  fs::create_symlink("nowhere.json", dir / "dangling");
  refused(" --json " + q(dir / "dangling"), "is a symbolic link that leads to no file");
  std::ofstream(dir / "real.json") << "{}";
  fs::create_symlink("real.json", dir / "link");
  const CliRun lr = run_attnmap(base + " --json " + q(dir / "link"));
  EXPECT_EQ(lr.status, 0) << lr.err;
  EXPECT_TRUE(fs::is_symlink(dir / "link"));  // still a link; the file it names holds the results
  EXPECT_EQ(json::parse(slurp(dir / "real.json"))["summary"]["images"], 3);
  // The side configs read with the weights are refused like the weights (not created either).
  refused(" --json " + q(kOneHot / "config.json"), "is a config file read with the weights");
  EXPECT_FALSE(fs::exists(kOneHot / "config.json"));
  const CliRun man = run_attnmap("render -q " + q(kOneHot / "images") + " -w " + q(kOneHot / "weights.json") + " -o " +
                                 q(dir / "out") + " --manifest " + q(kOneHot / "preprocessor_config.json"));
  EXPECT_EQ(man.status, 2);
  EXPECT_NE(man.err.find("is a config file read with the weights"), std::string::npos) << man.err;
  EXPECT_FALSE(fs::exists(kOneHot / "preprocessor_config.json"));
  // Nor is the attnmap program itself, here named through a link to it.
  fs::create_symlink(ATTNMAP_BIN, dir / "prog");
  refused(" --json " + q(dir / "prog"), "is the attnmap program itself");
  const CliRun prog = run_attnmap("render -q " + q(kOneHot / "images") + " -w " + q(kOneHot / "weights.json") +
                                  " -o " + q(dir / "out") + " --manifest " + q(dir / "prog"));
  EXPECT_EQ(prog.status, 2);
  EXPECT_NE(prog.err.find("is the attnmap program itself"), std::string::npos) << prog.err;
  const char* loader = "/lib64/ld-linux-x86-64.so.2";  // started through it, /proc/self/exe is the loader
  if (fs::exists(loader)) {
    const CliRun ld = run_attnmap(base + " --json " + q(dir / "prog"), std::string(loader) + " ");
    EXPECT_EQ(ld.status, 2) << ld.err;
    EXPECT_NE(ld.err.find("is the attnmap program itself"), std::string::npos) << ld.err;
  }
  // A path through a folder that does not exist yet is resolved once, so "new/.." cannot reach an input
  // unnoticed, and a refusal removes nothing it did not make (here: a file where a folder is needed).
  std::ofstream(dir / "notes.txt") << "keep";
  fs::create_directories(dir / "img");
  fs::copy_file(kOneHot / "images" / "a.png", dir / "img" / "a.png");
  const std::string in_dir = "eval -q --masks " + q(kOneHot / "masks") + " " + q(dir / "img") + " -w " +
                             q(kOneHot / "weights.json") + " --json ";
  const CliRun up = run_attnmap(in_dir + q(dir / "new" / ".." / "img" / "a.png"));
  EXPECT_EQ(up.status, 2);
  EXPECT_NE(up.err.find("is an input"), std::string::npos) << up.err;
  const CliRun through = run_attnmap(in_dir + q(dir / "new" / ".." / "notes.txt" / "e.json"));
  EXPECT_EQ(through.status, 2);
  EXPECT_NE(through.err.find("cannot be resolved"), std::string::npos) << through.err;
  EXPECT_EQ(slurp(dir / "notes.txt"), "keep");
  EXPECT_FALSE(fs::exists(dir / "new"));
  // Links after a folder that does not exist yet are followed too: "new/../link/a.png" is the input itself,
  // for eval --json, render --manifest and render -o (the input folder as output folder).
  fs::create_directory_symlink(dir / "img", dir / "lnk");
  const CliRun vialink = run_attnmap(in_dir + q(dir / "new" / ".." / "lnk" / "a.png"));
  EXPECT_EQ(vialink.status, 2);
  EXPECT_NE(vialink.err.find("is an input"), std::string::npos) << vialink.err;
  const std::string render = "render -q " + q(dir / "img") + " -w " + q(kOneHot / "weights.json");
  const CliRun manlink = run_attnmap(render + " -o " + q(dir / "out") + " --manifest " + q(dir / "new" / ".." / "lnk" / "a.png"));
  EXPECT_EQ(manlink.status, 2);
  EXPECT_NE(manlink.err.find("is an input"), std::string::npos) << manlink.err;
  const CliRun outlink = run_attnmap(render + " -o " + q(dir / "new" / ".." / "lnk"));
  EXPECT_EQ(outlink.status, 2);
  EXPECT_NE(outlink.err.find("is the input folder"), std::string::npos) << outlink.err;
  // A hard link to an input is the input (the manifest is truncated in place); a FIFO would block.
  fs::create_hard_link(dir / "img" / "a.png", dir / "hard.png");
  const CliRun hard = run_attnmap(render + " -o " + q(dir / "out") + " --manifest " + q(dir / "hard.png"));
  EXPECT_EQ(hard.status, 2);
  EXPECT_NE(hard.err.find("is an input"), std::string::npos) << hard.err;
  const CliRun fifo = run_attnmap(render + " -o " + q(dir / "out") + " --manifest " + q(dir / "fifo"), "timeout 20 ");
  EXPECT_EQ(fifo.status, 2);
  EXPECT_NE(fifo.err.find("is not a regular file"), std::string::npos) << fifo.err;
  EXPECT_FALSE(fs::exists(dir / "new"));
  EXPECT_EQ(fs::file_size(dir / "img" / "a.png"), fs::file_size(kOneHot / "images" / "a.png"));
  // A file name that is not UTF-8 (names are bytes) is written with U+FFFD, not refused at the end.
  fs::create_directories(dir / "u8" / "m");
  fs::copy_file(kOneHot / "images" / "a.png", dir / "u8" / "a\xff.png");
  fs::copy_file(kOneHot / "masks" / "a.png", dir / "u8" / "m" / "a\xff.png");
  const CliRun u8 = run_attnmap("eval -q --masks " + q(dir / "u8" / "m") + " " + q(dir / "u8") + " -w " +
                                q(kOneHot / "weights.json") + " --json " + q(dir / "u8j" / "e.json"));
  EXPECT_EQ(u8.status, 0) << u8.err;
  EXPECT_NE(json::parse(slurp(dir / "u8j" / "e.json"))["images"][0]["file"].get<std::string>().find("a\xef\xbf\xbd.png"),
            std::string::npos);
  // An image named inside the masks folder is its own mask: that input fails, the others are scored.
  const CliRun own = run_attnmap("eval -q --masks " + q(kOneHot / "masks") + " " + q(kOneHot / "masks" / "a.png") +
                                 " " + q(kOneHot / "images" / "b.png") + " -w " + q(kOneHot / "weights.json"));
  EXPECT_EQ(own.status, 1) << own.err;
  EXPECT_NE(own.err.find("a.png: is inside the masks folder"), std::string::npos) << own.err;
}

// A random timm model with a 7-class head: the per-view scores and the class probabilities against the
// float64 PyTorch reference; top-1 from the file names.
TEST_F(Eval, TimmModelMatchesPyTorchAndCountsTopOne) {
  const json want = json::parse(slurp(kTop5 / "expected.json"));
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images") + " -w " +
                           q(kTop5 / "weights.json") + " --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  ASSERT_EQ(j["images"].size(), 4u);
  const int truth[4] = {4, 3, 0, 1};  // coat, dress, t_shirt_top, trouser
  int correct = 0;
  for (size_t i = 0; i < 4; ++i) {
    const json& im = j["images"][i];
    const std::string name = fs::path(im["file"].get<std::string>()).filename().string();
    const json& w = want["images"][name];
    EXPECT_EQ(im["truth"], truth[i]) << name;
    EXPECT_EQ(im["predicted"], w["predicted"]) << name;
    correct += w["predicted"].get<int>() == truth[i];
    EXPECT_DOUBLE_EQ(im["mask_area_share"].get<double>(), w["mask_area_share"].get<double>());
    for (const char* v : {"L0/mean", "L1/mean", "rollout"}) {
      EXPECT_NEAR(im["views"][v]["energy"].get<double>(), w["views"][v]["energy"].get<double>(), 2e-6)
          << name << v;
      EXPECT_EQ(im["views"][v]["hit"], w["views"][v]["hit"]) << name << v;
    }
    ASSERT_EQ(im["top5"].size(), 5u);
    const double p0 = im["top5"][0]["probability"].get<double>();
    EXPECT_NEAR(p0, w["probs"][w["predicted"].get<size_t>()].get<double>(), 1e-5) << name;
  }
  EXPECT_EQ(j["summary"]["top1"]["labelled"], 4);
  EXPECT_EQ(j["summary"]["top1"]["correct"], correct);
  EXPECT_NE(r.out.find("top-1 accuracy"), std::string::npos) << r.out;
}

TEST_F(Eval, LabelsCsvInTheMasksFolderOverridesTheFileName) {
  fs::create_directories(dir / "masks");
  for (const auto& e : fs::directory_iterator(kTop5 / "masks"))
    fs::copy_file(e.path(), dir / "masks" / e.path().filename());
  {
    std::ofstream f(dir / "masks" / "labels.csv");
    f << "file,label\n0000_coat.png,Shirt\n0001_dress.png,Sandal\n";
  }
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(dir / "masks") + " " + q(kTop5 / "images") + " -w " +
                           q(kTop5 / "weights.json") + " --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  EXPECT_EQ(j["images"][0]["truth"], 6);
  EXPECT_EQ(j["images"][1]["truth"], 5);
  EXPECT_EQ(j["images"][2]["truth"], 0);  // not in the CSV: from the file name
}

// Two masks for one image (0000_coat.png and 0000_coat.bmp) are not guessed between: that image fails,
// naming both; the others are scored.
TEST_F(Eval, TwoMasksWithOneStemFailThatImage) {
  fs::create_directories(dir / "masks");
  for (const auto& e : fs::directory_iterator(kTop5 / "masks"))
    fs::copy_file(e.path(), dir / "masks" / e.path().filename());
  const fs::path png = dir / "masks" / "0000_coat.png";
  ASSERT_TRUE(fs::exists(png));
  fs::copy_file(png, dir / "masks" / "0000_coat.bmp");  // content does not matter: the name clash does
  const CliRun r = run_attnmap("eval -q --masks " + q(dir / "masks") + " " + q(kTop5 / "images") + " -w " +
                               q(kTop5 / "weights.json"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("0000_coat.png: several masks share the stem '0000_coat' (" + (dir / "masks" / "0000_coat.bmp").string() +
                       ", " + png.string() + "); keep one"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("3 images"), std::string::npos) << r.out;
}

// ---- top-5 in render -------------------------------------------------------------------------------------

TEST_F(Eval, RenderReportsTopFiveLikePyTorch) {
  const json want = json::parse(slurp(kTop5 / "expected.json"));
  const ViTWeights model = load_model((kTop5 / "weights.json").string());
  RenderOptions opt;
  opt.out_dir = dir.string();
  const RenderContext ctx = make_render_context(model, opt);
  for (const auto& [name, w] : want["images"].items()) {
    const RenderResult res = render_image(ctx, {(kTop5 / "images" / name).string(), (dir / "x").string()});
    ASSERT_EQ(res.top5.size(), 5u) << name;
    // The reference probabilities sorted: names and values must agree.
    std::vector<std::pair<double, size_t>> ref;
    for (size_t c = 0; c < w["probs"].size(); ++c) ref.emplace_back(w["probs"][c].get<double>(), c);
    std::sort(ref.begin(), ref.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(res.top5[k].first, want["labels"][ref[k].second].get<std::string>()) << name << " rank " << k;
      EXPECT_NEAR(res.top5[k].second, ref[k].first, 1e-5) << name << " rank " << k;
    }
  }
  // Without a head: no classes, and the forward stops at the drawn layer.
  const ViTWeights seed = load_model((kOneHot / "weights.json").string());
  const RenderContext sctx = make_render_context(seed, opt);
  EXPECT_TRUE(
      render_image(sctx, {(kOneHot / "images" / "a.png").string(), (dir / "y").string()}).top5.empty());
}

TEST_F(Eval, RenderPrintsTheTopFiveLine) {
  const CliRun r = run_attnmap("render " + q(kTop5 / "images" / "0000_coat.png") + " -w " +
                           q(kTop5 / "weights.json") + " -o " + q(dir));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("top-5: Coat 63.2%, Trouser 31.5%, Pullover 4.4%, Sandal 0.4%, Shirt 0.4%"),
            std::string::npos)
      << r.out;
}

// --rollout selects rollout as the view; through block 0 alone it is (A0 + I)/2, whose patch part is half the
// L0/mean map, so its energy and hit equal L0/mean's (scale does not change either).
TEST_F(Eval, RolloutAsTheSelectedView) {
  const json want = json::parse(slurp(kTop5 / "expected.json"));
  const fs::path js = dir / "r.json";
  const CliRun r = run_attnmap("eval -q --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images") + " -w " +
                           q(kTop5 / "weights.json") + " --rollout --layer 0 --json " + q(js));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(js));
  ASSERT_EQ(j["selected_view"], "rollout@L0");
  for (const json& im : j["images"]) {
    const json& w = want["images"][fs::path(im["file"].get<std::string>()).filename().string()];
    EXPECT_NEAR(im["views"]["rollout@L0"]["energy"].get<double>(),
                w["views"]["L0/mean"]["energy"].get<double>(), 2e-6);
    EXPECT_EQ(im["views"]["rollout@L0"]["hit"], w["views"]["L0/mean"]["hit"]);
  }
  const CliRun full = run_attnmap("eval -q --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images") + " -w " +
                              q(kTop5 / "weights.json") + " --rollout --json " + q(js));
  ASSERT_EQ(full.status, 0) << full.err;
  EXPECT_EQ(json::parse(slurp(js))["selected_view"], "rollout");  // all blocks, mean: the standard rollout
  EXPECT_EQ(run_attnmap("eval -q --masks " + q(kTop5 / "masks") + " " + q(kTop5 / "images") + " -w " +
                    q(kTop5 / "weights.json") + " --discard 0.5")
                .status,
            2);  // --discard without --rollout
  // A model whose config names a default view (the bundled one: block 1, head 3): that view is the plain
  // view's default only; --rollout still defaults to every block with heads averaged, as the paper.
  const std::string comp = std::string(ATTNMAP_DATA_DIR) + "/composites";
  auto selected_view = [&](const std::string& extra) {
    const CliRun run = run_attnmap("eval -q --masks " + q(comp + "/masks") + " " + q(comp) + extra + " --json " + q(js));
    EXPECT_EQ(run.status, 0) << run.err;
    return run.status == 0 ? json::parse(slurp(js))["selected_view"].get<std::string>() : std::string();
  };
  const attnmap::HParams& dhp = attnmap::load_model(attnmap::default_weights_path()).hp;
  ASSERT_TRUE(dhp.default_layer && dhp.default_head) << "weights/default.json names no default view";
  const std::string& dh = *dhp.default_head;
  const bool index = !dh.empty() && dh.find_first_not_of("0123456789") == std::string::npos;
  EXPECT_EQ(selected_view(""), "L" + std::to_string(*dhp.default_layer) + "/" + (index ? "h" + dh : dh));
  EXPECT_EQ(selected_view(" --rollout"), "rollout");
  // Masks in the image folder itself would score every image against itself: refused.
  const CliRun same = run_attnmap("eval -q --masks " + q(comp) + " " + q(comp));
  EXPECT_EQ(same.status, 2);
  EXPECT_NE(same.err.find("is also an input folder"), std::string::npos) << same.err;
  // A --json whose folder is missing gets the folder made (as render's -o and --manifest do); one that
  // cannot be made (below a file) is refused before the evaluation, not after it.
  const CliRun nodir = run_attnmap("eval -q --masks " + q(comp + "/masks") + " " + q(comp) + " --json " +
                                   q(dir / "no" / "deeper" / "e.json"));
  EXPECT_EQ(nodir.status, 0) << nodir.err;
  EXPECT_EQ(json::parse(slurp(dir / "no" / "deeper" / "e.json"))["images"].size(), 24u);
  const CliRun underfile = run_attnmap("eval -q --masks " + q(comp + "/masks") + " " + q(comp) + " --json " +
                                       q(fs::path(js) / "sub" / "e.json"));
  EXPECT_EQ(underfile.status, 2);
  EXPECT_NE(underfile.err.find("cannot be resolved"), std::string::npos) << underfile.err;
  EXPECT_EQ(underfile.out, "");  // refused before any image was evaluated
  // A folder where no file can be made (a pseudo file system; root may write anywhere else) is found up front.
  const CliRun proc = run_attnmap("eval -q --masks " + q(comp + "/masks") + " " + q(comp) + " --json /proc/e.json");
  EXPECT_EQ(proc.status, 2);
  EXPECT_NE(proc.err.find("cannot create a file in folder /proc"), std::string::npos) << proc.err;
  EXPECT_EQ(proc.out, "");
  // The class truth, a folder and an empty name are refused up front too (on a copy: a regression must not
  // overwrite the committed labels.csv).
  const fs::path cp = dir / "comp";
  fs::create_directories(cp / "masks");
  for (const char* f : {"0000_trouser.png", "labels.csv", "masks/0000_trouser.png"}) fs::copy_file(comp + "/" + f, cp / f);
  const std::string truth_before = slurp(cp / "labels.csv");
  for (const fs::path& target : {cp / "labels.csv", cp / "masks"}) {
    const CliRun rj = run_attnmap("eval -q --masks " + q(cp / "masks") + " " + q(cp) + " --json " + q(target));
    EXPECT_EQ(rj.status, 2) << target;
    EXPECT_NE(rj.err.find(target == cp / "masks" ? "is a folder" : "is a labels.csv that eval reads"), std::string::npos)
        << rj.err;
  }
  EXPECT_EQ(slurp(cp / "labels.csv"), truth_before);
  const CliRun empty = run_attnmap("eval -q --masks " + q(cp / "masks") + " " + q(cp) + " --json ''");
  EXPECT_EQ(empty.status, 2);
  EXPECT_NE(empty.err.find("--json expects a file name"), std::string::npos) << empty.err;
}

TEST_F(Eval, ManifestLineCarriesTopFive) {
  const fs::path man = dir / "m.jsonl";
  const CliRun r =
      run_attnmap("render -q " + q(kTop5 / "images" / "0000_coat.png") + " " + q(dir / "missing.png") + " -w " +
              q(kTop5 / "weights.json") + " -o " + q(dir / "out") + " --manifest " + q(man));
  EXPECT_EQ(r.status, 1) << r.err;  // the missing file fails alone
  std::ifstream f(man);
  int seen = 0;
  for (std::string line; std::getline(f, line);) {
    const json j = json::parse(line);
    if (j.contains("attnmap_manifest")) continue;  // the run's header line
    if (j["status"] == "failed") {
      EXPECT_TRUE(j["top5"].is_null());
      continue;
    }
    ++seen;
    ASSERT_EQ(j["top5"].size(), 5u);
    EXPECT_EQ(j["top5"][0]["label"], "Coat");
    EXPECT_NEAR(j["top5"][0]["probability"].get<double>(), 0.6322093999858858, 1e-5);
    EXPECT_EQ(j["top5"][1]["label"], "Trouser");
  }
  EXPECT_EQ(seen, 1);
}

// DeiT distilled (timm VisionTransformerDistilled, eval mode): logits = (head(class token) + head_dist(
// distillation token)) / 2 on the final-LayerNorm tokens. Expected from the PyTorch tokens (tokens.npy,
// float64 reference of tools/make_fixtures.py) and the stored head weights, in double.
TEST(Classify, DeitDistilledAveragesBothHeads) {
  const std::string d = std::string(ATTNMAP_TEST_DIR) + "/fixtures/layouts/deit_distilled/";
  const ViTWeights w = load_model(d + "weights.json");
  ASSERT_TRUE(w.head.present());
  ASSERT_TRUE(w.head_dist.present());
  std::vector<int64_t> shape;
  const std::vector<float> input = read_npy(d + "input.npy", &shape);
  const std::vector<float> tok = read_npy(d + "tokens.npy", &shape);  // (T, D)
  const int D = w.hp.dim, C = w.head.out;
  ForwardOptions fo;
  fo.to_end = true;
  const ForwardResult r = vit_forward(w, input.data(), fo);
  std::vector<float> want(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) {
    double a = w.head.bias.empty() ? 0.0 : w.head.bias[static_cast<size_t>(c)];
    double b = w.head_dist.bias.empty() ? 0.0 : w.head_dist.bias[static_cast<size_t>(c)];
    for (int k = 0; k < D; ++k) {
      a += static_cast<double>(w.head.weight[static_cast<size_t>(c * D + k)]) * tok[static_cast<size_t>(k)];
      b += static_cast<double>(w.head_dist.weight[static_cast<size_t>(c * D + k)]) *
           tok[static_cast<size_t>(D + k)];
    }
    want[static_cast<size_t>(c)] = static_cast<float>((a + b) / 2);
  }
  EXPECT_TRUE(all_close(r.logits, want, 1e-4, "distilled logits"));
}
