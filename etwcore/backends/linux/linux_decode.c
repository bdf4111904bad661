/* linux_decode.c — the hot path of the Linux backend: raw tracefs events → encoded JSON.
 *
 * One `struct lx_dec` per reader thread (libtraceevent handles are not thread-safe). For every
 * event id seen, a descriptor is built once from the tep format: the `System` block as a
 * template (rendered by the shared etw_event_write_system with marker values and cut at the
 * markers, so the shape is exactly the core's) and an array of {`,"key":` literal, offset, size,
 * kind}. The per-event loop then only copies literals and formats numbers: no tep list walks,
 * no strlen, no tep_print_event.
 *
 * Layout facts relied upon (checked at descriptor build, bounds-checked per event): host and
 * kernel share endianness (live tracing only); `__data_loc` is a u32 (len << 16 | offset),
 * `__rel_loc` the same with the offset relative to the end of the field.
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "simd.h" /* includes cc.h: ETW_SSE2 and the GNU C attributes and builtins, with their C11 twins */

#include <event-parse.h>
#include <kbuffer.h>
#include <tracefs.h>

#include "etwcore/host.h"
#include "linux/linux_int.h"

/* the fast encoder copies this many bytes of head (its length at most: provider + event name
 * up to 50 characters; the longest in Linux 6.1 have 46); longer heads take the checked path */
#define LX_HEAD_COPY 320
#define MARK_TS 1234567800LL /* renders as 1970-01-01T00:00:01.2345678Z */
#define MARK_PID 987654321
#define MARK_TID 987654322
#define LX_MAX_EVENT_ID 65535

/* Decimal digits four at a time: lx_t4[n] is n (< 10000) as 4 ASCII digits with leading zeros,
 * first digit in the lowest byte; lx_t4l[n] is the same without the leading zeros (n >= 1),
 * left-aligned, and its length. Filled once (120 KB). */
static uint32_t lx_t4[10000];
static struct lx_lead { uint32_t txt, len; } lx_t4l[10000];
static pthread_once_t lx_t4_once = PTHREAD_ONCE_INIT;

static void t4_fill(void) {
  for (uint32_t n = 0; n < 10000; n++) {
    uint32_t d[4] = {n / 1000, n / 100 % 10, n / 10 % 10, n % 10};
    uint32_t v = 0, lz = n >= 1000 ? 0 : n >= 100 ? 1 : n >= 10 ? 2 : 3;
    for (int i = 0; i < 4; i++) v |= ('0' + d[i]) << (8 * i);
    lx_t4[n] = v;
    lx_t4l[n].txt = v >> (8 * lz);
    lx_t4l[n].len = 4 - lz;
  }
}

/* 1 to 4 digits of 1 <= n < 10000, no leading zeros; writes 4 bytes */
static inline ETW_ALWAYS_INLINE char *put_lead4(char *p, uint32_t n) {
  memcpy(p, &lx_t4l[n].txt, 4);
  return p + lx_t4l[n].len;
}

/* exactly 4 digits of n < 10000 */
static inline ETW_ALWAYS_INLINE char *put4(char *p, uint32_t n) {
  memcpy(p, &lx_t4[n], 4);
  return p + 4;
}

/* x / 10000 for x < 1e8 (exact: the multiplier's excess, 0.22 / 2^40, adds less than 2.1e-5
 * to x / 10000, whose fraction is at most 0.9999); the multiplier fits an imm32 */
static inline ETW_ALWAYS_INLINE uint32_t div1e4(uint32_t x) {
  return (uint32_t)(((uint64_t)x * 109951163u) >> 40);
}

/* 17 to 20 digits: rare, out of line */
static ETW_NOINLINE char *put_u64_huge(char *p, uint64_t v) {
  uint32_t top = (uint32_t)(v / 10000000000000000ULL); /* 1 to 1844 */
  v -= top * 10000000000000000ULL;
  uint32_t hi = (uint32_t)(v / 100000000), lo = (uint32_t)(v - (uint64_t)hi * 100000000);
  uint32_t h1 = div1e4(hi), l1 = div1e4(lo);
  p = put_lead4(p, top);
  p = put4(p, h1);
  p = put4(p, hi - h1 * 10000);
  p = put4(p, l1);
  return put4(p, lo - l1 * 10000);
}

/* 9 to 20 digits (v >= 1e8) */
static inline ETW_ALWAYS_INLINE char *put_u64_big(char *p, uint64_t v) {
  uint64_t hi = v / 100000000;
  if (ETW_EXPECT(hi >= 100000000, 0)) return put_u64_huge(p, v);
  uint32_t lo = (uint32_t)v - (uint32_t)hi * 100000000u; /* exact mod 2^32: lo < 1e8 */
  uint32_t l1 = div1e4(lo);
  if (hi >= 10000) {
    uint32_t h1 = div1e4((uint32_t)hi);
    p = put_lead4(p, h1);
    p = put4(p, (uint32_t)hi - h1 * 10000);
  } else {
    p = put_lead4(p, (uint32_t)hi);
  }
  p = put4(p, l1);
  return put4(p, lo - l1 * 10000);
}

/* writes v in decimal at p, returns the end; p must have LX_NUM_MAX writable bytes */
#define LX_NUM_MAX 28
static inline ETW_ALWAYS_INLINE char *put_u64(char *p, uint64_t v) {
  if (v < 10) { /* flags, fds, small args: the most common values by far */
    *p = (char)('0' + v);
    return p + 1;
  }
  if (v >= 100000000) return put_u64_big(p, v);
  if (v < 10000) return put_lead4(p, (uint32_t)v);
  uint32_t hi = div1e4((uint32_t)v);
  p = put_lead4(p, hi);
  return put4(p, (uint32_t)v - hi * 10000);
}

static inline ETW_ALWAYS_INLINE char *put_i64(char *p, int64_t v) {
  if (v < 0) {
    *p++ = '-';
    return put_u64(p, (uint64_t)0 - (uint64_t)v);
  }
  return put_u64(p, (uint64_t)v);
}

/* the rest of put_small: 9 digits and more, or negative (the value as int64) */
static ETW_NOINLINE char *put_small_rare(char *p, int64_t v) {
  return put_i64(p, v);
}

/* put_i64 for values that are usually small and non-negative (pids, priorities, states, ints
 * narrower than 64 bits): below 1e8 as unsigned, no sign test; the rest out of line */
static inline ETW_ALWAYS_INLINE char *put_small(char *p, int64_t v) {
  uint64_t u = (uint64_t)v;
  if (u < 10) {
    *p = (char)('0' + u);
    return p + 1;
  }
  if (u < 10000) return put_lead4(p, (uint32_t)u);
  if (ETW_EXPECT(u >= 100000000, 0)) return put_small_rare(p, v);
  uint32_t hi = div1e4((uint32_t)u);
  p = put_lead4(p, hi);
  return put4(p, (uint32_t)u - hi * 10000);
}

/* copy @n bytes in 16-byte blocks: dst and src must have 15 bytes of slack */
static inline void cp16(char *d, const char *s, size_t n) {
  for (size_t i = 0; i < n; i += 16) memcpy(d + i, s + i, 16);
}

/* same in 32-byte blocks: dst and src must have 31 bytes of slack */
static inline void cp32(char *d, const char *s, size_t n) {
  for (size_t i = 0; i < n; i += 32) memcpy(d + i, s + i, 32);
}

/* etw_batch_full, inline */
static inline int etw_batch_full_inl(const struct etw_batch *b) {
  return b->n >= b->cap || b->data.len >= b->data.max - b->data.max / 8;
}

/* pointer to @n writable bytes at the end of @w, or NULL (w->err set) */
static inline char *res(struct etw_jw *w, size_t n) {
  if (etw_jw_reserve(w, n)) return NULL;
  return w->buf + w->len;
}

