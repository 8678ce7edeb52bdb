#include "model/vit.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "model/cait.hpp"
#include "model/kernels.hpp"
#include "model/pos_embed.hpp"
#include "model/preprocess.hpp"
#include "model/rope.hpp"
#include "model/sgemm.hpp"
#include "model/thread_pool.hpp"
#include "model/vit_internal.hpp"

namespace attnmap {

int resolve_layer(int layer, int depth) {
  const int l = layer < 0 ? depth + layer : layer;
  if (l < 0 || l >= depth)
    throw Error("layer " + std::to_string(layer) + " out of range: the model has " + std::to_string(depth) +
                (depth == 1 ? " block" : " blocks") + " (0.." + std::to_string(depth - 1) + ", or -1..-" +
                std::to_string(depth) + ")");
  return l;
}

void layernorm_forward(float* out, const float* in, const float* weight, const float* bias, int M, int D, float eps) {
  kernels::layernorm(out, in, weight, bias, M, D, eps);
}

void softmax_rows(float* x, int M, int n) { kernels::softmax_rows(x, M, n); }

void gelu_forward(float* x, size_t n) { kernels::gelu(x, n); }

void activation_forward(float* x, size_t n, Activation act) { kernels::activation(x, n, act); }

void swiglu_forward(float* out, const float* in, int M, int hidden) { kernels::swiglu(out, in, M, hidden); }

void query_row(float* out, const float* p, int T, bool class_token, int first_patch) {
  if (class_token) {
    std::copy_n(p, T, out);
    return;
  }
  std::vector<double> acc(static_cast<size_t>(T), 0.0);
  for (int i = first_patch; i < T; ++i)
    for (int j = 0; j < T; ++j) acc[static_cast<size_t>(j)] += p[static_cast<size_t>(i) * T + j];
  const double n = std::max(T - first_patch, 1);
  for (int j = 0; j < T; ++j) out[j] = static_cast<float>(acc[static_cast<size_t>(j)] / n);
}

// tokens (T, D) of one image: [class token; distillation token; register tokens; patch embeddings], with the
// position embeddings added to the first hp.pos_prefix prefix tokens and to the patches. Registers without a
// position row are the DINOv2 convention (facebookresearch: inserted after the class token once the position
// embedding is added; timm no_embed_class: the prefix tokens get none).
void embed_tokens(float* x, const ViTWeights& w, const float* image) {
  const HParams& hp = w.hp;
  const int D = hp.dim, N = hp.grid_w * hp.grid_h, P = hp.patch;
  std::vector<float> patches = patchify(image, hp.image_h, hp.image_w, P);  // (N, 3*P*P)
  float* xp = x + static_cast<size_t>(hp.num_prefix) * D;                  // (N, D)
  if (w.patch_norm_in.present()) {  // vit-pytorch: LayerNorm of each patch's pixels first
    const LayerNormW& n = w.patch_norm_in;
    layernorm_forward(patches.data(), std::vector<float>(patches).data(), n.weight.data(), n.bias.data(), N,
                      3 * P * P, hp.eps);
  }
  if (w.patch_embed.present()) {
    linear(xp, patches.data(), w.patch_embed, N);
  } else {
    std::copy(patches.begin(), patches.end(), xp);  // seed layout: D == 3*P*P
  }
  if (w.patch_norm_out.present()) {
    const std::vector<float> e(xp, xp + static_cast<size_t>(N) * D);
    layernorm_forward(xp, e.data(), w.patch_norm_out.weight.data(), w.patch_norm_out.bias.data(), N, D, hp.eps);
  }
  float* extra = x;  // (num_prefix - class token, D): distillation token, then registers
  if (hp.cls_is_mean) {
    for (int j = 0; j < D; ++j) {
      double s = 0;
      for (int i = 0; i < N; ++i) s += xp[static_cast<size_t>(i) * D + j];
      x[j] = static_cast<float>(s / N);
    }
    extra += D;
  } else if (hp.class_token) {
    std::copy(w.cls_token.begin(), w.cls_token.end(), x);
    extra += D;
  }
  std::copy(w.extra_tokens.begin(), w.extra_tokens.end(), extra);
  if (hp.pos_sincos) {  // SimpleViT: the table for this grid, added to the patches
    std::vector<float> pe(static_cast<size_t>(N) * D);
    sincos_2d(pe.data(), hp.grid_h, hp.grid_w, D);
    for (size_t i = 0; i < pe.size(); ++i) xp[i] += pe[i];
  } else if (!w.pos_embed.empty()) {
    const size_t np = static_cast<size_t>(hp.pos_prefix) * D;  // prefix rows (pos_prefix, D)
    for (size_t i = 0; i < np; ++i) x[i] += w.pos_embed[i];
    const size_t n = static_cast<size_t>(N) * D;  // patch rows (N, D)
    for (size_t i = 0; i < n; ++i) xp[i] += w.pos_embed[np + i];
  }
  if (w.norm_pre.present()) {  // CLIP ln_pre / timm norm_pre, on every token
    const size_t TD = static_cast<size_t>(hp.tokens()) * D;
    const std::vector<float> t(x, x + TD);
    layernorm_forward(x, t.data(), w.norm_pre.weight.data(), w.norm_pre.bias.data(), hp.tokens(), D, hp.eps);
  }
}

namespace {

// x (M, D) += gamma (D) * y (M, D), or x += y without LayerScale (empty gamma).
void add_scaled(float* x, const float* y, const Floats& gamma, size_t M, int D) {
  kernels::residual_add(x, y, gamma.empty() ? nullptr : gamma.data(), M, D);
}

// An allocator whose construct() without arguments default-initialises: a vector's resize() leaves new floats
// unset (no zero fill). For work buffers every element of which is written before it is read.
template <class T>
struct NoZeroFill : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = NoZeroFill<U>;
  };
  NoZeroFill() = default;
  template <class U>
  NoZeroFill(const NoZeroFill<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) { ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...); }
};
using WorkBuf = std::vector<float, NoZeroFill<float>>;

