// eval_report.cpp - what `attnmap eval` prints and writes: the per-image line, the note on views without a
// score, the summary tables (views and baselines, class-specific pointing, perturbation, sanity) and the JSON.
#include <algorithm>
#include <cstdio>

#include "core/error.hpp"
#include "core/names.hpp"
#include "core/setting_ref.hpp"
#include "engine/eval/eval_parts.hpp"
#include "engine/provenance.hpp"
#include "engine/text/score_words.hpp"
#include "engine/text/zero_shot.hpp"
#include "model/classify.hpp"

namespace attnmap {
namespace eval {

namespace {

using J = nlohmann::ordered_json;

// Width of the view-name column: the longest view name plus " *", at least 15.
size_t name_width(const EvalContext& ctx) {
  size_t width = 15;
  for (const auto& v : ctx.views) width = std::max(width, v.name.size() + 2);
  return width;
}

std::string padded(std::string s, size_t width) {
  s.resize(std::max(width, s.size()), ' ');
  return s;
}

std::string starred(const EvalContext& ctx, size_t v) { return ctx.views[v].name + (v == ctx.selected ? " *" : ""); }

// In place of a row's numbers when no image (item) has a score: "undefined (24 of 24 images: the map sums to 0)".
std::string undefined_cell(size_t undefined, const char* what, const std::string& why) {
  return "undefined (" + std::to_string(undefined) + " of " + std::to_string(undefined) + " " + what + ": " + why + ")";
}

// After a row's numbers when some images (items) have no score: "  (20 of 24 images; 4 undefined: ...)".
std::string partial_note(size_t n, size_t undefined, const char* what, const std::string& why) {
  if (!undefined) return "";
  return "  (" + std::to_string(n) + " of " + std::to_string(n + undefined) + " " + what + "; " +
         std::to_string(undefined) + " undefined: " + why + ")";
}

// {"images": 4, "why": "the map sums to 0"}, or nothing to add when every image has a score.
void add_undefined(J& entry, size_t undefined, const char* what, const std::string& why) {
  if (undefined) entry["undefined"] = {{what, undefined}, {"why", why}};
}

// "chefer, gradcam (block 3 norm1), attn-grad (block 1)": the class-specific views with their blocks.
std::string class_specific_views(const EvalContext& ctx) {
  std::string list;
  for (const ResolvedView& v : ctx.views) {
    if (!v.class_specific) continue;
    list += (list.empty() ? "" : ", ") + v.name;
    if (v.spec.kind == ViewKind::GradCam) list += " (block " + std::to_string(v.spec.layer) + " norm1)";
    if (v.spec.kind == ViewKind::AttnGrad) list += " (block " + std::to_string(v.spec.layer) + ")";
  }
  return list;
}

// " [+0.500, +0.875]": a margin's interval.
std::string interval_cell(const Interval& ci) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " [%+.3f, %+.3f]", ci.lo, ci.hi);
  return buf;
}

// The lines under the table that say which view is best - only one whose margin beats every baseline beyond
// its interval - or plainly that none is, and which views' maps are flat.
void print_verdict(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  const std::optional<size_t> bp = best_pointing_view(s), be = best_energy_view(s);
  out << "* selected view ("
      << (ctx.opt->view.views.empty()
              ? setting_ref("layer") + "/" + setting_ref("head") + "/" + setting_ref("rollout") + " or the model's default"
              : "the first of " + setting_ref("views"))
      << "); pointing tolerance " << ctx.opt->tolerance_px
      << " px; best pointing game: " << (bp ? ctx.views[*bp].name : "none")
      << ", best energy: " << (be ? ctx.views[*be].name : "none")
      << " (a view is named only when its margin over every baseline has its 95 % interval above 0)\n";
  const std::string base_p = best_pointing_baseline_name(s) + fmt(" %.3f", best_pointing_baseline(s)),
                    base_e = best_energy_baseline_name(s) + fmt(" %.3f", best_energy_baseline(s));
  if (!bp && !be)
    out << "no view beats the baselines: on neither pointing (best baseline: " << base_p << ") nor energy (best "
        << "baseline: " << base_e << ") is a view's margin over every baseline above 0 beyond its 95 % interval; "
        << "these maps are no evidence that the model localises the object\n";
  else if (!bp || !be)
    out << "no view beats every baseline on " << (bp ? "energy" : "pointing") << " beyond its 95 % interval (best "
        << "baseline: " << (bp ? base_e : base_p) << ")\n";
  std::string flat;
  size_t nflat = 0, nviews = 0;
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    if (!s.rows[v].n) continue;
    ++nviews;
    if (!s.rows[v].flat) continue;
    ++nflat;
    flat += (flat.empty() ? "" : ", ") + ctx.views[v].name;
  }
  if (nflat)
    out << "flat maps (" << nflat << " of " << nviews << " views: " << flat
        << "): the median over images of the patch map's max/mean is below " << fmt("%.2f", kFlatPeakToMean)
        << ", the map is nearly uniform and its peak follows small differences, not the object\n";
}

