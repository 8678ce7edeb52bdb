#include "model/sgemm.hpp"

#if !defined(ATTNMAP_GEMM_ONEDNN)
#include <cblas.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <unordered_map>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "model/kernels.hpp"
#include "model/thread_pool.hpp"

#if defined(ATTNMAP_GEMM_ONEDNN)

#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <vector>

// Debian's libdnnl runs its parallel regions on OpenMP (libgomp, linked by the build).
extern "C" void omp_set_num_threads(int);
#endif

namespace attnmap {

namespace {

// Tiles of one product: C (M, N) is cut into rb x cb tiles by a rule of the shape alone, so every call
// computes each tile with the same cblas_sgemm call whether the tiles then run one after another or on
// several threads. Columns: ceil(N / 256) blocks of equal width rounded up to 16; rows: ceil(M / 192)
// blocks rounded up to 8, one more when the tile count is odd (so that 2 threads get equal shares).
constexpr int kColTarget = 256;
constexpr int kColAlign = 16;
constexpr int kRowTarget = 192;
constexpr int kRowAlign = 8;

int cut(int n, int blocks, int align) {
  const int w = (n + blocks - 1) / blocks;
  return (w + align - 1) / align * align;
}

struct Tiling {
  int width = 0, height = 0, cols = 0, rows = 0;
};

Tiling tiling(int M, int N) {
  Tiling t;
  t.width = cut(N, (N + kColTarget - 1) / kColTarget, kColAlign);
  t.cols = (N + t.width - 1) / t.width;
  int rb = (M + kRowTarget - 1) / kRowTarget;
  if (rb * t.cols % 2 == 1 && M >= 2 * kRowAlign * (rb + 1)) ++rb;
  t.height = cut(M, rb, kRowAlign);
  t.rows = (M + t.height - 1) / t.height;
  return t;
}

// One tile: C(m, n) = alpha op(A) op(B) + beta C, row-major, on the calling thread. The back-end is chosen
// at configure time (-DATTNMAP_GEMM=openblas|onednn); this is the only place that knows it.
#if defined(ATTNMAP_GEMM_ONEDNN)
// oneDNN would start an OpenMP team of its own from every pool thread; one thread each (the pool is the
// parallelism), so a tile's rounding never depends on a thread count.
void one_omp_thread() {
  thread_local const bool once = (omp_set_num_threads(1), true);
  (void)once;
}
#endif

void gemm_tile(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* A, int lda,
               const float* B, int ldb, float beta, float* C, int ldc) {
#if defined(ATTNMAP_GEMM_ONEDNN)
  one_omp_thread();
  dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
#else
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

// OpenBLAS starts with a thread per core; one thread of its own from the first product on, in every program
// that links this: the pool is the parallelism, so the bits never depend on a thread count.
void own_threads_off() {
#if !defined(ATTNMAP_GEMM_ONEDNN)
  static const bool done = (openblas_set_num_threads(1), true);
  (void)done;
#endif
}

// C = alpha op(A) op(B) + beta C tile by tile on the pool; before each tile's product, `prepare(i0, mi,
// j0, nj)` may fill the tile of C (the bias of linear()).
template <class Prepare>
void tiled(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc, Prepare prepare) {
  own_threads_off();
  if (M <= 0 || N <= 0) return;
  const Tiling t = tiling(M, N);
  parallel_for(t.rows * t.cols, [&](int k) {
    const int i0 = (k / t.cols) * t.height, mi = std::min(t.height, M - i0);
    const int j0 = (k % t.cols) * t.width, nj = std::min(t.width, N - j0);
    // op(A)'s rows i0..: A's columns if A is stored (K, M); op(B)'s columns j0..: B's rows if stored (N, K).
    const size_t si = static_cast<size_t>(i0), sj = static_cast<size_t>(j0);
    const float* Ai = trans_a ? A + si : A + si * static_cast<size_t>(lda);
    const float* Bj = trans_b ? B + sj * static_cast<size_t>(ldb) : B + sj;
    float* Cij = C + si * static_cast<size_t>(ldc) + sj;
    prepare(i0, mi, j0, nj);
    gemm_tile(trans_a, trans_b, mi, nj, K, alpha, Ai, lda, Bj, ldb, beta, Cij, ldc);
  });
}

#if defined(ATTNMAP_GEMM_ONEDNN)
// ---- oneDNN matmul on pre-packed weights (linear(Y, X, LinearW, M)) -------------------------------------
using dnnl::memory;
using Dims = memory::dims;
constexpr memory::data_type kF32 = memory::data_type::f32, kBF16 = memory::data_type::bf16;

// One CPU engine for the whole run, never destroyed: the pool threads' streams may outlive static objects.
const dnnl::engine& cpu_engine() {
  static const dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

// (m, n) row-major with row stride ld.
memory::desc rows_md(int m, int n, int ld, memory::data_type dt = kF32) {
  return memory::desc(Dims{m, n}, dt, Dims{ld, 1});
}

// A block of n rows of W (N, K) row-major, as matmul's (K, n) weights: column-major, leading dimension k.
memory::desc user_weights_md(int k, int n, memory::data_type dt = kF32) {
  return memory::desc(Dims{k, n}, dt, Dims{1, k});
}

// The tiles of one linear() product: row blocks x column blocks, a rule of (M, N) alone. Every weight block
// (a block of output columns) is read from memory once per row block, so a product of a few hundred rows
// (one image) is one row block and streams its weights once, as ONNX Runtime's packed GEMM does; the column
// blocks give the threads their shares. Row blocks: at most kPackedRowMax rows; several: heights a multiple
// of `align` (whole micro-tiles: 8, AVX-512's and oneDNN's; 6 on the own AVX2 path), the last shorter. Column
// blocks: about kPackedColTarget wide, a multiple of 16 (one AVX-512 register of floats), an even count (2
// threads get equal shares) where that costs little. oneDNN's matmul kernels compute each row of Y the same way
// whatever the row block (Sgemm.PackedRowsDoNotDependOnTheTile), and a column's block depends on N alone, so
// the bits depend on neither M nor the thread count.
constexpr int kPackedRowMax = 256, kPackedColTarget = 128;
constexpr int kPackedRowTarget = 64;  // the row count the packed layout is asked for

struct RowTiles { int count = 0, height = 0; };

RowTiles row_tiles(int M, int align = 8) {
  RowTiles t;
  t.count = (M + kPackedRowMax - 1) / kPackedRowMax;
  t.height = (M + t.count - 1) / t.count;
  if (t.count > 1) t.height = (t.height + align - 1) / align * align;  // whole micro-tiles; the last block short
  t.count = (M + t.height - 1) / t.height;
  return t;
}

// Column blocks of N: width a multiple of `align` (16, or the own product's panel width), the smallest count >= N / kPackedColTarget that comes out
// even (tried up to 4 more), else that first count.
struct ColBlocks { int count = 0, width = 0; };

ColBlocks col_blocks(int N, int align, int target = kPackedColTarget) {
  const int first = std::max(1, (N + target - 1) / target);
  ColBlocks best;
  for (int c = first; c <= first + 4; ++c) {
    ColBlocks b;
    b.width = cut(N, c, align);
    b.count = (N + b.width - 1) / b.width;
    if (c == first) best = b;
    if (b.count % 2 == 0 || b.count == 1) return b;
  }
  return best;
}

// The layout oneDNN's matmul kernels want for (k, n) weights on this CPU (format "any", asked for a tile of
// kPackedRowTarget rows); every tile's primitive is then made for this layout, whatever its row count.
// bf16: bfloat16 source and weights, float32 bias and output.
memory::desc packed_weights_md(int n, int k, bool bf16) {
  const memory::data_type in = bf16 ? kBF16 : kF32;
  const memory::desc any(Dims{k, n}, in, memory::format_tag::any);
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(rows_md(kPackedRowTarget, k, k, in), any,
                         memory::desc(Dims{1, n}, kF32, memory::format_tag::ab),
                         rows_md(kPackedRowTarget, n, n)),
      cpu_engine());
  return pd.weights_desc();
}

// One block of output columns [n0, n0 + n) of lin.weight, packed for the matmul kernels.
struct PackedBlock {
  int n0 = 0, n = 0;
  memory::desc md;
  memory values;
};

// The column blocks of col_blocks(N, align), their values not yet packed.
std::vector<PackedBlock> column_blocks(int N, int align) {
  const ColBlocks cb = col_blocks(N, align);
  std::vector<PackedBlock> blocks(static_cast<size_t>(cb.count));
  for (int j = 0; j < cb.count; ++j) {
    blocks[static_cast<size_t>(j)].n0 = j * cb.width;
    blocks[static_cast<size_t>(j)].n = std::min(cb.width, N - j * cb.width);
  }
  return blocks;
}

// The own kernels' column blocks: whole panels of `width` columns, spread as evenly as whole panels allow over
// the count col_blocks(N, width, target) gives (blocks of one more panel first), so that 2 threads get equal
// shares (a last narrow block left one thread idle for ~a fifth of ViT-B's proj and fc2 at batch 1). Target:
// ~128 columns on AVX-512, ~256 on AVX2 (more 16-column panels per row sweep: 2-5 % on an AMD EPYC Zen 2).
// Row blocks on AVX2 are whole 6-row tiles (blocks of 8 left a 4- or 2-row tail tile in every block).
constexpr int kOwnAvx2ColTarget = 256, kOwnAvx2RowAlign = 6;
int own_row_align(int panel_width) { return panel_width == 16 ? kOwnAvx2RowAlign : 8; }
std::vector<PackedBlock> panel_blocks(int N, int width) {
  const int panels = (N + width - 1) / width;
  const int target = width == 16 ? kOwnAvx2ColTarget : kPackedColTarget;
  const int count = std::min(panels, col_blocks(N, width, target).count);
  std::vector<PackedBlock> blocks(static_cast<size_t>(count));
  for (int j = 0; j < count; ++j) {
    const int p0 = j * panels / count, p1 = (j + 1) * panels / count;
    blocks[static_cast<size_t>(j)].n0 = p0 * width;
    blocks[static_cast<size_t>(j)].n = std::min(N, p1 * width) - p0 * width;
  }
  return blocks;
}

// Runs tile(block, i0, rows) on the pool for every tile of a product of M rows: rows [i0, i0 + rows) of a row
// block of row_tiles(M) times one column block; the column blocks of one row block, then the next row block.
template <class F>
void for_each_tile(int M, int align, const std::vector<PackedBlock>& blocks, F tile) {
  const RowTiles t = row_tiles(M, align);
  const int cols = static_cast<int>(blocks.size());
  parallel_for(t.count * cols, [&](int k) {
    const int i0 = k / cols * t.height;
    tile(blocks[static_cast<size_t>(k % cols)], i0, std::min(t.height, M - i0));
  });
}

// lin.weight (N, K) packed block by block (col_blocks), in float32 or bfloat16: for oneDNN's matmul (`values`
// of each block), or, when `panel_width` > 0, for the own product (kernels::pack_panels: `panels`, the blocks
// giving only the columns each tile computes).
struct PackedLinear {
  int N = 0, K = 0;
  bool bf16 = false;
  int panel_width = 0;
  const float* panels = nullptr;
  std::vector<PackedBlock> blocks;
  std::unique_ptr<LargeBuffer> storage;  // the blocks' values, or the panels
};

// The kind set_gemm_kernels asked for (Own unless a benchmark says otherwise).
std::atomic<bool> library_kernels_asked{false};

// True when float32 linear() products run on the own kernels (kernels::gemm_panels): wherever the CPU has AVX2
// + FMA or AVX-512, unless set_gemm_kernels(Library). Level with or faster than oneDNN 2.6's matmul, with a
// smaller error and the same bits on both ISA paths (docs/performance.md).
bool own_f32_kernels() { return kernels::gemm_panel_width() > 0 && !library_kernels_asked.load(); }

// lin.weight packed for the own kernels: the column blocks of panel_blocks(N, width), each block's panels
// packed by one pool task (the values do not depend on which).
std::shared_ptr<PackedLinear> pack_for_own_kernels(const LinearW& lin) {
  auto p = std::make_shared<PackedLinear>();
  p->N = lin.out, p->K = lin.in;
  p->panel_width = kernels::gemm_panel_width();
  p->blocks = panel_blocks(p->N, p->panel_width);
  p->storage = std::make_unique<LargeBuffer>(kernels::gemm_panel_floats(p->N, p->K, p->panel_width) * sizeof(float));
  float* const panels = static_cast<float*>(p->storage->base);
  p->panels = panels;
  lin.weight.populate();
  parallel_for(static_cast<int>(p->blocks.size()), [&](int j) {
    const PackedBlock& b = p->blocks[static_cast<size_t>(j)];
    kernels::pack_panels(panels + kernels::gemm_panel_floats(b.n0, p->K, p->panel_width),
                         lin.weight.data() + static_cast<size_t>(b.n0) * static_cast<size_t>(p->K), b.n, p->K,
                         p->panel_width);
  });
  return p;
}

// Packs lin.weight; the column blocks are reordered in parallel on the pool (each block by one oneDNN
// reorder on its thread: the packed values do not depend on which thread packs which block).
// own: for the own kernels (float32), else for oneDNN's matmul in float32 or bfloat16.
std::shared_ptr<const PackedLinear> pack_linear(const LinearW& lin, bool bf16, bool own) {
  if (own) return pack_for_own_kernels(lin);
  one_omp_thread();
  auto p = std::make_shared<PackedLinear>();
  p->N = lin.out, p->K = lin.in;
  p->bf16 = bf16;
  p->blocks = column_blocks(p->N, kColAlign);
  const int count = static_cast<int>(p->blocks.size());
  std::vector<size_t> offset(static_cast<size_t>(count) + 1, 0);
  for (int j = 0; j < count; ++j) {
    PackedBlock& b = p->blocks[static_cast<size_t>(j)];
    b.md = packed_weights_md(b.n, p->K, bf16);
    offset[static_cast<size_t>(j) + 1] = offset[static_cast<size_t>(j)] + (b.md.get_size() + 4095) / 4096 * 4096;
  }
  p->storage = std::make_unique<LargeBuffer>(offset.back());
  lin.weight.populate();
  parallel_for(count, [&](int j) {
    one_omp_thread();
    PackedBlock& b = p->blocks[static_cast<size_t>(j)];
    b.values = memory(b.md, cpu_engine(), static_cast<uint8_t*>(p->storage->base) + offset[static_cast<size_t>(j)]);
    const float* rows = lin.weight.data() + static_cast<size_t>(b.n0) * static_cast<size_t>(p->K);
    memory user(user_weights_md(p->K, b.n), cpu_engine(), const_cast<float*>(rows));
    dnnl::reorder(user, b.values).execute(thread_stream(), user, b.values);
    thread_stream().wait();
  });
  return p;
}

// The packed form of lin.weight: made once (under a lock, so that image workers starting together pack it
// once), then kept with the weights; weights viewed in place from a file hand their pages back.
// A run packs in one precision; asked for the other, the packed copy is made again from lin.weight.
std::shared_ptr<const PackedLinear> packed(const LinearW& lin, bool bf16) {
  const int width = !bf16 && own_f32_kernels() ? kernels::gemm_panel_width() : 0;
  auto ok = [&](const std::shared_ptr<const PackedLinear>& p) {
    return p && p->N == lin.out && p->K == lin.in && p->bf16 == bf16 && p->panel_width == width;
  };
  std::shared_ptr<const PackedLinear> p = std::static_pointer_cast<const PackedLinear>(lin.weight.derived());
  if (ok(p)) return p;
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  p = std::static_pointer_cast<const PackedLinear>(lin.weight.derived());
  if (ok(p)) return p;
  try {
    p = pack_linear(lin, bf16, width > 0);
  } catch (const dnnl::error& e) {
    throw Error("oneDNN cannot pack a (" + std::to_string(lin.out) + ", " + std::to_string(lin.in) +
                ") weight matrix: " + e.what());
  }
  lin.weight.set_derived(p);
  lin.weight.drop_mapped_pages();
  return p;
}

// The matmul primitive of one tile shape: dense (m, K) rows times the packed (K, N) weights, plus the bias
// when `bias`, into dense (m, N) rows, and the scratch memory it needs (bytes). Made once per shape and kept
// for the run (oneDNN generates its kernels when a primitive is made). The scratch memory is the caller's
// (thread_scratch), not allocated by oneDNN on every call.
struct TilePrimitive {
  dnnl::matmul prim;
  size_t scratch_bytes = 0;
};

// Each thread keeps its own primitives (no lock per tile; oneDNN's primitive cache makes a second thread's
// copy of a primitive cheap).
TilePrimitive tile_primitive(int m, const PackedLinear& p, const PackedBlock& blk, bool bias) {
  using Key = std::tuple<int, int, int, int, bool>;
  thread_local std::map<Key, TilePrimitive> cache;  // destroyed with its thread (the engine outlives it)
  const Key key{m, blk.n, p.K, p.bf16 ? 1 : 0, bias};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  try {
    const memory::desc bias_md =
        bias ? memory::desc(Dims{1, blk.n}, kF32, memory::format_tag::ab) : memory::desc();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(rows_md(m, p.K, p.K, p.bf16 ? kBF16 : kF32), blk.md, bias_md, rows_md(m, blk.n, blk.n)),
        attr, cpu_engine());
    return cache.emplace(key, TilePrimitive{dnnl::matmul(pd), pd.scratchpad_desc().get_size()})
        .first->second;
  } catch (const dnnl::error& e) {
    throw Error("oneDNN has no matmul for a (" + std::to_string(m) + ", " + std::to_string(p.K) + ") x (" +
                std::to_string(p.K) + ", " + std::to_string(blk.n) + ") product: " + e.what());
  }
}

// The matmul primitive of a dense product C (m, n) = alpha A (m, k) op(B) (B stored (k, n), or (n, k) with
// trans_b), made once per shape, and its scratch memory in bytes.
TilePrimitive dense_primitive(int m, int n, int k, bool trans_b, float alpha, bool bf16 = false) {
  using Key = std::tuple<int, int, int, bool, float, bool>;
  thread_local std::map<Key, TilePrimitive> cache;  // per thread, as tile_primitive's
  const Key key{m, n, k, trans_b, alpha, bf16};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    const memory::data_type in = bf16 ? kBF16 : kF32;
    const memory::desc b_md = trans_b ? user_weights_md(k, n, in) : rows_md(k, n, n, in);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(rows_md(m, k, k, in), b_md, rows_md(m, n, n)), attr,
                                          cpu_engine());
    return cache.emplace(key, TilePrimitive{dnnl::matmul(pd), pd.scratchpad_desc().get_size()})
        .first->second;
  } catch (const dnnl::error& e) {
    throw Error("oneDNN has no matmul for a (" + std::to_string(m) + ", " + std::to_string(k) + ") x (" +
                std::to_string(k) + ", " + std::to_string(n) + ") product: " + e.what());
  }
}

