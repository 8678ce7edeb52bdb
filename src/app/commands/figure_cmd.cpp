// figure_cmd.cpp - `attnmap figure` on the command line: its settings as given checked into the engine's
// FigurePlan (check_figure_args: every check that needs no model and reads no image), then the engine's
// figure_to_file (engine/figure/) with the terminal's hooks.
#include "core/names.hpp"
#include "app/commands/figure_cmd.hpp"

#include <filesystem>

#include "app/cli/options.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "draw/canvas.hpp"
#include "draw/colormap.hpp"
#include "engine/batch_hooks.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

// Texts asked (--text, --texts, or --prompt naming the --labels): a class-specific view may be a column per text.
bool has_texts(const FigureArgs& a) { return !a.text.text.empty() || !a.text.texts.empty() || !a.text.prompt.empty(); }

// The loading and drawing options into plan.ro / plan.style, as render reads them.
void check_drawing_options(const FigureArgs& a, FigurePlan& p) {
  RenderOptions& ro = p.ro;
  ro.inputs = a.inputs;
  apply_model_input(a.model, ro);
  ro.colormap = with_prefix(setting_ref("colormap"), [&] { return parse_colormap(a.colormap); });  // Viridis -> viridis
  ro.alpha = a.alpha;
  ro.upsample = with_prefix(setting_ref("upsample"), [&] { return parse_upsample(a.upsample); });
  if (a.max_pixels < 1) throw Error(setting_ref("max_pixels") + " must be >= 1, found " + std::to_string(a.max_pixels));
  ro.load.max_pixels = static_cast<uint64_t>(a.max_pixels);
  ro.load.apply_exif = !a.no_exif;
  ro.quiet = a.quiet;
  ro.style = with_prefix(setting_ref("style"), [&] { return parse_style(a.style); });
  ro.alpha_by_value = a.alpha_by_value;
  ro.dpi = a.dpi;
  check_drawing_options(ro);
  if (!(a.width_in > 0.0 && a.width_in <= 100.0))
    throw Error(setting_ref("width_in") + " must be in (0, 100] inches, found " + shown_number(a.width_in));
  p.width_in = a.width_in;
  p.style.style = ro.style;
  p.style.alpha_by_value = ro.alpha_by_value;
  p.style.alpha = ro.alpha;
  p.style.cmap = ro.colormap.table;
  p.style.upsample = ro.upsample;
}

// The views and what goes with them: --scale, --discard, --class, --gradcam-layer.
void check_view_options(const FigureArgs& a, FigurePlan& p) {
  p.views = with_prefix(setting_ref("views") + ":", [&] { return parse_views(a.views); });
  bool maps = false, rollout = false, class_specific = false, gradcam_default = false;
  for (const ViewSpec& v : p.views) {
    maps = maps || v.kind != ViewKind::Photo;
    rollout = rollout || v.kind == ViewKind::Rollout;
    class_specific = class_specific || is_class_specific(v.kind);
    gradcam_default = gradcam_default || (v.kind == ViewKind::GradCam && !v.layer_given);
  }
  if (!maps)
    throw Error(setting_ref("views") + " '" + a.views +
                "' has no map to show (photo is the photo alone): add a view such as L3/mean");
  p.scale = with_prefix(setting_ref("scale"), [&] { return parse_scale(a.scale); });
  p.ro.scale = p.scale;
  if (!a.discard.empty()) {
    p.settings.discard = parse_number_option(setting_ref("discard"), a.discard);
    p.ro.discard = p.settings.discard;
    check_drawing_options(p.ro);
    if (!rollout) throw Error(setting_ref("discard") + " applies to the rollout views; " + setting_ref("views") + " has none");
    p.ro.discard = p.settings.discard;
  }
  if (!a.gradcam_layer.empty()) {
    const int l = parse_int_option(setting_ref("gradcam_layer"), a.gradcam_layer);  // resolve_views checks it against the model
    if (!gradcam_default)
      throw Error(setting_ref("gradcam_layer") + " applies to a gradcam view without @L<layer>; " + setting_ref("views") +
                  " has none");
    p.settings.gradcam_layer = l;
    p.ro.gradcam_layer = p.settings.gradcam_layer;
  }
  if (!a.class_spec.empty()) {
    if (!class_specific)
      throw Error(setting_ref("class_spec") + " chooses the class of the class-specific views (chefer, gradcam, attn-grad); " +
                  setting_ref("views") + " has none");
    p.classes = with_prefix(setting_ref("class_spec"), [&] { return parse_class_spec(a.class_spec); });
    if (p.classes.kind == ClassSpec::Kind::TopK && p.classes.k > 1)
      // Worded to read alike spelled as flags and as keywords (no setting followed by a bare value).
      throw Error("a figure cell holds one map, so " + setting_ref("class_spec") + " takes top1, a class index or a label "
                  "here, found '" + a.class_spec + "' (render's " + setting_ref("explain") +
                  " draws the top K classes, one file each" +
                  (has_texts(a) ? "; with texts, leave " + setting_ref("class_spec") + " out for a column per text)" : ")"));
    p.ro.class_spec = p.classes;
  }
}

