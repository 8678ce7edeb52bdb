// canvas.hpp - one drawing surface for every figure kind: cairo for shapes and photos, pango for text,
// written as PNG (through io's PNG writer: pHYs and the attnmap tEXt chunk), PDF or SVG.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/image_io.hpp"

namespace attnmap {

enum class FigureFormat { Png, Pdf, Svg };

/// Parses "png,pdf,svg" (any non-empty subset, in any order, no repeats). Throws attnmap::Error otherwise.
std::vector<FigureFormat> parse_figure_formats(const std::string& s);

/// ".png", ".pdf", ".svg".
const char* figure_extension(FigureFormat f);

/// The font family every label is set in: "DejaVu Sans", checked once with fontconfig (a fallback to another
/// family is refused: "install fonts-dejavu-core"); or, with $ATTNMAP_FONT=/path/font.ttf, that file, added
/// to fontconfig for this process, and its family. Throws attnmap::Error (one line) when the font cannot be
/// found or read. Thread-safe; the answer (or the error) is computed once per process.
std::string figure_font();

/// The pango family list every label is set in: `family` (figure_font()'s), then DejaVu Sans, Noto Sans,
/// Noto Sans CJK JP, Noto Sans Arabic, Hebrew, Devanagari, Symbols 2 and sans-serif, so that pango takes a
/// character the first font lacks from the next one that has it (Latin, Greek, Cyrillic, CJK, Arabic,
/// Hebrew, Devanagari with Debian's fonts-dejavu-core, fonts-noto-core and fonts-noto-cjk), never a box.
std::string figure_font_stack(const std::string& family);

/// Refuses, before anything is drawn, a figure path that cannot be written: a folder, or a file whose
/// nearest existing ancestor folder is not a writable folder. Throws attnmap::Error naming `path` and why.
void check_figure_path(const std::string& path);

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

enum class Align { Left, Center, Right };

/// How a label is set: em size in pixels, weight, colour, alignment, an optional box width.
struct TextStyle {
  double px = 12.0;
  bool bold = false;
  Rgb color{0, 0, 0};
  Align align = Align::Left;
  double width = 0.0;     ///< > 0: wrap (or ellipsize) inside a box this wide
  bool ellipsize = false; ///< with width: one line, shortened in the middle with "…"
  /// With width (no ellipsize): wrapped at word boundaries only, never inside a word - a word longer than the
  /// box overflows it (measure's w is then above `width`: a caller shrinks the text or refuses). Without it a
  /// word longer than the box is broken between characters (pango's WRAP_WORD_CHAR).
  bool whole_words = false;
  bool vertical = false;  ///< rotated 90 degrees counter-clockwise (reads upward)
};

struct TextSize {
  double w = 0.0, h = 0.0;
};

/// How a photo is resampled when drawn at another size: Nearest (pixels as blocks: colour bars), Good
/// (cairo's CAIRO_FILTER_GOOD: a box/bilinear filter that is proper when shrinking). In PDF/SVG the photo is
/// embedded at its full resolution either way; Nearest asks the viewer not to interpolate.
enum class Filter { Nearest, Good };

/// The largest canvas side in pixels: cairo's image surfaces stop at 32767 (and every format is held to it).
constexpr int kMaxCanvas = 32767;

/// `doc` (an SVG document) with every numbered id renamed to its stem and rank in the document (cairo's
/// "image203", "surface57" from counters of the process become "image1", "surface1") and every href="#..."
/// and url(#...) reference with it: the same drawing gives the same bytes in every process.
std::string canonical_svg_ids(const std::string& doc);

/// A drawing surface `width` x `height` in pixels, whatever the format: drawing coordinates are always
/// pixels, y down. PNG: an ARGB32 image surface of that size. PDF/SVG: a page of width * 72 / dpi points
/// (so the page measures width / dpi inches), scaled so one unit is one pixel; photos are embedded at full
/// resolution and text stays vector. Not thread-safe; one Canvas per thread.
class Canvas {
 public:
  /// Throws attnmap::Error for a size <= 0 or over kMaxCanvas, a dpi outside (0, 1e6], or when cairo fails.
  Canvas(int width, int height, double dpi, FigureFormat format);
  /// The same drawing (coordinates in width x height units) on a PNG of round(width x png_scale) x
  /// round(height x png_scale) pixels (a figure of a physical width: width_in x dpi pixels); width() and
  /// height() are then the PNG's. png_scale is ignored for PDF/SVG (their page is width / dpi inches).
  Canvas(int width, int height, double dpi, FigureFormat format, double png_scale);
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  int width() const { return width_; }
  int height() const { return height_; }
  double dpi() const { return dpi_; }

