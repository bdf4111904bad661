/* etwd web page — plain JS, no framework, no build step, nothing fetched from elsewhere.
 *
 * Parts: api() (fetch + problem+json errors), login/role, the sessions list (polled every second;
 * events/s and loss/s come from successive stats), the session viewer (a virtualized event table
 * whose rows come from the viewer's Worker, web/worker.js, which owns the WebSocket, the capped
 * row store and the filters; chart),
 * the new-session form (provider picker, capability-dependent filters, server validation messages
 * next to the field) and files (upload, replay, download). */
'use strict';

const $ = (id) => document.getElementById(id);
const NF = new Intl.NumberFormat('en-US');
const fmtN = (n) => NF.format(n);

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k in e && typeof v !== 'string') e[k] = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

/* ---------- API ---------- */

class ApiError extends Error {
  constructor(status, p) {
    super((p && (p.detail || p.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = p || {};
    this.field = p && p.field;
  }
}

async function api(method, path, body, opt = {}) {
  const headers = Object.assign({ Accept: 'application/json' }, opt.headers || {});
  let payload;
  if (body instanceof Blob) {
    payload = body;
    headers['Content-Type'] = 'application/octet-stream';
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload, credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, { title: 'Network error', detail: 'the server cannot be reached: ' + e.message });
  }
  const ct = res.headers.get('Content-Type') || '';
  let data = null;
  if (res.status !== 204 && /json/.test(ct)) {
    try { data = await res.json(); } catch { data = null; }
  } else if (res.status !== 204) {
    try { data = await res.text(); } catch { data = null; }
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data && typeof data === 'object' ? data : { detail: String(data || res.statusText) });
    if (res.status === 401 && !opt.noAuthRedirect) onLoggedOut('Your session has ended; log in again.');
    throw err;
  }
  return data;
}

function say(msg, isError) {
  const g = $('global-msg');
  g.textContent = msg || '';
  g.classList.toggle('error', !!isError);
}

/* ---------- JSON with exact 64-bit integers (web/events.js) ---------- */

const { jsonText, valText, isBig } = EtwEvents;

/* ---------- state ---------- */

const S = {
  me: null,            // whoami
  version: null,       // /version
  caps: {},            // backend name -> Set of capabilities
  sessions: new Map(), // id -> latest session JSON
  hist: new Map(),     // id -> [{t, rate, k, h, s}] per poll
  prev: new Map(),     // id -> {t, events, k, h, s}
  rows: new Map(),     // id -> <tr>
  viewer: null,
  pollTimer: 0,
  tab: 'sessions',
};
const HIST_MAX = 180;
const isAdmin = () => S.me && S.me.role === 'admin';

/* ---------- login ---------- */

async function boot() {
  wireStatic();
  try {
    const me = await api('GET', '/api/v1/whoami', undefined, { noAuthRedirect: true });
    await onLoggedIn(me);
  } catch {
    showLogin();
  }
}

function showLogin(msg) {
  $('app-view').hidden = true;
  $('login-view').hidden = false;
  $('who').hidden = true;
  $('logout').hidden = true;
  $('login-error').textContent = msg || '';
  $('token').focus();
}

async function onLoggedIn(me) {
  S.me = me;
  document.body.classList.toggle('is-admin', me.role === 'admin');
  $('who').textContent = `${me.role} (${me.token_id})`;
  $('who').hidden = false;
  $('logout').hidden = false;
  $('login-view').hidden = true;
  $('app-view').hidden = false;
  try {
    S.version = await api('GET', '/api/v1/version');
    for (const b of S.version.backends || []) S.caps[b.name] = new Set(b.capabilities || []);
    $('server-info').textContent = `${S.version.version} · ${S.version.os.sysname} ${S.version.os.release}`;
  } catch (e) { say('Could not read /api/v1/version: ' + e.message, true); }
  fillBackends();
  showTab('sessions');
  await poll();
  applyState(EtwState.parse(location.hash));
}

function onLoggedOut(msg) {
  if (!S.me) return;
  S.me = null;
  clearTimeout(S.pollTimer);
  closeViewer();
  document.body.classList.remove('is-admin');
  showLogin(msg);
}

async function login(ev) {
  ev.preventDefault();
  const tok = $('token').value.trim();
  const err = $('login-error');
  err.textContent = '';
  if (!tok) { err.textContent = 'Enter a token.'; return; }
  try {
    const me = await api('POST', '/api/v1/login', undefined, { headers: { Authorization: 'Bearer ' + tok }, noAuthRedirect: true });
    $('token').value = '';
    await onLoggedIn(me);
    document.querySelector('.tab[aria-current="page"]').focus();
  } catch (e) {
    err.textContent = e.status === 401 || e.status === 403 ? 'That token is not valid.' : e.message;
    $('token').setAttribute('aria-invalid', 'true');
    $('token').focus();
  }
}

async function logout() {
  try { await api('POST', '/api/v1/logout', undefined, { noAuthRedirect: true }); } catch { /* gone anyway */ }
  onLoggedOut('Logged out.');
}

/* ---------- tabs ---------- */

function showTab(name) {
  S.tab = name;
  for (const b of document.querySelectorAll('.tab')) {
    const on = b.dataset.tab === name;
    if (on) b.setAttribute('aria-current', 'page'); else b.removeAttribute('aria-current');
  }
  $('tab-sessions').hidden = name !== 'sessions';
  $('tab-new').hidden = name !== 'new';
  $('tab-files').hidden = name !== 'files';
  if (name === 'files') loadFiles();
  if (name === 'new' && !$('prov-results').childElementCount) searchProviders();
  if (name === 'sessions' && S.viewer) S.viewer.resize();
}

/* ---------- sessions list ---------- */

async function poll() {
  clearTimeout(S.pollTimer);
  if (!S.me) return;
  try {
    const list = await api('GET', '/api/v1/sessions');
    updateSessions(list);
  } catch (e) {
    if (e.status !== 401) say('Could not list sessions: ' + e.message, true);
  }
  if (S.me) S.pollTimer = setTimeout(poll, 1000);
}

const lossOf = (s) => (s.stats && s.stats.loss) || { kernel: 0, hub: 0, subscribers: 0 };

function updateSessions(list) {
  const now = performance.now();
  const seen = new Set();
  for (const s of list) {
    seen.add(s.id);
    S.sessions.set(s.id, s);
    const l = lossOf(s), ev = (s.stats && s.stats.events) || 0;
    const p = S.prev.get(s.id);
    let hist = S.hist.get(s.id);
    if (!hist) S.hist.set(s.id, (hist = []));
    if (p) {
      const dt = Math.max(0.05, (now - p.t) / 1000);
      hist.push({
        t: now, rate: Math.max(0, (ev - p.events) / dt),
        k: Math.max(0, (l.kernel - p.k) / dt), h: Math.max(0, (l.hub - p.h) / dt), s: Math.max(0, (l.subscribers - p.s) / dt),
      });
      if (hist.length > HIST_MAX) hist.splice(0, hist.length - HIST_MAX);
    }
    S.prev.set(s.id, { t: now, events: ev, k: l.kernel, h: l.hub, s: l.subscribers });
    renderSessionRow(s);
  }
  for (const [id, tr] of S.rows) {
    if (!seen.has(id)) {
      tr.remove();
      S.rows.delete(id); S.sessions.delete(id); S.hist.delete(id); S.prev.delete(id);
      if (S.viewer && S.viewer.id === id) { say(`Session ${id} is gone.`); closeViewer(); syncUrl(false); }
    }
  }
  $('sessions-empty').hidden = S.rows.size > 0;
  if (S.viewer) S.viewer.onSession(S.sessions.get(S.viewer.id));
}

function rateText(id) {
  const hist = S.hist.get(id);
  return hist && hist.length ? fmtN(Math.round(hist[hist.length - 1].rate)) : '–';
}

function renderSessionRow(s) {
  let tr = S.rows.get(s.id);
  if (!tr) {
    const c = {};
    const LABELS = { id: 'ID', name: 'Name', backend: 'Backend', state: 'State', events: 'Events', rate: 'Events/s', loss: 'Loss kernel / hub / subs', subs: 'Subscribers', spark: 'Rate', actcell: 'Actions' };
    const cell = (k, cls) => (c[k] = h('td', { class: cls, 'data-label': LABELS[k] }));
    tr = h('tr', { 'data-id': String(s.id) },
      cell('id', 'num'), cell('name'), cell('backend'), cell('state'), cell('events', 'num'), cell('rate', 'num'),
      cell('loss', 'num'), cell('subs', 'num'), cell('spark'), cell('actcell'));
    c.actcell.append((c.actions = h('div', { class: 'acts' })));
    c.state.append((c.badge = h('span', { class: 'badge' })));
    c.spark.append((c.canvas = h('canvas', { width: 90, height: 22, role: 'img', 'aria-label': 'events per second' })));
    const label = () => `session ${s.id}${S.sessions.get(s.id).name ? ' ' + S.sessions.get(s.id).name : ''}`;
    c.open = h('button', { type: 'button', class: 'open', text: 'Open', onclick: () => openViewer(s.id) });
    c.stop = h('button', { type: 'button', class: 'stop admin-only danger', text: 'Stop', onclick: () => stopSession(s.id) });
    c.del = h('button', { type: 'button', class: 'delete admin-only danger', text: 'Delete', onclick: () => deleteSession(s.id) });
    c.rec = h('a', { class: 'download', href: `/api/v1/sessions/${s.id}/file`, download: '', text: 'Recording' });
    c.actions.append(c.open, c.stop, c.del, c.rec);
    tr._c = c;
    tr._label = label;
    S.rows.set(s.id, tr);
    // keep id order
    const body = $('sessions-body');
    let before = null;
    for (const r of body.children) if (Number(r.dataset.id) > s.id) { before = r; break; }
    body.insertBefore(tr, before);
  }
  const c = tr._c, l = lossOf(s), st = s.stats || {};
  c.id.textContent = s.id;
  c.name.textContent = s.name || '';
  c.backend.textContent = s.backend;
  c.badge.textContent = s.state;
  c.badge.className = 'badge ' + s.state;
  c.badge.title = s.message || (s.stop_reason ? 'stop reason: ' + s.stop_reason : '');
  c.events.textContent = fmtN(st.events || 0);
  c.rate.textContent = rateText(s.id);
  c.loss.textContent = `${fmtN(l.kernel)} / ${fmtN(l.hub)} / ${fmtN(l.subscribers)}`;
  c.subs.textContent = fmtN(st.subscribers || 0);
  const live = s.state === 'running' || s.state === 'pending';
  c.stop.hidden = !live;
  c.rec.hidden = !s.recording;
  const lbl = tr._label();
  c.open.setAttribute('aria-label', 'Open ' + lbl);
  c.stop.setAttribute('aria-label', 'Stop ' + lbl);
  c.del.setAttribute('aria-label', 'Delete ' + lbl);
  c.rec.setAttribute('aria-label', 'Download the recording of ' + lbl);
  tr.classList.toggle('open', !!(S.viewer && S.viewer.id === s.id));
  drawChart(c.canvas, S.hist.get(s.id) || [], true);
}

async function stopSession(id) {
  try {
    const s = await api('POST', `/api/v1/sessions/${id}/stop`);
    say(`Session ${id} stopped.`);
    updateSessions([...S.sessions.values()].map((x) => (x.id === id ? s : x)));
  } catch (e) { say(`Stop failed: ${e.message}`, true); }
}

async function deleteSession(id) {
  if (!confirm(`Delete session ${id}? Its recording, if any, stays under Files.`)) return;
  try {
    await api('DELETE', `/api/v1/sessions/${id}`);
    say(`Session ${id} deleted.`);
    if (S.viewer && S.viewer.id === id) { closeViewer(); syncUrl(false); }
    poll();
  } catch (e) { say(`Delete failed: ${e.message}`, true); }
}

/* ---------- chart (canvas, no library) ---------- */

const SERIES = [['rate', '#0b5cad', 2], ['k', '#d62728', 1.5], ['h', '#ff7f0e', 1.5], ['s', '#9467bd', 1.5]];

function drawChart(cv, hist, mini) {
  const dpr = window.devicePixelRatio || 1;
  const cssW = cv.clientWidth || cv.width, cssH = cv.clientHeight || cv.height;
  if (!cssW || !cssH) return;
  const W = Math.round(cssW * dpr), H = Math.round(cssH * dpr);
  if (cv.width !== W || cv.height !== H) { cv.width = W; cv.height = H; }
  const g = cv.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, cssW, cssH);
  const padL = mini ? 1 : 56, padR = 6, padT = mini ? 2 : 8, padB = mini ? 2 : 18;
  const w = cssW - padL - padR, hh = cssH - padT - padB;
  const n = mini ? 45 : HIST_MAX;
  const pts = hist.slice(-n);
  let max = mini ? 1 : 4;
  for (const p of pts) max = Math.max(max, p.rate, p.k, p.h, p.s);
  max = niceMax(max);
  if (!mini) {
    const css = getComputedStyle(document.documentElement); // the theme's colours (dark mode)
    g.strokeStyle = css.getPropertyValue('--cell-line').trim() || '#e3e7ec'; g.fillStyle = css.getPropertyValue('--muted').trim() || '#5b6470'; g.lineWidth = 1;
    g.font = '11px system-ui, sans-serif'; g.textAlign = 'right'; g.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const y = padT + hh - (hh * i) / 4;
      g.beginPath(); g.moveTo(padL, y + 0.5); g.lineTo(padL + w, y + 0.5); g.stroke();
      g.fillText(shortN((max * i) / 4), padL - 4, y);
    }
    g.textAlign = 'left'; g.textBaseline = 'top';
    g.fillText(`last ${n} s`, padL, padT + hh + 3);
    g.textAlign = 'right';
    g.fillText('now', padL + w, padT + hh + 3);
  }
  const x = (i) => padL + (w * (i + (n - pts.length))) / (n - 1);
  for (const [key, color, lw] of mini ? SERIES.slice(0, 1) : SERIES) {
    if (key !== 'rate' && !pts.some((p) => p[key] > 0)) continue;
    g.strokeStyle = color; g.lineWidth = lw; g.beginPath();
    pts.forEach((p, i) => { const y = padT + hh - (hh * p[key]) / max; if (i) g.lineTo(x(i), y); else g.moveTo(x(i), y); });
    g.stroke();
  }
  if (!mini) {
    const last = pts[pts.length - 1];
    cv.setAttribute('aria-label', last
      ? `Events per second: ${Math.round(last.rate)}; loss per second kernel ${Math.round(last.k)}, hub ${Math.round(last.h)}, subscribers ${Math.round(last.s)}`
      : 'Events per second and loss: no data yet');
  }
}
function niceMax(v) {
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * e) return m * e;
  return 10 * e;
}
function shortN(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(v % 1e6 ? 1 : 0) + 'M';
  if (v >= 1e3) return (v / 1e3).toFixed(v % 1e3 ? 1 : 0) + 'k';
  return String(Math.round(v * 10) / 10);
}

