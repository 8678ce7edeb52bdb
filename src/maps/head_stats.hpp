// head_stats.hpp - per-block, per-head statistics of a ViT's attention and per-token norms of its residual
// stream, as the papers report them: mean attention distance (Dosovitskiy et al. 2021, ViT, Fig. 7 and
// App. D.7), attention entropy, the class token's attention to itself and to the other prefix tokens, and the
// high-norm outlier tokens of the registers paper (Darcet et al. 2024, "Vision Transformers Need Registers",
// Fig. 3). Plain functions on one image's tensors; `attnmap stats` (engine/stats/stats.cpp) aggregates them.
// docs/stats.md states every definition.
#pragma once
#include <string>
#include <vector>

namespace attnmap {

/// The token layout the statistics read: T = num_prefix + grid_w * grid_h tokens, the patches row-major
/// after the prefix tokens (class, distillation, registers), patches `patch` pixels wide on the model input.
struct TokenLayout {
  int heads = 1;
  int num_prefix = 1;
  bool class_token = true;  ///< token 0 is a class token (false: no class-token statistics)
  int grid_w = 0, grid_h = 0;
  int patch = 16;
  int tokens() const { return num_prefix + grid_w * grid_h; }
  int patches() const { return grid_w * grid_h; }
};

/// (N, N), N = grid_w * grid_h: the distance in pixels of the model input between the centres of patch i and
/// patch j (row-major), patch * sqrt(dr^2 + dc^2) - the distance matrix of the public mean-attention-distance
/// code (Keras "Investigating ViT representations", timm/DINO notebooks).
std::vector<double> patch_distances(int grid_w, int grid_h, int patch);

/// One block's attention statistics of one image, one value per head (H).
struct BlockHeadStats {
  /// Mean attention distance in pixels: for each patch query i, sum over patch keys j of p(i, j) * d(i, j)
  /// (prefix keys dropped, the weights NOT renormalised over the patch keys), averaged over the patch
  /// queries. As the ViT paper's Fig. 7 and the Keras/timm notebooks compute it.
  std::vector<double> distance_px;
  /// Attention entropy in nats: -sum_j p(i, j) ln p(i, j) over every key j of the full row (prefix keys
  /// included, 0 ln 0 = 0), averaged over the patch queries i.
  std::vector<double> entropy;
  /// The class token's attention to itself, p(0, 0); empty without a class token.
  std::vector<double> cls_self;
  /// The class token's attention to the other prefix tokens, (H, num_prefix - 1): p(0, k), k = 1..P-1
  /// (distillation token, registers in token order); empty without a class token.
  std::vector<double> cls_prefix;
  /// The class token's attention summed over the patch keys, sum_j>=P p(0, j); empty without a class token.
  std::vector<double> cls_patches;
};

/// The statistics of one block from its probabilities `probs` (H, T, T) (rows = queries, each summing to
/// 1; model/vit.hpp ForwardOptions::on_probs), `dist` = patch_distances(lay.grid_w, lay.grid_h, lay.patch).
/// Throws attnmap::Error when dist's size does not match the layout.
BlockHeadStats block_head_stats(const float* probs, const TokenLayout& lay, const std::vector<double>& dist);

/// The L2 norm of each of T tokens of x (T, D) (the residual stream after a block: ForwardOptions::on_tokens),
/// accumulated in double. Into (T).
std::vector<float> token_norms(const float* x, int T, int D);

/// The high-norm outlier rule: a patch token is an outlier when its norm exceeds
/// median + k * 1.4826 * MAD of the norms given (the patch tokens of one image at one block); MAD = the
/// median of |norm - median|, 1.4826 * MAD the normal-consistent robust standard deviation. Returns the
/// threshold. The median of an even count is the mean of the two middle values (numpy.median). Throws
/// attnmap::Error for no norms.
double outlier_threshold(const std::vector<float>& norms, double k);

/// numpy.median of the values (the two middle values' mean for an even count). Throws attnmap::Error when
/// empty.
double median_of(std::vector<double> v);

/// Summary of one block's token norms of one image: the class token's (NaN without one), the registers'
/// mean (NaN without registers), the patch tokens' mean, median, max, the outlier threshold and count.
struct NormSummary {
  double cls = 0, registers = 0, patch_mean = 0, patch_median = 0, patch_max = 0, threshold = 0;
  int outliers = 0;
};

/// The summary of one block's norms (T) (token_norms) under the outlier rule with `k`.
NormSummary summarize_norms(const std::vector<float>& norms, const TokenLayout& lay, int num_registers, double k);

/// The names of the prefix tokens after the class token, in token order: "dist" for a distillation token,
/// "reg0", "reg1", ... for registers (the CSV's and JSON's column names).
std::vector<std::string> prefix_token_names(int num_dist, int num_registers);

}  // namespace attnmap
