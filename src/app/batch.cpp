#include "app/batch.hpp"

#include <sched.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/provenance.hpp"
#include "app/run_figures.hpp"
#include "model/classify.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "model/pos_embed.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"
#include "checkpoint/weights.hpp"

namespace attnmap {

namespace fs = std::filesystem;

std::string canonical_or_empty(const fs::path& p) {
  // As the kernel will see the path once its missing folders are made: component by component from the
  // root, every existing link followed, ".." the physical parent of what was reached so far. (Plain
  // weakly_canonical folds what follows a missing component without following the links in it, so that
  // "new/../link/x" would not be seen to be the link's file.)
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  if (ec) return {};
  fs::path cur = abs.root_path();
  bool cur_missing = false;
  for (const fs::path& c : abs.relative_path()) {
    if (c.empty() || c == ".") continue;
    if (!cur_missing) {  // something must be entered: an existing non-folder cannot be (the kernel: ENOTDIR)
      const fs::file_status cs = fs::status(cur, ec);
      if (ec || !fs::is_directory(cs)) return {};
    }
    if (c == "..") {
      cur = cur.parent_path();
      cur_missing = cur_missing && !fs::exists(fs::symlink_status(cur, ec));
      continue;
    }
    fs::path next = cur / c;
    if (cur_missing) {
      cur = next;
      continue;
    }
    const fs::file_status ls = fs::symlink_status(next, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) return {};
    if (!fs::exists(ls)) {
      cur = next;
      cur_missing = true;
    } else if (fs::is_symlink(ls)) {
      cur = fs::canonical(next, ec);  // the whole chain; a dangling link or a loop cannot be resolved
      if (ec) return {};
    } else {
      cur = next;
    }
  }
  return cur.string();
}

void check_output_name(const std::string& flag, const std::string& path) {
  const fs::path p(path);
  const std::string leaf = p.filename().string();
  if (leaf.empty() || leaf == "." || leaf == "..")
    throw Error(flag + " " + path + " names a folder; give a file name, e.g. DIR/out.json");
  for (const fs::path& c : p)
    if (c.string().size() > 255)  // NAME_MAX of Linux file systems; found now rather than when writing
      throw Error(flag + " " + path + ": a name of " + std::to_string(c.string().size()) +
                  " bytes is too long (at most 255)");
}

std::string check_output_file(const std::string& flag, const std::string& path, const std::vector<ReadFile>& reads) {
  check_output_name(flag, path);
  auto refuse = [&](const std::string& why) { return Error(flag + " " + path + why); };
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_symlink(fs::symlink_status(p, ec))) {
    (void)fs::canonical(p, ec);  // strict: the link must lead to something
    if (ec) throw refuse(" is a symbolic link that leads to no file (" + ec.message() + "); choose another file");
  }
  const std::string target = canonical_or_empty(p);
  if (target.empty())
    throw refuse(" cannot be resolved (a link loop, a dangling link or a file where a folder is needed)");
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) throw refuse(" is a folder; choose a file name");
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw refuse(" is not a regular file (a device, FIFO or socket); choose another file");
  // An existing target is compared by device and inode (one stat per read file: also hard links and bind
  // mounts); one still to be made, by its resolved path (a read file that does not exist yet, e.g. labels.csv).
  struct ::stat ts {};
  const bool exists = fs::exists(st) && ::stat(target.c_str(), &ts) == 0;
  for (const ReadFile& r : reads) {
    struct ::stat rs {};
    const bool same = exists ? ::stat(r.path.c_str(), &rs) == 0 && rs.st_dev == ts.st_dev && rs.st_ino == ts.st_ino
                             : canonical_or_empty(r.path) == target;
    if (same) throw refuse(" is " + r.what + "; choose another file");
  }
  return target;
}

namespace {
std::string g_program_path;  // main's argv[0]
}  // namespace

void set_program_path(const std::string& argv0) { g_program_path = argv0; }

std::vector<ReadFile> model_reads(const std::string& weights_path) {
  std::vector<ReadFile> reads;
  for (const std::string& f : model_files(weights_path))
    reads.push_back({f, f == weights_path ? "the weights file"
                        : f.size() >= 11 && f.compare(f.size() - 11, 11, "config.json") == 0
                            ? "a config file read with the weights"
                            : "a weights file read with -w"});  // a shard, an index, a folder's model.safetensors
  reads.push_back({"/proc/self/exe", "the attnmap program itself"});
  if (g_program_path.find('/') != std::string::npos) reads.push_back({g_program_path, "the attnmap program itself"});
  return reads;
}

std::vector<std::string> make_output_folder(const std::string& flag, const std::string& path, const std::string& target) {
  std::error_code ec;
  const fs::path dir = fs::path(target).parent_path();
  std::vector<fs::path> chain;  // dir and its missing ancestors, deepest first
  for (fs::path a = dir; !a.empty() && !fs::exists(fs::symlink_status(a, ec)); a = a.parent_path()) {
    chain.push_back(a);
    if (a == a.parent_path()) break;
  }
  std::vector<std::string> made;  // deepest first
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (::mkdir(it->c_str(), 0777) != 0) {
      const int err = errno;
      remove_made_folders(made);
      throw Error(flag + " " + path + ": cannot create folder " + it->string() + " (" + std::strerror(err) + ")");
    }
    made.insert(made.begin(), it->string());
  }
  // Probe by creating (then removing) a file beside it, as a temporary file will be: unlike access(2) this
  // also catches a read-only mount or a pseudo file system such as /proc, and holds for root.
  const fs::path probe =
      dir / ("." + fs::path(target).filename().string().substr(0, 200) + ".probe." + std::to_string(::getpid()));
  const TempFileGuard guard(probe.string());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    remove_made_folders(made);
    throw Error(flag + " " + path + ": cannot create a file in folder " + dir.string() + " (" + std::strerror(err) + ")");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return made;
}

