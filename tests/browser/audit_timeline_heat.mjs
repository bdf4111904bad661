// Browser test of the timeline's two ways of drawing a lane (issue 22 item 1: "counts per lane as
// a heat strip when events are too dense to draw one by one") in Debian's Chromium: a replayed
// corpus ETL (17,078 events), lanes by process, the middle tenth of its events; the canvas pixels of each lane's middle row: a
// lane with more events than a quarter of the plot's pixel columns is a heat strip (its columns
// in several shades, by count), a sparser one has one tick per column with events (one shade).
// The lanes' counts add up to the file's events in the window (`etwd convert`).
//
// Env: ETWD_BIN, ETWD_CORPUS (../shared/corpus), CHROMIUM.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, CORPUS, assert, until, suite, startEtwd, launchBrowser, newPage, login, finish } from './harness.mjs';

const ETL = path.join(CORPUS, 'airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl');
const S = suite('tl-heat');
const events = execFileSync(BIN, ['convert', ETL, '--quiet'], { maxBuffer: 1 << 28 }).toString('utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
// a window from the 45th to the 55th percentile of the times: busy and quiet processes in it
const ms = events.map((e) => Date.parse(e.System.TimeCreated.replace(/(\.\d{3})\d*Z$/, '$1Z'))).sort((a, b) => a - b);
const WIN = [ms[Math.floor(ms.length * 0.45)], ms[Math.floor(ms.length * 0.55)]];
const n = ms.filter((t) => t >= WIN[0] && t <= WIN[1]).length;
let etwd, browser;
try {
  etwd = await startEtwd('tl-heat');
  browser = await launchBrowser();
} catch (e) { console.error('FATAL: ' + e.message); if (etwd) await etwd.stop(); process.exit(2); }
const pageErrors = [];
const page = S.page = await newPage(browser, pageErrors);

await S.step('dense lanes are heat strips (several shades), sparse lanes ticks (one shade)', async () => {
  const [st] = await etwd.req('POST', `/api/v1/files?name=${path.basename(ETL)}`, fs.readFileSync(ETL), 'application/octet-stream');
  assert(st === 201 || st === 200, 'upload ' + st);
  const [st2, s] = await etwd.req('POST', '/api/v1/sessions', { files: [path.basename(ETL)], replay: 'fast', name: 'heat' });
  assert(st2 === 201, 'replay ' + st2);
  await login(page, etwd.tokens.admin, `${etwd.base}/#session=${s.id}`);
  await page.locator('#viewer').waitFor({ state: 'visible' });
  await until(async () => /ended/.test(await page.locator('#viewer-conn').textContent()), 'the replay ended');
  await page.getByRole('button', { name: 'Timeline' }).click();
  await page.locator('#tl-lanes').selectOption('process');
  await page.evaluate((w) => Timeline.setWindow(w), WIN);
  // (the timeline keeps the times' 100 ns digits: the events at the window's last millisecond may
  // be out of it, so between 90 % and all of n)
  const state = await until(async () => { const t = await page.evaluate(() => Timeline.state()); return !t.busy && t.by === 'process' && t.win[0] === WIN[0] && t.shown >= 0.9 * n && t.shown <= n ? t : null; }, `the ~${n} events of the window on the timeline`);
  assert(state.lanes.reduce((a, l) => a + l.count, 0) === state.shown, 'the lanes add up to the events shown');
  const lanes = await page.evaluate(() => {
    const cv = document.getElementById('timeline'), dpr = window.devicePixelRatio || 1, g = cv.getContext('2d');
    const W = cv.clientWidth - 120; // the plot: right of the 120 px labels
    return Timeline.state().lanes.map((l, i) => {
      const px = g.getImageData(Math.round(120 * dpr), Math.round((i * 18 + 9) * dpr), Math.round(W * dpr), 1).data;
      const shades = new Set();
      for (let k = 3; k < px.length; k += 4) if (px[k] > 40) shades.add(px[k]); // above the lane's background stripe
      return { key: l.key, count: l.count, dense: l.count > W / 4, shades: shades.size };
    });
  });
  const dense = lanes.filter((l) => l.dense), sparse = lanes.filter((l) => !l.dense && l.count > 0);
  assert(dense.length > 0 && sparse.length > 0, 'the file has dense and sparse lanes: ' + JSON.stringify(lanes));
  for (const l of dense) assert(l.shades >= 3, `dense lane ${l.key} (${l.count}) drawn in shades: ${l.shades}`);
  for (const l of sparse) assert(l.shades === 1, `sparse lane ${l.key} (${l.count}) drawn as ticks: ${l.shades}`);
});

await S.step('no script errors', async () => { assert(!pageErrors.length, pageErrors.join('\n')); });
await finish(S, 'tl-heat', browser, etwd);
