// figure_text.cpp - a figure's columns with a CLIP's texts (figure_text.hpp): a column per text, its title,
// the cells' probability captions and the line that says what they are.
#include "engine/figure/figure_text.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/names.hpp"
#include "core/setting_ref.hpp"
#include "engine/text/score_words.hpp"
#include "engine/text/zero_shot.hpp"

namespace attnmap {

FigureColumns figure_columns(const FigurePlan& p, const ViTWeights& model, const std::vector<ResolvedView>& views) {
  FigureColumns c;
  c.computed = views;
  c.zero_shot = has_text_classes(model);
  c.rule = model.zero_shot.rule;
  c.class_specific = std::any_of(views.begin(), views.end(), [](const ResolvedView& v) { return v.class_specific; });
  if (p.ro.text.given() && !c.class_specific) {
    const std::string why = class_views_unavailable(model);  // a model whose texts cannot be maps: adding chefer would be refused
    if (!why.empty())
      throw Error(setting_ref("text") + " / " + setting_ref("texts") + ": " + texts_not_maps(why) + "; a figure without " +
                  setting_ref("text") + " / " + setting_ref("texts") + " draws the attention views, and " +
                  texts_scores_where());
    throw Error("the texts of " + setting_ref("text") + " / " + setting_ref("texts") + " are the targets of the "
                "class-specific views (chefer, gradcam, attn-grad), and " + setting_ref("views") +
                " has none: the figure would not show them; add chefer to " + setting_ref("views"));
  }
  c.per_text = c.zero_shot && c.class_specific && !p.ro.class_spec;
  const int n = c.per_text ? model.num_classes() : 1;
  for (size_t i = 0; i < views.size(); ++i) {
    const bool each = c.per_text && views[i].class_specific;
    for (int t = 0; t < (each ? n : 1); ++t) {
      c.views.push_back(views[i]);
      c.text.push_back(each ? t : -1);
      c.source.push_back(i);
    }
  }
  if (p.column_labels && p.column_labels->size() != c.views.size())  // without texts check_figure_args counted them
    throw Error(setting_ref("column_labels") + " has " + counted(p.column_labels->size(), "label") + " for the " +
                counted(c.views.size(), "column") + " of the figure (one per column, photo included" +
                (c.per_text ? "; with " + counted(static_cast<size_t>(n), "text") +
                                  " each class-specific view has a column per text, or one with " +
                                  setting_ref("class_spec") + " TEXT)"
                            : ")"));
  return c;
}

ClassSpec computed_classes(const FigurePlan& p, const FigureColumns& c, int num_classes) {
  if (!c.per_text) return p.classes;
  ClassSpec all;
  all.kind = ClassSpec::Kind::TopK;
  all.k = num_classes;
  all.written = "top" + std::to_string(num_classes);
  return all;
}

std::vector<ViewMap> column_maps(const FigureColumns& c, std::vector<ViewMap> maps) {
  std::vector<ViewMap> out;
  for (size_t j = 0; j < c.views.size(); ++j) {
    if (c.views[j].spec.kind == ViewKind::Photo) continue;
    const auto it = std::find_if(maps.begin(), maps.end(), [&](const ViewMap& m) {
      return m.view == c.source[j] && (c.text[j] < 0 || m.class_index == c.text[j]);
    });
    if (it == maps.end()) throw Error("figure: no map computed for the column '" + c.views[j].name + "'");
    out.push_back(*it);
    out.back().view = j;
  }
  return out;
}

std::string text_column_title(const std::string& view_words, const std::string& text) {
  return view_words + ", text: " + text;  // render's class_word for texts (views_render.cpp)
}

std::string probability_caption(double p, ScoreRule rule) {
  return score_percent(p, rule);  // as render's class_phrase
}

std::string zero_shot_key(int texts, ScoreRule rule) {
  return "Percentages under the maps: each text's zero-shot probability for that image, " +
         zero_shot_scores_phrase(rule, static_cast<size_t>(texts), "not a classifier's classes") + ".";
}

}  // namespace attnmap