/* ---------- the event table ---------- */

const CELL = EtwEvents.CELLS; // cell values by column id (web/events.js: the worker sorts by the same)
const COLS = [
  { id: 'seq', label: 'Seq', w: '5.5em', on: true, get: CELL.seq },
  { id: 'time', label: 'Time (UTC)', w: '11.5em', on: true, get: CELL.time },
  { id: 'rel', label: 'Δt (s)', w: '8em', on: false, get: (e) => EtwColumns.relText(e, REL.base) },
  { id: 'provider', label: 'Provider', w: '9em', on: true, get: CELL.provider },
  { id: 'event', label: 'Event', w: '12em', on: true, get: CELL.event },
  { id: 'id', label: 'ID', w: '3.5em', on: true, get: CELL.id },
  { id: 'level', label: 'Level', w: '3.5em', on: false, get: CELL.level },
  { id: 'opcode', label: 'Opcode', w: '4em', on: false, get: CELL.opcode },
  { id: 'keywords', label: 'Keywords', w: '11em', on: false, get: CELL.keywords },
  // off by default (one machine's events all show its name), shown by the viewer once its events
  // come from a second host (Viewer.onWin)
  { id: 'host', label: 'Host', w: '9em', on: false, get: CELL.host },
  { id: 'pid', label: 'PID', w: '5em', on: true, get: CELL.pid },
  { id: 'tid', label: 'TID', w: '5em', on: true, get: CELL.tid },
  { id: 'cpu', label: 'CPU', w: '3.5em', on: false, get: CELL.cpu },
  { id: 'data', label: 'Data', w: 'minmax(16em, 1fr)', on: true, get: CELL.data },
];
const COLS_DEFAULT = COLS.filter((c) => c.on).map((c) => c.id).join(',');
const REL = { mode: 'start', base: null }; // the Δt column counts from base ([s, ns]): first event or the selected one
let WIDTHS = {};                             // column id -> width set by dragging its header edge
try { WIDTHS = JSON.parse(localStorage.getItem('etwd.widths') || '{}') || {}; } catch { /* defaults */ }
const isOlder = (g) => /older than the replay window/.test(g.Reason || '');
function gapText(g) {
  if (isOlder(g)) return `${fmtN(Number(g.Dropped || 0))} older events not loaded (${g.Layer}: ${g.Reason})`;
  return `${fmtN(Number(g.Dropped || 0))} events dropped` + (g.Layer ? ` (${g.Layer}${g.Reason ? ': ' + g.Reason : ''})` : '');
}
/* visible columns by id (field columns "f:<path>" are created); from the URL or localStorage */
function loadCols(ids) {
  let saved = ids;
  if (!saved) try { saved = JSON.parse(localStorage.getItem('etwd.columns') || 'null'); } catch { /* defaults */ }
  if (!Array.isArray(saved)) return;
  for (const id of saved) if (id.startsWith('f:')) addFieldCol(id.slice(2));
  for (const c of COLS) c.on = saved.includes(c.id);
  if (!COLS.some((c) => c.on)) COLS.find((c) => c.id === 'data').on = true;
}
const ROW_H = 22;
const TICK_MS = 100; // new rows are drawn at most this often (Viewer.ask)

