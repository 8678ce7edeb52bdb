// vit_loader_beit.cpp - build_vit's BEiT part (issue 29; timm beit.py, microsoft/unilm beit / beit2 names):
// the relative position bias tables, per block (blocks.i.attn.relative_position_bias_table) or shared
// (rel_pos_bias.relative_position_bias_table), their index buffers checked, the grid of a BEiT without an
// absolute pos_embed, and the head count a table gives; Hugging Face BEiT's config switches checked (issue 44).
#include <cmath>
#include <string>

#include "checkpoint/rel_pos.hpp"
#include "checkpoint/vit_loader_internal.hpp"
#include "core/error.hpp"

namespace attnmap {
namespace detail {

namespace {

const char* const kTable = "attn.relative_position_bias_table";
const char* const kShared = "rel_pos_bias.relative_position_bias_table";

// The first table the file holds (block 0's, else the shared one); "" when none.
std::string first_table(const Loader& ld) {
  if (ld.has(std::string("blocks.0.") + kTable)) return std::string("blocks.0.") + kTable;
  if (ld.has(kShared)) return kShared;
  return "";
}

// A square grid side g with (2g-1)^2 + 3 == rows; 0 when there is none.
int square_side(int64_t rows) {
  const auto s = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(rows - 3, 0)))));
  if (s <= 0 || s * s != rows - 3 || s % 2 == 0) return 0;
  return static_cast<int>((s + 1) / 2);
}

// The index buffer `canon` (timm: a non-persistent buffer, absent from its files; unilm saves it, int64):
// it must equal gen_relative_position_index for the grid, since attnmap gathers the bias by that index.
void check_index(Loader& ld, const std::string& canon, int gh, int gw) {
  if (!ld.has(canon)) return;
  const std::vector<int64_t> want = beit_relative_position_index(gh, gw);
  const int T = gh * gw + 1;
  const std::string name = ld.file_name(canon);
  const std::string grid = std::to_string(gh) + "x" + std::to_string(gw);
  std::vector<int64_t> got;
  std::vector<int64_t> shape;
  if (const Tensor* t = ld.find(canon)) {  // a float copy (attnmap JSON): integral values
    shape = t->shape;
    for (float v : t->data) got.push_back(static_cast<int64_t>(std::llround(v)));
  } else {
    auto it = ld.raw().ints.find(name);
    if (it == ld.raw().ints.end())
      throw Error(ld.path() + ": tensor '" + name + "' (the relative position index) has dtype " +
                  ld.raw().skipped.at(name) + ", whose values attnmap does not read, so it cannot check that it is "
                  "the index it gathers the bias with; save it as int64 or leave it out (timm does not save it)");
    got = it->second;
  }
  if (got.size() != want.size())
    throw Error(ld.path() + ": tensor '" + name + "' has " + std::to_string(got.size()) + " values, expected (" +
                std::to_string(T) + ", " + std::to_string(T) + ") for the " + grid + " grid");
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i])
      throw Error(ld.path() + ": tensor '" + name + "' differs from the relative position index of a " + grid +
                  " grid (timm gen_relative_position_index) at (" + std::to_string(i / T) + ", " +
                  std::to_string(i % T) + "): " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]) +
                  "; attnmap gathers the bias with the computed index and stops rather than use another");
  ld.skip(canon, "relative position index buffer: checked equal to the index attnmap computes for the " + grid +
                     " grid (timm gen_relative_position_index), by which the bias is gathered");
}

// Hugging Face BEiT (issue 44): config.json's switches (or BeitConfig's defaults, which save_pretrained leaves out)
// say which tensors BeitModel has; a file with others, or without them, is refused by the tensor's name
// (transformers would drop the one and initialise the other at random).
void check_hf_beit_switches(const Loader& ld, const FileConfig& fc) {
  const struct {
    const char* key;
    const char* canon;
  } switches[] = {{"use_relative_position_bias", "blocks.0.attn.relative_position_bias_table"},
                  {"use_shared_relative_position_bias", kShared},
                  {"use_absolute_position_embeddings", "pos_embed"},
                  {"layer_scale_init_value", "blocks.0.ls1.gamma"}};
  for (const auto& s : switches) {
    if (!fc.beit_args.contains(s.key)) continue;
    const nlohmann::json& v = fc.beit_args.at(s.key);
    const std::string said = std::string(s.key) + " = " + v.dump().substr(0, 40) + " (" + src_of(fc, s.key) + ")";
    if (!v.is_boolean() && !v.is_number()) throw Error(ld.path() + ": " + said + ": expected true / false or a number");
    const bool on = v.is_boolean() ? v.get<bool>() : v.get<double>() > 0;  // BeitLayer: lambda_1 if init_values > 0
    if (on == ld.has(s.canon)) continue;
    throw Error(ld.path() + ": " + said + " but the file " + (on ? "has no" : "has") + " tensor '" + ld.file_name(s.canon) +
                "'" + (on ? ": transformers would initialise it at random" : ": BeitModel built from this config would not use it"));
  }
}

}  // namespace

