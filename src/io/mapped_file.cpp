#include "io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace attnmap {

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(path + ": cannot stat: " + std::strerror(err));
  }
  size_ = st.st_size > 0 ? static_cast<size_t>(st.st_size) : 0;
  if (size_ == 0) {
    ::close(fd);
    return;
  }
  void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  if (map == MAP_FAILED) {
    ::close(fd);
    throw Error(path + ": cannot memory-map: " + std::strerror(err));
  }
  data_ = static_cast<const uint8_t*>(map);
  fd_ = fd;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  close_file();
}

void MappedFile::close_file() const {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void populate_for_reading(const void* p, size_t bytes) {
#if defined(__linux__)
  if (bytes == 0) return;
  constexpr int kPopulateRead = 22;  // MADV_POPULATE_READ, not in older headers
  const uintptr_t page = 4096, a = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t e = reinterpret_cast<uintptr_t>(p) + bytes;
  (void)::madvise(reinterpret_cast<void*>(a), e - a, kPopulateRead);
#else
  (void)p, (void)bytes;
#endif
}

}  // namespace attnmap
