// cli_words.hpp - the command line's words (issue 41), for every command, read from the flag registry
// (app/cli/flag_table.hpp: each option's topic, value name and number check, the accepted spellings such as
// --colourmap, the flags suggested for other tools' words): the help laid out by topic in lines of at most 100
// columns, did-you-mean for an unknown flag or command, and CLI11's parse errors in attnmap's words.
#pragma once
#include <string>
#include <vector>

namespace CLI {
class App;
class Error;
}  // namespace CLI

namespace attnmap {

/// The widest help line, in columns.
constexpr size_t kHelpWidth = 100;

/// After the commands are made from the registry (add_commands, which gives each option its topic, value name
/// and number check): `app` and its commands get the help formatter, their help options' words and topic, and
/// each command its further reading.
void dress_commands(CLI::App& app);

/// `args` (argv as strings: the program, the command, its options) with each accepted spelling of a flag
/// (--colourmap, --colourmap=X) written as the flag the command declares (--colormap), up to "--".
void spell_flag_aliases(const CLI::App& app, std::vector<std::string>& args);

/// A CLI11 parse error of `app` in attnmap's words, without the help hint: an unknown flag with the nearest
/// one ("unknown option --view; did you mean --views?"), a number that is none, a missing value, a missing
/// argument. Unknown flags are named before any other error (a mistyped flag is usually the cause).
std::string parse_error_text(const CLI::Error& e, const CLI::App& app);

/// A parse error's line as the command line prints it: parse_error_text and the help hint for `command` (the
/// word after the program).
std::string usage_error_text(const CLI::Error& e, const CLI::App& app, const std::string& command);

/// The hint after a usage error: " (attnmap render --help for the options)" for the command `command`,
/// " (attnmap --help for the commands)" when `command` is not one of `app`'s.
std::string help_hint(const CLI::App& app, const std::string& command);

/// An unknown command word: "unknown command 'rendr'; did you mean 'render'? (commands: render, ...;
/// attnmap --help)"; for "" the line for no command at all.
std::string unknown_command_text(const CLI::App& app, const std::string& word);

/// Each command's options that the tables give no help topic, as "command --flag" (a test keeps it empty).
/// Hidden options (group "", not in the help: the inputs after "--") are not counted.
std::vector<std::string> options_without_topic(const CLI::App& app);

}  // namespace attnmap
