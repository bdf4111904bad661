// Browser tests of the viewer's timeline (web/timeline.js) and group-by (web/group.js) panels in
// Debian's Chromium (playwright-core): spawns the built etwd, uploads and fast-replays a corpus
// ETL, and checks against `etwd convert` of the same file: group-by counts (provider, event, a
// field path), a click on a group filters the table to its count, counts update as rows arrive;
// the timeline's lanes by provider and CPU hold the right counts, a mouse-brushed range filters
// the table to exactly the events in it, zoom narrows the window. Screenshots go to artifacts/
// (copied to docs/page-timeline.png and docs/page-group.png with ETWD_UPDATE_SCREENSHOT=1).
//
// Env: ETWD_BIN (etwd binary), ETWD_CORPUS (../shared/corpus), CHROMIUM (/usr/bin/chromium).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, ART, BIN, CORPUS, sleep, log, assert, until, suite, startEtwd, launchBrowser, newPage, login, finish } from './harness.mjs';

// two files replayed as one session (merged in time order, as `etwd convert A B` does): 3 providers
const ETLS = [path.join(CORPUS, 'airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl'),
  path.join(CORPUS, 'microsoft+krabsetw/examples/NativeExamples/powershell.etl')];
const S = suite('views');
const step = S.step;

/* the expected events: `etwd convert` of the same file */
const events = execFileSync(BIN, ['convert', ...ETLS, '--quiet'], { maxBuffer: 1 << 28 }).toString('utf8')
  .split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const countBy = (f) => { const m = {}; for (const e of events) { const k = f(e); m[k] = (m[k] || 0) + 1; } return m; };
// TimeCreated → ms since 1970, with the sub-millisecond digits (the test's own parse)
const msOf = (s) => Date.parse(s.slice(0, 23) + 'Z') + Number('0.' + s.slice(23, -1).padEnd(1, '0'));

/* ---------- server and browser ---------- */
const etwd = await startEtwd('views');
const browser = await launchBrowser();
const pageErrors = [];
const page = await newPage(browser, pageErrors);
S.page = page;
const statusCounts = async () => {
  const t = await page.locator('#ev-status').textContent();
  const m = /([\d,]+) (?:of ([\d,]+) )?rows( match)?/.exec(t || '');
  const n = (s) => Number(s.replace(/,/g, ''));
  return m ? { shown: n(m[1]), kept: n(m[2] || m[1]), filtering: /filtering/.test(t) } : null;
};

await step('replay two corpus ETLs; every event of `etwd convert` arrives', async () => {
  for (const f of ETLS) {
    const [st] = await etwd.req('POST', `/api/v1/files?name=${path.basename(f)}`, fs.readFileSync(f), 'application/octet-stream');
    assert(st === 201 || st === 200, 'upload ' + st);
  }
  await login(page, etwd.tokens.admin, etwd.base + '/');
  await page.evaluate(async (files) => {
    const s = await api('POST', '/api/v1/sessions', { files, replay: 'fast', name: 'views' });
    updateSessions([...S.sessions.values(), s]);
    openViewer(s.id);
  }, ETLS.map((f) => path.basename(f)));
  await page.locator('#viewer').waitFor({ state: 'visible' });
  await until(async () => {
    const r = await page.evaluate(async () => ({ kept: (await S.viewer.dump('kept')).filter((x) => !x.gap).length, conn: document.getElementById('viewer-conn').textContent }));
    return r.kept === events.length && /ended/.test(r.conn);
  }, `${events.length} events`);
});

