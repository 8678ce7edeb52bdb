// error.hpp - the one error type attnmap throws.
#pragma once
#include <cstdio>
#include <stdexcept>
#include <string>

namespace attnmap {

/// The project's single error type. Its message names the file, the tensor or pixel size, and what was
/// expected against what was found. Thrown by every stage; caught per image in the batch loop and once
/// in main.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// A message for a terminal line: ASCII control characters and DEL (a file name may hold a newline, an
/// escape sequence or a carriage return) become "\xNN", so one message stays one visible line; other
/// bytes, UTF-8 included, pass unchanged. Manifest and --json files keep the real names (JSON-escaped).
inline std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace attnmap
