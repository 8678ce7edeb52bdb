// attention.cpp - one image's multi-head attention (vit.hpp: attention_forward, own_attention_products,
// class_scores_row): float32 heads on the own GEMM kernels (kernels::gemm_panels, each head's keys and values
// packed into panels), bf16 heads and the library's kernels through sgemm.hpp's matmul_dense.
#include "model/vit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>
#include <vector>

#include "model/kernels.hpp"
#include "model/sgemm.hpp"
#include "model/thread_pool.hpp"

namespace attnmap {

namespace {

// Query rows per block of one head's attention: at most 256 KiB of scores (rows, T), so that they stay in L2
// beside the head's K and V from Q K^T through the softmax to P V, in blocks of equal size (a multiple of 8); a
// whole head in one block up to T = 256. By the shape alone.
int attention_block_rows(int T) {
  const int most = std::max(8, 65536 / std::max(T, 1) / 8 * 8), blocks = (T + most - 1) / most;
  return std::min(most, ((T + blocks - 1) / blocks + 7) / 8 * 8);
}

// Head h's Q, K, V (3, T, dk), dense, from qkv (T, 3*H*dk) into ph; as bfloat16 into phb too when bf16.
void pack_head(float* ph, uint16_t* phb, const float* qkv, int T, int H, int dk, int h, bool bf16) {
  const size_t inner = static_cast<size_t>(H) * dk, Td = static_cast<size_t>(T) * dk;
  for (size_t t = 0; t < static_cast<size_t>(T); ++t)
    for (size_t j = 0; j < 3; ++j)
      std::copy_n(qkv + t * 3 * inner + j * inner + static_cast<size_t>(h) * dk, dk, ph + j * Td + t * dk);
  if (bf16) kernels::to_bf16(phb, ph, 3 * Td);
}

// A block's scores s (m, T) of head h, query rows from r0, into probabilities in place: + the block's rows of
// the head's bias (H, T, T) when not null (BEiT's relative position bias), each row's softmax; row 0 of the head
// also into rows0 (H, T) when not null.
void scores_to_probabilities(float* s, const float* bias, float* rows0, int h, int r0, int m, int T) {
  const size_t sm = static_cast<size_t>(m), sT = static_cast<size_t>(T);
  if (bias) {
    const float* bh = bias + (static_cast<size_t>(h) * sT + static_cast<size_t>(r0)) * sT;
    for (size_t i = 0; i < sm * sT; ++i) s[i] += bh[i];
  }
  for (size_t i = 0; i < sm; ++i) kernels::softmax_row(s + i * sT, T);
  if (rows0 && r0 == 0) std::copy_n(s, T, rows0 + static_cast<size_t>(h) * sT);
}

// attention_forward on the library's products (matmul_dense, matmul_dense_bf16): bf16 heads, and float32
// heads where the own kernels do not run. Each head's Q, K, V copied dense (and rounded to bf16).
void attention_library(float* out, float* probs, const float* qkv, int T, int H, int dk, const float* bias,
                       Precision precision, float* rows0) {
  const bool bf16 = precision == Precision::BF16;
  const size_t inner = static_cast<size_t>(H) * dk, Td = static_cast<size_t>(T) * dk, sT = static_cast<size_t>(T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const int rows = attention_block_rows(T), blocks = (T + rows - 1) / rows;
  // A head read by several tasks is packed once, all heads first (H, 3, T, dk); a head of one block is packed
  // by its task into that thread's buffer, where it stays in cache for its products.
  thread_local std::vector<float> packed;
  thread_local std::vector<uint16_t> packed_b;  // bf16 only
  if (blocks > 1) {
    packed.resize(static_cast<size_t>(H) * 3 * Td);
    if (bf16) packed_b.resize(packed.size());
  }
  float* const all = packed.data();  // the calling thread's buffers (a task's thread_local names its own)
  uint16_t* const all_b = packed_b.data();
  if (blocks > 1)
    parallel_for(H, [&](int h) {
      pack_head(all + static_cast<size_t>(h) * 3 * Td, bf16 ? all_b + static_cast<size_t>(h) * 3 * Td : nullptr, qkv,
                T, H, dk, h, bf16);
    });
  parallel_for(H * blocks, [&](int task) {  // (head, block of query rows): each computed alone, any thread
    const int h = task / blocks, r0 = task % blocks * rows, m = std::min(rows, T - r0);
    const size_t sm = static_cast<size_t>(m), s0 = static_cast<size_t>(r0);
    thread_local std::vector<float> own, s_own, o;  // one head's Q, K, V; scores (m, T) when probs is null; (m, dk)
    thread_local std::vector<uint16_t> own_b, p_b;  // bf16: own as bfloat16; the block's probabilities (m, T)
    const float* ph = blocks > 1 ? all + static_cast<size_t>(h) * 3 * Td : nullptr;  // (3, T, dk)
    const uint16_t* phb = blocks > 1 && bf16 ? all_b + static_cast<size_t>(h) * 3 * Td : nullptr;
    if (blocks == 1) {
      own.resize(3 * Td);
      if (bf16) own_b.resize(3 * Td);
      pack_head(own.data(), own_b.data(), qkv, T, H, dk, h, bf16);
      ph = own.data(), phb = own_b.data();
    }
    if (!probs && s_own.size() < sm * sT) s_own.resize(sm * sT);
    float* s = probs ? probs + (static_cast<size_t>(h) * sT + s0) * sT : s_own.data();  // (m, T)
    if (bf16)  // Q_blk K^T / sqrt(dk)
      matmul_dense_bf16(s, phb + s0 * dk, phb + Td, m, T, dk, /*trans_b=*/true, scale);
    else
      matmul_dense(s, ph + s0 * dk, ph + Td, m, T, dk, /*trans_b=*/true, scale);
    scores_to_probabilities(s, bias, rows0, h, r0, m, T);
    if (o.size() < sm * dk) o.resize(sm * dk);
    if (bf16) {
      if (p_b.size() < sm * sT) p_b.resize(sm * sT);
      kernels::to_bf16(p_b.data(), s, sm * sT);
      matmul_dense_bf16(o.data(), p_b.data(), phb + 2 * Td, m, dk, T, /*trans_b=*/false, 1.0f);  // P V
    } else {
      matmul_dense(o.data(), s, ph + 2 * Td, m, dk, T, /*trans_b=*/false, 1.0f);  // P V (m, dk)
    }
    for (size_t i = 0; i < sm; ++i) std::copy_n(&o[i * dk], dk, out + (s0 + i) * inner + static_cast<size_t>(h) * dk);
  });
}

// 64-byte aligned floats, as the own kernels read panels (aligned loads).
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  explicit Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  bool operator==(const Aligned64&) const { return true; }
  bool operator!=(const Aligned64&) const { return false; }
};
using PanelBuf = std::vector<float, Aligned64<float>>;

// One head's panels for the own kernels (kernels::pack_panels): its keys times 1 / sqrt(dk), the panels of
// S = Q (K / sqrt(dk))^T (N = T columns, depth dk), then its values, the panels of O = P V (N = dk, depth T).
struct HeadPanels {
  int width;
  size_t keys, values;
  HeadPanels(int T, int dk)
      : width(kernels::gemm_panel_width()),
        keys(kernels::gemm_panel_floats(T, dk, width)),
        values(kernels::gemm_panel_floats(dk, T, width)) {}
  size_t floats() const { return keys + values; }
};

// Head h's key panels (scaled) from one image's qkv (T, 3*H*dk) into `keys` (HeadPanels::keys floats). The keys
// carry the scale, as timm scales the queries (q * scale before q @ k^T): S's scores are then plain sums.
void pack_keys(float* keys, const float* qkv, int T, int H, int dk, int h, int width) {
  const size_t inner = static_cast<size_t>(H) * dk;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  kernels::pack_panels(keys, qkv + inner + static_cast<size_t>(h) * dk, 3 * inner, T, dk, width, scale);
}

// Head h's key and value panels (HeadPanels::floats) from qkv.
void pack_head_panels(float* panels, const float* qkv, int T, int H, int dk, int h, const HeadPanels& hp) {
  const size_t inner = static_cast<size_t>(H) * dk;
  pack_keys(panels, qkv, T, H, dk, h, hp.width);
  kernels::pack_panels_kmajor(panels + hp.keys, qkv + 2 * inner + static_cast<size_t>(h) * dk, 3 * inner, dk, T,
                              hp.width);
}

// attention_forward on the own kernels (float32): tasks over (head, block of query rows) as in the library
// path, but no dense copies: the queries are read from qkv's rows, each head's keys and values packed once into
// panels, and P V stored straight into out's columns of the head. Every element of S and O is summed as
// kernels::gemm_panels says, whatever the block, thread or ISA path.
void attention_own(float* out, float* probs, const float* qkv, int T, int H, int dk, const float* bias,
                   float* rows0) {
  const size_t inner = static_cast<size_t>(H) * dk, sT = static_cast<size_t>(T);
  const HeadPanels hp(T, dk);
  const int rows = attention_block_rows(T), blocks = (T + rows - 1) / rows;
  thread_local PanelBuf packed;  // heads read by several tasks: all heads' panels, packed first
  if (blocks > 1) packed.resize(static_cast<size_t>(H) * hp.floats());
  float* const all = packed.data();  // the calling thread's buffer (a task's thread_local names its own)
  if (blocks > 1)
    parallel_for(H, [&](int h) { pack_head_panels(all + static_cast<size_t>(h) * hp.floats(), qkv, T, H, dk, h, hp); });
  parallel_for(H * blocks, [&](int task) {  // (head, block of query rows): each computed alone, any thread
    const int h = task / blocks, r0 = task % blocks * rows, m = std::min(rows, T - r0);
    const size_t sm = static_cast<size_t>(m), s0 = static_cast<size_t>(r0);
    thread_local PanelBuf own;                // one head's panels
    thread_local std::vector<float> s_own;  // scores (m, T) when probs is null
    const float* panels = blocks > 1 ? all + static_cast<size_t>(h) * hp.floats() : nullptr;
    if (blocks == 1) {
      own.resize(hp.floats());
      pack_head_panels(own.data(), qkv, T, H, dk, h, hp);
      panels = own.data();
    }
    if (!probs && s_own.size() < sm * sT) s_own.resize(sm * sT);
    float* s = probs ? probs + (static_cast<size_t>(h) * sT + s0) * sT : s_own.data();  // (m, T)
    kernels::gemm_panels(s, sT, qkv + s0 * 3 * inner + static_cast<size_t>(h) * dk, 3 * inner, m, T, dk, panels,
                         nullptr);  // Q_blk (K / sqrt(dk))^T
    scores_to_probabilities(s, bias, rows0, h, r0, m, T);
    kernels::gemm_panels(out + s0 * inner + static_cast<size_t>(h) * dk, inner, s, sT, m, dk, T, panels + hp.keys,
                         nullptr);  // P V (m, dk), into the head's columns of out
  });
}

}  // namespace

bool own_attention_products(Precision precision) {
  return precision == Precision::F32 && gemm_kernels() == GemmKernels::Own;
}

void attention_forward(float* out, float* probs, const float* qkv, int T, int H, int dk, const float* bias,
                       Precision precision, float* rows0) {
  if (own_attention_products(precision)) return attention_own(out, probs, qkv, T, H, dk, bias, rows0);
  attention_library(out, probs, qkv, T, H, dk, bias, precision, rows0);
}

void class_scores_row(float* row, const float* qkv, int T, int H, int dk, int h) {
  const HeadPanels hp(T, dk);
  thread_local PanelBuf keys;
  keys.resize(hp.keys);
  pack_keys(keys.data(), qkv, T, H, dk, h, hp.width);
  kernels::gemm_panels(row, static_cast<size_t>(T), qkv + static_cast<size_t>(h) * dk, 3 * static_cast<size_t>(H) * dk,
                       1, T, dk, keys.data(), nullptr);
}

}  // namespace attnmap
