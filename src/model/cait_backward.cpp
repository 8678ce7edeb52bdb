// cait_backward.cpp - CaiT's taped forward and its backward (issue 44), llm.c style: each layer's forward
// and backward side by side, activation gradients only (no weight gradients). The blocks are those of
// cait.cpp: talking-heads self-attention blocks over the N patches, then class-attention blocks in which the
// class token alone queries [class; patches]; timm cait.py (TalkingHeadAttn, ClassAttn, LayerScaleBlock,
// LayerScaleBlockClassAttn, Cait.forward_features / forward_head).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/cait.hpp"
#include "model/kernels.hpp"
#include "model/sgemm.hpp"
#include "model/vit_internal.hpp"

namespace attnmap {

namespace {

// ---- talking heads: forward in cait.cpp (talking_heads_forward), backward here ----

// Mixes (H, N, N) maps across heads with the transposed weights: dst_h = sum_g W[g, h] src_g (the backward of
// nn.Linear(H, H) on the head axis; the bias has no input gradient).
void mix_transposed(float* dst, const float* src, const LinearW& lin, int H, size_t NN) {
  std::fill_n(dst, static_cast<size_t>(H) * NN, 0.0f);
  for (int h = 0; h < H; ++h)
    for (int g = 0; g < H; ++g) {
      const float wgh = lin.weight[static_cast<size_t>(g) * H + h];
      const float* s = src + static_cast<size_t>(g) * NN;
      float* d = dst + static_cast<size_t>(h) * NN;
      for (size_t i = 0; i < NN; ++i) d[i] += wgh * s[i];
    }
}

// Talking-heads attention backward on one image: from dout (N, inner) and the forward's qkv (N, 3*inner),
// probs P (H, N, N) and weights W = proj_w(P) (H, N, N), writes dweights (H, N, N) = dlogit/dW and dqkv
// (N, 3*inner). out_g = W_g V_g: dW_g = dout_g V_g^T, dV_g = W_g^T dout_g; W = proj_w(P): dP_h = sum_g
// Ww[g, h] dW_g; P = softmax(L): dL = P * (dP - rowsum(dP * P)); L = proj_l(S): dS_h = sum_g Wl[g, h] dL_g;
// S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
void talking_heads_backward(float* dqkv, float* dweights, const float* dout, const float* qkv, const float* probs,
                            const float* weights, const LinearW& proj_l, const LinearW& proj_w, int N, int H, int dk) {
  const int inner = H * dk, ld = 3 * inner;
  const size_t NN = static_cast<size_t>(N) * N;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int g = 0; g < H; ++g) {
    const float* v = qkv + 2 * inner + g * dk;  // V_g (N, dk), row stride ld
    sgemm(false, true, N, N, dk, 1.0f, dout + g * dk, inner, v, ld, 0.0f, dweights + g * NN, N);           // dW_g (N, N)
    sgemm(true, false, N, dk, N, 1.0f, weights + g * NN, N, dout + g * dk, inner, 0.0f, dqkv + 2 * inner + g * dk, ld);  // dV_g
  }
  std::vector<float> d(static_cast<size_t>(H) * NN), ds(d.size());  // (H, N, N)
  mix_transposed(d.data(), dweights, proj_w, H, NN);                  // dP
  for (size_t r = 0; r < static_cast<size_t>(H) * N; ++r) {           // dL = P * (dP - rowsum(dP * P)), per row
    const float* p = probs + r * N;
    float* dr = &d[r * N];
    double dot = 0;
    for (int j = 0; j < N; ++j) dot += static_cast<double>(dr[j]) * p[j];
    for (int j = 0; j < N; ++j) dr[j] = p[j] * static_cast<float>(dr[j] - dot);
  }
  mix_transposed(ds.data(), d.data(), proj_l, H, NN);                 // dS
  for (int h = 0; h < H; ++h) {
    const float* q = qkv + h * dk;
    const float* k = qkv + inner + h * dk;
    sgemm(false, false, N, dk, N, scale, &ds[h * NN], N, k, ld, 0.0f, dqkv + h * dk, ld);          // dQ_h (N, dk)
    sgemm(true, false, N, dk, N, scale, &ds[h * NN], N, q, ld, 0.0f, dqkv + inner + h * dk, ld);   // dK_h (N, dk)
  }
}

// ---- class attention: forward in cait.cpp (class_attention_forward), backward here ----

// Class-attention backward on one image: from dout (inner), the class token's attention output, and the
// forward's qkv (T, 3*inner) and probs a (H, T), writes dprobs (H, T) = dlogit/da and dqkv (T, 3*inner) (the
// query part of rows 1..N zero: only the class token queries). o_h = sum_t a_h[t] V_h[t]: da_h[t] =
// dout_h . V_h[t], dV_h[t] = a_h[t] dout_h; a = softmax(s): ds = a * (da - sum a da); s_h[t] = scale q_h .
// K_h[t]: dq_h = scale sum_t ds[t] K_h[t], dK_h[t] = scale ds[t] q_h.
void class_attention_backward(float* dqkv, float* dprobs, const float* dout, const float* qkv, const float* probs,
                              int T, int H, int dk) {
  const int inner = H * dk;
  const size_t ld = static_cast<size_t>(3 * inner);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  std::fill_n(dqkv, static_cast<size_t>(T) * ld, 0.0f);
  std::vector<double> ds(static_cast<size_t>(T));
  for (int h = 0; h < H; ++h) {
    const float* a = probs + static_cast<size_t>(h) * T;
    const float* dh = dout + h * dk;
    float* da = dprobs + static_cast<size_t>(h) * T;
    double dot = 0;
    for (int t = 0; t < T; ++t) {
      const float* v = qkv + t * ld + 2 * inner + h * dk;
      float* dv = dqkv + t * ld + 2 * inner + h * dk;
      double s = 0;
      for (int c = 0; c < dk; ++c) s += static_cast<double>(dh[c]) * v[c], dv[c] = a[t] * dh[c];
      da[t] = static_cast<float>(s);
      dot += s * a[t];
    }
    for (int t = 0; t < T; ++t) ds[static_cast<size_t>(t)] = a[t] * (da[t] - dot);
    const float* q = qkv + h * dk;  // row 0: the class token's query
    for (int t = 0; t < T; ++t) {
      const float* k = qkv + t * ld + inner + h * dk;
      float* dkk = dqkv + t * ld + inner + h * dk;
      for (int c = 0; c < dk; ++c) {
        dqkv[h * dk + c] += static_cast<float>(scale * ds[static_cast<size_t>(t)] * k[c]);
        dkk[c] = static_cast<float>(scale * ds[static_cast<size_t>(t)] * q[c]);
      }
    }
  }
}

// ---- shared pieces of both block kinds ----

// x (M, D) += gamma_2 * fc2(act(fc1(LN2(x)))) with what the backward needs kept in bt (x_mid, ln2_*,
// pre_gelu); cait.cpp mlp_branch's steps.
void mlp_forward(BlockTape& bt, float* x, const BlockWeights& blk, const HParams& hp, int M) {
  const int D = hp.dim, hid = blk.fc1.out;
  const size_t MD = static_cast<size_t>(M) * D;
  bt.x_mid.assign(x, x + MD);
  std::vector<float> xn(MD), y(MD);
  layernorm_taped(xn.data(), &bt.ln2_mean, &bt.ln2_rstd, x, blk.norm2, M, D, hp.eps);
  bt.pre_gelu.resize(static_cast<size_t>(M) * hid);
  linear(bt.pre_gelu.data(), xn.data(), blk.fc1, M);  // (M, hid)
  std::vector<float> h = bt.pre_gelu;
  activation_forward(h.data(), h.size(), hp.act);
  linear(y.data(), h.data(), blk.fc2, M);             // (M, D)
  kernels::residual_add(x, y.data(), blk.ls2.empty() ? nullptr : blk.ls2.data(), static_cast<size_t>(M), D);
}

// dx (M, D): from d(block output) to d(x_mid), through the MLP branch and its residual; in place.
void mlp_backward(float* dx, const BlockTape& bt, const BlockWeights& blk, const HParams& hp, int M) {
  const int D = hp.dim, hid = blk.fc1.out;
  const size_t MD = static_cast<size_t>(M) * D;
  std::vector<float> dbr(MD), dh(static_cast<size_t>(M) * hid), dln(MD);
  for (size_t i = 0; i < MD; ++i) dbr[i] = blk.ls2.empty() ? dx[i] : blk.ls2[i % static_cast<size_t>(D)] * dx[i];
  sgemm(false, false, M, hid, D, 1.0f, dbr.data(), D, blk.fc2.weight.data(), hid, 0.0f, dh.data(), hid);
  if (hp.act == Activation::QuickGelu) quick_gelu_backward(dh.data(), bt.pre_gelu.data(), dh.size());
  else gelu_backward(dh.data(), bt.pre_gelu.data(), dh.size());
  sgemm(false, false, M, D, hid, 1.0f, dh.data(), hid, blk.fc1.weight.data(), D, 0.0f, dln.data(), D);
  layernorm_backward(dx, dln.data(), bt.x_mid.data(), blk.norm2.weight.data(), bt.ln2_mean.data(), bt.ln2_rstd.data(), M, D);
}

// d_att (M, inner) = (gamma_1 * d) proj.W: from d(x_mid) (M, D) to the attention output's gradient.
std::vector<float> attn_out_grad(const float* d, const BlockWeights& blk, int M, int D, int inner) {
  std::vector<float> dbr(static_cast<size_t>(M) * D), datt(static_cast<size_t>(M) * inner);
  for (size_t i = 0; i < dbr.size(); ++i) dbr[i] = blk.ls1.empty() ? d[i] : blk.ls1[i % static_cast<size_t>(D)] * d[i];
  sgemm(false, false, M, inner, D, 1.0f, dbr.data(), D, blk.proj.weight.data(), inner, 0.0f, datt.data(), inner);
  return datt;
}

// dln (M, D) = dqkv (M, 3*inner) qkv.W: the gradient of LN1's output.
std::vector<float> ln1_out_grad(const float* dqkv, const BlockWeights& blk, int M, int D, int inner) {
  std::vector<float> dln(static_cast<size_t>(M) * D);
  sgemm(false, false, M, D, 3 * inner, 1.0f, dqkv, 3 * inner, blk.qkv.weight.data(), D, 0.0f, dln.data(), D);
  return dln;
}

// ---- the taped forward ----

// Self-attention block l on the patches x (N, D), in place (cait_forward's steps), keeping bt and the
// talking-heads weights.
void sa_forward(BlockTape& bt, std::vector<float>& weights, float* x, const ViTWeights& w, int l, int N) {
  const HParams& hp = w.hp;
  const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
  const int D = hp.dim, H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const size_t ND = static_cast<size_t>(N) * D;
  bt.x_in.assign(x, x + ND);
  bt.ln1_out.resize(ND);
  layernorm_taped(bt.ln1_out.data(), &bt.ln1_mean, &bt.ln1_rstd, x, blk.norm1, N, D, hp.eps);
  bt.qkv.resize(static_cast<size_t>(N) * 3 * inner);
  linear(bt.qkv.data(), bt.ln1_out.data(), blk.qkv, N);  // (N, 3*inner)
  bt.probs.resize(static_cast<size_t>(H) * N * N);
  weights.resize(bt.probs.size());
  std::vector<float> att(static_cast<size_t>(N) * inner), y(ND);
  talking_heads_forward(att.data(), bt.probs.data(), bt.qkv.data(), blk.proj_l, blk.proj_w, N, H, dk, weights.data());
  linear(y.data(), att.data(), blk.proj, N);  // (N, D)
  kernels::residual_add(x, y.data(), blk.ls1.empty() ? nullptr : blk.ls1.data(), static_cast<size_t>(N), D);
  mlp_forward(bt, x, blk, hp, N);
}

// Class-attention block l: cls (D) updated in place from u = [cls; x (N, D)] (cait_forward's steps).
void ca_forward(BlockTape& bt, float* cls, const float* x, const ViTWeights& w, int l, int N) {
  const HParams& hp = w.hp;
  const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
  const int D = hp.dim, H = hp.num_heads, dk = hp.head_dim, inner = hp.inner(), T = N + 1;
  const size_t TD = static_cast<size_t>(T) * D;
  bt.x_in.resize(TD);
  std::copy_n(cls, D, bt.x_in.begin());
  std::copy_n(x, static_cast<size_t>(N) * D, bt.x_in.begin() + D);
  bt.ln1_out.resize(TD);
  layernorm_taped(bt.ln1_out.data(), &bt.ln1_mean, &bt.ln1_rstd, bt.x_in.data(), blk.norm1, T, D, hp.eps);
  bt.qkv.resize(static_cast<size_t>(T) * 3 * inner);
  linear(bt.qkv.data(), bt.ln1_out.data(), blk.qkv, T);  // (T, 3*inner)
  bt.probs.resize(static_cast<size_t>(H) * T);
  std::vector<float> o(static_cast<size_t>(inner)), y(static_cast<size_t>(D));
  class_attention_forward(o.data(), bt.probs.data(), bt.qkv.data(), T, H, dk);
  linear(y.data(), o.data(), blk.proj, 1);
  kernels::residual_add(cls, y.data(), blk.ls1.empty() ? nullptr : blk.ls1.data(), 1, D);
  mlp_forward(bt, cls, blk, hp, 1);
}

// The final norm on [cls; x] (T, D) and the head on the class token: tape.logits, ct's x_final and statistics.
void final_forward(ForwardTape& tape, CaitTape& ct, const ViTWeights& w, const float* cls, const float* x, int N) {
  const int D = w.hp.dim, T = N + 1;
  ct.x_final.resize(static_cast<size_t>(T) * D);
  std::copy_n(cls, D, ct.x_final.begin());
  std::copy_n(x, static_cast<size_t>(N) * D, ct.x_final.begin() + D);
  std::vector<float> fin(ct.x_final.size());
  layernorm_taped(fin.data(), &ct.fin_mean, &ct.fin_rstd, ct.x_final.data(), w.norm, T, D, w.hp.eps);
  tape.logits.resize(static_cast<size_t>(w.head.out));
  linear(tape.logits.data(), fin.data(), w.head, 1);
}

}  // namespace

