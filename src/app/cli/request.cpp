// request.cpp - the one door (flags.hpp's make_request): a command's settings as given, from the command line
// or from Python keywords, checked against the registry (flag_table.cpp), stored as the command's arguments
// (CliArgs) and parsed and checked into its request by the options layer (options_cli.cpp, options.cpp).
#include <algorithm>
#include <set>
#include <string>

#include "app/cli/flag_table.hpp"
#include "app/cli/flags.hpp"
#include "app/cli/options.hpp"
#include "app/commands/explore_cmd.hpp"
#include "core/error.hpp"

namespace attnmap {

namespace {

using Values = std::vector<std::string>;

// The last value (a setting given once has one).
const std::string& one(const Values& v) {
  return v.back();
}
int int_of(const Values& v) {
  return std::stoi(one(v));
}
double number_of(const Values& v) {
  return std::strtod(one(v).c_str(), nullptr);
}

constexpr unsigned kCliArgs = kRender | kEval | kInspect | kExplore | kDownload;

// How a setting's values are stored for some commands (kCliArgs: CliArgs' own fields; kFigure: a.figure;
// kStats: a.stats). A switch is called only when given.
struct Setter {
  const char* id;
  unsigned commands;
  void (*set)(CliArgs&, const Values&);
};

const Setter kSetters[] = {
    {"inputs", kCliArgs, [](CliArgs& a, const Values& v) { a.ro.inputs = v; }},
    {"inputs", kFigure, [](CliArgs& a, const Values& v) { a.figure.inputs = v; }},
    {"inputs", kStats, [](CliArgs& a, const Values& v) { a.stats.inputs = v; }},
    {"weights_file", kInspect, [](CliArgs& a, const Values& v) { a.inspect_weights = one(v); }},
    {"names", kDownload, [](CliArgs& a, const Values& v) { a.download_names = v; }},
    {"weights", kCliArgs, [](CliArgs& a, const Values& v) { a.ro.weights = one(v); }},
    {"weights", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.weights = one(v); }},
    {"weights", kStats, [](CliArgs& a, const Values& v) { a.stats.model.weights = one(v); }},
    {"out", kCliArgs, [](CliArgs& a, const Values& v) { a.ro.out_dir = one(v); }},
    {"out", kFigure, [](CliArgs& a, const Values& v) { a.figure.out = one(v); }},
    {"out", kStats, [](CliArgs& a, const Values& v) { a.stats.out = one(v); }},
    {"layer", kCliArgs, [](CliArgs& a, const Values& v) { a.layer_s = one(v); }},
    {"head", kCliArgs, [](CliArgs& a, const Values& v) { a.head_s = one(v); }},
    {"colormap", kCliArgs, [](CliArgs& a, const Values& v) { a.colormap_s = one(v); }},
    {"colormap", kFigure, [](CliArgs& a, const Values& v) { a.figure.colormap = one(v); }},
    {"colormap", kStats, [](CliArgs& a, const Values& v) { a.stats.colormap = one(v); }},
    {"alpha", kCliArgs, [](CliArgs& a, const Values& v) { a.ro.alpha = static_cast<float>(number_of(v)); }},
    {"alpha", kFigure,
     [](CliArgs& a, const Values& v) { a.figure.alpha = static_cast<float>(number_of(v)); }},
    {"alpha", kStats, [](CliArgs& a, const Values& v) { a.stats.alpha = static_cast<float>(number_of(v)); }},
    {"upsample", kCliArgs, [](CliArgs& a, const Values& v) { a.upsample_s = one(v); }},
    {"upsample", kFigure, [](CliArgs& a, const Values& v) { a.figure.upsample = one(v); }},
    {"resize", kCliArgs, [](CliArgs& a, const Values& v) { a.resize_s = one(v); }},
    {"resize", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.resize = one(v); }},
    {"resize", kStats, [](CliArgs& a, const Values& v) { a.stats.model.resize = one(v); }},
    {"heads", kCliArgs, [](CliArgs& a, const Values& v) { a.heads = a.inspect_heads = int_of(v); }},
    {"heads", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.heads = one(v); }},
    {"heads", kStats, [](CliArgs& a, const Values& v) { a.stats.model.heads = one(v); }},
    {"key", kCliArgs, [](CliArgs& a, const Values& v) { a.key_s = one(v); }},
    {"key", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.key = one(v); }},
    {"key", kStats, [](CliArgs& a, const Values& v) { a.stats.model.key = one(v); }},
    {"act", kCliArgs, [](CliArgs& a, const Values& v) { a.act_s = one(v); }},
    {"act", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.act = one(v); }},
    {"act", kStats, [](CliArgs& a, const Values& v) { a.stats.model.act = one(v); }},
    {"pool", kCliArgs, [](CliArgs& a, const Values& v) { a.pool_s = one(v); }},
    {"pool", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.pool = one(v); }},
    {"pool", kStats, [](CliArgs& a, const Values& v) { a.stats.model.pool = one(v); }},
    {"labels", kCliArgs, [](CliArgs& a, const Values& v) { a.ro.labels_file = one(v); }},
    {"labels", kFigure, [](CliArgs& a, const Values& v) { a.figure.labels = one(v); }},
    {"text", kCliArgs, [](CliArgs& a, const Values& v) { a.text.text = v; }},
    {"text", kFigure, [](CliArgs& a, const Values& v) { a.figure.text.text = v; }},
    {"texts", kCliArgs, [](CliArgs& a, const Values& v) { a.text.texts = one(v); }},
    {"texts", kFigure, [](CliArgs& a, const Values& v) { a.figure.text.texts = one(v); }},
    {"prompt", kCliArgs, [](CliArgs& a, const Values& v) { a.text.prompt = v; }},
    {"prompt", kFigure, [](CliArgs& a, const Values& v) { a.figure.text.prompt = v; }},
    {"vocab", kCliArgs, [](CliArgs& a, const Values& v) { a.text.vocab = one(v); }},
    {"vocab", kFigure, [](CliArgs& a, const Values& v) { a.figure.text.vocab = one(v); }},
    {"truncate_text", kCliArgs, [](CliArgs& a, const Values&) { a.text.truncate = true; }},
    {"truncate_text", kFigure, [](CliArgs& a, const Values&) { a.figure.text.truncate = true; }},
    {"mean", kCliArgs, [](CliArgs& a, const Values& v) { a.mean_s = one(v); }},
    {"mean", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.mean = one(v); }},
    {"mean", kStats, [](CliArgs& a, const Values& v) { a.stats.model.mean = one(v); }},
    {"std", kCliArgs, [](CliArgs& a, const Values& v) { a.std_s = one(v); }},
    {"std", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.std = one(v); }},
    {"std", kStats, [](CliArgs& a, const Values& v) { a.stats.model.std = one(v); }},
    {"size", kCliArgs, [](CliArgs& a, const Values& v) { a.size_s = one(v); }},
    {"size", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.size = one(v); }},
    {"size", kStats, [](CliArgs& a, const Values& v) { a.stats.model.size = one(v); }},
    {"pos_interp", kCliArgs, [](CliArgs& a, const Values& v) { a.pos_interp_s = one(v); }},
    {"pos_interp", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.pos_interp = one(v); }},
    {"pos_interp", kStats, [](CliArgs& a, const Values& v) { a.stats.model.pos_interp = one(v); }},
    {"precision", kCliArgs, [](CliArgs& a, const Values& v) { a.precision_s = one(v); }},
    {"precision", kFigure, [](CliArgs& a, const Values& v) { a.figure.model.precision = one(v); }},
    {"precision", kStats, [](CliArgs& a, const Values& v) { a.stats.model.precision = one(v); }},
    {"rollout", kCliArgs, [](CliArgs& a, const Values&) { a.ro.rollout = true; }},
    {"discard", kCliArgs, [](CliArgs& a, const Values& v) { a.discard_s = one(v); }},
    {"discard", kFigure, [](CliArgs& a, const Values& v) { a.figure.discard = one(v); }},
    {"threshold", kCliArgs, [](CliArgs& a, const Values& v) { a.threshold_s = one(v); }},
    {"heads_grid", kCliArgs, [](CliArgs& a, const Values&) { a.ro.heads_grid = true; }},
    {"views", kCliArgs, [](CliArgs& a, const Values& v) { a.views_s = one(v); }},
    {"views", kFigure, [](CliArgs& a, const Values& v) { a.figure.views = one(v); }},
    {"query", kCliArgs, [](CliArgs& a, const Values& v) { a.query_s = one(v); }},
    {"column", kCliArgs, [](CliArgs& a, const Values& v) { a.column_s = one(v); }},
    {"received", kCliArgs, [](CliArgs& a, const Values&) { a.received = true; }},
    {"layers", kCliArgs, [](CliArgs& a, const Values& v) { a.layers_s = one(v); }},
    {"panel", kCliArgs, [](CliArgs& a, const Values&) { a.ro.panel = true; }},
    {"strip", kCliArgs, [](CliArgs& a, const Values& v) { a.strip_v = v; }},
    {"scale", kCliArgs, [](CliArgs& a, const Values& v) { a.scale_s = one(v); }},
    {"scale", kFigure, [](CliArgs& a, const Values& v) { a.figure.scale = one(v); }},
    {"style", kCliArgs, [](CliArgs& a, const Values& v) { a.style_s = one(v); }},
    {"style", kFigure, [](CliArgs& a, const Values& v) { a.figure.style = one(v); }},
    {"alpha_by_value", kCliArgs, [](CliArgs& a, const Values&) { a.ro.alpha_by_value = true; }},
    {"alpha_by_value", kFigure, [](CliArgs& a, const Values&) { a.figure.alpha_by_value = true; }},
    {"no_legend", kCliArgs, [](CliArgs& a, const Values&) { a.ro.legend = false; }},
    {"dpi", kCliArgs, [](CliArgs& a, const Values& v) { a.dpi_s = one(v); }},
    {"dpi", kFigure, [](CliArgs& a, const Values& v) { a.figure.dpi = number_of(v); }},
    {"dpi", kStats, [](CliArgs& a, const Values& v) { a.stats.dpi = number_of(v); }},
    {"width_in", kCliArgs, [](CliArgs& a, const Values& v) { a.width_in_s = one(v); }},
    {"width_in", kFigure, [](CliArgs& a, const Values& v) { a.figure.width_in = number_of(v); }},
    {"width_in", kStats, [](CliArgs& a, const Values& v) { a.stats.width_in = number_of(v); }},
    {"strip_columns", kCliArgs, [](CliArgs& a, const Values& v) { a.strip_columns_s = one(v); }},
    {"title", kCliArgs, [](CliArgs& a, const Values& v) { a.title_s = one(v); }},
    {"title", kFigure, [](CliArgs& a, const Values& v) { a.figure.title = one(v); }},
    {"block_numbering", kCliArgs, [](CliArgs& a, const Values& v) { a.block_numbering_s = one(v); }},
    {"block_numbering", kFigure, [](CliArgs& a, const Values& v) { a.figure.block_numbering = one(v); }},
    {"notes", kCliArgs, [](CliArgs& a, const Values&) { a.ro.notes = true; }},
    {"notes", kFigure, [](CliArgs& a, const Values&) { a.figure.notes = true; }},
    {"notes", kStats, [](CliArgs& a, const Values&) { a.stats.notes = true; }},
    {"figure_format", kCliArgs, [](CliArgs& a, const Values& v) { a.formats_s = one(v); }},
    {"figure_format", kStats, [](CliArgs& a, const Values& v) { a.stats.formats = one(v); }},
    {"explain", kCliArgs, [](CliArgs& a, const Values& v) { a.explain_s = one(v); }},
    {"class_spec", kCliArgs, [](CliArgs& a, const Values& v) { a.class_s = one(v); }},
    {"class_spec", kFigure, [](CliArgs& a, const Values& v) { a.figure.class_spec = one(v); }},
    {"gradcam_layer", kCliArgs, [](CliArgs& a, const Values& v) { a.gradcam_layer_s = one(v); }},
    {"gradcam_layer", kFigure, [](CliArgs& a, const Values& v) { a.figure.gradcam_layer = one(v); }},
    {"save_raw", kCliArgs, [](CliArgs& a, const Values&) { a.ro.map_files.push_back(OutputKind::MapNpy); }},
    {"all_heads", kCliArgs, [](CliArgs& a, const Values&) { a.ro.all_heads = true; }},
    {"quiet", kCliArgs, [](CliArgs& a, const Values&) { a.ro.quiet = a.download_quiet = true; }},
    {"quiet", kFigure, [](CliArgs& a, const Values&) { a.figure.quiet = true; }},
    {"quiet", kStats, [](CliArgs& a, const Values&) { a.stats.quiet = true; }},
    {"jobs", kCliArgs, [](CliArgs& a, const Values& v) { a.bo.jobs = int_of(v); }},
    {"jobs", kStats, [](CliArgs& a, const Values& v) { a.stats.jobs = int_of(v); }},
    {"ext", kCliArgs, [](CliArgs& a, const Values& v) { a.bo.ext = v; }},
    {"ext", kStats, [](CliArgs& a, const Values& v) { a.stats.ext = v; }},
    {"shard", kCliArgs, [](CliArgs& a, const Values& v) { a.shard_s = one(v); }},
    {"manifest", kCliArgs, [](CliArgs& a, const Values& v) { a.bo.manifest = one(v); }},
    {"manifest", kStats, [](CliArgs& a, const Values& v) { a.stats.manifest = one(v); }},
    {"skip_existing", kCliArgs, [](CliArgs& a, const Values&) { a.bo.skip_existing = true; }},
    {"contact_sheet", kCliArgs, [](CliArgs& a, const Values& v) { a.bo.contact_sheet = one(v); }},
    {"sheet_columns", kCliArgs, [](CliArgs& a, const Values& v) { a.bo.sheet_columns = int_of(v); }},
    {"gallery", kCliArgs, [](CliArgs& a, const Values& v) { a.bo.gallery = one(v); }},
    {"progress_every", kCliArgs, [](CliArgs& a, const Values& v) { a.bo.progress_every = int_of(v); }},
    {"max_pixels", kCliArgs, [](CliArgs& a, const Values& v) { a.max_pixels = std::stoll(one(v)); }},
    {"max_pixels", kFigure, [](CliArgs& a, const Values& v) { a.figure.max_pixels = std::stoll(one(v)); }},
    {"max_pixels", kStats, [](CliArgs& a, const Values& v) { a.stats.max_pixels = std::stoll(one(v)); }},
    {"no_exif", kCliArgs, [](CliArgs& a, const Values&) { a.no_exif = true; }},
    {"no_exif", kFigure, [](CliArgs& a, const Values&) { a.figure.no_exif = true; }},
    {"no_exif", kStats, [](CliArgs& a, const Values&) { a.stats.no_exif = true; }},
    {"explore", kCliArgs, [](CliArgs& a, const Values&) { a.ro.map_files.push_back(OutputKind::Explore); }},
    {"budget_mb", kCliArgs, [](CliArgs& a, const Values& v) { a.budget_s = one(v); }},
    {"explore_blocks", kCliArgs, [](CliArgs& a, const Values& v) { a.explore_blocks_s = one(v); }},
    {"no_npy", kCliArgs, [](CliArgs& a, const Values&) { a.no_npy = true; }},
    {"masks", kCliArgs, [](CliArgs& a, const Values& v) { a.eo.masks_dir = one(v); }},
    {"fusions", kCliArgs, [](CliArgs& a, const Values& v) { a.fusions_s = one(v); }},
    {"tolerance", kCliArgs, [](CliArgs& a, const Values& v) { a.eo.tolerance_px = int_of(v); }},
    {"json", kCliArgs, [](CliArgs& a, const Values& v) { a.eo.json_out = one(v); }},
    {"perturb", kCliArgs, [](CliArgs& a, const Values& v) { a.perturb_s = one(v); }},
    {"sanity", kCliArgs, [](CliArgs& a, const Values&) { a.eo.sanity = true; }},
    {"row_labels", kFigure, [](CliArgs& a, const Values& v) { a.figure.row_labels = one(v); }},
    {"column_labels", kFigure, [](CliArgs& a, const Values& v) { a.figure.column_labels = one(v); }},
    {"outlier_k", kStats, [](CliArgs& a, const Values& v) { a.stats.outlier_k = number_of(v); }},
    {"norm_block", kStats, [](CliArgs& a, const Values& v) { a.stats.norm_block = int_of(v); }},
    {"bins", kStats, [](CliArgs& a, const Values& v) { a.stats.bins = int_of(v); }},
};

