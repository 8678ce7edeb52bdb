// plots.hpp - plots with axes for the statistics of `attnmap stats` (docs/stats.md): dots over categories
// (the mean attention distance against depth, one dot per head: the ViT paper's Fig. 7) and a histogram with
// an optional log-count axis (the registers paper's Fig. 3 of token norms). Drawn on draw/canvas.hpp's
// Canvas in DejaVu Sans, written as PNG, PDF or SVG with the run's record, as every figure.
#pragma once
#include <string>
#include <vector>

#include "draw/canvas.hpp"
#include "draw/figures.hpp"

namespace attnmap {

/// One legend entry's dots: (x, y) pairs in data units, one colour.
struct DotSeries {
  std::string label;  ///< the legend's text, e.g. "head 3"
  Rgb color;
  std::vector<double> x, y;
};

/// Dots over categories: category k (0-based) is drawn centred at x = k, labelled categories[k]; a series'
/// x values are category positions (k plus an offset within +-0.5 to keep dots of one category apart).
struct DotPlot {
  std::string title;                    ///< on top, wrapped to the figure's width
  std::string x_label, y_label;         ///< axis titles (units in them)
  std::vector<std::string> categories;  ///< x tick labels, e.g. "1" .. "12" (blocks)
  std::vector<DotSeries> series;        ///< legend order; legend at the right (one column)
  double y_min = 0.0;                   ///< the y axis starts here; it ends at a nice value over the largest y
  std::string note;                     ///< a line under the plot (e.g. the definition), empty: none
};

/// A histogram: bins edges[i] .. edges[i+1], one or more stacked count layers (each edges.size() - 1 long),
/// on a linear or a log10 count axis (bars start at count 0.7 so that a count of 1 shows).
struct HistogramPlot {
  std::string title, x_label, y_label, note;
  std::vector<double> edges;
  std::vector<std::vector<double>> layers;  ///< stacked bottom to top
  std::vector<std::string> labels;          ///< one per layer (legend)
  std::vector<Rgb> colors;                  ///< one per layer
  bool log_count = true;
};

/// Colours to tell n series apart: matplotlib's tab10 for n <= 10, else n colours sampled evenly from turbo.
std::vector<Rgb> series_colors(int n);

/// Writes the dot plot `width_in` inches wide (0.62 as high) at opt.dpi, text 8 pt, per opt.formats to
/// base + extension, with opt.provenance. Returns the paths. Throws attnmap::Error for no categories, a
/// series whose x and y differ in length, or a file that cannot be written.
std::vector<std::string> write_dot_plot(const std::string& base, const DotPlot& p, double width_in,
                                        const FigureOptions& opt);

/// Writes the histogram as write_dot_plot writes its plot. Throws attnmap::Error for fewer than 2 edges,
/// layers whose length is not edges.size() - 1, or labels / colours not one per layer.
std::vector<std::string> write_histogram(const std::string& base, const HistogramPlot& p, double width_in,
                                         const FigureOptions& opt);

/// An outlier map as a figure (`attnmap stats`, outliers/NAME.png): the picture (the photo with its token-norm
/// map and the outlier patches outlined) at its own pixels, a bold title above it wrapped to the figure's
/// width, and at its right the vertical colour bar of `scale` with its units and a mark across the bar at
/// `threshold` (white over black, as the outlines) when the threshold is inside the scale.
struct OutlierFigure {
  std::string title;
  Scale scale;             ///< the norm map's scale (units: what a colour stands for)
  double threshold = 0.0;  ///< the outlier threshold, in the scale's units
  const uint8_t* cmap = nullptr;
};

/// Writes the outlier figure as a PNG at `path` (text sized to the picture: draw/figures' text_px; pHYs
/// `dpi`; tEXt `attnmap` = `provenance`). A picture too large for a canvas with the bar is drawn scaled
/// down to fit kMaxCanvas. Throws attnmap::Error for an empty picture, no colour map or a file that cannot
/// be written.
void write_outlier_figure(const std::string& path, const Image& picture, const OutlierFigure& fig, double dpi,
                          const std::string& provenance);

/// Equal-width bins over [lo, hi] (hi > lo; else [lo - 0.5, lo + 0.5]): the n + 1 edges, as numpy.histogram
/// with bins=n, range=(lo, hi).
std::vector<double> histogram_edges(double lo, double hi, int n);

/// The bin of v under `edges` (numpy.histogram: half-open bins, the last one closed), or -1 outside.
int histogram_bin(const std::vector<double>& edges, double v);

}  // namespace attnmap