ForwardTape cait_forward_tape_tokens(const ViTWeights& w, const float* x0, const TapeOptions& opt) {
  const HParams& hp = w.hp;
  if (opt.edit_probs) throw Error("CaiT's taped forward does not take edited probabilities (TapeOptions::edit_probs)");
  if (!w.head.present() || !w.norm.present() || hp.pool != Pool::ClassToken)
    throw Error("CaiT's backward needs the final norm and a classifier head on the class token (global_pool 'token')");
  const int T = hp.tokens(), N = T - 1, D = hp.dim, H = hp.num_heads, L = hp.depth, SA = L - hp.class_attn_blocks;
  ForwardTape tape;
  tape.tokens = T;
  tape.dim = D;
  tape.heads = H;
  tape.head_dim = hp.head_dim;
  tape.mlp = hp.mlp_dim;
  auto ct = std::make_shared<CaitTape>();
  ct->patches = N;
  ct->blocks.resize(static_cast<size_t>(L));
  ct->weights.resize(static_cast<size_t>(SA));
  std::vector<float> cls(x0, x0 + D), x(x0 + D, x0 + static_cast<size_t>(T) * D);  // (D), (N, D)
  ForwardResult rec = make_forward_results(1, L, H, T, /*keep_full=*/true).front();
  ForwardOptions fo;
  fo.keep_full = true;
  std::vector<float> tt;
  for (int l = 0; l < L; ++l) {
    BlockTape& bt = ct->blocks[static_cast<size_t>(l)];
    if (l < SA) sa_forward(bt, ct->weights[static_cast<size_t>(l)], x.data(), w, l, N);
    else ca_forward(bt, cls.data(), x.data(), w, l, N);
    cait_record(rec, bt.probs.data(), l < SA, l, H, T, fo, 0, tt);
  }
  final_forward(tape, *ct, w, cls.data(), x.data(), N);
  const size_t HTT = static_cast<size_t>(H) * T * T;
  tape.blocks.resize(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l)
    tape.blocks[static_cast<size_t>(l)].probs.assign(rec.attn.begin() + static_cast<long>(l * HTT),
                                                     rec.attn.begin() + static_cast<long>((l + 1) * HTT));
  ct->cls_attn = std::move(rec.cls_attn);
  tape.cait = std::move(ct);
  return tape;
}

