#include "draw/colormap.hpp"

#include "core/error.hpp"

namespace attnmap {

namespace {
#include "draw/colormap_tables.inc"
}  // namespace

const uint8_t* colormap_table(const std::string& name) {
  for (const auto& m : kMaps)
    if (name == m.name) return m.rgb;
  std::string all;
  for (const auto& n : colormap_names()) all += (all.empty() ? "" : ", ") + n;
  throw Error("unknown colormap '" + name + "' (expected one of: " + all + ")");
}

std::vector<std::string> colormap_names() {
  std::vector<std::string> out;
  for (const auto& m : kMaps) out.emplace_back(m.name);
  return out;
}

}  // namespace attnmap
