// batch_binding.hpp - attnmap.render_folder's batch run (run_render) with Python's hooks (issue 42): each
// input's row, the progress callback and the run's lines passed to Python callables as the run makes them,
// a callback's exception kept and raised once the run has returned. No argv, no captured output, no
// manifest read back. The module's binding (attnmap_module.cpp, Model.render_folder) lends the model.
#pragma once
#include <pybind11/pybind11.h>

#include <functional>
#include <shared_mutex>
#include <string>

#include "app/cli/flags.hpp"
#include "engine/outputs.hpp"

namespace attnmap_py {

namespace py = pybind11;

/// The Python callables of a render_folder run: `progress(done, total, input, status)` after each image (None:
/// none), `on_line(stream, text)` for every line the run prints ("out", "err", or "bar": the progress bar's
/// new state, "" clears it; settings spelled as flags, as the command line prints them), `on_row(index,
/// json_text)` as each input's manifest row is made (index: its place in the manifest).
struct BatchCallbacks {
  py::object progress, on_line, on_row;
};

/// render's settings as given (`given`: make_request("render")) run by run_render with `model` lent and hooks
/// that call `calls` with the GIL acquired; `progress_bar`: the progress as a bar (a terminal) rather than lines.
/// The run holds `engine_mu` alone, without the GIL. Cancelled when a callback raised (that exception is raised
/// when the run has returned) or `interrupted()`. Returns the exit status (0, or 1: an input failed or the run
/// was cancelled); throws attnmap::Error for a run refused before any image (exit 2).
int run_batch(const attnmap::GivenSettings& given, const attnmap::ModelSource& model, const BatchCallbacks& calls,
              bool progress_bar, std::shared_mutex& engine_mu, const std::function<bool()>& interrupted);

/// The settings of `command` as the Python module reads them (settings_of): one dict each, with the keys
/// id, keyword, flag, is_switch, makes_model, repeatable, negated, forward, set_by_call.
py::list settings_list(const std::string& command);

}  // namespace attnmap_py
