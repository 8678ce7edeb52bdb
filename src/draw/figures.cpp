#include "draw/figures.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "core/error.hpp"
#include "draw/colormap.hpp"
#include "draw/overlay.hpp"

namespace attnmap {

namespace fs = std::filesystem;

Style parse_style(const std::string& s) {
  if (s == "overlay") return Style::Overlay;
  if (s == "mask") return Style::Mask;
  if (s == "contour") return Style::Contour;
  throw Error("--style expects overlay, mask or contour, found '" + s + "'");
}

PhotoBox scale_box(const PhotoBox& box, int photo_w, int photo_h, int to_w, int to_h) {
  const double sx = static_cast<double>(to_w) / photo_w, sy = static_cast<double>(to_h) / photo_h;
  const Box b{box.x0 * sx, box.y0 * sy, (box.x0 + box.w) * sx, (box.y0 + box.h) * sy};
  PhotoBox out;
  box_pixels(b, to_w, to_h, &out.x0, &out.y0, &out.w, &out.h);
  return out;
}

namespace {

void check_fit(const Image& photo, const PhotoBox& box, const GridMap& map, const char* who) {
  if (map.grid_w <= 0 || map.grid_h <= 0 ||
      map.values.size() != static_cast<size_t>(map.grid_w) * static_cast<size_t>(map.grid_h))
    throw Error(std::string(who) + ": the map holds " + std::to_string(map.values.size()) + " values for a " +
                std::to_string(map.grid_h) + "x" + std::to_string(map.grid_w) + " grid");
  if (box.w <= 0 || box.h <= 0 || box.x0 < 0 || box.y0 < 0 || box.x0 + box.w > photo.width ||
      box.y0 + box.h > photo.height)
    throw Error(std::string(who) + ": the map box does not fit the photo");
}

// The map on its scale, upsampled to the box: (box.h, box.w) values in [0,1].
std::vector<float> scaled_pixels(const PhotoBox& box, const GridMap& map, const Scale& scale, Upsample up) {
  std::vector<float> v = upsample_map(apply_scale(map.values, scale), map.grid_w, map.grid_h, box.w, box.h, up);
  for (float& x : v) x = std::clamp(x, 0.0f, 1.0f);  // bicubic overshoot is clamped to the input range already
  return v;
}

Rgb cmap_rgb(const uint8_t* cmap, double v) {
  const uint8_t* c = colormap_lookup(cmap, static_cast<float>(v));
  return Rgb{c[0], c[1], c[2]};
}

size_t at(int x, int y, int w) { return (static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)) * 3; }

}  // namespace

std::vector<float> iso_segments(const std::vector<float>& v, int w, int h, float level) {
  std::vector<float> out;
  auto val = [&](int x, int y) { return v[static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)]; };
  auto lerp = [level](float a, float b) { return a == b ? 0.5f : (level - a) / (b - a); };
  for (int y = 0; y + 1 < h; ++y)
    for (int x = 0; x + 1 < w; ++x) {
      const float a = val(x, y), b = val(x + 1, y), c = val(x + 1, y + 1), d = val(x, y + 1);  // tl tr br bl
      const int code = (a >= level) | ((b >= level) << 1) | ((c >= level) << 2) | ((d >= level) << 3);
      if (code == 0 || code == 15) continue;
      const float cx = static_cast<float>(x) + 0.5f, cy = static_cast<float>(y) + 0.5f;
      // Edge crossings: 0 top (a-b), 1 right (b-c), 2 bottom (d-c), 3 left (a-d).
      const float ex[4] = {cx + lerp(a, b), cx + 1.0f, cx + lerp(d, c), cx};
      const float ey[4] = {cy, cy + lerp(b, c), cy + 1.0f, cy + lerp(a, d)};
      auto seg = [&](int e0, int e1) { out.insert(out.end(), {ex[e0], ey[e0], ex[e1], ey[e1]}); };
      const bool centre_in = (a + b + c + d) / 4.0f >= level;
      switch (code) {
        case 1: case 14: seg(3, 0); break;
        case 2: case 13: seg(0, 1); break;
        case 3: case 12: seg(3, 1); break;
        case 4: case 11: seg(1, 2); break;
        case 6: case 9: seg(0, 2); break;
        case 7: case 8: seg(3, 2); break;
        case 5:  // a and c above: joined through the centre when it is above too
          if (centre_in) { seg(3, 2); seg(0, 1); } else { seg(3, 0); seg(1, 2); }
          break;
        case 10:
          if (centre_in) { seg(3, 0); seg(1, 2); } else { seg(3, 2); seg(0, 1); }
          break;
        default: break;
      }
    }
  return out;
}

