#include "io/npy.hpp"

#include <cstring>

#include "core/error.hpp"
#include "io/image_io.hpp"
#include "core/tensor.hpp"

namespace attnmap {

namespace {

// The magic, version 1.0, header length and header dict that npy_encode writes for `shape`.
std::string npy_header(const std::vector<int64_t>& shape) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  // magic(6) + version(2) + header_len(2) + header, padded with spaces and ended by '\n' to 64 bytes.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  const char magic[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(header.size() & 0xff),
                          static_cast<char>(header.size() >> 8)};
  return std::string(magic, sizeof magic) + header;
}

}  // namespace

std::vector<uint8_t> npy_encode(const std::vector<float>& data, const std::vector<int64_t>& shape) {
  if (checked_numel(shape, "npy") != data.size()) throw Error("npy: data size does not match shape " + shape_str(shape));
  const std::string head = npy_header(shape);
  std::vector<uint8_t> out(head.begin(), head.end());
  const size_t off = out.size();
  out.resize(off + data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(out.data() + off, data.data(), data.size() * sizeof(float));  // x86-64: little-endian
  return out;
}

void write_npy(const std::string& path, const std::vector<float>& data, const std::vector<int64_t>& shape) {
  write_file_atomic(path, npy_encode(data, shape));
}

namespace {

// Checks the .npy bytes `b` (little-endian float32, C order, data size = the shape's) and returns the offset
// of the data; the shape goes to `shape`. Throws attnmap::Error naming `path`.
size_t parse_npy(const std::vector<uint8_t>& b, const std::string& path, std::vector<int64_t>* shape) {
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) throw Error(path + ": not a .npy file");
  size_t hlen = 0, hoff = 0;
  if (b[6] == 1) {
    hlen = b[8] | (static_cast<size_t>(b[9]) << 8);
    hoff = 10;
  } else if (b.size() >= 12) {
    hlen = b[8] | (static_cast<size_t>(b[9]) << 8) | (static_cast<size_t>(b[10]) << 16) | (static_cast<size_t>(b[11]) << 24);
    hoff = 12;
  }
  if (hoff == 0 || hoff + hlen > b.size()) throw Error(path + ": truncated .npy header");
  const std::string h(b.begin() + static_cast<long>(hoff), b.begin() + static_cast<long>(hoff + hlen));
  if (h.find("'<f4'") == std::string::npos) throw Error(path + ": .npy dtype is not '<f4' (float32 little-endian)");
  if (h.find("'fortran_order': False") == std::string::npos) throw Error(path + ": .npy is not C order");
  const auto s0 = h.find("'shape': (");
  const auto s1 = h.find(')', s0);
  if (s0 == std::string::npos || s1 == std::string::npos) throw Error(path + ": .npy header has no shape");
  shape->clear();
  std::string dims = h.substr(s0 + 10, s1 - s0 - 10);
  size_t p = 0;
  while (p < dims.size()) {
    while (p < dims.size() && (dims[p] == ' ' || dims[p] == ',')) ++p;
    if (p >= dims.size()) break;
    size_t q = p;
    while (q < dims.size() && dims[q] >= '0' && dims[q] <= '9') ++q;
    if (q == p || q - p > 18) throw Error(path + ": bad .npy shape '" + dims + "'");
    shape->push_back(std::stoll(dims.substr(p, q - p)));
    p = q;
  }
  const size_t n = checked_numel(*shape, "npy");
  const size_t off = hoff + hlen;
  if ((b.size() - off) % sizeof(float) != 0 || (b.size() - off) / sizeof(float) != n)  // no overflow in n * 4
    throw Error(path + ": .npy data size does not match its shape");
  return off;
}

}  // namespace

std::vector<float> read_npy(const std::string& path, std::vector<int64_t>* shape) {
  const std::vector<uint8_t> b = read_file(path);
  std::vector<int64_t> ignored;
  const size_t off = parse_npy(b, path, shape ? shape : &ignored);
  std::vector<float> out((b.size() - off) / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), b.data() + off, out.size() * sizeof(float));
  return out;
}

bool looks_written_by_attnmap_npy(const std::string& path) {
  try {
    const std::vector<uint8_t> b = read_file(path);
    std::vector<int64_t> shape;
    const size_t off = parse_npy(b, path, &shape);  // float32, C order, exactly the shape's data
    if (shape.size() != 2 && shape.size() != 3) return false;  // one map, or one per head
    // and byte for byte the header npy_encode writes for that shape (no other key, text or version)
    const std::string head = npy_header(shape);
    return off == head.size() && std::memcmp(b.data(), head.data(), head.size()) == 0;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace attnmap