void remove_made_folders(const std::vector<std::string>& made) {
  for (const std::string& d : made) ::rmdir(d.c_str());  // rmdir(2) removes nothing but an empty folder
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool has_extension(const fs::path& p, const std::set<std::string>& exts) {
  std::string e = lower(p.extension().string());
  return !e.empty() && exts.count(e.substr(1)) != 0;
}

/// Extensions of image formats attnmap does not decode (HEIF/AVIF, SVG, JPEG XL and 2000, OpenEXR, camera raw,
/// layered editor files, icons...): files that a user would expect to see rendered, so a walk that passes over
/// them says so. Other files (.txt, .json, .npy, .csv, ...) are not images and pass silently.
const std::set<std::string>& unsupported_image_extensions() {
  static const std::set<std::string> k = {
      "heic", "heif", "hif", "avif", "svg", "svgz", "jxl", "jp2", "j2k", "jpx", "jpf", "exr", "ico", "cur", "dds",
      "qoi", "xcf", "kra", "eps", "raw", "dng", "cr2", "cr3", "crw", "nef", "nrw", "arw", "srf", "sr2", "orf",
      "rw2", "raf", "pef", "srw", "x3f", "3fr", "iiq", "erf", "mrw", "dcr", "kdc", "mos", "rwl"};
  return k;
}

constexpr const char* kIgnoreMarker = ".attnmap-ignore";
constexpr const char* kIgnoredFolderKey = "\x01folder ";  // passed_over keys of folders not walked

bool is_hidden(const fs::path& p) {
  const std::string n = p.filename().string();
  return !n.empty() && n[0] == '.';
}

/// Collects the entries below `dir` whose extension is in `exts`, whatever their kind (hidden entries skipped, links to
/// folders not followed, the folder whose canonical path is `out_canon` not entered). A folder that cannot
/// be read becomes one (path, "PATH: cannot read folder: REASON") entry of `unreadable` and the walk goes on.
/// Files not picked whose extension names an image format attnmap cannot decode are counted in `passed_over`
/// (by lower-case extension), when given. A folder holding a file named `.attnmap-ignore` (e.g. a folder of
/// eval masks beside the photos they annotate) is not walked; it is counted in `passed_over` under the key
/// kIgnoredFolderKey + its path, so the run says so.
void walk_folder(const fs::path& dir, const std::string& out_canon, const std::set<std::string>& exts,
                 std::vector<fs::path>* files, std::vector<std::pair<std::string, std::string>>* unreadable,
                 std::map<std::string, size_t>* passed_over) {
  std::error_code ec;
  if (fs::exists(dir / kIgnoreMarker, ec)) {
    if (passed_over) ++(*passed_over)[kIgnoredFolderKey + dir.string()];
    return;
  }
  std::vector<fs::path> subdirs;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (is_hidden(p)) continue;
    std::error_code e2;
    if (it->is_directory(e2)) {
      if (it->is_symlink(e2)) continue;  // not followed: link loops cannot hang the walk
      if (!out_canon.empty() && canonical_or_empty(p) == out_canon) continue;
      subdirs.push_back(p);
      continue;
    }
    // A FIFO, device, dangling link or link loop with an image's name is kept too: it then fails with its
    // own line (as when named directly) instead of vanishing from the run and the manifest.
    if (has_extension(p, exts)) {
      files->push_back(p);
    } else if (passed_over && has_extension(p, unsupported_image_extensions())) {
      ++(*passed_over)[lower(p.extension().string())];
    }
  }
  if (ec && unreadable) unreadable->push_back({dir.string(), dir.string() + ": cannot read folder: " + ec.message()});
  std::sort(subdirs.begin(), subdirs.end());
  for (const fs::path& d : subdirs) walk_folder(d, out_canon, exts, files, unreadable, passed_over);
}

struct Candidate {
  std::string input;
  fs::path rel;  // path relative to the output folder, with the input's extension
};

}  // namespace

const std::vector<std::string>& default_image_extensions() {
  static const std::vector<std::string> kExt = {"jpg", "jpeg", "jfif", "png", "bmp", "tga", "gif", "psd", "hdr",
                                                "pic", "ppm", "pgm", "pnm", "webp", "tif", "tiff"};
  return kExt;
}

std::string passed_over_summary(const std::map<std::string, size_t>& passed_over) {
  size_t total = 0, folders = 0;
  std::string list, ignored;
  for (const auto& [ext, count] : passed_over) {
    if (ext.rfind(kIgnoredFolderKey, 0) == 0) {
      ignored += (folders++ ? ", " : "") + ext.substr(std::string(kIgnoredFolderKey).size());
      continue;
    }
    total += count;
    list += (list.empty() ? "" : ", ") + ext + " " + std::to_string(count);
  }
  const std::string folder_note =
      folders == 0 ? ""
                   : "not walked: " + ignored + (folders == 1 ? " (it holds " : " (they hold ") + kIgnoreMarker + ")";
  if (total == 0) return folder_note;
  return (folder_note.empty() ? "" : folder_note + "; ") + "skipped " + std::to_string(total) + (total == 1 ? " file of an unsupported type: " : " files of unsupported types: ") +
         list + " (not rendered; attnmap reads JPEG, PNG, WebP, TIFF, BMP, GIF, TGA, PSD, HDR, PIC and PGM/PPM)";
}

std::vector<std::string> parse_extensions(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    size_t pos = 0;
    while (pos <= item.size()) {
      const size_t comma = std::min(item.find(',', pos), item.size());
      std::string e = item.substr(pos, comma - pos);
      while (!e.empty() && e.front() == '.') e.erase(e.begin());
      if (e.empty()) throw Error("--ext expects extensions such as jpg,png; found an empty item in '" + item + "'");
      out.push_back(lower(e));
      pos = comma + 1;
    }
  }
  return out;
}

