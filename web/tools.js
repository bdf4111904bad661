/* etwd web page — the viewer's analysis tools (issue 22 items 2, 4, 5, 6): the field filter box
 * (completion, errors), field columns, sorting and resizing, the export menu, the view in the URL
 * (reload, links, back button), keyboard shortcuts and dark mode. DOM glue only: the logic is in
 * the pure modules (filter.js, columns.js, export.js, state.js). A classic script loaded before
 * app.js; its functions use app.js's globals ($, h, S, COLS, REL, WIDTHS, …) when called, which is
 * after app.js has run. Main thread only. */
'use strict';

function addFieldCol(path) {
  if (COLS.some((c) => c.id === 'f:' + path)) return COLS.find((c) => c.id === 'f:' + path);
  const c = EtwColumns.fieldColumn(path);
  COLS.splice(COLS.findIndex((x) => x.id === 'data'), 0, c);
  return c;
}
function saveCols() {
  try { localStorage.setItem('etwd.columns', JSON.stringify(COLS.filter((x) => x.on).map((x) => x.id))); } catch { /* private mode */ }
  buildColumnChooser();
  if (S.viewer) S.viewer.setCols();
  syncUrl(false);
}

function addColumnFromInput() {
  const path = $('col-field').value.trim();
  if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(path)) { $('col-field').setAttribute('aria-invalid', 'true'); return; }
  $('col-field').removeAttribute('aria-invalid');
  addFieldCol(path).on = true;
  $('col-field').value = '';
  saveCols();
}
function cycleSort(id) {
  if (!S.viewer) return;
  const cur = S.viewer.sort;
  S.viewer.setSort(!cur || cur.id !== id ? { id, dir: 1 } : cur.dir > 0 ? { id, dir: -1 } : null);
  syncUrl(false);
}
function startResize(e, c, sp) {
  e.preventDefault();
  e.stopPropagation();
  const x0 = e.clientX, w0 = sp.getBoundingClientRect().width;
  const move = (m) => {
    WIDTHS[c.id] = Math.max(40, Math.round(w0 + m.clientX - x0)) + 'px';
    $('grid').style.setProperty('--cols', S.viewer.cols.map((x) => WIDTHS[x.id] || x.w).join(' '));
  };
  const up = () => {
    window.removeEventListener('pointermove', move);
    window.removeEventListener('pointerup', up);
    try { localStorage.setItem('etwd.widths', JSON.stringify(WIDTHS)); } catch { /* private mode */ }
  };
  window.addEventListener('pointermove', move);
  window.addEventListener('pointerup', up);
}

/* the field filter: applied as typed when it parses; the parser's message under the box if not */
let whereTimer = 0;
function applyWhere(push) {
  const box = $('field-filter'), err = $('field-filter-error');
  let pred;
  try { pred = EtwFilter.compile(box.value); } catch (e) {
    err.textContent = e.message;
    box.setAttribute('aria-invalid', 'true');
    return false;
  }
  err.textContent = '';
  box.removeAttribute('aria-invalid');
  if (S.viewer && pred) S.viewer.setWhere(box.value); // the worker compiles it again
  syncUrl(push);
  return true;
}
/* fields for completion: the providers API's schemas of the session's providers, and the fields
 * of recently received events (sampled when asked, not per event) */
const schemaFields = new Map(); // session id -> Set of paths
async function loadSchemaFields(id) {
  const s = S.sessions.get(id) || await api('GET', `/api/v1/sessions/${id}`).catch(() => null);
  const set = new Set();
  schemaFields.set(id, set);
  const provs = (s && s.spec && Array.isArray(s.spec.providers)) ? s.spec.providers : [];
  for (const p of provs.slice(0, 8)) {
    try {
      const info = await api('GET', `/api/v1/providers/${encodeURIComponent(p.name)}?backend=${encodeURIComponent(s.backend)}`);
      const want = Array.isArray(p.events) && p.events.length ? new Set(p.events.map(String)) : null;
      for (const ev of info.events || []) {
        if (want && !want.has(String(ev.name)) && !want.has(String(ev.id))) continue;
        for (const f of ev.fields || []) if (!f.common) set.add('EventData.' + f.name);
      }
    } catch { /* no schema: observed fields only */ }
  }
  // typed while the schemas were on their way: offer them now, not at the next key
  if (set.size && S.viewer && S.viewer.id === id) resuggest('field-filter');
}
/* the fields seen in the last 2,000 kept rows come from the worker: the last answer is used at
 * once, a fresh one is asked for (and suggest() runs again if the box still has the focus) */
let seenFields = [], askingFields = false;
function knownFields(again) {
  const v = S.viewer;
  if (v && !askingFields) {
    askingFields = true;
    v.call({ op: 'fields' }).then((list) => {
      askingFields = false;
      const changed = list.length !== seenFields.length;
      seenFields = list;
      if (changed && again) resuggest(again);
    });
  }
  const set = new Set(v ? schemaFields.get(v.id) || [] : []);
  for (const f of seenFields) set.add(f);
  return [...set].sort();
}
/* a late answer (schemas, seen fields) refreshes the list of the box that still has the focus —
 * unless the user closed the list with Esc since the last key: Enter must then apply the filter
 * as typed, not take a suggestion that popped up again meanwhile */
