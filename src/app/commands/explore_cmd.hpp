// explore_cmd.hpp - attnmap explore on the command line: its settings' checks and its main (the run is the
// engine's explore_image, engine/explore.hpp; docs/explore.md).
#pragma once
#include <set>
#include <string>

#include "engine/render.hpp"

namespace attnmap {

struct CliArgs;

/// attnmap explore's checks of its settings as stored in `a` by make_request (app/cli/request.cpp; `given`:
/// the ids given; the model and preprocessing settings are render's). Throws attnmap::Error naming settings.
void check_explore_options(CliArgs& a, const std::set<std::string>& given);

/// --budget-mb and --explore-blocks into `ro` (shared by explore and render --explore).
void apply_explore_budget(const std::string& budget, const std::string& blocks, RenderOptions& ro);

/// attnmap explore's main: explore_image with the terminal's hooks (0 written, 1 the image failed). Throws
/// attnmap::Error for usage or unusable weights (exit 2).
int run_explore(const RenderOptions& ro);

}  // namespace attnmap
