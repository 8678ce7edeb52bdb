// clip_tokenizer.cpp - CLIP's tokenizer (see clip_tokenizer.hpp).
#include "text/clip_tokenizer.hpp"

#include <algorithm>
#include <functional>
#include <queue>

#include "core/error.hpp"
#include "text/html_unescape.hpp"
#include "text/unicode_text.hpp"

namespace attnmap {

ClipTextRules default_text_rules(VocabSource source) {
  return source == VocabSource::openai_bpe ? ClipTextRules::openai : ClipTextRules::hugging_face;
}

const char* text_rules_name(ClipTextRules rules) {
  switch (rules) {
    case ClipTextRules::openai: return "openai";
    case ClipTextRules::open_clip: return "open_clip";
    case ClipTextRules::hugging_face: return "hugging_face";
  }
  return "?";
}

namespace {

template <class Pred>
std::u32string strip(const std::u32string& s, Pred space) {
  size_t a = 0, b = s.size();
  while (a < b && space(s[a])) ++a;
  while (b > a && space(s[b - 1])) --b;
  return s.substr(a, b - a);
}

// Every run of characters `space` accepts becomes one " " (re.sub(r'\s+', ' ', s); " ".join(s.split())
// is the same followed by a strip).
template <class Pred>
std::u32string collapse(const std::u32string& s, Pred space) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (!space(s[i])) {
      out.push_back(s[i++]);
      continue;
    }
    while (i < s.size() && space(s[i])) ++i;
    out.push_back(U' ');
  }
  return out;
}

// The pattern's special literals per rules (lower case: the text is lower-cased before matching).
const std::vector<std::u32string>& special_literals(ClipTextRules rules) {
  static const std::vector<std::u32string> openai = {U"<|startoftext|>", U"<|endoftext|>"};
  static const std::vector<std::u32string> open_clip = {U"<start_of_text>", U"<end_of_text>"};
  return rules == ClipTextRules::open_clip ? open_clip : openai;
}

// Does `lit` match cleaned[i...]? Under IGNORECASE (OpenAI, open_clip) by simple case folding.
bool literal_at(const std::u32string& s, size_t i, const std::u32string& lit, bool ignore_case) {
  if (i + lit.size() > s.size()) return false;
  for (size_t k = 0; k < lit.size(); ++k)
    if (ignore_case ? fold_case(s[i + k]) != fold_case(lit[k]) : s[i + k] != lit[k]) return false;
  return true;
}

// The length of the pattern's match at s[i] (specials only when `specials`), 0 when none matches there.
size_t match_at(const std::u32string& s, size_t i, ClipTextRules rules, bool specials) {
  const bool ignore_case = rules != ClipTextRules::hugging_face;
  if (specials)
    for (const auto& lit : special_literals(rules))
      if (literal_at(s, i, lit, ignore_case)) return lit.size();
  static const std::u32string contractions[] = {U"'s", U"'t", U"'re", U"'ve", U"'m", U"'ll", U"'d"};
  for (const auto& c : contractions)
    if (literal_at(s, i, c, ignore_case)) return c.size();
  size_t j = i;
  while (j < s.size() && is_letter(s[j])) ++j;
  if (j > i) return j - i;
  if (is_number(s[i])) return 1;
  auto other = [&](char32_t c) {
    return ignore_case ? is_other_ignoring_case(c) : !(is_white_space(c) || is_letter(c) || is_number(c));
  };
  while (j < s.size() && other(s[j])) ++j;
  return j - i;
}

// re.findall(pattern, s[begin, end)): matches in order, unmatched characters skipped.
void find_all(const std::u32string& s, size_t begin, size_t end, ClipTextRules rules, bool specials,
              std::vector<std::string>& out) {
  const std::u32string part = s.substr(begin, end - begin);
  for (size_t i = 0; i < part.size();) {
    const size_t len = match_at(part, i, rules, specials);
    if (len == 0) {
      ++i;
      continue;
    }
    out.push_back(code_points_to_utf8(part.substr(i, len)));
    i += len;
  }
}

}  // namespace

std::string clip_text_head(const std::string& text) {
  if (text.size() <= 60) return printable(text);
  size_t end = 0;
  while (end < 60) {
    const size_t len = utf8_sequence_length(text, end);
    if (end + std::max<size_t>(len, 1) > 60) break;
    end += std::max<size_t>(len, 1);
  }
  return printable(text.substr(0, end)) + "...";
}

