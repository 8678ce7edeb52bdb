// figure_cmd.hpp - `attnmap figure IMAGES... --views photo,L3/mean,rollout -o FIG.pdf` on the command line
// (issue 17): its settings as given (FigureArgs, stored by make_request) checked into the engine's FigurePlan,
// and its run. The figure itself is the engine's (engine/figure/figure.hpp, docs/figures.md).
#pragma once
#include <string>
#include <vector>

#include "app/cli/model_args.hpp"
#include "engine/figure/figure.hpp"

namespace attnmap {

/// `attnmap figure` as given on the command line (or as Python's keywords), before it is checked.
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
  TextArgs text;                    ///< --text, --texts, --prompt, --vocab, --truncate-text: a CLIP's texts
};

/// Every check that needs no model and reads no image (status 2): the options into the engine's FigurePlan,
/// the views and what goes with them, the words (--row-labels split, counted later against the images;
/// --column-labels one per view), the label font; with `with_out` (the command line; a figure in memory has
/// none) -o's extension and folder too. Throws attnmap::Error naming settings as {setting:id}.
FigurePlan check_figure_args(const FigureArgs& a, bool with_out = true);

/// Runs `attnmap figure` on its checked settings (make_request's check_figure_args): the engine's
/// figure_to_file with terminal_hooks() (its lines on standard error). Returns 0 when the figure is written, 1
/// when an image failed or the figure could not be written; throws attnmap::Error for a usage error (status 2).
int run_figure(const FigurePlan& p);

}  // namespace attnmap
