// html_unescape.cpp - Python's html.unescape (see html_unescape.hpp).
#include "text/html_unescape.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "text/unicode_text.hpp"

namespace attnmap {
namespace {

struct HtmlEntity {
  const char* name;
  const char* utf8;
};
struct InvalidCharref {
  char32_t number;
  char32_t replacement;
};
struct CodepointRange {
  char32_t first, last;
};
#include "text/html5_entities.inc"

const char* find_entity(const std::string& name) {
  const auto* begin = std::begin(kHtml5Entities);
  const auto* end = std::end(kHtml5Entities);
  const auto* it = std::lower_bound(begin, end, name,
                                    [](const HtmlEntity& e, const std::string& n) { return n.compare(e.name) > 0; });
  return (it != end && name == it->name) ? it->utf8 : nullptr;
}

bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool is_ascii_hex(char32_t c) { return is_ascii_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char32_t c) {
  return is_ascii_digit(c) ? int(c - '0') : (c >= 'a' && c <= 'f') ? int(c - 'a' + 10) : int(c - 'A' + 10);
}

// _replace_charref's numeric branch for the number `value` (saturated above U+10FFFF).
void append_numeric(std::u32string& out, unsigned long value) {
  for (const auto& r : kInvalidCharrefs)
    if (r.number == value) {
      out.push_back(r.replacement);
      return;
    }
  if ((value >= 0xd800 && value <= 0xdfff) || value > 0x10ffff) {
    out.push_back(0xfffd);
    return;
  }
  for (const auto& r : kInvalidCodepoints)
    if (value >= r.first && value <= r.last) return;
  out.push_back(static_cast<char32_t>(value));
}

// The numeric alternatives of _charref ('#[0-9]+;?' then '#[xX][0-9a-fA-F]+;?') at text[i] == '#';
// returns the index after the match, or i when neither matches.
size_t numeric_ref(const std::u32string& text, size_t i, std::u32string& out) {
  const bool hex = i + 1 < text.size() && (text[i + 1] == 'x' || text[i + 1] == 'X');
  size_t j = i + (hex ? 2 : 1);
  const size_t start = j;
  unsigned long value = 0;
  while (j < text.size() && (hex ? is_ascii_hex(text[j]) : is_ascii_digit(text[j]))) {
    const unsigned long digit = static_cast<unsigned long>(hex ? hex_value(text[j]) : int(text[j] - '0'));
    value = std::min<unsigned long>(value * (hex ? 16 : 10) + digit, 0x110000);  // saturated: > U+10FFFF
    ++j;
  }
  if (j == start) return i;
  if (j < text.size() && text[j] == ';') ++j;
  append_numeric(out, value);
  return j;
}

bool name_char(char32_t c) {
  return c != '\t' && c != '\n' && c != '\f' && c != ' ' && c != '<' && c != '&' && c != '#' && c != ';';
}

// The named alternative '[^\t\n\f <&#;]{1,32};?' at text[i] (after '&'), replaced as _replace_charref does.
size_t named_ref(const std::u32string& text, size_t i, std::u32string& out) {
  size_t j = i;
  while (j < text.size() && j - i < 32 && name_char(text[j])) ++j;
  if (j == i) return i;
  if (j < text.size() && text[j] == ';') ++j;
  const std::u32string s = text.substr(i, j - i);
  if (const char* v = find_entity(code_points_to_utf8(s))) {
    out += utf8_to_code_points(v, "html5 entity");
    return j;
  }
  for (size_t x = s.size() - 1; x > 1; --x)  // the longest listed prefix (Python: range(len(s)-1, 1, -1))
    if (const char* v = find_entity(code_points_to_utf8(s.substr(0, x)))) {
      out += utf8_to_code_points(v, "html5 entity");
      out += s.substr(x);
      return j;
    }
  out.push_back('&');
  out += s;
  return j;
}

}  // namespace

std::u32string html_unescape(const std::u32string& text) {
  if (text.find(U'&') == std::u32string::npos) return text;
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '&' || i + 1 >= text.size()) {
      out.push_back(text[i++]);
      continue;
    }
    const size_t next = text[i + 1] == '#' ? numeric_ref(text, i + 1, out) : named_ref(text, i + 1, out);
    if (next == i + 1) {
      out.push_back(text[i++]);  // no reference starts here: the '&' stays
    } else {
      i = next;
    }
  }
  return out;
}

}  // namespace attnmap
