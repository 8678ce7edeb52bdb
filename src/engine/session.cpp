// session.cpp - the model a run loads once (load_run_model: overrides, position embeddings, the backward
// pass's matrices when a view needs them) and the run's threads (usable_cores, plan_threads).
#include "engine/session.hpp"

#include "core/setting_ref.hpp"

#include <malloc.h>
#include <sched.h>
#include <unistd.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "engine/paths.hpp"
#include "engine/text/zero_shot.hpp"
#include "checkpoint/labels.hpp"
#include "core/error.hpp"
#include "hub/hub_fetch.hpp"
#include "maps/evaluate.hpp"
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

// True when --views names a class-specific view (chefer, gradcam, attn-grad: a backward pass).
bool views_need_backward(const std::vector<ViewSpec>& views) {
  return std::any_of(views.begin(), views.end(), [](const ViewSpec& v) { return is_class_specific(v.kind); });
}

// What the address space holds now (VmSize of /proc/self/status), in bytes; 0 when unknown.
unsigned long long address_space_used() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, 7, "VmSize:") == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) * 1024ull;
  return 0;
}

// Address space a run needs beyond the loaded model: oneDNN's generated code and scratch, the images, the
// thread stacks (pango's for the labels too). Measured with the bundled model: 19 MB free crashed inside
// oneDNN (it does not check that its code could be mapped); on 7 December 2026 (2 cores, the legend's labels
// drawn by pango; MB = 2^20 bytes, as the message counts) astronaut.png (512 x 512) rendered with 42 MB free,
// not with 37 (out of memory in the image) or 32 (pango could not start its threads), chelsea.png with 38: so
// 42 MB, and the limit the refusal names runs such a photo.
constexpr unsigned long long kAddressHeadroom = 42ull << 20;

// Refuses a run whose address-space limit (ulimit -v, SGE h_vmem) leaves less than kAddressHeadroom free
// once the model is loaded: one clear line and exit 2, not a crash in the middle of the first image.
void check_address_headroom(const std::string& weights_path) {
  struct rlimit lim {};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return;
  const unsigned long long used = address_space_used(), limit = lim.rlim_cur;
  if (used == 0 || used + kAddressHeadroom <= limit) return;
  const unsigned long long mb = 1ull << 20;
  throw Error("the address-space limit (ulimit -v, SGE h_vmem) of " + std::to_string(limit / mb) + " MB leaves " +
              std::to_string(limit > used ? (limit - used) / mb : 0) + " MB free once " + weights_path +
              " is loaded; a run needs " + std::to_string(kAddressHeadroom / mb) + " MB free (a limit of at least " +
              std::to_string((used + kAddressHeadroom + mb - 1) / mb) + " MB with these weights)");
}

}  // namespace

void use_one_malloc_arena_under_address_limit() {
  struct rlimit lim {};
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) mallopt(M_ARENA_MAX, 1);
}

void keep_freed_memory_for_the_next_image() {
  struct rlimit lim {};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur != RLIM_INFINITY) return;
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
  mallopt(M_TRIM_THRESHOLD, 64 << 20);  // twice it, as the dynamic rule sets
}

std::string address_limit_note() {
  struct rlimit lim {};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return "";
  return " (the address-space limit, ulimit -v, is " + std::to_string(lim.rlim_cur >> 20) + " MB)";
}

std::string failure_text(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return "out of memory" + address_limit_note();
  return e.what();
}

void apply_class_names(ViTWeights& model, const RenderOptions& opt) {
  HParams& hp = model.hp;
  if (has_text_classes(model)) return;  // the texts are the classes (apply_texts)
  if (!opt.labels_file.empty()) {
    if (!model.head.present())
      throw Error(setting_ref("labels") + " " + opt.labels_file +
                  ": the weights have no classifier head, so there are no classes to name");
    if (with_prefix(setting_ref("labels"), [&] { return read_label_map(opt.labels_file); }))  // eval takes it before this
      throw Error(setting_ref("labels") + " " + opt.labels_file +
                  ": a map of ground-truth label names to the model's classes, which only attnmap eval reads; here " +
                  setting_ref("labels") + " takes the classifier's class names, one per class");
    std::vector<std::string> names = with_prefix(setting_ref("labels"), [&] { return read_labels_file(opt.labels_file); });
    if (names.size() != static_cast<size_t>(model.head.out))
      throw Error(setting_ref("labels") + " " + opt.labels_file + ": the classifier has " +
                  std::to_string(model.head.out) +
                  " classes, the file names " + std::to_string(names.size()));
    hp.labels = std::move(names);
    hp.source["labels"] = kLabelsFromFile + opt.labels_file;
    return;
  }
  if (model.head.present() && model.head.out == 1000 && hp.labels.empty()) {
    hp.labels = imagenet1k_names();
    hp.source["labels"] = kLabelsAssumedImagenet + imagenet1k_names_source() + ")";
  }
}

