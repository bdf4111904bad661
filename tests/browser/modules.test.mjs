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
