#include "draw/heads_grid.hpp"

#include <stb_truetype.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace attnmap {

const std::vector<std::string>& font_candidates() {
  static const std::vector<std::string> k = {
      "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",    // Debian / Ubuntu fonts-dejavu-core
      "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",  // Fedora
      "/usr/share/fonts/TTF/DejaVuSans.ttf",                // Arch
      "/usr/share/fonts/dejavu/DejaVuSans.ttf",
      "/usr/local/share/fonts/DejaVuSans.ttf",
      "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
      "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
      "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
  };
  return k;
}

std::string find_font() {
  std::error_code ec;
  if (const char* env = std::getenv("ATTNMAP_FONT"); env && *env) {
    if (!std::filesystem::is_regular_file(env, ec))
      throw Error(std::string("ATTNMAP_FONT=") + env +
                  ": no such font file (the --heads-grid labels need a .ttf)");
    return env;
  }
  for (const std::string& p : font_candidates())
    if (std::filesystem::is_regular_file(p, ec)) return p;
  std::string looked;
  for (const std::string& p : font_candidates()) looked += "\n  " + p;
  throw Error(
      "--heads-grid needs a TrueType font for its labels and found none; install fonts-dejavu-core "
      "(apt-get install fonts-dejavu-core) or set ATTNMAP_FONT=/path/to/font.ttf. Looked for:" +
      looked);
}

struct Font::Impl {
  std::vector<uint8_t> data;
  stbtt_fontinfo info{};
};

Font::Font(const std::string& path) : impl_(std::make_unique<Impl>()), path_(path) {
  impl_->data = read_file(path);
  // stb_truetype trusts the file's offsets (it is documented as unsafe on untrusted fonts): an empty or cut
  // file would make it read past the buffer. The header and the table directory are checked first: every
  // table must lie inside the file.
  const std::vector<uint8_t>& d = impl_->data;
  auto be32 = [&](size_t at) {
    return (uint32_t(d[at]) << 24) | (uint32_t(d[at + 1]) << 16) | (uint32_t(d[at + 2]) << 8) | d[at + 3];
  };
  const std::string bad = path + ": not a TrueType font stb_truetype can read";
  if (d.size() < 12) throw Error(bad + " (" + std::to_string(d.size()) + " bytes)");
  size_t offset = 0;
  if (std::memcmp(d.data(), "ttcf", 4) == 0) {  // a collection: the first font's offset table
    if (d.size() < 16) throw Error(bad + " (cut collection header)");
    offset = be32(12);
  }
  if (offset > d.size() - 12) throw Error(bad + " (font offset past the end)");
  const size_t tables = (size_t(d[offset + 4]) << 8) | d[offset + 5];
  if (d.size() - offset - 12 < tables * 16) throw Error(bad + " (table directory cut short)");
  for (size_t t = 0; t < tables; ++t) {
    const size_t rec = offset + 12 + 16 * t;
    const uint64_t at = be32(rec + 8), len = be32(rec + 12);
    if (at + len > d.size()) {
      throw Error(bad + " (table '" + std::string(reinterpret_cast<const char*>(&d[rec]), 4) + "' runs to byte " +
                  std::to_string(at + len) + ", the file has " + std::to_string(d.size()) + ")");
    }
  }
  if (!stbtt_InitFont(&impl_->info, d.data(), static_cast<int>(offset))) throw Error(bad);
}

Font::~Font() = default;

int Font::text_width(const std::string& text, float px) const {
  const float scale = stbtt_ScaleForPixelHeight(&impl_->info, px);
  double x = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    int adv = 0, lsb = 0;
    const auto c = static_cast<unsigned char>(text[i]);
    stbtt_GetCodepointHMetrics(&impl_->info, c, &adv, &lsb);
    x += static_cast<double>(adv) * scale;
    if (i + 1 < text.size())
      x += static_cast<double>(scale) *
           stbtt_GetCodepointKernAdvance(&impl_->info, c, static_cast<unsigned char>(text[i + 1]));
  }
  return static_cast<int>(std::ceil(x));
}

