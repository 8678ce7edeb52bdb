// cait.hpp - CaiT's forward pass (Touvron et al. 2021, "Going deeper with Image Transformers"; timm
// cait.py): talking-heads self-attention blocks over the patches only, then class-attention blocks in which
// the class token alone attends over [class; patches]; vit_forward runs it for a model with
// hp.class_attn_blocks > 0.
//
// How ForwardResult holds a CaiT model's attention (so that --layer indexes every block, the maps read
// cls_attn the same way for every layout, and the patch columns are always 1..N):
//   T = 1 + N in every block, token 0 the class token, tokens 1..N the patches in grid order.
//   Self-attention block l (0 <= l < depth - class_attn_blocks): what is recorded is the talking-heads
//     SOFTMAX output, P_g = softmax_j(sum_h proj_l[g, h] S_h + b_l[g]) with S_h = Q_h K_h^T / sqrt(d_k), one
//     probability distribution per row (the tensor timm's attention-extraction conventions hook as the
//     softmax; the mixed weights proj_w(P) that multiply V are not probabilities and are not recorded). The
//     class token is not in these blocks: its row and column are zero; cls_attn[l] holds the mean of the N
//     patch queries' rows (query_row, as for a model without a class token), so its patch columns sum to 1.
//   Class-attention block l (the last class_attn_blocks): cls_attn[l] is the class token's row
//     softmax(q_cls K^T / sqrt(d_k)) over [class; patches] (column 0: the class token's attention to
//     itself); with keep_full / on_probs the (T, T) matrix has that row 0 and zero rows 1..N (the patches are
//     no queries there).
//   The default view (no --layer, -1) is thus the last class-attention block's class attention.
#pragma once
#include <string>
#include <vector>

#include "model/vit.hpp"

namespace attnmap {

/// CaiT's forward on B images, honouring every ForwardOptions field as vit_forward does (last_layer,
/// keep_full, on_probs, on_tokens: x (T, D) = [class token as it stands; patches], to_end, keep_patches*).
/// Tokens: [class token; patches + pos_embed] (embed_tokens with pos_prefix 0); self-attention blocks on the
/// patches: x += gamma_1 * proj(talking_heads(LN1(x))); x += gamma_2 * mlp(LN2(x)); class-attention blocks:
/// u = [cls; x]; cls += gamma_1 * proj(class_attention(LN1(u))); cls += gamma_2 * mlp(LN2(cls)); then
/// norm([cls; x]) and the head on the class token (or the mean of the patches for pool 'avg').
/// Throws attnmap::Error for a layer out of range or bad keep lists.
std::vector<ForwardResult> cait_forward(const ViTWeights& w, const std::vector<const float*>& images,
                                        const ForwardOptions& opt);

/// timm TalkingHeadAttn on one image. qkv (N, 3*H*dk) = [Q | K | V], heads contiguous in each;
/// proj_l, proj_w (H, H) with bias. probs (H, N, N) receives P_g = softmax(sum_h Wl[g,h] S_h + bl[g]),
/// S_h = Q_h K_h^T / sqrt(dk); out (N, H*dk) receives (sum_h Ww[g,h] P_h + bw[g]) V_g per head g.
/// (Shazeer et al. 2020, "Talking-Heads Attention", eq. in section 4.)
void talking_heads_forward(float* out, float* probs, const float* qkv, const LinearW& proj_l, const LinearW& proj_w,
                           int N, int H, int dk);

/// timm ClassAttn on one image. qkv (T, 3*H*dk) = [Q | K | V] of the tokens [class; patches] (only row 0's
/// query is read); probs (H, T) receives softmax(q_cls,h K_h^T / sqrt(dk)); out (H*dk) the class token's
/// attention output sum_t probs_h[t] V_h[t] per head.
void class_attention_forward(float* out, float* probs, const float* qkv, int T, int H, int dk);

/// What figures and messages call block l (0-based, as --layer counts) plus `base`: "block 4", or for a CaiT
/// class-attention block "class-attention block 4".
std::string block_name(const HParams& hp, int l, int base = 0);

/// Why a view that needs every block's (T, T) self-attention with the class token in it (attention rollout,
/// a token query) cannot be computed for this model: "" for any model but CaiT.
std::string cait_rollout_unavailable(const HParams& hp);

}  // namespace attnmap
