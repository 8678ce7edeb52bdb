// test_gallery.cpp - the static HTML gallery (--gallery): links, escaping, thumbnails, rows.
// The page's behaviour in a browser (images load, sorting, no request leaves the folder) is checked by
// tests/browser/gallery_test.mjs (ctest Gallery.Browser).
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "draw/gallery.hpp"
#include "io/image_io.hpp"
#include "test_util.hpp"

using namespace attnmap;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("attnmap_gallery_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

Image gradient(int w, int h) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) img.rgb[(static_cast<size_t>(y) * w + x) * 3 + c] = static_cast<uint8_t>((x * 7 + y * 3 + c * 50) % 256);
  return img;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(Gallery, RelativeUrlsArePercentEncodedAndRelativeToTheGallery) {
  EXPECT_EQ(relative_url("out/a b.png", "out/gallery"), "../a%20b.png");
  EXPECT_EQ(relative_url("out/sub/x#1?.png", "out/gallery"), "../sub/x%231%3F.png");
  EXPECT_EQ(relative_url("out/gallery/thumbs/000001.png", "out/gallery"), "thumbs/000001.png");
  EXPECT_EQ(relative_url("out/caf\xc3\xa9.png", "out"), "caf%C3%A9.png");
  EXPECT_EQ(relative_url("/abs/x.png", "/abs/deep/er"), "../../x.png");
}

TEST(Gallery, HtmlEscapesEverySpecialCharacter) {
  EXPECT_EQ(html_escape("<a href=\"x\">Tom's & Jerry</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom&#39;s &amp; Jerry&lt;/a&gt;");
}

TEST(Gallery, WritesOneRowPerInputWithThumbnailsLinksAndStatistics) {
  const fs::path d = scratch("rows");
  write_png((d / "a.png").string(), gradient(400, 200));
  write_png((d / "b<1>.png").string(), gradient(50, 30));
  std::vector<GalleryEntry> e(3);
  e[0].input = "photos/a_long-name.v2.jpg";
  e[0].status = "done";
  e[0].outputs = {(d / "a.png").string(), (d / "a.npy").string()};
  e[0].has_stats = true;
  e[0].map_max = 0.25;
  e[0].argmax_row = 3;
  e[0].argmax_col = 9;
  e[0].entropy = 4.5;
  e[0].milliseconds = 12.5;
  e[0].top1 = "Coat";
  e[0].top1_probability = 0.632;
  e[1].input = "photos/b<1>.jpg";
  e[1].status = "skipped";
  e[1].outputs = {(d / "b<1>.png").string()};
  e[2].input = "photos/broken.jpg";
  e[2].status = "failed";
  e[2].error = "photos/broken.jpg: truncated JPEG <cut>";
  const int thumbs = write_gallery((d / "gallery").string(), e);
  EXPECT_EQ(thumbs, 2);
  const Image t0 = load_image((d / "gallery/thumbs/000000.png").string());
  EXPECT_EQ(t0.width, 128);  // 400x200 shrunk to fit 128: 128x64
  EXPECT_EQ(t0.height, 64);
  const Image t1 = load_image((d / "gallery/thumbs/000001.png").string());
  EXPECT_EQ(t1.width, 50);  // never enlarged
  EXPECT_FALSE(fs::exists(d / "gallery/thumbs/000002.png"));
  const std::string html = slurp(d / "gallery/index.html");
  EXPECT_EQ(count(html, "<tr data-status="), 3u);
  EXPECT_NE(html.find("<a href=\"../a.png\"><img loading=\"lazy\" src=\"thumbs/000000.png\""), std::string::npos);
  EXPECT_NE(html.find("href=\"../a.npy\""), std::string::npos);
  EXPECT_NE(html.find("href=\"../b%3C1%3E.png\""), std::string::npos);
  EXPECT_NE(html.find("photos/b&lt;1&gt;.jpg"), std::string::npos);
  EXPECT_EQ(html.find("photos/b<1>"), std::string::npos);
  EXPECT_NE(html.find("truncated JPEG &lt;cut&gt;"), std::string::npos);
  EXPECT_NE(html.find("data-v=\"0.25\">0.2500</td>"), std::string::npos);
  EXPECT_NE(html.find(">3, 9</td>"), std::string::npos);
  EXPECT_NE(html.find(">63.2%</td>"), std::string::npos);
  // Cards: the file name with a break opportunity after each '_', '-', '.' (never inside a word), the
  // whole path as its tooltip, the folder on its own line, the outputs by what follows the input's stem.
  EXPECT_NE(html.find("<div class=\"name\" title=\"photos/a_long-name.v2.jpg\">a_<wbr>long-<wbr>name.<wbr>v2.<wbr>jpg</div>"),
            std::string::npos);
  EXPECT_NE(html.find("<div class=\"dir\" title=\"photos/a_long-name.v2.jpg\"><span dir=\"ltr\">photos/</span></div>"),
            std::string::npos);
  EXPECT_NE(html.find("title=\"a.npy\">a.<wbr>npy</a>"), std::string::npos);  // a.png's stem is not the input's
  // Every output of a card shown: the list wraps (issue 41: nowrap and an ellipsis hid .panel.png / .layers.png).
  EXPECT_NE(html.find(".outs{display:flex;flex-wrap:wrap;"), std::string::npos);
  EXPECT_EQ(html.find("text-overflow:ellipsis}\na.out"), std::string::npos);
  EXPECT_NE(html.find("grid-template-columns:repeat(auto-fill,minmax(138px,1fr))"), std::string::npos);
  // Nothing from outside: no remote URL and no external script, style or font.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  fs::remove_all(d);
}

TEST(Gallery, UnwritableFolderIsOneError) {
  const fs::path d = scratch("unwritable");
  write_png((d / "file").string(), gradient(4, 4));
  try {
    write_gallery((d / "file" / "gallery").string(), {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create the gallery folder"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}
