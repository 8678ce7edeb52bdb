// eval_run.cpp - eval: the run's views (the default list, or a view list) and the run itself (model, inputs,
// masks, every image in order, the summary, the JSON report); eval.hpp.
#include "engine/eval/eval.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "engine/batch_hooks.hpp"
#include "engine/paths.hpp"
#include "engine/session.hpp"
#include "engine/text/zero_shot.hpp"
#include "engine/walk.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "engine/eval/eval_parts.hpp"
#include "maps/evaluate.hpp"
#include "model/pos_embed.hpp"
#include "model/sgemm.hpp"
#include "model/vit.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

// Adds `spec` resolved to `views` unless a view of that name is there already; returns its index.
size_t add_view(std::vector<ResolvedView>& views, const ViewSpec& spec, const ViTWeights& model,
                const ViewSettings& settings) {
  ResolvedView r = resolve_views({spec}, model.hp, model.has_classes(), settings).front();
  for (size_t i = 0; i < views.size(); ++i)
    if (views[i].name == r.name) return i;
  views.push_back(std::move(r));
  return views.size() - 1;
}

// The selected view of --layer / --head / --rollout [--discard] (or the config's default) as a view: "L1/h3",
// "rollout" (every block, mean, no discard), "rollout/max@L2 discard 0.1" (its own discard, beside the
// standard rollout).
ViewSpec selected_spec(const SelectedView& sel, const EvalOptions& opt) {
  if (!opt.view.rollout) return every_layer_views(sel.layer + 1, sel.head).back();
  ViewSpec v;
  v.kind = ViewKind::Rollout;
  v.layer = sel.layer;
  v.head = sel.head;
  if (opt.view.discard > 0.0) v.discard = opt.view.discard;
  v.written = "rollout/" + fusion_name(sel.head, "h") + "@L" + std::to_string(sel.layer);
  return v;
}

// The default list: every block x fusion, the selected view, "rollout", and with `explain` chefer, gradcam and
// attn-grad (their blocks from ctx.settings).
void default_views(EvalContext& ctx, const SelectedView& sel, bool explain) {
  const ViTWeights& model = *ctx.model;
  const EvalOptions& opt = *ctx.opt;
  const int depth = model.hp.depth;
  const std::vector<HeadSelect> fusions = opt.fusions.empty() ? std::vector<HeadSelect>{HeadSelect{}} : opt.fusions;
  for (int l = 0; l < depth; ++l)
    for (const HeadSelect& h : fusions) {
      try {
        add_view(ctx.views, every_layer_views(depth, h)[static_cast<size_t>(l)], model, ctx.settings);
      } catch (const Error& e) {
        throw Error(setting_ref("fusions") + ": " + e.what());
      }
    }
  ctx.selected = add_view(ctx.views, selected_spec(sel, opt), model, ctx.settings);
  ViewSpec v;
  v.kind = ViewKind::Rollout;
  v.layer_given = false;
  v.written = "rollout";
  add_view(ctx.views, v, model, ctx.settings);
  if (!explain) return;  // the note saying why is printed before the first image
  for (const ViewSpec& m : class_specific_views()) add_view(ctx.views, m, model, ctx.settings);
}

// --fusions, --rollout and --head name views themselves: beside --views they are refused, in one line.
void refuse_beside_views(const EvalOptions& opt) {
  if (!opt.fusions.empty())
    throw Error(setting_ref("fusions") + " does not apply with " + setting_ref("views") +
                ": name each fusion in the list (L3/mean,L3/max,L3/h1)");
  if (opt.view.rollout)
    throw Error(setting_ref("rollout") + " does not apply with " + setting_ref("views") +
                ": name the rollout in the list (rollout, rollout@L2, rollout/max)");
  if (opt.view.head)
    throw Error(setting_ref("head") + " does not apply with " + setting_ref("views") +
                ": name the fusion in the view (L2/max, L2/h3, rollout/max)");
}

