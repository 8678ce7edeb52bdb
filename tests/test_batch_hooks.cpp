// A batch run (run_render) driven through its hooks, as the Python module drives it: every input's row to the
// sink (no manifest needed), progress, the run's lines kept apart by stream, a lent model, cancellation.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/flags.hpp"
#include "engine/batch.hpp"
#include "checkpoint/weights.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::string kData = ATTNMAP_DATA_DIR;

/// What a run told its hooks.
struct Told {
  std::mutex mu;
  std::map<size_t, nlohmann::json> rows;
  std::vector<std::string> out, err;
  size_t bars = 0;
  std::vector<std::string> progress;  // "done/total status"
};

BatchHooks hooks_into(Told* t) {
  BatchHooks h;
  h.on_line = [t](LineStream s, const std::string& text) {
    std::lock_guard<std::mutex> lock(t->mu);
    if (s == LineStream::Out) t->out.push_back(text);
    if (s == LineStream::Err) t->err.push_back(text);
    if (s == LineStream::Bar) ++t->bars;
  };
  h.on_row = [t](const BatchRow& r) {
    std::lock_guard<std::mutex> lock(t->mu);
    t->rows[r.index] = nlohmann::json::parse(r.json);
    EXPECT_EQ(t->rows[r.index]["input"], r.input);
  };
  h.on_progress = [t](size_t done, size_t total, const std::string&, const std::string& status) {
    std::lock_guard<std::mutex> lock(t->mu);
    t->progress.push_back(std::to_string(done) + "/" + std::to_string(total) + " " + status);
  };
  return h;
}

class BatchHooksTest : public TempDirTest {
 protected:
  void SetUp() override {  // in/: a.png, b.png, c.png (three composites)
    TempDirTest::SetUp();
    fs::create_directories(dir / "in");
    const char* sources[] = {"0000_trouser.png", "0001_sneaker.png", "0002_bag.png"};
    for (int i = 0; i < 3; ++i)
      fs::copy_file(kData + "/composites/" + sources[i], dir / "in" / (std::string(1, static_cast<char>('a' + i)) + ".png"));
  }
  /// render's request for in/ -> out/, one worker, plus `more`.
  CheckedRequest request(GivenSettings more = {}) const {
    more.push_back({"inputs", {(dir / "in").string()}});
    more.push_back({"out", {(dir / "out").string()}});
    more.push_back({"jobs", {"1"}});
    return make_request("render", more);
  }
};

}  // namespace

TEST_F(BatchHooksTest, RowsProgressAndLinesGoToTheHooks) {
  std::ofstream(dir / "in" / "broken.png") << "not a png";
  Told t;
  const CheckedRequest r = request();
  EXPECT_EQ(run_render(r.ro, r.bo, hooks_into(&t)), 1);
  // Every input's row, in manifest order (sorted inputs), without a manifest file.
  ASSERT_EQ(t.rows.size(), 4u);
  const std::vector<std::string> names{"a.png", "b.png", "broken.png", "c.png"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(fs::path(t.rows[i]["input"].get<std::string>()).filename(), names[i]);
    EXPECT_EQ(t.rows[i]["status"], i == 2 ? "failed" : "done") << i;
  }
  EXPECT_TRUE(t.rows[0].contains("outputs") && t.rows[0].contains("map_max"));
  EXPECT_NE(t.rows[2]["error"].get<std::string>().find("broken.png"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "out" / "manifest.jsonl"));
  EXPECT_EQ(t.progress, (std::vector<std::string>{"1/4 done", "2/4 done", "3/4 failed", "4/4 done"}));
  // Standard output: each rendered image's line; standard error: the failure and the summary, the progress
  // as lines (no bar asked for).
  ASSERT_EQ(t.out.size(), 6u);  // "INPUT -> FILE" and its top-5 line, for each image rendered
  EXPECT_EQ(t.out[0], (dir / "in" / "a.png").string() + " -> " + (dir / "out" / "a.png").string());
  EXPECT_EQ(t.out[1].rfind("  top-5: Trouser ", 0), 0u) << t.out[1];
  EXPECT_EQ(t.bars, 0u);
  auto has = [&](const std::string& start) {
    for (const std::string& l : t.err)
      if (l.rfind(start, 0) == 0) return true;
    return false;
  };
  EXPECT_TRUE(has("attnmap: error: " + (dir / "in" / "broken.png").string() + ": "));
  EXPECT_TRUE(has("attnmap: 3 done, 1 failed, 0 skipped, "));
  EXPECT_TRUE(has("attnmap: 4/4 images, "));
  for (const std::string& l : t.out) EXPECT_EQ(l.find('\n'), std::string::npos) << l;
}