// The table of views (pointing, energy, ratio, the margins over the best baseline with their intervals, the
// maps' max/mean and "flat"; the selected one starred; a view without a score on some images says so), the
// baselines' rows, and the footnotes.
void print_view_table(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  const size_t width = name_width(ctx);
  out << padded("view", width) +
             "  pointing   energy    ratio  pointing-base  (95 % interval)   energy-base  (95 % interval)  max/mean\n";
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const Row& r = s.rows[v];
    if (!r.n) {
      out << padded(starred(ctx, v), width) << " " << undefined_cell(r.undefined, "images", r.why) << "\n";
      continue;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %9.3f %8.3f %7.2fx %+14.3f", padded(starred(ctx, v), width).c_str(), r.pointing,
                  r.energy, r.ratio, r.pointing_margin.value);
    out << buf << interval_cell(r.pointing_margin.ci) << fmt(" %+13.3f", r.energy_margin.value)
        << interval_cell(r.energy_margin.ci) << fmt(" %9.2f", r.peak) << (r.flat ? "  flat" : "")
        << partial_note(r.n, r.undefined, "images", r.why) << "\n";
  }
  char buf[160];
  for (const auto& [name, row] : {std::pair<const char*, const Row*>{"(centre prior)", &s.centre}, {"(brightness)", &s.bright}}) {
    std::snprintf(buf, sizeof buf, "%s %9.3f %8.3f %7.2fx\n", padded(name, width).c_str(), row->pointing, row->energy,
                  row->ratio);
    out << buf;
  }
  std::snprintf(buf, sizeof buf, "%s %9s %8.3f %7.2fx\n", padded("(uniform map)", width).c_str(), "-", s.area, 1.0);
  out << buf;
  std::snprintf(buf, sizeof buf, "%s %9.3f %8s\n", padded("(random map)", width).c_str(), s.random_pointing, "-");
  out << buf;
  if (!ctx.model->hp.class_token)
    out << "maps: the model has no class token: each attention view is the mean of the patch queries' rows "
           "(the attention each patch receives)\n";
  print_verdict(out, ctx, s);
  if (ctx.class_specific)
    out << class_specific_views(ctx) << ": class-specific, here each image's top-1 "
        << (has_text_classes(*ctx.model) ? "text" : "class") << "; the other views are class-agnostic\n";
  out << "baselines (no model): centre prior = Gaussian at the image centre, sigma 0.25 x the shorter side; "
         "brightness = the photo's luma (Rec. 709) as the map; uniform map: energy = mask area share; random map: "
         "expected pointing = mask area share; pointing-base = pointing - "
      << fmt("%.3f", best_pointing_baseline(s)) << " (" << best_pointing_baseline_name(s)
      << "), energy-base = energy - " << fmt("%.3f", best_energy_baseline(s)) << " (" << best_energy_baseline_name(s)
      << "), the best baseline of each; interval: 95 % percentile bootstrap over the images (" << kBootstrapResamples
      << " resamples, seed " << kBootstrapSeed << ") of the mean per-image difference; max/mean: median over the "
      << "images of the patch map's maximum over its mean (1 = uniform; flat below " << fmt("%.2f", kFlatPeakToMean)
      << ")\n";
}

