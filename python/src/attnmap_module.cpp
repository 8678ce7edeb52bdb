// attnmap_module.cpp - the Python extension attnmap._attnmap (pybind11): a model loaded from a file or built
// from a state dict in memory, the forward pass's maps as NumPy arrays, the engine's figures, reports and batch
// runs with that model lent to them (ModelSource), and the user's own command line in process (cli()). The Python layer (python/attnmap/__init__.py) turns
// keyword arguments into settings as given ((id, values) pairs, through the flag registry's settings_of);
// make_request (app/cli/flags.hpp) parses and checks them as it does the command line's, so options are
// checked and worded in one place and the maps are the CLI's, bit for bit. Errors name keywords.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <csignal>
#include <cmath>
#include <cstring>
#include <iostream>
#include <filesystem>
#include <memory>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/command_line.hpp"
#include "app/cli/flags.hpp"
#include "app/commands/figure_cmd.hpp"
#include "engine/inspect/inspect.hpp"
#include "app/cli/options.hpp"
#include "engine/outputs.hpp"
#include "engine/paths.hpp"
#include "engine/render.hpp"
#include "engine/session.hpp"
#include "engine/text/score_words.hpp"
#include "engine/text/zero_shot.hpp"
#include "checkpoint/layouts.hpp"
#include "checkpoint/weights.hpp"
#include "core/error.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "maps/views.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"
#include "batch_binding.hpp"
#include "cli_binding.hpp"
#include "figures_binding.hpp"
#include "sigint_note.hpp"
#include "state_dict_digest.hpp"
#include "text_binding.hpp"

namespace py = pybind11;
using namespace attnmap;
using attnmap_py::g_sigint;
using attnmap_py::SigintNote;

namespace {

// ---- helpers --------------------------------------------------------------------------------------------

// A vector handed to NumPy without a copy: the array owns it through a capsule.
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule keep(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), keep);
}

// The engine's process-wide state: a command run in process holds it alone (std::cout / std::cerr are the
// process's; a run sizes the forward pass's thread pool for its workers), forward passes share it (the pool
// runs one parallel_for at a time and the others inline). The pool is sized for one image at a time on every
// core before the first forward pass, and again after a command run (g_pool_for_forward false).
std::shared_mutex g_engine_mu;
std::atomic<bool> g_pool_for_forward{false};

// With the GIL released: the pool sized as the command line sizes it for a single image.
void size_pool_for_forward() {
  if (g_pool_for_forward.load()) return;
  std::unique_lock<std::shared_mutex> lock(g_engine_mu);
  if (g_pool_for_forward.load()) return;
  BatchOptions one;
  one.jobs = 1;
  (void)plan_threads(one, 1);
  g_pool_for_forward = true;
}


// Settings as the Python layer gives them: (setting id, values) pairs (_options.to_given), in the door's form.
using GivenPairs = std::vector<std::pair<std::string, std::vector<std::string>>>;
GivenSettings given_of(const GivenPairs& pairs) {
  GivenSettings given;
  for (const auto& [id, values] : pairs) given.push_back({id, values});
  return given;
}

// The options of a run of the model `name` made with the settings `model_settings`, and a call's settings:
// render's request through the one door (make_request), never an argv. Throws attnmap::Error naming settings.
RenderOptions run_options(const GivenSettings& model_settings, const std::string& name, const GivenSettings& call = {}) {
  GivenSettings given = model_settings;
  given.insert(given.end(), call.begin(), call.end());
  given.push_back({"weights", {name}});
  given.push_back({"inputs", {"IMAGE"}});  // an input, never read: render's request needs one
  return make_request("render", given).ro;
}

// ---- the model ------------------------------------------------------------------------------------------

// A model as the Python layer holds it: the weights as loaded or built (not prepared), its name (the file's
// path, or the state dict's name, which its runs name as their weights), the settings it was made with (the
// settings that make the model: size, precision, labels, heads, ...), and the prepared forms, made once each:
// for the forward pass alone and with the backward pass's matrices.
class Model {
 public:
  Model(std::shared_ptr<ViTWeights> built, std::string name, GivenSettings given, bool from_file)
      : built_(std::move(built)), name_(std::move(name)), given_(std::move(given)), from_file_(from_file),
        texts_(name_, from_file) {}