namespace {

// Embeds a self-attention block's (H, N, N) into (H, T, T) rows / columns 1..N, or a class-attention block's
// (H, T) into row 0 (the layout cait_backward reports in).
void embed_tt(std::vector<float>& out, const float* m, bool sa, int H, int T) {
  const int N = T - 1;
  const size_t TT = static_cast<size_t>(T) * T;
  out.assign(static_cast<size_t>(H) * TT, 0.0f);
  for (int h = 0; h < H; ++h) {
    if (!sa) {
      std::copy_n(m + static_cast<size_t>(h) * T, T, &out[h * TT]);
      continue;
    }
    for (int i = 0; i < N; ++i)
      std::copy_n(m + (static_cast<size_t>(h) * N + i) * N, N, &out[h * TT + static_cast<size_t>(1 + i) * T + 1]);
  }
}

// The head and final norm backward: d[cls; x] (T, D) for the logit of class c on head(norm([cls; x])[0]).
std::vector<float> cait_head_backward(const ViTWeights& w, const CaitTape& ct, int c, int T) {
  const int D = w.hp.dim;
  std::vector<float> dfin(static_cast<size_t>(T) * D, 0.0f), dx(dfin.size(), 0.0f);
  std::copy_n(w.head.weight.data() + static_cast<size_t>(c) * D, D, dfin.begin());
  layernorm_backward(dx.data(), dfin.data(), ct.x_final.data(), w.norm.weight.data(), ct.fin_mean.data(),
                     ct.fin_rstd.data(), T, D);
  return dx;
}

struct Grads {           // the backward's running gradients
  std::vector<float> cls;  // (D) d(class token)
  std::vector<float> x;    // (N, D) d(patches)
};

// Class-attention block l's backward: g.cls from d(block output) to d(block input), g.x += the patches' part
// (their keys and values); reports dA and LN1's gradient as cait_backward says.
void ca_backward(Grads& g, BackwardResult& res, const ViTWeights& w, const BlockTape& bt, int l, int T,
                 const BackwardOptions& opt) {
  const HParams& hp = w.hp;
  const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
  const int D = hp.dim, H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  mlp_backward(g.cls.data(), bt, blk, hp, 1);  // g.cls = d(x_mid)
  const std::vector<float> dout = attn_out_grad(g.cls.data(), blk, 1, D, inner);
  std::vector<float> dqkv(static_cast<size_t>(T) * 3 * inner), dprobs(static_cast<size_t>(H) * T);
  class_attention_backward(dqkv.data(), dprobs.data(), dout.data(), bt.qkv.data(), bt.probs.data(), T, H, dk);
  if (opt.on_attn_grad) {
    std::vector<float> a, da;
    embed_tt(a, bt.probs.data(), false, H, T);
    embed_tt(da, dprobs.data(), false, H, T);
    opt.on_attn_grad(l, a.data(), da.data());
  }
  const std::vector<float> dln = ln1_out_grad(dqkv.data(), blk, T, D, inner);  // (T, D)
  if (l == opt.ln1_layer) res.ln1_grad = dln;
  std::vector<float> du(static_cast<size_t>(T) * D, 0.0f);
  layernorm_backward(du.data(), dln.data(), bt.x_in.data(), blk.norm1.weight.data(), bt.ln1_mean.data(),
                     bt.ln1_rstd.data(), T, D);
  for (int j = 0; j < D; ++j) g.cls[static_cast<size_t>(j)] += du[static_cast<size_t>(j)];
  for (size_t i = 0; i < g.x.size(); ++i) g.x[i] += du[static_cast<size_t>(D) + i];
}

// Self-attention block l's backward: g.x from d(block output) to d(block input) (the class token is not in it).
void sa_backward(Grads& g, BackwardResult& res, const ViTWeights& w, const CaitTape& ct, int l, int T,
                 const BackwardOptions& opt) {
  const HParams& hp = w.hp;
  const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
  const BlockTape& bt = ct.blocks[static_cast<size_t>(l)];
  const int D = hp.dim, H = hp.num_heads, dk = hp.head_dim, inner = hp.inner(), N = T - 1;
  mlp_backward(g.x.data(), bt, blk, hp, N);  // g.x = d(x_mid)
  const std::vector<float> dout = attn_out_grad(g.x.data(), blk, N, D, inner);
  std::vector<float> dqkv(static_cast<size_t>(N) * 3 * inner), dweights(static_cast<size_t>(H) * N * N);
  const std::vector<float>& weights = ct.weights[static_cast<size_t>(l)];
  talking_heads_backward(dqkv.data(), dweights.data(), dout.data(), bt.qkv.data(), bt.probs.data(), weights.data(),
                         blk.proj_l, blk.proj_w, N, H, dk);
  if (opt.on_attn_grad) {
    std::vector<float> a, da;
    embed_tt(a, weights.data(), true, H, T);
    embed_tt(da, dweights.data(), true, H, T);
    opt.on_attn_grad(l, a.data(), da.data());
  }
  if (l == opt.lowest_layer && opt.ln1_layer != l && !opt.input_grad) return;  // nothing below is asked for
  const std::vector<float> dln = ln1_out_grad(dqkv.data(), blk, N, D, inner);  // (N, D)
  if (l == opt.ln1_layer) {
    res.ln1_grad.assign(static_cast<size_t>(T) * D, 0.0f);
    std::copy(dln.begin(), dln.end(), res.ln1_grad.begin() + D);
  }
  layernorm_backward(g.x.data(), dln.data(), bt.x_in.data(), blk.norm1.weight.data(), bt.ln1_mean.data(),
                     bt.ln1_rstd.data(), N, D);
}

}  // namespace

