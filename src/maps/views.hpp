// views.hpp - the one view engine (issue 25): every map attnmap draws, saves or scores is a named view
// ("L3/mean", "L1/h3", "rollout", "rollout@L2", "chefer", "gradcam@L3", ...), parsed once per run, resolved
// against the model, and computed by view_map / compute_views. render (its single view included: --layer,
// --head, --rollout, --explain are translated into one view), figure and eval all call these.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "maps/attention_maps.hpp"
#include "maps/explain.hpp"
#include "maps/view_kind.hpp"
#include "model/classify.hpp"
#include "model/preprocess.hpp"

namespace attnmap {

/// One view as written, before the model is known. Grammar (case-sensitive, as `attnmap eval` prints):
///   L<layer>/<fusion>   the class token's attention at one block; layer an index, negative from the end, or
///                       `last`; fusion mean | max | min | h<index> (one head)
///   rollout[/<fusion>][@L<layer>]  attention rollout (Abnar & Zuidema 2020) through blocks 0..layer (default:
///                       every block), heads fused by mean unless given; ViewSettings::discard applies
///   probe[/<fusion>]    an attention-pool (MAP) head's learned probe query over the final tokens (timm
///                       AttentionPoolLatent: SigLIP), heads fused by mean unless given; models with such a head
///   chefer[@L<layer>]   Chefer et al.'s relevance, class-specific (issue 19, maps/explain.hpp), for --class,
///                       accumulated over blocks <layer>..last (default 0: every block, the generic method;
///                       chefer@L-1: the last block only, the default of Chefer's CLIP notebook)
///   gradcam[@L<layer>]  Grad-CAM on block <layer>'s norm1 (default: the run's --gradcam-layer, else the
///   last) attn-grad[@L<layer>] one block's attention x gradient (default: ViewSettings::attn_grad_layer)
///   photo               the photo alone (a column of `attnmap figure`; not a map)
/// An attention or rollout view may end in a token query (issue 27); without one it reads the class token's
/// row (or, without a class token, the mean of the patch queries' rows):
///   :q=r<row>c<col>     the row of the query patch at grid row, column (0-based; negative from the end)
///   :q=x<x>y<y>         the row of the patch under photo pixel (x, y) (the photo as shown, EXIF applied),
///                       mapped through the run's resize / crop; a point outside the model's box is refused
///   :q=cls | :q=dist | :q=reg<k>   the row of the class, distillation or k-th register token
///   :k=r<row>c<col>     the column of a key patch: the attention each query patch pays to it
///   :received           the attention each patch receives, averaged over every query token (column means)
/// Examples: "L5/h3:q=r7c3", "rollout:q=x120y85", "L-1/mean:q=reg0", "L2/max:received".
struct TokenQuery {
  enum class Kind { ClassRow, Patch, Pixel, Prefix, KeyPatch, Received };
  Kind kind = Kind::ClassRow;  ///< ClassRow: no query written (the view's default row)
  int row = 0, col = 0;        ///< Patch / KeyPatch: grid position (resolved: 0-based, in range)
  double x = 0, y = 0;         ///< Pixel: the photo point in pixels
  std::string prefix;          ///< Prefix: "cls", "dist" or "reg<k>"
  int token = -1;              ///< resolved: the token index (prefix first); Pixel: per image (place_query)
  std::string written;         ///< as written after the ':' ("q=r7c3", "received"); empty for ClassRow
};

struct ViewSpec {
  ViewKind kind = ViewKind::Attention;
  int layer = -1;           ///< Attention / AttnGrad / GradCam: the block as written (negative from the end);
                            ///< Chefer: the first block accumulated (resolved: 0 without @L)
  bool layer_given = true;  ///< false for gradcam / attn-grad without @L: the run's default applies
  HeadSelect head;          ///< Attention / Rollout: how the heads are fused
  TokenQuery query;         ///< Attention / Rollout: the token whose row (or the patch whose column) is read
  std::optional<double> discard;  ///< Rollout: this view's discard instead of ViewSettings::discard (eval's
                                  ///< selected rollout beside the standard one); its name then says it
  std::string written;
};

/// A token query as written after a view's ':' ("q=r7c3", "q=x120y85", "q=reg2", "k=r7c3", "received"), not
/// resolved (render's --query / --key / --received). Throws attnmap::Error naming the text otherwise.
TokenQuery parse_token_query(const std::string& text);
/// What a query asks, in words: "query patch (7, 3)", "register 2's row", "attention received"; "" for none.
std::string describe_query(const TokenQuery& q);

/// The grammar in one sentence, for help texts and messages: "a view is L<layer>/<fusion> (...), rollout...".
std::string view_grammar();

/// Parses a comma-separated list (spaces around an item ignored; empty items refused). Throws attnmap::Error
/// naming the item and the grammar for anything else (no option name: the options layer adds it).
std::vector<ViewSpec> parse_views(const std::string& list);

/// What the views of a run need from the model, fixed for the run.
struct ViewSettings {
  double discard = 0.0;      ///< rollout's fraction of the smallest fused entries zeroed per block, [0, 1]
  int gradcam_layer = -1;    ///< Grad-CAM's block without @L (--gradcam-layer; negative from the end)
  int attn_grad_layer = -1;  ///< attn-grad's block without @L (render: --layer or the config's default view)
};

/// A view resolved against a model: layers 0-based, names canonical.
struct ResolvedView {
  ViewSpec spec;      ///< layer resolved to 0..depth-1
  std::string name;   ///< canonical, as eval prints it: "L3/mean", "L1/h3" (h-1 of 4 heads is h3), "rollout",
                      ///< "rollout/max", "chefer", "chefer@L11" (from block 11), "gradcam", "attn-grad@L2"
  std::string tag;    ///< the name in file names: '/' and '@' become '-' ("L3-mean", "attn-grad-L2")
  std::string units;  ///< what a value is: "attention probability", "rollout mass", "Chefer relevance", ...
  bool class_specific = false;  ///< chefer, gradcam, attn-grad: one map per explained class
  double discard = 0.0;         ///< Rollout: ViewSettings::discard (0 for the others)
  bool class_attention = false; ///< Attention at a CaiT class-attention block (model/cait.hpp): named so
  bool patch_query_mean = false; ///< Attention at a CaiT self-attention block: the patch queries' mean row
  int depth = 0;                 ///< class-specific views: the model's blocks (chefer@L<k>'s words name them)
  std::string explain_query;      ///< class-specific views: explain_query_words ("" for the class token)
};

/// The class-specific views' words, from the table: "chefer, gradcam or attn-grad".
std::string class_specific_view_words();
/// One view of each class-specific kind as written without @L ("chefer", "gradcam", "attn-grad"): eval's rows.
std::vector<ViewSpec> class_specific_views();
/// `word` as a class-specific view without @L, or chefer@L<k> (render's --explain: gradcam's and attn-grad's
/// blocks are run settings there); throws attnmap::Error "expects chefer, gradcam or attn-grad, found 'x'"
/// otherwise.
ViewSpec parse_class_specific_view(const std::string& word);

/// Whether a kind of view explains a class (needs the backward pass and a classifier head). The one place
/// this is decided.
bool is_class_specific(ViewKind kind);

/// Whether a view's map is built from the default query rows of attention (the class token's row, or without
/// a class token the mean of the patch queries' rows): attention and rollout views without a token query.
bool reads_query_rows(const ResolvedView& v);

/// Whether a view reads one token's line other than the default row (a query, a key patch or the column
/// means): it then needs its block's full (H, T, T) probabilities (ForwardOptions::keep_full for view_map).
bool has_token_query(const ResolvedView& v);

/// The view with a photo-pixel query placed for one image: the patch under (x, y) of the photo given the
/// model input's box in the photo (ModelInput::box); other views unchanged. Throws attnmap::Error naming the
/// view when the point lies outside the box (cropped away, or off the photo).
ResolvedView place_query(const ResolvedView& v, const HParams& hp, const Box& box);

/// The grid index (row-major) of the patch a figure marks for a view: the query patch or the key patch;
/// -1 for none (the class token's row, a prefix token's row, the column means, other kinds).
int marked_patch(const ResolvedView& v, const HParams& hp);

/// What a view shows in words, short enough for a paper figure's column title: "block 1, head 3", "block 3,
/// mean" (the heads' mean), "rollout 0–3, mean", "pool probe, max", "Chefer relevance", "Chefer relevance
/// (last block)" (chefer@L-1; "Chefer relevance, blocks 9–11" for chefer@L9 of 12 blocks), "Grad-CAM, block 11",
/// "attn × grad, block 2"; a token query adds what is asked: "block 5, head 3, query patch (7, 3)",
/// "…, query pixel (120, 85)", "…, register 2's row", "…, attention to patch (7, 3)", "…, attention received".
/// `block_base`: the number the words give the first block (0, as --layer and the view names count; 1 for a
/// paper that says "block 1" of the first, --block-numbering 1): "block 2, head 3" for L1/h3. Heads, patches
/// and registers keep their 0-based indices.
std::string describe_view(const ResolvedView& v, int block_base = 0);
/// A figure row's label: describe_view, the same words for a view in every figure (a render panel of
/// --layer 1 --head 3 and of --views L1/h3, attnmap figure's columns); files and terminal lines use the name.
std::string view_label(const ResolvedView& v, int block_base = 0);

/// Resolves every view against hp (depth, heads), `has_head` (class-specific views need a classifier
/// head and the residual-MLP layouts the backward covers) and the run's settings. Throws attnmap::Error
/// naming the view for a layer or head out of range, a class-specific view without a head, a discard
/// outside [0, 1], or two views that name the same map ("L-1/mean" and "L3/mean" in a 4-block model,
/// "gradcam" and "gradcam@L3" when the default is block 3, "rollout" and "rollout@L3").
std::vector<ResolvedView> resolve_views(const std::vector<ViewSpec>& views, const HParams& hp, bool has_head,
                                        const ViewSettings& settings);

/// Every block with one fusion: "L0/F", ..., "L<depth-1>/F" (`--layers all`).
std::vector<ViewSpec> every_layer_views(int depth, const HeadSelect& fusion);

/// One computed map of one view (and, for class-specific views, one class).
struct ViewMap {
  size_t view = 0;         ///< index into the resolved views
  int class_index = -1;    ///< the explained class; -1 for a class-agnostic view
  std::vector<float> map;  ///< (grid_h, grid_w), row-major, as computed (not rescaled)
  int marked = -1;         ///< the patch a figure marks (marked_patch of the placed view), -1 for none
};

/// What one view's map is computed from: one image's pass through `model`. `fwd` holds at least the class
/// rows of the blocks the views need (ForwardResult::cls_attn); a Rollout view needs its full matrices
/// (ForwardOptions::keep_full). `tape` is needed by the class-specific views (vit_forward_tape) and serves the
/// attention views too when `fwd` is null.
struct ViewPass {
  const ViTWeights* model = nullptr;
  const ForwardResult* fwd = nullptr;
  const ForwardTape* tape = nullptr;
  const Box* box = nullptr;  ///< the model input's box in the photo (ModelInput::box), for pixel queries
};

/// The map (grid_h, grid_w) of one resolved view from one pass; `class_index` is the explained class of a
/// class-specific view (ignored by the others). Attention: class_attention_map; Rollout: class_row_map of
/// attention_rollout through blocks 0..layer (v.discard); Probe: ForwardResult::pool_attn (H, T) fused over
/// heads, its patch columns (ForwardOptions::to_end); Chefer / GradCam / AttnGrad: explain_map.
/// Values as computed. Throws attnmap::Error when the pass lacks what the view needs, or from the maps.
std::vector<float> view_map(const ViewPass& pass, const ResolvedView& v, int class_index);

/// All maps of one image. `image` is the normalised (3, H, W) input (preprocess). Runs vit_forward once
/// (to the last block a view needs; to the end when the model has a head, for `logits`) or, when a
/// class-specific view is asked, vit_forward_tape once and the backward once per explained class and method.
/// Rollouts are accumulated block by block (RolloutAccumulator: (T, T) kept, not every block's (H, T, T);
/// the same numbers as view_map's attention_rollout), one accumulator per fusion, read at each view's block.
/// `classes` is the run's --class (checked by the caller with check_class_spec). Photo views get no map.
/// Returns the maps in view order (a class-specific view: one per class, most probable first) and sets
/// *logits (empty without a head). Throws attnmap::Error from the forward / backward passes.
/// `input_box` (ModelInput::box) places the views' photo-pixel queries (place_query); nullptr when there are none.
std::vector<ViewMap> compute_views(const ViTWeights& model, const float* image,
                                   const std::vector<ResolvedView>& views, const ClassSpec& classes,
                                   std::vector<float>* logits, const Box* input_box = nullptr);

}  // namespace attnmap