/// The note of apply_class_names' assumed ImageNet-1k names ("" when the names are not assumed).
std::string assumed_class_names_note(const ViTWeights& model) {
  const auto src = model.hp.source.find("labels");
  if (src == model.hp.source.end() || src->second.rfind(kLabelsAssumedImagenet, 0) != 0) return "";
  return "attnmap: note: a 1000-class head without class names: its classes are assumed to be "
         "ImageNet-1k's (0 tench ... 999 toilet tissue); give " + setting_ref("labels") + " FILE if they are not";
}

bool run_needs_backward(const RenderOptions& opt) { return opt.explain || views_need_backward(opt.views); }

void finish_run_model(ViTWeights& model, const RenderOptions& opt, bool backward) {
  if (opt.size)
    with_prefix(setting_ref("size"), [&] {
      resample_pos_embed(model, (*opt.size)[0], (*opt.size)[1],
                         opt.pos_interp ? *opt.pos_interp : default_pos_interp(model.hp).mode);
    });
  // From here on the run reads nothing from the weights file (a file rewritten during the run changes no
  // image). The class-specific views and --explain run the backward pass, which needs the plain matrices.
  if (opt.text.given()) apply_texts(model, opt);  // texts as the classes of a CLIP (engine/text/zero_shot.hpp)
  apply_class_names(model, opt);
  model.precision = opt.precision;
  const bool backward_pass = backward || run_needs_backward(opt);
  if (opt.precision == Precision::BF16)
    with_prefix(setting_ref("precision") + " bf16:", [&] { prepare_weights(model, backward_pass); });
  else
    prepare_weights(model, backward_pass);
}

RunWeights run_weights(const std::string& arg, bool quiet, const BatchHooks& hooks) {
  if (arg.empty()) return {default_weights_path(), std::nullopt};
  std::error_code ec;
  if (!has_hub_prefix(arg) && std::filesystem::exists(std::filesystem::symlink_status(arg, ec)))
    return {arg, hub_snapshot_ref(arg)};
  std::string why;
  const std::optional<HubName> name = parse_hub_name(arg, &why);
  if (!name) {
    if (has_hub_prefix(arg)) throw Error(arg + ": not a Hugging Face Hub name: " + why);
    return {arg, std::nullopt};  // a path: the loader says it is missing
  }
  HubSnapshot snap;
  try {
    snap = fetch_hub_model(*name, hub_settings_from_env(), {quiet, ::isatty(2) == 1, hooks.cancelled});
  } catch (const Error& e) {
    throw Error(has_hub_prefix(arg) ? std::string(e.what())
                                    : arg + ": no such file or folder; as a Hugging Face Hub name: " + e.what());
  }
  if (!quiet)
    for (const std::string& n : snap.notes) say(hooks, LineStream::Err, "attnmap: note: " + printable(n));
  return {snap.folder, snap.ref};
}

ViTWeights load_weights(const RunWeights& weights, const ModelOverrides& ov,
                        const std::function<void(ViTWeights&)>& while_hashing) {
  ViTWeights model;
  std::function<void(ViTWeights&)> step;
  if (while_hashing)
    step = [&](ViTWeights& m) {
      m.hub = weights.hub;
      while_hashing(m);
    };
  try {
    model = load_model(weights.path, ov, step);
  } catch (const Error& e) {  // also while_hashing's: a damaged cached blob is still the error said first
    const std::string what = e.what();
    if (weights.hub)  // a file of the cache that does not parse: damaged, when its bytes are not its blob's name
      if (const std::string bad = hub_snapshot_damage(weights.path); !bad.empty()) throw Error(bad + " (the load said: " + what + ")");
    if (what.find(std::strerror(ENOMEM)) == std::string::npos || address_limit_note().empty()) throw;
    throw Error(what + address_limit_note());  // a mapping refused under ulimit -v: say the limit
  }
  for (const FileHash& f : model.files)
    if (const std::string bad = hub_blob_mismatch(f.path, f.sha256); !bad.empty()) throw Error(bad);
  model.hub = weights.hub;
  return model;
}

