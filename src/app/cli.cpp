// cli.cpp - command-line options only; the work is done in batch.cpp.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <iostream>
#include <sstream>

#include "app/batch.hpp"
#include "draw/colormap.hpp"
#include "core/error.hpp"
#include "app/eval_cmd.hpp"
#include "app/figure_cmd.hpp"
#include "io/image_io.hpp"
#include "app/inspect.hpp"
#include "app/provenance.hpp"
#include "checkpoint/weights.hpp"
#include "model/pos_embed.hpp"

namespace {

// Three comma-separated finite numbers; with `positive` (for --std) each must be > 0 and its reciprocal
// must fit in a float (the normalisation divides by it).
std::array<float, 3> parse_rgb(const std::string& s, const char* opt, bool positive = false) {
  std::array<float, 3> v{};
  std::stringstream ss(s);
  std::string item;
  size_t i = 0;
  while (std::getline(ss, item, ',')) {
    if (i >= 3) break;
    double d = 0;
    size_t used = 0;
    try {
      d = std::stod(item, &used);
    } catch (const std::out_of_range&) {
      throw attnmap::Error(std::string(opt) + " value '" + item + "' is out of range for a float");
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw attnmap::Error(std::string(opt) + " expects R,G,B numbers, found '" + s + "'");
    if (!std::isfinite(d)) throw attnmap::Error(std::string(opt) + " values must be finite numbers, found '" + s + "'");
    if (std::fabs(d) > static_cast<double>(FLT_MAX))
      throw attnmap::Error(std::string(opt) + " value '" + item + "' is out of range for a float");
    if (positive && !(d > 0.0))
      throw attnmap::Error(std::string(opt) + " values must be positive (the image is divided by them), found '" + s + "'");
    if (positive && 1.0 / d > static_cast<double>(FLT_MAX))
      throw attnmap::Error(std::string(opt) + " value '" + item + "' is too small: dividing by it overflows a float");
    v[i] = static_cast<float>(d);
    ++i;
  }
  if (i != 3 || std::count(s.begin(), s.end(), ',') != 2)
    throw attnmap::Error(std::string(opt) + " expects three numbers R,G,B, found '" + s + "'");
  return v;
}

// "S" -> (S, S); "W,H" -> (W, H). Divisibility by the patch size is checked once the model is known.
std::array<int, 2> parse_size(const std::string& s) {
  std::array<int, 2> v{};
  const size_t comma = s.find(',');
  const std::string parts[2] = {s.substr(0, comma), comma == std::string::npos ? s.substr(0, comma) : s.substr(comma + 1)};
  for (int i = 0; i < 2; ++i) {
    size_t used = 0;
    long n = 0;
    try {
      n = std::stol(parts[i], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != parts[i].size() || n <= 0 || n > 65536)
      throw attnmap::Error("--size expects S or W,H in pixels (positive integers), found '" + s + "'");
    v[static_cast<size_t>(i)] = static_cast<int>(n);
  }
  return v;
}

double parse_fraction(const std::string& s, const char* opt) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) throw attnmap::Error(std::string(opt) + " expects a number, found '" + s + "'");
  return v;
}

// The command line as given, before it is checked: the option tables bind to these.
struct CliArgs {
  attnmap::RenderOptions ro;
  attnmap::BatchOptions bo;
  std::string shard_s;
  std::string layer_s, head_s, upsample_s = "bilinear", resize_s = "squash", mean_s, std_s, size_s, discard_s,
      threshold_s, pos_interp_s;
  std::vector<std::string> strip_v;  // --strip, repeatable
  std::string layers_s;               // --layers all
  std::string key_s;                  // --key: the state dict inside a torch.save checkpoint
  std::string act_s, pool_s;          // --act, --pool: settings a checkpoint cannot hold
  std::string class_s, gradcam_layer_s;  // --class, --gradcam-layer (with --explain)
  std::string scale_s, style_s = "overlay", dpi_s, formats_s = "png";
  int heads = 0;
  long long max_pixels = static_cast<long long>(ro.load.max_pixels);  // signed: "-1" must not wrap to "no limit"
  bool no_exif = false;
  attnmap::EvalOptions eo;
  std::string fusions_s;   // eval --fusions (empty: not given, mean)
  std::string perturb_s;  // eval --perturb drop|zero
  std::string inspect_weights;
  int inspect_heads = 0;
  attnmap::FigureArgs figure;  // attnmap figure (app/figure_cmd.cpp)
};

const char* const kPosInterpHelp =
    "with --size: resample the position embeddings as timm | timm-legacy | dino | hf | hf-legacy | torchvision "
    "does (default: what the checkpoint's layout implies; attnmap inspect shows it)";

struct Commands {
  CLI::App* render;
  CLI::App* eval;
  CLI::App* inspect;
  CLI::App* figure;
};

// --key, and --act and --pool: the settings a checkpoint cannot hold (render, eval, inspect).
void add_model_flags(CLI::App* cmd, CliArgs& a) {
  cmd->add_option("--key", a.key_s, "PyTorch checkpoint: the entry holding the state dict, e.g. teacher or state_dict/model (default: found by the usual keys)");
  cmd->add_option("--act", a.act_s, "the MLP activation gelu | gelu-tanh | quickgelu, for checkpoints that cannot say it (OpenAI CLIP / OpenCLIP, timm CLIP without its config.json)");
  cmd->add_option("--pool", a.pool_s, "what the classifier reads: cls | mean | mean-all | map, for checkpoints that cannot say it (vit-pytorch before 2025-11)");
}

// attnmap render: its option table.
CLI::App* add_render_options(CLI::App& app, CliArgs& a) {
  attnmap::RenderOptions& ro = a.ro;
  attnmap::BatchOptions& bo = a.bo;
  CLI::App* render = app.add_subcommand("render", "render class-token attention heatmaps over images");
  render->add_option("inputs", ro.inputs, "image files or folders (folders are walked recursively, sorted)")
      ->required();
  render->add_option("-w,--weights", ro.weights, "weights file (attnmap JSON, safetensors or a torch.save .pth/.pt/.bin; timm, DINOv2, DeiT, Hugging Face or torchvision names), a sharded model.safetensors.index.json or a Hugging Face model folder; default: the bundled weights/default.json");
  render->add_option("-o,--out", ro.out_dir, "output folder, created if missing")->capture_default_str();
  render->add_option("--layer", a.layer_s, "encoder block, 0-based; negative counts from the end (default: the weights' config default_layer, else -1 = last; with --rollout -1)");
  render->add_option("--head", a.head_s, "a head index (negative counts from the end), or mean | max | min over heads (default: the weights' config default_head, else mean; with --rollout mean)");
  std::string cmaps;
  for (const auto& n : attnmap::colormap_names()) cmaps += (cmaps.empty() ? "" : ", ") + n;
  render->add_option("--colormap", ro.colormap, "colour map: " + cmaps)->capture_default_str();
  render->add_option("--alpha", ro.alpha, "opacity of the heatmap over the photo, 0..1")->capture_default_str();
  render->add_option("--upsample", a.upsample_s, "nearest | bilinear | bicubic")->capture_default_str();
  render->add_option("--resize", a.resize_s,
                     "squash (whole image to the model size) | crop (timm eval: shorter side to size/0.875, "
                     "centre crop; the map is drawn inside the crop box only)")
      ->capture_default_str();
  render->add_option("--heads", a.heads, "number of attention heads, when the weights do not say");
  add_model_flags(render, a);
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
                     "several views from one forward pass, comma-separated, named as eval prints them: "
                     "L<layer>/<fusion> (fusion mean|max|min|h<i>; layer an index, negative from the end, or last), "
                     "rollout[/<fusion>], chefer, gradcam[@L<layer>], attn-grad[@L<layer>]; each view's files are "
                     "NAME.<view>.png (L3/mean -> NAME.L3-mean.png); one view keeps NAME.png");
  render->add_option("--layers", a.layers_s, "all: the view L<l>/<--head> for every block l (with --views: added to them)");
  // Figures (docs/figures.md).
  render->add_flag("--panel", ro.panel, "also write NAME.panel.*: photo | map alone | overlay, a title and a colour bar");
  render->add_option("--strip", a.strip_v,
                     "also write NAME.layers.* (layers: the map at every block) or NAME.heads.* (heads: every head "
                     "of the block plus the fused map); one colour scale and bar; may be repeated")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  render->add_option("--scale", a.scale_s,
                     "what the colours stand for: map (each map its own min-max; NAME.png's default), figure (one "
                     "scale per figure; the default of panels and strips), run (one scale per unit over every map "
                     "of the run) or VMIN,VMAX");
  render->add_option("--style", a.style_s, "overlay | mask (photo x map on black) | contour (iso-lines at the ticks)")
      ->capture_default_str();
  render->add_flag("--alpha-by-value", ro.alpha_by_value, "overlay opacity follows the value: --alpha x scaled value");
  render->add_option("--dpi", a.dpi_s, "pixels per inch written into every PNG (pHYs) and the page size of PDF/SVG "
                                       "figures (default: none in NAME.png, 300 in figures)");
  render->add_option("--figure-format", a.formats_s, "formats of the figures: png, pdf, svg, comma-separated")
      ->capture_default_str();
  // Class-specific explanations (issue 19): options only; app/explain_render.cpp checks and draws them.
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
  render->add_flag("--save-raw", ro.save_raw, "also write the map as NumPy .npy (float32, (grid_h, grid_w))");
  render->add_flag("--all-heads", ro.all_heads, "with --save-raw: write every head, shape (H, grid_h, grid_w)");
  render->add_flag("-q,--quiet", ro.quiet, "print only errors");
  render->add_option("-j,--jobs", bo.jobs, "images rendered at once (default: the number of cores)");
  // No CLI11 delimiter: it drops empty items ("png,,jpg"); parse_extensions splits and refuses them.
  // One value per --ext (it may be repeated): as a list it swallowed the inputs after it.
  render->add_option("--ext", bo.ext, "extensions picked in folders, e.g. jpg,png (default: every format attnmap reads)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  render->add_option("--manifest", bo.manifest,
                     "write a header line with the run's settings, then one JSON line per input (status, outputs, map "
                     "statistics); an earlier manifest there is read back by --skip-existing");
  render->add_flag("--skip-existing", bo.skip_existing,
                   "skip images whose outputs already exist and were made with the same settings (resume a run)");
  render->add_option("--shard", a.shard_s, "render only part K of N of the sorted inputs, e.g. 2/4 (Slurm arrays)");
  render->add_option("--contact-sheet", bo.contact_sheet,
                     "after the run: every input's overlay in a labelled grid (file name, top-1 class, peak value) in "
                     "FILE.png; pages FILE-1.png, FILE-2.png ... past 8000 pixels; failed inputs as grey tiles");
  render->add_option("--sheet-columns", bo.sheet_columns, "thumbnails per row of the contact sheet")->capture_default_str();
  render->add_option("--gallery", bo.gallery,
                     "after the run: DIR/index.html, a static page of every input (thumbnail linked to its outputs, "
                     "status or error, the manifest's statistics; sortable, filterable) and DIR/thumbs/");
  render->add_option("--progress-every", bo.progress_every,
                     "when standard error is not a terminal: a progress line per this many images (default: auto)");
  render->add_option("--max-pixels", a.max_pixels, "refuse images with more pixels than this, before decoding")
      ->capture_default_str();
  render->add_flag("--no-exif", a.no_exif,
                   "ignore the JPEG EXIF orientation (default: the photo is turned as viewers show it)");
  return render;
}

