#include "model/cait.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "model/kernels.hpp"
#include "model/sgemm.hpp"
#include "model/thread_pool.hpp"
#include "model/vit_internal.hpp"

namespace attnmap {

void talking_heads_forward(float* out, float* probs, const float* qkv, const LinearW& proj_l, const LinearW& proj_w,
                           int N, int H, int dk, float* weights) {
  const int inner = H * dk;
  const size_t NN = static_cast<size_t>(N) * N, Nd = static_cast<size_t>(N) * dk, ld = static_cast<size_t>(3 * inner);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  std::vector<float> s(static_cast<size_t>(H) * NN), v(static_cast<size_t>(H) * Nd);  // (H, N, N) scores, (H, N, dk) V
  parallel_for(H, [&](int h) {  // S_h = Q_h K_h^T / sqrt(dk) (N, N); V_h (N, dk) dense
    std::vector<float> q(Nd), k(Nd);
    for (size_t t = 0; t < static_cast<size_t>(N); ++t) {
      std::copy_n(qkv + t * ld + static_cast<size_t>(h) * dk, dk, &q[t * dk]);
      std::copy_n(qkv + t * ld + inner + static_cast<size_t>(h) * dk, dk, &k[t * dk]);
      std::copy_n(qkv + t * ld + 2 * inner + static_cast<size_t>(h) * dk, dk, &v[h * Nd + t * dk]);
    }
    matmul_dense(&s[h * NN], q.data(), k.data(), N, N, dk, /*trans_b=*/true, scale);
  });
  // Mixes (H, N, N) maps across heads: dst_g = sum_h W[g, h] src_h + b[g] (nn.Linear(H, H) on the head axis).
  const auto mix = [&](float* dst, const float* src, const LinearW& lin) {
    parallel_for(H, [&](int g) {
      float* d = dst + static_cast<size_t>(g) * NN;
      std::fill_n(d, NN, lin.bias.empty() ? 0.0f : lin.bias[static_cast<size_t>(g)]);
      for (int h = 0; h < H; ++h) {
        const float wgh = lin.weight[static_cast<size_t>(g) * H + h];
        const float* sh = src + static_cast<size_t>(h) * NN;
        for (size_t i = 0; i < NN; ++i) d[i] += wgh * sh[i];
      }
    });
  };
  mix(probs, s.data(), proj_l);                // logits (H, N, N) = proj_l(S)
  softmax_rows(probs, H * N, N);               // P (H, N, N): the recorded probabilities
  mix(s.data(), probs, proj_w);                // weights (H, N, N) = proj_w(P)
  if (weights) std::copy(s.begin(), s.end(), weights);
  parallel_for(H, [&](int g) {                 // out_g (N, dk) = weights_g V_g
    std::vector<float> o(Nd);
    matmul_dense(o.data(), &s[g * NN], &v[g * Nd], N, dk, N, /*trans_b=*/false, 1.0f);
    for (size_t t = 0; t < static_cast<size_t>(N); ++t)
      std::copy_n(&o[t * dk], dk, out + t * inner + static_cast<size_t>(g) * dk);
  });
}

void class_attention_forward(float* out, float* probs, const float* qkv, int T, int H, int dk) {
  const int inner = H * dk;
  const size_t ld = static_cast<size_t>(3 * inner);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int h = 0; h < H; ++h) {
    const float* q = qkv + static_cast<size_t>(h) * dk;  // row 0: the class token's query (dk)
    float* a = probs + static_cast<size_t>(h) * T;        // (T)
    for (int t = 0; t < T; ++t) {
      const float* k = qkv + static_cast<size_t>(t) * ld + inner + static_cast<size_t>(h) * dk;
      float dot = 0.0f;
      for (int c = 0; c < dk; ++c) dot += (q[c] * scale) * k[c];  // timm: q * scale, then q @ k^T
      a[t] = dot;
    }
    softmax_rows(a, 1, T);
    for (int c = 0; c < dk; ++c) {
      double acc = 0;
      for (int t = 0; t < T; ++t)
        acc += static_cast<double>(a[t]) * qkv[static_cast<size_t>(t) * ld + 2 * inner + static_cast<size_t>(h) * dk + c];
      out[h * dk + c] = static_cast<float>(acc);
    }
  }
}

std::string block_name(const HParams& hp, int l, int base) {
  return std::string(hp.is_class_attention(l) ? "class-attention block " : "block ") + std::to_string(l + base);
}

std::string cait_rollout_unavailable(const HParams& hp) {
  if (hp.class_attn_blocks == 0) return "";
  return "CaiT has no class token in its self-attention blocks and its class-attention blocks compute only the "
         "class token's row (cait layout)";
}