// Class-specific pointing: each item's class asked in turn (printed when images have two or more items).
void print_class_table(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  if (!s.item_images) return;
  const size_t width = name_width(ctx) + 12;  // " (any class)"
  out << "\nclass-specific pointing: " << counted(s.item_images, "image") << ", " << counted(s.items, "item")
      << " of different classes; each item's " << (has_text_classes(*ctx.model) ? "text" : "class")
      << " asked in turn\n";
  out << padded("view", width) + "     asked    other  all items  asked-base\n";
  const double ba = best_asked_baseline(s);
  auto row = [&](const std::string& name, const ClassRow& r, bool margin) {
    if (margin && !r.items) {
      out << padded(name, width) << " " << undefined_cell(r.undefined, "items", r.why) << "\n";
      return;
    }
    char buf[192];
    std::snprintf(buf, sizeof buf, "%s %9.3f %8.3f %10.3f", padded(name, width).c_str(), r.asked, r.other, r.all);
    out << buf;
    if (margin) out << fmt(" %+11.3f", r.asked - ba) << partial_note(r.items, r.undefined, "items", r.why);
    out << "\n";
  };
  for (size_t v = 0; v < ctx.views.size(); ++v)
    row(ctx.views[v].name + (ctx.views[v].class_specific ? "" : " (any class)"), s.class_rows[v], true);
  row("(centre prior)", s.centre_class, false);
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %9.3f %8s %10s\n", padded("(random map)", width).c_str(), s.random_asked, "-", "-");
  out << buf;
  out << "asked: the map for an item's class peaks on that item; other: on another item instead; all items: every "
         "item of the image hit as asked; asked-base = asked - "
      << fmt("%.3f", ba)
      << " (the better of centre prior and random map). A view marked (any class) gives one map whatever the "
         "class, so it cannot score all items on images whose items do not overlap\n";
}

// Perturbation AUCs: per view, positive (most relevant patches removed first; lower is better) and negative
// (least relevant first; higher is better), with random orders as the baseline.
void print_perturbation_table(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  if (!s.perturbed) return;
  const size_t width = name_width(ctx);
  const std::vector<double> f = perturbation_fractions();
  out << "\nperturbation (" << (*ctx.opt->perturb == PerturbMode::Drop ? "drop: patch tokens leave the sequence"
                                                                   : "zero: patch pixels set to black")
      << "; target = each image's top-1" << (has_text_classes(*ctx.model) ? " text" : "")
      << "; AUC of its probability" << zero_shot_rule_parenthesis(ctx.model->zero_shot.rule) << " over 0-90 % of the patches removed)\n";
  out << padded("view", width) + "  positive  negative  neg-pos  positive-base  negative-base\n";
  const double rnd = trapezoid_auc(f, s.random);
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const size_t n = s.perturbed_n[v], undefined = s.perturbed - n;
    if (!n) {
      out << padded(starred(ctx, v), width) << " " << undefined_cell(undefined, "images", s.rows[v].why) << "\n";
      continue;
    }
    const double p = trapezoid_auc(f, s.pos[v]), ng = trapezoid_auc(f, s.neg[v]);
    char buf[192];
    std::snprintf(buf, sizeof buf, "%s %9.3f %9.3f %+8.3f %+14.3f %+14.3f", padded(starred(ctx, v), width).c_str(), p,
                  ng, ng - p, rnd - p, ng - rnd);
    out << buf << partial_note(n, undefined, "images", s.rows[v].why) << "\n";
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s %9.3f %9.3f %+8.3f\n", padded("(random order)", width).c_str(), rnd, rnd, 0.0);
  out << buf;
  std::snprintf(buf, sizeof buf,
                "positive: lower is better, negative: higher is better; positive-base = random - positive, "
                "negative-base = negative - random (> 0: better than the random order); random: mean of %d fixed-seed orders; "
                "%s, %s, %.2f s (processor time %.2f s)\n", std::max(1, ctx.opt->perturb_seeds),
                counted(s.perturbed, "image").c_str(),
                counted(static_cast<size_t>(s.forwards), "forward pass", "forward passes").c_str(),
                s.perturb_secs, s.perturb_cpu);
  out << buf;
}