/* Views of the kept events in other files (timeline.js, group.js, …) register here and are told
 * when a viewer opens or closes and when its rows change. The kept events are in the viewer's
 * Worker (web/worker.js): a view asks it for what it draws and gets an answer later —
 *   viewer.call({op: 'timeline' | 'group', …})  bins / counts computed over the kept rows
 *   viewer.dump('kept' | 'filtered')  the rows themselves, [{n, ev, gap}] (costly: tests)
 *   viewer.setPredicate(name, data | null)  add/replace/remove a named filter, as data the worker
 *                      understands (worker.js predOf); the table shows the rows passing all
 *   change(viewer, c): c = {added, removed} (counts): rows arrived / left by the cap;
 *   or {reset, name}: the filtered view was rebuilt (predicate `name` changed, or none: clear/cap).
 *   All on the page's main thread. */
const EventViews = []; // {open(viewer), close(), change(viewer, c)}
/* a view's toggle button in the viewer's #views bar and its panel below it */
function installView(v, label, id) {
  const panel = v.build();
  const b = h('button', { type: 'button', id, text: label, 'aria-pressed': 'false', 'aria-controls': panel.id });
  b.addEventListener('click', () => { const on = b.getAttribute('aria-pressed') !== 'true'; b.setAttribute('aria-pressed', String(on)); v.show(on); });
  $('views').append(b);
  $('views-panels').append(panel);
}

/* The viewer of one session. Its data path runs in a Worker (web/worker.js): the WebSocket, the
 * parsing, the kept rows, the filters, the sort and the counts are there. This class (main thread)
 * sends it the user's choices as data and, once per animation frame while something changed, asks
 * for the rows of the table's visible window and the counts of the status line; it keeps only
 * those (this.win) and the selected row. */
class Viewer {
  constructor(id, params) {
    this.id = id;
    this.params = params || { from: '1' };
    this.filter = '';
    this.where = '';
    this.preds = {};        // name -> the filter's data as sent to the worker (see setPredicate)
    this.sort = null;       // {id, dir: 1 | -1} or null (arrival order)
    this.st = { kept: 0, shown: 0, filtered: false, received: 0, gaps: 0, gapDropped: 0, older: 0, discarded: 0, held: 0, heldDropped: 0, lastSeq: 0, t0: null, n: 0, hosts: 0 };
    this.hostShown = false; // the Host column was shown for this viewer's second host (once: the user may hide it again)
    this.total = 0;         // rows in the filtered view
    this.win = { first: 0, rows: [] }; // the rows of the view around the visible ones
    this.selIdx = -1;       // the selected row's index in the view (-1: none or not in it)
    this.cap = Number($('cap').value);
    this.paused = false;
    this.sel = null;        // selected row {n, ev, gap}
    this.pool = [];
    this.raf = 0;
    this.asking = false;    // a 'win' request is out
    this.lastWin = 0;       // when the last one was answered
    this.tickTimer = 0;
    this.again = false;     // ask again when it is answered
    this.closed = false;
    this.calls = new Map(); // id -> resolve of a request
    this.callId = 0;
    this.rateWin = [];      // [time, received] for the client-side rate
    this.progScroll = false;
    $('grid').scrollTop = 0;
    const u = new URL(`/api/v1/sessions/${id}/events`, location.href);
    u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    for (const [k, v] of Object.entries(this.params)) if (v) u.searchParams.set(k, v);
    this.worker = new Worker('/worker.js');
    this.worker.onmessage = (e) => this.onMessage(e.data);
    this.worker.onerror = (e) => this.setConn('the page\'s worker failed: ' + (e.message || 'error'));
    this.setConn('connecting…');
    this.post({ op: 'open', session: id, url: u.href, cap: this.cap });
    this.setCols();
    for (const v of EventViews) v.open(this);
  }

  /* counts mirrored from the worker (bench/page_busy.mjs and the tests read them) */
  get received() { return this.st.received; }
  get gaps() { return this.st.gaps; }
  get gapDropped() { return this.st.gapDropped; }
  get discarded() { return this.st.discarded; }
  get older() { return this.st.older; }
  get lastSeq() { return this.st.lastSeq; }
  get t0() { return this.st.t0; }