/* The high bit of each of the 8 bytes that JSON cannot take as is: < 0x20 (NUL included), '"',
 * '\\', >= 0x80 (UTF-8, checked by the core's writer). Borrows only run upwards from a byte that
 * matched, so the lowest set bit is always exact; the bits above it may not be. */
static inline uint64_t bad8(uint64_t v) {
  const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
  uint64_t lt20 = (v - ones * 0x20) & ~v;
  uint64_t q = v ^ (ones * 0x22), b = v ^ (ones * 0x5c);
  uint64_t zq = (q - ones) & ~q, zb = (b - ones) & ~b;
  return (lt20 | zq | zb | v) & high;
}

/* Copies s[0..max) to q while looking for the first byte that JSON cannot take as is (see
 * bad8); returns its index, or max. Reads only lo[0..) up to s + max (lo <= s: the start of
 * the record, readable); writes q[0..max + 15). */
static inline size_t scan_copy(char *q, const unsigned char *s, size_t max,
                               const unsigned char *lo) {
  size_t k = 0;
  (void)lo; /* (the vector path's) */
#if SIMD_VEC
  if (max >= 16) { /* the first block on its own: comms are exactly one */
    unsigned m = simd_copy_jsonbad16(q, s);
    if (m) return (size_t)__builtin_ctz(m);
    k = 16;
  } else if ((size_t)(s - lo) + max >= 16) {
    /* a short string: the 16 bytes that end with it (the record's bytes before it are
     * readable) for the scan, and overlapping copies inside s[0..max) */
    unsigned m = simd_jsonbad16(s + max - 16) >> (16 - max);
    if (max >= 8) {
      uint64_t a, b;
      memcpy(&a, s, 8);
      memcpy(&b, s + max - 8, 8);
      memcpy(q, &a, 8);
      memcpy(q + max - 8, &b, 8);
    } else if (max >= 4) {
      uint32_t a, b;
      memcpy(&a, s, 4);
      memcpy(&b, s + max - 4, 4);
      memcpy(q, &a, 4);
      memcpy(q + max - 4, &b, 4);
    } else {
      for (size_t i = 0; i < max; i++) q[i] = (char)s[i];
    }
    return m ? (size_t)__builtin_ctz(m) : max;
  }
  for (; k + 16 <= max; k += 16) {
    unsigned m = simd_copy_jsonbad16(q + k, s + k);
    if (m) return k + (size_t)__builtin_ctz(m);
  }
  if (k == max) return max;
  if (max >= 16) { /* the last 16 bytes, overlapping what was checked already */
    size_t b = max - 16;
    unsigned m = simd_copy_jsonbad16(q + b, s + b) >> (k - b);
    return m ? k + (size_t)__builtin_ctz(m) : max;
  }
#endif
  for (; k + 8 <= max; k += 8) {
    uint64_t v;
    memcpy(&v, s + k, 8);
    memcpy(q + k, &v, 8);
    uint64_t m = bad8(v);
    if (m) return k + ((size_t)etw_ctz64(m) >> 3);
  }
  if (k == max) return max;
  if (max >= 8) {
    size_t b = max - 8;
    uint64_t v;
    memcpy(&v, s + b, 8);
    memcpy(q + b, &v, 8);
    uint64_t m = bad8(v) >> (8 * (k - b));
    return m ? k + ((size_t)etw_ctz64(m) >> 3) : max;
  }
  for (; k < max; k++) {
    unsigned char c = s[k];
    q[k] = (char)c;
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) return k;
  }
  return max;
}

/* JSON string of the C string in s[0..max) (up to the first NUL) at p, which has room for
 * max + 18 bytes; returns the end. Plain text (the usual case: comms, paths) is copied while
 * it is scanned; for text that needs escaping or UTF-8 checks it returns NULL: the caller
 * writes it with the core's etw_jw_str (put_cstr_core). Reads nothing outside lo[0..) up to
 * s + max (lo: the start of the record). */
static inline char *fput_cstr(char *p, const unsigned char *s, size_t max,
                              const unsigned char *lo) {
  char *q = p + 1;
  *p = '"';
  size_t n = scan_copy(q, s, max, lo);
  if (ETW_EXPECT(n < max && s[n], 0)) return NULL;
  q[n] = '"';
  return q + n + 1;
}

/* the string of fput_cstr through the core's writer, its opening quote at p (which finds its
 * own room: w->buf may move); returns the end */
static ETW_NOINLINE char *put_cstr_core(struct etw_jw *w, char *p,
                                        const unsigned char *s, size_t max) {
  w->len = (size_t)(p - w->buf);
  etw_jw_str(w, (const char *)s, strnlen((const char *)s, max));
  return w->buf + w->len;
}

/* the same, appended to @w (checked path) */
static void put_cstr(struct etw_jw *w, const unsigned char *s, size_t max) { /* lo = s */
  char *p = res(w, max + 18);
  if (!p) return;
  char *q = fput_cstr(p, s, max, s);
  if (!q) q = put_cstr_core(w, p, s, max);
  w->len = (size_t)(q - w->buf);
}

static inline uint64_t ld_u(const unsigned char *p, unsigned size) {
  switch (size) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}

static inline int64_t ld_s(const unsigned char *p, unsigned size) {
  switch (size) {
    case 1: return (int8_t)p[0];
    case 2: { int16_t v; memcpy(&v, p, 2); return v; }
    case 4: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
  }
}

/* ---- descriptors */

static void desc_free(struct lx_evdesc *e) {
  if (!e) return;
  free(e->f);
  free(e->tmpl);
  free(e->head);
  free(e->ops);
  free(e);
}

static int find_sub(const char *hay, size_t n, size_t from, const char *needle) {
  size_t m = strlen(needle);
  for (size_t i = from; i + m <= n; i++)
    if (!memcmp(hay + i, needle, m)) return (int)i;
  return -1;
}

/* etw_event_write_system with `"Host":…` (etw_host_name) after the Provider object: every
 * Linux event says which machine it came from, so merged streams stay attributable. */
static void write_system_host(struct etw_jw *w, const struct etw_sys *sys) {
  size_t mark = w->len;
  etw_event_write_system(w, sys);
  if (w->err) return;
  int at = find_sub(w->buf, w->len, mark, "},\"EventID\":"); /* no string holds a bare quote */
  if (at < 0) return;
  size_t cut = (size_t)at + 1, n = w->len - cut;
  char *tail = malloc(n);
  if (!tail) {
    w->err = 2;
    return;
  }
  memcpy(tail, w->buf + cut, n);
  etw_jw_truncate(w, cut);
  etw_jw_lit(w, ",\"Host\":");
  etw_jw_cs(w, etw_host_name());
  etw_jw_raw(w, tail, n);
  free(tail);
}

/* The System block of @provider/@id/@name as the core writes it, with marker values for the
 * time, pid and tid, then `,"EventData":{`; the markers' positions in *a (the time's opening
 * quote), *b (pid) and *c (tid). Returns 0, or -1 (w is freed by the caller either way). */
static int render_system(struct lx_dec *d, struct etw_jw *w, const char *provider, uint32_t id,
                         const char *name, int *a, int *b, int *c) {
  etw_jw_init(w, 4096);
  struct etw_sys sys = {0};
  sys.provider = provider;
  sys.event_id = id;
  sys.level = 4;
  sys.ts_ns = MARK_TS;
  sys.event_name = name;
  sys.pid = MARK_PID;
  sys.tid = MARK_TID;
  sys.cpu = d->cpu;
  write_system_host(w, &sys);
  etw_jw_lit(w, ",\"EventData\":{");
  if (w->err) return -1;
  const char *s = w->buf;
  size_t n = w->len;
  *a = find_sub(s, n, 0, "\"1970-01-01T00:00:01.2345678Z\"");
  *b = *a < 0 ? -1 : find_sub(s, n, (size_t)*a + 30, "987654321");
  *c = *b < 0 ? -1 : find_sub(s, n, (size_t)*b + 9, "987654322");
  return (*a < 0 || *b < 0 || *c < 0 || n > 65535) ? -1 : 0;
}

