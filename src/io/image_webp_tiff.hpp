// image_webp_tiff.hpp - WebP (libwebp) and TIFF (libtiff) decoding for decode_image, under the same rules as
// the stb_image formats: the pixel limit checked from the header before any pixel buffer is allocated, a cut
// or corrupt file refused with one line naming it, 16-bit samples scaled to 8 bits as stb_image does (>> 8).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/image_io.hpp"

namespace attnmap {

/// Refuses a declared width x height over `max_pixels` ("PATH: image of WxH = N pixels exceeds the limit of
/// M pixels ({setting:max_pixels}, spelled --max-pixels by the CLI)"). Throws attnmap::Error.
void check_pixel_limit(const std::string& path, uint64_t w, uint64_t h, uint64_t max_pixels);

/// True when `data` starts like a WebP file: "RIFF", a 4-byte size, "WEBP" (RIFF container, WebP spec).
bool is_webp(const uint8_t* data, size_t size);

/// True when `data` starts with a TIFF header: "II*\0" / "MM\0*" (TIFF 6.0) or "II+\0" / "MM\0+" (BigTIFF).
bool is_tiff(const uint8_t* data, size_t size);

/// Decodes a WebP file (lossy, lossless, with alpha, or the first frame of an animation as libwebp's
/// WebPAnimDecoder composes it, which is what PIL shows) to 8-bit RGB; alpha is dropped, as PIL's
/// convert("RGB") does. The orientation in its EXIF chunk is applied when opt.apply_exif (as for a JPEG;
/// PIL's ImageOps.exif_transpose does the same). Bytes after the RIFF chunk are ignored. Throws attnmap::Error naming `path`:
/// "truncated WebP: ..." when the file is shorter than its RIFF header declares, "corrupt WebP: ..." for
/// libwebp's refusals, and the pixel-limit refusal (from the VP8/VP8L/VP8X header, before decoding).
Image decode_webp(const uint8_t* data, size_t size, const std::string& path, const LoadOptions& opt);

/// Decodes the first page (directory) of a TIFF or BigTIFF held in memory (TIFFClientOpen) to 8-bit RGB:
/// grey (MinIsBlack/MinIsWhite) and RGB at 8 or 16 bits per sample, contiguous or planar, strips or tiles,
/// any compression libtiff reads; other layouts (palette, bilevel, YCbCr, CMYK, Lab) through libtiff's RGBA
/// reader. 16-bit samples become v >> 8 (opt.keep_nonzero: a non-zero sample at least 1); unassociated
/// alpha is dropped and associated (premultiplied) alpha divided out, as PIL's convert("RGB") does; the
/// Orientation tag (274) is applied when opt.apply_exif. A file with more pages gets a note in Image::notes.
/// libtiff's own messages never reach the terminal: its first error becomes the reason. Throws
/// attnmap::Error naming `path`: "truncated TIFF: ..." when a directory or a strip/tile lies past the end
/// of the file, "corrupt TIFF: ..." / "unsupported TIFF: ..." with libtiff's reason, and the pixel-limit
/// refusal (from the first directory, before any strip is read).
Image decode_tiff(const uint8_t* data, size_t size, const std::string& path, const LoadOptions& opt);

}  // namespace attnmap
