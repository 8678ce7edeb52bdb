// figure.hpp - the paper figure (issue 17; `attnmap figure IMAGES... --views photo,L3/mean,rollout -o FIG.pdf`,
// Python's Model.figure): rows = images, columns = views, column titles, row labels, colour bars in the maps'
// units; the views are maps/views.hpp's, the scales draw/scale.hpp's, the drawing draw/figures.hpp's
// write_comparison (docs/figures.md). The figure's settings arrive checked (FigurePlan: the command line's
// app/commands/figure_cmd.cpp check_figure_args); its lines say settings as {setting:id}.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "draw/figures.hpp"
#include "draw/scale.hpp"
#include "engine/batch_hooks.hpp"
#include "engine/outputs.hpp"
#include "engine/render.hpp"
#include "io/image_io.hpp"
#include "maps/views.hpp"
#include "model/classify.hpp"

namespace attnmap {

/// A figure's settings, checked: loading and drawing through RenderOptions (as render reads them: inputs,
/// weights - empty: the bundled model -, preprocessing, colour map, style, dpi, quiet, title, block numbering,
/// notes, the --labels file), the figure's own beside it.
struct FigurePlan {
  RenderOptions ro = no_legend();  ///< no NAME.png is written: no legend in the record
  std::string out;                 ///< the file to write (FIG.png | FIG.pdf | FIG.svg); empty for a figure in memory
  std::vector<ViewSpec> views;     ///< the columns, photo included
  ScaleSpec scale;
  ViewSettings settings;           ///< rollout's discard, gradcam's block
  ClassSpec classes;               ///< the class of the class-specific views
  StyleOptions style;
  double width_in = 6.5;
  std::optional<std::vector<std::string>> row_labels, column_labels;  ///< one per image / per view
};

/// The items of a --row-labels / --column-labels list: split at commas; "\," is a comma inside an item, "\\"
/// a backslash; an item may be empty (no label). Throws attnmap::Error for a backslash before anything else.
std::vector<std::string> split_label_list(const std::string& list);

/// The figure's rows from its inputs as given: a file as given (named twice: two rows), a folder walked and
/// sorted as render walks it (attnmap's own outputs passed over, with a note through `hooks`, LineStream::Err).
/// `failed` gets "PATH: why" for an input that does not exist or cannot be read. Throws attnmap::Error when
/// every input is missing or nothing is found (a usage error, exit 2).
std::vector<std::string> figure_input_files(const std::vector<std::string>& inputs, std::vector<std::string>* failed,
                                            const BatchHooks& hooks = terminal_hooks());

/// `attnmap figure`'s run once its settings are checked: -o (p.out) against the files the run reads, the
/// weights and the views (attnmap::Error, status 2, before any image is read), every image read (a file that
/// cannot be read or decoded: one line naming it, nothing written, returns 1), all views of each image from
/// one forward pass (compute_views), the maps on their scales (one scale per unit when the views' units
/// differ) and the one figure written with the settings record in it; its bytes are figure_in_memory's. Its
/// notes, warnings, errors and the closing "wrote" line go through hooks.on_line (LineStream::Err). Returns
/// 0 when the figure is written, 1 when an image failed or the figure could not be written.
int figure_to_file(const FigurePlan& p, const BatchHooks& hooks);

/// One image of a figure drawn in memory: its name (the row label and the record's images[].name, e.g.
/// "cat.jpg"), its decoded photo and the SHA-256 of the bytes it was decoded from (the record's).
struct FigurePhoto {
  std::string name;
  Image photo;
  std::string sha256;
};

/// The figure `attnmap figure` draws, in memory (issue 42).
struct FigureResult {
  std::vector<uint8_t> bytes;      ///< the file -o would hold, bit for bit (figure_to_file writes these bytes)
  std::string format;              ///< "png", "pdf" or "svg"
  std::string record;              ///< its settings record (JSON text): PNG tEXt `attnmap`, PDF Subject, SVG <metadata>
  /// What the command prints on standard error: whole lines ("attnmap: note: ..."), settings spelled
  /// (spelled_settings)
  std::vector<std::string> lines;
  /// The same notes and warnings whatever p.ro.quiet, for a front end to show in its own words: without
  /// "attnmap: " (a warning as "warning: ..."), settings as {setting:id} (Python's Figure.notes)
  std::vector<std::string> notes;
  std::string error;               ///< the drawing failed (figure_to_file: status 1); empty: drawn
  size_t images = 0, views = 0;    ///< rows and columns
};

/// The figure in memory: `p` as figure_to_file takes it (without p.out, its inputs and the weights:
/// `photos` are the rows, `model_for` gives the model prepared for p.ro, `weights_path` is what the record
/// names), every row's views computed and the figure drawn as a `format` file ("png", "pdf", "svg"). Throws
/// attnmap::Error (usage, status 2) for a bad format or views, InputFailure (status 1) when a row's maps or
/// the drawing fail.
FigureResult figure_in_memory(const FigurePlan& p, const std::string& format, std::vector<FigurePhoto> photos,
                              const ModelSource& model_for, const std::string& weights_path);

}  // namespace attnmap
