// tensor.hpp - a named float32 tensor as read from a weights file, and overflow-checked size helpers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attnmap {

/// A dense row-major (C order) float32 tensor. `shape` is the PyTorch shape; `data.size()` equals the
/// product of `shape` (1 for a scalar, shape `()`).
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
};

/// Tensors of one weights file by state_dict name, sorted by name.
using TensorMap = std::map<std::string, Tensor>;

/// Shape as PyTorch prints it, e.g. "(768, 3, 16, 16)".
std::string shape_str(const std::vector<int64_t>& shape);

/// a * b, throwing attnmap::Error(what + ": size overflow") when the product does not fit in size_t.
size_t checked_mul(size_t a, size_t b, const char* what);

/// Product of a shape's dimensions; throws attnmap::Error on a negative dimension or overflow.
size_t checked_numel(const std::vector<int64_t>& shape, const char* what);

}  // namespace attnmap
