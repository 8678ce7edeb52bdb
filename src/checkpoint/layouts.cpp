#include "checkpoint/layouts.hpp"

#include "core/error.hpp"

namespace attnmap {

namespace {

// Reasons shared by several rows.
const char* const kDinoHead =
    "DINO / iBOT projection head (after the backbone, training only): computed from the backbone's output, "
    "changes no attention map";
const char* const kHfPooler =
    "pooler: tanh(dense(class token)) after the encoder; the classifier does not read it, no attention map uses it";
const char* const kMaskToken =
    "mask token: replaces masked patches in masked-image pre-training only; a forward without a mask never reads it";
const char* const kClipProj =
    "projection into CLIP's joint image-text space, after the last block: changes no attention map";
const char* const kClipText = "CLIP text tower (the image's attention maps never read it)";
const char* const kSiglipText = "SigLIP text tower (the image's attention maps never read it)";
const char* const kPositionIds = "position indices 0..N (an arange buffer): the order attnmap uses";

// clang-format off
// The attention variants of issue 29 (relative position bias, rotary positions, talking heads and class
// attention): their own rows, kept apart so the table stays readable.
std::vector<LayoutInfo> variant_rows() {
  return {
      // CaiT (issue 29): the head count is the side of the talking-heads proj_l (H, H) (vit_loader_cait.cpp);
      // HeadRule::Sizes is never reached for it (a file without self-attention blocks needs --heads or a config).
      {Layout::Cait, "cait",
       "cait (timm / facebookresearch CaiT: talking-heads self-attention blocks, then class-attention blocks)",
       1e-6f, "default (CaiT partial(nn.LayerNorm, eps=1e-6))", PosInterp::Timm,
       "timm names (CaiT's pos_embed covers the patches only; its checkpoint_filter_fn resizes nothing): timm "
       ">= 0.9 resample_abs_pos_embed with num_prefix_tokens=0",
       Stats::ImageNet, Activation::Gelu, HeadRule::Sizes, {}},
      // ---- timm Eva (issue 29: rotary positions; src/checkpoint/vit_loader_eva.cpp) ----
      {Layout::Eva, "eva", "eva (timm Eva: EVA-02 / DINOv3 as timm builds them; rotary positions, SwiGLU)", 1e-6f,
       "default (timm LayerNorm 1e-6; DINOv3 architectures 1e-5)", PosInterp::Timm,
       "timm Eva: pos_embed by resample_abs_pos_embed (bicubic, antialias), rotary tables recomputed for the grid",
       Stats::ImageNet, Activation::Gelu, HeadRule::Sizes, {}},
      // ---- facebookresearch DINOv3's own names (issue 44 point 3; src/checkpoint/vit_loader_eva.cpp) ----
      // The heads from rope_embed.periods (D_head / 4 of them); HeadRule::Sizes is never reached.
      {Layout::Dinov3, "dinov3",
       "dinov3 (facebookresearch DINOv3 DinoVisionTransformer: storage tokens, rotary positions from the stored "
       "rope_embed.periods, masked key bias)",
       1e-5f, "default (every released DINOv3 ViT, dinov3/hub/backbones.py, and every dinov3 training config with "
       "storage tokens: norm_layer 'layernormbf16', nn.LayerNorm eps 1e-5)", PosInterp::Timm,
       "no position table: RopePositionEmbedding computes the rotary angles for any grid",
       Stats::ImageNet, Activation::Gelu, HeadRule::Sizes,
       {{"mask_token", "mask token: DinoVisionTransformer.prepare_tokens_with_masks adds 0 * mask_token to the "
                       "class token when no mask is given (no change: its values are checked finite)"},
        {"local_cls_norm.*", "untie_global_and_local_cls_norm: the norm of the local crops' class and storage "
                             "tokens, used in training only (forward_features_list: self.training); never in eval"},
        {"cls_norm.*", "untie_cls_and_patch_norms: the final norm of the class and storage tokens after the last "
                       "block; a DINOv3 backbone has no classifier, and no attention map reads the final norms"},
        {"dino_head.*", kDinoHead}, {"ibot_head.*", kDinoHead}}},
      // issue 29: BEiT (timm beit.py; microsoft/unilm beit / beit2 use the same names)
      {Layout::Beit, "beit",
       "beit (timm Beit / microsoft/unilm BEiT, BEiT v2: relative position bias, LayerScale gamma_1 / gamma_2)", 1e-6f,
       "default (timm Beit / unilm BEiT LayerNorm 1e-6)", PosInterp::Timm,
       "timm beit.py checkpoint_filter_fn: resample_abs_pos_embed (bicubic, antialias) for pos_embed, "
       "resize_rel_pos_bias_table for the relative position tables",
       Stats::ImageNet, Activation::Gelu, HeadRule::Sizes, {{"mask_token", kMaskToken}}},
      // issue 44: Hugging Face BEiT (models/beit/modeling_beit.py; Data2VecVision has the same names under
      // data2vec_vision.), read through hf_beit_scheme onto the beit layout's canonical names.
      {Layout::HfBeit, "hf-beit",
       "hf-beit (Hugging Face BeitModel / BeitForImageClassification, Data2VecVision: relative position bias, "
       "LayerScale lambda_1 / lambda_2)",
       1e-12f, "default (Hugging Face BeitConfig 1e-12)", PosInterp::Hf,
       "Hugging Face BeitPatchEmbeddings: size=, bicubic, align_corners=False (class row kept); the relative "
       "position tables bilinearly (BeitRelativePositionBias)",
       Stats::Half, Activation::Gelu, HeadRule::Sizes,
       {{"embeddings.mask_token", kMaskToken}, {"beit.embeddings.mask_token", kMaskToken},
        {"data2vec_vision.embeddings.mask_token", kMaskToken},
        {"lm_head.*", "BeitForMaskedImageModeling's head: predicts visual tokens of masked patches after the "
                      "encoder; changes no attention map"},
        {"layernorm.*", "BeitForMaskedImageModeling's LayerNorm before lm_head (after the encoder): changes no "
                        "attention map"}}},
  };
}

const std::vector<LayoutInfo>& table() {
  static const std::vector<LayoutInfo> rows = [] {
    std::vector<LayoutInfo> r = {
      {Layout::Seed, "seed", "seed (single attention layer W_Q / W_K / W_V)", 1e-6f, "seed layout (no LayerNorm)",
       PosInterp::TimmLegacy, "seed layout (no framework): attnmap's earlier rule, size= without antialias",
       Stats::ImageNet, Activation::Gelu, HeadRule::Sizes, {}},
      {Layout::Timm, "timm", "timm (timm VisionTransformer; DINO and DeiT .pth files have the same names)", 1e-6f,
       "default (timm 1e-6)", PosInterp::Timm,
       "timm names (timm, DeiT; a DINO v1 .pth has the same names: use {setting:pos_interp} dino for DINO's own "
       "numbers): timm >= 0.9 resample_abs_pos_embed",
       Stats::ImageNet, Activation::Gelu, HeadRule::Sizes,
       {{"head.mlp.*", kDinoHead}, {"head.last_layer.*", kDinoHead}}},
      {Layout::TimmClip, "timm-clip", "timm-clip (timm CLIP ViT, vit_*_clip_*: norm_pre before the blocks)", 1e-5f,
       "default (timm CLIP ViTs: nn.LayerNorm, 1e-5)", PosInterp::Timm,
       "timm names: timm >= 0.9 resample_abs_pos_embed", Stats::Clip, Activation::Gelu, HeadRule::Sizes, {}},
      {Layout::TimmSiglip, "timm-siglip",
       "timm-siglip (timm SigLIP ViT, vit_*_siglip_*: no class token, attention-pool head)", 1e-6f,
       "default (timm 1e-6)", PosInterp::Timm, "timm names: timm >= 0.9 resample_abs_pos_embed", Stats::Half,
       Activation::Gelu, HeadRule::Sizes,
       // a whole SigLIP: Hugging Face SiglipModel (text_model.*) or OpenCLIP's CustomTextCLIP (text.*)
       {{"text_model.*", kSiglipText}, {"text.*", kSiglipText}, {"logit_scale", kSiglipText},
        {"logit_bias", kSiglipText}, {"vision_model.embeddings.position_ids", kPositionIds},
        {"embeddings.position_ids", kPositionIds}}},
      {Layout::Deit3, "deit3", "deit3 (facebookresearch/deit models_v2.py, DeiT-III: LayerScale gamma_1 / gamma_2)",
       1e-6f, "default (DeiT-III 1e-6)", PosInterp::TimmLegacy,
       "facebookresearch/deit: timm 0.6 resize_pos_embed (size=, bicubic, no antialias)", Stats::ImageNet,
       Activation::Gelu, HeadRule::Sizes, {}},
      {Layout::Mae, "mae", "mae (facebookresearch/mae models_mae.py: the encoder; the decoder is not read)", 1e-6f,
       "default (MAE 1e-6)", PosInterp::TimmLegacy,
       "facebookresearch/mae util/pos_embed.interpolate_pos_embed: size=, bicubic, no antialias", Stats::ImageNet,
       Activation::Gelu, HeadRule::Sizes,
       {{"decoder_*", "MAE decoder: reconstructs masked patches in pre-training; the encoder never reads it"},
        {"mask_token", kMaskToken}}},
      {Layout::Dinov2, "dinov2", "dinov2 (facebookresearch DINOv2 DinoVisionTransformer names)", 1e-6f,
       "default (DINOv2 1e-6)", PosInterp::Dino,
       "facebookresearch DINOv2 names: DinoVisionTransformer.interpolate_pos_encoding with its default "
       "interpolate_offset=0.1 (DINO's rule)",
       Stats::ImageNet, Activation::Gelu, HeadRule::Sizes,
       {{"mask_token", kMaskToken}, {"dino_head.*", kDinoHead}, {"ibot_head.*", kDinoHead}}},
      {Layout::HfVit, "hf-vit", "hf-vit (Hugging Face ViTModel / ViTForImageClassification)", 1e-12f,
       "default (Hugging Face ViTConfig 1e-12)", PosInterp::Hf,
       "Hugging Face names: ViTEmbeddings.interpolate_pos_encoding (transformers 2024 on)", Stats::ImageNet,
       Activation::Gelu, HeadRule::Sizes,
       {{"pooler.dense.*", kHfPooler}, {"vit.pooler.dense.*", kHfPooler}, {"embeddings.mask_token", kMaskToken},
        {"vit.embeddings.mask_token", kMaskToken}}},
      {Layout::HfDeit, "hf-deit", "hf-deit (Hugging Face DeiTModel / DeiTForImageClassification(WithTeacher))",
       1e-12f, "default (Hugging Face DeiTConfig 1e-12)", PosInterp::Hf,
       "Hugging Face names: DeiTEmbeddings.interpolate_pos_encoding", Stats::ImageNet, Activation::Gelu,
       HeadRule::Sizes,
       {{"pooler.dense.*", kHfPooler}, {"deit.pooler.dense.*", kHfPooler}, {"embeddings.mask_token", kMaskToken},
        {"deit.embeddings.mask_token", kMaskToken}}},
      {Layout::HfDinov2, "hf-dinov2", "hf-dinov2 (Hugging Face Dinov2Model / Dinov2WithRegistersModel)", 1e-6f,
       "default (Hugging Face Dinov2Config 1e-6)", PosInterp::Hf,
       "Hugging Face Dinov2Embeddings.interpolate_pos_encoding (transformers 4.48): size=, bicubic, no antialias",
       Stats::ImageNet, Activation::Gelu, HeadRule::Sizes,
       {{"embeddings.mask_token", kMaskToken}, {"dinov2.embeddings.mask_token", kMaskToken},
        {"dinov2_with_registers.embeddings.mask_token", kMaskToken},
        {"classifier.*", "Dinov2ForImageClassification's classifier reads [class token, mean patch token] (2D): "
                         "attnmap computes no logits for it (the maps do not use it)"}}},
      {Layout::HfClip, "hf-clip", "hf-clip (Hugging Face CLIPVisionModel / CLIPModel's vision tower)", 1e-5f,
       "default (Hugging Face CLIPVisionConfig 1e-5)", PosInterp::Hf,
       "Hugging Face names: CLIPVisionEmbeddings.interpolate_pos_encoding", Stats::Clip, Activation::QuickGelu,
       HeadRule::D64,
       {{"text_model.*", kClipText}, {"text_projection.*", kClipText}, {"logit_scale", kClipText},
        {"logit_bias", kClipText}, {"visual_projection.*", kClipProj},
        {"vision_model.embeddings.position_ids", kPositionIds}}},
      {Layout::Torchvision, "torchvision", "torchvision (torchvision.models.VisionTransformer)", 1e-6f,
       "default (torchvision 1e-6)", PosInterp::Torchvision,
       "torchvision names: torchvision.models.vision_transformer.interpolate_embeddings", Stats::ImageNet,
       Activation::Gelu, HeadRule::Sizes, {}},
      {Layout::Clip, "clip", "clip (OpenAI CLIP / OpenCLIP VisionTransformer)", 1e-5f,
       "default (CLIP's LayerNorm 1e-5)", PosInterp::Timm,
       "OpenCLIP resize_pos_embed: size=, bicubic, antialias (OpenAI CLIP itself never resamples)", Stats::Clip,
       Activation::QuickGelu, HeadRule::D64,
       {{"proj", kClipProj}, {"visual.proj", kClipProj}, {"transformer.*", kClipText},
        {"token_embedding.*", kClipText}, {"positional_embedding", kClipText}, {"ln_final.*", kClipText},
        {"text_projection", kClipText}, {"logit_scale", kClipText}, {"logit_bias", kClipText},
        {"attn_mask", kClipText}, {"input_resolution", "OpenAI's record of the input size (an int)"},
        {"context_length", kClipText}, {"vocab_size", kClipText}}},
      {Layout::VitPytorch, "vit-pytorch", "vit-pytorch (lucidrains/vit-pytorch ViT)", 1e-5f,
       "default (vit-pytorch nn.LayerNorm 1e-5)", PosInterp::Timm,
       "vit-pytorch does not resample its positions; timm's call is used", Stats::ImageNet, Activation::Gelu,
       HeadRule::Inner64, {}},
      {Layout::SimpleVit, "vit-pytorch-simple",
       "vit-pytorch-simple (lucidrains/vit-pytorch SimpleViT: no class token, 2-D sin-cos positions)", 1e-5f,
       "default (vit-pytorch nn.LayerNorm 1e-5)", PosInterp::Timm,
       "SimpleViT computes its sin-cos positions for any grid", Stats::ImageNet, Activation::Gelu,
       HeadRule::Inner64, {}},
    };
    const std::vector<LayoutInfo> v = variant_rows();
    r.insert(r.end(), v.begin(), v.end());
    return r;
  }();
  return rows;
}
// clang-format on

bool matches(const char* pattern, const std::string& name) {
  const std::string p = pattern;
  if (!p.empty() && p.back() == '*') return name.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0;
  return name == p;
}

}  // namespace

const LayoutInfo& layout_info(Layout l) {
  for (const LayoutInfo& r : table())
    if (r.layout == l) return r;
  throw Error("layout_info: no row for layout " + std::to_string(static_cast<int>(l)));
}

std::string layout_name(Layout l) { return layout_info(l).name; }

std::string activation_name(Activation a) {
  switch (a) {
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu-tanh";
    case Activation::QuickGelu: return "quickgelu";
  }
  return "?";
}

Activation parse_activation(const std::string& s) {
  if (s == "gelu") return Activation::Gelu;
  if (s == "gelu-tanh" || s == "gelu_tanh" || s == "gelu_pytorch_tanh" || s == "gelu_new") return Activation::GeluTanh;
  if (s == "quickgelu" || s == "quick_gelu") return Activation::QuickGelu;
  throw Error("activation must be gelu, gelu-tanh or quickgelu, found '" + s + "'");
}

std::string pool_name(Pool p) {
  switch (p) {
    case Pool::ClassToken: return "class token";
    case Pool::MeanPatches: return "mean of the patch tokens";
    case Pool::MeanAll: return "mean of every token";
    case Pool::Map: return "attention-pool probe";
  }
  return "?";
}

Pool parse_pool(const std::string& s) {
  if (s == "cls" || s == "token") return Pool::ClassToken;
  if (s == "mean" || s == "avg") return Pool::MeanPatches;
  if (s == "mean-all") return Pool::MeanAll;
  if (s == "map") return Pool::Map;
  throw Error("pool must be cls, mean, mean-all or map, found '" + s + "'");
}

std::string ignored_reason(Layout l, const std::string& name) {
  for (const IgnoredTensors& g : layout_info(l).ignored)
    if (matches(g.pattern, name)) return g.reason;
  return "";
}

}  // namespace attnmap
