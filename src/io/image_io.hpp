// image_io.hpp - decoding photos (stb_image; WebP through libwebp, TIFF through libtiff) and writing PNG
// files atomically (libdeflate).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attnmap {

/// An 8-bit RGB image, row-major, 3 bytes per pixel: rgb.size() == width * height * 3.
struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;
  /// What the decoder chose that a user should hear about (e.g. "multi-page TIFF: page 1 of 3 rendered");
  /// render prints them as notes. Empty for most files.
  std::vector<std::string> notes;
};

struct LoadOptions {
  /// Images whose header declares more pixels than this are refused before decoding (no allocation).
  uint64_t max_pixels = 100'000'000;
  /// Apply a JPEG's or WebP's EXIF orientation (tag 0x0112, values 2..8), or a TIFF's Orientation tag (274),
  /// so the picture stands as viewers show it (PIL's ImageOps.exif_transpose). Off: the stored pixel order
  /// (`--no-exif`).
  bool apply_exif = true;
  /// For masks: a non-zero 16-bit sample never becomes 0 (it is scaled as below, then raised to at least 1),
  /// so that a 16-bit mask whose object is marked with small values (1, 2, ... e.g. instance ids) keeps
  /// its object. Off for photos, which keep the plain 8-bit scaling.
  bool keep_nonzero = false;
};

/// What a JPEG's marker segments say, read without decoding (ITU T.81 B.1; Adobe APP14 for CMYK/YCCK).
struct JpegInfo {
  bool is_jpeg = false;     ///< starts with SOI (FF D8)
  int components = 0;       ///< from the first SOF segment: 1 grey, 3 YCbCr/RGB, 4 CMYK/YCCK
  int adobe_transform = -1; ///< APP14 "Adobe" colour transform: 0 none (RGB/CMYK), 1 YCbCr, 2 YCCK; -1 absent
  bool complete = false;    ///< an EOI marker ends the image (false: the file was cut short)
  size_t end = 0;           ///< byte offset just past EOI (anything after it is ignored)
};

/// Walks the JPEG marker segments of `data` (no decoding, no allocation). Not a JPEG: is_jpeg false.
JpegInfo inspect_jpeg(const uint8_t* data, size_t size);

/// What a binary PGM/PPM header (P5/P6, netpbm) says, tokenised as stb_image does (whitespace and
/// `#` comments between fields, one whitespace byte after maxval). Not PNM: is_pnm false.
struct PnmInfo {
  bool is_pnm = false;    ///< starts with "P5" (grey) or "P6" (RGB)
  bool header_ok = false; ///< width, height and maxval present, each 1..999999999, maxval <= 65535
  int channels = 0;       ///< 1 (P5) or 3 (P6)
  uint64_t width = 0, height = 0, maxval = 0;
  size_t data_offset = 0; ///< first byte of the pixels
  uint64_t data_bytes = 0;  ///< width * height * channels * (maxval > 255 ? 2 : 1)
};

/// Reads a PNM header without decoding. Used to refuse truncated or malformed PNMs before stb_image,
/// whose 2022 loader does not check the pixel count against the file, and to decode 16-bit PNMs, which
/// that loader reads in the wrong byte order (and past its buffer for greyscale forced to RGB).
PnmInfo inspect_pnm(const uint8_t* data, size_t size);

/// The EXIF orientation (1..8) of a JPEG, read with libexif; 1 when absent or unreadable.
int exif_orientation(const uint8_t* data, size_t size);

/// Turns stored pixels into the displayed picture for EXIF orientation 1..8 (TIFF 6.0 tag 274):
/// 2 mirror left-right, 3 rotate 180, 4 mirror top-bottom, 5 transpose, 6 rotate 90 clockwise,
/// 7 transverse, 8 rotate 90 counter-clockwise. 5..8 swap width and height.
Image apply_orientation(const Image& img, int orientation);

/// Reads and decodes an image file, forced to 8-bit RGB. The format is sniffed from the content (magic bytes),
/// never from the file name: WebP ("RIFF....WEBP") goes to libwebp and TIFF/BigTIFF ("II*\0", "MM\0*") to
/// libtiff (see decode_webp / decode_tiff in io/image_webp_tiff.hpp); HEIF/HEIC, AVIF, JPEG XL, JPEG 2000,
/// OpenEXR and SVG are refused by name ("unsupported image format HEIF/HEIC"); everything else goes to
/// stb_image.
/// Greyscale, grey+alpha, palette, RGBA and 16-bit files all become RGB; 1/2/4-bit grey is expanded to
/// 0..255; 16-bit samples are scaled to 8 bits (stb: value >> 8, not clipped; WebP/TIFF the same); alpha is
/// ignored, as PIL's Image.convert("RGB") and timm's loader do. JPEG: Adobe CMYK and YCCK are converted like
/// PIL (R = (255-C)(255-K)/255), a 4-component JPEG without the Adobe marker is refused ("unsupported colour
/// space"), a JPEG without its end marker is refused ("truncated JPEG"), bytes after the end marker are
/// ignored, and the EXIF orientation is applied (opt.apply_exif; also a WebP's EXIF chunk and a TIFF's
/// Orientation tag). A PNG,
/// PGM/PPM, HDR, TGA, BMP, GIF, PSD, PIC, WebP or TIFF that ends before its picture is complete is refused
/// ("truncated FORMAT"); opt.keep_nonzero keeps non-zero 16-bit samples non-zero. The declared width x height
/// is checked against `opt.max_pixels` from the header alone, before any pixel buffer is allocated.
/// Throws attnmap::Error naming `path` when the file cannot be read, is not a decodable image, or its
/// declared size exceeds `opt.max_pixels`.
Image load_image(const std::string& path, const LoadOptions& opt = {});

