// hub_name.hpp - Hugging Face Hub model names as timm, transformers and open_clip take them
// (ORG/NAME, ORG/NAME@REVISION, hf-hub:ORG/NAME), and the files a model repository is read from.
#pragma once
#include <array>
#include <optional>
#include <string>

namespace attnmap {

/// A Hub model name: the repository id "ORG/NAME" and the revision asked for (a branch, a tag or a commit).
struct HubName {
  std::string repo;                 ///< "facebook/dinov2-small"
  std::string revision = "main";    ///< as written after '@', else "main"
};

/// What a load was fetched as, for the provenance record and inspect: the name, the revision asked for and
/// the commit it resolved to (40 hex digits).
struct HubRef {
  std::string repo, revision, commit;
};

/// The weights files of a model repository in the order they are tried, the first present is read (never more
/// than one): the safetensors of transformers / timm, its sharded index, open_clip's safetensors, then the
/// pickles (transformers' / timm's, open_clip's). The same order picks the file in a local model folder
/// (checkpoint/weights_hf.hpp), so a folder and its Hub snapshot read the same weights.
inline constexpr std::array<const char*, 5> kHubWeightsFiles = {
    "model.safetensors", "model.safetensors.index.json", "open_clip_model.safetensors", "pytorch_model.bin",
    "open_clip_pytorch_model.bin"};

/// The side configs read beside the weights where the repository has them.
inline constexpr std::array<const char*, 3> kHubConfigFiles = {"config.json", "preprocessor_config.json",
                                                               "open_clip_config.json"};

/// Parses a Hub model name: "ORG/NAME", "ORG/NAME@REV" or the same behind "hf-hub:" (timm's and open_clip's
/// spelling; "hf_hub:" too). ORG and NAME are 1-96 of [A-Za-z0-9_.-], neither starting nor ending with '-' or
/// '.', without "--" or ".." (huggingface_hub's validate_repo_id); a revision is non-empty, of printable ASCII
/// without spaces, and its '/'-separated parts are neither empty, "." nor ".." (it names a file under refs/).
/// A NAME ending in a weights file's extension (.safetensors, .pth, .pt, .bin, .json, .npz, .ckpt) is taken
/// for a file path, not a name. Returns std::nullopt when `s` is not a name; then `why` (when given) says why.
std::optional<HubName> parse_hub_name(const std::string& s, std::string* why = nullptr);

/// Whether `s` is written as a Hub name with the "hf-hub:" / "hf_hub:" prefix (then it is never a path).
bool has_hub_prefix(const std::string& s);

/// Whether `s` is a full commit hash: 40 lower-case hex digits.
bool is_commit_hash(const std::string& s);

/// "ORG/NAME" or "ORG/NAME@REV" (the revision shown when it is not "main").
std::string hub_name_text(const HubName& n);

}  // namespace attnmap