let suggestClosed = false;
function resuggest(id) {
  if (document.activeElement !== $(id)) return;
  if (id !== 'field-filter') fillColFields();
  else if (!suggestClosed) suggest();
}
function fillColFields() { const dl = $('col-fields'); dl.textContent = ''; for (const f of knownFields()) dl.append(h('option', { value: f })); }
function suggest() {
  const box = $('field-filter'), ul = $('field-suggest');
  const c = EtwFilter.complete(box.value, box.selectionStart ?? box.value.length, knownFields(askingFields ? null : 'field-filter'));
  ul.textContent = '';
  const typed = box.value.slice(c.start, c.end);
  const items = c.items.filter((f) => f !== typed);
  items.forEach((f, i) => ul.append(h('li', { role: 'option', id: 'sug-' + i, text: f, 'aria-selected': String(i === 0),
    onmousedown: (e) => { e.preventDefault(); acceptSuggestion(f); } })));
  ul._c = c;
  ul.hidden = !items.length;
  box.setAttribute('aria-expanded', String(!ul.hidden));
}
function acceptSuggestion(f) {
  const box = $('field-filter'), c = $('field-suggest')._c;
  box.value = box.value.slice(0, c.start) + f + ' ' + box.value.slice(c.end).replace(/^ /, '');
  const at = c.start + f.length + 1;
  box.setSelectionRange(at, at);
  hideSuggest();
  box.focus();
}
function hideSuggest() { $('field-suggest').hidden = true; $('field-filter').setAttribute('aria-expanded', 'false'); }
function suggestKey(e) {
  const ul = $('field-suggest');
  if (e.key === 'Escape') suggestClosed = true;
  if (ul.hidden) { if (e.key === 'Enter') { e.preventDefault(); clearTimeout(whereTimer); applyWhere(true); } return; }
  const opts = [...ul.children];
  let i = opts.findIndex((o) => o.getAttribute('aria-selected') === 'true');
  if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
    e.preventDefault();
    i = (i + (e.key === 'ArrowDown' ? 1 : opts.length - 1)) % opts.length;
    opts.forEach((o, j) => o.setAttribute('aria-selected', String(j === i)));
    $('field-filter').setAttribute('aria-activedescendant', opts[i].id);
  } else if ((e.key === 'Tab' || e.key === 'Enter') && i >= 0) {
    e.preventDefault();
    acceptSuggestion(opts[i].textContent);
  } else if (e.key === 'Escape') { e.preventDefault(); hideSuggest(); }
}

/* export the rows that match the filters, or all kept rows (the worker writes the text) */
async function doExport(kind) {
  const v = S.viewer;
  if (!v) return;
  const scope = document.querySelector('input[name="export-scope"]:checked').value;
  const src = `etwd session ${v.id}`;
  $('export-msg').textContent = `Exporting as ${kind}…`;
  const { text, n } = await v.call({ op: 'export', kind, scope, src, relBase: REL.base, cols: v.cols.map((c) => ({ id: c.id, label: c.label })) });
  const type = kind === 'ndjson' ? 'application/x-ndjson' : kind === 'csv' ? 'text/csv' : kind === 'folded' ? 'text/plain' : 'application/json';
  const ext = kind === 'ndjson' ? 'ndjson' : kind === 'csv' ? 'csv' : kind === 'folded' ? 'folded.txt' : 'chrome.json';
  const a = h('a', { href: URL.createObjectURL(new Blob([text], { type })), download: `etwd-session-${v.id}.${ext}` });
  a.click(); // not in the document: its click does not reach the menus' close-on-outside-click
  setTimeout(() => URL.revokeObjectURL(a.href), 60000);
  $('export-msg').textContent = kind === 'folded' ? `The stacks of ${fmtN(n)} events exported as collapsed stacks.` : `${fmtN(n)} events exported as ${kind}.`;
}

