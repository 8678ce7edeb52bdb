#include "io/mapped_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/error.hpp"
#include "io/image_io.hpp"

namespace attnmap {

namespace {

// The mappings alive now, for file_cut_short: a slot is 0 free, 1 being written, 2 set (as TempFileGuard's).
constexpr int kMapSlots = 64;
constexpr size_t kMapPathMax = 512;
std::atomic<int> g_map_state[kMapSlots];
const uint8_t* g_map_base[kMapSlots];
size_t g_map_size[kMapSlots];
char g_map_path[kMapSlots][kMapPathMax];

void put_stderr(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// SIGBUS at an address inside a live mapping: its file was cut short under it. One line, the temporary files
// removed, exit 2; only async-signal-safe calls. Elsewhere: the default action, on the fault's return.
void file_cut_short(int sig, siginfo_t* info, void* /*context*/) {
  const auto* a = static_cast<const uint8_t*>(info->si_addr);
  for (int i = 0; i < kMapSlots; ++i) {
    if (g_map_state[i].load(std::memory_order_acquire) != 2 || a < g_map_base[i] || a >= g_map_base[i] + g_map_size[i])
      continue;
    static std::atomic<bool> said{false};  // threads faulting at once: one line, the others wait for the end
    if (said.exchange(true))
      for (;;) ::pause();
    put_stderr("attnmap: error: ");
    put_stderr(g_map_path[i]);
    put_stderr(": the file was cut short while attnmap was reading it (another program truncated it or rewrote it "
               "in place); unfinished temporary files removed\n");
    remove_registered_temp_files();
    ::_exit(2);
  }
  ::signal(sig, SIG_DFL);
}

// Claims a slot for the mapping [base, base + size) of `path` (its control characters shown as '?', cut to
// kMapPathMax - 1 bytes); -1 when all are taken (that mapping keeps SIGBUS's default action).
int register_mapping(const uint8_t* base, size_t size, const std::string& path) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction sa {};
    sa.sa_sigaction = file_cut_short;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGBUS, &sa, nullptr);
  });
  for (int i = 0; i < kMapSlots; ++i) {
    int expected = 0;
    if (!g_map_state[i].compare_exchange_strong(expected, 1, std::memory_order_acquire)) continue;
    const size_t n = std::min(path.size(), kMapPathMax - 1);
    for (size_t c = 0; c < n; ++c) {
      const auto ch = static_cast<unsigned char>(path[c]);
      g_map_path[i][c] = ch < 0x20 || ch == 0x7f ? '?' : path[c];
    }
    g_map_path[i][n] = '\0';
    g_map_base[i] = base;
    g_map_size[i] = size;
    g_map_state[i].store(2, std::memory_order_release);
    return i;
  }
  return -1;
}

long long nanoseconds(const timespec& t) { return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec; }

// True when `st` has the size and times of `stamp`.
bool same_stamp(const struct stat& st, const FileStamp& stamp) {
  return static_cast<long long>(st.st_size) == stamp.size && nanoseconds(st.st_mtim) == stamp.mtime_ns &&
         nanoseconds(st.st_ctim) == stamp.ctime_ns;
}

}  // namespace

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
  mtime_ns_ = nanoseconds(st.st_mtim);
  ctime_ns_ = nanoseconds(st.st_ctim);
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
  slot_ = register_mapping(data_, size_, path);
}

MappedFile::~MappedFile() {
  if (slot_ >= 0) g_map_state[slot_].store(0, std::memory_order_release);
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  close_file();
}

bool MappedFile::changed_since_open() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return false;
  return !same_stamp(st, stamp());
}

namespace {
[[noreturn]] void throw_changed(const std::string& path) {
  throw Error(path + ": the file changed while attnmap was reading it (another program wrote to it): the "
                     "weights read and the hash recorded would mix two versions; run again once it is written");
}
}  // namespace

void throw_if_changed(const MappedFile& file, const std::string& path) {
  if (file.changed_since_open()) throw_changed(path);
}

void throw_if_changed(const std::string& path, const FileStamp& stamp) {
  struct stat st {};
  if (stamp.size < 0 || ::stat(path.c_str(), &st) != 0) return;
  if (!same_stamp(st, stamp)) throw_changed(path);
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
