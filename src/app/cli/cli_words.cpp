// cli_words.cpp - the command line's words (see cli_words.hpp), from the flag registry (flag_table.cpp): the
// help formatter, did-you-mean, CLI11's parse errors in attnmap's words.
#include "app/cli/cli_words.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <utility>

#include "app/cli/flag_table.hpp"
#include "app/cli/flags.hpp"
#include "core/names.hpp"

namespace attnmap {

namespace {

// The registry's row of `command`'s option `opt`; nullptr when none (a positional, --help).
const Flag* words_of(const std::string& command, const CLI::Option& opt) {
  if (opt.get_lnames().empty()) return nullptr;
  const Flag* f = flag_spelled("--" + opt.get_lnames()[0]);
  const CommandWords* c = command_named(command);
  return f && c && (f->commands & c->bit) ? f : nullptr;
}

// The option of `cmd` spelled `flag` ("--jobs" or "-j"); nullptr when none.
const CLI::Option* find_flag(const CLI::App& cmd, const std::string& flag) {
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& n : o->get_lnames())
      if (flag == "--" + n) return o;
    for (const std::string& n : o->get_snames())
      if (flag == "-" + n) return o;
  }
  return nullptr;
}

// The option of `cmd` for the setting `id`; nullptr when none.
const CLI::Option* find_setting(const CLI::App& cmd, const std::string& id) {
  const Flag* f = flag_of(id);
  return f ? find_flag(cmd, long_flag(*f)) : nullptr;
}

// An option as messages name it: "-j/--jobs", "--views"; a positional by its usage name.
std::string shown_flag(const std::string& command, const CLI::Option& o) {
  if (o.get_positional()) {
    const CommandWords* c = command_named(command);
    return c && o.get_name() == c->positional ? c->usage : o.get_name();
  }
  std::string s;
  for (const std::string& n : o.get_snames()) s += "-" + n + "/";
  return s + "--" + o.get_lnames().at(0);
}

// `text`'s words in lines of at most `width` columns, the first starting at column `from`, the others after
// `indent` spaces.
std::string wrapped(const std::string& text, size_t from, size_t indent, size_t width) {
  std::string out;
  size_t used = from;
  bool line_start = true;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (!line_start && used + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      used = indent;
      line_start = true;
    }
    if (!line_start) {
      out += ' ';
      ++used;
    }
    out += word;
    used += word.size();
    line_start = false;
  }
  return out;
}

// A name (and its value) in the left column, `text` wrapped beside it, two spaces apart at least; on lines of their own when the name is
// wider than the column.
std::string laid_out(const std::string& left, const std::string& text, size_t column) {
  if (text.empty()) return left + "\n";
  std::string out = left;
  if (out.size() + 2 > column) out += "\n" + std::string(column, ' ');  // two spaces at least
  else out += std::string(column - out.size(), ' ');
  return out + wrapped(text, column, column, kHelpWidth) + "\n";
}

// The help of one command (or of attnmap itself): options by topic in help_topics()' order, value names, defaults
// in the description, every line at most kHelpWidth columns.
class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(std::string command) : command_(std::move(command)) {
    label("Positionals", "Arguments");
    column_width(30);
  }

  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    if (is_positional) return shown_flag(command_, *opt);
    std::string name = opt->get_name(false, true);
    for (const auto& [alias, id] : flag_aliases())
      if (!opt->get_lnames().empty() && flag_spelling(id) == "--" + opt->get_lnames()[0]) name += "," + alias;
    return name;
  }

  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_positional() || opt->get_type_size() == 0) return "";
    return " " + opt->get_type_name() + (opt->get_required() ? " (required)" : "");
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    const std::string d = opt->get_default_str();
    return opt->get_description() + (d.empty() ? "" : " (default " + d + ")");
  }

  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    return laid_out("  " + make_option_name(opt, is_positional) + make_option_opts(opt), make_option_desc(opt),
                    get_column_width());
  }

  std::string make_description(const CLI::App* app) const override {
    const std::string d = app->get_description();
    return d.empty() ? "" : wrapped(d, 0, 0, kHelpWidth) + "\n\n";
  }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string out = get_label("Usage") + ": " + name;
    if (!app->get_options([](const CLI::Option* o) { return o->nonpositional(); }).empty()) out += " [OPTIONS]";
    for (const CLI::Option* o : app->get_options([](const CLI::Option* o) { return o->get_positional(); }))
      out += " " + shown_flag(command_, *o);
    if (!app->get_subcommands([](const CLI::App*) { return true; }).empty()) out += " COMMAND";
    return out + "\n";
  }

  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    return make_description(app) + make_usage(app, name) + make_positionals(app) + topic_groups(app, mode) +
           make_subcommands(app, mode) + "\n" + make_footer(app);
  }

  // The options by topic, in help_topics()' order (CLI11's make_groups is not virtual: make_help calls this).
  std::string topic_groups(const CLI::App* app, CLI::AppFormatMode mode) const {
    std::vector<std::string> order = help_topics();
    for (const std::string& g : app->get_groups())
      if (std::find(order.begin(), order.end(), g) == order.end()) order.push_back(g);
    std::string out;
    for (const std::string& group : order) {
      const auto opts = app->get_options([&](const CLI::Option* o) {
        return o->get_group() == group && o->nonpositional() &&
               (mode != CLI::AppFormatMode::Sub || o != app->get_help_ptr());
      });
      if (!group.empty() && !opts.empty()) out += make_group(group, false, opts);
    }
    return out;
  }

  std::string make_subcommand(const CLI::App* sub) const override {
    return laid_out("  " + sub->get_name(), sub->get_description(), 12);
  }

 private:
  std::string command_;
};

