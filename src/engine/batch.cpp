// batch.cpp - `attnmap render` over many inputs (run_render): after the checks and the plan (batch_plan.cpp),
// every image rendered by worker threads with its own error handling, skipped when its outputs exist (resume),
// its row, lines and progress given to the run's hooks (batch_hooks.hpp) and put in the manifest in input
// order; then the run's figures.
#include "engine/batch.hpp"
#include "engine/batch_plan.hpp"
#include "engine/output_plan.hpp"

#include <algorithm>
#include <new>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>
#include "engine/manifest.hpp"
#include "core/setting_ref.hpp"
#include "engine/provenance.hpp"
#include "engine/run_figures.hpp"
#include "engine/text/score_words.hpp"
#include "io/run_lock.hpp"
#include "core/names.hpp"
#include "model/classify.hpp"
#include "core/error.hpp"
#include "core/threads.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "model/vit.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

std::string with_path(const std::string& input, const std::string& msg) {
  return msg.compare(0, input.size(), input) == 0 ? msg : input + ": " + msg;
}

// run_render's steps, in the order it takes them: check the options, load the model, plan the jobs, check
// the manifest and output folder, run the jobs, write the summary.

/// One note when the system started fewer image workers than asked (a process limit: ulimit -u, a cgroup's
/// pids.max): the run goes on with those it has.
void note_fewer_workers(int got, int asked, bool quiet, const BatchHooks& hooks) {
  if (got < asked && !quiet)
    say(hooks, LineStream::Err, "attnmap: note: the system refused more threads (a process limit: ulimit -u, or the pids "
        "limit of a Slurm or Kubernetes cgroup): " + std::to_string(got) + " of the " + std::to_string(asked) +
        " image workers (-j) started; the run goes on with " + std::to_string(got));
}

/// --scale run, first pass: every job's maps computed (on `workers` threads) and kept (maps are small; the
/// photos are not kept), then one scale per unit over them all, into ctx->run_scales. A job that fails here
/// keeps its error for the second pass, which reports it as that image's failure.
struct Precomputed {
  std::vector<std::optional<ComputedViews>> views;
  std::vector<std::string> errors;
  std::map<std::string, RunScale> scales;  ///< the run's scale of each unit, with its counts
};
Precomputed precompute_views(RenderContext* ctx, const std::vector<Job>& jobs, int workers, const BatchHooks& hooks) {
  Precomputed p;
  p.views.resize(jobs.size());
  p.errors.resize(jobs.size());
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      try {
        p.views[i] = compute_job_views(*ctx, jobs[i]);
      } catch (const std::bad_alloc&) {
        p.errors[i] = jobs[i].input + ": out of memory" + address_limit_note();
      } catch (const std::exception& e) {
        p.errors[i] = spelled_settings(e.what());
      }
    }
  };
  run_on_threads(workers, worker, [&](int got) { note_fewer_workers(got, workers, ctx->opt->quiet, hooks); },
                 kLibraryThreadRoom);
  std::vector<const ComputedViews*> computed;
  for (const auto& v : p.views)
    if (v) computed.push_back(&*v);
  p.scales = run_scales_over(*ctx, computed);
  for (const auto& [units, r] : p.scales) ctx->run_scales[units] = r.scale;
  return p;
}

/// "attention probability 3.7e-07 .. 0.123 (the 99th percentile of 21952 values; 219 above it, up to 0.745,
/// drawn in the top colour)": the run's scales, for the terminal, and the warnings of scales on which most
/// maps peak in the bottom quarter.
std::string run_scales_text(const RenderContext& ctx, const Precomputed& pre, std::vector<std::string>* warnings) {
  std::string out;
  for (const auto& [units, s] : ctx.run_scales) {
    char buf[320];
    std::snprintf(buf, sizeof buf, "%s%s %.9g .. %.9g", out.empty() ? "" : "; ", units.c_str(), s.vmin, s.vmax);
    out += buf;
    const auto it = pre.scales.find(units);
    if (it == pre.scales.end()) continue;
    const RunScale& r = it->second;
    if (r.above > 0) {
      std::snprintf(buf, sizeof buf, " (the %gth percentile of %zu values; %zu above it, up to %.3g, drawn in the top colour)",
                    kRunScalePercentile, r.values, r.above, r.data_max);
      out += buf;
    }
    if (r.maps > 0 && 2 * r.dim > r.maps) {
      const std::string scale = setting_ref("scale");
      std::snprintf(buf, sizeof buf, "%s run: %zu of %zu %s maps peak below %.0f%% of the scale (under %.3g): they "
                    "are drawn in its darkest colours; %s figure gives each image's figures their own scale",
                    scale.c_str(), r.dim, r.maps, units.c_str(), 100 * kDimPeakFraction, s.vmin + kDimPeakFraction * (s.vmax - s.vmin), scale.c_str());
      warnings->push_back(buf);
    }
  }
  return out.empty() ? "no map was computed (every image failed), so there is no run scale" : out;
}