std::string cait_line_unavailable(const HParams& hp, bool rollout, int layer, CaitLine line) {
  if (hp.class_attn_blocks == 0) return "";
  const bool ca = hp.is_class_attention(layer), cls_row = line == CaitLine::ClassRow || line == CaitLine::Default;
  const std::string ca_blocks = "blocks " + std::to_string(hp.depth - hp.class_attn_blocks) + "-" + std::to_string(hp.depth - 1);
  if (rollout) {
    if (ca || !cls_row) return "";
    return "a CaiT rollout ending at self-attention block " + std::to_string(layer) + " has no class-token row (the "
           "class token attends only in the class-attention blocks, " + ca_blocks + "): give a patch query "
           "(:q=r<row>c<col>) or end the rollout at a class-attention block (cait layout)";
  }
  if (line == CaitLine::Received)
    return "CaiT has no block in which every token is a query (the class token is not in the self-attention blocks, "
           "the patches are no queries in the class-attention blocks), so there are no column means (cait layout)";
  if (ca && (line == CaitLine::PatchRow || line == CaitLine::KeyColumn))
    return "in CaiT's class-attention block " + std::to_string(layer) + " only the class token queries (the patches are "
           "no queries there): only its row (the default, or :q=cls) exists (cait layout)";
  if (!ca && line == CaitLine::ClassRow)
    return "CaiT's class token is not in self-attention block " + std::to_string(layer) + " (it attends only in the "
           "class-attention blocks, " + ca_blocks + "); the default row there is the patch queries' mean (cait layout)";
  return "";
}

namespace {

// x (M, D) += gamma (D) * y (M, D).
void add_scaled(float* x, const float* y, const Floats& gamma, size_t M, int D) {
  kernels::residual_add(x, y, gamma.empty() ? nullptr : gamma.data(), M, D);
}

// x (M, D) += gamma_2 * fc2(act(fc1(LN2(x)))), the block's MLP branch (M rows; its own hidden width).
void mlp_branch(float* x, const BlockWeights& blk, const HParams& hp, int M) {
  const int D = hp.dim, hid = blk.fc1.out;
  std::vector<float> xn(static_cast<size_t>(M) * D), h(static_cast<size_t>(M) * hid), y(xn.size());
  layernorm_forward(xn.data(), x, blk.norm2.weight.data(), blk.norm2.bias.data(), M, D, hp.eps);
  linear(h.data(), xn.data(), blk.fc1, M);  // (M, hid)
  activation_forward(h.data(), h.size(), hp.act);
  linear(y.data(), h.data(), blk.fc2, M);   // (M, D)
  add_scaled(x, y.data(), blk.ls2, static_cast<size_t>(M), D);
}

// The token count with token dropping: 1 + kept patches (checked increasing and in the grid), else 1 + N.
int cait_tokens(const HParams& hp, const ForwardOptions& opt, int B) {
  const int N = hp.grid_w * hp.grid_h;
  const auto check = [&](const std::vector<int>& keep) {
    for (size_t i = 0; i < keep.size(); ++i)
      if (keep[i] < 0 || keep[i] >= N || (i > 0 && keep[i] <= keep[i - 1]))
        throw Error("keep_patches: patch indices must be strictly increasing in 0.." + std::to_string(N - 1) +
                    ", found " + std::to_string(keep[i]) + " at position " + std::to_string(i));
    return 1 + static_cast<int>(keep.size());
  };
  if (opt.keep_patches_each.empty()) return opt.keep_patches ? check(*opt.keep_patches) : 1 + N;
  if (opt.keep_patches_each.size() != static_cast<size_t>(B))
    throw Error("keep_patches_each: " + std::to_string(opt.keep_patches_each.size()) + " lists for " +
                std::to_string(B) + " images");
  const int T = check(opt.keep_patches_each.front());
  for (const std::vector<int>& k : opt.keep_patches_each)
    if (check(k) != T) throw Error("keep_patches_each: every image must keep the same number of patches");
  return T;
}

}  // namespace

