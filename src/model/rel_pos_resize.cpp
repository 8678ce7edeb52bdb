#include "model/rel_pos_resize.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "checkpoint/rel_pos.hpp"
#include "core/error.hpp"
#include "model/pos_embed.hpp"

namespace attnmap {

namespace {

// timm's _calc(src, dst): the source positions of the 2 (src // 2) + 1 offsets along one axis, float32 as
// torch.tensor(list) stores them. The bisection and the sums are Python floats (double).
std::vector<double> source_positions(int src, int dst) {
  double left = 1.01, right = 1.5, q = 0.0;
  const int n = src / 2;
  auto gp = [](double r, int k) { return (1.0 - std::pow(r, k)) / (1.0 - r); };  // geometric_progression(1, r, k)
  while (right - left > 1e-6) {
    q = (left + right) / 2.0;
    if (gp(q, n) > dst / 2)
      right = q;
    else
      left = q;
  }
  std::vector<double> dis;
  double cur = 1;
  for (int i = 0; i < n; ++i) {
    dis.push_back(cur);
    cur += std::pow(q, i + 1);
  }
  std::vector<double> pos;
  for (auto it = dis.rbegin(); it != dis.rend(); ++it) pos.push_back(static_cast<float>(-*it));
  pos.push_back(0.0);
  for (double d : dis) pos.push_back(static_cast<float>(d));
  return pos;
}

// RegularGridInterpolator along one axis at x: left / right source indices and weights (the distance to the
// other side), as timm's torch.bucketize-based code: clamped to the end values outside the positions.
void axis_weights(const std::vector<double>& p, double x, int& il, int& ir, double& wl, double& wr) {
  const int n = static_cast<int>(p.size());
  ir = static_cast<int>(std::lower_bound(p.begin(), p.end(), x) - p.begin());  // bucketize, right=False
  if (ir >= n) ir = n - 1;
  il = std::clamp(ir - 1, 0, n - 1);
  double dl = x - p[static_cast<size_t>(il)], dr = p[static_cast<size_t>(ir)] - x;
  if (dl < 0) dl = 0;
  if (dr < 0) dr = 0;
  if (dl == 0 && dr == 0) dl = dr = 1;
  wl = dr / (dl + dr);  // the left value's weight is the right distance
  wr = dl / (dl + dr);
}

}  // namespace

std::vector<float> resize_rel_pos_bias_table(const std::vector<float>& table, int H, int src_side, int gh, int gw) {
  const int src = 2 * src_side - 1, dh = 2 * gh - 1, dw = 2 * gw - 1;
  const size_t src_rows = static_cast<size_t>(src) * src + 3;
  if (table.size() != src_rows * static_cast<size_t>(H))
    throw Error("relative position table: " + std::to_string(table.size()) + " values, expected " +
                std::to_string(src_rows) + " x " + std::to_string(H));
  if (dh == src && dw == src) return table;  // timm: the same size is left as it is
  const std::vector<double> py = source_positions(src, dh), px = source_positions(src, dw);
  std::vector<float> out((static_cast<size_t>(dh) * dw + 3) * static_cast<size_t>(H));
  for (int y = 0; y < dh; ++y) {
    int yl, yr;
    double wyl, wyr;
    axis_weights(py, static_cast<double>(y - dh / 2), yl, yr, wyl, wyr);  // dy = arange(-(dh // 2), dh // 2 + 0.1)
    for (int x = 0; x < dw; ++x) {
      int xl, xr;
      double wxl, wxr;
      axis_weights(px, static_cast<double>(x - dw / 2), xl, xr, wxl, wxr);
      const size_t o = (static_cast<size_t>(y) * dw + static_cast<size_t>(x)) * H;
      for (int h = 0; h < H; ++h) {
        auto v = [&](int yy, int xx) { return static_cast<double>(table[(static_cast<size_t>(yy) * src + static_cast<size_t>(xx)) * H + static_cast<size_t>(h)]); };
        out[o + static_cast<size_t>(h)] = static_cast<float>(wyl * (wxl * v(yl, xl) + wxr * v(yl, xr)) +
                                                              wyr * (wxl * v(yr, xl) + wxr * v(yr, xr)));
      }
    }
  }
  std::copy(table.end() - 3 * H, table.end(), out.end() - 3 * H);  // the class-token entries, as they are
  return out;
}

std::vector<float> hf_resize_rel_pos_bias_table(const std::vector<float>& table, int H, int src_side, int gh, int gw) {
  const int src = 2 * src_side - 1, dh = 2 * gh - 1, dw = 2 * gw - 1;
  const size_t sub = static_cast<size_t>(src) * src, dsub = static_cast<size_t>(dh) * dw, nh = static_cast<size_t>(H);
  if (table.size() != (sub + 3) * nh)
    throw Error("relative position table: " + std::to_string(table.size()) + " values, expected " +
                std::to_string(sub + 3) + " x " + std::to_string(H));
  std::vector<float> planes(sub * nh);  // (H, 2s-1, 2s-1): the permute(0, 3, 1, 2) F.interpolate sees
  for (size_t r = 0; r < sub; ++r)
    for (size_t h = 0; h < nh; ++h) planes[h * sub + r] = table[r * nh + h];
  const std::vector<float> res = bilinear_resize_planes(planes, H, src, src, dh, dw);  // (H, 2gh-1, 2gw-1)
  std::vector<float> out((dsub + 3) * nh);
  for (size_t r = 0; r < dsub; ++r)
    for (size_t h = 0; h < nh; ++h) out[r * nh + h] = res[h * dsub + r];
  std::copy(table.end() - 3 * H, table.end(), out.end() - 3 * H);  // the class-token entries, as they are
  return out;
}

void check_rel_pos_resizable(const HParams& hp) {
  if (hp.rel_pos && hp.rel_pos_grid_h != hp.rel_pos_grid_w)
    throw Error("the relative position tables are for a " + std::to_string(hp.rel_pos_grid_h) + "x" +
                std::to_string(hp.rel_pos_grid_w) + " grid; timm's resize_rel_pos_bias_table (BEiT) reads a square "
                "one only, so attnmap does not resample them to another size");
}

void resample_rel_pos(ViTWeights& w, int gh, int gw) {
  HParams& hp = w.hp;
  if (!hp.rel_pos) return;
  check_rel_pos_resizable(hp);
  const int s = hp.rel_pos_grid_h;
  const int H = hp.num_heads;
  // Hugging Face BEiT (issue 44) resizes its tables in every forward, bilinearly; timm and unilm as above.
  const auto resize = hp.layout == Layout::HfBeit ? hf_resize_rel_pos_bias_table : resize_rel_pos_bias_table;
  for (BlockWeights& b : w.blocks)
    if (!b.rel_pos_table.empty()) b.rel_pos_table = resize(b.rel_pos_table.vec(), H, s, gh, gw);
  if (!w.rel_pos_table_shared.empty()) w.rel_pos_table_shared = resize(w.rel_pos_table_shared.vec(), H, s, gh, gw);
  hp.rel_pos_grid_h = gh;
  hp.rel_pos_grid_w = gw;
  prepare_rel_pos_bias(w);
}

}  // namespace attnmap
