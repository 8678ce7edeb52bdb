#include "draw/gallery.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/error.hpp"
#include "core/threads.hpp"
#include "draw/overlay.hpp"
#include "io/image_io.hpp"

namespace attnmap {

namespace fs = std::filesystem;

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string relative_url(const std::string& path, const std::string& from) {
  const fs::path p = fs::absolute(fs::path(path)).lexically_normal();
  const fs::path f = fs::absolute(fs::path(from)).lexically_normal();
  const std::string rel = p.lexically_relative(f).generic_string();
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (const char ch : rel.empty() ? p.generic_string() : rel) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

namespace {

/// Text shown on the page: control and bidirectional formatting characters as escapes (printable: a name's
/// U+202E would otherwise show it reversed), then HTML-escaped.
std::string html_text(const std::string& text) { return html_escape(printable(text)); }

std::string thumb_name(size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "thumbs/%06zu.png", index);
  return buf;
}

/// Shrinks the overlay at `overlay` to fit `size` x `size` and writes it to `out`; false when the overlay
/// cannot be read (a failed or missing output), so the row goes without a thumbnail.
bool write_thumbnail(const std::string& overlay, const std::string& out, int size, const std::vector<PngText>& text) {
  try {
    const Image img = load_image(overlay);
    const double s = std::min(1.0, static_cast<double>(size) / std::max(img.width, img.height));
    const int w = std::max(1, static_cast<int>(std::lround(img.width * s)));
    const int h = std::max(1, static_cast<int>(std::lround(img.height * s)));
    PngOptions po;
    po.text = text;
    write_png(out, (w == img.width && h == img.height) ? img : resize_photo(img, w, h), po);
    return true;
  } catch (const Error&) {
    return false;
  }
}

/// Thumbnails of every entry with an overlay, on all usable cores; has_thumb[i] says which were written.
std::vector<char> write_thumbnails(const std::string& dir, const std::vector<GalleryEntry>& entries, int size,
                                   const std::vector<PngText>& text) {
  std::vector<char> has_thumb(entries.size(), 0);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < entries.size(); i = next++) {
      const GalleryEntry& e = entries[i];
      if (e.status == "failed" || e.outputs.empty()) continue;
      has_thumb[i] = write_thumbnail(e.outputs.front(), (fs::path(dir) / thumb_name(i)).string(), size, text) ? 1 : 0;
    }
  };
  const unsigned n = std::max(1u, std::min(std::thread::hardware_concurrency(), 8u));
  run_on_threads(static_cast<int>(n), work);  // fewer threads when the system refuses some
  return has_thumb;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// A table cell whose sort key is `key` (numbers sort numerically, "" last).
std::string cell(const std::string& cls, const std::string& key, const std::string& html) {
  return "<td class=\"" + cls + "\" data-v=\"" + html_text(key) + "\">" + html + "</td>";
}

std::string row_html(const std::string& dir, const GalleryEntry& e, size_t i, bool thumb) {
  std::string r = "<tr data-status=\"" + html_escape(e.status) + "\">";
  r += cell("n", std::to_string(i + 1), std::to_string(i + 1));
  std::string t = "<span class=\"none\">no image</span>";
  if (thumb) {
    const std::string href = relative_url(e.outputs.front(), dir);
    t = "<a href=\"" + href + "\"><img loading=\"lazy\" src=\"" + thumb_name(i) + "\" alt=\"" + html_text(e.input) +
        "\"></a>";
  }
  r += "<td class=\"thumb\">" + t + "</td>";
  std::string files = "<div class=\"name\">" + html_text(e.input) + "</div>";
  for (const std::string& o : e.outputs) {
    // An explorer (render --explore: NAME.explore/index.html) is linked by its folder's name.
    const fs::path op(o);
    const std::string folder = op.parent_path().filename().string();
    const bool page = op.filename() == "index.html" && folder.size() > 8 && folder.compare(folder.size() - 8, 8, ".explore") == 0;
    files += std::string("<a class=\"out") + (page ? " explore" : "") + "\" href=\"" + relative_url(o, dir) + "\">" +
             html_text(page ? folder : op.filename().string()) + "</a> ";
  }
  r += cell("file", e.input, files);
  std::string st = "<span class=\"st " + html_escape(e.status) + "\">" + html_escape(e.status) + "</span>";
  if (!e.error.empty()) st += "<div class=\"err\">" + html_text(e.error) + "</div>";
  r += cell("status", e.status, st);
  const bool s = e.has_stats;
  r += cell("num", s ? fmt("%.9g", e.map_max) : "", s ? fmt("%.4f", e.map_max) : "");
  const std::string patch = s ? std::to_string(e.argmax_row) + ", " + std::to_string(e.argmax_col) : "";
  r += cell("num", s ? std::to_string(e.argmax_row * 100000 + e.argmax_col) : "", patch);
  const bool en = s && e.entropy_valid;
  r += cell("num", en ? fmt("%.9g", e.entropy) : "", en ? fmt("%.3f", e.entropy) : "");
  r += cell("top1", e.top1, html_text(e.top1));
  const bool p = !e.top1.empty();
  r += cell("num", p ? fmt("%.9g", e.top1_probability) : "", p ? fmt("%.1f%%", 100 * e.top1_probability) : "");
  const bool ms = e.milliseconds >= 0;
  r += cell("num", ms ? fmt("%.9g", e.milliseconds) : "", ms ? fmt("%.1f", e.milliseconds) : "");
  return r + "</tr>\n";
}

const char* const kGeneratorMark = "<meta name=\"generator\" content=\"attnmap\">";

const char* kHead = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="attnmap">
<title>@TITLE@</title>
<style>
body{font-family:sans-serif;margin:1.2em;color:#222;background:#fafafa}
h1{font-size:1.3em;margin:0 0 .2em}
.sub{color:#555;margin:0 0 .8em}
#bar{margin:.6em 0;position:sticky;top:0;background:#fafafa;padding:.4em 0;z-index:2}
#q{width:24em;padding:.3em}
table{border-collapse:collapse;background:#fff}
th,td{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
th{cursor:pointer;background:#eee;user-select:none;white-space:nowrap}
th.asc::after{content:" \25B2"}th.desc::after{content:" \25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.thumb{width:@THUMB@px;height:@THUMB@px;text-align:center}
td.thumb img{max-width:@THUMB@px;max-height:@THUMB@px}
td.file{min-width:18em}
.name{font-weight:bold;overflow-wrap:anywhere}
a.out{font-size:.85em}
.st.failed{color:#b00;font-weight:bold}.st.skipped{color:#777}
.err{color:#b00;font-size:.85em;max-width:24em}
.none{color:#999}
</style></head>
<body>
<h1>@TITLE@</h1>
<p class="sub">@SUBTITLE@</p>
<div id="bar"><input id="q" type="search" placeholder="filter by file name, status, error or class" aria-label="filter">
<span id="count"></span></div>
<table id="t"><thead><tr>
<th data-k="num">#</th><th>thumbnail</th><th data-k="text">file</th><th data-k="text">status</th>
<th data-k="num" title="largest value of the class-token map (attention probability)">map max</th>
<th data-k="num" title="patch row, column of the map's maximum">peak patch</th>
<th data-k="num" title="Shannon entropy of the map renormalised to sum 1, nats (lower: more focused)">entropy</th>
<th data-k="text">top-1</th><th data-k="num">p(top-1)</th><th data-k="num">ms</th>
</tr></thead><tbody>
)HTML";

const char* kTail = R"HTML(</tbody></table>
<script>
(function () {
  var tbody = document.querySelector('#t tbody');
  var rows = Array.prototype.slice.call(tbody.rows);
  var heads = document.querySelectorAll('#t th');
  var q = document.getElementById('q'), count = document.getElementById('count');
  function show() {
    var s = q.value.toLowerCase(), n = 0;
    rows.forEach(function (r) {
      var ok = !s || r.textContent.toLowerCase().indexOf(s) >= 0;
      r.style.display = ok ? '' : 'none';
      if (ok) n++;
    });
    count.textContent = n + ' of ' + rows.length + ' shown';
  }
  heads.forEach(function (th, col) {
    var kind = th.getAttribute('data-k');
    if (!kind) return;
    th.addEventListener('click', function () {
      var dir = th.classList.contains('asc') ? -1 : 1;
      heads.forEach(function (h) { h.classList.remove('asc', 'desc'); });
      th.classList.add(dir > 0 ? 'asc' : 'desc');
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
        if (x === y) return 0;
        if (x === '') return 1;
        if (y === '') return -1;
        var c = kind === 'num' ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return dir * c;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
    });
  });
  q.addEventListener('input', show);
  show();
})();
</script>
</body></html>
)HTML";

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

}  // namespace

bool is_attnmap_gallery(const std::string& index_html) {
  std::FILE* f = std::fopen(index_html.c_str(), "rb");
  if (!f) return false;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  return std::string(buf, n).find(kGeneratorMark) != std::string::npos;
}

int write_gallery(const std::string& dir, const std::vector<GalleryEntry>& entries, const GalleryOptions& opt) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "thumbs", ec);
  if (ec) throw Error(dir + ": cannot create the gallery folder: " + ec.message());
  const std::vector<char> has_thumb = write_thumbnails(dir, entries, opt.thumb_size, opt.thumb_text);
  std::string html = replace_all(kHead, "@TITLE@", html_text(opt.title));
  html = replace_all(html, "@SUBTITLE@", html_text(opt.subtitle));
  html = replace_all(html, "@THUMB@", std::to_string(opt.thumb_size));
  for (size_t i = 0; i < entries.size(); ++i) html += row_html(dir, entries[i], i, has_thumb[i] != 0);
  html += kTail;
  write_file_atomic((fs::path(dir) / "index.html").string(), std::vector<uint8_t>(html.begin(), html.end()));
  return static_cast<int>(std::count(has_thumb.begin(), has_thumb.end(), 1));
}

}  // namespace attnmap
