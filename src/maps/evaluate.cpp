#include "maps/evaluate.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/names.hpp"
#include "core/tensor.hpp"

namespace attnmap {

namespace {

void check_size(const std::vector<float>& map, const Mask& mask, const char* what) {
  const size_t n = static_cast<size_t>(mask.width) * static_cast<size_t>(mask.height);
  if (mask.width <= 0 || mask.height <= 0 || mask.inside.size() != n)
    throw Error(std::string(what) + ": empty or inconsistent mask");
  if (map.size() != n)
    throw Error(std::string(what) + ": map has " + std::to_string(map.size()) + " pixels, mask is " +
                std::to_string(mask.width) + "x" + std::to_string(mask.height) + " = " + std::to_string(n));
}

}  // namespace

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

namespace {

// numpy.percentile's default ("linear") of sorted values at fraction q in [0, 1].
double sorted_quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (pos - static_cast<double>(i)) * (sorted[i + 1] - sorted[i]);
}

}  // namespace

Interval bootstrap_interval(const std::vector<double>& x, int resamples, uint64_t seed, double level) {
  if (x.empty()) throw Error("bootstrap interval: no values to resample");
  if (resamples < 2) throw Error("bootstrap interval: " + std::to_string(resamples) + " resamples, at least 2 needed");
  if (!(level > 0 && level < 1)) throw Error("bootstrap interval: level " + std::to_string(level) + " is not in (0, 1)");
  const uint64_t n = x.size();
  std::vector<double> means(static_cast<size_t>(resamples));
  uint64_t state = seed;
  for (double& m : means) {
    double sum = 0;
    for (uint64_t i = 0; i < n; ++i) sum += x[static_cast<size_t>(splitmix64(&state) % n)];
    m = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  return {sorted_quantile(means, (1 - level) / 2), sorted_quantile(means, (1 + level) / 2)};
}

double median(std::vector<double> x) {
  if (x.empty()) throw Error("median of no values");
  std::sort(x.begin(), x.end());
  return sorted_quantile(x, 0.5);
}

double peak_to_mean(const std::vector<float>& map) {
  double sum = 0, peak = 0;
  for (float v : map) {
    if (!std::isfinite(v)) return 0;
    sum += v;
    peak = std::max(peak, static_cast<double>(v));
  }
  if (map.empty() || !(sum > 0)) return 0;
  return peak / (sum / static_cast<double>(map.size()));
}

Mask mask_from_image(const Image& img, const std::string& what) {
  if (img.width <= 0 || img.height <= 0) throw Error(what + ": empty mask image");
  Mask m;
  m.width = img.width;
  m.height = img.height;
  const size_t n = static_cast<size_t>(img.width) * static_cast<size_t>(img.height);
  m.inside.resize(n);
  uint8_t object_value = 0;  // the first non-zero sample: a binary mask has no other
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &img.rgb[3 * i];
    m.inside[i] = (p[0] | p[1] | p[2]) != 0;
    for (int c = 0; c < 3; ++c) {
      if (p[c] == 0) continue;
      if (object_value == 0) object_value = p[c];
      if (p[c] != object_value) m.grey_levels = true;
    }
  }
  return m;
}

double mask_area_share(const Mask& mask) {
  if (mask.inside.empty()) return 0.0;
  size_t k = 0;
  for (uint8_t v : mask.inside) k += v != 0;
  return static_cast<double>(k) / static_cast<double>(mask.inside.size());
}

size_t argmax_pixel(const std::vector<float>& map) {
  size_t best = map.size();
  for (size_t i = 0; i < map.size(); ++i)
    if (!std::isnan(map[i]) && (best == map.size() || map[i] > map[best])) best = i;
  if (best == map.size()) throw Error("argmax of an empty map or a map of only NaN values");
  return best;
}

bool pointing_game(const std::vector<float>& map, const Mask& mask, int tolerance_px) {
  check_size(map, mask, "pointing game");
  if (tolerance_px < 0)
    throw Error("pointing game: tolerance must be >= 0 pixels, found " + std::to_string(tolerance_px));
  const size_t at = argmax_pixel(map);
  const int w = mask.width, h = mask.height;
  const int px = static_cast<int>(at % static_cast<size_t>(w)),
            py = static_cast<int>(at / static_cast<size_t>(w));
  const long long r2 = static_cast<long long>(tolerance_px) * tolerance_px;
  for (int y = std::max(0, py - tolerance_px); y <= std::min(h - 1, py + tolerance_px); ++y)
    for (int x = std::max(0, px - tolerance_px); x <= std::min(w - 1, px + tolerance_px); ++x) {
      const long long dx = x - px, dy = y - py;
      if (dx * dx + dy * dy <= r2 &&
          mask.inside[static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)])
        return true;
    }
  return false;
}

