// test_words.cpp - issue 28, "words the author chooses" and the rough edges: --title, figure's row and column
// labels, --block-numbering, notes drawn only with --notes, "no confident class" for an untrained head,
// --labels FILE, ImageNet-1k names for a 1000-class head, case-insensitive class and colour-map names with
// "did you mean", and the rough edges (--ext that picks nothing, a missing input, a tiny image, an all-skipped
// run). Through the attnmap binary with the committed tiny model tests/fixtures/timm_small (10 classes) and
// variants of it whose head is rewritten.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/provenance.hpp"
#include "engine/render.hpp"
#include "checkpoint/labels.hpp"
#include "core/error.hpp"
#include "core/names.hpp"
#include "draw/colormap.hpp"
#include "draw/overlay.hpp"
#include "io/image_io.hpp"
#include "model/classify.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;
using json = nlohmann::json;

namespace {

const std::string kModel = fixture("timm_small/weights.json");

bool have(const char* tool) { return std::system(("command -v " + std::string(tool) + " >/dev/null 2>&1").c_str()) == 0; }

// The text of a PDF (pdftotext), "" when it cannot be read.
std::string pdf_text(const fs::path& pdf) {
  const fs::path txt = pdf.string() + ".txt";
  if (std::system(("pdftotext -enc UTF-8 " + q(pdf) + " " + q(txt) + " 2>/dev/null").c_str()) != 0) return "";
  std::string t = slurp(txt);
  std::replace(t.begin(), t.end(), '\n', ' ');  // a wrapped title is one line again
  return t;
}

// timm_small with its classifier head rewritten to `classes` outputs: zero weights (every image gets the same
// logits, the bias), bias 0 except `hot` (bias 10 there: ~96 % for 1000 classes), or all zero (uniform).
fs::path model_with_head(const fs::path& dir, int classes, int hot) {
  json w = json::parse(slurp(kModel));
  const size_t dim = w["head.weight"][0].size();
  w["head.weight"] = json::array();
  w["head.bias"] = json::array();
  for (int c = 0; c < classes; ++c) {
    w["head.weight"].push_back(std::vector<float>(dim, 0.0f));
    w["head.bias"].push_back(c == hot ? 10.0f : 0.0f);
  }
  const fs::path out = dir / ("head" + std::to_string(classes) + ".json");
  std::ofstream(out) << w.dump();
  return out;
}

class WordsCli : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    const Image cat = load_image(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
    write_png((dir / "cat.png").string(), resize_photo(cat, 120, 80));
    write_png((dir / "cup.png").string(), resize_photo(load_image(std::string(ATTNMAP_DATA_DIR) + "/coffee.png"), 90, 90));
  }
  std::string images() const { return q(dir / "cat.png") + " " + q(dir / "cup.png"); }
};

}  // namespace

// ---- the library parts ------------------------------------------------------------------------------------

TEST(Words, ImagenetNamesAreTorchvisionsInIndexOrder) {
  const auto& n = imagenet1k_names();
  ASSERT_EQ(n.size(), 1000u);
  EXPECT_EQ(n[0], "tench");
  EXPECT_EQ(n[1], "goldfish");
  EXPECT_EQ(n[281], "tabby");
  EXPECT_EQ(n[285], "Egyptian cat");
  EXPECT_EQ(n[999], "toilet tissue");
  EXPECT_EQ(imagenet1k_names_source(), "python3-torchvision 0.14.1-2");
}

