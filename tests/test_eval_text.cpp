// `attnmap eval` with a CLIP and texts (issue 43 point 5): the ground truth's class names fill --prompt and are
// the texts (or --text / --texts name them), top-1 accuracy is the zero-shot top-1 over the texts, the
// class-specific pointing asks each item's own text; checked against `attnmap render --text` on the same
// pictures (its probabilities and its per-text maps). The CLIP is tests/fixtures/clip_zero_shot (32x32 input,
// 4x4 patches); the composites are made here from its input.png.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/eval/eval_parts.hpp"
#include "engine/text/zero_shot.hpp"
#include "engine/walk.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "maps/evaluate.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

// A mask of the picture's size with the pixel box [x0, x1) x [y0, y1) set.
Image box_mask(int x0, int x1, int y0, int y1) {
  Image m{32, 32, std::vector<uint8_t>(32 * 32 * 3, 0), {}};
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x)
      for (int c = 0; c < 3; ++c) m.rgb[(static_cast<size_t>(y) * 32 + x) * 3 + c] = 255;
  return m;
}

Mask as_mask(const Image& m) { return mask_from_image(m, "test mask"); }

// imgs/0000_dog.png (the fixture's picture), imgs/0001_bird.png (mirrored), imgs/pair.png (the picture again,
// with two item masks: pair.dog on the 8x8 patch where the text "a photo of a dog."'s chefer map peaks, pair.bird
// on the one where "a photo of a bird."'s does). The class names: "dog" and "bird" from the numbered file names
// and the item masks; "pair" is no class name (not numbered).
class EvalText : public TempDirTest {
 protected:
  const std::string F = fixture("clip_zero_shot");
  std::map<std::string, Image> masks;

  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir / "imgs");
    fs::create_directories(dir / "masks");
    const Image photo = load_image(F + "/input.png");
    Image mirrored = photo;
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        for (int c = 0; c < 3; ++c)
          mirrored.rgb[(static_cast<size_t>(y) * 32 + x) * 3 + c] = photo.rgb[(static_cast<size_t>(y) * 32 + 31 - x) * 3 + c];
    write_png((dir / "imgs/0000_dog.png").string(), photo);
    write_png((dir / "imgs/0001_bird.png").string(), mirrored);
    write_png((dir / "imgs/pair.png").string(), photo);
    masks = {{"0000_dog", box_mask(0, 16, 0, 32)}, {"0001_bird", box_mask(16, 32, 0, 32)},
             {"pair", box_mask(0, 16, 0, 32)}, {"pair.dog", box_mask(24, 32, 24, 32)},
             {"pair.bird", box_mask(0, 8, 16, 24)}};
    for (const auto& [name, m] : masks) write_png((dir / "masks" / (name + ".png")).string(), m);
  }
  std::string model() const { return " -w " + q(F + "/model.safetensors") + " --vocab " + q(F); }
  CliRun eval(const std::string& extra) const {
    return run_attnmap("eval " + q(dir / "imgs") + " --masks " + q(dir / "masks") + model() + " " + extra);
  }
  nlohmann::json json(const std::string& name) const { return nlohmann::json::parse(slurp(dir / name)); }
  // render's manifest rows by input file name.
  std::map<std::string, nlohmann::json> manifest(const std::string& name) const {
    std::map<std::string, nlohmann::json> rows;
    std::istringstream lines(slurp(dir / name));
    std::string line;
    std::getline(lines, line);  // the header
    while (std::getline(lines, line)) {
      const nlohmann::json r = nlohmann::json::parse(line);
      if (r.contains("input")) rows[fs::path(r["input"].get<std::string>()).filename().string()] = r;
    }
    return rows;
  }
  // render's saved map (4x4) of a view for a text on the photo's 32x32 pixels, as eval places a map.
  std::vector<float> on_photo(const std::string& stem, const std::string& view, const std::string& text_file) const {
    std::vector<int64_t> shape;
    const std::vector<float> grid =
        read_npy((dir / "out" / (stem + "." + view + ".class-" + text_file + ".npy")).string(), &shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{4, 4}));
    return map_to_photo(grid, 4, 4, Box{0, 0, 32, 32}, 32, 32, Upsample::Bilinear);
  }
};

}  // namespace

