/* test_dec_planvec.c — the compiled plans' vector paths (dec_plan_run.c) at their block boundaries,
 * against the walker (plans off) (the cases name the block steps of the AVX2 runner this test
 * was written for, since removed; they stay as edge cases of the SSE2 runner's 16-byte steps):
 *
 * 1. Hex pointer arrays (ClrStack/Walk's Stack: a FrameCount, then that many pointers): 0–13
 *    elements of 8 and of 4 bytes, every digit count (0, 2^k − 1, 2^k, 2^k + 1 for every k), a
 *    value ≥ 2^52 (the removed AVX2 four-value step's limit) at every place of a four-value block, runs
 *    of equal digit counts, random values.
 * 2. UTF-16 strings followed by other fields (DCStopVerbose's three strings, then a UINT16): a
 *    special unit (quote, backslash, control, DEL, non-ASCII, surrogates paired and not, NUL) at
 *    every place of strings of 0–100 units, so at every position of the 16- and 32-unit blocks
 *    and the tail block; odd payload lengths, strings ending at the payload's end with and
 *    without a NUL, payloads cut inside a string.
 * 3. Hex fields in a row (DCStopVerbose's MethodID, ModuleID, MethodStartAddress, MethodSize,
 *    MethodToken): runs of 1–5 of 4- and 8-byte hex integers and pointers in every order, every
 *    digit count, values ≥ 2^52, a referenced one (a count) among them, payloads cut inside.
 * 4. Decimal integer arrays (MethodILToNativeMap's ILOffsets/NativeOffsets: a count, then two
 *    arrays of UINT32, and of UINT16/UINT8/UINT64): 0–13 elements, every value at a digit-count
 *    or path edge (999/1000, 9999/10000, 10^k ± 1, −97…−1 and the rest as UINT32) at every place,
 *    random values of every size, payloads cut inside.
 * 5. UTF-16 strings in the last 0–70 bytes of a payload that ends at a page the process may not
 *    read, or 1–63 bytes before it (the removed AVX2 runner's masked loads of the last 4–63 bytes, which
 *    it makes only when their 64 bytes are on one page, its 16-unit step at 32–63): strings of
 *    0–40 units with a special unit at every place or none, with and without their NUL, an odd
 *    byte after them, after 6- and 9-byte headers.
 * 6. Two hex pairs in a row (DCStopVerbose's first four: the removed AVX2 runner's four-value op,
 *    which loaded 32 bytes when its fixed-size run has them): 4–7 hex fields of 8 and 4 bytes and
 *    pointers, then 0–4 other fields (integers, a hex one, a string), a value ≥ 2^52 at each place
 *    or none, edge and random values; each payload ending at a page the process may not read, and
 *    cut shorter (all lengths for a quarter of them).
 * Each case must render the same bytes, length and consumed count with the plan as with the
 * walker, and the plan must have rendered the well-formed ones itself (no bail); the same again
 * with the plan's first op handed over (dec_plan_hand, as the manifest plans call the runners)
 * wherever the length allows it, in a heap block of just the room the hand-over asks for.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dec_fast.h"
#include "decode.h"
#include "etwcore/jw.h"
#include "t.h"

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define PV_GUARD 1
/* A readable page followed by an unreadable one (freed by guard_free): the first byte past the
 * returned page's end faults. NULL (and a failed check) when it cannot be had. */
static unsigned char *guard_page(void) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  if (m == MAP_FAILED) return NULL;
  CHECK_EQ(mprotect(m + pg, pg, PROT_NONE), 0);
  return m;
}
static void guard_free(unsigned char *m) { munmap(m, 2 * (size_t)sysconf(_SC_PAGESIZE)); }
#endif

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rs ^= rs >> 12;
  rs ^= rs << 25;
  rs ^= rs >> 27;
  return rs * 2685821657736338717ull;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  memcpy(c, s, n);
  return c;
}

