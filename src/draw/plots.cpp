// plots.cpp - dot plots and histograms with axes (plots.hpp): one frame layout (title, axes, ticks, axis
// titles, legend at the right, a note under the plot) shared by both.
#include "draw/plots.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.hpp"
#include "draw/colormap.hpp"
#include "draw/figures_internal.hpp"
#include "draw/overlay.hpp"
#include "draw/scale.hpp"

namespace attnmap {

using detail::kGrey;
using detail::kInk;

std::vector<Rgb> series_colors(int n) {
  static const Rgb tab10[10] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},  {148, 103, 189},
                                {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
  std::vector<Rgb> c;
  for (int i = 0; i < n; ++i) {
    if (n <= 10) {
      c.push_back(tab10[i]);
      continue;
    }
    const uint8_t* p = colormap_lookup(colormap_table("turbo"), n > 1 ? static_cast<float>(i) / static_cast<float>(n - 1) : 0.0f);
    c.push_back(Rgb{p[0], p[1], p[2]});
  }
  return c;
}

std::vector<double> histogram_edges(double lo, double hi, int n) {
  if (!(hi > lo)) lo -= 0.5, hi += 0.5;
  std::vector<double> e(static_cast<size_t>(n) + 1);
  const double step = (hi - lo) / n;
  for (int i = 0; i <= n; ++i) e[static_cast<size_t>(i)] = lo + i * step;
  e.back() = hi;
  return e;
}

int histogram_bin(const std::vector<double>& edges, double v) {
  const int n = static_cast<int>(edges.size()) - 1;
  if (n < 1 || !(v >= edges.front() && v <= edges.back())) return -1;
  int i = static_cast<int>((v - edges.front()) * n / (edges.back() - edges.front()));
  i = std::clamp(i, 0, n - 1);
  if (v < edges[static_cast<size_t>(i)]) --i;
  else if (i < n - 1 && v >= edges[static_cast<size_t>(i) + 1]) ++i;
  return i;
}

namespace {

/// One axis: its data range, ticks and their labels; log: values and ticks are log10 of counts.
struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  std::vector<std::string> labels;
  std::string exponent;  ///< "×10ⁿ" appended to the axis title, or ""
};

Axis linear_axis(double lo, double hi) {
  Axis a;
  a.lo = lo;
  a.hi = hi > lo ? hi : lo + 1.0;
  a.ticks = nice_ticks(Scale{a.lo, a.hi, ""});
  if (!a.ticks.empty() && a.ticks.back() < a.hi - 1e-9 * (a.hi - a.lo)) {  // end on a tick above the data
    const double step = a.ticks.size() > 1 ? a.ticks[1] - a.ticks[0] : a.hi - a.lo;
    a.ticks.push_back(a.ticks.back() + step);
    a.hi = a.ticks.back();
  }
  int e = 0;
  a.labels = tick_labels(a.ticks, &e);
  a.exponent = exponent_label(e);
  return a;
}

Axis log_count_axis(double max_count) {
  Axis a;
  a.lo = std::log10(0.7);
  a.hi = std::log10(std::max(max_count, 1.0) * 2.0);
  for (int k = 0; k <= static_cast<int>(std::floor(a.hi)); ++k) {
    a.ticks.push_back(k);
    a.labels.push_back(k <= 3 ? std::to_string(static_cast<int>(std::lround(std::pow(10.0, k)))) : "10" + exponent_label(k).substr(std::string("\u00d710").size()));
  }
  return a;
}

/// The frame of a plot: the figure's size, the text sizes and the plot area, from the labels it must hold.
struct Frame {
  int W = 0, H = 0;
  double f = 12, m = 12, tick = 4;
  double x0 = 0, y0 = 0, w = 0, h = 0;  // plot area
  double title_h = 0, legend_w = 0, note_h = 0;
  TextStyle title, label, small;

