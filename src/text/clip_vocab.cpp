// clip_vocab.cpp - CLIP vocabulary readers (see clip_vocab.hpp).
#include "text/clip_vocab.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "text/unicode_text.hpp"

namespace fs = std::filesystem;

namespace attnmap {
namespace {

constexpr size_t kMaxVocabBytes = size_t(16) << 20;  // a vocabulary file (or its unpacked text): 16 MiB
const char* const kStart = "<|startoftext|>";
const char* const kEnd = "<|endoftext|>";

std::string file_text(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::is_regular_file(status)) throw Error(printable(path) + ": not a readable file (expected a vocabulary file)");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(printable(path) + ": cannot read its size (" + ec.message() + ")");
  if (size > kMaxVocabBytes)
    throw Error(printable(path) + ": " + std::to_string(size) + " bytes, more than the 16 MiB a vocabulary file may have");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw Error(printable(path) + ": cannot be read (expected " + std::to_string(size) + " bytes)");
  return bytes;
}

// The unpacked bytes of a gzip file (every member, as Python's gzip.open reads), at most kMaxVocabBytes.
std::string gunzip_file(const std::string& path) {
  const std::string packed = file_text(path);
  if (packed.size() < 2 || static_cast<unsigned char>(packed[0]) != 0x1f || static_cast<unsigned char>(packed[1]) != 0x8b)
    throw Error(printable(path) + ": not a gzip file (expected the bytes 1f 8b first, as bpe_simple_vocab_16e6.txt.gz has)");
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw Error(printable(path) + ": zlib could not start");
  std::string out;
  char buf[1 << 16];
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  zs.avail_in = static_cast<uInt>(packed.size());
  int rc = Z_OK;
  while (true) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
    if (out.size() > kMaxVocabBytes) break;
    if (rc == Z_STREAM_END && zs.avail_in > 0) rc = inflateReset(&zs);  // another gzip member follows
    else if (rc == Z_STREAM_END) break;
    if (rc != Z_OK) break;
  }
  inflateEnd(&zs);
  if (out.size() > kMaxVocabBytes) throw Error(printable(path) + ": unpacks to more than 16 MiB (OpenAI's CLIP vocabulary unpacks to 3.2 MB)");
  if (rc != Z_STREAM_END)
    throw Error(printable(path) + ": damaged gzip data after " + std::to_string(out.size()) + " unpacked bytes (zlib: " +
                (zs.msg ? zs.msg : zError(rc)) + ")");
  return out;
}

// text.split('\n'), at most `limit` lines (the rest is not needed).
std::vector<std::string> split_lines(const std::string& text, size_t limit = SIZE_MAX) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (lines.size() < limit) {
    const size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return lines;
}

// "A B" -> {A, B}: the symbols of merge line number `line_no` of `path`, split at ASCII white space.
// Errors name the file and line.
std::pair<std::string, std::string> merge_parts(const std::string& line, const std::string& path, size_t line_no) {
  std::string parts[2];  // the first two symbols; the others are only counted (a line may be 16 MiB of "a ")
  size_t count = 0, i = 0;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
  while (i < line.size()) {
    while (i < line.size() && space(line[i])) ++i;
    size_t j = i;
    while (j < line.size() && !space(line[j])) ++j;
    if (j > i && count++ < 2) parts[count - 1] = line.substr(i, j - i);
    i = j;
  }
  if (count != 2)
    throw Error(printable(path) + ": line " + std::to_string(line_no) + ": expected a merge of two symbols \"A B\", found " + std::to_string(count) +
                " (\"" + printable(line.substr(0, 80)) + "\")");
  return {parts[0], parts[1]};
}

// Errors name the line of the first byte that is not UTF-8.
void check_utf8(const std::string& text, const std::string& path) {
  size_t line = 1;
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_sequence_length(text, i);
    if (len == 0) {
      char found[8];
      std::snprintf(found, sizeof found, "0x%02x", static_cast<unsigned char>(text[i]));
      throw Error(printable(path) + ": line " + std::to_string(line) + ": not UTF-8 at byte " + std::to_string(i) +
                  " (expected a well-formed UTF-8 sequence, found byte " + found + ")");
    }
    if (text[i] == '\n') ++line;
    i += len;
  }
}