static struct dec_event *schema(const char *const *names, const uint16_t (*types)[2], uint32_t nf, int32_t cref_field) {
  struct dec_event *e = calloc(1, sizeof *e);
  e->nf = nf;
  e->f = calloc(nf + 1, sizeof *e->f);
  e->has_template = 1;
  for (uint32_t i = 0; i < nf; i++) {
    struct dec_field *f = &e->f[i];
    f->name = xstrdup(names[i]);
    f->in = types[i][0];
    f->out = types[i][1];
    f->len = -1;
    f->count = 1;
    f->len_ref = -1;
    f->count_ref = -1;
    if ((int32_t)i == cref_field) {
      f->is_array = 1;
      f->count_ref = (int32_t)i - 1;
    }
  }
  return e;
}

struct out {
  char *buf;
  size_t len;
  long rc;
};
static struct out render(const struct dec_event *e, const unsigned char *p, size_t n, int ps) {
  struct etw_jw w;
  etw_jw_init(&w, 0);
  etw_jw_raw(&w, "{", 1);
  struct out o;
  const char *why = NULL;
  o.rc = dec_fields_write_d(NULL, &w, e, p, n, ps, &why);
  o.len = w.len;
  o.buf = malloc(w.len + 1);
  memcpy(o.buf, w.buf ? w.buf : "", w.len);
  o.buf[w.len] = 0;
  etw_jw_free(&w);
  return o;
}

/* the same through dec_fields_write_c with the plan's first op handed over (dec_plan_hand, as the
 * manifest plans do) when the payload's length and pointer size allow it, in a buffer with just
 * the room the hand-over asks for (a heap block of exactly that size); o.rc = -2: not handed */
static size_t handed;
static struct out render_h(const struct dec_event *e, const unsigned char *p, size_t n, int ps) {
  struct out o = {NULL, 0, -2};
  struct dec_ehand h;
  uint32_t far = dec_plan_hand(e, &h);
  unsigned i = (unsigned)ps & 15;
  if (!far || (uint32_t)n - h.lo[i] >= h.span[i] || n > UINT32_MAX) return o;
  handed++;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  etw_jw_raw(&w, "{", 1);
  free(w.buf);
  w.cap = w.len + far + 1; /* (cap - mark > far, no more) */
  w.buf = malloc(w.cap);
  w.buf[0] = '{';
  struct dec_ecall c = {.w = &w, .e = e, .p = p, .mark = w.len, .n = (uint32_t)n, .why = NULL, .ptr_size = ps,
                        .op = h.op[i]};
  struct dec_eres x = dec_fields_write_c(&c);
  if (x.o) {
    CHECK(x.o >= w.buf && (size_t)(x.o - w.buf) + 64 <= w.cap && !w.err);
    memset(x.o, '}', 64); /* (the room promised past the end) */
    w.len = (size_t)(x.o - w.buf);
  }
  o.rc = x.rc;
  o.len = w.len;
  o.buf = malloc(w.len + 1);
  memcpy(o.buf, w.buf, w.len);
  o.buf[w.len] = 0;
  etw_jw_free(&w);
  return o;
}

