// The output plan (issue 25, engine/output_plan.hpp): every file of an image - map PNGs, .npy, sidecars and the
// figures in every format - is checked the same way before it is written and by --skip-existing, and a
// skipped image's row lists them all.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/provenance.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

class OutputPlan : public TempDirTest {
 protected:
  CliRun render(const std::string& opts) {
    return run_attnmap("render " + q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png") + " -o " + q(dir / "o") + " " + opts);
  }
  void write_text(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string slurp_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
};

// A file of the user's with a figure's name (any format) is left alone, as NAME.png and NAME.npy are.
TEST_F(OutputPlan, FiguresNeverReplaceAFileAttnmapDidNotWrite) {
  for (const char* name : {"chelsea.panel.png", "chelsea.layers.pdf", "chelsea.heads.svg"}) {
    fs::remove_all(dir / "o");
    write_text(dir / "o" / name, "my notes");
    const CliRun r = render("-q --panel --strip layers --strip heads --figure-format png,pdf,svg");
    EXPECT_EQ(r.status, 1) << name << ": " << r.err;
    EXPECT_NE(r.err.find("already exists and was not written by attnmap"), std::string::npos) << r.err;
    EXPECT_EQ(slurp_file(dir / "o" / name), "my notes") << name;
  }
}

// --skip-existing compares the figures' records too (PNG tEXt, PDF Subject, SVG metadata): a panel made with
// another alpha is redone; a skipped image's row lists its figures.
TEST_F(OutputPlan, SkipExistingReadsEveryFigureRecord) {
  for (const char* format : {"png", "pdf", "svg"}) {
    fs::remove_all(dir / "o");
    const std::string figs = std::string(" --panel --figure-format ") + format;
    ASSERT_EQ(render("-q" + figs).status, 0);
    const std::string panel = (dir / "o" / (std::string("chelsea.panel.") + format)).string();
    const std::optional<nlohmann::json> rec = read_figure_record(panel);
    ASSERT_TRUE(rec) << panel;
    EXPECT_EQ((*rec)["alpha"], 0.5);
    ASSERT_EQ(render("-q --alpha 0.7").status, 0);  // NAME.png with another alpha, the panel left as it was
    const CliRun again = render("--alpha 0.7 --skip-existing" + figs);
    EXPECT_NE(again.err.find("1 done (1 redone: settings changed)"), std::string::npos) << format << ": " << again.err;
    EXPECT_EQ((*read_figure_record(panel))["alpha"], 0.7) << format;
    const std::string man = (dir / "m.jsonl").string();
    const CliRun skip = render("--alpha 0.7 --skip-existing --manifest " + q(man) + figs);
    EXPECT_NE(skip.err.find("0 done, 0 failed, 1 skipped"), std::string::npos) << skip.err;
    EXPECT_NE(slurp_file(man).find(panel), std::string::npos) << slurp_file(man);
  }
  EXPECT_FALSE(read_figure_record((dir / "nothing.pdf").string()));
}

// The strips' block and fusion are in the record when the views do not imply them: a heads strip of another
// block is redone.
TEST_F(OutputPlan, StripBlockIsRecordedBesideNamedViews) {
  ASSERT_EQ(render("-q --views L0/mean --strip heads --layer 1").status, 0);
  const CliRun r = render("--views L0/mean --strip heads --layer 2 --skip-existing");
  EXPECT_NE(r.err.find("1 redone: settings changed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("strip_block 1 -> 2"), std::string::npos) << r.err;
}

// attnmap figure with a photo column on a model without a class token (the column title used to count as a map).
TEST_F(OutputPlan, FigureWithPhotoColumnOnAModelWithoutClassToken) {
  const std::string w = fixture("families/timm_siglip/model.safetensors");
  const CliRun r = run_attnmap("figure " + q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png") + " -w " + q(w) +
                               " --views photo,probe,L2/mean -o " + q(dir / "f.png"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "f.png"));
}

}  // namespace
