// image_io.hpp - decoding photos (stb_image) and writing PNG files atomically (stb_image_write).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnmap {

/// An 8-bit RGB image, row-major, 3 bytes per pixel: rgb.size() == width * height * 3.
struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;
};

struct LoadOptions {
  /// Images whose header declares more pixels than this are refused before decoding (no allocation).
  uint64_t max_pixels = 100'000'000;
};

/// Reads and decodes an image file with stb_image, forced to 8-bit RGB: greyscale, grey+alpha, palette,
/// RGBA and 16-bit files all become RGB; 16-bit samples are scaled to 8 bits (stb: value >> 8); alpha
/// is ignored, as PIL's Image.convert("RGB") does.
/// Throws attnmap::Error naming `path` when the file cannot be read, is not a decodable image, or its
/// declared size exceeds `opt.max_pixels`.
Image load_image(const std::string& path, const LoadOptions& opt = {});

/// Writes `bytes` to `path` through a temporary file in the same folder, then renames it, so that no
/// half-written file ever stands under the final name. Throws attnmap::Error naming `path` on failure.
void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes);

/// Encodes `img` as an 8-bit RGB PNG into memory with libspng (zlib level 2, Sub/Up row filters: several
/// times faster than stb_image_write's encoder, lossless, so the pixels are the same). Throws
/// attnmap::Error on an empty or inconsistent image or an encoder failure.
std::vector<uint8_t> encode_png(const Image& img);

/// The same image encoded by stb_image_write (the previous encoder; kept for comparison in tests/bench).
std::vector<uint8_t> encode_png_stb(const Image& img);

/// encode_png + write_file_atomic.
void write_png(const std::string& path, const Image& img);

/// Reads a whole file into memory; throws attnmap::Error naming `path`.
std::vector<uint8_t> read_file(const std::string& path);

}  // namespace attnmap
