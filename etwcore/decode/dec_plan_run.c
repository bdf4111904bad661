/* dec_plan_run.c — the plan runner: the one op interpreter of the decode path (documented
 * exception to the 150-line rule: one block per op, dispatched by computed goto where GNU C has
 * it, by a switch elsewhere). It renders a manifest event's payload from the op list dec_plan.c
 * compiled, and gives up (`goto bail`: the output is cut back, the walker renders the event)
 * wherever the walker could do something else. Runs on the decoder's thread.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dec_man.h"

#if FX_T3_OK
/* UINT32 array elements below 10,000 (fx_put_u32e): the digits and a comma in the low bytes of
 * each t[] (first digit lowest), their count in l[] (a whole word, one `add` from memory, 80,000
 * bytes after the text: one base register for both). Filled once by the first plan_build, before
 * any plan can run; 160 KB (BSS). */
static struct {
  uint64_t t[10000], l[10000];
} PL_TL4;
static pthread_once_t pl_tl4_once = PTHREAD_ONCE_INIT;
static void pl_tl4_fill(void) {
  for (unsigned v = 0; v < 10000; v++) {
    char b[8] = {0};
    unsigned k = v < 10 ? 1 : v < 100 ? 2 : v < 1000 ? 3 : 4;
    for (unsigned j = k, x = v; j-- > 0; x /= 10) b[j] = (char)('0' + x % 10);
    b[k] = ',';
    memcpy(&PL_TL4.t[v], b, 8);
    PL_TL4.l[v] = k + 1;
  }
}
#endif
void dec_plan_tables(void) {
#if FX_T3_OK
  pthread_once(&pl_tl4_once, pl_tl4_fill);
#endif
}

/* Dispatch: threaded (computed goto through the runner's own table PL_D, indexed by the op)
 * where GNU C has it, a switch elsewhere. */
#if ETW_GNUC
#define PL_START goto *PL_D[op->op];
#define PL_GO goto *PL_D[op->op]
#define PL_CASE(x) l_##x:
#define PL_NEXT                                                                                    \
  do {                                                                                             \
    op++;                                                                                          \
    goto *PL_D[op->op];                                                                          \
  } while (0)
#else
#define PL_START                                                                                   \
  next:                                                                                            \
  switch (op->op)
#define PL_GO goto next
#define PL_CASE(x) case x:
#define PL_NEXT                                                                                    \
  do {                                                                                             \
    op++;                                                                                          \
    goto next;                                                                                     \
  } while (0)
#endif

/* d_rd64, inlined for sure (gcc stopped inlining it in the pointer-array loop) */
#if ETW_GNUC
__attribute__((always_inline))
#endif
static inline uint64_t pl_rd64(const unsigned char *p) {
#if ETW_LE
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
#else
  return d_rd64(p);
#endif
}

/* an array element ≥ 10,000 (not −96…−1): out of line, so that the element loops keep no
 * constants of its digit code in registers */
#if FX_T3_OK
ETW_NOINLINE static char *fx_put_u32c_big(char *o, uint32_t v) { return fx_put_u32c(o, v); }
#endif
/* an array element with its comma (fx_put_u32c), the values below 10,000 and −96…−1 inline */
#if ETW_GNUC
__attribute__((always_inline))
#endif
static inline char *fx_put_u32e(char *o, uint32_t v) {
#if FX_T3_OK
  if (ETW_EXPECT(v < 10000, 1)) { /* 8 bytes stored (PL_TL4, filled by plan_build) */
    memcpy(o, &PL_TL4.t[v], 8);
    return o + PL_TL4.l[v];
  }
  if (v >= 4294967200u) { /* -96..-1 as UINT32 (IL map's -1/-2/-3): 16 bytes stored */
    memcpy(o, FX_TN[v - 4294967200u], 16);
    return o + 11;
  }
  if (v < 100000) { /* 5 digits (native offsets of large methods) */
    unsigned t = v / 10000, r = v - t * 10000, h = r / 100;
    o[0] = (char)('0' + t);
    memcpy(o + 1, FX_D2 + 2 * h, 2);
    memcpy(o + 3, FX_D2 + 2 * (r - h * 100), 2);
    o[5] = ',';
    return o + 6;
  }
  return fx_put_u32c_big(o, v);
#else
  return fx_put_u32c(o, v);
#endif
}

