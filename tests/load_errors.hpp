// load_errors.hpp - the message a model load or build stops with, for the refusal tests of the checkpoint
// families (test_families.cpp, test_beit.cpp, test_rope.cpp).
#pragma once
#include <initializer_list>
#include <string>

#include "checkpoint/weights.hpp"
#include "core/error.hpp"

namespace attnmap {

/// The attnmap::Error message of load_model(path, ov), or "" when it loads.
inline std::string load_error(const std::string& path, const ModelOverrides& ov = {}) {
  try {
    load_model(path, ov);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// The attnmap::Error message of build_model(raw, ov), or "" when it builds.
inline std::string build_error(const RawWeights& raw, const ModelOverrides& ov = {}) {
  try {
    build_model(raw, ov);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// A RawWeights named `path` holding a (4) tensor of `value` under each name: a layout's naming, for detection tests.
inline RawWeights raw_with_names(const std::string& path, std::initializer_list<const char*> names, float value) {
  RawWeights raw;
  raw.path = path;
  for (const char* n : names) {
    Tensor t;
    t.shape = {4};
    t.data.assign(4, value);
    raw.tensors[n] = t;
  }
  return raw;
}

}  // namespace attnmap
