#include "io/image_webp_tiff.hpp"

#include <tiffio.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "core/tensor.hpp"

namespace attnmap {

void check_pixel_limit(const std::string& path, uint64_t w, uint64_t h, uint64_t max_pixels) {
  const uint64_t pixels = w * h;  // each side < 2^32: no overflow
  if (pixels > max_pixels) {
    throw Error(path + ": image of " + std::to_string(w) + "x" + std::to_string(h) + " = " + std::to_string(pixels) +
                " pixels exceeds the limit of " + std::to_string(max_pixels) + " pixels (" + setting_ref("max_pixels") + ")");
  }
}

namespace {

uint32_t le32(const uint8_t* p) { return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24); }

// A library's message for one terminal line: printable ASCII only, at most 300 characters.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  if (s.size() > 300) s = s.substr(0, 297) + "...";
  return s;
}

size_t rgb_bytes(uint64_t w, uint64_t h, const std::string& path) {
  return checked_mul(checked_mul(static_cast<size_t>(w), static_cast<size_t>(h), path.c_str()), 3, path.c_str());
}

// ----------------------------------------------------------------------------------------------- WebP

const char* vp8_status(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "decoding suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "not enough data";
    default: return "unknown status";
  }
}

[[noreturn]] void throw_webp(const std::string& path, VP8StatusCode s) {
  if (s == VP8_STATUS_NOT_ENOUGH_DATA)
    throw Error(path + ": truncated WebP: libwebp found the image data cut short (not enough data)");
  throw Error(path + ": corrupt WebP: libwebp refused it (" + vp8_status(s) + ")");
}

// The first frame of an animated WebP as WebPAnimDecoder composes it on the canvas (transparent black where
// the frame does not cover it), alpha dropped.
Image decode_webp_animation(const uint8_t* data, size_t size, const std::string& path) {
  WebPAnimDecoderOptions o;
  if (!WebPAnimDecoderOptionsInit(&o)) throw Error(path + ": libwebp: incompatible demux library version");
  o.color_mode = MODE_RGBA;
  o.use_threads = 0;
  const WebPData wd = {data, size};
  std::unique_ptr<WebPAnimDecoder, void (*)(WebPAnimDecoder*)> dec(WebPAnimDecoderNew(&wd, &o), WebPAnimDecoderDelete);
  if (!dec) throw Error(path + ": corrupt WebP: libwebp's demuxer refused the animation (its chunks are damaged or cut)");
  WebPAnimInfo info;
  if (!WebPAnimDecoderGetInfo(dec.get(), &info) || info.canvas_width == 0 || info.canvas_height == 0)
    throw Error(path + ": corrupt WebP: the animation has no canvas size");
  uint8_t* frame = nullptr;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(dec.get(), &frame, &timestamp) || !frame)
    throw Error(path + ": corrupt WebP: libwebp could not decode the animation's first frame");
  Image img;
  img.width = static_cast<int>(info.canvas_width);
  img.height = static_cast<int>(info.canvas_height);
  img.rgb.resize(rgb_bytes(info.canvas_width, info.canvas_height, path));
  const size_t npx = img.rgb.size() / 3;
  for (size_t i = 0; i < npx; ++i) std::memcpy(&img.rgb[3 * i], frame + 4 * i, 3);
  return img;
}

// The EXIF orientation of a WebP: its EXIF chunk (RIFF chunks after "WEBP": fourcc, little-endian size,
// payload padded to even) holds TIFF-structured EXIF data, usually without JPEG's "Exif\0\0" header, which
// libexif wants: added when missing. 1 when there is none.
int webp_orientation(const uint8_t* d, size_t n) {
  size_t pos = 12;
  while (pos + 8 <= n) {
    const uint64_t len = le32(d + pos + 4);
    if (len > n - pos - 8) return 1;
    if (std::memcmp(d + pos, "EXIF", 4) == 0) {
      const uint8_t* p = d + pos + 8;
      const size_t k = static_cast<size_t>(len);
      if (k >= 6 && std::memcmp(p, "Exif\0\0", 6) == 0) return exif_orientation(p, k);
      std::vector<uint8_t> with_header = {'E', 'x', 'i', 'f', 0, 0};
      with_header.insert(with_header.end(), p, p + k);
      return exif_orientation(with_header.data(), with_header.size());
    }
    pos += 8 + static_cast<size_t>(len) + (len & 1);
  }
  return 1;
}

