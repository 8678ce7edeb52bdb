// image_formats.cpp - a file's bytes read without decoding: headers, damage, refusals (see image_io.hpp)
#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "io/image_io.hpp"
#include "io/image_io_internal.hpp"

namespace attnmap {

JpegInfo inspect_jpeg(const uint8_t* data, size_t size) {
  JpegInfo info;
  if (size < 2 || data[0] != 0xFF || data[1] != 0xD8) return info;
  info.is_jpeg = true;
  size_t pos = 2;
  while (pos < size) {
    if (data[pos] != 0xFF) {  // stray byte between segments: skip it, as libjpeg does (with a warning)
      ++pos;
      continue;
    }
    while (pos < size && data[pos] == 0xFF) ++pos;  // fill bytes
    if (pos >= size) break;
    const uint8_t m = data[pos++];
    if (m == 0xD9) {  // EOI
      info.complete = true;
      info.end = pos;
      break;
    }
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7) || m == 0x00) continue;  // markers without a length
    if (pos + 2 > size) break;
    const size_t len = (static_cast<size_t>(data[pos]) << 8) | data[pos + 1];
    if (len < 2 || pos + len > size) break;  // segment runs past the end: truncated
    const uint8_t* seg = data + pos + 2;      // payload, len - 2 bytes
    const size_t seg_len = len - 2;
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof && seg_len >= 6 && info.components == 0) info.components = seg[5];
    if (m == 0xEE && seg_len >= 12 && std::memcmp(seg, "Adobe", 5) == 0) info.adobe_transform = seg[11];
    pos += len;
    if (m == 0xDA) {  // SOS: entropy-coded data follows, up to the next marker that is not RST or FF00
      while (pos + 1 < size) {
        if (data[pos] == 0xFF && data[pos + 1] != 0x00 && data[pos + 1] != 0xFF &&
            !(data[pos + 1] >= 0xD0 && data[pos + 1] <= 0xD7))
          break;
        ++pos;
      }
      if (pos + 1 >= size) break;
    }
  }
  return info;
}

PnmInfo inspect_pnm(const uint8_t* data, size_t size) {
  PnmInfo info;
  if (size < 2 || data[0] != 'P' || (data[1] != '5' && data[1] != '6')) return info;
  info.is_pnm = true;
  info.channels = data[1] == '6' ? 3 : 1;
  size_t pos = 2;
  auto is_space = [](uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; };
  auto skip = [&] {
    for (;;) {
      while (pos < size && is_space(data[pos])) ++pos;
      if (pos >= size || data[pos] != '#') return;
      while (pos < size && data[pos] != '\n' && data[pos] != '\r') ++pos;
    }
  };
  auto number = [&](uint64_t& v) {
    skip();
    size_t digits = 0;
    v = 0;
    while (pos < size && data[pos] >= '0' && data[pos] <= '9') {
      if (++digits > 9) return false;  // stb_image's int would overflow
      v = v * 10 + static_cast<uint64_t>(data[pos++] - '0');
    }
    return digits > 0 && v > 0;
  };
  if (!number(info.width) || !number(info.height) || !number(info.maxval) || info.maxval > 65535) return info;
  if (pos >= size || !is_space(data[pos])) return info;  // one whitespace byte, then the pixels
  info.data_offset = pos + 1;
  info.data_bytes = info.width * info.height * static_cast<uint64_t>(info.channels) * (info.maxval > 255 ? 2u : 1u);
  info.header_ok = true;
  return info;
}

// Radiance HDR (stb_image's reading of it): does the file hold every scanline stb_image will read? Its 2022
// loader loops forever when an RLE scanline runs past the end of the file (CVE-2021-42715: at EOF every
// byte reads as a zero-length run) and takes uninitialised bytes for a cut flat scanline, so the scanlines
// are walked here first, the way stb_image walks them. Returns false when the data stops short.
bool hdr_data_complete(const uint8_t* data, size_t size, uint64_t w, uint64_t h) {
  size_t pos = 0;
  // Header: lines up to an empty one, then the resolution line ("-Y h +X w").
  bool found = false;
  for (size_t i = 0; i + 1 < size; ++i) {
    if (data[i] == '\n' && data[i + 1] == '\n') {
      pos = i + 2;
      found = true;
      break;
    }
  }
  if (!found) return false;
  while (pos < size && data[pos] != '\n') ++pos;
  if (pos >= size) return false;
  ++pos;
  const uint64_t left = size - pos;
  if (w < 8 || w >= 32768) return left >= w * h * 4;  // flat RGBE pixels
  for (uint64_t j = 0; j < h; ++j) {
    if (size - pos < 4) return false;
    const uint8_t c1 = data[pos], c2 = data[pos + 1], hi = data[pos + 2];
    if (c1 != 2 || c2 != 2 || (hi & 0x80)) {
      // Not RLE: stb_image restarts and reads the whole picture as flat pixels from this scanline on.
      return size - pos >= w * h * 4;
    }
    if (((uint64_t(hi) << 8) | data[pos + 3]) != w) return true;  // stb_image refuses it by itself
    pos += 4;
    for (int k = 0; k < 4; ++k) {
      uint64_t i = 0;
      while (i < w) {
        if (pos >= size) return false;
        uint64_t count = data[pos++];
        if (count > 128) {
          if (pos >= size) return false;
          ++pos;
          count -= 128;
          if (count > w - i) return true;  // refused by stb_image ("bad RLE data")
        } else {
          if (count > w - i) return true;
          if (size - pos < count) return false;
          pos += count;
        }
        i += count;
      }
    }
  }
  return true;
}