static void build_template(struct lx_dec *d, struct lx_evdesc *e) {
  struct etw_jw w;
  int a, b, c;
  e->tmpl_ok = 0;
  if (render_system(d, &w, e->provider, e->id, e->name, &a, &b, &c)) goto out;
  {
    const char *s = w.buf;
    size_t n = w.len;
    e->tmpl = calloc(1, n + 32);
    if (!e->tmpl) goto out;
    memcpy(e->tmpl, s, n);
    e->t_off[0] = 0;
    e->t_len[0] = (uint16_t)a;
    e->t_off[1] = (uint16_t)(a + 30);
    e->t_len[1] = (uint16_t)(b - (a + 30));
    e->t_off[2] = (uint16_t)(b + 9);
    e->t_len[2] = (uint16_t)(c - (b + 9));
    e->t_off[3] = (uint16_t)(c + 9);
    e->t_len[3] = (uint16_t)(n - (size_t)(c + 9));
    e->tmpl_ok = 1;
    /* the fast encoder's head: everything up to the pid, if the rest is the reader's t2/t3 */
    if (e->t_len[2] == d->t2_len && !memcmp(s + e->t_off[2], d->t2, d->t2_len) &&
        e->t_len[3] == d->t3_len && !memcmp(s + e->t_off[3], d->t3, d->t3_len) &&
        (size_t)b <= LX_HEAD_COPY) {
      e->head = calloc(1, (size_t)b + LX_HEAD_COPY + 64);
      if (e->head) {
        memcpy(e->head, s, (size_t)b);
        e->hlen = (uint16_t)b;
        e->hpos = (uint16_t)a;
        /* the date part of the cached second (time_sec refreshes every head when it changes;
         * while nothing is cached, the first event calls time_sec) */
        if (d->sec_span) memcpy(e->head + a, d->secpfx, 21);
      }
    }
  }
out:
  etw_jw_free(&w);
}

static int field_kind(const struct tep_format_field *f, struct lx_field *o) {
  unsigned long fl = f->flags;
  unsigned elem = f->elementsize;
  o->esigned = (fl & TEP_FIELD_IS_SIGNED) ? 1 : 0;
  o->rel = (fl & TEP_FIELD_IS_RELATIVE) ? 1 : 0;
  if (fl & TEP_FIELD_IS_DYNAMIC) {
    if (f->size != 4) return LX_BYTES;
    if ((fl & TEP_FIELD_IS_STRING) || (f->type && strstr(f->type, "char") && elem <= 1))
      return LX_DSTR;
    if (elem == 1 || elem == 2 || elem == 4 || elem == 8) {
      o->elem = (uint8_t)elem;
      return LX_DARR;
    }
    return LX_BYTES;
  }
  if (fl & TEP_FIELD_IS_ARRAY) {
    if ((fl & TEP_FIELD_IS_STRING) || (f->type && strstr(f->type, "char") && elem <= 1))
      return LX_STR;
    if (!elem && f->arraylen) elem = (unsigned)f->size / f->arraylen;
    if ((elem == 1 || elem == 2 || elem == 4 || elem == 8) && f->size % (int)elem == 0) {
      o->elem = (uint8_t)elem;
      return LX_ARR;
    }
    return LX_BYTES;
  }
  if (fl & TEP_FIELD_IS_POINTER) return (f->size == 4 || f->size == 8) ? LX_PTR : LX_BYTES;
  switch (f->size) {
    case 1: return o->esigned ? LX_S8 : LX_U8;
    case 2: return o->esigned ? LX_S16 : LX_U16;
    case 4: return o->esigned ? LX_S32 : LX_U32;
    case 8: return o->esigned ? LX_S64 : LX_U64;
    default: return LX_BYTES;
  }
}

/* ---- the fast encoder's steps (see struct lx_op) */

#define LX_ARR_UNROLL 64 /* arrays up to this many elements become one step per element */

struct opb {
  struct lx_op *ops;
  uint32_t n, cap;
  char lit[256]; /* literal not yet attached to a step */
  size_t ln;
  int err;
};

static struct lx_op *opb_new(struct opb *b) {
  if (b->n == b->cap) {
    uint32_t nc = b->cap ? b->cap * 2 : 16;
    struct lx_op *o = realloc(b->ops, nc * sizeof *o);
    if (!o) {
      b->err = 1;
      return NULL;
    }
    b->ops = o;
    b->cap = nc;
  }
  struct lx_op *o = &b->ops[b->n++];
  memset(o, 0, sizeof *o);
  return o;
}

/* pending literal beyond 16 bytes goes into LX_LIT steps */
static void opb_spill(struct opb *b) {
  while (b->ln > 16 && !b->err) {
    struct lx_op *o = opb_new(b);
    if (!o) return;
    memcpy(o->lit, b->lit, 16);
    o->lit_len = 16;
    o->kind = LX_LIT;
    memmove(b->lit, b->lit + 16, b->ln - 16);
    b->ln -= 16;
  }
}

static void opb_lit(struct opb *b, const char *s, size_t n) {
  if (b->ln + n > sizeof b->lit) opb_spill(b);
  if (b->ln + n > sizeof b->lit) {
    b->err = 1;
    return;
  }
  memcpy(b->lit + b->ln, s, n);
  b->ln += n;
}

/* a value step that takes the pending literal */
static struct lx_op *opb_val(struct opb *b, uint8_t kind, uint32_t fi, uint32_t off,
                             uint32_t size) {
  opb_spill(b);
  struct lx_op *o = b->err ? NULL : opb_new(b);
  if (!o) return NULL;
  memcpy(o->lit, b->lit, b->ln);
  o->lit_len = b->ln;
  b->ln = 0;
  o->kind = kind;
  o->fi = (uint16_t)fi;
  o->off = off;
  o->size = size;
  return o;
}

static uint8_t int_kind(unsigned size, int sgn) {
  switch (size) {
    case 1: return sgn ? LX_S8 : LX_U8;
    case 2: return sgn ? LX_S16 : LX_U16;
    case 4: return sgn ? LX_S32 : LX_U32;
    default: return sgn ? LX_S64 : LX_U64;
  }
}

/* The steps of @e from its fields, and the worst-case output of the fast encoder. 0 or -1. */
static int build_ops(struct lx_evdesc *e) {
  struct opb b = {0};
  size_t out = (size_t)e->hlen + LX_HEAD_COPY + 80 + 64; /* head (and its copy's overrun), id text, margin */
  for (uint32_t j = 0; j < e->nf && !b.err; j++) {
    const struct lx_field *f = &e->f[j];
    opb_lit(&b, f->key, f->key_len);
    out += f->key_len + 16u;
    if (f->kind == LX_ARR && f->elem) {
      uint32_t n = f->size / f->elem;
      if (n == 0) {
        opb_lit(&b, "[]", 2);
        continue;
      }
      if (f->elem == 8 && !f->esigned && n <= 65535) {
        opb_lit(&b, "[", 1);
        struct lx_op *o = opb_val(&b, LX_AU64, j, f->off, f->size);
        if (o) o->n = (uint16_t)n;
        opb_lit(&b, "]", 1);
        out += (size_t)n * (LX_NUM_MAX + 1);
        continue;
      }
      if (n <= LX_ARR_UNROLL) {
        opb_lit(&b, "[", 1);
        for (uint32_t k = 0; k < n; k++) {
          if (k) opb_lit(&b, ",", 1);
          opb_val(&b, int_kind(f->elem, f->esigned), j, f->off + k * f->elem, f->elem);
          out += 16 + LX_NUM_MAX;
        }
        opb_lit(&b, "]", 1);
        continue;
      }
    }
    uint8_t kind = f->kind;
#if SIMD_VEC
    if (kind == LX_STR && f->size == 16) {
      kind = LX_STR16;
      opb_lit(&b, "\"", 1);
    }
#endif
    struct lx_op *o = opb_val(&b, kind, j, f->off, f->size);
    if (!o) break;
    o->elem = f->elem;
    o->esigned = f->esigned;
    o->n = f->rel;
    switch (f->kind) {
      case LX_STR: out += 6u * f->size + 2 + 32; break;
      case LX_ARR: out += 2 + (size_t)(f->size / (f->elem ? f->elem : 1)) * 21 + LX_NUM_MAX; break;
      case LX_DSTR: case LX_DARR: out += 32; break; /* + 22 per record byte (e->dyn) */
      case LX_BYTES: out += 4u * f->size / 3 + 8; break;
      default: out += LX_NUM_MAX; break;
    }
  }
  opb_lit(&b, "}}", 2);
  opb_val(&b, LX_END, 0, 0, 0);
  if (b.err) {
    free(b.ops);
    return -1;
  }
  e->ops = b.ops;
  e->nops = b.n;
  out += 16u * b.n;
  if (out > e->max_out) e->max_out = out;
  return 0;
}

