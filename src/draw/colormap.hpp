// colormap.hpp - matplotlib's colour maps as 256-entry lookup tables.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnmap {

/// The 256x3 RGB table of a named map: viridis, inferno, magma, plasma, turbo, jet, gray - sampled from
/// matplotlib (tools/gen_colormaps.py). The name's ASCII case does not matter (`Viridis`). Throws
/// attnmap::Error listing the names (and the nearest, "did you mean 'viridis'?") for an unknown one.
const uint8_t* colormap_table(const std::string& name);
/// The known name `name` stands for, in its own spelling ("Viridis" -> "viridis"): what a settings record
/// keeps. Throws as colormap_table.
std::string colormap_name(const std::string& name);

/// Names accepted by colormap_table, in a stable order.
std::vector<std::string> colormap_names();

/// A colour map as a run holds it, parsed once where the options are checked (parse_colormap): its known
/// name in its own spelling (what settings records keep) and its table. Default: viridis.
struct Colormap {
  std::string name = "viridis";
  const uint8_t* table = colormap_table("viridis");
};
/// `name` (any ASCII case, "Viridis") as a Colormap. Throws as colormap_table.
Colormap parse_colormap(const std::string& name);
/// A colour map equals its name in its own spelling ("magma").
inline bool operator==(const Colormap& c, const std::string& name) { return c.name == name; }

/// Colour of a value in [0,1] (clamped): table[round(v * 255)], as matplotlib with 256 levels.
inline const uint8_t* colormap_lookup(const uint8_t* table, float v) {
  const float c = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
  return table + 3 * static_cast<int>(c * 255.0f + 0.5f);
}

}  // namespace attnmap
