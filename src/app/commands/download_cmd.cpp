// download_cmd.cpp - attnmap download (download_cmd.hpp).
#include "core/names.hpp"
#include "app/commands/download_cmd.hpp"

#include <unistd.h>

#include <iostream>
#include <optional>

#include "core/error.hpp"
#include "hub/hub_download.hpp"
#include "hub/hub_fetch.hpp"

namespace attnmap {

namespace {

// One name fetched; throws attnmap::Error.
void download_one(const std::string& arg, const HubSettings& s, bool quiet) {
  std::string why;
  const std::optional<HubName> name = parse_hub_name(arg, &why);
  if (!name) throw Error(arg + ": not a Hugging Face Hub name (ORG/NAME, ORG/NAME@REVISION or hf-hub:ORG/NAME): " + why);
  const HubSnapshot snap = fetch_hub_model(*name, s, {quiet, ::isatty(2) == 1, {}});
  // A cache filled here serves compute nodes offline: every blob is checked against its name, not only new ones.
  if (const std::string bad = hub_snapshot_damage(snap.folder); !bad.empty()) throw Error(bad);
  if (!quiet) {
    for (const std::string& n : snap.notes) std::cerr << "attnmap: note: " << printable(n) << "\n";
    std::cerr << "attnmap: " << hub_name_text(*name) << " at commit " << snap.ref.commit << ": " << counted(snap.files.size(), "file")
              << ", "
              << (snap.downloaded_bytes > 0 ? hub_size_text(snap.downloaded_bytes) + " downloaded" : std::string("all in the cache"))
              << "\n";
  }
  std::cout << snap.folder << "\n" << std::flush;
}

}  // namespace

int run_download(const std::vector<std::string>& names, bool quiet) {
  const HubSettings s = hub_settings_from_env();
  int failed = 0;
  for (const std::string& arg : names) {
    try {
      download_one(arg, s, quiet);
    } catch (const Error& e) {
      std::cerr << "attnmap: error: " << printable(e.what()) << "\n";
      ++failed;
    }
  }
  return failed ? 2 : 0;
}

}  // namespace attnmap
