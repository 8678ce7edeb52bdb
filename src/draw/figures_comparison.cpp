// figures_comparison.cpp - the comparison figure (`attnmap figure`): layout, colour bars (see figures.hpp)
#include <algorithm>
#include <cctype>
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
  fo.in_memory = opt.in_memory;
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
  if (!opt.captions.empty() && opt.captions.size() != rows.size())
    throw Error("figure: " + std::to_string(opt.captions.size()) + " rows of captions for " + std::to_string(rows.size()) + " rows");
  for (const auto& c : opt.captions)
    if (c.size() != nmaps)
      throw Error("figure: " + std::to_string(c.size()) + " captions for " + std::to_string(nmaps) + " map columns");
}

Error too_narrow(double width_in, double dpi, int ncols) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%g in at %g dpi leave cells under 16 pixels for %d columns", width_in, dpi, ncols);
  return Error("figure: " + std::string(buf) + " (a wider figure or more dots per inch)");
}

/// Where everything of a comparison figure goes, in pixels.
struct ComparisonLayout {
  int w = 0, h = 0;
  double f = 0, m = 0, g = 0, line_h = 0, x0 = 0, cell_w = 0, y0 = 0, total = 0;
  double label_col = 0;          ///< the row labels' column: one line, or as many as they wrap onto
  std::vector<double> row_h;     ///< the cells' heights (a row's caption line, cap_h, under them)
  double cap_h = 0;              ///< the caption line under each row's cells (ComparisonOptions::captions); 0: none
  TextStyle caption;
  std::optional<ColorBar> vbar;  ///< one scale for every map column: the bar at the right, from bx
  double bx = 0, right = 0;
  std::vector<BarSpan> spans;    ///< otherwise: a bar under each run, at bars_y
  std::vector<HBar> hbars;
  double bars_y = 0, note_y = 0, title_h = 0, titles_h = 0;
  TextStyle label, note, heading;
  TextStyle title_style, row_style;  ///< the column titles' and the row labels' one size, wrapped at whole words
  std::vector<std::string> titles;   ///< the column titles as drawn: a long one broken after a comma
  std::vector<std::string> row_labels;  ///< the row labels as drawn (with_name_breaks when they need them)
  std::string misfit, misfit_what;   ///< the first label that does not fit, even at kMinLabelPt ("": none)
  void refuse(const std::string& text, const char* what) {
    if (misfit_what.empty()) misfit = text, misfit_what = what;
  }
};

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

/// The largest text size in [floor_px, ts.px] at which `text`, wrapped at whole words in `width`, keeps every
/// word inside it; 0 when even floor_px does not (a word is never cut: the figure is refused instead).
double whole_word_px(Canvas& probe, const std::string& text, TextStyle ts, double width, double floor_px) {
  ts.width = width;
  ts.whole_words = true;
  ts.ellipsize = false;
  for (int i = 0; i < 12; ++i) {
    const double w = probe.measure(text, ts).w;
    if (w <= width + 0.01) return ts.px;
    if (ts.px <= floor_px) return 0.0;
    ts.px = std::max(floor_px, ts.px * std::min(0.98, width / w));
  }
  return 0.0;
}

/// `text` with a break opportunity (U+200B, zero width) after every '_' and '/' and before a '.' between a
/// letter or digit and a letter: a file name "0002_bag.png" may then wrap as "0002_" "bag" ".png", at its
/// own separators, as a URL breaks after its slashes - never inside a run of letters.
std::string with_name_breaks(const std::string& text) {
  const auto alnum = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; };
  const auto alpha = [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)) != 0; };
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    const bool last = i + 1 == text.size();
    if (ch == '.' && i > 0 && !last && alnum(text[i - 1]) && alpha(text[i + 1])) out += "\u200b";
    out += ch;
    if ((ch == '_' || ch == '/') && !last && text[i + 1] != ' ') out += "\u200b";
  }
  return out;
}

/// `text` with what reads as one item kept on one line: a word joiner (U+2060) after an en dash or a hyphen
/// between digits ("rollout 0–3" never wraps as "rollout 0–" "3"), and no-break spaces (U+00A0) inside
/// parentheses ("query patch (10, 10)" never wraps as "(10," "10)").
std::string with_ranges_joined(const std::string& text) {
  const auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  static const std::string kEnDash = "\u2013";
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    depth += text[i] == '(' ? 1 : (text[i] == ')' && depth > 0 ? -1 : 0);
    if (text[i] == ' ' && depth > 0) {
      out += "\u00a0";
      continue;
    }
    const bool en = text.compare(i, kEnDash.size(), kEnDash) == 0;
    const size_t len = en ? kEnDash.size() : 1;
    out.append(text, i, len);
    if ((en || text[i] == '-') && i > 0 && digit(text[i - 1]) && i + len < text.size() && digit(text[i + len]))
      out += "\u2060";
    i += len - 1;
  }
  return out;
}

