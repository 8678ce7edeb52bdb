// bench_explain.cpp - the explanation maps timings of bench/run.sh (issue 19); bench.cpp - the C++ side of bench/run.sh (not a test): the sgemm peak through the project's wrapper,
// the forward pass + class-token map of a model at batch B, and weight loading speed.
//
//   attnmap_bench sgemm [SIZE]                     GFLOP/s of sgemm(SIZE^3) and of ViT-B/16 layer shapes
//   attnmap_bench forward WEIGHTS ITERS B...       ms per image and GFLOP/s at each batch size B (one load)
//   attnmap_bench load WEIGHTS                     seconds and MB/s of load_model
//   attnmap_bench explain WEIGHTS ITERS            ms of the chefer / gradcam / attn-grad maps of one image vs
//                                                  the forward to the last layer's class-token map (batch 1);
//                                                  a model without a head gets a random 1000-class one
// Prints "key value" lines that bench/run.sh parses.  OpenBLAS uses every usable core.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "maps/attention_maps.hpp"
#include "maps/explain.hpp"
#include "app/batch.hpp"
#include "model/classify.hpp"
#include "model/sgemm.hpp"
#include "model/vit_backward.hpp"
#include "model/vit.hpp"
#include "checkpoint/weights.hpp"

using namespace attnmap;
using Clock = std::chrono::steady_clock;

namespace {

// CPU seconds (user + system) this process has used: on a shared machine the wall clock also counts the
// time other jobs held the cores.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double secs_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Best-of-`reps` GFLOP/s of C(M,N) = A(M,K) B(N,K)^T (the layout of linear()).
double sgemm_gflops(int M, int N, int K, int reps) {
  std::vector<float> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(N) * K), C(static_cast<size_t>(M) * N);
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& v : A) v = u(g);
  for (auto& v : B) v = u(g);
  double best = 1e30;
  sgemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N);  // warm-up
  for (int r = 0; r < reps; ++r) {
    const auto t = Clock::now();
    sgemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N);
    best = std::min(best, secs_since(t));
  }
  return 2.0 * M * N * K / best / 1e9;
}

// Multiply-adds x2 of the forward pass up to and including `last` (0-based) as vit_forward does it.
double forward_flops(const HParams& hp, const ViTWeights& w, int last) {
  const double T = hp.tokens(), D = hp.dim, inner = hp.inner(), N = hp.grid_w * hp.grid_h;
  double f = w.patch_embed.present() ? 2.0 * N * D * w.patch_embed.in : 0.0;
  for (int l = 0; l <= last; ++l) {
    const double M = w.blocks[static_cast<size_t>(l)].fc1.out;
    f += 2.0 * T * D * 3 * inner;  // qkv
    if (l < last) {
      f += 2.0 * T * T * inner * 2;  // scores + probs.V
      f += 2.0 * T * inner * D + 2.0 * 2 * T * D * M;  // proj, fc1, fc2
    } else {
      f += 2.0 * T * inner;  // class row only
    }
  }
  return f;
}

