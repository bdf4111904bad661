/* evcsv.c — CSV rows of encoded events (evcsv.h): RFC 4180 cells guarded against formula
 * injection (etw_csv_risky), and the mixed-form row of an event read back from its JSON text (the
 * System object's fixed shape: event.c's etw_event_write_system; compact JSON, as every writer of
 * events produces). No state. */
#include "etwcore/evcsv.h"

#include <stdint.h>
#include <string.h>

/* the index after the closing quote of the string whose text starts at s[i] (its opening quote
 * at s[i - 1]), or 0 when it does not end in s[0..n): libc's memchr finds each quote; one is the
 * end when an even number of backslashes precedes it */
static size_t str_end(const char *s, size_t i, size_t n) {
  for (;;) {
    const char *q = i < n ? memchr(s + i, '"', n - i) : NULL;
    if (!q) return 0;
    size_t k = (size_t)(q - s), b = 0;
    while (s[k - b - 1] == '\\') b++; /* (stops at the opening quote at the latest) */
    if (b % 2 == 0) return k + 1;
    i = k + 1;
  }
}

size_t etw_json_span(const char *s, size_t n) {
  if (!n) return 0;
  if (s[0] == '"') return str_end(s, 1, n);
  if (s[0] != '{' && s[0] != '[') { /* a scalar: up to the next delimiter */
    size_t i = 0;
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']') i++;
    return i;
  }
  int depth = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '"') {
      if (!(i = str_end(s, i + 1, n))) return 0;
      i--; /* (the loop's i++ goes past the closing quote) */
    } else if (c == '{' || c == '[') {
      depth++;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return 0;
}

/* -?D+(.D+)?([eE][+-]?D+)? (D a digit): what a spreadsheet reads as a number, not a formula */
static int plain_number(const char *s, size_t n) {
  size_t i = n && s[0] == '-', d;
  for (d = i; i < n && s[i] >= '0' && s[i] <= '9'; i++) {}
  if (i == d) return 0;
  if (i < n && s[i] == '.') {
    for (d = ++i; i < n && s[i] >= '0' && s[i] <= '9'; i++) {}
    if (i == d) return 0;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i += i + 1 < n && (s[i + 1] == '+' || s[i + 1] == '-') ? 2 : 1;
    for (d = i; i < n && s[i] >= '0' && s[i] <= '9'; i++) {}
    if (i == d) return 0;
  }
  return i == n;
}

int etw_csv_risky(const char *s, size_t n) {
  return n && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r') &&
         !plain_number(s, n);
}

/* Ends the quoted cell whose opening quote is at w->buf[@open]: its text (as written, each '"'
 * doubled — the first character and a number's text are the same either way) gets a leading
 * single quote when a spreadsheet would take it for a formula (etw_csv_risky), then the closing
 * quote. Every quoted cell ends here. */
static void cell_end(struct etw_jw *w, size_t open) {
  if (!w->err && open < w->len && etw_csv_risky(w->buf + open + 1, w->len - open - 1) && !etw_jw_reserve(w, 1)) {
    memmove(w->buf + open + 2, w->buf + open + 1, w->len - open - 1);
    w->buf[open + 1] = '\'';
    w->len++;
  }
  etw_jw_ch(w, '"');
}

/* @s with each '"' doubled (the inside of a quoted cell) */
static void cell_text(struct etw_jw *w, const char *s, size_t n) {
  while (n) {
    const char *q = memchr(s, '"', n);
    size_t k = q ? (size_t)(q - s) + 1 : n;
    etw_jw_raw(w, s, k);
    if (q) etw_jw_ch(w, '"');
    s += k;
    n -= k;
  }
}

void etw_csv_cell(struct etw_jw *w, const char *s, size_t n) {
  size_t open = w->len;
  etw_jw_ch(w, '"');
  cell_text(w, s, n);
  cell_end(w, open);
}

static int hex4(const char *p, const char *end, unsigned *v) {
  if (end - p < 4) return -1;
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
               : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
    if (d > 15) return -1;
    *v = *v << 4 | d;
  }
  return 0;
}

static void put_utf8(struct etw_jw *w, unsigned cp) {
  char b[4];
  size_t k;
  if (cp < 0x80) b[0] = (char)cp, k = 1;
  else if (cp < 0x800) b[0] = (char)(0xC0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 63)), k = 2;
  else if (cp < 0x10000)
    b[0] = (char)(0xE0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 63)), b[2] = (char)(0x80 | (cp & 63)), k = 3;
  else
    b[0] = (char)(0xF0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 63)), b[2] = (char)(0x80 | ((cp >> 6) & 63)),
    b[3] = (char)(0x80 | (cp & 63)), k = 4;
  etw_jw_raw(w, b, k);
}

