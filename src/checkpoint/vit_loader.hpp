// vit_loader.hpp - from a file's tensors, named by a layout's scheme, to ViTWeights: every tensor taken
// with its shape checked, and every tensor of the file accounted for. Internal to checkpoint/.
#pragma once
#include <string>

#include "checkpoint/file_config.hpp"
#include "checkpoint/schemes.hpp"
#include "checkpoint/weights.hpp"

namespace attnmap {

/// Every ViT layout but the seed one, through its naming scheme: patch embedding, prefix tokens, position
/// embedding (or SimpleViT's computed table), the blocks, the final norm, pooling and the classifier.
/// Every tensor of the file is consumed or matched against the layout's list of tensors that cannot change
/// the maps (ViTWeights::tensors says which and why); any other tensor stops the load.
/// Throws attnmap::Error naming the file and the tensor (missing, wrong shape, not read by this layout),
/// or the setting the file does not hold and the layout cannot fix (heads, activation).
ViTWeights build_vit(const RawWeights& raw, const KeyIndex& idx, const Scheme& sc, const FileConfig& fc,
                     const ModelOverrides& ov);

/// The guide's single attention layer (W_Q, W_K, W_V; optional W_E, b_E, cls_token, pos_embed).
ViTWeights build_seed(const RawWeights& raw, const KeyIndex& idx, const FileConfig& fc, const ModelOverrides& ov);

/// timm Eva's settings its files do not hold (vit_loader_eva.cpp): DINOv3 architectures' LayerNorm eps 1e-5,
/// EVA-02's OPENAI_CLIP mean / std (timm's eva02 pretrained_cfg), each with its source. hp.layout == Eva.
void eva_defaults(HParams& hp);

}  // namespace attnmap
