// view_kind.hpp - the kinds of view (maps/views.hpp), in a header of their own so that the methods that
// compute a kind's map (maps/explain.hpp) can name it without the engine.
#pragma once

namespace attnmap {

/// Every kind of view attnmap draws, saves or scores. Its properties (its word in the grammar, whether it
/// explains a class, its label and units) are one row of the table in maps/views.cpp.
enum class ViewKind { Photo, Attention, Rollout, Probe, Chefer, GradCam, AttnGrad };

}  // namespace attnmap
