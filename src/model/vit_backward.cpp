#include "model/vit_backward.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "model/cait.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"
#include "model/vit_internal.hpp"

namespace attnmap {

// mean and 1/sqrt(var + eps) of each of M rows of x (M, D), computed as layernorm_forward does (double).
void layernorm_stats(float* mean, float* rstd, const float* in, int M, int D, float eps) {
  for (int i = 0; i < M; ++i) {
    const float* x = in + static_cast<size_t>(i) * D;
    double m = 0;
    for (int j = 0; j < D; ++j) m += x[j];
    m /= D;
    double var = 0;
    for (int j = 0; j < D; ++j) var += (x[j] - m) * (x[j] - m);
    var /= D;
    mean[i] = static_cast<float>(m);
    rstd[i] = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
  }
}

// LayerNorm forward that also records the statistics for the backward; the output is layernorm_forward's.
void layernorm_taped(float* out, std::vector<float>* mean, std::vector<float>* rstd, const float* in,
                     const LayerNormW& ln, int M, int D, float eps) {
  layernorm_forward(out, in, ln.weight.data(), ln.bias.data(), M, D, eps);
  mean->resize(static_cast<size_t>(M));
  rstd->resize(static_cast<size_t>(M));
  layernorm_stats(mean->data(), rstd->data(), in, M, D, eps);
}

namespace {

void check_model(const ViTWeights& w) {
  if (w.precision != Precision::F32)
    throw Error("the class-specific views and explanations run in float32 only, not with bfloat16 products");
  const std::string why = explanations_unavailable(w.hp, w.has_classes());
  if (!why.empty()) throw Error("class-specific views (chefer, gradcam, attn-grad) are not available: " + why);
  if (w.zero_shot.present() && !w.proj.present() && w.hp.pool != Pool::Map)  // SigLIP: the MAP output is the embedding
    throw Error("class-specific views (chefer, gradcam, attn-grad) are not available: the texts need CLIP's visual "
                "projection (proj), which the weights do not hold");
}

}  // namespace

std::string explanations_unavailable(const HParams& hp, bool has_head) {
  if (!has_head && hp.residual_mlp && (hp.layout == Layout::Clip || hp.layout == Layout::HfClip))
    return "a CLIP image tower has no classifier head: give texts (" + setting_ref("text") +
           ") to explain their image-text logits";
  if (!has_head && hp.residual_mlp && hp.layout == Layout::TimmSiglip)  // HF / open_clip SigLIP read as timm-siglip
    return "a SigLIP image tower has no classifier head: give texts (" + setting_ref("text") +
           ") to explain their image-text logits (a whole SigLIP file holds the text tower)";
  if (!has_head || !hp.residual_mlp) return "the model has no classifier head, so there is no class to explain";
  // The backward pass is written for the plain ViT block; a variant it does not differentiate is refused by
  // name rather than explained with the wrong gradient.
  std::string why;
  if (hp.class_attn_blocks > 0 && hp.pool != Pool::ClassToken)  // CaiT (model/cait.hpp) with global_pool 'avg'
    return "its classifier reads the mean of the patch tokens, which never attend to the class token (CaiT's "
           "class-attention blocks leave the patches as they are), so there is no class-attention query to follow "
           "(cait layout)";
  if (hp.class_attn_blocks > 0) return "";  // CaiT: model/cait_backward.cpp
  // The block variants (rope, q/k norms, SwiGLU, GELU-tanh, mlp.norm, no attention projection, LayerScale,
  // BEiT's relative position bias) are all differentiated (vit_backward_block.cpp, issue 44).
  if (why.empty()) return "";
  return why + ", which attnmap's backward pass does not differentiate yet (" + layout_name(hp.layout) + " layout)";
}

ExplainQuery explain_query(const HParams& hp) {
  if (hp.class_attn_blocks > 0) return ExplainQuery::CaitClassToken;
  switch (hp.pool) {
    case Pool::ClassToken: return ExplainQuery::ClassToken;
    case Pool::MeanPatches: return ExplainQuery::PatchMean;
    case Pool::MeanAll: return hp.num_prefix > 0 ? ExplainQuery::TokenMean : ExplainQuery::PatchMean;  // SimpleViT: patches only
    case Pool::Map: return ExplainQuery::Probe;
  }
  return ExplainQuery::ClassToken;
}

std::string explain_query_words(ExplainQuery q) {
  switch (q) {
    case ExplainQuery::ClassToken: return "";
    case ExplainQuery::PatchMean: return "patch-query mean";
    case ExplainQuery::TokenMean: return "token-query mean";
    case ExplainQuery::Probe: return "pool-probe query";
    case ExplainQuery::CaitClassToken: return "class-attention query";
  }
  return "";
}

namespace {

// In place: d (n) *= act'(x) for the model's MLP activation (the MAP probe's MLP uses the blocks' activation).
void act_backward(float* d, const float* x, size_t n, Activation act) {
  if (act == Activation::QuickGelu) return quick_gelu_backward(d, x, n);
  if (act == Activation::GeluTanh) return gelu_tanh_backward(d, x, n);  // HF SigLIP's gelu_pytorch_tanh
  gelu_backward(d, x, n);
}

// timm AttentionPoolLatent as model/vit.cpp attention_pool_forward (same steps, same order), keeping the
// probe's query, [K | V], attention, proj input / output, norm statistics and fc1 output in the tape.
// out (D) = o + fc2(act(fc1(norm(o)))), o = proj([A_p,h V_h]_h), A_p,h = softmax(q_h K_h^T / sqrt(dk)) (T).
void probe_forward_taped(float* out, ForwardTape& t, const ViTWeights& w) {
  const AttentionPoolW& p = w.attn_pool;
  const int T = t.tokens, D = t.dim, H = t.heads, dk = t.head_dim, M = p.fc1.out;
  t.probe_q.resize(static_cast<size_t>(D));
  t.probe_kv.resize(static_cast<size_t>(T) * 2 * D);
  t.probe_attn.resize(static_cast<size_t>(H) * T);
  t.probe_y.resize(static_cast<size_t>(D));
  linear(t.probe_q.data(), p.latent.data(), p.q, 1);  // (D)
  linear(t.probe_kv.data(), t.fin.data(), p.kv, T);   // (T, 2D)
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int h = 0; h < H; ++h) {
    float* a = &t.probe_attn[static_cast<size_t>(h) * T];  // (T)
    for (int j = 0; j < T; ++j) {
      const float* k = &t.probe_kv[static_cast<size_t>(j) * 2 * D + static_cast<size_t>(h) * dk];
      double dot = 0;
      for (int c = 0; c < dk; ++c) dot += static_cast<double>(t.probe_q[static_cast<size_t>(h * dk + c)] * scale) * k[c];
      a[j] = static_cast<float>(dot);
    }
    softmax_rows(a, 1, T);
    for (int c = 0; c < dk; ++c) {
      double acc = 0;
      for (int j = 0; j < T; ++j) acc += static_cast<double>(a[j]) * t.probe_kv[static_cast<size_t>(j) * 2 * D + D + static_cast<size_t>(h) * dk + c];
      t.probe_y[static_cast<size_t>(h * dk + c)] = static_cast<float>(acc);
    }
  }
  t.probe_o.resize(static_cast<size_t>(D));
  linear(t.probe_o.data(), t.probe_y.data(), p.proj, 1);  // (D)
  std::vector<float> n(static_cast<size_t>(D)), hid(static_cast<size_t>(M)), m(static_cast<size_t>(D));
  layernorm_taped(n.data(), &t.probe_mean, &t.probe_rstd, t.probe_o.data(), p.norm, 1, D, w.hp.eps);
  t.probe_pre.resize(static_cast<size_t>(M));
  linear(t.probe_pre.data(), n.data(), p.fc1, 1);  // (M)
  hid = t.probe_pre;
  activation_forward(hid.data(), hid.size(), w.hp.act);
  linear(m.data(), hid.data(), p.fc2, 1);  // (D)
  for (int j = 0; j < D; ++j) out[j] = t.probe_o[static_cast<size_t>(j)] + m[static_cast<size_t>(j)];
}

// dfin (T, D) += d(MAP head output)/d(fin)^T dout (D): the probe MLP's residual, norm, proj, the attention over
// [K | V] (dV_h = A_p,h^T dy_h; dA_p = V_h dy_h, then the softmax to dK_h = scale dS q_h) and kv's linear.
// dattn (H, T) = dlogit/dA_p. The probe's latent and W_q are weights: no gradient is needed there.
void probe_backward(float* dfin, float* dattn, const float* dout, const ForwardTape& t, const ViTWeights& w) {
  const AttentionPoolW& p = w.attn_pool;
  const int T = t.tokens, D = t.dim, H = t.heads, dk = t.head_dim, M = p.fc1.out;
  std::vector<float> dh(static_cast<size_t>(M)), dn(static_cast<size_t>(D)), d_o(dout, dout + D);  // d_o (D)
  sgemm(false, false, 1, M, D, 1.0f, dout, D, p.fc2.weight.data(), M, 0.0f, dh.data(), M);  // (M)
  act_backward(dh.data(), t.probe_pre.data(), dh.size(), w.hp.act);
  sgemm(false, false, 1, D, M, 1.0f, dh.data(), M, p.fc1.weight.data(), D, 0.0f, dn.data(), D);  // (D)
  layernorm_backward(d_o.data(), dn.data(), t.probe_o.data(), p.norm.weight.data(), t.probe_mean.data(),
                     t.probe_rstd.data(), 1, D);
  std::vector<float> dy(static_cast<size_t>(D)), dkv(static_cast<size_t>(T) * 2 * D, 0.0f);
  sgemm(false, false, 1, D, D, 1.0f, d_o.data(), D, p.proj.weight.data(), D, 0.0f, dy.data(), D);  // (D)
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int h = 0; h < H; ++h) {
    const float* a = &t.probe_attn[static_cast<size_t>(h) * T];
    float* da = dattn + static_cast<size_t>(h) * T;
    const float* dyh = &dy[static_cast<size_t>(h) * dk];
    double dot = 0;
    for (int j = 0; j < T; ++j) {
      const float* v = &t.probe_kv[static_cast<size_t>(j) * 2 * D + D + static_cast<size_t>(h) * dk];
      float* dv = &dkv[static_cast<size_t>(j) * 2 * D + D + static_cast<size_t>(h) * dk];
      double s = 0;
      for (int c = 0; c < dk; ++c) {
        s += static_cast<double>(dyh[c]) * v[c];
        dv[c] = a[j] * dyh[c];
      }
      da[j] = static_cast<float>(s);
      dot += a[j] * s;
    }
    for (int j = 0; j < T; ++j) {
      const float ds = static_cast<float>(a[j] * (da[j] - dot)) * scale;
      float* dkr = &dkv[static_cast<size_t>(j) * 2 * D + static_cast<size_t>(h) * dk];
      for (int c = 0; c < dk; ++c) dkr[c] = ds * t.probe_q[static_cast<size_t>(h * dk + c)];
    }
  }
  sgemm(false, false, T, D, 2 * D, 1.0f, dkv.data(), 2 * D, p.kv.weight.data(), D, 1.0f, dfin, D);  // (T, D)
}

