/* test_dec_plan.c — the template walker's compiled plans (dec_plan.c, dec_plan_run.c) against the walker itself.
 *
 * A schema whose fields are all top-level gets a plan on first use; the plan renders the
 * ordinary case and gives up (the walker then renders the event from its start) on anything
 * else. Both must give the same bytes, the same consumed length and the same error.
 *
 * 1. Every corpus trace decoded with and without plans (with the manifests directory and
 *    without), compared event by event.
 * 2. Random schemas (integers of every width and rendering, pointers, hex types, UTF-16 and
 *    ANSI strings with constant or referenced lengths, GUIDs, booleans, times, integer and
 *    pointer arrays with constant or referenced counts — also counts of 0 and beyond the
 *    payload —, arrays of structs (of plain scalars, or with a member the plan does not take),
 *    value and bit maps in the schema and late-bound ones by name, references to
 *    later fields, structs) and random payloads (well-formed ones, cut anywhere, odd lengths,
 *    extra bytes; strings with quotes, backslashes, control characters, non-ASCII, paired and
 *    unpaired surrogates, without a NUL), both pointer sizes, writers with a small maximum.
 *    Each payload is rendered with the walker only, then with plans, repeatedly (the plan's
 *    per-op map text cache fills and is hit).
 * 3. The plan's number writers (dec_fast.h) against decode.h's on every value below 1.2 M, the
 *    powers of ten and two ±1, the ends of the ranges and random values.
 * ETWD_SEED=N reruns another sequence.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dec_fast.h"
#include "decode.h"
#include "etwcore/etl.h"
#include "etwcore/jw.h"
#include "t.h"
#include "test_etl_util.h"

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { /* xorshift64* */
  rs ^= rs >> 12;
  rs ^= rs << 25;
  rs ^= rs >> 27;
  return rs * 2685821657736338717ull;
}
static uint32_t below(uint32_t n) { return n ? (uint32_t)(rnd() % n) : 0; }

/* ---- 1. corpus */
static void corpus(void) {
  static const char *const FILES[] = {
      "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl",
      "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/gcevents.etl.zip!*.etl",
      "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/primitive-types.etl.zip!*.etl",
      "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/Regression/SelfDescribingSingleEvent.etl",
      "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/smallEtlFile.etl",
      "microsoft+krabsetw/examples/NativeExamples/powershell.etl",
      "airbus-cert+etl-parser/tests/example/AMSITrace.etl",
      "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl",
      "airbus-cert+etl-parser/tests/example/lxcore_kernel.etl",
      "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl",
      "jtmoon79+super-speedy-syslog-searcher/logs/programs/Event_Trace_Log/waasmedic.20251005_113019_195.etl",
  };
  size_t events = 0, bad = 0;
  for (size_t fi = 0; fi < sizeof FILES / sizeof FILES[0]; fi++) {
    size_t len = 0;
    unsigned char *data = tu_corpus_file(FILES[fi], &len);
    CHECK(data != NULL);
    if (!data) continue;
    for (int man = 0; man < 2; man++) { /* without manifests, with them */
      struct tu_trace a, b;
      etw_decode_set_default(ETW_DECODE_REFERENCE);
      tu_decode(data, len, "t.etl", man ? tu_manifests() : NULL, &a);
      etw_decode_set_default(ETW_DECODE_FAST);
      tu_decode(data, len, "t.etl", man ? tu_manifests() : NULL, &b);
      CHECK_EQ(a.n, b.n);
      for (size_t i = 0; i < a.n && i < b.n; i++) {
        events++;
        if (strcmp(a.ev[i].json, b.ev[i].json) || a.ev[i].decoded != b.ev[i].decoded) {
          if (bad++ < 3)
            fprintf(stderr, "%s event %zu differs:\n walker: %s\n plan:   %s\n", FILES[fi], i, a.ev[i].json,
                    b.ev[i].json);
        }
      }
      tu_free(&a);
      tu_free(&b);
    }
    free(data);
  }
  fprintf(stderr, "corpus: %zu events compared\n", events);
  CHECK(events > 300000);
  CHECK_EQ(bad, 0);
}

/* ---- 2. random schemas and payloads */
static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  memcpy(c, s, n);
  return c;
}

