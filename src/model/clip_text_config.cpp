// clip_text_config.cpp - the text tower's settings from each family's config (clip_text.hpp
// clip_text_config): OpenAI as build_model derives them, open_clip's model_cfg.text_cfg (CLIPTextCfg and
// _build_text_tower, open_clip model.py), Hugging Face's text_config (CLIPTextConfig, transformers v4.48.3
// configuration_clip.py; modeling_clip.py CLIPTextTransformer's pooling), and SigLIP's: open_clip's SigLIP
// text_cfg (model_configs/ViT-*-SigLIP*.json, tokenizer.py HFTokenizer; read at open_clip 89fb801) and Hugging
// Face's SiglipTextConfig (transformers models/siglip/configuration_siglip.py; modeling_siglip.py
// SiglipTextTransformer.forward; read at v4.48.3 298b3f1 and ad87182, whose defaults agree; ad87182 adds
// projection_size, defaulting to hidden_size, the head's width in v4.48.3).
#include <cctype>
#include <cmath>

#include "core/error.hpp"
#include "model/clip_text.hpp"

namespace attnmap {
namespace {

using nlohmann::json;

// A config value with the family's default when the key is absent (or null), recording its source.
class Settings {
 public:
  Settings(const json& obj, std::string path, std::string defaults, ClipTextConfig& cfg)
      : obj_(obj), path_(std::move(path)), defaults_(std::move(defaults)), cfg_(cfg) {}

  bool has(const std::string& key) const { return obj_.is_object() && obj_.contains(key) && !obj_[key].is_null(); }
  template <class T>
  T get(const std::string& key, const T& fallback, const std::string& setting = "") {
    const bool given = has(key);
    if (!setting.empty()) cfg_.source[setting] = given ? path_ + "." + key : defaults_ + " " + key;
    if (!given) return fallback;
    try {
      return obj_[key].get<T>();
    } catch (const json::exception&) {
      throw Error(where_ + ": " + path_ + "." + key + " is " + obj_[key].dump() + ", not a value of the expected type");
    }
  }
  const json& raw(const std::string& key) const { return obj_[key]; }
  const std::string& path() const { return path_; }
  std::string where_;

