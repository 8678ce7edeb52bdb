// stats_cmd.hpp - `attnmap stats IMAGES... -o DIR` (issue 27): per block and head, the mean attention
// distance, attention entropy and the class token's attention to the prefix tokens; per block the token norms
// and their high-norm outliers. The maths is maps/head_stats.hpp's, the plots draw/plots.hpp's; this command
// walks the inputs, runs the model once per image (-j workers), aggregates and writes CSV, JSON, the figures
// and one outlier map per image (docs/stats.md).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/batch_options.hpp"
#include "app/cli/model_args.hpp"
#include "engine/render.hpp"
#include "draw/figures.hpp"
#include "maps/head_stats.hpp"

namespace CLI {
class App;
}

namespace attnmap {

/// `attnmap stats` as given on the command line (bound by add_stats_options), before it is checked.
struct StatsArgs {
  std::vector<std::string> inputs;
  std::string out;                       ///< -o DIR
  ModelInputArgs model;                  ///< -w, --key, --heads, --act, --pool, --size, --pos-interp, --resize, --mean, --std
  std::string formats = "png";           ///< --figure-format
  std::string manifest;                  ///< --manifest FILE.jsonl
  std::vector<std::string> ext;          ///< --ext
  std::string colormap = "viridis";
  float alpha = 0.5f;
  double dpi = 300.0, width_in = 6.5;
  double outlier_k = 5.0;                ///< --outlier-k
  int norm_block = -1;                   ///< --norm-block: the block of the histogram and the outlier maps
  int bins = 50;                         ///< --bins of the histogram
  int jobs = 0;                          ///< -j
  long long max_pixels = static_cast<long long>(LoadOptions{}.max_pixels);
  bool no_exif = false, quiet = false;
  bool notes = false;                    ///< --notes: the figures' definitions drawn under them (issue 28)
};

/// One image's statistics: per block its head statistics and its token norms (T) with their summary.
struct ImageStatsResult {
  std::string input;
  std::string error;                   ///< non-empty: the image failed
  double milliseconds = 0;
  std::vector<BlockHeadStats> blocks;  ///< (L)
  std::vector<std::vector<float>> norms;  ///< (L, T): the residual stream's token norms after each block
  std::vector<NormSummary> norm_summary;  ///< (L)
  std::string outlier_map;             ///< the outlier map's path, when written
};

/// What the report needs besides the images: the token layout, the names, the settings.
struct StatsRun {
  TokenLayout layout;
  int depth = 0, num_registers = 0;
  std::vector<std::string> prefix_names;  ///< prefix_token_names
  int norm_block = 0;                     ///< resolved, 0-based
  double outlier_k = 5.0;
  int bins = 50;
  double width_in = 6.5;
  bool notes = false;                     ///< --notes: each figure's definition drawn under it
  FigureOptions figures;                  ///< formats, dpi, the record
  std::string out_dir;
  nlohmann::ordered_json record;          ///< the run's settings record
};

/// Runs `attnmap stats`: options checked (attnmap::Error, status 2, before any image), the model loaded once,
/// each image computed on -j workers, then heads.csv, heads_per_image.csv, norms.csv, stats.json, the
/// attention-distance figure and the token-norm histogram written from the images that succeeded. Returns 0
/// when every image was done, 1 when some failed (or an output could not be written).
int run_stats(const StatsArgs& a);

/// Writes the run's tables, JSON and figures from the images (failed ones are listed, not aggregated) into
/// run.out_dir; returns the paths written. Throws attnmap::Error when a file cannot be written. (stats_report.cpp)
std::vector<std::string> write_stats_report(const StatsRun& run, const std::vector<ImageStatsResult>& images);

}  // namespace attnmap
