// evaluate.hpp - localisation metrics of an attention map against a ground-truth object mask, and the
// ground-truth class of an image (labels.csv or its file name). Pure functions; no I/O except the readers.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/image_io.hpp"
#include "maps/upsample.hpp"
#include "model/preprocess.hpp"

namespace attnmap {

/// A binary object mask at image resolution: inside[y * width + x] is 1 on the object, else 0.
struct Mask {
  int width = 0, height = 0;
  std::vector<uint8_t> inside;  ///< (height, width), values 0 / 1
  bool grey_levels = false;     ///< the file held more than one non-zero value (e.g. a JPEG): worth a note
};

/// Makes a mask from a decoded image (load_image: grey, palette, RGBA... all become RGB): a pixel is inside
/// when any of its R, G, B values is non-zero. Throws attnmap::Error naming `what` for an empty image.
Mask mask_from_image(const Image& img, const std::string& what);

/// Share of the mask's pixels that are inside: |mask| / (width * height), in [0, 1]. This is the expected
/// energy-in-mask of a uniform map, the baseline energy_in_mask is compared against.
double mask_area_share(const Mask& mask);

/// The first maximum of a (h, w) map in row-major order (as numpy/torch argmax), returned as the flat index
/// y * w + x. NaN values are never the maximum. Throws attnmap::Error for an empty map or one of only NaNs.
size_t argmax_pixel(const std::vector<float>& map);

/// Pointing game (Zhang et al. 2016, "Top-down Neural Attention by Excitation Backprop", ECCV): a hit when
/// the map's maximum point (argmax_pixel; ties: the first in row-major order) lies on the object. With
/// `tolerance_px` > 0 it is also a hit when a mask pixel lies within that Euclidean distance (pixels) of the
/// maximum point, i.e. the mask is dilated by a disc, as the paper's 15-pixel tolerance margin (also
/// TorchRay's `PointingGame(tolerance=15)`); 0 counts only the pixel itself.
/// `map` is (mask.height, mask.width) at image resolution, values in any unit.
/// Throws attnmap::Error when the sizes differ, tolerance_px < 0, or the map is empty / all NaN.
bool pointing_game(const std::vector<float>& map, const Mask& mask, int tolerance_px = 0);

/// Energy-in-mask: the share of the map's mass that falls on the object, sum(map * mask) / sum(map), in
/// [0, 1] (the energy-based pointing game of Wang et al. 2020, "Score-CAM: Score-Weighted Visual
/// Explanations for Convolutional Neural Networks", CVPR workshops, there with bounding boxes; here with
/// the object's pixel mask). A uniform map scores mask_area_share(mask). `map` is (mask.height,
/// mask.width), non-negative (e.g. attention probabilities upsampled without overshoot).
/// Throws attnmap::Error when the sizes differ, a value is negative or not finite, or the map sums to 0.
double energy_in_mask(const std::vector<float>& map, const Mask& mask);

/// Why a map (any shape) has no localisation score, or "" when it has one: "the map is not finite" (a NaN or
/// infinite value), "the map sums to 0" (e.g. a class-specific map when no gradient reaches the blocks: a
/// classifier head whose weights are 0), "the map has a negative value". Pointing game and energy-in-mask
/// of such a map are undefined (energy_in_mask throws for it).
std::string map_score_undefined(const std::vector<float>& map);

/// A two-sided percentile interval [lo, hi].
struct Interval {
  double lo = 0, hi = 0;
};

/// SplitMix64 (Steele, Lea & Flood 2014, "Fast splittable pseudorandom number generators", OOPSLA; the
/// reference code of Vigna's xoshiro page): advances *state by 0x9e3779b97f4a7c15 and returns the mixed
/// value. The bootstrap's index stream, chosen because a NumPy script can reproduce it exactly.
uint64_t splitmix64(uint64_t* state);

/// Percentile bootstrap interval of the mean of `x` (Efron & Tibshirani 1993, ch. 13): `resamples`
/// resamples of x.size() values drawn with replacement (index = splitmix64(&state) % n, state starting at
/// `seed`, n draws per resample in order), each resample's mean; the interval is their (1 - level) / 2 and
/// (1 + level) / 2 quantiles, linearly interpolated between order statistics as numpy.percentile's default
/// ("linear": position q (B - 1) in the sorted means). eval uses it with x = per-image differences of a
/// view's score from a baseline's, 2000 resamples, seed 28, level 0.95. Reference: tools/make_eval_flags_fixtures.py.
/// Throws attnmap::Error for an empty x, resamples < 2 or level outside (0, 1).
Interval bootstrap_interval(const std::vector<double>& x, int resamples = 2000, uint64_t seed = 28,
                            double level = 0.95);

/// The median of x (the mean of the two middle values for an even count, as numpy.median). Throws
/// attnmap::Error for an empty x.
double median(std::vector<double> x);

/// How far a map is from uniform: its maximum over its mean, max(map) / mean(map) (1 for a flat map; the
/// peak over the value every pixel would have if the map were spread evenly). Any shape, values >= 0
/// expected. Returns 0 when the mean is not positive or a value is not finite (no peak to speak of).
double peak_to_mean(const std::vector<float>& map);

/// Places a (gh, gw) patch-grid map on the photo's pixels: upsampled with `mode` (upsample_map, no
/// overshoot) to the pixel box the model saw (`box`, from preprocess; the whole photo with --resize squash)
/// and zero outside that box. Returns (photo_h, photo_w).
std::vector<float> map_to_photo(const std::vector<float>& map, int gw, int gh, const Box& box, int photo_w,
                                int photo_h, Upsample mode);

/// Lower-cases a class name and keeps only its letters and digits, so that "T-shirt/top", "t_shirt_top" and
/// "TShirt Top" compare equal. (UTF-8 bytes above 127 are kept as they are.)
std::string normalise_label(const std::string& s);

/// The index of `name` in `labels` compared by normalise_label, or nothing.
std::optional<int> find_label(const std::vector<std::string>& labels, const std::string& name);

/// A user's map of ground-truth names to the model's classes (read_label_map, resolve_label_map):
/// normalise_label(name) -> class index, or nothing for a name the user says has no counterpart among them.
using LabelMap = std::map<std::string, std::optional<int>>;

/// What a ground-truth name stands for: looked up in `map` first (by normalise_label), then among the model's
/// class names `labels` (find_label). `known` is false when neither has it: the name is of another label set.
struct LabelMatch {
  std::optional<int> cls;  ///< the class; nothing when unknown, or mapped to no class
  bool known = false;
};
LabelMatch match_label(const std::string& name, const std::vector<std::string>& labels, const LabelMap& map = {});

/// The class name an image's file name carries: the file stem without a leading run of digits and one
/// separator ("0003_coat.png" -> "coat", "0006_ankle_boot.png" -> "ankle_boot", "cat.jpg" -> "cat").
/// `numbered` (when given) is set when the stem had that numbered form and the rest starts with a letter
/// (the dataset convention NNNN_<class>: such a name is meant as a class; "cat.jpg" or "2024-05-01_x.jpg" not).
std::string filename_label(const std::string& path, bool* numbered = nullptr);

/// The class named by an image's file name (filename_label), looked up in `labels` with find_label.
/// Nothing when it names no class.
std::optional<int> label_from_filename(const std::string& path, const std::vector<std::string>& labels);

/// One row of a labels.csv: the "label" and "label_index" fields as written ("" when absent or empty) and
/// the row's line number (of its first line).
struct LabelRow {
  std::string label, index;
  int line = 0;
};

/// The rows of a labels.csv (header row required; RFC 4180 quoting) by image file name as written: a column
/// "file" (or "filename", "image"; else the first column) and a column "label" (or "class": a class name)
/// and/or "label_index" (or "class_index": a 0-based index into the head's outputs). Throws attnmap::Error
/// naming the file and line for a malformed file: no header, neither label column, a label_index that is not
/// an integer, a row without a file name.
std::map<std::string, LabelRow> read_label_rows(const std::string& path);

/// The class of a labels.csv row (`where`: "FILE: line N: " for its notes). Its label is matched by
/// match_label; a label that is not known gives no class and sets `*unknown` - its label_index is not used
/// in its place, since a label set the model does not have numbers its classes its own way - unless the
/// model's classes have no names at all (`labels` empty), where label_index is the only link. Without a
/// label, label_index in 0..num_classes-1. Notes (when given): a label found among `labels` whose
/// label_index is another class (the label is used; not for a label found in `map`, whose label_index is of
/// the user's label set), a label_index out of range.
std::optional<int> row_class(const LabelRow& row, const std::vector<std::string>& labels, const LabelMap& map,
                             int num_classes, const std::string& where, bool* unknown,
                             std::vector<std::string>* notes = nullptr);

/// Ground-truth classes from a labels.csv (read_label_rows, each row by row_class against `labels`):
/// file name (as written) -> class index. Rows naming no known class are left out, each with a line in
/// `notes` (when given) naming the file, line and value, so a typo shows. Throws as read_label_rows.
std::map<std::string, int> read_labels_csv(const std::string& path, const std::vector<std::string>& labels,
                                           int num_classes, std::vector<std::string>* notes = nullptr);

/// One entry of a label map file: the user's name and the model class it stands for, by name or by index,
/// or neither (no counterpart: its images count as having no known class).
struct LabelMapEntry {
  std::string name;
  std::optional<std::string> class_name;
  std::optional<long long> class_index;
  std::string where;  ///< "FILE: line 3" / "FILE: \"bag\"": for messages
};

/// The entries of `path` when it is a label map, mapping a user's ground-truth names to a model's classes:
/// a JSON object whose keys are names, not class indices ({"Bag": "purse", "Sneaker": 770, "Trouser":
/// null}), or a CSV whose header has the columns "label" and "class" (a class name) and/or "class_index";
/// an empty class field is no counterpart. Nothing when the file is a list of class names instead
/// (checkpoint/labels.hpp read_labels_file's formats: one name a line, a JSON list, an object keyed "0".."C-1"
/// or holding "id2label"). Throws attnmap::Error naming the file: unreadable, malformed JSON or CSV, a value
/// that is neither a name, an integer nor null.
std::optional<std::vector<LabelMapEntry>> read_label_map(const std::string& path);

/// The map of `entries` against the model's class names `labels` (num_classes outputs). Throws
/// attnmap::Error naming the entry: a class name that is not one of `labels`, an index outside
/// 0..num_classes-1, a name given twice for different classes, an empty name.
LabelMap resolve_label_map(const std::vector<LabelMapEntry>& entries, const std::vector<std::string>& labels,
                           int num_classes);

}  // namespace attnmap
