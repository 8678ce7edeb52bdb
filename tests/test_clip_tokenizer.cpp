// test_clip_tokenizer.cpp - CLIP's tokenizer against each family's own token ids (issue 43, part 2):
// tests/fixtures/tokenizer/clip_token_ids.json, made by tools/make_tokenizer_fixtures.py from OpenAI CLIP's
// and open_clip's code and a reproduction of Hugging Face's tokenizer.json pipeline (its README).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "test_util.hpp"
#include "text/clip_tokenizer.hpp"
#include "text/html_unescape.hpp"
#include "text/unicode_text.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

const nlohmann::json& fixtures() {
  static const nlohmann::json j = nlohmann::json::parse(slurp(fixture("tokenizer/clip_token_ids.json")));
  return j;
}

const ClipVocab& bundled() {
  static const ClipVocab v = read_openai_bpe(bundled_clip_vocab_path());
  return v;
}

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

// The Hugging Face files of the bundled vocabulary, written as transformers' CLIPConverter holds them
// (vocab.json + merges.txt; tokenizer.json with the merges as "A B" strings), once per test run.
const fs::path& hf_folder() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("attnmap_clip_hf_" + std::to_string(::getpid()));
    fs::create_directories(d);
    const ClipVocab& v = bundled();
    nlohmann::json vocab = nlohmann::json::object();
    for (size_t i = 0; i < v.tokens.size(); ++i) vocab[v.tokens[i]] = i;
    std::vector<std::pair<int32_t, std::string>> ranked;
    for (const auto& [key, m] : v.merges)
      ranked.push_back({m.rank, v.tokens[key >> 32] + " " + v.tokens[key & 0xffffffffu]});
    std::sort(ranked.begin(), ranked.end());
    std::ofstream(d / "vocab.json") << vocab.dump();
    std::ofstream merges(d / "merges.txt");
    merges << "#version: 0.2\n";
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : ranked) {
      merges << r.second << "\n";
      list.push_back(r.second);
    }
    nlohmann::json tok = {{"model", {{"type", "BPE"}, {"end_of_word_suffix", "</w>"}, {"continuing_subword_prefix", ""},
                                     {"unk_token", "<|endoftext|>"}, {"vocab", vocab}, {"merges", list}}}};
    std::ofstream(d / "tokenizer.json") << tok.dump();
    return d;
  }();
  return dir;
}

struct RemoveHfFolder : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("attnmap_clip_hf_" + std::to_string(::getpid())), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveHfFolder = ::testing::AddGlobalTestEnvironment(new RemoveHfFolder);

}  // namespace

TEST(ClipTokenizer, BundledVocabularyIsOpenAisFile) {
  EXPECT_EQ(bundled().tokens.size(), 49408u);
  EXPECT_EQ(bundled().merges.size(), 48894u);
  EXPECT_EQ(bundled().start_id, 49406);
  EXPECT_EQ(bundled().end_id, 49407);
  EXPECT_EQ(bundled().tokens[0], "!");
  EXPECT_EQ(bundled().tokens[256], "!</w>");
}

