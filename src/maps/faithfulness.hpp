// faithfulness.hpp - figures that say whether a map means anything: baselines a map must beat (centre
// prior, random map), the perturbation test (Chefer et al. 2021, sec. 4), and the model-randomisation
// sanity check (Adebayo et al. 2018). Pure functions over maps, masks and the forward pass.
#pragma once
#include <cstdint>
#include <vector>

#include "maps/evaluate.hpp"
#include "model/vit.hpp"

namespace attnmap {

/// The centre prior (the standard saliency baseline, e.g. Judd et al. 2009's centre bias): an isotropic
/// Gaussian exp(-r^2 / (2 sigma^2)) centred on the image, r the distance of a pixel's centre (x + 0.5,
/// y + 0.5) from (width / 2, height / 2), sigma = sigma_frac * min(width, height). Returns (height, width),
/// maximum 1. Throws attnmap::Error for a non-positive size or sigma_frac.
std::vector<float> centre_prior_map(int width, int height, double sigma_frac = 0.25);

/// The brightness baseline: the photo's luma as the map, no model. Y = 0.2126 R + 0.7152 G + 0.0722 B
/// (ITU-R BT.709 luma coefficients) on the decoded 8-bit values as stored (gamma-encoded, not linearised),
/// per pixel. Returns (height, width), values in [0, 255]; an all-black photo gives a map of 1s (uniform),
/// so that its energy is defined. Throws attnmap::Error for an empty image.
std::vector<float> brightness_map(const Image& photo);

/// The expected pointing-game score of a random map (its maximum equally likely at any pixel): the share of
/// pixels that count as a hit, |mask dilated by a disc of tolerance_px| / (width * height). With tolerance 0
/// this is mask_area_share. Throws attnmap::Error for tolerance_px < 0.
double random_pointing_expectation(const Mask& mask, int tolerance_px = 0);

/// Spearman's rank correlation of two equally long vectors: the Pearson correlation of their ranks, ties
/// given the mean of the ranks they span (as scipy.stats.spearmanr). When a vector is constant the
/// correlation is undefined: 1 when both are constant, else 0. Throws attnmap::Error for different sizes or
/// fewer than 2 values.
double spearman(const std::vector<float>& a, const std::vector<float>& b);

/// Area under a curve by the trapezoid rule: sum over i of (x[i+1] - x[i]) (y[i] + y[i+1]) / 2, as
/// numpy.trapz / sklearn.metrics.auc. Throws attnmap::Error for different sizes.
double trapezoid_auc(const std::vector<double>& x, const std::vector<double>& y);

/// The order in which the perturbation test removes patches: indices 0..n-1 of `map` by decreasing value
/// (positive = true: most relevant first) or increasing value (negative), ties by lower index first.
std::vector<int> removal_order(const std::vector<float>& map, bool positive);

/// A random removal order: the permutation of 0..n-1 made by a Fisher-Yates shuffle driven by
/// std::mt19937_64(seed) (the same on every platform).
std::vector<int> random_order(int n, uint64_t seed);

/// How a removed patch leaves the model's input.
enum class PerturbMode {
  Drop,  ///< the patch token leaves the sequence (ForwardOptions::keep_patches; its position row with it)
  Zero,  ///< its pixels are set to 0 before normalisation (black), as Chefer et al.'s perturbation code
         ///< does (the input becomes (0 - mean) / std there); the token count stays
};

/// The steps of the perturbation test: removed fractions 0, 0.1, ..., 0.9 (10 values; Chefer et al.'s
/// steps 0.1..0.9 plus the unperturbed image).
std::vector<double> perturbation_fractions();

/// Patches removed at fraction step i (0..9) out of n: floor(n * i / 10) (Chefer et al.: int(size * step)).
int removed_at_step(int n, int step);

/// The perturbation curve of one image: for each step i of perturbation_fractions, the first
/// removed_at_step(N, i) patches of `order` (N = grid_w * grid_h entries, a permutation) are removed as
/// `mode` says, the model is run to its logits, and the softmax probability of class `target` recorded (a
/// model whose zero_shot.rule is ScoreRule::sigmoid, SigLIP's texts: the target's own sigmoid).
/// Step 0 is `unperturbed` (the caller's probability on the whole image, not recomputed). `chw` is the
/// normalised (3, image_h, image_w) input. Returns 10 probabilities. Throws attnmap::Error when the model
/// has no head, target is out of range or order is not a permutation of 0..N-1.
std::vector<double> perturbation_curve(const ViTWeights& model, const float* chw, const std::vector<int>& order,
                                       PerturbMode mode, int target, double unperturbed);

/// perturbation_curve for several removal orders of one image at once: each step runs one batched forward
/// pass over all orders (the same token count for each). Returns one curve per order, identical to
/// perturbation_curve's.
std::vector<std::vector<double>> perturbation_curves(const ViTWeights& model, const float* chw,
                                                     const std::vector<std::vector<int>>& orders, PerturbMode mode,
                                                     int target, double unperturbed);

/// A copy of `model` whose blocks from_block..depth-1 are re-initialised (Adebayo et al. 2018, "Sanity
/// Checks for Saliency Maps", cascading randomisation from the top): every tensor of those blocks (weights,
/// biases, LayerNorm and LayerScale parameters) is replaced by Gaussian values with that tensor's own mean
/// and standard deviation (so scales are kept; a constant tensor stays constant), from
/// std::mt19937_64(seed + block) with a Box-Muller transform. Embedding, final norm and head are kept.
/// Throws attnmap::Error when from_block is outside 0..depth.
ViTWeights randomise_blocks(const ViTWeights& model, int from_block, uint64_t seed);

}  // namespace attnmap
