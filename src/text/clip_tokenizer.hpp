// clip_tokenizer.hpp - CLIP's tokenizer: text clean-up, pre-tokenisation, byte-level BPE, the special
// tokens and the 77-token context, as OpenAI CLIP, open_clip and Hugging Face each do it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "text/clip_vocab.hpp"

namespace attnmap {

/// Whose tokenizer to follow. They share the vocabulary, pattern and BPE; they differ in the clean-up:
/// - openai (clip/simple_tokenizer.py): ftfy.fix_text (here: NFC only), html.unescape twice, strip,
///   runs of White_Space -> " " (the regex module's \s), strip, str.lower(); literal "<|startoftext|>" /
///   "<|endoftext|>" in the text are the special tokens; the pattern is case-insensitive.
/// - open_clip (src/open_clip/tokenizer.py, clean="lower"): the same, but runs of str.isspace() characters
///   (also U+001C..U+001F) -> " ", and its special literals are "<start_of_text>" / "<end_of_text>".
/// - hugging_face (tokenizer.json as transformers' CLIPConverter writes it): NFC, runs of White_Space ->
///   " ", each code point lower-cased alone (no final "ς"), no HTML unescaping, a case-sensitive pattern;
///   "<|startoftext|>" / "<|endoftext|>" are split off the normalised text first (added tokens).
enum class ClipTextRules { openai, open_clip, hugging_face };

/// The rules that go with a vocabulary's source: OpenAI's .gz -> openai, Hugging Face files -> hugging_face.
/// (An open_clip model's text tower asks for open_clip explicitly.)
ClipTextRules default_text_rules(VocabSource source);

/// The rules' name: "openai", "open_clip", "hugging_face".
const char* text_rules_name(ClipTextRules rules);

/// A text longer than the context: refused (OpenAI's clip.tokenize without truncate=True), or truncated
/// as open_clip (and clip.tokenize(truncate=True), and Hugging Face with truncation=True) do: the first
/// context-1 tokens, then <|endoftext|>.
enum class ContextOverflow { refuse, truncate };

/// CLIP's context length (OpenAI, open_clip and Hugging Face CLIP models).
constexpr size_t kClipContext = 77;

/// The most UTF-8 bytes a text may have (a bound on the BPE's work; a CLIP text holds 75 tokens).
constexpr size_t kMaxClipTextBytes = 16 * 1024;

/// A text's start for a message: at most 60 bytes, cut between UTF-8 sequences, "..." when cut; printable.
std::string clip_text_head(const std::string& text);

/// The text after the rules' clean-up, before pre-tokenisation (code points). Errors: text not UTF-8.
std::u32string clean_clip_text(const std::string& text, ClipTextRules rules);

/// The pre-tokens of cleaned text, in order (CLIP's pattern
/// <|startoftext|>|<|endoftext|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+ as the rules
/// match it: OpenAI and open_clip case-insensitively with their own special literals, Hugging Face
/// case-sensitively after splitting off the special tokens), each as UTF-8.
std::vector<std::string> clip_pre_tokens(const std::u32string& cleaned, ClipTextRules rules);

class ClipTokenizer {
 public:
  /// A tokenizer over `vocab` following `rules`. Errors: the vocabulary lacks a byte character (every
  /// CLIP vocabulary has all 256 and their "</w>" forms).
  ClipTokenizer(ClipVocab vocab, ClipTextRules rules);
  explicit ClipTokenizer(ClipVocab vocab) : ClipTokenizer(std::move(vocab), ClipTextRules::openai) {
    rules_ = default_text_rules(vocab_.source);
  }

  /// The token ids of `text` without <|startoftext|> / <|endoftext|> (SimpleTokenizer.encode; HF's
  /// encode(add_special_tokens=False)). Errors: not UTF-8, more than kMaxClipTextBytes bytes.
  std::vector<int32_t> encode(const std::string& text) const;

  /// <|startoftext|>, encode(text), <|endoftext|>: the ids a text tower reads (not padded: OpenAI and
  /// open_clip pad with 0 to the context, which the tower never reads past <|endoftext|>). Longer than
  /// `context`: refused with an Error saying the count and the limit, or truncated (ContextOverflow).
  std::vector<int32_t> tokenize(const std::string& text, ContextOverflow overflow = ContextOverflow::refuse,
                                size_t context = kClipContext) const;

  /// The text of ids as SimpleTokenizer.decode gives it ("</w>" -> " ", bytes as UTF-8, U+FFFD for a
  /// broken sequence). Errors: an id outside the vocabulary.
  std::string decode(const std::vector<int32_t>& ids) const;

  const ClipVocab& vocab() const { return vocab_; }
  ClipTextRules rules() const { return rules_; }

 private:
  void bpe(const std::string& piece, std::vector<int32_t>& out) const;

  ClipVocab vocab_;
  ClipTextRules rules_;
  int32_t byte_ids_[256];      // the byte's character
  int32_t byte_end_ids_[256];  // the byte's character + "</w>"
};

}  // namespace attnmap
