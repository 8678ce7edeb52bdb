// zero_shot.cpp - texts as a CLIP model's classes (zero_shot.hpp): read, tokenized, encoded by the file's
// text tower, averaged over the templates, normalised into ViTWeights::zero_shot.
#include "engine/text/zero_shot.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "checkpoint/labels.hpp"
#include "core/error.hpp"
#include "core/names.hpp"
#include "core/setting_ref.hpp"
#include "io/hash.hpp"
#include "model/classify.hpp"
#include "model/clip_text.hpp"
#include "model/vit.hpp"
#include "text/clip_tokenizer.hpp"
#include "text/clip_vocab.hpp"
#include "text/siglip_tokenizer.hpp"
#include "text/unicode_text.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

constexpr const char* kRecordKey = "zero_shot";  // hp.source's key of the record (a JSON text)

std::string trimmed(const std::string& s) { return trim_chars(s, " \t\r\n\v\f"); }

// The folder of the weights (a Hugging Face or open_clip folder holds its tokenizer's files); "" when unknown.
std::string weights_folder(const ViTWeights& model) {
  if (model.files.empty()) return "";
  return fs::path(model.files.front().path).parent_path().string();
}

bool has_tokenizer_files(const std::string& dir) {
  std::error_code ec;
  const fs::path p(dir);
  return !dir.empty() && (fs::is_regular_file(p / "tokenizer.json", ec) ||
                          (fs::is_regular_file(p / "vocab.json", ec) && fs::is_regular_file(p / "merges.txt", ec)));
}

// What a --vocab path holds, by its names: SigLIP's SentencePiece model (a .model file; a folder with
// spiece.model and no CLIP tokenizer files) or a CLIP vocabulary (bpe_simple_vocab_16e6.txt.gz, vocab.json,
// merges.txt, tokenizer.json; a folder with these and no spiece.model).
bool names_siglip_model(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) return fs::is_regular_file(p / "spiece.model", ec) && !has_tokenizer_files(path);
  return p.extension() == ".model";
}

bool names_clip_vocab(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) return has_tokenizer_files(path) && !fs::is_regular_file(p / "spiece.model", ec);
  const std::string f = p.filename().string();
  const auto ends = [&](const std::string& e) { return f.size() >= e.size() && f.compare(f.size() - e.size(), e.size(), e) == 0; };
  return f == "vocab.json" || f == "merges.txt" || f == "tokenizer.json" || ends(".txt.gz") || ends(".txt");
}

// The vocabulary: --vocab, else the tokenizer files of the weights' folder (not for OpenAI's own layout, whose
// files carry none), else the bundled OpenAI vocabulary. A SigLIP SentencePiece model given to a CLIP tower is
// refused naming both.
ClipVocab find_vocab(const std::string& layout, const std::string& folder, const TextSpec& spec,
                     const std::string& where) {
  if (!spec.vocab.empty() && names_siglip_model(spec.vocab))
    throw Error(setting_ref("vocab") + " " + printable(spec.vocab) + " is SigLIP's SentencePiece tokenizer model, but "
                "the text tower of " + where + " is CLIP's (layout " + layout + "), which reads a CLIP vocabulary "
                "(bpe_simple_vocab_16e6.txt.gz, vocab.json + merges.txt or tokenizer.json)");
  if (!spec.vocab.empty()) return with_prefix(setting_ref("vocab"), [&] { return read_clip_vocab(spec.vocab); });
  if (layout != "openai" && has_tokenizer_files(folder)) return read_clip_vocab(folder);
  return read_openai_bpe(bundled_clip_vocab_path());
}

