/* etwd web page — the field filter language (issue 22 item 2). Pure functions, no DOM: the page
 * loads this file as a classic script (globalThis.EtwFilter); node tests load it with require().
 *
 * Grammar (whitespace between tokens is free):
 *   expr    := and ( '||' and )*
 *   and     := unary ( '&&' unary )*
 *   unary   := '!' unary | '(' expr ')' | test
 *   test    := field op value | field 'in' '(' value ( ',' value )* ')'
 *   op      := '==' | '!=' | '<' | '<=' | '>' | '>=' | '~' | '!~'
 *   field   := name ( '.' name )*          name := [A-Za-z_][A-Za-z0-9_]*
 *   value   := number (decimal or 0x hex) | "string" | 'string' | /regex/flags | bare word
 * Fields are paths into the event object (System.Execution.ProcessID, EventData.filename, seq).
 * Shorthands (any case): pid tid cpu Provider Event Level Id Opcode Task Keywords Time Process Host seq.
 * A single name that is neither a shorthand nor a top-level key means EventData.<name>.
 * Semantics: a missing field makes every test false (so `!(x == 1)` is true for events without x).
 * ==, != and the ordering operators compare as numbers when both sides are numbers (64-bit exact),
 * else as strings (case-sensitive). `~` is a case-insensitive substring test, or with /re/ a regex
 * test; `!~` is its negation. `in` is == against any of the listed values.
 * `stack` (any case) is the event's call stack (web/stacks.js): its frames as the flame graph and
 * the folded export name them (`kernel!do_syscall_64`, `libc.so.6+0x2724a`); `==`, `in` and `~`
 * hold when some frame matches, `!=` and `!~` when none does (`stack == "prog!inner"`); an event
 * without a stack fails every test. The ordering operators do not apply to it. */
