// figure_metadata.hpp - reading back the text Canvas::save puts into a PDF or SVG figure (its run's record).
#pragma once
#include <optional>
#include <string>

namespace attnmap {

/// The text a figure carries from Canvas (canvas.hpp: set_provenance): a PDF's /Subject string (PDF 1.7
/// sec. 7.3.4: a literal (...) with backslash escapes or a hex <...> string; UTF-16BE with its byte-order mark,
/// as cairo writes non-ASCII text, becomes UTF-8), an SVG's <metadata id="attnmap"> (XML-unescaped). Decided
/// by the extension (.pdf / .svg); nullopt for other files, one that is not a regular file, over 64 MB, or
/// without the text. Throws nothing.
std::optional<std::string> read_figure_metadata(const std::string& path);

}  // namespace attnmap
