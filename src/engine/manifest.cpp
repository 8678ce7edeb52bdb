// manifest.cpp - the manifest's rows and header, the Manifest file written in input order and compacted at
// the end of a run, and the earlier manifests a --skip-existing run reads back (its own, the shards').
#include "engine/manifest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/paths.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "io/image_io.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

// A name's bytes as lower-case hex, and back ("" for text that is not hex).
std::string hex_bytes(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : s) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

std::string from_hex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    const int hi = std::isxdigit(static_cast<unsigned char>(h[i])) ? std::stoi(h.substr(i, 1), nullptr, 16) : -1;
    const int lo = std::isxdigit(static_cast<unsigned char>(h[i + 1])) ? std::stoi(h.substr(i + 1, 1), nullptr, 16) : -1;
    if (hi < 0 || lo < 0) return {};
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

}  // namespace

std::string manifest_line(const Outcome& o) {
  nlohmann::ordered_json j;
  j["input"] = o.input;
  if (utf8_escaped_name(o.input) != o.input) j["input_bytes"] = hex_bytes(o.input);  // JSON cannot hold them
  j["outputs"] = o.outputs;
  j["status"] = o.made_by ? o.made_by->status : o.status;
  j["error"] = o.error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.error);
  j["milliseconds"] = std::round((o.made_by ? o.made_by->milliseconds : o.milliseconds) * 1000.0) / 1000.0;
  j["carried"] = o.made_by.has_value();
  put_image_stats(j, o.stats, o.top5);
  // Invalid UTF-8 in a file name becomes U+FFFD rather than aborting the run.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string manifest_header(const nlohmann::ordered_json& settings, const RenderOptions& opt, const BatchOptions& bopt,
                            size_t rows) {
  nlohmann::ordered_json h;
  h["attnmap_manifest"] = 1;
  h["settings"] = settings;
  h["shard"] = std::to_string(bopt.shard_index) + "/" + std::to_string(bopt.shard_count);
  h["out"] = opt.out_dir;
  h["rows"] = rows;
  const std::time_t now = std::time(nullptr);
  std::tm tm {};
  gmtime_r(&now, &tm);
  char started[32];
  std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm);
  h["started"] = started;
  return h.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

Manifest::Manifest(const std::string& path, size_t n, const std::string& header) : path_(path), lines_(n), ready_(n, 0) {
  if (path.empty()) return;
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path + ": cannot create the manifest: " + std::strerror(errno));
  struct ::stat st {};
  if (::fstat(fd_, &st) == 0 && st.st_size > 0) {
    char last = '\n';  // a line cut short (a full disk) must not swallow this run's header
    if (::pread(fd_, &last, 1, st.st_size - 1) == 1 && last != '\n') write_all("\n");
  }
  start_ = ::lseek(fd_, 0, SEEK_END);
  write_all(header);
}

Manifest::~Manifest() {
  if (fd_ >= 0) ::close(fd_);
}

void check_replaceable_manifest(const std::string& path, const std::string& flag_value) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return;  // absent (or unreadable: the write check says so)
  const std::string head = "{\"attnmap_manifest\"";
  std::string first(head.size(), '\0');
  f.read(&first[0], static_cast<std::streamsize>(first.size()));
  first.resize(static_cast<size_t>(f.gcount()));
  if (!first.empty() && first != head)
    throw Error(setting_ref("manifest") + " " + flag_value + ": the file exists and is not an attnmap manifest (it does not start "
                "with a manifest's header line); a manifest never replaces another file: choose another name");
}

std::string Manifest::put(size_t i, std::string line) {
  if (fd_ < 0) return {};
  lines_[i] = std::move(line);
  ready_[i] = 1;
  std::string err;
  while (next_ < lines_.size() && ready_[next_]) {
    if (failed_.empty()) {
      write_all(lines_[next_]);
      if (!failed_.empty()) err = failed_;
    }
    std::string().swap(lines_[next_]);
    ++next_;
  }
  return err;
}