void etw_csv_json_cell(struct etw_jw *w, const char *v, size_t n) {
  if (!n) return;
  if (v[0] != '"') {
    if (v[0] == '{' || v[0] == '[') etw_csv_cell(w, v, n);
    else if (n != 4 || memcmp(v, "null", 4)) etw_jw_raw(w, v, n);
    return;
  }
  const char *end = v + n - 1; /* the closing quote */
  size_t open = w->len;
  etw_jw_ch(w, '"');
  for (const char *p = v + 1; p < end; p++) {
    if (*p != '\\' || p + 1 >= end) {
      if (*p == '"') etw_jw_ch(w, '"');
      etw_jw_ch(w, *p);
      continue;
    }
    char e = *++p;
    unsigned cp, lo;
    switch (e) {
    case 'n': etw_jw_ch(w, '\n'); break;
    case 't': etw_jw_ch(w, '\t'); break;
    case 'r': etw_jw_ch(w, '\r'); break;
    case 'b': etw_jw_ch(w, '\b'); break;
    case 'f': etw_jw_ch(w, '\f'); break;
    case 'u':
      if (hex4(p + 1, end, &cp)) {
        etw_jw_lit(w, "\\u"); /* malformed: left as it is */
        break;
      }
      p += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && end - p > 6 && p[1] == '\\' && p[2] == 'u' && !hex4(p + 3, end, &lo) &&
          lo >= 0xDC00 && lo < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        p += 6;
      } else if (cp >= 0xD800 && cp < 0xE000) {
        cp = 0xFFFD; /* a lone surrogate: not UTF-8 */
      }
      if (cp == '"') etw_jw_ch(w, '"');
      put_utf8(w, cp);
      break;
    default: /* \" \\ \/ */
      if (e == '"') etw_jw_ch(w, '"');
      etw_jw_ch(w, e);
    }
  }
  cell_end(w, open);
}

void etw_csv_data_cell(struct etw_jw *w, const char *s, size_t n) {
  size_t obj = etw_json_span(s, n);
  if (!obj || obj >= n || s[obj] != ',' || s[0] != '{') {
    etw_csv_cell(w, s, n);
    return;
  }
  size_t open = w->len;
  etw_jw_ch(w, '"');
  cell_text(w, s, obj - 1);         /* EventData without its '}' */
  if (obj > 2) etw_jw_ch(w, ',');   /* EventData was not {} */
  cell_text(w, s + obj + 1, n - obj - 1); /* "Unparsed":{…} (and what follows) */
  etw_jw_ch(w, '}');
  cell_end(w, open);
}

/* the values of members @keys[0..nk) of the compact JSON object @o[0..n) (its top level), in one
 * pass: v[i] (vl[i] bytes), NULL when it has none */
static void members(const char *o, size_t n, const char *const *keys, size_t nk, const char **v, size_t *vl) {
  for (size_t k = 0; k < nk; k++) v[k] = NULL, vl[k] = 0;
  if (!o || !n || o[0] != '{') return;
  for (size_t i = 1; i < n && o[i] == '"';) {
    size_t ks = etw_json_span(o + i, n - i);
    if (!ks || i + ks >= n || o[i + ks] != ':') return;
    const char *key = o + i + 1;
    i += ks + 1;
    size_t vs = etw_json_span(o + i, n - i);
    if (!vs) return;
    for (size_t k = 0; k < nk; k++)
      if (!v[k] && strlen(keys[k]) == ks - 2 && !memcmp(key, keys[k], ks - 2)) {
        v[k] = o + i;
        vl[k] = vs;
        break;
      }
    i += vs;
    if (i < n && o[i] == ',') i++;
  }
}

/* whether @s[0..n) can be a cell as it is: letters, digits, . : + - only, and no formula */
static int bare_ok(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == ':' ||
          c == '+' || c == '-'))
      return 0;
  }
  return !etw_csv_risky(s, n);
}

/* a string member's text without its quotes (TimeCreated "2026-…Z", Keywords "0x…"), numbers as
 * they are, null and absent members empty; any other value (a nats publisher's event is its
 * own) as etw_csv_json_cell's quoted cell */
static void bare(struct etw_jw *w, const char *v, size_t n) {
  if (!v) return;
  if (n >= 2 && v[0] == '"' && bare_ok(v + 1, n - 2)) etw_jw_raw(w, v + 1, n - 2);
  else etw_csv_json_cell(w, v, n);
}

