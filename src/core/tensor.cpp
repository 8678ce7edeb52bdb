#include "core/tensor.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <new>

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

void Floats::populate() const {
#if defined(__linux__)
  if (size() == 0) return;
  constexpr int kPopulateRead = 22;  // MADV_POPULATE_READ, not in older headers
  const uintptr_t page = 4096, a = reinterpret_cast<uintptr_t>(data()) / page * page;
  const uintptr_t e = reinterpret_cast<uintptr_t>(data() + size());
  (void)::madvise(reinterpret_cast<void*>(a), e - a, kPopulateRead);
#endif
}

LargeBuffer::LargeBuffer(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20, kPage = 4096;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  // posix_memalign, not aligned_alloc: the size need not be a multiple of the alignment (C11 asks that of
  // aligned_alloc, and AddressSanitizer enforces it), so no memory is added to round it up
  if (posix_memalign(&base, rounded >= kHuge ? kHuge : kPage, rounded) != 0) {
    base = nullptr;
    throw std::bad_alloc();
  }
#if defined(MADV_HUGEPAGE)
  if (rounded >= kHuge) (void)::madvise(base, rounded / kHuge * kHuge, MADV_HUGEPAGE);
#endif
#if defined(__linux__)
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE, not in older headers
  (void)::madvise(base, rounded, kPopulateWrite);
#endif
}

LargeBuffer::~LargeBuffer() { std::free(base); }

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
