// explore_cmd.cpp - attnmap explore: its settings' checks (render's model and preprocessing settings, checked
// by the same options layer; the option table is the registry's, app/cli/flag_table.cpp), and the run (explore.hpp, docs/explore.md).
#include <filesystem>
#include <iostream>
#include <sstream>

#include "engine/explore.hpp"
#include "engine/explore_pack.hpp"
#include "app/cli/flags.hpp"
#include "app/cli/options.hpp"
#include "engine/provenance.hpp"
#include "engine/paths.hpp"
#include "engine/session.hpp"
#include "core/error.hpp"
#include "draw/colormap.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"

namespace attnmap {

namespace fs = std::filesystem;

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
  ro.map_files = {OutputKind::Explore};
  ro.legend = false;  // no NAME.png: no legend, no font needed, none in the record
  if (a.no_npy) ro.map_files.clear();  // the record says whether attention.npy was written
  check_drawing_options(ro);
  ro.colormap = with_prefix(setting_ref("colormap"), [&] { return parse_colormap(a.colormap_s); });
}

int run_explore(const RenderOptions& ro_in) {
  RenderOptions ro = ro_in;
  const bool write_npy = ro.writes(OutputKind::Explore);
  ro.map_files = {OutputKind::Explore};
  ro.names_classes = false;  // the page names no class: no note on the head's class names
  const std::string& input = ro.inputs.front();
  std::error_code ec;
  // Nothing to explore is bad usage, as render's nothing to render (exit 2, before anything is made); an image
  // that exists but cannot be read or decoded fails on its own (exit 1).
  if (!fs::exists(fs::symlink_status(input, ec))) throw Error(input + ": no such file or folder; nothing to explore");
  const std::string index = (fs::path(ro.out_dir) / "index.html").string();
  if (fs::exists(fs::symlink_status(ro.out_dir, ec)) && !fs::is_directory(ro.out_dir, ec))
    throw Error("-o " + ro.out_dir + " is an existing file; name a folder");
  if (fs::exists(fs::symlink_status(index, ec)) && !read_explorer_record(index))
    throw Error("-o " + ro.out_dir + ": " + index + " exists and is not an attnmap explorer; it is left alone");
  try {
    check_explorer_folder(ro.out_dir, input);
  } catch (const Error& e) {
    throw Error("-o " + std::string(e.what()));
  }
  const RunWeights weights = run_weights(ro.weights, ro.quiet);  // a path, or a Hub name fetched into the cache
  const std::string& weights_path = weights.path;
  const std::shared_ptr<const ViTWeights> loaded = load_run_model(ro, weights);
  const ViTWeights& model = *loaded;
  RenderOptions view_opt = ro;  // the render view's checks refuse --discard without a rollout view; the
  view_opt.discard = 0.0;       // explorer's rollout takes it (recorded under "explore")
  RenderContext ctx = make_render_context(model, view_opt);
  ctx.opt = &ro;
  nlohmann::ordered_json settings = make_provenance(ctx, weights_path);
  settings["view"] = "explore";
  settings["attention_npy"] = write_npy;
  std::string record;
  ExploreResult res;
  try {
    const std::vector<uint8_t> bytes = read_file(input);
    record = image_provenance(provenance_text(settings), sha256_bytes(bytes.data(), bytes.size()));
    res = write_explorer(ctx, input, ro.out_dir, record, write_npy);
  } catch (const Error& e) {
    std::cerr << "attnmap: error: " << printable(spell_as_flags(e.what())) << "\n";
    return 1;
  }
  if (!ro.quiet) {
    std::cout << printable(input + " -> " + res.index) << "\n";
    std::cout << "  stored: " << printable(spell_as_flags(res.stored)) << "\n";
    std::cout << "  page: " << megabytes(res.page_bytes) << " MB (data " << megabytes(res.data_bytes) << " MB)\n";
  }
  const std::string budget = spell_as_flags(setting_ref("budget_mb"));
  if (!res.dropped.empty())
    std::cerr << "attnmap: note: " << printable(input) << ": " << res.dropped.size()
              << " blocks left out entirely by " << budget << " (their fused maps did not fit): see the page's 'stored' line\n";
  if (!res.left_out.empty())
    std::cerr << "attnmap: note: " << printable(input) << ": single heads left out by " << budget << ": see the page's "
              << "'stored' line\n";
  return 0;
}

}  // namespace attnmap