// attnmap eval: the render view options (bound to the same variables) plus masks, tolerance, fusions, JSON.
CLI::App* add_eval_options(CLI::App& app, CliArgs& a) {
  attnmap::RenderOptions& ro = a.ro;
  attnmap::EvalOptions& eo = a.eo;
  CLI::App* eval = app.add_subcommand(
      "eval", "measure how well attention maps localise the object: pointing game, energy-in-mask per layer "
              "and rollout, top-1 accuracy, against masks named like the images");
  eval->add_option("inputs", ro.inputs, "image files or folders (folders are walked recursively, sorted)")->required();
  eval->add_option("--masks", eo.masks_dir, "folder of masks named like the images (same stem); a non-zero colour channel = object (alpha ignored)")
      ->required();
  eval->add_option("-w,--weights", ro.weights, "weights file, as for render; default: the bundled weights/default.json");
  eval->add_option("--layer", a.layer_s, "selected view: encoder block, 0-based, negative from the end (default: config default_layer, else -1; with --rollout -1)");
  eval->add_option("--head", a.head_s, "selected view: a head index, or mean | max | min (default: config default_head, else mean; with --rollout mean)");
  eval->add_flag("--rollout", ro.rollout, "selected view: attention rollout through layers 0..--layer, heads fused by --head");
  eval->add_option("--discard", a.discard_s, "with --rollout: as for render, 0..1");
  eval->add_option("--fusions", a.fusions_s, "head fusions scored at every layer, comma-separated: mean,max,min or head indices (default: mean; not with --views)");
  eval->add_option("--views", ro.views,
                   "the views to score instead of the default list, comma-separated, as for render --views "
                   "(L<layer>/<fusion>, rollout[/<fusion>][@L<layer>], chefer, gradcam[@L<layer>], "
                   "attn-grad[@L<layer>]); the first is the selected view");
  eval->add_option("--tolerance", eo.tolerance_px, "pointing game: a hit within this many pixels of the mask")
      ->capture_default_str();
  eval->add_option("--upsample", a.upsample_s, "map to image pixels: nearest | bilinear | bicubic")->capture_default_str();
  eval->add_option("--resize", a.resize_s, "squash | crop (as for render; outside the crop box the map is 0)")
      ->capture_default_str();
  eval->add_option("--heads", a.heads, "number of attention heads, when the weights do not say");
  add_model_flags(eval, a);
  eval->add_option("--size", a.size_s, "model input size S or W,H in pixels, as for render");
  eval->add_option("--pos-interp", a.pos_interp_s, kPosInterpHelp);
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

// CLI11 reads "--layer=" (nothing after the '=') as the option given without a value and takes the next
// argument as its value ("--head= 2 IMG" meant head 2): an '=' with nothing after it is a usage error.
// False (the error printed) for such an argument.
bool check_no_empty_equals(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i] ? argv[i] : "";
    if (arg == "--") break;
    if (arg.size() > 3 && arg.compare(0, 2, "--") == 0 && arg.find('=') == arg.size() - 1) {
      std::cerr << "attnmap: error: " << attnmap::printable(arg.substr(0, arg.size() - 1)) << " expects a value, found ''\n";
      return false;
    }
  }
  return true;
}