static const char *const TEXTS[] = {"Jitted", "Dynamic", "Generic", "Small", "Large", "", "a\"b",
                                    "back\\slash", "tab\there", "caf\xc3\xa9", "\xff", "Verbose", "x|y"};
static struct dec_map *rand_map(const char *name) {
  struct dec_map *m = calloc(1, sizeof *m);
  m->name = xstrdup(name);
  m->bitmap = (int)below(2);
  m->n = below(7);
  m->val = calloc(m->n ? m->n : 1, sizeof *m->val);
  m->str = calloc(m->n ? m->n : 1, sizeof *m->str);
  int plain = below(2);
  for (uint32_t i = 0; i < m->n; i++) {
    m->val[i] = m->bitmap ? (below(6) == 0 ? 0 : 1u << below(6)) : below(6);
    const char *t = TEXTS[below(plain ? 5 : sizeof TEXTS / sizeof TEXTS[0])];
    m->str[i] = xstrdup(t);
  }
  return m;
}

/* Field types the generator uses: {in, out}. */
static const uint16_t TYPES[][2] = {
    {4, 0},  {6, 0},  {8, 0},  {10, 0}, {4, 18}, {8, 18}, {4, 4},   {6, 4},   {8, 4},  {10, 4}, {8, 13},
    {8, 14}, {8, 15}, {10, 0x25}, {5, 0}, {7, 0}, {9, 0}, {5, 17}, {7, 17}, {9, 17}, {5, 18}, {7, 4},
    {3, 0},  {4, 17}, {8, 17}, {4, 3},  {8, 3}, {6, 7},  {8, 8},   {4, 2},   {6, 2},  {16, 0}, {16, 4},
    {20, 0}, {21, 0}, {13, 0}, {11, 0}, {12, 0}, {15, 0}, {17, 0}, {10, 16}, {18, 0}, {1, 0},  {1, 0},
    {1, 0},  {2, 0},  {22, 0}, {23, 0}, {14, 0}, {19, 0}, {0, 0},  {308, 0}, {308, 4}, {99, 0}};
#define NTYPES (sizeof TYPES / sizeof TYPES[0])

static int is_int(unsigned in) { return in >= 3 && in <= 10; }

struct schema {
  struct dec_event *e;
  struct dec_provider *prov;
  struct dec_map *maps[8];
  int nmaps;
};

static void rand_field(struct schema *s, uint32_t i) {
  struct dec_field *f = &s->e->f[i];
  char nm[32];
  static const char *const NAMES[] = {"MethodID", "A", "Count", "Name", "a\"q", "k\\b", "LongFieldNameThatIsLongerThanThirtyTwoBytes_X", "Flags"};
  snprintf(nm, sizeof nm, "%s%u", NAMES[below(8)], i);
  if (below(40) == 0) {
    /* a name longer than the key pad */
    char big[200];
    memset(big, 'N', sizeof big - 1);
    big[sizeof big - 1] = 0;
    big[0] = (char)('a' + i % 26);
    f->name = xstrdup(big);
  } else {
    f->name = xstrdup(nm);
  }
  f->len = -1;
  f->count = 1;
  f->len_ref = -1;
  f->count_ref = -1;
  unsigned t = below(NTYPES);
  f->in = TYPES[t][0];
  f->out = TYPES[t][1];
  uint32_t r = below(20);
  if (r < 4) { /* an array */
    static const uint16_t AT[][2] = {{4, 0}, {6, 0}, {8, 0}, {10, 0}, {8, 4}, {10, 4}, {6, 18}, {16, 0}, {16, 4}, {5, 0}, {1, 0}, {8, 17}};
    unsigned a = below(sizeof AT / sizeof AT[0]);
    f->in = AT[a][0];
    f->out = AT[a][1];
    f->is_array = 1;
    f->count = (int32_t)below(4);
    if (below(10) == 0) f->count = -1;
    if (i && below(3)) {
      uint32_t ref = below(i);
      if (below(10) == 0) ref = i + 1 + below(3); /* a later field, or beyond the schema */
      f->count_ref = (int32_t)ref;
    }
  } else if (r == 4 && i) { /* a count reference on a scalar */
    f->count_ref = (int32_t)below(i);
  } else if (r == 5 && (f->in == 1 || f->in == 2 || f->in == 14)) { /* a length */
    if (i && below(2)) f->len_ref = (int32_t)below(i);
    else f->len = (int32_t)below(6);
  } else if (r == 6 && is_int(f->in)) { /* a map */
    if (below(3) == 0) {
      f->map_name = below(2) ? "TraceMapA" : "Missing";
    } else {
      struct dec_map *m = rand_map("M");
      s->maps[s->nmaps++] = m;
      f->map = m;
    }
  } else if (r == 7 && below(4) == 0) {
    f->count = (int32_t)(below(2) ? 70000 : 2); /* a constant count on a scalar */
  }
}