// Runs a matmul primitive with src, weights (and bias) on this thread's stream and scratch memory.
void execute(const TilePrimitive& tp, std::unordered_map<int, memory> args) {
  thread_local std::vector<uint8_t> scratch;  // this thread's scratch memory, grown to the largest asked
  if (scratch.size() < tp.scratch_bytes) scratch.resize(tp.scratch_bytes);
  const memory::dim bytes = static_cast<memory::dim>(std::max<size_t>(tp.scratch_bytes, 1));
  args.emplace(DNNL_ARG_SCRATCHPAD,
               memory(memory::desc(Dims{bytes}, memory::data_type::u8, memory::format_tag::a), cpu_engine(),
                      scratch.empty() ? nullptr : scratch.data()));
  tp.prim.execute(thread_stream(), args);
  thread_stream().wait();
}

// The epilogue on one tile (m, n) of the product, dense in `tile`, whose columns start at n0 of rows of N:
// the activation, then into Y; or added to the residual stream.
void tile_epilogue(const Epilogue& e, float* tile, int m, int n, int n0, int N, float* Y) {
  const size_t sn = static_cast<size_t>(n), sN = static_cast<size_t>(N), s0 = static_cast<size_t>(n0);
  if (e.residual != nullptr) {  // one call for the tile (a residual_add per row, each in parallel: ~2.5x slower)
    kernels::residual_add_tile(e.residual + s0, sN, tile, sn, e.gamma != nullptr ? e.gamma + s0 : nullptr,
                               static_cast<size_t>(m), sn);
    return;
  }
  if (e.act != nullptr) kernels::activation(tile, static_cast<size_t>(m) * sn, *e.act);
  for (size_t i = 0; i < static_cast<size_t>(m); ++i) std::copy_n(tile + i * sn, sn, Y + i * sN + s0);
}

