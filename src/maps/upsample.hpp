// upsample.hpp - a patch-grid map resampled to photo pixels, and the photo box it covers.
#pragma once
#include <string>
#include <vector>

#include "model/preprocess.hpp"

namespace attnmap {

enum class Upsample { Nearest, Bilinear, Bicubic };

/// Parses "nearest" | "bilinear" | "bicubic"; throws attnmap::Error otherwise.
Upsample parse_upsample(const std::string& s);

/// Resamples a (gh, gw) map to (out_h, out_w) pixels with pixel-centre alignment (PyTorch
/// F.interpolate(align_corners=False)): nearest; bilinear (triangle filter) and bicubic (Catmull-Rom) through
/// stb_image_resize with clamped edges. Bicubic overshoot is clamped to the input's range. A bilinear map
/// shrunk on either axis (an image smaller than the patch grid) is interpolated here, as PyTorch's bilinear
/// without antialias, since Debian's stb_image_resize aborts on many shrinking ratios of its triangle filter.
std::vector<float> upsample_map(const std::vector<float>& map, int gw, int gh, int out_w, int out_h, Upsample mode);

/// Rounds a Box to whole pixels inside the photo: x0, y0, width, height.
void box_pixels(const Box& box, int photo_w, int photo_h, int* x0, int* y0, int* w, int* h);

}  // namespace attnmap
