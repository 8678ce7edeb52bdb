// weights.hpp - the ViT's hyper-parameters and weights, and the one loader that fills them from a file.
// Follows the ggml/llama.cpp clip convention: an hparams struct with defaults, a per-layer weights struct,
// one loader that names any missing tensor.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/layouts.hpp"
#include "checkpoint/weights_json.hpp"
#include "hub/hub_name.hpp"

namespace attnmap {

/// Rotary position embedding on the patch tokens' queries and keys (prefix tokens unrotated), as timm's Eva
/// builds it: EVA-02's RotaryEmbeddingCat ('cat': integer grid coordinates, scaled to ref_feat_shape,
/// frequencies 1 / temperature^(j / (d_k/4))) or DINOv3's RotaryEmbeddingDinoV3 (0.5-centred coordinates
/// normalised to [-1, 1] per axis, periods temperature^(2j / (d_k/2))). timm/layers/pos_embed_sincos.py.
enum class Rope { None, EvaCat, Dinov3 };

/// Hyper-parameters; defaults are timm's vit_*_patch16_224 conventions.
struct HParams {
  /// The detected layout (checkpoint/layouts.hpp: one row per family's naming).
  Layout layout = Layout::Timm;
  int image_w = 224, image_h = 224;  ///< model input size in pixels
  int patch = 16;                    ///< patch size P (pixels)
  int grid_w = 14, grid_h = 14;      ///< patch grid: image / patch
  int dim = 0;                       ///< token width D
  int depth = 0;                     ///< number of encoder blocks
  int num_heads = 1;                 ///< attention heads H
  int head_dim = 0;                  ///< d_k per head
  int mlp_dim = 0;                   ///< hidden width of the MLP (0: no MLP)
  int num_prefix = 1;                ///< tokens before the patch tokens: [class], [distillation], [registers]
  bool class_token = true;           ///< the first token is a class token (false: SimpleViT, timm GAP, SigLIP)
  int num_dist = 0;                  ///< distillation tokens (DeiT: 1), right after the class token
  int num_registers = 0;             ///< register tokens (DINOv2 / timm reg), after class and distillation
  /// Prefix tokens that have a position-embedding row: pos_embed is (pos_prefix + N, D); its first pos_prefix
  /// rows go to the first pos_prefix prefix tokens, the rest to the patches. 1+dist for timm / DeiT / HF /
  /// torchvision, 1 for facebookresearch DINOv2 registers, 0 for timm no_embed_class, 1+R for timm reg.
  int pos_prefix = 1;
  bool layer_scale = false;          ///< blocks carry LayerScale ls1 / ls2 (DINOv2, CaiT-style)
  bool qk_norm = false;              ///< blocks normalise each head's query and key (timm qk_norm=True)
  bool swiglu = false;               ///< the MLP is SwiGLU: fc1 (2M, D) -> silu(x1) * x2 -> fc2 (D, M) (DINOv2)
  bool has_mlp_norm = false;         ///< the MLP has a sub-LayerNorm (M) before fc2 (EVA-02 scale_mlp: mlp.norm)
  // ---- rotary positions (timm Eva: EVA-02, DINOv3; src/model/rope.hpp) ----
  Rope rope = Rope::None;            ///< rotary position embedding on the patch tokens' q and k
  bool rope_half = false;            ///< rotate-half layout (DINOv3) instead of interleaved pairs (EVA-02)
  float rope_temperature = 10000.f;  ///< EVA-02: frequency base; DINOv3: period base
  int rope_ref_h = 0, rope_ref_w = 0;  ///< EVA-02 ref_feat_shape (the grid coordinates are scaled to it); 0: none
  /// DINOv3 as facebookresearch saves it: its rope_embed.periods (d_k/4) as stored (bfloat16 in the released
  /// distilled models), used instead of rope_temperature^(2j/(d_k/2)); empty: computed from the temperature.
  std::vector<float> rope_periods;
  Activation act = Activation::Gelu; ///< the MLP's activation (GELU MLPs)
  Pool pool = Pool::ClassToken;      ///< what the classifier reads
  bool pos_sincos = false;           ///< positions computed: SimpleViT's 2-D sin-cos table for the grid
  bool attn_proj = true;             ///< the attention output goes through proj (vit-pytorch: none when H*dk == D)
  /// CaiT (Touvron et al. 2021; timm cait.py): blocks 0..depth-class_attn_blocks-1 are talking-heads
  /// self-attention blocks over the patches only (the class token is not in them), the last class_attn_blocks
  /// are class-attention blocks (the class token the only query, over [class; patches]; patches not updated).
  /// 0 for every other layout. See model/cait.hpp for how ForwardResult holds their attention.
  int class_attn_blocks = 0;
  bool talking_heads = false;        ///< self-attention blocks mix the heads' scores (proj_l) and probabilities (proj_w)
  /// Whether block l (0-based, as --layer counts) is a CaiT class-attention block.
  bool is_class_attention(int l) const { return class_attn_blocks > 0 && l >= depth - class_attn_blocks; }
  // ---- BEiT relative position bias (issue 29) ----
  bool rel_pos = false;              ///< a relative position bias is added to the scores (BEiT, BEiT v2)
  int rel_pos_grid_w = 0, rel_pos_grid_h = 0;  ///< the grid the tables are for (the trained one, or --size's)
  float eps = 1e-6f;                 ///< LayerNorm epsilon (timm default)
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  ///< ImageNet (timm IMAGENET_DEFAULT_MEAN)
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};   ///< ImageNet (timm IMAGENET_DEFAULT_STD)
  bool residual_mlp = true;   ///< timm block (LN, attention, residual, LN, MLP, residual); false: seed
  bool cls_is_mean = false;   ///< seed layout without cls_token: class token = mean of patch tokens
  std::optional<int> default_layer;        ///< config "default_layer": the model's preferred view
  std::optional<std::string> default_head; ///< config "default_head"
  std::vector<std::string> labels;         ///< config "labels": class names of the classifier head
  std::string architecture;                ///< timm hub config "architecture", when given
  std::optional<float> crop_pct;           ///< timm pretrained_cfg crop_pct, when given
  std::string interpolation;               ///< timm pretrained_cfg interpolation, when given
  /// Where each value came from: name -> "config (file)", "inferred from ...", "default", "command line".
  std::map<std::string, std::string> source;

