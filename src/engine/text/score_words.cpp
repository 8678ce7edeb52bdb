// score_words.cpp - the words of softmax vs sigmoid zero-shot probabilities (score_words.hpp).
#include "engine/text/score_words.hpp"

#include <cstdio>

#include "core/names.hpp"
#include "engine/text/zero_shot.hpp"
#include "model/vit_backward.hpp"

namespace attnmap {

const char* score_rule_name(ScoreRule rule) { return rule == ScoreRule::sigmoid ? "sigmoid" : "softmax"; }

std::string score_percent(double p, ScoreRule rule) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * p);
  return rule == ScoreRule::sigmoid ? "sigmoid " + std::string(buf) : std::string(buf);
}

std::string zero_shot_scores_phrase(ScoreRule rule, size_t texts, const std::string& aside) {
  if (rule == ScoreRule::sigmoid)  // SigLIP (Zhai et al. 2023): torch.sigmoid(logits_per_image), each text alone
    return "SigLIP's sigmoid score of each text alone (they need not sum to 1" + (aside.empty() ? "" : "; " + aside) + ")";
  return "CLIP's softmax over the " + counted(texts, "text") + " given" + (aside.empty() ? "" : " (" + aside + ")");
}

std::string zero_shot_rule_aside(ScoreRule rule) { return rule == ScoreRule::sigmoid ? "sigmoid, each text alone" : ""; }

std::string zero_shot_rule_parenthesis(ScoreRule rule) {
  return rule == ScoreRule::sigmoid ? " (" + zero_shot_rule_aside(rule) + ")" : "";
}

nlohmann::ordered_json zero_shot_settings(const ViTWeights& model) {
  nlohmann::ordered_json z = zero_shot_record(model);
  if (z.is_object() && model.zero_shot.rule == ScoreRule::sigmoid) z["score_rule"] = score_rule_name(model.zero_shot.rule);
  return z;
}

std::string class_views_unavailable(const ViTWeights& model) {
  return model.has_classes() ? explanations_unavailable(model.hp, true) : "";  // a head, or the texts
}

std::string texts_not_maps(const std::string& why) {
  return "this model's texts cannot be shown as maps yet: the class-specific views (chefer, gradcam, attn-grad) "
         "are not available: " + why;
}

std::string texts_scores_where() { return "render gives the texts' scores (its top-5 line; in Python, forward()'s probs)"; }

}  // namespace attnmap
