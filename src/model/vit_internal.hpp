// vit_internal.hpp - what the model stage's forward passes share (vit.cpp, and CaiT's in cait.cpp), and the
// taped forward / backward's pieces (vit_backward.cpp, vit_backward_block.cpp); not for other stages.
#pragma once
#include <vector>

#include "model/vit.hpp"
#include "model/vit_backward.hpp"

namespace attnmap {

/// B results of L layers of H heads over T tokens: cls_attn (L, H, T) and, with keep_full, attn (L, H, T, T),
/// zero-filled.
std::vector<ForwardResult> make_forward_results(int B, int L, int H, int T, bool keep_full);

/// mean, rstd (M) = the mean and 1/sqrt(var + eps) of each row of in (M, D), in double as layernorm_forward.
void layernorm_stats(float* mean, float* rstd, const float* in, int M, int D, float eps);

/// out (M, D) = layernorm_forward(in), with its statistics (M) into *mean, *rstd for the backward.
void layernorm_taped(float* out, std::vector<float>* mean, std::vector<float>* rstd, const float* in,
                     const LayerNormW& ln, int M, int D, float eps);

/// Block l's forward on one image (vit_forward's numbers: LN1, qkv, q/k norms, rope, attention with BEiT's
/// bias, proj or none, LayerScale, LN2, fc1, GELU / GELU-tanh / QuickGELU / SwiGLU, mlp.norm, fc2), x (T, D)
/// in / out, what the backward needs kept in bt (vit_backward_block.cpp).
void block_forward_taped(BlockTape& bt, float* x, const ViTWeights& w, int l, const TapeOptions& opt);

/// Block l's backward: dx (T, D) from dlogit/d(block output) to dlogit/d(block input), in place; calls
/// opt.on_attn_grad(l, probs, dprobs), keeps res.ln1_grad when l == opt.ln1_layer, and stops after the
/// attention's dprobs at opt.lowest_layer when nothing below is asked for.
void block_backward(float* dx, BackwardResult& res, const ViTWeights& w, const BlockTape& bt, int l,
                    const BackwardOptions& opt);

/// Throws attnmap::Error for a backward request outside the model's L blocks or C classes (vit_backward and
/// cait_backward): target_class not in 0..C-1, lowest_layer not in 0..L-1, ln1_layer below lowest_layer or >= L.
void check_backward_request(const ViTWeights& w, int L, int target_class, const BackwardOptions& opt);

}  // namespace attnmap
