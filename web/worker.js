/* etwd web page — the viewer's data path, in a dedicated Worker (one per open viewer): it owns the
 * session's WebSocket, parses its frames, counts what the server dropped (gap records, per layer)
 * and what the page's own bounds drop, keeps the last `cap` events (the rows), applies the filters
 * (free text, the field filter of filter.js, the timeline's time range, the chosen group), keeps
 * the filtered and sorted view, and answers the page's questions: the rows of the table's visible
 * window with the counts for the status line (asked once per animation frame while something
 * changed), the timeline's bins, the group counts, the flame graph's tree, an export's text, the
 * fields seen. The page's
 * main thread holds none of the kept events (their parsing and garbage collection are here), only
 * what it draws. Messages: see web/app.js (class Viewer) and docs/architecture.md "The web page".
 * A classic worker script; stacks.js, filter.js, export.js, columns.js and events.js are loaded
 * by it. */
'use strict';
importScripts('/stacks.js', '/filter.js', '/export.js', '/columns.js', '/events.js');
const E = EtwEvents;

const W = {
  id: 0, url: '', ws: null, closed: false, retry: 0, retryTimer: 0,
  rows: [],        // kept rows, oldest first: {n, ev, gap, text, t, gk, gm, lk, lm} (caches: text,
                   // time in ms, group key and its mode, lane key and its mode)
  view: null,      // the rows passing every filter (null: all rows, in arrival order)
  n: 0, cap: 200000, paused: false, held: [], heldDropped: 0,
  received: 0, gaps: 0, gapDropped: 0, older: 0, discarded: 0, lastSeq: 0, t0: null,
  hosts: new Set(), // the first two System.Host values seen (two: the page shows the Host column)
  preds: new Map(), // name -> fn(row) → bool: text, where, time, group
  sort: null, relBase: null,
  ticked: false,    // a 'tick' was posted and not yet answered by a 'win' request
};
const isOlder = (g) => /older than the replay window/.test(g.Reason || '');
const view = () => W.view || W.rows;

function tick() { if (!W.ticked) { W.ticked = true; postMessage({ op: 'tick' }); } }
function conn(text) { postMessage({ op: 'conn', text }); }

/* ----- the stream ----- */
function connect(resume) {
  if (W.closed) return;
  const u = new URL(W.url);
  if (resume && W.lastSeq) u.searchParams.set('from', String(W.lastSeq + 1));
  conn('connecting…');
  let ws;
  try { ws = new WebSocket(u.href); } catch (e) { conn('cannot connect: ' + e.message); return; }
  W.ws = ws;
  ws.onopen = () => { if (W.ws === ws) { conn('streaming'); W.retry = 0; } };
  ws.onmessage = (m) => { if (W.ws === ws) onFrame(m.data); };
  ws.onclose = async (c) => {
    if (W.ws !== ws) return;
    W.ws = null;
    if (W.closed) return;
    if (c.code === 1000) { conn(`stream ended${c.reason ? ': ' + c.reason : ''}`); return; }
    // an abnormal close: reconnect (from the next sequence number) only while the session runs
    let s = null;
    try { const r = await fetch(`/api/v1/sessions/${W.id}`, { credentials: 'same-origin', cache: 'no-store' }); if (r.ok) s = await r.json(); } catch { /* unknown */ }
    if (W.closed || W.ws) return;
    const live = s && (s.state === 'running' || s.state === 'pending');
    if (live && W.retry < 10) {
      W.retry++;
      conn(`stream closed (${c.code}); reconnecting…`);
      W.retryTimer = setTimeout(() => connect(true), 1000 * W.retry);
    } else conn(`stream closed${s ? ' (session ' + s.state + ')' : ''}`);
  };
}

function onFrame(text) {
  let arr;
  try { arr = E.parseEvents(text); } catch { return; }
  if (!Array.isArray(arr)) arr = [arr];
  const inc = [];
  for (const ev of arr) {
    const row = { n: 0, ev, gap: ev && ev.Gap ? ev.Gap : null, text: null, t: undefined, gk: null, gm: null, lk: null, lm: null };
    if (row.gap) {
      if (isOlder(row.gap)) W.older += Number(row.gap.Dropped || 0);
      else { W.gaps++; W.gapDropped += Number(row.gap.Dropped || 0); }
    } else if (ev && typeof ev.seq === 'number') W.lastSeq = ev.seq;
    if (!W.t0 && !row.gap && ev) W.t0 = EtwExport.timeOf(ev);
    if (W.hosts.size < 2 && !row.gap) { const hs = E.CELLS.host(ev); if (typeof hs === 'string' && hs) W.hosts.add(hs); }
    W.received++;
    inc.push(row);
  }
  if (W.paused) {
    for (const r of inc) W.held.push(r);
    if (W.held.length > W.cap) { const d = W.held.length - W.cap; W.held.splice(0, d); W.heldDropped += d; }
  } else add(inc);
  tick();
}