std::u32string clean_clip_text(const std::string& text, ClipTextRules rules) {
  std::u32string s = nfc(utf8_to_code_points(text, "text \"" + clip_text_head(text) + "\""));
  if (rules == ClipTextRules::hugging_face)  // NFC, Replace(\s+, " "), Lowercase
    return lower_each_code_point(collapse(s, is_white_space));
  s = strip(html_unescape(html_unescape(s)), is_python_space);  // basic_clean (ftfy: NFC only)
  if (rules == ClipTextRules::openai)
    s = strip(collapse(s, is_white_space), is_python_space);  // regex.sub(r'\s+', ' ', text).strip()
  else
    s = strip(collapse(s, is_python_space), is_python_space);  // " ".join(text.split())
  return lower_like_python(s);
}

std::vector<std::string> clip_pre_tokens(const std::u32string& cleaned, ClipTextRules rules) {
  std::vector<std::string> out;
  if (rules != ClipTextRules::hugging_face) {
    find_all(cleaned, 0, cleaned.size(), rules, true, out);
    return out;
  }
  // Hugging Face: the added tokens are split off first, the pattern runs on the pieces between them.
  size_t begin = 0;
  for (size_t i = 0; i < cleaned.size();) {
    size_t len = 0;
    for (const auto& lit : special_literals(rules))
      if (literal_at(cleaned, i, lit, false)) len = lit.size();
    if (len == 0) {
      ++i;
      continue;
    }
    find_all(cleaned, begin, i, rules, false, out);
    out.push_back(code_points_to_utf8(cleaned.substr(i, len)));
    i += len;
    begin = i;
  }
  find_all(cleaned, begin, cleaned.size(), rules, false, out);
  return out;
}

ClipTokenizer::ClipTokenizer(ClipVocab vocab, ClipTextRules rules) : vocab_(std::move(vocab)), rules_(rules) {
  const auto& alphabet = byte_alphabet();
  for (size_t b = 0; b < 256; ++b) {
    byte_ids_[b] = vocab_.id(alphabet[b]);
    byte_end_ids_[b] = vocab_.id(alphabet[b] + "</w>");
    if (byte_ids_[b] < 0 || byte_end_ids_[b] < 0)
      throw Error(printable(vocab_.path) + ": no token \"" + alphabet[b] + (byte_ids_[b] < 0 ? "" : "</w>") +
                  "\" for byte " + std::to_string(b) + " (expected CLIP's 256 byte characters and their </w> forms)");
  }
}