namespace detail {

// The formats decoded through EndWatch, by signature; stb_image takes anything else it cannot place for TGA.
const char* watched_format(const uint8_t* d, size_t n, bool jpeg, bool pnm, bool hdr) {
  if (n >= 2 && d[0] == 'B' && d[1] == 'M') return "BMP";
  if (n >= 4 && std::memcmp(d, "GIF8", 4) == 0) return "GIF";
  if (n >= 4 && std::memcmp(d, "8BPS", 4) == 0) return "PSD";
  if (n >= 4 && std::memcmp(d, "\x53\x80\xF6\x34", 4) == 0) return "PIC";
  if (jpeg || pnm || hdr || (n >= 8 && std::memcmp(d, kPngSignature, 8) == 0)) return nullptr;
  return "TGA";
}

// Why a PNG that stb_image could not decode is damaged, from its chunk layout (PNG spec 5.3: length <= 2^31-1,
// type of four ASCII letters, data, CRC): "corrupt PNG: ..." for the first chunk with an invalid length or
// type, else "truncated PNG: ..." naming the chunk the file ends inside, or the last whole chunk when it ends
// between chunks before IEND. Empty when the file is not a PNG or its chunks are intact up to IEND (then
// stb_image's own reason is the one to give).
std::string png_damage(const uint8_t* d, size_t n) {
  if (n < 8 || std::memcmp(d, kPngSignature, 8) != 0) return {};
  size_t pos = 8;
  std::string last;
  while (pos + 8 <= n) {
    const uint32_t length = read_be32(d + pos);
    const uint64_t whole = uint64_t{12} + length;
    const std::string type(reinterpret_cast<const char*>(d + pos + 4), 4);
    for (const char c : type)
      if (!std::isalpha(static_cast<unsigned char>(c)))
        return "corrupt PNG: the chunk at byte " + std::to_string(pos) + " has an invalid type";
    if (length > 0x7FFFFFFFu)
      return "corrupt PNG: the " + type + " chunk at byte " + std::to_string(pos) + " declares " +
             std::to_string(length) + " bytes (the limit is 2^31-1)";
    if (type == "IEND") return {};
    if (whole > n - pos)
      return "truncated PNG: the file ends inside its " + type + " chunk (" + std::to_string(n - pos) +
             " of its " + std::to_string(whole) + " bytes present)";
    last = type;
    pos += static_cast<size_t>(whole);
  }
  return last.empty() ? "truncated PNG: the file ends inside its first chunk header"
                      : "truncated PNG: the file ends after its " + last + " chunk, before the IEND chunk";
}

namespace {

uint32_t read_le(const uint8_t* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

// Variants that Debian's stb_image (2022) decodes wrongly without an error; refused by name instead.
std::string unsupported_variant(const uint8_t* d, size_t n, const char* watched) {
  if (!watched) return {};
  if (std::strcmp(watched, "BMP") == 0 && n >= 26 && read_le(d + 14, 4) == 12 && read_le(d + 24, 2) <= 8)
    return "OS/2 BMP (12-byte header) with a colour palette: stb_image misreads its palette (wrong colours); "
           "convert it to PNG first";
  if (std::strcmp(watched, "PSD") == 0 && n >= 30 && ((d[22] << 8) | d[23]) == 16) {
    uint64_t pos = 26;  // colour mode data, image resources, layer and mask info: each a length, then bytes
    for (int k = 0; k < 3 && pos + 4 <= n; ++k) pos += 4 + read_be32(d + pos);
    if (pos + 2 <= n && ((d[pos] << 8) | d[pos + 1]) == 1)
      return "16-bit PSD with RLE compression: stb_image decodes it as 8-bit (a wrong picture); save it "
             "uncompressed or at 8 bits";
  }
  return {};
}

// What a GIF's first frame looks like through PIL's Image.open(f).convert("RGB") (timm's loader), where
// stb_image 2.27 (Debian) differs: it leaves transparent pixels, and screen pixels outside a first frame
// smaller than the screen, black (alpha 0), or paints the latter in the background colour with red and blue
// swapped (it copies its BGRA palette entry). PIL (9.4) starts frame 0 filled with the transparent index, else
// index 0, and shows a transparent pixel as its palette colour: both are palette[F] of the frame's palette
// (local, else global), F = the transparent index, else 0. `rgba` is stb_image's (w, h, 4) decode of the same
// file; changed in place where it differs. Returns false (rgba untouched) when the blocks before the first
// image cannot be walked, which a file stb_image decoded does not do.
bool gif_first_frame_as_pil(const uint8_t* d, size_t n, uint8_t* rgba, int w, int h) {
  if (n < 13) return false;
  size_t pos = 13;
  const uint8_t* global = nullptr;
  size_t global_n = 0;
  if (d[10] & 0x80) {
    global_n = size_t{2} << (d[10] & 7);
    if (pos + 3 * global_n > n) return false;
    global = d + pos;
    pos += 3 * global_n;
  }
  // The transparent index as PIL keeps it: set by any graphic control extension before the image that marks
  // one, not cleared by a later one that does not (stb_image clears it; then no pixel is transparent for it
  // and the index only colours the screen outside the frame, as in PIL).
  int transparent = -1;
  while (pos < n && d[pos] == 0x21) {  // extensions: label, then sub-blocks up to a zero length
    if (pos + 2 > n) return false;
    const uint8_t label = d[pos + 1];
    pos += 2;
    if (label == 0xF9 && pos + 5 <= n && d[pos] == 4 && (d[pos + 1] & 1)) transparent = d[pos + 4];
    while (pos < n && d[pos] != 0) pos += size_t{1} + d[pos];
    if (pos >= n) return false;
    ++pos;
  }
  if (pos + 10 > n || d[pos] != 0x2C) return false;
  const int x0 = static_cast<int>(read_le(d + pos + 1, 2)), y0 = static_cast<int>(read_le(d + pos + 3, 2));
  const int fw = static_cast<int>(read_le(d + pos + 5, 2)), fh = static_cast<int>(read_le(d + pos + 7, 2));
  const uint8_t* pal = global;
  size_t pal_n = global_n;
  if (d[pos + 9] & 0x80) {
    pal_n = size_t{2} << (d[pos + 9] & 7);
    if (pos + 10 + 3 * pal_n > n) return false;
    pal = d + pos + 10;
  }
  if (!pal) return false;
  const size_t f = transparent >= 0 ? static_cast<size_t>(transparent) : 0;
  // PIL shows an index past the end of a short palette as the grey (i, i, i).
  const uint8_t grey = static_cast<uint8_t>(f);
  const uint8_t fill[3] = {f < pal_n ? pal[3 * f] : grey, f < pal_n ? pal[3 * f + 1] : grey,
                           f < pal_n ? pal[3 * f + 2] : grey};
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* px = rgba + 4 * (static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x));
      const bool inside = x >= x0 && x - x0 < fw && y >= y0 && y - y0 < fh;
      if (!inside || px[3] == 0) std::memcpy(px, fill, 3);  // inside, alpha 0: a transparent (or undrawn) pixel
    }
  }
  return true;
}

