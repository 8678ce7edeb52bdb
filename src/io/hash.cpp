#include "io/hash.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/threads.hpp"
#include "io/mapped_file.hpp"

namespace attnmap {

namespace {

std::string hex_digest(EVP_MD_CTX* ctx, const std::string& what) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx, md, &len) != 1) throw Error(what + ": SHA-256 failed");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  return hex;
}

}  // namespace

std::string sha256_text(const std::string& bytes) { return sha256_bytes(bytes.data(), bytes.size()); }

namespace {

// sha256_bytes, stopping early (returning "") once `stop` is set.
std::string hash_steps(const void* data, size_t n, bool release_pages, const std::atomic<bool>* stop) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("SHA-256 unavailable");
  const auto* p = static_cast<const unsigned char*>(data);
  const size_t step = release_pages || stop ? size_t{16} << 20 : size_t{1} << 30;  // a multiple of the page size
  for (size_t done = 0; done < n;) {
    if (stop && stop->load(std::memory_order_relaxed)) return std::string();
    const size_t k = std::min<size_t>(n - done, step);
    if (release_pages) populate_for_reading(p + done, k);  // a file mapping: its pages in one call, not a fault each
    if (EVP_DigestUpdate(ctx.get(), p + done, k) != 1) throw Error("SHA-256 failed");
    if (release_pages) ::madvise(const_cast<unsigned char*>(p + done), k, MADV_DONTNEED);
    done += k;
  }
  return hex_digest(ctx.get(), "bytes");
}

// The SHA-256 of the first n bytes of the open file fd (named `what` in errors), read by pread in 1 MiB
// blocks; "" once `stop` is set.
std::string hash_file_steps(int fd, size_t n, const std::atomic<bool>* stop, const std::string& what) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("SHA-256 unavailable");
  std::vector<unsigned char> buf(size_t{1} << 20);
  for (size_t done = 0; done < n;) {
    if (stop && stop->load(std::memory_order_relaxed)) return std::string();
    const ssize_t got = ::pread(fd, buf.data(), std::min(buf.size(), n - done), static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(what + ": read failed while hashing it: " + std::strerror(errno));
    if (got == 0) throw Error(what + ": the file became shorter while it was hashed");
    if (EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(got)) != 1) throw Error("SHA-256 failed");
    done += static_cast<size_t>(got);
  }
  return hex_digest(ctx.get(), "bytes");
}

}  // namespace

std::string sha256_bytes(const void* data, size_t n, bool release_pages) {
  return hash_steps(data, n, release_pages, nullptr);
}

Sha256InBackground::Sha256InBackground(const void* data, size_t n, bool release_pages)
    : data_(data), n_(n), release_(release_pages) {
  start();
}

Sha256InBackground::Sha256InBackground(const MappedFile& file, std::string what)
    : data_(file.data()),
      n_(file.size()),
      release_(false),
      fd_(file.size() > 0 ? file.fd() : -1),
      what_(std::move(what)) {
  start();
}

void Sha256InBackground::start() {
  if (n_ < kBackgroundHashMin) return;
  thread_ = try_start_thread([this] {
    try {
      digest_ = fd_ >= 0 ? hash_file_steps(fd_, n_, &stop_, what_) : hash_steps(data_, n_, release_, &stop_);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

Sha256InBackground::~Sha256InBackground() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_ && thread_->joinable()) thread_->join();
}

std::string Sha256InBackground::get() {
  if (!thread_)
    return fd_ >= 0 ? hash_file_steps(fd_, n_, nullptr, what_) : sha256_bytes(data_, n_, release_);
  if (thread_->joinable()) thread_->join();
  if (error_) std::rethrow_exception(error_);
  return digest_;
}

std::string sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open to hash it: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error(path + ": SHA-256 unavailable");
  std::vector<unsigned char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": read failed while hashing: " + std::strerror(errno));
    if (n == 0) break;
    if (EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n)) != 1) throw Error(path + ": SHA-256 failed");
  }
  return hex_digest(ctx.get(), path);
}

}  // namespace attnmap
