// json_number.hpp - the JSON weights scanner's short-number path (internal to weights_json.cpp and its tests):
// a plain decimal such as -0.0123456 read 8 bytes at a time (SWAR: the digit run found and converted with a
// few 64-bit operations instead of a branch per digit), valued exactly as the scanner's general number code.
#pragma once
#include <cstdint>
#include <cstring>

namespace attnmap {
namespace json_number {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr bool kEnabled = true;
#else
constexpr bool kEnabled = false;  // the byte order the SWAR code assumes: elsewhere every number takes the general code
#endif

/// The bytes a plain_decimal call may read from its start: it reads nothing when fewer are left.
constexpr long kMargin = 32;

/// The 8 bytes at p as a little-endian word (byte 0, the first character, in the low bits).
inline uint64_t load8(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

/// How many of the 8 characters in x (load8) are ASCII digits before the first one that is not: 0..8.
inline int digit_run(uint64_t x) {
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  const uint64_t low7 = x & ~kHigh;                           // each byte <= 0x7f: the additions below never carry
  const uint64_t at_least_0 = low7 + 0x5050505050505050ULL;    // bit 7 set where the byte is >= '0' (0x30)
  const uint64_t above_9 = low7 + 0x4646464646464646ULL;       // bit 7 set where the byte is >  '9' (0x39)
  const uint64_t not_digit = (~at_least_0 | above_9 | x) & kHigh;  // x's own bit 7: a non-ASCII byte
  return not_digit == 0 ? 8 : __builtin_ctzll(not_digit) >> 3;
}

/// The value of the first n (1..8) characters of x, all digits (digit_run(x) >= n), as a decimal number.
inline uint64_t digits_value(uint64_t x, int n) {
  // Digit values, then the n digits moved to the top bytes: the bytes shifted in are leading zeros (byte 0 is
  // the most significant digit), and the bytes after the run (any borrow of theirs moves up) are shifted out.
  uint64_t v = (x - 0x3030303030303030ULL) << (8 * (8 - n));
  v = (v * 10 + (v >> 8)) & 0x00FF00FF00FF00FFULL;       // pairs: 10 * first + second, <= 99 per 16 bits
  v = (v * 100 + (v >> 16)) & 0x0000FFFF0000FFFFULL;     // fours: 100 * pair + pair, <= 9999 per 32 bits
  return (v * 10000 + (v >> 32)) & 0xFFFFFFFFULL;        // eight: 10000 * four + four, <= 99999999
}

/// Reads a number of the plain form -?(0|[1-9][0-9]{0,6})(\.[0-9]{1,7})? at p, followed by a byte that
/// cannot continue a JSON number (not a digit, '.', 'e' or 'E'), and stores its float32 value: the same
/// (double)m / 10^k as the scanner's general code (Clinger's fast path: one correctly rounded division, the
/// double strtod gives), then rounded to float; "-0" is +0 (an integer, as nlohmann reads it), "-0.0" is -0.
/// Returns the end of the number, or nullptr - having stored nothing - for every other text (longer digit
/// runs, exponents, malformed numbers, fewer than kMargin bytes before `end`), which the general code decides.
inline const char* plain_decimal(const char* p, const char* end, float* out) {
  static const double kPow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7};
  static const uint64_t kScale[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
  if (!kEnabled || end - p < kMargin) return nullptr;
  // Reads stay within p + 17: sign, at most 7 digits and '.', then 8 bytes of fraction (the terminator is
  // one of them).
  const char* q = p;
  const bool neg = *q == '-';
  q += neg ? 1 : 0;
  uint64_t m = 0;
  if (*q == '0') {
    ++q;
  } else {
    const uint64_t x = load8(q);
    const int n = digit_run(x);
    if (n == 0 || n == 8) return nullptr;
    m = digits_value(x, n);
    q += n;
  }
  int frac = 0;
  if (*q == '.') {
    ++q;
    const uint64_t x = load8(q);
    frac = digit_run(x);
    if (frac == 0 || frac == 8) return nullptr;
    m = m * kScale[frac] + digits_value(x, frac);
    q += frac;
  }
  const char c = *q;
  if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E') return nullptr;
  double v = static_cast<double>(m) / kPow10[frac];
  if (neg && (frac > 0 || m != 0)) v = -v;
  *out = static_cast<float>(v);
  return q;
}

}  // namespace json_number
}  // namespace attnmap
