/* etwd web page — the view as a URL fragment (issue 22 item 5): which session is open, the field
 * filter, the free text, the columns, the sort and the relative-time base, e.g.
 *   #session=5&filter=pid%20%3D%3D%201234&text=exec&cols=time,provider,f:EventData.filename&sort=-pid
 * and the flame graph (web/flame.js): flame=1 when its panel is open, fz=a;b;c its zoomed frame's
 * path from the root (folded frame names, which never hold a `;`).
 * Pure functions (no DOM); the page keeps location.hash in step with what is shown (pushState
 * for a new session or a committed filter, replaceState for the rest) and applies the fragment
 * after login, on reload and on the back button (popstate). */
'use strict';
(function (root) {
  const KEYS = ['session', 'filter', 'text', 'cols', 'sort', 'rel', 'flame', 'fz'];

  /* "#session=5&filter=…" -> {session: 5, filter: '…', …} (unknown keys and bad values ignored) */
  function parse(hash) {
    const out = {};
    const p = new URLSearchParams(String(hash || '').replace(/^#/, ''));
    for (const k of KEYS) {
      const v = p.get(k);
      if (v === null) continue;
      if (k === 'session') { if (/^\d+$/.test(v)) out.session = Number(v); }
      else if (k === 'cols') out.cols = v.split(',').filter(Boolean);
      else out[k] = v;
    }
    return out;
  }

  /* the inverse: empty values are left out, keys in a fixed order (equal views, equal URLs) */
  function format(st) {
    const p = new URLSearchParams();
    for (const k of KEYS) {
      const v = st[k];
      if (v === undefined || v === null || v === '' || (Array.isArray(v) && !v.length)) continue;
      p.set(k, Array.isArray(v) ? v.join(',') : String(v));
    }
    const s = p.toString().replace(/\+/g, '%20');
    return s ? '#' + s : '';
  }

  const same = (a, b) => format(a) === format(b);

  const api = { parse, format, same };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.EtwState = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