  double px(const Axis& a, double v) const { return x0 + (v - a.lo) / (a.hi - a.lo) * w; }
  double py(const Axis& a, double v) const { return y0 + h - (v - a.lo) / (a.hi - a.lo) * h; }
};

Frame layout(Canvas& probe, double width_in, double dpi, const std::string& title, const std::string& note,
             const std::vector<std::string>& legend, const Axis& y, double legend_mark) {
  Frame fr;
  fr.W = static_cast<int>(std::lround(width_in * dpi));
  fr.H = static_cast<int>(std::lround(0.62 * fr.W));
  fr.f = dpi * 8.0 / 72.0;  // 8 pt
  fr.m = fr.f;
  fr.tick = std::round(0.35 * fr.f);
  fr.title.px = 1.1 * fr.f;
  fr.title.bold = true;
  fr.title.color = kInk;
  fr.title.width = fr.W - 2 * fr.m;
  fr.title.align = Align::Center;
  fr.label.px = fr.f;
  fr.label.color = kInk;
  fr.small.px = 0.85 * fr.f;
  fr.small.color = kInk;
  fr.title_h = probe.measure(title, fr.title).h;
  for (const std::string& l : legend) fr.legend_w = std::max(fr.legend_w, probe.measure(l, fr.small).w);
  if (!legend.empty()) fr.legend_w += legend_mark + 1.5 * fr.f;
  if (!note.empty()) {
    TextStyle ns = fr.small;
    ns.width = fr.W - 2 * fr.m;
    fr.note_h = probe.measure(note, ns).h + 0.5 * fr.f;
  }
  double ylab_w = 0;
  for (const std::string& l : y.labels) ylab_w = std::max(ylab_w, probe.measure(l, fr.small).w);
  const double line_h = probe.measure("Ag", fr.label).h;
  fr.x0 = fr.m + line_h + 0.5 * fr.f + ylab_w + fr.tick + 0.3 * fr.f;
  fr.y0 = fr.m + fr.title_h + 0.8 * fr.f;
  fr.w = fr.W - fr.x0 - fr.m - fr.legend_w;
  fr.h = fr.H - fr.y0 - fr.m - fr.note_h - (fr.tick + 0.3 * fr.f + probe.measure("Ag", fr.small).h + 0.4 * fr.f + line_h);
  if (fr.w < 4 * fr.f || fr.h < 4 * fr.f) throw Error("plot: the figure is too small for its labels (width " + std::to_string(fr.W) + " pixels)");
  return fr;
}

/// Title, the white page, the y axis (grid lines, ticks, labels, title) and the frame around the plot.
void draw_frame(Canvas& c, const Frame& fr, const std::string& title, const Axis& y, const std::string& y_title) {
  c.fill_rect(0, 0, fr.W, fr.H, Rgb{255, 255, 255});
  c.text(title, fr.m, fr.m, fr.title);
  for (size_t i = 0; i < y.ticks.size(); ++i) {
    const double ty = fr.py(y, y.ticks[i]);
    c.line(fr.x0, ty, fr.x0 + fr.w, ty, Rgb{225, 225, 225}, 1.0);
    c.line(fr.x0 - fr.tick, ty, fr.x0, ty, kInk, 1.0);
    TextStyle ts = fr.small;
    ts.align = Align::Right;
    c.text(y.labels[i], fr.x0 - fr.tick - 0.3 * fr.f, ty - c.measure(y.labels[i], ts).h / 2, ts);
  }
  TextStyle yt = detail::fit(c, y_title + y.exponent, fr.label, fr.h);
  yt.vertical = true;
  yt.align = Align::Center;
  c.text(y_title + y.exponent, fr.m + c.measure("Ag", fr.label).h / 2, fr.y0 + fr.h / 2, yt);
}

/// The x axis title and the note under the plot, the frame, the legend (marks drawn by `mark`).
void draw_x_title_note_legend(Canvas& c, const Frame& fr, const std::string& x_title, const std::string& note,
                              const std::vector<std::string>& legend, const std::function<void(size_t, double, double)>& mark,
                              double mark_w) {
  c.stroke_rect(fr.x0, fr.y0, fr.w, fr.h, kGrey, 1.0);
  const double lab_h = c.measure("Ag", fr.small).h;
  TextStyle xt = fr.label;
  xt.align = Align::Center;
  c.text(x_title, fr.x0 + fr.w / 2, fr.y0 + fr.h + fr.tick + 0.3 * fr.f + lab_h + 0.4 * fr.f, xt);
  if (!note.empty()) {
    TextStyle ns = fr.small;
    ns.width = fr.W - 2 * fr.m;
    c.text(note, fr.m, fr.H - fr.m - fr.note_h + 0.5 * fr.f, ns);
  }
  const double lx = fr.x0 + fr.w + 0.8 * fr.f;
  for (size_t i = 0; i < legend.size(); ++i) {
    const double ly = fr.y0 + static_cast<double>(i) * 1.4 * lab_h;
    mark(i, lx + mark_w / 2, ly + lab_h / 2);
    c.text(legend[i], lx + mark_w + 0.4 * fr.f, ly, fr.small);
  }
}

}  // namespace

