#include "draw/canvas.hpp"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <pango/pangocairo.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

#include "core/error.hpp"
#include "core/threads.hpp"

namespace attnmap {

std::vector<FigureFormat> parse_figure_formats(const std::string& s) {
  std::vector<FigureFormat> out;
  std::stringstream in(s);
  const std::string bad = "expects a list of png, pdf, svg (e.g. png,pdf), found '" + s + "'";
  if (s.empty() || s.back() == ',') throw Error(bad);
  for (std::string item; std::getline(in, item, ',');) {
    FigureFormat f;
    if (item == "png") {
      f = FigureFormat::Png;
    } else if (item == "pdf") {
      f = FigureFormat::Pdf;
    } else if (item == "svg") {
      f = FigureFormat::Svg;
    } else {
      throw Error(bad);
    }
    for (FigureFormat g : out)
      if (g == f) throw Error("names " + item + " twice ('" + s + "')");
    out.push_back(f);
  }
  return out;
}

const char* figure_extension(FigureFormat f) {
  switch (f) {
    case FigureFormat::Pdf: return ".pdf";
    case FigureFormat::Svg: return ".svg";
    default: return ".png";
  }
}

namespace {

constexpr const char* kFamily = "DejaVu Sans";

}  // namespace

// After the label font, in this order (Debian fonts-noto-core and fonts-noto-cjk, tools/deps.sh): scripts
// DejaVu Sans lacks - Devanagari, CJK, more of Arabic and Hebrew - come from these before fontconfig's own
// fallback order, so a name in any of them is drawn in the same fonts on every machine with the packages.
const char* const kFallbacks[] = {"DejaVu Sans",         "Noto Sans",        "Noto Sans CJK JP",
                                  "Noto Sans Arabic",    "Noto Sans Hebrew", "Noto Sans Devanagari",
                                  "Noto Sans Symbols 2", "sans-serif"};

namespace {

std::string fc_family(FcPattern* p) {
  FcChar8* fam = nullptr;
  if (FcPatternGetString(p, FC_FAMILY, 0, &fam) != FcResultMatch || !fam) return "";
  return reinterpret_cast<const char*>(fam);
}

std::string resolve_font() {
  if (!FcInit()) throw Error("fontconfig could not be initialised (the figure labels need it)");
  if (const char* env = std::getenv("ATTNMAP_FONT"); env && *env) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(env, ec))
      throw Error(std::string("ATTNMAP_FONT=") + env + ": no such font file (the figure labels need a .ttf or .otf)");
    const auto size = std::filesystem::file_size(env, ec);
    int count = 0;
    FcPattern* p = FcFreeTypeQuery(reinterpret_cast<const FcChar8*>(env), 0, nullptr, &count);
    if (!p)
      throw Error(std::string("ATTNMAP_FONT=") + env + ": not a font FreeType can read (" + std::to_string(size) +
                  " bytes)");
    const std::string fam = fc_family(p);
    FcPatternDestroy(p);
    if (fam.empty() || !FcConfigAppFontAddFile(FcConfigGetCurrent(), reinterpret_cast<const FcChar8*>(env)))
      throw Error(std::string("ATTNMAP_FONT=") + env + ": fontconfig cannot use this font");
    return fam;
  }
  FcPattern* pat = FcNameParse(reinterpret_cast<const FcChar8*>(kFamily));
  FcConfigSubstitute(nullptr, pat, FcMatchPattern);
  FcDefaultSubstitute(pat);
  FcResult res = FcResultNoMatch;
  FcPattern* match = FcFontMatch(nullptr, pat, &res);
  FcPatternDestroy(pat);
  const std::string fam = match ? fc_family(match) : "";
  if (match) FcPatternDestroy(match);
  if (fam != kFamily)
    throw Error(std::string("the figure labels are set in ") + kFamily + ", which fontconfig does not find (" +
                (fam.empty() ? "no font at all" : "it offers '" + fam + "'") +
                "): install fonts-dejavu-core (apt-get install fonts-dejavu-core) or set "
                "ATTNMAP_FONT=/path/to/font.ttf");
  return fam;
}

