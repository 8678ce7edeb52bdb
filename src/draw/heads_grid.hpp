// heads_grid.hpp - labelled tile sheets (--heads-grid): a TrueType font (stb_truetype, Debian's libstb)
// and the tile layout. No attention maths here.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/image_io.hpp"

namespace attnmap {

/// Fonts tried in order for labels when ATTNMAP_FONT is not set: DejaVu Sans (Debian/Ubuntu
/// fonts-dejavu-core, Fedora, Arch), then Liberation Sans and Noto Sans.
const std::vector<std::string>& font_candidates();

/// The label font: $ATTNMAP_FONT when set (it must exist), else the first of font_candidates() present.
/// Throws attnmap::Error listing where it looked (and "install fonts-dejavu-core") when none is found.
std::string find_font();

/// A TrueType font loaded once (stb_truetype); draws ASCII text antialiased. Read-only after loading, so
/// one Font may be shared by threads.
class Font {
 public:
  /// Reads and parses the file. Throws attnmap::Error naming `path` when it cannot be read or parsed.
  explicit Font(const std::string& path);
  ~Font();
  Font(const Font&) = delete;
  Font& operator=(const Font&) = delete;
  /// Width in pixels of `text` at a pixel height of `px`.
  int text_width(const std::string& text, float px) const;
  /// Draws `text` with its top-left corner at (x, y) in colour `rgb`, clipped to the image.
  void draw(Image& img, int x, int y, const std::string& text, float px, const uint8_t rgb[3]) const;
  /// The file it was read from.
  const std::string& path() const { return path_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

/// Geometry of a tile sheet: n tiles of tile_w x tile_h pixels, each under a label strip of label_h pixels,
/// in `cols` columns and `rows` rows (cols = ceil(sqrt(n)), rows = ceil(n / cols)), `pad` pixels between
/// tiles and around the sheet. Sheet size: width = cols * tile_w + (cols + 1) * pad,
/// height = rows * (label_h + tile_h) + (rows + 1) * pad.
struct GridLayout {
  int n = 0, cols = 0, rows = 0, tile_w = 0, tile_h = 0;
  int label_h = 22, pad = 6;
  int width() const { return cols * tile_w + (cols + 1) * pad; }
  int height() const { return rows * (label_h + tile_h) + (rows + 1) * pad; }
};

/// The layout for n tiles showing a photo of photo_w x photo_h: each tile is the photo scaled so that its
/// longer side is `tile_long` pixels (aspect ratio kept, at least 1 pixel). Throws attnmap::Error for n <= 0.
GridLayout grid_layout(int n, int photo_w, int photo_h, int tile_long = 224);

/// Places `tiles` (each layout.tile_w x layout.tile_h) row by row on a dark sheet, each with its label
/// (white, 15 px) above it. Throws attnmap::Error when a tile has the wrong size or the counts differ.
Image compose_grid(const GridLayout& layout, const std::vector<Image>& tiles,
                   const std::vector<std::string>& labels, const Font& font);

}  // namespace attnmap