 private:
  const json& obj_;
  std::string path_, defaults_;
  ClipTextConfig& cfg_;
};

ClipTextConfig openai_config() {
  ClipTextConfig cfg;
  cfg.layout = ClipTextLayout::openai;
  cfg.rules = ClipTextRules::openai;
  cfg.source = {{"heads", "width // 64 (OpenAI clip/model.py build_model)"},
                {"eps", "1e-5 (clip/model.py LayerNorm = nn.LayerNorm's default)"},
                {"act", "QuickGELU (clip/model.py ResidualAttentionBlock)"},
                {"pool", "argmax of the ids (clip/model.py CLIP.encode_text)"}};
  return cfg;
}

// open_clip text_cfg.hf_tokenizer_name (factory.py get_tokenizer: HFTokenizer(hf_tokenizer_name,
// **tokenizer_kwargs)): SigLIP's tokenizer as open_clip's SigLIP configs name it (model_configs/ViT-*-SigLIP*.json:
// "timm/ViT-B-16-SigLIP", multilingual "timm/ViT-B-16-SigLIP-i18n-256") with tokenizer_kwargs exactly
// {"clean": "canonicalize"}; SigLIP 2's Gemma tokenizer and any other Hugging Face tokenizer refused by name.
template <class Refuse>
void open_clip_siglip_tokenizer(Settings& t, const json& tc, ClipTextConfig& cfg, const Refuse& refuse) {
  const std::string name = t.get<std::string>("hf_tokenizer_name", "", "tokenizer");
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("siglip2") != std::string::npos || lower.find("gemma") != std::string::npos)
    refuse("hf_tokenizer_name", "SigLIP 2's Gemma tokenizer (256k SentencePiece vocabulary), which attnmap does not read "
                                "(SigLIP 2 is not supported)");
  if (name != "timm/ViT-B-16-SigLIP" && name != "timm/ViT-B-16-SigLIP-i18n-256")
    refuse("hf_tokenizer_name", "a Hugging Face tokenizer other than CLIP's or SigLIP's (timm/ViT-B-16-SigLIP, "
                                "timm/ViT-B-16-SigLIP-i18n-256)");
  const json want = {{"clean", "canonicalize"}};
  if (!tc.contains("tokenizer_kwargs") || tc["tokenizer_kwargs"] != want)
    refuse(tc.contains("tokenizer_kwargs") ? "tokenizer_kwargs" : "hf_tokenizer_name",
           "SigLIP's tokenizer with tokenizer_kwargs other than {\"clean\": \"canonicalize\"} (the SigLIP configs')");
  cfg.siglip_tokenizer = true;
  cfg.siglip_rules = SiglipTextRules::open_clip;
  cfg.tokenizer_name = name;
}

// open_clip: TextTransformer's settings as _build_text_tower makes them from model_cfg.
ClipTextConfig open_clip_config(const json& config, const TensorMap& tensors, const std::string& where) {
  ClipTextConfig cfg;
  cfg.layout = ClipTextLayout::open_clip;
  cfg.rules = ClipTextRules::open_clip;
  const json& model = config.is_object() && config.contains("model_cfg") ? config["model_cfg"] : config;
  if (!model.is_object())
    throw Error(where + ": an OpenCLIP text tower needs open_clip_config.json's model_cfg (heads, pooling, "
                        "activation), and none was read");
  static const json empty = json::object();
  const json& tc = model.contains("text_cfg") && model["text_cfg"].is_object() ? model["text_cfg"] : empty;
  Settings m(model, "open_clip_config.json model_cfg", "open_clip CLIP default", cfg);
  Settings t(tc, "open_clip_config.json model_cfg.text_cfg", "open_clip CLIPTextCfg default", cfg);
  m.where_ = t.where_ = where;
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw Error(where + ": " + t.path() + "." + key + " = " + tc[key].dump() + ": " + why +
                "; this text tower cannot follow it");
  };
  if (t.get<std::string>("text_arch", "clip") != "clip") refuse("text_arch", "open_clip's ModernTextTransformer");
  if (t.has("hf_model_name")) refuse("hf_model_name", "a Hugging Face text encoder (HFTextEncoder)");
  if (t.get<std::string>("tokenizer_type", "") != "") refuse("tokenizer_type", "a tokenizer other than CLIP's");
  if (t.has("hf_tokenizer_name")) open_clip_siglip_tokenizer(t, tc, cfg, refuse);
  if (t.get<bool>("embed_cls", false)) refuse("embed_cls", "CoCa's appended class token and its pad mask");
  if (t.get<bool>("variable_text", false)) refuse("variable_text", "variable-length text (CustomTextCLIP)");
  if (t.get<bool>("use_pad_mask", false)) refuse("use_pad_mask", "TextTransformer's padding mask");
  if (t.has("block_type") && t.get<std::string>("block_type", "") != "default")
    refuse("block_type", "open_clip's CustomResidualAttentionBlock");
  for (const char* k : {"qk_norm", "scaled_cosine_attn", "scale_heads", "scale_attn_inner", "scale_attn", "scale_fc"})
    if (t.get<bool>(k, false)) refuse(k, "open_clip's CustomResidualAttentionBlock");
  // proj_type none (ViT-SO400M-16-SigLIP-i18n-256): TextTransformer sets text_projection = None, the pooled row
  // is the feature
  const std::string proj_type = t.get<std::string>("proj_type", "linear", "proj_type");
  if (proj_type != "linear" && proj_type != "none") refuse("proj_type", "a text projection other than linear or none");
  cfg.projection = proj_type == "linear";
  cfg.width = t.get<int>("width", 512, "width");
  cfg.heads = t.get<int>("heads", 8, "heads");
  cfg.layers = t.get<int>("layers", 12, "layers");
  cfg.context_length = t.get<int>("context_length", 77, "context_length");
  cfg.vocab_size = t.get<int>("vocab_size", 49408, "vocab_size");
  const double ratio = t.get<double>("mlp_ratio", 4.0, "mlp_hidden");
  cfg.mlp_hidden = static_cast<int>(cfg.width * ratio);  // mlp_width = int(d_model * mlp_ratio)
  if (m.has("embed_dim")) cfg.embed_dim = m.get<int>("embed_dim", 0, "embed_dim");
  cfg.layer_scale = t.has("ls_init_value");  // LayerScale(d_model, ls_init_value) as ls_1 / ls_2
  if (cfg.layer_scale) t.get<double>("ls_init_value", 0.0, "layer_scale");
  cfg.causal = !t.get<bool>("no_causal_mask", false, "causal");
  cfg.pad_id = t.get<int>("pad_id", 0, "pad_id");
  if (cfg.siglip_tokenizer) {  // the ids are padded by the tokenizer, not with text_cfg.pad_id (a mask setting)
    cfg.pad_id = 1;
    cfg.source["pad_id"] = "the SigLIP tokenizer's pad token </s> (id 1; open_clip tokenizer.py HFTokenizer pads "
                           "with tokenizer.pad_token_id, big_vision's pad_value=1)";
  }
  const std::string pool = t.get<std::string>("pool_type", "argmax", "pool");
  if (pool == "argmax") cfg.pool = ClipTextPool::argmax;
  else if (pool == "first") cfg.pool = ClipTextPool::first;
  else if (pool == "last") cfg.pool = ClipTextPool::last;
  else if (pool == "eos") cfg.pool = ClipTextPool::eos;
  else refuse("pool_type", "no pooled text feature (none) or an unknown pooling");
  if (cfg.pool == ClipTextPool::eos) {
    if (!t.has("eos_id")) refuse("pool_type", "pool_type eos without eos_id (open_clip refuses it too)");
    cfg.eos_id = t.get<int>("eos_id", -1, "eos_id");
  }
  // act_layer = QuickGELU if quick_gelu else nn.GELU; partial(act_layer, **act_kwargs)
  const bool quick = m.get<bool>("quick_gelu", false, "act");
  cfg.act = quick ? Activation::QuickGelu : Activation::Gelu;
  if (t.has("act_kwargs") && !t.raw("act_kwargs").empty()) {
    const json& a = t.raw("act_kwargs");
    const bool tanh = !quick && a.is_object() && a.size() == 1 && a.contains("approximate") && a["approximate"] == "tanh";
    const bool none = !quick && a.is_object() && a.size() == 1 && a.contains("approximate") && a["approximate"] == "none";
    if (!tanh && !none) refuse("act_kwargs", "an activation other than QuickGELU, nn.GELU or its tanh form");
    if (tanh) cfg.act = Activation::GeluTanh;
    cfg.source["act"] = t.path() + ".act_kwargs";
  }
  cfg.source["eps"] = "open_clip LayerNorm default 1e-5";
  if (t.has("norm_kwargs") && !t.raw("norm_kwargs").empty()) {
    const json& n = t.raw("norm_kwargs");
    if (!n.is_object() || n.size() != 1 || !n.contains("eps") || !n["eps"].is_number())
      refuse("norm_kwargs", "LayerNorm settings other than eps");
    cfg.eps = n["eps"].get<float>();
    cfg.source["eps"] = t.path() + ".norm_kwargs.eps";
  }
  // CustomTextCLIP keeps its TextTransformer under text.; CLIP copies its parts to the top level
  cfg.prefix = tensors.count("text.token_embedding.weight") > 0 ? "text." : "";
  return cfg;
}

