// bench.cpp - the C++ side of bench/run.sh (not a test): the sgemm peak through the project's wrapper,
// the forward pass + class-token map of a model at batch B, and weight loading speed.
//
//   attnmap_bench sgemm [SIZE]                     GFLOP/s of sgemm(SIZE^3) and of ViT-B/16 layer shapes
//   attnmap_bench forward WEIGHTS ITERS B...       ms per image and GFLOP/s at each batch size B (one load)
//   attnmap_bench load WEIGHTS                     seconds and MB/s of load_model
//   attnmap_bench stages WEIGHTS PHOTO ITERS        ms per stage at batch 1: GEMM, attention, element-wise
//                                                  (the forward's own calls replayed stage by stage), decode,
//                                                  resize, overlay, PNG of PHOTO (best of ITERS)
//   attnmap_bench check WEIGHTS B OUT.bin          the maps (B, N) float32 of bench/onnx/ort_vit.js's input
//   attnmap_bench linear [REPS]                    GFLOP/s of the own kernels and of oneDNN's on ViT-S/B/B448's
//                                                  linear() products, batch 1 and 8, interleaved
//   attnmap_bench precision [M] [REPS]             GFLOP/s of ViT-B/16's block products at M rows (197) in
//                                                  float32 and bfloat16, and their ratio (weights in cache)
// Prints "key value" lines that bench/run.sh parses.  The products use every usable core, or
// $ATTNMAP_BENCH_THREADS threads (the 1 -> 2 core scaling), on oneDNN's kernels with
// $ATTNMAP_GEMM_KERNELS=onednn (set_gemm_kernels); forward and check run in bfloat16 with
// $ATTNMAP_BENCH_PRECISION=bf16 (as --precision bf16).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "draw/colormap.hpp"
#include "draw/overlay.hpp"
#include "io/image_io.hpp"
#include "maps/attention_maps.hpp"
#include "maps/upsample.hpp"
#include "model/kernels.hpp"
#include "model/preprocess.hpp"
#include "engine/batch.hpp"
#include "model/sgemm.hpp"
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

// Best-of-`reps` GFLOP/s of C(M,N) = A(M,K) B(N,K)^T: through sgemm(), or (`as_linear`) through the
// model's linear() with B as a layer's weights (packed once by the oneDNN back-end, as in the forward pass).
double sgemm_gflops(int M, int N, int K, int reps, bool as_linear = false) {
  std::vector<float> A(static_cast<size_t>(M) * K), C(static_cast<size_t>(M) * N);
  LinearW lin;
  lin.out = N;
  lin.in = K;
  std::vector<float> B(static_cast<size_t>(N) * K);
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& v : A) v = u(g);
  for (auto& v : B) v = u(g);
  lin.weight = B;
  auto product = [&] {
    if (as_linear) linear(C.data(), A.data(), lin, M);
    else sgemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N);
  };
  double best = 1e30;
  product();  // warm-up (and the packing)
  for (int r = 0; r < reps; ++r) {
    const auto t = Clock::now();
    product();
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

// Best-of-`iters` milliseconds of f().
template <class F>
double best_ms(int iters, F f) {
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t = Clock::now();
    f();
    best = std::min(best, secs_since(t));
  }
  return best * 1e3;
}

// $ATTNMAP_BENCH_PRECISION: bf16 runs the products in bfloat16 (--precision bf16), else float32.
Precision bench_precision() {
  const char* p = std::getenv("ATTNMAP_BENCH_PRECISION");
  return p != nullptr && std::string(p) == "bf16" ? Precision::BF16 : Precision::F32;
}

