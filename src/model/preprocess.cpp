#include "model/preprocess.hpp"

#include <stb_image_resize.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace attnmap {

namespace {

// Resizes 8-bit RGB with Catmull-Rom (PIL BICUBIC, a = -0.5), clamped edges, no sRGB linearisation.
std::vector<uint8_t> resize_rgb(const Image& img, int w, int h) {
  if (w == img.width && h == img.height) return img.rgb;
  // stb_image_resize filters every input row horizontally first: for a strip much taller than wide (say
  // 1x16000000) that is 16 million rows each widened to w pixels, minutes of work. Such strips are
  // transposed, resized (now one long row) and transposed back: the same separable filter, rows and
  // columns swapped, so only the rounding order differs. Ordinary pictures never take this path.
  if (img.height > 16 * img.width && img.height > 4096) {
    auto transpose = [](const uint8_t* src, int sw, int sh) {
      std::vector<uint8_t> t(static_cast<size_t>(sw) * static_cast<size_t>(sh) * 3);
      for (int y = 0; y < sh; ++y)
        for (int x = 0; x < sw; ++x)
          for (int c = 0; c < 3; ++c)
            t[(static_cast<size_t>(x) * static_cast<size_t>(sh) + static_cast<size_t>(y)) * 3 + static_cast<size_t>(c)] =
                src[(static_cast<size_t>(y) * static_cast<size_t>(sw) + static_cast<size_t>(x)) * 3 + static_cast<size_t>(c)];
      return t;
    };
    Image t;
    t.width = img.height;
    t.height = img.width;
    t.rgb = transpose(img.rgb.data(), img.width, img.height);
    const std::vector<uint8_t> r = resize_rgb(t, h, w);
    return transpose(r.data(), h, w);
  }
  std::vector<uint8_t> out(checked_mul(checked_mul(static_cast<size_t>(w), static_cast<size_t>(h), "resize"),
                                       3, "resize"));
  const int ok = stbir_resize_uint8_generic(img.rgb.data(), img.width, img.height, img.width * 3, out.data(), w,
                                            h, w * 3, 3, STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP,
                                            STBIR_FILTER_CATMULLROM, STBIR_COLORSPACE_LINEAR, nullptr);
  if (!ok) {
    throw Error("resize " + std::to_string(img.width) + "x" + std::to_string(img.height) + " -> " +
                std::to_string(w) + "x" + std::to_string(h) + " failed");
  }
  return out;
}

// The w x h box at output offset (x0, y0) of `img` resized by (sx, sy), same filter and edges as resize_rgb.
std::vector<uint8_t> resize_rgb_box(const Image& img, int w, int h, float sx, float sy, float x0, float y0) {
  std::vector<uint8_t> out(checked_mul(checked_mul(static_cast<size_t>(w), static_cast<size_t>(h), "resize"),
                                       3, "resize"));
  const int ok = stbir_resize_subpixel(img.rgb.data(), img.width, img.height, img.width * 3, out.data(), w, h, w * 3,
                                       STBIR_TYPE_UINT8, 3, STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP,
                                       STBIR_EDGE_CLAMP, STBIR_FILTER_CATMULLROM, STBIR_FILTER_CATMULLROM,
                                       STBIR_COLORSPACE_LINEAR, nullptr, sx, sy, x0, y0);
  if (!ok) {
    throw Error("resize " + std::to_string(img.width) + "x" + std::to_string(img.height) + " (crop box " +
                std::to_string(w) + "x" + std::to_string(h) + ") failed");
  }
  return out;
}

}  // namespace