// Records one block's probabilities of image b: into cls_attn[l] (H, T) the drawn row, and as a (T, T)
// matrix per head (tt, H * T * T) into attn[l] with keep_full and to on_probs. sa: probs (H, N, N) of a
// self-attention block (class row / column zero, drawn row the patch-query mean); else probs (H, T) the
// class token's rows of a class-attention block.
void cait_record(ForwardResult& r, const float* probs, bool sa, int l, int H, int T, const ForwardOptions& opt, int b,
                 std::vector<float>& tt) {
  const int N = T - 1;
  const size_t TT = static_cast<size_t>(T) * T;
  for (int h = 0; h < H; ++h) {
    float* row = &r.cls_attn[(static_cast<size_t>(l) * H + h) * T];  // (T)
    if (sa) {
      row[0] = 0.0f;
      query_row(row + 1, probs + static_cast<size_t>(h) * N * N, N, /*class_token=*/false, 0);
    } else {
      std::copy_n(probs + static_cast<size_t>(h) * T, T, row);
    }
  }
  if (!opt.keep_full && !opt.on_probs) return;
  tt.assign(static_cast<size_t>(H) * TT, 0.0f);
  for (int h = 0; h < H; ++h) {
    float* m = &tt[h * TT];  // (T, T)
    if (sa) {
      for (int i = 0; i < N; ++i)
        std::copy_n(probs + (static_cast<size_t>(h) * N + i) * N, N, m + static_cast<size_t>(1 + i) * T + 1);
    } else {
      std::copy_n(probs + static_cast<size_t>(h) * T, T, m);
    }
  }
  if (opt.keep_full) std::copy(tt.begin(), tt.end(), &r.attn[static_cast<size_t>(l) * H * TT]);
  if (opt.on_probs) opt.on_probs(b, l, tt.data());
}

namespace {

// Each image's tokens: embedded in full (embed_tokens: [cls_token; patches + pos_embed]), the class token
// into cls (B, D), the kept patches (all without token dropping) into x (B*N, D).
void embed_cait(float* cls, float* x, const ViTWeights& w, const std::vector<const float*>& images,
                const ForwardOptions& opt, int N) {
  const int D = w.hp.dim;
  std::vector<float> full(static_cast<size_t>(w.hp.tokens()) * D);  // (1 + N_all, D)
  for (size_t b = 0; b < images.size(); ++b) {
    embed_tokens(full.data(), w, images[b]);
    std::copy_n(full.data(), D, cls + b * D);
    const std::vector<int>* keep = !opt.keep_patches_each.empty() ? &opt.keep_patches_each[b]
                                   : opt.keep_patches            ? &*opt.keep_patches
                                                                 : nullptr;
    for (int i = 0; i < N; ++i)
      std::copy_n(&full[static_cast<size_t>(1 + (keep ? (*keep)[static_cast<size_t>(i)] : i)) * D], D,
                  x + (b * N + static_cast<size_t>(i)) * D);
  }
}

// After the last block, one image: tokens_out (T, D) = norm([cls (D); x (N, D)]); with a head, the logits on
// the class token (global_pool 'token') or on the mean of the patch tokens ('avg').
void cait_final(ForwardResult& r, const ViTWeights& w, const float* cls, const float* x, int N) {
  const HParams& hp = w.hp;
  const int D = hp.dim, T = N + 1;
  std::vector<float> t(static_cast<size_t>(T) * D);
  std::copy_n(cls, D, t.data());
  std::copy_n(x, static_cast<size_t>(N) * D, t.data() + D);
  r.tokens_out.resize(t.size());
  layernorm_forward(r.tokens_out.data(), t.data(), w.norm.weight.data(), w.norm.bias.data(), T, D, hp.eps);
  if (!w.head.present()) return;
  std::vector<float> pooled(r.tokens_out.begin(), r.tokens_out.begin() + D);
  if (hp.pool == Pool::MeanPatches) {
    for (int j = 0; j < D; ++j) {
      double s = 0;
      for (int i = 1; i < T; ++i) s += r.tokens_out[static_cast<size_t>(i) * D + j];
      pooled[static_cast<size_t>(j)] = static_cast<float>(s / std::max(N, 1));
    }
  }
  r.logits.resize(static_cast<size_t>(w.head.out));
  linear(r.logits.data(), pooled.data(), w.head, 1);
}

}  // namespace

