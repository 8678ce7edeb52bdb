// attention_maps.hpp - from recorded attention probabilities to a map over the patch grid.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/vit.hpp"

namespace attnmap {

/// How heads are combined: one head, or the element-wise mean / max / min over heads.
struct HeadSelect {
  enum class Fusion { Index, Mean, Max, Min } fusion = Fusion::Mean;
  int index = 0;  ///< with Fusion::Index; negative counts from the end
};

/// Parses "mean" | "max" | "min" | an integer head index. Throws attnmap::Error otherwise.
HeadSelect parse_head(const std::string& s);

/// A head selection's name: "mean" | "max" | "min", or `index_prefix` followed by the index
/// (e.g. "head 3" for a tile label, "h3" in eval's view names).
std::string fusion_name(const HeadSelect& sel, const std::string& index_prefix);

/// Combines per-head rows (H, n) into one row (n) as `sel` says. Throws attnmap::Error for a head index
/// outside [-H, H).
std::vector<float> fuse_heads(const float* rows, int H, int n, const HeadSelect& sel);

/// The class token's attention over the patch tokens at `layer` (already resolved, 0-based): row 0 of
/// softmax(QK^T/sqrt(d_k)), columns num_prefix..T-1, heads fused by `sel`, reshaped to (grid_h, grid_w)
/// row-major (row = patch row from the top). Values are probabilities as computed, not renormalised.
std::vector<float> class_attention_map(const ForwardResult& r, const HParams& hp, int layer, const HeadSelect& sel);

/// Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", ACL, sec. 3,
/// "attention rollout"): for each layer 0..last_layer, fuse heads (`sel`; the paper averages them),
/// optionally discard the smallest entries (`discard`, see discard_smallest), A_hat = (A + I) / 2 (the
/// residual connection), normalise each row to sum 1, and multiply from the first layer up:
/// R = A_hat_last ... A_hat_0. Needs r.attn (ForwardOptions::keep_full).
/// Returns R, shape (T, T); every row sums to 1. Throws attnmap::Error when r has no full matrices, the
/// layer was not computed or discard is outside [0, 1].
std::vector<float> attention_rollout(const ForwardResult& r, int last_layer, const HeadSelect& sel, double discard = 0.0);

/// Attention rollout one layer at a time, so that only (T, T) is kept (not every layer's (H, T, T)): feed the
/// probabilities of layers 0, 1, ... in order (e.g. from ForwardOptions::on_probs); rollout() is then
/// R = A_hat_l ... A_hat_0 over the layers added, exactly as attention_rollout computes it.
class RolloutAccumulator {
 public:
  /// T tokens, H heads, heads fused by `sel`, discard fraction in [0, 1] (throws attnmap::Error otherwise).
  RolloutAccumulator(int T, int H, const HeadSelect& sel, double discard = 0.0);
  /// Multiplies in one layer's probabilities `probs` (H, T, T).
  void add_layer(const float* probs);
  /// R (T, T); the identity before any layer.
  const std::vector<float>& rollout() const { return R_; }
  int layers() const { return layers_; }