float* tile_buffer(size_t floats) {  // this thread's buffer for one dense tile: grown, never zero-filled again
  thread_local std::vector<float> tile;
  if (tile.size() < floats) tile.resize(floats);
  return tile.data();
}

// bf16 tiles of fewer rows run as this many (X's m rows, then zeros): on an AMX CPU oneDNN 2.6 gives 1- and
// 2-row bf16 products to brg:avx512_core_bf16, which adds in another order than its AMX kernel.
constexpr int kBf16TileRowsMin = 8;
const uint16_t* bf16_rows_padded(const uint16_t* X, int m, int K) {
  thread_local std::vector<uint16_t> rows;
  rows.assign(static_cast<size_t>(kBf16TileRowsMin) * static_cast<size_t>(K), 0);
  std::copy_n(X, static_cast<size_t>(m) * static_cast<size_t>(K), rows.begin());
  return rows.data();
}

// One tile of linear() on the own kernels: X (m, K) times blk's panels, + bias, into Y's rows (GELU as the
// micro-tiles store them, another activation on the rows after), or added to the residual stream by those stores
// (then this thread's tile holds only the passes before the last, past kernels::kGemmDepthMax).
void own_tile(const PackedLinear& p, const PackedBlock& blk, int m, const float* X, const float* bias, float* Y,
              const Epilogue& epilogue) {
  const float* panels = p.panels + kernels::gemm_panel_floats(blk.n0, p.K, p.panel_width);
  const bool to_residual = epilogue.residual != nullptr;
  const size_t K = static_cast<size_t>(p.K), sm = static_cast<size_t>(m), n = static_cast<size_t>(blk.n),
               ldy = to_residual ? n : static_cast<size_t>(p.N);
  kernels::PanelEpilogue e;
  if (to_residual) e = {epilogue.residual + blk.n0, static_cast<size_t>(p.N), epilogue.gamma ? epilogue.gamma + blk.n0 : nullptr};
  e.gelu = !to_residual && epilogue.act != nullptr && *epilogue.act == Activation::Gelu;
  float* const y = to_residual ? tile_buffer(sm * n) : Y + blk.n0;
  kernels::gemm_panels(y, ldy, X, K, m, blk.n, p.K, panels, bias != nullptr ? bias + blk.n0 : nullptr, &e);
  if (!to_residual && epilogue.act != nullptr && !e.gelu) kernels::activation_tile(y, ldy, sm, n, *epilogue.act);
}

