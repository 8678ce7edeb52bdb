// image_io_internal.hpp - what the pieces of image_io.hpp share (image_io.cpp, image_formats.cpp,
// image_png.cpp): the PNG signature, big-endian reads, and the checks of a file's bytes that decode_image
// runs around stb_image. Internal to io/.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attnmap {

// image_formats.cpp: does a Radiance HDR hold every scanline stb_image will read (false: it stops short).
bool hdr_data_complete(const uint8_t* data, size_t size, uint64_t w, uint64_t h);

struct Image;

namespace detail {

inline const uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

/// encode_png's image data, appended to `out`: the Up-filtered rows deflated (libdeflate level 1) as one zlib
/// stream straight into `out`, in IDAT chunks of at most `idat_max` bytes (encode_png: 1 GiB; tests: less, to
/// see the chunks cut), then IEND. Filtered rows of over `in_bands_above` bytes (encode_png: 64 MiB, a ~4700
/// x 4700 image) are deflated by zlib (level 1) 64 rows at a time instead: slower, but no copy of all the
/// filtered rows is held (a 99-megapixel photo rendered under `ulimit -v` needs what it did with libspng).
void put_image_data(std::vector<uint8_t>& out, const Image& img, size_t idat_max, size_t in_bands_above);

inline uint32_t read_be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

// image_formats.cpp: the format decoded through stb_image's end-watching callbacks (BMP, GIF, PSD, PIC, TGA),
// or null; why a PNG stb_image could not decode is damaged ("" when its chunks are intact); a variant stb_image
// misreads, refused by name ("" for none); a GIF's first frame as PIL shows it; a format attnmap does not
// decode (HEIF/HEIC, AVIF, JPEG XL, JPEG 2000, OpenEXR, SVG), or null.
const char* watched_format(const uint8_t* d, size_t n, bool jpeg, bool pnm, bool hdr);
std::string png_damage(const uint8_t* d, size_t n);
std::string unsupported_variant(const uint8_t* d, size_t n, const char* watched);
bool gif_first_frame_as_pil(const uint8_t* d, size_t n, uint8_t* rgba, int w, int h);
const char* unsupported_format(const uint8_t* d, size_t n);

}  // namespace detail
}  // namespace attnmap
