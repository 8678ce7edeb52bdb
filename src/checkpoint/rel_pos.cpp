#include "checkpoint/rel_pos.hpp"

#include <string>

#include "core/error.hpp"

namespace attnmap {

int64_t rel_pos_table_rows(int gh, int gw) { return static_cast<int64_t>(2 * gh - 1) * (2 * gw - 1) + 3; }

std::vector<int64_t> beit_relative_position_index(int gh, int gw) {
  const int N = gh * gw, T = N + 1;
  const int64_t rows = rel_pos_table_rows(gh, gw);
  std::vector<int64_t> idx(static_cast<size_t>(T) * T);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      const int yi = i / gw, xi = i % gw, yj = j / gw, xj = j % gw;
      idx[static_cast<size_t>(i + 1) * T + static_cast<size_t>(j + 1)] =
          static_cast<int64_t>(yi - yj + gh - 1) * (2 * gw - 1) + (xi - xj + gw - 1);
    }
  for (int j = 0; j < T; ++j) idx[static_cast<size_t>(j)] = rows - 3;                    // class -> patch
  for (int i = 0; i < T; ++i) idx[static_cast<size_t>(i) * T] = rows - 2;                // patch -> class
  idx[0] = rows - 1;                                                                     // class -> class
  return idx;
}

std::vector<float> gather_rel_pos_bias(const Floats& table, int H, int gh, int gw) {
  const int64_t rows = rel_pos_table_rows(gh, gw);
  if (static_cast<int64_t>(table.size()) != rows * H)
    throw Error("relative position table: " + std::to_string(table.size()) + " values, expected " +
                std::to_string(rows) + " x " + std::to_string(H) + " for a " + std::to_string(gh) + "x" +
                std::to_string(gw) + " grid");
  const std::vector<int64_t> idx = beit_relative_position_index(gh, gw);
  const size_t TT = idx.size();
  std::vector<float> bias(static_cast<size_t>(H) * TT);
  for (size_t p = 0; p < TT; ++p)
    for (int h = 0; h < H; ++h) bias[static_cast<size_t>(h) * TT + p] = table[static_cast<size_t>(idx[p]) * H + h];
  return bias;
}

void prepare_rel_pos_bias(ViTWeights& w) {
  const HParams& hp = w.hp;
  if (!hp.rel_pos) return;
  const int H = hp.num_heads, gh = hp.rel_pos_grid_h, gw = hp.rel_pos_grid_w;
  if (gh != hp.grid_h || gw != hp.grid_w)
    throw Error("relative position tables are for a " + std::to_string(gh) + "x" + std::to_string(gw) +
                " grid, the model's is " + std::to_string(hp.grid_h) + "x" + std::to_string(hp.grid_w));
  std::shared_ptr<const std::vector<float>> shared;
  if (!w.rel_pos_table_shared.empty())
    shared = std::make_shared<const std::vector<float>>(gather_rel_pos_bias(w.rel_pos_table_shared, H, gh, gw));
  for (BlockWeights& b : w.blocks) {
    if (b.rel_pos_table.empty()) {
      b.attn_bias = shared;
      continue;
    }
    std::vector<float> own = gather_rel_pos_bias(b.rel_pos_table, H, gh, gw);
    if (shared)  // timm Attention: attn + own bias + shared bias
      for (size_t i = 0; i < own.size(); ++i) own[i] += (*shared)[i];
    b.attn_bias = std::make_shared<const std::vector<float>>(std::move(own));
  }
}

}  // namespace attnmap
