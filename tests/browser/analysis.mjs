// Browser tests of the page as an analysis tool (issue 22 items 2, 4, 5, 6) in Debian's Chromium:
// a field filter selects exactly the events a hand-written predicate selects from
// `etwd convert FILE` of a replayed corpus file; completion, bad-expression message, free text that
// ignores sequence numbers; field columns, sort, resize, relative time; ndjson/CSV/Chrome export;
// reload, pasted URL and back button; the syscalls event picker fits; keyboard; dark mode; the
// Actions column at 800 px; "older events not loaded" for a running session's old history.
// Screenshots: artifacts/ (copied to docs/ with ETWD_UPDATE_SCREENSHOT=1).
//
// Env: ETWD_BIN, ETWD_CORPUS (../shared/corpus), ETWD_MANIFESTS (CORPUS/../manifests), CHROMIUM.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { ROOT, ART, BIN, CORPUS, MANIFESTS, WAIT, assert, until, suite, startEtwd, launchBrowser,
  newPage as pageOf, login as loginAs, download, finish } from './harness.mjs';

const PS_ETL = path.join(CORPUS, 'microsoft+krabsetw/examples/NativeExamples/powershell.etl');
const require = createRequire(import.meta.url);
const EtwFilter = require(path.join(ROOT, 'web/filter.js'));
const S = suite('a');
const step = S.step;
let page;

/* ---------- server and browser ---------- */
const etwd = await startEtwd('analysis', ['--replay-kb', '256', '--manifests', MANIFESTS]);
const base = etwd.base;
const browser = await launchBrowser();
const pageErrors = [];
const newPage = (opt = {}) => pageOf(browser, pageErrors, Object.assign({ viewport: { width: 1280, height: 800 } }, opt));
const login = (p, url = base + '/') => loginAs(p, etwd.tokens.admin, url);
const status = (p) => p.locator('#ev-status').textContent();
const counts = async (p) => {
  const m = /([\d,]+) (?:of ([\d,]+) )?rows/.exec((await status(p)) || '');
  return m ? { shown: Number(m[1].replace(/,/g, '')), kept: Number((m[2] || m[1]).replace(/,/g, '')) } : { shown: -1, kept: -1 };
};
const viewSeqs = (p) => p.evaluate(async () => (await S.viewer.dump('filtered')).filter((r) => !r.gap).map((r) => r.ev.seq));
const headLabels = (p) => p.evaluate(() => [...document.querySelectorAll('#grid-head [role=columnheader]')].map((s) => s.textContent.replace(/ [▲▼]$/, '')));

/* ---------- the corpus file, its events as `etwd convert` decodes them ---------- */
const convert = execFileSync(BIN, ['convert', PS_ETL, '--manifests', MANIFESTS], { maxBuffer: 64 << 20 }).toString('utf8')
  .split('\n').filter(Boolean).map((l) => JSON.parse(l));
// the filter under test, and the same predicate written by hand
const EXPR = '(pid == 17480 && ContextInfo ~ "out-default" && Task in (102, 103)) || (Provider in ("Windows Kernel", sched) && Opcode != 0)';
const byHand = (e) => {
  const s = e.System, x = s.Execution || {}, d = e.EventData || {};
  return (x.ProcessID === 17480 && typeof d.ContextInfo === 'string' && d.ContextInfo.toLowerCase().includes('out-default') && [102, 103].includes(s.Task)) ||
    (['Windows Kernel', 'sched'].includes(s.Provider.Name) && s.Opcode !== 0);
};
const expectSeqs = convert.filter(byHand).map((e) => e.seq);
let psId = 0, ps2Id = 0, filterUrl = '';