// The activations of one forward pass over B images of T tokens (BT = B*T rows). Each buffer is sized exactly
// for the pass (make_activations) and written in full before it is read (x by embed_tokens, xn by a LayerNorm,
// qkv / hid by linear(), att / probs by attention_forward; bias_kept, tmp, tmp2 by their users), so no zero fill.
struct Activations {
  WorkBuf x;      // (B*T, D) residual stream
  WorkBuf xn;     // (B*T, D) normalised
  WorkBuf qkv;    // (B*T, 3*inner)
  WorkBuf att;    // (B*T, inner) attention output
  WorkBuf probs;  // (H, T, T) of one image, sized by attention_layer when they are read
  WorkBuf hid;    // (B*T, M), or (B*T, 2M) with SwiGLU
  WorkBuf bias_kept;  // (H, T, T) one image's relative position bias with token dropping (BEiT)
  WorkBuf tmp, tmp2;  // a layer's scratch: qk_norm_forward's rows, SwiGLU's / mlp_norm's hidden units
  Precision precision = Precision::F32;  // the products' arithmetic (ViTWeights::precision)
};

void make_activations(Activations& a, const HParams& hp, int BT) {  // probs: by attention_layer, when read
  const int D = hp.dim, inner = hp.inner();
  a.x.resize(static_cast<size_t>(BT) * D);
  a.xn.resize(a.x.size());
  a.qkv.resize(static_cast<size_t>(BT) * 3 * inner);
  a.att.resize(static_cast<size_t>(BT) * inner);
  a.hid.resize(static_cast<size_t>(BT) * static_cast<size_t>(std::max(hp.mlp_dim, 1)) * (hp.swiglu ? 2 : 1));
}

// The calling thread's Activations, kept from one forward to the next (a folder's images: no allocation, zero
// fill, page faults and munmap per forward), or a fresh set when this thread is already inside a forward (a
// callback that runs another). Buffers over kKeepBytes in all are freed when the forward ends.
class ActivationsLease {
 public:
  ActivationsLease() : a_(busy_ ? &own_ : &kept_), leased_(!busy_) { busy_ = true; }
  ~ActivationsLease() {
    if (!leased_) return;
    busy_ = false;
    size_t bytes = 0;
    for (const WorkBuf* v : {&kept_.x, &kept_.xn, &kept_.qkv, &kept_.att, &kept_.probs, &kept_.hid,
                             &kept_.bias_kept, &kept_.tmp, &kept_.tmp2})
      bytes += v->capacity() * sizeof(float);
    if (bytes > kKeepBytes) kept_ = Activations{};
  }
  ActivationsLease(const ActivationsLease&) = delete;
  ActivationsLease& operator=(const ActivationsLease&) = delete;
  Activations& get() { return *a_; }

 private:
  // 1 GiB: a ViT-B/16 at 448 px in batches of 8 uses ~200 MiB, and freeing it after each forward cost 11 % of
  // the next one in page faults (AMD Zen 5: 478-498 -> 421-431 ms per image); larger sets are rare and freed.
  static constexpr size_t kKeepBytes = size_t(1) << 30;
  static thread_local Activations kept_;
  static thread_local bool busy_;
  Activations own_;
  Activations* a_;
  bool leased_;
};
thread_local Activations ActivationsLease::kept_;
thread_local bool ActivationsLease::busy_ = false;