// Best-of-`iters` seconds of f() after one warm-up call.
template <class F>
double best_seconds(int iters, F&& f) {
  f();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t = Clock::now();
    f();
    best = std::min(best, secs_since(t));
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
    for (auto& v : w.head.weight) v = 0.02f * n01(g);
    w.head.bias.assign(1000, 0.0f);
  }
  std::vector<float> img(static_cast<size_t>(3) * hp.image_h * hp.image_w);
  for (auto& v : img) v = n01(g);
  double checksum = 0;
  ForwardOptions fo;
  fo.last_layer = -1;
  const double fwd = best_seconds(iters, [&] { checksum += class_attention_map(vit_forward(w, img.data(), fo), hp, hp.depth - 1, HeadSelect{})[0]; });
  std::printf("explain_forward_ms %.2f\n", fwd * 1e3);
  for (const ExplainMethod m : {ExplainMethod::Chefer, ExplainMethod::GradCam, ExplainMethod::AttnGrad}) {
    ExplainRequest req;
    req.method = m;
    req.layer = req.gradcam_layer = hp.depth - 1;
    const double s = best_seconds(iters, [&] {
      const ForwardTape tape = vit_forward_tape(w, img.data());
      checksum += explain_map(w, tape, top_k_indices(tape.logits, 1)[0], req)[0];
    });
    const std::string name = m == ExplainMethod::Chefer ? "chefer" : m == ExplainMethod::GradCam ? "gradcam" : "attn_grad";
    std::printf("explain_%s_ms %.2f\nexplain_%s_over_forward %.2f\n", name.c_str(), s * 1e3, name.c_str(), s / fwd);
  }
  std::printf("explain_checksum %.6g\n", checksum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: attnmap_bench sgemm [SIZE] | forward WEIGHTS ITERS B... | load WEIGHTS | explain WEIGHTS ITERS\n");
    return 2;
  }
  const std::string cmd = argv[1];
  const int cores = usable_cores();
  set_blas_threads(cores);
  std::printf("cores %d\n", cores);
  if (cmd == "sgemm") {
    const int s = argc > 2 ? std::atoi(argv[2]) : 2048;
    std::printf("sgemm_square_gflops %.2f\n", sgemm_gflops(s, s, s, 5));
    // ViT-B/16 linear layers at batch 8 (M = 8*197 tokens): qkv, fc1, fc2.
    double best = 0;
    for (auto mnk : {std::array<int, 3>{1576, 2304, 768}, {1576, 3072, 768}, {1576, 768, 3072}})
      best = std::max(best, sgemm_gflops(mnk[0], mnk[1], mnk[2], 5));
    std::printf("sgemm_vitb_shapes_gflops %.2f\n", best);
    return 0;
  }
  if (cmd == "explain" && argc >= 4) return bench_explain(load_model(argv[2]), std::atoi(argv[3]));
  if ((cmd == "forward" && argc >= 5) || (cmd == "load" && argc >= 3)) {
    const double cpu0 = cpu_seconds();
    const std::string path = argv[2];
    const auto t = Clock::now();
    const ViTWeights w = load_model(path);
    const double load_s = secs_since(t);
    const double mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
    const double load_cpu = cpu_seconds() - cpu0;
    std::printf("load_seconds %.3f\nload_cpu_seconds %.3f\nload_mb %.1f\nload_mb_per_s %.1f\nload_mb_per_cpu_s %.1f\n", load_s,
                load_cpu, mb, mb / load_s, mb / load_cpu);
    if (cmd == "load") return 0;
    const int iters = std::atoi(argv[3]);
    const HParams& hp = w.hp;
    for (int a = 4; a < argc; ++a) {
      const int B = std::atoi(argv[a]);
      std::vector<std::vector<float>> imgs(static_cast<size_t>(B),
                                           std::vector<float>(static_cast<size_t>(3) * hp.image_h * hp.image_w));
      std::mt19937 g(2);
      std::normal_distribution<float> n01(0, 1);
      for (auto& im : imgs)
        for (auto& v : im) v = n01(g);
      std::vector<const float*> ptrs;
      for (auto& im : imgs) ptrs.push_back(im.data());
      ForwardOptions fo;
      fo.last_layer = -1;
      const int last = hp.depth - 1;
      HeadSelect sel;  // mean over heads
      double checksum = 0;
      auto step = [&]() {
        const std::vector<ForwardResult> rs = vit_forward(w, ptrs, fo);
        for (const auto& r : rs) checksum += class_attention_map(r, hp, last, sel)[0];
      };
      step();  // warm-up
      // Best of `iters` (as the sgemm peak is), and the mean: other jobs share the cores.
      double total = 0, best = 1e30;
      for (int i = 0; i < iters; ++i) {
        const auto t1 = Clock::now();
        step();
        const double s = secs_since(t1);
        total += s;
        best = std::min(best, s);
      }
      std::printf("forward_ms_per_image_b%d %.2f\n", B, best / B * 1e3);
      std::printf("forward_mean_ms_per_image_b%d %.2f\n", B, total / iters / B * 1e3);
      std::printf("forward_gflops_b%d %.2f\n", B, forward_flops(hp, w, last) * B / best / 1e9);
      std::printf("checksum_b%d %.6g\n", B, checksum);
    }
    return 0;
  }
  std::fprintf(stderr, "attnmap_bench: bad arguments\n");
  return 2;
}
