#include "maps/explain.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace attnmap {

std::vector<float> chefer_block_matrix(const float* probs, const float* dprobs, int H, int Q, int T) {
  const size_t TT = static_cast<size_t>(Q) * static_cast<size_t>(T);
  std::vector<float> a(TT, 0.0f);
  for (int h = 0; h < H; ++h)
    for (size_t i = 0; i < TT; ++i) a[i] += std::max(probs[h * TT + i] * dprobs[h * TT + i], 0.0f);
  for (float& v : a) v /= static_cast<float>(H);
  return a;
}

std::vector<float> chefer_block_matrix(const float* probs, const float* dprobs, int H, int T) {
  return chefer_block_matrix(probs, dprobs, H, T, T);
}

void chefer_step(std::vector<float>& r, const std::vector<float>& abar, int T) {
  std::vector<float> next(static_cast<size_t>(T));
  for (int j = 0; j < T; ++j) {
    double s = r[static_cast<size_t>(j)];
    for (int i = 0; i < T; ++i) s += static_cast<double>(r[static_cast<size_t>(i)]) * abar[static_cast<size_t>(i) * T + j];
    next[static_cast<size_t>(j)] = static_cast<float>(s);
  }
  r.swap(next);
}

namespace {

std::vector<float> patch_part(const std::vector<float>& row, const HParams& hp) {
  return std::vector<float>(row.begin() + hp.num_prefix, row.begin() + hp.num_prefix + hp.grid_w * hp.grid_h);
}

// Grad-CAM on the patch tokens of an activation act (T, D) with its gradient grad (T, D).
std::vector<float> gradcam_map(const std::vector<float>& act, const std::vector<float>& grad, const HParams& hp) {
  const int D = hp.dim, N = hp.grid_w * hp.grid_h, p0 = hp.num_prefix;
  std::vector<double> wc(static_cast<size_t>(D), 0.0);
  for (int i = 0; i < N; ++i)
    for (int c = 0; c < D; ++c) wc[static_cast<size_t>(c)] += grad[static_cast<size_t>(p0 + i) * D + c];
  for (double& v : wc) v /= N;
  std::vector<float> map(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) {
    double s = 0;
    for (int c = 0; c < D; ++c) s += wc[static_cast<size_t>(c)] * act[static_cast<size_t>(p0 + i) * D + c];
    map[static_cast<size_t>(i)] = static_cast<float>(std::max(s, 0.0));
  }
  return map;
}

// The query rows the class-specific maps follow (vit_backward.hpp ExplainQuery; docs/explain.md): weights (T)
// over the rows of a block's attention, summing to 1. The class token: e_0; PatchMean (timm 'avg'): 1/N on the
// patch rows; TokenMean (vit-pytorch 'mean'): 1/T on every row; Probe (MAP head): the probe is no row of the
// blocks, so at the blocks the patch-query mean (1/N on the patch rows).
std::vector<float> query_weights(ExplainQuery q, const HParams& hp, int T) {
  std::vector<float> wq(static_cast<size_t>(T), 0.0f);
  if (q == ExplainQuery::TokenMean) {
    std::fill(wq.begin(), wq.end(), 1.0f / static_cast<float>(T));
  } else if (q == ExplainQuery::PatchMean || q == ExplainQuery::Probe) {
    for (int i = hp.num_prefix; i < T; ++i) wq[static_cast<size_t>(i)] = 1.0f / static_cast<float>(T - hp.num_prefix);
  } else {
    wq[0] = 1.0f;
  }
  return wq;
}

}  // namespace