await step('the field filter selects exactly the events `etwd convert` + the same predicate select', async () => {
  assert(convert.length > 100 && expectSeqs.length > 5 && expectSeqs.length < convert.length / 2, `a useful selection: ${expectSeqs.length} of ${convert.length}`);
  const pred = EtwFilter.compile(EXPR);
  assert(JSON.stringify(convert.filter(pred).map((e) => e.seq)) === JSON.stringify(expectSeqs), 'filter.js agrees with the hand-written predicate');
  let [st, f] = await etwd.req('POST', `/api/v1/files?name=powershell.etl`, fs.readFileSync(PS_ETL), 'application/octet-stream');
  assert(st === 201 || st === 200, 'upload ' + st + JSON.stringify(f));
  [st, f] = await etwd.req('POST', `/api/v1/sessions`, { files: ['powershell.etl'], replay: 'fast', name: 'ps-a' });
  assert(st === 201, 'replay ' + st + JSON.stringify(f));
  psId = f.id;
  [st, f] = await etwd.req('POST', `/api/v1/sessions`, { files: ['powershell.etl'], replay: 'fast', name: 'ps-b' });
  ps2Id = f.id;
  page = S.page = await newPage();
  // a URL with the session: after login the page opens it
  await login(page, `${base}/#session=${psId}`);
  await page.locator('#viewer').waitFor({ state: 'visible' });
  await until(async () => (await counts(page)).kept === convert.length, `all ${convert.length} events`);
  await page.locator('#field-filter').fill(EXPR);
  await until(async () => (await counts(page)).shown === expectSeqs.length, `${expectSeqs.length} rows match`);
  assert(JSON.stringify(await viewSeqs(page)) === JSON.stringify(expectSeqs), 'exactly the expected events');
  assert(/of [\d,]+ rows match/.test(await status(page)), 'status says filtered');
  assert(new URL(page.url()).hash.includes('filter='), 'the filter is in the URL');
});

await step('a bad expression: a clear message under the box, the table keeps the last good filter', async () => {
  await page.locator('#field-filter').fill('pid == 17480 && (Task ==');
  const err = page.locator('#field-filter-error');
  await until(async () => /expected a value but the expression ended at column 25/.test(await err.textContent()), 'the parser message');
  assert(await err.isVisible(), 'message visible');
  const eb = await err.boundingBox(), ib = await page.locator('#field-filter').boundingBox();
  assert(eb.y >= ib.y + ib.height - 1 && Math.abs(eb.x - ib.x) < 2, 'under the box');
  assert((await page.locator('#field-filter').getAttribute('aria-invalid')) === 'true', 'aria-invalid');
  assert((await counts(page)).shown === expectSeqs.length, 'last good filter kept');
  await page.locator('#field-filter').fill(EXPR);
  await until(async () => !(await err.textContent()), 'message gone');
});

await step('completion from the events\' fields; free text never matches sequence numbers', async () => {
  await page.locator('#field-filter').fill('');
  await page.locator('#field-filter').pressSequentially('pid == 16040 && Cont');
  const sug = page.locator('#field-suggest');
  await until(async () => (await sug.isVisible()) && (await sug.locator('li').allTextContents()).includes('EventData.ContextInfo'), 'a suggestion');
  await page.keyboard.press('Tab');
  assert((await page.locator('#field-filter').inputValue()) === 'pid == 16040 && EventData.ContextInfo ', 'accepted');
  await page.locator('#field-filter').pressSequentially('~ prompt');
  const want = convert.filter((e) => e.System.Execution.ProcessID === 16040 && String((e.EventData || {}).ContextInfo || '').toLowerCase().includes('prompt')).length;
  await until(async () => (await counts(page)).shown === want, `${want} prompt events of 16040`);
  await page.locator('#field-filter').fill('');
  // a number that is a sequence number (and so in the raw JSON) but in no shown field
  const n = [...Array(convert.length).keys()].map((i) => String(i + 1)).find((w) => {
    const inJson = convert.filter((e) => JSON.stringify(e).includes(w)).length;
    return inJson > convert.filter((e) => EtwFilter.textOf(e).includes(w)).length && inJson > 0;
  });
  const wantText = convert.filter((e) => EtwFilter.textOf(e).includes(n)).length;
  await page.locator('#text-filter').fill(n);
  await until(async () => (await counts(page)).shown === wantText, `${wantText} rows for "${n}" (not the seq)`);
  assert(!(await viewSeqs(page)).includes(Number(n)) || EtwFilter.textOf(convert[Number(n) - 1]).includes(n), 'event with that seq not matched by its seq');
  await page.locator('#text-filter').fill('');
  await until(async () => (await counts(page)).shown === convert.length, 'all rows again');
});

