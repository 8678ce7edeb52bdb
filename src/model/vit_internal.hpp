// vit_internal.hpp - what the model stage's forward passes share (vit.cpp, and CaiT's in cait.cpp); not for
// other stages.
#pragma once
#include <vector>

#include "model/vit.hpp"

namespace attnmap {

/// B results of L layers of H heads over T tokens: cls_attn (L, H, T) and, with keep_full, attn (L, H, T, T),
/// zero-filled.
std::vector<ForwardResult> make_forward_results(int B, int L, int H, int T, bool keep_full);

}  // namespace attnmap
