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

/// Colour of a value in [0,1] (clamped): table[round(v * 255)], as matplotlib with 256 levels.
inline const uint8_t* colormap_lookup(const uint8_t* table, float v) {
  const float c = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
  return table + 3 * static_cast<int>(c * 255.0f + 0.5f);
}

}  // namespace attnmap
