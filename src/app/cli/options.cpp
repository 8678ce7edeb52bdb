// options.cpp - the shared parsers and checks of the options layer (see options.hpp).
#include "app/cli/options.hpp"

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace attnmap {

int parse_int_option(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const long v = s.empty() ? 0 : std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || v < -1000000 || v > 1000000)
    throw Error(flag + " expects an integer, found '" + s + "'");
  return static_cast<int>(v);
}

double parse_number_option(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0])))
    throw Error(flag + " expects a number, found '" + s + "'");
  return v;
}

std::array<float, 3> parse_rgb_option(const std::string& flag, const std::string& s, bool positive) {
  std::array<float, 3> v{};
  size_t start = 0;
  for (size_t i = 0; i < 3; ++i) {
    const size_t comma = s.find(',', start);
    if ((i < 2) != (comma != std::string::npos)) throw Error(flag + " expects three numbers R,G,B, found '" + s + "'");
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma + 1;
    char* end = nullptr;
    errno = 0;
    const double d = item.empty() ? 0.0 : std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0') throw Error(flag + " expects R,G,B numbers, found '" + s + "'");
    if (std::isnan(d) || std::isinf(d)) throw Error(flag + " values must be finite numbers, found '" + s + "'");
    if (errno == ERANGE || std::fabs(d) > static_cast<double>(FLT_MAX))
      throw Error(flag + " value '" + item + "' is out of range for a float");
    if (positive && !(d > 0.0))
      throw Error(flag + " values must be positive (the image is divided by them), found '" + s + "'");
    if (positive && 1.0 / d > static_cast<double>(FLT_MAX))
      throw Error(flag + " value '" + item + "' is too small: dividing by it overflows a float");
    v[i] = static_cast<float>(d);
  }
  return v;
}

std::array<int, 2> parse_size_option(const std::string& flag, const std::string& s) {
  const size_t comma = s.find(',');
  const std::string parts[2] = {s.substr(0, comma), comma == std::string::npos ? s : s.substr(comma + 1)};
  std::array<int, 2> v{};
  for (size_t i = 0; i < 2; ++i) {
    char* end = nullptr;
    errno = 0;
    const long n = parts[i].empty() ? 0 : std::strtol(parts[i].c_str(), &end, 10);
    if (parts[i].empty() || *end != '\0' || errno == ERANGE || n <= 0 || n > 65536)
      throw Error(flag + " expects S or W,H in pixels (positive integers), found '" + s + "'");
    v[i] = static_cast<int>(n);
  }
  return v;
}

int checked_heads(int n) {
  if (n <= 0) throw Error(setting_ref("heads") + " must be positive, found " + std::to_string(n));
  return n;
}

ResizeMode parse_resize_option(const std::string& flag, const std::string& s) {
  if (s == "squash") return ResizeMode::Squash;
  if (s == "crop") return ResizeMode::Crop;
  throw Error(flag + " expects squash or crop, found '" + s + "'");
}


int parse_block_numbering(const std::string& s) {
  if (s != "0" && s != "1")
    throw Error(setting_ref("block_numbering") + " expects 0 (the first block is block 0, as " +
                setting_ref("layer") +
                " counts) or 1 (block 1, as "
                "papers often count), found '" +
                s + "'");
  return s == "1" ? 1 : 0;
}

}  // namespace attnmap
