// stats_cmd.hpp - `attnmap stats IMAGES... -o DIR` on the command line (issue 27): its settings as given
// (StatsArgs, stored by make_request) checked into the engine's StatsPlan, and its run. The statistics, the
// run over the images and the report are the engine's (engine/stats/stats.hpp, docs/stats.md).
#pragma once
#include <string>
#include <vector>

#include "app/cli/model_args.hpp"
#include "engine/stats/stats.hpp"

namespace attnmap {

/// `attnmap stats` as given on the command line, before it is checked.
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

/// Every check that needs no model and reads no image (status 2): the settings into the engine's StatsPlan,
/// the label font. Throws attnmap::Error naming settings as {setting:id}.
StatsPlan check_stats_args(const StatsArgs& a);

/// Runs `attnmap stats` on its checked settings (make_request's check_stats_args): the engine's compute_stats
/// with terminal_hooks() (its lines
/// on standard error). Returns 0 when every image was done, 1 when some failed (or an output could not be
/// written); throws attnmap::Error for a usage error or unusable weights (status 2).
int run_stats(const StatsPlan& p);

}  // namespace attnmap
