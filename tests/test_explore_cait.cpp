// The explorer of a CaiT model (issue 44; docs/explore.md "CaiT"): tests/fixtures/cait/cait_tiny over
// data/chelsea.png. CaiT's self-attention blocks run over the patches only (no class row or column) and its
// class-attention blocks compute only the class token's row (model/cait.hpp): the page stores the rows a block
// has, with the forward's values (to half a level; prefix keys exact), and marks absent (NaN in the pack and in
// attention.npy) the rows and keys it does not have, never zeros; the page's settings say why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/weights.hpp"
#include "engine/explore_pack.hpp"
#include "engine/render.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"
#include "maps/attention_maps.hpp"
#include "model/preprocess.hpp"
#include "model/vit.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

nlohmann::json page_settings(const fs::path& index) {
  const std::string html = slurp(index), open = "<script type=\"application/json\" id=\"attnmap-meta\">";
  const size_t a = html.find(open), b = html.find("</script>", a);
  if (a == std::string::npos || b == std::string::npos) return nullptr;
  return nlohmann::json::parse(html.substr(a + open.size(), b - a - open.size()));
}

// data/blockNN.js: attnmapBlock(NN,"<base64>"); the base64's bytes.
std::vector<uint8_t> block_bytes(const fs::path& file) {
  const std::string js = slurp(file);
  const size_t a = js.find('"') + 1, b = js.rfind('"');
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = a; i < b && js[i] != '='; ++i) {
    const char c = js[i];
    const int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : 63;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    if ((bits += 6) >= 8) out.push_back(static_cast<uint8_t>(acc >> (bits -= 8)));
  }
  return out;
}

// One stored map of a block file (explore_pack.hpp block_payload): lo[T], hi[T], prefix[T][P], q[T][N].
struct StoredMap {
  std::vector<float> lo, hi, pre;
  std::vector<uint8_t> q;
};

std::vector<StoredMap> parse_block(const std::vector<uint8_t>& raw, int maps, int T, int P) {
  const int N = T - P;
  const size_t nf = static_cast<size_t>(2 * T + T * P);
  EXPECT_EQ(raw.size(), maps * (nf * 4 + static_cast<size_t>(T) * N));
  std::vector<StoredMap> out(static_cast<size_t>(maps));
  for (int m = 0; m < maps; ++m) {
    std::vector<float> f(nf);
    std::memcpy(f.data(), raw.data() + m * nf * 4, nf * 4);
    out[m].lo.assign(f.begin(), f.begin() + T);
    out[m].hi.assign(f.begin() + T, f.begin() + 2 * T);
    out[m].pre.assign(f.begin() + 2 * T, f.end());
    const uint8_t* q = raw.data() + maps * nf * 4 + static_cast<size_t>(m) * T * N;
    out[m].q.assign(q, q + static_cast<size_t>(T) * N);
  }
  return out;
}

// Row i of a stored map against the exact (T, T) matrix `x`: absent (NaN lo / hi / prefix) or present with
// the patch keys within half a level and the prefix key within 1e-6 (absent when `key`).
void expect_row(const StoredMap& s, const float* x, int T, int i, bool present, bool key, const std::string& what) {
  const int N = T - 1;
  if (!present) {
    EXPECT_TRUE(std::isnan(s.lo[i]) && std::isnan(s.hi[i]) && std::isnan(s.pre[i])) << what << " row " << i << " must be absent";
    return;
  }
  const float* row = x + static_cast<size_t>(i) * T;
  EXPECT_EQ(std::isnan(s.pre[i]), !key) << what << " row " << i << " class key";
  if (key) {
    EXPECT_NEAR(s.pre[i], row[0], 1e-6) << what << " row " << i;
  }
  const double lo = s.lo[i], hi = s.hi[i];
  for (int k = 0; k < N; ++k)
    EXPECT_NEAR(lo + s.q[static_cast<size_t>(i) * N + k] * (hi - lo) / 255.0, row[1 + k], (hi - lo) / 510.0 + 1e-7)
        << what << " row " << i << " key " << k;
}

class ExploreCait : public TempDirTest {};

}  // namespace

