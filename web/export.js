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

  /* columns: [{label, get(ev)}]; text(v) turns a value into cell text */
  function csv(list, columns, text) {
    const q = (s) => (/[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s);
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
      const ev = { name, cat: prov, ph: 'i', s: 't', ts: ts(times[i]), pid, tid, args, _seq: num(e.seq), _i: i };
      out.push(ev);
      if (x.ProcessName) pnames.set(pid, String(x.ProcessName));
      // process start/rundown events (opcode 1 Start, 3 DCStart, 4 DCEnd) name the process they describe
      const dpn = d.ProcessName ?? d.ImageFileName;
      if (dpn !== undefined && (s.Opcode === 1 || s.Opcode === 3 || s.Opcode === 4 || /start|rundown/i.test(name))) {
        const p = d.ProcessID ?? d.ProcessId;
        pnames.set(p !== undefined ? num(p) : pid, String(dpn));
      }
      if (x.ThreadName) tnames.set(`${pid}/${tid}`, [pid, tid, String(x.ThreadName)]);
      if (d.ThreadName !== undefined) tnames.set(`${pid}/${tid}`, [pid, tid, String(d.ThreadName)]);
      const [pair, key] = startStop(s, d, prov, tid);
      if (pair === 1) open.set(key, ev);
      else if (pair === 2 && open.has(key)) {
        const st = open.get(key);
        open.delete(key);
        out.push({ name: st.name, cat: prov, ph: 'X', ts: st.ts, dur: Math.round((ev.ts - st.ts) * 1000) / 1000, pid: st.pid, tid: st.tid,
          args: { start_seq: st.args.seq, stop_seq: e.seq }, _seq: st._seq, _i: st._i });
      }
    }
    out.sort((a, b) => a.ts - b.ts || a._seq - b._seq || a._i - b._i);
    for (const e of out) { delete e._seq; delete e._i; }
    for (const [pid, n] of pnames) meta.push({ name: 'process_name', ph: 'M', pid, tid: 0, args: { name: n } });
    for (const [pid, tid, n] of tnames.values()) meta.push({ name: 'thread_name', ph: 'M', pid, tid, args: { name: n } });
    return { traceEvents: meta.concat(out), displayTimeUnit: 'ns', otherData: { producer: 'etwd', source: source || '' } };
  }
  const chromeText = (list, source) => json(chrome(list, source));

  const api = { json, ndjson, csv, chrome, chromeText, timeOf };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.EtwExport = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
