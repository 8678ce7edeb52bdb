// batch_plan.cpp - a batch run's steps before any image is rendered (batch_plan.hpp): options checked, jobs
// planned, the manifest's path and the output folder checked.
#include "engine/batch_plan.hpp"
#include "engine/batch.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/setting_ref.hpp"
#include "draw/canvas.hpp"
#include "draw/figures.hpp"
#include "engine/manifest.hpp"
#include "engine/output_plan.hpp"
#include "engine/paths.hpp"
#include "engine/run_figures.hpp"
#include "engine/session.hpp"
#include "core/error.hpp"

namespace attnmap {

namespace fs = std::filesystem;

void check_batch_options(const RenderOptions& opt, const BatchOptions& bopt) {
  if (bopt.jobs < 0) throw Error(setting_ref("jobs") + " must be >= 1 (or 0 for the number of cores), found " + std::to_string(bopt.jobs));
  if (bopt.shard_count < 1 || bopt.shard_index < 1 || bopt.shard_index > bopt.shard_count)
    throw Error(setting_ref("shard") + " expects K/N with 1 <= K <= N");
  // -o naming an input folder: every run would render the previous run's overlays as new inputs.
  const std::string out_canon = canonical_or_empty(opt.out_dir);
  for (const std::string& in : opt.inputs) {
    std::error_code ec;
    if (!opt.out_dir.empty() && fs::is_directory(in, ec) && canonical_or_empty(in) == out_canon)
      throw Error("the output folder is the input folder " + in + "; choose another " + setting_ref("out"));
  }
  if (!bopt.manifest.empty()) check_output_name(setting_ref("manifest"), bopt.manifest);  // before the model loads
  check_run_figure_options(bopt);
  if (opt.scale && opt.scale->kind == ScaleKind::Run) {  // one scale over every map of the run needs them all
    if (bopt.skip_existing)
      throw Error(setting_ref("scale") + " run cannot be combined with " + setting_ref("skip_existing") + ": the run's scale needs every image's maps "
                  "(render them all again, or give the bounds: " + setting_ref("scale") + " VMIN,VMAX)");
    if (bopt.shard_count > 1)
      throw Error(setting_ref("scale") + " run cannot be combined with " + setting_ref("shard") + ": each shard would have a scale of its own (give the "
                  "bounds instead: " + setting_ref("scale") + " VMIN,VMAX)");
  }
}

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
                                const RenderContext* ctx) {
  std::vector<ReadFile> reads = weights_path.empty() ? std::vector<ReadFile>{} : model_reads(weights_path);
  for (const std::string& in : opt.inputs) reads.push_back({in, "an input"});
  for (const Job& j : plan.all) reads.push_back({j.input, "an input"});
  if (ctx) {
    for (const Job& j : plan.all)  // every shard's: the shards together write one full run's files
      for (const PlannedFile& f : plan_outputs(*ctx, j).files) reads.push_back({f.path, "an output of this run"});
    if (!ctx->font_file.empty()) reads.push_back({ctx->font_file, "the label font"});
  }
  if (!opt.labels_file.empty()) reads.push_back({opt.labels_file, "the " + setting_ref("labels") + " file"});
  if (!opt.out_dir.empty()) reads.push_back({opt.out_dir, "the output folder"});  // made before any file is written
  return reads;
}

namespace {

/// A contact sheet whose row of thumbnails (--sheet-columns, or fewer when the run has fewer images) is wider
/// than cairo draws: refused before any map.
void check_sheet_width(const JobPlan& plan, const BatchOptions& bopt) {
  if (bopt.contact_sheet.empty()) return;
  const int most = contact_sheet_max_columns(SheetOptions{});
  const size_t items = std::max<size_t>(plan.all.size() + plan.pre.size(), 1);
  const int cols = static_cast<int>(std::min<size_t>(static_cast<size_t>(bopt.sheet_columns), items));
  if (cols > most)
    throw Error(setting_ref("sheet_columns") + " " + std::to_string(bopt.sheet_columns) + ": a row of " +
                std::to_string(cols) + " thumbnails is wider than cairo's limit of " + std::to_string(kMaxCanvas) +
                " pixels a side; " + std::to_string(most) + " or fewer");
}

}  // namespace

void check_run_paths_early(const JobPlan& plan, const RenderOptions& opt, const BatchOptions& bopt) {
  check_output_folder_name(opt);
  check_sheet_width(plan, bopt);
  if (bopt.manifest.empty() && !wants_run_figures(bopt)) return;
  std::vector<ReadFile> reads = run_reads(opt, local_weights_path(opt.weights), plan, nullptr);
  if (!bopt.manifest.empty()) {
    // (Whether an existing file is a manifest is asked once the run's outputs are known: one of them is said
    // to be that, not "not a manifest".)
    const std::string path = check_output_file(setting_ref("manifest"), bopt.manifest, reads);
    reads.push_back({path, "the " + setting_ref("manifest") + " file"});
  }
  if (wants_run_figures(bopt)) check_run_figure_paths(opt, bopt, std::move(reads));
}

/// Nothing to render is a usage error (exit 2, before any folder is made): no image in the inputs (an --ext
/// that picks none says which extensions it asked for), or every input named on the command line missing. A
/// missing input beside others that exist stays a failure of its own (exit 1, a manifest row).
void check_something_to_render(const JobPlan& plan, const std::vector<std::string>& inputs, const BatchOptions& bopt,
                               const BatchHooks& hooks) {
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
  if (!plan.passed_note.empty()) say(hooks, LineStream::Err, "attnmap: note: " + plan.passed_note);
  throw Error(no_images_message(inputs, bopt.ext));
}

