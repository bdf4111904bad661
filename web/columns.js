/* etwd web page — event table columns beyond the fixed ones (issue 22 item 2): a column per
 * chosen event field, relative time, and the value order used to sort a column. Pure functions;
 * needs filter.js (paths) and export.js (time parsing). Loaded as a classic script (EtwColumns). */
'use strict';
(function (root) {
  const F = root.EtwFilter || (typeof require === 'function' ? require('./filter.js') : null);
  const X = root.EtwExport || (typeof require === 'function' ? require('./export.js') : null);

  /* a column showing one field: "f:EventData.filename" or "f:pid" */
  function fieldColumn(path) {
    const parts = F.resolve(path);
    return { id: 'f:' + path, label: parts[parts.length - 1], title: parts.join('.'), w: '9em', on: true, field: path, get: F.getter(parts) };
  }

  /* seconds from base ([s, ns] as export.js timeOf gives) to the event's time, µs shown */
  function relText(ev, base) {
    const t = X.timeOf(ev);
    if (!t || !base) return '';
    const ns = (t[0] - base[0]) * 1e9 + (t[1] - base[1]);
    return (ns < 0 ? '-' : '+') + (Math.abs(ns) / 1e9).toFixed(6);
  }
  const relNs = (ev, base) => { const t = X.timeOf(ev); return t && base ? (t[0] - base[0]) * 1e9 + (t[1] - base[1]) : undefined; };

  /* sort order of two cell values: missing last, numbers (64-bit exact) by value, else text */
  const BIG = /^\u0000-?\d+$/;
  function key(v) {
    if (v === undefined || v === null || v === '') return null;
    if (typeof v === 'number') return v;
    if (typeof v === 'string' && BIG.test(v)) return BigInt(v.slice(1));
    if (typeof v === 'object') return JSON.stringify(v);
    return String(v);
  }
  function compare(a, b) {
    const x = key(a), y = key(b);
    if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;
    const nx = typeof x !== 'string', ny = typeof y !== 'string';
    if (nx && ny) return x < y ? -1 : x > y ? 1 : 0;
    if (nx !== ny) return nx ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
  }

  const api = { fieldColumn, relText, relNs, compare };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.EtwColumns = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