cairo_status_t append_stream(void* closure, const unsigned char* data, unsigned int length) {
  auto* out = static_cast<std::vector<uint8_t>*>(closure);
  out->insert(out->end(), data, data + length);
  return CAIRO_STATUS_SUCCESS;
}

void set_rgb(cairo_t* cr, Rgb c) { cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0); }

}  // namespace

void check_figure_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) throw Error(path + ": is a folder, not a figure file name");
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  // The nearest existing ancestor must be a writable folder (the missing ones are created).
  while (!fs::exists(dir, ec)) {
    if (!dir.has_parent_path() || dir.parent_path() == dir) {  // "out" of "out/x.png": the current folder
      dir = dir.has_root_path() ? dir.root_path() : fs::path(".");
      break;
    }
    dir = dir.parent_path();
  }
  if (!fs::is_directory(dir, ec)) throw Error(path + ": cannot be written (" + dir.string() + " is not a folder)");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(path + ": cannot be written (no write permission in " + dir.string() + ")");
}

namespace {
// At exit: the calling thread's pango font map (worker threads' are freed when they end), so that a leak
// checker sees only real leaks. fontconfig's own configuration is left to the process's end: FcFini() asserts
// (fccache.c FcCacheFini, abort) when a font cache is still referenced, which pango's font-loading thread or a
// worker thread's font map ending at that moment can do - one run in a hundred aborted at exit that way. The
// sanitizer stage suppresses fontconfig's allocations alone (tools/lsan.supp).
void release_fonts() { pango_cairo_font_map_set_default(nullptr); }

// GLib ends the process (g_error: a breakpoint trap) when it cannot start a thread, and pango starts two for
// each new font pattern it matches. Under a process limit too tight even for those (the runs leave room:
// kLibraryThreadRoom), one line that says so and exit status 2, instead of a SIGTRAP.
// A thread's stack is mapped memory, so an address-space limit (ulimit -v) refuses threads too: the line then
// names both limits, with the address-space one's size.
void glib_fatal(const gchar* /*domain*/, GLogLevelFlags /*level*/, const gchar* message, gpointer /*data*/) {
  remove_registered_temp_files();
  rlimit as{};
  char address_space[96] = "";
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    std::snprintf(address_space, sizeof address_space, " or its address-space limit (ulimit -v, %llu MB)",
                  static_cast<unsigned long long>(as.rlim_cur >> 20));
  std::fprintf(stderr,
               "attnmap: error: the text layout library (pango) could not start a thread (%s): the system's "
               "process limit (ulimit -u, or a cgroup's pids.max)%s is too tight to draw figures; unfinished "
               "temporary files removed\n",
               printable(message ? message : "").c_str(), address_space);
  std::fflush(stderr);
  std::_Exit(2);
}

// One text layout at a time (the labels cost little next to the pictures): under a process limit, pango's
// threads for a new font size then never meet another layout's (TextSettle).
std::mutex g_text_mu;

// The ids of this process's threads now (/proc/self/task).
std::set<long> thread_ids() {
  std::set<long> ids;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec))
    ids.insert(std::strtol(task.path().filename().c_str(), nullptr, 10));
  return ids;
}

// Pango 1.50 starts two detached threads (an FcFontSetMatch and an FcFontSetSort) for each font pattern a
// thread's font map has not matched yet (a layout of a new size can make two patterns: four threads, the
// sorts outliving the layout); several workers meeting new sizes at once would want several each. Waiting
// after a layout until the threads that appeared during it, other than attnmap's own (core/threads), have
// ended keeps pango's threads to one layout's at a time, which the runs leave room for under a process limit
// (kLibraryThreadRoom). A layout of a size already matched starts none and waits for nothing. The wait is not
// cut short: a sort can take more than a second on a loaded machine (a one-second cap let the next layout's
// threads meet it, and under a process limit GLib was refused one: exit 2, in one run of three under load);
// only a thread that never ends stops the wait, after 30 s.
class TextSettle {
 public:
  TextSettle() : before_(thread_ids()) {}
  ~TextSettle() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (library_thread_started() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  TextSettle(const TextSettle&) = delete;
  TextSettle& operator=(const TextSettle&) = delete;

 private:
  bool library_thread_started() const {
    for (const long id : thread_ids())
      if (before_.count(id) == 0 && !started_by_attnmap(id)) return true;
    return false;
  }
  std::set<long> before_;
};
}  // namespace

