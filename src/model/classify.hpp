// classify.hpp - class probabilities from a classifier head's logits, and the top-k classes by name.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/weights.hpp"

namespace attnmap {

/// softmax(logits) (C) -> probabilities (C), computed in double with the maximum subtracted (stable), as
/// torch.softmax(logits, -1); ScoreRule::sigmoid: each logit's own 1 / (1 + exp(-logit)) (torch.sigmoid,
/// SigLIP). Throws attnmap::Error for an empty or non-finite input.
std::vector<double> class_probabilities(const std::vector<float>& logits, ScoreRule rule = ScoreRule::softmax);

/// The k most probable classes, most probable first (ties: lower index first), as (name, probability).
/// The name is labels[i] when `labels` has one name per class (C entries, config "labels"), else
/// "class i" (0-based index into the head's outputs). k is capped at C.
std::vector<std::pair<std::string, float>> top_k_classes(const std::vector<float>& logits,
                                                         const std::vector<std::string>& labels, int k = 5,
                                                         ScoreRule rule = ScoreRule::softmax);

/// Indices of the k most probable classes, most probable first (ties: lower index first); k capped at C.
std::vector<int> top_k_indices(const std::vector<float>& logits, int k);

/// Which class(es) an explanation is for (`--class`): an index, a label from the weights' config, or the K
/// most probable ("top1", "topK").
struct ClassSpec {
  enum class Kind { Index, Name, TopK } kind = Kind::TopK;
  int index = 0;     ///< Kind::Index, 0-based
  std::string name;  ///< Kind::Name
  int k = 1;         ///< Kind::TopK
  std::string written = "top1";  ///< as given ("3", "Bag", "top5"): what settings records and messages show
};

/// Parses "N" (a non-negative integer), "topK" (K >= 1) or any other text as a label. Throws attnmap::Error
/// for an empty value or "top" followed by something that is not a positive integer.
ClassSpec parse_class_spec(const std::string& s);

/// Checks the spec against a head of C classes with `labels` (config "labels": C names, or empty). Throws
/// attnmap::Error for an index >= C, K > C, or a name that is not a label (the message lists the labels, or
/// says there are none). `texts`: the classes are a CLIP's texts (labels = the texts): the messages say texts.
void check_class_spec(const ClassSpec& spec, int C, const std::vector<std::string>& labels, bool texts = false);

/// The classes the spec names for these logits (C): one index, or the K most probable.
std::vector<int> resolve_classes(const ClassSpec& spec, const std::vector<float>& logits,
                                 const std::vector<std::string>& labels);

/// A class's name for a file: its label (when the config has C labels) or its index, with every character
/// outside [A-Za-z0-9._-] replaced by '_' (a leading '.' too), e.g. "T-shirt/top" -> "T-shirt_top".
std::string class_file_label(int index, const std::vector<std::string>& labels);

/// "coat 81.2%, shirt 10.3%, ..." for the terminal.
std::string format_top_k(const std::vector<std::pair<std::string, float>>& top);

}  // namespace attnmap
