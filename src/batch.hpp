// batch.hpp - walking inputs, naming outputs, and rendering every image with per-image error handling.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "render.hpp"

namespace attnmap {

/// Expands inputs into jobs: a folder is walked recursively in sorted order (hidden entries skipped,
/// symbolic links to folders not followed, so link loops cannot hang it; only files stb_image reads by
/// extension), its tree mirrored under out_dir; a file given directly lands at out_dir/NAME. Stems that
/// collide keep their extension (name.jpg.png); any remaining clash gets "-2", "-3"... Inputs that do not
/// exist are returned in `missing`.
std::vector<Job> plan_jobs(const std::vector<std::string>& inputs, const std::string& out_dir,
                           std::vector<std::string>* missing);

/// The bundled default weights: next to the installed binary (../share/attnmap/default.json) or the
/// source tree's weights/default.json. Throws attnmap::Error when neither exists.
std::string default_weights_path();

/// Runs `attnmap render`. Returns the exit status: 0 all images done, 1 some failed (each printed with its
/// path and reason; the rest still written). Throws attnmap::Error for unusable weights or bad options
/// (the caller exits with status 2).
int run_render(const RenderOptions& opt);

}  // namespace attnmap
