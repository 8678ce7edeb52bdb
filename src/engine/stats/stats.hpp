// stats.hpp - per-head statistics over images (issue 27; `attnmap stats IMAGES... -o DIR`): per block and head,
// the mean attention distance, attention entropy and the class token's attention to the prefix tokens; per
// block the token norms and their high-norm outliers. The maths is maps/head_stats.hpp's, the plots
// draw/plots.hpp's; the run walks the inputs, runs the model once per image (-j workers), aggregates and
// writes CSV, JSON, the figures and one outlier map per image (docs/stats.md). stats.cpp: the run;
// stats_report.cpp: the tables, JSON and figures. The settings arrive checked (StatsPlan: the command line's
// app/commands/stats_cmd.cpp check_stats_args).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "draw/canvas.hpp"
#include "draw/figures.hpp"
#include "engine/batch_hooks.hpp"
#include "engine/batch_options.hpp"
#include "engine/render.hpp"
#include "maps/head_stats.hpp"

namespace attnmap {

/// A stats run's settings, checked: loading and the outlier maps' drawing through RenderOptions (inputs, the
/// output folder, weights - empty: the bundled model -, preprocessing, colour map, alpha, dpi, figure formats,
/// quiet), the batch's (-j, --ext, --manifest), and the statistics' own.
struct StatsPlan {
  RenderOptions ro = no_legend();  ///< no NAME.png is written: no legend in the record
  BatchOptions bo;                 ///< jobs, ext, manifest
  StyleOptions style;              ///< the outlier maps' overlay
  std::vector<FigureFormat> formats;
  double dpi = 300.0, width_in = 6.5;
  double outlier_k = 5.0;  ///< a high-norm outlier: norm > median + k * 1.4826 * MAD
  int norm_block = -1;     ///< the block of the histogram and the outlier maps (-1: the last)
  int bins = 50;           ///< of the histogram
  bool notes = false;      ///< the figures' definitions drawn under them (issue 28)
};

/// One image's statistics: per block its head statistics and its token norms (T) with their summary.
struct ImageStatsResult {
  std::string input;
  std::string error;                   ///< non-empty: the image failed (settings spelled: it goes into files)
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
  bool notes = false;                     ///< each figure's definition drawn under it
  FigureOptions figures;                  ///< formats, dpi, the record
  std::string out_dir;
  nlohmann::ordered_json record;          ///< the run's settings record
};

/// Runs stats once its settings are checked: the inputs walked (nothing to compute: attnmap::Error, status 2,
/// before the model loads), the model loaded once, each image computed on -j workers (its outlier map
/// written, its manifest row), then heads.csv, heads_per_image.csv, norms.csv, stats.json, the
/// attention-distance figure and the token-norm histogram written from the images that succeeded. Every line
/// - each image's "INPUT -> MAP" or error as it ends, notes, the closing "wrote" line - goes through
/// hooks.on_line (LineStream::Err), settings as {setting:id}. Returns 0 when every image was done, 1 when
/// some failed (or an output could not be written).
int compute_stats(const StatsPlan& p, const BatchHooks& hooks);

/// Writes the run's tables, JSON and figures from the images (failed ones are listed, not aggregated) into
/// run.out_dir; returns the paths written. Throws attnmap::Error when a file cannot be written. (stats_report.cpp)
std::vector<std::string> write_stats_report(const StatsRun& run, const std::vector<ImageStatsResult>& images);

/// Every file write_stats_report may write in `out_dir` (its tables, stats.json, its two figures in each
/// of `formats`): what a --manifest must not replace.
std::vector<std::string> stats_report_paths(const std::string& out_dir, const std::vector<FigureFormat>& formats);

}  // namespace attnmap
