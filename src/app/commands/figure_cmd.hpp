// figure_cmd.hpp - `attnmap figure IMAGES... --views photo,L3/mean,rollout -o FIG.pdf`: the paper figure
// (issue 17). Rows = images, columns = views, column titles, row labels, colour bars in the maps' units;
// the views are maps/views.hpp's, the drawing draw/figures.hpp's write_comparison (docs/figures.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/cli/model_args.hpp"
#include "engine/outputs.hpp"
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

/// Runs `attnmap figure`: checks every option, the -o path, the weights and the views (attnmap::Error,
/// status 2, before any image is read), reads every image (a file that cannot be read or decoded: one line
/// naming it on standard error, nothing written, returns 1), computes all views of each image from one
/// forward pass (compute_views), puts the maps on their scales (--scale; one scale per unit when the views'
/// units differ) and writes the one figure -o names, with the settings record in it. Returns 0 when the
/// figure is written, 1 when an image failed or the figure could not be written.
int run_figure(const FigureArgs& a);

/// One image of a figure drawn in memory: its name (the row label and the record's images[].name, e.g.
/// "cat.jpg"), its decoded photo and the SHA-256 of the bytes it was decoded from (the record's).
/// The figure's rows from its inputs as given: a file as given (named twice: two rows), a folder walked and
/// sorted as render walks it (attnmap's own outputs passed over, with a note on standard error). `failed` gets
/// "PATH: why" for an input that does not exist or cannot be read. Throws attnmap::Error when every input is
/// missing or nothing is found (a usage error, exit 2).
std::vector<std::string> figure_input_files(const std::vector<std::string>& inputs, std::vector<std::string>* failed);

struct FigurePhoto {
  std::string name;
  Image photo;
  std::string sha256;
};

/// The figure `attnmap figure` draws, in memory (issue 42).
struct FigureResult {
  std::vector<uint8_t> bytes;      ///< the file -o would hold, bit for bit (run_figure writes these bytes)
  std::string format;              ///< "png", "pdf" or "svg"
  std::string record;              ///< its settings record (JSON text): PNG tEXt `attnmap`, PDF Subject, SVG <metadata>
  std::vector<std::string> lines;  ///< what the command prints on standard error: whole lines ("attnmap: note: ...")
  std::string error;               ///< the drawing failed (run_figure: status 1); empty: drawn
  size_t images = 0, views = 0;    ///< rows and columns
};

/// `attnmap figure` in memory: `a` checked as run_figure checks it (without -o, its inputs and the weights:
/// `photos` are the rows, `model_for` gives the model prepared for the figure's RenderOptions, `weights_path`
/// is what the record names), every row's views computed and the figure drawn as a `format` file ("png",
/// "pdf", "svg"). Throws attnmap::Error (usage, status 2) for bad options or views, InputFailure (status 1)
/// when a row's maps or the drawing fail.
FigureResult figure_in_memory(const FigureArgs& a, const std::string& format, std::vector<FigurePhoto> photos,
                              const ModelSource& model_for, const std::string& weights_path);

}  // namespace attnmap
