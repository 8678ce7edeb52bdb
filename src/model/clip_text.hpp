// clip_text.hpp - CLIP's text tower as the three families build it: OpenAI CLIP (openai/CLIP clip/model.py:
// CLIP.__init__, CLIP.encode_text, CLIP.forward, build_model), OpenCLIP (mlfoundations/open_clip model.py CLIP /
// CustomTextCLIP, transformer.py TextTransformer, text_global_pool) and Hugging Face CLIPModel (transformers
// models/clip/modeling_clip.py CLIPTextTransformer), and SigLIP's text tower (issue 43 item 6): Hugging Face
// SiglipModel (transformers models/siglip/modeling_siglip.py SiglipTextTransformer) and open_clip's SigLIP
// (CustomTextCLIP + TextTransformer(no_causal_mask, pool_type last, proj_bias)): the weights read from a state
// dict's names and the family's config, the forward pass from token ids to text features, and the image-text
// logits. Issue 43, item 1 (docs/text.md "Text tower", "SigLIP").
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"
#include "core/tensor.hpp"
#include "text/clip_tokenizer.hpp"
#include "text/siglip_tokenizer.hpp"

namespace attnmap {

/// Which family's names and rules a text tower follows: OpenAI CLIP, open_clip (CLIP or, with a SigLIP
/// tokenizer, SigLIP), Hugging Face CLIPModel, Hugging Face SiglipModel (ViTWeights::text_layout
/// "hugging_face_siglip").
enum class ClipTextLayout { openai, open_clip, hugging_face, hugging_face_siglip };

/// Where a text's feature is read (open_clip text_global_pool's names): argmax = the position of the highest
/// id (OpenAI; open_clip 'argmax'; HF when eos_token_id == 2), eos = the first position holding eos_id
/// (open_clip 'eos'; HF otherwise), first = position 0, last = the last position of the sequence padded to the
/// context (open_clip 'first' / 'last').
enum class ClipTextPool { argmax, eos, first, last };

/// "argmax", "eos", "first", "last".
const char* clip_text_pool_name(ClipTextPool pool);

/// The text tower's hyper-parameters as built: shapes, and the settings of ClipTextConfig.
struct ClipTextHParams {
  int context_length = 0;  ///< positions C: positional_embedding.shape[0] (OpenAI: 77)
  int vocab_size = 0;      ///< V: token_embedding.weight.shape[0] (OpenAI: 49408)
  int width = 0;           ///< token width W: ln_final.weight.shape[0] (ViT-B: 512)
  int heads = 0;           ///< H (OpenAI: width // 64, build_model's transformer_heads; else the config's)
  int layers = 0;          ///< blocks: the number of transformer.resblocks.N indices
  int embed_dim = 0;       ///< E: the projection's output (the joint image-text space)
  int mlp_hidden = 0;      ///< the MLP's hidden width (c_fc / fc1 rows; OpenAI 4W)
  float eps = 1e-5f;       ///< LayerNorm eps (nn.LayerNorm's default; clip/model.py LayerNorm)
  Activation act = Activation::QuickGelu;  ///< the MLP's activation (OpenAI QuickGELU)
  bool causal = true;      ///< the causal mask (open_clip no_causal_mask turns it off)
  ClipTextPool pool = ClipTextPool::argmax;
  int eos_id = -1;         ///< the end-of-text id that pool eos looks for
  int pad_id = 0;          ///< the id a sequence is padded with to the context where every position counts
  bool layer_scale = false;  ///< blocks carry ls_1 / ls_2 gammas (open_clip ls_init_value)
  /// <|endoftext|>'s id for argmax pooling: the highest id, vocab_size - 1 (49407 in OpenAI's vocabulary),
  /// which is why encode_text can find it with argmax.
  int eot_id() const { return vocab_size - 1; }
  int head_dim() const { return heads > 0 ? width / heads : 0; }
};

/// The settings that change a text tower's numbers, from the family's config (clip_text_config) or, for
/// OpenAI's layout, as build_model derives them from the shapes. Shape fields left 0 are taken from the
/// tensors; set, they must match them (else the builder refuses, expected vs found).
struct ClipTextConfig {
  ClipTextLayout layout = ClipTextLayout::openai;
  std::string prefix;       ///< "" (OpenAI; OpenCLIP CLIP), "text." (OpenCLIP CustomTextCLIP), "text_model." (HF)
  int heads = 0;            ///< 0 = width // 64 (OpenAI's build_model)
  float eps = 1e-5f;
  Activation act = Activation::QuickGelu;
  bool causal = true;
  ClipTextPool pool = ClipTextPool::argmax;
  int eos_id = -1;          ///< for pool eos
  int pad_id = 0;
  bool layer_scale = false;  ///< ls_1 / ls_2 gammas in every block (open_clip ls_init_value set)
  int width = 0, layers = 0, context_length = 0, vocab_size = 0, embed_dim = 0, mlp_hidden = 0;
  /// Each setting's source, e.g. {"heads", "open_clip_config.json model_cfg.text_cfg.heads"}.
  std::map<std::string, std::string> source;
  ClipTextRules rules = ClipTextRules::openai;  ///< the tokenizer rules that go with the layout
  /// SigLIP's SentencePiece tokenizer instead of CLIP's (HF SiglipModel; open_clip text_cfg.hf_tokenizer_name
  /// a SigLIP tokenizer with tokenizer_kwargs {"clean": "canonicalize"}), with these rules.
  bool siglip_tokenizer = false;
  SiglipTextRules siglip_rules = SiglipTextRules::hugging_face;
  std::string tokenizer_name;  ///< open_clip text_cfg.hf_tokenizer_name ("" otherwise), for messages
  bool projection = true;      ///< false: open_clip proj_type "none" (the pooled row is the feature)
};

/// The config for a text tower handed over by the loader: `layout` "openai" | "open_clip" | "hugging_face" |
/// "hugging_face_siglip" (ViTWeights::text_layout), `config` its settings (open_clip_config.json's "model_cfg" object, HF's whole
/// config.json, or null), `tensors` the tower's tensors (the prefix is read from their names). OpenAI: as
/// build_model (heads = width // 64, eps 1e-5, QuickGELU, argmax). open_clip: model_cfg.text_cfg with
/// CLIPTextCfg's defaults for keys it lacks, quick_gelu at model level (else exact GELU), act_kwargs
/// {approximate: tanh}, norm_kwargs {eps}; hf_tokenizer_name "timm/ViT-B-16-SigLIP" (or its -i18n-256) with
/// tokenizer_kwargs {clean: canonicalize}: SigLIP's tokenizer, padded with </s> (1). HF: text_config with
/// CLIPTextConfig's defaults (v4.48: 8 heads, quick_gelu, eps 1e-5, eos 49407). HF SigLIP: text_config with
/// SiglipTextConfig's defaults (vocab 32000, 768 wide, 12 heads, 12 layers, 64 positions, gelu_pytorch_tanh,
/// eps 1e-6, pad 1, projection_size = hidden_size), no causal mask, the last position. Throws attnmap::Error for
/// an unknown layout, HF without a config, or a setting this tower cannot honour (open_clip hf_model_name,
/// text_arch other than clip, embed_cls, custom attention blocks, pool none, a tokenizer other than CLIP's or
/// SigLIP's (SigLIP 2's Gemma tokenizer named); HF hidden_act other than quick_gelu / gelu / gelu_new /
/// gelu_pytorch_tanh; HF model_type siglip2), naming it.
ClipTextConfig clip_text_config(const std::string& layout, const nlohmann::json& config, const TensorMap& tensors,
                                const std::string& where);

/// One ResidualAttentionBlock: x = x + attn(ln_1(x)) (causal mask); x = x + c_proj(QuickGELU(c_fc(ln_2(x)))).
struct ClipTextBlock {
  LayerNormW ln_1;   ///< (W)
  LinearW in_proj;   ///< nn.MultiheadAttention in_proj_weight (3W, W) rows [q; k; v], in_proj_bias (3W)
  LinearW out_proj;  ///< (W, W) + (W)
  LayerNormW ln_2;   ///< (W)
  LinearW c_fc;      ///< (4W, W) + (4W)
  LinearW c_proj;    ///< (W, 4W) + (W)
  Floats ls_1, ls_2; ///< open_clip LayerScale gammas (W), empty without: x = x + ls_1 * attn(...)
};

/// Everything CLIP.encode_text reads, plus logit_scale (CLIP.forward).
struct ClipTextWeights {
  ClipTextHParams hp;
  Floats token_embedding;       ///< (V, W) token_embedding.weight
  Floats positional_embedding;  ///< (C, W)
  std::vector<ClipTextBlock> blocks;
  LayerNormW ln_final;          ///< (W)
  Floats text_projection;       ///< (W, E): features = x @ text_projection (an nn.Linear / HF weight transposed)
  Floats text_projection_bias;  ///< (E) open_clip proj_bias; empty without
  float logit_scale = 0.0f;     ///< log of the logits' scale (shape (); CLIP.forward uses logit_scale.exp())
  float logit_bias = 0.0f;      ///< open_clip / HF SigLIP logit_bias (0 without): logits + bias
  /// How the logits become probabilities: a sigmoid per text for a tower with logit_bias (HF SiglipModel:
  /// torch.sigmoid(logits_per_image); open_clip: a model with init_logit_bias was trained with the SigLIP loss and
  /// is scored with torch.sigmoid), else CLIP's softmax over the texts.
  ScoreRule rule = ScoreRule::softmax;
  /// The names of every tensor read (all of them consumed), in the order read.
  std::vector<std::string> tensors;
};

/// Builds the text tower from `tensors` named as `cfg`'s family names them: OpenAI / OpenCLIP CLIP
/// (prefix + token_embedding.weight, positional_embedding, transformer.resblocks.N.{ln_1, attn.in_proj_weight,
/// attn.in_proj_bias, attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj, ls_1.gamma, ls_2.gamma}.*, ln_final.*,
/// text_projection or text_projection.{weight, bias}, attn_mask if saved), HF CLIPModel (text_model.embeddings.
/// {token_embedding, position_embedding}.weight, text_model.encoder.layers.N.{layer_norm1, self_attn.{q,k,v,
/// out}_proj, layer_norm2, mlp.fc1, mlp.fc2}.*, text_model.final_layer_norm.*, text_projection.weight (E, W)),
/// HF SiglipModel (the same text_model.* names, text_model.head.{weight (E, W), bias (E)} for the projection,
/// logit_scale (1,) and logit_bias (1,)), and logit_scale (+ open_clip logit_bias); other tensors (visual.*) are left alone. `where` (a file name)
/// starts each message. Throws attnmap::Error naming the tensor, with the expected and found shape, for a
/// missing or misshaped tensor, a block index missing below the highest, heads not dividing the width, a shape
/// differing from the config's setting, or a name under the tower's prefixes that the family's tower does not
/// have (every tensor there is consumed or refused).
ClipTextWeights build_clip_text(const TensorMap& tensors, const ClipTextConfig& cfg, const std::string& where);

/// OpenAI's layout: build_clip_text(tensors, ClipTextConfig{}, where) (heads = width // 64, as build_model).
ClipTextWeights build_clip_text(const TensorMap& tensors, const std::string& where);

/// Packs every linear layer's weights for the GEMM back-end now (model/sgemm.hpp prepack_linear), as the
/// first encode_text would; optional.
void prepare_clip_text(const ClipTextWeights& w);

/// CLIP.encode_text: text features (N, E) row-major for N token-id sequences, each at most context_length ids
/// (clip.tokenize's rows: <|startoftext|> ... <|endoftext|>, padded with 0 to 77, or unpadded). Per sequence:
/// x = token_embedding[ids] + positional_embedding; the blocks with the causal mask (position i attends to
/// 0..i) unless hp.causal is off; ln_final; the pooled row (hp.pool: argmax of the ids, the first one when it
/// repeats; the first id == eos_id; position 0; the last position); @ text_projection (+ bias). With the causal
/// mask, positions after the pooled one cannot change its row, so they are not computed; without it, or for
/// pool last, the sequence is padded with pad_id to the context first (as the family's tokenizer pads; SigLIP:
/// </s>, id 1, so ids already padded by SiglipTokenizer to the context are read as given).
/// Throws attnmap::Error for an empty or too long sequence, an id outside [0, V), or a sequence without its
/// end-of-text id (argmax: V - 1; eos: eos_id), naming the sequence.
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
