// hub_download.cpp - one blob into the cache (hub_download.hpp).
#include "hub/hub_download.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/error.hpp"
#include "hub/hub_http.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"

namespace fs = std::filesystem;

namespace attnmap {

namespace {

constexpr int kMaxResumes = 5;  // huggingface_hub's http_get: 5 tries after a cut connection

using Clock = std::chrono::steady_clock;

// The terminal's progress line: file, bytes of size, rate and time left, redrawn at most 5 times a second.
class ProgressLine {
 public:
  ProgressLine(bool on, std::string label, int64_t size, int64_t start)
      : on_(on), label_(std::move(label)), size_(size), start_bytes_(start), t0_(Clock::now()) {}
  void update(int64_t have, bool last = false) {
    if (!on_) return;
    const auto now = Clock::now();
    if (!last && now - shown_ < std::chrono::milliseconds(200)) return;
    shown_ = now;
    const double secs = std::chrono::duration<double>(now - t0_).count();
    const double rate = secs > 0 ? static_cast<double>(have - start_bytes_) / secs : 0;
    std::ostringstream line;
    line << "\r" << label_ << "  " << hub_size_text(have) << " / " << hub_size_text(size_) << "  "
         << hub_size_text(static_cast<int64_t>(rate)) << "/s";
    if (!last && rate > 0) line << "  ETA " << eta_text(static_cast<double>(size_ - have) / rate);
    line << "\x1b[K" << (last ? "\n" : "");
    std::cerr << line.str() << std::flush;
  }

 private:
  static std::string eta_text(double s) {
    const long t = static_cast<long>(s + 0.5);
    return t >= 3600 ? std::to_string(t / 3600) + "h" + std::to_string(t % 3600 / 60) + "m"
                     : t >= 60 ? std::to_string(t / 60) + "m" + std::to_string(t % 60) + "s" : std::to_string(t) + "s";
  }
  bool on_;
  std::string label_;
  int64_t size_, start_bytes_;
  Clock::time_point t0_, shown_{};
};

}  // namespace

std::string git_blob_sha1(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string content = ss.str();
  const std::string data = "blob " + std::to_string(content.size()) + std::string(1, '\0') + content;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!EVP_Digest(data.data(), data.size(), md, &n, EVP_sha1(), nullptr)) throw Error(path + ": cannot compute SHA-1");
  std::string hex;
  char buf[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", md[i]);
    hex += buf;
  }
  return hex;
}

namespace {

void check_room(const std::string& dir, int64_t needed, const std::string& label) {
  struct statvfs v {};
  if (needed <= 0 || ::statvfs(dir.c_str(), &v) != 0) return;
  const int64_t free_bytes = static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize);
  if (free_bytes < needed)
    throw Error(label + ": not enough room in " + dir + ": the file needs " + hub_size_text(needed) + ", " +
                hub_size_text(free_bytes) + " is free; nothing was written");
}

// The open .incomplete file: appended to, restarted when a server ignores the Range, its first write error kept.
struct Partial {
  std::string path;
  int fd = -1;
  int64_t have = 0;
  int write_errno = 0;
  ~Partial() {
    if (fd >= 0) ::close(fd);
  }
  bool write(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        write_errno = w < 0 ? errno : ENOSPC;
        return false;
      }
      p += w;
      n -= static_cast<size_t>(w);
      have += w;
    }
    return true;
  }
  bool restart() {
    if (::ftruncate(fd, 0) != 0) {
      write_errno = errno;
      return false;
    }
    have = 0;
    return true;
  }
  void discard() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    std::error_code ec;
    fs::remove(path, ec);
  }
};

