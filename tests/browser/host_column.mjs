// Browser test of the event table's Host column (review item: every event carries System.Host,
// but the table had no column for it, so a fleet's events could not be told apart), in Debian's
// Chromium against a real fleet: a nats-server (JetStream) that this test starts, two etwd agents
// (`--host-name alpha`, `--host-name beta`) whose live sessions (sched_process_exec) publish into
// it, and on alpha a central session (backend nats) that reads both. A program with a unique name
// is run 3 times, so each agent publishes its 3 executions.
//   - alpha's own session (one host): no Host column by default; the column chooser shows it,
//     each drawn row's cell "alpha";
//   - the central session (two hosts): the Host column appears by itself (the chooser's box
//     checked), each drawn row's cell is its event's System.Host, both hosts drawn;
//   - the field filter `host == beta` (and `Host in (…)`), the free-text box ("beta") and the sort
//     by Host work on it; the CSV export of the view has a Host column with each row's host;
//     group-by Host counts each host's events and filters the table to one.
//
// Env: ETWD_BIN, CHROMIUM, ETWD_BROWSER_WAIT.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import http from 'node:http';
import { ART, assert, until, suite, startEtwd, launchBrowser, newPage, login, download, finish } from './harness.mjs';

const S = suite('host');
const N = 3;
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'etwd-hostcol-'));
const PROG = path.join(TMP, `hweb${process.pid % 100000}`); // (a comm is at most 15 bytes)
const NAME = path.basename(PROG);
fs.copyFileSync('/bin/true', PROG);
fs.chmodSync(PROG, 0o755);

const freePort = () => new Promise((res, rej) => {
  const sv = net.createServer();
  sv.listen(0, '127.0.0.1', () => { const p = sv.address().port; sv.close(() => res(p)); });
  sv.on('error', rej);
});
const getJson = (url) => new Promise((res, rej) => {
  http.get(url, { timeout: 5000 }, (x) => { let t = ''; x.on('data', (d) => { t += d; }); x.on('end', () => { try { res(JSON.parse(t)); } catch (e) { rej(e); } }); })
    .on('error', rej).on('timeout', function () { this.destroy(new Error('timeout')); });
});

/* nats-server with JetStream on free loopback ports, its store in TMP */
let nats = null, natsUrl = '', mport = 0;
async function startNats() {
  const bin = ['/usr/sbin/nats-server', '/usr/bin/nats-server'].find((f) => fs.existsSync(f));
  if (!bin) throw new Error('nats-server is not installed (scripts/deps.sh installs it)');
  const port = await freePort();
  mport = await freePort();
  natsUrl = `nats://127.0.0.1:${port}`;
  const log = fs.openSync(path.join(ART, 'nats-host.log'), 'w');
  nats = spawn(bin, ['-js', '-a', '127.0.0.1', '-p', String(port), '-m', String(mport), '-sd', path.join(TMP, 'js')], { stdio: ['ignore', log, log] });
  await until(async () => (await getJson(`http://127.0.0.1:${mport}/jsz`)) && true, 'nats-server to answer', 60000, 100);
}
const streamMsgs = async (name) => {
  const j = await getJson(`http://127.0.0.1:${mport}/jsz?streams=true`);
  for (const a of j.account_details || []) for (const s of a.stream_detail || []) if (s.name === name) return s.state.messages;
  return null;
};

let a, b, browser, localId, centralId;
try {
  await startNats();
  a = await startEtwd('host-a', ['--host-name', 'alpha']);
  b = await startEtwd('host-b', ['--host-name', 'beta']);
  const sink = { type: 'nats', url: natsUrl, stream: 'HWEB', subject: 'hweb.{host}.{session}.{provider}' };
  for (const e of [a, b]) {
    const [st, j] = await e.req('POST', '/api/v1/sessions', { name: 'ex', providers: [{ name: 'sched', events: ['sched_process_exec'] }], sinks: [sink] });
    if (st !== 201) throw new Error(`agent session: ${st} ${JSON.stringify(j)}`);
    if (e === a) localId = j.id;
    // the sink is the session's first subscriber: from then on every event goes to the stream
    await until(async () => { const [s2, x] = await e.req('GET', `/api/v1/sessions/${j.id}`); return s2 === 200 && x.stats.subscribers >= 1; }, 'the sink subscribed');
  }
  await until(async () => (await streamMsgs('HWEB')) !== null, 'the stream HWEB');
  const [st, j] = await a.req('POST', '/api/v1/sessions', { name: 'fleet', backend: 'nats', subjects: ['hweb.>'], nats: { url: natsUrl, stream: 'HWEB' } });
  if (st !== 201) throw new Error(`central session: ${st} ${JSON.stringify(j)}`);
  centralId = j.id;
  for (let i = 0; i < N; i++) spawnSync(PROG);
  browser = await launchBrowser();
} catch (e) {
  console.error('FATAL: ' + e.message);
  for (const x of [a, b]) if (x) await x.stop();
  if (nats) nats.kill('SIGTERM');
  process.exit(2);
}