  const std::string& name() const { return name_; }
  const ViTWeights& built() const { return *built_; }
  const GivenSettings& given() const { return given_; }
  /// The model's settings as (id, values) pairs (Python: Model.given).
  GivenPairs given_pairs() const {
    GivenPairs out;
    for (const GivenSetting& g : given_) out.emplace_back(g.id, g.values);
    return out;
  }
  bool from_file() const { return from_file_; }
  /// Texts given after the model is made (text_binding.hpp), and the overrides a re-read of the file uses.
  attnmap_py::ModelTexts& texts() { return texts_; }
  ModelOverrides overrides() const { return options({}).overrides; }

  // The run options of a forward call: the model's settings and the call's, as `attnmap render`'s request.
  RenderOptions options(const GivenSettings& call) const { return run_options(given_, name_, call); }

  // The model prepared for a run (finish_run_model of a copy of the built weights), made once per kind.
  std::shared_ptr<const ViTWeights> prepared(const RenderOptions& opt, bool backward) {
    const bool bw = backward || run_needs_backward(opt);
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<const ViTWeights>& slot = bw ? backward_ : forward_;
    if (!slot) {
      auto w = std::make_shared<ViTWeights>(*built_);
      RenderOptions o = options({});
      o.quiet = true;  // its notes were said when the model was made
      finish_run_model(*w, o, bw);
      slot = std::move(w);
    }
    return slot;
  }

 private:
  std::shared_ptr<ViTWeights> built_;
  std::string name_;
  GivenSettings given_;
  bool from_file_ = false;
  std::mutex mu_;
  std::shared_ptr<const ViTWeights> forward_, backward_;
  attnmap_py::ModelTexts texts_;
};

// The model as its runs see it: prepared (--size's grid, the class names of --labels or ImageNet-1k's).
py::dict model_info(Model& m) {
  std::shared_ptr<const ViTWeights> run_model;
  {
    py::gil_scoped_release nogil;
    std::shared_lock<std::shared_mutex> shared(g_engine_mu);
    RenderOptions opt = m.options({});
    run_model = m.prepared(opt, false);
  }
  const ViTWeights& w = *run_model;
  const HParams& hp = w.hp;
  py::dict d;
  d["name"] = m.name();
  d["layout"] = layout_name(hp.layout);
  d["depth"] = hp.depth;
  d["num_heads"] = hp.num_heads;
  d["head_dim"] = hp.head_dim;
  d["dim"] = hp.dim;
  d["mlp_dim"] = hp.mlp_dim;
  d["patch"] = hp.patch;
  d["grid"] = py::make_tuple(hp.grid_h, hp.grid_w);
  d["image_size"] = py::make_tuple(hp.image_w, hp.image_h);
  d["tokens"] = hp.tokens();
  d["num_prefix"] = hp.num_prefix;
  d["class_token"] = hp.class_token;
  d["num_registers"] = hp.num_registers;
  d["num_classes"] = w.num_classes();  // a head's classes, or the texts (load(text=[...]))
  d["labels"] = hp.labels;
  d["mean"] = py::make_tuple(hp.mean[0], hp.mean[1], hp.mean[2]);
  d["std"] = py::make_tuple(hp.std[0], hp.std[1], hp.std[2]);
  d["eps"] = hp.eps;
  d["format"] = w.format;
  d["weights_sha256"] = w.weights_sha256;
  if (w.hub) {  // the Hub name it was fetched as (issue 40)
    py::dict hub;
    hub["repo"] = w.hub->repo;
    hub["revision"] = w.hub->revision;
    hub["commit"] = w.hub->commit;
    d["hub"] = hub;
  } else {
    d["hub"] = py::none();
  }
  d["param_count"] = w.param_count;
  d["query"] = hp.query_name();
  std::map<std::string, std::string> source;
  for (const auto& [k, v] : hp.source) source[k] = spell_as_keywords(v);  // "{setting:size}": size
  d["source"] = source;
  return d;
}

