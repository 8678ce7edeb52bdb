// views.cpp - parsing, resolving and computing named views (see views.hpp).
#include "maps/views.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>

#include "checkpoint/layouts.hpp"
#include "core/error.hpp"
#include "core/names.hpp"
#include "core/setting_ref.hpp"
#include "model/cait.hpp"
#include "model/vit.hpp"
#include "model/vit_backward.hpp"
#include "maps/views_internal.hpp"

namespace attnmap {

using namespace view_detail;

namespace {

// The class-specific kinds, one row each. A new one is its ViewKind (view_kind.hpp), its row here and its
// case in explain_map (explain.cpp): the grammar, parsing, names, labels, units and is_class_specific follow.
struct MethodRow {
  ViewKind kind;
  const char* word;   ///< in the grammar, names and file names
  const char* label;  ///< describe_view; a kind with a block adds ", block N"
  const char* units;  ///< what a value is
  int ViewSettings::*default_layer;  ///< the block without @L; nullptr: the kind runs through blocks
  bool from_block;  ///< @L<k> is the first block it runs through (default 0: every block)
};
constexpr MethodRow kMethods[] = {
    {ViewKind::Chefer, "chefer", "Chefer relevance", "Chefer relevance", nullptr, true},
    {ViewKind::GradCam, "gradcam", "Grad-CAM", "Grad-CAM activation", &ViewSettings::gradcam_layer, false},
    {ViewKind::AttnGrad, "attn-grad", "attn \u00d7 grad", "attention \u00d7 gradient", &ViewSettings::attn_grad_layer, false},
};

const MethodRow* method_row(ViewKind kind) {
  for (const MethodRow& m : kMethods)
    if (m.kind == kind) return &m;
  return nullptr;
}

Error bad_view(const std::string& item, const std::string& why) { return Error("'" + item + "': " + why); }

// The views in one line, for a message about a name that is none (the whole grammar: view_grammar, the help
// and docs/cli.md#views).
std::string short_view_grammar() {
  std::string methods;
  for (const MethodRow& m : kMethods) methods += std::string(", ") + m.word;
  return "views are photo, L<layer>/<fusion>, rollout, probe" + methods + "; the grammar: docs/cli.md#views";
}

// "3", "-1", "last" -> a block as written.
int parse_layer_text(const std::string& item, const std::string& s) {
  if (s == "last") return -1;
  int v = 0;
  if (!parse_int(s, &v))
    throw bad_view(item, "'" + s + "' is not a block index (0-based, negative from the end, or last)");
  return v;
}

// "mean" | "max" | "min" | "h<index>"
HeadSelect parse_fusion_text(const std::string& item, const std::string& s) {
  HeadSelect h;
  if (s == "mean") return h;
  if (s == "max" || s == "min") {
    h.fusion = s == "max" ? HeadSelect::Fusion::Max : HeadSelect::Fusion::Min;
    return h;
  }
  int v = 0;
  if (s.size() >= 2 && s[0] == 'h' && parse_int(s.substr(1), &v)) {
    h.fusion = HeadSelect::Fusion::Index;
    h.index = v;
    return h;
  }
  const std::string near = nearest_name({"mean", "max", "min"}, s);
  throw bad_view(item, "'" + s + "' is not a head fusion" + (near.empty() ? "" : "; did you mean '" + near + "'?") +
                           " (mean, max, min or h<head>)");
}

// "chefer", "gradcam@L3", "attn-grad" -> the method view.
std::optional<ViewSpec> parse_method_view(const std::string& item) {
  const size_t at = item.find('@');
  const std::string method = item.substr(0, at);
  const MethodRow* row = nullptr;
  for (const MethodRow& m : kMethods)
    if (method == m.word) row = &m;
  if (!row) return std::nullopt;
  ViewSpec v;
  v.written = item;
  v.kind = row->kind;
  v.layer_given = at != std::string::npos;
  if (!v.layer_given) return v;
  if (!row->default_layer && !row->from_block)
    throw bad_view(item, method + " runs through every block; it takes no @L<layer>");
  const std::string rest = item.substr(at + 1);
  if (rest.size() < 2 || rest[0] != 'L') throw bad_view(item, "after '@' comes L<layer>");
  v.layer = parse_layer_text(item, rest.substr(1));
  return v;
}

// A name that is no view at all (not a malformed one: "L1/avg" is a fusion error). parse_one_view words it.
struct UnknownView : Error {
  explicit UnknownView(const std::string& item) : Error("'" + item + "': unknown view") {}
};

ViewSpec parse_view_body(const std::string& item);

// One view as written; throws UnknownView for a name that is no view, Error for a malformed one.
ViewSpec parse_view_item(const std::string& item) {
  const size_t colon = item.find(':');
  if (colon == std::string::npos) return parse_view_body(item);
  ViewSpec v = parse_view_body(item.substr(0, colon));
  v.written = item;
  if (v.kind != ViewKind::Attention && v.kind != ViewKind::Rollout)
    throw bad_view(item, "a token query follows an attention or rollout view only");
  v.query = parse_query_text(item, item.substr(colon + 1));
  return v;
}

ViewSpec parse_view_body(const std::string& item) {
  ViewSpec v;
  v.written = item;
  if (item == "photo") {
    v.kind = ViewKind::Photo;
    return v;
  }
  if (item == "rollout" || item.rfind("rollout/", 0) == 0 || item.rfind("rollout@", 0) == 0) {
    v.kind = ViewKind::Rollout;
    const size_t at = item.find('@');
    const std::string head = item.substr(0, at);
    if (head.size() > 7) {
      if (head[7] != '/') throw UnknownView(item);
      v.head = parse_fusion_text(item, head.substr(8));
    }
    v.layer_given = at != std::string::npos;
    if (v.layer_given) {
      const std::string rest = item.substr(at + 1);
      if (rest.size() < 2 || rest[0] != 'L') throw bad_view(item, "after '@' comes L<layer>");
      v.layer = parse_layer_text(item, rest.substr(1));
    }
    return v;
  }
  if (item == "probe" || item.rfind("probe/", 0) == 0) {
    v.kind = ViewKind::Probe;
    if (item.size() > 5) v.head = parse_fusion_text(item, item.substr(6));
    return v;
  }
  if (auto m = parse_method_view(item)) return *m;
  const size_t slash = item.find('/');
  if (item.size() < 2 || item[0] != 'L' || slash == std::string::npos) throw UnknownView(item);
  v.kind = ViewKind::Attention;
  v.layer = parse_layer_text(item, item.substr(1, slash - 1));
  v.head = parse_fusion_text(item, item.substr(slash + 1));
  return v;
}

// The view a user most likely meant by `item`, a name that is no view; "" when none is near. Tried in turn,
// the first that parses wins: the case folded ("Rollout", "l1/h3"), a file name's spelling ("L3-mean" ->
// L3/mean, "rollout-L2" -> rollout@L2), a block without its fusion ("L3" -> L3/mean), and the nearest word
// by edit distance with the rest kept ("rolout@L2" -> rollout@L2).
std::string suggested_view(const std::string& item) {
  std::vector<std::string> tries;
  std::string fixed = ascii_lower(item);
  for (size_t i = 0; i < fixed.size(); ++i)  // the block's L upper-case again: "l1/h3", "rollout@l2", "rollout-l2"
    if (fixed[i] == 'l' && (i == 0 || fixed[i - 1] == '@' || fixed[i - 1] == '-') && i + 1 < fixed.size() &&
        (std::isdigit(static_cast<unsigned char>(fixed[i + 1])) || fixed[i + 1] == '-'))
      fixed[i] = 'L';
  tries.push_back(fixed);
  if (fixed.find('/') == std::string::npos) {
    std::string tag = fixed;
    for (size_t at = tag.find("-L"); at != std::string::npos; at = tag.find("-L", at)) tag[at] = '@';
    tries.push_back(tag);
    const size_t dash = tag.find('-', 2);  // "L-1-mean": the sign at 1 is kept
    if (!tag.empty() && tag[0] == 'L' && dash != std::string::npos)
      tries.push_back(tag.substr(0, dash) + "/" + tag.substr(dash + 1));
    tries.push_back(fixed + "/mean");
  }
  const size_t cut = fixed.find_first_of("/@:");
  std::vector<std::string> words{"photo", "rollout", "probe"};
  for (const MethodRow& m : kMethods) words.push_back(m.word);
  const std::string near = nearest_name(words, fixed.substr(0, cut));
  if (!near.empty()) tries.push_back(near + (cut == std::string::npos ? "" : fixed.substr(cut)));
  for (const std::string& t : tries) {
    if (t == item) continue;
    try {
      (void)parse_view_item(t);
      return t;
    } catch (const Error&) {
    }
  }
  return "";
}

// One view as written; a name that is no view is refused with the nearest view and the views in one line.
ViewSpec parse_one_view(const std::string& item) {
  try {
    return parse_view_item(item);
  } catch (const UnknownView&) {  // named as written, its token query too
    const std::string near = suggested_view(item);
    throw Error("'" + item + "': unknown view" + (near.empty() ? "" : "; did you mean '" + near + "'?") + " (" +
                short_view_grammar() + ")");
  }
}

int resolve_view_layer(const ViewSpec& v, int layer, int depth) {
  try {
    return resolve_layer(layer, depth);
  } catch (const Error& e) {
    throw Error("'" + v.written + "': " + e.what());
  }
}

}  // namespace

std::string view_grammar() {
  std::string methods;
  for (const MethodRow& m : kMethods)
    methods += std::string(m.word) + (m.default_layer ? "[@L<layer>]" : m.from_block ? "[@L<first block>]" : "") + ", ";
  return "a view is L<layer>/<fusion> (layer an index, negative from the end, or 'last'; fusion mean, max, min or "
         "h<head>), rollout[/<fusion>][@L<layer>], probe[/<fusion>], " + methods + "or photo; an attention or rollout "
         "view may end in :q=r<row>c<col> | :q=x<x>y<y> | :q=cls | :q=dist | :q=reg<k> (that token's row), "
         ":k=r<row>c<col> (that patch's column) or :received";
}

std::string class_specific_view_words() {
  std::string s;
  for (size_t i = 0; i < std::size(kMethods); ++i)
    s += (i == 0 ? "" : i + 1 == std::size(kMethods) ? " or " : ", ") + std::string(kMethods[i].word);
  return s;
}

std::vector<ViewSpec> class_specific_views() {
  std::vector<ViewSpec> out;
  for (const MethodRow& m : kMethods) out.push_back(parse_one_view(m.word));
  return out;
}

ViewSpec parse_class_specific_view(const std::string& word) {
  for (const MethodRow& m : kMethods)  // chefer@L-1 too: its block is part of the method, not a run setting
    if (word == m.word || (m.from_block && word.rfind(std::string(m.word) + "@", 0) == 0)) return parse_one_view(word);
  for (const MethodRow& m : kMethods)  // gradcam@L3: its block is the run's setting here
    if (m.default_layer && word.rfind(std::string(m.word) + "@", 0) == 0)
      throw Error("expects " + class_specific_view_words() + ", found '" + word + "' (the block of " + m.word + " is " +
                  setting_ref(m.default_layer == &ViewSettings::gradcam_layer ? "gradcam_layer" : "layer") + " here)");
  throw Error("expects " + class_specific_view_words() + ", found '" + word + "'");
}

std::vector<ViewSpec> parse_views(const std::string& list) {
  std::vector<ViewSpec> out;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");  // "L1/h3, rollout"
    item = a == std::string::npos ? std::string() : item.substr(a, b - a + 1);
    if (item.empty()) throw Error("an empty view in '" + list + "' (" + short_view_grammar() + ")");
    out.push_back(parse_one_view(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<ViewSpec> every_layer_views(int depth, const HeadSelect& fusion) {
  std::vector<ViewSpec> out;
  for (int l = 0; l < depth; ++l) {
    ViewSpec v;
    v.kind = ViewKind::Attention;
    v.layer = l;
    v.head = fusion;
    v.written = "L" + std::to_string(l) + "/" + fusion_name(fusion, "h");
    out.push_back(v);
  }
  return out;
}

bool is_class_specific(ViewKind kind) { return method_row(kind) != nullptr; }

bool reads_query_rows(const ResolvedView& v) {
  return (v.spec.kind == ViewKind::Attention || v.spec.kind == ViewKind::Rollout) && !has_token_query(v);
}

namespace {

std::string describe_kind(const ResolvedView& v, int block_base);

}  // namespace

std::string describe_view(const ResolvedView& v, int block_base) {
  return describe_kind(v, block_base) + query_words(v.spec.query);
}

namespace {

std::string describe_kind(const ResolvedView& v, int block_base) {
  const std::string block = std::to_string(v.spec.layer + block_base);
  const std::string heads = fusion_name(v.spec.head, "head ");  // "head 3", or the fusion over heads: "mean"
  switch (v.spec.kind) {
    case ViewKind::Photo: return "photo";
    case ViewKind::Attention:
      return (v.class_attention ? "class-attention block " : "block ") + block + ", " + heads +
             (v.patch_query_mean ? " \u00b7 patch-query mean" : "");
    case ViewKind::Rollout:
      return "rollout " + std::to_string(block_base) + "\u2013" + block + ", " + heads +
             (v.discard > 0.0 ? ", discard " + number_text(v.discard) : "");
    case ViewKind::Probe: return "pool probe, " + heads;
    default: break;
  }
  const MethodRow* m = method_row(v.spec.kind);
  const std::string query = v.explain_query.empty() ? "" : " \u00b7 " + v.explain_query;  // issue 44: no class-token row
  if (m && m->from_block && v.spec.layer > 0)  // chefer@L<k>: which blocks it accumulates
    return m->label + (v.spec.layer == v.depth - 1 ? std::string(" (last block)")
                                                   : ", blocks " + block + "\u2013" + std::to_string(v.depth - 1 + block_base)) +
           query;
  return m ? m->label + (m->default_layer ? ", block " + block : std::string()) + query : v.name;
}

}  // namespace

namespace {

// The line of CaiT's attention a query reads (model/cait.hpp cait_line_unavailable).
CaitLine cait_line(TokenQuery::Kind k) {
  switch (k) {
    case TokenQuery::Kind::ClassRow: return CaitLine::Default;
    case TokenQuery::Kind::Prefix: return CaitLine::ClassRow;
    case TokenQuery::Kind::KeyPatch: return CaitLine::KeyColumn;
    case TokenQuery::Kind::Received: return CaitLine::Received;
    default: return CaitLine::PatchRow;
  }
}

// Name, tag, units and the resolved layer of one view.
ResolvedView resolve_one(const ViewSpec& v, const HParams& hp, bool has_head, const ViewSettings& settings) {
  ResolvedView r;
  r.spec = v;
  if (v.head.fusion == HeadSelect::Fusion::Index &&
      (v.head.index < -hp.num_heads || v.head.index >= hp.num_heads))
    throw Error("'" + v.written + "': head " + std::to_string(v.head.index) +
                " is out of range for " + std::to_string(hp.num_heads) + " heads");
  if (v.head.fusion == HeadSelect::Fusion::Index && v.head.index < 0)
    r.spec.head.index += hp.num_heads;  // h-1 is h3
  const std::string fusion = fusion_name(r.spec.head, "h");
  switch (v.kind) {
    case ViewKind::Photo:
      r.name = r.tag = "photo";
      return r;
    case ViewKind::Attention:
      r.spec.layer = resolve_view_layer(v, v.layer, hp.depth);
      r.name = "L" + std::to_string(r.spec.layer) + "/" + fusion;
      r.units = "attention probability";
      break;
    case ViewKind::Rollout:
      r.spec.layer = v.layer_given ? resolve_view_layer(v, v.layer, hp.depth) : hp.depth - 1;
      r.name = v.head.fusion == HeadSelect::Fusion::Mean ? "rollout" : "rollout/" + fusion;
      if (r.spec.layer != hp.depth - 1) r.name += "@L" + std::to_string(r.spec.layer);
      r.discard = v.discard.value_or(settings.discard);
      if (!(r.discard >= 0.0 && r.discard <= 1.0))
        throw Error("'" + v.written + "': the discard fraction must be in [0, 1], found " + number_text(r.discard));
      if (v.discard && *v.discard > 0.0) r.name += " discard " + number_text(*v.discard);
      r.units = "rollout mass";
      break;
    case ViewKind::Probe:
      if (hp.pool != Pool::Map)
        throw Error("'" + v.written + "': the model has no attention-pool (MAP) head whose probe could be drawn (" +
                    layout_name(hp.layout) + " layout, pool " + pool_name(hp.pool) + ")");
      r.spec.layer = hp.depth - 1;
      r.name = v.head.fusion == HeadSelect::Fusion::Mean ? "probe" : "probe/" + fusion;
      r.units = "attention probability";
      break;
    default: {  // a class-specific kind: its row
      const MethodRow& m = *method_row(v.kind);
      r.name = m.word;
      r.units = m.units;
      r.depth = hp.depth;
      if (m.from_block) {  // chefer@L<k>: blocks k..last; "chefer" is from block 0 (every block)
        r.spec.layer = v.layer_given ? resolve_view_layer(v, v.layer, hp.depth) : 0;
        if (r.spec.layer > 0) r.name += "@L" + std::to_string(r.spec.layer);
      }
      if (!m.default_layer) break;
      r.spec.layer = resolve_view_layer(v, v.layer_given ? v.layer : settings.*m.default_layer, hp.depth);
      if (v.layer_given) r.name += "@L" + std::to_string(r.spec.layer);
    }
  }
  if (v.kind == ViewKind::Attention || v.kind == ViewKind::Rollout) {
    r.spec.query = resolve_query(v, hp);
    if (const std::string why = cait_line_unavailable(hp, v.kind == ViewKind::Rollout, r.spec.layer, cait_line(v.query.kind));
        !why.empty())  // CaiT (model/cait.hpp): which rows and columns its blocks have
      throw Error("'" + v.written + "': " + why);
    r.class_attention = v.kind == ViewKind::Attention && hp.is_class_attention(r.spec.layer);
    r.patch_query_mean = v.kind == ViewKind::Attention && hp.class_attn_blocks > 0 && !r.class_attention &&
                         !has_token_query(r);  // a token query reads its own line, not the mean
    r.name += query_suffix(r.spec.query);
  }
  r.class_specific = is_class_specific(v.kind);
  if (r.class_specific && v.kind != ViewKind::GradCam) {  // Grad-CAM weighs activations: no query row
    ExplainQuery q = explain_query(hp);
    // attn-grad at a block without the query's row: the probe is outside the blocks, CaiT's class token outside
    // its self-attention blocks; the patch queries' mean is drawn (maps/explain.cpp)
    if (v.kind == ViewKind::AttnGrad &&
        (q == ExplainQuery::Probe || (q == ExplainQuery::CaitClassToken && !hp.is_class_attention(r.spec.layer))))
      q = ExplainQuery::PatchMean;
    r.explain_query = explain_query_words(q);
  }
  const std::string unavailable = r.class_specific ? explanations_unavailable(hp, has_head) : "";
  if (!unavailable.empty())
    throw Error("'" + v.written + "': " + unavailable + " (the attention views still work)");
  r.tag = r.name;
  for (char& c : r.tag)
    if (c == '/' || c == '@' || c == ' ' || c == ':' || c == '=') c = '-';
  // The run's discard changes the map (its peak 2.5x at 0.9): named in titles, panels, records and eval, as a
  // view's own discard is; file names keep the plain tag (one rollout per run, as before).
  if (v.kind == ViewKind::Rollout && !v.discard && r.discard > 0.0) r.name += " discard " + number_text(r.discard);
  return r;
}

}  // namespace

std::vector<ResolvedView> resolve_views(const std::vector<ViewSpec>& views, const HParams& hp, bool has_head,
                                        const ViewSettings& settings) {
  if (views.empty()) throw Error("no view given");
  std::vector<ResolvedView> out;
  std::map<std::string, std::string> seen;  // what a view computes -> its name
  for (const ViewSpec& v : views) {
    ResolvedView r = resolve_one(v, hp, has_head, settings);
    // The same map under two names: kind, resolved block, fusion (gradcam and gradcam@L3 are one map when
    // the default block is 3).
    const std::string key = std::to_string(static_cast<int>(r.spec.kind)) + "/" +
                            std::to_string(r.spec.layer) + "/" +
                            fusion_name(r.spec.head, "h") + "/" + number_text(r.discard) +
                            (r.spec.query.token == 0 && hp.class_token ? "" : query_suffix(r.spec.query));
    const auto [it, fresh] = seen.emplace(key, r.name);
    if (!fresh) throw Error("'" + v.written + "' names the view " + it->second + " a second time");
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

// A query view's map from one block's probabilities `m` (H, T, T) fused by the view's heads; a rollout's
// (T, T) matrix is one "head".
std::vector<float> query_map(const float* m, int H, int T, const HParams& hp, const ResolvedView& v) {
  const bool rollout = v.spec.kind == ViewKind::Rollout;
  return token_line_map(m, rollout ? 1 : H, T, hp, line_of(v), rollout ? HeadSelect{} : v.spec.head);
}

bool needs_tape(const std::vector<ResolvedView>& views) {
  for (const auto& v : views)
    if (v.class_specific) return true;
  return false;
}

// The class-token rows (L, H, T) of a taped forward, as vit_forward records them, so the attention views
// read the same numbers from either pass.
ForwardResult rows_of_tape(const ForwardTape& tape) {
  ForwardResult r;
  r.layers = static_cast<int>(tape.blocks.size());
  r.heads = tape.heads;
  r.tokens = tape.tokens;
  const size_t T = static_cast<size_t>(tape.tokens);
  r.cls_attn.reserve(static_cast<size_t>(r.layers) * static_cast<size_t>(r.heads) * T);
  if (tape.cait) r.cls_attn = tape.cait->cls_attn;  // CaiT: as cait_forward records them (model/cait.hpp)
  for (const BlockTape& b : tape.blocks)
    for (int h = 0; h < tape.heads && !tape.cait; ++h) {
      const float* row = b.probs.data() + static_cast<size_t>(h) * T * T;  // row 0 of head h
      r.cls_attn.insert(r.cls_attn.end(), row, row + T);
    }
  r.logits = tape.logits;
  r.pool_attn = tape.probe_attn;  // (H, T) the MAP head's probe attention; empty without one
  return r;
}

// Rollouts block by block: one RolloutAccumulator per (fusion, discard) shared by the rollout views that
// have them, each view's class row read once its last block is in.
class Rollouts {
 public:
  Rollouts(const HParams& hp, const std::vector<ResolvedView>& views) : hp_(hp), views_(views), maps_(views.size()) {
    for (size_t i = 0; i < views.size(); ++i) {
      if (views[i].spec.kind != ViewKind::Rollout) continue;
      const std::string key = fusion_name(views[i].spec.head, "h") + "/" + std::to_string(views[i].discard);
      size_t g = 0;
      while (g < keys_.size() && keys_[g] != key) ++g;
      if (g == keys_.size()) {
        keys_.push_back(key);
        acc_.emplace_back(hp.tokens(), hp.num_heads, views[i].spec.head, views[i].discard);
      }
      group_.emplace_back(i, g);
      last_ = std::max(last_, views[i].spec.layer);
    }
  }
  bool any() const { return !group_.empty(); }
  int last_block() const { return last_; }
  /// Block `l`'s probabilities (H, T, T), blocks in order from 0.
  void add(int l, const float* probs) {
    if (l > last_) return;
    for (auto& a : acc_) a.add_layer(probs);
    for (const auto& [view, g] : group_)
      if (views_[view].spec.layer == l)
        maps_[view] = has_token_query(views_[view]) ? query_map(acc_[g].rollout().data(), 1, hp_.tokens(), hp_, views_[view])
                                                    : class_row_map(acc_[g].rollout(), hp_, hp_.tokens());
  }
  const std::vector<float>& map(size_t view) const { return maps_[view]; }

 private:
  const HParams& hp_;
  const std::vector<ResolvedView>& views_;
  std::vector<std::string> keys_;
  std::vector<RolloutAccumulator> acc_;
  std::vector<std::pair<size_t, size_t>> group_;  // (view, accumulator)
  std::vector<std::vector<float>> maps_;          // per view
  int last_ = -1;
};

// The probe's attention (H, T) of a pass fused over heads, over the patch tokens: (grid_h, grid_w).
std::vector<float> probe_map(const ForwardResult& r, const HParams& hp, const HeadSelect& sel) {
  if (r.pool_attn.empty()) throw Error("probe: the forward pass did not run the attention pool");
  const std::vector<float> row = fuse_heads(r.pool_attn.data(), hp.num_heads, r.tokens, sel);  // (T)
  return std::vector<float>(row.begin() + hp.num_prefix, row.end());
}

// The attention views with a token query, each read from its block's probabilities as the pass goes by
// (the (H, T, T) matrices are not kept).
class QueryRows {
 public:
  QueryRows(const HParams& hp, const std::vector<ResolvedView>& views) : hp_(hp), views_(views), maps_(views.size()) {}
  /// Block `l`'s probabilities (H, T, T).
  void add(int l, const float* probs) {
    for (size_t i = 0; i < views_.size(); ++i)
      if (views_[i].spec.kind == ViewKind::Attention && has_token_query(views_[i]) && views_[i].spec.layer == l)
        maps_[i] = query_map(probs, hp_.num_heads, hp_.tokens(), hp_, views_[i]);
  }
  const std::vector<float>& map(size_t view) const { return maps_[view]; }

 private:
  const HParams& hp_;
  const std::vector<ResolvedView>& views_;
  std::vector<std::vector<float>> maps_;  // per view
};

// The class-agnostic views of one pass: attention from the class rows `rows` (a token query's from
// `queries`), rollouts from `rollouts`.
void agnostic_maps(const ViTWeights& model, const ForwardResult& rows, const std::vector<ResolvedView>& views,
                   const Rollouts& rollouts, const QueryRows& queries, std::vector<ViewMap>* out) {
  const ViewPass pass{&model, &rows, nullptr};
  for (size_t i = 0; i < views.size(); ++i) {
    const ResolvedView& v = views[i];
    const int mark = marked_patch(v, model.hp);
    if (v.spec.kind == ViewKind::Rollout)
      out->push_back(ViewMap{i, -1, rollouts.map(i), mark});  // accumulated block by block, not from full matrices
    else if (v.spec.kind == ViewKind::Attention && has_token_query(v))
      out->push_back(ViewMap{i, -1, queries.map(i), mark});
    else if (v.spec.kind == ViewKind::Attention || v.spec.kind == ViewKind::Probe)
      out->push_back(ViewMap{i, -1, view_map(pass, v, -1)});
  }
}

// The view with its pixel query placed on the photo whose model input lies in `box` (nullptr: none known).
ResolvedView placed_view(const ResolvedView& v, const HParams& hp, const Box* box) {
  if (v.spec.query.kind == TokenQuery::Kind::Pixel && !box)
    throw Error("'" + v.name + "': a pixel query needs the photo's box");
  return box ? place_query(v, hp, *box) : v;
}

// The views with their pixel queries placed for one image.
std::vector<ResolvedView> placed(const std::vector<ResolvedView>& views, const HParams& hp, const Box* box) {
  std::vector<ResolvedView> out;
  out.reserve(views.size());
  for (const ResolvedView& v : views) out.push_back(placed_view(v, hp, box));
  return out;
}

// Puts the maps in view order (agnostic views were appended first).
std::vector<ViewMap> in_view_order(std::vector<ViewMap> maps, size_t n_views) {
  std::vector<ViewMap> out;
  out.reserve(maps.size());
  for (size_t v = 0; v < n_views; ++v)
    for (ViewMap& m : maps)
      if (m.view == v) out.push_back(std::move(m));
  return out;
}

}  // namespace

namespace {

// An attention view with a token query from a pass that kept its block's matrices (keep_full, or a tape).
std::vector<float> query_view_map(const ViewPass& pass, const ResolvedView& v) {
  const HParams& hp = pass.model->hp;
  const size_t HTT = static_cast<size_t>(hp.num_heads) * static_cast<size_t>(hp.tokens()) * static_cast<size_t>(hp.tokens());
  const auto l = static_cast<size_t>(v.spec.layer);
  if (pass.fwd && pass.fwd->attn.size() >= (l + 1) * HTT)
    return query_map(pass.fwd->attn.data() + l * HTT, hp.num_heads, hp.tokens(), hp, v);
  if (pass.tape && l < pass.tape->blocks.size()) return query_map(pass.tape->blocks[l].probs.data(), hp.num_heads, hp.tokens(), hp, v);
  throw Error("'" + v.name + "': the forward pass did not keep block " + std::to_string(l) + "'s attention matrices");
}

}  // namespace

std::vector<float> view_map(const ViewPass& pass, const ResolvedView& v, int class_index) {
  const HParams& hp = pass.model->hp;
  switch (v.spec.kind) {
    case ViewKind::Photo: throw Error("'" + v.name + "' is not a map");
    case ViewKind::Attention:
      if (has_token_query(v)) return query_view_map(pass, placed_view(v, hp, pass.box));
      if (pass.fwd) return class_attention_map(*pass.fwd, hp, v.spec.layer, v.spec.head);
      if (pass.tape) return class_attention_map(rows_of_tape(*pass.tape), hp, v.spec.layer, v.spec.head);
      break;
    case ViewKind::Rollout:
      if (pass.fwd && has_token_query(v))
        return query_map(attention_rollout(*pass.fwd, v.spec.layer, v.spec.head, v.discard).data(), 1, pass.fwd->tokens,
                         hp, placed_view(v, hp, pass.box));
      if (pass.fwd) return class_row_map(attention_rollout(*pass.fwd, v.spec.layer, v.spec.head, v.discard), hp, pass.fwd->tokens);
      break;
    case ViewKind::Probe:
      if (pass.fwd) return probe_map(*pass.fwd, hp, v.spec.head);
      if (pass.tape) return probe_map(rows_of_tape(*pass.tape), hp, v.spec.head);
      break;
    default:  // a class-specific kind
      if (pass.tape) {
        ExplainRequest req{v.spec.kind, v.spec.layer};
        if (v.spec.kind == ViewKind::Chefer) req = ExplainRequest{v.spec.kind, 0, std::max(0, v.spec.layer)};
        return explain_map(*pass.model, *pass.tape, class_index, req);
      }
      break;
  }
  throw Error("'" + v.name + "': the forward pass did not keep what this view needs");
}

std::vector<ViewMap> compute_views(const ViTWeights& model, const float* image,
                                   const std::vector<ResolvedView>& run_views, const ClassSpec& classes,
                                   std::vector<float>* logits, const Box* input_box) {
  const HParams& hp = model.hp;
  const std::vector<ResolvedView> views = placed(run_views, hp, input_box);
  std::vector<ViewMap> maps;
  Rollouts rollouts(hp, views);
  QueryRows queries(hp, views);
  if (needs_tape(views)) {
    const ForwardTape tape = vit_forward_tape(model, image);
    for (size_t l = 0; l < tape.blocks.size(); ++l) {
      rollouts.add(static_cast<int>(l), tape.blocks[l].probs.data());
      queries.add(static_cast<int>(l), tape.blocks[l].probs.data());
    }
    agnostic_maps(model, rows_of_tape(tape), views, rollouts, queries, &maps);
    const std::vector<int> cls = resolve_classes(classes, tape.logits, hp.labels);
    const ViewPass pass{&model, nullptr, &tape};
    for (size_t i = 0; i < views.size(); ++i)
      if (views[i].class_specific)
        for (const int c : cls) maps.push_back(ViewMap{i, c, view_map(pass, views[i], c)});
    *logits = tape.logits;
    return in_view_order(std::move(maps), views.size());
  }
  ForwardOptions fo;
  fo.last_layer = std::max(0, rollouts.last_block());
  for (const auto& v : views)
    if (v.spec.kind == ViewKind::Attention) fo.last_layer = std::max(fo.last_layer, v.spec.layer);
  const bool any_query = std::any_of(views.begin(), views.end(), [](const ResolvedView& v) {
    return v.spec.kind == ViewKind::Attention && has_token_query(v);
  });
  if (rollouts.any() || any_query)
    fo.on_probs = [&rollouts, &queries](int, int l, const float* probs) {
      rollouts.add(l, probs);
      queries.add(l, probs);
    };
  fo.to_end = model.has_classes() ||  // the logits (top-5) need every block, the probe the final tokens
              std::any_of(views.begin(), views.end(), [](const ResolvedView& v) { return v.spec.kind == ViewKind::Probe; });
  const ForwardResult r = vit_forward(model, image, fo);
  agnostic_maps(model, r, views, rollouts, queries, &maps);
  *logits = r.logits;
  return in_view_order(std::move(maps), views.size());
}

}  // namespace attnmap