Image draw_styled(const Image& photo, const PhotoBox& box, const GridMap& map, const Scale& scale,
                  const StyleOptions& st) {
  check_fit(photo, box, map, "draw");
  if (!st.cmap) throw Error("draw: no colour map");
  if (!(st.alpha >= 0.0f && st.alpha <= 1.0f)) throw Error("--alpha must be in [0, 1], found " + std::to_string(st.alpha));
  const std::vector<float> v = scaled_pixels(box, map, scale, st.upsample);  // (box.h, box.w)
  if (st.style == Style::Overlay && !st.alpha_by_value)
    return blend_overlay(photo, v, box.w, box.h, box.x0, box.y0, st.cmap, st.alpha);
  Image out = photo;
  if (st.style == Style::Contour) {
    Canvas c(photo.width, photo.height, 72.0, FigureFormat::Png);
    c.image(photo, 0, 0, photo.width, photo.height, Filter::Nearest);
    const double lw = std::max(1.5, std::min(box.w, box.h) / 150.0);
    const std::vector<double> ticks = nice_ticks(scale);
    for (double t : ticks) {
      if (scale.flat() || t <= scale.vmin || t >= scale.vmax) continue;
      const double lv = (t - scale.vmin) / (scale.vmax - scale.vmin);
      std::vector<float> seg = iso_segments(v, box.w, box.h, static_cast<float>(lv));
      for (size_t i = 0; i < seg.size(); i += 2) {
        seg[i] += static_cast<float>(box.x0);
        seg[i + 1] += static_cast<float>(box.y0);
      }
      c.segments(seg, Rgb{0, 0, 0}, lw + 1.5);  // a dark rim keeps bright levels visible on bright photos
      c.segments(seg, cmap_rgb(st.cmap, lv), lw);
    }
    return c.pixels();
  }
  if (st.style == Style::Mask) std::fill(out.rgb.begin(), out.rgb.end(), uint8_t{0});
  for (int y = 0; y < box.h; ++y)
    for (int x = 0; x < box.w; ++x) {
      const float a = v[static_cast<size_t>(y) * static_cast<size_t>(box.w) + static_cast<size_t>(x)];
      const size_t i = at(x + box.x0, y + box.y0, photo.width);
      if (st.style == Style::Mask) {
        for (int k = 0; k < 3; ++k)
          out.rgb[i + static_cast<size_t>(k)] = static_cast<uint8_t>(std::lround(a * static_cast<float>(photo.rgb[i + static_cast<size_t>(k)])));
        continue;
      }
      const uint8_t* col = colormap_lookup(st.cmap, a);
      const float al = st.alpha * a;
      for (int k = 0; k < 3; ++k) {
        uint8_t& p = out.rgb[i + static_cast<size_t>(k)];
        p = static_cast<uint8_t>(std::lround((1.0f - al) * static_cast<float>(p) + al * static_cast<float>(col[k])));
      }
    }
  return out;
}

Image draw_map_alone(int photo_w, int photo_h, const PhotoBox& box, const GridMap& map, const Scale& scale,
                     const StyleOptions& st) {
  Image out;
  out.width = photo_w;
  out.height = photo_h;
  out.rgb.assign(static_cast<size_t>(photo_w) * static_cast<size_t>(photo_h) * 3, 224);
  check_fit(out, box, map, "draw");
  if (!st.cmap) throw Error("draw: no colour map");
  const std::vector<float> v = scaled_pixels(box, map, scale, st.upsample);
  for (int y = 0; y < box.h; ++y)
    for (int x = 0; x < box.w; ++x) {
      const uint8_t* c = colormap_lookup(st.cmap, v[static_cast<size_t>(y) * static_cast<size_t>(box.w) + static_cast<size_t>(x)]);
      std::copy_n(c, 3, &out.rgb[at(x + box.x0, y + box.y0, photo_w)]);
    }
  return out;
}

// ---- shared pieces ------------------------------------------------------------------------------------

namespace {

const Rgb kInk{20, 20, 20};
const Rgb kGrey{90, 90, 90};

/// The text size of a figure whose pictures are about `cell` pixels on their shorter side.
int text_px(int cell) { return std::clamp(static_cast<int>(std::lround(cell / 16.0)), 11, 48); }

/// `text` one line in at most `width` pixels: the style's size, shrunk down to 70 % first, then ellipsized.
TextStyle fit(Canvas& c, const std::string& text, TextStyle ts, double width) {
  for (int i = 0; i < 3 && c.measure(text, ts).w > width; ++i) ts.px *= 0.9;
  if (c.measure(text, ts).w > width) {
    ts.width = width;
    ts.ellipsize = true;
  }
  return ts;
}

/// `text` one line at the style's size in at most `width` pixels: ellipsized when longer.
TextStyle shortened(Canvas& c, const std::string& text, TextStyle ts, double width) {
  if (c.measure(text, ts).w > width) {
    ts.width = width;
    ts.ellipsize = true;
  }
  return ts;
}

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
                              const std::function<void(Canvas&)>& draw) {
  if (opt.formats.empty()) throw Error("figure: no output format");
  std::vector<std::string> out;
  for (FigureFormat f : opt.formats) {
    Canvas c(w, h, opt.dpi, f);
    c.set_provenance(opt.provenance);
    draw(c);
    const std::string path = base + figure_extension(f);
    c.save(path);
    out.push_back(path);
  }
  return out;
}

std::string style_name(const StyleOptions& st) {
  char buf[64];
  switch (st.style) {
    case Style::Mask: return "mask (photo \u00d7 map)";
    case Style::Contour: return "contours at the ticks";
    default:
      std::snprintf(buf, sizeof buf, st.alpha_by_value ? "overlay, opacity \u2264 %.2g by value" : "overlay, opacity %.2g",
                    static_cast<double>(st.alpha));
      return buf;
  }
}

