// test_walk.cpp - folder walks: a folder holding .attnmap-ignore (eval masks beside their photos) is not walked,
// and the run says so.
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/walk.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;

TEST(Walk, FolderWithIgnoreMarkerIsNotWalkedAndTheRunSaysSo) {
  const fs::path dir = fs::temp_directory_path() / ("attnmap_walk_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "in" / "masks");
  fs::copy_file(std::string(ATTNMAP_DATA_DIR) + "/composites/0000_trouser.png", dir / "in" / "a.png");
  fs::copy_file(std::string(ATTNMAP_DATA_DIR) + "/composites/masks/0000_trouser.png", dir / "in" / "masks" / "a.png");
  std::ofstream(dir / "in" / "masks" / ".attnmap-ignore").put('\n');
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("attnmap: note: not walked: " + (dir / "in" / "masks").string() + " (it holds .attnmap-ignore)"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 done, 0 failed"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "a.png"));
  EXPECT_FALSE(fs::exists(dir / "out" / "masks"));
  // Without the marker the masks are images like any other.
  fs::remove(dir / "in" / "masks" / ".attnmap-ignore");
  const CliRun all = run_attnmap("render " + q(dir / "in") + " -q -o " + q(dir / "out2"));
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_TRUE(fs::exists(dir / "out2" / "masks" / "a.png"));
  fs::remove_all(dir);
}

// An output folder inside an input folder is not walked (its files are the run's outputs): when the walk meets
// it, the run says so once, since photos already in it are left out; a walk that does not meet it says nothing.
TEST(Walk, OutputFolderInsideAnInputFolderIsNotWalkedAndTheRunSaysSo) {
  const fs::path dir = fs::temp_directory_path() / ("attnmap_walk_out_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "d");
  fs::copy_file(std::string(ATTNMAP_DATA_DIR) + "/composites/0000_trouser.png", dir / "d" / "a.png");
  const std::string out = (dir / "d" / "composites").string();
  std::vector<std::string> missing;
  std::map<std::string, size_t> passed_over;
  EXPECT_EQ(attnmap::plan_jobs({(dir / "d").string()}, out, &missing, {}, nullptr, &passed_over).size(), 1u);
  EXPECT_EQ(attnmap::passed_over_summary(passed_over), "");  // no such folder yet: nothing left out
  fs::create_directories(out);
  fs::copy_file(std::string(ATTNMAP_DATA_DIR) + "/composites/0002_bag.png", fs::path(out) / "b.png");
  passed_over.clear();
  EXPECT_EQ(attnmap::plan_jobs({(dir / "d").string()}, out, &missing, {}, nullptr, &passed_over).size(), 1u);
  const std::string note = "not walked: " + out + " (this run's output folder, or eval's masks folder; images already "
                           "in it are left out)";
  EXPECT_EQ(attnmap::passed_over_summary(passed_over), note);
  const CliRun r = run_attnmap("render -w " + q(fixture("timm_small/weights.json")) + " -o " + q(out) + " " + q(dir / "d"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("attnmap: note: " + note + "\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not walked", r.err.find("not walked") + 1), std::string::npos) << r.err;  // once
  fs::remove_all(dir);
}

TEST(ResumeFigures, AFigureAskedForLaterIsWrittenNotSkippedAndTheDefaultModelIsNamed) {
  const fs::path dir = fs::temp_directory_path() / ("attnmap_walk_fig_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string img = q(std::string(ATTNMAP_DATA_DIR) + "/composites/0002_bag.png");
  const CliRun first = run_attnmap("render " + img + " -o " + q(dir / "o"));
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.err.find("attnmap: note: no -w given: the bundled default model, a small ViT trained on garment "
                           "composites"), std::string::npos) << first.err;
  const CliRun again = run_attnmap("render " + img + " -o " + q(dir / "o") + " --skip-existing --panel");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_TRUE(fs::exists(dir / "o" / "0002_bag.panel.png")) << again.err;
  EXPECT_NE(again.err.find("1 done"), std::string::npos) << again.err;
  const CliRun third = run_attnmap("render " + img + " -o " + q(dir / "o") + " --skip-existing --panel -q");
  EXPECT_EQ(third.status, 0);
  EXPECT_EQ(third.err, "");  // all there now, made with these settings: skipped; -q prints nothing
  fs::remove_all(dir);
}

// Issue 26: an earlier run's overlays in the input folder (render X/a.png -o X) are not photos of a later run
// into another folder; the run says it passed them over. Named directly, one is rendered.
TEST(Walk, OverlaysOfAnEarlierRunAreNotInputs) {
  const fs::path dir = fs::temp_directory_path() / ("attnmap_walk_outputs_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "x");
  fs::copy_file(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png", dir / "x" / "a.jpg");  // a photo (sniffed: PNG)
  ASSERT_EQ(run_attnmap("render " + q(dir / "x" / "a.jpg") + " -o " + q(dir / "x")).status, 0);  // x/a.png, an overlay
  const CliRun r = run_attnmap("render " + q(dir / "x") + " -o " + q(dir / "y"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("attnmap: 1 done, 0 failed, 0 skipped"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("passed over 1 PNG that attnmap wrote (overlays and figures of an earlier run; name one "
                       "directly to render it)"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "y" / "a.png"));  // the photo's overlay, not "a.jpg.png" beside an "a.png.png"
  EXPECT_FALSE(fs::exists(dir / "y" / "a.png.png"));
  EXPECT_EQ(run_attnmap("render " + q(dir / "x" / "a.png") + " -o " + q(dir / "z")).status, 0);
  fs::remove_all(dir);
}

// Issue 41: "no images found" names the inputs that hold none; every command treats nothing to do - every
// input named missing, or no image in them - as render does: a usage error (exit 2), one line naming them.
TEST(Walk, NothingToDoNamesTheInputsAndIsAUsageErrorForEveryCommand) {
  const fs::path dir = fs::temp_directory_path() / ("attnmap_none_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "empty");
  std::ofstream(dir / "empty" / "notes.txt") << "no image here";
  const std::string e = (dir / "empty").string();
  EXPECT_EQ(attnmap::no_images_message({e}), "no images found in " + e + "/");
  EXPECT_EQ(attnmap::no_images_message({e + "/", "b/"}), "no images found in " + e + "/ and b/");
  EXPECT_EQ(attnmap::no_images_message({"a", "b", "c", "d", "e"}, {"png"}),
            "no images found in a, b, c and 2 more with --ext png (no file there has such an extension)");
  EXPECT_EQ(attnmap::all_inputs_missing({"a.png", "b"}, {"a.png", "b"}, "draw"), "a.png, b: no such file or folder; nothing to draw");
  EXPECT_EQ(attnmap::all_inputs_missing({"a.png", "b"}, {"a.png"}, "draw"), "");  // b exists: a fails on its own
  const std::string masks = q(std::string(ATTNMAP_DATA_DIR) + "/composites/masks");
  const std::string nope = q(dir / "nope.png");
  const std::pair<std::string, std::string> cases[] = {
      {"render " + q(dir / "empty") + " -o " + q(dir / "o1"), "no images found in " + e + "/"},
      {"eval --masks " + masks + " " + q(dir / "empty"), "no images found in " + e + "/"},
      {"stats " + q(dir / "empty") + " -o " + q(dir / "o2"), "no images found in " + e + "/"},
      {"figure " + q(dir / "empty") + " --views photo,L1/h3 -o " + q(dir / "f.png"), "no images found in " + e + "/"},
      {"render " + nope + " -o " + q(dir / "o3"), "nope.png: no such file or folder; nothing to render"},
      {"eval --masks " + masks + " " + nope, "nope.png: no such file or folder; nothing to evaluate"},
      {"stats " + nope + " -o " + q(dir / "o4"), "nope.png: no such file or folder; nothing to compute"},
      {"figure " + nope + " --views photo,L1/h3 -o " + q(dir / "f.png"), "nope.png: no such file or folder; nothing to draw"},
      {"explore " + nope + " -o " + q(dir / "o5"), "nope.png: no such file or folder; nothing to explore"},
  };
  for (const auto& [args, want] : cases) {
    const CliRun r = run_attnmap(args + " -q");
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("attnmap: error: "), std::string::npos) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << "\n" << r.err;
  }
  for (const char* o : {"o1", "o2", "o3", "o4", "o5", "f.png"}) EXPECT_FALSE(fs::exists(dir / o)) << o << ": nothing made";
  fs::remove_all(dir);
}
