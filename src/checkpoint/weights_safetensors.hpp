// weights_safetensors.hpp - Hugging Face safetensors weights (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {..}},
// then the raw little-endian tensor bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/weights_json.hpp"

namespace attnmap {

/// The largest safetensors header read (bytes), as the reference implementation's MAX_HEADER_SIZE: a longer
/// declared header is refused before it is parsed.
constexpr uint64_t kMaxSafetensorsHeader = 100000000;

/// Parses a safetensors file already in memory (`data`, `size` bytes); `path` is used in messages only.
/// F32, F16 and BF16 (and F64) tensors are converted to float32; integer and boolean tensors (buffers such as
/// position ids) are validated and skipped with a notice (and named by dtype if the model needs one);
/// `__metadata__["config"]`, a JSON string holding an attnmap config object (what tools/export_weights.py
/// writes), becomes RawWeights::config; other `__metadata__` keys are ignored. Every header field is
/// checked before use, as the reference implementation does: header length inside the file and at most
/// kMaxSafetensorsHeader, header a JSON
/// object, each entry with a known dtype, a shape of non-negative integers and data_offsets [begin, end]
/// with end - begin == product(shape) * dtype size (overflow-checked), tensors laid out in order without
/// gaps or overlap from the start of the data area to the end of the file (trailing bytes are refused),
/// no duplicate names. Header padding (trailing spaces) is accepted.
/// Throws attnmap::Error, one line naming `path` and the tensor, for any violation and for non-finite values.
/// With `keep` (an owner of the memory at `data`, e.g. its mapping) F32 tensors that are 4-byte aligned on a
/// little-endian host are not copied: their Tensor::data is a view into `data` (values checked finite) that
/// holds `keep`. Without it every tensor is copied, and `data` may be released after the call.
/// `keep_is_file_mapping`: `data` is a read-only mapping of a file, so the views may hand their pages back to
/// the system once the GEMM back-end holds a packed copy (Floats::drop_mapped_pages).
RawWeights parse_weights_safetensors(const uint8_t* data, size_t size, const std::string& path,
                                     const std::shared_ptr<const void>& keep = nullptr,
                                     bool keep_is_file_mapping = false);

/// Memory-maps `path` (read-only, POSIX mmap, MAP_PRIVATE) and parses it with parse_weights_safetensors,
/// F32 tensors used in place: the mapping lives as long as any tensor (or ViTWeights built from them) viewing
/// it, so a ViT-B F32 run's weights take no memory beyond the file's pages. F16 / BF16 / F64 are converted.
/// Throws attnmap::Error when the file cannot be opened or mapped, or is malformed.
RawWeights load_weights_safetensors(const std::string& path);

}  // namespace attnmap

namespace attnmap {

/// Converts `n` little-endian elements of `dtype` ("F32", "F16", "BF16" or "F64", the safetensors names) at
/// `p` to float32: F16 and BF16 exactly, F64 rounded (a finite value beyond float32 is refused). Used by the
/// PyTorch reader too. Throws attnmap::Error(`what` + " holds a non-finite value (...) at element I"), or
/// for another dtype.
std::vector<float> decode_float_tensor(const uint8_t* p, size_t n, const std::string& dtype, const std::string& what);

}  // namespace attnmap