// The sizes, eps and activation of a transformers text config (CLIPTextConfig, SiglipTextConfig: the same keys),
// each with the family's default `d` for a key the config.json leaves out.
struct HfTextDefaults {
  int width, heads, layers, context, vocab, hidden;
  double eps;
  const char* act;
};

void read_hf_text_sizes(Settings& t, const HfTextDefaults& d, ClipTextConfig& cfg, const std::string& where) {
  cfg.width = t.get<int>("hidden_size", d.width, "width");
  cfg.heads = t.get<int>("num_attention_heads", d.heads, "heads");
  cfg.layers = t.get<int>("num_hidden_layers", d.layers, "layers");
  cfg.context_length = t.get<int>("max_position_embeddings", d.context, "context_length");
  cfg.vocab_size = t.get<int>("vocab_size", d.vocab, "vocab_size");
  cfg.mlp_hidden = t.get<int>("intermediate_size", d.hidden, "mlp_hidden");
  cfg.eps = static_cast<float>(t.get<double>("layer_norm_eps", d.eps, "eps"));
  const std::string act = t.get<std::string>("hidden_act", d.act, "act");
  if (act == "quick_gelu") cfg.act = Activation::QuickGelu;
  else if (act == "gelu") cfg.act = Activation::Gelu;
  else if (act == "gelu_new" || act == "gelu_pytorch_tanh") cfg.act = Activation::GeluTanh;
  else
    throw Error(where + ": " + cfg.source["act"] + " = \"" + act +
                "\": an activation this text tower does not compute (quick_gelu, gelu, gelu_new, gelu_pytorch_tanh)");
}