static struct lx_evdesc *desc_build(struct lx_dec *d, struct tep_event *ev) {
  struct lx_evdesc *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->provider = etw_intern(ev->system ? ev->system : "");
  e->name = etw_intern(ev->name ? ev->name : "");
  e->id = (uint16_t)ev->id;
  int nf = 0;
  for (struct tep_format_field *f = ev->format.fields; f; f = f->next) nf++;
  e->f = calloc((size_t)(nf ? nf : 1), sizeof *e->f);
  if (!e->f) {
    free(e);
    return NULL;
  }
  int i = 0;
  for (struct tep_format_field *f = ev->format.fields; f; f = f->next) {
    struct lx_field *o = &e->f[i];
    const char *nm = f->name ? f->name : "";
    if (!strncmp(nm, "common_", 7)) continue;
    size_t n = strlen(nm);
    if (n > LX_KEY_MAX - 32) n = LX_KEY_MAX - 32;
    size_t k = 0;
    if (i) o->key[k++] = ','; /* the first field of EventData has no comma */
    o->key[k++] = '"';
    for (size_t j = 0; j < n; j++) {
      char c = nm[j];
      o->key[k++] = (c == '"' || c == '\\' || (unsigned char)c < 0x20) ? '_' : c;
    }
    o->key[k++] = '"';
    o->key[k++] = ':';
    o->key_len = (uint16_t)k;
    o->off = (uint32_t)(f->offset < 0 ? 0 : f->offset);
    o->size = (uint32_t)(f->size < 0 ? 0 : f->size);
    o->kind = (uint8_t)field_kind(f, o);
    i++;
  }
  e->nf = (uint16_t)i;
  build_template(d, e);
  /* fast-path bounds: every fixed field inside records of at least min_size bytes; output of
   * at most max_out bytes plus, with __data_loc fields, 22 bytes per record byte */
  size_t out = (size_t)e->t_len[0] + e->t_len[1] + e->t_len[2] + e->t_len[3] + 30 +
               2 * LX_NUM_MAX + 128 + LX_IDTXT_MAX; /* the id text's ProcessName, copy slack */
  int flex = 0; /* a flexible char[]: the checked path only */
  for (int j = 0; j < i; j++) {
    const struct lx_field *o = &e->f[j];
    uint32_t end = o->off + o->size;
    if (end > e->min_size) e->min_size = end;
    out += o->key_len + 32u;
    switch (o->kind) {
      case LX_STR: out += 6u * o->size + 2; flex |= !o->size; break;
      case LX_ARR: out += 2 + (size_t)(o->size / (o->elem ? o->elem : 1)) * 21 + LX_NUM_MAX; break;
      case LX_DSTR: case LX_DARR: e->dyn = 1; break;
      case LX_BYTES: out += 4u * o->size / 3 + 8; break;
      default: out += LX_NUM_MAX; break;
    }
  }
  e->max_out = out;
  lx_task_desc(e, ev); /* comms in the payload: lx_task_cm names the task from them */
  if (!flex && e->head && build_ops(e) == 0 && e->min_size <= 65536) {
    e->fast = 1;
    e->fmin = e->min_size;
    e->fspan = 65536 - e->min_size;
  }
  e->dyn_mul = e->dyn ? 22u : 0u;
  _Static_assert(offsetof(struct etw_evref, event_id) + sizeof e->evtail <= sizeof(struct etw_evref),
                 "evtail: the evref's tail from event_id on");
  struct etw_evref r;
  memset(&r, 0, sizeof r);
  r.event_id = e->id;
  r.level = 4;
  r.cpu = (uint16_t)d->cpu;
  memcpy(&e->evtail, (const char *)&r + offsetof(struct etw_evref, event_id), sizeof e->evtail);
  return e;
}

int lx_tep_add_system(struct tep_handle *tep, const char *sys) {
  char **evs = tracefs_system_events(NULL, sys);
  if (!evs) return -1;
  for (int j = 0; evs[j]; j++) {
    int sz = 0;
    char *fmt = tracefs_event_file_read(NULL, sys, evs[j], "format", &sz);
    if (fmt && sz > 0) tep_parse_event(tep, fmt, (size_t)sz, sys);
    free(fmt);
  }
  tracefs_list_free(evs);
  return 0;
}

struct tep_handle *lx_tep_new(const char *const *systems) {
  struct tep_handle *tep = tep_alloc();
  if (!tep) return NULL;
  enum tep_endian e = tep_is_bigendian() ? TEP_BIG_ENDIAN : TEP_LITTLE_ENDIAN;
  tep_set_file_bigendian(tep, e);
  tep_set_local_bigendian(tep, e);
  tep_set_long_size(tep, (int)sizeof(long));
  tep_set_page_size(tep, getpagesize());
  int sz = 0;
  char *hp = tracefs_instance_file_read(NULL, "events/header_page", &sz);
  if (!hp || sz <= 0 || tep_parse_header_page(tep, hp, (unsigned long)sz, (int)sizeof(long))) {
    free(hp);
    tep_free(tep);
    return NULL;
  }
  free(hp);
  for (int i = 0; systems && systems[i]; i++) lx_tep_add_system(tep, systems[i]);
  return tep;
}


