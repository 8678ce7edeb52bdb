#include "model/kernels.hpp"

#include <sleef.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

#include "model/kernels_isa.hpp"
#include "model/thread_pool.hpp"

namespace attnmap::kernels {

namespace {

bool have_avx2() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

bool have_avx512_bf16() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16") &&
                          __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

// The own matrix product's ISA: AVX-512 where the CPU has it and $ONEDNN_MAX_CPU_ISA does not cap oneDNN
// below it, else AVX2 + FMA unless the cap is below AVX2, else none.
int gemm_isa_width() {
#if defined(__x86_64__)
  static const int width = [] {
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    std::string c = cap != nullptr ? cap : "";
    for (char& ch : c) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (c == "AVX" || c == "SSE41") return 0;  // below AVX2: the library's products
    // kernels_avx512.cpp is built with -mavx512f -mavx512bf16, which lets the compiler use AVX512BW (kmovd on
    // the masks): F, BW, DQ and VL (every AVX-512 CPU since Skylake-SP; not Xeon Phi) are asked for
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("fma");
    if (c.rfind("AVX2", 0) != 0 && avx512) return 48;
    return have_avx2() ? 16 : 0;
  }();
  return width;
#else
  return 0;
#endif
}

// Work items of about `grain` floats each: rows are grouped into chunks by the shape alone.
int rows_per_task(size_t row_len, size_t grain = 16384) {
  return static_cast<int>(std::max<size_t>(1, grain / std::max<size_t>(row_len, 1)));
}

// Runs f(r0, r1) on row ranges [r0, r1) of M rows of length row_len, on the pool.
template <class F>
void for_rows(size_t M, size_t row_len, F f) {
  const size_t per = static_cast<size_t>(rows_per_task(row_len));
  const size_t tasks = (M + per - 1) / per;
  parallel_for(static_cast<int>(tasks), [&](int t) {
    const size_t r0 = static_cast<size_t>(t) * per;
    f(r0, std::min(M, r0 + per));
  });
}

void layernorm_row_scalar(float* y, const float* x, const float* w, const float* b, int D, float eps) {
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
  for (int j = 0; j < D; ++j) y[j] = static_cast<float>((x[j] - mean) * rstd) * w[j] + b[j];
}

void softmax_row_scalar(float* row, int n) {
  float mx = row[0];
  for (int j = 1; j < n; ++j) mx = std::max(mx, row[j]);
  double sum = 0;
  for (int j = 0; j < n; ++j) {
    row[j] = Sleef_expf_u10(row[j] - mx);
    sum += row[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int j = 0; j < n; ++j) row[j] *= inv;
}

void gelu_scalar(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + erf_float(x[i] * 0.70710678118654752f));
}

void quick_gelu_scalar(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + Sleef_expf_u10(x[i] * -1.702f));
}

void silu_scalar(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + Sleef_expf_u10(-x[i]));
}

void gelu_tanh_scalar(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + Sleef_tanhf_u10(0.7978845608028654f * (v + 0.044715f * (v * v * v))));
  }
}

using Body = void (*)(float*, size_t);

// The in-place body of `act` over a run of floats, on the calling thread: the widest this CPU runs (GELU:
// AVX-512, else AVX2; the others AVX2), else scalar code. The same bits on every path.
Body activation_body(Activation act) {
  const bool v = have_avx2();
  switch (act) {
    case Activation::GeluTanh:
      return v ? avx2::gelu_tanh : gelu_tanh_scalar;
    case Activation::QuickGelu:
      return v ? avx2::quick_gelu : quick_gelu_scalar;
    case Activation::Gelu:
      break;
  }
  return !v ? gelu_scalar : have_avx512_bf16() ? avx512::gelu : avx2::gelu;
}