static struct schema rand_schema(void) {
  struct schema s;
  memset(&s, 0, sizeof s);
  s.e = calloc(1, sizeof *s.e);
  uint32_t nf = 1 + below(9);
  s.e->nf = nf;
  s.e->f = calloc(nf + 1, sizeof *s.e->f);
  s.e->has_template = 1;
  s.prov = calloc(1, sizeof *s.prov);
  s.prov->maps = calloc(1, sizeof *s.prov->maps);
  s.prov->maps[0] = rand_map("TraceMapA");
  s.prov->n_maps = 1;
  s.e->owner = s.prov;
  for (uint32_t i = 0; i < nf; i++) rand_field(&s, i);
  if (nf >= 3 && below(5) == 0) { /* an array of structs of the next fields */
    uint32_t at = below(nf - 2);
    struct dec_field *f = &s.e->f[at];
    f->in = 24;
    f->is_array = 1;
    f->count = (int32_t)below(4);
    f->count_ref = -1;
    f->len = -1;
    f->len_ref = -1;
    f->map = NULL;
    f->map_name = NULL;
    if (at && below(2)) { /* the count from an earlier plain integer */
      uint32_t c = below(at);
      struct dec_field *g = &s.e->f[c];
      if (g->in != 24 && !g->is_array) {
        g->in = 8;
        g->out = 0;
        g->map = NULL;
        g->map_name = NULL;
        g->count = 1;
        g->count_ref = -1;
        f->count_ref = (int32_t)c;
      }
    }
    f->members = (uint16_t)(1 + below(nf - at - 1));
    static const uint16_t MT[][2] = {{4, 0}, {6, 0}, {8, 0}, {10, 0}, {8, 4}, {10, 4}, {16, 0}, {16, 4}, {7, 0}, {9, 0}, {5, 17}, {20, 0}};
    for (uint32_t j = at + 1; j <= at + f->members; j++) {
      struct dec_field *g = &s.e->f[j];
      if (below(12) == 0) continue; /* sometimes a member the plan does not take */
      unsigned t = below(sizeof MT / sizeof MT[0]);
      g->in = MT[t][0];
      g->out = MT[t][1];
      g->is_array = 0;
      g->count = 1;
      g->count_ref = -1;
      g->len = -1;
      g->len_ref = -1;
      g->map = NULL;
      g->map_name = NULL;
    }
    /* nothing after refers into the struct */
    for (uint32_t j = at + f->members + 1; j < nf; j++) {
      if (s.e->f[j].count_ref > (int32_t)at) s.e->f[j].count_ref = -1;
      if (s.e->f[j].len_ref > (int32_t)at) s.e->f[j].len_ref = -1;
    }
  } else if (nf >= 3 && below(12) == 0) { /* a struct of the next fields (no plan) */
    uint32_t at = below(nf - 2);
    s.e->f[at].in = 24;
    s.e->f[at].is_array = 0;
    s.e->f[at].count = 1;
    s.e->f[at].count_ref = -1;
    s.e->f[at].map = NULL;
    s.e->f[at].map_name = NULL;
    s.e->f[at].members = (uint16_t)(1 + below(nf - at - 1));
  }
  return s;
}

static void free_schema(struct schema *s) {
  dec_event_free(s->e);
  for (int i = 0; i < s->nmaps; i++) dec_map_free(s->maps[i]);
  for (uint32_t i = 0; i < s->prov->n_maps; i++) dec_map_free(s->prov->maps[i]);
  free(s->prov->maps);
  free(s->prov);
}

