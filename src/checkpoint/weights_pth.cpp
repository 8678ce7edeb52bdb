#include "checkpoint/weights_pth.hpp"

#include "io/hash.hpp"
#include "io/mapped_file.hpp"

#include <algorithm>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "checkpoint/pickle.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {

namespace {

using K = PyValue::Kind;

// A read-only libzip source over bytes in memory that remembers where each read started: libzip reads a
// stored (uncompressed) entry's data straight from its offset in the file, so the first read after opening
// an entry gives that offset, and the bytes are then used in place (checked against the entry's CRC-32).
struct MemSource {
  const uint8_t* data;
  size_t size;
  uint64_t pos = 0;
  int64_t first_read = -1;  // position of the first READ since reset
  zip_error_t error;
};

zip_int64_t mem_source_cb(void* ud, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  MemSource& s = *static_cast<MemSource*>(ud);
  switch (cmd) {
    case ZIP_SOURCE_OPEN: s.pos = 0; return 0;
    case ZIP_SOURCE_READ: {
      if (s.first_read < 0) s.first_read = static_cast<int64_t>(s.pos);
      const uint64_t n = s.pos >= s.size ? 0 : std::min<uint64_t>(len, s.size - s.pos);
      if (n) std::memcpy(data, s.data + s.pos, static_cast<size_t>(n));
      s.pos += n;
      return static_cast<zip_int64_t>(n);
    }
    case ZIP_SOURCE_CLOSE: return 0;
    case ZIP_SOURCE_STAT: {
      zip_stat_t* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, &s.error);
      if (!st) return -1;
      zip_stat_init(st);
      st->size = s.size;
      st->comp_size = s.size;
      st->comp_method = ZIP_CM_STORE;
      st->encryption_method = ZIP_EM_NONE;
      st->valid = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
      return sizeof(*st);
    }
    case ZIP_SOURCE_ERROR: return zip_error_to_data(&s.error, data, len);
    case ZIP_SOURCE_FREE: return 0;
    case ZIP_SOURCE_SEEK: {
      const zip_int64_t at = zip_source_seek_compute_offset(s.pos, s.size, data, len, &s.error);
      if (at < 0) return -1;
      s.pos = static_cast<uint64_t>(at);
      return 0;
    }
    case ZIP_SOURCE_TELL: return static_cast<zip_int64_t>(s.pos);
    case ZIP_SOURCE_SUPPORTS:
      return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                            ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL,
                                            ZIP_SOURCE_SUPPORTS, -1);
    default:
      zip_error_set(&s.error, ZIP_ER_OPNOTSUPP, 0);
      return -1;
  }
}

// An entry's bytes: in place in the mapped file, or (compressed entries) read into `owned`.
struct Bytes {
  const uint8_t* p = nullptr;
  size_t n = 0;
  std::vector<uint8_t> owned;
};

