// clip_text.cpp - CLIP's text tower (OpenAI, OpenCLIP and Hugging Face names): weights from a state dict,
// encode_text, logits. Follows openai/CLIP clip/model.py line by line, with open_clip's and HF's variations,
// and SigLIP's text tower (HF modeling_siglip.py SiglipTextTransformer; open_clip transformer.py TextTransformer
// with no_causal_mask, pool_type last, proj_bias); see clip_text.hpp. The configs are read in clip_text_config.cpp.
#include "model/clip_text.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/error.hpp"
#include "model/kernels.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"

namespace attnmap {
namespace {

// Reads tensors by OpenAI CLIP's names, checking shapes, and records each name read.
class TextReader {
 public:
  TextReader(const TensorMap& t, const std::string& where, std::vector<std::string>& used)
      : t_(t), where_(where), used_(used) {}

  const Tensor& find(const std::string& name, const std::string& expected) const {
    const auto it = t_.find(name);
    if (it == t_.end()) throw Error(where_ + ": missing tensor '" + name + "' (expected shape " + expected + ")");
    return it->second;
  }
  Error shape_error(const std::string& name, const std::string& expected, const std::vector<int64_t>& found) const {
    return Error(where_ + ": tensor '" + name + "' has shape " + shape_str(found) + ", expected " + expected);
  }
  // A tensor of exactly `shape`.
  Floats take(const std::string& name, const std::vector<int64_t>& shape) {
    const Tensor& t = find(name, shape_str(shape));
    if (t.shape != shape) throw shape_error(name, shape_str(shape), t.shape);
    used_.push_back(name);
    return t.data;
  }
  // A tensor of rank `rank` whose dimensions (all >= 1 and within int) are not known yet; `expected` describes
  // it in messages ("(V, 512)"). Fills dims.
  const Tensor& take_rank(const std::string& name, int rank, const std::string& expected, std::vector<int>& dims) {
    const Tensor& t = find(name, expected);
    bool ok = t.rank() == rank;
    for (int64_t d : t.shape) ok = ok && d >= 1 && d <= INT_MAX / 4;
    if (!ok) throw shape_error(name, expected, t.shape);
    dims.assign(t.shape.begin(), t.shape.end());
    used_.push_back(name);
    return t;
  }
  LayerNormW layernorm(const std::string& name, int W) {
    LayerNormW ln;
    ln.weight = take(name + ".weight", {W});
    ln.bias = take(name + ".bias", {W});
    return ln;
  }
  LinearW linear(const std::string& weight, const std::string& bias, int out, int in) {
    LinearW l;
    l.weight = take(weight, {out, in});
    l.bias = take(bias, {out});
    l.out = out;
    l.in = in;
    return l;
  }