// Sanity: mean Spearman of each view's maps with the trained model's, top k blocks randomised.
void print_sanity_table(std::ostream& out, const EvalContext& ctx, const Summary& s) {
  if (!s.sanity_n) return;
  const size_t width = name_width(ctx);
  const int depth = static_cast<int>(ctx.randomised.size());
  out << "\nsanity (model randomisation, Adebayo et al. 2018): mean Spearman rank correlation with the trained "
         "model's maps, blocks re-initialised from the top\n";
  std::string head = padded("view", width);
  for (int k = 1; k <= depth; ++k) head += (k == depth ? "    all " : "    top ") + std::to_string(k);
  out << head << "\n";
  std::vector<std::string> flagged;
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const size_t n = s.sanity_views_n[v], undefined = s.sanity_n - n;
    std::string line = padded(ctx.views[v].name, width);
    if (!n) {
      out << line << " " << undefined_cell(undefined, "images", s.rows[v].why) << "\n";
      continue;
    }
    for (int k = 0; k < depth; ++k) line += fmt(" %8.3f", s.rho[static_cast<size_t>(k)][v]);
    const bool flag = s.rho.back()[v] > ctx.opt->sanity_flag;
    if (flag) flagged.push_back(ctx.views[v].name);
    out << line << (flag ? "  <- unchanged" : "") << partial_note(n, undefined, "images", s.rows[v].why) << "\n";
  }
  std::string list;
  for (const auto& f : flagged) list += (list.empty() ? "" : ", ") + f;
  out << "flagged (correlation > " << fmt("%.2f", ctx.opt->sanity_flag)
      << " with every block randomised: the map does not depend on the weights): "
      << (list.empty() ? "none" : list) << fmt("; %.2f s\n", s.sanity_secs);
}

// The templates the model's texts were encoded with (its record: a model lent by Python has its own); empty:
// none (the texts alone).
std::vector<std::string> text_templates(const EvalContext& ctx) {
  const J z = zero_shot_record(*ctx.model);
  return z.is_object() && z.contains("templates") ? z["templates"].get<std::vector<std::string>>()
                                                  : std::vector<std::string>{};
}

// "'a', 'b', 'c' and 4 more": at most `most` strings, quoted.
std::string quoted_list(const std::vector<std::string>& v, size_t most) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < most; ++i) out += (i ? ", '" : "'") + printable(v[i]) + "'";
  if (v.size() > most) out += " and " + std::to_string(v.size() - most) + " more";
  return out;
}

// The line that says the classes are texts: how many, where they came from, the template(s), the texts as
// the text tower read them ("classes: 2 texts (CLIP zero-shot: ...), the ground truth's class names in the
// template 'a photo of a {}.': 'a photo of a bird.', 'a photo of a dog.'"; several templates: the texts alone).
std::string texts_line(const EvalContext& ctx) {
  const TextSpec& t = ctx.opt->view.text;
  const std::vector<std::string>& texts = ctx.model->hp.labels;
  const std::vector<std::string> templates = text_templates(ctx);
  const std::string aside = zero_shot_rule_aside(ctx.model->zero_shot.rule);  // SigLIP: "sigmoid, each text alone"
  std::string line = "classes: " + counted(texts.size(), "text") + (aside.empty() ? " (CLIP zero-shot" : " (SigLIP zero-shot, " + aside) +
                     (ctx.class_specific ? ": top-1 and the class-specific views are over them), "
                                         : ": top-1 is over them; no class-specific view is scored), ") +
                     (t.truth_names ? std::string("the ground truth's class names")
                      : t.labels_as_texts ? "the names of " + setting_ref("labels") + " " + printable(ctx.opt->view.labels_file)
                                          : "given with " + setting_ref("text") + "/" + setting_ref("texts"));
  if (templates.size() == 1) {
    std::vector<std::string> prompts;
    for (const std::string& x : texts) prompts.push_back(fill_template(templates[0], x));
    return line + " in the template '" + printable(templates[0]) + "': " + quoted_list(prompts, 8);
  }
  if (templates.size() > 1)
    line += " in " + std::to_string(templates.size()) + " templates, their text features averaged (" +
            quoted_list(templates, 4) + ")";
  return line + ": " + quoted_list(texts, 8);
}

}  // namespace

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string image_line(const EvalContext& ctx, const ImageEval& ev, int num_classes) {
  const HParams& hp = ctx.model->hp;
  const ViewScore& s = ev.views[ctx.selected];
  std::string line = ev.input + ": " + ctx.views[ctx.selected].name;
  if (!s.undefined.empty())
    line += " undefined (" + s.undefined + fmt("; mask area %.3f)", ev.area_share);
  else
    line += (s.hit ? " hit" : " miss") + fmt(", energy %.3f", s.energy) + fmt(" (mask area %.3f,", ev.area_share) +
            fmt(" %.2fx)", s.energy / ev.area_share);
  if (!ev.top5.empty()) {
    line += "; top-5" + zero_shot_rule_parenthesis(ctx.model->zero_shot.rule) + ": " + format_top_k(ev.top5);
    if (ev.truth) {
      const std::string t = hp.labels.size() == static_cast<size_t>(num_classes)
                                ? hp.labels[static_cast<size_t>(*ev.truth)]
                                : "class " + std::to_string(*ev.truth);
      line += std::string(" [truth ") + t + (ev.predicted == ev.truth ? ", correct]" : ", wrong]");
    }
  }
  return line;
}