/* ----- the view in the URL fragment (web/state.js) ----- */
let applying = false;
function currentState() {
  const v = S.viewer;
  const cols = COLS.filter((c) => c.on).map((c) => c.id);
  return {
    session: v ? v.id : undefined,
    filter: $('field-filter').value.trim(),
    text: $('text-filter').value.trim(),
    cols: cols.join(',') === COLS_DEFAULT ? undefined : cols,
    sort: v && v.sort ? (v.sort.dir < 0 ? '-' : '') + v.sort.id : undefined,
    rel: REL.mode === 'sel' ? 'sel' : undefined,
    flame: v && Flame.isOpen() ? '1' : undefined,
    fz: v && Flame.isOpen() ? Flame.zoomPath().join(';') : undefined,
  };
}
function syncUrl(push) {
  if (applying || !S.me) return;
  const hash = EtwState.format(currentState());
  if (hash === location.hash || (!hash && !location.hash)) return;
  const url = location.pathname + location.search + hash;
  if (push) history.pushState(null, '', url); else history.replaceState(null, '', url);
}
function applyState(st) {
  applying = true;
  try {
    if (st.cols) { for (const c of COLS) c.on = false; loadCols(st.cols); } else if (Object.keys(st).length) { const d = COLS_DEFAULT.split(','); for (const c of COLS) c.on = d.includes(c.id); }
    buildColumnChooser();
    REL.mode = st.rel === 'sel' ? 'sel' : 'start';
    $('rel-base').value = REL.mode;
    $('text-filter').value = st.text || '';
    $('field-filter').value = st.filter || '';
    if (st.session && (!S.viewer || S.viewer.id !== st.session)) openViewer(st.session);
    else if (!st.session && S.viewer) closeViewer();
    if (S.viewer) {
      S.viewer.setFilter($('text-filter').value);
      const m = /^(-?)(.+)$/.exec(st.sort || '');
      S.viewer.setSort(m && COLS.some((c) => c.id === m[2]) ? { id: m[2], dir: m[1] ? -1 : 1 } : null); // the worker sorts
      Flame.applyState(st.flame === '1', st.fz); // web/flame.js
    }
    applyWhere(false);
  } finally { applying = false; }
}

/* keyboard: / focuses the field filter, space pauses, arrows move the selection (not while typing) */
function globalKey(e) {
  if (!S.viewer || e.ctrlKey || e.metaKey || e.altKey || S.tab !== 'sessions') return;
  const t = e.target;
  // (the timeline canvas has its own keys: arrows pan, +/− zoom, Esc clears its range; so has the
  // flame graph's: arrows move the zoom)
  if (t.closest && t.closest('input, textarea, select, [contenteditable], #timeline, #flame')) return;
  if (e.key === '/') { e.preventDefault(); $('field-filter').focus(); return; }
  if (e.key === ' ' && !(t.closest && t.closest('button, summary, a'))) { e.preventDefault(); S.viewer.setPaused(!S.viewer.paused); return; }
  if (/^Arrow(Up|Down)$|^Page(Up|Down)$/.test(e.key) && !(t.closest && t.closest('#grid'))) S.viewer.key(e);
}

/* dark mode: follows prefers-color-scheme until the button chooses (kept in localStorage) */
function applyTheme(choice) {
  const dark = choice ? choice === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  $('theme').setAttribute('aria-pressed', String(dark));
  if (S.viewer) S.viewer.chart();
}
function themeChoice() { try { return localStorage.getItem('etwd.theme'); } catch { return null; } }


/* the listeners of the controls above; called once from app.js wireStatic() */
function wireTools() {
  $('text-filter').addEventListener('change', () => syncUrl(true));
  $('field-filter').addEventListener('input', () => { suggestClosed = false; suggest(); clearTimeout(whereTimer); whereTimer = setTimeout(() => applyWhere(false), 200); });
  $('field-filter').addEventListener('change', () => { clearTimeout(whereTimer); applyWhere(true); });
  $('field-filter').addEventListener('keydown', suggestKey);
  $('field-filter').addEventListener('focus', () => { suggestClosed = false; suggest(); });
  $('field-filter').addEventListener('blur', () => setTimeout(hideSuggest, 100));
  $('col-add').addEventListener('click', addColumnFromInput);
  $('col-field').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); addColumnFromInput(); } });
  $('col-field').addEventListener('focus', () => { fillColFields(); knownFields('col-field'); });
  $('rel-base').addEventListener('change', () => {
    REL.mode = $('rel-base').value;
    REL.base = REL.mode === 'sel' && S.viewer && S.viewer.sel ? EtwExport.timeOf(S.viewer.sel.ev) : S.viewer && S.viewer.t0;
    if (S.viewer) { if (S.viewer.sort && S.viewer.sort.id === 'rel') S.viewer.setSort(S.viewer.sort); else S.viewer.setCols(); }
    syncUrl(false);
  });
  for (const b of document.querySelectorAll('[data-export]')) b.addEventListener('click', () => doExport(b.dataset.export));
  document.addEventListener('click', (e) => { const m = $('export-menu'); if (m.open && !m.contains(e.target)) m.open = false; });
  $('older-notice').addEventListener('submit', (e) => {
    e.preventDefault();
    const f = $('older-from').value.trim();
    if (!S.viewer || !/^\d+$/.test(f)) { $('older-from').setAttribute('aria-invalid', 'true'); return; }
    $('older-from').removeAttribute('aria-invalid');
    openViewer(S.viewer.id, Object.assign({}, S.viewer.params, { from: f }));
  });
  document.addEventListener('keydown', globalKey);
  window.addEventListener('popstate', () => { if (S.me) applyState(EtwState.parse(location.hash)); });
  applyTheme(themeChoice());
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => applyTheme(themeChoice()));
  $('theme').addEventListener('click', () => {
    const next = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
    try { localStorage.setItem('etwd.theme', next); } catch { /* private mode */ }
    applyTheme(next);
  });
}