await step('group by provider, event and a field path equals `etwd convert` counts', async () => {
  await page.getByRole('button', { name: 'Group by' }).click();
  await page.locator('#grp-panel').waitFor({ state: 'visible' });
  const want = countBy((e) => e.System.Provider.Name || '(none)');
  // the table in the page (count column) as well as the view's own counts
  await until(async () => (await page.locator('#grp-body tr').count()) === Object.keys(want).length, 'one row per provider');
  const table = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#grp-body tr')].map((tr) => [tr.dataset.key, Number(tr.children[1].textContent.replace(/,/g, ''))])));
  assert(JSON.stringify(Object.entries(table).sort()) === JSON.stringify(Object.entries(want).sort()), `provider counts ${JSON.stringify(table)} != ${JSON.stringify(want)}`);
  // sorted by count, descending; a click on the Count header sorts ascending
  const counts = Object.values(await page.evaluate(() => [...document.querySelectorAll('#grp-body tr')].map((tr) => Number(tr.children[1].textContent.replace(/,/g, '')))));
  assert(counts.every((c, i) => !i || counts[i - 1] >= c), 'sorted descending: ' + counts);
  await page.locator('#grp-table button.sort[data-sort="count"]').click();
  const asc = await page.evaluate(() => [...document.querySelectorAll('#grp-body tr')].map((tr) => Number(tr.children[1].textContent.replace(/,/g, ''))));
  assert(asc.every((c, i) => !i || asc[i - 1] <= c), 'sorted ascending: ' + asc);
  await page.locator('#grp-table button.sort[data-sort="count"]').click();
  await page.locator('#grp-by').selectOption('event');
  const wantEv = countBy((e) => `${e.System.Provider.Name || ''}/${e.System.EventName != null && e.System.EventName !== '' ? e.System.EventName : '#' + e.System.EventID}`);
  const gotEv = await page.evaluate(() => Group.counts());
  assert(JSON.stringify(Object.entries(gotEv).sort()) === JSON.stringify(Object.entries(wantEv).sort()), 'event counts differ');
  await until(async () => (await page.locator('#grp-body tr').count()) === Math.min(500, Object.keys(wantEv).length), 'one row per event');
  await page.locator('#grp-by').selectOption('field');
  await page.locator('#grp-path').fill('System.Execution.ThreadID');
  const wantTid = countBy((e) => String((e.System.Execution || {}).ThreadID ?? '(none)')); // missing: "(none)"
  await until(async () => JSON.stringify(Object.entries(await page.evaluate(() => Group.counts())).sort()) === JSON.stringify(Object.entries(wantTid).sort()), 'thread id counts');
  log(`   ${Object.keys(want).length} providers, ${Object.keys(wantEv).length} events, ${Object.keys(wantTid).length} threads`);
});

await step('a click on a group filters the table to its count; a second click clears', async () => {
  await page.locator('#grp-by').selectOption('event');
  const want = countBy((e) => `${e.System.Provider.Name || ''}/${e.System.EventName != null && e.System.EventName !== '' ? e.System.EventName : '#' + e.System.EventID}`);
  const [name, n] = Object.entries(want).sort((a, b) => a[1] - b[1])[Math.floor(Object.keys(want).length / 2)];
  log(`   group ${name}: ${n} events`);
  const btn = page.locator(`#grp-body button[data-key="${name}"]`);
  await btn.click();
  await until(async () => { const s = await statusCounts(); return s && !s.filtering && s.shown === n && s.kept === events.length; }, `the table to show ${n} ${name} rows`);
  assert((await page.locator(`#grp-body button[data-key="${name}"]`).getAttribute('aria-pressed')) === 'true', 'chosen group marked');
  // the other groups stay listed (counts exclude the group filter itself)
  assert((await page.locator('#grp-body tr').count()) === Object.keys(want).length, 'other groups still listed');
  const rows = await page.evaluate(async () => (await S.viewer.dump('filtered')).map((r) => `${r.ev.System.Provider.Name}/${r.ev.System.EventName || '#' + r.ev.System.EventID}`));
  assert(rows.length === n && rows.every((p) => p === name), 'only that event in the table');
  await page.screenshot({ path: path.join(ART, 'page-group.png') });
  await page.locator(`#grp-body button[data-key="${name}"]`).click();
  await until(async () => { const s = await statusCounts(); return s && s.shown === events.length && s.kept === events.length; }, 'all rows again');
  await page.locator('#grp-by').selectOption('provider');
});

