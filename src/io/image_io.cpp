#include "io/image_io.hpp"

#include <stb_image.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <filesystem>
#include <fstream>
#include <memory>

#include <libexif/exif-data.h>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "io/image_io_internal.hpp"
#include "io/image_webp_tiff.hpp"

namespace attnmap {

using namespace detail;

namespace fs = std::filesystem;

std::vector<uint8_t> read_file(const std::string& path) {
  std::error_code ec;
  // A FIFO, a device or a folder would hang or mislead (std::ifstream opens them): refused up front.
  const fs::file_status st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) throw Error(path + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw Error(path + ": cannot read");
  in.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) throw Error(path + ": read failed");
  return bytes;
}

int exif_orientation(const uint8_t* data, size_t size) {
  if (size > static_cast<size_t>(UINT_MAX)) return 1;
  ExifData* ed = exif_data_new_from_data(data, static_cast<unsigned int>(size));
  if (!ed) return 1;
  int orientation = 1;
  ExifEntry* e = exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
  if (e && e->format == EXIF_FORMAT_SHORT && e->components >= 1 && e->data && e->size >= 2)
    orientation = exif_get_short(e->data, exif_data_get_byte_order(ed));
  exif_data_unref(ed);
  return orientation >= 1 && orientation <= 8 ? orientation : 1;
}

Image apply_orientation(const Image& img, int orientation) {
  if (orientation <= 1 || orientation > 8) return img;
  const bool swap = orientation >= 5;  // 5..8 transpose the axes
  Image out;
  out.width = swap ? img.height : img.width;
  out.height = swap ? img.width : img.height;
  out.rgb.resize(img.rgb.size());
  const int W = out.width, H = out.height, sw = img.width, sh = img.height;
  for (int y = 0; y < H; ++y) {
    for (int x = 0; x < W; ++x) {
      int sx = 0, sy = 0;  // stored pixel shown at displayed (x, y)
      switch (orientation) {
        case 2: sx = sw - 1 - x; sy = y; break;           // mirrored horizontally
        case 3: sx = sw - 1 - x; sy = sh - 1 - y; break;  // rotated 180
        case 4: sx = x; sy = sh - 1 - y; break;           // mirrored vertically
        case 5: sx = y; sy = x; break;                    // transposed
        case 6: sx = y; sy = sh - 1 - x; break;           // stored rotated 90 CCW: turn 90 CW to show
        case 7: sx = sw - 1 - y; sy = sh - 1 - x; break;  // transversed
        default: sx = sw - 1 - y; sy = x; break;          // 8: turn 90 CCW to show
      }
      const size_t d = (static_cast<size_t>(y) * static_cast<size_t>(W) + static_cast<size_t>(x)) * 3;
      const size_t s = (static_cast<size_t>(sy) * static_cast<size_t>(sw) + static_cast<size_t>(sx)) * 3;
      out.rgb[d] = img.rgb[s];
      out.rgb[d + 1] = img.rgb[s + 1];
      out.rgb[d + 2] = img.rgb[s + 2];
    }
  }
  return out;
}