std::vector<std::string> write_dot_plot(const std::string& base, const DotPlot& p, double width_in,
                                        const FigureOptions& opt) {
  if (p.categories.empty()) throw Error("dot plot: no categories");
  double ymax = p.y_min;
  std::vector<std::string> legend;
  for (const DotSeries& s : p.series) {
    if (s.x.size() != s.y.size()) throw Error("dot plot: series '" + s.label + "' has " + std::to_string(s.x.size()) + " x and " + std::to_string(s.y.size()) + " y values");
    for (double v : s.y)
      if (std::isfinite(v)) ymax = std::max(ymax, v);
    legend.push_back(s.label);
  }
  Canvas probe(16, 16, opt.dpi, FigureFormat::Png);
  const Axis y = linear_axis(p.y_min, ymax * 1.05);
  const double r = std::max(2.0, opt.dpi * 2.2 / 72.0);  // dots 4.4 pt across
  const Frame fr = layout(probe, width_in, opt.dpi, p.title, p.note, legend, y, 2 * r);
  const size_t n = p.categories.size();
  const Axis x{-0.5, static_cast<double>(n) - 0.5, {}, {}, ""};
  return detail::emit(base, opt, fr.W, fr.H, [&](Canvas& c) {
    draw_frame(c, fr, p.title, y, p.y_label);
    for (size_t k = 0; k < n; ++k) {
      const double tx = fr.px(x, static_cast<double>(k));
      c.line(tx, fr.y0 + fr.h, tx, fr.y0 + fr.h + fr.tick, kInk, 1.0);
      TextStyle ts = fr.small;
      ts.align = Align::Center;
      c.text(p.categories[k], tx, fr.y0 + fr.h + fr.tick + 0.3 * fr.f, ts);
    }
    for (const DotSeries& s : p.series)
      for (size_t i = 0; i < s.x.size(); ++i)
        if (std::isfinite(s.y[i])) c.dot(fr.px(x, s.x[i]), fr.py(y, s.y[i]), r, s.color, kInk, std::max(0.5, r / 5));
    draw_x_title_note_legend(c, fr, p.x_label, p.note, legend,
                             [&](size_t i, double cx, double cy) { c.dot(cx, cy, r, p.series[i].color, kInk, std::max(0.5, r / 5)); }, 2 * r);
  });
}

std::vector<std::string> write_histogram(const std::string& base, const HistogramPlot& p, double width_in,
                                         const FigureOptions& opt) {
  const size_t nb = p.edges.size() < 2 ? 0 : p.edges.size() - 1;
  if (nb == 0) throw Error("histogram: fewer than 2 bin edges");
  if (p.labels.size() != p.layers.size() || p.colors.size() != p.layers.size())
    throw Error("histogram: " + std::to_string(p.layers.size()) + " layers with " + std::to_string(p.labels.size()) + " labels and " + std::to_string(p.colors.size()) + " colours");
  std::vector<double> total(nb, 0.0);
  for (const auto& l : p.layers) {
    if (l.size() != nb) throw Error("histogram: a layer of " + std::to_string(l.size()) + " counts for " + std::to_string(nb) + " bins");
    for (size_t b = 0; b < nb; ++b) total[b] += l[b];
  }
  const double maxc = *std::max_element(total.begin(), total.end());
  const Axis y = p.log_count ? log_count_axis(maxc) : linear_axis(0.0, maxc * 1.05);
  Canvas probe(16, 16, opt.dpi, FigureFormat::Png);
  const double mark = opt.dpi * 7.0 / 72.0;
  const Frame fr = layout(probe, width_in, opt.dpi, p.title, p.note, p.labels, y, mark);
  const Axis x = linear_axis(p.edges.front(), p.edges.back());
  const Axis xd{p.edges.front(), p.edges.back(), {}, {}, ""};  // the bars span the plot's width
  auto yv = [&](double count) { return p.log_count ? std::log10(std::max(count, 0.7)) : count; };
  return detail::emit(base, opt, fr.W, fr.H, [&](Canvas& c) {
    draw_frame(c, fr, p.title, y, p.y_label);
    for (size_t b = 0; b < nb; ++b) {
      double below = 0;
      for (size_t l = 0; l < p.layers.size(); ++l) {
        const double cnt = p.layers[l][b];
        if (cnt <= 0) continue;
        const double top = fr.py(y, yv(below + cnt)), bottom = fr.py(y, yv(below));
        const double left = fr.px(xd, p.edges[b]), right = fr.px(xd, p.edges[b + 1]);
        c.fill_rect(left, top, right - left, bottom - top, p.colors[l]);
        below += cnt;
      }
    }
    for (size_t k = 0; k < x.ticks.size(); ++k) {
      if (x.ticks[k] < xd.lo || x.ticks[k] > xd.hi) continue;
      const double tx = fr.px(xd, x.ticks[k]);
      c.line(tx, fr.y0 + fr.h, tx, fr.y0 + fr.h + fr.tick, kInk, 1.0);
      TextStyle ts = fr.small;
      ts.align = Align::Center;
      c.text(x.labels[k], tx, fr.y0 + fr.h + fr.tick + 0.3 * fr.f, ts);
    }
    draw_x_title_note_legend(c, fr, p.x_label + x.exponent, p.note, p.labels,
                             [&](size_t i, double cx, double cy) { c.fill_rect(cx - mark / 2, cy - mark / 2, mark, mark, p.colors[i]); }, mark);
  });
}

