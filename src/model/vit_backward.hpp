// vit_backward.hpp - the gradient of one class logit through the ViT, for class-specific explanation maps.
// A forward pass that keeps every activation the backward needs (one image at a time), and a native backward
// in the style of llm.c's (layernorm, linear, GELU / GELU-tanh / QuickGELU / SwiGLU, softmax / attention, q/k
// norms, rotary positions, LayerScale, the classifier head and the final norm; one block's in
// vit_backward_block.cpp). Only activation gradients are computed, never weight gradients: the maps need dlogit/dA
// and dlogit/d(activations), and skipping dW halves the matrix products.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "checkpoint/weights.hpp"

namespace attnmap {

/// What the backward pass needs from one block's forward, for one image (T tokens, D width, H heads,
/// inner = H*dk, M = MLP width).
struct BlockTape {
  std::vector<float> x_in;              ///< (T, D) block input (the residual stream), LN1's input
  std::vector<float> ln1_mean, ln1_rstd;  ///< (T) LN1 statistics; empty without norm1
  std::vector<float> ln1_out;           ///< (T, D) LN1 output = the qkv input (Grad-CAM's activation)
  std::vector<float> qkv;               ///< (T, 3*inner) [Q | K | V] as attention uses them (after q/k norms, rope)
  std::vector<float> qkv_lin;           ///< (T, 3*inner) the qkv linear's output, the q/k norms' input; qk_norm only
  std::vector<float> qk_mean, qk_rstd;  ///< (2, T*H) q/k norm statistics [queries; keys], row t*H + h; qk_norm only
  std::vector<float> probs;             ///< (H, T, T) attention probabilities softmax(QK^T/sqrt(dk) [+ bias])
  std::vector<float> x_mid;             ///< (T, D) after the attention residual, LN2's input
  std::vector<float> ln2_mean, ln2_rstd;  ///< (T)
  std::vector<float> pre_gelu;          ///< (T, M) fc1 output before the activation; (T, 2M) [gate | x] with SwiGLU
  std::vector<float> hid;               ///< (T, M) the activation's output, mlp.norm's input; with mlp.norm only
  std::vector<float> mlpn_mean, mlpn_rstd;  ///< (T) mlp.norm statistics; with mlp.norm only
};

struct CaitTape;  // model/cait.hpp: a CaiT model's tape (class-attention and talking-heads blocks)

/// One image's forward pass through every block, the final norm and the classifier head, with the
/// activations kept: per block 6*T*D + T*M + H*T*T floats (ViT-B/16 at 224: about 7.3 MB a block).
struct ForwardTape {
  int tokens = 0, dim = 0, heads = 0, head_dim = 0, mlp = 0;
  std::vector<BlockTape> blocks;
  std::vector<float> x_final;                 ///< (T, D) last block's output, the final norm's input
  std::vector<float> fin_mean, fin_rstd;      ///< (T) final norm statistics; empty without a final norm
  std::vector<float> logits;                  ///< (C) as vit_forward: DeiT distilled = mean of both heads
  std::shared_ptr<const CaitTape> cait;       ///< CaiT (hp.class_attn_blocks > 0): its own tape (model/cait.hpp)
  // The head's pooling (model/vit.cpp pooled_forward; issue 44), from the final-normed tokens fin (T, D):
  std::vector<float> fin;                     ///< (T, D) the final norm's output, the pooling's input
  std::vector<float> pool_out;                ///< (D) the class token, the mean, or the MAP head's output
  std::vector<float> fc_mean, fc_rstd;        ///< (1) fc_norm statistics; empty without fc_norm
  std::vector<float> pooled;                  ///< (D) what the classifier / the texts read (after fc_norm)
  // SigLIP's attention-pool (MAP) head, hp.pool == Pool::Map (model/vit.cpp attention_pool_forward):
  std::vector<float> probe_q;                 ///< (D) the probe's query W_q latent + b_q
  std::vector<float> probe_kv;                ///< (T, 2D) [K | V] = fin W_kv^T + b_kv
  std::vector<float> probe_attn;              ///< (H, T) the probe's attention A_p
  std::vector<float> probe_y;                 ///< (D) [A_p,h V_h]_h, proj's input
  std::vector<float> probe_o;                 ///< (D) proj's output, the probe MLP's norm input
  std::vector<float> probe_mean, probe_rstd;  ///< (1) the probe norm's statistics
  std::vector<float> probe_pre;               ///< (M) the probe MLP's fc1 output before the activation
};

/// Options of vit_forward_tape. `edit_probs(layer, probs (H, T, T))` is called after each block's softmax and
/// before probs multiply V, so a test can perturb a probability (finite differences); null in normal use.
struct TapeOptions {
  std::function<void(int, float*)> edit_probs;
};

/// Runs one image (normalised (3, H, W), as vit_forward) through the whole model, keeping the activations.
/// A block's relative position bias (BEiT) is added to its scores as in vit_forward; being constant in the
/// input, it leaves the backward of the scores as it is.
/// The numbers are vit_forward's (same layer functions, same order). Throws attnmap::Error for a model the
/// backward does not cover: the seed layout (no residual MLP blocks) or no classifier head.
ForwardTape vit_forward_tape(const ViTWeights& w, const float* image, const TapeOptions& opt = {});

/// Why the class-specific maps (Chefer relevance, Grad-CAM, attention x gradient) cannot be computed for a
/// model with these hyper-parameters: "" when they can; otherwise the reason, e.g. "the model has no
/// classifier head, so there is no class to explain", or a block variant the backward pass does not
/// differentiate ("its classifier reads the mean of the patch tokens"). The callers add the view's name.
std::string explanations_unavailable(const HParams& hp, bool has_head);

/// Which query the class-specific maps follow where the logit reads no class-token row (issue 44; written
/// down in docs/explain.md): the class token (ViT, DeiT, CLIP, BEiT with a class-token head), the mean over the
/// patch queries (a classifier on the mean of the patch tokens, timm global_pool='avg': the relevance each patch
/// receives), the mean over every token's query (vit-pytorch pool='mean'), the attention-pool probe (SigLIP's
/// MAP head: its attention row, gradient-weighted, starts the relevance), or CaiT's class token, the only query
/// of its class-attention blocks (below them, the patch queries of the self-attention blocks).
enum class ExplainQuery { ClassToken, PatchMean, TokenMean, Probe, CaitClassToken };

/// The query of hp's model (by hp.pool and hp.class_attn_blocks).
ExplainQuery explain_query(const HParams& hp);

/// What a figure's title adds to a class-specific view for q: "" for the class token, else e.g. "patch-query
/// mean", "pool-probe query" (maps/views.cpp describe_kind).
std::string explain_query_words(ExplainQuery q);

/// The same from tokens x0 (T, D) as they enter block 0 (embed_tokens' output).
ForwardTape vit_forward_tape_tokens(const ViTWeights& w, const float* x0, const TapeOptions& opt = {});

/// What the backward reports.
struct BackwardOptions {
  int lowest_layer = 0;  ///< run the backward down to this block (0: all); later blocks are always done
  /// Called for every block from the last down to lowest_layer with (layer, probs (H, T, T), dprobs (H, T, T)),
  /// dprobs = dlogit/dA for that block's probabilities. Pointers valid during the call only.
  std::function<void(int, const float*, const float*)> on_attn_grad;
  int ln1_layer = -1;    ///< >= 0: keep that block's LN1 output gradient in BackwardResult::ln1_grad
  bool input_grad = false;  ///< keep dlogit/dx0 (the tokens entering block 0) in BackwardResult::x0_grad
  /// With a MAP head (hp.pool == Pool::Map), called once before the blocks with the probe's attention A_p (H, T)
  /// and dlogit/dA_p (H, T) (the start of Chefer's relevance through the probe, maps/explain.cpp).
  std::function<void(const float*, const float*)> on_probe_grad;
};

struct BackwardResult {
  std::vector<float> ln1_grad;  ///< (T, D) dlogit/d(LN1 output) at ln1_layer (with norm1 absent: d(block input))
  std::vector<float> x0_grad;   ///< (T, D) dlogit/dx0, with input_grad and lowest_layer 0
};

/// Backward of the logit of `target_class` (0-based index into the head's C outputs) from the tape: the
/// target is one-hot on that logit, as Chefer et al.'s and pytorch-grad-cam's ClassifierOutputTarget. The
/// logit is head(norm(x)[0]) (timm global_pool='token', HF ViTForImageClassification, torchvision heads on
/// the class token), for DeiT distilled (head(norm(x)[0]) + head_dist(norm(x)[1])) / 2 (timm at inference);
/// in general head(fc_norm(pool(norm(x)))) as timm's forward_head (pool: the class token, the mean of the patch
/// or of every token, SigLIP's MAP head), or with texts the image-text logit of text target_class (CLIP, SigLIP).
/// Throws attnmap::Error for a class out of range or a lowest_layer / ln1_layer outside the blocks.
BackwardResult vit_backward(const ViTWeights& w, const ForwardTape& tape, int target_class,
                            const BackwardOptions& opt);

// ---- layer backwards (llm.c style: din, dout, saved inputs, weights, dims); each accumulates into din ----

/// din (M, D) += dLayerNorm/dx^T dout for y = (x - mean) * rstd * weight + bias (llm.c layernorm_backward,
/// without the weight / bias gradients). mean, rstd (M) from the forward.
void layernorm_backward(float* din, const float* dout, const float* in, const float* weight, const float* mean,
                        const float* rstd, int M, int D);

/// In place: d (n) *= GELU'(x) for exact GELU x * Phi(x): GELU'(x) = Phi(x) + x * phi(x).
void gelu_backward(float* d, const float* x, size_t n);

/// In place: d (n) *= GELU-tanh'(x) for 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) (timm
/// GELUTanh, torch approximate='tanh'): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'(x).
void gelu_tanh_backward(float* d, const float* x, size_t n);

/// SwiGLU backward: dpre (T, 2M) = [dx1 | dx2] from dhid (T, M) for hid = silu(x1) * x2, [x1 | x2] = pre
/// (T, 2M) (timm SwiGLUPacked / GluMlp gate first, DINOv2 w12): dx1 = dhid x2 silu'(x1), dx2 = dhid silu(x1).
void swiglu_backward(float* dpre, const float* dhid, const float* pre, int T, int M);

/// In place: d (n) *= QuickGELU'(x) for x * sigmoid(1.702 x) (OpenAI CLIP): s + 1.702 x s (1 - s).
void quick_gelu_backward(float* d, const float* x, size_t n);

/// Attention backward on one image: from dout (T, H*dk) and the forward's qkv (T, 3*H*dk) and probs (H, T, T),
/// writes dprobs (H, T, T) = dlogit/dA and dqkv (T, 3*H*dk) = [dQ | dK | dV]. Softmax backward:
/// dS = A * (dA - rowsum(dA * A)); S = scale * Q K^T gives dQ = scale dS K, dK = scale dS^T Q; dV = A^T dout.
void attention_backward(float* dqkv, float* dprobs, const float* dout, const float* qkv, const float* probs,
                        int T, int H, int dk);

}  // namespace attnmap
