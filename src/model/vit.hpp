// vit.hpp - the reference forward pass of a Vision Transformer (timm's VisionTransformer, pre-norm), and of
// the guide's single attention layer, recording the attention probabilities the maps are drawn from.
#pragma once
#include <functional>
#include <optional>
#include <vector>

#include "checkpoint/weights.hpp"

namespace attnmap {

struct ForwardOptions {
  int last_layer = -1;     ///< compute blocks 0..last_layer (negative counts from the end); later blocks skipped
  bool keep_full = false;  ///< keep every (H, T, T) probability matrix, not only the class token's rows
  /// Called with each image's full probabilities (H, T, T) of every computed layer, in layer order, as
  /// on_probs(image index b, layer l, probs); lets a caller consume them (e.g. rollout) without keep_full's
  /// (L, H, T, T) storage. The pointer is valid during the call only.
  std::function<void(int, int, const float*)> on_probs;
  /// Called after each computed block with one image's residual stream x (T, D) as that block leaves it (before
  /// any final LayerNorm), as on_tokens(image index b, block l, x); the registers paper's token norms
  /// (Darcet et al. 2024, Fig. 3). When set, the blocks up to last_layer run in full (attention and MLP).
  /// The pointer is valid during the call only. Unset: no cost. Not called for the seed layout (no blocks).
  std::function<void(int, int, const float*)> on_tokens;
  bool to_end = false;     ///< run every block and the final LayerNorm (tokens, classifier logits)
  /// Token dropping (Chefer et al. 2021's perturbation test): when set, only these patch tokens (0-based
  /// row-major grid indices, strictly increasing, each < grid_w * grid_h; may be empty) stay in the
  /// sequence. They are cut *after* the position embedding is added, so each kept patch keeps its own
  /// position; the prefix tokens (class, distillation, registers) always stay. Attention then runs over
  /// T' = num_prefix + keep_patches.size() tokens, and ForwardResult::tokens is T'. A relative position bias
  /// (BEiT) is taken at the kept tokens' rows and columns (their offsets on the full grid). Unset: every patch (the
  /// usual pass, unchanged). Refused (attnmap::Error) for a class token that is the mean of the patches.
  std::optional<std::vector<int>> keep_patches;
  /// Batched token dropping: one keep list per image (each as keep_patches; all of one length, since the
  /// images share one token count). When non-empty it is used instead of keep_patches and must have one
  /// entry per image (attnmap::Error otherwise).
  std::vector<std::vector<int>> keep_patches_each;
};

/// What one image's forward pass recorded. L = layers computed, H = heads, T = tokens (prefix + patches).
struct ForwardResult {
  int layers = 0, heads = 0, tokens = 0;
  /// (L, H, T): row 0 (the class token) of softmax(QK^T/sqrt(d_k)) per layer; for a model without a class
  /// token (hp.class_token false), the mean of the patch tokens' rows (query_row).
  std::vector<float> cls_attn;
  std::vector<float> attn;        ///< (L, H, T, T): all rows, only with keep_full
  std::vector<float> tokens_out;  ///< (T, D) after the final LayerNorm (timm) / (T, d_k) = weights.V (seed); to_end
  std::vector<float> logits;      ///< (C) classifier output on the pooled token (hp.pool; DeiT distilled: mean
                                  ///< with head_dist on the distillation token); to_end and a head present
  std::vector<float> pool_attn;   ///< (H, T) an attention-pool head's probe attention over the final tokens
                                  ///< (hp.pool == Pool::Map, timm AttentionPoolLatent); to_end
  /// (D) the pooled vector a head or the texts read (hp.pool, then fc_norm); to_end with a head, texts or an
  /// attention pool (SigLIP's image embedding: HF pooler_output, timm forward_head(pre_logits=True)); else empty.
  std::vector<float> pooled;
};

/// Runs B images through the model. `images[b]` is a normalised (3, H, W) tensor with H = hp.image_h,
/// W = hp.image_w. Linear layers run on all B*T tokens in one sgemm each; attention runs per image and head.
/// Throws attnmap::Error when last_layer is out of range.
std::vector<ForwardResult> vit_forward(const ViTWeights& w, const std::vector<const float*>& images,
                                       const ForwardOptions& opt);

/// One image; see the batched overload.
ForwardResult vit_forward(const ViTWeights& w, const float* image, const ForwardOptions& opt);

/// The tokens one image enters the first block with, x (T, D): [class token; distillation token; register
/// tokens; patch embeddings] plus the position embeddings (timm _pos_embed, DINOv2 prepare_tokens_with_masks
/// for registers without a position row). `image` is a normalised (3, hp.image_h, hp.image_w) tensor.
void embed_tokens(float* x, const ViTWeights& w, const float* image);

/// Readies loaded weights for a run, so that the run reads nothing more from a weights file viewed in place
/// (safetensors F32, Floats::view): every tensor but the linear layers' weight matrices is copied into memory
/// (biases, LayerNorms, tokens, position embeddings, LayerScale: small); each weight matrix is packed now for
/// the GEMM back-end (oneDNN: the packed copy replaces the file's pages), and copied into memory as well when
/// the back-end keeps no packed copy (OpenBLAS) or when `backward` (the explanations' backward pass multiplies
/// by the plain matrices). A weights file rewritten or truncated during a run then changes no later image and
/// cannot crash it (SIGBUS). With w.precision BF16 the blocks' weight matrices are packed in bfloat16 (the
/// patch embedding and the heads stay float32). Throws attnmap::Error when the back-end refuses a shape, and
/// for BF16 on a CPU without native bf16 kernels (bf16_supported), with `backward`, or for CaiT.
void prepare_weights(ViTWeights& w, bool backward);

/// CLIP zero-shot logits (issue 43), from the pooled vector (D) the classifier would read (the final-normed class
/// token: OpenAI ln_post(x[:, 0]), HF post_layernorm(pooler)): e = proj pooled (E), logits (N)[j] =
/// scale * <e / |e|, text[j]> + bias (CLIP.forward's logits_per_image; bias 0). SigLIP (no projection, hp.pool Map):
/// e = pooled, the attention-pool head's output (HF SiglipModel.forward: logit_scale.exp() * cos + logit_bias).
/// Throws attnmap::Error when neither w.proj nor an attention pool gives the embedding, or its width is not the
/// texts'.
void zero_shot_logits(float* logits, const ViTWeights& w, const float* pooled);

/// The gradient of zero-shot logit j with respect to the pooled vector, into dpooled (D) (overwritten):
/// d logit_j / d e = scale * (t_j - <e^, t_j> e^) / |e|, then through proj (proj^T).
void zero_shot_logit_grad(float* dpooled, const ViTWeights& w, const float* pooled, int j);

/// Resolves a possibly negative layer index against `depth`; throws attnmap::Error when out of range.
int resolve_layer(int layer, int depth);

// ---- layers (llm.c style: out, in, weights, dims) --------------------------------------------------------

/// out(M, D) = LayerNorm(in(M, D)) * weight + bias, biased variance, eps inside the square root.
void layernorm_forward(float* out, const float* in, const float* weight, const float* bias, int M, int D, float eps);

/// In place: each of M rows of length n becomes its softmax, computed stably (row max subtracted).
void softmax_rows(float* x, int M, int n);

/// Multi-head self-attention on one image.  qkv (T, 3*H*dk) = [Q | K | V], heads contiguous in each;
/// probs (H, T, T) receives softmax(Q_h K_h^T / sqrt(dk) + bias_h); out (T, H*dk) receives probs_h V_h per
/// head. (Vaswani et al. 2017, eq. 1.) bias: null, or (H, T, T) added to the scores before the softmax (BEiT's
/// relative position bias, Bao et al. 2022; timm beit.py Attention). precision BF16: Q, K, V and the
/// probabilities rounded to bfloat16 for the two products (float32 accumulation); probs stay float32.
/// probs may be null: the (T, T) matrices are then not stored, only each block of query rows' (at most 256 KiB, in
/// a thread's own buffer); rows0, when not null, receives row 0 of each head's probabilities (H, T). Tasks over
/// (head, block of query rows) on the pool, each computed alone: the bits never depend on the thread count.
void attention_forward(float* out, float* probs, const float* qkv, int T, int H, int dk, const float* bias = nullptr,
                       Precision precision = Precision::F32, float* rows0 = nullptr);

/// True when attention_forward runs `precision`'s products on the own kernels: float32, the own kernels chosen
/// (sgemm.hpp gemm_kernels()) and the CPU running them (AVX2 + FMA or AVX-512F).
bool own_attention_products(Precision precision);

/// row (T) = head h's scores of the class token (query row 0) against every key, Q_0 K_h^T / sqrt(dk), from one
/// image's qkv (T, 3*H*dk), before any bias or softmax: on the own kernels (own_attention_products(F32) must
/// hold), the same bits as row 0 of attention_forward's scores, the keys packed the same way. On the calling
/// thread.
void class_scores_row(float* row, const float* qkv, int T, int H, int dk, int h);

/// In place exact GELU: x * 0.5 * (1 + erf(x / sqrt(2))) (PyTorch nn.GELU(), approximate='none').
void gelu_forward(float* x, size_t n);

/// In place, the MLP's activation `act`: exact GELU, GELU's tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
/// x^3))) (nn.GELU(approximate='tanh')), or QuickGELU x * sigmoid(1.702 x) (OpenAI CLIP clip/model.py).
void activation_forward(float* x, size_t n, Activation act);

/// SwiGLU (Shazeer 2020; DINOv2 SwiGLUFFN): out (M rows, hidden) = silu(x1) * x2 where each row of
/// in (M, 2 * hidden) is [x1 | x2] (torch chunk(2, dim=-1)); silu(x) = x * sigmoid(x).
void swiglu_forward(float* out, const float* in, int M, int hidden);

/// The row drawn as "the" map from one head's probabilities p (T, T): row 0 (the class token's), or for a
/// model without a class token the mean of the rows first_patch..T-1 (each patch query's row; a probability
/// distribution again, the attention each token receives averaged over the patch queries). Into out (T).
void query_row(float* out, const float* p, int T, bool class_token, int first_patch);

}  // namespace attnmap