// --views LIST (parsed by the options layer): "photo" refused; every error names the option.
std::vector<ResolvedView> named_views(const ViTWeights& model, const std::vector<ViewSpec>& specs,
                                      const ViewSettings& settings) {
  try {
    for (const ViewSpec& v : specs)
      if (v.kind == ViewKind::Photo) throw Error("'photo' is a column of `attnmap figure`; eval scores maps");
    return resolve_views(specs, model.hp, model.has_classes(), settings);
  } catch (const Error& e) {
    throw Error(setting_ref("views") + ": " + e.what());
  }
}

// --layer, --discard and --gradcam-layer beside --views each set one kind of view; with none, refused.
void check_view_settings_used(const std::vector<ResolvedView>& views, const EvalOptions& opt) {
  auto any = [&views](bool (*pred)(const ResolvedView&)) { return std::any_of(views.begin(), views.end(), pred); };
  if (opt.view.layer &&
      !any([](const ResolvedView& v) { return v.spec.kind == ViewKind::AttnGrad && !v.spec.layer_given; }))
    throw Error(setting_ref("layer") + " does not apply to " + setting_ref("views") +
                ": name the block in the view (L2/mean, rollout@L2, attn-grad@L2); " + setting_ref("layer") +
                " chooses only attn-grad's block");
  if (opt.view.discard > 0.0 && !any([](const ResolvedView& v) { return v.spec.kind == ViewKind::Rollout; }))
    throw Error(setting_ref("discard") + " applies to the rollout views only: add rollout to " + setting_ref("views"));
  if (opt.view.gradcam_layer &&
      !any([](const ResolvedView& v) { return v.spec.kind == ViewKind::GradCam && !v.spec.layer_given; }))
    throw Error(setting_ref("gradcam_layer") + " applies to the gradcam view without @L<layer> only: add gradcam to " +
                setting_ref("views"));
}

}  // namespace

EvalContext make_eval_context(const ViTWeights& model, const EvalOptions& opt) {
  const HParams& hp = model.hp;
  EvalContext ctx;
  ctx.model = &model;
  ctx.opt = &opt;
  if (opt.tolerance_px < 0) throw Error(setting_ref("tolerance") + " must be >= 0 pixels");
  const bool named = !opt.view.views.empty();
  if (named) refuse_beside_views(opt);
  const SelectedView sel = select_view(hp, opt.view);
  const std::string unavailable = explanations_unavailable(hp, model.has_classes());  // a head, or CLIP's texts
  if (!named && !unavailable.empty() && opt.view.gradcam_layer)
    throw Error(setting_ref("gradcam_layer") + ": eval scores no gradcam view: " + unavailable);
  try {
    ctx.settings.gradcam_layer = resolve_layer(opt.view.gradcam_layer.value_or(-1), hp.depth);
  } catch (const Error& e) {
    throw Error(setting_ref("gradcam_layer") + ": " + e.what());
  }
  ctx.settings.attn_grad_layer = sel.layer;
  if (named) {
    ctx.settings.discard = opt.view.discard;  // the rollout views of the list (the default list: their own)
    ctx.views = named_views(model, opt.view.views, ctx.settings);
    check_view_settings_used(ctx.views, opt);
    ctx.selected = 0;
  } else {
    default_views(ctx, sel, unavailable.empty());
  }
  for (const ResolvedView& v : ctx.views) {
    ctx.class_specific = ctx.class_specific || v.class_specific;
    ctx.keep_full = ctx.keep_full || v.spec.kind == ViewKind::Rollout || has_token_query(v);
  }
  if (opt.sanity)  // cascading: the top k blocks re-initialised, k = 1..depth (fixed seed)
    for (int k = 1; k <= hp.depth; ++k) ctx.randomised.push_back(randomise_blocks(model, hp.depth - k, 20181));
  return ctx;
}

