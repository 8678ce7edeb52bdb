// head_stats.cpp - per-head attention statistics and token norms (head_stats.hpp; docs/stats.md).
#include "maps/head_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace attnmap {

std::vector<double> patch_distances(int grid_w, int grid_h, int patch) {
  const int N = grid_w * grid_h;
  std::vector<double> d(static_cast<size_t>(N) * N);  // (N, N)
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      const double dr = i / grid_w - j / grid_w, dc = i % grid_w - j % grid_w;
      d[static_cast<size_t>(i) * N + j] = patch * std::sqrt(dr * dr + dc * dc);
    }
  return d;
}

BlockHeadStats block_head_stats(const float* probs, const TokenLayout& lay, const std::vector<double>& dist) {
  const int H = lay.heads, P = lay.num_prefix, N = lay.patches(), T = lay.tokens();
  if (dist.size() != static_cast<size_t>(N) * N)
    throw Error("attention statistics: the distance matrix has " + std::to_string(dist.size()) + " entries, expected " +
                std::to_string(N) + " x " + std::to_string(N) + " patches");
  BlockHeadStats s;
  s.distance_px.assign(static_cast<size_t>(H), 0.0);
  s.entropy.assign(static_cast<size_t>(H), 0.0);
  for (int h = 0; h < H; ++h) {
    const float* ph = probs + static_cast<size_t>(h) * T * T;  // (T, T)
    double dsum = 0, esum = 0;
    for (int i = 0; i < N; ++i) {
      const float* row = ph + static_cast<size_t>(P + i) * T;  // patch query i: (T) over every key
      const double* drow = &dist[static_cast<size_t>(i) * N];
      double di = 0, ei = 0;
      for (int j = 0; j < N; ++j) di += static_cast<double>(row[P + j]) * drow[j];
      for (int j = 0; j < T; ++j)
        if (row[j] > 0.0f) ei -= static_cast<double>(row[j]) * std::log(static_cast<double>(row[j]));
      dsum += di;
      esum += ei;
    }
    s.distance_px[static_cast<size_t>(h)] = N > 0 ? dsum / N : 0.0;
    s.entropy[static_cast<size_t>(h)] = N > 0 ? esum / N : 0.0;
    if (!lay.class_token) continue;
    const float* cls = ph;  // row 0: the class token's (T)
    s.cls_self.push_back(cls[0]);
    for (int k = 1; k < P; ++k) s.cls_prefix.push_back(cls[k]);
    double patches = 0;
    for (int j = P; j < T; ++j) patches += cls[j];
    s.cls_patches.push_back(patches);
  }
  return s;
}

std::vector<float> token_norms(const float* x, int T, int D) {
  std::vector<float> n(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) {
    double acc = 0;
    for (int c = 0; c < D; ++c) {
      const double v = x[static_cast<size_t>(t) * D + c];
      acc += v * v;
    }
    n[static_cast<size_t>(t)] = static_cast<float>(std::sqrt(acc));
  }
  return n;
}

double median_of(std::vector<double> v) {
  if (v.empty()) throw Error("median of no values");
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(m), v.end());
  const double hi = v[m];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<long>(m));
  return 0.5 * (lo + hi);
}

double outlier_threshold(const std::vector<float>& norms, double k) {
  if (norms.empty()) throw Error("token norms: no patch tokens to find outliers among");
  const std::vector<double> v(norms.begin(), norms.end());
  const double med = median_of(v);
  std::vector<double> dev(v.size());
  for (size_t i = 0; i < v.size(); ++i) dev[i] = std::fabs(v[i] - med);
  return med + k * 1.4826 * median_of(dev);
}

NormSummary summarize_norms(const std::vector<float>& norms, const TokenLayout& lay, int num_registers, double k) {
  const int P = lay.num_prefix;
  const std::vector<float> patches(norms.begin() + P, norms.end());  // (N)
  NormSummary s;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.cls = lay.class_token ? norms[0] : nan;
  s.registers = nan;
  if (num_registers > 0) {
    double acc = 0;
    for (int r = 0; r < num_registers; ++r) acc += norms[static_cast<size_t>(P - num_registers + r)];
    s.registers = acc / num_registers;
  }
  double sum = 0;
  for (float v : patches) sum += v;
  s.patch_mean = patches.empty() ? nan : sum / static_cast<double>(patches.size());
  s.patch_median = median_of(std::vector<double>(patches.begin(), patches.end()));
  s.patch_max = *std::max_element(patches.begin(), patches.end());
  s.threshold = outlier_threshold(patches, k);
  s.outliers = static_cast<int>(std::count_if(patches.begin(), patches.end(), [&](float v) { return v > s.threshold; }));
  return s;
}

std::vector<std::string> prefix_token_names(int num_dist, int num_registers) {
  std::vector<std::string> n;
  for (int i = 0; i < num_dist; ++i) n.push_back(num_dist == 1 ? "dist" : "dist" + std::to_string(i));
  for (int r = 0; r < num_registers; ++r) n.push_back("reg" + std::to_string(r));
  return n;
}

}  // namespace attnmap
