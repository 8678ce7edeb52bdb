// zero_shot.hpp - texts as a CLIP model's classes (issue 43 part 2): the texts of a run (--text, --texts,
// --prompt, --vocab) tokenized with CLIP's tokenizer, encoded by the file's text tower, averaged over the
// templates and L2-normalised into the model's zero-shot head (ViTWeights::zero_shot), which makes the image-
// text logits the model's logits (top-5, --class, the class-specific views). docs/text.md.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/weights.hpp"
#include "engine/render.hpp"
#include "model/clip_text.hpp"

namespace attnmap {

/// The texts of a --texts FILE: one per line, UTF-8; a byte-order mark at the start is dropped, "\r\n" read as
/// "\n", white space at both ends of a line dropped, blank lines skipped (nothing else: '#' is text). Errors
/// (naming {setting:texts} and the file): cannot be read, UTF-16 or binary, a line that is not UTF-8 (its number),
/// no text in it. `line_numbers`: each text's line (1-based), for messages about it.
std::vector<std::string> read_texts_file(const std::string& path, std::vector<int>* line_numbers = nullptr);

/// Refuses a prompt template without "{}" (where the text goes), naming {setting:prompt} and the template.
void check_prompt_templates(const std::vector<std::string>& templates);

/// `templ` with every "{}" replaced by `text` (str.format of CLIP's prompt templates, one field).
std::string fill_template(const std::string& templ, const std::string& text);

/// The texts as the model's classes: model.zero_shot set from spec.text (its texts, or with labels_as_texts
/// the names of spec.labels_file) and hp.labels = the texts; the text tower's tensors dropped. The tokenizer's
/// rules are the text tower's family's (model.text_layout), its vocabulary --vocab, else the tokenizer files
/// of the weights' folder (Hugging Face / open_clip layouts), else the bundled OpenAI vocabulary. A SigLIP tower
/// reads SigLIP's SentencePiece model: --vocab (a .model file, or a folder holding spiece.model), else
/// spiece.model in the weights' folder; a CLIP vocabulary for a SigLIP tower (and a SentencePiece model for a
/// CLIP one) is refused naming both.
/// hp.source["zero_shot"] holds the record (zero_shot_record). Errors (exit 2; naming the setting, the file
/// and why): a model with a classifier head, a file without a text tower (a SigLIP image tower alone: named as
/// such, with SigLIP's whole checkpoints) or visual projection (SigLIP: without its attention-pool head), a
/// vocabulary that is not the tower's, a missing spiece.model (where it looked), a text over the tower's context
/// (unless spec.text.truncate), not UTF-8, a text SigLIP's clean-up leaves empty. A message about a text of
/// spec.text.texts_file names the file and the line.
void apply_texts(ViTWeights& model, const ModelSpec& spec);

/// A CLIP's text tower built once, to encode texts given after the model is made (the Python module's
/// forward(text=...), encode_text): the tower, its tokenizer rules, the weights' folder (its tokenizer files) and
/// the name its messages use. A SigLIP tower (siglip) reads SigLIP's SentencePiece tokenizer (spiece.model) with
/// siglip_rules instead of CLIP's.
struct TextTower {
  ClipTextWeights weights;
  ClipTextRules rules = ClipTextRules::openai;
  bool siglip = false;
  SiglipTextRules siglip_rules = SiglipTextRules::hugging_face;
  std::string layout, folder, where;
};

/// The text tower of `model` built from its text tensors (handed over by a load with ModelOverrides::keep_text).
/// Errors (exit 2, naming the setting {setting:text} and the file) as apply_texts': a classifier head, no text
/// tower, no visual projection, a tower the family's config cannot build.
TextTower build_text_tower(const ViTWeights& model);

/// Whether the loader saw a CLIP (or SigLIP) text tower in the file (read or listed as not read).
bool file_has_text_tower(const ViTWeights& model);

/// Texts encoded by a text tower: `text` (N, E), each row L2-normalised - per text, each template's feature
/// (CLIP.encode_text) normalised, averaged over the templates and normalised again (one template: the text's
/// normalised feature); `scale` = exp(logit_scale); `bias` the tower's logit_bias (SigLIP; 0 for CLIP) and `rule`
/// how its logits become probabilities (ClipTextWeights::rule); `labels` the texts as given; `record` the
/// provenance (zero_shot_record's form); `notes` for the user (texts cut by truncate, SigLIP texts all <unk>).
struct TextFeatures {
  std::vector<float> text;
  int count = 0, dim = 0;
  float scale = 0.0f;
  float bias = 0.0f;
  ScoreRule rule = ScoreRule::softmax;
  std::vector<std::string> labels;
  nlohmann::ordered_json record;
  std::vector<std::string> notes;
};

/// spec.text's texts (its templates, vocabulary, truncation) through `tower`. as_classes: the texts are to be
/// classes, so a blank text, a text given twice, two texts of the same tokens (said so when both are all <unk>)
/// and (SigLIP) a text with no piece left after the clean-up are refused (apply_texts' checks) and a single
/// softmax text gets a note; otherwise (embeddings) only an empty list is refused and an empty SigLIP text gets a
/// note. A SigLIP text whose every piece is <unk> gets a note (one with some <unk> pieces none). Errors (exit 2)
/// as apply_texts': a vocabulary that is not the tower's, a text over the context (unless spec.text.truncate).
TextFeatures encode_texts(const TextTower& tower, const ModelSpec& spec, bool as_classes);

/// `features` as the classes of `model` (which may be prepared already: only zero_shot, hp.labels and the
/// record change), as apply_texts sets them; its notes appended to model.notices.
void set_text_classes(ViTWeights& model, const TextFeatures& features);

/// CLIP image features: for each image (a normalised (3, hp.image_h, hp.image_w) input, model/preprocess.hpp),
/// the class token after the final LayerNorm (OpenAI ln_post(x[:, 0]), HF post_layernorm(pooler)) times the
/// visual projection, L2-normalised: CLIP.encode_image then features / features.norm(). (B, E) row-major.
/// `model` prepared (prepare_weights). Errors (exit 2): a model without a visual projection (not a CLIP), a
/// pooling other than the class token.
std::vector<float> encode_images(const ViTWeights& model, const std::vector<const float*>& images);

/// Each text's name in file names (NAME.class-<name>.png), safe on every file system and unique in the run:
/// spaces -> '_'; a text with any other character outside [A-Za-z0-9._-] (punctuation, '/', non-ASCII), over
/// 48 bytes, or whose name another text of the run already has, gets the first 40 bytes of that form (each
/// other byte '_', no leading '.') then '-' and 8 hex digits of the text's SHA-256 ("a dog" -> "a_dog",
/// "a dog/cat" -> "a_dog_cat-5d1a...", "猫" -> "___-c0ffee12"); at most 49 bytes.
std::vector<std::string> text_file_labels(const std::vector<std::string>& texts);

/// A class's name in file names: text_file_labels for a model whose classes are texts, else class_file_label.
std::string class_file_name(const ViTWeights& model, int index);

/// Whether the model's classes are texts (apply_texts has run).
bool has_text_classes(const ViTWeights& model);

/// Asks the loader to keep the CLIP text tower's tensors for the texts (ModelOverrides::keep_text).
void keep_text_tower(ModelOverrides& ov, bool keep);

/// The provenance record of apply_texts' run: {"texts", "templates", "vocab": {"file", "sha256"} (a list for
/// vocab.json + merges.txt), "rules", "truncate"}, as a JSON object; null when the model has no texts.
nlohmann::ordered_json zero_shot_record(const ViTWeights& model);

}  // namespace attnmap
