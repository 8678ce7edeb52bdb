// vit_loader_internal.hpp - what the pieces of the ViT loader share (vit_loader.cpp, vit_loader_embed.cpp,
// vit_loader_resolve.cpp): the Loader, which takes tensors by canonical name with their shapes checked, and
// the steps one piece calls in another. Internal to checkpoint/.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/vit_loader.hpp"
#include "core/error.hpp"

namespace attnmap {
namespace detail {

inline int64_t dim(const Tensor& t, int i) { return t.shape[static_cast<size_t>(i)]; }

/// timm / unilm BEiT or Hugging Face BEiT (issue 44): relative position tables, a grid without pos_embed.
inline bool beit_like(Layout l) { return l == Layout::Beit || l == Layout::HfBeit; }

// Looks tensors up by canonical name through the layout's scheme and the file's key index, checks shapes,
// remembers which tensors were used and why the others were not. Messages name tensors as in the file.
class Loader {
 public:
  Loader(const RawWeights& raw, const KeyIndex& idx, const Scheme& scheme) : raw_(raw), idx_(idx), scheme_(scheme) {}

  /// The tensor's name in the file (with its wrapper prefix); for an absent one, the name it would have.
  std::string file_name(const std::string& canon) const {
    const std::string n = scheme_.name(canon);
    auto it = idx_.names.find(n);
    if (it != idx_.names.end()) return it->second;
    auto sk = idx_.skipped.find(n);
    return sk != idx_.skipped.end() ? sk->second : idx_.stripped + n;
  }

  const Tensor* find(const std::string& canon) {
    auto it = idx_.names.find(scheme_.name(canon));
    if (it == idx_.names.end()) return nullptr;
    used_.insert(it->first);
    return &raw_.tensors.at(it->second);
  }
  /// True when the file has the tensor, also in a dtype attnmap skips (safetensors I32, BOOL, FP8): taking
  /// it then names that dtype, so an optional tensor is never silently treated as absent.
  bool has(const std::string& canon) const { return idx_.has(scheme_.name(canon)); }
  /// True when the file has a tensor of this (normalised) name, whatever the layout calls it.
  bool file_has(const std::string& name) const { return idx_.has(name); }

  const Tensor& need(const std::string& canon, const std::string& expected) {
    const Tensor* t = find(canon);
    if (!t) {
      auto sk = idx_.skipped.find(scheme_.name(canon));
      if (sk != idx_.skipped.end())
        throw Error(raw_.path + ": tensor '" + sk->second + "' has dtype " + raw_.skipped.at(sk->second) +
                    ", which attnmap does not read (expected F32, F16, BF16 or F64 of shape " + expected + ")");
      missing(canon, expected);
    }
    return *t;
  }

  /// The tensor's data, which must have exactly `shape` (a view of the file's mapping stays a view).
  Floats take(const std::string& canon, const std::vector<int64_t>& shape) {
    const Tensor& t = need(canon, shape_str(shape));
    if (t.shape != shape) throw shape_error(canon, shape_str(shape), t.shape);
    return t.data;
  }
  /// Optional tensor of exactly `shape`; empty when absent.
  Floats take_opt(const std::string& canon, const std::vector<int64_t>& shape) {
    if (!has(canon)) return {};
    return take(canon, shape);
  }

  /// Throws the missing-tensor error for `canon`, with `why` (if any) after the expected shape.
  [[noreturn]] void missing(const std::string& canon, const std::string& expected, const std::string& why = "") const {
    throw Error(raw_.path + ": missing tensor '" + file_name(canon) + "' (expected shape " + expected +
                (why.empty() ? "" : "; " + why) + ")");
  }

  Error shape_error(const std::string& canon, const std::string& expected, const std::vector<int64_t>& found) const {
    return Error(raw_.path + ": tensor '" + file_name(canon) + "' has shape " + shape_str(found) + ", expected " + expected);
  }

  /// The tensor named as in the file (wrapper prefixes removed), marked as read; nullptr when absent.
  const Tensor* find_name(const std::string& name) {
    auto it = idx_.names.find(name);
    if (it == idx_.names.end()) return nullptr;
    used_.insert(it->first);
    return &raw_.tensors.at(it->second);
  }

  /// Marks the canonical tensor (if the file has it) as not read, for `reason`.
  void skip(const std::string& canon, const std::string& reason) { skip_name(scheme_.name(canon), reason); }
  /// The same for a tensor named as in the file (wrapper prefixes removed).
  void skip_name(const std::string& name, const std::string& reason) {
    if (idx_.has(name)) reasons_[name] = reason;
  }

  /// Every tensor of the file, consumed or not read with its reason. Throws attnmap::Error naming every
  /// tensor that is neither (the layout does not know what it does, so a map without it could be wrong).
  std::vector<ViTWeights::TensorUse> account() const;

  const std::string& path() const { return raw_.path; }
  const RawWeights& raw() const { return raw_; }
  const Scheme& scheme() const { return scheme_; }

