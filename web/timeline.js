/* etwd web page: the timeline — the viewer's kept events on a time axis, one lane per provider,
 * process or CPU (the busiest 12; the rest share "other"), drawn on a canvas. Where a lane has
 * more events than can be drawn one by one (more than a quarter of its width in pixels) it is a
 * heat strip of counts per pixel column. Wheel or +/- zooms, shift+drag, middle drag or the arrow
 * keys pan, a drag brushes a time range that filters the table (predicate "time"), a click or
 * Escape clears it. The bins are counted by the viewer's Worker (web/worker.js 'timeline': one
 * pass over the kept rows, their times parsed once and cached there); this file asks for them and
 * paints. Redraws are coalesced to one per animation frame and, while events stream in, at most 4
 * a second. Main thread only; uses app.js's h(), fmtN() and EventViews. */
'use strict';

const Timeline = (() => {
  const LANE_H = 18, AXIS_H = 20, LABEL_W = 120, MAX_LANES = 12;
  const COLORS = ['#0b5cad', '#2ca02c', '#d62728', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#1f77b4', '#6b4e00', '#888'];
  const T = {
    viewer: null, by: 'provider', win: null, range: null, drag: null, el: null,
    raf: 0, timer: 0, lastDraw: 0, full: [0, 0], shown: 0, lanes: [],
  };

  const fmtT = (ms) => {
    if (!Number.isFinite(ms)) return '';
    const base = Math.floor(ms);
    const us = Math.floor((ms - base) * 1000);
    return new Date(base).toISOString().slice(11, 23) + String(us).padStart(3, '0').slice(0, 3);
  };

  const LANES = { // the lane keys: web/events.js LANE
    provider: { label: 'Provider', name: (k) => k },
    process: { label: 'Process', name: (k) => (k[0] === '(' ? k : 'pid ' + k) },
    cpu: { label: 'CPU', name: (k) => (k[0] === '(' ? k : 'CPU ' + k) },
  };

  /* ----- DOM ----- */
  function build() {
    const by = h('select', { id: 'tl-lanes' });
    for (const [k, v] of Object.entries(LANES)) by.append(h('option', { value: k, text: v.label, selected: k === T.by }));
    const btn = (id, text, fn, label) => h('button', { type: 'button', id, text, onclick: fn, 'aria-label': label || null });
    const cv = h('canvas', { id: 'timeline', tabindex: '0', role: 'img', 'aria-label': 'Timeline of the kept events', height: 100 });
    const info = h('span', { id: 'tl-info', class: 'muted', role: 'status' });
    const panel = h('section', { id: 'tl-panel', class: 'view-panel', hidden: true, 'aria-label': 'Timeline' },
      h('div', { class: 'toolbar' }, h('label', { class: 'inline' }, 'Lanes by', by),
        btn('tl-zoom-in', '+', () => zoom(0.5), 'Zoom in'), btn('tl-zoom-out', '−', () => zoom(2), 'Zoom out'),
        btn('tl-fit', 'Fit', () => { T.win = null; redraw(); }, 'Fit all kept events'),
        btn('tl-clear', 'Clear range', () => setRange(null)), info),
      h('div', { class: 'tl-wrap' }, cv),
      h('p', { class: 'muted hint', text: 'Drag to choose a time range (it filters the table); click or Esc clears it. Wheel or +/− zooms; shift+drag, middle drag or ←/→ pans.' }));
    by.addEventListener('change', () => { T.by = by.value; redraw(); });
    cv.addEventListener('mousedown', down);
    cv.addEventListener('wheel', (e) => { e.preventDefault(); const f = e.deltaY > 0 ? 1.25 : 0.8; zoom(f, tAt(e.offsetX)); }, { passive: false });
    cv.addEventListener('keydown', key);
    T.el = { panel, by, cv, info };
    return panel;
  }

  /* ----- geometry ----- */
  const plotW = () => Math.max(10, T.el.cv.clientWidth - LABEL_W);
  function curWin() { return T.bins ? T.bins.win : T.win || T.full; } // what is on screen
  function tAt(x) { const [a, b] = curWin(); return a + ((x - LABEL_W) / plotW()) * (b - a); }
  function xAt(t) { const [a, b] = curWin(); return LABEL_W + ((t - a) / Math.max(1e-9, b - a)) * plotW(); }

  const wantWin = () => T.win || T.full; // the window asked for (curWin: the one painted)
  function zoom(f, at) {
    const [a, b] = wantWin();
    if (!(b > a)) return;
    const c = at !== undefined ? at : T.range ? (T.range[0] + T.range[1]) / 2 : (a + b) / 2;
    const na = c - (c - a) * f, nb = c + (b - c) * f;
    if (nb - na < 1e-4) return; // 0.1 µs
    T.win = [na, nb];
    redraw();
  }
  function pan(frac) {
    const [a, b] = wantWin();
    const d = (b - a) * frac;
    T.win = [a + d, b + d];
    redraw();
  }

  function down(e) {
    if (e.offsetX < LABEL_W) return;
    e.preventDefault();
    T.el.cv.focus();
    const panMode = e.shiftKey || e.button === 1;
    T.drag = { x0: e.offsetX, t0: tAt(e.offsetX), pan: panMode, win: curWin().slice(), moved: false };
    const move = (ev) => {
      const d = T.drag;
      const x = ev.clientX - T.el.cv.getBoundingClientRect().left;
      if (Math.abs(x - d.x0) > 2) d.moved = true;
      if (d.pan) {
        const dt = ((x - d.x0) / plotW()) * (d.win[1] - d.win[0]);
        T.win = [d.win[0] - dt, d.win[1] - dt];
      } else if (d.moved) {
        const t = tAt(x);
        T.brush = [Math.min(d.t0, t), Math.max(d.t0, t)];
      }
      if (d.pan) redraw(); else paint();
    };
    const up = () => {
      window.removeEventListener('mousemove', move);
      window.removeEventListener('mouseup', up);
      const d = T.drag;
      T.drag = null;
      const b = T.brush;
      T.brush = null;
      if (!d.pan) setRange(d.moved && b ? b : null);
      else redraw();
    };
    window.addEventListener('mousemove', move);
    window.addEventListener('mouseup', up);
  }

  function key(e) {
    switch (e.key) {
      case '+': case '=': zoom(0.5); break;
      case '-': zoom(2); break;
      case 'ArrowLeft': pan(-0.2); break;
      case 'ArrowRight': pan(0.2); break;
      case 'Escape': setRange(null); break;
      case '0': T.win = null; redraw(); break;
      default: return;
    }
    e.preventDefault();
  }

  /* the brushed range [a, b] in ms (inclusive), or null: filters the table */
  function setRange(r) {
    T.range = r && r[1] >= r[0] ? [r[0], r[1]] : null;
    if (T.viewer) {
      const rg = T.range;
      T.viewer.setPredicate('time', rg ? [rg[0], rg[1]] : null);
    }
    paint();
  }

  /* ----- drawing ----- */
  /* redraw(): ask the worker for new bins, then paint; paint(): only repaint the last bins (the
   * brush being dragged) */
  function redraw(now) {
    if (!T.el || T.el.panel.hidden) return;
    if (now) { cancelAnimationFrame(T.raf); T.raf = 0; clearTimeout(T.timer); T.timer = 0; startBin(); return; }
    if (T.raf || T.timer) return;
    T.raf = requestAnimationFrame(() => { T.raf = 0; startBin(); });
  }
  function redrawLive() { // while rows stream in
    if (!T.el || T.el.panel.hidden || T.raf || T.timer) return;
    if (T.job) { T.again = true; return; }
    // at most 4 a second, and no more than ~10 % of the time when binning is slow (200k rows)
    const wait = Math.max(0, Math.max(250, 10 * (T.lastMs || 0)) - (performance.now() - T.lastDraw));
    T.timer = setTimeout(() => { T.timer = 0; redraw(); }, wait);
  }

  function startBin() {
    const v = T.viewer;
    if (!v) { T.bins = { lanes: [], shown: 0, win: T.win || T.full, W: plotW(), by: T.by }; paint(); return; }
    const job = (T.job = { t0: performance.now() });
    T.again = false;
    T.lastDraw = job.t0;
    v.call({ op: 'timeline', by: T.by, win: T.win && T.win.slice(), W: plotW(), max: MAX_LANES }).then((res) => {
      if (T.job !== job) return;
      T.job = null;
      T.lastMs = performance.now() - job.t0; // the worker's time and the wait for it
      const t0 = performance.now();
      T.full = res.full;
      T.bins = res;
      paint();
      T.slowest = Math.max(T.slowest || 0, performance.now() - t0); // for bench/page_busy.mjs (the page's work)
      if (T.again) redrawLive();
    });
  }

  function paint() {
    if (!T.bins || !T.el || T.el.panel.hidden) return;
    if (T.bins.W !== plotW()) { redraw(); return; } // resized
    const cv = T.el.cv;
    const { lanes, shown, W, by } = T.bins;
    const [a, b] = T.bins.win;
    const L = LANES[by];
    const kept = T.viewer ? T.viewer.st.kept : 0;
    T.lanes = lanes.map((l) => ({ key: l.k, count: l.n }));
    T.shown = shown;
    // canvas size
    const dpr = window.devicePixelRatio || 1;
    const cssW = cv.clientWidth, cssH = Math.max(3, lanes.length) * LANE_H + AXIS_H;
    if (cv.style.height !== cssH + 'px') cv.style.height = cssH + 'px';
    const PW = Math.round(cssW * dpr), PH = Math.round(cssH * dpr);
    if (cv.width !== PW || cv.height !== PH) { cv.width = PW; cv.height = PH; }
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const css = getComputedStyle(cv);
    const fg = css.color || '#1b1f24';
    g.clearRect(0, 0, cssW, cssH);
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    lanes.forEach((l, i) => {
      const y = i * LANE_H;
      g.fillStyle = i % 2 ? 'rgba(127,127,127,.06)' : 'rgba(127,127,127,.12)';
      g.fillRect(LABEL_W, y, W, LANE_H);
      g.fillStyle = fg;
      const name = L.name(l.k) + (l.many ? ` (${l.many})` : '');
      g.fillText(name.length > 18 ? name.slice(0, 17) + '…' : name, 4, y + LANE_H / 2);
      const col = COLORS[i % COLORS.length];
      const dense = l.n > W / 4;
      if (!dense) { // one tick per event (events in one pixel column share it)
        g.fillStyle = col;
        g.beginPath();
        for (let x = 0; x < W; x++) if (l.bins[x]) g.rect(LABEL_W + x, y + 2, 1, LANE_H - 4);
        g.fill();
      } else { // heat strip: 8 shades by log count
        let max = 1;
        for (let x = 0; x < W; x++) if (l.bins[x] > max) max = l.bins[x];
        const lm = Math.log(max + 1);
        for (let q = 1; q <= 8; q++) {
          g.fillStyle = col;
          g.globalAlpha = 0.15 + (0.85 * q) / 8;
          g.beginPath();
          for (let x = 0; x < W; x++) {
            const c = l.bins[x];
            if (c && Math.max(1, Math.ceil((8 * Math.log(c + 1)) / lm)) === q) g.rect(LABEL_W + x, y + 1, 1, LANE_H - 2);
          }
          g.fill();
        }
        g.globalAlpha = 1;
      }
    });
    // axis
    const ay = lanes.length ? lanes.length * LANE_H : 3 * LANE_H;
    g.fillStyle = fg;
    g.strokeStyle = 'rgba(127,127,127,.6)';
    g.beginPath(); g.moveTo(LABEL_W, ay + 0.5); g.lineTo(LABEL_W + W, ay + 0.5); g.stroke();
    const step = niceStep((b - a) / Math.max(2, Math.floor(W / 140)));
    g.textBaseline = 'top';
    g.textAlign = 'center';
    for (let t = Math.ceil(a / step) * step; t <= b; t += step) {
      const x = Math.round(xAt(t)) + 0.5;
      g.beginPath(); g.moveTo(x, ay); g.lineTo(x, ay + 4); g.stroke();
      const lbl = fmtT(t).slice(0, step >= 1000 ? 8 : step >= 1 ? 12 : 15);
      g.fillText(lbl, Math.min(LABEL_W + W - 40, Math.max(LABEL_W + 40, x)), ay + 5);
    }
    g.textAlign = 'left';
    if (!lanes.length) { g.fillStyle = fg; g.fillText(kept ? 'No events in this time window.' : 'No events yet.', LABEL_W + 8, LANE_H); }
    // brushed range (and the range being dragged)
    for (const [rg, alpha] of [[T.range, 0.18], [T.brush, 0.28]]) {
      if (!rg) continue;
      const x0 = Math.max(LABEL_W, xAt(rg[0])), x1 = Math.min(LABEL_W + W, xAt(rg[1]));
      if (x1 < LABEL_W || x0 > LABEL_W + W) continue;
      g.fillStyle = `rgba(224,176,0,${alpha})`;
      g.fillRect(x0, 0, Math.max(1, x1 - x0), ay);
      g.strokeStyle = '#b08a00';
      g.strokeRect(x0 + 0.5, 0.5, Math.max(1, x1 - x0 - 1), ay - 1);
    }
    const rgText = T.range ? ` · range ${fmtT(T.range[0])} – ${fmtT(T.range[1])} UTC` : '';
    T.el.info.textContent = `${fmtN(shown)} events from ${fmtT(a)} to ${fmtT(b)} UTC in ${lanes.length} lanes${rgText}`;
    cv.setAttribute('aria-label', `Timeline: ${fmtN(shown)} events in ${lanes.length} lanes by ${L.label.toLowerCase()}` +
      (lanes.length ? ', busiest ' + lanes.slice(0, 3).map((l) => `${L.name(l.k)} ${fmtN(l.n)}`).join(', ') : '') + rgText);
    document.getElementById('tl-clear').disabled = !T.range;
  }
  function niceStep(v) {
    const e = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * e) return m * e;
    return 10 * e;
  }

  return {
    open(v) { T.viewer = v; T.win = null; T.range = null; T.job = null; redraw(); },
    close(v) { if (T.viewer === v) { T.viewer = null; T.range = null; T.job = null; } },
    change(v, c) { if (v === T.viewer && c.name !== 'time') redrawLive(); },
    show(on) { T.el.panel.hidden = !on; if (on) redraw(true); },
    build,
    resize() { redraw(); },
    // for tests and other views
    setRange, setWindow(w) { T.win = w ? [w[0], w[1]] : null; redraw(true); }, setLanes(by) { T.by = by; T.el.by.value = by; redraw(true); },
    state() { return { busy: !!(T.job || T.raf || T.timer), slowest: T.slowest, by: T.bins ? T.bins.by : T.by, win: curWin().slice(), range: T.range && T.range.slice(), lanes: T.lanes, shown: T.shown }; },
    xAt: (t) => xAt(t), tAt: (x) => tAt(x),
  };
})();
EventViews.push(Timeline);
installView(Timeline, 'Timeline', 'tl-toggle');
window.addEventListener('resize', () => Timeline.resize());