// timm qk_norm: each head's query (d_k) and key (d_k) through their LayerNorms, in place in qkv (BT, 3*inner):
// the queries (or keys) of every token gathered as (BT * H, d_k) rows, normalised in one call, put back.
// rows, normed: scratch, resized here.
void qk_norm_forward(float* qkv, WorkBuf& rows, WorkBuf& normed, const BlockWeights& blk, const HParams& hp, int BT) {
  const int H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  rows.resize(static_cast<size_t>(BT) * inner);  // (BT * H, dk), every element copied in below
  normed.resize(rows.size());                    // (BT * H, dk), written by the LayerNorm
  for (int part = 0; part < 2; ++part) {  // 0: queries, 1: keys
    const LayerNormW& n = part == 0 ? blk.q_norm : blk.k_norm;
    for (int t = 0; t < BT; ++t)
      std::copy_n(qkv + static_cast<size_t>(t) * 3 * inner + static_cast<size_t>(part) * inner, inner,
                  &rows[static_cast<size_t>(t) * inner]);
    layernorm_forward(normed.data(), rows.data(), n.weight.data(), n.bias.data(), BT * H, dk, hp.eps);
    for (int t = 0; t < BT; ++t)
      std::copy_n(&normed[static_cast<size_t>(t) * inner], inner,
                  qkv + static_cast<size_t>(t) * 3 * inner + static_cast<size_t>(part) * inner);
  }
}

// Image b's kept patches (token dropping), or null: all of them.
const std::vector<int>* kept_patches(const ForwardOptions& opt, int b) {
  return !opt.keep_patches_each.empty() ? &opt.keep_patches_each[static_cast<size_t>(b)] : opt.keep_patches ? &*opt.keep_patches : nullptr;
}

// LN1(x) into xn, or x itself without norm1: the block's input to qkv (B*T, D).
const float* norm1_forward(Activations& a, const BlockWeights& blk, const HParams& hp, int BT) {
  if (!blk.norm1.present()) return a.x.data();
  layernorm_forward(a.xn.data(), a.x.data(), blk.norm1.weight.data(), blk.norm1.bias.data(), BT, hp.dim, hp.eps);
  return a.xn.data();
}

// qkv (B*T, 3*inner) = LN1(x) (B*T, D) @ W_qkv^T + b_qkv; no LN1 in the seed layout.
void qkv_forward(Activations& a, const BlockWeights& blk, const HParams& hp, int BT) {
  linear(a.qkv.data(), norm1_forward(a, blk, hp, BT), blk.qkv, BT, a.precision);  // (B*T, 3*inner)
  if (blk.q_norm.present()) qk_norm_forward(a.qkv.data(), a.tmp, a.tmp2, blk, hp, BT);
}

// The drawn block when only its class token's attention rows are read (cls_row_attention): of qkv only the
// keys of every token and each image's class query, with the bits the whole product gives them; the whole
// where linear_columns cannot (bf16, not the own kernels, inner not whole panels) or q/k norms or RoPE read it.
void class_row_qkv_forward(Activations& a, const BlockWeights& blk, const HParams& hp, int B, int T) {
  const int BT = B * T, inner = hp.inner();
  const size_t D = static_cast<size_t>(hp.dim), ld = 3 * static_cast<size_t>(inner);
  if (blk.q_norm.present() || hp.rope != Rope::None || a.precision != Precision::F32) return qkv_forward(a, blk, hp, BT);
  const float* in = norm1_forward(a, blk, hp, BT);
  if (!linear_columns(a.qkv.data() + inner, ld, in, D, blk.qkv, BT, inner, inner) ||  // keys (B*T, inner)
      !linear_columns(a.qkv.data(), ld * static_cast<size_t>(T), in, D * static_cast<size_t>(T), blk.qkv, B, 0, inner))
    linear(a.qkv.data(), in, blk.qkv, BT, a.precision);  // (B*T, 3*inner)
}

// A block's relative position bias (BEiT) as each image's attention sees it: the full (H, Tf, Tf) one, or with
// token dropping, the rows and columns of the tokens each image kept (their relative offsets are the full
// grid's: each kept patch keeps its position, as it keeps its position embedding).
struct BiasView {
  const float* full = nullptr;  // (H, Tf, Tf) or null: no bias
  int Tf = 0;
  const std::vector<std::vector<int>>* kept = nullptr;  // per image: full index of each of its T tokens, or null
  // Image b's (H, T, T) bias: the full one, or gathered into `scratch`.
  const float* image(int b, int H, int T, WorkBuf& scratch) const {
    if (!full || !kept) return full;
    const std::vector<int>& k = (*kept)[static_cast<size_t>(b)];
    scratch.resize(static_cast<size_t>(H) * T * T);
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j)
          scratch[(static_cast<size_t>(h) * T + i) * T + j] = full[(static_cast<size_t>(h) * Tf + k[i]) * Tf + k[j]];
    return scratch.data();
  }
  // Image b's row 0 (the class token's) of head h, entry j.
  float row0(int b, int h, int j) const {
    const int kj = kept ? (*kept)[static_cast<size_t>(b)][static_cast<size_t>(j)] : j;
    return full[static_cast<size_t>(h) * Tf * Tf + static_cast<size_t>(kj)];
  }
};

