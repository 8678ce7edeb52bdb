// hub_server.hpp - the C++ side of tests/hub/fake_hub.py for the "models by name" tests: build repositories
// in the folder tree it serves, start and stop it (a child process on 127.0.0.1, ports picked by the OS),
// read its request log, and run @huggingface/hub's snapshotDownload (tests/hub/snapshot.mjs) against it as
// an independent client. Standard library + POSIX + nlohmann/json; needs ATTNMAP_TEST_DIR (the tests/
// folder).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace hub_detail {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

/// A fresh folder under the system's temporary folder, unique to this process and call.
inline std::filesystem::path fresh_temp_dir(const std::string& what) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("attnmap_" + what + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// fork + execve(argv[0]) with stdin from /dev/null and stdout + stderr into `out_file`; the child's pid.
/// Everything the child touches is prepared before fork (only async-signal-safe calls after it).
inline pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& env,
                   const std::filesystem::path& out_file) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out_fd = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (null_fd < 0 || out_fd < 0) throw std::runtime_error("cannot open " + out_file.string());
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(null_fd);
  ::close(out_fd);
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  return pid;
}

/// The environment of this process without NAME=... (when `name` is given), plus `extra` entries.
inline std::vector<std::string> environment_without(const std::string& name,
                                                    const std::vector<std::string>& extra = {}) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (name.empty() || std::strncmp(*e, (name + "=").c_str(), name.size() + 1) != 0) env.emplace_back(*e);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

/// The full path of `program` on PATH ("" when absent).
inline std::string which(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const auto p = std::filesystem::path(d.empty() ? "." : d) / program;
    if (::access(p.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(p)) return p.string();
  }
  return "";
}

/// Waits for `pid` up to `limit`; then SIGKILL. The exit status (WEXITSTATUS), or -1 when it was killed by
/// a signal or the time ran out.
inline int wait_bounded(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace hub_detail

/// One file of a repository commit: `name` in the repository (may contain '/'), copied from `source`.
struct HubRepoFile {
  std::string name;
  std::string source;
};

/// Adds commit `commit` of repository `repo_id` ("ORG/NAME") to the tree fake_hub.py serves from `root`:
/// copies `files` into ROOT/ORG/NAME/<commit>/, merges `refs` (branch or tag -> commit) into refs.json, and
/// writes access.json ({"gated": bool, "private": bool, "tokens": [...]}) unless `access` is null. Call it
/// again for more commits of the same repository.
inline void make_hub_repo(const std::filesystem::path& root, const std::string& repo_id,
                          const std::map<std::string, std::string>& refs, const std::string& commit,
                          const std::vector<HubRepoFile>& files, const nlohmann::json& access = nullptr) {
  const auto slash = repo_id.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == repo_id.size() ||
      repo_id.find('/', slash + 1) != std::string::npos)
    throw std::invalid_argument("make_hub_repo: repo_id must be ORG/NAME, got '" + repo_id + "'");
  const auto repo = root / repo_id.substr(0, slash) / repo_id.substr(slash + 1);
  std::filesystem::create_directories(repo / commit);
  for (const auto& f : files) {
    const auto dst = repo / commit / f.name;
    std::filesystem::create_directories(dst.parent_path());
    std::filesystem::copy_file(f.source, dst, std::filesystem::copy_options::overwrite_existing);
  }
  nlohmann::json all = nlohmann::json::object();
  if (std::filesystem::exists(repo / "refs.json"))
    all = nlohmann::json::parse(hub_detail::read_text(repo / "refs.json"));
  for (const auto& [ref, c] : refs) all[ref] = c;
  hub_detail::write_text(repo / "refs.json", all.dump(2) + "\n");
  if (!access.is_null()) hub_detail::write_text(repo / "access.json", access.dump(2) + "\n");
}