TEST(Words, LabelsFileInEveryFormat) {
  const fs::path d = fs::temp_directory_path() / ("attnmap_labels_" + std::to_string(::getpid()));
  fs::create_directories(d);
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(d / name, std::ios::binary) << text;
    return (d / name).string();
  };
  const std::vector<std::string> want = {"tench", "goldfish", "great white shark"};
  EXPECT_EQ(read_labels_file(file("lines.txt", "tench\ngoldfish\ngreat white shark\n\n")), want);
  EXPECT_EQ(read_labels_file(file("crlf.txt", "tench\r\ngoldfish\r\ngreat white shark")), want);
  EXPECT_EQ(read_labels_file(file("list.json", R"(["tench", "goldfish", "great white shark"])")), want);
  EXPECT_EQ(read_labels_file(file("object.json", R"({"1": "goldfish", "0": "tench", "2": "great white shark"})")), want);
  EXPECT_EQ(read_labels_file(file("config.json", R"({"model_type": "vit", "id2label": {"0": "tench", "1": "goldfish",
                                                      "2": "great white shark"}})")),
            want);
  auto refused = [&](const std::string& name, const std::string& text, const std::string& words) {
    try {
      read_labels_file(file(name, text));
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(name), std::string::npos) << m;
      EXPECT_NE(m.find(words), std::string::npos) << m;
    }
  };
  refused("empty.txt", "\n \n", "empty");
  refused("gap.txt", "tench\n\ngoldfish\n", "class 1 (line 2) is empty");
  refused("bad.json", "[\"tench\", ", "not valid JSON");
  refused("number.json", "[\"tench\", 3]", "class 1 is not a string");
  refused("keys.json", R"({"0": "tench", "2": "shark"})", "found no \"1\"");
  refused("missing.txt", "", "empty");
  EXPECT_THROW(read_labels_file((d / "nonexistent.txt").string()), Error);
  fs::remove_all(d);
}

