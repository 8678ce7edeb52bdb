// eval_cmd.hpp - `attnmap eval`: how well a model's attention maps localise the object, measured against
// ground-truth masks (pointing game, energy-in-mask) for every layer and for rollout, plus top-1 accuracy.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "maps/attention_maps.hpp"
#include "maps/explain.hpp"
#include "maps/faithfulness.hpp"
#include "model/vit_backward.hpp"
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
  std::optional<PerturbMode> perturb;  ///< --perturb drop|zero: the perturbation test; unset: not run
  int perturb_seeds = 3;               ///< random removal orders averaged for the random baseline
  bool sanity = false;                 ///< --sanity: cascading model randomisation
  double sanity_flag = 0.9;            ///< a view whose mean Spearman stays above this with every block
                                       ///< randomised is flagged
};

/// One view's score on one image.
struct ViewScore {
  bool hit = false;   ///< pointing game
  double energy = 0;  ///< energy-in-mask, [0, 1]
};

/// One item of a several-item image: its class and mask (masks/STEM.<class>.png).
struct ItemMask {
  int cls = 0;
  std::string path;
};

/// Class-specific pointing of one item: the map asked for the item's class.
struct ItemScore {
  int cls = 0;
  std::string mask;
  double area_share = 0;         ///< the item's mask: a random map's expected pointing
  std::vector<uint8_t> asked;    ///< per view: the maximum lies on this item (with --tolerance)
  std::vector<uint8_t> other;    ///< per view: the maximum lies on another item of the image instead
  bool centre_asked = false, centre_other = false;  ///< the centre prior (class-agnostic)
};

/// The perturbation test of one image (Chefer et al. 2021, sec. 4).
struct PerturbEval {
  int target = 0;  ///< the class followed: the model's top-1 on the whole image
  std::vector<std::vector<double>> positive, negative;  ///< per view: curve (10) removing most / least first
  std::vector<double> random;   ///< mean curve (10) over the random orders
  long forwards = 0;            ///< forward passes run
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
  ViewScore centre;               ///< the centre prior (centre_prior_map) scored as a view
  double random_pointing = 0;     ///< a random map's expected pointing (random_pointing_expectation)
  std::vector<ItemScore> items;   ///< class-specific pointing; empty unless >= 2 items of different classes
  std::optional<PerturbEval> perturbation;       ///< with --perturb and a head
  std::vector<std::vector<double>> sanity;       ///< with --sanity: [k - 1][view] Spearman, k top blocks
  double perturb_secs = 0, sanity_secs = 0;      ///< wall-clock time taken by each
  double perturb_cpu = 0;                         ///< processor time of the perturbation (every thread)
};

/// What a view's map producer is given for one image. A class-specific method (gradients, relevance)
/// explains `target`; a raw-attention view ignores it.
struct ViewInput {
  const ViTWeights& model;    ///< the model (for --sanity a randomised copy)
  const ModelInput& in;       ///< the normalised input the model saw
  const ForwardResult& fwd;   ///< its forward pass: keep_full, to the logits when the model has a head
  int target = -1;            ///< the class asked for; -1 when the model has no head
  /// The same forward pass with the activations the backward needs (vit_forward_tape), made once per image
  /// and model when a class-specific view is scored; null: such a view makes its own.
  const ForwardTape* tape = nullptr;
};

/// One scored view: a name and the function that makes its (grid_h, grid_w) non-negative map. Views are a
/// list of these, so other explanation methods plug in as more entries.
struct EvalView {
  std::string name;             ///< "L3/mean", "L3/h1", "rollout", "chefer", "gradcam", "attn-grad"
  bool class_specific = false;  ///< the map depends on ViewInput::target (scored per asked class)
  std::function<std::vector<float>(const ViewInput&)> map;
};

/// What is fixed for a whole run.
struct EvalContext {
  const ViTWeights* model = nullptr;
  const EvalOptions* opt = nullptr;
  std::vector<EvalView>
      views;            ///< every layer x fusion, the selected view, rollout (mean fusion, all layers), then
                        ///< the explanation methods (with a classifier head)
  size_t selected = 0;  ///< index in `views` of the selected view (--layer/--head or config default)
  /// The explanation views' settings (maps/explain.hpp): attn-grad at the selected view's block, gradcam
  /// at --gradcam-layer (default the last block); unset when the model has no classifier head (or is the
  /// seed layout), and the explanation views are then left out.
  std::optional<ExplainRequest> explain;
  /// With --sanity: randomised[k - 1] has its top k blocks re-initialised (randomise_blocks), k = 1..depth.
  std::vector<ViTWeights> randomised;
};

/// Resolves the views for `model`: for each layer 0..depth-1 and each fusion in opt.fusions "L<l>/<fusion>"
/// (a head index as "h<i>"), the selected view (--layer/--head, else config default_layer/default_head,
/// else the last layer / mean; with --rollout [--discard] the rollout through that layer with that fusion)
/// added when not already among them, "rollout" (Abnar & Zuidema 2020,
/// mean over heads, through every layer), and with a classifier head the class-specific "chefer" (Chefer et
/// al. 2021), "gradcam" (Selvaraju et al. 2017, block opt.view.gradcam_layer's norm1, default -1) and
/// "attn-grad" (at the selected view's block), each as an EvalView map producer; with opt.sanity the
/// randomised copies of the model. Throws attnmap::Error for a layer, head or --gradcam-layer out of range.
EvalContext make_eval_context(const ViTWeights& model, const EvalOptions& opt);

/// Evaluates one image against its mask file: one forward pass (full attention kept; to the end with a
/// classifier head), each view's (grid_h, grid_w) map placed on the photo (map_to_photo with opt upsample
/// and resize box), then pointing_game and energy_in_mask, and the same for the centre prior. With `items`
/// (two or more of different classes) and a head, class-specific pointing per item; with opt.perturb the
/// perturbation curves; with opt.sanity the rank correlations with ctx.randomised. `truth` is the
/// ground-truth class, if known. Throws attnmap::Error naming the file for an unreadable image or mask, or
/// a mask of another size.
ImageEval evaluate_image(const EvalContext& ctx, const std::string& input, const std::string& mask_path,
                         const std::vector<ItemMask>& items, std::optional<int> truth);

/// Runs `attnmap eval`: prints per-image lines and a summary table per view (pointing game, energy-in-mask,
/// ratio to the uniform baseline, top-1 accuracy), writes the JSON report with opt.json_out. Returns 0 when
/// every image was evaluated, 1 when some failed (each printed with its reason) or none was found. Throws
/// attnmap::Error for unusable weights or options (the caller exits with status 2).
int run_eval(const EvalOptions& opt);

}  // namespace attnmap
