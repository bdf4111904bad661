/* dec_tpl.h — plan templates (struct dec_tpl): the System block text of one event type kept
 * filled in with its last second and (pid, tid), copied to the output by the kernel and manifest
 * plan writers (dec_kplan.c); and the number writers those use. The inline part of the
 * templates; their builders are in dec_sys.c (they format through the System block cache).
 * Private to the decoder; a template belongs to its decoder's thread.
 */
#ifndef ETWCORE_DEC_TPL_H
#define ETWCORE_DEC_TPL_H

#include <stdint.h>
#include <string.h>

#include "decode.h"


/* ---- plan templates (struct dec_tpl)
 *
 * Copied to the output by memcpy (tpl_copy). */
#if ETW_GNUC
#define TPL_INLINE static inline __attribute__((always_inline))
#else
#define TPL_INLINE static inline
#endif

/* @n bytes of template @t to @p (plain memcpy: the 16-byte SSE2 chunk moves it replaced bought
 * nothing measurable, docs/benchmarks.md). */
TPL_INLINE void tpl_copy(char *p, const struct dec_tpl *tp) { memcpy(p, tp->txt, tp->n); }

/* DEC_MEMO_COPY bytes of @t to @p (a kernel plan's memo, either way). */
TPL_INLINE void memo_copy(char *p, const char *t) { memcpy(p, t, DEC_MEMO_COPY); }
#if DEC_MEMO_COPY != 96 || DEC_MEMO_MAX > DEC_MEMO_COPY
#error "memo_copy: DEC_MEMO_COPY"
#endif

#if DEC_TXT_MAX + 111 + 3 + 64 + 31 > DEC_TPL_BYTES || DEC_TPL_BYTES > 48 * 16 || DEC_TPL_BYTES > 24 * 32
#error "copy: DEC_TPL_BYTES"
#endif

/* "000" … "999" as the low 3 bytes of 32-bit words, and "0000" … "9999" (dec_sys.c: filled by
 * dec_tpl_build, before any template is written; dec_tpl_tables) */
extern uint32_t dec_t3[1000], dec_t4[10000];
#define T3 dec_t3
#define T4 dec_t4
void dec_tpl_tables(void);
/* the template builders (dec_sys.c) */
struct dec_sysc;
void dec_tpl_exec(struct dec_sysc *sc, struct dec_tpl *t, uint64_t key);
int dec_tpl_sec(struct dec_sysc *sc, struct dec_tpl *t, uint64_t ft, uint64_t sec);
char *dec_tpl_cpu(const struct dec_tpl *t, char *p, unsigned cpu);
void dec_tpl_names(struct dec_tpl *t, const char *prov, const char *name);
void dec_tpl_head(struct dec_tpl *t, const char *head, unsigned hlen);
int dec_tpl_build(struct dec_sysc *sc, struct dec_tpl *t, const struct etw_sys *s, const struct etw_rec *r,
                  const char *head, unsigned hlen);

/* The reference image of template @t to @ref. */
TPL_INLINE void tpl_img(struct etw_evref *ref, const struct dec_tpl *t) {
  _Static_assert(sizeof *ref == 48, "etw_evref: 48 bytes");
  memcpy(ref, &t->rimg, sizeof *ref);
}

/* tpl_copy of template @t to @p, and with @ref (not NULL) the event reference of record @r
 * written through @t (its FILETIME in the slot's block: @g = FILETIME - fb; its (pid, tid) the
 * slot's; its descriptor the plan's): what dec_fill_ref(@ref, @r, the plan's names) stores, its
 * image copied first. */
TPL_INLINE void tpl_copy_ref(char *p, const struct dec_tpl *t, struct etw_evref *ref, uint64_t g, unsigned cpu) {
  if (ref) {
    tpl_img(ref, t);
    tpl_copy(p, t);
    ref->ts_ns = (int64_t)(t->ts_fb + g * t->ts_mul);
    ref->cpu = (uint16_t)cpu;
  } else {
    tpl_copy(p, t);
  }
}



/* The fraction's digits 4-7 (@lo < 10^4) at @p: one 4-byte store from T4. */
static inline void put_lo4(char *p, unsigned lo) {
#if ETW_LE
  memcpy(p, &T4[lo], 4);
#else
  dec_put4(p, lo);
#endif
}

/* The slot's fraction digits 1-3 of fraction @frac (< 10^7) of the slot's second, and the block of
 * FILETIMEs with them (fb, ts_fb). */
