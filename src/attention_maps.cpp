#include "attention_maps.hpp"

#include <algorithm>
#include <cstdlib>

#include "error.hpp"

namespace attnmap {

HeadSelect parse_head(const std::string& s) {
  HeadSelect sel;
  if (s == "mean") return sel;
  if (s == "max") {
    sel.fusion = HeadSelect::Fusion::Max;
    return sel;
  }
  if (s == "min") {
    sel.fusion = HeadSelect::Fusion::Min;
    return sel;
  }
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < -100000 || v > 100000)
    throw Error("--head must be a head index or mean | max | min, found '" + s + "'");
  sel.fusion = HeadSelect::Fusion::Index;
  sel.index = static_cast<int>(v);
  return sel;
}

std::vector<float> fuse_heads(const float* rows, int H, int n, const HeadSelect& sel) {
  std::vector<float> out(static_cast<size_t>(n));
  if (sel.fusion == HeadSelect::Fusion::Index) {
    const int h = sel.index < 0 ? H + sel.index : sel.index;
    if (h < 0 || h >= H)
      throw Error("head " + std::to_string(sel.index) + " out of range: the model has " + std::to_string(H) + " heads");
    std::copy_n(rows + static_cast<size_t>(h) * n, n, out.begin());
    return out;
  }
  std::copy_n(rows, n, out.begin());
  for (int h = 1; h < H; ++h) {
    const float* r = rows + static_cast<size_t>(h) * n;
    for (int j = 0; j < n; ++j) {
      switch (sel.fusion) {
        case HeadSelect::Fusion::Max: out[static_cast<size_t>(j)] = std::max(out[static_cast<size_t>(j)], r[j]); break;
        case HeadSelect::Fusion::Min: out[static_cast<size_t>(j)] = std::min(out[static_cast<size_t>(j)], r[j]); break;
        default: out[static_cast<size_t>(j)] += r[j]; break;
      }
    }
  }
  if (sel.fusion == HeadSelect::Fusion::Mean)
    for (float& v : out) v /= static_cast<float>(H);
  return out;
}

std::vector<float> class_attention_map(const ForwardResult& r, const HParams& hp, int layer, const HeadSelect& sel) {
  if (layer < 0 || layer >= r.layers) throw Error("layer " + std::to_string(layer) + " was not computed");
  const int T = r.tokens, H = r.heads, N = hp.grid_w * hp.grid_h;
  const float* rows = &r.cls_attn[static_cast<size_t>(layer) * H * T];  // (H, T)
  // Keep only the patch columns of each head's class row: (H, N).
  std::vector<float> patch_rows(static_cast<size_t>(H) * N);
  for (int h = 0; h < H; ++h)
    std::copy_n(rows + static_cast<size_t>(h) * T + hp.num_prefix, N, &patch_rows[static_cast<size_t>(h) * N]);
  return fuse_heads(patch_rows.data(), H, N, sel);
}

}  // namespace attnmap
