// explore.hpp - the attention explorer (issue 27; docs/explore.md): one image's every attention row as a
// static page that opens from file:// without a network or a server. `attnmap explore IMAGE -o DIR` writes
// one; `render --gallery G --explore` writes one per image (OutputKind::Explore) and links it.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/batch_hooks.hpp"
#include "engine/render.hpp"

namespace attnmap {

/// What write_explorer wrote.
struct ExploreResult {
  std::string index;             ///< DIR/index.html
  size_t data_bytes = 0;         ///< DIR/data/*.js, the budgeted part
  size_t page_bytes = 0;         ///< index.html + photo.png + data/ (the page as it opens)
  std::vector<int> left_out;     ///< blocks whose single heads were left out by the budget
  std::vector<int> dropped;      ///< blocks left out entirely by the budget (their fusions did not fit)
  size_t texts = 0, texts_mapped = 0;  ///< a CLIP given texts: how many, and how many have maps on the page
  std::string texts_unavailable;  ///< texts without maps: why (the class-specific views' reason, e.g. bf16 products)
  std::string stored;  ///< what the page holds, one line for the terminal (and the page); names settings as {setting:id}
};

/// Writes the explorer of `input` into `dir` (made if missing): index.html (the page, its script and the
/// provenance record `record`), photo.png (the photo, longer side at most 1024 px), data/blockNN.js (block NN's
/// rows, explore_pack.hpp: mean / max / min over heads and rollout through blocks 0..NN for every block,
/// every head of the blocks that fit ctx.opt->explore_budget_mb), with zero-shot texts (a CLIP given texts)
/// data/texts.js (the chefer, gradcam and attn-grad maps of each text, at most the 16 most probable, as
/// render's compute_views gives them; taken from the budget first; a model whose class-specific views are not
/// available (explanations_unavailable, or bf16 products) gets the texts' scores and the reason on the page, no
/// texts.js) and, with `with_npy`, attention.npy (float32
/// (L, H, T, T): softmax(QK^T/sqrt(d_k)) of every block, as computed) with its sidecar attention.npy.json.
/// A CaiT (model/cait.hpp): the rows and keys a block does not have are stored absent (NaN, explore_pack.hpp
/// mark_absent_row / mark_absent_key; NaN in attention.npy too) and the page says why (docs/explore.md "CaiT").
/// One forward pass (model/vit.hpp keep_full); rollout by maps/attention_maps RolloutAccumulator, heads
/// averaged, ctx.opt->discard, so its rows are `render --rollout`'s. Throws attnmap::Error naming the input
/// (unreadable, undecodable) or the budget (the fused maps alone exceed it).
ExploreResult write_explorer(const RenderContext& ctx, const std::string& input, const std::string& dir,
                             const std::string& record, bool with_npy);

/// Refuses (attnmap::Error naming `dir`) an explorer folder that holds anything but an earlier explorer's
/// files (index.html, photo.png, data/blockNN.js, attention.npy and its sidecar), or that holds `input`: an
/// explorer replaces only its own files. A folder not yet made or empty is fine; without an attnmap index.html
/// the photo.png must carry attnmap's mark (an explorer interrupted before its page) and the rest be the
/// explorer's names.
void check_explorer_folder(const std::string& dir, const std::string& input);

/// The record an explorer's index.html carries (as written by write_explorer); nullopt when the file is not
/// an attnmap explorer or cannot be read.
std::optional<nlohmann::json> read_explorer_record(const std::string& index_html);

/// The page: index.html's text around `meta` (the page's settings, data files and record; explore.cpp).
std::string explore_page_html(const nlohmann::ordered_json& meta);

/// attnmap explore on ro.inputs[0] into ro.out_dir: 0 written, 1 the image could not be read or the budget
/// cannot hold the fused maps (its error a line through hooks.on_line). Its lines through hooks.on_line: the
/// page's path and size (Out), the Hub's and the loader's notes and what the budget left out (Err). Throws
/// attnmap::Error for nothing to explore, an output folder that is not an explorer's, unusable weights or
/// settings (exit 2).
int explore_image(const RenderOptions& ro, const BatchHooks& hooks);

}  // namespace attnmap
