// libFuzzer target: CLIP's vocabulary readers and tokenizer (src/text/). The input's first byte picks the
// format (OpenAI's .gz as it is or gzipped here, vocab.json + merges.txt, tokenizer.json), the rest is the
// file(s) and a text, cut at "\n--8<--\n" (clip_text_input.hpp, shared with the replay of
// fuzz/regressions/clip_text/). Any vocabulary must read or end in an attnmap::Error naming the file; a read
// one must tokenize any text under each family's rules, refused or truncated at the context, or end in an
// Error; the ids must decode. Anything else (a crash, another exception, a hang, a huge allocation) is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "clip_text_input.hpp"

namespace {

// This process's folder for the vocabulary files (the readers read paths), removed at exit (never destroyed
// itself, so the exit handler may still use it).
const std::filesystem::path& fuzz_dir() {
  static const std::filesystem::path* dir = [] {
    auto* d = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                        ("attnmap_fuzz_clip_text_" + std::to_string(::getpid())));
    std::filesystem::create_directories(*d);
    return d;
  }();
  static const bool cleanup = [] {
    return std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*dir, ec);
    }) == 0;
  }();
  (void)cleanup;
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  attnmap::fuzz::run_clip_text_input(data, size, fuzz_dir());
  return 0;
}