// The forward pass's stages at batch 1 with the model's shapes, each stage's calls timed together: GEMM
// (patch embedding, qkv, proj, fc1, fc2 of every block), attention (every head's QK^T, softmax, PV; with the
// probabilities stored, and without: only the class rows, stage_attention_rows_ms), the
// element-wise kernels (2 LayerNorms, GELU, 2 residual adds per block); and one photo's decode, resize to
// the model input, map upsample + overlay, PNG encode.
int stages(const std::string& weights, const std::string& photo, int iters) {
  const ViTWeights w = load_model(weights);
  const HParams& hp = w.hp;
  const int T = hp.tokens(), D = hp.dim, inner = hp.inner(), H = hp.num_heads, L = hp.depth;
  const int M = w.blocks[0].fc1.out, N = hp.grid_w * hp.grid_h, PK = w.patch_embed.in;
  auto buf = [](size_t n) { std::vector<float> v(n); std::mt19937 g(3); std::normal_distribution<float> d(0, 1); for (auto& x : v) x = d(g); return v; };
  std::vector<float> x = buf(static_cast<size_t>(T) * D), xn = x, qkv = buf(static_cast<size_t>(T) * 3 * inner),
                     att = buf(static_cast<size_t>(T) * inner), hid = buf(static_cast<size_t>(T) * M),
                     probs(static_cast<size_t>(H) * T * T), patches = buf(static_cast<size_t>(N) * PK);
  auto gemm = [&] {
    linear(x.data(), patches.data(), w.patch_embed, N);
    for (int l = 0; l < L; ++l) {
      const BlockWeights& b = w.blocks[static_cast<size_t>(l)];
      linear(qkv.data(), xn.data(), b.qkv, T);
      linear(xn.data(), att.data(), b.proj, T);
      linear(hid.data(), xn.data(), b.fc1, T);
      linear(xn.data(), hid.data(), b.fc2, T);
    }
  };
  auto attention = [&] {
    for (int l = 0; l < L; ++l) attention_forward(att.data(), probs.data(), qkv.data(), T, H, hp.head_dim);
  };
  std::vector<float> rows0(static_cast<size_t>(H) * T);  // (H, T): the class token's rows only, probs not stored
  auto attention_rows = [&] {
    for (int l = 0; l < L; ++l)
      attention_forward(att.data(), nullptr, qkv.data(), T, H, hp.head_dim, nullptr, Precision::F32, rows0.data());
  };
  std::vector<float> hid0 = hid;
  auto elementwise = [&] {
    for (int l = 0; l < L; ++l) {
      const BlockWeights& b = w.blocks[static_cast<size_t>(l)];
      kernels::layernorm(xn.data(), x.data(), b.norm1.weight.data(), b.norm1.bias.data(), T, D, hp.eps);
      kernels::residual_add(x.data(), xn.data(), nullptr, static_cast<size_t>(T), D);
      kernels::layernorm(xn.data(), x.data(), b.norm2.weight.data(), b.norm2.bias.data(), T, D, hp.eps);
      std::copy(hid0.begin(), hid0.end(), hid.begin());
      kernels::gelu(hid.data(), hid.size());
      kernels::residual_add(x.data(), xn.data(), nullptr, static_cast<size_t>(T), D);
    }
  };
  gemm();
  std::printf("stage_gemm_ms %.2f\n", best_ms(iters, gemm));
  std::printf("stage_attention_ms %.2f\n", best_ms(iters, attention));
  std::printf("stage_attention_rows_ms %.2f\n", best_ms(iters, attention_rows));
  std::printf("stage_elementwise_ms %.2f\n", best_ms(iters, elementwise));
  const std::vector<uint8_t> bytes = read_file(photo);
  Image img;
  std::printf("stage_decode_ms %.2f\n", best_ms(iters, [&] { img = decode_image(bytes.data(), bytes.size(), photo); }));
  const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
  std::printf("stage_resize_ms %.2f\n", best_ms(iters, [&] { (void)preprocess(img, hp.image_w, hp.image_h, ResizeMode::Squash, mean, sd); }));
  std::vector<float> map(static_cast<size_t>(N));
  for (size_t i = 0; i < map.size(); ++i) map[i] = static_cast<float>(i % 7) / 7.0f;
  Image out;
  std::printf("stage_overlay_ms %.2f\n", best_ms(iters, [&] {
    const std::vector<float> up = upsample_map(map, hp.grid_w, hp.grid_h, img.width, img.height, Upsample::Bilinear);
    out = blend_overlay(img, up, img.width, img.height, 0, 0, colormap_table("viridis"), 0.5f);
  }));
  std::printf("stage_png_ms %.2f\n", best_ms(iters, [&] { (void)encode_png(out); }));
  std::printf("stage_photo_pixels %d\n", img.width * img.height);
  return 0;
}

}  // namespace

