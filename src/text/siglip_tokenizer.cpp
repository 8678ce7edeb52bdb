// siglip_tokenizer.cpp - SigLIP's tokenizer on Debian's libsentencepiece (see siglip_tokenizer.hpp).
// The families' code followed (cited per function):
//   transformers src/transformers/models/siglip/tokenization_siglip.py (SiglipTokenizer) and
//   src/transformers/tokenization_python.py (PreTrainedTokenizer.tokenize), commit ad87182b802c;
//   open_clip src/open_clip/tokenizer.py (HFTokenizer, _clean_canonicalize, canonicalize_text), commit 89fb801f1e60.
#include "text/siglip_tokenizer.hpp"

#include <dlfcn.h>
#include <sentencepiece_processor.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>

#include "core/error.hpp"
#include "text/html_unescape.hpp"
#include "text/unicode_text.hpp"

namespace attnmap {
namespace {

constexpr char32_t kSpieceUnderline = U'\u2581';  // SPIECE_UNDERLINE "▁"
const char* const kEosToken = "</s>";             // SiglipTokenizer.__init__ eos_token (and pad_token)
const char* const kUnkToken = "<unk>";            // SiglipTokenizer.__init__ unk_token

// Python's string.punctuation: the 32 ASCII punctuation characters !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~.
bool is_ascii_punctuation(char32_t c) {
  return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) || (c >= 0x7b && c <= 0x7e);
}

std::u32string remove_punctuation(const std::u32string& s) {  // text.translate(str.maketrans("", "", punctuation))
  std::u32string out;
  for (char32_t c : s)
    if (!is_ascii_punctuation(c)) out += c;
  return out;
}

// Runs of str.isspace() characters -> one " ", then stripped: re.sub(r"\s+", " ", t).strip() and
// " ".join(t.split()) give the same (Python's re \s on str is str.isspace()).
std::u32string collapse_and_strip(const std::u32string& s) {
  std::u32string out;
  bool space = false;
  for (char32_t c : s) {
    if (is_python_space(c)) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += U' ';
    space = false;
    out += c;
  }
  return out;
}

std::u32string strip_python_space(const std::u32string& s) {  // str.strip()
  size_t b = 0, e = s.size();
  while (b < e && is_python_space(s[b])) ++b;
  while (e > b && is_python_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// SiglipTokenizer.canonicalize_text(text, keep_punctuation_exact_string=None) with do_lower_case=True:
// lower, remove punctuation, re.sub(r"\s+", " "), strip.
std::u32string hf_canonicalize(const std::u32string& s) {
  return collapse_and_strip(remove_punctuation(lower_like_python(s)));
}

// open_clip tokenizer.py _clean_canonicalize = canonicalize_text(basic_clean(x)): basic_clean is
// ftfy.fix_text (NFC only here, as ClipTokenizer; docs/text.md), html.unescape twice, strip; then
// canonicalize_text: "_" -> " ", punctuation removed, lower(), " ".join(text.split()), strip.
std::u32string open_clip_canonicalize(const std::u32string& text) {
  std::u32string s = strip_python_space(html_unescape(html_unescape(nfc(text))));
  for (char32_t& c : s)
    if (c == U'_') c = U' ';
  return collapse_and_strip(lower_like_python(remove_punctuation(s)));
}

std::string text_head(const std::string& text) { return clip_text_head(text); }

// libsentencepiece is opened at the first SigLIP tokenizer, not linked: its 1.2 MB of mappings would leave a
// run without texts too little under a tight address-space limit (ulimit -v; ctest Limits.*). Its classes are
// used through their virtual functions (no symbol needed); the three other functions it takes are looked up
// here by their (Itanium C++ ABI) names: the processor's constructor, util::Status's destructor and its
// error_message(). The library and the headers come from the same Debian package (libsentencepiece-dev).
const char* const kSentencePieceLibrary = "libsentencepiece.so.0";

struct SentencePieceLibrary {
  void (*construct)(void*) = nullptr;                        // SentencePieceProcessor::SentencePieceProcessor()
  void (*destroy_status)(void*) = nullptr;                   // util::Status::~Status()
  const char* (*status_message)(const void*) = nullptr;      // util::Status::error_message() const
};

template <typename F>
void take(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) throw Error(std::string("SigLIP's tokenizer needs SentencePiece: ") + kSentencePieceLibrary + " has no " + name);
}

SentencePieceLibrary open_sentencepiece() {
  void* lib = dlopen(kSentencePieceLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    std::string limit;
    rlimit as{};
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
      limit = " (the address-space limit, ulimit -v, is " + std::to_string(as.rlim_cur >> 20) + " MB)";
    throw Error(std::string("SigLIP's tokenizer needs SentencePiece (") + kSentencePieceLibrary +
                ", Debian's libsentencepiece0), which could not be opened: " + (why ? why : "unknown") + limit);
  }
  SentencePieceLibrary l;
  take(lib, l.construct, "_ZN13sentencepiece22SentencePieceProcessorC1Ev");
  take(lib, l.destroy_status, "_ZN13sentencepiece4util6StatusD1Ev");
  take(lib, l.status_message, "_ZNK13sentencepiece4util6Status13error_messageEv");
  return l;  // the library stays open for the process (never dlclose'd)
}

const SentencePieceLibrary& sentencepiece_library() {
  static const SentencePieceLibrary l = open_sentencepiece();  // once (a failed open throws; the next call retries)
  return l;
}

// A new SentencePieceProcessor (deleted through its virtual destructor, as unique_ptr does).
sentencepiece::SentencePieceProcessor* new_processor() {
  const SentencePieceLibrary& l = sentencepiece_library();
  void* p = ::operator new(sizeof(sentencepiece::SentencePieceProcessor));
  try {
    l.construct(p);
  } catch (...) {
    ::operator delete(p);
    throw;
  }
  return static_cast<sentencepiece::SentencePieceProcessor*>(p);
}

// Runs `call` (a virtual function returning util::Status) and returns "" when it succeeded, else
// SentencePiece's message. The status is built in place and destroyed through the library's destructor.
template <class Call>
std::string status_of(Call&& call) {
  const SentencePieceLibrary& l = sentencepiece_library();
  alignas(sentencepiece::util::Status) unsigned char buf[sizeof(sentencepiece::util::Status)];
  auto* status = ::new (buf) sentencepiece::util::Status(call());
  std::string message;
  if (!status->ok()) {
    const char* m = l.status_message(status);
    message = m && *m ? printable(m) : "unknown error";
  }
  l.destroy_status(status);
  return message;
}

std::vector<std::string> pieces_of(const sentencepiece::SentencePieceProcessor& sp, const std::string& text,
                                   const std::string& file) {
  std::vector<std::string> pieces;
  const std::string failed = status_of([&] { return sp.Encode(text, &pieces); });
  if (!failed.empty()) throw Error(printable(file) + ": SentencePiece could not encode \"" + text_head(text) + "\": " + failed);
  return pieces;
}

std::string read_model_bytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error("SigLIP tokenizer model " + printable(path) + ": cannot read it (" + std::strerror(errno) +
                "; expected a SentencePiece model file such as spiece.model)");
  if (!S_ISREG(st.st_mode))
    throw Error("SigLIP tokenizer model " + printable(path) +
                ": not a regular file (expected a SentencePiece model file such as spiece.model)");
  if (static_cast<unsigned long long>(st.st_size) > kMaxSiglipModelBytes)
    throw Error("SigLIP tokenizer model " + printable(path) + ": " + std::to_string(st.st_size) +
                " bytes, more than the " + std::to_string(kMaxSiglipModelBytes) +
                " a SentencePiece vocabulary is read up to (SigLIP's are under 5 MB)");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("SigLIP tokenizer model " + printable(path) + ": cannot open it (" + std::strerror(errno) +
                "; expected a readable SentencePiece model file such as spiece.model)");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw Error("SigLIP tokenizer model " + printable(path) + ": read error (" + std::strerror(errno) + ")");
  return bytes;
}

}  // namespace

