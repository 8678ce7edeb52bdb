// WebP and TIFF (issue 18): decoded pixels against the arrays the corpus script wrote, 16-bit scaling and
// masks, sniffing by content, multi-page TIFF, the pixel limit, libtiff kept silent; and folder walks that
// pick .webp/.tif/.tiff and report the image files of types attnmap cannot decode.
#include <gtest/gtest.h>

#include <tiffio.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "engine/batch.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const fs::path kGood = fs::path(ATTNMAP_TEST_DIR) / "images" / "corpus" / "good";
const fs::path kBad = fs::path(ATTNMAP_TEST_DIR) / "images" / "corpus" / "bad";

// tools/make_bad_inputs.py's pattern(48, 32): R = x*255//47, G = y*255//31, B = 230 in the top-left block else 40.
std::vector<uint8_t> source_pattern() {
  std::vector<uint8_t> rgb;
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 48; ++x)
      rgb.insert(rgb.end(), {static_cast<uint8_t>(x * 255 / 47), static_cast<uint8_t>(y * 255 / 31),
                             static_cast<uint8_t>(x < 16 && y < 16 ? 230 : 40)});
  return rgb;
}

std::string error_of(const fs::path& p, const LoadOptions& opt = {}) {
  try {
    load_image(p.string(), opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A one-strip 16-bit greyscale TIFF written with libtiff itself (its own writer, not the corpus script's).
void write_grey16_tiff(const fs::path& p, const std::vector<uint16_t>& v, uint32_t w, uint32_t h) {
  TIFF* t = TIFFOpen(p.c_str(), "w");
  ASSERT_NE(t, nullptr);
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
  TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, h);
  std::vector<uint16_t> buf = v;
  ASSERT_GE(TIFFWriteEncodedStrip(t, 0, buf.data(), static_cast<tmsize_t>(buf.size() * 2)), 0);
  TIFFClose(t);
}

}  // namespace

// Lossless WebP (plain and with alpha, whose colours under transparent pixels are kept) and TIFF in every
// layout the corpus has give back exactly the array the script wrote.
TEST(ImgFmt, LosslessWebpAndTiffDecodeToTheSourcePixels) {
  const std::vector<uint8_t> want = source_pattern();
  for (const char* name : {"webp_lossless.webp", "webp_anim.webp", "tiff_rgb8_raw.tif", "tiff_rgb8_lzw.tif",
                           "tiff_rgb8_deflate.tif", "tiff_rgb8_packbits.tif", "tiff_planar.tif", "tiff_tiled.tif",
                           "tiff_bigtiff.tif", "tiff_multipage.tif", "tiff_orientation_6.tif", "tiff_unknown_tag.tif"}) {
    SCOPED_TRACE(name);
    const Image img = load_image((kGood / name).string());
    EXPECT_EQ(img.width, 48);
    EXPECT_EQ(img.height, 32);
    EXPECT_EQ(img.rgb, want);
  }
  // The alpha files: the left half transparent over junk colours, which stay (alpha dropped, as PIL's
  // convert("RGB")); the right half is the pattern.
  for (const char* name : {"webp_lossless_alpha.webp", "tiff_rgba8.tif"}) {
    SCOPED_TRACE(name);
    const Image img = load_image((kGood / name).string());
    ASSERT_EQ(img.rgb.size(), want.size());
    size_t same = 0;
    for (int y = 0; y < 32; ++y)
      for (int x = 24; x < 48; ++x)
        for (int c = 0; c < 3; ++c) {
          const size_t i = (static_cast<size_t>(y) * 48 + static_cast<size_t>(x)) * 3 + static_cast<size_t>(c);
          same += img.rgb[i] == want[i];
        }
    EXPECT_EQ(same, 32u * 24u * 3u);
    EXPECT_NE(std::vector<uint8_t>(img.rgb.begin(), img.rgb.begin() + 3 * 24),
              std::vector<uint8_t>(want.begin(), want.begin() + 3 * 24));  // junk, not black, under alpha 0
  }
}

// 16-bit TIFF samples are scaled as the 16-bit PNG path scales them (stb_image: v >> 8): the same picture as
// PNG and as TIFF decodes identically; as a mask (keep_nonzero) a non-zero sample stays non-zero.
TEST(ImgFmt, SixteenBitTiffScaledLikeSixteenBitPng) {
  const Image png = load_image((kGood / "png_grey16.png").string());
  const Image tif = load_image((kGood / "tiff_grey16.tif").string());
  EXPECT_EQ(tif.rgb, png.rgb);
  LoadOptions mask;
  mask.keep_nonzero = true;
  EXPECT_EQ(load_image((kGood / "tiff_grey16.tif").string(), mask).rgb,
            load_image((kGood / "png_grey16.png").string(), mask).rgb);

  const fs::path p = fs::temp_directory_path() / ("attnmap_grey16_" + std::to_string(::getpid()) + ".tif");
  write_grey16_tiff(p, {0, 1, 255, 256, 32768, 65535}, 6, 1);
  auto grey = [](const Image& im) {
    std::vector<int> g;
    for (size_t i = 0; i < im.rgb.size(); i += 3) g.push_back(im.rgb[i]);
    return g;
  };
  EXPECT_EQ(grey(load_image(p.string())), (std::vector<int>{0, 0, 0, 1, 128, 255}));
  EXPECT_EQ(grey(load_image(p.string(), mask)), (std::vector<int>{0, 1, 1, 1, 128, 255}));
  fs::remove(p);
}

// The format comes from the bytes: a WebP named .png and a TIFF named .jpg decode as what they are.
TEST(ImgFmt, SniffedByContentNotByExtension) {
  const std::vector<uint8_t> webp = read_file((kGood / "webp_lossless.webp").string());
  const std::vector<uint8_t> tif = read_file((kGood / "tiff_rgb8_lzw.tif").string());
  EXPECT_EQ(decode_image(webp.data(), webp.size(), "photo.png").rgb, source_pattern());
  EXPECT_EQ(decode_image(tif.data(), tif.size(), "photo.jpg").rgb, source_pattern());
}

// A multi-page TIFF: page 1, and a note that names the page count; a one-page file has no note.
TEST(ImgFmt, MultiPageTiffGivesPageOneWithANote) {
  const Image img = load_image((kGood / "tiff_multipage.tif").string());
  ASSERT_EQ(img.notes.size(), 1u);
  EXPECT_EQ(img.notes[0], "multi-page TIFF: page 1 of 3 rendered (the others are ignored, as PIL's Image.open reads page 1)");
  EXPECT_TRUE(load_image((kGood / "tiff_rgb8_lzw.tif").string()).notes.empty());
}

// The TIFF Orientation tag and a WebP's EXIF orientation are applied like a JPEG's, and --no-exif keeps the
// stored order.
TEST(ImgFmt, TiffAndWebpOrientationFollowApplyExif) {
  LoadOptions raw;
  raw.apply_exif = false;
  for (const char* name : {"tiff_orientation_6.tif", "webp_exif_orient_6.webp"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(load_image((kGood / name).string()).rgb, source_pattern());
    const Image stored = load_image((kGood / name).string(), raw);
    EXPECT_EQ(stored.width, 32);
    EXPECT_EQ(stored.height, 48);
    EXPECT_EQ(apply_orientation(stored, 6).rgb, source_pattern());
  }
}

// The limit is checked from the WebP/TIFF header, before decoding, with the message of the other formats.
TEST(ImgFmt, PixelLimitFromTheHeader) {
  EXPECT_EQ(error_of(kBad / "tiff_huge_30000.tif"),
            (kBad / "tiff_huge_30000.tif").string() +
                ": image of 30000x30000 = 900000000 pixels exceeds the limit of 100000000 pixels ({setting:max_pixels})");
  EXPECT_NE(error_of(kBad / "webp_huge_16384.webp").find("image of 16384x16384 = 268435456 pixels exceeds the limit"),
            std::string::npos);
  EXPECT_NE(error_of(kBad / "webp_huge_anim_30000.webp").find("30000x30000 = 900000000 pixels exceeds"), std::string::npos);
  LoadOptions small;
  small.max_pixels = 1000;
  for (const char* name : {"webp_lossy.webp", "webp_anim.webp", "tiff_tiled.tif", "tiff_palette.tif"})
    EXPECT_NE(error_of(kGood / name, small).find("48x32 = 1536 pixels exceeds the limit of 1000 pixels"), std::string::npos)
        << name;
}

// Peak virtual memory of this process in kB (VmPeak).
long vm_peak_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmPeak:", 0) == 0) return std::stol(line.substr(7));
  return -1;
}

// Huge declared sizes cost no memory: refused from the header under the limit; with the limit raised, a TIFF
// whose strip lies past its end is refused as cut before its 2.7 GB picture buffer is allocated.
TEST(ImgFmt, HugeHeadersAllocateNothing) {
  const long before = vm_peak_kb();
  for (const char* name : {"tiff_huge_30000.tif", "webp_huge_16384.webp", "webp_huge_anim_30000.webp"})
    EXPECT_NE(error_of(kBad / name).find("exceeds the limit"), std::string::npos) << name;
  LoadOptions unlimited;
  unlimited.max_pixels = uint64_t{1} << 40;
  // (libtiff reads one big uncompressed strip as strips of a row each: 30000 of them, 90000 bytes each.)
  EXPECT_EQ(error_of(kBad / "tiff_huge_30000.tif", unlimited),
            (kBad / "tiff_huge_30000.tif").string() +
                ": truncated TIFF: strip 1 of 30000 (bytes 8..90008) lies past the end of the file (192 bytes)");
  const long after = vm_peak_kb();
  ASSERT_GT(before, 0);
  EXPECT_LT(after - before, 512 * 1024) << "peak virtual memory grew by " << (after - before) << " kB";
}

// Damaged files: exact messages for the cut ones (the file named, one line).
TEST(ImgFmt, TruncatedFilesNamedAsSuch) {
  const std::string tif = (kBad / "tiff_truncated_70.tif").string();
  EXPECT_EQ(error_of(tif).rfind(tif + ": truncated TIFF: strip 1 of 1 (bytes ", 0), 0u) << error_of(tif);
  const std::string webp = (kBad / "webp_truncated_70.webp").string();
  const size_t size = fs::file_size(webp);
  EXPECT_EQ(error_of(webp).rfind(webp + ": truncated WebP: its RIFF header declares ", 0), 0u) << error_of(webp);
  EXPECT_NE(error_of(webp).find(", the file has " + std::to_string(size)), std::string::npos);
  EXPECT_EQ(error_of(kBad / "tiff_header_only.tif"),
            (kBad / "tiff_header_only.tif").string() + ": truncated TIFF: the file ends inside its 8-byte header");
  // libtiff's own reason for a junk LZW strip, on the same line.
  EXPECT_NE(error_of(kBad / "tiff_lzw_junk.tif").find("could not be decoded (libtiff: "), std::string::npos)
      << error_of(kBad / "tiff_lzw_junk.tif");
}

// ---------------------------------------------------------------------------------------------------
// The binary: libtiff prints nothing of its own; folders with WebP/TIFF; the skipped-types line.

namespace {
class ImgFmtCli : public TempDirTest {
 protected:
  void put(const fs::path& rel, const fs::path& from) {
    fs::create_directories((dir / "in" / rel).parent_path());
    fs::copy_file(from, dir / "in" / rel);
  }
  void put_text(const fs::path& rel, const std::string& text) {
    fs::create_directories((dir / "in" / rel).parent_path());
    std::ofstream(dir / "in" / rel) << text;
  }
};
}  // namespace

// Every damaged TIFF gives one "attnmap: error:" line and libtiff writes nothing; a file with a tag libtiff
// warns about renders without a word under -q.
TEST_F(ImgFmtCli, LibtiffPrintsNothingOfItsOwn) {
  const CliRun r = run_attnmap("render " + q(kBad / "tiff_no_height.tif") + " " + q(kBad / "tiff_lzw_junk.tif") + " " +
                               q(kBad / "tiff_lzw_truncated_70.tif") + " " + q(kGood / "tiff_unknown_tag.tif") +
                               " -q -o " + q(dir / "out"));
  EXPECT_EQ(r.status, 1);
  std::istringstream lines(r.err);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    EXPECT_EQ(line.rfind("attnmap: error: " + kBad.string() + "/tiff_", 0), 0u) << line;
  }
  EXPECT_EQ(n, 3) << r.err;
  EXPECT_NE(r.err.find("tiff_no_height.tif: corrupt TIFF: "), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "tiff_unknown_tag.png"));
}

