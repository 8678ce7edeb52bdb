// libFuzzer target: the safetensors parser (header length, JSON header, dtypes, shapes, offsets, float
// conversion) and the layout checks of build_model. Any input must end in a model or an attnmap::Error.
#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "checkpoint/weights.hpp"
#include "checkpoint/weights_safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    attnmap::build_model(attnmap::parse_weights_safetensors(data, size, "fuzz.safetensors"));
  } catch (const attnmap::Error&) {
  }
  return 0;
}