// tape.pooled (D) from tape.fin (T, D) as model/vit.cpp pooled_forward: the class token, the mean of the patch
// tokens (timm 'avg') or of every token (vit-pytorch 'mean'), or the MAP head; then fc_norm if present.
void pool_forward_taped(ForwardTape& t, const ViTWeights& w) {
  const HParams& hp = w.hp;
  const int T = t.tokens, D = t.dim;
  t.pool_out.assign(static_cast<size_t>(D), 0.0f);
  if (hp.pool == Pool::ClassToken) {
    std::copy_n(t.fin.begin(), D, t.pool_out.begin());
  } else if (hp.pool == Pool::Map) {
    probe_forward_taped(t.pool_out.data(), t, w);
  } else {
    const int first = hp.pool == Pool::MeanPatches ? hp.num_prefix : 0;
    std::vector<double> acc(static_cast<size_t>(D), 0.0);
    for (int i = first; i < T; ++i)
      for (int j = 0; j < D; ++j) acc[static_cast<size_t>(j)] += t.fin[static_cast<size_t>(i) * D + j];
    for (int j = 0; j < D; ++j) t.pool_out[static_cast<size_t>(j)] = static_cast<float>(acc[static_cast<size_t>(j)] / std::max(T - first, 1));
  }
  t.pooled = t.pool_out;
  if (w.fc_norm.present()) layernorm_taped(t.pooled.data(), &t.fc_mean, &t.fc_rstd, t.pool_out.data(), w.fc_norm, 1, D, hp.eps);
}

}  // namespace