std::string undefined_note(const EvalContext& ctx, const Summary& s) {
  std::vector<std::pair<std::string, std::string>> groups;  // (on how many and why, the views)
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const Row& r = s.rows[v];
    if (!r.undefined) continue;
    const std::string what = std::to_string(r.undefined) + " of " + std::to_string(s.n) + " images (" + r.why + ")";
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& p) { return p.first == what; });
    if (g == groups.end()) groups.emplace_back(what, ctx.views[v].name);
    else g->second += ", " + ctx.views[v].name;
  }
  std::string note;
  for (const auto& [what, views] : groups) note += (note.empty() ? "" : "; ") + views + ": no score on " + what;
  if (note.empty()) return note;
  if (note.find("sums to 0") != std::string::npos)
    note += "; a class-specific map is 0 when no gradient reaches the blocks, e.g. from a classifier head whose "
            "weights are 0 (a freshly initialised model)";
  return note + "; those images are left out of these views' figures, the other views score every image";
}

void print_summary(std::ostream& out, const EvalContext& ctx, const Summary& s, int failed, bool classify) {
  const size_t n = s.n;
  if (n && !ctx.opt->view.quiet) out << "\n";
  if (!n) return;
  out << "attnmap eval: " << counted(n, "image")
      << (failed ? ", " + std::to_string(failed) + " failed" : std::string())
      << fmt("; uniform baseline (mean mask area share) %.4f", s.area) << "\n";
  if (has_text_classes(*ctx.model)) out << texts_line(ctx) << "\n";
  if (classify) {
    if (!s.top1_not_computed.empty())
      out << "top-1 accuracy not computed: the ground-truth labels are not the model's class names (the note above "
             "names them; " << setting_ref("labels") << " FILE maps them)\n";
    else if (s.labelled)
      out << "top-1 accuracy " << fmt("%.4f", static_cast<double>(s.correct) / s.labelled) << " (" << s.correct
          << " correct of " << counted(static_cast<size_t>(s.labelled), "image") << " with a known class)\n";
    else
      out << "top-1 accuracy: no image has a known class (labels.csv or a class name in the file name)\n";
  }
  print_view_table(out, ctx, s);
  print_class_table(out, ctx, s);
  print_perturbation_table(out, ctx, s);
  print_sanity_table(out, ctx, s);
}

