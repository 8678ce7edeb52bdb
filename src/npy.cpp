#include "npy.hpp"

#include <cstring>
#include <fstream>

#include "error.hpp"
#include "image_io.hpp"
#include "tensor.hpp"

namespace attnmap {

std::vector<uint8_t> npy_encode(const std::vector<float>& data, const std::vector<int64_t>& shape) {
  if (checked_numel(shape, "npy") != data.size()) throw Error("npy: data size does not match shape " + shape_str(shape));
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  // magic(6) + version(2) + header_len(2) + header, padded with spaces and ended by '\n' to 64 bytes.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  const uint8_t magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<uint8_t>(header.size() & 0xff),
                             static_cast<uint8_t>(header.size() >> 8)};
  std::vector<uint8_t> out(sizeof magic + header.size());
  std::memcpy(out.data(), magic, sizeof magic);
  std::memcpy(out.data() + sizeof magic, header.data(), header.size());
  const size_t off = out.size();
  out.resize(off + data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(out.data() + off, data.data(), data.size() * sizeof(float));  // x86-64: little-endian
  return out;
}

bool looks_written_by_attnmap_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char buf[64] = {};
  if (!in.read(buf, sizeof buf)) return false;
  static const char kStart[] = "\x93NUMPY\x01\x00";  // magic and version 1.0, then a 2-byte header length
  static const char kDict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (";  // as npy_encode writes
  return std::memcmp(buf, kStart, 8) == 0 && std::memcmp(buf + 10, kDict, sizeof kDict - 1) == 0;
}

void write_npy(const std::string& path, const std::vector<float>& data, const std::vector<int64_t>& shape) {
  write_file_atomic(path, npy_encode(data, shape));
}

std::vector<float> read_npy(const std::string& path, std::vector<int64_t>* shape) {
  const std::vector<uint8_t> b = read_file(path);
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
    if (q == p) throw Error(path + ": bad .npy shape '" + dims + "'");
    shape->push_back(std::stoll(dims.substr(p, q - p)));
    p = q;
  }
  const size_t n = checked_numel(*shape, "npy");
  const size_t off = hoff + hlen;
  if (b.size() - off != n * sizeof(float)) throw Error(path + ": .npy data size does not match its shape");
  std::vector<float> out(n);
  if (n) std::memcpy(out.data(), b.data() + off, n * sizeof(float));
  return out;
}

}  // namespace attnmap