// The setting's values, checked against its row (a value for each time given; numbers well-formed, rewritten
// as number_check does), stored into `a` for the command `bit`.
void store_setting(CliArgs& a, unsigned bit, const Flag& f, Values values) {
  const std::string name = setting_ref(f.id);
  if ((f.traits & kSwitch) && !values.empty()) throw Error(name + " takes no value");
  if (!(f.traits & kSwitch) && values.empty()) throw Error(name + " expects a value");
  if (!(f.traits & (kRepeat | kSwitch)) && values.size() > 1) throw Error(name + " is given more than once");
  if (f.number != Number::None)
    for (std::string& v : values)
      if (const std::string why = number_check(f, v); !why.empty()) throw Error(name + ": " + why);
  for (const Setter& s : kSetters)
    if (f.id == std::string(s.id) && (s.commands & bit)) return s.set(a, values);
  throw Error(name + " has no place in attnmap's request (a registry row without its setter)");
}

// `given` in the registry's order (the order the command line's option tables have always been read in), each
// setting the command's and given once.
GivenSettings in_registry_order(const CommandWords& c, const GivenSettings& given) {
  for (const GivenSetting& g : given) {
    const Flag* f = flag_of(g.id);
    if (!f || !(f->commands & c.bit))
      throw Error(setting_ref(g.id) + " is not a setting of attnmap " + c.name);
    if (std::count_if(given.begin(), given.end(), [&](const GivenSetting& o) { return o.id == g.id; }) > 1)
      throw Error(setting_ref(g.id) + " is given more than once");
  }
  GivenSettings ordered;
  for (const Flag& f : all_flags())
    for (const GivenSetting& g : given)
      if (g.id == f.id) ordered.push_back(g);
  return ordered;
}

