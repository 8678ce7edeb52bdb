// flag_table.cpp - the flag registry's table (flag_table.hpp): every setting of every command, defined once,
// with its help texts per command, the commands' words, the accepted aliases and the suggestions.
#include "app/cli/flag_table.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sstream>

#include "app/cli/flags.hpp"
#include "draw/colormap.hpp"
#include "maps/views.hpp"

namespace attnmap {

namespace {

constexpr Number kNo = Number::None;
constexpr const char* kBlock = "a block index (0-based, negative from the end) or last";

// The settings, in the help's order within each topic (unless the command has its own: kHelpOrders).
// Columns: id, spelling, keyword ("" = id), commands, traits, required in, topic, value name, number check,
// what the number is.
const Flag kFlags[] = {
    {"inputs", "inputs", "", kRender | kEval | kFigure | kExplore | kStats, kPositional | kRepeat,
     kRender | kEval | kFigure | kExplore | kStats, "", "", kNo, ""},
    {"weights_file", "weights", "", kInspect, kPositional, kInspect, "", "", kNo, ""},
    {"names", "names", "", kDownload, kPositional | kRepeat, kDownload, "", "", kNo, ""},
    {"max_pixels", "--max-pixels", "", kRender | kEval | kFigure | kExplore | kStats, kForward, 0, "Input",
     "INT", Number::Long, "a whole number of pixels"},
    {"no_exif", "--no-exif", "exif", kRender | kEval | kFigure | kExplore | kStats,
     kSwitch | kForward | kNegated, 0, "Input", "", kNo, ""},
    {"weights", "-w,--weights", "", kRender | kEval | kFigure | kExplore | kStats, kByCall, 0, "Model",
     "PATH", kNo, ""},
    {"resize", "--resize", "", kRender | kEval | kFigure | kExplore | kStats, kForward, 0, "Model",
     "squash|crop", kNo, ""},
    {"heads", "--heads", "", kRender | kEval | kInspect | kFigure | kExplore | kStats, kModel, 0, "Model",
     "INT", Number::Int, "a whole number of attention heads"},
    {"key", "--key", "", kRender | kEval | kInspect | kFigure | kExplore | kStats, kModel, 0, "Model", "NAME",
     kNo, ""},
    {"act", "--act", "", kRender | kEval | kInspect | kFigure | kExplore | kStats, kModel, 0, "Model", "NAME",
     kNo, ""},
    {"pool", "--pool", "", kRender | kEval | kInspect | kFigure | kExplore | kStats, kModel, 0, "Model",
     "NAME", kNo, ""},
    {"labels", "--labels", "", kRender | kEval | kFigure, kModel, 0, "Model", "FILE", kNo, ""},
    {"mean", "--mean", "", kRender | kEval | kFigure | kExplore | kStats, kModel, 0, "Model", "R,G,B", kNo,
     ""},
    {"std", "--std", "", kRender | kEval | kFigure | kExplore | kStats, kModel, 0, "Model", "R,G,B", kNo, ""},
    {"size", "--size", "", kRender | kEval | kFigure | kExplore | kStats, kModel, 0, "Model", "S|W,H", kNo,
     ""},
    {"pos_interp", "--pos-interp", "", kRender | kEval | kFigure | kExplore | kStats, kModel, 0, "Model",
     "NAME", kNo, ""},
    {"precision", "--precision", "", kRender | kEval | kFigure | kStats, kModel, 0, "Model", "fp32|bf16", kNo,
     ""},
    {"text", "--text", "", kRender | kEval | kFigure | kExplore, kRepeat | kModel, 0, "Text", "PHRASE", kNo,
     ""},
    {"texts", "--texts", "", kRender | kEval | kFigure | kExplore, kModel, 0, "Text", "FILE", kNo, ""},
    {"prompt", "--prompt", "", kRender | kEval | kFigure | kExplore, kRepeat | kModel, 0, "Text", "TEMPLATE",
     kNo, ""},
    {"vocab", "--vocab", "", kRender | kEval | kFigure | kExplore, kModel, 0, "Text", "FILE|DIR", kNo, ""},
    {"truncate_text", "--truncate-text", "", kRender | kEval | kFigure | kExplore, kSwitch | kModel, 0, "Text",
     "", kNo, ""},
    {"layer", "--layer", "", kRender | kEval, kForward, 0, "Views", "INT|last", Number::Block, kBlock},
    {"head", "--head", "", kRender | kEval, kForward, 0, "Views", "INT|mean|max|min", kNo, ""},
    {"rollout", "--rollout", "", kRender | kEval, kSwitch | kForward, 0, "Views", "", kNo, ""},
    {"discard", "--discard", "", kRender | kEval | kFigure | kExplore, kForward, 0, "Views", "FLOAT",
     Number::Float, "a fraction from 0 to 1"},
    {"threshold", "--threshold", "", kRender, 0, 0, "Views", "FLOAT", Number::Float,
     "a fraction of the attention mass, in (0, 1]"},
    {"views", "--views", "", kRender | kEval | kFigure, kForward, kFigure, "Views", "LIST", kNo, ""},
    {"query", "--query", "", kRender, kForward, 0, "Views", "TOKEN", kNo, ""},
    {"column", "--column", "", kRender, kForward, 0, "Views", "PATCH", kNo, ""},
    {"received", "--received", "", kRender, kSwitch | kForward, 0, "Views", "", kNo, ""},
    {"layers", "--layers", "", kRender, kForward, 0, "Views", "all", kNo, ""},
    {"explain", "--explain", "", kRender, kForward, 0, "Views", "NAME", kNo, ""},
    {"class_spec", "--class", "classes", kRender | kFigure, kForward, 0, "Views", "INT|NAME|topK", kNo, ""},
    {"gradcam_layer", "--gradcam-layer", "", kRender | kEval | kFigure, kForward, 0, "Views", "INT|last",
     Number::Block, kBlock},
    {"colormap", "--colormap", "", kRender | kFigure | kExplore | kStats, 0, 0, "Drawing", "NAME", kNo, ""},
    {"alpha", "--alpha", "", kRender | kFigure | kExplore | kStats, 0, 0, "Drawing", "FLOAT", Number::Float,
     "an opacity from 0 to 1"},
    {"upsample", "--upsample", "", kRender | kEval | kFigure, 0, 0, "Drawing", "NAME", kNo, ""},
    {"scale", "--scale", "", kRender | kFigure, 0, 0, "Drawing", "NAME|VMIN,VMAX", kNo, ""},
    {"style", "--style", "", kRender | kFigure, 0, 0, "Drawing", "NAME", kNo, ""},
    {"alpha_by_value", "--alpha-by-value", "", kRender | kFigure, kSwitch, 0, "Drawing", "", kNo, ""},
    {"no_legend", "--no-legend", "legend", kRender, kSwitch | kNegated, 0, "Drawing", "", kNo, ""},
    {"heads_grid", "--heads-grid", "", kRender, kSwitch, 0, "Figures", "", kNo, ""},
    {"panel", "--panel", "", kRender, kSwitch, 0, "Figures", "", kNo, ""},
    {"strip", "--strip", "", kRender, kRepeat, 0, "Figures", "layers|heads", kNo, ""},
    {"dpi", "--dpi", "", kRender | kFigure | kStats, 0, 0, "Figures", "FLOAT", Number::Float,
     "a number of pixels per inch"},
    {"width_in", "--width-in", "", kRender | kFigure | kStats, 0, 0, "Figures", "FLOAT", Number::Float,
     "a width in inches"},
    {"strip_columns", "--strip-columns", "", kRender, 0, 0, "Figures", "INT", Number::Int,
     "a whole number of tiles per row"},
    {"title", "--title", "", kRender | kFigure, 0, 0, "Figures", "TEXT", kNo, ""},
    {"block_numbering", "--block-numbering", "", kRender | kFigure, 0, 0, "Figures", "0|1", kNo, ""},
    {"notes", "--notes", "", kRender | kFigure | kStats, kSwitch, 0, "Figures", "", kNo, ""},
    {"figure_format", "--figure-format", "format", kRender | kStats, 0, 0, "Figures", "LIST", kNo, ""},
    {"out", "-o,--out", "", kRender | kFigure | kExplore | kStats, kByCall, kFigure | kExplore | kStats,
     "Output", "DIR", kNo, ""},
    {"save_raw", "--save-raw", "", kRender, kSwitch, 0, "Output", "", kNo, ""},
    {"all_heads", "--all-heads", "", kRender, kSwitch, 0, "Output", "", kNo, ""},
    {"quiet", "-q,--quiet", "", kRender | kEval | kFigure | kExplore | kStats | kDownload, kSwitch | kByCall,
     0, "Output", "", kNo, ""},
    {"explore", "--explore", "", kRender, kSwitch, 0, "Output", "", kNo, ""},
    {"budget_mb", "--budget-mb", "", kRender | kExplore, 0, 0, "Output", "FLOAT", Number::Float,
     "a size in MiB"},
    {"explore_blocks", "--explore-blocks", "", kRender | kExplore, 0, 0, "Output", "LIST", kNo, ""},
    {"jobs", "-j,--jobs", "", kRender | kStats, 0, 0, "Folders and runs", "INT", Number::Int,
     "a whole number of workers (0 = one per core)"},
    {"ext", "--ext", "", kRender | kStats, kRepeat, 0, "Folders and runs", "LIST", kNo, ""},
    {"shard", "--shard", "", kRender, 0, 0, "Folders and runs", "K/N", kNo, ""},
    {"manifest", "--manifest", "", kRender | kStats, 0, 0, "Folders and runs", "FILE", kNo, ""},
    {"skip_existing", "--skip-existing", "", kRender, kSwitch, 0, "Folders and runs", "", kNo, ""},
    {"contact_sheet", "--contact-sheet", "", kRender, 0, 0, "Folders and runs", "FILE", kNo, ""},
    {"sheet_columns", "--sheet-columns", "", kRender, 0, 0, "Folders and runs", "INT", Number::Int,
     "a whole number of thumbnails per row"},
    {"gallery", "--gallery", "", kRender, 0, 0, "Folders and runs", "DIR", kNo, ""},
    {"progress_every", "--progress-every", "", kRender, 0, 0, "Folders and runs", "INT", Number::Int,
     "a whole number of images (0 = automatic)"},
    {"masks", "--masks", "", kEval, kByCall, kEval, "Input", "DIR", kNo, ""},
    {"json", "--json", "", kEval, kByCall, 0, "Output", "FILE", kNo, ""},
    {"fusions", "--fusions", "", kEval, 0, 0, "Scoring", "LIST", kNo, ""},
    {"tolerance", "--tolerance", "", kEval, 0, 0, "Scoring", "INT", Number::Int, "a whole number of pixels"},
    {"perturb", "--perturb", "", kEval, 0, 0, "Scoring", "drop|zero", kNo, ""},
    {"sanity", "--sanity", "", kEval, kSwitch, 0, "Scoring", "", kNo, ""},
    {"row_labels", "--row-labels", "", kFigure, 0, 0, "Figures", "LIST", kNo, ""},
    {"column_labels", "--column-labels", "", kFigure, 0, 0, "Figures", "LIST", kNo, ""},
    {"no_npy", "--no-npy", "", kExplore, kSwitch, 0, "Output", "", kNo, ""},
    {"outlier_k", "--outlier-k", "", kStats, 0, 0, "Statistics", "FLOAT", Number::Float,
     "a number K (an outlier's norm > median + K x 1.4826 x MAD)"},
    {"norm_block", "--norm-block", "", kStats, 0, 0, "Statistics", "INT|last", Number::Block, kBlock},
    {"bins", "--bins", "", kStats, 0, 0, "Statistics", "INT", Number::Int,
     "a whole number of histogram bins"},
};

// The help texts: a setting's rows cover its commands (the first row naming a command is its).
const FlagText kTexts[] = {
    {"key", kRender | kEval | kInspect,
     "PyTorch checkpoint: the entry holding the state dict, e.g. teacher or state_dict/model (default: found "
     "by the usual keys)",
     "", nullptr},
    {"key", kFigure | kExplore | kStats,
     "PyTorch checkpoint: the entry holding the state dict, as for render", "", nullptr},
    {"act", kRender | kEval | kInspect,
     "the MLP activation gelu | gelu-tanh | quickgelu, for checkpoints that cannot say it (OpenAI CLIP / "
     "OpenCLIP, timm CLIP without its config.json)",
     "", nullptr},
    {"act", kFigure | kStats, "the MLP activation gelu | gelu-tanh | quickgelu, as for render", "", nullptr},
    {"act", kExplore, "the MLP activation, as for render", "", nullptr},
    {"pool", kRender | kEval | kInspect,
     "what the classifier reads: cls | mean | mean-all | map, for checkpoints that cannot say it "
     "(vit-pytorch before 2025-11)",
     "", nullptr},
    {"pool", kFigure | kStats, "what the classifier reads: cls | mean | mean-all | map, as for render", "",
     nullptr},
    {"pool", kExplore, "what the classifier reads, as for render", "", nullptr},
    {"query", kRender,
     "the row of this query token instead of the class token's: r<row>c<col> (a patch of the grid, 0-based), "
     "x<x>y<y> (the patch under that photo pixel), cls, dist or reg<k>; for the single view, "
     "{setting:layers} all and the strips (in {setting:views}: L5/h3:q=r7c3)",
     "", nullptr},
    {"column", kRender,
     "r<row>c<col>: that key patch's column instead of a row - the attention each query patch pays to it (in "
     "{setting:views}: L5/h3:k=r7c3)",
     "", nullptr},
    {"received", kRender,
     "the attention each patch receives, averaged over every query token (column means; in {setting:views}: "
     "L5/h3:received)",
     "", nullptr},
    {"dpi", kRender,
     "pixels per inch written into every PNG (pHYs) and the page size of PDF/SVG figures (default: none in "
     "NAME.png, 300 in figures)",
     "", nullptr},
    {"dpi", kFigure, "pixels per inch: the PNG's size and pHYs, the PDF/SVG page's scale", "300", nullptr},
    {"dpi", kStats, "pixels per inch of the figures (PNG size and pHYs, PDF/SVG page scale)", "300", nullptr},
    {"width_in", kRender,
     "the panel's and strips' width in inches: PDF/SVG pages this wide, PNGs width x {setting:dpi} pixels, "
     "text 8.5 pt (default: PNGs at the photo's pixels, PDF/SVG panels 3.5 in, strips 6.5 in)",
     "", nullptr},
    {"width_in", kFigure, "the figure's width in inches (7 for a two-column paper's full width)", "6.5",
     nullptr},
    {"width_in", kStats, "the figures' width in inches", "6.5", nullptr},
    {"strip_columns", kRender,
     "tiles per row of {setting:strip} layers / heads (default: layers at most 6 per row, heads "
     "ceil(sqrt(heads + 1)))",
     "", nullptr},
    {"title", kRender,
     "the title of the panel and strips instead of the automatic one (file, model, top-1 class); "
     "{setting:title} '' for none",
     "", nullptr},
    {"title", kFigure, "a title on top of the figure (default: none)", "", nullptr},
    {"block_numbering", kRender,
     "the number figures give the first block: 0 (default, as {setting:layer} and the view names) or 1 "
     "(block 1 .. depth, as papers often count)",
     "", nullptr},
    {"block_numbering", kFigure,
     "the number the column titles give the first block: 0 (default, as the view names) or 1 (block 1 .. "
     "depth)",
     "", nullptr},
    {"notes", kRender,
     "draw the explanatory notes (e.g. {setting:scale} map's) into the figures; by default they are printed "
     "on the terminal only",
     "", nullptr},
    {"notes", kFigure,
     "draw the note of {setting:scale} map under the figure (default: printed on the terminal)", "", nullptr},
    {"notes", kStats,
     "draw each figure's definition (what the distance and the outlier rule are) under it (default: none; "
     "docs/stats.md has them)",
     "", nullptr},
    {"manifest", kRender,
     "write a header line with the run's settings, then one JSON line per input (status, outputs, map "
     "statistics); an earlier manifest there is read back by {setting:skip_existing}",
     "", nullptr},
    {"manifest", kStats,
     "write a header line with the run's settings, then one JSON line per input (status, error, outputs, "
     "milliseconds), as render does",
     "", nullptr},
    {"skip_existing", kRender,
     "skip images whose outputs already exist and were made with the same settings (resume a run)", "",
     nullptr},
    {"contact_sheet", kRender,
     "after the run: every input's overlay in a labelled grid (file name, top-1 class, peak value) in "
     "FILE.png; pages FILE-1.png, FILE-2.png ... past 8000 pixels; failed inputs as grey tiles",
     "", nullptr},
    {"sheet_columns", kRender, "thumbnails per row of the contact sheet", "6", nullptr},
    {"gallery", kRender,
     "after the run: DIR/index.html, a static page of every input (thumbnail linked to its outputs, status "
     "or error, the manifest's statistics; sortable, filterable) and DIR/thumbs/",
     "", nullptr},
    {"progress_every", kRender,
     "when standard error is not a terminal: a progress line per this many images (default: auto)", "",
     nullptr},
    {"inputs", kRender | kEval | kStats, "image files or folders (folders are walked recursively, sorted)",
     "", nullptr},
    {"inputs", kFigure, "image files, one row each (folders are walked as render walks them, sorted)", "",
     nullptr},
    {"weights", kRender,
     "weights file (attnmap JSON, safetensors or a torch.save .pth/.pt/.bin; timm, DINOv2, DeiT, Hugging "
     "Face or torchvision names), a sharded model.safetensors.index.json or a Hugging Face model folder; "
     "default: the bundled weights/default.json",
     "", nullptr},
    {"weights", kEval, "weights file, as for render; default: the bundled weights/default.json", "", nullptr},
    {"weights", kFigure | kExplore | kStats,
     "weights, as for render; default: the bundled weights/default.json", "", nullptr},
    {"out", kRender, "output folder, created if missing", "attnmap-out", nullptr},
    {"out", kFigure, "the figure file: FIG.png, FIG.pdf or FIG.svg (replaced when it exists)", "", "FILE"},
    {"out", kExplore, "output folder: index.html, photo.png, data/, attention.npy", "", nullptr},
    {"out", kStats, "output folder, created if missing", "", nullptr},
    {"layer", kRender,
     "encoder block, 0-based; negative counts from the end, last = -1 (default: the weights' config "
     "default_layer, else the last; with {setting:rollout} the last)",
     "", nullptr},
    {"layer", kEval,
     "selected view: encoder block, 0-based, negative from the end, last = -1 (default: config "
     "default_layer, else the last; with {setting:rollout} the last)",
     "", nullptr},
    {"head", kRender,
     "a head index (negative counts from the end), or mean | max | min over heads (default: the weights' "
     "config default_head, else mean; with {setting:rollout} mean)",
     "", nullptr},
    {"head", kEval,
     "selected view: a head index, or mean | max | min (default: config default_head, else mean; with "
     "{setting:rollout} mean)",
     "", nullptr},
    {"colormap", kRender | kFigure | kExplore, "colour map: {colormaps}", "viridis", nullptr},
    {"colormap", kStats, "colour map of the outlier maps' token norms: {colormaps}", "viridis", nullptr},
    {"alpha", kRender | kFigure, "opacity of the heatmap over the photo, 0..1", "0.5", nullptr},
    {"alpha", kExplore, "the page's initial opacity of the heatmap, 0..1", "0.5", nullptr},
    {"alpha", kStats, "opacity of the norm map over the photo, 0..1", "0.5", nullptr},
    {"upsample", kRender | kFigure, "nearest | bilinear | bicubic", "bilinear", nullptr},
    {"upsample", kEval, "map to image pixels: nearest | bilinear | bicubic", "bilinear", nullptr},
    {"resize", kRender,
     "squash (whole image to the model size) | crop (timm eval: shorter side to size/crop_pct, 0.875 unless the "
     "config says (CLIP: 1.0), centre crop; the map is drawn inside the crop box only)",
     "squash", nullptr},
    {"resize", kEval, "squash | crop (as for render; outside the crop box the map is 0)", "squash", nullptr},
    {"resize", kFigure | kStats, "squash | crop (as for render)", "squash", nullptr},
    {"resize", kExplore, "squash | crop, as for render", "squash", nullptr},
    {"heads", kRender | kEval | kInspect | kFigure | kExplore | kStats,
     "number of attention heads, when the weights do not say", "", nullptr},
    {"labels", kRender,
     "the classifier's class names: a file with one name per line, a JSON list, or a JSON object {\"0\": "
     "\"tench\", ...} (a Hugging Face config's id2label); one name per class (default: the weights' config, "
     "else ImageNet-1k's for a 1000-class head)",
     "", nullptr},
    {"labels", kEval,
     "{render}; or a map of the ground truth's label names to the model's classes: a JSON object {\"Bag\": "
     "\"purse\", \"Sneaker\": 770, \"Trouser\": null} or a CSV label,class (docs/evaluation.md)",
     "", nullptr},
    {"labels", kFigure,
     "the classifier's class names: one per line, a JSON list or a JSON object {\"0\": \"tench\", ...} "
     "(id2label), as for render",
     "", nullptr},
    {"text", kRender | kEval | kFigure | kExplore,
     "a text as a class of a CLIP or SigLIP model (its text tower; may be repeated): top-5 over the texts (CLIP: "
     "softmax of logit_scale x cosine over them; SigLIP: each text's own sigmoid of logit_scale x cosine + "
     "logit_bias); they are also the classes the class-specific views explain (docs/text.md)",
     "", nullptr},
    {"texts", kRender | kEval | kFigure | kExplore,
     "texts from a file, one per line (UTF-8; BOM, blank lines and end spaces dropped)", "", nullptr},
    {"prompt", kRender | kFigure | kExplore,
     "a template, {} = the text ('a photo of a {}.'); several: their normalised text features averaged (CLIP's "
     "zero-shot recipe); with no texts, {setting:labels} FILE's names fill it", "", nullptr},
    {"prompt", kEval,
     "a template, {} = the text ('a photo of a {}.'); several: their normalised text features averaged (CLIP's "
     "zero-shot recipe); with no texts, the ground truth's class names fill it (labels.csv, item masks "
     "STEM.<class>.png, file names NNNN_<class>; docs/evaluation.md), or {setting:labels} FILE's names", "", nullptr},
    {"vocab", kRender | kEval | kFigure | kExplore,
     "the tokenizer's vocabulary: CLIP's bpe_simple_vocab_16e6.txt.gz, tokenizer.json, vocab.json + merges.txt or "
     "their folder; SigLIP's SentencePiece spiece.model (a .model file or a folder holding it) (default: the weights' "
     "folder's, else for CLIP the bundled OpenAI one)", "", nullptr},
    {"truncate_text", kRender | kEval | kFigure | kExplore,
     "cut a text over the text tower's context (CLIP: 77 tokens, SigLIP: 64) as open_clip does (default: refused)",
     "", nullptr},
    {"mean", kRender | kEval | kFigure | kExplore | kStats,
     "R,G,B normalisation mean (overrides the weights' config)", "", nullptr},
    {"std", kRender | kEval | kFigure | kExplore | kStats,
     "R,G,B normalisation std (overrides the weights' config)", "", nullptr},
    {"rollout", kRender,
     "draw attention rollout (Abnar & Zuidema 2020) through layers 0..{setting:layer}, heads fused by "
     "{setting:head}",
     "", nullptr},
    {"rollout", kEval,
     "selected view: attention rollout through layers 0..{setting:layer}, heads fused by {setting:head}", "",
     nullptr},
    {"discard", kRender,
     "with {setting:rollout}: zero this fraction of the smallest fused attentions per layer (never the class "
     "token's row/column or the diagonal), 0..1",
     "", nullptr},
    {"discard", kEval, "with {setting:rollout}: as for render, 0..1", "", nullptr},
    {"discard", kFigure, "rollout views: zero this fraction of the smallest fused attentions per layer, 0..1",
     "", nullptr},
    {"discard", kExplore,
     "the page's rollout: zero this fraction of the smallest fused attentions per block, 0..1", "", nullptr},
    {"threshold", kRender,
     "DINO mask: keep the largest attentions holding this fraction of the mass, (0, 1]; drawn as a filled, "
     "outlined region",
     "", nullptr},
    {"heads_grid", kRender, "the old name of {setting:strip} heads", "", nullptr},
    {"views", kRender,
     "several views from one forward pass, comma-separated, named as eval prints them; {view_grammar}; each "
     "view's files are NAME.<view>.png (L3/mean -> NAME.L3-mean.png); one view keeps NAME.png",
     "", nullptr},
    {"views", kEval,
     "the views to score instead of the default list, comma-separated, as for render {setting:views}; "
     "{view_grammar} (not photo); the first is the selected view",
     "", nullptr},
    {"views", kFigure, "the columns, comma-separated; {view_grammar}", "", nullptr},
    {"layers", kRender,
     "all: the view L<l>/<{setting:head}> for every block l (with {setting:views}: added to them)", "",
     nullptr},
    {"panel", kRender, "also write NAME.panel.*: photo | map alone | overlay, a title and a colour bar", "",
     nullptr},
    {"strip", kRender,
     "also write NAME.layers.* (layers: the map at every block) or NAME.heads.* (heads: every head of the "
     "block plus the fused map); one colour scale and bar; may be repeated",
     "", nullptr},
    {"scale", kRender,
     "what the colours stand for: map (each map its own min-max; NAME.png's default), figure (the min-max of "
     "each figure's maps, per unit; the default of panels and strips), run (per unit over every map of the "
     "run: bottom the smallest value, top the 99th percentile; values above in the top colour, bars marked "
     "with a triangle and '+') or VMIN,VMAX (fixed; values above marked alike)",
     "", nullptr},
    {"scale", kFigure,
     "one scale per unit over the figure's maps: run (bottom the smallest value, top the 99th percentile; "
     "values above in the top colour, the bar marked with a triangle and '+'), figure (their min-max); map "
     "(each map its own min-max, no colour bar); VMIN,VMAX (fixed; values above marked as run's)",
     "run", nullptr},
    {"style", kRender | kFigure, "overlay | mask (photo x map on black) | contour (iso-lines at the ticks)",
     "overlay", nullptr},
    {"alpha_by_value", kRender | kFigure, "overlay opacity follows the value: {setting:alpha} x scaled value",
     "", nullptr},
    {"no_legend", kRender, "NAME.png without its legend", "", nullptr},
    {"figure_format", kRender | kStats, "formats of the figures: png, pdf, svg, comma-separated", "png",
     nullptr},
    {"explain", kRender,
     "draw a class-specific explanation instead of attention: chefer (Chefer et al. 2021, every block; "
     "chefer@L-1: the last block only, as Chefer's CLIP notebook) | gradcam (Grad-CAM on a block's norm1 tokens) | attn-grad ({setting:layer}'s attention x gradient); "
     "needs a classifier head, or a CLIP's {setting:text} (the image-text logit)",
     "", nullptr},
    {"class_spec", kRender,
     "with {setting:explain}: class index, label (a CLIP's text), top1 or topK (one map per class, "
     "NAME.class-LABEL.png); default top1",
     "", nullptr},
    {"class_spec", kFigure,
     "class-specific views (chefer, gradcam, attn-grad): class index, label or top1 (default top1; topK is "
     "refused: a cell holds one map)",
     "", "INT|NAME|top1"},
    {"gradcam_layer", kRender,
     "with {setting:explain} gradcam: the block whose norm1 output is explained, negative from the end "
     "(default -1)",
     "", nullptr},
    {"gradcam_layer", kEval,
     "the gradcam view: the block whose norm1 output is explained, negative from the end (default -1)", "",
     nullptr},
    {"gradcam_layer", kFigure, "gradcam without @L: the block explained, negative from the end (default -1)",
     "", nullptr},
    {"size", kRender,
     "model input size S or W,H in pixels (multiples of the patch size, e.g. 448 or 518); the position "
     "embeddings are resampled as {setting:pos_interp} says",
     "", nullptr},
    {"size", kEval | kFigure | kExplore | kStats, "model input size S or W,H in pixels, as for render", "",
     nullptr},
    {"pos_interp", kRender | kEval,
     "with {setting:size}: resample the position embeddings as timm | timm-legacy | dino | hf | hf-legacy | "
     "torchvision does (default: what the checkpoint's layout implies; attnmap inspect shows it)",
     "", nullptr},
    {"pos_interp", kFigure | kStats,
     "with {setting:size}: how the position embeddings are resampled, as for render", "", nullptr},
    {"pos_interp", kExplore, "with {setting:size}: as for render", "", nullptr},
    {"precision", kRender,
     "fp32 (default) | bf16: the linear layers and attention products in bfloat16 with float32 accumulation "
     "(oneDNN; CPUs with AVX512_BF16 or AMX), LayerNorm, softmax, GELU and the maps in float32; error budget "
     "in docs/benchmarks.md; not with the class-specific views",
     "", nullptr},
    {"precision", kEval, "fp32 only: eval's scores are measured in float32", "", nullptr},
    {"precision", kFigure | kStats, "fp32 | bf16: the products' arithmetic, as for render", "", nullptr},
    {"save_raw", kRender, "also write the map as NumPy .npy (float32, (grid_h, grid_w))", "", nullptr},
    {"all_heads", kRender, "with {setting:save_raw}: write every head, shape (H, grid_h, grid_w)", "",
     nullptr},
    {"quiet", kRender | kFigure | kExplore | kStats, "print only errors", "", nullptr},
    {"quiet", kEval, "print only errors, notes on masks and labels, and the summary", "", nullptr},
    {"quiet", kDownload, "no progress bar and no notes", "", nullptr},
    {"jobs", kRender, "images rendered at once; 0 (the default) = one per usable core", "", nullptr},
    {"jobs", kStats, "images computed at once; 0 (the default) = one per usable core", "", nullptr},
    {"ext", kRender | kStats,
     "extensions picked in folders, e.g. jpg,png (default: every format attnmap reads)", "", nullptr},
    {"shard", kRender, "render only part K of N of the sorted inputs, e.g. 2/4 (Slurm arrays)", "", nullptr},
    {"max_pixels", kRender | kEval | kFigure | kExplore | kStats,
     "refuse images with more pixels than this, before decoding", "100000000", nullptr},
    {"no_exif", kRender, "ignore the JPEG EXIF orientation (default: the photo is turned as viewers show it)",
     "", nullptr},
    {"no_exif", kEval, "ignore the JPEG EXIF orientation of images and masks (as for render)", "", nullptr},
    {"no_exif", kFigure | kStats, "ignore the JPEG EXIF orientation", "", nullptr},
    {"no_exif", kExplore, "ignore the JPEG EXIF orientation, as for render", "", nullptr},
    {"explore", kRender,
     "also write each image's explorer, NAME.explore/index.html (docs/explore.md), linked from the "
     "{setting:gallery}",
     "", nullptr},
    {"budget_mb", kRender,
     "with {setting:explore}: the explorer's data files at most this many MiB (default 8)", "", nullptr},
    {"budget_mb", kExplore,
     "the data files at most this many MiB (default 8): past it, single heads of the first blocks are left "
     "out, and the page and terminal say which",
     "", nullptr},
    {"explore_blocks", kRender, "with {setting:explore}: single heads only of these blocks", "", nullptr},
    {"explore_blocks", kExplore,
     "store single heads only of these blocks, e.g. 0,5,11 (as the budget allows)", "", nullptr},
    {"masks", kEval,
     "folder of masks named like the images (same stem); a non-zero colour channel = object (alpha ignored)",
     "", nullptr},
    {"fusions", kEval,
     "head fusions scored at every layer, comma-separated: mean,max,min or head indices (default: mean; not "
     "with {setting:views})",
     "", nullptr},
    {"tolerance", kEval, "pointing game: a hit within this many pixels of the mask", "0", nullptr},
    {"json", kEval, "also write the per-image and summary results as JSON here (a missing folder is created)",
     "", nullptr},
    {"perturb", kEval,
     "perturbation test (Chefer et al. 2021): remove patches in order of each view's map, 10 % steps; drop "
     "(tokens leave the sequence) | zero (their pixels set to black); needs a classifier head",
     "", nullptr},
    {"sanity", kEval,
     "model randomisation (Adebayo et al. 2018): blocks re-initialised from the top, rank correlation of "
     "each view's maps with the trained model's",
     "", nullptr},
    {"weights_file", kInspect,
     "weights file (attnmap JSON, safetensors or a torch.save .pth/.pt/.bin), model.safetensors.index.json "
     "or Hugging Face model folder; or an output PNG / .npy",
     "", nullptr},
    {"row_labels", kFigure,
     "the row labels, one per image, comma-separated ('\\,' for a comma inside a label, an empty item for "
     "none; default: the file names)",
     "", nullptr},
    {"column_labels", kFigure,
     "the column titles, one per view of {setting:views}, comma-separated as {setting:row_labels} (default: "
     "the views' words, 'block 1, head 3')",
     "", nullptr},
    {"inputs", kExplore, "the image", "", nullptr},
    {"no_npy", kExplore, "do not write attention.npy (float32 (L, H, T, T): large for big models)", "",
     nullptr},
    {"outlier_k", kStats,
     "a patch token is a high-norm outlier when its norm > median + K x 1.4826 x MAD of its image's "
     "patch-token norms at that block",
     "5", nullptr},
    {"norm_block", kStats,
     "the block whose token norms the histogram and the outlier maps show, negative from the end", "-1",
     nullptr},
    {"bins", kStats, "bins of the token-norm histogram", "50", nullptr},
    {"names", kDownload, "ORG/NAME, ORG/NAME@REVISION or hf-hub:ORG/NAME", "", nullptr},
};

// A command's own order within its topics (ids, topic by topic), where it differs from the registry's: the
// order each command's help had before the registry (issue 42 kept it). Settings not named here follow the
// named ones of their topic, in the registry's order.
const std::pair<unsigned, const char*> kHelpOrders[] = {
    {kEval, "masks max_pixels no_exif  weights resize heads key act pool labels size pos_interp precision mean "
            "std  json quiet"},
    {kFigure, "weights key heads act pool size pos_interp resize mean std precision labels  views discard "
              "class_spec gradcam_layer  scale colormap style alpha alpha_by_value upsample  width_in dpi "
              "title row_labels column_labels block_numbering notes"},
    {kExplore, "weights resize size pos_interp heads key act pool mean std  out budget_mb explore_blocks no_npy"},
    {kStats, "weights key heads act pool size pos_interp resize mean std precision  figure_format dpi width_in"},
};

const CommandWords kCommands[] = {
    {"render", kRender, "render class-token attention heatmaps over images",
     "docs/cli.md, docs/figures.md, docs/batch.md", "INPUT...", "inputs"},
    {"eval", kEval,
     "measure how well attention maps localise the object: pointing game, energy-in-mask per layer and "
     "rollout, "
     "top-1 accuracy, against masks named like the images",
     "docs/evaluation.md", "INPUT...", "inputs"},
    {"inspect", kInspect,
     "print what attnmap reads from a checkpoint: layout, token layout, grid, depth, heads, parameter count "
     "and "
     "every config value with where it came from; given an output (PNG, .npy), the settings that made it",
     "docs/checkpoints.md", "WEIGHTS", "weights"},
    {"figure", kFigure,
     "draw one figure for a paper: rows = images, columns = views ({setting:views} photo,L3/mean,rollout), "
     "column "
     "titles, row labels and colour bars in the maps' units, as PNG, PDF or SVG (-o's extension)",
     "docs/figures.md", "IMAGE...", "inputs"},
    {"explore", kExplore,
     "write a self-contained page (opens from file://, no network) to explore every attention row of one "
     "image: "
     "every block, head, fusion and rollout; docs/explore.md",
     "docs/explore.md", "IMAGE", "image"},
    {"stats", kStats,
     "per block and head: mean attention distance (ViT paper Fig. 7), attention entropy, the class token's "
     "attention to itself and the other prefix tokens; per block the token norms and their high-norm "
     "outliers "
     "(registers paper Fig. 3); CSV, JSON, figures (docs/stats.md)",
     "docs/stats.md", "INPUT...", "inputs"},
    {"download", kDownload,
     "fetch Hugging Face Hub models into huggingface_hub's cache, exactly the files render would read (for a "
     "login "
     "node; compute nodes then run with HF_HUB_OFFLINE=1); prints each snapshot folder",
     "docs/hub.md", "NAME...", "names"},
};

}  // namespace

const std::vector<std::string>& help_topics() {
  static const std::vector<std::string> topics = {
      "Input",   "Model",  "Text",    "Views", "Drawing", "Figures", "Output", "Folders and runs",
      "Scoring", "Statistics", "Other"};
  return topics;
}

const std::vector<Flag>& all_flags() {
  static const std::vector<Flag> flags(std::begin(kFlags), std::end(kFlags));
  return flags;
}

std::vector<const Flag*> flags_in_help_order(unsigned bit) {
  std::vector<std::string> own;  // the command's own order, when it has one
  for (const auto& [command, ids] : kHelpOrders) {
    if (command != bit) continue;
    std::istringstream words(ids);
    for (std::string id; words >> id;) own.push_back(id);
  }
  const auto& topics = help_topics();
  const auto rank = [&](const Flag* f) {
    const long topic = std::find(topics.begin(), topics.end(), f->topic) - topics.begin();
    const long at = std::find(own.begin(), own.end(), f->id) - own.begin();
    return std::make_pair((f->traits & kPositional) ? -1 : topic, at);  // at = own.size(): not named
  };
  std::vector<const Flag*> out;
  for (const Flag& f : all_flags())
    if (f.commands & bit) out.push_back(&f);
  std::stable_sort(out.begin(), out.end(), [&](const Flag* a, const Flag* b) { return rank(a) < rank(b); });
  return out;
}

const std::vector<CommandWords>& all_commands() {
  static const std::vector<CommandWords> commands(std::begin(kCommands), std::end(kCommands));
  return commands;
}

const CommandWords* command_named(const std::string& name) {
  for (const CommandWords& c : all_commands())
    if (name == c.name) return &c;
  return nullptr;
}

const Flag* flag_of(const std::string& id) {
  for (const Flag& f : all_flags())
    if (id == f.id) return &f;
  return nullptr;
}

std::string long_flag(const Flag& f) {
  const std::string names = f.names;
  const size_t at = names.find("--");
  return at == std::string::npos ? names : names.substr(at);
}

const Flag* flag_spelled(const std::string& flag) {
  for (const auto& [alias, id] : flag_aliases())
    if (flag == alias) return flag_of(id);
  for (const Flag& f : all_flags()) {
    if (f.traits & kPositional) continue;
    const std::string names = f.names;
    if (flag == long_flag(f) || (names.size() > 3 && names[2] == ',' && flag == names.substr(0, 2)))
      return &f;
  }
  return nullptr;
}

namespace {

// The row of kTexts for `f` and the command `bit`; nullptr when none.
const FlagText* text_row(const Flag& f, unsigned bit) {
  for (const FlagText& t : kTexts)
    if (std::string(t.id) == f.id && (t.commands & bit)) return &t;
  return nullptr;
}

// `text` with {colormaps}, {view_grammar} and {render} filled in.
std::string filled(std::string text, const Flag& f) {
  const auto put = [&text](const std::string& key, const std::string& value) {
    for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
  };
  if (text.find("{colormaps}") != std::string::npos) {
    std::string cmaps;
    for (const auto& n : colormap_names()) cmaps += (cmaps.empty() ? "" : ", ") + n;
    put("{colormaps}", cmaps);
  }
  if (text.find("{view_grammar}") != std::string::npos) put("{view_grammar}", view_grammar());
  if (text.find("{render}") != std::string::npos) {
    const FlagText* r = text_row(f, kRender);
    put("{render}", r ? r->help : "");
  }
  return text;
}

}  // namespace

std::string help_of(const Flag& f, unsigned bit) {
  const FlagText* t = text_row(f, bit);
  return t ? spell_as_flags(filled(t->help, f)) : "";
}

std::string shown_default_of(const Flag& f, unsigned bit) {
  const FlagText* t = text_row(f, bit);
  return t ? t->shown_default : "";
}

std::string value_name_of(const Flag& f, unsigned bit) {
  const FlagText* t = text_row(f, bit);
  return t && t->value ? t->value : f.value;
}

std::string number_check(const Flag& f, std::string& s) {
  if (s.empty()) return "";
  const std::string refused = "expected " + std::string(f.expects) + ", found '" + s + "'";
  if (std::isspace(static_cast<unsigned char>(s[0]))) return refused;
  char* end = nullptr;
  if (f.number == Number::Float) {
    (void)std::strtod(s.c_str(), &end);
    return *end == '\0' ? "" : refused;
  }
  if (f.number == Number::Block && s == "last") {
    s = "-1";
    return "";
  }
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0') return refused;
  if (errno == ERANGE || (f.number != Number::Long && (v < INT_MIN || v > INT_MAX)))
    return refused + " (out of range)";
  s = std::to_string(v);
  return "";
}

const std::vector<std::pair<std::string, std::string>>& flag_aliases() {
  static const std::vector<std::pair<std::string, std::string>> aliases = {{"--colourmap", "colormap"}};
  return aliases;
}

const std::vector<std::pair<std::string, std::string>>& flag_suggestions() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"--output", "out"},           {"--outdir", "out"},         {"--output-dir", "out"},
      {"--model", "weights"},        {"--checkpoint", "weights"}, {"--ckpt", "weights"},
      {"--cmap", "colormap"},        {"--color", "colormap"},     {"--colour", "colormap"},
      {"--opacity", "alpha"},        {"--threads", "jobs"},       {"--workers", "jobs"},
      {"--block", "layer"},          {"--fusion", "head"},        {"--image-size", "size"},
      {"--img-size", "size"},        {"--resolution", "size"},    {"--npy", "save_raw"},
      {"--format", "figure_format"},
  };
  return table;
}

}  // namespace attnmap
