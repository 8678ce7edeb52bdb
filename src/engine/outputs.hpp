// outputs.hpp - one image's outputs in memory (issue 42): the files `attnmap render` writes for an image -
// NAME.png with its legend, the panel, the strips, the heads grid, the .npy and its sidecar - as bytes with
// their records, drawn without touching the disk. The render writes exactly these bytes (draw_job_views:
// image_outputs, then io's atomic write of each), so a file on disk and the bytes a program gets are the same
// by construction. The explorer (--explore, a folder of files) is written by the render only.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/output_plan.hpp"
#include "engine/render.hpp"
#include "core/error.hpp"

namespace attnmap {

/// An input that cannot be read or used (an image, a row of a figure): the command line's exit status 1 for
/// it, where a plain Error is a usage error (status 2).
struct InputFailure : Error {
  using Error::Error;
};

/// The model of a run lent by the program that holds it (the Python module's Model): prepared for `opt`
/// (finish_run_model), with the backward pass's matrices when `backward`, as load_run_model does.
using ModelSource = std::function<std::shared_ptr<const ViTWeights>(const RenderOptions& opt, bool backward)>;

/// One image's files in memory and what the render reports of them.
struct ImageOutputs {
  /// In writing order: the figures (strips, heads grid, panel; each --figure-format), then each of the
  /// user's maps' files in plan order (its .npy and sidecar with --save-raw, then its PNG).
  std::vector<OutputFile> files;
  /// The render's result (terminal lines, statistics, top-5); `outputs` lists the paths the files would have,
  /// as the render lists them (the overlays first, then the figures; no sidecar, no explorer).
  RenderResult result;
  size_t explorer_at = 0;  ///< where in result.outputs the explorer's index.html goes when the render writes it
  OutputPlan plan;         ///< the image's planned files (with its classes known)
  std::string record;      ///< the image's settings record (the run's with its input_sha256)
};

/// Draws every file of one image from its computed maps into memory (nothing is written, no folder made).
/// `photo`: the decoded photo when cv holds none (--scale run); null: cv.photo, else job.input read again
/// (refused when its bytes changed since the maps were computed). The figures' and maps' records are the
/// run's (ctx.provenance) with the image's input_sha256. Throws attnmap::Error as the drawing does.
ImageOutputs image_outputs(const RenderContext& ctx, const Job& job, const ComputedViews& cv,
                           const Image* photo = nullptr);

/// One image rendered in memory from its decoded photo (a program's image: a file it read, an array):
/// its views computed (compute_photo_views; `input_sha256` goes into its record), with --scale run the scales
/// over this image's maps alone (ctx.run_scales and the record's scale_bounds, as a run of this one image),
/// then image_outputs. `settings`: the run's record (make_provenance of ctx); job.input names the image in
/// titles and messages, job.out_base the files' paths. Throws attnmap::Error as the render does.
ImageOutputs render_photo_outputs(const RenderContext& ctx, nlohmann::ordered_json settings, const Job& job,
                                  const Image& photo, const std::string& input_sha256);

/// The short name of an output's kind, as the Python module's records name it: "map", "npy", "sidecar",
/// "figure", "explore".
const char* output_kind_word(OutputKind kind);

}  // namespace attnmap