void parse_shard(const std::string& s, int* index, int* count) {
  const size_t slash = s.find('/');
  long k = 0, n = 0;
  bool ok = slash != std::string::npos && slash > 0 && slash + 1 < s.size();
  if (ok) {
    char* end = nullptr;
    const std::string ks = s.substr(0, slash), ns = s.substr(slash + 1);
    k = std::strtol(ks.c_str(), &end, 10);
    ok = *end == '\0' && std::isdigit(static_cast<unsigned char>(ks[0]));
    n = std::strtol(ns.c_str(), &end, 10);
    ok = ok && *end == '\0' && std::isdigit(static_cast<unsigned char>(ns[0]));
  }
  if (!ok || n < 1 || n > 1000000 || k < 1 || k > n)
    throw Error("--shard expects K/N with 1 <= K <= N (e.g. 1/4), found '" + s + "'");
  *index = static_cast<int>(k);
  *count = static_cast<int>(n);
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned h = std::thread::hardware_concurrency();
  return h > 0 ? static_cast<int>(h) : 1;
}

std::vector<Job> plan_jobs(const std::vector<std::string>& inputs, const std::string& out_dir,
                           std::vector<std::string>* missing, const std::vector<std::string>& ext,
                           std::vector<std::pair<std::string, std::string>>* unreadable,
                           std::map<std::string, size_t>* passed_over) {
  const std::vector<std::string>& ext_list = ext.empty() ? default_image_extensions() : ext;
  const std::set<std::string> exts(ext_list.begin(), ext_list.end());
  std::vector<Candidate> cands;
  std::set<std::string> seen;
  const std::string out_canon = canonical_or_empty(out_dir);
  for (const std::string& in : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(in, ec);
    if (ec && unreadable && ec != std::errc::no_such_file_or_directory) {  // e.g. a symlink loop: the reason
      unreadable->push_back({in, in + ": " + ec.message()});
      continue;
    }
    if (ec || !fs::exists(st)) {
      missing->push_back(in);
      continue;
    }
    if (fs::is_directory(st)) {
      std::vector<fs::path> files;
      walk_folder(in, out_canon, exts, &files, unreadable, passed_over);
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        const std::string c = canonical_or_empty(f);
        if (!seen.insert(c.empty() ? f.string() : c).second) continue;  // a dangling link has no canonical path
        cands.push_back({f.string(), f.lexically_relative(in)});
      }
    } else {
      const std::string c = canonical_or_empty(in);
      if (!seen.insert(c).second) continue;
      cands.push_back({in, fs::path(in).filename()});
    }
  }
  // Output stems; colliding ones keep their extension, then numbered.
  std::map<std::string, int> stem_count;
  auto stem_of = [](const fs::path& rel) { return (rel.parent_path() / rel.stem()).string(); };
  for (const auto& c : cands) ++stem_count[stem_of(c.rel)];
  std::vector<Job> jobs;
  std::set<std::string> used;
  for (const auto& c : cands) {
    std::string base = stem_count[stem_of(c.rel)] > 1 ? c.rel.string() : stem_of(c.rel);
    std::string unique = base;
    for (int k = 2; used.count(unique); ++k) unique = base + "-" + std::to_string(k);
    used.insert(unique);
    jobs.push_back({c.input, (fs::path(out_dir) / unique).string()});
  }
  return jobs;
}

std::string default_weights_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "attnmap" / "default.json";
    if (fs::exists(installed, ec)) return installed.string();
  }
  for (const char* p : {ATTNMAP_SOURCE_WEIGHTS, ATTNMAP_INSTALLED_WEIGHTS})
    if (fs::exists(p, ec)) return p;
  throw Error(std::string("no weights given and the bundled default is missing (looked for ") + ATTNMAP_SOURCE_WEIGHTS +
              "); pass --weights");
}