  post(m) { if (!this.closed) this.worker.postMessage(m); }
  /* a request with an answer: {op: 'group' | 'timeline' | 'export' | 'fields' | 'dump' | 'ping', …} */
  call(m) {
    if (this.closed) return new Promise(() => {});
    const id = ++this.callId;
    return new Promise((ok) => { this.calls.set(id, ok); this.post(Object.assign({ id }, m)); });
  }
  /* the kept rows or the filtered view, [{n, ev, gap}] (tests, other views) */
  dump(what) { return this.call({ op: 'dump', what }); }
  /* resolves when the worker has handled every message sent before and the page drew it */
  async settled() {
    await this.call({ op: 'ping' });
    this.ask();
    while (this.raf || this.asking || this.again) await new Promise((ok) => setTimeout(ok, 10));
    await new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
  }
  notify(c) { for (const v of EventViews) v.change(this, c); }

  onMessage(m) {
    if (this.closed) return;
    switch (m.op) {
      case 'tick': this.ask(true); break;
      case 'conn': this.setConn(m.text); break;
      case 'reset': this.notify({ reset: true, name: m.name }); break;
      case 'reply': { const ok = this.calls.get(m.id); this.calls.delete(m.id); if (ok) ok(m.res); break; }
      case 'win': this.onWin(m); break;
    }
  }
  /* ask for the visible window at the next animation frame (one request at a time); new rows
   * (a tick) are shown at most every TICK_MS — no one reads 50k rows a second, and each redraw of
   * the table costs the main thread style, layout and paint — the user's own moves at once */
  ask(fromTick) {
    if (this.asking) { this.again = true; return; }
    if (this.raf || this.closed) return;
    const wait = fromTick ? TICK_MS - (performance.now() - this.lastWin) : 0;
    if (wait > 0) { if (!this.tickTimer) this.tickTimer = setTimeout(() => { this.tickTimer = 0; this.ask(false); }, wait); return; }
    this.raf = requestAnimationFrame(() => {
      this.raf = 0;
      const grid = $('grid');
      const count = Math.ceil(grid.clientHeight / ROW_H) + 1;
      const tail = $('autoscroll').checked && !this.paused;
      const first = Math.max(0, Math.floor(grid.scrollTop / ROW_H) - count);
      this.asking = true;
      this.again = false;
      this.post({ op: 'win', first, count: tail ? count : 3 * count, tail, sel: this.sel ? this.sel.n : -1 });
    });
  }
  onWin(m) {
    this.asking = false;
    this.lastWin = performance.now();
    const prev = this.st;
    this.st = m.st;
    this.total = m.total;
    this.win = { first: m.first, rows: m.rows };
    this.selIdx = m.selIdx;
    if (this.sel && m.selIdx < 0 && this.st.kept && this.sel.n < this.st.n - this.st.kept) this.sel = null; // dropped by the cap
    // Δt counts from the first event until a row is selected (also in "selected event" mode: after a reload)
    if (this.st.t0 && !prev.t0 && (REL.mode === 'start' || !this.sel)) REL.base = this.st.t0;
    if (this.st.hosts > 1 && !this.hostShown) this.showHosts();
    if (m.st.n !== prev.n || m.st.kept !== prev.kept) this.notify({ added: m.st.n - prev.n, removed: Math.max(0, prev.kept + m.st.n - prev.n - m.st.kept) });
    this.render(true);
    if (this.again) { this.again = false; this.ask(true); }
  }
  setConn(t) { $('viewer-conn').textContent = t; }
  /* events of several machines (a NATS fleet session): a table without the Host column would mix
   * them up, so it is shown (in the chooser and the URL too; not saved as the user's choice) */
  showHosts() {
    this.hostShown = true;
    const c = COLS.find((x) => x.id === 'host');
    if (c.on) return;
    c.on = true;
    buildColumnChooser();
    this.setCols();
    syncUrl(false);
  }

  /* tests: a frame as if the socket had sent it */
  onFrame(text) { this.post({ op: 'inject', text }); }

  setFilter(f) {
    this.filter = f.trim().toLowerCase();
    this.setPredicate('text', this.filter || null);
  }
  /* the field filter's expression (web/filter.js; the worker compiles it too) */
  setWhere(expr) { this.where = (expr || '').trim(); this.setPredicate('where', this.where || null); }
  /* a named filter as data (the worker applies it): text (words), where (an expression), time
   * ([a, b] ms, the timeline's range), group ({by, path, key}); null removes it */
  setPredicate(name, value) {
    if (value === null || value === undefined) delete this.preds[name]; else this.preds[name] = value;
    this.post({ op: 'pred', name, value: value ?? null });
  }
  setSort(sort) {
    this.sort = sort;
    this.setCols();
    this.post({ op: 'sort', sort, relBase: REL.base });
  }
  setPaused(p) {
    this.paused = p;
    const b = $('pause');
    b.textContent = p ? 'Resume' : 'Pause';
    b.setAttribute('aria-pressed', String(p));
    this.post({ op: 'pause', on: p });
    this.render(false);
  }
  clear() {
    this.sel = null;
    this.post({ op: 'clear' });
    this.showDetail();
  }
  setCap(c) { this.cap = c; this.post({ op: 'cap', cap: c }); }

  setCols() {
    this.cols = COLS.filter((c) => c.on);
    const tpl = this.cols.map((c) => WIDTHS[c.id] || c.w).join(' ');
    $('grid').style.setProperty('--cols', tpl);
    const head = $('grid-head');
    head.textContent = '';
    this.cols.forEach((c, i) => {
      const sorted = this.sort && this.sort.id === c.id ? this.sort.dir : 0;
      const sp = h('span', { role: 'columnheader', 'aria-colindex': String(i + 1), 'data-col': c.id, title: c.title || null,
        'aria-sort': sorted > 0 ? 'ascending' : sorted < 0 ? 'descending' : 'none' },
      h('button', { type: 'button', class: 'sort', text: c.label + (sorted > 0 ? ' ▲' : sorted < 0 ? ' ▼' : ''),
        'aria-label': `Sort by ${c.label}`, onclick: () => cycleSort(c.id) }),
      h('div', { class: 'resizer', 'aria-hidden': 'true', onpointerdown: (e) => startResize(e, c, sp) }));
      head.append(sp);
    });
    for (const el of this.pool) el.remove();
    this.pool = [];
    this.render(false);
  }

