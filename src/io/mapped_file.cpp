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
  ::close(fd);
  if (map == MAP_FAILED) throw Error(path + ": cannot memory-map: " + std::strerror(err));
  data_ = static_cast<const uint8_t*>(map);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace attnmap
