// explore_test.mjs - opens an explorer page (attnmap explore) in Debian's chromium, headless, through
// puppeteer-core, from file:// with every request that is not a file of the page's folder failed, and checks
// it against the exact numbers in attention.npy beside it: for a set of query patches (corners among them),
// the class-token button, several blocks and heads, fusions and rollout, (a) the weight shown for a hovered
// key patch and the prefix keys' weights, to the stated quantisation precision (half a level of the row's
// patch range, 1/510 of it; prefix keys exact float32), and (b) the heatmap's pixel at that key patch: the
// colour map's entry for the value on the current scale, within one level. The page opens on the class
// token's row of the model's default view (the bundled model's config: block 1, head 3), shows each row's
// max as "x uniform" (max / mean of its patch keys, checked against the .npy) and says which scale is on
// (per row or shared). Saves a screenshot of the page as it opens (explore.open.png) and at the end.
// With TEXTS_INDEX_HTML (an explorer of a CLIP given texts, issue 43): the page opens on the most probable
// text's map with its probability, picking another text and another method redraws the heatmap with that map
// (every patch's pixel the colour of data/texts.js's value on the per-map scale), a hovered patch shows the
// map's value, and the probabilities listed are the texts'. Screenshot (chromium): SCREENSHOT's name with .text.png.
//   usage: node explore_test.mjs INDEX_HTML SCREENSHOT_PNG [TEXTS_INDEX_HTML]
import puppeteer from 'puppeteer-core';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [indexHtml, shot, textsHtml] = process.argv.slice(2);
if (!indexHtml || !shot) {
  console.error('usage: node explore_test.mjs INDEX_HTML SCREENSHOT_PNG');
  process.exit(2);
}
const dir = path.dirname(path.resolve(indexHtml));
const dirUrl = pathToFileURL(dir).href + '/';
let passed = 0, failed = 0;
function check(ok, what) {
  if (ok) { passed++; console.log('ok: ' + what); } else { failed++; console.log('FAILED: ' + what); }
}

// attention.npy: float32 little-endian, C order, shape (L, H, T, T).
function readNpy(file) {
  const b = fs.readFileSync(file);
  const hlen = b.readUInt16LE(8), header = b.toString('latin1', 10, 10 + hlen);
  if (!header.includes("'<f4'") || !header.includes("'fortran_order': False")) throw new Error('unexpected .npy ' + header);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter((s) => s.trim()).map(Number);
  const off = 10 + hlen, data = new Float32Array(b.buffer.slice(b.byteOffset + off, b.byteOffset + b.length));
  return { shape, data };
}
const A = readNpy(path.join(dir, 'attention.npy'));
const [L, H, T] = A.shape;
const at = (l, h, i, k) => A.data[((l * H + h) * T + i) * T + k];

// The exact row of a map: one head, the mean / max / min over heads, or rollout through blocks 0..l (heads
// averaged, A_hat = (A + I)/2 rows normalised, R = A_hat_l ... A_hat_0: maps/attention_maps.hpp), in doubles.
const rolloutCache = {};
function rollout(l) {
  if (rolloutCache[l]) return rolloutCache[l];
  let R = null;
  for (let b = 0; b <= l; b++) {
    const Ah = new Float64Array(T * T);
    for (let i = 0; i < T; i++) {
      let s = 0;
      for (let k = 0; k < T; k++) {
        let m = 0;
        for (let h = 0; h < H; h++) m += at(b, h, i, k);
        Ah[i * T + k] = (m / H + (i === k ? 1 : 0)) / 2;
        s += Ah[i * T + k];
      }
      for (let k = 0; k < T; k++) Ah[i * T + k] /= s;
    }
    if (!R) { R = Ah; continue; }
    const N2 = new Float64Array(T * T);
    for (let i = 0; i < T; i++)
      for (let j = 0; j < T; j++) {
        const a = Ah[i * T + j];
        if (a !== 0) for (let k = 0; k < T; k++) N2[i * T + k] += a * R[j * T + k];
      }
    R = N2;
  }
  return (rolloutCache[l] = R);
}
function exactRow(l, head, i) {
  const r = new Float64Array(T);
  if (head === 'rollout') { const R = rollout(l); for (let k = 0; k < T; k++) r[k] = R[i * T + k]; return r; }
  if (head[0] === 'h') { const h = Number(head.slice(1)); for (let k = 0; k < T; k++) r[k] = at(l, h, i, k); return r; }
  for (let k = 0; k < T; k++) {
    const v = []; for (let h = 0; h < H; h++) v.push(at(l, h, i, k));
    r[k] = head === 'mean' ? v.reduce((a, b) => a + b, 0) / H : head === 'max' ? Math.max(...v) : Math.min(...v);
  }
  return r;
}

