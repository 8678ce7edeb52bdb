// names.hpp - matching a name the user typed against a list of known names: ASCII case folded
// (`--class bag` for the label "Bag", `--colormap Viridis`), and the nearest known name for a
// "did you mean ...?" (edit distance, as git's and argparse's suggestions).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace attnmap {

/// `s` with ASCII A-Z lowered; other bytes (UTF-8 included) as they are.
inline std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

/// Edit distance between a and b (bytes), O(|a|·|b|): insertions, deletions, substitutions and swaps of two
/// adjacent characters ("magam" -> "magma" is 1), each costing 1 (optimal string alignment, Damerau).
inline size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = b.size() + 1;
  std::vector<size_t> prev2(n), prev(n), row(n);
  for (size_t j = 0; j < n; ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j < n; ++j) {
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], prev2[j - 2] + 1);
    }
    prev2.swap(prev);
    prev.swap(row);
  }
  return prev[b.size()];
}

/// The index of `name` in `known`: an exact match first, else the one match with ASCII case folded; -1 when
/// none, -2 when several differ only in case from `name` (and none is exact).
inline long find_name(const std::vector<std::string>& known, const std::string& name) {
  for (size_t i = 0; i < known.size(); ++i)
    if (known[i] == name) return static_cast<long>(i);
  const std::string low = ascii_lower(name);
  long found = -1;
  for (size_t i = 0; i < known.size(); ++i)
    if (ascii_lower(known[i]) == low) {
      if (found >= 0) return -2;
      found = static_cast<long>(i);
    }
  return found;
}

/// Whether `word` is one of the words of `text` (split at spaces, '_' and '-').
inline bool has_word(const std::string& text, const std::string& word) {
  size_t from = 0;
  while (from <= text.size()) {
    size_t end = text.find_first_of(" _-", from);
    if (end == std::string::npos) end = text.size();
    if (text.compare(from, end - from, word) == 0 && end - from == word.size()) return true;
    from = end + 1;
  }
  return false;
}

/// The known name nearest to `name` (case folded) when it is close - at most max(1, |name| / 3) edits, or
/// `name` (3 or more letters) is the start or one word of it ("boot" -> 'Ankle boot') -; "" otherwise.
inline std::string nearest_name(const std::vector<std::string>& known, const std::string& name) {
  const std::string low = ascii_lower(name);
  size_t best = std::string::npos;
  const std::string* pick = nullptr;
  for (const std::string& k : known) {
    const std::string kl = ascii_lower(k);
    size_t d = edit_distance(low, kl);
    if (low.size() >= 3 && kl.compare(0, low.size(), low) == 0) d = std::min<size_t>(d, 1);  // a prefix: "tab"
    if (low.size() >= 3 && has_word(kl, low)) d = std::min<size_t>(d, 1);  // one of its words: "boot"
    if (d < best) {
      best = d;
      pick = &k;
    }
  }
  if (!pick || best > std::max<size_t>(1, low.size() / 3)) return "";
  return *pick;
}

/// " (did you mean 'X'?)" for nearest_name(known, name); "" when there is none.
inline std::string did_you_mean(const std::vector<std::string>& known, const std::string& name) {
  const std::string pick = nearest_name(known, name);
  return pick.empty() ? "" : " (did you mean '" + pick + "'?)";
}

/// `s` without the characters of `chars` at either end ("" when it holds only those).
inline std::string trim_chars(const std::string& s, const char* chars) {
  const size_t a = s.find_first_not_of(chars);
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(chars) - a + 1);
}

/// A count with its noun, plural unless the count is 1: counted(1, "image") "1 image", counted(3, "image")
/// "3 images", counted(2, "class", "classes") "2 classes".
inline std::string counted(size_t n, const std::string& noun, const std::string& plural = "") {
  return std::to_string(n) + " " + (n == 1 ? noun : plural.empty() ? noun + "s" : plural);
}

}  // namespace attnmap
