// options.cpp - the shared parsers and checks of the options layer (see options.hpp).
#include "app/cli/options.hpp"

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "app/cli/flags.hpp"

namespace attnmap {

std::string with_flags(const std::string& text) {
  return spell_as_flags(text);
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
  if (n <= 0) throw Error(setting_ref("heads") + " must be positive, found " + std::to_string(n));
  return n;
}

ResizeMode parse_resize_option(const std::string& flag, const std::string& s) {
  if (s == "squash") return ResizeMode::Squash;
  if (s == "crop") return ResizeMode::Crop;
  throw Error(flag + " expects squash or crop, found '" + s + "'");
}

void check_drawing_options(const RenderOptions& ro) {
  if (!(ro.alpha >= 0.0f && ro.alpha <= 1.0f))
    throw Error(setting_ref("alpha") + " must be in [0, 1], found " + shown_number(ro.alpha));
  if (ro.alpha_by_value && ro.style != Style::Overlay)
    throw Error(setting_ref("alpha_by_value") + " applies to " + setting_ref("style") +
                " overlay (mask and contour have no opacity)");
  if (ro.dpi && !(*ro.dpi > 0.0 && *ro.dpi <= 100000.0))
    throw Error(setting_ref("dpi") + " must be in (0, 100000], found " + shown_number(*ro.dpi));
  if (!(ro.discard >= 0.0 && ro.discard <= 1.0))
    throw Error(setting_ref("discard") + " must be in [0, 1], found " + shown_number(ro.discard));
  if (ro.threshold && !(*ro.threshold > 0.0f && *ro.threshold <= 1.0f))
    throw Error(setting_ref("threshold") + " must be in (0, 1], found " + shown_number(*ro.threshold));
  if (ro.threshold && (ro.panel || ro.strip_layers || ro.style != Style::Overlay || ro.alpha_by_value || ro.scale))
    throw Error(setting_ref("threshold") + " draws the DINO mask; " + setting_ref("panel") + ", " +
                setting_ref("strip") + " layers, " + setting_ref("style") + ", " +
                setting_ref("alpha_by_value") + " and " + setting_ref("scale") +
                " "
                "apply to heatmaps");
  if (ro.all_heads && !ro.writes(OutputKind::MapNpy))
    throw Error(setting_ref("all_heads") + " is a " + setting_ref("save_raw") + " option: add " +
                setting_ref("save_raw"));
  if (ro.all_heads && ro.rollout)
    throw Error(setting_ref("all_heads") + " cannot be combined with " + setting_ref("rollout") +
                ": rollout fuses the heads of every layer");
  if (ro.pos_interp && !ro.size)
    throw Error(setting_ref("pos_interp") + " applies with " + setting_ref("size") + " (it chooses how " +
                setting_ref("size") + " resamples the position embeddings)");
  if (ro.load.max_pixels < 1) throw Error(setting_ref("max_pixels") + " must be >= 1, found 0");
  if (ro.figure_formats.empty())
    throw Error(setting_ref("figure_format") + " needs at least one of png, pdf, svg");
  if (ro.width_in && !(*ro.width_in > 0.0 && *ro.width_in <= 100.0))
    throw Error(setting_ref("width_in") + " must be in (0, 100] inches, found " + shown_number(*ro.width_in));
  if (ro.width_in && !(ro.panel || ro.strip_layers || ro.heads_grid))
    throw Error(setting_ref("width_in") + " sizes the figures: add " + setting_ref("panel") + " or " +
                setting_ref("strip") + " layers|heads");
  if (ro.strip_columns && *ro.strip_columns < 1)
    throw Error(setting_ref("strip_columns") + " must be >= 1, found " + std::to_string(*ro.strip_columns));
  if (ro.strip_columns && !(ro.strip_layers || ro.heads_grid))
    throw Error(setting_ref("strip_columns") + " lays out the strips: add " + setting_ref("strip") +
                " layers or " + setting_ref("strip") + " heads");
  const bool figures = ro.panel || ro.strip_layers || ro.heads_grid;
  if (ro.title && !figures)
    throw Error(setting_ref("title") + " titles the figures: add " + setting_ref("panel") + " or " +
                setting_ref("strip") + " layers|heads");
  if (ro.block_base != 0 && !figures)
    throw Error(setting_ref("block_numbering") + " numbers the blocks in the figures: add " +
                setting_ref("panel") + " or " + setting_ref("strip") + " layers|heads");
  if (ro.notes && !figures)
    throw Error(setting_ref("notes") + " draws notes into the figures: add " + setting_ref("panel") + " or " +
                setting_ref("strip") + " layers|heads");
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
