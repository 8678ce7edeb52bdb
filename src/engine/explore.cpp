// explore.cpp - one image's explorer: the forward pass with every attention matrix, the rows quantised and
// packed per block under the size budget, the files written (explore.hpp, docs/explore.md).
#include "engine/explore.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/explore_pack.hpp"
#include "engine/provenance.hpp"
#include "engine/session.hpp"
#include "engine/text/score_words.hpp"
#include "engine/text/zero_shot.hpp"
#include "core/names.hpp"
#include "core/setting_ref.hpp"
#include "core/error.hpp"
#include "draw/overlay.hpp"
#include "io/hash.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "maps/views.hpp"
#include "model/classify.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"

namespace attnmap {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr int kPhotoSide = 1024;  // photo.png's longer side at most (the heatmap is per patch anyway)

// One block's data file: with and without its single heads (deflated payloads), and the per-map maxima.
struct PackedBlock {
  std::vector<uint8_t> fused, with_heads;
  std::vector<float> map_max;  // (4 + H): the largest patch value of each map over every row
};

// The JS file of a block: one call of the page's registration function with the base64 of the payload.
std::string block_script(int l, const std::vector<uint8_t>& packed) {
  return "attnmapBlock(" + std::to_string(l) + ",\"" + base64_encode(packed) + "\");\n";
}

// CaiT (model/cait.hpp; any other model: nothing): marks absent what block l does not have, so that no zero of
// the recorded (T, T) matrix is shown as attention. Attention (rollout false): the class row exists at a
// class-attention block only, the patch rows at a self-attention block only. Rollout: the patch rows at every
// block (through the self-attention blocks; the class-attention blocks leave the patches as they are), the
// class row from the first class-attention block on. The class token is a key of the class row only (no
// patch ever attends to it).
void mark_cait_absent(const HParams& hp, int l, bool rollout, QuantisedRows* m) {
  if (hp.class_attn_blocks == 0) return;
  const bool ca = hp.is_class_attention(l);
  if (!ca) mark_absent_row(m, 0);
  for (int i = 1; i < m->tokens; ++i) {
    if (ca && !rollout) mark_absent_row(m, i);
    else mark_absent_key(m, i, 0);
  }
}

// The largest patch value of a map over its rows (absent rows, NaN, skipped).
float largest_hi(const QuantisedRows& m) {
  float best = -std::numeric_limits<float>::infinity();
  for (const float v : m.hi) best = std::fmax(best, v);
  return best;
}

// Block l's maps quantised: the fusions and the block's rollout (R through blocks 0..l, `roll` advanced
// here), then every head (CaiT's absent rows and keys marked); their payloads deflated.
PackedBlock pack_block(const float* probs, const HParams& hp, int l, int H, int T, RolloutAccumulator* roll) {
  std::vector<QuantisedRows> maps;
  const int P = hp.num_prefix;
  const size_t TT = static_cast<size_t>(T) * T;
  for (int f = 0; f < 3; ++f) {
    const HeadSelect sel{f == 0 ? HeadSelect::Fusion::Mean : f == 1 ? HeadSelect::Fusion::Max : HeadSelect::Fusion::Min, 0};
    const std::vector<float> fused = fuse_heads(probs, H, static_cast<int>(TT), sel);
    maps.emplace_back();
    quantise_rows(fused.data(), T, P, &maps.back());
    mark_cait_absent(hp, l, false, &maps.back());
  }
  roll->add_layer(probs);
  maps.emplace_back();
  quantise_rows(roll->rollout().data(), T, P, &maps.back());
  mark_cait_absent(hp, l, true, &maps.back());
  PackedBlock b;
  b.fused = deflate_bytes(block_payload(maps));
  for (int h = 0; h < H; ++h) {
    maps.emplace_back();
    quantise_rows(probs + h * TT, T, P, &maps.back());
    mark_cait_absent(hp, l, false, &maps.back());
  }
  b.with_heads = deflate_bytes(block_payload(maps));
  for (const QuantisedRows& m : maps) b.map_max.push_back(largest_hi(m));
  return b;
}

// attention.npy's (L, H, T, T) for a CaiT model: the recorded matrices with NaN where a block has no row or
// key (a self-attention block's class row and column, a class-attention block's patch rows); any other
// model's as computed.
std::vector<float> npy_attention(const HParams& hp, const ForwardResult& r) {
  std::vector<float> a = r.attn;
  if (hp.class_attn_blocks == 0) return a;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t T = static_cast<size_t>(r.tokens);
  for (int l = 0; l < r.layers; ++l)
    for (int h = 0; h < r.heads; ++h) {
      float* m = a.data() + (static_cast<size_t>(l) * r.heads + h) * T * T;
      for (size_t i = 0; i < T; ++i)
        for (size_t k = 0; k < T; ++k)
          if (hp.is_class_attention(l) ? i > 0 : (i == 0 || k == 0)) m[i * T + k] = nan;
    }
  return a;
}

// CaiT only: why the page marks rows and keys absent (page meta "absent"; docs/explore.md "CaiT").
ojson cait_absent_meta(const HParams& hp) {
  const int first = hp.depth - hp.class_attn_blocks, last = hp.depth - 1;
  const std::string sa = "self-attention blocks 0.." + std::to_string(first - 1),  // as the page's block selector counts
                    ca = "class-attention blocks " + std::to_string(first) + ".." + std::to_string(last);
  ojson a;
  a["class_blocks"] = {first, last};
  a["class_row"] = "CaiT's class token is no query in its " + sa + " (it is not in them): it attends only in its " + ca +
                   " (its rollout row exists from block " + std::to_string(first) + " on); pick a patch";
  a["patch_rows"] = "in CaiT's " + ca + " only the class token queries: the patches have no row there (pick the class token, "
                    "or the rollout: these blocks leave the patches as they are, so the patches' rollout rows exist)";
  a["rollout_rows"] = "rollout at a class-attention block: the class token's row and the patches' rows (their rollout "
                      "through the " + sa + ")";
  a["sa_rows"] = "A patch's row there is CaiT's talking-heads softmax P = softmax(proj_l(QK\u1d40/\u221ad_k)) over the "
                 "patches (model/cait.hpp), the probabilities before proj_w mixes the heads";
  a["class_key"] = "no patch attends to CaiT's class token (the patches are no queries in the class-attention blocks, "
                   "and the class token is not in the self-attention blocks)";
  return a;
}

// The prefix tokens' names, in token order: class token, distillation token, registers.
std::vector<std::string> prefix_names(const HParams& hp) {
  std::vector<std::string> names;
  if (hp.class_token) names.push_back("class token");
  for (int i = 0; i < hp.num_dist; ++i) names.push_back("distillation token");
  for (int i = 0; i < hp.num_registers; ++i) names.push_back("register " + std::to_string(i));
  while (static_cast<int>(names.size()) < hp.num_prefix) names.push_back("prefix " + std::to_string(names.size()));
  return names;
}

// "0,2,3" for blocks 0, 2 and 3; "none".
std::string block_list(const std::vector<int>& blocks) {
  std::string s;
  for (const int l : blocks) s += (s.empty() ? "" : ",") + std::to_string(l);
  return s.empty() ? "none" : s;
}

// What the page holds, one line: the fused maps of every block; the single heads of the blocks stored; the
// blocks that were asked for (--explore-blocks) or, without it, every block, whose heads the budget left out.
std::string stored_line(const BlockChoice& c, int L, size_t budget, bool chosen) {
  std::string s = "every row of the head mean / max / min and rollout of all " + std::to_string(L) + " blocks; ";
  if (!c.dropped.empty())
    s = "every row of the head mean / max / min and rollout of blocks " + std::to_string(c.dropped.back() + 1) + ".." +
        std::to_string(L - 1) + " - LEFT OUT by the budget of " + megabytes(budget) + " MB (" + setting_ref("budget_mb") + "): block" +
        (c.dropped.size() > 1 ? "s " : " ") + block_list(c.dropped) + " entirely; ";
  std::vector<int> kept;
  for (int l = 0; l < L; ++l)
    if (c.heads[static_cast<size_t>(l)]) kept.push_back(l);
  if (c.left_out.empty() && !chosen && c.dropped.empty())
    return s + "every head of every block (" + megabytes(c.bytes) + " MB)";
  if (!kept.empty() || chosen)
    s += "single heads of block" + std::string(kept.size() > 1 ? "s " : " ") + block_list(kept) +
         (chosen ? " (" + setting_ref("explore_blocks") + ")" : "") + (c.left_out.empty() ? "" : "; ");
  if (!c.left_out.empty())
    s += "LEFT OUT by the budget of " + megabytes(budget) + " MB (" + setting_ref("budget_mb") + "): the single heads of block" +
         (c.left_out.size() > 1 ? "s " : " ") + block_list(c.left_out);
  return s + " (" + megabytes(c.bytes) + " MB stored)";
}

// Where the page opens (issue 41): the class token's row (the first prefix token's without one; the centre
// patch's when there is no prefix token) of the model's default view (the config's default_layer /
// default_head, else the last block's mean, as render draws), or the nearest the budget stored.
ojson start_view(const RenderContext& ctx, const BlockChoice& choice) {
  const HParams& hp = ctx.model->hp;
  const int P = hp.num_prefix, H = hp.num_heads;
  int block = ctx.layer;
  std::string head = ctx.head.fusion == HeadSelect::Fusion::Index ? "h" + std::to_string((ctx.head.index % H + H) % H)
                                                                   : fusion_name(ctx.head, "h");
  const std::string view = "L" + std::to_string(block) + "/" + head;
  const bool from_config = hp.default_layer.has_value() || hp.default_head.has_value();
  std::string note;
  if (!choice.fused[static_cast<size_t>(block)]) {  // left out entirely: the last block stored
    int b = hp.depth - 1;
    while (b > 0 && !choice.fused[static_cast<size_t>(b)]) --b;
    note = "block " + std::to_string(block) + " was left out by " + setting_ref("budget_mb") + ": opened on block " + std::to_string(b);
    block = b;
  }
  if (head[0] == 'h' && !choice.heads[static_cast<size_t>(block)]) {
    note += (note.empty() ? "" : "; ") + std::string("the single heads of block ") + std::to_string(block) +
            " are not stored (" + setting_ref("budget_mb") + ", " + setting_ref("explore_blocks") + "): opened on the mean over heads";
    head = "mean";
  }
  const bool cait_sa = hp.class_attn_blocks > 0 && !hp.is_class_attention(block);  // CaiT: no class row there
  const std::string token = P == 0 ? "the centre patch's row (the model has no prefix token)"
                            : cait_sa ? "the centre patch's row (CaiT's class token is not in self-attention block " + std::to_string(block) + ")"
                            : hp.class_token ? "the class token's row" : "the first prefix token's row";
  ojson s;
  s["block"] = block;
  s["head"] = head;
  s["query"] = P > 0 && !cait_sa ? 0 : P + (hp.grid_h / 2) * hp.grid_w + hp.grid_w / 2;
  s["view"] = view;
  s["text"] = "Opened on " + token + " of the model's default view " + view +
              (from_config ? " (the weights' config default_layer / default_head)" : " (the last block, mean over heads)") +
              (note.empty() ? "" : "; " + note) + ".";
  return s;
}

void write_text(const std::string& path, const std::string& text) {
  write_file_atomic(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// With zero-shot texts (a CLIP given texts, issue 43): each text's class-specific maps (chefer, gradcam,
// attn-grad) as the view engine computes them for render (compute_views, --class topK), the texts' logits and
// probabilities (the softmax over the texts given; SigLIP's sigmoid of each text alone). Maps of the
// kMaxTextMaps most probable texts. For a model whose class-specific views are not available
// (explanations_unavailable, or bf16 products; a SigLIP has maps since issue 44) the texts' scores only, from the page's
// own forward pass, and the reason on the page.
constexpr int kMaxTextMaps = 16;
constexpr const char* kTextsFile = "data/texts.js";

struct TextMaps {
  std::vector<ResolvedView> views;  // chefer, gradcam, attn-grad (the run's gradcam / attn-grad blocks)
  std::vector<int> mapped;          // the texts with maps, ascending
  std::vector<float> logits;        // (texts): exp(logit_scale) x cos(image, text)
  std::vector<float> maps;          // (views, mapped, grid_h * grid_w), float32 as computed
  std::string script;               // data/texts.js: attnmapTexts("<base64 of maps, little-endian>")
  std::string unavailable;          // why there are no maps ("" with maps): explanations_unavailable's reason
};

// Why the texts can have no class-specific maps on this model ("" when they can): the view engine's reason, or
// the run's bfloat16 products (the backward pass runs in float32 only, vit_backward.cpp).
std::string text_maps_unavailable(const ViTWeights& model) {
  if (model.precision != Precision::F32)
    return "they run in float32 only, not with the bfloat16 products of " + setting_ref("precision") + " bf16";
  return class_views_unavailable(model);  // the check render's --class and figure ask (score_words.hpp)
}

// `logits`: the page's forward pass's (to_end), used when the maps are unavailable (no backward pass is run).
TextMaps text_maps(const RenderContext& ctx, const ModelInput& in, const std::vector<float>& logits) {
  const ViTWeights& model = *ctx.model;
  TextMaps t;
  t.unavailable = text_maps_unavailable(model);
  if (!t.unavailable.empty()) {  // the scores only: no views, no maps, no data/texts.js
    t.logits = logits;
    if (t.logits.size() != model.hp.labels.size())
      throw Error("the forward pass gave " + std::to_string(t.logits.size()) + " zero-shot logits, expected one per text (" +
                  std::to_string(model.hp.labels.size()) + ")");
    return t;
  }
  t.views = resolve_views(class_specific_views(), model.hp, true, ctx.view_settings);
  ClassSpec top;
  top.k = std::min(model.num_classes(), kMaxTextMaps);
  top.written = "top" + std::to_string(top.k);
  const std::vector<ViewMap> maps = compute_views(model, in.chw.data(), t.views, top, &t.logits, &in.box);
  for (const ViewMap& m : maps)
    if (m.view == 0) t.mapped.push_back(m.class_index);
  std::sort(t.mapped.begin(), t.mapped.end());
  const size_t G = static_cast<size_t>(model.hp.grid_h) * model.hp.grid_w, J = t.mapped.size();
  t.maps.assign(t.views.size() * J * G, 0.0f);
  for (const ViewMap& m : maps) {
    const size_t j = static_cast<size_t>(std::lower_bound(t.mapped.begin(), t.mapped.end(), m.class_index) - t.mapped.begin());
    if (m.map.size() != G) throw Error("the " + t.views[m.view].name + " map has " + std::to_string(m.map.size()) + " values, expected " + std::to_string(G));
    std::copy(m.map.begin(), m.map.end(), t.maps.begin() + static_cast<long>((m.view * J + j) * G));
  }
  std::vector<uint8_t> raw(t.maps.size() * sizeof(float));
  if (!raw.empty()) std::memcpy(raw.data(), t.maps.data(), raw.size());  // x86/ARM: little-endian
  t.script = "attnmapTexts(\"" + base64_encode(raw) + "\");\n";
  return t;
}

// The page's note on the texts' probabilities: what they are (score_words.hpp), the templates. CLIP's: "Zero-shot
// probabilities over the 3 texts given (CLIP's softmax of exp(logit_scale) x cos(image, text), each text put into
// the template "a photo of a {}."): they sum to 1 over these texts only, so another list gives other numbers."
std::string texts_note(ScoreRule rule, size_t texts, const ojson& templates) {
  std::string tm;
  if (!templates.empty())  // the template as JSON.stringify writes it
    tm = ", each text put into " + (templates.size() > 1 ? "the " + std::to_string(templates.size()) + " templates and averaged"
                                                         : "the template " + templates[0].dump(-1, ' ', false, ojson::error_handler_t::replace));
  if (rule == ScoreRule::sigmoid)
    return "Zero-shot probabilities of the " + counted(texts, "text") + " given: " +
           zero_shot_scores_phrase(rule, texts, "the sigmoid of exp(logit_scale) \u00d7 cos(image, text) + logit_bias" + tm) +
           ", so another list of texts leaves each text's number as it is.";
  return "Zero-shot probabilities over the " + std::to_string(texts) + " texts given (CLIP's softmax of exp(logit_scale) "
         "\u00d7 cos(image, text)" + tm + "): they sum to 1 over these texts only, so another list gives other numbers.";
}

// The page's "texts" of a model without class-specific maps, after its labels, logits and probs: no methods, no
// maps, the note on the scores and "no_maps", the page's line saying why.
ojson scores_only_meta(const RenderContext& ctx, const TextMaps& t, ojson m) {
  const ScoreRule rule = ctx.model->zero_shot.rule;
  m["methods"] = ojson::array();
  m["mapped"] = ojson::array();
  const ojson record = zero_shot_record(*ctx.model);
  m["templates"] = record.is_object() && record.contains("templates") ? record["templates"] : ojson::array();
  m["rule"] = score_rule_name(rule);
  m["note"] = texts_note(rule, t.logits.size(), m["templates"]);
  m["no_maps"] = "No maps of the texts: the class-specific views (" + class_specific_view_words() +
                 ") are not available: " + t.unavailable + ". The attention rows below are as without texts.";
  return m;
}

// The page's "texts": the texts as given, their logits and probabilities, the methods, which texts have maps.
ojson texts_meta(const RenderContext& ctx, const TextMaps& t) {
  const ScoreRule rule = ctx.model->zero_shot.rule;  // softmax over the texts, or SigLIP's sigmoid per text
  const std::vector<double> probs = class_probabilities(t.logits, rule);
  ojson m, methods = ojson::array();
  m["labels"] = ctx.model->hp.labels;
  m["logits"] = t.logits;
  m["probs"] = probs;
  if (!t.unavailable.empty()) return scores_only_meta(ctx, t, m);
  for (const ResolvedView& v : t.views)
    methods.push_back({{"view", v.name}, {"label", view_label(v, ctx.opt->block_base)}, {"units", v.units}});
  m["methods"] = methods;
  m["mapped"] = t.mapped;
  int best = t.mapped.front();
  for (const int i : t.mapped)
    if (probs[static_cast<size_t>(i)] > probs[static_cast<size_t>(best)]) best = i;
  m["start"] = best;
  m["file"] = kTextsFile;
  m["bytes"] = t.script.size();
  const ojson record = zero_shot_record(*ctx.model);
  m["templates"] = record.is_object() && record.contains("templates") ? record["templates"] : ojson::array();
  m["rule"] = score_rule_name(rule);
  m["note"] = texts_note(rule, t.logits.size(), m["templates"]);
  return m;
}

// The stored line's part for the texts: "; the chefer, gradcam and attn-grad maps of 2 texts (0.01 MB)".
std::string texts_stored(const TextMaps& t, size_t texts) {
  if (!t.unavailable.empty())  // "; the zero-shot scores of 2 texts, no maps (chefer, gradcam or attn-grad: ...)"
    return "; the zero-shot scores of " + counted(texts, "text") + ", no maps (" + class_specific_view_words() +
           ": not available in this run)";
  std::string s = "; the ";
  for (size_t i = 0; i < t.views.size(); ++i)
    s += (i == 0 ? "" : i + 1 == t.views.size() ? " and " : ", ") + t.views[i].name;
  s += " maps of " + (t.mapped.size() == texts ? counted(texts, "text")
                                                 : "the " + std::to_string(t.mapped.size()) + " most probable of " + counted(texts, "text"));
  return s + " (" + megabytes(t.script.size()) + " MB)";
}

// The page's settings: sizes, tokens, data files, colour table, photo, budget, record.
ojson page_meta(const RenderContext& ctx, const std::string& input, const BlockChoice& choice,
                const std::vector<PackedBlock>& blocks, const Image& small, const Box& box, const Image& photo,
                const std::string& record, const TextMaps* texts) {
  const HParams& hp = ctx.model->hp;
  ojson m;
  m["image"] = fs::path(input).filename().string();
  m["tokens"] = hp.tokens();
  m["prefix"] = prefix_names(hp);
  m["grid"] = {hp.grid_w, hp.grid_h};
  m["blocks"] = hp.depth;
  m["heads"] = hp.num_heads;
  m["fused"] = {"mean", "max", "min", "rollout"};
  m["heads_stored"] = choice.heads;
  ojson files = ojson::array(), maxima = ojson::array();
  for (int l = 0; l < hp.depth; ++l) {
    char name[32];
    std::snprintf(name, sizeof name, "data/block%02d.js", l);
    files.push_back(choice.fused[static_cast<size_t>(l)] ? ojson(name) : ojson(nullptr));  // null: left out
    maxima.push_back(blocks[l].map_max);
  }
  m["files"] = files;
  m["map_max"] = maxima;
  m["colormap"] = ctx.opt->colormap.name;
  m["lut"] = std::vector<int>(ctx.cmap, ctx.cmap + 256 * 3);
  m["alpha"] = ctx.opt->alpha;
  m["photo"] = {{"file", "photo.png"}, {"width", small.width}, {"height", small.height}};
  m["box"] = {box.x0 / photo.width, box.y0 / photo.height, box.x1 / photo.width, box.y1 / photo.height};
  m["budget_mb"] = ctx.opt->explore_budget_mb;
  m["data_bytes"] = choice.bytes + (texts ? texts->script.size() : 0);
  m["left_out"] = choice.left_out;
  m["dropped"] = choice.dropped;
  m["stored"] = stored_line(choice, hp.depth, static_cast<size_t>(ctx.opt->explore_budget_mb * 1024 * 1024),
                            !ctx.opt->explore_blocks.empty()) +
                (texts ? texts_stored(*texts, hp.labels.size()) : "");
  m["discard"] = ctx.opt->discard;
  m["start"] = start_view(ctx, choice);
  if (hp.class_attn_blocks > 0) {  // CaiT: rows and keys its blocks do not have are stored absent (NaN)
    m["absent"] = cait_absent_meta(hp);
    m["stored"] = m["stored"].get<std::string>() + "; CaiT: the rows and keys its blocks do not have are stored as absent, not as zeros";
  }
  if (texts) m["texts"] = texts_meta(ctx, *texts);
  m["record"] = record.empty() ? ojson(nullptr) : ojson::parse(record);
  return m;
}

// choose_blocks under --budget-mb less `texts` bytes (the texts' maps, stored first: they were asked for).
// Throws attnmap::Error when the texts' maps alone, or with the last block's fusions, exceed the budget.
BlockChoice choose_within_budget(const std::vector<size_t>& fused, const std::vector<size_t>& heads,
                                 const RenderOptions& opt, int L, size_t texts) {
  const size_t budget = static_cast<size_t>(opt.explore_budget_mb * 1024.0 * 1024.0);
  if (texts > budget)
    throw Error("the texts' relevance maps alone need " + megabytes(texts) + " MB, more than the budget of " +
                megabytes(budget) + " MB: raise " + spelled_settings(setting_ref("budget_mb")));
  try {
    return choose_blocks(fused, heads, budget - texts, explore_blocks(opt, L));
  } catch (const Error& e) {
    if (texts == 0) throw;
    throw Error(std::string(e.what()) + " (" + megabytes(texts) + " MB of the " + megabytes(budget) +
                " MB hold the texts' relevance maps)");
  }
}

size_t file_size_or_zero(const std::string& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : static_cast<size_t>(n);
}

}  // namespace

ExploreResult write_explorer(const RenderContext& ctx, const std::string& input, const std::string& dir,
                             const std::string& record, bool with_npy) {
  const ViTWeights& model = *ctx.model;
  const HParams& hp = model.hp;
  const RenderOptions& opt = *ctx.opt;
  check_explorer_folder(dir, input);
  const std::vector<uint8_t> bytes = read_file(input);
  const Image photo = decode_image(bytes.data(), bytes.size(), input, opt.load);
  const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, opt.resize, hp.mean.data(), hp.std.data(),
                                   hp.crop_pct.value_or(0.875f));
  ForwardOptions fo;
  fo.keep_full = true;
  // texts without maps: their logits from this pass (the same rows; with maps, compute_views gives them)
  fo.to_end = has_text_classes(model) && !text_maps_unavailable(model).empty();
  const ForwardResult r = vit_forward(model, in.chw.data(), fo);
  const int L = r.layers, H = r.heads, T = r.tokens;
  const size_t per_layer = static_cast<size_t>(H) * T * T;
  RolloutAccumulator roll(T, H, HeadSelect{HeadSelect::Fusion::Mean, 0}, opt.discard);
  std::vector<PackedBlock> blocks;
  std::vector<size_t> fused_sizes, head_sizes;
  for (int l = 0; l < L; ++l) {
    blocks.push_back(pack_block(r.attn.data() + l * per_layer, hp, l, H, T, &roll));
    fused_sizes.push_back(block_script(l, blocks.back().fused).size());
    head_sizes.push_back(block_script(l, blocks.back().with_heads).size() - fused_sizes.back());
  }
  std::optional<TextMaps> texts;  // a CLIP given texts: their maps, taken from the budget first
  if (has_text_classes(model)) texts = text_maps(ctx, in, r.logits);
  const BlockChoice choice = choose_within_budget(fused_sizes, head_sizes, opt, L, texts ? texts->script.size() : 0);

  fs::create_directories(fs::path(dir) / "data");
  ExploreResult res;
  res.index = (fs::path(dir) / "index.html").string();
  ::unlink(res.index.c_str());  // a page never points at data files of other settings, even after a crash
  if (with_npy) {
    const std::string npy = (fs::path(dir) / "attention.npy").string();
    write_npy(npy, npy_attention(hp, r), {L, H, T, T});
    if (!record.empty()) write_text(npy_sidecar_path(npy), record + "\n");
  }
  if (texts && texts->unavailable.empty()) write_text((fs::path(dir) / kTextsFile).string(), texts->script);
  else ::unlink((fs::path(dir) / kTextsFile).c_str());  // an earlier explorer's maps are not this page's (none: no file)
  for (int l = 0; l < L; ++l) {
    char name[32];
    std::snprintf(name, sizeof name, "data/block%02d.js", l);
    if (!choice.fused[static_cast<size_t>(l)]) {  // left out: no file, not even one of an earlier explorer
      ::unlink((fs::path(dir) / name).c_str());
      continue;
    }
    write_text((fs::path(dir) / name).string(), block_script(l, choice.heads[l] ? blocks[l].with_heads : blocks[l].fused));
  }
  const double shrink = std::min(1.0, static_cast<double>(kPhotoSide) / std::max(photo.width, photo.height));
  const Image small = shrink < 1.0 ? resize_photo(photo, std::max(1, static_cast<int>(photo.width * shrink + 0.5)),
                                                  std::max(1, static_cast<int>(photo.height * shrink + 0.5)))
                                   : photo;
  PngOptions po;  // the record marks the photo as the explorer's (a folder walk passes over it, a rerun replaces it)
  if (!record.empty()) po.text.push_back({kProvenanceKeyword, record});
  write_png((fs::path(dir) / "photo.png").string(), small, po);
  const ojson meta = page_meta(ctx, input, choice, blocks, small, in.box, photo, record, texts ? &*texts : nullptr);
  // last: a page exists only with all its files; the settings its lines name spelled as the command line's flags
  write_text(res.index, spelled_settings(explore_page_html(meta)));
  res.data_bytes = meta["data_bytes"].get<size_t>();
  res.page_bytes = res.data_bytes + file_size_or_zero(res.index) + file_size_or_zero((fs::path(dir) / "photo.png").string());
  res.left_out = choice.left_out;
  res.dropped = choice.dropped;
  res.stored = meta["stored"].get<std::string>();
  res.texts = texts ? hp.labels.size() : 0;
  res.texts_mapped = texts ? texts->mapped.size() : 0;
  res.texts_unavailable = texts ? texts->unavailable : "";
  return res;
}

void check_explorer_folder(const std::string& dir, const std::string& input) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;  // made by the explorer (a file there is refused by the caller)
  const std::string cdir = fs::weakly_canonical(dir, ec).string(), cin = fs::weakly_canonical(input, ec).string();
  if (cin.size() > cdir.size() && cin.compare(0, cdir.size() + 1, cdir + "/") == 0)
    throw Error(dir + " holds the input " + input + "; write the explorer into another folder");
  const bool explorer = read_explorer_record((fs::path(dir) / "index.html").string()).has_value();
  auto refuse = [&](const fs::path& p) {
    return Error(dir + " holds " + p.string() + ", which is not an attnmap explorer's file; an explorer is written "
                 "into a new or empty folder, or over an earlier explorer (nothing else is replaced)");
  };
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "data" && e.is_directory()) {
      for (const fs::directory_entry& d : fs::directory_iterator(e.path())) {
        const std::string f = d.path().filename().string();
        const bool block = f.size() == 10 && f.rfind("block", 0) == 0 && f.compare(7, 3, ".js") == 0 &&
                           std::isdigit(static_cast<unsigned char>(f[5])) && std::isdigit(static_cast<unsigned char>(f[6]));
        if (!(block || f == "texts.js") || !d.is_regular_file()) throw refuse(d.path());
      }
      continue;
    }
    const bool ours = name == "index.html" ? explorer
                      : name == "photo.png" ? explorer || written_by_attnmap(e.path().string())
                      : name == "attention.npy" || name == "attention.npy.json" ? explorer || read_sidecar(
                            (fs::path(dir) / "attention.npy.json").string()).has_value()
                                                                                  : false;
    if (!ours || !e.is_regular_file()) throw refuse(e.path());
  }
}