// Refuses a vocabulary whose ids the tower cannot read or whose <|endoftext|> is not where the tower pools.
void check_vocab_fits(const ClipVocab& vocab, const ClipTextHParams& hp, const std::string& where, bool given) {
  const int eot = hp.pool == ClipTextPool::eos ? hp.eos_id : hp.eot_id();
  const bool pools_at_eot = hp.pool == ClipTextPool::first || hp.pool == ClipTextPool::last || vocab.end_id == eot;
  if (static_cast<int>(vocab.tokens.size()) <= hp.vocab_size && pools_at_eot) return;
  const std::string whose = given ? setting_ref("vocab") + " " + printable(vocab.path)
                                  : "the vocabulary found (" + printable(vocab.path) + ")";
  throw Error(whose + ": " + std::to_string(vocab.tokens.size()) +
              " tokens, <|endoftext|> " + std::to_string(vocab.end_id) + "; the text tower of " + where + " has " +
              std::to_string(hp.vocab_size) + " token embeddings and pools at " + clip_text_pool_name(hp.pool) +
              (hp.pool == ClipTextPool::first || hp.pool == ClipTextPool::last ? "" : " id " + std::to_string(eot)) +
              ": not this model's vocabulary" + (given ? "" : "; give its own with " + setting_ref("vocab")));
}

// The files a vocabulary was read from, as read_clip_vocab names them in ClipVocab::path.
std::vector<std::string> vocab_files(const ClipVocab& v) {
  const std::string sep = " + ";
  const size_t at = v.path.find(sep);
  if (v.source == VocabSource::hf_vocab_merges && at != std::string::npos)
    return {v.path.substr(0, at), v.path.substr(at + sep.size())};
  return {v.path};
}

nlohmann::ordered_json vocab_json(const ClipVocab& v) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const std::string& f : vocab_files(v))
    files.push_back({{"file", fs::path(f).filename().string()}, {"sha256", sha256_file(f)}});
  return files.size() == 1 ? files.front() : files;
}

// tokenizer_config.json next to a SentencePiece model: SigLIP 2's Gemma tokenizer (tokenizer_class
// GemmaTokenizer[Fast]) is refused by name; SigLIP's (SiglipTokenizer, or T5's in timm's open_clip repositories)
// and a folder without the file pass.
void check_tokenizer_class(const fs::path& dir) {
  std::error_code ec;
  const fs::path cfg = dir / "tokenizer_config.json";
  if (!fs::is_regular_file(cfg, ec) || fs::file_size(cfg, ec) > (1u << 20)) return;
  std::ifstream in(cfg);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("tokenizer_class") || !j["tokenizer_class"].is_string()) return;
  const std::string cls = j["tokenizer_class"].get<std::string>();
  if (cls.find("Gemma") != std::string::npos)
    throw Error(printable(cfg.string()) + ": tokenizer_class \"" + cls + "\" is SigLIP 2's Gemma tokenizer (256k "
                "vocabulary), which attnmap does not read; SigLIP's SentencePiece tokenizer (SiglipTokenizer) is read");
}

// SigLIP's SentencePiece model: --vocab (a .model file, or a folder holding spiece.model), else spiece.model in
// the weights' folder. A CLIP vocabulary given to the SigLIP tower is refused naming both; a missing file says
// where it looked and that --vocab can name it.
SiglipTokenizer siglip_tokenizer(const TextTower& tower, const TextSpec& spec) {
  const std::string vocab = setting_ref("vocab");
  std::error_code ec;
  fs::path file;
  if (!spec.vocab.empty()) {
    if (names_clip_vocab(spec.vocab))
      throw Error(vocab + " " + printable(spec.vocab) + " is a CLIP vocabulary, but the text tower of " + tower.where +
                  " is SigLIP's, which reads SigLIP's SentencePiece tokenizer model (spiece.model): give that file, "
                  "or a folder holding it");
    file = fs::is_directory(spec.vocab, ec) ? fs::path(spec.vocab) / "spiece.model" : fs::path(spec.vocab);
    if (fs::is_directory(spec.vocab, ec) && !fs::is_regular_file(file, ec))
      throw Error(vocab + " " + printable(spec.vocab) + ": a folder without spiece.model, SigLIP's SentencePiece "
                  "tokenizer model that the text tower of " + tower.where + " reads");
  } else {
    file = fs::path(tower.folder) / "spiece.model";
    if (tower.folder.empty() || !fs::is_regular_file(file, ec))
      throw Error("the SigLIP text tower of " + tower.where + " needs SigLIP's SentencePiece tokenizer model, "
                  "spiece.model: " + (tower.folder.empty() ? std::string("the weights have no folder to look in")
                                                            : "not found in " + printable(tower.folder) + " (the weights' folder)") +
                  "; name it with " + vocab + " FILE (the spiece.model of the model's Hugging Face repository, or a "
                  "folder holding it)");
  }
  check_tokenizer_class(file.parent_path());
  if (spec.vocab.empty()) return SiglipTokenizer(file.string(), tower.siglip_rules);
  return with_prefix(vocab, [&] { return SiglipTokenizer(file.string(), tower.siglip_rules); });
}