namespace {
// Pango's first font map in the process starts fontconfig's initialisation in a thread of its own, which
// the first layout's two would meet: done once here, each step's threads waited for, while the run has no
// worker threads yet (figure_font is first asked for before they start), so that under a process limit a
// layout needs two threads at most.
void warm_up_pango(const std::string& family) {
  {
    const TextSettle settle;
    (void)pango_cairo_font_map_get_default();  // starts fontconfig's initialisation thread
  }
  const TextSettle settle;  // then the first size's two threads
  cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
  cairo_t* cr = cairo_create(s);
  PangoLayout* layout = pango_cairo_create_layout(cr);
  PangoFontDescription* d = pango_font_description_new();
  pango_font_description_set_family(d, family.c_str());
  pango_font_description_set_absolute_size(d, 12 * PANGO_SCALE);
  pango_layout_set_font_description(layout, d);
  pango_font_description_free(d);
  pango_layout_set_text(layout, "Ag", -1);
  PangoRectangle logical;
  pango_layout_get_extents(layout, nullptr, &logical);
  g_object_unref(layout);
  cairo_destroy(cr);
  cairo_surface_destroy(s);
}
}  // namespace

std::string figure_font_stack(const std::string& family) {
  std::string stack = family;
  for (const char* f : kFallbacks)
    if (family != f) stack += std::string(",") + f;
  return stack;
}