// In place over n floats in parallel chunks of `body`.
void map_chunks(float* x, size_t n, Body body) {
  const size_t chunk = 16384;  // a multiple of 16: chunks cut no vector
  for_rows((n + chunk - 1) / chunk, chunk, [&](size_t c0, size_t c1) {
    const size_t i0 = c0 * chunk, i1 = std::min(n, c1 * chunk);
    body(x + i0, i1 - i0);
  });
}

}  // namespace

void quick_gelu(float* x, size_t n) { map_chunks(x, n, activation_body(Activation::QuickGelu)); }

void gelu_tanh(float* x, size_t n) { map_chunks(x, n, activation_body(Activation::GeluTanh)); }

void activation_tile(float* x, size_t ldx, size_t m, size_t n, Activation act) {
  const Body row = activation_body(act);
  for (size_t r = 0; r < m; ++r) row(x + r * ldx, n);
}

void activation(float* x, size_t n, Activation act) { map_chunks(x, n, activation_body(act)); }

void swiglu(float* out, const float* in, int M, int hidden) {
  const size_t h = static_cast<size_t>(hidden);
  const bool v = have_avx2();
  for_rows(static_cast<size_t>(M), 2 * h, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      float* o = out + r * h;
      const float* x1 = in + r * 2 * h;  // (hidden) gate
      const float* x2 = x1 + h;          // (hidden)
      std::copy_n(x1, h, o);
      (v ? avx2::silu : silu_scalar)(o, h);
      for (size_t j = 0; j < h; ++j) o[j] *= x2[j];
    }
  });
}

void layernorm(float* out, const float* in, const float* weight, const float* bias, int M, int D, float eps) {
  const size_t d = static_cast<size_t>(D);
  // AVX-512 and AVX2 rows: the same bits (Kernels.LayerNormIsTheSameOnEveryPath)
  const bool v = have_avx2(), v512 = have_avx512_bf16();
  for_rows(static_cast<size_t>(M), d, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      if (v512)
        avx512::layernorm_row(out + r * d, in + r * d, weight, bias, D, eps);
      else if (v)
        avx2::layernorm_row(out + r * d, in + r * d, weight, bias, D, eps);
      else layernorm_row_scalar(out + r * d, in + r * d, weight, bias, D, eps);
    }
  });
}

float erf_float(float z) {
  using namespace erf_table;
  const float abs_z = std::fabs(z);
  if (std::isnan(abs_z)) return z;
  const float a = 4.0f < abs_z ? 4.0f : abs_z;  // MINPS(4, |z|), as in the vector bodies
  const int i = std::min(static_cast<int>(a * 2.0f), kIntervals - 1);
  const float t = a - kErfCentre[i];  // exact (= a on the first interval)
  const float u = i == 0 ? a * a : t;
  float q = kErfPoly[kPowers - 1][i];
  for (int p = kPowers - 2; p >= 0; --p) q = std::fma(q, u, kErfPoly[p][i]);
  const float r = a >= kErfOne ? 1.0f : (i == 0 ? a : kErfStart[i]) + std::fma(t, q, kErfStartLow[i]);
  return std::copysign(r, z);
}

void gelu(float* x, size_t n) {
  // The 16-wide body on CPUs with AVX-512 (erf_float's operations and the same formula: the same bits,
  // checked by Kernels.GeluIsTheSameOnEveryPath).
  map_chunks(x, n, activation_body(Activation::Gelu));
}

int gemm_panel_width() { return gemm_isa_width(); }

size_t gemm_panel_floats(int N, int K, int width) {
  if (width <= 0) return 0;
  const size_t panels = (static_cast<size_t>(N) + static_cast<size_t>(width) - 1) / static_cast<size_t>(width);
  return panels * static_cast<size_t>(width) * static_cast<size_t>(K);
}

void pack_panels(float* out, const float* W, int N, int K, int width) {
  pack_panels(out, W, static_cast<size_t>(K), N, K, width, 1.0f);
}