/// The manifest must not truncate a file of run_reads. Returns the resolved path (what is checked is what
/// is opened); "" without --manifest.
std::string check_manifest_path(const BatchOptions& bopt, const std::vector<ReadFile>& reads) {
  if (bopt.manifest.empty()) return {};
  const std::string path = check_output_file(setting_ref("manifest"), bopt.manifest, reads);
  check_replaceable_manifest(path, bopt.manifest);  // never another file
  // Writable, checked before any folder is made (the output folder, or the manifest's own): the file itself
  // when it exists (a read-only manifest), else the nearest folder that exists on its way.
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path, ec))) {
    if (::access(path.c_str(), W_OK) != 0)
      throw Error(setting_ref("manifest") + " " + bopt.manifest + ": cannot write the manifest: " + std::strerror(errno));
    return path;
  }
  fs::path folder = fs::path(path).parent_path();
  while (!folder.empty() && !fs::exists(fs::symlink_status(folder, ec)) && folder != folder.parent_path())
    folder = folder.parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, ec) || ::access(folder.c_str(), W_OK | X_OK) != 0)
    throw Error(setting_ref("manifest") + " " + bopt.manifest + ": cannot create the manifest in " + folder.string() + ": " +
                (fs::is_directory(folder, ec) ? std::string(std::strerror(errno)) : std::string("not a folder")));
  // Its folder made now (as the manifest would make it), before the output folder: what the permission bits
  // do not tell (a read-only mount, /proc) is found here, not after the run's folder exists.
  const fs::path made = fs::path(path).parent_path();
  fs::create_directories(made, ec);
  if (ec || ::access(made.c_str(), W_OK | X_OK) != 0)
    throw Error(setting_ref("manifest") + " " + bopt.manifest + ": cannot create the manifest in " + made.string() + ": " +
                (ec ? ec.message() : std::string(std::strerror(errno))));
  // The bits can say yes where a file cannot be made (root in /sys, some FUSE mounts): one file made and
  // removed again is the proof.
  std::string probe = (made / ".attnmap-manifest-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw Error(setting_ref("manifest") + " " + bopt.manifest + ": cannot create the manifest in " + made.string() + ": " +
                std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return path;
}

/// The output folder, once: a bad --out is one usage error, not one error per image.
void check_output_folder_name(const OutputSpec& opt) {
  if (opt.out_dir.empty()) throw Error(setting_ref("out") + " is empty; name an output folder");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(opt.out_dir, ec)) && !fs::is_directory(opt.out_dir, ec))
    throw Error(opt.out_dir + ": the output folder exists and is not a folder");
}

void prepare_output_folder(const OutputSpec& opt) {
  check_output_folder_name(opt);
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec || !fs::is_directory(opt.out_dir))
    throw Error(opt.out_dir + ": cannot create the output folder: " +
                (ec ? ec.message() : std::string("a file of that name exists")));
  // Unwritable (permissions, read-only mount, immutable): one usage error, not one failure per image.
  if (::access(opt.out_dir.c_str(), W_OK | X_OK) != 0)
    throw Error(opt.out_dir + ": cannot write into the output folder: " + std::strerror(errno));
}

namespace {

/// The output folder made and the run's lock claimed; refused, the folder this run made goes again (it is
/// empty).
void claim_output_folder(RunLock* lock, const RenderOptions& opt, const BatchOptions& bopt,
                         const std::string& manifest_path) {
  std::error_code ec;
  const bool out_existed = fs::exists(fs::symlink_status(opt.out_dir, ec));
  prepare_output_folder(opt);
  try {
    lock->claim(opt.out_dir, bopt.shard_count > 1, manifest_path);
  } catch (const Error&) {
    if (!out_existed) fs::remove(opt.out_dir, ec);
    throw;
  }
}

/// The notes of a run once every usage check has passed (a refusal stays one line): the bundled model's
/// (no -w), bf16's speed on this CPU, the figures asked for that this run does not draw.
void say_run_notes(const RenderOptions& opt, const BatchHooks& hooks) {
  if (opt.quiet) return;
  say(hooks, LineStream::Err, default_model_note(opt, true));  // the first run explains itself
  say(hooks, LineStream::Err, precision_speed_note(opt));
  for (const std::string& n : undrawn_figure_notes(opt)) say(hooks, LineStream::Err, "attnmap: note: " + n);
}

}  // namespace

RunPlan plan_batch(JobPlan jobs, const RenderContext& ctx, const BatchOptions& bopt, const std::string& weights_path,
                   RunLock* lock, const BatchHooks& hooks) {
  const RenderOptions& opt = *ctx.opt;
  RunPlan p{std::move(jobs), ""};
  std::vector<ReadFile> reads = run_reads(opt, weights_path, p.jobs, &ctx);
  p.manifest_path = check_manifest_path(bopt, reads);
  if (wants_run_figures(bopt)) {
    if (!p.manifest_path.empty()) reads.push_back({p.manifest_path, "the " + setting_ref("manifest") + " file"});
    check_run_figure_paths(opt, bopt, std::move(reads));
  }
  claim_output_folder(lock, opt, bopt, p.manifest_path);
  say_run_notes(opt, hooks);
  return p;
}

}  // namespace attnmap
