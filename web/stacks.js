/* etwd web page — call stacks of events (issue 21 items 4, 5). Pure functions, no DOM: the page
 * loads this file as a classic script (globalThis.EtwStacks); node tests load it with require().
 *
 * An event's stack is its top-level "Stack" array, innermost frame first. A frame is an object
 * {Address, Module, Symbol, Offset} (Linux live stacks, attached ETL stacks) or a bare address
 * string ("0x7ffe…"). A "Stack" inside EventData (an ETL StackWalk row delivered on its own) is
 * the stack of another event: the event panel shows it (walkOf), the flame graph and the folded
 * export do not count it — the same rule as etwcore/src/folded.c (`etwd convert --format folded`).
 *
 * Folded names follow folded.c exactly: `Module!Symbol` (Symbol alone without a Module), else
 * `Module+0xOFFSET` (Module alone without a numeric Offset), else the Address (`?` if none); a
 * bare-address frame is its text; `;`, spaces and control characters become `_`. A line lists
 * the frames root first, then a space and the count; lines are sorted by their stack text in
 * byte (UTF-8) order. */
'use strict';
(function (root) {
  const BIG = /^\u0000-?\d+$/; // the page marks 64-bit integers as strings with a leading NUL
  const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
  const nonEmpty = (v) => typeof v === 'string' && v !== '';
  const clean = (s) => s.replace(/[;\u0000-\u0020]/g, '_');

  /* an Offset as folded.c prints it (%llx of the number), or null when it is not a number */
  function offHex(o) {
    if (typeof o === 'number' && Number.isFinite(o)) return o >= 0 ? BigInt(Math.trunc(o)).toString(16) : null;
    if (typeof o === 'string' && BIG.test(o)) { const n = Number(o.slice(1)); return n >= 0 ? BigInt(n).toString(16) : null; }
    return null;
  }

  /* the event's own stack (innermost first), or null (none, or an empty one) */
  function of(ev) {
    const st = ev && !ev.Gap ? ev.Stack : undefined;
    return Array.isArray(st) && st.length ? st : null;
  }
  /* a StackWalk row's stack (EventData.Stack: the walk of thread StackThread), or null */
  function walkOf(ev) {
    const d = ev && ev.EventData;
    return isObj(d) && Array.isArray(d.Stack) && d.Stack.length ? d.Stack : null;
  }

  /* a frame's name in the folded text (folded.c put_frame) */
  function foldName(fr) {
    if (typeof fr === 'string') return clean(fr);
    if (!isObj(fr)) return '?';
    const m = nonEmpty(fr.Module);
    if (nonEmpty(fr.Symbol)) return (m ? clean(fr.Module) + '!' : '') + clean(fr.Symbol);
    if (m) { const o = offHex(fr.Offset); return clean(fr.Module) + (o !== null ? '+0x' + o : ''); }
    return typeof fr.Address === 'string' ? clean(fr.Address) : '?';
  }
  /* a frame as the event panel shows it: module!symbol+0xoffset (what is known of it) */
  function label(fr) {
    if (typeof fr === 'string') return fr;
    if (!isObj(fr)) return '?';
    const o = offHex(fr.Offset);
    const m = nonEmpty(fr.Module) ? fr.Module : '';
    if (nonEmpty(fr.Symbol)) return (m ? m + '!' : '') + fr.Symbol + (o !== null ? '+0x' + o : '');
    if (m) return m + (o !== null ? '+0x' + o : '');
    return typeof fr.Address === 'string' ? fr.Address : '?';
  }
  const addressOf = (fr) => (typeof fr === 'string' ? fr : isObj(fr) && typeof fr.Address === 'string' ? fr.Address : '');

  /* the folded names of the event's stack, root first; null without a stack */
  function names(ev) {
    const st = of(ev);
    if (!st) return null;
    const out = new Array(st.length);
    for (let i = 0; i < st.length; i++) out[st.length - 1 - i] = foldName(st[i]);
    return out;
  }

  /* compare two strings in UTF-8 byte order (= code point order; JS's < compares UTF-16 units) */
  function cmpBytes(a, b) {
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      let x = a.charCodeAt(i), y = b.charCodeAt(i);
      if (x === y) continue;
      if (x >= 0xd800 && x <= 0xdfff) x += 0x10000; // a surrogate: above every BMP code point
      if (y >= 0xd800 && y <= 0xdfff) y += 0x10000;
      return x < y ? -1 : 1;
    }
    return a.length - b.length;
  }

  /* events → Map(stack text → count), over the events that carry a stack */
  function fold(events, into = new Map()) {
    for (const ev of events) {
      const n = names(ev);
      if (!n) continue;
      const k = n.join(';');
      into.set(k, (into.get(k) || 0) + 1);
    }
    return into;
  }
  /* the collapsed-stack text of a fold() map: `root;…;leaf COUNT` lines, sorted */
  function foldedText(map) {
    const keys = [...map.keys()].sort(cmpBytes);
    let s = '';
    for (const k of keys) s += k + ' ' + map.get(k) + '\n';
    return s;
  }

  const api = { of, walkOf, foldName, label, addressOf, names, fold, foldedText, cmpBytes };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.EtwStacks = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