// An empty value given on purpose (--json "", -w "", --alpha "") is a mistake, not "option not given" (the
// default weights, view, size, ...) nor a number 0: refused for every setting but --title ('': no title).
void refuse_empty_values(const CommandWords& c, const GivenSettings& given) {
  for (const GivenSetting& g : given) {
    const Flag& f = *flag_of(g.id);
    if ((f.traits & (kPositional | kSwitch)) || g.id == "title") continue;
    if (std::none_of(g.values.begin(), g.values.end(), [](const std::string& v) { return v.empty(); }))
      continue;
    const std::string value = value_name_of(f, c.bit);
    const char* expects = value == "FILE" || value == "PATH" ? "a file name"
                          : value == "DIR"                   ? "a folder"
                                                             : "a value";
    throw Error(setting_ref(g.id) + " expects " + expects + ", found ''");
  }
}

}  // namespace

CheckedRequest make_request(const std::string& command, const GivenSettings& given_in) {
  const CommandWords* c = command_named(command);
  if (!c) throw Error("no command '" + command + "'");
  const GivenSettings given = in_registry_order(*c, given_in);
  refuse_empty_values(*c, given);
  CliArgs a;
  std::set<std::string> ids;
  for (const GivenSetting& g : given) {
    store_setting(a, c->bit, *flag_of(g.id), g.values);
    ids.insert(g.id);
  }
  CheckedRequest r;
  r.command = command;
  if (c->bit & (kRender | kEval)) check_command(a, ids, c->bit == kEval);
  if (c->bit == kExplore) check_explore_options(a, ids);
  if (c->bit == kInspect) r.inspect_overrides = inspect_overrides(a, ids);
  r.ro = std::move(a.ro);
  r.bo = std::move(a.bo);
  r.eo = std::move(a.eo);
  if (c->bit == kFigure) r.figure = check_figure_args(a.figure, !a.figure.out.empty());  // in memory: no -o
  if (c->bit == kStats) r.stats = check_stats_args(a.stats);
  r.inspect_weights = std::move(a.inspect_weights);
  r.download_names = std::move(a.download_names);
  r.download_quiet = a.download_quiet;
  return r;
}

}  // namespace attnmap