  void fill_rect(double x, double y, double w, double h, Rgb c);
  void stroke_rect(double x, double y, double w, double h, Rgb c, double line_width);
  void line(double x0, double y0, double x1, double y1, Rgb c, double line_width);
  /// A filled disc of radius r centred at (x, y) with a `edge` rim line_width wide (0: none): a plot's dot.
  void dot(double x, double y, double r, Rgb fill, Rgb edge, double line_width);
  /// A filled polygon through the points (x0, y0, x1, y1, ...), closed, with an `edge` rim line_width wide
  /// (0: none): a colour bar's "extend" triangle. Fewer than 3 points draw nothing.
  void polygon(const std::vector<double>& xy, Rgb fill, Rgb edge, double line_width);
  /// Strokes line segments (x0, y0, x1, y1 quadruples in `xy`) in one colour, round caps.
  void segments(const std::vector<float>& xy, Rgb c, double line_width);
  /// Draws `img` scaled into the rectangle (x, y, w, h). At its own size and whole-pixel (x, y) a PNG gets
  /// the photo's pixels unchanged.
  void image(const Image& img, double x, double y, double w, double h, Filter filter);

  /// Sets `text` (UTF-8) in figure_font() with style `ts`, its top at y. One line (ts.width = 0): x is the
  /// anchor (left, centre or right edge per ts.align). ts.width > 0: x is the left edge of a box that wide,
  /// the text wrapped at word boundaries (or, with ts.ellipsize, cut in the middle with "…") and aligned in
  /// it. ts.vertical: rotated to read upward, (x, y) is then its centre. Returns its size in pixels (before
  /// rotation). Bytes that are not UTF-8 are shown as U+FFFD; control characters and bidirectional
  /// formatting characters as escapes ("\x0a", "\u202e": printable), so a name draws as one line in its
  /// own order. Throws attnmap::Error when the font cannot be
  /// found (figure_font).
  TextSize text(const std::string& text, double x, double y, const TextStyle& ts);
  /// How many characters of `text` no font of the stack (figure_font_stack) has: pango's unknown glyphs,
  /// drawn as boxes. 0 when every character has a glyph.
  int unknown_glyphs(const std::string& text, const TextStyle& ts);
  /// The size `text` would take.
  TextSize measure(const std::string& text, const TextStyle& ts);

  /// Finishes the drawing and writes it to `path` atomically (PNG with pHYs = dpi). The bytes depend on the
  /// drawing alone: a PDF has no creation or modification date, an SVG's ids are canonical_svg_ids'. Throws
  /// attnmap::Error naming `path`. The canvas cannot be drawn on afterwards.
  void save(const std::string& path);
  /// The file save writes, in memory (save = encode + io's write_file_atomic: the same bytes); `path` names
  /// the figure in messages only. The canvas cannot be drawn on afterwards.
  std::vector<uint8_t> encode(const std::string& path);
  /// Records how the figure was made (JSON text): a PNG gets it as tEXt `attnmap` (PNG 1.2 §11.3.4), a PDF as
  /// its Subject metadata, an SVG as a <metadata> element. Call before drawing; "" records nothing.
  void set_provenance(const std::string& text);
  /// PNG canvases only: the pixels drawn so far (RGB, alpha dropped over white).
  Image pixels();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string provenance_;
  int width_, height_;
  double dpi_;
  FigureFormat format_;
};

}  // namespace attnmap
