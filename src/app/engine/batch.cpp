// batch.cpp - `attnmap render` over many inputs (run_render): the options checked, the jobs planned, every
// image rendered by worker threads with its own error handling, skipped when its outputs exist (resume),
// printed, counted and put in the manifest in input order, with progress; then the run's figures.
#include "app/engine/batch.hpp"
#include "app/engine/output_plan.hpp"
#include <unistd.h>

#include <algorithm>
#include <new>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>
#include "app/engine/manifest.hpp"
#include "app/cli/options.hpp"
#include "app/engine/provenance.hpp"
#include "app/engine/run_figures.hpp"
#include "io/run_lock.hpp"
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

std::string fmt_duration(double s) {
  if (!(s >= 0) || s > 359999) return "--:--";
  const long t = std::lround(s);
  char b[32];
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%ld:%02ld", t / 60, t % 60);
  return b;
}

/// Progress on standard error: a redrawn bar on a terminal, a plain line every `every` images otherwise.
class Progress {
 public:
  Progress(size_t total, bool enabled, int every)
      : total_(total), enabled_(enabled && total > 0), tty_(::isatty(2) == 1), t0_(std::chrono::steady_clock::now()) {
    every_ = every > 0 ? static_cast<size_t>(every) : std::clamp<size_t>((total + 9) / 10, 1, 100);
  }
  /// Clears the bar so that a message can be printed on a clean line (lock held).
  void clear() {
    if (shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }
  /// One more image finished (lock held). `processed` counts skipped ones; `rendered` the others.
  void tick(size_t processed, size_t skipped) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    const double el = std::chrono::duration<double>(now - t0_).count();
    const size_t work = processed - skipped;  // images actually rendered (done or failed)
    const double rate = el > 0 ? static_cast<double>(work) / el : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total_ - processed) / rate : -1.0;
    // Nothing rendered yet, every image so far skipped: no rate or ETA to tell ("0.0 images/s, ETA --:--").
    char speed[96];
    if (work == 0)
      std::snprintf(speed, sizeof speed, processed == total_ ? "all %zu skipped" : "%zu skipped so far", skipped);
    else
      std::snprintf(speed, sizeof speed, "%.1f images/s, ETA %s", rate, fmt_duration(eta).c_str());
    char line[200];
    if (tty_) {
      if (processed < total_ && now - last_ < std::chrono::milliseconds(100) && shown_) return;
      last_ = now;
      const int width = 28;
      const int fill = static_cast<int>(static_cast<double>(width) * static_cast<double>(processed) /
                                        static_cast<double>(total_));
      std::string bar(static_cast<size_t>(fill), '#');
      bar.resize(static_cast<size_t>(width), '.');
      std::snprintf(line, sizeof line, "\r\033[K[%s] %zu/%zu  %s", bar.c_str(), processed, total_, speed);
      std::cerr << line << std::flush;
      shown_ = true;
    } else if (processed % every_ == 0 || processed == total_) {
      std::snprintf(line, sizeof line, "attnmap: %zu/%zu images, %s\n", processed, total_, speed);
      std::cerr << line << std::flush;
    }
  }

 private:
  size_t total_;
  bool enabled_, tty_;
  size_t every_ = 1;
  bool shown_ = false;
  std::chrono::steady_clock::time_point t0_, last_{};
};

// run_render's steps, in the order it takes them: check the options, load the model, plan the jobs, check
// the manifest and output folder, run the jobs, write the summary.

