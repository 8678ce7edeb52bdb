// setting_ref.hpp - a user setting named inside a lower stage's message, spelled by the front end.
#pragma once
#include <string>
#include <utility>

#include "core/error.hpp"

namespace attnmap {

/// A reference to a user setting (`heads`, `act`, `pool`, `key`, `max_pixels`, ...) inside a message or a
/// notice of a lower stage. The stages below app/ never spell a command-line flag: the caller may be the
/// CLI, a test or a script. They write `"give " + setting_ref("heads") + " H"`, and the front end turns
/// every reference into its own spelling with spell_settings (the CLI: "--heads", as ripgrep's argument
/// layer adds a flag's name). Text: "{setting:NAME}".
inline std::string setting_ref(const std::string& name) { return "{setting:" + name + "}"; }

/// `text` with every "{setting:NAME}" replaced by spell(NAME); text without references is returned as is.
/// A reference left open ("{setting:" without "}") is kept verbatim.
template <typename Spell>
std::string spell_settings(const std::string& text, Spell spell) {
  static const std::string open = "{setting:";
  std::string out;
  size_t from = 0;
  for (size_t at; (at = text.find(open, from)) != std::string::npos;) {
    const size_t end = text.find('}', at + open.size());
    if (end == std::string::npos) break;
    out.append(text, from, at - from);
    out += spell(text.substr(at + open.size(), end - at - open.size()));
    from = end + 1;
  }
  out.append(text, from, std::string::npos);
  return out;
}

/// Runs `parse` (a lower stage's parser or check of one value) and puts `prefix` in front of its attnmap::Error:
/// with_prefix(setting_ref("head"), ...) -> "{setting:head} must be a head index or mean | max | min, found 'x'".
template <class F>
auto with_prefix(const std::string& prefix, F&& parse) -> decltype(parse()) {
  try {
    return std::forward<F>(parse)();
  } catch (const Error& e) {
    throw Error(prefix + " " + e.what());
  }
}

/// with_prefix for a setting: "{setting:ID} " + the parser's message (spelled by the front end).
template <class F>
auto with_setting(const std::string& id, F&& parse) -> decltype(parse()) {
  return with_prefix(setting_ref(id), std::forward<F>(parse));
}

/// How a setting is spelled in the text the engine writes into files and says on a terminal (the explorer's
/// page, a figure's drawn note, a manifest row's error, a note line): one speller for the whole process, set by
/// the front ends' flag registry when it is linked (app/cli/flags.cpp: "max_pixels" -> "--max-pixels"), so the
/// files are the same bits whichever front end made them. Unset: "{setting:ID}" is kept.
using SettingSpeller = std::string (*)(const std::string& id);
void set_setting_speller(SettingSpeller spell);

/// `text` with every "{setting:ID}" spelled by the speller set with set_setting_speller.
std::string spelled_settings(const std::string& text);

/// A number as a setting's message shows it: "%g" ("0.5", "1e+06").
std::string shown_number(double v);

}  // namespace attnmap
