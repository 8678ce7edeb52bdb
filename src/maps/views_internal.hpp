// views_internal.hpp - what views.cpp and view_query.cpp share (not part of the engine's interface).
#pragma once

#include <string>

#include "maps/attention_maps.hpp"
#include "maps/views.hpp"

namespace attnmap {
namespace view_detail {

/// 0.1 -> "0.1" (shortest %g form).
std::string number_text(double v);
/// "-3" -> -3; false for anything but an optional '-' and at most 9 digits.
bool parse_int(const std::string& s, int* out);
/// The text after a view's ':' ("q=r7c3", "q=x120y85", "q=reg2", "k=r7c3", "received") as a query, `item` the
/// whole view for messages. Throws attnmap::Error.
TokenQuery parse_query_text(const std::string& item, const std::string& s);
/// A resolved query's canonical text: "" (the default row), ":q=r7c3", ":q=x120y85", ":q=reg2", ":k=r7c3",
/// ":received".
std::string query_suffix(const TokenQuery& q);
/// The query's grid position in range and its token; a prefix word's token. Throws attnmap::Error naming the
/// view for a patch outside the grid or a prefix token the model lacks.
TokenQuery resolve_query(const ViewSpec& v, const HParams& hp);
/// ", query patch (7, 3)", ", register 2's row", ...; "" for the default row.
std::string query_words(const TokenQuery& q);
/// The line a resolved and placed query reads. Throws attnmap::Error for a pixel query not placed yet.
TokenLine line_of(const ResolvedView& v);

}  // namespace view_detail
}  // namespace attnmap