TPL_INLINE void tpl_block(struct dec_tpl *t, unsigned frac) {
  unsigned hi = frac / 10000u;
  char *d = t->txt + t->plen + 21;
#if ETW_LE
  memcpy(d, &T3[hi], 4); /* (its 4th byte over digit 4's place: every copy of the template rewrites it) */
#else
  d[0] = (char)('0' + hi / 100);
  d[1] = (char)('0' + hi / 10 % 10);
  d[2] = (char)('0' + hi % 10);
#endif
  t->fb = t->ft1 - 1u + hi * 10000u;
  t->ts_fb = t->ts_base + (t->fb - t->ft1) * t->ts_mul; /* (wrapping: fb - ft1 may be -1) */
}

/* The System block of record @r and the template's head at @p (reserved: the plan's room), its end
 * (after the head) in *@end, and the event reference in @ref (unless NULL; the plan's, as
 * dec_fill_ref's: a writer that gives up later calls dec_finish, which writes it again): 0, or -1
 * (nothing usable written, @ref untouched) when the time cannot be formatted. */
TPL_INLINE int tpl_emit(struct dec_sysc *sc, struct dec_tpl *t, char *p, const struct etw_rec *r,
                        char **end, struct etw_evref *ref) {
  uint64_t ft = r->filetime; /* (0, written as 1 by the general path: second 0 is never cached) */
  uint64_t g = ft - t->fb;   /* digits 4-7 when ft is in the slot's block, not its first */
  if (ETW_EXPECT(g - 1u >= 9999u, 0)) { /* another block (or its first 100 ns) */
    uint64_t f1 = ft - t->ft1; /* the fraction - 1 when ft is in the slot's second */
    if (f1 >= 9999999u) { /* another second, or a fraction of 0 */
      uint64_t sec = ft / 10000000u;
      if (sec != t->sec && dec_tpl_sec(sc, t, ft, sec)) return -1;
      f1 = ft - t->ft1; /* (a fraction of 0: wraps to UINT64_MAX, + 1 below) */
    }
    tpl_block(t, (unsigned)f1 + 1u);
    g = ft - t->fb;
  }
  uint64_t key = (uint64_t)r->pid << 32 | r->tid;
  if (ETW_EXPECT(key != t->xkey, 0)) dec_tpl_exec(sc, t, key);
  unsigned cpu = r->cpu;
  tpl_copy_ref(p, t, ref, g, cpu);
  put_lo4(p + t->plen + 24, (unsigned)g);
  if (ETW_EXPECT(cpu < 10, 1)) {
    p[t->cpos] = (char)('0' + cpu);
    *end = p + t->n;
  } else {
    *end = dec_tpl_cpu(t, p, cpu);
  }
  return 0;
}

static inline int jw_err(const struct etw_jw *w) { return w->err != 0; }

/* tpl_emit's work at @w's end when the template applies as it is (the FILETIME in its second, its
 * (pid, tid), a processor < 10) and the writer has room for @room bytes (no error, no reservation to
 * make): 0 and the end (after the head; w->len unchanged) in *@end; -1 (nothing written) otherwise. No call: a
 * writer that takes the other case to an out-of-line copy of itself keeps nothing in callee-saved
 * registers. */
TPL_INLINE int tpl_fast(struct dec_tpl *t, struct etw_jw *w, const struct etw_rec *r, struct etw_evref *ref,
                        uint32_t room, char **end) {
  /* (one compare and branch each, the record's own first, the processor read again after them:
   * fewer live values, as in kplan_fix4) */
  if (ETW_EXPECT(r->cpu >= 10, 0)) return -1;
  if (ETW_EXPECT(jw_err(w), 0)) return -1;
  if (ETW_EXPECT(((uint64_t)r->pid << 32 | r->tid) != t->xkey, 0)) return -1;
  uint64_t ft = r->filetime;
  uint64_t g = ft - t->fb; /* digits 4-7 when in the slot's block, not its first 100 ns (tpl_emit) */
  int gm = g - 1u >= 9999u; /* another block of the second: its digits 1-3 first */
  if (ETW_EXPECT(gm && ft - t->ft1 >= 9999999u, 0)) return -1;
  if (ETW_EXPECT(w->cap - w->len <= room, 0)) return -1;
  if (ETW_EXPECT(gm, 0)) {
    tpl_block(t, (unsigned)(ft - t->ft1) + 1u);
    g = ft - t->fb;
  }
  char *p = w->buf + w->len;
  unsigned cpu = r->cpu;
  tpl_copy_ref(p, t, ref, g, cpu);
  put_lo4(p + t->plen + 24, (unsigned)g);
  p[t->cpos] = (char)('0' + cpu);
  *end = p + t->n;
  return 0;
}


/* 0 … 999 as their digits (no leading zeros) in the low bytes of 32-bit words and the digit count
 * in the top byte (little-endian): one 4-byte store writes a small value (put_u32t). */