Image decode_webp_still(const uint8_t* data, size_t len, const WebPBitstreamFeatures& f, const std::string& path) {
  Image img;
  img.width = f.width;
  img.height = f.height;
  img.rgb.resize(rgb_bytes(static_cast<uint64_t>(f.width), static_cast<uint64_t>(f.height), path));
  WebPDecoderConfig cfg;
  if (!WebPInitDecoderConfig(&cfg)) throw Error(path + ": libwebp: incompatible decoder library version");
  cfg.options.use_threads = 0;
  cfg.output.colorspace = MODE_RGB;  // alpha, when present, is dropped
  cfg.output.is_external_memory = 1;
  cfg.output.u.RGBA.rgba = img.rgb.data();
  cfg.output.u.RGBA.stride = f.width * 3;
  cfg.output.u.RGBA.size = img.rgb.size();
  const VP8StatusCode s = WebPDecode(data, len, &cfg);
  WebPFreeDecBuffer(&cfg.output);
  if (s != VP8_STATUS_OK) throw_webp(path, s);
  return img;
}

}  // namespace

bool is_webp(const uint8_t* d, size_t n) {
  return n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0;
}

Image decode_webp(const uint8_t* data, size_t size, const std::string& path, const LoadOptions& opt) {
  // RIFF: "RIFF", the size of what follows (little-endian), "WEBP", chunks. Bytes past it are ignored.
  const uint64_t declared = uint64_t{8} + le32(data + 4);
  if (declared > size)
    throw Error(path + ": truncated WebP: its RIFF header declares " + std::to_string(declared) +
                " bytes, the file has " + std::to_string(size));
  const size_t len = static_cast<size_t>(declared);
  WebPBitstreamFeatures f;
  VP8StatusCode s = WebPGetFeatures(data, len, &f);
  if (s != VP8_STATUS_OK) throw_webp(path, s);
  if (f.width <= 0 || f.height <= 0) throw Error(path + ": image declares an empty size");
  check_pixel_limit(path, static_cast<uint64_t>(f.width), static_cast<uint64_t>(f.height), opt.max_pixels);
  Image img = f.has_animation ? decode_webp_animation(data, len, path) : decode_webp_still(data, len, f, path);
  // The EXIF orientation, as for a JPEG (PIL's ImageOps.exif_transpose reads a WebP's EXIF chunk too).
  if (opt.apply_exif) {
    const int orientation = webp_orientation(data, len);
    if (orientation != 1) img = apply_orientation(img, orientation);
  }
  return img;
}


// ----------------------------------------------------------------------------------------------- TIFF

namespace {

// The file in memory, as libtiff's client I/O (TIFFClientOpen) sees it: read-only, seekable past the end.
struct TiffMemory {
  const uint8_t* data;
  uint64_t size;
  uint64_t pos = 0;
};

tmsize_t tiff_read(thandle_t h, void* buf, tmsize_t n) {
  auto* m = static_cast<TiffMemory*>(h);
  if (n <= 0 || m->pos >= m->size) return 0;
  const uint64_t k = std::min<uint64_t>(static_cast<uint64_t>(n), m->size - m->pos);
  std::memcpy(buf, m->data + m->pos, static_cast<size_t>(k));
  m->pos += k;
  return static_cast<tmsize_t>(k);
}

tmsize_t tiff_write(thandle_t, void*, tmsize_t) { return -1; }

toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
  auto* m = static_cast<TiffMemory*>(h);
  const uint64_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->size : 0;
  // libtiff passes negative offsets as their two's complement (toff_t is unsigned).
  const int64_t delta = static_cast<int64_t>(off);
  if (whence != SEEK_SET && delta < 0 && static_cast<uint64_t>(-(delta + 1)) + 1 > base) return static_cast<toff_t>(-1);
  const uint64_t to = whence == SEEK_SET ? off : base + static_cast<uint64_t>(delta);
  m->pos = to;
  return to;
}

int tiff_close(thandle_t) { return 0; }
toff_t tiff_size(thandle_t h) { return static_cast<TiffMemory*>(h)->size; }
int tiff_map(thandle_t, void**, toff_t*) { return 0; }  // not mapped: libtiff reads through tiff_read
void tiff_unmap(thandle_t, void*, toff_t) {}

