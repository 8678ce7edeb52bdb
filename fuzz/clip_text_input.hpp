// clip_text_input.hpp - one input of fuzz_clip_text (fuzz/fuzz_clip_text.cpp), shared with the replay of
// fuzz/regressions/clip_text/ in tests/test_robust.cpp (FuzzRegressions) so both run the same code.
//
// An input is a format byte, then the vocabulary file(s), then the text, the parts cut at kClipFuzzCut:
//   format % 4 == 0: OpenAI's .gz as it is           [file.gz] CUT [text]
//   format % 4 == 1: OpenAI's text, gzipped here    [bpe text] CUT [text]   (mutations reach the merge lines)
//   format % 4 == 2: a Hugging Face folder          [vocab.json] CUT [merges.txt] CUT [text]
//   format % 4 == 3: a Hugging Face tokenizer.json  [tokenizer.json] CUT [text]
// A missing cut leaves the text (and merges.txt) empty. format / 4 (0..63) is a second, small context. The
// files are written into `dir` (the readers read paths) and read with read_clip_vocab. A vocabulary that reads
// is tokenized with each ClipTextRules, refusing and truncating at CLIP's context and at the small one, and
// the ids decoded; the text's bytes, read as 16-bit ids, are decoded too. Only attnmap::Error may leave
// a reader or the tokenizer: it is caught here. A broken promise of the API (ids not framed by the special
// tokens, longer than the context after truncation) aborts: that is a finding as much as a crash.
#pragma once
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "text/clip_tokenizer.hpp"
#include "text/clip_vocab.hpp"

namespace attnmap::fuzz {

inline const std::string kClipFuzzCut = "\n--8<--\n";

// `text` into the parts cut at kClipFuzzCut (at most `n`; the last takes the rest, missing ones are empty).
// memmem, not std::string::find: libFuzzer watches memmem's arguments and learns the cut.
inline std::vector<std::string> clip_fuzz_parts(const std::string& text, size_t n) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() + 1 < n) {
    const void* hit = start <= text.size() ? memmem(text.data() + start, text.size() - start, kClipFuzzCut.data(),
                                                    kClipFuzzCut.size())
                                           : nullptr;
    if (!hit) break;
    const size_t at = static_cast<size_t>(static_cast<const char*>(hit) - text.data());
    parts.push_back(text.substr(start, at - start));
    start = at + kClipFuzzCut.size();
  }
  parts.push_back(start <= text.size() ? text.substr(start) : std::string());
  parts.resize(n);
  return parts;
}

inline void clip_fuzz_write(const std::filesystem::path& p, const std::string& bytes) {
  std::filesystem::create_directories(p.parent_path());
  FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) std::abort();  // the fuzzer's own folder: not a finding in attnmap, but nothing can run
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
}

// gzip of `text` (one member), as Python's gzip module writes it.
inline std::string clip_fuzz_gzip(const std::string& text) {
  z_stream zs{};
  if (deflateInit2(&zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

inline void clip_fuzz_check(bool ok) {
  if (!ok) std::abort();
}

// Tokenizes and decodes `text` with `vocab` under `rules`; Errors are caught, broken promises abort.
inline void clip_fuzz_tokenize(const ClipVocab& vocab, ClipTextRules rules, const std::string& text, size_t small) {
  try {
    const ClipTokenizer tok(vocab, rules);
    for (const size_t context : {kClipContext, small}) {
      std::vector<int32_t> whole;
      try {
        whole = tok.tokenize(text, ContextOverflow::refuse, context);
        clip_fuzz_check(whole.size() >= 2 && whole.size() <= context);
        tok.decode(whole);
      } catch (const Error&) {
      }
      try {
        const std::vector<int32_t> cut = tok.tokenize(text, ContextOverflow::truncate, context);
        clip_fuzz_check(cut.size() >= 2 && cut.size() <= context && cut.front() == vocab.start_id &&
                        cut.back() == vocab.end_id);
        clip_fuzz_check(whole.empty() || whole == cut);
        tok.decode(cut);
      } catch (const Error&) {
      }
    }
    std::vector<int32_t> ids;  // the text's bytes as ids: decode on any token sequence
    const int32_t n = static_cast<int32_t>(vocab.tokens.size()) + 2;
    for (size_t i = 0; i + 1 < text.size() && ids.size() < 256; i += 2)
      ids.push_back(static_cast<int32_t>((static_cast<uint8_t>(text[i]) << 8) | static_cast<uint8_t>(text[i + 1])) % n - 1);
    try {
      tok.decode(ids);
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
}

// One input (see the top of this file); the files go into `dir`, which must exist.
inline void run_clip_text_input(const uint8_t* data, size_t size, const std::filesystem::path& dir) {
  if (size == 0) return;
  const unsigned format = data[0] % 4;
  const size_t small = data[0] / 4;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<std::string> parts = clip_fuzz_parts(rest, format == 2 ? 3 : 2);
  std::filesystem::path path;
  if (format == 0 || format == 1) {
    path = dir / "openai" / "bpe_simple_vocab_16e6.txt.gz";
    clip_fuzz_write(path, format == 0 ? parts[0] : clip_fuzz_gzip(parts[0]));
  } else if (format == 2) {
    path = dir / "hf";
    clip_fuzz_write(path / "vocab.json", parts[0]);
    clip_fuzz_write(path / "merges.txt", parts[1]);
  } else {
    path = dir / "tokenizer_json";
    clip_fuzz_write(path / "tokenizer.json", parts[0]);
  }
  ClipVocab vocab;
  try {
    vocab = read_clip_vocab(path.string());
  } catch (const Error&) {
    return;
  }
  clip_fuzz_check(vocab.start_id >= 0 && vocab.end_id >= 0 && static_cast<size_t>(vocab.start_id) < vocab.tokens.size() &&
                  static_cast<size_t>(vocab.end_id) < vocab.tokens.size());
  const std::string& text = parts.back();
  for (const ClipTextRules rules : {ClipTextRules::openai, ClipTextRules::open_clip, ClipTextRules::hugging_face})
    clip_fuzz_tokenize(vocab, rules, text, small);
}

}  // namespace attnmap::fuzz
