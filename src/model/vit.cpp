#include "model/vit.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "model/preprocess.hpp"
#include "model/sgemm.hpp"

namespace attnmap {

int resolve_layer(int layer, int depth) {
  const int l = layer < 0 ? depth + layer : layer;
  if (l < 0 || l >= depth)
    throw Error("layer " + std::to_string(layer) + " out of range: the model has " + std::to_string(depth) +
                " blocks (0.." + std::to_string(depth - 1) + ", or -1..-" + std::to_string(depth) + ")");
  return l;
}

void layernorm_forward(float* out, const float* in, const float* weight, const float* bias, int M, int D, float eps) {
  for (int i = 0; i < M; ++i) {
    const float* x = in + static_cast<size_t>(i) * D;
    float* y = out + static_cast<size_t>(i) * D;
    double mean = 0;
    for (int j = 0; j < D; ++j) mean += x[j];
    mean /= D;
    double var = 0;
    for (int j = 0; j < D; ++j) {
      const double d = x[j] - mean;
      var += d * d;
    }
    var /= D;
    const double rstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int j = 0; j < D; ++j)
      y[j] = static_cast<float>((x[j] - mean) * rstd) * weight[j] + bias[j];
  }
}

void softmax_rows(float* x, int M, int n) {
  for (int i = 0; i < M; ++i) {
    float* row = x + static_cast<size_t>(i) * n;
    float mx = row[0];
    for (int j = 1; j < n; ++j) mx = std::max(mx, row[j]);
    double sum = 0;
    for (int j = 0; j < n; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int j = 0; j < n; ++j) row[j] *= inv;
  }
}

void attention_forward(float* out, float* probs, const float* qkv, int T, int H, int dk) {
  const int inner = H * dk;
  const int ld = 3 * inner;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int h = 0; h < H; ++h) {
    const float* q = qkv + h * dk;              // (T, dk), row stride 3*inner
    const float* k = qkv + inner + h * dk;      // (T, dk)
    const float* v = qkv + 2 * inner + h * dk;  // (T, dk)
    float* p = probs + static_cast<size_t>(h) * T * T;  // (T, T)
    sgemm(false, true, T, T, dk, scale, q, ld, k, ld, 0.0f, p, T);
    softmax_rows(p, T, T);
    sgemm(false, false, T, dk, T, 1.0f, p, T, v, ld, 0.0f, out + h * dk, inner);  // (T, dk) into (T, inner)
  }
}

