// test_messages.cpp - issue 41's messages: did-you-mean for flags (every command) and view names, the
// command's own help in every parse error's hint, numbers refused in attnmap's words, --colourmap accepted,
// --layer last, and the help by topic with typed value names in lines of at most 100 columns. Every usage
// error here stops before a model is loaded; the two renders use the tiny fixture model.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <sstream>

#include "app/cli/cli_words.hpp"
#include "app/cli/command_line.hpp"
#include "app/cli/options.hpp"
#include "core/error.hpp"
#include "maps/views.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::string kModel = fixture("timm_small/weights.json");
const std::string kImage = std::string(ATTNMAP_TEST_DIR) + "/images/basic/palette.png";

class Messages : public TempDirTest {};

// The one error line of `args` (status 2 asserted), without "attnmap: error: " and the newline.
std::string usage_error(const std::string& args) {
  const CliRun r = run_attnmap(args);
  EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  const std::string head = "attnmap: error: ";
  EXPECT_EQ(r.err.rfind(head, 0), 0u) << r.err;
  return r.err.size() > head.size() ? r.err.substr(head.size(), r.err.size() - head.size() - 1) : r.err;
}

// parse_views' message for `list`.
std::string view_error(const std::string& list) {
  try {
    (void)parse_views(list);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_F(Messages, UnknownFlagsSuggestTheFlagOnEveryCommand) {
  const std::string img = q(kImage);
  const std::pair<std::string, std::string> cases[] = {
      {"render --view L1/h3 " + img, "unknown option --view; did you mean --views? (attnmap render --help for the options)"},
      {"render --output o " + img, "unknown option --output; did you mean -o/--out? (attnmap render --help for the options)"},
      {"render --view=L1/h3 " + img, "unknown option --view; did you mean --views? (attnmap render --help for the options)"},
      {"render --bogus " + img, "unknown option --bogus (attnmap render --help for the options)"},
      // the mistyped flag is named before figure's missing -o (its value became an input)
      {"figure " + img + " --views photo --output f.png",
       "unknown option --output; did you mean -o/--out? (attnmap figure --help for the options)"},
      {"stats " + img + " -o out --colour-map magma",
       "unknown option --colour-map; did you mean --colormap? (attnmap stats --help for the options)"},
      {"explore " + img + " -o out --budget 3",
       "unknown option --budget; did you mean --budget-mb? (attnmap explore --help for the options)"},
      {"eval " + img + " --masks m --panel", "unknown option --panel: an option of render, not of eval (attnmap eval --help for the options)"},
      {"inspect w.json --layer 3",
       "unknown option --layer: an option of render and eval, not of inspect (attnmap inspect --help for the options)"},
      {"download org/name --quite", "unknown option --quite; did you mean -q/--quiet? (attnmap download --help for the options)"},
      {"rendr " + img, "unknown command 'rendr'; did you mean 'render'? (commands: render, eval, inspect, figure, explore, "
                       "stats, download; attnmap --help)"},
  };
  for (const auto& [args, says] : cases) EXPECT_EQ(usage_error(args), says) << args;
}

TEST_F(Messages, ParseErrorsNameTheCommandsHelp) {
  const std::string img = q(kImage);
  EXPECT_EQ(usage_error("render"), "INPUT... is required (attnmap render --help for the options)");
  EXPECT_EQ(usage_error("eval " + img), "--masks DIR is required (attnmap eval --help for the options)");
  EXPECT_EQ(usage_error("figure " + img + " --views photo"), "-o/--out FILE is required (attnmap figure --help for the options)");
  EXPECT_EQ(usage_error("explore -o out"), "IMAGE is required (attnmap explore --help for the options)");
  EXPECT_EQ(usage_error("inspect a.json b.json"), "unexpected argument 'b.json' (attnmap inspect --help for the options)");
  EXPECT_EQ(usage_error("render " + img + " --strip"), "--strip expects layers|heads, found nothing (attnmap render --help for the options)");
  EXPECT_EQ(usage_error(""), "a command is required (commands: render, eval, inspect, figure, explore, stats, download; "
                             "attnmap --help)");
}

// A word of the field for a setting the command does not have names the commands that have it, never a flag
// that merely looks alike (figure --threads is not --heads); "--flag=" with nothing after it is a parse error
// with the command's help, as "--flag" alone; counts agree with their nouns.
TEST_F(Messages, SynonymsEmptyValuesAndCountsReadRight) {
  const std::string img = q(kImage);
  EXPECT_EQ(usage_error("figure " + img + " --views L1/mean -o f.png --threads 4"),
            "unknown option --threads: -j/--jobs is an option of render and stats, not of figure (attnmap figure --help "
            "for the options)");
  EXPECT_EQ(usage_error("eval " + img + " --masks m --workers 4"),
            "unknown option --workers: -j/--jobs is an option of render and stats, not of eval (attnmap eval --help for "
            "the options)");
  EXPECT_EQ(usage_error("render " + img + " --threads 4"),
            "unknown option --threads; did you mean -j/--jobs? (attnmap render --help for the options)");
  EXPECT_EQ(usage_error("render " + img + " --layer="), "--layer expects a value, found '' (attnmap render --help for the options)");
  EXPECT_EQ(usage_error("stats " + img + " -o out --jobs="), "--jobs expects a value, found '' (attnmap stats --help for the options)");
  EXPECT_EQ(usage_error("figure " + img + " --views photo,L1/mean -o f.png --column-labels one"),
            "--column-labels has 1 label for the 2 views of --views (one per column, photo included)");
  EXPECT_EQ(usage_error("figure " + img + " -w " + q(kModel) + " --views L1/mean -o " + q(dir / "f.png") +
                        " --row-labels one,two"),
            "--row-labels has 2 labels for 1 image (one per row, in the order of the rows)");
  // After "--" a word is an input, also one spelled as the command's own flag (not "an unknown option").
  const CliRun dashes = run_attnmap("render " + img + " -o " + q(dir / "o") + " -- -q");
  EXPECT_EQ(dashes.status, 1) << dashes.err;
  EXPECT_NE(dashes.err.find("attnmap: error: -q: no such file or folder"), std::string::npos) << dashes.err;
  EXPECT_EQ(usage_error("render " + img + " --layer 1 --layer 0"),
            "--layer is given 2 times; give it once (attnmap render --help for the options)");
}

// Every number flag of every command: a malformed value is refused before anything runs, in the project's
// words, never CLI11's "Could not convert".
TEST_F(Messages, NumbersAreRefusedInTheProjectsWords) {
  const std::string img = q(kImage);
  const std::string block = "a block index (0-based, negative from the end) or last";
  const std::pair<std::string, std::string> cases[] = {
      {"render " + img + " -j abc", "-j/--jobs: expected a whole number of workers (0 = one per core), found 'abc'"},
      {"render " + img + " --jobs 1.5", "-j/--jobs: expected a whole number of workers (0 = one per core), found '1.5'"},
      {"render " + img + " -j", "-j/--jobs expects a whole number of workers (0 = one per core), found nothing"},
      {"render " + img + " --alpha x", "--alpha: expected an opacity from 0 to 1, found 'x'"},
      {"render " + img + " --dpi 3x", "--dpi: expected a number of pixels per inch, found '3x'"},
      {"render " + img + " --width-in w", "--width-in: expected a width in inches, found 'w'"},
      {"render " + img + " --discard half", "--discard: expected a fraction from 0 to 1, found 'half'"},
      {"render " + img + " --threshold t", "--threshold: expected a fraction of the attention mass, in (0, 1], found 't'"},
      {"render " + img + " --layer x", "--layer: expected " + block + ", found 'x'"},
      {"render " + img + " --gradcam-layer g", "--gradcam-layer: expected " + block + ", found 'g'"},
      {"render " + img + " --heads h", "--heads: expected a whole number of attention heads, found 'h'"},
      {"render " + img + " --max-pixels 99999999999999999999",
       "--max-pixels: expected a whole number of pixels, found '99999999999999999999' (out of range)"},
      {"render " + img + " --progress-every p", "--progress-every: expected a whole number of images (0 = automatic), found 'p'"},
      {"render " + img + " --sheet-columns s", "--sheet-columns: expected a whole number of thumbnails per row, found 's'"},
      {"render " + img + " --strip-columns s", "--strip-columns: expected a whole number of tiles per row, found 's'"},
      {"render " + img + " --budget-mb b", "--budget-mb: expected a size in MiB, found 'b'"},
      {"eval " + img + " --masks m --tolerance t", "--tolerance: expected a whole number of pixels, found 't'"},
      {"eval " + img + " --masks m --layer 1e3", "--layer: expected " + block + ", found '1e3'"},
      {"figure " + img + " --views photo -o f.png --dpi x", "--dpi: expected a number of pixels per inch, found 'x'"},
      {"figure " + img + " --views photo -o f.png --width-in x", "--width-in: expected a width in inches, found 'x'"},
      {"figure " + img + " --views photo -o f.png --heads x", "--heads: expected a whole number of attention heads, found 'x'"},
      {"stats " + img + " -o out --bins x", "--bins: expected a whole number of histogram bins, found 'x'"},
      {"stats " + img + " -o out --outlier-k k",
       "--outlier-k: expected a number K (an outlier's norm > median + K x 1.4826 x MAD), found 'k'"},
      {"stats " + img + " -o out --norm-block b", "--norm-block: expected " + block + ", found 'b'"},
      {"stats " + img + " -o out -j x", "-j/--jobs: expected a whole number of workers (0 = one per core), found 'x'"},
      {"explore " + img + " -o out --alpha x", "--alpha: expected an opacity from 0 to 1, found 'x'"},
      {"inspect w.json --heads x", "--heads: expected a whole number of attention heads, found 'x'"},
  };
  for (const auto& [args, says] : cases) {
    const std::string command = args.substr(0, args.find(' '));
    EXPECT_EQ(usage_error(args), says + " (attnmap " + command + " --help for the options)") << args;
  }
}

TEST_F(Messages, ViewNamesSuggestTheViewWithAShortPointer) {
  const std::string pointer =
      " (views are photo, L<layer>/<fusion>, rollout, probe, chefer, gradcam, attn-grad; the grammar: docs/cli.md#views)";
  EXPECT_EQ(usage_error("render " + q(kImage) + " -w " + q(kModel) + " -o " + q(dir) + " --views L1/h3,rolout"),
            "--views: 'rolout': unknown view; did you mean 'rollout'?" + pointer);
  const std::pair<std::string, std::string> meant[] = {
      {"Rollout", "rollout"}, {"l1/h3", "L1/h3"},           {"L3-mean", "L3/mean"},       {"L-1-max", "L-1/max"},
      {"L3", "L3/mean"},      {"rollout-L2", "rollout@L2"}, {"gradcm@L3", "gradcam@L3"}, {"chefr", "chefer"},
      {"rolout:q=r1c1", "rollout:q=r1c1"}};
  for (const auto& [typed, view] : meant)
    EXPECT_EQ(view_error(typed), "'" + typed + "': unknown view; did you mean '" + view + "'?" + pointer) << typed;
  EXPECT_EQ(view_error("xyzzy"), "'xyzzy': unknown view" + pointer);
  EXPECT_EQ(view_error("L1/maen"), "'L1/maen': 'maen' is not a head fusion; did you mean 'mean'? (mean, max, min or h<head>)");
  EXPECT_EQ(view_error("Lx/mean"), "'Lx/mean': 'x' is not a block index (0-based, negative from the end, or last)");
  EXPECT_EQ(view_error("L1/mean,,rollout"), "an empty view in 'L1/mean,,rollout'" + pointer);
}

// --colourmap (the docs' spelling) is --colormap; --layer last is the last block (-1), as L-1 / Llast.
TEST_F(Messages, ColourmapAndLayerLastAreAccepted) {
  const std::string base = "render -q " + q(kImage) + " -w " + q(kModel) + " -o ";
  ASSERT_EQ(run_attnmap(base + q(dir / "colour") + " --colourmap magma").status, 0);
  ASSERT_EQ(run_attnmap(base + q(dir / "colour2") + " --colourmap=magma").status, 0);
  ASSERT_EQ(run_attnmap(base + q(dir / "color") + " --colormap magma").status, 0);
  ASSERT_EQ(run_attnmap(base + q(dir / "viridis")).status, 0);
  const std::string png = fs::path(kImage).stem().string() + ".png";
  EXPECT_EQ(slurp(dir / "colour" / png), slurp(dir / "color" / png));
  EXPECT_EQ(slurp(dir / "colour2" / png), slurp(dir / "color" / png));
  EXPECT_NE(slurp(dir / "viridis" / png), slurp(dir / "color" / png));
  ASSERT_EQ(run_attnmap(base + q(dir / "last") + " --layer last").status, 0);
  ASSERT_EQ(run_attnmap(base + q(dir / "minus1") + " --layer -1").status, 0);
  ASSERT_EQ(run_attnmap(base + q(dir / "first") + " --layer 0").status, 0);
  EXPECT_EQ(slurp(dir / "last" / png), slurp(dir / "minus1" / png));
  EXPECT_NE(slurp(dir / "last" / png), slurp(dir / "first" / png));
  // The options as an embedding program parses them (the Python module): the same words.
  EXPECT_EQ(parse_render_command({kImage, "--layer", "last"}).layer, -1);
  EXPECT_EQ(parse_render_command({kImage, "--colourmap", "magma"}).colormap, "magma");
  try {
    (void)parse_render_command({kImage, "-j", "x"});
    ADD_FAILURE() << "-j x accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "-j/--jobs: expected a whole number of workers (0 = one per core), found 'x'");
  }
}

TEST_F(Messages, HelpIsByTopicTypedAndWrapped) {
  for (const char* command : {"", "render", "eval", "figure", "explore", "stats", "inspect", "download"}) {
    const CliRun r = run_attnmap(std::string(command) + " --help");
    ASSERT_EQ(r.status, 0) << command;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_LE(line.size(), kHelpWidth) << command << ": " << line;
      if (line.rfind("  --title", 0) != 0) {
        EXPECT_EQ(line.find(" TEXT"), std::string::npos) << command << ": " << line;
      }
    }
    EXPECT_EQ(r.out.find("\nOptions:\n"), std::string::npos) << command << ": an option without a topic";
    if (*command) {
      EXPECT_NE(r.out.find("Usage: attnmap " + std::string(command) + " [OPTIONS] "), std::string::npos) << command;
    }
  }
  const std::string render = run_attnmap("render --help").out;
  for (const char* topic : {"\nInput:\n", "\nModel:\n", "\nViews:\n", "\nDrawing:\n", "\nFigures:\n", "\nOutput:\n",
                            "\nFolders and runs:\n", "\nOther:\n"})
    EXPECT_NE(render.find(topic), std::string::npos) << topic;
  EXPECT_LT(render.find("\nModel:\n"), render.find("\nViews:\n"));
  for (const char* typed : {"\n  -w,--weights PATH ", "\n  -o,--out DIR ", "\n  --layer INT|last ", "\n  --views LIST ",
                            "\n  --alpha FLOAT ", "\n  --dpi FLOAT ", "\n  -j,--jobs INT ", "\n  --colormap,--colourmap NAME\n",
                            "\n  --labels FILE ", "\n  --size S|W,H "})
    EXPECT_NE(render.find(typed), std::string::npos) << typed;
  EXPECT_NE(render.find("0 (the default) = one per usable core"), std::string::npos);
  EXPECT_NE(render.find("last = -1"), std::string::npos);
  EXPECT_NE(run_attnmap("explore --help").out.find("Usage: attnmap explore [OPTIONS] IMAGE\n"), std::string::npos);
  EXPECT_NE(run_attnmap("figure --help").out.find("\n  -o,--out FILE (required) "), std::string::npos);
  EXPECT_NE(run_attnmap("stats --help").out.find("\n  --bins INT "), std::string::npos);
  CLI::App app{"attnmap", "attnmap"};
  CliArgs args;
  (void)add_commands(app, args);
  EXPECT_EQ(options_without_topic(app), std::vector<std::string>{});
}

// `inspect` of an output that is not there says so, instead of trying it as a weights file ("cannot open
// weights file"): a user looking for NAME.png of a --views run (which writes NAME.VIEW.png).
TEST_F(Messages, InspectOfAMissingPngSaysNoSuchFile) {
  const CliRun r = run_attnmap("inspect /nonexistent/attnmap/x.png");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("x.png: no such file (inspect reads a weights file or Hub name, or an output attnmap wrote)"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("weights file:"), std::string::npos) << r.err;
}