// The texts' explorer (a CLIP given texts): opened as the first page, its maps read from data/texts.js here.
async function textsPage(file) {
  const tdir = path.dirname(path.resolve(file)), tUrl = pathToFileURL(tdir).href + '/';
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  if (!firefox) await page.setOfflineMode(true);
  await page.setRequestInterception(true);
  const outside = [], errors = [];
  page.on('request', (r) => { if (r.url().startsWith(tUrl)) r.continue(); else { outside.push(r.url()); r.abort('blockedbyclient'); } });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(pathToFileURL(path.resolve(file)).href, { waitUntil: 'load' });
  await page.waitForFunction(() => window.attnmap && ((window.attnmap.texts && document.body.classList.contains('textmode')) || window.attnmap.error), { timeout: 20000 });
  const meta = await page.evaluate(() => window.attnmap.meta), X = meta.texts, [GW, GH] = meta.grid, N = GW * GH, J = X.mapped.length;
  const b64 = fs.readFileSync(path.join(tdir, X.file), 'latin1').match(/^attnmapTexts\("([^"]*)"\);\n$/)[1], b = Buffer.from(b64, 'base64');
  const maps = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
  const pct = (p) => (100 * p).toFixed(1) + '%';
  // What the page shows: the state, the text's name and probability, every patch's heatmap pixel.
  const shown = () => page.evaluate(() => {
    const c = document.getElementById('heat'), px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    return { state: { ...window.attnmap.state }, name: document.getElementById('textname').textContent,
      prob: document.getElementById('textprob').textContent, px: Array.from(px), drawn: window.attnmap.drawn };
  });
  async function checkMap(t, m, what) {
    const st = await shown(), v = maps.subarray((m * J + X.mapped.indexOf(t)) * N, (m * J + X.mapped.indexOf(t) + 1) * N);
    const lo = Math.min(...v), hi = Math.max(...v);
    let bad = 0;
    for (let k = 0; k < N; k++) {
      const lv = hi > lo ? Math.floor((v[k] - lo) / (hi - lo) * 255 + 0.5) : 0;
      const ok = [lv - 1, lv, lv + 1].some((x) => x >= 0 && x < 256 && [0, 1, 2].every((c) => meta.lut[3 * x + c] === st.px[4 * k + c]));
      if (!ok) bad++;
    }
    check(st.state.text === t && st.state.method === m && bad === 0,
      `texts: ${what}: ${X.methods[m].view} of "${X.labels[t]}" drawn, every patch its value's colour on the per-map scale (${bad} of ${N} off)`);
    check(st.name === '\u201c' + X.labels[t] + '\u201d' && st.prob === pct(X.probs[t]), `texts: ${what}: named ${st.name} with ${st.prob} of the ${X.labels.length} texts`);
    return st;
  }
  const top = X.probs.indexOf(Math.max(...X.probs));
  const open = await checkMap(top, 0, 'opens on the most probable text');
  const probs = await page.$$eval('#texttable .tp', (e) => e.map((x) => Number(x.dataset.v)));
  check(probs.length === X.labels.length && Math.abs(probs.reduce((a, c) => a + c, 0) - 1) < 1e-9, 'texts: the listed probabilities sum to 1 over the texts: ' + probs.map(pct).join(', '));
  const note = await page.$eval('#textnote', (e) => e.textContent);
  check(note.includes('over the ' + X.labels.length + ' texts given'), 'texts: the page says what the probabilities are over: ' + note.slice(0, 60));
  const other = X.mapped.find((t) => t !== top);
  await page.select('#text', String(other));
  await page.waitForFunction((n) => window.attnmap.drawn > n, { timeout: 20000 }, open.drawn);
  const st = await checkMap(other, 0, 'another text picked');
  check(st.px.some((x, i) => x !== open.px[i]), 'texts: the heatmap changed with the text');
  await page.keyboard.press('m');
  await page.waitForFunction(() => window.attnmap.state.method === 1, { timeout: 20000 });
  await checkMap(other, 1, 'key m: the next method');
  const box = await (await page.$('#marks')).boundingBox(), k = N - 1;
  await page.mouse.move(box.x + ((k % GW) + 0.5) * box.width / GW, box.y + (Math.floor(k / GW) + 0.5) * box.height / GH);
  const kv = await page.$eval('#keyval', (e) => Number(e.dataset.v));
  check(kv === maps[(1 * J + X.mapped.indexOf(other)) * N + k], `texts: the hovered patch shows the map's value ${kv}`);
  check(outside.length === 0 && errors.length === 0, 'texts: no request left the folder, no script error' + outside.concat(errors).join('; '));
  if (!firefox) await page.screenshot({ path: shot.replace(/\.png$/, '.text.png'), clip: { x: 0, y: 0, width: 1280, height: 480 } });
}