// SimpleTokenizer.bpe: the word's bytes as symbols (the last marked "</w>"), then the lowest-ranked
// adjacent pair merged everywhere, left to right, until no pair has a rank. The same passes, found through a
// heap of (rank, left symbol) instead of a scan of the whole word per pass: a 16 KiB word of random letters
// took ~1.3 s per call under ASan with the scan (a pass per merge rule it meets, each over the whole word),
// quadratic in the word. The symbols are a linked list; a pass takes every heap entry of the lowest rank, in
// word order, and merges those still holding the rule's pair and not made in this pass (SimpleTokenizer
// compares against the word before the pass); the pairs around the merged symbols join the heap after the
// pass, as SimpleTokenizer's next pass sees them.
void ClipTokenizer::bpe(const std::string& piece, std::vector<int32_t>& out) const {
  const auto n = static_cast<int32_t>(piece.size());  // at most kMaxClipTextBytes
  if (n == 0) return;
  std::vector<int32_t> sym(static_cast<size_t>(n)), next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  std::vector<uint32_t> made_in(static_cast<size_t>(n), 0);  // the pass that merged into this symbol
  std::vector<char> alive(static_cast<size_t>(n), 1);
  for (int32_t i = 0; i < n; ++i) {
    const auto b = static_cast<unsigned char>(piece[static_cast<size_t>(i)]);
    sym[i] = i + 1 == n ? byte_end_ids_[b] : byte_ids_[b];
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  // The rule of the pair starting at symbol `left`, or null.
  auto rule_at = [&](int32_t left) -> const BpeMerge* {
    if (left < 0 || next[left] < 0) return nullptr;
    const auto it = vocab_.merges.find(merge_key(sym[left], sym[next[left]]));
    return it == vocab_.merges.end() ? nullptr : &it->second;
  };
  using Entry = std::pair<int32_t, int32_t>;  // rank, left symbol
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push = [&](int32_t left) {
    if (const BpeMerge* r = rule_at(left)) heap.push({r->rank, left});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  std::vector<int32_t> merged;
  for (uint32_t pass = 1; !heap.empty(); ++pass) {
    const int32_t rank = heap.top().first;
    merged.clear();
    while (!heap.empty() && heap.top().first == rank) {
      const int32_t left = heap.top().second;
      heap.pop();
      const BpeMerge* r = alive[left] && made_in[left] != pass ? rule_at(left) : nullptr;
      if (!r || r->rank != rank) continue;  // stale: the pair changed since it was pushed
      const int32_t right = next[left];
      sym[left] = r->merged;
      alive[right] = 0;
      next[left] = next[right];
      if (next[right] >= 0) prev[next[right]] = left;
      made_in[left] = pass;
      merged.push_back(left);
    }
    for (const int32_t m : merged) {
      push(prev[m]);
      push(m);
    }
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
}

std::vector<int32_t> ClipTokenizer::encode(const std::string& text) const {
  if (text.size() > kMaxClipTextBytes)
    throw Error("text \"" + clip_text_head(text) + "\": " + std::to_string(text.size()) +
                " bytes, more than the " + std::to_string(kMaxClipTextBytes) + " a CLIP text may have (its context holds " +
                std::to_string(kClipContext) + " tokens)");
  std::vector<int32_t> ids;
  const auto& specials = special_literals(rules_);
  for (const std::string& piece : clip_pre_tokens(clean_clip_text(text, rules_), rules_)) {
    const std::u32string p = utf8_to_code_points(piece, "pre-token");
    if (p == specials[0] || p == specials[1]) {  // the cache's entries: exactly the special literal
      ids.push_back(p == specials[0] ? vocab_.start_id : vocab_.end_id);
      continue;
    }
    bpe(piece, ids);
  }
  return ids;
}

std::vector<int32_t> ClipTokenizer::tokenize(const std::string& text, ContextOverflow overflow, size_t context) const {
  if (context < 2) throw Error("a CLIP context of " + std::to_string(context) + " tokens (expected at least 2)");
  std::vector<int32_t> ids{vocab_.start_id};
  const std::vector<int32_t> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  ids.push_back(vocab_.end_id);
  if (ids.size() <= context) return ids;
  if (overflow == ContextOverflow::refuse)
    throw Error("text \"" + clip_text_head(text) + "\" is " +
                std::to_string(ids.size()) + " tokens with <|startoftext|> and <|endoftext|>, more than CLIP's context of " +
                std::to_string(context) + " (expected at most " + std::to_string(context) +
                "; shorten it, or truncate it as open_clip does)");
  ids.resize(context);
  ids.back() = vocab_.end_id;
  return ids;
}

std::string ClipTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string joined;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab_.tokens.size())
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (expected 0.." +
                  std::to_string(vocab_.tokens.size() - 1) + ", " + printable(vocab_.path) + ")");
    joined += vocab_.tokens[static_cast<size_t>(id)];
  }
  // byte characters back to bytes; "</w>" -> " "
  std::u32string chars = utf8_to_code_points(joined, "tokens");
  std::u32string alphabet_inverse(0x144, U'\xffff');  // U+FFFF: not a byte character
  const auto& alphabet = byte_alphabet();
  for (size_t b = 0; b < 256; ++b) alphabet_inverse[utf8_to_code_points(alphabet[b], "byte")[0]] = static_cast<char32_t>(b);
  std::string bytes;
  const std::u32string end_mark = U"</w>";
  for (size_t i = 0; i < chars.size(); ++i) {
    if (chars.compare(i, end_mark.size(), end_mark) == 0) {
      bytes += ' ';
      i += end_mark.size() - 1;
    } else if (chars[i] < alphabet_inverse.size() && alphabet_inverse[chars[i]] < 256) {
      bytes += static_cast<char>(alphabet_inverse[chars[i]]);
    }
  }
  std::string out;  // errors="replace"
  for (size_t i = 0; i < bytes.size();) {
    const size_t len = utf8_sequence_length(bytes, i);
    if (len == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(bytes, i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace attnmap