/// Runs a planned batch: the failures found while planning, then every job on the worker threads, each
/// image's outcome printed and put in the manifest in input order; then the summary line.
class BatchRun {
 public:
  /// `settings`: the run's record (make_provenance); `prev`: the earlier manifests' rows of these settings.
  /// `hooks`: where its rows, progress and lines go, and whether it is cancelled.
  BatchRun(const RenderContext& ctx, const BatchOptions& bopt, const JobPlan& plan, const std::string& manifest_path,
           const nlohmann::ordered_json& settings, std::map<std::string, PrevRow> prev, const BatchHooks& hooks,
           const Precomputed* pre = nullptr)
      : hooks_(hooks), ctx_(ctx), opt_(*ctx.opt), bopt_(bopt), plan_(plan), pre_(pre), n_pre_(plan.pre.size()),
        pre_rows_(bopt.shard_index == 1 ? n_pre_ : 0), settings_(nlohmann::json::parse(settings.dump())),
        prev_(std::move(prev)),
        manifest_(manifest_path, pre_rows_ + plan.jobs.size(),
                  manifest_path.empty() ? "" : manifest_header(settings, *ctx.opt, bopt, pre_rows_ + plan.jobs.size())),
        rows_(wants_run_figures(bopt) ? pre_rows_ + plan.jobs.size() : 0) {}

  /// Every input's label and manifest line, in manifest order, for --contact-sheet and --gallery (empty
  /// without them).
  const std::vector<RunRow>& rows() const { return rows_; }

  /// Inputs that failed before rendering (missing, unreadable folders): one error line each, in every shard,
  /// and one manifest entry each, in shard 1's manifest only (concatenated shard manifests list every input once).
  void report_planning_failures() {
    for (size_t i = 0; i < n_pre_; ++i) {
      error_line(plan_.pre[i].second);
      ++failed_;
      Outcome o;
      o.input = plan_.pre[i].first;
      o.status = "failed";
      o.error = plan_.pre[i].second;
      if (i < rows_.size()) rows_[i] = RunRow{o.input, manifest_line(o)};
      if (i < pre_rows_) put_row(i, o, manifest_line(o));
    }
  }

  /// Renders every job on `workers` threads (the calling thread alone for one).
  void run_jobs(int workers) {
    const size_t n = plan_.jobs.size();
    BatchProgress progress(hooks_, n, !opt_.quiet, bopt_.progress_every);
    progress_ = &progress;
    t0_ = std::chrono::steady_clock::now();
    std::atomic<size_t> next{0};
    auto worker = [&]() {
      for (size_t i = next++; i < n && !batch_cancelled(hooks_); i = next++) process(i);
    };
    run_on_threads(workers, worker, [&](int got) { note_fewer_workers(got, workers, opt_.quiet, hooks_); },
                   kLibraryThreadRoom);
    progress.clear();
    progress_ = nullptr;
  }

  /// The manifest rewritten with this run's rows alone, the summary line (unless quiet) and the exit
  /// status: 1 when any input failed.
  int finish() {
    const std::string err = manifest_.compact();
    if (!err.empty()) error_line(err);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (!plan_.passed_note.empty()) say(hooks_, LineStream::Err, "attnmap: note: " + plan_.passed_note);
    if (!opt_.quiet) {
      if (no_stats_ > 0)
        say(hooks_, LineStream::Err, "attnmap: note: " + std::to_string(no_stats_) + " skipped image(s) have no "
            "statistics in the manifest: no row of an earlier manifest made with these settings, none in the PNG and no "
            ".npy to compute them from");
      char redone[64] = "";
      if (redone_ > 0) std::snprintf(redone, sizeof redone, " (%zu redone: settings changed)", redone_);
      char line[256];
      std::snprintf(line, sizeof line, "attnmap: %zu done%s, %zu failed, %zu skipped, %.2f s", done_, redone, failed_,
                    skipped_, secs);
      say(hooks_, LineStream::Err, line);
    }
    return failed_ ? 1 : 0;
  }

