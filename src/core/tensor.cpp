#include "core/tensor.hpp"

#include <limits>

#include <sys/mman.h>
#include <unistd.h>

#include "core/error.hpp"

namespace attnmap {

void Floats::drop_mapped_pages() const {
  if (!view_ || !file_mapped_ || n_ == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(view_) + page - 1) / page * page;  // whole pages inside
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(view_ + n_)) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);  // advice: a failure costs memory only
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

size_t checked_mul(size_t a, size_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<size_t>::max() / a) throw Error(std::string(what) + ": size overflow");
  return a * b;
}

size_t checked_numel(const std::vector<int64_t>& shape, const char* what) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(std::string(what) + ": negative dimension in shape " + shape_str(shape));
    n = checked_mul(n, static_cast<size_t>(d), what);
  }
  return n;
}

}  // namespace attnmap
