// flag_table.hpp - the flag registry's table (flag_table.cpp) as the command line's code reads it: one Flag
// per setting (id, spelling, commands, traits, help topic, value name, number check), its help texts per
// command (FlagText), the commands' own words, the other spellings accepted and the flags suggested for
// other tools' words. flags.hpp is the registry's interface for the rest of attnmap.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace attnmap {

struct GivenSetting;

/// What a number setting reads: Int a whole number in int's range, Long in long long's, Block a whole number
/// or "last" (read as -1: blocks count from the end), Float a number as strtod reads it.
enum class Number { None, Int, Long, Block, Float };

/// The commands, one bit each (Flag::commands).
enum CommandBit : unsigned {
  kRender = 1u << 0,
  kEval = 1u << 1,
  kInspect = 1u << 2,
  kFigure = 1u << 3,
  kExplore = 1u << 4,
  kStats = 1u << 5,
  kDownload = 1u << 6,
};

/// A setting's traits (Flag::traits).
enum FlagTrait : unsigned {
  kSwitch = 1u << 0,      ///< takes no value
  kRepeat = 1u << 1,      ///< may be given several times, one value each (--strip, --ext)
  kModel = 1u << 2,       ///< makes the model (Python: load() / from_state_dict())
  kForward = 1u << 3,     ///< chooses or computes the maps (Python: Model.forward() takes it)
  kByCall = 1u << 4,      ///< the Python functions set it themselves
  kNegated = 1u << 5,     ///< the flag turns off what the keyword names (--no-exif: exif=False)
  kPositional = 1u << 6,  ///< the command's argument (INPUT...), not a flag
};

/// One setting of the registry.
struct Flag {
  const char* id;       ///< the setting id, snake_case: "max_pixels" ({setting:max_pixels} in messages)
  const char* names;    ///< the command line's spelling, "-j,--jobs"; a positional: its name, "inputs"
  const char* keyword;  ///< the Python keyword when it is not the id ("classes"); "" = the id
  unsigned commands;    ///< CommandBit mask
  unsigned traits;      ///< FlagTrait mask
  unsigned required;    ///< CommandBit mask of the commands that require it
  const char* topic;    ///< the help's topic (kTopics)
  const char* value;    ///< the value's name in the help (INT, PATH, LIST ...); "" for a switch
  Number number;        ///< a number's check
  const char* expects;  ///< a number: what it is, in "expected <expects>, found 'X'"
};

/// A setting's help for some of its commands; "{setting:id}" spelled, "{colormaps}", "{view_grammar}" and
/// "{render}" (render's text of the setting) filled in when the help is printed.
struct FlagText {
  const char* id;
  unsigned commands;  ///< CommandBit mask
  const char* help;
  const char* shown_default;  ///< "(default X)" in the help; "" none
  const char* value;          ///< the value's name for these commands when not the Flag's; nullptr
};

/// One command: its name, its one line, its further reading, its argument's usage name.
struct CommandWords {
  const char* name;
  unsigned bit;
  const char* description;
  const char* docs;
  const char* usage;       ///< "INPUT...", "IMAGE"
  const char* positional;  ///< the argument's name in CLI11 ("inputs", "image")
};

/// The help's topics, in the order it lists them.
const std::vector<std::string>& help_topics();
/// Every setting, in the registry's order (the help's order within a topic, unless the command has its own).
const std::vector<Flag>& all_flags();
/// The settings of the command `bit` in the order its help lists them (and CLI11 holds them): the argument
/// first, then by topic in help_topics()' order; within a topic the command's own order where the table
/// gives one (the order each command's help had before the registry), else the registry's.
std::vector<const Flag*> flags_in_help_order(unsigned bit);
/// Every command, in the order the top help lists them.
const std::vector<CommandWords>& all_commands();
/// The command named `name`; nullptr when none.
const CommandWords* command_named(const std::string& name);
/// The setting `id`; nullptr when none.
const Flag* flag_of(const std::string& id);
/// The setting spelled `flag` ("--jobs", "-j", or an accepted alias "--colourmap"); nullptr when none.
const Flag* flag_spelled(const std::string& flag);
/// The long flag of a setting: "--jobs"; a positional: its name.
std::string long_flag(const Flag& f);
/// The help text of `f` for the command `bit` (placeholders filled, settings spelled as flags).
std::string help_of(const Flag& f, unsigned bit);
/// The default shown in `f`'s help for the command `bit` ("" none).
std::string shown_default_of(const Flag& f, unsigned bit);
/// The value name of `f` for the command `bit`.
std::string value_name_of(const Flag& f, unsigned bit);
/// Other spellings a flag is accepted under: {alias, the flag} ("--colourmap", "--colormap").
const std::vector<std::pair<std::string, std::string>>& flag_aliases();
/// What users of other tools type, and the flag meant: {"--cmap", "--colormap"}.
const std::vector<std::pair<std::string, std::string>>& flag_suggestions();

/// A number setting's check of `s`: "" for a well-formed value (an empty one is left to the empty-value
/// check), else "expected <expects>, found 'S'". A whole number is rewritten in decimal (CLI11 would read
/// "010" as octal), a block's "last" as -1.
std::string number_check(const Flag& f, std::string& s);

/// The settings given on the command line to the parsed command `cmd` (CLI11's results), in the registry's
/// order: a switch without values, a repeatable setting one value per time given.
std::vector<GivenSetting> given_settings(const CLI::App& cmd);

}  // namespace attnmap
