// clip_text.cpp - CLIP's text tower (OpenAI layout): weights from a state dict, encode_text, logits.
// Follows openai/CLIP clip/model.py line by line; see clip_text.hpp.
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

const char* const kBlocks = "transformer.resblocks.";

// CLIP build_model: transformer_layers = len(set(k.split(".")[2] for k in state_dict if
// k.startswith("transformer.resblocks"))). Here 1 + the highest index, so that a block missing below it is
// named as a missing tensor. A name whose third part is no block number is refused.
int count_blocks(const TensorMap& tensors, const std::string& where) {
  int layers = 0;
  const std::string p = kBlocks;
  for (auto it = tensors.lower_bound(p); it != tensors.end() && it->first.compare(0, p.size(), p) == 0; ++it) {
    const std::string& name = it->first;
    const size_t dot = name.find('.', p.size());
    const std::string idx = name.substr(p.size(), dot == std::string::npos ? std::string::npos : dot - p.size());
    const bool digits = !idx.empty() && idx.size() <= 6 && std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || dot == std::string::npos)
      throw Error(where + ": tensor '" + name + "' is not part of OpenAI CLIP's text tower (expected " + p +
                  "N.<name> with a block number N)");
    layers = std::max(layers, std::stoi(idx) + 1);
  }
  return layers;
}

// CLIP's Transformer width // 64 heads, which nn.MultiheadAttention accepts only when they divide the width.
int text_heads(int W, const std::string& where) {
  const int H = W / 64;
  if (H == 0 || W % H != 0)
    throw Error(where + ": text width " + std::to_string(W) + " (ln_final.weight) gives width // 64 = " +
                std::to_string(H) + " heads (OpenAI CLIP's build_model), which " +
                (H == 0 ? std::string("is no attention") : "do not divide the width"));
  return H;
}

// Refuses any name under the text tower's prefixes that was not read (e.g. an OpenCLIP LayerScale ls_1):
// leaving it out would change the features silently.
void refuse_unread(const TensorMap& tensors, const std::vector<std::string>& used, const std::string& where) {
  const std::set<std::string> read(used.begin(), used.end());
  for (const auto& [name, t] : tensors) {
    const bool text = name.rfind("transformer.", 0) == 0 || name.rfind("token_embedding.", 0) == 0 ||
                      name.rfind("ln_final.", 0) == 0;
    if (text && read.count(name) == 0)
      throw Error(where + ": tensor '" + name + "' " + shape_str(t.shape) +
                  " is not part of OpenAI CLIP's text tower (clip/model.py); this layout cannot use it");
  }
}

