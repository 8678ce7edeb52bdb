// model_args.hpp - the model and preprocessing options of the commands with an option table of their own
// (figure, stats): their text as given, added and checked by one pair of functions (app/options_cli.cpp).
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace attnmap {

struct RenderOptions;

/// -w, --key, --heads, --act, --pool, --size, --pos-interp, --resize, --mean, --std, --precision as written.
struct ModelInputArgs {
  std::string weights, key, heads, act, pool, size, pos_interp, mean, std, precision;
  std::string resize = "squash";
};

/// Adds those options to `cmd` (help texts "as for render"), bound to `a`.
void add_model_input_options(CLI::App* cmd, ModelInputArgs& a);

/// Parses and checks them into ro (weights, resize, size, pos_interp, overrides). Throws attnmap::Error naming
/// the flag.
void apply_model_input(const ModelInputArgs& a, RenderOptions& ro);

}  // namespace attnmap
