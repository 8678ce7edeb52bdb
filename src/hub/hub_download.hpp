// hub_download.hpp - one blob into the cache, as huggingface_hub's _download_to_tmp_and_move and http_get do
// it: under the blob's lock, into blobs/ETAG.incomplete, resumed with Range after a cut connection (and by a
// later run), checked against its etag, renamed into place.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "hub/hub_cache.hpp"

namespace attnmap {

/// How to fetch: `quiet` no progress and no download lines; `progress_bar` a bar on the terminal (stderr);
/// `cancelled` (may be empty) polled before each request, as bytes arrive and while none do (about once a
/// second): true stops the fetch (an embedding program's Ctrl-C), the partial download kept for the next run
/// with every byte received (empty when none came: the next run starts it from byte 0).
struct HubFetchOptions {
  bool quiet = false;
  bool progress_bar = false;
  std::function<bool()> cancelled;
};

/// What a file's HEAD said of it.
struct HubFileMeta {
  std::string file;      ///< the repository path, e.g. "model.safetensors"
  std::string commit;    ///< X-Repo-Commit
  std::string etag;      ///< X-Linked-Etag (LFS: the sha256) or ETag (a git blob sha1), without quotes or W/
  std::string url;       ///< where the bytes are: Location of a redirect, else the resolve URL
  int64_t size = 0;      ///< X-Linked-Size, else Content-Length
  bool lfs = false;      ///< X-Linked-Etag was given: etag is the content's sha256
};

/// Puts the blob of `m` into `repo_folder`/blobs/ETAG unless it is there, under HubBlobLock (a second process
/// waits, then finds the blob). `label` names the file in messages and on the progress line ("ORG/NAME
/// model.safetensors"). The token goes only to the endpoint's own server (a CDN redirect gets none). Returns
/// the bytes downloaded (0: the blob was there).
/// Throws attnmap::Error naming `label` when: the disk has too little room for the file or a write fails (the
/// .incomplete file is removed), the connection is cut more than 5 times in a row (the .incomplete file is
/// kept: a later run resumes it), o.cancelled says so (kept too), the server answers an error or the request
/// fails for good (an unsupported redirect), more bytes come than announced, or the bytes do not match the
/// etag (sha256 for LFS files, git's blob sha1 else; the download is discarded).
int64_t download_hub_blob(const HubSettings& s, const std::string& repo, const std::string& repo_folder,
                          const HubFileMeta& m, const std::string& label, const HubFetchOptions& o);

/// Whether an etag can name a blob file: 1-128 of [A-Za-z0-9_-] (a server's header is never a path).
bool valid_hub_etag(const std::string& etag);

/// git's blob id of a file, sha1("blob <size>\0" + content): the ETag the Hub gives a file not stored in LFS.
/// Throws attnmap::Error naming `path` when SHA-1 cannot be computed.
std::string git_blob_sha1(const std::string& path);

/// "12.3 MB" (decimal units, as huggingface_hub's tqdm shows them).
std::string hub_size_text(int64_t bytes);

}  // namespace attnmap