// libtiff's messages for one file: the first error is kept as the reason; warnings (unknown tags and the
// like, which PIL ignores too) are dropped. Returning 1 stops libtiff from calling its global handlers.
struct TiffLog {
  std::string name;  // the name passed to TIFFClientOpen, which some messages start with
  std::string error;
};

int tiff_on_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* log = static_cast<TiffLog*>(user);
  if (log->error.empty()) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    std::string msg = buf;
    if (msg.rfind(log->name + ": ", 0) == 0) msg.erase(0, log->name.size() + 2);
    // The module is a function name ("TIFFReadDirectory") or, for codecs, the file name itself: not repeated.
    const bool named = module && *module && log->name != module && msg.find(module) == std::string::npos;
    log->error = one_line(named ? std::string(module) + ": " + msg : msg);
  }
  return 1;
}

int tiff_on_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

// Messages libtiff sends without a TIFF handle (or before its options apply) go to its global handlers:
// set to none, once, so nothing is ever printed raw.
void silence_libtiff_globally() {
  static std::once_flag once;
  std::call_once(once, [] {
    TIFFSetErrorHandler(nullptr);
    TIFFSetErrorHandlerExt(nullptr);
    TIFFSetWarningHandler(nullptr);
    TIFFSetWarningHandlerExt(nullptr);
  });
}

// Why libtiff could not open the file, from its header and first directory (TIFF 6.0 section 2, BigTIFF):
// "truncated TIFF: ..." when the file ends before the first directory is complete, else empty.
std::string tiff_header_damage(const uint8_t* d, size_t n) {
  const bool le = d[0] == 'I', big = (le ? d[2] : d[3]) == 0x2B;
  auto get = [&](uint64_t at, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{d[at + static_cast<uint64_t>(le ? i : bytes - 1 - i)]} << (8 * i);
    return v;
  };
  const uint64_t head = big ? 16 : 8;
  if (n < head) return "truncated TIFF: the file ends inside its " + std::to_string(head) + "-byte header";
  const uint64_t ifd = big ? get(8, 8) : get(4, 4);
  const uint64_t count_bytes = big ? 8 : 2, entry = big ? 20 : 12;
  if (ifd >= n || n - ifd < count_bytes)
    return "truncated TIFF: its first directory is at byte " + std::to_string(ifd) + ", the file has " + std::to_string(n) +
           " bytes";
  const uint64_t count = get(ifd, static_cast<int>(count_bytes));
  if (count <= (n - ifd - count_bytes) / entry && (n - ifd - count_bytes) >= count * entry) return {};
  return "truncated TIFF: the file ends inside its first directory (" + std::to_string(count) + " entries at byte " +
         std::to_string(ifd) + ", the file has " + std::to_string(n) + " bytes)";
}

// The first directory's layout, as far as the pixel reader needs it.
struct TiffLayout {
  uint32_t w = 0, h = 0;
  uint16_t bits = 1, spp = 1, photometric = 0, planar = PLANARCONFIG_CONTIG, format = SAMPLEFORMAT_UINT;
  uint16_t orientation = ORIENTATION_TOPLEFT;  // tag 274, the EXIF orientation's origin
  bool tiled = false, assoc_alpha = false;
  uint32_t unit_w = 0, unit_h = 0;  // tile size, or (width, rows per strip)
  bool grey() const { return photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE; }
  /// Read by attnmap's own loop (else through libtiff's RGBA reader).
  bool direct() const {
    return (bits == 8 || bits == 16) && format == SAMPLEFORMAT_UINT && ((grey() && spp >= 1) || (photometric == PHOTOMETRIC_RGB && spp >= 3));
  }
};