// The ViT-B/16 block's four products (qkv, proj, fc1, fc2) at M rows through linear() in float32 and in
// bfloat16 (weights packed once each, as the forward pass does), interleaved, best of `reps`: GFLOP/s per
// layer and for the block, and the ratio fp32 time / bf16 time (issue 45: the products' own speed-up, with
// the weights in cache).
int precision_products(int M, int reps) {
  struct Shape { int N, K; const char* name; };
  const Shape shapes[] = {{2304, 768, "qkv"}, {768, 768, "proj"}, {3072, 768, "fc1"}, {768, 3072, "fc2"}};
  std::mt19937 g(1);
  std::normal_distribution<float> d(0, 1);
  std::vector<LinearW> f32, b16;
  for (const Shape& s : shapes) {
    LinearW l;
    l.out = s.N;
    l.in = s.K;
    std::vector<float> w(static_cast<size_t>(s.N) * s.K);
    for (auto& v : w) v = 0.02f * d(g);
    l.weight = Floats(std::move(w));
    l.bias = Floats(std::vector<float>(static_cast<size_t>(s.N), 0.01f));
    f32.push_back(l);
    b16.push_back(l);  // its own packed copy
  }
  std::vector<float> X(static_cast<size_t>(M) * 3072), Y(static_cast<size_t>(M) * 3072);
  for (auto& v : X) v = d(g);
  std::vector<double> tf(4, 1e30), tb(4, 1e30);
  for (int r = -1; r < reps; ++r)  // r = -1: packing and the primitives, not timed
    for (size_t i = 0; i < 4; ++i) {
      auto t = Clock::now();
      linear(Y.data(), X.data(), f32[i], M, Precision::F32);
      if (r >= 0) tf[i] = std::min(tf[i], secs_since(t));
      t = Clock::now();
      linear(Y.data(), X.data(), b16[i], M, Precision::BF16);
      if (r >= 0) tb[i] = std::min(tb[i], secs_since(t));
    }
  double sf = 0, sb = 0, flops = 0;
  for (size_t i = 0; i < 4; ++i) {
    const double fl = 2.0 * M * shapes[i].N * shapes[i].K;
    std::printf("products_%s_m%d_gflops fp32 %.1f bf16 %.1f ratio %.2f\n", shapes[i].name, M, fl / tf[i] / 1e9,
                fl / tb[i] / 1e9, tf[i] / tb[i]);
    sf += tf[i], sb += tb[i], flops += fl;
  }
  std::printf("products_block_m%d_gflops_fp32 %.1f\nproducts_block_m%d_gflops_bf16 %.1f\nproducts_block_m%d_bf16_over_fp32 %.2f\n",
              M, flops / sf / 1e9, M, flops / sb / 1e9, M, sf / sb);
  return 0;
}

