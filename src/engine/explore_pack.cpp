// explore_pack.cpp - quantised rows, the block files' bytes, deflate / base64 and the budget (explore_pack.hpp).
#include "engine/explore_pack.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

// The registry's spelling, not a setting reference: tests/test_explore.cpp reads this message from
// choose_blocks itself (no front end in between) and expects the flag.
#include "core/setting_ref.hpp"
#include "core/error.hpp"

namespace attnmap {

void quantise_rows(const float* m, int T, int P, QuantisedRows* out) {
  if (T < 1 || P < 0 || P >= T) throw Error("quantise_rows: " + std::to_string(P) + " prefix tokens of " + std::to_string(T));
  if (out->tokens == 0) {
    out->tokens = T;
    out->prefix = P;
  } else if (out->tokens != T || out->prefix != P) {
    throw Error("quantise_rows: rows of " + std::to_string(T) + " tokens appended to rows of " + std::to_string(out->tokens));
  }
  const int N = T - P;
  for (int i = 0; i < T; ++i) {
    const float* row = m + static_cast<size_t>(i) * T;
    for (int k = 0; k < T; ++k)
      if (!std::isfinite(row[k]))
        throw Error("attention row " + std::to_string(i) + " key " + std::to_string(k) + " is not finite");
    const float lo = *std::min_element(row + P, row + T), hi = *std::max_element(row + P, row + T);
    out->lo.push_back(lo);
    out->hi.push_back(hi);
    out->prefix_w.insert(out->prefix_w.end(), row, row + P);
    const double range = static_cast<double>(hi) - lo;
    for (int k = 0; k < N; ++k) {
      const double level = range > 0 ? (row[P + k] - static_cast<double>(lo)) / range * 255.0 : 0.0;
      out->q.push_back(static_cast<uint8_t>(std::min(255.0, std::floor(level + 0.5))));
    }
  }
}

float dequantised(const QuantisedRows& r, int row, int key) {
  if (key < r.prefix) return r.prefix_w[static_cast<size_t>(row) * r.prefix + key];
  const int N = r.tokens - r.prefix;
  const float lo = r.lo[row], hi = r.hi[row];
  const uint8_t q = r.q[static_cast<size_t>(row) * N + (key - r.prefix)];
  return static_cast<float>(lo + q * ((static_cast<double>(hi) - lo) / 255.0));
}

void mark_absent_row(QuantisedRows* r, int row) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int N = r->tokens - r->prefix;
  r->lo.at(static_cast<size_t>(row)) = r->hi.at(static_cast<size_t>(row)) = nan;
  for (int k = 0; k < r->prefix; ++k) mark_absent_key(r, row, k);
  std::fill_n(r->q.begin() + static_cast<long>(row) * N, N, uint8_t{0});
}

void mark_absent_key(QuantisedRows* r, int row, int key) {
  if (key < 0 || key >= r->prefix) throw Error("mark_absent_key: key " + std::to_string(key) + " is not a prefix key");
  r->prefix_w.at(static_cast<size_t>(row) * r->prefix + key) = std::numeric_limits<float>::quiet_NaN();
}

namespace {

void append_floats(const std::vector<float>& v, std::vector<uint8_t>* out) {
  const size_t at = out->size();
  out->resize(at + v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(out->data() + at, v.data(), v.size() * sizeof(float));  // x86/ARM: little-endian
}

}  // namespace

std::string megabytes(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::vector<uint8_t> block_payload(const std::vector<QuantisedRows>& maps) {
  std::vector<uint8_t> out;
  for (const QuantisedRows& m : maps) {
    append_floats(m.lo, &out);
    append_floats(m.hi, &out);
    append_floats(m.prefix_w, &out);
  }
  for (const QuantisedRows& m : maps) out.insert(out.end(), m.q.begin(), m.q.end());
  return out;
}

std::vector<uint8_t> deflate_bytes(const std::vector<uint8_t>& raw) {
  uLongf n = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> out(n);
  if (compress2(out.data(), &n, raw.data(), static_cast<uLong>(raw.size()), 9) != Z_OK)
    throw Error("zlib could not compress " + std::to_string(raw.size()) + " bytes");
  out.resize(n);
  return out;
}

std::vector<uint8_t> inflate_bytes(const std::vector<uint8_t>& packed, size_t expected) {
  std::vector<uint8_t> out(expected);
  uLongf n = static_cast<uLongf>(expected);
  const int rc = uncompress(out.data(), &n, packed.data(), static_cast<uLong>(packed.size()));
  if (rc != Z_OK || n != expected)
    throw Error("zlib stream of " + std::to_string(packed.size()) + " bytes: expected " + std::to_string(expected) +
                " bytes inflated, " + (rc == Z_OK ? "found " + std::to_string(n) : std::string("corrupt or longer")));
  return out;
}

std::string base64_encode(const std::vector<uint8_t>& b) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s;
  s.reserve((b.size() + 2) / 3 * 4);
  for (size_t i = 0; i < b.size(); i += 3) {
    const uint32_t v = (uint32_t{b[i]} << 16) | (i + 1 < b.size() ? uint32_t{b[i + 1]} << 8 : 0u) |
                       (i + 2 < b.size() ? uint32_t{b[i + 2]} : 0u);
    s += k[(v >> 18) & 63];
    s += k[(v >> 12) & 63];
    s += i + 1 < b.size() ? k[(v >> 6) & 63] : '=';
    s += i + 2 < b.size() ? k[v & 63] : '=';
  }
  return s;
}

BlockChoice choose_blocks(const std::vector<size_t>& fused, const std::vector<size_t>& heads, size_t budget,
                          const std::vector<int>& preferred) {
  const int L = static_cast<int>(fused.size());
  BlockChoice c;
  c.fused.assign(fused.size(), false);
  c.heads.assign(fused.size(), false);
  // The fusions of as many blocks as fit, from the last block down (a large model: ViT-L at 448, DINOv2 at 518);
  // not even the last one: refused with what it needs.
  for (int l = L - 1; l >= 0 && c.bytes + fused[static_cast<size_t>(l)] <= budget; --l) {
    c.fused[static_cast<size_t>(l)] = true;
    c.bytes += fused[static_cast<size_t>(l)];
  }
  if (L > 0 && !c.fused[static_cast<size_t>(L - 1)])
    throw Error("the fused maps of the last block alone need " + megabytes(fused.back()) +
                " MB, more than the budget of " + megabytes(budget) + " MB: raise " + spelled_settings(setting_ref("budget_mb")));
  for (int l = 0; l < L; ++l)
    if (!c.fused[static_cast<size_t>(l)]) c.dropped.push_back(l);
  std::vector<int> order = preferred;
  for (const int l : order)
    if (l < 0 || l >= L) throw Error("block " + std::to_string(l) + " is outside 0.." + std::to_string(L - 1));
  if (order.empty())
    for (int l = L - 1; l >= 0; --l)
      if (c.fused[static_cast<size_t>(l)]) order.push_back(l);
  // In order until one does not fit: the blocks stored are a prefix of the order (the last blocks by default),
  // the rest of the order is what the budget left out.
  size_t k = 0;
  for (; k < order.size() && c.fused[static_cast<size_t>(order[k])] &&
         c.bytes + heads[static_cast<size_t>(order[k])] <= budget;
       ++k) {
    c.heads[static_cast<size_t>(order[k])] = true;
    c.bytes += heads[static_cast<size_t>(order[k])];
  }
  for (; k < order.size(); ++k) c.left_out.push_back(order[k]);
  std::sort(c.left_out.begin(), c.left_out.end());
  return c;
}

}  // namespace attnmap
