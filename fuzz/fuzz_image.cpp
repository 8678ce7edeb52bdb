// libFuzzer target: image decoding (stb_image + attnmap's JPEG marker walk, libexif orientation; WebP through
// libwebp, TIFF through libtiff over memory - seeds for both in fuzz/seeds/image, from tools/make_bad_inputs.py) and
// preprocessing (resize, normalise) as `attnmap render` does them, and mask decoding as `attnmap eval`
// does it. Any input must end in an image or an attnmap::Error, never a crash, a leak or undefined behaviour.
#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "io/image_io.hpp"
#include "model/preprocess.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  attnmap::LoadOptions opt;
  opt.max_pixels = 4'000'000;  // keeps each run fast; the limit check itself is what is exercised
  opt.keep_nonzero = (size & 1) != 0;  // half the inputs as `eval --masks` reads masks (stb's 16-bit loader)
  try {
    const attnmap::Image img = attnmap::decode_image(data, size, "fuzz", opt);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    attnmap::preprocess(img, 32, 32, attnmap::ResizeMode::Squash, mean, std);
    attnmap::preprocess(img, 32, 32, attnmap::ResizeMode::Crop, mean, std);
  } catch (const attnmap::Error&) {
  }
  return 0;
}
