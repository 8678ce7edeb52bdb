// preprocess.hpp - resize, normalise and patchify a photo into the model's input, as timm/torchvision do.
#pragma once
#include <vector>

#include "io/image_io.hpp"

namespace attnmap {

enum class ResizeMode {
  Squash,  ///< whole image resized to the model's input size (aspect ratio not kept)
  Crop,    ///< timm eval: scale so the input fits size/crop_pct, then centre-crop the input size
};

/// Pixel box of the original photo that the model saw, in original pixel units (x1/y1 exclusive).
struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

/// The normalised model input: `chw` has shape (3, height, width), values (pixel/255 - mean) / std.
struct ModelInput {
  int width = 0;
  int height = 0;
  std::vector<float> chw;  // (3, H, W)
  Box box;                 // where the input lies in the original photo
};

/// Resizes `img` to (width, height) with stb_image_resize (Catmull-Rom = PIL's bicubic, antialiased when
/// shrinking, sRGB values filtered as stored, like PIL), scales to [0,1], subtracts `mean`, divides by
/// `std` per channel (R, G, B).  Crop mode follows timm's eval transform: scale_size =
/// floor(size / crop_pct) on the shorter side (default crop_pct 0.875: 224 -> 256), centre crop.
/// Throws attnmap::Error on an empty image or a non-positive size.
ModelInput preprocess(const Image& img, int width, int height, ResizeMode mode, const float mean[3],
                      const float std[3], double crop_pct = 0.875);

/// Cuts a (3, H, W) tensor into (H/P)*(W/P) patches of P*P pixels, row-major over the patch grid, each
/// flattened in (channel, row, column) order - the order of a PyTorch Conv2d weight (D, 3, P, P).
/// Output shape (N, 3*P*P).  Throws attnmap::Error when H or W is not a multiple of P.
std::vector<float> patchify(const float* chw, int height, int width, int patch);

}  // namespace attnmap
