// eval_summary.cpp - the means of an `attnmap eval` run: per view over the images it has a score on (pointing,
// energy, ratios), the baselines, class-specific pointing, the perturbation curves and the sanity correlations.
#include <algorithm>

#include "engine/eval/eval_parts.hpp"

namespace attnmap {
namespace eval {

namespace {

// A view's score on one image is left out: counted, the first reason kept.
void count_undefined(size_t* undefined, std::string* why, const std::string& reason) {
  ++*undefined;
  if (why->empty()) *why = reason;
}

// The baselines of one image on a metric: (name, score), pointing or energy.
std::vector<std::pair<const char*, double>> image_baselines(const ImageEval& ev, bool pointing) {
  if (pointing)
    return {{"centre prior", ev.centre.hit ? 1.0 : 0.0},
            {"brightness", ev.brightness.hit ? 1.0 : 0.0},
            {"random map", ev.random_pointing}};
  return {{"uniform map", ev.area_share}, {"centre prior", ev.centre.energy}, {"brightness", ev.brightness.energy}};
}

// A view's margin over the best baseline on one metric, over the images it has a score on (Margin).
Margin view_margin(const std::vector<ImageEval>& done, size_t v, bool pointing) {
  std::vector<double> view;
  std::vector<std::vector<double>> base;  // [baseline][image]
  std::vector<const char*> names;
  for (const auto& ev : done) {
    const ViewScore& s = ev.views[v];
    if (!s.undefined.empty()) continue;
    view.push_back(pointing ? (s.hit ? 1.0 : 0.0) : s.energy);
    const auto b = image_baselines(ev, pointing);
    base.resize(b.size());
    names.clear();
    for (size_t k = 0; k < b.size(); ++k) {
      base[k].push_back(b[k].second);
      names.push_back(b[k].first);
    }
  }
  Margin m;
  if (view.empty()) return m;
  m.beats_all = true;
  double best = -1;
  for (size_t k = 0; k < base.size(); ++k) {
    std::vector<double> d(view.size());
    double mean = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      d[i] = view[i] - base[k][i];
      mean += base[k][i];
    }
    const Interval ci = bootstrap_interval(d, kBootstrapResamples, kBootstrapSeed, kBootstrapLevel);
    m.beats_all = m.beats_all && ci.lo > 0;
    mean /= static_cast<double>(d.size());
    if (mean > best) {
      best = mean;
      m.baseline = names[k];
      m.ci = ci;
      m.value = 0;
      for (double x : d) m.value += x;
      m.value /= static_cast<double>(d.size());
    }
  }
  return m;
}

// One view's Row over the images it has a score on.
Row view_row(const std::vector<ImageEval>& done, size_t v) {
  Row r;
  double area = 0;
  for (const auto& ev : done) {
    const ViewScore& s = ev.views[v];
    if (!s.undefined.empty()) {
      count_undefined(&r.undefined, &r.why, s.undefined);
      continue;
    }
    ++r.n;
    area += ev.area_share;
    r.pointing += s.hit ? 1.0 : 0.0;
    r.energy += s.energy;
    r.ratio_img += s.energy / ev.area_share;
  }
  if (!r.n) return r;
  const double n = static_cast<double>(r.n);
  r.pointing /= n;
  r.energy /= n;
  r.ratio_img /= n;
  r.ratio = r.energy / (area / n);
  r.pointing_margin = view_margin(done, v, true);
  r.energy_margin = view_margin(done, v, false);
  std::vector<double> peaks;
  for (const auto& ev : done)
    if (ev.views[v].undefined.empty() && ev.views[v].peak > 0) peaks.push_back(ev.views[v].peak);
  r.peak = peaks.empty() ? 0 : median(peaks);
  r.flat = r.peak > 0 && r.peak < kFlatPeakToMean;
  return r;
}

// One image's items into the class rows (per view over the items whose map has a score; an image counts
// for "all items" when every item's map has one) and the centre prior's row.
void add_items(const ImageEval& ev, Summary& s) {
  const size_t V = s.class_rows.size();
  ++s.item_images;
  std::vector<bool> all(V, true), whole(V, true);
  bool centre_all = true;
  for (const ItemScore& it : ev.items) {
    ++s.items;
    for (size_t v = 0; v < V; ++v) {
      ClassRow& r = s.class_rows[v];
      if (!it.undefined[v].empty()) {
        count_undefined(&r.undefined, &r.why, it.undefined[v]);
        whole[v] = false;
        continue;
      }
      ++r.items;
      r.asked += it.asked[v];
      r.other += it.other[v];
      all[v] = all[v] && it.asked[v];
    }
    s.centre_class.asked += it.centre_asked;
    s.centre_class.other += it.centre_other;
    centre_all = centre_all && it.centre_asked;
    s.random_asked += it.area_share;
  }
  for (size_t v = 0; v < V; ++v)
    if (whole[v]) {
      ++s.class_rows[v].images;
      s.class_rows[v].all += all[v];
    }
  s.centre_class.all += centre_all;
}

// One image's perturbation curves and sanity correlations into s (views undefined on it left out).
void add_perturbation_and_sanity(const ImageEval& ev, Summary& s) {
  const size_t V = s.pos.size();
  if (ev.perturbation) {
    ++s.perturbed;
    s.forwards += ev.perturbation->forwards;
    for (size_t v = 0; v < V; ++v) {
      if (ev.perturbation->positive[v].empty()) continue;
      ++s.perturbed_n[v];
      for (size_t i = 0; i < 10; ++i) {
        s.pos[v][i] += ev.perturbation->positive[v][i];
        s.neg[v][i] += ev.perturbation->negative[v][i];
      }
    }
    for (size_t i = 0; i < 10; ++i) s.random[i] += ev.perturbation->random[i];
  }
  if (!ev.sanity.empty()) {
    ++s.sanity_n;
    for (size_t v = 0; v < V; ++v) {
      if (!ev.views[v].undefined.empty()) continue;
      ++s.sanity_views_n[v];
      for (size_t k = 0; k < s.rho.size(); ++k) s.rho[k][v] += ev.sanity[k][v];
    }
  }
}

// Adds each image's class-specific pointing, perturbation curves and sanity correlations into s, as means.
void summarise_faithfulness(const EvalContext& ctx, const std::vector<ImageEval>& done, Summary& s) {
  const size_t V = ctx.views.size();
  s.class_rows.assign(V, {});
  s.pos.assign(V, std::vector<double>(10, 0.0));
  s.neg = s.pos;
  s.perturbed_n.assign(V, 0);
  s.sanity_views_n.assign(V, 0);
  s.random.assign(10, 0.0);
  s.rho.assign(ctx.randomised.size(), std::vector<double>(V, 0.0));
  for (const ImageEval& ev : done) {
    if (!ev.items.empty()) add_items(ev, s);
    s.perturb_secs += ev.perturb_secs;
    s.perturb_cpu += ev.perturb_cpu;
    s.sanity_secs += ev.sanity_secs;
    add_perturbation_and_sanity(ev, s);
  }
  auto per = [](size_t n) { return static_cast<double>(std::max<size_t>(n, 1)); };
  const double ni = per(s.items), nm = per(s.item_images);
  s.centre_class.asked /= ni;
  s.centre_class.other /= ni;
  s.centre_class.all /= nm;
  for (ClassRow& r : s.class_rows) {
    r.asked /= per(r.items);
    r.other /= per(r.items);
    r.all /= per(r.images);
  }
  s.random_asked /= ni;
  for (size_t v = 0; v < V; ++v)
    for (auto* c : {&s.pos[v], &s.neg[v]})
      for (double& x : *c) x /= per(s.perturbed_n[v]);
  for (double& x : s.random) x /= per(s.perturbed);
  for (auto& row : s.rho)
    for (size_t v = 0; v < V; ++v) row[v] /= per(s.sanity_views_n[v]);
}

}  // namespace

double best_pointing_baseline(const Summary& s) {
  return std::max({s.centre.pointing, s.bright.pointing, s.random_pointing});
}
double best_energy_baseline(const Summary& s) { return std::max({s.area, s.centre.energy, s.bright.energy}); }
std::string best_pointing_baseline_name(const Summary& s) {
  const double b = best_pointing_baseline(s);
  return b == s.centre.pointing ? "centre prior" : b == s.bright.pointing ? "brightness" : "random map";
}
std::string best_energy_baseline_name(const Summary& s) {
  const double b = best_energy_baseline(s);
  return b == s.area ? "uniform map" : b == s.centre.energy ? "centre prior" : "brightness";
}

std::optional<size_t> best_pointing_view(const Summary& s) {
  std::optional<size_t> best;
  for (size_t v = 0; v < s.rows.size(); ++v) {
    const Row& r = s.rows[v];
    if (!r.n || !r.pointing_margin.beats_all) continue;
    const Row* b = best ? &s.rows[*best] : nullptr;
    if (!b || r.pointing > b->pointing || (r.pointing == b->pointing && r.energy > b->energy)) best = v;
  }
  return best;
}
std::optional<size_t> best_energy_view(const Summary& s) {
  std::optional<size_t> best;
  for (size_t v = 0; v < s.rows.size(); ++v)
    if (s.rows[v].n && s.rows[v].energy_margin.beats_all && (!best || s.rows[v].energy > s.rows[*best].energy)) best = v;
  return best;
}
double best_asked_baseline(const Summary& s) { return std::max(s.centre_class.asked, s.random_asked); }

Summary summarise(const EvalContext& ctx, const std::vector<ImageEval>& done) {
  Summary s;
  s.n = done.size();
  const size_t n = s.n;
  for (const auto& ev : done) {
    s.area += ev.area_share;
    s.centre.pointing += ev.centre.hit ? 1.0 : 0.0;
    s.centre.energy += ev.centre.energy;
    s.bright.pointing += ev.brightness.hit ? 1.0 : 0.0;
    s.bright.energy += ev.brightness.energy;
    s.random_pointing += ev.random_pointing;
    if (ev.truth && ev.predicted) {
      ++s.labelled;
      s.correct += *ev.truth == *ev.predicted;
    }
  }
  if (n) {
    s.area /= static_cast<double>(n);
    s.centre.pointing /= static_cast<double>(n);
    s.centre.energy /= static_cast<double>(n);
    s.centre.ratio = s.centre.energy / s.area;
    s.random_pointing /= static_cast<double>(n);
    s.centre.n = n;
    s.bright.pointing /= static_cast<double>(n);
    s.bright.energy /= static_cast<double>(n);
    s.bright.ratio = s.bright.energy / s.area;
    s.bright.n = n;
  }
  for (size_t v = 0; v < ctx.views.size(); ++v) s.rows.push_back(view_row(done, v));
  summarise_faithfulness(ctx, done, s);
  return s;
}

}  // namespace eval
}  // namespace attnmap
