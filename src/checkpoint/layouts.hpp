// layouts.hpp - the checkpoint layouts attnmap reads, as one enum and one table (the convention of
// llama.cpp's clip projector types): each row says how the family is named in messages and `inspect`, the
// tensors that tell it apart, the settings its own code fixes but its files do not hold (LayerNorm eps,
// activation, mean/std, how --size resamples its positions, the head-count rule), and the tensors its files
// hold that cannot change the attention maps, each with the reason. Adding a family is one row here and
// one naming scheme in weights.cpp.
#pragma once
#include <string>
#include <vector>

namespace attnmap {

/// The naming layouts, one per family's own code.
enum class Layout {
  Seed,         ///< the guide's single attention layer (W_Q / W_K / W_V)
  Timm,         ///< timm VisionTransformer (also DINO v1 and DeiT .pth files: the same names)
  TimmClip,     ///< timm's CLIP ViTs (vit_*_clip_*): norm_pre, LayerNorm eps 1e-5
  TimmSiglip,   ///< timm's SigLIP ViTs (vit_*_siglip_*): no class token, attention-pool (MAP) head
  Deit3,        ///< facebookresearch/deit models_v2.py (DeiT-III): LayerScale as gamma_1 / gamma_2
  Mae,          ///< facebookresearch/mae models_mae.py: timm names plus a decoder and a mask token
  Dinov2,       ///< facebookresearch/dinov2 DinoVisionTransformer (register_tokens, chunked blocks, SwiGLU)
  HfVit,        ///< Hugging Face ViTModel / ViTForImageClassification
  HfDeit,       ///< Hugging Face DeiTModel / DeiTForImageClassification(WithTeacher)
  HfDinov2,     ///< Hugging Face Dinov2Model / Dinov2WithRegistersModel
  HfClip,       ///< Hugging Face CLIPVisionModel / CLIPModel (the vision tower)
  Torchvision,  ///< torchvision.models.VisionTransformer
  Clip,         ///< OpenAI CLIP clip/model.py VisionTransformer and OpenCLIP's (visual tower or whole model)
  VitPytorch,   ///< lucidrains/vit-pytorch ViT
  SimpleVit,    ///< lucidrains/vit-pytorch SimpleViT (no class token, computed 2-D sin-cos positions)
  Cait,         ///< timm / facebookresearch CaiT: talking-heads self-attention blocks, then class-attention blocks
  Eva,          ///< timm Eva (EVA-02, DINOv3 as timm builds them): rotary positions, q_bias / v_bias, SwiGLU
  Beit,         ///< timm Beit / microsoft/unilm BEiT, BEiT v2: relative position bias, q_bias / v_bias, gamma_1 / gamma_2
  Dinov3,       ///< facebookresearch DINOv3 DinoVisionTransformer: storage tokens, rotary periods stored, bias_mask
  HfBeit,       ///< Hugging Face BeitModel / BeitForImageClassification (and Data2VecVision's): BEiT, lambda_1 / lambda_2
};

/// How --size resamples the position embeddings: each framework's own F.interpolate call (torch 1.13 semantics).
///   Timm        timm >= 0.9 resample_abs_pos_embed: size=(gh, gw), bicubic, align_corners=False, antialias=True
///               (also facebookresearch DINOv2's *_reg hub models: interpolate_offset=0, interpolate_antialias=True)
///   TimmLegacy  timm 0.6 resize_pos_embed / DeiT's fine-tuning script: size=, bicubic, antialias=False
///   Dino        facebookresearch DINO / DINOv2 interpolate_pos_encoding: scale_factor=((g+0.1)/M per axis),
///               bicubic, align_corners=False, antialias=False; the samples follow the scale factor, not in/out
///   Hf          Hugging Face ViTEmbeddings.interpolate_pos_encoding (2024 on): size=, bicubic, align_corners=False
///   HfLegacy    the same before 2024: DINO's +0.1 scale_factor call (numerically Dino)
///   Torchvision torchvision.models.vision_transformer.interpolate_embeddings: size=, bicubic, align_corners=True
enum class PosInterp { Timm, TimmLegacy, Dino, Hf, HfLegacy, Torchvision };

/// The MLP's activation: exact GELU (nn.GELU()), GELU's tanh approximation (nn.GELU(approximate='tanh'),
/// timm 'gelu_tanh'), or CLIP's QuickGELU x * sigmoid(1.702 x).
enum class Activation { Gelu, GeluTanh, QuickGelu };

/// Where the classifier reads the encoder's output: the class token (timm 'token'), the mean of the patch
/// tokens (timm 'avg': prefix tokens left out), the mean of every token (vit-pytorch pool='mean': the class
/// token included), or a learned probe attending over the tokens (timm 'map', SigLIP).
enum class Pool { ClassToken, MeanPatches, MeanAll, Map };

/// The channel statistics a family's preprocessing uses by default.
enum class Stats { ImageNet, Clip, Half };

/// How the number of heads follows when neither the file, a config nor --heads says it:
///   Sizes  timm's model sizes: D/64 where every timm/DINO/DeiT size with that D has D/64 heads; refused
///          where it does not (ViT-H D = 1280 has 16 heads, not 20) or D is no multiple of 64
///   D64    the family's own code fixes D/64 (OpenAI CLIP's build_model: width // 64; OpenCLIP head_width 64)
///   Inner64 vit-pytorch: (3 * inner) query/key/value rows with its default dim_head = 64
enum class HeadRule { Sizes, D64, Inner64 };

/// A group of tensors a layout's files may hold that cannot change any attention map, and why.
struct IgnoredTensors {
  const char* pattern;  ///< a name, or a name ending in '*' for every name with that prefix
  const char* reason;   ///< said by inspect and in the notes
};

/// One row of the table.
struct LayoutInfo {
  Layout layout;
  const char* name;    ///< short name (manifest, provenance, --layout in messages): "timm", "clip", ...
  const char* family;  ///< what inspect says: "timm (timm VisionTransformer; DINO and DeiT .pth files)"
  float eps;           ///< LayerNorm epsilon of the family's code
  const char* eps_why;
  PosInterp pos_interp;  ///< --size's default resampling
  const char* pos_why;
  Stats stats;
  Activation act;  ///< the family's default activation
  HeadRule heads;
  std::vector<IgnoredTensors> ignored;
};

/// The table's row for `l`.
const LayoutInfo& layout_info(Layout l);

/// layout_info(l).name.
std::string layout_name(Layout l);

/// "gelu", "gelu-tanh", "quickgelu".
std::string activation_name(Activation a);

/// The inverse of activation_name, also accepting the families' spellings ("gelu_tanh", "quick_gelu",
/// "gelu_pytorch_tanh", "gelu_new"). Throws attnmap::Error listing the names for anything else.
Activation parse_activation(const std::string& s);

/// "class token", "mean of the patch tokens", "mean of every token", "attention-pool probe".
std::string pool_name(Pool p);

/// "cls" (or "token"), "mean" (or "avg": the patch tokens), "mean-all" (every token, vit-pytorch before
/// 2025-11), "map". Throws attnmap::Error listing the names for anything else.
Pool parse_pool(const std::string& s);

/// The reason `name` (as the layout names it, wrapper prefixes removed) cannot change the maps, from the
/// layout's ignored list; empty when the layout does not list it.
std::string ignored_reason(Layout l, const std::string& name);

}  // namespace attnmap
