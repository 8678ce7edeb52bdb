// render.hpp - rendering one image: decode, preprocess, forward, map, overlay, write its files.
#pragma once
#include <algorithm>
#include <cmath>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "maps/attention_maps.hpp"
#include "maps/evaluate.hpp"
#include "draw/colormap.hpp"
#include "draw/figures.hpp"
#include "maps/explain.hpp"
#include "maps/views.hpp"
#include "model/classify.hpp"
#include "io/image_io.hpp"
#include "draw/overlay.hpp"
#include "model/pos_embed.hpp"
#include "model/preprocess.hpp"
#include "checkpoint/weights.hpp"

namespace attnmap {

/// The kinds of file one image writes (engine/output_plan.hpp plans them and writes each). A new per-image kind
/// is a line here, the flag that asks for it (options_cli.cpp, adding it to RenderOptions::map_files) and its
/// plan line and writer (output_plan.cpp).
enum class OutputKind {
  MapPng,   ///< a view's map over the photo, NAME[.<tag>][.class-<label>].png, with the run's record (always)
  MapNpy,   ///< the same map as computed (--save-raw), NAME[...].npy
  Sidecar,  ///< the .npy's record, NAME[...].npy.json (with MapNpy)
  Figure,   ///< a figure of the image: NAME.panel.*, NAME.layers.*, NAME.heads.* in every --figure-format
  Explore,  ///< the image's explorer (--explore, engine/explore.hpp): NAME.explore/index.html and its files
};

/// Texts as the model's classes (issue 43; CLIP without a head; engine/text/zero_shot.hpp encodes them).
struct TextSpec {
  std::vector<std::string> texts;      ///< --text values, then --texts FILE's lines, in order (the classes)
  std::string texts_file;              ///< --texts FILE ("" not given), for the record
  std::vector<std::string> templates;  ///< --prompt: "{}" replaced by each text; several averaged (CLIP's recipe)
  std::string vocab;                   ///< --vocab FILE|FOLDER; "": the weights' folder's, else the bundled one
  bool truncate = false;               ///< --truncate-text: a text over the context cut as open_clip does
  /// --prompt with --labels FILE and no texts: the file's names are the texts (ModelSpec::labels_file)
  bool labels_as_texts = false;
  /// eval's --prompt without texts: the class names of eval's ground truth (labels.csv labels, item masks
  /// STEM.<class>.*, numbered file names NNNN_<class>) fill the template(s) and are the texts; eval puts them
  /// in `texts` before the model loads (engine/eval/eval_run.cpp). Unused by the other commands.
  bool truth_names = false;
  bool given() const { return !texts.empty() || labels_as_texts || truth_names; }
};

/// The model a run uses (issue 42's ModelSpec): where its weights come from and every setting that changes
/// its numbers. session.hpp's load_run_model reads it.
struct ModelSpec {
  std::string weights;              ///< -w: a file, a folder or a Hub name; empty: the bundled default
  ModelOverrides overrides;         ///< heads, eps, activation, pooling, mean/std... given (checkpoint/weights.hpp)
  Precision precision = Precision::F32;  ///< --precision: the products' arithmetic (ViTWeights::precision)
  std::optional<std::array<int, 2>> size;  ///< (width, height): model input size; position embeddings resampled
  std::optional<PosInterp> pos_interp;     ///< with size: how they are resampled; unset: the layout's default
  std::string labels_file;           ///< --labels FILE: the classifier's class names (checkpoint/labels.hpp)
  /// The run names classes (top-5, titles, --class, eval's accuracy): apply_class_names' note on assumed
  /// ImageNet-1k names is printed. explore and stats, which use no classifier, turn it off.
  bool names_classes = true;
  TextSpec text;                     ///< --text / --texts / --prompt / --vocab: texts as the classes (CLIP)
};

/// What a run shows of the model (issue 42's ViewRequest): which attention (views, layer, head, rollout,
/// query, class-specific explanation and its class) and how a map is drawn (colour map, scale, style).
/// engine/views_render.cpp resolves it against the model (make_views_context).
struct ViewRequest {
  std::optional<int> layer;          ///< unset: see requested_layer
  std::optional<HeadSelect> head;    ///< --head parsed (parse_head); unset: see requested_head
  bool rollout = false;              ///< draw attention rollout through layers 0..layer instead of one layer
  double discard = 0.0;              ///< rollout: fraction of the smallest fused entries zeroed per layer
  std::optional<float> threshold;    ///< DINO mask: keep the largest attentions holding this mass, in (0, 1]
  // Class-specific explanation maps (issue 19; engine/views_render.cpp, maps/explain.hpp).
  /// --explain chefer | gradcam | attn-grad as the class-specific view it names, without @L
  /// (parse_class_specific_view; its word is .written); unset: the attention views
  std::optional<ViewSpec> explain;
  std::optional<ClassSpec> class_spec;     ///< --class N | NAME | top1 | topK parsed (unset: top1)
  std::optional<int> gradcam_layer;        ///< --gradcam-layer, before resolving negatives (unset: -1)
  // Several views in one run (issue 17; engine/views_render.cpp).
  std::vector<ViewSpec> views;             ///< --views LIST parsed (maps/views.hpp parse_views); empty: the single view
  /// --query TOKEN / --column r<row>c<col> / --received: the token query of the single view, --layers all and
  /// the strips, parsed as written after a view's ':' (parse_token_query of "q=r7c3", "k=r7c3", "received");
  /// unset: the default row
  std::optional<TokenQuery> query;
  bool layers_all = false;                 ///< --layers all: L0/F .. L<depth-1>/F, F = --head (or the default)
  // How a map is drawn.
  Colormap colormap;                 ///< --colormap parsed (parse_colormap); its name is what records keep
  float alpha = 0.5f;
  Upsample upsample = Upsample::Bilinear;
  std::optional<ScaleSpec> scale;    ///< --scale; unset: map for NAME.png, figure for panels and strips
  Style style = Style::Overlay;      ///< --style
  bool alpha_by_value = false;       ///< --alpha-by-value
};

/// Which files and figures each image gets and how they are laid out (issue 42's OutputSpec); the output
/// plan (engine/output_plan.hpp) and the figures (render.cpp figure_options) read it.
struct OutputSpec {
  /// Whether `kind` is asked for beside each map's PNG (map_files).
  bool writes(OutputKind kind) const { return std::find(map_files.begin(), map_files.end(), kind) != map_files.end(); }
  std::string out_dir = "attnmap-out";
  std::vector<OutputKind> map_files;  ///< written per map beside its PNG, as asked: MapNpy (--save-raw)
  bool all_heads = false;            ///< with MapNpy: the .npy holds every head, (H, grid_h, grid_w)
  bool heads_grid = false;           ///< also write NAME.heads.*: one labelled tile per head + the fused map
                                     ///< (--strip heads; --heads-grid is its old name)
  // Figures (docs/figures.md): written in figure_formats, at dpi.
  bool panel = false;                ///< NAME.panel.*: photo | map alone | overlay, title, colour bar
  bool strip_layers = false;         ///< NAME.layers.*: the map at every block (heads fused by --head)
  /// NAME.png carries a legend strip under the photo (colour bar, range, contrast; draw/figures.hpp
  /// add_legend); --no-legend: the bare overlay. Never with --threshold (a mask has no colour scale).
  bool legend = true;
  std::optional<double> dpi;         ///< --dpi: pHYs of every PNG (none in NAME.png when unset), PDF/SVG page size
  std::vector<FigureFormat> figure_formats = {FigureFormat::Png};  ///< --figure-format of the figures
  std::optional<double> width_in;    ///< --width-in: panels and strips this many inches wide (FigureOptions)
  std::optional<int> strip_columns;  ///< --strip-columns: tiles per row of both strips (unset: layers
                                     ///< layer_strip_columns, heads ceil(sqrt(H + 1)))
  // Words the author chooses (issue 28; docs/figures.md "Words").
  std::optional<std::string> title;  ///< --title: the figures' title instead of the automatic one ("": none)
  int block_base = 0;                ///< --block-numbering: the number figures give the first block (0 or 1)
  bool notes = false;                ///< --notes: draw the explanatory notes into figures (else the terminal)
  // The explorer (issue 27; attnmap explore, render --explore; engine/explore.hpp).
  double explore_budget_mb = 8.0;          ///< --budget-mb: the page's data files at most this many MiB
  std::vector<int> explore_blocks;         ///< --explore-blocks: only these blocks' single heads (empty: as fit)
};

/// Everything `attnmap render` was asked to do, as the door made it (app/cli/request.cpp make_request; no
/// maths here): the model, the views and the outputs, and how the inputs are read. A function that needs one
/// part takes that part (a RenderOptions is each of them).
struct RenderOptions : ModelSpec, ViewRequest, OutputSpec {
  std::vector<std::string> inputs;  ///< files or folders
  ResizeMode resize = ResizeMode::Squash;  ///< how a photo becomes the model's input (model/preprocess.hpp)
  LoadOptions load;                 ///< how an input is decoded (pixel limit, EXIF orientation: io/image_io.hpp)
  bool quiet = false;
};

/// RenderOptions with legend off: for the commands that write no NAME.png (figure, stats, explore).
inline RenderOptions no_legend() {
  RenderOptions o;
  o.legend = false;
  return o;
}

/// Whether NAME.png gets its legend strip: asked (not --no-legend) and a heatmap (not --threshold's mask).
inline bool draws_legend(const RenderOptions& opt) { return opt.legend && !opt.threshold; }

/// One image to render: where it is read and the output path without extension (".png", ".npy" added).
struct Job {
  std::string input;
  std::string out_base;
};

/// Where the auxiliary views (after the user's) start in RenderContext::views.
struct AuxiliaryViews {
  size_t layers = 0;    ///< --strip layers: layers_n views, one per block (with --rollout: rollout 0..l)
  size_t layers_n = 0;
  size_t heads = 0;     ///< --strip heads / --all-heads: every head of the strips' block, their mean, the fusion
};

/// One colour bar a figure draws (issue 41): its scale and what of the maps drawn on it lies above its top
/// (draw's clip_stats; a bar with any gets the triangle and "+").
struct DrawnBar {
  Scale scale;
  ClipStats clip;
};

/// The bar of `maps` drawn on `s`: s with clip_max set when any of their values lies above s.vmax.
DrawnBar drawn_bar(const std::vector<const std::vector<float>*>& maps, const Scale& s);

/// What the colour bars of a run's images hide, tallied as the images are drawn (thread-safe): per unit, how
/// many images were drawn on a bar of it and how many of them clip more than kClipNoteShare of one bar's
/// cells (their overlays' legends, panels and strips), the largest share and value.
class ClipTally {
 public:
  /// One image's bars (every figure and overlay of it).
  void add_image(const std::vector<DrawnBar>& bars);
  /// With a fixed --scale VMIN,VMAX: one line per unit whose bar clipped past kClipNoteShare in some image
  /// ("{setting:scale} 0,0.05: the attention probability bar ... 3 of 4 images ...": the setting a reference
  /// of core/setting_ref.hpp, spelled by the caller); none otherwise (--scale run has
  /// its own note; figure and map scales end at the maps' largest value).
  std::vector<std::string> notes(const ViewRequest& opt) const;

