// options.hpp - the options layer (issue 25): every command's flags are parsed and checked here, once, into
// checked option structs (RenderOptions, BatchOptions, EvalOptions, FigureArgs' plan). The stages below name
// no flag in their errors: a parser here runs them and puts the flag in front (as ripgrep's argument layer
// does). cli.cpp keeps main, command_line.cpp the dispatch; the flags themselves are app/cli/flag_table.cpp's.
#pragma once
#include <array>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "engine/batch_options.hpp"
#include "app/commands/eval_cmd.hpp"
#include "app/commands/figure_cmd.hpp"
#include "engine/render.hpp"
#include "app/commands/stats_cmd.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"

namespace CLI {
class App;
}

namespace attnmap {

// A command's settings as given, stored by make_request (app/cli/request.cpp) before they are checked.
struct CliArgs {
  RenderOptions ro;
  BatchOptions bo;
  std::string shard_s;
  std::string layer_s, head_s, upsample_s = "bilinear", resize_s = "squash", mean_s, std_s, size_s, discard_s,
      threshold_s, pos_interp_s, precision_s;
  std::vector<std::string> strip_v;  // --strip, repeatable
  std::string layers_s;               // --layers all
  std::string query_s, column_s;      // --query TOKEN, --column r<row>c<col>
  bool received = false;              // --received
  std::string key_s;                  // --key: the state dict inside a torch.save checkpoint
  std::string act_s, pool_s;          // --act, --pool: settings a checkpoint cannot hold
  std::string class_s, gradcam_layer_s;  // --class, --gradcam-layer (with --explain)
  std::string colormap_s = "viridis", views_s, explain_s;  // --colormap, --views, --explain (parsed into ro)
  std::string scale_s, style_s = "overlay", dpi_s, formats_s = "png", width_in_s, strip_columns_s;
  std::string title_s, block_numbering_s;  // --title (may be given as '': no title), --block-numbering 0|1
  int heads = 0;
  long long max_pixels = static_cast<long long>(ro.load.max_pixels);  // signed: "-1" must not wrap to "no limit"
  bool no_exif = false;
  EvalOptions eo;
  std::string fusions_s;   // eval --fusions (empty: not given, mean)
  std::string perturb_s;  // eval --perturb drop|zero
  std::string inspect_weights;
  int inspect_heads = 0;
  FigureArgs figure;  // attnmap figure (app/commands/figure_cmd.cpp, engine/figure/)
  std::string budget_s, explore_blocks_s;  // --budget-mb, --explore-blocks (explore, render --explore)
  bool no_npy = false;                     // explore --no-npy
  StatsArgs stats;    // attnmap stats (app/commands/stats_cmd.cpp, engine/stats/)
  TextArgs text;                              // --text, --texts, --prompt, --vocab, --truncate-text
  std::vector<std::string> download_names;  // attnmap download NAME... (app/commands/download_cmd.cpp)
  bool download_quiet = false;
};


/// The commands as CLI11 holds them, made from the flag registry (add_commands).
struct Commands {
  CLI::App* render;
  CLI::App* eval;
  CLI::App* inspect;
  CLI::App* figure;
  CLI::App* explore;  ///< app/commands/explore_cmd.cpp
  CLI::App* stats;
  CLI::App* download;  ///< app/commands/download_cmd.cpp
};

/// Adds every command and its options to `app`, made from the flag registry (app/cli/flag_table.cpp; the
/// settings are read back with given_settings, not bound to `a`, which stays for the callers that hold one).
Commands add_commands(CLI::App& app, CliArgs& a);

/// Parses `args` (argv as main gets it: the program, the command, its arguments) on `app`. CLI11 hands what
/// follows "--" to the parent app once a command's list of inputs holds a value ("render a.png -o d --
/// b.png": "b.png not expected"); then the tokens after "--" are parsed again as a hidden option of the
/// command that given_settings appends to its inputs, in order. Throws CLI::ParseError as CLI::App::parse.
void parse_command_line(CLI::App& app, std::vector<std::string> args);

/// For render and eval (`eval`), the settings stored in `a` by make_request (`given`: the ids given): parses
/// and checks every option into a.ro, a.bo and a.eo (the checked structs the commands run with). Throws
/// attnmap::Error naming settings as {setting:id}.
void check_command(CliArgs& a, const std::set<std::string>& given, bool eval);

/// inspect's heads / key / act / pool as the loader's overrides. Throws attnmap::Error naming the setting.
ModelOverrides inspect_overrides(const CliArgs& a, const std::set<std::string>& given);

/// An integer in [-1000000, 1000000]; throws attnmap::Error "FLAG expects an integer, found 'S'".
int parse_int_option(const std::string& flag, const std::string& s);
/// A finite or infinite number as strtod reads it, the whole string; throws "FLAG expects a number, found 'S'".
double parse_number_option(const std::string& flag, const std::string& s);
/// "R,G,B": three finite float numbers; with `positive` (--std) each > 0 with a reciprocal that fits a float.
std::array<float, 3> parse_rgb_option(const std::string& flag, const std::string& s, bool positive = false);
/// "S" -> (S, S); "W,H" -> (W, H): positive pixel counts up to 65536.
std::array<int, 2> parse_size_option(const std::string& flag, const std::string& s);
/// --heads N: a positive head count (returned); throws "--heads must be positive, found N".
int checked_heads(int n);
/// squash | crop.
ResizeMode parse_resize_option(const std::string& flag, const std::string& s);


/// --block-numbering's value: "0" or "1" (the number figures give the first block). Throws naming the flag.
int parse_block_numbering(const std::string& s);

}  // namespace attnmap