namespace {

// A 16-bit PGM/PPM whose header inspect_pnm accepted and whose pixels are all present, to 8-bit RGB
// (keep_nonzero: a non-zero sample becomes at least 1).
Image decode_pnm16(const PnmInfo& pnm, const uint8_t* data, const std::string& path, bool keep_nonzero) {
  Image img;
  img.width = static_cast<int>(pnm.width);
  img.height = static_cast<int>(pnm.height);
  const size_t npx = checked_mul(static_cast<size_t>(pnm.width), static_cast<size_t>(pnm.height), path.c_str());
  img.rgb.resize(checked_mul(npx, 3, path.c_str()));
  const uint8_t* src = data + pnm.data_offset;
  const uint32_t maxval = static_cast<uint32_t>(pnm.maxval);
  const size_t c = static_cast<size_t>(pnm.channels);
  for (size_t i = 0; i < npx; ++i) {
    for (size_t ch = 0; ch < 3; ++ch) {
      const size_t at = 2 * (i * c + (c == 3 ? ch : 0));
      const uint32_t v = std::min<uint32_t>((uint32_t(src[at]) << 8) | src[at + 1], maxval);
      const uint32_t b = (v * 255 + maxval / 2) / maxval;
      img.rgb[3 * i + ch] = static_cast<uint8_t>(keep_nonzero && v != 0 && b == 0 ? 1 : b);
    }
  }
  return img;
}

// stb_image reads a file held in memory as if zeros followed its end, so a BMP, GIF, PSD, PIC or RLE TGA cut
// short decodes without complaint, its missing part black. Those formats are therefore decoded through
// stb_image's callback interface from this reader, which notes when the decoder asks for bytes the file does
// not have (read at the end, skip past it, or a bulk read cut short).
struct EndWatch {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  bool past_end = false;
};

int watch_read(void* user, char* out, int n) {
  auto* w = static_cast<EndWatch*>(user);
  const size_t want = n > 0 ? static_cast<size_t>(n) : 0;
  const size_t left = w->size - w->pos;
  // stb_image refills its 128-byte buffer with requests of exactly 128: a short answer to those is normal.
  if (left == 0 || (want > left && want != 128)) w->past_end = true;
  const size_t k = std::min(want, left);
  std::memcpy(out, w->data + w->pos, k);
  w->pos += k;
  return static_cast<int>(k);
}

void watch_skip(void* user, int n) {
  auto* w = static_cast<EndWatch*>(user);
  const size_t step = n > 0 ? static_cast<size_t>(n) : 0;
  // A BMP's last row may lack its (at most 3) padding bytes without any pixel missing.
  if (step > w->size - w->pos + 3) w->past_end = true;
  w->pos += std::min(step, w->size - w->pos);
}

int watch_eof(void* user) {
  const auto* w = static_cast<const EndWatch*>(user);
  return w->pos >= w->size ? 1 : 0;
}

const stbi_io_callbacks kWatchCallbacks = {watch_read, watch_skip, watch_eof};

// stb_image's failure reason, which may quote bytes of the file (a PNG chunk type): anything but printable
// ASCII becomes '?', so that an error stays one line and sends no control codes to the terminal.
std::string stb_reason(const uint8_t* d, size_t n) {
  std::string r = stbi_failure_reason() ? stbi_failure_reason() : "unknown reason";
  // stb_image's GIF reader clears the reason, then stops without one at a trailer (end marker) that comes
  // before any image. Its PNG reader can also stop without one (a file cut inside an early chunk; the
  // caller names that case first).
  if (r.empty())
    r = n >= 4 && std::memcmp(d, "GIF8", 4) == 0 ? "no image before the GIF's end marker" : "stb_image gave no reason";
  for (char& c : r)
    if (c < 0x20 || c > 0x7e) c = '?';
  return r;
}

// Refuses a file stb_image could not read (`what`: "not a readable image" after its header probe, "cannot
// decode image" after its decode): a damaged PNG is named as such, anything else gets stb_image's reason; a
// failed allocation ("outofmem") is std::bad_alloc, which a run reports as its other allocations ("out of
// memory", with the address-space limit), not as a fault of the file.
[[noreturn]] void throw_stb_failure(const std::string& path, const uint8_t* d, size_t n, const char* what) {
  if (const char* r = stbi_failure_reason(); r != nullptr && std::strcmp(r, "outofmem") == 0) throw std::bad_alloc();
  if (const std::string damage = png_damage(d, n); !damage.empty()) throw Error(path + ": " + damage);
  throw Error(path + ": " + what + " (" + stb_reason(d, n) + ")");
}

// decode_image's steps, in the order it runs them.

// PGM/PPM before stb_image: a malformed header, the pixel limit, a file shorter than its pixels; 16-bit files
// are decoded here. Returns true with `out` set when the file was decoded.
bool decode_pnm_first(const PnmInfo& pnm, const uint8_t* data, size_t size, const std::string& path,
                      const LoadOptions& opt, Image* out) {
  if (!pnm.header_ok) throw Error(path + ": malformed PGM/PPM header (width, height and maxval 1..65535 expected)");
  check_pixel_limit(path, pnm.width, pnm.height, opt.max_pixels);
  const uint64_t have = size - pnm.data_offset;
  if (have < pnm.data_bytes) {
    throw Error(path + ": truncated PGM/PPM: " + std::to_string(pnm.width) + "x" + std::to_string(pnm.height) +
                (pnm.maxval > 255 ? " 16-bit" : " 8-bit") + " needs " + std::to_string(pnm.data_bytes) +
                " bytes of pixels, the file has " + std::to_string(have));
  }
  // Debian's stb_image (2022) reads 16-bit PNM samples in the machine's byte order instead of the
  // format's big-endian one, and overreads its buffer when converting their channel count; so 16-bit
  // PGM/PPM pixels are taken here: each sample scaled from 0..maxval to 0..255, rounded.
  if (pnm.maxval <= 255) return false;
  *out = decode_pnm16(pnm, data, path, opt.keep_nonzero);
  return true;
}

// What stb_image's header probe and attnmap's checks of the file found, for the decode that follows.
struct StbPlan {
  int w = 0, h = 0;             // the declared size
  JpegInfo jpeg;
  bool is_hdr = false;
  const char* watched = nullptr;  // decoded through EndWatch: its format name
};

// stb_image's header probe, the pixel limit, and the damaged or misread variants refused before decoding.
StbPlan plan_stb_decode(const uint8_t* data, size_t size, const PnmInfo& pnm, const std::string& path,
                        const LoadOptions& opt) {
  StbPlan plan;
  int channels = 0;
  if (!stbi_info_from_memory(data, static_cast<int>(size), &plan.w, &plan.h, &channels)) {
    throw_stb_failure(path, data, size, "not a readable image");
  }
  int& w = plan.w;
  int& h = plan.h;
  // A top-down BMP stores a negative height; stb_image's info call passes it on, its loader flips it.
  if (size >= 2 && data[0] == 'B' && data[1] == 'M' && h < 0 && h > INT_MIN) h = -h;
  if (w <= 0 || h <= 0) throw Error(path + ": image declares an empty size");
  check_pixel_limit(path, static_cast<uint64_t>(w), static_cast<uint64_t>(h), opt.max_pixels);
  plan.jpeg = inspect_jpeg(data, size);
  const JpegInfo& jpeg = plan.jpeg;
  if (jpeg.is_jpeg) {
    if (jpeg.components == 4 && jpeg.adobe_transform != 0 && jpeg.adobe_transform != 2) {
      throw Error(path + ": unsupported colour space: 4-component JPEG without an Adobe CMYK/YCCK marker "
                         "(APP14 transform " + std::to_string(jpeg.adobe_transform) +
                  "); convert it to RGB first");
    }
    if (!jpeg.complete)
      throw Error(path + ": truncated JPEG: no end-of-image marker (the file was cut short)");
  }
  static const char kHdr1[] = "#?RADIANCE\n", kHdr2[] = "#?RGBE\n";
  plan.is_hdr =
      (size >= 11 && std::memcmp(data, kHdr1, 11) == 0) || (size >= 7 && std::memcmp(data, kHdr2, 7) == 0);
  if (plan.is_hdr) {
    if (!hdr_data_complete(data, size, static_cast<uint64_t>(w), static_cast<uint64_t>(h)))
      throw Error(path + ": truncated HDR: the pixel data stops before the " + std::to_string(w) + "x" +
                  std::to_string(h) + " picture is complete");
  }
  // TGA has no signature: stb_image takes a file for TGA when every other format's test fails, and every
  // other format's signature has a second byte that is not 0 or 1, TGA's colour-map type. Uncompressed
  // true-colour and grey TGAs are read with one bulk copy per row that leaves a cut file's missing rows
  // uninitialised (they would show whatever an earlier image left in memory): their size is checked here.
  if (size >= 18 && data[1] == 0 && (data[2] == 2 || data[2] == 3) && !(data[2] == 2 && (data[16] == 15 || data[16] == 16))) {
    const uint64_t tw = data[12] | (uint64_t(data[13]) << 8), th = data[14] | (uint64_t(data[15]) << 8);
    const uint64_t need = 18 + uint64_t(data[0]) + tw * th * (data[16] / 8u);
    if (size < need) {
      throw Error(path + ": truncated TGA: " + std::to_string(tw) + "x" + std::to_string(th) + " at " +
                  std::to_string(data[16]) + " bits per pixel needs " + std::to_string(need) +
                  " bytes, the file has " + std::to_string(size));
    }
  }
  plan.watched = watched_format(data, size, jpeg.is_jpeg, pnm.is_pnm, plan.is_hdr);
  const std::string unsupported = unsupported_variant(data, size, plan.watched);
  if (!unsupported.empty()) throw Error(path + ": unsupported " + unsupported);
  return plan;
}

// True when n bytes can be allocated now. stb_image leaves its failure reason unset when some allocations
// fail (its zlib's first output buffer): the reason left is an earlier format test's ("no SOI", JPEG's), so a
// failed decode while a buffer of the picture's size cannot be had is taken as out of memory.
bool buffer_available(size_t n) {
  void* volatile p = std::malloc(n);  // volatile: the pair is not elided
  const bool got = p != nullptr;
  std::free(p);
  return got;
}

// After stb_image's decode: it read nothing past the end (whether or not it then failed: a cut file is
// named as such), succeeded, and gave the header's size.
void check_stb_decoded(const StbPlan& plan, const EndWatch& watch, const void* pixels, int dw, int dh,
                       const uint8_t* data, size_t size, const std::string& path) {
  const int w = plan.w, h = plan.h;
  if (plan.watched && watch.past_end)
    throw Error(path + ": truncated " + plan.watched + ": the file ends before the " + std::to_string(w) + "x" +
                std::to_string(h) + " picture is complete (stb_image would fill the rest with black)");
  if (!pixels && !buffer_available(static_cast<size_t>(w) * static_cast<size_t>(h) * 4)) throw std::bad_alloc();
  if (!pixels) throw_stb_failure(path, data, size, "cannot decode image");
  if (dw != w || dh != h) {
    throw Error(path + ": decoded size " + std::to_string(dw) + "x" + std::to_string(dh) +
                " differs from the header's " + std::to_string(w) + "x" + std::to_string(h));
  }
}

// A 16-bit PNG or PSD read as a mask (LoadOptions::keep_nonzero): stb_image's 16-bit loader, scaled to 8
// bits as its own 8-bit reading does (>> 8), a non-zero sample kept non-zero.
Image decode_stb16_mask(const StbPlan& plan, const uint8_t* data, size_t size, const std::string& path) {
  EndWatch watch{data, size};
  int dw = 0, dh = 0, dc = 0;
  std::unique_ptr<stbi_us, void (*)(void*)> px16(
      plan.watched ? stbi_load_16_from_callbacks(&kWatchCallbacks, &watch, &dw, &dh, &dc, 3)
                   : stbi_load_16_from_memory(data, static_cast<int>(size), &dw, &dh, &dc, 3),
      stbi_image_free);
  check_stb_decoded(plan, watch, px16.get(), dw, dh, data, size, path);
  Image img;
  img.width = dw;
  img.height = dh;
  const size_t npx = checked_mul(static_cast<size_t>(dw), static_cast<size_t>(dh), path.c_str());
  img.rgb.resize(checked_mul(npx, 3, path.c_str()));
  for (size_t i = 0; i < img.rgb.size(); ++i) {
    const stbi_us v = px16.get()[i];
    const uint8_t b = static_cast<uint8_t>(v >> 8);  // as stb_image's own 8-bit reading
    img.rgb[i] = v != 0 && b == 0 ? uint8_t{1} : b;
  }
  return img;
}

// stb_image's 8-bit decode to RGB, with a GIF's first frame made as PIL shows it.
Image decode_stb8(const StbPlan& plan, const uint8_t* data, size_t size, const std::string& path) {
  // Debian's stb_image (2022) converts a PIC it failed to decode (a cut file) from a null buffer and crashes,
  // unless no conversion is asked for: PIC is decoded as the RGBA it is made of, and its alpha dropped below.
  // A GIF is decoded as RGBA too, so that its transparent pixels can be given PIL's colours.
  const bool pic = plan.watched && std::strcmp(plan.watched, "PIC") == 0;
  const bool gif = plan.watched && std::strcmp(plan.watched, "GIF") == 0;
  const int want = pic || gif ? 4 : 3;
  EndWatch watch{data, size};
  int dw = 0, dh = 0, dc = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> px(
      plan.watched ? stbi_load_from_callbacks(&kWatchCallbacks, &watch, &dw, &dh, &dc, want)
                   : stbi_load_from_memory(data, static_cast<int>(size), &dw, &dh, &dc, want),
      stbi_image_free);
  check_stb_decoded(plan, watch, px.get(), dw, dh, data, size, path);
  if (gif) gif_first_frame_as_pil(data, size, px.get(), dw, dh);
  if (pic || gif) {  // RGBA -> RGB in place, as stb_image's own 4 -> 3 conversion (alpha ignored)
    const size_t npx = checked_mul(static_cast<size_t>(dw), static_cast<size_t>(dh), path.c_str());
    for (size_t i = 0; i < npx; ++i)
      for (size_t c = 0; c < 3; ++c) px.get()[3 * i + c] = px.get()[4 * i + c];
  }
  Image img;
  img.width = dw;
  img.height = dh;
  img.rgb.assign(px.get(), px.get() + checked_mul(checked_mul(static_cast<size_t>(dw), static_cast<size_t>(dh),
                                                              "image"), 3, "image"));
  return img;
}

// What stb_image leaves as stored and viewers (and PIL) show otherwise: a PNM's maxval, a TGA's right-to-left
// rows, a JPEG's EXIF orientation.
void finish_stb_image(Image& img, const StbPlan& plan, const PnmInfo& pnm, const uint8_t* data, const LoadOptions& opt) {
  if (pnm.is_pnm && pnm.maxval < 255) {  // stb_image keeps 8-bit samples as stored: scale 0..maxval to 0..255
    const uint32_t maxval = static_cast<uint32_t>(pnm.maxval);
    for (uint8_t& v : img.rgb) v = static_cast<uint8_t>((std::min<uint32_t>(v, maxval) * 255 + maxval / 2) / maxval);
  }
  // A TGA whose image descriptor sets bit 4 stores each row right to left; stb_image ignores the bit (PIL
  // and the TGA 2.0 spec honour it), so the rows are mirrored here.
  if (plan.watched && std::strcmp(plan.watched, "TGA") == 0 && (data[17] & 0x10)) {
    const size_t W = static_cast<size_t>(img.width);
    for (size_t y = 0; y < static_cast<size_t>(img.height); ++y)
      for (size_t a = 0, b = W - 1; a < b; ++a, --b)
        for (size_t c = 0; c < 3; ++c) std::swap(img.rgb[(y * W + a) * 3 + c], img.rgb[(y * W + b) * 3 + c]);
  }
  if (plan.jpeg.is_jpeg && opt.apply_exif) {
    const int orientation = exif_orientation(data, plan.jpeg.end);
    if (orientation != 1) img = apply_orientation(img, orientation);
  }
}

}  // namespace