const char* siglip_rules_name(SiglipTextRules r) {
  return r == SiglipTextRules::open_clip ? "open_clip" : "hugging_face";
}

SiglipTokenizer::SiglipTokenizer(const std::string& model_path, SiglipTextRules rules)
    : rules_(rules), file_(model_path) {
  const std::string bytes = read_model_bytes(model_path);
  const std::string name = "SigLIP tokenizer model " + printable(model_path);
  if (bytes.empty()) throw Error(name + ": empty file (expected a SentencePiece model, a serialized ModelProto)");
  sp_.reset(new_processor());
  const std::string failed = status_of([&] { return sp_->LoadFromSerializedProto(bytes); });
  if (!failed.empty() || sp_->GetPieceSize() <= 0)
    throw Error(name + ": not a SentencePiece model (expected a serialized ModelProto such as spiece.model; " +
                "SentencePiece says: " + (failed.empty() ? std::string("no pieces") : failed) + ")");
  // SiglipTokenizer's eos/pad "</s>" and unk "<unk>" must be pieces of the model (T5's and SigLIP's: 1 and 2).
  eos_id_ = sp_->PieceToId(kEosToken);
  unk_id_ = sp_->PieceToId(kUnkToken);
  if (sp_->IdToPiece(eos_id_) != kEosToken || sp_->IdToPiece(unk_id_) != kUnkToken)
    throw Error(name + ": expected the pieces \"</s>\" and \"<unk>\" of a T5/SigLIP vocabulary, found " +
                (sp_->IdToPiece(eos_id_) != kEosToken ? "no \"</s>\"" : "no \"<unk>\"") +
                " (SigLIP 2's Gemma tokenizer is not read)");
  unk_token_length_ = pieces_of(*sp_, kUnkToken, model_path).size();  // SiglipTokenizer.unk_token_length
}

