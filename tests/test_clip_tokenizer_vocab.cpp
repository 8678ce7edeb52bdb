// test_clip_tokenizer_vocab.cpp - CLIP vocabulary readers (issue 43, part 2): OpenAI's .gz, a Hugging Face
// folder's vocab.json + merges.txt and tokenizer.json (both merges forms) on tests/fixtures/tokenizer/tiny/
// (the first 60 merges of the real vocabulary, written by tools/make_tokenizer_fixtures.py), and damaged
// files refused with the file and the line or entry named.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "test_util.hpp"
#include "text/clip_tokenizer.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

std::string tiny(const std::string& name) { return fixture("tokenizer/tiny/" + name); }

void write_bytes(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

void write_gz(const fs::path& p, const std::string& text) {
  gzFile f = gzopen(p.c_str(), "wb1");  // fastest level: the 16 MiB test file is made in a few ms
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(f);
}

// The message of the Error that f() throws ("" when it throws none).
template <class F>
std::string error_of(F f) { return thrown_message(f); }

#define EXPECT_MESSAGE_HAS(message, part) EXPECT_NE((message).find(part), std::string::npos) << (message)

// The tiny vocabulary's files with one file's text changed (merges.txt or vocab.json).
std::string tiny_text(const std::string& name) { return slurp(tiny(name)); }

}  // namespace

using ClipVocabFiles = TempDirTest;

TEST(ClipVocab, EveryFormatOfTheTinyVocabularyReadsTheSame) {
  const ClipVocab gz = read_clip_vocab(tiny("tiny_bpe.txt.gz"));
  const nlohmann::json want = nlohmann::json::parse(slurp(fixture("tokenizer/clip_token_ids.json")))["tiny"];
  ASSERT_EQ(gz.tokens.size(), want["vocab_size"].get<size_t>());
  EXPECT_EQ(gz.merges.size(), 60u);
  EXPECT_EQ(gz.source, VocabSource::openai_bpe);
  for (const std::string name : {"vocab.json", "tokenizer.json", "tokenizer_pairs.json"}) {
    SCOPED_TRACE(name);
    const ClipVocab hf = read_clip_vocab(tiny(name));
    EXPECT_EQ(hf.source, name == "vocab.json" ? VocabSource::hf_vocab_merges : VocabSource::hf_tokenizer_json);
    EXPECT_EQ(hf.tokens, gz.tokens);
    EXPECT_EQ(hf.start_id, gz.start_id);
    EXPECT_EQ(hf.end_id, gz.end_id);
    ASSERT_EQ(hf.merges.size(), gz.merges.size());
    for (const auto& [key, m] : gz.merges) {
      ASSERT_TRUE(hf.merges.count(key));
      EXPECT_EQ(hf.merges.at(key).rank, m.rank);
      EXPECT_EQ(hf.merges.at(key).merged, m.merged);
    }
    const ClipTokenizer tok(hf);
    for (const auto& c : want["cases"])
      EXPECT_EQ(tok.tokenize(c["text"]), c["hugging_face"].get<std::vector<int32_t>>()) << c["text"];
  }
  const ClipTokenizer tok(gz);
  for (const auto& c : want["cases"])
    EXPECT_EQ(tok.tokenize(c["text"]), c["openai"].get<std::vector<int32_t>>()) << c["text"];
  EXPECT_EQ(read_clip_vocab(fixture("tokenizer/tiny")).source, VocabSource::hf_tokenizer_json);  // a folder
}

