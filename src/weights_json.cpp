#include "weights_json.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "error.hpp"
#include "image_io.hpp"

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

  bool null() { return scalar_event("null"); }
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
  bool number_float(json::number_float_t v, const std::string& /*s*/) {
    if (in_config()) return config_value(json(v));
    return number(v);
  }
  bool binary(json::binary_t& /*v*/) { return scalar_event("binary data"); }
  bool string(json::string_t& v) {
    if (in_config()) return config_value(json(v));
    if (skip_ > 0) return true;
    if (level_ > 0) fail("holds a string (\"" + v.substr(0, 20) + "\") where a number is expected");
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
  bool parse_error(std::size_t position, const std::string& /*last_token*/, const nlohmann::detail::exception& ex) {
    std::string what = ex.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line L, column C: ...".
    const auto colon = what.find("]");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw Error(out_.path + ": malformed JSON at " + line_col(text_, position > 0 ? position - 1 : 0) + ": " +
                what);
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
    if (!std::isfinite(v) || std::fabs(v) > static_cast<double>(FLT_MAX)) {
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

}  // namespace

RawWeights parse_weights_json(const std::string& text, const std::string& path) {
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

RawWeights load_weights_json(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path);
  const std::string text(bytes.begin(), bytes.end());
  return parse_weights_json(text, path);
}

}  // namespace attnmap
