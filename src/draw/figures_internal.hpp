// figures_internal.hpp - what the figure kinds share (figures.cpp, figures_comparison.cpp, figures_sheet.cpp):
// the ink colours, the text size, fitting a label, the vertical colour bar, writing a figure once per format.
// Internal to draw/.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "draw/canvas.hpp"
#include "draw/figures.hpp"
#include "draw/scale.hpp"

namespace attnmap {
namespace detail {

inline const Rgb kInk{20, 20, 20};
inline const Rgb kGrey{90, 90, 90};

/// The text size of a figure whose pictures are about `cell` pixels on their shorter side.
int text_px(int cell);

/// `text` one line in at most `width` pixels: the style's size, shrunk down to 70 % first (never below
/// `min_px`: a figure of a physical width keeps 7 pt), then ellipsized.
TextStyle fit(Canvas& c, const std::string& text, TextStyle ts, double width, double min_px = 0.0);

/// The style wrapped at word boundaries (a word longer than the line at characters) in a box `width` pixels
/// wide, centred: a long label takes more lines at its size rather than shrinking or losing characters.
TextStyle wrapped(TextStyle ts, double width);

/// `text` one line at the style's size in at most `width` pixels: ellipsized when longer.
TextStyle shortened(Canvas& c, const std::string& text, TextStyle ts, double width);

/// Where a label was drawn: its box in pixels, [x0, x1) x [y0, y1).
struct TextBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

/// True when two boxes share more than `slack` pixels in both directions.
inline bool overlap(const TextBox& a, const TextBox& b, double slack = 0.0) {
  return std::min(a.x1, b.x1) - std::max(a.x0, b.x0) > slack && std::min(a.y1, b.y1) - std::max(a.y0, b.y0) > slack;
}

/// How many decimals a tick label has ("0.05": 2, "10": 0).
inline int label_decimals(const std::string& label) {
  const size_t dot = label.find('.');
  return dot == std::string::npos ? 0 : static_cast<int>(label.size() - dot - 1);
}

/// The width of the widest space-separated word of `text` in style `ts` (what whole-word wrapping needs).
inline double widest_word(Canvas& c, const std::string& text, const TextStyle& ts) {
  double word = 0;
  for (size_t from = 0; from <= text.size();) {
    const size_t sp = std::min(text.find(' ', from), text.size());
    if (sp > from) word = std::max(word, c.measure(text.substr(from, sp - from), ts).w);
    from = sp + 1;
  }
  return word;
}

/// Tick sets from dense to sparse (sparser_ticks and every 2nd, 3rd, ... tick of the densest set, by their
/// step; then the first tick alone) and their labels, all in one exponent and none wider than the densest
/// set's widest label (that width is what a layout reserves): a bar
/// picks the first set whose labels are far enough apart at its length (pick), as matplotlib's MaxNLocator
/// fits the tick count to the axis by the labels' size.
struct TickSets {
  std::vector<std::vector<double>> ticks;
  std::vector<std::vector<std::string>> labels;
  std::string exponent;
  int power = 0;  ///< the labels are in units of 10^power (exponent: its "×10⁻³", "" for 0)
  double label_w = 0, label_h = 0;