'use strict';
(function (root) {
  const SHORT = {
    pid: 'System.Execution.ProcessID', tid: 'System.Execution.ThreadID', cpu: 'System.Execution.ProcessorID',
    provider: 'System.Provider.Name', event: 'System.EventName', level: 'System.Level', id: 'System.EventID',
    opcode: 'System.Opcode', task: 'System.Task', keywords: 'System.Keywords', time: 'System.TimeCreated',
    process: 'System.Execution.ProcessName', host: 'System.Host', seq: 'seq',
  };
  const TOP = new Set(['seq', 'System', 'EventData', 'Undecoded', 'Gap']);
  const SHORT_NAMES = ['pid', 'tid', 'cpu', 'Provider', 'Event', 'Level', 'Id', 'Opcode', 'Task', 'Keywords', 'Time', 'Process', 'Host', 'seq', 'stack'];
  // the frame names of an event's stack (web/stacks.js: a global in the page, require() in node)
  const stackNames = (ev) => (typeof module !== 'undefined' && module.exports ? require('./stacks.js') : root.EtwStacks).names(ev);

  class FilterError extends Error {
    constructor(msg, pos) { super(`${msg} at column ${pos + 1}`); this.pos = pos; }
  }

  /* ----- tokens: {t: kind, v: value, p: position} ----- */
  const OPS = ['&&', '||', '==', '!=', '<=', '>=', '!~', '<', '>', '~', '!', '(', ')', ','];
  function tokenize(s) {
    const out = [];
    let i = 0;
    while (i < s.length) {
      const c = s[i];
      if (/\s/.test(c)) { i++; continue; }
      const p = i;
      if (c === '"' || c === "'") {
        let v = '';
        i++;
        while (i < s.length && s[i] !== c) {
          if (s[i] === '\\' && i + 1 < s.length) i++;
          v += s[i++];
        }
        if (i >= s.length) throw new FilterError('unterminated string', p);
        i++;
        out.push({ t: 'str', v, p });
        continue;
      }
      if (c === '/') {
        let v = '';
        i++;
        while (i < s.length && s[i] !== '/') {
          if (s[i] === '\\' && i + 1 < s.length) v += s[i++];
          v += s[i++];
        }
        if (i >= s.length) throw new FilterError('unterminated /regex/', p);
        i++;
        let fl = '';
        while (i < s.length && /[a-z]/.test(s[i])) fl += s[i++];
        let re;
        try { re = new RegExp(v, fl); } catch (e) { throw new FilterError('bad regex: ' + e.message, p); }
        out.push({ t: 're', v: re, p });
        continue;
      }
      const op = OPS.find((o) => s.startsWith(o, i));
      if (op) { out.push({ t: op, p }); i += op.length; continue; }
      const m = /^[^\s()&|!=<>~,"']+/.exec(s.slice(i));
      if (!m) throw new FilterError(`unexpected '${c}'`, p);
      out.push({ t: 'word', v: m[0], p });
      i += m[0].length;
    }
    out.push({ t: 'end', p: s.length });
    return out;
  }

  /* ----- values ----- */
  const INT = /^-?(?:\d+|0x[0-9a-f]+)$/i;
  const NUM = /^-?(?:\d+\.?\d*(?:e[+-]?\d+)?|0x[0-9a-f]+)$/i;
  // the page marks 64-bit integers as strings with a leading NUL (see app.js parseEvents)
  const unmark = (v) => (typeof v === 'string' && v.charCodeAt(0) === 0 ? v.slice(1) : v);
  function numOf(v) {
    if (typeof v === 'number') return v;
    if (typeof v === 'bigint') return v;
    if (typeof v !== 'string' || !NUM.test(v)) return null;
    if (INT.test(v)) {
      const neg = v[0] === '-';
      const b = BigInt(neg ? v.slice(1) : v) * (neg ? -1n : 1n);
      return b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : b;
    }
    return Number(v);
  }
  function cmpNum(a, b) {
    if (typeof a === 'bigint' || typeof b === 'bigint') {
      if (!Number.isInteger(a) && typeof a !== 'bigint') return a < Number(b) ? -1 : a > Number(b) ? 1 : 0;
      if (!Number.isInteger(b) && typeof b !== 'bigint') return Number(a) < b ? -1 : Number(a) > b ? 1 : 0;
      a = BigInt(a); b = BigInt(b);
    }
    return a < b ? -1 : a > b ? 1 : 0;
  }
  const textOfValue = (v) => (v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v).replace(/\\u0000/g, '') : String(unmark(v)));

  /* compare an event value with a literal: -1/0/1, or NaN when not comparable */
  function compare(v, lit) {
    v = unmark(v);
    if (lit.num !== null) {
      const n = typeof v === 'number' ? v : typeof v === 'string' ? numOf(v) : typeof v === 'boolean' ? Number(v) : null;
      if (n !== null) return cmpNum(n, lit.num);
    }
    if (v === null || typeof v === 'object') return NaN;
    const s = String(v);
    return s < lit.str ? -1 : s > lit.str ? 1 : 0;
  }

  /* ----- paths ----- */
  function resolve(name) {
    const short = SHORT[name.toLowerCase()];
    if (short) return short.split('.');
    const parts = name.split('.');
    if (parts.length === 1 && !TOP.has(name)) return ['EventData', name];
    return parts;
  }
  function getter(parts) {
    return (ev) => {
      let v = ev;
      for (const k of parts) { if (v === null || typeof v !== 'object') return undefined; v = v[k]; }
      return v;
    };
  }

  /* ----- parser: builds closures (the page's CSP forbids eval) ----- */
  function parse(src) {
    const tk = tokenize(src);
    let i = 0;
    const peek = () => tk[i];
    const want = (t, what) => { if (tk[i].t !== t) throw new FilterError(`expected ${what}${gotText(tk[i])}`, tk[i].p); return tk[i++]; };
    const gotText = (t) => (t.t === 'end' ? ' but the expression ended' : t.t === 'word' || t.t === 'str' ? ` but found '${t.v}'` : t.t === 're' ? ' but found a regex' : ` but found '${t.t}'`);
    function literal() {
      const t = tk[i];
      if (t.t === 'word' || t.t === 'str') {
        i++;
        return { str: t.v, num: t.t === 'word' ? numOf(t.v) : null, re: null };
      }
      if (t.t === 're') { i++; return { str: String(t.v), num: null, re: t.v }; }
      throw new FilterError('expected a value' + gotText(t), t.p);
    }
    function test() {
      const f = tk[i];
      if (f.t !== 'word' || !/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(f.v))
        throw new FilterError('expected a field name' + gotText(f), f.p);
      i++;
      if (f.v.toLowerCase() === 'stack') return stackTest();
      const get = getter(resolve(f.v));
      const o = tk[i];
      if (o.t === 'word' && o.v === 'in') {
        i++;
        want('(', "'(' after in");
        const lits = [literal()];
        while (peek().t === ',') { i++; lits.push(literal()); }
        want(')', "')' to close the list");
        return (ev) => { const v = get(ev); return v !== undefined && lits.some((l) => compare(v, l) === 0); };
      }
      if (!['==', '!=', '<', '<=', '>', '>=', '~', '!~'].includes(o.t))
        throw new FilterError(`expected an operator (== != < <= > >= ~ !~ in) after '${f.v}'` + gotText(o), o.p);
      i++;
      const lit = literal();
      if (lit.re && o.t !== '~' && o.t !== '!~') throw new FilterError(`a /regex/ needs ~ or !~, not ${o.t}`, o.p);
      switch (o.t) {
        case '==': return (ev) => { const v = get(ev); return v !== undefined && compare(v, lit) === 0; };
        case '!=': return (ev) => { const v = get(ev); return v !== undefined && compare(v, lit) !== 0; };
        case '<': return (ev) => { const v = get(ev); return v !== undefined && compare(v, lit) < 0; };
        case '<=': return (ev) => { const v = get(ev); return v !== undefined && compare(v, lit) <= 0; };
        case '>': return (ev) => { const v = get(ev); return v !== undefined && compare(v, lit) > 0; };
        case '>=': return (ev) => { const v = get(ev); return v !== undefined && compare(v, lit) >= 0; };
      }
      const has = lit.re ? (s) => { lit.re.lastIndex = 0; return lit.re.test(s); } : ((w) => (s) => s.toLowerCase().includes(w))(lit.str.toLowerCase());
      const neg = o.t === '!~';
      return (ev) => { const v = get(ev); return v !== undefined && has(textOfValue(v)) !== neg; };
    }
    /* `stack op value`: a test on each frame name; == in ~ hold for some frame, != !~ for none */
    function stackTest() {
      const o = tk[i];
      const isIn = o.t === 'word' && o.v === 'in';
      if (!isIn && !['==', '!=', '~', '!~'].includes(o.t))
        throw new FilterError("expected an operator (== != ~ !~ in) after 'stack'" + gotText(o), o.p);
      i++;
      let lits;
      if (isIn) {
        want('(', "'(' after in");
        lits = [literal()];
        while (peek().t === ',') { i++; lits.push(literal()); }
        want(')', "')' to close the list");
      } else lits = [literal()];
      const l0 = lits[0];
      if (l0.re && o.t !== '~' && o.t !== '!~') throw new FilterError(`a /regex/ needs ~ or !~, not ${o.t}`, o.p);
      const one = o.t === '~' || o.t === '!~'
        ? (l0.re ? (s) => { l0.re.lastIndex = 0; return l0.re.test(s); } : ((w) => (s) => s.toLowerCase().includes(w))(l0.str.toLowerCase()))
        : (s) => lits.some((l) => s === l.str);
      const neg = o.t === '!=' || o.t === '!~';
      return (ev) => { const n = stackNames(ev); return !!n && n.some(one) !== neg; };
    }
    function unary() {
      const t = peek();
      if (t.t === '!') { i++; const a = unary(); return (ev) => !a(ev); }
      if (t.t === '(') { i++; const a = orExpr(); want(')', "')'"); return a; }
      return test();
    }
    function andExpr() {
      let a = unary();
      while (peek().t === '&&') { i++; const l = a, r = unary(); a = (ev) => l(ev) && r(ev); }
      return a;
    }
    function orExpr() {
      let a = andExpr();
      while (peek().t === '||') { i++; const l = a, r = andExpr(); a = (ev) => l(ev) || r(ev); }
      return a;
    }
    const fn = orExpr();
    if (peek().t !== 'end') throw new FilterError("expected && or || or the end" + gotText(peek()), peek().p);
    return fn;
  }

  /* compile(expr) -> (event) => bool; an empty expression keeps everything; throws FilterError */
  const KEEP_ALL = () => true; // the one predicate of an empty expression: callers may test for it
  function compile(expr) {
    if (!expr || !expr.trim()) return KEEP_ALL;
    const fn = parse(expr);
    return (ev) => !!ev && !ev.Gap && fn(ev);
  }

  /* the free-text box searches this: what the default columns show (provider, event name and id,
   * process, thread, the EventData names and values, an undecoded reason) and the host — never
   * seq, time or keywords, so a number typed there does not match a sequence number by accident */
  function textOf(ev) {
    if (!ev) return '';
    if (ev.Gap) return `${ev.Gap.Dropped} events dropped ${ev.Gap.Layer || ''} ${ev.Gap.Reason || ''}`.toLowerCase();
    const s = ev.System || {}, x = s.Execution || {};
    let t = `${(s.Provider && s.Provider.Name) || ''} ${s.EventName || ''} ${s.EventID ?? ''} ${x.ProcessID ?? ''} ${x.ThreadID ?? ''} ${x.ProcessName || ''} ${s.Host || ''}`;
    const d = ev.EventData;
    if (d && typeof d === 'object') for (const k in d) t += ' ' + k + '=' + textOfValue(d[k]);
    if (ev.Undecoded) t += ' undecoded ' + (ev.Undecoded.Reason || '');
    return t.toLowerCase();
  }

  /* field paths of one event (System leaves and EventData members), for completion and columns */
  function fieldsOf(ev, into = new Set()) {
    const walk = (o, pre, depth) => {
      for (const k in o) {
        const v = o[k];
        if (v && typeof v === 'object' && !Array.isArray(v) && depth < 3) walk(v, pre + k + '.', depth + 1);
        else into.add(pre + k);
      }
    };
    if (ev && ev.System) walk(ev.System, 'System.', 0);
    if (ev && ev.EventData && typeof ev.EventData === 'object') for (const k in ev.EventData) into.add('EventData.' + k);
    return into;
  }

  /* completion at the caret: the field-name token being typed and the fields that fit it.
   * Returns {start, end, items} (items empty where a value, not a field, is expected). */
  function complete(text, caret, fields) {
    let start = caret;
    while (start > 0 && /[A-Za-z0-9_.]/.test(text[start - 1])) start--;
    let end = caret;
    while (end < text.length && /[A-Za-z0-9_.]/.test(text[end])) end++;
    const before = text.slice(0, start).trimEnd();
    const fieldPos = before === '' || /(&&|\|\||!|\()$/.test(before);
    if (!fieldPos) return { start, end, items: [] };
    const pre = text.slice(start, caret).toLowerCase();
    const all = [...SHORT_NAMES, ...fields];
    const seen = new Set();
    const items = [];
    for (const pass of [0, 1]) { // names starting with what was typed first, then later path parts
      for (const f of all) {
        const l = f.toLowerCase();
        if (seen.has(f) || !(pass ? pre && l.includes('.' + pre) : l.startsWith(pre))) continue;
        seen.add(f);
        items.push(f);
      }
    }
    return { start, end, items: items.slice(0, 50) };
  }

  const api = { compile, KEEP_ALL, textOf, fieldsOf, complete, resolve, getter, FilterError, SHORTHANDS: SHORT };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.EtwFilter = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