void pack_panels(float* out, const float* W, size_t ldw, int N, int K, int width, float scale) {
  const size_t w = static_cast<size_t>(width), k_all = static_cast<size_t>(K);
  for (size_t p = 0; p * w < static_cast<size_t>(N); ++p) {
    float* panel = out + p * w * k_all;
    const size_t cols = std::min(w, static_cast<size_t>(N) - p * w);
    for (size_t k = 0; k < k_all; ++k) {
      float* row = panel + k * w;
      for (size_t j = 0; j < cols; ++j) row[j] = W[(p * w + j) * ldw + k] * scale;  // * 1: exact
      std::fill(row + cols, row + w, 0.0f);
    }
  }
}

void pack_panels_kmajor(float* out, const float* B, size_t ldb, int N, int K, int width) {
  const size_t w = static_cast<size_t>(width), k_all = static_cast<size_t>(K);
  for (size_t p = 0; p * w < static_cast<size_t>(N); ++p) {
    float* panel = out + p * w * k_all;
    const size_t cols = std::min(w, static_cast<size_t>(N) - p * w);
    for (size_t k = 0; k < k_all; ++k) {
      std::copy_n(B + k * ldb + p * w, cols, panel + k * w);
      std::fill(panel + k * w + cols, panel + k * w + w, 0.0f);
    }
  }
}

void gemm_panels(float* C, size_t ldc, const float* A, size_t lda, int m, int n, int K, const float* panels,
                 const float* bias, const PanelEpilogue* epilogue) {
  gemm_panels_on(gemm_isa_width(), C, ldc, A, lda, m, n, K, panels, bias, epilogue);
}

namespace {

// gemm_panels_on over one sweep of rows (gemm_sweep_rows): every depth pass, panel and micro-tile of rows
// [0, m) of the block.
void gemm_sweep(int w, float* C, size_t ldc, const float* A, size_t lda, int m, int n, int K, const float* panels,
                const float* bias, const PanelEpilogue* epilogue) {
  const bool to_x = epilogue != nullptr && epilogue->x != nullptr;
  // GELU in the micro-tile before its store (the same bits as activation's GELU on every path:
  // Kernels.GeluIsTheSameOnEveryPath): on the AVX2 path, and on the AVX-512 path where activation_body's
  // 16-wide body runs (with bf16)
  const bool gelu_in_tile = epilogue != nullptr && epilogue->gelu && !to_x && (w == 16 || have_avx512_bf16());
  const bool gelu_after = epilogue != nullptr && epilogue->gelu && !to_x && !gelu_in_tile;
  if (K <= 0) {  // no products: the bias (or 0), as a library's GEMM gives
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) C[static_cast<size_t>(i) * ldc + static_cast<size_t>(j)] = bias != nullptr ? bias[j] : 0.0f;
    if (to_x)
      residual_add_tile(epilogue->x, epilogue->ldx, C, ldc, epilogue->gamma, static_cast<size_t>(m),
                        static_cast<size_t>(n));
    else if (epilogue != nullptr && epilogue->gelu)
      activation_tile(C, ldc, static_cast<size_t>(m), static_cast<size_t>(n), Activation::Gelu);
    return;
  }
  const auto pass = w == 48 ? avx512::gemm_panel_pass : avx2::gemm_panel_pass;
  const size_t sw = static_cast<size_t>(w), sK = static_cast<size_t>(K);
  const int depth = gemm_depth(K);
  for (int k0 = 0; k0 < K; k0 += depth) {  // passes over the block, then panels, then the rows (in the pass)
    const int kc = std::min(depth, K - k0);
    const bool last = k0 + kc == K;
    for (int j = 0; j < n; j += w) {
      const float* P = panels + static_cast<size_t>(j) / sw * sK * sw + static_cast<size_t>(k0) * sw;
      // the pass after this one in this loop's order (the next panel, or the next depth's first): fetched
      const bool last_panel = j + w >= n;
      const int k1 = last_panel ? k0 + kc : k0, j1 = last_panel ? 0 : j + w;
      const float* next =
          last && last_panel ? nullptr
                             : panels + static_cast<size_t>(j1) / sw * sK * sw + static_cast<size_t>(k1) * sw;
      const size_t next_floats = next != nullptr ? static_cast<size_t>(std::min(depth, K - k1)) * sw : 0;
      PanelEpilogue cols;  // this panel's columns of the epilogue, on the last pass
      if (last && to_x)
        cols = {epilogue->x + static_cast<size_t>(j), epilogue->ldx,
                epilogue->gamma != nullptr ? epilogue->gamma + j : nullptr};
      cols.gelu = last && gelu_in_tile;
      pass(C + static_cast<size_t>(j), ldc, A + static_cast<size_t>(k0), lda, m, P, kc, std::min(w, n - j),
           bias != nullptr ? bias + j : nullptr, k0 > 0, cols.x != nullptr || cols.gelu ? &cols : nullptr,
           next, next_floats);
    }
  }
  if (gelu_after) activation_tile(C, ldc, static_cast<size_t>(m), static_cast<size_t>(n), Activation::Gelu);
}

}  // namespace

