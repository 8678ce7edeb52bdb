// weights_json.hpp - attnmap JSON v1 weights: {"name": nested arrays, ..., "config": {...}}.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.hpp"

namespace attnmap {

/// What a weights file holds before any layout is applied: tensors by state_dict name, the optional
/// "config" object, and notices (ignored keys) to print.
struct RawWeights {
  std::string path;
  TensorMap tensors;
  nlohmann::json config = nlohmann::json::object();
  /// Where `config` was read, for provenance: "config" (JSON weights) or "__metadata__ config" (safetensors).
  std::string config_where = "config";
  /// Tensors in the file that attnmap does not read (safetensors integer / bool / FP8 dtypes): name -> dtype.
  std::map<std::string, std::string> skipped;
  std::vector<std::string> notices;
};

/// Parses an attnmap JSON v1 file (see weights/README.md) straight into float buffers with nlohmann/json's
/// SAX interface - no DOM of the numbers is built. Each top-level key but "config" must hold a number or a
/// rectangular nested array of numbers (PyTorch `tensor.tolist()`); "config" must be an object.
/// Throws attnmap::Error naming the file (with line and column for malformed JSON) and the tensor for:
/// ragged arrays, strings/booleans/null inside a tensor, non-finite or out-of-float32-range values,
/// nesting deeper than 8, duplicate names.
RawWeights load_weights_json(const std::string& path);

/// Same as load_weights_json, from text already in memory; `path` is used in messages only.
/// Both first try a direct scanner (numbers converted with Clinger's fast path / fast_float, ~5x the SAX
/// speed) that accepts only well-formed, rectangular, in-range files; anything else goes to the SAX parser,
/// whose result and messages are the reference.
RawWeights parse_weights_json(const std::string& text, const std::string& path);

/// The reference SAX parser alone (no fast path); tests compare the two.
RawWeights parse_weights_json_sax(const std::string& text, const std::string& path);

}  // namespace attnmap
