// batch_plan.hpp - the steps of a batch run (run_render, batch.cpp) before any image is rendered: the options
// that need no model checked, the inputs planned into jobs (this shard's), the files nothing may replace, the
// manifest's path and the output folder checked and made. Internal to batch.cpp.
#pragma once
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/batch_hooks.hpp"
#include "engine/batch_options.hpp"
#include "engine/paths.hpp"
#include "engine/render.hpp"
#include "engine/walk.hpp"
#include "io/run_lock.hpp"

namespace attnmap {


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

/// Every input planned (plan_jobs over the whole sorted list, so every shard names a file as the full run
/// does), this shard's jobs picked, the inputs missing or unreadable kept as failures.
JobPlan plan_run(const RenderOptions& opt, const BatchOptions& bopt);

/// The files a file the run writes besides its images' outputs (the manifest, the contact sheet, the
/// gallery) must not replace: the weights (and their side configs), the program, the inputs, every output
/// of the run's images (of every shard: the shards together write one full run's files), the label font, and
/// the output folder itself (made before any of them).
/// Without `ctx` (before the model loads) the outputs and the font are not known yet; without `weights_path`
/// ("") the weights are left out.
std::vector<ReadFile> run_reads(const RenderOptions& opt, const std::string& weights_path, const JobPlan& plan,
                                const RenderContext* ctx);

/// The output folder's name (check_output_folder_name), a contact sheet's row wider than cairo draws (its
/// columns, or the run's images when fewer), the manifest's and the run figures' paths (--contact-sheet,
/// --gallery) checked before the model loads,
/// against the files known then (the weights when -w is a file or folder, the inputs, --labels): a path that
/// would replace one is refused at once, not after the model has loaded. plan_batch checks them again
/// against every file of the run. Throws attnmap::Error.
void check_run_paths_early(const JobPlan& plan, const RenderOptions& opt, const BatchOptions& bopt);

/// Nothing to render is a usage error (exit 2, before any folder is made): no image in the inputs (an --ext
/// that picks none says which extensions it asked for; the note of image files passed over said first), or
/// every input named on the command line missing. Throws attnmap::Error.
void check_something_to_render(const JobPlan& plan, const std::vector<std::string>& inputs, const BatchOptions& bopt,
                               const BatchHooks& hooks);

/// The manifest must not truncate a file of `reads`, nor replace a file that is not a manifest, and must be
/// writable (its folder made). Returns the resolved path; "" without --manifest. Throws attnmap::Error.
std::string check_manifest_path(const BatchOptions& bopt, const std::vector<ReadFile>& reads);

/// The output folder's name checked, before anything is made: --out empty, or an existing file. Throws
/// attnmap::Error.
void check_output_folder_name(const OutputSpec& opt);

/// The output folder, once: a bad --out is one usage error, not one error per image. Throws attnmap::Error.
void prepare_output_folder(const OutputSpec& opt);

/// A run's plan before its first image: this shard's jobs and the resolved manifest path ("" without one).
struct RunPlan {
  JobPlan jobs;
  std::string manifest_path;
};

/// A run planned, in the order a refusal must come, from its jobs (plan_run, checked by
/// check_something_to_render before the model loads): the files the run must not replace gathered
/// (run_reads) and the manifest's and run figures' paths checked against them, then the output folder made
/// and claimed (`lock`, held by the caller
/// to the run's end: no second run writes these images or this manifest meanwhile; refused, a folder this
/// run made goes again). Last, the run's notes (no -w, bf16's speed, figures asked for and not drawn): a
/// refusal stays one line. `ctx` is the run's (make_render_context: its outputs and font); `weights_path` the
/// file the run reads. Throws attnmap::Error (exit 2) before anything is written.
RunPlan plan_batch(JobPlan jobs, const RenderContext& ctx, const BatchOptions& bopt, const std::string& weights_path,
                   RunLock* lock, const BatchHooks& hooks);

}  // namespace attnmap
