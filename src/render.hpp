// render.hpp - rendering one image: decode, preprocess, forward, map, overlay, write its files.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attention_maps.hpp"
#include "image_io.hpp"
#include "overlay.hpp"
#include "preprocess.hpp"
#include "weights.hpp"

namespace attnmap {

/// Everything `attnmap render` was asked to do (filled by the CLI; no maths here).
struct RenderOptions {
  std::vector<std::string> inputs;  ///< files or folders
  std::string weights;              ///< weights file; empty: the bundled default
  std::string out_dir = "attnmap-out";
  std::optional<int> layer;          ///< unset: the model's config default_layer, else -1 (last)
  std::optional<std::string> head;   ///< unset: the model's config default_head, else "mean"
  std::string colormap = "viridis";
  float alpha = 0.5f;
  Upsample upsample = Upsample::Bilinear;
  ResizeMode resize = ResizeMode::Squash;
  ModelOverrides overrides;
  bool save_raw = false;
  bool quiet = false;
  LoadOptions load;
};

/// One image to render: where it is read and the output path without extension (".png", ".npy" added).
struct Job {
  std::string input;
  std::string out_base;
};

/// What is fixed for a whole run: the model and the resolved view.
struct RenderContext {
  const ViTWeights* model = nullptr;
  const RenderOptions* opt = nullptr;
  int layer = 0;                  ///< resolved, 0-based
  HeadSelect head;                ///< resolved head / fusion
  const uint8_t* cmap = nullptr;  ///< 256x3 colour table
};

/// What rendering one image produced.
struct RenderResult {
  std::vector<std::string> outputs;  ///< files written, the overlay PNG first
  std::vector<float> map;            ///< (grid_h, grid_w) class-token map as computed (before display scaling)
  std::vector<std::string> notes;    ///< per-image notes for the terminal (e.g. a flat map)
  /// With a classifier head: the 5 most probable classes (config label or "class i", softmax probability),
  /// most probable first; empty without a head.
  std::vector<std::pair<std::string, float>> top5;
};

/// Resolves the view (layer, head, colour map; the model's config defaults where options are unset) and
/// checks it against the model. Throws attnmap::Error for an out-of-range layer/head or unknown name.
RenderContext make_render_context(const ViTWeights& model, const RenderOptions& opt);

/// Renders one image into job.out_base + ".png" (and ".npy" with save_raw), files written atomically.
/// Throws attnmap::Error (or std::exception from the file system) naming the problem; nothing is written then.
RenderResult render_image(const RenderContext& ctx, const Job& job);

}  // namespace attnmap