double energy_in_mask(const std::vector<float>& map, const Mask& mask) {
  check_size(map, mask, "energy in mask");
  double in = 0, all = 0;
  for (size_t i = 0; i < map.size(); ++i) {
    const float v = map[i];
    if (!(v >= 0.0f) || !std::isfinite(v))
      throw Error("energy in mask: the map must be finite and non-negative; found " + std::to_string(v) +
                  " at pixel (" + std::to_string(i % static_cast<size_t>(mask.width)) + ", " +
                  std::to_string(i / static_cast<size_t>(mask.width)) + ")");
    all += v;
    if (mask.inside[i]) in += v;
  }
  if (!(all > 0)) throw Error("energy in mask: the map sums to 0; its energy share is undefined");
  return in / all;
}

std::string map_score_undefined(const std::vector<float>& map) {
  double all = 0;
  for (const float v : map) {
    if (!std::isfinite(v)) return "the map is not finite";
    if (v < 0.0f) return "the map has a negative value";
    all += v;
  }
  return all > 0 ? "" : "the map sums to 0";
}

std::vector<float> map_to_photo(const std::vector<float>& map, int gw, int gh, const Box& box, int photo_w,
                                int photo_h, Upsample mode) {
  int bx = 0, by = 0, bw = 0, bh = 0;
  box_pixels(box, photo_w, photo_h, &bx, &by, &bw, &bh);
  const std::vector<float> up = upsample_map(map, gw, gh, bw, bh, mode);  // (bh, bw)
  std::vector<float> out(
      checked_mul(static_cast<size_t>(photo_w), static_cast<size_t>(photo_h), "map on the photo"),
      0.0f);  // (photo_h, photo_w)
  for (int y = 0; y < bh; ++y)
    for (int x = 0; x < bw; ++x)
      out[static_cast<size_t>(by + y) * static_cast<size_t>(photo_w) + static_cast<size_t>(bx + x)] =
          up[static_cast<size_t>(y) * static_cast<size_t>(bw) + static_cast<size_t>(x)];
  return out;
}

std::string normalise_label(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 128 || std::isalnum(c)) out.push_back(static_cast<char>(c >= 128 ? c : std::tolower(c)));
  }
  return out;
}

std::optional<int> find_label(const std::vector<std::string>& labels, const std::string& name) {
  const std::string n = normalise_label(name);
  if (n.empty()) return std::nullopt;
  for (size_t i = 0; i < labels.size(); ++i)
    if (normalise_label(labels[i]) == n) return static_cast<int>(i);
  return std::nullopt;
}

LabelMatch match_label(const std::string& name, const std::vector<std::string>& labels, const LabelMap& map) {
  if (!map.empty()) {
    const auto it = map.find(normalise_label(name));
    if (it != map.end()) return {it->second, true};
  }
  const std::optional<int> c = find_label(labels, name);
  return {c, c.has_value()};
}

std::string filename_label(const std::string& path, bool* numbered) {
  std::string stem = std::filesystem::path(path).stem().string();
  size_t i = 0;
  while (i < stem.size() && std::isdigit(static_cast<unsigned char>(stem[i]))) ++i;
  const bool prefix = i > 0 && i < stem.size() && (stem[i] == '_' || stem[i] == '-' || stem[i] == ' ' || stem[i] == '.');
  if (prefix) stem = stem.substr(i + 1);
  if (numbered) *numbered = prefix && !stem.empty() && std::isalpha(static_cast<unsigned char>(stem[0]));
  return stem;
}

std::optional<int> label_from_filename(const std::string& path, const std::vector<std::string>& labels) {
  return find_label(labels, filename_label(path));
}

