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
#include "model/vit_backward.hpp"

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
/// S_h = Q_h K_h^T / sqrt(dk); out (N, H*dk) receives (sum_h Ww[g,h] P_h + bw[g]) V_g per head g; weights
/// (H, N, N), when not null, the mixed weights W_g = sum_h Ww[g,h] P_h + bw[g] that multiply V (the backward's).
/// (Shazeer et al. 2020, "Talking-Heads Attention", eq. in section 4.)
void talking_heads_forward(float* out, float* probs, const float* qkv, const LinearW& proj_l, const LinearW& proj_w,
                           int N, int H, int dk, float* weights = nullptr);

/// timm ClassAttn on one image. qkv (T, 3*H*dk) = [Q | K | V] of the tokens [class; patches] (only row 0's
/// query is read); probs (H, T) receives softmax(q_cls,h K_h^T / sqrt(dk)); out (H*dk) the class token's
/// attention output sum_t probs_h[t] V_h[t] per head.
void class_attention_forward(float* out, float* probs, const float* qkv, int T, int H, int dk);

/// What figures and messages call block l (0-based, as --layer counts) plus `base`: "block 4", or for a CaiT
/// class-attention block "class-attention block 4".
std::string block_name(const HParams& hp, int l, int base = 0);

/// Why a view that needs every block's (T, T) attention over every token with the class token in it (attnmap
/// stats) cannot be computed for this model: "" for any model but CaiT (the explorer marks absent what a CaiT
/// block lacks: engine/explore.cpp). (Rollout and token
/// queries have their CaiT definitions: cait_line_unavailable.)
std::string cait_rollout_unavailable(const HParams& hp);

/// Which line of CaiT's attention a view reads: no query written (Default), q=cls (ClassRow), a query patch's
/// row (PatchRow: q=r<row>c<col> or q=x<x>y<y>), a key patch's column (KeyColumn: k=r<row>c<col>), the column
/// means (Received).
enum class CaitLine { Default, ClassRow, PatchRow, KeyColumn, Received };

/// Why an attention view (rollout false) or a rollout (rollout true) ending at block `layer` cannot read
/// `line` of a CaiT model (docs/explain.md "CaiT"): "" when it can, and for any model but CaiT. Attention at a
/// self-attention block: patch rows and key columns (the default row is the patch queries' mean; there is no
/// class row); at a class-attention block: the class row only (the patches are no queries there). Rollout
/// (through the self-attention blocks over the patches, then the class rows): ending at a class-attention
/// block every line; ending at a self-attention block every line but the class row (the class token has not
/// attended to anything yet). The column means of an attention view are refused (no block has every token as
/// a query).
std::string cait_line_unavailable(const HParams& hp, bool rollout, int layer, CaitLine line);

/// cait_forward's recording of one block of image b into r (see the top of this file): sa: probs (H, N, N),
/// the talking-heads softmax output of a self-attention block; else probs (H, T) a class-attention block's
/// class rows. tt: scratch for the (H, T, T) matrices (keep_full / on_probs).
void cait_record(ForwardResult& r, const float* probs, bool sa, int l, int H, int T, const ForwardOptions& opt, int b,
                 std::vector<float>& tt);

// ---- the backward (model/cait_backward.cpp; issue 44): class-specific maps for CaiT ----

/// What CaiT's backward needs of one image's forward, hung on ForwardTape::cait. Per block l a BlockTape over
/// that block's own rows: a self-attention block's over the N patches (x_in, ln1_*, ln1_out (N, D), qkv
/// (N, 3*inner), probs (H, N, N) the talking-heads softmax P, x_mid, ln2_*, pre_gelu (N, M)); a class-attention
/// block's x_in = u = [cls; patches] (T, D), ln1_* (T), ln1_out (T, D), qkv (T, 3*inner), probs (H, T) the class
/// rows, x_mid (1, D) the class token after the attention residual, ln2_* (1), pre_gelu (1, M).
struct CaitTape {
  int patches = 0;                          ///< N
  std::vector<BlockTape> blocks;            ///< depth blocks, as above
  std::vector<std::vector<float>> weights;  ///< per self-attention block (H, N, N): proj_w(P), the A that multiplies V
  std::vector<float> cls_attn;              ///< (depth, H, T) the drawn rows, as cait_forward records them
  std::vector<float> x_final;               ///< (T, D) [class token; patches] after the last block, the norm's input
  std::vector<float> fin_mean, fin_rstd;    ///< (T) final norm statistics
};

/// vit_forward_tape for CaiT from its tokens x0 (T, D) = embed_tokens' [class token; patches + pos_embed]. The
/// generic ForwardTape fields: tokens T = 1 + N, dim, heads, head_dim, logits, and blocks[l].probs (H, T, T)
/// only: the matrices cait_forward records with keep_full (rollout and token queries read them); the rest is
/// in tape.cait. Throws attnmap::Error for TapeOptions::edit_probs (not supported) or a model without a head.
ForwardTape cait_forward_tape_tokens(const ViTWeights& w, const float* x0, const TapeOptions& opt);

/// vit_backward for a CaiT tape (tape.cait set): the logit head(norm([cls; patches])[0]) of target_class back
/// through the class-attention blocks (class query only; the patches' keys and values), then the talking-heads
/// self-attention blocks (proj_w, softmax, proj_l) over the patches. What it reports is laid out over the T
/// tokens as the generic backward's: on_attn_grad gets (l, A (H, T, T), dA (H, T, T)) with, for a
/// self-attention block, A = proj_w(P), the weights that multiply V, in rows / columns 1..N (class row and
/// column zero), and for a class-attention block the class rows in row 0 (rows 1..N zero); ln1_grad (T, D):
/// a self-attention block's row 0 zero; x0_grad (T, D) = d[class token; patches + pos_embed].
/// Throws attnmap::Error as vit_backward does.
BackwardResult cait_backward(const ViTWeights& w, const ForwardTape& tape, int target_class, const BackwardOptions& opt);

}  // namespace attnmap