  TickSets() = default;
  TickSets(Canvas& c, const Scale& s, const TextStyle& ts) {
    int e0 = 0;
    for (std::vector<double>& t : sparser_ticks(s)) {
      int e = 0;
      std::vector<std::string> l = tick_labels(t, &e);
      if (ticks.empty()) {
        e0 = e;
        if (s.flat() && !l.empty()) l[0] += " (flat)";
      }
      double w = 0, h = 0;
      for (const auto& x : l) {
        const TextSize sz = c.measure(x, ts);
        w = std::max(w, sz.w);
        h = std::max(h, sz.h);
      }
      if (!ticks.empty() && (e != e0 || w > label_w + 0.01)) continue;  // another exponent, or wider labels
      if (ticks.empty()) label_w = w, label_h = h;
      ticks.push_back(std::move(t));
      labels.push_back(std::move(l));
    }
    exponent = exponent_label(e0);
    power = e0;
    if (ticks[0].size() < 2) return;
    // Every 2nd, 3rd, ... tick of the densest set (its labels as they are), then all in order of their step:
    // the nice sets first where steps tie. The last resort of a bar too short for two labels: the first tick.
    for (size_t stride = 2; stride < ticks[0].size(); ++stride) {
      std::vector<double> t;
      std::vector<std::string> l;
      for (size_t i = 0; i < ticks[0].size(); i += stride) t.push_back(ticks[0][i]), l.push_back(labels[0][i]);
      ticks.push_back(std::move(t));
      labels.push_back(std::move(l));
    }
    std::vector<size_t> order(ticks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return ticks[a][1] - ticks[a][0] < (ticks[b][1] - ticks[b][0]) * (1.0 - 1e-9);
    });
    std::vector<std::vector<double>> t2;
    std::vector<std::vector<std::string>> l2;
    for (size_t i : order) t2.push_back(ticks[i]), l2.push_back(labels[i]);
    t2.push_back({ticks[0].front()});
    l2.push_back({labels[0].front()});
    ticks = std::move(t2);
    labels = std::move(l2);
  }
  /// The first set whose neighbouring ticks are >= `need` pixels apart on an axis `length` pixels long for
  /// the scale's range (the sparsest when none is).
  size_t pick(const Scale& s, double length, double need) const {
    for (size_t k = 0; k < ticks.size(); ++k) {
      if (ticks[k].size() < 2 || s.flat()) return k;
      if (length * (ticks[k][1] - ticks[k][0]) / (s.vmax - s.vmin) >= need) return k;
    }
    return ticks.size() - 1;
  }
};

/// The colour bar: a vertical gradient `f` wide (top = vmax), ticks with labels to its right, the common
/// exponent above it and the units written upward beside the labels. Every label is at the tick size: the
/// units wrap onto a second line (at word boundaries) when longer than the bar, and the ticks thin out
/// (TickSets) when their labels would touch. A bar that allows it (`units_may_go_below`, the panel's) whose
/// units would take more than two lines upward, or break a word, writes them across under the bar instead,
/// wrapped at word boundaries to the bar's column (widened to the longest word). A bar whose scale clips
/// (Scale::clip_max) draws matplotlib's extend='max' triangle above its top and, beside it, the top's value
/// with "+" (over_range_label: "0.076+"), hiding a tick label it would touch.
struct ColorBar {
  Scale scale;
  TickSets sets;
  std::string exponent;
  std::string top_label;  ///< scale.clip_max: "0.076+" beside the triangle; "" otherwise
  double f = 12, label_w = 0, units_h = 0;
  bool units_below = false;
  double units_col_w = 0, units_below_h = 0;  ///< units_below: the units' box under the bar