ModelInput preprocess(const Image& img, int width, int height, ResizeMode mode, const float mean[3],
                      const float std[3], double crop_pct) {
  if (img.width <= 0 || img.height <= 0) throw Error("preprocess: empty image");
  if (width <= 0 || height <= 0) throw Error("preprocess: model input size must be positive");
  ModelInput in;
  in.width = width;
  in.height = height;
  std::vector<uint8_t> px;
  if (mode == ResizeMode::Squash) {
    px = resize_rgb(img, width, height);
    in.box = {0, 0, static_cast<double>(img.width), static_cast<double>(img.height)};
  } else {
    if (!(crop_pct > 0 && crop_pct <= 1)) throw Error("preprocess: crop_pct must be in (0, 1]");
    // timm transforms_factory: scale_size = floor(size / crop_pct). A square size resizes the shorter side to
    // it (torchvision Resize(int): long side = int(scale * long / short)); a (H, W) size resizes to exactly
    // (floor(H / crop_pct), floor(W / crop_pct)).
    // Sizes in 64 bits: a 1x9000000 strip would overflow int here.
    // crop_pct arrives as a float (0.8f = 0.800000012: 32 / 0.8f = 39.99999940 would floor to 39 where timm's
    // double 32 / 0.8 and CLIPImageProcessor's shortest_edge give 40): a quotient within 1e-6 (relative) of a
    // whole number is that number.
    auto scaled = [crop_pct](int size) {
      const double q = size / crop_pct, n = std::round(q);
      return static_cast<int64_t>(std::abs(q - n) <= 1e-6 * n ? n : std::floor(q));
    };
    int64_t rw = 0, rh = 0;
    if (width == height) {
      const int64_t scale = scaled(width);
      if (img.width <= img.height) {
        rw = scale;
        rh = static_cast<int64_t>(static_cast<double>(scale) * img.height / img.width);
      } else {
        rh = scale;
        rw = static_cast<int64_t>(static_cast<double>(scale) * img.width / img.height);
      }
    } else {
      rw = scaled(width);
      rh = scaled(height);
    }
    rw = std::max<int64_t>(rw, width);
    rh = std::max<int64_t>(rh, height);
    // torchvision CenterCrop: int(round((size - crop) / 2)), Python's round: halves to even.
    const int64_t left = static_cast<int64_t>(std::nearbyint(static_cast<double>(rw - width) / 2.0));
    const int64_t top = static_cast<int64_t>(std::nearbyint(static_cast<double>(rh - height) / 2.0));
    // Only the crop box of the resized picture is computed (stb_image_resize with a scale and an offset in
    // output pixels): the same filter taps as resizing the whole picture and cutting the box out, without
    // the whole resized picture in memory (a 1x8000 strip would otherwise need 256x2048000 pixels).
    px = resize_rgb_box(img, width, height, static_cast<float>(rw) / static_cast<float>(img.width),
                        static_cast<float>(rh) / static_cast<float>(img.height), static_cast<float>(left),
                        static_cast<float>(top));
    const double kx = static_cast<double>(img.width) / static_cast<double>(rw);
    const double ky = static_cast<double>(img.height) / static_cast<double>(rh);
    in.box = {static_cast<double>(left) * kx, static_cast<double>(top) * ky, static_cast<double>(left + width) * kx,
              static_cast<double>(top + height) * ky};
  }
  const size_t plane = static_cast<size_t>(width) * static_cast<size_t>(height);
  in.chw.resize(checked_mul(plane, 3, "preprocess"));
  for (int c = 0; c < 3; ++c) {
    if (!(std[c] > 0.0f)) throw Error("preprocess: std must be positive, found " + std::to_string(std[c]));
    const float scale = 1.0f / (255.0f * std[c]);
    const float shift = mean[c] / std[c];
    float* dst = &in.chw[static_cast<size_t>(c) * plane];
    for (size_t i = 0; i < plane; ++i) dst[i] = static_cast<float>(px[i * 3 + static_cast<size_t>(c)]) * scale - shift;
  }
  return in;
}

std::vector<float> patchify(const float* chw, int height, int width, int patch) {
  if (patch <= 0 || height % patch != 0 || width % patch != 0) {
    throw Error("patchify: input " + std::to_string(width) + "x" + std::to_string(height) +
                " is not a multiple of the patch size " + std::to_string(patch));
  }
  const int gh = height / patch, gw = width / patch;
  const size_t pdim = static_cast<size_t>(3) * patch * patch;
  std::vector<float> out(checked_mul(static_cast<size_t>(gh) * gw, pdim, "patchify"));
  const size_t plane = static_cast<size_t>(width) * height;
  for (int gy = 0; gy < gh; ++gy) {
    for (int gx = 0; gx < gw; ++gx) {
      float* dst = &out[(static_cast<size_t>(gy) * gw + gx) * pdim];
      for (int c = 0; c < 3; ++c) {
        for (int r = 0; r < patch; ++r) {
          const float* src = chw + c * plane + static_cast<size_t>(gy * patch + r) * width + gx * patch;
          std::copy_n(src, patch, dst);
          dst += patch;
        }
      }
    }
  }
  return out;
}

}  // namespace attnmap
