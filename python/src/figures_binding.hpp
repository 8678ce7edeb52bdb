// figures_binding.hpp - overlay(), panel(), figure() and evaluate() on the engine's results in memory (issue 42):
// one image's files as bytes with their records (engine/outputs.hpp), the figure command's figure
// (figure_in_memory), eval's report (eval_report). No argv, no temporary folder, no captured output. The
// module's bindings (attnmap_module.cpp) pass the model (ModelSource) and the settings as given (make_request).
#pragma once
#include <pybind11/pybind11.h>

#include <shared_mutex>
#include <string>
#include <vector>

#include "app/cli/flags.hpp"
#include "app/commands/figure_cmd.hpp"
#include "engine/outputs.hpp"

namespace attnmap_py {

namespace py = pybind11;

/// One image's outputs (render's files for it) as a list of dicts: kind ("map", "npy", "sidecar", "figure"),
/// view (the view's name; "" for a figure), class (the class a class-specific map explains, else None),
/// format ("png", "pdf", "svg", "npy", "json"), name (the file's name as render writes it: NAME.png,
/// NAME.panel.pdf, ...), data (bytes) and record (its settings record, JSON text; "" none). `opt`: render's
/// request; `weights_name`: what the record names; `input`: the image's name in titles (a path, or NAME.png for
/// an array); `out_base`: the files' stem. The computation runs without the GIL, under `engine_mu` shared.
py::list image_output_list(const attnmap::RenderOptions& opt, const attnmap::ModelSource& model,
                           const std::string& weights_name, const attnmap::Image& photo, const std::string& sha256,
                           const std::string& input, const std::string& out_base, std::shared_mutex& engine_mu);

/// The figure command's figure in memory: {"data": bytes, "format", "record" (JSON text), "lines", "notes" (the
/// figure's notes and warnings, settings spelled as keywords)}. `p`: the figure's checked request
/// (make_request("figure")); `photos` its rows. Errors as figure_in_memory's.
py::dict figure_output(attnmap::FigurePlan p, const std::string& format,
                       std::vector<attnmap::FigurePhoto> photos, const attnmap::ModelSource& model,
                       const std::string& weights_name, std::shared_mutex& engine_mu);

/// eval's report in memory: {"report": JSON text, "text": the standard output's lines, "status": 0 or 1,
/// "errors": the error lines (without "attnmap: error: ")}. `given`: eval's settings (make_request("eval")).
py::dict eval_output(const attnmap::GivenSettings& given, const attnmap::ModelSource& model,
                     std::shared_mutex& engine_mu);

}  // namespace attnmap_py
