#include "draw/scale.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"

namespace attnmap {

bool Scale::flat() const {
  const double range = vmax - vmin;
  const double mag = std::max(std::fabs(vmin), std::fabs(vmax));
  return !(range > 1e-12 * mag) || !std::isfinite(range);
}

ScaleSpec parse_scale(const std::string& s) {
  ScaleSpec spec;
  if (s == "map") return spec;
  if (s == "figure") {
    spec.kind = ScaleKind::Figure;
    return spec;
  }
  if (s == "run") {
    spec.kind = ScaleKind::Run;
    return spec;
  }
  const auto comma = s.find(',');
  const std::string bad = "expects map, figure, run or VMIN,VMAX (e.g. 0,0.05), found '" + s + "'";
  if (comma == std::string::npos) throw Error(bad);
  auto number = [&](const std::string& t) {
    if (t.empty()) throw Error(bad);
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size() || !std::isfinite(v)) throw Error(bad);
    return v;
  };
  spec.kind = ScaleKind::Fixed;
  spec.vmin = number(s.substr(0, comma));
  spec.vmax = number(s.substr(comma + 1));
  if (!(spec.vmin < spec.vmax)) throw Error(s + ": VMIN must be below VMAX");
  return spec;
}

Scale scale_over(const std::vector<const std::vector<float>*>& maps, const std::string& units) {
  double mn = INFINITY, mx = -INFINITY;
  for (const auto* m : maps)
    for (float v : *m)
      if (std::isfinite(v)) {
        mn = std::min(mn, static_cast<double>(v));
        mx = std::max(mx, static_cast<double>(v));
      }
  Scale s;
  s.units = units;
  if (mn <= mx) {
    s.vmin = mn;
    s.vmax = mx;
  }
  return s;
}

double percentile_over(const std::vector<const std::vector<float>*>& maps, double q) {
  std::vector<float> v;
  for (const auto* m : maps)
    for (float x : *m)
      if (std::isfinite(x)) v.push_back(x);
  if (v.empty()) return NAN;
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(lo), v.end());
  const double a = v[lo];
  const double b = hi == lo ? a : *std::min_element(v.begin() + static_cast<long>(lo) + 1, v.end());
  return a + (rank - static_cast<double>(lo)) * (b - a);
}

Scale robust_scale_over(const std::vector<const std::vector<float>*>& maps, const std::string& units) {
  Scale s = scale_over(maps, units);
  const double top = percentile_over(maps, kRunScalePercentile);
  if (std::isfinite(top) && top > s.vmin && top < s.vmax) {
    Scale r = s;
    r.vmax = top;
    if (!r.flat()) {
      r.clip_max = true;
      return r;
    }
  }
  return s;
}

size_t maps_peaking_below(const std::vector<const std::vector<float>*>& maps, const Scale& s, double fraction) {
  if (s.flat()) return 0;
  const double cut = s.vmin + fraction * (s.vmax - s.vmin);
  size_t n = 0;
  for (const auto* m : maps) {
    double mx = -INFINITY;
    for (float x : *m)
      if (std::isfinite(x)) mx = std::max(mx, static_cast<double>(x));
    if (mx < cut) ++n;
  }
  return n;
}

ClipStats clip_stats(const std::vector<const std::vector<float>*>& maps, const Scale& s) {
  ClipStats st;
  double mx = -INFINITY;
  for (const auto* m : maps)
    for (float v : *m)
      if (std::isfinite(v)) {
        ++st.values;
        mx = std::max(mx, static_cast<double>(v));
        st.above += static_cast<double>(v) > s.vmax;
      }
  if (st.values) st.data_max = mx;
  return st;
}

std::string over_range_label(double vmax, int exponent, int decimals) {
  const double v = vmax / std::pow(10.0, exponent);
  int dec = std::max(0, decimals);
  if (v != 0.0 && std::isfinite(v)) dec = std::max(dec, 1 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  dec = std::min(dec, 12);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", dec, v);
  std::string l = buf;
  if (l[0] == '-') l = "\u2212" + l.substr(1);
  return l + "+";
}

Scale resolve_scale(const ScaleSpec& spec, const std::vector<float>& map, const Scale& shared) {
  Scale s = shared;
  if (spec.kind == ScaleKind::Fixed) {
    s.vmin = spec.vmin;
    s.vmax = spec.vmax;
  } else if (spec.kind == ScaleKind::Map) {
    s = scale_over({&map}, shared.units);
  }
  return s;
}

std::vector<float> apply_scale(const std::vector<float>& map, const Scale& s) {
  std::vector<float> out(map.size(), 0.0f);
  if (s.flat()) return out;
  const double range = s.vmax - s.vmin;
  for (size_t i = 0; i < map.size(); ++i) {
    const float v = static_cast<float>((map[i] - s.vmin) / range);  // normalize_minmax's expression
    out[i] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : (v == v ? v : 0.0f));
  }
  return out;
}

