// gallery_test.mjs - opens attnmap's static gallery in Debian's chromium (headless, driven by
// puppeteer-core: it starts the installed browser, downloads nothing) straight from file://, and checks what
// a reader relies on: every thumbnail loads (naturalWidth > 0) after scrolling through the lazy images,
// sorting by a statistic reorders the rows (ascending, then descending), the filter narrows them, and no
// request leaves ROOT (the run's output folder), the cards are a compact grid (several a row, rows short
// enough for a 158-image folder to be a few screens) and names wrap only between their parts
// ('_', '-', '.', ...), never inside a word; every output of a card (its .png, .panel.png, .layers.png) is a
// link shown whole inside its card and the topmost element at its centre, so it can be clicked (issue 41:
// the list was cut by an ellipsis), and clicking .panel.png opens that file. Saves a screenshot.
//   usage: node gallery_test.mjs INDEX_HTML ROOT SCREENSHOT_PNG
import puppeteer from 'puppeteer-core';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [indexHtml, root, shot] = process.argv.slice(2);
if (!indexHtml || !root || !shot) {
  console.error('usage: node gallery_test.mjs INDEX_HTML ROOT SCREENSHOT_PNG');
  process.exit(2);
}
const rootUrl = pathToFileURL(path.resolve(root)).href + '/';
let passed = 0, failed = 0;
function check(ok, what) {
  if (ok) { passed++; console.log('ok: ' + what); } else { failed++; console.log('FAILED: ' + what); }
}