// The words: --title, --row-labels (counted against the images later), --column-labels (one per view),
// --block-numbering, --notes, --labels. Set after check_drawing_options: render's needs a --panel for them.
void check_word_options(const FigureArgs& a, FigurePlan& p) {
  if (!a.title.empty()) p.ro.title = a.title;
  if (!a.row_labels.empty())
    p.row_labels = with_prefix(setting_ref("row_labels"), [&] { return split_label_list(a.row_labels); });
  if (!a.column_labels.empty()) {
    p.column_labels = with_prefix(setting_ref("column_labels"), [&] { return split_label_list(a.column_labels); });
    if (p.column_labels->size() != p.views.size() && !has_texts(a))  // with texts: counted once the columns are known
      throw Error(setting_ref("column_labels") + " has " + counted(p.column_labels->size(), "label") + " for the " +
                  counted(p.views.size(), "view") + " of " + setting_ref("views") + " (one per column, photo included)");
  }
  if (!a.block_numbering.empty()) p.ro.block_base = parse_block_numbering(a.block_numbering);
  p.ro.notes = a.notes;
  p.ro.labels_file = a.labels;
  apply_text_args(a.text, p.ro);
}

}  // namespace

FigurePlan check_figure_args(const FigureArgs& a, bool with_out) {
  FigurePlan p;
  p.out = with_out ? a.out : std::string();
  check_drawing_options(a, p);
  check_view_options(a, p);
  const std::string ext = fs::path(a.out).extension().string();
  if (with_out && ext != ".png" && ext != ".pdf" && ext != ".svg")
    throw Error("-o " + a.out + ": a figure is written as .png, .pdf or .svg (the extension picks the format), found '" +
                ext + "'");
  if (with_out) check_figure_path(a.out);
  // Wider than cairo draws (--width-in x --dpi pixels): refused before the model loads, for a PDF or SVG too.
  const bool vector = with_out && (ext == ".pdf" || ext == ".svg");
  const std::string also = std::string(ext == ".pdf" ? "; a PDF" : "; an SVG") + " figure is laid out in the same " +
                           "pixels at " + setting_ref("dpi") + " and held to the same limit";
  check_figure_width(a.width_in, a.dpi, vector ? also : "");
  with_prefix(setting_ref("width_in") + " / " + setting_ref("dpi") + ":",
            [&] { check_comparison_width(static_cast<int>(p.views.size()), a.width_in, a.dpi); });
  check_word_options(a, p);
  figure_font();  // a missing font is one usage error, not a failure after every image was computed
  return p;
}

int run_figure(const FigurePlan& p) { return figure_to_file(p, terminal_hooks()); }

}  // namespace attnmap