// The drawn layer l: only the class token's row of each head's probabilities is needed, (1, T) per
// head instead of (T, T), and no attention output. Into each result's cls_attn[l] (H, T). bias: the block's
// relative position bias (BEiT), if any.
void cls_row_attention(std::vector<ForwardResult>& res, const Activations& a, const HParams& hp, int l, int T,
                       const BiasView& bias) {
  const int B = static_cast<int>(res.size());
  const int H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const bool own = own_attention_products(a.precision);
  parallel_for(B * H, [&](int bh) {  // every image's heads spread over the pool
    const int b = bh / H, h = bh % H;
    ForwardResult& r = res[static_cast<size_t>(b)];
    const float* q = &a.qkv[static_cast<size_t>(b) * T * 3 * inner];  // (T, 3*inner), row 0 = class token
    float* row = &r.cls_attn[(static_cast<size_t>(l) * H + h) * T];    // (T)
    if (own)  // the bits of the full attention's row 0 (attention_forward)
      class_scores_row(row, q, T, H, dk, h);
    else
      sgemm(false, true, 1, T, dk, scale, q + h * dk, 3 * inner, q + inner + h * dk, 3 * inner, 0.0f, row, T);
    if (bias.full)  // BEiT: + row 0 (the class token's) of this head's relative position bias
      for (int j = 0; j < T; ++j) row[j] += bias.row0(b, h, j);
    softmax_rows(row, 1, T);
  });
}

// Layer l's attention, image by image: att (T, inner) of each image from its qkv (T, 3*inner); its
// probabilities (H, T, T) go to cls_attn[l] (class rows), attn[l] with keep_full, and opt.on_probs.
void attention_layer(std::vector<ForwardResult>& res, Activations& a, const HParams& hp, int l,
                     const ForwardOptions& opt, int T, const BiasView& bias) {
  const int B = static_cast<int>(res.size());
  const int H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const size_t TT = static_cast<size_t>(T) * T;
  // The (H, T, T) matrices are stored only when read: kept, handed to on_probs, or averaged over the patch
  // queries (no class token); else the class token's rows come from the blocks that compute them.
  const bool full = opt.keep_full || opt.on_probs || !hp.class_token;
  if (full && !opt.keep_full) a.probs.resize(static_cast<size_t>(H) * TT);
  for (int b = 0; b < B; ++b) {
    ForwardResult& r = res[static_cast<size_t>(b)];
    float* probs = !full ? nullptr : opt.keep_full ? &r.attn[static_cast<size_t>(l) * H * TT] : a.probs.data();
    float* cls = &r.cls_attn[static_cast<size_t>(l) * H * T];  // (H, T)
    attention_forward(&a.att[static_cast<size_t>(b) * T * inner], probs, &a.qkv[static_cast<size_t>(b) * T * 3 * inner],
                      T, H, dk, bias.image(b, H, T, a.bias_kept), a.precision, hp.class_token ? cls : nullptr);
    if (!hp.class_token)
      for (int h = 0; h < H; ++h)
        query_row(cls + static_cast<size_t>(h) * T, probs + static_cast<size_t>(h) * TT, T, false, hp.num_prefix);
    if (opt.on_probs) opt.on_probs(b, l, probs);
  }
}

// Seed layout: the output is weights.V, each image's att (T, inner) into its tokens_out.
void seed_output(std::vector<ForwardResult>& res, const Activations& a, const HParams& hp, int T) {
  const int B = static_cast<int>(res.size());
  const int inner = hp.inner();
  for (int b = 0; b < B; ++b)
    res[static_cast<size_t>(b)].tokens_out.assign(a.att.begin() + static_cast<long>(b) * T * inner,
                                                  a.att.begin() + static_cast<long>(b + 1) * T * inner);
}

