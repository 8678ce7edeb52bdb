// hub_fetch.hpp - a Hub model's files in the cache: found there, or fetched as huggingface_hub's
// hf_hub_download fetches them (file_download.py), only the files attnmap reads.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hub/hub_cache.hpp"
#include "hub/hub_download.hpp"
#include "hub/hub_name.hpp"

namespace attnmap {

/// A model's snapshot in the cache.
struct HubSnapshot {
  std::string folder;                ///< CACHE/models--ORG--NAME/snapshots/COMMIT: read as a model folder
  HubRef ref;                        ///< name, revision asked for, commit
  std::vector<std::string> files;    ///< the repository files it holds for attnmap (weights, shards, configs)
  std::vector<std::string> notes;    ///< e.g. "the Hub could not be reached ...: the cached snapshot is used"
  int64_t downloaded_bytes = 0;      ///< bytes fetched by this call (0: all from the cache)
};

/// The weights of `name` (the first of kHubWeightsFiles the repository has, with a sharded index's shards)
/// and its side configs (kHubConfigFiles it has), from the cache or fetched into it:
/// - offline (s.offline): the cache only, no connection attempted;
/// - a revision that is a commit whose files the cache has (or knows absent): no request;
/// - else one HEAD per file (/ORG/NAME/resolve/REV/FILE, the commit the first answer names for every later
///   file), and the blobs the cache lacks downloaded (hub_download.hpp); a Hub that cannot be reached (no
///   answer, 429, 5xx) falls back to the cached snapshot of that revision with a note.
/// Throws attnmap::Error (its message starts with the name) for a gated, private or unknown repository, an
/// unknown revision, a repository without weights attnmap reads (its files listed when the API answers), a
/// failed download (hub_download.hpp) or a name neither reachable nor cached.
HubSnapshot fetch_hub_model(const HubName& name, const HubSettings& s, const HubFetchOptions& o);

/// Every file of a snapshot folder checked against its blob's name (sha256 for a 64-hex name, git's blob sha1
/// for a 40-hex one; each file read once): "" when all match, else hub_blob_mismatch's message for the first
/// that does not. For `attnmap download` and for a load that failed on a cached file.
std::string hub_snapshot_damage(const std::string& folder);

/// The Hub name of a snapshot folder given as a path (CACHE/models--ORG--NAME/snapshots/COMMIT): repository
/// ORG/NAME, revision and commit COMMIT; std::nullopt for any other path.
std::optional<HubRef> hub_snapshot_ref(const std::string& path);

/// When `path` (a file a load read) is a cache blob named by a sha256 (CACHE/.../blobs/<64 hex>, through its
/// snapshot link) and `sha256` (of the bytes read) is not that name: a message saying the cache is damaged and
/// which blob to delete. "" otherwise.
std::string hub_blob_mismatch(const std::string& path, const std::string& sha256);

}  // namespace attnmap