static size_t cases, bad, planned;
/* walker vs plan; @must_plan: the plan may not give up */
static void compare(const struct dec_event *e, const unsigned char *p, size_t n, int ps, int must_plan) {
  etw_decode_set_default(ETW_DECODE_REFERENCE);
  struct out a = render(e, p, n, ps);
  etw_decode_set_default(ETW_DECODE_FAST);
  uint64_t b0 = dec_plan_bails();
  struct out b = render(e, p, n, ps);
  int kept = dec_plan_bails() == b0;
  cases++;
  planned += kept;
  int same = a.rc == b.rc && a.len == b.len && !memcmp(a.buf, b.buf, a.len);
  if ((!same || (must_plan && !kept)) && bad++ < 5)
    fprintf(stderr, "ps %d n %zu kept %d:\n walker %ld %s\n plan   %ld %s\n", ps, n, kept, a.rc, a.buf, b.rc, b.buf);
  free(b.buf);
  b0 = dec_plan_bails();
  struct out c = render_h(e, p, n, ps);
  if (c.rc != -2) {
    kept = dec_plan_bails() == b0;
    same = a.rc == c.rc && a.len == c.len && !memcmp(a.buf, c.buf, a.len);
    if ((!same || (must_plan && !kept)) && bad++ < 5)
      fprintf(stderr, "handed, ps %d n %zu kept %d:\n walker %ld %s\n plan   %ld %s\n", ps, n, kept, a.rc, a.buf,
              c.rc, c.buf);
    free(c.buf);
  }
  free(a.buf);
}

static size_t put_le(unsigned char *b, uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
  return n;
}

/* ---- 1. hex pointer arrays */
static void hex_arrays(void) {
  static const char *const NM[] = {"ClrInstanceID", "FrameCount", "Stack"};
  static const uint16_t TY[][2] = {{6, 0}, {8, 0}, {16, 0}};
  struct dec_event *e = schema(NM, TY, 3, 2);
  uint64_t vals[64 * 3 + 8];
  size_t nv = 0;
  vals[nv++] = 0;
  for (int k = 1; k < 64; k++) {
    vals[nv++] = (1ull << k) - 1;
    vals[nv++] = 1ull << k;
    vals[nv++] = (1ull << k) + 1;
  }
  vals[nv++] = ~0ull;
  unsigned char pay[8 + 8 * 16];
  size_t c0 = cases;
  for (int ps = 8; ps >= 4; ps -= 4) {
    for (uint32_t cnt = 0; cnt <= 13; cnt++) {
      for (int rep = 0; rep < 400; rep++) {
        size_t n = put_le(pay, 11, 2);
        n += put_le(pay + n, cnt, 4);
        int mode = rep % 5;
        uint64_t run = vals[rnd() % nv];
        unsigned big_at = (unsigned)(rep / 5) % 16;
        for (uint32_t i = 0; i < cnt; i++) {
          uint64_t v = mode == 0 ? vals[rnd() % nv]                               /* any digit count */
                       : mode == 1 ? run                                          /* all the same */
                       : mode == 2 ? rnd() >> (12 + rnd() % 52)                   /* below 2^52 */
                       : mode == 3 ? (i == big_at ? (1ull << 52) + rnd() % 4096 : rnd() >> (12 + rnd() % 52))
                                   : (i == big_at ? (1ull << 52) - 1 : (uint64_t)(rnd() % 16)); /* one ≥ or at 2^52 − 1 */
          n += put_le(pay + n, v, (unsigned)ps);
        }
        compare(e, pay, n, ps, 1);
      }
      /* every value of the list at every place of a block of 4 (the others small) */
      if (cnt >= 4 && cnt <= 8)
        for (size_t j = 0; j < nv; j++)
          for (uint32_t at = 0; at < cnt; at++) {
            size_t n = put_le(pay, 11, 2);
            n += put_le(pay + n, cnt, 4);
            for (uint32_t i = 0; i < cnt; i++) n += put_le(pay + n, i == at ? vals[j] : (uint64_t)i * 0x1111, (unsigned)ps);
            compare(e, pay, n, ps, 1);
          }
    }
  }
  fprintf(stderr, "hex arrays: %zu renderings compared\n", cases - c0);
  dec_event_free(e);
}

/* ---- 2. UTF-16 strings */
static const uint16_t SPECIAL[] = {'"', '\\', '\n', '\t', 1, 0x1F, 0x7F, 0x80, 0xE9, 0x100, 0x20AC, 0xD83D, 0xDE00, 0xDC00, 0xFFFF, 0};

