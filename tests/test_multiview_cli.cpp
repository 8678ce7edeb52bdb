// render --views / --layers all / --scale run (issue 17): several views from one forward pass give exactly
// the maps and overlays of one run per view; files named after the view; one scale over the run; refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::string kData = ATTNMAP_DATA_DIR;

class MultiView : public TempDirTest {
 protected:
  std::string model() const { return fixture("timm_small/weights.json"); }
  CliRun render(const std::string& inputs, const std::string& out, const std::string& extra) const {
    return run_attnmap("render " + inputs + " -w " + q(model()) + " -o " + q(dir / out) + " -q " + extra);
  }
  std::vector<float> npy(const std::string& rel) const { return read_npy((dir / rel).string(), nullptr); }
  std::vector<uint8_t> pixels(const std::string& rel) const { return load_image((dir / rel).string()).rgb; }
};

}  // namespace

TEST_F(MultiView, EveryViewEqualsItsOwnSingleViewRun) {
  const std::string in = q(kData + "/chelsea.png");
  const CliRun r = render(in, "multi", "--views L0/h1,L-1/max,rollout --save-raw --colormap magma");
  ASSERT_EQ(r.status, 0) << r.err;
  struct One {
    const char* tag;
    const char* options;
  };
  for (const One& one : {One{"L0-h1", "--layer 0 --head 1"}, One{"L1-max", "--layer -1 --head max"},
                         One{"rollout", "--rollout"}}) {
    const std::string out = std::string("single_") + one.tag;
    const CliRun s = render(in, out, std::string(one.options) + " --save-raw --colormap magma");
    ASSERT_EQ(s.status, 0) << s.err;
    EXPECT_EQ(npy("multi/chelsea." + std::string(one.tag) + ".npy"), npy(out + "/chelsea.npy")) << one.tag;
    EXPECT_EQ(pixels("multi/chelsea." + std::string(one.tag) + ".png"), pixels(out + "/chelsea.png"))
        << one.tag;
  }
  EXPECT_FALSE(fs::exists(dir / "multi" / "chelsea.png"));  // several views: no unnamed overlay
  // One view keeps NAME.png.
  ASSERT_EQ(render(in, "one", "--views L1/mean").status, 0);
  ASSERT_EQ(render(in, "one_single", "--layer 1 --head mean").status, 0);
  EXPECT_EQ(pixels("one/chelsea.png"), pixels("one_single/chelsea.png"));
}

TEST_F(MultiView, LayersAllIsEveryBlockWithTheChosenFusion) {
  const CliRun r = render(q(kData + "/chelsea.png"), "all", "--layers all --head max --save-raw");
  ASSERT_EQ(r.status, 0) << r.err;
  for (int l = 0; l < 2; ++l) {  // timm_small: 2 blocks
    const std::string tag = "L" + std::to_string(l) + "-max";
    ASSERT_TRUE(fs::exists(dir / "all" / ("chelsea." + tag + ".png"))) << tag;
    ASSERT_EQ(render(q(kData + "/chelsea.png"), "l" + std::to_string(l),
                     "--layer " + std::to_string(l) + " --head max --save-raw")
                  .status,
              0);
    EXPECT_EQ(npy("all/chelsea." + tag + ".npy"), npy("l" + std::to_string(l) + "/chelsea.npy")) << tag;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "all"), fs::directory_iterator{}),
            2 * 3);  // png, npy, json
}