/// A label as drawn and its size: wrapped at its spaces at ts.px when every word fits `width`, else shrunk as
/// far as floor_px; only when a word is still too long there, with the breaks of with_name_breaks, at the
/// largest size (floor_px or more) that then fits; px 0: it does not fit even so.
std::pair<std::string, double> fitted_label(Canvas& probe, const std::string& text, const TextStyle& ts, double width,
                                            double floor_px) {
  const std::string joined = with_ranges_joined(text);
  if (const double px = whole_word_px(probe, joined, ts, width, floor_px); px > 0.0) return {joined, px};
  const std::string broken = with_name_breaks(joined);
  return {broken, whole_word_px(probe, broken, ts, width, floor_px)};
}

/// The cells for a row labels' column L.label_col wide: x0, cell_w, the rows' heights and their total.
void place_cells(ComparisonLayout& L, const std::vector<FigureRow>& rows, int ncols, const ComparisonOptions& opt) {
  L.x0 = L.m + L.label_col + L.g;
  L.cell_w = std::floor((L.right - L.x0 - (ncols - 1) * L.g) / ncols);
  if (L.cell_w < 16) throw too_narrow(opt.width_in, opt.dpi, ncols);
  L.row_h.clear();
  L.total = 0;
  for (const FigureRow& r : rows) {
    L.row_h.push_back(std::round(L.cell_w * r.photo->height / r.photo->width));
    L.total += L.row_h.back() + L.cap_h;
  }
  L.total += L.g * static_cast<double>(rows.size() - 1);
}

/// The row labels: upward beside their rows, wrapped at whole words to the row's height, in one size (the
/// label size, or smaller down to floor_px for a word longer than a row). Sets L.row_style and returns the
/// column they need (the most lines); *misfit: a label with a word too long even at floor_px.
double place_row_labels(Canvas& probe, ComparisonLayout& L, const std::vector<FigureRow>& rows, double floor_px,
                        std::string* misfit) {
  L.row_style = L.label;
  L.row_style.align = Align::Center;
  L.row_style.whole_words = true;
  misfit->clear();
  L.row_labels.clear();
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto [text, px] = fitted_label(probe, rows[r].label, L.label, L.row_h[r], floor_px);
    L.row_labels.push_back(text);
    if (px <= 0.0 && misfit->empty()) *misfit = rows[r].label;
    if (px > 0.0) L.row_style.px = std::min(L.row_style.px, px);
  }
  double need = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    TextStyle t = L.row_style;
    t.width = L.row_h[r];
    if (!rows[r].label.empty()) need = std::max(need, probe.measure(L.row_labels[r], t).h);
  }
  return need;
}

/// The column titles: one line at the label size when it fits the cell, else broken after a comma and
/// wrapped at whole words, in one size (shrunk down to floor_px for a word longer than a cell).
void place_titles(Canvas& probe, ComparisonLayout& L, const std::vector<std::string>& given, double floor_px) {
  L.title_style = L.label;
  L.title_style.align = Align::Center;
  L.title_style.whole_words = true;
  L.title_style.width = L.cell_w;
  for (const std::string& t : given) {
    const auto [text, px] = fitted_label(probe, broken_title(probe, t, L.label, L.cell_w), L.label, L.cell_w, floor_px);
    L.titles.push_back(text);
    if (px <= 0.0) L.refuse(t, "column title");
    else L.title_style.px = std::min(L.title_style.px, px);
  }
  L.titles_h = probe.measure("Ag", L.title_style).h;
  for (const std::string& t : L.titles)
    if (!t.empty()) L.titles_h = std::max(L.titles_h, probe.measure(t, L.title_style).h);
}

