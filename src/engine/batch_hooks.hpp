// batch_hooks.hpp - what the program that starts a batch run (`attnmap render` over many inputs, run_render)
// hands it as a parameter: the model when it holds one in memory, a sink for each input's row, progress,
// cancellation, and where the run's terminal text goes (standard output and standard error kept apart). The
// command line's (terminal_hooks) print as attnmap always has; the Python module's pass rows and lines to
// Python (python/src/batch_binding.cpp).
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "engine/outputs.hpp"
#include "engine/render.hpp"

namespace attnmap {

/// Where a piece of a run's text goes on a terminal.
enum class LineStream {
  Out,  ///< standard output: each image's "INPUT -> FILE" lines, the run figures' paths
  Err,  ///< standard error: notes, warnings, errors, the progress lines off a terminal, the summary
  Bar,  ///< the progress bar, redrawn in place on standard error (hooks with progress_bar only); "" clears it
};

/// One input's row of a run, as its manifest has it (docs/provenance.md "The manifest").
struct BatchRow {
  size_t index = 0;    ///< its place in the manifest: inputs in sorted order, failures found while planning first
  std::string input;   ///< the input as the run names it
  std::string status;  ///< what this run did: "done", "skipped" or "failed" (a carried row's json says "done")
  std::string json;    ///< the manifest line (a JSON object, without its newline)
};

/// A batch run's hooks; every member may be empty.
struct BatchHooks {
  /// The model of the run, lent by the program (outputs.hpp's ModelSource: prepared for `opt`): -w
  /// (opt.weights) is then not read, only named in the records. Empty: load_run_model of -w.
  ModelSource model;
  /// Each input's row as it ends, in the order they end (under the run's lock): every input the run's manifest
  /// lists (failures found while planning in shard 1 only), also without --manifest.
  std::function<void(const BatchRow& row)> on_row;
  /// After each image (under the run's lock): images ended, images of the run, the input, its status.
  std::function<void(size_t done, size_t total, const std::string& input, const std::string& status)> on_progress;
  /// Polled before each image: true stops the run after the images under way (their files complete, the
  /// manifest keeps its rows and is not compacted, no run figures); run_render then returns 1.
  std::function<bool()> cancelled;
  /// The run's text: one whole line (no newline) for Out and Err, the bar's state for Bar; settings named as
  /// {setting:id} (core/setting_ref.hpp), which the front end spells. Empty: nothing shown.
  std::function<void(LineStream stream, const std::string& text)> on_line;
  bool progress_bar = false;  ///< progress as a redrawn bar (Bar), not a line every few images (Err)
};

/// The command line's hooks: Out lines to std::cout, Err lines to std::cerr (each with its newline, settings
/// spelled as flags: spell_as_flags), the bar
/// redrawn on std::cerr ("\r\033[K" before it) when standard error is a terminal; no model, rows or cancel.
BatchHooks terminal_hooks();

/// `text` through hooks.on_line (nothing when it is empty).
void say(const BatchHooks& hooks, LineStream stream, const std::string& text);

/// Whether the hooks say the run is cancelled.
inline bool batch_cancelled(const BatchHooks& hooks) { return hooks.cancelled && hooks.cancelled(); }

/// A run's progress on standard error, through the hooks: a redrawn bar (progress_bar), else a plain line
/// every `every` images ("attnmap: 30/100 images, 4.2 images/s, ETA 0:17"). Calls with the run's lock held.
class BatchProgress {
 public:
  BatchProgress(const BatchHooks& hooks, size_t total, bool enabled, int every);
  /// Clears the bar so that a line can be printed on a clean line.
  void clear();
  /// One more image ended: `processed` of them so far, `skipped` of those skipped.
  void tick(size_t processed, size_t skipped);

 private:
  const BatchHooks& hooks_;
  size_t total_;
  bool enabled_, bar_;
  size_t every_ = 1;
  bool shown_ = false;
  std::chrono::steady_clock::time_point t0_, last_{};
};

}  // namespace attnmap