  /* ----- rendering: only the visible rows exist in the DOM; rows outside the window the worker
   * sent are asked for (and drawn empty until they come) ----- */
  render(fromData) {
    const grid = $('grid');
    const total = this.total;
    $('grid-body').style.height = total * ROW_H + 'px';
    grid.setAttribute('aria-rowcount', String(total + 1));
    if (fromData && $('autoscroll').checked && !this.paused) {
      const target = Math.max(0, total * ROW_H + ROW_H - grid.clientHeight);
      if (Math.abs(grid.scrollTop - target) > 1) { this.progScroll = true; grid.scrollTop = target; }
    }
    const top = grid.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW_H));
    const count = Math.min(total - first, Math.ceil(grid.clientHeight / ROW_H) + 1);
    const w = this.win;
    if (count > 0 && (first < w.first || first + count > w.first + w.rows.length)) this.ask();
    const wrap = $('grid-rows');
    wrap.style.transform = `translateY(${first * ROW_H}px)`;
    while (this.pool.length < Math.max(0, count)) {
      const r = h('div', { class: 'grid-row', role: 'row' });
      for (let i = 0; i < this.cols.length; i++) r.append(h('span', { role: 'gridcell' }));
      r.addEventListener('click', () => { if (r._row) this.select(r._row, r._idx, false); });
      this.pool.push(r);
      wrap.append(r);
    }
    const seln = this.sel ? this.sel.n : -1;
    for (let i = 0; i < this.pool.length; i++) {
      const el = this.pool[i];
      const row = i < count ? w.rows[first + i - w.first] : undefined;
      if (!row) { el.hidden = i >= count; el._row = null; if (!el.hidden) for (const c of el.children) c.textContent = ''; continue; }
      el.hidden = false;
      el._idx = first + i;
      el.setAttribute('aria-rowindex', String(first + i + 2));
      const isSel = row.n === seln;
      if (el._row && el._row.n === row.n && el._cols === this.cols) { el.classList.toggle('sel', isSel); continue; }
      el._row = row;
      el._cols = this.cols;
      el.classList.toggle('sel', isSel);
      el.id = isSel ? 'ev-selected' : '';
      el.setAttribute('aria-selected', String(isSel));
      const cells = el.children;
      if (row.gap) {
        el.classList.add('gap');
        cells[0].textContent = gapText(row.gap);
        cells[0].title = '';
        for (let j = 1; j < cells.length; j++) { cells[j].hidden = true; cells[j].textContent = ''; }
      } else {
        el.classList.remove('gap');
        for (let j = 0; j < cells.length; j++) {
          const t = valText(this.cols[j].get(row.ev));
          cells[j].hidden = false;
          cells[j].textContent = t;
          cells[j].title = this.cols[j].id === 'data' ? t : '';
        }
      }
    }
    if (this.sel && grid.contains(document.getElementById('ev-selected'))) grid.setAttribute('aria-activedescendant', 'ev-selected');
    else grid.removeAttribute('aria-activedescendant');
    this.status();
  }

  status() {
    const st = this.st, now = performance.now();
    this.rateWin.push([now, st.received]);
    while (this.rateWin.length > 2 && now - this.rateWin[0][0] > 2000) this.rateWin.shift();
    const [t0, r0] = this.rateWin[0];
    const rate = now - t0 > 200 ? ((st.received - r0) * 1000) / (now - t0) : 0;
    const shown = !st.filtered ? `${fmtN(st.kept)} rows` : `${fmtN(this.total)} of ${fmtN(st.kept)} rows match`;
    $('ev-status').textContent = `${shown} · ${fmtN(st.received)} received · ${fmtN(Math.round(rate))}/s in this page` +
      (st.gaps ? ` · ${fmtN(st.gapDropped)} dropped for this page in ${fmtN(st.gaps)} gap${st.gaps === 1 ? '' : 's'}` : '') +
      (st.older ? ` · ${fmtN(st.older)} older events not loaded` : '');
    const on = $('older-notice');
    if (on.hidden !== !st.older) {
      on.hidden = !st.older;
      const s = S.sessions.get(this.id);
      $('older-text').textContent = `${fmtN(st.older)} older events not loaded: they are no longer in the server's replay window (--replay-kb)` +
        (s && s.recording ? '; the session\'s recording holds them.' : '.') + ' Another start:';
      if (!$('older-from').value) $('older-from').value = String(st.older + 1);
    }
    const cn = $('cap-notice');
    cn.hidden = !st.discarded;
    if (st.discarded) cn.textContent = `Only the last ${fmtN(this.cap)} rows are kept: ${fmtN(st.discarded)} older rows were discarded from this table.`;
    const pn = $('pause-notice');
    pn.hidden = !this.paused;
    if (this.paused) pn.textContent = `Paused: ${fmtN(st.held)} new events held` + (st.heldDropped ? `, ${fmtN(st.heldDropped)} dropped while paused` : '') + '. Resume to add them.';
  }

  /* select the row at index idx of the view (row: that row when known) */
  select(row, idx, scroll) {
    this.sel = row;
    this.selIdx = row ? idx : -1;
    if (REL.mode === 'sel') REL.base = row && !row.gap ? EtwExport.timeOf(row.ev) : this.t0;
    if (scroll && row && idx >= 0) {
      const grid = $('grid');
      const y = idx * ROW_H;
      if (y < grid.scrollTop) grid.scrollTop = y;
      else if (y + 2 * ROW_H > grid.scrollTop + grid.clientHeight) grid.scrollTop = y + 2 * ROW_H - grid.clientHeight;
    }
    for (const el of this.pool) el._row = null; // repaint selection
    this.render(false);
    this.showDetail();
  }
  /* select by index in the view (keys, tests): the row comes from the window, else is asked for */
  async selectAt(i, scroll = true) {
    if (i < 0 || i >= this.total) return;
    let row = this.win.rows[i - this.win.first];
    if (!row) {
      const rows = await this.call({ op: 'dump', what: 'filtered', first: i, count: 1 });
      row = rows[0];
    }
    if (row) this.select(row, i, scroll);
  }
  showDetail() {
    const r = this.sel;
    $('detail').textContent = !r ? 'Select a row (click, or arrow keys in the table).' : jsonText(r.ev);
    showStack(r && !r.gap ? r.ev : null); // web/flame.js: the frames above the JSON
  }

  key(e) {
    const n = this.total;
    if (!n) return;
    let i = this.sel ? this.selIdx : -1;
    const page = Math.max(1, Math.floor($('grid').clientHeight / ROW_H) - 1);
    switch (e.key) {
      case 'ArrowDown': i = Math.min(n - 1, i + 1); break;
      case 'ArrowUp': i = i < 0 ? n - 1 : Math.max(0, i - 1); break;
      case 'PageDown': i = Math.min(n - 1, i + page); break;
      case 'PageUp': i = Math.max(0, i - page); break;
      case 'Home': i = 0; break;
      case 'End': i = n - 1; break;
      case 'Escape': this.sel = null; this.selIdx = -1; for (const el of this.pool) el._row = null; this.render(false); this.showDetail(); return;
      default: return;
    }
    e.preventDefault();
    if (e.key !== 'End') setAutoscroll(false);
    this.selectAt(i, true);
  }

  onScroll() {
    if (this.progScroll) { this.progScroll = false; this.render(false); return; }
    const g = $('grid');
    const atBottom = g.scrollTop + g.clientHeight >= g.scrollHeight - ROW_H;
    if (!atBottom && $('autoscroll').checked) setAutoscroll(false);
    this.render(false);
  }

  resize() { this.render(false); this.chart(); }

  onSession(s) {
    if (!s) return;
    const b = $('viewer-state');
    b.textContent = s.state;
    b.className = 'badge ' + s.state;
    b.title = s.message || '';
    $('viewer-msg').textContent = s.message || '';
    $('viewer-stop').hidden = !(s.state === 'running' || s.state === 'pending');
    this.chart();
  }
  chart() {
    const hist = S.hist.get(this.id) || [];
    drawChart($('chart'), hist, false);
    const last = hist[hist.length - 1];
    $('chart-max').textContent = last ? ` now: ${fmtN(Math.round(last.rate))} events/s` : '';
  }

  close() {
    this.post({ op: 'close' });
    this.closed = true;
    this.worker.terminate();
    cancelAnimationFrame(this.raf);
    clearTimeout(this.tickTimer);
    for (const v of EventViews) v.close(this);
    for (const el of this.pool) el.remove();
    this.pool = [];
  }
}

