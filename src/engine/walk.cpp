// walk.cpp - inputs into jobs: the folder walk (hidden entries, links, .attnmap-ignore, unsupported image
// types counted), output names over the whole sorted list, --ext lists and --shard K/N.
#include "engine/walk.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "engine/paths.hpp"
#include "engine/provenance.hpp"
// The registry's spelling in no_images_message, not a setting reference: tests/test_walk.cpp reads that text
// from the function itself (no front end in between) and expects the flag.
#include "core/setting_ref.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {

namespace fs = std::filesystem;

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
constexpr const char* kOutputKey = "\x02attnmap";        // passed_over key of attnmap's own PNGs
constexpr const char* kOutFolderKey = "\x03out ";        // passed_over key of the output folder met in a walk

/// The note of the folder plan_jobs was told not to enter (render's and stats' output folder, eval's masks)
/// when a walk met it inside an input folder: images already in it are left out, silently otherwise. "" when
/// the walk met none.
std::string out_folder_note(const std::map<std::string, size_t>& passed_over) {
  const auto it = passed_over.lower_bound(kOutFolderKey);
  if (it == passed_over.end() || it->first.rfind(kOutFolderKey, 0) != 0) return "";
  return "not walked: " + it->first.substr(std::string(kOutFolderKey).size()) +
         " (this run's output folder, or eval's masks folder; images already in it are left out)";
}

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
      if (!out_canon.empty() && canonical_or_empty(p) == out_canon) {
        if (passed_over) ++(*passed_over)[kOutFolderKey + p.string()];
        continue;
      }
      subdirs.push_back(p);
      continue;
    }
    // A FIFO, device, dangling link or link loop with an image's name is kept too: it then fails with its
    // own line (as when named directly) instead of vanishing from the run and the manifest.
    if (has_extension(p, exts) && passed_over && lower(p.extension().string()) == ".png" && it->is_regular_file(e2) &&
        read_png_provenance(p.string())) {
      ++(*passed_over)[kOutputKey];  // an overlay or figure of an earlier run (any -o): not a photo
    } else if (has_extension(p, exts)) {
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

std::string all_inputs_missing(const std::vector<std::string>& inputs, const std::vector<std::string>& missing,
                               const std::string& what) {
  if (inputs.empty() || missing.empty()) return "";
  for (const std::string& in : inputs)
    if (std::find(missing.begin(), missing.end(), in) == missing.end()) return "";
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 3; ++i) names += (i ? ", " : "") + missing[i];
  if (missing.size() > 3) names += ", ...";
  return names + ": no such file or folder; nothing to " + what;
}

std::string no_images_message(const std::vector<std::string>& inputs, const std::vector<std::string>& exts) {
  std::string names;
  for (size_t i = 0; i < inputs.size() && i < 3; ++i) {
    std::error_code ec;
    const std::string& in = inputs[i];
    const bool folder = fs::is_directory(in, ec) && !in.empty() && in.back() != '/';
    names += (i == 0 ? "" : i + 1 == inputs.size() ? " and " : ", ") + in + (folder ? "/" : "");
  }
  if (inputs.size() > 3) names += " and " + std::to_string(inputs.size() - 3) + " more";
  std::string e;
  for (const std::string& x : exts) e += (e.empty() ? "" : ",") + x;
  return "no images found in " + (names.empty() ? std::string("the inputs") : names) +
         (e.empty() ? "" : " with " + spelled_settings(setting_ref("ext")) + " " + e + " (no file there has such an extension)");
}

std::string passed_over_summary(const std::map<std::string, size_t>& passed_over) {
  size_t total = 0, folders = 0;
  std::string list, ignored;
  std::string outputs;
  for (const auto& [ext, count] : passed_over) {
    if (ext.rfind(kOutFolderKey, 0) == 0) continue;  // out_folder_note's
    if (ext == kOutputKey) {
      outputs = "passed over " + std::to_string(count) + " PNG" + (count == 1 ? "" : "s") +
                " that attnmap wrote (overlays and figures of an earlier run; name one directly to render it)";
      continue;
    }
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
  std::string before = folder_note + (!folder_note.empty() && !outputs.empty() ? "; " : "") + outputs;
  if (const std::string out = out_folder_note(passed_over); !out.empty()) before = out + (before.empty() ? "" : "; ") + before;
  if (total == 0) return before;
  return (before.empty() ? "" : before + "; ") + "skipped " + std::to_string(total) + (total == 1 ? " file of an unsupported type: " : " files of unsupported types: ") +
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
      if (e.empty()) throw Error(setting_ref("ext") + " expects extensions such as jpg,png; found an empty item in '" + item + "'");
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
    throw Error(setting_ref("shard") + " expects K/N with 1 <= K <= N (e.g. 1/4), found '" + s + "'");
  *index = static_cast<int>(k);
  *count = static_cast<int>(n);
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
    std::string base = utf8_escaped_name(stem_count[stem_of(c.rel)] > 1 ? c.rel.string() : stem_of(c.rel));
    std::string unique = base;
    for (int k = 2; used.count(unique); ++k) unique = base + "-" + std::to_string(k);
    used.insert(unique);
    jobs.push_back({c.input, (fs::path(out_dir) / unique).string()});
  }
  return jobs;
}

}  // namespace attnmap
