// render --text / --texts / --prompt / --vocab / --truncate-text (issue 43 part 2, docs/text.md): texts as a
// CLIP model's classes. The door's refusals, the models texts cannot be classes of, the per-text file names,
// and (tests/fixtures/clip_zero_shot/, made by the family's own code) the zero-shot probabilities end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/text/zero_shot.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "test_util.hpp"
#include "text/clip_tokenizer.hpp"
#include "text/clip_vocab.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::string kData = ATTNMAP_DATA_DIR;

class TextCli : public TempDirTest {
 protected:
  // A CLIP with a text tower (OpenAI's layout, vocabulary of 64: any real text is refused by its ids).
  std::string clip() const { return fixture("families/openai_clip_full/model_openai.pth"); }
  CliRun render(const std::string& weights, const std::string& extra) const {
    return run_attnmap("render " + q(kData + "/chelsea.png") + " -w " + q(weights) + " -o " + q(dir / "out") +
                       " -q --act quickgelu " + extra);
  }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  }
};

}  // namespace

// Every refusal that needs no model: status 2, the flag named, nothing written.
TEST_F(TextCli, TheDoorRefusesWhatCannotWork) {
  const std::string blank = write("blank.txt", "\xEF\xBB\xBF\n  \r\n\t\n");
  const std::string labels = write("labels.txt", "dog\ncat\n");
  struct Case {
    std::string extra, says;
  };
  const Case cases[] = {
      {"--text dog --prompt 'a photo'", "--prompt 'a photo' has no {} for the text"},
      {"--prompt 'a {}'", "--prompt fills its {} with texts: give --text, --texts or --labels FILE"},
      {"--vocab " + q(dir / "v.json"), "--vocab applies to texts"},
      {"--truncate-text", "--truncate-text applies to texts"},
      {"--text dog --text dog", "--text 'dog' is given twice"},
      {"--text dog --texts " + q(labels) + " --text cat", "labels.txt: line 1: 'dog' is given twice"},
      {"--texts " + q(write("twice.txt", "a dog\n\na cat\na dog\n")), "twice.txt: line 4: 'a dog' is given twice"},
      {"--text dog --labels " + q(labels), "--labels names a classifier's classes; with --text the texts are"},
      {"--texts " + q(dir / "missing.txt"), "--texts " + (dir / "missing.txt").string() + ": cannot be read"},
      {"--texts " + q(blank), ": no text in it"},
      {"--text ''", "--text expects a value, found ''"},
      {"--texts " + q(write("utf16.txt", std::string("\xFF\xFE" "d\0o\0g\0", 8))), "utf16.txt: is UTF-16 or binary (a UTF-16 byte-order mark); save it as UTF-8"},
      {"--texts " + q(write("latin1.txt", "a dog\na caf\xE9\n")), "latin1.txt: line 2: not UTF-8 at byte 5"},
  };
  for (const Case& c : cases) {
    const CliRun r = render(clip(), c.extra);
    EXPECT_EQ(r.status, 2) << c.extra << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.extra << "\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "out" / "chelsea.png"));
  // The commands that do not take texts yet say so by the flag's name.
  const CliRun e = run_attnmap("eval " + q(kData + "/chelsea.png") + " --masks " + q(dir) + " --text dog");
  EXPECT_EQ(e.status, 2) << e.err;
  EXPECT_NE(e.err.find("--text"), std::string::npos) << e.err;
}

// A checkpoint that cannot take texts: exit 2 naming the file and why.
TEST_F(TextCli, ModelsWithoutATextTowerOrWithAHeadAreRefused) {
  const std::string visual = fixture("families/openai_clip_visual/model.pth");
  const CliRun v = render(visual, "--text dog --text cat");
  EXPECT_EQ(v.status, 2) << v.err;
  EXPECT_NE(v.err.find("model.pth holds no CLIP text tower"), std::string::npos) << v.err;
  EXPECT_NE(v.err.find("--text"), std::string::npos) << v.err;
  const CliRun h = run_attnmap("render " + q(kData + "/chelsea.png") + " -w " + q(fixture("timm_small/weights.json")) +
                               " -o " + q(dir / "out") + " -q --text dog");
  EXPECT_EQ(h.status, 2) << h.err;
  EXPECT_NE(h.err.find("weights.json has a classifier head of"), std::string::npos) << h.err;
  EXPECT_NE(h.err.find("not a CLIP image-text model"), std::string::npos) << h.err;
  EXPECT_FALSE(fs::exists(dir / "out" / "chelsea.png"));
}

// The texts' names in file names: safe for any text, unique in the run, short.
TEST(TextFileLabels, SafeUniqueAndShortForAnyText) {
  const std::string long_text(300, 'x');
  const std::vector<std::string> texts = {"a dog",     "a_dog",       "a dog/cat", "../../etc/passwd", "\xE7\x8C\xAB",
                                          "\xE7\x8A\xAC", ".hidden", long_text,   "a dog!",    "a dog?"};
  const std::vector<std::string> names = text_file_labels(texts);
  ASSERT_EQ(names.size(), texts.size());
  EXPECT_EQ(names[0], "a_dog");  // spaces only: readable, no hash
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());  // unique
  for (const std::string& n : names) {
    EXPECT_LE(n.size(), 49u) << n;
    EXPECT_NE(n[0], '.') << n;
    for (const char c : n)
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') << n;
  }
  EXPECT_EQ(names[2].substr(0, 10), "a_dog_cat-");  // what it was, then the hash
  EXPECT_EQ(text_file_labels({"a dog/cat"}), std::vector<std::string>{names[2]});  // the same text, the same name
  EXPECT_EQ(fill_template("a photo of a {}, a type of {}.", "dog"), "a photo of a dog, a type of dog.");
}