// A first word that is not an option nor a command: say so (CLI11 reports "A subcommand is required").
// False (the error printed) for such a word.
bool check_command_word(CLI::App& app, int argc, char** argv) {
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc > 1 && argv[1] && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
    std::string names;
    for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
    std::cerr << "attnmap: error: unknown command '" << attnmap::printable(argv[1]) << "' (commands: " << names
              << "; attnmap --help)\n";
    return false;
  }
  return true;
}

int run_inspect(const CliArgs& a, const CLI::App& inspect) {
  if (attnmap::looks_like_output(a.inspect_weights)) {  // a PNG or .npy render wrote: the settings that made it
    std::cout << attnmap::describe_output(a.inspect_weights);
    return 0;
  }
  attnmap::ModelOverrides ov;
  if (inspect.count("--heads")) ov.num_heads = a.inspect_heads;
  attnmap::apply_model_flags(a.act_s, a.pool_s, ov);
  if (inspect.count("--key")) {
    if (a.key_s.empty()) throw attnmap::Error("--key expects a value, found ''");
    ov.key = a.key_s;
  }
  const attnmap::ViTWeights w = attnmap::load_model(a.inspect_weights, ov);
  std::cout << attnmap::describe_model(w, a.inspect_weights);
  return 0;
}

// An empty value given on purpose (--json "", --head "", -w "", --alpha "") is a mistake, not "option not
// given" (the default weights, view, size, ...) nor a number 0: checked for every option of the command.
void refuse_empty_values(const CLI::App& used_app) {
  for (const CLI::Option* opt : used_app.get_options()) {
    if (opt->get_positional() || opt->get_expected_min() == 0 || opt->count() == 0) continue;  // flags: no value
    const auto& res = opt->results();
    if (std::none_of(res.begin(), res.end(), [](const std::string& r) { return r.empty(); })) continue;
    const std::string name = opt->get_name();
    const bool figure_out = name == "--out" && used_app.get_name() == "figure";  // figure -o names a file
    const char* expects =
        (figure_out || name == "--json" || name == "--manifest" || name == "--weights" || name == "--contact-sheet")
            ? "a file name"
        : (name == "--masks" || name == "--out" || name == "--gallery") ? "a folder"
                                                                        : "a value";
    throw attnmap::Error(name + " expects " + expects + ", found ''");
  }
}