BackwardResult cait_backward(const ViTWeights& w, const ForwardTape& tape, int target_class, const BackwardOptions& opt) {
  if (!tape.cait) throw Error("cait_backward: the tape is not a CaiT model's (cait_forward_tape_tokens)");
  const CaitTape& ct = *tape.cait;
  const int L = static_cast<int>(ct.blocks.size()), T = tape.tokens, D = tape.dim;
  const int SA = L - w.hp.class_attn_blocks;
  check_backward_request(w, L, target_class, opt);
  if (w.hp.act != Activation::Gelu && w.hp.act != Activation::QuickGelu)
    throw Error("CaiT's backward differentiates GELU and QuickGELU MLPs, not " + activation_name(w.hp.act));
  BackwardResult res;
  const std::vector<float> dt = cait_head_backward(w, ct, target_class, T);  // (T, D)
  Grads g{std::vector<float>(dt.begin(), dt.begin() + D), std::vector<float>(dt.begin() + D, dt.end())};
  for (int l = L - 1; l >= std::max(SA, opt.lowest_layer); --l)
    ca_backward(g, res, w, ct.blocks[static_cast<size_t>(l)], l, T, opt);
  for (int l = SA - 1; l >= opt.lowest_layer; --l) sa_backward(g, res, w, ct, l, T, opt);
  if (opt.input_grad && opt.lowest_layer == 0) {
    res.x0_grad = g.cls;
    res.x0_grad.insert(res.x0_grad.end(), g.x.begin(), g.x.end());
  }
  return res;
}

}  // namespace attnmap
