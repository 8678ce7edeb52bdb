#include "image_io.hpp"

#include <spng.h>
#include <stb_image.h>
#include <stb_image_write.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fcntl.h>
#include <unistd.h>

#include "error.hpp"

namespace attnmap {

namespace fs = std::filesystem;

std::vector<uint8_t> read_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(path + ": is a folder, not an image file");
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

Image load_image(const std::string& path, const LoadOptions& opt) {
  const std::vector<uint8_t> bytes = read_file(path);
  if (bytes.empty()) throw Error(path + ": empty file (0 bytes)");
  if (bytes.size() > static_cast<size_t>(INT_MAX)) throw Error(path + ": file larger than 2 GiB");
  const auto* data = bytes.data();
  const int len = static_cast<int>(bytes.size());
  int w = 0, h = 0, channels = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &channels)) {
    throw Error(path + ": not a readable image (" + stbi_failure_reason() + ")");
  }
  const uint64_t pixels = static_cast<uint64_t>(w) * static_cast<uint64_t>(h);
  if (w <= 0 || h <= 0) throw Error(path + ": image declares an empty size");
  if (pixels > opt.max_pixels) {
    throw Error(path + ": image of " + std::to_string(w) + "x" + std::to_string(h) + " = " +
                std::to_string(pixels) + " pixels exceeds the limit of " + std::to_string(opt.max_pixels) +
                " pixels (--max-pixels)");
  }
  int dw = 0, dh = 0, dc = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(data, len, &dw, &dh, &dc, 3),
                                               stbi_image_free);
  if (!px) throw Error(path + ": cannot decode image (" + stbi_failure_reason() + ")");
  Image img;
  img.width = dw;
  img.height = dh;
  img.rgb.assign(px.get(), px.get() + static_cast<size_t>(dw) * static_cast<size_t>(dh) * 3);
  return img;
}

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

std::vector<uint8_t> encode_png(const Image& img) {
  check_png_input(img, "encode_png");
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(SPNG_CTX_ENCODER), spng_ctx_free);
  if (!ctx) throw Error("encode_png: out of memory");
  auto fail = [&](int e) {
    return Error("encode_png: libspng failed for a " + std::to_string(img.width) + "x" + std::to_string(img.height) +
                 " image: " + spng_strerror(e));
  };
  // zlib level 2 with the Sub/Up row filters: measured 4x faster than stb_image_write's PNG encoder
  // (level 8, all filters) on 600x400 overlays, and files ~20 % smaller.
  int e = spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  if (!e) e = spng_set_option(ctx.get(), SPNG_IMG_COMPRESSION_LEVEL, 2);
  if (!e) e = spng_set_option(ctx.get(), SPNG_FILTER_CHOICE, SPNG_FILTER_CHOICE_SUB | SPNG_FILTER_CHOICE_UP);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(img.width);
  ihdr.height = static_cast<uint32_t>(img.height);
  ihdr.bit_depth = 8;
  ihdr.color_type = SPNG_COLOR_TYPE_TRUECOLOR;
  if (!e) e = spng_set_ihdr(ctx.get(), &ihdr);
  if (!e)
    e = spng_encode_image(ctx.get(), img.rgb.data(), img.rgb.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  if (e) throw fail(e);
  size_t len = 0;
  std::unique_ptr<void, void (*)(void*)> buf(spng_get_png_buffer(ctx.get(), &len, &e), std::free);
  if (!buf || e) throw fail(e);
  const auto* p = static_cast<const uint8_t*>(buf.get());
  return std::vector<uint8_t>(p, p + len);
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

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  static std::atomic<unsigned> counter{0};
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string tmp =
      (dir / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
              std::to_string(counter++)))
          .string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot create output file: " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(path + ": write failed: " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": write failed: " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot rename temporary file into place: " + std::strerror(err));
  }
}

void write_png(const std::string& path, const Image& img) { write_file_atomic(path, encode_png(img)); }

}  // namespace attnmap