function setAutoscroll(on) { $('autoscroll').checked = on; }

function openViewer(id, params) {
  closeViewer();
  const s = S.sessions.get(id);
  $('viewer').hidden = false;
  $('viewer-h').textContent = `Session ${id}` + (s && s.name ? ` — ${s.name}` : '');
  $('pause').textContent = 'Pause';
  $('pause').setAttribute('aria-pressed', 'false');
  setAutoscroll(true);
  $('detail').textContent = 'Select a row (click, or arrow keys in the table).';
  if (!params) $('stream-form').reset();
  S.viewer = new Viewer(id, params);
  if (!schemaFields.has(id)) loadSchemaFields(id).catch(() => {});
  try { EtwFilter.compile($('field-filter').value); S.viewer.setWhere($('field-filter').value); } catch { /* the box shows the error */ }
  S.viewer.setFilter($('text-filter').value);
  S.viewer.onSession(s);
  for (const [rid, tr] of S.rows) tr.classList.toggle('open', rid === id);
  showTab('sessions');
  $('viewer').scrollIntoView({ block: 'nearest' });
  syncUrl(true);
}

function closeViewer(userAction) {
  if (S.viewer) S.viewer.close();
  S.viewer = null;
  $('viewer').hidden = true;
  $('cap-notice').hidden = true;
  $('older-notice').hidden = true;
  $('older-from').value = '';
  if (userAction === true) syncUrl(true);
  $('pause-notice').hidden = true;
  for (const tr of S.rows.values()) tr.classList.remove('open');
}

function buildColumnChooser() {
  const fs = $('columns-fixed');
  fs.textContent = '';
  for (const c of COLS) {
    const cb = h('input', { type: 'checkbox', value: c.id });
    cb.checked = c.on;
    cb.addEventListener('change', () => {
      c.on = cb.checked;
      if (!COLS.some((x) => x.on)) { c.on = true; cb.checked = true; }
      saveCols();
    });
    fs.append(h('label', { class: 'check', title: c.title || null }, cb, ' ' + c.label));
  }
}

/* ---------- new session ---------- */

function fillBackends() {
  const sel = $('f-backend');
  sel.textContent = '';
  for (const b of (S.version && S.version.backends) || []) {
    if (!(b.capabilities || []).includes('live')) continue;
    sel.append(h('option', { value: b.name, text: b.name + (b.available === false ? ' (unavailable)' : '') }));
  }
  applyCaps();
}
const curBackend = () => $('f-backend').value;
const hasCap = (c) => !!(S.caps[curBackend()] && S.caps[curBackend()].has(c));
function applyCaps() {
  for (const el of document.querySelectorAll('#new-form [class*="cap-"]')) {
    const cls = [...el.classList].find((c) => c.startsWith('cap-'));
    el.hidden = !hasCap(cls.slice(4));
  }
}

let searchTimer = 0, searchSeq = 0;
async function searchProviders() {
  const q = $('prov-search').value.trim();
  const seq = ++searchSeq;
  const ul = $('prov-results');
  try {
    const list = await api('GET', `/api/v1/providers?backend=${encodeURIComponent(curBackend())}${q ? '&q=' + encodeURIComponent(q) : ''}`);
    if (seq !== searchSeq) return;
    ul.textContent = '';
    const chosen = new Set([...document.querySelectorAll('.prov-card')].map((c) => c._name));
    for (const p of list.slice(0, 200)) {
      const n = typeof p.events === 'number' ? p.events : Array.isArray(p.events) ? p.events.length : '';
      ul.append(h('li', null, h('button', {
        type: 'button', class: 'pick', 'data-name': p.name, disabled: chosen.has(p.name),
        text: `${p.name}${n !== '' ? ` (${n} events)` : ''}`, 'aria-label': `Add provider ${p.name}`,
        onclick: () => addProvider(p.name),
      })));
    }
    if (!list.length) ul.append(h('li', { class: 'muted', text: 'No provider matches.' }));
    else if (list.length > 200) ul.append(h('li', { class: 'muted', text: `${list.length - 200} more: refine the search.` }));
  } catch (e) {
    if (seq === searchSeq) { ul.textContent = ''; ul.append(h('li', { class: 'field-error', text: e.message })); }
  }
}

async function addProvider(name) {
  if ([...document.querySelectorAll('.prov-card')].some((c) => c._name === name)) return;
  let info;
  try { info = await api('GET', `/api/v1/providers/${encodeURIComponent(name)}?backend=${encodeURIComponent(curBackend())}`); } catch (e) {
    say(`Cannot describe ${name}: ${e.message}`, true);
    return;
  }
  const card = h('section', { class: 'prov-card', 'aria-label': `Provider ${name}` });
  card._name = name;
  const uid = 'p' + Math.random().toString(36).slice(2, 8);
  const evs = (info.events || []).slice().sort((a, b) => String(a.name).localeCompare(String(b.name)));
  const list = h('div', { class: 'events-list', role: 'group', 'aria-label': `Events of ${name}` });
  for (const ev of evs) {
    const fields = (ev.fields || []).filter((f) => !f.common);
    const evName = ev.name != null && ev.name !== '' ? String(ev.name) : String(ev.id);
    const cb = h('input', { type: 'checkbox', class: 'ev-cb', value: evName });
    list.append(h('div', { class: 'ev' },
      h('label', { class: 'check' }, cb, ` ${evName}`, h('span', { class: 'muted', text: ev.id != null ? ` #${ev.id}` : '' })),
      fields.length ? h('details', null, h('summary', { text: `${fields.length} fields` }),
        h('ul', null, ...fields.map((f) => h('li', { text: `${f.name}: ${f.type || ''}` })))) : null));
  }
  const field = (key, label, input, hint) => {
    input.id = `${uid}-${key}`;
    return h('div', { class: 'field', 'data-key': key }, h('label', { for: input.id, text: label }), input,
      hint ? h('span', { class: 'muted', text: hint }) : null);
  };
  const row = h('div', { class: 'row' });
  if (hasCap('level_keywords')) {
    const lv = h('select', { name: 'level' });
    for (const [v, t] of [['5', '5 Verbose (all)'], ['4', '4 Information'], ['3', '3 Warning'], ['2', '2 Error'], ['1', '1 Critical']]) lv.append(h('option', { value: v, text: t }));
    row.append(field('level', 'Level (at most)', lv));
    row.append(field('keywords_any', 'Keywords (any)', h('input', { name: 'keywords_any', placeholder: '0x…', autocomplete: 'off' })));
    row.append(field('keywords_all', 'Keywords (all)', h('input', { name: 'keywords_all', placeholder: '0x…', autocomplete: 'off' })));
  }
  if (hasCap('event_ids')) {
    row.append(field('event_ids', 'Event IDs', h('input', { name: 'event_ids', placeholder: '1, 2, 10', autocomplete: 'off' })));
    const ex = h('input', { type: 'checkbox', name: 'event_ids_exclude' });
    row.append(h('div', { class: 'field', 'data-key': 'event_ids_exclude' }, h('label', { class: 'check' }, ex, ' exclude these IDs')));
  }
  if (hasCap('stacks')) {
    row.append(h('div', { class: 'field', 'data-key': 'stacks' }, h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'stacks' }), ' stacks')));
  }
  let filterBox = null;
  if (hasCap('filter_expression')) {
    filterBox = field('filter', 'Filter expression', h('textarea', { name: 'filter', rows: 2, spellcheck: 'false', placeholder: 'e.g. pid > 100 && comm != "bash"' }),
      'checked by the kernel; use the field names listed under each event');
  }
  const allBtn = h('button', { type: 'button', text: 'All', onclick: () => { for (const c of list.querySelectorAll('.ev-cb')) c.checked = true; } });
  const noneBtn = h('button', { type: 'button', text: 'None', onclick: () => { for (const c of list.querySelectorAll('.ev-cb')) c.checked = false; } });
  const evSearch = h('input', { type: 'search', placeholder: 'filter events', 'aria-label': `Filter the events of ${name}`, autocomplete: 'off' });
  const evCount = h('span', { class: 'muted ev-count', role: 'status', text: `${evs.length} events` });
  evSearch.addEventListener('input', () => {
    const q = evSearch.value.trim().toLowerCase();
    let n = 0;
    for (const d of list.children) { d.hidden = q && !d.textContent.toLowerCase().includes(q); if (!d.hidden) n++; }
    evCount.textContent = q ? `${n} of ${evs.length} events` : `${evs.length} events`;
  });
  card.append(
    h('header', null, h('h3', { text: name }), h('span', { class: 'muted', text: `${evs.length} events` }), h('span', { class: 'spacer' }),
      h('button', { type: 'button', class: 'danger', text: 'Remove', 'aria-label': `Remove provider ${name}`, onclick: () => { card.remove(); renumber(); searchProviders(); } })),
    h('div', { class: 'field', 'data-key': 'events' },
      h('div', { class: 'row' }, h('strong', { text: 'Events' }), evSearch, evCount, allBtn, noneBtn, h('span', { class: 'muted', text: 'none checked = all events' })),
      list),
    row, filterBox);
  $('prov-chosen').append(card);
  renumber();
  for (const b of document.querySelectorAll(`#prov-results button[data-name="${CSS.escape(name)}"]`)) b.disabled = true;
  const first = list.querySelector('input');
  if (first) first.focus();
}