namespace {

std::string with_path(const std::string& input, const std::string& msg) {
  return msg.compare(0, input.size(), input) == 0 ? msg : input + ": " + msg;
}

/// What happened to one input; becomes one manifest line.
struct Outcome {
  std::string input;
  std::string status;  // "done" | "failed" | "skipped"
  std::string error;
  std::vector<std::string> outputs;
  double milliseconds = 0;
  std::optional<MapStats> stats;
  std::vector<std::pair<std::string, float>> top5;  // with a classifier head
  std::string shown;                    // the terminal line after "INPUT -> " (empty: outputs.front())
  std::vector<std::string> shown_more;  // lines under it (--explain --class topK: one per class)
};

/// One manifest object. Fields are documented in README.md ("Manifest"); per-image results come from
/// RenderResult, so a new field there (e.g. top-5 classes) is one more line here.
std::string manifest_line(const Outcome& o) {
  nlohmann::ordered_json j;
  j["input"] = o.input;
  j["outputs"] = o.outputs;
  j["status"] = o.status;
  j["error"] = o.error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.error);
  j["milliseconds"] = std::round(o.milliseconds * 1000.0) / 1000.0;
  put_image_stats(j, o.stats, o.top5);
  // Invalid UTF-8 in a file name becomes U+FFFD rather than aborting the run.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

/// The manifest: this run's header, then its lines in input order, each with one write(2) as soon as every
/// earlier input has finished. The file is opened for appending, never truncated while the run goes on, so
/// an interrupted run leaves every earlier run's rows and its own complete lines (a resume reads them back:
/// read_previous_rows); compact() then rewrites it atomically with this run's block alone.
class Manifest {
 public:
  Manifest(const std::string& path, size_t n, const std::string& header) : path_(path), lines_(n), ready_(n, 0) {
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
  ~Manifest() {
    if (fd_ >= 0) ::close(fd_);
  }
  Manifest(const Manifest&) = delete;
  Manifest& operator=(const Manifest&) = delete;
  /// Records input i's line; called with the run's lock held. Returns an error message when writing failed.
  std::string put(size_t i, std::string line) {
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
  /// At the end of a run that was not interrupted: the file becomes this run's header and rows alone,
  /// written to a temporary file and renamed over it. Returns an error message, or "".
  std::string compact() {
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

 private:
  void write_all(const std::string& l) {
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

  std::string path_;
  int fd_ = -1;
  off_t start_ = 0;  // where this run's header starts
  std::vector<std::string> lines_;
  std::vector<char> ready_;
  size_t next_ = 0;
  std::string failed_;
};

/// What an earlier run recorded for one input: the statistics and top-5 of a "done" or "skipped" row.
using PrevRow = ImageStats;

/// The rows of an earlier manifest at `path` that were made with `settings` (the header above them has the
/// same settings: same_settings), by input; the last row of an input wins. Rows without statistics, rows
/// under another run's settings or under no header (a manifest of an attnmap that wrote none), and lines
/// that are not JSON (a line cut short) are passed over. A missing or unreadable file: none.
std::map<std::string, PrevRow> read_previous_rows(const std::string& path, const nlohmann::json& settings) {
  std::map<std::string, PrevRow> rows;
  if (path.empty()) return rows;
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
    if (std::optional<ImageStats> st = get_image_stats(j)) rows[j["input"].get<std::string>()] = std::move(*st);
  }
  return rows;
}

/// The manifest's first line for this run: {"attnmap_manifest": 1, "settings": {...}, "shard": "K/N",
/// "out": DIR, "rows": n, "started": "YYYY-MM-DDTHH:MM:SSZ"}.
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

std::string fmt_duration(double s) {
  if (!(s >= 0) || s > 359999) return "--:--";
  const long t = std::lround(s);
  char b[32];
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%ld:%02ld", t / 60, t % 60);
  return b;
}

/// Progress on standard error: a redrawn bar on a terminal, a plain line every `every` images otherwise.
class Progress {
 public:
  Progress(size_t total, bool enabled, int every)
      : total_(total), enabled_(enabled && total > 0), tty_(::isatty(2) == 1), t0_(std::chrono::steady_clock::now()) {
    every_ = every > 0 ? static_cast<size_t>(every) : std::clamp<size_t>((total + 9) / 10, 1, 100);
  }
  /// Clears the bar so that a message can be printed on a clean line (lock held).
  void clear() {
    if (shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }
  /// One more image finished (lock held). `processed` counts skipped ones; `rendered` the others.
  void tick(size_t processed, size_t skipped) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    const double el = std::chrono::duration<double>(now - t0_).count();
    const size_t work = processed - skipped;  // images actually rendered (done or failed)
    const double rate = el > 0 ? static_cast<double>(work) / el : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total_ - processed) / rate : -1.0;
    char line[200];
    if (tty_) {
      if (processed < total_ && now - last_ < std::chrono::milliseconds(100) && shown_) return;
      last_ = now;
      const int width = 28;
      const int fill = static_cast<int>(static_cast<double>(width) * static_cast<double>(processed) /
                                        static_cast<double>(total_));
      std::string bar(static_cast<size_t>(fill), '#');
      bar.resize(static_cast<size_t>(width), '.');
      std::snprintf(line, sizeof line, "\r\033[K[%s] %zu/%zu  %.1f images/s  ETA %s", bar.c_str(), processed, total_,
                    rate, fmt_duration(eta).c_str());
      std::cerr << line << std::flush;
      shown_ = true;
    } else if (processed % every_ == 0 || processed == total_) {
      std::snprintf(line, sizeof line, "attnmap: %zu/%zu images, %.1f images/s, ETA %s\n", processed, total_, rate,
                    fmt_duration(eta).c_str());
      std::cerr << line << std::flush;
    }
  }

 private:
  size_t total_;
  bool enabled_, tty_;
  size_t every_ = 1;
  bool shown_ = false;
  std::chrono::steady_clock::time_point t0_, last_{};
};

// run_render's steps, in the order it takes them: check the options, load the model, plan the jobs, check
// the manifest and output folder, run the jobs, write the summary.

/// Options that need no model: -j, --shard, an --out that is an input folder, the --manifest name.
void check_batch_options(const RenderOptions& opt, const BatchOptions& bopt) {
  if (bopt.jobs < 0) throw Error("--jobs must be >= 1 (or 0 for the number of cores), found " + std::to_string(bopt.jobs));
  if (bopt.shard_count < 1 || bopt.shard_index < 1 || bopt.shard_index > bopt.shard_count)
    throw Error("--shard expects K/N with 1 <= K <= N");
  // -o naming an input folder: every run would render the previous run's overlays as new inputs.
  const std::string out_canon = canonical_or_empty(opt.out_dir);
  for (const std::string& in : opt.inputs) {
    std::error_code ec;
    if (!opt.out_dir.empty() && fs::is_directory(in, ec) && canonical_or_empty(in) == out_canon)
      throw Error("the output folder is the input folder " + in + "; choose another --out");
  }
  if (!bopt.manifest.empty()) check_output_name("--manifest", bopt.manifest);  // before the model loads
  check_run_figure_options(bopt);
  if (opt.scale && opt.scale->kind == ScaleKind::Run) {  // one scale over every map of the run needs them all
    if (bopt.skip_existing)
      throw Error("--scale run cannot be combined with --skip-existing: the run's scale needs every image's maps "
                  "(render them all again, or give the bounds: --scale VMIN,VMAX)");
    if (bopt.shard_count > 1)
      throw Error("--scale run cannot be combined with --shard: each shard would have a scale of its own (give the "
                  "bounds instead: --scale VMIN,VMAX)");
  }
}

/// --scale run, first pass: every job's maps computed (on `workers` threads) and kept (maps are small; the
/// photos are not kept), then one scale per unit over them all, into ctx->run_scales. A job that fails here
/// keeps its error for the second pass, which reports it as that image's failure.
struct Precomputed {
  std::vector<std::optional<ComputedViews>> views;
  std::vector<std::string> errors;
};
Precomputed precompute_views(RenderContext* ctx, const std::vector<Job>& jobs, int workers) {
  Precomputed p;
  p.views.resize(jobs.size());
  p.errors.resize(jobs.size());
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      try {
        p.views[i] = compute_job_views(*ctx, jobs[i]);
      } catch (const std::exception& e) {
        p.errors[i] = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < workers; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  for (const auto& v : p.views)
    if (v) add_to_run_scales(*ctx, *v, &ctx->run_scales);
  return p;
}

/// "attention probability 0.0012 .. 0.31, rollout mass 0.0004 .. 0.045": the run's scales, for the terminal.
std::string run_scales_text(const RenderContext& ctx) {
  std::string out;
  for (const auto& [units, s] : ctx.run_scales) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s %.9g .. %.9g", out.empty() ? "" : ", ", units.c_str(), s.vmin, s.vmax);
    out += buf;
  }
  return out;
}


/// Every input's job and this shard's, with what the per-image checks need.
struct JobPlan {
  std::vector<Job> all;   ///< every input, named over the whole sorted list
  std::vector<Job> jobs;  ///< this shard's: sorted index i with i % N == K-1
  std::vector<std::pair<std::string, std::string>> pre;  ///< (input, error): failed before rendering
  std::set<std::string> input_canon;    ///< the inputs' resolved paths: no output may replace one
  std::set<std::string> overlay_paths;  ///< every NAME.png: no NAME.heads.png may replace one
  /// passed_over_summary of the image files of types attnmap cannot decode ("" when none): printed under -q
  /// too, and not in the manifest (they are not inputs of the run).
  std::string passed_note;
};

JobPlan plan_run(const RenderOptions& opt, const BatchOptions& bopt) {
  JobPlan p;
  std::vector<std::string> missing;
  std::vector<std::pair<std::string, std::string>> unreadable;
  std::map<std::string, size_t> passed_over;  // image files of types attnmap cannot decode, by extension
  p.all = plan_jobs(opt.inputs, opt.out_dir, &missing, bopt.ext, &unreadable, &passed_over);
  p.passed_note = passed_over_summary(passed_over);
  for (const auto& m : missing) p.pre.push_back({m, m + ": no such file or folder"});
  for (const auto& u : unreadable) p.pre.push_back(u);
  for (const auto& j : p.all) p.input_canon.insert(canonical_or_empty(j.input));
  // NAME.heads.png of one input must not be another input's overlay (inputs "x.png" and "x.heads.png").
  for (const auto& j : p.all) p.overlay_paths.insert(j.out_base + ".png");
  // Names were resolved over all inputs first, so every shard names a file exactly as the full run does.
  for (size_t i = 0; i < p.all.size(); ++i)
    if (i % static_cast<size_t>(bopt.shard_count) == static_cast<size_t>(bopt.shard_index - 1)) p.jobs.push_back(p.all[i]);
  return p;
}

/// The files a file the run writes besides its images' outputs (the manifest, the contact sheet, the
/// gallery) must not replace: the weights (and their side configs), the program, the inputs, every output
/// of the run's images (of every shard: the shards together write one full run's files), the label font.
std::vector<ReadFile> run_reads(const RenderOptions& opt, const std::string& weights_path, const JobPlan& plan,
                                const RenderContext& ctx) {
  std::vector<ReadFile> reads = model_reads(weights_path);
  for (const std::string& in : opt.inputs) reads.push_back({in, "an input"});
  for (const Job& j : plan.all) reads.push_back({j.input, "an input"});
  for (const Job& j : plan.all) {  // every shard's: the shards together write one full run's files
    const JobFiles f = job_files(ctx, j);
    for (const std::string& png : f.overlays) reads.push_back({png, "an output of this run"});
    for (const std::string& npy : f.npys) {
      reads.push_back({npy, "an output of this run"});
      reads.push_back({npy_sidecar_path(npy), "an output of this run"});
    }
    if (!f.sheet.empty()) reads.push_back({f.sheet, "an output of this run"});
    for (const FigureFormat ff : opt.figure_formats) {  // the figures of the image: NAME.panel.*, .layers.*, .heads.*
      const std::string ext = figure_extension(ff);
      if (opt.panel) reads.push_back({j.out_base + ".panel" + ext, "an output of this run"});
      if (opt.strip_layers) reads.push_back({j.out_base + ".layers" + ext, "an output of this run"});
      if (opt.heads_grid && ext != ".png") reads.push_back({j.out_base + ".heads" + ext, "an output of this run"});
    }
  }
  if (!ctx.font_file.empty()) reads.push_back({ctx.font_file, "the label font"});
  return reads;
}

/// The manifest must not truncate a file of run_reads. Returns the resolved path (what is checked is what
/// is opened); "" without --manifest.
std::string check_manifest_path(const BatchOptions& bopt, const std::vector<ReadFile>& reads) {
  if (bopt.manifest.empty()) return {};
  return check_output_file("--manifest", bopt.manifest, reads);
}

/// The output folder, once: a bad --out is one usage error, not one error per image.
void prepare_output_folder(const RenderOptions& opt) {
  if (opt.out_dir.empty()) throw Error("--out is empty; name an output folder");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(opt.out_dir, ec)) && !fs::is_directory(opt.out_dir, ec))
    throw Error(opt.out_dir + ": the output folder exists and is not a folder");
  fs::create_directories(opt.out_dir, ec);
  if (ec || !fs::is_directory(opt.out_dir))
    throw Error(opt.out_dir + ": cannot create the output folder: " +
                (ec ? ec.message() : std::string("a file of that name exists")));
  // Unwritable (permissions, read-only mount, immutable): one usage error, not one failure per image.
  if (::access(opt.out_dir.c_str(), W_OK | X_OK) != 0)
    throw Error(opt.out_dir + ": cannot write into the output folder: " + std::strerror(errno));
}

/// The worker threads for n images, and the forward pass's thread pool set to match. Cores are shared so that
/// threads never exceed them: with one worker the pool gets every core (or the user's OPENBLAS_NUM_THREADS /
/// OMP_NUM_THREADS, when fewer: e.g. 1 on a busy shared machine); with several, each worker is one image at
/// a time on one thread (measured in docs/benchmarks.md).
int plan_threads(const BatchOptions& bopt, size_t n) {
  const int cores = usable_cores();
  const int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(bopt.jobs > 0 ? bopt.jobs : cores), std::max<size_t>(n, 1)));
  const int blas =
      blas_threads_to_set(workers, cores, std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS"));
  set_blas_threads(blas);
  return workers;
}

