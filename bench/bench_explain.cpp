// bench_explain.cpp - the explanation maps' part of bench/run.sh (issue 19; not a test):
//   attnmap_bench_explain explain WEIGHTS ITERS   ms of the chefer / gradcam / attn-grad maps of one image vs
//                                                 the forward to the last layer's class-token map (batch 1);
//                                                 a model without a head gets a random 1000-class one
// Prints "key value" lines that bench/run.sh parses.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/batch.hpp"
#include "checkpoint/weights.hpp"
#include "maps/attention_maps.hpp"
#include "maps/explain.hpp"
#include "model/classify.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"

using namespace attnmap;
using Clock = std::chrono::steady_clock;

namespace {

// Best-of-`iters` seconds of f() after one warm-up call.
template <class F>
double best_seconds(int iters, F&& f) {
  f();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t).count());
  }
  return best;
}

// The explanation maps against the forward pass that draws the class-token map (issue 19: chefer <= 3x).
int bench_explain(ViTWeights w, int iters) {
  const HParams& hp = w.hp;
  std::mt19937 g(3);
  std::normal_distribution<float> n01(0, 1);
  if (!w.head.present()) {  // bench/make_vitb.py writes no head: a random one, std 0.02 (timm)
    w.head.out = 1000;
    w.head.in = hp.dim;
    w.head.weight.resize(static_cast<size_t>(1000) * hp.dim);
    for (auto& v : w.head.weight.owned()) v = 0.02f * n01(g);
    w.head.bias.assign(1000, 0.0f);
  }
  std::vector<float> img(static_cast<size_t>(3) * hp.image_h * hp.image_w);
  for (auto& v : img) v = n01(g);
  double checksum = 0;
  ForwardOptions fo;
  fo.last_layer = -1;
  const double fwd = best_seconds(iters, [&] { checksum += class_attention_map(vit_forward(w, img.data(), fo), hp, hp.depth - 1, HeadSelect{})[0]; });
  std::printf("explain_forward_ms %.2f\n", fwd * 1e3);
  for (const ViewKind m : {ViewKind::Chefer, ViewKind::GradCam, ViewKind::AttnGrad}) {
    ExplainRequest req;
    req.method = m;
    req.layer = hp.depth - 1;
    const double s = best_seconds(iters, [&] {
      const ForwardTape tape = vit_forward_tape(w, img.data());
      checksum += explain_map(w, tape, top_k_indices(tape.logits, 1)[0], req)[0];
    });
    const std::string name = m == ViewKind::Chefer ? "chefer" : m == ViewKind::GradCam ? "gradcam" : "attn_grad";
    std::printf("explain_%s_ms %.2f\nexplain_%s_over_forward %.2f\n", name.c_str(), s * 1e3, name.c_str(), s / fwd);
  }
  std::printf("explain_checksum %.6g\n", checksum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) != "explain") {
    std::fprintf(stderr, "usage: attnmap_bench_explain explain WEIGHTS ITERS\n");
    return 2;
  }
  const int cores = usable_cores();
  set_blas_threads(cores);
  std::printf("cores %d\n", cores);
  return bench_explain(load_model(argv[2]), std::atoi(argv[3]));
}
