// hash.hpp - content hashes of files (OpenSSL SHA-256), for the provenance of outputs.
#pragma once
#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <thread>

namespace attnmap {

/// SHA-256 (FIPS 180-4) of the file's bytes as 64 lower-case hex digits, the same as `sha256sum FILE`.
/// Read in 1 MiB blocks with OpenSSL's EVP interface (SHA-NI / AVX2 code where the CPU has it). Throws
/// attnmap::Error naming `path` when it cannot be opened or read.
std::string sha256_file(const std::string& path);

/// SHA-256 of `bytes`, as sha256_file.
std::string sha256_text(const std::string& bytes);

/// SHA-256 of `n` bytes at `data` (data may be null when n == 0), as sha256_file: the hash of bytes already
/// in memory (a file's mapping), so that what is hashed is what was read. `release_pages`: `data` is the start
/// of a read-only file mapping (MappedFile), whose pages are given back to the system (madvise DONTNEED; a
/// later read faults them in again from the same file) as they are hashed, so hashing adds no resident
/// memory. Throws attnmap::Error when OpenSSL cannot hash.
std::string sha256_bytes(const void* data, size_t n, bool release_pages = false);

/// 64 MiB: under it the hash takes tens of ms at most, and a thread would cost more than it saves - under an
/// address-space limit (ulimit -v) its stack and glibc's malloc arena for it (64 MiB reserved) stay taken
/// and can leave too little for the threads a render starts later (tests/test_limits.cpp).
constexpr size_t kBackgroundHashMin = size_t{64} << 20;

class MappedFile;

/// sha256_bytes(data, n, release_pages) on a second thread while the caller reads the same bytes (the parse
/// of a weights file, then a run's packing of it: load_model's while_hashing; the hash then costs little wall
/// time). Bytes under kBackgroundHashMin, or a thread the system refuses (core/threads.hpp), are hashed on
/// the calling thread in get() instead. get() waits and returns the digest, rethrowing the hash's
/// attnmap::Error. The destructor, also when the caller leaves by an exception (a parse error, which is then
/// the error reported), stops the hashing at its next step (16 MiB of memory, 1 MiB of a file) and joins the
/// thread, so the bytes must stay valid for the object's lifetime. Not copyable or movable. Made from a
/// MappedFile, the bytes are read from the file the mapping was made from (pread of MappedFile::fd in 1 MiB
/// blocks: the mapping's bytes, its pages left alone), ~20 % faster than through the mapping (a ViT-B's 343
/// MB: ~245 ms against ~310 ms on an Intel Xeon, where the mapping's pages are mapped and handed back as they
/// are hashed); `file` must outlive the object and keep its file open until get() returns; `what` (its path)
/// names it in errors.
class Sha256InBackground {
 public:
  Sha256InBackground(const void* data, size_t n, bool release_pages);
  Sha256InBackground(const MappedFile& file, std::string what);
  ~Sha256InBackground();
  Sha256InBackground(const Sha256InBackground&) = delete;
  Sha256InBackground& operator=(const Sha256InBackground&) = delete;
  std::string get();

 private:
  void start();

  const void* data_;
  size_t n_;
  bool release_;
  int fd_ = -1;       // >= 0: hashed by pread from this file
  std::string what_;  // its name in errors
  std::atomic<bool> stop_{false};
  std::optional<std::thread> thread_;
  std::string digest_;
  std::exception_ptr error_;
};

}  // namespace attnmap