namespace {

// One image's JSON entry; a view without a score on it: hit and energy null, and why.
J image_json(const EvalContext& ctx, const ImageEval& ev) {
  J e;
  e["file"] = ev.input;
  e["mask"] = ev.mask;
  e["mask_area_share"] = ev.area_share;
  e["truth"] = ev.truth ? J(*ev.truth) : J();
  e["predicted"] = ev.predicted ? J(*ev.predicted) : J();
  J t = J::array();
  for (const auto& [name, p] : ev.top5) t.push_back({{"label", name}, {"probability", p}});
  e["top5"] = t;
  J vs = J::object();
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const ViewScore& s = ev.views[v];
    vs[ctx.views[v].name] = s.undefined.empty() ? J{{"hit", s.hit}, {"energy", s.energy}, {"max_over_mean", s.peak}}
                                                : J{{"hit", nullptr}, {"energy", nullptr}, {"undefined", s.undefined}};
  }
  e["views"] = vs;
  e["centre_prior"] = {{"hit", ev.centre.hit}, {"energy", ev.centre.energy}};
  e["brightness"] = {{"hit", ev.brightness.hit}, {"energy", ev.brightness.energy}};
  e["random_pointing"] = ev.random_pointing;
  if (!ev.items.empty()) {
    J items = J::array();
    for (const ItemScore& it : ev.items) {
      J iv = J::object();
      for (size_t v = 0; v < ctx.views.size(); ++v)
        iv[ctx.views[v].name] = it.undefined[v].empty()
                                    ? J{{"asked", static_cast<bool>(it.asked[v])}, {"other", static_cast<bool>(it.other[v])}}
                                    : J{{"asked", nullptr}, {"other", nullptr}, {"undefined", it.undefined[v]}};
      items.push_back({{"class", it.cls}, {"mask", it.mask}, {"area_share", it.area_share},
                       {"centre_prior", {{"asked", it.centre_asked}, {"other", it.centre_other}}}, {"views", iv}});
    }
    e["items"] = items;
  }
  if (ev.perturbation) {
    const std::vector<double> f = perturbation_fractions();
    const PerturbEval& pe = *ev.perturbation;
    J pv = J::object();
    for (size_t v = 0; v < ctx.views.size(); ++v)
      pv[ctx.views[v].name] = pe.positive[v].empty() ? J{{"positive_auc", nullptr}, {"negative_auc", nullptr}}
                                                     : J{{"positive_auc", trapezoid_auc(f, pe.positive[v])},
                                                         {"negative_auc", trapezoid_auc(f, pe.negative[v])}};
    e["perturbation"] = {{"target", pe.target}, {"random_auc", trapezoid_auc(f, pe.random)}, {"views", pv}};
  }
  return e;
}

// summary.class_pointing (null without two-item images).
J class_pointing_json(const EvalContext& ctx, const Summary& sum) {
  if (!sum.item_images) return nullptr;
  J views = J::object();
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const ClassRow& r = sum.class_rows[v];
    const bool any = r.items > 0;
    J e = {{"asked", any ? J(r.asked) : J()}, {"other", any ? J(r.other) : J()},
           {"all_items", r.images ? J(r.all) : J()}, {"class_specific", ctx.views[v].class_specific},
           {"margin_asked", any ? J(r.asked - best_asked_baseline(sum)) : J()}};
    add_undefined(e, r.undefined, "items", r.why);
    views[ctx.views[v].name] = e;
  }
  return {{"images", sum.item_images}, {"items", sum.items}, {"views", views},
          {"centre_prior", {{"asked", sum.centre_class.asked}, {"other", sum.centre_class.other}, {"all_items", sum.centre_class.all}}},
          {"random_asked", sum.random_asked}, {"best_asked", best_asked_baseline(sum)}};
}

// summary.perturbation (null without --perturb).
J perturbation_json(const EvalContext& ctx, const Summary& sum) {
  if (!sum.perturbed) return nullptr;
  const std::vector<double> f = perturbation_fractions();
  const double rnd = trapezoid_auc(f, sum.random);
  J views = J::object();
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const size_t n = sum.perturbed_n[v];
    const double p = trapezoid_auc(f, sum.pos[v]), ng = trapezoid_auc(f, sum.neg[v]);
    J e = {{"positive_auc", n ? J(p) : J()}, {"negative_auc", n ? J(ng) : J()},
           {"margin_positive", n ? J(rnd - p) : J()}, {"margin_negative", n ? J(ng - rnd) : J()},
           {"positive_curve", n ? J(sum.pos[v]) : J()}, {"negative_curve", n ? J(sum.neg[v]) : J()}};
    add_undefined(e, sum.perturbed - n, "images", sum.rows[v].why);
    views[ctx.views[v].name] = e;
  }
  return {{"mode", *ctx.opt->perturb == PerturbMode::Drop ? "drop" : "zero"}, {"target", "top-1"},
          {"fractions", f}, {"images", sum.perturbed}, {"forward_passes", sum.forwards}, {"seconds", sum.perturb_secs},
          {"cpu_seconds", sum.perturb_cpu}, {"random_seeds", std::max(1, ctx.opt->perturb_seeds)},
          {"random", {{"auc", rnd}, {"curve", sum.random}}}, {"views", views}};
}