await step('group counts update live as rows arrive', async () => {
  await page.evaluate(() => {
    const ev = (i) => ({ seq: 9e6 + i, System: { Provider: { Name: 'livetest' }, EventName: 'tick', EventID: 1, TimeCreated: '2020-02-28T09:03:48.0000000Z', Execution: { ProcessID: 1, ThreadID: 1, ProcessorID: 0 } } });
    S.viewer.onFrame(JSON.stringify([ev(1), ev(2), ev(3)]));
  });
  await until(async () => (await page.locator('#grp-body tr[data-key="livetest"] td.num').textContent().catch(() => '')) === '3', 'a livetest group of 3', 5000);
  await page.evaluate(() => S.viewer.onFrame(JSON.stringify([{ seq: 9e6 + 4, System: { Provider: { Name: 'livetest' }, EventName: 'tick', EventID: 1, TimeCreated: '2020-02-28T09:03:48.0000000Z', Execution: { ProcessID: 1, ThreadID: 1, ProcessorID: 0 } } }])));
  await until(async () => (await page.locator('#grp-body tr[data-key="livetest"] td.num').textContent()) === '4', 'the group to count 4', 5000);
  // the 4 rows stay: the timeline steps count them too (all() below)
  await page.getByRole('button', { name: 'Group by' }).click();
  assert(await page.locator('#grp-panel').isHidden(), 'panel closed');
});

// the timeline bins rows in time slices: wait until it has painted what was asked
const settled = () => until(() => page.evaluate(() => !Timeline.state().busy), 'the timeline to be drawn', 10000, 50);
const extra = { System: { Provider: { Name: 'livetest' }, EventName: 'tick', EventID: 1, Execution: { ProcessID: 1, ThreadID: 1, ProcessorID: 0 }, TimeCreated: '2020-02-28T09:03:48.0000000Z' } };
const all = () => events.concat(Array(4).fill(extra));

await step('timeline lanes by provider, then by CPU, hold the right counts', async () => {
  await page.getByRole('button', { name: 'Timeline' }).click();
  await page.locator('#tl-panel').waitFor({ state: 'visible' });
  await page.locator('#tl-lanes').selectOption('provider');
  const lanesOf = async () => page.evaluate(() => Timeline.state());
  const check = (st, f, name) => {
    const m = {};
    for (const e of all()) { const k = f(e); m[k] = (m[k] || 0) + 1; }
    const keys = Object.keys(m);
    assert(st.shown === all().length, `${name}: all events shown: ${st.shown} != ${all().length}`);
    if (keys.length <= 12) {
      const got = Object.fromEntries(st.lanes.map((l) => [l.key, l.count]));
      assert(JSON.stringify(Object.entries(got).sort()) === JSON.stringify(Object.entries(m).sort()), `${name} lanes ${JSON.stringify(got)} != ${JSON.stringify(m)}`);
    } else {
      assert(st.lanes.length === 12 && st.lanes[11].key === '(other)', `${name}: 12 lanes, the last "other"`);
      assert(st.lanes.reduce((s, l) => s + l.count, 0) === all().length, `${name}: lanes add up`);
    }
  };
  let st = await until(async () => { const s = await lanesOf(); return s.shown === all().length ? s : null; }, 'the timeline drawn');
  assert(st.by === 'provider', 'lanes by provider');
  check(st, (e) => e.System.Provider.Name || '(none)', 'provider');
  await page.locator('#tl-lanes').selectOption('cpu');
  await settled();
  st = await lanesOf();
  assert(st.by === 'cpu', 'lanes by cpu');
  check(st, (e) => String(e.System.Execution.ProcessorID), 'cpu');
  assert(/lanes by cpu/.test(await page.locator('#timeline').getAttribute('aria-label')), 'canvas label says cpu');
  await page.locator('#tl-lanes').selectOption('process');
  await settled();
  st = await lanesOf();
  assert(st.by === 'process' && st.lanes.length >= 2, 'lanes by process');
});

