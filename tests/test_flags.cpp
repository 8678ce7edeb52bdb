// test_flags.cpp - issue 42: the flag registry (app/cli/flags.hpp) and the one door. Each setting's spelling
// as a flag and as a Python keyword, settings_of for the Python module, make_request from settings as given
// (the same checks as the command line: numbers in attnmap's words, a setting of another command refused,
// errors naming {setting:id}), every registry row of every command stored by make_request, and each
// command's help order and did-you-mean as before the registry.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "app/cli/cli_words.hpp"
#include "app/cli/flag_table.hpp"
#include "app/cli/flags.hpp"
#include "app/cli/options.hpp"
#include "core/error.hpp"

using namespace attnmap;

namespace {

// make_request's error text for `given` ("" when it succeeds).
std::string request_error(const std::string& command, const GivenSettings& given) {
  try {
    (void)make_request(command, given);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The parse error of `attnmap ARGS...` as the command line words it (parse_error_text), "" when it parses.
std::string parse_error(const std::vector<std::string>& args) {
  CLI::App app{"attnmap", "attnmap"};
  CliArgs a;
  (void)add_commands(app, a);
  std::vector<std::string> argv = args;
  std::reverse(argv.begin(), argv.end());  // CLI11 reads a vector from its back
  try {
    app.parse(argv);
  } catch (const CLI::ParseError& e) {
    return parse_error_text(e, app);
  }
  return "";
}

}  // namespace

TEST(Flags, SpellingsFromTheRegistry) {
  EXPECT_EQ(flag_spelling("max_pixels"), "--max-pixels");
  EXPECT_EQ(flag_spelling("class_spec"), "--class");
  EXPECT_EQ(flag_spelling("jobs"), "--jobs");
  EXPECT_EQ(keyword_spelling("class_spec"), "classes");
  EXPECT_EQ(keyword_spelling("figure_format"), "format");
  EXPECT_EQ(keyword_spelling("no_exif"), "exif");
  EXPECT_EQ(keyword_spelling("max_pixels"), "max_pixels");
  EXPECT_EQ(spell_as_flags("give {setting:heads} H; {setting:class_spec} top1"),
            "give --heads H; --class top1");
  EXPECT_EQ(spell_as_keywords("give {setting:heads} H; {setting:class_spec} top1"),
            "give heads=H; classes top1");
  EXPECT_EQ(spell_as_keywords("{setting:mean} R,G,B or {setting:threshold} DINOs"),
            "mean=R,G,B or threshold DINOs");
  const Flag* colour = flag_spelled("--colourmap");  // the accepted alias
  ASSERT_NE(colour, nullptr);
  EXPECT_STREQ(colour->id, "colormap");
  ASSERT_NE(flag_spelled("-j"), nullptr);
  EXPECT_STREQ(flag_spelled("-j")->id, "jobs");
}

TEST(Flags, SettingsOfACommand) {
  bool max_pixels = false, size = false, rollout = false, exif = false;
  for (const SettingInfo& s : settings_of("render")) {
    EXPECT_NE(s.id, "inputs");  // the argument is no keyword
    if (s.id == "max_pixels")
      max_pixels = s.flag == "--max-pixels" && !s.is_switch && s.forward && !s.makes_model;
    if (s.id == "size") size = s.makes_model;
    if (s.id == "rollout") rollout = s.is_switch && s.forward;
    if (s.id == "no_exif") exif = s.keyword == "exif" && s.negated && s.is_switch;
  }
  EXPECT_TRUE(max_pixels && size && rollout && exif);
  for (const SettingInfo& s : settings_of("eval")) EXPECT_NE(s.id, "panel");
  EXPECT_THROW((void)settings_of("rendr"), Error);
}

TEST(Flags, MakeRequestParsesAndChecks) {
  const CheckedRequest r = make_request(
      "render",
      {{"inputs", {"x.png"}}, {"layer", {"last"}}, {"colormap", {"magma"}}, {"panel", {}}, {"jobs", {"3"}}});
  EXPECT_EQ(r.ro.layer, -1);
  EXPECT_EQ(r.ro.colormap, "magma");
  EXPECT_TRUE(r.ro.panel);
  EXPECT_EQ(r.bo.jobs, 3);
  EXPECT_EQ(request_error("render", {{"jobs", {"x"}}}),
            "{setting:jobs}: expected a whole number of workers (0 = one per core), found 'x'");
  EXPECT_EQ(request_error("eval", {{"panel", {}}}), "{setting:panel} is not a setting of attnmap eval");
  EXPECT_EQ(request_error("render", {{"rollout", {"yes"}}}), "{setting:rollout} takes no value");
  EXPECT_EQ(request_error("render", {{"json", {""}}}), "{setting:json} is not a setting of attnmap render");
  EXPECT_EQ(request_error("eval", {{"json", {""}}}), "{setting:json} expects a file name, found ''");
  EXPECT_EQ(request_error("render", {{"alpha", {"2"}}}), "{setting:alpha} must be in [0, 1], found 2");
  EXPECT_EQ(spell_as_flags(request_error("render", {{"all_heads", {}}})),
            "--all-heads is a --save-raw option: add --save-raw");
}

// Every row of every command has its place in the request: given any value, make_request may refuse the
// value, never the setting itself.
TEST(Flags, EveryRowIsStored) {
  for (const CommandWords& c : all_commands())
    for (const Flag& f : all_flags()) {
      if (!(f.commands & c.bit)) continue;
      GivenSettings given = {
          {f.id, (f.traits & kSwitch) ? std::vector<std::string>{} : std::vector<std::string>{"1"}}};
      if (std::string(f.id) != "inputs" && (flag_of("inputs")->commands & c.bit))
        given.push_back({"inputs", {"x.png"}});
      const std::string why = request_error(c.name, given);
      EXPECT_EQ(why.find("has no place"), std::string::npos) << c.name << " " << f.id << ": " << why;
      EXPECT_EQ(why.find("is not a setting"), std::string::npos) << c.name << " " << f.id << ": " << why;
    }
}

// Each command's help lists a topic's flags in the order it did before the registry (figure: --scale first
// of the drawing), and did-you-mean offers every flag a typed prefix starts (up to three), as the help
// lists them; a unique prefix, however short, its flag.
TEST(Flags, HelpOrderAndSuggestionsAsBeforeTheRegistry) {
  std::vector<std::string> drawing, figures;
  for (const Flag* f : flags_in_help_order(kFigure)) {
    if (std::string(f->topic) == "Drawing") drawing.push_back(f->id);
    if (std::string(f->topic) == "Figures") figures.push_back(f->id);
  }
  EXPECT_EQ(drawing, (std::vector<std::string>{"scale", "colormap", "style", "alpha", "alpha_by_value", "upsample"}));
  EXPECT_EQ(figures, (std::vector<std::string>{"width_in", "dpi", "title", "row_labels", "column_labels",
                                               "block_numbering", "notes"}));
  CLI::App app{"attnmap", "attnmap"};
  CliArgs a;
  (void)add_commands(app, a);
  const std::string help = app.get_subcommand("figure")->help("attnmap figure");
  const size_t scale = help.find("\n  --scale "), colormap = help.find("\n  --colormap,--colourmap NAME");
  ASSERT_NE(scale, std::string::npos) << help;
  ASSERT_NE(colormap, std::string::npos) << help;
  EXPECT_LT(scale, colormap) << help;
  EXPECT_LT(help.find("\n  --width-in "), help.find("\n  --dpi ")) << help;
  EXPECT_EQ(flags_in_help_order(kRender).front()->id, std::string("inputs"));  // the argument first

  EXPECT_EQ(parse_error({"render", "--col", "x.png"}), "unknown option --col; did you mean --column or --colormap?");
  EXPECT_EQ(parse_error({"figure", "--col=x", "x.png"}),
            "unknown option --col; did you mean --colormap or --column-labels?");
  EXPECT_EQ(parse_error({"render", "--colo", "x"}), "unknown option --colo; did you mean --colormap?");
  EXPECT_EQ(parse_error({"render", "--hea", "x"}), "unknown option --hea; did you mean --heads, --head or --heads-grid?");
  EXPECT_EQ(parse_error({"render", "--sa", "x"}), "unknown option --sa; did you mean --save-raw?");
  EXPECT_EQ(parse_error({"eval", "--sa", "x"}), "unknown option --sa; did you mean --sanity?");
  EXPECT_EQ(parse_error({"render", "--no-", "x"}), "unknown option --no-; did you mean --no-exif or --no-legend?");
  EXPECT_EQ(parse_error({"figure", "--esize", "x"}), "unknown option --esize; did you mean --size?");
  EXPECT_EQ(parse_error({"stats", "--colour-map", "x"}), "unknown option --colour-map; did you mean --colormap?");
  // A flag the typed text starts wins over the field's other word for a setting (--fusion: --head elsewhere).
  EXPECT_EQ(parse_error({"eval", "--fusion", "mean", "x"}), "unknown option --fusion; did you mean --fusions?");
  EXPECT_EQ(parse_error({"render", "--fusion", "mean", "x"}), "unknown option --fusion; did you mean --head?");
}
