// pos_embed.hpp - resampling learned absolute position embeddings to another patch grid (--size).
#pragma once
#include <string>
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

// PosInterp (how --size resamples the position embeddings) is declared in checkpoint/layouts.hpp, with
// the table of layouts that names each one's default.

/// The mode a checkpoint implies and why (one sentence naming the framework code followed).
struct PosInterpChoice {
  PosInterp mode = PosInterp::Timm;
  std::string why;
};

/// "timm", "timm-legacy", "dino", "hf", "hf-legacy", "torchvision".
std::string pos_interp_name(PosInterp m);

/// The inverse of pos_interp_name. Throws attnmap::Error listing the names for anything else.
PosInterp parse_pos_interp(const std::string& s);

/// The F.interpolate call of a mode, for messages and inspect, e.g. "size=(h, w), bicubic, antialias=True".
std::string pos_interp_call(PosInterp m);

/// The default for a checkpoint, by its layout: facebookresearch DINOv2 names -> Dino (Timm with register
/// tokens: the hub's *_reg models), Hugging Face -> Hf, torchvision -> Torchvision, timm names (timm, DeiT,
/// DINO v1 .pth files, which cannot be told apart from timm's) -> Timm, seed -> TimmLegacy (attnmap's rule
/// before issue 18; the seed layout is no framework's).
PosInterpChoice default_pos_interp(const HParams& hp);

/// Bicubic resampling of C channel planes with `mode`'s F.interpolate call (see PosInterp); same layout and
/// errors as bicubic_resize_planes (which is the Hf / TimmLegacy call). Computed in double.
std::vector<float> interpolate_planes(const std::vector<float>& in, int C, int in_h, int in_w, int out_h,
                                      int out_w, PosInterp mode);

/// Changes the model's input size to image_w x image_h pixels (each a positive multiple of the patch size):
/// the patch rows of w.pos_embed, seen as a (1, D, grid_h, grid_w) grid, are resampled to the new grid with
/// `mode`'s F.interpolate call (see PosInterp); the prefix rows (class, distillation, register tokens: the
/// rows before the grid_h * grid_w patch rows) are kept as they are. DINO, Hugging Face and torchvision assume
/// a square source grid; on a non-square one attnmap applies their rule to each axis. Updates hp.image_w/h,
/// hp.grid_w/h, hp.source["image_size"] and hp.source["pos_interp"]. Non-square sizes keep their orientation:
/// width is the column count, height the row count. The same grid leaves the weights untouched (as every
/// framework does: DINO's and Hugging Face's code return pos_embed as it is).
/// Throws attnmap::Error when the size is not a positive multiple of the patch, gives more than 96x96
/// patches, or pos_embed has fewer rows than the grid.
void resample_pos_embed(ViTWeights& w, int image_w, int image_h, PosInterp mode);

/// As above with default_pos_interp(w.hp).mode.
void resample_pos_embed(ViTWeights& w, int image_w, int image_h);

/// SimpleViT's 2-D sin-cos position table (lucidrains/vit-pytorch simple_vit.py posemb_sincos_2d,
/// temperature 10000), computed in float32 as its code does: for the patch at (row y, column x) and
/// omega_i = 1 / 10000^(i / (D/4 - 1)), i < D/4: [sin(x omega), cos(x omega), sin(y omega), cos(y omega)].
/// out (gh * gw, D) row-major over the grid. Throws attnmap::Error unless D is a multiple of 4 and >= 8.
void sincos_2d(float* out, int gh, int gw, int D);

}  // namespace attnmap