bool same_scale(const Scale& a, const Scale& b) { return a.vmin == b.vmin && a.vmax == b.vmax && a.units == b.units; }

}  // namespace

// ---- panel ---------------------------------------------------------------------------------------------

std::vector<std::string> write_panel(const std::string& base, const std::string& title, const Image& photo,
                                     const PhotoBox& box, const std::vector<PanelRow>& rows, const StyleOptions& st,
                                     const FigureOptions& opt) {
  if (rows.empty()) throw Error("panel: no view to show");
  const int pw = photo.width, ph = photo.height;
  std::vector<Image> maps, overlays;
  for (const PanelRow& r : rows) {
    overlays.push_back(draw_styled(photo, box, r.map, r.scale, st));
    maps.push_back(draw_map_alone(pw, ph, box, r.map, r.scale, st));
  }
  bool one_bar = true;
  for (const PanelRow& r : rows) one_bar = one_bar && same_scale(r.scale, rows[0].scale);
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  const int f = text_px(std::min(pw, ph));
  const int m = f, g = f / 2;
  std::vector<ColorBar> bars;
  for (size_t i = 0; i < (one_bar ? 1 : rows.size()); ++i) bars.emplace_back(probe, rows[i].scale, f);
  double bar_w = 0;
  for (const auto& b : bars) bar_w = std::max(bar_w, b.width());
  TextStyle label;
  label.px = 0.9 * f;
  label.color = kInk;
  const int label_w = static_cast<int>(std::ceil(probe.measure("Ag", label).h)) + g;
  const int x0 = m + label_w, bx = x0 + 3 * pw + 2 * g + 2 * g;
  const int w = bx + static_cast<int>(std::ceil(bar_w)) + m;
  TextStyle ts;
  ts.px = 1.05 * f;
  ts.bold = true;
  ts.color = kInk;
  ts.width = w - 2 * m;
  const int title_h = static_cast<int>(std::ceil(probe.measure(title, ts).h)) + g;
  const int col_h = static_cast<int>(std::ceil(probe.measure("Ag", label).h)) + g / 2;
  const int y0 = m + title_h + std::max(col_h, static_cast<int>(std::ceil(bars[0].above())));
  const int nrows = static_cast<int>(rows.size());
  const int h = y0 + nrows * ph + (nrows - 1) * g + m;
  return emit(base, opt, w, h, [&](Canvas& c) {
    c.text(title, m, m, ts);
    const std::string cols[3] = {"photo", "map", style_name(st)};
    for (int k = 0; k < 3; ++k) {
      TextStyle ct = fit(c, cols[k], label, pw);
      ct.align = Align::Center;
      c.text(cols[k], ct.width > 0 ? x0 + k * (pw + g) : x0 + k * (pw + g) + pw / 2.0, y0 - col_h, ct);
    }
    for (int r = 0; r < nrows; ++r) {
      const int y = y0 + r * (ph + g);
      TextStyle rl = fit(c, rows[static_cast<size_t>(r)].label, label, ph);
      rl.vertical = true;
      c.text(rows[static_cast<size_t>(r)].label, m + label_w / 2.0 - g / 2.0, y + ph / 2.0, rl);
      c.image(photo, x0, y, pw, ph, Filter::Nearest);
      c.image(maps[static_cast<size_t>(r)], x0 + pw + g, y, pw, ph, Filter::Nearest);
      c.image(overlays[static_cast<size_t>(r)], x0 + 2 * (pw + g), y, pw, ph, Filter::Nearest);
      if (!one_bar) bars[static_cast<size_t>(r)].draw(c, st.cmap, bx, y, ph);
    }
    if (one_bar) bars[0].draw(c, st.cmap, bx, y0, nrows * ph + (nrows - 1) * g);
  });
}

// ---- strips and the heads grid -------------------------------------------------------------------------

TilePhoto tile_photo(const Image& photo, const PhotoBox& box, int tile_long) {
  if (tile_long < 16) throw Error("figure: tiles under 16 pixels");
  if (photo.width <= 0 || photo.height <= 0) throw Error("figure: empty photo");
  const double s = static_cast<double>(tile_long) / std::max(photo.width, photo.height);
  const int tw = std::max(1, static_cast<int>(std::lround(photo.width * s)));
  const int th = std::max(1, static_cast<int>(std::lround(photo.height * s)));
  return TilePhoto{resize_photo(photo, tw, th), scale_box(box, photo.width, photo.height, tw, th)};
}