std::string figure_font() {
  static std::once_flag once;
  static std::string family, error;
  std::call_once(once, [] {
    std::atexit(release_fonts);
    g_log_set_handler("GLib", static_cast<GLogLevelFlags>(G_LOG_LEVEL_ERROR | G_LOG_FLAG_FATAL), glib_fatal, nullptr);
    try {
      family = resolve_font();
      warm_up_pango(family);
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw Error(error);
  return family;
}

struct Canvas::Impl {
  cairo_surface_t* surface = nullptr;
  cairo_t* cr = nullptr;
  std::vector<uint8_t> bytes;  // PDF/SVG stream
  bool finished = false;
  ~Impl() {
    if (cr) cairo_destroy(cr);
    if (surface) cairo_surface_destroy(surface);
  }
};

Canvas::Canvas(int width, int height, double dpi, FigureFormat format) : Canvas(width, height, dpi, format, 1.0) {}

Canvas::Canvas(int width, int height, double dpi, FigureFormat format, double png_scale)
    : impl_(std::make_unique<Impl>()), width_(width), height_(height), dpi_(dpi), format_(format) {
  if (format == FigureFormat::Png && png_scale != 1.0) {
    if (!(png_scale > 0.0)) throw Error("figure: a scale of " + std::to_string(png_scale) + " for a PNG canvas");
    width = std::max(1, static_cast<int>(std::lround(width * png_scale)));
    height = std::max(1, static_cast<int>(std::lround(height * png_scale)));
    width_ = width;
    height_ = height;
  }
  if (width <= 0 || height <= 0 || width > kMaxCanvas || height > kMaxCanvas)
    throw Error("figure: a " + std::to_string(width) + "x" + std::to_string(height) + " pixel canvas is outside 1.." +
                std::to_string(kMaxCanvas) + " (cairo's limit)");
  if (!(dpi > 0.0 && dpi <= 1e6)) throw Error("the resolution must be in (0, 1000000] dots per inch, found " + std::to_string(dpi));
  const double pt = 72.0 / dpi;
  if (format == FigureFormat::Png) {
    impl_->surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
  } else if (format == FigureFormat::Pdf) {
    impl_->surface = cairo_pdf_surface_create_for_stream(append_stream, &impl_->bytes, width * pt, height * pt);
    cairo_pdf_surface_set_metadata(impl_->surface, CAIRO_PDF_METADATA_CREATOR, "attnmap");
    // No wall-clock dates: cairo writes /CreationDate = now unless told otherwise, and an empty date makes
    // it write none (cairo 1.16 and later), so the same figure is the same bytes on every run.
    cairo_pdf_surface_set_metadata(impl_->surface, CAIRO_PDF_METADATA_CREATE_DATE, "");
    cairo_pdf_surface_set_metadata(impl_->surface, CAIRO_PDF_METADATA_MOD_DATE, "");
  } else {
    impl_->surface = cairo_svg_surface_create_for_stream(append_stream, &impl_->bytes, width * pt, height * pt);
    cairo_svg_surface_set_document_unit(impl_->surface, CAIRO_SVG_UNIT_PT);
  }
  if (cairo_surface_status(impl_->surface) != CAIRO_STATUS_SUCCESS)
    throw Error(std::string("figure: cairo cannot make the surface: ") +
                cairo_status_to_string(cairo_surface_status(impl_->surface)));
  impl_->cr = cairo_create(impl_->surface);
  if (format != FigureFormat::Png) cairo_scale(impl_->cr, pt, pt);
  fill_rect(0, 0, width, height, Rgb{255, 255, 255});
  if (format == FigureFormat::Png && png_scale != 1.0) cairo_scale(impl_->cr, png_scale, png_scale);
}

Canvas::~Canvas() = default;

void Canvas::fill_rect(double x, double y, double w, double h, Rgb c) {
  cairo_rectangle(impl_->cr, x, y, w, h);
  set_rgb(impl_->cr, c);
  cairo_fill(impl_->cr);
}

void Canvas::stroke_rect(double x, double y, double w, double h, Rgb c, double line_width) {
  cairo_rectangle(impl_->cr, x, y, w, h);
  set_rgb(impl_->cr, c);
  cairo_set_line_width(impl_->cr, line_width);
  cairo_stroke(impl_->cr);
}

void Canvas::line(double x0, double y0, double x1, double y1, Rgb c, double line_width) {
  cairo_move_to(impl_->cr, x0, y0);
  cairo_line_to(impl_->cr, x1, y1);
  set_rgb(impl_->cr, c);
  cairo_set_line_width(impl_->cr, line_width);
  cairo_stroke(impl_->cr);
}

namespace {
// Fills the current path with `fill`, then strokes it `line_width` wide in `edge` (no stroke when <= 0).
void fill_and_stroke(cairo_t* cr, Rgb fill, Rgb edge, double line_width) {
  set_rgb(cr, fill);
  if (line_width <= 0) {
    cairo_fill(cr);
    return;
  }
  cairo_fill_preserve(cr);
  set_rgb(cr, edge);
  cairo_set_line_width(cr, line_width);
  cairo_stroke(cr);
}
}  // namespace

void Canvas::polygon(const std::vector<double>& xy, Rgb fill, Rgb edge, double line_width) {
  if (xy.size() < 6) return;
  cairo_t* cr = impl_->cr;
  cairo_new_path(cr);
  cairo_move_to(cr, xy[0], xy[1]);
  for (size_t i = 2; i + 1 < xy.size(); i += 2) cairo_line_to(cr, xy[i], xy[i + 1]);
  cairo_close_path(cr);
  fill_and_stroke(cr, fill, edge, line_width);
}

void Canvas::dot(double x, double y, double r, Rgb fill, Rgb edge, double line_width) {
  cairo_t* cr = impl_->cr;
  cairo_new_path(cr);
  cairo_arc(cr, x, y, r, 0.0, 6.283185307179586);
  fill_and_stroke(cr, fill, edge, line_width);
}

void Canvas::segments(const std::vector<float>& xy, Rgb c, double line_width) {
  cairo_t* cr = impl_->cr;
  for (size_t i = 0; i + 3 < xy.size(); i += 4) {
    cairo_move_to(cr, xy[i], xy[i + 1]);
    cairo_line_to(cr, xy[i + 2], xy[i + 3]);
  }
  set_rgb(cr, c);
  cairo_set_line_width(cr, line_width);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  cairo_stroke(cr);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
}

void Canvas::image(const Image& img, double x, double y, double w, double h, Filter filter) {
  if (img.width <= 0 || img.height <= 0 || img.rgb.size() != static_cast<size_t>(img.width) * img.height * 3)
    throw Error("figure: image buffer does not match its size");
  cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, img.width, img.height);
  if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(s);
    throw Error("figure: cairo cannot hold a " + std::to_string(img.width) + "x" + std::to_string(img.height) +
                " image");
  }
  cairo_surface_flush(s);
  unsigned char* data = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s);
  for (int yy = 0; yy < img.height; ++yy) {
    auto* row = reinterpret_cast<uint32_t*>(data + static_cast<size_t>(yy) * static_cast<size_t>(stride));
    const uint8_t* p = &img.rgb[static_cast<size_t>(yy) * static_cast<size_t>(img.width) * 3];
    for (int xx = 0; xx < img.width; ++xx, p += 3)
      row[xx] = 0xff000000u | (uint32_t(p[0]) << 16) | (uint32_t(p[1]) << 8) | uint32_t(p[2]);
  }
  cairo_surface_mark_dirty(s);
  cairo_t* cr = impl_->cr;
  cairo_save(cr);
  cairo_rectangle(cr, x, y, w, h);
  cairo_clip(cr);
  cairo_translate(cr, x, y);
  cairo_scale(cr, w / img.width, h / img.height);
  cairo_set_source_surface(cr, s, 0, 0);
  cairo_pattern_t* pat = cairo_get_source(cr);
  cairo_pattern_set_filter(pat, filter == Filter::Nearest ? CAIRO_FILTER_NEAREST : CAIRO_FILTER_GOOD);
  // PNG: no fading to transparent at the edges when resampled. PDF/SVG: the photo itself is embedded (PAD
  // would make cairo embed a padded copy, shifted by the renderers).
  if (format_ == FigureFormat::Png) cairo_pattern_set_extend(pat, CAIRO_EXTEND_PAD);
  cairo_paint(cr);
  cairo_restore(cr);
  cairo_surface_destroy(s);
}

