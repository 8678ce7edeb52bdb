// score_words.hpp - what a model's zero-shot probabilities are, in the words every output uses (issue 43
// point 6; docs/text.md "Zero-shot classes"): CLIP's softmax over the texts given (ScoreRule::softmax, the
// words as before SigLIP, byte for byte) or SigLIP's sigmoid of each text's own logit (ScoreRule::sigmoid:
// exp(logit_scale) x cos + logit_bias, each text alone; they need not sum to 1). One place for the wording of
// the top-5 line, labels, figure captions and key line, the explorer's note, eval's lines and the records.
#pragma once
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"

namespace attnmap {

/// "softmax" / "sigmoid": the rule's name in records (zero_shot.score_rule) and Python's Result.score_rule.
const char* score_rule_name(ScoreRule rule);

/// A probability (0..1) as labels and figure captions write it: "84.6%" (softmax: as before), "sigmoid 12.0%".
std::string score_percent(double p, ScoreRule rule);

/// What the texts' zero-shot probabilities are: "CLIP's softmax over the 3 texts given" or "SigLIP's sigmoid
/// score of each text alone (they need not sum to 1)". `aside` (may be empty) is put in parentheses after it,
/// with the sigmoid's in the same ones: "... (they need not sum to 1; not a classifier's classes)".
std::string zero_shot_scores_phrase(ScoreRule rule, size_t texts, const std::string& aside = "");

/// The rule in passing, for short lines that already say "zero-shot" and the texts' count: "" for softmax
/// (the lines as before), "sigmoid, each text alone" for sigmoid.
std::string zero_shot_rule_aside(ScoreRule rule);
/// The same in parentheses after a word: "" for softmax, " (sigmoid, each text alone)" for sigmoid.
std::string zero_shot_rule_parenthesis(ScoreRule rule);

/// zero_shot_record(model) (texts, templates, vocabulary, ...; null without texts) with "score_rule":
/// "sigmoid" for a sigmoid-scored model (SigLIP); a softmax model's record as before (no key: softmax).
nlohmann::ordered_json zero_shot_settings(const ViTWeights& model);

/// Why the model's classes (a classifier head's or its zero-shot texts) cannot be drawn as class-specific views
/// (chefer, gradcam, attn-grad): the words of the refusal those views get (explanations_unavailable, as
/// resolve_views asks it), e.g. a CaiT whose classifier reads the mean of the patch tokens. "" when they can be
/// drawn, or when the model has no classes (the advice to add such a view stays as it was).
std::string class_views_unavailable(const ViTWeights& model);

/// The words when the texts' class-specific views cannot be drawn (why: class_views_unavailable, non-empty):
/// "this model's texts cannot be shown as maps yet: the class-specific views (...) are not available: <why>".
std::string texts_not_maps(const std::string& why);

/// Where a model's texts' scores are given when they cannot be maps: "render gives the texts' scores (its
/// top-5 line; in Python, forward()'s probs)".
std::string texts_scores_where();

}  // namespace attnmap