// One tile of linear(): X (m, K; float32, or bfloat16 as uint16 when p.bf16) times the packed weight block, +
// bias, into Y's columns [n0, n0 + n) (row stride N). oneDNN's fast kernels write dense rows only (a row stride
// sends it to its reference code), so there the tile is made in this thread's buffer and copied into place.
void packed_tile(const PackedLinear& p, const PackedBlock& blk, int m, const void* X, const float* bias, float* Y,
                 const Epilogue& epilogue) {
  if (p.panel_width > 0) return own_tile(p, blk, m, static_cast<const float*>(X), bias, Y, epilogue);
  one_omp_thread();
  const int run = p.bf16 ? std::max(m, kBf16TileRowsMin) : m;  // the rows the product runs on
  if (run > m) X = bf16_rows_padded(static_cast<const uint16_t*>(X), m, p.K);
  const TilePrimitive tp = tile_primitive(run, p, blk, bias != nullptr);
  const dnnl::engine& eng = cpu_engine();
  float* const tile = tile_buffer(static_cast<size_t>(run) * static_cast<size_t>(blk.n));
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(rows_md(run, p.K, p.K, p.bf16 ? kBF16 : kF32), eng, const_cast<void*>(X))},
      {DNNL_ARG_WEIGHTS, blk.values},
      {DNNL_ARG_DST, memory(rows_md(run, blk.n, blk.n), eng, tile)}};
  if (bias != nullptr)
    args.emplace(DNNL_ARG_BIAS, memory(memory::desc(Dims{1, blk.n}, kF32, memory::format_tag::ab), eng,
                                       const_cast<float*>(bias + blk.n0)));
  execute(tp, std::move(args));
  tile_epilogue(epilogue, tile, m, blk.n, blk.n0, p.N, Y);
}
#endif

}  // namespace

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  tiled(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, [](int, int, int, int) {});
}