namespace {

// Splits one CSV record (RFC 4180: quoted fields, "" inside quotes); reads more lines for quoted newlines.
bool read_record(std::istream& in, std::vector<std::string>* fields, int* line_no, const std::string& path) {
  fields->clear();
  std::string line;
  if (!std::getline(in, line)) return false;
  ++*line_no;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0;; ++i) {
    if (i >= line.size()) {
      if (quoted) {
        std::string more;
        if (!std::getline(in, more))
          throw Error(path + ": line " + std::to_string(*line_no) + ": unterminated quote");
        ++*line_no;
        cur.push_back('\n');
        line = more;
        i = static_cast<size_t>(-1);
        continue;
      }
      break;
    }
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur.push_back('"');
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields->push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur.push_back(c);
    }
  }
  fields->push_back(cur);
  return true;
}

std::string trim(const std::string& s) { return trim_chars(s, " \t"); }

}  // namespace

std::map<std::string, LabelRow> read_label_rows(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::vector<std::string> f;
  int line_no = 0;
  if (!read_record(in, &f, &line_no, path)) throw Error(path + ": empty file (expected a header row)");
  int col_file = 0, col_label = -1, col_index = -1;
  bool named_file = false;
  for (size_t i = 0; i < f.size(); ++i) {
    std::string h = trim(f[i]);
    if (i == 0 && h.size() >= 3 && h.compare(0, 3, "\xEF\xBB\xBF") == 0) h = h.substr(3);  // UTF-8 BOM
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!named_file && (h == "file" || h == "filename" || h == "image")) {
      col_file = static_cast<int>(i);
      named_file = true;
    } else if (h == "label" || h == "class") {
      col_label = static_cast<int>(i);
    } else if (h == "label_index" || h == "class_index") {
      col_index = static_cast<int>(i);
    }
  }
  if (col_label < 0 && col_index < 0)
    throw Error(path + ": header has no \"label\" or \"label_index\" column");
  std::map<std::string, LabelRow> out;
  for (int first = line_no + 1; read_record(in, &f, &line_no, path); first = line_no + 1) {
    if (f.size() == 1 && trim(f[0]).empty()) continue;  // blank line
    auto field = [&](int c) {
      return c >= 0 && static_cast<size_t>(c) < f.size() ? trim(f[static_cast<size_t>(c)]) : std::string();
    };
    const std::string file = field(col_file);
    if (file.empty()) throw Error(path + ": line " + std::to_string(first) + ": no file name");
    LabelRow row{field(col_label), field(col_index), first};
    if (!row.index.empty()) {
      size_t used = 0;
      try {
        (void)std::stol(row.index, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != row.index.size() || used == 0)
        throw Error(path + ": line " + std::to_string(first) + ": label_index '" + row.index + "' is not an integer");
    }
    out[file] = std::move(row);
  }
  return out;
}

std::optional<int> row_class(const LabelRow& row, const std::vector<std::string>& labels, const LabelMap& map,
                             int num_classes, const std::string& where, bool* unknown, std::vector<std::string>* notes) {
  *unknown = false;
  std::optional<int> by_index;
  if (!row.index.empty()) {
    const long v = std::stol(row.index);
    if (v >= 0 && v < num_classes) by_index = static_cast<int>(v);
  }
  // label_index stands in when there is no label, or a label the model cannot have (its classes are unnamed).
  const LabelMatch m = row.label.empty() ? LabelMatch{} : match_label(row.label, labels, map);
  if (notes && !row.index.empty() && !by_index && (row.label.empty() || (!m.known && labels.empty())))
    notes->push_back(where + "label_index '" + row.index + "' is not in 0.." + std::to_string(num_classes - 1) +
                     "; the row names no class");
  if (row.label.empty()) return by_index;
  if (!m.known) {
    if (labels.empty() && by_index) return by_index;  // the model's classes have no names: the index is the link
    *unknown = true;
    return std::nullopt;
  }
  // Through the user's map the label_index is of the user's label set: no disagreement to speak of.
  if (notes && m.cls && by_index && *m.cls != *by_index && !map.count(normalise_label(row.label)))
    notes->push_back(where + "label '" + row.label + "' and label_index " + row.index + " disagree; the label is used");
  return m.cls;
}