// ---- end to end on tests/fixtures/clip_zero_shot (OpenAI CLIP's own code: probabilities, chefer maps) ----

namespace {

class ZeroShotCli : public TempDirTest {
 protected:
  const std::string F = fixture("clip_zero_shot");
  nlohmann::json meta() const { return nlohmann::json::parse(slurp(F + "/meta.json")); }
  CliRun render(const std::string& extra) const {
    return run_attnmap("render " + q(F + "/input.png") + " -w " + q(F + "/model.safetensors") + " -o " +
                       q(dir / "out") + " " + extra);
  }
  std::string texts() const { return "--text 'a dog' --text 'a cat' --text 'a photo of a bird'"; }
  // The manifest's first image row and its header's settings.
  std::pair<nlohmann::json, nlohmann::json> manifest() const {
    std::istringstream lines(slurp(dir / "m.jsonl"));
    std::string header, row;
    std::getline(lines, header);
    std::getline(lines, row);
    return {nlohmann::json::parse(header)["settings"], nlohmann::json::parse(row)};
  }
};

}  // namespace

// The top-5 line and the manifest's top5: the texts as labels, softmax over the texts of exp(logit_scale) x
// cos, equal to OpenAI CLIP's logits_per_image.softmax to 1e-4, with either vocabulary file.
TEST_F(ZeroShotCli, ProbabilitiesAreTheFamilysOverTheTexts) {
  const nlohmann::json m = meta();
  for (const std::string vocab : {"bpe_small.txt.gz", "vocab.json"}) {
    fs::remove_all(dir / "out");
    const CliRun r = render(texts() + " --vocab " + q(F + "/" + vocab) + " --manifest " + q(dir / "m.jsonl"));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("  top-3 of 3 texts (zero-shot): a dog 84.0%, a cat 15.2%, a photo of a bird 0.8%"), std::string::npos) << r.out;
    const auto [settings, row] = manifest();
    ASSERT_EQ(row["top5"].size(), 3u) << row;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(row["top5"][i]["label"], m["texts"][i]) << vocab;
      EXPECT_NEAR(row["top5"][i]["probability"].get<double>(), m["probs"][i].get<double>(), 1e-4) << vocab << " " << i;
    }
    const nlohmann::json& z = settings["zero_shot"];
    EXPECT_EQ(z["texts"], m["texts"]);
    EXPECT_EQ(z["rules"], "openai");  // the tower's family, whatever the vocabulary's file
    const nlohmann::json& v = z["vocab"].is_array() ? z["vocab"][0] : z["vocab"];
    EXPECT_EQ(v["file"], vocab);
    EXPECT_EQ(v["sha256"], sha256_file(F + "/" + vocab));
  }
}

