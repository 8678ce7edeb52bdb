// rel_pos_resize.hpp - BEiT's relative position tables at another grid (--size), as timm resamples them.
#pragma once
#include <vector>

#include "checkpoint/weights.hpp"

namespace attnmap {

/// timm layers/pos_embed_rel.py resize_rel_pos_bias_table (from microsoft/unilm beit run_class_finetuning.py),
/// the flat (rows, H) form with its default (no scipy) RegularGridInterpolator: the table's last 3 rows (the
/// class-token entries) are kept; the (2s-1) x (2s-1) relative offsets of a square source grid s are placed on
/// a geometric progression of positions (ratio q by bisection so that the largest reaches dst // 2) and read
/// bilinearly at the integer offsets -(dst//2)..dst//2 of each axis of the new (2gh-1) x (2gw-1) grid, clamped
/// at the ends. Computed in double (timm: float32). table: ((2s-1)^2 + 3, H); returns ((2gh-1)(2gw-1) + 3, H).
/// Throws attnmap::Error when the table has not (2s-1)^2 + 3 rows for src_side s.
std::vector<float> resize_rel_pos_bias_table(const std::vector<float>& table, int H, int src_side, int gh, int gw);

/// Hugging Face BeitRelativePositionBias.forward (transformers 4.48.3, issue 44): the (2s-1)^2 offset rows as
/// (1, H, 2s-1, 2s-1) planes, F.interpolate(size=(2gh-1, 2gw-1), mode="bilinear", align_corners=False); the last
/// 3 rows (class-token entries) kept. Same shapes and errors as resize_rel_pos_bias_table.
std::vector<float> hf_resize_rel_pos_bias_table(const std::vector<float>& table, int H, int src_side, int gh, int gw);

/// --size for a model with relative position tables: every table (per block, shared) resized from the trained
/// grid (hp.rel_pos_grid_h/w, which must be square, as timm's resize assumes) to gh x gw (Hugging Face BEiT: hf_resize_rel_pos_bias_table) and the biases
/// gathered again. Sets hp.rel_pos_grid_h/w; hp.grid must already be gh x gw. Throws attnmap::Error for a
/// non-square trained grid.
void resample_rel_pos(ViTWeights& w, int gh, int gw);

/// Throws resample_rel_pos's error for a model whose tables it would refuse (before anything is changed).
void check_rel_pos_resizable(const HParams& hp);

}  // namespace attnmap