// quiet: the Hub fetch's progress lines and notes are not printed (the loader's notes are Model.notices either way).
std::shared_ptr<Model> load_file(const std::string& path, const GivenPairs& settings, bool quiet) {
  const GivenSettings given = given_of(settings);
  const RenderOptions opt = run_options(given, path);  // a bad value is refused here, before any file is read
  std::shared_ptr<ViTWeights> w;
  RunWeights rw;
  SigintNote sigint;  // Ctrl-C during a Hub download: it stops (its partial file kept), KeyboardInterrupt
  try {
    py::gil_scoped_release nogil;
    attnmap::BatchHooks hooks;  // the fetch's notes on the process's standard error, as the command line's
    hooks.cancelled = [] { return g_sigint.load(); };
    hooks.on_line = [](attnmap::LineStream, const std::string& text) { std::cerr << spell_as_keywords(text) << "\n"; };
    rw = run_weights(path, quiet, hooks);  // a path, or a Hub name from the cache or fetched
    w = std::make_shared<ViTWeights>(load_weights(rw, opt.overrides));
  } catch (...) {
    sigint.raise_if_interrupted();
    throw;
  }
  sigint.raise_if_interrupted();
  return std::make_shared<Model>(std::move(w), rw.path, given, true);
}

// A NumPy dtype's safetensors-style name ("F32", "I64", "BOOL", ...), for the tensor list and the digest.
std::string dtype_word(const py::dtype& dt) {
  const char k = dt.kind();
  const auto size = dt.itemsize();
  if (k == 'f') return "F" + std::to_string(size * 8);
  if (k == 'i') return "I" + std::to_string(size * 8);
  if (k == 'u') return size == 1 ? "U8" : "U" + std::to_string(size * 8);
  if (k == 'b') return "BOOL";
  return std::string("dtype '") + k + std::to_string(size) + "'";
}

// from_state_dict's tensors: (name, array) pairs, each array C-contiguous (the Python layer made them so).
std::shared_ptr<Model> from_state_dict(const std::vector<std::pair<std::string, py::array>>& items,
                                       const std::string& config_json, const std::string& name,
                                       const GivenPairs& settings) {
  const GivenSettings given = given_of(settings);
  const RenderOptions opt = run_options(given, name);
  RawWeights raw;
  raw.path = name;
  raw.config_where = "config";
  try {
    raw.config = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": config is not a JSON object: " + e.what());
  }
  if (!raw.config.is_object()) throw Error(name + ": config must be a dict (the attnmap config object)");
  std::vector<std::pair<std::string, py::array>> sorted = items;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  attnmap_py::StateDictDigest digest;
  std::vector<std::string> skipped_names;
  for (size_t i = 0; i + 1 < sorted.size(); ++i)
    if (sorted[i].first == sorted[i + 1].first) throw Error(name + ": tensor " + sorted[i].first + " is given twice");
  for (const auto& [key, arr] : sorted) {
    std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
    const size_t n = checked_numel(shape, key.c_str());
    const py::dtype dt = arr.dtype();
    const std::string word = dtype_word(dt);
    digest.add(key + "\n" + shape_str(shape) + "\n");
    if (dt.kind() == 'f') {
      if (dt.itemsize() != 2 && dt.itemsize() != 4 && dt.itemsize() != 8)
        throw Error(name + ": tensor " + key + " has dtype " + word + " (float16, float32 or float64 expected)");
      const py::array_t<float, py::array::c_style | py::array::forcecast> f32 = arr;  // the Python layer sent
      std::vector<float> values(f32.data(), f32.data() + n);                             // float32 where it could
      if (dt.itemsize() == 8) {  // a finite float64 beyond float32's range is refused, as the file readers do
        const py::array_t<double, py::array::c_style | py::array::forcecast> f64 = arr;
        for (size_t j = 0; j < n; ++j)
          if (std::isfinite(f64.data()[j]) && !std::isfinite(values[j]))
            throw Error(name + ": tensor " + key + " holds a value beyond float32's range (" +
                        std::to_string(f64.data()[j]) + ") at element " + std::to_string(j));
      }
      for (size_t j = 0; j < n; ++j)
        if (!std::isfinite(values[j]))
          throw Error(name + ": tensor " + key + " holds a non-finite value (" + std::to_string(values[j]) +
                      ") at element " + std::to_string(j));
      digest.add(values.data(), n * sizeof(float));
      raw.tensors[key] = Tensor{shape, Floats(std::move(values))};
    } else if (dt.kind() == 'i' || dt.kind() == 'u' || dt.kind() == 'b') {
      const py::array_t<int64_t, py::array::c_style | py::array::forcecast> ints = arr;
      digest.add(word + "\n");
      digest.add(ints.data(), n * sizeof(int64_t));
      raw.skipped[key] = word;
      skipped_names.push_back(key);
      if (dt.kind() != 'b' && n <= (size_t{1} << 22)) raw.ints[key] = std::vector<int64_t>(ints.data(), ints.data() + n);
    } else {
      throw Error(name + ": tensor " + key + " has " + word + ", not a number type");
    }
  }
  if (!skipped_names.empty()) {  // as the file readers say it
    std::string list;
    for (const std::string& k : skipped_names) list += (list.empty() ? "" : ", ") + k + " (" + raw.skipped[k] + ")";
    raw.notices.push_back("skipped non-float tensors: " + list);
  }
  std::shared_ptr<ViTWeights> w;
  {
    py::gil_scoped_release nogil;
    w = std::make_shared<ViTWeights>(build_model(raw, SideConfig{}, opt.overrides));
  }
  w->format = "state_dict";
  w->weights_sha256 = digest.hex();
  return std::make_shared<Model>(std::move(w), name, given, false);
}