/* appends rows, drops the oldest beyond the cap (counted), keeps the view in step */
function add(inc) {
  if (!inc.length) return;
  for (const r of inc) r.n = W.n++;
  const rows = W.rows;
  for (let i = 0; i < inc.length; i++) rows.push(inc[i]);
  if (rows.length > W.cap) { const d = rows.length - W.cap; rows.splice(0, d); W.discarded += d; }
  const first = rows.length ? rows[0].n : W.n;
  const added = inc[0].n >= first ? inc : inc.filter((r) => r.n >= first);
  if (!W.view) return; // all rows, arrival order (a sort always has a view)
  const v = W.view;
  if (W.sort) { W.view = mergeSorted(v, added, first); return; }
  let k = 0;
  while (k < v.length && v[k].n < first) k++;
  if (k) v.splice(0, k);
  for (const r of added) if (match(r)) v.push(r);
}

/* ----- filters ----- */
function match(r) {
  for (const p of W.preds.values()) if (!p(r)) return false;
  return true;
}
function matchExcept(name, r) {
  for (const [k, p] of W.preds) if (k !== name && !p(r)) return false;
  return true;
}
const tOf = (r) => (r.t === undefined ? (r.t = r.gap ? NaN : E.msOf(r.ev)) : r.t);
function gkOf(r, mode, by, path) {
  if (r.gm !== mode) { r.gk = E.groupKey(r.ev, by, path); r.gm = mode; }
  return r.gk;
}
/* the page sends a filter as data: text (lower-case words), where (an expression), time ([a, b]
 * ms), group ({by, path, key}); null removes it */
function predOf(name, v) {
  if (v === null || v === undefined) return null;
  if (name === 'text') {
    const words = String(v).toLowerCase().split(/\s+/).filter(Boolean);
    if (!words.length) return null;
    return (r) => { if (!r.text) r.text = EtwFilter.textOf(r.ev); for (const w of words) if (!r.text.includes(w)) return false; return true; };
  }
  if (name === 'where') {
    let fn;
    try { fn = EtwFilter.compile(String(v)); } catch { return null; } // the page shows the error
    return fn === EtwFilter.KEEP_ALL ? null : (r) => fn(r.ev);
  }
  if (name === 'time') { const [a, b] = v; return (r) => { const t = tOf(r); return t >= a && t <= b; }; }
  if (name === 'group') {
    const mode = v.by + '\u0001' + (v.path || []).join('.'), key = v.key;
    return (r) => gkOf(r, mode, v.by, v.path) === key;
  }
  return null;
}
function setPred(name, v) {
  const fn = predOf(name, v);
  if (name === 'text' && !fn) for (const r of W.rows) r.text = null; // the texts cost memory
  if (fn) W.preds.set(name, fn); else W.preds.delete(name);
  refilter();
  postMessage({ op: 'reset', name });
  tick();
}
function refilter() {
  if (!W.preds.size) W.view = W.sort ? W.rows.slice().sort(sortCmp()) : null;
  else {
    const out = [];
    for (const r of W.rows) if (match(r)) out.push(r);
    W.view = W.sort ? out.sort(sortCmp()) : out;
  }
}

/* ----- sort ----- */
function sortCmp() {
  const get = E.sortGetter(W.sort.id, W.relBase), d = W.sort.dir;
  return (a, b) => (a.gap || b.gap ? (a.gap ? 1 : 0) - (b.gap ? 1 : 0) : d * EtwColumns.compare(get(a.ev), get(b.ev))) || a.n - b.n;
}
function mergeSorted(v, inc, first) {
  if (v.length && v.some((r) => r.n < first)) v = v.filter((r) => r.n >= first);
  const cmp = sortCmp();
  const add = inc.filter((r) => match(r)).sort(cmp);
  if (!add.length) return v;
  const out = new Array(v.length + add.length);
  let i = 0, j = 0, k = 0;
  while (i < v.length && j < add.length) out[k++] = cmp(v[i], add[j]) <= 0 ? v[i++] : add[j++];
  while (i < v.length) out[k++] = v[i++];
  while (j < add.length) out[k++] = add[j++];
  return out;
}