static void strings(void) {
  static const char *const NM[] = {"MethodID", "MethodNamespace", "MethodName", "MethodSignature", "ClrInstanceID"};
  static const uint16_t TY[][2] = {{10, 4}, {1, 0}, {1, 0}, {1, 0}, {6, 0}};
  struct dec_event *e = schema(NM, TY, 5, -1);
  unsigned char *pay = malloc(4096);
  size_t c0 = cases;
  for (size_t len = 0; len <= 100; len++) {
    for (size_t at = 0; at <= len; at++) { /* at == len: none */
      for (size_t s = 0; s < sizeof SPECIAL / sizeof SPECIAL[0]; s++) {
        if (at == len && s) break;
        int which = (int)((len + at + s) % 3); /* the string that holds it */
        size_t n = put_le(pay, 0x7ff812345678ull, 8);
        for (int k = 0; k < 3; k++) {
          size_t l = k == which ? len : (len * 7 + at + (size_t)k) % 40;
          for (size_t u = 0; u < l; u++) {
            uint16_t c = (uint16_t)('A' + (u + (size_t)k) % 58);
            if (c == '\\' || c == '`') c = 'x';
            if (k == which && u == at) c = SPECIAL[s];
            if (k == which && u == at + 1 && SPECIAL[s] == 0xD83D && (len & 1)) c = 0xDE00; /* a pair */
            n += put_le(pay + n, c, 2);
          }
          n += put_le(pay + n, 0, 2);
        }
        n += put_le(pay + n, 9, 2);
        compare(e, pay, n, 8, 1);
        /* the payload cut inside the strings, and odd */
        compare(e, pay, n - 1, 8, 0);
        compare(e, pay, n - 2 - 2 * (at % 5), 8, 0);
      }
    }
  }
  /* the last string ending at the payload's end: with its NUL, without it, odd */
  static const char *const NM2[] = {"A", "TypeName"};
  static const uint16_t TY2[][2] = {{8, 0}, {1, 0}};
  struct dec_event *e2 = schema(NM2, TY2, 2, -1);
  for (size_t len = 0; len <= 100; len++)
    for (size_t at = 0; at <= len; at++)
      for (size_t s = 0; s < sizeof SPECIAL / sizeof SPECIAL[0]; s += (at == len ? 99 : 1)) {
        size_t n = put_le(pay, 5, 4);
        for (size_t u = 0; u < len; u++) n += put_le(pay + n, u == at ? SPECIAL[s] : (uint16_t)('a' + u % 26), 2);
        compare(e2, pay, n, 8, 1);                /* no NUL */
        compare(e2, pay, n + put_le(pay + n, 0, 2), 8, 1); /* a NUL */
        pay[n] = 'z';
        compare(e2, pay, n + 1, 8, 0); /* odd */
      }
  fprintf(stderr, "strings: %zu renderings compared\n", cases - c0);
  free(pay);
  dec_event_free(e);
  dec_event_free(e2);
}

