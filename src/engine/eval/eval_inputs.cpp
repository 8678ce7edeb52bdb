// eval_inputs.cpp - what `attnmap eval` reads beside the images: the masks folder's index and each image's
// class truth (labels.csv, else the file name).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <map>

#include "engine/paths.hpp"
#include "engine/session.hpp"
#include "engine/walk.hpp"
#include "engine/eval/eval_parts.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"
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

const std::vector<std::string>* MaskIndex::item_files(const std::string& rel_stem, const std::string& stem) const {
  auto it = items_by_rel.find(rel_stem);
  if (!rel_stem.empty() && it != items_by_rel.end()) return &it->second;
  auto is = items_by_stem.find(stem);
  return is != items_by_stem.end() ? &is->second : nullptr;
}

std::vector<std::string> MaskIndex::item_names(const std::string& rel_stem, const std::string& stem) const {
  std::vector<std::string> out;
  if (const std::vector<std::string>* hit = item_files(rel_stem, stem))
    for (const std::string& f : *hit) {
      const std::string st = fs::path(f).stem().string();
      out.push_back(st.substr(st.rfind('.') + 1));
    }
  return out;
}

std::vector<ItemMask> MaskIndex::find_items(const std::string& rel_stem, const std::string& stem,
                                            const std::vector<std::string>& labels, const LabelMap& map) const {
  const std::vector<std::string>* hit = item_files(rel_stem, stem);
  std::vector<ItemMask> out;
  if (!hit) return out;
  for (const std::string& f : *hit) {
    const std::string st = fs::path(f).stem().string();
    if (const auto cls = match_label(st.substr(st.rfind('.') + 1), labels, map).cls) out.push_back({*cls, f});
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

namespace {

// A class name from a file name: '_' read as a space ("ankle_boot" -> "ankle boot"), as a prompt wants it.
std::string spaced(std::string name) {
  std::replace(name.begin(), name.end(), '_', ' ');
  return name;
}

// The names of the ground truth by class (normalise_label), each with its first spelling.
struct NameSet {
  std::map<std::string, std::string> by_key;
  void add(const std::string& name) {
    if (const std::string k = normalise_label(name); !k.empty()) by_key.emplace(k, name);
  }
  bool has(const std::string& name) const { return by_key.count(normalise_label(name)) > 0; }
};

}  // namespace

std::vector<std::string> truth_class_names(const std::string& masks_dir, const std::vector<Job>& jobs,
                                           const MaskIndex& masks, const std::vector<std::string>& texts) {
  std::map<std::string, std::map<std::string, LabelRow>> csv;  // by folder, read once ({} without one)
  auto rows_of = [&csv](const fs::path& folder) -> const std::map<std::string, LabelRow>& {
    auto it = csv.find(folder.string());
    if (it != csv.end()) return it->second;
    std::error_code e;
    const fs::path p = folder / kLabelsCsv;
    return csv.emplace(folder.string(), fs::is_regular_file(p, e) ? read_label_rows(p.string())
                                                                  : std::map<std::string, LabelRow>{}).first->second;
  };
  NameSet labelled, from_files;  // labels.csv labels, then item masks; the numbered file names apart
  std::vector<std::string> numbered_names;
  for (const Job& job : jobs) {
    const fs::path p(job.input);
    bool has_label = false;
    for (const fs::path& folder : truth_folders(masks_dir, job.input)) {
      const auto& rows = rows_of(folder);
      for (const std::string& k : {p.filename().string(), p.stem().string()}) {
        const auto it = rows.find(k);
        if (it == rows.end()) continue;
        has_label = !it->second.label.empty();  // a row without a label: the next folder, then the file name
        if (has_label) labelled.add(it->second.label);
        break;
      }
      if (has_label) break;
    }
    const std::string rel = fs::path(job.out_base).lexically_relative(masks_dir).generic_string();
    for (const std::string& item : masks.item_names(rel, p.stem().string())) from_files.add(spaced(item));
    bool numbered = false;
    const std::string name = filename_label(job.input, &numbered);
    if (!has_label && numbered) numbered_names.push_back(spaced(name));
  }
  for (const auto& kv : from_files.by_key) labelled.by_key.emplace(kv);  // the labels.csv spelling first
  // Numbered file names are classes when there is nothing else, or when some of them names a class.
  bool take = labelled.by_key.empty();
  for (const std::string& n : numbered_names)
    take = take || labelled.has(n) || find_label(texts, n).has_value();
  if (take)
    for (const std::string& n : numbered_names) labelled.add(n);
  std::vector<std::string> out;
  for (const auto& kv : labelled.by_key) out.push_back(kv.second);  // sorted by their normalised form
  return out;
}

void TruthLookup::unknown(const std::string& name, const std::string& source) {
  const std::string key = normalise_label(name);
  if (std::find(unknown_keys_.begin(), unknown_keys_.end(), key) == unknown_keys_.end()) {
    unknown_keys_.push_back(key);
    unknown_.push_back(name);
  }
  if (std::find(sources_.begin(), sources_.end(), source) == sources_.end()) sources_.push_back(source);
}

std::vector<std::string> TruthLookup::prepare(const std::vector<Job>& jobs) {
  if (!classify_) return {};
  // File names NNNN_<name> are labels when some of them name a class (or the user gave a map): then the
  // others are of another label set. When none does they are just names (0000_trouser_coat.png).
  std::vector<std::string> unmatched_names;
  bool a_name_matched = !map_.empty();
  for (const Job& job : jobs) {
    const fs::path p(job.input);
    std::optional<int> truth;
    bool found = false;
    for (const fs::path& folder : truth_folders(masks_dir_, job.input)) {
      const auto* rows = csv_for(folder);
      if (!rows || found) continue;
      for (const std::string& k : {p.filename().string(), p.stem().string()}) {
        const auto it = rows->find(k);
        if (it == rows->end()) continue;
        const std::string csv = (folder / kLabelsCsv).string();
        bool foreign = false;
        truth = row_class(it->second, hp_.labels, map_, num_classes_, "", &foreign);
        if (foreign) unknown(it->second.label, csv);
        found = truth.has_value() || !it->second.label.empty();  // a row naming no class: the file name
        break;
      }
    }
    if (!found) {  // the file name: NNNN_<class> is meant as a class; another stem only when it names one
      bool numbered = false;
      const std::string name = filename_label(job.input, &numbered);
      const LabelMatch m = match_label(name, hp_.labels, map_);
      truth = m.cls;
      if (numbered && m.known) a_name_matched = true;
      if (numbered && !m.known) unmatched_names.push_back(name);
    }
    truth_[job.input] = truth;
  }
  if (a_name_matched)
    for (const std::string& n : unmatched_names) unknown(n, "the file names");
  std::vector<std::string> lines;
  if (foreign()) {  // one note; the rows' own notes bear on an accuracy that is not computed
    lines.push_back("attnmap: note: " + printable(foreign_note()));
    return lines;
  }
  // Printed under -q too, like the per-image mask notes: they bear on the figures.
  for (const std::string& n : notes_) lines.push_back("attnmap: note: " + printable(n));
  return lines;
}

std::optional<int> TruthLookup::truth_for(const std::string& input) const {
  if (!classify_ || foreign()) return std::nullopt;
  const auto it = truth_.find(input);
  return it == truth_.end() ? std::nullopt : it->second;
}

std::string TruthLookup::foreign_note() const {
  if (!foreign()) return "";
  std::string names;
  for (size_t i = 0; i < unknown_.size() && i < 5; ++i) names += (i ? ", '" : "'") + unknown_[i] + "'";
  if (unknown_.size() > 5) names += " and " + std::to_string(unknown_.size() - 5) + " more";
  std::string from;
  for (size_t i = 0; i < sources_.size(); ++i) from += (i ? ", " : "") + sources_[i];
  const auto src = hp_.source.find("labels");
  const std::string origin = src == hp_.source.end() ? "the weights' config"
                             : src->second.rfind(kLabelsAssumedImagenet, 0) == 0 ? "ImageNet-1k's, assumed for a 1000-class head without names"
                             : src->second.rfind(kLabelsFromFile, 0) == 0 ? src->second
                                                                          : "the weights' config";
  const std::string whose = hp_.labels.empty() ? "the model's " + std::to_string(num_classes_) + " classes, which have no names"
                                               : "the model's " + std::to_string(num_classes_) + " class names (" + origin + ")";
  return std::string(unknown_.size() == 1 ? "label " : "labels ") + names + " (" + from + ") " +
         (unknown_.size() == 1 ? "is" : "are") + " not among " + whose +
         (map_file_.empty() ? "" : " nor in " + setting_ref("labels") + " " + map_file_) +
         ": top-1 accuracy not computed; " + setting_ref("labels") + " FILE maps " +
         (unknown_.size() == 1 ? "it" : "them") + " to the model's classes (docs/evaluation.md)";
}

// The folder's labels.csv rows, read on first use (its notes kept for prepare); nullptr when it has none.
const std::map<std::string, LabelRow>* TruthLookup::csv_for(const fs::path& folder) {
  const std::string key = folder.string();
  auto it = csv_cache_.find(key);
  if (it == csv_cache_.end()) {
    std::optional<std::map<std::string, LabelRow>> m;
    const fs::path p = folder / kLabelsCsv;
    std::error_code e;
    if (fs::is_regular_file(p, e)) {
      m = read_label_rows(p.string());
      if (text_classes_)  // the texts are named: a label_index numbers no text
        for (auto& kv : *m) kv.second.index.clear();
      std::vector<const LabelRow*> rows;  // in line order
      for (const auto& kv : *m) rows.push_back(&kv.second);
      std::sort(rows.begin(), rows.end(), [](const LabelRow* a, const LabelRow* b) { return a->line < b->line; });
      std::vector<std::string> notes;  // disagreeing label and label_index, an index out of range
      bool foreign = false;
      for (const LabelRow* r : rows)
        (void)row_class(*r, hp_.labels, map_, num_classes_, p.string() + ": line " + std::to_string(r->line) + ": ", &foreign, &notes);
      for (size_t i = 0; i < notes.size() && i < 5; ++i) notes_.push_back(notes[i]);
      if (notes.size() > 5) notes_.push_back(p.string() + ": " + std::to_string(notes.size() - 5) + " more such rows");
    }
    it = csv_cache_.emplace(key, std::move(m)).first;
  }
  return it->second ? &*it->second : nullptr;
}

}  // namespace eval
}  // namespace attnmap
