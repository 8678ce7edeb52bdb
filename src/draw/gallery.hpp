// gallery.hpp - a static, browsable HTML page of a run (--gallery DIR): a grid of cards, one per input, with
// its thumbnail linked to its outputs, its name, its status or error and its map statistics; sortable,
// filterable, lazily loaded.
#pragma once
#include <string>
#include <vector>

#include "io/image_io.hpp"

namespace attnmap {

/// One input of a run, as its manifest line says it (src/engine/batch.cpp manifest_line).
struct GalleryEntry {
  std::string input;                 ///< the input's path as the run named it
  std::string status;                ///< "done", "failed" or "skipped"
  std::string error;                 ///< the failure's message ("" unless failed)
  std::vector<std::string> outputs;  ///< the files written for it, the overlay PNG first (paths as the run wrote them)
  bool has_stats = false;            ///< the statistics below are known (done, or skipped with known values)
  double map_max = 0;                ///< largest value of the class-token map (attention probability)
  int argmax_row = 0, argmax_col = 0;  ///< patch of map_max
  double entropy = 0;                ///< Shannon entropy of the renormalised map, nats
  bool entropy_valid = true;         ///< false: the entropy is undefined (the manifest's null), shown empty
  double milliseconds = -1;          ///< time taken for this image (< 0: unknown)
  std::string top1;                  ///< the most probable class ("" without a classifier head)
  double top1_probability = 0;
};

struct GalleryOptions {
  int thumb_size = 128;  ///< longer side of a thumbnail, pixels (a card is this wide plus 10, at least)
  std::string title = "attnmap gallery";
  std::string subtitle;  ///< e.g. the weights and the view, shown under the title
  std::vector<PngText> thumb_text;  ///< tEXt chunks of every thumbnail (the run's record: a later walk of the
                                    ///< folder passes them over as outputs, not photos)
};

/// Writes `dir`/index.html and `dir`/thumbs/NNNNNN.png (one per entry whose overlay can be read), creating
/// `dir`. Links are relative to `dir` and percent-encoded, so the page works opened from disk (file://) and
/// when `dir` is moved together with the outputs; the page loads no script, font, style or image from
/// anywhere else (everything but the thumbnails and the linked outputs is inline). Thumbnails are the
/// overlays shrunk with stb_image_resize's default filter (Mitchell when shrinking), loaded lazily
/// (`loading="lazy"`). An overlay that cannot be read gets no thumbnail and the row says so; it does not
/// fail the page. Throws attnmap::Error naming the path when `dir` or index.html cannot be written.
/// Returns the number of thumbnails written.
int write_gallery(const std::string& dir, const std::vector<GalleryEntry>& entries, const GalleryOptions& opt = {});

/// True when `index_html` is a page write_gallery wrote (its head carries <meta name="generator"
/// content="attnmap">, within the first kilobyte); false for any other file or one that cannot be read.
bool is_attnmap_gallery(const std::string& index_html);

/// `path` relative to the folder `from` (both as given, made absolute against the current folder and
/// normalised lexically), percent-encoded per RFC 3986 for use in an href/src (unreserved characters and
/// '/' kept). E.g. ("out/a b.png", "out/gallery") -> "../a%20b.png".
std::string relative_url(const std::string& path, const std::string& from);

/// Text with &, <, >, " and ' replaced by HTML character references.
std::string html_escape(const std::string& text);

}  // namespace attnmap
