#include "model/classify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/error.hpp"

namespace attnmap {

std::vector<double> class_probabilities(const std::vector<float>& logits) {
  if (logits.empty()) throw Error("classifier: no logits");
  double mx = -INFINITY;
  for (float v : logits) {
    if (!std::isfinite(v)) throw Error("classifier: a logit is not finite");
    mx = std::max(mx, static_cast<double>(v));
  }
  std::vector<double> p(logits.size());
  double s = 0;
  for (size_t i = 0; i < logits.size(); ++i) s += p[i] = std::exp(static_cast<double>(logits[i]) - mx);
  for (double& v : p) v /= s;
  return p;
}

std::vector<std::pair<std::string, float>> top_k_classes(const std::vector<float>& logits,
                                                         const std::vector<std::string>& labels, int k) {
  const std::vector<double> p = class_probabilities(logits);
  std::vector<size_t> idx(p.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  const size_t n = std::min(idx.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(n), idx.end(),
                    [&](size_t a, size_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  std::vector<std::pair<std::string, float>> out;
  for (size_t j = 0; j < n; ++j) {
    const size_t i = idx[j];
    const std::string name = labels.size() == p.size() ? labels[i] : "class " + std::to_string(i);
    out.emplace_back(name, static_cast<float>(p[i]));
  }
  return out;
}

std::string format_top_k(const std::vector<std::pair<std::string, float>>& top) {
  std::string s;
  for (const auto& [name, prob] : top) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %.1f%%", 100.0 * static_cast<double>(prob));
    s += (s.empty() ? "" : ", ") + name + buf;
  }
  return s;
}

}  // namespace attnmap