TEST(Words, ClassAndColormapNamesIgnoreCaseAndSuggest) {
  const std::vector<std::string> labels = {"Bag", "Coat", "Sandal", "Ankle boot"};
  const std::vector<float> logits = {0, 1, 2, 3};
  auto named = [&](const std::string& s) { return resolve_classes(parse_class_spec(s), logits, labels).at(0); };
  EXPECT_EQ(named("Bag"), 0);
  EXPECT_EQ(named("bag"), 0);
  EXPECT_EQ(named("BAG"), 0);
  EXPECT_EQ(named("ankle BOOT"), 3);
  try {
    named("sandl");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(did you mean 'Sandal'?)"), std::string::npos) << e.what();
  }
  try {
    named("boot");  // one word of the label
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(did you mean 'Ankle boot'?)"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(has_word("ankle boot", "boot"));
  EXPECT_FALSE(has_word("ankle boots", "boot"));
  EXPECT_TRUE(has_word("t-shirt_top", "shirt"));
  try {
    named("zebra");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();  // nothing near
    EXPECT_NE(std::string(e.what()).find("Bag, Coat, Sandal, Ankle boot"), std::string::npos) << e.what();
  }
  // An exact spelling wins over one that differs in case; two that differ only in case from the input: refused.
  EXPECT_EQ(find_name({"bag", "Bag"}, "Bag"), 1);
  EXPECT_EQ(find_name({"bag", "Bag"}, "BAG"), -2);
  EXPECT_EQ(edit_distance("magam", "magma"), 1u);  // a swap of two neighbours
  EXPECT_EQ(edit_distance("virdis", "viridis"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  // Colour maps: the known spelling, the same table.
  EXPECT_EQ(colormap_name("Viridis"), "viridis");
  EXPECT_EQ(colormap_table("INFERNO"), colormap_table("inferno"));
  try {
    colormap_table("virdis");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown colormap 'virdis' (did you mean 'viridis'?)"), std::string::npos) << e.what();
  }
}

TEST(Words, NearUniformTopOneIsNoConfidentClass) {
  EXPECT_EQ(top1_phrase({{"class 0", 0.1f}}, 10), "no confident class (top-1 10%, uniform 10%)");
  EXPECT_EQ(top1_phrase({{"tench", 0.0011f}}, 1000), "no confident class (top-1 0.11%, uniform 0.1%)");
  EXPECT_EQ(top1_phrase({{"Coat", 0.632f}}, 10), "Coat 63.2%");
  EXPECT_EQ(top1_phrase({{"Coat", 0.2f}}, 10), "Coat 20.0%");  // 2/C exactly: a class
  EXPECT_EQ(top1_phrase({}, 10), "");
  // Few classes: at most 10 points above uniform (2/C would ask a 2-class head for 100 %).
  EXPECT_EQ(top1_phrase({{"cat", 0.55f}}, 2), "no confident class (top-1 55%, uniform 50%)");
  EXPECT_EQ(top1_phrase({{"cat", 0.65f}}, 2), "cat 65.0%");
}

// ---- through the binary ----------------------------------------------------------------------------------

// --labels: one name a line; the manifest, the record and --class (any case) use them; a count mismatch is
// a usage error naming the file and both counts.
TEST_F(WordsCli, LabelsFileNamesTheClasses) {
  std::ofstream(dir / "names.txt") << "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nNine Lives\n";
  const fs::path hot = model_with_head(dir, 10, 9);  // class 9 always wins
  CliRun r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(hot) + " --labels " + q(dir / "names.txt") +
                         " -o " + q(dir / "out") + " --manifest " + q(dir / "m.jsonl") + " --views L1/mean,gradcam --class 'nine LIVES'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("top-5: Nine Lives"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gradcam, class Nine Lives 100.0% -> "), std::string::npos) << r.out;  // 'nine LIVES'
  EXPECT_TRUE(fs::exists(dir / "out" / "cat.gradcam.png")) << r.out;
  std::ifstream m(dir / "m.jsonl");
  std::string header, row;
  std::getline(m, header);
  std::getline(m, row);
  EXPECT_EQ(json::parse(row)["top5"][0]["label"], "Nine Lives");
  const auto rec = read_png_provenance((dir / "out" / "cat.L1-mean.png").string());
  ASSERT_TRUE(rec);
  EXPECT_EQ((*rec)["labels"]["file"], "names.txt");
  EXPECT_EQ((*rec)["labels"]["sha256"].get<std::string>().size(), 64u);
  // A near miss suggests the label.
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(hot) + " --labels " + q(dir / "names.txt") + " -o " +
                  q(dir / "out2") + " --explain gradcam --class nine-lifes");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("did you mean 'Nine Lives'?"), std::string::npos) << r.err;
  // Nine names for ten classes.
  std::ofstream(dir / "nine.json") << R"(["a","b","c","d","e","f","g","h","i"])";
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " --labels " + q(dir / "nine.json") + " -o " +
                  q(dir / "out3"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--labels " + (dir / "nine.json").string() + ": the classifier has 10 classes, the file names 9"),
            std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out3"));
  // figure and eval take it too.
  r = run_attnmap("figure " + q(dir / "cat.png") + " -w " + q(hot) + " --labels " + q(dir / "nine.json") +
                  " --views photo,L1/mean -o " + q(dir / "f.png"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the file names 9"), std::string::npos) << r.err;
  fs::create_directories(dir / "masks");
  r = run_attnmap("eval " + q(dir / "cat.png") + " -w " + q(hot) + " --labels " + q(dir / "nine.json") + " --masks " +
                  q(dir / "masks"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--labels " + (dir / "nine.json").string() + ": the classifier has 10 classes"), std::string::npos) << r.err;
  // The file is read by the run: no output may replace it.
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(hot) + " --labels " + q(dir / "names.txt") + " -o " +
                  q(dir / "out4") + " --manifest " + q(dir / "names.txt"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the --labels file"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir / "names.txt").substr(0, 5), "zero\n");
}

// eval reads the class truth against the --labels names: "01_seven.png" is class 7.
TEST_F(WordsCli, EvalMatchesFileNamesToTheLabelsFile) {
  std::ofstream(dir / "names.txt") << "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n";
  fs::create_directories(dir / "img");
  fs::create_directories(dir / "masks");
  fs::copy_file(dir / "cat.png", dir / "img" / "01_seven.png");
  Image mask;
  mask.width = 120;
  mask.height = 80;
  mask.rgb.assign(120 * 80 * 3, 255);
  write_png((dir / "masks" / "01_seven.png").string(), mask);
  const CliRun r = run_attnmap("eval " + q(dir / "img") + " --masks " + q(dir / "masks") + " -w " + q(kModel) +
                               " --labels " + q(dir / "names.txt") + " --json " + q(dir / "r.json") + " -q");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(slurp(dir / "r.json"));
  ASSERT_EQ(j["images"].size(), 1u);
  EXPECT_EQ(j["images"][0]["truth"], 7);
  EXPECT_EQ(j["images"][0]["top5"].size(), 5u);
  for (const auto& t : j["images"][0]["top5"]) EXPECT_NE(slurp(dir / "names.txt").find(t["label"].get<std::string>() + "\n"), std::string::npos);
}

// A 1000-class head without names gets ImageNet-1k's, with a note; the record says they were assumed.
TEST_F(WordsCli, ImagenetNamesForAThousandClassHead) {
  const fs::path model = model_with_head(dir, 1000, 281);
  CliRun r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(model) + " -o " + q(dir / "out") + " --manifest " +
                         q(dir / "m.jsonl") + " --explain gradcam --class Tabby");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("assumed to be ImageNet-1k's"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("top-5: tabby 9"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "out" / "cat.png"));
  const auto rec = read_png_provenance((dir / "out" / "cat.png").string());
  ASSERT_TRUE(rec);
  EXPECT_NE((*rec)["labels"].get<std::string>().find("assumed ImageNet-1k"), std::string::npos) << rec->dump();
  EXPECT_NE((*rec)["labels"].get<std::string>().find("python3-torchvision 0.14.1-2"), std::string::npos);
  // A 10-class head is not given them.
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " -o " + q(dir / "out2"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("ImageNet"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("top-5: class "), std::string::npos) << r.out;
}

// An untrained head (every logit equal): the panel's title says "no confident class", not "top-1: class 0".
TEST_F(WordsCli, UntrainedHeadPanelSaysNoConfidentClass) {
  if (!have("pdftotext")) GTEST_SKIP() << "pdftotext missing (tools/deps.sh test installs poppler-utils)";
  const fs::path flat = model_with_head(dir, 10, -1);
  const CliRun r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(flat) + " -o " + q(dir / "out") +
                               " --panel --figure-format pdf");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string text = pdf_text(dir / "out" / "cat.panel.pdf");
  EXPECT_NE(text.find("no confident class"), std::string::npos) << text;
  EXPECT_EQ(text.find("top-1:"), std::string::npos) << text;
}

// render: --title replaces the panel's and strips' titles ('' none), --block-numbering 1 counts blocks from 1,
// both recorded; refused without a figure.
TEST_F(WordsCli, RenderTitleAndBlockNumbering) {
  if (!have("pdftotext")) GTEST_SKIP() << "pdftotext missing";
  CliRun r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " -o " + q(dir / "out") +
                         " --layer 1 --head 2 --panel --strip layers --figure-format pdf,png --title 'A tabby, block by block' "
                         "--block-numbering 1");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string panel = pdf_text(dir / "out" / "cat.panel.pdf");
  EXPECT_NE(panel.find("A tabby, block by block"), std::string::npos) << panel;
  EXPECT_NE(panel.find("block 2, head 2"), std::string::npos) << panel;  // L1/h2
  EXPECT_EQ(panel.find("timm ViT"), std::string::npos) << panel;          // the automatic title is gone
  const std::string layers = pdf_text(dir / "out" / "cat.layers.pdf");
  EXPECT_NE(layers.find("block 1"), std::string::npos) << layers;
  EXPECT_NE(layers.find("block 2"), std::string::npos) << layers;
  EXPECT_EQ(layers.find("block 0"), std::string::npos) << layers;
  const auto rec = read_png_provenance((dir / "out" / "cat.panel.png").string());
  ASSERT_TRUE(rec);
  EXPECT_EQ((*rec)["title"], "A tabby, block by block");
  EXPECT_EQ((*rec)["block_numbering"], 1);
  // --title '': no title at all; the default numbering is not recorded.
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " -o " + q(dir / "out2") +
                  " --panel --figure-format pdf,png --title ''");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(pdf_text(dir / "out2" / "cat.panel.pdf").find("cat.png"), std::string::npos);
  const auto rec2 = read_png_provenance((dir / "out2" / "cat.panel.png").string());
  ASSERT_TRUE(rec2);
  EXPECT_EQ((*rec2)["title"], "");
  EXPECT_FALSE(rec2->contains("block_numbering"));
  // Refusals.
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " -o " + q(dir / "out3") + " --title x");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--title titles the figures"), std::string::npos) << r.err;
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " -o " + q(dir / "out3") + " --panel --block-numbering 2");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--block-numbering expects 0"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out3"));
}

