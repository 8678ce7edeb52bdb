// inspect.hpp - what attnmap made of a checkpoint, and where each value came from (`attnmap inspect WEIGHTS`,
// Python's Model.describe()).
#pragma once
#include <string>

#include "checkpoint/weights.hpp"

namespace attnmap {

/// A human-readable report of a loaded model: file format, detected layout, token layout (class,
/// distillation, register, patch counts), grid, depth, heads, parameter count, every config value with its
/// provenance (config file, inferred, default, command line) and the loader's notices. Several lines,
/// ending with a newline; settings spelled with spelled_settings (the same text from either front end).
std::string describe_model(const ViTWeights& w, const std::string& path);

}  // namespace attnmap
