// command_line.hpp - attnmap's command line in process (main's work after its process set-up), and render's
// options parsed and checked alone, for a program that embeds attnmap (the Python module, python/).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/render.hpp"

namespace attnmap {

/// Runs one command line as main does: `args` is argv (args[0] the program name, then the command and its
/// options). Errors are printed to std::cerr ("attnmap: error: ..."), output to std::cout. Returns the exit
/// status: 0 all done, 1 some inputs failed, 2 usage or unusable weights. `cancelled` (may be empty): polled
/// by a render run before each image (an embedding program's Ctrl-C: BatchHooks::cancelled).
int run_command_line(const std::vector<std::string>& args, const std::function<bool()>& cancelled = {});

/// `attnmap render ARGS...` (`render_args`: what follows "render", the inputs included) parsed and checked as
/// the command line checks it, not run. Throws attnmap::Error with the command line's message (it names the
/// flags).
RenderOptions parse_render_command(const std::vector<std::string>& render_args);

}  // namespace attnmap
