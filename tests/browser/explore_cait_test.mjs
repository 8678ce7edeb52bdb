// explore_cait_test.mjs - the explorer of a CaiT model (issue 44; docs/explore.md "CaiT") in Debian's chromium,
// headless, from file:// with the network off: it opens on the last class-attention block's class-token row
// (the heatmap the .npy's row on the per-row scale); at a self-attention block the class token's button is
// disabled with the reason, its row is absent (no heatmap drawn: every pixel transparent, the reason on the
// page) and a patch's row is drawn with the class key listed as absent; at a class-attention block a patch's
// row is absent but its rollout row is drawn. attention.npy holds NaN where absent. Screenshots: SHOT's name
// with .open.png (as it opens), .sa.png (a patch row at block 0), .absent.png (the class token at block 0).
//   usage: node explore_cait_test.mjs INDEX_HTML SHOT_PNG
import puppeteer from 'puppeteer-core';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [indexHtml, shot] = process.argv.slice(2);
if (!indexHtml || !shot) { console.error('usage: node explore_cait_test.mjs INDEX_HTML SHOT_PNG'); process.exit(2); }
const dir = path.dirname(path.resolve(indexHtml)), dirUrl = pathToFileURL(dir).href + '/';
let passed = 0, failed = 0;
function check(ok, what) { if (ok) { passed++; console.log('ok: ' + what); } else { failed++; console.log('FAILED: ' + what); } }

const b = fs.readFileSync(path.join(dir, 'attention.npy')), hlen = b.readUInt16LE(8);
const shape = b.toString('latin1', 10, 10 + hlen).match(/'shape': \(([^)]*)\)/)[1].split(',').filter((s) => s.trim()).map(Number);
const A = new Float32Array(b.buffer.slice(b.byteOffset + 10 + hlen, b.byteOffset + b.length));
const [L, H, T] = shape;
const meanRow = (l, i) => Array.from({ length: T }, (_, k) => { let m = 0; for (let h = 0; h < H; h++) m += A[((l * H + h) * T + i) * T + k]; return m / H; });

const noSandbox = process.getuid() === 0 || process.env.CHROMIUM_NO_SANDBOX === '1';
const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
  args: [...(noSandbox ? ['--no-sandbox'] : []), '--disable-gpu'] });
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.setOfflineMode(true);
  await page.setRequestInterception(true);
  page.on('request', (r) => (r.url().startsWith(dirUrl) ? r.continue() : r.abort('blockedbyclient')));
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(pathToFileURL(path.resolve(indexHtml)).href, { waitUntil: 'load' });
  await page.waitForFunction(() => window.attnmap && (window.attnmap.drawn > 0 || window.attnmap.error), { timeout: 20000 });
  const meta = await page.evaluate(() => window.attnmap.meta);
  const [GW, GH] = meta.grid, N = GW * GH, first = meta.absent.class_blocks[0];
  // The heat canvas's pixels (GW x GH, one a patch) and what the page says.
  const look = () => page.evaluate(() => {
    const c = document.getElementById('heat'), px = Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data);
    const cls = document.querySelector('#prefix button[data-token="0"]');
    return { s: { ...window.attnmap.state }, absent: window.attnmap.absent, px, disabled: cls.disabled, title: cls.title,
      note: document.getElementById('absentnote').textContent, rowinfo: document.getElementById('rowinfo').textContent,
      pre: Array.from(document.querySelectorAll('#prefixvals td')).map((e) => e.textContent) };
  });
  // Each patch's pixel the colour map's entry for the exact mean row on the per-row scale, within one level.
  function rowDrawn(px, row) {
    const v = row.slice(1), lo = Math.min(...v), hi = Math.max(...v);
    return v.every((x, k) => {
      const lv = Math.floor((x - lo) / (hi - lo) * 255 + 0.5);
      return [-1, 0, 1].some((d) => { const c = 3 * Math.min(255, Math.max(0, lv + d));
        return px[4 * k] === meta.lut[c] && px[4 * k + 1] === meta.lut[c + 1] && px[4 * k + 2] === meta.lut[c + 2]; });
    });
  }
  const settle = async (n) => page.waitForFunction((m) => window.attnmap.drawn > m, { timeout: 20000 }, n);

  let st = await look();
  check(st.s.block === L - 1 && st.s.query === 0 && !st.absent, `opens on class-attention block ${st.s.block}'s class row`);
  check(rowDrawn(st.px, meanRow(L - 1, 0)), 'its heatmap is the .npy class row (mean over heads), per-row scale');
  check(!st.disabled && /only the class token queries/.test(st.note), 'class button enabled there; note: ' + st.note);
  await page.screenshot({ path: shot.replace(/\.png$/, '.open.png'), fullPage: true });

  let n = await page.evaluate(() => window.attnmap.drawn);
  await page.select('#block', '0'); await settle(n);
  st = await look();
  check(st.absent && st.disabled && /no query in its self-attention blocks/.test(st.title), 'block 0: the class row absent, its button disabled: ' + st.title);
  check(st.px.every((x, i) => i % 4 !== 3 || x === 0), 'no heatmap drawn for the absent row (every pixel transparent)');
  check(/^No heatmap: /.test(st.rowinfo), 'the page says why: ' + st.rowinfo);
  await page.screenshot({ path: shot.replace(/\.png$/, '.absent.png'), fullPage: true });

  const box = await (await page.$('#marks')).boundingBox(), c = Math.floor(GH / 2) * GW + Math.floor(GW / 2);
  n = await page.evaluate(() => window.attnmap.drawn);
  await page.mouse.click(box.x + (c % GW + 0.5) * box.width / GW, box.y + (Math.floor(c / GW) + 0.5) * box.height / GH); await settle(n);
  st = await look();
  check(!st.absent && st.s.query === 1 + c && rowDrawn(st.px, meanRow(0, 1 + c)), `block 0: patch ${c}'s row drawn as the .npy's`);
  check(st.pre.some((t) => /^absent: no patch attends/.test(t)), 'its class key is listed as absent: ' + st.pre.join(' | '));
  check(Number.isNaN(A[(0 * H * T + 1 + c) * T]) && Number.isNaN(A[0]), 'attention.npy: NaN at the absent class key and row');
  await page.screenshot({ path: shot.replace(/\.png$/, '.sa.png'), fullPage: true });

  n = await page.evaluate(() => window.attnmap.drawn);
  await page.select('#block', String(first)); await settle(n);
  st = await look();
  check(st.absent && /only the class token queries/.test(st.rowinfo), `block ${first}: the patch's row absent: ` + st.rowinfo);
  n = await page.evaluate(() => window.attnmap.drawn);
  await page.select('#head', 'rollout'); await settle(n);
  st = await look();
  check(!st.absent && st.px.some((x, i) => i % 4 === 3 && x === 255), `block ${first}: the patch's rollout row drawn`);
  check(errors.length === 0, 'no page errors: ' + errors.join('; '));
} finally {
  await browser.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
