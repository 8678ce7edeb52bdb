// attention_maps.hpp - from recorded attention probabilities to a map over the patch grid.
#pragma once
#include <string>
#include <vector>

#include "vit.hpp"

namespace attnmap {

/// How heads are combined: one head, or the element-wise mean / max / min over heads.
struct HeadSelect {
  enum class Fusion { Index, Mean, Max, Min } fusion = Fusion::Mean;
  int index = 0;  ///< with Fusion::Index; negative counts from the end
};

/// Parses "mean" | "max" | "min" | an integer head index. Throws attnmap::Error otherwise.
HeadSelect parse_head(const std::string& s);

/// Combines per-head rows (H, n) into one row (n) as `sel` says. Throws attnmap::Error for a head index
/// outside [-H, H).
std::vector<float> fuse_heads(const float* rows, int H, int n, const HeadSelect& sel);

/// The class token's attention over the patch tokens at `layer` (already resolved, 0-based): row 0 of
/// softmax(QK^T/sqrt(d_k)), columns num_prefix..T-1, heads fused by `sel`, reshaped to (grid_h, grid_w)
/// row-major (row = patch row from the top). Values are probabilities as computed, not renormalised.
std::vector<float> class_attention_map(const ForwardResult& r, const HParams& hp, int layer, const HeadSelect& sel);

/// Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", eq. for
/// rollout): for each layer 0..last_layer, fuse heads (`sel`), A_hat = (A + I) / 2, normalise each row to sum
/// 1, and multiply from the first layer up: R = A_hat_last ... A_hat_0. Needs r.attn (keep_full).
/// Returns R, shape (T, T); every row sums to 1. Throws attnmap::Error when r has no full matrices.
std::vector<float> attention_rollout(const ForwardResult& r, int last_layer, const HeadSelect& sel);

/// The class token's row of a (T, T) matrix (e.g. a rollout) over the patch tokens, as (grid_h, grid_w).
std::vector<float> class_row_map(const std::vector<float>& m, const HParams& hp, int T);

/// Summary statistics of a map (grid_h, grid_w), for the batch manifest.
struct MapStats {
  float max = 0.0f;      ///< largest value, as computed (not renormalised)
  int argmax_row = 0;    ///< patch row of the largest value (first one in row-major order on ties)
  int argmax_col = 0;    ///< patch column of the largest value
  double entropy = 0.0;  ///< Shannon entropy in nats of the map renormalised to sum 1: -sum p ln p, 0 ln 0 = 0;
                         ///< ln(grid_h*grid_w) for a uniform map, 0 when all mass is on one patch
  bool entropy_valid = false;  ///< false when the map's sum is not positive and finite (entropy undefined)
};

/// Max, argmax (row, column) and entropy of a (grid_h, grid_w) map. Throws attnmap::Error when
/// map.size() != grid_h * grid_w or the map is empty.
MapStats map_statistics(const std::vector<float>& map, int grid_h, int grid_w);

}  // namespace attnmap