 private:
  /// Refuses outputs that would replace an input or another input's overlay. Throws attnmap::Error.
  void check_output_names(const OutputPlan& plan) const {
    for (const PlannedFile& f : plan.files) {
      if (plan_.input_canon.count(canonical_or_empty(f.path)))
        throw Error("output " + f.path + " would overwrite an input file; choose another " + setting_ref("out"));
      if (f.kind == OutputKind::Figure && plan_.overlay_paths.count(f.path))
        throw Error("output " + f.path + " would overwrite the overlay of another input of that name; rename it");
    }
  }

  /// What the outputs already there are worth (with --skip-existing): all attnmap's own and made with the
  /// run's settings (their records, read back, are same_settings) -> Same, the image is skipped; one of them
  /// made with other settings or with none recorded -> Changed (`*change` says what differs); else (one
  /// missing, a sidecar missing after an interrupted write, a file of the user's, which check_replaceable
  /// then refuses) -> Incomplete. Either way but Same, the image is rendered again.
  enum class Existing { Incomplete, Same, Changed };
  Existing existing_outputs(const Job& job, const OutputPlan& plan, std::string* change) const {
    bool complete = !plan.names_unknown, changed = false;
    const std::optional<nlohmann::json> want = image_settings(job);
    if (!want) return Existing::Incomplete;  // the input cannot be read: rendering it says why
    auto regular = [](const std::string& out) {
      std::error_code ec;
      return fs::is_regular_file(fs::symlink_status(out, ec));
    };
    auto compare = [&](const std::optional<nlohmann::json>& r) {
      if (r && same_settings(*r, *want)) return;
      if (!changed) *change = settings_change(r ? *r : nlohmann::json(), *want);
      changed = true;
    };
    // Every planned file must be there with the run's record: figures too (--panel, --strip, PDF/SVG formats),
    // so a run that adds one, or changes a setting a figure shows, redoes the image.
    for (const PlannedFile& f : plan.files) {
      if (f.kind == OutputKind::Sidecar) continue;  // read with its .npy
      if (!regular(f.path)) {
        complete = false;
        continue;
      }
      // attnmap's own file (else the image is incomplete; check_replaceable then refuses a file of the user's),
      // and its record compared (a PNG of attnmap's without one: "no settings recorded", redone).
      const FoundOutput found = find_output(f);
      if (!found.complete) {
        complete = false;
        continue;
      }
      compare(found.record);
    }
    return changed ? Existing::Changed : complete ? Existing::Same : Existing::Incomplete;
  }

  /// The record an output of `job` must carry: the run's with the input file's SHA-256 as it is now
  /// (image_provenance); nullopt when the input cannot be read.
  std::optional<nlohmann::json> image_settings(const Job& job) const {
    nlohmann::json want = settings_;
    try {
      want["input_sha256"] = sha256_file(job.input);
    } catch (const Error&) {
      return std::nullopt;
    }
    return want;
  }

  /// A skipped image's statistics (and top-5): from the earlier manifests' row of these settings, else from
  /// its PNG (tEXt `attnmap:stats`), else computed from its .npy when that exists with these settings (a
  /// rank-3 --all-heads file fused as the view fuses heads: the same values as the map). Sets o->stats only
  /// when found.
  void carry_statistics(const Job& job, const std::string& png, const std::string& npy, Outcome* o) const {
    const auto it = prev_.find(job.input);
    std::optional<ImageStats> st = it != prev_.end() && it->second.stats ? it->second.stats : read_png_stats(png);
    if (st) {
      o->stats = st->stats;
      o->top5 = st->top5;
      return;
    }
    const std::optional<nlohmann::json> side = read_sidecar(npy_sidecar_path(npy));
    std::error_code ec;
    const std::optional<nlohmann::json> want = image_settings(job);
    if (!side || !want || !same_settings(*side, *want) || !fs::is_regular_file(fs::symlink_status(npy, ec)) ||
        !looks_written_by_attnmap_npy(npy))
      return;
    const HParams& hp = ctx_.model->hp;
    std::vector<int64_t> shape;
    std::vector<float> map = read_npy(npy, &shape);
    const int N = hp.grid_h * hp.grid_w;
    if (shape.size() == 3 && shape[0] == hp.num_heads && shape[1] == hp.grid_h && shape[2] == hp.grid_w)
      map = fuse_heads(map.data(), hp.num_heads, N, ctx_.head);
    else if (shape != std::vector<int64_t>{hp.grid_h, hp.grid_w})
      return;
    o->stats = map_statistics(map, hp.grid_h, hp.grid_w);
  }

