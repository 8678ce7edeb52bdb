// stats.cpp - stats' run (stats.hpp): the per-image computation on -j workers, the outlier maps, the
// manifest and the run. The maths is maps/head_stats.hpp's; the tables, JSON and figures are stats_report.cpp's.
#include "core/names.hpp"
#include "engine/stats/stats.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "core/threads.hpp"
#include "draw/colormap.hpp"
#include "draw/plots.hpp"
#include "engine/batch_plan.hpp"
#include "engine/manifest.hpp"
#include "engine/paths.hpp"
#include "engine/provenance.hpp"
#include "engine/session.hpp"
#include "engine/walk.hpp"
#include "io/hash.hpp"
#include "io/output_files.hpp"
#include "model/cait.hpp"
#include "model/vit.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

/// The outlier map of one image: the block's patch-token norms over the photo (overlay on the image's own
/// norm range), each outlier patch outlined in white over black, as a figure: a title saying what is shown
/// (the block, the threshold and its rule, the count) and a colour bar of the norms with the threshold
/// marked (draw/plots.hpp write_outlier_figure). Written with the image's record.
void write_outlier_map(const std::string& path, const Image& photo, const PhotoBox& box, const std::vector<float>& norms,
                       const NormSummary& ns, const StatsRun& run, const StyleOptions& st, const std::string& record) {
  const TokenLayout& lay = run.layout;
  GridMap gm{std::vector<float>(norms.begin() + lay.num_prefix, norms.end()), lay.grid_w, lay.grid_h};
  Scale sc = scale_over({&gm.values}, "token norm (L2, residual stream)");
  Image img = draw_styled(photo, box, gm, sc, st);
  const int lw = std::max(1, std::min(photo.width, photo.height) / 150);
  auto put = [&](int x, int y, uint8_t v) {
    if (x < 0 || y < 0 || x >= img.width || y >= img.height) return;
    uint8_t* p = &img.rgb[(static_cast<size_t>(y) * img.width + x) * 3];
    p[0] = p[1] = p[2] = v;
  };
  int outliers = 0;
  for (int i = 0; i < lay.patches(); ++i) {
    if (!(gm.values[static_cast<size_t>(i)] > ns.threshold)) continue;
    ++outliers;
    const int r = i / lay.grid_w, c = i % lay.grid_w;
    const int x0 = box.x0 + c * box.w / lay.grid_w, x1 = box.x0 + (c + 1) * box.w / lay.grid_w - 1;
    const int y0 = box.y0 + r * box.h / lay.grid_h, y1 = box.y0 + (r + 1) * box.h / lay.grid_h - 1;
    for (int k = 0; k < 2 * lw; ++k) {  // white inside, black outside it: seen on any colour
      const uint8_t v = k < lw ? 255 : 0;
      for (int x = x0 - k; x <= x1 + k; ++x) put(x, y0 - k, v), put(x, y1 + k, v);
      for (int y = y0 - k; y <= y1 + k; ++y) put(x0 - k, y, v), put(x1 + k, y, v);
    }
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "Token norms after block %d (0\u2011based, of %d); outlined: %d of %d patches above the outlier "
                "threshold %.4g (median + %g\u00b71.4826\u00b7MAD)",
                run.norm_block, run.depth, outliers, lay.patches(), ns.threshold, run.outlier_k);
  OutlierFigure fig;
  fig.title = buf;
  fig.scale = sc;
  fig.threshold = ns.threshold;
  fig.cmap = st.cmap;
  fs::create_directories(fs::path(path).parent_path());
  write_outlier_figure(path, img, fig, run.figures.dpi, record);
}