// Hugging Face: CLIPTextConfig's values (defaults of v4.48.3 for keys a config.json leaves out).
ClipTextConfig hf_config(const json& config, const std::string& where) {
  ClipTextConfig cfg;
  cfg.layout = ClipTextLayout::hugging_face;
  cfg.rules = ClipTextRules::hugging_face;
  cfg.prefix = "text_model.";
  const bool whole = config.is_object() && config.contains("text_config");
  const json& tc = whole ? config["text_config"] : config;
  if (!tc.is_object())
    throw Error(where + ": a Hugging Face CLIP text tower needs config.json's text_config (num_attention_heads, "
                        "hidden_act, layer_norm_eps, eos_token_id), and none was read");
  Settings t(tc, whole ? "config.json text_config" : "config.json", "transformers CLIPTextConfig default", cfg);
  Settings m(config, "config.json", "transformers CLIPConfig default", cfg);
  t.where_ = m.where_ = where;
  read_hf_text_sizes(t, {512, 8, 12, 77, 49408, 2048, 1e-5, "quick_gelu"}, cfg, where);
  // CLIPModel: nn.Linear(text_embed_dim, config.projection_dim); CLIPTextModelWithProjection: the text config's
  cfg.embed_dim = whole ? m.get<int>("projection_dim", 512, "embed_dim") : t.get<int>("projection_dim", 512, "embed_dim");
  // CLIPTextTransformer.forward: eos_token_id == 2 (configs before PR #24773) -> argmax of the ids, else the
  // first position holding eos_token_id
  const int eos = t.get<int>("eos_token_id", 49407, "eos_id");
  cfg.pool = eos == 2 ? ClipTextPool::argmax : ClipTextPool::eos;
  cfg.eos_id = eos == 2 ? -1 : eos;
  cfg.source["pool"] = cfg.source["eos_id"] + (eos == 2 ? " == 2: argmax of the ids" : ": its first position");
  return cfg;
}

// Hugging Face SiglipModel: SiglipTextConfig's values (configuration_siglip.py defaults for keys a config.json
// leaves out); SiglipTextTransformer.forward: no causal mask ("SigLIP's text model does not use a causal mask"),
// pooled = last_hidden_state[:, -1, :], then head = nn.Linear(hidden_size, projection_size) with bias.
ClipTextConfig hf_siglip_config(const json& config, const std::string& where) {
  ClipTextConfig cfg;
  cfg.layout = ClipTextLayout::hugging_face_siglip;
  cfg.siglip_tokenizer = true;
  cfg.siglip_rules = SiglipTextRules::hugging_face;
  cfg.prefix = "text_model.";
  const bool whole = config.is_object() && config.contains("text_config");
  const json& tc = whole ? config["text_config"] : config;
  if (!tc.is_object())
    throw Error(where + ": a Hugging Face SigLIP text tower needs config.json's text_config (num_attention_heads, "
                        "hidden_act, layer_norm_eps), and none was read");
  for (const json* c : {&config, &tc})
    if (c->is_object() && c->contains("model_type") && (*c)["model_type"].is_string() &&
        (*c)["model_type"].get<std::string>().rfind("siglip2", 0) == 0)
      throw Error(where + ": config.json model_type \"" + (*c)["model_type"].get<std::string>() +
                  "\": SigLIP 2 (Gemma tokenizer, 256k vocabulary), which attnmap does not read; SigLIP (model_type "
                  "siglip) is read");
  Settings t(tc, whole ? "config.json text_config" : "config.json", "transformers SiglipTextConfig default", cfg);
  t.where_ = where;
  read_hf_text_sizes(t, {768, 12, 12, 64, 32000, 3072, 1e-6, "gelu_pytorch_tanh"}, cfg, where);
  // projection_size = hidden_size when not given (and in transformers versions before it existed: head is
  // nn.Linear(embed_dim, embed_dim))
  cfg.embed_dim = t.get<int>("projection_size", cfg.width, "embed_dim");
  cfg.causal = false;
  cfg.source["causal"] = "none (modeling_siglip.py SiglipTextTransformer: no causal mask)";
  cfg.pool = ClipTextPool::last;
  cfg.source["pool"] = "the last position (modeling_siglip.py SiglipTextTransformer: last_hidden_state[:, -1, :])";
  // SiglipTokenizer pads with </s> to max_length; a shorter sequence is padded with the same id here
  cfg.pad_id = t.get<int>("pad_token_id", 1, "pad_id");
  return cfg;
}

}  // namespace

ClipTextConfig clip_text_config(const std::string& layout, const nlohmann::json& config, const TensorMap& tensors,
                                const std::string& where) {
  if (layout == "openai") return openai_config();
  if (layout == "open_clip") return open_clip_config(config, tensors, where);
  if (layout == "hugging_face") return hf_config(config, where);
  if (layout == "hugging_face_siglip") return hf_siglip_config(config, where);
  throw Error(where + ": unknown text tower layout '" + layout + "' (expected openai, open_clip, hugging_face or hugging_face_siglip)");
}

}  // namespace attnmap
