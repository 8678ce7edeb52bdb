#include "checkpoint/vit_loader.hpp"

#include <algorithm>
#include <cmath>

#include "checkpoint/vit_loader_internal.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {

using namespace detail;

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// What an unread tensor looks like, for the message that stops the load.
std::string looks_like(const std::string& name) {
  if (contains(name, "q_norm") || contains(name, "k_norm")) return "a query/key norm; this layout does not apply one";
  if (contains(name, "gamma") || contains(name, "lambda") || contains(name, "layer_scale") || contains(name, ".ls"))
    return "a LayerScale; this layout does not apply one";
  if (contains(name, "rel_pos") || contains(name, "relative_position")) return "a relative position bias";
  if (contains(name, "rope") || contains(name, "freqs")) return "a rotary position embedding";
  if (contains(name, "norm") || contains(name, "ln")) return "a LayerNorm this layout does not apply";
  if (contains(name, "token")) return "a token this layout does not insert";
  if (contains(name, "pos")) return "a position embedding this layout does not add";
  return "not part of this layout";
}

bool vit_pytorch(Layout l) { return l == Layout::VitPytorch || l == Layout::SimpleVit; }

}  // namespace

namespace detail {

std::vector<ViTWeights::TensorUse> Loader::account() const {
  std::vector<ViTWeights::TensorUse> out;
  std::vector<std::string> unknown;
  auto visit = [&](const std::string& norm, const std::string& orig, const std::string& shape) {
    std::string reason;
    if (!used_.count(norm)) {
      auto r = reasons_.find(norm);
      reason = r != reasons_.end() ? r->second : ignored_reason(scheme_.layout, norm);
      if (reason.empty()) {
        unknown.push_back(orig + " " + shape + ": " + looks_like(norm));
        return;
      }
    }
    out.push_back({orig, shape, reason});
  };
  for (const auto& kv : idx_.names) visit(kv.first, kv.second, shape_str(raw_.tensors.at(kv.second).shape));
  for (const auto& kv : idx_.skipped) visit(kv.first, kv.second, "(" + raw_.skipped.at(kv.second) + ")");
  for (const auto& kv : idx_.set_aside) {
    auto t = raw_.tensors.find(kv.first);
    out.push_back({kv.first, t != raw_.tensors.end() ? shape_str(t->second.shape) : "(" + raw_.skipped.at(kv.first) + ")",
                   kv.second});
  }
  if (!unknown.empty()) {
    std::string s;
    for (size_t i = 0; i < unknown.size() && i < 8; ++i) s += (i ? "; " : "") + unknown[i];
    if (unknown.size() > 8) s += "; ... (" + std::to_string(unknown.size()) + " in all)";
    throw Error(raw_.path + ": " + std::to_string(unknown.size()) + (unknown.size() == 1 ? " tensor" : " tensors") +
                " that the " + layout_name(scheme_.layout) +
                " layout does not read and that could change the maps: " + s +
                ". attnmap stops rather than draw a map without them (docs/checkpoints.md lists what each layout reads)");
  }
  return out;
}

LayerNormW take_norm(Loader& ld, const std::string& prefix, int64_t d) {
  LayerNormW n;
  n.weight = ld.take(prefix + ".weight", {d});
  n.bias = ld.take(prefix + ".bias", {d});
  return n;
}

LayerNormW take_norm_opt(Loader& ld, const std::string& prefix, int64_t d) {
  if (!ld.has(prefix + ".weight") && !ld.has(prefix + ".bias")) return {};
  return take_norm(ld, prefix, d);
}

LinearW take_linear(Loader& ld, const std::string& prefix, int64_t out, int64_t in, bool bias_required) {
  LinearW l;
  l.weight = ld.take(prefix + ".weight", {out, in});
  l.bias = bias_required ? ld.take(prefix + ".bias", {out}) : ld.take_opt(prefix + ".bias", {out});
  l.out = static_cast<int>(out);
  l.in = static_cast<int>(in);
  return l;
}

// A prefix token tensor (1, K, D) or (K, D) or, for K = 1, (D); returns its K rows.
Floats take_tokens(Loader& ld, const std::string& canon, int64_t D, int64_t& K) {
  const Tensor& t = ld.need(canon, "(1, K, " + std::to_string(D) + ")");
  const bool ok = (t.rank() == 3 && dim(t, 0) == 1 && dim(t, 2) == D) || (t.rank() == 2 && dim(t, 1) == D) ||
                  (t.rank() == 1 && dim(t, 0) == D);
  if (!ok || t.numel() == 0) throw ld.shape_error(canon, "(1, K, " + std::to_string(D) + ")", t.shape);
  K = t.numel() / D;
  return t.data;
}

}  // namespace detail