// The PNG decoder's (stb_image's) own limits, which it reports only as "unknown image type": each side at
// most 2^24 pixels, and the decoded rows at most 2^30 bytes (width x height x channels, 4 for a palette).
static void check_png_decoder_limits(const std::string& path, uint64_t w, uint64_t h, uint8_t color_type) {
  constexpr uint64_t kMaxSide = uint64_t{1} << 24, kMaxBytes = uint64_t{1} << 30;
  const std::string size = std::to_string(w) + "x" + std::to_string(h);
  if (w > kMaxSide || h > kMaxSide)
    throw Error(path + ": PNG of " + size + " pixels: a side over " + std::to_string(kMaxSide) +
                " pixels, the largest the PNG decoder reads; scale or tile the image first");
  const uint64_t channels = color_type == 3 ? 4 : ((color_type & 2) ? 3 : 1) + ((color_type & 4) ? 1 : 0);
  if (w > 0 && h > 0 && kMaxBytes / w / channels < h)  // stb_image's own test
    throw Error(path + ": PNG of " + size + " pixels with " + std::to_string(channels) + " channel" +
                (channels == 1 ? "" : "s") + " needs " + std::to_string(w * h * channels) +
                " bytes decoded, over the PNG decoder's limit of " + std::to_string(kMaxBytes) +
                " bytes; scale or tile the image first");
}