// x = x + ls1 * proj(attn); x = x + ls2 * fc2(act(fc1(LN2(x)))) (LayerScale, Touvron et al. 2021), or with
// SwiGLU fc2(silu(x1) * x2) for [x1 | x2] = fc1(LN2(x)); x (B*T, D), att (B*T, inner), hid (B*T, M or 2M).
// Without proj (vit-pytorch, H * d_k == D), the attention output joins the residual as it is.
void residual_mlp_forward(Activations& a, const BlockWeights& blk, const HParams& hp, int BT) {
  const int D = hp.dim;
  const float* ls1 = blk.ls1.empty() ? nullptr : blk.ls1.data();
  const float* ls2 = blk.ls2.empty() ? nullptr : blk.ls2.data();
  if (blk.proj.present()) {  // x += ls1 * proj(attn), added tile by tile (Epilogue)
    linear(nullptr, a.att.data(), blk.proj, BT, a.precision, Epilogue{nullptr, a.x.data(), ls1});
  } else {
    add_scaled(a.x.data(), a.att.data(), blk.ls1, static_cast<size_t>(BT), D);
  }
  layernorm_forward(a.xn.data(), a.x.data(), blk.norm2.weight.data(), blk.norm2.bias.data(), BT, D, hp.eps);
  const int M = hp.mlp_dim;
  if (hp.swiglu) {
    linear(a.hid.data(), a.xn.data(), blk.fc1, BT, a.precision);  // (B*T, 2M)
    a.tmp.resize(static_cast<size_t>(BT) * M);  // (B*T, M), written by swiglu_forward
    swiglu_forward(a.tmp.data(), a.hid.data(), BT, M);
    std::copy(a.tmp.begin(), a.tmp.end(), a.hid.begin());
  } else {  // act(fc1(LN2(x))) (B*T, M), the activation on each tile as it is made
    linear(a.hid.data(), a.xn.data(), blk.fc1, BT, a.precision, Epilogue{&hp.act, nullptr, nullptr});
  }
  if (blk.mlp_norm.present()) {  // EVA-02 sub-LayerNorm of the hidden units (B*T, M), before fc2
    a.tmp.assign(a.hid.begin(), a.hid.begin() + static_cast<long>(BT) * M);  // (B*T, M)
    layernorm_forward(a.hid.data(), a.tmp.data(), blk.mlp_norm.weight.data(), blk.mlp_norm.bias.data(), BT, M, hp.eps);
  }
  linear(nullptr, a.hid.data(), blk.fc2, BT, a.precision, Epilogue{nullptr, a.x.data(), ls2});  // x += ls2 * fc2(.)
}

// timm AttentionPoolLatent (latent_len 1): the probe's query q = W_q latent + b_q (D), keys and values
// [K | V] = tokens (T, D) W_kv^T + b_kv (T, 2D); per head h, a_h = softmax(q_h K_h^T / sqrt(d_k)) (T) into
// probe_attn (H, T); y = proj([a_h V_h]_h) (D); y += mlp(norm(y)). out (D) = y.
void attention_pool_forward(float* out, float* probe_attn, const AttentionPoolW& p, const float* tokens,
                            const HParams& hp, int T) {
  const int D = hp.dim, H = hp.num_heads, dk = hp.head_dim;
  std::vector<float> q(static_cast<size_t>(D)), kv(static_cast<size_t>(T) * 2 * D), y(static_cast<size_t>(D));
  linear(q.data(), p.latent.data(), p.q, 1);   // (D)
  linear(kv.data(), tokens, p.kv, T);           // (T, 2D): [K | V], heads contiguous in each
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int h = 0; h < H; ++h) {
    float* a = probe_attn + static_cast<size_t>(h) * T;  // (T)
    for (int t = 0; t < T; ++t) {
      const float* k = &kv[static_cast<size_t>(t) * 2 * D + static_cast<size_t>(h) * dk];
      double dot = 0;
      for (int c = 0; c < dk; ++c) dot += static_cast<double>(q[static_cast<size_t>(h * dk + c)] * scale) * k[c];
      a[t] = static_cast<float>(dot);
    }
    softmax_rows(a, 1, T);
    for (int c = 0; c < dk; ++c) {
      double acc = 0;
      for (int t = 0; t < T; ++t) acc += static_cast<double>(a[t]) * kv[static_cast<size_t>(t) * 2 * D + D + static_cast<size_t>(h) * dk + c];
      y[static_cast<size_t>(h * dk + c)] = static_cast<float>(acc);
    }
  }
  linear(out, y.data(), p.proj, 1);  // (D)
  std::vector<float> n(static_cast<size_t>(D)), hid(static_cast<size_t>(p.fc1.out)), m(static_cast<size_t>(D));
  layernorm_forward(n.data(), out, p.norm.weight.data(), p.norm.bias.data(), 1, D, hp.eps);
  linear(hid.data(), n.data(), p.fc1, 1);
  activation_forward(hid.data(), hid.size(), hp.act);
  linear(m.data(), hid.data(), p.fc2, 1);
  for (int j = 0; j < D; ++j) out[j] += m[static_cast<size_t>(j)];
}