// explore exits 0; every block's mean, rollout and heads hold the rows the block has with the forward's
// values, and the rows and keys it does not have marked absent; attention.npy the same with NaN; the page
// opens on the last class-attention block's class row and says why rows are absent; render --explore too.
TEST_F(ExploreCait, StoresTheRowsEachBlockHasAndMarksTheRestAbsent) {
  const std::string w = fixture("cait/cait_tiny/model.safetensors"), img = std::string(ATTNMAP_DATA_DIR) + "/chelsea.png";
  CliRun r = run_attnmap("explore " + q(img) + " -w " + q(w) + " -o " + q(dir / "p"));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("CaiT: the rows and keys its blocks do not have are stored as absent, not as zeros"), std::string::npos) << r.out;
  const nlohmann::json m = page_settings(dir / "p" / "index.html");
  ASSERT_TRUE(m.is_object());
  ASSERT_TRUE(m.contains("absent"));
  EXPECT_EQ(m["absent"]["class_blocks"], nlohmann::json::array({3, 4}));
  EXPECT_NE(m["absent"]["class_row"].get<std::string>().find("no query in its self-attention blocks 0..2"), std::string::npos);
  EXPECT_EQ(m["start"]["block"], 4);
  EXPECT_EQ(m["start"]["query"], 0);
  EXPECT_NE(slurp(dir / "p" / "index.html").find("const AB = M.absent"), std::string::npos);  // the page's CaiT part

  // The forward, as explore runs it (squash, the model's mean / std).
  const ViTWeights model = load_model(w);
  const HParams& hp = model.hp;
  const std::vector<uint8_t> bytes = read_file(img);
  const ModelInput in = preprocess(decode_image(bytes.data(), bytes.size(), img), hp.image_w, hp.image_h, RenderOptions{}.resize,
                                   hp.mean.data(), hp.std.data(), hp.crop_pct.value_or(0.875f));
  ForwardOptions fo;
  fo.keep_full = true;
  const ForwardResult f = vit_forward(model, in.chw.data(), fo);
  const int L = f.layers, H = f.heads, T = f.tokens;
  ASSERT_EQ(L, 5);
  ASSERT_EQ(T, 17);
  const size_t TT = static_cast<size_t>(T) * T;
  std::vector<int64_t> shape;
  const std::vector<float> npy = read_npy((dir / "p" / "attention.npy").string(), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{L, H, T, T}));
  for (int l = 0; l < L; ++l) {
    const bool ca = hp.is_class_attention(l);
    const std::string name = "block " + std::to_string(l);
    for (size_t e = 0; e < static_cast<size_t>(H) * TT; ++e) {  // attention.npy: NaN exactly where absent
      const size_t i = e % TT / T, k = e % T, at = l * H * TT + e;
      if (ca ? i > 0 : (i == 0 || k == 0)) EXPECT_TRUE(std::isnan(npy[at])) << name << " " << i << "," << k;
      else EXPECT_NEAR(npy[at], f.attn[at], 1e-6) << name << " " << i << "," << k;
    }
    char file[32];
    std::snprintf(file, sizeof file, "block%02d.js", l);
    const std::vector<StoredMap> maps = parse_block(inflate_bytes(block_bytes(dir / "p" / "data" / file), static_cast<size_t>(4 + H) * (3 * T * 4 + T * (T - 1))), 4 + H, T, 1);
    const float* probs = f.attn.data() + l * H * TT;
    const std::vector<float> mean = fuse_heads(probs, H, static_cast<int>(TT), HeadSelect{HeadSelect::Fusion::Mean, 0});
    const std::vector<float> roll = attention_rollout(f, l, HeadSelect{HeadSelect::Fusion::Mean, 0});
    for (int i = 0; i < T; ++i) {
      const bool attn_row = ca ? i == 0 : i > 0, roll_row = ca || i > 0;  // rollout: the patches' rows at every block
      expect_row(maps[0], mean.data(), T, i, attn_row, i == 0, name + " mean");
      expect_row(maps[3], roll.data(), T, i, roll_row, i == 0, name + " rollout");
      for (int h = 0; h < H; ++h) expect_row(maps[4 + h], probs + h * TT, T, i, attn_row, i == 0, name + " h" + std::to_string(h));
    }
  }
  // The forward's class rows of the class-attention blocks are a distribution over [class; patches].
  double s = 0;
  for (int k = 0; k < T; ++k) s += f.attn[4 * H * TT + k];
  EXPECT_NEAR(s, 1.0, 1e-5);

  r = run_attnmap("render " + q(img) + " -w " + q(w) + " -o " + q(dir / "r") + " --explore -q");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(slurp(dir / "r" / "chelsea.explore" / "data" / "block04.js"), slurp(dir / "p" / "data" / "block04.js"));
}
