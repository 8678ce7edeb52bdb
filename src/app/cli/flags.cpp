// flags.cpp - the flag registry's spellings and the command line set up from it (flags.hpp): each setting's
// flag and keyword, the settings of a command for the Python module, CLI11's commands and options made from
// flag_table.cpp's rows, and CLI11's results as GivenSettings.
#include "app/cli/flags.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>

#include "app/cli/cli_words.hpp"
#include "app/cli/flag_table.hpp"
#include "app/cli/options.hpp"
#include "core/error.hpp"

namespace attnmap {

std::string flag_spelling(const std::string& id) {
  if (const Flag* f = flag_of(id)) return long_flag(*f);
  std::string name = id;
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

std::string keyword_spelling(const std::string& id) {
  const Flag* f = flag_of(id);
  return f && *f->keyword ? f->keyword : id;
}

namespace {
// The engine's texts (files, notes) spell settings as the command line does, whichever front end runs it:
// the registry is linked into both (core/setting_ref.hpp set_setting_speller).
[[maybe_unused]] const bool kSpellerSet = (set_setting_speller(&flag_spelling), true);
}  // namespace

std::string spell_as_flags(const std::string& text) {
  return spell_settings(text, flag_spelling);
}

namespace {

// Whether `text` from `at` is " PLACEHOLDER": a space and an upper-case word ("H", "R,G,B") that ends there.
bool placeholder_follows(const std::string& text, size_t at) {
  if (at + 1 >= text.size() || text[at] != ' ' || !std::isupper(static_cast<unsigned char>(text[at + 1])))
    return false;
  size_t q = at + 1;
  const auto in_word = [](char c) {
    return std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
           c == '_' || c == ',';
  };
  while (q < text.size() && in_word(text[q])) ++q;
  return q == text.size() || !(std::isalnum(static_cast<unsigned char>(text[q])) || text[q] == '-');
}

}  // namespace

std::string spell_as_keywords(const std::string& text) {
  constexpr char end = '\x1e';  // marks where a spelled setting ends
  const std::string marked =
      spell_settings(text, [](const std::string& id) { return keyword_spelling(id) + end; });
  std::string out;
  for (size_t i = 0; i < marked.size(); ++i) {
    if (marked[i] != end) {
      out += marked[i];
    } else if (placeholder_follows(marked, i + 1)) {  // "give {setting:heads} H" as Python writes it: heads=H
      out += '=';
      ++i;
    }
  }
  return out;
}

std::vector<SettingInfo> settings_of(const std::string& command) {
  const CommandWords* c = command_named(command);
  if (!c) throw Error("no command '" + command + "'");
  std::vector<SettingInfo> out;
  for (const Flag& f : all_flags()) {
    if (!(f.commands & c->bit) || (f.traits & kPositional)) continue;
    SettingInfo s;
    s.id = f.id;
    s.keyword = keyword_spelling(f.id);
    s.flag = long_flag(f);
    s.topic = f.topic;
    s.is_switch = (f.traits & kSwitch) != 0;
    s.makes_model = (f.traits & kModel) != 0;
    s.repeatable = (f.traits & kRepeat) != 0;
    s.negated = (f.traits & kNegated) != 0;
    s.forward = (f.traits & kForward) != 0;
    s.set_by_call = (f.traits & kByCall) != 0;
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// The hidden option that carries a command's inputs written after "--" (parse_command_line).
constexpr const char* kInputsAfterDashes = "--inputs-after-dashes";

// One registry row as an option (or the argument) of the command `c`.
void add_setting(CLI::App* cmd, const CommandWords& c, const Flag& f) {
  const std::string help = help_of(f, c.bit);
  CLI::Option* o = nullptr;
  if (f.traits & kPositional) {
    o = cmd->add_option(c.positional)->description(help);
    if (f.traits & kRepeat) {
      o->expected(CLI::detail::expected_max_vector_size);
      cmd->add_option(kInputsAfterDashes)->group("")->expected(1)->allow_extra_args(false)->multi_option_policy(
          CLI::MultiOptionPolicy::TakeAll);
    }
  } else if (f.traits & kSwitch) {
    o = cmd->add_flag_function(
        f.names, [](std::int64_t) {}, help);
  } else {
    o = cmd->add_option(f.names)->description(help);
    if (f.traits & kRepeat)  // one value each time (a list would swallow the inputs)
      o->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  if (f.required & c.bit) o->required();
  if (f.traits & kPositional) return;
  o->group(f.topic);
  const std::string value = value_name_of(f, c.bit);
  if (!value.empty()) o->type_name(value);
  const std::string shown = shown_default_of(f, c.bit);
  if (!shown.empty()) o->default_str(shown);
  if (f.number != Number::None)  // may rewrite the value: "last" as -1, "010" as 10
    o->transform(CLI::Validator([&f](std::string& s) { return number_check(f, s); }, ""));
}

}  // namespace

Commands add_commands(CLI::App& app, CliArgs&) {
  std::vector<CLI::App*> made;
  for (const CommandWords& c : all_commands()) {
    CLI::App* cmd = app.add_subcommand(c.name, spell_as_flags(c.description));
    for (const Flag* f : flags_in_help_order(c.bit)) add_setting(cmd, c, *f);
    made.push_back(cmd);
  }
  dress_commands(app);  // the help formatter, footers (app/cli/cli_words.cpp)
  return Commands{made[0], made[1], made[2], made[3], made[4], made[5], made[6]};
}

namespace {

// "-o=out" as Python's argparse reads it: the value "out" (CLI11, like getopt, took "=out" and made a folder
// named "=out"). Only a short option that takes a value, only before "--".
void split_short_equals(const CLI::App& app, std::vector<std::string>& args) {
  const std::string name = args.size() > 1 ? args[1] : "";
  const auto cmds = app.get_subcommands([&name](const CLI::App* s) { return s->get_name() == name; });
  if (cmds.empty()) return;
  for (size_t i = 2; i < args.size() && args[i] != "--"; ++i) {
    const std::string& a = args[i];
    if (a.size() < 3 || a[0] != '-' || a[1] == '-' || a[2] != '=') continue;
    const CLI::Option* o = cmds.front()->get_option_no_throw(a.substr(0, 2));
    if (!o || o->get_type_size_max() <= 0) continue;  // a switch: CLI11 says it takes no value
    const std::string value = a.substr(3);
    args[i] = a.substr(0, 2);
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, value);
    ++i;
  }
}

}  // namespace

void parse_command_line(CLI::App& app, std::vector<std::string> args) {
  const auto parse = [&app](std::vector<std::string>& words) {  // argv as main gets it
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    app.parse(static_cast<int>(words.size()), argv.data());
  };
  split_short_equals(app, args);
  try {
    parse(args);
  } catch (const CLI::ExtrasError&) {
    const auto dashes = std::find(args.begin() + std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(args.size())), args.end(), "--");
    const std::string name = args.size() > 1 ? args[1] : "";
    const auto cmds = app.get_subcommands([&name](const CLI::App* s) { return s->get_name() == name; });
    if (dashes == args.end() || cmds.empty() || !cmds.front()->get_option_no_throw(kInputsAfterDashes)) throw;
    std::vector<std::string> again(args.begin(), dashes);
    for (auto it = dashes + 1; it != args.end(); ++it) again.push_back(std::string(kInputsAfterDashes) + "=" + *it);
    app.clear();
    parse(again);
  }
}

GivenSettings given_settings(const CLI::App& cmd) {
  const CommandWords* c = command_named(cmd.get_name());
  GivenSettings given;
  if (!c) return given;
  for (const Flag& f : all_flags()) {
    if (!(f.commands & c->bit)) continue;
    const CLI::Option* o = cmd.get_option_no_throw((f.traits & kPositional) ? c->positional : long_flag(f));
    const CLI::Option* after = (f.traits & kPositional) ? cmd.get_option_no_throw(kInputsAfterDashes) : nullptr;
    if (!o || o->count() + (after ? after->count() : 0) == 0) continue;
    GivenSetting g{f.id, {}};
    if (!(f.traits & kSwitch)) g.values = o->results();
    // A switch takes no value: CLI11 would count --panel=no as given (on), so a value is refused, not guessed.
    else if (const std::vector<std::string>& v = o->results(); !v.empty() && v.back() != "true")
      throw Error(setting_ref(f.id) + " takes no value, found '" + v.back() + "' (leave it out for the default)");
    if (after) g.values.insert(g.values.end(), after->results().begin(), after->results().end());
    given.push_back(std::move(g));
  }
  return given;
}

}  // namespace attnmap