/* ---- 3. hex fields in a row */
static void hex_runs(void) {
  static const char *const NM[] = {"MethodID", "ModuleID", "MethodStartAddress", "MethodSize", "MethodToken", "Tail"};
  static const uint16_t W[][2] = {{10, 4}, {8, 4}, {16, 0}, {10, 4}, {8, 4}}; /* 8, 4, ptr, 8, 4 bytes */
  uint64_t vals[64 * 3 + 2];
  size_t nv = 0;
  vals[nv++] = 0;
  for (int k = 1; k < 64; k++) {
    vals[nv++] = (1ull << k) - 1;
    vals[nv++] = 1ull << k;
    vals[nv++] = (1ull << k) + 1;
  }
  vals[nv++] = ~0ull;
  unsigned char pay[128];
  size_t c0 = cases;
  for (int sc = 0; sc < 400; sc++) {
    uint32_t nf = 1 + (uint32_t)(rnd() % 5);
    uint16_t ty[6][2];
    unsigned wd[6];
    for (uint32_t i = 0; i < nf; i++) {
      unsigned t = (unsigned)(rnd() % 5);
      ty[i][0] = W[t][0];
      ty[i][1] = W[t][1];
    }
    ty[nf][0] = 6; /* a UINT16 after them */
    ty[nf][1] = 0;
    struct dec_event *e = schema(NM + (5 - nf), ty, nf + 1, -1);
    if (nf >= 2 && rnd() % 4 == 0) { /* one of them a count of the last (kept by the plan) */
      e->f[nf].is_array = 1;
      e->f[nf].count_ref = (int32_t)(rnd() % nf);
      e->f[nf].count = 1;
    }
    for (int ps = 8; ps >= 4; ps -= 4) {
      for (uint32_t i = 0; i < nf; i++) wd[i] = ty[i][0] == 16 ? (unsigned)ps : ty[i][0] == 10 ? 8u : 4u;
      for (int rep = 0; rep < 60; rep++) {
        size_t n = 0;
        for (uint32_t i = 0; i < nf; i++) {
          uint64_t v = rep % 3 == 0 ? vals[rnd() % nv] : rep % 3 == 1 ? rnd() >> (rnd() % 64) : rnd() % 3;
          n += put_le(pay + n, v, wd[i]);
        }
        for (int k = 0; k < 8; k++) n += put_le(pay + n, 2, 2);
        compare(e, pay, n, ps, 0);
        compare(e, pay, (size_t)(rnd() % (n + 1)), ps, 0); /* cut anywhere */
      }
    }
    dec_event_free(e);
  }
  fprintf(stderr, "hex runs: %zu renderings compared\n", cases - c0);
}

/* ---- 4. decimal integer arrays */
static void dec_arrays(void) {
  static const char *const NM[] = {"MethodExtent", "CountOfMapEntries", "ILOffsets", "NativeOffsets", "ClrInstanceID"};
  static const unsigned IN[] = {4, 6, 8, 10}; /* UINT8, 16, 32, 64 */
  uint64_t vals[128];
  size_t nv = 0;
  static const uint64_t E[] = {0, 1, 9, 10, 99, 100, 998, 999, 1000, 1001, 9999, 10000, 10001, 99999, 100000,
                               999999, 1000000, 9999999, 10000000, 99999999, 100000000, 100000001, 999999999,
                               1000000000, 4294967199u, 4294967200u, 4294967201u, 4294967293u, 4294967294u,
                               4294967295u, 4294967296ull, ~0ull};
  for (size_t i = 0; i < sizeof E / sizeof E[0]; i++) vals[nv++] = E[i];
  unsigned char pay[16 + 2 * 8 * 16];
  size_t c0 = cases;
  for (unsigned t = 0; t < 4; t++) {
    unsigned wd = t == 0 ? 1u : t == 1 ? 2u : t == 2 ? 4u : 8u;
    uint64_t lim = wd == 8 ? ~0ull : (1ull << (8 * wd)) - 1;
    const uint16_t TY[][2] = {{4, 0}, {6, 0}, {(uint16_t)IN[t], 0}, {(uint16_t)IN[t], 0}, {6, 0}};
    struct dec_event *e = schema(NM, TY, 5, -1);
    for (int k = 2; k <= 3; k++) {
      e->f[k].is_array = 1;
      e->f[k].count_ref = 1;
    }
    for (uint32_t cnt = 0; cnt <= 13; cnt++) {
      for (int rep = 0; rep < 60 + (int)(cnt * nv); rep++) {
        size_t n = put_le(pay, 0, 1);
        n += put_le(pay + n, cnt, 2);
        for (int a = 0; a < 2; a++)
          for (uint32_t i = 0; i < cnt; i++) {
            uint64_t v;
            if (rep < (int)(cnt * nv)) /* every listed value at every place, the others small */
              v = (uint32_t)rep % cnt == i && a == (rep & 1) ? vals[(size_t)rep / cnt] : (uint64_t)(i * 37 + (unsigned)a);
            else
              v = rep % 3 == 0 ? vals[rnd() % nv] : rep % 3 == 1 ? rnd() >> (rnd() % 64) : rnd() % 1200;
            n += put_le(pay + n, v & lim, wd);
          }
        n += put_le(pay + n, 11, 2);
        compare(e, pay, n, 8, 1);
        if (rep % 4 == 0) compare(e, pay, (size_t)(rnd() % (n + 1)), 8, 0); /* cut anywhere */
      }
    }
    dec_event_free(e);
  }
  fprintf(stderr, "decimal arrays: %zu renderings compared\n", cases - c0);
}