// The layer strip says whose row its tiles show, as the figure's map labels do, in its title as the heads
// strip does: CaiT's self-attention blocks "blocks 0–2: patch-query mean (no class token in them)", its
// class-attention blocks named so in their tiles (the class token's row); a model without a class token says it
// in the title too (timm_gap). A token query names its row only (no "patch-query mean").
TEST_F(WordsCli, LayerStripNamesTheQueryRow) {
  if (!have("pdftotext")) GTEST_SKIP() << "pdftotext missing";
  CliRun r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(fixture("cait/cait_tiny/model.pth")) + " -o " +
                         q(dir / "cait") + " --explain chefer --strip layers --figure-format pdf -q");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string cait = pdf_text(dir / "cait" / "cat.layers.pdf");
  EXPECT_NE(cait.find("blocks 0\u20132: patch-query mean (no class token in them)"), std::string::npos) << cait;
  EXPECT_NE(cait.find("class-attention block 3 "), std::string::npos) << cait;  // the class token's row
  // A token query reads its own row, not the patch queries' mean: the label names the query only.
  r = run_attnmap("figure " + q(dir / "cat.png") + " -w " + q(fixture("cait/cait_tiny/model.pth")) +
                  " --views L0/mean:q=r1c1 -o " + q(dir / "q.pdf") + " -q");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string queried = pdf_text(dir / "q.pdf");
  EXPECT_NE(queried.find("query patch (1, 1)"), std::string::npos) << queried;
  EXPECT_EQ(queried.find("patch-query mean"), std::string::npos) << queried;
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(fixture("families/timm_gap/model.pth")) + " -o " +
                  q(dir / "gap") + " --explain chefer --strip layers --figure-format pdf -q");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string gap = pdf_text(dir / "gap" / "cat.layers.pdf");
  EXPECT_NE(gap.find("no class token: mean of the patch queries' rows"), std::string::npos) << gap;
  EXPECT_EQ(gap.find("patch-query mean"), std::string::npos) << gap;  // said once, in the title
}