// The vector the classifier reads (D), from one image's final tokens (T, D): the class token, the mean of
// the patch tokens (timm 'avg'), of every token (vit-pytorch 'mean'), or the attention pool's output; then
// fc_norm when the model has one (timm forward_head).
std::vector<float> pooled_forward(ForwardResult& r, const ViTWeights& w, const float* tokens, int T) {
  const HParams& hp = w.hp;
  const int D = hp.dim;
  std::vector<float> v(static_cast<size_t>(D), 0.0f);
  if (hp.pool == Pool::ClassToken) {
    std::copy_n(tokens, D, v.begin());
  } else if (hp.pool == Pool::Map) {
    r.pool_attn.resize(static_cast<size_t>(hp.num_heads) * T);
    attention_pool_forward(v.data(), r.pool_attn.data(), w.attn_pool, tokens, hp, T);
  } else {
    const int first = hp.pool == Pool::MeanPatches ? hp.num_prefix : 0;
    std::vector<double> acc(static_cast<size_t>(D), 0.0);
    for (int t = first; t < T; ++t)
      for (int j = 0; j < D; ++j) acc[static_cast<size_t>(j)] += tokens[static_cast<size_t>(t) * D + j];
    for (int j = 0; j < D; ++j) v[static_cast<size_t>(j)] = static_cast<float>(acc[static_cast<size_t>(j)] / std::max(T - first, 1));
  }
  if (w.fc_norm.present()) {
    const std::vector<float> u = v;
    layernorm_forward(v.data(), u.data(), w.fc_norm.weight.data(), w.fc_norm.bias.data(), 1, D, hp.eps);
  }
  r.pooled = v;
  return v;
}

// logits (C) = head(pooled); DeiT distilled: (head(class) + head_dist(distillation)) / 2. tokens: one
// image's final tokens (T, D).
void logits_forward(ForwardResult& r, const ViTWeights& w, const float* tokens, int T) {
  const int D = w.hp.dim;
  const std::vector<float> pooled = pooled_forward(r, w, tokens, T);  // (D)
  if (w.zero_shot.present()) {  // CLIP: the texts are the classes (issue 43)
    r.logits.resize(static_cast<size_t>(w.zero_shot.classes));
    zero_shot_logits(r.logits.data(), w, pooled.data());
    return;
  }
  r.logits.resize(static_cast<size_t>(w.head.out));
  linear(r.logits.data(), pooled.data(), w.head, 1);  // (C)
  if (w.head_dist.present()) {  // DeiT distilled: (head(class) + head_dist(distillation)) / 2
    std::vector<float> ld(static_cast<size_t>(w.head_dist.out));  // (C)
    linear(ld.data(), tokens + D, w.head_dist, 1);
    for (size_t c = 0; c < ld.size(); ++c) r.logits[c] = 0.5f * (r.logits[c] + ld[c]);
  }
}

// After the last block: the final LayerNorm (if any) of x (B*T, D), each image's tokens (T, D) into
// tokens_out, with a head its logits, with an attention pool its probe's attention.
void final_forward(std::vector<ForwardResult>& res, Activations& a, const ViTWeights& w, int BT, int T) {
  const HParams& hp = w.hp;
  const int B = static_cast<int>(res.size());
  const int D = hp.dim;
  const float* fin = a.x.data();
  if (w.norm.present()) {
    layernorm_forward(a.xn.data(), a.x.data(), w.norm.weight.data(), w.norm.bias.data(), BT, D, hp.eps);
    fin = a.xn.data();
  }
  for (int b = 0; b < B; ++b) {
    ForwardResult& r = res[static_cast<size_t>(b)];
    const float* tb = fin + static_cast<size_t>(b) * T * D;
    r.tokens_out.assign(tb, tb + static_cast<size_t>(T) * D);
    if (w.has_classes()) {
      logits_forward(r, w, tb, T);
    } else if (hp.pool == Pool::Map) {
      (void)pooled_forward(r, w, tb, T);  // the probe's attention, without a classifier
    }
  }
}

// The tokens after token dropping: T' = num_prefix + |keep|. Throws attnmap::Error for a bad list.
int kept_tokens(const HParams& hp, const std::vector<int>& keep) {
  if (hp.cls_is_mean)
    throw Error("keep_patches: this model's class token is the mean of the patch tokens; dropping patches is not defined for it");
  const int N = hp.grid_w * hp.grid_h;
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i] < 0 || keep[i] >= N || (i > 0 && keep[i] <= keep[i - 1]))
      throw Error("keep_patches: patch indices must be strictly increasing in 0.." + std::to_string(N - 1) +
                  ", found " + std::to_string(keep[i]) + " at position " + std::to_string(i));
  return hp.num_prefix + static_cast<int>(keep.size());
}

