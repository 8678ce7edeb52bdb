// explore_cmd.cpp - attnmap explore: its option table (render's model and preprocessing options, bound to
// the same variables and checked by the same options layer), and the run (explore.hpp, docs/explore.md).
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "app/engine/explore.hpp"
#include "app/engine/explore_pack.hpp"
#include "app/cli/options.hpp"
#include "app/engine/provenance.hpp"
#include "app/engine/paths.hpp"
#include "app/engine/session.hpp"
#include "core/error.hpp"
#include "draw/colormap.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"

namespace attnmap {

namespace fs = std::filesystem;

CLI::App* add_explore_options(CLI::App& app, CliArgs& a) {
  RenderOptions& ro = a.ro;
  CLI::App* x = app.add_subcommand(
      "explore", "write a self-contained page (opens from file://, no network) to explore every attention row of "
                 "one image: every block, head, fusion and rollout; docs/explore.md");
  // Any number taken here, one checked in check_explore_options: an unknown option's value (--layer 2) is then
  // not taken for a second image, and CLI11 names the unknown option.
  x->add_option("image", ro.inputs, "the image")->required();
  x->add_option("-o,--out", ro.out_dir, "output folder: index.html, photo.png, data/, attention.npy")->required();
  x->add_option("-w,--weights", ro.weights, "weights, as for render; default: the bundled weights/default.json");
  std::string cmaps;
  for (const auto& n : colormap_names()) cmaps += (cmaps.empty() ? "" : ", ") + n;
  x->add_option("--colormap", ro.colormap, "colour map: " + cmaps)->capture_default_str();
  x->add_option("--alpha", ro.alpha, "the page's initial opacity of the heatmap, 0..1")->capture_default_str();
  x->add_option("--resize", a.resize_s, "squash | crop, as for render")->capture_default_str();
  x->add_option("--size", a.size_s, "model input size S or W,H in pixels, as for render");
  x->add_option("--pos-interp", a.pos_interp_s, "with --size: as for render");
  x->add_option("--heads", a.heads, "number of attention heads, when the weights do not say");
  x->add_option("--key", a.key_s, "PyTorch checkpoint: the entry holding the state dict, as for render");
  x->add_option("--act", a.act_s, "the MLP activation, as for render");
  x->add_option("--pool", a.pool_s, "what the classifier reads, as for render");
  x->add_option("--mean", a.mean_s, "R,G,B normalisation mean (overrides the weights' config)");
  x->add_option("--std", a.std_s, "R,G,B normalisation std (overrides the weights' config)");
  x->add_option("--discard", a.discard_s, "the page's rollout: zero this fraction of the smallest fused attentions per block, 0..1");
  x->add_option("--budget-mb", a.budget_s, "the data files at most this many MiB (default 8): past it, single heads "
                                           "of the first blocks are left out, and the page and terminal say which");
  x->add_option("--explore-blocks", a.explore_blocks_s, "store single heads only of these blocks, e.g. 0,5,11 (as the budget allows)");
  x->add_flag("--no-npy", a.no_npy, "do not write attention.npy (float32 (L, H, T, T): large for big models)");
  x->add_option("--max-pixels", a.max_pixels, "refuse images with more pixels than this, before decoding")->capture_default_str();
  x->add_flag("--no-exif", a.no_exif, "ignore the JPEG EXIF orientation, as for render");
  x->add_flag("-q,--quiet", ro.quiet, "print only errors");
  return x;
}

void add_render_explore_options(CLI::App* render, CliArgs& a) {
  RenderOptions& ro = a.ro;
  render->add_flag_callback("--explore", [&ro] { ro.map_files.push_back(OutputKind::Explore); },
                            "also write each image's explorer, NAME.explore/index.html (docs/explore.md), linked "
                            "from the --gallery");
  render->add_option("--budget-mb", a.budget_s, "with --explore: the explorer's data files at most this many MiB (default 8)");
  render->add_option("--explore-blocks", a.explore_blocks_s, "with --explore: single heads only of these blocks");
}

void apply_explore_budget(const std::string& budget, const std::string& blocks, RenderOptions& ro) {
  if (!budget.empty()) {
    const double mb = parse_number_option("--budget-mb", budget);
    if (!(mb > 0.0 && mb <= 1e6)) throw Error("--budget-mb must be in (0, 1000000], found " + budget);
    ro.explore_budget_mb = mb;
  }
  if (blocks.empty()) return;
  std::stringstream ss(blocks);
  for (std::string item; std::getline(ss, item, ',');) {
    const int l = parse_int_option("--explore-blocks", item);  // negative from the end, as --layer
    ro.explore_blocks.push_back(l);
  }
  if (blocks.back() == ',') throw Error("--explore-blocks expects a comma-separated list such as 0,5,11, found '" + blocks + "'");
}

void check_explore_options(CliArgs& a, const CLI::App& explore) {
  RenderOptions& ro = a.ro;
  refuse_empty_values(explore);
  if (ro.inputs.size() != 1)
    throw Error("explore takes one image, found " + std::to_string(ro.inputs.size()) + " (" + ro.inputs[0] + ", " +
                ro.inputs[1] + (ro.inputs.size() > 2 ? ", ..." : "") + "); render --explore makes one per image");
  if (!a.size_s.empty()) ro.size = parse_size_option("--size", a.size_s);
  if (!a.pos_interp_s.empty()) ro.pos_interp = with_flag("--pos-interp", [&] { return parse_pos_interp(a.pos_interp_s); });
  if (!a.discard_s.empty()) ro.discard = parse_number_option("--discard", a.discard_s);
  ro.resize = parse_resize_option("--resize", a.resize_s);
  if (explore.count("--heads")) ro.overrides.num_heads = checked_heads(a.heads);
  if (explore.count("--key")) ro.overrides.key = a.key_s;
  apply_model_flags(a.act_s, a.pool_s, ro.overrides);
  if (!a.mean_s.empty()) ro.overrides.mean = parse_rgb_option("--mean", a.mean_s);
  if (!a.std_s.empty()) ro.overrides.std = parse_rgb_option("--std", a.std_s, true);
  if (a.max_pixels < 1) throw Error("--max-pixels must be >= 1, found " + std::to_string(a.max_pixels));
  ro.load.max_pixels = static_cast<uint64_t>(a.max_pixels);
  ro.load.apply_exif = !a.no_exif;
  apply_explore_budget(a.budget_s, a.explore_blocks_s, ro);
  ro.map_files = {OutputKind::Explore};
  ro.legend = false;  // no NAME.png: no legend, no font needed, none in the record
  if (a.no_npy) ro.map_files.clear();  // the record says whether attention.npy was written
  check_drawing_options(ro);
  (void)colormap_table(ro.colormap);
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
    std::cerr << "attnmap: error: " << printable(with_flags(e.what())) << "\n";
    return 1;
  }
  if (!ro.quiet) {
    std::cout << printable(input + " -> " + res.index) << "\n";
    std::cout << "  stored: " << printable(res.stored) << "\n";
    std::cout << "  page: " << megabytes(res.page_bytes) << " MB (data " << megabytes(res.data_bytes) << " MB)\n";
  }
  if (!res.dropped.empty())
    std::cerr << "attnmap: note: " << printable(input) << ": " << res.dropped.size()
              << " blocks left out entirely by --budget-mb (their fused maps did not fit): see the page's 'stored' line\n";
  if (!res.left_out.empty())
    std::cerr << "attnmap: note: " << printable(input) << ": single heads left out by --budget-mb: see the page's "
              << "'stored' line\n";
  return 0;
}

}  // namespace attnmap
