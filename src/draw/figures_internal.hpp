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
  double min_px = 0;  ///< the units line is never shrunk below this (7 pt at a physical width)

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
    if (scale.clip_max && !scale.flat()) {  // matplotlib's extend='max': values above vmax in the top colour
      const uint8_t* top = cmap + 3 * 255;
      c.polygon({x, y, x + bar_w(), y, x + bar_w() / 2, y - extend_h()}, Rgb{top[0], top[1], top[2]}, kGrey, 1.0);
    }
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
      c.text(exponent, x, y - eh - 0.5 * f - extend_h(), ts);
    }
    if (units_h > 0) {  // written upward along the bar; shrunk or shortened when longer than the bar
      TextStyle us = fit(c, scale.units, tick_style(), h, min_px);
      us.vertical = true;
      us.align = Align::Center;
      c.text(scale.units, x + bar_w() + tick_len() + 0.7 * f + label_w + units_h / 2, y + h / 2, us);
    }
  }
  /// Room the bar needs above its top (the exponent, half a label) and below its bottom (half a label).
  double above() const { return (exponent.empty() ? 0.6 * f : 1.9 * f) + extend_h(); }
  /// The "extend" triangle's height above the bar (scale.clip_max), 0 without one.
  double extend_h() const { return scale.clip_max && !scale.flat() ? std::round(0.9 * f) : 0.0; }
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