SiglipTokenizer::~SiglipTokenizer() = default;
SiglipTokenizer::SiglipTokenizer(SiglipTokenizer&&) noexcept = default;
SiglipTokenizer& SiglipTokenizer::operator=(SiglipTokenizer&&) noexcept = default;

int SiglipTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::string SiglipTokenizer::piece(int32_t id) const { return sp_->IdToPiece(id); }

// SiglipTokenizer._tokenize(piece): canonicalize_text, then sp_model.encode(unk_token + text, out_type=str)
// with the first unk_token_length pieces dropped (if there are that many). The model is used as loaded
// (SentencePieceBackend.__init__ with legacy=True, the default: add_dummy_prefix kept).
void SiglipTokenizer::encode_hf_piece(const std::u32string& piece, std::vector<std::string>& tokens) const {
  const std::string text = code_points_to_utf8(hf_canonicalize(piece));
  std::vector<std::string> pieces = pieces_of(*sp_, kUnkToken + text, file_);
  const size_t skip = pieces.size() >= unk_token_length_ ? unk_token_length_ : 0;
  tokens.insert(tokens.end(), pieces.begin() + static_cast<std::ptrdiff_t>(skip), pieces.end());
}

// SiglipTokenizer.tokenize + convert_tokens_to_ids. tokenize: SPIECE_UNDERLINE + text with every "▁" made
// " "; PreTrainedTokenizer.tokenize splits that at the special tokens (its trie: "</s>", "<unk>"; the lstrip /
// rstrip of "</s>" only take white space that canonicalize_text strips anyway), each other non-empty piece
// through _tokenize; then a first token "▁" followed by a special token is dropped. Ids: the added token
// "</s>" -> its id, other tokens by sp_model.piece_to_id (an unknown character's surface -> unk id).
std::vector<int32_t> SiglipTokenizer::encode_hugging_face(const std::u32string& text) const {
  std::u32string s(1, kSpieceUnderline);
  for (char32_t c : text) s += c == kSpieceUnderline ? U' ' : c;
  const std::u32string eos = U"</s>", unk = U"<unk>";
  std::vector<std::string> tokens;
  std::vector<bool> special;
  size_t begin = 0;
  auto flush = [&](size_t end) {
    if (end > begin) encode_hf_piece(s.substr(begin, end - begin), tokens);
    special.resize(tokens.size(), false);
  };
  for (size_t i = 0; i < s.size();) {
    const std::u32string* lit = s.compare(i, eos.size(), eos) == 0 ? &eos : s.compare(i, unk.size(), unk) == 0 ? &unk : nullptr;
    if (!lit) {
      ++i;
      continue;
    }
    flush(i);
    tokens.push_back(lit == &eos ? kEosToken : kUnkToken);
    special.push_back(true);
    i += lit->size();
    begin = i;
  }
  flush(s.size());
  size_t first = 0;
  if (tokens.size() > 1 && tokens[0] == "\u2581" && special[1]) first = 1;
  std::vector<int32_t> ids;
  for (size_t k = first; k < tokens.size(); ++k)
    ids.push_back(special[k] ? (tokens[k] == kEosToken ? eos_id_ : unk_id_) : sp_->PieceToId(tokens[k]));
  return ids;
}