// A folder of a.webp, b.tif and c.jpg renders all three; the multi-page note is printed for its file.
TEST_F(ImgFmtCli, FolderRendersWebpTiffAndJpeg) {
  put("a.webp", kGood / "webp_lossy.webp");
  put("b.tif", kGood / "tiff_multipage.tif");
  put("c.jpg", kGood / "jpeg_baseline.jpg");
  put("d.TIFF", kGood / "tiff_rgb16_be.tif");
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " --no-legend");  // bare overlays
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* out : {"a.png", "b.png", "c.png", "d.png"}) {
    ASSERT_TRUE(fs::exists(dir / "out" / out)) << out << "\n" << r.err;
    const Image img = load_image((dir / "out" / out).string());
    EXPECT_EQ(img.width, 48) << out;
    EXPECT_EQ(img.height, 32) << out;
  }
  EXPECT_NE(r.err.find("attnmap: note: " + (dir / "in" / "b.tif").string() + ": multi-page TIFF: page 1 of 3 rendered"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("4 done, 0 failed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("skipped 1"), std::string::npos) << r.err;
}

// Image files of types attnmap cannot decode are counted by extension in one line (under -q too, exit 0);
// non-image files (.txt .json .npy .csv) and readable types left out by --ext are not; the manifest lists
// only the run's inputs.
TEST_F(ImgFmtCli, SkippedTypesSummaryLine) {
  put("a.png", kGood / "png_grey8.png");
  put_text("x.heic", "not really");
  put_text("sub/y.HEIC", "not really");
  put_text("z.svg", "<svg/>");
  for (const char* other : {"notes.txt", "data.json", "arr.npy", "table.csv", "README"}) put_text(other, "x");
  const std::string note = "attnmap: note: skipped 3 files of unsupported types: .heic 2, .svg 1 (not rendered; "
                           "attnmap reads JPEG, PNG, WebP, TIFF, BMP, GIF, TGA, PSD, HDR, PIC and PGM/PPM)\n";
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " --manifest " + q(dir / "m.jsonl"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(note + "attnmap: 1 done, 0 failed, 0 skipped"), std::string::npos) << r.err;
  const std::string manifest = slurp(dir / "m.jsonl");
  EXPECT_EQ(std::count(manifest.begin(), manifest.end(), '\n'), 2) << manifest;  // the header line, one row
  EXPECT_EQ(manifest.find("{\"attnmap_manifest\":"), 0u) << manifest;
  EXPECT_NE(manifest.find("a.png"), std::string::npos);
  const CliRun quiet = run_attnmap("render " + q(dir / "in") + " -q -o " + q(dir / "out2"));
  EXPECT_EQ(quiet.status, 0);
  EXPECT_EQ(quiet.err, note);
  // One such file: singular; and a folder of nothing else says so before "no images found".
  fs::remove_all(dir / "in");
  put_text("only.avif", "x");
  const CliRun none = run_attnmap("render " + q(dir / "in") + " -q -o " + q(dir / "out3"));
  EXPECT_EQ(none.status, 2);  // nothing to render: a usage error (issue 28)
  EXPECT_EQ(none.err, "attnmap: note: skipped 1 file of an unsupported type: .avif 1 (not rendered; attnmap reads JPEG, "
                      "PNG, WebP, TIFF, BMP, GIF, TGA, PSD, HDR, PIC and PGM/PPM)\nattnmap: error: no images found in " +
                          (dir / "in").string() + "/\n");  // the folder named (issue 41)
}

// --ext leaves readable types out on purpose: they are not reported; an unsupported type named by --ext is
// tried, and fails on its own line.
TEST_F(ImgFmtCli, ExtChoicesAreNotReported) {
  put("a.png", kGood / "png_grey8.png");
  put("b.jpg", kGood / "jpeg_baseline.jpg");
  put_text("c.txt", "x");
  const CliRun r = run_attnmap("render " + q(dir / "in") + " --ext png -q -o " + q(dir / "out"));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "");
  put_text("d.heic", "x");
  const CliRun h = run_attnmap("render " + q(dir / "in") + " --ext png,heic -q -o " + q(dir / "out2"));
  EXPECT_EQ(h.status, 1);
  EXPECT_NE(h.err.find("d.heic: not a readable image"), std::string::npos) << h.err;
  EXPECT_EQ(h.err.find("skipped"), std::string::npos) << h.err;
}

// plan_jobs counts what it passed over; files given directly are jobs whatever their extension.
TEST_F(ImgFmtCli, PlanJobsCountsPassedOverImageTypes) {
  put("a.webp", kGood / "webp_lossless.webp");
  put("b.tiff", kGood / "tiff_grey8.tif");
  put_text("c.jxl", "x");
  put_text("d.CR2", "x");
  put_text("e.dng", "x");
  put_text("f.npy", "x");
  std::vector<std::string> missing;
  std::map<std::string, size_t> passed;
  const std::vector<Job> jobs =
      plan_jobs({(dir / "in").string(), (dir / "in" / "c.jxl").string()}, (dir / "out").string(), &missing, {}, nullptr, &passed);
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].input, (dir / "in" / "a.webp").string());
  EXPECT_EQ(jobs[1].input, (dir / "in" / "b.tiff").string());
  EXPECT_EQ(jobs[2].input, (dir / "in" / "c.jxl").string());
  EXPECT_EQ(passed, (std::map<std::string, size_t>{{".cr2", 1}, {".dng", 1}, {".jxl", 1}}));
  EXPECT_EQ(passed_over_summary({}), "");
}