function renumber() {
  [...document.querySelectorAll('.prov-card')].forEach((card, i) => {
    card.dataset.field = `/providers/${i}`;
    for (const f of card.querySelectorAll('[data-key]')) f.dataset.field = `/providers/${i}/${f.dataset.key}`;
  });
}

const ints = (s) => s.split(/[\s,]+/).filter(Boolean).map((x) => (/^\d+$/.test(x) ? Number(x) : x));
const strs = (s) => s.split(/[\s,]+/).filter(Boolean);

function clearErrors(form) {
  for (const e of form.querySelectorAll('.field-error.auto')) e.remove();
  for (const e of form.querySelectorAll('[aria-invalid]')) e.removeAttribute('aria-invalid');
  $('new-error').textContent = '';
}

function showFieldError(form, ptr, msg) {
  let p = ptr || '';
  let box = null;
  while (p && !(box = form.querySelector(`[data-field="${CSS.escape(p)}"]`))) p = p.slice(0, p.lastIndexOf('/'));
  if (!box || box.hidden) { $('new-error').textContent = msg; $('new-error').scrollIntoView({ block: 'nearest' }); return; }
  const id = 'err-' + Math.random().toString(36).slice(2, 8);
  const err = h('p', { class: 'field-error auto', id, role: 'alert', text: msg });
  const input = box.querySelector('input:not([type=checkbox]), select, textarea') || box.querySelector('input');
  box.append(err);
  if (input) {
    input.setAttribute('aria-invalid', 'true');
    input.setAttribute('aria-describedby', id);
    input.focus();
  } else {
    box.setAttribute('tabindex', '-1');
    box.focus();
  }
  box.scrollIntoView({ block: 'nearest' });
}

function buildSpec() {
  const spec = {};
  const name = $('f-name').value.trim();
  if (name) spec.name = name;
  spec.backend = curBackend();
  if (hasCap('file')) spec.mode = $('f-mode').value;
  const buf = $('f-buffer').value.trim();
  if (buf) spec.buffer_kb = /^\d+$/.test(buf) ? Number(buf) : buf;
  const pids = $('f-pids').value.trim();
  if (pids && hasCap('filter_pid')) spec.pids = ints(pids);
  const exes = $('f-exe').value.trim();
  if (exes && hasCap('filter_exe')) spec.exe_names = strs(exes);
  spec.providers = [...document.querySelectorAll('.prov-card')].map((card) => {
    const p = { name: card._name };
    const evs = [...card.querySelectorAll('.ev-cb:checked')].map((c) => c.value);
    if (evs.length) p.events = evs;
    const val = (n) => { const e = card.querySelector(`[name="${n}"]`); return e ? (e.type === 'checkbox' ? e.checked : e.value.trim()) : null; };
    const f = val('filter');
    if (f) p.filter = f;
    const lv = val('level');
    if (lv && lv !== '5') p.level = Number(lv);
    const ka = val('keywords_any');
    if (ka) p.keywords_any = ka;
    const kl = val('keywords_all');
    if (kl) p.keywords_all = kl;
    const ids = val('event_ids');
    if (ids) p.event_ids = ints(ids);
    if (val('event_ids_exclude')) p.event_ids_exclude = true;
    if (val('stacks')) p.stacks = true;
    return p;
  });
  // provider strings (the server turns each into the object form; errors name /providers/N)
  spec.providers.push(...$('f-prov-strings').value.split('\n').map((x) => x.trim()).filter(Boolean));
  return spec;
}

// /providers/N past the picked cards is one of the provider strings (buildSpec appends them)
function stringsField(ptr) {
  const m = /^\/providers\/(\d+)(\/|$)/.exec(ptr);
  return m && Number(m[1]) >= document.querySelectorAll('.prov-card').length ? '/providers/strings' : ptr;
}

async function submitSession(ev) {
  ev.preventDefault();
  const form = $('new-form');
  clearErrors(form);
  const spec = buildSpec();
  const btn = $('start');
  btn.disabled = true;
  try {
    const s = await api('POST', '/api/v1/sessions', spec);
    say(`Session ${s.id} started.`);
    updateSessions([...S.sessions.values(), s]);
    openViewer(s.id);
  } catch (e) {
    const p = e.problem || {};
    showFieldError(form, stringsField(e.field || ''), (p.title && p.detail ? `${p.title}: ${p.detail}` : e.message));
  } finally {
    btn.disabled = false;
  }
}

/* ---------- files ---------- */

async function loadFiles() {
  let list;
  try { list = await api('GET', '/api/v1/files'); } catch (e) { say('Could not list files: ' + e.message, true); return; }
  const body = $('files-body');
  body.textContent = '';
  for (const f of list) {
    const enc = encodeURIComponent(f.name);
    const rec = f.kind === 'recording'; /* a session's recording: download and delete at f.url */
    const mode = h('select', { 'aria-label': `Replay speed for ${f.name}`, class: 'admin-only' },
      h('option', { value: 'fast', text: 'fast' }), h('option', { value: 'recorded', text: 'as recorded' }));
    body.append(h('tr', { 'data-name': f.name },
      h('td', { text: f.name, 'data-label': 'Name' }), h('td', { class: 'num', text: fmtN(f.size), 'data-label': 'Size' }),
      h('td', { text: f.modified ? new Date(f.modified).toLocaleString() : '', title: f.modified || '', 'data-label': 'Modified' }),
      h('td', { 'data-label': 'Actions' }, h('div', { class: 'acts' },
        h('a', { href: f.url || `/api/v1/files/${enc}`, download: rec ? f.name + f.file.slice(f.file.lastIndexOf('.')) : f.name, text: 'Download', 'aria-label': `Download ${f.name}` }),
        ...(rec ? [] : [mode,
          h('button', { type: 'button', class: 'replay admin-only primary', text: 'Replay', 'aria-label': `Replay ${f.name}`, onclick: () => replay(f.name, mode.value) })]),
        h('button', { type: 'button', class: 'delete admin-only danger', text: 'Delete', 'aria-label': `Delete ${f.name}`, disabled: !!f.writing, title: f.writing ? 'still being recorded' : '', onclick: () => deleteFile(f.name, f.url) })))));
  }
  $('files-empty').hidden = list.length > 0;
}