// ---- the forward pass -----------------------------------------------------------------------------------

// An image as the Python layer passes it: a path, or a uint8 (H, W, 3) array.
Image image_of(const py::object& obj, const RenderOptions& opt, std::string* sha, std::string* label) {
  if (py::isinstance<py::str>(obj)) {
    const std::string path = obj.cast<std::string>();
    *label = path;
    std::vector<uint8_t> bytes;
    Image img;
    {
      py::gil_scoped_release nogil;
      bytes = read_file(path);
      *sha = sha256_bytes(bytes.data(), bytes.size());
      img = decode_image(bytes.data(), bytes.size(), path, opt.load);
    }
    return img;
  }
  const py::array_t<uint8_t, py::array::c_style> a = py::array_t<uint8_t, py::array::c_style>::ensure(obj);
  if (!a || a.ndim() != 3 || a.shape(2) != 3)
    throw Error("an image array must be uint8 (H, W, 3) RGB, found " +
                std::string(py::str(obj.attr("dtype"))) + " " + std::string(py::str(obj.attr("shape"))));
  Image img;
  img.height = static_cast<int>(a.shape(0));
  img.width = static_cast<int>(a.shape(1));
  if (img.width < 1 || img.height < 1) throw Error("an image array must have at least 1x1 pixels");
  const size_t n = checked_mul(checked_mul(static_cast<size_t>(img.width), static_cast<size_t>(img.height), "image"), 3, "image");
  if (n / 3 > opt.load.max_pixels)
    throw Error("the image array has " + std::to_string(n / 3) + " pixels, more than the limit " +
                std::to_string(opt.load.max_pixels) + " (max_pixels)");
  img.rgb.assign(a.data(), a.data() + n);
  *sha = sha256_bytes(img.rgb.data(), img.rgb.size());
  *label = "array " + std::to_string(img.height) + "x" + std::to_string(img.width) + "x3";
  return img;
}

// image_of, its failure an input's (exit status 1), as the command line's for a file it cannot read.
Image input_image(const py::object& obj, const RenderOptions& opt, std::string* sha, std::string* label) {
  try {
    return image_of(obj, opt, sha, label);
  } catch (const Error& e) {
    throw InputFailure(e.what());
  }
}

// The kind of a view in the grammar's words.
const char* kind_word(ViewKind k) {
  switch (k) {
    case ViewKind::Photo: return "photo";
    case ViewKind::Attention: return "attention";
    case ViewKind::Rollout: return "rollout";
    case ViewKind::Probe: return "probe";
    case ViewKind::Chefer: return "chefer";
    case ViewKind::GradCam: return "gradcam";
    case ViewKind::AttnGrad: return "attn-grad";
  }
  return "";
}