// A table's second dimension is the head count: used when neither the command line nor a config says it
// (the loader checks every table against the heads in the end, whatever said them).
FileConfig beit_config(Loader& ld, const FileConfig& fc, const ModelOverrides& ov) {
  FileConfig out = fc;
  if (ld.scheme().layout == Layout::HfBeit) check_hf_beit_switches(ld, fc);
  const std::string t = first_table(ld);
  if (ov.num_heads || fc.num_heads || t.empty()) return out;
  const Tensor& tab = ld.need(t, "(rows, H)");
  if (tab.rank() != 2) throw ld.shape_error(t, "((2Wh-1)(2Ww-1)+3, H)", tab.shape);
  out.num_heads = to_int(dim(tab, 1), ld.path() + ": " + ld.file_name(t));
  out.src["num_heads"] = "inferred from " + ld.file_name(t) + " " + shape_str(tab.shape);
  return out;
}

// BEiT as released has no absolute pos_embed (use_abs_pos_emb=False): the grid is the config's image size,
// else the square grid of the relative position table.
void take_beit_grid(Loader& ld, const FileConfig& fc, ViTWeights& w) {
  HParams& hp = w.hp;
  hp.pos_prefix = 1;
  const std::string t = first_table(ld);
  if (t.empty())
    ld.missing("pos_embed", "(1, 1+N, D)", "a BEiT has an absolute pos_embed, a relative position table, or both");
  const Tensor& tab = ld.need(t, "(rows, H)");
  if (tab.rank() != 2) throw ld.shape_error(t, "((2Wh-1)(2Ww-1)+3, H)", tab.shape);
  if (fc.image_w) {
    resolve_grid(hp, fc, 0, false, ld.path(), "");
    return;  // take_beit_rel_pos checks the table against this grid
  }
  const int g = square_side(dim(tab, 0));
  if (g == 0)
    throw Error(ld.path() + ": tensor '" + ld.file_name(t) + "' has " + std::to_string(dim(tab, 0)) +
                " rows, not (2g-1)^2 + 3 for a square grid; set config image_size");
  FileConfig sq = fc;
  sq.image_w = sq.image_h = g * hp.patch;
  sq.src["image_size"] = "inferred from " + ld.file_name(t) + " " + shape_str(tab.shape) + " (a " +
                         std::to_string(g) + "x" + std::to_string(g) + " grid)";
  resolve_grid(hp, sq, 0, false, ld.path(), "");
}

// The tables (after the blocks are taken): every block's or none, the shared one, each ((2gh-1)(2gw-1)+3, H)
// for the model's grid; their index buffers checked; the biases gathered (prepare_rel_pos_bias).
void take_beit_rel_pos(Loader& ld, ViTWeights& w) {
  HParams& hp = w.hp;
  const int gh = hp.grid_h, gw = hp.grid_w, H = hp.num_heads;
  const std::vector<int64_t> shape = {rel_pos_table_rows(gh, gw), H};
  const bool per_block = ld.has(std::string("blocks.0.") + kTable);
  for (int i = 0; i < hp.depth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    if (ld.has(b + kTable) != per_block)
      ld.missing(std::string("blocks.") + (per_block ? std::to_string(i) : "0") + "." + kTable, shape_str(shape),
                 "BEiT's use_rel_pos_bias gives every block a table");
    if (per_block) w.blocks[static_cast<size_t>(i)].rel_pos_table = ld.take(b + kTable, shape);
    check_index(ld, b + "attn.relative_position_index", gh, gw);
  }
  if (ld.has(kShared)) w.rel_pos_table_shared = ld.take(kShared, shape);
  check_index(ld, "rel_pos_bias.relative_position_index", gh, gw);
  hp.rel_pos = per_block || !w.rel_pos_table_shared.empty();
  hp.rel_pos_grid_h = gh;
  hp.rel_pos_grid_w = gw;
  if (hp.rel_pos)
    hp.source["rel_pos"] = std::string(per_block ? "per block (blocks.*." : "shared (") +
                           (per_block ? kTable : kShared) + (per_block && !w.rel_pos_table_shared.empty() ? ", plus shared)" : ")");
  prepare_rel_pos_bias(w);
}

}  // namespace detail
}  // namespace attnmap