/// Runs a planned batch: the failures found while planning, then every job on the worker threads, each
/// image's outcome printed and put in the manifest in input order; then the summary line.
class BatchRun {
 public:
  /// `settings`: the run's record (make_provenance); `prev`: an earlier manifest's rows of these settings.
  BatchRun(const RenderContext& ctx, const BatchOptions& bopt, const JobPlan& plan, const std::string& manifest_path,
           const nlohmann::ordered_json& settings, std::map<std::string, PrevRow> prev,
           const Precomputed* pre = nullptr)
      : ctx_(ctx), opt_(*ctx.opt), bopt_(bopt), plan_(plan), pre_(pre), n_pre_(plan.pre.size()),
        pre_rows_(bopt.shard_index == 1 ? n_pre_ : 0), settings_(nlohmann::json::parse(settings.dump())),
        prev_(std::move(prev)),
        manifest_(manifest_path, pre_rows_ + plan.jobs.size(),
                  manifest_path.empty() ? "" : manifest_header(settings, *ctx.opt, bopt, pre_rows_ + plan.jobs.size())),
        rows_(wants_run_figures(bopt) ? pre_rows_ + plan.jobs.size() : 0) {}

  /// Every input's label and manifest line, in manifest order, for --contact-sheet and --gallery (empty
  /// without them).
  const std::vector<RunRow>& rows() const { return rows_; }

