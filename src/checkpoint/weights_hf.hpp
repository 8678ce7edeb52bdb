// weights_hf.hpp - Hugging Face checkpoints as save_pretrained writes them: sharded safetensors
// (model.safetensors.index.json + model-0000K-of-0000N.safetensors) and model folders (weights +
// config.json + preprocessor_config.json). Kept apart from weights.cpp; the loader calls in through
// load_model_hf, model_files_hf, add_hf_side_config and check_hf_side_config.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/weights.hpp"

namespace attnmap {

/// True when `path` is a regular file that is a safetensors index rather than weights: its name ends in
/// ".index.json", or it is a JSON object whose first key is "metadata" or "weight_map" (what
/// transformers' save_pretrained writes: json.dumps(index, indent=2, sort_keys=True)). Reads at most 4 KiB.
bool is_safetensors_index(const std::string& path);

/// Reads a Hugging Face sharded-safetensors index {"metadata": {...}, "weight_map": {tensor: shard file}}
/// and every shard it lists (relative to the index's folder), each memory-mapped and checked as a single
/// safetensors file is (load_weights_safetensors); each tensor is taken from the shard the map names.
/// A shard's __metadata__["config"] becomes the config (shards that carry one must agree). Tensors in a shard
/// but not in the map are ignored with a notice. RawWeights::path is the index.
/// Throws attnmap::Error, one line naming the index or shard and the tensor, for: a malformed index or
/// weight_map, a shard path that is absolute or has a '..' component, a missing or unreadable shard, a
/// tensor the map lists but its shard lacks, a tensor present in two shards, and any error of the shard
/// itself (safetensors header, dtype, non-finite values).
RawWeights load_weights_safetensors_index(const std::string& index_path);

/// The shard files an index lists, as paths (index folder + name), sorted, each once; {} when the index
/// cannot be read. For model_files (outputs must not replace them); no checks beyond parsing.
std::vector<std::string> index_shard_files(const std::string& index_path);

/// The weights file inside a Hugging Face model folder, as transformers picks it: model.safetensors, else
/// model.safetensors.index.json. A folder with only pytorch_model.bin (or its index) is refused: .bin
/// weights come with the torch.save reader. Notes (e.g. an index beside model.safetensors, not read) go to
/// `notes`. Throws attnmap::Error naming the folder and what it holds.
std::string hf_folder_weights(const std::string& dir, std::vector<std::string>& notes);

/// load_model's hook: for `-w FOLDER` (a Hugging Face model folder) or `-w INDEX` (a sharded-safetensors
/// index) reads the weights, the side configs of that folder (read_side_config) and builds the model;
/// std::nullopt for any other path (a plain weights file, which load_model reads itself). Throws
/// attnmap::Error as load_model does.
std::optional<ViTWeights> load_model_hf(const std::string& path, const ModelOverrides& ov);

/// model_files' hook: for a folder or an index, the files load_model_hf reads (weights or index, every shard,
/// config.json, preprocessor_config.json, open_clip_config.json of that folder, whether or not they exist); std::nullopt otherwise.
std::optional<std::vector<std::string>> model_files_hf(const std::string& path);

/// read_side_config's hook, for the Hugging Face files in `dir`: adds to `sc` config.json's hidden_size and
/// num_hidden_layers (checked against the weights by check_hf_side_config) and image_size / model_type
/// notes, and preprocessor_config.json's resample (-> interpolation; PIL codes 0 nearest, 1 lanczos,
/// 2 bilinear, 3 bicubic, 4 box, 5 hamming), size / crop_size with do_center_crop (-> crop_pct =
/// crop / shortest edge, timm's convention; -> image_size when config.json has none), do_normalize false
/// (-> mean 0, std 1) and do_rescale / rescale_factor other than 1/255 (folded into mean and std, which is
/// exact: (x*255*r - m) / s = (x - m/(255 r)) / (s/(255 r))). Sources read "config.json (PATH: key)" and
/// "preprocessor_config.json (PATH: key)". A timm hub config.json is left to read_side_config.
/// Throws attnmap::Error naming the file and key for a value of the wrong type.
void add_hf_side_config(const std::string& dir, SideConfig& sc);

/// build_model's hook: config.json's hidden_size and num_hidden_layers, when given, must equal the weights'
/// D and depth (then the depth's source is config.json, as for patch_size). Throws attnmap::Error naming
/// the config file, the key and the tensor-derived value.
void check_hf_side_config(ViTWeights& w, const SideConfig& side);

}  // namespace attnmap