/// tests/hub/fake_hub.py running as a child process for the lifetime of this object (at most 120 s unless
/// `extra_args` says another --lifetime; it also exits when this process does). `extra_args` are its fault
/// options: --cut-after N, --rate B, --corrupt FILE, --api-fails, --max-requests N, --page-size N.
class FakeHub {
 public:
  explicit FakeHub(const std::filesystem::path& root, const std::vector<std::string>& extra_args = {})
      : dir_(hub_detail::fresh_temp_dir("fakehub")) {
    std::vector<std::string> args = {"/usr/bin/python3",
                                     "-I",  // isolated: no PYTHON* variables, no user site-packages
                                     std::string(ATTNMAP_TEST_DIR) + "/hub/fake_hub.py",
                                     "--root",
                                     std::filesystem::absolute(root).string(),
                                     "--port-file",
                                     (dir_ / "ports").string(),
                                     "--log",
                                     log_path().string(),
                                     "--lifetime",
                                     "120"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = hub_detail::spawn(args, hub_detail::environment_without(""), dir_ / "stderr.txt");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      std::istringstream ports(hub_detail::read_text(dir_ / "ports"));  // written whole (temp + rename)
      if (ports >> api_port_ >> cdn_port_) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        fail("fake_hub.py did not start:\n");
      }
      if (std::chrono::steady_clock::now() > deadline) fail("fake_hub.py wrote no port file within 10 s:\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~FakeHub() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  /// "http://127.0.0.1:PORT": what HF_ENDPOINT would be.
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(api_port_); }
  int api_port() const { return api_port_; }
  int cdn_port() const { return cdn_port_; }
  std::filesystem::path log_path() const { return dir_ / "log.jsonl"; }
  /// What the server wrote on stderr (its exit line, Python tracebacks).
  std::string stderr_text() const { return hub_detail::read_text(dir_ / "stderr.txt"); }

  /// SIGTERM, then waits for it (SIGKILL after 5 s). The log stays readable.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    hub_detail::wait_bounded(pid_, std::chrono::seconds(5));
    pid_ = -1;
  }

  /// Every request so far, one JSON object each: {"listener": "api"|"cdn", "method", "path" (raw, with the
  /// query), "range" (or null), "auth" (an Authorization header arrived), "status", "bytes" (body sent)}.
  /// While the server runs, first waits (up to 5 s) until no request is in flight, so the requests of a
  /// client that has exited are all there.
  std::vector<nlohmann::json> log() const {
    if (pid_ > 0) quiesce();
    std::vector<nlohmann::json> lines;
    std::istringstream in(hub_detail::read_text(log_path()));
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded()) lines.push_back(std::move(j));
    }
    return lines;
  }

  /// How many logged requests have this method ("" = any), a path containing `path_substring`, and this
  /// listener ("" = either).
  int count(const std::string& method, const std::string& path_substring,
            const std::string& listener = "") const {
    int n = 0;
    for (const auto& r : log())
      if ((method.empty() || r.value("method", "") == method) &&
          r.value("path", "").find(path_substring) != std::string::npos &&
          (listener.empty() || r.value("listener", "") == listener))
        ++n;
    return n;
  }

 private:
  /// Stops the server, removes its folder and throws `what` + its stderr (a constructor's failure: no
  /// destructor will run).
  [[noreturn]] void fail(const std::string& what) {
    stop();
    const std::string err = stderr_text();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw std::runtime_error(what + err);
  }

  /// GET /_quiesce on the API port: answered once no request is in flight (neither logged nor counted).
  void quiesce() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    timeval tv{6, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(api_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
      const std::string req = "GET /_quiesce HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
      if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
        char buf[512];
        while (::recv(fd, buf, sizeof buf, 0) > 0) {
        }
      }
    }
    ::close(fd);
  }

  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int api_port_ = 0, cdn_port_ = 0;
};

/// Runs `node tests/hub/snapshot.mjs ENDPOINT CACHE_DIR REPO [REVISION]` (@huggingface/hub's
/// snapshotDownload; `token`, when given, as HF_TOKEN; at most 120 s). Returns its exit status (0: the
/// snapshot is in cache_dir), -1 when it was killed or timed out, -2 when node or tests/hub/node_modules is
/// missing (npm ci in tests/hub, as tools/test.sh does) so the caller can GTEST_SKIP. Its stdout + stderr go
/// to `*output` when given, and to std::cerr when it fails.
inline int run_node_snapshot(const std::string& endpoint, const std::filesystem::path& cache_dir,
                             const std::string& repo, const std::string& revision = "",
                             const std::string& token = "", std::string* output = nullptr) {
  const std::string hub_dir = std::string(ATTNMAP_TEST_DIR) + "/hub";
  const std::string node = hub_detail::which("node");
  if (node.empty() || !std::filesystem::exists(hub_dir + "/node_modules/@huggingface/hub/package.json"))
    return -2;
  std::vector<std::string> args = {node, hub_dir + "/snapshot.mjs", endpoint, cache_dir.string(), repo};
  if (!revision.empty()) args.push_back(revision);
  const auto tmp = hub_detail::fresh_temp_dir("node_snapshot");
  const pid_t pid =
      hub_detail::spawn(args,
                        hub_detail::environment_without(
                            "HF_TOKEN", token.empty() ? std::vector<std::string>{}
                                                      : std::vector<std::string>{"HF_TOKEN=" + token}),
                        tmp / "output.txt");
  const int status = hub_detail::wait_bounded(pid, std::chrono::seconds(120));
  const std::string text = hub_detail::read_text(tmp / "output.txt");
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  if (output) *output = text;
  if (status != 0) std::cerr << "snapshot.mjs " << repo << " exited " << status << ":\n" << text;
  return status;
}