TEST_F(MultiView, ScaleRunDrawsEveryImageOnOneScale) {
  // Two photos, the gray colour map at full opacity and nearest upsampling: each overlay pixel is the map's
  // value on the run's scale, from the run's minimum to the 99th percentile of every value of the run
  // (issue 28: numpy.percentile, linear interpolation; values above drawn white). An image whose maximum is
  // above that top reaches white; one below stops at its maximum's place on the scale, not at white as
  // --scale map would draw it. --no-legend: the bare overlay (the legend's white would be the brightest).
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/chelsea.png", dir / "in" / "a.png");
  fs::copy_file(kData + "/composites/0002_bag.png", dir / "in" / "b.png");
  const std::string common = "--views L0/mean --save-raw --colormap gray --alpha 1 --upsample nearest --no-legend ";
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -w " + q(model()) + " -o " + q(dir / "run") +
                               " " + common + "--scale run");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("--scale run: attention probability"), std::string::npos) << r.err;
  const std::vector<float> a = npy("run/a.npy"), b = npy("run/b.npy");
  const float lo = std::min(*std::min_element(a.begin(), a.end()), *std::min_element(b.begin(), b.end()));
  std::vector<double> all(a.begin(), a.end());
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  const double rank = 0.99 * static_cast<double>(all.size() - 1);
  const auto k = static_cast<size_t>(rank);
  const double hi = all[k] + (rank - static_cast<double>(k)) * (all[k + 1] - all[k]);
  ASSERT_LT(hi, all.back());  // the top is below the run's maximum: something is clipped
  int white = 0;
  for (const char* name : {"a", "b"}) {
    const std::vector<float>& m = name[0] == 'a' ? a : b;
    const float mx = *std::max_element(m.begin(), m.end());
    const std::vector<uint8_t> px = pixels(std::string("run/") + name + ".png");
    const int brightest = *std::max_element(px.begin(), px.end());
    const double want = std::min(255.0, 255.0 * (static_cast<double>(mx) - lo) / (hi - lo));
    EXPECT_NEAR(brightest, want, 1.0) << name << ": its maximum on the run's scale";
    white += brightest == 255;
  }
  EXPECT_GE(white, 1);
  EXPECT_NE(r.err.find("(the 99th percentile of " + std::to_string(all.size()) + " values;"), std::string::npos) << r.err;
  EXPECT_TRUE(a != b);
  // --scale map: each image reaches white.
  ASSERT_EQ(run_attnmap("render " + q(dir / "in") + " -w " + q(model()) + " -o " + q(dir / "map") + " -q " +
                        common + "--scale map")
                .status,
            0);
  for (const char* name : {"a", "b"}) {
    const std::vector<uint8_t> px = pixels(std::string("map/") + name + ".png");
    EXPECT_EQ(*std::max_element(px.begin(), px.end()), 255) << name;
  }
}

TEST_F(MultiView, SkipExistingKnowsEveryViewsFiles) {
  const std::string in = q(kData + "/chelsea.png");
  ASSERT_EQ(render(in, "o", "--views L0/mean,rollout --save-raw").status, 0);
  CliRun again = run_attnmap("render " + in + " -w " + q(model()) + " -o " + q(dir / "o") +
                             " --views L0/mean,rollout --save-raw --skip-existing");
  EXPECT_NE(again.err.find("0 done, 0 failed, 1 skipped"), std::string::npos) << again.err;
  fs::remove(dir / "o" / "chelsea.rollout.npy");  // one view's file missing: the image is rendered again
  again = run_attnmap("render " + in + " -w " + q(model()) + " -o " + q(dir / "o") +
                      " --views L0/mean,rollout --save-raw --skip-existing");
  EXPECT_NE(again.err.find("1 done, 0 failed, 0 skipped"), std::string::npos) << again.err;
  EXPECT_TRUE(fs::exists(dir / "o" / "chelsea.rollout.npy"));
  // Another list of views is other settings: rendered again.
  again = run_attnmap("render " + in + " -w " + q(model()) + " -o " + q(dir / "o") +
                      " --views L0/mean,L1/mean --save-raw --skip-existing");
  EXPECT_NE(again.err.find("1 done (1 redone: settings changed)"), std::string::npos) << again.err;
  // A file of the user's with a view's name is never replaced.
  fs::create_directories(dir / "u");
  std::ofstream(dir / "u" / "chelsea.L0-mean.png") << "mine";
  const CliRun mine = render(in, "u", "--views L0/mean,rollout");
  EXPECT_EQ(mine.status, 1);
  EXPECT_NE(mine.err.find("chelsea.L0-mean.png already exists and was not written by attnmap"),
            std::string::npos)
      << mine.err;
  EXPECT_EQ(slurp(dir / "u" / "chelsea.L0-mean.png"), "mine");
}

