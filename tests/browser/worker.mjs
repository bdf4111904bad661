// Browser test of the viewer's data path in its Worker (web/worker.js) in Debian's Chromium
// (playwright-core): spawns the built etwd, uploads and fast-replays a corpus ETL and checks that
// every event arrives through the worker (the page's count equals the server's stats and `etwd
// convert` of the file), that the page's main thread holds only the rows it draws, that the field
// filter and the free text are applied in the worker to exactly the expected events (counted here
// from the convert output), that the cap's discards and a gap's drops are counted on screen.
//
// Env: ETWD_BIN (etwd binary), ETWD_CORPUS (../shared/corpus), CHROMIUM (/usr/bin/chromium).
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import https from 'node:https';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const ART = path.join(HERE, 'artifacts');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const BIN = process.env.ETWD_BIN || path.join(ROOT, 'build/test/server/etwd');
const CORPUS = process.env.ETWD_CORPUS || path.resolve(ROOT, '../shared/corpus');
const ETL = path.join(CORPUS, 'airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl'); // 17,078 events
const WAIT = 60000;
fs.mkdirSync(ART, { recursive: true });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.log(...a);
if (!fs.existsSync(CHROMIUM)) { console.error(`FATAL: Chromium not found at ${CHROMIUM}`); process.exit(2); }

const results = [];
let page;
async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.push([name, true]);
    log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    results.push([name, false]);
    log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    if (page) await page.screenshot({ path: path.join(ART, `fail-worker-${name.replace(/\W+/g, '_')}.png`), fullPage: true }).catch(() => {});
  }
}
function assert(c, msg) { if (!c) throw new Error('assertion failed: ' + msg); }
async function until(fn, what, ms = WAIT, every = 100) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last && last.message ? last.message : JSON.stringify(last)})`);
    await sleep(every);
  }
}
const freePort = () => new Promise((res, rej) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); });
  s.on('error', rej);
});
function request(method, url, token, body) {
  return new Promise((res, rej) => {
    const r = https.request(url, { method, rejectUnauthorized: false, timeout: 20000, headers: token ? { Authorization: 'Bearer ' + token, 'Content-Type': 'application/octet-stream' } : {} }, (x) => {
      const parts = [];
      x.on('data', (d) => parts.push(d));
      x.on('end', () => res([x.statusCode, Buffer.concat(parts).toString('utf8')]));
    });
    r.on('error', rej);
    r.on('timeout', () => r.destroy(new Error('timeout')));
    r.end(body);
  });
}

/* the expected events: `etwd convert` of the same file */
const events = execFileSync(BIN, ['convert', ETL, '--quiet'], { maxBuffer: 1 << 28 }).toString('utf8')
  .split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const countBy = (f) => { const m = {}; for (const e of events) { const k = f(e); m[k] = (m[k] || 0) + 1; } return m; };

/* ---------- server and browser ---------- */
const state = fs.mkdtempSync(path.join(os.tmpdir(), 'etwd-worker-'));
const port = await freePort();
const base = `https://127.0.0.1:${port}`;
const srv = spawn(BIN, ['--listen', `127.0.0.1:${port}`, '--state-dir', state], { stdio: ['ignore', 'ignore', 'pipe'] });
const srvLog = fs.createWriteStream(path.join(ART, 'etwd-worker.log'));
srv.stderr.pipe(srvLog);
let srvExited = null;
srv.on('exit', (c, s) => { srvExited = `${c ?? s}`; });
let browser;
async function cleanup() {
  try { if (browser) await browser.close(); } catch { /* gone */ }
  if (srvExited === null) { srv.kill('SIGTERM'); for (let i = 0; i < 1200 && srvExited === null; i++) await sleep(100); if (srvExited === null) srv.kill('SIGKILL'); }
  fs.rmSync(state, { recursive: true, force: true });
}
try {
  await until(async () => srvExited === null && (await request('GET', `${base}/api/v1/health`))[0] === 200, 'etwd to answer', 2 * WAIT, 200);
} catch (e) {
  console.error(`FATAL: etwd did not start (${BIN}): ${e.message}`);
  await cleanup();
  process.exit(2);
}
const tokens = Object.fromEntries(fs.readFileSync(path.join(state, 'tokens'), 'utf8').split('\n')
  .filter((l) => l && !l.startsWith('#')).map((l) => l.split(/\s+/)).map(([, role, secret]) => [role, secret]));
browser = await chromium.launch({
  executablePath: CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
const pageErrors = [];
const ctx = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 900 } });
ctx.setDefaultTimeout(WAIT);
page = await ctx.newPage();
page.on('pageerror', (e) => { pageErrors.push(String(e)); log('page error:', String(e)); });
page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) pageErrors.push(m.text()); });
const status = () => page.locator('#ev-status').textContent();
const fmt = (n) => n.toLocaleString('en-US');

await step('replay a corpus ETL: every event arrives through the worker, counts equal the server\'s stats', async () => {
  const [st] = await request('POST', `${base}/api/v1/files?name=${path.basename(ETL)}`, tokens.admin, fs.readFileSync(ETL));
  assert(st === 201 || st === 200, 'upload ' + st);
  await page.goto(base + '/');
  await page.locator('#token').fill(tokens.admin);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#who').waitFor({ state: 'visible' });
  const id = await page.evaluate(async (file) => {
    document.getElementById('cap').value = '50000';
    const s = await api('POST', '/api/v1/sessions', { files: [file], replay: 'fast', name: 'worker' });
    updateSessions([...S.sessions.values(), s]);
    openViewer(s.id);
    return s.id;
  }, path.basename(ETL));
  await until(async () => /ended/.test(await page.locator('#viewer-conn').textContent()) && new RegExp(`^${fmt(events.length)} rows · ${fmt(events.length)} received`).test(await status()),
    `${events.length} rows and the end of the stream`);
  const [, body] = await request('GET', `${base}/api/v1/sessions/${id}`, tokens.admin);
  const s = JSON.parse(body);
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

await cleanup();
const failed = results.filter(([, ok]) => !ok);
log(`\nworker: ${results.length - failed.length} passed, ${failed.length} failed`);
process.exit(failed.length ? 1 : 0);
