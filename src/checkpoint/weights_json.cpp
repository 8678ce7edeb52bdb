#include "checkpoint/weights_json.hpp"

#include "checkpoint/json_number.hpp"

#include <fast_float/fast_float.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "io/mapped_file.hpp"

namespace attnmap {

namespace {

using nlohmann::json;
constexpr int kMaxRank = 8;

// Line and column (1-based) of a byte offset, for parse-error messages.
std::string line_col(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

// SAX handler: top-level object of tensors; the "config" subtree is built as a small DOM.
class WeightsSax {
 public:
  WeightsSax(RawWeights& out, const std::string& text) : out_(out), text_(text) {}

  bool null() {
    if (in_config()) return config_value(json(nullptr));
    return scalar_event("null");
  }
  bool boolean(bool v) {
    if (in_config()) return config_value(json(v));
    return scalar_event("a boolean");
  }
  bool number_integer(json::number_integer_t v) {
    if (in_config()) return config_value(json(v));
    return number(static_cast<double>(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (in_config()) return config_value(json(v));
    return number(static_cast<double>(v));
  }
  bool number_float(json::number_float_t v, const std::string& s) {
    if (in_config()) return config_value(json(v));
    // A value that is not zero as written but reads as 0 in float32 (1e-400, 1e-50) would be lost silently.
    if (skip_ == 0 && std::isfinite(v) && static_cast<float>(v) == 0.0f && nonzero_digits(s))
      fail("holds " + s.substr(0, 40) + ", which underflows float32 (it would read as 0; smallest magnitude about 1.4e-45)");
    if (skip_ == 0 && (!std::isfinite(v) || std::isinf(static_cast<float>(v))))
      fail("holds " + s.substr(0, 40) + ", beyond float32's range (largest magnitude about 3.4e38)");
    return number(v);
  }
  // True when the number as written has a non-zero digit before its exponent.
  static bool nonzero_digits(const std::string& s) {
    for (char c : s) {
      if (c == 'e' || c == 'E') break;
      if (c >= '1' && c <= '9') return true;
    }
    return false;
  }
  bool binary(json::binary_t& /*v*/) { return scalar_event("binary data"); }
  bool string(json::string_t& v) {
    if (in_config()) return config_value(json(v));
    if (skip_ > 0) return true;
    if (level_ > 0) fail("holds a string (\"" + v.substr(0, 20) + "\") where a number is expected");
    if (depth_ == 1 && key_ == "config")
      throw Error(out_.path + ": \"config\" must be an object, found a string (a config as a JSON string is the "
                  "safetensors __metadata__ convention, not JSON weights')");
    out_.notices.push_back("ignored non-tensor key '" + key_ + "' (a string)");
    return true;
  }

  bool start_object(std::size_t /*n*/) {
    if (skip_ > 0) {
      ++skip_;
      return true;
    }
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    if (in_config() || (depth_ == 1 && level_ == 0 && key_ == "config")) {
      check_config_depth();
      if (cstack_.empty()) {
        out_.config = json::object();
        cstack_.push_back(&out_.config);
      } else {
        cstack_.push_back(&config_slot(json::object()));
      }
      return true;
    }
    if (level_ > 0) fail("holds an object where a number is expected");
    // Any other object at the top level: skip it (counted so its end is found).
    ++skip_;
    out_.notices.push_back("ignored non-tensor key '" + key_ + "' (an object)");
    return true;
  }
  bool end_object() {
    if (in_config()) {
      cstack_.pop_back();
      return true;
    }
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    depth_ = 0;
    return true;
  }
  bool key(json::string_t& k) {
    if (in_config()) {
      ckey_ = k;
      return true;
    }
    if (skip_ > 0) return true;
    key_ = k;
    if (k != "config" && out_.tensors.count(k)) fail("appears twice in the file");
    return true;
  }
  bool start_array(std::size_t /*n*/) {
    if (in_config()) {
      check_config_depth();
      cstack_.push_back(&config_slot(json::array()));
      return true;
    }
    if (skip_ > 0) return true;
    if (depth_ == 0) throw Error(out_.path + ": the top level must be a JSON object of tensors, found an array");
    if (key_ == "config") fail("must be an object");
    if (level_ == 0) {
      cur_ = Tensor();
      shape_.clear();
      kinds_.clear();
      counts_.clear();
    } else {
      element_at(level_, Kind::Array);
    }
    ++level_;
    if (level_ > kMaxRank) fail("is nested deeper than " + std::to_string(kMaxRank) + " levels");
    if (static_cast<int>(counts_.size()) < level_) {
      counts_.resize(static_cast<size_t>(level_), 0);
      kinds_.resize(static_cast<size_t>(level_), Kind::Unknown);
    }
    counts_[static_cast<size_t>(level_ - 1)] = 0;
    return true;
  }
  bool end_array() {
    if (in_config()) {
      cstack_.pop_back();
      return true;
    }
    if (skip_ > 0) return true;
    const size_t l = static_cast<size_t>(level_ - 1);
    const int64_t n = counts_[l];
    if (shape_.size() <= l) shape_.resize(l + 1, -1);
    if (shape_[l] < 0) {
      shape_[l] = n;
    } else if (shape_[l] != n) {
      fail("is ragged: an array at depth " + std::to_string(level_) + " has " + std::to_string(n) +
           " elements where the first had " + std::to_string(shape_[l]));
    }
    --level_;
    if (level_ == 0) {
      // A leaf level of kind Array with nothing below (e.g. [[]]) leaves shape as seen.
      cur_.shape = shape_;
      const size_t numel = checked_numel(cur_.shape, key_.c_str());
      if (numel != cur_.data.size()) fail("is ragged (element count does not match its shape)");
      out_.tensors.emplace(key_, std::move(cur_));
      cur_ = Tensor();
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& ex) {
    if (ex.id == 406) {  // a number beyond a double (1e400): refused by name, as written
      if (in_config()) throw Error(out_.path + ": \"config\" holds " + last_token.substr(0, 40) + ", beyond the range of a double");
      fail("holds " + last_token.substr(0, 40) + ", beyond float32's range (largest magnitude about 3.4e38)");
    }
    throw Error(out_.path + ": " + json_syntax_error(text_, position));
  }

 private:
  enum class Kind { Unknown, Number, Array };

  bool in_config() const { return !cstack_.empty(); }
  // The config is kept as a DOM, whose copy and destruction recurse once per level: a limit keeps hostile
  // nesting (10 000 levels) from overflowing the stack (found by the ASan build of the test suite).
  void check_config_depth() const {
    if (cstack_.size() >= kMaxConfigDepth)
      throw Error(out_.path + ": \"config\" is nested deeper than " + std::to_string(kMaxConfigDepth) + " levels");
  }
  static constexpr size_t kMaxConfigDepth = 32;

  json& config_slot(json v) {
    json* top = cstack_.back();
    if (top->is_object()) {
      (*top)[ckey_] = std::move(v);
      return (*top)[ckey_];
    }
    top->push_back(std::move(v));
    return top->back();
  }
  bool config_value(json v) {
    config_slot(std::move(v));
    return true;
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw Error(out_.path + ": tensor '" + key_ + "' " + why);
  }

  bool scalar_event(const char* what) {
    if (skip_ > 0) return true;
    if (level_ > 0) fail(std::string("holds ") + what + " where a number is expected");
    if (depth_ == 1) out_.notices.push_back("ignored non-tensor key '" + key_ + "' (" + what + ")");
    return true;
  }

  void element_at(int level, Kind kind) {
    Kind& k = kinds_[static_cast<size_t>(level - 1)];
    if (k == Kind::Unknown) {
      k = kind;
    } else if (k != kind) {
      fail("is ragged: depth " + std::to_string(level) + " mixes numbers and arrays");
    }
    ++counts_[static_cast<size_t>(level - 1)];
  }

  bool number(double v) {
    if (skip_ > 0) return true;
    if (!std::isfinite(v) || std::isinf(static_cast<float>(v))) {
      fail("holds a non-finite or out-of-float32-range value (" + std::to_string(v) + ")");
    }
    if (level_ == 0) {  // a scalar tensor, shape ()
      if (key_ == "config") fail("must be an object");
      Tensor t;
      t.data.push_back(static_cast<float>(v));
      out_.tensors.emplace(key_, std::move(t));
      return true;
    }
    element_at(level_, Kind::Number);
    cur_.data.push_back(static_cast<float>(v));
    return true;
  }

  RawWeights& out_;
  const std::string& text_;
  int depth_ = 0;   // 1 inside the top-level object
  int skip_ = 0;    // nesting of ignored top-level objects
  int level_ = 0;   // nesting inside the current tensor's arrays
  std::string key_;
  Tensor cur_;
  std::vector<int64_t> shape_;
  std::vector<Kind> kinds_;
  std::vector<int64_t> counts_;
  std::vector<json*> cstack_;
  std::string ckey_;
};

// ---- fast path ---------------------------------------------------------------------------------------
// A direct scanner for the common case: a top-level object whose values are numbers or rectangular nested
// arrays of numbers, plus one "config" object. Numbers go straight into the float buffers (fast_float).
// On anything else - malformed text, strings/null/booleans in a tensor, ragged arrays, duplicate names,
// escapes or non-ASCII in names, out-of-range values, other kinds of values - it gives up, and the SAX
// parser above runs over the whole text instead, so every message and notice is the SAX parser's own.
// On the files it accepts it produces exactly what the SAX parser produces (same double -> float32 path).
class FastScanner {
 public:
  FastScanner(const char* p, size_t n, const std::string& path) : p_(p), end_(p + n), begin_(p), path_(path) {}

  /// For a mapped file: give the pages already scanned back to the kernel as the scan goes, so that the
  /// resident memory of a load is the tensors plus a few tens of MB, not also the whole text.
  void release_as_scanned() { release_ = true; }

  std::optional<RawWeights> run() {
    RawWeights out;
    out.path = path_;
    ws();
    if (!eat('{')) return std::nullopt;
    bool config_seen = false;
    for (;;) {
      ws();
      std::string key;
      if (!simple_string(&key)) return std::nullopt;
      ws();
      if (!eat(':')) return std::nullopt;
      ws();
      if (p_ >= end_) return std::nullopt;
      if (key == "config") {
        if (*p_ != '{' || config_seen) return std::nullopt;
        const char* start = p_;
        if (!skip_value()) return std::nullopt;
        try {
          out.config = json::parse(start, p_);
        } catch (const std::exception&) {
          return std::nullopt;
        }
        config_seen = true;
      } else {
        if (out.tensors.count(key)) return std::nullopt;
        Tensor t;
        if (*p_ == '[') {
          if (!tensor(&t)) return std::nullopt;
        } else {
          double v = 0;
          if (!number(&v)) return std::nullopt;
          t.data.push_back(static_cast<float>(v));
        }
        out.tensors.emplace(std::move(key), std::move(t));
        if (release_) release();
      }
      ws();
      if (eat(',')) continue;
      if (eat('}')) break;
      return std::nullopt;
    }
    ws();
    if (p_ != end_ || out.tensors.empty()) return std::nullopt;
    return out;
  }

 private:
  void release() {
    constexpr size_t kChunk = size_t{32} << 20;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t done = static_cast<size_t>(p_ - begin_) / page * page;
    if (done < released_ + kChunk) return;
    ::madvise(const_cast<char*>(begin_) + released_, done - released_, MADV_DONTNEED);
    released_ = done;
  }
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool eat(char c) {
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  // A string of printable ASCII without escapes.
  bool simple_string(std::string* s) {
    if (!eat('"')) return false;
    const char* b = p_;
    while (p_ < end_ && *p_ != '"') {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p_;
    }
    if (p_ >= end_) return false;
    s->assign(b, p_);
    ++p_;
    return true;
  }
  // Skips one object or array (only for "config", which nlohmann then parses and validates). Nesting
  // deeper than the SAX parser's config limit (32) gives up, so the SAX path refuses it by name (a deep
  // config DOM would overflow the stack when copied).
  bool skip_value() {
    int depth = 0;
    while (p_ < end_) {
      const char c = *p_++;
      if (c == '"') {
        while (p_ < end_ && *p_ != '"') p_ += (*p_ == '\\') ? 2 : 1;
        if (p_ >= end_) return false;
        ++p_;
      } else if (c == '{' || c == '[') {
        if (++depth > 32) return false;  // deeper than WeightsSax::kMaxConfigDepth: the SAX parser reports it
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return true;
      }
    }
    return false;
  }
  // A JSON number (strict grammar) valued as the SAX path values it, with the same range check.
  bool number(double* v) {
    static const double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char* b = p_;
    const char* q = p_;
    const bool neg = q < end_ && *q == '-';
    if (neg) ++q;
    if (q >= end_) return false;
    uint64_t m = 0;  // significant digits (after leading zeros), while there are at most 15 of them
    int sig = 0;     // significant digits seen
    int e10 = 0;     // decimal exponent to apply to m
    auto digit = [&](char c, bool frac) {
      if (sig == 0 && c == '0') {
        if (frac) --e10;
        return;
      }
      if (++sig <= 15) {
        m = m * 10 + static_cast<uint64_t>(c - '0');
        if (frac) --e10;
      } else if (!frac) {
        ++e10;
      }
    };
    if (*q == '0') {
      ++q;
    } else if (*q >= '1' && *q <= '9') {
      while (q < end_ && *q >= '0' && *q <= '9') digit(*q++, false);
    } else {
      return false;
    }
    bool integer = true;
    if (q < end_ && *q == '.') {
      integer = false;
      ++q;
      if (q >= end_ || *q < '0' || *q > '9') return false;
      while (q < end_ && *q >= '0' && *q <= '9') digit(*q++, true);
    }
    if (q < end_ && (*q == 'e' || *q == 'E')) {
      integer = false;
      ++q;
      bool eneg = false;
      if (q < end_ && (*q == '+' || *q == '-')) eneg = *q++ == '-';
      if (q >= end_ || *q < '0' || *q > '9') return false;
      int ex = 0;
      while (q < end_ && *q >= '0' && *q <= '9') {
        if (ex < 100000) ex = ex * 10 + (*q - '0');
        ++q;
      }
      e10 += eneg ? -ex : ex;
    }
    if (integer && q - b > 15) return false;  // long integers: nlohmann's int64/uint64 path decides
    if (sig <= 15 && e10 >= -22 && e10 <= 22) {
      // Clinger's fast path: m and 10^|e10| are exact doubles, so one IEEE operation rounds correctly,
      // giving the same double as strtod / fast_float.
      const double dm = static_cast<double>(m);
      *v = e10 < 0 ? dm / kPow10[-e10] : dm * kPow10[e10];
      if (neg && !integer) *v = -*v;
      if (neg && integer && m != 0) *v = -*v;  // "-0" is the integer 0 for nlohmann, i.e. +0.0
    } else {
      const auto r = fast_float::from_chars(b, q, *v);
      if (r.ec != std::errc() || r.ptr != q) return false;
      if (integer && *v == 0.0) *v = 0.0;
    }
    if (!std::isfinite(*v) || std::isinf(static_cast<float>(*v))) return false;
    if (sig > 0 && static_cast<float>(*v) == 0.0f) return false;  // underflows float32: the SAX path refuses it
    p_ = q;
    return true;
  }
  // One number of a tensor appended to `data`: a plain short decimal by json_number::plain_decimal, any
  // other by number() (the same value either way).
  bool number_into(std::vector<float>& data) {
    float f;
    if (const char* q = json_number::plain_decimal(p_, end_, &f)) {
      p_ = q;
      data.push_back(f);
      return true;
    }
    double v = 0;
    if (!number(&v)) return false;
    data.push_back(static_cast<float>(v));
    return true;
  }
  // Sizes the buffer of the tensor starting at p_ once, instead of doubling it as it fills: a well-formed
  // tensor holds no '"', so its text ends before the next one (the next name) or at the end, and it has at
  // most one number more than commas in that text, and at most one per two bytes of it (so the reservation,
  // at most twice the text's size, is what a valid tensor of that text would need). Only a hint: malformed
  // text is refused by the scan itself.
  void reserve_for_tensor(std::vector<float>& data) const {
    const size_t left = static_cast<size_t>(end_ - p_);
    const void* quote = std::memchr(p_, '"', left);
    const char* stop = quote ? static_cast<const char*>(quote) : end_;
    const size_t commas = static_cast<size_t>(std::count(p_, stop, ','));
    data.reserve(std::min(commas + 1, (static_cast<size_t>(stop - p_) + 1) / 2));
  }
  // A rectangular nested array of numbers under the SAX handler's rules: arrays at one depth all have the
  // length of the first one closed there; a depth holds numbers or arrays, not both; at most kMaxRank deep.
  bool tensor(Tensor* t) {
    int64_t shape[kMaxRank], count[kMaxRank];
    char kind[kMaxRank];  // 0 unknown, 1 numbers, 2 arrays
    for (int i = 0; i < kMaxRank; ++i) {
      shape[i] = -1;
      count[i] = 0;
      kind[i] = 0;
    }
    auto mark = [&](int level, char k) {
      char& have = kind[level - 1];
      if (have == 0) have = k;
      ++count[level - 1];
      return have == k;
    };
    std::vector<float>& data = t->data.owned();
    reserve_for_tensor(data);
    int level = 0, rank = 0;
    bool expect_value = true;
    for (;;) {
      if (expect_value) {
        if (p_ >= end_) return false;
        if (*p_ == '[') {
          if (level > 0 && !mark(level, 2)) return false;
          ++p_;
          if (++level > kMaxRank) return false;
          rank = std::max(rank, level);
          count[level - 1] = 0;
          ws();
          if (p_ < end_ && *p_ == ']') expect_value = false;
          continue;
        }
        if (level == 0 || !mark(level, 1)) return false;
        if (!number_into(data)) return false;
        // The rest of an innermost array in one loop: ',', blanks, the next number. Anything else (blanks
        // before the ',', an array after it) goes on in the general steps.
        expect_value = false;
        while (p_ < end_ && *p_ == ',') {
          ++p_;
          ws();
          if (p_ >= end_ || (*p_ != '-' && (*p_ < '0' || *p_ > '9'))) {
            expect_value = true;
            break;
          }
          ++count[level - 1];
          if (!number_into(data)) return false;
        }
        continue;
      }
      ws();
      if (p_ >= end_) return false;
      if (*p_ == ',') {
        ++p_;
        ws();
        expect_value = true;
        continue;
      }
      if (*p_ != ']') return false;
      ++p_;
      const size_t l = static_cast<size_t>(level - 1);
      if (shape[l] < 0) {
        shape[l] = count[l];
      } else if (shape[l] != count[l]) {
        return false;
      }
      if (--level == 0) break;
    }
    std::vector<int64_t> sh(shape, shape + rank);
    size_t numel = 1;
    for (const int64_t d : sh) {
      if (d < 0) return false;
      numel *= static_cast<size_t>(d);
    }
    if (numel != data.size()) return false;
    t->shape = std::move(sh);
    return true;
  }

  const char* p_;
  const char* end_;
  const char* begin_;
  const std::string& path_;
  bool release_ = false;
  size_t released_ = 0;
};

}  // namespace

RawWeights parse_weights_json(const std::string& text, const std::string& path) {
  if (std::optional<RawWeights> fast = FastScanner(text.data(), text.size(), path).run()) return std::move(*fast);
  return parse_weights_json_sax(text, path);
}

RawWeights parse_weights_json_sax(const std::string& text, const std::string& path) {
  RawWeights out;
  out.path = path;
  WeightsSax sax(out, text);
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw Error(path + ": empty weights file");
  if (text[first] != '{') throw Error(path + ": the top level must be a JSON object of tensors");
  // nlohmann/json stops at a NUL byte as if the input ended there, so bytes after one (a file padded or
  // cut by a crashed writer) would be silently ignored: refuse them with their position.
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    const size_t line_start = text.rfind('\n', nul);
    const size_t line = static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n')) + 1;
    const size_t col = nul - (line_start == std::string::npos ? 0 : line_start + 1) + 1;
    throw Error(path + ": malformed JSON at line " + std::to_string(line) + ", column " + std::to_string(col) +
                ": NUL byte (binary data or padding in a text file)");
  }
  json::sax_parse(text, &sax, json::input_format_t::json, true);
  if (out.tensors.empty()) throw Error(path + ": no tensors found");
  if (!out.config.is_object()) throw Error(path + ": \"config\" must be an object");
  return out;
}

RawWeights parse_weights_json_mapped(const uint8_t* data, size_t n, const std::string& path) {
  if (n > 0) {
    ::madvise(const_cast<uint8_t*>(data), n, MADV_SEQUENTIAL);
    FastScanner scanner(reinterpret_cast<const char*>(data), n, path);
    scanner.release_as_scanned();
    if (std::optional<RawWeights> fast = scanner.run()) return std::move(*fast);
  }
  // The SAX fallback, taken only for unusual or broken files, reads a copy of the same bytes.
  return parse_weights_json_sax(std::string(reinterpret_cast<const char*>(data), n), path);
}

RawWeights load_weights_json(const std::string& path) {
  std::error_code ec;  // a FIFO or a device would hang the open, a folder mislead
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) throw Error(path + ": not a regular file");
  const MappedFile file(path);  // one mapping: hashed (on a second thread) while parsed, no copy into the heap
  Sha256InBackground hash(file, path);
  RawWeights raw = parse_weights_json_mapped(file.data(), file.size(), path);
  raw.files = {{path, hash.get()}};
  throw_if_changed(file, path);
  return raw;
}

std::string json_syntax_error(const std::string& text, size_t byte) {
  size_t at = byte > 0 ? byte - 1 : 0;
  std::string what;
  if (at >= text.size() || text[at] == '\0') {
    what = "the text ends before the JSON value is complete";
  } else if (text[at] == '"' && at > 0) {  // a whole string token was read: point at its opening quote
    size_t open = at;
    do {
      open = open > 0 ? text.rfind('"', open - 1) : std::string::npos;
      size_t slashes = 0;
      while (open != std::string::npos && open > slashes && text[open - 1 - slashes] == '\\') ++slashes;
      if (open == std::string::npos || slashes % 2 == 0) break;
    } while (true);
    if (open == std::string::npos) open = at;
    what = "unexpected string \"" + text.substr(open + 1, std::min<size_t>(at - open - 1, 40)) + "\"";
    at = open;
  } else {
    const auto c = static_cast<unsigned char>(text[at]);
    static const char kHex[] = "0123456789abcdef";
    what = c >= 0x20 && c < 0x7f ? std::string("unexpected '") + static_cast<char>(c) + "'"
                                 : std::string("unexpected byte 0x") + kHex[c >> 4] + kHex[c & 15];
  }
  return "malformed JSON at " + line_col(text, at) + ": " + what;
}

}  // namespace attnmap
