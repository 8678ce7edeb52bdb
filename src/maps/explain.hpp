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
///    same product, T^2 per block instead of T^3); the backward stops at first_block. Without a class-token
///    row (issue 44, vit_backward.hpp ExplainQuery) r starts from the query's row instead of e_0: the mean of
///    the patch rows (timm global_pool='avg': the relevance each patch receives through the pooled output), of
///    every row (vit-pytorch 'mean'), or for SigLIP's MAP head the probe's rule-5 row mean_h (dA_p * A_p)^+.
///  - Grad-CAM (Selvaraju et al., ICCV 2017) as pytorch-grad-cam does for ViTs: activations = output of block
///    gradcam_layer's norm1 over the patch tokens, weights w_c = mean over patch tokens of dlogit/dactivation_c,
///    map = ReLU(sum_c w_c activation_c).
///  - attn-grad: mean over heads of (dlogit/dA * A)^+ at block `layer`, class-token row; without one the mean
///    of the patch rows (a MAP head too: its probe is no row of the blocks) or, vit-pytorch 'mean', of every row.
/// Values as computed, not rescaled (pytorch-grad-cam and Chefer's notebook min-max scale for display; the
/// drawn overlay does too). Throws attnmap::Error for a class, layer or first block out of range, or a kind that
/// is not class-specific.
std::vector<float> explain_map(const ViTWeights& w, const ForwardTape& tape, int target_class,
                               const ExplainRequest& req);

/// explain_map for a CaiT model (tape.cait set; maps/explain_cait.cpp, docs/explain.md "CaiT"): Chefer from the
/// class token through the class-attention blocks (its row only), then the patches through the self-attention
/// blocks, A = the talking heads' proj_w(P) that multiplies V; attn-grad: the class row at a class-attention
/// block, the patch-query mean at a self-attention block; Grad-CAM: block layer's norm1 output over the patches.
std::vector<float> cait_explain_map(const ViTWeights& w, const ForwardTape& tape, int target_class,
                                    const ExplainRequest& req);

/// The rule-5 matrix of one block: Abar (T, T) = mean over H heads of max(dA * A, 0), from probs and dprobs
/// (H, T, T).
std::vector<float> chefer_block_matrix(const float* probs, const float* dprobs, int H, int T);

/// The same for Q query rows over T keys: (Q, T) from probs, dprobs (H, Q, T); Q = 1 for SigLIP's MAP probe
/// (its attention A_p (H, T) and dlogit/dA_p, vit_backward's on_probe_grad).
std::vector<float> chefer_block_matrix(const float* probs, const float* dprobs, int H, int Q, int T);

/// Chefer rule 6 on one row: r (T) <- r + r Abar for a block's Abar (T, T) (chefer_block_matrix), accumulated in
/// double, as r^T (I + Abar).
void chefer_step(std::vector<float>& r, const std::vector<float>& abar, int T);

}  // namespace attnmap