  /// A skipped image's status and time, from the earlier manifests' last "done" row for it when that row lists
  /// every output this run would write (resolved paths: the run that made them); sets o->made_by only then.
  void carry_made_by(const Job& job, Outcome* o) const {
    const auto it = prev_.find(job.input);
    if (it == prev_.end() || !it->second.made_by) return;
    auto resolved = [](const std::string& p) {
      std::string c = canonical_or_empty(p);
      return c.empty() ? p : c;
    };
    std::set<std::string> listed;
    for (const std::string& p : it->second.outputs) listed.insert(resolved(p));
    for (const std::string& p : o->outputs)
      if (!listed.count(resolved(p))) return;
    o->made_by = it->second.made_by;
  }

  /// An image whose outputs exist, made with the run's settings: skipped, its row listing them with the
  /// statistics and (when an earlier manifest has them) the status and time of the run that made them.
  void skip(const Job& job, const OutputPlan& plan, Outcome* o) const {
    o->status = "skipped";
    const std::vector<std::string> pngs = plan.paths(OutputKind::MapPng), npys = plan.paths(OutputKind::MapNpy);
    o->outputs = pngs;  // as a rendered image's row lists them: the map PNGs, the .npy files, the figures
    o->outputs.insert(o->outputs.end(), npys.begin(), npys.end());
    for (const std::string& fig : plan.paths(OutputKind::Figure)) o->outputs.push_back(fig);
    for (const std::string& page : plan.paths(OutputKind::Explore)) o->outputs.push_back(page);
    carry_statistics(job, pngs.front(), npys.empty() ? job.out_base + ".npy" : npys.front(), o);
    carry_made_by(job, o);
  }

  /// One image: skipped, rendered, or failed (the error caught here, with the input's path).
  /// `*change`: with --skip-existing, what differed in outputs made with other settings ("" otherwise).
  Outcome handle(size_t index, const Job& job, std::vector<std::string>* notes, std::string* change) const {
    Outcome o;
    o.input = job.input;
    OutputPlan plan = plan_outputs(ctx_, job);
    if (bopt_.skip_existing && plan.names_unknown)  // --class topK: the classes an earlier run explained
      if (const std::optional<std::vector<int>> earlier = earlier_top_classes(ctx_, job)) plan = plan_outputs(ctx_, job, &*earlier);
    const auto attempt = fs::file_time_type::clock::now();
    try {
      check_output_names(plan);
      const Existing ex = bopt_.skip_existing ? existing_outputs(job, plan, change) : Existing::Incomplete;
      if (ex == Existing::Same) {
        skip(job, plan, &o);
      } else {
        check_replaceable(plan);
        if (pre_ && !pre_->views[index]) throw Error(pre_->errors[index]);
        RenderResult res = pre_ ? draw_job_views(ctx_, job, *pre_->views[index]) : render_image(ctx_, job);
        o.status = "done";
        o.outputs = res.outputs;
        o.stats = res.stats;
        o.top5 = std::move(res.top5);
        o.shown = std::move(res.shown);
        o.shown_more = std::move(res.shown_more);
        *notes = std::move(res.notes);
      }
    } catch (const std::bad_alloc&) {
      o.status = "failed";
      o.error = job.input + ": out of memory" + address_limit_note();
    } catch (const std::exception& e) {
      o.status = "failed";
      o.error = with_path(job.input, spelled_settings(e.what()));
    } catch (...) {
      o.status = "failed";
      o.error = job.input + ": unknown error";
    }
    if (o.status == "failed") remove_written_since(plan, attempt);  // a failed image leaves none of its files
    return o;
  }

