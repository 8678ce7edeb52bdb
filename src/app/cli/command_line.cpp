// command_line.cpp - the command line in process: parse, check and run one command (run_command_line), as
// main does after its process set-up; and render's options parsed alone (parse_render_command) for a program
// that embeds attnmap (python/). The options layer (options.hpp, options_cli.cpp) parses and checks; the
// commands' mains (app/commands/) run the engine's work (engine/batch.cpp, eval/, inspect/, figure/, stats/).
#include "app/cli/command_line.hpp"

#include <filesystem>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <new>

#include "engine/batch.hpp"
#include "app/cli/cli_words.hpp"
#include "app/cli/flag_table.hpp"
#include "app/cli/flags.hpp"
#include "app/commands/download_cmd.hpp"
#include "app/commands/explore_cmd.hpp"
#include "engine/inspect/inspect.hpp"
#include "app/cli/options.hpp"
#include "engine/paths.hpp"
#include "engine/provenance.hpp"
#include "engine/session.hpp"
#include "checkpoint/weights.hpp"
#include "model/sgemm.hpp"
#include "core/error.hpp"
#include "io/image_io.hpp"

namespace {

// argv as main gets it, from strings (kept alive by `store`).
std::vector<char*> argv_of(std::vector<std::string>& store) {
  std::vector<char*> argv;
  for (std::string& s : store) argv.push_back(s.data());
  argv.push_back(nullptr);
  return argv;
}

// CLI11 reads "--layer=" (nothing after the '=') as the option given without a value and takes the next
// argument as its value ("--head= 2 IMG" meant head 2): an '=' with nothing after it is a usage error.
// The flag of the first such argument from args[first] on (up to "--"); "" when there is none.
std::string empty_equals_flag(const std::vector<std::string>& args, size_t first) {
  for (size_t i = first; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() > 3 && arg.compare(0, 2, "--") == 0 && arg.find('=') == arg.size() - 1)
      return arg.substr(0, arg.size() - 1);
  }
  return {};
}

// A first word that is not an option nor a command: say so (CLI11 reports "A subcommand is required").
// False (the error printed) for such a word.
bool check_command_word(CLI::App& app, int argc, char** argv) {
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc > 1 && argv[1] && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
    std::cerr << "attnmap: error: " << attnmap::printable(attnmap::unknown_command_text(app, argv[1])) << "\n";
    return false;
  }
  return true;
}

int run_inspect(const attnmap::CheckedRequest& r) {
  std::error_code ec;
  const std::string& p = r.inspect_weights;
  if (p.size() > 4 && p.compare(p.size() - 4, 4, ".png") == 0 && !std::filesystem::exists(p, ec))  // no weights name
    throw attnmap::Error(p + ": no such file (inspect reads a weights file or Hub name, or an output attnmap wrote)");
  if (attnmap::looks_like_output(p)) {  // a PNG or .npy render wrote: the settings that made it
    std::cout << attnmap::describe_output(p);
    return 0;
  }
  const attnmap::RunWeights rw = attnmap::run_weights(p, false, attnmap::terminal_hooks());  // a path, or a Hub name
  const attnmap::ViTWeights w = attnmap::load_weights(rw, r.inspect_overrides);
  std::cout << attnmap::describe_model(w, p);
  return 0;
}

// The command parsed on `app`: its settings through the door (make_request), then its run; throws
// attnmap::Error for a setting it refuses. `cancelled`: render's (BatchHooks::cancelled).
int run_command(const CLI::App& app, const std::function<bool()>& cancelled) {
  const CLI::App* cmd = nullptr;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; }))
    if (c->parsed()) cmd = c;
  const attnmap::CheckedRequest r = attnmap::make_request(cmd->get_name(), attnmap::given_settings(*cmd));
  if (r.command == "inspect") return run_inspect(r);
  if (r.command == "download") return attnmap::run_download(r.download_names, r.download_quiet);
  if (r.command == "explore") return attnmap::run_explore(r.ro);
  if (r.command == "figure") return attnmap::run_figure(r.figure);
  if (r.command == "stats") return attnmap::run_stats(r.stats);
  if (r.command == "eval") return attnmap::run_eval(r.eo);
  attnmap::BatchHooks hooks = attnmap::terminal_hooks();
  hooks.cancelled = cancelled;
  return attnmap::run_render(r.ro, r.bo, hooks);
}

}  // namespace

namespace attnmap {

namespace {

// `--flag=` with nothing after the '=': a flag that takes a value expects one; a switch takes none.
std::string empty_value_text(const std::string& flag) {
  const Flag* f = flag_spelled(flag);
  if (f && (f->traits & kSwitch)) return flag + " takes no value, found '=' (give " + flag + " alone)";
  return flag + " expects a value, found ''";
}

}  // namespace

int run_command_line(const std::vector<std::string>& args_in, const std::function<bool()>& cancelled) {
  CLI::App app{"attnmap - draws where a Vision Transformer's class token looks, as a heatmap over the photo",
               "attnmap"};
  // the version, and which kernels run the products on this CPU (as torch.__config__.show() tells a report)
  app.set_version_flag("--version", std::function<std::string()>([] {
                         return std::string("attnmap ") + ATTNMAP_VERSION + "\n" + gemm_description();
                       }));
  app.require_subcommand(1);
  CliArgs args;
  (void)add_commands(app, args);
  std::vector<std::string> store = args_in;
  if (store.empty()) store.push_back("attnmap");
  spell_flag_aliases(app, store);  // --colourmap: --colormap
  std::vector<char*> argv_v = argv_of(store);
  const int argc = static_cast<int>(store.size());
  char** argv = argv_v.data();

  if (const std::string flag = empty_equals_flag(store, 1); !flag.empty()) {  // a parse error: the command's help
    std::cerr << "attnmap: error: " << printable(empty_value_text(flag) +
                                                 help_hint(app, store.size() > 1 ? store[1] : ""))
              << "\n";
    return 2;
  }
  if (!check_command_word(app, argc, argv)) return 2;
  try {
    parse_command_line(app, store);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    const std::string command = store.size() > 1 ? store[1] : "";
    std::cerr << "attnmap: error: " << printable(spell_as_flags(usage_error_text(e, app, command))) << "\n";
    return 2;
  }
  try {
    return run_command(app, cancelled);
  } catch (const std::bad_alloc&) {
    std::cerr << "attnmap: error: out of memory before any image was rendered" << address_limit_note() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attnmap: error: " << printable(spell_as_flags(e.what())) << "\n";
    return 2;
  }
}

RenderOptions parse_render_command(const std::vector<std::string>& render_args) {
  CLI::App app{"attnmap", "attnmap"};
  app.require_subcommand(1);
  CliArgs args;
  const Commands commands = add_commands(app, args);
  std::vector<std::string> store{"attnmap", "render"};
  store.insert(store.end(), render_args.begin(), render_args.end());
  spell_flag_aliases(app, store);
  if (const std::string flag = empty_equals_flag(store, 2); !flag.empty()) throw Error(empty_value_text(flag));
  try {
    parse_command_line(app, store);
  } catch (const CLI::ParseError& e) {
    throw Error(spell_as_flags(parse_error_text(e, app)));
  }
  try {
    return make_request("render", given_settings(*commands.render)).ro;
  } catch (const Error& e) {
    throw Error(spell_as_flags(e.what()));
  }
}


}  // namespace attnmap