std::vector<ForwardResult> cait_forward(const ViTWeights& w, const std::vector<const float*>& images,
                                        const ForwardOptions& opt) {
  const HParams& hp = w.hp;
  const int B = static_cast<int>(images.size());
  const int T = cait_tokens(hp, opt, B), N = T - 1;
  const int D = hp.dim, H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const int last = opt.to_end ? hp.depth - 1 : resolve_layer(opt.last_layer, hp.depth);
  const int L = last + 1, SA = hp.depth - hp.class_attn_blocks;

  std::vector<ForwardResult> res = make_forward_results(B, L, H, T, opt.keep_full);
  // cls (B, D): the class token (it enters no self-attention block); x (B*N, D): the patches.
  std::vector<float> cls(static_cast<size_t>(B) * D), x(static_cast<size_t>(B) * N * D);
  embed_cait(cls.data(), x.data(), w, images, opt, N);
  const auto tokens_cb = [&](int l) {  // on_tokens: x (T, D) = [cls; patches] of each image
    if (!opt.on_tokens) return;
    std::vector<float> u(static_cast<size_t>(T) * D);
    for (int b = 0; b < B; ++b) {
      std::copy_n(&cls[static_cast<size_t>(b) * D], D, u.data());
      std::copy_n(&x[static_cast<size_t>(b) * N * D], static_cast<size_t>(N) * D, u.data() + D);
      opt.on_tokens(b, l, u.data());
    }
  };
  const bool stop_at_attention = !opt.to_end && !opt.on_tokens;  // the maps need nothing past the last attention
  std::vector<float> tt;

  // Self-attention blocks (LayerScaleBlock + TalkingHeadAttn) on the patches, BN = B*N rows.
  const int BN = B * N;
  std::vector<float> xn(static_cast<size_t>(BN) * D), qkv(static_cast<size_t>(BN) * 3 * inner),
      att(static_cast<size_t>(BN) * inner), y(static_cast<size_t>(BN) * D), probs(static_cast<size_t>(H) * N * N);
  for (int l = 0; l < std::min(L, SA); ++l) {
    const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
    layernorm_forward(xn.data(), x.data(), blk.norm1.weight.data(), blk.norm1.bias.data(), BN, D, hp.eps);
    linear(qkv.data(), xn.data(), blk.qkv, BN);  // (B*N, 3*inner)
    for (int b = 0; b < B; ++b) {
      talking_heads_forward(&att[static_cast<size_t>(b) * N * inner], probs.data(), &qkv[static_cast<size_t>(b) * N * 3 * inner],
                            blk.proj_l, blk.proj_w, N, H, dk);
      cait_record(res[static_cast<size_t>(b)], probs.data(), true, l, H, T, opt, b, tt);
    }
    if (l == L - 1 && stop_at_attention) return res;
    linear(y.data(), att.data(), blk.proj, BN);                     // (B*N, D)
    add_scaled(x.data(), y.data(), blk.ls1, static_cast<size_t>(BN), D);  // x += gamma_1 * proj(attn)
    mlp_branch(x.data(), blk, hp, BN);                              // x += gamma_2 * mlp(LN2(x))
    tokens_cb(l);
  }

  // Class-attention blocks (LayerScaleBlockClassAttn + ClassAttn): u = [cls; x] (T, D) per image.
  const int BT = B * T;
  std::vector<float> u(static_cast<size_t>(BT) * D), un(u.size()), uqkv(static_cast<size_t>(BT) * 3 * inner),
      o(static_cast<size_t>(B) * inner), yc(static_cast<size_t>(B) * D), cprobs(static_cast<size_t>(H) * T);
  for (int l = SA; l < L; ++l) {
    const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
    for (int b = 0; b < B; ++b) {
      std::copy_n(&cls[static_cast<size_t>(b) * D], D, &u[static_cast<size_t>(b) * T * D]);
      std::copy_n(&x[static_cast<size_t>(b) * N * D], static_cast<size_t>(N) * D, &u[(static_cast<size_t>(b) * T + 1) * D]);
    }
    layernorm_forward(un.data(), u.data(), blk.norm1.weight.data(), blk.norm1.bias.data(), BT, D, hp.eps);
    linear(uqkv.data(), un.data(), blk.qkv, BT);  // (B*T, 3*inner): [q | k | v] (only row 0's q is read)
    for (int b = 0; b < B; ++b) {
      class_attention_forward(&o[static_cast<size_t>(b) * inner], cprobs.data(), &uqkv[static_cast<size_t>(b) * T * 3 * inner], T, H, dk);
      cait_record(res[static_cast<size_t>(b)], cprobs.data(), false, l, H, T, opt, b, tt);
    }
    if (l == L - 1 && stop_at_attention) return res;
    linear(yc.data(), o.data(), blk.proj, B);                     // (B, D)
    add_scaled(cls.data(), yc.data(), blk.ls1, static_cast<size_t>(B), D);  // cls += gamma_1 * proj(attn)
    mlp_branch(cls.data(), blk, hp, B);                           // cls += gamma_2 * mlp(LN2(cls))
    tokens_cb(l);
  }
  if (opt.to_end)
    for (int b = 0; b < B; ++b)
      cait_final(res[static_cast<size_t>(b)], w, &cls[static_cast<size_t>(b) * D], &x[static_cast<size_t>(b) * N * D], N);
  return res;
}

}  // namespace attnmap