  /// Inputs that failed before rendering (missing, unreadable folders): one error line each, in every shard,
  /// and one manifest entry each, in shard 1's manifest only (concatenated shard manifests list every input once).
  void report_planning_failures() {
    for (size_t i = 0; i < n_pre_; ++i) {
      std::cerr << "attnmap: error: " << printable(plan_.pre[i].second) << "\n";
      ++failed_;
      Outcome o;
      o.input = plan_.pre[i].first;
      o.status = "failed";
      o.error = plan_.pre[i].second;
      if (i < rows_.size()) rows_[i] = RunRow{o.input, manifest_line(o)};
      const std::string err = i < pre_rows_ ? manifest_.put(i, manifest_line(o)) : std::string();
      if (!err.empty()) std::cerr << "attnmap: error: " << printable(err) << "\n";
    }
  }

  /// Renders every job on `workers` threads (the calling thread alone for one).
  void run_jobs(int workers) {
    const size_t n = plan_.jobs.size();
    Progress progress(n, !opt_.quiet, bopt_.progress_every);
    progress_ = &progress;
    t0_ = std::chrono::steady_clock::now();
    std::atomic<size_t> next{0};
    auto worker = [&]() {
      for (size_t i = next++; i < n; i = next++) process(i);
    };
    if (workers <= 1) {
      worker();
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < workers; ++t) pool.emplace_back(worker);
      for (auto& th : pool) th.join();
    }
    progress.clear();
    progress_ = nullptr;
  }

  /// The manifest rewritten with this run's rows alone, the summary line (unless quiet) and the exit
  /// status: 1 when any input failed.
  int finish() {
    const std::string err = manifest_.compact();
    if (!err.empty()) std::cerr << "attnmap: error: " << printable(err) << "\n";
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (!plan_.passed_note.empty()) std::cerr << "attnmap: note: " << plan_.passed_note << "\n";
    if (!opt_.quiet) {
      if (no_stats_ > 0)
        std::cerr << "attnmap: note: " << no_stats_ << " skipped image(s) have no statistics in the manifest: no row "
                  << "of an earlier manifest made with these settings, none in the PNG and no .npy to compute them from\n";
      char redone[64] = "";
      if (redone_ > 0) std::snprintf(redone, sizeof redone, " (%zu redone: settings changed)", redone_);
      char line[256];
      std::snprintf(line, sizeof line, "attnmap: %zu done%s, %zu failed, %zu skipped, %.2f s\n", done_, redone, failed_,
                    skipped_, secs);
      std::cerr << line;
    }
    return failed_ ? 1 : 0;
  }

 private:
  /// Refuses outputs that would replace an input or another input's overlay. Throws attnmap::Error.
  void check_output_names(const JobFiles& f) const {
    std::vector<std::string> all = f.overlays;
    for (const std::string& npy : f.npys) {
      all.push_back(npy);
      all.push_back(npy_sidecar_path(npy));
    }
    if (!f.sheet.empty()) all.push_back(f.sheet);
    for (const std::string& out : all)
      if (plan_.input_canon.count(canonical_or_empty(out)))
        throw Error("output " + out + " would overwrite an input file; choose another --out");
    if (!f.sheet.empty() && plan_.overlay_paths.count(f.sheet))
      throw Error("output " + f.sheet + " would overwrite the overlay of another input of that name; rename it");
  }

  /// What the outputs already there are worth (with --skip-existing): all attnmap's own and made with the
  /// run's settings (their records, read back, are same_settings) -> Same, the image is skipped; one of them
  /// made with other settings or with none recorded -> Changed (`*change` says what differs); else (one
  /// missing, a sidecar missing after an interrupted write, a file of the user's, which check_replaceable
  /// then refuses) -> Incomplete. Either way but Same, the image is rendered again.
  enum class Existing { Incomplete, Same, Changed };
  Existing existing_outputs(const Job& job, const JobFiles& f, std::string* change) const {
    bool complete = !f.names_unknown, changed = false;
    auto regular = [](const std::string& out) {
      std::error_code ec;
      return fs::is_regular_file(fs::symlink_status(out, ec));
    };
    auto compare = [&](const std::optional<nlohmann::json>& r) {
      if (r && same_settings(*r, settings_)) return;
      if (!changed) *change = settings_change(r ? *r : nlohmann::json(), settings_);
      changed = true;
    };
    std::vector<std::string> pngs = f.overlays;
    if (!f.sheet.empty()) pngs.push_back(f.sheet);
    for (const std::string& p : pngs) {
      if (!regular(p) || !written_by_attnmap(p))
        complete = false;
      else
        compare(read_png_provenance(p));
    }
    // Figures asked for (--panel, --strip, PDF/SVG formats) must all be there too: a run that adds one redoes
    // the image rather than skipping it without the new file.
    const std::string& base = job.out_base;
    for (const FigureFormat ff : opt_.figure_formats) {
      const std::string ext = figure_extension(ff);
      if ((opt_.panel && !regular(base + ".panel" + ext)) || (opt_.strip_layers && !regular(base + ".layers" + ext)) ||
          (opt_.heads_grid && ext != ".png" && !regular(base + ".heads" + ext)))
        complete = false;
    }
    for (const std::string& npy : f.npys) {
      const std::optional<nlohmann::json> side = read_sidecar(npy_sidecar_path(npy));
      if (!regular(npy) || !looks_written_by_attnmap_npy(npy) || !side)
        complete = false;
      else
        compare(side);
    }
    return changed ? Existing::Changed : complete ? Existing::Same : Existing::Incomplete;
  }

  /// A skipped image's statistics (and top-5): from the earlier manifest's row of these settings, else from
  /// its PNG (tEXt `attnmap:stats`), else computed from its .npy when that exists with these settings (a
  /// rank-3 --all-heads file fused as the view fuses heads: the same values as the map). Sets o->stats only
  /// when found.
  void carry_statistics(const Job& job, const std::string& png, const std::string& npy, Outcome* o) const {
    const auto it = prev_.find(job.input);
    std::optional<ImageStats> st = it != prev_.end() ? std::optional<ImageStats>(it->second) : read_png_stats(png);
    if (st) {
      o->stats = st->stats;
      o->top5 = st->top5;
      return;
    }
    const std::optional<nlohmann::json> side = read_sidecar(npy_sidecar_path(npy));
    std::error_code ec;
    if (!side || !same_settings(*side, settings_) || !fs::is_regular_file(fs::symlink_status(npy, ec)) ||
        !looks_written_by_attnmap_npy(npy))
      return;
    const HParams& hp = ctx_.model->hp;
    std::vector<int64_t> shape;
    std::vector<float> map = read_npy(npy, &shape);
    const int N = hp.grid_h * hp.grid_w;
    if (shape.size() == 3 && shape[0] == hp.num_heads && shape[1] == hp.grid_h && shape[2] == hp.grid_w)
      map = fuse_heads(map.data(), hp.num_heads, N, ctx_.head);
    else if (shape != std::vector<int64_t>{hp.grid_h, hp.grid_w})
      return;
    o->stats = map_statistics(map, hp.grid_h, hp.grid_w);
  }

  /// A file of the user's that merely has an output's name (photos/cat.png when rendering photos/cat.jpg
  /// into photos/) is never replaced, nor is anything but a regular file (a link, FIFO, device or folder);
  /// attnmap's own earlier outputs are. All are checked before any is written. Throws attnmap::Error.
  void check_replaceable(const JobFiles& f) const {
    std::vector<std::string> all = f.overlays;
    if (!f.sheet.empty()) all.push_back(f.sheet);
    std::set<std::string> npys, sides;
    for (const std::string& npy : f.npys) {
      all.push_back(npy);
      all.push_back(npy_sidecar_path(npy));
      npys.insert(npy);
      sides.insert(npy_sidecar_path(npy));
    }
    for (const std::string& out : all) {
      const bool is_side = sides.count(out) > 0, is_npy = npys.count(out) > 0;
      std::error_code ec;
      const fs::file_status st = fs::symlink_status(out, ec);
      if (!fs::exists(st)) continue;
      if (!fs::is_regular_file(st))
        throw Error("output " + out + " exists and is not a regular file (a link, folder, FIFO or device); it is "
                    "left alone: choose another --out or move it away");
      if (is_side ? !read_sidecar(out) : is_npy ? !looks_written_by_attnmap_npy(out) : !written_by_attnmap(out))
        throw Error("output " + out + " already exists and was not written by attnmap; it is left alone: "
                    "choose another --out or move it away");
    }
  }

  /// One image: skipped, rendered, or failed (the error caught here, with the input's path).
  /// `*change`: with --skip-existing, what differed in outputs made with other settings ("" otherwise).
  Outcome handle(size_t index, const Job& job, std::vector<std::string>* notes, std::string* change) const {
    Outcome o;
    o.input = job.input;
    const JobFiles f = job_files(ctx_, job);
    try {
      check_output_names(f);
      const Existing ex = bopt_.skip_existing ? existing_outputs(job, f, change) : Existing::Incomplete;
      if (ex == Existing::Same) {
        o.status = "skipped";
        o.outputs = f.overlays;
        if (!f.sheet.empty()) o.outputs.push_back(f.sheet);
        o.outputs.insert(o.outputs.end(), f.npys.begin(), f.npys.end());
        carry_statistics(job, f.overlays.front(), f.npys.empty() ? job.out_base + ".npy" : f.npys.front(), &o);
      } else {
        check_replaceable(f);
        if (pre_ && !pre_->views[index]) throw Error(pre_->errors[index]);
        RenderResult res = pre_ ? draw_job_views(ctx_, job, *pre_->views[index]) : render_image(ctx_, job);
        o.status = "done";
        o.outputs = res.outputs;
        o.stats = res.stats;
        o.top5 = std::move(res.top5);
        o.shown = std::move(res.shown);
        o.shown_more = std::move(res.shown_more);
        *notes = std::move(res.notes);
      }
    } catch (const std::exception& e) {
      o.status = "failed";
      o.error = with_path(job.input, e.what());
    } catch (...) {
      o.status = "failed";
      o.error = job.input + ": unknown error";
    }
    return o;
  }

  /// Job i: handled, then its lines printed, counted and put in the manifest under the lock.
  void process(size_t i) {
    const Job& job = plan_.jobs[i];
    const auto ti = std::chrono::steady_clock::now();
    std::vector<std::string> notes;
    std::string change;
    Outcome o = handle(i, job, &notes, &change);
    o.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ti).count();
    std::string line = manifest_line(o);

    std::lock_guard<std::mutex> lock(mu_);
    progress_->clear();
    for (const auto& note : notes) std::cerr << "attnmap: note: " << printable(job.input + ": " + note) << "\n";
    if (o.status == "failed") {
      ++failed_;
      std::cerr << "attnmap: error: " << printable(o.error) << "\n";
    } else if (o.status == "skipped") {
      ++skipped_;
      if (!o.stats) ++no_stats_;
    } else {
      ++done_;
      if (!change.empty() && redone_++ == 0 && !opt_.quiet)  // the first one says why; the summary counts them
        std::cerr << "attnmap: note: " << printable(job.input + ": rendered again, its outputs were made with other settings (" +
                                                    change + ")") << "\n";
      if (!opt_.quiet) {
        std::cout << printable(job.input + " -> " + (o.shown.empty() ? o.outputs.front() : o.shown)) << "\n";
        for (const std::string& l : o.shown_more) std::cout << "  " << printable(l) << "\n";
        if (!o.top5.empty()) std::cout << "  top-5: " << printable(format_top_k(o.top5)) << "\n";
        std::cout << std::flush;
      }
    }
    if (!rows_.empty()) rows_[pre_rows_ + i] = RunRow{run_row_label(job.input, job.out_base, opt_.out_dir), line};
    const std::string err = manifest_.put(pre_rows_ + i, std::move(line));
    if (!err.empty()) std::cerr << "attnmap: error: " << printable(err) << "\n";
    progress_->tick(done_ + failed_ + skipped_ - n_pre_, skipped_);
  }

  const RenderContext& ctx_;
  const RenderOptions& opt_;
  const BatchOptions& bopt_;
  const JobPlan& plan_;
  const Precomputed* pre_;  // --scale run: the first pass's maps, by job index; null otherwise
  const size_t n_pre_;
  const size_t pre_rows_;  // of them, the ones this run's manifest lists: all in shard 1, none in the others
  const nlohmann::json settings_;          // the run's record, compared with the outputs' records
  const std::map<std::string, PrevRow> prev_;  // an earlier manifest's rows of these settings, by input
  Manifest manifest_;
  std::vector<RunRow> rows_;  // with --contact-sheet / --gallery: every input's row, for the run's figures
  std::mutex mu_;  // guards the counters, the terminal and the manifest
  size_t done_ = 0, failed_ = 0, skipped_ = 0, redone_ = 0, no_stats_ = 0;
  Progress* progress_ = nullptr;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

