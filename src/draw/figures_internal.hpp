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

/// `text` one line in at most `width` pixels: the style's size, shrunk down to 70 % first, then ellipsized.
TextStyle fit(Canvas& c, const std::string& text, TextStyle ts, double width);

/// `text` one line at the style's size in at most `width` pixels: ellipsized when longer.
TextStyle shortened(Canvas& c, const std::string& text, TextStyle ts, double width);

/// The colour bar: a vertical gradient `f` wide (top = vmax), ticks with labels to its right, the common
/// exponent above it and the units written upward beside the labels.
struct ColorBar {
  Scale scale;
  std::vector<double> ticks;
  std::vector<std::string> labels;
  std::string exponent;
  double f = 12, label_w = 0, units_h = 0;

  ColorBar(Canvas& c, const Scale& s, double px) : scale(s), f(px) {
    ticks = nice_ticks(s);
    int e = 0;
    labels = tick_labels(ticks, &e);
    if (s.flat() && !labels.empty()) labels[0] += " (flat)";
    exponent = exponent_label(e);
    for (const auto& l : labels) label_w = std::max(label_w, c.measure(l, tick_style()).w);
    if (!s.units.empty()) units_h = c.measure(s.units, units_style()).h;
  }
  TextStyle tick_style() const {
    TextStyle t;
    t.px = 0.85 * f;
    t.color = kInk;
    return t;
  }
  TextStyle units_style() const {
    TextStyle t = tick_style();
    t.vertical = true;
    return t;
  }
  double bar_w() const { return f; }
  double tick_len() const { return std::round(0.35 * f); }
  double width() const {
    return bar_w() + tick_len() + 0.3 * f + label_w + (units_h > 0 ? 0.4 * f + units_h : 0.0);
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
    const TextStyle ts = tick_style();
    for (size_t i = 0; i < ticks.size(); ++i) {
      const double frac = scale.flat() ? 0.0 : (ticks[i] - scale.vmin) / (scale.vmax - scale.vmin);
      const double ty = y + h * (1.0 - frac);
      c.line(x + bar_w(), ty, x + bar_w() + tick_len(), ty, kInk, 1.0);
      const double th = c.measure(labels[i], ts).h;
      c.text(labels[i], x + bar_w() + tick_len() + 0.3 * f, ty - th / 2, ts);
    }
    if (!exponent.empty()) {
      const double eh = c.measure(exponent, ts).h;
      c.text(exponent, x, y - eh - 0.5 * f, ts);
    }
    if (units_h > 0) {  // written upward along the bar; shrunk or shortened when longer than the bar
      TextStyle us = fit(c, scale.units, tick_style(), h);
      us.vertical = true;
      us.align = Align::Center;
      c.text(scale.units, x + bar_w() + tick_len() + 0.7 * f + label_w + units_h / 2, y + h / 2, us);
    }
  }
  /// Room the bar needs above its top (the exponent, half a label) and below its bottom (half a label).
  double above() const { return exponent.empty() ? 0.6 * f : 1.9 * f; }
};

/// Draws the figure once per format: base + extension. The layout was computed with a measuring canvas;
/// text measures the same on every surface (hinting off).
std::vector<std::string> emit(const std::string& base, const FigureOptions& opt, int w, int h,
                              const std::function<void(Canvas&)>& draw);

}  // namespace detail
}  // namespace attnmap
