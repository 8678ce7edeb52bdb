// image_png.cpp - PNG files written (libdeflate; stb_image_write for comparison), their tEXt chunks read (see
// image_io.hpp)
#include <libdeflate.h>
#include <stb_image_write.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/error.hpp"
#include "io/image_io.hpp"
#include "io/image_io_internal.hpp"

namespace attnmap {

using namespace detail;

namespace {
void append_bytes(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(context);
  const auto* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + size);
}
}  // namespace

namespace {
void check_png_input(const Image& img, const char* who) {
  if (img.width <= 0 || img.height <= 0 || img.rgb.size() != static_cast<size_t>(img.width) * img.height * 3) {
    throw Error(std::string(who) + ": image buffer does not match " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + "x3");
  }
}
}  // namespace

namespace {

// PNG (ISO/IEC 15948) pieces, big-endian: a 4-byte number; a chunk (length, type, data, CRC-32 of type +
// data).
void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  const uint8_t b[4] = {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16),
                        static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
  out.insert(out.end(), b, b + 4);
}

void put_chunk(std::vector<uint8_t>& out, const char type[4], const uint8_t* data, size_t n) {
  put_be32(out, static_cast<uint32_t>(n));
  const size_t at = out.size();
  out.insert(out.end(), type, type + 4);
  if (n > 0) out.insert(out.end(), data, data + n);
  put_be32(out, libdeflate_crc32(0, out.data() + at, n + 4));
}

void put_text_chunk(std::vector<uint8_t>& out, const std::string& keyword, const std::string& text) {
  std::vector<uint8_t> body(keyword.begin(), keyword.end());
  body.push_back(0);
  body.insert(body.end(), text.begin(), text.end());
  put_chunk(out, "tEXt", body.data(), body.size());
}

// The image's rows [y0, y1) into f, each behind its filter byte: the Up filter (type 2: each byte minus the
// byte above it; the first row has zeros above), (w * 3 + 1) bytes a row.
void up_filter_rows(const Image& img, size_t y0, size_t y1, uint8_t* f) {
  const size_t row = static_cast<size_t>(img.width) * 3;
  for (size_t y = y0; y < y1; ++y) {
    uint8_t* o = f + (y - y0) * (row + 1);
    const uint8_t* r = img.rgb.data() + y * row;
    o[0] = 2;
    if (y == 0) {
      std::copy_n(r, row, o + 1);
      continue;
    }
    const uint8_t* u = r - row;
    for (size_t x = 0; x < row; ++x) o[1 + x] = static_cast<uint8_t>(r[x] - u[x]);
  }
}

// A large image's filtered rows as one zlib stream made band by band (zlib level 1, 64 rows a band), each
// at most 64 KiB of it an IDAT chunk appended to `out` as it comes: no copy of all the filtered rows (what
// libdeflate needs) nor of the compressed stream is held.
void put_idat_in_bands(std::vector<uint8_t>& out, const Image& img) {
  // 64 rows a band, fewer for rows so wide that 64 of them pass 64 MiB (zlib counts its input in 32 bits)
  const size_t row = static_cast<size_t>(img.width) * 3 + 1, h = static_cast<size_t>(img.height);
  const size_t band = std::clamp<size_t>((size_t{64} << 20) / row, 1, 64);
  z_stream zs{};
  if (deflateInit(&zs, 1) != Z_OK) throw Error("encode_png: zlib cannot start");
  std::unique_ptr<z_stream, int (*)(z_stream*)> end(&zs, deflateEnd);
  std::vector<uint8_t> rows(row * band), chunk(size_t{1} << 16);
  for (size_t y = 0; y < h; y += band) {
    const size_t y1 = std::min(h, y + band);
    up_filter_rows(img, y, y1, rows.data());
    const size_t bytes = (y1 - y) * row;
    for (size_t at = 0; at < bytes;) {  // pieces of at most 1 GiB (one row can pass 64 MiB)
      const size_t piece = std::min(bytes - at, size_t{1} << 30);
      zs.next_in = rows.data() + at;
      zs.avail_in = static_cast<uInt>(piece);
      at += piece;
      const int flush = y1 == h && at == bytes ? Z_FINISH : Z_NO_FLUSH;
      int r = Z_OK;
      do {
        zs.next_out = chunk.data();
        zs.avail_out = static_cast<uInt>(chunk.size());
        r = deflate(&zs, flush);
        if (r == Z_STREAM_ERROR) throw Error("encode_png: zlib failed");
        if (const size_t n = chunk.size() - zs.avail_out; n > 0) put_chunk(out, "IDAT", chunk.data(), n);
      } while (zs.avail_out == 0 || (flush == Z_FINISH && r != Z_STREAM_END));
    }
  }
}