void gemm_panels_on(int w, float* C, size_t ldc, const float* A, size_t lda, int m, int n, int K,
                    const float* panels, const float* bias, const PanelEpilogue* epilogue) {
  const int sweep = gemm_sweep_rows(w) > 0 ? gemm_sweep_rows(w) : std::max(m, 1);
  for (int i = 0; i < m; i += sweep) {
    PanelEpilogue rows;  // the residual rows of this sweep
    if (epilogue != nullptr) {
      rows = *epilogue;
      if (rows.x != nullptr) rows.x += static_cast<size_t>(i) * rows.ldx;
    }
    gemm_sweep(w, C + static_cast<size_t>(i) * ldc, ldc, A + static_cast<size_t>(i) * lda, lda, std::min(sweep, m - i),
               n, K, panels, bias, epilogue != nullptr ? &rows : nullptr);
  }
}

bool has_bf16_instructions() { return have_avx512_bf16(); }

void to_bf16(uint16_t* out, const float* in, size_t n) {
  if (have_avx512_bf16()) {
    avx512::to_bf16(out, in, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) {  // round to nearest even, denormals to zero, as VCVTNEPS2BF16
    uint32_t u = 0;
    std::memcpy(&u, &in[i], 4);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      out[i] = static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays a (quiet) NaN
      continue;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    out[i] = static_cast<uint16_t>(u >> 16);
  }
}

void softmax_row(float* row, int n) {
  if (have_avx512_bf16()) avx512::softmax_row(row, n);  // the same bits, 16 wide (Kernels.SoftmaxIsTheSameOnEveryPath)
  else if (have_avx2()) avx2::softmax_row(row, n);
  else softmax_row_scalar(row, n);
}

void softmax_rows(float* x, int M, int n) {
  const size_t len = static_cast<size_t>(n);
  for_rows(static_cast<size_t>(M), len, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) softmax_row(x + r * len, n);
  });
}

void residual_add(float* x, const float* y, const float* gamma, size_t M, int D) {
  const size_t d = static_cast<size_t>(D);
  for_rows(M, d, [&](size_t r0, size_t r1) { residual_add_tile(x + r0 * d, d, y + r0 * d, d, gamma, r1 - r0, d); });
}

void residual_add_tile(float* x, size_t ldx, const float* y, size_t ldy, const float* gamma, size_t m, size_t n) {
  if (have_avx2()) {
    for (size_t r = 0; r < m; ++r) avx2::residual_add_row(x + r * ldx, y + r * ldy, gamma, n);
    return;
  }
  for (size_t r = 0; r < m; ++r) {
    float* xr = x + r * ldx;
    const float* yr = y + r * ldy;
    if (gamma == nullptr) {
      for (size_t j = 0; j < n; ++j) xr[j] += yr[j];
    } else {
      for (size_t j = 0; j < n; ++j) xr[j] += gamma[j] * yr[j];
    }
  }
}

}  // namespace attnmap::kernels
