// session.hpp - what a run sets up once before its images: the model, loaded with the command line's
// overrides (load_run_model), and the threads (usable_cores, plan_threads).
#pragma once
#include <cstddef>
#include <string>

#include "app/batch_options.hpp"
#include "app/render.hpp"
#include "checkpoint/weights.hpp"

namespace attnmap {

/// Number of cores this process may run on (sched_getaffinity, so Slurm/cgroup CPU sets are honoured).
int usable_cores();

/// The model of a run (render, figure), loaded once: load_model with the command line's overrides, position
/// embeddings resampled to --size (opt.pos_interp, else the layout's default); its notices printed unless
/// quiet. Throws attnmap::Error from the loader (exit 2: unusable weights), or when an address-space limit
/// (ulimit -v) leaves too little room beside the loaded model for a run (oneDNN would crash in the first
/// image).
/// `backward`: prepare the weights for the backward pass whatever the views (eval scores the class-specific
/// views); else only when --explain or a class-specific view asks.
/// Class names come from --labels FILE (opt.labels_file), else the weights' config, else, for a 1000-class
/// head, ImageNet-1k's (apply_class_names).
ViTWeights load_run_model(const RenderOptions& opt, const std::string& weights_path, bool backward = false);

/// With --precision bf16 (and not -q): a one-line note on stderr when this CPU runs bfloat16 products slower
/// than float32 (bf16_speed_ratio < 1), so that a slower run is never slower in silence. Called by each
/// command once every usage check has passed, before the images are computed.
void note_precision_speed(const RenderOptions& opt);

/// The class names of model.hp.labels: read from opt.labels_file (its count checked against the head's
/// classes: Error "--labels FILE: the classifier has C classes, the file names N", exit 2), else kept from
/// the config, else ImageNet-1k's for a 1000-class head (a note printed unless quiet). hp.source["labels"]
/// says which: kLabelsFromFile + path, kLabelsAssumedImagenet + source + ")", or the config's entry.
void apply_class_names(ViTWeights& model, const RenderOptions& opt);
inline constexpr const char* kLabelsFromFile = "--labels ";
inline constexpr const char* kLabelsAssumedImagenet = "assumed ImageNet-1k (a 1000-class head without names; ";

/// " (the address-space limit, ulimit -v, is N MB)" when the process has one, else "": what an out-of-memory
/// message adds.
std::string address_limit_note();

/// The worker threads for n images, and the forward pass's thread pool set to match. Cores are shared so that
/// threads never exceed them: with one worker the pool gets every core (or the user's OPENBLAS_NUM_THREADS /
/// OMP_NUM_THREADS, when fewer: e.g. 1 on a busy shared machine); with several, each worker is one image at
/// a time on one thread (measured in docs/benchmarks.md).
int plan_threads(const BatchOptions& bopt, size_t n);

}  // namespace attnmap