std::vector<std::string> write_tiles(const std::string& base, const TileFigure& fig, const std::vector<Image>& tiles,
                                     const std::vector<std::string>& labels, const FigureOptions& opt) {
  const int n = static_cast<int>(tiles.size());
  if (n == 0) throw Error("figure: no tile to show");
  if (labels.size() != tiles.size())
    throw Error("figure: " + std::to_string(tiles.size()) + " tiles and " + std::to_string(labels.size()) + " labels");
  const int tw = tiles[0].width, th = tiles[0].height;
  for (const Image& t : tiles)
    if (t.width != tw || t.height != th) throw Error("figure: tiles of different sizes");
  if (fig.scale && !fig.cmap) throw Error("figure: a colour bar without a colour map");
  int cols = fig.cols <= 0 ? static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n)))) : fig.cols;
  cols = std::min(cols, n);
  const int rows = (n + cols - 1) / cols;
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  const int f = text_px(std::max(tw, th));
  const int m = f, g = f / 2;
  TextStyle label;
  label.px = 0.85 * f;
  label.color = kInk;
  label.width = tw;  // a label wider than its tile wraps (narrow tiles of tall photos)
  double label_max = probe.measure("Ag", label).h;
  for (const std::string& l : labels) label_max = std::max(label_max, probe.measure(l, label).h);
  const int label_h = static_cast<int>(std::ceil(label_max)) + g / 2;
  std::vector<ColorBar> bar;
  if (fig.scale) bar.emplace_back(probe, *fig.scale, f);
  const int grid_w = cols * tw + (cols - 1) * g;
  const int bx = m + grid_w + 2 * g;
  const int w = bar.empty() ? m + grid_w + m : bx + static_cast<int>(std::ceil(bar[0].width())) + m;
  TextStyle ts;
  ts.px = 1.05 * f;
  ts.bold = true;
  ts.color = kInk;
  ts.width = w - 2 * m;
  const int title_h = static_cast<int>(std::ceil(probe.measure(fig.title, ts).h)) + g;
  TextStyle ns = label;
  ns.color = kGrey;
  ns.width = 0;
  ns.width = (cols * rows - n) * (tw + g) - g;
  // The note goes into the empty cells of the last row when it fits there, else under the grid.
  const bool full = n == rows * cols || probe.measure(fig.note, ns).h > th;
  if (full) ns.width = grid_w;
  const int note_h = full && !fig.note.empty() ? static_cast<int>(std::ceil(probe.measure(fig.note, ns).h)) + g : 0;
  const int above = bar.empty() ? 0 : static_cast<int>(std::ceil(bar[0].above()));
  const int y0 = m + title_h + std::max(0, above - label_h);
  const int grid_h = rows * (label_h + th) + (rows - 1) * g;
  const int h = y0 + grid_h + note_h + m;
  return emit(base, opt, w, h, [&](Canvas& c) {
    c.text(fig.title, m, m, ts);
    for (int i = 0; i < n; ++i) {
      const int x = m + (i % cols) * (tw + g), y = y0 + (i / cols) * (label_h + th + g);
      c.text(labels[static_cast<size_t>(i)], x, y, label);
      c.image(tiles[static_cast<size_t>(i)], x, y + label_h, tw, th, Filter::Nearest);
    }
    if (!fig.note.empty()) {
      if (full) {
        c.text(fig.note, m, y0 + grid_h + g, ns);
      } else {
        const int x = m + (n % cols) * (tw + g), y = y0 + (rows - 1) * (label_h + th + g) + label_h;
        c.text(fig.note, x, y, ns);
      }
    }
    if (!bar.empty()) bar[0].draw(c, fig.cmap, bx, y0 + label_h, grid_h - label_h);
  });
}

// ---- the comparison figure -----------------------------------------------------------------------------

namespace {

/// A horizontal colour bar under a run of columns: the gradient from vmin (left) to vmax (right), a tick
/// mark at every nice tick (the contour levels), labels under them (only those at a coarser nice step when
/// they would touch in a narrow bar), the units - and the common exponent, "(×10⁻³)" - centred under the labels.
struct HBar {
  Scale scale;
  std::vector<double> ticks;
  std::vector<std::string> labels;
  std::string units;
  double f = 12, label_h = 0, units_h = 0;
  std::vector<bool> shown;  ///< which ticks are labelled