// Refuses a SentencePiece model whose ids the tower cannot read (more pieces than token embeddings).
void check_siglip_fits(const SiglipTokenizer& tok, const TextTower& tower, bool given) {
  const int V = tower.weights.hp.vocab_size;
  if (tok.vocab_size() <= V) return;
  throw Error((given ? setting_ref("vocab") + " " : std::string("the tokenizer model found, ")) + printable(tok.file()) +
              ": " + std::to_string(tok.vocab_size()) + " SentencePiece pieces; the text tower of " + tower.where +
              " has " + std::to_string(V) + " token embeddings: not this model's tokenizer" +
              (given ? "" : "; give its own with " + setting_ref("vocab")));
}

// The texts of the run: --text and --texts as given, or --labels FILE's names with --prompt.
std::vector<std::string> run_texts(const ModelSpec& spec) {
  if (!spec.text.labels_as_texts) return spec.text.texts;
  return with_prefix(setting_ref("labels"), [&] { return read_labels_file(spec.labels_file); });
}

// Refuses a model the texts cannot be classes of: one with a classifier head, one without a text tower.
// Refuses a model with a classifier head: its classes are the head's.
void check_no_head(const ViTWeights& model, const std::string& where) {
  if (model.head.present())
    throw Error(setting_ref("text") + ": " + where + " has a classifier head of " + std::to_string(model.head.out) +
                " classes, not a CLIP image-text model: texts become the classes of a CLIP model only (its text "
                "tower and visual projection); this model's classes are its head's (" + setting_ref("labels") + " names them)");
}

// Refuses a CLIP without a text tower or visual projection.
void check_text_model(const ViTWeights& model, const std::string& where) {
  const std::string text = setting_ref("text");
  if (model.text_tensors.empty() && (model.hp.layout == Layout::TimmSiglip || model.hp.pool == Pool::Map))
    throw Error(text + ": " + where + " holds no SigLIP text tower (a SigLIP image tower alone, attention-pool head: "
                "e.g. a Hugging Face SiglipVisionModel folder or timm's vit_*_siglip_* weights); texts need the whole "
                "SigLIP checkpoint (a Hugging Face SiglipModel folder with its spiece.model, or open_clip's SigLIP "
                "open_clip_pytorch_model.bin with its open_clip_config.json)");
  if (model.text_tensors.empty())
    throw Error(text + ": " + where + " holds no CLIP text tower (no token_embedding / transformer.* / "
                "text_model.* tensors: a vision-only file, e.g. timm's or open_clip's visual weights alone); texts "
                "need the whole CLIP checkpoint (OpenAI's ViT-B-16.pt, open_clip's open_clip_pytorch_model.bin, "
                "a Hugging Face CLIPModel folder)");
  if (!model.proj.present() && model.hp.pool != Pool::Map)
    throw Error(text + ": " + where + " has a text tower but no visual projection (proj / visual.proj / "
                "visual_projection) nor SigLIP's attention-pool head: image and text features cannot be compared");
}

// The image embedding's width (CLIP: the projection's outputs; SigLIP: the attention-pool head's output, the
// model width) against the text tower's.
void check_embedding_widths(const ViTWeights& model, const ClipTextWeights& tower, const std::string& where) {
  const int image = model.proj.present() ? model.proj.out : model.hp.dim;
  if (image != tower.hp.embed_dim)
    throw Error(setting_ref("text") + ": " + where + ": the image embedding is " + std::to_string(image) +
                " wide (" + (model.proj.present() ? "the visual projection" : "the attention-pool head") +
                ") and the text tower's " + std::to_string(tower.hp.embed_dim) + ": they cannot be compared");
}