ForwardTape vit_forward_tape_tokens(const ViTWeights& w, const float* x0, const TapeOptions& opt) {
  check_model(w);
  if (w.hp.class_attn_blocks > 0) return cait_forward_tape_tokens(w, x0, opt);  // CaiT (model/cait_backward.cpp)
  const HParams& hp = w.hp;
  const int T = hp.tokens(), D = hp.dim;
  const size_t TD = static_cast<size_t>(T) * D;
  ForwardTape tape;
  tape.tokens = T;
  tape.dim = D;
  tape.heads = hp.num_heads;
  tape.head_dim = hp.head_dim;
  tape.mlp = hp.mlp_dim;
  std::vector<float> x(x0, x0 + TD);
  tape.blocks.resize(static_cast<size_t>(hp.depth));
  for (int l = 0; l < hp.depth; ++l) block_forward_taped(tape.blocks[static_cast<size_t>(l)], x.data(), w, l, opt);
  tape.x_final = x;
  tape.fin = x;
  if (w.norm.present()) layernorm_taped(tape.fin.data(), &tape.fin_mean, &tape.fin_rstd, x.data(), w.norm, T, D, hp.eps);
  pool_forward_taped(tape, w);  // tape.pooled (D), as pooled_forward
  if (w.zero_shot.present()) {  // CLIP / SigLIP: the texts' logits on the pooled vector, as vit_forward
    tape.logits.resize(static_cast<size_t>(w.zero_shot.classes));
    zero_shot_logits(tape.logits.data(), w, tape.pooled.data());
    return tape;
  }
  tape.logits.resize(static_cast<size_t>(w.head.out));
  linear(tape.logits.data(), tape.pooled.data(), w.head, 1);
  if (w.head_dist.present()) {  // DeiT distilled: (head(class) + head_dist(distillation)) / 2, as vit_forward
    std::vector<float> ld(static_cast<size_t>(w.head_dist.out));
    linear(ld.data(), tape.fin.data() + D, w.head_dist, 1);
    for (size_t c = 0; c < ld.size(); ++c) tape.logits[c] = 0.5f * (tape.logits[c] + ld[c]);
  }
  return tape;
}

