#include "maps/attention_maps.hpp"
#include "maps/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.hpp"
#include "model/sgemm.hpp"

namespace attnmap {

HeadSelect parse_head(const std::string& s) {
  HeadSelect sel;
  if (s == "mean") return sel;
  if (s == "max") {
    sel.fusion = HeadSelect::Fusion::Max;
    return sel;
  }
  if (s == "min") {
    sel.fusion = HeadSelect::Fusion::Min;
    return sel;
  }
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < -100000 || v > 100000)
    throw Error("must be a head index or mean | max | min, found '" + s + "'");
  sel.fusion = HeadSelect::Fusion::Index;
  sel.index = static_cast<int>(v);
  return sel;
}

std::string fusion_name(const HeadSelect& sel, const std::string& index_prefix) {
  switch (sel.fusion) {
    case HeadSelect::Fusion::Max:
      return "max";
    case HeadSelect::Fusion::Min:
      return "min";
    case HeadSelect::Fusion::Index:
      return index_prefix + std::to_string(sel.index);
    default:
      return "mean";
  }
}

std::vector<float> fuse_heads(const float* rows, int H, int n, const HeadSelect& sel) {
  std::vector<float> out(static_cast<size_t>(n));
  if (sel.fusion == HeadSelect::Fusion::Index) {
    const int h = sel.index < 0 ? H + sel.index : sel.index;
    if (h < 0 || h >= H)
      throw Error("head " + std::to_string(sel.index) + " out of range: the model has " + std::to_string(H) + " heads (0.." +
                  std::to_string(H - 1) + ", or -1..-" + std::to_string(H) + ")");
    std::copy_n(rows + static_cast<size_t>(h) * n, n, out.begin());
    return out;
  }
  std::copy_n(rows, n, out.begin());
  for (int h = 1; h < H; ++h) {
    const float* r = rows + static_cast<size_t>(h) * n;
    for (int j = 0; j < n; ++j) {
      switch (sel.fusion) {
        case HeadSelect::Fusion::Max: out[static_cast<size_t>(j)] = std::max(out[static_cast<size_t>(j)], r[j]); break;
        case HeadSelect::Fusion::Min: out[static_cast<size_t>(j)] = std::min(out[static_cast<size_t>(j)], r[j]); break;
        default: out[static_cast<size_t>(j)] += r[j]; break;
      }
    }
  }
  if (sel.fusion == HeadSelect::Fusion::Mean)
    for (float& v : out) v /= static_cast<float>(H);
  return out;
}

std::vector<float> class_attention_map(const ForwardResult& r, const HParams& hp, int layer, const HeadSelect& sel) {
  if (layer < 0 || layer >= r.layers) throw Error("layer " + std::to_string(layer) + " was not computed");
  const int T = r.tokens, H = r.heads, N = hp.grid_w * hp.grid_h;
  const float* rows = &r.cls_attn[static_cast<size_t>(layer) * H * T];  // (H, T)
  // Keep only the patch columns of each head's class row: (H, N).
  std::vector<float> patch_rows(static_cast<size_t>(H) * N);
  for (int h = 0; h < H; ++h)
    std::copy_n(rows + static_cast<size_t>(h) * T + hp.num_prefix, N, &patch_rows[static_cast<size_t>(h) * N]);
  return fuse_heads(patch_rows.data(), H, N, sel);
}

void discard_smallest(float* m, int T, double frac) {
  if (!(frac >= 0.0 && frac <= 1.0)) throw Error("the discard fraction must be in [0, 1], found " + std::to_string(frac));
  std::vector<int> eligible;  // row-major indices outside row 0, column 0 and the diagonal
  eligible.reserve(T > 2 ? static_cast<size_t>(T - 1) * static_cast<size_t>(T - 2) : 0);
  for (int i = 1; i < T; ++i)
    for (int j = 1; j < T; ++j)
      if (i != j) eligible.push_back(i * T + j);
  const auto k = static_cast<size_t>(std::floor(frac * static_cast<double>(eligible.size())));
  if (k == 0) return;
  auto smaller = [m](int a, int b) { return m[a] < m[b] || (m[a] == m[b] && a < b); };
  if (k < eligible.size())
    std::nth_element(eligible.begin(), eligible.begin() + static_cast<long>(k) - 1, eligible.end(), smaller);
  for (size_t t = 0; t < k; ++t) m[eligible[t]] = 0.0f;
}

RolloutAccumulator::RolloutAccumulator(int T, int H, const HeadSelect& sel, double discard)
    : T_(T), H_(H), sel_(sel), discard_(discard) {
  if (!(discard >= 0.0 && discard <= 1.0)) throw Error("the discard fraction must be in [0, 1], found " + std::to_string(discard));
  if (T <= 0 || H <= 0) throw Error("rollout: empty attention");
  const size_t TT = static_cast<size_t>(T) * static_cast<size_t>(T);
  R_.assign(TT, 0.0f);  // R (T, T) starts as the identity
  next_.resize(TT);
  for (int i = 0; i < T; ++i) R_[static_cast<size_t>(i) * static_cast<size_t>(T) + static_cast<size_t>(i)] = 1.0f;
}