void set_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24), p[1] = static_cast<uint8_t>(v >> 16),
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

// PNG's rules for a tEXt chunk (ISO/IEC 15948 §11.3.4.3): a keyword of 1 to 79 Latin-1 printable bytes
// (32-126, 161-255), no leading, trailing or consecutive spaces; a text without NUL. Throws attnmap::Error.
void check_text_chunk(const PngText& t) {
  const std::string& k = t.keyword;
  if (k.empty() || k.size() > 79)
    throw Error("encode_png: a tEXt keyword has 1 to 79 characters, found '" + k + "'");
  bool ok = k.front() != ' ' && k.back() != ' ' && k.find("  ") == std::string::npos;
  for (const char ch : k) {
    const auto c = static_cast<unsigned char>(ch);
    ok = ok && ((c >= 32 && c <= 126) || c >= 161);
  }
  if (!ok)
    throw Error(
        "encode_png: a tEXt keyword is Latin-1 printable characters without leading, trailing or double "
        "spaces, found '" +
        k + "'");
  if (t.text.find('\0') != std::string::npos)
    throw Error("encode_png: the tEXt text of '" + k + "' holds a NUL byte");
}

// The signature and the chunks before the image data: IHDR, tEXt Software = attnmap, opt.text, pHYs.
std::vector<uint8_t> png_head(const Image& img, const PngOptions& opt) {
  std::vector<uint8_t> out(kPngSignature, kPngSignature + 8);
  std::vector<uint8_t> ihdr;
  put_be32(ihdr, static_cast<uint32_t>(img.width));
  put_be32(ihdr, static_cast<uint32_t>(img.height));
  ihdr.insert(ihdr.end(),
              {8, 2, 0, 0, 0});  // 8 bits, truecolour (RGB), deflate, adaptive filters, no interlace
  put_chunk(out, "IHDR", ihdr.data(), ihdr.size());
  put_text_chunk(out, "Software", "attnmap");
  for (const PngText& t : opt.text) put_text_chunk(out, t.keyword, t.text);
  if (opt.dpi > 0.0) {
    const auto ppm = static_cast<uint32_t>(std::lround(opt.dpi / 0.0254));
    std::vector<uint8_t> phys;
    put_be32(phys, ppm);
    put_be32(phys, ppm);
    phys.push_back(1);  // the unit: metre
    put_chunk(out, "pHYs", phys.data(), phys.size());
  }
  return out;
}

}  // namespace

namespace detail {

void put_image_data(std::vector<uint8_t>& out, const Image& img, size_t idat_max, size_t in_bands_above) {
  const size_t kIdatMax = idat_max;
  const size_t filtered = (static_cast<size_t>(img.width) * 3 + 1) * static_cast<size_t>(img.height);
  if (filtered > in_bands_above) {
    put_idat_in_bands(out, img);
    put_chunk(out, "IEND", nullptr, 0);
    return;
  }
  thread_local std::unique_ptr<libdeflate_compressor, void (*)(libdeflate_compressor*)> c(
      libdeflate_alloc_compressor(1), libdeflate_free_compressor);
  if (!c) throw Error("encode_png: out of memory");
  std::vector<uint8_t> rows(filtered);
  up_filter_rows(img, 0, static_cast<size_t>(img.height), rows.data());
  const size_t bound = libdeflate_zlib_compress_bound(c.get(), rows.size()), at = out.size();
  out.resize(at + 8 + bound + 12 * (bound / kIdatMax + 1) + 12);  // the stream, chunk frames, IEND
  const size_t n = libdeflate_zlib_compress(c.get(), rows.data(), rows.size(), out.data() + at + 8, bound);
  if (n == 0)
    throw Error("encode_png: libdeflate failed for a " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + " image");
  std::vector<uint8_t>().swap(rows);
  const size_t chunks = (n + kIdatMax - 1) / kIdatMax;
  for (size_t i = chunks;
       i-- > 0;) {  // the last piece first: each moves right by 12 bytes per frame before it
    const size_t len = std::min(kIdatMax, n - i * kIdatMax);
    uint8_t* const frame = out.data() + at + i * (kIdatMax + 12);
    if (i > 0) std::memmove(frame + 8, out.data() + at + 8 + i * kIdatMax, len);
    set_be32(frame, static_cast<uint32_t>(len));
    std::memcpy(frame + 4, "IDAT", 4);
    set_be32(frame + 8 + len, libdeflate_crc32(0, frame + 4, len + 4));
  }
  out.resize(at + n + 12 * chunks);
  put_chunk(out, "IEND", nullptr, 0);
}

}  // namespace detail