TiffLayout tiff_layout(TIFF* t) {
  TiffLayout L;
  TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &L.w);
  TIFFGetField(t, TIFFTAG_IMAGELENGTH, &L.h);
  TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &L.bits);
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &L.spp);
  TIFFGetFieldDefaulted(t, TIFFTAG_PLANARCONFIG, &L.planar);
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLEFORMAT, &L.format);
  if (!TIFFGetField(t, TIFFTAG_PHOTOMETRIC, &L.photometric)) L.photometric = L.spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
  uint16_t extra_n = 0;
  uint16_t* extra = nullptr;
  if (TIFFGetField(t, TIFFTAG_EXTRASAMPLES, &extra_n, &extra) && extra_n > 0 && extra)
    L.assoc_alpha = extra[0] == EXTRASAMPLE_ASSOCALPHA && L.spp == (L.grey() ? 2 : 4);
  TIFFGetFieldDefaulted(t, TIFFTAG_ORIENTATION, &L.orientation);
  L.tiled = TIFFIsTiled(t) != 0;
  if (L.tiled) {
    TIFFGetField(t, TIFFTAG_TILEWIDTH, &L.unit_w);
    TIFFGetField(t, TIFFTAG_TILELENGTH, &L.unit_h);
  } else {
    L.unit_w = L.w;
    uint32_t rps = 0;
    TIFFGetFieldDefaulted(t, TIFFTAG_ROWSPERSTRIP, &rps);
    L.unit_h = std::min(rps == 0 ? L.h : rps, L.h);
  }
  return L;
}