void gelu_forward(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

// tokens (T, D) of one image: [class token; distillation token; register tokens; patch embeddings], with the
// position embeddings added to the first hp.pos_prefix prefix tokens and to the patches. Registers without a
// position row are the DINOv2 convention (facebookresearch: inserted after the class token once the position
// embedding is added; timm no_embed_class: the prefix tokens get none).
void embed_tokens(float* x, const ViTWeights& w, const float* image) {
  const HParams& hp = w.hp;
  const int D = hp.dim, N = hp.grid_w * hp.grid_h, P = hp.patch;
  const std::vector<float> patches = patchify(image, hp.image_h, hp.image_w, P);  // (N, 3*P*P)
  float* xp = x + static_cast<size_t>(hp.num_prefix) * D;                        // (N, D)
  if (w.patch_embed.present()) {
    linear(xp, patches.data(), w.patch_embed.weight.data(),
           w.patch_embed.bias.empty() ? nullptr : w.patch_embed.bias.data(), N, D, w.patch_embed.in);
  } else {
    std::copy(patches.begin(), patches.end(), xp);  // seed layout: D == 3*P*P
  }
  if (hp.cls_is_mean) {
    for (int j = 0; j < D; ++j) {
      double s = 0;
      for (int i = 0; i < N; ++i) s += xp[static_cast<size_t>(i) * D + j];
      x[j] = static_cast<float>(s / N);
    }
  } else {
    std::copy(w.cls_token.begin(), w.cls_token.end(), x);
  }
  std::copy(w.extra_tokens.begin(), w.extra_tokens.end(), x + D);  // (num_prefix - 1, D)
  if (!w.pos_embed.empty()) {
    const size_t np = static_cast<size_t>(hp.pos_prefix) * D;  // prefix rows (pos_prefix, D)
    for (size_t i = 0; i < np; ++i) x[i] += w.pos_embed[i];
    const size_t n = static_cast<size_t>(N) * D;  // patch rows (N, D)
    for (size_t i = 0; i < n; ++i) xp[i] += w.pos_embed[np + i];
  }
}

namespace {

// x (M, D) += gamma (D) * y (M, D), or x += y without LayerScale (empty gamma).
void add_scaled(float* x, const float* y, const std::vector<float>& gamma, size_t M, int D) {
  if (gamma.empty()) {
    for (size_t i = 0; i < M * static_cast<size_t>(D); ++i) x[i] += y[i];
    return;
  }
  for (size_t r = 0; r < M; ++r)
    for (int j = 0; j < D; ++j) x[r * static_cast<size_t>(D) + static_cast<size_t>(j)] += gamma[static_cast<size_t>(j)] * y[r * static_cast<size_t>(D) + static_cast<size_t>(j)];
}

}  // namespace

std::vector<ForwardResult> vit_forward(const ViTWeights& w, const std::vector<const float*>& images,
                                       const ForwardOptions& opt) {
  const HParams& hp = w.hp;
  const int B = static_cast<int>(images.size());
  const int T = hp.tokens(), D = hp.dim, H = hp.num_heads, dk = hp.head_dim, inner = hp.inner();
  const int last = opt.to_end ? hp.depth - 1 : resolve_layer(opt.last_layer, hp.depth);
  const int L = last + 1;
  const int BT = B * T;
  const size_t TT = static_cast<size_t>(T) * T;

  std::vector<ForwardResult> res(static_cast<size_t>(B));
  for (auto& r : res) {
    r.layers = L;
    r.heads = H;
    r.tokens = T;
    r.cls_attn.resize(static_cast<size_t>(L) * H * T);
    if (opt.keep_full) r.attn.resize(static_cast<size_t>(L) * H * TT);
  }
  std::vector<float> x(static_cast<size_t>(BT) * D);        // (B*T, D) residual stream
  std::vector<float> xn(x.size());                          // (B*T, D) normalised
  std::vector<float> qkv(static_cast<size_t>(BT) * 3 * inner);  // (B*T, 3*inner)
  std::vector<float> att(static_cast<size_t>(BT) * inner);  // (B*T, inner) attention output
  std::vector<float> probs(static_cast<size_t>(H) * TT);    // (H, T, T) of one image
  std::vector<float> hid(static_cast<size_t>(BT) * static_cast<size_t>(std::max(hp.mlp_dim, 1)));  // (B*T, M)

  for (int b = 0; b < B; ++b) embed_tokens(&x[static_cast<size_t>(b) * T * D], w, images[static_cast<size_t>(b)]);

  for (int l = 0; l < L; ++l) {
    const BlockWeights& blk = w.blocks[static_cast<size_t>(l)];
    const float* ln_in = x.data();
    if (blk.norm1.present()) {
      layernorm_forward(xn.data(), x.data(), blk.norm1.weight.data(), blk.norm1.bias.data(), BT, D, hp.eps);
      ln_in = xn.data();
    }
    linear(qkv.data(), ln_in, blk.qkv.weight.data(), blk.qkv.bias.empty() ? nullptr : blk.qkv.bias.data(), BT,
           3 * inner, D);
    if (l == L - 1 && !opt.keep_full && !opt.to_end && !opt.on_probs) {
      // The drawn layer: only the class token's row of each head's probabilities is needed, (1, T) per
      // head instead of (T, T), and no attention output.
      const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
      for (int b = 0; b < B; ++b) {
        ForwardResult& r = res[static_cast<size_t>(b)];
        const float* q = &qkv[static_cast<size_t>(b) * T * 3 * inner];  // (T, 3*inner), row 0 = class token
        for (int h = 0; h < H; ++h) {
          float* row = &r.cls_attn[(static_cast<size_t>(l) * H + h) * T];  // (T)
          sgemm(false, true, 1, T, dk, scale, q + h * dk, 3 * inner, q + inner + h * dk, 3 * inner, 0.0f, row, T);
          softmax_rows(row, 1, T);
        }
      }
      break;
    }
    for (int b = 0; b < B; ++b) {
      ForwardResult& r = res[static_cast<size_t>(b)];
      attention_forward(&att[static_cast<size_t>(b) * T * inner], probs.data(), &qkv[static_cast<size_t>(b) * T * 3 * inner],
                        T, H, dk);
      for (int h = 0; h < H; ++h)
        std::copy_n(&probs[static_cast<size_t>(h) * TT], T, &r.cls_attn[(static_cast<size_t>(l) * H + h) * T]);
      if (opt.keep_full) std::copy(probs.begin(), probs.end(), &r.attn[static_cast<size_t>(l) * H * TT]);
      if (opt.on_probs) opt.on_probs(b, l, probs.data());
    }
    if (!hp.residual_mlp) {  // seed layout: the output is weights.V
      if (opt.to_end)
        for (int b = 0; b < B; ++b)
          res[static_cast<size_t>(b)].tokens_out.assign(att.begin() + static_cast<long>(b) * T * inner,
                                                        att.begin() + static_cast<long>(b + 1) * T * inner);
      continue;
    }
    if (l == L - 1 && !opt.to_end) break;  // the maps need nothing past this block's attention
    // x = x + ls1 * proj(attn); x = x + ls2 * fc2(gelu(fc1(LN2(x)))) (LayerScale, Touvron et al. 2021)
    linear(xn.data(), att.data(), blk.proj.weight.data(), blk.proj.bias.empty() ? nullptr : blk.proj.bias.data(), BT, D,
           inner);
    add_scaled(x.data(), xn.data(), blk.ls1, static_cast<size_t>(BT), D);  // x += ls1 * proj(attn)
    layernorm_forward(xn.data(), x.data(), blk.norm2.weight.data(), blk.norm2.bias.data(), BT, D, hp.eps);
    const int M = blk.fc1.out;
    linear(hid.data(), xn.data(), blk.fc1.weight.data(), blk.fc1.bias.empty() ? nullptr : blk.fc1.bias.data(), BT, M, D);
    gelu_forward(hid.data(), static_cast<size_t>(BT) * M);
    linear(xn.data(), hid.data(), blk.fc2.weight.data(), blk.fc2.bias.empty() ? nullptr : blk.fc2.bias.data(), BT, D, M);
    add_scaled(x.data(), xn.data(), blk.ls2, static_cast<size_t>(BT), D);  // x += ls2 * mlp(LN2(x))
  }
  if (opt.to_end && hp.residual_mlp) {
    const float* fin = x.data();
    if (w.norm.present()) {
      layernorm_forward(xn.data(), x.data(), w.norm.weight.data(), w.norm.bias.data(), BT, D, hp.eps);
      fin = xn.data();
    }
    for (int b = 0; b < B; ++b) {
      ForwardResult& r = res[static_cast<size_t>(b)];
      r.tokens_out.assign(fin + static_cast<size_t>(b) * T * D, fin + static_cast<size_t>(b + 1) * T * D);
      if (w.head.present()) {
        r.logits.resize(static_cast<size_t>(w.head.out));
        linear(r.logits.data(), fin + static_cast<size_t>(b) * T * D, w.head.weight.data(),
               w.head.bias.empty() ? nullptr : w.head.bias.data(), 1, w.head.out, D);
        if (w.head_dist.present()) {  // DeiT distilled: (head(class) + head_dist(distillation)) / 2
          std::vector<float> ld(static_cast<size_t>(w.head_dist.out));  // (C)
          linear(ld.data(), fin + (static_cast<size_t>(b) * T + 1) * D, w.head_dist.weight.data(),
                 w.head_dist.bias.empty() ? nullptr : w.head_dist.bias.data(), 1, w.head_dist.out, D);
          for (size_t c = 0; c < ld.size(); ++c) r.logits[c] = 0.5f * (r.logits[c] + ld[c]);
        }
      }
    }
  }
  return res;
}

ForwardResult vit_forward(const ViTWeights& w, const float* image, const ForwardOptions& opt) {
  return std::move(vit_forward(w, std::vector<const float*>{image}, opt).front());
}

}  // namespace attnmap