// The bytes bytes_to_unicode() keeps as their own Latin-1 character ('!'..'~', '¡'..'¬', '®'..'ÿ').
bool kept_byte(size_t b) { return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff); }

void set_specials(ClipVocab& v, const std::string& where) {
  v.start_id = v.id(kStart);
  v.end_id = v.id(kEnd);
  if (v.start_id < 0 || v.end_id < 0)
    throw Error(where + ": no " + (v.start_id < 0 ? kStart : kEnd) + " token (expected CLIP's special tokens in the vocabulary)");
}

}  // namespace

int32_t ClipVocab::id(const std::string& token) const {
  const auto it = ids.find(token);
  return it == ids.end() ? -1 : it->second;
}

const std::vector<std::string>& byte_alphabet() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      std::string s;
      append_utf8(s, static_cast<char32_t>(kept_byte(static_cast<size_t>(b)) ? b : 256 + n++));
      t[static_cast<size_t>(b)] = s;
    }
    return t;
  }();
  return table;
}

ClipVocab read_openai_bpe(const std::string& path) {
  const std::string text = gunzip_file(path);
  check_utf8(text, path);
  const size_t last = 49152 - 256 - 2 + 1;  // merges[1:49152-256-2+1]
  const std::vector<std::string> lines = split_lines(text, last + 1);
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(last);
  for (size_t i = 1; i < std::min(lines.size(), last); ++i) {
    if (lines[i].empty() && i + 1 == lines.size()) break;  // the newline ending the file
    merges.push_back(merge_parts(lines[i], path, i + 1));
  }
  ClipVocab v;
  v.source = VocabSource::openai_bpe;
  v.path = path;
  // bytes_to_unicode().values() in the dict's order: the printable bytes first, then the others.
  const auto& alphabet = byte_alphabet();
  std::vector<size_t> order;
  for (size_t b = 0; b < 256; ++b)
    if (kept_byte(b)) order.push_back(b);
  for (size_t b = 0; b < 256; ++b)
    if (!kept_byte(b)) order.push_back(b);
  for (size_t b : order) v.tokens.push_back(alphabet[b]);
  for (size_t b : order) v.tokens.push_back(alphabet[b] + "</w>");
  for (const auto& m : merges) v.tokens.push_back(m.first + m.second);
  v.tokens.push_back(kStart);
  v.tokens.push_back(kEnd);
  for (size_t i = 0; i < v.tokens.size(); ++i) v.ids[v.tokens[i]] = static_cast<int32_t>(i);  // later ids win
  for (size_t r = 0; r < merges.size(); ++r) {
    const int32_t a = v.id(merges[r].first), b = v.id(merges[r].second);
    if (a < 0 || b < 0) continue;  // never applies: every symbol of a word is in the vocabulary
    v.merges[merge_key(a, b)] = BpeMerge{static_cast<int32_t>(r), v.id(merges[r].first + merges[r].second)};
  }
  set_specials(v, printable(path));
  return v;
}

namespace {

// JSON values (and their depth) a vocabulary file may hold. CLIP's tokenizer.json holds ~200 000 values
// (49 408 tokens, 48 894 merges as ["A", "B"] pairs) nested 4 deep; nlohmann's tree costs far more than the
// text (a 16 MiB file of "[]," - 5.6 million empty arrays - took 430 MB and 3 s before its first merge was
// refused, 0.96 GB under ASan; with this bound 1 s and ~90 MB).
constexpr size_t kMaxJsonValues = 1'000'000;
constexpr int kMaxJsonDepth = 64;

nlohmann::json parse_json(const std::string& text, const std::string& path) {
  size_t values = 0;
  auto bound = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    using E = nlohmann::json::parse_event_t;
    if (event != E::value && event != E::object_start && event != E::array_start) return true;
    if (depth > kMaxJsonDepth)
      throw Error(printable(path) + ": nested deeper than " + std::to_string(kMaxJsonDepth) +
                  " levels (expected a vocabulary: tokenizer.json nests 4 deep)");
    if (++values > kMaxJsonValues)
      throw Error(printable(path) + ": more than " + std::to_string(kMaxJsonValues) +
                  " JSON values (expected a vocabulary: CLIP's tokenizer.json has ~200 000)");
    return true;
  };
  try {
    return nlohmann::json::parse(text, bound);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(printable(path) + ": not JSON (byte " + std::to_string(e.byte) + ": " + e.what() + ")");
  }
}