await step('field columns, sort, resize, relative time', async () => {
  await page.locator('#columns-menu summary').click();
  await page.locator('#col-field').fill('EventData.ContextInfo');
  await page.locator('#col-add').click();
  await page.locator('#columns').getByLabel('Δt (s)').check();
  await page.locator('#columns-menu summary').click();
  const labels = await headLabels(page);
  assert(labels.includes('ContextInfo') && labels.includes('Δt (s)'), 'new columns: ' + labels);
  await page.locator('#grid').focus();
  await page.keyboard.press('Home');
  await page.evaluate(() => S.viewer.settled()); // the worker sends the first rows
  const first = await page.evaluate(() => [...document.querySelectorAll('#grid-rows .grid-row:not([hidden])')][0].textContent);
  assert(first.includes('+0.000000'), 'first row at Δt 0: ' + first);
  // Δt of the last event = its time minus the first's
  const t = (e) => { const m = /:(\d\d)\.(\d+)Z$/.exec(e.System.TimeCreated); return m; };
  assert(t(convert[0]) && t(convert[convert.length - 1]), 'times');
  // sort by PID, descending on the second click
  await page.locator('#grid-head [data-col="pid"] button').click();
  await page.locator('#grid-head [data-col="pid"] button').click();
  assert((await page.locator('#grid-head [data-col="pid"]').getAttribute('aria-sort')) === 'descending', 'aria-sort');
  const pids = await page.evaluate(async () => (await S.viewer.dump('filtered')).slice(0, 200).map((r) => r.ev.System.Execution.ProcessID));
  const maxPid = Math.max(...convert.map((e) => e.System.Execution.ProcessID));
  assert(pids[0] === maxPid && pids.every((p, i) => !i || p <= pids[i - 1]), 'sorted by pid, descending');
  // a field column shows the field's value
  const ci = await page.evaluate(async () => { await S.viewer.settled(); const i = S.viewer.cols.findIndex((c) => c.id === 'f:EventData.ContextInfo'); const r = [...document.querySelectorAll('#grid-rows .grid-row:not([hidden])')].find((x) => x.children[i].textContent); return r ? r.children[i].textContent : ''; });
  assert(/Severity = /.test(ci), 'ContextInfo cell: ' + ci);
  // resize the Event column by dragging its right edge
  const ev = page.locator('#grid-head [data-col="event"]');
  const b0 = await ev.boundingBox();
  const rz = await ev.locator('.resizer').boundingBox();
  await page.mouse.move(rz.x + rz.width / 2, rz.y + rz.height / 2);
  await page.mouse.down();
  await page.mouse.move(rz.x + 80, rz.y + rz.height / 2, { steps: 4 });
  await page.mouse.up();
  const b1 = await ev.boundingBox();
  assert(b1.width > b0.width + 60, `wider: ${b0.width} -> ${b1.width}`);
  assert(/sort=-pid/.test(page.url()) && /cols=/.test(page.url()), 'sort and columns in the URL: ' + page.url());
});