std::map<std::string, int> read_labels_csv(const std::string& path, const std::vector<std::string>& labels,
                                           int num_classes, std::vector<std::string>* notes) {
  std::map<std::string, int> out;
  for (const auto& [file, row] : read_label_rows(path)) {
    const std::string where = path + ": line " + std::to_string(row.line) + ": ";
    bool unknown = false;
    if (const auto c = row_class(row, labels, {}, num_classes, where, &unknown, notes)) out[file] = *c;
    else if (notes && unknown) notes->push_back(where + "label '" + row.label + "' is not one of the model's class names");
  }
  return out;
}

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A JSON label map's entries; nothing for a class-names object ("0".."C-1" keys, or "id2label").
std::optional<std::vector<LabelMapEntry>> json_label_map(const std::string& path, const nlohmann::json& j) {
  if (!j.is_object() || j.empty() || j.contains("id2label")) return std::nullopt;
  bool indices = true;
  for (const auto& kv : j.items()) indices = indices && all_digits(kv.key());
  if (indices) return std::nullopt;
  std::vector<LabelMapEntry> out;
  for (const auto& kv : j.items()) {
    LabelMapEntry e{kv.key(), std::nullopt, std::nullopt, path + ": \"" + kv.key() + "\""};
    const nlohmann::json& v = kv.value();
    if (v.is_string()) e.class_name = v.get<std::string>();
    else if (v.is_number_integer()) e.class_index = v.get<long long>();
    else if (!v.is_null())
      throw Error(e.where + ": the class must be a class name, an index or null (no counterpart), found " + v.dump());
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::optional<std::vector<LabelMapEntry>> read_label_map(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the labels file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text = text.substr(3);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return std::nullopt;  // empty: read_labels_file says so
  if (text[first] == '{') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text.begin() + static_cast<long>(first), text.end());
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ": not valid JSON: " + e.what());
    }
    return json_label_map(path, j);
  }
  if (text[first] == '[') return std::nullopt;
  std::istringstream lines(text);
  std::vector<std::string> f;
  int line_no = 0;
  if (!read_record(lines, &f, &line_no, path)) return std::nullopt;
  int col_name = -1, col_class = -1, col_index = -1;
  for (size_t i = 0; i < f.size(); ++i) {
    std::string h = trim(f[i]);
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (h == "label") col_name = static_cast<int>(i);
    else if (h == "class") col_class = static_cast<int>(i);
    else if (h == "class_index") col_index = static_cast<int>(i);
  }
  if (col_name < 0 || (col_class < 0 && col_index < 0)) return std::nullopt;  // a list of class names
  std::vector<LabelMapEntry> out;
  for (int at = line_no + 1; read_record(lines, &f, &line_no, path); at = line_no + 1) {
    if (f.size() == 1 && trim(f[0]).empty()) continue;
    auto field = [&](int c) { return c >= 0 && static_cast<size_t>(c) < f.size() ? trim(f[static_cast<size_t>(c)]) : std::string(); };
    LabelMapEntry e{field(col_name), std::nullopt, std::nullopt, path + ": line " + std::to_string(at)};
    if (!field(col_class).empty()) e.class_name = field(col_class);
    else if (!field(col_index).empty()) {
      const std::string s = field(col_index);
      if (!all_digits(s.front() == '-' ? s.substr(1) : s))
        throw Error(e.where + ": class_index '" + s + "' is not an integer");
      e.class_index = std::stoll(s);
    }
    out.push_back(std::move(e));
  }
  return out;
}

LabelMap resolve_label_map(const std::vector<LabelMapEntry>& entries, const std::vector<std::string>& labels,
                           int num_classes) {
  LabelMap map;
  for (const LabelMapEntry& e : entries) {
    const std::string key = normalise_label(e.name);
    if (key.empty()) throw Error(e.where + ": the label name is empty");
    std::optional<int> cls;
    if (e.class_name) {
      cls = find_label(labels, *e.class_name);
      if (!cls)
        throw Error(e.where + ": '" + *e.class_name + "' is not one of the model's " + std::to_string(num_classes) +
                    " class names" + (labels.empty() ? " (they have none: give the class index)" : ""));
    } else if (e.class_index) {
      if (*e.class_index < 0 || *e.class_index >= num_classes)
        throw Error(e.where + ": class index " + std::to_string(*e.class_index) + " is not in 0.." + std::to_string(num_classes - 1));
      cls = static_cast<int>(*e.class_index);
    }
    const auto [it, fresh] = map.emplace(key, cls);
    if (!fresh && it->second != cls)
      throw Error(e.where + ": '" + e.name + "' is mapped twice, to different classes");
  }
  return map;
}

}  // namespace attnmap