// A valid PNG of 1 x 100 000 000 pixels (at the default pixel limit) is over the PNG decoder's side limit:
// said so with the size and the limit, not stb_image's "unknown image type".
TEST(ImgFmt, PngOverTheDecodersLimitsSaysSoWithTheSize) {
  auto png_header = [](uint32_t w, uint32_t h, uint8_t color) {
    std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    for (uint32_t v : {w, h})
      for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
    b.insert(b.end(), {8, color, 0, 0, 0, 0, 0, 0, 0});  // depth, colour type, methods, CRC (not reached)
    return b;
  };
  auto err = [](const std::vector<uint8_t>& b, uint64_t max_pixels) {
    LoadOptions opt;
    opt.max_pixels = max_pixels;
    try {
      decode_image(b.data(), b.size(), "tall.png", opt);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(err(png_header(1, 100000000, 2), 100000000),
            "tall.png: PNG of 1x100000000 pixels: a side over 16777216 pixels, the largest the PNG decoder reads; "
            "scale or tile the image first");
  EXPECT_EQ(err(png_header(20000, 20000, 6), 1000000000),
            "tall.png: PNG of 20000x20000 pixels with 4 channels needs 1600000000 bytes decoded, over the PNG "
            "decoder's limit of 1073741824 bytes; scale or tile the image first");
  EXPECT_EQ(err(png_header(30000, 30000, 2), 100000000),
            "tall.png: image of 30000x30000 = 900000000 pixels exceeds the limit of 100000000 pixels "
            "({setting:max_pixels})");
}