void Font::draw(Image& img, int x, int y, const std::string& text, float px, const uint8_t rgb[3]) const {
  const stbtt_fontinfo* f = &impl_->info;
  const float scale = stbtt_ScaleForPixelHeight(f, px);
  int ascent = 0, descent = 0, gap = 0;
  stbtt_GetFontVMetrics(f, &ascent, &descent, &gap);
  const int baseline = y + static_cast<int>(std::lround(static_cast<double>(ascent) * scale));
  double pen = x;
  std::vector<uint8_t> glyph;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    int adv = 0, lsb = 0, x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    stbtt_GetCodepointHMetrics(f, c, &adv, &lsb);
    stbtt_GetCodepointBitmapBox(f, c, scale, scale, &x0, &y0, &x1, &y1);
    const int gw = x1 - x0, gh = y1 - y0;
    if (gw > 0 && gh > 0) {
      glyph.assign(static_cast<size_t>(gw) * static_cast<size_t>(gh), 0);
      stbtt_MakeCodepointBitmap(f, glyph.data(), gw, gh, gw, scale, scale, c);
      const int ox = static_cast<int>(std::lround(pen)) + x0, oy = baseline + y0;
      for (int gy = 0; gy < gh; ++gy) {
        const int py = oy + gy;
        if (py < 0 || py >= img.height) continue;
        for (int gx = 0; gx < gw; ++gx) {
          const int pxl = ox + gx;
          if (pxl < 0 || pxl >= img.width) continue;
          const float a =
              glyph[static_cast<size_t>(gy) * static_cast<size_t>(gw) + static_cast<size_t>(gx)] / 255.0f;
          uint8_t* p =
              &img.rgb[(static_cast<size_t>(py) * static_cast<size_t>(img.width) + static_cast<size_t>(pxl)) *
                       3];
          for (int k = 0; k < 3; ++k)
            p[k] = static_cast<uint8_t>(
                std::lround((1.0f - a) * static_cast<float>(p[k]) + a * static_cast<float>(rgb[k])));
        }
      }
    }
    pen += static_cast<double>(adv) * scale;
    if (i + 1 < text.size())
      pen += static_cast<double>(scale) *
             stbtt_GetCodepointKernAdvance(f, c, static_cast<unsigned char>(text[i + 1]));
  }
}

GridLayout grid_layout(int n, int photo_w, int photo_h, int tile_long) {
  if (n <= 0 || photo_w <= 0 || photo_h <= 0 || tile_long <= 0) throw Error("heads grid: nothing to lay out");
  GridLayout g;
  g.n = n;
  g.cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
  g.rows = (n + g.cols - 1) / g.cols;
  const double s = static_cast<double>(tile_long) / std::max(photo_w, photo_h);
  g.tile_w = std::max(1, static_cast<int>(std::lround(photo_w * s)));
  g.tile_h = std::max(1, static_cast<int>(std::lround(photo_h * s)));
  return g;
}

Image compose_grid(const GridLayout& g, const std::vector<Image>& tiles,
                   const std::vector<std::string>& labels, const Font& font) {
  if (static_cast<int>(tiles.size()) != g.n || labels.size() != tiles.size())
    throw Error("heads grid: " + std::to_string(tiles.size()) + " tiles and " +
                std::to_string(labels.size()) + " labels for a layout of " + std::to_string(g.n));
  Image sheet;
  sheet.width = g.width();
  sheet.height = g.height();
  sheet.rgb.assign(checked_mul(checked_mul(static_cast<size_t>(sheet.width),
                                           static_cast<size_t>(sheet.height), "heads grid"),
                               3, "heads grid"),
                   32);  // dark grey background
  const uint8_t white[3] = {240, 240, 240};
  const float px = 15.0f;
  for (int i = 0; i < g.n; ++i) {
    const Image& t = tiles[static_cast<size_t>(i)];
    if (t.width != g.tile_w || t.height != g.tile_h) throw Error("heads grid: tile of the wrong size");
    const int c = i % g.cols, r = i / g.cols;
    const int x0 = g.pad + c * (g.tile_w + g.pad);
    const int y0 = g.pad + r * (g.label_h + g.tile_h + g.pad);
    font.draw(sheet, x0 + 2, y0 + (g.label_h - static_cast<int>(px)) / 2 - 1, labels[static_cast<size_t>(i)],
              px, white);
    for (int y = 0; y < g.tile_h; ++y)
      std::copy_n(&t.rgb[static_cast<size_t>(y) * static_cast<size_t>(g.tile_w) * 3],
                  static_cast<size_t>(g.tile_w) * 3,
                  &sheet.rgb[(static_cast<size_t>(y0 + g.label_h + y) * static_cast<size_t>(sheet.width) +
                              static_cast<size_t>(x0)) *
                             3]);
  }
  return sheet;
}

}  // namespace attnmap
