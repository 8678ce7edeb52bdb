// rope.hpp - rotary position embeddings on the patch tokens' queries and keys (issue 29), as timm's Eva
// applies them (timm/models/eva.py EvaAttention, timm/layers/pos_embed_sincos.py): EVA-02's
// RotaryEmbeddingCat ('cat') and DINOv3's RotaryEmbeddingDinoV3. The prefix tokens (class, registers) are
// left unrotated, as EvaAttention does (q[:, :, :npt] kept, the rest rotated).
#pragma once
#include "checkpoint/weights.hpp"

namespace attnmap {

/// The rotary tables of a gh x gw patch grid for hp's rope (hp.rope != Rope::None): sin, cos (gh*gw, d_k),
/// patch n = row * gw + column, channel c of a head. float32 as timm computes them:
///   EvaCat: bands f_j = 1 / temperature^(j / (d_k/4)), j < d_k/4; coordinates (row, column) as integers,
///           scaled by ref / g per axis when hp.rope_ref_* is set (timm: t / feat_shape * ref_feat_shape);
///           angles [row * f_0.., column * f_0..] (d_k/2), each repeated twice (interleaved pairs).
///   Dinov3: periods p_j = temperature^(2j / (d_k/2)), j < d_k/4 (or hp.rope_periods as facebookresearch's file
///           stores them); coordinates 2 (i + 0.5) / g - 1 per axis
///           ('separate' normalisation); angles 2 pi coord / p_j, [row.., column..] (d_k/2), tiled twice
///           (rotate-half) or repeated twice (interleaved) by hp.rope_half.
/// Throws attnmap::Error when d_k is not a multiple of 4.
RopeTables rope_tables(const HParams& hp, int gh, int gw);

/// w.rope = rope_tables(w.hp, grid_h, grid_w) when the model has a rope and the tables are not already for
/// that grid; clears them otherwise. Called after loading and by resample_pos_embed (--size).
void prepare_rope(ViTWeights& w);

/// Rotates, in place, the queries and keys of the patch tokens of one image's qkv (T, 3*inner) (rows [q | k
/// | v], heads contiguous in each, d_k per head): token t >= hp.num_prefix is patch
/// patch_index[t - num_prefix] (nullptr: t - num_prefix) of the grid of `tab`; x' = x cos + rot(x) sin with
/// rot the interleaved pair rotation (-x1, x0, -x3, x2, ...) or, with hp.rope_half, (-x_{d/2..}, x_{..d/2}).
void rope_forward(float* qkv, const RopeTables& tab, const HParams& hp, int T, const int* patch_index);

/// rope_forward's backward (issue 44): dqkv (T, 3*inner), the gradient of the rotated queries and keys, becomes
/// that of their inputs in place, by the transpose rotation: x' = C x + S R x gives dx = C dx' + R^T S dx'
/// with R^T = -R (the prefix tokens' and the values' gradients pass unchanged).
void rope_backward(float* dqkv, const RopeTables& tab, const HParams& hp, int T, const int* patch_index);

}  // namespace attnmap