  HBar(Canvas& c, const Scale& s, double px, double width) : scale(s), f(px) {
    ticks = nice_ticks(s);
    int e = 0;
    labels = tick_labels(ticks, &e);
    if (s.flat() && !labels.empty()) labels[0] += " (flat)";
    units = s.units;
    if (e != 0) units += (units.empty() ? "(" : " (") + exponent_label(e) + ")";
    double label_w = 0;
    for (const auto& l : labels) {
      const TextSize t = c.measure(l, tick_style());
      label_w = std::max(label_w, t.w);
      label_h = std::max(label_h, t.h);
    }
    shown.assign(ticks.size(), true);
    if (ticks.size() > 1) thin_labels(width * (ticks[1] - ticks[0]) / (s.vmax - s.vmin), label_w + 0.6 * f);
    if (!units.empty()) units_h = c.measure(units, tick_style()).h;
  }
  /// When labels `need` pixels and ticks are `gap` apart, labels only the ticks at multiples of a coarser
  /// step (2, 5 or 10 steps: nice values still, at least two of them), as matplotlib picks fewer ticks on a
  /// short axis; else the first and the last tick; else the first alone. Every tick keeps its mark.
  void thin_labels(double gap, double need) {
    const double step = ticks[1] - ticks[0];
    for (const double mult : {1.0, 2.0, 5.0, 10.0}) {
      if (gap * mult < need) continue;
      size_t n = 0;
      for (size_t i = 0; i < ticks.size(); ++i) {
        const double q = ticks[i] / (step * mult);
        shown[i] = std::fabs(q - std::round(q)) < 1e-6;
        n += shown[i];
      }
      if (n >= 2) return;
    }
    shown.assign(ticks.size(), false);
    shown.front() = true;
    shown.back() = gap * static_cast<double>(ticks.size() - 1) >= need;
  }
  TextStyle tick_style() const {
    TextStyle t;
    t.px = 0.85 * f;
    t.color = kInk;
    return t;
  }
  double thick() const { return std::round(0.8 * f); }
  double tick_len() const { return std::round(0.35 * f); }
  double height() const { return thick() + tick_len() + 0.1 * f + label_h + (units_h > 0 ? 0.1 * f + units_h : 0.0); }
  void draw(Canvas& c, const uint8_t* cmap, double x, double y, double w) const {
    Image grad;
    grad.width = 256;
    grad.height = 1;
    for (int i = 0; i < 256; ++i) {  // a flat scale draws every value in the first colour
      const uint8_t* p = cmap + 3 * (scale.flat() ? 0 : i);
      grad.rgb.insert(grad.rgb.end(), p, p + 3);
    }
    c.image(grad, x, y, w, thick(), Filter::Nearest);
    c.stroke_rect(x, y, w, thick(), kGrey, 1.0);
    TextStyle ts = tick_style();
    ts.align = Align::Center;
    const double ty = y + thick() + tick_len();
    for (size_t i = 0; i < ticks.size(); ++i) {
      const double tx = x + w * (scale.flat() ? 0.0 : (ticks[i] - scale.vmin) / (scale.vmax - scale.vmin));
      c.line(tx, y + thick(), tx, ty, kInk, 1.0);
      if (shown[i]) c.text(labels[i], tx, ty + 0.1 * f, ts);
    }
    if (units_h > 0) {
      TextStyle us = fit(c, units, tick_style(), w);
      us.align = Align::Center;
      c.text(units, us.width > 0 ? x : x + w / 2, ty + 0.2 * f + label_h, us);
    }
  }
};

/// A run of adjacent map columns on one scale (column indices over all columns, photo columns included).
struct BarSpan {
  int first = 0, last = 0, scale = 0;
};

std::vector<BarSpan> bar_spans(const std::vector<std::string>& titles, const std::vector<int>& column_scale) {
  std::vector<BarSpan> out;
  size_t k = 0;
  for (int c = 0; c < static_cast<int>(titles.size()); ++c) {
    if (titles[static_cast<size_t>(c)] == "photo") continue;
    const int s = column_scale[k++];
    if (s < 0) continue;
    if (!out.empty() && out.back().scale == s && out.back().last == c - 1) out.back().last = c;
    else out.push_back(BarSpan{c, c, s});
  }
  return out;
}

/// The index every map column shares, or -1 when they differ (or a column is on its own min-max).
int one_scale(const ComparisonScales& s) {
  if (s.column_scale.empty()) return -1;
  for (const int k : s.column_scale)
    if (k != s.column_scale[0]) return -1;
  return s.column_scale[0];
}

FigureOptions comparison_output(const std::string& path, const ComparisonOptions& opt) {
  const std::string ext = fs::path(path).extension().string();
  FigureOptions fo;
  fo.dpi = opt.dpi;
  fo.provenance = opt.provenance;
  if (ext == ".png") fo.formats = {FigureFormat::Png};
  else if (ext == ".pdf") fo.formats = {FigureFormat::Pdf};
  else if (ext == ".svg") fo.formats = {FigureFormat::Svg};
  else throw Error(path + ": a figure is written as .png, .pdf or .svg, found '" + ext + "'");
  return fo;
}

void check_comparison(const std::vector<std::string>& titles, const std::vector<FigureRow>& rows,
                      const ComparisonScales& scales, const ComparisonOptions& opt) {
  if (rows.empty() || titles.empty()) throw Error("figure: no image or no view to show");
  if (!(opt.width_in > 0.0 && opt.width_in <= 100.0))
    throw Error("--width-in must be in (0, 100], found " + std::to_string(opt.width_in));
  size_t nmaps = 0;
  for (const auto& t : titles) nmaps += t != "photo";
  for (const FigureRow& r : rows)
    if (!r.photo || r.maps.size() != nmaps)
      throw Error("figure: row '" + r.label + "' has " + std::to_string(r.maps.size()) + " maps for " +
                  std::to_string(nmaps) + " map columns");
  if (scales.column_scale.size() != nmaps)
    throw Error("figure: " + std::to_string(scales.column_scale.size()) + " column scales for " +
                std::to_string(nmaps) + " map columns");
  for (const int k : scales.column_scale)
    if (k >= static_cast<int>(scales.scales.size())) throw Error("figure: a column's scale " + std::to_string(k) + " is not given");
}

Error too_narrow(double width_in, double dpi, int ncols) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%g inches at %g dpi leave cells under 16 pixels for %d columns", width_in, dpi, ncols);
  return Error("figure: " + std::string(buf) + " (--width-in, --dpi)");
}

/// Where everything of a comparison figure goes, in pixels.
struct ComparisonLayout {
  int w = 0, h = 0;
  double f = 0, m = 0, g = 0, line_h = 0, x0 = 0, cell_w = 0, y0 = 0, total = 0;
  std::vector<double> row_h;
  std::optional<ColorBar> vbar;  ///< one scale for every map column: the bar at the right, from bx
  double bx = 0;
  std::vector<BarSpan> spans;    ///< otherwise: a bar under each run, at bars_y
  std::vector<HBar> hbars;
  double bars_y = 0, note_y = 0;
  TextStyle label, note;
};

