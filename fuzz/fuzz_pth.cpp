// libFuzzer target: PyTorch checkpoints - the zip archive (libzip over the bytes in memory, storages located
// in place and CRC-checked), the restricted unpickler of data.pkl, the state-dict search, the tensor bounds
// checks and strided copies, then the layout checks of build_model. Any input must end in a model or an
// attnmap::Error. A zip archive is parsed as it is; any other input is taken as data.pkl and packed (with
// libzip) into torch.save's layout beside four storages archive/data/0..3 of 24 float32 each, so mutated
// pickles reach the tensor code too (inside a real archive a mutated data.pkl fails its CRC first).
#include <zip.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/weights.hpp"
#include "checkpoint/weights_pth.hpp"
#include "core/error.hpp"

namespace {

// torch.save's layout around `pkl`, in memory; empty when libzip fails.
std::vector<uint8_t> pack(const uint8_t* pkl, size_t n) {
  static std::vector<uint8_t> storage = [] {
    std::vector<uint8_t> s(96);
    for (size_t i = 0; i < 24; ++i) {
      const float v = static_cast<float>(i) - 8.0f;
      std::memcpy(s.data() + 4 * i, &v, 4);
    }
    return s;
  }();
  std::vector<uint8_t> out;
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* buf = zip_source_buffer_create(nullptr, 0, 0, &err);
  zip_t* za = buf ? zip_open_from_source(buf, ZIP_TRUNCATE, &err) : nullptr;
  if (!za) {
    if (buf) zip_source_free(buf);
    zip_error_fini(&err);
    return out;
  }
  zip_source_keep(buf);
  auto add = [&](const char* name, const void* d, size_t len) {
    zip_source_t* s = zip_source_buffer(za, d, len, 0);
    const zip_int64_t i = s ? zip_file_add(za, name, s, ZIP_FL_OVERWRITE) : -1;
    if (i < 0) {
      if (s) zip_source_free(s);
      return;
    }
    zip_set_file_compression(za, static_cast<zip_uint64_t>(i), ZIP_CM_STORE, 0);
  };
  add("archive/data.pkl", pkl, n);
  for (const char* name : {"archive/data/0", "archive/data/1", "archive/data/2", "archive/data/3"})
    add(name, storage.data(), storage.size());
  add("archive/version", "3\n", 2);
  if (zip_close(za) == 0 && zip_source_open(buf) == 0) {
    uint8_t chunk[4096];
    zip_int64_t got = 0;
    while ((got = zip_source_read(buf, chunk, sizeof chunk)) > 0) out.insert(out.end(), chunk, chunk + got);
    zip_source_close(buf);
  } else {
    zip_discard(za);
  }
  zip_source_free(buf);
  zip_error_fini(&err);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    if (attnmap::sniff_pth(data, size) == attnmap::PthSniff::Zip) {
      attnmap::build_model(attnmap::parse_weights_pth(data, size, "fuzz.pth", ""));
    } else {
      const std::vector<uint8_t> zip = pack(data, size);
      if (!zip.empty()) attnmap::build_model(attnmap::parse_weights_pth(zip.data(), zip.size(), "fuzz.pth", ""));
    }
  } catch (const attnmap::Error&) {
  }
  return 0;
}
