// paths.cpp - the files a run reads (model_reads) and the bundled default weights.
#include "engine/paths.hpp"


#include <filesystem>

#include "checkpoint/weights.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {
std::string g_program_path;  // main's argv[0]
}  // namespace

void set_program_path(const std::string& argv0) { g_program_path = argv0; }

std::vector<ReadFile> model_reads(const std::string& weights_path) {
  std::vector<ReadFile> reads;
  for (const std::string& f : model_files(weights_path))
    reads.push_back({f, f == weights_path ? "the weights file"
                        : f.size() >= 11 && f.compare(f.size() - 11, 11, "config.json") == 0
                            ? "a config file read with the weights"
                            : "a weights file read with -w"});  // a shard, an index, a folder's model.safetensors
  reads.push_back({"/proc/self/exe", "the attnmap program itself"});
  if (g_program_path.find('/') != std::string::npos) reads.push_back({g_program_path, "the attnmap program itself"});
  return reads;
}

std::string default_weights_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "attnmap" / "default.json";
    if (fs::exists(installed, ec)) return installed.string();
  }
  for (const char* p : {ATTNMAP_SOURCE_WEIGHTS, ATTNMAP_INSTALLED_WEIGHTS})
    if (fs::exists(p, ec)) return p;
  throw Error(std::string("no weights given and the bundled default is missing (looked for ") + ATTNMAP_SOURCE_WEIGHTS +
              "); pass " + setting_ref("weights"));
}

std::string local_weights_path(const std::string& weights_arg) {
  const std::string w = weights_arg.empty() ? default_weights_path() : weights_arg;
  std::error_code ec;
  return fs::exists(fs::symlink_status(w, ec)) ? w : "";
}

}  // namespace attnmap