namespace {

// --masks must name a folder, and not one of the input folders: masks beside the images in the same folder
// would score every image against itself.
void check_masks_folder(const EvalOptions& opt) {
  const RenderOptions& ro = opt.view;
  if (opt.masks_dir.empty()) throw Error(setting_ref("masks") + " is required");
  std::error_code ec;
  if (!fs::is_directory(opt.masks_dir, ec))
    throw Error(setting_ref("masks") + " " + opt.masks_dir +
                (fs::exists(opt.masks_dir, ec) ? ": not a folder (name the folder that holds the masks)" : ": no such folder"));
  const std::string masks_canon = canonical_or_empty(opt.masks_dir);
  for (const std::string& in : ro.inputs) {
    if (!masks_canon.empty() && fs::is_directory(in, ec) && canonical_or_empty(in) == masks_canon)
      throw Error(setting_ref("masks") + " " + opt.masks_dir + " is also an input folder (" + in +
                  "); keep the masks in a folder of their own, e.g. DIR/masks");
  }
}

// One image at a time: every core for its products (capped by the user's OPENBLAS_NUM_THREADS), as render -j 1.
void set_eval_blas_threads() {
  const int blas = blas_threads_to_set(1, usable_cores(), std::getenv("OPENBLAS_NUM_THREADS"), std::getenv("OMP_NUM_THREADS"));
  set_blas_threads(blas);
}

// Where --json writes.
struct JsonTarget {
  std::string path;               // resolved: what is checked is what is written
  std::vector<std::string> made;  // folders made for it, deepest first: removed when no JSON is written
};

// --json must not replace a file this run reads (an input, a mask, a labels.csv, the weights or their side
// configs); checked, and a missing folder made, before any image is evaluated. Empty without --json.
JsonTarget prepare_json(const EvalOptions& opt, const std::string& weights_path, const std::vector<Job>& jobs,
                        const eval::MaskIndex& masks) {
  JsonTarget json;
  if (opt.json_out.empty()) return json;
  std::vector<ReadFile> reads = model_reads(weights_path);
  for (const std::string& in : opt.view.inputs) reads.push_back({in, "an input"});
  std::set<fs::path> truth_dirs{fs::path(opt.masks_dir)};  // where a labels.csv would be read (the class truth)
  for (const Job& j : jobs) {
    reads.push_back({j.input, "an input"});
    truth_dirs.insert(eval::truth_folders(opt.masks_dir, j.input)[1]);
  }
  for (const auto& kv : masks.by_rel)
    for (const std::string& f : kv.second) reads.push_back({f, "a mask"});
  for (const fs::path& d : truth_dirs) reads.push_back({(d / eval::kLabelsCsv).string(), "a labels.csv that eval reads"});
  if (!opt.view.labels_file.empty()) reads.push_back({opt.view.labels_file, "the " + setting_ref("labels") + " file"});
  json.path = check_output_file(setting_ref("json"), opt.json_out, reads);
  json.made = make_output_folder(setting_ref("json"), opt.json_out, json.path);
  return json;
}

// Writes the --json document; false (the error printed, the folders made for it removed) when it fails.
bool write_eval_json(const JsonTarget& json, const nlohmann::ordered_json& j, const BatchHooks& hooks) {
  try {
    // File names are bytes; one that is not UTF-8 gets U+FFFD in the JSON (as in render's manifest).
    const std::string text = j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    write_file_atomic(json.path, std::vector<uint8_t>(text.begin(), text.end()));
  } catch (const std::exception& e) {
    say(hooks, LineStream::Err, "attnmap: error: " + printable(e.what()));
    remove_made_folders(json.made);
    return false;
  }
  return true;
}

// Inputs plan_jobs could not use: an error line and a JSON error entry each, counted as failed.
void report_unusable_inputs(const std::vector<std::string>& missing,
                            const std::vector<std::pair<std::string, std::string>>& unreadable, eval::EvalRun& run,
                            const BatchHooks& hooks) {
  for (const auto& m : missing) {
    say(hooks, LineStream::Err, "attnmap: error: " + printable(m) + ": no such file or folder");
    run.errors.push_back({{"file", m}, {"error", "no such file or folder"}});
    ++run.failed;
  }
  for (const auto& u : unreadable) {
    say(hooks, LineStream::Err, "attnmap: error: " + printable(u.second));
    run.errors.push_back({{"file", u.first}, {"error", u.second}});
    ++run.failed;
  }
}

std::string with_path(const std::string& input, const std::string& msg) {
  return msg.compare(0, input.size(), input) == 0 ? msg : input + ": " + msg;
}

// Evaluates every job in order into run.done; an image that fails is reported and counted in run.
void evaluate_jobs(const EvalContext& ctx, const std::vector<Job>& jobs, const eval::MaskIndex& masks,
                   eval::TruthLookup& truth, int num_classes, eval::EvalRun& run, const BatchHooks& hooks) {
  const EvalOptions& opt = *ctx.opt;
  const std::string masks_canon = canonical_or_empty(opt.masks_dir);
  const std::string masks_prefix = masks_canon.empty() ? std::string() : (fs::path(masks_canon) / "").string();
  const auto t0 = std::chrono::steady_clock::now();
  bool noted_headless_items = false;
  for (const Job& job : jobs) {
    try {
      const std::string mask_path = eval::mask_for_job(job, opt.masks_dir, masks_prefix, masks);
      const fs::path rel = fs::path(job.out_base).lexically_relative(opt.masks_dir);
      const std::string stem = fs::path(job.input).stem().string();
      const std::vector<ItemMask> items = masks.find_items(rel.generic_string(), stem, ctx.model->hp.labels, truth.map());
      if (!ctx.model->has_classes() && !noted_headless_items && masks.has_item_masks(rel.generic_string(), stem)) {
        say(hooks, LineStream::Err, "attnmap: note: class-specific pointing: item masks such as " + printable(stem) +
                                        ".<class>.* are present, but the model has no classifier head (no class to ask "
                                        "for); skipped");
        noted_headless_items = true;
      }
      ImageEval ev = evaluate_image(ctx, job.input, mask_path, items, truth.truth_for(job.input));
      for (const auto& n : ev.notes) say(hooks, LineStream::Err, "attnmap: note: " + printable(job.input + ": " + n));
      if (!opt.view.quiet) say(hooks, LineStream::Out, printable(eval::image_line(ctx, ev, num_classes)));
      run.done.push_back(std::move(ev));
    } catch (const std::exception& e) {
      ++run.failed;
      say(hooks, LineStream::Err, "attnmap: error: " + printable(with_path(job.input, e.what())));
      run.errors.push_back({{"file", job.input}, {"error", spelled_settings(e.what())}});
    }
  }
  run.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The inputs eval walks (plan_jobs: folders sorted, hidden entries skipped, the masks folder given as its
// "output" folder so that it is skipped; out_base relative to it is the image's path below its input folder,
// without extension). Says the note on attnmap's own outputs passed over; throws when nothing is left to
// evaluate (bad usage, as render's nothing to render).
struct PlannedInputs {
  std::vector<Job> jobs;
  std::vector<std::string> missing;
  std::vector<std::pair<std::string, std::string>> unreadable;
};

PlannedInputs plan_inputs(const EvalOptions& opt, const BatchHooks& hooks) {
  const RenderOptions& ro = opt.view;
  PlannedInputs in;
  std::map<std::string, size_t> passed_over;  // attnmap's own outputs in the walked folders: not photos
  in.jobs = plan_jobs(ro.inputs, opt.masks_dir, &in.missing, {}, &in.unreadable, &passed_over);
  if (const std::string note = passed_over_summary(passed_over); !note.empty())
    say(hooks, LineStream::Err, "attnmap: note: " + printable(note));
  if (const std::string none = all_inputs_missing(ro.inputs, in.missing, "evaluate"); !none.empty()) throw Error(none);
  if (in.jobs.empty() && in.missing.empty() && in.unreadable.empty()) throw Error(no_images_message(ro.inputs));
  return in;
}

// "'bird', 'fish' and 2 more": the first five names of a list, quoted.
std::string quoted_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 5; ++i) out += (i ? ", '" : "'") + printable(names[i]) + "'";
  if (names.size() > 5) out += " and " + std::to_string(names.size() - 5) + " more";
  return out;
}

// --prompt without texts: the ground truth's class names (truth_class_names) are the texts. Throws when the
// inputs name no class.
std::vector<std::string> truth_texts(const EvalOptions& opt, const std::vector<Job>& jobs, const eval::MaskIndex& masks) {
  std::vector<std::string> names = eval::truth_class_names(opt.masks_dir, jobs, masks);
  if (names.empty())
    throw Error(setting_ref("prompt") + " without texts fills its {} with the class names of the ground truth, and " +
                opt.masks_dir + " names none (a labels.csv with a label column, item masks STEM.<class>.png, file " +
                "names NNNN_<class>.png); give the texts with " + setting_ref("text") + " or " + setting_ref("texts"));
  return names;
}

// With texts given (--text, --texts, --prompt with --labels FILE): every class the ground truth names must be a
// text (compared as eval compares labels: case, spaces and punctuation ignored); else a usage error naming them.
void check_truth_among_texts(const EvalOptions& opt, const std::vector<Job>& jobs, const eval::MaskIndex& masks,
                             const std::vector<std::string>& texts) {
  std::vector<std::string> missing;
  for (const std::string& n : eval::truth_class_names(opt.masks_dir, jobs, masks, texts)) {
    if (!find_label(texts, n)) missing.push_back(n);
    std::vector<std::string> alike;  // a class two texts name: either could be "right"; refused, not guessed
    for (const std::string& t : texts)
      if (normalise_label(t) == normalise_label(n)) alike.push_back(t);
    if (alike.size() > 1)
      throw Error(setting_ref("text") + ": the ground truth's class '" + n + "' is named by " +
                  std::to_string(alike.size()) + " texts (" + quoted_names(alike) + ", compared ignoring case, " +
                  "spaces and punctuation): its accuracy and pointing need one text per class; keep one of them");
  }
  if (missing.empty()) return;
  const std::string flag = opt.view.text.labels_as_texts ? setting_ref("labels") : setting_ref("text");
  throw Error(flag + ": the ground truth's class " + (missing.size() == 1 ? "name " : "names ") + quoted_names(missing) +
              (missing.size() == 1 ? " is" : " are") + " not among the " + std::to_string(texts.size()) + " texts (" +
              quoted_names(texts) + "; compared ignoring case, spaces and punctuation): each class the masks, " +
              eval::kLabelsCsv + " or file names name must be a text for its accuracy and its class-specific " +
              "pointing; add " + (missing.size() == 1 ? "it" : "them") + ", or give " + setting_ref("prompt") +
              " alone to make the ground truth's class names the texts");
}

}  // namespace