  int tokens() const { return num_prefix + grid_w * grid_h; }
  int inner() const { return num_heads * head_dim; }
  /// What the attention row drawn as "the" map is: the class token's row, or, for a model without a class
  /// token, the mean of the patch tokens' rows (the attention each token receives, averaged over the
  /// patch queries). CaiT: the one or the other by the kind of block.
  std::string query_name() const {
    if (class_attn_blocks > 0) return "class token (class-attention blocks); mean over patch queries (self-attention blocks)";
    return class_token ? "class token" : "mean over patch queries";
  }
};

/// A LayerNorm's affine parameters, each (D); empty when the model has none.
struct LayerNormW {
  Floats weight, bias;
  bool present() const { return !weight.empty(); }
};

/// An nn.Linear: weight (out, in) row-major, bias (out) or empty.
struct LinearW {
  Floats weight, bias;
  int out = 0, in = 0;
  bool present() const { return !weight.empty(); }
};

/// timm's AttentionPoolLatent (SigLIP's MAP head): a learned probe (1, D) attends over the final tokens with
/// its own query (D, D) and key/value (2D, D) projections and H heads, then proj, and a residual MLP on
/// norm(x); the classifier reads the probe's output.
struct AttentionPoolW {
  Floats latent;       ///< (D)
  LinearW q, kv, proj; ///< (D, D), (2D, D), (D, D)
  LayerNormW norm;     ///< (D)
  LinearW fc1, fc2;    ///< (M, D), (D, M)
  bool present() const { return !latent.empty(); }
};

