// Browser test of the Chrome trace export of a live Linux session (issue 22 item 4: "complete
// events where a start/stop pair is known") in Debian's Chromium: a child process sleeps three
// times 0.2 s (clock_nanosleep); a session of its syscalls sys_enter/sys_exit_clock_nanosleep and
// its raw_syscalls sys_enter/sys_exit (same syscall id) is opened in the page, and the exported
// Chrome JSON holds, besides one instant per event, a complete event ("ph":"X") per enter/exit
// pair of the thread: three of each provider, each lasting ≥ 0.2 s (< 2 s), with the child's
// pid/tid. Also (node, no browser): pairs are per thread and per syscall, an exit without its
// enter gives none, ETW events keep the Opcode 1/2 rule. Needs root (tracefs).
//
// Env: ETWD_BIN, CHROMIUM.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createRequire } from 'node:module';
import { ROOT, assert, until, suite, startEtwd, launchBrowser, newPage, login, download, finish } from './harness.mjs';

const X = createRequire(import.meta.url)(path.join(ROOT, 'web/export.js'));
const S = suite('chrome-sys');
const NR = 230; // x86-64 clock_nanosleep

await S.step('node: syscall pairs per thread and syscall; ETW keeps Opcode 1/2', async () => {
  const ev = (seq, prov, name, us, tid, extra = {}) => ({ seq, System: Object.assign({ Provider: { Name: prov }, EventName: name, Opcode: 0,
    TimeCreated: `2026-01-01T00:00:00.${String(us).padStart(6, '0')}Z`, Execution: { ProcessID: 5, ThreadID: tid } }, extra.sys || {}), EventData: extra.data || {} });
  const xs = X.chrome([
    ev(1, 'syscalls', 'sys_exit_read', 1, 7), // no enter before it: no pair
    ev(2, 'syscalls', 'sys_enter_read', 10, 7), ev(3, 'syscalls', 'sys_enter_read', 20, 8),
    ev(4, 'syscalls', 'sys_exit_write', 30, 7), ev(5, 'syscalls', 'sys_exit_read', 40, 8), ev(6, 'syscalls', 'sys_exit_read', 50, 7),
    ev(7, 'raw_syscalls', 'sys_enter', 60, 7, { data: { id: 0 } }), ev(8, 'raw_syscalls', 'sys_exit', 70, 7, { data: { id: 1 } }),
    ev(9, 'raw_syscalls', 'sys_exit', 90, 7, { data: { id: 0 } }),
    ev(10, 'Etw', 'A/Start', 100, 7, { sys: { Provider: { Name: 'Etw', Guid: '{1}' }, Opcode: 1, Task: 3 } }),
    ev(11, 'Etw', 'A/Stop', 150, 7, { sys: { Provider: { Name: 'Etw', Guid: '{1}' }, Opcode: 2, Task: 3 } }),
    ev(12, 'syscalls', 'sys_enter_read', 160, 9, { sys: { Provider: { Name: 'syscalls', Guid: '{2}' } } }), // an ETW provider of that name: no
    ev(13, 'syscalls', 'sys_exit_read', 170, 9, { sys: { Provider: { Name: 'syscalls', Guid: '{2}' } } }),
  ]).traceEvents.filter((e) => e.ph === 'X').map((e) => [e.name, e.tid, e.dur, e.args.start_seq, e.args.stop_seq]);
  const want = [['sys_enter_read', 7, 40, 2, 6], ['sys_enter_read', 8, 20, 3, 5], ['sys_enter', 7, 30, 7, 9], ['A/Start', 7, 50, 10, 11]];
  assert(JSON.stringify(xs.sort((a, b) => a[3] - b[3])) === JSON.stringify(want), 'pairs: ' + JSON.stringify(xs));
});

let etwd, browser;
try {
  etwd = await startEtwd('chrome-sys');
  browser = await launchBrowser();
} catch (e) { console.error('FATAL: ' + e.message); if (etwd) await etwd.stop(); process.exit(2); }
const pageErrors = [];
const page = S.page = await newPage(browser, pageErrors);

await S.step('a live session\'s Chrome export: one complete event per syscall enter/exit pair, with its duration', async () => {
  const child = spawn('python3', ['-c', 'import sys, time\nsys.stdin.readline()\nfor _ in range(3): time.sleep(0.2)\nprint("d", flush=True)'], { stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    const [st, s] = await etwd.req('POST', '/api/v1/sessions', { name: 'nap', pids: [child.pid], providers: [
      { name: 'syscalls', events: ['sys_enter_clock_nanosleep', 'sys_exit_clock_nanosleep'] },
      { name: 'raw_syscalls', events: ['sys_enter', 'sys_exit'], filter: `id == ${NR}` }] });
    assert(st === 201, 'session ' + st + JSON.stringify(s));
    await login(page, etwd.tokens.admin, `${etwd.base}/#session=${s.id}`);
    await page.locator('#viewer').waitFor({ state: 'visible' });
    await until(async () => /live|connected|streaming/i.test(await page.locator('#viewer-conn').textContent()) ||
      (await etwd.req('GET', `/api/v1/sessions/${s.id}`))[1].stats.subscribers > 0, 'the page subscribed');
    const done = new Promise((r) => child.stdout.once('data', r));
    child.stdin.write('go\n');
    await done;
    await until(async () => /^12 rows/.test(await page.locator('#ev-status').textContent()), '12 events in the page');
    const te = JSON.parse(await download(page, 'chrome', 'kept')).traceEvents;
    assert(te.filter((e) => e.ph === 'i').length === 12, 'an instant per event');
    for (const prov of ['syscalls', 'raw_syscalls']) {
      const xs = te.filter((e) => e.ph === 'X' && e.cat === prov);
      assert(xs.length === 3, `${prov}: 3 complete events: ${JSON.stringify(xs)}`);
      for (const e of xs) {
        assert(e.pid === child.pid && e.tid === child.pid, `${prov}: the child's pid/tid: ${JSON.stringify(e)}`);
        assert(e.dur >= 200000 && e.dur < 2e6, `${prov}: lasts the 0.2 s sleep (µs): ${e.dur}`);
        assert(e.name === (prov === 'syscalls' ? 'sys_enter_clock_nanosleep' : 'sys_enter'), `${prov}: named after the enter event: ${e.name}`);
      }
    }
    await etwd.req('POST', `/api/v1/sessions/${s.id}/stop`);
  } finally { child.kill(); }
});

await S.step('no script errors', async () => { assert(!pageErrors.length, pageErrors.join('\n')); });
await finish(S, 'chrome-sys', browser, etwd);