std::optional<nlohmann::json> read_explorer_record(const std::string& index_html) {
  std::ifstream f(index_html, std::ios::binary);
  if (!f) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string open = "<script type=\"application/json\" id=\"attnmap-record\">";
  const size_t a = text.find(open);
  if (a == std::string::npos || text.find("<meta name=\"generator\" content=\"attnmap explore\">") == std::string::npos)
    return std::nullopt;
  const size_t b = text.find("</script>", a);
  if (b == std::string::npos) return std::nullopt;
  try {
    nlohmann::json j = nlohmann::json::parse(text.substr(a + open.size(), b - a - open.size()));
    if (j.is_object() && j.contains("attnmap_version")) return j;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

namespace {

/// Nothing to explore is bad usage, as render's nothing to render (exit 2, before anything is made); so is an
/// output folder that is a file, or holds an index.html or other files that are not an explorer's.
void check_explore_paths(const std::string& input, const std::string& out_dir) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(input, ec))) throw Error(input + ": no such file or folder; nothing to explore");
  if (fs::is_directory(input, ec))
    throw Error(input + " is a folder; explore takes one image file (render " + setting_ref("explore") +
                " makes one explorer per image of a folder)");
  const std::string index = (fs::path(out_dir) / "index.html").string();
  if (fs::exists(fs::symlink_status(out_dir, ec)) && !fs::is_directory(out_dir, ec))
    throw Error(setting_ref("out") + " " + out_dir + " is an existing file; name a folder");
  if (fs::exists(fs::symlink_status(index, ec)) && !read_explorer_record(index))
    throw Error(setting_ref("out") + " " + out_dir + ": " + index + " exists and is not an attnmap explorer; it is left alone");
  try {
    check_explorer_folder(out_dir, input);
  } catch (const Error& e) {
    throw Error(setting_ref("out") + " " + std::string(e.what()));
  }
}