/// One encoder block's weights.
struct BlockWeights {
  LayerNormW norm1;  ///< (D)
  LinearW qkv;       ///< (3*H*dk, D): rows [q; k; v], heads contiguous inside each
  LayerNormW q_norm, k_norm;  ///< (dk) each, applied to every head's query / key (timm qk_norm); optional
  LinearW proj;      ///< (D, H*dk); absent in the seed layout and where H*dk == D needs none (vit-pytorch)
  LayerNormW norm2;  ///< (D)
  LinearW fc1;       ///< (M, D); SwiGLU: (2M, D), rows [x1; x2] (DINOv2 w12)
  LinearW fc2;       ///< (D, M); SwiGLU: DINOv2 w3
  Floats ls1, ls2;  ///< LayerScale (D) on the attention / MLP branch; empty: none
  LinearW proj_l, proj_w;  ///< CaiT talking heads (H, H) each, with bias: on the scores before / the
                           ///< probabilities after the softmax (timm TalkingHeadAttn); absent elsewhere
  LayerNormW mlp_norm;  ///< (M) sub-LayerNorm of the MLP's hidden units before fc2 (EVA-02 scale_mlp, timm mlp.norm)
  /// BEiT: this block's relative position bias table ((2Wh-1)(2Ww-1)+3, H), timm attn.relative_position_bias_table;
  /// empty: none. The last 3 rows are class->patch, patch->class, class->class (gen_relative_position_index).
  Floats rel_pos_table;
  /// The bias (H, T, T) added to Q K^T / sqrt(dk) before the softmax, gathered for the current grid from this
  /// block's table plus the shared one (checkpoint/rel_pos.hpp); null: none. Blocks may share one.
  std::shared_ptr<const std::vector<float>> attn_bias;
};

/// Rotary tables of one patch grid: sin and cos (gh * gw, d_k), the angle of patch n (row-major) for each
/// of the head's d_k channels, in the layout the family rotates (src/model/rope.hpp).
struct RopeTables {
  int grid_h = 0, grid_w = 0;
  std::vector<float> sin, cos;
};

/// Everything the forward pass needs. A safetensors F32 model's tensors are views into the file's read-only
/// mapping (Floats::view), which each of them keeps alive: copies of a ViTWeights share it, and it is unmapped
/// when the last tensor using it goes.
/// The arithmetic of the forward pass's matrix products (issue 30): F32 everywhere, or BF16: the linear
/// layers and the attention products in bfloat16 with float32 accumulation (oneDNN), LayerNorm, softmax,
/// GELU, residuals and the maps in float32.
enum class Precision { F32, BF16 };

/// CLIP zero-shot classes (issue 43): the texts as a classifier head of the vision model. With classes > 0,
/// the forward pass's logits are the N image-text logits
///   logits[j] = scale * <normalize(proj(pooled normed class token)), text[j]>   (CLIP.forward's logits_per_image)
/// and everything that uses logits and class names (top-5, --class, chefer / gradcam / attn-grad) reads them.
/// How a model's logits become the probabilities it reports: a softmax over the classes (a classifier head;
/// CLIP over the texts given, CLIP.forward's logits_per_image.softmax) or each logit's own sigmoid (SigLIP,
/// Zhai et al. 2023: every text scored alone, the probabilities need not sum to 1).
enum class ScoreRule { softmax, sigmoid };

struct ZeroShotHead {
  Floats text;                      ///< (N, E) the texts' features, each row L2-normalised
  int classes = 0;                  ///< N; 0: no zero-shot head
  float scale = 0.0f;               ///< exp(logit_scale) (100 for trained OpenAI models)
  float bias = 0.0f;                ///< logit_bias added to every logit (SigLIP; 0 for CLIP)
  ScoreRule rule = ScoreRule::softmax;  ///< softmax over the texts (CLIP) or a sigmoid per text (SigLIP)
  std::vector<std::string> labels;  ///< the N texts as the user gave them (the class names)
  bool present() const { return classes > 0; }
};