/* UTF-16 units the strings are made of */
static const uint16_t UNITS[] = {'a', 'Z', '.', ' ', '~', '"', '\\', '\n', '\t', 1, 0x1F, 0x7F, 0xE9,
                                 0x20AC, 0xD83D, 0xDE00, 0xDC00, 0xFFFF, 0x100, 0xFF20, '<', '`'};

static size_t put_le(unsigned char *b, uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
  return n;
}

static uint64_t rand_int(void) {
  switch (below(6)) {
  case 0: return below(4);
  case 1: return below(100);
  case 2: return rnd();
  case 3: return (uint64_t)0 - below(3);
  case 4: return 1ull << below(64);
  default: return below(100000);
  }
}

/* A payload for @e (ptr size @ps) that mostly fits the schema: fields that others use as a count
 * or length hold small values, and arrays/strings then have that many elements/units. */
static size_t rand_payload(const struct dec_event *e, int ps, unsigned char *b, size_t cap) {
  size_t n = 0;
  uint64_t vals[16] = {0};
  int refd[16] = {0};
  for (uint32_t i = 0; i < e->nf && i < 16; i++) {
    if (e->f[i].count_ref >= 0 && e->f[i].count_ref < 16) refd[e->f[i].count_ref] = 1;
    if (e->f[i].len_ref >= 0 && e->f[i].len_ref < 16) refd[e->f[i].len_ref] = 1;
  }
  for (uint32_t i = 0; i < e->nf && i < 16 && n + 2000 < cap; i++) {
    const struct dec_field *f = &e->f[i];
    if (f->in == 24 && f->is_array) { /* an array of structs: the members once per element */
      size_t reps = f->count >= 0 ? (size_t)f->count : 0;
      if (f->count_ref >= 0 && f->count_ref < 16 && (uint32_t)f->count_ref < i) reps = (size_t)vals[f->count_ref];
      if (reps > 40) reps = below(4);
      if (below(8) == 0) reps += 1;
      uint32_t last = i + f->members;
      for (size_t r = 0; r < reps && n + 2000 < cap; r++)
        for (uint32_t j = i + 1; j <= last && j < e->nf; j++) {
          const struct dec_field *g = &e->f[j];
          unsigned w = g->in == 3 || g->in == 4 ? 1 : g->in == 5 || g->in == 6 ? 2
                     : g->in == 7 || g->in == 8 || g->in == 11 || g->in == 13 || g->in == 20 ? 4
                     : g->in == 16 || g->in == 308 ? (unsigned)ps : 8;
          if (g->in == 1) n += put_le(b + n, 'x', 2), n += put_le(b + n, 0, 2);
          else n += put_le(b + n, rand_int(), w);
        }
      i = last;
      continue;
    }
    unsigned w = f->in == 3 || f->in == 4 ? 1 : f->in == 5 || f->in == 6 ? 2
               : f->in == 7 || f->in == 8 || f->in == 11 || f->in == 13 || f->in == 20 ? 4
               : f->in == 16 || f->in == 308 ? (unsigned)ps : 8;
    size_t reps = 1;
    if (f->is_array) {
      if (f->count_ref >= 0 && f->count_ref < 16 && (uint32_t)f->count_ref < i) reps = (size_t)vals[f->count_ref];
      else reps = f->count >= 0 ? (size_t)f->count : 0;
      if (reps > 40) reps = below(4);
      if (below(8) == 0) reps += 1; /* one more than the count (Unparsed) */
    }
    long len = f->len;
    if (f->len_ref >= 0 && f->len_ref < 16 && (uint32_t)f->len_ref < i) len = (long)vals[f->len_ref];
    for (size_t r = 0; r < reps; r++) {
      if (f->in == 1) {
        size_t nu = len >= 0 && len < 100 ? (size_t)len : below(4) == 0 ? below(3) : below(5) == 0 ? below(100) : below(45);
        /* a third plain ASCII (the plans' inline 16- and 32-unit blocks, the payload's last 32
         * bytes as the tail block), at most one other unit anywhere */
        int plain = below(3) == 0;
        size_t odd = plain && below(2) ? below(104) : (size_t)-1;
        for (size_t k = 0; k < nu; k++) {
          uint16_t u = below(3) ? (uint16_t)('A' + below(26)) : UNITS[below(sizeof UNITS / sizeof UNITS[0])];
          if (below(20) == 0) u = (uint16_t)rnd();
          if (plain) u = k == odd ? u : (uint16_t)(' ' + below(95) % 94); /* 0x20..0x7D */
          n += put_le(b + n, u, 2);
        }
        if (len < 0 && below(10)) n += put_le(b + n, 0, 2);
      } else if (f->in == 2) {
        size_t nc = len >= 0 && len < 100 ? (size_t)len : below(12);
        for (size_t k = 0; k < nc; k++) b[n++] = below(5) ? (unsigned char)('a' + below(26)) : (unsigned char)rnd();
        if (len < 0 && below(10)) b[n++] = 0;
      } else if (f->in == 15 || f->in == 18) {
        for (int k = 0; k < 16; k++) b[n++] = (unsigned char)rnd();
      } else if (f->in == 19) {
        b[n++] = 1;
        b[n++] = (unsigned char)below(3);
        for (int k = 0; k < 6 + 4 * 2; k++) b[n++] = (unsigned char)rnd();
      } else if (f->in == 22 || f->in == 23) {
        unsigned k = below(8);
        n += put_le(b + n, k, 2);
        for (unsigned j = 0; j < k; j++) b[n++] = (unsigned char)('a' + below(26));
      } else if (f->in == 14) {
        size_t k = len >= 0 && len < 100 ? (size_t)len : below(6);
        for (size_t j = 0; j < k; j++) b[n++] = (unsigned char)rnd();
      } else if (f->in == 0 || f->in == 24 || f->in == 99) {
      } else {
        uint64_t v = refd[i] && below(12) ? below(6) : rand_int();
        if (f->map && below(2) && f->map->n) v = f->map->val[below(f->map->n)] | (below(3) ? 0 : 1u << below(8));
        vals[i] = w == 1 ? (uint8_t)v : w == 2 ? (uint16_t)v : w == 4 ? (uint32_t)v : v;
        if (f->in == 3) vals[i] = (uint64_t)(int64_t)(int8_t)v;
        if (f->in == 5) vals[i] = (uint64_t)(int64_t)(int16_t)v;
        if (f->in == 7) vals[i] = (uint64_t)(int64_t)(int32_t)v;
        n += put_le(b + n, v, w);
      }
    }
  }
  return n;
}