// The own kernels against oneDNN's matmul on the linear() products of ViT-S/16, ViT-B/16 and ViT-B/16 at 448 px
// (qkv, proj, fc1, fc2) at batch 1 and 8, in one process, the two interleaved rep by rep (a shared machine's
// slow spells hit both): prints linear_gflops_own_<model>_b<B>, linear_gflops_onednn_..., the ratio, and
// each shape's figures.
int linear_kernels(int reps) {
  struct Model { const char* name; int tokens, D; };
  const Model models[] = {{"vits", 197, 384}, {"vitb", 197, 768}, {"vitb448", 785, 768}};
  for (const Model& m : models) {
    for (int B : {1, 8}) {
      const int M = m.tokens * B, D = m.D;
      double t_own = 0, t_lib = 0, flops = 0;
      for (auto nk : {std::array<int, 2>{3 * D, D}, {D, D}, {4 * D, D}, {D, 4 * D}}) {
        const int N = nk[0], K = nk[1];
        std::vector<float> A(static_cast<size_t>(M) * K), C(static_cast<size_t>(M) * N), W(static_cast<size_t>(N) * K);
        std::mt19937 g(1);
        std::uniform_real_distribution<float> u(-1, 1);
        for (auto& v : A) v = u(g);
        for (auto& v : W) v = u(g);
        LinearW own, lib;  // each keeps its own packed copy
        own.out = lib.out = N;
        own.in = lib.in = K;
        own.weight = W;
        lib.weight = W;
        double best[2] = {1e30, 1e30};
        for (int r = 0; r <= reps; ++r) {  // r = 0: packing and warm-up
          for (int k = 0; k < 2; ++k) {
            set_gemm_kernels(k == 0 ? GemmKernels::Own : GemmKernels::Library);
            const auto t = Clock::now();
            linear(C.data(), A.data(), k == 0 ? own : lib, M);
            if (r > 0) best[k] = std::min(best[k], secs_since(t));
          }
        }
        const double f = 2.0 * M * N * K;
        std::printf("linear_shape_%s_b%d_M%d_N%d_K%d own %.1f onednn %.1f GFLOP/s\n", m.name, B, M, N, K, f / best[0] / 1e9,
                    f / best[1] / 1e9);
        t_own += best[0];
        t_lib += best[1];
        flops += f;
      }
      std::printf("linear_gflops_own_%s_b%d %.2f\nlinear_gflops_onednn_%s_b%d %.2f\nlinear_own_over_onednn_%s_b%d %.3f\n",
                  m.name, B, flops / t_own / 1e9, m.name, B, flops / t_lib / 1e9, m.name, B, t_lib / t_own);
    }
  }
  set_gemm_kernels(GemmKernels::Own);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: attnmap_bench sgemm [SIZE] | forward WEIGHTS ITERS B... | load WEIGHTS | linear [REPS] |\n"
                         "       stages WEIGHTS PHOTO ITERS | check WEIGHTS B OUT.bin | precision [M] [REPS]\n");
    return 2;
  }
  const std::string cmd = argv[1];
  const char* kinds = std::getenv("ATTNMAP_GEMM_KERNELS");  // "onednn": the library's kernels (forward, sgemm)
  if (kinds != nullptr && std::string(kinds) == "onednn") set_gemm_kernels(GemmKernels::Library);
  const char* th = std::getenv("ATTNMAP_BENCH_THREADS");
  const int cores = th != nullptr && std::atoi(th) > 0 ? std::atoi(th) : usable_cores();
  set_blas_threads(cores);
  std::printf("cores %d\n", cores);
  if (cmd == "sgemm") {
    const int s = argc > 2 ? std::atoi(argv[2]) : 2048;
    std::printf("sgemm_square_gflops %.2f\n", sgemm_gflops(s, s, s, 5));
    // ViT-B/16 linear layers at batch 8 (M = 8*197 tokens): qkv, fc1, fc2, as the forward pass runs them.
    double best = 0;
    for (auto mnk : {std::array<int, 3>{1576, 2304, 768}, {1576, 3072, 768}, {1576, 768, 3072}})
      best = std::max(best, sgemm_gflops(mnk[0], mnk[1], mnk[2], 5, /*as_linear=*/true));
    std::printf("sgemm_vitb_shapes_gflops %.2f\n", best);
    return 0;
  }
  if (cmd == "precision") {  // fp32 vs bf16 products (needs avx512_bf16 and the oneDNN back-end)
    if (!bf16_supported()) {
      std::fprintf(stderr, "attnmap_bench precision: no native bf16 matmul on this CPU or build\n");
      return 2;
    }
    return precision_products(argc > 2 ? std::atoi(argv[2]) : 197, argc > 3 ? std::atoi(argv[3]) : 20);
  }
  if (cmd == "linear") {
    if (gemm_kernels() != GemmKernels::Own) {
      std::fprintf(stderr, "attnmap_bench linear: the own kernels do not run on this CPU or build\n");
      return 2;
    }
    return linear_kernels(argc > 2 ? std::atoi(argv[2]) : 10);
  }
  if (cmd == "stages" && argc >= 5) return stages(argv[2], argv[3], std::atoi(argv[4]));
  if (cmd == "check" && argc >= 5) {  // the peer's input pattern, exact in float32 in both programs
    ViTWeights w = load_model(argv[2]);
    w.precision = bench_precision();
    prepare_weights(w, false);
    const HParams& hp = w.hp;
    const int B = std::atoi(argv[3]);
    const size_t n = static_cast<size_t>(3) * hp.image_h * hp.image_w;
    std::vector<std::vector<float>> imgs(static_cast<size_t>(B), std::vector<float>(n));
    for (size_t b = 0; b < imgs.size(); ++b)
      for (size_t i = 0; i < n; ++i)
        imgs[b][i] = static_cast<float>(static_cast<double>(((b * n + i) * 7919) % 1000) / 500.0 - 1.0);
    std::vector<const float*> ptrs;
    for (auto& im : imgs) ptrs.push_back(im.data());
    ForwardOptions fo;
    std::vector<float> maps;
    for (const auto& r : vit_forward(w, ptrs, fo)) {
      const std::vector<float> m = class_attention_map(r, hp, hp.depth - 1, HeadSelect{});
      maps.insert(maps.end(), m.begin(), m.end());
    }
    FILE* f = std::fopen(argv[4], "wb");
    if (f == nullptr || std::fwrite(maps.data(), sizeof(float), maps.size(), f) != maps.size()) return 1;
    std::fclose(f);
    std::printf("check_floats %zu\n", maps.size());
    return 0;
  }
  if ((cmd == "forward" && argc >= 5) || (cmd == "load" && argc >= 3)) {
    const double cpu0 = cpu_seconds();
    const std::string path = argv[2];
    const auto t = Clock::now();
    ViTWeights w = load_model(path);
    const double load_s = secs_since(t);
    const double mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
    const double load_cpu = cpu_seconds() - cpu0;
    std::printf("load_seconds %.3f\nload_cpu_seconds %.3f\nload_mb %.1f\nload_mb_per_s %.1f\nload_mb_per_cpu_s %.1f\n", load_s,
                load_cpu, mb, mb / load_s, mb / load_cpu);
    if (cmd == "load") return 0;
    w.precision = bench_precision();
    prepare_weights(w, false);
    std::printf("precision %s\n", w.precision == Precision::BF16 ? "bf16" : "fp32");
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
      std::vector<double> times;
      for (int i = 0; i < iters; ++i) {
        const auto t1 = Clock::now();
        step();
        const double s = secs_since(t1);
        total += s;
        times.push_back(s);
        best = std::min(best, s);
      }
      std::sort(times.begin(), times.end());
      std::printf("forward_ms_per_image_b%d %.2f\n", B, best / B * 1e3);
      std::printf("forward_median_ms_per_image_b%d %.2f\n", B, times[times.size() / 2] / B * 1e3);
      std::printf("forward_mean_ms_per_image_b%d %.2f\n", B, total / iters / B * 1e3);
      std::printf("forward_gflops_b%d %.2f\n", B, forward_flops(hp, w, last) * B / best / 1e9);
      std::printf("checksum_b%d %.6g\n", B, checksum);
    }
    return 0;
  }
  std::fprintf(stderr, "attnmap_bench: bad arguments\n");
  return 2;
}
