// npy.hpp - NumPy .npy (format 1.0) float32 files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnmap {

/// Serialises a float32 array as .npy v1.0: '<f4', C order, the given shape.
/// Throws attnmap::Error when data.size() differs from the product of shape.
std::vector<uint8_t> npy_encode(const std::vector<float>& data, const std::vector<int64_t>& shape);

/// npy_encode + atomic write (temporary file, then rename).
void write_npy(const std::string& path, const std::vector<float>& data, const std::vector<int64_t>& shape);

/// True when `path` is a .npy file of the kind write_npy makes, so that an earlier run's output may be
/// replaced but a user's other file of that name is not: byte for byte the v1.0 header npy_encode writes
/// ('<f4', C order, rank 2 or 3), then exactly the shape's float32 data, nothing after it.
bool looks_written_by_attnmap_npy(const std::string& path);

/// Reads a little-endian float32 C-order .npy file; its shape goes to `shape` (may be null). Throws
/// attnmap::Error naming the file on anything else.
std::vector<float> read_npy(const std::string& path, std::vector<int64_t>* shape);

}  // namespace attnmap