/// What the run says once the page is written: the page and its size (standard output), and the notes of
/// what the size budget left out.
void say_explorer(const std::string& input, const ExploreResult& res, bool quiet, const BatchHooks& hooks) {
  if (!quiet) {
    say(hooks, LineStream::Out, printable(input + " -> " + res.index));
    say(hooks, LineStream::Out, "  stored: " + printable(res.stored));
    say(hooks, LineStream::Out, "  page: " + megabytes(res.page_bytes) + " MB (data " + megabytes(res.data_bytes) + " MB)");
  }
  const std::string budget = setting_ref("budget_mb");
  if (!res.dropped.empty())
    say(hooks, LineStream::Err, "attnmap: note: " + printable(input) + ": " + counted(res.dropped.size(), "block") +
                                    " left out entirely by " + budget +
                                    " (their fused maps did not fit): see the page's 'stored' line");
  if (!res.left_out.empty())
    say(hooks, LineStream::Err, "attnmap: note: " + printable(input) + ": single heads left out by " + budget +
                                    ": see the page's 'stored' line");
  if (!res.texts_unavailable.empty())
    say(hooks, LineStream::Err, "attnmap: note: " + printable(input) + ": the page lists the zero-shot scores of " + counted(res.texts, "text") +
                                    " without maps: the class-specific views are not available: " +
                                    printable(res.texts_unavailable));
  else if (res.texts_mapped < res.texts)
    say(hooks, LineStream::Err, "attnmap: note: " + printable(input) + ": the page has the maps of the " +
                                    std::to_string(res.texts_mapped) + " most probable of the " + counted(res.texts, "text") +
                                    " (at most " + std::to_string(kMaxTextMaps) + "); every text's probability is listed");
}

}  // namespace

