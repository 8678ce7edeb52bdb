// explore_cmd.cpp - attnmap explore: its settings' checks (render's model and preprocessing settings, checked
// by the same options layer; the option table is the registry's, app/cli/flag_table.cpp), and its main (the
// run: engine/explore.hpp's explore_image; docs/explore.md).
#include <sstream>

#include "app/commands/explore_cmd.hpp"
#include "engine/batch_hooks.hpp"
#include "engine/explore.hpp"
#include "app/cli/flags.hpp"
#include "app/cli/options.hpp"
#include "core/error.hpp"
#include "draw/colormap.hpp"

namespace attnmap {

void apply_explore_budget(const std::string& budget, const std::string& blocks, RenderOptions& ro) {
  if (!budget.empty()) {
    const double mb = parse_number_option(setting_ref("budget_mb"), budget);
    if (!(mb > 0.0 && mb <= 1e6)) throw Error(setting_ref("budget_mb") + " must be in (0, 1000000], found " + budget);
    ro.explore_budget_mb = mb;
  }
  if (blocks.empty()) return;
  std::stringstream ss(blocks);
  for (std::string item; std::getline(ss, item, ',');) {
    const int l = parse_int_option(setting_ref("explore_blocks"), item);  // negative from the end, as --layer
    ro.explore_blocks.push_back(l);
  }
  if (blocks.back() == ',')
    throw Error(setting_ref("explore_blocks") + " expects a comma-separated list such as 0,5,11, found '" + blocks + "'");
}

void check_explore_options(CliArgs& a, const std::set<std::string>& given) {
  RenderOptions& ro = a.ro;
  if (ro.inputs.size() != 1)
    throw Error("explore takes one image, found " + std::to_string(ro.inputs.size()) + " (" + ro.inputs[0] + ", " +
                ro.inputs[1] + (ro.inputs.size() > 2 ? ", ..." : "") + "); render " + setting_ref("explore") +
                " makes one per image");
  if (!a.size_s.empty()) ro.size = parse_size_option(setting_ref("size"), a.size_s);
  if (!a.pos_interp_s.empty())
    ro.pos_interp = with_prefix(setting_ref("pos_interp"), [&] { return parse_pos_interp(a.pos_interp_s); });
  if (!a.discard_s.empty()) ro.discard = parse_number_option(setting_ref("discard"), a.discard_s);
  ro.resize = parse_resize_option(setting_ref("resize"), a.resize_s);
  if (given.count("heads")) ro.overrides.num_heads = checked_heads(a.heads);
  if (given.count("key")) ro.overrides.key = a.key_s;
  apply_model_flags(a.act_s, a.pool_s, ro.overrides);
  if (!a.mean_s.empty()) ro.overrides.mean = parse_rgb_option(setting_ref("mean"), a.mean_s);
  if (!a.std_s.empty()) ro.overrides.std = parse_rgb_option(setting_ref("std"), a.std_s, true);
  if (a.max_pixels < 1) throw Error(setting_ref("max_pixels") + " must be >= 1, found " + std::to_string(a.max_pixels));
  ro.load.max_pixels = static_cast<uint64_t>(a.max_pixels);
  ro.load.apply_exif = !a.no_exif;
  apply_explore_budget(a.budget_s, a.explore_blocks_s, ro);
  apply_text_args(a.text, ro);  // texts: a CLIP's classes, one relevance map each on the page
  ro.map_files = {OutputKind::Explore};
  ro.legend = false;  // no NAME.png: no legend, no font needed, none in the record
  if (a.no_npy) ro.map_files.clear();  // the record says whether attention.npy was written
  check_drawing_options(ro);
  ro.colormap = with_prefix(setting_ref("colormap"), [&] { return parse_colormap(a.colormap_s); });
}

int run_explore(const RenderOptions& ro) { return explore_image(ro, terminal_hooks()); }

}  // namespace attnmap