int parse_layer(const std::string& layer_s) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(layer_s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != layer_s.size()) throw attnmap::Error("--layer expects an integer, found '" + layer_s + "'");
  return v;
}

// The view options (--layer, --head, --size, --discard, --threshold, --all-heads) into a.ro.
void apply_view_options(CliArgs& a) {
  attnmap::RenderOptions& ro = a.ro;
  if (!a.layer_s.empty()) ro.layer = parse_layer(a.layer_s);
  if (!a.head_s.empty()) ro.head = a.head_s;
  if (!a.size_s.empty()) ro.size = parse_size(a.size_s);
  if (!a.pos_interp_s.empty()) {
    ro.pos_interp = attnmap::parse_pos_interp(a.pos_interp_s);
    if (!ro.size)
      throw attnmap::Error("--pos-interp applies with --size (it chooses how --size resamples the position "
                           "embeddings)");
  }
  if (!a.discard_s.empty()) {
    ro.discard = parse_fraction(a.discard_s, "--discard");
    if (!(ro.discard >= 0.0 && ro.discard <= 1.0)) throw attnmap::Error("--discard must be in [0, 1], found '" + a.discard_s + "'");
    if (!ro.rollout && ro.views.empty()) throw attnmap::Error("--discard applies to --rollout only");  // --views: checked with the views
  }
  if (!a.threshold_s.empty()) {
    ro.threshold = static_cast<float>(parse_fraction(a.threshold_s, "--threshold"));
    if (!(*ro.threshold > 0.0f && *ro.threshold <= 1.0f))
      throw attnmap::Error("--threshold must be in (0, 1], found '" + a.threshold_s + "'");
  }
  if (ro.all_heads && !ro.save_raw) throw attnmap::Error("--all-heads is a --save-raw option: add --save-raw");
  if (!a.layers_s.empty()) {
    if (a.layers_s != "all") throw attnmap::Error("--layers expects all, found '" + a.layers_s + "' (name single blocks in --views)");
    ro.layers_all = true;
  }
  for (const std::string& item : a.strip_v) {
    if (item == "heads") ro.heads_grid = true;
    else if (item == "layers") ro.strip_layers = true;
    else throw attnmap::Error("--strip expects layers or heads, found '" + item + "'");
  }
  if (!a.scale_s.empty()) ro.scale = attnmap::parse_scale(a.scale_s);
  ro.style = attnmap::parse_style(a.style_s);
  if (!a.dpi_s.empty()) ro.dpi = parse_fraction(a.dpi_s, "--dpi");
  ro.figure_formats = attnmap::parse_figure_formats(a.formats_s);
}

