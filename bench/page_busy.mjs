// The web page under a busy live session, measured in Debian's Chromium (a benchmark, not a test:
// it prints numbers and exits 0 unless the setup fails; docs/benchmarks.md has the goals).
//
// Spawns etwd, starts a live linux session on syscalls/sys_enter_getppid for one load process
// that calls getppid() RATE times a second, opens it in the page with 200,000 rows kept and the
// timeline and group-by panels open, and for DUR seconds measures: frames per second
// (requestAnimationFrame), long tasks (PerformanceObserver 'longtask'), how long clicks, a lane
// switch and typing in the text filter take to be answered (Event Timing: input to next paint),
// and the events shown per second. Then it stops the session and checks that every event the
// server produced is either in the page or counted on screen as dropped.
//
//   ETWD_BIN=build/rel/server/etwd node bench/page_busy.mjs [RATE=50000] [DUR=20]
// Needs root (tracefs), /usr/bin/chromium and tests/browser's npm install (playwright-core).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import https from 'node:https';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { chromium } = createRequire(path.join(ROOT, 'tests/browser/package.json'))('playwright-core');
const BIN = process.env.ETWD_BIN || path.join(ROOT, 'build/rel/server/etwd');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const RATE = Number(process.argv[2] || 50000), DUR = Number(process.argv[3] || 20);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function req(method, url, token, body) {
  return new Promise((res, rej) => {
    const r = https.request(url, { method, rejectUnauthorized: false, headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' } }, (x) => {
      const parts = [];
      x.on('data', (d) => parts.push(d));
      x.on('end', () => { const t = Buffer.concat(parts).toString(); let j = null; try { j = JSON.parse(t); } catch { /* text */ } res([x.statusCode, j || t]); });
    });
    r.on('error', rej);
    r.end(body ? JSON.stringify(body) : undefined);
  });
}
const port = await new Promise((res) => { const s = net.createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
const state = fs.mkdtempSync(path.join(os.tmpdir(), 'etwd-busy-'));
const base = `https://127.0.0.1:${port}`;
const srv = spawn(BIN, ['--listen', `127.0.0.1:${port}`, '--state-dir', state], { stdio: ['ignore', 'ignore', 'ignore'] });
// the load: a process that waits for a line on stdin, then calls getppid() RATE times a second
const load = spawn('python3', ['-c', `
import os, sys, time
rate, dur = ${RATE}, ${DUR + 2}
sys.stdin.readline()
t0 = time.perf_counter(); n = 0
while True:
    el = time.perf_counter() - t0
    if el > dur: break
    want = int(el * rate)
    while n < want:
        os.getppid(); n += 1
    time.sleep(0.001)
print(n, flush=True)
`], { stdio: ['pipe', 'pipe', 'inherit'] });
let loadOut = '';
load.stdout.on('data', (d) => { loadOut += d; });
let browser;
try {
  for (let i = 0; ; i++) {
    try { if ((await req('GET', `${base}/api/v1/health`, ''))[0] === 200) break; } catch { /* not yet */ }
    if (i > 300) throw new Error('etwd did not start');
    await sleep(100);
  }
  const admin = fs.readFileSync(path.join(state, 'tokens'), 'utf8').split('\n').find((l) => / admin /.test(l)).split(/\s+/)[2];
  const [st, s] = await req('POST', `${base}/api/v1/sessions`, admin,
    { name: 'busy', backend: 'linux', pids: [load.pid], providers: [{ name: 'syscalls', events: ['sys_enter_getppid'] }] });
  if (st !== 201 && st !== 200) throw new Error('session: ' + JSON.stringify(s));
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, ...(process.env.BUSY_GC_LOG ? { stdio: 'pipe' } : {}), args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', ...(process.env.BUSY_CHROME_ARGS || '').split(' ').filter(Boolean)] });
  const ctx = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  page.on('pageerror', (e) => console.log('page error:', String(e)));
  await page.goto(base + '/');
  await page.locator('#token').fill(admin);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#who').waitFor({ state: 'visible' });
  await page.evaluate((id) => { document.getElementById('cap').value = '200000'; openViewer(id); }, s.id);
  const panels = process.env.BUSY_PANELS !== '0'; // BUSY_PANELS=0: the table alone
  if (panels) {
    await page.getByRole('button', { name: 'Timeline' }).click();
    await page.getByRole('button', { name: 'Group by' }).click();
  }
  await page.evaluate(() => {
    const m = (window.__m = { frames: 0, long: [], events: [], stop: false });
    new PerformanceObserver((l) => { for (const e of l.getEntries()) m.long.push(Math.round(e.duration)); }).observe({ type: 'longtask' });
    new PerformanceObserver((l) => { for (const e of l.getEntries()) m.events.push([e.name, Math.round(e.duration), e.target && e.target.id]); })
      .observe({ type: 'event', durationThreshold: 16 });
    m.slow = {};
    const wrap = (o, k, name) => { const f = o[k]; if (!f) return; o[k] = function (...a) { const t = performance.now(); try { return f.apply(this, a); } finally { m.slow[name] = Math.max(m.slow[name] || 0, Math.round(performance.now() - t)); } }; };
    wrap(S.viewer, 'flush', 'flush');       // before the worker (562a4a4…da88675): the page's own data path
    wrap(S.viewer, 'onFrame', 'onFrame');
    wrap(S.viewer, 'runJob', 'refilter slice');
    wrap(S.viewer, 'setPredicate', 'setPredicate');
    wrap(S.viewer, 'onWin', 'onWin');       // with web/worker.js: the page draws a window the worker sent
    wrap(window, 'poll', 'poll');
    const tick = () => { m.frames++; if (!m.stop) requestAnimationFrame(tick); };
    requestAnimationFrame(tick);
  });
  // BUSY_PROFILE=1: a CPU profile of the page's main thread during the run; the top functions by
  // self time are printed at the end (the garbage collector shows as "(garbage collector)")
  const cdp = process.env.BUSY_PROFILE ? await ctx.newCDPSession(page) : null;
  if (cdp) { await cdp.send('Profiler.enable'); await cdp.send('Profiler.setSamplingInterval', { interval: 500 }); await cdp.send('Profiler.start'); }
  // BUSY_TRACE=1: a Chromium trace of the run; each main-thread task over 100 ms is printed with
  // its wall time, its thread's CPU time (much less: the thread waited for a core) and its parts
  if (process.env.BUSY_TRACE) await browser.startTracing(page, { categories: ['devtools.timeline', 'v8', 'disabled-by-default-devtools.timeline'] });
  const r0 = await page.evaluate(() => ({ t: performance.now(), received: S.viewer.received, f: __m.frames }));
  load.stdin.write('go\n');
  // interactions every ~2 s while events flow: real mouse and keyboard input
  const acts = [
    ['pause', () => page.locator('#pause').click()],
    ['resume', () => page.locator('#pause').click()],
    ['filter "getppid"', async () => { await page.locator('#text-filter').click(); await page.keyboard.type('getppid'); }],
    ['clear filter', async () => { await page.locator('#text-filter').fill(''); }],
    ...(panels ? [
      ['lanes by CPU', () => page.locator('#tl-lanes').selectOption('cpu')],
      ['group by process', () => page.locator('#grp-by').selectOption('process')],
      ['click a group', () => page.locator('#grp-body button[data-key]').first().click()],
      ['clear group', () => page.locator('#grp-clear').click()]] : []),
    ['filter "9"', async () => { await page.locator('#text-filter').click(); await page.keyboard.type('9'); }],
    ['clear filter', async () => { await page.locator('#text-filter').fill(''); }],
  ];
  const t0 = Date.now();
  for (let i = 0; Date.now() - t0 < DUR * 1000; i++) {
    await sleep(2000);
    const [name, fn] = acts[i % acts.length];
    const a = Date.now();
    await fn();
    console.log(`  ${name}: ${Date.now() - a} ms in playwright`);
  }
  const r1 = await page.evaluate(() => ({ t: performance.now(), received: S.viewer.received, f: __m.frames, long: __m.long, events: __m.events, rows: S.viewer.rows ? S.viewer.rows.length : S.viewer.st.kept, slow: __m.slow, tl: typeof Timeline === 'undefined' ? 0 : Timeline.state().slowest, grp: typeof Group === 'undefined' ? 0 : Group.slowest(), status: document.getElementById('ev-status').textContent }));
  await page.evaluate(() => { __m.stop = true; });
  let traced = {};
  if (process.env.BUSY_TRACE) {
    const tr = JSON.parse((await browser.stopTracing()).toString('utf8'));
    const evs = tr.traceEvents || tr;
    const main = new Set(evs.filter((e) => e.name === 'thread_name' && e.args && e.args.name === 'CrRendererMain').map((e) => `${e.pid}/${e.tid}`));
    const onMain = evs.filter((e) => main.has(`${e.pid}/${e.tid}`) && e.ph === 'X' && e.dur);
    const tasks = onMain.filter((e) => e.name === 'RunTask' && e.dur > 100000);
    let cpu = 0, wall = 0, maxCpu = 0;
    for (const t of tasks) {
      maxCpu = Math.max(maxCpu, t.tdur || 0);
      const kids = new Map();
      for (const e of onMain) {
        if (e === t || e.ts < t.ts || e.ts + e.dur > t.ts + t.dur || e.name === 'RunTask') continue;
        const k = kids.get(e.name) || [0, 0];
        kids.set(e.name, [k[0] + e.dur, k[1] + (e.tdur || 0)]);
      }
      cpu += t.tdur || 0; wall += t.dur;
      console.log(`  task ${Math.round(t.dur / 1000)} ms wall, ${Math.round((t.tdur || 0) / 1000)} ms cpu; its parts, ms wall/cpu: ` +
        [...kids].sort((a, b) => b[1][0] - a[1][0]).slice(0, 5).map(([k, [w, c]]) => `${k} ${Math.round(w / 1000)}/${Math.round(c / 1000)}`).join(', '));
    }
    console.log(`  tasks over 100 ms: ${tasks.length}, ${Math.round(wall / 1000)} ms wall, ${Math.round(cpu / 1000)} ms on a core`);
    const all = onMain.filter((e) => e.name === 'RunTask');
    traced = { traced_tasks_over_100ms_cpu_ms: Math.round(cpu / 1000), traced_max_cpu_of_a_task_over_100ms: Math.round(maxCpu / 1000),
      traced_max_task_cpu_ms: Math.round(Math.max(0, ...all.map((e) => e.tdur || 0)) / 1000), traced_main_cpu_ms: Math.round(all.reduce((a, e) => a + (e.tdur || 0), 0) / 1000) };
  }
  if (cdp) {
    const { profile } = await cdp.send('Profiler.stop');
    const self = new Map(), dt = profile.timeDeltas, byId = new Map(profile.nodes.map((n) => [n.id, n]));
    profile.samples.forEach((id, i) => { const n = byId.get(id), k = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*\//, '')}:${n.callFrame.lineNumber + 1}`; self.set(k, (self.get(k) || 0) + (dt[i] || 0)); });
    const all = [...self.values()].reduce((a, b) => a + b, 0);
    console.log('main thread, self time (ms), of ' + Math.round(all / 1000) + ' ms sampled:');
    for (const [k, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  ${Math.round(us / 1000)}\t${k}`);
    // stretches of > 100 ms without an idle sample, and what they spent their time on
    let run = null;
    const flush = () => {
      if (run && run.t > 100000) console.log(`  busy ${Math.round(run.t / 1000)} ms: ` + [...run.m].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([k, us]) => `${k} ${Math.round(us / 1000)}`).join(', '));
      run = null;
    };
    profile.samples.forEach((id, i) => {
      const n = byId.get(id), k = n.callFrame.functionName || '(anonymous)';
      if (k === '(idle)') { flush(); return; }
      if (!run) run = { t: 0, m: new Map() };
      run.t += dt[i] || 0;
      run.m.set(k, (run.m.get(k) || 0) + (dt[i] || 0));
    });
    flush();
  }
  const secs = (r1.t - r0.t) / 1000;
  // stop the session, let the page drain, then compare with the server's count
  await new Promise((res) => { if (loadOut) res(); else load.stdout.once('data', res); });
  await sleep(1500);
  await req('POST', `${base}/api/v1/sessions/${s.id}/stop`, admin);
  let fin;
  for (let i = 0; i < 200; i++) {
    await sleep(200);
    fin = await page.evaluate(() => ({ received: S.viewer.received, gaps: S.viewer.gaps, dropped: S.viewer.gapDropped, discarded: S.viewer.discarded, conn: document.getElementById('viewer-conn').textContent, status: document.getElementById('ev-status').textContent, cap: document.getElementById('cap-notice').textContent }));
    if (/ended|closed/.test(fin.conn)) break;
  }
  const [, sess] = await req('GET', `${base}/api/v1/sessions/${s.id}`, admin);
  const events = r1.events.filter((e) => ['click', 'pointerdown', 'pointerup', 'keydown', 'keyup', 'input', 'change', 'keypress'].includes(e[0]));
  const out = {
    offered_per_s: Math.round(Number(loadOut.trim()) / (DUR + 2)),
    server_events: sess.stats.events, server_loss: sess.stats.loss,
    page_events_per_s: Math.round((r1.received - r0.received) / secs),
    fps: Math.round(((r1.f - r0.f) / secs) * 10) / 10,
    longtasks: r1.long.length, longest_task_ms: Math.max(0, ...r1.long), longtasks_over_100ms: r1.long.filter((d) => d > 100).length,
    slowest_input_ms: Math.max(0, ...events.map((e) => e[1])), inputs_over_100ms: events.filter((e) => e[1] >= 100),
    rows_kept: r1.rows,
    page_received: fin.received - fin.gaps, page_gap_dropped: fin.dropped,
    slowest_ms: { ...r1.slow, timeline_draw: Math.round(r1.tl || 0), group_draw: Math.round(r1.grp || 0) },
    all_counted: fin.received - fin.gaps + fin.dropped === sess.stats.events,
    status: fin.status, cap_notice: fin.cap, ...traced,
  };
  console.log(JSON.stringify(out, null, 1));
} finally {
  try { load.kill(); } catch { /* done */ }
  if (browser) await browser.close();
  srv.kill('SIGTERM');
  await new Promise((r) => srv.on('exit', r));
  fs.rmSync(state, { recursive: true, force: true });
}
