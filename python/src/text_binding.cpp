// text_binding.cpp - a CLIP model's texts given after the model is made (text_binding.hpp).
#include "text_binding.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "engine/session.hpp"

namespace attnmap_py {

using namespace attnmap;

namespace {

// The tower from the weights file read again, with the text tower kept; refused when its bytes changed.
TextTower reread_tower(const std::string& name, const ViTWeights& built, ModelOverrides ov) {
  ov.keep_text = true;
  ViTWeights again = load_weights(run_weights(name, true, BatchHooks{}), ov);
  if (again.weights_sha256 != built.weights_sha256)
    throw Error(setting_ref("text") + ": " + name + " changed since the model was loaded (SHA-256 " +
                built.weights_sha256.substr(0, 12) + "... then, " + again.weights_sha256.substr(0, 12) +
                "... now); its text tower is read from the file when texts are first given: load the model again");
  return build_text_tower(again);
}

}  // namespace

std::shared_ptr<const TextTower> ModelTexts::tower(const ViTWeights& built, ModelOverrides ov) {
  std::lock_guard<std::mutex> lock(mu_);
  if (tower_) return tower_;
  if (!built.text_tensors.empty()) {
    tower_ = std::make_shared<const TextTower>(build_text_tower(built));
    return tower_;
  }
  if (!file_has_text_tower(built) || built.head.present()) {
    (void)build_text_tower(built);  // refuses, naming why (a classifier head, no text tower, no projection)
    throw Error(setting_ref("text") + ": " + name_ + " holds no CLIP text tower");
  }
  if (!from_file_)
    throw Error(setting_ref("text") + ": the state dict " + name_ + " was built without its text tower (texts given "
                "after from_state_dict() have no file to read it from): give the texts to from_state_dict(text=[...]), "
                "or load the saved file with attnmap.load()");
  tower_ = std::make_shared<const TextTower>(reread_tower(name_, built, ov));
  return tower_;
}

std::shared_ptr<const TextFeatures> ModelTexts::features(const ViTWeights& built, const ModelOverrides& ov,
                                                         const ModelSpec& spec, bool as_classes) {
  const std::string key = text_key(spec, as_classes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = features_.find(key); it != features_.end()) return it->second;
  }
  const std::shared_ptr<const TextTower> t = tower(built, ov);
  auto f = std::make_shared<const TextFeatures>(encode_texts(*t, spec, as_classes));
  std::lock_guard<std::mutex> lock(mu_);
  if (features_.size() >= 256) features_.clear();  // a bound: N x E floats each
  features_[key] = f;
  return f;
}

std::shared_ptr<const ViTWeights> ModelTexts::with_texts(std::shared_ptr<const ViTWeights> plain,
                                                         const ViTWeights& built, const ModelOverrides& ov,
                                                         const ModelSpec& spec, bool backward) {
  const std::shared_ptr<const TextFeatures> f = features(built, ov, spec, true);
  const std::string key = text_key(spec, true);
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = prepared_[backward ? 1 : 0];
  if (slot.second && slot.first == key) return slot.second;
  auto w = std::make_shared<ViTWeights>(*plain);  // the packed matrices are shared, not copied (Floats::derived)
  set_text_classes(*w, *f);
  slot = {key, w};
  return w;
}

pybind11::array_t<float> encode_text_array(ModelTexts& texts, const ViTWeights& built, const ModelOverrides& ov,
                                           const std::vector<std::string>& list,
                                           const std::vector<std::string>& prompts, const std::string& vocab,
                                           bool truncate, std::shared_mutex& engine_mu) {
  check_prompt_templates(prompts);
  ModelSpec spec;
  spec.text.texts = list;
  spec.text.templates = prompts;
  spec.text.vocab = vocab;
  spec.text.truncate = truncate;
  std::shared_ptr<const TextFeatures> f;
  {
    pybind11::gil_scoped_release nogil;
    std::shared_lock<std::shared_mutex> shared(engine_mu);
    f = texts.features(built, ov, spec, false);
  }
  auto* owned = new std::vector<float>(f->text);
  pybind11::capsule keep(owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  return pybind11::array_t<float>({static_cast<pybind11::ssize_t>(f->count), static_cast<pybind11::ssize_t>(f->dim)},
                                  owned->data(), keep);
}

double logit_scale_of(ModelTexts& texts, const ViTWeights& built, const ModelOverrides& ov,
                      std::shared_mutex& engine_mu, bool bias) {
  pybind11::gil_scoped_release nogil;
  std::shared_lock<std::shared_mutex> shared(engine_mu);
  const ClipTextWeights& w = texts.tower(built, ov)->weights;
  return bias ? static_cast<double>(w.logit_bias) : clip_logit_scale(w);
}

std::string text_key(const ModelSpec& spec, bool as_classes) {
  const TextSpec& t = spec.text;
  nlohmann::json k = {t.texts, t.templates, t.vocab, t.truncate, t.labels_as_texts, spec.labels_file, as_classes};
  return k.dump();
}

GivenSettings with_call_texts(const GivenSettings& model, const GivenSettings& call) {
  if (call.empty()) return model;
  const auto in_call = [&](const std::string& id) {
    return std::any_of(call.begin(), call.end(), [&](const GivenSetting& g) { return g.id == id; });
  };
  const bool texts = in_call("text") || in_call("texts");
  GivenSettings out;
  for (const GivenSetting& g : model)
    if (!in_call(g.id) && !(texts && (g.id == "text" || g.id == "texts"))) out.push_back(g);
  out.insert(out.end(), call.begin(), call.end());
  return out;
}

std::string given_vocab(const GivenSettings& model) {
  for (const GivenSetting& g : model)
    if (g.id == "vocab" && !g.values.empty()) return g.values.back();
  return "";
}

}  // namespace attnmap_py