namespace {

// The attention's fused (3 inner, D) input projection and its bias, from whichever form the layout stores:
// a fused qkv (timm, torchvision / CLIP in_proj, vit-pytorch to_qkv), separate query/key/value (Hugging
// Face), or a bias split into q_bias / v_bias with no key bias (BEiT-style; the key bias is zero).
LinearW take_qkv(Loader& ld, const std::string& b, int64_t D, int64_t inner) {
  LinearW l;
  l.out = static_cast<int>(3 * inner);
  l.in = static_cast<int>(D);
  if (ld.scheme().separate_qkv) {
    const char* parts[3] = {"q", "k", "v"};
    std::vector<float> bias;
    int with_bias = 0;
    for (const char* p : parts) {
      const Floats w = ld.take(b + "attn." + p + ".weight", {inner, D});
      l.weight.insert_back(w.begin(), w.end());
      Floats bb = ld.take_opt(b + "attn." + p + ".bias", {inner});
      if (!bb.empty()) ++with_bias;
      if (bb.empty()) bb.assign(static_cast<size_t>(inner), 0.0f);
      bias.insert(bias.end(), bb.begin(), bb.end());
    }
    // timm Eva (qkv_fused=False) and Hugging Face BEiT (BeitSelfAttention: key = nn.Linear(bias=False)): query
    // and value have biases, the key never has one (its bias is zero).
    const bool eva_qv = (ld.scheme().layout == Layout::Eva || ld.scheme().layout == Layout::HfBeit) && with_bias == 2 &&
                        !ld.has(b + "attn.k.bias");
    if (with_bias > 0 && with_bias < 3 && !eva_qv) {  // HF ViTConfig.qkv_bias gives all three or none
      for (const char* p : parts)
        if (!ld.has(b + "attn." + p + ".bias")) ld.missing(b + "attn." + p + ".bias", shape_str({inner}), "query, key and value biases come together");
    }
    if (with_bias) l.bias = std::move(bias);
    return l;
  }
  const std::string qkv = b + "attn.qkv";
  const std::string want = "(" + std::to_string(3 * inner) + ", " + std::to_string(D) + ")";
  const Tensor& w = ld.need(qkv + ".weight", want);
  if (w.shape != std::vector<int64_t>{3 * inner, D}) {
    std::string why = want;
    if (w.shape == std::vector<int64_t>{D, 3 * inner}) why += " (3D x D as nn.Linear stores it; this looks transposed, JAX/Flax style)";
    throw ld.shape_error(qkv + ".weight", why, w.shape);
  }
  l.weight = w.data;
  l.bias = ld.take_opt(qkv + ".bias", {3 * inner});
  if (l.bias.empty() && ld.has(b + "attn.q_bias")) {
    const Floats q = ld.take(b + "attn.q_bias", {inner});
    const Floats v = ld.take(b + "attn.v_bias", {inner});
    Floats k = ld.take_opt(b + "attn.k_bias", {inner});
    if (k.empty()) k.assign(static_cast<size_t>(inner), 0.0f);
    l.bias = q;
    l.bias.insert_back(k.begin(), k.end());
    l.bias.insert_back(v.begin(), v.end());
  }
  return l;
}

// Depth = 1 + the highest block index present (probed up to 4096), so that a block missing in the middle
// is named by the block loop as a missing tensor instead of silently ending the model there.
int count_blocks(Loader& ld) {
  int depth = 0;
  for (int i = 0; i < 4096; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    if (ld.has(b + "norm1.weight") || ld.has(b + "attn.qkv.weight") || ld.has(b + "attn.q.weight")) depth = i + 1;
  }
  if (depth == 0)
    throw Error(ld.path() + ": missing tensor '" + ld.file_name("blocks.0.norm1.weight") + "' (no encoder blocks found)");
  return depth;
}

// The attention's inner width H * d_k: D, or for vit-pytorch (whose dim_head is free) a third of to_qkv's rows.
int64_t attention_width(Loader& ld, int64_t D) {
  if (!vit_pytorch(ld.scheme().layout)) return D;
  const Tensor& t = ld.need("blocks.0.attn.qkv.weight", "(3 * heads * dim_head, D)");
  if (t.rank() != 2 || dim(t, 1) != D || dim(t, 0) % 3 != 0)
    throw ld.shape_error("blocks.0.attn.qkv.weight", "(3 * heads * dim_head, " + std::to_string(D) + ")", t.shape);
  return dim(t, 0) / 3;
}

// The MLP of block `b`: fc1 (M, D) / fc2 (D, M); or a SwiGLU as one (2M, D) input linear with rows [gate; x]:
// DINOv2's w12 / w3, timm's packed SwiGLUPacked / GluMlp(SiLU, gate first) fc1 (2M, D) with fc2 (D, M) (e.g.
// vit_giant_patch14_dinov2, EVA-02 tiny / small), or timm's SwiGLU with separate fc1_g / fc1_x (EVA-02 base /
// large, DINOv3 S+ / H+); and a sub-LayerNorm mlp.norm (M) before fc2 where present (EVA-02 scale_mlp). Sets
// hp.mlp_dim (M) and hp.swiglu.
void take_mlp(Loader& ld, const std::string& b, int64_t D, BlockWeights& blk, HParams& hp) {
  const bool split = ld.has(b + "mlp.fc1_g.weight") || ld.has(b + "mlp.fc1_x.weight");
  bool swiglu = ld.has(b + "mlp.w12.weight");
  int64_t M = 0;
  std::string out = "mlp.fc2";
  if (split) {
    blk.fc1 = take_split_swiglu(ld, b, D, M);
    swiglu = true;
  } else {
    const std::string in = swiglu ? "mlp.w12" : "mlp.fc1";
    if (swiglu) out = "mlp.w3";
    const Tensor& fc1 = ld.need(b + in + ".weight", swiglu ? "(2M, D)" : "(M, D)");
    if (fc1.rank() != 2 || dim(fc1, 1) != D || (swiglu && dim(fc1, 0) % 2 != 0))
      throw ld.shape_error(b + in + ".weight", std::string(swiglu ? "(2M, " : "(M, ") + std::to_string(D) + ")", fc1.shape);
    M = swiglu ? dim(fc1, 0) / 2 : dim(fc1, 0);
    if (!swiglu && M % 2 == 0 && ld.has(b + "mlp.fc2.weight")) {
      const Tensor& fc2 = ld.need(b + "mlp.fc2.weight", "(D, M)");
      if (fc2.rank() == 2 && dim(fc2, 1) * 2 == M) {  // timm SwiGLUPacked: fc2 reads half of fc1's width
        swiglu = true;
        M /= 2;
        if (b == "blocks.0.")
          hp.source["mlp"] = "SwiGLU: " + ld.file_name(b + "mlp.fc1.weight") + " " + shape_str(fc1.shape) + " is twice " +
                             ld.file_name(b + "mlp.fc2.weight") + "'s width " + shape_str(fc2.shape) +
                             ": timm's packed SwiGLUPacked / GluMlp(SiLU, gate_last=False), silu(first half) * second half";
      }
    }
    blk.fc1 = take_linear(ld, b + in, swiglu ? 2 * M : M, D);
  }
  blk.fc2 = take_linear(ld, b + out, D, M);
  blk.mlp_norm = take_norm_opt(ld, b + "mlp.norm", M);
  if (b != "blocks.0." && blk.mlp_norm.present() != hp.has_mlp_norm)
    ld.missing(std::string("blocks.") + (hp.has_mlp_norm ? b.substr(7) : "0.") + "mlp.norm.weight", shape_str({M}),
               "the MLP sub-LayerNorm is in some blocks and not in others");
  hp.has_mlp_norm = blk.mlp_norm.present();
  if (!hp.swiglu && swiglu && b != "blocks.0.") ld.missing("blocks.0.mlp.w12.weight", "(2M, D)", "block " + b + " has a SwiGLU MLP");
  hp.swiglu = swiglu;
  hp.mlp_dim = static_cast<int>(M);
}

// Encoder block i: LN1, fused qkv (3 inner, D), optional per-head query/key norms (d_k), proj (D, inner), LN2,
// the MLP, LayerScale gammas (D) if present; sets hp.mlp_dim, hp.layer_scale and hp.qk_norm.
BlockWeights take_block(Loader& ld, int i, int64_t D, int64_t inner, HParams& hp) {
  const std::string b = "blocks." + std::to_string(i) + ".";
  BlockWeights blk;
  blk.norm1 = take_norm(ld, b + "norm1", D);
  blk.qkv = take_qkv(ld, b, D, inner);
  blk.q_norm = take_norm_opt(ld, b + "attn.q_norm", hp.head_dim);
  blk.k_norm = take_norm_opt(ld, b + "attn.k_norm", hp.head_dim);
  if (blk.q_norm.present() != blk.k_norm.present())
    ld.missing(b + (blk.q_norm.present() ? "attn.k_norm.weight" : "attn.q_norm.weight"), shape_str({hp.head_dim}),
               "query and key norms come together");
  if (i > 0 && blk.q_norm.present() != hp.qk_norm)
    ld.missing(b + "attn.q_norm.weight", shape_str({hp.head_dim}), "the other blocks have it");
  hp.qk_norm = blk.q_norm.present();
  // vit-pytorch's to_out is nn.Identity when heads == 1 and dim_head == D: no projection.
  if (!(vit_pytorch(ld.scheme().layout) && inner == D && !ld.has(b + "attn.proj.weight")))
    blk.proj = take_linear(ld, b + "attn.proj", D, inner);
  else
    hp.attn_proj = false;
  blk.norm2 = take_norm(ld, b + "norm2", D);
  take_mlp(ld, b, D, blk, hp);
  blk.ls1 = ld.take_opt(b + "ls1.gamma", {D});
  blk.ls2 = ld.take_opt(b + "ls2.gamma", {D});
  // LayerScale is model-wide (timm init_values, DINOv2 layerscale): a gamma missing where others have it was lost.
  const bool ls = !blk.ls1.empty() || !blk.ls2.empty();
  if (ls && (blk.ls1.empty() || blk.ls2.empty()))
    ld.missing(b + (blk.ls1.empty() ? "ls1.gamma" : "ls2.gamma"), shape_str({D}), "LayerScale comes in pairs");
  if (i > 0 && ls != hp.layer_scale)
    ld.missing(b.substr(0, 7) + (ls ? "0" : std::to_string(i)) + ".ls1.gamma", shape_str({D}),
               "LayerScale is in some blocks and not in others");
  hp.layer_scale = ls;
  return blk;
}

// A bias is a model-wide choice (timm qkv_bias / proj_bias / Mlp bias, nn.Linear(bias=False)): present in
// some blocks and not in others means a tensor was lost, and is refused by the name of the first missing one.
// Appends to no_bias the block biases no block has.
void check_block_biases(Loader& ld, const ViTWeights& w, std::vector<std::string>& no_bias) {
  const Scheme& sc = ld.scheme();
  const int depth = w.hp.depth;
  const struct {
    const char* canon;  // canonical name after "blocks.{i}."
    const LinearW BlockWeights::*lin;
  } kinds[] = {{"attn.qkv.bias", &BlockWeights::qkv},
               {"attn.proj.bias", &BlockWeights::proj},
               {ld.has("blocks.0.mlp.w12.weight") ? "mlp.w12.bias" : ld.has("blocks.0.mlp.fc1_g.weight") ? "mlp.fc1_g.bias" : "mlp.fc1.bias", &BlockWeights::fc1},
               {ld.has("blocks.0.mlp.w12.weight") ? "mlp.w3.bias" : "mlp.fc2.bias", &BlockWeights::fc2}};
  for (const auto& bk : kinds) {
    const std::string kind = bk.canon;
    if (kind == "attn.proj.bias" && !w.blocks.front().proj.present()) continue;
    const std::string rest = sc.separate_qkv && kind == "attn.qkv.bias" ? "attn.q.bias" : kind;  // HF names
    int with = 0;
    for (const BlockWeights& blk : w.blocks) with += !(blk.*(bk.lin)).bias.empty();
    if (with == 0) {
      if (rest == "attn.q.bias") {
        for (const char* part : {"attn.q.bias", "attn.k.bias", "attn.v.bias"}) no_bias.push_back(ld.file_name(std::string("blocks.*.") + part));
      } else {
        no_bias.push_back(ld.file_name("blocks.*." + rest));
      }
      continue;
    }
    if (with == depth) continue;
    const auto has_bias = [&](const BlockWeights& blk) { return !(blk.*(bk.lin)).bias.empty(); };
    const auto first_missing = std::find_if_not(w.blocks.begin(), w.blocks.end(), has_bias);
    const Floats& sibling = ((*std::find_if(w.blocks.begin(), w.blocks.end(), has_bias)).*(bk.lin)).bias;
    const int64_t n = sc.separate_qkv && kind == "attn.qkv.bias" ? w.hp.inner() : static_cast<int64_t>(sibling.size());
    ld.missing("blocks." + std::to_string(first_missing - w.blocks.begin()) + "." + rest, shape_str({n}),
               "the other blocks have it");
  }
}

// nn.MultiheadAttention's fused in_proj (3D, D) (Hugging Face SiglipMultiheadAttentionPoolingHead's
// head.attention.in_proj_weight / in_proj_bias) as timm's q (rows [0, D)) and kv (rows [D, 3D): [k; v]), which is
// how MultiheadAttention splits it (F.multi_head_attention_forward, _in_projection_packed).
void take_fused_pool_in_proj(Loader& ld, int64_t D, AttentionPoolW& p) {
  const Floats w = ld.take("attn_pool.in_proj.weight", {3 * D, D});
  const Floats b = ld.take_opt("attn_pool.in_proj.bias", {3 * D});
  const size_t DD = static_cast<size_t>(D * D), d = static_cast<size_t>(D);
  p.q.weight = std::vector<float>(w.begin(), w.begin() + DD);
  p.kv.weight = std::vector<float>(w.begin() + DD, w.end());
  if (!b.empty()) {
    p.q.bias = std::vector<float>(b.begin(), b.begin() + d);
    p.kv.bias = std::vector<float>(b.begin() + d, b.end());
  }
  p.q.out = p.q.in = p.kv.in = static_cast<int>(D);
  p.kv.out = static_cast<int>(2 * D);
}

// timm's AttentionPoolLatent (attn_pool.*): one latent probe, q (D, D), kv (2D, D) (or a fused in_proj, above),
// proj, norm, mlp.
AttentionPoolW take_attn_pool(Loader& ld, int64_t D) {
  AttentionPoolW p;
  int64_t K = 0;
  p.latent = take_tokens(ld, "attn_pool.latent", D, K);
  if (K != 1)
    throw Error(ld.path() + ": tensor '" + ld.file_name("attn_pool.latent") + "' holds " + std::to_string(K) +
                " latent probes; attnmap reads an attention pool with one (latent_len = 1)");
  if (ld.has("attn_pool.in_proj.weight")) {
    take_fused_pool_in_proj(ld, D, p);
  } else {
    p.q = take_linear(ld, "attn_pool.q", D, D);
    p.kv = take_linear(ld, "attn_pool.kv", 2 * D, D);
  }
  p.proj = take_linear(ld, "attn_pool.proj", D, D);
  p.norm = take_norm(ld, "attn_pool.norm", D);
  const Tensor& fc1 = ld.need("attn_pool.mlp.fc1.weight", "(M, D)");
  if (fc1.rank() != 2 || dim(fc1, 1) != D) throw ld.shape_error("attn_pool.mlp.fc1.weight", "(M, " + std::to_string(D) + ")", fc1.shape);
  p.fc1 = take_linear(ld, "attn_pool.mlp.fc1", dim(fc1, 0), D);
  p.fc2 = take_linear(ld, "attn_pool.mlp.fc2", D, dim(fc1, 0));
  return p;
}

// The final LayerNorm (D), fc_norm, an attention pool and the classifier head (C, D) with a DeiT head_dist,
// when present. Appends a missing head bias to no_bias.
void take_norm_and_head(Loader& ld, const RawWeights& raw, const FileConfig& fc, const ModelOverrides& ov,
                        int64_t D, ViTWeights& w, std::vector<std::string>& no_bias) {
  const Scheme& sc = ld.scheme();
  w.norm = take_norm_opt(ld, "norm", D);
  w.fc_norm = take_norm_opt(ld, "fc_norm", D);
  if (ld.has("attn_pool.latent")) w.attn_pool = take_attn_pool(ld, D);
  const bool pool_known = resolve_pool(ld, fc, ov, w);
  const bool tv_pre_logits = sc.layout == Layout::Torchvision && raw.tensors.count("heads.pre_logits.weight");
  if (tv_pre_logits) {
    for (const char* t : {"heads.pre_logits.weight", "heads.pre_logits.bias", "heads.head.weight", "heads.head.bias"})
      ld.skip_name(t, "torchvision's representation layer (pre_logits) and the head after it: attnmap computes no "
                      "logits for such a head (the maps do not use it)");
    return;
  }
  if (!pool_known) {
    const std::string why = "vit-pytorch's classifier: the file does not say pool='cls' or 'mean' (give " + setting_ref("pool") +
                            " cls|mean for top-5 and class-specific views; the maps do not use it)";
    ld.skip("head.weight", why);
    ld.skip("head.bias", why);
    return;
  }
  if (!ld.has("head.weight")) return;
  const Tensor& h = ld.need("head.weight", "(C, D)");
  if (h.rank() != 2 || dim(h, 1) != D) throw ld.shape_error("head.weight", "(C, " + std::to_string(D) + ")", h.shape);
  w.head = take_linear(ld, "head", dim(h, 0), D);
  // timm VisionTransformerDistilled (DeiT): in eval mode the logits average both heads.
  if (w.hp.num_dist == 1 && ld.has("head_dist.weight")) w.head_dist = take_linear(ld, "head_dist", dim(h, 0), D);
  // The classifier reads the class token after the final LayerNorm (timm forward_head, HF layernorm,
  // torchvision encoder.ln): a head without it would give other probabilities than the model's.
  if (w.hp.pool == Pool::ClassToken && !w.norm.present())
    ld.missing("norm.weight", shape_str({D}), "the classifier head reads the final LayerNorm");
  check_final_norm(ld, fc, w, D);  // a mean pool with neither norm nor fc_norm (vit_loader_resolve.cpp)
  // Hugging Face BEiT's use_mean_pooling: the classifier reads pooler.layernorm(the mean of the patch tokens).
  if (w.hp.pool == Pool::MeanPatches && sc.layout == Layout::HfBeit && !w.fc_norm.present())
    ld.missing("fc_norm.weight", shape_str({D}), "use_mean_pooling: the classifier reads the pooler's LayerNorm of the mean patch token");
  if (w.head.bias.empty()) no_bias.push_back(ld.file_name("head.bias"));
}

// CLIP's visual projection into the joint image-text space (the zero-shot head reads it): OpenAI / OpenCLIP
// `proj` / `visual.proj` (D, E), stored transposed as (E, D); Hugging Face CLIPModel `visual_projection.weight`
// (E, D) as is. Absent: w.proj stays empty.
void take_clip_proj(Loader& ld, int64_t D, ViTWeights& w) {
  const bool hf = ld.scheme().layout == Layout::HfClip;
  if (!hf && ld.scheme().layout != Layout::Clip) return;
  std::string name = hf ? "visual_projection.weight" : "visual.proj";
  if (!hf && !ld.file_has(name)) name = "proj";
  if (!ld.file_has(name)) return;
  const Tensor* t = ld.find_name(name);
  const std::string expect = hf ? "(E, " + std::to_string(D) + ")" : "(" + std::to_string(D) + ", E)";
  if (!t)
    throw Error(ld.path() + ": tensor '" + name + "' has a dtype attnmap does not read (expected F32, F16, BF16 or F64 of shape " +
                expect + ")");
  if (t->rank() != 2 || dim(*t, hf ? 1 : 0) != D)
    throw Error(ld.path() + ": tensor '" + name + "' has shape " + shape_str(t->shape) + ", expected " + expect);
  const int64_t E = dim(*t, hf ? 0 : 1);
  w.proj.out = static_cast<int>(E);
  w.proj.in = static_cast<int>(D);
  if (hf) {
    w.proj.weight = t->data;
    return;
  }
  w.proj.weight.resize(static_cast<size_t>(E * D));
  float* p = w.proj.weight.mutable_data();
  for (int64_t d = 0; d < D; ++d)
    for (int64_t e = 0; e < E; ++e) p[static_cast<size_t>(e * D + d)] = t->data[static_cast<size_t>(d * E + e)];
}

}  // namespace

