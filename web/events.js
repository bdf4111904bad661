/* etwd web page — what the page's main thread and its Worker (web/worker.js) both need to know
 * about one event: parsing a WebSocket frame with exact 64-bit integers, its JSON text, the table's
 * cell values, its time in ms, its timeline lane and its group key. Pure functions, no DOM, no
 * state; a classic script (globalThis.EtwEvents) loaded by the page, by the Worker
 * (importScripts) and by node tests (require). Needs filter.js, export.js and columns.js first. */
'use strict';
(function (root) {
  const C = root.EtwColumns || (typeof require === 'function' ? require('./columns.js') : null);

  /* 64-bit values stay exact: integer literals of 16+ digits are turned into strings marked with
   * a leading NUL before JSON.parse (a cheap native regex pass; JSON.parse with a reviver is ~6x
   * slower). A literal inside a JSON string would make the text invalid, so then the slow exact
   * reviver (JSON.parse source text access) is used instead. */
  const LONG_INT = /([:,[]\s*)(-?\d{16,})(?=\s*[,}\]])/g;
  const BIG = /^\u0000-?\d{16,}$/;
  const isBig = (v) => typeof v === 'string' && v.charCodeAt(0) === 0 && BIG.test(v);
  function exactReviver(k, v, ctx) {
    if (typeof v === 'number' && !Number.isSafeInteger(v) && ctx && /^-?\d+$/.test(ctx.source)) return '\u0000' + ctx.source;
    return v;
  }
  function parseEvents(text) {
    const marked = text.replace(LONG_INT, '$1"\\u0000$2"');
    if (marked === text) return JSON.parse(text);
    try { return JSON.parse(marked); } catch { return JSON.parse(text, exactReviver); }
  }
  function jsonText(v, ind = '', step = '  ') {
    if (v === null || v === undefined) return 'null';
    switch (typeof v) {
      case 'number': return Number.isFinite(v) ? String(v) : 'null';
      case 'boolean': return String(v);
      case 'string': return isBig(v) ? v.slice(1) : JSON.stringify(v);
    }
    const nl = step ? '\n' : '', ni = ind + step, sep = step ? ': ' : ':';
    if (Array.isArray(v)) {
      if (!v.length) return '[]';
      return '[' + nl + v.map((x) => ni + jsonText(x, ni, step)).join(',' + nl) + nl + ind + ']';
    }
    const ks = Object.keys(v);
    if (!ks.length) return '{}';
    return '{' + nl + ks.map((k) => ni + JSON.stringify(k) + sep + jsonText(v[k], ni, step)).join(',' + nl) + nl + ind + '}';
  }
  const valText = (v) => (v === null || v === undefined ? '' : typeof v === 'object' ? jsonText(v, '', '') : isBig(v) ? v.slice(1) : String(v));

  /* ----- the table's cells ----- */
  const sys = (e) => (e && e.System) || {};
  const exe = (e) => sys(e).Execution || {};
  function timeText(e) {
    const t = sys(e).TimeCreated;
    if (typeof t !== 'string') return '';
    const i = t.indexOf('T');
    return i >= 0 ? t.slice(i + 1).replace('Z', '') : t;
  }
  function dataText(e) {
    const d = e.EventData;
    let s = '';
    if (d && typeof d === 'object') {
      for (const k in d) {
        s += (s ? ' ' : '') + k + '=' + valText(d[k]);
        if (s.length > 400) break;
      }
    }
    if (e.Undecoded) s += (s ? ' ' : '') + 'Undecoded: ' + (e.Undecoded.Reason || '');
    return s;
  }
  const CELLS = {
    seq: (e) => e.seq, time: timeText,
    provider: (e) => sys(e).Provider && sys(e).Provider.Name, event: (e) => sys(e).EventName, id: (e) => sys(e).EventID,
    level: (e) => sys(e).Level, opcode: (e) => sys(e).Opcode, keywords: (e) => sys(e).Keywords,
    host: (e) => sys(e).Host, // the machine (etwd's --host-name, an .etl's ComputerName); absent: none
    pid: (e) => exe(e).ProcessID, tid: (e) => exe(e).ThreadID, cpu: (e) => exe(e).ProcessorID, data: dataText,
  };
  /* the value a column sorts by: fixed ids, "rel" (ns since base), "f:<path>" (a field) */
  function sortGetter(id, relBase) {
    if (CELLS[id]) return CELLS[id];
    if (id === 'rel') return (e) => C.relNs(e, relBase);
    if (id.startsWith('f:')) return C.fieldColumn(id.slice(2)).get;
    return () => undefined;
  }

  /* ----- time: TimeCreated "YYYY-MM-DDTHH:MM:SS.fffffffZ" → ms since 1970 (a double), the
   * minute prefix through Date.parse, cached ----- */
  const minuteCache = new Map();
  function parseTime(s) {
    if (typeof s !== 'string' || s.length < 20 || s[s.length - 1] !== 'Z' || s[19] !== '.') {
      const v = typeof s === 'string' ? Date.parse(s) : NaN;
      return Number.isNaN(v) ? NaN : v;
    }
    const mk = s.slice(0, 16);
    let m = minuteCache.get(mk);
    if (m === undefined) {
      if (minuteCache.size > 4096) minuteCache.clear();
      m = Date.parse(mk + ':00Z');
      minuteCache.set(mk, m);
    }
    return m + Number(s.slice(17, 19)) * 1000 + Number('0.' + s.slice(20, -1)) * 1000;
  }
  const msOf = (ev) => (!ev || ev.Gap ? NaN : parseTime(sys(ev).TimeCreated));

  /* ----- the timeline's lanes and the group-by keys ----- */
  const LANE = {
    provider: (e) => (sys(e).Provider || {}).Name || '(none)',
    process: (e) => { const x = sys(e).Execution; return x && x.ProcessID != null ? String(x.ProcessID) : '(none)'; },
    cpu: (e) => { const x = sys(e).Execution; return x && x.ProcessorID != null ? String(x.ProcessorID) : '(none)'; },
  };
  const GROUP = {
    provider: (e) => (sys(e).Provider || {}).Name,
    event: (e) => { const s = sys(e); return `${(s.Provider || {}).Name || ''}/${s.EventName != null && s.EventName !== '' ? s.EventName : '#' + s.EventID}`; },
    process: (e) => exe(e).ProcessID, thread: (e) => exe(e).ThreadID, cpu: (e) => exe(e).ProcessorID, level: (e) => sys(e).Level,
    host: (e) => sys(e).Host,
  };
  /* the group key of an event: by one of GROUP or 'field' with a path (array); '(none)' when
   * missing; null for a gap (not counted) */
  function groupKey(ev, by, path) {
    if (!ev || ev.Gap) return null;
    let v;
    if (by === 'field') {
      v = ev;
      for (const p of path || []) { if (v == null || typeof v !== 'object') { v = undefined; break; } v = v[p]; }
    } else v = GROUP[by] ? GROUP[by](ev) : undefined;
    return v === undefined || v === null || v === '' ? '(none)' : valText(v);
  }

  const api = { parseEvents, jsonText, valText, isBig, timeText, dataText, CELLS, sortGetter, parseTime, msOf, LANE, GROUP, groupKey };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.EtwEvents = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