ComparisonLayout comparison_layout(Canvas& probe, const std::vector<std::string>& titles,
                                   const std::vector<FigureRow>& rows, const ComparisonScales& scales,
                                   const ComparisonOptions& opt, double bar_len = 0.0) {
  ComparisonLayout L;
  L.w = static_cast<int>(std::lround(opt.width_in * opt.dpi));
  L.f = 8.0 * opt.dpi / 72.0;  // 8 pt
  const double floor_px = kMinLabelPt * opt.dpi / 72.0;
  L.m = 0.5 * L.f;
  L.g = 0.3 * L.f;
  L.label.px = L.f;
  L.label.color = kInk;
  L.line_h = probe.measure("Ag", L.label).h;
  L.caption = L.label;  // the cells' captions: centred under each cell, one line, a little smaller
  L.caption.px = 0.9 * L.f;
  L.caption.align = Align::Center;
  if (!opt.captions.empty()) L.cap_h = std::ceil(probe.measure("Ag", L.caption).h + 0.2 * L.g);
  const int shared = one_scale(scales);
  if (shared >= 0) L.vbar.emplace(probe, scales.scales[static_cast<size_t>(shared)], 0.9 * L.f, bar_len);
  const int ncols = static_cast<int>(titles.size());
  L.bx = L.vbar ? L.w - L.m - L.vbar->width() : L.w - L.m;
  L.right = L.vbar ? L.bx - 2 * L.g : L.bx;
  // The row labels' column: a line, or the lines they wrap onto along rows that shrink as it widens.
  L.label_col = L.line_h;
  std::string row_misfit;
  for (int round = 0;; ++round) {
    place_cells(L, rows, ncols, opt);
    const double need = place_row_labels(probe, L, rows, floor_px, &row_misfit);
    if (need <= L.label_col + 0.5) break;
    if (round == 6 && row_misfit.empty()) row_misfit = rows[0].label;  // no column wide enough: refused
    if (round == 6) break;
    L.label_col = std::ceil(need);
  }
  if (!row_misfit.empty()) L.refuse(row_misfit, "row label");
  for (const auto& row : opt.captions)  // one line each, measured unwrapped
    for (const std::string& c : row)
      if (!c.empty() && probe.measure(c, L.caption).w > L.cell_w + 0.01) L.refuse(c, "cell caption");
  L.caption.width = L.cell_w;  // drawn centred in the cell
  place_titles(probe, L, opt.column_labels.empty() ? titles : opt.column_labels, floor_px);
  L.heading = L.label;
  L.heading.px = 1.05 * L.f;
  L.heading.bold = true;
  L.heading.width = L.w - 2 * L.m;
  L.heading.whole_words = true;
  if (!opt.title.empty()) {
    const TextSize t = probe.measure(opt.title, L.heading);
    if (t.w > L.heading.width + 0.01) L.refuse(opt.title, "title");
    L.title_h = std::ceil(t.h) + L.g;
  }
  if (L.vbar && !L.vbar->scale.units.empty() && widest_word(probe, L.vbar->scale.units, L.vbar->units_style()) > L.total)
    L.refuse(L.vbar->scale.units, "colour bar's units");
  L.y0 = L.m + L.title_h + std::max(L.titles_h + L.g, L.vbar ? L.vbar->above() : 0.0);
  double y = L.y0 + L.total;
  if (!L.vbar) {
    L.spans = bar_spans(titles, scales.column_scale);
    double bar_h = 0;
    for (const BarSpan& s : L.spans) {
      const double span_w = (s.last - s.first + 1) * L.cell_w + (s.last - s.first) * L.g;
      L.hbars.emplace_back(probe, scales.scales[static_cast<size_t>(s.scale)], 0.9 * L.f, 0.8 * span_w);
      if (L.hbars.back().units_w > span_w + 0.01) L.refuse(L.hbars.back().units, "colour bar's units");
      bar_h = std::max(bar_h, L.hbars.back().height());
    }
    L.bars_y = y + 1.5 * L.g;
    if (!L.spans.empty()) y = L.bars_y + bar_h;
  }
  L.note = L.label;
  L.note.px = 0.85 * L.f;
  L.note.color = kGrey;
  L.note.width = L.w - 2 * L.m;
  L.note.whole_words = true;
  L.note_y = y + 1.5 * L.g;
  if (!opt.note.empty()) {
    const TextSize t = probe.measure(opt.note, L.note);
    if (t.w > L.note.width + 0.01) L.refuse(opt.note, "note");
    y = L.note_y + t.h;
  }
  L.h = static_cast<int>(std::ceil(y + L.m));
  return L;
}

/// comparison_layout as write_comparison draws it: when the shared bar's units are longer than the bar, laid out
/// again with them wrapped to its height (the bar then narrower or wider: other cells).
ComparisonLayout drawn_layout(Canvas& probe, const std::vector<std::string>& titles, const std::vector<FigureRow>& rows,
                              const ComparisonScales& scales, const ComparisonOptions& opt) {
  ComparisonLayout L = comparison_layout(probe, titles, rows, scales, opt);
  if (L.vbar && !L.vbar->scale.units.empty() && probe.measure(L.vbar->scale.units, L.vbar->units_style()).w > L.total)
    L = comparison_layout(probe, titles, rows, scales, opt, L.total);
  return L;
}

std::string width_words(double width_in) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", width_in);
  return buf;
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

