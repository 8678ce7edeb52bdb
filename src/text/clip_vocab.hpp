// clip_vocab.hpp - CLIP's byte-level BPE vocabulary: token ids, merge ranks and the two special tokens,
// read from OpenAI's bpe_simple_vocab_16e6.txt.gz or a Hugging Face folder's files.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnmap {

/// Where a vocabulary was read from; it picks the text clean-up that goes with it (clip_tokenizer.hpp).
enum class VocabSource {
  openai_bpe,          // bpe_simple_vocab_16e6.txt.gz (OpenAI CLIP, open_clip)
  hf_vocab_merges,     // a Hugging Face folder's vocab.json + merges.txt
  hf_tokenizer_json,   // a Hugging Face tokenizer.json (the fast tokenizer)
};

/// One merge rule: its rank (lower merges first) and the id of the joined token.
struct BpeMerge {
  int32_t rank = 0;
  int32_t merged = 0;
};

/// A CLIP vocabulary. Tokens are in the byte-level alphabet (bytes_to_unicode), a word's last symbol
/// marked with "</w>".
struct ClipVocab {
  VocabSource source = VocabSource::openai_bpe;
  std::string path;                              // the file (or "vocab.json + merges.txt") read
  std::vector<std::string> tokens;               // id -> token
  std::unordered_map<std::string, int32_t> ids;  // token -> id (for a repeated token the last id, as Python's dict)
  std::unordered_map<uint64_t, BpeMerge> merges; // merge_key(left id, right id) -> rule
  int32_t start_id = -1;                         // <|startoftext|>
  int32_t end_id = -1;                           // <|endoftext|>

  /// The id of `token`, or -1.
  int32_t id(const std::string& token) const;
};

/// The key of the pair (left, right) in ClipVocab::merges.
inline uint64_t merge_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

/// The 256 bytes' characters in CLIP's byte-level alphabet, as UTF-8 (bytes_to_unicode() of OpenAI's
/// simple_tokenizer.py: printable Latin-1 bytes map to themselves, the others to U+0100 onwards).
const std::vector<std::string>& byte_alphabet();

/// OpenAI's bpe_simple_vocab_16e6.txt.gz, built into a vocabulary as SimpleTokenizer.__init__ does
/// (OpenAI clip/simple_tokenizer.py; open_clip's copy is the same): the merges are lines 2..48895 of the
/// file (merges[1:49152-256-2+1]), each "A B"; the vocabulary is the 256 byte characters, the same with
/// "</w>", each merge's join in merge order, then <|startoftext|> and <|endoftext|> (49408 tokens).
/// A final empty line is allowed. Errors (Error naming the file and line): not gzip, damaged, larger than
/// 16 MiB unpacked, not UTF-8, a merge line that is not two symbols.
ClipVocab read_openai_bpe(const std::string& path);

/// A Hugging Face folder's vocab.json ({"token": id}) and merges.txt ("#version" first line, then "A B"
/// lines in rank order), as CLIPTokenizer and tokenizers' BPE read them. Errors (Error naming the file and
/// the line or entry): not a JSON object, an id that is not an integer or not 0..n-1 once each, a merge
/// line not two symbols, a merge whose symbols or join are not in the vocabulary, no <|startoftext|> or
/// <|endoftext|>, a file over 16 MiB.
ClipVocab read_hf_vocab_merges(const std::string& vocab_json, const std::string& merges_txt);

/// A Hugging Face tokenizer.json: model.type "BPE" with end_of_word_suffix "</w>", model.vocab and
/// model.merges (either "A B" strings or ["A", "B"] pairs). The normalizer and pre-tokenizer are taken to
/// be CLIP's (CLIPConverter in transformers' convert_slow_tokenizer.py); clip_tokenizer.hpp applies them.
/// Errors as read_hf_vocab_merges, naming model.merges[i] or the vocab entry.
ClipVocab read_hf_tokenizer_json(const std::string& path);

/// Reads whichever a path is: a *.gz file (OpenAI), a tokenizer.json, a vocab.json (with merges.txt beside
/// it), or a folder holding tokenizer.json or vocab.json + merges.txt (tokenizer.json preferred, as
/// AutoTokenizer prefers the fast tokenizer). Errors: none of these found (the message lists what was
/// looked for), and the readers' errors.
ClipVocab read_clip_vocab(const std::string& path);

/// The bundled copy of OpenAI's bpe_simple_vocab_16e6.txt.gz (data/clip/ in the source tree, or
/// share/attnmap/clip/ installed). Errors: neither exists.
std::string bundled_clip_vocab_path();

}  // namespace attnmap
