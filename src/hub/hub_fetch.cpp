// hub_fetch.cpp - a Hub model's files: from the cache, else fetched (hub_fetch.hpp).
#include "hub/hub_fetch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "hub/hub_download.hpp"
#include "hub/hub_http.hpp"
#include "io/hash.hpp"

namespace fs = std::filesystem;

namespace attnmap {

namespace {

bool is_index(const std::string& file) { return file == "model.safetensors.index.json"; }

// The shard files a sharded index lists (weight_map's values), each once, sorted; a name that is absolute or
// climbs out is left to the index reader to refuse (checkpoint/weights_hf.hpp), not fetched.
std::vector<std::string> index_shards(const std::string& index_path, const std::string& label) {
  std::ifstream f(index_path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(label + ": model.safetensors.index.json is not a sharded-safetensors index (no \"weight_map\" object)");
  std::vector<std::string> out;
  for (const auto& [tensor, shard] : j["weight_map"].items()) {
    if (!shard.is_string()) continue;
    const std::string s = shard.get<std::string>();
    bool bad = s.empty() || s[0] == '/' || s.find("..") != std::string::npos;
    for (char c : s) bad = bad || static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\';
    if (bad)
      throw Error(label + " lists the shard '" + printable(s) + "', which is not a file of the repository (an absolute "
                  "path, '..', or a control character)");
    out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The configs that can change the numbers of `weights`, which a cached snapshot must hold or record absent
// before it is read without asking the Hub: open_clip's config for open_clip's weights files; else config.json
// and, beside a transformers config.json (it has "model_type"), the image processor's preprocessor_config.json.
// The loaders people fill caches with fetch exactly these (transformers' model and processor, timm's config,
// open_clip's config); a config outside the list is read when the snapshot has it.
std::vector<std::string> configs_that_matter(const std::string& weights, const std::string& config_json) {
  if (weights.rfind("open_clip_", 0) == 0) return {"open_clip_config.json"};
  std::ifstream f(config_json, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_object() && j.contains("model_type")) return {"config.json", "preprocessor_config.json"};
  return {"config.json"};
}

// One HEAD's outcome for a file.
struct Probe {
  enum Kind { Found, Absent, Unreachable } kind = Unreachable;
  HubFileMeta meta;
  std::string why;  ///< Unreachable: what happened
};

std::string normalized_etag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  e.erase(std::remove(e.begin(), e.end(), '"'), e.end());
  return e;
}

class Fetcher {
 public:
  Fetcher(const HubName& n, const HubSettings& s, const HubFetchOptions& o)
      : n_(n), s_(s), o_(o), folder_(hub_repo_folder(s, n.repo)) {}

  HubSnapshot run();

 private:
  std::optional<HubSnapshot> from_cache(bool strict) const;
  std::optional<HubSnapshot> online();
  Probe head(const std::string& file);
  Probe head_once(const std::string& file);
  [[noreturn]] void refuse(const std::string& file, const HttpAnswer& a) const;
  [[noreturn]] void no_weights() const;
  void ensure(const Probe& p, HubSnapshot& snap);
  std::string resolve_url(const std::string& file) const {
    return s_.endpoint + "/" + n_.repo + "/resolve/" + url_quote(commit_.empty() ? n_.revision : commit_, false) + "/" +
           url_quote(file, true);
  }
  HttpHeaders auth() const {
    HttpHeaders h;
    if (!s_.token.empty()) h.push_back("Authorization: Bearer " + s_.token);
    return h;
  }
  std::string label(const std::string& file) const { return n_.repo + " " + file; }
  std::string snapshot_file(const std::string& commit, const std::string& file) const {
    return hub_snapshot_file(folder_, commit, file);
  }

  const HubName& n_;
  const HubSettings& s_;
  const HubFetchOptions& o_;
  std::string folder_, commit_;
  std::string unreachable_;  // why online() gave up
  mutable std::string gap_;  // a config from_cache could not settle
};

// The snapshot the cache holds for the revision. strict: every file attnmap would read is known (present, or
// recorded absent in .no_exist), so nothing need be asked; else what is there is taken (offline, fallback).
std::optional<HubSnapshot> Fetcher::from_cache(bool strict) const {
  const std::optional<std::string> commit = read_hub_ref(folder_, n_.revision);
  if (!commit) return std::nullopt;
  std::error_code ec;
  auto present = [&](const std::string& f) { return fs::exists(snapshot_file(*commit, f), ec); };
  HubSnapshot snap;
  for (const char* f : kHubWeightsFiles) {
    if (present(f)) {
      snap.files.push_back(f);
      break;
    }
    if (strict && !hub_known_absent(folder_, *commit, f)) return std::nullopt;
  }
  if (snap.files.empty()) return std::nullopt;
  if (is_index(snap.files[0]))
    for (const std::string& shard : index_shards(snapshot_file(*commit, snap.files[0]), label(snap.files[0]))) {
      if (!present(shard)) return std::nullopt;
      snap.files.push_back(shard);
    }
  // A snapshot with the repository's .gitattributes was downloaded whole (snapshot_download, snapshotDownload:
  // a loader fetching what it reads never fetches that file), so a file it lacks is absent from the repository.
  const bool whole = present(".gitattributes");
  const std::vector<std::string> needed = configs_that_matter(snap.files[0], snapshot_file(*commit, "config.json"));
  for (const char* f : kHubConfigFiles) {
    if (present(f)) {
      snap.files.push_back(f);
    } else if (!whole && !hub_known_absent(folder_, *commit, f) &&
               std::find(needed.begin(), needed.end(), f) != needed.end()) {  // it may set eps, mean, std: never guessed
      gap_ = std::string(f) + ", which the cached snapshot " + commit->substr(0, 12) + " neither holds nor records "
             "absent (a cache filled by a loader that read only some files)";
      return std::nullopt;
    }
  }
  snap.folder = (fs::path(folder_) / "snapshots" / *commit).string();
  snap.ref = {n_.repo, n_.revision, *commit};
  return snap;
}

Probe Fetcher::head_once(const std::string& file) {
  std::string url = resolve_url(file);
  HttpHeaders h = auth();
  h.push_back("Accept-Encoding: identity");  // the real size (huggingface_hub get_hf_file_metadata)
  HttpAnswer a;
  for (int hops = 0;; ++hops) {  // relative redirects (a renamed repository) are followed, others read
    a = http_head(url, h, s_.etag_timeout);
    const std::string loc = a.header("location");
    if (!a.reached || a.status < 300 || a.status >= 400 || loc.empty() || loc[0] != '/' || hops == 5) break;
    url = url_origin(s_.endpoint) + loc;
  }
  Probe p;
  if (!a.reached) {
    p.why = a.failure;
    return p;
  }
  if (a.status == 429 || a.status >= 500) {
    p.why = "HTTP " + std::to_string(a.status);
    return p;
  }
  if (a.status == 404 && a.header("x-error-code") == "EntryNotFound") {
    p.kind = Probe::Absent;
    p.meta.commit = a.header("x-repo-commit");
    return p;
  }
  if (a.status >= 400) refuse(file, a);
  p.kind = Probe::Found;
  p.meta.file = file;
  p.meta.commit = a.header("x-repo-commit");
  p.meta.lfs = !a.header("x-linked-etag").empty();
  p.meta.etag = normalized_etag(p.meta.lfs ? a.header("x-linked-etag") : a.header("etag"));
  const std::string size = !a.header("x-linked-size").empty() ? a.header("x-linked-size")
                           : a.status < 300                  ? a.header("content-length")
                                                               : "";
  p.meta.url = a.header("location").empty() ? url : a.header("location");
  char* end = nullptr;
  p.meta.size = size.empty() ? -1 : std::strtoll(size.c_str(), &end, 10);
  if (!is_commit_hash(p.meta.commit) || p.meta.etag.empty() || p.meta.size < 0 || !end || *end)
    throw Error(label(file) + ": " + shown_endpoint(s_) + " answered without X-Repo-Commit, an ETag or a size: not the Hugging "
                "Face Hub (a proxy or firewall in between?)");
  return p;
}

// A HEAD, tried 3 times (1 s, then 2 s apart) while the Hub cannot be reached.
Probe Fetcher::head(const std::string& file) {
  if (o_.cancelled && o_.cancelled()) throw Error(label(file) + ": interrupted");
  Probe p = head_once(file);
  for (int i = 1; i <= 2 && p.kind == Probe::Unreachable; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(i));
    p = head_once(file);
  }
  if (p.kind == Probe::Unreachable) unreachable_ = p.why;
  return p;
}

void Fetcher::refuse(const std::string& file, const HttpAnswer& a) const {
  const std::string code = a.header("x-error-code"), msg = a.header("x-error-message");
  const std::string page = shown_endpoint(s_) + "/" + n_.repo;
  const std::string status = "HTTP " + std::to_string(a.status);
  if (code == "GatedRepo" && s_.token.empty())
    throw Error(n_.repo + " is a gated model (" + status + ") and no token was sent: accept its licence on " + page +
                ", make a token (" + shown_endpoint(s_) + "/settings/tokens) and set HF_TOKEN");
  if (code == "GatedRepo")
    throw Error(n_.repo + " is a gated model and the token has no access to it (" + status + "): accept its licence on " +
                page + " with the token's account");
  if (a.status == 401 && msg == "Invalid credentials in Authorization header")
    throw Error(n_.repo + ": the Hub refused the token (HF_TOKEN or the token file): invalid credentials");
  if (code == "RepoNotFound" || (a.status == 401 && code.empty()) || (a.status == 404 && code.empty()))
    throw Error("no model repository " + n_.repo + " on " + shown_endpoint(s_) + " (" + status + "; " +
                (s_.token.empty() ? "if it is private, set HF_TOKEN)" : "or the token cannot see it)"));
  if (code == "RevisionNotFound")
    throw Error(n_.repo + " has no revision '" + n_.revision + "' (a branch, tag or commit) (" + status + ")");
  throw Error(label(file) + ": the Hub answered " + status + (msg.empty() ? "" : ": " + msg.substr(0, 200)));
}

void Fetcher::no_weights() const {
  std::string listing;
  const std::string url = s_.endpoint + "/api/models/" + n_.repo + "/revision/" + url_quote(commit_, false);
  const HttpAnswer a = http_get_small(url, auth(), s_.etag_timeout, 16 << 20);
  const nlohmann::json j = a.reached && a.status == 200 ? nlohmann::json::parse(a.body, nullptr, false) : nlohmann::json();
  if (j.is_object() && j.contains("siblings") && j["siblings"].is_array()) {
    int shown = 0;
    for (const auto& f : j["siblings"])
      if (f.is_object() && f.contains("rfilename") && f["rfilename"].is_string() && shown++ < 20)
        listing += (listing.empty() ? "" : ", ") + f["rfilename"].get<std::string>();
    listing = "it holds " + (listing.empty() ? std::string("no files") : listing + (shown > 20 ? ", ..." : ""));
  } else {
    listing = "its file list could not be read (" + (a.reached ? "HTTP " + std::to_string(a.status) : a.failure) + ")";
  }
  std::string names;
  for (const char* f : kHubWeightsFiles) names += (names.empty() ? "" : ", ") + std::string(f);
  throw Error(n_.repo + " at " + commit_.substr(0, 12) + " has none of the weights files attnmap reads (" + names +
              "): " + listing);
}

void Fetcher::ensure(const Probe& p, HubSnapshot& snap) {
  std::error_code ec;
  snap.files.push_back(p.meta.file);
  if (fs::exists(snapshot_file(commit_, p.meta.file), ec)) return;
  snap.downloaded_bytes += download_hub_blob(s_, n_.repo, folder_, p.meta, label(p.meta.file), o_);
  link_hub_snapshot(folder_, commit_, p.meta.file, p.meta.etag);
}

// The files asked of the Hub, one HEAD each, the commit of the first answer used for the rest. nullopt: the
// Hub could not be reached (unreachable_ says why).
std::optional<HubSnapshot> Fetcher::online() {
  HubSnapshot snap;
  auto note_commit = [&](const std::string& c) {
    if (!commit_.empty() || !is_commit_hash(c)) return;
    commit_ = c;
    write_hub_ref(folder_, n_.revision, commit_);  // before any download, as huggingface_hub
  };
  for (const char* f : kHubWeightsFiles) {
    const Probe p = head(f);
    if (p.kind == Probe::Unreachable) return std::nullopt;
    note_commit(p.meta.commit);
    if (p.kind == Probe::Absent) {
      if (!commit_.empty()) mark_hub_absent(folder_, commit_, f);
      continue;
    }
    ensure(p, snap);
    break;
  }
  if (snap.files.empty()) no_weights();
  if (is_index(snap.files[0]))
    for (const std::string& shard : index_shards(snapshot_file(commit_, snap.files[0]), label(snap.files[0]))) {
      const Probe p = head(shard);
      if (p.kind == Probe::Unreachable) return std::nullopt;
      if (p.kind == Probe::Absent)
        throw Error(label(snap.files[0]) + " lists the shard " + shard + ", which the repository does not have");
      ensure(p, snap);
    }
  for (const char* f : kHubConfigFiles) {
    const Probe p = head(f);
    if (p.kind == Probe::Unreachable) return std::nullopt;
    if (p.kind == Probe::Absent) mark_hub_absent(folder_, commit_, f);
    else ensure(p, snap);
  }
  write_hub_ref(folder_, n_.revision, commit_);
  snap.folder = (fs::path(folder_) / "snapshots" / commit_).string();
  snap.ref = {n_.repo, n_.revision, commit_};
  return snap;
}

HubSnapshot Fetcher::run() {
  const std::string where = hub_name_text(n_);
  const std::string fetch_it = "fetch it where the Hub can be reached (attnmap download " + where + ")";
  if (s_.offline) {
    if (std::optional<HubSnapshot> c = from_cache(false)) return *c;
    const std::string var = s_.offline_by;
    if (!gap_.empty()) throw Error(where + ": " + var + " is set and the model's " + gap_ + "; " + fetch_it + " or unset " + var);
    throw Error(where + " is not in the Hub cache " + s_.cache + " and " + var + " is set (no connection tried): " +
                fetch_it + " or unset " + var);
  }
  if (is_commit_hash(n_.revision))
    if (std::optional<HubSnapshot> c = from_cache(true)) return *c;  // a commit never changes: no request
  if (std::optional<HubSnapshot> got = online()) return *got;
  if (std::optional<HubSnapshot> c = from_cache(false)) {
    c->notes.push_back(shown_endpoint(s_) + " could not be reached (" + unreachable_ + "): the cached snapshot " +
                       c->ref.commit.substr(0, 12) + " of " + where + " is used");
    return *c;
  }
  throw Error(where + ": " + shown_endpoint(s_) + " could not be reached (" + unreachable_ + ", 3 tries) and " +
              (gap_.empty() ? "the model is not in the Hub cache " + s_.cache : "the model's " + gap_ + "; " + fetch_it));
}

}  // namespace

HubSnapshot fetch_hub_model(const HubName& name, const HubSettings& s, const HubFetchOptions& o) {
  return Fetcher(name, s, o).run();
}

namespace {

// The blob `path` resolves to, when it is one named by a hash of `digits` hex digits; "" otherwise.
std::string blob_named(const std::string& path, size_t digits, fs::path* real_out) {
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (ec || real.parent_path().filename() != "blobs") return {};
  const std::string name = real.filename().string();
  if (name.size() != digits || name.find_first_not_of("0123456789abcdef") != std::string::npos) return {};
  *real_out = real;
  return name;
}

std::string damaged(const std::string& path, const fs::path& blob, const char* what, const std::string& got,
                    const std::string& name) {
  return path + ": the Hub cache is damaged: the blob " + blob.string() + " holds bytes with " + what + " " + got +
         ", not the " + name + " it is named by; delete that blob and run again to fetch it anew";
}

}  // namespace

std::string hub_blob_mismatch(const std::string& path, const std::string& sha256) {
  fs::path real;
  const std::string name = blob_named(path, 64, &real);
  return name.empty() || name == sha256 ? std::string() : damaged(path, real, "sha256", sha256, name);
}

std::optional<HubRef> hub_snapshot_ref(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "…/COMMIT/"
  const std::string commit = p.filename().string(), repo_dir = p.parent_path().parent_path().filename().string();
  if (!is_commit_hash(commit) || p.parent_path().filename() != "snapshots" || repo_dir.rfind("models--", 0) != 0)
    return std::nullopt;
  std::string repo = repo_dir.substr(8);
  const size_t sep = repo.find("--");  // ORG and NAME never hold "--" (hub_name.hpp)
  if (sep == std::string::npos) return std::nullopt;
  repo.replace(sep, 2, "/");
  if (!parse_hub_name(repo)) return std::nullopt;
  return HubRef{repo, commit, commit};
}

std::string hub_snapshot_damage(const std::string& folder) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string path = it->path().string();
    fs::path real;
    if (const std::string sha = blob_named(path, 64, &real); !sha.empty()) {
      if (const std::string got = sha256_file(real.string()); got != sha) return damaged(path, real, "sha256", got, sha);
    } else if (const std::string sha1 = blob_named(path, 40, &real); !sha1.empty()) {
      if (const std::string got = git_blob_sha1(real.string()); got != sha1) return damaged(path, real, "git sha1", got, sha1);
    }
  }
  return {};
}

}  // namespace attnmap
