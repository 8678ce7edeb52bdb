// explore_page.cpp - the explorer's index.html: style, markup and script inline, the page's settings and
// record as JSON; the data files are loaded per block with <script> tags (file:// allows no fetch) and
// inflated with DecompressionStream('deflate'). No request leaves the folder (docs/explore.md).
#include "engine/explore.hpp"

#include <string>

namespace attnmap {

namespace {

const char* const kHead = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="generator" content="attnmap explore">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>attnmap explore</title>
<style>
body{font:14px system-ui,sans-serif;margin:12px;color:#222;background:#fafafa}
h1{font-size:18px;margin:0 0 8px}
#wrap{display:flex;gap:16px;flex-wrap:wrap;align-items:flex-start}
#stage{position:relative;user-select:none;display:inline-block;line-height:0}
#photo{display:block}
#heat,#marks{position:absolute}
#heat{image-rendering:pixelated;image-rendering:crisp-edges}
#marks{cursor:crosshair}
#side{min-width:320px;max-width:520px}
.row{margin:6px 0}
button.on{background:#335;color:#fff}
#bar{width:256px;height:14px;display:block;border:1px solid #888}
#ticks{position:relative;width:258px;height:16px;font-size:11px}
#ticks span{position:absolute;transform:translateX(-50%)}
#heads{display:flex;flex-wrap:wrap;gap:6px;margin-top:8px}
#heads figure{margin:0;font-size:11px;text-align:center;cursor:pointer}
#heads canvas{image-rendering:pixelated;image-rendering:crisp-edges;width:84px;border:2px solid transparent}
#heads figure.on canvas{border-color:#c00}
table{border-collapse:collapse}td{padding:1px 6px}
.warn{background:#fff3c4;border:1px solid #d9b300;padding:4px}
#scalenote b{color:#335}
.flat{color:#b01e1e;font-weight:bold}
pre{background:#eee;padding:6px;font-size:11px;white-space:pre-wrap;word-break:break-all;max-width:900px}
kbd{border:1px solid #999;border-radius:3px;padding:0 3px;font-size:12px}
</style>
)HTML";

const char* const kBody = R"HTML(</head><body>
<h1 id="title">attnmap explore</h1>
<div id="wrap">
<div><div id="stage"><img id="photo" alt="the photo"><canvas id="heat"></canvas><canvas id="marks"></canvas></div>
<div class="row" id="query"></div><div class="row" id="keyinfo">hover a patch for its weight</div></div>
<div id="side">
<div class="row">block <select id="block"></select> heads <select id="head"></select>
 opacity <input id="alpha" type="range" min="0" max="1" step="0.05"></div>
<div class="row" id="prefix"></div>
<div class="row" id="start"></div>
<div class="row">scale <label><input type="radio" name="scale" value="map" checked>per row (its own min..max)</label>
 <label><input type="radio" name="scale" value="one">shared 0..1</label>
 <label><input type="radio" name="scale" value="block">shared 0..block max</label></div>
<canvas id="bar" width="256" height="1"></canvas><div id="ticks"></div><div class="row" id="units"></div>
<div class="row" id="scalenote"></div>
<div class="row"><table id="prefixvals"></table></div>
<div class="row" id="rowinfo"></div>
<div class="row" id="headsnote"></div><div id="heads"></div>
</div></div>
<p id="stored"></p>
<p>Keys: <kbd>&larr;</kbd><kbd>&uarr;</kbd><kbd>&rarr;</kbd><kbd>&darr;</kbd> move the query patch,
<kbd>[</kbd> <kbd>]</kbd> block, <kbd>,</kbd> <kbd>.</kbd> head / fusion, <kbd>c</kbd> class token (first prefix token),
<kbd>p</kbd> next prefix token, <kbd>s</kbd> scale, <kbd>Esc</kbd> unpin (the query follows the pointer again).
Click a patch to pin it as the query; the pointer then shows each key patch's weight.</p>
<p>Row <i>i</i> of a block is query token <i>i</i>'s softmax(QK<sup>T</sup>/&radic;d<sub>k</sub>) over all keys: the
prefix keys as numbers, the patch keys as the heatmap (one cell a patch). Stored quantised: the patch keys to 256
levels between the row's own min and max (error at most 1/510 of that range), the prefix keys exactly
(float32). rollout: Abnar &amp; Zuidema 2020 through blocks 0..block, heads averaged (as <code>render --rollout</code>);
its unit is rollout mass. Exact numbers: attention.npy beside this page (when written).</p>
<h2 style="font-size:15px">Provenance</h2><pre id="record"></pre>
<script>
"use strict";
const M = JSON.parse(document.getElementById("attnmap-meta").textContent);
const T = M.tokens, P = M.prefix.length, GW = M.grid[0], GH = M.grid[1], N = GW * GH, H = M.heads, L = M.blocks;
const NF = M.fused.length, $ = (id) => document.getElementById(id);
// Opened on the class token's row (or the first prefix token's) of the model's default view, pinned: M.start.
const S = { block: M.start.block, head: M.start.head, query: M.start.query, pinned: true, key: -1, scale: "map", alpha: M.alpha };
const waiting = {}, loading = {}, data = {};
window.attnmap = { state: S, meta: M, drawn: 0, error: null };
window.attnmapBlock = (l, b64) => { if (waiting[l]) waiting[l](b64); };
async function inflate(b64) {
  const bin = atob(b64), u = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
  const s = new Blob([u]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(s).arrayBuffer());
}
function parse(l, buf) {
  const nm = NF + (M.heads_stored[l] ? H : 0), nf = 2 * T + T * P, f = new Float32Array(buf.buffer, 0, nm * nf);
  const maps = [];
  for (let m = 0; m < nm; m++) {
    const o = m * nf;
    maps.push({ lo: f.subarray(o, o + T), hi: f.subarray(o + T, o + 2 * T), pre: f.subarray(o + 2 * T, o + nf),
      q: new Uint8Array(buf.buffer, nm * nf * 4 + m * T * N, T * N) });
  }
  return (data[l] = maps);
}
function loadBlock(l) {
  if (!loading[l]) loading[l] = new Promise((ok, fail) => {
    waiting[l] = ok;
    const s = document.createElement("script");
    s.src = M.files[l];
    s.onerror = () => fail(new Error("cannot load " + M.files[l]));
    document.head.appendChild(s);
  }).then(inflate).then((buf) => parse(l, buf));
  return loading[l];
}
function mapIndex(head) { const f = M.fused.indexOf(head); return f >= 0 ? f : NF + Number(head.slice(1)); }
function row(l, head, i) {
  const m = data[l][mapIndex(head)], lo = m.lo[i], hi = m.hi[i], v = new Float64Array(N), q = m.q.subarray(i * N, i * N + N);
  for (let k = 0; k < N; k++) v[k] = lo + q[k] * ((hi - lo) / 255);
  return { v, q, lo, hi, pre: m.pre.subarray(i * P, i * P + P) };
}
function bounds(l, head, r) {
  if (S.scale === "one") return [0, 1];
  if (S.scale === "block") return [0, M.map_max[l][mapIndex(head)]];
  return [r.lo, r.hi];
}
function level(x, b) {
  if (!(b[1] > b[0])) return 0;
  const c = Math.min(1, Math.max(0, (x - b[0]) / (b[1] - b[0])));
  return Math.floor(c * 255 + 0.5);
}
function paint(canvas, r, b) {
  canvas.width = GW; canvas.height = GH;
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(GW, GH);
  for (let k = 0; k < N; k++) {
    const c = 3 * level(r.v[k], b);
    img.data.set([M.lut[c], M.lut[c + 1], M.lut[c + 2], 255], 4 * k);
  }
  ctx.putImageData(img, 0, 0);
}
const fmt = (x) => Number(x).toPrecision(4);
const tokenName = (i) => i < P ? M.prefix[i] : "patch r" + Math.floor((i - P) / GW) + " c" + ((i - P) % GW);
function drawMarks() {
  const c = $("marks"), w = c.clientWidth, h = c.clientHeight, d = window.devicePixelRatio || 1;
  c.width = Math.round(w * d); c.height = Math.round(h * d);
  const g = c.getContext("2d"); g.scale(d, d);
  g.strokeStyle = "rgba(255,255,255,0.35)"; g.lineWidth = 1; g.beginPath();
  for (let x = 0; x <= GW; x++) { g.moveTo(x * w / GW, 0); g.lineTo(x * w / GW, h); }
  for (let y = 0; y <= GH; y++) { g.moveTo(0, y * h / GH); g.lineTo(w, y * h / GH); }
  g.stroke();
  const box = (k, color, width) => {
    g.strokeStyle = color; g.lineWidth = width;
    g.strokeRect((k % GW) * w / GW + 1, Math.floor(k / GW) * h / GH + 1, w / GW - 2, h / GH - 2);
  };
  if (S.query >= P) box(S.query - P, S.pinned ? "#ff2020" : "#ffffff", 3);
  if (S.key >= 0) box(S.key, "#000000", 1.5);
}
function drawBar(b, units) {
  const c = $("bar"), g = c.getContext("2d"), img = g.createImageData(256, 1);
  for (let i = 0; i < 256; i++) img.data.set([M.lut[3 * i], M.lut[3 * i + 1], M.lut[3 * i + 2], 255], 4 * i);
  g.putImageData(img, 0, 0);
  $("ticks").innerHTML = "";
  for (const t of [0, 0.5, 1]) {
    const s = document.createElement("span");
    s.style.left = (1 + t * 256) + "px"; s.textContent = fmt(b[0] + t * (b[1] - b[0]));
    s.style.transform = "translateX(-" + (t * 100) + "%)";
    $("ticks").appendChild(s);
  }
  $("units").textContent = units;
  // Which scale is on, in words: per row (each row stretched to its own range) or shared (rows comparable).
  $("scalenote").innerHTML = "scale: <b id=\"scalename\"></b> <span id=\"scalewhat\"></span>";
  $("scalename").textContent = S.scale === "map" ? "per row" : "shared";
  $("scalewhat").textContent = S.scale === "map"
    ? "\u2014 this row's own patch min\u2013max (" + fmt(b[0]) + "\u2013" + fmt(b[1]) + ") fills the colours: rows are not comparable by colour"
    : S.scale === "one" ? "\u2014 fixed 0..1 for every row and map"
    : "\u2014 0.." + fmt(b[1]) + ", the largest patch value of block " + S.block + "'s " + S.head + " over every row: rows of this map are comparable";
}
// How far a row's patch keys are from uniform: max / mean over the N patch keys (1 = uniform; flat below
// 1.25, as render's legend and eval's max/mean).
function uniformTimes(r) { let s = 0; for (const x of r.v) s += x; return s > 0 ? r.hi / (s / N) : 0; }
const timesText = (x) => x > 0 ? x.toFixed(x < 10 ? 2 : 1) + "\u00d7 uniform" : "no patch weight";
function drawHeads(l) {
  const hs = $("heads"); hs.innerHTML = "";
  if (!M.heads_stored[l]) { $("headsnote").textContent = "Single heads of block " + l + " were left out by the size budget (see below); the fusions and rollout are stored."; return; }
  $("headsnote").textContent = "Every head of block " + l + " for the same query:";
  for (let h = 0; h < H; h++) {
    const r = row(l, "h" + h, S.query), f = document.createElement("figure"), c = document.createElement("canvas");
    paint(c, r, bounds(l, "h" + h, r));
    c.style.height = (84 * GH / GW) + "px";
    const cap = document.createElement("figcaption"), ut = uniformTimes(r);
    cap.textContent = "h" + h + " max " + fmt(r.hi) + " = " + timesText(ut);
    if (ut > 0 && ut < 1.25) cap.className = "flat";
    f.appendChild(c); f.appendChild(cap); f.dataset.head = "h" + h;
    if (S.head === "h" + h) f.className = "on";
    f.onclick = () => { S.head = "h" + h; update(); };
    hs.appendChild(f);
  }
}
function showKey(r) {
  if (S.key < 0) { $("keyinfo").textContent = S.pinned ? "hover a patch for its weight" : "click a patch to pin the query"; return; }
  $("keyinfo").innerHTML = "key " + tokenName(P + S.key) + ": <b id=\"keyval\"></b> (level <span id=\"keylevel\"></span>)";
  $("keyval").textContent = fmt(r.v[S.key]); $("keyval").dataset.v = r.v[S.key];
  $("keylevel").textContent = r.q[S.key];
}
function draw() {
  const l = S.block, r = row(l, S.head, S.query), b = bounds(l, S.head, r);
  const units = S.head === "rollout" ? "rollout mass" : "attention probability";
  paint($("heat"), r, b);
  $("heat").style.opacity = S.alpha;
  drawMarks(); drawBar(b, units);
  $("query").innerHTML = "query: <b id=\"qname\"></b> (token " + S.query + "), block " + l + ", " + S.head + (S.pinned ? ", pinned" : "");
  $("qname").textContent = tokenName(S.query);
  let sum = 0; for (const x of r.v) sum += x; for (const x of r.pre) sum += x;
  $("prefixvals").innerHTML = "";
  r.pre.forEach((x, i) => {
    const tr = $("prefixvals").insertRow(), td = tr.insertCell();
    td.textContent = "key " + M.prefix[i]; const v = tr.insertCell(); v.className = "pv"; v.dataset.v = x; v.textContent = fmt(x);
  });
  let patchSum = 0; for (const x of r.v) patchSum += x;
  const ut = uniformTimes(r), flat = ut > 0 && ut < 1.25;
  $("rowinfo").innerHTML = "patch keys: min <span id=\"rowmin\"></span>, max <span id=\"rowmax\"></span> = <b id=\"uniform\"></b>" +
    " (max \u00f7 mean of the " + N + " patch keys; 1\u00d7 = uniform" + (flat ? ", flat below 1.25\u00d7" : "") + ")" +
    "; the patch keys hold " + fmt(patchSum) + " of the row; row sum " + fmt(sum);
  $("rowmin").textContent = fmt(r.lo); $("rowmax").textContent = fmt(r.hi);
  $("uniform").textContent = (flat ? "flat row: " : "") + timesText(ut); $("uniform").dataset.v = ut;
  $("uniform").className = flat ? "flat" : "";
  showKey(r); drawHeads(l);
  for (const x of $("prefix").children) x.className = Number(x.dataset.token) === S.query ? "on" : "";
  $("block").value = l; $("head").value = S.head;
  window.attnmap.drawn++;
}
function headOptions() {
  const sel = $("head"), keep = S.head; sel.innerHTML = "";
  const add = (v, t) => { const o = document.createElement("option"); o.value = v; o.textContent = t; sel.appendChild(o); };
  add("mean", "mean over heads"); add("max", "max over heads"); add("min", "min over heads"); add("rollout", "rollout 0.." + S.block);
  if (M.heads_stored[S.block]) for (let h = 0; h < H; h++) add("h" + h, "head " + h);
  if (keep[0] === "h" && !M.heads_stored[S.block]) S.head = "mean";
}
async function update() {
  try {
    await loadBlock(S.block);
    headOptions();
    draw();
  } catch (e) { window.attnmap.error = String(e); $("keyinfo").textContent = "error: " + e; }
}
function patchAt(ev) {
  const c = $("marks"), x = Math.floor(ev.offsetX / c.clientWidth * GW), y = Math.floor(ev.offsetY / c.clientHeight * GH);
  return Math.min(GH - 1, Math.max(0, y)) * GW + Math.min(GW - 1, Math.max(0, x));
}
function setup() {
  $("title").textContent = "attnmap explore \u2014 " + M.image;
  $("start").textContent = M.start.text;
  $("record").textContent = M.record ? "{\n" + Object.entries(M.record).map(([k, v]) => " " + JSON.stringify(k) + ": " + JSON.stringify(v)).join(",\n") + "\n}" : "no record";
  const st = $("stored"); st.textContent = "Stored: " + M.stored + ".";
  if (M.left_out.length || M.dropped.length) st.className = "warn";
  const img = $("photo"); img.src = M.photo.file;
  const w = Math.min(720, M.photo.width), h = Math.round(M.photo.height * w / M.photo.width);
  img.style.width = w + "px"; img.style.height = h + "px";
  for (const id of ["heat", "marks"]) {
    const c = $(id);
    c.style.left = (M.box[0] * w) + "px"; c.style.top = (M.box[1] * h) + "px";
    c.style.width = ((M.box[2] - M.box[0]) * w) + "px"; c.style.height = ((M.box[3] - M.box[1]) * h) + "px";
  }
  for (let l = 0; l < L; l++) {
    const o = document.createElement("option"); o.value = l;
    o.textContent = l + (!M.files[l] ? " (not stored)" : M.heads_stored[l] ? "" : " (fused only)");
    o.disabled = !M.files[l]; $("block").appendChild(o);
  }
  M.prefix.forEach((n, i) => { const b = document.createElement("button"); b.textContent = n; b.dataset.token = i; b.onclick = () => { S.query = i; S.pinned = true; update(); }; $("prefix").appendChild(b); });
  $("alpha").value = S.alpha;
  $("alpha").oninput = () => { S.alpha = Number($("alpha").value); $("heat").style.opacity = S.alpha; };
  $("block").onchange = () => { S.block = Number($("block").value); update(); };
  $("head").onchange = () => { S.head = $("head").value; update(); };
  for (const r of document.querySelectorAll("input[name=scale]")) r.onchange = () => { S.scale = r.value; update(); };
  const m = $("marks");
  m.onmousemove = (ev) => { const k = patchAt(ev); S.key = k; if (!S.pinned) S.query = P + k; draw(); };
  m.onmouseleave = () => { S.key = -1; draw(); };
  m.onclick = (ev) => { const k = patchAt(ev); S.query = P + k; S.key = k; S.pinned = true; draw(); };
  document.addEventListener("keydown", keys);
  update();
}
function keys(ev) {
  if (ev.target.tagName === "SELECT" || ev.target.tagName === "INPUT") return;
  const opts = Array.from($("head").options).map((o) => o.value);
  const move = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[ev.key];
  if (move) {
    const k = S.query >= P ? S.query - P : 0, x = Math.min(GW - 1, Math.max(0, k % GW + move[0])), y = Math.min(GH - 1, Math.max(0, Math.floor(k / GW) + move[1]));
    S.query = P + y * GW + x; S.pinned = true;
  } else if (ev.key === "[" || ev.key === "]") {
    const b = Math.min(L - 1, Math.max(0, S.block + (ev.key === "]" ? 1 : -1)));
    if (M.files[b]) S.block = b;  // a block left out by the budget is not entered
  }
  else if (ev.key === "," || ev.key === ".") S.head = opts[(opts.indexOf(S.head) + (ev.key === "." ? 1 : opts.length - 1)) % opts.length];
  else if (ev.key === "c" && P > 0) { S.query = 0; S.pinned = true; }
  else if (ev.key === "p" && P > 0) { S.query = S.query < P ? (S.query + 1) % P : 0; S.pinned = true; }
  else if (ev.key === "s") { const v = ["map", "one", "block"]; S.scale = v[(v.indexOf(S.scale) + 1) % 3]; document.querySelector("input[value=" + S.scale + "]").checked = true; }
  else if (ev.key === "Escape") S.pinned = false;
  else return;
  ev.preventDefault(); update();
}
)HTML";

// CaiT only (meta "absent", model/cait.hpp): rows and keys a block does not have are stored as NaN
// (explore.cpp mark_cait_absent); the page draws no heatmap for them and says why, beside the class token's
// button (disabled at a self-attention block) and on the query line. Other pages are the same bytes as before.
const char* const kAbsent = R"HTML(// CaiT: absent rows (no heatmap, the reason) and the class key absent from the patches' rows.
const AB = M.absent, caBlock = (l) => l >= AB.class_blocks[0];
const storedRow = row, storedPaint = paint, drawAll = draw;
row = function (l, head, i) {
  const r = storedRow(l, head, i);
  r.absent = Number.isNaN(r.lo);
  r.keyAbsent = !r.absent && Array.from(r.pre).some((x) => Number.isNaN(x));
  r.pre = r.pre.filter((x) => !Number.isNaN(x));  // CaiT's one prefix token: the class key, or nothing
  return r;
};
paint = function (canvas, r, b) {
  if (!r.absent) return storedPaint(canvas, r, b);
  canvas.width = GW; canvas.height = GH; canvas.getContext("2d").clearRect(0, 0, GW, GH);  // no row: nothing drawn
};
draw = function () {
  drawAll();
  if (document.body.classList.contains("textmode")) return;
  const l = S.block, r = row(l, S.head, S.query), ca = caBlock(l), why = S.query === 0 ? AB.class_row : AB.patch_rows;
  for (const x of $("prefix").children)
    if (x.dataset.token === "0") { x.disabled = !ca; x.title = ca ? "" : AB.class_row; }
  $("absentnote").textContent = "Block " + l + ": " + (!ca ? AB.class_row + ". " + AB.sa_rows : S.head === "rollout" ? AB.rollout_rows : AB.patch_rows) + ".";
  window.attnmap.absent = r.absent;
  if (r.keyAbsent) {
    const tr = $("prefixvals").insertRow();
    tr.insertCell().textContent = "key " + M.prefix[0];
    const v = tr.insertCell(); v.className = "absent"; v.textContent = "absent: " + AB.class_key;
  }
  if (!r.absent) return;
  $("query").insertAdjacentHTML("beforeend", " — <b class='flat' id='absentrow'>no row in this block</b>");
  $("rowinfo").textContent = "No heatmap: " + why + ".";
  $("keyinfo").textContent = "this query has no row in block " + l + " (nothing is stored for it, not zeros)";
  $("ticks").innerHTML = ""; $("scalewhat").textContent = "— no row to scale";
  for (const c of $("heads").querySelectorAll("figcaption")) { c.textContent = c.parentNode.dataset.head + ": no row"; c.className = ""; }
};
{
  const d = document.createElement("div"), st = document.createElement("style");
  d.className = "row"; d.id = "absentnote";
  $("prefix").insertAdjacentElement("afterend", d);
  st.textContent = "button:disabled{opacity:.45}";
  document.head.appendChild(st);
}
)HTML";

// With texts only (a CLIP given texts, issue 43; meta "texts"): the text selector, inserted before the page's
// setup; a page without texts is the same bytes as before.
const char* const kTexts = R"HTML(// Texts: each text's relevance maps (M.texts.methods) over the photo, with its zero-shot probability.
const X = M.texts, NT = X.labels.length, J = X.mapped.length;
Object.assign(S, { text: X.start, method: 0, textScale: "map" });  // text -1: the attention rows
let textMaps = null;
window.attnmap.texts = null;
window.attnmapTexts = (b64) => {
  const bin = atob(b64), u = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
  textMaps = window.attnmap.texts = new Float32Array(u.buffer);
  update();
};
const pct = (p) => (100 * p).toFixed(1) + "%";
function textRow(m, t) {
  const j = X.mapped.indexOf(t), v = textMaps.subarray((m * J + j) * N, (m * J + j + 1) * N);
  let lo = Infinity, hi = -Infinity;
  for (const x of v) { lo = Math.min(lo, x); hi = Math.max(hi, x); }
  return { v, lo, hi };
}
function textBounds(m, r) {
  if (S.textScale === "map") return [r.lo, r.hi];
  let lo = Infinity, hi = -Infinity;
  for (const x of textMaps.subarray(m * J * N, (m + 1) * J * N)) { lo = Math.min(lo, x); hi = Math.max(hi, x); }
  return [lo, hi];
}
const drawRows = draw;
draw = function () {
  const on = S.text >= 0 && textMaps !== null;
  document.body.classList.toggle("textmode", on);
  for (const tr of $("texttable").rows) tr.className = Number(tr.dataset.text) === S.text ? "on" : "";
  $("text").value = S.text; $("method").value = S.method;
  if (!on) return drawRows();
  const m = S.method, r = textRow(m, S.text), b = textBounds(m, r), meth = X.methods[m];
  paint($("heat"), r, b);
  $("heat").style.opacity = S.alpha;
  const q = S.query; S.query = -1; drawMarks(); S.query = q;  // no query patch: a text's map has none
  drawBar(b, meth.units);
  $("scalename").textContent = S.textScale === "map" ? "per map" : "shared";
  $("scalewhat").textContent = S.textScale === "map"
    ? "\u2014 this map's own min\u2013max (" + fmt(b[0]) + "\u2013" + fmt(b[1]) + ") fills the colours, as render's NAME.png: texts are not comparable by colour"
    : "\u2014 " + fmt(b[0]) + "\u2013" + fmt(b[1]) + ", the min\u2013max of the " + meth.view + " maps of the " + J + " texts shown, as render's {setting:panel}: texts are comparable by colour";
  $("query").innerHTML = "<b id='textmethod'></b> for the text <b id='textname'></b>: <span id='textprob'></span>" +
    (X.rule === "sigmoid" ? ", its own sigmoid (scored alone, not a share of the " + NT + " texts)" : " of the " + NT + " texts");
  $("textmethod").textContent = meth.label; $("textname").textContent = "\u201c" + X.labels[S.text] + "\u201d";
  $("textprob").textContent = pct(X.probs[S.text]);
  if (S.key < 0) $("keyinfo").textContent = "hover a patch for its value";
  else {
    $("keyinfo").innerHTML = "patch " + tokenName(P + S.key).slice(6) + ": <b id='keyval'></b> (" + meth.units + ")";
    $("keyval").textContent = fmt(r.v[S.key]); $("keyval").dataset.v = r.v[S.key];
  }
  window.attnmap.drawn++;
};
function setupTexts() {
  const st = document.createElement("style");
  st.textContent = "body.textmode #heads,body.textmode #headsnote,body.textmode #prefixvals,body.textmode #rowinfo," +
    "body.textmode #start,body.textmode #prefix,body.textmode .rowsonly{display:none}" +
    "body:not(.textmode) .textonly{display:none}#texttable tr{cursor:pointer}#texttable tr.on{background:#dde}" +
    "#texttable .nomap{color:#888}.pbar{display:inline-block;height:8px;background:#335}";
  document.head.appendChild(st);
  $("block").closest(".row").classList.add("rowsonly");
  document.querySelector("input[name=scale]").closest(".row").classList.add("rowsonly");
  const d = document.createElement("div");
  d.innerHTML = "<div class='row'>map <select id='text'></select> <span class='textonly'>method <select id='method'></select></span></div>" +
    "<div class='row textonly'>scale <label><input type='radio' name='textscale' value='map' checked>per map (its own min..max)</label>" +
    " <label><input type='radio' name='textscale' value='shared'>shared by the texts</label></div>" +
    "<div class='row' id='textnote'></div><table class='row' id='texttable'></table>";
  $("side").insertBefore(d, $("side").firstChild);
  const add = (sel, v, t) => { const o = document.createElement("option"); o.value = v; o.textContent = t; sel.appendChild(o); };
  add($("text"), -1, "attention rows (blocks, heads)");
  const byProb = X.mapped.slice().sort((a, b) => X.probs[b] - X.probs[a]);  // as the table: most probable first
  for (const t of byProb) add($("text"), t, X.labels[t] + " \u2014 " + pct(X.probs[t]));
  X.methods.forEach((m, i) => add($("method"), i, m.label));
  const order = X.labels.map((_, i) => i).sort((a, b) => X.probs[b] - X.probs[a]);
  for (const t of order) {
    const tr = $("texttable").insertRow(), has = X.mapped.includes(t);
    tr.dataset.text = t; if (!has) tr.classList.add("nomap");
    tr.insertCell().textContent = X.labels[t];
    const p = tr.insertCell(); p.className = "tp"; p.dataset.v = X.probs[t]; p.textContent = pct(X.probs[t]);
    const bar = document.createElement("span"); bar.className = "pbar"; bar.style.width = Math.round(120 * X.probs[t]) + "px";
    tr.insertCell().appendChild(bar);
    if (has) tr.onclick = () => { S.text = t; update(); };
    else tr.insertCell().textContent = "no map";
  }
  $("textnote").textContent = X.note +  // what the probabilities are: CLIP's softmax or SigLIP's sigmoid (explore.cpp)
    (J < NT ? " Maps of the " + J + " most probable texts." : "") + " Opened on the most probable text's map; keys: t next text, m method, s scale.";
  $("text").onchange = () => { S.text = Number($("text").value); update(); };
  $("method").onchange = () => { S.method = Number($("method").value); update(); };
  for (const r of document.querySelectorAll("input[name=textscale]")) r.onchange = () => { S.textScale = r.value; update(); };
  document.addEventListener("keydown", (ev) => {
    if (ev.target.tagName === "SELECT" || ev.target.tagName === "INPUT") return;
    const cyc = [-1].concat(byProb);
    if (ev.key === "t") S.text = cyc[(cyc.indexOf(S.text) + 1) % cyc.length];
    else if (ev.key === "m" && S.text >= 0) S.method = (S.method + 1) % X.methods.length;
    else if (ev.key === "s" && S.text >= 0) {
      S.textScale = S.textScale === "map" ? "shared" : "map";
      document.querySelector("input[name=textscale][value=" + S.textScale + "]").checked = true;
    } else return;
    ev.preventDefault(); ev.stopImmediatePropagation(); update();
  });
  const s = document.createElement("script");
  s.src = X.file;
  s.onerror = () => { window.attnmap.error = "cannot load " + X.file; $("textnote").textContent = "error: cannot load " + X.file; };
  document.head.appendChild(s);
}
setupTexts();
)HTML";

// Texts without maps (a model whose class-specific views are not available, e.g. SigLIP's; meta "texts" with
// "no_maps"): the texts' scores, most probable first with a bar, what they are, and why there are no maps.
const char* const kTextScores = R"HTML(// Texts: their zero-shot scores only (M.texts.no_maps says why there are no maps).
function setupTextScores() {
  const X = M.texts, pct = (p) => (100 * p).toFixed(1) + "%", st = document.createElement("style");
  st.textContent = ".pbar{display:inline-block;height:8px;background:#335}";
  document.head.appendChild(st);
  const d = document.createElement("div");
  d.innerHTML = "<div class='row' id='textnote'></div><table class='row' id='texttable'></table><div class='row warn' id='nomaps'></div>";
  $("side").insertBefore(d, $("side").firstChild);
  $("textnote").textContent = X.note;  // what the scores are: SigLIP's sigmoid of each text alone (explore.cpp)
  $("nomaps").textContent = X.no_maps;
  for (const t of X.labels.map((_, i) => i).sort((a, b) => X.probs[b] - X.probs[a])) {
    const tr = $("texttable").insertRow();
    tr.dataset.text = t;
    tr.insertCell().textContent = X.labels[t];
    const p = tr.insertCell(); p.className = "tp"; p.dataset.v = X.probs[t]; p.textContent = pct(X.probs[t]);
    const bar = document.createElement("span"); bar.className = "pbar"; bar.style.width = Math.round(120 * X.probs[t]) + "px";
    tr.insertCell().appendChild(bar);
  }
}
setupTextScores();
)HTML";

const char* const kTail = R"HTML(setup();
</script></body></html>
)HTML";

// JSON that may sit inside a <script> element: "</" and "<!--" cannot end or comment it out.
std::string script_safe(std::string json) {
  for (size_t p = 0; (p = json.find('<', p)) != std::string::npos; p += 6) json.replace(p, 1, "\\u003c");
  return json;
}

}  // namespace

std::string explore_page_html(const nlohmann::ordered_json& meta) {
  const std::string dumped = meta.dump(-1, ' ', true, nlohmann::ordered_json::error_handler_t::replace);
  std::string record = meta.contains("record") ? meta["record"].dump(-1, ' ', true, nlohmann::ordered_json::error_handler_t::replace) : "null";
  return std::string(kHead) + "<script type=\"application/json\" id=\"attnmap-record\">" + script_safe(record) +
         "</script>\n<script type=\"application/json\" id=\"attnmap-meta\">" + script_safe(dumped) + "</script>\n" + kBody + (meta.contains("absent") ? kAbsent : "") +
         (!meta.contains("texts") ? "" : meta["texts"].contains("no_maps") ? kTextScores : kTexts) + kTail;
}

}  // namespace attnmap
