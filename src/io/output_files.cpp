// output_files.cpp - output file names checked before a run writes (check_output_name, check_output_file),
// their folders made and removed, and names made printable (utf8_escaped_name). See output_files.hpp.
#include "io/output_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "io/image_io.hpp"

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

void check_output_name(const std::string& label, const std::string& path) {
  const fs::path p(path);
  const std::string leaf = p.filename().string();
  if (leaf.empty() || leaf == "." || leaf == "..")
    throw Error(label + " " + path + " names a folder; give a file name, e.g. DIR/out.json");
  for (const fs::path& c : p)
    if (c.string().size() > 255)  // NAME_MAX of Linux file systems; found now rather than when writing
      throw Error(label + " " + path + ": a name of " + std::to_string(c.string().size()) +
                  " bytes is too long (at most 255)");
}

std::string check_output_file(const std::string& label, const std::string& path, const std::vector<ReadFile>& reads) {
  check_output_name(label, path);
  auto refuse = [&](const std::string& why) { return Error(label + " " + path + why); };
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

std::vector<std::string> make_output_folder(const std::string& label, const std::string& path, const std::string& target) {
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
      throw Error(label + " " + path + ": cannot create folder " + it->string() + " (" + std::strerror(err) + ")");
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
    throw Error(label + " " + path + ": cannot create a file in folder " + dir.string() + " (" + std::strerror(err) + ")");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return made;
}

void remove_made_folders(const std::vector<std::string>& made) {
  for (const std::string& d : made) ::rmdir(d.c_str());  // rmdir(2) removes nothing but an empty folder
}

// Each byte that is not part of well-formed UTF-8 (RFC 3629)
// becomes "%XX", so every output's name can be written in the manifest, the gallery's links and the sheet's
// labels and still name the real file; the input's own bytes are kept in Job::input. x\xff.jpg -> x%FF.
std::string utf8_escaped_name(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_sequence_length(s, i);
    if (len > 0) {
      out.append(s, i, len);
      i += len;
      continue;
    }
    const unsigned char u = static_cast<unsigned char>(s[i++]);
    out += '%';
    out += hex[u >> 4];
    out += hex[u & 15];
  }
  return out;
}

}  // namespace attnmap