// The command of `app` the command line named (parsing began), nullptr when none.
const CLI::App* parsed_command(const CLI::App& app) {
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; }))
    if (c->parsed()) return c;
  return nullptr;
}

// Whether a leftover argument is a flag ("--view", "-x", "--out=DIR"), not a value ("-1", "x.png") nor the
// end of the options ("--").
bool looks_like_flag(const std::string& arg) {
  return arg.size() >= 2 && arg != "--" && arg[0] == '-' &&
         (std::isalpha(static_cast<unsigned char>(arg[1])) || arg[1] == '-');
}

// The long names of `cmd`'s options and the aliases it accepts for them (without "--"), each with its
// option, in the help's order (--help last).
std::vector<std::pair<std::string, const CLI::Option*>> long_names(const CLI::App& cmd) {
  std::vector<const CLI::Option*> in_order;
  for (const CLI::Option* o : cmd.get_options())
    if (o != cmd.get_help_ptr()) in_order.push_back(o);
  if (cmd.get_help_ptr()) in_order.push_back(cmd.get_help_ptr());
  std::vector<std::pair<std::string, const CLI::Option*>> names;
  for (const CLI::Option* o : in_order)
    for (const std::string& n : o->get_lnames()) {
      names.emplace_back(n, o);
      for (const auto& [alias, id] : flag_aliases())
        if ("--" + n == flag_spelling(id)) names.emplace_back(alias.substr(2), o);
    }
  return names;
}

// The options whose long name or alias starts with `typed` (case-insensitive; "col": --column, --colormap),
// each once, in the help's order.
std::vector<const CLI::Option*> options_starting_with(const std::vector<std::pair<std::string, const CLI::Option*>>& names,
                                                      const std::string& typed) {
  const std::string low = ascii_lower(typed);
  std::vector<const CLI::Option*> prefixed;
  for (const auto& [name, o] : names)
    if (!low.empty() && name.rfind(low, 0) == 0 && std::find(prefixed.begin(), prefixed.end(), o) == prefixed.end())
      prefixed.push_back(o);
  return prefixed;
}

// The options of `cmd` the mistyped long flag `--typed` may mean, in the help's order (--help last): those
// whose name or accepted alias starts with `typed` ("col": --column, --colormap; "sa": --save-raw) when there
// are at most three, else the nearest name (core/names.hpp nearest_name); none when no name is near.
std::vector<const CLI::Option*> meant_options(const CLI::App& cmd, const std::string& typed) {
  const std::vector<std::pair<std::string, const CLI::Option*>> names = long_names(cmd);
  const std::vector<const CLI::Option*> prefixed = options_starting_with(names, typed);
  if (!prefixed.empty() && prefixed.size() <= 3) return prefixed;
  std::vector<std::string> words;
  for (const auto& n : names) words.push_back(n.first);
  const std::string near = nearest_name(words, typed);
  for (const auto& [name, o] : names)
    if (!near.empty() && name == near) return {o};
  return {};
}