struct ViTWeights {
  HParams hp;
  Precision precision = Precision::F32;  ///< set by the caller before prepare_weights (model/sgemm.hpp bf16_supported)
  LinearW patch_embed;            ///< (D, 3*P*P) in (channel, row, column) order; absent: token = pixels
  LayerNormW patch_norm_in;       ///< (3*P*P) LayerNorm of each patch's pixels before the embedding (vit-pytorch)
  LayerNormW patch_norm_out;      ///< (D) LayerNorm after the embedding (vit-pytorch)
  LayerNormW norm_pre;            ///< (D) LayerNorm of the tokens before the first block (CLIP ln_pre / norm_pre)
  Floats cls_token;   ///< (D); empty when hp.cls_is_mean or !hp.class_token
  Floats extra_tokens;  ///< (num_prefix - 1, D): distillation token, then register tokens
  Floats pos_embed;   ///< (pos_prefix + N, D); empty: zero
  Floats rel_pos_table_shared;  ///< BEiT use_shared_rel_pos_bias: rel_pos_bias.relative_position_bias_table, as above
  std::vector<BlockWeights> blocks;
  RopeTables rope;                ///< hp.rope != None: the tables of the current grid (prepare_rope)
  LayerNormW norm;                ///< final LayerNorm (D), optional
  LayerNormW fc_norm;             ///< LayerNorm after pooling, before the head (timm fc_norm), optional
  AttentionPoolW attn_pool;       ///< hp.pool == Pool::Map: the attention-pool head
  LinearW head;                   ///< classifier (C, D), optional
  LinearW head_dist;              ///< DeiT distilled: classifier on the distillation token (C, D), optional;
                                  ///< logits = (head(class) + head_dist(distillation)) / 2 (timm, eval mode)
  /// CLIP's visual projection (E, D), no bias: OpenAI / OpenCLIP `proj` / `visual.proj` (D, E) stored
  /// transposed here; HF CLIPModel `visual_projection.weight` (E, D) as is. Empty for other families.
  LinearW proj;
  ZeroShotHead zero_shot;         ///< the texts as classes (set by the caller with texts); empty otherwise
  /// The loader's hand-over of a CLIP text tower (ModelOverrides::keep_text; checkpoint cannot build it):
  /// the text tensors with their names as in the file, the file's text settings (OpenCLIP
  /// open_clip_config.json "model_cfg" object, HF config.json whole object; null when none), and which
  /// family's names they are: "openai", "open_clip", "hugging_face", or "" (none).
  TensorMap text_tensors;
  nlohmann::json text_config;
  std::string text_layout;
  /// Whether the model has classes: a classifier head or zero-shot texts.
  bool has_classes() const { return head.present() || zero_shot.classes > 0; }
  /// The number of classes: the texts when given, else the head's outputs (0: none).
  int num_classes() const { return zero_shot.classes > 0 ? zero_shot.classes : head.out; }
  std::vector<std::string> notices;  ///< things worth telling the user (guessed settings, overrides)
  /// Every tensor of the file: consumed, or not read with the reason it cannot change the maps.
  struct TensorUse {
    std::string name, shape, reason;  ///< reason empty: consumed
  };
  std::vector<TensorUse> tensors;
  int64_t param_count = 0;           ///< floating-point values in the file (every tensor, used or not)
  std::string format;                ///< "json", "safetensors" or "pth" (torch.save zip archive)
  std::string pth_holds;             ///< pth: what the pickled object is (top-level keys), for inspect
  std::string pth_used;              ///< pth: where the state dict was found ("the top level", "'model'")
  /// SHA-256 of the weights as loaded (64 hex digits), from the very bytes parsed (one open, one mapping,
  /// hashed as read; the path is never opened again): a single file's SHA-256 (`sha256sum FILE`); a Hugging
  /// Face folder or a "*.index.json" index: the SHA-256 of the listing `sha256sum` prints ("HASH  NAME\n")
  /// for the weights or index, each shard, config.json, preprocessor_config.json and open_clip_config.json read, in
  /// that order.
  /// Empty for a model built from memory (build_model).
  std::string weights_sha256;
  /// Every file the load read with the SHA-256 of the bytes read: weights (or index, then shards), then the
  /// side configs (config.json, open_clip_config.json, preprocessor_config.json) that exist.
  std::vector<FileHash> files;
  /// The Hub name the files were fetched under (repository, revision asked for, commit), set by the caller that
  /// resolved the name (app/); std::nullopt for weights named by a path or built from memory.
  std::optional<HubRef> hub;
  /// The SHA-256 of the bytes read from `path` (as in `files`), or nullptr when the load did not read it.
  const std::string* file_sha256(const std::string& path) const {
    for (const FileHash& f : files)
      if (f.path == path) return &f.sha256;
    return nullptr;
  }
};

/// Values given on the command line; they override the file's config.
struct ModelOverrides {
  std::optional<int> num_heads;
  std::optional<std::array<float, 3>> mean, std;
  std::optional<std::string> key;  ///< --key: the entry of a PyTorch checkpoint holding the state dict
  std::optional<Activation> act;   ///< --act: the MLP activation, for files that cannot say it
  std::optional<Pool> pool;        ///< --pool: what the classifier reads, for files that cannot say it
  /// Keep a CLIP text tower: its tensors move into ViTWeights::text_tensors (listed as consumed) with
  /// text_config and text_layout; false: listed as not read, as before.
  bool keep_text = false;
};

