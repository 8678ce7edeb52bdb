#include "draw/colormap.hpp"

#include "core/error.hpp"
#include "core/names.hpp"

namespace attnmap {

namespace {
#include "draw/colormap_tables.inc"
}  // namespace

std::string colormap_name(const std::string& name) {
  const std::vector<std::string> known = colormap_names();
  const long i = find_name(known, name);
  if (i >= 0) return known[static_cast<size_t>(i)];
  std::string all;
  for (const auto& n : known) all += (all.empty() ? "" : ", ") + n;
  throw Error("unknown colormap '" + name + "'" + did_you_mean(known, name) + " (expected one of: " + all + ")");
}

const uint8_t* colormap_table(const std::string& name) {
  const std::string canonical = colormap_name(name);
  for (const auto& m : kMaps)
    if (canonical == m.name) return m.rgb;
  throw Error("unknown colormap '" + name + "'");  // not reached: colormap_name knows the same names
}

Colormap parse_colormap(const std::string& name) {
  Colormap c;
  c.name = colormap_name(name);
  c.table = colormap_table(c.name);
  return c;
}

std::vector<std::string> colormap_names() {
  std::vector<std::string> out;
  for (const auto& m : kMaps) out.emplace_back(m.name);
  return out;
}

}  // namespace attnmap
