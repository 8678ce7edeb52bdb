// weights_json.hpp - attnmap JSON v1 weights: {"name": nested arrays, ..., "config": {...}}.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.hpp"
#include "io/mapped_file.hpp"

namespace attnmap {

/// A file a load read, with the SHA-256 (64 lower-case hex digits) of the very bytes it parsed.
struct FileHash {
  std::string path, sha256;
  FileStamp stamp;  // a mapped weights file's size and times when opened (load_model checks them after packing)
};

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
  /// The values of the small integer tensors among `skipped` (I64 / I32, at most 1 << 22 elements; pth and
  /// safetensors), in C order: read only to check index buffers (BEiT relative_position_index).
  std::map<std::string, std::vector<int64_t>> ints;
  std::vector<std::string> notices;
  /// The files parsed, each with the SHA-256 of the bytes parsed (hashed from the same mapping, never by
  /// opening the path again): the weights file; a sharded checkpoint: the index, then each shard by name.
  /// Empty when parsed from memory (parse_weights_*).
  std::vector<FileHash> files;
};

/// Parses an attnmap JSON v1 file (see weights/README.md) straight into float buffers with nlohmann/json's
/// SAX interface - no DOM of the numbers is built. Each top-level key but "config" must hold a number or a
/// rectangular nested array of numbers (PyTorch `tensor.tolist()`); "config" must be an object.
/// Throws attnmap::Error naming the file (with line and column for malformed JSON) and the tensor for:
/// ragged arrays, strings/booleans/null inside a tensor, non-finite or out-of-float32-range values,
/// nesting deeper than 8, duplicate names.
RawWeights load_weights_json(const std::string& path);

/// Same as load_weights_json, from text already in memory; `path` is used in messages only.
/// Both first try a direct scanner (plain short numbers 8 bytes at a time, others with Clinger's fast path /
/// fast_float, all valued as strtod; several times the SAX speed) that accepts only well-formed, rectangular,
/// in-range files; anything else goes to the SAX parser, whose result and messages are the reference.
RawWeights parse_weights_json(const std::string& text, const std::string& path);

/// Same as parse_weights_json, from `n` bytes at `data` that are a read-only mapping of the file `path`:
/// pages are given back to the system as the fast scanner passes them (the resident memory of a load is
/// the tensors, not also the text). Throws attnmap::Error as load_weights_json.
RawWeights parse_weights_json_mapped(const uint8_t* data, size_t n, const std::string& path);

/// A JSON syntax error in `text`, in attnmap's words: "malformed JSON at line L, column C: " and what was
/// found there ("the text ends before the value is complete", "unexpected 'x'", "unexpected byte 0x01").
/// `byte` is the 1-based offset of the last byte read, as nlohmann::json::parse_error::byte gives it.
std::string json_syntax_error(const std::string& text, size_t byte);

/// The reference SAX parser alone (no fast path); tests compare the two.
RawWeights parse_weights_json_sax(const std::string& text, const std::string& path);

}  // namespace attnmap