/// One image through the model: every block's head statistics from its probabilities (on_probs) and its
/// token norms from the residual stream (on_tokens), the summaries, the outlier map.
ImageStatsResult compute_image(const ViTWeights& model, const StatsPlan& p, const StatsRun& run, const Job& job,
                               const std::vector<double>& dist) {
  const auto t0 = std::chrono::steady_clock::now();
  ImageStatsResult r;
  r.input = job.input;
  const HParams& hp = model.hp;
  const Image photo = load_image(job.input, p.ro.load);
  const ModelInput mi = preprocess(photo, hp.image_w, hp.image_h, p.ro.resize, hp.mean.data(), hp.std.data(),
                                   hp.crop_pct.value_or(0.875f));
  r.blocks.resize(static_cast<size_t>(hp.depth));
  r.norms.resize(static_cast<size_t>(hp.depth));
  ForwardOptions fo;
  fo.on_probs = [&](int, int l, const float* probs) { r.blocks[static_cast<size_t>(l)] = block_head_stats(probs, run.layout, dist); };
  fo.on_tokens = [&](int, int l, const float* x) { r.norms[static_cast<size_t>(l)] = token_norms(x, hp.tokens(), hp.dim); };
  (void)vit_forward(model, mi.chw.data(), fo);
  for (const std::vector<float>& n : r.norms) r.norm_summary.push_back(summarize_norms(n, run.layout, run.num_registers, run.outlier_k));
  PhotoBox box;
  box_pixels(mi.box, photo.width, photo.height, &box.x0, &box.y0, &box.w, &box.h);
  r.outlier_map = job.out_base + ".png";
  const std::string record = image_provenance(run.figures.provenance, sha256_file(job.input));
  const size_t nb = static_cast<size_t>(run.norm_block);
  write_outlier_map(r.outlier_map, photo, box, r.norms[nb], r.norm_summary[nb], run, p.style, record);
  r.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

/// The run's layout, names and settings record from the loaded model.
StatsRun make_run(const StatsPlan& p, const ViTWeights& model, const std::string& weights_path) {
  const HParams& hp = model.hp;
  if (!hp.residual_mlp)
    throw Error("this model is a single attention layer (seed layout) without a residual stream: attnmap stats needs "
                "a ViT with blocks");
  if (const std::string why = cait_rollout_unavailable(hp); !why.empty())  // CaiT (model/cait.hpp)
    throw Error("attnmap stats reads every block's attention over every token (class-token, distance and entropy "
                "statistics), which this model does not have: " + why);
  StatsRun run;
  run.layout = TokenLayout{hp.num_heads, hp.num_prefix, hp.class_token, hp.grid_w, hp.grid_h, hp.patch};
  run.depth = hp.depth;
  run.num_registers = hp.num_registers;
  run.prefix_names = prefix_token_names(hp.num_dist, hp.num_registers);
  run.norm_block = with_prefix(setting_ref("norm_block"), [&] { return resolve_layer(p.norm_block, hp.depth); });
  run.outlier_k = p.outlier_k;
  run.bins = p.bins;
  run.width_in = p.width_in;
  run.notes = p.notes;
  run.out_dir = p.ro.out_dir;
  RenderContext ctx;
  ctx.model = &model;
  ctx.opt = &p.ro;
  run.record = make_provenance(ctx, weights_path);
  run.record["command"] = "stats";
  run.record["view"] = "per-head statistics";
  run.record["outlier_k"] = p.outlier_k;
  run.record["norm_block"] = run.norm_block;
  run.record["bins"] = p.bins;
  if (p.notes) run.record["notes"] = true;
  run.figures.formats = p.formats;
  run.figures.dpi = p.dpi;
  return run;
}

/// The files a stats manifest must not replace (check_manifest_path, as render's): the weights and the
/// program, the inputs, and the run's own outputs (its tables, JSON, figures and outlier maps).
std::vector<ReadFile> stats_reads(const RenderOptions& ro, const std::vector<Job>& jobs, const std::string& weights_path) {
  std::vector<ReadFile> reads = weights_path.empty() ? std::vector<ReadFile>{} : model_reads(weights_path);
  for (const std::string& in : ro.inputs) reads.push_back({in, "an input"});
  for (const Job& j : jobs) {
    reads.push_back({j.input, "an input"});
    reads.push_back({j.out_base + ".png", "an output of this run"});  // its outlier map
  }
  for (const std::string& f : stats_report_paths(ro.out_dir, {FigureFormat::Png, FigureFormat::Pdf, FigureFormat::Svg}))
    reads.push_back({f, "an output of this run"});  // every format: an earlier run's figures are outputs too
  return reads;
}

}  // namespace