int lx_dec_init(struct lx_dec *d, struct tep_handle *tep, int cpu, int64_t mono_to_real) {
  memset(d, 0, sizeof *d);
  d->tep = tep;
  d->cpu = cpu;
  d->mono_to_real = mono_to_real;
  d->type_off = 0;
  d->type_size = 2;
  d->pid_off = 4;
  d->sec_gen = 1;
  d->resolve_tgid = 1;
  pthread_once(&lx_t4_once, t4_fill);
  d->tg = calloc(LX_TGID_SLOTS, sizeof *d->tg); /* NULL: ProcessID = ThreadID */
  d->cseq = lx_cseq_none;
  d->page_size = (uint32_t)getpagesize();
  /* the direct page walker assumes the 64-bit little-endian page header (u64 ts, u64 commit) */
  d->walk = (sizeof(long) == 8 && !tep_is_bigendian() && tep && d->page_size >= 64) ? 1 : 0;
  d->kbuf = tep ? tep_kbuffer(tep) : NULL;
  if (!d->kbuf) d->kbuf = kbuffer_alloc(KBUFFER_LSIZE_8, KBUFFER_ENDIAN_LITTLE);
  if (!d->kbuf) return -1;
  /* find the common header layout from any event */
  struct tep_event **evs = tep ? tep_list_events(tep, TEP_EVENT_SORT_ID) : NULL;
  if (evs && evs[0]) {
    struct tep_format_field *t = tep_find_common_field(evs[0], "common_type");
    struct tep_format_field *p = tep_find_common_field(evs[0], "common_pid");
    if (t && (t->size == 1 || t->size == 2 || t->size == 4)) {
      d->type_off = (uint32_t)t->offset;
      d->type_size = (uint32_t)t->size;
    }
    if (p && p->size == 4) d->pid_off = (uint32_t)p->offset;
  }
  /* the parts of the System block that every event id of this reader shares (t2, t3) */
  struct etw_jw w;
  int a, b, c;
  if (render_system(d, &w, "x", 1, "x", &a, &b, &c) == 0) {
    size_t n2 = (size_t)(c - (b + 9)), n3 = w.len - (size_t)(c + 9);
    if (n2 <= 12 && n3 <= 42) { /* so that the id text always fits in LX_IDTXT_MAX - 32 bytes */
      memcpy(d->t2, w.buf + b + 9, n2);
      memcpy(d->t3, w.buf + c + 9, n3);
      d->t2_len = (uint8_t)n2;
      d->t3_len = (uint8_t)n3;
      d->std_hdr = d->type_off == 0 && d->type_size == 2 && d->pid_off == 4;
      d->hdr_min = d->std_hdr ? 8 : UINT32_MAX;
    }
  }
  etw_jw_free(&w);
  /* every u16 event id has its entry: the hot path indexes without a bounds test */
  d->cache = calloc(LX_MAX_EVENT_ID + 1, sizeof *d->cache);
  d->cache_cap = d->cache ? LX_MAX_EVENT_ID + 1 : 0;
  if (!d->std_hdr || !d->cache) d->hdr_min = UINT32_MAX;
  for (uint32_t i = 0; i < LX_IDS; i++) d->ids[i].key = UINT64_MAX; /* empty */
  return 0;
}

void lx_dec_reset(struct lx_dec *d) {
  for (uint32_t i = 0; i < d->nbuilt; i++) {
    d->cache[d->built[i]->id] = NULL;
    desc_free(d->built[i]);
  }
  d->nbuilt = 0;
}

void lx_dec_fini(struct lx_dec *d) {
  lx_dec_reset(d);
  lx_stk_free(d);
  free(d->cache);
  free(d->built);
  d->cache = NULL;
  d->built = NULL;
  d->cache_cap = d->built_cap = 0;
  if (d->kbuf) kbuffer_free(d->kbuf);
  if (d->tep) tep_free(d->tep);
  free(d->tg);
  d->tg = NULL;
  d->kbuf = NULL;
  d->tep = NULL;
}

static struct lx_evdesc *desc_get(struct lx_dec *d, uint32_t id) {
  if (id >= d->cache_cap || !d->tep) return NULL;
  if (d->cache[id]) return d->cache[id];
  struct tep_event *ev = tep_find_event(d->tep, (int)id);
  if (!ev || ev->id != (int)id) return NULL;
  if (d->nbuilt == d->built_cap) {
    uint32_t nc = d->built_cap ? d->built_cap * 2 : 64;
    struct lx_evdesc **n = realloc(d->built, nc * sizeof *n);
    if (!n) return NULL;
    d->built = n;
    d->built_cap = nc;
  }
  struct lx_evdesc *e = desc_build(d, ev);
  if (!e) return NULL;
  d->built[d->nbuilt++] = e;
  d->cache[id] = e;
  return e;
}

/* ---- time: `"YYYY-MM-DDTHH:MM:SS.fffffffZ"` exactly as etw_jw_unix_ns writes it */

/* Makes d->secpfx hold the second of @ns. The minute part comes from the core's writer, once
 * per minute; a new second of the same minute only writes its two digits. Returns 0 when @ns
 * is not cached (the core's text is not the 30-character form there, or the minute's start is
 * outside int64 ns): the caller then asks the core for this event. */
static int time_sec(struct lx_dec *d, int64_t ns) {
  int64_t sec = ns / 1000000000;
  if (ns % 1000000000 < 0) sec--;
  if (sec < INT64_MIN / 1000000000 + 60) return 0;
  int64_t msec = sec / 60 * 60;
  if (sec % 60 < 0) msec -= 60;
  if (!d->min_ok || msec != d->min_sec) {
    struct etw_jw w;
    etw_jw_init(&w, 64);
    etw_jw_unix_ns(&w, msec * 1000000000);
    d->min_ok = !w.err && w.len == 30 && w.buf[18] == '0' && w.buf[19] == '0' && w.buf[20] == '.';
    if (d->min_ok) memcpy(d->minpfx, w.buf, 18);
    d->min_sec = msec;
    etw_jw_free(&w);
  }
  if (!d->min_ok) {
    d->sec_span = 0;
    return 0;
  }
  uint32_t ss = (uint32_t)(sec - msec);
  memcpy(d->secpfx, d->minpfx, 18);
  d->secpfx[18] = (char)('0' + ss / 10);
  d->secpfx[19] = (char)('0' + ss % 10);
  d->secpfx[20] = '.';
  d->sec_ns = sec * 1000000000;
  d->sec_span = 1000000000;
  d->sec_gen++;
  /* every descriptor's head carries the date part of the cached second */
  for (uint32_t i = 0; i < d->nbuilt; i++)
    if (d->built[i]->head) memcpy(d->built[i]->head + d->built[i]->hpos, d->secpfx, 21);
  return 1;
}

/* the 7 digits of the fraction (dn: ns into the second) at p; writes p[0..7) */
static inline ETW_ALWAYS_INLINE void put_frac7(char *p, uint64_t dn) {
  /* dn < 1e9: dn / 100 = dn * ceil(2^37 / 100) >> 37, exact for 32-bit dn */
  uint32_t f7 = (uint32_t)(((uint64_t)(uint32_t)dn * 1374389535u) >> 37), hi = div1e4(f7);
  uint32_t a = lx_t4[hi] >> 8; /* hi < 1000: three digits */
  memcpy(p, &a, 4);
  memcpy(p + 3, &lx_t4[f7 - hi * 10000], 4);
}

/* the quoted time at p (room for 32 bytes), returns the end */
static char *put_time(struct lx_dec *d, char *p, int64_t ns) {
  uint64_t dn = (uint64_t)ns - (uint64_t)d->sec_ns;
  if (dn >= d->sec_span) {
    if (!time_sec(d, ns)) {
      struct etw_jw w;
      etw_jw_init(&w, 64);
      etw_jw_unix_ns(&w, ns);
      size_t n = w.err ? 0 : w.len;
      if (n > 30) n = 30;
      if (n) memcpy(p, w.buf, n);
      etw_jw_free(&w);
      return p + n;
    }
    dn = (uint64_t)ns - (uint64_t)d->sec_ns;
  }
  memcpy(p, d->secpfx, 21);
  put_frac7(p + 21, dn);
  p[28] = 'Z';
  p[29] = '"';
  return p + 30;
}

static void write_undecoded(struct lx_dec *d, struct etw_jw *w, const unsigned char *data,
                            uint32_t size, uint64_t ts, uint32_t type, int32_t pid,
                            int32_t tid, const char *reason) {
  struct etw_sys sys = {0};
  sys.provider = "tracefs";
  sys.event_id = type;
  sys.level = 4;
  sys.ts_ns = (int64_t)ts + d->mono_to_real;
  sys.pid = pid;
  sys.tid = tid;
  sys.cpu = d->cpu;
  write_system_host(w, &sys);
  etw_jw_lit(w, ",\"Undecoded\":{\"Reason\":");
  etw_jw_cs(w, reason);
  etw_jw_lit(w, ",\"Payload\":");
  etw_jw_base64(w, data, size);
  etw_jw_lit(w, "}}");
}

