// isa_peak.cpp - the arithmetic peak of one core (issue 30; not a test): float32 FMA (VFMADD231PS zmm, 32
// FLOP each) against bfloat16 dot products (VDPBF16PS zmm, 64 FLOP each: 16 lanes x 2 products x
// multiply-add), 16 independent accumulators each, so that throughput and not latency is timed (10 were too
// few for VDPBF16PS on AMD Zen 5: its latency is longer than the FMA's, and 10 chains measured 1.70x the FMA
// where 16 measure 2.0x; the FMA is saturated from 10 on). Prints "key value" lines (GFLOP/s, best of 5) that
// bench/run.sh keeps; where VDPBF16PS runs at half the FMA's instruction rate, bf16 matrix products cannot
// beat float32 ones on that CPU. Where the CPU has AMX (CPUID AMX-TILE and AMX-BF16) and Linux grants the
// process the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM), also the tile unit's bfloat16 rate: TDPBF16PS
// on 16x32 by 32x16 tiles (16384 FLOP each), 6 independent accumulator tiles (the path oneDNN's
// "brg:avx512_core_amx_bf16" kernels take). Built with -mavx512f -mavx512bf16 -mfma (the AMX function by its
// own target attribute); run only where /proc/cpuinfo lists avx512_bf16.
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace {

using Clock = std::chrono::steady_clock;
constexpr long kIters = 20000000;

// Sixteen named accumulators; the asm statements keep them apart (no folding) and in registers.
#define KEEP() asm volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7)); \
  asm volatile("" : "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11), "+v"(a12), "+v"(a13), "+v"(a14), "+v"(a15))
#define ALL(OP) a0 = OP(a0); a1 = OP(a1); a2 = OP(a2); a3 = OP(a3); a4 = OP(a4); a5 = OP(a5); a6 = OP(a6); \
  a7 = OP(a7); a8 = OP(a8); a9 = OP(a9); a10 = OP(a10); a11 = OP(a11); a12 = OP(a12); a13 = OP(a13); \
  a14 = OP(a14); a15 = OP(a15);
#define START() __m512 a0 = _mm512_set1_ps(0.f), a1 = _mm512_set1_ps(1.f), a2 = _mm512_set1_ps(2.f), \
  a3 = _mm512_set1_ps(3.f), a4 = _mm512_set1_ps(4.f), a5 = _mm512_set1_ps(5.f), a6 = _mm512_set1_ps(6.f), \
  a7 = _mm512_set1_ps(7.f), a8 = _mm512_set1_ps(8.f), a9 = _mm512_set1_ps(9.f), a10 = _mm512_set1_ps(10.f), \
  a11 = _mm512_set1_ps(11.f), a12 = _mm512_set1_ps(12.f), a13 = _mm512_set1_ps(13.f), a14 = _mm512_set1_ps(14.f), \
  a15 = _mm512_set1_ps(15.f)

double fma_gflops() {
  START();
  const __m512 x = _mm512_set1_ps(1e-8f), y = _mm512_set1_ps(1.0f);
#define FMA(acc) _mm512_fmadd_ps(x, y, acc)
  const auto t = Clock::now();
  for (long i = 0; i < kIters; ++i) {
    KEEP();
    ALL(FMA)
  }
  KEEP();
  return kIters * 16.0 * 32.0 / std::chrono::duration<double>(Clock::now() - t).count() / 1e9;
}

double dpbf16_gflops() {
  START();
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3f80);
#define DOT(acc) _mm512_dpbf16_ps(acc, x, y)
  const auto t = Clock::now();
  for (long i = 0; i < kIters; ++i) {
    KEEP();
    ALL(DOT)
  }
  KEEP();
  return kIters * 16.0 * 64.0 / std::chrono::duration<double>(Clock::now() - t).count() / 1e9;
}

// True when CPUID lists AMX-TILE and AMX-BF16 (leaf 7, EDX bits 24 and 22) and Linux lets this process use
// the tile registers (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18; Linux >= 5.16).
bool amx_usable() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(d & (1u << 24)) || !(d & (1u << 22))) return false;
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

// The tile configuration (palette 1): tiles 0-5 accumulators, 16 rows of 16 floats; tiles 6 and 7 the
// bfloat16 operands, 16 rows of 32 values (64 bytes).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-bf16"))) double amx_bf16_gflops() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  alignas(64) static uint16_t ones[16 * 32];
  std::fill(ones, ones + 16 * 32, uint16_t{0x3f80});
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  const long iters = kIters / 8;
  const auto t = Clock::now();
  for (long i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 6, 7);
    _tile_dpbf16ps(1, 6, 7);
    _tile_dpbf16ps(2, 6, 7);
    _tile_dpbf16ps(3, 6, 7);
    _tile_dpbf16ps(4, 6, 7);
    _tile_dpbf16ps(5, 6, 7);
  }
  alignas(64) static float out[16 * 16];
  _tile_stored(0, out, 64);  // the accumulators are used: the loop is not removed
  const double s = std::chrono::duration<double>(Clock::now() - t).count();
  _tile_release();
  if (out[0] < 0) std::printf("#");
  return iters * 6.0 * 16384.0 / s / 1e9;
}

}  // namespace

int main() {
  double f = 0, b = 0;
  for (int r = 0; r < 5; ++r) {
    f = std::max(f, fma_gflops());
    b = std::max(b, dpbf16_gflops());
  }
  std::printf("isa_fp32_fma_gflops_per_core %.1f\nisa_bf16_dot_gflops_per_core %.1f\nisa_bf16_over_fp32 %.2f\n", f, b, b / f);
  if (amx_usable()) {
    double m = 0;
    for (int r = 0; r < 5; ++r) m = std::max(m, amx_bf16_gflops());
    std::printf("isa_amx_bf16_gflops_per_core %.1f\nisa_amx_bf16_over_fp32 %.2f\n", m, m / f);
  }
  return 0;
}
