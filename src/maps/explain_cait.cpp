// explain_cait.cpp - the class-specific maps of a CaiT model (issue 44; docs/explain.md "CaiT"), from
// model/cait_backward.cpp's gradients. CaiT's self-attention blocks have no class-token row, so each map says
// which query it follows: the class token through the class-attention blocks (its only query), below them
// the patch queries.
#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "maps/explain.hpp"
#include "model/cait.hpp"

namespace attnmap {

namespace {

// Grad-CAM over the N patch rows of act (rows first..first+N-1 of a (., D) matrix) and grad (T, D) rows 1..N.
std::vector<float> cait_gradcam(const float* act, const std::vector<float>& grad, int N, int D) {
  std::vector<double> wc(static_cast<size_t>(D), 0.0);
  for (int i = 0; i < N; ++i)
    for (int c = 0; c < D; ++c) wc[static_cast<size_t>(c)] += grad[static_cast<size_t>(1 + i) * D + c];
  for (double& v : wc) v /= N;
  std::vector<float> map(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) {
    double s = 0;
    for (int c = 0; c < D; ++c) s += wc[static_cast<size_t>(c)] * act[static_cast<size_t>(i) * D + c];
    map[static_cast<size_t>(i)] = static_cast<float>(std::max(s, 0.0));
  }
  return map;
}

}  // namespace

std::vector<float> cait_explain_map(const ViTWeights& w, const ForwardTape& tape, int target_class,
                                    const ExplainRequest& req) {
  const HParams& hp = w.hp;
  const CaitTape& ct = *tape.cait;
  const int T = tape.tokens, H = tape.heads, N = T - 1, D = tape.dim, L = static_cast<int>(ct.blocks.size());
  BackwardOptions bo;
  if (req.method == ViewKind::GradCam) {  // block l's norm1 output over the patches (timm blocks[l].norm1 /
    if (req.layer < 0 || req.layer >= L)  // blocks_token_only[l - SA].norm1, its rows 1..N)
      throw Error("Grad-CAM block " + std::to_string(req.layer) + " out of range (0.." + std::to_string(L - 1) + ")");
    bo.lowest_layer = bo.ln1_layer = req.layer;
    const BackwardResult r = cait_backward(w, tape, target_class, bo);
    const std::vector<float>& act = ct.blocks[static_cast<size_t>(req.layer)].ln1_out;  // (N, D) or (T, D)
    return cait_gradcam(act.data() + (hp.is_class_attention(req.layer) ? D : 0), r.ln1_grad, N, D);
  }
  std::vector<float> r(static_cast<size_t>(T), 0.0f);
  if (req.method == ViewKind::AttnGrad) {  // the class row at a class-attention block, else the patch-query mean
    if (req.layer < 0 || req.layer >= L)
      throw Error("layer " + std::to_string(req.layer) + " out of range (0.." + std::to_string(L - 1) + ")");
    bo.lowest_layer = req.layer;
    bo.on_attn_grad = [&](int l, const float* a, const float* da) {
      if (l != req.layer) return;
      const std::vector<float> abar = chefer_block_matrix(a, da, H, T);  // (T, T)
      const bool ca = hp.is_class_attention(l);
      for (int i = ca ? 0 : 1; i < (ca ? 1 : T); ++i)
        for (int j = 0; j < T; ++j) r[static_cast<size_t>(j)] += abar[static_cast<size_t>(i) * T + j] / static_cast<float>(ca ? 1 : N);
    };
    cait_backward(w, tape, target_class, bo);
    return std::vector<float>(r.begin() + 1, r.end());
  }
  if (req.method != ViewKind::Chefer) throw Error("explain_map: the view kind is not class-specific");
  if (req.first_block < 0 || req.first_block >= L)
    throw Error("Chefer relevance from block " + std::to_string(req.first_block) + ": out of range (0.." +
                std::to_string(L - 1) + ")");
  // r = e_cls^T (I + Abar_L) ... (I + Abar_f): a class-attention block's Abar has only its class row (r <- r +
  // r_cls abar_cls), a self-attention block's only its patch rows and columns (r_p <- r_p + r_p Abar_SA).
  r[0] = 1.0f;
  bo.on_attn_grad = [&](int, const float* a, const float* da) { chefer_step(r, chefer_block_matrix(a, da, H, T), T); };
  bo.lowest_layer = req.first_block;
  cait_backward(w, tape, target_class, bo);
  return std::vector<float>(r.begin() + 1, r.end());
}

}  // namespace attnmap