 private:
  const TensorMap& t_;
  const std::string& where_;
  std::vector<std::string>& used_;
};

// The names one family gives the text tower's tensors (OpenAI and OpenCLIP share them; HF has its own).
struct TowerNames {
  std::string family;  // for messages: "OpenAI CLIP's text tower (clip/model.py)"
  std::string tok, pos, blocks, ln_1, in_proj_w, in_proj_b, out_proj, ln_2, fc1, fc2, ln_final, proj;
  std::string proj_bias;  // HF: the projection's bias ("" for CLIPModel's bias-free text_projection)
  std::vector<std::string> owned;  // name prefixes (or exact names) of the tower: unread ones are refused
  bool hf = false;
};

TowerNames tower_names(const ClipTextConfig& cfg) {
  TowerNames n;
  if (cfg.layout == ClipTextLayout::hugging_face || cfg.layout == ClipTextLayout::hugging_face_siglip) {
    const bool siglip = cfg.layout == ClipTextLayout::hugging_face_siglip;
    const std::string P = cfg.prefix.empty() ? "text_model." : cfg.prefix;
    n.family = siglip ? "Hugging Face SiglipModel's text tower (modeling_siglip.py SiglipTextTransformer)"
                      : "Hugging Face CLIPModel's text tower (modeling_clip.py CLIPTextTransformer)";
    n.tok = P + "embeddings.token_embedding.weight";
    n.pos = P + "embeddings.position_embedding.weight";
    n.blocks = P + "encoder.layers.";
    n.ln_1 = "layer_norm1", n.out_proj = "self_attn.out_proj", n.ln_2 = "layer_norm2";
    n.fc1 = "mlp.fc1", n.fc2 = "mlp.fc2", n.ln_final = P + "final_layer_norm", n.proj = "text_projection.weight";
    n.owned = {P, "text_projection."};
    if (siglip) {  // SiglipTextTransformer.head = nn.Linear(hidden_size, projection_size), bias included
      n.proj = P + "head.weight", n.proj_bias = P + "head.bias";
    }
    n.hf = true;
    return n;
  }
  const std::string& P = cfg.prefix;
  n.family = cfg.layout == ClipTextLayout::openai ? "OpenAI CLIP's text tower (clip/model.py)"
                                                  : "OpenCLIP's text tower (open_clip transformer.py TextTransformer)";
  n.tok = P + "token_embedding.weight";
  n.pos = P + "positional_embedding";
  n.blocks = P + "transformer.resblocks.";
  n.ln_1 = "ln_1", n.in_proj_w = "attn.in_proj_weight", n.in_proj_b = "attn.in_proj_bias";
  n.out_proj = "attn.out_proj", n.ln_2 = "ln_2", n.fc1 = "mlp.c_fc", n.fc2 = "mlp.c_proj";
  n.ln_final = P + "ln_final", n.proj = P + "text_projection";
  if (P.empty()) {
    // logit_bias under OpenAI's layout: an OpenCLIP SigLIP-style model read without its config, whose text
    // settings (no causal mask, last pooling) only the config tells: refused, not ignored
    n.owned = {"transformer.", "token_embedding.", "ln_final.", "logit_bias"};
    if (cfg.layout == ClipTextLayout::open_clip) n.owned.insert(n.owned.end(), {"text_projection.", "attn_mask"});
  } else {
    n.owned = {P};
  }
  return n;
}

// CLIP build_model: transformer_layers = len(set(k.split(".")[2] for k in state_dict if
// k.startswith("transformer.resblocks"))). Here 1 + the highest index, so that a block missing below it is
// named as a missing tensor. A name whose part after the prefix is no block number is refused.
int count_blocks(const TensorMap& tensors, const TowerNames& names, const std::string& where) {
  int layers = 0;
  const std::string& p = names.blocks;
  for (auto it = tensors.lower_bound(p); it != tensors.end() && it->first.compare(0, p.size(), p) == 0; ++it) {
    const std::string& name = it->first;
    const size_t dot = name.find('.', p.size());
    const std::string idx = name.substr(p.size(), dot == std::string::npos ? std::string::npos : dot - p.size());
    const bool digits = !idx.empty() && idx.size() <= 6 && std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || dot == std::string::npos)
      throw Error(where + ": tensor '" + name + "' is not part of " + names.family + " (expected " + p +
                  "N.<name> with a block number N)");
    layers = std::max(layers, std::stoi(idx) + 1);
  }
  return layers;
}

// Where a setting came from, for messages.
std::string setting_source(const ClipTextConfig& cfg, const std::string& setting) {
  const auto it = cfg.source.find(setting);
  return it != cfg.source.end() ? it->second : "the text tower's config";
}

// The heads: OpenAI's build_model takes width // 64 (cfg.heads 0); the others say it in their config.
// nn.MultiheadAttention (and open_clip's / HF's attention) accept only heads that divide the width.
int text_heads(int W, const ClipTextConfig& cfg, const std::string& ln_name, const std::string& where) {
  if (cfg.heads > 0) {
    if (W % cfg.heads != 0)
      throw Error(where + ": text width " + std::to_string(W) + " (" + ln_name + ") is not divisible by the " +
                  std::to_string(cfg.heads) + " heads of " + setting_source(cfg, "heads"));
    return cfg.heads;
  }
  const int H = W / 64;
  if (H == 0 || W % H != 0)
    throw Error(where + ": text width " + std::to_string(W) + " (" + ln_name + ") gives width // 64 = " +
                std::to_string(H) + " heads (OpenAI CLIP's build_model), which " +
                (H == 0 ? std::string("is no attention") : "do not divide the width"));
  return H;
}

// A size read from a tensor's shape against the config's setting (0: none given).
void check_setting(int found, int expected, const std::string& setting, const std::string& tensor,
                   const ClipTextConfig& cfg, const std::string& where) {
  if (expected > 0 && found != expected)
    throw Error(where + ": tensor '" + tensor + "' gives " + setting + " " + std::to_string(found) + ", but " +
                setting_source(cfg, setting) + " says " + std::to_string(expected));
}

// Refuses any name owned by the text tower that was not read (e.g. an OpenCLIP LayerScale ls_1 under OpenAI's
// layout): leaving it out would change the features silently.
void refuse_unread(const TensorMap& tensors, const std::vector<std::string>& used, const TowerNames& names,
                   const std::string& where) {
  const std::set<std::string> read(used.begin(), used.end());
  for (const auto& [name, t] : tensors) {
    bool text = false;
    for (const std::string& o : names.owned) text = text || name.rfind(o, 0) == 0;
    if (text && read.count(name) == 0)
      throw Error(where + ": tensor '" + name + "' " + shape_str(t.shape) + " is not part of " + names.family +
                  "; this layout cannot use it");
  }
}

// One block's tensors under `p` (e.g. "transformer.resblocks.3.").
ClipTextBlock read_block(TextReader& rd, const TowerNames& nm, const std::string& p, int W, int hidden, bool ls) {
  ClipTextBlock b;
  b.ln_1 = rd.layernorm(p + nm.ln_1, W);
  if (nm.hf) {  // q, k, v stacked into nn.MultiheadAttention's in_proj rows [q; k; v]
    std::vector<float> wt, bs;
    for (const char* x : {"q_proj", "k_proj", "v_proj"}) {
      const LinearW l = rd.linear(p + "self_attn." + x + ".weight", p + "self_attn." + x + ".bias", W, W);
      wt.insert(wt.end(), l.weight.begin(), l.weight.end());
      bs.insert(bs.end(), l.bias.begin(), l.bias.end());
    }
    b.in_proj.weight = std::move(wt), b.in_proj.bias = std::move(bs);
    b.in_proj.out = 3 * W, b.in_proj.in = W;
  } else {
    b.in_proj = rd.linear(p + nm.in_proj_w, p + nm.in_proj_b, 3 * W, W);
  }
  b.out_proj = rd.linear(p + nm.out_proj + ".weight", p + nm.out_proj + ".bias", W, W);
  if (ls) b.ls_1 = rd.take(p + "ls_1.gamma", {W});
  b.ln_2 = rd.layernorm(p + nm.ln_2, W);
  b.c_fc = rd.linear(p + nm.fc1 + ".weight", p + nm.fc1 + ".bias", hidden, W);
  b.c_proj = rd.linear(p + nm.fc2 + ".weight", p + nm.fc2 + ".bias", W, hidden);
  if (ls) b.ls_2 = rd.take(p + "ls_2.gamma", {W});
  return b;
}

// logit_scale (and open_clip's logit_bias): shape (), or (1,) where open_clip's nonscalar_logit_scale allows.
float read_scalar(TextReader& rd, const TensorMap& t, const std::string& name, bool allow_1) {
  const auto it = t.find(name);
  if (allow_1 && it != t.end() && it->second.shape == std::vector<int64_t>{1}) return rd.take(name, {1})[0];
  return rd.take(name, {})[0];
}

// The end-of-text position and the rows to compute of one sequence; pads it in place where every position
// counts. `n` names it in messages.
struct SeqPlan {
  int pooled = 0;  // the row read
  int T = 0;       // positions computed: 0..T-1
};

SeqPlan plan_sequence(const ClipTextHParams& hp, std::vector<int32_t>& seq, size_t n) {
  const std::string what = "token sequence " + std::to_string(n);
  if (seq.empty()) throw Error(what + " is empty: expected <|startoftext|> ... <|endoftext|> ids");
  if (seq.size() > static_cast<size_t>(hp.context_length))
    throw Error(what + " has " + std::to_string(seq.size()) + " ids, more than the text tower's context of " +
                std::to_string(hp.context_length));
  int best = 0, eos = -1;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (seq[i] < 0 || seq[i] >= hp.vocab_size)
      throw Error(what + ": id " + std::to_string(seq[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary (0.." + std::to_string(hp.vocab_size - 1) + ")");
    if (seq[i] > seq[best]) best = static_cast<int>(i);
    if (eos < 0 && seq[i] == hp.eos_id) eos = static_cast<int>(i);
  }
  const bool full = !hp.causal || hp.pool == ClipTextPool::last;
  if (full) seq.resize(hp.context_length, hp.pad_id);  // the family's tokenizer pads to the context
  SeqPlan plan;
  switch (hp.pool) {
    case ClipTextPool::argmax:  // text.argmax(dim=-1): the first maximum
      if (seq[best] != hp.eot_id())
        throw Error(what + " has no <|endoftext|> (id " + std::to_string(hp.eot_id()) +
                    "): CLIP reads a text's feature at that token");
      plan.pooled = best;
      break;
    case ClipTextPool::eos:  // (text == eos_token_id).int().argmax(dim=-1): the first one (0 when none: refused)
      if (eos < 0)
        throw Error(what + " has no end-of-text id " + std::to_string(hp.eos_id) +
                    ": the text tower reads a text's feature at that token");
      plan.pooled = eos;
      break;
    case ClipTextPool::first: plan.pooled = 0; break;
    case ClipTextPool::last: plan.pooled = hp.context_length - 1; break;
  }
  plan.T = full ? hp.context_length : plan.pooled + 1;
  return plan;
}

// CLIP.build_attention_mask for T positions, once per head (H, T, T): 0 on and below the diagonal, -inf above
// (position i attends to 0..i).
std::vector<float> causal_mask(int H, int T) {
  std::vector<float> m(static_cast<size_t>(H) * T * T, 0.0f);
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < T; ++i)
      for (int j = i + 1; j < T; ++j) m[(static_cast<size_t>(h) * T + i) * T + j] = -std::numeric_limits<float>::infinity();
  return m;
}

// Work buffers of one encode_text call over R rows (every sequence's positions up to its end-of-text).
struct TextActs {
  std::vector<float> x, xn, qkv, att, hid, probs;  // (R, W), (R, W), (R, 3W), (R, W), (R, hidden), (H, T, T)
};

// One ResidualAttentionBlock on every sequence (clip/model.py ResidualAttentionBlock.forward; open_clip's with
// LayerScale; HF CLIPEncoderLayer is the same computation):
//   x = x + ls_1 * out_proj(attention(in_proj(ln_1(x)), mask));  x = x + ls_2 * c_proj(act(c_fc(ln_2(x)))).
void block_forward(const ClipTextHParams& hp, const ClipTextBlock& b, TextActs& a, const std::vector<int>& off,
                   const std::map<int, std::vector<float>>& masks) {
  const int W = hp.width, R = off.back();
  kernels::layernorm(a.xn.data(), a.x.data(), b.ln_1.weight.data(), b.ln_1.bias.data(), R, W, hp.eps);
  linear(a.qkv.data(), a.xn.data(), b.in_proj, R);  // (R, 3W) = [q | k | v], heads contiguous in each
  for (size_t n = 0; n + 1 < off.size(); ++n) {     // each sequence attends only within itself
    const int T = off[n + 1] - off[n];
    attention_forward(a.att.data() + static_cast<size_t>(off[n]) * W, a.probs.data(),
                      a.qkv.data() + static_cast<size_t>(off[n]) * 3 * W, T, hp.heads, hp.head_dim(),
                      hp.causal ? masks.at(T).data() : nullptr);
  }
  const float* g1 = b.ls_1.empty() ? nullptr : b.ls_1.data();
  const float* g2 = b.ls_2.empty() ? nullptr : b.ls_2.data();
  linear(nullptr, a.att.data(), b.out_proj, R, Precision::F32, Epilogue{nullptr, a.x.data(), g1});  // x += .
  kernels::layernorm(a.xn.data(), a.x.data(), b.ln_2.weight.data(), b.ln_2.bias.data(), R, W, hp.eps);
  linear(a.hid.data(), a.xn.data(), b.c_fc, R, Precision::F32, Epilogue{&hp.act, nullptr, nullptr});  // (R, hidden)
  linear(nullptr, a.hid.data(), b.c_proj, R, Precision::F32, Epilogue{nullptr, a.x.data(), g2});  // x += .
}

// The open_clip attn_mask buffer when a file holds it (it is not persistent): it must be the causal mask
// the tower applies (build_causal_mask: -inf above the diagonal, 0 elsewhere).
void read_attn_mask(TextReader& rd, const TensorMap& t, const std::string& name, const ClipTextHParams& hp,
                    const std::string& where) {
  if (t.count(name) == 0) return;
  const int C = hp.context_length;
  const Floats m = rd.take(name, {C, C});
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < C; ++j) {
      const float v = m[static_cast<size_t>(i) * C + j];
      const bool ok = hp.causal && (j > i ? std::isinf(v) && v < 0 : v == 0.0f);
      if (!ok)
        throw Error(where + ": tensor '" + name + "' is not the causal mask the config implies" +
                    (hp.causal ? "" : " (no_causal_mask: none)") + " at (" + std::to_string(i) + ", " +
                    std::to_string(j) + ")");
    }
}

// HF's position_ids buffer (older files save it): must be 0..C-1.
void read_position_ids(TextReader& rd, const TensorMap& t, const std::string& name, int C, const std::string& where) {
  if (t.count(name) == 0) return;
  const Floats ids = rd.take(name, {1, C});
  for (int i = 0; i < C; ++i)
    if (ids[i] != static_cast<float>(i))
      throw Error(where + ": tensor '" + name + "' holds " + std::to_string(ids[i]) + " at " + std::to_string(i) +
                  ", expected the positions 0.." + std::to_string(C - 1));
}

// The projection to the joint space: OpenAI / OpenCLIP `text_projection` (W, E) as is, OpenCLIP proj_bias
// `text_projection.{weight (E, W), bias (E)}` and HF `text_projection.weight` (E, W) transposed.
void read_projection(TextReader& rd, const TensorMap& t, const TowerNames& nm, ClipTextWeights& w,
                     const ClipTextConfig& cfg, const std::string& where) {
  const int W = w.hp.width;
  const std::string Ws = std::to_string(W);
  std::vector<int> d;
  if (!cfg.projection) {  // open_clip proj_type none: text_projection = None, the feature is the pooled row
    w.hp.embed_dim = W;
    check_setting(W, cfg.embed_dim, "embed_dim", nm.ln_final + ".weight", cfg, where);
    return;
  }
  const bool linear = nm.hf || (cfg.layout == ClipTextLayout::open_clip && t.count(nm.proj) == 0 &&
                                t.count(nm.proj + ".weight") > 0);
  const std::string name = nm.hf ? nm.proj : linear ? nm.proj + ".weight" : nm.proj;
  if (!linear) {
    const Tensor& proj = rd.take_rank(name, 2, "(" + Ws + ", E)", d);
    if (d[0] != W) throw rd.shape_error(name, "(" + Ws + ", E)", proj.shape);
    w.hp.embed_dim = d[1];
    w.text_projection = proj.data;
  } else {
    const Tensor& proj = rd.take_rank(name, 2, "(E, " + Ws + ")", d);
    if (d[1] != W) throw rd.shape_error(name, "(E, " + Ws + ")", proj.shape);
    const int E = w.hp.embed_dim = d[0];
    std::vector<float> tr(static_cast<size_t>(W) * E);
    for (int e = 0; e < E; ++e)
      for (int i = 0; i < W; ++i) tr[static_cast<size_t>(i) * E + e] = proj.data[static_cast<size_t>(e) * W + i];
    w.text_projection = std::move(tr);
    if (!nm.hf) w.text_projection_bias = rd.take(nm.proj + ".bias", {E});
    if (!nm.proj_bias.empty()) w.text_projection_bias = rd.take(nm.proj_bias, {E});
  }
  check_setting(w.hp.embed_dim, cfg.embed_dim, "embed_dim", name, cfg, where);
}

}  // namespace

