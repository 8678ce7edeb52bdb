// run_figures.hpp - the figures of a whole run, drawn once its images are done (render --contact-sheet,
// --gallery): every input's overlay in a labelled grid, and a static HTML page of the run, both made from
// the run's manifest rows and the overlays on disk (never kept in memory through the run).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/batch_hooks.hpp"
#include "engine/batch_options.hpp"
#include "engine/paths.hpp"
#include "engine/render.hpp"

namespace attnmap {

/// One input of the run as the figures see it, in manifest order.
struct RunRow {
  std::string label;     ///< the sheet's first line: the input's file name (with its sub-folder in a walk)
  std::string manifest;  ///< the input's manifest line (JSON) as the run wrote it: status, outputs, statistics
};

/// Whether --contact-sheet or --gallery was asked for.
inline bool wants_run_figures(const BatchOptions& bopt) { return !bopt.contact_sheet.empty() || !bopt.gallery.empty(); }

/// The checks that need no model: --contact-sheet names a .png file, --sheet-columns >= 1 and only with
/// --contact-sheet, neither figure with --shard K/N for N > 1 (each shard sees only its part: draw them once
/// the shards are done, with a run without --shard and with --skip-existing). Throws attnmap::Error.
void check_run_figure_options(const BatchOptions& bopt);

/// The checks before any image is rendered (exit 2): the sheet's file can be written (check_figure_path),
/// is none of `reads` (inputs, the run's outputs, the weights, the manifest ...: check_output_file), and
/// neither it nor a page STEM-k.png beside it is an output of the run or a file attnmap did not write; the
/// gallery folder is not an existing file, its index.html can be written, is none of `reads` and is not a
/// page of someone else's, and no input or output of the run lies in its thumbs/ folder (nor the sheet);
/// neither lies inside an input folder outside --out (the next run would render them); the sheet's label
/// font is found (figure_font). Throws attnmap::Error naming the option and the path.
void check_run_figure_paths(const RenderOptions& opt, const BatchOptions& bopt, std::vector<ReadFile> reads);

/// The sheet's first line for an input: its file name, under the sub-folder its output mirrors
/// (out_base relative to out_dir), e.g. "sub/cat.jpg"; the input as given when out_base is not under out_dir.
std::string run_row_label(const std::string& input, const std::string& out_base, const std::string& out_dir);

/// After the run: the contact sheet (write_contact_sheet: each row's first output, the overlay, read back
/// from disk a page at a time, without the legend strip under its photo (the stats chunk's photo_px); a
/// failed input is a grey tile with its error; second line "top-1 p% · peak v" and " · flat" for a flat map,
/// from the manifest's statistics; the colour bar of sheet_scale, its record's "colour_bars" entry with the
/// rows' largest map_max and how many clip) and the gallery (write_gallery, one GalleryEntry per row from its
/// manifest fields; subtitle: the weights and the view of `settings`, the run's record). Says the paths
/// written on standard output unless opt.quiet, an error line for a figure that could not be written (`hooks`).
/// Returns 0, or 1 when a figure could not be written.
/// The contact sheet's colour bar: `scale` the one every overlay of the run is drawn on (--scale run: the
/// first view's unit's run scale; --scale VMIN,VMAX: the bounds), unset when each overlay has its own
/// min-max; `cmap` the run's colour map (null: no bar, e.g. --threshold's masks).
struct SheetScale {
  std::optional<Scale> scale;
  const uint8_t* cmap = nullptr;
};
int write_run_figures(const RenderOptions& opt, const BatchOptions& bopt, const std::vector<RunRow>& rows,
                      const nlohmann::json& settings, const std::string& provenance, const SheetScale& sheet_scale,
                      const BatchHooks& hooks);

/// The sheet's colour bar for the run of `ctx`: the scale of the overlays it shows (the first view's) when
/// they share one (--scale run or VMIN,VMAX; with clip_max when some row's map_max lies above the top); no
/// scale otherwise, no colour map with --threshold.
SheetScale sheet_scale(const RenderContext& ctx, const std::vector<RunRow>& rows);

}  // namespace attnmap
