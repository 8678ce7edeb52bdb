// setting_ref.hpp - a user setting named inside a lower stage's message, spelled by the front end.
#pragma once
#include <string>

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

}  // namespace attnmap
