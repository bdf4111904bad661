// Browser test of the Δt column (issue 22 item 2: relative time since the start or since a selected
// event) in Debian's Chromium: a replayed corpus ETL, Δt of every drawn row equal to its
// TimeCreated minus the first event's (from `etwd convert`); "since the selected event" gives the
// selected row +0 and moves with the arrow keys; a reload (the mode kept in the URL, no selection
// yet) shows Δt since the first event, not an empty column; selecting a row then counts from it.
//
// Env: ETWD_BIN, ETWD_CORPUS (../shared/corpus), ETWD_MANIFESTS, CHROMIUM.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, CORPUS, MANIFESTS, assert, until, suite, startEtwd, launchBrowser, newPage, login, finish } from './harness.mjs';

const ETL = path.join(CORPUS, 'microsoft+krabsetw/examples/NativeExamples/powershell.etl');
const S = suite('reltime');
const events = execFileSync(BIN, ['convert', ETL, '--quiet', '--manifests', MANIFESTS], { maxBuffer: 1 << 26 }).toString('utf8')
  .split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
// TimeCreated → [seconds, ns] (100 ns digits in ETL times)
const tOf = (s) => { const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(s); return [Date.parse(m[1] + 'Z') / 1000, Number(((m[2] || '') + '000000000').slice(0, 9))]; };
const dt = (a, b) => { const ns = (a[0] - b[0]) * 1e9 + (a[1] - b[1]); return (ns < 0 ? '-' : '+') + (Math.abs(ns) / 1e9).toFixed(6); };
const bySeq = new Map(events.map((e) => [e.seq, e]));
const T0 = tOf(events[0].System.TimeCreated);

let etwd, browser;
try {
  etwd = await startEtwd('reltime', ['--manifests', MANIFESTS]);
  browser = await launchBrowser();
} catch (e) { console.error('FATAL: ' + e.message); if (etwd) await etwd.stop(); process.exit(2); }
const pageErrors = [];
const page = S.page = await newPage(browser, pageErrors);
const menu = async (fn) => { await page.locator('#columns-menu summary').click(); await fn(); await page.locator('#columns-menu summary').click(); };
/* [seq, Δt text] of the drawn rows */
const drawn = () => page.evaluate(async () => {
  await S.viewer.settled();
  const i = S.viewer.cols.findIndex((c) => c.id === 'rel');
  return [...document.querySelectorAll('#grid-rows .grid-row:not([hidden])')].filter((r) => r._row && !r._row.gap).map((r) => [r._row.ev.seq, i < 0 ? null : r.children[i].textContent]);
});
const ended = async () => {
  await page.locator('#viewer').waitFor({ state: 'visible' });
  await until(async () => /ended/.test(await page.locator('#viewer-conn').textContent()) &&
    (await page.locator('#ev-status').textContent()).startsWith(`${events.length} rows`), `all ${events.length} rows`);
};
const expectFrom = (rows, base, what) => {
  assert(rows.length >= 5, `${what}: rows drawn (${rows.length})`);
  for (const [seq, text] of rows) assert(text === dt(tOf(bySeq.get(seq).System.TimeCreated), base), `${what}: seq ${seq} Δt ${text} != ${dt(tOf(bySeq.get(seq).System.TimeCreated), base)}`);
};

await S.step('Δt of every drawn row is its time minus the first event\'s', async () => {
  const [st] = await etwd.req('POST', `/api/v1/files?name=powershell.etl`, fs.readFileSync(ETL), 'application/octet-stream');
  assert(st === 201 || st === 200, 'upload ' + st);
  const [st2, s] = await etwd.req('POST', '/api/v1/sessions', { files: ['powershell.etl'], replay: 'fast', name: 'rel' });
  assert(st2 === 201, 'replay ' + st2);
  await login(page, etwd.tokens.admin, `${etwd.base}/#session=${s.id}`);
  await ended();
  await menu(() => page.locator('#columns').getByLabel('Δt (s)').check());
  expectFrom(await drawn(), T0, 'since the first event');
});

await S.step('since the selected event: the selected row is +0.000000, arrows move the base', async () => {
  await menu(() => page.locator('#rel-base').selectOption('sel'));
  const rows = await drawn();
  const pick = rows[Math.floor(rows.length / 2)][0];
  await page.locator(`#grid-rows .grid-row:not([hidden])`).nth(Math.floor(rows.length / 2)).click();
  expectFrom(await drawn(), tOf(bySeq.get(pick).System.TimeCreated), `since seq ${pick}`);
  await page.locator('#grid').focus();
  await page.keyboard.press('ArrowDown');
  const sel = await page.evaluate(() => S.viewer.sel && S.viewer.sel.ev.seq);
  assert(sel && sel !== pick, 'the selection moved: ' + sel);
  expectFrom(await drawn(), tOf(bySeq.get(sel).System.TimeCreated), `since seq ${sel}`);
  assert(/rel=sel/.test(page.url()), 'the mode is in the URL: ' + page.url());
});

await S.step('a reload in "since the selected event" mode, nothing selected yet: Δt since the first event, then since a click', async () => {
  await page.reload();
  await ended();
  assert((await page.locator('#rel-base').inputValue()) === 'sel', 'the mode kept');
  expectFrom(await drawn(), T0, 'after the reload');
  const rows = await drawn();
  await page.locator(`#grid-rows .grid-row:not([hidden])`).nth(1).click();
  expectFrom(await drawn(), tOf(bySeq.get(rows[1][0]).System.TimeCreated), 'after a click');
});

await S.step('no script errors', async () => { assert(!pageErrors.length, pageErrors.join('\n')); });
await finish(S, 'reltime', browser, etwd);
