// tensor.hpp - a named float32 tensor as read from a weights file, and overflow-checked size helpers.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attnmap {

/// A float32 buffer that either owns its values (a std::vector) or views values that live elsewhere - a
/// tensor used in place from a memory-mapped safetensors file - and keeps that storage alive (`keep`,
/// shared by every copy of the view). Reading never copies: data(), operator[], begin()/end() and size()
/// are the same for both. Every mutating call (mutable_data, push_back, resize, reserve, assign, insert,
/// clear) first makes the buffer own a copy of a viewed range, so a view's storage is never written.
class Floats {
 public:
  using value_type = float;
  using iterator = const float*;
  using const_iterator = const float*;

  Floats() = default;
  Floats(std::vector<float> v) : own_(std::move(v)) {}  // NOLINT: implicit, as the vector it replaces
  Floats(std::initializer_list<float> v) : own_(v) {}
  Floats(size_t n, float value) : own_(n, value) {}
  /// A view of n floats at p, valid while `keep` (the mapping that holds them) lives. `file_mapped`: p lies in
  /// a read-only mapping of a file, whose pages drop_mapped_pages() may hand back to the system.
  static Floats view(const float* p, size_t n, std::shared_ptr<const void> keep, bool file_mapped = false) {
    Floats f;
    f.view_ = p;
    f.n_ = n;
    f.keep_ = std::move(keep);
    f.file_mapped_ = file_mapped;
    return f;
  }
  bool is_view() const { return view_ != nullptr; }

  /// For a view of a read-only file mapping: tells the system that the whole pages inside the view are not
  /// needed in memory now (madvise MADV_DONTNEED), so they stop counting in the process's resident size;
  /// reading them again reads them from the file. Nothing happens for an owned buffer or another view.
  void drop_mapped_pages() const;

  /// Asks the system to map the values' pages now, in one call (MADV_POPULATE_READ, Linux 5.14), for a view
  /// of a file: a pass over them (packing a weight matrix) then takes no page fault per few pages. A hint:
  /// nothing where the call is unknown, errors ignored (owned memory is mapped already).
  void populate() const;

  /// A form of these values derived by a later stage and kept with them: the GEMM back-end's packed copy of
  /// a weight matrix (model/sgemm.cpp). Dropped by every mutating call, so it never outlives the values it
  /// was made from; copies share it (they hold the same values). Safe to read and set from several threads.
  std::shared_ptr<const void> derived() const { return std::atomic_load(&derived_); }
  void set_derived(std::shared_ptr<const void> d) const { std::atomic_store(&derived_, std::move(d)); }

  size_t size() const { return view_ ? n_ : own_.size(); }
  bool empty() const { return size() == 0; }
  const float* data() const { return view_ ? view_ : own_.data(); }
  const float& operator[](size_t i) const { return data()[i]; }
  const float* begin() const { return data(); }
  const float* end() const { return data() + size(); }
  /// The values as a std::vector (a copy), also implicitly where a vector is asked for.
  std::vector<float> vec() const { return std::vector<float>(begin(), end()); }
  operator std::vector<float>() const { return vec(); }  // NOLINT: implicit, as the vector it replaces

  float* mutable_data() { return detach().data(); }
  /// The owned vector itself (a view is copied into it first), for loops that fill it.
  std::vector<float>& owned() { return detach(); }
  void push_back(float v) { detach().push_back(v); }
  void resize(size_t n, float v = 0.0f) { detach().resize(n, v); }
  void reserve(size_t n) { detach().reserve(n); }
  void assign(size_t n, float v) { detach().assign(n, v); }
  template <class It>
  void insert_back(It first, It last) { detach().insert(detach().end(), first, last); }
  void clear() { *this = Floats(); }

  friend bool operator==(const Floats& a, const Floats& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator!=(const Floats& a, const Floats& b) { return !(a == b); }
  friend bool operator==(const Floats& a, const std::vector<float>& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const std::vector<float>& a, const Floats& b) { return b == a; }

 private:
  std::vector<float>& detach() {
    // A mutating call must not race with readers (as for any container), so a plain test will do here;
    // push_back and friends then cost no atomic operation.
    if (derived_) derived_.reset();
    if (view_) {
      own_.assign(view_, view_ + n_);
      view_ = nullptr;
      n_ = 0;
      keep_.reset();
      file_mapped_ = false;
    }
    return own_;
  }
  std::vector<float> own_;
  const float* view_ = nullptr;
  size_t n_ = 0;
  std::shared_ptr<const void> keep_;
  bool file_mapped_ = false;
  mutable std::shared_ptr<const void> derived_;
};

/// `bytes` of memory for a large array written once and read often (a model's packed weights): aligned to
/// 2 MiB when at least 2 MiB, its whole 2 MiB pieces marked for transparent huge pages (madvise; the system may
/// say no; the tail and buffers under 2 MiB keep 4 KiB pages, so no memory is added), and every page mapped
/// in one call (MADV_POPULATE_WRITE, Linux 5.14; a hint). Writing a ViT-B's packed weights then takes a page
/// fault per 2 MiB instead of one per 4 KiB page, which on a virtual machine was a fifth of a run's start-up
/// (perf: page faults under the packing; a ViT-B in bf16: ~9000 faults). Throws std::bad_alloc.
struct LargeBuffer {
  void* base = nullptr;
  explicit LargeBuffer(size_t bytes);
  ~LargeBuffer();
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;
};

/// A dense row-major (C order) float32 tensor. `shape` is the PyTorch shape; `data.size()` equals the
/// product of `shape` (1 for a scalar, shape `()`). `data` is a view into the file's mapping for a safetensors
/// F32 tensor (load_weights_safetensors), its own copy otherwise.
struct Tensor {
  std::vector<int64_t> shape;
  Floats data;

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
