// hub_name.cpp - parsing Hub model names (hub_name.hpp).
#include "hub/hub_name.hpp"

#include <cctype>

namespace attnmap {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// One part of a repository id (huggingface_hub validate_repo_id: [\w\-.]{1,96}, no "--" or "..", not starting
// or ending with '-' or '.').
bool valid_id_part(const std::string& p) {
  if (p.empty() || p.size() > 96) return false;
  for (char c : p)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  if (p.front() == '-' || p.front() == '.' || p.back() == '-' || p.back() == '.') return false;
  return p.find("--") == std::string::npos && p.find("..") == std::string::npos;
}

bool valid_revision(const std::string& r) {
  if (r.empty() || r.size() > 256) return false;
  for (char c : r)
    if (c <= ' ' || c > '~' || c == '\\') return false;
  size_t start = 0;
  while (start <= r.size()) {
    size_t end = r.find('/', start);
    if (end == std::string::npos) end = r.size();
    const std::string part = r.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

std::optional<HubName> fail(std::string* why, const std::string& text) {
  if (why) *why = text;
  return std::nullopt;
}

}  // namespace

bool has_hub_prefix(const std::string& s) { return s.rfind("hf-hub:", 0) == 0 || s.rfind("hf_hub:", 0) == 0; }

bool is_commit_hash(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) return false;
  return true;
}

std::optional<HubName> parse_hub_name(const std::string& s, std::string* why) {
  std::string t = has_hub_prefix(s) ? s.substr(7) : s;
  HubName n;
  if (const size_t at = t.find('@'); at != std::string::npos) {
    n.revision = t.substr(at + 1);
    t = t.substr(0, at);
    if (!valid_revision(n.revision))
      return fail(why, "the revision '" + n.revision + "' is not a branch, tag or commit name");
  }
  const size_t slash = t.find('/');
  if (slash == std::string::npos || t.find('/', slash + 1) != std::string::npos)
    return fail(why, "a Hub name is ORG/NAME (one '/')");
  const std::string org = t.substr(0, slash), name = t.substr(slash + 1);
  if (!valid_id_part(org) || !valid_id_part(name))
    return fail(why, "a Hub name's ORG and NAME are letters, digits, '_', '-' and '.' (1 to 96, no '--' or '..')");
  for (const char* ext : {".safetensors", ".pth", ".pt", ".bin", ".json", ".npz", ".ckpt"})
    if (ends_with(name, ext)) return fail(why, std::string("it ends in ") + ext + ", as a file does");
  n.repo = t;
  return n;
}

std::string hub_name_text(const HubName& n) { return n.revision == "main" ? n.repo : n.repo + "@" + n.revision; }

}  // namespace attnmap
