/* etwd web page: group-by counts of the viewer's events (provider, event, process, thread, CPU,
 * level, host or any field path) as a sortable table with bars; a click on a group filters the table to
 * it (predicate "group"), a second click clears. The counts cover the kept rows passing every
 * other filter (so the other groups stay visible while one is chosen); the viewer's Worker counts
 * them (web/worker.js 'group', keys of web/events.js groupKey), asked at most 4 times a second
 * while rows arrive, only while the panel is open. Main thread only; uses app.js's h(), fmtN()
 * and EventViews. */
'use strict';

const Group = (() => {
  const KEYS = { // the keys themselves: web/events.js GROUP
    provider: { label: 'Provider' }, event: { label: 'Event' }, process: { label: 'Process ID' }, thread: { label: 'Thread ID' },
    cpu: { label: 'CPU' }, level: { label: 'Level' }, host: { label: 'Host' }, field: { label: 'Field' }, // field: a path typed by the user
  };
  const MAX_SHOWN = 500;
  const G = {
    viewer: null, by: 'provider', path: [], counts: new Map(), total: 0, sel: null, job: null,
    sort: 'count', desc: true, dirty: true, timer: 0, el: null,
  };

  /* a recount by the worker; draws when it is answered (changes meanwhile ask again) */
  function startRecount() {
    const v = G.viewer;
    if (!v) return Promise.resolve();
    const job = (G.job = {});
    G.dirty = false;
    return v.call({ op: 'group', by: G.by, path: G.path }).then((res) => {
      if (G.job !== job) return;
      G.job = null;
      G.counts = new Map(res.counts);
      G.total = res.total;
      if (G.dirty) schedule(250);
      draw();
    });
  }

  function build() {
    const by = h('select', { id: 'grp-by' });
    for (const [k, v] of Object.entries(KEYS)) by.append(h('option', { value: k, text: v.label }));
    const path = h('input', { id: 'grp-path', placeholder: 'EventData.filename', autocomplete: 'off', spellcheck: 'false', hidden: true, 'aria-label': 'Field path (dot-separated)' });
    const clear = h('button', { type: 'button', id: 'grp-clear', text: 'Clear group filter', disabled: true });
    const info = h('span', { id: 'grp-info', class: 'muted', role: 'status' });
    const head = h('tr', null,
      h('th', { scope: 'col' }, h('button', { type: 'button', class: 'sort', 'data-sort': 'key', id: 'grp-h-key', text: 'Provider' })),
      h('th', { scope: 'col', class: 'num' }, h('button', { type: 'button', class: 'sort', 'data-sort': 'count', text: 'Count' })),
      h('th', { scope: 'col', class: 'bar-col', text: 'Share' }));
    const body = h('tbody', { id: 'grp-body' });
    const panel = h('section', { id: 'grp-panel', class: 'view-panel', hidden: true, 'aria-label': 'Group by' },
      h('div', { class: 'toolbar' }, h('label', null, 'Group by', by), path, clear, info),
      h('div', { class: 'grp-wrap' }, h('table', { class: 'list grp', id: 'grp-table' },
        h('caption', { class: 'visually-hidden', text: 'Event counts per group; choose a group to filter the table' }),
        h('thead', null, head), body)));
    by.addEventListener('change', () => { G.by = by.value; path.hidden = G.by !== 'field'; if (!path.hidden) path.focus(); regroup(); });
    let pt = 0;
    path.addEventListener('input', () => { clearTimeout(pt); pt = setTimeout(() => { G.path = path.value.trim().split('.').filter(Boolean); regroup(); }, 200); });
    clear.addEventListener('click', () => choose(null));
    head.addEventListener('click', (e) => {
      const b = e.target.closest('button.sort');
      if (!b) return;
      if (G.sort === b.dataset.sort) G.desc = !G.desc; else { G.sort = b.dataset.sort; G.desc = G.sort === 'count'; }
      draw();
    });
    body.addEventListener('click', (e) => { const b = e.target.closest('button[data-key]'); if (b) choose(G.sel === b.dataset.key ? null : b.dataset.key); });
    G.el = { panel, by, path, clear, info, body, head };
    return panel;
  }

  function regroup() {
    const had = G.sel !== null;
    G.sel = null;
    G.dirty = true;
    G.job = null; // an answer for the old grouping is not drawn
    if (had && G.viewer) G.viewer.setPredicate('group', null);
    schedule(0);
  }

  function choose(key) {
    G.sel = key;
    if (!G.viewer) return;
    const want = key;
    G.viewer.setPredicate('group', key === null ? null : { by: G.by, path: G.path, key: want });
    draw();
  }

  function bar(pct) { // CSSOM, not a style attribute: the CSP has no 'unsafe-inline'
    const b = h('span', { class: 'bar' });
    b.style.width = pct.toFixed(1) + '%';
    return b;
  }

  function schedule(ms) {
    if (G.timer || !G.el || G.el.panel.hidden) return;
    G.timer = setTimeout(() => { G.timer = 0; draw(); }, ms);
  }

  function draw() {
    const t0 = performance.now();
    drawAll();
    G.slowest = Math.max(G.slowest || 0, performance.now() - t0); // for bench/page_busy.mjs
  }
  function drawAll() {
    clearTimeout(G.timer);
    G.timer = 0;
    const el = G.el;
    if (!el || el.panel.hidden) return;
    if (G.dirty && !G.job) { startRecount(); return; } // it draws when it is answered
    if (G.job) return;
    const arr = [...G.counts];
    const dir = G.desc ? -1 : 1;
    const num = (k) => (/^-?\d+(\.\d+)?$/.test(k) ? Number(k) : NaN);
    arr.sort(G.sort === 'count'
      ? (a, b) => dir * (a[1] - b[1]) || (a[0] < b[0] ? -1 : 1)
      : (a, b) => { const x = num(a[0]), y = num(b[0]); return dir * (!isNaN(x) && !isNaN(y) ? x - y : a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0); });
    let max = 1;
    for (const [, c] of arr) if (c > max) max = c;
    const label = G.by === 'field' ? (G.path.join('.') || 'Field') : KEYS[G.by].label;
    el.head.querySelector('#grp-h-key').textContent = label;
    for (const th of el.head.querySelectorAll('th')) {
      const b = th.querySelector('button.sort');
      if (b) th.setAttribute('aria-sort', b.dataset.sort === G.sort ? (G.desc ? 'descending' : 'ascending') : 'none');
    }
    const frag = document.createDocumentFragment();
    for (const [k, c] of arr.slice(0, MAX_SHOWN)) {
      const pct = (100 * c) / Math.max(1, G.total);
      frag.append(h('tr', { class: k === G.sel ? 'sel' : null, 'data-key': k },
        h('td', null, h('button', { type: 'button', class: 'linkish', 'data-key': k, text: k, 'aria-pressed': String(k === G.sel), title: `Show only ${label} = ${k}` })),
        h('td', { class: 'num', text: fmtN(c) }),
        h('td', { class: 'bar-col' }, bar((100 * c) / max), h('span', { class: 'pct', text: pct.toFixed(1) + '%' }))));
    }
    el.body.replaceChildren(frag);
    el.clear.disabled = G.sel === null;
    el.info.textContent = `${fmtN(G.counts.size)} groups, ${fmtN(G.total)} events` + (arr.length > MAX_SHOWN ? ` (the first ${MAX_SHOWN} shown)` : '') +
      (G.sel !== null ? ` · table filtered to ${label} = ${G.sel}` : '');
  }

  const api = {
    open(v) { G.viewer = v; G.sel = null; G.dirty = true; G.job = null; schedule(0); },
    close(v) { if (G.viewer === v) { G.viewer = null; G.job = null; G.counts = new Map(); G.total = 0; G.sel = null; if (G.el) G.el.body.textContent = ''; } },
    change(v, c) {
      if (v !== G.viewer || (c.reset && c.name === 'group')) return;
      G.dirty = true;
      schedule(c.reset ? 0 : 250);
    },
    show(on) { G.el.panel.hidden = !on; if (on) draw(); },
    build, draw,
    slowest: () => G.slowest,
    // for tests and other views: a promise of the current counts (a fresh count by the worker)
    async counts() {
      if (!G.viewer) return {};
      const res = await G.viewer.call({ op: 'group', by: G.by, path: G.path });
      return Object.fromEntries(res.counts);
    },
    setBy(by, path) { G.by = by; G.el.by.value = by; G.el.path.hidden = by !== 'field'; if (path != null) { G.el.path.value = path; G.path = path.split('.').filter(Boolean); } regroup(); },
    choose,
  };
  return api;
})();
EventViews.push(Group);
installView(Group, 'Group by', 'grp-toggle');