// The loading, drawing, model and batch options into a.ro and a.bo, checked in this order.
void apply_run_options(CliArgs& a, const Commands& c) {
  attnmap::RenderOptions& ro = a.ro;
  attnmap::BatchOptions& bo = a.bo;
  ro.load.apply_exif = !a.no_exif;
  if (a.max_pixels < 1) throw attnmap::Error("--max-pixels must be >= 1, found " + std::to_string(a.max_pixels));
  ro.load.max_pixels = static_cast<uint64_t>(a.max_pixels);
  if (bo.progress_every < 0)
    throw attnmap::Error("--progress-every must be >= 0 (0: automatic), found " + std::to_string(bo.progress_every));
  ro.upsample = attnmap::parse_upsample(a.upsample_s);
  if (a.resize_s == "squash") {
    ro.resize = attnmap::ResizeMode::Squash;
  } else if (a.resize_s == "crop") {
    ro.resize = attnmap::ResizeMode::Crop;
  } else {
    throw attnmap::Error("--resize expects squash or crop, found '" + a.resize_s + "'");
  }
  if (c.render->count("--heads") || c.eval->count("--heads")) ro.overrides.num_heads = a.heads;
  if (c.render->count("--key") || c.eval->count("--key")) ro.overrides.key = a.key_s;
  attnmap::apply_model_flags(a.act_s, a.pool_s, ro.overrides);
  if (c.render->count("--class")) ro.class_spec = a.class_s;
  if (!a.gradcam_layer_s.empty()) {
    size_t used = 0;
    try {
      ro.gradcam_layer = std::stoi(a.gradcam_layer_s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != a.gradcam_layer_s.size())
      throw attnmap::Error("--gradcam-layer expects an integer, found '" + a.gradcam_layer_s + "'");
  }
  if (!a.mean_s.empty()) ro.overrides.mean = parse_rgb(a.mean_s, "--mean");
  if (!a.std_s.empty()) ro.overrides.std = parse_rgb(a.std_s, "--std", true);
  if (!(ro.alpha >= 0.0f && ro.alpha <= 1.0f)) throw attnmap::Error("--alpha must be in [0, 1]");
  bo.ext = attnmap::parse_extensions(bo.ext);
  if (!a.shard_s.empty()) attnmap::parse_shard(a.shard_s, &bo.shard_index, &bo.shard_count);
  bo.sheet_columns_given = c.render->count("--sheet-columns") > 0;
}

int run_eval_command(CliArgs& a) {
  attnmap::EvalOptions& eo = a.eo;
  eo.view = a.ro;
  eo.fusions.clear();
  std::stringstream fs(a.fusions_s);  // empty: --fusions not given (an empty value is refused earlier)
  for (std::string f; std::getline(fs, f, ',');) eo.fusions.push_back(f);
  if (!a.fusions_s.empty() && a.fusions_s.back() == ',')  // getline drops an empty last item; ",," is caught later
    throw attnmap::Error("--fusions expects a comma-separated list such as mean,max, found '" + a.fusions_s + "'");
  if (!a.perturb_s.empty()) {  // an empty value is refused earlier
    if (a.perturb_s == "drop")
      eo.perturb = attnmap::PerturbMode::Drop;
    else if (a.perturb_s == "zero")
      eo.perturb = attnmap::PerturbMode::Zero;
    else
      throw attnmap::Error("--perturb expects drop or zero, found '" + a.perturb_s + "'");
  }
  return attnmap::run_eval(eo);
}

// Runs the parsed command; throws attnmap::Error for an option value it refuses.
int run_command(CliArgs& a, const Commands& c) {
  if (c.inspect->parsed()) return run_inspect(a, *c.inspect);
  if (c.figure->parsed()) {
    refuse_empty_values(*c.figure);
    return attnmap::run_figure(a.figure);
  }
  refuse_empty_values(c.render->parsed() ? *c.render : *c.eval);
  apply_view_options(a);
  apply_run_options(a, c);
  if (c.eval->parsed()) return run_eval_command(a);
  return attnmap::run_render(a.ro, a.bo);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 0 && argv[0]) attnmap::set_program_path(argv[0]);  // --json/--manifest never replace the program
  attnmap::install_interrupt_cleanup();  // Ctrl-C or a kill leaves no temporary file beside the outputs
  CLI::App app{"attnmap - draws where a Vision Transformer's class token looks, as a heatmap over the photo"};
  app.set_version_flag("--version", std::string("attnmap ") + ATTNMAP_VERSION);
  app.require_subcommand(1);
  CliArgs args;
  const Commands commands{add_render_options(app, args), add_eval_options(app, args), add_inspect_options(app, args),
                          attnmap::add_figure_options(app, args.figure)};

  if (!check_no_empty_equals(argc, argv) || !check_command_word(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "attnmap: error: " << attnmap::printable(e.what()) << " (attnmap --help for the options)\n";
    return 2;
  }
  try {
    return run_command(args, commands);
  } catch (const std::exception& e) {
    std::cerr << "attnmap: error: " << attnmap::printable(e.what()) << "\n";
    return 2;
  }
}
