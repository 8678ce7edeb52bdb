// test_figures.cpp - draw/scale, draw/canvas and draw/figures: ticks and labels, the styles against the
// plain overlay, the PNG pHYs chunk, and golden images of a panel, a strip, a heads grid, a comparison figure
// and a contact sheet made from the tiny committed model tests/fixtures/timm_small.
//
// Golden images live in tests/golden/; the comparison, its tolerance and how to regenerate them:
// tests/golden_util.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/error.hpp"
#include "draw/colormap.hpp"
#include "draw/figures.hpp"
#include "draw/overlay.hpp"
#include "io/image_io.hpp"
#include "maps/attention_maps.hpp"
#include "model/classify.hpp"
#include "model/preprocess.hpp"
#include "model/vit.hpp"
#include "checkpoint/weights.hpp"
#include "golden_util.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

SheetItem sheet_item(const Image* overlay, const std::string& name, const std::string& detail) {
  SheetItem it;
  it.overlay = overlay;
  it.name = name;
  it.detail = detail;
  return it;
}

Image uniform(int w, int h, uint8_t v) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.assign(static_cast<size_t>(w) * static_cast<size_t>(h) * 3, v);
  return img;
}

Image random_photo(int w, int h, unsigned seed) {
  Image img = uniform(w, h, 0);
  std::mt19937 rng(seed);
  for (auto& v : img.rgb) v = static_cast<uint8_t>(rng() & 0xff);
  return img;
}

// Positions (x, y) where `needle` appears in `hay` pixel for pixel.
std::vector<std::pair<int, int>> find_exact(const Image& hay, const Image& needle) {
  std::vector<std::pair<int, int>> out;
  const size_t row = static_cast<size_t>(needle.width) * 3;
  for (int y = 0; y + needle.height <= hay.height; ++y)
    for (int x = 0; x + needle.width <= hay.width; ++x) {
      bool same = true;
      for (int r = 0; r < needle.height && same; ++r)
        same = std::memcmp(&hay.rgb[(static_cast<size_t>(y + r) * hay.width + x) * 3],
                           &needle.rgb[static_cast<size_t>(r) * row], row) == 0;
      if (same) out.emplace_back(x, y);
    }
  return out;
}

Image crop(const Image& img, int x0, int y0, int w, int h) {
  Image out = uniform(w, h, 0);
  for (int y = 0; y < h; ++y)
    std::memcpy(&out.rgb[static_cast<size_t>(y) * w * 3], &img.rgb[(static_cast<size_t>(y + y0) * img.width + x0) * 3],
                static_cast<size_t>(w) * 3);
  return out;
}

// The tiny committed model (timm layout, 64x64 input, 4x4 grid, 2 blocks, 4 heads) run once on a small photo.
struct Tiny {
  ViTWeights model;
  Image photo;
  PhotoBox box;
  ForwardResult r;
  std::vector<std::pair<std::string, float>> top5;
  GridMap map(int layer, const HeadSelect& sel) const {
    return GridMap{class_attention_map(r, model.hp, layer, sel), model.hp.grid_w, model.hp.grid_h};
  }
};

