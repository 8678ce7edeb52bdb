// schemes.hpp - how each layout names the canonical (timm) tensors, and which layout a file is.
// Internal to checkpoint/ (weights.cpp builds the model through these).
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "checkpoint/layouts.hpp"
#include "checkpoint/weights_json.hpp"

namespace attnmap {

/// A file's tensor names after the wrappers training code adds are removed: DataParallel "module.", DINO's
/// "backbone.", Lightning / hub "model." (repeatedly), and facebookresearch DINOv2's chunked blocks
/// ("blocks.C.I.rest" -> "blocks.I.rest"); of a state dict holding "student.*" and "teacher.*" (DINOv2's
/// SSLMetaArch), the teacher's. Maps each such name to the name in the file; nothing is copied.
struct KeyIndex {
  std::map<std::string, std::string> names;    ///< normalised -> in the file (float tensors)
  std::map<std::string, std::string> skipped;  ///< normalised -> in the file (tensors of a dtype not read)
  std::string stripped;                        ///< the wrapper prefix of the first name, for messages
  /// Tensors set aside before any layout is applied, in the file's names, with the reason: a DINO / DINOv2
  /// training state dict holding both networks as "student.*" and "teacher.*" is read as its teacher.
  std::map<std::string, std::string> set_aside;
  bool has(const std::string& n) const { return names.count(n) != 0 || skipped.count(n) != 0; }
};

/// Builds the index. Throws attnmap::Error naming both tensors when two names become one.
KeyIndex index_keys(const RawWeights& raw);

/// How a layout names the canonical tensors: canonical name -> normalised name in the file.
struct Scheme {
  Layout layout = Layout::Timm;
  bool separate_qkv = false;  ///< query / key / value as three linears (Hugging Face) instead of one fused qkv
  std::function<std::string(const std::string&)> name = [](const std::string& c) { return c; };
  /// The MLP activation the naming's own code defaults to where it differs from the layout's (Hugging Face
  /// SigLIP names read as timm-siglip: SiglipVisionConfig's hidden_act gelu_pytorch_tanh), with why; unset:
  /// the layout's.
  std::optional<Activation> act;
  std::string act_why;
};

/// The layout of a file by the tensors it holds (the first family whose tell-tale tensors are present) and
/// its scheme. Throws attnmap::Error naming the file and the tensors each known layout starts with.
Scheme detect_scheme(const KeyIndex& idx, const std::string& path);

/// timm Eva's scheme (vit_loader_eva.cpp): LayerScale gamma_1 / gamma_2, q_proj / k_proj / v_proj when the
/// attention is not fused. `detected` is returned unless the file has Eva's tell-tale tensors
/// (attn.q_bias without a relative position table, mlp.fc1_g, attn.q_proj, or reg_token + gamma_1 without
/// pos_embed) or `architecture` names a timm Eva model (eva_*, eva02_*, *_dinov3*, ...).
/// A facebookresearch DINOv3 state dict (storage_tokens or rope_embed.periods) gets the dinov3 layout's scheme
/// (storage_tokens the registers, SwiGLU w1 / w2 / w3). Throws attnmap::Error (`path` in the message).
Scheme eva_or(const Scheme& detected, const KeyIndex& idx, const std::optional<std::string>& architecture,
              const std::string& path);

}  // namespace attnmap
