// cli_binding.hpp - attnmap.cli(args): the user's own command line run in process (run_command_line), its
// standard output and error captured line by line into Python callables (a notebook shows them under the
// running cell). The only place the module captures streams: every other call gets its results and lines
// from the engine (batch_binding.hpp, figures_binding.hpp).
#pragma once
#include <pybind11/pybind11.h>

#include <functional>
#include <shared_mutex>
#include <string>
#include <vector>

namespace attnmap_py {

namespace py = pybind11;

/// Runs `attnmap ARGS...` holding `engine_mu` alone, without the GIL; std::cout's lines to `out_sink(text)`
/// and std::cerr's to `err_sink(text)`, from whichever thread writes (a sink that raises loses its line).
/// `interrupted`: polled by a render before each image. Returns the exit status.
int run_cli(const std::vector<std::string>& args, py::object out_sink, py::object err_sink, std::shared_mutex& engine_mu,
            const std::function<bool()>& interrupted);

}  // namespace attnmap_py