// The ids of a prompt before any cut, counted as the tokenizer frames them (CLIP: with <|startoftext|> and
// <|endoftext|>; SigLIP: with </s>, without the padding).
size_t full_count(const ClipTokenizer& tok, const std::string& p) {
  return tok.tokenize(p, ContextOverflow::truncate, SIZE_MAX).size();
}
size_t full_count(const SiglipTokenizer& tok, const std::string& p) { return tok.encode(p).size() + 1; }

// The token ids of every prompt, each named in an error by its text; with --truncate-text, a note for each
// prompt cut to the context (the count it had). Tok: ClipTokenizer, or SiglipTokenizer (whose ids are padded
// with </s> to exactly the context, as SigLIP's tokenizers pad: the tower reads them as given).
template <class Tok>
std::vector<std::vector<int32_t>> tokenize_all(const Tok& tok, const std::vector<std::string>& prompts,
                                               const TextSpec& spec, int context, std::vector<std::string>& notes) {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(prompts.size());
  const ContextOverflow overflow = spec.truncate ? ContextOverflow::truncate : ContextOverflow::refuse;
  const size_t C = static_cast<size_t>(context);
  for (const std::string& p : prompts) {
    try {
      ids.push_back(tok.tokenize(p, overflow, C));
      if (spec.truncate && ids.back().size() == C)  // cut, or exactly the context: count it whole
        if (const size_t n = full_count(tok, p); n > C)
          notes.push_back(setting_ref("text") + " \"" + clip_text_head(p) + "\": " + std::to_string(n) +
                          " tokens, cut to " + std::to_string(C) + " (" + setting_ref("truncate_text") + ")");
    } catch (const Error& e) {
      std::string why = e.what();  // names the text (its first 60 bytes)
      for (const std::string who : {"open_clip does)", "SigLIP's tokenizers do)"}) {
        const std::string cut = "truncate it as " + who;
        if (const size_t at = why.find(cut); at != std::string::npos)
          why.replace(at, cut.size(), "give " + setting_ref("truncate_text") + " to cut it as " + who);
      }
      throw Error(setting_ref("text") + ": " + why);
    }
  }
  return ids;
}

// How messages name the run's texts: "{setting:text} 'a dog'", or for a text read from --texts FILE
// "{setting:texts} FILE: line N: 'a dog'" (the run's texts are the --text values, then the file's: the file is
// read again for its line numbers only when a message names a text; a file that no longer matches names none).
class TextNames {
 public:
  TextNames(const std::vector<std::string>& texts, const TextSpec& spec) : texts_(texts), spec_(spec) {}
  // The text's line in the --texts file; 0: not from the file.
  int line(size_t i) const {
    if (spec_.texts_file.empty() || spec_.labels_as_texts) return 0;
    std::vector<int> lines;
    std::vector<std::string> file;
    try {
      file = read_texts_file(spec_.texts_file, &lines);
    } catch (const Error&) {
      return 0;
    }
    if (file.size() > texts_.size()) return 0;
    const size_t first = texts_.size() - file.size();
    if (i < first || !std::equal(file.begin(), file.end(), texts_.begin() + static_cast<long>(first))) return 0;
    return lines[i - first];
  }
  // The subject of a message: "--text 'X'" or "--texts FILE: line N: 'X'".
  std::string operator()(size_t i) const {
    const int n = line(i);
    const std::string quoted = "'" + clip_text_head(texts_[i]) + "'";
    if (n == 0) return setting_ref("text") + " " + quoted;
    return setting_ref("texts") + " " + printable(spec_.texts_file) + ": line " + std::to_string(n) + ": " + quoted;
  }
  // Another text named in the same message: "'X'", or "'X' on line N" for one from the file.
  std::string other(size_t i) const {
    const int n = line(i);
    return "'" + clip_text_head(texts_[i]) + "'" + (n == 0 ? "" : " on line " + std::to_string(n));
  }