// Chromium refuses to start its sandbox as root (CI runs as root): --no-sandbox there, or when asked.
const noSandbox = process.getuid() === 0 || process.env.CHROMIUM_NO_SANDBOX === '1';
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: [...(noSandbox ? ['--no-sandbox'] : []), '--disable-gpu', '--allow-file-access-from-files'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 700 });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(pathToFileURL(path.resolve(indexHtml)).href, { waitUntil: 'load' });

  // Scroll through the page so every lazy image is requested, then wait for each to finish.
  const height = await page.evaluate(() => document.body.scrollHeight);
  for (let y = 0; y <= height; y += 500) {
    await page.evaluate((yy) => window.scrollTo(0, yy), y);
    await new Promise((r) => setTimeout(r, 60));
  }
  await page.waitForFunction(() => Array.from(document.images).every((i) => i.complete), { timeout: 20000 });
  const imgs = await page.evaluate(() => Array.from(document.images).map((i) => [i.getAttribute('src'), i.naturalWidth]));
  check(imgs.length > 0, `the page has thumbnails (${imgs.length})`);
  const broken = imgs.filter(([, w]) => !(w > 0));
  check(broken.length === 0, 'every thumbnail loaded' + (broken.length ? ': broken ' + broken.map(([s]) => s).join(', ') : ''));

  const rows = await page.evaluate(() => document.querySelectorAll('#t tbody tr').length);
  check(rows >= 3, `rows: ${rows}`);

  // Sort by "map max" (column 4): values ascending with unknown ones last, then descending.
  const column = async (c) => page.evaluate((cc) => Array.from(document.querySelectorAll('#t tbody tr'))
    .map((r) => r.cells[cc].getAttribute('data-v')), c);
  const before = await column(4);
  const headers = await page.$$('#t th');
  await headers[4].click();
  const asc = await column(4);
  const known = (v) => v.filter((x) => x !== '').map(Number);
  const ka = known(asc);
  check(ka.length >= 2 && ka.every((v, i) => i === 0 || ka[i - 1] <= v), 'sorting by map max puts the rows in ascending order');
  check(JSON.stringify(asc) !== JSON.stringify(before), 'sorting by map max reordered the rows');
  check(asc.slice(ka.length).every((x) => x === ''), 'rows without statistics sort last');
  await headers[4].click();
  const kd = known(await column(4));
  check(kd.every((v, i) => i === 0 || kd[i - 1] >= v), 'a second click sorts in descending order');

  // Filter by the first row's file name: only rows containing it remain.
  const name = await page.evaluate(() => document.querySelector('#t tbody tr .name').textContent);
  await page.type('#q', name);
  const shown = await page.evaluate(() => Array.from(document.querySelectorAll('#t tbody tr'))
    .filter((r) => r.style.display !== 'none').length);
  check(shown >= 1 && shown < rows, `filtering by "${name}" shows ${shown} of ${rows} rows`);
  await page.$eval('#q', (e) => { e.value = ''; e.dispatchEvent(new Event('input')); });

  const outside = requests.filter((u) => !u.startsWith(rootUrl));
  check(outside.length === 0, 'no request left ' + rootUrl + (outside.length ? ': ' + outside.join(', ') : ''));
  check(errors.length === 0, 'no script error' + (errors.length ? ': ' + errors.join('; ') : ''));

  // The grid: cards a row (the grid's column tracks: auto-fill makes them whether or not there are cards
  // to fill them) and the distance between rows (the tallest card plus the row gap), at 1200 x 700 and at
  // 1920 x 1080.
  const geometry = async () => page.evaluate(() => {
    const tbody = document.querySelector('#t tbody');
    const cs = getComputedStyle(tbody);
    const perRow = cs.gridTemplateColumns.split(' ').filter((x) => x).length;
    const cards = Array.from(tbody.rows).filter((r) => r.style.display !== 'none');
    const tallest = Math.max(...cards.map((r) => r.getBoundingClientRect().height));
    return { perRow, rowH: tallest + parseFloat(cs.rowGap), cards: cards.length };
  });
  for (const [w, h, minPerRow, maxScreens] of [[1200, 700, 7, 8], [1920, 1080, 12, 4]]) {
    await page.setViewport({ width: w, height: h });
    const g = await geometry();
    const screens = Math.ceil(158 / g.perRow) * g.rowH / h;
    console.log(`at ${w}x${h}: ${g.perRow} cards a row, rows ${g.rowH} px apart, 158 images = ${screens.toFixed(1)} screens`);
    check(g.perRow >= minPerRow, `at ${w}x${h} at least ${minPerRow} cards a row (${g.perRow})`);
    check(g.rowH <= 250, `at ${w}x${h} rows at most 250 px apart (${g.rowH})`);
    check(screens <= maxScreens, `at ${w}x${h} a 158-image folder is at most ${maxScreens} screens (${screens.toFixed(1)})`);
  }
  await page.setViewport({ width: 1200, height: 700 });

  // Names wrap between their parts: each line break (a character on a lower line than the one before it)
  // follows '_', '-', '.', '/', '\\', ',' or a space; the long name does wrap; the full path is the tooltip.
  const breaks = await page.evaluate(() => {
    const out = [];
    document.querySelectorAll('#t tbody tr .name').forEach((el) => {
      let prevTop = null, prev = '', lines = 1;
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (let i = 0; i < node.length; i++) {
          const r = document.createRange();
          r.setStart(node, i);
          r.setEnd(node, i + 1);
          const rect = r.getClientRects()[0];
          if (!rect) continue;
          if (prevTop !== null && rect.top > prevTop + 2) {
            lines++;
            out.push({ name: el.textContent, after: prev, ok: /[_\-.\/\\, ]/.test(prev) });
          }
          prevTop = rect.top;
          prev = node.data[i];
        }
      }
      out.push({ name: el.textContent, lines, title: el.getAttribute('title') });
    });
    return out;
  });
  const bad = breaks.filter((b) => b.ok === false);
  check(bad.length === 0, 'names break only between parts' + (bad.length ? ': ' + bad.map((b) => `${b.name} after "${b.after}"`).join(', ') : ''));
  const long = breaks.find((b) => b.lines !== undefined && b.name.startsWith('a_rather_long'));
  check(long !== undefined && long.lines >= 2, `the long name wraps (${long ? long.lines : 0} lines)`);
  check(long !== undefined && long.title.endsWith('/' + long.name), 'the long name\'s tooltip is its whole path');

  // Every output reachable: on each card of a done input the links .png, .panel.png and .layers.png; each
  // one (scrolled into view) has a size, lies inside its card's box and is what a click at its centre hits.
  const outs = await page.evaluate(() => {
    const res = [];
    for (const r of document.querySelectorAll('#t tbody tr')) {
      const links = Array.from(r.querySelectorAll('a.out'));
      const card = r.getBoundingClientRect();
      const seen = [];
      for (const a of links) {
        a.scrollIntoView({ block: 'center' });
        const b = a.getBoundingClientRect(), c = r.getBoundingClientRect();
        const hit = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2);
        seen.push({ text: a.textContent, href: a.getAttribute('href'), w: b.width, h: b.height,
          inside: b.left >= c.left - 0.5 && b.right <= c.right + 0.5 && b.top >= c.top - 0.5 && b.bottom <= c.bottom + 0.5,
          clickable: hit !== null && (hit === a || a.contains(hit)) });
      }
      res.push({ status: r.dataset.status, name: r.querySelector('.name').textContent, cardW: card.width, links: seen });
    }
    return res;
  });
  const doneCards = outs.filter((c) => c.status === 'done');
  check(doneCards.length >= 6, `done cards: ${doneCards.length}`);
  for (const c of doneCards) {
    const texts = c.links.map((l) => l.text);
    const want = ['.png', '.panel.png', '.layers.png'];
    check(want.every((w) => texts.includes(w)), `${c.name}: its card links ${want.join(', ')} (${texts.join(' ')})`);
    const hidden = c.links.filter((l) => !(l.w > 0 && l.h > 0 && l.inside && l.clickable));
    check(hidden.length === 0, `${c.name}: every output link is shown whole in its card and clickable` +
      (hidden.length ? ': not ' + hidden.map((l) => `${l.text} (${l.w}x${l.h}, inside ${l.inside}, clickable ${l.clickable})`).join(', ') : ''));
  }
  // Clicking a card's .panel.png link opens that file.
  const panelHref = doneCards.length ? doneCards[0].links.find((l) => l.text === '.panel.png') : undefined;
  if (panelHref) {
    const link = await page.$(`a.out[href="${panelHref.href}"]`);
    await link.evaluate((a) => a.scrollIntoView({ block: 'center' }));
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), link.click()]);
    const url = page.url();
    check(url.endsWith('.panel.png') && url.startsWith(rootUrl), 'clicking .panel.png opens ' + url);
    await page.goBack({ waitUntil: 'load' });
  } else {
    check(false, 'a .panel.png link to click');
  }

  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: shot, fullPage: false });
  console.log('screenshot: ' + shot);
} finally {
  await browser.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