 private:
  struct Unit {
    size_t images = 0, clipped = 0;
    double share = 0.0, data_max = 0.0, vmax = 0.0;
  };
  mutable std::mutex mu_;
  std::map<std::string, Unit> units_;
};

/// What is fixed for a whole run: the model and its views.
struct RenderContext {
  const ViTWeights* model = nullptr;
  const RenderOptions* opt = nullptr;
  int layer = 0;                  ///< --layer resolved, 0-based (or the config's default): the single view's
                                  ///< block, the strips' and attn-grad's
  HeadSelect head;                ///< --head resolved (or the config's default): the single view's fusion, the strips'
  const uint8_t* cmap = nullptr;  ///< 256x3 colour table
  std::string font_family;        ///< the label font (figure_font), checked once when a figure is asked for
  std::string font_file;          ///< $ATTNMAP_FONT when it chose the font (the manifest must not replace it)
  /// The run's settings record (provenance_text of make_provenance): stored in every PNG as tEXt `attnmap`
  /// and beside every .npy as NAME.npy.json; empty: nothing recorded.
  std::string provenance;
  ClassSpec classes;              ///< with a class-specific view: which class(es)
  /// The views of the run (maps/views.hpp): the user's (--views / --layers all, or the single view of
  /// --layer / --head / --rollout / --explain), then, not drawn as files of their own, the strips' and
  /// --all-heads' (aux).
  std::vector<ResolvedView> views;
  size_t user_views = 0;      ///< views[0..user_views) are the user's
  bool views_given = false;   ///< the user named the views (--views, --layers all): files NAME.<view>.png
  AuxiliaryViews aux;
  ViewSettings view_settings;
  /// The token query of the single view, --layers all and the strips (--query / --column / --received, or the
  /// one query every attention or rollout view of --views names): the strips follow the same token.
  TokenQuery query;
  /// --scale run: one scale per unit ("attention probability", "rollout mass", ...) over every map of the run,
  /// filled after the run's maps are computed and before any is drawn.
  std::map<std::string, Scale> run_scales;
  /// The run's tally of clipping bars (make_render_context makes it; copies share it; null: not tallied).
  std::shared_ptr<ClipTally> clip_tally;
  /// Set (one image's copy, engine/outputs.hpp image_outputs): its figures are drawn into this list
  /// (figure_options' FigureOptions::in_memory), not written.
  std::vector<FigureFile>* figures_in_memory = nullptr;
};

/// What rendering one image produced.
struct RenderResult {
  std::vector<std::string> outputs;  ///< files written, the overlay PNG first
  std::vector<float> map;            ///< (grid_h, grid_w) class-token map (or its rollout) as computed
  MapStats stats;                    ///< map_statistics of `map`
  std::vector<uint8_t> mask;         ///< (grid_h, grid_w) with threshold: 1 where the DINO mask keeps the patch
  std::vector<std::string> notes;    ///< per-image notes for the terminal (e.g. a flat map)
  /// With a classifier head: the 5 most probable classes (config label or "class i", softmax probability),
  /// most probable first; empty without a head.
  std::vector<std::pair<std::string, float>> top5;
  /// The terminal line after "INPUT -> " (empty: outputs.front()) and the lines under it: with --explain the
  /// method and class of the map ("NAME.png (chefer, class Bag 98.9%)"), with topK one line per class
  /// ("Bag 98.9% -> NAME.class-Bag.png").
  std::string shown;
  std::vector<std::string> shown_more;
};

/// The terminal's line for the files of an image its other lines do not name (`shown` and `shown_more`, or the
/// first output when `shown` is empty): "also wrote: out/cat.panel.png, out/cat.layers.png"; empty when every
/// output is named. The panel, the strips, the .npy files and the explorer are named this way.
std::string also_wrote_line(const std::vector<std::string>& outputs, const std::string& shown,
                            const std::vector<std::string>& shown_more);

/// A RenderResult note starting with this is printed as "attnmap: warning: INPUT: ..." (else as a note).
inline constexpr const char* kWarningNote = "warning: ";

/// Photos with a side under this many pixels get a warning: they are upsampled to the model's input (as
/// timm's and torchvision's transforms do, silently), so their map is the model's answer to a few flat colours.
inline constexpr int kSmallImageSide = 16;
/// "warning: the image is 1×1 pixels, upsampled to the model's 224×224 input: ..." for a photo with a side
/// under kSmallImageSide pixels; "" otherwise.
std::string small_image_warning(int width, int height, const HParams& hp);

/// The run's notes that figures no longer draw unless --notes asks (e.g. --scale map on a strip): one line each
/// for the terminal (settings named as core/setting_ref.hpp's references), said once per run; empty when --notes
/// draws them or no figure has them.
std::vector<std::string> undrawn_figure_notes(const RenderOptions& opt);

/// --act and --pool (empty: not given) into `ov`; throws attnmap::Error naming the flag for a bad value.
void apply_model_flags(const std::string& act, const std::string& pool, ModelOverrides& ov);

/// The block (before resolving negatives) and head fusion the options ask for. Unset --layer/--head take
/// the model's config default view (default_layer / default_head, else -1 and "mean") for the plain view,
/// and the paper's for --rollout: every block, heads averaged (Abnar & Zuidema 2020).
/// requested_head parses the config's default_head (the model's word, not an option). Throws attnmap::Error.
int requested_layer(const HParams& hp, const ViewRequest& opt);
HeadSelect requested_head(const HParams& hp, const ViewRequest& opt);

/// The requested view checked against the model: `layer` resolved to [0, depth), `head` (--head, or the
/// config's default parsed), its index checked against the model's heads (negative indices kept: they count
/// from the end). Throws
/// attnmap::Error for an out-of-range or malformed value; when the value is the weights' config default
/// (no --layer/--head), the message names that config entry and where it was read.
struct SelectedView {
  int layer = 0;
  HeadSelect head;
};
SelectedView select_view(const HParams& hp, const ViewRequest& opt);

/// Resolves the view (layer, head, colour map; the model's config defaults where options are unset), checks
/// it against the model, and checks the label font when a figure (panel, strip, heads grid) or a legend is
/// asked for. `opt` as the door made it (make_request: the options against each other, check_drawing_options,
/// are checked there, once). Throws attnmap::Error for an out-of-range layer/head/discard/threshold, a view
/// the model cannot give, an unknown name or a missing font.
RenderContext make_render_context(const ViTWeights& model, const RenderOptions& opt);

/// One map (grid_h, grid_w) over `photo` inside the box (x, y, w, h): a heatmap (min-max scaled; --scale
/// fixed bounds; --scale run the run's scale of `units`, default the single view's), or with --threshold
/// the DINO mask. Sets *flat for a constant heatmap; fills *mask. `marked`: a patch to outline (the query's).
Image draw_view(const Image& photo, int bx, int by, int bw, int bh, const std::vector<float>& map,
                const RenderContext& ctx, bool* flat, std::vector<uint8_t>* mask, const std::string& units = "",
                int marked = -1);

/// Renders one image: compute_job_views then draw_job_views. Its files: each of the user's views' maps as
/// NAME.png (one view) or NAME.<tag>.png (per class NAME[.<tag>].class-<label>.png with --class topK, K >= 2),
/// with --save-raw its .npy, and the figures (".heads.*" with heads_grid, ".layers.*" with strip_layers,
/// ".panel.*" with panel); files written atomically, the overlays last. With ctx.provenance the PNGs carry it
/// as tEXt `attnmap` (and the map's statistics and top-5 as tEXt `attnmap:stats`), the figures' PDFs as their
/// Subject and SVGs as <metadata>, and each .npy gets the sidecar NAME.npy.json (removed before the .npy is
/// replaced and written after it, so a sidecar never describes a .npy of other settings). A map is drawn as a
/// heatmap, or with threshold as the DINO mask (threshold_mask of the map) filled and outlined.
/// Throws attnmap::Error (or std::exception from the file system) naming the problem.
RenderResult render_image(const RenderContext& ctx, const Job& job);

// ---- Parts shared by the render files (render.cpp, views_render.cpp) ----

/// The scale of a figure that shows `maps` in `units`: --scale (default figure) over them, fixed bounds, or
/// with --scale run ctx.run_scales[units] (when filled).
Scale figure_scale(const RenderContext& ctx, const std::vector<const std::vector<float>*>& maps, const std::string& units);
/// One map alone (NAME.png, a panel row): map and figure both mean its own min-max.
Scale single_scale(const RenderContext& ctx, const std::vector<float>& map, const std::string& units);
StyleOptions style_of(const RenderContext& ctx);
/// The figures' options; their record is the image's (ctx.provenance) with "colour_bars": one entry per bar
/// drawn ({units, vmin, vmax, data_max, clipped, clipped_share}: results, which same_settings leaves out).
FigureOptions figure_options(const RenderContext& ctx, const std::vector<DrawnBar>& bars = {});
/// The record `record` (a provenance_text) with "colour_bars" for `bars`; `record` itself when it is empty.
std::string with_colour_bars(const std::string& record, const std::vector<DrawnBar>& bars);
/// "chelsea.png - timm ViT, 4 blocks x 4 heads, 224x224 input (14x14 patches of 16 px) - top-1 Coat 63.2%"
/// `query_rows`: some map of the figure is built from attention's query rows (reads_query_rows); without a
/// class token the title then says whose rows they are.
/// `num_classes`: the head's classes; a top-1 probability under min(2 / C, 1 / C + 0.1) (near the uniform
/// 1 / C, as an untrained head gives) is written "no confident class (top-1 0.1%, uniform 0.1%)" instead.
/// `zero_shot`: the classes are CLIP's texts: "zero-shot top-1 of 3 texts: a dog 84.0%"; `rule`
/// ScoreRule::sigmoid (SigLIP): "zero-shot top-1 of 3 texts (sigmoid, each text alone): a dog 12.0%".
std::string figure_title(const Job& job, const HParams& hp, const std::vector<std::pair<std::string, float>>& top5,
                         bool query_rows = true, int num_classes = 0, bool zero_shot = false,
                         ScoreRule rule = ScoreRule::softmax);
/// "Coat 63.2%", or "no confident class (top-1 0.11%, uniform 0.1%)" when the top-1 probability is under
/// min(2 / num_classes, 1 / num_classes + 0.1); "" without classes. A sigmoid's scores (`rule`; SigLIP) are
/// each class's own, with no uniform share to compare with: always "a dog 12.0%".
std::string top1_phrase(const std::vector<std::pair<std::string, float>>& top5, int num_classes,
                        ScoreRule rule = ScoreRule::softmax);
/// NAME.heads.*: one tile per head (head_maps, H x (grid_h, grid_w)) of block ctx.layer plus the fused `map`
/// (or, for a single --head, `mean_map`), one scale, a colour bar. Returns the paths written; `bars` (when
/// given) gets the colour bar drawn (write_layers alike).
std::vector<std::string> write_heads(const RenderContext& ctx, const Job& job, const Image& photo, const PhotoBox& box,
                                     const std::vector<float>& mean_map, const std::vector<std::vector<float>>& head_maps,
                                     const std::vector<float>& map, const std::string& title, int marked = -1,
                                     std::vector<DrawnBar>* bars = nullptr);
/// NAME.layers.*: the map at every block (layer_maps, depth x (grid_h, grid_w)), one row, one scale.
/// `marked` (both strips): the query patch each tile outlines, -1 for none.
std::vector<std::string> write_layers(const RenderContext& ctx, const Job& job, const Image& photo, const PhotoBox& box,
                                      const std::vector<std::vector<float>>& layer_maps, const std::string& title,
                                      int marked = -1, std::vector<DrawnBar>* bars = nullptr);

// ---- The views of a run (engine/views_render.cpp) ----

/// Whether one of the user's views (ctx.views[0..user_views)) satisfies `pred`.
bool any_user_view(const RenderContext& ctx, bool (*pred)(const ResolvedView&));

/// The token query every attention or rollout view of the user's names (the default row when none names one);
/// nullopt when they name different ones or the user has no such view.
std::optional<TokenQuery> shared_user_query(const RenderContext& ctx);
/// --explore-blocks resolved against `depth` (negative from the end), in the order given. Throws attnmap::Error
/// naming the flag for a block out of range or named twice.
std::vector<int> explore_blocks(const OutputSpec& opt, int depth);
/// Fills ctx.views: --views / --layers all, or the single view of --layer / --head / --rollout / --explain,
/// then the strips' and --all-heads' views; ctx.classes for a class-specific view. Checked against the model
/// and the other options: throws attnmap::Error (exit 2) for a bad view name, a class-specific view without
/// a head, or options that do not apply to the views (--discard without a rollout, --class without a
/// class-specific view, --layer / --head beside named views when nothing uses them, ...).
void make_views_context(RenderContext& ctx, const ViTWeights& model, const RenderOptions& opt);

/// One image's maps of every view (views mode), kept between computing and drawing (--scale run).
struct ComputedViews {
  std::vector<ViewMap> maps;
  std::vector<std::pair<std::string, float>> top5;
  std::vector<double> probs;        ///< the logits' probabilities by model.zero_shot.rule (empty without a head)
  std::vector<int> classes;         ///< the classes the class-specific views explain, most probable first
  std::vector<std::string> notes;   ///< the decoder's
  std::optional<Image> photo;       ///< kept for drawing unless --scale run (then read again: photos are big)
  Box box;                          ///< the model input's box on the photo (preprocess)
  std::string input_sha256;         ///< SHA-256 of the input's bytes as decoded (the image's record: input_sha256)
};
/// Loads and preprocesses job.input and computes every view's maps (maps/views.hpp compute_views).
ComputedViews compute_job_views(const RenderContext& ctx, const Job& job);
/// The same from a photo already decoded (a program embedding attnmap: the Python module's arrays);
/// `input_sha256` goes into ComputedViews::input_sha256 (its record's input_sha256).
ComputedViews compute_photo_views(const RenderContext& ctx, Image photo, std::string input_sha256);
/// --scale run's scale of one unit and what the run's note says about it.
struct RunScale {
  Scale scale;          ///< robust_scale_over the run's maps of the unit (draw/scale.hpp)
  size_t maps = 0;      ///< maps of the unit (every image's views, the strips' included)
  size_t dim = 0;       ///< of them, peaking below kDimPeakFraction of the scale (drawn in its bottom colours)
  size_t values = 0;    ///< finite values of those maps
  size_t above = 0;     ///< of them, above scale.vmax (drawn in the top colour)
  double data_max = -INFINITY;  ///< the largest value (scale.vmax when nothing is clipped)
};
/// One RunScale per unit over every map of `computed` (each image's user and auxiliary views).
std::map<std::string, RunScale> run_scales_over(const RenderContext& ctx,
                                                const std::vector<const ComputedViews*>& computed);
/// Draws and writes every file of one image from its computed maps (the photo read again).
RenderResult draw_job_views(const RenderContext& ctx, const Job& job, const ComputedViews& cv);

/// The model-free checks of render's and figure's drawing options, written once: --alpha in [0, 1],
/// --alpha-by-value with --style overlay, --dpi in [1, 100000], --discard in [0, 1], --threshold in (0, 1]
/// and not with the heatmap-only figure options, --all-heads with --save-raw and not with --rollout,
/// --pos-interp with --size, --max-pixels >= 1, at least one figure format. Throws attnmap::Error naming the
/// setting ({setting:id}). --title, --block-numbering and --notes need a figure (--panel, --strip).
void check_drawing_options(const RenderOptions& ro);

}  // namespace attnmap
