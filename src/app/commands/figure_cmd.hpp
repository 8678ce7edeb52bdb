// figure_cmd.hpp - `attnmap figure IMAGES... --views photo,L3/mean,rollout -o FIG.pdf`: the paper figure
// (issue 17). Rows = images, columns = views, column titles, row labels, colour bars in the maps' units;
// the views are maps/views.hpp's, the drawing draw/figures.hpp's write_comparison (docs/figures.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/cli/model_args.hpp"
#include "io/image_io.hpp"

namespace CLI {
class App;
}

namespace attnmap {

/// `attnmap figure` as given on the command line, before it is checked (bound by add_figure_options).
struct FigureArgs {
  std::vector<std::string> inputs;  ///< image files (one row each, in this order), or folders walked as render
                                    ///< walks them (sorted)
  std::string views;                ///< --views, as maps/views.hpp parses them
  std::string out;                  ///< -o: FIG.png | FIG.pdf | FIG.svg
  ModelInputArgs model;             ///< -w (empty: the bundled model), --key, --heads, --act, --pool, --size, ...
  std::string scale = "run";        ///< --scale run | figure | map | VMIN,VMAX
  double width_in = 6.5;            ///< --width-in
  double dpi = 300.0;               ///< --dpi
  std::string colormap = "viridis", style = "overlay", upsample = "bilinear";
  float alpha = 0.5f;
  bool alpha_by_value = false;
  std::string discard;              ///< rollout views' --discard
  std::string class_spec;           ///< --class N | NAME | top1, for the class-specific views
  std::string gradcam_layer;        ///< gradcam without @L: its block
  long long max_pixels = static_cast<long long>(LoadOptions{}.max_pixels);
  bool no_exif = false;
  bool quiet = false;
  // Words the author chooses (issue 28).
  std::string title;                ///< --title: a title on top ("": none, the default)
  std::string row_labels;           ///< --row-labels: one per image, comma-separated (\, a comma); unset: file names
  std::string column_labels;        ///< --column-labels: one per view; unset: the views' labels
  std::string block_numbering;      ///< --block-numbering 0|1 (unset: 0)
  bool notes = false;               ///< --notes: draw the note (--scale map's) under the figure
  std::string labels;               ///< --labels FILE: the classifier's class names
};

/// The items of a --row-labels / --column-labels list: split at commas; "\," is a comma inside an item, "\\"
/// a backslash; an item may be empty (no label). Throws attnmap::Error for a backslash before anything else.
std::vector<std::string> split_label_list(const std::string& list);

/// Adds the `figure` subcommand and its options to `app`, bound to `a`. Returns the subcommand.
CLI::App* add_figure_options(CLI::App& app, FigureArgs& a);

/// Runs `attnmap figure`: checks every option, the -o path, the weights and the views (attnmap::Error,
/// status 2, before any image is read), reads every image (a file that cannot be read or decoded: one line
/// naming it on standard error, nothing written, returns 1), computes all views of each image from one
/// forward pass (compute_views), puts the maps on their scales (--scale; one scale per unit when the views'
/// units differ) and writes the one figure -o names, with the settings record in it. Returns 0 when the
/// figure is written, 1 when an image failed or the figure could not be written.
int run_figure(const FigureArgs& a);

}  // namespace attnmap