struct TiffReader {
  TIFF* t;
  const TiffLayout& L;
  const std::string& path;
  TiffLog& log;
  uint64_t file_size;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(path + ": " + what + (log.error.empty() ? std::string() : " (libtiff: " + log.error + ")"));
  }

  // A strip or tile that lies past the end of the file is a cut file, named as such before libtiff reads it.
  void check_in_file(uint32_t index, uint32_t count) const {
    const uint64_t off = TIFFGetStrileOffset(t, index), bytes = TIFFGetStrileByteCount(t, index);
    if (off > file_size || bytes > file_size - off)
      throw Error(path + ": truncated TIFF: " + (L.tiled ? "tile " : "strip ") + std::to_string(index + 1) + " of " +
                  std::to_string(count) + " (bytes " + std::to_string(off) + ".." + std::to_string(off + bytes) +
                  ") lies past the end of the file (" + std::to_string(file_size) + " bytes)");
  }

  // One decoded strip or tile (`rows` x `cols` pixels at (x0, y0), rows `stride` bytes apart) into `img`;
  // `plane` is the sample plane for planar files, -1 for contiguous ones.
  void put(const uint8_t* buf, size_t stride, uint32_t x0, uint32_t y0, uint32_t rows, uint32_t cols, int plane,
           bool keep_nonzero, Image& img) const {
    const bool wide = L.bits == 16, invert = L.photometric == PHOTOMETRIC_MINISWHITE;
    const size_t per = plane < 0 ? L.spp : 1, sample = wide ? 2 : 1;
    const int alpha_at = L.assoc_alpha && plane < 0 ? (L.grey() ? 1 : 3) : -1;
    auto value = [&](const uint8_t* p) -> uint32_t {
      uint32_t v = p[0];
      if (wide) {
        uint16_t u;
        std::memcpy(&u, p, 2);  // libtiff hands samples over in the machine's byte order
        v = u;
      }
      return invert ? (wide ? 65535u : 255u) - v : v;
    };
    auto to8 = [&](uint32_t v) -> uint8_t {
      if (!wide) return static_cast<uint8_t>(v);
      const uint8_t b = static_cast<uint8_t>(v >> 8);  // as stb_image's 16-bit PNG reading
      return keep_nonzero && v != 0 && b == 0 ? uint8_t{1} : b;
    };
    const uint32_t amax = wide ? 65535u : 255u;
    for (uint32_t r = 0; r < rows; ++r) {
      const uint8_t* row = buf + r * stride;
      uint8_t* out = img.rgb.data() + (static_cast<size_t>(y0 + r) * L.w + x0) * 3;
      for (uint32_t c = 0; c < cols; ++c, out += 3) {
        const uint8_t* px = row + c * per * sample;
        const uint32_t a = alpha_at >= 0 ? value(px + static_cast<size_t>(alpha_at) * sample) : amax;
        for (int ch = 0; ch < 3; ++ch) {
          if (plane >= 0 && !L.grey() && plane != ch) continue;
          uint32_t v = value(px + (plane >= 0 || L.grey() ? 0 : static_cast<size_t>(ch)) * sample);
          if (a != amax) v = a == 0 ? 0 : std::min<uint32_t>(amax, v * amax / a);  // premultiplied: divided out as PIL does
          out[ch] = to8(v);
        }
      }
    }
  }

  // Calls visit(plane, x0, y0, index) for every strip or tile the picture needs.
  template <class Visit>
  void each_unit(int planes, uint32_t count, Visit&& visit) const {
    for (int p = 0; p < planes; ++p) {
      for (uint64_t y0 = 0; y0 < L.h; y0 += L.unit_h) {
        for (uint64_t x0 = 0; x0 < L.w; x0 += L.unit_w) {
          const uint32_t x = static_cast<uint32_t>(x0), y = static_cast<uint32_t>(y0);
          const uint32_t index = L.tiled ? TIFFComputeTile(t, x, y, 0, static_cast<uint16_t>(p))
                                         : TIFFComputeStrip(t, y, static_cast<uint16_t>(p));
          if (index >= count) fail("corrupt TIFF: it has too few " + std::string(L.tiled ? "tiles" : "strips"));
          visit(p, x, y, index);
        }
      }
    }
  }

  Image read_direct(bool keep_nonzero) const {
    if (L.unit_w == 0 || L.unit_h == 0) fail("corrupt TIFF: its " + std::string(L.tiled ? "tile" : "strip") + " size is 0");
    const bool planar = L.planar == PLANARCONFIG_SEPARATE;
    const int planes = planar ? (L.grey() ? 1 : 3) : 1;
    const tmsize_t unit = L.tiled ? TIFFTileSize(t) : TIFFStripSize(t);
    const tmsize_t stride = L.tiled ? TIFFTileRowSize(t) : TIFFScanlineSize(t);
    // A tile far larger than the picture is a corrupt directory, not a reason to allocate gigabytes.
    const uint64_t plane_bytes = uint64_t{L.w} * L.h * (planar ? 1u : L.spp) * (L.bits / 8u);
    if (unit <= 0 || stride <= 0 || static_cast<uint64_t>(unit) > std::max<uint64_t>(4 * plane_bytes, uint64_t{1} << 24))
      fail("corrupt TIFF: a " + std::to_string(L.unit_w) + "x" + std::to_string(L.unit_h) + (L.tiled ? " tile" : " strip") +
           " does not fit a " + std::to_string(L.w) + "x" + std::to_string(L.h) + " picture");
    const uint32_t count = L.tiled ? TIFFNumberOfTiles(t) : TIFFNumberOfStrips(t);
    // Every strip/tile inside the file before the picture's buffer is allocated: a cut file costs nothing.
    each_unit(planes, count, [&](int, uint32_t, uint32_t, uint32_t index) { check_in_file(index, count); });
    Image img;
    img.width = static_cast<int>(L.w);
    img.height = static_cast<int>(L.h);
    img.rgb.resize(rgb_bytes(L.w, L.h, path));
    std::vector<uint8_t> buf(static_cast<size_t>(unit));
    each_unit(planes, count, [&](int p, uint32_t x0, uint32_t y0, uint32_t index) {
      const uint32_t rows = std::min(L.unit_h, L.h - y0), cols = std::min(L.unit_w, L.w - x0);
      const tmsize_t got = L.tiled ? TIFFReadEncodedTile(t, index, buf.data(), unit)
                                   : TIFFReadEncodedStrip(t, index, buf.data(), static_cast<tmsize_t>(rows) * stride);
      const uint64_t need =
          uint64_t{rows - 1} * static_cast<uint64_t>(stride) + uint64_t{cols} * (planar ? 1u : L.spp) * (L.bits / 8u);
      if (got < 0 || static_cast<uint64_t>(got) < need)
        fail("corrupt TIFF: " + std::string(L.tiled ? "tile " : "strip ") + std::to_string(index + 1) + " of " +
             std::to_string(count) + " could not be decoded");
      put(buf.data(), static_cast<size_t>(stride), x0, y0, rows, cols, planar ? p : -1, keep_nonzero, img);
    });
    return img;
  }

  // Palette, bilevel, YCbCr, CMYK, Lab...: libtiff's RGBA reader (8 bits per channel), alpha dropped.
  Image read_rgba() const {
    char why[1024] = "";
    if (!TIFFRGBAImageOK(t, why))
      throw Error(path + ": unsupported TIFF: " + one_line(why) + "; convert it to an 8- or 16-bit RGB or greyscale TIFF");
    const uint32_t count = L.tiled ? TIFFNumberOfTiles(t) : TIFFNumberOfStrips(t);
    for (uint32_t i = 0; i < count; ++i) check_in_file(i, count);
    const size_t npx = checked_mul(static_cast<size_t>(L.w), static_cast<size_t>(L.h), path.c_str());
    std::vector<uint32_t> raster(npx);
    // The stored pixel order (top row first); the Orientation tag is applied afterwards like the others'.
    TIFFSetField(t, TIFFTAG_ORIENTATION, ORIENTATION_TOPLEFT);
    if (!TIFFReadRGBAImageOriented(t, L.w, L.h, raster.data(), ORIENTATION_TOPLEFT, 1))
      fail("corrupt TIFF: libtiff could not decode its pixels");
    Image img;
    img.width = static_cast<int>(L.w);
    img.height = static_cast<int>(L.h);
    img.rgb.resize(npx * 3);
    for (size_t i = 0; i < npx; ++i) {
      img.rgb[3 * i] = static_cast<uint8_t>(TIFFGetR(raster[i]));
      img.rgb[3 * i + 1] = static_cast<uint8_t>(TIFFGetG(raster[i]));
      img.rgb[3 * i + 2] = static_cast<uint8_t>(TIFFGetB(raster[i]));
    }
    return img;
  }
};

}  // namespace

