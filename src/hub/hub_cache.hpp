// hub_cache.hpp - huggingface_hub's cache, as its constants.py and file_download.py lay it out, so that
// attnmap, transformers, timm and open_clip share one copy of a model:
//   CACHE/models--ORG--NAME/refs/REV                 the commit REV (a branch or tag) resolved to
//   CACHE/models--ORG--NAME/snapshots/COMMIT/FILE    a relative link to ../../blobs/ETAG
//   CACHE/models--ORG--NAME/blobs/ETAG               the bytes (ETAG: sha256 for LFS files, git sha1 else)
//   CACHE/models--ORG--NAME/.no_exist/COMMIT/FILE    an empty file: FILE is known absent at COMMIT
//   CACHE/.locks/models--ORG--NAME/ETAG.lock         the blob's lock (flock, as Python's filelock takes it)
#pragma once
#include <optional>
#include <string>

namespace attnmap {

/// Where the Hub is and how to reach it, from the environment as huggingface_hub reads it (constants.py).
struct HubSettings {
  std::string cache;     ///< HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else
                         ///< $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub ($VAR, ${VAR} and a
                         ///< leading ~ expanded in HF_HOME, HF_HUB_CACHE and HF_TOKEN_PATH, as os.path does)
  std::string endpoint;  ///< HF_ENDPOINT without a trailing '/', else https://huggingface.co
  std::string token;     ///< HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH (default
                         ///< HF_HOME/token), trimmed; empty: none. A secret: never printed or recorded.
  bool offline = false;  ///< HF_HUB_OFFLINE, or when it is unset or empty TRANSFORMERS_OFFLINE, true (1, ON, YES,
                         ///< TRUE): the cache only
  std::string offline_by;     ///< the variable that set `offline`, for messages
  long etag_timeout = 10;     ///< HF_HUB_ETAG_TIMEOUT: seconds for a file's HEAD
  long download_timeout = 10; ///< HF_HUB_DOWNLOAD_TIMEOUT: seconds a download may go without a byte
};

/// The endpoint as messages show it: without a user name or password written into it (user:pw@).
std::string shown_endpoint(const HubSettings& s);

/// The settings from the environment. Throws attnmap::Error naming the variable for a timeout that is not a
/// positive whole number, or a token holding a control character (a line break: it would end the header).
HubSettings hub_settings_from_env();

/// CACHE/models--ORG--NAME.
std::string hub_repo_folder(const HubSettings& s, const std::string& repo);

/// The commit refs/REV holds, or std::nullopt (no such file, or not a commit hash).
std::optional<std::string> read_hub_ref(const std::string& repo_folder, const std::string& revision);

/// Writes refs/REV = commit (no newline, as huggingface_hub) through a temporary file and a rename, when it
/// is not already so. A revision that is itself the commit is not written. Best effort: a read-only cache
/// is not an error.
void write_hub_ref(const std::string& repo_folder, const std::string& revision, const std::string& commit);

/// snapshots/COMMIT/FILE (FILE may hold '/').
std::string hub_snapshot_file(const std::string& repo_folder, const std::string& commit, const std::string& file);

/// Whether .no_exist/COMMIT/FILE says FILE is absent at COMMIT; mark_hub_absent writes it (best effort).
bool hub_known_absent(const std::string& repo_folder, const std::string& commit, const std::string& file);
void mark_hub_absent(const std::string& repo_folder, const std::string& commit, const std::string& file);

/// snapshots/COMMIT/FILE made a relative link to blobs/ETAG (../../blobs/ETAG, one more ../ per '/' in
/// FILE), replacing whatever was there. Throws attnmap::Error naming the link when it cannot be made.
void link_hub_snapshot(const std::string& repo_folder, const std::string& commit, const std::string& file,
                       const std::string& etag);

/// An exclusive flock on CACHE/.locks/models--ORG--NAME/ETAG.lock for its lifetime (the file is left, as
/// filelock leaves it). Waits for another process that holds it. Throws attnmap::Error naming the lock file
/// when it cannot be made.
class HubBlobLock {
 public:
  HubBlobLock(const HubSettings& s, const std::string& repo, const std::string& etag);
  ~HubBlobLock();
  HubBlobLock(const HubBlobLock&) = delete;
  HubBlobLock& operator=(const HubBlobLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace attnmap