ViTWeights build_vit(const RawWeights& raw, const KeyIndex& idx, const Scheme& sc, const FileConfig& fc,
                     const ModelOverrides& ov) {
  if (sc.layout == Layout::Cait) return build_cait(raw, idx, sc, fc, ov);  // vit_loader_cait.cpp
  Loader ld(raw, idx, sc);
  ViTWeights w;
  HParams& hp = w.hp;
  hp.layout = sc.layout;
  const int64_t D = vit_pytorch(sc.layout) ? take_patch_linear(ld, fc, w) : take_patch_conv(ld, fc, w);
  const bool fb_registers = take_prefix_tokens(ld, D, w);
  if (beit_like(sc.layout) && !ld.has("pos_embed"))
    take_beit_grid(ld, fc, w);  // BEiT as released: relative positions only
  else
    take_pos_embed(ld, fc, fb_registers, D, w);
  w.norm_pre = take_norm_opt(ld, "norm_pre", D);
  hp.depth = count_blocks(ld);
  hp.source["depth"] = "inferred from the block count";
  const int64_t inner = attention_width(ld, D);
  resolve_heads(beit_like(sc.layout)               ? beit_config(ld, fc, ov)
                : sc.layout == Layout::Dinov3 ? dinov3_config(ld, fc, ov, D)  // heads from rope_embed.periods
                                              : fc,
                ov, raw.path, inner, w);
  resolve_activation(ld, fc, ov, w);
  resolve_rope(ld, fc, w);  // timm Eva: EVA-02 / DINOv3 rotary positions (vit_loader_eva.cpp)
  for (int i = 0; i < hp.depth; ++i) w.blocks.push_back(take_block(ld, i, D, inner, hp));
  if (beit_like(sc.layout)) take_beit_rel_pos(ld, w);
  if (sc.layout == Layout::Dinov3) take_dinov3_masks(ld, fc, w);  // facebookresearch DINOv3: qkv.bias_mask
  std::vector<std::string> no_bias;
  check_block_biases(ld, w, no_bias);
  if (w.patch_embed.bias.empty()) no_bias.push_back(ld.file_name("patch_embed.proj.bias"));
  take_norm_and_head(ld, raw, fc, ov, D, w, no_bias);
  take_clip_proj(ld, D, w);
  if (!no_bias.empty()) {
    std::string s;
    for (size_t i = 0; i < no_bias.size(); ++i) s += (i ? ", " : "") + no_bias[i];
    w.notices.push_back("no bias tensors (computed as zero, as nn.Linear(bias=False)): " + s);
  }
  w.tensors = ld.account();
  return w;
}

