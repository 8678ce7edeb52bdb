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

/// A message for a terminal line (and a label drawn in a figure). A file name may hold a newline, a carriage
/// return, an escape sequence, bidirectional formatting characters or bytes that are not UTF-8; so ASCII
/// control characters, DEL, the C1 controls U+0080..U+009F (0x9b is an 8-bit CSI on some terminals) and
/// every byte outside a well-formed UTF-8 sequence become "\xNN", the bidi formatting characters (U+061C,
/// U+200E, U+200F, U+202A..U+202E, U+2066..U+2069: they reorder the text after them, "Trojan Source") become
/// "\u202e", and one message stays one visible line, in its own order, that cannot drive the terminal.
/// Other well-formed UTF-8 (café, 猫) passes unchanged. Manifest and --json files keep the real names
/// (JSON-escaped).
/// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, surrogates or > U+10FFFF)
/// starting at s[i] (1 for ASCII), or 0 when the byte there does not start one.
inline size_t utf8_sequence_length(const std::string& s, size_t i) {
  auto byte = [&s](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char u = byte(i);
  if (u < 0x80) return 1;
  const size_t len = (u >= 0xc2 && u <= 0xdf) ? 2 : (u >= 0xe0 && u <= 0xef) ? 3 : (u >= 0xf0 && u <= 0xf4) ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  const unsigned char b1 = byte(i + 1);
  const bool ok = !(u == 0xe0 && b1 < 0xa0) && !(u == 0xed && b1 >= 0xa0) && !(u == 0xf0 && b1 < 0x90) &&
                  !(u == 0xf4 && b1 >= 0x90);
  return ok ? len : 0;
}

inline std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  auto byte = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  auto escape = [&out](unsigned char u) {
    char buf[5];
    std::snprintf(buf, sizeof buf, "\\x%02x", u);
    out += buf;
  };
  for (size_t i = 0; i < s.size();) {
    const unsigned char u = byte(i);
    if (u >= 0x20 && u < 0x7f) {
      out += s[i++];
      continue;
    }
    const size_t len = utf8_sequence_length(s, i);
    const bool c1 = len == 2 && u == 0xc2 && byte(i + 1) < 0xa0;  // C1 controls: escaped too
    if (len < 2 || c1) {  // (0x00-0x1f and 0x7f are ASCII of length 1)
      escape(u);
      ++i;
      continue;
    }
    const unsigned long cp = len == 2 ? (u & 0x1fu) << 6 | (byte(i + 1) & 0x3fu)
                             : len == 3 ? (u & 0x0fu) << 12 | (byte(i + 1) & 0x3fu) << 6 | (byte(i + 2) & 0x3fu)
                                        : 0;
    if (cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04lx", cp);
      out += buf;
    } else {
      out.append(s, i, len);
    }
    i += len;
  }
  return out;
}

}  // namespace attnmap
