// eval_parts.hpp - what the engine/eval/ files share, used by eval alone (eval.hpp): the masks and class truth
// of the inputs (eval_inputs.cpp), a run's results and their means (eval_summary.cpp), and the tables and the
// JSON report (eval_report.cpp).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/eval/eval.hpp"
#include "maps/evaluate.hpp"

namespace attnmap {
namespace eval {

/// The class truth file eval reads (in the masks folder, else in the image's folder).
inline constexpr const char* kLabelsCsv = "labels.csv";

/// Where an input's class truth is looked up, in order: labels.csv in the masks folder, then in the image's
/// own folder.
std::array<std::filesystem::path, 2> truth_folders(const std::string& masks_dir, const std::string& input);

/// The masks of a folder (walked recursively), by relative path without extension ("sub/0003_coat") and by
/// bare stem ("0003_coat"); item masks STEM.<class>.* by the image's relative path and stem. Two masks for
/// one key (0003_coat.png and 0003_coat.bmp) are not guessed between: the image fails, naming both.
struct MaskIndex {
  std::map<std::string, std::vector<std::string>> by_rel, by_stem, items_by_rel, items_by_stem;

  explicit MaskIndex(const std::string& dir);
  /// Item masks of an image: STEM.<class>.<ext> whose <class> names one of `labels` (match_label: `map`
  /// first), found by relative path first, else by bare stem; in file-name order.
  std::vector<ItemMask> find_items(const std::string& rel_stem, const std::string& stem,
                                   const std::vector<std::string>& labels, const LabelMap& map = {}) const;
  /// The <class> of each item mask of an image (STEM.<class>.*, as written), found as find_items finds them.
  std::vector<std::string> item_names(const std::string& rel_stem, const std::string& stem) const;
  /// Some mask STEM.<anything> exists for the image (an item mask, whether or not <anything> is a class).
  bool has_item_masks(const std::string& rel_stem, const std::string& stem) const;
  /// The image's mask; rel_stem: its path below its input folder without extension. Throws attnmap::Error
  /// when several masks match.
  std::optional<std::string> find(const std::string& rel_stem, const std::string& stem) const;

 private:
  const std::vector<std::string>* item_files(const std::string& rel_stem, const std::string& stem) const;
};

/// The job's mask. Throws attnmap::Error for an image inside the masks folder (masks_prefix: the canonical
/// masks folder with a trailing '/', empty when unknown) or without a mask of its own.
std::string mask_for_job(const Job& job, const std::string& masks_dir, const std::string& masks_prefix,
                         const MaskIndex& masks);

/// Ground truth: labels.csv in the masks folder, else in the image's own folder; else the file name, its
/// names matched to the model's classes through the user's label map (eval --labels FILE holding a map),
/// then the model's class names (match_label). A labels.csv label is always meant as a class; file names of
/// the form NNNN_<name> are when some of them name a class (or a map is given), else they are just names. Every input's truth is found up front (prepare), so that a
/// label set that is not the model's is known before any image: then no image has a truth and top-1 accuracy
/// is not computed, rather than counted against classes the labels do not mean.
class TruthLookup {
 public:
  /// `map_file`: the --labels file the map came from ("" without one). `text_classes`: the model's classes are
  /// texts (a CLIP's zero-shot classes), named only: a labels.csv label_index is not read.
  TruthLookup(const std::string& masks_dir, const HParams& hp, bool classify, int num_classes, LabelMap map = {},
              std::string map_file = "", bool text_classes = false)
      : masks_dir_(masks_dir), hp_(hp), classify_(classify), num_classes_(num_classes), map_(std::move(map)),
        map_file_(std::move(map_file)), text_classes_(text_classes) {}
  /// Finds the truth of every job's input: reads the labels.csv files (their notes printed), and collects the
  /// names that are neither in the map nor among the model's classes. Nothing without a classifier head.
  /// Returns the notes to print (whole lines, "attnmap: note: ..."), said under -q too.
  std::vector<std::string> prepare(const std::vector<Job>& jobs);
  /// The input's class, if known: nothing without a head, for an input without a known class, and for every
  /// input when some ground-truth name is foreign (foreign()).
  std::optional<int> truth_for(const std::string& input) const;
  /// Some ground-truth name is neither in the map nor among the model's class names: accuracy is not computed.
  bool foreign() const { return !unknown_.empty(); }
  /// The names foreign() counts, in order of first appearance, each once.
  const std::vector<std::string>& unknown_names() const { return unknown_; }
  /// The one note of a foreign label set: the names (the first five, how many more), where they came from,
  /// whose class names they are not among, and how to map them (settings as core/setting_ref.hpp's references,
  /// spelled where the note is shown); "" when none is foreign.
  std::string foreign_note() const;
  const LabelMap& map() const { return map_; }

