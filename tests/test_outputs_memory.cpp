// The engine's results in memory (issue 42; engine/outputs.hpp, figure_in_memory, eval_report) are the
// command line's files bit for bit: one image's NAME.png, .npy, sidecar, panel and strips in every figure
// format; the figure command's figure; eval's --json report.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "app/cli/flags.hpp"
#include "app/commands/eval_cmd.hpp"
#include "app/commands/figure_cmd.hpp"
#include "app/commands/stats_cmd.hpp"
#include "engine/outputs.hpp"
#include "engine/provenance.hpp"
#include "engine/session.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

const fs::path kSet = fs::path(ATTNMAP_TEST_DIR) / "fixtures" / "eval_top5";
const std::string kWeights = (kSet / "weights.json").string();

class MemoryOutputs : public TempDirTest {};

// The model as the command line's run loads it for `opt`.
ModelSource model_for() {
  return [](const RenderOptions& opt, bool backward) { return load_run_model(opt, RunWeights{kWeights, std::nullopt}, backward); };
}

// A file's bytes.
std::vector<uint8_t> bytes_of(const fs::path& p) {
  const std::string s = slurp(p);
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace

TEST_F(MemoryOutputs, ImageBytesEqualTheRenderFiles) {
  const std::string img = (kSet / "images" / "0000_coat.png").string();
  const fs::path out = dir / "cli";
  const CliRun r = run_attnmap("render " + q(img) + " -w " + q(kWeights) + " --out " + q(out) +
                               " --views L1/mean,rollout --panel --strip layers --strip heads --save-raw"
                               " --figure-format png,pdf,svg -q");
  ASSERT_EQ(r.status, 0) << r.err;
  const GivenSettings given = {{"inputs", {img}},       {"weights", {kWeights}}, {"out", {out.string()}},
                               {"views", {"L1/mean,rollout"}}, {"panel", {}},   {"strip", {"layers", "heads"}},
                               {"save_raw", {}},       {"figure_format", {"png,pdf,svg"}},
                               {"quiet", {}}};
  const CheckedRequest rq = make_request("render", given);
  const std::shared_ptr<const ViTWeights> model = model_for()(rq.ro, false);
  RenderContext ctx = make_render_context(*model, rq.ro);
  const nlohmann::ordered_json settings = make_provenance(ctx, kWeights);
  ctx.provenance = provenance_text(settings);
  const std::vector<uint8_t> bytes = bytes_of(img);
  const Image photo = decode_image(bytes.data(), bytes.size(), img, rq.ro.load);
  const ImageOutputs mem = render_photo_outputs(ctx, settings, Job{img, (out / "0000_coat").string()}, photo,
                                                sha256_bytes(bytes.data(), bytes.size()));
  std::set<std::string> on_disk, in_memory;
  for (const auto& e : fs::recursive_directory_iterator(out))
    if (e.is_regular_file()) on_disk.insert(e.path().string());
  std::map<std::string, int> kinds;
  for (const OutputFile& f : mem.files) {
    in_memory.insert(f.file.path);
    ++kinds[f.format];
    EXPECT_EQ(f.bytes, bytes_of(f.file.path)) << f.file.path << ": the bytes in memory differ from the file";
    if (f.format == "png" && f.file.kind == OutputKind::MapPng) {
      std::string text;
      for (const PngText& t : read_png_text(f.file.path))
        if (t.keyword == kProvenanceKeyword) text = t.text;
      EXPECT_EQ(f.record, text) << f.file.path;
      EXPECT_NE(f.record.find("\"input_sha256\""), std::string::npos) << f.record;
    }
  }
  EXPECT_EQ(in_memory, on_disk);
  // 2 maps (.png, .npy, sidecar each); panel, layers, heads in 3 formats.
  EXPECT_EQ(kinds["npy"], 2);
  EXPECT_EQ(kinds["json"], 2);
  EXPECT_EQ(kinds["png"], 2 + 3);
  EXPECT_EQ(kinds["pdf"], 3);
  EXPECT_EQ(kinds["svg"], 3);
  EXPECT_EQ(mem.files.front().file.kind, OutputKind::Figure);  // written first, the maps last
  EXPECT_EQ(mem.files.back().file.kind, OutputKind::MapPng);
  EXPECT_EQ(mem.result.outputs.front(), (out / "0000_coat.L1-mean.png").string());
}

TEST_F(MemoryOutputs, FigureBytesEqualTheFigureCommandsFile) {
  const std::vector<std::string> imgs = {(kSet / "images" / "0000_coat.png").string(),
                                         (kSet / "images" / "0001_dress.png").string()};
  for (const std::string format : {"png", "svg"}) {
    const fs::path fig = dir / ("fig." + format);
    const CliRun r = run_attnmap("figure " + q(imgs[0]) + " " + q(imgs[1]) + " -w " + q(kWeights) +
                                 " --views photo,L1/mean,rollout,chefer -o " + q(fig) + " -q");
    ASSERT_EQ(r.status, 0) << r.err;
    const GivenSettings given = {{"inputs", imgs},   {"weights", {kWeights}}, {"views", {"photo,L1/mean,rollout,chefer"}},
                                 {"out", {fig.string()}}, {"quiet", {}}};
    std::vector<FigurePhoto> photos;
    for (const std::string& f : imgs) {
      const std::vector<uint8_t> b = bytes_of(f);
      photos.push_back({f, decode_image(b.data(), b.size(), f), sha256_bytes(b.data(), b.size())});
    }
    const FigureResult mem = figure_in_memory(make_request("figure", given).figure, format, photos, model_for(), kWeights);
    EXPECT_EQ(mem.format, format);
    EXPECT_EQ(mem.bytes, bytes_of(fig)) << format << ": the figure in memory differs from the file";
    EXPECT_EQ(mem.images, 2u);
    EXPECT_EQ(mem.views, 4u);
    const nlohmann::json record = nlohmann::json::parse(mem.record);
    EXPECT_EQ(record["command"], "figure");
    EXPECT_EQ(record["images"][1]["name"], "0001_dress.png");
  }
}

TEST_F(MemoryOutputs, EvalReportEqualsTheJsonFile) {
  const fs::path js = dir / "r.json";
  const std::string images = (kSet / "images").string(), masks = (kSet / "masks").string();
  const CliRun r = run_attnmap("eval " + q(images) + " --masks " + q(masks) + " -w " + q(kWeights) + " --json " +
                               q(js) + " --views L1/mean,rollout");
  ASSERT_EQ(r.status, 0) << r.err;
  const GivenSettings given = {{"inputs", {images}}, {"masks", {masks}}, {"weights", {kWeights}},
                               {"views", {"L1/mean,rollout"}}};
  std::vector<std::string> err;
  BatchHooks hooks;
  hooks.model = model_for();
  hooks.on_line = [&err](LineStream s, const std::string& text) {
    if (s == LineStream::Err) err.push_back(text);
  };
  const EvalResult mem = eval_report(make_request("eval", given).eo, hooks);
  EXPECT_EQ(mem.status, 0);
  EXPECT_EQ(nlohmann::json::parse(mem.report.dump()), nlohmann::json::parse(slurp(js)));
  EXPECT_EQ(mem.text, r.out) << "the text differs from what eval prints";
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.back().rfind("attnmap: 4 evaluated, 0 failed", 0), 0u) << err.back();
}