py::dict map_dict(const RenderContext& ctx, const ComputedViews& cv, ViewMap&& m) {
  const ResolvedView& v = ctx.views[m.view];
  const HParams& hp = ctx.model->hp;
  py::dict d;
  d["view"] = v.name;
  d["tag"] = v.tag;
  d["label"] = view_label(v, ctx.opt->block_base);
  d["units"] = v.units;
  d["kind"] = kind_word(v.spec.kind);
  const bool has_block = v.spec.kind == ViewKind::Attention || v.spec.kind == ViewKind::Rollout ||
                         v.spec.kind == ViewKind::GradCam || v.spec.kind == ViewKind::AttnGrad;
  d["block"] = has_block ? py::object(py::int_(v.spec.layer)) : py::object(py::none());
  const bool has_head = v.spec.kind == ViewKind::Attention || v.spec.kind == ViewKind::Rollout || v.spec.kind == ViewKind::Probe;
  d["head"] = has_head ? py::object(py::str(fusion_name(v.spec.head, "h"))) : py::object(py::none());
  d["class_index"] = m.class_index >= 0 ? py::object(py::int_(m.class_index)) : py::object(py::none());
  // The class's name as the labels say it ("T-shirt/top"; "class 7" without labels), as top5 and figures say it.
  const std::string cname = m.class_index >= 0 && static_cast<size_t>(m.class_index) < hp.labels.size()
                                ? hp.labels[static_cast<size_t>(m.class_index)]
                                : "class " + std::to_string(m.class_index);
  d["class_name"] = m.class_index >= 0 ? py::object(py::str(cname)) : py::object(py::none());
  // the file-name form render writes (a CLIP's texts: text_file_labels, unique and safe for any text)
  d["class_tag"] = m.class_index >= 0 ? py::object(py::str(class_file_name(*ctx.model, m.class_index))) : py::object(py::none());
  d["written"] = v.spec.written;
  d["class_probability"] = m.class_index >= 0 && static_cast<size_t>(m.class_index) < cv.probs.size()
                               ? py::object(py::float_(cv.probs[static_cast<size_t>(m.class_index)]))
                               : py::object(py::none());
  d["marked_patch"] = m.marked >= 0 ? py::object(py::int_(m.marked)) : py::object(py::none());
  d["array"] = to_numpy(std::move(m.map), {hp.grid_h, hp.grid_w});
  return d;
}

// forward's model: prepared, with a call's texts (text=[...]) as its classes when given (text_binding.hpp).
std::shared_ptr<const ViTWeights> run_model(Model& model, const RenderOptions& opt, bool backward, bool call_texts) {
  std::shared_ptr<const ViTWeights> w = model.prepared(opt, backward);
  if (!call_texts) return w;
  return model.texts().with_texts(std::move(w), model.built(), model.overrides(), opt,
                                  backward || run_needs_backward(opt));
}

