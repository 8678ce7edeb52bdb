#include "checkpoint/weights_safetensors.hpp"

#include "io/hash.hpp"
#include "io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include "core/error.hpp"

namespace attnmap {

namespace {

using nlohmann::json;

enum class Kind { F32, F16, BF16, F64, Skip };

struct DType {
  const char* name;
  size_t bytes;
  Kind kind;
};

// The safetensors dtype names (safetensors/src/tensor.rs Dtype).
const DType kDTypes[] = {
    {"F32", 4, Kind::F32},      {"F16", 2, Kind::F16},       {"BF16", 2, Kind::BF16},    {"F64", 8, Kind::F64},
    {"I64", 8, Kind::Skip},     {"I32", 4, Kind::Skip},      {"I16", 2, Kind::Skip},     {"I8", 1, Kind::Skip},
    {"U64", 8, Kind::Skip},     {"U32", 4, Kind::Skip},      {"U16", 2, Kind::Skip},     {"U8", 1, Kind::Skip},
    {"BOOL", 1, Kind::Skip},    {"F8_E4M3", 1, Kind::Skip},  {"F8_E5M2", 1, Kind::Skip},
};

const DType* find_dtype(const std::string& s) {
  for (const DType& d : kDTypes)
    if (s == d.name) return &d;
  return nullptr;
}

// IEEE 754 binary16 -> binary32, exact (subnormals, infinities and NaN included).
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  uint32_t bits = 0;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: man * 2^-24, exact in float32
      const float v = std::ldexp(static_cast<float>(man), -24);
      std::memcpy(&bits, &v, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  }
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Converts n little-endian elements at p to float32.
std::vector<float> convert(const uint8_t* p, size_t n, Kind kind, const std::function<void(const std::string&)>& fail) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    float v = 0;
    switch (kind) {
      case Kind::F32: {
        const uint32_t b = static_cast<uint32_t>(p[4 * i]) | static_cast<uint32_t>(p[4 * i + 1]) << 8 |
                           static_cast<uint32_t>(p[4 * i + 2]) << 16 | static_cast<uint32_t>(p[4 * i + 3]) << 24;
        std::memcpy(&v, &b, 4);
        break;
      }
      case Kind::F16:
        v = half_to_float(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
        break;
      case Kind::BF16: {
        const uint32_t b = (static_cast<uint32_t>(p[2 * i]) | static_cast<uint32_t>(p[2 * i + 1]) << 8) << 16;
        std::memcpy(&v, &b, 4);
        break;
      }
      case Kind::F64: {
        const uint64_t b = read_u64_le(p + 8 * i);
        double d = 0;
        std::memcpy(&d, &b, 8);
        if (std::isfinite(d) && std::isinf(static_cast<float>(d)))
          fail("holds a value out of float32 range (" + std::to_string(d) + ")");
        v = static_cast<float>(d);
        break;
      }
      case Kind::Skip:
        break;
    }
    if (!std::isfinite(v)) fail("holds a non-finite value (" + std::to_string(v) + ") at element " + std::to_string(i));
    out[i] = v;
  }
  return out;
}

struct Entry {
  std::string name;
  const DType* dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

// The header length n and the header's JSON object, checked against the file size. Throws attnmap::Error.
json parse_header(const uint8_t* data, size_t size, const std::string& path, uint64_t& n) {
  if (size < 8)
    throw Error(path + ": not a safetensors file: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  n = read_u64_le(data);
  if (n < 2 || n > size - 8)
    throw Error(path + ": safetensors header length " + std::to_string(n) + " does not fit in the file (" +
                std::to_string(size) + " bytes)");
  if (n > kMaxSafetensorsHeader)  // checked before the header is parsed into memory
    throw Error(path + ": safetensors header of " + std::to_string(n) + " bytes, over the limit of " +
                std::to_string(kMaxSafetensorsHeader) + " bytes (the reference implementation's)");
  const char* hbeg = reinterpret_cast<const char*>(data + 8);
  if (hbeg[0] != '{') throw Error(path + ": safetensors header does not start with '{'");
  json header;
  try {
    header = json::parse(hbeg, hbeg + n);
  } catch (const json::parse_error& e) {
    throw Error(path + ": safetensors header is not valid JSON: " +
                json_syntax_error(std::string(hbeg, static_cast<size_t>(n)), e.byte).substr(std::string("malformed JSON ").size()));
  } catch (const json::exception&) {  // out_of_range 406: a number beyond a double
    throw Error(path + ": safetensors header is not valid JSON: a number beyond the range of a double");
  }
  if (!header.is_object()) throw Error(path + ": safetensors header is not a JSON object");
  return header;
}

// nlohmann keeps the last of duplicate keys silently; count the entries by scanning with the SAX parser.
void check_no_duplicate_keys(const char* hbeg, uint64_t n, const std::string& path) {
  struct DupCheck : json::json_sax_t {
    int depth = 0;
    std::set<std::string> seen;
    std::string dup;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return ++depth, true; }
    bool end_object() override { return --depth, true; }
    bool start_array(std::size_t) override { return ++depth, true; }
    bool end_array() override { return --depth, true; }
    bool key(string_t& k) override {
      if (depth == 1 && !seen.insert(k).second) {
        dup = k;
        return false;
      }
      return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
  } sax;
  json::sax_parse(hbeg, hbeg + n, &sax);
  if (!sax.dup.empty()) throw Error(path + ": tensor '" + sax.dup + "' appears twice in the safetensors header");
}

// One header entry {"dtype", "shape", "data_offsets"}, checked: a known dtype, rank <= 8, offsets inside
// the data area of data_size bytes spanning exactly shape x dtype bytes. Throws attnmap::Error.
Entry parse_entry(const std::string& name, const json& e, const std::string& path, uint64_t data_size) {
  auto fail = [&](const std::string& why) -> void { throw Error(path + ": tensor '" + name + "' " + why); };
  if (!e.is_object()) fail("header entry is not an object");
  if (!e.contains("dtype") || !e["dtype"].is_string()) fail("has no \"dtype\" string");
  if (!e.contains("shape") || !e["shape"].is_array()) fail("has no \"shape\" array");
  if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2 ||
      !e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned())
    fail("has no \"data_offsets\" [begin, end] of non-negative integers");
  Entry en{name, find_dtype(e["dtype"].get<std::string>()), {}, 0, 0};
  if (!en.dtype) fail("has unknown dtype '" + e["dtype"].get<std::string>() + "'");
  if (e["shape"].size() > 8) fail("has rank " + std::to_string(e["shape"].size()) + ", more than 8");
  for (const json& d : e["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) fail("has a shape entry that is not a non-negative integer");
    en.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  en.begin = e["data_offsets"][0].get<uint64_t>();
  en.end = e["data_offsets"][1].get<uint64_t>();
  const std::string what = path + ": tensor '" + name + "'";
  const size_t bytes = checked_mul(checked_numel(en.shape, what.c_str()), en.dtype->bytes, what.c_str());
  if (en.end < en.begin || en.end > data_size)
    fail("has data_offsets [" + std::to_string(en.begin) + ", " + std::to_string(en.end) +
         "] outside the data area of " + std::to_string(data_size) + " bytes");
  if (en.end - en.begin != bytes)
    fail("has " + std::to_string(en.end - en.begin) + " bytes, expected " + shape_str(en.shape) + " x " +
         en.dtype->name + " = " + std::to_string(bytes));
  return en;
}

// Every tensor entry of the header (not __metadata__), sorted by data offset.
std::vector<Entry> parse_entries(const json& header, const std::string& path, uint64_t data_size) {
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    entries.push_back(parse_entry(name, it.value(), path, data_size));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  return entries;
}

// The sorted entries must tile the data area of data_size bytes: no gap, no overlap, nothing after.
void check_entries_tile(const std::vector<Entry>& entries, uint64_t data_size, const std::string& path) {
  uint64_t at = 0;
  for (const Entry& en : entries) {
    if (en.begin != at)
      throw Error(path + ": tensor '" + en.name + "' starts at byte " + std::to_string(en.begin) + " of the data area, expected " +
                  std::to_string(at) + (en.begin < at ? " (overlaps the previous tensor)" : " (gap after the previous tensor)"));
    at = en.end;
  }
  if (at != data_size)
    throw Error(path + ": " + std::to_string(data_size - at) + " trailing bytes after the last tensor (data area " +
                std::to_string(data_size) + " bytes, tensors end at " + std::to_string(at) + ")");
}

// The config tools/export_weights.py (and anything following it) stores as a JSON string under
// __metadata__["config"] into raw.config; the rest of __metadata__ (e.g. safetensors.torch's "format": "pt")
// is ignored.
void read_metadata_config(const json& header, const std::string& path, RawWeights& raw) {
  if (!header.contains("__metadata__") || header["__metadata__"].is_null()) return;  // null: none, as the Rust crate reads it
  const json& md = header["__metadata__"];
  if (!md.is_object()) throw Error(path + ": safetensors __metadata__ is not a JSON object");
  if (!md.contains("config")) return;
  if (!md["config"].is_string())
    throw Error(path + ": safetensors __metadata__ \"config\" must be a string holding a JSON object, found " +
                md["config"].dump().substr(0, 60));
  json c;
  try {
    c = json::parse(md["config"].get<std::string>());
  } catch (const json::parse_error& e) {
    throw Error(path + ": safetensors __metadata__ \"config\" is not valid JSON: " +
                json_syntax_error(md["config"].get<std::string>(), e.byte).substr(std::string("malformed JSON ").size()));
  } catch (const json::exception&) {  // out_of_range 406: a number beyond a double
    throw Error(path + ": safetensors __metadata__ \"config\" is not valid JSON: a number beyond the range of a double");
  }
  if (!c.is_object())
    throw Error(path + ": safetensors __metadata__ \"config\" must hold a JSON object, found " + c.dump().substr(0, 60));
  raw.config = std::move(c);
  raw.config_where = "__metadata__ config";
}

// An F32 tensor of n values at p used in place: every value checked finite (the message convert() gives),
// then a view kept alive by `keep`.
Floats view_f32(const uint8_t* p, size_t n, const std::shared_ptr<const void>& keep, bool file_mapped,
                const std::function<void(const std::string&)>& fail) {
  const float* f = reinterpret_cast<const float*>(p);
  if (file_mapped) populate_for_reading(p, n * sizeof(float));  // its pages in one call, not a fault each
  uint32_t bad = 0;  // exponent all ones: infinity or NaN; one pass without branches, then find the first
  for (size_t i = 0; i < n; ++i) {
    uint32_t b = 0;
    std::memcpy(&b, f + i, 4);
    bad |= static_cast<uint32_t>((b & 0x7f800000u) == 0x7f800000u);
  }
  if (bad)
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(f[i])) fail("holds a non-finite value (" + std::to_string(f[i]) + ") at element " + std::to_string(i));
  return Floats::view(f, n, keep, file_mapped);
}

// True when an F32 tensor at p can be read in place as floats: a little-endian host and 4-byte alignment
// (safetensors pads its header to 8 bytes, so only a tensor after an odd-sized F16/BF16/I8 one can miss it).
bool in_place(const uint8_t* p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return reinterpret_cast<uintptr_t>(p) % alignof(float) == 0;
#else
  (void)p;
  return false;
#endif
}

// Each entry's data (at base, the start of the data area) into raw.tensors: F32 in place when `keep` holds
// the mapping (and the tensor is aligned), converted to float32 otherwise; entries of a dtype attnmap does
// not read into raw.skipped, with a notice naming the first few.
void read_tensors(const std::vector<Entry>& entries, const uint8_t* base, const std::string& path, RawWeights& raw,
                  const std::shared_ptr<const void>& keep, bool file_mapped) {
  for (const Entry& en : entries) {
    if (en.dtype->kind == Kind::Skip) {
      raw.skipped[en.name] = en.dtype->name;
      // Small I64 / I32 tensors keep their values (little-endian), for index buffers the loader checks.
      const std::string dt = en.dtype->name;
      int64_t numel = 1;
      for (int64_t d : en.shape) numel *= d;
      if ((dt == "I64" || dt == "I32") && numel >= 0 && numel <= (int64_t(1) << 22) &&
          en.end - en.begin == static_cast<uint64_t>(numel) * en.dtype->bytes) {
        std::vector<int64_t>& v = raw.ints[en.name];
        v.resize(static_cast<size_t>(numel));
        for (size_t i = 0; i < v.size(); ++i) {
          const uint8_t* q = base + en.begin + i * en.dtype->bytes;
          uint64_t u = 0;
          for (size_t b = en.dtype->bytes; b-- > 0;) u = (u << 8) | q[b];
          v[i] = dt == "I64" ? static_cast<int64_t>(u) : static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(u)));
        }
      }
      continue;
    }
    auto fail = [&](const std::string& why) { throw Error(path + ": tensor '" + en.name + "' " + why); };
    Tensor t;
    t.shape = en.shape;
    const uint8_t* p = base + en.begin;
    const size_t n = static_cast<size_t>(t.numel());
    if (keep && en.dtype->kind == Kind::F32 && n > 0 && in_place(p))
      t.data = view_f32(p, n, keep, file_mapped, fail);
    else
      t.data = convert(p, n, en.dtype->kind, fail);
    raw.tensors.emplace(en.name, std::move(t));
  }
  if (!raw.skipped.empty()) {
    std::string s;
    size_t i = 0;
    for (auto it = raw.skipped.begin(); it != raw.skipped.end() && i < 4; ++it, ++i)
      s += (i ? ", " : "") + it->first + " (" + it->second + ")";
    if (raw.skipped.size() > 4) s += ", ... (" + std::to_string(raw.skipped.size()) + " in all)";
    raw.notices.push_back("skipped non-float tensors: " + s);
  }
}

}  // namespace

