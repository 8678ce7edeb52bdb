// vit_backward_block.cpp - one encoder block's taped forward and its backward (issue 44), llm.c style: each
// block variant's forward step and its backward side by side. The variants: LayerNorm / no norm1 (seed-like
// vit-pytorch), q/k LayerNorms (timm qk_norm), rotary positions (timm Eva: EVA-02 'cat' interleaved, DINOv3
// rotate-half; model/rope.cpp), a relative position bias (BEiT; constant, so its backward is the plain one), no
// attention output projection (vit-pytorch), LayerScale, GELU / GELU-tanh / QuickGELU or SwiGLU MLPs, and
// EVA-02's MLP sub-LayerNorm (mlp.norm). The numbers of the forward are vit_forward's (vit.cpp qkv_forward,
// qk_norm_forward, the rope call, residual_mlp_forward): same layer functions, same order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/rope.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "model/vit_internal.hpp"

namespace attnmap {

namespace {

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

// The rotary tables of the model's grid: w.rope once prepare_weights has made them, else made into `local`.
const RopeTables& block_rope(const ViTWeights& w, RopeTables& local) {
  const HParams& hp = w.hp;
  if (w.rope.grid_h == hp.grid_h && w.rope.grid_w == hp.grid_w && !w.rope.sin.empty()) return w.rope;
  local = rope_tables(hp, hp.grid_h, hp.grid_w);
  return local;
}

// rows (T*H, d_k) = part (0: queries, 1: keys) of qkv (T, 3*inner), heads contiguous in each row.
void qk_gather(float* rows, const float* qkv, int part, int T, int inner) {
  for (int t = 0; t < T; ++t)
    std::copy_n(qkv + static_cast<size_t>(t) * 3 * inner + static_cast<size_t>(part) * inner, inner,
                rows + static_cast<size_t>(t) * inner);
}

// The reverse: part of qkv (T, 3*inner) = rows (T*H, d_k).
void qk_scatter(float* qkv, const float* rows, int part, int T, int inner) {
  for (int t = 0; t < T; ++t)
    std::copy_n(rows + static_cast<size_t>(t) * inner, inner,
                qkv + static_cast<size_t>(t) * 3 * inner + static_cast<size_t>(part) * inner);
}

// timm qk_norm forward (vit.cpp qk_norm_forward) on one image's qkv (T, 3*inner) in place, the statistics
// kept: qk_mean, qk_rstd (2, T*H) [queries; keys]; bt.qkv_lin (T, 3*inner) holds the input.
void qk_norm_taped(float* qkv, BlockTape& bt, const BlockWeights& blk, const HParams& hp, int T) {
  const int H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const size_t R = static_cast<size_t>(T) * H;
  bt.qkv_lin.assign(qkv, qkv + static_cast<size_t>(T) * 3 * inner);
  bt.qk_mean.resize(2 * R);
  bt.qk_rstd.resize(2 * R);
  std::vector<float> rows(R * dk), normed(R * dk);  // (T*H, dk)
  for (int part = 0; part < 2; ++part) {
    const LayerNormW& n = part == 0 ? blk.q_norm : blk.k_norm;
    qk_gather(rows.data(), qkv, part, T, inner);
    layernorm_forward(normed.data(), rows.data(), n.weight.data(), n.bias.data(), T * H, dk, hp.eps);
    layernorm_stats(&bt.qk_mean[part * R], &bt.qk_rstd[part * R], rows.data(), T * H, dk, hp.eps);
    qk_scatter(qkv, normed.data(), part, T, inner);
  }
}

// qk_norm backward: dqkv's query and key parts (T, inner) from d(normed) to d(qkv_lin), in place.
void qk_norm_backward(float* dqkv, const BlockTape& bt, const BlockWeights& blk, const HParams& hp, int T) {
  const int H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const size_t R = static_cast<size_t>(T) * H;
  std::vector<float> dout(R * dk), in(R * dk), din(R * dk);  // (T*H, dk)
  for (int part = 0; part < 2; ++part) {
    const LayerNormW& n = part == 0 ? blk.q_norm : blk.k_norm;
    qk_gather(dout.data(), dqkv, part, T, inner);
    qk_gather(in.data(), bt.qkv_lin.data(), part, T, inner);
    std::fill(din.begin(), din.end(), 0.0f);
    layernorm_backward(din.data(), dout.data(), in.data(), n.weight.data(), &bt.qk_mean[part * R],
                       &bt.qk_rstd[part * R], T * H, dk);
    qk_scatter(dqkv, din.data(), part, T, inner);
  }
}

// The MLP's hidden units hid (T, M) from fc1's output pre (T, M, or 2M with SwiGLU): act(pre), or
// silu(x1) * x2 for [x1 | x2] = pre; as residual_mlp_forward.
void mlp_act_forward(float* hid, const float* pre, const HParams& hp, int T, int M) {
  if (hp.swiglu) {
    swiglu_forward(hid, pre, T, M);
  } else {
    std::copy_n(pre, static_cast<size_t>(T) * M, hid);
    activation_forward(hid, static_cast<size_t>(T) * M, hp.act);
  }
}

// Its backward: dpre (T, M or 2M) from dhid (T, M).
void mlp_act_backward(float* dpre, const float* dhid, const float* pre, const HParams& hp, int T, int M) {
  const size_t n = static_cast<size_t>(T) * M;
  if (hp.swiglu) {
    swiglu_backward(dpre, dhid, pre, T, M);
    return;
  }
  std::copy_n(dhid, n, dpre);
  if (hp.act == Activation::QuickGelu)
    quick_gelu_backward(dpre, pre, n);
  else if (hp.act == Activation::GeluTanh)
    gelu_tanh_backward(dpre, pre, n);
  else
    gelu_backward(dpre, pre, n);
}

}  // namespace

void swiglu_backward(float* dpre, const float* dhid, const float* pre, int T, int M) {
  for (int t = 0; t < T; ++t) {
    const float* x1 = pre + static_cast<size_t>(t) * 2 * M;  // (M) gate
    const float* x2 = x1 + M;                                 // (M)
    const float* dh = dhid + static_cast<size_t>(t) * M;
    float* d1 = dpre + static_cast<size_t>(t) * 2 * M;
    float* d2 = d1 + M;
    for (int j = 0; j < M; ++j) {
      const double a = x1[j], s = 1.0 / (1.0 + std::exp(-a));
      d1[j] = static_cast<float>(dh[j] * x2[j] * s * (1.0 + a * (1.0 - s)));  // silu'(a) = s (1 + a (1 - s))
      d2[j] = static_cast<float>(dh[j] * a * s);                              // silu(a)
    }
  }
}

void gelu_tanh_backward(float* d, const float* x, size_t n) {
  const double k = 0.7978845608028654;  // sqrt(2 / pi)
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double th = std::tanh(k * (v + 0.044715 * v * v * v));
    d[i] = static_cast<float>(d[i] * (0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * v * v)));
  }
}