ForwardTape vit_forward_tape(const ViTWeights& w, const float* image, const TapeOptions& opt) {
  check_model(w);
  std::vector<float> x0(static_cast<size_t>(w.hp.tokens()) * w.hp.dim);
  embed_tokens(x0.data(), w, image);
  return vit_forward_tape_tokens(w, x0.data(), opt);
}

void layernorm_backward(float* din, const float* dout, const float* in, const float* weight, const float* mean,
                        const float* rstd, int M, int D) {
  for (int i = 0; i < M; ++i) {
    const float* x = in + static_cast<size_t>(i) * D;
    const float* dy = dout + static_cast<size_t>(i) * D;
    float* dx = din + static_cast<size_t>(i) * D;
    const double m = mean[i], r = rstd[i];
    double dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int j = 0; j < D; ++j) {
      const double dn = static_cast<double>(weight[j]) * dy[j];
      dnorm_mean += dn;
      dnorm_norm_mean += dn * (x[j] - m) * r;
    }
    dnorm_mean /= D;
    dnorm_norm_mean /= D;
    for (int j = 0; j < D; ++j) {
      const double dn = static_cast<double>(weight[j]) * dy[j];
      dx[j] += static_cast<float>((dn - dnorm_mean - (x[j] - m) * r * dnorm_norm_mean) * r);
    }
  }
}