 private:
  const std::map<std::string, LabelRow>* csv_for(const std::filesystem::path& folder);
  void unknown(const std::string& name, const std::string& source);

  const std::string& masks_dir_;
  const HParams& hp_;
  const bool classify_;
  const int num_classes_;
  const LabelMap map_;
  const std::string map_file_;
  const bool text_classes_;
  std::map<std::string, std::optional<std::map<std::string, LabelRow>>> csv_cache_;
  std::map<std::string, std::optional<int>> truth_;  ///< by input
  std::vector<std::string> unknown_, unknown_keys_, sources_;
  std::vector<std::string> notes_;  ///< the labels.csv files' notes (printed by prepare unless foreign)
};

/// The class names eval's ground truth holds, for texts as the classes (a CLIP's zero-shot classes): each
/// input's labels.csv label (as TruthLookup finds it; label_index is not read), the <class> of its item masks
/// (STEM.<class>.*), and the numbered file names NNNN_<class> of the inputs without a label - these only when
/// there is no label or item mask at all, or when one of them names one of those or one of `texts` (else they
/// are just names, as TruthLookup takes them). A name from a file name has '_' read as a space ("ankle_boot" ->
/// "ankle boot"). One name per class (normalise_label: case, spaces and punctuation ignored), the labels.csv
/// spelling first, sorted by that normalised form. Throws attnmap::Error for a malformed labels.csv.
std::vector<std::string> truth_class_names(const std::string& masks_dir, const std::vector<Job>& jobs,
                                           const MaskIndex& masks, const std::vector<std::string>& texts = {});

/// What a run produced: the images evaluated, and the failures (counted, and as JSON error entries).
struct EvalRun {
  std::vector<ImageEval> done;
  int failed = 0;
  nlohmann::ordered_json errors = nlohmann::ordered_json::array();
  double secs = 0;  ///< evaluating the images
};

/// The bootstrap of the margins (bootstrap_interval): resamples, seed, level.
inline constexpr int kBootstrapResamples = 2000;
inline constexpr uint64_t kBootstrapSeed = 28;
inline constexpr double kBootstrapLevel = 0.95;
/// A view is flat when the median over images of its grid map's max/mean (peak_to_mean) is below this.
inline constexpr double kFlatPeakToMean = 1.25;

/// A view's margin over the best baseline on one metric: the mean over its images of (view - baseline) per
/// image, the baseline the one with the highest mean on those images, with its bootstrap interval; and
/// whether the interval's lower end is above 0 against every baseline (each with its own interval).
struct Margin {
  std::string baseline;  ///< "centre prior", "brightness", "random map" or "uniform map"
  double value = 0;
  Interval ci;
  bool beats_all = false;
};

/// One view's summary over the n images it has a score on: pointing = hits / n; energy = mean per-image
/// energy; ratio = energy / those images' mean mask area share (ratio of means); ratio_img = mean of
/// energy_i / area_i. `undefined` images (ViewScore::undefined; `why`: the first one's reason) are left out.
struct Row {
  double pointing = 0, energy = 0, ratio = 0, ratio_img = 0;
  size_t n = 0, undefined = 0;
  std::string why;
  Margin pointing_margin, energy_margin;  ///< over the best baseline (views only)
  double peak = 0;    ///< median over its images of peak_to_mean of the grid map (0: none had a peak)
  bool flat = false;  ///< 0 < peak < kFlatPeakToMean: the maps are nearly uniform
};

/// Class-specific pointing over the images with items: per view the share of items whose asked map peaks on
/// them (asked), on another item (other), and the share of images where every item is hit as asked (all);
/// over the items (and images) whose maps have a score: `undefined` items are left out, with their images.
struct ClassRow {
  double asked = 0, other = 0, all = 0;
  size_t items = 0, images = 0, undefined = 0;
  std::string why;
};

/// The means of a run.
struct Summary {
  size_t n = 0;      ///< images evaluated
  double area = 0;   ///< mean mask area share: the uniform baseline
  int labelled = 0, correct = 0;
  /// Why top-1 accuracy is not computed ("" when it is): the ground-truth names are not the model's classes.
  std::string top1_not_computed;
  std::vector<std::string> unknown_labels;  ///< those names
  std::vector<Row> rows;  ///< per view, in the order of ctx.views; zeros when n == 0
  Row centre;             ///< the centre prior's pointing and energy
  Row bright;             ///< the brightness baseline's (the photo's luma as the map)
  double random_pointing = 0;  ///< a random map's expected pointing
  // class-specific pointing
  size_t item_images = 0, items = 0;
  std::vector<ClassRow> class_rows;
  ClassRow centre_class;
  double random_asked = 0;  ///< mean asked-item area share
  // perturbation (mean curves over the images perturbed; per view over those it has a score on)
  size_t perturbed = 0;
  std::vector<size_t> perturbed_n;  ///< per view
  long forwards = 0;
  double perturb_secs = 0, perturb_cpu = 0;
  std::vector<std::vector<double>> pos, neg;  ///< per view, (10)
  std::vector<double> random;                 ///< (10)
  // sanity: mean Spearman, [k - 1][view], per view over the images it has a score on
  size_t sanity_n = 0;
  std::vector<size_t> sanity_views_n;  ///< per view
  std::vector<std::vector<double>> rho;
  double sanity_secs = 0;
};

/// The means of the images evaluated (Row, ClassRow, the perturbation's and the sanity's).
Summary summarise(const EvalContext& ctx, const std::vector<ImageEval>& done);

/// The best baselines over all images: pointing max(centre prior, brightness, random map), energy
/// max(uniform map, centre prior, brightness); and their names ("centre prior", ...).
double best_pointing_baseline(const Summary& s);
double best_energy_baseline(const Summary& s);
std::string best_pointing_baseline_name(const Summary& s);
std::string best_energy_baseline_name(const Summary& s);
/// The view named best on pointing (then energy) / on energy among those whose margin beats every
/// baseline beyond its interval; nothing when none does.
std::optional<size_t> best_pointing_view(const Summary& s);
std::optional<size_t> best_energy_view(const Summary& s);
/// Class-specific pointing's best baseline: max(centre prior asked, random map asked).
double best_asked_baseline(const Summary& s);

/// printf of one number into a string ("%.3f").
std::string fmt(const char* f, double v);

/// The per-image line: the selected view's hit and energy (or why it has none), and with a classifier the
/// top-5 and the truth.
std::string image_line(const EvalContext& ctx, const ImageEval& ev, int num_classes);

/// One note for the run naming the views that were undefined on some images, on how many and why, e.g.
/// "chefer, gradcam, attn-grad: no score on 24 of 24 images (the map sums to 0 ...)"; empty when none.
std::string undefined_note(const EvalContext& ctx, const Summary& s);

/// The summary on standard output (nothing when no image was evaluated): top-1, the table of views with
/// the baselines, and the class-specific pointing, perturbation and sanity tables when they ran.
void print_summary(std::ostream& out, const EvalContext& ctx, const Summary& s, int failed, bool classify);

/// The --json document: the run's settings, the summary, every image, every error. A score that is
/// undefined is null, with the count of images (or items) it is undefined on.
nlohmann::ordered_json eval_json(const EvalContext& ctx, const std::string& weights_path, const Summary& sum,
                                 const EvalRun& run, bool classify);

}  // namespace eval
}  // namespace attnmap