// figure: --title, --row-labels, --column-labels, --block-numbering in the figure and its record; counts
// that do not match are usage errors naming the flag and both counts.
TEST_F(WordsCli, FigureTitleRowAndColumnLabels) {
  if (!have("pdftotext")) GTEST_SKIP() << "pdftotext missing";
  const std::string base = "figure " + images() + " -w " + q(kModel) + " --views photo,L1/h2,rollout --width-in 6.5 ";
  CliRun r = run_attnmap(base + "-o " + q(dir / "f.pdf") + " --title 'Figure 3' --row-labels 'a cat,a cup\\, hot' "
                                "--column-labels 'input,,rollout' --block-numbering 1");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string text = pdf_text(dir / "f.pdf");
  for (const char* w : {"Figure 3", "a cat", "a cup, hot", "input", "rollout"}) EXPECT_NE(text.find(w), std::string::npos) << w << "\n" << text;
  EXPECT_EQ(text.find("cat.png"), std::string::npos) << text;  // the file names are replaced
  EXPECT_EQ(text.find("block 2, head 2"), std::string::npos) << text;  // the empty column label: none
  r = run_attnmap(base + "-o " + q(dir / "g.png") + " --block-numbering 1 --title 'Figure 3'");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rec = read_png_provenance((dir / "g.png").string());
  ASSERT_TRUE(rec);
  EXPECT_EQ((*rec)["title"], "Figure 3");
  EXPECT_EQ((*rec)["block_numbering"], 1);
  r = run_attnmap(base + "-o " + q(dir / "g.pdf") + " --block-numbering 1");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string numbered = pdf_text(dir / "g.pdf");
  EXPECT_NE(numbered.find("block 2, head 2"), std::string::npos) << numbered;  // L1/h2
  EXPECT_NE(numbered.find("rollout 1\u20132, mean"), std::string::npos) << numbered;  // blocks 0..1 -> 1..2
  r = run_attnmap(base + "-o " + q(dir / "h.png") + " --row-labels only-one");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--row-labels has 1 labels for 2 images"), std::string::npos) << r.err;
  r = run_attnmap(base + "-o " + q(dir / "h.png") + " --column-labels x,y");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--column-labels has 2 labels for the 3 views"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "h.png"));
}

// --scale map's note: on the terminal by default, in the figure only with --notes.
TEST_F(WordsCli, ScaleMapNoteIsDrawnOnlyWithNotes) {
  if (!have("pdftotext")) GTEST_SKIP() << "pdftotext missing";
  const std::string base = "figure " + images() + " -w " + q(kModel) + " --views photo,L1/h2 --scale map ";
  CliRun r = run_attnmap(base + "-o " + q(dir / "plain.pdf"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("(--scale map)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--notes draws it"), std::string::npos) << r.err;
  EXPECT_EQ(pdf_text(dir / "plain.pdf").find("own min"), std::string::npos);
  r = run_attnmap(base + "-o " + q(dir / "noted.pdf") + " --notes");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(pdf_text(dir / "noted.pdf").find("own min"), std::string::npos);
  EXPECT_EQ(r.err.find("--notes draws it"), std::string::npos) << r.err;
  // render's strips likewise.
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " -o " + q(dir / "out") +
                  " --strip layers --scale map --figure-format pdf");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("attnmap: note: --scale map: each strip tile"), std::string::npos) << r.err;
  EXPECT_EQ(pdf_text(dir / "out" / "cat.layers.pdf").find("own min"), std::string::npos);
}

