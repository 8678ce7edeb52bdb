// model_args.hpp - the model and preprocessing settings of figure and stats: their text as given (stored by
// make_request, app/cli/request.cpp), checked by apply_model_input (app/cli/options_cli.cpp).
#pragma once

#include <string>

namespace attnmap {

struct RenderOptions;

/// -w, --key, --heads, --act, --pool, --size, --pos-interp, --resize, --mean, --std, --precision as written.
struct ModelInputArgs {
  std::string weights, key, heads, act, pool, size, pos_interp, mean, std, precision;
  std::string resize = "squash";
};

/// Parses and checks them into ro (weights, resize, size, pos_interp, overrides). Throws attnmap::Error naming
/// the flag.
void apply_model_input(const ModelInputArgs& a, RenderOptions& ro);

}  // namespace attnmap
