// eval_cmd.hpp - `attnmap eval`: how well a model's attention maps localise the object, measured against
// ground-truth masks (pointing game, energy-in-mask) for every layer and for rollout, plus top-1 accuracy.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "maps/attention_maps.hpp"
#include "app/render.hpp"

namespace attnmap {

/// Everything `attnmap eval` was asked to do (filled by the CLI).
struct EvalOptions {
  /// The render-like part: inputs, weights, layer/head (the selected view), upsample, resize, overrides,
  /// quiet, load limits. Output folder, colour map and alpha are not used.
  RenderOptions view;
  std::string masks_dir;  ///< folder of masks named like the images (same file stem)
  std::string json_out;   ///< write the JSON report here (atomically); empty: none
  int tolerance_px = 0;   ///< pointing-game tolerance in image pixels (0: the maximum pixel itself)
  std::vector<std::string> fusions{"mean"};  ///< head fusions scored at every layer: mean | max | min | index
};

/// One view's score on one image.
struct ViewScore {
  bool hit = false;   ///< pointing game
  double energy = 0;  ///< energy-in-mask, [0, 1]
};

/// What evaluating one image produced.
struct ImageEval {
  std::string input, mask;
  double area_share = 0;         ///< mask_area_share: the uniform map's energy
  std::vector<ViewScore> views;  ///< in the order of EvalContext::views
  std::optional<int> truth;      ///< ground-truth class index, when known
  std::optional<int> predicted;  ///< argmax of the logits, with a head
  std::vector<std::pair<std::string, float>> top5;
  std::vector<std::string> notes;
};

/// One scored view: a layer with a head fusion, or attention rollout.
struct EvalView {
  std::string name;  ///< "L3/mean", "L3/h1", "rollout"
  int layer = 0;     ///< 0-based; for rollout the last layer multiplied in
  HeadSelect head;
  bool rollout = false;
  double discard = 0.0;  ///< rollout: --discard fraction
};

/// What is fixed for a whole run.
struct EvalContext {
  const ViTWeights* model = nullptr;
  const EvalOptions* opt = nullptr;
  std::vector<EvalView>
      views;            ///< every layer x fusion, the selected view, rollout (mean fusion, all layers)
  size_t selected = 0;  ///< index in `views` of the selected view (--layer/--head or config default)
};

/// Resolves the views for `model`: for each layer 0..depth-1 and each fusion in opt.fusions "L<l>/<fusion>"
/// (a head index as "h<i>"), the selected view (--layer/--head, else config default_layer/default_head,
/// else the last layer / mean; with --rollout [--discard] the rollout through that layer with that fusion)
/// added when not already among them, and "rollout" (Abnar & Zuidema 2020,
/// mean over heads, through every layer). Throws attnmap::Error for a layer or head out of range.
EvalContext make_eval_context(const ViTWeights& model, const EvalOptions& opt);

/// Evaluates one image against its mask file: one forward pass (full attention kept; to the end with a
/// classifier head), each view's (grid_h, grid_w) map placed on the photo (map_to_photo with opt upsample
/// and resize box), then pointing_game and energy_in_mask. `truth` is the ground-truth class, if known.
/// Throws attnmap::Error naming the file for an unreadable image or mask, or a mask of another size.
ImageEval evaluate_image(const EvalContext& ctx, const std::string& input, const std::string& mask_path,
                         std::optional<int> truth);

/// Runs `attnmap eval`: prints per-image lines and a summary table per view (pointing game, energy-in-mask,
/// ratio to the uniform baseline, top-1 accuracy), writes the JSON report with opt.json_out. Returns 0 when
/// every image was evaluated, 1 when some failed (each printed with its reason) or none was found. Throws
/// attnmap::Error for unusable weights or options (the caller exits with status 2).
int run_eval(const EvalOptions& opt);

}  // namespace attnmap
