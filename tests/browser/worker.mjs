// Browser test of the viewer's data path in its Worker (web/worker.js) in Debian's Chromium
// (playwright-core): spawns the built etwd, uploads and fast-replays a corpus ETL and checks that
// every event arrives through the worker (the page's count equals the server's stats and `etwd
// convert` of the file), that the page's main thread holds only the rows it draws, that the field
// filter and the free text are applied in the worker to exactly the expected events (counted here
// from the convert output), that the cap's discards and a gap's drops are counted on screen.
//
// Env: ETWD_BIN (etwd binary), ETWD_CORPUS (../shared/corpus), CHROMIUM (/usr/bin/chromium).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, CORPUS, log, assert, until, suite, startEtwd, launchBrowser, newPage, login, finish } from './harness.mjs';

const ETL = path.join(CORPUS, 'airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl'); // 17,078 events
const S = suite('worker');
const step = S.step;

/* the expected events: `etwd convert` of the same file */
const events = execFileSync(BIN, ['convert', ETL, '--quiet'], { maxBuffer: 1 << 28 }).toString('utf8')
  .split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));

/* ---------- server and browser ---------- */
let etwd, browser;
try {
  etwd = await startEtwd('worker');
  browser = await launchBrowser();
} catch (e) { console.error('FATAL: ' + e.message); if (etwd) await etwd.stop(); process.exit(2); }
const pageErrors = [];
const page = await newPage(browser, pageErrors);
S.page = page;
const status = () => page.locator('#ev-status').textContent();
const fmt = (n) => n.toLocaleString('en-US');

await step('replay a corpus ETL: every event arrives through the worker, counts equal the server\'s stats', async () => {
  const [st] = await etwd.req('POST', `/api/v1/files?name=${path.basename(ETL)}`, fs.readFileSync(ETL), 'application/octet-stream');
  assert(st === 201 || st === 200, 'upload ' + st);
  await login(page, etwd.tokens.admin, etwd.base + '/');
  const id = await page.evaluate(async (file) => {
    document.getElementById('cap').value = '50000';
    const s = await api('POST', '/api/v1/sessions', { files: [file], replay: 'fast', name: 'worker' });
    updateSessions([...S.sessions.values(), s]);
    openViewer(s.id);
    return s.id;
  }, path.basename(ETL));
  await until(async () => /ended/.test(await page.locator('#viewer-conn').textContent()) && new RegExp(`^${fmt(events.length)} rows · ${fmt(events.length)} received`).test(await status()),
    `${events.length} rows and the end of the stream`);
  const [, s] = await etwd.req('GET', `/api/v1/sessions/${id}`);
  const r = await page.evaluate(() => ({ received: S.viewer.received, gaps: S.viewer.gaps, dropped: S.viewer.gapDropped, worker: S.viewer.worker instanceof Worker,
    rows: S.viewer.rows, win: S.viewer.win.rows.length, dom: document.querySelectorAll('#grid-rows .grid-row').length }));
  log('   ' + JSON.stringify({ ...r, server: s.stats.events, loss: s.stats.loss }));
  assert(s.stats.events === events.length, `server stats ${s.stats.events} != convert ${events.length}`);
  assert(r.received - r.gaps === s.stats.events && r.dropped === 0 && s.stats.loss.subscribers === 0, 'page count = server count, nothing dropped');
  assert(r.worker && r.rows === undefined, 'a worker holds the rows; the viewer has none');
  assert(r.win > 0 && r.win <= 3 * r.dom + 3, `the page holds only a window of rows: ${r.win} (${r.dom} drawn)`);
});

await step('the field filter and the free text are applied in the worker to exactly the expected events', async () => {
  const byProv = {};
  for (const e of events) byProv[e.System.Provider.Name] = (byProv[e.System.Provider.Name] || 0) + 1;
  const [prov] = Object.entries(byProv).sort((a, b) => b[1] - a[1])[1] || Object.entries(byProv)[0];
  const mine = events.filter((e) => e.System.Provider.Name === prov);
  const pid = mine[Math.floor(mine.length / 2)].System.Execution.ProcessID;
  const want = mine.filter((e) => e.System.Execution.ProcessID === pid).length;
  await page.locator('#field-filter').fill(`Provider == "${prov}" && pid == ${pid}`);
  await until(async () => new RegExp(`^${fmt(want)} of ${fmt(events.length)} rows match`).test(await status()), `${want} rows of ${prov} pid ${pid}`);
  const cells = await page.evaluate(async () => { await S.viewer.settled(); const i = S.viewer.cols.findIndex((c) => c.id === 'provider'); return [...document.querySelectorAll('#grid-rows .grid-row:not([hidden])')].map((r) => r.children[i].textContent); });
  assert(cells.length && cells.every((c) => c === prov), 'the drawn rows are of that provider: ' + cells.slice(0, 5));
  // free text on top: an event name of that provider, lower case (its events of that name)
  const name = mine.find((e) => e.System.Execution.ProcessID === pid && e.System.EventName).System.EventName;
  const both = mine.filter((e) => e.System.Execution.ProcessID === pid && String(e.System.EventName).toLowerCase().includes(name.toLowerCase())).length;
  await page.locator('#text-filter').fill(name.toLowerCase());
  await until(async () => new RegExp(`^${fmt(both)} of ${fmt(events.length)} rows match`).test(await status()), `${both} rows named ${name}`);
  log(`   ${prov} pid ${pid}: ${want} rows; named ${name}: ${both}`);
  await page.locator('#text-filter').fill('');
  await page.locator('#field-filter').fill('');
  await until(async () => new RegExp(`^${fmt(events.length)} rows ·`).test(await status()), 'all rows again');
});

await step('a cap below the file: kept + discarded = all, said on screen; a gap\'s drops are counted', async () => {
  await page.locator('#cap').selectOption('10000');
  await until(async () => /^10,000 rows ·/.test(await status()), '10,000 rows kept');
  const notice = await page.locator('#cap-notice').textContent();
  assert(notice.includes(`Only the last 10,000 rows are kept: ${fmt(events.length - 10000)} older rows were discarded`), 'cap notice: ' + notice);
  await page.evaluate(() => S.viewer.onFrame('[{"Gap":{"Dropped":4321,"Layer":"subscriber","Reason":"client queue full"}}]'));
  await until(async () => /4,321 dropped for this page in 1 gap/.test(await status()), 'the gap counted in the status');
});

await step('no script errors', async () => { assert(!pageErrors.length, pageErrors.join('\n')); });

await finish(S, 'worker', browser, etwd);
