// vit_loader_cait.cpp - a CaiT file (timm cait.py / facebookresearch deit cait_models.py, the same names):
// patch_embed, pos_embed (1, N, D) over the patches only, cls_token, self-attention blocks `blocks.i`
// (LayerScaleBlock: TalkingHeadAttn qkv / proj_l / proj_w / proj, gamma_1 / gamma_2), class-attention blocks
// `blocks_token_only.j` (LayerScaleBlockClassAttn: ClassAttn q / k / v / proj, gamma_1 / gamma_2), norm, head.
// Into ViTWeights: blocks[0 .. S-1] the self-attention blocks, blocks[S .. S+C-1] the class-attention blocks
// (hp.depth = S + C, hp.class_attn_blocks = C), so that --layer indexes every block.
#include <string>

#include "checkpoint/vit_loader_internal.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {

using namespace detail;

namespace {

// Blocks with index i present under `prefix` ("blocks." / "blocks_token_only."): 1 + the highest index.
int count_cait_blocks(Loader& ld, const std::string& prefix) {
  int n = 0;
  for (int i = 0; i < 4096; ++i) {
    const std::string b = prefix + std::to_string(i) + ".";
    if (ld.has(b + "norm1.weight") || ld.has(b + "attn.proj.weight") || ld.has(b + "gamma_1")) n = i + 1;
  }
  return n;
}

// timm's CaiT sizes (cait.py model defs): cait_xxs* 4 heads, cait_xs* 6, cait_s* 8, cait_m* 16; 0 otherwise.
int cait_heads_from_architecture(const std::string& arch) {
  const std::string a = arch.substr(arch.rfind('/') == std::string::npos ? 0 : arch.rfind('/') + 1);
  if (a.rfind("cait_xxs", 0) == 0) return 4;
  if (a.rfind("cait_xs", 0) == 0) return 6;
  if (a.rfind("cait_s", 0) == 0) return 8;
  if (a.rfind("cait_m", 0) == 0) return 16;
  return 0;
}

// The head count: the side of blocks.0.attn.proj_l (H, H) (talking heads mix the H heads, so the file holds
// it); a --heads, config num_heads or timm architecture name that says otherwise is refused. Without
// self-attention blocks: --heads, the config, or the architecture name; else refused (never guessed).
void cait_heads(Loader& ld, const FileConfig& fc, const ModelOverrides& ov, int64_t D, int sa, ViTWeights& w) {
  HParams& hp = w.hp;
  const std::string& path = ld.path();
  const int arch = fc.architecture ? cait_heads_from_architecture(*fc.architecture) : 0;
  if (sa > 0) {
    const Tensor& pl = ld.need("blocks.0.attn.proj_l.weight", "(H, H)");
    if (pl.rank() != 2 || dim(pl, 0) != dim(pl, 1) || dim(pl, 0) <= 0)
      throw ld.shape_error("blocks.0.attn.proj_l.weight", "(H, H)", pl.shape);
    hp.num_heads = static_cast<int>(dim(pl, 0));
    hp.source["num_heads"] = "inferred from " + ld.file_name("blocks.0.attn.proj_l.weight") + " " +
                             shape_str(pl.shape) + " (talking heads mix H heads)";
    const auto refuse = [&](const std::string& who, int said) {
      throw Error(path + ": " + who + " says " + std::to_string(said) + " heads, but " +
                  ld.file_name("blocks.0.attn.proj_l.weight") + " " + shape_str(pl.shape) +
                  " (the talking-heads mixing) has " + std::to_string(hp.num_heads));
    };
    if (ov.num_heads && *ov.num_heads != hp.num_heads) refuse(setting_ref("heads"), *ov.num_heads);
    if (fc.num_heads && *fc.num_heads != hp.num_heads) refuse(src_of(fc, "num_heads") + " num_heads", *fc.num_heads);
    if (arch > 0 && arch != hp.num_heads)
      refuse("architecture " + *fc.architecture + " (" + src_of(fc, "architecture") + ")", arch);
  } else if (ov.num_heads || fc.num_heads) {
    resolve_heads(fc, ov, path, D, w);
  } else if (arch > 0) {
    hp.num_heads = arch;
    hp.source["num_heads"] = "inferred from architecture " + *fc.architecture + " (" + src_of(fc, "architecture") + ")";
  } else {
    throw Error(path + ": the number of heads is not in the file (a CaiT file without self-attention blocks has no "
                "proj_l); give " + setting_ref("heads") + " H (or config num_heads)");
  }
  if (D % hp.num_heads != 0)
    throw Error(path + ": " + std::to_string(hp.num_heads) + " heads do not divide the token width D = " + std::to_string(D));
  hp.head_dim = static_cast<int>(D / hp.num_heads);
}

// The MLP fc1 (M, D) / fc2 (D, M) of block prefix `b`; returns M.
int64_t take_cait_mlp(Loader& ld, const std::string& b, int64_t D, BlockWeights& blk) {
  const Tensor& fc1 = ld.need(b + "mlp.fc1.weight", "(M, D)");
  if (fc1.rank() != 2 || dim(fc1, 1) != D) throw ld.shape_error(b + "mlp.fc1.weight", "(M, " + std::to_string(D) + ")", fc1.shape);
  const int64_t M = dim(fc1, 0);
  blk.fc1 = take_linear(ld, b + "mlp.fc1", M, D, true);
  blk.fc2 = take_linear(ld, b + "mlp.fc2", D, M, true);
  return M;
}

// norm1, norm2, proj (D, D), the MLP, gamma_1 / gamma_2 (D): what both kinds of block have.
void take_cait_common(Loader& ld, const std::string& b, int64_t D, BlockWeights& blk) {
  blk.norm1 = take_norm(ld, b + "norm1", D);
  blk.proj = take_linear(ld, b + "attn.proj", D, D, true);
  blk.norm2 = take_norm(ld, b + "norm2", D);
  (void)take_cait_mlp(ld, b, D, blk);
  blk.ls1 = ld.take(b + "gamma_1", {D});
  blk.ls2 = ld.take(b + "gamma_2", {D});
}

// Self-attention block i (LayerScaleBlock + TalkingHeadAttn): qkv (3D, D), proj_l / proj_w (H, H) with bias.
BlockWeights take_sa_block(Loader& ld, int i, int64_t D, int64_t H) {
  const std::string b = "blocks." + std::to_string(i) + ".";
  BlockWeights blk;
  blk.qkv = take_linear(ld, b + "attn.qkv", 3 * D, D);
  blk.proj_l = take_linear(ld, b + "attn.proj_l", H, H, true);
  blk.proj_w = take_linear(ld, b + "attn.proj_w", H, H, true);
  take_cait_common(ld, b, D, blk);
  return blk;
}

// Class-attention block j (LayerScaleBlockClassAttn + ClassAttn): q, k, v (D, D) each, fused here into
// qkv (3D, D) = [q; k; v] (the self-attention blocks' order); their biases all or none (qkv_bias).
BlockWeights take_ca_block(Loader& ld, int j, int64_t D) {
  const std::string b = "blocks_token_only." + std::to_string(j) + ".";
  BlockWeights blk;
  blk.qkv.out = static_cast<int>(3 * D);
  blk.qkv.in = static_cast<int>(D);
  int with_bias = 0;
  std::vector<float> bias;
  for (const char* p : {"q", "k", "v"}) {
    const Floats wt = ld.take(b + "attn." + p + ".weight", {D, D});
    blk.qkv.weight.insert_back(wt.begin(), wt.end());
    Floats bb = ld.take_opt(b + "attn." + p + ".bias", {D});
    with_bias += !bb.empty();
    if (bb.empty()) bb.assign(static_cast<size_t>(D), 0.0f);
    bias.insert(bias.end(), bb.begin(), bb.end());
  }
  if (with_bias > 0 && with_bias < 3)
    for (const char* p : {"q", "k", "v"})
      if (!ld.has(b + "attn." + p + ".bias"))
        ld.missing(b + "attn." + p + ".bias", shape_str({D}), "query, key and value biases come together (qkv_bias)");
  if (with_bias) blk.qkv.bias = std::move(bias);
  take_cait_common(ld, b, D, blk);
  return blk;
}

}  // namespace