std::vector<int32_t> SiglipTokenizer::encode(const std::string& text) const {
  if (text.size() > kMaxSiglipTextBytes)
    throw Error("text \"" + text_head(text) + "\": " + std::to_string(text.size()) + " bytes, more than the " +
                std::to_string(kMaxSiglipTextBytes) + " a SigLIP text may have (its context holds " +
                std::to_string(kSiglipContext) + " tokens)");
  const std::u32string u = utf8_to_code_points(text, "text \"" + text_head(text) + "\"");
  if (rules_ == SiglipTextRules::hugging_face) return encode_hugging_face(u);
  // open_clip: HFTokenizer.__call__ cleans with _clean_canonicalize, then its Hugging Face tokenizer encodes
  // the clean text: here SentencePiece's encoding of it (no literal special token survives the clean-up).
  std::vector<int> raw;
  const std::string clean_text = code_points_to_utf8(open_clip_canonicalize(u));
  const std::string failed = status_of([&] { return sp_->Encode(clean_text, &raw); });
  if (!failed.empty())
    throw Error(printable(file_) + ": SentencePiece could not encode \"" + text_head(text) + "\": " + failed);
  return std::vector<int32_t>(raw.begin(), raw.end());
}

std::string SiglipTokenizer::clean(const std::string& text) const {
  const std::u32string u = utf8_to_code_points(text, "text \"" + text_head(text) + "\"");
  return code_points_to_utf8(rules_ == SiglipTextRules::open_clip ? open_clip_canonicalize(u) : hf_canonicalize(u));
}

// HF: tokenizer(text, padding="max_length", truncation=True, max_length=context) (_encode_plus: the ids cut
// to context-1, build_inputs_with_special_tokens adds "</s>", then pad_token "</s>" to max_length); open_clip
// HFTokenizer.__call__ the same call. (SiglipTokenizer._add_eos_if_not_present skips "</s>" after a literal
// "</s>"; as the padding is "</s>" too, the padded ids are the same.)
std::vector<int32_t> SiglipTokenizer::tokenize(const std::string& text, ContextOverflow overflow, size_t context) const {
  if (context < 2) throw Error("a SigLIP context of " + std::to_string(context) + " tokens (expected at least 2)");
  std::vector<int32_t> ids = encode(text);
  ids.push_back(eos_id_);
  if (ids.size() > context) {
    if (overflow == ContextOverflow::refuse)
      throw Error("text \"" + text_head(text) + "\" is " + std::to_string(ids.size()) +
                  " tokens with </s>, more than SigLIP's context of " + std::to_string(context) + " (expected at most " +
                  std::to_string(context) + "; shorten it, or truncate it as SigLIP's tokenizers do)");
    ids.resize(context);
    ids.back() = eos_id_;
  }
  ids.resize(context, pad_id());
  return ids;
}

}  // namespace attnmap