/// Options that need no model: -j, --shard, an --out that is an input folder, the --manifest name.
void check_batch_options(const RenderOptions& opt, const BatchOptions& bopt) {
  if (bopt.jobs < 0) throw Error("--jobs must be >= 1 (or 0 for the number of cores), found " + std::to_string(bopt.jobs));
  if (bopt.shard_count < 1 || bopt.shard_index < 1 || bopt.shard_index > bopt.shard_count)
    throw Error("--shard expects K/N with 1 <= K <= N");
  // -o naming an input folder: every run would render the previous run's overlays as new inputs.
  const std::string out_canon = canonical_or_empty(opt.out_dir);
  for (const std::string& in : opt.inputs) {
    std::error_code ec;
    if (!opt.out_dir.empty() && fs::is_directory(in, ec) && canonical_or_empty(in) == out_canon)
      throw Error("the output folder is the input folder " + in + "; choose another --out");
  }
  if (!bopt.manifest.empty()) check_output_name("--manifest", bopt.manifest);  // before the model loads
  check_run_figure_options(bopt);
  if (opt.scale && opt.scale->kind == ScaleKind::Run) {  // one scale over every map of the run needs them all
    if (bopt.skip_existing)
      throw Error("--scale run cannot be combined with --skip-existing: the run's scale needs every image's maps "
                  "(render them all again, or give the bounds: --scale VMIN,VMAX)");
    if (bopt.shard_count > 1)
      throw Error("--scale run cannot be combined with --shard: each shard would have a scale of its own (give the "
                  "bounds instead: --scale VMIN,VMAX)");
  }
}

/// One note when the system started fewer image workers than asked (a process limit: ulimit -u, a cgroup's
/// pids.max): the run goes on with those it has.
void note_fewer_workers(int got, int asked, bool quiet) {
  if (got < asked && !quiet)
    std::cerr << "attnmap: note: the system refused more threads (a process limit: ulimit -u, or the pids limit of "
              << "a Slurm or Kubernetes cgroup): " << got << " of the " << asked << " image workers (-j) started; "
              << "the run goes on with " << got << "\n";
}

/// --scale run, first pass: every job's maps computed (on `workers` threads) and kept (maps are small; the
/// photos are not kept), then one scale per unit over them all, into ctx->run_scales. A job that fails here
/// keeps its error for the second pass, which reports it as that image's failure.
struct Precomputed {
  std::vector<std::optional<ComputedViews>> views;
  std::vector<std::string> errors;
  std::map<std::string, RunScale> scales;  ///< the run's scale of each unit, with its counts
};
Precomputed precompute_views(RenderContext* ctx, const std::vector<Job>& jobs, int workers) {
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
        p.errors[i] = with_flags(e.what());
      }
    }
  };
  run_on_threads(workers, worker, [&](int got) { note_fewer_workers(got, workers, ctx->opt->quiet); },
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
      std::snprintf(buf, sizeof buf, "--scale run: %zu of %zu %s maps peak below %.0f%% of the scale (under %.3g): they "
                    "are drawn in its darkest colours; --scale figure gives each image's figures their own scale",
                    r.dim, r.maps, units.c_str(), 100 * kDimPeakFraction, s.vmin + kDimPeakFraction * (s.vmax - s.vmin));
      warnings->push_back(buf);
    }
  }
  return out.empty() ? "no map was computed (every image failed), so there is no run scale" : out;
}

/// Every input's job and this shard's, with what the per-image checks need.
struct JobPlan {
  std::vector<Job> all;   ///< every input, named over the whole sorted list
  std::vector<Job> jobs;  ///< this shard's: sorted index i with i % N == K-1
  std::vector<std::pair<std::string, std::string>> pre;  ///< (input, error): failed before rendering
  std::set<std::string> input_canon;    ///< the inputs' resolved paths: no output may replace one
  std::set<std::string> overlay_paths;  ///< every NAME.png: no NAME.heads.png may replace one
  /// passed_over_summary of the image files of types attnmap cannot decode ("" when none): printed under -q
  /// too, and not in the manifest (they are not inputs of the run).
  std::string passed_note;
};