RawWeights parse_weights_safetensors(const uint8_t* data, size_t size, const std::string& path,
                                     const std::shared_ptr<const void>& keep, bool keep_is_file_mapping) {
  uint64_t n = 0;
  const json header = parse_header(data, size, path, n);
  const uint64_t data_size = size - 8 - n;
  const uint8_t* base = data + 8 + n;
  check_no_duplicate_keys(reinterpret_cast<const char*>(data + 8), n, path);
  const std::vector<Entry> entries = parse_entries(header, path, data_size);
  check_entries_tile(entries, data_size, path);
  RawWeights raw;
  raw.path = path;
  read_metadata_config(header, path, raw);
  read_tensors(entries, base, path, raw, keep, keep_is_file_mapping);
  return raw;
}

RawWeights load_weights_safetensors(const std::string& path) {
  // F32 tensors stay in the mapping (views that share `file`); it is unmapped with the last of them.
  const std::shared_ptr<const MappedFile> file = std::make_shared<const MappedFile>(path);
  const std::string sha = sha256_bytes(file->data(), file->size(), /*release_pages=*/true);  // the bytes parsed
  RawWeights raw = parse_weights_safetensors(file->data(), file->size(), path, file, /*keep_is_file_mapping=*/true);  // a file under 8 bytes: "too short"
  throw_if_changed(*file, path);
  file->close_file();  // the views keep no descriptor (a shard of many models)
  raw.files = {{path, sha, file->stamp()}};
  return raw;
}

}  // namespace attnmap

namespace attnmap {

std::vector<float> decode_float_tensor(const uint8_t* p, size_t n, const std::string& dtype, const std::string& what) {
  const DType* d = find_dtype(dtype);
  if (!d || d->kind == Kind::Skip) throw Error(what + " has dtype " + dtype + ", which attnmap does not convert");
  return convert(p, n, d->kind, [&](const std::string& why) { throw Error(what + " " + why); });
}

}  // namespace attnmap