bool is_tiff(const uint8_t* d, size_t n) {
  if (n < 4) return false;
  return (d[0] == 'I' && d[1] == 'I' && (d[2] == 0x2A || d[2] == 0x2B) && d[3] == 0) ||
         (d[0] == 'M' && d[1] == 'M' && d[2] == 0 && (d[3] == 0x2A || d[3] == 0x2B));
}

Image decode_tiff(const uint8_t* data, size_t size, const std::string& path, const LoadOptions& opt) {
  silence_libtiff_globally();
  TiffMemory mem{data, size};
  TiffLog log{path, {}};
  std::unique_ptr<TIFFOpenOptions, void (*)(TIFFOpenOptions*)> o(TIFFOpenOptionsAlloc(), TIFFOpenOptionsFree);
  if (!o) throw Error(path + ": out of memory opening the TIFF");
  TIFFOpenOptionsSetErrorHandlerExtR(o.get(), tiff_on_error, &log);
  TIFFOpenOptionsSetWarningHandlerExtR(o.get(), tiff_on_warning, &log);
  // libtiff's own buffers (directories, strip tables, codec state): none larger than the biggest picture allowed.
  const uint64_t cap = std::min<uint64_t>(opt.max_pixels, uint64_t{1} << 36) * 8 + (uint64_t{64} << 20);
  TIFFOpenOptionsSetMaxSingleMemAlloc(o.get(), static_cast<tmsize_t>(std::min<uint64_t>(cap, INT64_MAX)));
  std::unique_ptr<TIFF, void (*)(TIFF*)> t(
      TIFFClientOpenExt(path.c_str(), "rm", &mem, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size, tiff_map,
                        tiff_unmap, o.get()),
      TIFFClose);
  if (!t) {
    if (const std::string damage = tiff_header_damage(data, size); !damage.empty()) throw Error(path + ": " + damage);
    throw Error(path + ": corrupt TIFF: " + (log.error.empty() ? std::string("libtiff could not read its first directory")
                                                                : log.error));
  }
  const TiffLayout L = tiff_layout(t.get());
  if (L.w == 0 || L.h == 0) throw Error(path + ": image declares an empty size");
  check_pixel_limit(path, L.w, L.h, opt.max_pixels);
  const TiffReader reader{t.get(), L, path, log, size};
  Image img = L.direct() ? reader.read_direct(opt.keep_nonzero) : reader.read_rgba();
  if (opt.apply_exif && L.orientation >= 2 && L.orientation <= 8) img = apply_orientation(img, L.orientation);
  if (!TIFFLastDirectory(t.get())) {
    const tdir_t pages = TIFFNumberOfDirectories(t.get());
    img.notes.push_back("multi-page TIFF: page 1 of " + std::to_string(pages) +
                        " rendered (the others are ignored, as PIL's Image.open reads page 1)");
  }
  return img;
}

}  // namespace attnmap