std::string Manifest::compact() {
  if (fd_ < 0 || start_ <= 0) return {};  // nothing before this run's header
  if (!failed_.empty()) return path_ + ": not rewritten after a failed write; every row is kept, the last row of an input wins";
  try {
    const std::vector<uint8_t> all = read_file(path_);
    const auto from = static_cast<size_t>(start_);
    if (all.size() < from) return path_ + ": changed by another process during the run; left as it is";
    write_file_atomic(path_, std::vector<uint8_t>(all.begin() + static_cast<long>(from), all.end()));
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

void Manifest::write_all(const std::string& l) {
  size_t off = 0;
  while (off < l.size() && failed_.empty()) {
    const ssize_t w = ::write(fd_, l.data() + off, l.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      failed_ = path_ + ": manifest write failed: " + std::strerror(errno);
    else
      off += static_cast<size_t>(w);
  }
}

namespace {

/// Whether `p` starts with the header of a run with --shard K/N, N > 1: its first line (read up to 1 MiB)
/// is a JSON object with "attnmap_manifest" and "shard": "K/N".
bool is_shard_manifest(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::string line;
  for (char c; line.size() < (size_t{1} << 20) && f.get(c) && c != '\n';) line.push_back(c);
  const nlohmann::json h = nlohmann::json::parse(line, nullptr, false);
  if (!h.is_object() || !h.contains("attnmap_manifest") || !h.contains("shard") || !h["shard"].is_string()) return false;
  const std::string shard = h["shard"].get<std::string>();
  const size_t slash = shard.find('/');
  return slash != std::string::npos && std::atol(shard.c_str() + slash + 1) > 1;
}

/// Adds the shard manifests directly in `dir` (is_shard_manifest) to `found`, by resolved path.
void add_shard_manifests(const std::string& dir, std::set<std::string>* found) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code e2;
    if (p.extension() != ".jsonl" || !fs::is_regular_file(p, e2)) continue;
    const std::string c = canonical_or_empty(p);
    if (!c.empty() && !found->count(c) && is_shard_manifest(p)) found->insert(c);
  }
}

/// Adds the rows of one earlier manifest to `rows` (read_previous_rows).
void read_rows_of(const std::string& path, const nlohmann::json& settings, std::map<std::string, PrevRow>* rows) {
  std::ifstream f(path, std::ios::binary);
  bool trusted = false;
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    if (!j.is_object()) continue;
    if (j.contains("attnmap_manifest")) {
      trusted = j.contains("settings") && same_settings(j["settings"], settings);
      continue;
    }
    if (!trusted || !j.contains("input") || !j["input"].is_string()) continue;
    std::optional<ImageStats> st = get_image_stats(j);
    const bool done = j.contains("status") && j["status"] == "done" && j.contains("milliseconds") &&
                      j["milliseconds"].is_number();
    if (!st && !done) continue;
    PrevRow& r = (*rows)[j.contains("input_bytes") && j["input_bytes"].is_string() ? from_hex(j["input_bytes"].get<std::string>())
                                                                                 : j["input"].get<std::string>()];
    if (st) r.stats = std::move(st);
    if (!done) continue;
    r.made_by = MadeBy{"done", j["milliseconds"].get<double>()};
    r.outputs.clear();
    if (j.contains("outputs") && j["outputs"].is_array())
      for (const nlohmann::json& o : j["outputs"])
        if (o.is_string()) r.outputs.push_back(o.get<std::string>());
  }
}

}  // namespace

std::vector<std::string> earlier_manifests(const std::string& manifest_path, const std::string& out_dir,
                                           int shard_count) {
  std::set<std::string> found;
  std::error_code ec;
  const std::string own = manifest_path.empty() ? std::string() : canonical_or_empty(manifest_path);
  if (!own.empty() && fs::is_regular_file(own, ec)) found.insert(own);
  if (shard_count == 1) {
    std::set<std::string> folders = {canonical_or_empty(out_dir)};
    if (!own.empty()) folders.insert(fs::path(own).parent_path().string());
    for (const std::string& dir : folders)
      if (!dir.empty()) add_shard_manifests(dir, &found);
  }
  std::vector<std::pair<fs::file_time_type, std::string>> by_time;
  for (const std::string& p : found) by_time.emplace_back(fs::last_write_time(p, ec), p);
  std::sort(by_time.begin(), by_time.end());
  std::vector<std::string> paths;
  for (auto& [t, p] : by_time) paths.push_back(std::move(p));
  return paths;
}

std::map<std::string, PrevRow> read_previous_rows(const std::vector<std::string>& paths, const nlohmann::json& settings) {
  std::map<std::string, PrevRow> rows;
  for (const std::string& path : paths) read_rows_of(path, settings, &rows);
  return rows;
}

}  // namespace attnmap
