// siglip_tokenizer.hpp - SigLIP's tokenizer: a SentencePiece model (spiece.model, T5's / SigLIP's
// vocabulary) behind each family's text clean-up, "</s>" last, padded with "</s>" to the context.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/clip_tokenizer.hpp"  // ContextOverflow

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace attnmap {

/// Whose SigLIP tokenizer to follow (docs/text.md, "SigLIP's tokenizer"):
/// - hugging_face: transformers' SiglipTokenizer (models/siglip/tokenization_siglip.py; what AutoTokenizer
///   and SiglipProcessor load for a SiglipModel folder): "▁" put first and every "▁" in the text made a
///   space (tokenize), the text split at the literal special tokens "</s>" / "<unk>"
///   (PreTrainedTokenizer.tokenize), each other piece canonicalized (canonicalize_text: str.lower(), ASCII
///   punctuation removed, runs of white space -> " ", stripped) and encoded behind "<unk>", whose pieces are
///   dropped (_tokenize); a leading "▁" piece before a special token dropped (tokenize).
/// - open_clip: open_clip's HFTokenizer(clean="canonicalize") (src/open_clip/tokenizer.py): basic_clean
///   (ftfy.fix_text: here NFC only, as for CLIP; html.unescape twice; strip), canonicalize_text ("_" -> " ",
///   ASCII punctuation removed, str.lower(), white space collapsed, stripped), then its Hugging Face
///   tokenizer, taken here as SentencePiece's own encoding of that text (see docs/text.md for why).
enum class SiglipTextRules { hugging_face, open_clip };

/// The rules' name: "hugging_face" / "open_clip".
const char* siglip_rules_name(SiglipTextRules r);

/// SigLIP's context: the text length of every released SigLIP (HF model_max_length, open_clip
/// context_length, text_config.max_position_embeddings).
constexpr size_t kSiglipContext = 64;

/// The largest spiece.model read (SigLIP's English one is 0.8 MB, the multilingual mC4 one 4.3 MB).
constexpr size_t kMaxSiglipModelBytes = 16u << 20;

/// The most UTF-8 bytes a text may have (a bound on the work; a SigLIP text holds 63 tokens).
constexpr size_t kMaxSiglipTextBytes = 16 * 1024;

class SiglipTokenizer {
 public:
  /// Reads a SentencePiece model file (spiece.model) through Debian's libsentencepiece (libsentencepiece.so.0,
  /// opened at the first construction). Errors (Error) name the file and why: the library cannot be opened,
  /// the file missing or unreadable, not a regular file, over kMaxSiglipModelBytes, not a
  /// SentencePiece model (SentencePiece's own reason), no "</s>" or "<unk>" piece (not a T5/SigLIP
  /// vocabulary, e.g. SigLIP 2's Gemma tokenizer).
  SiglipTokenizer(const std::string& model_path, SiglipTextRules rules);
  ~SiglipTokenizer();
  SiglipTokenizer(SiglipTokenizer&&) noexcept;
  SiglipTokenizer& operator=(SiglipTokenizer&&) noexcept;

  /// The ids a SigLIP text tower reads: encode(text), then "</s>" (eos_id()); longer than `context`:
  /// refused (Error with the count and the limit) or truncated as both families do (truncation=True: the
  /// first context-1 ids, then "</s>"); then padded with pad_id() to exactly `context` ids
  /// (padding="max_length"). Errors: as encode, a context under 2.
  std::vector<int32_t> tokenize(const std::string& text, ContextOverflow overflow, size_t context) const;

  /// The ids of `text` under the rules, without "</s>" and without padding (HF: tokenize +
  /// convert_tokens_to_ids). Errors: not UTF-8, more than kMaxSiglipTextBytes bytes.
  std::vector<int32_t> encode(const std::string& text) const;

  /// The text after the rules' clean-up (open_clip: what its HF tokenizer is given; hugging_face: the
  /// canonicalized text without the "▁" prefix and with special literals removed - for messages only).
  std::string clean(const std::string& text) const;

  int vocab_size() const;          // the model's pieces (SentencePieceProcessor::GetPieceSize)
  /// The piece of an id in [0, vocab_size()) (SentencePieceProcessor::IdToPiece: "▁a", "</s>", "<unk>").
  std::string piece(int32_t id) const;
  int32_t eos_id() const { return eos_id_; }  // "</s>" (1 in T5's and SigLIP's vocabularies)
  int32_t pad_id() const { return eos_id_; }  // "</s>" too: SiglipTokenizer's pad_token, open_clip's pad_id
  int32_t unk_id() const { return unk_id_; }  // "<unk>"
  SiglipTextRules rules() const { return rules_; }
  const std::string& file() const { return file_; }  // the model file's path as given

 private:
  std::vector<int32_t> encode_hugging_face(const std::u32string& text) const;
  void encode_hf_piece(const std::u32string& piece, std::vector<std::string>& tokens) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  SiglipTextRules rules_;
  std::string file_;
  int32_t eos_id_ = 1;
  int32_t unk_id_ = 2;
  size_t unk_token_length_ = 0;  // len(sp_model.encode("<unk>")): SiglipTokenizer.unk_token_length
};

}  // namespace attnmap