await step('a brushed time range filters the table to exactly the events in it; Esc clears', async () => {
  const times = all().map((e) => msOf(e.System.TimeCreated)).sort((a, b) => a - b);
  // a window from the 5th to the 95th percentile (a few events of the file are hours later)
  await page.evaluate(([a, b]) => Timeline.setWindow([a, b]), [times[Math.floor(times.length * 0.05)], times[Math.floor(times.length * 0.95)]]);
  await settled();
  // drag between the x positions of the 20th and 70th percentile events, with the mouse
  const [x0, x1, box] = await page.evaluate(([a, b]) => [Timeline.xAt(a), Timeline.xAt(b), document.getElementById('timeline').getBoundingClientRect().toJSON()],
    [times[Math.floor(times.length * 0.2)], times[Math.floor(times.length * 0.7)]]);
  const y = box.y + 8;
  let from = box.x + x0, to = box.x + x1;
  if (to - from < 20) { from -= 10; to += 10; } // a dense burst: a range around it
  await page.mouse.move(from, y);
  await page.mouse.down();
  await page.mouse.move((from + to) / 2, y, { steps: 3 });
  await page.mouse.move(to, y, { steps: 3 });
  await page.mouse.up();
  const st = await page.evaluate(() => Timeline.state());
  assert(st.range && st.range[1] > st.range[0], 'a range: ' + JSON.stringify(st.range));
  const want = times.filter((t) => t >= st.range[0] && t <= st.range[1]).length;
  assert(want > 0 && want < times.length, `the range holds some events, not all: ${want}`);
  await until(async () => { const s = await statusCounts(); return s && !s.filtering && s.shown === want; }, `the table to show ${want} rows`);
  const got = await page.evaluate(async () => (await S.viewer.dump('filtered')).length);
  assert(got === want, `filtered ${got} != ${want}`);
  assert(/range \d\d:\d\d/.test(await page.locator('#tl-info').textContent()), 'range shown');
  log(`   brushed ${want} of ${times.length} events`);
  await page.screenshot({ path: path.join(ART, 'page-timeline.png') });
  await page.locator('#timeline').focus();
  await page.keyboard.press('Escape');
  await until(async () => { const s = await statusCounts(); return s && s.shown === s.kept && s.kept === times.length; }, 'all rows again');
});

await step('zoom in narrows the window, Fit restores it; the wheel zooms', async () => {
  await page.getByRole('button', { name: 'Fit all kept events' }).click();
  await settled();
  const w0 = await page.evaluate(() => Timeline.state().win);
  await page.getByRole('button', { name: 'Zoom in' }).click();
  await page.getByRole('button', { name: 'Zoom in' }).click();
  await settled();
  const w1 = await page.evaluate(() => Timeline.state().win);
  assert(Math.abs((w1[1] - w1[0]) * 4 - (w0[1] - w0[0])) < 1e-6 * (w0[1] - w0[0]), `zoomed 4x: ${w0} → ${w1}`);
  await page.getByRole('button', { name: 'Fit all kept events' }).click();
  await settled();
  const w2 = await page.evaluate(() => Timeline.state().win);
  assert(w2[0] === w0[0] && w2[1] === w0[1], 'fit restores');
  const box = await page.locator('#timeline').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + 10);
  await page.mouse.wheel(0, -100);
  await settled();
  const w3 = await page.evaluate(() => Timeline.state().win);
  assert(w3[1] - w3[0] < w0[1] - w0[0], 'wheel zooms in');
  await page.getByRole('button', { name: 'Fit all kept events' }).click();
});