const char* clip_text_pool_name(ClipTextPool pool) {
  switch (pool) {
    case ClipTextPool::argmax: return "argmax";
    case ClipTextPool::eos: return "eos";
    case ClipTextPool::first: return "first";
    case ClipTextPool::last: return "last";
  }
  return "?";
}

ClipTextWeights build_clip_text(const TensorMap& tensors, const std::string& where) {
  return build_clip_text(tensors, ClipTextConfig{}, where);
}

ClipTextWeights build_clip_text(const TensorMap& tensors, const ClipTextConfig& cfg, const std::string& where) {
  ClipTextWeights w;
  ClipTextHParams& hp = w.hp;
  hp.eps = cfg.eps, hp.act = cfg.act, hp.causal = cfg.causal, hp.pool = cfg.pool;
  hp.eos_id = cfg.eos_id, hp.pad_id = cfg.pad_id;
  hp.layer_scale = cfg.layer_scale;
  const TowerNames nm = tower_names(cfg);
  TextReader rd(tensors, where, w.tensors);
  std::vector<int> d;
  // build_model: transformer_width = ln_final.weight.shape[0], then the others from their shapes
  const std::string lnw = nm.ln_final + ".weight";
  w.ln_final.weight = rd.take_rank(lnw, 1, "(W)", d).data;
  const int W = hp.width = d[0];
  check_setting(W, cfg.width, "width", lnw, cfg, where);
  hp.heads = text_heads(W, cfg, lnw, where);
  w.ln_final.bias = rd.take(nm.ln_final + ".bias", {W});
  const std::string Ws = std::to_string(W);
  const Tensor& tok = rd.take_rank(nm.tok, 2, "(V, " + Ws + ")", d);
  if (d[1] != W) throw rd.shape_error(nm.tok, "(V, " + Ws + ")", tok.shape);
  hp.vocab_size = d[0];
  check_setting(hp.vocab_size, cfg.vocab_size, "vocab_size", nm.tok, cfg, where);
  w.token_embedding = tok.data;
  const Tensor& pos = rd.take_rank(nm.pos, 2, "(C, " + Ws + ")", d);
  if (d[1] != W) throw rd.shape_error(nm.pos, "(C, " + Ws + ")", pos.shape);
  hp.context_length = d[0];
  check_setting(hp.context_length, cfg.context_length, "context_length", nm.pos, cfg, where);
  w.positional_embedding = pos.data;
  hp.layers = count_blocks(tensors, nm, where);
  if (hp.layers == 0)
    throw Error(where + ": missing tensor '" + nm.blocks + "0." + nm.ln_1 + ".weight' (no text transformer blocks found)");
  check_setting(hp.layers, cfg.layers, "layers", nm.blocks + "N", cfg, where);
  // the MLP's width: 4W (OpenAI: d_model * 4), the config's (open_clip mlp_ratio, HF intermediate_size)
  hp.mlp_hidden = cfg.mlp_hidden > 0 ? cfg.mlp_hidden : 4 * W;
  for (int l = 0; l < hp.layers; ++l)
    w.blocks.push_back(read_block(rd, nm, nm.blocks + std::to_string(l) + ".", W, hp.mlp_hidden, hp.layer_scale));
  read_projection(rd, tensors, nm, w, cfg, where);
  const bool oc = cfg.layout == ClipTextLayout::open_clip;
  const bool hf_siglip = cfg.layout == ClipTextLayout::hugging_face_siglip;
  // torch.ones([]) * np.log(1 / 0.07): shape (); open_clip nonscalar_logit_scale and HF SiglipModel
  // (nn.Parameter(torch.randn(1))): (1,)
  w.logit_scale = read_scalar(rd, tensors, "logit_scale", oc || hf_siglip);
  if ((oc && tensors.count("logit_bias") > 0) || hf_siglip) {
    // logits = cos * logit_scale.exp() + logit_bias, scored each alone with torch.sigmoid (HF SiglipModel.forward
    // docstring; open_clip: init_logit_bias models, trained with SigLipLoss, zero-shot by sigmoid)
    w.logit_bias = read_scalar(rd, tensors, "logit_bias", true);
    w.rule = ScoreRule::sigmoid;
  }
  if (oc) read_attn_mask(rd, tensors, cfg.prefix + "attn_mask", hp, where);
  if (nm.hf) read_position_ids(rd, tensors, cfg.prefix.empty() ? "text_model.embeddings.position_ids"
                                                               : cfg.prefix + "embeddings.position_ids",
                               hp.context_length, where);
  refuse_unread(tensors, w.tensors, nm, where);
  return w;
}