namespace {

// True when a --views list names a class-specific view (chefer, gradcam, attn-grad: a backward pass), or
// cannot be parsed (the run's own checks then refuse it with their message).
bool views_need_backward(const std::string& views) {
  if (views.empty()) return false;
  try {
    for (const ViewSpec& v : parse_views(views))
      if (v.kind == ViewKind::Chefer || v.kind == ViewKind::GradCam || v.kind == ViewKind::AttnGrad) return true;
    return false;
  } catch (const std::exception&) {
    return true;
  }
}

}  // namespace

ViTWeights load_run_model(const RenderOptions& opt, const std::string& weights_path) {
  ViTWeights model = load_model(weights_path, opt.overrides);
  if (opt.size)
    resample_pos_embed(model, (*opt.size)[0], (*opt.size)[1],
                       opt.pos_interp ? *opt.pos_interp : default_pos_interp(model.hp).mode);
  // From here on the run reads nothing from the weights file (a file rewritten during the run changes no
  // image). The class-specific views and --explain run the backward pass, which needs the plain matrices.
  prepare_weights(model, !opt.explain.empty() || views_need_backward(opt.views));
  if (!opt.quiet)
    for (const auto& n : model.notices) std::cerr << "attnmap: note: " << printable(weights_path + ": " + n) << "\n";
  return model;
}

