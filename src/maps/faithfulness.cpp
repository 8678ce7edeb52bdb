#include "maps/faithfulness.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "core/error.hpp"
#include "model/classify.hpp"

namespace attnmap {

std::vector<float> centre_prior_map(int width, int height, double sigma_frac) {
  if (width <= 0 || height <= 0 || !(sigma_frac > 0))
    throw Error("centre prior: size " + std::to_string(width) + "x" + std::to_string(height) + " and sigma fraction " +
                std::to_string(sigma_frac) + " must be positive");
  const double s = sigma_frac * std::min(width, height);
  const double cx = width / 2.0, cy = height / 2.0, k = 1.0 / (2 * s * s);
  std::vector<float> m(static_cast<size_t>(width) * static_cast<size_t>(height));  // (height, width)
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const double dx = x + 0.5 - cx, dy = y + 0.5 - cy;
      m[static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)] =
          static_cast<float>(std::exp(-(dx * dx + dy * dy) * k));
    }
  return m;
}

std::vector<float> brightness_map(const Image& photo) {
  const size_t n = static_cast<size_t>(std::max(photo.width, 0)) * static_cast<size_t>(std::max(photo.height, 0));
  if (!n || photo.rgb.size() != 3 * n)
    throw Error("brightness map: empty or inconsistent image (" + std::to_string(photo.width) + "x" +
                std::to_string(photo.height) + ")");
  std::vector<float> m(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &photo.rgb[3 * i];
    m[i] = static_cast<float>(0.2126 * p[0] + 0.7152 * p[1] + 0.0722 * p[2]);
    sum += m[i];
  }
  if (!(sum > 0)) std::fill(m.begin(), m.end(), 1.0f);
  return m;
}

double random_pointing_expectation(const Mask& mask, int tolerance_px) {
  if (tolerance_px < 0) throw Error("random pointing: tolerance must be >= 0 pixels");
  if (tolerance_px == 0) return mask_area_share(mask);
  const int w = mask.width, h = mask.height;
  const long long r2 = static_cast<long long>(tolerance_px) * tolerance_px;
  size_t hits = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      bool hit = false;
      for (int yy = std::max(0, y - tolerance_px); yy <= std::min(h - 1, y + tolerance_px) && !hit; ++yy)
        for (int xx = std::max(0, x - tolerance_px); xx <= std::min(w - 1, x + tolerance_px) && !hit; ++xx) {
          const long long dx = xx - x, dy = yy - y;
          hit = dx * dx + dy * dy <= r2 && mask.inside[static_cast<size_t>(yy) * static_cast<size_t>(w) + static_cast<size_t>(xx)];
        }
      hits += hit;
    }
  return static_cast<double>(hits) / static_cast<double>(mask.inside.size());
}

namespace {

// Ranks 1..n, ties given the mean of the ranks they span.
std::vector<double> mid_ranks(const std::vector<float>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = mean_rank;
    i = j + 1;
  }
  return r;
}

}  // namespace

double spearman(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.size() < 2)
    throw Error("spearman: needs two vectors of one size >= 2, found " + std::to_string(a.size()) + " and " +
                std::to_string(b.size()));
  const std::vector<double> ra = mid_ranks(a), rb = mid_ranks(b);
  const double n = static_cast<double>(a.size()), mean = (n + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return saa == sbb ? 1.0 : 0.0;
  return sab / std::sqrt(saa * sbb);
}

double trapezoid_auc(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size())
    throw Error("auc: " + std::to_string(x.size()) + " x values but " + std::to_string(y.size()) + " y values");
  double s = 0;
  for (size_t i = 0; i + 1 < x.size(); ++i) s += (x[i + 1] - x[i]) * (y[i] + y[i + 1]) / 2;
  return s;
}

std::vector<int> removal_order(const std::vector<float>& map, bool positive) {
  std::vector<int> idx(map.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    return positive ? map[static_cast<size_t>(a)] > map[static_cast<size_t>(b)]
                    : map[static_cast<size_t>(a)] < map[static_cast<size_t>(b)];
  });
  return idx;
}

