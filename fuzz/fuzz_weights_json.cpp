// libFuzzer target: the JSON weights loader (SAX parser into tensors, then the layout/shape checks of
// build_model). Any input must end in a model or an attnmap::Error naming the problem, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "checkpoint/weights.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    attnmap::build_model(attnmap::parse_weights_json(text, "fuzz.json"));
  } catch (const attnmap::Error&) {
  }
  return 0;
}