int run_render(const RenderOptions& opt, const BatchOptions& bopt) {
  check_batch_options(opt, bopt);
  const std::string weights_path = opt.weights.empty() ? default_weights_path() : opt.weights;
  const ViTWeights model = load_run_model(opt, weights_path);
  RenderContext ctx = make_render_context(model, opt);
  nlohmann::ordered_json settings = make_provenance(ctx, weights_path);  // hashes the weights once
  ctx.provenance = provenance_text(settings);
  const JobPlan plan = plan_run(opt, bopt);
  if (plan.all.empty() && plan.pre.empty()) {
    if (!plan.passed_note.empty()) std::cerr << "attnmap: note: " << plan.passed_note << "\n";
    std::cerr << "attnmap: error: no images found in the inputs\n";
    return 1;
  }
  std::vector<ReadFile> reads = run_reads(opt, weights_path, plan, ctx);
  const std::string manifest_path = check_manifest_path(bopt, reads);
  if (wants_run_figures(bopt)) {
    if (!manifest_path.empty()) reads.push_back({manifest_path, "the --manifest file"});
    check_run_figure_paths(opt, bopt, std::move(reads));
  }
  prepare_output_folder(opt);
  // Once every usage check has passed (a refusal stays one line).
  if (opt.weights.empty() && !opt.quiet)  // the first run explains itself
    std::cerr << "attnmap: note: no -w given: the bundled default model, a small ViT trained on garment composites "
                 "(not an ImageNet model; on ordinary photos its maps show what it finds salient); -w brings your own "
                 "checkpoint (docs/checkpoints.md)\n";

  // Read before this run appends to it: skipped images keep the statistics an earlier run recorded.
  const int workers = plan_threads(bopt, plan.jobs.size());
  std::optional<Precomputed> pre;
  if (opt.scale && opt.scale->kind == ScaleKind::Run) {
    pre = precompute_views(&ctx, plan.jobs, workers);
    // The bounds are part of how every file was made: in each record and the manifest's header, and printed
    // under -q too (they are what --scale VMIN,VMAX needs to draw more images the same way).
    nlohmann::ordered_json bounds = nlohmann::ordered_json::object();
    for (const auto& [units, sc] : ctx.run_scales) bounds[units] = {sc.vmin, sc.vmax};
    settings["scale_bounds"] = bounds;
    ctx.provenance = provenance_text(settings);
    std::cerr << "attnmap: note: --scale run: " << printable(run_scales_text(ctx)) << "\n";
  }
  BatchRun run(ctx, bopt, plan, manifest_path, settings,
               bopt.skip_existing ? read_previous_rows(manifest_path, nlohmann::json::parse(settings.dump()))
                                  : std::map<std::string, PrevRow>{},
               pre ? &*pre : nullptr);
  run.report_planning_failures();
  run.run_jobs(workers);
  const int figures = write_run_figures(opt, bopt, run.rows(), nlohmann::json::parse(settings.dump()), ctx.provenance);
  return std::max(run.finish(), figures);
}

}  // namespace attnmap