/* ---- 5. strings at the end of a payload before an unreadable page */
static void strings_guard(void) {
#ifdef PV_GUARD
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *m = guard_page();
  if (!m) return;
  unsigned char *end = m + pg, b[256];
  static const char *const NM[] = {"A", "B", "TypeName"};
  size_t c0 = cases;
  for (unsigned pre = 0; pre < 2; pre++) {
    /* a UINT32 and a UINT16 before the string (6 bytes: the string's units not 4-aligned), or a
     * UINT64 (8) */
    static const uint16_t TYA[][2] = {{8, 0}, {6, 0}, {1, 0}}, TYB[][2] = {{10, 0}, {4, 0}, {1, 0}};
    struct dec_event *e = schema(NM, pre ? TYB : TYA, 3, -1);
    size_t h = pre ? 9 : 6;
    for (size_t len = 0; len <= 40; len++)
      for (size_t at = 0; at <= len; at++)
        for (size_t s = 0; s < sizeof SPECIAL / sizeof SPECIAL[0]; s += (at == len ? 99 : 1))
          for (int tail = 0; tail < 3; tail++) { /* none, the NUL, an odd byte */
            size_t n = pre ? put_le(b, 0x123456789ull, 8) + put_le(b + 8, 7, 1) : put_le(b, 70000, 4) + put_le(b + 4, 3, 2);
            for (size_t u = 0; u < len; u++) n += put_le(b + n, u == at ? SPECIAL[s] : (uint16_t)('a' + (u * 7) % 26), 2);
            if (tail == 1) n += put_le(b + n, 0, 2);
            if (tail == 2) b[n++] = 'q';
            /* right at the guard page, and 1–63 bytes before it (plain units after the
             * payload there: a read past it would show) */
            static const size_t GAP[] = {0, 1, 3, 17, 40, 63};
            for (size_t g = 0; g < sizeof GAP / sizeof GAP[0]; g++) {
              memset(end - 64, 'x', 64);
              memcpy(end - GAP[g] - n, b, n);
              compare(e, end - GAP[g] - n, n, 8, tail < 2);
            }
            /* and every shorter payload (cut inside the string) */
            if (at == len && s == 0)
              for (size_t k = h; k < n; k++) {
                memcpy(end - k, b, k);
                compare(e, end - k, k, 8, 0);
              }
          }
    dec_event_free(e);
  }
  fprintf(stderr, "strings before a guard page: %zu renderings compared\n", cases - c0);
  guard_free(m);
#endif
}