await step('export: Chrome trace JSON, ndjson and CSV of the filtered rows', async () => {
  await page.locator('#field-filter').fill(EXPR);
  await page.locator('#field-filter').press('Enter');
  await until(async () => (await counts(page)).shown === expectSeqs.length, 'filtered');
  const chrome = JSON.parse(await download(page, 'chrome'));
  const te = chrome.traceEvents;
  assert(Array.isArray(te) && chrome.displayTimeUnit === 'ns' && chrome.otherData.producer === 'etwd', 'envelope');
  const inst = te.filter((e) => e.ph === 'i');
  assert(inst.length === expectSeqs.length, `instants ${inst.length} != ${expectSeqs.length}`);
  for (const e of te.filter((x) => x.ph !== 'M')) {
    assert(typeof e.ts === 'number' && e.ts >= 0 && Number.isInteger(e.pid) && Number.isInteger(e.tid) && typeof e.name === 'string' && e.name, 'valid event ' + JSON.stringify(e));
  }
  assert(te.filter((x) => x.ph !== 'M').every((e, i, a) => !i || a[i - 1].ts <= e.ts), 'sorted by ts');
  assert(JSON.stringify(inst.map((e) => e.args.seq).sort((a, b) => a - b)) === JSON.stringify(expectSeqs), 'the filtered events');
  assert(inst.some((e) => e.ts === 0), 'ts from the first exported event');
  // kept rows: the start/stop pair (opcode 1 then 2, same provider, task and thread) is a complete event
  const all = JSON.parse(await download(page, 'chrome', 'kept')).traceEvents;
  let pairs = 0;
  const open = new Set();
  for (const e of convert) {
    const k = `${e.System.Provider.Name}|${e.System.Task}|${e.System.Execution.ThreadID}`;
    if (e.System.Opcode === 1) open.add(k); else if (e.System.Opcode === 2 && open.delete(k)) pairs++;
  }
  const xs = all.filter((e) => e.ph === 'X');
  assert(pairs > 0 && xs.length === pairs && xs.every((e) => e.dur >= 0), `complete events ${xs.length} (pairs ${pairs})`);
  assert(all.filter((e) => e.ph === 'i').length === convert.length, 'all kept events');
  const nd = (await download(page, 'ndjson', 'kept')).split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert(nd.length === convert.length && JSON.stringify(nd[5]) === JSON.stringify(convert[5]), 'ndjson = convert');
  const csv = (await download(page, 'csv')).split('\r\n').filter(Boolean);
  assert(csv[0].split(',').join() === (await headLabels(page)).join(), 'CSV header = shown columns: ' + csv[0]);
  filterUrl = page.url();
});

await step('reload keeps the view; a pasted URL shows the same view', async () => {
  const view = async (p) => ({ seqs: await viewSeqs(p), heads: await headLabels(p), filter: await p.locator('#field-filter').inputValue(), st: (await counts(p)).shown });
  const before = await view(page);
  await page.reload();
  await page.locator('#viewer').waitFor({ state: 'visible' });
  await until(async () => (await counts(page)).shown === expectSeqs.length, 'filtered after reload');
  const after = await view(page);
  assert(JSON.stringify(after) === JSON.stringify(before), `same view after reload:\n${JSON.stringify(before)}\n${JSON.stringify(after)}`);
  assert(page.url() === filterUrl, 'same URL');
  const p2 = await newPage();
  await login(p2, filterUrl);
  await p2.locator('#viewer').waitFor({ state: 'visible' });
  await until(async () => (await counts(p2)).shown === expectSeqs.length, 'filtered in the pasted URL');
  const pasted = await view(p2);
  assert(JSON.stringify(pasted) === JSON.stringify(before), 'same view from the pasted URL');
  await p2.screenshot({ path: path.join(ART, 'page-filter.png') });
  await p2.context().close();
});

await step('the back button goes to the previous view', async () => {
  await page.locator(`#sessions-body tr[data-id="${ps2Id}"] button.open`).click();
  await until(async () => new URL(page.url()).hash.includes(`session=${ps2Id}`), 'URL of the other session');
  await page.locator('#field-filter').fill('pid == 16040');
  await page.locator('#field-filter').press('Enter');
  await until(async () => /16040/.test(page.url()), 'the new filter in the URL');
  await page.goBack();
  await until(async () => /Session \d+/.test(await page.locator('#viewer-h').textContent()) && (await page.locator('#viewer-h').textContent()).includes(`Session ${ps2Id}`) && (await page.locator('#field-filter').inputValue()) === EXPR, 'back: the filter before');
  await page.goBack();
  await until(async () => (await page.locator('#viewer-h').textContent()).includes(`Session ${psId}`) && (await counts(page)).shown === expectSeqs.length, 'back: the first session');
  await page.goForward();
  await until(async () => (await page.locator('#viewer-h').textContent()).includes(`Session ${ps2Id}`), 'forward again');
});