void linear(float* Y, const float* X, const float* W, const float* b, int M, int N, int K) {
  const size_t n = static_cast<size_t>(N);
  auto bias = [&](int i0, int mi, int j0, int nj) {
    if (b == nullptr) return;
    for (int i = i0; i < i0 + mi; ++i)
      std::copy_n(b + j0, nj, Y + static_cast<size_t>(i) * n + static_cast<size_t>(j0));
  };
  tiled(false, true, M, N, K, 1.0f, X, K, W, K, b != nullptr ? 1.0f : 0.0f, Y, N, bias);
}

void linear(float* Y, const float* X, const LinearW& lin, int M) { linear(Y, X, lin, M, Precision::F32); }

void linear(float* Y, const float* X, const LinearW& lin, int M, Precision p) { linear(Y, X, lin, M, p, Epilogue{}); }

void linear(float* Y, const float* X, const LinearW& lin, int M, Precision precision, const Epilogue& epilogue) {
  const float* bias = lin.bias.empty() ? nullptr : lin.bias.data();
#if defined(ATTNMAP_GEMM_ONEDNN)
  own_threads_off();
  const size_t N = static_cast<size_t>(lin.out), K = static_cast<size_t>(lin.in);
  if (M <= 0 || N == 0) return;
  const bool bf16 = precision == Precision::BF16;
  if (bf16 && !bf16_supported()) throw Error("bfloat16 products are not supported on this CPU");
  const RowTiles t = row_tiles(M);
  const std::shared_ptr<const PackedLinear> p = packed(lin, bf16);
  // bf16: X's rows (M, K) rounded to bfloat16 by row block into this thread's buffer (grown, kept for the run).
  // Tasks use `xb`, not the name: a thread_local named in a task would be the pool thread's own vector.
  thread_local std::vector<uint16_t> own_xb;
  if (bf16 && own_xb.size() < static_cast<size_t>(M) * K) own_xb.resize(static_cast<size_t>(M) * K);
  uint16_t* const xb = own_xb.data();
  if (bf16) {
    parallel_for(t.count * 2, [&](int k) {  // halves of row blocks: both threads busy for one block
      const size_t r0 = static_cast<size_t>(k / 2) * static_cast<size_t>(t.height);
      const size_t rows = std::min(static_cast<size_t>(t.height), static_cast<size_t>(M) - r0);
      const size_t half = (rows + 1) / 2, a = r0 + (k % 2 ? half : 0), n = k % 2 ? rows - half : half;
      kernels::to_bf16(xb + a * K, X + a * K, n * K);
    });
  }
  for_each_tile(M, own_row_align(p->panel_width), p->blocks, [&](const PackedBlock& blk, int i0, int mi) {
    const size_t si = static_cast<size_t>(i0);
    const void* Xi = bf16 ? static_cast<const void*>(xb + si * K) : static_cast<const void*>(X + si * K);
    packed_tile(*p, blk, mi, Xi, bias, epilogue.residual != nullptr ? nullptr : Y + si * N,
                Epilogue{epilogue.act, epilogue.residual != nullptr ? epilogue.residual + si * N : nullptr, epilogue.gamma});
  });
#else
  if (precision == Precision::BF16) throw Error("bfloat16 products need the oneDNN back-end (this build: OpenBLAS)");
  // a residual epilogue writes no Y: the product goes to `own` first
  std::vector<float> own(epilogue.residual != nullptr ? static_cast<size_t>(M) * lin.out : 0);
  float* out = epilogue.residual != nullptr ? own.data() : Y;
  linear(out, X, lin.weight.data(), bias, M, lin.out, lin.in);
  if (epilogue.residual != nullptr)
    kernels::residual_add(epilogue.residual, out, epilogue.gamma, static_cast<size_t>(M), lin.out);
  else if (epilogue.act != nullptr)
    kernels::activation(out, static_cast<size_t>(M) * lin.out, *epilogue.act);
#endif
}