void gelu_backward(float* d, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + std::erf(v * 0.70710678118654752));
    const double pdf = std::exp(-0.5 * v * v) * 0.39894228040143268;  // 1 / sqrt(2 pi)
    d[i] = static_cast<float>(d[i] * (cdf + v * pdf));
  }
}

void quick_gelu_backward(float* d, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double sg = 1.0 / (1.0 + std::exp(-1.702 * v));
    d[i] = static_cast<float>(d[i] * (sg + 1.702 * v * sg * (1.0 - sg)));
  }
}

namespace {

// e = proj pooled (E) in double, or for a model without a projection whose pooled vector is its image embedding
// (SigLIP: the attention-pool head's output, HF pooler_output / timm forward_head(pre_logits=True)) e = pooled;
// returns |e|.
double clip_embedding(std::vector<double>& e, const ViTWeights& w, const float* pooled) {
  if (!w.proj.present() && w.hp.pool == Pool::Map) {
    const int D = w.hp.dim;
    if (w.zero_shot.text.size() != static_cast<size_t>(w.zero_shot.classes) * static_cast<size_t>(D))
      throw Error("zero-shot texts: " + std::to_string(w.zero_shot.classes) + " text features of width " +
                  std::to_string(w.zero_shot.classes ? w.zero_shot.text.size() / static_cast<size_t>(w.zero_shot.classes) : 0) +
                  ", but the attention-pool head's image embedding has width " + std::to_string(D));
    e.assign(pooled, pooled + D);
    double n2 = 0.0;
    for (double v : e) n2 += v * v;
    return std::sqrt(n2);
  }
  const int E = w.proj.out, D = w.proj.in;
  if (!w.proj.present())
    throw Error("zero-shot texts need CLIP's visual projection (proj) or SigLIP's attention-pool head, which the "
                "weights do not hold");
  if (w.zero_shot.text.size() != static_cast<size_t>(w.zero_shot.classes) * static_cast<size_t>(E) || D != w.hp.dim)
    throw Error("zero-shot texts: " + std::to_string(w.zero_shot.classes) + " text features of width " +
                std::to_string(w.zero_shot.classes ? w.zero_shot.text.size() / static_cast<size_t>(w.zero_shot.classes) : 0) +
                ", but the visual projection gives " + std::to_string(E));
  e.assign(static_cast<size_t>(E), 0.0);
  double n2 = 0.0;
  for (int r = 0; r < E; ++r) {
    double acc = 0.0;
    const float* row = w.proj.weight.data() + static_cast<size_t>(r) * D;
    for (int j = 0; j < D; ++j) acc += static_cast<double>(row[j]) * pooled[j];
    e[static_cast<size_t>(r)] = acc;
    n2 += acc * acc;
  }
  return std::sqrt(n2);
}

}  // namespace

void zero_shot_logits(float* logits, const ViTWeights& w, const float* pooled) {
  std::vector<double> e;
  const double n = std::max(clip_embedding(e, w, pooled), 1e-30);
  const size_t E = e.size();
  for (int c = 0; c < w.zero_shot.classes; ++c) {
    double dot = 0.0;
    for (size_t r = 0; r < E; ++r) dot += e[r] * w.zero_shot.text[static_cast<size_t>(c) * E + r];
    logits[c] = static_cast<float>(w.zero_shot.scale * dot / n + w.zero_shot.bias);
  }
}