// The token count of a forward pass: T, or T' with token dropping. Throws attnmap::Error for bad lists.
int forward_tokens(const HParams& hp, const ForwardOptions& opt, int B) {
  if (opt.keep_patches_each.empty()) return opt.keep_patches ? kept_tokens(hp, *opt.keep_patches) : hp.tokens();
  if (opt.keep_patches_each.size() != static_cast<size_t>(B))
    throw Error("keep_patches_each: " + std::to_string(opt.keep_patches_each.size()) + " lists for " +
                std::to_string(B) + " images");
  const int T = kept_tokens(hp, opt.keep_patches_each.front());
  for (const std::vector<int>& k : opt.keep_patches_each)
    if (kept_tokens(hp, k) != T)
      throw Error("keep_patches_each: every image must keep the same number of patches (" +
                  std::to_string(T - hp.num_prefix) + " and " + std::to_string(k.size()) + ")");
  return T;
}

// One image's tokens (T', D) into x: embedded in full (embed_tokens), then the prefix rows and the kept patch rows.
void embed_kept(float* x, const ViTWeights& w, const float* image, const std::vector<int>& keep) {
  const HParams& hp = w.hp;
  const size_t D = static_cast<size_t>(hp.dim), P = static_cast<size_t>(hp.num_prefix);
  std::vector<float> full(static_cast<size_t>(hp.tokens()) * D);  // (T, D)
  embed_tokens(full.data(), w, image);
  std::copy_n(full.data(), P * D, x);
  for (size_t i = 0; i < keep.size(); ++i)
    std::copy_n(&full[(P + static_cast<size_t>(keep[i])) * D], D, x + (P + i) * D);
}

}  // namespace

// B results of L layers: cls_attn (L, H, T) and, with keep_full, attn (L, H, T, T), zero-filled.
std::vector<ForwardResult> make_forward_results(int B, int L, int H, int T, bool keep_full) {
  const size_t TT = static_cast<size_t>(T) * T;
  std::vector<ForwardResult> res(static_cast<size_t>(B));
  for (auto& r : res) {
    r.layers = L;
    r.heads = H;
    r.tokens = T;
    r.cls_attn.resize(static_cast<size_t>(L) * H * T);
    if (keep_full) r.attn.resize(static_cast<size_t>(L) * H * TT);
  }
  return res;
}

std::vector<ForwardResult> vit_forward(const ViTWeights& w, const std::vector<const float*>& images,
                                       const ForwardOptions& opt) {
  if (w.hp.class_attn_blocks > 0) return cait_forward(w, images, opt);  // CaiT: model/cait.cpp
  const HParams& hp = w.hp;
  const int B = static_cast<int>(images.size());
  const int T = forward_tokens(hp, opt, B);
  const int D = hp.dim, H = hp.num_heads;
  const int last = opt.to_end ? hp.depth - 1 : resolve_layer(opt.last_layer, hp.depth);
  const int L = last + 1;
  const int BT = B * T;

  std::vector<ForwardResult> res = make_forward_results(B, L, H, T, opt.keep_full);
  ActivationsLease lease;  // this thread's buffers, kept between forwards
  Activations& a = lease.get();
  make_activations(a, hp, BT);
  a.precision = w.precision;
  for (int b = 0; b < B; ++b) {
    float* xb = &a.x[static_cast<size_t>(b) * T * D];
    const std::vector<int>* keep = kept_patches(opt, b);
    keep ? embed_kept(xb, w, images[static_cast<size_t>(b)], *keep) : embed_tokens(xb, w, images[static_cast<size_t>(b)]);
  }

  // Rotary positions (timm Eva): the tables of this grid, prepared once per model (prepare_rope) or here.
  RopeTables local_rope;
  const RopeTables* rope = nullptr;
  if (hp.rope != Rope::None) {
    const bool ready = w.rope.grid_h == hp.grid_h && w.rope.grid_w == hp.grid_w && !w.rope.sin.empty();
    if (!ready) local_rope = rope_tables(hp, hp.grid_h, hp.grid_w);
    rope = ready ? &w.rope : &local_rope;
  }
  // Token dropping with a relative position bias: each image's tokens' indices in the full sequence.
  std::vector<std::vector<int>> kept_index;
  if (hp.rel_pos && (opt.keep_patches || !opt.keep_patches_each.empty()))
    for (int b = 0; b < B; ++b) {
      std::vector<int> k;
      for (int p = 0; p < hp.num_prefix; ++p) k.push_back(p);
      for (int p : *kept_patches(opt, b)) k.push_back(hp.num_prefix + p);
      kept_index.push_back(std::move(k));
    }
  for (int l = 0; l < L; ++l) {
    const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
    // the drawn block, when nothing reads more than its class token's attention rows
    const bool class_rows = l == L - 1 && !opt.keep_full && !opt.to_end && !opt.on_probs && !opt.on_tokens && hp.class_token;
    class_rows ? class_row_qkv_forward(a, blk, hp, B, T) : qkv_forward(a, blk, hp, BT);
    if (rope)  // after qkv and q/k norms, as EvaAttention: each image's patch queries and keys rotated in place
      for (int b = 0; b < B; ++b)
        rope_forward(&a.qkv[static_cast<size_t>(b) * T * 3 * hp.inner()], *rope, hp, T,
                     kept_patches(opt, b) ? kept_patches(opt, b)->data() : nullptr);
    BiasView bias;  // BEiT relative position bias (H, T, T), each image's kept tokens' part with token dropping
    if (blk.attn_bias) {
      bias.full = blk.attn_bias->data();
      bias.Tf = hp.tokens();
      if (T != hp.tokens() || opt.keep_patches || !opt.keep_patches_each.empty()) bias.kept = &kept_index;
    }
    if (class_rows) {
      cls_row_attention(res, a, hp, l, T, bias);
      break;
    }
    attention_layer(res, a, hp, l, opt, T, bias);
    if (!hp.residual_mlp) {  // seed layout: the output is weights.V
      if (opt.to_end) seed_output(res, a, hp, T);
      continue;
    }
    if (l == L - 1 && !opt.to_end && !opt.on_tokens) break;  // the maps need nothing past this block's attention
    residual_mlp_forward(a, blk, hp, BT);
    if (opt.on_tokens)
      for (int b = 0; b < B; ++b) opt.on_tokens(b, l, &a.x[static_cast<size_t>(b) * T * D]);
  }
  if (opt.to_end && hp.residual_mlp) final_forward(res, a, w, BT, T);
  return res;
}