/// Builds a ViT from parsed tensors: detects the layout by key names, reads the "config" object, infers
/// what it leaves out (patch size from the patch-embedding weight, grid from pos_embed, depth from the
/// block count, heads = D/64 with a notice), checks every tensor's shape.
/// Throws attnmap::Error naming the file and the tensor with expected vs found shape, for a missing
/// tensor, a wrong shape or an inconsistent config.
ViTWeights build_model(const RawWeights& raw, const ModelOverrides& ov = {});

/// Every key of the attnmap config object the loader reads (weights/README.md "config"; parse_config in
/// weights.cpp, the timm Eva and Hugging Face BEiT switches of checkpoint/file_config.hpp): what a config given
/// in memory (Python's from_state_dict) is checked against, so that a misspelt key is refused, not ignored.
std::vector<std::string> config_keys();

/// A side config file's values as a JSON object, each field with the file it came from.
struct SideConfig {
  nlohmann::json values = nlohmann::json::object();  ///< attnmap config keys (num_heads, image_size, ...)
  std::map<std::string, std::string> source;         ///< key -> "config.json (path)" etc.
  std::vector<std::string> notices;
  /// The side config files read, each read once (read_side_json), with their bytes' SHA-256, in order.
  std::vector<FileHash> files;
  std::map<std::string, std::string> texts;  ///< path -> the bytes read, so a file two readers use is read once
};

/// Reads the side config `file` as a JSON object into `out`, through `sc` (a file is read once: its bytes
/// are kept in sc.texts and its SHA-256 in sc.files). `what` names the file's role in messages ("a side
/// config"). Returns false when the file does not exist. Throws attnmap::Error naming the file when it is
/// not a regular file, cannot be read, is malformed JSON (json_syntax_error) or is not a JSON object.
bool read_side_json(SideConfig& sc, const std::string& file, nlohmann::json& out, const char* what = "a side config");

/// Reads `config.json` (Hugging Face: num_attention_heads, layer_norm_eps, image_size, patch_size; or timm's
/// hub config: architecture -> heads, pretrained_cfg mean, std, input_size, crop_pct, interpolation) and
/// `preprocessor_config.json` (image_mean, image_std) from `dir`, when present.
/// Throws attnmap::Error naming the file for malformed JSON or a value of the wrong type.
SideConfig read_side_config(const std::string& dir);

/// The files load_model reads for the weights file `path`: `path` itself and the side configs beside it
/// (config.json, preprocessor_config.json), whether or not they exist. An output (eval --json, render
/// --manifest) must not replace any of them.
std::vector<std::string> model_files(const std::string& path);

/// Heads of a timm architecture name by its size word (vit_tiny 3, vit_small 6, vit_base 12, vit_large 16,
/// vit_huge 16 of 80, ...; timm vision_transformer.py model defs; DINOv2's giant 24); 0 when unknown, or when
/// `dim` (the weights' token width; 0: not checked) is not that size's width (the name describes another model).
int heads_from_architecture(const std::string& arch, int dim = 0);

/// Builds a model from tensors and a side config (lowest precedence; the file's "config" object and the
/// overrides win, in that order).
ViTWeights build_model(const RawWeights& raw, const SideConfig& side, const ModelOverrides& ov);

/// Reads a weights file - a torch.save zip archive (first bytes "PK\x03\x04", weights_pth.hpp; ov.key picks
/// the state dict), attnmap JSON v1 (first non-blank byte '{') or safetensors (anything else) - plus
/// config.json / preprocessor_config.json beside it, and builds the model. A bare pickle (torch's legacy
/// format) is refused with how to re-save it; ov.key with a file that is not a PyTorch checkpoint is
/// refused. Throws attnmap::Error.
/// `while_hashing`, when given, runs on the built model before the load waits for the file's SHA-256 (hashed
/// on a second thread, read by pread from the file the parse's mapping was made from): a run's packing (finish_run_model) then overlaps the
/// hash, ~0.25 s for a ViT-B file, instead of following it. Its error is the one reported (the hash is
/// stopped and joined); `files` and `weights_sha256` are filled after it returns.
ViTWeights load_model(const std::string& path, const ModelOverrides& ov = {},
                      const std::function<void(ViTWeights&)>& while_hashing = {});

}  // namespace attnmap