const Tiny& tiny() {
  static const Tiny t = [] {
    Tiny x;
    x.model = load_model(fixture("timm_small/weights.json"));
    x.photo = resize_photo(load_image(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png"), 120, 80);
    const HParams& hp = x.model.hp;
    const ModelInput in = preprocess(x.photo, hp.image_w, hp.image_h, ResizeMode::Squash, hp.mean.data(), hp.std.data());
    box_pixels(in.box, x.photo.width, x.photo.height, &x.box.x0, &x.box.y0, &x.box.w, &x.box.h);
    ForwardOptions fo;
    fo.last_layer = hp.depth - 1;
    fo.to_end = x.model.head.present();
    x.r = vit_forward(x.model, in.chw.data(), fo);
    if (!x.r.logits.empty()) x.top5 = top_k_classes(x.r.logits, hp.labels, 5);
    return x;
  }();
  return t;
}

StyleOptions viridis() {
  StyleOptions st;
  st.cmap = colormap_table("viridis");
  return st;
}

HeadSelect head(int h) {
  HeadSelect s;
  s.fusion = HeadSelect::Fusion::Index;
  s.index = h;
  return s;
}

fs::path tmpdir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("attnmap_fig_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

// ---- scales --------------------------------------------------------------------------------------------

TEST(FigureScale, NiceTicksAndLabelsLikeMatplotlib) {
  auto ticks = [](double lo, double hi, int* e) {
    const Scale s{lo, hi, ""};
    return tick_labels(nice_ticks(s), e);
  };
  int e = 99;
  EXPECT_EQ(ticks(0.0, 0.1, &e), (std::vector<std::string>{"0.00", "0.02", "0.04", "0.06", "0.08", "0.10"}));
  EXPECT_EQ(e, 0);
  EXPECT_EQ(ticks(0.0, 1.0, &e), (std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  // A map's own range: ticks inside it only (the bar's ends are not ticks unless they are nice).
  EXPECT_EQ(ticks(0.0005, 0.155, &e),
            (std::vector<std::string>{"0.02", "0.04", "0.06", "0.08", "0.10", "0.12", "0.14"}));
  EXPECT_EQ(ticks(0.0, 0.25, &e), (std::vector<std::string>{"0.00", "0.05", "0.10", "0.15", "0.20", "0.25"}));
  EXPECT_EQ(ticks(-1.0, 1.0, &e), (std::vector<std::string>{"\u22121.0", "\u22120.5", "0.0", "0.5", "1.0"}));
  // Tiny values: one common exponent.
  EXPECT_EQ(ticks(0.0, 0.004, &e), (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  EXPECT_EQ(e, -3);
  EXPECT_EQ(exponent_label(e), "\u00d710\u207b\u00b3");
  EXPECT_EQ(ticks(0.0, 20000.0, &e), (std::vector<std::string>{"0.0", "0.5", "1.0", "1.5", "2.0"}));
  EXPECT_EQ(e, 4);
  EXPECT_EQ(exponent_label(0), "");
  // A 2.5 step (0.2 would give 9 ticks): the fewest decimals that write every tick exactly.
  EXPECT_EQ(ticks(0.0, 1.6, &e), (std::vector<std::string>{"0.00", "0.25", "0.50", "0.75", "1.00", "1.25", "1.50"}));
  // Flat: one tick.
  EXPECT_EQ(nice_ticks(Scale{0.3, 0.3, ""}), (std::vector<double>{0.3}));
  for (double hi : {0.013, 0.7, 3.3, 47.0, 0.00021, 1234.0}) {
    const auto t = nice_ticks(Scale{0.0, hi, ""});
    EXPECT_GE(t.size(), 4u) << hi;
    EXPECT_LE(t.size(), 7u) << hi;
    EXPECT_GE(t.front(), 0.0);
    EXPECT_LE(t.back(), hi * (1 + 1e-9));
  }
}

TEST(FigureScale, ParseResolveApply) {
  EXPECT_EQ(parse_scale("map").kind, ScaleKind::Map);
  EXPECT_EQ(parse_scale("figure").kind, ScaleKind::Figure);
  EXPECT_EQ(parse_scale("run").kind, ScaleKind::Run);
  const ScaleSpec f = parse_scale("0,0.05");
  EXPECT_EQ(f.kind, ScaleKind::Fixed);
  EXPECT_EQ(f.vmin, 0.0);
  EXPECT_EQ(f.vmax, 0.05);
  for (const char* bad : {"", "maps", "1", "0.05,0", "1,1", "a,b", "0,", ",1", "nan,1", "0,inf", "0,1,2"})
    EXPECT_THROW(parse_scale(bad), Error) << bad;
  const std::vector<float> a = {0.1f, 0.4f, 0.2f}, b = {0.0f, 0.3f, 0.9f};
  const Scale shared = scale_over({&a, &b}, "attention probability");
  EXPECT_FLOAT_EQ(static_cast<float>(shared.vmin), 0.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(shared.vmax), 0.9f);
  const Scale own = resolve_scale(parse_scale("map"), a, shared);
  EXPECT_FLOAT_EQ(static_cast<float>(own.vmax), 0.4f);
  EXPECT_EQ(own.units, "attention probability");
  EXPECT_EQ(resolve_scale(parse_scale("figure"), a, shared).vmax, shared.vmax);
  EXPECT_EQ(resolve_scale(f, a, shared).vmax, 0.05);
  // Clipped outside the scale.
  const std::vector<float> v = apply_scale({-1.0f, 0.025f, 0.05f, 3.0f}, Scale{0.0, 0.05, ""});
  EXPECT_EQ(v, (std::vector<float>{0.0f, 0.5f, 1.0f, 1.0f}));
  // With the map's own min-max: normalize_minmax bit for bit; flat maps are all zero in both.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.0f, 0.2f);
  std::vector<float> m(196);
  for (auto& x : m) x = u(rng);
  bool flat = true;
  EXPECT_EQ(apply_scale(m, scale_over({&m}, "")), normalize_minmax(m, &flat));
  EXPECT_FALSE(flat);
  const std::vector<float> c(10, 0.25f);
  EXPECT_EQ(apply_scale(c, scale_over({&c}, "")), normalize_minmax(c, &flat));
  EXPECT_TRUE(flat);
}

// ---- styles --------------------------------------------------------------------------------------------

TEST(FigureStyles, OverlayIsBlendOverlayByteForByte) {
  const Image photo = random_photo(61, 37, 3);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 0.1f);
  GridMap m{std::vector<float>(15), 5, 3};
  for (auto& x : m.values) x = u(rng);
  const PhotoBox box{4, 2, 50, 33};
  for (Upsample up : {Upsample::Nearest, Upsample::Bilinear, Upsample::Bicubic}) {
    StyleOptions st = viridis();
    st.upsample = up;
    st.alpha = 0.6f;
    bool flat = false;
    const std::vector<float> want01 = upsample_map(normalize_minmax(m.values, &flat), 5, 3, box.w, box.h, up);
    const Image want = blend_overlay(photo, want01, box.w, box.h, box.x0, box.y0, st.cmap, st.alpha);
    const Image got = draw_styled(photo, box, m, scale_over({&m.values}, ""), st);
    EXPECT_EQ(got.rgb, want.rgb) << static_cast<int>(up);
  }
  EXPECT_THROW(draw_styled(photo, PhotoBox{20, 0, 50, 33}, m, Scale{}, viridis()), Error);
  EXPECT_THROW(draw_styled(photo, box, GridMap{m.values, 4, 3}, Scale{}, viridis()), Error);
}

TEST(FigureStyles, AlphaByValueMaskAndContourValues) {
  // A 2 x 1 map [0, 1] drawn nearest into a 20 x 10 box of a 30 x 10 grey photo (100), grey colour map.
  const Image photo = uniform(30, 10, 100);
  const GridMap m{{0.0f, 1.0f}, 2, 1};
  const PhotoBox box{0, 0, 20, 10};
  StyleOptions st;
  st.cmap = colormap_table("gray");
  st.upsample = Upsample::Nearest;
  st.alpha = 0.5f;
  st.alpha_by_value = true;
  const Scale s{0.0, 1.0, ""};
  const Image abv = draw_styled(photo, box, m, s, st);
  auto px = [](const Image& img, int x, int y) { return img.rgb[(static_cast<size_t>(y) * img.width + x) * 3]; };
  EXPECT_EQ(px(abv, 2, 5), 100);   // value 0: transparent, the photo
  EXPECT_EQ(px(abv, 15, 5), 178);  // value 1: 0.5 * 100 + 0.5 * 255 = 177.5
  EXPECT_EQ(px(abv, 25, 5), 100);  // outside the box
  st.alpha_by_value = false;
  st.style = Style::Mask;
  const Image mask = draw_styled(photo, box, m, s, st);
  EXPECT_EQ(px(mask, 2, 5), 0);     // photo x 0
  EXPECT_EQ(px(mask, 15, 5), 100);  // photo x 1
  EXPECT_EQ(px(mask, 25, 5), 0);    // no map outside the box: black
  // Contour: iso-lines at the ticks inside (0, 1) over the untouched photo: far from the edge the photo,
  // on the step between the halves (x = 10) ink.
  st.style = Style::Contour;
  const Image con = draw_styled(photo, box, m, s, st);
  EXPECT_EQ(px(con, 2, 5), 100);
  EXPECT_EQ(px(con, 17, 5), 100);
  EXPECT_NE(px(con, 10, 5), 100);
  EXPECT_NE(px(con, 9, 5), 100);
  // The map alone: colour(value) inside the box, light grey outside.
  const Image alone = draw_map_alone(30, 10, box, m, s, st);
  EXPECT_EQ(px(alone, 2, 5), 0);
  EXPECT_EQ(px(alone, 15, 5), 255);
  EXPECT_EQ(px(alone, 25, 5), 224);
  EXPECT_EQ(parse_style("contour"), Style::Contour);
  EXPECT_THROW(parse_style("heat"), Error);
}

TEST(FigureStyles, IsoSegmentsOfAPeak) {
  // 3 x 3 zeros with 1 in the centre, level 0.5: four segments around the centre pixel (1.5, 1.5), each
  // crossing the edges halfway between the centre and its neighbours.
  std::vector<float> v(9, 0.0f);
  v[4] = 1.0f;
  const std::vector<float> s = iso_segments(v, 3, 3, 0.5f);
  ASSERT_EQ(s.size(), 16u);
  for (size_t i = 0; i < s.size(); i += 2) {
    const double d = std::fabs(s[i] - 1.5) + std::fabs(s[i + 1] - 1.5);  // on the diamond |dx| + |dy| = 0.5
    EXPECT_NEAR(d, 0.5, 1e-6) << i;
  }
  EXPECT_TRUE(iso_segments(v, 3, 3, 2.0f).empty());
  EXPECT_TRUE(iso_segments(v, 3, 3, -1.0f).empty());
}

// ---- PNG pHYs, canvas, paths ---------------------------------------------------------------------------

TEST(FigureCanvas, PngCarriesPhysAndTheSoftwareMark) {
  const Image img = uniform(4, 3, 50);
  PngOptions po;
  po.dpi = 300.0;
  const std::vector<uint8_t> png = encode_png(img, po);
  const std::string s(png.begin(), png.end());
  const size_t at = s.find("pHYs");
  ASSERT_NE(at, std::string::npos);
  auto be32 = [&](size_t i) {
    return (uint32_t(png[i]) << 24) | (uint32_t(png[i + 1]) << 16) | (uint32_t(png[i + 2]) << 8) | png[i + 3];
  };
  EXPECT_EQ(be32(at - 4), 9u);       // chunk length
  EXPECT_EQ(be32(at + 4), 11811u);   // round(300 / 0.0254) pixels per metre
  EXPECT_EQ(be32(at + 8), 11811u);
  EXPECT_EQ(png[at + 12], 1);        // unit: metre
  const std::vector<uint8_t> plain = encode_png(img);
  EXPECT_EQ(std::string(plain.begin(), plain.end()).find("pHYs"), std::string::npos);
  const fs::path d = tmpdir("phys");
  write_png((d / "a.png").string(), img, po);
  EXPECT_TRUE(written_by_attnmap((d / "a.png").string()));
  EXPECT_EQ(load_image((d / "a.png").string()).rgb, img.rgb);
  po.dpi = -1;
  EXPECT_THROW(encode_png(img, po), Error);
  fs::remove_all(d);
}

TEST(FigureCanvas, VectorPagesMeasureInchesAndPathsAreChecked) {
  const fs::path d = tmpdir("canvas");
  for (FigureFormat f : parse_figure_formats("pdf,svg")) {
    Canvas c(600, 300, 200.0, f);  // 3 x 1.5 inches = 216 x 108 points
    c.fill_rect(10, 10, 100, 50, Rgb{200, 0, 0});
    TextStyle ts;
    ts.px = 20;
    const TextSize sz = c.text("block 3", 20, 100, ts);
    EXPECT_GT(sz.w, 40.0);
    EXPECT_LT(sz.w, 120.0);
    EXPECT_GT(c.text("caf\xe9.png", 20, 150, ts).w, 40.0);  // not UTF-8 (a Latin-1 file name): drawn as caf\xe9.png
    c.image(uniform(40, 20, 128), 300, 100, 200, 100, Filter::Good);
    const std::string path = (d / (std::string("a") + figure_extension(f))).string();
    c.save(path);
    const std::string body = slurp(path);
    if (f == FigureFormat::Pdf) {
      EXPECT_EQ(body.rfind("%PDF", 0), 0u);
      EXPECT_NE(body.find("/MediaBox [ 0 0 216 108 ]"), std::string::npos);
    } else {
      EXPECT_NE(body.find("width=\"216pt\" height=\"108pt\""), std::string::npos) << body.substr(0, 300);
    }
  }
  EXPECT_THROW(parse_figure_formats("png,jpg"), Error);
  EXPECT_THROW(parse_figure_formats("png,png"), Error);
  EXPECT_THROW(parse_figure_formats(""), Error);
  EXPECT_THROW(Canvas(0, 10, 300, FigureFormat::Png), Error);
  EXPECT_THROW(Canvas(10, 10, 0, FigureFormat::Png), Error);
  EXPECT_NO_THROW(check_figure_path((d / "new" / "deeper" / "fig.pdf").string()));
  // Relative, in folders still to be made under the current one (it was refused: "new is not a folder").
  ASSERT_FALSE(fs::exists("attnmap-no-such-folder"));
  EXPECT_NO_THROW(check_figure_path("attnmap-no-such-folder/deeper/fig.pdf"));
  EXPECT_NO_THROW(check_figure_path("fig.pdf"));
  EXPECT_THROW(check_figure_path(d.string()), Error);  // a folder
  std::ofstream((d / "file").string()) << "x";
  EXPECT_THROW(check_figure_path((d / "file" / "fig.pdf").string()), Error);  // under a file
  if (::geteuid() != 0) {
    fs::create_directories(d / "ro");
    fs::permissions(d / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(check_figure_path((d / "ro" / "fig.pdf").string()), Error);
  }
  fs::remove_all(d);
}

// ---- golden figures ------------------------------------------------------------------------------------

TEST(Figures, PanelMatchesGoldenAndHoldsTheOverlayPixelForPixel) {
  const Tiny& t = tiny();
  const fs::path d = tmpdir("panel");
  const GridMap m = t.map(1, HeadSelect{});
  const StyleOptions st = viridis();
  const Scale s = scale_over({&m.values}, "attention probability");
  FigureOptions fo;
  fo.dpi = 150;
  const auto paths = write_panel((d / "tiny.panel").string(), "photo.png \u2014 timm ViT, 2 blocks \u00d7 4 heads",
                                 t.photo, t.box, {PanelRow{"block 1, mean", m, s}}, st, fo);
  ASSERT_EQ(paths, (std::vector<std::string>{(d / "tiny.panel.png").string()}));
  EXPECT_TRUE(matches_golden(paths[0], "panel.png"));
  // The overlay cell is the plain overlay (draw_styled with the map's own min-max = blend_overlay) exactly.
  const Image panel = load_image(paths[0]);
  EXPECT_EQ(find_exact(panel, draw_styled(t.photo, t.box, m, s, st)).size(), 1u);
  EXPECT_EQ(find_exact(panel, t.photo).size(), 1u);
  fs::remove_all(d);
}

TEST(Figures, LayerStripMatchesGolden) {
  const Tiny& t = tiny();
  const fs::path d = tmpdir("strip");
  std::vector<GridMap> maps = {t.map(0, HeadSelect{}), t.map(1, HeadSelect{})};
  const Scale s = scale_over({&maps[0].values, &maps[1].values}, "attention probability");
  const TilePhoto tp = tile_photo(t.photo, t.box, 96);
  std::vector<Image> tiles;
  for (const auto& m : maps) tiles.push_back(draw_styled(tp.photo, tp.box, m, s, viridis()));
  TileFigure fig;
  fig.title = "photo.png \u2014 every block, heads fused by mean";
  fig.cols = 2;
  fig.scale = &s;
  fig.cmap = viridis().cmap;
  FigureOptions fo;
  const auto paths = write_tiles((d / "tiny.layers").string(), fig, tiles, {"block 0", "block 1"}, fo);
  EXPECT_TRUE(matches_golden(paths.at(0), "layers.png"));
  EXPECT_EQ(find_exact(load_image(paths[0]), tiles[1]).size(), 1u);
  fs::remove_all(d);
}

TEST(Figures, HeadsGridMatchesGolden) {
  const Tiny& t = tiny();
  const fs::path d = tmpdir("heads");
  std::vector<GridMap> maps;
  for (int h = 0; h < 4; ++h) maps.push_back(t.map(1, head(h)));
  maps.push_back(t.map(1, HeadSelect{}));
  std::vector<const std::vector<float>*> all;
  for (const auto& m : maps) all.push_back(&m.values);
  const Scale s = scale_over(all, "attention probability");
  const TilePhoto tp = tile_photo(t.photo, t.box, 96);
  std::vector<Image> tiles;
  std::vector<std::string> labels;
  for (size_t i = 0; i < maps.size(); ++i) {
    tiles.push_back(draw_styled(tp.photo, tp.box, maps[i], s, viridis()));
    labels.push_back(i < 4 ? "head " + std::to_string(i) : "mean");
  }
  TileFigure fig;
  fig.title = "photo.png \u2014 heads of block 1";
  fig.note = "Tiles: heads 0\u20133 of block 1, then their mean; one colour scale for all tiles.";
  fig.scale = &s;
  fig.cmap = viridis().cmap;
  const auto paths = write_tiles((d / "tiny.heads").string(), fig, tiles, labels, FigureOptions{});
  EXPECT_TRUE(matches_golden(paths.at(0), "heads.png"));
  // 5 tiles: 3 columns, 2 rows, every tile present once.
  const Image sheet = load_image(paths[0]);
  for (const Image& tile : tiles) EXPECT_EQ(find_exact(sheet, tile).size(), 1u);
  EXPECT_THROW(write_tiles((d / "x").string(), fig, tiles, {"a"}, FigureOptions{}), Error);
  fs::remove_all(d);
}

TEST(Figures, ComparisonFigureMatchesGolden) {
  const Tiny& t = tiny();
  const fs::path d = tmpdir("figure");
  const Image other = resize_photo(load_image(std::string(ATTNMAP_DATA_DIR) + "/coffee.png"), 90, 60);
  FigureRow a{"chelsea.png", &t.photo, t.box, {t.map(0, HeadSelect{}), t.map(1, HeadSelect{})}};
  FigureRow b{"coffee.png", &other, PhotoBox{0, 0, 90, 60}, {t.map(0, head(2)), t.map(1, head(2))}};
  const Scale s = scale_over({&a.maps[0].values, &a.maps[1].values, &b.maps[0].values, &b.maps[1].values},
                             "attention probability");
  const std::string path = (d / "fig.png").string();
  EXPECT_EQ(write_comparison(path, {"photo", "L0/mean", "L1/mean"}, {a, b}, s, viridis(), 3.5, 100), path);
  EXPECT_TRUE(matches_golden(path, "figure.png"));
  EXPECT_EQ(load_image(path).width, 350);  // 3.5 in at 100 dpi
  EXPECT_THROW(write_comparison((d / "fig.jpg").string(), {"photo"}, {a}, s, viridis(), 3.5, 100), Error);
  EXPECT_THROW(write_comparison(path, {"photo", "L0"}, {a}, s, viridis(), 3.5, 100), Error);  // 2 maps, 1 column
  EXPECT_THROW(write_comparison(path, {"photo", "a", "b"}, {a}, s, viridis(), 0.3, 100), Error);  // cells too small
  fs::remove_all(d);
}

TEST(Figures, ContactSheetMatchesGoldenAndSplitsIntoPages) {
  const Tiny& t = tiny();
  const fs::path d = tmpdir("sheet");
  const GridMap fused = t.map(1, HeadSelect{});
  const Scale s = scale_over({&fused.values}, "");
  std::vector<Image> overlays;
  for (int h = 0; h < 4; ++h) overlays.push_back(draw_styled(t.photo, t.box, t.map(1, head(h)), s, viridis()));
  std::vector<SheetItem> items;
  for (int h = 0; h < 4; ++h)
    items.push_back(sheet_item(&overlays[static_cast<size_t>(h)], h == 3 ? "a_rather_long_file_name_3.png" : "cat_" + std::to_string(h) + ".png",
                               "class " + std::to_string(h) + " 41% \u00b7 peak 0.21"));
  SheetOptions so;
  so.columns = 3;
  so.thumb_long = 96;
  so.cmap = colormap_table("viridis");  // the colour bar of the one scale the thumbnails share (issue 28)
  so.scale = Scale{s.vmin, s.vmax, "attention probability"};
  const auto one = write_contact_sheet((d / "sheet.png").string(), "contact sheet \u2014 4 images", items, so);
  ASSERT_EQ(one, (std::vector<std::string>{(d / "sheet.png").string()}));
  EXPECT_TRUE(matches_golden(one[0], "sheet.png"));
  // A page limit of one row: two pages of 3 and 1 thumbnails.
  so.max_page_height = 10;
  const auto two = write_contact_sheet((d / "sheet.png").string(), "contact sheet", items, so);
  EXPECT_EQ(two, (std::vector<std::string>{(d / "sheet-1.png").string(), (d / "sheet-2.png").string()}));
  EXPECT_EQ(load_image(two[0]).width, load_image(two[1]).width);
  EXPECT_LT(load_image(two[0]).height, load_image(one[0]).height);
  EXPECT_THROW(write_contact_sheet((d / "sheet.pdf").string(), "", items, so), Error);
  so.columns = 0;
  EXPECT_THROW(write_contact_sheet((d / "sheet.png").string(), "", items, so), Error);
  fs::remove_all(d);
}

// PDF and SVG are the same drawing: rendered back (pdftoppm, rsvg-convert) at the PNG's pixel size, the
// photo and overlay cells match the PNG's within the resampling of the renderers.
TEST(Figures, PdfAndSvgRenderBackLikeThePng) {
  const Tiny& t = tiny();
  const fs::path d = tmpdir("vector");
  const GridMap m = t.map(1, HeadSelect{});
  const Scale s = scale_over({&m.values}, "attention probability");
  FigureOptions fo;
  fo.dpi = 150;
  fo.width_in = -1;  // every format as drawn: the PDF/SVG pages are the PNG's layout (pixels / dpi inches)
  fo.formats = parse_figure_formats("png,pdf,svg");
  const auto paths = write_panel((d / "p.panel").string(), "title", t.photo, t.box, {PanelRow{"view", m, s}}, viridis(), fo);
  ASSERT_EQ(paths.size(), 3u);
  const Image png = load_image(paths[0]);
  const Image ov = draw_styled(t.photo, t.box, m, s, viridis());
  const auto at = find_exact(png, ov);
  ASSERT_EQ(at.size(), 1u);
  const std::string W = std::to_string(png.width), H = std::to_string(png.height);
  // Mean absolute difference allowed in a photo cell and over the page: rsvg-convert and pdftocairo (cairo
  // again) draw 1:1 images exactly (measured 0.3 and 0.003 levels); poppler's own Splash renderer (pdftoppm)
  // resamples them by a sub-pixel (5.7 levels, a one-pixel shift gives 8.3), so it gets looser bounds.
  struct Tool {
    const char* name;
    std::string cmd;
    std::string out;
    double cell, page;
  };
  const std::string pdf = q(paths[1]), scale = " -scale-to-x " + W + " -scale-to-y " + H + " ";
  const std::vector<Tool> tools = {
      {"pdftocairo", "pdftocairo -png -singlefile" + scale + pdf + " " + q(d / "pc"), (d / "pc.png").string(), 1.0, 2.0},
      {"pdftoppm", "pdftoppm -png -singlefile" + scale + pdf + " " + q(d / "pp"), (d / "pp.png").string(), 7.0, 6.0},
      {"rsvg-convert", "rsvg-convert -w " + W + " -h " + H + " -b white -o " + q(d / "svg.png") + " " + q(paths[2]),
       (d / "svg.png").string(), 1.0, 2.0}};
  for (const Tool& tool : tools) {
    if (std::system((std::string("command -v ") + tool.name + " >/dev/null 2>&1").c_str()) != 0) {
      GTEST_SKIP() << tool.name << " is not installed (Debian poppler-utils / librsvg2-bin: tools/deps.sh test)";
    }
    ASSERT_EQ(std::system((tool.cmd + " 2>/dev/null").c_str()), 0) << tool.cmd;
    const Image back = load_image(tool.out);
    ASSERT_EQ(back.width, png.width) << tool.name;
    ASSERT_EQ(back.height, png.height) << tool.name;
    for (const Image& cell : {t.photo, ov}) {
      const auto pos = find_exact(png, cell).at(0);
      const Image got = crop(back, pos.first, pos.second, cell.width, cell.height);
      double sum = 0;
      for (size_t i = 0; i < got.rgb.size(); ++i) sum += std::abs(int(got.rgb[i]) - int(cell.rgb[i]));
      const double mean = sum / static_cast<double>(got.rgb.size());
      EXPECT_LT(mean, tool.cell) << tool.name << ": mean difference " << mean << " levels in a photo cell";
    }
    // And the whole page looks the same (text and bar included), allowing for anti-aliasing.
    double sum = 0;
    for (size_t i = 0; i < back.rgb.size(); ++i) sum += std::abs(int(back.rgb[i]) - int(png.rgb[i]));
    EXPECT_LT(sum / static_cast<double>(back.rgb.size()), tool.page) << tool.name;
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(d);
}

// ---- render's wiring -----------------------------------------------------------------------------------

TEST(FiguresCli, PanelStripsDpiAndRefusals) {
  const fs::path d = tmpdir("cli");
  const std::string cat = q(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  const CliRun r = run_attnmap("render " + cat + " -o " + q(d / "a") +
                               " --panel --strip layers --strip heads --dpi 200 --figure-format png,pdf");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* f : {"chelsea.png", "chelsea.panel.png", "chelsea.panel.pdf", "chelsea.layers.png",
                        "chelsea.layers.pdf", "chelsea.heads.png", "chelsea.heads.pdf"})
    EXPECT_TRUE(fs::exists(d / "a" / f)) << f;
  // The overlay inside the panel is NAME.png's photo part (above its legend) pixel for pixel, which is the
  // bare overlay of --no-legend; --dpi is in every PNG (200 dpi = 7874 px/m).
  const Image photo = load_image(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png");
  Image overlay = load_image((d / "a" / "chelsea.png").string());
  ASSERT_GT(overlay.height, photo.height);  // the legend under the photo
  ASSERT_EQ(overlay.width, photo.width);
  overlay.height = photo.height;
  overlay.rgb.resize(static_cast<size_t>(photo.width) * static_cast<size_t>(photo.height) * 3);
  EXPECT_EQ(find_exact(load_image((d / "a" / "chelsea.panel.png").string()), overlay).size(), 1u);
  ASSERT_EQ(run_attnmap("render " + cat + " -o " + q(d / "bare") + " --no-legend --dpi 200").status, 0);
  EXPECT_EQ(load_image((d / "bare" / "chelsea.png").string()).rgb, overlay.rgb);
  for (const char* f : {"chelsea.png", "chelsea.panel.png", "chelsea.heads.png"})
    EXPECT_NE(slurp(d / "a" / f).find(std::string("pHYs\0\0\x1e\xc2", 8)), std::string::npos) << f;
  // Without --dpi, NAME.png is today's file: no pHYs, the same bytes as a run without figures.
  ASSERT_EQ(run_attnmap("render " + cat + " -o " + q(d / "b")).status, 0);
  ASSERT_EQ(run_attnmap("render " + cat + " -o " + q(d / "c") + " --panel").status, 0);
  EXPECT_EQ(slurp(d / "b" / "chelsea.png"), slurp(d / "c" / "chelsea.png"));
  EXPECT_EQ(slurp(d / "b" / "chelsea.png").find("pHYs"), std::string::npos);
  // --style mask: the plain overlay is black where the map is at its minimum (the scale's bottom).
  ASSERT_EQ(run_attnmap("render " + cat + " -o " + q(d / "m") + " --style mask").status, 0);
  const Image mask = load_image((d / "m" / "chelsea.png").string());
  EXPECT_LT(*std::min_element(mask.rgb.begin(), mask.rgb.end()), 3);
  // Usage errors, before any image is rendered.
  for (const char* bad : {"--strip rows", "--scale 1,0", "--style heat", "--dpi 0", "--dpi x",
                          "--figure-format gif", "--panel --threshold 0.5", "--style mask --alpha-by-value"}) {
    const CliRun e = run_attnmap("render " + cat + " -o " + q(d / "bad") + " " + bad);
    EXPECT_EQ(e.status, 2) << bad << ": " << e.err;
    EXPECT_NE(e.err.find("error"), std::string::npos) << bad;
  }
  // fontconfig without DejaVu Sans (an empty configuration): one line naming the package, exit 2, nothing written.
  std::ofstream((d / "fonts.conf").string()) << "<?xml version=\"1.0\"?>\n<fontconfig></fontconfig>\n";
  const CliRun nofont = run_attnmap("render " + cat + " -o " + q(d / "nf") + " --panel",
                                    "FONTCONFIG_FILE=" + q(d / "fonts.conf") + " ");
  EXPECT_EQ(nofont.status, 2) << nofont.err;
  EXPECT_NE(nofont.err.find("install fonts-dejavu-core"), std::string::npos) << nofont.err;
  EXPECT_EQ(std::count(nofont.err.begin(), nofont.err.end(), '\n'), 1) << nofont.err;
  EXPECT_FALSE(fs::exists(d / "nf"));
  // A plain run too (NAME.png's legend is text), saying --no-legend needs no font; with it, the run works.
  const CliRun plain = run_attnmap("render " + cat + " -o " + q(d / "nf2"), "FONTCONFIG_FILE=" + q(d / "fonts.conf") + " ");
  EXPECT_EQ(plain.status, 2) << plain.err;
  EXPECT_NE(plain.err.find("--no-legend"), std::string::npos) << plain.err;
  EXPECT_EQ(run_attnmap("render " + cat + " -o " + q(d / "nf3") + " --no-legend", "FONTCONFIG_FILE=" + q(d / "fonts.conf") + " ")
                .status,
            0);
  // ... which $ATTNMAP_FONT overrides with a font file.
  const CliRun own = run_attnmap("render " + cat + " -o " + q(d / "of") + " --panel",
                                 "FONTCONFIG_FILE=" + q(d / "fonts.conf") +
                                     " ATTNMAP_FONT=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ");
  EXPECT_EQ(own.status, 0) << own.err;
  EXPECT_TRUE(fs::exists(d / "of" / "chelsea.panel.png"));
  fs::remove_all(d);
}

// --strip layers holds, tile for tile, every block's map (heads fused by --head) on one scale over them all,
// and --strip heads every head of the block plus their mean: recomputed here from the model and found
// pixel for pixel in the files render wrote.
TEST(FiguresCli, StripTilesAreEveryBlocksAndHeadsMapOnOneScale) {
  const fs::path d = tmpdir("strips");
  const std::string photo_path = std::string(ATTNMAP_DATA_DIR) + "/composites/0005_sandal.png";
  const CliRun r = run_attnmap("render " + q(photo_path) + " -o " + q(d) + " --strip layers --strip heads --head max");
  ASSERT_EQ(r.status, 0) << r.err;
  const ViTWeights model = load_model(std::string(ATTNMAP_TEST_DIR) + "/../weights/default.json");
  const HParams& hp = model.hp;
  const Image photo = load_image(photo_path);
  const ModelInput in = preprocess(photo, hp.image_w, hp.image_h, ResizeMode::Squash, hp.mean.data(), hp.std.data());
  PhotoBox box;
  box_pixels(in.box, photo.width, photo.height, &box.x0, &box.y0, &box.w, &box.h);
  ForwardOptions fo;
  fo.last_layer = hp.depth - 1;
  fo.to_end = model.head.present();  // as render: the last block's full rows (not the class row alone) then
  const ForwardResult fr = vit_forward(model, in.chw.data(), fo);
  const TilePhoto tp = tile_photo(photo, box);
  auto check = [&](const std::vector<GridMap>& maps, const std::string& file) {
    std::vector<const std::vector<float>*> all;
    for (const auto& m : maps) all.push_back(&m.values);
    const Scale s = scale_over(all, "");
    const Image sheet = load_image((d / file).string());
    for (size_t i = 0; i < maps.size(); ++i)
      EXPECT_EQ(find_exact(sheet, draw_styled(tp.photo, tp.box, maps[i], s, viridis())).size(), 1u) << file << " " << i;
  };
  HeadSelect mx;
  mx.fusion = HeadSelect::Fusion::Max;
  std::vector<GridMap> layers, heads;
  for (int l = 0; l < hp.depth; ++l) layers.push_back(GridMap{class_attention_map(fr, hp, l, mx), hp.grid_w, hp.grid_h});
  const int block = hp.default_layer.value_or(-1) < 0 ? hp.depth + hp.default_layer.value_or(-1) : *hp.default_layer;
  for (int h = 0; h < hp.num_heads; ++h) heads.push_back(GridMap{class_attention_map(fr, hp, block, head(h)), hp.grid_w, hp.grid_h});
  heads.push_back(GridMap{class_attention_map(fr, hp, block, mx), hp.grid_w, hp.grid_h});  // the fused map: max
  check(layers, "0005_sandal.layers.png");
  check(heads, "0005_sandal.heads.png");
  if (!::testing::Test::HasFailure()) fs::remove_all(d);
}

// Issue 26 review: a title keeps its line breaks (the strips' "…top-1: Bag 98.9%\nevery block, …" is two lines,
// not a literal "\x0a"), while a one-line label shows a newline in a file name as its escape.
TEST(FigureCanvas, TitlesKeepTheirLineBreaksLabelsEscapeThem) {
  Canvas c(600, 300, 100.0, FigureFormat::Png);
  TextStyle title;
  title.px = 20;
  title.width = 580;
  const double one = c.measure("top-1: Bag 98.9%", title).h;
  EXPECT_GT(c.measure("top-1: Bag 98.9%\nevery block, head 3", title).h, 1.8 * one);
  TextStyle label = title;
  label.ellipsize = true;
  EXPECT_LT(c.measure("new\nline.png", label).h, 1.2 * one);
  EXPECT_GT(c.measure("new\nline.png", label).w, c.measure("newline.png", label).w);  // drawn as new\x0aline.png
}