// One forward call: every image's maps of the views the settings ask for, as dicts the Python layer wraps.
// text_settings (text, texts, prompt, vocab, truncate_text): the call's texts, over the model's (with_call_texts).
py::list forward(Model& model, const std::vector<py::object>& images, const GivenPairs& settings,
                 bool attentions, const GivenPairs& text_settings) {
  GivenSettings given = attnmap_py::with_call_texts(model.given(), given_of(text_settings));
  RenderOptions opt = run_options(given, model.name(), given_of(settings));
  opt.quiet = true;
  const bool call_texts = !text_settings.empty();
  std::shared_ptr<const ViTWeights> w;
  std::unique_ptr<RenderContext> ctx;
  {
    py::gil_scoped_release nogil;
    size_pool_for_forward();  // the forward pass on every core, as the command line's single image
    std::shared_lock<std::shared_mutex> shared(g_engine_mu);
    w = run_model(model, opt, false, call_texts);
    ctx = std::make_unique<RenderContext>(make_render_context(*w, opt));
    if (std::any_of(ctx->views.begin(), ctx->views.end(), [](const ResolvedView& v) { return v.class_specific; })) {
      w = run_model(model, opt, true, call_texts);
      ctx = std::make_unique<RenderContext>(make_render_context(*w, opt));
    }
  }
  if (attentions && w->hp.class_attn_blocks > 0)
    throw Error("attentions=True: CaiT's blocks hold two kinds of attention (patch self-attention and the class "
                "token's class attention), not one (L, H, T, T) array; read its maps through views");
  py::list out;
  for (const py::object& obj : images) {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C between images
    std::string sha, label;
    Image photo = input_image(obj, opt, &sha, &label);
    ComputedViews cv;
    std::vector<float> attn;
    std::vector<float> logits;
    {
      py::gil_scoped_release nogil;
      std::shared_lock<std::shared_mutex> shared(g_engine_mu);
      if (attentions) {
        const HParams& hp = w->hp;
        const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, opt.resize, hp.mean.data(), hp.std.data(),
                                         hp.crop_pct.value_or(0.875f));
        ForwardOptions fo;
        fo.keep_full = true;
        attn = std::move(vit_forward(*w, in.chw.data(), fo).attn);
      }
      try {
        cv = compute_photo_views(*ctx, std::move(photo), std::move(sha));
      } catch (const Error& e) {  // a pixel query off this photo, ...: this input's failure, as the CLI's
        throw InputFailure(label + ": " + e.what());
      }
    }
    py::dict r;
    r["input"] = label;
    r["input_sha256"] = cv.input_sha256;
    py::list maps;
    for (ViewMap& m : cv.maps) maps.append(map_dict(*ctx, cv, std::move(m)));
    r["maps"] = maps;
    r["probs"] = cv.probs.empty() ? py::object(py::none()) : py::object(to_numpy(std::vector<double>(cv.probs), {static_cast<py::ssize_t>(cv.probs.size())}));
    r["top5"] = cv.top5;
    // how probs / top5 were computed: "softmax" (a head; CLIP over the texts) or "sigmoid" (SigLIP, each text alone)
    r["score_rule"] = cv.probs.empty() ? py::object(py::none()) : py::object(py::str(score_rule_name(w->zero_shot.rule)));
    r["box"] = py::make_tuple(cv.box.x0, cv.box.y0, cv.box.x1 - cv.box.x0, cv.box.y1 - cv.box.y0);
    std::vector<std::string> notes;  // a call's texts' notes first (one text; a text cut), then the run's
    if (call_texts)
      for (const std::string& n : model.texts().features(model.built(), model.overrides(), opt, true)->notes)
        notes.push_back(spell_as_keywords(n));
    notes.insert(notes.end(), cv.notes.begin(), cv.notes.end());
    r["notes"] = notes;
    r["classes"] = cv.classes;
    if (attentions) {
      const HParams& hp = w->hp;
      const py::ssize_t T = hp.tokens();
      r["attentions"] = to_numpy(std::move(attn), {hp.depth, hp.num_heads, T, T});
    } else {
      r["attentions"] = py::none();
    }
    out.append(r);
  }
  return out;
}

// Model.encode_image: (B, E) float32, each row CLIP's or SigLIP's normalised image feature (engine encode_images).
py::array_t<float> encode_image(Model& model, const std::vector<py::object>& images, const GivenPairs& settings) {
  RenderOptions opt = model.options(given_of(settings));
  std::shared_ptr<const ViTWeights> w;
  {
    py::gil_scoped_release nogil;
    size_pool_for_forward();
    std::shared_lock<std::shared_mutex> shared(g_engine_mu);
    w = model.prepared(opt, false);
  }
  const HParams& hp = w->hp;
  std::vector<ModelInput> inputs;
  for (const py::object& obj : images) {
    std::string sha, label;
    const Image photo = input_image(obj, opt, &sha, &label);
    inputs.push_back(preprocess(photo, hp.image_w, hp.image_h, opt.resize, hp.mean.data(), hp.std.data(),
                                hp.crop_pct.value_or(0.875f)));
  }
  std::vector<const float*> chw;
  for (const ModelInput& in : inputs) chw.push_back(in.chw.data());
  std::vector<float> out;
  {
    py::gil_scoped_release nogil;
    std::shared_lock<std::shared_mutex> shared(g_engine_mu);
    out = encode_images(*w, chw);
  }
  const py::ssize_t B = static_cast<py::ssize_t>(inputs.size()), E = B ? static_cast<py::ssize_t>(out.size()) / B : 0;
  return to_numpy(std::move(out), {B, E});
}

// ---- the command line in process ------------------------------------------------------------------------

// attnmap.cli(args): the user's own command line, its standard output and error lines to the Python sinks
// (cli_binding.hpp). Ctrl-C (SIGINT) during the run: a render stops after the images under way (their files
// complete, the manifest not compacted), and KeyboardInterrupt is raised when the run has returned.
int run(const std::vector<std::string>& args, py::object out_sink, py::object err_sink) {
  SigintNote sigint;
  g_pool_for_forward = false;  // the run sizes the pool for its own workers
  const int rc = attnmap_py::run_cli(args, out_sink, err_sink, g_engine_mu, [] { return g_sigint.load(); });
  sigint.raise_if_interrupted();
  return rc;
}

