#include "model/classify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/error.hpp"
#include "core/names.hpp"

namespace attnmap {

std::vector<double> class_probabilities(const std::vector<float>& logits, ScoreRule rule) {
  if (logits.empty()) throw Error("classifier: no logits");
  double mx = -INFINITY;
  for (float v : logits) {
    if (!std::isfinite(v)) throw Error("classifier: a logit is not finite");
    mx = std::max(mx, static_cast<double>(v));
  }
  std::vector<double> p(logits.size());
  if (rule == ScoreRule::sigmoid) {  // each logit alone; the stable form for either sign
    for (size_t i = 0; i < logits.size(); ++i) {
      const double x = logits[i];
      p[i] = x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
    }
    return p;
  }
  double s = 0;
  for (size_t i = 0; i < logits.size(); ++i) s += p[i] = std::exp(static_cast<double>(logits[i]) - mx);
  for (double& v : p) v /= s;
  return p;
}

std::vector<int> top_k_indices(const std::vector<float>& logits, int k) {
  const std::vector<double> p = class_probabilities(logits);
  std::vector<int> idx(p.size());
  std::iota(idx.begin(), idx.end(), 0);
  const size_t n = std::min(idx.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(n), idx.end(), [&](int a, int b) {
    return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)] || (p[static_cast<size_t>(a)] == p[static_cast<size_t>(b)] && a < b);
  });
  idx.resize(n);
  return idx;
}

std::vector<std::pair<std::string, float>> top_k_classes(const std::vector<float>& logits,
                                                         const std::vector<std::string>& labels, int k,
                                                         ScoreRule rule) {
  const std::vector<double> p = class_probabilities(logits, rule);
  std::vector<std::pair<std::string, float>> out;
  for (const int i : top_k_indices(logits, k)) {
    const size_t u = static_cast<size_t>(i);
    const std::string name = labels.size() == p.size() ? labels[u] : "class " + std::to_string(i);
    out.emplace_back(name, static_cast<float>(p[u]));
  }
  return out;
}

namespace {

// A non-negative decimal integer (no sign, no spaces) below 10^9, or -1.
long parse_count(const std::string& s) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stol(s);
}

}  // namespace

ClassSpec parse_class_spec(const std::string& s) {
  if (s.empty()) throw Error("expects an index, a label, top1 or topK, found ''");
  ClassSpec spec;
  spec.written = s;
  if (const long n = parse_count(s); n >= 0) {
    spec.kind = ClassSpec::Kind::Index;
    spec.index = static_cast<int>(n);
    return spec;
  }
  if (s.size() > 3 && s.compare(0, 3, "top") == 0) {
    const long k = parse_count(s.substr(3));
    if (k < 1) throw Error(s + ": topK needs a whole number K >= 1 (top1, top5)");
    spec.kind = ClassSpec::Kind::TopK;
    spec.k = static_cast<int>(k);
    return spec;
  }
  spec.kind = ClassSpec::Kind::Name;
  spec.name = s;
  return spec;
}

namespace {

// The index of the label spec.name names (exact, else ASCII case folded), or throws: no labels, none, several
// differing only in case, with the nearest label suggested.
int named_class(const ClassSpec& spec, int C, const std::vector<std::string>& labels, bool texts = false) {
  if (labels.size() != static_cast<size_t>(C))
    throw Error("'" + spec.name + "': the weights' config has no class labels; give an index 0.." +
                std::to_string(C - 1) + ", top1 or topK (or the class names: {setting:labels})");
  const long i = find_name(labels, spec.name);
  if (i >= 0) return static_cast<int>(i);
  const std::string what = texts ? "text" : "label";
  if (i == -2) throw Error("'" + spec.name + "' matches several " + what + "s that differ only in case; write it exactly");
  std::string all;
  if (labels.size() <= 30) {
    for (const auto& l : labels) all += (all.empty() ? "" : ", ") + l;
    all = ": " + all;
  } else {
    all = " (one of " + std::to_string(labels.size()) + " " + what + "s)";
  }
  throw Error("'" + spec.name + "' is not one of the " + what + "s" + did_you_mean(labels, spec.name) + all);
}

}  // namespace

void check_class_spec(const ClassSpec& spec, int C, const std::vector<std::string>& labels, bool texts) {
  const std::string range = texts ? " (" + std::to_string(C) + (C == 1 ? " text)" : " texts)")
                                  : " (the classifier has " + std::to_string(C) + " classes)";
  if (spec.kind == ClassSpec::Kind::Index && spec.index >= C)
    throw Error(std::to_string(spec.index) + " out of range: 0.." + std::to_string(C - 1) + range);
  if (spec.kind == ClassSpec::Kind::TopK && spec.k > C)
    throw Error("top" + std::to_string(spec.k) + " asks for more " + (texts ? "texts" : "classes") + " than there are" +
                range);
  if (spec.kind == ClassSpec::Kind::Name) (void)named_class(spec, C, labels, texts);
}

std::vector<int> resolve_classes(const ClassSpec& spec, const std::vector<float>& logits,
                                 const std::vector<std::string>& labels) {
  check_class_spec(spec, static_cast<int>(logits.size()), labels);
  if (spec.kind == ClassSpec::Kind::Index) return {spec.index};
  if (spec.kind == ClassSpec::Kind::Name) return {named_class(spec, static_cast<int>(logits.size()), labels)};
  return top_k_indices(logits, spec.k);
}

std::string class_file_label(int index, const std::vector<std::string>& labels) {
  std::string s = static_cast<size_t>(index) < labels.size() && index >= 0 ? labels[static_cast<size_t>(index)]
                                                                           : std::to_string(index);
  if (s.empty()) s = std::to_string(index);
  for (char& c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (s[0] == '.') s[0] = '_';
  return s;
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
