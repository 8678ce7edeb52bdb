// Compiled by the ctest Layout.LowerStageSeesItsOwnDependencies against attnmap_io alone: it must
// compile (the control for Layout.LowerStageCannotSeeHigher, which must fail for the include alone).
#include "core/error.hpp"
#include "io/image_io.hpp"
int attnmap_layout_probe() { return 0; }
