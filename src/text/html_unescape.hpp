// html_unescape.hpp - Python's html.unescape on code points (OpenAI CLIP's and open_clip's basic_clean).
#pragma once
#include <string>

namespace attnmap {

/// Python's html.unescape(s) (Lib/html/__init__.py), the same algorithm on the same tables (generated into
/// html5_entities.inc by tools/make_html5_entities.py): named references from the HTML5 list, with or
/// without ';' where the list has both ("&amp", "&eacute"), and the longest listed prefix of a name that
/// is not one ("&ampx" -> "&x", "&notit;" -> "¬it;"); numeric references "&#65;", "&#x41;", ';' optional,
/// with the standard's replacements (&#0; and surrogates -> U+FFFD, &#x80; -> "€", ...) and the code points
/// it drops. Text without a reference comes back unchanged. No errors (a number too large for int is
/// > U+10FFFF, so U+FFFD, as in Python).
std::u32string html_unescape(const std::u32string& text);

}  // namespace attnmap
