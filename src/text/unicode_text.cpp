// unicode_text.cpp - ICU for CLIP's text clean-up (see unicode_text.hpp).
#include "text/unicode_text.hpp"

#include <cstdio>

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "core/error.hpp"

namespace attnmap {

std::u32string utf8_to_code_points(const std::string& text, const std::string& what) {
  std::u32string out;
  out.reserve(text.size());
  auto byte = [&text](size_t k) { return static_cast<unsigned char>(text[k]); };
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_sequence_length(text, i);
    if (len == 0) {
      char found[8];
      std::snprintf(found, sizeof found, "0x%02x", byte(i));
      throw Error(printable(what) + ": not UTF-8 at byte " + std::to_string(i) +
                  " (expected a well-formed UTF-8 sequence, found byte " + found + ")");
    }
    const unsigned u = byte(i);
    char32_t c = len == 1 ? u : len == 2 ? (u & 0x1fu) : len == 3 ? (u & 0x0fu) : (u & 0x07u);
    for (size_t k = 1; k < len; ++k) c = (c << 6) | (byte(i + k) & 0x3fu);
    out.push_back(c);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

std::string code_points_to_utf8(const std::u32string& text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

namespace {

icu::UnicodeString to_icu(const std::u32string& text) {
  icu::UnicodeString s;
  for (char32_t c : text) s.append(static_cast<UChar32>(c));
  return s;
}

std::u32string from_icu(const icu::UnicodeString& s) {
  std::u32string out;
  out.reserve(static_cast<size_t>(s.length()));
  for (int32_t i = 0; i < s.length();) {
    const UChar32 c = s.char32At(i);
    out.push_back(static_cast<char32_t>(c));
    i += U16_LENGTH(c);
  }
  return out;
}

}  // namespace

std::u32string nfc(const std::u32string& text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* norm = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) throw Error(std::string("ICU: no NFC normaliser (") + u_errorName(status) + ")");
  const icu::UnicodeString src = to_icu(text);
  if (norm->isNormalized(src, status) && U_SUCCESS(status)) return text;
  status = U_ZERO_ERROR;
  const icu::UnicodeString out = norm->normalize(src, status);
  if (U_FAILURE(status)) throw Error(std::string("ICU: NFC normalisation failed (") + u_errorName(status) + ")");
  return from_icu(out);
}

std::u32string lower_like_python(const std::u32string& text) {
  icu::UnicodeString s = to_icu(text);
  s.toLower(icu::Locale::getRoot());
  return from_icu(s);
}

std::u32string lower_each_code_point(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    icu::UnicodeString s(static_cast<UChar32>(c));
    s.toLower(icu::Locale::getRoot());
    out += from_icu(s);
  }
  return out;
}

bool is_python_space(char32_t c) {
  if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85) return true;
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_SPACE_SEPARATOR || t == U_LINE_SEPARATOR || t == U_PARAGRAPH_SEPARATOR;
}

bool is_white_space(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }

bool is_letter(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_L_MASK) != 0; }

bool is_number(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0; }

bool is_other_ignoring_case(char32_t c) {
  const UChar32 u = static_cast<UChar32>(c);
  for (UChar32 v : {u, u_tolower(u), u_toupper(u), u_totitle(u), u_foldCase(u, U_FOLD_CASE_DEFAULT)})
    if ((U_GET_GC_MASK(v) & (U_GC_L_MASK | U_GC_N_MASK)) || u_hasBinaryProperty(v, UCHAR_WHITE_SPACE)) return false;
  return true;
}

char32_t fold_case(char32_t c) {
  return static_cast<char32_t>(u_foldCase(static_cast<UChar32>(c), U_FOLD_CASE_DEFAULT));
}

}  // namespace attnmap
