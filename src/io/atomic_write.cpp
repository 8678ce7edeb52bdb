// atomic_write.cpp - write_file_atomic, and its temporary files removed on an interrupt (see image_io.hpp)
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "core/error.hpp"
#include "io/image_io.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {
constexpr int kTempSlots = 64;
constexpr size_t kTempPathMax = 4096;
std::atomic<int> g_temp_state[kTempSlots];  // 0 free, 1 being filled, 2 registered
char g_temp_path[kTempSlots][kTempPathMax];

// An interrupt against temporary files being created on other threads: the handler sets g_dying, waits until
// no thread is inside its open() (g_opening), then removes the registered files; a thread that would open one
// after g_dying is set waits for the end instead. (Without it, a worker's open() racing the handler's unlink
// left a .NAME.tmp.* behind one interrupted run in three under load: ctest Robust.InterruptedRun...)
std::atomic<int> g_dying{0};
std::atomic<int> g_opening{0};

std::atomic<int> g_kept_state{0};  // 0 none, 1 being filled, 2 noted
char g_kept_path[kTempPathMax];

void remove_temps_and_die(int sig) {
  g_dying.store(1);
  for (int i = 0; i < 1000 && g_opening.load() > 0; ++i) {  // up to a second (nanosleep is async-signal-safe)
    struct timespec ms {0, 1000000};
    ::nanosleep(&ms, nullptr);
  }
  remove_registered_temp_files();
  // One line so a log shows why the run stopped (write(2) is async-signal-safe; iostreams are not). Outputs
  // already renamed into place are complete; an image's later outputs may be missing (--skip-existing redoes it).
  const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
  const char head[] = "\nattnmap: interrupted by ";
  const char tail[] = "; unfinished temporary files removed\n";
  ssize_t ignored = ::write(2, head, sizeof head - 1);
  ignored = ::write(2, name, std::strlen(name));
  ignored = ::write(2, tail, sizeof tail - 1);
  if (g_kept_state.load(std::memory_order_acquire) == 2) {
    const char kept[] = "attnmap: the partial download ", resumed[] = " is kept: the next run resumes it\n";
    ignored = ::write(2, kept, sizeof kept - 1);
    ignored = ::write(2, g_kept_path, std::strlen(g_kept_path));
    ignored = ::write(2, resumed, sizeof resumed - 1);
  }
  (void)ignored;
  ::raise(sig);  // SA_RESETHAND restored the default action: the process ends by this signal
}
}  // namespace

TempFileGuard::TempFileGuard(const std::string& path) : slot_(-1) {
  if (path.size() >= kTempPathMax) return;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (g_temp_state[i].compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      std::memcpy(g_temp_path[i], path.c_str(), path.size() + 1);
      g_temp_state[i].store(2, std::memory_order_release);
      slot_ = i;
      return;
    }
  }
}

TempFileGuard::~TempFileGuard() {
  if (slot_ >= 0) g_temp_state[slot_].store(0, std::memory_order_release);
}

KeptFileNote::KeptFileNote(const std::string& path) {
  if (path.size() >= kTempPathMax) return;
  g_kept_state.store(1, std::memory_order_release);
  std::memcpy(g_kept_path, path.c_str(), path.size() + 1);
  g_kept_state.store(2, std::memory_order_release);
}

KeptFileNote::~KeptFileNote() { g_kept_state.store(0, std::memory_order_release); }

void remove_registered_temp_files() noexcept {
  for (int i = 0; i < kTempSlots; ++i)
    if (g_temp_state[i].load(std::memory_order_acquire) == 2) ::unlink(g_temp_path[i]);
}

void install_interrupt_cleanup() {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_temps_and_die;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

namespace {
// open(O_CREAT | O_EXCL) of a registered temporary file, unless an interrupt is ending the process: then this
// thread waits for the end (the handler removes what is registered once no thread is inside an open).
int open_unless_dying(const std::string& tmp) {
  g_opening.fetch_add(1);
  if (g_dying.load()) {
    g_opening.fetch_sub(1);
    for (;;) ::pause();
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  g_opening.fetch_sub(1);
  return fd;
}
}  // namespace

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  static std::atomic<unsigned> counter{0};
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string tmp =
      (dir / ("." + target.filename().string().substr(0, 200) + ".tmp." + std::to_string(::getpid()) + "." +
              std::to_string(counter++)))
          .string();
  const TempFileGuard guard(tmp);  // before the file exists, so an interrupt cannot miss it
  const int fd = open_unless_dying(tmp);
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

}  // namespace attnmap