// BROWSER=firefox: Debian's firefox-esr through WebDriver BiDi (ctest Explore.Firefox); default chromium.
const firefox = process.env.BROWSER === 'firefox';
const noSandbox = process.getuid() === 0 || process.env.CHROMIUM_NO_SANDBOX === '1';
const browser = firefox
  ? await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true })
  : await puppeteer.launch({
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      args: [...(noSandbox ? ['--no-sandbox'] : []), '--disable-gpu'],
    });
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  if (!firefox) await page.setOfflineMode(true);  // the network off (Firefox over BiDi: the interception below)
  await page.setRequestInterception(true);
  const outside = [];
  page.on('request', (r) => {
    if (r.url().startsWith(dirUrl)) r.continue();
    else { outside.push(r.url()); r.abort('blockedbyclient'); }
  });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(pathToFileURL(path.resolve(indexHtml)).href, { waitUntil: 'load' });
  await page.waitForFunction(() => window.attnmap && (window.attnmap.drawn > 0 || window.attnmap.error), { timeout: 20000 });
  const meta = await page.evaluate(() => window.attnmap.meta);
  const P = meta.prefix.length, [GW, GH] = meta.grid;
  check(meta.blocks === L && meta.heads === H && meta.tokens === T, `the page's shape (${meta.blocks}, ${meta.heads}, ${meta.tokens}) is the .npy's`);
  const lut = meta.lut;

  // Where the page opens: the class token's row (token 0) of the model's default view, pinned.
  const st0 = await page.evaluate(() => ({ ...window.attnmap.state, start: document.getElementById('start').textContent,
    uniform: Number(document.getElementById('uniform').dataset.v), utext: document.getElementById('uniform').textContent,
    scale: document.getElementById('scalename').textContent, scalewhat: document.getElementById('scalewhat').textContent,
    pre: Array.from(document.querySelectorAll('#prefixvals .pv')).map((e) => Number(e.dataset.v)) }));
  check(P > 0 && st0.query === 0 && st0.pinned, `opens on the class token's row, pinned (query ${st0.query}, pinned ${st0.pinned})`);
  check(st0.block === meta.start.block && st0.head === meta.start.head, `opens on the start view block ${meta.start.block} ${meta.start.head} (shown: block ${st0.block} ${st0.head})`);
  check(meta.start.view === 'L1/h3' && st0.block === 1 && st0.head === 'h3', `the bundled model's default view is L1/h3 (the page: ${meta.start.view})`);
  check(/class token's row of the model's default view L1\/h3/.test(st0.start), 'the page says where it opened: ' + st0.start);
  const row0 = exactRow(st0.block, st0.head, 0), pat0 = Array.from(row0.slice(P));
  check(st0.pre.every((v, i) => Math.abs(v - row0[i]) <= 1e-6 * Math.abs(row0[i]) + 1e-9), 'the opening row\'s prefix keys are the .npy\'s class-token row');
  // x uniform = max / mean of the patch keys; the page's mean is of the quantised values: within half a level.
  const mean0 = pat0.reduce((a, b) => a + b, 0) / pat0.length, hi0 = Math.max(...pat0), lo0 = Math.min(...pat0);
  const want0 = hi0 / mean0, tolU = want0 * ((hi0 - lo0) / 510 / mean0 + (hi0 - lo0) / 510 / hi0) + 1e-9;
  check(Math.abs(st0.uniform - want0) <= tolU, `the row's max is ${st0.uniform.toFixed(3)}x uniform (.npy max/mean ${want0.toFixed(3)}, tolerance ${tolU.toExponential(2)})`);
  check(/\u00d7 uniform$/.test(st0.utext), 'shown as "x uniform": ' + st0.utext);
  check(st0.scale === 'per row' && /own patch min/.test(st0.scalewhat), 'the page says the per-row scale is on: ' + st0.scale + ' ' + st0.scalewhat);
  // The page as it opens (docs/img/explore.png is this picture): OUTDIR/explore.open.png.
  await page.screenshot({ path: shot.replace(/\.png$/, '.open.png'), clip: { x: 0, y: 0, width: 1280, height: 972 } });
  const caps = await page.$$eval('#heads figcaption', (c) => c.map((e) => e.textContent));
  check(caps.length === H && caps.every((t) => /max [0-9.e-]+ = [0-9.]+\u00d7 uniform/.test(t)), 'each head\'s caption gives its max as x uniform: ' + caps.join(' | '));

  const drawn = () => page.evaluate(() => window.attnmap.drawn);
  async function settle(before) {
    await page.waitForFunction((n) => window.attnmap.drawn > n || window.attnmap.error, { timeout: 20000 }, before);
    const e = await page.evaluate(() => window.attnmap.error);
    if (e) throw new Error(e);
  }
  async function patchPoint(k) {
    const b = await (await page.$('#marks')).boundingBox();
    return [b.x + ((k % GW) + 0.5) * b.width / GW, b.y + (Math.floor(k / GW) + 0.5) * b.height / GH];
  }
  async function choose(block, head) {
    let n = await drawn();
    if (await page.$eval('#block', (e) => e.value) !== String(block)) { await page.select('#block', String(block)); await settle(n); }
    n = await drawn();
    if (await page.$eval('#head', (e) => e.value) !== head) { await page.select('#head', head); await settle(n); }
  }
  // One case: query (a patch index, or a prefix token by its button), key patch k.
  async function probe(block, head, query, k, what) {
    await choose(block, head);
    if (query.prefix !== undefined) {
      const n = await drawn();
      await page.click(`#prefix button[data-token="${query.prefix}"]`); await settle(n);
    } else {
      const [x, y] = await patchPoint(query.patch);
      await page.mouse.click(x, y);
    }
    const [kx, ky] = await patchPoint(k);
    await page.mouse.move(kx, ky);
    const st = await page.evaluate((kk) => {
      const c = document.getElementById('heat'), px = c.getContext('2d').getImageData(kk[0], kk[1], 1, 1).data;
      const kv = document.getElementById('keyval');
      return { state: { ...window.attnmap.state }, v: kv ? Number(kv.dataset.v) : NaN, text: kv ? kv.textContent : '',
        pre: Array.from(document.querySelectorAll('#prefixvals .pv')).map((e) => Number(e.dataset.v)), px: Array.from(px).slice(0, 3) };
    }, [k % GW, Math.floor(k / GW)]);
    const qi = query.prefix !== undefined ? query.prefix : P + query.patch;
    const row = exactRow(block, head, qi), patches = Array.from(row.slice(P));
    const lo = Math.min(...patches), hi = Math.max(...patches), want = row[P + k], tol = (hi - lo) / 510 + 1e-7 * hi;
    const label = `${what}: block ${block} ${head}, query token ${qi}, key patch ${k}`;
    check(st.state.query === qi && st.state.block === block && st.state.head === head, label + ': the page shows that row');
    check(Math.abs(st.v - want) <= tol, `${label}: shown ${st.v} vs .npy ${want} (tolerance ${tol.toExponential(2)})`);
    check(Math.abs(Number(st.text) - st.v) <= 5e-4 * Math.abs(st.v) + 1e-12, `${label}: the text ${st.text} is the value to 4 digits`);
    const preOk = st.pre.length === P && st.pre.every((v, i) => Math.abs(v - row[i]) <= 1e-6 * Math.max(1e-30, Math.abs(row[i])) + (head === 'rollout' || head === 'mean' ? 1e-7 : 0));
    check(preOk, `${label}: prefix keys ${st.pre.map((v) => v.toPrecision(6))} = .npy ${Array.from(row.slice(0, P)).map((v) => v.toPrecision(6))}`);
    const [vmin, vmax] = st.state.scale === 'one' ? [0, 1] : st.state.scale === 'block' ? [0, meta.map_max[block][meta.fused.indexOf(head) >= 0 ? meta.fused.indexOf(head) : meta.fused.length + Number(head.slice(1))]] : [lo, hi];
    const level = vmax > vmin ? Math.floor(Math.min(1, Math.max(0, (want - vmin) / (vmax - vmin))) * 255 + 0.5) : 0;
    const near = [level - 1, level, level + 1].filter((x) => x >= 0 && x < 256)
      .some((x) => lut[3 * x] === st.px[0] && lut[3 * x + 1] === st.px[1] && lut[3 * x + 2] === st.px[2]);
    check(near, `${label}: pixel rgb(${st.px}) is ${meta.colormap}[${level}±1] = rgb(${lut.slice(3 * level, 3 * level + 3)}) on scale ${st.state.scale}`);
  }

  const last = GW * GH - 1, mid = Math.floor(GH / 2) * GW + Math.floor(GW / 2);
  await probe(L - 1, 'mean', { patch: mid }, 0, 'centre query');
  await probe(L - 1, 'mean', { patch: 0 }, last, 'top-left corner query');
  await probe(0, 'h0', { patch: last }, 0, 'bottom-right corner query');
  await probe(0, 'h' + (H - 1), { patch: GW - 1 }, mid, 'top-right corner query, last head');
  await probe(Math.min(1, L - 1), 'max', { patch: mid + 1 }, mid, 'max over heads');
  await probe(Math.min(1, L - 1), 'min', { patch: mid }, mid + GW, 'min over heads');
  if (P > 0) await probe(L - 1, 'h1', { prefix: 0 }, mid, 'class-token button');
  await probe(L - 1, 'rollout', { prefix: 0 }, mid, 'rollout, class token');
  await probe(Math.min(2, L - 1), 'rollout', { patch: mid }, 3, 'rollout, patch query');

  // Keyboard: s switches the scale (per map -> 0..1 -> block max), ArrowRight moves the query, ] the block.
  await page.keyboard.press('s');
  await page.waitForFunction(() => window.attnmap.state.scale === 'one');
  await probe(L - 1, 'h2', { patch: mid }, mid, 'fixed scale 0..1');
  const sn1 = await page.$eval('#scalenote', (e) => e.textContent);
  check(/^scale: shared/.test(sn1) && /0\.\.1/.test(sn1), 'the page says the shared 0..1 scale is on: ' + sn1);
  await page.keyboard.press('s');
  await page.waitForFunction(() => window.attnmap.state.scale === 'block');
  await probe(L - 1, 'h2', { patch: mid }, mid - 1, 'fixed scale 0..block max');
  const sn2 = await page.$eval('#scalenote', (e) => e.textContent);
  check(/^scale: shared/.test(sn2) && /largest patch value of block/.test(sn2), 'the page says the shared block scale is on: ' + sn2);
  await page.keyboard.press('s');
  await page.mouse.move(1, 1);  // off the photo: the pointer no longer names a key
  const q0 = await page.evaluate(() => window.attnmap.state.query);
  let n = await drawn();
  await page.keyboard.press('ArrowRight'); await settle(n);
  check(await page.evaluate(() => window.attnmap.state.query) === q0 + 1, 'ArrowRight moves the query one patch right');
  n = await drawn();
  await page.keyboard.press('[');  await settle(n);
  check(await page.evaluate(() => window.attnmap.state.block) === L - 2 || L === 1, '[ goes one block down');
  const heads = await page.$$eval('#heads canvas', (c) => c.length);
  check(heads === H, `the heads grid shows the block's ${H} heads (${heads})`);
  const rec = await page.$eval('#record', (e) => e.textContent);
  check(rec.includes('"weights_sha256"') && rec.includes('"input_sha256"'), 'the provenance record is on the page');
  const stored = await page.$eval('#stored', (e) => e.textContent);
  check(/^Stored: /.test(stored), 'the page says what it stores: ' + stored);

  // Back to a centre query, pinned, for the screenshot.
  const [cx, cy] = await patchPoint(mid - 2 * GW);
  await page.mouse.click(cx, cy);
  const [hx, hy] = await patchPoint(mid + 2);
  await page.mouse.move(hx, hy);
  check(outside.length === 0, 'no request left ' + dirUrl + (outside.length ? ': ' + outside.join(', ') : ''));
  check(errors.length === 0, 'no script error' + (errors.length ? ': ' + errors.join('; ') : ''));
  await page.screenshot({ path: shot, fullPage: true });
  if (textsHtml) {
    const t0 = Date.now();
    await textsPage(textsHtml);
    console.log(`texts page: ${Date.now() - t0} ms`);
  }
} catch (e) {
  failed++;
  console.log('FAILED: ' + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