// The position of the end-of-text token in one sequence, found as CLIP.encode_text does (text.argmax(dim=-1):
// the first maximum), after checking the sequence. `n` names it in messages.
int eot_position(const ClipTextHParams& hp, const std::vector<int32_t>& seq, size_t n) {
  const std::string what = "token sequence " + std::to_string(n);
  if (seq.empty()) throw Error(what + " is empty: expected <|startoftext|> ... <|endoftext|> ids");
  if (seq.size() > static_cast<size_t>(hp.context_length))
    throw Error(what + " has " + std::to_string(seq.size()) + " ids, more than the text tower's context of " +
                std::to_string(hp.context_length));
  int best = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (seq[i] < 0 || seq[i] >= hp.vocab_size)
      throw Error(what + ": id " + std::to_string(seq[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary (0.." + std::to_string(hp.vocab_size - 1) + ")");
    if (seq[i] > seq[best]) best = static_cast<int>(i);
  }
  if (seq[best] != hp.eot_id())
    throw Error(what + " has no <|endoftext|> (id " + std::to_string(hp.eot_id()) +
                "): CLIP reads a text's feature at that token");
  return best;
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
  std::vector<float> x, xn, qkv, att, hid, probs;  // (R, W), (R, W), (R, 3W), (R, W), (R, 4W), (H, T, T)
};

// One ResidualAttentionBlock on every sequence (clip/model.py ResidualAttentionBlock.forward):
//   x = x + out_proj(attention(in_proj(ln_1(x)), causal mask));  x = x + c_proj(QuickGELU(c_fc(ln_2(x)))).
void block_forward(const ClipTextHParams& hp, const ClipTextBlock& b, TextActs& a, const std::vector<int>& off,
                   const std::map<int, std::vector<float>>& masks) {
  const int W = hp.width, R = off.back();
  kernels::layernorm(a.xn.data(), a.x.data(), b.ln_1.weight.data(), b.ln_1.bias.data(), R, W, hp.eps);
  linear(a.qkv.data(), a.xn.data(), b.in_proj, R);  // (R, 3W) = [q | k | v], heads contiguous in each
  for (size_t n = 0; n + 1 < off.size(); ++n) {     // each sequence attends only within itself
    const int T = off[n + 1] - off[n];
    attention_forward(a.att.data() + static_cast<size_t>(off[n]) * W, a.probs.data(),
                      a.qkv.data() + static_cast<size_t>(off[n]) * 3 * W, T, hp.heads, hp.head_dim(),
                      masks.at(T).data());
  }
  linear(nullptr, a.att.data(), b.out_proj, R, Precision::F32, Epilogue{nullptr, a.x.data(), nullptr});  // x += .
  kernels::layernorm(a.xn.data(), a.x.data(), b.ln_2.weight.data(), b.ln_2.bias.data(), R, W, hp.eps);
  static const Activation quick = Activation::QuickGelu;  // clip/model.py QuickGELU: x * sigmoid(1.702 x)
  linear(a.hid.data(), a.xn.data(), b.c_fc, R, Precision::F32, Epilogue{&quick, nullptr, nullptr});  // (R, 4W)
  linear(nullptr, a.hid.data(), b.c_proj, R, Precision::F32, Epilogue{nullptr, a.x.data(), nullptr});  // x += .
}

}  // namespace

ClipTextWeights build_clip_text(const TensorMap& tensors, const std::string& where) {
  ClipTextWeights w;
  ClipTextHParams& hp = w.hp;
  TextReader rd(tensors, where, w.tensors);
  std::vector<int> d;
  // build_model: transformer_width = ln_final.weight.shape[0], then the others from their shapes
  w.ln_final.weight = rd.take_rank("ln_final.weight", 1, "(W)", d).data;
  const int W = hp.width = d[0];
  hp.heads = text_heads(W, where);
  w.ln_final.bias = rd.take("ln_final.bias", {W});
  const std::string Ws = std::to_string(W);
  const Tensor& tok = rd.take_rank("token_embedding.weight", 2, "(V, " + Ws + ")", d);
  if (d[1] != W) throw rd.shape_error("token_embedding.weight", "(V, " + Ws + ")", tok.shape);
  hp.vocab_size = d[0];
  w.token_embedding = tok.data;
  const Tensor& pos = rd.take_rank("positional_embedding", 2, "(C, " + Ws + ")", d);
  if (d[1] != W) throw rd.shape_error("positional_embedding", "(C, " + Ws + ")", pos.shape);
  hp.context_length = d[0];
  w.positional_embedding = pos.data;
  hp.layers = count_blocks(tensors, where);
  if (hp.layers == 0)
    throw Error(where + ": missing tensor '" + kBlocks + "0.ln_1.weight' (no text transformer blocks found)");
  for (int l = 0; l < hp.layers; ++l) {
    const std::string p = kBlocks + std::to_string(l) + ".";
    ClipTextBlock b;
    b.ln_1 = rd.layernorm(p + "ln_1", W);
    b.in_proj = rd.linear(p + "attn.in_proj_weight", p + "attn.in_proj_bias", 3 * W, W);
    b.out_proj = rd.linear(p + "attn.out_proj.weight", p + "attn.out_proj.bias", W, W);
    b.ln_2 = rd.layernorm(p + "ln_2", W);
    b.c_fc = rd.linear(p + "mlp.c_fc.weight", p + "mlp.c_fc.bias", 4 * W, W);  // d_model * 4 (clip/model.py)
    b.c_proj = rd.linear(p + "mlp.c_proj.weight", p + "mlp.c_proj.bias", W, 4 * W);
    w.blocks.push_back(std::move(b));
  }
  const Tensor& proj = rd.take_rank("text_projection", 2, "(" + Ws + ", E)", d);
  if (d[0] != W) throw rd.shape_error("text_projection", "(" + Ws + ", E)", proj.shape);
  hp.embed_dim = d[1];
  w.text_projection = proj.data;
  const Floats scale = rd.take("logit_scale", {});  // torch.ones([]) * np.log(1 / 0.07): shape ()
  w.logit_scale = scale[0];
  refuse_unread(tensors, w.tensors, where);
  return w;
}

void prepare_clip_text(const ClipTextWeights& w) {
  for (const ClipTextBlock& b : w.blocks)
    for (const LinearW* l : {&b.in_proj, &b.out_proj, &b.c_fc, &b.c_proj}) prepack_linear(*l);
}

std::vector<float> encode_text(const ClipTextWeights& w, const std::vector<std::vector<int32_t>>& ids) {
  const ClipTextHParams& hp = w.hp;
  const int W = hp.width, E = hp.embed_dim, N = static_cast<int>(ids.size());
  // each sequence's rows: positions 0..eot (the causal mask keeps later positions out of the eot row)
  std::vector<int> off{0};
  std::map<int, std::vector<float>> masks;  // causal mask (H, T, T) by length T
  int T_max = 0;
  for (size_t n = 0; n < ids.size(); ++n) {
    const int T = eot_position(hp, ids[n], n) + 1;
    off.push_back(off.back() + T);
    if (masks.count(T) == 0) masks[T] = causal_mask(hp.heads, T);
    T_max = std::max(T_max, T);
  }
  if (N == 0) return {};
  const size_t R = static_cast<size_t>(off.back()), Wz = static_cast<size_t>(W);
  TextActs a;
  a.x.resize(R * Wz);         // (R, W)
  a.xn.resize(R * Wz);        // (R, W)
  a.qkv.resize(R * 3 * Wz);   // (R, 3W)
  a.att.resize(R * Wz);       // (R, W)
  a.hid.resize(R * 4 * Wz);   // (R, 4W)
  a.probs.resize(static_cast<size_t>(hp.heads) * T_max * T_max);  // (H, T, T), one sequence at a time
  // x = token_embedding(text) + positional_embedding (CLIP.encode_text)
  for (int n = 0; n < N; ++n)
    for (int t = 0; t < off[n + 1] - off[n]; ++t) {
      const float* e = w.token_embedding.data() + static_cast<size_t>(ids[n][t]) * Wz;
      const float* p = w.positional_embedding.data() + static_cast<size_t>(t) * Wz;
      float* x = a.x.data() + (static_cast<size_t>(off[n]) + t) * Wz;
      for (size_t i = 0; i < Wz; ++i) x[i] = e[i] + p[i];
    }
  for (const ClipTextBlock& b : w.blocks) block_forward(hp, b, a, off, masks);
  // x[arange(N), text.argmax(-1)]: the end-of-text rows (N, W), then ln_final (per row, so only on these)
  std::vector<float> eot(static_cast<size_t>(N) * Wz), normed(eot.size());
  for (int n = 0; n < N; ++n)
    std::copy_n(a.x.data() + (static_cast<size_t>(off[n + 1]) - 1) * Wz, Wz, eot.data() + n * Wz);
  kernels::layernorm(normed.data(), eot.data(), w.ln_final.weight.data(), w.ln_final.bias.data(), N, W, hp.eps);
  std::vector<float> features(static_cast<size_t>(N) * E);  // (N, E) = (N, W) @ text_projection (W, E)
  sgemm(false, false, N, E, W, 1.0f, normed.data(), W, w.text_projection.data(), E, 0.0f, features.data(), E);
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