void RolloutAccumulator::add_layer(const float* probs) {
  const int T = T_;
  std::vector<float> a_hat = fuse_heads(probs, H_, T * T, sel_);  // (T, T)
  if (discard_ > 0.0) discard_smallest(a_hat.data(), T, discard_);
  for (int i = 0; i < T; ++i) {
    float* row = &a_hat[static_cast<size_t>(i) * static_cast<size_t>(T)];
    row[i] += 1.0f;  // A + I (the /2 cancels in the row normalisation below)
    double s = 0;
    for (int j = 0; j < T; ++j) s += row[j];
    const float inv = static_cast<float>(1.0 / s);
    for (int j = 0; j < T; ++j) row[j] *= inv;
  }
  sgemm(false, false, T, T, T, 1.0f, a_hat.data(), T, R_.data(), T, 0.0f, next_.data(), T);  // R = A_hat R
  R_.swap(next_);
  ++layers_;
}

std::vector<float> attention_rollout(const ForwardResult& r, int last_layer, const HeadSelect& sel, double discard) {
  const int T = r.tokens, H = r.heads;
  const size_t TT = static_cast<size_t>(T) * T;
  if (r.attn.size() != static_cast<size_t>(r.layers) * H * TT)
    throw Error("rollout needs every layer's full attention matrices (ForwardOptions::keep_full)");
  if (last_layer < 0 || last_layer >= r.layers) throw Error("rollout: layer " + std::to_string(last_layer) + " was not computed");
  RolloutAccumulator acc(T, H, sel, discard);
  for (int l = 0; l <= last_layer; ++l) acc.add_layer(&r.attn[static_cast<size_t>(l) * H * TT]);
  return acc.rollout();
}

std::vector<uint8_t> threshold_mask(const float* a, int n, float threshold) {
  if (!(threshold > 0.0f && threshold <= 1.0f))
    throw Error("the mask threshold must be in (0, 1], found " + std::to_string(threshold));
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [a](int x, int y) { return a[x] < a[y]; });
  double total = 0;
  for (int i = 0; i < n; ++i) total += a[i];
  if (!(total > 0) || !std::isfinite(total)) throw Error("threshold: the attention values do not have a positive sum");
  std::vector<uint8_t> keep(static_cast<size_t>(n), 0);
  double cum = 0;
  for (int i = 0; i < n; ++i) {
    cum += a[order[static_cast<size_t>(i)]] / total;
    if (cum > 1.0 - static_cast<double>(threshold)) keep[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  }
  return keep;
}

std::vector<float> class_row_map(const std::vector<float>& m, const HParams& hp, int T) {
  const int N = hp.grid_w * hp.grid_h;
  if (m.size() < static_cast<size_t>(T) * (hp.class_token ? 1 : T) || hp.num_prefix + N != T)
    throw Error("class_row_map: token count mismatch");
  std::vector<float> row(static_cast<size_t>(T));  // the class token's row, or the patch queries' mean row
  query_row(row.data(), m.data(), T, hp.class_token, hp.num_prefix);
  return std::vector<float>(row.begin() + hp.num_prefix, row.begin() + hp.num_prefix + N);
}

std::vector<float> token_line_map(const float* m, int H, int T, const HParams& hp, const TokenLine& line,
                                  const HeadSelect& sel) {
  const int N = hp.grid_w * hp.grid_h, P = hp.num_prefix;
  if (T != hp.tokens()) throw Error("token_line_map: " + std::to_string(T) + " tokens, the model has " + std::to_string(hp.tokens()));
  if (line.kind != TokenLine::Kind::ColumnMean && (line.token < 0 || line.token >= T))
    throw Error("token " + std::to_string(line.token) + " is outside the " + std::to_string(T) + " tokens");
  const auto TT = static_cast<size_t>(T) * static_cast<size_t>(T);
  std::vector<float> lines(static_cast<size_t>(H) * static_cast<size_t>(N));  // (H, N): each head's line over the patches
  for (int h = 0; h < H; ++h) {
    const float* a = m + static_cast<size_t>(h) * TT;  // (T, T), row = query, column = key
    float* out = &lines[static_cast<size_t>(h) * static_cast<size_t>(N)];
    for (int j = 0; j < N; ++j) {
      if (line.kind == TokenLine::Kind::Row) {
        out[j] = a[static_cast<size_t>(line.token) * T + static_cast<size_t>(P + j)];
      } else if (line.kind == TokenLine::Kind::Column) {
        out[j] = a[static_cast<size_t>(P + j) * T + static_cast<size_t>(line.token)];
      } else {
        double sum = 0.0;
        for (int i = 0; i < T; ++i) sum += a[static_cast<size_t>(i) * T + static_cast<size_t>(P + j)];
        out[j] = static_cast<float>(sum / T);
      }
    }
  }
  return fuse_heads(lines.data(), H, N, sel);
}

MapStats map_statistics(const std::vector<float>& map, int grid_h, int grid_w) {
  if (grid_h <= 0 || grid_w <= 0 || map.size() != static_cast<size_t>(grid_h) * static_cast<size_t>(grid_w))
    throw Error("map_statistics: map of " + std::to_string(map.size()) + " values does not match the grid " +
                std::to_string(grid_h) + "x" + std::to_string(grid_w));
  MapStats s;
  size_t best = 0;
  double sum = 0;
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] > map[best]) best = i;
    sum += map[i];
  }
  s.max = map[best];
  s.argmax_row = static_cast<int>(best / static_cast<size_t>(grid_w));
  s.argmax_col = static_cast<int>(best % static_cast<size_t>(grid_w));
  if (sum > 0 && std::isfinite(sum)) {
    double h = 0;
    for (const float v : map) {
      const double p = v / sum;
      if (p > 0) h -= p * std::log(p);
    }
    s.entropy = h;
    s.entropy_valid = true;
  }
  s.max_over_mean = peak_to_mean(map);
  return s;
}

bool MapStats::flat() const { return is_flat_contrast(max_over_mean); }

}  // namespace attnmap