/* two "0x…" values (ops op and op + 1), one by one */
#define PL_XX_TAIL(A, B)                                                                           \
  do {                                                                                             \
    o = key_put(o, op);                                                                            \
    o = fx_hex_tail(o, (A));                                                                       \
    op++;                                                                                          \
    o = key_put(o, op);                                                                            \
    o = fx_hex_tail(o, (B));                                                                       \
    PL_NEXT;                                                                                       \
  } while (0)
#define PL_XX(A, B) PL_XX_TAIL(A, B)
/* a map op's value @X: its key, then its cached text (else map_miss renders and keeps it) */
#define PL_MAP_COPY(c) memcpy(o, (c)->t, PMC_MAX)
/* A fixed-size integer or hex op: its value x_ (type T) read by RD from q, q advanced by SZ, kept in
 * the op's slot (a count or length may refer to it; 0: scratch), its key, PUT's text;
 * each op renders in place with a block-local value (a shared tail made gcc keep it on the stack). */
#define PL_FIXK(T, RD, SZ, PUT)                                                                    \
  {                                                                                                \
    T x_ = RD;                                                                                     \
    q += SZ;                                                                                       \
    sv[op->slot] = x_;                                                                             \
    o = key_put(o, op);                                                                            \
    o = PUT(o, x_);                                                                                \
    PL_NEXT;                                                                                       \
  }
#define PL_PUTI64(o, x) fx_put_i64(o, (int64_t)(x))
/* A map op's value read by RD from q, q advanced by SZ, kept in the op's slot (0: scratch). */
#define PL_MAPK(RD, SZ)                                                                            \
  {                                                                                                \
    uint64_t x_ = RD;                                                                              \
    q += SZ;                                                                                       \
    sv[op->slot] = x_;                                                                             \
    PL_MAP(x_);                                                                                    \
  }
#define PL_MAP(X)                                                                                  \
  do {                                                                                             \
    o = key_put(o, op);                                                                            \
    const struct pmc *c_ = &op->mc[pmc_hash(X)];                                                   \
    if (c_->v == (X)) { /* (an empty slot's v never matches: plan_build) */                         \
      PL_MAP_COPY(c_);                                                                             \
      o += c_->len;                                                                                \
      PL_NEXT;                                                                                     \
    }                                                                                              \
    v = (X);                                                                                       \
    goto map_miss;                                                                                 \
  } while (0)
/* The plan of @e when it has one (and the writer is far from its maximum), else the walker. The
 * plan gives up with `goto bail`: the output is cut back and the walker renders the event. */
