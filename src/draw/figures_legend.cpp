// figures_legend.cpp - the legend strip under NAME.png (issue 28): a reader of the overlay alone sees the
// values its colours stand for and how far the map is from uniform, so a flat map does not pass for a peaked
// one. The strip extends the canvas below the photo; the photo's pixels are not touched.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "draw/figures.hpp"
#include "draw/figures_internal.hpp"

namespace attnmap {

using namespace detail;

int legend_text_px(int width) { return std::clamp(static_cast<int>(std::lround(width / 40.0)), 10, 40); }

std::string contrast_phrase(double map_max, double max_over_mean, bool flat) {
  char buf[128];
  if (!(max_over_mean > 0)) {
    std::snprintf(buf, sizeof buf, "max %.3g", map_max);
  } else {
    std::snprintf(buf, sizeof buf, "%smax %.3g = %.*f\u00d7 uniform", flat ? "flat map: " : "", map_max,
                  max_over_mean < 10 ? 2 : 1, max_over_mean);
  }
  return buf;
}

namespace {

std::string value_label(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  std::string s = buf;
  if (!s.empty() && s[0] == '-') s = "\u2212" + s.substr(1);  // a real minus sign, as the colour bars
  return s;
}

const Rgb kFlatRed{190, 30, 30};

}  // namespace

Image add_legend(const Image& overlay, const OverlayLegend& lg, const uint8_t* cmap) {
  const int W = std::max(overlay.width, kLegendMinWidth);
  const double f = legend_text_px(W);
  const double m = std::round(0.6 * f);
  const double bar_h = std::round(0.9 * f);
  const double tri = lg.scale.clip_max ? std::round(0.9 * f) : 0.0;
  const double label_y = m + bar_h + std::round(0.2 * f);
  const double line_h = std::round(1.25 * f);
  const double contrast_y = label_y + line_h + std::round(0.1 * f);
  const int H = static_cast<int>(contrast_y + line_h + m);
  Canvas c(W, H, 72.0, FigureFormat::Png);
  c.fill_rect(0, 0, W, H, Rgb{255, 255, 255});
  // The bar: the colour map left (vmin) to right (vmax), one colour for a flat scale.
  const double bx = m, bw = W - 2 * m - tri;
  Image grad;
  grad.width = 256;
  grad.height = 1;
  for (int i = 0; i < 256; ++i) {
    const uint8_t* p = cmap + 3 * (lg.scale.flat() ? 0 : i);
    grad.rgb.insert(grad.rgb.end(), p, p + 3);
  }
  c.image(grad, bx, m, bw, bar_h, Filter::Nearest);
  c.stroke_rect(bx, m, bw, bar_h, kGrey, 1.0);
  if (tri > 0) {  // matplotlib's extend='max': values above vmax are drawn in the top colour
    const uint8_t* top = cmap + 3 * 255;
    c.polygon({bx + bw, m, bx + bw + tri, m + bar_h / 2, bx + bw, m + bar_h}, Rgb{top[0], top[1], top[2]}, kGrey, 1.0);
  }
  // Under it: vmin at the left end, vmax at the right end, the units between them.
  TextStyle ts;
  ts.px = 0.85 * f;
  ts.color = kInk;
  const std::string lo = value_label(lg.scale.vmin) + (lg.scale.flat() ? " (constant)" : "");
  const std::string hi = lg.scale.flat() ? "" : value_label(lg.scale.vmax) + (lg.scale.clip_max ? "+" : "");
  const double lo_w = c.measure(lo, ts).w;
  c.text(lo, bx, label_y, ts);
  double hi_w = 0;
  if (!hi.empty()) {
    TextStyle r = ts;
    r.align = Align::Right;
    hi_w = c.measure(hi, r).w;
    c.text(hi, bx + bw + tri, label_y, r);
  }
  if (!lg.scale.units.empty()) {
    const double gap = 0.8 * f, room = bw + tri - lo_w - hi_w - 2 * gap;
    if (room > 2 * f) {
      TextStyle u = fit(c, lg.scale.units, ts, room, 0.7 * ts.px);
      u.color = kGrey;
      if (u.width > 0) {
        c.text(lg.scale.units, bx + lo_w + gap, label_y, u);
      } else {
        u.align = Align::Center;
        c.text(lg.scale.units, bx + lo_w + gap + room / 2, label_y, u);
      }
    }
  }
  // The contrast: how many times the uniform value (the mean over the patches) the peak is.
  std::string what = contrast_phrase(lg.map_max, lg.max_over_mean, lg.flat);
  TextStyle cs;
  cs.px = f;
  cs.bold = lg.flat;
  cs.color = lg.flat ? kFlatRed : kInk;
  // The reading aid in brackets when there is room for it at full size.
  const std::string aid = lg.max_over_mean > 0 ? (lg.flat ? " (below 1.25\u00d7)" : " (max \u00f7 mean)") : "";
  if (!aid.empty() && c.measure(what + aid, cs).w <= W - 2 * m) what += aid;
  c.text(what, bx, contrast_y, fit(c, what, cs, W - 2 * m, 0.7 * f));
  const Image strip = c.pixels();
  Image out;
  out.width = W;
  out.height = overlay.height + strip.height;
  out.rgb.assign(static_cast<size_t>(out.width) * static_cast<size_t>(out.height) * 3, 255);
  const size_t row = static_cast<size_t>(overlay.width) * 3, out_row = static_cast<size_t>(W) * 3;
  for (int y = 0; y < overlay.height; ++y)
    std::copy_n(overlay.rgb.data() + static_cast<size_t>(y) * row, row, out.rgb.data() + static_cast<size_t>(y) * out_row);
  std::copy(strip.rgb.begin(), strip.rgb.end(), out.rgb.begin() + static_cast<long>(static_cast<size_t>(overlay.height) * out_row));
  return out;
}

}  // namespace attnmap
