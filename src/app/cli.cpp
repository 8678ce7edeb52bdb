// cli.cpp - main and the dispatch: the options layer (options.hpp, options_cli.cpp) parses and checks the
// command line; the commands do the work (batch.cpp, eval_cmd.cpp, inspect.cpp, figure_cmd.cpp).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <new>

#include "app/batch.hpp"
#include "app/explore.hpp"
#include "app/inspect.hpp"
#include "app/options.hpp"
#include "app/paths.hpp"
#include "app/provenance.hpp"
#include "app/session.hpp"
#include "checkpoint/weights.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"

namespace {

// CLI11 reads "--layer=" (nothing after the '=') as the option given without a value and takes the next
// argument as its value ("--head= 2 IMG" meant head 2): an '=' with nothing after it is a usage error.
// False (the error printed) for such an argument.
bool check_no_empty_equals(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i] ? argv[i] : "";
    if (arg == "--") break;
    if (arg.size() > 3 && arg.compare(0, 2, "--") == 0 && arg.find('=') == arg.size() - 1) {
      std::cerr << "attnmap: error: " << attnmap::printable(arg.substr(0, arg.size() - 1)) << " expects a value, found ''\n";
      return false;
    }
  }
  return true;
}

// A first word that is not an option nor a command: say so (CLI11 reports "A subcommand is required").
// False (the error printed) for such a word.
bool check_command_word(CLI::App& app, int argc, char** argv) {
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc > 1 && argv[1] && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
    std::string names;
    for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
    std::cerr << "attnmap: error: unknown command '" << attnmap::printable(argv[1]) << "' (commands: " << names
              << "; attnmap --help)\n";
    return false;
  }
  return true;
}

int run_inspect(const attnmap::CliArgs& a, const CLI::App& inspect) {
  if (attnmap::looks_like_output(a.inspect_weights)) {  // a PNG or .npy render wrote: the settings that made it
    std::cout << attnmap::describe_output(a.inspect_weights);
    return 0;
  }
  const attnmap::ViTWeights w = attnmap::load_model(a.inspect_weights, attnmap::inspect_overrides(a, inspect));
  std::cout << attnmap::describe_model(w, a.inspect_weights);
  return 0;
}

// Runs the parsed command; throws attnmap::Error for an option value it refuses.
int run_command(attnmap::CliArgs& a, const attnmap::Commands& c) {
  if (c.inspect->parsed()) return run_inspect(a, *c.inspect);
  if (c.explore->parsed()) {
    attnmap::check_explore_options(a, *c.explore);
    return attnmap::run_explore(a.ro);
  }
  if (c.figure->parsed()) {
    attnmap::refuse_empty_values(*c.figure);
    return attnmap::run_figure(a.figure);
  }
  if (c.stats->parsed()) {
    attnmap::refuse_empty_values(*c.stats);
    return attnmap::run_stats(a.stats);
  }
  attnmap::check_command(a, c);
  if (c.eval->parsed()) return attnmap::run_eval(a.eo);
  return attnmap::run_render(a.ro, a.bo);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 0 && argv[0]) attnmap::set_program_path(argv[0]);  // --json/--manifest never replace the program
  attnmap::install_interrupt_cleanup();  // Ctrl-C or a kill leaves no temporary file beside the outputs
  CLI::App app{"attnmap - draws where a Vision Transformer's class token looks, as a heatmap over the photo"};
  app.set_version_flag("--version", std::string("attnmap ") + ATTNMAP_VERSION);
  app.require_subcommand(1);
  attnmap::CliArgs args;
  const attnmap::Commands commands = attnmap::add_commands(app, args);

  if (!check_no_empty_equals(argc, argv) || !check_command_word(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "attnmap: error: " << attnmap::printable(attnmap::with_flags(e.what())) << " (attnmap --help for the options)\n";
    return 2;
  }
  try {
    return run_command(args, commands);
  } catch (const std::bad_alloc&) {
    std::cerr << "attnmap: error: out of memory before any image was rendered" << attnmap::address_limit_note() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attnmap: error: " << attnmap::printable(attnmap::with_flags(e.what())) << "\n";
    return 2;
  }
}