ComparisonLayout comparison_layout(Canvas& probe, const std::vector<std::string>& titles,
                                   const std::vector<FigureRow>& rows, const ComparisonScales& scales,
                                   const ComparisonOptions& opt) {
  ComparisonLayout L;
  L.w = static_cast<int>(std::lround(opt.width_in * opt.dpi));
  L.f = 8.0 * opt.dpi / 72.0;  // 8 pt
  L.m = 0.5 * L.f;
  L.g = 0.3 * L.f;
  L.label.px = L.f;
  L.label.color = kInk;
  L.line_h = probe.measure("Ag", L.label).h;
  const int shared = one_scale(scales);
  if (shared >= 0) L.vbar.emplace(probe, scales.scales[static_cast<size_t>(shared)], 0.9 * L.f);
  const int ncols = static_cast<int>(titles.size());
  L.x0 = L.m + L.line_h + L.g;
  L.bx = L.vbar ? L.w - L.m - L.vbar->width() : L.w - L.m;
  const double right = L.vbar ? L.bx - 2 * L.g : L.bx;
  L.cell_w = std::floor((right - L.x0 - (ncols - 1) * L.g) / ncols);
  if (L.cell_w < 16) throw too_narrow(opt.width_in, opt.dpi, ncols);
  for (const FigureRow& r : rows) {
    L.row_h.push_back(std::round(L.cell_w * r.photo->height / r.photo->width));
    L.total += L.row_h.back();
  }
  L.total += L.g * static_cast<double>(rows.size() - 1);
  L.y0 = L.m + std::max(L.line_h + L.g, L.vbar ? L.vbar->above() : 0.0);
  double y = L.y0 + L.total;
  if (!L.vbar) {
    L.spans = bar_spans(titles, scales.column_scale);
    double bar_h = 0;
    for (const BarSpan& s : L.spans) {
      const double span_w = (s.last - s.first + 1) * L.cell_w + (s.last - s.first) * L.g;
      L.hbars.emplace_back(probe, scales.scales[static_cast<size_t>(s.scale)], 0.9 * L.f, 0.8 * span_w);
      bar_h = std::max(bar_h, L.hbars.back().height());
    }
    L.bars_y = y + 1.5 * L.g;
    if (!L.spans.empty()) y = L.bars_y + bar_h;
  }
  L.note = L.label;
  L.note.px = 0.85 * L.f;
  L.note.color = kGrey;
  L.note.width = L.w - 2 * L.m;
  L.note_y = y + 1.5 * L.g;
  if (!opt.note.empty()) y = L.note_y + probe.measure(opt.note, L.note).h;
  L.h = static_cast<int>(std::ceil(y + L.m));
  return L;
}

}  // namespace

void check_comparison_width(int ncols, double width_in, double dpi) {
  if (!(width_in > 0.0 && width_in <= 100.0)) throw Error("--width-in must be in (0, 100], found " + std::to_string(width_in));
  if (ncols < 1) throw Error("figure: no view to show");
  // The figure of one image whose every column shares a scale: the layout with a vertical bar, the narrowest.
  Image photo;
  photo.width = photo.height = 1;
  photo.rgb.assign(3, 0);
  const FigureRow row{"", &photo, PhotoBox{}, {}};
  ComparisonScales cs;
  cs.scales = {Scale{0.0, 1.0, "attention probability"}};
  cs.column_scale = {0};
  ComparisonOptions opt;
  opt.width_in = width_in;
  opt.dpi = dpi;
  Canvas probe(1, 1, dpi, FigureFormat::Png);
  comparison_layout(probe, std::vector<std::string>(static_cast<size_t>(ncols), "view"), {row}, cs, opt);
}

