#include "model/vit_backward.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"

namespace attnmap {

namespace {

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

// x (T, D) += gamma (D) * y (T, D), or x += y without LayerScale (empty gamma); vit_forward's order.
void add_branch(float* x, const float* y, const Floats& gamma, int T, int D) {
  const size_t n = static_cast<size_t>(T) * static_cast<size_t>(D);
  if (gamma.empty()) {
    for (size_t i = 0; i < n; ++i) x[i] += y[i];
    return;
  }
  for (size_t i = 0; i < n; ++i) x[i] += gamma[i % static_cast<size_t>(D)] * y[i];
}

// d_branch (T, D) = gamma * d (the LayerScale backward to the branch); d itself without LayerScale.
void scale_branch(float* out, const float* d, const Floats& gamma, int T, int D) {
  const size_t n = static_cast<size_t>(T) * static_cast<size_t>(D);
  for (size_t i = 0; i < n; ++i) out[i] = gamma.empty() ? d[i] : gamma[i % static_cast<size_t>(D)] * d[i];
}


void check_model(const ViTWeights& w) {
  if (w.precision != Precision::F32)
    throw Error("the class-specific views and explanations run in float32 only, not with bfloat16 products");
  if (w.zero_shot.present() && w.hp.pool == Pool::Map)  // SigLIP: the texts' logits read the MAP head's output
    throw Error("class-specific views (chefer, gradcam, attn-grad) are not available: the texts' logits read SigLIP's "
                "attention-pool head (MAP: a learned probe attending over the final tokens), which attnmap's backward "
                "pass does not differentiate yet (" + layout_name(w.hp.layout) + " layout)");
  const std::string why = explanations_unavailable(w.hp, w.has_classes());
  if (!why.empty()) throw Error("class-specific views (chefer, gradcam, attn-grad) are not available: " + why);
  if (w.zero_shot.present() && !w.proj.present())
    throw Error("class-specific views (chefer, gradcam, attn-grad) are not available: the texts need CLIP's visual "
                "projection (proj), which the weights do not hold");
}

// One block's forward (vit_forward's steps on one image), keeping what the backward needs. x (T, D) in/out.
void block_forward(BlockTape& bt, float* x, const ViTWeights& w, int l, const TapeOptions& opt) {
  const HParams& hp = w.hp;
  const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
  const int T = hp.tokens(), D = hp.dim, H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const int M = blk.fc1.out;
  const size_t TD = static_cast<size_t>(T) * D;
  bt.x_in.assign(x, x + TD);
  bt.ln1_out.resize(TD);
  if (blk.norm1.present()) {
    layernorm_taped(bt.ln1_out.data(), &bt.ln1_mean, &bt.ln1_rstd, x, blk.norm1, T, D, hp.eps);
  } else {
    bt.ln1_out = bt.x_in;
  }
  bt.qkv.resize(static_cast<size_t>(T) * 3 * inner);
  linear(bt.qkv.data(), bt.ln1_out.data(), blk.qkv, T);
  bt.probs.resize(static_cast<size_t>(H) * T * T);
  std::vector<float> att(static_cast<size_t>(T) * inner);
  attention_forward(att.data(), bt.probs.data(), bt.qkv.data(), T, H, dk, blk.attn_bias ? blk.attn_bias->data() : nullptr);
  if (opt.edit_probs) {  // a test's perturbation: the output is recomputed from the edited probabilities
    opt.edit_probs(l, bt.probs.data());
    for (int h = 0; h < H; ++h)
      sgemm(false, false, T, dk, T, 1.0f, &bt.probs[static_cast<size_t>(h) * T * T], T,
            bt.qkv.data() + 2 * inner + h * dk, 3 * inner, 0.0f, att.data() + h * dk, inner);
  }
  std::vector<float> y(TD);
  linear(y.data(), att.data(), blk.proj, T);
  add_branch(x, y.data(), blk.ls1, T, D);
  bt.x_mid.assign(x, x + TD);
  std::vector<float> xn(TD);
  layernorm_taped(xn.data(), &bt.ln2_mean, &bt.ln2_rstd, x, blk.norm2, T, D, hp.eps);
  bt.pre_gelu.resize(static_cast<size_t>(T) * M);
  linear(bt.pre_gelu.data(), xn.data(), blk.fc1, T);
  std::vector<float> hid = bt.pre_gelu;
  activation_forward(hid.data(), hid.size(), hp.act);  // GELU, or QuickGELU (CLIP)
  linear(y.data(), hid.data(), blk.fc2, T);
  add_branch(x, y.data(), blk.ls2, T, D);
}

}  // namespace

namespace {

// Whether the classes are zero-shot texts (engine/text set_text_classes records the class names' source as the
// texts' setting) rather than a classifier head's.
bool texts_are_classes(const HParams& hp) {
  const auto it = hp.source.find("labels");
  return it != hp.source.end() && it->second == setting_ref("text");
}

}  // namespace

std::string explanations_unavailable(const HParams& hp, bool has_head) {
  if (!has_head && hp.residual_mlp && (hp.layout == Layout::Clip || hp.layout == Layout::HfClip))
    return "a CLIP image tower has no classifier head: give texts (" + setting_ref("text") +
           ") to explain their image-text logits";
  if (!has_head || !hp.residual_mlp) return "the model has no classifier head, so there is no class to explain";
  // The backward pass is written for the plain ViT block; a variant it does not differentiate is refused by
  // name rather than explained with the wrong gradient.
  std::string why;
  if (hp.class_attn_blocks > 0)  // CaiT (model/cait.hpp)
    return "CaiT's talking heads mix the heads and its class token is absent from the self-attention blocks: "
           "attnmap's backward pass does not differentiate it (cait layout)";
  if (hp.rope != Rope::None)  // issue 29: rotary positions and the MLP sub-LayerNorm are not differentiated
    why = std::string("its blocks rotate queries and keys (") + (hp.rope == Rope::Dinov3 ? "DINOv3" : "EVA-02") +
          " rotary position embedding)";
  else if (hp.has_mlp_norm) why = "its MLP has a sub-LayerNorm (mlp.norm)";
  else if (hp.pool == Pool::Map && texts_are_classes(hp))  // SigLIP with texts (issue 44)
    why = "the texts' logits read SigLIP's attention-pool head (MAP: a learned probe attending over the final tokens)";
  else if (hp.pool != Pool::ClassToken) why = "its classifier reads the " + pool_name(hp.pool);
  else if (hp.qk_norm) why = "its blocks normalise queries and keys (qk_norm)";
  else if (hp.swiglu) why = "its MLP is SwiGLU";
  else if (hp.act == Activation::GeluTanh) why = "its MLP activation is " + activation_name(hp.act);
  else if (!hp.attn_proj) why = "its attention has no output projection";
  if (why.empty()) return "";
  return why + ", which attnmap's backward pass does not differentiate yet (" + layout_name(hp.layout) + " layout)";
}

ForwardTape vit_forward_tape_tokens(const ViTWeights& w, const float* x0, const TapeOptions& opt) {
  check_model(w);
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
  for (int l = 0; l < hp.depth; ++l) block_forward(tape.blocks[static_cast<size_t>(l)], x.data(), w, l, opt);
  tape.x_final = x;
  std::vector<float> fin = x;
  if (w.norm.present()) layernorm_taped(fin.data(), &tape.fin_mean, &tape.fin_rstd, x.data(), w.norm, T, D, hp.eps);
  if (w.zero_shot.present()) {  // CLIP: the texts' logits on the final-normed class token, as vit_forward
    tape.logits.resize(static_cast<size_t>(w.zero_shot.classes));
    zero_shot_logits(tape.logits.data(), w, fin.data());
    return tape;
  }
  tape.logits.resize(static_cast<size_t>(w.head.out));
  linear(tape.logits.data(), fin.data(), w.head, 1);
  if (w.head_dist.present()) {  // DeiT distilled: (head(class) + head_dist(distillation)) / 2, as vit_forward
    std::vector<float> ld(static_cast<size_t>(w.head_dist.out));
    linear(ld.data(), fin.data() + D, w.head_dist, 1);
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
  const int E = w.proj.out, D = w.proj.in;
  const float* t = w.zero_shot.text.data() + static_cast<size_t>(j) * E;
  double cos = 0.0;
  for (int r = 0; r < E; ++r) cos += e[static_cast<size_t>(r)] / n * t[r];
  std::vector<double> de(static_cast<size_t>(E));
  for (int r = 0; r < E; ++r) de[static_cast<size_t>(r)] = w.zero_shot.scale * (t[r] - cos * e[static_cast<size_t>(r)] / n) / n;
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

// d (T, D) = dlogit[target]/d(final norm input): the head row on the class token (and for DeiT distilled
// half of each head's row on the class / distillation token), through the final LayerNorm.
std::vector<float> head_backward(const ViTWeights& w, const ForwardTape& tape, int c) {
  const int T = tape.tokens, D = tape.dim;
  std::vector<float> dfin(static_cast<size_t>(T) * D, 0.0f);
  const float s = w.head_dist.present() ? 0.5f : 1.0f;
  if (w.zero_shot.present()) {  // CLIP: through the normalised projection of the final-normed class token
    std::vector<float> pooled(static_cast<size_t>(D));
    const float* x0 = tape.x_final.data();  // the class token (row 0), normalised again as the forward did
    if (w.norm.present()) {
      for (int j = 0; j < D; ++j)
        pooled[static_cast<size_t>(j)] = (x0[j] - tape.fin_mean[0]) * tape.fin_rstd[0] * w.norm.weight[static_cast<size_t>(j)] +
                                         w.norm.bias[static_cast<size_t>(j)];
    } else {
      std::copy_n(x0, D, pooled.begin());
    }
    zero_shot_logit_grad(dfin.data(), w, pooled.data(), c);
  } else {
    for (int j = 0; j < D; ++j) dfin[static_cast<size_t>(j)] = s * w.head.weight[static_cast<size_t>(c) * D + j];
  }
  if (w.head_dist.present())
    for (int j = 0; j < D; ++j)
      dfin[static_cast<size_t>(D + j)] = 0.5f * w.head_dist.weight[static_cast<size_t>(c) * D + j];
  if (!w.norm.present()) return dfin;
  std::vector<float> dx(dfin.size(), 0.0f);
  layernorm_backward(dx.data(), dfin.data(), tape.x_final.data(), w.norm.weight.data(), tape.fin_mean.data(),
                     tape.fin_rstd.data(), T, D);
  return dx;
}

}  // namespace

BackwardResult vit_backward(const ViTWeights& w, const ForwardTape& tape, int target_class,
                            const BackwardOptions& opt) {
  check_model(w);
  const int L = static_cast<int>(tape.blocks.size()), T = tape.tokens, D = tape.dim, H = tape.heads;
  const int dk = tape.head_dim, inner = H * dk;
  const int C = w.num_classes();
  if (target_class < 0 || target_class >= C)
    throw Error("class " + std::to_string(target_class) + " out of range: the classifier has " + std::to_string(C) +
                " classes (0.." + std::to_string(C - 1) + ")");
  if (opt.lowest_layer < 0 || opt.lowest_layer >= L)
    throw Error("backward: lowest layer " + std::to_string(opt.lowest_layer) + " outside 0.." + std::to_string(L - 1));
  if (opt.ln1_layer >= L || (opt.ln1_layer >= 0 && opt.ln1_layer < opt.lowest_layer))
    throw Error("backward: LN1 layer " + std::to_string(opt.ln1_layer) + " not reached");
  BackwardResult res;
  const size_t TD = static_cast<size_t>(T) * D;
  std::vector<float> dx = head_backward(w, tape, target_class);  // (T, D) d(residual stream)
  std::vector<float> dbr(TD), dln(TD), datt(static_cast<size_t>(T) * inner), dqkv(static_cast<size_t>(T) * 3 * inner);
  std::vector<float> dprobs(static_cast<size_t>(H) * T * T);
  for (int l = L - 1; l >= opt.lowest_layer; --l) {
    const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
    const BlockTape& bt = tape.blocks[static_cast<size_t>(l)];
    const int M = blk.fc1.out;
    // MLP branch: x_out = x_mid + ls2 * fc2(gelu(fc1(LN2(x_mid)))); dY = dX W for Y = X W^T.
    scale_branch(dbr.data(), dx.data(), blk.ls2, T, D);
    std::vector<float> dh(static_cast<size_t>(T) * M);
    sgemm(false, false, T, M, D, 1.0f, dbr.data(), D, blk.fc2.weight.data(), M, 0.0f, dh.data(), M);
    if (w.hp.act == Activation::QuickGelu)
      quick_gelu_backward(dh.data(), bt.pre_gelu.data(), dh.size());
    else
      gelu_backward(dh.data(), bt.pre_gelu.data(), dh.size());
    sgemm(false, false, T, D, M, 1.0f, dh.data(), M, blk.fc1.weight.data(), D, 0.0f, dln.data(), D);
    layernorm_backward(dx.data(), dln.data(), bt.x_mid.data(), blk.norm2.weight.data(), bt.ln2_mean.data(),
                       bt.ln2_rstd.data(), T, D);  // dx is now d(x_mid)
    // Attention branch: x_mid = x_in + ls1 * proj(attention(LN1(x_in))).
    scale_branch(dbr.data(), dx.data(), blk.ls1, T, D);
    sgemm(false, false, T, inner, D, 1.0f, dbr.data(), D, blk.proj.weight.data(), inner, 0.0f, datt.data(), inner);
    attention_backward(dqkv.data(), dprobs.data(), datt.data(), bt.qkv.data(), bt.probs.data(), T, H, dk);
    if (opt.on_attn_grad) opt.on_attn_grad(l, bt.probs.data(), dprobs.data());
    if (l == opt.lowest_layer && opt.ln1_layer != l && !opt.input_grad) break;  // nothing below is asked for
    sgemm(false, false, T, D, 3 * inner, 1.0f, dqkv.data(), 3 * inner, blk.qkv.weight.data(), D, 0.0f, dln.data(), D);
    if (l == opt.ln1_layer) res.ln1_grad = dln;
    if (blk.norm1.present()) {
      layernorm_backward(dx.data(), dln.data(), bt.x_in.data(), blk.norm1.weight.data(), bt.ln1_mean.data(),
                         bt.ln1_rstd.data(), T, D);
    } else {
      for (size_t i = 0; i < TD; ++i) dx[i] += dln[i];
    }
  }
  if (opt.input_grad && opt.lowest_layer == 0) res.x0_grad = dx;
  return res;
}

}  // namespace attnmap