const pageErrors = [];
const page = S.page = await newPage(browser, pageErrors);
const menu = async (fn) => { await page.locator('#columns-menu summary').click(); await fn(); await page.locator('#columns-menu summary').click(); };
const heads = () => page.locator('#grid-head [role=columnheader]').evaluateAll((l) => l.map((x) => x.dataset.col));
/* the drawn rows of my program: [seq, the Host cell's text (null: no column), the event's System.Host] */
const drawn = () => page.evaluate(async (name) => {
  await S.viewer.settled();
  const i = S.viewer.cols.findIndex((c) => c.id === 'host');
  return [...document.querySelectorAll('#grid-rows .grid-row:not([hidden])')].filter((r) => r._row && !r._row.gap)
    .filter((r) => String((r._row.ev.EventData || {}).filename || '').endsWith('/' + name))
    .map((r) => [r._row.ev.seq, i < 0 ? null : r.children[i].textContent, r._row.ev.System.Host]);
}, NAME);
const mine = (what) => page.evaluate(async ([w, name]) => (await S.viewer.dump(w)).filter((r) => !r.gap && String((r.ev.EventData || {}).filename || '').endsWith('/' + name)).map((r) => r.ev.System.Host), [what, NAME]);
const mineFilter = `filename ~ "/${NAME}"`;

await S.step('one host (alpha\'s own session): no Host column by default; chosen, every cell is alpha', async () => {
  await login(page, a.tokens.admin, `${a.base}/#session=${localId}`);
  await page.locator('#viewer').waitFor({ state: 'visible' });
  await until(async () => (await mine('kept')).length === N, `alpha's ${N} executions of ${NAME}`);
  await page.locator('#field-filter').fill(mineFilter);
  await until(async () => (await drawn()).length === N, `${N} drawn rows`);
  assert(!(await heads()).includes('host'), 'no Host column for one host: ' + (await heads()));
  assert(!(await page.locator('#columns').getByLabel('Host', { exact: true }).isChecked()), 'the chooser has Host, unchecked');
  await menu(() => page.locator('#columns').getByLabel('Host', { exact: true }).check());
  assert((await heads()).includes('host'), 'the Host column shown: ' + (await heads()));
  const rows = await drawn();
  assert(rows.length === N && rows.every(([, cell, h]) => cell === 'alpha' && h === 'alpha'), 'Host cells: ' + JSON.stringify(rows));
  await menu(() => page.locator('#columns').getByLabel('Host', { exact: true }).uncheck()); // back to the default
  assert(!(await heads()).includes('host'), 'hidden again');
});

await S.step('two hosts (the central nats session): the Host column appears by itself, each cell its event\'s host', async () => {
  await page.locator('tr', { hasText: 'fleet' }).getByRole('button', { name: 'Open' }).click();
  await until(async () => (await page.locator('#viewer-h').textContent()).includes(`Session ${centralId}`), 'the central session\'s viewer');
  await until(async () => (await mine('kept')).length === 2 * N, `${2 * N} executions of ${NAME} from both agents`);
  assert(JSON.stringify((await mine('kept')).sort()) === JSON.stringify([...Array(N).fill('alpha'), ...Array(N).fill('beta')]), 'hosts of the events: ' + (await mine('kept')));
  await page.locator('#field-filter').fill(mineFilter);
  await until(async () => (await drawn()).length === 2 * N, `${2 * N} drawn rows`);
  assert((await heads()).includes('host'), 'the Host column is shown: ' + (await heads()));
  await page.locator('#columns-menu summary').click();
  assert(await page.locator('#columns').getByLabel('Host', { exact: true }).isChecked(), 'the chooser says so');
  await page.locator('#columns-menu summary').click();
  const rows = await drawn();
  assert(rows.every(([, cell, h]) => cell === h) && new Set(rows.map((r) => r[1])).size === 2, 'Host cells: ' + JSON.stringify(rows));
});