 private:
  const std::vector<std::string>& texts_;
  const TextSpec& spec_;
};

// What SigLIP's tokenizer leaves of each text alone (no template), for the checks CLIP's tokenizer needs not:
// a text with no piece left after the clean-up (punctuation only: "!!!") is refused as a class (its score would
// be the template's or </s>'s alone; as embeddings it gets a note); a text whose pieces are all <unk> (a CJK
// label or an emoji in T5's English vocabulary) gets a note. A text with some <unk> pieces gets none: its known
// words are read, as by the families' own code ("café" where "é" is unknown). The bare word-boundary piece "▁"
// is not counted as a piece of the text. Returns, per text, whether every piece is <unk> (check_distinct_texts
// then says why two such texts are one class).
std::vector<bool> check_siglip_texts(const SiglipTokenizer& tok, const std::vector<std::string>& texts,
                                     const TextNames& names, bool as_classes, std::vector<std::string>& notes) {
  std::map<int32_t, bool> boundary;  // id -> the piece is only "▁"s
  std::vector<bool> unknown_only(texts.size(), false);
  for (size_t i = 0; i < texts.size(); ++i) {
    size_t pieces = 0, unknown = 0;
    for (const int32_t id : tok.encode(texts[i])) {
      auto [at, fresh] = boundary.emplace(id, false);
      if (fresh) at->second = id != tok.unk_id() && tok.piece(id).find_first_not_of("\xE2\x96\x81") == std::string::npos;
      pieces += !at->second;
      unknown += id == tok.unk_id();
    }
    const std::string empty = names(i) + " is empty after SigLIP's clean-up (punctuation removed)";
    if (pieces == 0 && as_classes) throw Error(empty + ": a class needs words");
    if (pieces == 0) notes.push_back(empty + ": its feature reads no text");
    unknown_only[i] = pieces > 0 && unknown == pieces;
    if (unknown_only[i])
      notes.push_back("every piece of '" + clip_text_head(texts[i]) + "' is unknown to the tokenizer (<unk>): its "
                      "score does not read the text");
  }
  return unknown_only;
}

// Refuses a text that is blank, given twice, or whose prompts are the same token ids as another text's (CLIP's
// clean-up lower-cases and collapses white space: "a dog", "A DOG" and "a dog " are one class, which would
// split its probability). unknown_only (SigLIP; empty for CLIP): the texts whose pieces are all <unk>, which
// are one class for that reason.
void check_distinct_texts(const std::vector<std::string>& texts, const std::vector<std::vector<int32_t>>& ids,
                          size_t templates, bool siglip, const TextNames& names,
                          const std::vector<bool>& unknown_only) {
  std::map<std::string, size_t> seen_text;
  std::map<std::vector<int32_t>, size_t> seen_ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (trimmed(texts[i]).empty())
      throw Error(setting_ref("text") + " '" + printable(texts[i]) + "' is blank (a class needs words)");
    if (!seen_text.emplace(texts[i], i).second) throw Error(names(i) + " is given twice (each text is a class)");
    std::vector<int32_t> all;
    for (size_t t = 0; t < templates; ++t) {
      const std::vector<int32_t>& one = ids[i * templates + t];
      all.insert(all.end(), one.begin(), one.end());
      all.push_back(-1);
    }
    const auto [at, fresh] = seen_ids.emplace(std::move(all), i);
    const size_t j = at->second;
    if (!fresh && !unknown_only.empty() && unknown_only[i] && unknown_only[j])
      throw Error(names(i) + " is the same tokens as " + names.other(j) + ": every piece of both is unknown to "
                  "the tokenizer (<unk>), so the model cannot tell them apart (and reads neither text)");
    if (!fresh)
      throw Error(names(i) + " is the same tokens as " + names.other(j) +
                  (siglip ? " (SigLIP's tokenizer lower-cases, drops punctuation, collapses white space and may cut "
                            "long texts): one class given twice; give it once"
                          : " (CLIP's tokenizer lower-cases, collapses white space and may cut long texts): one class given "
                            "twice would split its probability; give it once"));
  }
}

}  // namespace