void zero_shot_logit_grad(float* dpooled, const ViTWeights& w, const float* pooled, int j) {
  std::vector<double> e;
  const double n = std::max(clip_embedding(e, w, pooled), 1e-30);
  const int E = static_cast<int>(e.size()), D = w.hp.dim;  // SigLIP (no proj): E = D, e = pooled
  const float* t = w.zero_shot.text.data() + static_cast<size_t>(j) * E;
  double cos = 0.0;
  for (int r = 0; r < E; ++r) cos += e[static_cast<size_t>(r)] / n * t[r];
  std::vector<double> de(static_cast<size_t>(E));
  for (int r = 0; r < E; ++r) de[static_cast<size_t>(r)] = w.zero_shot.scale * (t[r] - cos * e[static_cast<size_t>(r)] / n) / n;
  if (!w.proj.present()) {  // d(logit)/d(pooled) = de
    for (int k = 0; k < D; ++k) dpooled[k] = static_cast<float>(de[static_cast<size_t>(k)]);
    return;
  }
  for (int k = 0; k < D; ++k) {
    double acc = 0.0;
    for (int r = 0; r < E; ++r) acc += de[static_cast<size_t>(r)] * w.proj.weight[static_cast<size_t>(r) * D + k];
    dpooled[k] = static_cast<float>(acc);
  }
}

void attention_backward(float* dqkv, float* dprobs, const float* dout, const float* qkv, const float* probs,
                        int T, int H, int dk) {
  const int inner = H * dk, ld = 3 * inner;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const size_t TT = static_cast<size_t>(T) * T;
  std::vector<float> ds(TT);  // (T, T) score gradient of one head
  for (int h = 0; h < H; ++h) {
    const float* p = probs + static_cast<size_t>(h) * TT;
    float* dp = dprobs + static_cast<size_t>(h) * TT;
    const float* q = qkv + h * dk;
    const float* k = qkv + inner + h * dk;
    const float* v = qkv + 2 * inner + h * dk;
    const float* dy = dout + h * dk;  // (T, dk), row stride inner
    sgemm(false, true, T, T, dk, 1.0f, dy, inner, v, ld, 0.0f, dp, T);                  // dA = dY V^T
    sgemm(true, false, T, dk, T, 1.0f, p, T, dy, inner, 0.0f, dqkv + 2 * inner + h * dk, ld);  // dV = A^T dY
    for (int i = 0; i < T; ++i) {  // softmax backward, row by row
      const float* pr = p + static_cast<size_t>(i) * T;
      const float* dpr = dp + static_cast<size_t>(i) * T;
      double dot = 0;
      for (int j = 0; j < T; ++j) dot += static_cast<double>(pr[j]) * dpr[j];
      float* dsr = &ds[static_cast<size_t>(i) * T];
      for (int j = 0; j < T; ++j) dsr[j] = static_cast<float>(pr[j] * (dpr[j] - dot));
    }
    sgemm(false, false, T, dk, T, scale, ds.data(), T, k, ld, 0.0f, dqkv + h * dk, ld);          // dQ = s dS K
    sgemm(true, false, T, dk, T, scale, ds.data(), T, q, ld, 0.0f, dqkv + inner + h * dk, ld);  // dK = s dS^T Q
  }
}