namespace {
PangoLayout* make_layout(cairo_t* cr, const std::string& text, const TextStyle& ts) {
  const std::string family = figure_font();
  PangoLayout* layout = pango_cairo_create_layout(cr);
  // Every line left to right (the figure's direction): an Arabic or Hebrew run inside it still reads right
  // to left, but a file name such as "صورة.png" keeps its ".png" at the end instead of the paragraph
  // taking the first letter's direction ("png.صورة").
  pango_layout_set_auto_dir(layout, FALSE);
  pango_context_set_base_dir(pango_layout_get_context(layout), PANGO_DIRECTION_LTR);
  // No hinting: the same glyph positions in PNG, PDF and SVG, and stable golden images.
  cairo_font_options_t* fo = cairo_font_options_create();
  cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
  cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
  pango_cairo_context_set_font_options(pango_layout_get_context(layout), fo);
  cairo_font_options_destroy(fo);
  pango_layout_context_changed(layout);
  PangoFontDescription* d = pango_font_description_new();
  pango_font_description_set_family(d, figure_font_stack(family).c_str());
  pango_font_description_set_absolute_size(d, ts.px * PANGO_SCALE);
  if (ts.bold) pango_font_description_set_weight(d, PANGO_WEIGHT_BOLD);
  pango_layout_set_font_description(layout, d);
  pango_font_description_free(d);
  if (ts.width > 0.0) {
    pango_layout_set_width(layout, static_cast<int>(ts.width * PANGO_SCALE));
    pango_layout_set_alignment(layout, ts.align == Align::Left     ? PANGO_ALIGN_LEFT
                                       : ts.align == Align::Center ? PANGO_ALIGN_CENTER
                                                                   : PANGO_ALIGN_RIGHT);
    if (ts.ellipsize) pango_layout_set_ellipsize(layout, PANGO_ELLIPSIZE_MIDDLE);
    else pango_layout_set_wrap(layout, ts.whole_words ? PANGO_WRAP_WORD : PANGO_WRAP_WORD_CHAR);
  }
  // A file name need not be UTF-8: its invalid bytes, control and bidirectional formatting characters are
  // drawn as escapes (printable: "x\xff.png", "\u202e", as the terminal shows them): a newline in a one-line
  // label would overprint the next line, U+202E would draw the name backwards. Text that may wrap (titles)
  // keeps its own line breaks: each line is escaped on its own.
  std::string shown;
  if (ts.ellipsize || ts.width <= 0.0) {
    shown = printable(text);
  } else {
    for (size_t from = 0; from <= text.size();) {
      const size_t nl = std::min(text.find('\n', from), text.size());
      shown += (from ? "\n" : "") + printable(text.substr(from, nl - from));
      from = nl + 1;
    }
  }
  pango_layout_set_text(layout, shown.c_str(), static_cast<int>(shown.size()));
  return layout;
}

TextSize layout_size(PangoLayout* layout) {
  PangoRectangle logical;
  pango_layout_get_extents(layout, nullptr, &logical);
  return TextSize{logical.width / static_cast<double>(PANGO_SCALE), logical.height / static_cast<double>(PANGO_SCALE)};
}
}  // namespace

