// eval_inputs.cpp - what `attnmap eval` reads beside the images: the masks folder's index and each image's
// class truth (labels.csv, else the file name).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>

#include "app/options.hpp"
#include "app/paths.hpp"
#include "app/session.hpp"
#include "app/walk.hpp"
#include "app/eval_parts.hpp"
#include "core/error.hpp"
#include "maps/evaluate.hpp"

namespace attnmap {
namespace eval {

namespace fs = std::filesystem;

namespace {

bool is_image_file(const fs::path& p) {
  std::string e = p.extension().string();
  if (e.empty()) return false;
  std::transform(e.begin(), e.end(), e.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto& exts = default_image_extensions();  // lower case, no dot
  return std::find(exts.begin(), exts.end(), e.substr(1)) != exts.end();
}

}  // namespace

std::array<fs::path, 2> truth_folders(const std::string& masks_dir, const std::string& input) {
  const fs::path parent = fs::path(input).parent_path();
  return {fs::path(masks_dir), parent.empty() ? fs::path(".") : parent};
}

MaskIndex::MaskIndex(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && is_image_file(it->path())) files.push_back(it->path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const fs::path rel = f.lexically_relative(dir);
    by_rel[(rel.parent_path() / rel.stem()).generic_string()].push_back(f.string());
    by_stem[f.stem().string()].push_back(f.string());
    const std::string stem = f.stem().string();
    const size_t dot = stem.rfind('.');
    if (dot != std::string::npos && dot > 0) {  // STEM.<class>: an item mask of image STEM
      items_by_rel[(rel.parent_path() / stem.substr(0, dot)).generic_string()].push_back(f.string());
      items_by_stem[stem.substr(0, dot)].push_back(f.string());
    }
  }
}

std::vector<ItemMask> MaskIndex::find_items(const std::string& rel_stem, const std::string& stem,
                                            const std::vector<std::string>& labels) const {
  const std::vector<std::string>* hit = nullptr;
  auto it = items_by_rel.find(rel_stem);
  if (!rel_stem.empty() && it != items_by_rel.end()) hit = &it->second;
  auto is = items_by_stem.find(stem);
  if (!hit && is != items_by_stem.end()) hit = &is->second;
  std::vector<ItemMask> out;
  if (!hit) return out;
  for (const std::string& f : *hit) {
    const std::string st = fs::path(f).stem().string();
    if (const auto cls = find_label(labels, st.substr(st.rfind('.') + 1))) out.push_back({*cls, f});
  }
  return out;
}

bool MaskIndex::has_item_masks(const std::string& rel_stem, const std::string& stem) const {
  return (!rel_stem.empty() && items_by_rel.count(rel_stem)) || items_by_stem.count(stem);
}

std::optional<std::string> MaskIndex::find(const std::string& rel_stem, const std::string& stem) const {
  const std::vector<std::string>* hit = nullptr;
  if (!rel_stem.empty()) {
    auto it = by_rel.find(rel_stem);
    if (it != by_rel.end()) hit = &it->second;
  }
  if (!hit) {
    auto it = by_stem.find(stem);
    if (it != by_stem.end()) hit = &it->second;
  }
  if (!hit) return std::nullopt;
  if (hit->size() > 1) {
    std::string list;
    for (size_t i = 0; i < hit->size() && i < 4; ++i) list += (i ? ", " : "") + (*hit)[i];
    if (hit->size() > 4) list += ", ...";
    throw Error("several masks share the stem '" + stem + "' (" + list + "); keep one");
  }
  return hit->front();
}

std::string mask_for_job(const Job& job, const std::string& masks_dir, const std::string& masks_prefix,
                         const MaskIndex& masks) {
  if (!masks_prefix.empty() && canonical_or_empty(job.input).rfind(masks_prefix, 0) == 0)
    throw Error("is inside the masks folder " + masks_dir + " (a mask would be scored as an image)");
  const fs::path rel = fs::path(job.out_base).lexically_relative(masks_dir);
  const auto mask_path = masks.find(rel.generic_string(), fs::path(job.input).stem().string());
  if (!mask_path)
    throw Error("no mask named '" + fs::path(job.input).stem().string() + ".*' in " + masks_dir);
  return *mask_path;
}

std::optional<int> TruthLookup::truth_for(const std::string& input) {
  if (!classify_) return std::nullopt;
  const fs::path p(input);
  for (const fs::path& folder : truth_folders(masks_dir_, input)) {
    if (const auto* m = csv_for(folder)) {
      for (const std::string& k : {p.filename().string(), p.stem().string()}) {
        auto it = m->find(k);
        if (it != m->end()) return it->second;
      }
    }
  }
  return label_from_filename(input, hp_.labels);
}

// The folder's labels.csv, read on first use (its notes printed then); nullptr when it has none.
const std::map<std::string, int>* TruthLookup::csv_for(const fs::path& folder) {
  const std::string key = folder.string();
  auto it = csv_cache_.find(key);
  if (it == csv_cache_.end()) {
    std::optional<std::map<std::string, int>> m;
    const fs::path p = folder / kLabelsCsv;
    std::error_code e;
    if (fs::is_regular_file(p, e)) {
      std::vector<std::string> notes;
      m = read_labels_csv(p.string(), hp_.labels, num_classes_, &notes);
      // Printed under -q too, like the per-image mask notes: they bear on the figures.
      for (size_t i = 0; i < notes.size() && i < 5; ++i) std::cerr << "attnmap: note: " << printable(notes[i]) << "\n";
      if (notes.size() > 5)
        std::cerr << "attnmap: note: " << printable(p.string()) << ": " << notes.size() - 5 << " more such rows\n";
    }
    it = csv_cache_.emplace(key, std::move(m)).first;
  }
  return it->second ? &*it->second : nullptr;
}

}  // namespace eval
}  // namespace attnmap
