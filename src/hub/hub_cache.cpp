// hub_cache.cpp - huggingface_hub's cache layout and settings (hub_cache.hpp).
#include "hub/hub_cache.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/error.hpp"
#include "hub/hub_name.hpp"

namespace fs = std::filesystem;

namespace attnmap {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// os.path.expandvars: $NAME and ${NAME} of a set variable replaced, anything else left as written.
std::string expand_vars(const std::string& p) {
  std::string out;
  for (size_t i = 0; i < p.size();) {
    const bool braced = p[i] == '$' && i + 1 < p.size() && p[i + 1] == '{';
    size_t start = i + (braced ? 2 : 1), end = start;
    while (p[i] == '$' && end < p.size() && (std::isalnum(static_cast<unsigned char>(p[end])) || p[end] == '_')) ++end;
    const bool closed = !braced || (end < p.size() && p[end] == '}');
    const char* v = end > start && closed ? std::getenv(p.substr(start, end - start).c_str()) : nullptr;
    if (!v) {
      out += p[i++];
      continue;
    }
    out += v;
    i = end + (braced ? 1 : 0);
  }
  return out;
}

// huggingface_hub's os.path.expanduser(os.path.expandvars(...)) of a setting ("~" at the start only).
std::string expand_home(const std::string& raw) {
  const std::string p = expand_vars(raw);
  if (p.empty() || p[0] != '~' || (p.size() > 1 && p[1] != '/')) return p;
  return env("HOME") + p.substr(1);
}

// constants.py _is_true: "1", "ON", "YES", "TRUE" in any case.
bool is_true(const std::string& v) {
  std::string u = v;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return u == "1" || u == "ON" || u == "YES" || u == "TRUE";
}

long seconds(const char* name, long fallback) {
  const std::string v = env(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (errno || end == v.c_str() || *end || n <= 0 || n > 86400)
    throw Error(std::string(name) + "='" + v + "': expected a whole number of seconds from 1 to 86400");
  return n;
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string read_small(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void make_dirs(const fs::path& p) {
  std::error_code ec;
  fs::create_directories(p, ec);
}

}  // namespace

HubSettings hub_settings_from_env() {
  HubSettings s;
  const std::string xdg = env("XDG_CACHE_HOME");
  const std::string home = !env("HF_HOME").empty() ? expand_home(env("HF_HOME"))
                                                   : (xdg.empty() ? expand_home("~/.cache") : xdg) + "/huggingface";
  const std::string legacy = env("HUGGINGFACE_HUB_CACHE");
  s.cache = expand_home(!env("HF_HUB_CACHE").empty() ? env("HF_HUB_CACHE") : !legacy.empty() ? legacy : home + "/hub");
  s.endpoint = env("HF_ENDPOINT").empty() ? "https://huggingface.co" : env("HF_ENDPOINT");
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  s.token = trimmed(!env("HF_TOKEN").empty() ? env("HF_TOKEN") : env("HUGGING_FACE_HUB_TOKEN"));
  const char* token_from = !env("HF_TOKEN").empty() ? "HF_TOKEN" : "HUGGING_FACE_HUB_TOKEN";
  if (s.token.empty()) {
    s.token = trimmed(read_small(expand_home(env("HF_TOKEN_PATH").empty() ? home + "/token" : env("HF_TOKEN_PATH"))));
    token_from = "the token file (HF_TOKEN_PATH, else HF_HOME/token)";
  }
  for (char c : s.token)  // never printed: it is a secret
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw Error(std::string("the Hub token from ") + token_from + " holds a line break or another control character; "
                  "a token is one line of printable characters");
  // constants.py: _is_true(HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE): a set HF_HUB_OFFLINE=0 wins.
  s.offline_by = !env("HF_HUB_OFFLINE").empty() ? "HF_HUB_OFFLINE" : "TRANSFORMERS_OFFLINE";
  s.offline = is_true(env(s.offline_by.c_str()));
  s.etag_timeout = seconds("HF_HUB_ETAG_TIMEOUT", 10);
  s.download_timeout = seconds("HF_HUB_DOWNLOAD_TIMEOUT", 10);
  return s;
}

std::string shown_endpoint(const HubSettings& s) {
  const size_t scheme = s.endpoint.find("://");
  const size_t host = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t at = s.endpoint.find('@', host), host_end = s.endpoint.find('/', host);
  if (at == std::string::npos || at > host_end) return s.endpoint;
  return s.endpoint.substr(0, host) + s.endpoint.substr(at + 1);
}

std::string hub_repo_folder(const HubSettings& s, const std::string& repo) {
  std::string name = "models--" + repo;
  for (size_t i = 0; (i = name.find('/', i)) != std::string::npos;) name.replace(i, 1, "--");
  return (fs::path(s.cache) / name).string();
}

std::optional<std::string> read_hub_ref(const std::string& repo_folder, const std::string& revision) {
  if (is_commit_hash(revision)) return revision;
  const std::string c = trimmed(read_small((fs::path(repo_folder) / "refs" / revision).string()));
  if (!is_commit_hash(c)) return std::nullopt;
  return c;
}

void write_hub_ref(const std::string& repo_folder, const std::string& revision, const std::string& commit) {
  if (revision == commit) return;
  const fs::path ref = fs::path(repo_folder) / "refs" / revision;
  if (read_small(ref.string()) == commit) return;
  make_dirs(ref.parent_path());
  const fs::path tmp = ref.string() + "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return;  // a read-only cache: the ref stays as it was (huggingface_hub does the same)
    f << commit;
    if (!f.flush()) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, ref, ec);
  if (ec) fs::remove(tmp, ec);
}

std::string hub_snapshot_file(const std::string& repo_folder, const std::string& commit, const std::string& file) {
  return (fs::path(repo_folder) / "snapshots" / commit / file).string();
}

bool hub_known_absent(const std::string& repo_folder, const std::string& commit, const std::string& file) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(repo_folder) / ".no_exist" / commit / file, ec);
}

void mark_hub_absent(const std::string& repo_folder, const std::string& commit, const std::string& file) {
  const fs::path p = fs::path(repo_folder) / ".no_exist" / commit / file;
  make_dirs(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::app);  // best effort, as huggingface_hub
}

void link_hub_snapshot(const std::string& repo_folder, const std::string& commit, const std::string& file,
                       const std::string& etag) {
  const fs::path link = hub_snapshot_file(repo_folder, commit, file);
  make_dirs(link.parent_path());
  std::string target = "../../blobs/" + etag;
  for (char c : file)
    if (c == '/') target = "../" + target;
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_symlink(target, link, ec);
  if (ec && !(fs::is_symlink(link) && fs::read_symlink(link) == target))  // another process made the same link
    throw Error(link.string() + ": cannot make the snapshot link to " + target + ": " + ec.message());
}

HubBlobLock::HubBlobLock(const HubSettings& s, const std::string& repo, const std::string& etag) {
  const fs::path lock = fs::path(s.cache) / ".locks" / fs::path(hub_repo_folder(s, repo)).filename() / (etag + ".lock");
  make_dirs(lock.parent_path());
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(lock.string() + ": cannot open the download lock: " + std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw Error(lock.string() + ": cannot take the download lock: " + std::strerror(e));
  }
}

HubBlobLock::~HubBlobLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

}  // namespace attnmap