// --prompt alone: the class names ("bird", "dog", sorted) fill the template; the report and the JSON say the
// classes are texts, from the ground truth, which template, how many. The probabilities are render's for the
// texts "a photo of a bird." and "a photo of a dog."; every class-specific score comes from render's map of
// the right text: the image's top-1 text for the views table, each item's own text for the class-specific
// pointing (chefer's maps of the two texts peak on the two items: both hit only when each asks its own text).
TEST_F(EvalText, GroundTruthNamesFillThePromptAndAreTheClasses) {
  const CliRun e = eval("--prompt 'a photo of a {}.' --json " + q(dir / "e.json"));
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_NE(e.out.find("classes: 2 texts (CLIP zero-shot: top-1 and the class-specific views are over them), the "
                       "ground truth's class names in the template 'a photo of a {}.': 'a photo of a bird.', 'a photo "
                       "of a dog.'\n"),
            std::string::npos)
      << e.out;
  EXPECT_NE(e.out.find("here each image's top-1 text;"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("2 items of different classes; each item's text asked in turn"), std::string::npos) << e.out;
  const nlohmann::json j = json("e.json");
  const nlohmann::json& z = j["zero_shot"];
  EXPECT_EQ(z["texts"], (nlohmann::json{"bird", "dog"}));
  EXPECT_EQ(z["templates"], (nlohmann::json{"a photo of a {}."}));
  EXPECT_EQ(z["prompts"], (nlohmann::json{{"a photo of a bird."}, {"a photo of a dog."}}));
  EXPECT_EQ(z["classes"], "texts");
  EXPECT_EQ(z["from"], "ground truth");
  EXPECT_EQ(z["count"], 2);
  EXPECT_EQ(z["rules"], "openai");
  EXPECT_EQ(j["summary"]["top1"]["over_texts"], 2);
  EXPECT_EQ(j["summary"]["top1"]["labelled"], 2);  // 0000_dog, 0001_bird; pair.png names no class

  // render, the same texts written out: its probabilities and its per-text maps.
  const CliRun r = run_attnmap("render " + q(dir / "imgs") + model() + " -q -o " + q(dir / "out") +
                               " --text 'a photo of a bird.' --text 'a photo of a dog.' --views chefer,gradcam,attn-grad "
                               "--class top2 --save-raw --manifest " + q(dir / "m.jsonl"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::map<std::string, nlohmann::json> rows = manifest("m.jsonl");
  const std::vector<std::string> files = text_file_labels({"a photo of a bird.", "a photo of a dog."});
  ASSERT_EQ(j["images"].size(), 3u);
  int correct = 0;
  for (const nlohmann::json& im : j["images"]) {
    const std::string name = fs::path(im["file"].get<std::string>()).filename().string();
    const std::string stem = fs::path(name).stem().string();
    ASSERT_TRUE(rows.count(name)) << name;
    const nlohmann::json& want = rows.at(name)["top5"];
    ASSERT_EQ(im["top5"].size(), 2u) << name;
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ("a photo of a " + im["top5"][k]["label"].get<std::string>() + ".", want[k]["label"]) << name;
      EXPECT_NEAR(im["top5"][k]["probability"].get<double>(), want[k]["probability"].get<double>(), 1e-5) << name;
    }
    const int top = im["predicted"].get<int>();
    EXPECT_EQ(im["top5"][0]["label"], z["texts"][top]) << name;
    if (!im["truth"].is_null()) correct += im["truth"] == im["predicted"];
    const Mask mask = as_mask(masks.at(stem));
    for (const char* view : {"chefer", "gradcam", "attn-grad"}) {  // the top-1 text's map
      const std::vector<float> m = on_photo(stem, view, files[static_cast<size_t>(top)]);
      EXPECT_EQ(im["views"][view]["hit"].get<bool>(), pointing_game(m, mask)) << name << " " << view;
      EXPECT_NEAR(im["views"][view]["energy"].get<double>(), energy_in_mask(m, mask), 1e-6) << name << " " << view;
    }
  }
  EXPECT_EQ(j["summary"]["top1"]["correct"], correct);
  // pair.png: each item asks its own text.
  const nlohmann::json& items = j["images"][2]["items"];
  ASSERT_EQ(items.size(), 2u) << j["images"][2];
  for (const nlohmann::json& it : items) {
    const int cls = it["class"].get<int>();
    const std::string item = "pair." + z["texts"][cls].get<std::string>();
    EXPECT_EQ(fs::path(it["mask"].get<std::string>()).stem().string(), item);
    for (const char* view : {"chefer", "gradcam", "attn-grad"}) {
      const std::vector<float> m = on_photo("pair", view, files[static_cast<size_t>(cls)]);
      EXPECT_EQ(it["views"][view]["asked"].get<bool>(), pointing_game(m, as_mask(masks.at(item)))) << item << " " << view;
    }
    EXPECT_TRUE(it["views"]["chefer"]["asked"].get<bool>()) << item;
  }
  EXPECT_EQ(j["summary"]["class_pointing"]["views"]["chefer"]["all_items"], 1.0);
}

// --text (here with a distractor, "cat") names the classes itself: every class the ground truth names must be
// among them (compared as eval compares labels: case, spaces and punctuation ignored), else exit 2 naming the
// missing ones, before any image and without a JSON.
TEST_F(EvalText, GivenTextsMustNameEveryGroundTruthClass) {
  const CliRun e = eval("-q --text Dog --text bird --text cat --prompt 'a photo of a {}.' --json " + q(dir / "e.json"));
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_NE(e.out.find("classes: 3 texts (CLIP zero-shot: top-1 and the class-specific views are over them), given "
                       "with --text/--texts in the template 'a photo of a {}.': 'a photo of a Dog.', 'a photo of a "
                       "bird.', 'a photo of a cat.'\n"),
            std::string::npos)
      << e.out;
  const nlohmann::json j = json("e.json");
  EXPECT_EQ(j["zero_shot"]["texts"], (nlohmann::json{"Dog", "bird", "cat"}));
  EXPECT_EQ(j["zero_shot"]["from"], "text");
  EXPECT_EQ(j["zero_shot"]["count"], 3);
  EXPECT_EQ(j["images"][0]["truth"], 0);  // 0000_dog: "Dog"
  EXPECT_EQ(j["images"][1]["truth"], 1);  // 0001_bird
  EXPECT_EQ(j["images"][0]["top5"].size(), 3u);

  const CliRun m = eval("--text dog --text cat --text fish --json " + q(dir / "m.json"));
  EXPECT_EQ(m.status, 2) << m.err;
  EXPECT_NE(m.err.find("--text: the ground truth's class name 'bird' is not among the 3 texts ('dog', 'cat', 'fish'; "
                       "compared ignoring case, spaces and punctuation)"),
            std::string::npos)
      << m.err;
  EXPECT_EQ(m.out, "");
  EXPECT_FALSE(fs::exists(dir / "m.json"));
  // Two texts naming one class (different tokens, one class to eval): refused, not scored against the first.
  const CliRun a = eval("-q --text dog --text 'DOG!' --text bird");
  EXPECT_EQ(a.status, 2) << a.err;
  EXPECT_NE(a.err.find("--text: the ground truth's class 'dog' is named by 2 texts ('dog', 'DOG!', compared ignoring "
                       "case, spaces and punctuation)"),
            std::string::npos)
      << a.err;
}

// --prompt alone where the ground truth names no class (no labels.csv, no item masks, no numbered file names):
// exit 2 saying where names are read; a --labels map beside texts: exit 2 (the texts are the classes).
TEST_F(EvalText, NoClassNamesOrALabelMapAreRefused) {
  fs::create_directories(dir / "plain" / "masks");
  write_png((dir / "plain/photo.png").string(), load_image(F + "/input.png"));
  write_png((dir / "plain/masks/photo.png").string(), box_mask(0, 16, 0, 32));
  const CliRun n = run_attnmap("eval " + q(dir / "plain/photo.png") + " --masks " + q(dir / "plain/masks") + model() +
                               " --prompt 'a photo of a {}.'");
  EXPECT_EQ(n.status, 2) << n.err;
  EXPECT_NE(n.err.find("--prompt without texts fills its {} with the class names of the ground truth, and " +
                       (dir / "plain/masks").string() + " names none"),
            std::string::npos)
      << n.err;
  const std::string map = (dir / "map.json").string();
  std::ofstream(map) << R"({"dog": "a dog", "bird": "a bird"})";
  const CliRun l = eval("--prompt 'a photo of a {}.' --labels " + q(map));
  EXPECT_EQ(l.status, 2) << l.err;
  EXPECT_NE(l.err.find("a map of ground-truth names to a classifier's classes; with texts the classes are the texts"),
            std::string::npos)
      << l.err;
}

// The class names the ground truth holds (no model): data/composites' labels.csv labels as spelled there;
// data/composites2's item masks' classes ('_' read as a space), its file names 0000_trouser_coat.png being
// names, not classes - unless a text names one of them, then every numbered file name is meant as a class.
TEST(EvalTextNames, LabelsItemMasksAndNumberedFileNames) {
  const std::string data = ATTNMAP_DATA_DIR;
  auto names = [](const std::string& folder, const std::vector<std::string>& texts) {
    std::vector<std::string> missing;
    const std::string masks = folder + "/masks";
    const std::vector<Job> jobs = plan_jobs({folder}, masks, &missing);
    return eval::truth_class_names(masks, jobs, eval::MaskIndex(masks), texts);
  };
  EXPECT_EQ(names(data + "/composites", {}), (std::vector<std::string>{"Ankle boot", "Bag", "Coat", "Dress", "Sandal",
                                                                       "Shirt", "Sneaker", "Trouser"}));
  const std::vector<std::string> items = {"ankle boot", "bag", "coat", "dress", "sandal", "shirt", "sneaker", "trouser"};
  EXPECT_EQ(names(data + "/composites2", {}), items);
  const std::vector<std::string> with = names(data + "/composites2", {"Trouser coat"});
  EXPECT_GT(with.size(), items.size());
  EXPECT_NE(std::find(with.begin(), with.end(), "trouser coat"), with.end());
}
