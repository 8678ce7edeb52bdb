// figures_comparison.cpp - the comparison figure (`attnmap figure`): layout, colour bars (see figures.hpp)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/error.hpp"
#include "draw/figures.hpp"
#include "draw/figures_internal.hpp"

namespace attnmap {

using namespace detail;

namespace fs = std::filesystem;

namespace {

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
  if (!opt.column_labels.empty() && opt.column_labels.size() != titles.size())
    throw Error("figure: " + std::to_string(opt.column_labels.size()) + " column labels for " +
                std::to_string(titles.size()) + " columns");
  if (!(opt.width_in > 0.0 && opt.width_in <= 100.0))
    throw Error("the figure width must be in (0, 100] inches, found " + std::to_string(opt.width_in));
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
  return Error("figure: " + std::string(buf) + " (a wider figure or more dots per inch)");
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
  double bars_y = 0, note_y = 0, title_h = 0;
  TextStyle label, note, heading;
  std::vector<std::string> titles;  ///< the column titles as drawn: a long one broken after a comma
  int title_lines = 1;
};

// A title's lines ("a,\nb" -> {"a,", "b"}).
std::vector<std::string> title_lines(const std::string& t) {
  const size_t nl = t.find('\n');
  if (nl == std::string::npos) return {t};
  return {t.substr(0, nl), t.substr(nl + 1)};
}

// A column title too wide for its cell at the label size, broken after the comma nearest its middle
// ("block 3, mean, query patch (3, 3)" -> "block 3, mean,\nquery patch (3, 3)"); others unchanged.
std::string broken_title(Canvas& probe, const std::string& t, const TextStyle& ts, double width) {
  if (probe.measure(t, ts).w <= width) return t;
  size_t best = std::string::npos;
  for (size_t i = t.find(", "); i != std::string::npos; i = t.find(", ", i + 1))
    if (best == std::string::npos || std::abs(static_cast<double>(i) - static_cast<double>(t.size()) / 2.0) <
                                         std::abs(static_cast<double>(best) - static_cast<double>(t.size()) / 2.0))
      best = i;
  return best == std::string::npos ? t : t.substr(0, best + 1) + "\n" + t.substr(best + 2);
}

ComparisonLayout comparison_layout(Canvas& probe, const std::vector<std::string>& titles,
                                   const std::vector<FigureRow>& rows, const ComparisonScales& scales,
                                   const ComparisonOptions& opt, double bar_len = 0.0) {
  ComparisonLayout L;
  L.w = static_cast<int>(std::lround(opt.width_in * opt.dpi));
  L.f = 8.0 * opt.dpi / 72.0;  // 8 pt
  L.m = 0.5 * L.f;
  L.g = 0.3 * L.f;
  L.label.px = L.f;
  L.label.color = kInk;
  L.line_h = probe.measure("Ag", L.label).h;
  const int shared = one_scale(scales);
  if (shared >= 0) L.vbar.emplace(probe, scales.scales[static_cast<size_t>(shared)], 0.9 * L.f, bar_len);
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
  for (const std::string& t : opt.column_labels.empty() ? titles : opt.column_labels) {
    L.titles.push_back(broken_title(probe, t, L.label, L.cell_w));
    if (L.titles.back() != t) L.title_lines = 2;
  }
  L.heading = L.label;
  L.heading.px = 1.05 * L.f;
  L.heading.bold = true;
  L.heading.width = L.w - 2 * L.m;
  if (!opt.title.empty()) L.title_h = std::ceil(probe.measure(opt.title, L.heading).h) + L.g;
  L.y0 = L.m + L.title_h + std::max(L.title_lines * L.line_h + L.g, L.vbar ? L.vbar->above() : 0.0);
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
  if (!(width_in > 0.0 && width_in <= 100.0)) throw Error("the figure width must be in (0, 100] inches, found " + std::to_string(width_in));
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
  ComparisonLayout L = comparison_layout(probe, column_titles, rows, scales, opt);
  // The shared bar's units longer than the bar: laid out again with them wrapped to its height.
  if (L.vbar && !L.vbar->scale.units.empty() && probe.measure(L.vbar->scale.units, L.vbar->units_style()).w > L.total)
    L = comparison_layout(probe, column_titles, rows, scales, opt, L.total);
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
    for (const std::string& line : title_lines(L.titles[static_cast<size_t>(k)]))
      title_style.px = std::min(title_style.px, fit(probe, line, L.label, L.cell_w).px);
  for (size_t r = 0; r < rows.size(); ++r)
    row_style.px = std::min(row_style.px, fit(probe, rows[r].label, L.label, L.row_h[r]).px);
  const auto written = emit(fs::path(path).replace_extension("").string(), fo, L.w, L.h, [&](Canvas& c) {
    if (!opt.title.empty()) c.text(opt.title, L.m, L.m, L.heading);
    for (int k = 0; k < ncols; ++k) {
      const std::vector<std::string> lines = title_lines(L.titles[static_cast<size_t>(k)]);
      for (size_t i = 0; i < lines.size(); ++i) {  // each line on its own, centred (shortened if still too wide)
        TextStyle ct = shortened(c, lines[i], title_style, L.cell_w);
        ct.align = Align::Center;
        c.text(lines[i], ct.width > 0 ? col_x(k) : col_x(k) + L.cell_w / 2,
               L.y0 - (L.title_lines - static_cast<double>(i)) * L.line_h - L.g / 2, ct);
      }
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
      L.hbars[i].draw(c, st.cmap, col_x(L.spans[i].first) + 0.1 * span_w, L.bars_y);
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

}  // namespace attnmap