TEST_F(MultiView, BadViewsAndOptionsAreOneLineAndStatus2) {
  const std::string in = q(kData + "/chelsea.png");
  struct Bad {
    const char* options;
    const char* says;
  };
  for (const Bad& b :
       {Bad{"--views L3/avg", "'avg' is not a head fusion"}, Bad{"--views L9/mean", "'L9/mean'"},
        Bad{"--views rolout", "unknown view"}, Bad{"--views L3/mean,,rollout", "an empty view"},
        Bad{"--views photo", "'photo' is a column of `attnmap figure`"},
        Bad{"--views L3/mean --rollout", "cannot be combined with --rollout"},
        Bad{"--views L3/mean --explain chefer", "cannot be combined with --explain"},
        Bad{"--views L1/mean --class 1", "--class chooses the class of a class-specific view"},
        Bad{"--views L-1/mean,L1/mean", "a second time"}, Bad{"--layers 3", "--layers expects all"},
                       Bad{"--views rollout --layer 0", "--layer does not apply to --views"},
                       Bad{"--views L1/mean --head max", "--head does not apply to --views"},
        Bad{"--views L3/mean --scale run --skip-existing", "cannot be combined with --skip-existing"},
        Bad{"--views L3/mean --scale run --shard 1/2", "cannot be combined with --shard"}}) {
    const CliRun r = render(in, "bad", b.options);
    EXPECT_EQ(r.status, 2) << b.options << ": " << r.err;
    EXPECT_NE(r.err.find(b.says), std::string::npos) << b.options << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << b.options << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "bad"));
  // A model without a classifier head: the class-specific views are refused, the others work.
  const std::string headless = fixture("views_rollout/weights.json");
  const CliRun nohead =
      run_attnmap("render " + in + " -w " + q(headless) + " -o " + q(dir / "nh") + " --views chefer");
  EXPECT_EQ(nohead.status, 2);
  EXPECT_NE(nohead.err.find("no classifier head"), std::string::npos) << nohead.err;
  EXPECT_EQ(
      run_attnmap("render " + in + " -w " + q(headless) + " -o " + q(dir / "nh") + " --views L0/mean,rollout")
          .status,
      0);
}

TEST_F(MultiView, ClassSpecificViewsPerClassAndPanelRowPerView) {
  const std::string in = q(kData + "/chelsea.png");
  const CliRun r = render(in, "c", "--views L1/mean,chefer --class top2 --panel --save-raw");
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> chefer;
  for (const auto& e : fs::directory_iterator(dir / "c")) {
    const std::string n = e.path().filename().string();
    if (n.rfind("chelsea.chefer.class-", 0) == 0 && e.path().extension() == ".png") chefer.push_back(n);
  }
  EXPECT_EQ(chefer.size(), 2u);  // one overlay per class of the top 2
  EXPECT_TRUE(fs::exists(dir / "c" / "chelsea.L1-mean.png"));
  const Image panel = load_image((dir / "c" / "chelsea.panel.png").string());
  const Image one = [&] {
    EXPECT_EQ(render(in, "p1", "--views L1/mean --panel").status, 0);
    return load_image((dir / "p1" / "chelsea.panel.png").string());
  }();
  EXPECT_NEAR(panel.width, one.width, 40);  // the colour bars' tick labels differ in width
  EXPECT_GT(panel.height, 2 * one.height);  // three rows (L1/mean and chefer for two classes) under one title
}