std::string write_comparison(const std::string& path, const std::vector<std::string>& column_titles,
                             const std::vector<FigureRow>& rows, const ComparisonScales& scales,
                             const StyleOptions& st, const ComparisonOptions& opt) {
  const FigureOptions fo = comparison_output(path, opt);
  check_comparison(column_titles, rows, scales, opt);
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  const ComparisonLayout L = comparison_layout(probe, column_titles, rows, scales, opt);
  // Each map is drawn over its photo at the photo's full resolution, on its column's scale (or its own
  // min-max), then scaled into its cell.
  std::vector<std::vector<Image>> cells;
  for (const FigureRow& r : rows) {
    cells.emplace_back();
    size_t k = 0;
    for (const auto& t : column_titles) {
      if (t == "photo") {
        cells.back().push_back(*r.photo);
        continue;
      }
      const int s = scales.column_scale[k];
      const GridMap& map = r.maps[k++];
      const Scale own = s >= 0 ? scales.scales[static_cast<size_t>(s)] : resolve_scale(ScaleSpec{}, map.values, Scale{});
      cells.back().push_back(draw_styled(*r.photo, r.box, map, own, st));
    }
  }
  const int ncols = static_cast<int>(column_titles.size());
  const auto col_x = [&L](int k) { return L.x0 + k * (L.cell_w + L.g); };
  // Titles, and row labels, in one size: the largest at which each fits (a longer one is shortened then).
  TextStyle title_style = L.label, row_style = L.label;
  for (int k = 0; k < ncols; ++k)
    title_style.px = std::min(title_style.px, fit(probe, column_titles[static_cast<size_t>(k)], L.label, L.cell_w).px);
  for (size_t r = 0; r < rows.size(); ++r)
    row_style.px = std::min(row_style.px, fit(probe, rows[r].label, L.label, L.row_h[r]).px);
  const auto written = emit(fs::path(path).replace_extension("").string(), fo, L.w, L.h, [&](Canvas& c) {
    for (int k = 0; k < ncols; ++k) {
      TextStyle ct = shortened(c, column_titles[static_cast<size_t>(k)], title_style, L.cell_w);
      ct.align = Align::Center;
      c.text(column_titles[static_cast<size_t>(k)], ct.width > 0 ? col_x(k) : col_x(k) + L.cell_w / 2,
             L.y0 - L.line_h - L.g / 2, ct);
    }
    double y = L.y0;
    for (size_t r = 0; r < rows.size(); ++r) {
      TextStyle rl = shortened(c, rows[r].label, row_style, L.row_h[r]);
      rl.vertical = true;
      c.text(rows[r].label, L.m + L.line_h / 2, y + L.row_h[r] / 2, rl);
      for (int k = 0; k < ncols; ++k)
        c.image(cells[r][static_cast<size_t>(k)], col_x(k), y, L.cell_w, L.row_h[r], Filter::Good);
      y += L.row_h[r] + L.g;
    }
    if (L.vbar) L.vbar->draw(c, st.cmap, L.bx, L.y0, L.total);
    for (size_t i = 0; i < L.spans.size(); ++i) {
      const double span_w = (L.spans[i].last - L.spans[i].first + 1) * L.cell_w + (L.spans[i].last - L.spans[i].first) * L.g;
      L.hbars[i].draw(c, st.cmap, col_x(L.spans[i].first) + 0.1 * span_w, L.bars_y, 0.8 * span_w);
    }
    if (!opt.note.empty()) c.text(opt.note, L.m, L.note_y, L.note);
  });
  return written.at(0);
}

std::string write_comparison(const std::string& path, const std::vector<std::string>& column_titles,
                             const std::vector<FigureRow>& rows, const Scale& scale, const StyleOptions& st,
                             double width_in, double dpi) {
  ComparisonScales cs;
  cs.scales = {scale};
  for (const auto& t : column_titles)
    if (t != "photo") cs.column_scale.push_back(0);
  ComparisonOptions o;
  o.width_in = width_in;
  o.dpi = dpi;
  return write_comparison(path, column_titles, rows, cs, st, o);
}

// ---- the contact sheet ---------------------------------------------------------------------------------

namespace {

const Rgb kFailed{170, 20, 20};
const Rgb kPlaceholder{236, 236, 236};

/// `s` cut to at most `n` bytes at a UTF-8 character boundary, "…" added when cut.
std::string cut_utf8(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "\u2026";
}

/// The thumbnails of items [first, first + n), each scaled to its size in `sizes` (stb_image_resize), made on
/// up to 8 threads. A placeholder, or an item whose load threw, gets an empty Image and its text in *why.
std::vector<Image> page_thumbnails(const std::vector<SheetItem>& items, const std::vector<std::pair<int, int>>& sizes,
                                   int first, int n, std::vector<std::string>* why) {
  std::vector<Image> thumbs(static_cast<size_t>(n));
  why->assign(static_cast<size_t>(n), "");
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next++; i < n; i = next++) {
      const SheetItem& it = items[static_cast<size_t>(first + i)];
      const auto [iw, ih] = sizes[static_cast<size_t>(first + i)];
      std::string& w = (*why)[static_cast<size_t>(i)];
      try {
        if (!it.overlay && !it.load) {
          w = it.placeholder;
          continue;
        }
        Image loaded;
        if (!it.overlay) loaded = it.load();
        const Image& pic = it.overlay ? *it.overlay : loaded;
        thumbs[static_cast<size_t>(i)] = pic.width == iw && pic.height == ih ? pic : resize_photo(pic, iw, ih);
      } catch (const std::exception& e) {
        w = e.what();
      } catch (...) {
        w = "the picture could not be read";
      }
    }
  };
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, std::min(8, n));
  std::vector<std::thread> pool;
  for (int k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();
  return thumbs;
}

/// A placeholder tile (x, y, w, h): light grey, outlined, `text` wrapped and centred in dark red.
void draw_placeholder(Canvas& c, int x, int y, int w, int h, const std::string& text, const TextStyle& base) {
  c.fill_rect(x, y, w, h, kPlaceholder);
  c.stroke_rect(x + 0.5, y + 0.5, w - 1, h - 1, kGrey, 1.0);
  TextStyle ts = base;
  ts.bold = false;
  ts.ellipsize = false;
  ts.color = kFailed;
  ts.align = Align::Center;
  ts.width = w - base.px;
  const std::string shown = cut_utf8(text.empty() ? "no picture" : text, 240);
  const TextSize sz = c.measure(shown, ts);
  c.text(shown, x + base.px / 2, y + std::max(base.px / 2, (h - sz.h) / 2), ts);
}