struct dec_eres dec_plan_run(struct dec_ecall *ec) {
  /* (the arguments are read from @ec where they are used: gcc keeps no copies of them for the
   * rare paths, which it did of six register arguments) */
#if ETW_GNUC
  static const void *const PL_D[] = {
      [OP_END] = &&l_end,   [OP_CHK] = &&l_OP_CHK,   [OP_KEY] = &&l_OP_KEY,   [OP_U8] = &&l_OP_U8,     [OP_U16] = &&l_OP_U16,
      [OP_U32] = &&l_OP_U32,   [OP_U64] = &&l_OP_U64,   [OP_I16] = &&l_OP_I16,   [OP_I32] = &&l_OP_I32,
      [OP_I64] = &&l_OP_I64,   [OP_X8] = &&l_OP_X8,     [OP_X16] = &&l_OP_X16,   [OP_X32] = &&l_OP_X32,
      [OP_X64] = &&l_OP_X64,   [OP_M8] = &&l_OP_M8,     [OP_M16] = &&l_OP_M16,   [OP_M32] = &&l_OP_M32,
      [OP_M64] = &&l_OP_M64,   [OP_S16] = &&l_OP_S16,   [OP_AU8] = &&l_OP_AU8,   [OP_AU16] = &&l_OP_AU16,
      [OP_AU32] = &&l_OP_AU32, [OP_AU64] = &&l_OP_AU64, [OP_AX8] = &&l_OP_AX8,   [OP_AX16] = &&l_OP_AX16,
      [OP_AX32] = &&l_OP_AX32, [OP_AX64] = &&l_OP_AX64, [OP_GEN] = &&l_OP_GEN,   [OP_SARR] = &&l_OP_SARR,
      [OP_SEND] = &&l_OP_SEND, [OP_XX44] = &&l_OP_XX44, [OP_XX48] = &&l_OP_XX48, [OP_XX84] = &&l_OP_XX84,
      [OP_XX88] = &&l_OP_XX88, [OP_AU32P] = &&l_OP_AU32P};
#endif
  const struct pop *op = (const struct pop *)ec->op;
  if (ETW_EXPECT(op != NULL, 1)) goto start; /* handed over (dec_ecall: tested by the caller) */
  int runs = ec->e->runs;
  if (ETW_EXPECT(runs <= 1, 0)) {
    if (!runs) {
      dec_compute_runs((struct dec_event *)ec->e);
      runs = ec->e->runs;
    }
    if (runs <= 1) return dec_eres_rc(dec_walk_all(ec->d, ec->w, ec->e, ec->p, ec->n, ec->ptr_size, &ec->why));
  }
  if (ETW_EXPECT(((unsigned)ec->ptr_size - 4u) & ~4u, 0)) /* not 4 nor 8 (ec->w->err: 0, dec_ecall) */
    return dec_eres_rc(dec_walk_all(ec->d, ec->w, ec->e, ec->p, ec->n, ec->ptr_size, &ec->why));
  const struct plan *pl = (const struct plan *)(const void *)(ec->e->f[0].key + runs);
  /* the writer's maximum must be at least slack + (ec->n + 1) × perbyte away (no overflow: ec->n < 2^32,
   * perbyte < 2^26, slack < 2^32: no test of ec->n needed); that much room in the buffer already
   * (the usual case) is enough for that and for the reservation below (8 ec->n + room0 ≤ it) */
  uint64_t far = ((uint64_t)ec->n + 1) * pl->perbyte + pl->slack;
  if (ETW_EXPECT(ec->w->cap - ec->mark <= far, 0)) {
    if (far > ec->w->max - ec->mark) return dec_eres_rc(dec_walk_all(ec->d, ec->w, ec->e, ec->p, ec->n, ec->ptr_size, &ec->why)); /* near the maximum */
    if (etw_jw_grow(ec->w, (size_t)far)) goto bail;
  }
  op = (const struct pop *)(const void *)((const char *)pl->ops + pl->opoff[(unsigned)ec->ptr_size >> 3]);
  if (ETW_EXPECT(ec->n < pl->gb0[(unsigned)ec->ptr_size >> 3], 0)) op--; /* the payload ends in the first run: its OP_CHK */
start:;
  const unsigned char *q = ec->p, *pe = ec->p + ec->n;
  uint64_t sv[PLAN_SLOTS];
  uint64_t v;
  long cnt, srem = 0; /* (srem: set by OP_SARR before its OP_SEND) */
  char *o = ec->w->buf + ec->mark; /* room: ec->n × PL_OBYTE + room0 (see plan_build) ≤ far */
  PL_START {
#if !ETW_GNUC
    PL_CASE(OP_END) goto l_end; /* (threaded: PL_D[OP_END] is l_end) */
#endif
    PL_CASE(OP_CHK) /* a fixed-size run: all of it in the payload, or nothing left (q ≤ pe) */
    if (ETW_EXPECT((size_t)(pe - q) < op->gb, 0)) {
      if (q == pe) goto done;
      goto bail;
    }
    PL_NEXT;
    PL_CASE(OP_KEY) /* before the op of its field: nothing when the payload has ended */
    if (q >= pe) goto done;
    for (size_t k = 0; k < op->klen; k += 32) memcpy(o + k, op->lkey + k, 32);
    o += op->klen;
    PL_NEXT;
    PL_CASE(OP_U8) PL_FIXK(uint32_t, q[0], 1, fx_put_u32)
    PL_CASE(OP_U16) PL_FIXK(uint32_t, d_rd16(q), 2, fx_put_u32)
    PL_CASE(OP_U32) PL_FIXK(uint32_t, d_rd32(q), 4, fx_put_u32)
    PL_CASE(OP_U64) PL_FIXK(uint64_t, pl_rd64(q), 8, fx_put_u64)
    PL_CASE(OP_I16) PL_FIXK(uint64_t, (uint64_t)(int64_t)(int16_t)d_rd16(q), 2, PL_PUTI64)
    PL_CASE(OP_I32) PL_FIXK(uint64_t, (uint64_t)(int64_t)(int32_t)d_rd32(q), 4, PL_PUTI64)
    PL_CASE(OP_I64) PL_FIXK(uint64_t, pl_rd64(q), 8, PL_PUTI64)
    PL_CASE(OP_X8) PL_FIXK(uint64_t, q[0], 1, fx_hex_tail)
    PL_CASE(OP_X16) PL_FIXK(uint64_t, d_rd16(q), 2, fx_hex_tail)
    PL_CASE(OP_X32) PL_FIXK(uint64_t, d_rd32(q), 4, fx_hex_tail)
    PL_CASE(OP_X64) PL_FIXK(uint64_t, pl_rd64(q), 8, fx_hex_tail)
    PL_CASE(OP_XX88) {
      uint64_t a_ = pl_rd64(q), b_ = pl_rd64(q + 8);
      q += 16;
      PL_XX(a_, b_);
    }
    PL_CASE(OP_XX84) {
      uint64_t a_ = pl_rd64(q), b_ = d_rd32(q + 8);
      q += 12;
      PL_XX(a_, b_);
    }
    PL_CASE(OP_XX48) {
      uint64_t a_ = d_rd32(q), b_ = pl_rd64(q + 4);
      q += 12;
      PL_XX(a_, b_);
    }
    PL_CASE(OP_XX44) {
      uint64_t a_ = d_rd32(q), b_ = d_rd32(q + 4);
      q += 8;
      PL_XX(a_, b_);
    }
    PL_CASE(OP_M8) PL_MAPK(q[0], 1)
    PL_CASE(OP_M16) PL_MAPK(d_rd16(q), 2)
    PL_CASE(OP_M32) PL_MAPK(d_rd32(q), 4)
    PL_CASE(OP_M64) PL_MAPK(pl_rd64(q), 8)
  map_miss: { /* (v: the value; its key written) */
    struct pmc *c = &op->mc[pmc_hash(v)];
    /* first time for this slot: the walker's rendering (dec_value, then the map), kept */
    const struct dec_field *f = op->f;
    unsigned wd = OP_BYTES[op->op];
    ec->w->len = (size_t)(o - ec->w->buf);
    size_t at = ec->w->len;
    uint64_t iv;
    if (dec_value(ec->w, f->in, f->out, q - wd, (size_t)(pe - q) + wd, -1, ec->ptr_size, DV_MANIFEST, &iv) < 0) goto bail;
    dec_map_render(ec->w, f->map, at, v);
    if (ec->w->err) goto bail;
    if (ec->w->len - at <= PMC_MAX) {
      c->v = v;
      c->len = (uint32_t)(ec->w->len - at);
      memcpy(c->t, ec->w->buf + at, c->len);
    }
    if (etw_jw_reserve(ec->w, (size_t)(pe - q) * PL_OBYTE + op->room)) goto bail;
    o = ec->w->buf + ec->w->len;
    PL_NEXT;
  }
    PL_CASE(OP_S16) {
      if (q >= pe) goto done;
      o = key_put(o, op);
      size_t avail, units, got = 0; /* room: reserved at the start */
#if SIMD_VEC
      avail = (size_t)(pe - q);
      units = avail / 2;
      /* plain ASCII 16 units at a time here (as jw.c's converter does), the rest there */
      while (units - got >= 16) {
        unsigned m = ~simd_narrow16(o, q + 2 * got, NULL) & 0xFFFFu; /* the plain units */
        if (m == 0xFFFFu) {
          o += 16;
          got += 16;
          continue;
        }
        unsigned good = (unsigned)etw_ctz32(~m);
        o += good;
        got += good;
        if (!(q[2 * got] | q[2 * got + 1])) { /* the terminating NUL */
          *o++ = '"';
          q += got * 2 + 2;
          PL_NEXT;
        }
        break;
      }
      /* fewer than 16 units left (all converted ones plain, 1:1): the 32 bytes before the last
       * whole unit as one block when the payload has them (those before the string not used;
       * an odd payload's last byte is no unit) */
      if (units - got < 16 && got < units && (size_t)(q - ec->p) + 2 * units >= 32) {
        unsigned j = (unsigned)(got + 16 - units); /* this unit's place in the block, 1..15 */
        unsigned char t[32];
        unsigned m = (~simd_narrow16(t, q + 2 * units - 32, NULL) & 0xFFFFu) >> j;
        memcpy(t + 16, t, 16);
        memcpy(o, t + j, 16);
        unsigned good = (unsigned)etw_ctz32(~m); /* ≤ units - got */
        o += good;
        got += good;
        if (got == units) { /* no NUL before the payload's end: the rest */
          *o++ = '"';
          q += avail;
          PL_NEXT;
        }
        if (!(q[2 * got] | q[2 * got + 1])) {
          *o++ = '"';
          q += got * 2 + 2;
          PL_NEXT;
        }
      }
#else
      avail = (size_t)(pe - q);
      units = avail / 2;
#endif
      {
        size_t g2;
        o = etw_jw_put_str16(o, q + 2 * got, units - got, &g2);
        got += g2;
      }
      q += got < units ? got * 2 + 2 : avail; /* unterminated at the end: the rest */
      PL_NEXT;
    }
    /* arrays: the count, the payload holds them all (room: reserved at the start) */
#define PL_ARRAY(WD)                                                                               \
  if (q >= pe) goto done;                                                                          \
  { /* (a constant count is in range: plan_op) */                                                  \
    uint64_t c_ = op->cslot ? sv[op->cslot] : (uint64_t)op->f->count;                              \
    if (c_ > DEC_MAX_ARRAY || c_ * (WD) > (size_t)(pe - q)) goto bail;                             \
    cnt = (long)c_;                                                                                \
  }                                                                                                \
  o = key_put(o, op);
/* "0x…" elements: each one's `",` with the next one's `"0x` in one 8-byte store, the last 3
 * bytes taken back */
#define PL_AX_LOOP(WD, RD)                                                                         \
  if (cnt) {                                                                                       \
    memcpy(o, FX_XSEP + 2, 4);                                                                     \
    o += 3;                                                                                        \
    for (const unsigned char *qe = q + (WD) * cnt; q < qe; q += (WD)) {                            \
      o = fx_hex_digits(o, RD);                                                                    \
      memcpy(o, FX_XSEP, 8);                                                                       \
      o += 5;                                                                                      \
    }                                                                                              \
    o -= 3;                                                                                        \
  }
#define PL_ARRAY_END                                                                               \
  if (cnt) o[-1] = ']';                                                                            \
  else *o++ = ']';                                                                                 \
  PL_NEXT
    PL_CASE(OP_AU8) {
      PL_ARRAY(1);
      for (const unsigned char *qe = q + cnt; q < qe; q += 1) o = fx_put_u32c(o, q[0]);
      PL_ARRAY_END;
    }
    PL_CASE(OP_AU16) {
      PL_ARRAY(2);
      const unsigned char *qe = q + 2 * cnt;
      for (const unsigned char *qp = q + 4 * (cnt >> 1); q < qp; q += 4) { /* two per step */
        o = fx_put_u32c(o, d_rd16(q));
        o = fx_put_u32c(o, d_rd16(q + 2));
      }
      if (q < qe) o = fx_put_u32c(o, d_rd16(q)), q += 2;
      PL_ARRAY_END;
    }
#define PL_AU32_LOOP                                                                               \
  {                                                                                                \
    const unsigned char *qe = q + 4 * cnt;                                                         \
    for (const unsigned char *qp = q + 8 * (cnt >> 1); q < qp; q += 8) { /* two per step */       \
      o = fx_put_u32e(o, d_rd32(q));                                                               \
      o = fx_put_u32e(o, d_rd32(q + 4));                                                           \
    }                                                                                              \
    if (q < qe) o = fx_put_u32e(o, d_rd32(q)), q += 4;                                             \
  }
    PL_CASE(OP_AU32) {
      PL_ARRAY(4);
      PL_AU32_LOOP;
      PL_ARRAY_END;
    }
    PL_CASE(OP_AU32P) { /* both arrays in the payload (else the walker) */
      PL_ARRAY(8);
      PL_AU32_LOOP;
      if (cnt) o[-1] = ']';
      else *o++ = ']';
      op++;
      o = key_put(o, op);
      PL_AU32_LOOP;
      PL_ARRAY_END;
    }
#undef PL_AU32_LOOP
    PL_CASE(OP_AU64) {
      PL_ARRAY(8);
      for (const unsigned char *qe = q + 8 * cnt; q < qe; q += 8) { o = fx_put_u64(o, pl_rd64(q)); *o++ = ','; }
      PL_ARRAY_END;
    }
    PL_CASE(OP_AX8) {
      PL_ARRAY(1);
      PL_AX_LOOP(1, q[0]);
      PL_ARRAY_END;
    }
    PL_CASE(OP_AX16) {
      PL_ARRAY(2);
      PL_AX_LOOP(2, d_rd16(q));
      PL_ARRAY_END;
    }
    PL_CASE(OP_AX32) {
      PL_ARRAY(4);
      PL_AX_LOOP(4, d_rd32(q));
      PL_ARRAY_END;
    }
    PL_CASE(OP_AX64) {
      PL_ARRAY(8);
      PL_AX_LOOP(8, pl_rd64(q));
      PL_ARRAY_END;
    }
#undef PL_ARRAY
#undef PL_ARRAY_END
#undef PL_AX_LOOP
    PL_CASE(OP_SARR) { /* '[', then the member ops and OP_SEND once per element */
      if (q >= pe) goto done;
      cnt = op->cslot ? ref_count(sv[op->cslot]) : (long)op->f->count;
      if (cnt < 0 || cnt > DEC_MAX_ARRAY || (uint64_t)cnt * op->eb > (uint64_t)(pe - q)) goto bail;
      o = key_put(o, op);
      uint64_t need = (uint64_t)cnt * op->eout + 2 + op->room + (uint64_t)(pe - q) * PL_OBYTE;
      if (ETW_EXPECT((uint64_t)(ec->w->buf + ec->w->cap - o) <= need, 0)) {
        ec->w->len = (size_t)(o - ec->w->buf);
        if (need > ec->w->max || etw_jw_grow(ec->w, (size_t)need)) goto bail;
        o = ec->w->buf + ec->w->len;
      }
      if (!cnt) {
        *o++ = ']';
        op += op->gb; /* to its OP_SEND, then past it */
        PL_NEXT;
      }
      srem = cnt;
      *o++ = '{';
      PL_NEXT;
    }
    PL_CASE(OP_SEND) {
      *o++ = '}';
      if (--srem) {
        memcpy(o, ",{", 2);
        o += 2;
        op -= op->gb; /* the first member op again */
        PL_GO;
      }
      *o++ = ']';
      PL_NEXT;
    }
    PL_CASE(OP_GEN) {
      if (q >= pe) goto done;
      const struct dec_field *f = op->f;
      if (op->cslot) {
        cnt = ref_count(sv[op->cslot]);
        if (cnt < 0 || cnt > DEC_MAX_ARRAY) goto bail;
      }
      long len = op->lslot ? ref_len(sv[op->lslot], ec->n) : f->len;
      if (len > (long)ec->n) goto bail;
      o = key_put(o, op);
      size_t avail = (size_t)(pe - q);
      ec->w->len = (size_t)(o - ec->w->buf);
      size_t at = ec->w->len;
      long used = dec_value(ec->w, f->in, f->out, q, avail, len, ec->ptr_size, DV_MANIFEST, &v);
      if (used < 0) goto bail;
      const struct dec_map *mp = f->map;
      if (!mp && f->map_name && ec->e->owner) mp = dec_trace_map(ec->e->owner, f->map_name);
      if (mp) dec_map_render(ec->w, mp, at, v);
      if (ec->w->err) goto bail;
      sv[op->slot] = v;
      q += used;
      if (etw_jw_reserve(ec->w, (size_t)(pe - q) * PL_OBYTE + op->room)) goto bail;
      o = ec->w->buf + ec->w->len;
      PL_NEXT;
    }
  }
l_end: /* the template's end: the payload's too, or a shorter template (the rest: "Unparsed") */
  if (ETW_EXPECT(q != pe, 0)) {
    ec->w->len = (size_t)(o - ec->w->buf);
    return dec_eres_rc((long)(q - ec->p));
  }
done: /* (q = pe: every `goto done` has tested it) */
  return (struct dec_eres){o, (long)ec->n}; /* (ec->w->len: the caller's; ec->w->err is 0 here) */
bail:
  atomic_fetch_add_explicit(&dec_plan_bail_count, 1, memory_order_relaxed);
  etw_jw_truncate(ec->w, ec->mark);
  return dec_eres_rc(dec_walk_all(ec->d, ec->w, ec->e, ec->p, ec->n, ec->ptr_size, &ec->why));
}