await step('keyboard: / focuses the filter, space pauses, arrows move the selection', async () => {
  await page.locator('#viewer-h').click();
  await page.keyboard.press('/');
  assert(await page.evaluate(() => document.activeElement.id === 'field-filter'), '/ focuses the field filter');
  await page.locator('#viewer-h').click();
  await page.keyboard.press(' ');
  await until(async () => (await page.locator('#pause').getAttribute('aria-pressed')) === 'true', 'paused');
  await page.keyboard.press(' ');
  await until(async () => (await page.locator('#pause').getAttribute('aria-pressed')) === 'false', 'resumed');
  await until(async () => (await counts(page)).shown > 1, 'rows in the table');
  await page.keyboard.press('ArrowDown'); // the first row: the worker sends it when it is not drawn
  await page.evaluate(() => S.viewer.settled());
  const a = JSON.parse(await page.locator('#detail').textContent());
  await page.keyboard.press('ArrowDown');
  await page.evaluate(() => S.viewer.settled());
  const b = JSON.parse(await page.locator('#detail').textContent());
  const v = await viewSeqs(page);
  assert(v.indexOf(b.seq) === v.indexOf(a.seq) + 1, `the next row: ${a.seq} -> ${b.seq}`);
});

await step('dark mode follows the system, the toggle overrides it and is kept', async () => {
  const p = await newPage({ colorScheme: 'dark' });
  await login(p, base + '/#session=' + psId);
  const bg = () => p.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
  assert((await p.evaluate(() => document.documentElement.dataset.theme)) === 'dark' && (await bg()) === 'rgb(21, 25, 30)', 'dark: ' + (await bg()));
  assert((await p.locator('#theme').getAttribute('aria-pressed')) === 'true', 'toggle pressed');
  await p.locator('#viewer').waitFor({ state: 'visible' });
  await until(async () => (await counts(p)).kept === convert.length, 'events');
  await p.screenshot({ path: path.join(ART, 'page-dark.png') });
  await p.locator('#theme').click();
  assert((await bg()) === 'rgb(246, 247, 249)', 'light after the toggle');
  await p.reload();
  await p.locator('#who').waitFor({ state: 'visible' });
  assert((await bg()) === 'rgb(246, 247, 249)', 'the choice is kept');
  await p.context().close();
});

await step('at 800 px the Actions column is on screen', async () => {
  const p = await newPage({ viewport: { width: 800, height: 700 } });
  await login(p);
  const btn = p.locator(`#sessions-body tr[data-id="${psId}"] button.open`);
  await btn.waitFor();
  for (const sel of ['button.open', 'button.delete']) {
    const b = await p.locator(`#sessions-body tr[data-id="${psId}"] ${sel}`).boundingBox();
    assert(b && b.x >= 0 && b.x + b.width <= 800, `${sel} inside 800 px: ${JSON.stringify(b)}`);
  }
  assert(await p.evaluate(() => document.documentElement.scrollWidth <= 800), 'no sideways scrolling');
  await p.screenshot({ path: path.join(ART, 'page-800.png') });
  await p.context().close();
});