// "unknown option --view; did you mean --views?" ("--col": "did you mean --column or --colormap?"); another
// command's flag is said to be one.
std::string unknown_flag_text(const CLI::App& app, const CLI::App& cmd, const std::string& arg) {
  const std::string flag = arg.substr(0, arg.find('='));
  const std::string text = "unknown option " + flag;
  // A flag of the command that starts with what was typed first (eval's --fusion: --fusions), then the
  // field's other words for a setting (--fusion elsewhere: --head), then the nearest name.
  const bool starts_a_flag =
      flag.size() > 2 && flag.rfind("--", 0) == 0 && !options_starting_with(long_names(cmd), flag.substr(2)).empty();
  std::vector<const CLI::Option*> meant;
  std::string synonym_of;  // the setting the typed word is the field's name for (--threads: jobs)
  for (const auto& [typed, id] : flag_suggestions())
    if (!starts_a_flag && flag == typed) {
      synonym_of = id;
      if (find_setting(cmd, id)) meant = {find_setting(cmd, id)};
    }
  // A setting the command does not have (figure --threads): the commands that have it, never a name that
  // merely looks alike (--heads).
  if (meant.empty() && !synonym_of.empty()) {
    std::vector<std::string> have;
    std::string shown;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (const CLI::Option* o = find_setting(*sub, synonym_of)) {
        have.push_back(sub->get_name());
        shown = shown_flag(sub->get_name(), *o);
      }
    std::string list;
    for (size_t i = 0; i < have.size(); ++i) list += (i == 0 ? "" : i + 1 == have.size() ? " and " : ", ") + have[i];
    if (!have.empty()) return text + ": " + shown + " is an option of " + list + ", not of " + cmd.get_name();
  }
  if (meant.empty() && flag.rfind("--", 0) == 0) meant = meant_options(cmd, flag.substr(2));
  if (!meant.empty()) {
    std::string list;
    for (size_t i = 0; i < meant.size(); ++i)
      list += (i == 0 ? "" : i + 1 == meant.size() ? " or " : ", ") + shown_flag(cmd.get_name(), *meant[i]);
    return text + "; did you mean " + list + "?";
  }
  std::string declared = flag;  // --colourmap: the commands that take --colormap
  for (const auto& [alias, id] : flag_aliases())
    if (flag == alias) declared = flag_spelling(id);
  std::vector<std::string> others;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub != &cmd && find_flag(*sub, declared)) others.push_back(sub->get_name());
  std::string list;
  for (size_t i = 0; i < others.size(); ++i)
    list += (i == 0 ? "" : i + 1 == others.size() ? " and " : ", ") + others[i];
  if (!others.empty()) return text + ": an option of " + list + ", not of " + cmd.get_name();
  return text;
}

// The option a CLI11 message names first ("--jobs: 1 required INT missing", "Could not convert: --jobs = x"),
// nullptr when it names none of `cmd`'s.
const CLI::Option* named_option(const CLI::App& cmd, const std::string& name) {
  for (const CLI::Option* o : cmd.get_options())
    if (o->get_name() == name || (o->get_positional() && o->get_name(true, false) == name)) return o;
  return nullptr;
}

}  // namespace

void dress_commands(CLI::App& app) {
  app.formatter(std::make_shared<HelpFormatter>(""));
  for (CLI::Option* o : app.get_options()) o->group("Other");
  if (CLI::Option* help = app.get_help_ptr())
    help->description("this help: the commands (attnmap COMMAND --help: its options)");
  if (CLI::Option* version = app.get_version_ptr()) version->description("the version");
  for (CLI::App* cmd : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string command = cmd->get_name();
    cmd->formatter(std::make_shared<HelpFormatter>(command));
    cmd->group("Commands");
    if (const CommandWords* c = command_named(command)) cmd->footer(std::string("More: ") + c->docs);
    if (CLI::Option* help = cmd->get_help_ptr()) {
      help->description("this help: the options by topic");
      help->group("Other");
    }
  }
}

void spell_flag_aliases(const CLI::App& app, std::vector<std::string>& args) {
  if (args.size() < 2) return;
  const CLI::App* cmd = nullptr;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; }))
    if (c->get_name() == args[1]) cmd = c;
  if (!cmd) return;
  for (size_t i = 2; i < args.size() && args[i] != "--"; ++i)
    for (const auto& [a, id] : flag_aliases()) {
      const std::string flag = flag_spelling(id);
      if (!find_flag(*cmd, flag)) continue;
      if (args[i] == a) args[i] = flag;
      else if (args[i].rfind(a + "=", 0) == 0) args[i] = flag + args[i].substr(a.size());
    }
}