// summary.sanity (null without --sanity).
J sanity_json(const EvalContext& ctx, const Summary& sum) {
  if (!sum.sanity_n) return nullptr;
  J views = J::object();
  for (size_t v = 0; v < ctx.views.size(); ++v) {
    const size_t n = sum.sanity_views_n[v];
    std::vector<double> r;
    for (const auto& row : sum.rho) r.push_back(row[v]);
    J e = {{"spearman", n ? J(r) : J()}, {"flagged", n ? J(r.back() > ctx.opt->sanity_flag) : J()}};
    add_undefined(e, sum.sanity_n - n, "images", sum.rows[v].why);
    views[ctx.views[v].name] = e;
  }
  J sn = {{"images", sum.sanity_n}, {"blocks_randomised_from_top", J::array()}, {"flag_above", ctx.opt->sanity_flag},
          {"seconds", sum.sanity_secs}, {"views", views}};
  for (size_t k = 1; k <= sum.rho.size(); ++k) sn["blocks_randomised_from_top"].push_back(k);
  return sn;
}

// A margin: {"baseline", "interval": [lo, hi], "beats_every_baseline"}.
J margin_json(const Margin& m) {
  return {{"baseline", m.baseline}, {"interval", {m.ci.lo, m.ci.hi}}, {"beats_every_baseline", m.beats_all}};
}

// summary.views: each view's means, margins over the best baselines, and the images it has no score on.
J summary_views_json(const EvalContext& ctx, const Summary& sum) {
  J views = J::object();
  for (size_t v = 0; v < ctx.views.size() && sum.n; ++v) {
    const Row& r = sum.rows[v];
    J e = {{"pointing_game", r.n ? J(r.pointing) : J()},
           {"energy_in_mask", r.n ? J(r.energy) : J()},
           {"energy_ratio", r.n ? J(r.ratio) : J()},
           {"energy_ratio_per_image", r.n ? J(r.ratio_img) : J()},
           {"margin_pointing", r.n ? J(r.pointing_margin.value) : J()},
           {"margin_energy", r.n ? J(r.energy_margin.value) : J()},
           {"margin_pointing_over", r.n ? margin_json(r.pointing_margin) : J()},
           {"margin_energy_over", r.n ? margin_json(r.energy_margin) : J()},
           {"max_over_mean", r.n ? J(r.peak) : J()},
           {"flat", r.n ? J(r.flat) : J()}};
    add_undefined(e, r.undefined, "images", r.why);
    views[ctx.views[v].name] = e;
  }
  return views;
}

// The texts as the classes: render's record (texts, templates, vocabulary, rules, truncate, files) with where
// the texts came from, how many, and each text's prompts (one per template, as the text tower read them).
J texts_json(const EvalContext& ctx) {
  const TextSpec& t = ctx.opt->view.text;
  J z = zero_shot_settings(*ctx.model);  // with "score_rule": "sigmoid" for a SigLIP's texts
  z["classes"] = "texts";
  z["from"] = t.truth_names ? "ground truth" : t.labels_as_texts ? "labels" : "text";
  z["count"] = ctx.model->hp.labels.size();
  J prompts = J::array();
  std::vector<std::string> templates = text_templates(ctx);
  if (templates.empty()) templates = {"{}"};  // the texts alone
  for (const std::string& x : ctx.model->hp.labels) {
    J each = J::array();
    for (const std::string& tm : templates) each.push_back(fill_template(tm, x));
    prompts.push_back(each);
  }
  z["prompts"] = prompts;
  return z;
}

