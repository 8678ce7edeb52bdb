// unicode_text.cpp - ICU for CLIP's text clean-up (see unicode_text.hpp).
#include "text/unicode_text.hpp"

#include <dlfcn.h>
#include <sys/resource.h>

#include <cstdio>

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/uvernum.h>

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

// ICU is opened at the first text, not linked: its data library maps 31 MB, which a run without texts
// should not need (under an address-space limit, ulimit -v, the program would not even start). The C API's
// names carry ICU's version (u_charType is u_charType_72): ATTNMAP_ICU_NAME spells the one the headers use.
#define ATTNMAP_ICU_STR2(x) #x
#define ATTNMAP_ICU_NAME(x) ATTNMAP_ICU_STR2(x)

struct Icu {
  decltype(&u_charType) char_type = nullptr;
  decltype(&u_hasBinaryProperty) has_binary_property = nullptr;
  decltype(&u_tolower) to_lower = nullptr;
  decltype(&u_toupper) to_upper = nullptr;
  decltype(&u_totitle) to_title = nullptr;
  decltype(&u_foldCase) fold = nullptr;
  decltype(&unorm2_getNFCInstance) nfc_instance = nullptr;
  decltype(&unorm2_isNormalized) is_normalized = nullptr;
  decltype(&unorm2_normalize) normalize = nullptr;
  decltype(&u_strToLower) str_to_lower = nullptr;
  decltype(&u_errorName) error_name = nullptr;
};

template <typename F>
void take(void* lib, F& f, const char* name, const char* file) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) throw Error(std::string("CLIP's text clean-up needs ICU: ") + file + " has no " + name);
}

Icu open_icu() {
  const char* file = "libicuuc.so." ATTNMAP_ICU_NAME(U_ICU_VERSION_MAJOR_NUM);
  void* lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    std::string limit;  // ICU's data maps 31 MB: a tight address-space limit is the usual reason
    rlimit as{};
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
      limit = " (the address-space limit, ulimit -v, is " + std::to_string(as.rlim_cur >> 20) + " MB; ICU maps about 33 MB)";
    throw Error(std::string("CLIP's text clean-up needs ICU (") + file + ", Debian's libicu" +
                ATTNMAP_ICU_NAME(U_ICU_VERSION_MAJOR_NUM) + "), which could not be opened: " + (why ? why : "unknown") +
                limit);
  }
  Icu i;
  take(lib, i.char_type, ATTNMAP_ICU_NAME(u_charType), file);
  take(lib, i.has_binary_property, ATTNMAP_ICU_NAME(u_hasBinaryProperty), file);
  take(lib, i.to_lower, ATTNMAP_ICU_NAME(u_tolower), file);
  take(lib, i.to_upper, ATTNMAP_ICU_NAME(u_toupper), file);
  take(lib, i.to_title, ATTNMAP_ICU_NAME(u_totitle), file);
  take(lib, i.fold, ATTNMAP_ICU_NAME(u_foldCase), file);
  take(lib, i.nfc_instance, ATTNMAP_ICU_NAME(unorm2_getNFCInstance), file);
  take(lib, i.is_normalized, ATTNMAP_ICU_NAME(unorm2_isNormalized), file);
  take(lib, i.normalize, ATTNMAP_ICU_NAME(unorm2_normalize), file);
  take(lib, i.str_to_lower, ATTNMAP_ICU_NAME(u_strToLower), file);
  take(lib, i.error_name, ATTNMAP_ICU_NAME(u_errorName), file);
  return i;  // the library stays open for the process (never dlclose'd)
}

const Icu& icu() {
  static const Icu i = open_icu();  // opened once (a failed open throws, and the next call tries again)
  return i;
}

uint32_t category_mask(char32_t c) { return U_MASK(icu().char_type(static_cast<UChar32>(c))); }

bool white_space_property(UChar32 c) { return icu().has_binary_property(c, UCHAR_WHITE_SPACE) != 0; }

std::u16string to_utf16(const std::u32string& text) {
  std::u16string s;
  s.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x10000) {
      s.push_back(static_cast<char16_t>(c));
    } else {
      s.push_back(static_cast<char16_t>(0xd800 + ((c - 0x10000) >> 10)));
      s.push_back(static_cast<char16_t>(0xdc00 + ((c - 0x10000) & 0x3ff)));
    }
  }
  return s;
}