enum { S_TIME, S_PROV, S_NAME, S_ID, S_VER, S_LEVEL, S_TASK, S_OPCODE, S_KW, S_EXEC, S_HOST, S_N };
static const char *const SYS_KEYS[S_N] = {"TimeCreated", "Provider", "EventName", "EventID", "Version", "Level",
                                          "Task", "Opcode", "Keywords", "Execution", "Host"};
enum { X_PID, X_TID, X_PNAME, X_CPU, X_N };
static const char *const EXEC_KEYS[X_N] = {"ProcessID", "ThreadID", "ProcessName", "ProcessorID"};

void etw_csv_common(struct etw_jw *w, const char *seq, size_t seq_len, const char *sys, size_t syl) {
  const char *sv[S_N], *xv[X_N], *name;
  size_t sl[S_N], xl[X_N], nl;
  static const char *const NAME_KEY[1] = {"Name"};
  members(sys, syl, SYS_KEYS, S_N, sv, sl);
  members(sv[S_EXEC], sl[S_EXEC], EXEC_KEYS, X_N, xv, xl);
  members(sv[S_PROV], sl[S_PROV], NAME_KEY, 1, &name, &nl);
  etw_jw_raw(w, seq, seq_len);
  etw_jw_ch(w, ',');
  bare(w, sv[S_TIME], sl[S_TIME]);
  etw_jw_ch(w, ',');
  if (name) etw_csv_json_cell(w, name, nl);
  else etw_jw_lit(w, "\"\"");
  etw_jw_ch(w, ',');
  if (sv[S_NAME]) etw_csv_json_cell(w, sv[S_NAME], sl[S_NAME]);
  else etw_jw_lit(w, "\"\"");
  for (int k = S_ID; k <= S_KW; k++) { /* numbers; Keywords: "0x…" without its quotes */
    etw_jw_ch(w, ',');
    bare(w, sv[k], sl[k]);
  }
  etw_jw_ch(w, ',');
  bare(w, xv[X_PID], xl[X_PID]);
  etw_jw_ch(w, ',');
  bare(w, xv[X_TID], xl[X_TID]);
  etw_jw_ch(w, ',');
  if (xv[X_PNAME]) etw_csv_json_cell(w, xv[X_PNAME], xl[X_PNAME]);
  etw_jw_ch(w, ',');
  if (sv[S_HOST]) etw_csv_json_cell(w, sv[S_HOST], sl[S_HOST]);
  etw_jw_ch(w, ',');
  bare(w, xv[X_CPU], xl[X_CPU]);
}

int etw_csv_event_row(struct etw_jw *w, const char *ev, size_t n) {
  static const char SEQ[] = "{\"seq\":", SYS[] = "\"System\":";
  if (n < sizeof SEQ || memcmp(ev, SEQ, sizeof SEQ - 1)) return -1;
  size_t at = sizeof SEQ - 1, sl = etw_json_span(ev + at, n - at);
  const char *seq = ev + at;
  at += sl;
  /* the System object: the member right after seq (a nats event's stream_seq may come first) */
  const char *sys = NULL;
  size_t syl = 0;
  while (at < n && ev[at] == ',' && !sys) {
    at++;
    size_t ks = etw_json_span(ev + at, n - at);
    if (!ks || at + ks >= n) break;
    if (ks == sizeof SYS - 2 && !memcmp(ev + at, SYS, sizeof SYS - 1)) sys = ev + at + ks + 1;
    at += ks + 1;
    size_t vs = etw_json_span(ev + at, n - at);
    if (!vs) {
      sys = NULL;
      break;
    }
    if (sys) syl = vs;
    at += vs;
  }
  if (!sys || sys[0] != '{') { /* not the writers' shape: its seq, and the whole event as the last cell */
    etw_jw_raw(w, seq, sl);
    etw_jw_lit(w, ",,\"\",\"\",,,,,,,,,,,,");
    etw_csv_cell(w, ev, n);
    etw_jw_ch(w, '\n');
    return 0;
  }
  etw_csv_common(w, seq, sl, sys, syl);
  etw_jw_ch(w, ',');
  /* EventData (or Undecoded): the text after the next member's ':' up to the closing brace */
  at = (size_t)(sys + syl - ev);
  const char *colon = at < n && ev[at] == ',' ? memchr(ev + at, ':', n - at) : NULL;
  if (colon && n > 0 && ev[n - 1] == '}' && colon + 1 < ev + n - 1)
    etw_csv_data_cell(w, colon + 1, (size_t)(ev + n - 1 - (colon + 1)));
  etw_jw_ch(w, '\n');
  return 0;
}