  /// Job i: handled, then its lines printed, counted and put in the manifest under the lock.
  void process(size_t i) {
    const Job& job = plan_.jobs[i];
    const auto ti = std::chrono::steady_clock::now();
    std::vector<std::string> notes;
    std::string change;
    Outcome o = handle(i, job, &notes, &change);
    o.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ti).count();
    std::string line = manifest_line(o);

    std::lock_guard<std::mutex> lock(mu_);
    progress_->clear();
    for (const auto& note : notes) {  // a note written "warning: ..." (a tiny image) is printed as a warning
      const bool warn = note.rfind(kWarningNote, 0) == 0;
      say(hooks_, LineStream::Err, (warn ? "attnmap: warning: " : "attnmap: note: ") +
          printable(job.input + ": " + (warn ? note.substr(std::string(kWarningNote).size()) : note)));
    }
    if (o.status == "failed") {
      ++failed_;
      error_line(o.error);
    } else if (o.status == "skipped") {
      ++skipped_;
      if (!o.stats) ++no_stats_;
    } else {
      ++done_;
      if (!change.empty() && redone_++ == 0 && !opt_.quiet)  // the first one says why; the summary counts them
        say(hooks_, LineStream::Err, "attnmap: note: " + printable(job.input + ": rendered again, its outputs were made "
                                                                   "with other settings (" + change + ")"));
      if (!opt_.quiet) print_done(o);
    }
    if (!rows_.empty()) rows_[pre_rows_ + i] = RunRow{run_row_label(job.input, job.out_base, opt_.out_dir), line};
    put_row(pre_rows_ + i, o, std::move(line));
    progress_->tick(done_ + failed_ + skipped_ - n_pre_, skipped_);
    if (hooks_.on_progress) hooks_.on_progress(done_ + failed_ + skipped_ - n_pre_, plan_.jobs.size(), job.input, o.status);
  }

  /// A rendered image's lines on standard output: "INPUT -> FILE", the lines under it, the files it also
  /// wrote, its top-5 classes.
  void print_done(const Outcome& o) const {
    say(hooks_, LineStream::Out, printable(o.input + " -> " + (o.shown.empty() ? o.outputs.front() : o.shown)));
    for (const std::string& l : o.shown_more) say(hooks_, LineStream::Out, "  " + printable(l));
    if (const std::string also = also_wrote_line(o.outputs, o.shown, o.shown_more); !also.empty())
      say(hooks_, LineStream::Out, "  " + printable(also));
    if (o.top5.empty()) return;
    const ZeroShotHead& texts = ctx_.model->zero_shot;  // CLIP's texts: the softmax is over them alone
    const std::string aside = zero_shot_rule_aside(texts.rule);  // SigLIP: each text's own sigmoid
    const std::string what = texts.present() ? "  top-" + std::to_string(o.top5.size()) + " of " + counted(static_cast<size_t>(texts.classes), "text") +
                                                 " (zero-shot" + (aside.empty() ? "" : "; " + aside) + "): " : "  top-5: ";
    say(hooks_, LineStream::Out, what + printable(format_top_k(o.top5)));
  }

  /// "attnmap: error: MESSAGE" on standard error.
  void error_line(const std::string& message) const { say(hooks_, LineStream::Err, "attnmap: error: " + printable(message)); }

  /// Row `index` of the manifest (lock held): to the hooks' sink, then to the manifest (an error line when
  /// writing it failed).
  void put_row(size_t index, const Outcome& o, std::string line) {
    if (hooks_.on_row) hooks_.on_row(BatchRow{index, o.input, o.status, line});
    const std::string err = manifest_.put(index, std::move(line));
    if (!err.empty()) error_line(err);
  }

  const BatchHooks& hooks_;
  const RenderContext& ctx_;
  const RenderOptions& opt_;
  const BatchOptions& bopt_;
  const JobPlan& plan_;
  const Precomputed* pre_;  // --scale run: the first pass's maps, by job index; null otherwise
  const size_t n_pre_;
  const size_t pre_rows_;  // of them, the ones this run's manifest lists: all in shard 1, none in the others
  const nlohmann::json settings_;          // the run's record, compared with the outputs' records
  const std::map<std::string, PrevRow> prev_;  // the earlier manifests' rows of these settings, by input
  Manifest manifest_;
  std::vector<RunRow> rows_;  // with --contact-sheet / --gallery: every input's row, for the run's figures
  std::mutex mu_;  // guards the counters, the terminal and the manifest
  size_t done_ = 0, failed_ = 0, skipped_ = 0, redone_ = 0, no_stats_ = 0;
  BatchProgress* progress_ = nullptr;
  std::chrono::steady_clock::time_point t0_;
};