// Image formats attnmap does not decode, told by their signatures, so that such a file is refused by name
// instead of with stb_image's "unknown image type": HEIF/HEIC and AVIF (an ISO BMFF "ftyp" box with their
// brands), JPEG XL (codestream or container), JPEG 2000 (JP2 container or codestream), OpenEXR, and SVG
// (text whose first kilobyte opens an <svg> element). Null for anything else.
const char* unsupported_format(const uint8_t* d, size_t n) {
  if (n >= 12 && std::memcmp(d + 4, "ftyp", 4) == 0) {
    const std::string brand(reinterpret_cast<const char*>(d + 8), 4);
    if (brand == "avif" || brand == "avis") return "AVIF";
    for (const char* b : {"heic", "heix", "hevc", "hevx", "heim", "heis", "hevm", "hevs", "mif1", "msf1"})
      if (brand == b) return "HEIF/HEIC";
  }
  if ((n >= 2 && d[0] == 0xFF && d[1] == 0x0A) || (n >= 12 && std::memcmp(d, "\0\0\0\x0CJXL \r\n\x87\n", 12) == 0))
    return "JPEG XL";
  if ((n >= 12 && std::memcmp(d, "\0\0\0\x0CjP  \r\n\x87\n", 12) == 0) ||
      (n >= 4 && std::memcmp(d, "\xFF\x4F\xFF\x51", 4) == 0))
    return "JPEG 2000";
  if (n >= 4 && std::memcmp(d, "\x76\x2F\x31\x01", 4) == 0) return "OpenEXR";
  size_t at = 0;
  if (n >= 3 && std::memcmp(d, "\xEF\xBB\xBF", 3) == 0) at = 3;  // a UTF-8 byte-order mark
  while (at < n && std::isspace(d[at])) ++at;
  if (at < n && d[at] == '<') {
    const std::string head(reinterpret_cast<const char*>(d + at), std::min<size_t>(n - at, 1024));
    if (head.rfind("<svg", 0) == 0 || ((head.rfind("<?xml", 0) == 0 || head.rfind("<!DOCTYPE", 0) == 0) &&
                                       head.find("<svg") != std::string::npos))
      return "SVG";
  }
  return nullptr;
}

}  // namespace detail
}  // namespace attnmap