TEST(ClipTokenizer, OpenAiIdsEqualClipTokenizeOnHardStrings) {
  const ClipTokenizer tok(bundled(), ClipTextRules::openai);
  for (const auto& c : fixtures()["cases"]) {
    const std::string text = c["text"];
    SCOPED_TRACE(c["name"].get<std::string>());
    if (c["openai"].is_null()) {
      try {
        tok.tokenize(text);
        ADD_FAILURE() << "expected a refusal: clip.tokenize raised " << c["openai_error"];
      } catch (const Error& e) {
        const size_t n = tok.tokenize(text, ContextOverflow::truncate, 1000).size();
        EXPECT_NE(std::string(e.what()).find("is " + std::to_string(n) + " tokens"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("context of 77"), std::string::npos) << e.what();
      }
    } else {
      EXPECT_EQ(tok.tokenize(text), ids_of(c["openai"]));
    }
    EXPECT_EQ(tok.tokenize(text, ContextOverflow::truncate), ids_of(c["openai_truncated"]));
  }
}

TEST(ClipTokenizer, OpenClipIdsEqualOpenClipTokenizerOnHardStrings) {
  const ClipTokenizer tok(bundled(), ClipTextRules::open_clip);
  for (const auto& c : fixtures()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_EQ(tok.tokenize(c["text"], ContextOverflow::truncate), ids_of(c["open_clip"]));
  }
}

TEST(ClipTokenizer, HuggingFaceIdsEqualTokenizerJsonPipelineOnHardStrings) {
  for (const fs::path& source : {hf_folder(), hf_folder() / "vocab.json"}) {  // tokenizer.json; vocab.json + merges.txt
    const ClipTokenizer tok(read_clip_vocab(source.string()));
    ASSERT_EQ(tok.rules(), ClipTextRules::hugging_face);
    for (const auto& c : fixtures()["cases"]) {
      SCOPED_TRACE(c["name"].get<std::string>() + " from " + source.string());
      const auto& want = c["hugging_face"];
      if (want.size() <= kClipContext) {
        EXPECT_EQ(tok.tokenize(c["text"]), ids_of(want));
      }
      EXPECT_EQ(tok.tokenize(c["text"], ContextOverflow::truncate), ids_of(c["hugging_face_truncated"]));
    }
  }
}

TEST(ClipTokenizer, ContextRuleRefusesOrTruncatesAsTheFamiliesDo) {
  const ClipTokenizer tok(bundled(), ClipTextRules::openai);
  const std::string fits = fixtures()["cases"][50]["text"], over = fixtures()["cases"][51]["text"];
  ASSERT_EQ(fixtures()["cases"][50]["name"], "exactly_77");
  EXPECT_EQ(tok.tokenize(fits).size(), 77u);
  try {
    tok.tokenize(over);
    FAIL() << "a 78-token text was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is 78 tokens with <|startoftext|> and <|endoftext|>, more than CLIP's context of 77"),
              std::string::npos)
        << e.what();
  }
  std::string cats;  // a message cuts a long text between characters, never inside one
  for (int i = 0; i < 40; ++i) cats += "\xe7\x8c\xab\xe3\x81\xa8\xe7\x8a\xac ";  // 猫と犬
  const std::string refused = [&] {
    try {
      tok.tokenize(cats);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_EQ(refused.rfind("text \"\xe7\x8c\xab\xe3\x81\xa8\xe7\x8a\xac ", 0), 0u) << refused;
  EXPECT_EQ(refused.find("\\x"), std::string::npos) << refused;
  EXPECT_NE(refused.find("...\" is "), std::string::npos) << refused;
  const auto cut = tok.tokenize(over, ContextOverflow::truncate);
  ASSERT_EQ(cut.size(), 77u);
  EXPECT_EQ(cut.front(), 49406);
  EXPECT_EQ(cut.back(), 49407);
  EXPECT_EQ(tok.tokenize("a b c", ContextOverflow::truncate, 4),
            (std::vector<int32_t>{49406, bundled().id("a</w>"), bundled().id("b</w>"), 49407}));
  EXPECT_THROW(tok.tokenize("a", ContextOverflow::truncate, 1), Error);
  EXPECT_THROW(tok.encode(std::string(kMaxClipTextBytes + 1, 'a')), Error);
  EXPECT_THROW(tok.encode("bad \xff utf-8"), Error);
}

TEST(ClipTokenizer, DecodeGivesTheCleanedText) {
  const ClipTokenizer tok(bundled(), ClipTextRules::openai);
  EXPECT_EQ(tok.decode(tok.encode("A Photo of  the CAT's toy!")), "a photo of the cat 's toy ! ");
  EXPECT_EQ(tok.decode(tok.encode("caf\xc3\xa9 \xe7\x8c\xab")), "caf\xc3\xa9 \xe7\x8c\xab ");
  EXPECT_THROW(tok.decode({49408}), Error);
}

TEST(ClipTokenizer, CleaningStepsFollowPython) {
  auto u8 = [](const std::u32string& s) { return code_points_to_utf8(s); };
  auto cps = [](const std::string& s) { return utf8_to_code_points(s, "test"); };
  // html.unescape
  EXPECT_EQ(u8(html_unescape(cps("&amp;lt; &eacute &ampx &notit; &#0; &#x80; &#65 &#1114112; &zz; &#; &"))),
            "&lt; \xc3\xa9 &x \xc2\xacit; \xef\xbf\xbd \xe2\x82\xac A \xef\xbf\xbd &zz; &#; &");
  EXPECT_EQ(u8(html_unescape(cps("&#x1;x&#127;"))), "x");  // the code points html.unescape drops
  // str.lower() (final sigma, dotted capital I) against tokenizers' Lowercase (each code point alone)
  EXPECT_EQ(u8(lower_like_python(cps("\xce\xa3\xce\x91\xce\xa3 \xc4\xb0"))), "\xcf\x83\xce\xb1\xcf\x82 i\xcc\x87");
  EXPECT_EQ(u8(lower_each_code_point(cps("\xce\xa3\xce\x91\xce\xa3"))), "\xcf\x83\xce\xb1\xcf\x83");
  // U+001C: a space for str.split() (open_clip), not for the regex module's \s (OpenAI) or Hugging Face
  EXPECT_EQ(u8(clean_clip_text("a\x1c" "b", ClipTextRules::open_clip)), "a b");
  EXPECT_EQ(u8(clean_clip_text("a\x1c" "b", ClipTextRules::openai)), "a\x1c" "b");
  EXPECT_EQ(u8(clean_clip_text(" A&amp;B ", ClipTextRules::hugging_face)), " a&amp;b ");
}

TEST(ClipTokenizer, OnlyYpogegrammeniChangesClassUnderIgnoreCase) {
  // The regex module's IGNORECASE changes [^\s\p{L}\p{N}] for U+0345 alone (checked over all of Unicode with
  // Python 3.11's regex 2022.10); ICU must agree for the pattern to match as OpenAI's does.
  std::vector<char32_t> differ;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const bool plain = !(is_white_space(c) || is_letter(c) || is_number(c));
    if (plain != is_other_ignoring_case(c)) differ.push_back(c);
  }
  EXPECT_EQ(differ, std::vector<char32_t>{0x345});
}