TEST_F(MultiView, DefaultsRecordsAndLinesFollowTheSingleViews) {
  const std::string in = q(kData + "/chelsea.png");
  // attn-grad without @L: the block --explain attn-grad uses (--layer, else the config's default view).
  ASSERT_EQ(render(in, "ag", "--views attn-grad,L0/mean --layer 0 --save-raw").status, 0);
  ASSERT_EQ(render(in, "ag1", "--explain attn-grad --layer 0 --save-raw").status, 0);
  EXPECT_EQ(npy("ag/chelsea.attn-grad.npy"), npy("ag1/chelsea.npy"));
  // The file's own view and class are in its statistics record; the run's in its settings record.
  const CliRun ins = run_attnmap("inspect " + q(dir / "ag" / "chelsea.attn-grad.png"));
  EXPECT_NE(ins.out.find("\"view\":\"attn-grad\",\"view_block\":0,\"explained_class\""), std::string::npos)
      << ins.out;
  // One line per map under the input's line.
  const CliRun lines =
      run_attnmap("render " + in + " -w " + q(model()) + " -o " + q(dir / "l") + " --views L0/mean,rollout");
  EXPECT_NE(lines.out.find("-> 2 maps:\n  L0/mean -> "), std::string::npos) << lines.out;
  EXPECT_NE(lines.out.find("  rollout -> " + (dir / "l" / "chelsea.rollout.png").string()), std::string::npos)
      << lines.out;
  // --layers all with a block --views names already: kept once.
  ASSERT_EQ(render(in, "la", "--views L1/mean --layers all --head mean").status, 0);
  EXPECT_TRUE(fs::exists(dir / "la" / "chelsea.L0-mean.png"));
  EXPECT_TRUE(fs::exists(dir / "la" / "chelsea.L1-mean.png"));
  // --scale run: the bounds are in every record and printed under -q too.
  const CliRun run = render(in, "sr", "--views L0/mean,rollout --scale run");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("--scale run: attention probability"), std::string::npos) << run.err;
  const CliRun rec = run_attnmap("inspect " + q(dir / "sr" / "chelsea.rollout.png"));
  EXPECT_NE(rec.out.find("scale_bounds"), std::string::npos) << rec.out;
  EXPECT_NE(rec.out.find("\"rollout mass\":["), std::string::npos) << rec.out;
  // Options that do not apply to the views asked.
  EXPECT_EQ(render(in, "x", "--views L0/mean --discard 0.5").status, 2);
  EXPECT_EQ(render(in, "x", "--views gradcam@L0 --gradcam-layer 1").status, 2);
  EXPECT_EQ(render(in, "x", "--views rollout --discard 0.5").status, 0);
}

TEST_F(MultiView, FigureRefusesAPngInsideAnInputFolder) {
  fs::create_directories(dir / "in");
  fs::copy_file(kData + "/chelsea.png", dir / "in" / "a.png");
  const CliRun r = run_attnmap("figure " + q(dir / "in") + " -w " + q(model()) +
                               " --views photo,L0/mean -o " + q(dir / "in" / "fig.png"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("is inside the input folder"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "in" / "fig.png"));
  EXPECT_EQ(run_attnmap("figure " + q(dir / "in") + " -w " + q(model()) + " --views photo,L0/mean -o " +
                        q(dir / "in" / "fig.pdf"))
                .status,
            0);
}

TEST_F(MultiView, InspectReadsTheRecordOfPdfAndSvgFigures) {
  // The PDF's Subject (cairo writes non-ASCII text as UTF-16BE hex) and the SVG's <metadata>, read back.
  const CliRun r = render(q(kData + "/chelsea.png"), "f",
                          "--views L0/mean,attn-grad --panel --figure-format pdf,svg --scale run");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* ext : {".pdf", ".svg"}) {
    const CliRun ins = run_attnmap("inspect " + q(dir / "f" / (std::string("chelsea.panel") + ext)));
    EXPECT_EQ(ins.status, 0) << ext << ": " << ins.err;
    EXPECT_NE(ins.out.find("view             L0/mean,attn-grad"), std::string::npos)
        << ext << ": " << ins.out;
    EXPECT_NE(ins.out.find("\"attention \u00d7 gradient\":["), std::string::npos) << ext << ": " << ins.out;
  }
  std::ofstream(dir / "not_attnmaps.pdf") << "%PDF-1.4\n%%EOF\n";
  const CliRun other = run_attnmap("inspect " + q(dir / "not_attnmaps.pdf"));
  EXPECT_EQ(other.status, 2);
  EXPECT_NE(other.err.find("no attnmap settings recorded in it"), std::string::npos) << other.err;
}
