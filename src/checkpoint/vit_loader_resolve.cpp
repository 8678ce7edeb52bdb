// vit_loader_resolve.cpp - build_vit's head count, pooling and activation (see vit_loader.hpp)
#include <string>

#include "checkpoint/vit_loader_internal.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"

namespace attnmap {
namespace detail {

namespace {

// Token widths whose timm / DINO / DeiT sizes have other than D/64 heads: refused without a head count.
const char* ambiguous_heads(int D) {
  switch (D) {
    case 1280: return "timm's vit_huge_* has 16 heads (D/64 would be 20)";
    case 1408: return "timm's vit_giant_* has 16 heads (D/64 would be 22)";
    case 1664: return "timm's vit_gigantic_* has 16 heads (D/64 would be 26)";
    case 1152: return "timm's vit_so400m_* (SigLIP) has 16 heads (D/64 would be 18)";
    case 1536: return "DINOv2's vit_giant2 has 24 heads (D/64), timm's vit_giantopt 16";
    case 1792: return "OpenCLIP's ViT-e-14 has 16 heads (head_width 112; D/64 would be 28)";
    default: return nullptr;
  }
}

// The head count when nothing says it: the layout's rule (layouts.hpp HeadRule). Throws attnmap::Error
// with the choices where the rule does not fix it.
int heads_by_rule(const ViTWeights& w, int64_t inner, const std::string& path, std::string& why) {
  const HParams& hp = w.hp;
  const HeadRule rule = layout_info(hp.layout).heads;
  const std::string fix = "; give " + setting_ref("heads") + " H (or config num_heads)";
  if (rule == HeadRule::D64 && ambiguous_heads(hp.dim))
    throw Error(path + ": the number of heads is not in the file, and for width " + std::to_string(hp.dim) +
                " OpenCLIP's ViT-H / g / bigG / e have 16 heads (head_width 80 / 88 / 104 / 112), OpenAI CLIP's rule "
                "width // 64 gives " + std::to_string(hp.dim / 64) + fix + " or open_clip_config.json");
  if (rule == HeadRule::Inner64)  // vit-pytorch's constructors take heads with no default
    throw Error(path + ": the number of heads is not in the file (vit-pytorch's ViT(heads=..., dim_head=...) keeps "
                "neither; attention width " + std::to_string(inner) +
                (inner % 64 == 0 ? " = " + std::to_string(inner / 64) + " x its default dim_head 64" : std::string()) + ")" + fix);
  if (rule == HeadRule::D64) {
    if (inner % 64 != 0)
      throw Error(path + ": the number of heads is not in the file and the attention width " + std::to_string(inner) +
                  " is not a multiple of 64 (CLIP's width // 64)" + fix);
    why = "default (width // 64: CLIP's own rule)";
    return static_cast<int>(inner / 64);
  }
  if (const char* amb = ambiguous_heads(hp.dim))
    throw Error(path + ": the number of heads is not in the file, and for D = " + std::to_string(hp.dim) + " " + amb + fix);
  if (hp.dim % 64 != 0)
    throw Error(path + ": the number of heads is not in the file, and D = " + std::to_string(hp.dim) +
                " is not a multiple of 64 (every timm / DINO / DeiT size with D/64 heads is)" + fix);
  why = "default (D/64: every timm / DINO / DeiT size with D = " + std::to_string(hp.dim) + " has it)";
  return hp.dim / 64;
}

}  // namespace

// hp.num_heads (and head_dim) from --heads, else the config, else the architecture name, else the layout's
// rule. Throws attnmap::Error when it is not positive or does not divide the attention width.
void resolve_heads(const FileConfig& fc, const ModelOverrides& ov, const std::string& path, int64_t inner, ViTWeights& w) {
  HParams& hp = w.hp;
  if (ov.num_heads) {
    hp.num_heads = *ov.num_heads;
    hp.source["num_heads"] = "command line";
    const int said = fc.num_heads ? *fc.num_heads : fc.architecture ? heads_from_architecture(*fc.architecture, hp.dim) : 0;
    if (said > 0 && said != hp.num_heads)
      w.notices.push_back(setting_ref("heads") + " " + std::to_string(hp.num_heads) + " overrides num_heads " + std::to_string(said) +
                          " from " + src_of(fc, fc.num_heads ? "num_heads" : "architecture"));
  } else if (fc.num_heads) {
    hp.num_heads = *fc.num_heads;
    hp.source["num_heads"] = src_of(fc, "num_heads");
  } else if (fc.architecture && heads_from_architecture(*fc.architecture, hp.dim) > 0) {
    hp.num_heads = heads_from_architecture(*fc.architecture, hp.dim);
    hp.source["num_heads"] = "inferred from architecture " + *fc.architecture + " (" + src_of(fc, "architecture") + ")";
  } else {
    std::string why;
    if (fc.architecture && heads_from_architecture(*fc.architecture) > 0)  // a name whose size is not this D
      w.notices.push_back("architecture " + *fc.architecture + " (" + src_of(fc, "architecture") +
                          ") names a model of another width than D = " + std::to_string(hp.dim) +
                          ": its head count is not used");
    hp.num_heads = heads_by_rule(w, inner, path, why);
    hp.source["num_heads"] = why;
  }
  if (hp.num_heads <= 0)
    throw Error(path + ": " + hp.source["num_heads"] + " num_heads " + std::to_string(hp.num_heads) + " must be positive");
  if (inner % hp.num_heads != 0) {
    throw Error(path + ": " + (ov.num_heads ? setting_ref("heads") + " " : std::string()) + std::to_string(hp.num_heads) +
                " heads do not divide the attention width " + std::to_string(inner) +
                (inner == hp.dim ? " (the token width D)" : ""));
  }
  hp.head_dim = static_cast<int>(inner / hp.num_heads);
}

// What the classifier reads: the command line, the config, else what the file shows (an attention pool,
// no class token, timm's fc_norm for global_pool='avg'), else the class token. Returns false when the
// layout's file cannot say it and nothing else did (vit-pytorch's pool): the head is then not used.
bool resolve_pool(Loader& ld, const FileConfig& fc, const ModelOverrides& ov, ViTWeights& w) {
  HParams& hp = w.hp;
  const Layout l = ld.scheme().layout;
  bool known = true;
  if (fc.pool) {
    hp.pool = *fc.pool;
    hp.source["pool"] = src_of(fc, "pool");
  } else if (w.attn_pool.present()) {
    hp.pool = Pool::Map;
    hp.source["pool"] = "inferred from " + ld.file_name("attn_pool.latent");
  } else if (l == Layout::SimpleVit) {
    hp.pool = Pool::MeanAll;
    hp.source["pool"] = "SimpleViT (x.mean(dim = 1))";
  } else if (!hp.class_token) {
    hp.pool = Pool::MeanPatches;
    hp.source["pool"] = "no class token: timm global_pool='avg'";
  } else if (l == Layout::VitPytorch && ld.need("cls_token", "(1, D)").rank() != 2) {
    // vit-pytorch since 2025-11 stores its class token as (1, D) only with pool='cls'; before, always as
    // (1, 1, D), where pool='mean' averaged every token, the class token included: the file cannot say.
    known = false;
  } else if (l == Layout::VitPytorch) {
    hp.pool = Pool::ClassToken;
    hp.source["pool"] = "vit-pytorch: a (1, D) class token is stored only with pool='cls'";
  } else if ((l == Layout::Eva || l == Layout::Timm || l == Layout::TimmClip) && fc.eva_args.contains("global_pool") &&
             fc.eva_args.at("global_pool") != "") {  // timm config.json global_pool (eva.py, vision_transformer.py)
    const nlohmann::json& g = fc.eva_args.at("global_pool");
    try {
      hp.pool = parse_pool(g.is_string() ? g.get<std::string>() : g.dump());
    } catch (const Error& e) {
      throw Error(ld.path() + ": global_pool " + g.dump() + " (" + src_of(fc, "global_pool") + "): " + e.what());
    }
    hp.source["pool"] = "global_pool from " + src_of(fc, "global_pool");
  } else if (l == Layout::Eva && fc.architecture) {  // timm's default for the architecture (vit_loader_eva.cpp)
    hp.pool = eva_default_pool(ld, fc, w, !ov.pool, hp.source["pool"]);
  } else if (w.fc_norm.present()) {
    hp.pool = Pool::MeanPatches;
    hp.source["pool"] = "inferred from " + ld.file_name("fc_norm.weight") + " (timm global_pool='avg')";
  } else {
    hp.pool = Pool::ClassToken;
    hp.source["pool"] = "default (the class token)";
  }
  if (ov.pool) {  // the command line wins; a user should see what it replaced
    if (known && *ov.pool != hp.pool)
      w.notices.push_back(setting_ref("pool") + " replaces " + pool_name(hp.pool) + " (" + hp.source["pool"] + ") by " + pool_name(*ov.pool));
    hp.pool = *ov.pool;
    hp.source["pool"] = "command line";
    known = true;
  }
  if (!known) return false;
  if (hp.pool == Pool::Map && !w.attn_pool.present())
    throw Error(ld.path() + ": pool 'map' (" + hp.source["pool"] + ") but the file has no attention pool (attn_pool.*)");
  if (hp.pool == Pool::ClassToken && !hp.class_token)
    throw Error(ld.path() + ": pool 'cls' (" + hp.source["pool"] + ") but the model has no class token");
  return true;
}

void check_final_norm(const Loader& ld, const FileConfig& fc, const ViTWeights& w, int64_t D) {
  const Layout l = w.hp.layout;
  if (w.hp.pool != Pool::MeanPatches || w.norm.present() || w.fc_norm.present()) return;
  if (l != Layout::Timm && l != Layout::TimmClip && l != Layout::Mae && l != Layout::Deit3 && l != Layout::Eva &&
      l != Layout::Beit)
    return;
  const auto said = [&](const char* k, bool& v) {
    const auto it = fc.eva_args.find(k);
    if (it == fc.eva_args.end() || !it->is_boolean()) return false;
    v = it->get<bool>();
    return true;
  };
  std::string expected, why, way_out;
  if (l == Layout::Eva) {  // eva.py:644-651 (fc_norm when global_pool == 'avg', else norm), :738, :751
    const EvaHead h = eva_head(fc, fc.architecture ? *fc.architecture : "", &w.hp.pool);
    if (!h.fc_norm && !h.norm) return;  // the config says use_fc_norm and use_post_transformer_norm false
    expected = "'" + ld.file_name(h.fc_norm ? "fc_norm.weight" : "norm.weight") + "'";
    why = std::string("timm's Eva applies ") + (h.fc_norm ? "fc_norm to the mean patch token (global_pool 'avg')"
                                                           : "norm to the tokens (use_fc_norm=False)") + " before the head";
    way_out = ". A model built with use_fc_norm=False and use_post_transformer_norm=False has neither: say so in "
              "config.json model_args {\"use_fc_norm\": false, \"use_post_transformer_norm\": false}";
  } else {
    // vision_transformer.py:800-902: use_fc_norm = global_pool in ('avg', 'avgmax', 'max') unless fc_norm says;
    // norm without fc_norm, fc_norm without norm, both Identity only with final_norm=False (vit_intern300m_*,
    // :4625). BEiT (beit.py:565-567) and MAE's fine-tuning ViT: fc_norm with mean pooling.
    bool v = true;
    if (said("final_norm", v) && !v) return;
    if (fc.architecture && fc.architecture->rfind("vit_intern300m_", 0) == 0) return;
    const bool fc_said = said("fc_norm", v);
    if (fc_said || l == Layout::Beit || l == Layout::Mae)
      expected = "'" + ld.file_name(!fc_said || v ? "fc_norm.weight" : "norm.weight") + "'";
    else
      expected = "'" + ld.file_name("fc_norm.weight") + "' or '" + ld.file_name("norm.weight") + "'";
    why = "the classifier reads the mean patch token after a final LayerNorm (timm: fc_norm after pooling, or "
          "norm before it with fc_norm=False)";
    if (l == Layout::Timm || l == Layout::TimmClip)
      way_out = ". A timm VisionTransformer built with final_norm=False has neither: say so in config.json model_args "
                "{\"final_norm\": false}";
  }
  throw Error(ld.path() + ": missing tensor " + expected + " (expected shape " + shape_str({D}) + "; " + why +
              "; the file has neither norm nor fc_norm)" + way_out);
}

// The MLP activation: the command line, the config, the architecture name (timm *_quickgelu_*), an OpenAI
// CLIP file's own record, else the layout's default where its code fixes one. Throws attnmap::Error where
// the family's files cannot say it (CLIP: QuickGELU for OpenAI, GELU for most OpenCLIP models; timm CLIP:
// GELU, or QuickGELU for *_quickgelu_*).
void resolve_activation(Loader& ld, const FileConfig& fc, const ModelOverrides& ov, ViTWeights& w) {
  HParams& hp = w.hp;
  const Layout l = hp.layout;
  const LayoutInfo& info = layout_info(l);
  if (ov.act) {
    hp.act = *ov.act;
    hp.source["act"] = "command line";
  } else if (fc.act) {
    hp.act = *fc.act;
    hp.source["act"] = src_of(fc, "act");
  } else if (l == Layout::TimmClip && fc.architecture) {
    const bool quick = fc.architecture->find("quickgelu") != std::string::npos;
    hp.act = quick ? Activation::QuickGelu : Activation::Gelu;
    hp.source["act"] = "inferred from architecture " + *fc.architecture + " (" + src_of(fc, "architecture") + ")";
  } else if (l == Layout::Clip && ld.file_has("input_resolution")) {
    hp.act = Activation::QuickGelu;
    hp.source["act"] = "OpenAI CLIP file (input_resolution present): QuickGELU";
  } else if (l == Layout::HfClip && !fc.hf_config) {
    throw Error(ld.path() + ": the MLP activation is not in the file and no config.json is beside it: OpenAI's "
                "CLIP models converted to Hugging Face use quick_gelu, LAION's gelu; give " + setting_ref("act") + " quickgelu or " + setting_ref("act") + " gelu");
  } else if (l == Layout::Clip || l == Layout::TimmClip) {
    throw Error(ld.path() + ": the MLP activation is not in the file: " +
                (l == Layout::Clip ? std::string("OpenAI CLIP uses QuickGELU, OpenCLIP models GELU unless their config says quick_gelu")
                                   : std::string("timm's vit_*_clip_* use GELU, vit_*_clip_quickgelu_* QuickGELU")) +
                "; give " + setting_ref("act") + " quickgelu or " + setting_ref("act") + " gelu (or a config: " +
                (l == Layout::Clip ? "open_clip_config.json" : "config.json with the timm architecture") + ")");
  } else if (ld.scheme().act) {  // a naming whose own code defaults otherwise (Hugging Face SigLIP)
    hp.act = *ld.scheme().act;
    hp.source["act"] = ld.scheme().act_why;
  } else {
    hp.act = info.act;
    hp.source["act"] = l == Layout::HfClip ? std::string("default (CLIPVisionConfig hidden_act quick_gelu: the config.json omits it)")
                                           : std::string("default (") + info.name + ")";
  }
  // The command line wins, but a user should see what it replaced.
  const Activation own = fc.act ? *fc.act : ld.scheme().act ? *ld.scheme().act : info.act;
  if (ov.act && (fc.act || l != Layout::Clip) && *ov.act != own)
    w.notices.push_back(setting_ref("act") + " " + activation_name(*ov.act) + " replaces " + activation_name(own) +
                       (fc.act ? " from " + src_of(fc, "act")
                        : ld.scheme().act ? " (" + ld.scheme().act_why + ")"
                                          : " (the " + std::string(info.name) + " layout's own)"));
}

}  // namespace detail
}  // namespace attnmap