bool linear_columns(float* Y, size_t ldy, const float* X, size_t ldx, const LinearW& lin, int M, int n0, int n) {
#if defined(ATTNMAP_GEMM_ONEDNN)
  if (!own_f32_kernels() || M <= 0 || n <= 0 || n0 < 0 || n0 + n > lin.out) return false;
  const std::shared_ptr<const PackedLinear> p = packed(lin, false);
  if (p->panel_width == 0 || n0 % p->panel_width != 0) return false;
  const float* panels = p->panels + kernels::gemm_panel_floats(n0, p->K, p->panel_width);  // column n0's panel on
  const float* bias = lin.bias.empty() ? nullptr : lin.bias.data() + n0;
  // the tiles of linear()'s order over the n columns' panel blocks
  const int align = own_row_align(p->panel_width);
  for_each_tile(M, align, panel_blocks(n, p->panel_width), [&](const PackedBlock& b, int i0, int mi) {
    const size_t si = static_cast<size_t>(i0);
    kernels::gemm_panels(Y + si * ldy + static_cast<size_t>(b.n0), ldy, X + si * ldx, ldx, mi, b.n, p->K,
                         panels + kernels::gemm_panel_floats(b.n0, p->K, p->panel_width), bias ? bias + b.n0 : nullptr);
  });
  return true;
#else
  (void)Y, (void)ldy, (void)X, (void)ldx, (void)lin, (void)M, (void)n0, (void)n;
  return false;
#endif
}