/// Each item's thumbnail size (longer side t; {0, 0} for a placeholder). Throws attnmap::Error for an item
/// with neither a picture nor a placeholder.
std::vector<std::pair<int, int>> sheet_sizes(const std::vector<SheetItem>& items, int t) {
  std::vector<std::pair<int, int>> sizes;
  for (const SheetItem& it : items) {
    const int w = it.overlay ? it.overlay->width : it.load ? it.width : 0;
    const int h = it.overlay ? it.overlay->height : it.load ? it.height : 0;
    if (!it.overlay && !it.load && !it.placeholder.empty()) {
      sizes.emplace_back(0, 0);
      continue;
    }
    if (w <= 0 || h <= 0) throw Error("contact sheet: an item has no picture");
    const double s = static_cast<double>(t) / std::max(w, h);
    sizes.emplace_back(std::max(1, static_cast<int>(std::lround(w * s))), std::max(1, static_cast<int>(std::lround(h * s))));
  }
  return sizes;
}

}  // namespace

std::vector<std::string> write_contact_sheet(const std::string& path, const std::string& title,
                                             const std::vector<SheetItem>& items, const SheetOptions& opt) {
  if (items.empty()) throw Error("contact sheet: no image to show");
  if (fs::path(path).extension() != ".png") throw Error(path + ": a contact sheet is written as .png");
  if (opt.columns < 1) throw Error("--sheet-columns must be >= 1, found " + std::to_string(opt.columns));
  if (opt.thumb_long < 16) throw Error("contact sheet: thumbnails under 16 pixels");
  const int t = opt.thumb_long, f = text_px(t), m = f, g = f;
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  TextStyle name;
  name.px = 0.85 * f;
  name.bold = true;
  name.color = kInk;
  name.width = t;
  name.ellipsize = true;
  TextStyle detail = name;
  detail.bold = false;
  detail.color = kGrey;
  const int line = static_cast<int>(std::ceil(probe.measure("Ag", name).h));
  // Thumbnails: the longer side thumb_long; the picture row is as high as the highest of them.
  const std::vector<std::pair<int, int>> sizes = sheet_sizes(items, t);
  int pic_h = 0;
  for (const auto& sz : sizes) pic_h = std::max(pic_h, sz.second);
  if (pic_h == 0) pic_h = t;  // placeholders only
  const int cell_h = pic_h + f / 3 + 2 * line;
  const int cols = std::min(opt.columns, static_cast<int>(items.size()));
  const int w = 2 * m + cols * t + (cols - 1) * g;
  TextStyle ts;
  ts.px = 1.05 * f;
  ts.bold = true;
  ts.color = kInk;
  ts.width = w - 2 * m;
  auto rows_per_page = [&](int title_h) { return std::max(1, (opt.max_page_height - 2 * m - title_h + g) / (cell_h + g)); };
  int title_h = static_cast<int>(std::ceil(probe.measure(title, ts).h)) + g;
  if (rows_per_page(title_h) * cols < static_cast<int>(items.size()))  // pages: the title says which
    title_h = static_cast<int>(std::ceil(probe.measure(title + " (page 99 of 99)", ts).h)) + g;
  const int per_page = rows_per_page(title_h) * cols;
  const int pages = (static_cast<int>(items.size()) + per_page - 1) / per_page;
  std::vector<std::string> out;
  const fs::path p(path);
  FigureOptions fo;
  fo.dpi = opt.dpi;
  fo.provenance = opt.provenance;
  for (int page = 0; page < pages; ++page) {
    const int first = page * per_page, n = std::min(per_page, static_cast<int>(items.size()) - first);
    const int rows = (n + cols - 1) / cols;
    const int h = m + title_h + rows * cell_h + (rows - 1) * g + m;
    const std::string base = pages == 1 ? (p.parent_path() / p.stem()).string()
                                        : (p.parent_path() / (p.stem().string() + "-" + std::to_string(page + 1))).string();
    const std::string head = pages == 1 ? title
                                        : title + " (page " + std::to_string(page + 1) + " of " + std::to_string(pages) + ")";
    std::vector<std::string> why;
    const std::vector<Image> thumbs = page_thumbnails(items, sizes, first, n, &why);
    const auto written = emit(base, fo, w, h, [&](Canvas& c) {
      c.text(head, m, m, ts);
      for (int i = 0; i < n; ++i) {
        const SheetItem& it = items[static_cast<size_t>(first + i)];
        const auto [iw, ih] = sizes[static_cast<size_t>(first + i)];
        const int x = m + (i % cols) * (t + g), y = m + title_h + (i / cols) * (cell_h + g);
        const Image& thumb = thumbs[static_cast<size_t>(i)];
        if (thumb.width > 0)
          c.image(thumb, x + (t - iw) / 2, y + (pic_h - ih), iw, ih, Filter::Nearest);
        else
          draw_placeholder(c, x, y, t, pic_h, why[static_cast<size_t>(i)], name);
        c.text(it.name, x, y + pic_h + f / 3, name);
        c.text(it.detail, x, y + pic_h + f / 3 + line, detail);
      }
    });
    out.insert(out.end(), written.begin(), written.end());
  }
  return out;
}

}  // namespace attnmap