#if ETW_LE
#define S3E(n)                                                                                          \
  ((n) < 10    ? (uint32_t)('0' + (n)) | 1u << 24                                                       \
   : (n) < 100 ? (uint32_t)('0' + (n) / 10) | (uint32_t)('0' + (n) % 10) << 8 | 2u << 24                \
               : (uint32_t)('0' + (n) / 100) | (uint32_t)('0' + (n) / 10 % 10) << 8 |                   \
                     (uint32_t)('0' + (n) % 10) << 16 | 3u << 24)
#define S3_10(b) S3E(b), S3E(b + 1), S3E(b + 2), S3E(b + 3), S3E(b + 4), S3E(b + 5), S3E(b + 6), S3E(b + 7), \
                 S3E(b + 8), S3E(b + 9)
#define S3_100(b) S3_10(b), S3_10(b + 10), S3_10(b + 20), S3_10(b + 30), S3_10(b + 40), S3_10(b + 50), \
                  S3_10(b + 60), S3_10(b + 70), S3_10(b + 80), S3_10(b + 90)
static const uint32_t S3[1000] = {S3_100(0),   S3_100(100), S3_100(200), S3_100(300), S3_100(400),
                                  S3_100(500), S3_100(600), S3_100(700), S3_100(800), S3_100(900)};
#undef S3_100
#undef S3_10
#undef S3E
#endif

/* dec_put_u32's text of @v at @p, which has room for 4 bytes more than that text needs (< 1000:
 * from S3, 4 bytes written; with @t4 (a constant), < 10^4: T4's four digits — only in plan
 * writers: T4 is filled before the first template is built). */
TPL_INLINE char *put_u32tx(char *p, uint32_t v, const int t4) {
#if ETW_LE
  if (ETW_EXPECT(v < 1000, 1)) {
    uint32_t e = S3[v];
    memcpy(p, &e, 4);
    return p + (e >> 24);
  }
  if (t4 && v < 10000) {
    memcpy(p, &T4[v], 4);
    return p + 4;
  }
#else
  (void)t4;
#endif
  return dec_put_u32(p, v);
}
/* (thread and process IDs, ports: 4 digits are common) */
TPL_INLINE char *put_u32t(char *p, uint32_t v) { return put_u32tx(p, v, 1); }

/* dec_put_u64's text of @v at @p, which has room for 4 bytes more than that text needs: below
 * 10^12 as a number below 10^4 (S3 or T4) and four-digit groups from T4 (plan writers only). */
TPL_INLINE char *put_u64t(char *p, uint64_t v) {
#if ETW_LE
  uint32_t top, r;
  if (v < 100000000u) {
    if (v < 10000u) return put_u32tx(p, (uint32_t)v, 1);
    top = (uint32_t)v / 10000u; /* 1 … 9999, then 4 digits */
    r = (uint32_t)v - top * 10000u;
    p = put_u32tx(p, top, 1);
    memcpy(p, &T4[r], 4);
    return p + 4;
  }
  if (v < 1000000000000ull) {
    top = (uint32_t)(v / 100000000u); /* 1 … 9999, then 8 digits */
    r = (uint32_t)(v - (uint64_t)top * 100000000u);
    uint32_t hi = r / 10000u;
    p = put_u32tx(p, top, 1);
    memcpy(p, &T4[hi], 4);
    memcpy(p + 4, &T4[r - hi * 10000u], 4);
    return p + 8;
  }
#endif
  return dec_put_u64(p, v);
}

/* dec_put_hex's text of @v at @p (20 bytes of room), after a comma when @comma (a constant; 21
 * bytes of room). */
TPL_INLINE char *put_hex_vc(char *p, uint64_t v, const int comma) {
  if (comma) *p++ = ',';
  return dec_put_hex(p, v);
}
TPL_INLINE char *put_hex_v(char *p, uint64_t v) { return put_hex_vc(p, v, 0); }

/* The addresses @q … @qe (8 bytes each, at least one) as dec_put_hex's texts with a comma between
 * them at @p (21 bytes of room each); the end. */
TPL_INLINE char *put_stack64(char *p, const unsigned char *q, const unsigned char *qe) {
  p = put_hex_v(p, d_rd64(q)); /* the first, then a comma before each (no test per element) */
  for (q += 8; q < qe; q += 8) p = put_hex_vc(p, d_rd64(q), 1);
  return p;
}


/* The quoted text of IPv6 address @q at @p (≤ 42 bytes written); the end. */
static inline char *put_ipv6(char *p, const unsigned char *q) {
  *p = '"';
  p += 1 + dec_fmt_ipv6(p + 1, q);
  *p++ = '"';
  return p;
}

#endif