void matmul_dense(float* C, const float* A, const float* B, int M, int N, int K, bool trans_b, float alpha) {
  if (M <= 0 || N <= 0) return;
#if defined(ATTNMAP_GEMM_ONEDNN)
  one_omp_thread();
  const TilePrimitive tp = dense_primitive(M, N, K, trans_b, alpha);
  const dnnl::engine& eng = cpu_engine();
  execute(tp, {{DNNL_ARG_SRC, memory(rows_md(M, K, K), eng, const_cast<float*>(A))},
               {DNNL_ARG_WEIGHTS,
                memory(trans_b ? user_weights_md(K, N) : rows_md(K, N, N), eng, const_cast<float*>(B))},
               {DNNL_ARG_DST, memory(rows_md(M, N, N), eng, C)}});
#else
  own_threads_off();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, K, B,
              trans_b ? K : N, 0.0f, C, N);
#endif
}

void matmul_dense_bf16(float* C, const uint16_t* A, const uint16_t* B, int M, int N, int K, bool trans_b, float alpha) {
  if (M <= 0 || N <= 0) return;
#if defined(ATTNMAP_GEMM_ONEDNN)
  one_omp_thread();
  const TilePrimitive tp = dense_primitive(M, N, K, trans_b, alpha, true);
  const dnnl::engine& eng = cpu_engine();
  execute(tp, {{DNNL_ARG_SRC, memory(rows_md(M, K, K, kBF16), eng, const_cast<uint16_t*>(A))},
               {DNNL_ARG_WEIGHTS, memory(trans_b ? user_weights_md(K, N, kBF16) : rows_md(K, N, N, kBF16), eng,
                                         const_cast<uint16_t*>(B))},
               {DNNL_ARG_DST, memory(rows_md(M, N, N), eng, C)}});
#else
  (void)C, (void)A, (void)B, (void)K, (void)trans_b, (void)alpha;
  throw Error("bfloat16 products need the oneDNN back-end (this build: OpenBLAS)");
#endif
}