struct out {
  char *buf;
  size_t len;
  long rc;
  int err;
  const char *why;
};

/* @o's result taken from writer @w (which is freed): reason only on failure, the text copied. */
static struct out out_take(struct out *o, struct etw_jw *w) {
  if (o->rc < 0) o->why = o->why ? o->why : "(unset)";
  else o->why = NULL;
  o->err = w->err;
  o->len = w->len;
  o->buf = malloc(w->len + 1);
  memcpy(o->buf, w->buf ? w->buf : "", w->len);
  o->buf[w->len] = 0;
  etw_jw_free(w);
  return *o;
}

static struct out render(const struct dec_event *e, const unsigned char *p, size_t n, int ps, size_t max,
                         const char *prefix) {
  struct etw_jw w;
  etw_jw_init(&w, max);
  etw_jw_raw(&w, prefix, strlen(prefix));
  struct out o;
  o.why = NULL;
  o.rc = dec_fields_write_d(NULL, &w, e, p, n, ps, &o.why);
  return out_take(&o, &w);
}

/* the same through dec_fields_write_c (the manifest plans' entry): when it returns the text's
 * end, w->len is at most that, w->err 0 and the buffer has 64 bytes past that end (written here:
 * ASan sees the writer's heap block) */
static size_t ec_ends, ec_bad;
static struct out render_c(const struct dec_event *e, const unsigned char *p, size_t n, int ps, size_t max,
                           const char *prefix) {
  struct etw_jw w;
  etw_jw_init(&w, max);
  etw_jw_raw(&w, prefix, strlen(prefix));
  struct out o;
  o.why = NULL;
  size_t mark = w.len;
  struct dec_ecall c = {.w = &w, .e = e, .p = p, .mark = mark, .n = (uint32_t)n, .ptr_size = ps};
  struct dec_eres x = dec_fields_write_c(&c);
  o.why = c.why;
  o.rc = x.rc;
  if (x.o) {
    ec_ends++;
    if (w.len > (size_t)(x.o - w.buf) || w.err || x.o < w.buf + mark || (size_t)(w.buf + w.cap - x.o) < 64) ec_bad++;
    else {
      memset(x.o, 'Z', 64);
      w.len = (size_t)(x.o - w.buf);
    }
  }
  return out_take(&o, &w);
}