int compute_stats(const StatsPlan& p, const BatchHooks& hooks) {
  const RenderOptions& ro = p.ro;
  std::vector<std::string> missing;
  std::vector<std::pair<std::string, std::string>> unreadable;
  std::map<std::string, size_t> passed_over;
  const std::vector<Job> jobs = plan_jobs(ro.inputs, (fs::path(ro.out_dir) / "outliers").string(), &missing, p.bo.ext,
                                          &unreadable, &passed_over);
  if (const std::string none = all_inputs_missing(ro.inputs, missing, "compute"); !none.empty()) throw Error(none);
  if (jobs.empty() && missing.empty() && unreadable.empty()) throw Error(no_images_message(ro.inputs, p.bo.ext));
  check_output_folder_name(ro);  // -o and --manifest refused before the model loads, as render's
  if (!p.bo.manifest.empty())
    (void)check_output_file(setting_ref("manifest"), p.bo.manifest, stats_reads(ro, jobs, local_weights_path(ro.weights)));
  const RunWeights weights = run_weights(ro.weights, ro.quiet, hooks);  // a path, or a Hub name fetched into the cache
  const std::string& weights_path = weights.path;
  const std::shared_ptr<const ViTWeights> loaded = load_run_model(ro, weights, false, hooks);
  const ViTWeights& model = *loaded;
  StatsRun run = make_run(p, model, weights_path);
  const std::string manifest_path = check_manifest_path(p.bo, stats_reads(ro, jobs, weights_path));
  prepare_output_folder(ro);  // render's checks: a file in the way, a folder that cannot be made or written
  run.figures.provenance = provenance_text(run.record);
  if (const std::string note = passed_over_summary(passed_over); !note.empty() && !ro.quiet)
    say(hooks, LineStream::Err, "attnmap: note: " + printable(note));
  say(hooks, LineStream::Err, default_model_note(ro, false));
  say(hooks, LineStream::Err, precision_speed_note(ro));

  std::vector<ImageStatsResult> results(missing.size() + unreadable.size() + jobs.size());
  size_t k = 0;
  for (const std::string& m : missing) results[k].input = m, results[k++].error = m + ": no such file or folder";
  for (const auto& u : unreadable) results[k].input = u.first, results[k++].error = u.second;
  const size_t first_job = k;
  const std::vector<double> dist = patch_distances(run.layout.grid_w, run.layout.grid_h, run.layout.patch);
  Manifest manifest(manifest_path, results.size(), p.bo.manifest.empty() ? "" : manifest_header(run.record, ro, p.bo, results.size()));
  std::mutex lock;
  auto finish = [&](size_t i) {  // each image's line and manifest row as it ends, under the lock
    const ImageStatsResult& r = results[i];
    std::lock_guard<std::mutex> g(lock);
    if (!r.error.empty()) say(hooks, LineStream::Err, "attnmap: error: " + printable(r.error));
    else if (!ro.quiet) say(hooks, LineStream::Err, "attnmap: " + printable(r.input) + " -> " + printable(r.outlier_map));
    Outcome o{r.input, r.error.empty() ? "done" : "failed", r.error, {}, r.milliseconds, std::nullopt, {}, "", {}, std::nullopt};
    if (!r.outlier_map.empty()) o.outputs.push_back(r.outlier_map);
    if (const std::string err = manifest.put(i, manifest_line(o)); !err.empty())
      say(hooks, LineStream::Err, "attnmap: error: " + printable(err));
  };
  for (size_t i = 0; i < first_job; ++i) finish(i);
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t j = next++; j < jobs.size(); j = next++) {
      ImageStatsResult& r = results[first_job + j];
      try {
        r = compute_image(model, p, run, jobs[j], dist);
      } catch (const std::exception& e) {
        const std::string msg = spelled_settings(failure_text(e));  // into stats.json and the manifest as printed
        r.input = jobs[j].input;
        r.error = msg.compare(0, r.input.size(), r.input) == 0 ? msg : r.input + ": " + msg;
        r.outlier_map.clear();
      }
      finish(first_job + j);
    }
  };
  run_on_threads(plan_threads(p.bo, jobs.size()), worker, nullptr, kLibraryThreadRoom);
  int failed = 0;
  for (const ImageStatsResult& r : results) failed += r.error.empty() ? 0 : 1;
  if (static_cast<size_t>(failed) == results.size()) {
    say(hooks, LineStream::Err, "attnmap: error: every input failed; no statistics written");
    return 1;
  }
  try {
    const std::vector<std::string> wrote = write_stats_report(run, results);
    if (!ro.quiet)
      say(hooks, LineStream::Err,
          "attnmap: wrote " + counted(wrote.size(), "file") + " in " + printable(ro.out_dir) + " (" +
              counted(results.size() - static_cast<size_t>(failed), "image") +
              (failed ? ", " + std::to_string(failed) + " failed" : std::string()) + ")");
  } catch (const std::exception& e) {
    say(hooks, LineStream::Err, "attnmap: error: " + printable(failure_text(e)));
    return 1;
  }
  if (const std::string err = manifest.compact(); !err.empty()) say(hooks, LineStream::Err, "attnmap: error: " + printable(err));
  return failed ? 1 : 0;
}

}  // namespace attnmap
