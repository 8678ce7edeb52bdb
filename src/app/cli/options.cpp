// options.cpp - the shared parsers and checks of the options layer (see options.hpp).
#include "app/cli/options.hpp"

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace attnmap {

std::string with_flags(const std::string& text) {
  return spell_settings(text, [](std::string name) {
    std::replace(name.begin(), name.end(), '_', '-');
    return "--" + name;
  });
}

std::string shown_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

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
  if (n <= 0) throw Error("--heads must be positive, found " + std::to_string(n));
  return n;
}

ResizeMode parse_resize_option(const std::string& flag, const std::string& s) {
  if (s == "squash") return ResizeMode::Squash;
  if (s == "crop") return ResizeMode::Crop;
  throw Error(flag + " expects squash or crop, found '" + s + "'");
}

void check_drawing_options(const RenderOptions& ro) {
  if (!(ro.alpha >= 0.0f && ro.alpha <= 1.0f)) throw Error("--alpha must be in [0, 1], found " + shown_number(ro.alpha));
  if (ro.alpha_by_value && ro.style != Style::Overlay)
    throw Error("--alpha-by-value applies to --style overlay (mask and contour have no opacity)");
  if (ro.dpi && !(*ro.dpi > 0.0 && *ro.dpi <= 100000.0)) throw Error("--dpi must be in (0, 100000], found " + shown_number(*ro.dpi));
  if (!(ro.discard >= 0.0 && ro.discard <= 1.0)) throw Error("--discard must be in [0, 1], found " + shown_number(ro.discard));
  if (ro.threshold && !(*ro.threshold > 0.0f && *ro.threshold <= 1.0f))
    throw Error("--threshold must be in (0, 1], found " + shown_number(*ro.threshold));
  if (ro.threshold && (ro.panel || ro.strip_layers || ro.style != Style::Overlay || ro.alpha_by_value || ro.scale))
    throw Error("--threshold draws the DINO mask; --panel, --strip layers, --style, --alpha-by-value and --scale "
                "apply to heatmaps");
  if (ro.all_heads && !ro.writes(OutputKind::MapNpy)) throw Error("--all-heads is a --save-raw option: add --save-raw");
  if (ro.all_heads && ro.rollout)
    throw Error("--all-heads cannot be combined with --rollout: rollout fuses the heads of every layer");
  if (ro.pos_interp && !ro.size)
    throw Error("--pos-interp applies with --size (it chooses how --size resamples the position embeddings)");
  if (ro.load.max_pixels < 1) throw Error("--max-pixels must be >= 1, found 0");
  if (ro.figure_formats.empty()) throw Error("--figure-format needs at least one of png, pdf, svg");
  if (ro.width_in && !(*ro.width_in > 0.0 && *ro.width_in <= 100.0))
    throw Error("--width-in must be in (0, 100] inches, found " + shown_number(*ro.width_in));
  if (ro.width_in && !(ro.panel || ro.strip_layers || ro.heads_grid))
    throw Error("--width-in sizes the figures: add --panel or --strip layers|heads");
  if (ro.strip_columns && *ro.strip_columns < 1)
    throw Error("--strip-columns must be >= 1, found " + std::to_string(*ro.strip_columns));
  if (ro.strip_columns && !(ro.strip_layers || ro.heads_grid))
    throw Error("--strip-columns lays out the strips: add --strip layers or --strip heads");
  const bool figures = ro.panel || ro.strip_layers || ro.heads_grid;
  if (ro.title && !figures) throw Error("--title titles the figures: add --panel or --strip layers|heads");
  if (ro.block_base != 0 && !figures)
    throw Error("--block-numbering numbers the blocks in the figures: add --panel or --strip layers|heads");
  if (ro.notes && !figures) throw Error("--notes draws notes into the figures: add --panel or --strip layers|heads");
}

int parse_block_numbering(const std::string& s) {
  if (s != "0" && s != "1")
    throw Error("--block-numbering expects 0 (the first block is block 0, as --layer counts) or 1 (block 1, as "
                "papers often count), found '" + s + "'");
  return s == "1" ? 1 : 0;
}

}  // namespace attnmap
