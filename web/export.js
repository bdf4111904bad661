/* etwd web page — export of events as ndjson, CSV and Chrome trace-event JSON (issue 22 item 4).
 * Pure functions over arrays of event objects (as the stream delivers them); no DOM. The page
 * loads this as a classic script (globalThis.EtwExport); node tests load it with require().
 * The Chrome mapping is the one `etwd convert --format chrome` writes (README "Export"). */
'use strict';
(function (root) {
  /* JSON text with exact 64-bit integers: the page marks them as strings with a leading NUL */
  function json(v) {
    if (v === null || v === undefined) return 'null';
    switch (typeof v) {
      case 'number': return Number.isFinite(v) ? String(v) : 'null';
      case 'boolean': return String(v);
      case 'bigint': return String(v);
      case 'string': return v.charCodeAt(0) === 0 && /^\u0000-?\d+$/.test(v) ? v.slice(1) : JSON.stringify(v);
    }
    if (Array.isArray(v)) return '[' + v.map(json).join(',') + ']';
    return '{' + Object.keys(v).map((k) => JSON.stringify(k) + ':' + json(v[k])).join(',') + '}';
  }
  const events = (list) => list.filter((e) => e && !e.Gap);

  function ndjson(list) {
    let s = '';
    for (const e of events(list)) s += json(e) + '\n';
    return s;
  }

  /* OWASP "CSV Injection": text a spreadsheet would run as a formula — it starts with = + - @ TAB
   * or CR and is not a plain number (-5, -1.5e3) — the rule of etwcore/src/evcsv.c's etw_csv_risky */
  const risky = (s) => /^[=+\-@\t\r]/.test(s) && !/^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(s);
  /* one cell (every cell goes through here): RFC 4180 quoting; risky text gets a leading ' inside quotes */
  function cell(s) {
    if (risky(s)) return '"\'' + s.replace(/"/g, '""') + '"';
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  /* columns: [{label, get(ev)}]; text(v) turns a value into cell text */
  function csv(list, columns, text) {
    const q = (s) => cell(String(s));
    let s = columns.map((c) => q(c.label)).join(',') + '\r\n';
    for (const e of events(list)) s += columns.map((c) => q(text(c.get(e)))).join(',') + '\r\n';
    return s;
  }

  /* "2023-04-22T10:47:24.3632943Z" -> [whole seconds since the epoch, nanoseconds] */
  function timeOf(e) {
    const t = e.System && e.System.TimeCreated;
    const m = typeof t === 'string' && /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)?$/.exec(t);
    if (!m) return null;
    const ms = Date.parse(m[1] + (m[3] || 'Z'));
    if (!Number.isFinite(ms)) return null;
    return [Math.floor(ms / 1000), Number((m[2] || '').padEnd(9, '0'))];
  }

  /* [1 start | 2 stop | 0, the key a start and its stop share]: ETW's Opcode 1/2 of one provider,
   * Task and thread; Linux (no provider GUID) syscalls' sys_enter_NAME/sys_exit_NAME and
   * raw_syscalls' sys_enter/sys_exit of one syscall id, of one thread */
  function startStop(s, d, prov, tid) {
    const n = String(s.EventName || '');
    if (!(s.Provider && s.Provider.Guid)) {
      let m;
      if (prov === 'syscalls' && (m = /^sys_(enter|exit)_(.+)$/.exec(n))) return [m[1] === 'enter' ? 1 : 2, `${prov}\u0001${m[2]}\u0001${tid}`];
      if (prov === 'raw_syscalls' && (n === 'sys_enter' || n === 'sys_exit')) return [n === 'sys_enter' ? 1 : 2, `${prov}\u0001${d.id}\u0001${tid}`];
    }
    return [s.Opcode === 1 ? 1 : s.Opcode === 2 ? 2 : 0, `${prov}\u0001${s.Task ?? ''}\u0001${tid}`];
  }

  /* CPU usage and wakeups, as `etwd convert --format chrome` draws them (etl_chrome.c, docs/etl.md):
   * a Running slice per switch-in (Linux sched_switch: no provider GUID; ETW Thread/CSwitch), on
   * the thread's track and on its CPU's (pseudo-process CPU_PID); a wakeup (sched_wakeup(_new)'s
   * pid, ReadyThread's TThreadId) → a flow "s" at the waker's instant and "f" ("bp":"e") at the
   * woken thread's next Running slice. @out gets the X and flow events (sort keys _seq, _i, _x),
   * @tnames thread names; finish(last ts) gives the CPU tracks' metadata and the wakeup counts. */
  const CPU_PID = 2147483647, MAP_MAX = 65536;
  function cpuUsage(out, pnames, tnames, num) {
    const int = (v) => (v === undefined || v === null ? -1 : num(v));
    const str = (v) => (typeof v === 'string' ? v : null);
    const run = new Map(); // cpu -> the thread running there: {on, seen, ts, last, pid, tid, seq, i, comm, inferred, w}
    const tp = new Map(); // ETW thread -> {pid (-1: unknown), used (on a track)}
    const wk = new Map(); // woken thread -> its pending wakeup {on, ts, seq, i, pid, tid}
    const ws = []; // ETW slices, written at the end (pids known then)
    let ncpu = 0; // CPUs with a CSwitch: 0..ncpu-1
    const n = { wakeups: 0, wakeup_flows: 0, wakeups_unmatched: 0, wakeups_dropped: 0 };
    const cpuOf = (cpu) => run.get(cpu) || run.set(cpu, { on: false, seen: false, w: null }).get(cpu);
    const tpOf = (tid) => tp.get(tid) || (tp.size < MAP_MAX ? tp.set(tid, { pid: -1, used: false }).get(tid) : null);
    function write(r, cpu, end, stop) { // r's slice from r.ts to @end (@stop: the switch out, or null: inferred)
      const dur = Math.round((end - r.ts) * 1000) / 1000, key = { _seq: num(r.seq), _i: r.i, _x: 1 };
      const tail = (a) => Object.assign(a, r.inferred ? { start_inferred: true } : {}, stop !== null ? { stop_seq: stop } : { end_inferred: true });
      out.push(Object.assign({ name: 'Running', cat: 'sched', ph: 'X', ts: r.ts, dur, pid: r.pid, tid: r.tid, args: tail({ cpu, start_seq: r.seq }) }, key));
      out.push(Object.assign({ name: r.comm, cat: 'sched', ph: 'X', ts: r.ts, dur, pid: CPU_PID, tid: cpu, args: tail({ cpu, pid: r.pid, tid: r.tid, start_seq: r.seq }) }, key));
      if (!r.w) return;
      const id = ++n.wakeup_flows, w = r.w;
      out.push({ name: 'wakeup', cat: 'sched', ph: 's', id, ts: w.ts, pid: w.pid, tid: w.tid, _seq: num(w.seq), _i: w.i, _x: 2 });
      out.push({ name: 'wakeup', cat: 'sched', ph: 'f', bp: 'e', id, ts: r.ts, pid: r.pid, tid: r.tid, _seq: key._seq, _i: r.i, _x: 2 });
    }
    function take(tid) { // @tid's pending wakeup, taken, or null
      const w = wk.get(tid);
      if (!w || !w.on) return null;
      w.on = false;
      return Object.assign({}, w);
    }
    function wake(woken, ts, seq, i, pid, tid) { // one pending per thread; a later one replaces it
      n.wakeups++;
      for (const r of run.values()) if (r.on && r.tid === woken) return void n.wakeups_unmatched++; // it runs
      if (!wk.has(woken) && wk.size >= MAP_MAX) return void n.wakeups_dropped++;
      const w = wk.get(woken) || wk.set(woken, { on: false }).get(woken);
      if (w.on) n.wakeups_unmatched++;
      Object.assign(w, { on: true, ts, seq, i, pid, tid });
    }
    function start(r, ts, pid, tid, seq, i, comm, inferred) {
      Object.assign(r, { on: true, ts, last: ts, pid, tid, seq, i, comm: comm !== null ? comm : String(tid), inferred, w: null });
    }
    function closeInferred(r, cpu) { // the slice ends at its task's last event on @cpu (none if that was its first)
      if (r.on && r.last > r.ts) write(r, cpu, r.last, null);
      else if (r.on && r.w) n.wakeups_unmatched++;
      r.on = false;
    }
    function lxSwitch(e, d, cpu, ts, pid, tid, i) {
      const r = cpuOf(cpu), prev = int(d.prev_pid), next = int(d.next_pid), pc = str(d.prev_comm), nc = str(d.next_comm);
      if (r.on && r.tid === prev && ts >= r.ts) {
        if (prev === tid) r.pid = pid;
        if (pc !== null) r.comm = pc;
        write(r, cpu, ts, e.seq);
        r.on = false;
      } else closeInferred(r, cpu);
      r.seen = true;
      if (next > 0 && nc !== null) {
        start(r, ts, next, next, e.seq, i, nc, false);
        r.w = take(next);
        tnames.set(`${next}/${next}`, [next, next, nc]);
      }
      if (prev > 0 && pc !== null) tnames.set(`${prev}/${prev}`, [prev, prev, pc]);
    }
    function lxTask(e, x, cpu, ts, pid, tid, i) { // another task's event: switches are missing
      const r = run.get(cpu);
      if (!r || !r.seen) return;
      if (r.on && r.tid === tid) return void (r.last = ts);
      closeInferred(r, cpu);
      if (tid <= 0) return;
      start(r, ts, pid, tid, e.seq, i, str(x.ProcessName), true);
      if (take(tid)) n.wakeups_unmatched++; // its switch-in is not in the input
    }
    const wslice = (r, cpu, ts, stop) => ws.push({ r: Object.assign({}, r), cpu, end: Math.max(ts, r.ts), stop });
    function winSwitch(e, d, cpu, ts, i) {
      const r = cpuOf(cpu), nw = int(d.NewThreadId), old = int(d.OldThreadId);
      if (cpu >= ncpu) ncpu = cpu + 1;
      if (r.on) wslice(r, cpu, ts, r.tid === old ? e.seq : null);
      r.on = false;
      r.seen = true;
      if (nw <= 0) return;
      for (const [k, o] of run) if (k !== cpu && o.on && o.tid === nw) { wslice(o, k, ts, null); o.on = false; }
      Object.assign(r, { on: true, tid: nw, ts, seq: e.seq, i, inferred: false, w: take(nw) });
      const k = tpOf(nw);
      if (k) k.used = true;
    }
    function event(e, s, x, d, name, prov, ts, pid, tid, i) {
      const lx = !(s.Provider && s.Provider.Guid), cpu = num(x.ProcessorID), data = e.EventData && typeof e.EventData === 'object';
      if (data && s.EventName) {
        const woken = lx && prov === 'sched' && (name === 'sched_wakeup' || name === 'sched_wakeup_new') ? int(d.pid)
          : !lx && name === 'Thread/ReadyThread' ? int(d.TThreadId) : -1;
        if (woken > 0) wake(woken, ts, e.seq, i, pid, tid);
      }
      if (lx) return s.EventName && name === 'sched_switch' && prov === 'sched' ? lxSwitch(e, d, cpu, ts, pid, tid, i) : lxTask(e, x, cpu, ts, pid, tid, i);
      const p = int(d.ProcessId), t = int(d.TThreadId);
      let k;
      if (p >= 0 && t > 0 && (k = tpOf(t))) k.pid = p;
      if (x.ProcessID != null && x.ThreadID != null && (k = tpOf(tid))) {
        if (k.pid < 0) k.pid = pid;
        if (name === 'PerfInfo/Sample') k.used = true;
      }
      if (name === 'Thread/CSwitch' && data) winSwitch(e, d, cpu, ts, i);
    }
    function finish(last) {
      for (let cpu = 0; cpu < ncpu; cpu++) { // ETW threads still running at the end: to the last event
        const r = run.get(cpu);
        if (r && r.on) { wslice(r, cpu, last, null); r.on = false; }
      }
      for (const { r, cpu, end, stop } of ws) {
        const k = tp.get(r.tid), pid = k && k.pid > 0 ? k.pid : 0, pn = pnames.get(pid);
        write(Object.assign(r, { pid, comm: pn !== undefined ? pn : String(r.tid), inferred: false }), cpu, end, stop);
      }
      for (const [tid, k] of tp) {
        const pid = k.pid > 0 ? k.pid : 0, pn = pnames.get(pid);
        if (k.used && pn !== undefined && !tnames.has(`${pid}/${tid}`)) tnames.set(`${pid}/${tid}`, [pid, tid, pn]);
      }
      for (const [cpu, r] of run) closeInferred(r, cpu);
      for (const w of wk.values()) if (w.on) n.wakeups_unmatched++;
      const meta = run.size ? [{ name: 'process_name', ph: 'M', pid: CPU_PID, tid: 0, args: { name: 'CPUs' } }] : [];
      for (const cpu of [...run.keys()].sort((a, b) => a - b)) if (run.get(cpu).seen) meta.push({ name: 'thread_name', ph: 'M', pid: CPU_PID, tid: cpu, args: { name: `CPU ${cpu}` } });
      return { meta, counts: n.wakeups ? n : null };
    }
    return { event, finish };
  }

  /* the Chrome trace-event JSON object (see the README's mapping) */
  function chrome(list, source) {
    const evs = events(list);
    const times = evs.map(timeOf);
    let t0 = null;
    for (const t of times) if (t && (!t0 || t[0] < t0[0] || (t[0] === t0[0] && t[1] < t0[1]))) t0 = t;
    const ts = (t) => (t && t0 ? Math.round((t[0] - t0[0]) * 1e9 + (t[1] - t0[1])) / 1000 : 0);
    const num = (v) => (typeof v === 'number' ? v : typeof v === 'string' && /^\u0000?\d+$/.test(v) ? Number(v.replace('\u0000', '')) : 0);
    const out = [], meta = [];
    const pnames = new Map(), tnames = new Map();
    const open = new Map(); // provider/task/tid -> the start event's instant waiting for its stop
    const cu = cpuUsage(out, pnames, tnames, num);
    let last = 0;
    // time order (stable by seq) first: a start is paired with the stop that follows it in time
    const order = evs.map((e, i) => [ts(times[i]), num(e.seq), i]).sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
    for (const [, , i] of order) {
      const e = evs[i];
      const s = e.System || {}, x = s.Execution || {}, d = e.EventData && typeof e.EventData === 'object' ? e.EventData : {};
      const prov = (s.Provider && (s.Provider.Name || s.Provider.Guid)) || '';
      const pid = num(x.ProcessID), tid = num(x.ThreadID);
      const name = s.EventName ? String(s.EventName) : `${prov}/${s.EventID ?? ''}`;
      const args = Object.assign({}, d, { seq: e.seq });
      if (x.ProcessorID !== undefined) args.cpu = x.ProcessorID;
      const ev = { name, cat: prov, ph: 'i', s: 't', ts: ts(times[i]), pid, tid, args, _seq: num(e.seq), _i: i, _x: 0 };
      out.push(ev);
      if (ev.ts > last) last = ev.ts;
      if (x.ProcessName) pnames.set(pid, String(x.ProcessName));
      // process start/rundown events (opcode 1 Start, 3 DCStart, 4 DCEnd) name the process they describe
      const dpn = d.ProcessName ?? d.ImageFileName;
      if (dpn !== undefined && (s.Opcode === 1 || s.Opcode === 3 || s.Opcode === 4 || /start|rundown/i.test(name))) {
        const p = d.ProcessID ?? d.ProcessId;
        pnames.set(p !== undefined ? num(p) : pid, String(dpn));
      }
      if (x.ThreadName) tnames.set(`${pid}/${tid}`, [pid, tid, String(x.ThreadName)]);
      if (d.ThreadName !== undefined && d.ThreadName !== '') tnames.set(`${pid}/${tid}`, [pid, tid, String(d.ThreadName)]);
      const [pair, key] = startStop(s, d, prov, tid);
      if (pair === 1) open.set(key, ev);
      else if (pair === 2 && open.has(key)) {
        const st = open.get(key);
        open.delete(key);
        out.push({ name: st.name, cat: prov, ph: 'X', ts: st.ts, dur: Math.round((ev.ts - st.ts) * 1000) / 1000, pid: st.pid, tid: st.tid,
          args: { start_seq: st.args.seq, stop_seq: e.seq }, _seq: st._seq, _i: st._i, _x: 1 });
      }
      cu.event(e, s, x, d, name, prov, ev.ts, pid, tid, i);
    }
    const { meta: cpus, counts } = cu.finish(last);
    out.sort((a, b) => a.ts - b.ts || a._seq - b._seq || a._i - b._i || a._x - b._x);
    for (const e of out) { delete e._seq; delete e._i; delete e._x; }
    meta.push(...cpus);
    for (const [pid, n] of pnames) meta.push({ name: 'process_name', ph: 'M', pid, tid: 0, args: { name: n } });
    for (const [pid, tid, n] of tnames.values()) meta.push({ name: 'thread_name', ph: 'M', pid, tid, args: { name: n } });
    return { traceEvents: meta.concat(out), displayTimeUnit: 'ns', otherData: Object.assign({ producer: 'etwd', source: source || '' }, counts) };
  }
  const chromeText = (list, source) => json(chrome(list, source));

  const api = { json, ndjson, csv, cell, risky, chrome, chromeText, timeOf };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.EtwExport = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