namespace {

// d (T, D) = dlogit[target]/d(final norm input): the logit's gradient on the pooled vector (the head's row, or
// the texts' logit through zero_shot_logit_grad), through fc_norm, the pooling (the class token's row; the mean:
// 1/count on each pooled row; the MAP head: probe_backward, whose dA_p goes to opt.on_probe_grad), and for DeiT
// distilled half of head_dist's row on the distillation token; then the final LayerNorm.
std::vector<float> head_backward(const ViTWeights& w, const ForwardTape& tape, int c, const BackwardOptions& opt) {
  const HParams& hp = w.hp;
  const int T = tape.tokens, D = tape.dim;
  std::vector<float> dfin(static_cast<size_t>(T) * D, 0.0f), dpooled(static_cast<size_t>(D));  // (T, D), (D)
  const float s = w.head_dist.present() ? 0.5f : 1.0f;
  if (w.zero_shot.present()) {
    zero_shot_logit_grad(dpooled.data(), w, tape.pooled.data(), c);
  } else {
    for (int j = 0; j < D; ++j) dpooled[static_cast<size_t>(j)] = s * w.head.weight[static_cast<size_t>(c) * D + j];
  }
  std::vector<float> dpool = dpooled;  // (D) d(pool_out)
  if (w.fc_norm.present()) {
    std::fill(dpool.begin(), dpool.end(), 0.0f);
    layernorm_backward(dpool.data(), dpooled.data(), tape.pool_out.data(), w.fc_norm.weight.data(),
                       tape.fc_mean.data(), tape.fc_rstd.data(), 1, D);
  }
  if (hp.pool == Pool::ClassToken) {
    std::copy(dpool.begin(), dpool.end(), dfin.begin());
  } else if (hp.pool == Pool::Map) {
    std::vector<float> dattn(static_cast<size_t>(tape.heads) * T);  // (H, T) dlogit/dA_p
    probe_backward(dfin.data(), dattn.data(), dpool.data(), tape, w);
    if (opt.on_probe_grad) opt.on_probe_grad(tape.probe_attn.data(), dattn.data());
  } else {
    const int first = hp.pool == Pool::MeanPatches ? hp.num_prefix : 0;
    const float inv = 1.0f / static_cast<float>(std::max(T - first, 1));
    for (int i = first; i < T; ++i)
      for (int j = 0; j < D; ++j) dfin[static_cast<size_t>(i) * D + j] = inv * dpool[static_cast<size_t>(j)];
  }
  if (w.head_dist.present())
    for (int j = 0; j < D; ++j)
      dfin[static_cast<size_t>(D + j)] += 0.5f * w.head_dist.weight[static_cast<size_t>(c) * D + j];
  if (!w.norm.present()) return dfin;
  std::vector<float> dx(dfin.size(), 0.0f);
  layernorm_backward(dx.data(), dfin.data(), tape.x_final.data(), w.norm.weight.data(), tape.fin_mean.data(),
                     tape.fin_rstd.data(), T, D);
  return dx;
}

}  // namespace

void check_backward_request(const ViTWeights& w, int L, int target_class, const BackwardOptions& opt) {
  const int C = w.num_classes();
  if (target_class < 0 || target_class >= C)
    throw Error("class " + std::to_string(target_class) + " out of range: the classifier has " + std::to_string(C) +
                " classes (0.." + std::to_string(C - 1) + ")");
  if (opt.lowest_layer < 0 || opt.lowest_layer >= L)
    throw Error("backward: lowest layer " + std::to_string(opt.lowest_layer) + " outside 0.." + std::to_string(L - 1));
  if (opt.ln1_layer >= L || (opt.ln1_layer >= 0 && opt.ln1_layer < opt.lowest_layer))
    throw Error("backward: LN1 layer " + std::to_string(opt.ln1_layer) + " not reached");
}

BackwardResult vit_backward(const ViTWeights& w, const ForwardTape& tape, int target_class,
                            const BackwardOptions& opt) {
  check_model(w);
  if (tape.cait) return cait_backward(w, tape, target_class, opt);  // CaiT (model/cait_backward.cpp)
  const int L = static_cast<int>(tape.blocks.size());
  check_backward_request(w, L, target_class, opt);
  BackwardResult res;
  std::vector<float> dx = head_backward(w, tape, target_class, opt);  // (T, D) d(residual stream)
  for (int l = L - 1; l >= opt.lowest_layer; --l)  // model/vit_backward_block.cpp
    block_backward(dx.data(), res, w, tape.blocks[static_cast<size_t>(l)], l, opt);
  if (opt.input_grad && opt.lowest_layer == 0) res.x0_grad = dx;
  return res;
}

}  // namespace attnmap
