// figures_sheet.cpp - the contact sheet: thumbnails made on threads, placeholders, pages (see figures.hpp)
#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "core/threads.hpp"
#include "draw/figures.hpp"
#include "draw/figures_internal.hpp"
#include "draw/overlay.hpp"

namespace attnmap {

using namespace detail;

namespace fs = std::filesystem;

namespace {

const Rgb kFailed{170, 20, 20};
const Rgb kPlaceholder{236, 236, 236};
const Rgb kLetterbox{244, 244, 244};

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
  run_on_threads(threads, work);  // fewer threads when the system refuses some
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

/// Each item's thumbnail size (longer side t; {0, 0} for a placeholder): the longer side t, but the shorter
/// at least t / 4 (a thin picture is not a sliver), the width at most t (the cell) and the height at most 2t.
/// Throws attnmap::Error for an item with neither a picture nor a placeholder.
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
    double s = std::max(static_cast<double>(t) / std::max(w, h), t / 4.0 / std::min(w, h));
    s = std::min({s, static_cast<double>(t) / w, 2.0 * t / h});
    sizes.emplace_back(std::max(1, static_cast<int>(std::lround(w * s))), std::max(1, static_cast<int>(std::lround(h * s))));
  }
  return sizes;
}

/// The UTF-8 characters of `s` (each a whole code point).
std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

/// `text` in at most `width` pixels at style `ts` (one line): as it is when it fits, else its first 40 % and
/// last 60 % of the characters that fit joined by "…" (no space added: "composites2/00…ouser_coat.png"
/// becomes "composites2/0001_t…ouser_coat.png" at the widest that fits).
std::string cut_middle(Canvas& c, const std::string& text, const TextStyle& ts, double width) {
  if (c.measure(text, ts).w <= width) return text;
  const std::vector<std::string> ch = utf8_chars(text);
  auto cut = [&](size_t keep) {
    const size_t head = keep * 2 / 5, tail = keep - head;
    std::string r;
    for (size_t i = 0; i < head; ++i) r += ch[i];
    r += "\u2026";
    for (size_t i = ch.size() - tail; i < ch.size(); ++i) r += ch[i];
    return r;
  };
  size_t lo = 0, hi = ch.size();  // the most characters kept that fit: lo fits (or is 0), hi does not
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    if (c.measure(cut(mid), ts).w <= width) lo = mid;
    else hi = mid;
  }
  return cut(lo);
}

// The colour bar right of the sheet's grid: the run's scale with its units, or (each thumbnail on its own
// min-max) a bar whose ends say "max" and "min"; none without a colour map.
static std::optional<ColorBar> sheet_color_bar(Canvas& probe, const SheetOptions& opt, int f) {
  std::optional<ColorBar> bar;
  if (!opt.cmap) return bar;
  if (opt.scale) {
    bar.emplace(probe, *opt.scale, f);
    return bar;
  }
  bar.emplace(probe, Scale{0.0, 1.0, "each map its own min\u2013max"}, f);
  bar->sets.ticks = {{0.0, 1.0}};
  bar->sets.labels = {{"min", "max"}};
  bar->sets.exponent.clear();
  bar->exponent.clear();
  bar->label_w = 0;
  for (const auto& l : bar->sets.labels[0]) bar->label_w = std::max(bar->label_w, probe.measure(l, bar->tick_style()).w);
  bar->sets.label_w = bar->label_w;
  return bar;
}

std::vector<std::string> write_contact_sheet(const std::string& path, const std::string& title,
                                             const std::vector<SheetItem>& items, const SheetOptions& opt) {
  if (items.empty()) throw Error("contact sheet: no image to show");
  if (fs::path(path).extension() != ".png") throw Error(path + ": a contact sheet is written as .png");
  if (opt.columns < 1) throw Error("the number of columns must be >= 1, found " + std::to_string(opt.columns));
  if (opt.thumb_long < 16) throw Error("contact sheet: thumbnails under 16 pixels");
  const int t = opt.thumb_long, f = text_px(t), m = f, g = f;
  Canvas probe(1, 1, opt.dpi, FigureFormat::Png);
  TextStyle name;
  name.px = 0.85 * f;
  name.bold = true;
  name.color = kInk;
  TextStyle detail = name;  // names and details are cut by cut_middle
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
  const std::optional<ColorBar> bar = sheet_color_bar(probe, opt, f);
  const int bar_w = bar ? static_cast<int>(std::ceil(bar->width())) + g : 0;
  const int w = 2 * m + cols * t + (cols - 1) * g + bar_w;
  if (w > kMaxCanvas)
    throw Error(over_canvas_limit("contact sheet", w, pic_h) + ": " + std::to_string(cols) + " thumbnails a row; " +
                setting_ref("sheet_columns") + " " + std::to_string(contact_sheet_max_columns(opt)) + " or fewer");
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
        if (thumb.width > 0) {  // letterboxed: centred on a light cell as wide as every cell
          c.fill_rect(x, y, t, pic_h, kLetterbox);
          c.image(thumb, x + (t - iw) / 2, y + (pic_h - ih) / 2, iw, ih, Filter::Nearest);
        } else {
          draw_placeholder(c, x, y, t, pic_h, why[static_cast<size_t>(i)], name);
        }
        c.text(cut_middle(c, it.name, name, t), x, y + pic_h + f / 3, name);
        c.text(cut_middle(c, it.detail, detail, t), x, y + pic_h + f / 3 + line, detail);
      }
      if (bar) {
        const double by = m + title_h + bar->above();
        const double bh = std::max(4.0 * f, std::min(rows, 2) * pic_h + (std::min(rows, 2) - 1) * (cell_h - pic_h + g) -
                                                 bar->above() - 0.6 * f);
        bar->draw(c, opt.cmap, w - m - bar->width(), by, bh);
      }
    });
    out.insert(out.end(), written.begin(), written.end());
  }
  return out;
}

int contact_sheet_max_columns(const SheetOptions& opt) {
  const int t = std::max(16, opt.thumb_long), f = text_px(t), m = f, g = f;
  const int bar_room = 12 * f;  // a colour bar with its tick labels and units: about 5 f; room to spare
  return std::max(1, (kMaxCanvas - 2 * m - bar_room + g) / (t + g));
}

}  // namespace attnmap