std::vector<std::string> read_texts_file(const std::string& path, std::vector<int>* line_numbers) {
  const std::string name = setting_ref("texts") + " " + printable(path);
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || fs::is_directory(path, ec)) throw Error(name + ": cannot be read (not a file)");
  std::ostringstream all;
  all << in.rdbuf();
  std::string text = all.str();
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // a byte-order mark (Windows editors)
  if (text.compare(0, 2, "\xFF\xFE") == 0 || text.compare(0, 2, "\xFE\xFF") == 0 || text.find('\0') != std::string::npos)
    throw Error(name + ": is UTF-16 or binary (" + (text[0] == '\xFF' || text[0] == '\xFE' ? "a UTF-16 byte-order mark" : "NUL bytes") +
                "); save it as UTF-8, one text per line");
  std::vector<std::string> out;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (std::string t = trimmed(line); !t.empty()) {
      (void)utf8_to_code_points(t, name + ": line " + std::to_string(number));  // not UTF-8: the line named
      out.push_back(std::move(t));
      if (line_numbers) line_numbers->push_back(number);
    }
  }
  if (out.empty()) throw Error(name + ": no text in it (one text per line; blank lines are skipped)");
  return out;
}

void check_prompt_templates(const std::vector<std::string>& templates) {
  for (const std::string& p : templates)
    if (p.find("{}") == std::string::npos)
      throw Error(setting_ref("prompt") + " '" + printable(p) + "' has no {} for the text (e.g. 'a photo of a {}.')");
}

std::string fill_template(const std::string& templ, const std::string& text) {
  std::string out;
  size_t from = 0;
  for (size_t at; (at = templ.find("{}", from)) != std::string::npos; from = at + 2) out += templ.substr(from, at - from) + text;
  return out + templ.substr(from);
}

TextTower build_text_tower(const ViTWeights& model) {
  const std::string where = model.files.empty() ? std::string("the model") : printable(model.files.front().path);
  check_no_head(model, where);
  check_text_model(model, where);
  const ClipTextConfig cfg = clip_text_config(model.text_layout, model.text_config, model.text_tensors, where);
  TextTower t;
  t.weights = build_clip_text(model.text_tensors, cfg, where);
  check_embedding_widths(model, t.weights, where);
  t.rules = cfg.rules;
  t.siglip = cfg.siglip_tokenizer;
  t.siglip_rules = cfg.siglip_rules;
  t.layout = model.text_layout;
  t.folder = weights_folder(model);
  t.where = where;
  return t;
}

bool file_has_text_tower(const ViTWeights& model) {
  if (!model.text_tensors.empty()) return true;
  return std::any_of(model.tensors.begin(), model.tensors.end(),
                     [](const ViTWeights::TensorUse& u) {
                       return u.reason.rfind("CLIP text tower", 0) == 0 || u.reason.rfind("SigLIP text tower", 0) == 0;
                     });
}

