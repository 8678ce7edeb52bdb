// provenance.hpp - the settings that made an output, recorded in it (PNG tEXt, .npy sidecar) and in the
// manifest's header, so that --skip-existing keeps only outputs made as the run would make them.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/render.hpp"

namespace attnmap {

/// The PNG tEXt keyword under which the record is stored (one JSON object, ASCII).
inline constexpr const char* kProvenanceKeyword = "attnmap";

/// The record of what changes an output's pixels or .npy values, built once per run (docs/provenance.md):
/// attnmap_version; weights (the file's name, or the Hub name ORG/NAME, informative only) and weights_sha256
/// (SHA-256 of its bytes, as `sha256sum` prints it), hub ({repo, revision, commit}: a Hub name's, issue 40), weights_configs (config.json / preprocessor_config.json read beside the
/// weights: name -> SHA-256), layout; view named as eval names views ("L1/h3", "L3/mean", "rollout",
/// "rollout L0-2/max discard 0.9"), discard and threshold (null when unused); size [width, height] of the
/// model input; resize ("squash" | "crop") and crop_pct (null for squash); mean, std (as used, after
/// --mean/--std); colormap, alpha, upsample; scale ("map": each map min-max normalised for display); exif;
/// all_heads. Floats are written as the shortest decimal that reads back as the same float. Throws
/// attnmap::Error when the weights cannot be read for hashing.
nlohmann::ordered_json make_provenance(const RenderContext& ctx, const std::string& weights_path);

/// A Hub name as records write it: {"repo", "revision", "commit"} (the provenance record's and eval --json's
/// "hub").
nlohmann::ordered_json hub_ref_json(const HubRef& hub);

/// The shortest decimal that reads back as the same float, as a JSON number (0.6f -> 0.6, not 0.60000002).
nlohmann::ordered_json float_json(float v);

/// The record as stored: one line of ASCII JSON (non-ASCII characters as \uXXXX escapes).
std::string provenance_text(const nlohmann::ordered_json& record);

/// One image's record: the run's record text with its last key "input_sha256", the SHA-256 of the input
/// file's bytes that were decoded (so --skip-existing redoes an image whose input changed under the same
/// name). An empty run record (nothing recorded) stays empty.
std::string image_provenance(const std::string& run_record, const std::string& input_sha256);

/// Whether two records describe the same outputs: every key equal except "weights" and "hub" (names: the
/// weights' hash says what they are;
/// the same content under another path makes the same outputs) and a figure's "colour_bars" (results: what
/// its bars hide, not how it was made).
bool same_settings(const nlohmann::json& a, const nlohmann::json& b);

/// What differs between an output's record and the run's, for a note: "colormap viridis -> inferno,
/// alpha 0.5 -> 0.6"; "no settings recorded" when `was` is not a record.
std::string settings_change(const nlohmann::json& was, const nlohmann::json& now);

/// The record stored in a PNG (tEXt `attnmap`), or nullopt when there is none or it is not a JSON object.
std::optional<nlohmann::json> read_png_provenance(const std::string& png);

/// The record a figure carries: a PNG's tEXt `attnmap`, an SVG's <metadata id="attnmap">, a PDF's Subject;
/// nullopt when the file has none (not attnmap's, or not a figure), cannot be read or is not a record.
std::optional<nlohmann::json> read_figure_record(const std::string& path);

/// NAME.npy -> NAME.npy.json, the .npy's record (numpy's np.load refuses extra keys in the .npy header).
std::string npy_sidecar_path(const std::string& npy);

/// The record in a sidecar file, or nullopt when the file is missing, unreadable or not a record (a JSON
/// object with "attnmap_version"): such a file was not written by attnmap.
std::optional<nlohmann::json> read_sidecar(const std::string& sidecar);

/// The PNG tEXt keyword of the image's own statistics (one JSON object: the manifest row's map_max,
/// argmax_row, argmax_col, entropy and top5), so a resumed run's manifest row of a skipped image has them.
inline constexpr const char* kStatsKeyword = "attnmap:stats";

/// One image's map statistics and top-5 classes (empty without a classifier head).
struct ImageStats {
  MapStats stats;
  std::vector<std::pair<std::string, float>> top5;
};

/// Puts the manifest's statistics fields into `j`: map_max, argmax_row, argmax_col, entropy (null when the
/// entropy is undefined), max_over_mean (the map's contrast, null when undefined) and flat (max_over_mean
/// below kFlatMaxOverMean = 1.25: a nearly uniform map), all null without `stats`; top5 ([{"label", "probability"}...], null when empty).
void put_image_stats(nlohmann::ordered_json& j, const std::optional<MapStats>& stats,
                     const std::vector<std::pair<std::string, float>>& top5);

/// Reads those fields back (doubles and floats exactly as written); nullopt when map_max is not a number.
std::optional<ImageStats> get_image_stats(const nlohmann::json& j);

/// The statistics a PNG carries (tEXt `attnmap:stats`), or nullopt.
std::optional<ImageStats> read_png_stats(const std::string& png);

/// `attnmap inspect` on an output: the record of a PNG, or of a .npy (its sidecar) or a sidecar itself,
/// pretty-printed (several lines ending with a newline). Throws attnmap::Error when the file has none.
std::string describe_output(const std::string& path);

/// True when `path` starts like a PNG or ends in .npy / .npy.json (inspect then describes an output).
bool looks_like_output(const std::string& path);

}  // namespace attnmap