static void write_num_array(struct etw_jw *w, const unsigned char *p, uint32_t n, unsigned elem,
                            int sgn) {
  char *q = res(w, 2 + (size_t)n * 21 + LX_NUM_MAX);
  if (!q) return;
  char *s = q;
  *q++ = '[';
  if (elem == 8 && !sgn) { /* the common case: unsigned long arrays (syscall args) */
    for (uint32_t i = 0; i < n; i++) {
      uint64_t v;
      memcpy(&v, p + (size_t)i * 8, 8);
      *q = ',';
      q += i != 0;
      q = put_u64(q, v);
    }
    *q++ = ']';
    w->len += (size_t)(q - s);
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (i) *q++ = ',';
    if (sgn)
      q = put_i64(q, ld_s(p + (size_t)i * elem, elem));
    else
      q = put_u64(q, ld_u(p + (size_t)i * elem, elem));
  }
  *q++ = ']';
  w->len += (size_t)(q - s);
}


/* a ProcessID / ThreadID value as the core writes it: negative is null */
static inline char *put_id(char *p, int32_t v) {
  if (v < 0) {
    memcpy(p, "null", 4);
    return p + 4;
  }
  return put_u64(p, (uint64_t)v);
}

/* the id-text slot of @tid, holding its ProcessID (x->pid) */
static inline ETW_ALWAYS_INLINE struct lx_idtxt *task_get(struct lx_dec *d,
                                                          int32_t tid, uint64_t ts) {
  struct lx_idtxt *x = &d->ids[(uint32_t)tid % LX_IDS];
  if (ETW_EXPECT(x->key != (uint32_t)tid || ts - x->t >= LX_TGID_TTL ||
                     x->cseq != atomic_load_explicit(&d->cseq[(uint32_t)tid & (LX_COMM_SLOTS - 1)],
                                                     memory_order_relaxed),
                 0))
    x = lx_task_slow(d, tid, ts);
  return x;
}

/* ProcessID / ThreadID text for the checked path, cached while they repeat */
static inline void id_texts(struct lx_dec *d, int32_t pid, int32_t tid) {
  if (pid != d->last_pid || !d->pid_len) {
    char *q = put_id(d->pid_txt, pid);
    d->pid_len = (uint8_t)(q - d->pid_txt);
    d->last_pid = pid;
  }
  if (tid != d->last_tid || !d->tid_len) {
    char *q = put_id(d->tid_txt, tid);
    d->tid_len = (uint8_t)(q - d->tid_txt);
    d->last_tid = tid;
  }
}

static inline uint64_t ld64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* The System block and `,"EventData":{` at p, with room for e->max_out already reserved.
 * Returns the end, or NULL when the time is not cached (nothing written). */
static inline ETW_ALWAYS_INLINE char *encode_head(struct lx_dec *d,
                                                  struct lx_evdesc *e, char *p,
                                                  int64_t tsr,
                                                  const struct lx_idtxt *x) {
  uint64_t dn = (uint64_t)tsr - (uint64_t)d->sec_ns;
  if (ETW_EXPECT(dn >= d->sec_span, 0)) {
    if (!time_sec(d, tsr)) return NULL;
    dn = (uint64_t)tsr - (uint64_t)d->sec_ns;
  }
  char *q = p + e->hlen;
  memcpy(p, e->head, LX_HEAD_COPY); /* straight-line moves, no loop */
  memcpy(q, x->txt, 128);
  if (ETW_EXPECT(x->len > 128, 0)) memcpy(q + 128, x->txt + 128, x->len - 128);
  put_frac7(p + e->hpos + 21, dn);
  return q + x->len;
}