class Archive {
 public:
  Archive(const uint8_t* data, size_t size, const std::string& path) : path_(path) {
    src_.data = data;
    src_.size = size;
    zip_error_init(&src_.error);
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* zs = zip_source_function_create(mem_source_cb, &src_, &err);
    if (zs) za_ = zip_open_from_source(zs, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!za_) {
      const std::string why = zip_error_strerror(&err);
      if (zs) zip_source_free(zs);
      zip_error_fini(&err);
      zip_error_fini(&src_.error);
      throw Error(path + ": not a readable zip archive (libzip: " + why + ")");
    }
    zip_error_fini(&err);
    const zip_int64_t n = zip_get_num_entries(za_, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
      const char* name = zip_get_name(za_, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
      if (name) index_.emplace(name, static_cast<zip_uint64_t>(i));
    }
  }
  ~Archive() {
    zip_discard(za_);  // frees the source too
    zip_error_fini(&src_.error);
  }
  Archive(const Archive&) = delete;
  Archive& operator=(const Archive&) = delete;

  const std::map<std::string, zip_uint64_t>& names() const { return index_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  uint64_t size_of(const std::string& name) { return stat(name).size; }
  /// The entry's declared (inflated) size, its stored size and whether it is compressed (not ZIP_CM_STORE).
  struct Stat {
    uint64_t size = 0, comp_size = 0;
    bool compressed = false;
  };
  Stat stat(const std::string& name) {
    zip_stat_t st;
    if (zip_stat_index(za_, index_.at(name), 0, &st) != 0) fail(name, zip_strerror(za_));
    Stat out;
    out.size = st.size;
    out.compressed = (st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method != ZIP_CM_STORE;
    out.comp_size = (st.valid & ZIP_STAT_COMP_SIZE) ? st.comp_size : st.size;
    return out;
  }
  Bytes read(const std::string& name);

 private:
  [[noreturn]] void fail(const std::string& entry, const std::string& why) const {
    throw Error(path_ + ": archive entry '" + printable(entry) + "': " + why);
  }
  const std::string& path_;
  MemSource src_{};
  zip_t* za_ = nullptr;
  std::map<std::string, zip_uint64_t> index_;
};

Bytes Archive::read(const std::string& name) {
  zip_stat_t st;
  const zip_uint64_t idx = index_.at(name);
  if (zip_stat_index(za_, idx, 0, &st) != 0) fail(name, zip_strerror(za_));
  if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) fail(name, "encrypted");
  src_.first_read = -1;
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(za_, idx, 0), zip_fclose);
  if (!f) fail(name, std::string("cannot open: ") + zip_strerror(za_));
  Bytes b;
  if (st.comp_method == ZIP_CM_STORE && st.size > 0) {
    src_.first_read = -1;
    uint8_t first = 0;
    if (zip_fread(f.get(), &first, 1) != 1) fail(name, std::string("cannot read: ") + zip_file_strerror(f.get()));
    const int64_t at = src_.first_read;
    if (at >= 0 && st.size <= src_.size && static_cast<uint64_t>(at) <= src_.size - st.size && src_.data[at] == first) {
      const uint8_t* p = src_.data + at;
      // CRC-32 of the bytes in place, as libzip would check them on a full read.
      uLong crc = crc32(0L, Z_NULL, 0);
      for (uint64_t done = 0; done < st.size;) {
        const uInt chunk = static_cast<uInt>(std::min<uint64_t>(st.size - done, 1u << 30));
        crc = crc32(crc, p + done, chunk);
        done += chunk;
      }
      if (!(st.valid & ZIP_STAT_CRC) || crc == st.crc) {
        b.p = p;
        b.n = static_cast<size_t>(st.size);
        return b;
      }
      fail(name, "CRC-32 mismatch (the file is damaged)");
    }
    b.owned.push_back(first);  // not located in place: read it through libzip below
  }
  // Compressed (or not located): read through libzip, never past the declared size. The caller has checked
  // the declared size against the inflation budget (check_inflation), so it is reserved once (address space:
  // pages become resident only as the data arrives).
  if (st.comp_method == ZIP_CM_STORE && st.size > src_.size)
    fail(name, "declares " + std::to_string(st.size) + " bytes stored, more than the whole file (" +
                   std::to_string(src_.size) + " bytes)");
  b.owned.reserve(static_cast<size_t>(st.size));
  uint8_t buf[1 << 16];
  while (true) {
    const zip_int64_t got = zip_fread(f.get(), buf, sizeof buf);
    if (got < 0) fail(name, std::string("cannot read: ") + zip_file_strerror(f.get()));
    if (got == 0) break;
    if (static_cast<uint64_t>(got) > st.size - b.owned.size()) fail(name, "holds more bytes than its declared size");
    b.owned.insert(b.owned.end(), buf, buf + got);
  }
  if (b.owned.size() != st.size) fail(name, "holds fewer bytes than its declared size");
  b.p = b.owned.data();
  b.n = b.owned.size();
  return b;
}

// ---- the state dict in the pickle ---------------------------------------------------------------------

const char* const kWrapperKeys[] = {"model", "state_dict", "model_state", "model_state_dict", "teacher",
                                    "student", "module", "net", "network"};

// A dict's value under the string key `k` (the last one, as Python keeps it), or nullptr.
const PyValue* lookup(const PickleData& p, const PyValue& d, const std::string& k) {
  const PyValue* found = nullptr;
  for (size_t i = 0; i + 1 < d.items.size(); i += 2) {
    const PyValue& key = p.values[d.items[i]];
    if (key.kind == K::Str && key.s == k) found = &p.values[d.items[i + 1]];
  }
  return found;
}

bool holds_tensors(const PickleData& p, const PyValue& d) {
  if (d.kind != K::Dict) return false;
  for (size_t i = 0; i + 1 < d.items.size(); i += 2)
    if (p.values[d.items[i]].kind == K::Str && p.values[d.items[i + 1]].kind == K::Tensor) return true;
  return false;
}

// "model (OrderedDict of 38 tensors), epoch (int 3), ..." for the first 12 entries of a dict.
std::string list_entries(const PickleData& p, const PyValue& d) {
  std::string s;
  size_t shown = 0;
  for (size_t i = 0; i + 1 < d.items.size(); i += 2, ++shown) {
    if (shown == 12) {
      s += ", ... (" + std::to_string(d.items.size() / 2) + " in all)";
      break;
    }
    const PyValue& key = p.values[d.items[i]];
    s += (s.empty() ? "" : ", ") + (key.kind == K::Str ? "'" + printable(key.s) + "'" : describe_value(p, key)) + " (" +
         describe_value(p, p.values[d.items[i + 1]]) + ")";
  }
  return s.empty() ? "no entries" : s;
}

struct Choice {
  const PyValue* dict;
  std::string used;
  std::vector<std::string> notes;
};

// Finds the state dict inside `d` (reached by `where`, "" at the top level): `d` itself when it holds
// tensors, else a usual wrapper key, else the only entry holding tensors; up to 4 wrappers deep.
Choice find_state_dict(const PickleData& p, const PyValue& d, const std::string& where, const std::string& path, int depth) {
  if (holds_tensors(p, d)) return {&d, where.empty() ? "the top level" : "'" + where + "'", {}};
  const std::string at = where.empty() ? "" : " under '" + where + "'";
  if (d.kind != K::Dict)
    throw Error(path + ": the checkpoint holds a " + describe_value(p, d) + at + ", not a state dict (a dict of tensors)");
  if (depth < 4) {
    std::vector<std::string> found;
    for (const char* k : kWrapperKeys) {
      const PyValue* v = lookup(p, d, k);
      if (v && v->kind == K::Dict && (holds_tensors(p, *v) || depth < 3)) found.push_back(k);
    }
    for (const std::string& k : found) {
      try {
        Choice c = find_state_dict(p, *lookup(p, d, k), where.empty() ? k : where + "/" + k, path, depth + 1);
        std::vector<std::string> others;  // every other entry holding tensors (e.g. timm's 'state_dict_ema')
        for (size_t i = 0; i + 1 < d.items.size(); i += 2) {
          const PyValue& key = p.values[d.items[i]];
          if (key.kind == K::Str && key.s != k && holds_tensors(p, p.values[d.items[i + 1]]) &&
              std::find(others.begin(), others.end(), key.s) == others.end())
            others.push_back(printable(key.s));
        }
        if (!others.empty()) {
          std::string s;
          for (const std::string& o : others) s += (s.empty() ? "'" : ", '") + o + "'";
          c.notes.push_back("state dict " + c.used + " used; the checkpoint also has " + s + " (choose with " + setting_ref("key") + ")");
        }
        return c;
      } catch (const Error&) {
        // a wrapper key holding no tensors (e.g. an optimizer's 'state'): try the next
      }
    }
    std::vector<std::string> with;
    for (size_t i = 0; i + 1 < d.items.size(); i += 2)
      if (p.values[d.items[i]].kind == K::Str && holds_tensors(p, p.values[d.items[i + 1]])) with.push_back(p.values[d.items[i]].s);
    if (with.size() == 1) return find_state_dict(p, *lookup(p, d, with[0]), where.empty() ? with[0] : where + "/" + with[0], path, depth + 1);
    if (with.size() > 1) {
      std::string s;
      for (const std::string& w : with) s += (s.empty() ? "'" : ", '") + printable(w) + "'";
      throw Error(path + ": several state dicts" + at + ": " + s + "; choose one with " + setting_ref("key"));
    }
  }
  throw Error(path + ": no state dict (a dict of tensors) found" + at + "; it holds: " + list_entries(p, d) +
              " (name the entry holding it with " + setting_ref("key") + ", e.g. " + setting_ref("key") + " ENTRY or " +
              setting_ref("key") + " ENTRY/INNER)");
}

// `--key a/b`: the entry named by each part in turn, then the state dict inside it.
Choice choose(const PickleData& p, const std::string& key, const std::string& path) {
  const PyValue& root = p.values[p.root];
  if (key.empty()) return find_state_dict(p, root, "", path, 0);
  const PyValue* cur = &root;
  std::string where;
  for (size_t start = 0; start <= key.size();) {
    const size_t slash = std::min(key.find('/', start), key.size());
    const std::string part = key.substr(start, slash - start);
    start = slash + 1;
    const PyValue* next = cur->kind == K::Dict ? lookup(p, *cur, part) : nullptr;
    if (!next)
      throw Error(path + ": " + setting_ref("key") + " '" + printable(key) + "': no entry '" + printable(part) + "'" +
                  (where.empty() ? "" : " in '" + where + "'") + "; " +
                  (cur->kind == K::Dict ? "the entries are: " + list_entries(p, *cur) : "that is a " + describe_value(p, *cur)));
    where += (where.empty() ? "" : "/") + part;
    cur = next;
  }
  if (cur->kind == K::Tensor)
    throw Error(path + ": " + setting_ref("key") + " '" + printable(key) + "' names a tensor, not a state dict (a dict of tensors)");
  return find_state_dict(p, *cur, where, path, 0);
}

// ---- tensors ------------------------------------------------------------------------------------------

// The tensor's elements in C order, gathered by strides from its storage bytes (in place when contiguous).
const uint8_t* tensor_bytes(const PyValue& t, const Bytes& storage, size_t esize, size_t numel, std::vector<uint8_t>& copy) {
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t i = t.sizes.size(); i-- > 0;) {
    if (t.sizes[i] != 1 && t.strides[i] != expect) contiguous = false;
    expect *= t.sizes[i];
  }
  if (contiguous) return storage.p + static_cast<size_t>(t.offset) * esize;
  copy.resize(numel * esize);
  std::vector<int64_t> idx(t.sizes.size(), 0);
  for (size_t e = 0; e < numel; ++e) {
    size_t at = static_cast<size_t>(t.offset);
    for (size_t d = 0; d < idx.size(); ++d) at += static_cast<size_t>(idx[d] * t.strides[d]);
    std::memcpy(copy.data() + e * esize, storage.p + at * esize, esize);
    for (size_t d = idx.size(); d-- > 0;) {  // next index, last dimension fastest
      if (++idx[d] < t.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return copy.data();
}

// Checks every storage the pickle names against its archive entry (present, numel x element size bytes).
void check_storages(const PickleData& p, Archive& ar, const std::string& prefix, const std::string& path) {
  std::set<std::string> seen;
  for (const PyValue& v : p.values) {
    if (v.kind != K::Storage || !seen.insert(v.s).second) continue;
    const std::string entry = prefix + "data/" + v.s;
    if (!ar.has(entry))
      throw Error(path + ": the pickle names storage '" + printable(v.s) + "', but the archive has no entry '" +
                  printable(entry) + "'");
    const size_t esize = storage_dtype_bytes(v.dtype);
    uint64_t want = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(v.i), static_cast<uint64_t>(esize), &want) || ar.size_of(entry) != want)
      throw Error(path + ": storage '" + printable(v.s) + "' (" + v.dtype + ") declares " + std::to_string(v.i) +
                  " elements, but its entry '" + printable(entry) + "' holds " + std::to_string(ar.size_of(entry)) + " bytes");
  }
}

// The archive's folder ("archive/", "model/"): where data.pkl is. TorchScript and other zips are refused.
std::string find_prefix(const Archive& ar, const std::string& path) {
  std::string prefix;
  bool found = false;
  for (const auto& kv : ar.names()) {
    const std::string& n = kv.first;
    const size_t slash = n.find('/');
    if (slash == std::string::npos) continue;
    const std::string rest = n.substr(slash + 1);
    if (rest == "constants.pkl" || rest.rfind("code/", 0) == 0)
      throw Error(path + ": a TorchScript archive (torch.jit.save), not a state dict: save the weights with "
                         "torch.save(model.state_dict(), PATH) and pass that file");
    if (rest == "data.pkl" && !found) prefix = n.substr(0, slash + 1), found = true;
  }
  if (!found) throw Error(path + ": a zip archive without ARCHIVE/data.pkl: not a torch.save checkpoint");
  return prefix;
}

void add_tensor(RawWeights& raw, const PickleData& p, const std::string& name, const PyValue& t, Archive& ar,
                const std::string& prefix, std::map<std::string, Bytes>& cache) {
  const PyValue& st = p.values[t.storage];
  if (st.dtype != "F32" && st.dtype != "F16" && st.dtype != "BF16" && st.dtype != "F64") {
    raw.skipped[name] = st.dtype;
    // Small I64 / I32 tensors keep their values, for index buffers the loader checks (BEiT
    // relative_position_index); anything that does not fit its storage is only listed.
    if (st.dtype == "I64" || st.dtype == "I32") {
      const size_t esize = storage_dtype_bytes(st.dtype);
      const size_t numel = checked_numel(t.sizes, (raw.path + ": tensor '" + name + "'").c_str());
      auto it = cache.find(st.s);
      if (it == cache.end()) it = cache.emplace(st.s, ar.read(prefix + "data/" + st.s)).first;
      uint64_t last = 0;
      bool empty = false;
      if (numel > (size_t(1) << 22) || (numel && (!tensor_last_element(t, &last, &empty) || last >= it->second.n / esize)))
        return;
      std::vector<uint8_t> copy;
      const uint8_t* bytes = numel ? tensor_bytes(t, it->second, esize, numel, copy) : nullptr;
      std::vector<int64_t>& v = raw.ints[name];
      v.resize(numel);
      for (size_t i = 0; i < numel; ++i) {
        if (esize == 8) {
          int64_t x;
          std::memcpy(&x, bytes + i * 8, 8);
          v[i] = x;
        } else {
          int32_t x;
          std::memcpy(&x, bytes + i * 4, 4);
          v[i] = x;
        }
      }
    }
    return;
  }
  const std::string what = raw.path + ": tensor '" + name + "'";
  const size_t esize = storage_dtype_bytes(st.dtype);
  const size_t numel = checked_numel(t.sizes, what.c_str());
  if (numel > static_cast<uint64_t>(st.i))
    throw Error(what + " has " + std::to_string(numel) + " elements, more than its storage's " + std::to_string(st.i) +
                " (overlapping strides, as from expand()): save t.contiguous() or t.clone()");
  auto it = cache.find(st.s);
  if (it == cache.end()) it = cache.emplace(st.s, ar.read(prefix + "data/" + st.s)).first;
  uint64_t last = 0;  // checked when the pickle was read; again here against the bytes actually present
  bool empty = false;
  if (numel && (!tensor_last_element(t, &last, &empty) || last >= it->second.n / esize))
    throw Error(what + " runs past its storage '" + printable(st.s) + "'");
  std::vector<uint8_t> copy;
  const uint8_t* bytes = numel ? tensor_bytes(t, it->second, esize, numel, copy) : nullptr;
  Tensor out;
  out.shape = t.sizes;
  out.data = decode_float_tensor(bytes, numel, st.dtype, what);
  raw.tensors.insert_or_assign(name, std::move(out));  // a repeated key: the last wins, as in Python
}

std::string mib(uint64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%llu bytes (%.1f MiB)", static_cast<unsigned long long>(bytes),
                static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// Refuses data.pkl (or byteorder) before it is inflated when its declared size is over `limit`.
void check_small_entry(Archive& ar, const std::string& entry, uint64_t limit, const std::string& path) {
  const Archive::Stat st = ar.stat(entry);
  if (st.size > limit)
    throw Error(path + ": archive entry '" + printable(entry) + "' declares " + mib(st.size) + ", over the limit of " +
                mib(limit) + " for it (a pickled state dict is far smaller): not read");
}

// The inflation budget, checked on declared sizes before any storage is inflated: the deflated storages the
// state dict's float tensors use may inflate to kPthInflateFloor bytes in all, or to kPthMaxInflateRatio
// times their compressed bytes when that is more. Storages stored uncompressed (what torch.save writes) are
// read in place and cost nothing here; storages the state dict does not use are never inflated.
void check_inflation(const PickleData& p, const PyValue& dict, Archive& ar, const std::string& prefix,
                     const std::string& path) {
  std::set<std::string> used;
  for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const PyValue& t = p.values[dict.items[i + 1]];
    if (t.kind != K::Tensor) continue;
    const PyValue& st = p.values[t.storage];
    if (st.dtype == "F32" || st.dtype == "F16" || st.dtype == "BF16" || st.dtype == "F64") used.insert(st.s);
  }
  uint64_t inflated = 0, compressed = 0;
  size_t entries = 0;
  for (const std::string& key : used) {
    const Archive::Stat st = ar.stat(prefix + "data/" + key);
    if (!st.compressed) continue;
    ++entries;
    if (__builtin_add_overflow(inflated, st.size, &inflated)) inflated = UINT64_MAX;  // over any budget
    compressed += st.comp_size;  // each within the file
  }
  const uint64_t budget = std::max<uint64_t>(kPthInflateFloor, compressed * kPthMaxInflateRatio);
  if (inflated > budget)
    throw Error(path + ": " + std::to_string(entries) + " compressed storage" + (entries == 1 ? "" : "s") +
                " of the state dict would inflate to " + mib(inflated) + " from " + mib(compressed) +
                ", over the inflation limit of " + mib(budget) + ": the larger of " +
                std::to_string(kPthInflateFloor >> 20) + " MiB and " + std::to_string(kPthMaxInflateRatio) +
                " times the compressed size (torch.save stores storages uncompressed: a re-zipped file or a "
                "decompression bomb; re-save it with torch.save)");
}

std::string joined(const std::map<std::string, std::string>& m) {
  std::string s;
  size_t i = 0;
  for (auto it = m.begin(); it != m.end() && i < 4; ++it, ++i) s += (i ? ", " : "") + it->first + " (" + it->second + ")";
  if (m.size() > 4) s += ", ... (" + std::to_string(m.size()) + " in all)";
  return s;
}

}  // namespace

