// pos_embed.hpp - resampling learned absolute position embeddings to another patch grid (--size).
#pragma once
#include <vector>

#include "checkpoint/weights.hpp"

namespace attnmap {

/// Bicubic resampling of C channel planes, exactly as PyTorch's
/// F.interpolate(x, size=(out_h, out_w), mode="bicubic", align_corners=False, antialias=False):
/// source coordinate (dst + 0.5) * in/out - 0.5 (not clamped), cubic convolution with a = -0.75 (Keys 1981),
/// the four taps' indices clamped to the border. Separable; computed in double.
/// in: (C, in_h, in_w) row-major; returns (C, out_h, out_w). Throws attnmap::Error on an empty size.
std::vector<float> bicubic_resize_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h,
                                         int out_w);

/// Bilinear resampling of C channel planes, exactly as PyTorch's
/// F.interpolate(x, size=(out_h, out_w), mode="bilinear", align_corners=False, antialias=False): source
/// coordinate (dst + 0.5) * in/out - 0.5 clamped at 0, linear between its two neighbours (the upper one clamped
/// to the border). Shrinking samples, it does not average. Same layout, errors and arithmetic as above.
std::vector<float> bilinear_resize_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h,
                                          int out_w);

/// Changes the model's input size to image_w x image_h pixels (each a positive multiple of the patch size):
/// the patch rows of w.pos_embed, seen as a (1, D, grid_h, grid_w) grid, are resampled bicubically to the
/// new grid as timm's resample_abs_pos_embed does (bicubic, align_corners=False, antialias=False - also
/// DINO's, DINOv2's and Hugging Face's interpolate_pos_encoding kernel); the prefix rows (class,
/// distillation, register tokens: the rows before the grid_h * grid_w patch rows) are kept as they are.
/// Updates hp.image_w/h, hp.grid_w/h and hp.source["image_size"]. Non-square sizes keep their orientation:
/// width is the column count, height the row count. The same size leaves the weights untouched.
/// Throws attnmap::Error when the size is not a positive multiple of the patch or pos_embed has fewer rows
/// than the grid.
void resample_pos_embed(ViTWeights& w, int image_w, int image_h);

}  // namespace attnmap