// the merge of w-pagea (views, named predicates, sliced re-filter) with w-pageb (field filter,
// column sort, global keys): all of them on the one viewer at once
await step('the field filter, a group, a time range, the text box and a column sort work together', async () => {
  const pidOf = (e) => (e.System.Execution || {}).ProcessID;
  const byPid = countBy(pidOf);
  const pid = Object.entries(byPid).filter(([k]) => /^\d+$/.test(k)).sort((a, b) => b[1] - a[1])[0][0]; // the busiest process
  const mine = all().filter((e) => String(pidOf(e)) === pid);
  assert(mine.length > 10 && mine.length < events.length, `pid ${pid}: ${mine.length} events`);
  if (await page.locator('#grp-panel').isHidden()) await page.getByRole('button', { name: 'Group by' }).click();
  await page.locator('#grp-by').selectOption('provider');
  // the field filter (UI box) narrows the table and the group counts
  await page.locator('#field-filter').fill(`pid == ${pid}`);
  await until(async () => { const s = await statusCounts(); return s && !s.filtering && s.shown === mine.length; }, `the table to show the ${mine.length} rows of pid ${pid}`);
  const wantProv = {};
  for (const e of mine) { const k = e.System.Provider.Name || '(none)'; wantProv[k] = (wantProv[k] || 0) + 1; }
  const same = (a, b) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());
  await until(async () => same(await page.evaluate(() => Group.counts()), wantProv), 'group counts of the field-filtered rows');
  // a group on top: the rows of pid and provider
  const [prov, nProv] = Object.entries(wantProv).sort((a, b) => b[1] - a[1])[0];
  await page.locator(`#grp-body button[data-key="${prov}"]`).click();
  await until(async () => { const s = await statusCounts(); return s && !s.filtering && s.shown === nProv; }, `${nProv} rows of ${prov}`);
  // a time range on top (the view's own API: the brush itself is tested above)
  const ts = mine.filter((e) => e.System.Provider.Name === prov).map((e) => msOf(e.System.TimeCreated)).sort((a, b) => a - b);
  const rg = [ts[Math.floor(ts.length / 4)], ts[Math.floor((ts.length * 3) / 4)]];
  const nRange = ts.filter((t) => t >= rg[0] && t <= rg[1]).length;
  await page.evaluate((r) => Timeline.setRange(r), rg);
  await until(async () => { const s = await statusCounts(); return s && !s.filtering && s.shown === nRange; }, `${nRange} rows in the range`);
  // sort by Seq descending (two clicks on the header): the same rows, in descending seq order
  const before = await page.evaluate(async () => (await S.viewer.dump('filtered')).map((r) => r.ev.seq).sort((a, b) => a - b));
  await page.locator('#grid-head button[aria-label="Sort by Seq"]').click();
  await page.locator('#grid-head button[aria-label="Sort by Seq"]').click();
  let seqs = await page.evaluate(async () => (await S.viewer.dump('filtered')).map((r) => r.ev.seq));
  assert(seqs.length === nRange && seqs.every((q, i) => !i || seqs[i - 1] > q), 'sorted descending: ' + seqs.slice(0, 10));
  assert(JSON.stringify(seqs.slice().sort((a, b) => a - b)) === JSON.stringify(before), 'the sort keeps the same rows');
  assert(/#.*sort=-seq/.test(await page.evaluate(() => location.hash)), 'the sort is in the URL');
  // the text box re-filters and the result stays sorted
  await page.locator('#text-filter').fill(prov.toLowerCase());
  await until(() => page.evaluate((w) => S.viewer.filter === w, prov.toLowerCase()), 'the text filter applied');
  await until(async () => { const s = await statusCounts(); return s && !s.filtering && s.shown === nRange; }, 'the provider name as free text');
  seqs = await page.evaluate(async () => (await S.viewer.dump('filtered')).map((r) => r.ev.seq));
  assert(seqs.length === nRange && seqs.every((q, i) => !i || seqs[i - 1] > q), 'still sorted after a re-filter');
  // group counts cover the other filters (field, time, text), not the group's own
  const got = await until(async () => { const c = await page.evaluate(() => Group.counts()); return c[prov] === nRange ? c : null; }, 'group counts with every filter');
  assert(got[prov] === nRange, 'the chosen group counts the rows in range: ' + JSON.stringify(got));
  // keys: on the timeline canvas the arrows pan it and never move the table's selection; space
  // does not pause; elsewhere the arrows move the selection
  await page.evaluate(() => S.viewer.selectAt(0));
  await settled();
  const w0 = await page.evaluate(() => Timeline.state().win);
  await page.locator('#timeline').focus();
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press(' ');
  await settled();
  const k = await page.evaluate(() => ({ sel: S.viewer.selIdx === 0, paused: S.viewer.paused, win: Timeline.state().win }));
  assert(k.sel, 'ArrowDown on the timeline left the selection alone');
  assert(!k.paused, 'space on the timeline did not pause');
  assert(k.win[0] > w0[0] && k.win[1] > w0[1], `ArrowRight panned the timeline: ${w0} → ${k.win}`);
  await page.locator('#ev-status').click();
  await page.keyboard.press('ArrowDown');
  await until(() => page.evaluate(() => S.viewer.selIdx === 1), 'ArrowDown outside the timeline moved the selection', 5000);
  // undo: sort off (a third click), text, range, group, field filter: every kept row again
  await page.locator('#grid-head button[aria-label="Sort by Seq"]').click();
  await page.locator('#text-filter').fill('');
  await page.evaluate(() => Timeline.setRange(null));
  await until(() => page.evaluate(() => S.viewer.filter === ''), 'the text filter cleared');
  // (each undo waits for its effect: under load a group list redrawn by the counts of the step
  // before could take the click on its old button)
  const grpBtn = page.locator(`#grp-body button[data-key="${prov}"]`);
  await until(async () => {
    if ((await grpBtn.getAttribute('aria-pressed')) === 'false') return true;
    await grpBtn.click();
    await sleep(200);
    return (await grpBtn.getAttribute('aria-pressed')) === 'false';
  }, 'the group unselected');
  await page.locator('#field-filter').fill('');
  await until(() => page.evaluate(() => S.viewer.where === ''), 'the field filter cleared');
  const view = () => page.evaluate(() => ({ where: S.viewer.where, text: S.viewer.filter, status: $('ev-status').textContent,
    group: (document.querySelector('#grp-body button[aria-pressed="true"]') || {}).textContent || null, hash: location.hash }));
  await until(async () => { const s = await statusCounts(); return s && !s.filtering && s.shown === s.kept && s.kept === all().length; }, 'all rows again')
    .catch(async (e) => { throw new Error(`${e.message}; the view: ${JSON.stringify(await view())}`); });
  const ns = await page.evaluate(async () => (await S.viewer.dump('filtered')).map((r) => r.n));
  assert(ns.every((n, i) => !i || ns[i - 1] < n), 'arrival order again');
  await page.getByRole('button', { name: 'Group by' }).click();
});

