// eval_cmd.cpp - `attnmap eval` on the command line: the engine's run (engine/eval/) with the terminal's hooks.
#include "app/commands/eval_cmd.hpp"

#include "engine/batch_hooks.hpp"

namespace attnmap {

int run_eval(const EvalOptions& opt) { return eval_report(opt, terminal_hooks()).status; }

}  // namespace attnmap