static void randomized(void) {
  size_t cases = 0, bad = 0, planned = 0, schemas = 0, tried = 0, kept = 0, sarr_kept = 0;
  unsigned char *pay = malloc(1 << 16);
  for (int sc = 0; sc < 6000; sc++) {
    struct schema s = rand_schema();
    schemas++;
    /* the count fields hold small values most of the time */
    for (int rep = 0; rep < 24; rep++) {
      int ps = below(4) ? 8 : 4;
      size_t n = rand_payload(s.e, ps, pay, 1 << 16);
      switch (below(8)) {
      case 0: n = below((uint32_t)n + 1); break; /* cut anywhere */
      case 1: if (n) n--; break;
      case 2: for (int k = 0; k < 3; k++) pay[n++] = (unsigned char)rnd(); break; /* extra bytes */
      case 3: n = 0; break;
      default: break;
      }
      size_t max = below(6) == 0 ? 40 + below(400) : 0;
      const char *prefix = below(2) ? "{\"x\":1,\"EventData\":{" : "";
      etw_decode_set_default(ETW_DECODE_REFERENCE);
      struct out a = render(s.e, pay, n, ps, max, prefix);
      etw_decode_set_default(ETW_DECODE_FAST);
      for (int again = 0; again < 2; again++) {
        uint64_t b0 = dec_plan_bails();
        struct out b = again ? render_c(s.e, pay, n, ps, max, prefix) : render(s.e, pay, n, ps, max, prefix);
        cases++;
        if (s.e->runs > 1 && !max) {
          tried++;
          kept += dec_plan_bails() == b0;
          for (uint32_t i = 0; i < s.e->nf; i++)
            if (s.e->f[i].in == 24 && dec_plan_bails() == b0 && strstr(b.buf, "[{")) {
              sarr_kept++;
              break;
            }
        }
        int same = a.rc == b.rc && a.err == b.err && a.len == b.len && !memcmp(a.buf, b.buf, a.len) &&
                   ((!a.why && !b.why) || (a.why && b.why && !strcmp(a.why, b.why)));
        if (!same && bad++ < 5) {
          fprintf(stderr, "schema %d rep %d ps %d n %zu max %zu: walker rc %ld err %d why %s\n  %s\nplan rc %ld err %d why %s\n  %s\n",
                  sc, rep, ps, n, max, a.rc, a.err, a.why ? a.why : "-", a.buf, b.rc, b.err, b.why ? b.why : "-", b.buf);
          for (uint32_t i = 0; i < s.e->nf; i++) {
            const struct dec_field *f = &s.e->f[i];
            fprintf(stderr, "  field %u %s in %u out %u len %d cnt %d lref %d cref %d arr %u mem %u map %p %s\n", i,
                    f->name, f->in, f->out, f->len, f->count, f->len_ref, f->count_ref, f->is_array, f->members,
                    (void *)f->map, f->map_name ? f->map_name : "-");
          }
        }
        free(b.buf);
      }
      free(a.buf);
    }
    if (s.e->runs > 1) planned++;
    free_schema(&s);
  }
  free(pay);
  fprintf(stderr, "random: %zu schemas (%zu with a plan), %zu renderings compared; %zu with a plan, %zu of them by the plan\n",
          schemas, planned, cases, tried, kept);
  CHECK(planned > schemas / 4);
  fprintf(stderr, "random: %zu renderings with struct array elements by the plan\n", sarr_kept);
  CHECK(kept > tried / 4);
  CHECK(sarr_kept > 1000);
  CHECK_EQ(bad, 0);
  fprintf(stderr, "random: %zu renderings through dec_fields_write_c ended by the plan\n", ec_ends);
  CHECK(ec_ends > 1000);
  CHECK_EQ(ec_bad, 0);
}

