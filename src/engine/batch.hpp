// batch.hpp - `attnmap render` over many inputs (run_render): every image rendered concurrently with its own
// error handling, progress, a JSON-lines manifest, resuming and sharding. Its parts have their own headers
// (batch_options.hpp, paths.hpp, walk.hpp, session.hpp, manifest.hpp); the first four are included here for
// the callers that still include this one.
#pragma once
#include "engine/batch_hooks.hpp"
#include "engine/batch_options.hpp"
#include "engine/paths.hpp"
#include "engine/render.hpp"
#include "engine/session.hpp"
#include "engine/walk.hpp"

namespace attnmap {

/// Runs `attnmap render`: weights loaded once (and hashed once for the settings record, make_provenance,
/// that every output carries), the shard's images rendered by `jobs` worker threads (OpenBLAS
/// single-threaded inside each worker when jobs > 1, all cores when jobs == 1), progress on standard error,
/// everything it prints through `hooks` (its model, its rows, progress and cancellation too: batch_hooks.hpp),
/// one manifest line per input in sorted input order after the run's header line (docs/provenance.md:
/// with --skip-existing, skipped images keep the statistics of the earlier manifest, their PNG or .npy, and
/// the status and time of the run that made them from the earlier manifest or, after shards, the shards'
/// manifests: earlier_manifests). Returns the exit status: 0 all
/// images done or skipped, 1 some failed (each printed with its path and reason; the rest still written).
/// Unreadable folders (input or below one) and missing inputs are per-input failures. Non-regular files
/// (FIFOs, devices) fail alone ("not a regular file"). Throws attnmap::Error (status 2), before anything is
/// written, for unusable weights, bad options, an --out that is an input folder or cannot be created, a
/// --manifest naming an input, the weights or an output of the run, or an unwritable manifest. The forward
/// pass's threads follow blas_threads_to_set (the user's OPENBLAS_NUM_THREADS / OMP_NUM_THREADS cap them).
/// The options are the door's (make_request: check_drawing_options, check_batch_options; both front ends make
/// them there): run_render checks nothing of them again.
int run_render(const RenderOptions& opt, const BatchOptions& bopt, const BatchHooks& hooks);

/// Render's options that need no model, checked at the door (make_request) before anything loads: -j,
/// --shard, an --out that is an input folder, the --manifest name, the run figures' options, --scale run with
/// --skip-existing or --shard. Throws attnmap::Error naming settings as {setting:id}.
void check_batch_options(const RenderOptions& opt, const BatchOptions& bopt);

}  // namespace attnmap