std::shared_ptr<const ViTWeights> load_run_model(const RenderOptions& opt, const RunWeights& weights, bool backward,
                                                 const BatchHooks& hooks) {
  const std::string& weights_path = weights.path;
  // Packed while the loader hashes the file (load_model's while_hashing): ~0.1-0.2 s off a ViT-B run's start.
  auto model = std::make_shared<ViTWeights>(
      load_weights(weights, opt.overrides, [&](ViTWeights& m) { finish_run_model(m, opt, backward); }));
  if (!opt.quiet && opt.names_classes) say(hooks, LineStream::Err, assumed_class_names_note(*model));
  check_address_headroom(weights_path);
  if (!opt.quiet)
    for (const auto& n : model->notices) say(hooks, LineStream::Err, "attnmap: note: " + printable(weights_path + ": " + n));
  return model;
}

std::string default_model_note(const RenderOptions& opt, bool on_photos) {
  if (!opt.weights.empty() || opt.quiet) return "";
  return std::string("attnmap: note: no -w given: the bundled default model, a small ViT trained on garment composites "
                     "(not an ImageNet model") + (on_photos ? "; on ordinary photos its maps show what it finds salient" : "") +
         "); -w brings your own checkpoint (docs/checkpoints.md)";
}

RunModel open_run_model(const RenderOptions& opt, const BatchHooks& hooks) {
  if (hooks.model) return {RunWeights{opt.weights, std::nullopt}, hooks.model(opt, false)};
  RunWeights source = run_weights(opt.weights, opt.quiet, hooks);
  std::shared_ptr<const ViTWeights> weights = load_run_model(opt, source, false, hooks);
  return {std::move(source), std::move(weights)};
}

namespace {

// How fast this CPU runs a bfloat16 linear() against float32: the time of a (197, 768) x (768, 768) product
// (one ViT-B/16 image's attention projection) in float32 over its time in bfloat16, best of 5 each on the
// calling thread, measured once per process (about 10 ms). > 1: bf16 is faster. 0 without bf16_supported().
double bf16_speed_ratio() {
  static const double ratio = [] {
    if (!bf16_supported()) return 0.0;
    const int M = 197, N = 768, K = 768;
    LinearW lin;
    lin.out = N;
    lin.in = K;
    std::vector<float> w(static_cast<size_t>(N) * K), x(static_cast<size_t>(M) * K), y(static_cast<size_t>(M) * N);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 17) * 0.01f - 0.08f;
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
    lin.weight = Floats(std::move(w));
    auto best = [&](Precision p) {
      LinearW one = lin;  // its own packed copy
      linear(y.data(), x.data(), one, M, p);  // packs, makes the primitives
      double t = 1e30;
      for (int i = 0; i < 5; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        linear(y.data(), x.data(), one, M, p);
        t = std::min(t, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return t;
    };
    return best(Precision::F32) / best(Precision::BF16);
  }();
  return ratio;
}

}  // namespace

std::string precision_speed_note(const RenderOptions& opt) {
  if (opt.precision != Precision::BF16 || opt.quiet) return "";
  const double r = bf16_speed_ratio();  // measured on this CPU once per process
  if (r >= 1.0) return "";
  std::ostringstream note;
  note << "attnmap: note: " << setting_ref("precision") << " bf16: on this CPU bfloat16 products ran at " << std::fixed
       << std::setprecision(2) << r << "x the float32 speed (oneDNN's bf16 kernels without AMX), so this run is slower "
       << "than without " << setting_ref("precision");
  return note.str();
}


/// The worker threads for n images, and the forward pass's thread pool set to match. Cores are shared so that
/// threads never exceed them: with one worker the pool gets every core (or the user's OPENBLAS_NUM_THREADS /
/// OMP_NUM_THREADS, when fewer: e.g. 1 on a busy shared machine); with several, each worker is one image at
/// a time on one thread (measured in docs/benchmarks.md).
void plan_load_threads() {
  set_blas_threads(blas_threads_to_set(1, usable_cores(), std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS")));
}

int plan_threads(const BatchOptions& bopt, size_t n) {
  const int cores = usable_cores();
  const int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(bopt.jobs > 0 ? bopt.jobs : cores), std::max<size_t>(n, 1)));
  const int blas =
      blas_threads_to_set(workers, cores, std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS"));
  set_blas_threads(blas);
  return workers;
}

}  // namespace attnmap