int explore_image(const RenderOptions& ro_in, const BatchHooks& hooks) {
  RenderOptions ro = ro_in;
  const bool write_npy = ro.writes(OutputKind::Explore);
  ro.map_files = {OutputKind::Explore};
  ro.names_classes = false;  // the page names no class: no note on the head's class names
  const std::string& input = ro.inputs.front();
  check_explore_paths(input, ro.out_dir);
  const RunWeights weights = run_weights(ro.weights, ro.quiet, hooks);  // a path, or a Hub name fetched into the cache
  const std::shared_ptr<const ViTWeights> loaded = load_run_model(ro, weights, false, hooks);
  RenderOptions view_opt = ro;  // the render view's checks refuse --discard without a rollout view; the
  view_opt.discard = 0.0;       // explorer's rollout takes it (recorded under "explore")
  RenderContext ctx = make_render_context(*loaded, view_opt);
  ctx.opt = &ro;
  nlohmann::ordered_json settings = make_provenance(ctx, weights.path);
  settings["view"] = "explore";
  settings["attention_npy"] = write_npy;
  ExploreResult res;
  try {  // an image that exists but cannot be read or decoded fails on its own (exit 1)
    const std::vector<uint8_t> bytes = read_file(input);
    const std::string record = image_provenance(provenance_text(settings), sha256_bytes(bytes.data(), bytes.size()));
    res = write_explorer(ctx, input, ro.out_dir, record, write_npy);
  } catch (const Error& e) {
    say(hooks, LineStream::Err, "attnmap: error: " + printable(e.what()));
    return 1;
  }
  say_explorer(input, res, ro.quiet, hooks);
  return 0;
}

}  // namespace attnmap