// One relevance map per text, named by a safe form of the text; the map of "a dog" is the family's chefer map
// (autograd through OpenAI's code) to 1e-4 of its peak.
TEST_F(ZeroShotCli, OneMapPerTextNamedByTheText) {
  const CliRun r = render("-q --vocab " + q(F + "/bpe_small.txt.gz") +
                          " --text 'a dog' --text 'a cat' --text 'a photo of a bird' --views L-1/mean,chefer --class top3"
                          " --panel --save-raw --gallery " + q(dir / "gallery"));
  ASSERT_EQ(r.status, 0) << r.err;
  // The gallery's subtitle says what its percentages are over.
  EXPECT_NE(slurp(dir / "gallery" / "index.html").find(", zero-shot over 3 texts, 1 input</p>"), std::string::npos);
  for (const char* name : {"input.L1-mean.png", "input.panel.png", "input.chefer.class-a_dog.png",
                           "input.chefer.class-a_cat.png", "input.chefer.class-a_photo_of_a_bird.png"})
    EXPECT_TRUE(fs::exists(dir / "out" / name)) << name;
  std::vector<long> shape;
  const std::vector<float> want = read_npy(F + "/chefer.npy", &shape);
  ASSERT_EQ(shape, (std::vector<long>{3, 4, 4}));
  for (size_t t = 0; t < 3; ++t) {
    const std::string label = text_file_labels({"a dog", "a cat", "a photo of a bird"})[t];
    const std::vector<float> got = read_npy((dir / "out" / ("input.chefer.class-" + label + ".npy")).string(), nullptr);
    // its sidecar names the text it explains (a result, beside the run's settings)
    const nlohmann::json side = nlohmann::json::parse(slurp(dir / "out" / ("input.chefer.class-" + label + ".npy.json")));
    EXPECT_EQ(side["explained_class"]["label"], (std::vector<std::string>{"a dog", "a cat", "a photo of a bird"}[t]));
    EXPECT_EQ(side["explained_class"]["index"], t);
    const std::vector<float> row(want.begin() + static_cast<long>(t * 16), want.begin() + static_cast<long>(t * 16 + 16));
    float peak = 0;
    for (const float x : row) peak = std::max(peak, std::abs(x));
    EXPECT_TRUE(all_close(got, row, 1e-4 * peak, label));
  }
}