// ---- overlay, panel, figure, evaluate: the engine's results in memory (figures_binding.hpp) -------------

ModelSource source_of(const std::shared_ptr<Model>& model) {
  return [model](const RenderOptions& opt, bool backward) { return model->prepared(opt, backward); };
}

// The model's settings, a call's and the weights it is named by, as a command's settings as given.
GivenSettings with_model(const Model& model, const GivenPairs& call) {
  GivenSettings given = model.given();
  for (const auto& [id, values] : call) given.push_back({id, values});
  given.push_back({"weights", {model.name()}});
  return given;
}

// Model.render_outputs: render's files of one image (a path or an array) in memory.
py::list render_outputs(const std::shared_ptr<Model>& model, const py::object& image, const GivenPairs& settings,
                        const std::string& input, const std::string& out_base) {
  RenderOptions opt = model->options(given_of(settings));
  opt.quiet = true;
  std::string sha, label;
  const Image photo = input_image(image, opt, &sha, &label);
  return attnmap_py::image_output_list(opt, source_of(model), model->name(), photo, sha, input, out_base, g_engine_mu);
}

// Model.figure: the figure command's figure of `images` (paths or arrays, named `names`) in memory.
// figure()'s images as rows: a path to a folder walked as the figure command walks it (its files, named by
// their paths); every path missing: the command's usage error (exit 2).
void walk_figure_folders(std::vector<py::object>& images, std::vector<std::string>& names) {
  std::vector<std::string> paths;
  for (const py::object& im : images)
    if (py::isinstance<py::str>(im)) paths.push_back(im.cast<std::string>());
  std::vector<std::string> failed;
  if (paths.size() == images.size()) (void)figure_input_files(paths, &failed);  // throws when all are missing
  std::vector<py::object> rows;
  std::vector<std::string> row_names;
  for (size_t i = 0; i < images.size(); ++i) {
    std::error_code ec;
    const bool folder = py::isinstance<py::str>(images[i]) &&
                        std::filesystem::is_directory(images[i].cast<std::string>(), ec);
    if (!folder) {
      rows.push_back(images[i]);
      row_names.push_back(names.at(i));
      continue;
    }
    for (const std::string& f : figure_input_files({images[i].cast<std::string>()}, &failed)) {
      rows.push_back(py::str(f));
      row_names.push_back(f);
    }
  }
  images = std::move(rows);
  names = std::move(row_names);
}

py::dict figure_of(const std::shared_ptr<Model>& model, std::vector<py::object> images,
                   std::vector<std::string> names, const GivenPairs& settings, const std::string& format) {
  walk_figure_folders(images, names);
  GivenSettings given = with_model(*model, settings);
  given.push_back({"inputs", names});
  const FigurePlan plan = make_request("figure", given).figure;
  RenderOptions limits;  // the images decoded as the figure decodes its files
  limits.load = plan.ro.load;
  std::vector<FigurePhoto> photos(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    photos[i].name = names.at(i);
    std::string label;
    try {
      photos[i].photo = image_of(images[i], limits, &photos[i].sha256, &label);
    } catch (const Error& e) {
      throw InputFailure(std::string(e.what()) + "; no figure written");
    }
  }
  return attnmap_py::figure_output(plan, format, std::move(photos), source_of(model), model->name(), g_engine_mu);
}

// Model.render_folder: render over files and folders (`settings` name the inputs and --out) with this model
// lent, rows, progress and lines to the Python callables (batch_binding.hpp). Ctrl-C or a callback's exception
// stops the run after the images under way, then KeyboardInterrupt or that exception is raised.
int render_folder(const std::shared_ptr<Model>& model, const GivenPairs& settings, py::object progress,
                  py::object on_line, py::object on_row, bool progress_bar) {
  SigintNote sigint;
  g_pool_for_forward = false;  // the run sizes the pool for its own workers
  const int rc = attnmap_py::run_batch(with_model(*model, settings), source_of(model), {progress, on_line, on_row},
                                       progress_bar, g_engine_mu, [] { return g_sigint.load(); });
  sigint.raise_if_interrupted();
  return rc;
}