TEST_F(BatchHooksTest, TheBarIsDrawnThroughItsStream) {
  Told t;
  BatchHooks h = hooks_into(&t);
  h.progress_bar = true;
  const CheckedRequest r = request({{"quiet", {}}});
  EXPECT_EQ(run_render(r.ro, r.bo, h), 0);
  EXPECT_EQ(t.bars, 0u);  // -q: no progress at all
  EXPECT_TRUE(t.out.empty());
  EXPECT_TRUE(t.err.empty());
  EXPECT_EQ(t.rows.size(), 3u);
  Told t2;
  BatchHooks h2 = hooks_into(&t2);
  h2.progress_bar = true;
  const CheckedRequest r2 = request({{"skip_existing", {}}});
  EXPECT_EQ(run_render(r2.ro, r2.bo, h2), 0);
  EXPECT_GE(t2.bars, 2u);  // drawn, then cleared before the summary
  for (const std::string& l : t2.err) EXPECT_EQ(l.find("images,"), std::string::npos) << l;  // no progress lines
  for (const auto& [i, row] : t2.rows) EXPECT_EQ(row["status"], "skipped") << i;
}

TEST_F(BatchHooksTest, ALentModelIsUsedAndNamedByWeights) {
  auto model = std::make_shared<ViTWeights>(load_model(default_weights_path()));
  int lent = 0;
  Told t;
  BatchHooks h = hooks_into(&t);
  h.model = [&](const RenderOptions& opt, bool backward) {
    ++lent;
    auto w = std::make_shared<ViTWeights>(*model);
    finish_run_model(*w, opt, backward);
    return std::shared_ptr<const ViTWeights>(w);
  };
  const CheckedRequest r = request({{"weights", {"my-model-in-memory"}}});
  EXPECT_EQ(run_render(r.ro, r.bo, h), 0);
  EXPECT_EQ(lent, 1);
  ASSERT_EQ(t.rows.size(), 3u);
  const std::string png = slurp(dir / "out" / "a.png");
  EXPECT_NE(png.find("my-model-in-memory"), std::string::npos);  // the record names the lent model
}

TEST_F(BatchHooksTest, CancelledStopsAfterTheImageUnderWay) {
  Told t;
  BatchHooks h = hooks_into(&t);
  const CheckedRequest r = request({{"manifest", {(dir / "m.jsonl").string()}}});
  h.cancelled = [&t] {
    std::lock_guard<std::mutex> lock(t.mu);
    return !t.progress.empty();
  };
  EXPECT_EQ(run_render(r.ro, r.bo, h), 1);
  EXPECT_EQ(t.rows.size(), 1u);
  EXPECT_TRUE(fs::exists(dir / "out" / "a.png"));
  EXPECT_FALSE(fs::exists(dir / "out" / "b.png"));
  // The manifest keeps its header and the one row (not compacted); no summary line.
  std::ifstream f(dir / "m.jsonl");
  std::string line;
  size_t n = 0;
  while (std::getline(f, line)) ++n;
  EXPECT_EQ(n, 2u);
  for (const std::string& l : t.err) EXPECT_EQ(l.find(" done, "), std::string::npos) << l;
}
