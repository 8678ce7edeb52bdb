// options_cli.cpp - the options layer's checks of render, eval and inspect: the settings as given (stored in
// CliArgs by make_request, app/cli/request.cpp) parsed and checked into the checked option structs
// (RenderOptions, BatchOptions, EvalOptions; options.hpp). The option tables are the registry's
// (app/cli/flag_table.cpp).
#include <algorithm>
#include <sstream>

#include "app/cli/options.hpp"
#include "engine/batch.hpp"
#include "app/commands/explore_cmd.hpp"
#include "engine/text/zero_shot.hpp"
#include "engine/walk.hpp"
#include "core/setting_ref.hpp"
#include "draw/colormap.hpp"
#include "draw/figures.hpp"
#include "maps/explain.hpp"
#include "model/pos_embed.hpp"

namespace attnmap {

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
  ro.resize = parse_resize_option(setting_ref("resize"), a.resize);
  if (!a.heads.empty())
    ro.overrides.num_heads = checked_heads(parse_int_option(setting_ref("heads"), a.heads));
  if (!a.key.empty()) ro.overrides.key = a.key;
  apply_model_flags(a.act, a.pool, ro.overrides);
  if (!a.size.empty()) ro.size = parse_size_option(setting_ref("size"), a.size);
  if (!a.pos_interp.empty())
    ro.pos_interp = with_setting("pos_interp", [&] { return parse_pos_interp(a.pos_interp); });
  if (!a.mean.empty()) ro.overrides.mean = parse_rgb_option(setting_ref("mean"), a.mean);
  if (!a.std.empty()) ro.overrides.std = parse_rgb_option(setting_ref("std"), a.std, true);
  ro.precision = parse_precision_option(setting_ref("precision"), a.precision);
}

// --text, --texts, --prompt, --vocab, --truncate-text into ro.text (model_args.hpp): texts as a CLIP's classes
// (the model loads its text tower for them: ModelOverrides::keep_text). --texts FILE is read here, before the
// model.
void apply_text_args(const TextArgs& a, RenderOptions& ro) {
  TextSpec& t = ro.text;
  t.texts = a.text;
  std::vector<int> lines;  // --texts FILE's line of each of its texts
  if (!a.texts.empty()) {
    const std::vector<std::string> more = read_texts_file(a.texts, &lines);
    t.texts.insert(t.texts.end(), more.begin(), more.end());
    t.texts_file = a.texts;
  }
  for (size_t i = 0; i < t.texts.size(); ++i)
    if (std::find(t.texts.begin(), t.texts.begin() + static_cast<long>(i), t.texts[i]) != t.texts.begin() + static_cast<long>(i)) {
      const std::string where = i < a.text.size() ? setting_ref("text")
                                                  : setting_ref("texts") + " " + printable(a.texts) + ": line " +
                                                        std::to_string(lines[i - a.text.size()]) + ":";
      throw Error(where + " '" + printable(t.texts[i]) + "' is given twice (each text is a class)");
    }
  check_prompt_templates(a.prompt);
  t.templates = a.prompt;
  t.vocab = a.vocab;
  t.truncate = a.truncate;
  if (t.texts.empty() && !t.templates.empty()) {
    if (ro.labels_file.empty() && !t.truth_names)  // eval: the ground truth's class names (TextSpec::truth_names)
      throw Error(setting_ref("prompt") + " fills its {} with texts: give " + setting_ref("text") + ", " +
                  setting_ref("texts") + " or " + setting_ref("labels") + " FILE");
    t.labels_as_texts = !ro.labels_file.empty();
    t.truth_names = t.truth_names && !t.labels_as_texts;
  } else if (t.texts.empty() && (!t.vocab.empty() || t.truncate)) {
    throw Error(setting_ref(t.truncate ? "truncate_text" : "vocab") + " applies to texts: give " +
                setting_ref("text") + " or " + setting_ref("texts"));
  } else if (!t.texts.empty() && !ro.labels_file.empty()) {
    throw Error(setting_ref("labels") + " names a classifier's classes; with " + setting_ref("text") +
                " the texts are the classes (with " + setting_ref("prompt") + " and no texts, its names fill the template)");
  }
  keep_text_tower(ro.overrides, t.given());
}

