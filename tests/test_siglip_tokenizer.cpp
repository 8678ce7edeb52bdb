// test_siglip_tokenizer.cpp - SigLIP's tokenizer against each family's own token ids (issue 43, point 6):
// tests/fixtures/siglip/tokens.json, made by tools/make_siglip_tokenizer_fixtures.py from transformers'
// SiglipTokenizer and open_clip's HFTokenizer(clean="canonicalize") on tests/fixtures/siglip/spiece.model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "test_util.hpp"
#include "text/siglip_tokenizer.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

const nlohmann::json& fixtures() {
  static const nlohmann::json j = nlohmann::json::parse(slurp(fixture("siglip/tokens.json")));
  return j;
}

const std::string& model_path() {
  static const std::string p = fixture("siglip/spiece.model");
  return p;
}

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

// The Error message of f(), or "" when it does not throw.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Every hard string (case, white space, punctuation with underscores and apostrophes, accents, digits,
// emoji, CJK, full-width forms, special literals, empty after clean-up, a long text) under both families'
// rules: the ids without "</s>", and the padded ids at contexts 16 and 64 (truncated as the families do;
// refused with the count when asked to refuse).
TEST(SiglipTokenizer, EveryFamilyEqualsItsOwnCodeOnTheHardStrings) {
  const nlohmann::json& j = fixtures();
  ASSERT_GE(j["cases"].size(), 30u);
  for (SiglipTextRules rules : {SiglipTextRules::hugging_face, SiglipTextRules::open_clip}) {
    const SiglipTokenizer tok(model_path(), rules);
    const std::string family = siglip_rules_name(rules);
    for (const auto& c : j["cases"]) {
      const std::string text = c["text"], name = c["name"];
      SCOPED_TRACE(family + " " + name);
      const auto& want = c[family];
      const std::vector<int32_t> ids = ids_of(want["ids"]);
      EXPECT_EQ(tok.encode(text), ids);
      if (rules == SiglipTextRules::open_clip) {
        EXPECT_EQ(tok.clean(text), want["clean"].get<std::string>());
      }
      for (size_t context : {size_t{16}, size_t{64}}) {
        const std::vector<int32_t> padded = ids_of(want["context_" + std::to_string(context)]);
        EXPECT_EQ(tok.tokenize(text, ContextOverflow::truncate, context), padded);
        if (ids.size() + 1 <= context) {
          EXPECT_EQ(tok.tokenize(text, ContextOverflow::refuse, context), padded);
        } else {
          const std::string msg = error_of([&] { tok.tokenize(text, ContextOverflow::refuse, context); });
          EXPECT_NE(msg.find("is " + std::to_string(ids.size() + 1) + " tokens with </s>, more than SigLIP's context of " +
                             std::to_string(context)),
                    std::string::npos)
              << msg;
        }
      }
    }
  }
}

// The model's facts, truncation, padding and refusal on one prompt, spelled out.
TEST(SiglipTokenizer, TruncatesPadsAndRefusesAsSaid) {
  const SiglipTokenizer tok(model_path(), SiglipTextRules::hugging_face);
  EXPECT_EQ(tok.vocab_size(), 1000);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.pad_id(), 1);  // "</s>", not the model's <pad> (0)
  EXPECT_EQ(tok.unk_id(), 2);
  EXPECT_EQ(tok.file(), model_path());
  EXPECT_STREQ(siglip_rules_name(SiglipTextRules::hugging_face), "hugging_face");
  EXPECT_STREQ(siglip_rules_name(SiglipTextRules::open_clip), "open_clip");
  const std::vector<int32_t> dog{16, 172, 36, 16, 305, 42};  // "a photo of a dog" (the fixture's ids)
  ASSERT_EQ(tok.encode("A photo of a dog!"), dog);
  std::vector<int32_t> want = dog;
  want.push_back(1);
  want.resize(16, 1);
  EXPECT_EQ(tok.tokenize("A photo of a dog!", ContextOverflow::refuse, 16), want);
  EXPECT_EQ(tok.tokenize("a photo of a dog", ContextOverflow::refuse, 7).size(), 7u);  // exactly full: kept
  EXPECT_EQ(tok.tokenize("a photo of a dog", ContextOverflow::truncate, 4), (std::vector<int32_t>{16, 172, 36, 1}));
  EXPECT_EQ(error_of([&] { tok.tokenize("a photo of a dog", ContextOverflow::refuse, 6); }),
            "text \"a photo of a dog\" is 7 tokens with </s>, more than SigLIP's context of 6 (expected at most 6; "
            "shorten it, or truncate it as SigLIP's tokenizers do)");
  EXPECT_EQ(tok.tokenize("", ContextOverflow::refuse, 3), (std::vector<int32_t>{1, 1, 1}));
  EXPECT_NE(error_of([&] { tok.tokenize("a", ContextOverflow::truncate, 1); }).find("context of 1 tokens"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tok.encode("bad \xff byte"); }).find("text \"bad \\xff byte\""), std::string::npos);
  EXPECT_NE(error_of([&] { tok.encode(std::string(kMaxSiglipTextBytes + 1, 'a')); }).find("16385 bytes, more than the 16384"),
            std::string::npos);
}

// A missing file, a folder, an empty file and a file that is not a SentencePiece model: refused, the
// message naming the file.
TEST(SiglipTokenizer, UnreadableModelsAreRefusedNamingTheFile) {
  const fs::path dir = fs::temp_directory_path() / ("attnmap_siglip_tok_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string missing = (dir / "missing.model").string();
  std::string msg = error_of([&] { SiglipTokenizer(missing, SiglipTextRules::hugging_face); });
  EXPECT_NE(msg.find("SigLIP tokenizer model " + missing + ": cannot read it (No such file or directory"),
            std::string::npos)
      << msg;
  msg = error_of([&] { SiglipTokenizer(dir.string(), SiglipTextRules::open_clip); });
  EXPECT_NE(msg.find(dir.string() + ": not a regular file"), std::string::npos) << msg;
  const std::string empty = (dir / "empty.model").string();
  std::ofstream(empty).close();
  msg = error_of([&] { SiglipTokenizer(empty, SiglipTextRules::hugging_face); });
  EXPECT_NE(msg.find(empty + ": empty file"), std::string::npos) << msg;
  const std::string json = fixture("siglip/tokens.json");
  msg = error_of([&] { SiglipTokenizer(json, SiglipTextRules::hugging_face); });
  EXPECT_NE(msg.find("SigLIP tokenizer model " + json + ": not a SentencePiece model (expected a serialized ModelProto"),
            std::string::npos)
      << msg;
  fs::remove_all(dir);
}

// A second transformers version: tests/fixtures/siglip/texts.json holds transformers v4.48.3's SiglipTokenizer
// ids (padding="max_length", 16) for the SigLIP model fixtures' texts (tools/make_siglip_fixtures.py).
TEST(SiglipTokenizer, HuggingFaceIdsEqualTheModelFixturesTexts) {
  const nlohmann::json j = nlohmann::json::parse(slurp(fixture("siglip/texts.json")));
  const SiglipTokenizer tok(fixture("siglip/hf/spiece.model"), SiglipTextRules::hugging_face);
  ASSERT_EQ(j["texts"].size(), j["ids"].size());
  ASSERT_GE(j["texts"].size(), 5u);
  for (size_t i = 0; i < j["texts"].size(); ++i)
    EXPECT_EQ(tok.tokenize(j["texts"][i].get<std::string>(), ContextOverflow::refuse, 16), ids_of(j["ids"][i]))
        << j["texts"][i];
}
