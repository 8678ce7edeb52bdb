// clip_text.hpp - CLIP's text tower as OpenAI CLIP builds it (openai/CLIP clip/model.py: CLIP.__init__,
// CLIP.encode_text, CLIP.forward, build_model): the weights read from a state dict's names, the forward
// pass from token ids to text features, and the image-text logits. Issue 43, item 1 (OpenAI's layout only;
// no command uses it yet: docs/text.md "Text tower").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/weights.hpp"
#include "core/tensor.hpp"

namespace attnmap {

/// The text tower's hyper-parameters, each derived from the tensors' shapes as build_model does.
struct ClipTextHParams {
  int context_length = 0;  ///< positions C: positional_embedding.shape[0] (OpenAI: 77)
  int vocab_size = 0;      ///< V: token_embedding.weight.shape[0] (OpenAI: 49408)
  int width = 0;           ///< token width W: ln_final.weight.shape[0] (ViT-B: 512)
  int heads = 0;           ///< H = width // 64 (build_model's transformer_heads)
  int layers = 0;          ///< blocks: the number of transformer.resblocks.N indices
  int embed_dim = 0;       ///< E: text_projection.shape[1] (the joint image-text space)
  float eps = 1e-5f;       ///< LayerNorm eps (nn.LayerNorm's default; clip/model.py LayerNorm)
  /// <|endoftext|>'s id: the highest id, vocab_size - 1 (49407 in OpenAI's vocabulary), which is why
  /// encode_text can find it with argmax.
  int eot_id() const { return vocab_size - 1; }
  int head_dim() const { return heads > 0 ? width / heads : 0; }
};

/// One ResidualAttentionBlock: x = x + attn(ln_1(x)) (causal mask); x = x + c_proj(QuickGELU(c_fc(ln_2(x)))).
struct ClipTextBlock {
  LayerNormW ln_1;   ///< (W)
  LinearW in_proj;   ///< nn.MultiheadAttention in_proj_weight (3W, W) rows [q; k; v], in_proj_bias (3W)
  LinearW out_proj;  ///< (W, W) + (W)
  LayerNormW ln_2;   ///< (W)
  LinearW c_fc;      ///< (4W, W) + (4W)
  LinearW c_proj;    ///< (W, 4W) + (W)
};

/// Everything CLIP.encode_text reads, plus logit_scale (CLIP.forward).
struct ClipTextWeights {
  ClipTextHParams hp;
  Floats token_embedding;       ///< (V, W) token_embedding.weight
  Floats positional_embedding;  ///< (C, W)
  std::vector<ClipTextBlock> blocks;
  LayerNormW ln_final;          ///< (W)
  Floats text_projection;       ///< (W, E): features = x @ text_projection (a plain matrix, not an nn.Linear)
  float logit_scale = 0.0f;     ///< log of the logits' scale (shape (); CLIP.forward uses logit_scale.exp())
  /// The names of every tensor read (all of them consumed), in the order read.
  std::vector<std::string> tensors;
};

/// Builds the text tower from `tensors` named as OpenAI CLIP's state dict names them (token_embedding.weight,
/// positional_embedding, transformer.resblocks.N.{ln_1, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj,
/// ln_2, mlp.c_fc, mlp.c_proj}.*, ln_final.*, text_projection, logit_scale); other tensors (visual.*) are left
/// alone. Hyper-parameters come from the shapes as clip/model.py build_model derives them. `where` (a file
/// name) starts each message. Throws attnmap::Error naming the tensor, with the expected and found shape, for
/// a missing or misshaped tensor, a block index missing below the highest, a width under 64 or not divisible
/// by width // 64 heads (nn.MultiheadAttention's rule), or a name under transformer. / token_embedding. /
/// ln_final. that OpenAI's text tower does not have.
ClipTextWeights build_clip_text(const TensorMap& tensors, const std::string& where);

/// Packs every linear layer's weights for the GEMM back-end now (model/sgemm.hpp prepack_linear), as the
/// first encode_text would; optional.
void prepare_clip_text(const ClipTextWeights& w);

/// CLIP.encode_text: text features (N, E) row-major for N token-id sequences, each at most context_length ids
/// (clip.tokenize's rows: <|startoftext|> ... <|endoftext|>, padded with 0 to 77, or unpadded). Per sequence:
/// x = token_embedding[ids] + positional_embedding; the blocks with the causal mask (position i attends to
/// 0..i); ln_final; the row of the end-of-text token, found as OpenAI does: the argmax of the ids (the first
/// one when it repeats); @ text_projection. Positions after that token cannot change its row (causal mask), so
/// they are not computed. Throws attnmap::Error for an empty or too long sequence, an id outside [0, V), or a
/// sequence without <|endoftext|> (id V - 1), naming the sequence.
std::vector<float> encode_text(const ClipTextWeights& w, const std::vector<std::vector<int32_t>>& ids);

/// In place, x (N, E): each row divided by its L2 norm (CLIP.forward: features / features.norm(dim=1,
/// keepdim=True)). Throws attnmap::Error when a row's norm is 0 or not finite, naming the row.
void l2_normalize_rows(float* x, int N, int E);

/// The logits' scale: exp(logit_scale) (CLIP.forward: self.logit_scale.exp(); 100 for OpenAI's trained models).
float clip_logit_scale(const ClipTextWeights& w);

/// CLIP.forward's logits_per_image (M, N) = scale * image (M, E) @ text (N, E)^T, from L2-normalised features;
/// logits_per_text is its transpose.
std::vector<float> image_text_logits(const float* image, int M, const float* text, int N, int E, float scale);

}  // namespace attnmap