  /// `length`: the bar's height when the layout knows it (the units are then wrapped to it), else 0 (one line).
  ColorBar(Canvas& c, const Scale& s, double px, double length = 0.0, bool units_may_go_below = false)
      : scale(s), f(px) {
    sets = TickSets(c, s, tick_style());
    exponent = sets.exponent;
    label_w = sets.label_w;
    if (s.clip_max && !s.flat()) {
      top_label = over_range_label(s.vmax, sets.power, label_decimals(sets.labels[0].front()));
      label_w = std::max(label_w, c.measure(top_label, tick_style()).w);
    }
    if (s.units.empty()) return;
    units_h = c.measure(s.units, units_style(length)).h;
    if (!units_may_go_below || length <= 0.0) return;
    double word = 0;  // the longest word of the units
    for (size_t from = 0; from <= s.units.size();) {
      const size_t sp = std::min(s.units.find(' ', from), s.units.size());
      word = std::max(word, c.measure(s.units.substr(from, sp - from), tick_style()).w);
      from = sp + 1;
    }
    if (word <= length && units_h <= 2.2 * c.measure("0", tick_style()).h) return;
    put_units_below(c);
  }
  /// Writes the units across under the bar, wrapped to the bar's column (widened to the longest word) - also
  /// for a bar whose units would fit upward, so that every bar of a figure places them alike.
  void put_units_below(Canvas& c) {
    if (units_below || scale.units.empty()) return;
    double word = 0;  // the longest word of the units
    for (size_t from = 0; from <= scale.units.size();) {
      const size_t sp = std::min(scale.units.find(' ', from), scale.units.size());
      word = std::max(word, c.measure(scale.units.substr(from, sp - from), tick_style()).w);
      from = sp + 1;
    }
    units_below = true;
    units_h = 0;
    units_col_w = std::max(bar_w() + tick_len() + 0.3 * f + label_w, std::ceil(word));
    TextStyle t = tick_style();
    t.width = units_col_w;
    units_below_h = c.measure(scale.units, t).h;
  }
  TextStyle tick_style() const {
    TextStyle t;
    t.px = 0.85 * f;
    t.color = kInk;
    return t;
  }
  /// The units' style along a bar `length` long: the tick size, wrapped at the length (0: one line).
  TextStyle units_style(double length = 0.0) const {
    TextStyle t = tick_style();
    t.width = length;
    return t;
  }
  double bar_w() const { return f; }
  double tick_len() const { return std::round(0.35 * f); }
  double width() const {
    if (units_below) return units_col_w;
    return bar_w() + tick_len() + 0.3 * f + label_w + (units_h > 0 ? 0.4 * f + units_h : 0.0);
  }
  /// Room the bar needs below its bottom beyond half a label: the units when they are written under it.
  double below() const { return units_below ? 0.5 * sets.label_h + 0.3 * f + units_below_h : 0.0; }
  /// The ticks drawn on a bar `h` high: the densest set whose labels keep a fifth of a line apart.
  size_t tick_set(double h) const { return sets.pick(scale, h, 1.2 * sets.label_h); }
  /// A label as draw(c, ..., x, y, h) sets it: its text and box.
  struct Placed {
    std::string text;
    TextBox box;
  };
  /// The labels drawn on the bar at (x, y), h high, in the scale's order (bottom to top): the tick labels of
  /// tick_set(h), each centred on its tick, but for those the top label would touch, then the top label
  /// (clip_max), centred on the extend triangle.
  std::vector<Placed> placed_labels(Canvas& c, double x, double y, double h) const {
    std::vector<Placed> out;
    const size_t k = tick_set(h);
    const double lx = x + bar_w() + tick_len() + 0.3 * f;
    TextBox top{0, -1e300, 0, -1e300};
    if (!top_label.empty()) {
      const TextSize t = c.measure(top_label, tick_style());
      const double cy = y - extend_h() / 2;
      top = TextBox{lx, cy - t.h / 2, lx + t.w, cy + t.h / 2};
    }
    for (size_t i = 0; i < sets.ticks[k].size(); ++i) {
      const double ty = tick_y(sets.ticks[k][i], y, h);
      const TextSize t = c.measure(sets.labels[k][i], tick_style());
      const TextBox b{lx, ty - t.h / 2, lx + t.w, ty + t.h / 2};
      if (b.y0 < top.y1 + 0.2 * sets.label_h) continue;  // the top label's place
      out.push_back(Placed{sets.labels[k][i], b});
    }
    if (!top_label.empty()) out.push_back(Placed{top_label, top});
    return out;
  }
  /// The labels' boxes (placed_labels), for the tests.
  std::vector<TextBox> label_boxes(Canvas& c, double x, double y, double h) const {
    std::vector<TextBox> out;
    for (const Placed& p : placed_labels(c, x, y, h)) out.push_back(p.box);
    return out;
  }
  /// Where value v lies on a bar drawn at y, h high.
  double tick_y(double v, double y, double h) const {
    const double frac = scale.flat() ? 0.0 : (v - scale.vmin) / (scale.vmax - scale.vmin);
    return y + h * (1.0 - frac);
  }
  void draw(Canvas& c, const uint8_t* cmap, double x, double y, double h) const {
    Image grad;
    grad.width = 1;
    grad.height = 256;
    for (int i = 255; i >= 0; --i) {
      const uint8_t* p = cmap + 3 * i;
      grad.rgb.insert(grad.rgb.end(), p, p + 3);
    }
    if (scale.flat())  // every value is drawn in the first colour
      for (int i = 0; i < 256; ++i) std::copy_n(cmap, 3, &grad.rgb[static_cast<size_t>(i) * 3]);
    c.image(grad, x, y, bar_w(), h, Filter::Nearest);
    c.stroke_rect(x, y, bar_w(), h, kGrey, 1.0);
    if (scale.clip_max && !scale.flat()) {  // matplotlib's extend='max': values above vmax in the top colour
      const uint8_t* top = cmap + 3 * 255;
      c.polygon({x, y, x + bar_w(), y, x + bar_w() / 2, y - extend_h()}, Rgb{top[0], top[1], top[2]}, kGrey, 1.0);
    }
    const TextStyle ts = tick_style();
    const size_t k = tick_set(h);
    for (const double t : sets.ticks[k]) c.line(x + bar_w(), tick_y(t, y, h), x + bar_w() + tick_len(), tick_y(t, y, h), kInk, 1.0);
    for (const Placed& p : placed_labels(c, x, y, h)) c.text(p.text, p.box.x0, p.box.y0, ts);
    if (!exponent.empty()) {
      const double eh = c.measure(exponent, ts).h;
      c.text(exponent, x, y - eh - 0.5 * f - extend_h(), ts);
    }
    if (units_below) {
      TextStyle t = tick_style();
      t.width = units_col_w;
      c.text(scale.units, x, y + h + 0.5 * sets.label_h + 0.3 * f, t);
    }
    if (units_h > 0) {  // written upward along the bar, wrapped to its height; shortened past the lines reserved
      TextStyle us = units_style(h);
      us.vertical = true;
      us.align = Align::Center;
      if (c.measure(scale.units, us).h > units_h + 0.5) us.ellipsize = true;
      c.text(scale.units, x + bar_w() + tick_len() + 0.7 * f + label_w + units_h / 2, y + h / 2, us);
    }
  }
  /// Room the bar needs above its top (the exponent, half a label) and below its bottom (half a label).
  double above() const { return (exponent.empty() ? 0.6 * f : 1.9 * f) + extend_h(); }
  /// The "extend" triangle's height above the bar (scale.clip_max), 0 without one.
  double extend_h() const { return scale.clip_max && !scale.flat() ? std::round(0.9 * f) : 0.0; }
};

/// A horizontal colour bar `width` pixels wide (`attnmap figure`, under a run of columns): the gradient from
/// vmin (left) to vmax (right), a tick mark at every nice tick (the contour levels), labels under them (only
/// those at a coarser nice step when they would touch in a narrow bar), the units - and the common exponent,
/// "(×10⁻³)" - centred under the labels. Every label is at the tick size and inside the bar's extent: an end
/// label that would hang past the bar's end is moved in (matplotlib keeps tick labels inside the axes'
/// bounding box), the units wrap at whole words onto more lines rather than shrink (their box the bar's
/// width, widened to their longest word: units_w). A bar whose scale clips (Scale::clip_max) ends in
/// matplotlib's extend='max' triangle (the last thick() pixels of the width) with the top's value and "+"
/// under its tip (over_range_label: "0.076+"); tick labels it would touch are left out.
struct HBar {
  Scale scale;
  std::vector<double> ticks;
  std::vector<std::string> labels;
  std::string units;
  std::string top_label;  ///< scale.clip_max: "0.076+" at the right end; "" otherwise
  double f = 12, w = 0, label_h = 0, units_h = 0;
  double units_w = 0;       ///< the units' wrapping box, centred under the bar: max(w, their longest word)
  std::vector<bool> shown;  ///< which ticks are labelled

