// model_args.hpp - the model and preprocessing settings of figure and stats, and every command's texts: their text as given (stored by
// make_request, app/cli/request.cpp), checked by apply_model_input (app/cli/options_cli.cpp).
#pragma once

#include <string>
#include <vector>

namespace attnmap {

struct RenderOptions;

/// -w, --key, --heads, --act, --pool, --size, --pos-interp, --resize, --mean, --std, --precision as written.
struct ModelInputArgs {
  std::string weights, key, heads, act, pool, size, pos_interp, mean, std, precision;
  std::string resize = "squash";
};

/// Parses and checks them into ro (weights, resize, size, pos_interp, overrides). Throws attnmap::Error naming
/// the flag.
void apply_model_input(const ModelInputArgs& a, RenderOptions& ro);

/// --text (repeatable), --texts FILE, --prompt (repeatable), --vocab FILE|FOLDER, --truncate-text as written:
/// texts as a CLIP's classes (issue 43), for render, eval, figure and explore alike.
struct TextArgs {
  std::vector<std::string> text, prompt;
  std::string texts, vocab;
  bool truncate = false;
};

/// Checks them into ro.text (TextSpec, engine/render.hpp; --texts FILE read here, before the model) and asks the
/// loader to keep the text tower (ModelOverrides::keep_text). Refuses a --prompt without {}, a text given twice,
/// --vocab / --truncate-text without texts, --labels with texts; ro.labels_file must be set before. Throws
/// attnmap::Error naming the settings.
void apply_text_args(const TextArgs& a, RenderOptions& ro);

}  // namespace attnmap
