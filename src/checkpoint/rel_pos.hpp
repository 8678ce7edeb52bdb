// rel_pos.hpp - BEiT's relative position bias (Bao et al. 2022; timm beit.py, microsoft/unilm beit): the
// index that maps each (query, key) token pair to a row of a block's table, and the bias (H, T, T) gathered
// from the tables for a grid. Used by the loader (at the trained grid) and by --size (model/pos_embed.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "checkpoint/weights.hpp"

namespace attnmap {

/// Rows of a table for a gh x gw grid: (2 gh - 1)(2 gw - 1) relative offsets + 3 class-token entries.
int64_t rel_pos_table_rows(int gh, int gw);

/// timm beit.py gen_relative_position_index((gh, gw)): (T, T) with T = 1 + gh*gw, row-major. Patch tokens
/// i, j at (row, column) (yi, xi), (yj, xj): (yi - yj + gh - 1) * (2 gw - 1) + (xi - xj + gw - 1); the class
/// token's row [0, :] is rows-3 (class -> patch), its column [:, 0] rows-2 (patch -> class), [0, 0] rows-1.
std::vector<int64_t> beit_relative_position_index(int gh, int gw);

/// (H, T, T): bias[h, i, j] = table[index[i, j], h], table ((2gh-1)(2gw-1)+3, H) row-major.
std::vector<float> gather_rel_pos_bias(const Floats& table, int H, int gh, int gw);

/// Fills every block's attn_bias for hp.rel_pos_grid_h x rel_pos_grid_w (which must be the patch grid): its
/// own table plus the shared one (timm adds both when both exist); blocks with only the shared table share one
/// buffer. Nothing when hp.rel_pos is false. Throws attnmap::Error when a table has the wrong number of rows.
void prepare_rel_pos_bias(ViTWeights& w);

}  // namespace attnmap