// attnmap stats: the figures' definitions only with --notes. The token-norm histogram's legend lists the
// high-norm outliers only when there are some (issue 41); without any, its note says so.
TEST_F(WordsCli, StatsFiguresHoldTheirDefinitionOnlyWithNotes) {
  if (!have("pdftotext")) GTEST_SKIP() << "pdftotext missing";
  CliRun r = run_attnmap("stats " + images() + " -w " + q(kModel) + " -o " + q(dir / "plain") + " --figure-format pdf -q");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(pdf_text(dir / "plain" / "attention_distance.pdf").find("Attention-weighted"), std::string::npos);
  EXPECT_EQ(pdf_text(dir / "plain" / "token_norms.pdf").find("igh-norm outliers:"), std::string::npos);
  EXPECT_EQ(pdf_text(dir / "plain" / "token_norms.pdf").find("at this block"), std::string::npos);
  // Outliers at --outlier-k 0.5: legend and note name them.
  r = run_attnmap("stats " + images() + " -w " + q(kModel) + " -o " + q(dir / "noted") + " --figure-format pdf -q --notes --outlier-k 0.5");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(pdf_text(dir / "noted" / "attention_distance.pdf").find("Attention-weighted"), std::string::npos);
  const std::string some = pdf_text(dir / "noted" / "token_norms.pdf");
  EXPECT_NE(some.find("High-norm outliers:"), std::string::npos) << some;
  EXPECT_NE(some.find("high-norm outliers"), std::string::npos) << some;  // the legend entry
  // None at --outlier-k 1000: the legend has the patch tokens alone, the note says there are none.
  r = run_attnmap("stats " + images() + " -w " + q(kModel) + " -o " + q(dir / "none") + " --figure-format pdf -q --notes --outlier-k 1000");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string none = pdf_text(dir / "none" / "token_norms.pdf");
  EXPECT_NE(none.find("patch tokens"), std::string::npos) << none;
  EXPECT_NE(none.find("No high-norm outliers at this block (norm > median + 1000"), std::string::npos) << none;
  const size_t at = none.find("high-norm outliers");
  EXPECT_EQ(none.find("high-norm outliers", at + 1), std::string::npos) << "no legend entry for none:\n" << none;
  r = run_attnmap("stats " + images() + " -w " + q(kModel) + " -o " + q(dir / "none_plain") + " --figure-format pdf -q --outlier-k 1000");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(pdf_text(dir / "none_plain" / "token_norms.pdf").find("outliers"), std::string::npos);
}

// --colormap in any case, recorded in its own spelling; a near miss suggests the name.
TEST_F(WordsCli, ColormapNameInAnyCase) {
  CliRun r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " -o " + q(dir / "out") + " --colormap Viridis");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rec = read_png_provenance((dir / "out" / "cat.png").string());
  ASSERT_TRUE(rec);
  EXPECT_EQ((*rec)["colormap"], "viridis");
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " -o " + q(dir / "out2") + " --colormap magam");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown colormap 'magam' (did you mean 'magma'?)"), std::string::npos) << r.err;
  r = run_attnmap("figure " + q(dir / "cat.png") + " -w " + q(kModel) + " --views photo,L1/h2 -o " + q(dir / "f.png") +
                  " --colormap INFERNO");
  EXPECT_EQ(r.status, 0) << r.err;
}

// ---- rough edges ------------------------------------------------------------------------------------------