ComparisonFit comparison_fit(const std::vector<std::string>& column_titles, const std::vector<FigureRow>& rows,
                             const ComparisonScales& scales, const ComparisonOptions& opt, bool as_drawn) {
  check_comparison(column_titles, rows, scales, opt);
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  ComparisonFit out;
  const auto layout = [&](const ComparisonOptions& o) {
    return as_drawn ? drawn_layout(probe, column_titles, rows, scales, o)
                    : comparison_layout(probe, column_titles, rows, scales, o);
  };
  const ComparisonLayout L = layout(opt);  // cells under 16 px: thrown
  out.w = L.w;
  out.h = L.h;
  if (L.misfit_what.empty()) return out;
  out.fits = false;
  out.label = L.misfit;
  out.what = L.misfit_what;
  // The smallest width in tenths of an inch at which every label fits (wider cells hold longer words).
  const auto fits_at = [&](int tenths) {
    ComparisonOptions o = opt;
    o.width_in = tenths / 10.0;
    try {
      return layout(o).misfit_what.empty();
    } catch (const Error&) {
      return false;
    }
  };
  int lo = static_cast<int>(std::floor(opt.width_in * 10.0 + 1e-9)), hi = 1000;
  if (!fits_at(hi)) return out;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (fits_at(mid) ? hi : lo) = mid;
  }
  out.needed_in = hi / 10.0;
  return out;
}

bool comparison_fits(const std::vector<std::string>& column_titles, const std::vector<FigureRow>& rows,
                     const ComparisonScales& scales, const ComparisonOptions& opt, bool as_drawn) {
  check_comparison(column_titles, rows, scales, opt);
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  return (as_drawn ? drawn_layout(probe, column_titles, rows, scales, opt)
                   : comparison_layout(probe, column_titles, rows, scales, opt))
      .misfit_what.empty();
}

std::pair<int, int> comparison_pixels(const std::vector<std::string>& column_titles, const std::vector<FigureRow>& rows,
                                      const ComparisonScales& scales, const ComparisonOptions& opt) {
  check_comparison(column_titles, rows, scales, opt);
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  const ComparisonLayout L = comparison_layout(probe, column_titles, rows, scales, opt);
  return {L.w, L.h};
}

std::string write_comparison(const std::string& path, const std::vector<std::string>& column_titles,
                             const std::vector<FigureRow>& rows, const ComparisonScales& scales,
                             const StyleOptions& st, const ComparisonOptions& opt) {
  const FigureOptions fo = comparison_output(path, opt);
  check_comparison(column_titles, rows, scales, opt);
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  const ComparisonLayout L = drawn_layout(probe, column_titles, rows, scales, opt);
  if (!L.misfit_what.empty())
    throw Error("figure: the " + L.misfit_what + " '" + L.misfit + "' does not fit its place at " +
                width_words(opt.width_in) + " in, even wrapped and at " + width_words(kMinLabelPt) +
                " pt (a word is never cut)");
  if (L.w > kMaxCanvas || L.h > kMaxCanvas)  // before every cell is drawn (the engine refuses such a figure sooner)
    throw Error(over_canvas_limit("figure", L.w, L.h) + " (" + width_words(opt.width_in) + " in wide at " +
                width_words(opt.dpi) + " dpi)");
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
  const auto written = emit(fs::path(path).replace_extension("").string(), fo, L.w, L.h, [&](Canvas& c) {
    if (!opt.title.empty()) c.text(opt.title, L.m, L.m, L.heading);
    for (int k = 0; k < ncols; ++k) {  // wrapped to the cell, centred, the last line just above the pictures
      const std::string& t = L.titles[static_cast<size_t>(k)];
      if (!t.empty()) c.text(t, col_x(k), L.y0 - L.g / 2 - c.measure(t, L.title_style).h, L.title_style);
    }
    double y = L.y0;
    for (size_t r = 0; r < rows.size(); ++r) {
      TextStyle rl = L.row_style;  // upward, wrapped to the row's height, centred beside it
      rl.width = L.row_h[r];
      rl.vertical = true;
      if (!rows[r].label.empty()) c.text(L.row_labels[r], L.m + L.label_col / 2, y + L.row_h[r] / 2, rl);
      for (int k = 0; k < ncols; ++k)
        c.image(cells[r][static_cast<size_t>(k)], col_x(k), y, L.cell_w, L.row_h[r], Filter::Good);
      for (size_t k = 0, m = 0; !opt.captions.empty() && k < column_titles.size(); ++k) {  // m: map column
        if (column_titles[k] == "photo") continue;
        const std::string& cap = opt.captions[r][m++];
        if (!cap.empty()) c.text(cap, col_x(static_cast<int>(k)), y + L.row_h[r] + 0.2 * L.g, L.caption);
      }
      y += L.row_h[r] + L.cap_h + L.g;
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