void prepare_clip_text(const ClipTextWeights& w) {
  for (const ClipTextBlock& b : w.blocks)
    for (const LinearW* l : {&b.in_proj, &b.out_proj, &b.c_fc, &b.c_proj}) prepack_linear(*l);
}

std::vector<float> encode_text(const ClipTextWeights& w, const std::vector<std::vector<int32_t>>& ids) {
  const ClipTextHParams& hp = w.hp;
  const int W = hp.width, E = hp.embed_dim, N = static_cast<int>(ids.size());
  // each sequence's rows: positions 0..pooled with the causal mask (later ones cannot reach the pooled row),
  // every position of the padded sequence without it or for pool last
  std::vector<std::vector<int32_t>> seqs = ids;
  std::vector<int> off{0}, pooled;
  std::map<int, std::vector<float>> masks;  // causal mask (H, T, T) by length T
  int T_max = 0;
  for (size_t n = 0; n < seqs.size(); ++n) {
    const SeqPlan plan = plan_sequence(hp, seqs[n], n);
    off.push_back(off.back() + plan.T);
    pooled.push_back(off[n] + plan.pooled);
    if (hp.causal && masks.count(plan.T) == 0) masks[plan.T] = causal_mask(hp.heads, plan.T);
    T_max = std::max(T_max, plan.T);
  }
  if (N == 0) return {};
  const size_t R = static_cast<size_t>(off.back()), Wz = static_cast<size_t>(W);
  TextActs a;
  a.x.resize(R * Wz);         // (R, W)
  a.xn.resize(R * Wz);        // (R, W)
  a.qkv.resize(R * 3 * Wz);   // (R, 3W)
  a.att.resize(R * Wz);       // (R, W)
  a.hid.resize(R * static_cast<size_t>(hp.mlp_hidden));  // (R, hidden)
  a.probs.resize(static_cast<size_t>(hp.heads) * T_max * T_max);  // (H, T, T), one sequence at a time
  // x = token_embedding(text) + positional_embedding (CLIP.encode_text)
  for (int n = 0; n < N; ++n)
    for (int t = 0; t < off[n + 1] - off[n]; ++t) {
      const float* e = w.token_embedding.data() + static_cast<size_t>(seqs[n][t]) * Wz;
      const float* p = w.positional_embedding.data() + static_cast<size_t>(t) * Wz;
      float* x = a.x.data() + (static_cast<size_t>(off[n]) + t) * Wz;
      for (size_t i = 0; i < Wz; ++i) x[i] = e[i] + p[i];
    }
  for (const ClipTextBlock& b : w.blocks) block_forward(hp, b, a, off, masks);
  // x[arange(N), pooled]: the pooled rows (N, W), then ln_final (per row, so only on these; the same whether
  // open_clip applies it before or after pooling: final_ln_after_pool)
  std::vector<float> rows(static_cast<size_t>(N) * Wz), normed(rows.size());
  for (int n = 0; n < N; ++n) std::copy_n(a.x.data() + static_cast<size_t>(pooled[n]) * Wz, Wz, rows.data() + n * Wz);
  kernels::layernorm(normed.data(), rows.data(), w.ln_final.weight.data(), w.ln_final.bias.data(), N, W, hp.eps);
  if (w.text_projection.empty()) return normed;  // open_clip proj_type none: (N, W) as is (E == W)
  std::vector<float> features(static_cast<size_t>(N) * E);  // (N, E) = (N, W) @ text_projection (W, E) + bias
  sgemm(false, false, N, E, W, 1.0f, normed.data(), W, w.text_projection.data(), E, 0.0f, features.data(), E);
  if (!w.text_projection_bias.empty())
    for (int n = 0; n < N; ++n)
      for (int e = 0; e < E; ++e) features[static_cast<size_t>(n) * E + e] += w.text_projection_bias[e];
  return features;
}

void l2_normalize_rows(float* x, int N, int E) {
  for (int n = 0; n < N; ++n) {
    float* row = x + static_cast<size_t>(n) * E;
    double ss = 0;
    for (int i = 0; i < E; ++i) ss += static_cast<double>(row[i]) * row[i];
    const float norm = static_cast<float>(std::sqrt(ss));  // features.norm(dim=1, keepdim=True)
    if (!(norm > 0.0f) || !std::isfinite(norm))
      throw Error("feature row " + std::to_string(n) + " has L2 norm " + std::to_string(norm) +
                  ": it cannot be normalised");
    for (int i = 0; i < E; ++i) row[i] /= norm;
  }
}

float clip_logit_scale(const ClipTextWeights& w) { return std::exp(w.logit_scale); }

std::vector<float> image_text_logits(const float* image, int M, const float* text, int N, int E, float scale) {
  std::vector<float> logits(static_cast<size_t>(M) * N);  // (M, N) = scale * image (M, E) @ text (N, E)^T
  if (M > 0 && N > 0) sgemm(false, true, M, N, E, scale, image, E, text, E, 0.0f, logits.data(), N);
  return logits;
}

}  // namespace attnmap
