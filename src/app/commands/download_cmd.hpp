// download_cmd.hpp - attnmap download: Hub models into huggingface_hub's cache (issue 40, docs/hub.md).
#pragma once
#include <string>
#include <vector>

namespace attnmap {

/// Fetches each Hub name (ORG/NAME, ORG/NAME@REV, hf-hub:ORG/NAME) as render's -w would (hub/hub_fetch.hpp:
/// the weights and side configs only) and prints its snapshot folder on stdout, one line a name; unless
/// `quiet`, a line on stderr with the commit and whether it came from the cache, the progress bar on a terminal
/// and the fetch's notes. A failed name is said on stderr and the next is tried. Returns 0 when every name was
/// fetched, 2 otherwise (a name that is not a Hub name, a refused or unknown repository, a failed download).
int run_download(const std::vector<std::string>& names, bool quiet);

}  // namespace attnmap