void write_outlier_figure(const std::string& path, const Image& picture, const OutlierFigure& fig, double dpi,
                          const std::string& provenance) {
  using detail::ColorBar;
  using detail::kInk;
  using detail::text_px;
  if (picture.width <= 0 || picture.height <= 0) throw Error("outlier figure: empty picture");
  if (!fig.cmap) throw Error("outlier figure: no colour map");
  Canvas probe(1, 1, dpi, FigureFormat::Png);
  // The layout for a picture of pw x ph: margin m, the title's lines, the picture, the bar at its right.
  struct Layout {
    int f = 0, m = 0, g = 0, title_h = 0, bx = 0, w = 0, h = 0, y0 = 0;
    TextStyle title;
    std::vector<ColorBar> bar;
  };
  auto layout = [&](int pw, int ph) {
    Layout L;
    L.f = text_px(std::min(pw, ph));
    L.m = L.f;
    L.g = L.f / 2;
    L.bar.emplace_back(probe, fig.scale, L.f, ph);
    L.bx = L.m + pw + 2 * L.g;
    L.w = L.bx + static_cast<int>(std::ceil(L.bar[0].width())) + L.m;
    L.title.px = 1.05 * L.f;
    L.title.bold = true;
    L.title.color = kInk;
    L.title.width = L.w - 2 * L.m;
    L.title_h = static_cast<int>(std::ceil(probe.measure(fig.title, L.title).h));
    L.y0 = L.m + L.title_h + std::max(L.g, static_cast<int>(std::ceil(L.bar[0].above())));
    L.h = L.y0 + ph + L.m;
    return L;
  };
  Image scaled;
  const Image* pic = &picture;
  Layout L = layout(pic->width, pic->height);
  for (int tries = 0; (L.w > kMaxCanvas || L.h > kMaxCanvas) && tries < 8; ++tries) {
    const double k = 0.995 * std::min(static_cast<double>(kMaxCanvas) / L.w, static_cast<double>(kMaxCanvas) / L.h);
    scaled = resize_photo(*pic, std::max(1, static_cast<int>(pic->width * k)), std::max(1, static_cast<int>(pic->height * k)));
    pic = &scaled;
    L = layout(pic->width, pic->height);
  }
  Canvas c(L.w, L.h, dpi, FigureFormat::Png);
  c.set_provenance(provenance);
  c.fill_rect(0, 0, L.w, L.h, Rgb{255, 255, 255});
  c.text(fig.title, L.m, L.m, L.title);
  c.image(*pic, L.m, L.y0, pic->width, pic->height, Filter::Nearest);
  const ColorBar& bar = L.bar[0];
  bar.draw(c, fig.cmap, L.bx, L.y0, pic->height);
  const Scale& s = fig.scale;
  if (!s.flat() && fig.threshold >= s.vmin && fig.threshold <= s.vmax) {
    const double ty = L.y0 + pic->height * (1.0 - (fig.threshold - s.vmin) / (s.vmax - s.vmin));
    const double lw = std::max(1.0, std::round(0.15 * L.f));
    c.line(L.bx - lw, ty, L.bx + bar.bar_w() + lw, ty, Rgb{0, 0, 0}, 3 * lw);
    c.line(L.bx - lw, ty, L.bx + bar.bar_w() + lw, ty, Rgb{255, 255, 255}, lw);
  }
  c.save(path);
}

}  // namespace attnmap