namespace {
std::vector<double> ticks_at(double lo, double hi, double step) {
  std::vector<double> t;
  const double eps = 1e-9 * step;
  const double first = std::ceil((lo - eps) / step);
  const double last = std::floor((hi + eps) / step);
  for (double k = first; k <= last && t.size() < 1000; k += 1.0) {
    const double v = k * step;
    t.push_back(std::fabs(v) < eps ? 0.0 : v);
  }
  return t;
}
}  // namespace

std::vector<double> nice_ticks(const Scale& s) {
  if (s.flat()) return {s.vmin};
  const double range = s.vmax - s.vmin;
  const double mag = std::pow(10.0, std::floor(std::log10(range)) - 2);
  static const double kSteps[] = {1.0, 2.0, 2.5, 5.0};
  std::vector<double> best;
  int best_miss = 1 << 30;
  // Steps from range/1000 upward; the first (smallest) step with <= 7 ticks and >= 4 wins; otherwise the
  // one whose count is nearest to 4..7.
  for (int decade = 0; decade < 5; ++decade)
    for (double m : kSteps) {
      const double step = m * mag * std::pow(10.0, decade);
      std::vector<double> t = ticks_at(s.vmin, s.vmax, step);
      const int n = static_cast<int>(t.size());
      const int miss = n < 4 ? 4 - n : (n > 7 ? n - 7 : 0);
      if (miss == 0) return t;
      if (miss < best_miss) {
        best_miss = miss;
        best = std::move(t);
      }
    }
  return best;
}

std::vector<std::vector<double>> sparser_ticks(const Scale& s) {
  std::vector<std::vector<double>> out{nice_ticks(s)};
  if (out[0].size() < 2) return out;
  const double step0 = out[0][1] - out[0][0], range = s.vmax - s.vmin;
  static const double kSteps[] = {1.0, 2.0, 2.5, 5.0};
  const double mag = std::pow(10.0, std::floor(std::log10(step0)));
  for (int decade = 0; decade < 4; ++decade)
    for (double m : kSteps) {
      const double step = m * mag * std::pow(10.0, decade);
      if (step <= step0 * (1.0 + 1e-9) || step > range * (1.0 + 1e-9)) continue;
      std::vector<double> t = ticks_at(s.vmin, s.vmax, step);
      if (t.size() >= 2) out.push_back(std::move(t));
    }
  return out;
}

std::vector<std::string> tick_labels(const std::vector<double>& ticks, int* exponent) {
  double big = 0.0;
  for (double t : ticks) big = std::max(big, std::fabs(t));
  int e = 0;
  if (big > 0.0 && (big < 1e-2 || big >= 1e4)) e = static_cast<int>(std::floor(std::log10(big)));
  *exponent = e;
  const double unit = std::pow(10.0, e);
  int decimals = 0;
  for (; decimals < 10; ++decimals) {
    const double f = std::pow(10.0, decimals);
    bool exact = true;
    for (double t : ticks) {
      const double v = t / unit * f;
      if (std::fabs(v - std::round(v)) > 1e-6 * std::max(1.0, std::fabs(v))) exact = false;
    }
    if (exact) break;
  }
  std::vector<std::string> out;
  for (double t : ticks) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, t / unit);
    std::string l = buf;
    if (l[0] == '-' && l.find_first_not_of("-0.") == std::string::npos) l.erase(0, 1);  // no "-0.00"
    if (l[0] == '-') l = "\u2212" + l.substr(1);  // a real minus sign, as matplotlib
    out.push_back(l);
  }
  return out;
}

std::string exponent_label(int e) {
  if (e == 0) return "";
  static const char* kDigits[] = {"\u2070", "\u00b9", "\u00b2", "\u00b3", "\u2074",
                                  "\u2075", "\u2076", "\u2077", "\u2078", "\u2079"};
  std::string out = "\u00d710";
  if (e < 0) out += "\u207b";
  const std::string digits = std::to_string(std::abs(e));
  for (char c : digits) out += kDigits[c - '0'];
  return out;
}

}  // namespace attnmap
