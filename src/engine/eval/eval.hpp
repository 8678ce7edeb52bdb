// eval.hpp - eval (`attnmap eval`, Python's Model.evaluate): how well a model's attention maps localise the
// object, measured against ground-truth masks (pointing game, energy-in-mask) for every layer and for rollout,
// plus top-1 accuracy. The scored maps are views of the one view engine (maps/views.hpp). engine/eval/:
// eval_run.cpp (the views, the run), eval_inputs.cpp (masks, class truth), eval_image.cpp (one image),
// eval_summary.cpp (the means), eval_report.cpp (tables, JSON); the command line's main is
// app/commands/eval_cmd.cpp (run_eval).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/batch_hooks.hpp"
#include "engine/render.hpp"
#include "maps/faithfulness.hpp"
#include "maps/views.hpp"

namespace attnmap {

/// Everything `attnmap eval` was asked to do (filled by the CLI).
struct EvalOptions {
  /// The render-like part: inputs, weights, layer/head (the selected view), --views (the scored views, render's
  /// grammar; empty: the default list), upsample, resize, overrides, quiet, load limits. Output folder,
  /// colour map and alpha are not used.
  RenderOptions view;
  std::string masks_dir;  ///< folder of masks named like the images (same file stem)
  std::string json_out;   ///< write the JSON report here (atomically); empty: none
  int tolerance_px = 0;   ///< pointing-game tolerance in image pixels (0: the maximum pixel itself)
  /// --fusions parsed (parse_head of each item): head fusions scored at every layer (mean | max | min |
  /// index); empty: not given (mean). Refused beside --views.
  std::vector<HeadSelect> fusions;
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
  double peak = 0;    ///< peak_to_mean of the view's patch-grid map (1: flat; 0: no peak to speak of)
  /// Why this view has no score on this image (map_score_undefined: "the map sums to 0"; a class-specific
  /// view only); empty: scored. An undefined score is left out of the view's means.
  std::string undefined;
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
  /// per view: why the map for this item's class has no score (map_score_undefined; asked and other are then
  /// 0 and left out of the means); empty: scored
  std::vector<std::string> undefined;
  bool centre_asked = false, centre_other = false;  ///< the centre prior (class-agnostic)
};

/// The perturbation test of one image (Chefer et al. 2021, sec. 4).
struct PerturbEval {
  int target = 0;  ///< the class followed: the model's top-1 on the whole image
  /// per view: curve (10) removing most / least relevant first; empty for a view undefined on the image
  std::vector<std::vector<double>> positive, negative;
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
  ViewScore brightness;           ///< the brightness baseline (brightness_map: the photo's luma) scored as a view
  std::vector<ItemScore> items;   ///< class-specific pointing; empty unless >= 2 items of different classes
  std::optional<PerturbEval> perturbation;       ///< with --perturb and a head
  /// with --sanity: [k - 1][view] Spearman, k top blocks randomised; NaN for a view undefined on the image
  std::vector<std::vector<double>> sanity;
  double perturb_secs = 0, sanity_secs = 0;      ///< wall-clock time taken by each
  double perturb_cpu = 0;                         ///< processor time of the perturbation (every thread)
};

/// What is fixed for a whole run.
struct EvalContext {
  const ViTWeights* model = nullptr;
  const EvalOptions* opt = nullptr;
  /// The scored views (maps/views.hpp), each map computed by view_map. Without --views: every layer x
  /// fusion, the selected view, rollout (mean fusion, every block), then with a classifier head chefer,
  /// gradcam and attn-grad; with --views: that list.
  std::vector<ResolvedView> views;
  size_t selected = 0;  ///< index in `views` of the selected view (--layer/--head, config default; --views: the first)
  /// The views' settings: gradcam's block (--gradcam-layer, default the last), attn-grad's (the selected
  /// view's block: --layer or the config's default), rollout's discard (with --views: --discard).
  ViewSettings settings;
  bool class_specific = false;  ///< some view is class-specific: one taped forward pass per image and model
  bool keep_full = false;       ///< some view is a rollout: the forward passes keep the full matrices
  /// With --sanity: randomised[k - 1] has its top k blocks re-initialised (randomise_blocks), k = 1..depth.
  std::vector<ViTWeights> randomised;
};

/// Resolves the views for `model` (resolve_views). Without opt.view.views: for each layer 0..depth-1 and
/// each fusion in opt.fusions (default mean) "L<l>/<fusion>", the selected view (--layer/--head, else
/// config default_layer/default_head, else the last layer / mean; with --rollout [--discard] "rollout@L<l>"
/// through that layer with that fusion and its own discard) added when not already among them, "rollout"
/// (Abnar & Zuidema 2020, mean over heads, every block), and with a classifier head the class-specific
/// "chefer", "gradcam" (at --gradcam-layer, default -1) and "attn-grad" (at the selected view's block). With
/// opt.view.views: that list (render's grammar; "photo" refused), the first view selected; --fusions,
/// --rollout and --head are refused beside it, and --layer, --discard, --gradcam-layer when no view uses
/// them. With opt.sanity the randomised copies of the model. Throws attnmap::Error naming the option for a
/// layer, head or view out of range or malformed.
EvalContext make_eval_context(const ViTWeights& model, const EvalOptions& opt);

/// Evaluates one image against its mask file: one forward pass (to the end with a classifier head; the full
/// matrices kept for a rollout view; a taped pass for the class-specific views, which explain the top-1),
/// each view's (grid_h, grid_w) map (view_map) placed on the photo (map_to_photo with opt upsample and resize
/// box), then pointing_game and energy_in_mask, and the same for the centre prior. A class-specific map that
/// has no score (map_score_undefined) leaves that view undefined on the image (ViewScore::undefined) and out
/// of the other passes; the image is still scored on every other view. With `items` (two or more of
/// different classes) and a head, class-specific pointing per item; with opt.perturb the perturbation
/// curves; with opt.sanity the rank correlations with ctx.randomised. `truth` is the ground-truth class, if
/// known. Throws attnmap::Error naming the file for an unreadable image or mask, or a mask of another size.
ImageEval evaluate_image(const EvalContext& ctx, const std::string& input, const std::string& mask_path,
                         const std::vector<ItemMask>& items, std::optional<int> truth);

/// eval's report in memory (issue 42).
struct EvalResult {
  nlohmann::ordered_json report;  ///< the JSON report, as --json writes it (written too when opt.json_out is set)
  std::string text;               ///< what the command prints on standard output: per-image lines, the tables
  int status = 0;                 ///< run_eval's exit status: 0, or 1 when an image failed or none was found
};

/// Runs eval: per-image lines and a summary table per view (pointing game, energy-in-mask, ratio to the
/// uniform baseline, top-1 accuracy; a view undefined on some images says so, with one note line for the run),
/// the JSON report (written with opt.json_out). Its text goes through hooks.on_line, settings named as
/// {setting:id} (LineStream::Out: the per-image lines and the tables, also kept in EvalResult::text, spelled
/// with spelled_settings; Err: notes and errors, each image's as it ends); when hooks.model is set, that
/// model (asked for with the backward pass; opt.view.weights only names it in the report). The command line's
/// run_eval is eval_report(opt, terminal_hooks()). Throws attnmap::Error for unusable weights or options.
EvalResult eval_report(const EvalOptions& opt, const BatchHooks& hooks);

}  // namespace attnmap