namespace {

// The view options (--layer, --head, --size, --discard, --threshold, --strip, --scale, ...) into a.ro.
void apply_view_options(CliArgs& a) {
  RenderOptions& ro = a.ro;
  if (!a.layer_s.empty()) ro.layer = parse_int_option(setting_ref("layer"), a.layer_s);
  if (!a.head_s.empty()) ro.head = with_setting("head", [&] { return parse_head(a.head_s); });
  if (!a.views_s.empty())
    ro.views = with_prefix(setting_ref("views") + ":", [&] { return parse_views(a.views_s); });
  if (!a.size_s.empty()) ro.size = parse_size_option(setting_ref("size"), a.size_s);
  if (!a.pos_interp_s.empty())
    ro.pos_interp = with_setting("pos_interp", [&] { return parse_pos_interp(a.pos_interp_s); });
  ro.precision = parse_precision_option(setting_ref("precision"), a.precision_s);
  if (!a.discard_s.empty()) ro.discard = parse_number_option(setting_ref("discard"), a.discard_s);
  if (!a.threshold_s.empty())
    ro.threshold = static_cast<float>(parse_number_option(setting_ref("threshold"), a.threshold_s));
  if (!a.layers_s.empty()) {
    if (a.layers_s != "all")
      throw Error(setting_ref("layers") + " expects all, found '" + a.layers_s + "' (name single blocks in " +
                  setting_ref("views") + ")");
    ro.layers_all = true;
  }
  for (const std::string& item : a.strip_v) {
    if (item == "heads") ro.heads_grid = true;
    else if (item == "layers") ro.strip_layers = true;
    else
      throw Error(setting_ref("strip") + " expects layers or heads, found '" + item + "'");
  }
  const int queries = !a.query_s.empty() + !a.column_s.empty() + a.received;
  if (queries > 1)
    throw Error(setting_ref("query") + ", " + setting_ref("column") + " and " + setting_ref("received") +
                " each name the line to read; give one");
  const std::string query = !a.query_s.empty() ? "q=" + a.query_s : !a.column_s.empty() ? "k=" + a.column_s
                            : a.received ? "received" : "";
  const std::string query_flag = !a.query_s.empty()    ? setting_ref("query")
                                 : !a.column_s.empty() ? setting_ref("column")
                                                       : setting_ref("received");
  if (!query.empty()) ro.query = with_prefix(query_flag, [&] { return parse_token_query(query); });
  if (!a.scale_s.empty()) ro.scale = with_setting("scale", [&] { return parse_scale(a.scale_s); });
  ro.style = with_setting("style", [&] { return parse_style(a.style_s); });
  if (!a.dpi_s.empty()) ro.dpi = parse_number_option(setting_ref("dpi"), a.dpi_s);
  if (!a.width_in_s.empty()) ro.width_in = parse_number_option(setting_ref("width_in"), a.width_in_s);
  if (!a.strip_columns_s.empty())
    ro.strip_columns = parse_int_option(setting_ref("strip_columns"), a.strip_columns_s);
  if (!a.block_numbering_s.empty()) ro.block_base = parse_block_numbering(a.block_numbering_s);
  ro.figure_formats = with_setting("figure_format", [&] { return parse_figure_formats(a.formats_s); });
}

// The loading, drawing, model and batch options into a.ro and a.bo.
void apply_run_options(CliArgs& a, const std::set<std::string>& given, bool eval) {
  RenderOptions& ro = a.ro;
  BatchOptions& bo = a.bo;
  ro.load.apply_exif = !a.no_exif;
  if (a.max_pixels < 1)
    throw Error(setting_ref("max_pixels") + " must be >= 1, found " + std::to_string(a.max_pixels));
  ro.load.max_pixels = static_cast<uint64_t>(a.max_pixels);
  if (bo.progress_every < 0)
    throw Error(setting_ref("progress_every") + " must be >= 0 (0: automatic), found " +
                std::to_string(bo.progress_every));
  ro.upsample = with_setting("upsample", [&] { return parse_upsample(a.upsample_s); });
  ro.resize = parse_resize_option(setting_ref("resize"), a.resize_s);
  if (given.count("heads")) ro.overrides.num_heads = checked_heads(a.heads);
  if (given.count("key")) ro.overrides.key = a.key_s;
  apply_model_flags(a.act_s, a.pool_s, ro.overrides);
  if (given.count("class_spec"))
    ro.class_spec = with_setting("class_spec", [&] { return parse_class_spec(a.class_s); });
  if (!a.explain_s.empty())
    ro.explain = with_setting("explain", [&] { return parse_class_specific_view(a.explain_s); });
  if (given.count("title")) ro.title = a.title_s;
  if (!a.colormap_s.empty())
    ro.colormap = with_setting("colormap", [&] { return parse_colormap(a.colormap_s); });
  if (!a.gradcam_layer_s.empty())
    ro.gradcam_layer = parse_int_option(setting_ref("gradcam_layer"), a.gradcam_layer_s);
  if (!a.mean_s.empty()) ro.overrides.mean = parse_rgb_option(setting_ref("mean"), a.mean_s);
  if (!a.std_s.empty()) ro.overrides.std = parse_rgb_option(setting_ref("std"), a.std_s, true);
  bo.ext = parse_extensions(bo.ext);
  if (!a.shard_s.empty()) parse_shard(a.shard_s, &bo.shard_index, &bo.shard_count);
  bo.sheet_columns_given = given.count("sheet_columns") > 0;
  if (!eval) {
    if ((!a.budget_s.empty() || !a.explore_blocks_s.empty()) && !ro.writes(OutputKind::Explore))
      throw Error(setting_ref("budget_mb") + " and " + setting_ref("explore_blocks") + " apply to " +
                  setting_ref("explore"));
    apply_explore_budget(a.budget_s, a.explore_blocks_s, ro);
  }
}


// render's figures that cairo cannot draw, refused before any map (status 2): a PNG panel or strip wider than
// kMaxCanvas pixels at --width-in x --dpi. (A contact sheet row of more thumbnails than its width holds needs
// the number of images: engine/batch_plan's check_run_paths_early.)
void check_figure_sizes(const RenderOptions& ro) {
  const bool png = std::find(ro.figure_formats.begin(), ro.figure_formats.end(), FigureFormat::Png) !=
                   ro.figure_formats.end();
  if (ro.width_in && png && (ro.panel || ro.strip_layers || ro.heads_grid))
    check_figure_width(*ro.width_in, ro.dpi.value_or(300.0),
                       " (a PDF or SVG, " + setting_ref("figure_format") + " pdf, is not held to this limit)");
}

}  // namespace