std::string parse_error_text(const CLI::Error& e, const CLI::App& app) {
  const std::string what = e.what();
  const CLI::App* cmd = parsed_command(app);
  const std::vector<std::string> left = app.remaining(true);
  for (const std::string& arg : left) {  // a mistyped flag first: its value may have become an input
    if (!looks_like_flag(arg)) continue;
    // One of the command's own flags left over (after "--", where it is no flag): not "unknown".
    if (cmd && find_flag(*cmd, arg.substr(0, arg.find('=')))) return "unexpected argument '" + arg + "'";
    return cmd ? unknown_flag_text(app, *cmd, arg) : "unknown option " + arg;
  }
  if (!cmd) return dynamic_cast<const CLI::RequiredError*>(&e) ? unknown_command_text(app, "") : what;
  if (dynamic_cast<const CLI::ExtrasError*>(&e) && !left.empty()) return "unexpected argument '" + left.front() + "'";
  const std::string command = cmd->get_name();
  const bool validation = dynamic_cast<const CLI::ValidationError*>(&e) != nullptr;
  const bool missing = dynamic_cast<const CLI::ArgumentMismatch*>(&e) && what.size() > 8 &&
                       what.compare(what.size() - 8, 8, " missing") == 0;
  const size_t most = what.find(": At Most 1 required but received ");  // CLI11's words for a flag given twice
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && most != std::string::npos)
    if (const CLI::Option* o = named_option(*cmd, what.substr(0, most)))
      return shown_flag(command, *o) + " is given " + what.substr(most + 34) + " times; give it once";
  if (validation || missing) {  // "--jobs: expected ...", "--jobs: 1 required INT missing"
    const size_t colon = what.find(": ");
    const CLI::Option* o = colon == std::string::npos ? nullptr : named_option(*cmd, what.substr(0, colon));
    if (!o) return what;
    if (validation) return shown_flag(command, *o) + what.substr(colon);
    const Flag* w = words_of(command, *o);
    return shown_flag(command, *o) + " expects " +
           (w && w->number != Number::None ? std::string(w->expects) : o->get_type_name()) + ", found nothing";
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) && what.rfind("Could not convert: ", 0) == 0) {
    const size_t eq = what.find(" = ");  // "Could not convert: --jobs = abc"
    const CLI::Option* o = eq == std::string::npos ? nullptr : named_option(*cmd, what.substr(19, eq - 19));
    if (!o) return what;
    const Flag* w = words_of(command, *o);
    const std::string found = "found '" + what.substr(eq + 3) + "'";
    return shown_flag(command, *o) + ": " +
           (w && w->number != Number::None ? "expected " + std::string(w->expects) + ", " + found
                                           : "cannot read the value, " + found);
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e)) {  // "--masks is required", "inputs is required"
    const size_t is = what.find(" is required");
    const CLI::Option* o = is == std::string::npos ? nullptr : named_option(*cmd, what.substr(0, is));
    if (o) return shown_flag(command, *o) + (o->get_positional() ? "" : " " + o->get_type_name()) + " is required";
  }
  return what;
}

std::string usage_error_text(const CLI::Error& e, const CLI::App& app, const std::string& command) {
  const std::string text = parse_error_text(e, app);
  return text.rfind("a command is required", 0) == 0 ? text : text + help_hint(app, command);
}

std::string help_hint(const CLI::App& app, const std::string& command) {
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!command.empty() && c->get_name() == command) return " (attnmap " + command + " --help for the options)";
  return " (attnmap --help for the commands)";
}

std::string unknown_command_text(const CLI::App& app, const std::string& word) {
  std::vector<std::string> names;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(c->get_name());
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  if (word.empty()) return "a command is required (commands: " + list + "; attnmap --help)";
  const std::string near = nearest_name(names, word);
  return "unknown command '" + word + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?") +
         " (commands: " + list + "; attnmap --help)";
}

std::vector<std::string> options_without_topic(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::App* cmd : app.get_subcommands([](const CLI::App*) { return true; }))
    for (const CLI::Option* o : cmd->get_options())
      if (!o->get_positional() && !o->get_group().empty() &&  // group "": hidden, never in the help
          std::find(help_topics().begin(), help_topics().end(), o->get_group()) == help_topics().end())
        out.push_back(cmd->get_name() + " " + o->get_name());
  return out;
}

}  // namespace attnmap