// The summary object of the JSON.
J summary_json(const EvalContext& ctx, const Summary& sum, const EvalRun& run, bool classify) {
  J s;
  s["images"] = sum.n;
  s["failed"] = run.failed;
  s["mask_area_share"] = sum.area;
  if (!classify)
    s["top1"] = J();
  else if (!sum.top1_not_computed.empty())  // another label set: nothing counted
    s["top1"] = J{{"correct", J()}, {"labelled", J()}, {"accuracy", J()},
                  {"not_computed", spelled_settings(sum.top1_not_computed)},
                  {"unknown_labels", sum.unknown_labels}};
  else
    s["top1"] = J{{"correct", sum.correct},
                  {"labelled", sum.labelled},
                  {"accuracy", sum.labelled ? J(static_cast<double>(sum.correct) / sum.labelled) : J()}};
  if (classify && has_text_classes(*ctx.model)) s["top1"]["over_texts"] = ctx.model->num_classes();  // zero-shot
  s["views"] = summary_views_json(ctx, sum);
  s["explain"] = ctx.class_specific ? J{{"target", "top-1"},
                                        {"gradcam_layer", ctx.settings.gradcam_layer},
                                        {"attn_grad_layer", ctx.settings.attn_grad_layer}}
                                    : J(nullptr);
  s["baselines"] = {{"uniform_energy", sum.area},
                    {"centre_prior", {{"pointing_game", sum.centre.pointing}, {"energy_in_mask", sum.centre.energy}}},
                    {"brightness", {{"pointing_game", sum.bright.pointing}, {"energy_in_mask", sum.bright.energy}}},
                    {"random_pointing_game", sum.random_pointing},
                    {"best_pointing", best_pointing_baseline(sum)},
                    {"best_pointing_name", best_pointing_baseline_name(sum)},
                    {"best_energy", best_energy_baseline(sum)},
                    {"best_energy_name", best_energy_baseline_name(sum)}};
  const std::optional<size_t> bp = best_pointing_view(sum), be = best_energy_view(sum);
  s["best_pointing_view"] = bp ? J(ctx.views[*bp].name) : J();
  s["best_energy_view"] = be ? J(ctx.views[*be].name) : J();
  J flat = J::array();
  for (size_t v = 0; v < ctx.views.size() && sum.n; ++v)
    if (sum.rows[v].flat) flat.push_back(ctx.views[v].name);
  s["flat_views"] = flat;
  s["margins"] = {{"bootstrap_resamples", kBootstrapResamples}, {"seed", kBootstrapSeed}, {"level", kBootstrapLevel},
                  {"flat_below_max_over_mean", kFlatPeakToMean}};
  s["class_pointing"] = class_pointing_json(ctx, sum);
  s["perturbation"] = perturbation_json(ctx, sum);
  s["sanity"] = sanity_json(ctx, sum);
  return s;
}

}  // namespace

J eval_json(const EvalContext& ctx, const std::string& weights_path, const Summary& sum, const EvalRun& run,
            bool classify) {
  const EvalOptions& opt = *ctx.opt;
  const RenderOptions& ro = opt.view;
  J j;
  const std::optional<HubRef>& hub = ctx.model->hub;
  j["weights"] = hub ? hub->repo : weights_path;  // a Hub name as render's record names it
  if (hub) j["hub"] = hub_ref_json(*hub);
  j["masks"] = opt.masks_dir;
  j["tolerance_px"] = opt.tolerance_px;
  j["upsample"] = ro.upsample == Upsample::Nearest   ? "nearest"
                  : ro.upsample == Upsample::Bicubic ? "bicubic"
                                                     : "bilinear";
  j["resize"] = ro.resize == ResizeMode::Crop ? "crop" : "squash";
  if (!ro.labels_file.empty()) j["labels"] = ro.labels_file;  // the class names, or the map of the truth's names
  if (has_text_classes(*ctx.model)) j["zero_shot"] = texts_json(ctx);  // only then: a run without texts as before
  if (ro.size) {  // only then: the JSON of a run without --size is as before
    const HParams& hp = ctx.model->hp;
    j["size"] = {hp.image_w, hp.image_h};
    j["pos_interp"] = spelled_settings(hp.source.at("pos_interp"));
  }
  j["selected_view"] = ctx.views[ctx.selected].name;
  j["query"] = ctx.model->hp.query_name();  // whose attention row the maps are: "class token" or "mean over patch queries"
  j["summary"] = summary_json(ctx, sum, run, classify);
  J imgs = J::array();
  for (const auto& ev : run.done) imgs.push_back(image_json(ctx, ev));
  j["images"] = imgs;
  j["errors"] = run.errors;
  return j;
}

}  // namespace eval
}  // namespace attnmap