std::u32string from_utf16(const std::u16string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char32_t hi = s[i];
    if (hi >= 0xd800 && hi < 0xdc00 && i + 1 < s.size() && s[i + 1] >= 0xdc00 && s[i + 1] < 0xe000) {
      out.push_back(0x10000 + ((hi - 0xd800) << 10) + (static_cast<char32_t>(s[i + 1]) - 0xdc00));
      ++i;
    } else {
      out.push_back(hi);
    }
  }
  return out;
}

// An ICU string function f(dest, capacity, status) -> length, called again with the length it asked for.
template <typename F>
std::u16string icu_string(size_t guess, const char* what, F f) {
  std::u16string out(guess, u'\0');
  UErrorCode status = U_ZERO_ERROR;
  int32_t n = f(reinterpret_cast<UChar*>(&out[0]), static_cast<int32_t>(out.size()), &status);
  if (status == U_BUFFER_OVERFLOW_ERROR) {
    out.assign(static_cast<size_t>(n), u'\0');
    status = U_ZERO_ERROR;
    n = f(reinterpret_cast<UChar*>(&out[0]), static_cast<int32_t>(out.size()), &status);
  }
  if (U_FAILURE(status)) throw Error(std::string("ICU: ") + what + " failed (" + icu().error_name(status) + ")");
  out.resize(static_cast<size_t>(n));
  return out;
}

std::u32string lower_root(const std::u32string& text) {
  const std::u16string src = to_utf16(text);
  const auto lower = icu().str_to_lower;
  return from_utf16(icu_string(src.size() + 16, "lower-casing", [&](UChar* d, int32_t cap, UErrorCode* st) {
    return lower(d, cap, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()), "", st);
  }));
}

}  // namespace

std::u32string nfc(const std::u32string& text) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* norm = icu().nfc_instance(&status);
  if (U_FAILURE(status)) throw Error(std::string("ICU: no NFC normaliser (") + icu().error_name(status) + ")");
  const std::u16string src = to_utf16(text);
  const UChar* s = reinterpret_cast<const UChar*>(src.data());
  const int32_t n = static_cast<int32_t>(src.size());
  if (icu().is_normalized(norm, s, n, &status) && U_SUCCESS(status)) return text;
  const auto normalize = icu().normalize;
  return from_utf16(icu_string(src.size() * 3 + 16, "NFC normalisation", [&](UChar* d, int32_t cap, UErrorCode* st) {
    return normalize(norm, s, n, d, cap, st);
  }));
}

std::u32string lower_like_python(const std::u32string& text) { return lower_root(text); }

std::u32string lower_each_code_point(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) out += lower_root(std::u32string(1, c));
  return out;
}

bool is_python_space(char32_t c) {
  if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85) return true;
  const int8_t t = icu().char_type(static_cast<UChar32>(c));
  return t == U_SPACE_SEPARATOR || t == U_LINE_SEPARATOR || t == U_PARAGRAPH_SEPARATOR;
}

bool is_white_space(char32_t c) { return white_space_property(static_cast<UChar32>(c)); }

bool is_letter(char32_t c) { return (category_mask(c) & U_GC_L_MASK) != 0; }

bool is_number(char32_t c) { return (category_mask(c) & U_GC_N_MASK) != 0; }

bool is_other_ignoring_case(char32_t c) {
  const Icu& i = icu();
  const UChar32 u = static_cast<UChar32>(c);
  for (UChar32 v : {u, i.to_lower(u), i.to_upper(u), i.to_title(u), i.fold(u, U_FOLD_CASE_DEFAULT)})
    if ((category_mask(static_cast<char32_t>(v)) & (U_GC_L_MASK | U_GC_N_MASK)) || white_space_property(v)) return false;
  return true;
}

char32_t fold_case(char32_t c) { return static_cast<char32_t>(icu().fold(static_cast<UChar32>(c), U_FOLD_CASE_DEFAULT)); }

}  // namespace attnmap