// ---- seed layout (the guide's single attention layer) ---------------------------------------------------

namespace {

int patch_from(int64_t features, const std::optional<int>& cfg, const std::string& path, const std::string& what) {
  if (cfg) {
    if (static_cast<int64_t>(3) * *cfg * *cfg != features)
      throw Error(path + ": " + what + " has " + std::to_string(features) + " input features, expected 3*P*P = " +
                  std::to_string(3 * *cfg * *cfg) + " for config patch_size " + std::to_string(*cfg));
    return *cfg;
  }
  const auto p = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(features) / 3.0)));
  if (p <= 0 || 3 * p * p != features)
    throw Error(path + ": " + what + " has " + std::to_string(features) +
                " input features, which is not 3*P*P for any patch size P");
  return static_cast<int>(p);
}

// W_E (3PP, D) as a patch embedding (D, 3PP) (its transpose), with b_E; sets hp.patch.
void take_seed_embedding(Loader& ld, const FileConfig& fc, int64_t D, ViTWeights& w) {
  HParams& hp = w.hp;
  const Tensor& we = ld.need("W_E", "(3*P*P, D)");
  if (we.rank() != 2 || dim(we, 1) != D) throw ld.shape_error("W_E", "(3*P*P, " + std::to_string(D) + ")", we.shape);
  hp.patch = patch_from(dim(we, 0), fc.patch_size, ld.path(), "W_E");
  const int64_t in = dim(we, 0);
  w.patch_embed.out = hp.dim;
  w.patch_embed.in = static_cast<int>(in);
  w.patch_embed.weight.resize(static_cast<size_t>(in * D));
  float* pe = w.patch_embed.weight.mutable_data();
  for (int64_t r = 0; r < in; ++r)
    for (int64_t c = 0; c < D; ++c) pe[static_cast<size_t>(c * in + r)] = we.data[static_cast<size_t>(r * D + c)];
  w.patch_embed.bias = ld.take_opt("b_E", {D});
  hp.source["patch_size"] = fc.patch_size ? src_of(fc, "patch_size") : "inferred from W_E";
}

}  // namespace

