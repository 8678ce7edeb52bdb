// explain.hpp - class-specific explanation maps from the backward pass (issue 19): Chefer et al.'s relevance,
// Grad-CAM on ViT tokens, and one layer's attention x gradient.
#pragma once
#include <string>
#include <vector>

#include "maps/view_kind.hpp"
#include "model/vit_backward.hpp"

namespace attnmap {

/// What to explain: the method (a class-specific ViewKind: its word, label and units are its row in
/// maps/views.cpp's table; its maths is its case in explain_map) and, 0-based, its block.
struct ExplainRequest {
  ViewKind method = ViewKind::Chefer;
  int layer = 0;  ///< attn-grad: the block whose attention x gradient is drawn; gradcam: the block whose
                  ///< norm1 output is the activation (timm blocks[L].norm1); chefer: unused
  /// chefer: the first block whose attention is accumulated (0: every block, Chefer et al.'s generic method;
  /// depth - 1: the last block only, the default of Chefer's CLIP notebook, CLIP_explainability.ipynb
  /// interpret(start_layer=-1)); the view `chefer@L<k>`
  int first_block = 0;
};

/// The map (grid_h, grid_w), row-major, over the patch tokens (columns num_prefix..T-1; the class,
/// distillation and register tokens are left out), for the logit of `target_class`:
///  - Chefer: Chefer, Gur & Wolf, "Generic Attention-model Explainability for Interpreting Bi-Modal and
///    Encoder-Decoder Transformers", ICCV 2021, rules 5-6: R = I (T x T); for each block b, first_block to last,
///    Abar_b = mean over heads of (dlogit/dA_b * A_b)^+ and R <- R + Abar_b R; the map is R's class-token row.
///    Computed as that row only: r = e_0^T (I + Abar_L) ... (I + Abar_first), from the last block down (the
///    same product, T^2 per block instead of T^3); the backward stops at first_block.
///  - Grad-CAM (Selvaraju et al., ICCV 2017) as pytorch-grad-cam does for ViTs: activations = output of block
///    gradcam_layer's norm1 over the patch tokens, weights w_c = mean over patch tokens of dlogit/dactivation_c,
///    map = ReLU(sum_c w_c activation_c).
///  - attn-grad: mean over heads of (dlogit/dA * A)^+ at block `layer`, class-token row.
/// Values as computed, not rescaled (pytorch-grad-cam and Chefer's notebook min-max scale for display; the
/// drawn overlay does too). Throws attnmap::Error for a class, layer or first block out of range, or a kind that
/// is not class-specific.
std::vector<float> explain_map(const ViTWeights& w, const ForwardTape& tape, int target_class,
                               const ExplainRequest& req);

/// The rule-5 matrix of one block: Abar (T, T) = mean over H heads of max(dA * A, 0), from probs and dprobs
/// (H, T, T).
std::vector<float> chefer_block_matrix(const float* probs, const float* dprobs, int H, int T);

}  // namespace attnmap