bool bf16_supported() {
#if defined(ATTNMAP_GEMM_ONEDNN)
  static const bool yes = [] {
    if (!kernels::has_bf16_instructions()) return false;
    one_omp_thread();
    try {  // the kernels oneDNN picks for a bf16 matmul: its native ones ("brg:..."), not the reference code
      const memory::desc any(Dims{64, 64}, kBF16, memory::format_tag::any);
      const dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(rows_md(64, 64, 64, kBF16), any, rows_md(64, 64, 64)), cpu_engine());
      return std::string(pd.impl_info_str()).rfind("brg", 0) == 0;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return yes;
#else
  return false;
#endif
}

bool linear_packs_weights() {
#if defined(ATTNMAP_GEMM_ONEDNN)
  return true;
#else
  return false;
#endif
}

void prepack_linear(const LinearW& lin) { prepack_linear(lin, Precision::F32); }

void prepack_linear(const LinearW& lin, Precision precision) {
#if defined(ATTNMAP_GEMM_ONEDNN)
  if (lin.present()) (void)packed(lin, precision == Precision::BF16);
#else
  (void)lin, (void)precision;
#endif
}

bool linear_rows_independent() {
#if defined(ATTNMAP_GEMM_ONEDNN)
  static const bool brgemm = [] {
    one_omp_thread();
    const memory::desc any(Dims{64, 64}, kF32, memory::format_tag::any);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(rows_md(64, 64, 64), any, rows_md(64, 64, 64)),
                                          cpu_engine());
    return std::string(pd.impl_info_str()).rfind("brg", 0) == 0;
  }();
  return own_f32_kernels() || brgemm;
#else
  return false;
#endif
}

#if defined(ATTNMAP_GEMM_ONEDNN)
void set_gemm_kernels(GemmKernels kind) { library_kernels_asked.store(kind == GemmKernels::Library); }

GemmKernels gemm_kernels() { return own_f32_kernels() ? GemmKernels::Own : GemmKernels::Library; }
#else
void set_gemm_kernels(GemmKernels) {}

GemmKernels gemm_kernels() { return GemmKernels::Library; }
#endif

std::string gemm_description() {
  std::string own;
  if (gemm_kernels() == GemmKernels::Own)
    own = std::string("attnmap's own ") + (kernels::gemm_panel_width() == 48 ? "AVX-512" : "AVX2") +
          " kernels (float32 layers and attention); ";
  const std::string lib = std::string(gemm_backend()) == "onednn" ? "oneDNN" : "OpenBLAS";
  return "matrix products: " + own + lib + (own.empty() ? " (all)" : " (bfloat16, the rest)");
}

const char* gemm_backend() {
#if defined(ATTNMAP_GEMM_ONEDNN)
  return "onednn";
#else
  return "openblas";
#endif
}

void set_blas_threads(int n) {
#if !defined(ATTNMAP_GEMM_ONEDNN)
  openblas_set_num_threads(1);
#endif
  set_pool_threads(std::max(1, n));
}

int blas_threads_to_set(int workers, int cores, const char* openblas_env, const char* omp_env) {
  if (workers > 1) return 1;
  const int all = cores > 0 ? cores : 1;
  for (const char* env : {openblas_env, omp_env}) {  // the first one set to a whole number >= 1 caps the pool
    if (env == nullptr || env[0] == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end == '\0' && n >= 1) return static_cast<int>(std::min<long>(n, all));
  }
  return all;
}

}  // namespace attnmap