std::vector<uint8_t> encode_png(const Image& img, const PngOptions& opt) {
  check_png_input(img, "encode_png");
  if (!(opt.dpi >= 0.0 && opt.dpi <= 1e6) || (opt.dpi > 0.0 && std::lround(opt.dpi / 0.0254) < 1))
    throw Error("encode_png: dpi must be 0 (no pHYs) or in [0.02, 1000000] (at least 1 pixel per metre), found " +
                std::to_string(opt.dpi));
  for (const PngText& t : opt.text) check_text_chunk(t);
  // Every row Up-filtered, deflated by libdeflate at level 1 (docs/performance.md, "PNG writing"): ~9 ms for
  // a 786 x 847 overlay where libspng's fastest setting, zlib's run-length strategy, took 13 ms unfiltered
  // and 23 ms with the Paeth filter; files within 10 % of that one's.
  std::vector<uint8_t> out = png_head(img, opt);
  put_image_data(out, img, size_t{1} << 30, size_t{64} << 20);  // a chunk holds at most 2^31 - 1 bytes
  return out;
}

std::vector<uint8_t> encode_png_stb(const Image& img) {
  check_png_input(img, "encode_png_stb");
  std::vector<uint8_t> out;
  if (!stbi_write_png_to_func(append_bytes, &out, img.width, img.height, 3, img.rgb.data(), img.width * 3)) {
    throw Error("encode_png_stb: stb_image_write failed for a " + std::to_string(img.width) + "x" +
                std::to_string(img.height) + " image");
  }
  return out;
}

bool written_by_attnmap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::vector<char> buf(64 * 1024);
  in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  const size_t n = static_cast<size_t>(in.gcount());
  const auto* d = reinterpret_cast<const uint8_t*>(buf.data());
  if (n < 8 || std::memcmp(d, kPngSignature, 8) != 0) return false;
  static const char kMark[] = "Software\0attnmap";  // keyword, NUL separator, text
  size_t pos = 8;
  while (pos + 8 <= n) {
    const size_t len = read_be32(d + pos);
    const uint8_t* type = d + pos + 4;
    if (std::memcmp(type, "IDAT", 4) == 0 || std::memcmp(type, "IEND", 4) == 0) return false;
    if (std::memcmp(type, "tEXt", 4) == 0 && len >= sizeof kMark - 1 && pos + 8 + sizeof kMark - 1 <= n &&
        std::memcmp(d + pos + 8, kMark, sizeof kMark - 1) == 0)
      return true;
    if (len > n) return false;
    pos += 12 + len;
  }
  return false;
}

std::vector<PngText> read_png_text(const std::string& path) {
  // Chunk by chunk up to the image data: only the few hundred bytes before IDAT are read, not the pixels.
  std::vector<PngText> out;
  std::ifstream in(path, std::ios::binary);
  uint8_t head[8];
  if (!in.read(reinterpret_cast<char*>(head), 8) || std::memcmp(head, kPngSignature, 8) != 0) return out;
  size_t seen = 8;
  while (in.read(reinterpret_cast<char*>(head), 8)) {
    const size_t len = read_be32(head);
    if (std::memcmp(head + 4, "IDAT", 4) == 0 || std::memcmp(head + 4, "IEND", 4) == 0) break;
    seen += 12 + len;
    if (len > (1u << 20) || seen > (16u << 20)) break;  // not what encode_png writes before its image data
    if (std::memcmp(head + 4, "tEXt", 4) == 0) {
      std::string body(len, '\0');
      if (!in.read(body.data(), static_cast<std::streamsize>(len))) break;
      const size_t nul = body.find('\0');
      if (nul != std::string::npos && nul > 0) out.push_back({body.substr(0, nul), body.substr(nul + 1)});
      in.seekg(4, std::ios::cur);  // CRC
    } else {
      in.seekg(static_cast<std::streamoff>(len) + 4, std::ios::cur);
    }
  }
  return out;
}

void write_png(const std::string& path, const Image& img, const PngOptions& opt) {
  write_file_atomic(path, encode_png(img, opt));
}

}  // namespace attnmap
