// flags.hpp - the flag registry (issue 42): every setting of every command defined once (flags.cpp's table,
// modelled on ripgrep's crates/core/flags) - its setting id, its command-line spelling and aliases, its value
// name, help topic and help text, the commands it belongs to, whether it is a switch, repeatable, or makes
// the model - and the one door from settings as given to a command's checked request (make_request). The
// command line sets CLI11 up from the table (add_commands) and turns its results into GivenSettings; the
// Python module turns keywords into GivenSettings (settings_of). Messages name settings as {setting:id}
// (core/setting_ref.hpp); each front end spells them: spell_as_flags, spell_as_keywords.
#pragma once
#include <string>
#include <vector>

#include "app/commands/eval_cmd.hpp"
#include "app/commands/figure_cmd.hpp"
#include "app/commands/stats_cmd.hpp"
#include "engine/batch_options.hpp"
#include "engine/render.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {

/// One setting as given: its id ("max_pixels") and its values as text ("4000000"; a repeatable setting one
/// value per time given; a switch none - given means on).
struct GivenSetting {
  std::string id;
  std::vector<std::string> values;
};
using GivenSettings = std::vector<GivenSetting>;

/// A command's request, parsed and checked (today's checked parts of the command line): render and eval's
/// RenderOptions / BatchOptions / EvalOptions, explore's RenderOptions, figure's and stats' typed arguments
/// (their own checks run at the start of run_figure / run_stats), inspect's weights and overrides, download's
/// names.
struct CheckedRequest {
  std::string command;
  RenderOptions ro;
  BatchOptions bo;
  EvalOptions eo;
  FigurePlan figure;  ///< figure's settings checked (check_figure_args; -o checked when given)
  StatsPlan stats;    ///< stats' settings checked (check_stats_args)
  std::string inspect_weights;
  ModelOverrides inspect_overrides;
  std::vector<std::string> download_names;
  bool download_quiet = false;
};

/// The one door: a command's settings as given (from CLI11's results, or from Python keywords) parsed and
/// checked into the command's typed request. `command`: render | eval | inspect | figure | explore | stats |
/// download. Throws attnmap::Error whose text names settings as {setting:id} (never a flag or keyword); the
/// front end spells them. A setting that is not the command's is refused ("not a setting of ...").
CheckedRequest make_request(const std::string& command, const GivenSettings& given);

/// The flag of a setting as the command line spells it: "max_pixels" -> "--max-pixels", "class_spec" ->
/// "--class". An id the registry does not hold: "--" + id with '_' as '-'.
std::string flag_spelling(const std::string& id);

/// The keyword of a setting as the Python module spells it: "max_pixels" -> "max_pixels", "class_spec" ->
/// "classes", "no_exif" -> "exif" (exif=False). An id the registry does not hold: the id.
std::string keyword_spelling(const std::string& id);

/// `text` with each {setting:id} spelled as its flag (what messages and notices say on the terminal).
std::string spell_as_flags(const std::string& text);

/// `text` with each {setting:id} spelled as its keyword (what the Python module raises and returns).
std::string spell_as_keywords(const std::string& text);

/// One setting of a command, as the Python module reads it.
struct SettingInfo {
  std::string id, keyword, flag;
  std::string topic;       ///< the help's topic ("Text": the settings that give a CLIP's texts)
  bool is_switch = false;  ///< takes no value: True / False in Python (a negated one, exif=, legend=, False)
  bool makes_model = false;  ///< Python: given to load() / from_state_dict(), not to a call
  bool repeatable = false;   ///< may be given several times (--strip, --ext)
  bool negated = false;      ///< the flag turns off what the keyword names: --no-exif is exif=False
  bool forward = false;      ///< Model.forward() takes it (it chooses or computes the maps)
  bool set_by_call = false;  ///< the Python function sets it itself (weights, out, json, masks, quiet)
};

/// The settings of `command` (render, eval, ...), in the registry's order. Throws attnmap::Error for an
/// unknown command.
std::vector<SettingInfo> settings_of(const std::string& command);

}  // namespace attnmap