std::vector<int> random_order(int n, uint64_t seed) {
  std::vector<int> p(static_cast<size_t>(std::max(n, 0)));
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 g(seed);
  for (size_t i = p.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(g() % i);  // modulo bias is < 2^-50 here; fine for an order
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

std::vector<double> perturbation_fractions() {
  std::vector<double> f;
  for (int i = 0; i < 10; ++i) f.push_back(i / 10.0);
  return f;
}

int removed_at_step(int n, int step) { return n * step / 10; }

namespace {

// The input of one perturbed image: for Drop the kept patch indices, for Zero the input with the removed
// patches' pixels black (0 before normalisation: (0 - mean) / std).
void perturbed_input(const HParams& hp, const float* chw, const std::vector<uint8_t>& removed, PerturbMode mode,
                     std::vector<int>* keep, std::vector<float>* zeroed) {
  if (mode == PerturbMode::Drop) {
    keep->clear();
    for (size_t p = 0; p < removed.size(); ++p)
      if (!removed[p]) keep->push_back(static_cast<int>(p));
    return;
  }
  const size_t W = static_cast<size_t>(hp.image_w), H = static_cast<size_t>(hp.image_h);
  const size_t P = static_cast<size_t>(hp.patch), gw = static_cast<size_t>(hp.grid_w);
  zeroed->assign(chw, chw + 3 * W * H);
  for (size_t p = 0; p < removed.size(); ++p) {
    if (!removed[p]) continue;
    const size_t y0 = (p / gw) * P, x0 = (p % gw) * P;
    for (size_t c = 0; c < 3; ++c) {
      const float black = (0.0f - hp.mean[c]) / hp.std[c];
      for (size_t y = y0; y < y0 + P; ++y) std::fill_n(&(*zeroed)[(c * H + y) * W + x0], P, black);
    }
  }
}

void check_order(const std::vector<int>& order, int N) {
  std::vector<uint8_t> seen(static_cast<size_t>(N), 0);
  bool perm = order.size() == static_cast<size_t>(N);
  for (int p : order) {
    perm = perm && p >= 0 && p < N && !seen[static_cast<size_t>(p)];
    if (perm) seen[static_cast<size_t>(p)] = 1;
  }
  if (!perm) throw Error("perturbation: the removal order must be a permutation of the " + std::to_string(N) + " patches");
}

}  // namespace

std::vector<std::vector<double>> perturbation_curves(const ViTWeights& model, const float* chw,
                                                     const std::vector<std::vector<int>>& orders, PerturbMode mode,
                                                     int target, double unperturbed) {
  const HParams& hp = model.hp;
  if (!model.has_classes())  // a classifier head, or CLIP's texts (zero-shot classes)
    throw Error("perturbation: the model has no classifier head (nothing to perturb against)");
  if (target < 0 || target >= model.num_classes())
    throw Error("perturbation: target class " + std::to_string(target) + " outside 0.." +
                std::to_string(model.num_classes() - 1));
  const int N = hp.grid_w * hp.grid_h;
  for (const auto& o : orders) check_order(o, N);
  const size_t B = orders.size();
  std::vector<std::vector<double>> curves(B, std::vector<double>{unperturbed});
  std::vector<std::vector<uint8_t>> removed(B, std::vector<uint8_t>(static_cast<size_t>(N), 0));
  std::vector<std::vector<float>> zeroed(B);
  for (int step = 1; step < 10 && B; ++step) {
    ForwardOptions fo;
    fo.to_end = true;
    std::vector<const float*> inputs(B, chw);
    if (mode == PerturbMode::Drop) fo.keep_patches_each.resize(B);
    for (size_t b = 0; b < B; ++b) {
      for (int i = removed_at_step(N, step - 1); i < removed_at_step(N, step); ++i)
        removed[b][static_cast<size_t>(orders[b][static_cast<size_t>(i)])] = 1;
      perturbed_input(hp, chw, removed[b], mode, mode == PerturbMode::Drop ? &fo.keep_patches_each[b] : nullptr, &zeroed[b]);
      if (mode == PerturbMode::Zero) inputs[b] = zeroed[b].data();
    }
    const std::vector<ForwardResult> r = vit_forward(model, inputs, fo);
    for (size_t b = 0; b < B; ++b)  // a SigLIP's texts: the target's own sigmoid, as torch.sigmoid(logits_per_image)
      curves[b].push_back(class_probabilities(r[b].logits, model.zero_shot.rule)[static_cast<size_t>(target)]);
  }
  return curves;
}

std::vector<double> perturbation_curve(const ViTWeights& model, const float* chw, const std::vector<int>& order,
                                       PerturbMode mode, int target, double unperturbed) {
  return perturbation_curves(model, chw, {order}, mode, target, unperturbed).front();
}

namespace {

// Uniform in (0, 1) from 53 random bits.
double unit(std::mt19937_64& g) { return (static_cast<double>(g() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

// In place: values replaced by Gaussian ones with the tensor's own mean and standard deviation.
void redraw(Floats& w, std::mt19937_64& g) {
  if (w.empty()) return;
  std::vector<float>& t = w.owned();  // a view of a mapped file becomes a copy first
  if (t.empty()) return;
  double mean = 0, var = 0;
  for (float v : t) mean += v;
  mean /= static_cast<double>(t.size());
  for (float v : t) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / static_cast<double>(t.size()));
  for (size_t i = 0; i < t.size(); i += 2) {  // Box-Muller: two normals from two uniforms
    const double r = std::sqrt(-2.0 * std::log(unit(g))), th = 2.0 * M_PI * unit(g);
    t[i] = static_cast<float>(mean + sd * r * std::cos(th));
    if (i + 1 < t.size()) t[i + 1] = static_cast<float>(mean + sd * r * std::sin(th));
  }
}

}  // namespace

ViTWeights randomise_blocks(const ViTWeights& model, int from_block, uint64_t seed) {
  const int depth = model.hp.depth;
  if (from_block < 0 || from_block > depth)
    throw Error("randomise_blocks: first block " + std::to_string(from_block) + " outside 0.." + std::to_string(depth));
  ViTWeights m = model;
  for (int b = from_block; b < depth; ++b) {
    BlockWeights& blk = m.blocks[static_cast<size_t>(b)];
    std::mt19937_64 g(seed + static_cast<uint64_t>(b));
    for (Floats* t : {&blk.norm1.weight, &blk.norm1.bias, &blk.qkv.weight, &blk.qkv.bias, &blk.proj.weight,
                                  &blk.proj.bias, &blk.norm2.weight, &blk.norm2.bias, &blk.fc1.weight, &blk.fc1.bias,
                                  &blk.fc2.weight, &blk.fc2.bias, &blk.ls1, &blk.ls2,
                                  &blk.proj_l.weight, &blk.proj_l.bias, &blk.proj_w.weight, &blk.proj_w.bias})  // CaiT talking heads
      redraw(*t, g);
  }
  return m;
}

}  // namespace attnmap