/* index of row n in the view (-1: not there) */
function indexOfN(n) {
  const v = view();
  if (n < 0) return -1;
  if (!W.sort) { // arrival order: binary search
    let lo = 0, hi = v.length - 1;
    while (lo <= hi) { const m = (lo + hi) >> 1; if (v[m].n === n) return m; if (v[m].n < n) lo = m + 1; else hi = m - 1; }
    return -1;
  }
  for (let i = 0; i < v.length; i++) if (v[i].n === n) return i;
  return -1;
}

/* ----- answers ----- */
const out = (r) => ({ n: r.n, ev: r.ev, gap: r.gap });
function status() {
  return { kept: W.rows.length, shown: view().length, filtered: W.preds.size > 0, received: W.received, gaps: W.gaps,
    gapDropped: W.gapDropped, older: W.older, discarded: W.discarded, held: W.held.length, heldDropped: W.heldDropped,
    lastSeq: W.lastSeq, t0: W.t0, n: W.n, hosts: W.hosts.size };
}
function win(m) {
  W.ticked = false;
  const v = view(), total = v.length;
  const first = m.tail ? Math.max(0, total - m.count) : Math.max(0, Math.min(m.first, total));
  const rows = v.slice(first, first + m.count).map(out);
  postMessage({ op: 'win', id: m.id, first, total, rows, selIdx: indexOfN(m.sel), st: status() });
}
/* the timeline: all kept rows, binned into W pixel columns per lane
 * (the busiest first) over the window `win` (null: the full span) */
function timeline(m) {
  const rows = W.rows, by = m.by, L = E.LANE[by];
  let lo = Infinity, hi = -Infinity;
  for (const r of rows) { const t = tOf(r); if (t < lo) lo = t; if (t > hi) hi = t; }
  if (!(hi >= lo)) { lo = 0; hi = 1; }
  if (hi - lo < 0.001) { lo -= 0.5; hi += 0.5; }
  const pad = (hi - lo) * 0.01, full = [lo - pad, hi + pad];
  const wn = m.win || full, [a, b] = wn, Wd = m.W, scale = Wd / (b - a);
  const perKey = new Map();
  let other = null, shown = 0;
  for (const r of rows) {
    const t = tOf(r);
    if (!(t >= a && t <= b)) continue;
    if (r.lm !== by) { r.lk = L(r.ev); r.lm = by; }
    let lane = perKey.get(r.lk);
    if (!lane) {
      if (perKey.size < 256) perKey.set(r.lk, (lane = { k: r.lk, n: 0, bins: new Uint32Array(Wd) }));
      else lane = other || (other = { k: '(other)', n: 0, bins: new Uint32Array(Wd) });
    }
    lane.n++;
    lane.bins[Math.min(Wd - 1, ((t - a) * scale) | 0)]++;
    shown++;
  }
  let lanes = [...perKey.values()].sort((x, y) => y.n - x.n || (x.k < y.k ? -1 : 1));
  if (lanes.length > m.max || other) { // the busiest max - 1 keys, then "(other)"
    const rest = lanes.slice(m.max - 1);
    if (other) rest.push(other);
    lanes = lanes.slice(0, m.max - 1);
    const o = { k: '(other)', n: 0, bins: new Uint32Array(Wd), many: rest.length };
    for (const l of rest) { o.n += l.n; for (let x = 0; x < Wd; x++) o.bins[x] += l.bins[x]; }
    lanes.push(o);
  }
  postMessage({ op: 'reply', id: m.id, res: { lanes, shown, win: wn, full, W: Wd, by } }, lanes.map((l) => l.bins.buffer));
}
/* group-by counts over the rows passing every filter but the group's own */
function group(m) {
  const counts = new Map(), mode = m.by + '\u0001' + (m.path || []).join('.');
  let total = 0;
  for (const r of W.rows) {
    const k = gkOf(r, mode, m.by, m.path);
    if (k === null || !matchExcept('group', r)) continue;
    counts.set(k, (counts.get(k) || 0) + 1);
    total++;
  }
  return { counts: [...counts], total };
}
/* the flame graph (web/flame.js): the tree of the stacks of the rows passing every filter, in
 * arrival order, bounded at FLAME_MAX frames (a stack that would add more is counted in `dropped`,
 * not added). Sent flat, in pre-order: the frame's name (web/stacks.js names, = the folded
 * export's), its parent's index (-1: the root "all"), the events through it and ending in it;
 * `shown`: the filtered rows that are events (with a stack or not). */