namespace {

// A view into a file's mapping becomes an owned copy (Floats::owned copies it); owned values stay as they are.
void own(Floats& f) {
  if (f.is_view()) (void)f.owned();
}

// precision: the blocks' products' (the patch embedding and the heads stay in float32).
void prepare_linear(LinearW& lin, bool backward, Precision precision = Precision::F32) {
  own(lin.bias);
  if (backward || !linear_packs_weights()) own(lin.weight);
  prepack_linear(lin, precision);
}

}  // namespace

void prepare_weights(ViTWeights& w, bool backward) {
  if (w.precision == Precision::BF16) {
    if (!bf16_supported())
      throw Error("bfloat16 products need a CPU with AVX512_BF16 (oneDNN's native bf16 kernels); this one has none: "
                  "run in float32");
    if (backward) throw Error("the class-specific views and explanations run in float32 only, not with bfloat16 products");
    if (w.hp.class_attn_blocks > 0) throw Error("CaiT runs in float32 only, not with bfloat16 products");
  }
  prepare_rope(w);  // rotary tables of the grid (none without a rope)
  prepare_linear(w.patch_embed, backward);
  for (LayerNormW* n : {&w.patch_norm_in, &w.patch_norm_out, &w.norm_pre, &w.norm, &w.fc_norm, &w.attn_pool.norm})
    own(n->weight), own(n->bias);
  for (Floats* f : {&w.cls_token, &w.extra_tokens, &w.pos_embed, &w.attn_pool.latent, &w.rel_pos_table_shared}) own(*f);
  for (LinearW* l : {&w.attn_pool.q, &w.attn_pool.kv, &w.attn_pool.proj, &w.attn_pool.fc1, &w.attn_pool.fc2})
    prepare_linear(*l, backward);
  for (BlockWeights& b : w.blocks) {
    for (LayerNormW* n : {&b.norm1, &b.norm2, &b.q_norm, &b.k_norm, &b.mlp_norm}) own(n->weight), own(n->bias);
    for (Floats* f : {&b.ls1, &b.ls2, &b.rel_pos_table}) own(*f);
    for (LinearW* l : {&b.qkv, &b.proj, &b.fc1, &b.fc2}) prepare_linear(*l, backward, w.precision);
    for (LinearW* l : {&b.proj_l, &b.proj_w}) own(l->weight), own(l->bias);  // CaiT talking heads (H, H)
  }
  prepare_linear(w.head, backward);
  prepare_linear(w.head_dist, backward);
  own(w.proj.weight);  // CLIP's visual projection (zero_shot_logits multiplies by it directly)
  own(w.zero_shot.text);
}

ForwardResult vit_forward(const ViTWeights& w, const float* image, const ForwardOptions& opt) {
  return std::move(vit_forward(w, std::vector<const float*>{image}, opt).front());
}

}  // namespace attnmap
