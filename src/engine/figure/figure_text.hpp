// figure_text.hpp - `attnmap figure` with a CLIP's texts as its classes (issue 43; docs/text.md "Figures"):
// a column per text for each class-specific view (chefer, gradcam, attn-grad) unless the class is fixed,
// each titled with its text, each cell captioned with the text's zero-shot probability for that image, and
// the line that says under the figure what the percentages are (a softmax over the N texts given; SigLIP's
// sigmoid of each text alone).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "checkpoint/weights.hpp"
#include "engine/figure/figure.hpp"
#include "maps/views.hpp"
#include "model/classify.hpp"

namespace attnmap {

/// The columns of a figure: the views as given, except that with texts and no fixed class (the class not
/// given) each class-specific view is a column per text, in the texts' order.
struct FigureColumns {
  std::vector<ResolvedView> views;     ///< one per column, photo included
  std::vector<int> text;               ///< per column: the text (class index) it explains; -1: not fixed by the column
  std::vector<ResolvedView> computed;  ///< the views compute_views runs, each once (the views as given)
  std::vector<size_t> source;          ///< per column: its view in `computed`
  bool zero_shot = false;              ///< the model's classes are texts (apply_texts)
  ScoreRule rule = ScoreRule::softmax; ///< how their probabilities are computed (model.zero_shot.rule)
  bool per_text = false;               ///< a column per text for each class-specific view
  bool class_specific = false;         ///< some view is class-specific
};

/// The columns of `views` (resolved for `model`) under p. Throws attnmap::Error (usage, status 2) for texts
/// without a class-specific view (they would not be in the figure), and for p.column_labels whose count is not
/// the columns' when each text has its column.
FigureColumns figure_columns(const FigurePlan& p, const ViTWeights& model, const std::vector<ResolvedView>& views);

/// The classes compute_views explains: every text (top-N: all of them, reordered by column_maps) for a column
/// per text, else the plan's --class.
ClassSpec computed_classes(const FigurePlan& p, const FigureColumns& c, int num_classes);

/// compute_views' maps (in `c.computed` order, a class-specific view's most probable class first) as the
/// columns' maps: one per map column, in column order, each ViewMap::view the column's index. Throws
/// attnmap::Error when a column's map is missing (a bug).
std::vector<ViewMap> column_maps(const FigureColumns& c, std::vector<ViewMap> maps);

/// A text column's title: the view's words and the text, as render's map labels ("Chefer relevance, text: a dog").
std::string text_column_title(const std::string& view_words, const std::string& text);

/// A cell's caption: the probability as render's labels write it ("93.1%"; SigLIP's "sigmoid 12.0%").
std::string probability_caption(double p, ScoreRule rule = ScoreRule::softmax);

/// The line under a figure whose cells carry texts' probabilities: what they are, over how many texts
/// (score_words.hpp's zero_shot_scores_phrase).
std::string zero_shot_key(int texts, ScoreRule rule = ScoreRule::softmax);

}  // namespace attnmap
