/* etwd web page: the flame graph (an icicle: the root at the top, callees below) of the stacks of
 * the events the table shows (every filter applied), and the selected event's stack in the event
 * panel. Frames are named as in the folded export (web/stacks.js, = `etwd convert --format
 * folded`). A click on a frame zooms to it (its ancestors stay above at full width; Reset or Esc
 * goes back to all); hovering shows the frame's count and share; "Only events with this frame"
 * adds `stack == "frame"` to the Where filter (web/filter.js), so the table — and this graph —
 * keep the events whose stack contains it.
 *
 * The tree ({name, n: events through it, self: events ending in it, kids}) is built by the viewer's
 * Worker over the rows passing every filter (web/worker.js 'flame': bounded at 200k frames, stacks
 * beyond are counted and reported, not drawn), asked again at most 4 times a second while rows
 * arrive and at once when a filter changes, only while the panel is open; the page rebuilds it
 * from the flat answer and paints it. Main thread only; uses app.js's h(), $(), fmtN(),
 * EventViews and tools.js's applyWhere(). */
'use strict';

const Flame = (() => {
  const ROW = 18, MAX_NODES = 200000, MAX_DEPTH = 256, MIN_W = 0.5; // MAX_NODES: worker.js FLAME_MAX
  const node = (name) => ({ name, n: 0, self: 0, kids: new Map(), order: null }); // order: kids sorted by name (cached)
  const F = {
    viewer: null, acc: null, job: null, dirty: true, timer: 0, el: null,
    zoom: [],  // the zoomed frame: its path of names from the root (empty: all)
    rects: [], // what was painted, for hit tests: {x, y, w, node, up (parent rect index), depth}
    hover: -1, lastMs: 0,
  };

  /* ----- the tree, from the worker ----- */
  /* the worker's flat pre-order answer → {root, nodes, dropped, shown} */
  function treeOf(res) {
    const all = new Array(res.name.length);
    for (let i = 0; i < all.length; i++) {
      const nd = (all[i] = node(res.name[i]));
      nd.n = res.n[i];
      nd.self = res.self[i];
      if (res.up[i] >= 0) all[res.up[i]].kids.set(nd.name, nd);
    }
    return { root: all[0], nodes: res.nodes, dropped: res.dropped, shown: res.shown };
  }
  /* a recount by the worker; paints when it is answered (changes meanwhile ask again later) */
  function startRecount() {
    const v = F.viewer;
    if (!v) return;
    const job = (F.job = {}), asked = performance.now();
    F.dirty = false;
    v.call({ op: 'flame' }).then((res) => {
      if (F.job !== job) return;
      F.job = null;
      const t0 = performance.now();
      F.askMs = t0 - asked;
      F.acc = treeOf(res);
      F.slowest = Math.max(F.slowest || 0, performance.now() - t0);
      if (F.dirty) schedule(pause()); // (before paint: it would ask at once)
      paint();
    });
  }
  /* the wait before a recount while rows arrive: at least 250 ms, and the worker busy with the
   * graph at most a third of the time, the page's paint a tenth */
  const pause = () => Math.max(250, 10 * F.lastMs, 2 * (F.askMs || 0));
  /* the timer's work: a recount when something changed, else a paint */
  function refresh() {
    F.timer = 0;
    if (!F.el || F.el.panel.hidden) return;
    if ((F.dirty || !F.acc) && !F.job) startRecount();
    else if (!F.job) paint();
  }

  /* ----- DOM ----- */
  function build() {
    const btn = (id, text, fn, title) => h('button', { type: 'button', id, text, onclick: fn, title: title || null });
    const cv = h('canvas', { id: 'flame', tabindex: '0', role: 'img', 'aria-label': 'Flame graph of the stacks of the events in the table' });
    const tip = h('div', { id: 'fg-tip', class: 'fg-tip', role: 'tooltip', hidden: true });
    const panel = h('section', { id: 'fg-panel', class: 'view-panel', hidden: true, 'aria-label': 'Flame graph' },
      h('div', { class: 'toolbar' },
        btn('fg-reset', 'Reset zoom', () => zoomTo([]), 'Show all stacks (Esc)'),
        btn('fg-up', 'Up', () => zoomTo(F.zoom.slice(0, -1)), 'Zoom out to the caller'),
        btn('fg-only', 'Only events with this frame', () => filterTo(), 'Adds stack == "frame" to the Where filter (Enter)'),
        h('span', { id: 'fg-info', class: 'muted', role: 'status' })),
      h('div', { class: 'fg-wrap' }, cv, tip),
      h('p', { class: 'muted hint', text: 'Stacks of the events the table shows, callers above callees. Click a frame to zoom to it (keys: ↓ widest callee, ↑ caller, ←/→ neighbours, Esc all), hover for its count; "Only events with this frame" (Enter) filters the table. Export → Collapsed stacks writes them for flamegraph.pl or speedscope.' }));
    cv.addEventListener('click', (e) => { const i = hit(e.offsetX, e.offsetY); if (i >= 0) zoomTo(pathOf(i)); });
    cv.addEventListener('mousemove', (e) => hoverAt(e.offsetX, e.offsetY));
    cv.addEventListener('mouseleave', () => hoverAt(-1, -1));
    cv.addEventListener('keydown', key);
    F.el = { panel, cv, tip };
    // the theme's colours and the canvas width are read when they change, not in paint() (reading
    // them there would make the browser lay out the page — the table of 200k rows — at each paint)
    new MutationObserver(() => { F.colors = null; paint(); }).observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] });
    new ResizeObserver((es) => { const w = Math.round(es[es.length - 1].contentRect.width); if (w && w !== F.W) { F.W = w; paint(); } }).observe(cv);
    return panel;
  }
  /* keys on the canvas: ↓ zooms to the widest callee, ↑ to the caller, ←/→ to the neighbour
   * frames (same caller), Enter filters the table to the zoomed frame, Esc or 0 shows all */
  function key(e) {
    const chain = F.acc ? focusChain() : [];
    const at = chain[chain.length - 1], up = chain[chain.length - 2];
    if (e.key === 'Escape' || e.key === '0') zoomTo([]);
    else if (e.key === 'ArrowUp' || e.key === 'Backspace') zoomTo(F.zoom.slice(0, chain.length - 2));
    else if (e.key === 'ArrowDown' && at && at.kids.size) {
      const w = sorted(at).reduce((a, b) => (b.n > a.n ? b : a));
      zoomTo([...F.zoom.slice(0, chain.length - 1), w.name]);
    } else if ((e.key === 'ArrowLeft' || e.key === 'ArrowRight') && up) {
      const sib = sorted(up), i = sib.indexOf(at) + (e.key === 'ArrowLeft' ? -1 : 1);
      if (i >= 0 && i < sib.length) zoomTo([...F.zoom.slice(0, chain.length - 2), sib[i].name]);
    } else if (e.key === 'Enter') filterTo();
    else return;
    e.preventDefault();
  }

  function zoomTo(path) {
    F.zoom = path.slice();
    paint();
    syncUrl(false);
  }
  /* the Where filter gets `stack == "<the zoomed frame>"` (and'ed with what it holds) */
  function filterTo(name) {
    const nm = name !== undefined ? name : F.zoom[F.zoom.length - 1];
    if (!nm) return;
    const box = $('field-filter');
    const term = `stack == "${nm.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    const cur = box.value.trim();
    if (cur === term || cur.endsWith('&& ' + term)) return;
    box.value = cur ? `(${cur}) && ${term}` : term;
    applyWhere(true);
  }

  /* ----- painting ----- */
  function schedule(ms) {
    if (F.timer || !F.el || F.el.panel.hidden) return;
    F.timer = setTimeout(refresh, ms);
  }
  /* the zoomed node and its ancestors (as far as the path still exists) */
  function focusChain() {
    const chain = [F.acc.root];
    for (const nm of F.zoom) {
      const k = chain[chain.length - 1].kids.get(nm);
      if (!k) break;
      chain.push(k);
    }
    return chain;
  }
  const sorted = (nd) => nd.order || (nd.order = [...nd.kids.values()].sort((a, b) => EtwStacks.cmpBytes(a.name, b.name)));
  function hue(name) {
    const m = /^[^!+]*/.exec(name)[0]; // the module part: one hue per module
    let x = 2166136261;
    for (let i = 0; i < m.length; i++) x = Math.imul(x ^ m.charCodeAt(i), 16777619);
    return (x >>> 0) % 360;
  }

  function paint() {
    if (!F.el || F.el.panel.hidden) return;
    if (!F.acc) { if (!F.job) startRecount(); return; } // it paints when answered
    if (F.dirty && !F.job) schedule(0); // (paints what it has meanwhile)
    const t0 = performance.now();
    const cv = F.el.cv, chain = focusChain(), focus = chain[chain.length - 1];
    const dpr = window.devicePixelRatio || 1, W = Math.max(50, F.W || (F.W = cv.clientWidth));
    // layout: the ancestors at full width, then the focus's subtree in proportion
    const rects = [];
    chain.forEach((nd, d) => rects.push({ x: 0, y: d * ROW, w: W, node: nd, up: d - 1, depth: d, anc: d < chain.length - 1 }));
    let maxD = chain.length - 1;
    const scale = focus.n ? W / focus.n : 0;
    const stack = [[focus, rects.length - 1, 0, chain.length - 1]];
    while (stack.length) {
      const [nd, ri, x0, d] = stack.pop();
      if (d + 1 >= MAX_DEPTH) continue;
      let x = x0;
      for (const k of sorted(nd)) {
        const w = k.n * scale;
        if (w >= MIN_W) {
          rects.push({ x, y: (d + 1) * ROW, w, node: k, up: ri, depth: d + 1, anc: false });
          if (d + 1 > maxD) maxD = d + 1;
          stack.push([k, rects.length - 1, x, d + 1]);
        }
        x += w;
      }
    }
    F.rects = rects;
    const H = (maxD + 1) * ROW + 2;
    if (cv.style.height !== H + 'px') cv.style.height = H + 'px';
    const PW = Math.round(W * dpr), PH = Math.round(H * dpr);
    if (cv.width !== PW || cv.height !== PH) { cv.width = PW; cv.height = PH; }
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    const dark = document.documentElement.dataset.theme === 'dark';
    if (!F.colors) F.colors = { fg: getComputedStyle(cv).color || (dark ? '#e3e7ec' : '#1b1f24') };
    const fg = F.colors.fg;
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    const cw = g.measureText('abcdefghijklmnopqrstuvwxyz_!+0123456789').width / 40; // a mean character width
    const zoomed = F.zoom.length ? rects[chain.length - 1] : null;
    rects.forEach((r, i) => {
      const hu = r.depth === 0 ? 0 : hue(r.node.name);
      g.fillStyle = r.depth === 0 ? (dark ? '#3a4350' : '#c9ced6')
        : r.anc ? `hsl(${hu}, 12%, ${dark ? 30 : 78}%)` : `hsl(${hu}, ${dark ? 45 : 70}%, ${dark ? 34 : 72}%)`;
      g.fillRect(r.x, r.y, Math.max(MIN_W, r.w - (r.w > 3 ? 1 : 0)), ROW - 1);
      if (i === F.hover || r === zoomed) {
        g.strokeStyle = i === F.hover ? fg : (dark ? '#6aa8ef' : '#0b5cad');
        g.lineWidth = 1.5;
        g.strokeRect(r.x + 0.75, r.y + 0.75, Math.max(1, r.w - 2.5), ROW - 2.5);
      }
      if (r.w > 30) {
        g.fillStyle = fg;
        const t = r.depth === 0 ? `all (${fmtN(r.node.n)} events)` : r.node.name;
        g.save();
        g.beginPath(); g.rect(r.x, r.y, r.w - 2, ROW); g.clip();
        const fit = Math.floor((r.w - 6) / cw); // characters that fit (about: the clip cuts the rest)
        g.fillText(t.length <= fit ? t : fit > 1 ? t.slice(0, fit - 1) + '…' : '', r.x + 3, r.y + ROW / 2);
        g.restore();
      }
    });
    const acc = F.acc;
    const info = `${fmtN(acc.root.n)} of ${fmtN(acc.shown)} events in the table have a stack · ${fmtN(acc.nodes)} frames` +
      (acc.dropped ? ` · ${fmtN(acc.dropped)} stacks not drawn (more than ${fmtN(MAX_NODES)} frames)` : '') +
      (F.zoom.length ? ` · zoomed to ${focus.name}: ${fmtN(focus.n)} events (${pct(focus.n, acc.root.n)})` : '');
    $('fg-info').textContent = info;
    $('fg-reset').disabled = !F.zoom.length;
    $('fg-up').disabled = !F.zoom.length;
    $('fg-only').disabled = !F.zoom.length;
    const top = sorted(focus).slice().sort((a, b) => b.n - a.n).slice(0, 3);
    cv.setAttribute('aria-label', `Flame graph: ${fmtN(acc.root.n)} stacks` + (F.zoom.length ? `, zoomed to ${focus.name}` : '') +
      (top.length ? '; widest: ' + top.map((k) => `${k.name} ${fmtN(k.n)}`).join(', ') : ''));
    F.lastMs = performance.now() - t0;
    F.slowest = Math.max(F.slowest || 0, F.lastMs); // for tests and bench/page_busy.mjs (work, not wall time)
  }
  const pct = (n, d) => (d ? ((100 * n) / d).toFixed(1) : '0.0') + '%';

  /* ----- hit tests, hover ----- */
  function hit(x, y) {
    for (let i = F.rects.length - 1; i >= 0; i--) {
      const r = F.rects[i];
      if (y >= r.y && y < r.y + ROW && x >= r.x && x < r.x + Math.max(1, r.w)) return i;
    }
    return -1;
  }
  function pathOf(i) {
    const p = [];
    for (let r = F.rects[i]; r && r.depth > 0; r = F.rects[r.up]) p.unshift(r.node.name);
    return p;
  }
  function hoverAt(x, y) {
    const i = x < 0 ? -1 : hit(x, y);
    const tip = F.el.tip;
    if (i !== F.hover) { F.hover = i; paint(); }
    if (i < 0) { tip.hidden = true; return; }
    const nd = F.rects[i].node, total = F.acc.root.n, focus = focusChain().pop();
    tip.textContent = `${F.rects[i].depth ? nd.name : 'all'}\n${fmtN(nd.n)} events, ${pct(nd.n, total)} of all` +
      (F.zoom.length ? `, ${pct(nd.n, focus.n)} of the zoomed frame` : '') + (nd.self ? `; ${fmtN(nd.self)} end here` : '');
    tip.hidden = false;
    const wrap = F.el.cv.parentElement;
    tip.style.left = Math.min(x + 12, Math.max(0, wrap.clientWidth - tip.offsetWidth - 4)) + 'px';
    tip.style.top = (y + 16) + 'px';
  }

  const api = {
    open(v) { F.viewer = v; F.acc = null; F.dirty = true; F.job = null; F.zoom = []; schedule(0); }, // (a URL's zoom: applyState, after)
    close(v) { if (F.viewer === v) { F.viewer = null; F.job = null; F.acc = null; F.rects = []; } },
    change(v, c) {
      if (v !== F.viewer) return;
      F.dirty = true; // rows came or left, or a filter changed: a recount (when shown)
      if (c.reset) { clearTimeout(F.timer); F.timer = 0; }
      schedule(c.reset ? 0 : pause());
    },
    show(on) {
      F.el.panel.hidden = !on;
      document.getElementById('fg-toggle').setAttribute('aria-pressed', String(on));
      if (on) paint();
      syncUrl(false);
    },
    build,
    isOpen: () => !!F.el && !F.el.panel.hidden,
    zoomPath: () => F.zoom.slice(),
    zoomTo, filterTo,
    /* the view from the URL: open or not, and the zoomed path (kept until its frames arrive) */
    applyState(open, path) { F.zoom = path ? path.split(';').filter(Boolean) : []; if (open !== api.isOpen()) api.show(open); else paint(); },
    // for tests: the tree's counts ({name, n, self, kids: […]}, kids widest first) once counted
    state() {
      const busy = !!(F.job || F.dirty || F.timer || !F.acc);
      const out = (nd, d) => ({ name: nd.name, n: nd.n, self: nd.self, kids: d ? [...nd.kids.values()].sort((a, b) => b.n - a.n).map((k) => out(k, d - 1)) : [] });
      return { busy, slowest: F.slowest || 0, zoom: F.zoom.slice(), tree: F.acc ? out(F.acc.root, 3) : null, dropped: F.acc ? F.acc.dropped : 0 };
    },
    /* the painted frames, for tests: name, depth and box in CSS pixels */
    frames: () => F.rects.map((r, i) => ({ i, name: r.depth ? r.node.name : 'all', n: r.node.n, depth: r.depth, x: r.x, y: r.y, w: r.w, path: pathOf(i) })),
  };
  return api;
})();
EventViews.push(Flame);
installView(Flame, 'Flame graph', 'fg-toggle');

/* the selected event's stack in the event panel (app.js showDetail): its frames innermost first,
 * module!symbol+offset with the address beside; a StackWalk row's raw walk is shown as such */
function showStack(ev) {
  const box = $('detail-stack-box'), ol = $('detail-stack');
  const own = EtwStacks.of(ev), fr = own || EtwStacks.walkOf(ev);
  box.hidden = !fr;
  ol.textContent = '';
  if (!fr) return;
  const d = ev.EventData || {};
  $('detail-stack-h').textContent = own ? `Stack, innermost first (${fmtN(fr.length)} frames)`
    : `Stack walk of thread ${valText(d.StackThread)} of process ${valText(d.StackProcess)}, innermost first (${fmtN(fr.length)} raw addresses, not attached to its event)`;
  const frag = document.createDocumentFragment();
  const MAX = 512; // frames listed (a stack has at most a few hundred)
  for (const f of fr.slice(0, MAX)) {
    const lbl = EtwStacks.label(f), adr = EtwStacks.addressOf(f);
    frag.append(h('li', null, h('span', { class: 'fr', text: lbl }), adr && adr !== lbl ? h('span', { class: 'muted addr', text: ' ' + adr }) : null));
  }
  if (fr.length > MAX) frag.append(h('li', { class: 'muted', text: `… ${fmtN(fr.length - MAX)} more frames (in the JSON below)` }));
  ol.append(frag);
}
