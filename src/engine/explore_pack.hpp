// explore_pack.hpp - the explorer's data (attnmap explore, render --explore; docs/explore.md): every query
// token's attention row quantised to one byte a patch key, deflated, base64 in a JS file per block, and the
// choice of what fits the size budget.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attnmap {

/// The rows of one (T, T) attention matrix as the page stores them. Row i is query token i (prefix tokens
/// first: class, distillation, registers; then the patches row-major); its T weights are split into the P
/// prefix keys, kept as float32, and the N = T - P patch keys, quantised linearly between the row's own
/// patch minimum lo and maximum hi: q = round((v - lo) / (hi - lo) * 255), read back as lo + q (hi - lo) / 255.
/// The absolute error is at most (hi - lo) / 510 (half a level), i.e. 1/510 = 0.196 % of the row's patch
/// range; a constant row (hi == lo) is exact. The level q is then the colour-map index that `render --scale
/// map` gives the same row's patch values (draw/colormap.hpp colormap_lookup).
struct QuantisedRows {
  int tokens = 0, prefix = 0;   ///< T, P
  std::vector<float> lo, hi;    ///< (rows): patch minimum and maximum per row
  std::vector<float> prefix_w;  ///< (rows, P): the prefix keys' weights as computed
  std::vector<uint8_t> q;       ///< (rows, N): the patch keys' levels
};

/// Appends the T rows of `m` (T, T, row-major) to `out` (whose tokens/prefix must be T/P or 0). Throws
/// attnmap::Error for P outside [0, T) or a non-finite value.
void quantise_rows(const float* m, int T, int P, QuantisedRows* out);

/// The value stored for row `row`, key column `key` (0..T-1; prefix keys exact); NaN where marked absent.
float dequantised(const QuantisedRows& r, int row, int key);

/// Marks row `row` absent (a query the model does not have in that block: CaiT, model/cait.hpp): its lo, hi
/// and prefix weights become NaN, its levels 0. The page draws no heatmap for it and says why.
void mark_absent_row(QuantisedRows* r, int row);

/// Marks prefix key `key` (< prefix) of row `row` absent (a key that row's query never attends to): NaN.
void mark_absent_key(QuantisedRows* r, int row, int key);

/// The bytes of several matrices' rows as one block file carries them: every matrix's float32 part (lo, hi,
/// prefix weights; little-endian, as typed arrays read them) in order, then every matrix's levels in order.
std::vector<uint8_t> block_payload(const std::vector<QuantisedRows>& maps);

/// zlib's deflate (RFC 1950 stream, what DecompressionStream('deflate') reads) at level 9, and its inverse.
/// Throw attnmap::Error when zlib fails (inflate: a corrupt stream, or not `expected` bytes).
std::vector<uint8_t> deflate_bytes(const std::vector<uint8_t>& raw);
std::vector<uint8_t> inflate_bytes(const std::vector<uint8_t>& packed, size_t expected);

/// Bytes as MiB with two decimals: "3.41".
std::string megabytes(size_t bytes);

/// RFC 4648 base64 with padding.
std::string base64_encode(const std::vector<uint8_t>& bytes);

/// What the page stores of each block under a size budget (docs/explore.md "Budget"): the fused maps
/// (mean, max, min over heads, rollout) of every block always; every single head of as many blocks as fit,
/// taken from the last block down until one does not fit, or of the blocks in `preferred` (user-chosen, in
/// that order, until one does not fit).
struct BlockChoice {
  std::vector<bool> fused;    ///< (L): the block's file is written (its fusions and rollout); false: left out
  std::vector<bool> heads;    ///< (L): the block's single heads are stored
  size_t bytes = 0;           ///< the data files' total size, bytes
  std::vector<int> left_out;  ///< blocks whose single heads were wanted but left out by the budget, ascending
  std::vector<int> dropped;   ///< blocks left out entirely (their fusions alone did not fit), ascending
};

/// `fused[l]`, `heads[l]`: bytes of block l's file without / the extra bytes with its heads. Throws
/// attnmap::Error when the fused maps alone exceed `budget` (saying how much they need), or for a preferred
/// block outside [0, L).
BlockChoice choose_blocks(const std::vector<size_t>& fused, const std::vector<size_t>& heads, size_t budget,
                          const std::vector<int>& preferred = {});

}  // namespace attnmap
