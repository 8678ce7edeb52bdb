// stats_cmd.cpp - `attnmap stats` on the command line: its settings as given checked into the engine's
// StatsPlan (check_stats_args), then the engine's run (engine/stats/) with the terminal's hooks.
#include "app/commands/stats_cmd.hpp"

#include <algorithm>

#include "app/cli/options.hpp"
#include "engine/batch.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "draw/canvas.hpp"
#include "draw/colormap.hpp"
#include "draw/figures.hpp"
#include "engine/walk.hpp"

namespace attnmap {

StatsPlan check_stats_args(const StatsArgs& a) {
  StatsPlan p;
  RenderOptions& ro = p.ro;
  ro.inputs = a.inputs;
  ro.out_dir = a.out;
  apply_model_input(a.model, ro);
  ro.colormap = with_prefix(setting_ref("colormap"), [&] { return parse_colormap(a.colormap); });
  ro.alpha = a.alpha;
  if (a.max_pixels < 1) throw Error(setting_ref("max_pixels") + " must be >= 1, found " + std::to_string(a.max_pixels));
  ro.load.max_pixels = static_cast<uint64_t>(a.max_pixels);
  ro.load.apply_exif = !a.no_exif;
  ro.quiet = a.quiet;
  ro.names_classes = false;  // stats names no class: no note on the head's class names
  ro.dpi = a.dpi;
  p.formats = with_prefix(setting_ref("figure_format"), [&] { return parse_figure_formats(a.formats); });
  ro.figure_formats = p.formats;
  check_drawing_options(ro);
  if (!(a.width_in > 0.0 && a.width_in <= 100.0))
    throw Error(setting_ref("width_in") + " must be in (0, 100] inches, found " + shown_number(a.width_in));
  const bool vector = std::any_of(p.formats.begin(), p.formats.end(), [](FigureFormat f) { return f != FigureFormat::Png; });
  check_figure_width(a.width_in, a.dpi, vector ? "; its PDF and SVG figures are laid out in the same pixels at " +
                                                     setting_ref("dpi") + " and held to the same limit"
                                               : "");
  if (!(a.outlier_k > 0.0 && a.outlier_k < 1e6))
    throw Error(setting_ref("outlier_k") + " must be a positive number, found " + shown_number(a.outlier_k));
  if (a.bins < 1 || a.bins > 10000) throw Error(setting_ref("bins") + " must be in 1..10000, found " + std::to_string(a.bins));
  if (a.jobs < 0)  // render's words (check_batch_options)
    throw Error(setting_ref("jobs") + " must be >= 1 (or 0 for the number of cores), found " + std::to_string(a.jobs));
  p.bo.jobs = a.jobs;
  p.bo.ext = parse_extensions(a.ext);
  p.bo.manifest = a.manifest;
  p.dpi = a.dpi;
  p.width_in = a.width_in;
  p.outlier_k = a.outlier_k;
  p.norm_block = a.norm_block;
  p.bins = a.bins;
  p.notes = a.notes;
  p.style.alpha = ro.alpha;
  p.style.cmap = ro.colormap.table;
  figure_font();  // a missing font is one usage error, not a failure after every image
  check_batch_options(ro, p.bo);  // as render's, before the model loads: -o an input folder, the --manifest name
  return p;
}

int run_stats(const StatsPlan& p) { return compute_stats(p, terminal_hooks()); }

}  // namespace attnmap