// Texts the run cannot use: exit 2 with the reason; --truncate-text cuts an over-long one as open_clip does.
TEST_F(ZeroShotCli, LongTextsAndWrongVocabulariesAreRefused) {
  std::string long_text = "a";
  for (int i = 0; i < 80; ++i) long_text += " a";  // 81 tokens + 2 > 77
  const std::string small = " --vocab " + q(F + "/bpe_small.txt.gz");
  const CliRun l = render("-q --text dog --text '" + long_text + "'" + small);
  EXPECT_EQ(l.status, 2) << l.err;
  EXPECT_NE(l.err.find("--text: text \"a a a"), std::string::npos) << l.err;  // its first 60 bytes
  EXPECT_NE(l.err.find("give --truncate-text to cut it as open_clip does)"), std::string::npos) << l.err;
  EXPECT_LT(l.err.size(), 400u) << l.err;
  EXPECT_EQ(render("-q --text dog --text '" + long_text + "' --truncate-text" + small).status, 0);
  const CliRun b = render("-q --text dog");  // the bundled OpenAI vocabulary: 49408 tokens, the tower has 534
  EXPECT_EQ(b.status, 2) << b.err;
  EXPECT_NE(b.err.find("token embeddings"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("not this model's vocabulary; give its own with --vocab"), std::string::npos) << b.err;
  std::ofstream(dir / "bad.txt.gz") << "not gzip";
  const CliRun d = render("-q --text dog --vocab " + q(dir / "bad.txt.gz"));
  EXPECT_EQ(d.status, 2) << d.err;
  EXPECT_NE(d.err.find("--vocab"), std::string::npos) << d.err;
  EXPECT_NE(d.err.find("bad.txt.gz"), std::string::npos) << d.err;
  const CliRun none = render("-q --text dog --vocab " + q(dir / "nowhere"));
  EXPECT_NE(none.err.find("nowhere: no such file or folder"), std::string::npos) << none.err;
  // --class among texts: the messages count texts, not a classifier's classes.
  const std::string two = "-q --text 'a dog' --text 'a cat' --views chefer" + small;
  const CliRun i = render(two + " --class 5");
  EXPECT_EQ(i.status, 2) << i.err;
  EXPECT_NE(i.err.find("--class 5 out of range: 0..1 (2 texts)"), std::string::npos) << i.err;
  const CliRun n = render(two + " --class 'a bird'");
  EXPECT_NE(n.err.find("--class 'a bird' is not one of the texts: a dog, a cat"), std::string::npos) << n.err;
}

// A transformers CLIPModel folder (save_pretrained's config.json + model.safetensors + preprocessor_config.json,
// the tokenizer's vocab.json + merges.txt beside them), given as -w FOLDER with no --vocab: the folder's own
// vocabulary and Hugging Face's tokenizer rules, the visual_projection, pooling at eos_token_id 533; the
// probabilities are CLIPModel's logits_per_image.softmax (float64) to 1e-4 and the chefer map of each text is
// autograd through CLIPModel.forward to 1e-4 of its peak. The folder is copied alone into the test's directory,
// so no vocabulary is found next to it by accident.
TEST_F(ZeroShotCli, HuggingFaceFolderUsesItsOwnTokenizerFiles) {
  const std::string hf = F + "/hf";
  const nlohmann::json m = nlohmann::json::parse(slurp(hf + "/meta.json"));
  // Hugging Face's rules on the folder's files give the ids transformers' CLIPTokenizer gave (meta.json "ids").
  const ClipTokenizer tok(read_clip_vocab(hf), ClipTextRules::hugging_face);
  for (size_t i = 0; i < 3; ++i) {
    const std::vector<int32_t> ids = tok.tokenize(m["texts"][i].get<std::string>());
    EXPECT_EQ(std::vector<int>(ids.begin(), ids.end()), m["ids"][i].get<std::vector<int>>()) << m["texts"][i];
  }
  fs::copy(hf, dir / "hf");
  const CliRun r = run_attnmap("render " + q(F + "/input.png") + " -w " + q(dir / "hf") + " -o " + q(dir / "out") +
                               " " + texts() + " --views chefer --class top3 --save-raw --manifest " + q(dir / "m.jsonl"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  top-3 of 3 texts (zero-shot): a cat 88.1%, a photo of a bird 6.9%, a dog 5.0%"), std::string::npos) << r.out;
  const auto [settings, row] = manifest();
  ASSERT_EQ(row["top5"].size(), 3u) << row;
  for (size_t i = 0; i < 3; ++i) {
    const std::string label = row["top5"][i]["label"];
    const size_t j = static_cast<size_t>(std::find(m["texts"].begin(), m["texts"].end(), label) - m["texts"].begin());
    ASSERT_LT(j, 3u) << label;
    EXPECT_NEAR(row["top5"][i]["probability"].get<double>(), m["probs"][j].get<double>(), 1e-4) << label;
  }
  const nlohmann::json& z = settings["zero_shot"];
  EXPECT_EQ(z["rules"], "hugging_face");
  ASSERT_TRUE(z["vocab"].is_array()) << z;
  ASSERT_EQ(z["vocab"].size(), 2u) << z;
  EXPECT_EQ(z["vocab"][0]["file"], "vocab.json");
  EXPECT_EQ(z["vocab"][0]["sha256"], sha256_file(hf + "/vocab.json"));
  EXPECT_EQ(z["vocab"][1]["file"], "merges.txt");
  EXPECT_EQ(z["vocab"][1]["sha256"], sha256_file(hf + "/merges.txt"));
  std::vector<long> shape;
  const std::vector<float> want = read_npy(hf + "/chefer.npy", &shape);
  ASSERT_EQ(shape, (std::vector<long>{3, 4, 4}));
  const std::vector<std::string> labels = text_file_labels(m["texts"].get<std::vector<std::string>>());
  for (size_t t = 0; t < 3; ++t) {
    const std::vector<float> got = read_npy((dir / "out" / ("input.class-" + labels[t] + ".npy")).string(), nullptr);
    const std::vector<float> ref(want.begin() + static_cast<long>(t * 16), want.begin() + static_cast<long>(t * 16 + 16));
    float peak = 0;
    for (const float x : ref) peak = std::max(peak, std::abs(x));
    EXPECT_TRUE(all_close(got, ref, 1e-4 * peak, labels[t]));
  }
}

// Texts that are one class to CLIP's tokenizer (case, white space) or blank are refused, not split; a cut text
// and a single text are said.
TEST_F(ZeroShotCli, TextsThatTokenizeAlikeOrAreBlankAreRefusedAndCutsAreSaid) {
  const std::string small = " --vocab " + q(F + "/bpe_small.txt.gz");
  const CliRun same = render("-q --text 'a dog' --text 'A  DOG '" + small);
  EXPECT_EQ(same.status, 2) << same.err;
  EXPECT_NE(same.err.find("--text 'A  DOG ' is the same tokens as 'a dog'"), std::string::npos) << same.err;
  const CliRun blank = render("-q --text 'a dog' --text '   '" + small);
  EXPECT_EQ(blank.status, 2) << blank.err;
  EXPECT_NE(blank.err.find("--text '   ' is blank"), std::string::npos) << blank.err;
  std::string long_text = "cat";
  for (int i = 0; i < 80; ++i) long_text += " a";
  const CliRun cut = render("--text dog --text '" + long_text + "' --truncate-text" + small);
  EXPECT_EQ(cut.status, 0) << cut.err;
  EXPECT_NE(cut.err.find(" tokens, cut to 77 (--truncate-text)"), std::string::npos) << cut.err;
  const CliRun one = render("--text dog" + small);
  EXPECT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.err.find("one text: its probability is 100% by construction"), std::string::npos) << one.err;
  EXPECT_NE(one.out.find("top-1 of 1 text (zero-shot): dog 100.0%"), std::string::npos) << one.out;
}

// --resize crop on a CLIP crops as the family's preprocessing does (shorter side to the input size, centre
// crop: crop_pct 1.0, recorded with its source), not timm's 0.875: a 48x32 photo's map is the map of its middle
// 32x32 square, exactly.
TEST_F(ZeroShotCli, ResizeCropIsClipsCentreCrop) {
  const Image middle = load_image(F + "/input.png");
  ASSERT_EQ(middle.width, 32);
  Image wide;
  wide.width = 48;
  wide.height = 32;
  wide.rgb.assign(48 * 32 * 3, 0);
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 48; ++x)
      for (int c = 0; c < 3; ++c)
        wide.rgb[(static_cast<size_t>(y) * 48 + x) * 3 + c] =
            x >= 8 && x < 40 ? middle.rgb[(static_cast<size_t>(y) * 32 + (x - 8)) * 3 + c]
                             : static_cast<uint8_t>((x * 37 + y * 11 + c * 101) % 256);  // anything but the middle
  write_png((dir / "wide.png").string(), wide);
  const std::string model = " -w " + q(F + "/model.safetensors") + " -q --save-raw --views L-1/mean";
  const CliRun c = run_attnmap("render " + q(dir / "wide.png") + model + " --resize crop -o " + q(dir / "c"));
  ASSERT_EQ(c.status, 0) << c.err;
  const CliRun s = run_attnmap("render " + q(F + "/input.png") + model + " -o " + q(dir / "s"));
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(read_npy((dir / "c" / "wide.npy").string(), nullptr),
            read_npy((dir / "s" / "input.npy").string(), nullptr));
  const nlohmann::json rec = nlohmann::json::parse(slurp(dir / "c" / "wide.npy.json"));
  EXPECT_EQ(rec.at("crop_pct"), 1.0) << rec.dump();
  const CliRun i = run_attnmap("inspect " + q(F + "/model.safetensors"));
  EXPECT_NE(i.out.find("default (CLIP's preprocessing: shorter side to the input size, centre crop; for the clip "
                       "layout)"), std::string::npos) << i.out;
}

// --skip-existing with --class topK (K >= 2): the per-class files' names come from the classes an earlier run
// explained (its PNGs' top-5), so the same run again skips the image; other texts render it again.
TEST_F(ZeroShotCli, SkipExistingFindsTheTopKFilesOfAnEarlierRun) {
  const std::string run = "--vocab " + q(F) + " --views chefer --class top2 --save-raw --skip-existing";
  ASSERT_EQ(render(run + " --text 'a dog' --text 'a cat'").status, 0);
  const CliRun again = render(run + " --text 'a dog' --text 'a cat'");
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.err.find("attnmap: 0 done, 0 failed, 1 skipped"), std::string::npos) << again.err;
  const CliRun other = render(run + " --text 'a dog' --text 'a photo of a bird'");
  EXPECT_NE(other.err.find("attnmap: 1 done"), std::string::npos) << other.err;
}