JobPlan plan_run(const RenderOptions& opt, const BatchOptions& bopt) {
  JobPlan p;
  std::vector<std::string> missing;
  std::vector<std::pair<std::string, std::string>> unreadable;
  std::map<std::string, size_t> passed_over;  // image files of types attnmap cannot decode, by extension
  p.all = plan_jobs(opt.inputs, opt.out_dir, &missing, bopt.ext, &unreadable, &passed_over);
  p.passed_note = passed_over_summary(passed_over);
  for (const auto& m : missing) p.pre.push_back({m, m + ": no such file or folder"});
  for (const auto& u : unreadable) p.pre.push_back(u);
  for (const auto& j : p.all) p.input_canon.insert(canonical_or_empty(j.input));
  // NAME.heads.png of one input must not be another input's overlay (inputs "x.png" and "x.heads.png").
  for (const auto& j : p.all) p.overlay_paths.insert(j.out_base + ".png");
  // Names were resolved over all inputs first, so every shard names a file exactly as the full run does.
  for (size_t i = 0; i < p.all.size(); ++i)
    if (i % static_cast<size_t>(bopt.shard_count) == static_cast<size_t>(bopt.shard_index - 1)) p.jobs.push_back(p.all[i]);
  return p;
}

/// The files a file the run writes besides its images' outputs (the manifest, the contact sheet, the
/// gallery) must not replace: the weights (and their side configs), the program, the inputs, every output
/// of the run's images (of every shard: the shards together write one full run's files), the label font.
std::vector<ReadFile> run_reads(const RenderOptions& opt, const std::string& weights_path, const JobPlan& plan,
                                const RenderContext& ctx) {
  std::vector<ReadFile> reads = model_reads(weights_path);
  for (const std::string& in : opt.inputs) reads.push_back({in, "an input"});
  for (const Job& j : plan.all) reads.push_back({j.input, "an input"});
  for (const Job& j : plan.all)  // every shard's: the shards together write one full run's files
    for (const PlannedFile& f : plan_outputs(ctx, j).files) reads.push_back({f.path, "an output of this run"});
  if (!ctx.font_file.empty()) reads.push_back({ctx.font_file, "the label font"});
  if (!opt.labels_file.empty()) reads.push_back({opt.labels_file, "the --labels file"});
  return reads;
}

/// Nothing to render is a usage error (exit 2, before any folder is made): no image in the inputs (an --ext
/// that picks none says which extensions it asked for), or every input named on the command line missing. A
/// missing input beside others that exist stays a failure of its own (exit 1, a manifest row).
void check_something_to_render(const JobPlan& plan, const std::vector<std::string>& inputs, const BatchOptions& bopt) {
  if (!plan.all.empty()) return;
  const bool all_missing = !plan.pre.empty() && std::all_of(plan.pre.begin(), plan.pre.end(), [](const auto& p) {
    return p.second == p.first + ": no such file or folder";
  });
  if (all_missing) {
    std::string names;
    for (size_t i = 0; i < plan.pre.size() && i < 3; ++i) names += (i ? ", " : "") + plan.pre[i].first;
    if (plan.pre.size() > 3) names += ", ...";
    throw Error(names + ": no such file or folder; nothing to render");
  }
  if (!plan.pre.empty()) return;  // unreadable folders and the like: failures of their own (exit 1)
  if (!plan.passed_note.empty()) std::cerr << "attnmap: note: " << plan.passed_note << "\n";
  throw Error(no_images_message(inputs, bopt.ext));
}

