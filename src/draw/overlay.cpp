#include "draw/overlay.hpp"

#include <stb_image_resize.h>

#include <algorithm>
#include <cmath>

#include "draw/colormap.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace attnmap {

std::vector<float> normalize_minmax(const std::vector<float>& map, bool* flat) {
  std::vector<float> out(map.size(), 0.0f);
  if (map.empty()) {
    *flat = true;
    return out;
  }
  const auto [mn_it, mx_it] = std::minmax_element(map.begin(), map.end());
  const double mn = *mn_it, mx = *mx_it;
  const double range = mx - mn;
  const double mag = std::max(std::fabs(mn), std::fabs(mx));
  *flat = !(range > 1e-12 * mag) || !std::isfinite(range);
  if (*flat) return out;
  for (size_t i = 0; i < map.size(); ++i) out[i] = static_cast<float>((map[i] - mn) / range);
  return out;
}

Image blend_overlay(const Image& photo, const std::vector<float>& map01, int map_w, int map_h, int x0, int y0,
                    const uint8_t* colormap, float alpha) {
  if (!(alpha >= 0.0f && alpha <= 1.0f)) throw Error("the opacity must be in [0, 1], found " + std::to_string(alpha));
  if (map01.size() != static_cast<size_t>(map_w) * static_cast<size_t>(map_h) || x0 < 0 || y0 < 0 ||
      x0 + map_w > photo.width || y0 + map_h > photo.height)
    throw Error("overlay: map box does not fit the photo");
  Image out = photo;
  for (int y = 0; y < map_h; ++y) {
    for (int x = 0; x < map_w; ++x) {
      const uint8_t* c = colormap_lookup(colormap, map01[static_cast<size_t>(y) * map_w + x]);
      uint8_t* p = &out.rgb[(static_cast<size_t>(y + y0) * photo.width + static_cast<size_t>(x + x0)) * 3];
      for (int k = 0; k < 3; ++k) {  // v >= 0 (alpha in [0, 1]): floor(v + 0.5) in double is std::lround(v), inlined
        const float v = (1.0f - alpha) * static_cast<float>(p[k]) + alpha * static_cast<float>(c[k]);
        p[k] = static_cast<uint8_t>(static_cast<int>(static_cast<double>(v) + 0.5));
      }
    }
  }
  return out;
}

Image draw_mask_overlay(const Image& photo, const std::vector<float>& mask01, int map_w, int map_h, int x0, int y0,
                        const uint8_t rgb[3], float alpha, int outline) {
  if (!(alpha >= 0.0f && alpha <= 1.0f)) throw Error("the opacity must be in [0, 1], found " + std::to_string(alpha));
  if (mask01.size() != static_cast<size_t>(map_w) * static_cast<size_t>(map_h) || x0 < 0 || y0 < 0 ||
      x0 + map_w > photo.width || y0 + map_h > photo.height)
    throw Error("overlay: mask box does not fit the photo");
  auto inside = [&](int x, int y) {
    return x >= 0 && y >= 0 && x < map_w && y < map_h && mask01[static_cast<size_t>(y) * static_cast<size_t>(map_w) + static_cast<size_t>(x)] >= 0.5f;
  };
  // Contour: inside pixels with an outside pixel (or the box edge, which closes the contour as DINO pads the
  // mask before find_contours) within `outline` pixels (Chebyshev). Separable: rows first, then columns.
  const size_t n = mask01.size();
  std::vector<uint8_t> edge(n, 0);
  if (outline > 0) {
    const int r = outline;
    std::vector<uint8_t> near_row(n, 0);  // an outside pixel within r columns on the same row
    for (int y = 0; y < map_h; ++y)
      for (int x = 0; x < map_w; ++x) {
        bool e = false;
        for (int dx = -r; dx <= r && !e; ++dx) e = !inside(x + dx, y);
        near_row[static_cast<size_t>(y) * static_cast<size_t>(map_w) + static_cast<size_t>(x)] = e;
      }
    for (int y = 0; y < map_h; ++y)
      for (int x = 0; x < map_w; ++x) {
        if (!inside(x, y)) continue;
        bool e = false;
        for (int dy = -r; dy <= r && !e; ++dy) {
          const int yy = y + dy;
          e = yy < 0 || yy >= map_h || near_row[static_cast<size_t>(yy) * static_cast<size_t>(map_w) + static_cast<size_t>(x)];
        }
        edge[static_cast<size_t>(y) * static_cast<size_t>(map_w) + static_cast<size_t>(x)] = e;
      }
  }
  Image out = photo;
  for (int y = 0; y < map_h; ++y)
    for (int x = 0; x < map_w; ++x) {
      if (!inside(x, y)) continue;
      uint8_t* p = &out.rgb[(static_cast<size_t>(y + y0) * static_cast<size_t>(photo.width) + static_cast<size_t>(x + x0)) * 3];
      const float a = edge[static_cast<size_t>(y) * static_cast<size_t>(map_w) + static_cast<size_t>(x)] ? 1.0f : alpha;
      for (int k = 0; k < 3; ++k)
        p[k] = static_cast<uint8_t>(std::lround((1.0f - a) * static_cast<float>(p[k]) + a * static_cast<float>(rgb[k])));
    }
  return out;
}

Image resize_photo(const Image& photo, int w, int h) {
  if (w <= 0 || h <= 0 || photo.width <= 0 || photo.height <= 0) throw Error("resize: empty image size");
  Image out;
  out.width = w;
  out.height = h;
  out.rgb.resize(checked_mul(checked_mul(static_cast<size_t>(w), static_cast<size_t>(h), "resize"), 3, "resize"));
  const int ok = stbir_resize_uint8_generic(photo.rgb.data(), photo.width, photo.height, photo.width * 3, out.rgb.data(), w,
                                            h, w * 3, 3, STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP,
                                            STBIR_FILTER_DEFAULT, STBIR_COLORSPACE_SRGB, nullptr);
  if (!ok) throw Error("resize: stb_image_resize failed");
  return out;
}

}  // namespace attnmap