Image decode_image(const uint8_t* data, size_t size, const std::string& path, const LoadOptions& opt) {
  if (size == 0) throw Error(path + ": empty file (0 bytes)");
  if (size > static_cast<size_t>(INT_MAX)) throw Error(path + ": file larger than 2 GiB");
  // By content, whatever the file's name: formats stb_image does not read go to their libraries.
  if (is_webp(data, size)) return decode_webp(data, size, path, opt);
  if (is_tiff(data, size)) return decode_tiff(data, size, path, opt);
  if (const char* format = unsupported_format(data, size))
    throw Error(path + ": unsupported image format " + format + " (attnmap reads JPEG, PNG, WebP, TIFF, BMP, GIF, TGA, "
                "PSD, HDR, PIC and PGM/PPM); convert it first, e.g. to PNG");
  // A PNG's size is in its first chunk (IHDR); stb_image's header reader refuses sizes of 2^30 bytes or
  // more with a generic "unknown image type", so the limit is checked here first for a clear message.
  if (size >= 26 && std::memcmp(data, kPngSignature, 8) == 0 && std::memcmp(data + 12, "IHDR", 4) == 0) {
    check_pixel_limit(path, read_be32(data + 16), read_be32(data + 20), opt.max_pixels);
    check_png_decoder_limits(path, read_be32(data + 16), read_be32(data + 20), data[25]);
  }
  const PnmInfo pnm = inspect_pnm(data, size);
  Image img;
  if (pnm.is_pnm && decode_pnm_first(pnm, data, size, path, opt, &img)) return img;
  const StbPlan plan = plan_stb_decode(data, size, pnm, path, opt);
  if (opt.keep_nonzero && stbi_is_16_bit_from_memory(data, static_cast<int>(size)))  // a 16-bit PNG or PSD mask
    return decode_stb16_mask(plan, data, size, path);
  img = decode_stb8(plan, data, size, path);
  finish_stb_image(img, plan, pnm, data, opt);
  return img;
}

Image load_image(const std::string& path, const LoadOptions& opt) {
  const std::vector<uint8_t> bytes = read_file(path);
  return decode_image(bytes.data(), bytes.size(), path, opt);
}

}  // namespace attnmap