/// The manifest must not truncate a file of run_reads. Returns the resolved path (what is checked is what
/// is opened); "" without --manifest.
std::string check_manifest_path(const BatchOptions& bopt, const std::vector<ReadFile>& reads) {
  if (bopt.manifest.empty()) return {};
  const std::string path = check_output_file("--manifest", bopt.manifest, reads);
  check_replaceable_manifest(path, bopt.manifest);  // never another file
  // Writable, checked before any folder is made (the output folder, or the manifest's own): the file itself
  // when it exists (a read-only manifest), else the nearest folder that exists on its way.
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path, ec))) {
    if (::access(path.c_str(), W_OK) != 0)
      throw Error("--manifest " + bopt.manifest + ": cannot write the manifest: " + std::strerror(errno));
    return path;
  }
  fs::path folder = fs::path(path).parent_path();
  while (!folder.empty() && !fs::exists(fs::symlink_status(folder, ec)) && folder != folder.parent_path())
    folder = folder.parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, ec) || ::access(folder.c_str(), W_OK | X_OK) != 0)
    throw Error("--manifest " + bopt.manifest + ": cannot create the manifest in " + folder.string() + ": " +
                (fs::is_directory(folder, ec) ? std::string(std::strerror(errno)) : std::string("not a folder")));
  // Its folder made now (as the manifest would make it), before the output folder: what the permission bits
  // do not tell (a read-only mount, /proc) is found here, not after the run's folder exists.
  const fs::path made = fs::path(path).parent_path();
  fs::create_directories(made, ec);
  if (ec || ::access(made.c_str(), W_OK | X_OK) != 0)
    throw Error("--manifest " + bopt.manifest + ": cannot create the manifest in " + made.string() + ": " +
                (ec ? ec.message() : std::string(std::strerror(errno))));
  // The bits can say yes where a file cannot be made (root in /sys, some FUSE mounts): one file made and
  // removed again is the proof.
  std::string probe = (made / ".attnmap-manifest-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw Error("--manifest " + bopt.manifest + ": cannot create the manifest in " + made.string() + ": " +
                std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return path;
}

/// The output folder, once: a bad --out is one usage error, not one error per image.
void prepare_output_folder(const RenderOptions& opt) {
  if (opt.out_dir.empty()) throw Error("--out is empty; name an output folder");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(opt.out_dir, ec)) && !fs::is_directory(opt.out_dir, ec))
    throw Error(opt.out_dir + ": the output folder exists and is not a folder");
  fs::create_directories(opt.out_dir, ec);
  if (ec || !fs::is_directory(opt.out_dir))
    throw Error(opt.out_dir + ": cannot create the output folder: " +
                (ec ? ec.message() : std::string("a file of that name exists")));
  // Unwritable (permissions, read-only mount, immutable): one usage error, not one failure per image.
  if (::access(opt.out_dir.c_str(), W_OK | X_OK) != 0)
    throw Error(opt.out_dir + ": cannot write into the output folder: " + std::strerror(errno));
}