std::vector<float> explain_map(const ViTWeights& w, const ForwardTape& tape, int target_class,
                               const ExplainRequest& req) {
  if (tape.cait) return cait_explain_map(w, tape, target_class, req);  // CaiT (maps/explain_cait.cpp)
  const HParams& hp = w.hp;
  const int T = tape.tokens, H = tape.heads, L = static_cast<int>(tape.blocks.size());
  BackwardOptions bo;
  if (req.method == ViewKind::GradCam) {
    if (req.layer < 0 || req.layer >= L)
      throw Error("Grad-CAM block " + std::to_string(req.layer) + " out of range (0.." + std::to_string(L - 1) + ")");
    bo.lowest_layer = req.layer;
    bo.ln1_layer = req.layer;
    const BackwardResult r = vit_backward(w, tape, target_class, bo);
    return gradcam_map(tape.blocks[static_cast<size_t>(req.layer)].ln1_out, r.ln1_grad, hp);
  }
  if (req.method == ViewKind::AttnGrad) {
    if (req.layer < 0 || req.layer >= L)
      throw Error("layer " + std::to_string(req.layer) + " out of range (0.." + std::to_string(L - 1) + ")");
    std::vector<float> row(static_cast<size_t>(T), 0.0f);
    const std::vector<float> wq = query_weights(explain_query(hp), hp, T);  // (T) the query rows' weights
    bo.lowest_layer = req.layer;
    bo.on_attn_grad = [&](int l, const float* probs, const float* dprobs) {
      if (l != req.layer) return;
      const size_t TT = static_cast<size_t>(T) * static_cast<size_t>(T);
      for (int h = 0; h < H; ++h)  // the query rows of each head only (the class token: row 0)
        for (int i = 0; i < T; ++i) {
          if (wq[static_cast<size_t>(i)] == 0.0f) continue;
          const size_t o = h * TT + static_cast<size_t>(i) * T;
          for (int j = 0; j < T; ++j)
            row[static_cast<size_t>(j)] += wq[static_cast<size_t>(i)] * std::max(probs[o + j] * dprobs[o + j], 0.0f);
        }
      for (float& v : row) v /= static_cast<float>(H);
    };
    vit_backward(w, tape, target_class, bo);
    return patch_part(row, hp);
  }
  if (req.method != ViewKind::Chefer) throw Error("explain_map: the view kind is not class-specific");
  if (req.first_block < 0 || req.first_block >= L)
    throw Error("Chefer relevance from block " + std::to_string(req.first_block) + ": out of range (0.." +
                std::to_string(L - 1) + ")");
  // Chefer rules 5-6. R_L = (I + Abar_L) ... (I + Abar_f) (f = first_block, 1-based here); its row 0 is
  // r = r0^T (I + Abar_L) ... (I + Abar_f), accumulated as the backward reaches blocks L, L-1, ..., f:
  // r <- r + r Abar_b. The backward stops at f (Chefer's CLIP notebook skips the blocks before start_layer).
  // r0 is the query's row: e_0 for the class token, the patch (or every) row's mean for a mean-pooling head
  // (whose identity share r0, the same 1/N for every patch, is taken off at the end: the row of R - I, as the
  // class token's own entry R[0][0] is left out of its row);
  // for a MAP head the probe's own rule-5 row mean_h (dA_p * A_p)^+ (T) (the probe is a query outside the
  // blocks, with no identity term of its own), set by on_probe_grad before the last block's callback.
  const ExplainQuery query = explain_query(hp);
  std::vector<float> r = query_weights(query, hp, T);
  if (query == ExplainQuery::Probe) bo.on_probe_grad = [&](const float* pa, const float* dpa) { r = chefer_block_matrix(pa, dpa, H, 1, T); };
  bo.on_attn_grad = [&](int, const float* probs, const float* dprobs) {
    chefer_step(r, chefer_block_matrix(probs, dprobs, H, T, T), T);
  };
  bo.lowest_layer = req.first_block;
  vit_backward(w, tape, target_class, bo);
  if (query == ExplainQuery::PatchMean || query == ExplainQuery::TokenMean) {  // the row of R - I (docs/explain.md)
    const std::vector<float> r0 = query_weights(query, hp, T);  // the identity's share: 1/N on every patch
    for (int j = 0; j < T; ++j) r[static_cast<size_t>(j)] -= r0[static_cast<size_t>(j)];
  }
  return patch_part(r, hp);
}

}  // namespace attnmap