const FLAME_MAX = 200000;
function flame() {
  const node = (name) => ({ name, n: 0, self: 0, kids: new Map() });
  const root = node('all'), filtered = W.preds.size > 0;
  let nodes = 0, dropped = 0, shown = 0;
  for (const r of W.rows) {
    if (r.gap || (filtered && !match(r))) continue;
    shown++;
    const names = EtwStacks.names(r.ev);
    if (!names) continue;
    let nd = root, d = 0;
    while (d < names.length && nd.kids.has(names[d])) nd = nd.kids.get(names[d++]);
    if (nodes + names.length - d > FLAME_MAX) { dropped++; continue; }
    nd = root;
    nd.n++;
    for (const nm of names) {
      let k = nd.kids.get(nm);
      if (!k) { nd.kids.set(nm, (k = node(nm))); nodes++; }
      k.n++;
      nd = k;
    }
    nd.self++;
  }
  const N = nodes + 1, name = new Array(N), up = new Int32Array(N), n = new Float64Array(N), self = new Float64Array(N);
  const todo = [[root, -1]];
  let i = 0;
  while (todo.length) {
    const [nd, u] = todo.pop();
    name[i] = nd.name; up[i] = u; n[i] = nd.n; self[i] = nd.self;
    for (const k of nd.kids.values()) todo.push([k, i]);
    i++;
  }
  return { res: { name, up, n, self, nodes, dropped, shown }, transfer: [up.buffer, n.buffer, self.buffer] };
}
function exportText(m) {
  const list = (m.scope === 'kept' ? W.rows : view()).map((r) => r.ev);
  if (m.kind === 'folded') { // = etwcore/src/folded.c (`etwd convert --format folded`)
    return { text: EtwStacks.foldedText(EtwStacks.fold(list)), n: list.filter((e) => EtwStacks.of(e)).length };
  }
  const n = list.filter((e) => e && !e.Gap).length;
  if (m.kind === 'ndjson') return { text: EtwExport.ndjson(list), n };
  if (m.kind === 'csv') {
    const cols = m.cols.map((c) => ({ label: c.label, get: c.id === 'rel' ? (e) => EtwColumns.relText(e, m.relBase) : E.sortGetter(c.id, m.relBase) }));
    return { text: EtwExport.csv(list, cols, E.valText), n };
  }
  return { text: EtwExport.chromeText(list, m.src), n };
}
function fields() {
  const set = new Set(), rows = W.rows;
  for (let i = Math.max(0, rows.length - 2000); i < rows.length; i++) if (!rows[i].gap) EtwFilter.fieldsOf(rows[i].ev, set);
  return [...set];
}

onmessage = (e) => {
  const m = e.data;
  const reply = (res) => postMessage({ op: 'reply', id: m.id, res });
  switch (m.op) {
    case 'open': W.id = m.session; W.url = m.url; W.cap = m.cap; connect(false); break;
    case 'close': W.closed = true; clearTimeout(W.retryTimer); if (W.ws) try { W.ws.close(); } catch { /* closing */ } W.ws = null; break;
    case 'inject': onFrame(m.text); break; // tests: a frame as if it came from the socket
    case 'pause':
      W.paused = m.on;
      if (!m.on) { const h = W.held; W.held = []; W.heldDropped = 0; add(h); }
      tick(); break;
    case 'cap':
      W.cap = m.cap;
      if (W.rows.length > m.cap) { const d = W.rows.length - m.cap; W.rows.splice(0, d); W.discarded += d; refilter(); postMessage({ op: 'reset', name: null }); }
      tick(); break;
    case 'clear':
      W.rows = []; W.held = []; W.heldDropped = 0; W.discarded = 0; W.older = 0;
      refilter(); postMessage({ op: 'reset', name: null }); tick(); break;
    case 'pred': setPred(m.name, m.value); break;
    case 'sort':
      W.sort = m.sort; W.relBase = m.relBase;
      if (W.sort) W.view = (W.view || W.rows.slice()).sort(sortCmp());
      else if (W.view) { if (W.preds.size) W.view.sort((a, b) => a.n - b.n); else W.view = null; }
      tick(); break;
    case 'win': win(m); break;
    case 'timeline': timeline(m); break;
    case 'group': reply(group(m)); break;
    case 'flame': { const f = flame(); postMessage({ op: 'reply', id: m.id, res: f.res }, f.transfer); break; }
    case 'export': reply(exportText(m)); break;
    case 'fields': reply(fields()); break;
    case 'dump': { // tests, selection by index
      const src = m.what === 'kept' ? W.rows : view();
      reply((m.first !== undefined ? src.slice(m.first, m.first + m.count) : src).map(out)); break;
    }
    case 'ping': reply(status()); break;
  }
};