TEST_F(ClipVocabFiles, DamagedOpenAiFilesNameTheFileAndLine) {
  const fs::path plain = dir / "plain.txt.gz", cut = dir / "cut.txt.gz", bad = dir / "bad.txt.gz",
                 latin = dir / "latin1.txt.gz", missing = dir / "nothing.gz";
  write_bytes(plain, "#version: 0.2\ni n\n");
  const std::string packed = slurp(tiny("tiny_bpe.txt.gz"));
  write_bytes(cut, packed.substr(0, packed.size() / 2));
  write_gz(bad, "#version: 0.2\ni n\nt h e\n");
  write_gz(latin, "#version: 0.2\ni n\n\xe9 t\n");
  EXPECT_MESSAGE_HAS(error_of([&] { read_openai_bpe(plain.string()); }), plain.string() + ": not a gzip file");
  EXPECT_MESSAGE_HAS(error_of([&] { read_openai_bpe(cut.string()); }), cut.string() + ": damaged gzip data");
  EXPECT_MESSAGE_HAS(error_of([&] { read_openai_bpe(bad.string()); }),
                     bad.string() + ": line 3: expected a merge of two symbols \"A B\", found 3");
  EXPECT_MESSAGE_HAS(error_of([&] { read_openai_bpe(latin.string()); }), latin.string() + ": line 3: not UTF-8 at byte 18");
  EXPECT_MESSAGE_HAS(error_of([&] { read_openai_bpe(missing.string()); }), missing.string() + ": not a readable file");
  // a vocabulary without the 256 byte characters cannot tokenize
  const fs::path few = dir / "few.json";
  write_bytes(few, R"({"model": {"type": "BPE", "end_of_word_suffix": "</w>", "merges": [],
                       "vocab": {"<|startoftext|>": 0, "<|endoftext|>": 1}}})");
  EXPECT_MESSAGE_HAS(error_of([&] { ClipTokenizer t(read_hf_tokenizer_json(few.string())); }),
                     few.string() + ": no token \"\xc4\x80\" for byte 0");
}

TEST_F(ClipVocabFiles, DamagedHuggingFaceFilesNameTheFileAndLineOrEntry) {
  const fs::path vocab = dir / "vocab.json", merges = dir / "merges.txt";
  auto hf = [&] { read_hf_vocab_merges(vocab.string(), merges.string()); };
  write_bytes(vocab, tiny_text("vocab.json"));
  write_bytes(merges, "#version: 0.2\ni n\nt h\nth e</w>\nnot a merge\n");
  EXPECT_MESSAGE_HAS(error_of(hf), merges.string() + ": line 5: expected a merge of two symbols");
  write_bytes(merges, "#version: 0.2\ni n\nq z\n");
  EXPECT_MESSAGE_HAS(error_of(hf), merges.string() + ": line 3: \"qz\" is not in the vocabulary");
  write_bytes(merges, "#version: 0.2\ni n\n");
  EXPECT_EQ(error_of(hf), "");
  const std::vector<std::pair<std::string, std::string>> bad_vocab = {  // vocab.json's text, what the error says
      {"[1, 2]", vocab.string() + ": expected a JSON object {\"token\": id}, found array"},
      {"{\"a\": 0, \"b\": \"1\"}", vocab.string() + " entry \"b\": expected an integer id, found string"},
      {"{\"a\": 0, \"b\": 7}", vocab.string() + " entry \"b\": id 7 out of range (expected 0..1 for 2 tokens)"},
      {"{\"a\": 0, \"b\": 0}", "id 0 is also \"a\""},
      {"{\"a\": 0,", vocab.string() + ": not JSON (byte "},
  };
  for (const auto& [text, says] : bad_vocab) {
    write_bytes(vocab, text);
    EXPECT_MESSAGE_HAS(error_of(hf), says);
  }
  write_bytes(vocab, "{\"a\": 0, \"b\": 1}");
  write_bytes(merges, "#version: 0.2\n");
  EXPECT_MESSAGE_HAS(error_of(hf), vocab.string() + ": no <|startoftext|> token");

  const fs::path tj = dir / "tokenizer.json";
  nlohmann::json j = nlohmann::json::parse(tiny_text("tokenizer.json"));
  j["model"]["merges"][3] = "th e </w>";
  write_bytes(tj, j.dump());
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_tokenizer_json(tj.string()); }),
                     tj.string() + " model.merges[3]: expected \"A B\" (two symbols, one space)");
  j["model"]["merges"][3] = nlohmann::json::array({"t", 5});
  write_bytes(tj, j.dump());
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_tokenizer_json(tj.string()); }), "model.merges[3]: expected \"A B\" or [\"A\", \"B\"]");
  j["model"]["type"] = "WordPiece";
  write_bytes(tj, j.dump());
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_tokenizer_json(tj.string()); }), "model.type is \"WordPiece\" (expected \"BPE\"");
  write_bytes(tj, "{\"version\": \"1.0\"}");
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_tokenizer_json(tj.string()); }), tj.string() + ": no \"model\" object");
  fs::create_directories(dir / "empty");
  EXPECT_MESSAGE_HAS(error_of([&] { read_clip_vocab((dir / "empty").string()); }), "a folder without tokenizer.json or vocab.json + merges.txt");
  write_bytes(dir / "x.bin", "x");
  EXPECT_MESSAGE_HAS(error_of([&] { read_clip_vocab((dir / "x.bin").string()); }), "not a CLIP vocabulary");
  EXPECT_MESSAGE_HAS(error_of([&] { read_clip_vocab((dir / "y.bin").string()); }), "y.bin: no such file or folder");
}