// Model.evaluate: eval's report in memory (`settings` name the inputs and masks).
py::dict evaluate(const std::shared_ptr<Model>& model, const GivenPairs& settings) {
  g_pool_for_forward = false;  // eval sizes the pool for its own products
  return attnmap_py::eval_output(with_model(*model, settings), source_of(model), g_engine_mu);
}

}  // namespace

PYBIND11_MODULE(_attnmap, m) {
  m.doc() = "attnmap's engine (the Python layer is attnmap/__init__.py)";
  static py::exception<Error> error(m, "AttnmapError");
  error.attr("exit_code") = 2;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputFailure& e) {  // exit_code 1, as the command line's status for a failed input
      py::object instance = py::reinterpret_borrow<py::object>(error.ptr())(py::str(spell_as_keywords(e.what())));
      instance.attr("exit_code") = 1;
      PyErr_SetObject(error.ptr(), instance.ptr());
    } catch (const Error& e) {
      PyErr_SetString(error.ptr(), spell_as_keywords(e.what()).c_str());
    }
  });
  m.attr("__version__") = ATTNMAP_VERSION;

  py::class_<Model, std::shared_ptr<Model>>(m, "Model")
      .def_property_readonly("name", &Model::name)
      .def_property_readonly("given", &Model::given_pairs)
      .def_property_readonly("info", &model_info)
      .def_property_readonly("notices",
                             [](const Model& self) {
                               std::vector<std::string> out;
                               for (const std::string& n : self.built().notices) out.push_back(spell_as_keywords(n));
                               return out;
                             })
      .def_property_readonly("tensors",
                             [](const Model& self) {
                               std::vector<std::tuple<std::string, std::string, std::string>> t;
                               for (const auto& u : self.built().tensors) t.emplace_back(u.name, u.shape, u.reason);
                               return t;
                             })
      .def("describe", [](const Model& self) { return describe_model(self.built(), self.name()); })
      .def("forward", &forward, py::arg("images"), py::arg("settings"), py::arg("attentions") = false,
           py::arg("text_settings") = GivenPairs{})
      .def("encode_image", &encode_image, py::arg("images"), py::arg("settings"))
      .def("encode_text", [](Model& self, const std::vector<std::string>& texts, const std::vector<std::string>& prompts,
                             const std::string& vocab, bool truncate) {
        return attnmap_py::encode_text_array(self.texts(), self.built(), self.overrides(), texts, prompts,
                                             vocab.empty() ? attnmap_py::given_vocab(self.given()) : vocab, truncate,
                                             g_engine_mu); })
      .def_property_readonly("logit_scale", [](Model& self) {
        return attnmap_py::logit_scale_of(self.texts(), self.built(), self.overrides(), g_engine_mu); })
      .def_property_readonly("logit_bias", [](Model& self) {
        return attnmap_py::logit_scale_of(self.texts(), self.built(), self.overrides(), g_engine_mu, true); })
      .def("render_outputs", &render_outputs, py::arg("image"), py::arg("settings"), py::arg("input"), py::arg("out_base"))
      .def("figure", &figure_of, py::arg("images"), py::arg("names"), py::arg("settings"), py::arg("format"))
      .def("evaluate", &evaluate, py::arg("settings"))
      .def("render_folder", &render_folder, py::arg("settings"), py::arg("progress"), py::arg("on_line"),
           py::arg("on_row"), py::arg("progress_bar"));

  m.def("load", &load_file, py::arg("path"), py::arg("settings"), py::arg("quiet") = false);
  m.def("from_state_dict", &from_state_dict, py::arg("items"), py::arg("config_json"), py::arg("name"), py::arg("settings"));
  m.def("run", &run, py::arg("args"), py::arg("out"), py::arg("err"));
  m.def("settings_of", &attnmap_py::settings_list, py::arg("command"));
  m.def("default_weights_path", &default_weights_path);
  m.def("config_keys", &attnmap::config_keys);  // the config object's keys the loader reads (from_state_dict's check)
  m.def("write_png", [](const std::string& path, const py::array_t<uint8_t, py::array::c_style>& a) {
    if (a.ndim() != 3 || a.shape(2) != 3) throw Error("an image array must be uint8 (H, W, 3) RGB");
    Image img;
    img.height = static_cast<int>(a.shape(0));
    img.width = static_cast<int>(a.shape(1));
    img.rgb.assign(a.data(), a.data() + a.size());
    write_png(path, img);
  });
}