/* a relaxed counter that only this reader writes: no locked instruction */
static inline void count1(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

/* Everything the hot path does not take (the batch is there and was flushed if it was full):
 * odd headers, unknown ids, records too short for the fixed fields, times that are not cached,
 * batches too full for the worst case. The checked writers; same bytes. */
static ETW_NOINLINE void dec_event_any(struct lx_dec *d, const unsigned char *data,
                                       uint32_t size, uint64_t ts,
                                       struct etw_batch *bt) {
  struct etw_jw *w = &bt->data;
  size_t mark = w->len;
  uint32_t type = 0;
  int32_t tid = -1;
  if (size >= d->type_off + d->type_size) type = (uint32_t)ld_u(data + d->type_off, d->type_size);
  if (size >= d->pid_off + 4) tid = (int32_t)ld_s(data + d->pid_off, 4);
  struct lx_evdesc *e = desc_get(d, type);
  const struct lx_idtxt *x = e && e->cm ? lx_task_cm(d, e, data, size, tid, ts) : task_get(d, tid, ts);
  if (!x) return; /* hidden: etwd enabled it for the comm table only */
  int32_t pid = (int32_t)x->pid;
  int64_t tsr = (int64_t)ts + d->mono_to_real;
  struct etw_evref h;
  memset(&h, 0, sizeof h);
  h.ts_ns = tsr;
  h.pid = (uint32_t)pid;
  h.tid = (uint32_t)tid;
  h.level = 4;
  h.cpu = (uint16_t)d->cpu;
  h.event_id = (uint16_t)type;
  if (!e || !e->tmpl_ok) {
    write_undecoded(d, w, data, size, ts, type, pid, tid, e ? "template" : "unknown event id");
    h.provider = etw_intern("tracefs");
    h.name = NULL;
    count1(&d->undecoded);
  } else {
    h.provider = e->provider;
    h.name = e->name;
    size_t fixed = (size_t)e->t_len[0] + e->t_len[1] + e->t_len[2] + e->t_len[3] + 30 +
                   2 * LX_NUM_MAX + 64 + x->nm_len;
    char *p = res(w, fixed);
    if (p) {
      char *p0 = p;
      const char *t = e->tmpl;
      cp32(p, t, e->t_len[0]);
      p += e->t_len[0];
      p = put_time(d, p, tsr);
      cp16(p, t + e->t_off[1], e->t_len[1]);
      p += e->t_len[1];
      id_texts(d, pid, tid);
      memcpy(p, d->pid_txt, 16);
      p += d->pid_len;
      memcpy(p, x->txt + x->nm_off, x->nm_len); /* ,"ProcessName":"…" or nothing */
      p += x->nm_len;
      cp16(p, t + e->t_off[2], e->t_len[2]);
      p += e->t_len[2];
      memcpy(p, d->tid_txt, 16);
      p += d->tid_len;
      cp16(p, t + e->t_off[3], e->t_len[3]);
      p += e->t_len[3];
      w->len += (size_t)(p - p0);
    }
    for (uint32_t i = 0; i < e->nf && !w->err; i++) {
      const struct lx_field *f = &e->f[i];
      const size_t koff = 0;
      const size_t klen = f->key_len;
      if (f->off + f->size > size) {
        char *q = res(w, klen + 4 + 16);
        if (!q) break;
        cp16(q, f->key + koff, klen);
        memcpy(q + klen, "null", 4);
        w->len += klen + 4;
        continue;
      }
      const unsigned char *fp = data + f->off;
      if (f->kind <= LX_S64) {
        char *q = res(w, klen + LX_NUM_MAX + 16);
        if (!q) break;
        char *q0 = q;
        cp16(q, f->key + koff, klen);
        q += klen;
        if (f->kind <= LX_U64)
          q = put_u64(q, ld_u(fp, f->size));
        else
          q = put_i64(q, ld_s(fp, f->size));
        w->len += (size_t)(q - q0);
        continue;
      }
      etw_jw_raw(w, f->key + koff, klen);
      switch (f->kind) {
        case LX_PTR:
          etw_jw_hex(w, ld_u(fp, f->size));
          break;
        case LX_STR: /* size 0: a flexible char[] (ftrace print's buf) runs to the record's end */
          put_cstr(w, fp, f->size ? f->size : size - f->off);
          break;
        case LX_ARR:
          write_num_array(w, fp, f->size / f->elem, f->elem, f->esigned);
          break;
        case LX_DSTR:
        case LX_DARR: {
          uint32_t v = (uint32_t)ld_u(fp, 4);
          uint32_t off = v & 0xffff, len = v >> 16;
          if (f->rel) off += f->off + f->size;
          if ((uint64_t)off + len > size) {
            etw_jw_lit(w, "null");
            break;
          }
          const unsigned char *dp = data + off;
          if (f->kind == LX_DSTR)
            put_cstr(w, dp, len);
          else
            write_num_array(w, dp, len / f->elem, f->elem, f->esigned);
          break;
        }
        default:
          etw_jw_base64(w, fp, f->size);
          break;
      }
    }
    etw_jw_raw(w, "}}", 2);
  }
  if (etw_batch_commit(bt, mark, &h) == 0)
    count1(&d->events);
  else
    count1(&d->enc_dropped);
}

/* lx_dec_event with a full batch, or none: flush it, then the event (into the fresh batch) */
static ETW_NOINLINE void dec_event_flush(struct lx_dec *d, const unsigned char *data,
                                         uint32_t size, uint64_t ts,
                                         struct lx_sink *s) {
  if (s->b) s->flush(s->ctx, s);
  if (!s->b) {
    count1(&d->enc_dropped);
    return;
  }
  if (etw_batch_full_inl(s->b)) /* a sink that left a full batch: no second flush */
    dec_event_any(d, data, size, ts, s->b);
  else
    lx_dec_event(d, data, size, ts, s);
}

/* A long array, a pointer or bytes (LX_ARR, LX_PTR, LX_DARR, LX_BYTES) through the core's
 * checked writers (the room is reserved); the output's new end, or NULL (w->err). */
static ETW_NOINLINE char *put_checked(struct etw_jw *w, char *p, const struct lx_op *o,
                                      const unsigned char *data, uint32_t size) {
  const unsigned char *fp = data + o->off;
  w->len = (size_t)(p - w->buf);
  switch (o->kind) {
    case LX_PTR: etw_jw_hex(w, ld_u(fp, o->size)); break;
    case LX_ARR: write_num_array(w, fp, o->size / o->elem, o->elem, o->esigned); break;
    case LX_DARR: {
      uint32_t v = (uint32_t)ld_u(fp, 4);
      uint32_t off = (v & 0xffff) + (o->n ? o->off + o->size : 0), len = v >> 16;
      if ((uint64_t)off + len > size)
        etw_jw_lit(w, "null");
      else
        write_num_array(w, data + off, len / o->elem, o->elem, o->esigned);
      break;
    }
    default: etw_jw_base64(w, fp, o->size); break;
  }
  return w->err ? NULL : w->buf + w->len;
}

/* unsigned long args[6] and the like (n >= 1 elements at fp): the last 8 unrolled */
static inline ETW_ALWAYS_INLINE char *put_au64(char *p, const unsigned char *fp, unsigned n) {
  const unsigned char *ae = fp + (size_t)n * 8;
  switch (n) {
    default:
      for (const unsigned char *ap = fp; ap < ae - 64; ap += 8) {
        p = put_u64(p, ld64(ap));
        *p++ = ',';
      }
      /* fall through */
    case 8: p = put_u64(p, ld64(ae - 64)); *p++ = ','; /* fall through */
    case 7: p = put_u64(p, ld64(ae - 56)); *p++ = ','; /* fall through */
    case 6: p = put_u64(p, ld64(ae - 48)); *p++ = ','; /* fall through */
    case 5: p = put_u64(p, ld64(ae - 40)); *p++ = ','; /* fall through */
    case 4: p = put_u64(p, ld64(ae - 32)); *p++ = ','; /* fall through */
    case 3: p = put_u64(p, ld64(ae - 24)); *p++ = ','; /* fall through */
    case 2: p = put_u64(p, ld64(ae - 16)); *p++ = ','; /* fall through */
    case 1: p = put_u64(p, ld64(ae - 8)); /* n >= 1 */
  }
  return p;
}

/* The hot path: a known event id whose fixed fields are all in the record, the batch has room
 * for the worst case, the time is cached. Anything else: dec_event_any. */
void lx_dec_event(struct lx_dec *d, const unsigned char *data, uint32_t size, uint64_t ts,
                  struct lx_sink *s) {
  struct etw_batch *bt = s->b;
  if (ETW_EXPECT(!bt || etw_batch_full_inl(bt), 0)) {
    dec_event_flush(d, data, size, ts, s); /* a tail call: nothing here lives across it */
    return;
  }
  if (ETW_EXPECT(size < d->hdr_min, 0)) goto any;
  uint16_t type;
  int32_t tid;
  memcpy(&type, data, 2);
  memcpy(&tid, data + 4, 4);
  struct lx_evdesc *e = d->cache[type]; /* 65536 entries (else hdr_min excludes this path) */
  if (ETW_EXPECT(!e, 0)) e = desc_get(d, type);
  if (ETW_EXPECT(!e || size - e->fmin > e->fspan, 0)) goto any;
  const struct lx_idtxt *x;
  if (ETW_EXPECT(e->cm != 0, 0)) {
    /* a comm of its own task that its slot already shows (sched_switch's prev): the slot;
     * anything else (other comms, changes, hidden events) goes through lx_task_cm */
    int32_t p0;
    memcpy(&p0, data + e->cm_pid[0], 4);
    x = &d->ids[(uint32_t)tid % LX_IDS];
    if (!(e->cm == LX_CM_PAIRS && p0 == tid && x->key == (uint32_t)tid &&
          ts - x->t < LX_TGID_TTL && !memcmp(x->comm, data + e->cm_comm[0], 16) &&
          x->cseq == atomic_load_explicit(&d->cseq[(uint32_t)tid & (LX_COMM_SLOTS - 1)],
                                          memory_order_relaxed)) &&
        !(x = lx_task_cm(d, e, data, size, tid, ts)))
      return; /* hidden */
  } else {
    x = task_get(d, tid, ts);
  }
  struct etw_jw *w = &bt->data;
  size_t mark = w->len;
  size_t need = e->max_out + (size_t)e->dyn_mul * size;
  /* room already there (cap <= max + 1, so this also means mark + need < max), or a reserve
   * that stays below the batch maximum: a failed reserve would poison the writer. The writer
   * has no error here: each event ends in a commit or a truncate, which clear it, and a batch
   * whose first reservation failed has no room (its reserve fails: the checked path). */
  if (ETW_EXPECT(w->cap - mark <= need + 1, 0) &&
      (mark + need >= w->max || etw_jw_reserve(w, need)))
    goto any;
  int64_t tsr = (int64_t)ts + d->mono_to_real;
  char *p = encode_head(d, e, w->buf + mark, tsr, x);
  if (ETW_EXPECT(!p, 0)) goto any;
  /* the event's etw_evref, but for its length, written now: fewer values live in the steps */
  struct etw_evref *r = &bt->ev[bt->n];
  r->off = (uint32_t)mark;
  memcpy(&r->provider, &e->provider, 2 * sizeof(char *)); /* provider, name */
  r->ts_ns = tsr;
  memcpy(&r->pid, &x->pid, 8); /* pid, tid */
  memcpy((char *)r + offsetof(struct etw_evref, event_id), &e->evtail, sizeof e->evtail); /* id, level, cpu */
  /* EventData: every fixed field is inside the record and the room is reserved, so no
   * reserve or bounds checks per field. */
  /* The steps in order (e->ops, built by build_ops, ends with LX_END): each copies its
   * literal (16 bytes, its length counted), then writes its value by its kind. */
  for (const struct lx_op *o = e->ops;; o++) {
    memcpy(p, o->lit, 16);
    p += o->lit_len;
    const unsigned char *fp = data + o->off;
    switch ((enum lx_kind)o->kind) {
      case LX_U8: p = put_small(p, fp[0]); break;
      case LX_U16: {
        uint16_t v;
        memcpy(&v, fp, 2);
        p = put_small(p, v);
        break;
      }
      case LX_U32: {
        uint32_t v;
        memcpy(&v, fp, 4);
        p = put_small(p, v);
        break;
      }
      case LX_U64: p = put_u64(p, ld64(fp)); break;
      case LX_S8: p = put_small(p, (int8_t)fp[0]); break;
      case LX_S16: {
        int16_t v;
        memcpy(&v, fp, 2);
        p = put_small(p, v);
        break;
      }
      case LX_S32: {
        int32_t v;
        memcpy(&v, fp, 4);
        p = put_small(p, v);
        break;
      }
      case LX_S64: p = put_small(p, (int64_t)ld64(fp)); break;
      case LX_AU64: p = put_au64(p, fp, o->n); break;
      case LX_STR: {
        char *q = fput_cstr(p, fp, o->size, data);
        if (ETW_EXPECT(!q, 0)) {
          q = put_cstr_core(w, p, fp, o->size);
          if (w->err) goto fail;
        }
        p = q;
        break;
      }
      case LX_STR16: { /* comms: one 16-byte block, usually NUL-terminated inside it */
#if SIMD_VEC
        unsigned m = simd_copy_jsonbad16(p, fp);
        if (ETW_EXPECT(m == 0, 0)) { /* 16 characters */
          p[16] = '"';
          p += 17;
          break;
        }
        unsigned n = (unsigned)__builtin_ctz(m);
        if (ETW_EXPECT(fp[n] != 0, 0)) { /* to escape or check: the core's writer */
          p = put_cstr_core(w, p - 1, fp, 16);
          if (w->err) goto fail;
          break;
        }
        p[n] = '"';
        p += n + 1;
#endif
        break;
      }
      case LX_DSTR: {
        uint32_t v;
        memcpy(&v, fp, 4);
        uint32_t off = (v & 0xffff) + (o->n ? o->off + o->size : 0), len = v >> 16;
        if ((uint64_t)off + len > size) {
          memcpy(p, "null", 4);
          p += 4;
          break;
        }
        char *q = fput_cstr(p, data + off, len, data);
        if (ETW_EXPECT(!q, 0)) {
          q = put_cstr_core(w, p, data + off, len);
          if (w->err) goto fail;
        }
        p = q;
        break;
      }
      case LX_PTR: case LX_ARR: case LX_DARR: case LX_BYTES:
        if (!(p = put_checked(w, p, o, data, size))) goto fail;
        break;
      case LX_LIT: break;
      case LX_END: goto done;
      default: ETW_UNREACHABLE(); /* (build_ops makes no other kind: no range check) */
    }
  }
done: /* etw_batch_commit, inline: the batch has room, the event is far below 4 GiB, and the
       * writer has no error (the steps that call the core's writers check it) */
  w->len = (size_t)(p - w->buf);
  r->len = (uint32_t)w->len - r->off;
  bt->n++;
  count1(&d->events);
  return;
fail:
  etw_jw_truncate(w, r->off);
any:
  dec_event_any(d, data, size, ts, bt);
}

/* one record of a page: through the stack joiner once the session asks for stacks */
/* 1 if a record is an event: stack records and hidden events (d->hide) are not */
static inline int rec_counts(const struct lx_dec *d, const unsigned char *p, uint32_t len) {
  if (ETW_EXPECT(d->hide != 0, 0) && len >= 2) {
    uint16_t t;
    memcpy(&t, p, 2);
    if (t == d->hide_id[0] || t == d->hide_id[1]) return 0;
  }
  return !d->stk || !lx_stk_is(d, p, len);
}

static inline void dec_rec(struct lx_dec *d, const unsigned char *data, uint32_t size,
                           uint64_t ts, struct lx_sink *s) {
  if (ETW_EXPECT(d->stk != NULL, 0))
    lx_stk_record(d, data, size, ts, s);
  else
    lx_dec_event(d, data, size, ts, s);
}

/* kbuffer's general walker, kept as the reference and the fallback */
static uint64_t page_kbuffer(struct lx_dec *d, void *page, struct lx_sink *s) {
  unsigned long long ts;
  uint64_t n = 0;
  if (kbuffer_load_subbuffer(d->kbuf, page) < 0) return 0;
  for (void *ev = kbuffer_read_event(d->kbuf, &ts); ev; ev = kbuffer_next_event(d->kbuf, &ts)) {
    int sz = kbuffer_event_size(d->kbuf);
    if (sz <= 0) continue;
    if (s) dec_rec(d, ev, (uint32_t)sz, ts, s);
    n += rec_counts(d, ev, (uint32_t)sz);
  }
  d->last_ts = ts;
  return n;
}

/* The ring-buffer page walked directly (64-bit little-endian kernels; checked at init):
 * u64 timestamp, u64 commit (data size | RB_MISSED_* flags in bits 30..31), then events with a
 * u32 header {type_len:5, time_delta:27}: 1..28 = data of type_len*4 bytes; 0 = data whose
 * length (+4) is in the next u32; 29 = padding (delta 0: end of page); 30 = time extend;
 * 31 = absolute time stamp. Same results as kbuffer (tests/unit/test_linux_decode.c). */
#define RB_PADDING 29
#define RB_TIME_EXTEND 30
#define RB_TIME_STAMP 31
static uint64_t page_walk(struct lx_dec *d, const unsigned char *pg, struct lx_sink *s) {
  uint64_t ts, commit;
  memcpy(&ts, pg, 8);
  memcpy(&commit, pg + 8, 8);
  uint32_t size = (uint32_t)commit & 0x3fffffffu;
  if (size > d->page_size - 16) size = d->page_size - 16;
  const unsigned char *p = pg + 16, *end = p + size;
  uint64_t n = 0;
  while (p + 4 <= end) {
    uint32_t h;
    memcpy(&h, p, 4);
    uint32_t tl = h & 31, delta = h >> 5;
    if (tl >= 1 && tl <= 28) {
      ts += delta;
      uint32_t len = tl * 4;
      if (p + 4 + len > end) break;
      if (s) dec_rec(d, p + 4, len, ts, s);
      n += rec_counts(d, p + 4, len);
      p += 4 + len;
      continue;
    }
    if (p + 8 > end) break;
    uint32_t a0;
    memcpy(&a0, p + 4, 4);
    switch (tl) {
      case 0:
        if (a0 < 4 || p + 4 + (uint64_t)a0 > end) { d->last_ts = ts; return n; }
        ts += delta;
        if (s) dec_rec(d, p + 8, a0 - 4, ts, s);
        n += rec_counts(d, p + 8, a0 - 4);
        p += 4 + ((a0 + 3) & ~3u);
        break;
      case RB_PADDING:
        if (!delta) { d->last_ts = ts; return n; } /* the rest of the page is empty */
        ts += delta;
        if (a0 < 4 || p + 4 + (uint64_t)a0 > end) { d->last_ts = ts; return n; }
        p += 4 + ((a0 + 3) & ~3u);
        break;
      case RB_TIME_EXTEND:
        ts += ((uint64_t)a0 << 27) + delta;
        p += 8;
        break;
      default: /* RB_TIME_STAMP */
        ts = (((uint64_t)a0 << 27) | delta) | (ts & 0xf800000000000000ULL);
        p += 8;
        break;
    }
  }
  { d->last_ts = ts; return n; }
}

uint64_t lx_dec_page(struct lx_dec *d, void *page, struct lx_sink *s) {
  if (d->walk == 1) return page_walk(d, page, s);
  return page_kbuffer(d, page, s);
}

uint64_t lx_count_page(struct lx_dec *d, void *page) {
  if (d->walk == 1) return page_walk(d, page, NULL);
  return page_kbuffer(d, page, NULL);
}
