#include "maps/upsample.hpp"

#include <stb_image_resize.h>

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "model/pos_embed.hpp"  // bilinear_resize_planes

namespace attnmap {

Upsample parse_upsample(const std::string& s) {
  if (s == "nearest") return Upsample::Nearest;
  if (s == "bilinear") return Upsample::Bilinear;
  if (s == "bicubic") return Upsample::Bicubic;
  throw Error("expects nearest, bilinear or bicubic, found '" + s + "'");
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

}  // namespace attnmap