 private:
  const RawWeights& raw_;
  const KeyIndex& idx_;
  const Scheme& scheme_;
  std::set<std::string> used_;
  std::map<std::string, std::string> reasons_;
};

// vit_loader.cpp: a LayerNorm, a Linear, the prefix token rows.
LayerNormW take_norm(Loader& ld, const std::string& prefix, int64_t d);
LayerNormW take_norm_opt(Loader& ld, const std::string& prefix, int64_t d);
LinearW take_linear(Loader& ld, const std::string& prefix, int64_t out, int64_t in, bool bias_required = false);
Floats take_tokens(Loader& ld, const std::string& canon, int64_t D, int64_t& K);

// vit_loader_embed.cpp: what comes before the blocks (the patch embedding, the prefix tokens, the positions).
int64_t take_patch_conv(Loader& ld, const FileConfig& fc, ViTWeights& w);
int64_t take_patch_linear(Loader& ld, const FileConfig& fc, ViTWeights& w);
bool take_prefix_tokens(Loader& ld, int64_t D, ViTWeights& w);
void take_pos_embed(Loader& ld, const FileConfig& fc, bool fb_registers, int64_t D, ViTWeights& w);

// vit_loader_resolve.cpp: the settings the tensors do not fix (heads, pooling, activation).
void resolve_heads(const FileConfig& fc, const ModelOverrides& ov, const std::string& path, int64_t inner,
                   ViTWeights& w);
bool resolve_pool(Loader& ld, const FileConfig& fc, const ModelOverrides& ov, ViTWeights& w);
void resolve_activation(Loader& ld, const FileConfig& fc, const ModelOverrides& ov, ViTWeights& w);

// vit_loader_eva.cpp: timm Eva's rotary position embedding (EVA-02 'cat', DINOv3), from the architecture name
// and config model_args; refuses Eva variants attnmap does not run, by name.
void resolve_rope(Loader& ld, const FileConfig& fc, ViTWeights& w);
// vit_loader_eva.cpp: an MLP's two input halves, EVA-02 / timm SwiGLU mlp.fc1_g (M, D) and mlp.fc1_x (M, D),
// as one (2M, D) linear with rows [gate; x] (silu(gate) * x, as swiglu_forward computes).
LinearW take_split_swiglu(Loader& ld, const std::string& b, int64_t D, int64_t& M);
// vit_loader_eva.cpp: what timm builds after the blocks of Eva `arch` (eva.py at aa4b585): the pool (`pool` when the
// config or command line gives it, else the architecture's default), whether fc_norm and norm exist (model_args
// use_fc_norm / use_post_transformer_norm over the defaults), and `why` (the eva.py lines) for the default pool.
struct EvaHead {
  Pool pool = Pool::MeanPatches;
  bool fc_norm = false, norm = true;
  std::string why;
};
EvaHead eva_head(const FileConfig& fc, const std::string& arch, const Pool* pool);
// vit_loader_eva.cpp: the pool of an Eva whose config names the architecture and no global_pool: timm's default for
// it (`why` says so); with `check` (no --pool given) throws attnmap::Error when the file has a head and final
// LayerNorms other than that default builds (saved with another global_pool: the pool is not in the file).
Pool eva_default_pool(const Loader& ld, const FileConfig& fc, const ViTWeights& w, bool check, std::string& why);
// vit_loader_resolve.cpp: a classifier on the mean patch token without any final LayerNorm (neither norm nor
// fc_norm) in a timm-named family whose code always has one is refused, naming the tensor(s) expected.
void check_final_norm(const Loader& ld, const FileConfig& fc, const ViTWeights& w, int64_t D);
// vit_loader_eva.cpp (issue 44): facebookresearch DINOv3's own files. dinov3_config: fc with the head count
// of rope_embed.periods (D / (4 x its length); a config or command-line count that differs is refused), RMSNorm
// refused. take_dinov3_rope (from resolve_rope): the stored periods into hp. take_dinov3_masks (after the
// blocks): each qkv bias times its bias_mask, mask_token checked finite, the eps refused for a file without
// storage tokens and no config.
FileConfig dinov3_config(Loader& ld, const FileConfig& fc, const ModelOverrides& ov, int64_t D);
void take_dinov3_rope(Loader& ld, ViTWeights& w);
void take_dinov3_masks(Loader& ld, const FileConfig& fc, ViTWeights& w);
// vit_loader_beit.cpp (issue 29): BEiT's relative position tables, its grid without pos_embed, its heads.
FileConfig beit_config(Loader& ld, const FileConfig& fc, const ModelOverrides& ov);
void take_beit_grid(Loader& ld, const FileConfig& fc, ViTWeights& w);
void take_beit_rel_pos(Loader& ld, ViTWeights& w);

}  // namespace detail

/// vit_loader_cait.cpp: a CaiT file (Layout::Cait), as build_vit for the other layouts.
ViTWeights build_cait(const RawWeights& raw, const KeyIndex& idx, const Scheme& sc, const FileConfig& fc,
                      const ModelOverrides& ov);

}  // namespace attnmap