void check_command(CliArgs& a, const std::set<std::string>& given, bool eval) {
  apply_view_options(a);
  apply_run_options(a, given, eval);
  check_drawing_options(a.ro);
  // eval's --prompt without texts: the class names of its ground truth fill it (engine/eval/eval_run.cpp).
  a.ro.text.truth_names = eval && a.text.text.empty() && a.text.texts.empty() && !a.text.prompt.empty();
  apply_text_args(a.text, a.ro);
  if (!eval) {
    check_batch_options(a.ro, a.bo);  // render's: before the model loads (run_render takes them checked)
    check_figure_sizes(a.ro);
    return;
  }
  if (a.ro.precision != Precision::F32)
    throw Error(setting_ref("precision") +
                " bf16: eval runs in float32 only (its deletion curves and scores are not measured in bf16)");
  if (a.ro.discard > 0.0 && !a.ro.rollout && a.ro.views.empty())
    throw Error(setting_ref("discard") + " applies to " + setting_ref("rollout") + " only");
  EvalOptions& eo = a.eo;
  eo.view = a.ro;
  eo.fusions.clear();
  std::stringstream fs(a.fusions_s);  // empty: --fusions not given (an empty value is refused earlier)
  for (std::string f; std::getline(fs, f, ',');)
    eo.fusions.push_back(with_prefix(setting_ref("fusions") + ": each", [&] { return parse_head(f); }));
  if (!a.fusions_s.empty() && a.fusions_s.back() == ',')  // getline drops an empty last item; ",," is caught later
    throw Error(setting_ref("fusions") + " expects a comma-separated list such as mean,max, found '" +
                a.fusions_s + "'");
  if (!a.perturb_s.empty()) {  // an empty value is refused earlier
    if (a.perturb_s == "drop")
      eo.perturb = PerturbMode::Drop;
    else if (a.perturb_s == "zero")
      eo.perturb = PerturbMode::Zero;
    else
      throw Error(setting_ref("perturb") + " expects drop or zero, found '" + a.perturb_s + "'");
  }
}

ModelOverrides inspect_overrides(const CliArgs& a, const std::set<std::string>& given) {
  ModelOverrides ov;
  if (given.count("heads")) ov.num_heads = checked_heads(a.inspect_heads);
  apply_model_flags(a.act_s, a.pool_s, ov);
  if (given.count("key")) ov.key = a.key_s;  // an empty value is refused at the door
  return ov;
}

}  // namespace attnmap
