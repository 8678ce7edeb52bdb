// figures.hpp - figures a reader can interpret (issue 17): styles of drawing one map over its photo, and the
// figure kinds built on draw/canvas (panel, strip, heads grid, comparison figure, contact sheet), each
// taking maps already computed and writing files. No attention maths here.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "draw/canvas.hpp"
#include "draw/scale.hpp"
#include "io/image_io.hpp"
#include "maps/upsample.hpp"

namespace attnmap {

/// --style: overlay (the heatmap blended over the photo), mask (the ViT paper's Fig. 6: photo x scaled map,
/// on black), contour (iso-lines of the map at the colour bar's ticks over the untouched photo).
enum class Style { Overlay, Mask, Contour };

/// Parses "overlay" | "mask" | "contour"; throws attnmap::Error otherwise.
Style parse_style(const std::string& s);

/// How one map is drawn over its photo.
struct StyleOptions {
  Style style = Style::Overlay;
  bool alpha_by_value = false;   ///< overlay: opacity = alpha x the scaled value (DINO/paper look)
  float alpha = 0.5f;            ///< overlay opacity (its maximum with alpha_by_value), [0, 1]
  const uint8_t* cmap = nullptr; ///< 256x3 colour table (colormap_table)
  Upsample upsample = Upsample::Bilinear;
};

/// A patch-grid map: values (grid_h, grid_w) row-major, in the scale's units.
struct GridMap {
  std::vector<float> values;
  int grid_w = 0, grid_h = 0;
  int marked = -1;  ///< a patch (row-major grid index) outlined on the drawing: the query patch; -1 none
};


/// Where a map lies on its photo, in whole photo pixels (maps/upsample box_pixels): the model's input box.
struct PhotoBox {
  int x0 = 0, y0 = 0, w = 0, h = 0;
};

/// Outlines patch `patch` (row-major over grid_w x grid_h) of the map box on `img`: a white frame inside a
/// black one, each max(1, cell/12) pixels wide, so that it shows on any colour (issue 27: the query patch).
/// Nothing for patch < 0. Throws attnmap::Error for a patch outside the grid.
void outline_patch(Image& img, const PhotoBox& box, int grid_w, int grid_h, int patch);

/// `box` scaled from a photo of photo_w x photo_h pixels to one of to_w x to_h (rounded by box_pixels).
PhotoBox scale_box(const PhotoBox& box, int photo_w, int photo_h, int to_w, int to_h);

/// The map drawn over `photo` (same size as the photo): the map is put on `scale` (apply_scale, in [0,1]),
/// upsampled to the box, then Overlay: (1 - a) photo + a colour, a = alpha (or alpha x value), inside the
/// box - with scale = the map's min-max and no alpha_by_value this is blend_overlay's image byte for byte;
/// Mask: photo x value inside the box, black outside; Contour: the photo with iso-lines at the ticks of
/// `scale` strictly inside (vmin, vmax) (marching squares on the upsampled map, in the colour map's
/// colour of their level). Throws attnmap::Error when the box does not fit or sizes disagree.
Image draw_styled(const Image& photo, const PhotoBox& box, const GridMap& map, const Scale& scale,
                  const StyleOptions& st);

/// The map alone at the photo's size: colour(scaled map) inside the box, light grey outside.
Image draw_map_alone(int photo_w, int photo_h, const PhotoBox& box, const GridMap& map, const Scale& scale,
                     const StyleOptions& st);

/// Line segments (x0, y0, x1, y1, ...) of the iso-line of `level` through `values` (h rows of w), sample
/// (i, j) at pixel centre (i + 0.5, j + 0.5); marching squares with linear interpolation on the edges, the
/// saddle cases split by the centre average. Pure geometry, for contour drawing and tests.
std::vector<float> iso_segments(const std::vector<float>& values, int w, int h, float level);

/// What the legend strip under an overlay (NAME.png) says: add_legend.
struct OverlayLegend {
  Scale scale;               ///< the scale the overlay is drawn on: the bar, its end values and units
  double map_max = 0.0;      ///< the map's largest value, in the scale's units
  double max_over_mean = 0.0;  ///< the map's contrast, max / mean over the patches (MapStats); 0: undefined
  bool flat = false;         ///< max_over_mean below maps' kFlatMaxOverMean (1.25): a nearly uniform map
};

/// The narrowest legend: an overlay narrower than this gets a canvas this wide (white right of the photo).
constexpr int kLegendMinWidth = 200;

/// The legend's text size in pixels for a canvas `width` pixels wide: width / 40, between 10 and 40.
int legend_text_px(int width);

/// The overlay with a legend strip under it (issue 28): the photo's pixels unchanged at the top left of a
/// max(width, kLegendMinWidth) x (height + strip) image, then on white a horizontal colour bar of `cmap` over
/// the scale (an "extend" triangle at its right end when scale.clip_max), its end values and units under it,
/// and the contrast line: "max 0.301 = 59.1× uniform (max ÷ mean)", or for a flat map "flat map: max
/// 0.00619 = 1.22× uniform (below 1.25×)" in red. The strip is about 5 x legend_text_px high. Throws
/// attnmap::Error when the label font is missing (figure_font).
Image add_legend(const Image& overlay, const OverlayLegend& lg, const uint8_t* cmap);

/// "max 0.301 = 59.1× uniform" / "flat map: max 0.00619 = 1.22× uniform": the contrast words of a map, as
/// the legend, the terminal and the figures write them (max_over_mean 0: "max 0.301").
std::string contrast_phrase(double map_max, double max_over_mean, bool flat);

/// One figure file drawn in memory: the path write_* would give it, its format and its bytes (the file's
/// bytes exactly: writing them is what write_* does).
struct FigureFile {
  std::string path;
  FigureFormat format = FigureFormat::Png;
  std::vector<uint8_t> bytes;
  std::string record;  ///< the settings record it carries (FigureOptions::provenance)
};

/// What every figure file shares.
struct FigureOptions {
  std::vector<FigureFormat> formats = {FigureFormat::Png};
  double dpi = 300.0;  ///< pHYs of PNGs (and their pixels per inch with width_in)
  /// The figure's width in inches (--width-in): PDF/SVG pages this wide, PNGs width_in x dpi pixels, text
  /// 8.5 pt at that width (ticks 7.2 pt). 0: PNGs as drawn (their photos pixel for pixel, the text sized to
  /// the photos), PDF/SVG at the kind's width (a panel 3.5 in, a strip or heads grid 6.5 in), text alike.
  /// Below 0: every format as drawn (PDF/SVG pages pixels / dpi inches, the text sized to the photos: the
  /// PNG's layout, for comparing the formats). write_comparison has its own (ComparisonOptions::width_in).
  double width_in = 0.0;
  /// How the figure was made (the run's settings record, JSON): PNG tEXt `attnmap`, PDF Subject, SVG
  /// <metadata>; empty: not recorded.
  std::string provenance;
  /// Set: each file drawn is appended here (FigureFile) instead of written; the paths are returned alike.
  std::vector<FigureFile>* in_memory = nullptr;
};

/// One labelled view of a panel: a row photo | map alone | overlay.
struct PanelRow {
  std::string label;  ///< e.g. "L3/mean", "rollout 0-11"
  GridMap map;
  Scale scale;  ///< the scale this row is drawn with (rows with equal scales share one colour bar)
};

/// --panel: `title` on top, then one row per view: the photo, the map alone, the styled map (the same pixels
/// as draw_styled, drawn 1:1 in a PNG so they equal the plain overlay file), each at the photo's size (a
/// photo too large for the panel to fit a kMaxCanvas canvas - wider than about 10,900 pixels - is first
/// scaled down, its box alike, so that it fits: its styled map is then drawn from the scaled photo); a
/// vertical colour bar with nice ticks in the scale's units at the right (one for all rows when their
/// scales are equal, else one per row). Writes base + ".png" / ".pdf" / ".svg" per opt.formats and returns
/// the paths. Throws attnmap::Error (nothing written for the failing format) on bad sizes or I/O errors.
std::vector<std::string> write_panel(const std::string& base, const std::string& title, const Image& photo,
                                     const PhotoBox& box, const std::vector<PanelRow>& rows, const StyleOptions& st,
                                     const FigureOptions& opt);

/// The photo of a tile: scaled so that its longer side is `tile_long` pixels (aspect kept, at least 1 pixel;
/// stb_image_resize), with its map box scaled alike. Throws attnmap::Error for tile_long < 16.
struct TilePhoto {
  Image photo;
  PhotoBox box;
};
TilePhoto tile_photo(const Image& photo, const PhotoBox& box, int tile_long = 224);

/// A strip or grid of tiles (--strip layers, --strip heads / --heads-grid).
struct TileFigure {
  std::string title;           ///< on top (wrapped to the figure's width)
  std::string note;            ///< what the tiles are: in the first empty cell, or under a full grid
  int cols = 0;                ///< 0: ceil(sqrt(n)) (the heads grid's rule); n: one row; layer strips:
                               ///< layer_strip_columns(n) unless given
  const Scale* scale = nullptr;  ///< the one scale of every tile: a colour bar at the right; null: none
  const uint8_t* cmap = nullptr; ///< the bar's colour table
};

/// The default number of columns of a layer strip of `blocks` tiles: one row up to 6 blocks, else as few
/// rows of at most 6 as hold them, filled evenly (12 blocks: 2 rows of 6; 24: 4 of 6; 13: 3 rows of 5).
int layer_strip_columns(int blocks);

/// Lays out `tiles` (all the same size, drawn by the caller: draw_styled on tile_photo, or the DINO mask)
/// row by row in fig.cols columns, each under its label (wrapped when wider than the tile),
/// `title` on top, the colour bar of fig.scale at the right, fig.note where the grid has room. Writes
/// base + extension per opt.formats; returns the paths. Throws attnmap::Error for no tiles, tiles of
/// different sizes or a label count that differs.
std::vector<std::string> write_tiles(const std::string& base, const TileFigure& fig, const std::vector<Image>& tiles,
                                     const std::vector<std::string>& labels, const FigureOptions& opt);

/// One image (row) of a comparison figure: the photo, its box, its label, and one map per map column
/// (in the order of the figure's map columns).
struct FigureRow {
  std::string label;  ///< row label, e.g. the file name
  const Image* photo = nullptr;
  PhotoBox box;
  std::vector<GridMap> maps;
};

/// The colour scales of a comparison figure's map columns (the columns not titled "photo", in order).
struct ComparisonScales {
  std::vector<Scale> scales;      ///< the figure's distinct scales, e.g. one per unit
  std::vector<int> column_scale;  ///< per map column: its index into `scales`, or -1: each map of that column
                                  ///< on its own min-max (no colour bar can stand for them)
};

/// What else a comparison figure needs besides its cells.
struct ComparisonOptions {
  double width_in = 6.5;   ///< the figure's width in inches, (0, 100]
  double dpi = 300.0;      ///< pixels per inch: the PNG's pHYs, the PDF/SVG page = pixels / dpi inches
  std::string provenance;  ///< the settings record (JSON): PNG tEXt `attnmap`, PDF Subject, SVG <metadata>
  std::string note;        ///< one grey line under the figure (e.g. why a column has no colour bar); "" none
  std::string title;       ///< a bold title on top, wrapped to the figure's width; "" none
  /// The words over the columns instead of column_titles (which still say which column is "photo"); one per
  /// column, "" for an untitled column; empty: column_titles.
  std::vector<std::string> column_labels;
  /// A short line under each map cell (e.g. a CLIP text's zero-shot probability, "93.1%"): one list per row,
  /// one item per map column ("" none); empty: no caption line, the figure as without the field. A caption
  /// wider than its cell is a label that does not fit ("cell caption").
  std::vector<std::vector<std::string>> captions;
  std::vector<FigureFile>* in_memory = nullptr;  ///< as FigureOptions::in_memory
};

/// The smallest size, in points, the labels of a comparison figure shrink to (a word longer than its place at
/// the label size, 8 pt) before the figure is refused: the colour bars' tick labels are about this size.
constexpr double kMinLabelPt = 6.0;

/// `attnmap figure`: rows = images, columns = views (column_titles; the column titled exactly "photo"
/// shows the photo alone and takes no map), laid out opt.width_in inches wide at opt.dpi (text 8 pt, so
/// it reads the same size in print whatever the dpi); each cell is as wide as the columns allow and as high
/// as its photo's aspect asks. Column titles too wide for their cell break after the comma nearest their
/// middle, then wrap at whole words; row labels (upward beside their rows) wrap at whole words to their
/// row's height, their column widened to the lines; titles, notes and bar units wrap alike - never a word
/// cut, never "…". A word longer than its place shrinks the labels of its kind (one size for all column
/// titles, one for all row labels) down to kMinLabelPt; past that the figure is refused (comparison_fit
/// says at what width it would fit). Colour bars: when every map column is on one scale, one vertical bar at the
/// right for all of them; otherwise a horizontal bar under each run of adjacent map columns that share a
/// scale (matplotlib's fig.colorbar(ax=axes[:, cols], location="bottom")), none under -1 columns; a scale
/// with clip_max gives its bar the extend='max' triangle and the top's value with "+". Writes
/// `path` (its extension picks the format: .png, .pdf, .svg) and returns it. Throws attnmap::Error for an
/// unknown extension, a row whose map count does not match, a column_scale that does not match the map
/// columns or `scales`, a width that gives cells under 16 pixels, or a label that does not fit.
std::string write_comparison(const std::string& path, const std::vector<std::string>& column_titles,
                             const std::vector<FigureRow>& rows, const ComparisonScales& scales,
                             const StyleOptions& st, const ComparisonOptions& opt);

/// Whether a comparison figure's labels fit whole at opt.width_in (write_comparison's rule), and if not the
/// width they need.
struct ComparisonFit {
  bool fits = true;
  std::string label;     ///< the first label that does not fit, as given
  std::string what;      ///< its kind: "column title", "row label", "title", "note", "colour bar's units"
  double needed_in = 0;  ///< the smallest width (in tenths of an inch) at which every label fits; 0: none up to 100
  int w = 0, h = 0;      ///< the figure's size in pixels at opt.width_in (over kMaxCanvas: it cannot be drawn)
};

/// write_comparison's layout alone (nothing drawn): whether every label fits at opt.width_in and, when not,
/// the width that would do (found by bisection in tenths of an inch: wider cells hold longer words). Throws
/// attnmap::Error as write_comparison for bad arguments and cells under 16 pixels. `as_drawn`: also as
/// write_comparison lays out again a shared bar whose units are longer than the bar (wrapped to its height,
/// the bar wider, the cells narrower), so that "fits" means write_comparison draws it; without it that second
/// layout is not made (the answer the figures before texts were checked with).
ComparisonFit comparison_fit(const std::vector<std::string>& column_titles, const std::vector<FigureRow>& rows,
                             const ComparisonScales& scales, const ComparisonOptions& opt, bool as_drawn = false);

/// comparison_fit(...).fits without the search for the width that would do (one layout, or two as_drawn).
bool comparison_fits(const std::vector<std::string>& column_titles, const std::vector<FigureRow>& rows,
                     const ComparisonScales& scales, const ComparisonOptions& opt, bool as_drawn = false);

/// "the WHAT would be W × H pixels, over cairo's limit of 32767 pixels a side" (kMaxCanvas): what a figure too
/// large to draw says first (`what`: "figure", "contact sheet", ...; `at_least`: "would be at least", for a
/// size estimated from below); the caller adds what to change.
std::string over_canvas_limit(const std::string& what, int w, int h, bool at_least = false);

/// Refuses, before any map is computed, figures `width_in` inches wide at `dpi` whose width alone, width_in x
/// dpi pixels, is over kMaxCanvas: an attnmap::Error naming the width, the limit, the largest {setting:dpi} at
/// this width and the largest {setting:width_in} at this dpi, then `also` (e.g. that a PDF is held to it too).
void check_figure_width(double width_in, double dpi, const std::string& also = "");

/// The pixel size write_comparison would draw (its layout alone, nothing drawn); the maps' values are not read,
/// so rows may carry empty maps (one per map column). Throws attnmap::Error as comparison_fit.
std::pair<int, int> comparison_pixels(const std::vector<std::string>& column_titles, const std::vector<FigureRow>& rows,
                                      const ComparisonScales& scales, const ComparisonOptions& opt);

/// Refuses, before any map exists, a width that leaves a comparison figure of `ncols` columns cells under 16
/// pixels (with one colour bar at the right, its narrowest layout). Throws attnmap::Error naming --width-in
/// and --dpi.
void check_comparison_width(int ncols, double width_in, double dpi);

/// The same with one scale for every map column (one vertical colour bar) and nothing recorded.
std::string write_comparison(const std::string& path, const std::vector<std::string>& column_titles,
                             const std::vector<FigureRow>& rows, const Scale& scale, const StyleOptions& st,
                             double width_in, double dpi);

/// One thumbnail of a contact sheet: an overlay already drawn (or one read when its page is drawn, or none),
/// and two label lines under it.
struct SheetItem {
  const Image* overlay = nullptr;
  std::string name;    ///< first line, e.g. the file name (shortened in the middle with "…" when too wide)
  std::string detail;  ///< second line, e.g. "Coat 63% · peak 0.081"
  /// Instead of `overlay`: the picture's width x height and a function that returns it, called only while
  /// its page is drawn (possibly on several threads at once), so that a sheet of 10,000 overlays holds one
  /// page of thumbnails at a time. A picture of another size is scaled to the thumbnail of the declared one.
  /// When it throws, the tile becomes a placeholder with the exception's message.
  int width = 0, height = 0;
  std::function<Image()> load;
  /// No overlay and no load: a grey placeholder tile showing this text (e.g. why the input failed).
  std::string placeholder;
};

/// `text` in at most `width` pixels set in `ts` on `c` (one line): unchanged when it fits, else its first 40 %
/// and last 60 % of the most characters (whole UTF-8 code points) that fit, joined by "…" with no space
/// added ("composites2/0001_t…ouser_coat.png"). The contact sheet's names and details.
std::string cut_middle(Canvas& c, const std::string& text, const TextStyle& ts, double width);

struct SheetOptions {
  int columns = 6;
  int thumb_long = 256;        ///< thumbnail's longer side, pixels (stb_image_resize, Mitchell/Catmull-Rom)
  int max_page_height = 8000;  ///< a page holds as many rows as fit in this many pixels (at least one)
  double dpi = 300.0;
  std::string provenance;      ///< recorded in every page (PNG tEXt `attnmap`); empty: none
  /// The colour bar at the right of every page (with cmap): the one scale every thumbnail is drawn on (a run
  /// or fixed --scale), its units and ticks, an "extend" triangle when scale.clip_max; unset: each thumbnail
  /// on its own min-max, and the bar says so (its ends "max" and "min", no values).
  std::optional<Scale> scale;
  const uint8_t* cmap = nullptr;  ///< the colour map of the thumbnails; null: no colour bar
};

/// --contact-sheet: the items in a labelled grid, `title` on top of each page; split into pages when the
/// rows exceed max_page_height: one page is written to `path`, several to STEM-1.png, STEM-2.png, ... (the
/// title then says "page k of n"). Pictures are shrunk (or enlarged) so that their longer side is
/// thumb_long, but never narrower (or lower) than a quarter of it (a 37 x 211 photo is 64 x 365, not a
/// 45-pixel sliver); each is centred on a light grey cell thumb_long wide and as high as the highest
/// thumbnail (letterboxed); a placeholder tile fills such a cell. Names too wide for the cell keep their
/// start and end with "…" between them, no space added. PNG only. Returns the paths written. Throws attnmap::Error for no items, a non-.png path,
/// columns < 1, thumb_long < 16, or an item with neither a picture nor a placeholder (or a load without a
/// positive size).
std::vector<std::string> write_contact_sheet(const std::string& path, const std::string& title,
                                             const std::vector<SheetItem>& items, const SheetOptions& opt);

/// The most columns a contact sheet of opt.thumb_long thumbnails may have and stay within kMaxCanvas pixels
/// wide, room kept for its colour bar (write_contact_sheet refuses a wider sheet).
int contact_sheet_max_columns(const SheetOptions& opt);

}  // namespace attnmap
