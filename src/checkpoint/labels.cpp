// labels.cpp - class names from a --labels file, and the ImageNet-1k names (labels.hpp).
#include "checkpoint/labels.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace attnmap {

namespace {

using json = nlohmann::json;

// A JSON object "0".."C-1" -> names (every key present, each a string), in index order.
std::vector<std::string> names_of_object(const std::string& path, const json& m) {
  std::vector<std::string> names;
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string k = std::to_string(i);
    if (!m.contains(k))
      throw Error(path + ": the class names' keys must be 0.." + std::to_string(m.size() - 1) + ", found no \"" + k + "\"");
    if (!m[k].is_string()) throw Error(path + ": the name of class " + k + " is not a string (" + m[k].dump() + ")");
    names.push_back(m[k].get<std::string>());
  }
  return names;
}

}  // namespace

std::vector<std::string> read_labels_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot read the class names file");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const size_t first = text.find_first_not_of(" \t\r\n\xef\xbb\xbf");
  if (first == std::string::npos) throw Error(path + ": the class names file is empty");
  std::vector<std::string> names;
  if (text[first] == '[' || text[first] == '{') {
    json j;
    try {
      j = json::parse(text.begin() + static_cast<long>(first), text.end());
    } catch (const json::exception& e) {
      throw Error(path + ": not valid JSON: " + e.what());
    }
    if (j.is_array()) {
      for (size_t i = 0; i < j.size(); ++i) {
        if (!j[i].is_string()) throw Error(path + ": the name of class " + std::to_string(i) + " is not a string (" + j[i].dump() + ")");
        names.push_back(j[i].get<std::string>());
      }
    } else {
      const json& m = j.contains("id2label") ? j["id2label"] : j;
      if (!m.is_object()) throw Error(path + ": \"id2label\" is not an object of class names");
      names = names_of_object(path, m);
    }
  } else {
    std::stringstream lines(text.substr(text[0] == '\xef' && text.compare(0, 3, "\xef\xbb\xbf") == 0 ? 3 : 0));
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      names.push_back(line);
    }
    while (!names.empty() && names.back().find_first_not_of(" \t") == std::string::npos) names.pop_back();
  }
  if (names.empty()) throw Error(path + ": no class names in the file");
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].find_first_not_of(" \t") == std::string::npos)
      throw Error(path + ": the name of class " + std::to_string(i) + " (line " + std::to_string(i + 1) + ") is empty");
  return names;
}

namespace {
const char* const kImagenetNames[] = {
#include "checkpoint/imagenet_names.inc"
};
}  // namespace

const std::vector<std::string>& imagenet1k_names() {
  static const std::vector<std::string> names(std::begin(kImagenetNames), std::end(kImagenetNames));
  return names;
}

std::string imagenet1k_names_source() { return ATTNMAP_IMAGENET_NAMES_SOURCE; }

}  // namespace attnmap