ViTWeights build_seed(const RawWeights& raw, const KeyIndex& idx, const FileConfig& fc, const ModelOverrides& ov) {
  Scheme sc;
  sc.layout = Layout::Seed;
  Loader ld(raw, idx, sc);
  const std::string& path = raw.path;
  ViTWeights w;
  HParams& hp = w.hp;
  hp.layout = Layout::Seed;
  hp.residual_mlp = false;
  hp.depth = 1;
  hp.num_heads = 1;
  hp.source["num_heads"] = "seed layout (one head)";
  hp.source["depth"] = "seed layout (one layer)";
  if (ov.num_heads && *ov.num_heads != 1) throw Error(path + ": the seed layout has exactly one head");

  const Tensor& wq = ld.need("W_Q", "(D, d_k)");
  if (wq.rank() != 2) throw ld.shape_error("W_Q", "(D, d_k)", wq.shape);
  const int64_t D = dim(wq, 0), dk = dim(wq, 1);
  hp.dim = to_int(D, path + ": W_Q");
  hp.head_dim = to_int(dk, path + ": W_Q");
  const Floats q = wq.data;
  const Floats k = ld.take("W_K", {D, dk});
  const Floats v = ld.take("W_V", {D, dk});

  if (ld.has("W_E")) {
    take_seed_embedding(ld, fc, D, w);
  } else {
    hp.patch = patch_from(D, fc.patch_size, path, "W_Q (no W_E: the token is the pixel vector)");
    hp.source["patch_size"] = fc.patch_size ? src_of(fc, "patch_size") : "inferred from D = 3*P*P";
  }

  const Tensor* pos = ld.find("pos_embed");
  int64_t n_pos = 0;
  if (pos) {
    if (pos->rank() < 2 || pos->shape.back() != D || (pos->rank() == 3 && dim(*pos, 0) != 1) || pos->rank() > 3)
      throw ld.shape_error("pos_embed", "(1+N, " + std::to_string(D) + ")", pos->shape);
    n_pos = dim(*pos, pos->rank() - 2);
  }
  resolve_grid(hp, fc, n_pos - 1, pos != nullptr, path, "pos_embed");
  if (pos) w.pos_embed = pos->data;

  if (const Tensor* cls = ld.find("cls_token")) {
    if (cls->numel() != D) throw ld.shape_error("cls_token", "(" + std::to_string(D) + ",)", cls->shape);
    w.cls_token = cls->data;
  } else {
    hp.cls_is_mean = true;
    w.notices.push_back("no cls_token: the class token is the mean of the patch tokens");
  }

  // Q = X W_Q  <=>  nn.Linear with weight W_Q^T: stack [W_Q^T; W_K^T; W_V^T] as a fused (3 d_k, D) qkv.
  BlockWeights blk;
  blk.qkv.out = static_cast<int>(3 * dk);
  blk.qkv.in = hp.dim;
  blk.qkv.weight.resize(static_cast<size_t>(3 * dk * D));
  float* qkv = blk.qkv.weight.mutable_data();
  const Floats* mats[3] = {&q, &k, &v};
  for (int m = 0; m < 3; ++m)
    for (int64_t r = 0; r < D; ++r)
      for (int64_t c = 0; c < dk; ++c)
        qkv[static_cast<size_t>((m * dk + c) * D + r)] = (*mats[m])[static_cast<size_t>(r * dk + c)];
  w.blocks.push_back(std::move(blk));
  w.tensors = ld.account();
  return w;
}

}  // namespace attnmap
