// manifest.hpp - the run's manifest (render --manifest FILE.jsonl, docs/provenance.md): a header line with
// the run's settings, then one row per input (Outcome, manifest_line) written in input order as the images
// finish (Manifest); and the rows of earlier manifests, read back by a --skip-existing run so that a skipped
// image keeps its statistics and the status and time of the run that made it (earlier_manifests,
// read_previous_rows).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/batch_options.hpp"
#include "engine/provenance.hpp"
#include "engine/render.hpp"

namespace attnmap {

/// The run that made a skipped image's outputs, as an earlier manifest recorded it.
struct MadeBy {
  std::string status;  ///< that row's status ("done")
  double milliseconds = 0;
};

/// What happened to one input; becomes one manifest line.
struct Outcome {
  std::string input;
  std::string status;  // what this run did: "done" | "failed" | "skipped"
  std::string error;
  std::vector<std::string> outputs;
  double milliseconds = 0;
  std::optional<MapStats> stats;
  std::vector<std::pair<std::string, float>> top5;  // with a classifier head
  std::string shown;                    // the terminal line after "INPUT -> " (empty: outputs.front())
  std::vector<std::string> shown_more;  // lines under it (--explain --class topK: one per class)
  /// A skipped image whose outputs an earlier run made: that run's status and time, which the manifest line
  /// shows instead of this run's "skipped" and milliseconds, with "carried": true.
  std::optional<MadeBy> made_by;
};

/// One manifest object: input, outputs, status, error, milliseconds, carried, then the statistics
/// (put_image_stats). Fields are documented in docs/provenance.md ("The manifest"); per-image results come
/// from RenderResult, so a new field there (e.g. top-5 classes) is one more line here.
std::string manifest_line(const Outcome& o);

/// The manifest's first line for this run: {"attnmap_manifest": 1, "settings": {...}, "shard": "K/N",
/// "out": DIR, "rows": n, "started": "YYYY-MM-DDTHH:MM:SSZ"}.
std::string manifest_header(const nlohmann::ordered_json& settings, const RenderOptions& opt, const BatchOptions& bopt,
                            size_t rows);

/// The manifest: this run's header, then its lines in input order, each with one write(2) as soon as every
/// earlier input has finished. The file is opened for appending, never truncated while the run goes on, so
/// an interrupted run leaves every earlier run's rows and its own complete lines (a resume reads them back:
/// read_previous_rows); compact() then rewrites it atomically with this run's block alone. An empty path:
/// no file, every call does nothing.
/// Refuses (attnmap::Error naming `flag_value`, the path as given) a --manifest path that exists, is not empty and
/// does not start with a manifest's header line ({"attnmap_manifest": ...}): a manifest replaces only a manifest,
/// never a file of the user's.
void check_replaceable_manifest(const std::string& path, const std::string& flag_value);

class Manifest {
 public:
  /// Opens (creates) `path` for n rows and appends `header`. Throws attnmap::Error when it cannot be created.
  Manifest(const std::string& path, size_t n, const std::string& header);
  ~Manifest();
  Manifest(const Manifest&) = delete;
  Manifest& operator=(const Manifest&) = delete;
  /// Records input i's line; called with the run's lock held. Returns an error message when writing failed.
  std::string put(size_t i, std::string line);
  /// At the end of a run that was not interrupted: the file becomes this run's header and rows alone,
  /// written to a temporary file and renamed over it. Returns an error message, or "".
  std::string compact();

 private:
  void write_all(const std::string& l);

  std::string path_;
  int fd_ = -1;
  off_t start_ = 0;  // where this run's header starts
  std::vector<std::string> lines_;
  std::vector<char> ready_;
  size_t next_ = 0;
  std::string failed_;
};

/// What earlier manifests recorded for one input.
struct PrevRow {
  std::optional<ImageStats> stats;   ///< the statistics and top-5 of its last row that has them
  std::optional<MadeBy> made_by;     ///< its last "done" row: the run that rendered it (or the one that row carried)
  std::vector<std::string> outputs;  ///< the files that "done" row lists, as written
};

/// The manifests a --skip-existing run reads back, oldest first (modification time, then path): the run's
/// own --manifest file `manifest_path` when it exists, and for a run without --shard (`shard_count` 1: the
/// step that draws the sheet and gallery once the shards are done) every shard manifest in the --out folder
/// `out_dir` and in `manifest_path`'s folder: a regular file named *.jsonl whose first line is the header of
/// a run with --shard K/N, N > 1. A shard itself reads its own manifest only. Unreadable folders and files
/// are passed over.
std::vector<std::string> earlier_manifests(const std::string& manifest_path, const std::string& out_dir,
                                           int shard_count);

/// The rows of the earlier manifests at `paths` (in that order: a later file's row wins) that were made
/// with `settings` (the header above them has the same settings: same_settings), by input; within a file
/// the last row of an input wins, field by field (the statistics of the last row that has them, the status
/// and time of the last "done" row). Rows with neither, rows under another run's settings or under no
/// header (a manifest of an attnmap that wrote none), and lines that are not JSON (a line cut short) are
/// passed over. A missing or unreadable file: none of its rows.
std::map<std::string, PrevRow> read_previous_rows(const std::vector<std::string>& paths, const nlohmann::json& settings);

}  // namespace attnmap
