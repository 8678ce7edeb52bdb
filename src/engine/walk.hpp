// walk.hpp - the inputs of a run as jobs: folders walked in sorted order (the extensions picked, --ext, and
// the image files passed over), each input's output name over the whole sorted list, and --shard K/N.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/render.hpp"

namespace attnmap {

/// The extensions a folder walk picks by default: every format attnmap decodes (stb_image's, and WebP and
/// TIFF), plus .jfif (a JPEG). The format itself is sniffed from the content, not from this extension.
const std::vector<std::string>& default_image_extensions();

/// The summary line for the image files a folder walk passed over (plan_jobs' `passed_over`: lower-case
/// extension with dot -> count), e.g. "skipped 2 files of unsupported types: .heic 1, .svg 1 (not rendered;
/// ...)"; empty when there are none. Files of readable types left out by --ext are not counted.
std::string passed_over_summary(const std::map<std::string, size_t>& passed_over);

/// "no images found in photos/" (the inputs named, at most three, a folder with a trailing '/'; "photos/,
/// more/ and 2 more"), with ` with --ext png,jpg (no file there has such an extension)` when `exts` (as the
/// user gave them) is not empty: the message of a run whose inputs hold no image.
std::string no_images_message(const std::vector<std::string>& inputs, const std::vector<std::string>& exts = {});

/// Nothing to do because every input named is missing is bad usage (exit 2, as render's "nothing to render",
/// issue 28): "a.png, b/: no such file or folder; nothing to <what>" when every one of `inputs` is in
/// `missing` (plan_jobs'), else "". A missing input beside others that exist fails on its own (exit 1).
std::string all_inputs_missing(const std::vector<std::string>& inputs, const std::vector<std::string>& missing,
                               const std::string& what);

/// Normalises an --ext list: items split at commas, leading dots removed, lower-cased. Throws
/// attnmap::Error for an empty item.
std::vector<std::string> parse_extensions(const std::vector<std::string>& items);

/// Parses "K/N" (1 <= K <= N) into shard index K and count N. Throws attnmap::Error otherwise.
void parse_shard(const std::string& s, int* index, int* count);

/// Expands inputs into jobs: a folder is walked recursively in sorted order (hidden entries skipped,
/// symbolic links to folders not followed, so link loops cannot hang it; only files whose extension is
/// in `ext`, lower-case without dot, empty meaning default_image_extensions()), its tree mirrored under
/// out_dir; a file given directly lands at out_dir/NAME whatever its extension. A name's bytes that are not
/// well-formed UTF-8 become "%XX" (x\xff.jpg -> x%FF.png: the manifest, gallery and sheet can name it). Stems
/// that collide keep their extension (name.jpg.png); any remaining clash gets "-2", "-3"... Inputs that do not exist are
/// returned in `missing`. A folder that cannot be read (the input itself or one below it) is appended to
/// `unreadable` (when given) as (path, "PATH: cannot read folder: REASON"); the rest of the walk goes on.
/// Files in walked folders that are not picked but whose extension names an image format attnmap cannot
/// decode (.heic .heif .avif .svg .jxl .jp2 .exr .ico, camera raw such as .dng .cr2 .nef .arw, .xcf ...) are
/// counted in `passed_over` (when given) by lower-case extension with its dot; with `passed_over`, PNGs that
/// carry a run's record (an earlier run's overlays and figures, whatever its -o) are passed over
/// and counted too, so they never become photos of a later run; other files (.txt, .json,
/// .npy, .csv, no extension) are not. Files given directly are always jobs, whatever their extension.
std::vector<Job> plan_jobs(const std::vector<std::string>& inputs, const std::string& out_dir,
                           std::vector<std::string>* missing, const std::vector<std::string>& ext = {},
                           std::vector<std::pair<std::string, std::string>>* unreadable = nullptr,
                           std::map<std::string, size_t>* passed_over = nullptr);

}  // namespace attnmap