namespace {
// `read` of a layout of `text` (one layout at a time, its threads waited for), the layout freed after.
template <class Read>
auto read_layout(cairo_t* cr, const std::string& text, const TextStyle& ts, Read read) {
  std::lock_guard<std::mutex> one_at_a_time(g_text_mu);
  const TextSettle settle;
  PangoLayout* layout = make_layout(cr, text, ts);
  const auto value = read(layout);
  g_object_unref(layout);
  return value;
}
}  // namespace

int Canvas::unknown_glyphs(const std::string& text, const TextStyle& ts) {
  return read_layout(impl_->cr, text, ts, [](PangoLayout* l) { return pango_layout_get_unknown_glyphs_count(l); });
}

TextSize Canvas::measure(const std::string& text, const TextStyle& ts) {
  return read_layout(impl_->cr, text, ts, [](PangoLayout* l) { return layout_size(l); });
}

TextSize Canvas::text(const std::string& text, double x, double y, const TextStyle& ts) {
  std::lock_guard<std::mutex> one_at_a_time(g_text_mu);
  const TextSettle settle;
  cairo_t* cr = impl_->cr;
  PangoLayout* layout = make_layout(cr, text, ts);
  const TextSize sz = layout_size(layout);
  cairo_save(cr);
  set_rgb(cr, ts.color);
  if (ts.vertical) {
    cairo_translate(cr, x, y);
    cairo_rotate(cr, -M_PI / 2);
    cairo_move_to(cr, -(ts.width > 0.0 ? ts.width : sz.w) / 2, -sz.h / 2);
  } else if (ts.width > 0.0) {
    cairo_move_to(cr, x, y);
  } else {
    const double dx = ts.align == Align::Left ? 0.0 : (ts.align == Align::Center ? -sz.w / 2 : -sz.w);
    cairo_move_to(cr, x + dx, y);
  }
  pango_cairo_show_layout(cr, layout);
  cairo_restore(cr);
  g_object_unref(layout);
  return sz;
}

Image Canvas::pixels() {
  if (format_ != FigureFormat::Png || impl_->finished) throw Error("figure: pixels of a vector canvas");
  cairo_surface_flush(impl_->surface);
  const unsigned char* data = cairo_image_surface_get_data(impl_->surface);
  const int stride = cairo_image_surface_get_stride(impl_->surface);
  Image out;
  out.width = width_;
  out.height = height_;
  out.rgb.resize(static_cast<size_t>(width_) * static_cast<size_t>(height_) * 3);
  uint8_t* o = out.rgb.data();
  for (int y = 0; y < height_; ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(data + static_cast<size_t>(y) * static_cast<size_t>(stride));
    for (int x = 0; x < width_; ++x) {
      const uint32_t v = row[x];
      const uint32_t white = 255u - (v >> 24);  // premultiplied: over white adds (255 - alpha)
      *o++ = static_cast<uint8_t>(((v >> 16) & 0xffu) + white);
      *o++ = static_cast<uint8_t>(((v >> 8) & 0xffu) + white);
      *o++ = static_cast<uint8_t>((v & 0xffu) + white);
    }
  }
  return out;
}

void Canvas::set_provenance(const std::string& text) {
  provenance_ = text;
  if (!text.empty() && format_ == FigureFormat::Pdf)
    cairo_pdf_surface_set_metadata(impl_->surface, CAIRO_PDF_METADATA_SUBJECT, text.c_str());
}

