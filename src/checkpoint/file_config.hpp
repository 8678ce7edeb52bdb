// file_config.hpp - the configuration read with a weights file (its own "config" object, a side
// config.json, the command line), as weights.cpp merges it and vit_loader.cpp applies it. Internal to
// checkpoint/.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/layouts.hpp"
#include "checkpoint/weights.hpp"

namespace attnmap {

/// Config values from one or more sources; `src` says where each came from.
struct FileConfig {
  std::optional<int> num_heads, patch_size, image_w, image_h, default_layer;
  std::optional<float> eps, crop_pct;
  std::optional<std::array<float, 3>> mean, std;
  std::optional<std::string> default_head, interpolation, architecture;
  std::optional<Activation> act;  ///< "act" (attnmap), "hidden_act" (Hugging Face), "quick_gelu" (OpenCLIP)
  std::optional<Pool> pool;       ///< "pool": "cls" / "token", "mean" / "avg", "mean-all", "map"
  bool hf_config = false;         ///< a Hugging Face config.json was read (its missing keys: the class defaults)
  std::vector<std::string> labels;
  std::map<std::string, std::string> src;
  /// timm Eva's rotary settings and global_pool as given (config keys or timm config.json model_args, kEvaArgs), checked
  /// where they are read (vit_loader_eva.cpp).
  nlohmann::json eva_args = nlohmann::json::object();
  /// Hugging Face BeitConfig's switches (kHfBeitArgs, from config.json), checked against the tensors (vit_loader_beit.cpp).
  nlohmann::json beit_args = nlohmann::json::object();
};

/// BeitConfig / Data2VecVisionConfig keys that say which tensors its model has (issue 44), with the config class's
/// default (what save_pretrained leaves out): a file that disagrees is refused by name.
constexpr const char* kHfBeitArgs[] = {"use_relative_position_bias", "use_shared_relative_position_bias",
                                       "use_absolute_position_embeddings", "layer_scale_init_value"};

/// The timm Eva settings its tensors do not fix (read by vit_loader_eva.cpp): model_args of its rotary
/// position embedding, and timm config.json's global_pool (what the classifier reads).
constexpr const char* kEvaArgs[] = {"use_rot_pos_emb", "rope_type", "ref_feat_shape", "rope_temperature",
                                     "rope_rotate_half", "rope_grid_offset", "rope_grid_indexing", "global_pool",
                                     "use_post_norm", "use_abs_pos_emb", "num_reg_tokens",
                                     // the final LayerNorms (vit_loader_resolve.cpp check_final_norm): timm Eva's
                                     // switches, timm VisionTransformer's final_norm / fc_norm
                                     "use_fc_norm", "use_post_transformer_norm", "final_norm", "fc_norm"};

/// Where `key` came from ("config (file)" when not recorded).
std::string src_of(const FileConfig& fc, const std::string& key);

/// hp.image_w / image_h and the grid from the config, or from `n_patches` patch positions (a square grid),
/// or 224 (`default_why` says why that default is right for the layout). Throws attnmap::Error for a size
/// that is not a multiple of the patch or does not match the positions.
void resolve_grid(HParams& hp, const FileConfig& fc, int64_t n_patches, bool have_positions,
                  const std::string& path, const std::string& pos_name,
                  const std::string& default_why = "default (224)");

/// The size `v` as an int; throws attnmap::Error(what: dimension out of range) outside 1..2^24.
int to_int(int64_t v, const std::string& what);

}  // namespace attnmap
