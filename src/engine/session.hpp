// session.hpp - what a run sets up once before its images: the model, loaded with the command line's
// overrides (load_run_model), and the threads (usable_cores, plan_threads).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/batch_hooks.hpp"
#include "engine/batch_options.hpp"
#include "engine/render.hpp"
#include "checkpoint/weights.hpp"
#include "hub/hub_name.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {

/// Number of cores this process may run on (sched_getaffinity, so Slurm/cgroup CPU sets are honoured).
int usable_cores();

/// -w's value as a run reads it (issue 40, docs/hub.md).
struct RunWeights {
  std::string path;            ///< the file or folder load_model reads
  std::optional<HubRef> hub;   ///< the Hub name it was fetched as, when it was one
};

/// -w's value resolved: "" the bundled default weights; an existing file or folder as it is (a path always wins over a name); else a Hugging Face Hub name (ORG/NAME,
/// ORG/NAME@REV, hf-hub:ORG/NAME; hub/hub_name.hpp) found in huggingface_hub's cache or fetched into it
/// (hub/hub_fetch.hpp), read as its snapshot folder. A value that is neither a path nor a name is passed on as
/// a path (the loader says it is missing). Unless quiet: the download's progress bar on a terminal (a line
/// per file otherwise), and the fetch's notes as lines through hooks.on_line. Throws attnmap::Error "NAME: no such file or folder; as a
/// Hugging Face Hub name: ..." when the Hub refuses or cannot give the model. A snapshot folder of the cache
/// given as a path (CACHE/models--ORG--NAME/snapshots/COMMIT) keeps its name too. hooks.cancelled (may be
/// empty): polled during a download (an embedding program's Ctrl-C: hub/hub_download.hpp).
RunWeights run_weights(const std::string& arg, bool quiet, const BatchHooks& hooks);

/// The model of a run (render, figure), loaded once: load_model with the command line's overrides, position
/// embeddings resampled to --size (opt.pos_interp, else the layout's default); unless quiet, its notes as
/// lines through hooks.on_line (ImageNet-1k's class names assumed, then the loader's notices). Throws attnmap::Error from the loader (exit 2: unusable weights), or when an address-space limit
/// (ulimit -v) leaves too little room beside the loaded model for a run (oneDNN would crash in the first
/// image).
/// `backward`: prepare the weights for the backward pass whatever the views (eval scores the class-specific
/// views); else only when --explain or a class-specific view asks.
/// Class names come from --labels FILE (opt.labels_file), else the weights' config, else, for a 1000-class
/// head, ImageNet-1k's (apply_class_names).
/// Returned shared and read-only. (A program that holds a model in memory lends it to a run instead:
/// outputs.hpp's ModelSource, BatchHooks::model.)
/// load_model of run_weights' path (the overrides `ov`), with its Hub name (ViTWeights::hub); a cached blob
/// whose bytes no longer match its name is refused (hub_blob_mismatch), and a mapping refused under an
/// address-space limit names the limit. `while_hashing`: load_model's (a run's packing, overlapping the hash).
/// Throws attnmap::Error.
ViTWeights load_weights(const RunWeights& weights, const ModelOverrides& ov,
                        const std::function<void(ViTWeights&)>& while_hashing = {});

/// `weights` from run_weights (loaded by load_weights): the model records its Hub name (ViTWeights::hub); a cached blob whose bytes no
/// longer match its name is refused (hub_blob_mismatch).
std::shared_ptr<const ViTWeights> load_run_model(const RenderOptions& opt, const RunWeights& weights, bool backward,
                                                 const BatchHooks& hooks = terminal_hooks());

/// A run's model and where it came from.
struct RunModel {
  RunWeights source;                          ///< -w's value resolved (the lent model's: -w as given)
  std::shared_ptr<const ViTWeights> weights;  ///< loaded and prepared for the run's options
};

/// The run's model: the one the program lends (hooks.model, prepared for `opt`; -w is then only named in the
/// records), else -w's file, folder or Hub name (run_weights, fetched into the cache) loaded by
/// load_run_model. Throws attnmap::Error (exit 2: unusable weights or a name the Hub cannot give).
RunModel open_run_model(const RenderOptions& opt, const BatchHooks& hooks);

