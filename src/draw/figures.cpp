#include "draw/figures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "draw/colormap.hpp"
#include "draw/figures_internal.hpp"
#include "draw/overlay.hpp"

namespace attnmap {

using namespace detail;

Style parse_style(const std::string& s) {
  if (s == "overlay") return Style::Overlay;
  if (s == "mask") return Style::Mask;
  if (s == "contour") return Style::Contour;
  throw Error("expects overlay, mask or contour, found '" + s + "'");
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

void outline_patch(Image& img, const PhotoBox& box, int grid_w, int grid_h, int patch) {
  if (patch < 0) return;
  if (grid_w <= 0 || grid_h <= 0 || patch >= grid_w * grid_h)
    throw Error("outline_patch: patch " + std::to_string(patch) + " is outside the " + std::to_string(grid_h) + "x" +
                std::to_string(grid_w) + " grid");
  const int r = patch / grid_w, c = patch % grid_w;
  // The cell's pixels, as upsampling lays the grid over the box: [x0, x1) x [y0, y1).
  const int x0 = box.x0 + static_cast<int>(std::lround(static_cast<double>(c) * box.w / grid_w));
  const int x1 = box.x0 + static_cast<int>(std::lround(static_cast<double>(c + 1) * box.w / grid_w));
  const int y0 = box.y0 + static_cast<int>(std::lround(static_cast<double>(r) * box.h / grid_h));
  const int y1 = box.y0 + static_cast<int>(std::lround(static_cast<double>(r + 1) * box.h / grid_h));
  const int t = std::max(1, std::min(x1 - x0, y1 - y0) / 12);
  auto frame = [&](int inset, uint8_t v) {  // a frame `t` wide, `inset` pixels inside the cell's edge
    for (int y = y0 + inset; y < y1 - inset; ++y)
      for (int x = x0 + inset; x < x1 - inset; ++x) {
        const bool edge = x < x0 + inset + t || x >= x1 - inset - t || y < y0 + inset + t || y >= y1 - inset - t;
        if (edge && x >= 0 && y >= 0 && x < img.width && y < img.height) std::fill_n(&img.rgb[at(x, y, img.width)], 3, v);
      }
  };
  frame(0, 0);
  frame(t, 255);
}

namespace {

Image draw_styled_unmarked(const Image& photo, const PhotoBox& box, const GridMap& map, const Scale& scale,
                           const StyleOptions& st) {
  if (!st.cmap) throw Error("draw: no colour map");
  if (!(st.alpha >= 0.0f && st.alpha <= 1.0f)) throw Error("the opacity must be in [0, 1], found " + std::to_string(st.alpha));
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

}  // namespace

Image draw_styled(const Image& photo, const PhotoBox& box, const GridMap& map, const Scale& scale,
                  const StyleOptions& st) {
  check_fit(photo, box, map, "draw");
  Image out = draw_styled_unmarked(photo, box, map, scale, st);
  outline_patch(out, box, map.grid_w, map.grid_h, map.marked);
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
  outline_patch(out, box, map.grid_w, map.grid_h, map.marked);
  return out;
}

// ---- shared pieces ------------------------------------------------------------------------------------

namespace detail {

int text_px(int cell) { return std::clamp(static_cast<int>(std::lround(cell / 16.0)), 11, 48); }

TextStyle fit(Canvas& c, const std::string& text, TextStyle ts, double width, double min_px) {
  for (int i = 0; i < 3 && ts.px * 0.9 >= min_px && c.measure(text, ts).w > width; ++i) ts.px *= 0.9;
  if (c.measure(text, ts).w > width) {
    ts.width = width;
    ts.ellipsize = true;
  }
  return ts;
}

TextStyle wrapped(TextStyle ts, double width) {
  ts.width = width;
  ts.ellipsize = false;
  ts.align = Align::Center;
  return ts;
}

TextStyle shortened(Canvas& c, const std::string& text, TextStyle ts, double width) {
  if (c.measure(text, ts).w > width) {
    ts.width = width;
    ts.ellipsize = true;
  }
  return ts;
}

double paper_width(const FigureOptions& opt, FigureFormat format, double vector_default) {
  if (opt.width_in > 0.0) return opt.width_in;
  if (opt.width_in < 0.0) return 0.0;
  return format == FigureFormat::Png ? 0.0 : vector_default;
}

int paper_text_px(double width_in, const std::function<int(int)>& width_of) {
  const double k = kPaperTextPt / 72.0 / width_in;  // text pixels per layout pixel of width
  // width_of(f) = A + B f roughly (the pictures' part A fixed, margins, labels and bar B f): a solution of
  // f = k (A + B f) needs k B < 1, i.e. text whose own share of the width leaves room for the pictures.
  const double w10 = width_of(10), b = (width_of(110) - w10) / 100.0;
  auto too_narrow = [&] {
    char msg[160];
    std::snprintf(msg, sizeof msg, "the figure is too narrow for its text: at %g in, %g pt labels leave no room "
                  "for the pictures (make ", width_in, kPaperTextPt);
    return Error(msg + setting_ref("width_in") + " larger)");
  };
  if (k * b >= 0.95) throw too_narrow();
  // The smallest f whose layout is narrow enough for its text to come out at least kPaperTextPt points
  // (f >= k width_of(f)), counted up from k width_of(1) (width_of grows with f, so no smaller f can do):
  // labels that wrap make width_of jump where a line is added, so neither a straight line through two of
  // its values nor bisection finds it.
  const int f0 = std::max(1, static_cast<int>(std::ceil(k * width_of(1))));
  for (int f = f0; f < f0 + 2000; ++f)
    if (f >= k * width_of(f)) return f;
  throw too_narrow();
}

std::string keep(const FigureOptions& opt, Canvas& c, const std::string& path, FigureFormat format) {
  std::vector<uint8_t> bytes = c.encode(path);
  if (opt.in_memory) opt.in_memory->push_back(FigureFile{path, format, std::move(bytes), opt.provenance});
  else write_file_atomic(path, bytes);
  return path;
}

namespace {

/// The PNG's size of a w x h layout drawn width_in inches wide at `dpi` (Canvas's png_scale, rounded alike).
std::pair<int, int> png_pixels(int w, int h, double width_in, double dpi) {
  const double k = width_in * dpi / w;
  return {std::max(1, static_cast<int>(std::lround(w * k))), std::max(1, static_cast<int>(std::lround(h * k)))};
}

/// Refuses a PNG of a w x h layout over kMaxCanvas at width_in and opt.dpi, before it is drawn: its size, the
/// limit, the largest whole dpi that fits it, and that a PDF or SVG (laid out in the photo's pixels) is not held
/// to the limit.
void check_png_pixels(int w, int h, double width_in, double dpi) {
  const auto [pw, ph] = png_pixels(w, h, width_in, dpi);
  if (pw <= kMaxCanvas && ph <= kMaxCanvas) return;
  int fit = static_cast<int>(std::floor(dpi * kMaxCanvas / std::max(pw, ph)));
  for (; fit >= 1; --fit) {
    const auto [fw, fh] = png_pixels(w, h, width_in, fit);
    if (fw <= kMaxCanvas && fh <= kMaxCanvas) break;
  }
  throw Error(over_canvas_limit("figure", pw, ph) + " (a PNG " + shown_number(width_in) + " in wide at " +
              shown_number(dpi) + " dpi); make it smaller: " +
              (fit >= 1 ? setting_ref("dpi") + " " + std::to_string(fit) + " or lower, or " : "") + "a smaller " +
              setting_ref("width_in") + " (a PDF or SVG, " + setting_ref("figure_format") +
              " pdf, is not held to this limit)");
}

}  // namespace

std::string emit_at(const std::string& base, const FigureOptions& opt, FigureFormat format, double width_in, int w,
                    int h, const std::function<void(Canvas&)>& draw) {
  FigureOptions one = opt;
  one.formats = {format};
  if (width_in <= 0.0) return emit(base, one, w, h, draw).at(0);
  // PDF/SVG: pixels / dpi inches = width_in; PNG: the layout scaled to width_in x dpi pixels.
  if (format == FigureFormat::Png) check_png_pixels(w, h, width_in, opt.dpi);
  const double page_dpi = format == FigureFormat::Png ? opt.dpi : w / width_in;
  Canvas c(w, h, page_dpi, format, width_in * opt.dpi / w);
  c.set_provenance(opt.provenance);
  draw(c);
  return keep(opt, c, base + figure_extension(format), format);
}

std::vector<std::string> emit(const std::string& base, const FigureOptions& opt, int w, int h,
                              const std::function<void(Canvas&)>& draw) {
  if (opt.formats.empty()) throw Error("figure: no output format");
  std::vector<std::string> out;
  for (FigureFormat f : opt.formats) {
    Canvas c(w, h, opt.dpi, f);
    c.set_provenance(opt.provenance);
    draw(c);
    out.push_back(keep(opt, c, base + figure_extension(f), f));
  }
  return out;
}

}  // namespace detail

std::string over_canvas_limit(const std::string& what, int w, int h, bool at_least) {
  return "the " + what + " would be " + (at_least ? "at least " : "") + std::to_string(w) + " \u00d7 " + std::to_string(h) + " pixels, over cairo's limit of " +
         std::to_string(kMaxCanvas) + " pixels a side";
}

void check_figure_width(double width_in, double dpi, const std::string& also) {
  const auto width_at = [](double in, double d) { return std::lround(in * d); };
  if (!(width_in > 0.0 && dpi > 0.0) || width_at(width_in, dpi) <= kMaxCanvas) return;
  int fit = static_cast<int>(std::floor(kMaxCanvas / width_in));
  while (fit >= 1 && width_at(width_in, fit) > kMaxCanvas) --fit;
  double in = std::floor(10.0 * kMaxCanvas / dpi) / 10.0;
  while (in > 0.0 && width_at(in, dpi) > kMaxCanvas) in -= 0.1;
  std::string fixes;
  if (fit >= 1) fixes += setting_ref("dpi") + " " + std::to_string(fit) + " or lower at this width";
  if (in > 0.0) fixes += (fixes.empty() ? "" : ", or ") + setting_ref("width_in") + " " + shown_number(in) + " or less at this dpi";
  throw Error("figures " + shown_number(width_in) + " in wide at " + shown_number(dpi) + " dpi would be " +
              std::to_string(width_at(width_in, dpi)) + " pixels wide, over cairo's limit of " + std::to_string(kMaxCanvas) +
              " pixels a side" + (fixes.empty() ? "" : ": " + fixes) + also);
}

namespace {

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

std::vector<std::string> panel_columns(const StyleOptions& st) { return {"photo", "map", style_name(st)}; }

bool same_scale(const Scale& a, const Scale& b) { return a.vmin == b.vmin && a.vmax == b.vmax && a.units == b.units; }

}  // namespace

// ---- panel ---------------------------------------------------------------------------------------------

namespace {

/// Where a panel's parts go for a photo of pw x ph: margins, the row labels' column, the colour bar(s) and
/// the canvas size.
struct PanelLayout {
  int f = 0, m = 0, g = 0, label_w = 0, x0 = 0, bx = 0, w = 0, h = 0, y0 = 0, col_h = 0;
  int above_h = 0;  ///< > 0: the row labels go across above their rows (a line this high), not upward beside them
  int row_extra = 0;  ///< room between rows for a row's colour bar units written under it
  int row_y(int r, int ph) const { return y0 + above_h + r * (ph + g + above_h + row_extra); }
  TextStyle label, title;
  std::vector<ColorBar> bars;
};

PanelLayout panel_layout(Canvas& probe, int pw, int ph, const std::string& title, const std::vector<PanelRow>& rows,
                         const std::vector<std::string>& cols, bool one_bar, int f) {
  PanelLayout l;
  l.f = f;
  l.m = l.f;
  l.g = l.f / 2;
  const int nrows = static_cast<int>(rows.size());
  l.label.px = 0.9 * l.f;
  l.label.color = kInk;
  // Row labels are written upward beside their rows when each fits the row's height on one line; else (a
  // short row: a landscape photo in a narrow paper panel) across, above each row, wrapped to the pictures'
  // width: whole words at the label size, never "…".
  const double line = probe.measure("Ag", l.label).h;
  bool upward = true;
  for (const PanelRow& r : rows) upward = upward && probe.measure(r.label, l.label).w <= ph;
  double above = 0;
  if (!upward)
    for (const PanelRow& r : rows) {
      TextStyle t = l.label;
      t.width = 3 * pw + 2 * l.g;
      above = std::max(above, probe.measure(r.label, t).h);
    }
  l.above_h = upward ? 0 : static_cast<int>(std::ceil(above)) + l.g / 2;
  const int rows_h = nrows * ph + (nrows - 1) * l.g + (nrows - 1) * l.above_h;
  const double bar_h = one_bar ? rows_h : ph;
  for (size_t i = 0; i < (one_bar ? 1 : rows.size()); ++i) l.bars.emplace_back(probe, rows[i].scale, l.f, bar_h, true);
  // One bar's units under it: every bar's (units beside one bar and under the next read as one label).
  bool any_below = false;
  for (const auto& b : l.bars) any_below = any_below || b.units_below;
  if (any_below)
    for (auto& b : l.bars) b.put_units_below(probe);
  double bar_w = 0, bar_below = 0;
  for (const auto& b : l.bars) bar_w = std::max(bar_w, b.width()), bar_below = std::max(bar_below, b.below());
  // Units under a row's bar are nearer their own bar than the next row's: a line's height of room after them.
  if (!one_bar && bar_below > 0)
    l.row_extra = std::max(0, static_cast<int>(std::ceil(bar_below + line)) - l.above_h);
  l.label_w = upward ? static_cast<int>(std::ceil(line)) + l.g : 0;
  l.x0 = l.m + l.label_w;
  l.bx = l.x0 + 3 * pw + 2 * l.g + 2 * l.g;
  l.w = l.bx + static_cast<int>(std::ceil(bar_w)) + l.m;
  l.title.px = 1.05 * l.f;
  l.title.bold = true;
  l.title.color = kInk;
  l.title.width = l.w - 2 * l.m;
  const int title_h = title.empty() ? 0 : static_cast<int>(std::ceil(probe.measure(title, l.title).h)) + l.g;
  // Column titles wrap at word boundaries to their picture's width.
  double col_lines = line;
  for (const std::string& c : cols) col_lines = std::max(col_lines, probe.measure(c, wrapped(l.label, pw)).h);
  l.col_h = static_cast<int>(std::ceil(col_lines)) + l.g / 2;
  l.y0 = l.m + title_h + std::max(l.col_h, static_cast<int>(std::ceil(l.bars[0].above())));
  // The last bar's units under it may reach past the last row.
  const int last_bottom = l.row_y(nrows - 1, ph) + ph;
  const int bar_bottom = (one_bar ? l.row_y(0, ph) + rows_h : last_bottom) + static_cast<int>(std::ceil(bar_below));
  l.h = std::max(last_bottom, bar_bottom) + l.m;
  return l;
}


std::string draw_panel(const std::string& base, const std::string& title, const Image& photo,
                       const std::vector<PanelRow>& rows, const std::vector<Image>& maps,
                       const std::vector<Image>& overlays, const PanelLayout& l, const StyleOptions& st,
                       const FigureOptions& opt, FigureFormat format, double width_in);

// The panel's layout for a photo of pw x ph at width_in inches (0: as drawn, text sized to the photo).
PanelLayout panel_at(Canvas& probe, int pw, int ph, const std::string& title, const std::vector<PanelRow>& rows,
                     const std::vector<std::string>& cols, bool one_bar, double width_in) {
  if (width_in <= 0.0) return panel_layout(probe, pw, ph, title, rows, cols, one_bar, text_px(std::min(pw, ph)));
  const int f = paper_text_px(width_in, [&](int g) { return panel_layout(probe, pw, ph, title, rows, cols, one_bar, g).w; });
  PanelLayout l = panel_layout(probe, pw, ph, title, rows, cols, one_bar, f);
  return l;
}

}  // namespace

std::vector<std::string> write_panel(const std::string& base, const std::string& title, const Image& full,
                                     const PhotoBox& full_box, const std::vector<PanelRow>& rows, const StyleOptions& st,
                                     const FigureOptions& opt) {
  if (rows.empty()) throw Error("panel: no view to show");
  if (opt.formats.empty()) throw Error("figure: no output format");
  bool one_bar = true;
  for (const PanelRow& r : rows) one_bar = one_bar && same_scale(r.scale, rows[0].scale);
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  std::vector<std::string> out;
  Image scaled;
  std::vector<Image> maps, overlays;
  for (FigureFormat format : opt.formats) {
    const double width_in = paper_width(opt, format, kPanelWidthIn);
    // A cairo canvas is at most kMaxCanvas pixels a side: a photo too large for three columns of it (wider
    // than about 10,900 pixels) is drawn scaled down until the panel fits, its map box alike.
    const Image* photo = &full;
    PhotoBox box = full_box;
    PanelLayout l = panel_at(probe, full.width, full.height, title, rows, panel_columns(st), one_bar, width_in);
    for (int tries = 0; (l.w > kMaxCanvas || l.h > kMaxCanvas) && tries < 8; ++tries) {
      const double k = 0.995 * std::min(static_cast<double>(kMaxCanvas) / l.w, static_cast<double>(kMaxCanvas) / l.h);
      const int sw = std::max(1, static_cast<int>(photo->width * k)), sh = std::max(1, static_cast<int>(photo->height * k));
      box = scale_box(full_box, full.width, full.height, sw, sh);
      scaled = resize_photo(full, sw, sh);
      photo = &scaled;
      l = panel_at(probe, sw, sh, title, rows, panel_columns(st), one_bar, width_in);
    }
    if (maps.empty() || maps[0].width != photo->width || maps[0].height != photo->height) {
      maps.clear();
      overlays.clear();
      for (const PanelRow& r : rows) {
        overlays.push_back(draw_styled(*photo, box, r.map, r.scale, st));
        maps.push_back(draw_map_alone(photo->width, photo->height, box, r.map, r.scale, st));
      }
    }
    out.push_back(draw_panel(base, title, *photo, rows, maps, overlays, l, st, opt, format, width_in));
  }
  return out;
}

namespace {
std::string draw_panel(const std::string& base, const std::string& title, const Image& photo,
                       const std::vector<PanelRow>& rows, const std::vector<Image>& maps,
                       const std::vector<Image>& overlays, const PanelLayout& l, const StyleOptions& st,
                       const FigureOptions& opt, FigureFormat format, double width_in) {
  const int pw = photo.width, ph = photo.height;
  const bool one_bar = l.bars.size() == 1;
  const int nrows = static_cast<int>(rows.size());
  return emit_at(base, opt, format, width_in, l.w, l.h, [&](Canvas& c) {
    c.text(title, l.m, l.m, l.title);
    const std::vector<std::string> cols = panel_columns(st);
    for (int k = 0; k < 3; ++k) {  // wrapped to the column, the last line just above the pictures
      const TextStyle ct = wrapped(l.label, pw);
      const double th = c.measure(cols[static_cast<size_t>(k)], ct).h;
      c.text(cols[static_cast<size_t>(k)], l.x0 + k * (pw + l.g), l.y0 - l.g / 2.0 - th, ct);
    }
    for (int r = 0; r < nrows; ++r) {
      const int y = l.row_y(r, ph);
      if (l.above_h > 0) {  // across, above the row
        TextStyle rl = l.label;
        rl.width = 3 * pw + 2 * l.g;
        c.text(rows[static_cast<size_t>(r)].label, l.x0, y - l.above_h, rl);
      } else {
        TextStyle rl = l.label;
        rl.vertical = true;
        rl.align = Align::Center;
        c.text(rows[static_cast<size_t>(r)].label, l.m + (l.label_w - l.g) / 2.0, y + ph / 2.0, rl);
      }
      c.image(photo, l.x0, y, pw, ph, Filter::Nearest);
      c.image(maps[static_cast<size_t>(r)], l.x0 + pw + l.g, y, pw, ph, Filter::Nearest);
      c.image(overlays[static_cast<size_t>(r)], l.x0 + 2 * (pw + l.g), y, pw, ph, Filter::Nearest);
      if (!one_bar) {  // a bar's extend triangle stays inside its row: the bar starts that much lower
        const ColorBar& b = l.bars[static_cast<size_t>(r)];
        b.draw(c, st.cmap, l.bx, y + (r > 0 ? b.extend_h() : 0.0), ph - (r > 0 ? b.extend_h() : 0.0));
      }
    }
    if (one_bar) l.bars[0].draw(c, st.cmap, l.bx, l.row_y(0, ph), l.row_y(nrows - 1, ph) + ph - l.row_y(0, ph));
  });
}
}  // namespace

// ---- strips and the heads grid -------------------------------------------------------------------------

TilePhoto tile_photo(const Image& photo, const PhotoBox& box, int tile_long) {
  if (tile_long < 16) throw Error("figure: tiles under 16 pixels");
  if (photo.width <= 0 || photo.height <= 0) throw Error("figure: empty photo");
  const double s = static_cast<double>(tile_long) / std::max(photo.width, photo.height);
  const int tw = std::max(1, static_cast<int>(std::lround(photo.width * s)));
  const int th = std::max(1, static_cast<int>(std::lround(photo.height * s)));
  return TilePhoto{resize_photo(photo, tw, th), scale_box(box, photo.width, photo.height, tw, th)};
}

namespace {

/// Where a tile figure's parts go with base text f pixels.
struct TileLayout {
  int f = 0, m = 0, g = 0, cols = 0, rows = 0, label_h = 0, grid_w = 0, grid_h = 0, bx = 0, w = 0, h = 0, y0 = 0;
  bool full = false;
  int note_h = 0;
  TextStyle label, ts, ns;
  std::vector<ColorBar> bar;
};

TileLayout tile_layout(Canvas& probe, const TileFigure& fig, int n, int tw, int th,
                       const std::vector<std::string>& labels, int cols, int f) {
  TileLayout L;
  L.f = f;
  L.cols = cols;
  L.rows = (n + cols - 1) / cols;
  L.m = f;
  L.g = f / 2;
  const int m = L.m, g = L.g, rows = L.rows;
  L.label.px = 0.85 * f;
  L.label.color = kInk;
  L.label.width = tw;  // a label wider than its tile wraps (narrow tiles of tall photos)
  double label_max = probe.measure("Ag", L.label).h;
  for (const std::string& l : labels) label_max = std::max(label_max, probe.measure(l, L.label).h);
  L.label_h = static_cast<int>(std::ceil(label_max)) + g / 2;
  L.grid_h = rows * (L.label_h + th) + (rows - 1) * g;
  if (fig.scale) L.bar.emplace_back(probe, *fig.scale, f, L.grid_h - L.label_h);
  L.grid_w = cols * tw + (cols - 1) * g;
  L.bx = m + L.grid_w + 2 * g;
  L.w = L.bar.empty() ? m + L.grid_w + m : L.bx + static_cast<int>(std::ceil(L.bar[0].width())) + m;
  L.ts.px = 1.05 * f;
  L.ts.bold = true;
  L.ts.color = kInk;
  L.ts.width = L.w - 2 * m;
  const int title_h = fig.title.empty() ? 0 : static_cast<int>(std::ceil(probe.measure(fig.title, L.ts).h)) + g;
  L.ns = L.label;
  L.ns.color = kGrey;
  L.ns.width = (cols * rows - n) * (tw + g) - g;
  // The note goes into the empty cells of the last row when it fits there, else under the grid.
  L.full = n == rows * cols || probe.measure(fig.note, L.ns).h > th;
  if (L.full) L.ns.width = L.grid_w;
  L.note_h = L.full && !fig.note.empty() ? static_cast<int>(std::ceil(probe.measure(fig.note, L.ns).h)) + g : 0;
  const int above = L.bar.empty() ? 0 : static_cast<int>(std::ceil(L.bar[0].above()));
  L.y0 = m + title_h + std::max(0, above - L.label_h);
  L.h = L.y0 + L.grid_h + L.note_h + m;
  return L;
}

void draw_tiles(Canvas& c, const TileFigure& fig, const std::vector<Image>& tiles,
                const std::vector<std::string>& labels, const TileLayout& L) {
  const int n = static_cast<int>(tiles.size()), tw = tiles[0].width, th = tiles[0].height;
  const int m = L.m, g = L.g, cols = L.cols;
  c.text(fig.title, m, m, L.ts);
  for (int i = 0; i < n; ++i) {
    const int x = m + (i % cols) * (tw + g), y = L.y0 + (i / cols) * (L.label_h + th + g);
    c.text(labels[static_cast<size_t>(i)], x, y, L.label);
    c.image(tiles[static_cast<size_t>(i)], x, y + L.label_h, tw, th, Filter::Nearest);
  }
  if (!fig.note.empty()) {
    if (L.full) {
      c.text(fig.note, m, L.y0 + L.grid_h + g, L.ns);
    } else {
      const int x = m + (n % cols) * (tw + g), y = L.y0 + (L.rows - 1) * (L.label_h + th + g) + L.label_h;
      c.text(fig.note, x, y, L.ns);
    }
  }
  if (!L.bar.empty()) L.bar[0].draw(c, fig.cmap, L.bx, L.y0 + L.label_h, L.grid_h - L.label_h);
}

}  // namespace

int layer_strip_columns(int blocks) {
  if (blocks <= 6) return std::max(1, blocks);
  const int rows = (blocks + 5) / 6;
  return (blocks + rows - 1) / rows;
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
  if (opt.formats.empty()) throw Error("figure: no output format");
  int cols = fig.cols <= 0 ? static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n)))) : fig.cols;
  cols = std::min(cols, n);
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  std::vector<std::string> out;
  for (FigureFormat format : opt.formats) {
    const double width_in = paper_width(opt, format, kStripWidthIn);
    const int f = width_in > 0.0 ? paper_text_px(width_in, [&](int g) {
      return tile_layout(probe, fig, n, tw, th, labels, cols, g).w;
    })
                                 : text_px(std::max(tw, th));
    TileLayout L = tile_layout(probe, fig, n, tw, th, labels, cols, f);
    out.push_back(emit_at(base, opt, format, width_in, L.w, L.h, [&](Canvas& c) { draw_tiles(c, fig, tiles, labels, L); }));
  }
  return out;
}

}  // namespace attnmap