EvalResult eval_report(const EvalOptions& opt, const BatchHooks& given_hooks) {
  EvalResult res;
  BatchHooks hooks = given_hooks;  // the standard output's lines kept as the report's text too
  hooks.on_line = [&res, &given_hooks](LineStream stream, const std::string& text) {
    if (stream == LineStream::Out) res.text += spelled_settings(text) + "\n";  // as the terminal shows it
    if (given_hooks.on_line) given_hooks.on_line(stream, text);  // a blank line too: the report's separators
  };
  const RenderOptions& ro = opt.view;
  check_masks_folder(opt);
  if (!opt.json_out.empty()) check_output_name(setting_ref("json"), opt.json_out);  // before the model loads
  // --labels FILE: the model's class names, or a map of the ground truth's names to them (read_label_map).
  const std::optional<std::vector<LabelMapEntry>> label_map =
      ro.labels_file.empty() ? std::nullopt : with_prefix(setting_ref("labels"), [&] { return read_label_map(ro.labels_file); });
  RenderOptions load_opt = ro;
  if (label_map) load_opt.labels_file.clear();  // the class names stay the weights' (or ImageNet-1k's)
  if (label_map && ro.text.given())
    throw Error(setting_ref("labels") + " " + ro.labels_file + ": a map of ground-truth names to a classifier's " +
                "classes; with texts the classes are the texts, which the ground truth names directly (" +
                setting_ref("prompt") + " alone makes its class names the texts)");
  // --prompt without texts: the ground truth's class names fill it, so the inputs are planned before the model.
  std::optional<PlannedInputs> planned;
  std::optional<eval::MaskIndex> early_masks;
  if (ro.text.truth_names && ro.text.texts.empty()) {
    planned = plan_inputs(opt, hooks);
    early_masks.emplace(opt.masks_dir);
    load_opt.text.texts = truth_texts(opt, planned->jobs, *early_masks);
  }
  // A path, or a Hub name fetched into the cache; a model the program lends is only named.
  const RunWeights weights = hooks.model ? RunWeights{ro.weights, std::nullopt} : run_weights(ro.weights, ro.quiet, hooks);
  const std::string& weights_path = weights.path;
  const std::shared_ptr<const ViTWeights> loaded =
      hooks.model ? hooks.model(load_opt, true) : load_run_model(load_opt, weights, /*backward=*/true, hooks);
  const ViTWeights& model = *loaded;  // eval scores the class-specific views
  const EvalContext ctx = make_eval_context(model, opt);
  set_eval_blas_threads();
  const bool classify = model.has_classes();  // a classifier head, or CLIP's texts (zero-shot classes)
  const int num_classes = classify ? model.num_classes() : 0;
  if (label_map && !classify)
    throw Error(setting_ref("labels") + " " + ro.labels_file +
                ": the weights have no classifier head, so there are no classes to map to");
  LabelMap names_map;
  if (label_map)
    names_map = with_prefix(setting_ref("labels"), [&] { return resolve_label_map(*label_map, model.hp.labels, num_classes); });

  // Inputs (nothing to evaluate is bad usage: exit 2, before --json's folder is made).
  if (!planned) planned = plan_inputs(opt, hooks);
  const std::vector<Job>& jobs = planned->jobs;
  if (!early_masks) early_masks.emplace(opt.masks_dir);
  const eval::MaskIndex& masks = *early_masks;
  const bool text_classes = has_text_classes(model);
  if (text_classes && !ro.text.truth_names) check_truth_among_texts(opt, jobs, masks, model.hp.labels);
  const JsonTarget json = prepare_json(opt, weights_path, jobs, masks);
  // After the usage checks (a usage error is the only line), before any image.
  if (opt.perturb && !classify)
    say(hooks, LineStream::Err, "attnmap: note: " + setting_ref("perturb") +
                                    ": the model has no classifier head, so there is no class probability to perturb "
                                    "against; perturbation skipped");
  const std::string unavailable = explanations_unavailable(model.hp, classify);
  if (ro.views.empty() && !unavailable.empty())
    say(hooks, LineStream::Err, "attnmap: note: chefer, gradcam, attn-grad: " + unavailable + "; those views are left out");
  eval::TruthLookup truth(opt.masks_dir, model.hp, classify, num_classes, std::move(names_map),
                          label_map ? ro.labels_file : std::string(), text_classes);
  for (const std::string& line : truth.prepare(jobs)) say(hooks, LineStream::Err, line);  // before any image

  eval::EvalRun run;
  report_unusable_inputs(planned->missing, planned->unreadable, run, hooks);
  evaluate_jobs(ctx, jobs, masks, truth, num_classes, run, hooks);
  eval::Summary sum = eval::summarise(ctx, run.done);
  if (truth.foreign()) {
    sum.top1_not_computed = truth.foreign_note();
    sum.unknown_labels = truth.unknown_names();
  }
  const std::string undefined = eval::undefined_note(ctx, sum);
  if (!undefined.empty()) say(hooks, LineStream::Err, "attnmap: note: " + undefined);
  std::ostringstream summary;
  eval::print_summary(summary, ctx, sum, run.failed, classify);
  std::istringstream lines(summary.str());
  for (std::string line; std::getline(lines, line);) hooks.on_line(LineStream::Out, line);  // blank lines kept
  res.report = eval::eval_json(ctx, weights_path, sum, run, classify);
  res.status = run.failed || sum.n == 0 ? 1 : 0;
  if (!opt.json_out.empty() && !write_eval_json(json, res.report, hooks)) {
    res.status = 1;
    return res;
  }
  if (!ro.quiet) {
    char line[160];
    std::snprintf(line, sizeof line, "attnmap: %zu evaluated, %d failed, %.2f s", sum.n, run.failed, run.secs);
    say(hooks, LineStream::Err, line);
  }
  return res;
}

}  // namespace attnmap