TEST_F(ClipVocabFiles, SizesAreCheckedBeforeReading) {
  const fs::path big = dir / "vocab.json", merges = dir / "merges.txt", bomb = dir / "bomb.txt.gz";
  { std::ofstream(big) << "{}"; }
  fs::resize_file(big, (size_t(16) << 20) + 1);  // sparse: nothing is written
  write_bytes(merges, "#version: 0.2\n");
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_vocab_merges(big.string(), merges.string()); }),
                     big.string() + ": 16777217 bytes, more than the 16 MiB a vocabulary file may have");
  write_gz(bomb, "#version: 0.2\n" + std::string((size_t(16) << 20) + 16, ' '));
  EXPECT_MESSAGE_HAS(error_of([&] { read_openai_bpe(bomb.string()); }), bomb.string() + ": unpacks to more than 16 MiB");
}

// Found while writing fuzz/fuzz_clip_text (its input: fuzz/regressions/clip_text/deep_merge_array): a merge nested
// 60 000 arrays deep was described in its Error by nlohmann's dump(), which recurses once per level: stack
// overflow. Now a vocabulary's JSON may nest 64 levels and hold 1 000 000 values (a 16 MiB file of "[],"
// built a 430 MB tree), and a merge's message names the value's shape without dumping it.
TEST_F(ClipVocabFiles, ADeeplyNestedOrHugeJsonIsRefusedAndAMergeNamedByItsShape) {
  const fs::path tj = dir / "tokenizer.json";
  const std::string head = R"({"model": {"type": "BPE", "end_of_word_suffix": "</w>", "vocab": {"a": 0}, "merges": [)";
  const size_t depth = 500000;  // deep enough to overflow the stack of any build with dump()
  write_bytes(tj, head + std::string(depth, '[') + std::string(depth, ']') + "]}}");
  EXPECT_EQ(error_of([&] { read_hf_tokenizer_json(tj.string()); }),
            tj.string() + ": nested deeper than 64 levels (expected a vocabulary: tokenizer.json nests 4 deep)");
  write_bytes(tj, head + std::string(60, '[') + std::string(60, ']') + "]}}");
  EXPECT_EQ(error_of([&] { read_hf_tokenizer_json(tj.string()); }),
            tj.string() + " model.merges[0]: expected \"A B\" or [\"A\", \"B\"], found [array]");
  std::string empties;
  for (int i = 0; i < 1000000; ++i) empties += "[],";
  write_bytes(tj, head + empties + "[]]}}");
  EXPECT_EQ(error_of([&] { read_hf_tokenizer_json(tj.string()); }),
            tj.string() + ": more than 1000000 JSON values (expected a vocabulary: CLIP's tokenizer.json has ~200 000)");
  nlohmann::json j = nlohmann::json::parse(tiny_text("tokenizer.json"));
  j["model"]["merges"][2] = nlohmann::json::array({"t", 5});
  write_bytes(tj, j.dump());
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_tokenizer_json(tj.string()); }), "model.merges[2]: expected \"A B\" or [\"A\", \"B\"], found [string, number]");
  j["model"]["merges"][2] = nlohmann::json::array({"t", "h", "e"});
  write_bytes(tj, j.dump());
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_tokenizer_json(tj.string()); }), "model.merges[2]: expected \"A B\" or [\"A\", \"B\"], found an array of 3 elements");
  j["model"]["merges"][2] = nlohmann::json::object({{"t", "h"}});
  write_bytes(tj, j.dump());
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_tokenizer_json(tj.string()); }), "model.merges[2]: expected \"A B\" or [\"A\", \"B\"], found an object of 1 entries");
  j["model"]["merges"][2] = 7;
  write_bytes(tj, j.dump());
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_tokenizer_json(tj.string()); }), "model.merges[2]: expected \"A B\" or [\"A\", \"B\"], found 7");
}