  HBar(Canvas& c, const Scale& s, double px, double width) : scale(s), f(px), w(width) {
    ticks = nice_ticks(s);
    int e = 0;
    labels = tick_labels(ticks, &e);
    if (s.flat() && !labels.empty()) labels[0] += " (flat)";
    if (s.clip_max && !s.flat() && !labels.empty()) top_label = over_range_label(s.vmax, e, label_decimals(labels[0]));
    units = s.units;
    if (e != 0) units += (units.empty() ? "(" : " (") + exponent_label(e) + ")";
    for (const auto& l : labels) label_h = std::max(label_h, c.measure(l, tick_style()).h);
    if (!top_label.empty()) label_h = std::max(label_h, c.measure(top_label, tick_style()).h);
    thin_labels(c);
    units_w = std::max(w, std::ceil(widest_word(c, units, tick_style())));
    if (!units.empty()) units_h = c.measure(units, units_style()).h;
  }
  /// Labels every tick when no two labels come closer than 0.6 f; else only the ticks at multiples of a
  /// coarser step (2, 5 or 10 steps: nice values still, at least two labels), as matplotlib picks fewer
  /// ticks on a short axis; else the first and the last tick; else the first alone. Every tick keeps its
  /// mark; a tick label nearer the top label than 0.6 f is left out.
  void thin_labels(Canvas& c) {
    shown.assign(ticks.size(), true);
    clear_near_top(c);
    if (ticks.size() < 2) return;
    const double step = ticks[1] - ticks[0];
    for (const double mult : {1.0, 2.0, 5.0, 10.0}) {
      size_t n = top_label.empty() ? 0 : 1;
      for (size_t i = 0; i < ticks.size(); ++i) {
        const double q = ticks[i] / (step * mult);
        shown[i] = std::fabs(q - std::round(q)) < 1e-6;
      }
      clear_near_top(c);
      for (size_t i = 0; i < ticks.size(); ++i) n += shown[i];
      if (n >= 2 && apart(c)) return;
    }
    shown.assign(ticks.size(), false);
    shown.front() = shown.back() = true;
    clear_near_top(c);
    if (apart(c)) return;
    shown.back() = false;
    clear_near_top(c);
  }
  /// The top label's box for the bar at (x, y): right-aligned at the bar's end (moved in to x when wider).
  TextBox top_box(Canvas& c, double x, double y) const {
    const double ty = y + thick() + tick_len() + 0.1 * f;
    const TextSize t = c.measure(top_label, tick_style());
    const double lx = std::max(x, x + w - t.w);
    return TextBox{lx, ty, lx + t.w, ty + t.h};
  }
  /// Hides the tick labels that come nearer the top label than 0.6 f.
  void clear_near_top(Canvas& c) {
    if (top_label.empty()) return;
    const double x0 = top_box(c, 0.0, 0.0).x0;
    for (size_t i = 0; i < ticks.size(); ++i)
      if (shown[i] && tick_box(c, i, 0.0, 0.0).x1 > x0 - 0.6 * f) shown[i] = false;
  }
  /// True when the shown labels keep 0.6 f apart.
  bool apart(Canvas& c) const {
    const std::vector<TextBox> b = label_boxes(c, 0.0, 0.0);
    for (size_t i = 1; i < b.size(); ++i)
      if (b[i].x0 - b[i - 1].x1 < 0.6 * f) return false;
    return true;
  }
  TextStyle tick_style() const {
    TextStyle t;
    t.px = 0.85 * f;
    t.color = kInk;
    return t;
  }
  /// The units' style: the tick size, wrapped at whole words in units_w.
  TextStyle units_style() const {
    TextStyle t = tick_style();
    t.width = std::max(w, units_w);
    t.align = Align::Center;
    t.whole_words = true;
    return t;
  }
  double thick() const { return std::round(0.8 * f); }
  double tick_len() const { return std::round(0.35 * f); }
  /// The extend triangle's length at the right end (scale.clip_max), 0 without one.
  double extend_w() const { return scale.clip_max && !scale.flat() ? thick() : 0.0; }
  double height() const { return thick() + tick_len() + 0.1 * f + label_h + (units_h > 0 ? 0.1 * f + units_h : 0.0); }
  double tick_x(double x, size_t i) const {
    return x + (w - extend_w()) * (scale.flat() ? 0.0 : (ticks[i] - scale.vmin) / (scale.vmax - scale.vmin));
  }
  /// Tick i's label box for the bar at (x, y): centred under its tick, moved inside [x, x + w].
  TextBox tick_box(Canvas& c, size_t i, double x, double y) const {
    const double ty = y + thick() + tick_len() + 0.1 * f;
    const TextSize t = c.measure(labels[i], tick_style());
    const double lx = std::max(x, std::min(tick_x(x, i) - t.w / 2, x + w - t.w));
    return TextBox{lx, ty, lx + t.w, ty + t.h};
  }
  /// The shown labels' boxes for the bar at (x, y), left to right: the tick labels, then the top label.
  std::vector<TextBox> label_boxes(Canvas& c, double x, double y) const {
    std::vector<TextBox> out;
    for (size_t i = 0; i < ticks.size(); ++i)
      if (shown[i]) out.push_back(tick_box(c, i, x, y));
    if (!top_label.empty()) out.push_back(top_box(c, x, y));
    return out;
  }
  void draw(Canvas& c, const uint8_t* cmap, double x, double y) const {
    Image grad;
    grad.width = 256;
    grad.height = 1;
    for (int i = 0; i < 256; ++i) {  // a flat scale draws every value in the first colour
      const uint8_t* p = cmap + 3 * (scale.flat() ? 0 : i);
      grad.rgb.insert(grad.rgb.end(), p, p + 3);
    }
    const double gw = w - extend_w();
    c.image(grad, x, y, gw, thick(), Filter::Nearest);
    c.stroke_rect(x, y, gw, thick(), kGrey, 1.0);
    if (extend_w() > 0) {  // matplotlib's extend='max': values above vmax are drawn in the top colour
      const uint8_t* top = cmap + 3 * 255;
      c.polygon({x + gw, y, x + w, y + thick() / 2, x + gw, y + thick()}, Rgb{top[0], top[1], top[2]}, kGrey, 1.0);
    }
    for (size_t i = 0; i < ticks.size(); ++i) c.line(tick_x(x, i), y + thick(), tick_x(x, i), y + thick() + tick_len(), kInk, 1.0);
    for (size_t i = 0; i < ticks.size(); ++i)
      if (shown[i]) {
        const TextBox b = tick_box(c, i, x, y);
        c.text(labels[i], b.x0, b.y0, tick_style());
      }
    if (!top_label.empty()) {
      const TextBox b = top_box(c, x, y);
      c.text(top_label, b.x0, b.y0, tick_style());
    }
    if (units_h > 0) c.text(units, x + w / 2 - units_style().width / 2, y + thick() + tick_len() + 0.2 * f + label_h, units_style());
  }
};

/// The base text size of a figure of a physical width, in points: labels are 0.9 of it, colour bar ticks
/// 0.85 (7.2 pt), titles 1.05 - at least 7 pt when the figure is placed at its own size.
constexpr double kPaperTextPt = 8.5;
/// Default widths of PDF/SVG figures without FigureOptions::width_in, inches: a panel one column of a
/// two-column paper, a strip or heads grid a one-column page's text width (`attnmap figure`'s default).
constexpr double kPanelWidthIn = 3.5;
constexpr double kStripWidthIn = 6.5;

/// The width in inches a figure is drawn at in `format`: opt.width_in when given, else `vector_default` for
/// PDF/SVG, else 0 (a PNG as drawn: its own pixels, the text sized by text_px).
double paper_width(const FigureOptions& opt, FigureFormat format, double vector_default);

/// The base text size, in layout pixels, of a figure whose layout is width_of(f) pixels wide with text of
/// f pixels and which is printed width_in inches wide: the f that comes out kPaperTextPt points (a fixed
/// point, f = kPaperTextPt / 72 x width_of(f) / width_in). Throws attnmap::Error when the text alone would
/// be wider than the page (the width is too small for text of that size).
int paper_text_px(double width_in, const std::function<int(int)>& width_of);

/// The finished canvas `c` as the file `path`: written atomically, or with opt.in_memory kept there. Returns path.
std::string keep(const FigureOptions& opt, Canvas& c, const std::string& path, FigureFormat format);

/// Draws the figure once in `format` (base + extension) at width_in inches: a PDF/SVG page that wide, a PNG
/// of width_in x opt.dpi pixels (the drawing scaled); width_in 0: as emit.
std::string emit_at(const std::string& base, const FigureOptions& opt, FigureFormat format, double width_in, int w,
                    int h, const std::function<void(Canvas&)>& draw);

/// Draws the figure once per format: base + extension. The layout was computed with a measuring canvas;
/// text measures the same on every surface (hinting off).
std::vector<std::string> emit(const std::string& base, const FigureOptions& opt, int w, int h,
                              const std::function<void(Canvas&)>& draw);

}  // namespace detail
}  // namespace attnmap