void open_partial(Partial& p, int64_t size, const std::string& label) {
  p.fd = ::open(p.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (p.fd < 0) throw Error(label + ": cannot write " + p.path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(p.fd, &st) == 0) p.have = st.st_size;
  if (p.have > size && !p.restart()) throw Error(label + ": cannot truncate " + p.path + ": " + std::strerror(p.write_errno));
}

// The GETs of one blob: resumed from what the .incomplete file holds, up to kMaxResumes cuts in a row.
// `cancelled` is polled before each GET and while one runs (bytes or none); bytes already received are
// written before it stops, so the partial file keeps all that came.
void fetch_bytes(const HubSettings& s, const HubFileMeta& m, Partial& p, const std::string& label, ProgressLine& bar,
                 const std::function<bool()>& cancelled) {
  HttpHeaders headers;
  if (!s.token.empty() && url_origin(m.url) == url_origin(s.endpoint)) headers.push_back("Authorization: Bearer " + s.token);
  bool stop = false;
  const auto stopping = [&] { return stop || (stop = cancelled && cancelled()); };
  HttpSink sink{[&](const char* d, size_t n) {
                  const bool ok = p.write(d, n);
                  bar.update(p.have);
                  return ok && !stopping();
                },
                [&] { return p.restart(); }, stopping};
  const auto interrupted = [&] {
    return Error(label + ": interrupted; the partial download " + p.path + " is kept: the next run resumes it");
  };
  for (int cuts = 0;;) {
    if (p.have == m.size && m.size > 0) return;
    if (stopping()) throw interrupted();
    const int64_t before = p.have;
    const HttpAnswer a = http_get_to(m.url, headers, p.have, s.etag_timeout, s.download_timeout, sink);
    if (stop) throw interrupted();
    if (p.write_errno) {
      const int e = p.write_errno;
      p.discard();
      throw Error(label + ": cannot write " + p.path + ": " + std::strerror(e) + "; the partial file was removed");
    }
    if (p.have > m.size) {
      p.discard();
      throw Error(label + ": the server sent more than the " + std::to_string(m.size) + " bytes it announced; discarded");
    }
    if (a.reached && (a.status == 200 || a.status == 206 || (a.status == 416 && p.have == m.size)) && p.have == m.size) return;
    if (a.reached && a.status != 200 && a.status != 206)
      throw Error(label + ": the download answered HTTP " + std::to_string(a.status) + " (" + url_origin(m.url) + ")");
    if (!a.reached && !a.transient)  // e.g. a redirect to a protocol other than HTTP(S): no retry helps
      throw Error(label + ": the download from " + url_origin(m.url) + " failed: " + a.failure);
    cuts = p.have > before ? 1 : cuts + 1;  // progress resets the count, as huggingface_hub's _nb_retries
    if (cuts > kMaxResumes)
      throw Error(label + ": the download stopped " + std::to_string(kMaxResumes + 1) + " times (" +
                  (a.reached ? "short answer" : a.failure) + "); " + std::to_string(p.have) + " of " +
                  std::to_string(m.size) + " bytes are kept in " + p.path + ": run again to resume");
    for (int waited = 0; waited < 200 * cuts && !stopping(); waited += 50)  // the pause before a retry
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void verify_blob(const HubFileMeta& m, Partial& p, const std::string& label) {
  const std::string got = m.lfs ? sha256_file(p.path) : git_blob_sha1(p.path);
  const bool checkable = m.lfs || m.etag.size() == 40;
  if (checkable && got != m.etag) {
    p.discard();
    throw Error(label + ": checksum mismatch: the " + std::to_string(p.have) + " bytes downloaded have " +
                (m.lfs ? "sha256 " : "git sha1 ") + got + ", the Hub names " + m.etag +
                "; the download was discarded: run again");
  }
}

}  // namespace

bool valid_hub_etag(const std::string& etag) {
  if (etag.empty() || etag.size() > 128) return false;
  for (char c : etag)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

std::string hub_size_text(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else if (b >= 1e3) std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

int64_t download_hub_blob(const HubSettings& s, const std::string& repo, const std::string& repo_folder,
                          const HubFileMeta& m, const std::string& label, const HubFetchOptions& o) {
  const bool quiet = o.quiet, progress_bar = o.progress_bar;
  if (!valid_hub_etag(m.etag)) throw Error(label + ": the Hub's etag '" + m.etag.substr(0, 80) + "' cannot name a blob");
  const fs::path blobs = fs::path(repo_folder) / "blobs";
  const std::string blob = (blobs / m.etag).string();
  std::error_code ec;
  fs::create_directories(blobs, ec);
  if (ec) throw Error(label + ": cannot make " + blobs.string() + ": " + ec.message());
  HubBlobLock lock(s, repo, m.etag);
  if (fs::exists(blob, ec)) return 0;  // there already, or another process finished it while this one waited
  Partial p;
  p.path = blob + ".incomplete";
  const int64_t kept = fs::exists(p.path, ec) ? static_cast<int64_t>(fs::file_size(p.path, ec)) : 0;
  check_room(blobs.string(), m.size - std::min(kept, m.size), label);  // before any file is made
  open_partial(p, m.size, label);
  const KeptFileNote kept_on_interrupt(p.path);  // an interrupt keeps it for the next run, and says so
  const int64_t start = p.have;
  ProgressLine bar(progress_bar && !quiet, label, m.size, start);
  fetch_bytes(s, m, p, label, bar, o.cancelled);
  bar.update(p.have, true);
  verify_blob(m, p, label);
  ::close(p.fd);
  p.fd = -1;
  if (::rename(p.path.c_str(), blob.c_str()) != 0) {
    const int e = errno;
    p.discard();
    throw Error(label + ": cannot move the download into " + blob + ": " + std::strerror(e));
  }
  if (!quiet && !progress_bar)
    std::cerr << "attnmap: downloaded " << label << " (" << hub_size_text(m.size) << ")\n";
  return m.size - start;
}

}  // namespace attnmap