// The texts through the tower: tokenized by its rules, encoded once each prompt, each prompt's features
// normalised, averaged over the templates and normalised again (CLIP's zero-shot recipe: prompt-ensembling in
// openai/CLIP's notebook Prompt_Engineering_for_ImageNet).
TextFeatures encode_texts(const TextTower& tower, const ModelSpec& spec, bool as_classes) {
  TextFeatures out;
  out.labels = run_texts(spec);
  const std::vector<std::string>& texts = out.labels;
  if (texts.empty()) throw Error(setting_ref("text") + ": no text given (a list of one or more texts)");
  const std::vector<std::string> templates = spec.text.templates.empty() ? std::vector<std::string>{"{}"}
                                                                         : spec.text.templates;
  std::vector<std::string> prompts;
  for (const std::string& t : texts)
    for (const std::string& tm : templates) prompts.push_back(fill_template(tm, t));
  const int context = tower.weights.hp.context_length;
  std::vector<std::vector<int32_t>> ids;
  nlohmann::ordered_json vocab_record;
  const TextNames names(texts, spec.text);
  std::vector<bool> unknown_only;  // SigLIP: the texts whose pieces are all <unk>
  if (tower.siglip) {  // SigLIP's SentencePiece tokenizer, its ids padded with </s> to the context
    const SiglipTokenizer tok = siglip_tokenizer(tower, spec.text);
    check_siglip_fits(tok, tower, !spec.text.vocab.empty());
    ids = tokenize_all(tok, prompts, spec.text, context, out.notes);
    unknown_only = check_siglip_texts(tok, texts, names, as_classes, out.notes);
    vocab_record = {{"file", fs::path(tok.file()).filename().string()}, {"sha256", sha256_file(tok.file())}};
  } else {
    const ClipVocab vocab = find_vocab(tower.layout, tower.folder, spec.text, tower.where);
    check_vocab_fits(vocab, tower.weights.hp, tower.where, !spec.text.vocab.empty());
    ids = tokenize_all(ClipTokenizer(vocab, tower.rules), prompts, spec.text, context, out.notes);
    vocab_record = vocab_json(vocab);
  }
  if (as_classes) check_distinct_texts(texts, ids, templates.size(), tower.siglip, names, unknown_only);
  if (as_classes && texts.size() == 1 && tower.weights.rule == ScoreRule::softmax)
    out.notes.push_back("one text: its probability is 100% by construction (a softmax over the texts given); its "
                        "maps explain its image-text logit");
  std::vector<float> each = encode_text(tower.weights, ids);
  const size_t N = texts.size(), T = templates.size(), E = static_cast<size_t>(tower.weights.hp.embed_dim);
  l2_normalize_rows(each.data(), static_cast<int>(N * T), static_cast<int>(E));
  out.text.assign(N * E, 0.0f);
  for (size_t i = 0; i < N; ++i)
    for (size_t t = 0; t < T; ++t)
      for (size_t e = 0; e < E; ++e) out.text[i * E + e] += each[(i * T + t) * E + e];
  l2_normalize_rows(out.text.data(), static_cast<int>(N), static_cast<int>(E));  // the sum's direction: the mean's
  out.count = static_cast<int>(N);
  out.dim = static_cast<int>(E);
  out.scale = clip_logit_scale(tower.weights);
  out.bias = tower.weights.logit_bias;
  out.rule = tower.weights.rule;
  out.record = {{"texts", texts}, {"templates", spec.text.templates}, {"vocab", vocab_record},
                {"rules", tower.siglip ? siglip_rules_name(tower.siglip_rules) : text_rules_name(tower.rules)},
                {"truncate", spec.text.truncate}};
  // CLIP's records stay as they were; the score rule is added by score_words.cpp zero_shot_settings (SCORES)
  if (tower.siglip) out.record["tokenizer"] = "siglip";
  if (spec.text.labels_as_texts)
    out.record["labels_file"] = {{"file", fs::path(spec.labels_file).filename().string()},
                                 {"sha256", sha256_file(spec.labels_file)}};
  if (!spec.text.texts_file.empty())
    out.record["texts_file"] = {{"file", fs::path(spec.text.texts_file).filename().string()},
                                {"sha256", sha256_file(spec.text.texts_file)}};
  return out;
}

void set_text_classes(ViTWeights& model, const TextFeatures& f) {
  model.zero_shot.text = std::vector<float>(f.text);
  model.zero_shot.classes = f.count;
  model.zero_shot.scale = f.scale;
  model.zero_shot.bias = f.bias;
  model.zero_shot.rule = f.rule;
  model.zero_shot.labels = f.labels;
  model.hp.labels = f.labels;
  model.hp.source["labels"] = setting_ref("text");
  model.hp.source[kRecordKey] = f.record.dump();
  for (const std::string& n : f.notes) model.notices.push_back(n);
}