// {"token": id, ...} into v.tokens / v.ids; ids must be 0..n-1, each once.
void read_vocab_object(const nlohmann::json& obj, const std::string& where, ClipVocab& v) {
  if (!obj.is_object()) throw Error(where + ": expected a JSON object {\"token\": id}, found " + obj.type_name());
  const size_t n = obj.size();
  v.tokens.assign(n, std::string());
  std::vector<bool> seen(n, false);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    auto entry = [&] { return where + " entry \"" + printable(it.key()) + "\""; };
    if (!it.value().is_number_integer()) throw Error(entry() + ": expected an integer id, found " + it.value().type_name());
    const long long id = it.value().get<long long>();
    if (id < 0 || static_cast<unsigned long long>(id) >= n)
      throw Error(entry() + ": id " + std::to_string(id) + " out of range (expected 0.." + std::to_string(n - 1) +
                  " for " + std::to_string(n) + " tokens)");
    const size_t k = static_cast<size_t>(id);
    if (seen[k]) throw Error(entry() + ": id " + std::to_string(id) + " is also \"" + printable(v.tokens[k]) + "\" (expected each id once)");
    seen[k] = true;
    v.tokens[k] = it.key();
    v.ids[it.key()] = static_cast<int32_t>(id);
  }
}

// Adds merge rule number `rank` (A, B) as tokenizers' BPE builder does: A, B and A+B must be tokens.
template <class Where>
void add_merge(ClipVocab& v, const std::pair<std::string, std::string>& m, size_t rank, Where where) {
  const int32_t a = v.id(m.first), b = v.id(m.second), joined = v.id(m.first + m.second);
  if (a < 0 || b < 0 || joined < 0) {
    const std::string missing = a < 0 ? m.first : b < 0 ? m.second : m.first + m.second;
    throw Error(where() + ": \"" + printable(missing) + "\" is not in the vocabulary (expected a merge of two tokens whose join is a token)");
  }
  v.merges[merge_key(a, b)] = BpeMerge{static_cast<int32_t>(rank), joined};
}

}  // namespace

ClipVocab read_hf_vocab_merges(const std::string& vocab_json, const std::string& merges_txt) {
  ClipVocab v;
  v.source = VocabSource::hf_vocab_merges;
  v.path = vocab_json + " + " + merges_txt;
  read_vocab_object(parse_json(file_text(vocab_json), vocab_json), printable(vocab_json), v);
  const std::string text = file_text(merges_txt);
  check_utf8(text, merges_txt);
  // One line at a time, not split_lines: a vector of every line costs 32 bytes per line on top of the text
  // (a 16 MiB file of newlines took 0.9 GB and 12 s before its third line was refused).
  size_t rank = 0, start = 0;
  for (size_t i = 0; start <= text.size(); ++i) {
    const size_t nl = text.find('\n', start);
    const size_t stop = nl == std::string::npos ? text.size() : nl;
    const std::string line = text.substr(start, stop - start);
    start = stop + 1;
    if (line.rfind("#version", 0) == 0) continue;        // tokenizers skips the "#version: 0.2" line
    if (line.empty() && nl == std::string::npos) break;  // the newline ending the file
    const auto parts = merge_parts(line, merges_txt, i + 1);
    add_merge(v, parts, rank++, [&] { return printable(merges_txt) + ": line " + std::to_string(i + 1); });
  }
  set_specials(v, printable(vocab_json));
  return v;
}

namespace {

// What a JSON value is, for a message, without dumping it: an array or object may nest as deep as the file
// allows, and nlohmann's dump() recurses once per level (a merge of 60 000 nested "[" overflowed the stack).
// Scalars as their JSON text (at most 80 bytes), containers by their type and size, an array's first two
// elements by their type ("[string, number]").
std::string json_shape(const nlohmann::json& v) {
  if (v.is_array() && v.size() <= 2) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::string(v[i].type_name());
    return out + "]";
  }
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " elements";
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " entries";
  return printable(v.dump().substr(0, 80));
}

