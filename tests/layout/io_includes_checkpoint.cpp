// Compiled by the ctest Layout.LowerStageCannotSeeHigher against attnmap_io alone: it must NOT compile,
// since io sits below checkpoint and the build gives io no way to find checkpoint's headers.
#include "checkpoint/weights.hpp"
int attnmap_layout_probe() { return 0; }
