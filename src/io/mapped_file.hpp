// mapped_file.hpp - a whole file memory-mapped read-only, for readers that use tensors in place.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace attnmap {

/// A file's size and modification / status-change times when it was opened (size -1: none recorded).
struct FileStamp {
  long long size = -1, mtime_ns = 0, ctime_ns = 0;
};

/// The file at `path` mapped read-only (MAP_PRIVATE) for the object's lifetime; an empty file maps to
/// data() == nullptr, size() == 0. The open file the mapping was made from stays open (fd(), close on exec)
/// until close_file() or the end: reading it with pread gives the mapping's bytes - the same file, whatever
/// the path names later - without mapping their pages (Sha256InBackground). A loader closes it once hashed,
/// so a program that keeps many models holds no descriptor for them. Throws attnmap::Error naming `path` with
/// the system's reason when it cannot be opened, stat'ed or mapped. While the mapping lives, a read of a page
/// that the file no longer has (another program truncated it, or rewrote it in place shorter) does not kill
/// the process with SIGBUS: one line names the file, the run's temporary files are removed, exit status 2
/// (a handler installed with the first mapping; a fault outside every mapping keeps the default action).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  /// Closes the open file (the mapping stays); fd() is then -1. Not while another thread reads fd().
  void close_file() const;
  /// True when the open file has been written since it was mapped: its size, modification or status-change
  /// time differ now (fstat). A reader that checks it after hashing and parsing knows that the bytes it read
  /// and the hash it recorded are of one version of the file. False once close_file() ran.
  bool changed_since_open() const;
  /// The file's stamp when it was opened.
  FileStamp stamp() const { return {static_cast<long long>(size_), mtime_ns_, ctime_ns_}; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  mutable int fd_ = -1;
  int slot_ = -1;  // this mapping's entry for the SIGBUS handler, or -1
  long long mtime_ns_ = 0, ctime_ns_ = 0;  // at open
};

/// Asks the system to map the pages of [p, p + bytes) now, in one call (MADV_POPULATE_READ, Linux 5.14) rather
/// than one page fault per 4 KiB as they are read; a hint: ignored where unsupported. For a file mapping
/// read through once (the weights' SHA-256, the loader's finite check).
void populate_for_reading(const void* p, size_t bytes);

/// Throws attnmap::Error naming `path` when file.changed_since_open(): the file was written while it was read.
void throw_if_changed(const MappedFile& file, const std::string& path);

/// The same for a file whose mapping's descriptor is closed, by its path: throws when the file at `path` now
/// has another size or time than `stamp` (nothing when stamp.size is -1 or the path cannot be stat'ed).
void throw_if_changed(const std::string& path, const FileStamp& stamp);

}  // namespace attnmap