void block_forward_taped(BlockTape& bt, float* x, const ViTWeights& w, int l, const TapeOptions& opt) {
  const HParams& hp = w.hp;
  const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
  const int T = hp.tokens(), D = hp.dim, H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const int M = hp.mlp_dim;
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
  if (blk.q_norm.present()) qk_norm_taped(bt.qkv.data(), bt, blk, hp, T);
  if (hp.rope != Rope::None) {  // after qkv and q/k norms, as EvaAttention and vit_forward
    RopeTables local;
    rope_forward(bt.qkv.data(), block_rope(w, local), hp, T, nullptr);
  }
  bt.probs.resize(static_cast<size_t>(H) * T * T);
  std::vector<float> att(static_cast<size_t>(T) * inner);  // (T, inner)
  attention_forward(att.data(), bt.probs.data(), bt.qkv.data(), T, H, dk, blk.attn_bias ? blk.attn_bias->data() : nullptr);
  if (opt.edit_probs) {  // a test's perturbation: the output is recomputed from the edited probabilities
    opt.edit_probs(l, bt.probs.data());
    for (int h = 0; h < H; ++h)
      sgemm(false, false, T, dk, T, 1.0f, &bt.probs[static_cast<size_t>(h) * T * T], T,
            bt.qkv.data() + 2 * inner + h * dk, 3 * inner, 0.0f, att.data() + h * dk, inner);
  }
  std::vector<float> y(TD);  // (T, D)
  if (blk.proj.present()) {
    linear(y.data(), att.data(), blk.proj, T);
    add_branch(x, y.data(), blk.ls1, T, D);
  } else {  // vit-pytorch without to_out: the attention output (inner == D) joins the residual as it is
    add_branch(x, att.data(), blk.ls1, T, D);
  }
  bt.x_mid.assign(x, x + TD);
  std::vector<float> xn(TD);
  layernorm_taped(xn.data(), &bt.ln2_mean, &bt.ln2_rstd, x, blk.norm2, T, D, hp.eps);
  bt.pre_gelu.resize(static_cast<size_t>(T) * blk.fc1.out);  // (T, M), or (T, 2M) with SwiGLU
  linear(bt.pre_gelu.data(), xn.data(), blk.fc1, T);
  std::vector<float> hid(static_cast<size_t>(T) * M);  // (T, M)
  mlp_act_forward(hid.data(), bt.pre_gelu.data(), hp, T, M);
  if (blk.mlp_norm.present()) {  // EVA-02 sub-LayerNorm of the hidden units, before fc2
    bt.hid = hid;
    layernorm_taped(hid.data(), &bt.mlpn_mean, &bt.mlpn_rstd, bt.hid.data(), blk.mlp_norm, T, M, hp.eps);
  }
  linear(y.data(), hid.data(), blk.fc2, T);
  add_branch(x, y.data(), blk.ls2, T, D);
}