// Found while fuzzing src/text/ by hand (fuzz/fuzz_clip_text's inputs stop at 64 KiB): merges.txt was split
// into a vector of every line first, and a merge line into a vector of every symbol; a 16 MiB merges.txt of
// newlines took 0.9 GB and 12 s (ASan) before its second line was refused. Now one line at a time and the
// first two symbols; the messages are the same.
TEST_F(ClipVocabFiles, AHugeMergesFileIsRefusedAtItsFirstBadLine) {
  const fs::path vocab = dir / "vocab.json", merges = dir / "merges.txt";
  write_bytes(vocab, tiny_text("vocab.json"));
  write_bytes(merges, "#version: 0.2\ni n\n" + std::string((size_t(15) << 20), '\n'));
  EXPECT_EQ(error_of([&] { read_hf_vocab_merges(vocab.string(), merges.string()); }),
            merges.string() + ": line 3: expected a merge of two symbols \"A B\", found 0 (\"\")");
  std::string many;
  for (int i = 0; i < (1 << 20); ++i) many += "a ";
  write_bytes(merges, "#version: 0.2\n" + many + "\n");
  EXPECT_MESSAGE_HAS(error_of([&] { read_hf_vocab_merges(vocab.string(), merges.string()); }),
                     merges.string() + ": line 2: expected a merge of two symbols \"A B\", found 1048576 (\"a a a ");
  write_bytes(merges, "#version: 0.2\ni n\nt h");  // no newline at the end: the last line is a merge too
  EXPECT_EQ(read_hf_vocab_merges(vocab.string(), merges.string()).merges.size(), 2u);
}

// Found while fuzzing src/text/ by hand with the bundled vocabulary (the fuzz seeds carry the tiny one): the
// BPE scanned the whole word once per merge rule it applied, quadratic in the word: a 16 000-letter word
// of random letters took 0.26 s (1.3 s under ASan) to encode. Now a heap of the pairs; the ids are the same
// (the ones SimpleTokenizer.bpe's passes give: checked against the scan on 12 000 words and random
// vocabularies when it changed).
TEST(ClipTokenizer, ALongWordEncodesInLinearishTime) {
  static const ClipTokenizer tok(read_openai_bpe(bundled_clip_vocab_path()));
  auto word = [](uint32_t x, int letters) {
    std::string w;
    for (int k = 0; k < letters; ++k) {
      x = x * 1103515245u + 12345u;
      w += static_cast<char>('a' + (x >> 16) % 26);
    }
    return w;
  };
  const std::vector<int32_t> ids = tok.encode(word(12345, 16000));
  ASSERT_EQ(ids.size(), 8849u);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 3), (std::vector<int32_t>{548, 4397, 18289}));
  EXPECT_EQ(ids.back(), 3286);
  uint64_t fnv = 1469598103934665603ull;  // FNV-1a over the ids, as the scan computed them
  for (int32_t id : ids) fnv = (fnv ^ static_cast<uint32_t>(id)) * 1099511628211ull;
  EXPECT_EQ(fnv, 8487436053556536265ull);
  // One word of 16 000 letters against 64 of 250 (the same bytes): about the same time when the work is
  // linear in the word (the heap: x1.3-1.6), more when quadratic (the scan: x10, 0.08 s against 0.008 s).
  // The best of 3 runs each, so a busy machine or a sanitizer build slows both sides alike.
  auto seconds = [&](const std::vector<std::string>& texts) {
    double best = 1e9;
    for (int run = 0; run < 3; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& t : texts) tok.encode(t);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  std::vector<std::string> short_words;
  for (uint32_t seed = 1; seed <= 64; ++seed) short_words.push_back(word(seed, 250));
  const double one = seconds({word(1, 16000)}), many = seconds(short_words);
  EXPECT_LT(one, 4 * many) << "one word of 16 000 letters: " << one << " s, 64 of 250: " << many << " s";
}