/// load_image on bytes already in memory; `path` is used in messages only.
Image decode_image(const uint8_t* data, size_t size, const std::string& path, const LoadOptions& opt = {});

/// Writes `bytes` to `path` through a temporary file in the same folder, then renames it, so that no
/// half-written file ever stands under the final name. While it exists, the temporary file is registered
/// with TempFileGuard, so an interrupted run removes it (install_interrupt_cleanup). Throws attnmap::Error
/// naming `path` on failure.
void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes);

/// Registers a temporary file for removal if the process is interrupted before the guard ends (a fixed
/// table of 64 paths of up to 4095 bytes, filled without locks; a path that does not fit is not registered).
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path);
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  int slot_;
};

/// Names a partial file an interrupt keeps on purpose (a download resumed by the next run: hub/), for the
/// interrupt's message, while the note lives. One at a time (a later note replaces an earlier one); a path of
/// 4096 bytes or more is not noted.
class KeptFileNote {
 public:
  explicit KeptFileNote(const std::string& path);
  ~KeptFileNote();
  KeptFileNote(const KeptFileNote&) = delete;
  KeptFileNote& operator=(const KeptFileNote&) = delete;
};

/// Unlinks every temporary file registered by a live TempFileGuard. Async-signal-safe (only atomic loads
/// and unlink(2)): called from the signal handler.
void remove_registered_temp_files() noexcept;

/// On SIGINT, SIGTERM and SIGHUP (unless ignored, as under nohup): remove_registered_temp_files, then the
/// signal's default action, so Ctrl-C or a scheduler's kill leaves no `.NAME.tmp.*` beside the outputs. The
/// message names the file a live KeptFileNote keeps.
void install_interrupt_cleanup();

/// One PNG tEXt chunk (PNG 1.2 §11.3.4.3): a keyword of 1..79 Latin-1 characters and Latin-1 text.
struct PngText {
  std::string keyword;
  std::string text;
};

/// How a PNG is written beyond its pixels.
struct PngOptions {
  /// > 0: a pHYs chunk (PNG 1.2 §11.3.5.3) saying the pixels are printed at this many per inch, stored as
  /// round(dpi / 0.0254) pixels per metre (PNG has no per-inch unit; 300 dpi reads back as 299.9994).
  /// 0: no pHYs chunk (viewers assume their default, usually 72 or 96 dpi).
  double dpi = 0.0;
  /// tEXt chunks written after `Software` = `attnmap`, before the image data (the provenance record).
  std::vector<PngText> text;
};

/// Encodes `img` as an 8-bit RGB PNG into memory (ISO/IEC 15948): every row Up-filtered, the rows deflated
/// by libdeflate at level 1 in one zlib stream (lossless, so the pixels are the same; ~3x faster than
/// libspng's fastest zlib setting, files about as large: docs/performance.md, "The work both precisions
/// share, cut"); images of over 64 MiB of filtered rows through zlib, band by band, so that not all of them
/// are held at once. With a tEXt chunk `Software` = `attnmap` (PNG 1.2 §11.3.4) that marks the file as
/// attnmap's output, then the tEXt chunks `opt.text` (all before the image data), and the pHYs chunk of
/// `opt.dpi`. Throws attnmap::Error on an empty or inconsistent image, a tEXt keyword PNG does not allow (1
/// to 79 Latin-1 printable bytes, no leading, trailing or double spaces) or a text with a NUL byte, a dpi
/// that is negative, not finite, over 1 000 000 or so small that pHYs would hold 0 pixels per metre (under
/// 0.02), or an encoder failure.
std::vector<uint8_t> encode_png(const Image& img, const PngOptions& opt = {});

/// The tEXt chunks before the image data of the PNG at `path`, in file order (reads the chunks before the
/// first IDAT only; stops at a chunk over 1 MiB); empty for a file that is not a PNG or cannot be read.
/// Chunks are not CRC-checked.
std::vector<PngText> read_png_text(const std::string& path);

/// The same image encoded by stb_image_write (the previous encoder; kept for comparison in tests/bench).
std::vector<uint8_t> encode_png_stb(const Image& img);

/// True when `path` is a PNG whose chunks before the image data include encode_png's tEXt
/// `Software` = `attnmap...` (reads at most the first 64 KiB). Used so that a run replaces its own
/// earlier outputs but never a user's picture that happens to have an output's name.
bool written_by_attnmap(const std::string& path);

/// encode_png + write_file_atomic.
void write_png(const std::string& path, const Image& img, const PngOptions& opt = {});

/// Reads a whole file into memory; throws attnmap::Error naming `path`.
std::vector<uint8_t> read_file(const std::string& path);

}  // namespace attnmap