await step('the syscalls event picker is a searchable list that fits its container', async () => {
  const p = await newPage();
  await login(p);
  await p.getByRole('button', { name: 'New session' }).click();
  await p.locator('#prov-search').fill('syscalls');
  await p.locator('#prov-results button[data-name="syscalls"]').click();
  const card = p.locator('.prov-card').first();
  const list = card.locator('.events-list');
  await list.waitFor();
  const n = await list.locator('.ev').count();
  assert(n > 300, 'many events: ' + n);
  const geo = await list.evaluate((el) => ({ sw: el.scrollWidth, cw: el.clientWidth, box: el.getBoundingClientRect().toJSON(), card: el.closest('.prov-card').getBoundingClientRect().toJSON(), first: el.querySelector('.ev').getBoundingClientRect().toJSON() }));
  assert(geo.sw <= geo.cw + 1, `no sideways overflow: ${geo.sw} > ${geo.cw}`);
  assert(geo.box.right <= geo.card.right + 1 && geo.box.left >= geo.card.left - 1 && geo.card.right <= 1280, 'inside the card and the window');
  assert(geo.first.left >= geo.box.left && geo.first.right <= geo.box.right + 1, 'first entry not cut');
  assert(await p.evaluate(() => document.documentElement.scrollWidth <= 1280), 'page does not grow sideways');
  await card.getByLabel('Filter the events of syscalls').fill('openat');
  const shown = await list.locator('.ev:not([hidden])').count();
  assert(shown > 0 && shown < 10, 'search narrows: ' + shown);
  assert(new RegExp(`^${shown} of ${n} events$`).test(await card.locator('.ev-count').textContent()), 'count of matches');
  await p.screenshot({ path: path.join(ART, 'page-picker.png') });
  await p.context().close();
});

await step('a running session\'s history beyond the replay window: "older events not loaded", not "dropped"', async () => {
  const [st, s] = await etwd.req('POST', `/api/v1/sessions`, { name: 'busy', providers: [{ name: 'sched', events: ['sched_switch', 'sched_wakeup'] }] });
  assert(st === 201, 'live session ' + st + JSON.stringify(s));
  try {
    await until(async () => { const [, x] = await etwd.req('GET', `/api/v1/sessions/${s.id}`); return x.stats && x.stats.events > 20000; }, 'events beyond the 256 KiB window', WAIT, 300);
    const p = await newPage();
    await login(p, `${base}/#session=${s.id}`);
    await p.locator('#viewer').waitFor({ state: 'visible' });
    await until(async () => / older events not loaded/.test(await status(p)), 'older events in the status');
    const t = await status(p);
    assert(!/dropped for this page/.test(t), 'not reported as dropped: ' + t);
    const first = await p.evaluate(async () => { const r0 = (await S.viewer.dump('kept'))[0]; return r0.gap ? gapText(r0.gap) : ''; });
    assert(/^[\d,]+ older events not loaded \(hub: .*replay window/.test(first), 'first row: ' + first);
    assert(await p.locator('#older-notice').isVisible(), 'the notice with from=');
    assert(/older events not loaded/.test(await p.locator('#older-text').textContent()), 'notice text');
    // from= reconnects from the asked sequence number
    const from = String((await p.evaluate(() => S.viewer.lastSeq)) - 10);
    await p.locator('#older-from').fill(from);
    await p.getByRole('button', { name: 'Load', exact: true }).click();
    // the new stream starts at that seq, or (a busy session moves its window on) says how many older ones it missed
    await until(async () => p.evaluate(async (f) => {
      const v = S.viewer, rows = v ? await v.dump('kept') : [], r = rows.find((x) => !x.gap);
      return v && v.params.from === f && r && (r.ev.seq === Number(f) || (r.ev.seq > Number(f) && rows[0].gap && isOlder(rows[0].gap) && Number(rows[0].gap.Dropped) === r.ev.seq - Number(f)));
    }, from), 'rows from the asked seq');
    await p.context().close();
  } finally {
    await etwd.req('POST', `/api/v1/sessions/${s.id}/stop`);
  }
});

await step('no script errors', async () => { assert(!pageErrors.length, pageErrors.join('\n')); });

if (process.env.ETWD_UPDATE_SCREENSHOT === '1')
  for (const f of ['page-filter.png', 'page-dark.png', 'page-picker.png']) if (fs.existsSync(path.join(ART, f))) fs.copyFileSync(path.join(ART, f), path.join(ROOT, 'docs', f));

await finish(S, 'analysis', browser, etwd);
