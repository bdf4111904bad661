// Unit tests of the page's pure modules in node: web/filter.js (parser, evaluator, errors, free
// text, completion), web/export.js (ndjson, CSV, Chrome trace JSON) and web/state.js (URL
// fragment). Run by run.sh before the browser tests.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
const require = createRequire(import.meta.url);
const WEB = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../web');
const F = require(path.join(WEB, 'filter.js'));
const X = require(path.join(WEB, 'export.js'));
const ST = require(path.join(WEB, 'state.js'));

let failed = 0, passed = 0;
function eq(got, want, what) {
  if (JSON.stringify(got) === JSON.stringify(want)) passed++;
  else { failed++; console.log(`FAIL ${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); }
}
const ev = (o) => Object.assign({ seq: 7, System: { Provider: { Name: 'sched' }, EventName: 'sched_process_exec', EventID: 311, Level: 4,
  Keywords: '\u000018446744073709551615', TimeCreated: '2026-01-01T00:00:01.000000002Z',
  Execution: { ProcessID: 1234, ThreadID: 1235, ProcessorID: 1 } }, EventData: { filename: '/usr/bin/true', pid: 1234, old_pid: 99 } }, o);
const E = [ev(), ev({ System: { Provider: { Name: 'syscalls' }, EventName: 'sys_enter_openat', EventID: 600, Execution: { ProcessID: 1, ThreadID: 1 } }, EventData: { filename: '/etc/passwd' } }),
  ev({ System: { Provider: { Name: 'Microsoft-Windows-Kernel' }, EventName: '', EventID: 5, Execution: {} }, EventData: {} }),
  { Gap: { Dropped: 5, Layer: 'hub' } }];
const sel = (x) => E.map((e, i) => (F.compile(x)(e) ? i : -1)).filter((i) => i >= 0);

eq(sel(''), [0, 1, 2, 3], 'empty keeps all');
eq(sel('pid == 1234'), [0], 'pid shorthand');
eq(sel('PID==1234'), [0], 'any case, no spaces');
eq(sel('pid == 1234 && EventData.filename ~ "true" && Provider in (sched, syscalls)'), [0], 'the issue example');
eq(sel('Provider in (sched, syscalls)'), [0, 1], 'in');
eq(sel('filename ~ /^\\/etc\\//'), [1], 'bare name = EventData, regex');
eq(sel('filename !~ "true"'), [1], '!~');
eq(sel('pid != 1234'), [1], 'missing fields fail every test');
eq(sel('!(pid == 1234)'), [1, 2], 'negation of a test');
eq(sel('Id >= 311 && Id < 601'), [0, 1], 'ordering');
eq(sel('Id == 0x137'), [0], 'hex');
eq(sel('Keywords == 18446744073709551615'), [0], 'exact 64-bit');
eq(sel('Keywords > 18446744073709551614'), [0], '64-bit order');
eq(sel('(pid == 1 || pid == 1234) && !Provider == sched'), [1], 'parentheses and !');
eq(sel('Event ~ OPEN'), [1], '~ ignores case');
eq(sel('Event == SYS_ENTER_OPENAT'), [], '== is case-sensitive');
eq(sel('seq == 7'), [0, 1, 2], 'seq');
eq(sel('System.Execution.ProcessorID == 1'), [0], 'full path');
eq(sel('Time > "2026-01-01T00:00:01"'), [0], 'string order');
eq(sel('Time > "2026-01-01T00:00:02"'), [], 'string order, later');
for (const [x, re] of [['pid ==', /expected a value but the expression ended at column 7/], ['pid = 1', /unexpected '='/],
  ['(pid == 1', /expected '\)'/], ['pid 1', /expected an operator/], ['pid == 1 pid', /expected && or \|\|/],
  ['"x" == 1', /expected a field name/], ['a ~ /(/', /bad regex/], ['a == "x', /unterminated string/], ['a == /x/', /needs ~/],
  ['a in 1', /expected '\(' after in/]]) {
  try { F.compile(x); eq('no error', re.source, 'error for ' + x); } catch (e) { eq(re.test(e.message) && e instanceof F.FilterError, true, `error for ${x}: ${e.message}`); }
}
// free text: never the sequence number, the time or the keywords
eq(F.textOf(E[0]).includes('sched_process_exec') && F.textOf(E[0]).includes('filename=/usr/bin/true'), true, 'textOf has names and data');
eq(/\b7\b/.test(F.textOf(E[0]).replace(/1234|1235|311|99/g, '')), false, 'textOf has no seq');
eq(F.textOf(E[0]).includes('18446744073709551615'), false, 'textOf has no keywords');
// completion
const fields = [...F.fieldsOf(E[0])];
eq(fields.includes('EventData.filename') && fields.includes('System.Execution.ProcessID'), true, 'fieldsOf');
eq(F.complete('pid == 1 && Ev', 14, fields).items.slice(0, 3), ['Event', 'EventData.filename', 'EventData.pid'], 'complete a field');
eq(F.complete('pid == 1 && file', 16, fields).items, ['EventData.filename'], 'complete a member by its last part');
eq(F.complete('pid == fi', 9, fields).items, [], 'no fields where a value goes');
eq(F.complete('pid == 1 && Ev', 14, fields).start, 12, 'token start');

// export: exact 64-bit numbers, gap records left out, CSV quoting
eq(X.ndjson([E[0], E[3]]).split('\n').length, 2, 'ndjson: one line per event, no gap');
eq(X.ndjson([E[0]]).includes('"Keywords":18446744073709551615'), true, 'ndjson: exact u64');
eq(X.csv([E[0]], [{ label: 'a,b', get: (e) => e.EventData.filename }, { label: 'q', get: () => 'say "hi"' }], String), '"a,b",q\r\n/usr/bin/true,"say ""hi"""\r\n', 'csv');
// CSV formula injection: text cells starting with = + - @ TAB CR get a leading ' (inside quotes), plain numbers do not
const inj = [{ label: '=label', get: (e) => e.EventData.filename }, { label: 'pid', get: (e) => e.EventData.pid }, { label: 'rel', get: (e) => e.EventData.rel }];
eq(X.csv([ev({ EventData: { filename: '=HYPERLINK("http://e","x")', pid: -5, rel: '-0.250' } }), ev({ EventData: { filename: '+cmd|x', pid: -1.5e3, rel: '-1.5e3' } }),
  ev({ EventData: { filename: '-2+3', pid: '-12', rel: '\tTAB' } }), ev({ EventData: { filename: '@SUM(1)', pid: 0, rel: '\rCR' } }),
  ev({ EventData: { filename: 'a=b', pid: '-', rel: '-x' } })], inj, String),
'"\'=label",pid,rel\r\n"\'=HYPERLINK(""http://e"",""x"")",-5,-0.250\r\n"\'+cmd|x",-1500,-1.5e3\r\n"\'-2+3",-12,"\'\tTAB"\r\n' +
  '"\'@SUM(1)",0,"\'\rCR"\r\na=b,"\'-","\'-x"\r\n', 'csv: formulas quoted, numbers plain');
eq(['=', '+1', '-', '-2+3', '@x', '\tx', '\rx', '-1e', '-.5', '-1.', '-0x10', '+5'].filter((s) => !X.risky(s)), [], 'risky: the same list as test_evcsv.c');
eq(['', 'x=1', '5', '-5', '-1.5e3', '-1.5E-3', '-0.25', '1e+9', "'=x", ' =x', '{"a":1}'].filter(X.risky), [], 'not risky: the same list as test_evcsv.c');
// chrome: instants, a start/stop pair as one complete event, process names, ts in µs from the earliest
const ce = (seq, t, op, extra) => ({ seq, System: Object.assign({ Provider: { Name: 'P' }, EventName: 'n' + seq, EventID: seq, Task: 7, Opcode: op,
  TimeCreated: t, Execution: { ProcessID: 10, ThreadID: 11, ProcessorID: 0 } }, extra || {}), EventData: { v: seq } });
const c = X.chrome([ce(2, '2020-01-01T00:00:01.000001500Z', 2), ce(1, '2020-01-01T00:00:01.0000005Z', 1, { Execution: { ProcessID: 10, ThreadID: 11, ProcessName: 'x.exe' } }),
  ce(3, '2020-01-01T00:00:00.9999995Z', 0), { Gap: { Dropped: 1 } }], 'src');
eq(c.displayTimeUnit + c.otherData.producer + c.otherData.source, 'nsetwdsrc', 'chrome envelope');
eq(c.traceEvents.map((e) => [e.ph, e.name, e.ts]), [['M', 'process_name', undefined], ['i', 'n3', 0], ['i', 'n1', 1], ['X', 'n1', 1], ['i', 'n2', 2]], 'chrome events (sorted, pair, µs)');
eq(c.traceEvents[3].dur, 1, 'X dur');
eq(c.traceEvents[0].args.name + c.traceEvents[0].pid, 'x.exe10', 'process name');
eq(c.traceEvents[1].args, { v: 3, seq: 3, cpu: 0 }, 'args = EventData + seq + cpu');
eq(X.chrome([ce(1, 'x', 1), ce(5, 'y', 0, { EventName: '' })]).traceEvents[1].name, 'P/5', 'unnamed: Provider/EventID; an unpaired start stays an instant');
// chrome: Running slices and wakeup arrows, as `etwd convert --format chrome` (etl_chrome.c): Linux
// (no provider GUID) sched_switch/sched_wakeup, ETW Thread/CSwitch/ReadyThread
const lx = (seq, us, cpu, tid, name, d) => ({ seq, System: { Provider: { Name: 'sched' }, EventName: name, TimeCreated: `2026-01-01T00:00:00.${String(us).padStart(6, '0')}Z`,
  Execution: { ProcessID: tid, ThreadID: tid, ProcessorID: cpu } }, EventData: d });
const lc = X.chrome([lx(1, 10, 0, 5, 'sched_switch', { prev_comm: 'a', prev_pid: 5, next_comm: 'b', next_pid: 6 }),
  lx(2, 20, 0, 6, 'sched_wakeup', { comm: 'c', pid: 7 }), lx(3, 25, 0, 6, 'sched_wakeup', { comm: 'd', pid: 8 }),
  lx(4, 30, 1, 0, 'sched_switch', { prev_comm: 'swapper/1', prev_pid: 0, next_comm: 'c', next_pid: 7 }),
  lx(5, 40, 1, 7, 'sched_switch', { prev_comm: 'c', prev_pid: 7, next_comm: 'swapper/1', next_pid: 0 }),
  lx(6, 50, 0, 6, 'sched_switch', { prev_comm: 'b', prev_pid: 6, next_comm: 'swapper/0', next_pid: 0 })]).traceEvents;
const pick = (te, f) => te.filter(f).map((e) => [e.ph, e.name, e.ts, e.pid, e.tid, e.dur, e.id, e.bp]);
eq(pick(lc, (e) => e.ph === 'X' || e.ph === 's' || e.ph === 'f'), [['X', 'Running', 0, 6, 6, 40, undefined, undefined], ['X', 'b', 0, 2147483647, 0, 40, undefined, undefined],
  ['s', 'wakeup', 10, 6, 6, undefined, 1, undefined], ['X', 'Running', 20, 7, 7, 10, undefined, undefined], ['X', 'c', 20, 2147483647, 1, 10, undefined, undefined],
  ['f', 'wakeup', 20, 7, 7, undefined, 1, 'e']], 'Linux: Running slices (thread and CPU track), the wakeup arrow from the waker to the woken one\'s slice');
eq(lc.findIndex((e) => e.ph === 's') - lc.findIndex((e) => e.name === 'sched_wakeup'), 1, 'the s right after its waker\'s instant');
eq(lc[lc.findIndex((e) => e.ph === 'f') - 1].name, 'c', 'the f after the slice it starts (the thread\'s Running X, then its CPU\'s)');
eq(X.chrome([lx(1, 10, 0, 5, 'sched_switch', { prev_comm: 'a', prev_pid: 5, next_comm: 'b', next_pid: 6 }), lx(2, 20, 0, 6, 'sched_wakeup', { pid: 7 }),
  lx(3, 25, 0, 6, 'sched_wakeup', { pid: 7 }), lx(4, 30, 0, 6, 'sched_wakeup', { pid: 6 })]).otherData,
{ producer: 'etwd', source: '', wakeups: 3, wakeup_flows: 0, wakeups_unmatched: 3, wakeups_dropped: 0 }, 'no arrow to nowhere: replaced, never switched in, or running: counted');
const we = (seq, t, cpu, tid, pid, name, d) => ({ seq, System: { Provider: { Name: 'Windows Kernel', Guid: '{k}' }, EventName: name, TimeCreated: `2026-01-01T00:00:00.${String(t).padStart(7, '0')}Z`,
  Execution: { ProcessID: pid, ThreadID: tid, ProcessorID: cpu } }, EventData: d });
const wc = X.chrome([we(1, 1, 0, 11, 100, 'Thread/DCStart', { ProcessId: 100, TThreadId: 11 }), we(2, 2, 0, 22, 200, 'Thread/DCStart', { ProcessId: 200, TThreadId: 22, ThreadName: '' }),
  we(3, 3, 0, 11, 100, 'Process/DCStart', { ProcessId: 200, ImageFileName: 'svc.exe' }),
  we(4, 10, 0, 11, 100, 'Thread/CSwitch', { NewThreadId: 11, OldThreadId: 0 }), we(5, 20, 0, 11, 100, 'Thread/ReadyThread', { TThreadId: 22 }),
  we(6, 40, 1, 22, 200, 'Thread/CSwitch', { NewThreadId: 22, OldThreadId: 0 }), we(7, 50, 1, 0, 0, 'Thread/CSwitch', { NewThreadId: 0, OldThreadId: 22 })]).traceEvents;
eq(pick(wc, (e) => e.ph === 's' || e.ph === 'f' || (e.ph === 'X' && e.tid === 22)), [['s', 'wakeup', 1.9, 100, 11, undefined, 1, undefined],
  ['X', 'Running', 3.9, 200, 22, 1, undefined, undefined], ['f', 'wakeup', 3.9, 200, 22, undefined, 1, 'e']], 'ETW: ReadyThread → the readied thread\'s Running slice (pid from Thread/DCStart)');
eq(wc.filter((e) => e.ph === 'M').map((e) => [e.pid, e.tid, e.args.name]).filter((m) => m[0] === 2147483647 || m[1] === 22), [[2147483647, 0, 'CPUs'],
  [2147483647, 0, 'CPU 0'], [2147483647, 1, 'CPU 1'], [200, 22, 'svc.exe']], 'CPU tracks; a thread on a track named as its process (an empty ThreadName ignored)');
// state: round trip, fixed order, junk ignored
const st = { session: 5, filter: 'pid == 1 && x ~ "a b"', text: 'w', cols: ['time', 'f:EventData.x'], sort: '-pid' };
eq(ST.parse(ST.format(st)), st, 'state round trip');
eq(ST.format({ sort: 'x', session: 2 }), '#session=2&sort=x', 'state order');
eq(ST.parse('#session=abc&zz=1&filter=a'), { filter: 'a' }, 'state ignores junk');
// events.js (shared by the page and its worker): exact 64-bit integers, cells, time, keys
const EV = require(path.join(WEB, 'events.js'));
const pe = EV.parseEvents('[{"seq":1,"System":{"Keywords":18446744073709551615,"Provider":{"Name":"p"},"EventID":7,"TimeCreated":"2026-01-01T00:00:01.2500000Z","Execution":{"ProcessID":4}},"EventData":{"s":"x 12345678901234567890"}}]');
eq([EV.valText(pe[0].System.Keywords), EV.isBig(pe[0].System.Keywords), pe[0].EventData.s], ['18446744073709551615', true, 'x 12345678901234567890'], 'parseEvents keeps 64-bit integers exact');
eq(EV.jsonText(pe[0].System.Keywords), '18446744073709551615', 'jsonText of a 64-bit integer');
eq(EV.msOf(pe[0]) - Date.UTC(2026, 0, 1), 1250, 'msOf: TimeCreated in ms');
eq([EV.groupKey(pe[0], 'event'), EV.groupKey(pe[0], 'process'), EV.groupKey(pe[0], 'field', ['EventData', 'nope']), EV.groupKey({ Gap: {} }, 'provider')], ['p/#7', '4', '(none)', null], 'groupKey');
eq([EV.LANE.cpu(pe[0]), EV.CELLS.time(pe[0]), EV.sortGetter('f:pid')(pe[0])], ['(none)', '00:00:01.2500000', 4], 'lane, cell, sort getter');

console.log(`modules: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
