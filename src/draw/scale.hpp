// scale.hpp - colour scales: the values a colour stands for (--scale), their "nice" ticks and tick labels.
#pragma once
#include <string>
#include <vector>

namespace attnmap {

/// The values the colours stand for: vmin is the colour map's first entry, vmax its last; values outside are
/// clipped. `units` names what the values are (e.g. "attention probability", "rollout mass") and is written
/// beside the colour bar. A scale with vmax - vmin <= 1e-12 * max(|vmin|, |vmax|) is flat: every value maps to
/// the first colour (normalize_minmax's rule for a constant map).
struct Scale {
  double vmin = 0.0;
  double vmax = 1.0;
  std::string units;
  /// Some value drawn on this scale lies above vmax and is drawn in the top colour (a robust --scale run, or
  /// fixed bounds below the data): colour bars draw an "extend" triangle at the top, as matplotlib's
  /// colorbar(extend='max').
  bool clip_max = false;
  bool flat() const;
};

/// --scale: map (each map its own min-max, today's overlays), figure (one scale over the maps of one
/// figure), run (one over every map of the run), fixed (VMIN,VMAX given).
enum class ScaleKind { Map, Figure, Run, Fixed };

struct ScaleSpec {
  ScaleKind kind = ScaleKind::Map;
  double vmin = 0.0, vmax = 1.0;  ///< Fixed only
};

/// Parses "map" | "figure" | "run" | "VMIN,VMAX" (two finite numbers, VMIN < VMAX). Throws attnmap::Error
/// quoting the value otherwise.
ScaleSpec parse_scale(const std::string& s);

/// min and max over every value of every map (NaN ignored); {0, 1} with units when there are no values.
Scale scale_over(const std::vector<const std::vector<float>*>& maps, const std::string& units);

/// The q-th percentile (q in [0, 100]) of the finite values of every map, numpy.percentile's default (linear
/// interpolation between the order statistics: rank q/100 x (n-1)); NaN when there is no finite value.
double percentile_over(const std::vector<const std::vector<float>*>& maps, double q);

/// The percentile --scale run takes as its top (kRunScalePercentile) and the part of the scale under which a
/// map's peak counts as dim for the run's warning (kDimPeakFraction).
inline constexpr double kRunScalePercentile = 99.0;
inline constexpr double kDimPeakFraction = 0.25;

/// --scale run's robust scale over a run's maps of one unit: vmin = the smallest value, vmax = the
/// kRunScalePercentile-th percentile of every value of every map (percentile_over), so that a few maps with
/// high peaks do not set the top for all (as xarray's robust=True takes the 2nd-98th percentiles); values above
/// are drawn in the top colour and clip_max is set when there are any. When that percentile is not above the
/// minimum (nearly all values equal) the maximum is taken instead. {0, 1} with units when there are no values.
Scale robust_scale_over(const std::vector<const std::vector<float>*>& maps, const std::string& units);

/// How many of `maps` have their largest value below `fraction` of the way up scale s (max < vmin + fraction
/// x (vmax - vmin)): maps drawn in the scale's bottom colours only. 0 for a flat scale.
size_t maps_peaking_below(const std::vector<const std::vector<float>*>& maps, const Scale& s, double fraction);

/// How much of the maps drawn on a scale lies above its top, drawn in the top colour (a colour bar's
/// over-range, matplotlib's extend='max'): the largest finite value, how many finite values (patch cells: each
/// covers the same share of its map's box) there are and how many of them exceed s.vmax.
struct ClipStats {
  double data_max = 0.0;  ///< the largest finite value; 0 when there is none
  size_t values = 0;      ///< finite values counted
  size_t above = 0;       ///< of them, values > s.vmax
  /// above / values: the share of the cells (so of the maps' pixels) above the bar's top; 0 without values.
  double share() const { return values ? static_cast<double>(above) / static_cast<double>(values) : 0.0; }
};

/// clip_stats over every value of every map against s.vmax (NaN and infinities left out).
ClipStats clip_stats(const std::vector<const std::vector<float>*>& maps, const Scale& s);

/// The share of a colour bar's cells above its top (ClipStats::share) past which `attnmap figure` says so on
/// the terminal: 0.5 %. A --scale run bar (top at the 99th percentile) clips up to 1 % by design, and those
/// are the peaks, so its figures are noted; a fixed top just under one hot patch is not.
inline constexpr double kClipNoteShare = 0.005;

/// The label of a clipping colour bar's top end (Scale::clip_max): vmax in units of 10^exponent (the ticks'
/// common exponent, tick_labels) with two significant digits, but at least `decimals` decimals (the tick
/// labels'), then "+": "0.076+" for 0.0757 beside ticks 0.01 .. 0.07; "7.6+" in units of 10^-3. A minus sign
/// is written as U+2212.
std::string over_range_label(double vmax, int exponent, int decimals);

/// The scale a map is drawn with under `spec`: Fixed -> its bounds; Map -> the map's own min-max; Figure
/// and Run -> `shared` (the caller computed it with scale_over over the figure's or the run's maps).
Scale resolve_scale(const ScaleSpec& spec, const std::vector<float>& map, const Scale& shared);

/// The map's values on the scale, in [0,1]: (v - vmin) / (vmax - vmin) in double, clipped; all 0 for a flat
/// scale. With vmin, vmax = the map's min-max this equals normalize_minmax bit for bit.
std::vector<float> apply_scale(const std::vector<float>& map, const Scale& s);

/// Tick values at "nice" steps (1, 2, 2.5, 5 times a power of ten, as matplotlib's MaxNLocator with
/// steps [1, 2, 2.5, 5, 10]) inside [vmin, vmax]: the smallest such step giving 4..7 ticks, else the step
/// whose tick count is nearest to that range. A flat scale gets one tick at vmin.
std::vector<double> nice_ticks(const Scale& s);

/// Tick sets from dense to sparse, for an axis too short for nice_ticks' labels (matplotlib's MaxNLocator
/// picks fewer ticks on a short axis): nice_ticks(s) first, then the ticks at every larger nice step (1, 2,
/// 2.5, 5 times a power of ten, up to the range) that puts at least two ticks in [vmin, vmax], step by step.
/// A caller takes the first set whose labels do not collide at its axis length. A flat scale: {{vmin}}.
std::vector<std::vector<double>> sparser_ticks(const Scale& s);

/// Labels for `ticks`, all with the same number of decimals, the fewest that write every tick exactly (as
/// matplotlib's ScalarFormatter without offset: 0.00, 0.05, 0.10). When the largest |tick| is below 1e-2
/// or at least 1e4 the ticks are written in units of 10^e (e = floor(log10 max|tick|)) and *exponent
/// receives e (else 0), to be shown once as "×10^e" at the bar; "-0" is never written.
std::vector<std::string> tick_labels(const std::vector<double>& ticks, int* exponent);

/// "×10⁻³" for e = -3 (Unicode superscripts), "" for 0.
std::string exponent_label(int e);

}  // namespace attnmap