await step('a filter over 60k rows is applied in the worker while rows arrive, and ends exact', async () => {
  const r = await page.evaluate(async () => {
    const v = S.viewer;
    v.setCap(200000);
    const frame = (f) => JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ seq: 1e7 + f * 1000 + i,
      System: { Provider: { Name: 'slices' }, EventName: 'e', TimeCreated: '2020-02-28T09:03:49.0000000Z', Execution: { ProcessID: i % 7 } },
      EventData: { s: (f * 1000 + i) % 3 ? 'hay' : 'needle' } })));
    for (let f = 0; f < 60; f++) v.onFrame(frame(f));
    await v.settled();
    v.setFilter('needle');
    for (let f = 60; f < 70; f++) { v.onFrame(frame(f)); await new Promise((ok) => setTimeout(ok, 5)); }
    await v.settled();
    const kept = await v.dump('kept');
    const want = kept.filter((x) => !x.gap && JSON.stringify(x.ev).toLowerCase().includes('needle')).map((x) => x.n);
    const got = (await v.dump('filtered')).map((x) => x.n);
    const res = { kept: kept.length, want: want.length, same: JSON.stringify(want) === JSON.stringify(got),
      status: document.getElementById('ev-status').textContent };
    v.setFilter('');
    return res;
  });
  log('   ' + JSON.stringify(r));
  assert(r.want >= 23000 && r.same, 'filtered rows are exactly the matching kept rows: ' + JSON.stringify(r));
  assert(new RegExp(`^${r.want.toLocaleString('en-US')} of ${r.kept.toLocaleString('en-US')} rows match`).test(r.status), 'status: ' + r.status);
});

await step('the panels: every control has an accessible name; no page overflow at 390 px', async () => {
  if (await page.locator('#grp-panel').isHidden()) await page.getByRole('button', { name: 'Group by' }).click();
  const bad = await page.evaluate(() => [...document.querySelectorAll('#views button, #views-panels input, #views-panels select, #views-panels button, #views-panels canvas')]
    .filter((el) => el.getClientRects().length)
    .filter((el) => !((el.labels && [...el.labels].map((l) => l.textContent).join('').trim()) || el.getAttribute('aria-label') || (el.tagName === 'BUTTON' && el.textContent.trim())))
    .map((el) => el.outerHTML.slice(0, 80)));
  assert(!bad.length, 'unnamed: ' + bad.join(' | '));
  await page.setViewportSize({ width: 390, height: 844 });
  await sleep(300);
  const o = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(o <= 1, 'horizontal overflow at 390 px: ' + o);
  await page.setViewportSize({ width: 1280, height: 900 });
});

await step('no script errors and no CSP violations', async () => {
  assert(!pageErrors.length, pageErrors.join('\n'));
});

if (process.env.ETWD_UPDATE_SCREENSHOT === '1')
  for (const f of ['page-timeline.png', 'page-group.png']) if (fs.existsSync(path.join(ART, f))) fs.copyFileSync(path.join(ART, f), path.join(ROOT, 'docs', f));

await finish(S, 'browser views', browser, etwd);
