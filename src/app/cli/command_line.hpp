// command_line.hpp - attnmap's command line in process (main's work after its process set-up), and render's
// options parsed and checked alone, for a program that embeds attnmap (the Python module, python/).
#pragma once
#include <string>
#include <vector>

#include "app/engine/render.hpp"

namespace attnmap {

/// Runs one command line as main does: `args` is argv (args[0] the program name, then the command and its
/// options). Errors are printed to std::cerr ("attnmap: error: ..."), output to std::cout. Returns the exit
/// status: 0 all done, 1 some inputs failed, 2 usage or unusable weights.
int run_command_line(const std::vector<std::string>& args);

/// `attnmap render ARGS...` (`render_args`: what follows "render", the inputs included) parsed and checked as
/// the command line checks it, not run. Throws attnmap::Error with the command line's message (it names the
/// flags).
RenderOptions parse_render_command(const std::vector<std::string>& render_args);

/// The long flags of a command ("render", "eval", "figure", "inspect", "stats", "explore"), "--help" aside,
/// as its option table declares them ("--views", "--skip-existing", ...). Throws attnmap::Error for an
/// unknown command.
std::vector<std::string> command_flags(const std::string& command);

/// Of command_flags, the switches: the flags that take no value ("--rollout", "--panel", "--skip-existing").
std::vector<std::string> command_switches(const std::string& command);

}  // namespace attnmap