/// Runs a planned batch: the failures found while planning, then every job on the worker threads, each
/// image's outcome printed and put in the manifest in input order; then the summary line.
class BatchRun {
 public:
  /// `settings`: the run's record (make_provenance); `prev`: the earlier manifests' rows of these settings.
  BatchRun(const RenderContext& ctx, const BatchOptions& bopt, const JobPlan& plan, const std::string& manifest_path,
           const nlohmann::ordered_json& settings, std::map<std::string, PrevRow> prev,
           const Precomputed* pre = nullptr)
      : ctx_(ctx), opt_(*ctx.opt), bopt_(bopt), plan_(plan), pre_(pre), n_pre_(plan.pre.size()),
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
      std::cerr << "attnmap: error: " << printable(plan_.pre[i].second) << "\n";
      ++failed_;
      Outcome o;
      o.input = plan_.pre[i].first;
      o.status = "failed";
      o.error = plan_.pre[i].second;
      if (i < rows_.size()) rows_[i] = RunRow{o.input, manifest_line(o)};
      const std::string err = i < pre_rows_ ? manifest_.put(i, manifest_line(o)) : std::string();
      if (!err.empty()) std::cerr << "attnmap: error: " << printable(err) << "\n";
    }
  }

  /// Renders every job on `workers` threads (the calling thread alone for one).
  void run_jobs(int workers) {
    const size_t n = plan_.jobs.size();
    Progress progress(n, !opt_.quiet, bopt_.progress_every);
    progress_ = &progress;
    t0_ = std::chrono::steady_clock::now();
    std::atomic<size_t> next{0};
    auto worker = [&]() {
      for (size_t i = next++; i < n && !run_cancelled(hooks_); i = next++) process(i);
    };
    run_on_threads(workers, worker, [&](int got) { note_fewer_workers(got, workers, opt_.quiet); },
                   kLibraryThreadRoom);
    progress.clear();
    progress_ = nullptr;
  }

  /// The manifest rewritten with this run's rows alone, the summary line (unless quiet) and the exit
  /// status: 1 when any input failed.
  int finish() {
    const std::string err = manifest_.compact();
    if (!err.empty()) std::cerr << "attnmap: error: " << printable(err) << "\n";
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (!plan_.passed_note.empty()) std::cerr << "attnmap: note: " << plan_.passed_note << "\n";
    if (!opt_.quiet) {
      if (no_stats_ > 0)
        std::cerr << "attnmap: note: " << no_stats_ << " skipped image(s) have no statistics in the manifest: no row "
                  << "of an earlier manifest made with these settings, none in the PNG and no .npy to compute them from\n";
      char redone[64] = "";
      if (redone_ > 0) std::snprintf(redone, sizeof redone, " (%zu redone: settings changed)", redone_);
      char line[256];
      std::snprintf(line, sizeof line, "attnmap: %zu done%s, %zu failed, %zu skipped, %.2f s\n", done_, redone, failed_,
                    skipped_, secs);
      std::cerr << line;
    }
    return failed_ ? 1 : 0;
  }

 private:
  /// Refuses outputs that would replace an input or another input's overlay. Throws attnmap::Error.
  void check_output_names(const OutputPlan& plan) const {
    for (const PlannedFile& f : plan.files) {
      if (plan_.input_canon.count(canonical_or_empty(f.path)))
        throw Error("output " + f.path + " would overwrite an input file; choose another --out");
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
    const OutputPlan plan = plan_outputs(ctx_, job);
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
      o.error = with_path(job.input, with_flags(e.what()));
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
      std::cerr << (warn ? "attnmap: warning: " : "attnmap: note: ")
                << printable(job.input + ": " + (warn ? note.substr(std::string(kWarningNote).size()) : note)) << "\n";
    }
    if (o.status == "failed") {
      ++failed_;
      std::cerr << "attnmap: error: " << printable(o.error) << "\n";
    } else if (o.status == "skipped") {
      ++skipped_;
      if (!o.stats) ++no_stats_;
    } else {
      ++done_;
      if (!change.empty() && redone_++ == 0 && !opt_.quiet)  // the first one says why; the summary counts them
        std::cerr << "attnmap: note: " << printable(job.input + ": rendered again, its outputs were made with other settings (" +
                                                    change + ")") << "\n";
      if (!opt_.quiet) {
        std::cout << printable(job.input + " -> " + (o.shown.empty() ? o.outputs.front() : o.shown)) << "\n";
        for (const std::string& l : o.shown_more) std::cout << "  " << printable(l) << "\n";
        if (const std::string also = also_wrote_line(o.outputs, o.shown, o.shown_more); !also.empty()) std::cout << "  " << printable(also) << "\n";
        if (!o.top5.empty()) std::cout << "  top-5: " << printable(format_top_k(o.top5)) << "\n";
        std::cout << std::flush;
      }
    }
    if (!rows_.empty()) rows_[pre_rows_ + i] = RunRow{run_row_label(job.input, job.out_base, opt_.out_dir), line};
    const std::string err = manifest_.put(pre_rows_ + i, std::move(line));
    if (!err.empty()) std::cerr << "attnmap: error: " << printable(err) << "\n";
    progress_->tick(done_ + failed_ + skipped_ - n_pre_, skipped_);
    if (hooks_ && hooks_->progress) hooks_->progress(done_ + failed_ + skipped_ - n_pre_, plan_.jobs.size(), job.input, o.status);
  }

  const RunHooks* hooks_ = run_hooks();  // the run's thread's (an embedding program's: the Python module's progress=)
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
  Progress* progress_ = nullptr;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