namespace {

// MLP branch backward: x_out = x_mid + ls2 * fc2(norm(act(fc1(LN2(x_mid))))); dx (T, D) from d(x_out) to
// d(x_mid), in place. dY = dX W for Y = X W^T.
void mlp_backward(float* dx, const ViTWeights& w, const BlockTape& bt, const BlockWeights& blk) {
  const HParams& hp = w.hp;
  const int T = hp.tokens(), D = hp.dim, M = hp.mlp_dim, M1 = blk.fc1.out;
  const size_t TD = static_cast<size_t>(T) * D;
  std::vector<float> dbr(TD), dln(TD);                                        // (T, D)
  std::vector<float> dh(static_cast<size_t>(T) * M), dpre(static_cast<size_t>(T) * M1);  // (T, M), (T, M1)
  scale_branch(dbr.data(), dx, blk.ls2, T, D);
  sgemm(false, false, T, M, D, 1.0f, dbr.data(), D, blk.fc2.weight.data(), M, 0.0f, dh.data(), M);
  if (blk.mlp_norm.present()) {
    std::vector<float> dn(dh.size(), 0.0f);
    layernorm_backward(dn.data(), dh.data(), bt.hid.data(), blk.mlp_norm.weight.data(), bt.mlpn_mean.data(),
                       bt.mlpn_rstd.data(), T, M);
    dh.swap(dn);
  }
  mlp_act_backward(dpre.data(), dh.data(), bt.pre_gelu.data(), hp, T, M);
  sgemm(false, false, T, D, M1, 1.0f, dpre.data(), M1, blk.fc1.weight.data(), D, 0.0f, dln.data(), D);
  layernorm_backward(dx, dln.data(), bt.x_mid.data(), blk.norm2.weight.data(), bt.ln2_mean.data(),
                     bt.ln2_rstd.data(), T, D);
}

}  // namespace

void block_backward(float* dx, BackwardResult& res, const ViTWeights& w, const BlockTape& bt, int l,
                    const BackwardOptions& opt) {
  const HParams& hp = w.hp;
  const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
  const int T = hp.tokens(), D = hp.dim, H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const size_t TD = static_cast<size_t>(T) * D;
  mlp_backward(dx, w, bt, blk);  // dx is now d(x_mid)
  // Attention branch: x_mid = x_in + ls1 * proj(attention(rope(qk_norm(qkv(LN1(x_in)))))).
  std::vector<float> dbr(TD), datt(static_cast<size_t>(T) * inner), dqkv(static_cast<size_t>(T) * 3 * inner);
  std::vector<float> dprobs(static_cast<size_t>(H) * T * T);  // (H, T, T)
  scale_branch(dbr.data(), dx, blk.ls1, T, D);
  if (blk.proj.present())
    sgemm(false, false, T, inner, D, 1.0f, dbr.data(), D, blk.proj.weight.data(), inner, 0.0f, datt.data(), inner);
  else
    datt = dbr;  // inner == D
  attention_backward(dqkv.data(), dprobs.data(), datt.data(), bt.qkv.data(), bt.probs.data(), T, H, dk);
  if (opt.on_attn_grad) opt.on_attn_grad(l, bt.probs.data(), dprobs.data());
  if (l == opt.lowest_layer && opt.ln1_layer != l && !opt.input_grad) return;  // nothing below is asked for
  if (hp.rope != Rope::None) {
    RopeTables local;
    rope_backward(dqkv.data(), block_rope(w, local), hp, T, nullptr);
  }
  if (blk.q_norm.present()) qk_norm_backward(dqkv.data(), bt, blk, hp, T);
  std::vector<float> dln(TD);
  sgemm(false, false, T, D, 3 * inner, 1.0f, dqkv.data(), 3 * inner, blk.qkv.weight.data(), D, 0.0f, dln.data(), D);
  if (l == opt.ln1_layer) res.ln1_grad = dln;
  if (blk.norm1.present()) {
    layernorm_backward(dx, dln.data(), bt.x_in.data(), blk.norm1.weight.data(), bt.ln1_mean.data(),
                       bt.ln1_rstd.data(), T, D);
  } else {
    for (size_t i = 0; i < TD; ++i) dx[i] += dln[i];
  }
}

}  // namespace attnmap
