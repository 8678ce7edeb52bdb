#include "overlay.hpp"

#include <stb_image_resize.h>

#include <algorithm>
#include <cmath>

#include "colormap.hpp"
#include "error.hpp"
#include "pos_embed.hpp"  // bilinear_resize_planes
#include "tensor.hpp"

namespace attnmap {

Upsample parse_upsample(const std::string& s) {
  if (s == "nearest") return Upsample::Nearest;
  if (s == "bilinear") return Upsample::Bilinear;
  if (s == "bicubic") return Upsample::Bicubic;
  throw Error("unknown upsample mode '" + s + "' (expected nearest, bilinear or bicubic)");
}

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

std::vector<float> upsample_map(const std::vector<float>& map, int gw, int gh, int out_w, int out_h, Upsample mode) {
  if (gw <= 0 || gh <= 0 || map.size() != static_cast<size_t>(gw) * static_cast<size_t>(gh))
    throw Error("upsample: map of " + std::to_string(map.size()) + " values is not " + std::to_string(gh) + "x" +
                std::to_string(gw));
  if (out_w <= 0 || out_h <= 0) throw Error("upsample: empty output size");
  // Debian's stb_image_resize (0.97) aborts on an assertion when its triangle filter shrinks by many ratios
  // (14 -> 10, 7 -> 5, ...: a map drawn on an image smaller than the patch grid). A bilinear map shrunk on
  // either axis is resampled as PyTorch does instead; on an axis that grows this is the same interpolation.
  if (mode == Upsample::Bilinear && (out_w < gw || out_h < gh))
    return bilinear_resize_planes(map, 1, gh, gw, out_h, out_w);
  std::vector<float> out(checked_mul(static_cast<size_t>(out_w), static_cast<size_t>(out_h), "upsample"));
  if (mode == Upsample::Nearest) {
    for (int y = 0; y < out_h; ++y) {
      const int sy = std::min(gh - 1, static_cast<int>((static_cast<int64_t>(y) * gh) / out_h));
      for (int x = 0; x < out_w; ++x) {
        const int sx = std::min(gw - 1, static_cast<int>((static_cast<int64_t>(x) * gw) / out_w));
        out[static_cast<size_t>(y) * out_w + x] = map[static_cast<size_t>(sy) * gw + sx];
      }
    }
    return out;
  }
  const stbir_filter filter = mode == Upsample::Bilinear ? STBIR_FILTER_TRIANGLE : STBIR_FILTER_CATMULLROM;
  const int ok = stbir_resize_float_generic(map.data(), gw, gh, gw * 4, out.data(), out_w, out_h, out_w * 4, 1,
                                            STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP, filter,
                                            STBIR_COLORSPACE_LINEAR, nullptr);
  if (!ok) throw Error("upsample: stb_image_resize failed");
  const auto [mn, mx] = std::minmax_element(map.begin(), map.end());
  for (float& v : out) v = std::clamp(v, *mn, *mx);
  return out;
}

void box_pixels(const Box& box, int photo_w, int photo_h, int* x0, int* y0, int* w, int* h) {
  const int bx0 = std::clamp(static_cast<int>(std::lround(box.x0)), 0, photo_w - 1);
  const int by0 = std::clamp(static_cast<int>(std::lround(box.y0)), 0, photo_h - 1);
  const int bx1 = std::clamp(static_cast<int>(std::lround(box.x1)), bx0 + 1, photo_w);
  const int by1 = std::clamp(static_cast<int>(std::lround(box.y1)), by0 + 1, photo_h);
  *x0 = bx0;
  *y0 = by0;
  *w = bx1 - bx0;
  *h = by1 - by0;
}

Image blend_overlay(const Image& photo, const std::vector<float>& map01, int map_w, int map_h, int x0, int y0,
                    const uint8_t* colormap, float alpha) {
  if (!(alpha >= 0.0f && alpha <= 1.0f)) throw Error("--alpha must be in [0, 1], found " + std::to_string(alpha));
  if (map01.size() != static_cast<size_t>(map_w) * static_cast<size_t>(map_h) || x0 < 0 || y0 < 0 ||
      x0 + map_w > photo.width || y0 + map_h > photo.height)
    throw Error("overlay: map box does not fit the photo");
  Image out = photo;
  for (int y = 0; y < map_h; ++y) {
    for (int x = 0; x < map_w; ++x) {
      const uint8_t* c = colormap_lookup(colormap, map01[static_cast<size_t>(y) * map_w + x]);
      uint8_t* p = &out.rgb[(static_cast<size_t>(y + y0) * photo.width + static_cast<size_t>(x + x0)) * 3];
      for (int k = 0; k < 3; ++k)
        p[k] = static_cast<uint8_t>(std::lround((1.0f - alpha) * static_cast<float>(p[k]) + alpha * static_cast<float>(c[k])));
    }
  }
  return out;
}

Image draw_mask_overlay(const Image& photo, const std::vector<float>& mask01, int map_w, int map_h, int x0, int y0,
                        const uint8_t rgb[3], float alpha, int outline) {
  if (!(alpha >= 0.0f && alpha <= 1.0f)) throw Error("--alpha must be in [0, 1], found " + std::to_string(alpha));
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
