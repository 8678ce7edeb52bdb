// session.cpp - the model a run loads once (load_run_model: overrides, position embeddings, the backward
// pass's matrices when a view needs them) and the run's threads (usable_cores, plan_threads).
#include "app/session.hpp"

#include "app/options.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "core/error.hpp"
#include "maps/views.hpp"
#include "model/pos_embed.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"

namespace attnmap {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned h = std::thread::hardware_concurrency();
  return h > 0 ? static_cast<int>(h) : 1;
}

namespace {

// True when a --views list names a class-specific view (chefer, gradcam, attn-grad: a backward pass), or
// cannot be parsed (the run's own checks then refuse it with their message).
bool views_need_backward(const std::string& views) {
  if (views.empty()) return false;
  try {
    for (const ViewSpec& v : parse_views(views))
      if (is_class_specific(v.kind)) return true;
    return false;
  } catch (const std::exception&) {
    return true;
  }
}

}  // namespace

ViTWeights load_run_model(const RenderOptions& opt, const std::string& weights_path, bool backward) {
  ViTWeights model = load_model(weights_path, opt.overrides);
  if (opt.size)
    with_flag("--size", [&] {
      resample_pos_embed(model, (*opt.size)[0], (*opt.size)[1],
                         opt.pos_interp ? *opt.pos_interp : default_pos_interp(model.hp).mode);
    });
  // From here on the run reads nothing from the weights file (a file rewritten during the run changes no
  // image). The class-specific views and --explain run the backward pass, which needs the plain matrices.
  prepare_weights(model, backward || !opt.explain.empty() || views_need_backward(opt.views));
  if (!opt.quiet)
    for (const auto& n : model.notices) std::cerr << "attnmap: note: " << printable(weights_path + ": " + with_flags(n)) << "\n";
  return model;
}

/// The worker threads for n images, and the forward pass's thread pool set to match. Cores are shared so that
/// threads never exceed them: with one worker the pool gets every core (or the user's OPENBLAS_NUM_THREADS /
/// OMP_NUM_THREADS, when fewer: e.g. 1 on a busy shared machine); with several, each worker is one image at
/// a time on one thread (measured in docs/benchmarks.md).
int plan_threads(const BatchOptions& bopt, size_t n) {
  const int cores = usable_cores();
  const int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(bopt.jobs > 0 ? bopt.jobs : cores), std::max<size_t>(n, 1)));
  const int blas =
      blas_threads_to_set(workers, cores, std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS"));
  set_blas_threads(blas);
  return workers;
}

}  // namespace attnmap
