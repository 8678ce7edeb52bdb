// options_cli.cpp - the option tables of render, eval and inspect, and their parsing and checking into the
// checked option structs (the options layer, options.hpp; figure's table is in figure_cmd.cpp).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <sstream>

#include "app/cli/cli_words.hpp"
#include "app/engine/explore.hpp"
#include "app/cli/options.hpp"
#include "app/engine/walk.hpp"
#include "draw/colormap.hpp"
#include "maps/explain.hpp"
#include "model/pos_embed.hpp"

namespace attnmap {

namespace {

const char* const kPosInterpHelp =
    "with --size: resample the position embeddings as timm | timm-legacy | dino | hf | hf-legacy | torchvision "
    "does (default: what the checkpoint's layout implies; attnmap inspect shows it)";

const char* const kLabelsHelp =
    "the classifier's class names: a file with one name per line, a JSON list, or a JSON object {\"0\": \"tench\", "
    "...} (a Hugging Face config's id2label); one name per class (default: the weights' config, else ImageNet-1k's "
    "for a 1000-class head)";

// --key, and --act and --pool: the settings a checkpoint cannot hold (render, eval, inspect).
void add_model_flags(CLI::App* cmd, CliArgs& a) {
  cmd->add_option("--key", a.key_s, "PyTorch checkpoint: the entry holding the state dict, e.g. teacher or state_dict/model (default: found by the usual keys)");
  cmd->add_option("--act", a.act_s, "the MLP activation gelu | gelu-tanh | quickgelu, for checkpoints that cannot say it (OpenAI CLIP / OpenCLIP, timm CLIP without its config.json)");
  cmd->add_option("--pool", a.pool_s, "what the classifier reads: cls | mean | mean-all | map, for checkpoints that cannot say it (vit-pytorch before 2025-11)");
}

}  // namespace

void add_model_input_options(CLI::App* cmd, ModelInputArgs& a) {
  cmd->add_option("-w,--weights", a.weights, "weights, as for render; default: the bundled weights/default.json");
  cmd->add_option("--key", a.key, "PyTorch checkpoint: the entry holding the state dict, as for render");
  cmd->add_option("--heads", a.heads, "number of attention heads, when the weights do not say");
  cmd->add_option("--act", a.act, "the MLP activation gelu | gelu-tanh | quickgelu, as for render");
  cmd->add_option("--pool", a.pool, "what the classifier reads: cls | mean | mean-all | map, as for render");
  cmd->add_option("--size", a.size, "model input size S or W,H in pixels, as for render");
  cmd->add_option("--pos-interp", a.pos_interp, "with --size: how the position embeddings are resampled, as for render");
  cmd->add_option("--resize", a.resize, "squash | crop (as for render)")->capture_default_str();
  cmd->add_option("--mean", a.mean, "R,G,B normalisation mean (overrides the weights' config)");
  cmd->add_option("--std", a.std, "R,G,B normalisation std (overrides the weights' config)");
  cmd->add_option("--precision", a.precision, "fp32 | bf16: the products' arithmetic, as for render");
}

namespace {

// --precision's value: fp32 (also when not given) or bf16.
Precision parse_precision_option(const std::string& flag, const std::string& v) {
  if (v.empty() || v == "fp32") return Precision::F32;
  if (v == "bf16") return Precision::BF16;
  throw Error(flag + " expects fp32 or bf16, found '" + v + "'");
}

}  // namespace

void apply_model_input(const ModelInputArgs& a, RenderOptions& ro) {
  ro.weights = a.weights;
  ro.resize = parse_resize_option("--resize", a.resize);
  if (!a.heads.empty()) ro.overrides.num_heads = checked_heads(parse_int_option("--heads", a.heads));
  if (!a.key.empty()) ro.overrides.key = a.key;
  apply_model_flags(a.act, a.pool, ro.overrides);
  if (!a.size.empty()) ro.size = parse_size_option("--size", a.size);
  if (!a.pos_interp.empty()) ro.pos_interp = with_flag("--pos-interp", [&] { return parse_pos_interp(a.pos_interp); });
  if (!a.mean.empty()) ro.overrides.mean = parse_rgb_option("--mean", a.mean);
  if (!a.std.empty()) ro.overrides.std = parse_rgb_option("--std", a.std, true);
  ro.precision = parse_precision_option("--precision", a.precision);
}

namespace {

// render's token-query flags (issue 27): the line of attention the single view, --layers all and the strips read.
void add_query_options(CLI::App* render, CliArgs& a) {
  render->add_option("--query", a.query_s,
                     "the row of this query token instead of the class token's: r<row>c<col> (a patch of the grid, "
                     "0-based), x<x>y<y> (the patch under that photo pixel), cls, dist or reg<k>; for the single view, "
                     "--layers all and the strips (in --views: L5/h3:q=r7c3)");
  render->add_option("--column", a.column_s,
                     "r<row>c<col>: that key patch's column instead of a row - the attention each query patch pays to it "
                     "(in --views: L5/h3:k=r7c3)");
  render->add_flag("--received", a.received,
                   "the attention each patch receives, averaged over every query token (column means; in --views: "
                   "L5/h3:received)");
}

// render's figure sizes (docs/figures.md): --dpi, --width-in, --strip-columns.
void add_figure_size_options(CLI::App* render, CliArgs& a) {
  render->add_option("--dpi", a.dpi_s, "pixels per inch written into every PNG (pHYs) and the page size of PDF/SVG "
                                       "figures (default: none in NAME.png, 300 in figures)");
  render->add_option("--width-in", a.width_in_s, "the panel's and strips' width in inches: PDF/SVG pages this wide, "
                                                 "PNGs width x --dpi pixels, text 8.5 pt (default: PNGs at the "
                                                 "photo's pixels, PDF/SVG panels 3.5 in, strips 6.5 in)");
  render->add_option("--strip-columns", a.strip_columns_s, "tiles per row of --strip layers / heads (default: "
                                                           "layers at most 6 per row, heads ceil(sqrt(heads + 1)))");
  // Words the author chooses (issue 28).
  render->add_option("--title", a.title_s, "the title of the panel and strips instead of the automatic one (file, "
                                           "model, top-1 class); --title '' for none");
  render->add_option("--block-numbering", a.block_numbering_s, "the number figures give the first block: 0 (default, "
                                                               "as --layer and the view names) or 1 (block 1 .. depth, as "
                                                               "papers often count)");
  render->add_flag("--notes", a.ro.notes, "draw the explanatory notes (e.g. --scale map's) into the figures; by "
                                          "default they are printed on the terminal only");
}

// render's outputs of the whole run: the manifest, resuming, the contact sheet, the gallery, progress lines.
void add_run_output_options(CLI::App* render, BatchOptions& bo) {
  render->add_option("--manifest", bo.manifest,
                     "write a header line with the run's settings, then one JSON line per input (status, outputs, map "
                     "statistics); an earlier manifest there is read back by --skip-existing");
  render->add_flag("--skip-existing", bo.skip_existing,
                   "skip images whose outputs already exist and were made with the same settings (resume a run)");
  render->add_option("--contact-sheet", bo.contact_sheet,
                     "after the run: every input's overlay in a labelled grid (file name, top-1 class, peak value) in "
                     "FILE.png; pages FILE-1.png, FILE-2.png ... past 8000 pixels; failed inputs as grey tiles");
  render->add_option("--sheet-columns", bo.sheet_columns, "thumbnails per row of the contact sheet")->capture_default_str();
  render->add_option("--gallery", bo.gallery,
                     "after the run: DIR/index.html, a static page of every input (thumbnail linked to its outputs, "
                     "status or error, the manifest's statistics; sortable, filterable) and DIR/thumbs/");
  render->add_option("--progress-every", bo.progress_every,
                     "when standard error is not a terminal: a progress line per this many images (default: auto)");
}

// attnmap render: its option table.
CLI::App* add_render_options(CLI::App& app, CliArgs& a) {
  RenderOptions& ro = a.ro;
  BatchOptions& bo = a.bo;
  CLI::App* render = app.add_subcommand("render", "render class-token attention heatmaps over images");
  render->add_option("inputs", ro.inputs, "image files or folders (folders are walked recursively, sorted)")
      ->required();
  render->add_option("-w,--weights", ro.weights, "weights file (attnmap JSON, safetensors or a torch.save .pth/.pt/.bin; timm, DINOv2, DeiT, Hugging Face or torchvision names), a sharded model.safetensors.index.json or a Hugging Face model folder; default: the bundled weights/default.json");
  render->add_option("-o,--out", ro.out_dir, "output folder, created if missing")->capture_default_str();
  render->add_option("--layer", a.layer_s, "encoder block, 0-based; negative counts from the end, last = -1 (default: the weights' config default_layer, else the last; with --rollout the last)");
  render->add_option("--head", a.head_s, "a head index (negative counts from the end), or mean | max | min over heads (default: the weights' config default_head, else mean; with --rollout mean)");
  std::string cmaps;
  for (const auto& n : colormap_names()) cmaps += (cmaps.empty() ? "" : ", ") + n;
  render->add_option("--colormap", ro.colormap, "colour map: " + cmaps)->capture_default_str();
  render->add_option("--alpha", ro.alpha, "opacity of the heatmap over the photo, 0..1")->capture_default_str();
  render->add_option("--upsample", a.upsample_s, "nearest | bilinear | bicubic")->capture_default_str();
  render->add_option("--resize", a.resize_s,
                     "squash (whole image to the model size) | crop (timm eval: shorter side to size/0.875, "
                     "centre crop; the map is drawn inside the crop box only)")
      ->capture_default_str();
  render->add_option("--heads", a.heads, "number of attention heads, when the weights do not say");
  add_model_flags(render, a);
  render->add_option("--labels", ro.labels_file, kLabelsHelp);
  render->add_option("--mean", a.mean_s, "R,G,B normalisation mean (overrides the weights' config)");
  render->add_option("--std", a.std_s, "R,G,B normalisation std (overrides the weights' config)");
  render->add_flag("--rollout", ro.rollout,
                   "draw attention rollout (Abnar & Zuidema 2020) through layers 0..--layer, heads fused by --head");
  render->add_option("--discard", a.discard_s,
                     "with --rollout: zero this fraction of the smallest fused attentions per layer (never the class "
                     "token's row/column or the diagonal), 0..1");
  render->add_option("--threshold", a.threshold_s,
                     "DINO mask: keep the largest attentions holding this fraction of the mass, (0, 1]; drawn as a "
                     "filled, outlined region");
  render->add_flag("--heads-grid", ro.heads_grid, "the old name of --strip heads");
  render->add_option("--views", ro.views,
                     "several views from one forward pass, comma-separated, named as eval prints them; " +
                         view_grammar() + "; each view's files are NAME.<view>.png (L3/mean -> NAME.L3-mean.png); "
                         "one view keeps NAME.png");
  add_query_options(render, a);
  render->add_option("--layers", a.layers_s, "all: the view L<l>/<--head> for every block l (with --views: added to them)");
  // Figures (docs/figures.md).
  render->add_flag("--panel", ro.panel, "also write NAME.panel.*: photo | map alone | overlay, a title and a colour bar");
  render->add_option("--strip", a.strip_v,
                     "also write NAME.layers.* (layers: the map at every block) or NAME.heads.* (heads: every head "
                     "of the block plus the fused map); one colour scale and bar; may be repeated")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  render->add_option("--scale", a.scale_s,
                     "what the colours stand for: map (each map its own min-max; NAME.png's default), figure (the "
                     "min-max of each figure's maps, per unit; the default of panels and strips), run (per unit over "
                     "every map of the run: bottom the smallest value, top the 99th percentile; values above in the "
                     "top colour, bars marked with a triangle and '+') or VMIN,VMAX (fixed; values above marked alike)");
  render->add_option("--style", a.style_s, "overlay | mask (photo x map on black) | contour (iso-lines at the ticks)")
      ->capture_default_str();
  render->add_flag("--alpha-by-value", ro.alpha_by_value, "overlay opacity follows the value: --alpha x scaled value");
  render->add_flag_function("--no-legend", [&ro](std::int64_t) { ro.legend = false; }, "NAME.png without its legend");
  add_figure_size_options(render, a);
  render->add_option("--figure-format", a.formats_s, "formats of the figures: png, pdf, svg, comma-separated")
      ->capture_default_str();
  // Class-specific explanations (issue 19): the views chefer, gradcam, attn-grad (maps/views.cpp's kMethods).
  render->add_option("--explain", ro.explain,
                     "draw a class-specific explanation instead of attention: chefer (Chefer et al. 2021, every "
                     "block) | gradcam (Grad-CAM on a block's norm1 tokens) | attn-grad (--layer's attention x "
                     "gradient); needs a classifier head");
  render->add_option("--class", a.class_s, "with --explain: class index, label, top1 or topK (one map per class, "
                                           "NAME.class-LABEL.png); default top1");
  render->add_option("--gradcam-layer", a.gradcam_layer_s, "with --explain gradcam: the block whose norm1 output is "
                                                           "explained, negative from the end (default -1)");
  render->add_option("--size", a.size_s,
                     "model input size S or W,H in pixels (multiples of the patch size, e.g. 448 or 518); the "
                     "position embeddings are resampled as --pos-interp says");
  render->add_option("--pos-interp", a.pos_interp_s, kPosInterpHelp);
  render->add_option("--precision", a.precision_s,
                     "fp32 (default) | bf16: the linear layers and attention products in bfloat16 with float32 "
                     "accumulation (oneDNN; CPUs with AVX512_BF16 or AMX), LayerNorm, softmax, GELU and the maps in "
                     "float32; error budget in docs/benchmarks.md; not with the class-specific views");
  render->add_flag_callback("--save-raw", [&ro] { ro.map_files.push_back(OutputKind::MapNpy); },
                            "also write the map as NumPy .npy (float32, (grid_h, grid_w))");
  render->add_flag("--all-heads", ro.all_heads, "with --save-raw: write every head, shape (H, grid_h, grid_w)");
  render->add_flag("-q,--quiet", ro.quiet, "print only errors");
  render->add_option("-j,--jobs", bo.jobs, "images rendered at once; 0 (the default) = one per usable core");
  // One value per --ext, repeatable (a list swallowed the inputs); parse_extensions splits and refuses "png,,jpg".
  render->add_option("--ext", bo.ext, "extensions picked in folders, e.g. jpg,png (default: every format attnmap reads)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  render->add_option("--shard", a.shard_s, "render only part K of N of the sorted inputs, e.g. 2/4 (Slurm arrays)");
  add_run_output_options(render, bo);
  render->add_option("--max-pixels", a.max_pixels, "refuse images with more pixels than this, before decoding")
      ->capture_default_str();
  render->add_flag("--no-exif", a.no_exif,
                   "ignore the JPEG EXIF orientation (default: the photo is turned as viewers show it)");
  return render;
}

// attnmap eval: the render view options (bound to the same variables) plus masks, tolerance, fusions, JSON.
CLI::App* add_eval_options(CLI::App& app, CliArgs& a) {
  RenderOptions& ro = a.ro;
  EvalOptions& eo = a.eo;
  CLI::App* eval = app.add_subcommand(
      "eval", "measure how well attention maps localise the object: pointing game, energy-in-mask per layer "
              "and rollout, top-1 accuracy, against masks named like the images");
  eval->add_option("inputs", ro.inputs, "image files or folders (folders are walked recursively, sorted)")->required();
  eval->add_option("--masks", eo.masks_dir, "folder of masks named like the images (same stem); a non-zero colour channel = object (alpha ignored)")
      ->required();
  eval->add_option("-w,--weights", ro.weights, "weights file, as for render; default: the bundled weights/default.json");
  eval->add_option("--layer", a.layer_s, "selected view: encoder block, 0-based, negative from the end, last = -1 (default: config default_layer, else the last; with --rollout the last)");
  eval->add_option("--head", a.head_s, "selected view: a head index, or mean | max | min (default: config default_head, else mean; with --rollout mean)");
  eval->add_flag("--rollout", ro.rollout, "selected view: attention rollout through layers 0..--layer, heads fused by --head");
  eval->add_option("--discard", a.discard_s, "with --rollout: as for render, 0..1");
  eval->add_option("--fusions", a.fusions_s, "head fusions scored at every layer, comma-separated: mean,max,min or head indices (default: mean; not with --views)");
  eval->add_option("--views", ro.views,
                   "the views to score instead of the default list, comma-separated, as for render --views; " +
                       view_grammar() + " (not photo); the first is the selected view");
  eval->add_option("--tolerance", eo.tolerance_px, "pointing game: a hit within this many pixels of the mask")
      ->capture_default_str();
  eval->add_option("--upsample", a.upsample_s, "map to image pixels: nearest | bilinear | bicubic")->capture_default_str();
  eval->add_option("--resize", a.resize_s, "squash | crop (as for render; outside the crop box the map is 0)")
      ->capture_default_str();
  eval->add_option("--heads", a.heads, "number of attention heads, when the weights do not say");
  add_model_flags(eval, a);
  eval->add_option("--labels", ro.labels_file,
                   std::string(kLabelsHelp) + "; or a map of the ground truth's label names to the model's classes: "
                   "a JSON object {\"Bag\": \"purse\", \"Sneaker\": 770, \"Trouser\": null} or a CSV label,class "
                   "(docs/evaluation.md)");
  eval->add_option("--size", a.size_s, "model input size S or W,H in pixels, as for render");
  eval->add_option("--pos-interp", a.pos_interp_s, kPosInterpHelp);
  eval->add_option("--precision", a.precision_s, "fp32 only: eval's scores are measured in float32");
  eval->add_option("--mean", a.mean_s, "R,G,B normalisation mean (overrides the weights' config)");
  eval->add_option("--std", a.std_s, "R,G,B normalisation std (overrides the weights' config)");
  eval->add_option("--json", eo.json_out, "also write the per-image and summary results as JSON here (a missing folder is created)");
  eval->add_flag("-q,--quiet", ro.quiet, "print only errors, notes on masks and labels, and the summary");
  eval->add_option("--perturb", a.perturb_s,
                   "perturbation test (Chefer et al. 2021): remove patches in order of each view's map, 10 % steps; "
                   "drop (tokens leave the sequence) | zero (their pixels set to black); needs a classifier head");
  eval->add_option("--gradcam-layer", a.gradcam_layer_s, "the gradcam view: the block whose norm1 output is explained, "
                                                         "negative from the end (default -1)");
  eval->add_flag("--sanity", eo.sanity,
                 "model randomisation (Adebayo et al. 2018): blocks re-initialised from the top, rank correlation of "
                 "each view's maps with the trained model's");
  eval->add_option("--max-pixels", a.max_pixels, "refuse images with more pixels than this, before decoding")
      ->capture_default_str();
  eval->add_flag("--no-exif", a.no_exif, "ignore the JPEG EXIF orientation of images and masks (as for render)");
  return eval;
}

// attnmap inspect: its option table.
CLI::App* add_inspect_options(CLI::App& app, CliArgs& a) {
  CLI::App* inspect = app.add_subcommand(
      "inspect", "print what attnmap reads from a checkpoint: layout, token layout, grid, depth, heads, parameter "
                 "count and every config value with where it came from; given an output (PNG, .npy), the settings "
                 "that made it");
  inspect->add_option("weights", a.inspect_weights, "weights file (attnmap JSON, safetensors or a torch.save .pth/.pt/.bin), model.safetensors.index.json or Hugging Face model folder; or an output PNG / .npy")->required();
  inspect->add_option("--heads", a.inspect_heads, "number of attention heads, when the weights do not say");
  add_model_flags(inspect, a);
  return inspect;
}


// attnmap download: Hub names into the cache (app/download_cmd.cpp, docs/hub.md).
CLI::App* add_download_options(CLI::App& app, CliArgs& a) {
  CLI::App* d = app.add_subcommand(
      "download", "fetch Hugging Face Hub models into huggingface_hub's cache, exactly the files render would read "
                  "(for a login node; compute nodes then run with HF_HUB_OFFLINE=1); prints each snapshot folder");
  d->add_option("names", a.download_names, "ORG/NAME, ORG/NAME@REVISION or hf-hub:ORG/NAME")->required();
  d->add_flag("-q,--quiet", a.download_quiet, "no progress bar and no notes");
  return d;
}

}  // namespace

Commands add_commands(CLI::App& app, CliArgs& a) {
  const Commands c{add_render_options(app, a), add_eval_options(app, a), add_inspect_options(app, a),
                   add_figure_options(app, a.figure), add_explore_options(app, a), add_stats_options(app, a.stats),
                   add_download_options(app, a)};
  add_render_explore_options(c.render, a);  // render --explore, --budget-mb, --explore-blocks
  dress_commands(app);  // help topics, value names, number checks (app/cli_words.cpp)
  return c;
}

// An empty value given on purpose (--json "", --head "", -w "", --alpha "") is a mistake, not "option not
// given" (the default weights, view, size, ...) nor a number 0: checked for every option of the command.
void refuse_empty_values(const CLI::App& used_app) {
  for (const CLI::Option* opt : used_app.get_options()) {
    if (opt->get_positional() || opt->get_expected_min() == 0 || opt->count() == 0) continue;  // flags: no value
    const auto& res = opt->results();
    if (std::none_of(res.begin(), res.end(), [](const std::string& r) { return r.empty(); })) continue;
    const std::string name = opt->get_name();
    if (name == "--title") continue;  // --title '': no title
    const bool figure_out = name == "--out" && used_app.get_name() == "figure";  // figure -o names a file
    const char* expects =
        (figure_out || name == "--json" || name == "--manifest" || name == "--weights" || name == "--contact-sheet" ||
         name == "--labels")
            ? "a file name"
        : (name == "--masks" || name == "--out" || name == "--gallery") ? "a folder"
                                                                        : "a value";
    throw Error(name + " expects " + expects + ", found ''");
  }
}

namespace {

// The view options (--layer, --head, --size, --discard, --threshold, --strip, --scale, ...) into a.ro.
void apply_view_options(CliArgs& a) {
  RenderOptions& ro = a.ro;
  if (!a.layer_s.empty()) ro.layer = parse_int_option("--layer", a.layer_s);
  if (!a.head_s.empty()) ro.head = a.head_s;
  if (!a.size_s.empty()) ro.size = parse_size_option("--size", a.size_s);
  if (!a.pos_interp_s.empty()) ro.pos_interp = with_flag("--pos-interp", [&] { return parse_pos_interp(a.pos_interp_s); });
  ro.precision = parse_precision_option("--precision", a.precision_s);
  if (!a.discard_s.empty()) ro.discard = parse_number_option("--discard", a.discard_s);
  if (!a.threshold_s.empty()) ro.threshold = static_cast<float>(parse_number_option("--threshold", a.threshold_s));
  if (!a.layers_s.empty()) {
    if (a.layers_s != "all") throw Error("--layers expects all, found '" + a.layers_s + "' (name single blocks in --views)");
    ro.layers_all = true;
  }
  for (const std::string& item : a.strip_v) {
    if (item == "heads") ro.heads_grid = true;
    else if (item == "layers") ro.strip_layers = true;
    else throw Error("--strip expects layers or heads, found '" + item + "'");
  }
  const int queries = !a.query_s.empty() + !a.column_s.empty() + a.received;
  if (queries > 1) throw Error("--query, --column and --received each name the line to read; give one");
  const std::string query = !a.query_s.empty() ? "q=" + a.query_s : !a.column_s.empty() ? "k=" + a.column_s
                            : a.received ? "received" : "";
  const char* query_flag = !a.query_s.empty() ? "--query" : !a.column_s.empty() ? "--column" : "--received";
  if (!query.empty()) (void)with_flag(query_flag, [&] { return parse_token_query(query); });
  ro.query = query;
  if (!a.scale_s.empty()) ro.scale = with_flag("--scale", [&] { return parse_scale(a.scale_s); });
  ro.style = with_flag("--style", [&] { return parse_style(a.style_s); });
  if (!a.dpi_s.empty()) ro.dpi = parse_number_option("--dpi", a.dpi_s);
  if (!a.width_in_s.empty()) ro.width_in = parse_number_option("--width-in", a.width_in_s);
  if (!a.strip_columns_s.empty()) ro.strip_columns = parse_int_option("--strip-columns", a.strip_columns_s);
  if (!a.block_numbering_s.empty()) ro.block_base = parse_block_numbering(a.block_numbering_s);
  ro.figure_formats = with_flag("--figure-format", [&] { return parse_figure_formats(a.formats_s); });
}

// The loading, drawing, model and batch options into a.ro and a.bo.
void apply_run_options(CliArgs& a, const Commands& c) {
  RenderOptions& ro = a.ro;
  BatchOptions& bo = a.bo;
  ro.load.apply_exif = !a.no_exif;
  if (a.max_pixels < 1) throw Error("--max-pixels must be >= 1, found " + std::to_string(a.max_pixels));
  ro.load.max_pixels = static_cast<uint64_t>(a.max_pixels);
  if (bo.progress_every < 0)
    throw Error("--progress-every must be >= 0 (0: automatic), found " + std::to_string(bo.progress_every));
  ro.upsample = with_flag("--upsample", [&] { return parse_upsample(a.upsample_s); });
  ro.resize = parse_resize_option("--resize", a.resize_s);
  if (c.render->count("--heads") || c.eval->count("--heads")) ro.overrides.num_heads = checked_heads(a.heads);
  if (c.render->count("--key") || c.eval->count("--key")) ro.overrides.key = a.key_s;
  apply_model_flags(a.act_s, a.pool_s, ro.overrides);
  if (c.render->count("--class")) ro.class_spec = a.class_s;
  if (c.render->count("--title")) ro.title = a.title_s;
  if (!ro.colormap.empty()) ro.colormap = with_flag("--colormap", [&] { return colormap_name(ro.colormap); });
  if (!a.gradcam_layer_s.empty()) ro.gradcam_layer = parse_int_option("--gradcam-layer", a.gradcam_layer_s);
  if (!a.mean_s.empty()) ro.overrides.mean = parse_rgb_option("--mean", a.mean_s);
  if (!a.std_s.empty()) ro.overrides.std = parse_rgb_option("--std", a.std_s, true);
  bo.ext = parse_extensions(bo.ext);
  if (!a.shard_s.empty()) parse_shard(a.shard_s, &bo.shard_index, &bo.shard_count);
  bo.sheet_columns_given = c.render->count("--sheet-columns") > 0;
  if (c.render->parsed()) {
    if ((!a.budget_s.empty() || !a.explore_blocks_s.empty()) && !ro.writes(OutputKind::Explore))
      throw Error("--budget-mb and --explore-blocks apply to --explore");
    apply_explore_budget(a.budget_s, a.explore_blocks_s, ro);
  }
}

}  // namespace

void check_command(CliArgs& a, const Commands& c) {
  refuse_empty_values(c.render->parsed() ? *c.render : *c.eval);
  apply_view_options(a);
  apply_run_options(a, c);
  check_drawing_options(a.ro);
  if (!c.eval->parsed()) return;
  if (a.ro.precision != Precision::F32)
    throw Error("--precision bf16: eval runs in float32 only (its deletion curves and scores are not measured in bf16)");
  if (a.ro.discard > 0.0 && !a.ro.rollout && a.ro.views.empty()) throw Error("--discard applies to --rollout only");
  EvalOptions& eo = a.eo;
  eo.view = a.ro;
  eo.fusions.clear();
  std::stringstream fs(a.fusions_s);  // empty: --fusions not given (an empty value is refused earlier)
  for (std::string f; std::getline(fs, f, ',');) eo.fusions.push_back(f);
  if (!a.fusions_s.empty() && a.fusions_s.back() == ',')  // getline drops an empty last item; ",," is caught later
    throw Error("--fusions expects a comma-separated list such as mean,max, found '" + a.fusions_s + "'");
  if (!a.perturb_s.empty()) {  // an empty value is refused earlier
    if (a.perturb_s == "drop")
      eo.perturb = PerturbMode::Drop;
    else if (a.perturb_s == "zero")
      eo.perturb = PerturbMode::Zero;
    else
      throw Error("--perturb expects drop or zero, found '" + a.perturb_s + "'");
  }
}

ModelOverrides inspect_overrides(const CliArgs& a, const CLI::App& inspect) {
  ModelOverrides ov;
  if (inspect.count("--heads")) ov.num_heads = checked_heads(a.inspect_heads);
  apply_model_flags(a.act_s, a.pool_s, ov);
  if (inspect.count("--key")) {
    if (a.key_s.empty()) throw Error("--key expects a value, found ''");
    ov.key = a.key_s;
  }
  return ov;
}

}  // namespace attnmap