namespace {

/// `svg` with <metadata>TEXT</metadata> (escaped) inserted right after the opening <svg ...> tag.
void insert_svg_metadata(std::vector<uint8_t>* svg, const std::string& text) {
  const std::string doc(svg->begin(), svg->end());
  const size_t open = doc.find("<svg");
  const size_t end = open == std::string::npos ? open : doc.find('>', open);
  if (end == std::string::npos) return;
  std::string esc = "\n<metadata id=\"attnmap\">";
  for (const char c : text) esc += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : std::string(1, c);
  esc += "</metadata>";
  svg->insert(svg->begin() + static_cast<std::ptrdiff_t>(end + 1), esc.begin(), esc.end());
}

/// The name an SVG attribute holds from `at` up to its closing `end` character.
std::string name_at(const std::string& doc, size_t at, char end) {
  const size_t e = doc.find(end, at);
  return e == std::string::npos ? std::string() : doc.substr(at, e - at);
}

}  // namespace

std::string canonical_svg_ids(const std::string& doc) {
  // Cairo names images and surfaces after counters of the process ("image203", "surface57"), so the same
  // figure got other ids in another run. Every numbered id is renamed to its stem and its rank among the
  // ids of that stem in the document (image1, image2, ...; glyph0-3 -> glyph1, ...), and every reference
  // to it (href="#...", url(#...)) alike: the ids then depend on the document alone.
  const std::string def = " id=\"", href = "href=\"#", url = "url(#";
  std::map<std::string, std::string> renamed;
  std::map<std::string, int> rank;
  for (size_t at = doc.find(def); at != std::string::npos; at = doc.find(def, at + 1)) {
    const std::string id = name_at(doc, at + def.size(), '"');
    if (id.empty() || !std::isdigit(static_cast<unsigned char>(id.back())) || renamed.count(id)) continue;
    const std::string stem = id.substr(0, id.find_last_not_of("0123456789-") + 1);
    renamed[id] = stem + std::to_string(++rank[stem]);
  }
  std::string out;
  out.reserve(doc.size());
  size_t copied = 0;
  for (size_t i = 0; i < doc.size(); ++i) {
    const char c = doc[i];
    if (c != '"' && c != '#') continue;
    size_t start = std::string::npos;
    char end = '"';
    if (c == '"' && i + 1 >= def.size() && doc.compare(i + 1 - def.size(), def.size(), def) == 0) start = i + 1;
    else if (c == '#' && i + 1 >= href.size() && doc.compare(i + 1 - href.size(), href.size(), href) == 0) start = i + 1;
    else if (c == '#' && i + 1 >= url.size() && doc.compare(i + 1 - url.size(), url.size(), url) == 0) start = i + 1, end = ')';
    if (start == std::string::npos) continue;
    const auto it = renamed.find(name_at(doc, start, end));
    if (it == renamed.end()) continue;
    out.append(doc, copied, start - copied);
    out += it->second;
    copied = start + it->first.size();
    i = copied - 1;
  }
  out.append(doc, copied, std::string::npos);
  return out;
}

std::vector<uint8_t> Canvas::encode(const std::string& path) {
  if (impl_->finished) throw Error("figure: " + path + ": the canvas was already saved");
  if (format_ == FigureFormat::Png) {
    PngOptions po;
    po.dpi = dpi_;
    if (!provenance_.empty()) po.text.push_back({"attnmap", provenance_});
    std::vector<uint8_t> png = encode_png(pixels(), po);
    impl_->finished = true;
    return png;
  }
  cairo_destroy(impl_->cr);
  impl_->cr = nullptr;
  cairo_surface_finish(impl_->surface);
  impl_->finished = true;
  if (cairo_surface_status(impl_->surface) != CAIRO_STATUS_SUCCESS)
    throw Error("figure: " + path + ": cairo failed: " + cairo_status_to_string(cairo_surface_status(impl_->surface)));
  if (format_ == FigureFormat::Svg) {
    const std::string doc = canonical_svg_ids(std::string(impl_->bytes.begin(), impl_->bytes.end()));
    impl_->bytes.assign(doc.begin(), doc.end());
    if (!provenance_.empty()) insert_svg_metadata(&impl_->bytes, provenance_);
  }
  return std::move(impl_->bytes);
}

void Canvas::save(const std::string& path) { write_file_atomic(path, encode(path)); }

}  // namespace attnmap
