// weights.hpp - the ViT's hyper-parameters and weights, and the one loader that fills them from a file.
// Follows the ggml/llama.cpp clip convention: an hparams struct with defaults, a per-layer weights struct,
// one loader that names any missing tensor.
#pragma once
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "weights_json.hpp"

namespace attnmap {

/// Hyper-parameters; defaults are timm's vit_*_patch16_224 conventions.
struct HParams {
  std::string layout = "timm";  ///< "timm" (timm / DINO names) or "seed" (the guide's single layer)
  int image_w = 224, image_h = 224;  ///< model input size in pixels
  int patch = 16;                    ///< patch size P (pixels)
  int grid_w = 14, grid_h = 14;      ///< patch grid: image / patch
  int dim = 0;                       ///< token width D
  int depth = 0;                     ///< number of encoder blocks
  int num_heads = 1;                 ///< attention heads H
  int head_dim = 0;                  ///< d_k per head
  int mlp_dim = 0;                   ///< hidden width of the MLP (0: no MLP)
  int num_prefix = 1;                ///< tokens before the patch tokens (class token first)
  float eps = 1e-6f;                 ///< LayerNorm epsilon (timm default)
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  ///< ImageNet (timm IMAGENET_DEFAULT_MEAN)
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};   ///< ImageNet (timm IMAGENET_DEFAULT_STD)
  bool residual_mlp = true;   ///< timm block (LN, attention, residual, LN, MLP, residual); false: seed
  bool cls_is_mean = false;   ///< seed layout without cls_token: class token = mean of patch tokens
  std::optional<int> default_layer;        ///< config "default_layer": the model's preferred view
  std::optional<std::string> default_head; ///< config "default_head"
  std::vector<std::string> labels;         ///< config "labels": class names of the classifier head
  /// Where each value came from: name -> "config (file)", "inferred from ...", "default", "command line".
  std::map<std::string, std::string> source;

  int tokens() const { return num_prefix + grid_w * grid_h; }
  int inner() const { return num_heads * head_dim; }
};

/// A LayerNorm's affine parameters, each (D); empty when the model has none.
struct LayerNormW {
  std::vector<float> weight, bias;
  bool present() const { return !weight.empty(); }
};

/// An nn.Linear: weight (out, in) row-major, bias (out) or empty.
struct LinearW {
  std::vector<float> weight, bias;
  int out = 0, in = 0;
  bool present() const { return !weight.empty(); }
};

/// One encoder block's weights.
struct BlockWeights {
  LayerNormW norm1;  ///< (D)
  LinearW qkv;       ///< (3*H*dk, D): rows [q; k; v], heads contiguous inside each
  LinearW proj;      ///< (D, H*dk); absent in the seed layout
  LayerNormW norm2;  ///< (D)
  LinearW fc1;       ///< (M, D)
  LinearW fc2;       ///< (D, M)
};

/// Everything the forward pass needs.
struct ViTWeights {
  HParams hp;
  LinearW patch_embed;            ///< (D, 3*P*P) in (channel, row, column) order; absent: token = pixels
  std::vector<float> cls_token;   ///< (D); empty when hp.cls_is_mean
  std::vector<float> pos_embed;   ///< (T, D) for T = hp.tokens(); empty: zero
  std::vector<BlockWeights> blocks;
  LayerNormW norm;                ///< final LayerNorm (D), optional
  LinearW head;                   ///< classifier (C, D), optional
  std::vector<std::string> notices;  ///< things worth telling the user (ignored keys, guessed heads)
};

/// Values given on the command line; they override the file's config.
struct ModelOverrides {
  std::optional<int> num_heads;
  std::optional<std::array<float, 3>> mean, std;
};

/// Builds a ViT from parsed tensors: detects the layout by key names, reads the "config" object, infers
/// what it leaves out (patch size from the patch-embedding weight, grid from pos_embed, depth from the
/// block count, heads = D/64 with a notice), checks every tensor's shape.
/// Throws attnmap::Error naming the file and the tensor with expected vs found shape, for a missing
/// tensor, a wrong shape or an inconsistent config.
ViTWeights build_model(const RawWeights& raw, const ModelOverrides& ov = {});

/// Reads a weights file (attnmap JSON v1) and builds the model. Throws attnmap::Error.
ViTWeights load_model(const std::string& path, const ModelOverrides& ov = {});

}  // namespace attnmap