/* ---- 3. the plan's number writers against decode.h's */
static void writers(void) {
  size_t bad = 0, cases = 0;
  char a[64], b[64];
  for (uint64_t k = 0; k < 4000000; k++) {
    uint64_t v;
    if (k < 1200000) v = k; /* every value below 1.2 M */
    else if (k < 1200000 + 64 * 20) { /* powers of ten and two, ±1 */
      uint64_t j = k - 1200000, p10 = 1;
      for (uint64_t t = 0; t < j / 20 % 20; t++) p10 *= 10;
      uint64_t base = j % 2 ? p10 : 1ull << (j / 20 % 64);
      v = base + (j % 3) - 1;
    } else if (k < 2500000) v = (uint32_t)rnd() >> below(32);
    else v = rnd() >> below(64);
    memset(a, 'x', sizeof a);
    memset(b, 'x', sizeof b);
    char *ea = dec_put_u64(a, v), *eb = fx_put_u64(b, v);
    cases++;
    if (ea - a != eb - b || memcmp(a, b, (size_t)(ea - a))) bad++;
    if (v <= UINT32_MAX) {
      eb = fx_put_u32(b, (uint32_t)v);
      if (ea - a != eb - b || memcmp(a, b, (size_t)(ea - a))) bad++;
    }
    if (v <= UINT32_MAX) {
      eb = fx_put_u32c(b, (uint32_t)v);
      if (ea - a + 1 != eb - b || memcmp(a, b, (size_t)(ea - a)) || eb[-1] != ',') bad++;
    }
    if (v < 10000) {
      eb = fx_put_lt1e4(b, (unsigned)v);
      if (ea - a != eb - b || memcmp(a, b, (size_t)(ea - a))) bad++;
    }
    ea = dec_put_i64(a, (int64_t)v);
    eb = fx_put_i64(b, (int64_t)v);
    if (ea - a != eb - b || memcmp(a, b, (size_t)(ea - a))) bad++;
    ea = dec_put_hex(a, v);
    eb = fx_hex(b, v);
    if (ea - a != eb - b || memcmp(a, b, (size_t)(ea - a))) {
      if (bad++ < 3) fprintf(stderr, "hex %llx: %.*s vs %.*s\n", (unsigned long long)v, (int)(ea - a), a, (int)(eb - b), b);
    }
  }
  for (uint64_t v = 4294966000u; v <= UINT32_MAX; v++) { /* the top of the range (IL maps' -1, -2, -3) */
    char *ea = dec_put_u64(a, v), *eb = fx_put_u32c(b, (uint32_t)v);
    if (ea - a + 1 != eb - b || memcmp(a, b, (size_t)(ea - a)) || eb[-1] != ',') bad++;
    eb = fx_put_u32(b, (uint32_t)v);
    if (ea - a != eb - b || memcmp(a, b, (size_t)(ea - a))) bad++;
  }
  int64_t ends[] = {INT64_MIN, INT64_MIN + 1, -1, 0, INT64_MAX, -4294967296, -4294967295, -100, -99};
  for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
    char *ea = dec_put_i64(a, ends[i]), *eb = fx_put_i64(b, ends[i]);
    if (ea - a != eb - b || memcmp(a, b, (size_t)(ea - a))) bad++;
  }
  uint64_t uends[] = {UINT64_MAX, UINT64_MAX - 1, (uint64_t)UINT32_MAX + 1, UINT32_MAX, 99999999, 100000000, 999999999, 1000000000};
  for (size_t i = 0; i < sizeof uends / sizeof uends[0]; i++) {
    char *ea = dec_put_u64(a, uends[i]), *eb = fx_put_u64(b, uends[i]);
    if (ea - a != eb - b || memcmp(a, b, (size_t)(ea - a))) bad++;
  }
  fprintf(stderr, "writers: %zu values\n", cases);
  CHECK_EQ(bad, 0);
}

int main(void) {
  const char *seed = getenv("ETWD_SEED");
  if (seed && *seed) rs = strtoull(seed, NULL, 10) | 1;
  writers();
  randomized();
  corpus();
  T_DONE();
}