template <class Where>
std::pair<std::string, std::string> json_merge(const nlohmann::json& m, Where where) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
      throw Error(where() + ": expected \"A B\" (two symbols, one space), found \"" + printable(s.substr(0, 80)) + "\"");
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  throw Error(where() + ": expected \"A B\" or [\"A\", \"B\"], found " + json_shape(m));
}

std::string json_string_or(const nlohmann::json& obj, const char* key, const std::string& fallback) {
  const auto it = obj.find(key);
  return (it == obj.end() || it->is_null()) ? fallback : it->is_string() ? it->get<std::string>() : "(not a string)";
}

}  // namespace

ClipVocab read_hf_tokenizer_json(const std::string& path) {
  const nlohmann::json j = parse_json(file_text(path), path);
  const std::string file = printable(path);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    throw Error(file + ": no \"model\" object (expected a Hugging Face tokenizer.json)");
  const nlohmann::json& model = j["model"];
  const std::string type = json_string_or(model, "type", "BPE");
  if (type != "BPE") throw Error(file + ": model.type is \"" + printable(type) + "\" (expected \"BPE\", CLIP's tokenizer)");
  const std::string suffix = json_string_or(model, "end_of_word_suffix", "");
  if (suffix != "</w>")
    throw Error(file + ": model.end_of_word_suffix is \"" + printable(suffix) + "\" (expected \"</w>\", CLIP's tokenizer)");
  if (!model.contains("vocab") || !model.contains("merges") || !model["merges"].is_array())
    throw Error(file + ": model.vocab or model.merges missing (expected a BPE vocabulary and a merges list)");
  ClipVocab v;
  v.source = VocabSource::hf_tokenizer_json;
  v.path = path;
  read_vocab_object(model["vocab"], file + " model.vocab", v);
  const nlohmann::json& merges = model["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    auto where = [&] { return file + " model.merges[" + std::to_string(i) + "]"; };
    add_merge(v, json_merge(merges[i], where), i, where);
  }
  set_specials(v, file + " model.vocab");
  return v;
}

ClipVocab read_clip_vocab(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) throw Error(printable(path) + ": no such file or folder");
  if (fs::is_directory(p, ec)) {
    if (fs::is_regular_file(p / "tokenizer.json", ec)) return read_hf_tokenizer_json((p / "tokenizer.json").string());
    if (fs::is_regular_file(p / "vocab.json", ec) && fs::is_regular_file(p / "merges.txt", ec))
      return read_hf_vocab_merges((p / "vocab.json").string(), (p / "merges.txt").string());
    throw Error(printable(path) + ": a folder without tokenizer.json or vocab.json + merges.txt (expected a Hugging Face "
                "tokenizer folder, or give bpe_simple_vocab_16e6.txt.gz)");
  }
  const std::string name = p.filename().string();
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) return read_openai_bpe(path);
  if (name == "vocab.json") {
    const fs::path merges = p.parent_path() / "merges.txt";
    if (!fs::is_regular_file(merges, ec))
      throw Error(printable(path) + ": no merges.txt beside it (expected vocab.json and merges.txt in one folder)");
    return read_hf_vocab_merges(path, merges.string());
  }
  if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0) return read_hf_tokenizer_json(path);
  throw Error(printable(path) + ": not a CLIP vocabulary (expected bpe_simple_vocab_16e6.txt.gz, tokenizer.json, "
              "vocab.json + merges.txt, or their folder)");
}

std::string bundled_clip_vocab_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "attnmap" / "clip" / "bpe_simple_vocab_16e6.txt.gz";
    if (fs::exists(installed, ec)) return installed.string();
  }
  for (const char* p : {ATTNMAP_SOURCE_CLIP_VOCAB, ATTNMAP_INSTALLED_CLIP_VOCAB})
    if (fs::exists(p, ec)) return p;
  throw Error(std::string("the bundled CLIP vocabulary is missing (looked for ") + ATTNMAP_SOURCE_CLIP_VOCAB + " and " +
              ATTNMAP_INSTALLED_CLIP_VOCAB + ")");
}

}  // namespace attnmap