// An --ext that picks nothing and inputs that are all missing: usage errors (2), no output folder made.
TEST_F(WordsCli, NothingToRenderIsAUsageError) {
  fs::create_directories(dir / "photos");
  fs::copy_file(dir / "cat.png", dir / "photos" / "cat.png");
  CliRun r = run_attnmap("render " + q(dir / "photos") + " -w " + q(kModel) + " -o " + q(dir / "out") + " --ext xyz");
  EXPECT_EQ(r.status, 2) << r.err;
  // The message names the folder that holds no image (issue 41).
  EXPECT_NE(r.err.find("no images found in " + (dir / "photos").string() + "/ with --ext xyz"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  r = run_attnmap("render " + q(dir / "no-such-folder") + " -w " + q(kModel) + " -o " + q(dir / "out"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("no-such-folder: no such file or folder; nothing to render"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  // A missing input beside one that exists: that input fails (1), the other is rendered.
  r = run_attnmap("render " + q(dir / "photos") + " " + q(dir / "gone.png") + " -w " + q(kModel) + " -o " + q(dir / "out"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "cat.png"));
}

// An unwritable --manifest (a read-only file; as root the binary runs as nobody through setpriv) is refused
// before the output folder is made.
TEST_F(WordsCli, UnwritableManifestIsRefusedBeforeTheOutputFolder) {
  const bool root = ::geteuid() == 0;
  if (root && std::system("command -v setpriv >/dev/null 2>&1") != 0) GTEST_SKIP() << "setpriv (util-linux) missing";
  const fs::path w = dir / "w.json";
  fs::copy_file(kModel, w);
  std::ofstream(dir / "m.jsonl") << "";
  std::system(("chmod -R a+rwX " + q(dir)).c_str());
  fs::permissions(dir / "m.jsonl", fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  const std::string as_nobody = root ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  CliRun r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(w) + " -o " + q(dir / "out") + " --manifest " +
                             q(dir / "m.jsonl"), as_nobody);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--manifest " + (dir / "m.jsonl").string() + ": cannot write the manifest: Permission denied"),
            std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  // A manifest in a folder that cannot be written: the same, and neither folder is made.
  fs::create_directories(dir / "ro");
  fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read | fs::perms::others_exec);
  r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(w) + " -o " + q(dir / "out") + " --manifest " +
                      q(dir / "ro" / "sub" / "m.jsonl"), as_nobody);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("cannot create the manifest in " + (dir / "ro").string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_FALSE(fs::exists(dir / "ro" / "sub"));
  fs::permissions(dir / "ro", fs::perms::owner_all);
  // A folder whose permission bits allow it but where no file can be made (sysfs, for root too): found by
  // making a file there first, still before the output folder.
  if (fs::is_directory("/sys/kernel")) {
    r = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(w) + " -o " + q(dir / "out") + " --manifest /sys/kernel/m.jsonl");
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("cannot create the manifest in /sys/kernel"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "out"));
  }
}

// A 1x1 and a 5x40 image render, each with a one-line warning that it is upsampled from its size.
TEST_F(WordsCli, TinyImagesRenderWithAWarning) {
  Image one;
  one.width = one.height = 1;
  one.rgb = {200, 30, 30};
  write_png((dir / "dot.png").string(), one);
  write_png((dir / "thin.png").string(), resize_photo(load_image((dir / "cat.png").string()), 5, 40));
  const CliRun r = run_attnmap("render " + q(dir / "dot.png") + " " + q(dir / "thin.png") + " -w " + q(kModel) + " -o " + q(dir / "out") +
                               " --no-legend");  // the bare overlay keeps the photo's size
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("attnmap: warning: " + (dir / "dot.png").string() + ": the image is 1\u00d71 pixels, upsampled to the "
                       "model's 64\u00d764 input"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the image is 5\u00d740 pixels"), std::string::npos) << r.err;
  EXPECT_EQ(load_image((dir / "out" / "dot.png").string()).width, 1);
  EXPECT_EQ(load_image((dir / "out" / "thin.png").string()).height, 40);
  // The cat (120x80) gets none.
  const CliRun c = run_attnmap("render " + q(dir / "cat.png") + " -w " + q(kModel) + " -o " + q(dir / "out"));
  EXPECT_EQ(c.err.find("warning"), std::string::npos) << c.err;
}

// A resumed run with everything present says so instead of "0.0 images/s, ETA --:--".
TEST_F(WordsCli, AllSkippedRunSaysSo) {
  const std::string cmd = "render " + images() + " -w " + q(kModel) + " -o " + q(dir / "out") + " --progress-every 1";
  ASSERT_EQ(run_attnmap(cmd).status, 0);
  const CliRun r = run_attnmap(cmd + " --skip-existing");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("attnmap: 2/2 images, all 2 skipped"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("attnmap: 1/2 images, 1 skipped so far"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("images/s"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("ETA"), std::string::npos) << r.err;
}