int run_render(const RenderOptions& opt, const BatchOptions& bopt) {
  check_batch_options(opt, bopt);
  const RunWeights weights = run_weights(opt.weights, opt.quiet);  // a path, or a Hub name fetched into the cache
  const std::shared_ptr<const ViTWeights> loaded = load_run_model(opt, weights);
  const ViTWeights& model = *loaded;
  RenderContext ctx = make_render_context(model, opt);
  nlohmann::ordered_json settings = make_provenance(ctx, weights.path);  // hashes the weights once
  ctx.provenance = provenance_text(settings);
  const JobPlan plan = plan_run(opt, bopt);
  check_something_to_render(plan, opt.inputs, bopt);
  std::vector<ReadFile> reads = run_reads(opt, weights.path, plan, ctx);
  const std::string manifest_path = check_manifest_path(bopt, reads);
  if (wants_run_figures(bopt)) {
    if (!manifest_path.empty()) reads.push_back({manifest_path, "the --manifest file"});
    check_run_figure_paths(opt, bopt, std::move(reads));
  }
  std::error_code ec;
  const bool out_existed = fs::exists(fs::symlink_status(opt.out_dir, ec));
  prepare_output_folder(opt);
  RunLock lock;  // held to the end of the run: no second run writes these images or this manifest meanwhile
  try {
    lock.claim(opt.out_dir, bopt.shard_count > 1, manifest_path);
  } catch (const Error&) {
    if (!out_existed) fs::remove(opt.out_dir, ec);  // refused: the folder this run made goes (it is empty)
    throw;
  }
  // Once every usage check has passed (a refusal stays one line).
  if (opt.weights.empty() && !opt.quiet)  // the first run explains itself
    std::cerr << "attnmap: note: no -w given: the bundled default model, a small ViT trained on garment composites "
                 "(not an ImageNet model; on ordinary photos its maps show what it finds salient); -w brings your own "
                 "checkpoint (docs/checkpoints.md)\n";
  note_precision_speed(opt);

  if (!opt.quiet)
    for (const std::string& n : undrawn_figure_notes(opt)) std::cerr << "attnmap: note: " << n << "\n";
  const int workers = plan_threads(bopt, plan.jobs.size());
  std::optional<Precomputed> pre;
  if (opt.scale && opt.scale->kind == ScaleKind::Run) {
    pre = precompute_views(&ctx, plan.jobs, workers);
    // The bounds are part of how every file was made: in each record and the manifest's header, and printed
    // under -q too (they are what --scale VMIN,VMAX needs to draw more images the same way).
    nlohmann::ordered_json bounds = nlohmann::ordered_json::object();
    for (const auto& [units, sc] : ctx.run_scales) bounds[units] = {sc.vmin, sc.vmax};
    settings["scale_bounds"] = bounds;
    ctx.provenance = provenance_text(settings);
    std::vector<std::string> warnings;
    const std::string text = run_scales_text(ctx, *pre, &warnings);
    std::cerr << "attnmap: note: --scale run: " << printable(text) << "\n";
    for (const std::string& w : warnings) std::cerr << "attnmap: warning: " << printable(w) << "\n";
  }
  // Read before this run appends to its manifest: skipped images keep the statistics, status and time that
  // earlier runs recorded (the run's own manifest; after shards, theirs).
  std::map<std::string, PrevRow> prev;
  if (bopt.skip_existing)
    prev = read_previous_rows(earlier_manifests(manifest_path, opt.out_dir, bopt.shard_count),
                              nlohmann::json::parse(settings.dump()));
  BatchRun run(ctx, bopt, plan, manifest_path, settings, std::move(prev), pre ? &*pre : nullptr);
  run.report_planning_failures();
  run.run_jobs(workers);
  if (run_cancelled(run_hooks())) return 1;  // interrupted: the manifest keeps its rows uncompacted, no run figures
  if (!opt.quiet)  // a fixed --scale that hid peaks: one line per unit for the whole run
    for (const std::string& n : ctx.clip_tally->notes(opt)) std::cerr << "attnmap: note: " << printable(n) << "\n";
  const int figures = write_run_figures(opt, bopt, run.rows(), nlohmann::json::parse(settings.dump()), ctx.provenance,
                                        sheet_scale(ctx, run.rows()));
  return std::max(run.finish(), figures);
}

}  // namespace attnmap
