// classify.hpp - class probabilities from a classifier head's logits, and the top-k classes by name.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace attnmap {

/// softmax(logits) (C) -> probabilities (C), computed in double with the maximum subtracted (stable), as
/// torch.softmax(logits, -1). Throws attnmap::Error for an empty or non-finite input.
std::vector<double> class_probabilities(const std::vector<float>& logits);

/// The k most probable classes, most probable first (ties: lower index first), as (name, probability).
/// The name is labels[i] when `labels` has one name per class (C entries, config "labels"), else
/// "class i" (0-based index into the head's outputs). k is capped at C.
std::vector<std::pair<std::string, float>> top_k_classes(const std::vector<float>& logits,
                                                         const std::vector<std::string>& labels, int k = 5);

/// "coat 81.2%, shirt 10.3%, ..." for the terminal.
std::string format_top_k(const std::vector<std::pair<std::string, float>>& top);

}  // namespace attnmap