void apply_texts(ViTWeights& model, const ModelSpec& spec) {
  const TextTower tower = build_text_tower(model);
  set_text_classes(model, encode_texts(tower, spec, true));
  model.text_tensors.clear();  // the tower's weights (a third of a ViT-B/16 CLIP) are not kept for the run
}

std::vector<float> encode_images(const ViTWeights& model, const std::vector<const float*>& images) {
  const std::string where = model.files.empty() ? std::string("the model") : printable(model.files.front().path);
  // SigLIP (no projection): the image embedding is the attention-pool head's output (HF pooler_output, timm
  // forward_head(pre_logits=True), open_clip encode_image with timm_proj none), ForwardResult::pooled.
  const bool map = !model.proj.present() && model.hp.pool == Pool::Map;
  if (!model.proj.present() && !map)
    throw Error(where + " has no visual projection (OpenAI / OpenCLIP proj, Hugging Face visual_projection) and no "
                "SigLIP attention-pool head: image features in CLIP's embedding space need a CLIP image tower with its "
                "projection, or a SigLIP one");
  if (!map && (model.hp.pool != Pool::ClassToken || model.fc_norm.present()))
    throw Error(where + ": CLIP image features read the class token after the final LayerNorm; this model pools "
                "otherwise");
  ForwardOptions fo;
  fo.to_end = true;
  const std::vector<ForwardResult> res = vit_forward(model, images, fo);
  const int D = model.hp.dim, E = map ? D : model.proj.out;
  std::vector<float> out(res.size() * static_cast<size_t>(E));
  for (size_t b = 0; b < res.size(); ++b) {
    const float* pooled = map ? res[b].pooled.data() : res[b].tokens_out.data();  // else: the final-normed class token
    std::vector<double> e(static_cast<size_t>(E), 0.0);
    double norm = 0.0;
    for (int r = 0; r < E; ++r) {
      double acc = 0.0;
      if (map) acc = pooled[r];
      for (int k = 0; k < D && !map; ++k) acc += static_cast<double>(model.proj.weight[static_cast<size_t>(r) * D + k]) * pooled[k];
      e[static_cast<size_t>(r)] = acc;
      norm += acc * acc;
    }
    norm = std::sqrt(norm);
    if (!(norm > 0.0) || !std::isfinite(norm))
      throw Error(where + ": image " + std::to_string(b) + "'s CLIP feature has norm " + std::to_string(norm) +
                  ": it cannot be normalised");
    for (int r = 0; r < E; ++r) out[b * static_cast<size_t>(E) + static_cast<size_t>(r)] = static_cast<float>(e[static_cast<size_t>(r)] / norm);
  }
  return out;
}

bool has_text_classes(const ViTWeights& model) { return model.zero_shot.present(); }

void keep_text_tower(ModelOverrides& ov, bool keep) { ov.keep_text = keep; }

std::vector<std::string> text_file_labels(const std::vector<std::string>& texts) {
  const auto safe = [](unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  };
  std::vector<std::string> out;
  for (const std::string& t : texts) {
    std::string s = t;
    bool hashed = s.size() > 48 || s.empty();
    for (char& c : s) {
      if (safe(static_cast<unsigned char>(c))) continue;
      hashed = hashed || c != ' ';
      c = '_';
    }
    if (!s.empty() && s[0] == '.') s[0] = '_';
    if (!hashed && std::find(out.begin(), out.end(), s) == out.end()) {
      out.push_back(s);
      continue;
    }
    out.push_back(s.substr(0, 40) + "-" + sha256_text(t).substr(0, 8));
  }
  return out;
}

std::string class_file_name(const ViTWeights& model, int index) {
  if (!has_text_classes(model) || index < 0 || static_cast<size_t>(index) >= model.hp.labels.size())
    return class_file_label(index, model.hp.labels);
  return text_file_labels(model.hp.labels)[static_cast<size_t>(index)];
}

nlohmann::ordered_json zero_shot_record(const ViTWeights& model) {
  const auto it = model.hp.source.find(kRecordKey);
  if (it == model.hp.source.end()) return nullptr;
  return nlohmann::ordered_json::parse(it->second);
}

}  // namespace attnmap