await S.step('filter by host: the field filter (host == beta, Host in (...)) and the free-text box', async () => {
  await page.locator('#field-filter').fill(`${mineFilter} && host == beta`);
  await until(async () => (await drawn()).length === N, `${N} rows of beta`);
  let rows = await drawn();
  assert(rows.every(([, cell]) => cell === 'beta'), 'only beta: ' + JSON.stringify(rows));
  assert(JSON.stringify(await mine('filtered')) === JSON.stringify(Array(N).fill('beta')), 'the filtered view: beta only');
  await page.locator('#field-filter').fill(`${mineFilter} && Host in (alpha, gamma)`);
  await until(async () => JSON.stringify(await mine('filtered')) === JSON.stringify(Array(N).fill('alpha')), 'only alpha');
  await page.locator('#field-filter').fill(mineFilter);
  await page.locator('#text-filter').fill('BETA');
  await until(async () => JSON.stringify(await mine('filtered')) === JSON.stringify(Array(N).fill('beta')), 'the text "BETA": beta only');
  rows = await drawn();
  assert(rows.length === N && rows.every(([, cell]) => cell === 'beta'), 'drawn: ' + JSON.stringify(rows));
  await page.locator('#text-filter').fill('');
  await until(async () => (await mine('filtered')).length === 2 * N, 'both hosts again');
});

await S.step('sort by Host; the CSV export of the view has the Host column', async () => {
  await page.locator('#grid-head [data-col=host] button.sort').click();
  await until(async () => JSON.stringify((await drawn()).map((r) => r[1])) === JSON.stringify([...Array(N).fill('alpha'), ...Array(N).fill('beta')]), 'alpha rows, then beta rows');
  const lines = (await download(page, 'csv')).trim().split(/\r\n/);
  const head = lines[0].split(',');
  const ih = head.indexOf('Host'), is = head.indexOf('Seq');
  assert(ih >= 0 && is >= 0, 'CSV header: ' + lines[0]);
  const bySeq = new Map((await drawn()).map(([seq, , h]) => [String(seq), h]));
  const cells = lines.slice(1).map((l) => l.split(','));
  assert(cells.length === 2 * N && cells.every((c) => c[ih] === bySeq.get(c[is])), 'CSV rows: ' + lines.join(' | '));
});

await S.step('group by Host: one group per host with its count; a click filters the table to it', async () => {
  await page.locator('#grp-toggle').click();
  await page.locator('#grp-panel').waitFor({ state: 'visible' });
  await page.locator('#grp-by').selectOption('host');
  await until(async () => JSON.stringify(await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#grp-body tr')]
    .map((tr) => [tr.dataset.key, Number(tr.children[1].textContent.replace(/,/g, ''))])))) === JSON.stringify({ alpha: N, beta: N }), `alpha ${N}, beta ${N}`);
  await page.locator('#grp-body button[data-key="alpha"]').click();
  await until(async () => JSON.stringify(await mine('filtered')) === JSON.stringify(Array(N).fill('alpha')), 'the table: alpha only');
  await page.locator('#grp-body button[data-key="alpha"]').click();
  await until(async () => (await mine('filtered')).length === 2 * N, 'both hosts again');
});

await S.step('no script errors', async () => { assert(!pageErrors.length, pageErrors.join('\n')); });

const codeB = await b.stop();
const sanB = fs.readFileSync(b.logFile, 'utf8').split('\n').filter((l) => /ERROR: (Address|Leak|Thread)Sanitizer|runtime error:/.test(l));
S.results.push(['etwd beta exits cleanly with no sanitizer report', codeB === '0' && !sanB.length]);
if (codeB !== '0' || sanB.length) console.log(`FAIL etwd beta: exit ${codeB}\n${sanB.join('\n')}`);
process.on('exit', () => { nats.kill('SIGTERM'); fs.rmSync(TMP, { recursive: true, force: true }); }); // (finish exits)
await finish(S, 'host', browser, a);