// stats' per-image lines (each image's "INPUT -> MAP" or error as it ends, the closing "wrote" line) come
// through the hooks, settings as {setting:id}; the command line prints exactly those lines on standard error.
TEST_F(MemoryOutputs, StatsLinesComeThroughTheHooks) {
  const std::string img = (kSet / "images" / "0000_coat.png").string();
  const std::string missing = (dir / "nosuch.png").string();
  const fs::path out = dir / "st";
  const CliRun r = run_attnmap("stats " + q(img) + " " + q(missing) + " -w " + q(kWeights) + " -o " + q(out) + " -j 1");
  ASSERT_EQ(r.status, 1) << r.err;
  StatsArgs a;
  a.inputs = {img, missing};
  a.out = out.string();
  a.model.weights = kWeights;
  a.jobs = 1;
  std::vector<std::string> err;
  BatchHooks hooks;
  hooks.on_line = [&err](LineStream s, const std::string& text) {
    EXPECT_EQ(s, LineStream::Err) << text;
    err.push_back(text);
  };
  EXPECT_EQ(compute_stats(check_stats_args(a), hooks), 1);
  ASSERT_EQ(err.size(), 3u);
  EXPECT_EQ(err[0], "attnmap: error: " + missing + ": no such file or folder");
  EXPECT_EQ(err[1], "attnmap: " + img + " -> " + (out / "outliers" / "0000_coat.png").string());
  EXPECT_EQ(err[2].rfind("attnmap: wrote ", 0), 0u) << err[2];
  EXPECT_EQ(r.err, err[0] + "\n" + err[1] + "\n" + err[2] + "\n");
}

// figure's lines come through the hooks too: a row that cannot be read is one error line, nothing written.
TEST_F(MemoryOutputs, FigureLinesComeThroughTheHooks) {
  const std::string img = (kSet / "images" / "0000_coat.png").string();
  const std::string missing = (dir / "nosuch.png").string();
  FigureArgs a;
  a.inputs = {img, missing};
  a.views = "photo,L1/mean";
  a.out = (dir / "fig.png").string();
  a.model.weights = kWeights;
  std::vector<std::string> err;
  BatchHooks hooks;
  hooks.on_line = [&err](LineStream s, const std::string& text) {
    if (s == LineStream::Err) err.push_back(text);
  };
  EXPECT_EQ(figure_to_file(check_figure_args(a), hooks), 1);
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0], "attnmap: error: " + missing + ": no such file or folder; no figure written");
  EXPECT_FALSE(fs::exists(dir / "fig.png"));
}
