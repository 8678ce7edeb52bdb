// text_binding.hpp - a CLIP model's texts given after the model is made (issue 43 point 5; docs/python.md "CLIP
// texts"): Model.forward(text=[...]), encode_text, encode_image and logit_scale. The text tower is not kept by a
// model loaded without texts (it is a third to a half of a CLIP checkpoint); the first call that needs it reads
// the weights file again for it (refused when the file's bytes changed since the load), builds it once and keeps
// it. Encoded texts are cached per (texts, templates, vocabulary, truncation); the prepared model with a call's
// texts as its classes is kept for the last text list used, one per kind (forward / backward).
#pragma once
#include <pybind11/numpy.h>

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "app/cli/flags.hpp"
#include "checkpoint/weights.hpp"
#include "engine/render.hpp"
#include "engine/text/zero_shot.hpp"

namespace attnmap_py {

class ModelTexts {
 public:
  /// `name`: the weights' path (the file read again for the tower) or a state dict's name; `from_file`: false
  /// for a state dict (no file to read again).
  ModelTexts(std::string name, bool from_file) : name_(std::move(name)), from_file_(from_file) {}

  /// The text tower, built once: from `built`'s text tensors (a model loaded with texts keeps them), else from
  /// the file read again with `ov` (the model's overrides). Throws attnmap::Error: a classifier head, no text
  /// tower in the file, a state dict without its tensors, a file changed since the load.
  std::shared_ptr<const attnmap::TextTower> tower(const attnmap::ViTWeights& built, attnmap::ModelOverrides ov);

  /// spec.text's texts encoded by the tower (cached; engine encode_texts, as_classes as there).
  std::shared_ptr<const attnmap::TextFeatures> features(const attnmap::ViTWeights& built,
                                                        const attnmap::ModelOverrides& ov,
                                                        const attnmap::ModelSpec& spec, bool as_classes);

  /// `plain` (the prepared model) with spec.text's texts as its classes: a copy with its zero-shot head set
  /// (set_text_classes); the last one made per kind is kept.
  std::shared_ptr<const attnmap::ViTWeights> with_texts(std::shared_ptr<const attnmap::ViTWeights> plain,
                                                        const attnmap::ViTWeights& built,
                                                        const attnmap::ModelOverrides& ov,
                                                        const attnmap::ModelSpec& spec, bool backward);

 private:
  std::string name_;
  bool from_file_ = false;
  std::mutex mu_;  // guards what follows; the tower is built under it (other text calls wait)
  std::shared_ptr<const attnmap::TextTower> tower_;
  std::map<std::string, std::shared_ptr<const attnmap::TextFeatures>> features_;
  std::pair<std::string, std::shared_ptr<const attnmap::ViTWeights>> prepared_[2];  // [backward]: key, model
};

/// Model.encode_text: `texts` (each filled into every template of `prompts`, "{}" without) as (N, E) float32
/// rows L2-normalised, by `texts`'s tower; `vocab` "" as the model's texts; `truncate` as truncate_text. The GIL
/// is released while it runs, under `engine_mu` shared. Throws attnmap::Error (a template without {}, ...).
pybind11::array_t<float> encode_text_array(ModelTexts& texts, const attnmap::ViTWeights& built,
                                           const attnmap::ModelOverrides& ov, const std::vector<std::string>& list,
                                           const std::vector<std::string>& prompts, const std::string& vocab,
                                           bool truncate, std::shared_mutex& engine_mu);

/// Model.logit_scale: exp(logit_scale) of the text tower (CLIP.forward's logit_scale.exp()); with `bias`
/// Model.logit_bias: its logit_bias (SigLIP's, added to every logit; 0 for CLIP).
double logit_scale_of(ModelTexts& texts, const attnmap::ViTWeights& built, const attnmap::ModelOverrides& ov,
                      std::shared_mutex& engine_mu, bool bias = false);

/// The cache key of spec.text (texts, templates, vocabulary, truncation, as_classes).
std::string text_key(const attnmap::ModelSpec& spec, bool as_classes);

/// The model's settings with a call's text settings over them, keyword by keyword, as {**load's, **call's}:
/// the call's text or texts replace the model's texts (both keywords); its prompt, vocab, truncate_text the
/// model's own; a keyword the call leaves out keeps the model's (its vocabulary, its templates).
attnmap::GivenSettings with_call_texts(const attnmap::GivenSettings& model, const attnmap::GivenSettings& call);

/// The vocabulary the model was loaded with (its vocab= setting), "" none.
std::string given_vocab(const attnmap::GivenSettings& model);

}  // namespace attnmap_py
