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

/// A table cell whose sort key is `key` (numbers sort numerically, "" last); `label` is shown before the value
/// on the card ("" none) and `tip` as its tooltip.
std::string cell(const std::string& cls, const std::string& key, const std::string& html, const std::string& label = "",
                 const std::string& tip = "") {
  return "<td class=\"" + cls + "\"" + (label.empty() ? "" : " data-l=\"" + html_escape(label) + "\"") +
         (tip.empty() ? "" : " title=\"" + html_escape(tip) + "\"") + " data-v=\"" + html_text(key) + "\">" + html + "</td>";
}

/// A name as shown on a card: HTML text with a line-break opportunity (<wbr>) after every '_', '-', '.',
/// '/' and ',', so a long file name wraps between its parts rather than inside a word.
std::string breakable(const std::string& name) {
  std::string out;
  for (const char c : html_text(name)) {
    out += c;
    if (c == '_' || c == '-' || c == '.' || c == '/' || c == ',') out += "<wbr>";
  }
  return out;
}

/// What a card's link to an output says: the output's name after the input's stem when it starts with it
/// (".png", ".panel.pdf"), else its name; the explorer's folder by its name.
std::string output_label(const std::string& input, const std::string& name) {
  const std::string stem = fs::path(input).stem().string();
  if (!stem.empty() && name.size() > stem.size() && name.compare(0, stem.size(), stem) == 0 && name[stem.size()] == '.')
    return name.substr(stem.size());
  return name;
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
  // The file's name (wrapping between its parts, two lines at most, then "…"), its folder on one line
  // shortened at the start (the nearest folders stay), the whole path as the tooltip.
  const fs::path in(e.input);
  std::string files = "<div class=\"name\" title=\"" + html_text(e.input) + "\">" + breakable(in.filename().string()) + "</div>";
  if (!in.parent_path().empty())
    files += "<div class=\"dir\" title=\"" + html_text(e.input) + "\"><span dir=\"ltr\">" + html_text(in.parent_path().string()) +
             "/</span></div>";
  files += "<div class=\"outs\">";
  for (const std::string& o : e.outputs) {
    // An explorer (render --explore: NAME.explore/index.html) is linked by its folder's name.
    const fs::path op(o);
    const std::string folder = op.parent_path().filename().string();
    const bool page = op.filename() == "index.html" && folder.size() > 8 && folder.compare(folder.size() - 8, 8, ".explore") == 0;
    const std::string name = page ? folder : op.filename().string();
    files += std::string("<a class=\"out") + (page ? " explore" : "") + "\" href=\"" + relative_url(o, dir) + "\" title=\"" +
             html_text(name) + "\">" + breakable(output_label(e.input, name)) + "</a> ";
  }
  r += cell("file", e.input, files + "</div>");
  std::string st = "<span class=\"st " + html_escape(e.status) + "\">" + html_escape(e.status) + "</span>";
  if (!e.error.empty()) st += "<div class=\"err\" title=\"" + html_text(e.error) + "\">" + html_text(e.error) + "</div>";
  r += cell("status", e.status, st);
  const bool s = e.has_stats;
  r += cell("num", s ? fmt("%.9g", e.map_max) : "", s ? fmt("%.4f", e.map_max) : "", "max", "largest value of the map");
  const std::string patch = s ? std::to_string(e.argmax_row) + ", " + std::to_string(e.argmax_col) : "";
  r += cell("num", s ? std::to_string(e.argmax_row * 100000 + e.argmax_col) : "", patch, "at", "patch row, column of the maximum");
  const bool en = s && e.entropy_valid;
  r += cell("num", en ? fmt("%.9g", e.entropy) : "", en ? fmt("%.3f", e.entropy) : "", "H", "entropy, nats");
  r += cell("top1", e.top1, html_text(e.top1), "", "top-1 class");
  const bool p = !e.top1.empty();
  r += cell("num", p ? fmt("%.9g", e.top1_probability) : "", p ? fmt("%.1f%%", 100 * e.top1_probability) : "", "", "p(top-1)");
  const bool ms = e.milliseconds >= 0;
  r += cell("num ms", ms ? fmt("%.9g", e.milliseconds) : "", ms ? fmt("%.1f", e.milliseconds) : "", "", "milliseconds");
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
/* A grid of cards (one per input: thumbnail, name, outputs, status, statistics), the table's header a row
   of sort buttons; the markup stays a table so that sorting and filtering work on rows and cells. */
#t,#t thead,#t tbody,#t tr,#t th,#t td{display:block;border:0;padding:0}
#t thead tr{display:flex;flex-wrap:wrap;gap:.3em;align-items:center;font-size:.85em}
#t thead tr::before{content:"sort by";color:#555}
#t th{cursor:pointer;background:#eee;user-select:none;white-space:nowrap;border:1px solid #ccc;border-radius:3px;padding:.1em .5em;font-weight:normal}
#t th:not([data-k]){display:none}
th.asc::after{content:" \25B2"}th.desc::after{content:" \25BC"}
#t tbody{display:grid;grid-template-columns:repeat(auto-fill,minmax(@CARD@px,1fr));gap:6px;margin-top:.6em}
#t tbody tr{display:flex;flex-wrap:wrap;align-content:flex-start;column-gap:.5em;background:#fff;border:1px solid #ddd;
  border-radius:4px;padding:4px;overflow:hidden;font-size:11px;line-height:1.25}
#t td.n{display:none}
#t td.thumb{flex:0 0 100%;height:@THUMB@px;display:flex;align-items:center;justify-content:center}
#t td.thumb img{max-width:100%;max-height:@THUMB@px;display:block}
#t td.file{flex:0 0 100%;min-width:0}
.name{font-weight:bold;overflow-wrap:anywhere;display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;overflow:hidden}
.dir{color:#777;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;direction:rtl;text-align:left}
/* Every output of the row shown: the links wrap onto as many lines as they need (between a name's parts). */
.outs{display:flex;flex-wrap:wrap;column-gap:.6em;line-height:1.1}
a.out{font-size:.9em;min-width:0;overflow-wrap:anywhere}
#t td.num,#t td.top1{color:#444;font-variant-numeric:tabular-nums;white-space:nowrap}
#t td[data-v=""]{display:none}
#t td[data-l]::before{content:attr(data-l) " ";color:#888}
#t td.ms::after{content:" ms";color:#888}
#t td.status[data-v="done"]{display:none}
#t td.status{flex:0 0 100%;min-width:0}
.st.failed{color:#b00;font-weight:bold}.st.skipped{color:#777}
.err{color:#b00;font-size:.9em;display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;overflow:hidden;overflow-wrap:anywhere}
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
  html = replace_all(html, "@CARD@", std::to_string(opt.thumb_size + 10));
  for (size_t i = 0; i < entries.size(); ++i) html += row_html(dir, entries[i], i, has_thumb[i] != 0);
  html += kTail;
  write_file_atomic((fs::path(dir) / "index.html").string(), std::vector<uint8_t>(html.begin(), html.end()));
  return static_cast<int>(std::count(has_thumb.begin(), has_thumb.end(), 1));
}

}  // namespace attnmap