PthSniff sniff_pth(const uint8_t* head, size_t n) {
  if (n >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0) return PthSniff::Zip;
  if (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return PthSniff::LegacyPickle;
  return PthSniff::NotPth;
}

void refuse_legacy_pth(const std::string& path) {
  throw Error(path + ": a PyTorch checkpoint in the legacy format (a bare pickle: torch < 1.6, or "
                     "_use_new_zipfile_serialization=False), which attnmap does not read: re-save it on torch >= 1.6 "
                     "with torch.save(torch.load(PATH, map_location='cpu'), 'weights.pth') (or as safetensors)");
}

// A training checkpoint's 'args' (an argparse.Namespace, read as data): its model name says the head count
// that the state dict cannot (DINO args.arch "vit_small", DeiT / MAE args.model "deit_small_patch16_224"),
// as a config "architecture" that a config.json, the weights' own config or --heads still override.
void take_training_args(const PickleData& p, RawWeights& raw) {
  const PyValue& root = p.values[p.root];
  if (root.kind != K::Dict) return;
  const PyValue* args = lookup(p, root, "args");
  if (!args || args->kind != K::Dict || args->s != "argparse.Namespace") return;
  for (const char* field : {"arch", "model"}) {
    const PyValue* v = lookup(p, *args, field);
    if (!v || v->kind != K::Str || v->s.empty() || v->s.size() > 200) continue;
    if (!raw.config.is_object()) raw.config = nlohmann::json::object();
    if (raw.config.contains("architecture")) return;
    raw.config["architecture"] = v->s;
    raw.config_where = std::string("the checkpoint's args.") + field;
    return;
  }
}

RawWeights parse_weights_pth(const uint8_t* data, size_t size, const std::string& path, const std::string& key, PthInfo* info) {
  Archive ar(data, size, path);
  const std::string prefix = find_prefix(ar, path);
  if (ar.has(prefix + "byteorder")) {
    check_small_entry(ar, prefix + "byteorder", 16, path);
    const Bytes bo = ar.read(prefix + "byteorder");
    const std::string order(reinterpret_cast<const char*>(bo.p), bo.n);
    if (order != "little")
      throw Error(path + ": byteorder '" + printable(order.substr(0, 16)) + "': attnmap reads little-endian checkpoints only");
  }
  check_small_entry(ar, prefix + "data.pkl", kPthMaxPickle, path);
  const Bytes pkl = ar.read(prefix + "data.pkl");
  const PickleData p = unpickle(pkl.p, pkl.n, path);
  check_storages(p, ar, prefix, path);
  const Choice c = choose(p, key, path);
  check_inflation(p, *c.dict, ar, prefix, path);  // before any storage is inflated
  RawWeights raw;
  raw.path = path;
  raw.notices = c.notes;
  std::map<std::string, Bytes> cache;
  std::map<std::string, std::string> other;
  for (size_t i = 0; i + 1 < c.dict->items.size(); i += 2) {
    const PyValue& k = p.values[c.dict->items[i]];
    const PyValue& v = p.values[c.dict->items[i + 1]];
    const std::string name = k.kind == K::Str ? k.s : describe_value(p, k);
    if (k.kind == K::Str && v.kind == K::Tensor) {
      add_tensor(raw, p, name, v, ar, prefix, cache);
    } else {
      other[printable(name)] = describe_value(p, v);
    }
  }
  if (!raw.skipped.empty()) raw.notices.push_back("skipped non-float tensors: " + joined(raw.skipped));
  take_training_args(p, raw);
  if (!other.empty()) raw.notices.push_back("ignored non-tensor entries of the state dict: " + joined(other));
  if (info) {
    const PyValue& root = p.values[p.root];
    info->holds = root.kind == K::Dict && !holds_tensors(p, root)
                      ? describe_value(p, root) + ": " + list_entries(p, root)
                      : describe_value(p, root);
    info->used = c.used;
  }
  return raw;
}

RawWeights load_weights_pth(const std::string& path, const std::string& key, PthInfo* info) {
  const MappedFile file(path);  // storages are read in place from the mapping; it is released on return
  if (file.size() == 0) throw Error(path + ": empty file (0 bytes)");
  const std::string sha = sha256_bytes(file.data(), file.size(), /*release_pages=*/true);  // the bytes parsed
  RawWeights raw = parse_weights_pth(file.data(), file.size(), path, key, info);
  raw.files = {{path, sha}};
  return raw;
}

}  // namespace attnmap
