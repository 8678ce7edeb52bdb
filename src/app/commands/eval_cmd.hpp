// eval_cmd.hpp - `attnmap eval` on the command line: run_eval, the engine's eval (engine/eval/eval.hpp:
// EvalOptions, eval_report) with the terminal's hooks.
#pragma once

#include "engine/eval/eval.hpp"

namespace attnmap {

/// Runs `attnmap eval` (eval_report with terminal_hooks()): the per-image lines and the summary tables on
/// standard output, notes and errors on standard error, the JSON report with opt.json_out. Returns 0 when
/// every image was evaluated, 1 when some failed (each printed with its reason) or none was found. Throws
/// attnmap::Error for unusable weights or options (the caller exits with status 2).
int run_eval(const EvalOptions& opt);

}  // namespace attnmap