ViTWeights build_cait(const RawWeights& raw, const KeyIndex& idx, const Scheme& sc, const FileConfig& fc,
                      const ModelOverrides& ov) {
  Loader ld(raw, idx, sc);
  ViTWeights w;
  HParams& hp = w.hp;
  hp.layout = Layout::Cait;
  const int64_t D = take_patch_conv(ld, fc, w);
  int64_t k = 0;
  w.cls_token = take_tokens(ld, "cls_token", D, k);
  if (k != 1) throw ld.shape_error("cls_token", shape_str({1, 1, D}), ld.need("cls_token", "").shape);
  hp.class_token = true;
  hp.num_prefix = 1;
  take_pos_embed(ld, fc, false, D, w);  // pos_prefix 0: (1, N, D)
  const int sa = count_cait_blocks(ld, "blocks."), ca = count_cait_blocks(ld, "blocks_token_only.");
  if (ca == 0)
    throw Error(raw.path + ": missing tensor '" + ld.file_name("blocks_token_only.0.norm1.weight") +
                "' (a CaiT file without class-attention blocks: the class token would never be computed)");
  hp.depth = sa + ca;
  hp.class_attn_blocks = ca;
  hp.talking_heads = sa > 0;
  hp.layer_scale = true;
  hp.source["depth"] = "inferred from the block counts (" + std::to_string(sa) + " self-attention blocks 'blocks.*' + " +
                       std::to_string(ca) + " class-attention blocks 'blocks_token_only.*')";
  cait_heads(ld, fc, ov, D, sa, w);
  resolve_activation(ld, fc, ov, w);
  for (int i = 0; i < sa; ++i) w.blocks.push_back(take_sa_block(ld, i, D, hp.num_heads));
  for (int j = 0; j < ca; ++j) w.blocks.push_back(take_ca_block(ld, j, D));
  hp.mlp_dim = w.blocks.front().fc1.out;
  // qkv_bias is model-wide (Cait(qkv_bias=True) by default): in some blocks and not in others means one was lost.
  bool any_bias = false, all_bias = true;
  for (const BlockWeights& b : w.blocks) any_bias |= !b.qkv.bias.empty(), all_bias &= !b.qkv.bias.empty();
  if (any_bias && !all_bias) {
    for (int l = 0; l < hp.depth; ++l)
      if (w.blocks[static_cast<size_t>(l)].qkv.bias.empty())
        ld.missing(l < sa ? "blocks." + std::to_string(l) + ".attn.qkv.bias" : "blocks_token_only." + std::to_string(l - sa) + ".attn.q.bias",
                   shape_str({l < sa ? 3 * D : D}), "the other blocks have it (qkv_bias)");
  }
  if (!any_bias) w.notices.push_back("no query/key/value biases (computed as zero, as Cait(qkv_bias=False))");
  if (w.patch_embed.bias.empty()) w.notices.push_back("no patch embedding bias (computed as zero)");
  // The final LayerNorm (on [class; patches]) and the classifier on the class token (global_pool 'token'), or
  // the mean of the patch tokens when the config or --pool says 'avg'.
  w.norm = take_norm(ld, "norm", D);
  if (fc.pool) hp.pool = *fc.pool, hp.source["pool"] = src_of(fc, "pool");
  else hp.pool = Pool::ClassToken, hp.source["pool"] = "default (CaiT global_pool='token': the class token)";
  if (ov.pool) hp.pool = *ov.pool, hp.source["pool"] = "command line";
  if (hp.pool != Pool::ClassToken && hp.pool != Pool::MeanPatches)
    throw Error(raw.path + ": a CaiT classifier reads the class token ('token') or the mean of the patch tokens ('avg'), "
                "not the " + pool_name(hp.pool));
  if (ld.has("head.weight")) {
    const Tensor& h = ld.need("head.weight", "(C, D)");
    if (h.rank() != 2 || dim(h, 1) != D) throw ld.shape_error("head.weight", "(C, " + std::to_string(D) + ")", h.shape);
    w.head = take_linear(ld, "head", dim(h, 0), D, true);
  }
  w.tensors = ld.account();
  return w;
}

}  // namespace attnmap