async function uploadFile(ev) {
  ev.preventDefault();
  const msg = $('upload-msg');
  msg.textContent = '';
  msg.classList.remove('ok');
  const file = $('upload-file').files[0];
  if (!file) { msg.textContent = 'Choose an .etl file first.'; $('upload-file').focus(); return; }
  const name = $('upload-name').value.trim() || file.name;
  const btn = $('upload');
  btn.disabled = true;
  msg.textContent = `Uploading ${name} (${fmtN(file.size)} bytes)…`;
  msg.classList.add('ok');
  try {
    const qs = `name=${encodeURIComponent(name)}${$('upload-overwrite').checked ? '&overwrite=true' : ''}`;
    const f = await uploadWithProgress(`/api/v1/files?${qs}`, file, (done) => {
      const pr = $('upload-progress');
      pr.hidden = false;
      pr.max = file.size || 1;
      pr.value = done;
    });
    msg.textContent = `Uploaded ${f.name} (${fmtN(f.size)} bytes).`;
    $('upload-file').value = '';
    $('upload-name').value = '';
    loadFiles();
  } catch (e) {
    msg.classList.remove('ok');
    msg.textContent = `Upload failed: ${e.message}`;
  } finally {
    btn.disabled = false;
    $('upload-progress').hidden = true;
  }
}

/* fetch() has no upload progress; XMLHttpRequest does (same cookie, same problem+json errors) */
function uploadWithProgress(url, blob, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open('POST', url);
    x.setRequestHeader('Content-Type', 'application/octet-stream');
    x.setRequestHeader('Accept', 'application/json');
    x.upload.onprogress = (e) => onProgress(e.loaded);
    x.onerror = () => reject(new ApiError(0, { title: 'Network error', detail: 'the upload was interrupted' }));
    x.onload = () => {
      let data = null;
      try { data = JSON.parse(x.responseText); } catch { data = null; }
      if (x.status >= 200 && x.status < 300) return resolve(data || {});
      if (x.status === 401) onLoggedOut('Your session has ended; log in again.');
      reject(new ApiError(x.status, data && typeof data === 'object' ? data : { detail: x.statusText }));
    };
    x.send(blob);
  });
}

async function replay(name, mode) {
  const spec = { files: [name], replay: mode };
  const nm = ('replay-' + name.replace(/\.etl$/i, '')).replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64);
  spec.name = nm;
  try {
    const s = await api('POST', '/api/v1/sessions', spec);
    say(`Replaying ${name} as session ${s.id}.`);
    updateSessions([...S.sessions.values(), s]);
    openViewer(s.id);
  } catch (e) { say(`Replay failed: ${e.message}`, true); }
}

async function deleteFile(name, url) {
  if (!confirm(`Delete ${name}?`)) return;
  try { await api('DELETE', url || `/api/v1/files/${encodeURIComponent(name)}`); say(`${name} deleted.`); } catch (e) { say(`Delete failed: ${e.message}`, true); }
  loadFiles();
}

/* ---------- wiring ---------- */

function wireStatic() {
  loadCols();
  buildColumnChooser();
  $('login-form').addEventListener('submit', login);
  $('token').addEventListener('input', () => $('token').removeAttribute('aria-invalid'));
  $('logout').addEventListener('click', logout);
  for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => showTab(b.dataset.tab));
  $('viewer-close').addEventListener('click', () => closeViewer(true));
  $('viewer-stop').addEventListener('click', () => S.viewer && stopSession(S.viewer.id));
  $('pause').addEventListener('click', () => S.viewer && S.viewer.setPaused(!S.viewer.paused));
  $('autoscroll').addEventListener('change', () => S.viewer && $('autoscroll').checked && S.viewer.render(true));
  let ft = 0;
  $('text-filter').addEventListener('input', () => { clearTimeout(ft); ft = setTimeout(() => { if (S.viewer) S.viewer.setFilter($('text-filter').value); syncUrl(false); }, 120); });
  wireTools(); // web/tools.js
  $('cap').addEventListener('change', () => S.viewer && S.viewer.setCap(Number($('cap').value)));
  $('clear').addEventListener('click', () => S.viewer && S.viewer.clear());
  $('grid').addEventListener('scroll', () => S.viewer && S.viewer.onScroll(), { passive: true });
  $('grid').addEventListener('keydown', (e) => S.viewer && S.viewer.key(e));
  document.addEventListener('click', (e) => { const m = $('columns-menu'); if (m.open && !m.contains(e.target)) m.open = false; });
  $('columns-menu').addEventListener('keydown', (e) => { if (e.key === 'Escape') { $('columns-menu').open = false; $('columns-menu').querySelector('summary').focus(); } });
  $('stream-form').addEventListener('submit', (e) => {
    e.preventDefault();
    if (!S.viewer) return;
    const fd = new FormData($('stream-form'));
    const params = {};
    for (const [k, v] of fd) if (k !== 'from' && String(v).trim()) params[k] = String(v).trim().replace(/\s+/g, '');
    params.from = $('from-start').checked ? '1' : '';
    openViewer(S.viewer.id, params);
  });
  $('new-form').addEventListener('submit', submitSession);
  $('new-form').addEventListener('input', (e) => {
    if (e.target.getAttribute('aria-invalid')) {
      e.target.removeAttribute('aria-invalid');
      const box = e.target.closest('[data-field]');
      if (box) for (const x of box.querySelectorAll(':scope > .field-error.auto')) x.remove();
    }
  });
  $('f-backend').addEventListener('change', () => { applyCaps(); $('prov-chosen').textContent = ''; searchProviders(); });
  $('prov-search').addEventListener('input', () => { clearTimeout(searchTimer); searchTimer = setTimeout(searchProviders, 200); });
  $('prov-search').addEventListener('keydown', (e) => {
    if (e.key === 'ArrowDown') { const b = $('prov-results').querySelector('button:not([disabled])'); if (b) { e.preventDefault(); b.focus(); } }
    if (e.key === 'Enter') e.preventDefault();
  });
  $('prov-results').addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp') return;
    const bs = [...$('prov-results').querySelectorAll('button')];
    const i = bs.indexOf(document.activeElement);
    if (i < 0) return;
    e.preventDefault();
    const j = e.key === 'ArrowDown' ? Math.min(bs.length - 1, i + 1) : i - 1;
    (j < 0 ? $('prov-search') : bs[j]).focus();
  });
  $('upload-file').addEventListener('change', () => { const f = $('upload-file').files[0]; if (f && !$('upload-name').value) $('upload-name').value = f.name; });
  $('upload-form').addEventListener('submit', uploadFile);
  let rt = 0;
  window.addEventListener('resize', () => { clearTimeout(rt); rt = setTimeout(() => S.viewer && S.viewer.resize(), 100); });
}

boot();