 private:
  int T_, H_, layers_ = 0;
  HeadSelect sel_;
  double discard_;
  std::vector<float> R_, next_;
};

/// The `--discard F` step of rollout, in place on one fused (T, T) attention matrix: among the entries that
/// are neither in row 0 nor in column 0 (the class token's own attention and the attention paid to it) nor on
/// the diagonal - n = (T-1)(T-2) entries - the floor(F * n) smallest are set to 0 (ties: lower row-major index
/// first). This is the head-fusion "discard_ratio" of Gildenblat's vit-explain, with every class-token
/// entry protected rather than only (0, 0). Throws attnmap::Error for F outside [0, 1].
void discard_smallest(float* m, int T, double frac);

/// DINO's thresholded attention (Caron et al. 2021, facebookresearch/dino visualize_attention.py): the
/// values `a` (n) are sorted ascending, normalised to sum 1 and accumulated; an entry is kept when the
/// cumulative mass up to and including it exceeds 1 - T. So the kept set is the smallest set of largest
/// entries whose mass reaches T (ties: the lower index counts as smaller). Returns n flags (1 kept, 0 not).
/// Throws attnmap::Error for T outside (0, 1], or when the values do not have a positive finite sum.
std::vector<uint8_t> threshold_mask(const float* a, int n, float threshold);

/// The class token's row of a (T, T) matrix (e.g. a rollout) over the patch tokens, as (grid_h, grid_w); for
/// a model without a class token the mean of the patch tokens' rows (query_row, model/vit.hpp).
std::vector<float> class_row_map(const std::vector<float>& m, const HParams& hp, int T);

/// Which line of an attention matrix a map is read from (issue 27): a query token's row (what the token
/// attends to), a key patch's column over the query patches (what attends to that patch), or the column
/// means over every query token (the attention each patch receives).
struct TokenLine {
  enum class Kind { Row, Column, ColumnMean };
  Kind kind = Kind::Row;
  int token = 0;  ///< Row: the query token, Column: the key token; index into the T tokens (prefix first)
};

/// One line of each head of `m` (H, T, T) as `line` says, fused over heads by `sel`, over the patches: a map
/// (grid_h, grid_w). Row: m[h, token, num_prefix + j]; Column: m[h, num_prefix + i, token]; ColumnMean:
/// (1/T) sum_i m[h, i, num_prefix + j] (every query, prefix tokens included). A rollout (T, T) is H = 1.
/// Fusion of the column means is the fusion of the heads' means (mean commutes; max / min are per head).
/// Throws attnmap::Error for a token outside [0, T) or T != hp.tokens().
std::vector<float> token_line_map(const float* m, int H, int T, const HParams& hp, const TokenLine& line,
                                  const HeadSelect& sel);

/// Summary statistics of a map (grid_h, grid_w), for the batch manifest.
struct MapStats {
  float max = 0.0f;      ///< largest value, as computed (not renormalised)
  int argmax_row = 0;    ///< patch row of the largest value (first one in row-major order on ties)
  int argmax_col = 0;    ///< patch column of the largest value
  double entropy = 0.0;  ///< Shannon entropy in nats of the map renormalised to sum 1: -sum p ln p, 0 ln 0 = 0;
                         ///< ln(grid_h*grid_w) for a uniform map, 0 when all mass is on one patch
  bool entropy_valid = false;  ///< false when the map's sum is not positive and finite (entropy undefined)
  /// The map's contrast: its maximum over its mean over the patches (peak_to_mean: 1 for a uniform map, the
  /// peak over the value every patch would have if the attention were spread evenly); 0 when the mean is not
  /// positive or a value is not finite (no contrast to speak of).
  double max_over_mean = 0.0;
  /// 0 < max_over_mean < kFlatMaxOverMean: the map is nearly uniform (see is_flat_contrast).
  bool flat() const;
};

/// A map whose maximum is less than this times its mean is "flat" (nearly uniform): the threshold attnmap
/// eval uses for its flat views (engine/eval/eval_parts.hpp kFlatPeakToMean; a test checks they agree). A random-weight
/// ViT's class-token maps sit at 1.02-1.2; a trained model's mostly well above 1.5.
inline constexpr double kFlatMaxOverMean = 1.25;

/// Whether a contrast max/mean (MapStats::max_over_mean) is flat: 0 < c < kFlatMaxOverMean.
inline bool is_flat_contrast(double c) { return c > 0.0 && c < kFlatMaxOverMean; }

/// Max, argmax (row, column), entropy and max/mean of a (grid_h, grid_w) map. Throws attnmap::Error when
/// map.size() != grid_h * grid_w or the map is empty.
MapStats map_statistics(const std::vector<float>& map, int grid_h, int grid_w);

}  // namespace attnmap
