// run_lock.cpp - flock on the output folder and the manifest (see run_lock.hpp).
#include "io/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace attnmap {

namespace {

// " (process N)" for a process holding a lock on fd's file, from /proc/locks ("1: FLOCK ADVISORY WRITE
// 4242 08:01:1234 0 EOF"); "" when not found.
std::string holder(int fd) {
  struct stat st{};
  if (::fstat(fd, &st) != 0) return {};
  char id[64];
  std::snprintf(id, sizeof id, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream f(line);
    std::string n, kind, mode, access, pid, dev;
    f >> n >> kind;
    if (kind == "->") f >> kind;  // a waiting lock
    f >> mode >> access >> pid >> dev;
    if (kind == "FLOCK" && dev == id && pid != std::to_string(::getpid())) return " (process " + pid + ")";
  }
  return {};
}

// Takes flock `op` on fd without waiting; false when another process holds a conflicting one. A file
// system without locks (ENOLCK, EINVAL, EOPNOTSUPP) counts as taken.
bool take(int fd, int op) {
  if (::flock(fd, op | LOCK_NB) == 0) return true;
  return errno != EWOULDBLOCK;
}

}  // namespace

RunLock::~RunLock() {
  if (dir_fd_ >= 0) ::close(dir_fd_);
  if (manifest_fd_ >= 0) ::close(manifest_fd_);
}

void RunLock::claim(const std::string& out_dir, bool sharded, const std::string& manifest) {
  dir_fd_ = ::open(out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ >= 0 && !take(dir_fd_, sharded ? LOCK_SH : LOCK_EX))
    throw Error(out_dir + ": another attnmap run" + holder(dir_fd_) + " is writing " +
                (sharded ? "every image" : "images") +
                " into this folder; wait for it to end or choose another output folder");
  if (manifest.empty()) return;
  manifest_fd_ = ::open(manifest.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (manifest_fd_ >= 0 && !take(manifest_fd_, LOCK_EX))
    throw Error(manifest + ": another attnmap run" + holder(manifest_fd_) +
                " is writing this manifest; wait for it to end or name another manifest");
}

}  // namespace attnmap