/// --scale run's first pass (precompute_views), its bounds put in the run's record `settings` and printed
/// (under -q too: they are what --scale VMIN,VMAX needs to draw more images the same way).
Precomputed run_scale_pass(RenderContext* ctx, nlohmann::ordered_json* settings, const JobPlan& plan, int workers,
                           const BatchHooks& hooks) {
  Precomputed pre = precompute_views(ctx, plan.jobs, workers, hooks);
  nlohmann::ordered_json bounds = nlohmann::ordered_json::object();
  for (const auto& [units, sc] : ctx->run_scales) bounds[units] = {sc.vmin, sc.vmax};
  (*settings)["scale_bounds"] = bounds;  // part of how every file was made: each record, the manifest's header
  ctx->provenance = provenance_text(*settings);
  std::vector<std::string> warnings;
  const std::string text = run_scales_text(*ctx, pre, &warnings);
  say(hooks, LineStream::Err, "attnmap: note: " + printable(spelled_settings(setting_ref("scale") + " run: " + text)));
  for (const std::string& w : warnings) say(hooks, LineStream::Err, "attnmap: warning: " + printable(spelled_settings(w)));
  return pre;
}

}  // namespace

int run_render(const RenderOptions& opt, const BatchOptions& bopt, const BatchHooks& hooks) {
  JobPlan jobs = plan_run(opt, bopt);  // the inputs walked: nothing to render is refused before the model loads
  check_something_to_render(jobs, opt.inputs, bopt, hooks);
  check_run_paths_early(jobs, opt, bopt);  // the manifest's and run figures' paths, before the model loads
  plan_load_threads();  // the weights packed on every core (plan_threads below sets the pool for the images)
  const RunModel model = open_run_model(opt, hooks);  // lent by the program, else -w's (fetched from the Hub)
  RenderContext ctx = make_render_context(*model.weights, opt);
  nlohmann::ordered_json settings = make_provenance(ctx, model.source.path);  // hashes the weights once
  ctx.provenance = provenance_text(settings);
  RunLock lock;  // held to the run's end
  const RunPlan runplan = plan_batch(std::move(jobs), ctx, bopt, model.source.path, &lock, hooks);
  const JobPlan& plan = runplan.jobs;
  const std::string& manifest_path = runplan.manifest_path;
  const int workers = plan_threads(bopt, plan.jobs.size());
  std::optional<Precomputed> pre;
  if (opt.scale && opt.scale->kind == ScaleKind::Run) pre = run_scale_pass(&ctx, &settings, plan, workers, hooks);
  // Read before this run appends to its manifest: skipped images keep the statistics, status and time that
  // earlier runs recorded (the run's own manifest; after shards, theirs).
  std::map<std::string, PrevRow> prev;
  if (bopt.skip_existing)
    prev = read_previous_rows(earlier_manifests(manifest_path, opt.out_dir, bopt.shard_count),
                              nlohmann::json::parse(settings.dump()));
  BatchRun run(ctx, bopt, plan, manifest_path, settings, std::move(prev), hooks, pre ? &*pre : nullptr);
  run.report_planning_failures();
  run.run_jobs(workers);
  if (batch_cancelled(hooks)) return 1;  // interrupted: the manifest keeps its rows uncompacted, no run figures
  if (!opt.quiet)  // a fixed --scale that hid peaks: one line per unit for the whole run
    for (const std::string& n : ctx.clip_tally->notes(opt)) say(hooks, LineStream::Err, "attnmap: note: " + printable(n));
  const int figures = write_run_figures(opt, bopt, run.rows(), nlohmann::json::parse(settings.dump()), ctx.provenance,
                                        sheet_scale(ctx, run.rows()), hooks);
  return std::max(run.finish(), figures);
}

}  // namespace attnmap