/// What load_run_model does after the file is read: position embeddings resampled to --size, class names
/// (apply_class_names), the products' precision, prepare_weights (with the backward pass's plain matrices when
/// `backward` or a view needs them). Throws attnmap::Error naming the flag (--size, --labels, --precision).
void finish_run_model(ViTWeights& model, const RenderOptions& opt, bool backward);

/// Whether a run with these options runs the backward pass: --explain, or a class-specific view in --views.
bool run_needs_backward(const RenderOptions& opt);

/// With --precision bf16 (and not -q): a one-line note when this CPU runs bfloat16 products slower than
/// float32 (bf16_speed_ratio < 1), so that a slower run is never slower in silence; said by each command once
/// every usage check has passed, before the images are computed. The line ("attnmap: note:
/// {setting:precision} bf16: ...": spelled by the front end), "" when there is none.
std::string precision_speed_note(const RenderOptions& opt);

/// The note of a run on the bundled default model (-w not given; "" when it was, or quiet): what the model is
/// and that -w brings one's own. `on_photos`: also what its maps show on ordinary photos (render's wording).
std::string default_model_note(const RenderOptions& opt, bool on_photos);

/// The class names of model.hp.labels: read from opt.labels_file (its count checked against the head's
/// classes: Error "{setting:labels} FILE: the classifier has C classes, the file names N", exit 2), else kept from
/// the config, else ImageNet-1k's for a 1000-class head (assumed_class_names_note). hp.source["labels"]
/// says which: kLabelsFromFile + path, kLabelsAssumedImagenet + source + ")", or the config's entry.
void apply_class_names(ViTWeights& model, const RenderOptions& opt);
inline const std::string kLabelsFromFile = setting_ref("labels") + " ";  // "{setting:labels} ", spelled where shown
inline constexpr const char* kLabelsAssumedImagenet = "assumed ImageNet-1k (a 1000-class head without names; ";
/// The note that the model's class names are ImageNet-1k's, assumed by apply_class_names ("" when they are not).
std::string assumed_class_names_note(const ViTWeights& model);

/// Under an address-space limit (ulimit -v, SGE h_vmem): one malloc arena for every thread, as
/// MALLOC_ARENA_MAX=1 gives. glibc reserves 64 MiB of address space for each thread's arena, which left too
/// little for a library's thread stack (pango's font threads: one run in ten failed at 200 MB, none with one
/// arena over 40 runs). Does nothing without a limit. For main, before any thread starts.
void use_one_malloc_arena_under_address_limit();

/// Without an address-space limit, and unless MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ are set: glibc's
/// malloc starts at the thresholds its own dynamic rule reaches after a 32 MiB block is freed (blocks under
/// 32 MiB from the heap, up to 64 MiB of freed heap kept), so an image's photo, overlay and PNG buffers reuse
/// the previous image's memory instead of being mapped, zero-filled by the kernel page by page and unmapped per
/// image (bench/bf16_folder.sh: ~10000 page faults fewer over 16 photos). For main, before any thread starts.
void keep_freed_memory_for_the_next_image();

/// " (the address-space limit, ulimit -v, is N MB)" when the process has one, else "": what an out-of-memory
/// message adds.
std::string address_limit_note();

/// What a failure says in an error line: e.what(), or "out of memory" + address_limit_note() for
/// std::bad_alloc (whose what() is "std::bad_alloc").
std::string failure_text(const std::exception& e);

/// The worker threads for n images, and the forward pass's thread pool set to match. Cores are shared so that
/// threads never exceed them: with one worker the pool gets every core (or the user's OPENBLAS_NUM_THREADS /
/// OMP_NUM_THREADS, when fewer: e.g. 1 on a busy shared machine); with several, each worker is one image at
/// a time on one thread (measured in docs/benchmarks.md).
int plan_threads(const BatchOptions& bopt, size_t n);

/// The forward pass's thread pool for loading a model, before plan_threads: every core (or OPENBLAS_NUM_THREADS /
/// OMP_NUM_THREADS, when fewer), as for one worker, so that the packing of the weights (prepare_weights: column
/// blocks in parallel) does not run on the one thread the pool has until it is set. The packed values do not
/// depend on the thread count.
void plan_load_threads();

}  // namespace attnmap