/* ---- 6. hex quads: two hex pairs in a row, 32 bytes left in their fixed-size run */
static void hex_quads(void) {
#ifdef PV_GUARD
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *m = guard_page();
  if (!m) return;
  unsigned char *end = m + pg;
#else
  static unsigned char buf[256];
  unsigned char *end = buf + sizeof buf;
#endif
  static const char *const NM[] = {"MethodID", "ModuleID", "MethodStartAddress", "MethodSize", "MethodToken",
                                   "A", "B", "C", "D", "E", "F", "G"};
  /* hex: 8 bytes, 4, a pointer; after them: UINT32, UINT16, UINT8, a hex UINT32, a string; one
   * field in four schemas named so long that its key is an op of its own (OP_KEY) */
  static const uint16_t HX[][2] = {{10, 4}, {8, 4}, {16, 0}};
  static const uint16_t TL[][2] = {{8, 0}, {6, 0}, {4, 0}, {8, 4}, {1, 0}};
  static const uint64_t EDGE[] = {0, 1, 0xF, 0x10, 0xFFFFFFFFull, 0x100000000ull, (1ull << 52) - 1, 1ull << 52,
                                  (1ull << 52) + 1, ~0ull, 0x8000000000000000ull, 0x123456789ABCDEFull};
  unsigned char pay[160];
  size_t c0 = cases;
  for (int sc = 0; sc < 300; sc++) {
    uint32_t nh = 4 + (uint32_t)(rnd() % 4), nt = (uint32_t)(rnd() % 5), nf = nh + nt;
    uint16_t ty[12][2];
    for (uint32_t i = 0; i < nh; i++) memcpy(ty[i], HX[rnd() % 3], sizeof ty[i]);
    for (uint32_t i = nh; i < nf; i++) memcpy(ty[i], TL[rnd() % 5], sizeof ty[i]);
    const char *nm[12];
    memcpy(nm, NM, sizeof nm);
    if (sc % 4 == 3) nm[rnd() % nf] = "AFieldNameLongEnoughForAKeyOpOfItsOwn";
    struct dec_event *e = schema(nm, ty, nf, -1);
    for (int ps = 8; ps >= 4; ps -= 4) {
      unsigned wd[12];
      for (uint32_t i = 0; i < nf; i++)
        wd[i] = ty[i][0] == 16 ? (unsigned)ps : ty[i][0] == 10 ? 8u : ty[i][0] == 8 ? 4u : ty[i][0] == 6 ? 2u : ty[i][0] == 4 ? 1u : 0u;
      for (int rep = 0; rep < 40; rep++) {
        size_t n = 0;
        uint32_t big = (uint32_t)(rnd() % (nh + 1)); /* one value ≥ 2^52 there (nh: none) */
        for (uint32_t i = 0; i < nf; i++) {
          uint64_t v = rep % 2 ? EDGE[rnd() % (sizeof EDGE / sizeof EDGE[0])] : rnd() >> (rnd() % 64);
          if (i < nh) v = i == big ? v | 1ull << (52 + rnd() % 12) : v & ((1ull << 52) - 1);
          if (wd[i]) n += put_le(pay + n, v, wd[i]);
          else { /* a string of 0–20 units and its NUL */
            size_t u = (size_t)(rnd() % 21);
            for (size_t k = 0; k < u; k++) n += put_le(pay + n, 'a' + k % 26, 2);
            n += put_le(pay + n, 0, 2);
          }
        }
        /* at the unreadable page (a read past the payload would fault), and every shorter one */
        memcpy(end - n, pay, n);
        compare(e, end - n, n, ps, 1);
        for (size_t k = rep % 4 ? n - (size_t)(rnd() % (n + 1)) : 0; k < n; k += rep % 4 ? n : 1) {
          memcpy(end - k, pay, k);
          compare(e, end - k, k, ps, 0);
        }
      }
    }
    dec_event_free(e);
  }
  fprintf(stderr, "hex quads: %zu renderings compared\n", cases - c0);
#ifdef PV_GUARD
  guard_free(m);
#endif
}

int main(void) {
  hex_arrays();
  strings();
  hex_runs();
  dec_arrays();
  strings_guard();
  hex_quads();
  fprintf(stderr, "%zu compared, %zu by the plan, %zu also handed over (dec_plan_hand), %zu different\n", cases, planned,
          handed, bad);
  CHECK(planned > cases / 2);
  CHECK(handed > cases / 4);
  CHECK_EQ(bad, 0);
  T_DONE();
}
