/* dec_man.c — manifest-based events: instrumentation manifest XML (files in the manifests
 * directory, and .NET EventSource manifests carried in the stream as event 0xFFFE), and the
 * template walker that renders their payloads.
 *
 * The XML reader is a small bounded tokenizer (elements, attributes, comments, CDATA, PIs) —
 * enough for manifests, not a general XML parser. Names follow TraceEvent: an event's name is
 * "<task>/<opcode>" using the task/opcode message strings when present, else their names; the
 * Info opcode is omitted; without a task the event symbol is used.
 */
#ifndef DEC_MAN_RUNNER /* (the plan runner's body at the end is compiled once per variant) */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dec_fast.h"
#include "decode.h"

/* ---- template walker */

/* Write `"name":` (with a leading comma unless @first) for field @f, from a cached escaped
 * copy `,"name":`. The copy is allocated with at least KEY_PAD bytes so short keys are written
 * with one fixed-size copy. */
#define KEY_PAD 64
/* Copy a cached key (≥ KEY_PAD bytes allocated) of @n < KEY_PAD bytes: 32 bytes, and the rest
 * of the pad only for a long key. */
static inline void key_copy(char *o, const char *k, size_t n) {
  memcpy(o, k, 32);
  if (n > 32) memcpy(o + 32, k + 32, KEY_PAD - 1 - 32);
}
/* Build f->key (first use; the decoder owns its schemas). */
__attribute__((noinline)) static void build_key(struct dec_field *f) {
  struct etw_jw k;
  etw_jw_init(&k, 4096);
  etw_jw_ch(&k, ',');
  etw_jw_cs(&k, f->name);
  etw_jw_ch(&k, ':');
  if (!k.err && k.len) {
    size_t sz = k.len + 1 > KEY_PAD ? k.len + 1 : KEY_PAD;
    char *c = malloc(sz);
    if (c) {
      memset(c, 0, sz);
      memcpy(c, k.buf, k.len);
      f->key = c;
      f->key_len = (uint32_t)k.len;
    }
  }
  etw_jw_free(&k);
}

static inline void write_key(struct etw_jw *w, const struct dec_field *cf, int first) {
  struct dec_field *f = (struct dec_field *)cf;
  if (!f->key) build_key(f);
  if (f->key) {
    const char *s = f->key + (first != 0);
    size_t n = f->key_len - (first != 0);
    if (f->key_len < KEY_PAD && !w->err && w->cap - w->len > KEY_PAD) {
      key_copy(w->buf + w->len, s, n);
      w->len += n;
    } else {
      etw_jw_raw(w, s, n);
    }
  } else {
    if (!first) etw_jw_ch(w, ',');
    etw_jw_cs(w, f->name);
    etw_jw_ch(w, ':');
  }
}

/* The key and a number with one room check (the number needs ≤ 21 bytes): returns where the
 * number goes (the caller sets w->len), or NULL when write_key and the checked writers must be
 * used (no key built yet, a long key, an error, or less room). */
static inline char *key_fast(struct etw_jw *w, const struct dec_field *f, int first) {
  if (!f->key || f->key_len >= KEY_PAD || w->err || w->cap - w->len <= KEY_PAD + 24) return NULL;
  char *o = w->buf + w->len;
  key_copy(o, f->key + (first != 0), f->key_len);
  return o + f->key_len - (first != 0);
}

/* Replace the integer just written at w[mark..] by its map text: a valueMap entry, or the
 * "|"-joined names of a bitMap's set bits (unnamed remaining bits as hex). */
__attribute__((noinline)) static void map_prep(struct dec_map *m) {
  m->prep = 1;
  m->slen = malloc((m->n ? m->n : 1) * sizeof *m->slen);
  if (!m->slen) return;
  size_t total = 0;
  int plain = 1;
  for (uint32_t q = 0; q < m->n; q++) {
    const unsigned char *t = (const unsigned char *)m->str[q];
    size_t l = strlen(m->str[q]);
    for (size_t i = 0; i < l && plain; i++)
      if (t[i] < 0x20 || t[i] > 0x7E || t[i] == '"' || t[i] == '\\') plain = 0;
    m->slen[q] = l < UINT32_MAX ? (uint32_t)l : UINT32_MAX;
    total += l + 1;
  }
  m->plain = (uint8_t)(plain && total + 27 < 1024);
}

void dec_map_render(struct etw_jw *w, const struct dec_map *cm, size_t mark, uint64_t v) {
  struct dec_map *m = (struct dec_map *)cm; /* the decoder owns its maps (map_prep) */
  if (!m->prep) map_prep(m);
  if (m->plain && !w->err && w->cap - w->len > 1024 + 64) { /* the texts as they are, no reservation */
    if (!m->bitmap) {
      for (uint32_t q = 0; q < m->n; q++)
        if (m->val[q] == v) {
          char *o = w->buf + mark;
          *o++ = '"';
          memcpy(o, m->str[q], m->slen[q]);
          o += m->slen[q];
          *o++ = '"';
          w->len = (size_t)(o - w->buf);
          return;
        }
      return;
    }
    /* a bitmap, as below (no text can be cut: they all fit the buffer), written over the number
     * (kept aside: it stays when no set bit has a non-empty text) */
    char keep[32];
    memcpy(keep, w->buf + mark, sizeof keep);
    char *o0 = w->buf + mark + 1, *o = o0;
    uint64_t left = v;
    for (uint32_t q = 0; q < m->n; q++) {
      uint64_t bit = m->val[q];
      if ((bit == 0 && v == 0) || (bit && (v & bit) == bit)) {
        if (o != o0) *o++ = '|';
        memcpy(o, m->str[q], m->slen[q]);
        o += m->slen[q];
        left &= ~bit;
      }
    }
    if (o == o0) {
      memcpy(w->buf + mark, keep, sizeof keep);
      return;
    }
    o0[-1] = '"';
    if (left) { /* "|0x…" (snprintf's %llx): dec_put_hex's quoted text, its opening quote made '|' */
      char *h = o;
      o = dec_put_hex(h, left) - 1;
      *h = '|';
    }
    *o++ = '"';
    w->len = (size_t)(o - w->buf);
    return;
  }
  if (!m->bitmap) {
    for (uint32_t q = 0; q < m->n; q++)
      if (m->val[q] == v) {
        etw_jw_truncate(w, mark);
        etw_jw_cs(w, m->str[q]);
        return;
      }
    return;
  }
  char buf[1024];
  size_t o = 0;
  uint64_t left = v;
  for (uint32_t q = 0; q < m->n; q++) {
    uint64_t bit = m->val[q];
    if ((bit == 0 && v == 0) || (bit && (v & bit) == bit)) {
      size_t l = strlen(m->str[q]);
      if (o + l + 3 >= sizeof buf) break;
      if (o) {
        buf[o++] = '|';
      }
      memcpy(buf + o, m->str[q], l);
      o += l;
      left &= ~bit;
    }
  }
  if (!o) return;
  if (left && o + 24 < sizeof buf) o += (size_t) snprintf(buf + o, sizeof buf - o, "|0x%llx", (unsigned long long)left);
  etw_jw_truncate(w, mark);
  etw_jw_str(w, buf, o);
}
int dec_fields_write(struct etw_jw *w, const struct dec_event *e, const unsigned char *p, size_t n,
                     int ptr_size, const char **why) {
  return dec_fields_write_d(NULL, w, e, p, n, ptr_size, why) < 0 ? -1 : 0;
}

struct walk {
  struct etw_decoder *d;
  struct etw_jw *w;
  const struct dec_event *e;
  const unsigned char *p;
  size_t n, pos;
  int ptr_size;
  const char **why;
  uint64_t vals[DEC_MAX_FIELDS];
};

/* A count or length taken from another field's value (any width, untrusted): values past the
 * limits map to one past them, so the range checks reject them (a plain cast to long made values
 * of 2^63 and more, and on Windows (32-bit long) 2^31 and more, negative — "no length" — or cut
 * them to their low bits). The walker and the plans use the same rule. */
static inline long ref_count(uint64_t v) { return v > DEC_MAX_ARRAY ? (long)DEC_MAX_ARRAY + 1 : (long)v; }
static inline long ref_len(uint64_t v, size_t n) { return v > (uint64_t)n ? (long)n + 1 : (long)v; }

/* Field classes with a fast path in walk_fields (cached in dec_field.kind). */
enum { FK_GENERAL = 1, FK_UINT, FK_HEX, FK_INT, FK_PTR, FK_STR16 };

static uint8_t classify(const struct dec_field *f) {
  if (f->in == 24 || f->is_array || f->count != 1 || f->count_ref >= 0 || f->len != -1 || f->len_ref >= 0 ||
      f->map || f->map_name)
    return FK_GENERAL;
  int uns = f->in == 4 || f->in == 6 || f->in == 8 || f->in == 10;
  if (uns && (f->out == 0 || f->out == 18)) return FK_UINT;
  /* dec_value's hex rendering of unsigned integers: Hex, Win32Error, NTStatus, HResult, 0x25 */
  if (uns && (f->out == 4 || f->out == 13 || f->out == 14 || f->out == 15 || f->out == 0x25)) return FK_HEX;
  if ((f->in == 5 || f->in == 7 || f->in == 9) && (f->out == 0 || f->out == 17)) return FK_INT;
  if (f->in == 16 && f->out == 0) return FK_PTR;
  if (f->in == 1) return FK_STR16;
  return FK_GENERAL;
}

static inline unsigned int_width(unsigned in) { return in == 4 ? 1u : in == 6 ? 2u : in == 8 ? 4u : 8u; }

static inline uint64_t rd_width(const unsigned char *q, unsigned wdt) {
  return wdt == 1 ? q[0] : wdt == 2 ? d_rd16(q) : wdt == 4 ? d_rd32(q) : d_rd64(q);
}


/* ---- compiled plans
 *
 * A schema whose fields are all at the top level (no structs, no padding) gets a plan on first
 * use, one per pointer size: an op per field with its key text precomputed together with the
 * value's opening text (`,"name":"0x` for hex, `,"name":"` for strings, `,"name":[` for
 * arrays), a run of fixed-size scalars checked against the payload once, and one reservation for
 * everything from one variable-size op (string, array, other types) to the next. The plan only
 * takes the ordinary case: where the walker could do something else (the payload ends inside a
 * run, a count out of range or beyond the payload, the writer in error), it gives up, the output
 * is cut back and the walker renders the event from its start — the same bytes either way
 * (unit.test_dec_plan compares both on corpus events and random schemas and payloads).
 *
 * decode.h's structs have no slot for it: the plan lives in the allocation of the first field's
 * cached key, after the key text (dec_event_free frees it with the key); e->runs > 1 says it is
 * there and is its offset from the key (1 = no plan). */
enum {
  OP_END = 0,
  OP_CHK,                        /* a run of fixed-size ops follows: check the payload (gb) */
  OP_KEY,                        /* a key longer than 32 bytes (the next op's is empty) */
  OP_U8, OP_U16, OP_U32, OP_U64, /* unsigned decimal */
  OP_I16, OP_I32, OP_I64,        /* signed decimal */
  OP_X8, OP_X16, OP_X32, OP_X64, /* "0x…": hex outs and pointers */
  OP_M8, OP_M16, OP_M32, OP_M64, /* unsigned with a manifest map: the texts cached by value */
  OP_S16,                        /* UTF-16 up to a NUL unit */
  OP_AU8, OP_AU16, OP_AU32, OP_AU64, OP_AX8, OP_AX16, OP_AX32, OP_AX64, /* integer arrays */
  OP_GEN,                        /* any other scalar: dec_value, then its map */
  OP_SARR,                       /* an array of structs of fixed-size scalars: the member ops
                                    follow, then OP_SEND, once per element */
  OP_SEND,
  OP_XX44, OP_XX48, OP_XX84, OP_XX88, /* two "0x…" fields in a row (4 or 8 bytes each, values not
                                         kept): this op's key, the value, the next op's key, the
                                         value (that op is skipped) */
  OP_AU32P,                      /* two UINT32 arrays in a row counted by the same field
                                    (ILToNativeMap's ILOffsets, NativeOffsets): one check for
                                    both, the next op lends its key (and is skipped) */
};
#define OP_IS_FIXED(o) ((o) >= OP_U8 && (o) <= OP_M64)
#define OP_IS_MAP(o) ((o) >= OP_M8 && (o) <= OP_M64)
#define PLAN_SLOTS 16 /* values kept for count/length references (slot 0: scratch) */
#define PMC_N 4       /* rendered map texts cached per op */
#define PMC_MAX 48
#define PL_OBYTE 8 /* output bound per payload byte of strings (3) and integer arrays (7: AX8) */

struct pmc {
  uint64_t v;
  uint32_t len; /* UINT32_MAX = empty (then v is a value whose pmc_hash is not this slot's index,
                   so that a lookup never matches it: the runners test v alone) */
  char t[PMC_MAX];
};

struct pop {
  const void *lab; /* the op's code (threaded dispatch) in the runner, set when the plan is
                       built (plan_labels) */
  uint8_t op;
  uint8_t slot;  /* sv[] slot receiving the value (0 = scratch) */
  uint8_t cslot; /* count from sv[cslot] (0 = f->count) */
  uint8_t lslot; /* OP_GEN: length from sv[lslot] (0 = f->len) */
  uint32_t room; /* the output bound of the ops after it besides PL_OBYTE per payload byte
                    (plan_build) */
  uint32_t eb, eout; /* OP_SARR: payload bytes and output bound of one element */
  /* (gb and klen 64 bits: the runners compare and add them from memory) */
  uint64_t gb;   /* OP_CHK: the payload bytes of the fixed-size run after it; OP_SEND: the ops
                    back to the first member op; OP_SARR: the ops up to its OP_SEND (< 2^16) */
  uint64_t klen;
  char key[32];  /* the key text (klen ≤ 32 bytes, zero-padded) */
  const char *lkey; /* OP_KEY: klen bytes, readable 32 bytes further */
  const struct dec_field *f;
  struct pmc *mc; /* map ops: PMC_N rendered texts by value */
};

struct plan {
  uint32_t off4;  /* the 4-byte-pointer plan: ops + off4 (the 8-byte one: ops); each ends with
                     OP_END and has an OP_CHK before each run of fixed-size ops */
  uint32_t room0; /* the same for all ops: reserved with PL_OBYTE × the payload at the start */
  uint32_t opoff[2]; /* byte offset of the op list for 4-byte pointers ([0]: off4 ops), 8 ([1]: 0),
                        past its first op when that is an OP_CHK */
  uint32_t gb0[2];   /* that OP_CHK's gb (0: none): the runner starts at it only when the payload
                        is shorter */
  /* the plan runs when the writer's maximum is at least this + 32 bytes per payload byte away:
   * a bound of what the walker writes and reserves at once (output ≤ 8 bytes per payload byte +
   * the keys + 1,300 per field for texts from nothing (maps, null); one reservation ≤ 24 per
   * byte + 88 per field + 8 KiB), so that the walker, too, could not have reached it */
  size_t slack;
  uint64_t perbyte; /* … and this many bytes per payload byte (32; more with struct arrays,
                       whose keys repeat per element) */
  struct pop ops[];
};


static int plan_on = 1;
static uint64_t plan_bails; /* plans given up (tests; decoders in other threads count too) */
/* the runner dec_fields_write_d calls: 0 = the plan runner, 2 = none (the walker: plans off);
 * from plan_on (pl_sel_set, after each change) */
signed char dec_pl_sel;
static void pl_sel_set(void);
int dec_plan_enable(int on) {
  int was = plan_on;
  plan_on = on;
  pl_sel_set();
  return was;
}
uint64_t dec_plan_bails(void) { return __atomic_load_n(&plan_bails, __ATOMIC_RELAXED); }

/* where a plan lives: after the first field's key text */
static inline size_t plan_key_area(uint32_t key_len) {
  size_t a = key_len + 1 > KEY_PAD ? (size_t)key_len + 1 : KEY_PAD;
  return (a + 15) & ~(size_t)15;
}

static inline int hex_out(unsigned out) { return out == 4 || out == 13 || out == 14 || out == 15 || out == 0x25; }

/* The last member of struct @f. */
static inline uint32_t sarr_end(const struct dec_event *e, const struct dec_field *f) {
  return (uint32_t)(f - e->f) + f->members;
}

/* The op for field @f alone (pointer size @ps), 0 = none (no plan for this schema). */
static uint8_t plan_op(const struct dec_field *f, int ps) {
  unsigned in = f->in, out = f->out;
  int uns = in == 4 || in == 6 || in == 8 || in == 10;
  if (in == 24 || in == DEC_IN_ALIGN_PTR || in == DEC_IN_ALIGN_4) return 0;
  if (f->count_ref < 0 && (f->count < 0 || f->count > DEC_MAX_ARRAY)) return 0; /* always an error */
  if (f->is_array) {
    if (f->len != -1 || f->len_ref >= 0) return 0;
    static const uint8_t AU[11] = {[4] = OP_AU8, [6] = OP_AU16, [8] = OP_AU32, [10] = OP_AU64};
    static const uint8_t AX[11] = {[4] = OP_AX8, [6] = OP_AX16, [8] = OP_AX32, [10] = OP_AX64};
    if (uns && (out == 0 || out == 18)) return AU[in];
    if (uns && hex_out(out)) return AX[in];
    if (in == 16) return ps == 4 ? OP_AX32 : OP_AX64;
    return 0;
  }
  int single = f->count == 1 && f->count_ref < 0 && f->len == -1 && f->len_ref < 0;
  if (single && f->map && uns) {
    static const uint8_t M[11] = {[4] = OP_M8, [6] = OP_M16, [8] = OP_M32, [10] = OP_M64};
    return M[in];
  }
  if (single && !f->map && !f->map_name) {
    static const uint8_t U[11] = {[4] = OP_U8, [6] = OP_U16, [8] = OP_U32, [10] = OP_U64};
    static const uint8_t X[11] = {[4] = OP_X8, [6] = OP_X16, [8] = OP_X32, [10] = OP_X64};
    if (uns && (out == 0 || out == 18)) return U[in];
    if (uns && hex_out(out)) return X[in];
    if ((in == 5 || in == 7 || in == 9) && (out == 0 || out == 17)) return in == 5 ? OP_I16 : in == 7 ? OP_I32 : OP_I64;
    if (in == 16) return ps == 4 ? OP_X32 : OP_X64; /* dec_value: every out of a pointer is hex */
    if (in == 20) return OP_X32;
    if (in == 21) return OP_X64;
    if (in == 1) return OP_S16;
  }
  return OP_GEN; /* a scalar for dec_value */
}

static const uint8_t OP_BYTES[] = {[OP_U8] = 1, [OP_U16] = 2, [OP_U32] = 4, [OP_U64] = 8, [OP_I16] = 2,
                                   [OP_I32] = 4, [OP_I64] = 8, [OP_X8] = 1, [OP_X16] = 2, [OP_X32] = 4,
                                   [OP_X64] = 8, [OP_M8] = 1, [OP_M16] = 2, [OP_M32] = 4, [OP_M64] = 8, [OP_AU8] = 1, [OP_AU16] = 2, [OP_AU32] = 4, [OP_AU64] = 8,
                                   [OP_AX8] = 1, [OP_AX16] = 2, [OP_AX32] = 4, [OP_AX64] = 8};
/* An OP_CHK's gb (≤ 8 bytes for each of ≤ DEC_MAX_FIELDS fields) and the struct-array op distances
 * (< a variant's op count, 2 * (3 * nf + 1)) are stored through uint16_t by plan_build. */
_Static_assert(DEC_MAX_FIELDS * 8 <= UINT16_MAX && 2 * (3 * DEC_MAX_FIELDS + 1) <= UINT16_MAX,
               "a plan's gb fits 16 bits");

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

/* Build @e's plan (fields' keys built, e->nf in 1..DEC_MAX_FIELDS); 0 = attached. */
__attribute__((noinline)) static int plan_build(struct dec_event *e) {
  uint32_t nf = e->nf;
  if (!nf || nf > DEC_MAX_FIELDS) return -1;
#if FX_T3_OK
  pthread_once(&pl_tl4_once, pl_tl4_fill);
#endif
  uint8_t *slot = calloc(nf, 1);
  char **kt = calloc(nf, sizeof *kt);
  size_t *kl = calloc(nf, sizeof *kl);
  uint8_t *inner = calloc(nf, 1); /* 1 = a struct member, 2 = its first member */
  int ok = slot && kt && kl && inner;
  unsigned nslots = 1, nmc = 0;
  /* arrays of structs whose members are plain fixed-size scalars (no nesting, maps, padding) */
  for (uint32_t i = 0; ok && i < nf; i++) {
    const struct dec_field *f = &e->f[i];
    if (f->in != 24) continue;
    if (!f->is_array || !f->members || f->members > nf - 1 - i || f->len != -1 || f->len_ref >= 0 ||
        (f->count_ref < 0 && (f->count < 0 || f->count > DEC_MAX_ARRAY)) || inner[i]) {
      ok = 0;
      break;
    }
    for (uint32_t j = i + 1; j <= i + f->members; j++) {
      uint8_t mop = plan_op(&e->f[j], 8);
      if (!OP_IS_FIXED(mop) || OP_IS_MAP(mop)) ok = 0;
      inner[j] = j == i + 1 ? 2 : 1;
    }
  }
  /* every field has an op; references point back at integer scalars outside structs */
  for (uint32_t i = 0; ok && i < nf; i++) {
    const struct dec_field *f = &e->f[i];
    uint8_t op = f->in == 24 ? OP_SARR : plan_op(f, 8);
    if (!op || !f->key || !f->name) {
      ok = 0;
      break;
    }
    int32_t refs[2] = {f->count_ref, op == OP_GEN ? f->len_ref : -1};
    for (int r = 0; r < 2 && ok; r++) {
      int32_t rf = refs[r];
      if (rf < 0) continue;
      if ((uint32_t)rf >= i) {
        ok = 0;
        break;
      }
      uint8_t rop = plan_op(&e->f[rf], 8);
      if (!(OP_IS_FIXED(rop) || rop == OP_GEN) || inner[rf]) ok = 0;
      else if (!slot[rf]) {
        if (nslots >= PLAN_SLOTS) ok = 0;
        else slot[rf] = (uint8_t)nslots++;
      }
    }
    if (OP_IS_MAP(op)) nmc++;
  }
  /* key texts: `,"name":` (no comma for the first) and the value's opening text */
  size_t ktotal = 0;
  for (uint32_t i = 0; ok && i < nf; i++) {
    const struct dec_field *f = &e->f[i];
    uint8_t op = f->in == 24 ? OP_SARR : plan_op(f, 8);
    const char *pre = (op >= OP_X8 && op <= OP_X64) ? "\"0x" : op == OP_S16 ? "\"" : (op >= OP_AU8 && op <= OP_AX64) || op == OP_SARR ? "[" : "";
    int first = i == 0 || inner[i] == 2;
    size_t l = f->key_len - (size_t)first, pl = strlen(pre);
    kl[i] = l + pl;
    if (kl[i] > 0xFFFF) {
      ok = 0;
      break;
    }
    kt[i] = malloc(kl[i] + 1);
    if (!kt[i]) {
      ok = 0;
      break;
    }
    memcpy(kt[i], f->key + first, l);
    memcpy(kt[i] + l, pre, pl);
    ktotal += ((kl[i] + 31) & ~(size_t)31) + 32;
  }
  int rc = -1;
  if (ok) {
    size_t ka = plan_key_area(e->f[0].key_len);
    size_t nops = 2 * (3 * (size_t)nf + 1);
    size_t psz = sizeof(struct plan) + nops * sizeof(struct pop);
    psz = (psz + 15) & ~(size_t)15;
    size_t msz = (size_t)nmc * PMC_N * sizeof(struct pmc);
    char *blk = calloc(1, ka + psz + msz + ktotal);
    if (blk) {
      memcpy(blk, e->f[0].key, e->f[0].key_len);
      struct plan *pl = (struct plan *)(void *)(blk + ka);
      struct pmc *mc = (struct pmc *)(void *)(blk + ka + psz);
      char *kp = blk + ka + psz + msz;
      const char *kpos[DEC_MAX_FIELDS];
      for (uint32_t i = 0; i < nf; i++) {
        memcpy(kp, kt[i], kl[i]);
        kpos[i] = kp;
        kp += ((kl[i] + 31) & ~(size_t)31) + 32;
      }
      for (size_t m = 0; m < (size_t)nmc * PMC_N; m++) {
        mc[m].len = UINT32_MAX;
        mc[m].v = m % PMC_N ? 0 : 1; /* (pmc_hash: 0 → 0, 1 → 2) */
      }
      pl->off4 = 3 * nf + 1;
      pl->opoff[0] = pl->off4 * (uint32_t)sizeof(struct pop);
      pl->opoff[1] = 0;
      pl->perbyte = 32;
      pl->slack = 8192 + (size_t)nf * 1300;
      for (uint32_t i = 0; i < nf; i++) pl->slack += kl[i];
      for (int var = 0; var < 2; var++) {
        int ps = var ? 4 : 8;
        struct pop *ops = pl->ops + (var ? pl->off4 : 0);
        uint32_t no = 0;
        unsigned mci = 0;
        int prev_fixed = 0;
        uint32_t sarr = 0; /* the open OP_SARR (while emitting its members) */
        for (uint32_t i = 0; i < nf; i++) {
          const struct dec_field *f = &e->f[i];
          uint8_t op = f->in == 24 ? OP_SARR : plan_op(f, ps);
          if (!inner[i] && OP_IS_FIXED(op) && !prev_fixed) {
            uint32_t gb = 0;
            for (uint32_t j = i; j < nf && e->f[j].in != 24 && OP_IS_FIXED(plan_op(&e->f[j], ps)); j++)
              gb += OP_BYTES[plan_op(&e->f[j], ps)];
            ops[no].op = OP_CHK;
            ops[no].gb = (uint16_t)gb;
            no++;
          }
          if (!inner[i]) prev_fixed = OP_IS_FIXED(op);
          struct pop *o = &ops[no++];
          if (kl[i] > 32) { /* the key (with the value's opening text) by itself */
            o->op = OP_KEY;
            o->klen = (uint16_t)kl[i];
            o->lkey = kpos[i];
            o = &ops[no++];
            o->klen = 0; /* an empty key (the op's key[] stays zero) */
          } else {
            o->klen = (uint16_t)kl[i];
            memcpy(o->key, kpos[i], kl[i]);
          }
          o->op = op;
          o->slot = slot[i];
          o->cslot = f->count_ref >= 0 ? slot[f->count_ref] : 0;
          o->lslot = o->op == OP_GEN && f->len_ref >= 0 ? slot[f->len_ref] : 0;
          o->f = f;
          if (OP_IS_MAP(o->op)) {
            o->mc = mc + (size_t)mci * PMC_N; /* shared by both pointer sizes */
            mci++;
          }
          if (op == OP_SARR) {
            sarr = (uint32_t)(o - ops);
            o->eout = 3; /* '{', '}', ',' */
          } else if (inner[i]) {
            ops[sarr].eb += OP_BYTES[op];
            ops[sarr].eout += (uint32_t)kl[i] + 24u;
            if (i == sarr_end(e, ops[sarr].f)) { /* the last member: close the element */
              struct pop *z = &ops[no++];
              z->op = OP_SEND;
              z->gb = (uint16_t)(no - 1 - (sarr + 1)); /* back to the first member op */
              ops[sarr].gb = (uint16_t)(no - 1 - sarr);
              uint64_t pb = 32 + ((uint64_t)ops[sarr].eout + 88u * ops[sarr].f->members) / ops[sarr].eb + 1;
              if (pb > pl->perbyte) pl->perbyte = pb;
              prev_fixed = 0;
            }
          }
        }
        ops[no].op = OP_END;
        if (ops[0].op == OP_CHK) { /* (var 0: 8-byte pointers, [1]) */
          pl->opoff[!var] += (uint32_t)sizeof(struct pop);
          pl->gb0[!var] = ops[0].gb;
        }
        /* two hex fields in a row (the second op only lends its key); two UINT32 arrays of the
         * same count in a row (the same) */
        for (uint32_t k = 0; k + 1 < no; k++) {
          struct pop *a = &ops[k], *b = &ops[k + 1];
          if (a->op == OP_AU32 && b->op == OP_AU32 && a->cslot && a->cslot == b->cslot) {
            a->op = OP_AU32P;
            k++;
            continue;
          }
          if ((a->op == OP_X32 || a->op == OP_X64) && (b->op == OP_X32 || b->op == OP_X64) && !a->slot && !b->slot) {
            a->op = a->op == OP_X32 ? (b->op == OP_X32 ? OP_XX44 : OP_XX48) : (b->op == OP_X32 ? OP_XX84 : OP_XX88);
            k++;
          }
        }
        /* rooms, from the end: each op's room is the bound of what the ops after it write
         * besides PL_OBYTE bytes per payload byte (their keys and 48 bytes each: fixed-size
         * values ≤ 24, a map's cached text ≤ PMC_MAX, an array's or a string's closing text)
         * and 64 bytes for the SIMD stores past the end; the runner reserves that and
         * PL_OBYTE × the payload left once at its entry and again after each op that wrote
         * through the writer (map texts not cached yet, OP_GEN, struct arrays) */
        uint32_t room = 64;
        for (uint32_t k = no; k-- > 0;) {
          struct pop *o = &ops[k];
          o->room = room;
          if (o->op == OP_KEY) room += o->klen;
          else if (o->op != OP_CHK && o->op != OP_SEND && o->op != OP_END) room += o->klen + 48u;
        }
        pl->room0 = room;
      }
      free(e->f[0].key);
      e->f[0].key = blk;
      rc = 0;
    }
  }
  if (kt)
    for (uint32_t i = 0; i < nf; i++) free(kt[i]);
  free(kt);
  free(kl);
  free(slot);
  free(inner);
  return rc;
}


/* Copy an op's key text (klen bytes; 32-byte copies, the source is padded). */
static inline char *key_put(char *o, const struct pop *op) { /* klen ≤ 32 (else an OP_KEY before) */
  memcpy(o, op->key, 32);
  return o + op->klen;
}


static inline unsigned pmc_hash(uint64_t v) { return (unsigned)((uint32_t)(v ^ (v >> 32)) * 2654435761u >> 30); }



/* each op's code address in the runners (threaded dispatch), set when the plan is built */
static void plan_labels(struct plan *pl);

/* Runs of fixed-size scalar fields (plain/hex/signed integers, pointers) with short keys:
 * rendered one after the other after one room check when the payload holds them all. */
__attribute__((noinline)) static void compute_runs(struct dec_event *e) {
  uint16_t n = 0, b4 = 0, b8 = 0;
  for (uint32_t i = e->nf; i-- > 0;) {
    struct dec_field *f = &e->f[i];
    if (!f->kind) f->kind = classify(f);
    int ok = f->kind == FK_UINT || f->kind == FK_HEX || f->kind == FK_INT || f->kind == FK_PTR;
    if (ok && !f->key) build_key(f);
    if (!ok || !f->key || f->key_len >= KEY_PAD) {
      n = b4 = b8 = 0;
    } else {
      unsigned wd = f->kind == FK_INT ? (f->in == 5 ? 2u : f->in == 7 ? 4u : 8u) : int_width(f->in);
      n++;
      b4 = (uint16_t)(b4 + (f->kind == FK_PTR ? 4u : wd));
      b8 = (uint16_t)(b8 + (f->kind == FK_PTR ? 8u : wd));
    }
    f->run_n = n;
    f->run_b4 = b4;
    f->run_b8 = b8;
  }
  e->runs = 1;
  if (e->nf && !e->f[0].key) build_key(&e->f[0]);
  for (uint32_t i = 0; i < e->nf && i < DEC_MAX_FIELDS; i++)
    if (!e->f[i].key) build_key(&e->f[i]);
  if (plan_build(e) == 0) {
    size_t ka = plan_key_area(e->f[0].key_len);
    plan_labels((struct plan *)(void *)(e->f[0].key + ka));
    e->runs = (int)ka; /* > 1: the plan's offset */
  }
}

/* Render fields [start, end) of the schema as members of an open object. @elem: offset of the
 * enclosing struct element (for C padding). Returns 0, or -1 with *why set. */
static int walk_fields(struct walk *k, uint32_t start, uint32_t end, int depth, size_t elem) {
  int first = 1;
  uint32_t i = start;
  if (depth > DEC_MAX_DEPTH) {
    *k->why = "structs nested too deeply";
    return -1;
  }
  while (i < end) {
    const struct dec_field *f = &k->e->f[i];
    k->vals[i] = 0;
    if (f->in == DEC_IN_ALIGN_PTR || f->in == DEC_IN_ALIGN_4) { /* C struct padding */
      size_t al = f->in == DEC_IN_ALIGN_4 ? 4 : (size_t)k->ptr_size;
      size_t pad = (al - (k->pos - elem) % al) % al;
      k->pos += pad < k->n - k->pos ? pad : k->n - k->pos;
      i++;
      continue;
    }
    if (f->run_n > 1 && i + f->run_n <= end) {
      size_t bytes = k->ptr_size == 4 ? f->run_b4 : f->run_b8;
      if (k->ptr_size != 4 && k->ptr_size != 8) bytes = (size_t)-1;
      if (bytes <= k->n - k->pos && !etw_jw_reserve(k->w, (size_t)f->run_n * (KEY_PAD + 24))) {
        const unsigned char *q = k->p + k->pos;
        char *o = k->w->buf + k->w->len;
        uint32_t stop = i + f->run_n;
        for (; i < stop; i++) {
          const struct dec_field *g = &k->e->f[i];
          key_copy(o, g->key + (first != 0), g->key_len);
          o += g->key_len - (first != 0);
          first = 0;
          uint64_t v;
          switch (g->in) {
          case 4: v = q[0]; q += 1; break;
          case 5: v = (uint64_t)(int64_t)(int16_t)d_rd16(q); q += 2; break;
          case 6: v = d_rd16(q); q += 2; break;
          case 7: v = (uint64_t)(int64_t)(int32_t)d_rd32(q); q += 4; break;
          case 8: v = d_rd32(q); q += 4; break;
          case 16:
            if (k->ptr_size == 4) {
              v = d_rd32(q);
              q += 4;
            } else {
              v = d_rd64(q);
              q += 8;
            }
            break;
          default: v = d_rd64(q); q += 8; break; /* 9, 10 */
          }
          k->vals[i] = v;
          o = g->kind == FK_UINT ? dec_put_u64(o, v) : g->kind == FK_INT ? dec_put_i64(o, (int64_t)v) : dec_put_hex(o, v);
        }
        k->w->len = (size_t)(o - k->w->buf);
        k->pos += bytes;
        continue;
      }
    }
    uint8_t kind = f->kind ? f->kind : (((struct dec_field *)f)->kind = classify(f));
    if (kind != FK_GENERAL && k->pos < k->n) {
      /* plain scalar: no references, maps, arrays or lengths (the general path below gives the
       * same bytes; it also handles every short payload) */
      const unsigned char *q = k->p + k->pos;
      size_t avail = k->n - k->pos;
      long used = -1;
      if (kind == FK_UINT || kind == FK_HEX) {
        unsigned wdt = int_width(f->in);
        if (avail >= wdt) {
          uint64_t v = rd_width(q, wdt);
          k->vals[i] = v;
          char *o = key_fast(k->w, f, first);
          if (o) {
            o = kind == FK_UINT ? dec_put_u64(o, v) : dec_put_hex(o, v);
            k->w->len = (size_t)(o - k->w->buf);
          } else {
            write_key(k->w, f, first);
            if (kind == FK_UINT) dec_u64(k->w, v);
            else dec_hex(k->w, v);
          }
          used = (long)wdt;
        }
      } else if (kind == FK_INT) {
        unsigned wdt = f->in == 5 ? 2u : f->in == 7 ? 4u : 8u;
        if (avail >= wdt) {
          int64_t v = wdt == 2 ? (int16_t)d_rd16(q) : wdt == 4 ? (int32_t)d_rd32(q) : (int64_t)d_rd64(q);
          k->vals[i] = (uint64_t)v;
          char *o = key_fast(k->w, f, first);
          if (o) {
            k->w->len = (size_t)(dec_put_i64(o, v) - k->w->buf);
          } else {
            write_key(k->w, f, first);
            dec_i64(k->w, v);
          }
          used = (long)wdt;
        }
      } else if (kind == FK_PTR) {
        if (avail >= (size_t)k->ptr_size) {
          uint64_t v = k->ptr_size == 4 ? d_rd32(q) : d_rd64(q);
          k->vals[i] = v;
          char *o = key_fast(k->w, f, first);
          if (o) {
            k->w->len = (size_t)(dec_put_hex(o, v) - k->w->buf);
          } else {
            write_key(k->w, f, first);
            dec_hex(k->w, v);
          }
          used = k->ptr_size;
        }
      } else if (kind == FK_STR16) {
        /* dec_value's UTF-16 case without its dispatch: up to the NUL unit, or (manifest mode)
         * the rest of the payload when unterminated; vals[i] stays 0 */
        write_key(k->w, f, first);
        size_t units = avail / 2, got = dec_str16(k->w, q, units);
        used = got < units ? (long)got * 2 + 2 : (long)avail;
      } else {
        write_key(k->w, f, first);
        used = dec_value(k->w, f->in, f->out, q, avail, -1, k->ptr_size, DV_MANIFEST, &k->vals[i]);
        if (used < 0) {
          *k->why = "payload shorter than the template";
          return -1;
        }
      }
      if (used >= 0) {
        first = 0;
        k->pos += (size_t)used;
        if (k->w->err) return -1;
        i++;
        continue;
      }
    }
    uint32_t next = i + 1 + (f->in == 24 ? f->members : 0);
    if (next > end) {
      *k->why = "bad struct in the template";
      return -1;
    }
    if (k->pos >= k->n && depth == 0) { /* trailing fields absent (older version) */
      i = next;
      continue;
    }
    long cnt = f->count;
    if (f->count_ref >= 0 && (uint32_t)f->count_ref < k->e->nf) cnt = ref_count(k->vals[f->count_ref]);
    long len = f->len;
    if (f->len_ref >= 0 && (uint32_t)f->len_ref < k->e->nf) len = ref_len(k->vals[f->len_ref], k->n);
    if (cnt < 0 || cnt > DEC_MAX_ARRAY || len > (long)k->n) {
      *k->why = "array count or length out of range";
      return -1;
    }
    write_key(k->w, f, first);
    first = 0;
    long reps = f->is_array ? cnt : 1;
    if (f->is_array) etw_jw_ch(k->w, '[');
    if (f->is_array && reps > 0 &&
        (((f->in == 4 || f->in == 6 || f->in == 8 || f->in == 10) && (f->out == 0 || f->out == 18)) ||
         (f->in == 16 && f->out == 0))) {
      /* integer / pointer arrays: one reservation, no per-element dispatch */
      unsigned wdt = f->in == 16 ? (unsigned)k->ptr_size : int_width(f->in);
      size_t bytes = (size_t)reps * wdt;
      if (bytes <= k->n - k->pos && !etw_jw_reserve(k->w, (size_t)reps * 24)) {
        const unsigned char *q = k->p + k->pos, *qe = q + bytes;
        char *o = k->w->buf + k->w->len; /* ≤ 24 bytes per element reserved */
        uint64_t v = 0;
#define DEC_INT_ARRAY(READ, PUT)                                                                   \
  for (; q < qe; q += wdt) {                                                                      \
    v = READ;                                                                                     \
    o = PUT(o, v);                                                                                \
    *o++ = ',';                                                                                   \
  }
        if (f->in == 16 && wdt == 8) DEC_INT_ARRAY(d_rd64(q), dec_put_hex)
        else if (f->in == 16) DEC_INT_ARRAY(d_rd32(q), dec_put_hex)
        else if (wdt == 8) DEC_INT_ARRAY(d_rd64(q), dec_put_u64)
        else if (wdt == 4) DEC_INT_ARRAY(d_rd32(q), dec_put_u64)
        else if (wdt == 2) DEC_INT_ARRAY(d_rd16(q), dec_put_u64)
        else DEC_INT_ARRAY(q[0], dec_put_u64)
#undef DEC_INT_ARRAY
        k->w->len = (size_t)(o - 1 - k->w->buf); /* without the last comma */
        k->vals[i] = v;
        k->pos += bytes;
        reps = 0; /* done */
      }
    }
    for (long r = 0; r < reps; r++) {
      if (r) etw_jw_ch(k->w, ',');
      if (f->in == 24) {
        size_t before = k->pos;
        etw_jw_ch(k->w, '{');
        if (walk_fields(k, i + 1, next, depth + 1, k->pos) < 0) return -1;
        etw_jw_ch(k->w, '}');
        if (k->pos == before && f->members) break; /* empty elements: stop (bounded) */
      } else {
        size_t mark = k->w->len;
        const unsigned char *q = k->p + k->pos;
        size_t avail = k->n - k->pos;
        long used = -2;
        if (f->out == 0 || f->out == 18 || f->out == 17) { /* fast paths for plain integers */
          switch (f->in) {
          case 4: if (avail >= 1) { k->vals[i] = q[0]; used = 1; } break;
          case 6: if (avail >= 2) { k->vals[i] = d_rd16(q); used = 2; } break;
          case 8: if (avail >= 4) { k->vals[i] = d_rd32(q); used = 4; } break;
          case 10: if (avail >= 8) { k->vals[i] = d_rd64(q); used = 8; } break;
          default: break;
          }
          if (used > 0 && f->out != 17) dec_u64(k->w, k->vals[i]);
          else if (used > 0) used = -2; /* signed rendering: general path */
        }
        if (used == -2 && f->in == 16 && f->out == 0 && avail >= (size_t)k->ptr_size) {
          k->vals[i] = k->ptr_size == 4 ? d_rd32(q) : d_rd64(q);
          dec_hex(k->w, k->vals[i]);
          used = k->ptr_size;
        }
        if (used == -2)
          used = dec_value(k->w, f->in, f->out, q, avail, len, k->ptr_size, DV_MANIFEST, &k->vals[i]);
        if (used < 0) {
          *k->why = "payload shorter than the template";
          return -1;
        }
        if (!f->is_array) {
          const struct dec_map *mp = f->map;
          if (!mp && f->map_name && k->e->owner) mp = dec_trace_map(k->e->owner, f->map_name);
          if (mp) dec_map_render(k->w, mp, mark, k->vals[i]);
        }
        k->pos += (size_t)used;
      }
      if (k->w->err) return -1;
    }
    if (f->is_array) etw_jw_ch(k->w, ']');
    i = next;
  }
  return 0;
}

/* The walker over every field (kept out of the plan's path: its frame holds the 4 KiB vals). */
__attribute__((noinline)) static long walk_all(struct etw_decoder *d, struct etw_jw *w, const struct dec_event *e,
                                               const unsigned char *p, size_t n, int ptr_size, const char **why) {
  struct walk kw;
  struct walk *k = &kw;
  k->d = d;
  k->w = w;
  k->e = e;
  k->p = p;
  k->n = n;
  k->pos = 0;
  k->ptr_size = ptr_size;
  k->why = why;
  uint32_t nf = e->nf > DEC_MAX_FIELDS ? DEC_MAX_FIELDS : e->nf;
  /* a count/length may name a field not rendered (yet): its value is 0 */
  memset(k->vals, 0, nf * sizeof k->vals[0]);
  if (walk_fields(k, 0, nf, 0, 0) < 0) return -1;
  return (long)k->pos;
}

/* the runners' sentinel event: fill the plan's code addresses (plan_labels) */
static struct dec_event pl_label_ev;

/* Dispatch: threaded (computed goto) where GNU C has it, a switch elsewhere. */
#if defined(__GNUC__)
#define PL_START goto *op->lab;
#define PL_GO goto *op->lab
#define PL_CASE(x) l_##x:
#define PL_NEXT                                                                                    \
  do {                                                                                             \
    op++;                                                                                          \
    goto *op->lab;                                                                           \
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
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline uint64_t pl_rd64(const unsigned char *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
#else
  return d_rd64(p);
#endif
}

static void pl_sel_set(void) { __atomic_store_n(&dec_pl_sel, (signed char)(!plan_on ? 2 : 0), __ATOMIC_RELAXED); }

#if defined(__SSE2__)
/* vector constants as memory operands */
#define PLK_R8(c) c, c, c, c, c, c, c, c
#define PLK_R32(c) {PLK_R8(c), PLK_R8(c), PLK_R8(c), PLK_R8(c)}
/* (0x0F and the hex digits: not const, so that gcc takes them from memory where used instead of
 * building them at the runner's entry for every event) */
#if defined(__GNUC__) && !defined(_WIN32)
__attribute__((visibility("hidden")))
#endif
_Alignas(32) unsigned char dec_plk_0f[32] = PLK_R32(0x0F);
#define PLK_0F dec_plk_0f
_Alignas(32) static const unsigned char PLK_09[32] = PLK_R32(9);
_Alignas(32) static const unsigned char PLK_27[32] = PLK_R32('a' - '0' - 10);
_Alignas(32) static const unsigned char PLK_30[32] = PLK_R32('0');
/* the string blocks' constants: 0x60, -33, '"', '\\' (32 bytes each) */
#if defined(__GNUC__) && !defined(_WIN32)
__attribute__((visibility("hidden")))
#endif
_Alignas(32) unsigned char dec_plk_str[128] = {PLK_R8(0x60), PLK_R8(0x60), PLK_R8(0x60), PLK_R8(0x60),
                                                        PLK_R8(0xDF), PLK_R8(0xDF), PLK_R8(0xDF), PLK_R8(0xDF),
                                                        PLK_R8('"'),  PLK_R8('"'),  PLK_R8('"'),  PLK_R8('"'),
                                                        PLK_R8('\\'), PLK_R8('\\'), PLK_R8('\\'), PLK_R8('\\')};
#define PLK_60 (plk_s + 0)
#define PLK_DF (plk_s + 32)
#define PLK_QT (plk_s + 64)
#define PLK_BS (plk_s + 96)
/* plk_s: not const (as dec_plk_0f), so that the constants are memory operands where used (gcc
 * would build each with a move and a broadcast: 12 instructions a string) */
#define PLK_STR_BASE const unsigned char *plk_s = dec_plk_str
#undef PLK_R8
#undef PLK_R32
#define PLK(k) _mm_load_si128((const __m128i *)(const void *)(k))
#endif

#if defined(__SSE2__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* the 16 hex digit values (0–15, one a byte) of the two 8-byte lanes of @x, most significant
 * first: lane 0's in *d0, lane 1's in *d1 */
#define HEX_NIBBLES(x, d0, d1)                                                                     \
  do {                                                                                             \
    const __m128i m_ = PLK(PLK_0F);                                                                \
    __m128i hi_ = _mm_and_si128(_mm_srli_epi16(x, 4), m_), lo_ = _mm_and_si128(x, m_);             \
    d0 = _mm_unpacklo_epi8(hi_, lo_);                                                              \
    d1 = _mm_unpackhi_epi8(hi_, lo_);                                                              \
  } while (0)
static inline __m128i hex_ascii_sse2(__m128i n) {
  __m128i adj = _mm_and_si128(_mm_cmpgt_epi8(n, PLK(PLK_09)), PLK(PLK_27));
  return _mm_add_epi8(n, _mm_add_epi8(adj, PLK(PLK_30)));
}
/* @z: the leading zero digits (0–15) of v; returns v with its significant digits first,
 * byte-swapped */
static inline uint64_t hex_lead(uint64_t v, unsigned *z) {
  unsigned lz = (unsigned)__builtin_clzll(v | 1) >> 2;
  *z = lz;
  return __builtin_bswap64(v << (lz * 4));
}
#define HEX_ARR_BODY(RD, WD, ASCII)                                                                \
  for (const unsigned char *qp = q + (size_t)(qe - q) / (2 * (WD)) * (2 * (WD)); q < qp; q += 2 * (WD)) \
    HEX_ARR_PAIR(RD, WD, ASCII);                                                                   \
  HEX_ARR_ONE(RD, WD, ASCII);                                                                      \
  return o
/* two elements (q += 2 WD) */
#define HEX_ARR_PAIR(RD, WD, ASCII)                                                                \
  do {                                                                                             \
    unsigned za, zb;                                                                               \
    uint64_t ta = hex_lead(RD(q), &za), tb = hex_lead(RD(q + (WD)), &zb);                          \
    __m128i x = _mm_unpacklo_epi64(_mm_cvtsi64_si128((long long)ta), _mm_cvtsi64_si128((long long)tb)), da, db; \
    HEX_NIBBLES(x, da, db);                                                                        \
    _mm_storeu_si128((__m128i *)(void *)o, ASCII(da));                                             \
    o -= za;                                                                                       \
    memcpy(o + 16, FX_XSEP, 8);                                                                    \
    _mm_storeu_si128((__m128i *)(void *)(o + 21), ASCII(db));                                      \
    o -= zb;                                                                                       \
    memcpy(o + 37, FX_XSEP, 8);                                                                    \
    o += 42;                                                                                       \
  } while (0)
/* the last element if there is one */
#define HEX_ARR_ONE(RD, WD, ASCII)                                                                 \
  if (q < qe) {                                                                                    \
    unsigned za;                                                                                   \
    uint64_t ta = hex_lead(RD(q), &za);                                                            \
    __m128i x = _mm_cvtsi64_si128((long long)ta), da, db;                                          \
    HEX_NIBBLES(x, da, db);                                                                        \
    (void)db;                                                                                      \
    _mm_storeu_si128((__m128i *)(void *)o, ASCII(da));                                             \
    o -= za;                                                                                       \
    memcpy(o + 16, FX_XSEP, 8);                                                                    \
    o += 21;                                                                                       \
  }
#define HEX_RD64(q) pl_rd64(q)
#define HEX_RD32(q) ((uint64_t)d_rd32(q))
static inline char *hex_arr64(char *o, const unsigned char *q, const unsigned char *qe) {
  HEX_ARR_BODY(HEX_RD64, 8, hex_ascii_sse2);
}
static inline char *hex_arr32(char *o, const unsigned char *q, const unsigned char *qe) {
  HEX_ARR_BODY(HEX_RD32, 4, hex_ascii_sse2);
}
#define PL_HEX_ARR 1
#else
#define PL_HEX_ARR 0
#endif

/* an array element ≥ 10,000 (not −96…−1): out of line, so that the element loops keep no
 * constants of its digit code in registers */
__attribute__((noinline)) static char *fx_put_u32c_big(char *o, uint32_t v) { return fx_put_u32c(o, v); }
/* an array element with its comma (fx_put_u32c), the values below 10,000 and −96…−1 inline */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline char *fx_put_u32e(char *o, uint32_t v) {
#if FX_T3_OK
  if (__builtin_expect(v < 10000, 1)) { /* 8 bytes stored (PL_TL4, filled by plan_build) */
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

/* The plan of @e when it has one (and the writer is far from its maximum), else the walker:
 * the runner below (dec_man.c includes itself for its body). */
#define DEC_MAN_RUNNER 1
#define PL_FN dec_plan_run_sse2
#if defined(__GNUC__)
#define PL_FNATTR __attribute__((noinline))
#else
#define PL_FNATTR
#endif
#define PL_STATIC
#include "dec_man.c"
#undef PL_FN
#undef PL_FNATTR
#undef PL_STATIC
#undef DEC_MAN_RUNNER
#undef PL_START
#undef PL_GO
#undef PL_CASE
#undef PL_NEXT

/* Each op's code address in the runner: called once with the sentinel event (no payload; p: the
 * plan). Without labels as values: nothing. */
static void plan_labels(struct plan *pl) {
#if defined(__GNUC__)
  struct dec_ecall c = {.e = &pl_label_ev, .p = (const unsigned char *)pl, .ptr_size = 8};
  dec_plan_run_sse2(&c);
#else
  (void)pl;
#endif
}

/* plans off (test hook): the walker */
__attribute__((noinline)) static long plans_off(struct etw_decoder *d, struct etw_jw *w, const struct dec_event *e,
                                                const unsigned char *p, size_t n, int ptr_size, const char **why) {
  if (!e->runs) compute_runs((struct dec_event *)e);
  return walk_all(d, w, e, p, n, ptr_size, why);
}

long dec_fields_write_d(struct etw_decoder *d, struct etw_jw *w, const struct dec_event *e,
                        const unsigned char *p, size_t n, int ptr_size, const char **why) {
  int m = __atomic_load_n(&dec_pl_sel, __ATOMIC_RELAXED);
  if (__builtin_expect(m == 2 || w->err || n >= ((size_t)1 << 24), 0)) /* (the runners' walker cases) */
    return plans_off(d, w, e, p, n, ptr_size, why);
  struct dec_ecall c = {.d = d, .w = w, .e = e, .p = p, .mark = w->len, .n = (uint32_t)n, .why = *why, .ptr_size = ptr_size};
  struct dec_eres x;
    x = dec_plan_run_sse2(&c);
  if (x.o) w->len = (size_t)(x.o - w->buf);
  *why = c.why;
  return x.rc;
}

uint32_t dec_plan_hand(const struct dec_event *e, struct dec_ehand *h) {
  memset(h, 0, sizeof *h);
  if (!e) return 0;
  if (!e->runs) compute_runs((struct dec_event *)e);
  if (e->runs <= 1) return 0;
  const struct plan *pl = (const struct plan *)(const void *)(e->f[0].key + e->runs);
  /* the runner's room bound (slack + (n + 1) × perbyte) for the longest payload handed over */
  uint64_t far = (uint64_t)(DEC_EHAND_N + 1) * pl->perbyte + pl->slack;
  if (far >= (1u << 20)) return 0;
  for (unsigned i = 0; i < 2; i++) { /* (opoff, gb0: [ptr_size >> 3]) */
    unsigned ps = i ? 8 : 4;
    h->op[ps] = (const char *)pl->ops + pl->opoff[i];
    h->lo[ps] = pl->gb0[i];
    h->span[ps] = pl->gb0[i] <= DEC_EHAND_N ? DEC_EHAND_N + 1 - pl->gb0[i] : 0;
  }
  return (uint32_t)far;
}

struct dec_eres dec_fields_write_c(struct dec_ecall *c) {
  int m = __atomic_load_n(&dec_pl_sel, __ATOMIC_RELAXED);
  if (__builtin_expect(m == 0 && !c->w->err, 1)) return dec_plan_run_sse2(c);
  return dec_eres_rc(plans_off(c->d, c->w, c->e, c->p, c->n, c->ptr_size, &c->why));
}

/* ---- XML tokenizer */
struct xattr {
  const char *name, *val;
  size_t nl, vl;
};
struct xtag {
  const char *name;
  size_t nl;
  const struct xattr *a; /* ab (next_tag) or a tokenized document's attributes (xdoc) */
  int na;
  int close, selfclose;
  struct xattr ab[24];
};

/* Character classes for the tokenizer's scans (one table load per byte instead of 3–6 compares):
 * XW white space, XN ends a tag name, XA ends an attribute name. */
enum { XW = 1, XN = 2, XA = 4 };
static const unsigned char XCLS[256] = {
    ['\t'] = XW | XN, ['\n'] = XW | XN, ['\r'] = XW | XN, [' '] = XW | XN | XA,
    ['>'] = XN | XA,   ['/'] = XN,        ['='] = XA,
};
#define XC(c) XCLS[(unsigned char)(c)]

/* Next tag at or after *pos; returns 1, or 0 at end / malformed. Text between tags is skipped. */
static int next_tag(const char *s, size_t n, size_t *pos, struct xtag *t) {
  size_t i = *pos;
  for (;;) {
    const char *lt = i < n ? memchr(s + i, '<', n - i) : NULL;
    if (!lt) return 0;
    i = (size_t)(lt - s);
    if (n - i >= 4 && !memcmp(s + i, "<!--", 4)) {
      const char *e = NULL;
      for (size_t k = i + 4; k + 2 < n; k++)
        if (s[k] == '-' && s[k + 1] == '-' && s[k + 2] == '>') {
          e = s + k;
          break;
        }
      if (!e) return 0;
      i = (size_t)(e - s) + 3;
      continue;
    }
    if (n - i >= 9 && !memcmp(s + i, "<![CDATA[", 9)) {
      size_t k = i + 9;
      while (k + 2 < n && !(s[k] == ']' && s[k + 1] == ']' && s[k + 2] == '>')) k++;
      i = k + 3;
      continue;
    }
    if (i + 1 < n && (s[i + 1] == '?' || s[i + 1] == '!')) {
      const char *e = memchr(s + i, '>', n - i);
      if (!e) return 0;
      i = (size_t)(e - s) + 1;
      continue;
    }
    break;
  }
  i++;
  t->na = 0; /* ab[] is read only below na: no 800-byte memset per tag */
  t->a = t->ab;
  t->close = t->selfclose = 0;
  if (i < n && s[i] == '/') {
    t->close = 1;
    i++;
  }
  size_t b = i;
  while (i < n && !(XC(s[i]) & XN)) i++;
  t->name = s + b;
  t->nl = i - b;
  /* strip namespace prefix */
  const char *c = memchr(t->name, ':', t->nl);
  if (c) {
    t->nl -= (size_t)(c + 1 - t->name);
    t->name = c + 1;
  }
  for (;;) {
    while (i < n && (XC(s[i]) & XW)) i++;
    if (i >= n) return 0;
    if (s[i] == '>') {
      i++;
      break;
    }
    if (s[i] == '/') {
      t->selfclose = 1;
      i++;
      continue;
    }
    size_t ab = i;
#if defined(__SSE2__)
    if (n - i >= 16) { /* the name's end (' ', '>' or '='), 16 bytes at a time */
      for (;;) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(v, _mm_set1_epi8('>'))),
                                   _mm_cmpeq_epi8(v, _mm_set1_epi8('=')));
        unsigned mk = (unsigned)_mm_movemask_epi8(hit);
        if (mk) {
          i += (unsigned)__builtin_ctz(mk);
          break;
        }
        i += 16;
        if (n - i < 16) break;
      }
    }
#endif
    while (i < n && !(XC(s[i]) & XA)) i++;
    if (i >= n || s[i] != '=') {
      if (i < n && s[i] != '>') i++;
      continue;
    }
    size_t al = i - ab;
    i++;
    while (i < n && (XC(s[i]) & XW)) i++;
    if (i >= n || (s[i] != '"' && s[i] != '\'')) return 0;
    char q = s[i++];
    const char *e;
#if defined(__SSE2__)
    unsigned mq = 0;
    if (n - i >= 16) /* most values are short: the first 16 bytes without a call */
      mq = (unsigned)_mm_movemask_epi8(
          _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i)), _mm_set1_epi8(q)));
    e = mq ? s + i + __builtin_ctz(mq) : memchr(s + i, q, n - i);
#else
    e = memchr(s + i, q, n - i);
#endif
    if (!e) return 0;
    if (t->na < 24) {
      struct xattr *a = &t->ab[t->na++];
      a->name = s + ab;
      a->nl = al;
      a->val = s + i;
      a->vl = (size_t)(e - (s + i));
    }
    i = (size_t)(e - s) + 1;
  }
  *pos = i;
  return 1;
}

static int tag_is(const struct xtag *t, const char *name) {
  return t->nl == strlen(name) && !memcmp(t->name, name, t->nl);
}

/* A document tokenized once: the tags next_tag returns from its start, in order (the string
 * table, the provider search and each provider's body read this instead of tokenizing the
 * text again; next_tag from the position after tag k returns tag k + 1). */
struct xdtag {
  const char *name;
  uint32_t nl, a0; /* a0: first attribute in xdoc.a */
  uint8_t na, close, selfclose;
};
struct xdoc {
  struct xdtag *t;
  uint32_t nt, ct;
  struct xattr *a;
  uint32_t na, ca;
};

static void xdoc_free(struct xdoc *x) {
  free(x->t);
  free(x->a);
  memset(x, 0, sizeof *x);
}

/* 0, or -1 when out of memory (the tags so far are kept: a shorter document, as when the text
 * ends there). */
static int xdoc_build(struct xdoc *x, const char *s, size_t n) {
  memset(x, 0, sizeof *x);
  size_t pos = 0;
  struct xtag t;
  while (next_tag(s, n, &pos, &t)) {
    if (x->nt == x->ct || x->na + (uint32_t)t.na > x->ca) {
      if (x->nt >= UINT32_MAX / 4 || x->na >= UINT32_MAX / 4) return -1;
      uint32_t ct = x->nt == x->ct ? (x->ct ? x->ct * 2 : 256) : x->ct;
      uint32_t ca = x->na + (uint32_t)t.na > x->ca ? (x->ca ? x->ca * 2 : 1024) : x->ca;
      struct xdtag *nt = realloc(x->t, (size_t)ct * sizeof *nt);
      if (!nt) return -1;
      x->t = nt;
      x->ct = ct;
      struct xattr *na = realloc(x->a, (size_t)ca * sizeof *na);
      if (!na) return -1;
      x->a = na;
      x->ca = ca;
    }
    struct xdtag *d = &x->t[x->nt++];
    d->name = t.name;
    d->nl = (uint32_t)t.nl;
    d->a0 = x->na;
    d->na = (uint8_t)t.na;
    d->close = (uint8_t)t.close;
    d->selfclose = (uint8_t)t.selfclose;
    memcpy(x->a + x->na, t.ab, (size_t)t.na * sizeof *x->a);
    x->na += (uint32_t)t.na;
  }
  return 0;
}

/* Tag @k of @x as an xtag (attributes not copied). */
static inline void xdoc_tag(const struct xdoc *x, uint32_t k, struct xtag *t) {
  const struct xdtag *d = &x->t[k];
  t->name = d->name;
  t->nl = d->nl;
  t->a = x->a + d->a0;
  t->na = d->na;
  t->close = d->close;
  t->selfclose = d->selfclose;
}

/* Attribute value as a new NUL-terminated string with entities decoded (malloc), or NULL. */
/* Decode an attribute value's entities into @o (room for vl + 1); NUL-terminated. */
static void attr_decode(const char *v, size_t vl, char *o) {
  const char *amp = memchr(v, '&', vl);
  if (!amp) { /* no entity: a copy */
    memcpy(o, v, vl);
    o[vl] = 0;
    return;
  }
  size_t k = (size_t)(amp - v);
  memcpy(o, v, k);
  for (size_t j = k; j < vl; j++) {
    if (v[j] == '&') {
      static const struct { const char *e; char c; } ents[] = {
          {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
      int done = 0;
      for (size_t q = 0; q < 5; q++) {
        size_t el = strlen(ents[q].e);
        if (vl - j >= el && !memcmp(v + j, ents[q].e, el)) {
          o[k++] = ents[q].c;
          j += el - 1;
          done = 1;
          break;
        }
      }
      if (done) continue;
    }
    o[k++] = v[j];
  }
  o[k] = 0;
}

static const struct xattr *attr_find(const struct xtag *t, const char *name) {
  size_t l = strlen(name);
  for (int i = 0; i < t->na; i++)
    if (t->a[i].nl == l && !memcmp(t->a[i].name, name, l)) return &t->a[i];
  return NULL;
}

/* Attribute value as a new NUL-terminated string with entities decoded (malloc), or NULL. */
static char *attr(const struct xtag *t, const char *name) {
  const struct xattr *a = attr_find(t, name);
  if (!a) return NULL;
  char *o = malloc(a->vl + 1);
  if (o) attr_decode(a->val, a->vl, o);
  return o;
}

/* A value only read while the tag is handled: decoded into @tv's buffer when it fits (else a
 * malloc'ed copy, freed by tv_free); NULL when absent, as attr(). */
struct tval {
  char *heap;
  char b[96];
};
static const char *attr_t(const struct xtag *t, const char *name, struct tval *tv) {
  tv->heap = NULL;
  const struct xattr *a = attr_find(t, name);
  if (!a) return NULL;
  if (a->vl < sizeof tv->b) {
    attr_decode(a->val, a->vl, tv->b);
    return tv->b;
  }
  return tv->heap = attr(t, name);
}
static inline void tv_free(struct tval *tv) { free(tv->heap); }

static long num(const char *s) {
  if (!s) return -1;
  char *e;
  long v = strtol(s, &e, 0);
  return e == s ? -1 : v;
}

/* ---- manifest model while parsing */
struct named {
  char *name, *msg;
  long value;
  long task;           /* opcodes: owning task value or -1 */
};
struct tmpl {
  char *tid;
  struct dec_field *f;
  uint32_t nf, cf;
};

/* Strings that live only while a provider is parsed (task, opcode and template texts, the
 * document's string table) come from blocks freed together. */
struct ablk {
  struct ablk *next;
  size_t used, cap;
  char data[];
};
struct arena {
  struct ablk *b;
};
static char *arena_alloc(struct arena *a, size_t n) {
  if (!a->b || a->b->cap - a->b->used < n) {
    size_t cap = n > 16384 ? n : 16384;
    struct ablk *b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->next = a->b;
    b->used = 0;
    b->cap = cap;
    a->b = b;
  }
  char *p = a->b->data + a->b->used;
  a->b->used += n;
  return p;
}
static void arena_free(struct arena *a) {
  while (a->b) {
    struct ablk *n = a->b->next;
    free(a->b);
    a->b = n;
  }
}
/* attr() into @a. */
static char *attr_a(const struct xtag *t, const char *name, struct arena *a) {
  const struct xattr *x = attr_find(t, name);
  if (!x) return NULL;
  char *o = arena_alloc(a, x->vl + 1);
  if (o) attr_decode(x->val, x->vl, o);
  return o;
}
struct strent {
  char *id, *val;
};

struct mctx {
  struct named *tasks, *ops;
  uint32_t nt, no, ct, co;
  struct tmpl *tm;
  uint32_t ntm, ctm;
  struct strent *strs;
  uint32_t ns, cs;
  uint32_t *sidx;      /* open hash over strs by id (index + 1), size sidx_cap */
  uint32_t sidx_cap;
  struct dec_map **maps;
  uint32_t nm, cm;
  struct arena ar; /* the strings above */
};

#define GROW(arr, n, cap)                                                  \
  do {                                                                     \
    if ((n) == (cap)) {                                                    \
      uint32_t nc_ = (cap) ? (cap) * 2 : 16;                               \
      void *np_ = realloc((arr), (size_t)nc_ * sizeof *(arr));             \
      if (!np_) goto oom;                                                  \
      (arr) = np_;                                                         \
      (cap) = nc_;                                                         \
    }                                                                      \
  } while (0)

static uint32_t str_hash(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static void index_strings(struct mctx *m) {
  uint32_t cap = 16;
  while (cap < m->ns * 2 + 2) cap *= 2;
  m->sidx = calloc(cap, sizeof *m->sidx);
  if (!m->sidx) return;
  m->sidx_cap = cap;
  for (uint32_t i = 0; i < m->ns; i++) {
    uint32_t j = str_hash(m->strs[i].id, strlen(m->strs[i].id)) & (cap - 1);
    while (m->sidx[j]) j = (j + 1) & (cap - 1);
    m->sidx[j] = i + 1;
  }
}

static const char *lookup_str(const struct mctx *m, const char *ref) {
  /* "$(string.X)" → X's value */
  if (!ref || strncmp(ref, "$(string.", 9)) return ref;
  size_t l = strlen(ref);
  if (l < 11) return NULL;
  const char *id = ref + 9;
  size_t il = l - 10;
  if (m->sidx_cap) {
    uint32_t j = str_hash(id, il) & (m->sidx_cap - 1);
    for (; m->sidx[j]; j = (j + 1) & (m->sidx_cap - 1)) {
      const struct strent *e = &m->strs[m->sidx[j] - 1];
      if (!strncmp(e->id, id, il) && !e->id[il]) return e->val;
    }
    return NULL;
  }
  for (uint32_t i = 0; i < m->ns; i++)
    if (strlen(m->strs[i].id) == il && !memcmp(m->strs[i].id, id, il)) return m->strs[i].val;
  return NULL;
}

static unsigned in_type(const char *s) {
  static const struct { const char *n; unsigned v; } T[] = {
      {"UnicodeString", 1}, {"AnsiString", 2}, {"Int8", 3}, {"UInt8", 4}, {"Int16", 5},
      {"UInt16", 6}, {"Int32", 7}, {"UInt32", 8}, {"Int64", 9}, {"UInt64", 10}, {"Float", 11},
      {"Double", 12}, {"Boolean", 13}, {"Binary", 14}, {"GUID", 15}, {"Pointer", 16},
      {"FILETIME", 17}, {"SYSTEMTIME", 18}, {"SID", 19}, {"HexInt32", 20}, {"HexInt64", 21},
      {"CountedUnicodeString", 22}, {"CountedAnsiString", 23}, {"SizeT", 308},
      {"IPAddrV4", 8}, {"IPAddrV6", 14}, {"Port", 6}, {"WmiTime", 10}};
  if (!s) return 0;
  const char *c = strchr(s, ':');
  if (c) s = c + 1;
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
    if (!strcmp(T[i].n, s)) return T[i].v;
  return 0;
}

static unsigned out_type(const char *s, const char *in) {
  static const struct { const char *n; unsigned v; } T[] = {
      {"HexInt32", 4}, {"HexInt64", 4}, {"Hex", 4}, {"Boolean", 3}, {"IPv4", 8}, {"IPv6", 9},
      {"Port", 7}, {"Win32Error", 13}, {"NTSTATUS", 14}, {"HResult", 15}, {"SocketAddress", 10},
      {"String", 2}, {"DateTime", 16}, {"PID", 5}, {"TID", 6}};
  if (in) {
    const char *c = strchr(in, ':');
    c = c ? c + 1 : in;
    if (!strcmp(c, "IPAddrV4")) return 8;
    if (!strcmp(c, "IPAddrV6")) return 9;
    if (!strcmp(c, "Port")) return 7;
  }
  if (!s) return 0;
  const char *c = strchr(s, ':');
  if (c) s = c + 1;
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
    if (!strcmp(T[i].n, s)) return T[i].v;
  return 0;
}

static const char *std_opcode(const char *n, long *v) {
  static const struct { const char *n, *d; long v; } T[] = {
      {"win:Info", "", 0}, {"win:Start", "Start", 1}, {"win:Stop", "Stop", 2},
      {"win:DC_Start", "DCStart", 3}, {"win:DC_Stop", "DCStop", 4},
      {"win:Extension", "Extension", 5}, {"win:Reply", "Reply", 6},
      {"win:Resume", "Resume", 7}, {"win:Suspend", "Suspend", 8}, {"win:Send", "Send", 9},
      {"win:Receive", "Receive", 240}};
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
    if (!strcmp(T[i].n, n)) {
      *v = T[i].v;
      return T[i].d;
    }
  return NULL;
}

static long std_level(const char *n) {
  static const char *const L[] = {"win:LogAlways", "win:Critical", "win:Error", "win:Warning",
                                  "win:Informational", "win:Verbose"};
  if (!n) return 0;
  for (int i = 0; i < 6; i++)
    if (!strcmp(L[i], n)) return i;
  return num(n) < 0 ? 4 : num(n);
}

static void mctx_free(struct mctx *m) {
  for (uint32_t i = 0; i < m->ntm; i++) free(m->tm[i].f);
  arena_free(&m->ar); /* every name, message, id and value */
  free(m->tasks);
  free(m->ops);
  free(m->tm);
  free(m->strs);
  free(m->sidx);
  free(m->maps);
}

static struct dec_map *find_map(struct mctx *m, const char *name) {
  if (!name) return NULL;
  for (uint32_t i = 0; i < m->nm; i++)
    if (!strcmp(m->maps[i]->name, name)) return m->maps[i];
  return NULL;
}

/* An open hash from names to the first index that has the name (NULL names are not indexed):
 * the linear "first match" scans of the event pass, as lookups. */
struct nidx {
  uint32_t *h; /* index + 1; cap slots */
  uint32_t cap;
};
static void nidx_build(struct nidx *x, uint32_t n, const char *(*get)(const void *, uint32_t), const void *arr) {
  x->cap = 16;
  while (x->cap < n * 2 + 2) x->cap *= 2;
  x->h = calloc(x->cap, sizeof *x->h);
  if (!x->h) {
    x->cap = 0;
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    const char *nm = get(arr, i);
    if (!nm) continue;
    uint32_t j = str_hash(nm, strlen(nm)) & (x->cap - 1);
    for (; x->h[j]; j = (j + 1) & (x->cap - 1))
      if (!strcmp(get(arr, x->h[j] - 1), nm)) break; /* an earlier index has it */
    if (!x->h[j]) x->h[j] = i + 1;
  }
}
/* First index with name @nm, or UINT32_MAX (the index must have been built: cap != 0). */
static uint32_t nidx_find(const struct nidx *x, const char *nm, const char *(*get)(const void *, uint32_t),
                          const void *arr) {
  uint32_t j = str_hash(nm, strlen(nm)) & (x->cap - 1);
  for (; x->h[j]; j = (j + 1) & (x->cap - 1))
    if (!strcmp(get(arr, x->h[j] - 1), nm)) return x->h[j] - 1;
  return UINT32_MAX;
}
static const char *task_name_at(const void *a, uint32_t i) { return ((const struct named *)a)[i].name; }
static const char *tmpl_tid_at(const void *a, uint32_t i) { return ((const struct tmpl *)a)[i].tid; }

/* snprintf(o, cap, "%s/%s", a, b) (or "%s" without @b): the first cap - 1 bytes. */
static void name_cat(char *o, size_t cap, const char *a, const char *b) {
  size_t n = 0, la = strlen(a);
  if (la > cap - 1) la = cap - 1;
  memcpy(o, a, la);
  n = la;
  if (b && n < cap - 1) {
    o[n++] = '/';
    size_t lb = strlen(b);
    if (lb > cap - 1 - n) lb = cap - 1 - n;
    memcpy(o + n, b, lb);
    n += lb;
  }
  o[n] = 0;
}

/* Parse one <provider> element's contents (from *pos to </provider>) plus the document's
 * string table. Events are collected in a second pass once tasks/opcodes/templates are known. */
struct pev {
  long value, version, level, task_v, opcode_v;
  char *symbol, *task, *opcode, *tmpl, *msg, *keywords;
};

static int load_provider(struct etw_decoder *d, const struct xdoc *doc, uint32_t start,
                         const struct xtag *ptag, const struct mctx *docstr,
                         const unsigned char *force_guid) {
  struct mctx m;
  memset(&m, 0, sizeof m);
  struct nidx tix = {0}, mix = {0}; /* tasks and templates by name (event pass) */
  struct pev *evs = NULL;
  uint32_t ne = 0, ce = 0;
  int rc = -1;
  char *pname = attr(ptag, "name"), *pguid = attr(ptag, "guid");
  uint32_t ti = start;
  struct xtag t;
  long cur_task = -1;
  struct tmpl *cur_tm = NULL;
  struct dec_map *cur_map = NULL;
  int sstack[DEC_MAX_DEPTH];
  int sdepth = 0;
  for (; ti < doc->nt; ti++) {
    xdoc_tag(doc, ti, &t);
    if (t.close) {
      if (tag_is(&t, "provider")) break;
      if (tag_is(&t, "task")) cur_task = -1;
      if (tag_is(&t, "template")) cur_tm = NULL;
      if (tag_is(&t, "valueMap") || tag_is(&t, "bitMap")) cur_map = NULL;
      if (tag_is(&t, "struct") && sdepth > 0) sdepth--;
      continue;
    }
    if (tag_is(&t, "task")) {
      GROW(m.tasks, m.nt, m.ct);
      struct named *x = &m.tasks[m.nt++];
      x->name = attr_a(&t, "name", &m.ar);
      x->msg = attr_a(&t, "message", &m.ar);
      struct tval tv;
      x->value = num(attr_t(&t, "value", &tv));
      tv_free(&tv);
      x->task = -1;
      if (!t.selfclose) cur_task = x->value;
    } else if (tag_is(&t, "opcode")) {
      GROW(m.ops, m.no, m.co);
      struct named *x = &m.ops[m.no++];
      x->name = attr_a(&t, "name", &m.ar);
      x->msg = attr_a(&t, "message", &m.ar);
      struct tval tv;
      x->value = num(attr_t(&t, "value", &tv));
      tv_free(&tv);
      x->task = cur_task;
    } else if (tag_is(&t, "template")) {
      GROW(m.tm, m.ntm, m.ctm);
      cur_tm = &m.tm[m.ntm++];
      memset(cur_tm, 0, sizeof *cur_tm);
      cur_tm->tid = attr_a(&t, "tid", &m.ar);
      sdepth = 0;
      if (t.selfclose) cur_tm = NULL;
    } else if ((tag_is(&t, "data") || tag_is(&t, "struct")) && cur_tm) {
      if (cur_tm->nf >= DEC_MAX_FIELDS - 1) continue;
      if (cur_tm->nf == cur_tm->cf) {
        uint32_t nc = cur_tm->cf ? cur_tm->cf * 2 : 16;
        struct dec_field *nf = realloc(cur_tm->f, nc * sizeof *nf);
        if (!nf) goto oom;
        cur_tm->f = nf;
        cur_tm->cf = nc;
      }
      struct dec_field *f = &cur_tm->f[cur_tm->nf];
      memset(f, 0, sizeof *f);
      f->name = attr_a(&t, "name", &m.ar);
      if (!f->name && (f->name = arena_alloc(&m.ar, 2))) memcpy(f->name, "_", 2);
      f->len = -1;
      f->count = 1;
      f->len_ref = f->count_ref = -1;
      struct tval t1, t2, t3, t4, t5;
      const char *in = attr_t(&t, "inType", &t1), *out = attr_t(&t, "outType", &t2),
                 *len = attr_t(&t, "length", &t3), *cnt = attr_t(&t, "count", &t4), *map = attr_t(&t, "map", &t5);
      f->in = (uint16_t)(tag_is(&t, "struct") ? 24 : in_type(in));
      f->out = (uint16_t)out_type(out, in);
      if (len) {
        if (num(len) >= 0) f->len = (int32_t)num(len);
        else
          for (uint32_t k = 0; k < cur_tm->nf; k++)
            if (!strcmp(cur_tm->f[k].name, len)) f->len_ref = (int32_t)k;
      }
      if (cnt) {
        f->is_array = 1;
        if (num(cnt) >= 0) f->count = (int32_t)num(cnt);
        else
          for (uint32_t k = 0; k < cur_tm->nf; k++)
            if (!strcmp(cur_tm->f[k].name, cnt)) f->count_ref = (int32_t)k;
      }
      f->map = find_map(&m, map);
      tv_free(&t1), tv_free(&t2), tv_free(&t3), tv_free(&t4), tv_free(&t5);
      for (int q = 0; q < sdepth; q++)
        if ((uint32_t)sstack[q] < cur_tm->nf) cur_tm->f[sstack[q]].members++;
      if (f->in == 24 && !t.selfclose && sdepth < DEC_MAX_DEPTH) sstack[sdepth++] = (int)cur_tm->nf;
      cur_tm->nf++;
      if (f->in == 0 && f->name) f->in = 1; /* unknown inType: read as string */
    } else if (tag_is(&t, "valueMap") || tag_is(&t, "bitMap")) {
      GROW(m.maps, m.nm, m.cm);
      struct dec_map *x = calloc(1, sizeof *x);
      if (!x) goto oom;
      x->name = attr(&t, "name");
      x->bitmap = tag_is(&t, "bitMap");
      if (!x->name) {
        free(x);
        continue;
      }
      m.maps[m.nm++] = x;
      cur_map = t.selfclose ? NULL : x;
    } else if (tag_is(&t, "map") && cur_map) {
      if (cur_map->n >= 4096) continue;
      struct tval t1, t2;
      const char *v = attr_t(&t, "value", &t1), *msg = attr_t(&t, "message", &t2);
      uint32_t *nv = realloc(cur_map->val, (cur_map->n + 1) * sizeof *nv);
      char **ns = nv ? realloc(cur_map->str, (cur_map->n + 1) * sizeof *ns) : NULL;
      if (nv) cur_map->val = nv;
      if (ns) cur_map->str = ns;
      if (!nv || !ns) {
        tv_free(&t1), tv_free(&t2);
        goto oom;
      }
      const char *txt = lookup_str(docstr, msg);
      cur_map->val[cur_map->n] = (uint32_t)num(v);
      cur_map->str[cur_map->n] = strdup(txt ? txt : (msg ? msg : ""));
      cur_map->n++;
      tv_free(&t1), tv_free(&t2);
    } else if (tag_is(&t, "event")) {
      GROW(evs, ne, ce);
      struct pev *e = &evs[ne++];
      memset(e, 0, sizeof *e);
      struct tval t1, t2, t3;
      const char *v = attr_t(&t, "value", &t1), *ver = attr_t(&t, "version", &t2), *lv = attr_t(&t, "level", &t3);
      e->value = num(v);
      e->version = ver ? num(ver) : 0;
      e->level = std_level(lv);
      tv_free(&t1), tv_free(&t2), tv_free(&t3);
      e->symbol = attr_a(&t, "symbol", &m.ar);
      e->task = attr_a(&t, "task", &m.ar);
      e->opcode = attr_a(&t, "opcode", &m.ar);
      e->tmpl = attr_a(&t, "template", &m.ar); /* (message and keywords are not used) */
    }
  }
  unsigned char guid[16];
  if (force_guid) memcpy(guid, force_guid, 16);
  else if (!pguid || etw_parse_guid(pguid, guid)) goto out;
  struct dec_provider *p = dec_provider_get(d, guid, 1);
  if (!p) goto out;
  if (!p->name && pname) p->name = etw_intern(pname);
  if (!p->source) p->source = "manifest";
  /* the maps join the provider's: one realloc for all (one per map was quadratic in the number
   * of maps; a fuzzed 175 KB manifest took 35 s under ASan) */
  struct dec_map **nmaps = m.nm ? realloc(p->maps, ((size_t)p->n_maps + m.nm) * sizeof *nmaps) : NULL;
  if (nmaps) p->maps = nmaps;
  for (uint32_t i = 0; i < m.nm; i++) {
    if (!nmaps) {
      dec_map_free(m.maps[i]);
      continue;
    }
    p->maps[p->n_maps++] = m.maps[i];
  }
  m.nm = 0;
  if (ne) {
    nidx_build(&tix, m.nt, task_name_at, m.tasks);
    nidx_build(&mix, m.ntm, tmpl_tid_at, m.tm);
  }
  for (uint32_t i = 0; i < ne; i++) {
    struct pev *pe = &evs[i];
    if (pe->value < 0 || pe->value > 65535) continue;
    struct dec_event *e = calloc(1, sizeof *e);
    if (!e) goto oom;
    e->id = (uint16_t)pe->value;
    e->version = (uint8_t)pe->version;
    e->level = (uint8_t)pe->level;
    const char *tname = NULL, *oname = NULL;
    long tv = 0, ov = 0;
    int by_msg = 0;
    /* the first task of that name (a lookup; a linear scan when the index is missing) */
    uint32_t k0 = pe->task && tix.cap ? nidx_find(&tix, pe->task, task_name_at, m.tasks) : 0;
    for (uint32_t k = k0; pe->task && k < m.nt; k++)
      if (m.tasks[k].name && !strcmp(m.tasks[k].name, pe->task)) {
        const char *msg = lookup_str(docstr, m.tasks[k].msg);
        if (!msg) msg = lookup_str(&m, m.tasks[k].msg);
        by_msg = msg && m.tasks[k].msg && strncmp(m.tasks[k].msg, "$(string.string", 15);
        tname = msg ? msg : m.tasks[k].name;
        tv = m.tasks[k].value;
        break;
      }
    if (pe->opcode) {
      const char *sd = std_opcode(pe->opcode, &ov);
      if (sd) oname = sd;
      else
        for (int pass = 0; pass < 2 && !oname; pass++)
          for (uint32_t k = 0; k < m.no; k++)
            if (m.ops[k].name && !strcmp(m.ops[k].name, pe->opcode) && (pass || m.ops[k].task == tv)) {
              const char *msg = lookup_str(docstr, m.ops[k].msg);
              oname = msg ? msg : m.ops[k].name;
              ov = m.ops[k].value;
              break;
            }
    }
    e->task = (uint16_t)tv;
    e->opcode = (uint8_t)ov;
    char nb[300];
    if (tname && oname && *oname) name_cat(nb, sizeof nb, tname, oname);
    else if (tname) name_cat(nb, sizeof nb, tname, NULL);
    else if (pe->symbol) name_cat(nb, sizeof nb, pe->symbol, NULL);
    else snprintf(nb, sizeof nb, "EventID(%ld)", pe->value);
    e->name = etw_intern(nb);
    e->task_name = tname ? etw_intern(tname) : NULL;
    e->opcode_name = oname && *oname ? etw_intern(oname) : NULL;
    if (pe->tmpl) {
      for (uint32_t k = mix.cap ? nidx_find(&mix, pe->tmpl, tmpl_tid_at, m.tm) : 0; k < m.ntm; k++) {
        if (!m.tm[k].tid || strcmp(m.tm[k].tid, pe->tmpl)) continue;
        e->f = calloc(m.tm[k].nf ? m.tm[k].nf : 1, sizeof *e->f);
        if (!e->f) {
          free(e);
          goto oom;
        }
        for (uint32_t q = 0; q < m.tm[k].nf; q++) {
          e->f[q] = m.tm[k].f[q];
          e->f[q].name = strdup(m.tm[k].f[q].name);
          e->f[q].key = NULL;
          if (e->f[q].map) { /* maps now owned by the provider: find by name */
            struct dec_map *mm = NULL;
            for (uint32_t z = 0; z < p->n_maps; z++)
              if (p->maps[z] == e->f[q].map) mm = p->maps[z];
            e->f[q].map = mm;
          }
        }
        e->nf = m.tm[k].nf;
        e->has_template = 1;
        e->quality = by_msg ? 3 : 1;
        break;
      }
    }
    dec_event_add(p, e);
  }
  rc = 0;
  goto out;
oom:
  rc = -1;
out:
  free(tix.h);
  free(mix.h);
  free(evs); /* its strings are in m.ar */
  for (uint32_t i = 0; i < m.nm; i++) dec_map_free(m.maps[i]);
  mctx_free(&m);
  free(pname);
  free(pguid);
  return rc;
}

/* Collect <string id value> entries of the whole document (first localization wins). */
static int load_strings(const struct xdoc *doc, struct mctx *m) {
  struct xtag t;
  for (uint32_t ti = 0; ti < doc->nt; ti++) {
    xdoc_tag(doc, ti, &t);
    if (t.close || !tag_is(&t, "string")) continue;
    if (m->ns >= 65536) break;
    GROW(m->strs, m->ns, m->cs);
    m->strs[m->ns].id = attr_a(&t, "id", &m->ar);
    m->strs[m->ns].val = attr_a(&t, "value", &m->ar);
    if (!m->strs[m->ns].id || !m->strs[m->ns].val) continue;
    m->ns++;
  }
  return 0;
oom:
  return -1;
}

/* Load the providers of a manifest document; @filter (may be NULL): only the provider elements
 * whose guid is @filter (the others would not touch that provider). */
struct xstrs { /* a document's string table, built on first need */
  struct mctx m;
  int built;
};
static int manifest_load_doc(struct etw_decoder *d, const struct xdoc *doc, struct xstrs *cache,
                             const unsigned char *force_guid, const unsigned char *filter) {
  struct xstrs local;
  memset(&local, 0, sizeof local);
  struct xstrs *xs = cache ? cache : &local;
  struct xtag t;
  int found = 0;
  for (uint32_t ti = 0; ti < doc->nt; ti++) {
    xdoc_tag(doc, ti, &t);
    if (t.close || !tag_is(&t, "provider") || t.selfclose) continue;
    struct tval tv;
    const char *g = attr_t(&t, "guid", &tv);
    int ok = g != NULL;
    if (ok && filter) {
      unsigned char pg[16];
      ok = !etw_parse_guid(g, pg) && !memcmp(pg, filter, 16);
    }
    tv_free(&tv);
    if (!ok) continue; /* e.g. <counters><provider …> */
    if (!xs->built) { /* the document's string table, once (it has no effect on the registry) */
      load_strings(doc, &xs->m);
      index_strings(&xs->m);
      xs->built = 1;
    }
    if (load_provider(d, doc, ti + 1, &t, &xs->m, force_guid) == 0) found++;
  }
  mctx_free(&local.m);
  return found ? 0 : -1;
}

int dec_manifest_load(struct etw_decoder *d, const char *xml, size_t n, const unsigned char *force_guid) {
  struct xdoc doc;
  xdoc_build(&doc, xml, n);
  int rc = manifest_load_doc(d, &doc, NULL, force_guid, NULL);
  xdoc_free(&doc);
  return rc;
}

/* PowerShell's source manifest declares PowerShellCore's GUID; Windows PowerShell logs the
 * same events under Microsoft-Windows-PowerShell's GUID (manifests README). */
static const unsigned char PSCORE[16] = {0xa8, 0x14, 0x07, 0xf9, 0x09, 0x55, 0x4a, 0x43,
                                         0xbf, 0x6d, 0xb1, 0x62, 0x4c, 0x8a, 0x19, 0xa2};
static const unsigned char WINPS[16] = {0x3b, 0x85, 0xc1, 0xa0, 0x40, 0x5c, 0x15, 0x4b,
                                        0x87, 0x66, 0x3c, 0xf1, 0xc5, 0x8f, 0x98, 0x5a};
static const unsigned char CLR_RT[16] = {0x23, 0x0d, 0x3c, 0xe1, 0xbc, 0xcc, 0x12, 0x4e,
                                         0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4};
#define PS_PATH "PowerShell.Core.Instrumentation"

/* A manifest file's bytes (NULL when unreadable, empty or too large: then it is not loaded). */
static char *read_manifest(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  struct stat sb;
  char *buf = NULL;
  size_t n = 0;
  if (!fstat(fileno(fp), &sb) && sb.st_size > 0 && sb.st_size < (off_t)DEC_MAX_MANIFEST)
    buf = malloc((size_t)sb.st_size + 1);
  if (buf) {
    n = fread(buf, 1, (size_t)sb.st_size, fp);
    if (!n) {
      free(buf);
      buf = NULL;
    }
  }
  fclose(fp);
  *len = n;
  return buf;
}

static void load_file(struct etw_decoder *d, const char *path) {
  size_t n;
  char *buf = read_manifest(path, &n);
  if (!buf) return;
  struct xdoc doc;
  xdoc_build(&doc, buf, n);
  struct xstrs xs;
  memset(&xs, 0, sizeof xs);
  manifest_load_doc(d, &doc, &xs, NULL, NULL);
  if (strstr(path, PS_PATH)) {
    struct dec_provider *core = dec_provider_get(d, PSCORE, 0);
    if (core && !dec_provider_get(d, WINPS, 0)) {
      manifest_load_doc(d, &doc, &xs, WINPS, NULL);
      struct dec_provider *wp = dec_provider_get(d, WINPS, 0);
      if (wp) wp->name = etw_intern("Microsoft-Windows-PowerShell");
    }
  }
  mctx_free(&xs.m);
  xdoc_free(&doc);
  free(buf);
}

/* Collect *.man / *.xml under @dir (depth ≤ 6, ≤ 4096 files). */
static void scan(const char *dir, int depth, char ***list, int *n) {
  if (depth > 6 || *n >= 4096) return;
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *de;
  while ((de = readdir(dp)) && *n < 4096) {
    if (de->d_name[0] == '.') continue;
    char path[4096];
    int k = snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (k <= 0 || (size_t)k >= sizeof path) continue;
    struct stat sb;
    if (stat(path, &sb)) continue;
    if (S_ISDIR(sb.st_mode)) {
      scan(path, depth + 1, list, n);
      continue;
    }
    size_t l = strlen(de->d_name);
    if (l < 4 || (strcmp(de->d_name + l - 4, ".man") && strcmp(de->d_name + l - 4, ".xml"))) continue;
    char **nl = realloc(*list, (size_t)(*n + 1) * sizeof *nl);
    if (!nl) break;
    *list = nl;
    if ((nl[*n] = strdup(path))) (*n)++;
  }
  closedir(dp);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Load every manifest under @dir in sorted path order. For the same (provider, id, version)
 * the first schema that has a template wins (so put the most complete manifests first). */
void dec_manifest_scan_dir(struct etw_decoder *d, const char *dir) {
  int n = 0;
  char **list = NULL;
  scan(dir, 0, &list, &n);
  if (list) qsort(list, (size_t)n, sizeof *list, cmp_str);
  for (int i = 0; i < n; i++) {
    load_file(d, list[i]);
    free(list[i]);
  }
  free(list);
  dec_builtin_supplements(d);
}

/* ---- lazy loading: an index of the provider GUIDs each manifest file may define
 *
 * dec_manifest_scan_dir loads every file in sorted path order; the registry it leaves is, per
 * provider, what that provider's own <provider> elements give in that order (a provider element
 * touches only its own GUID's provider), plus two rules that cross providers: the PowerShell
 * alias (a PS_PATH file loaded under WINPS when PSCORE exists and WINPS does not, at that file's
 * turn) and the CLR supplements (after every file). The index keeps each GUID's files in the same
 * order and loads them, filtered to that GUID, when the registry is first asked for it; the two
 * rules are applied at the same points of that provider's sequence. The files are read once, at
 * index time, and freed when no pending GUID needs them. */
struct lazy_file {
  char *buf;
  size_t n;
  uint32_t refs; /* pending GUIDs that need it */
  int tok;       /* doc built */
  struct xdoc doc;
  struct xstrs strs;
};

static const struct xdoc *lazy_doc(struct lazy_file *f) {
  if (!f->tok) {
    xdoc_build(&f->doc, f->buf, f->n);
    f->tok = 1;
  }
  return &f->doc;
}
struct lazy_ref {
  uint32_t file;
  uint8_t native; /* 1 = the file may define the GUID; 0 = only the PowerShell alias turn */
  uint8_t ps;     /* a PS_PATH file (the alias turn for WINPS) */
};
struct lazy_guid {
  unsigned char guid[16];
  int done;
  struct lazy_ref *r;
  uint32_t nr, cr;
};
struct dec_lazy {
  struct lazy_file *f;
  uint32_t nf;
  struct lazy_guid *g;
  uint32_t ng, cg;
  uint32_t *h; /* open hash over g by GUID (index + 1) */
  uint32_t hcap;
  long pscore_first; /* PSCORE exists after file k's turn for k >= this; LONG_MAX = never */
  int pscore_known;
};

static uint32_t lazy_hash(const unsigned char g[16]) {
  return (d_rd32(g) ^ d_rd32(g + 4) ^ d_rd32(g + 8) ^ d_rd32(g + 12)) * 2654435761u;
}

static struct lazy_guid *lazy_find(struct dec_lazy *L, const unsigned char g[16]) {
  if (!L->hcap) return NULL;
  for (uint32_t j = lazy_hash(g) & (L->hcap - 1); L->h[j]; j = (j + 1) & (L->hcap - 1))
    if (!memcmp(L->g[L->h[j] - 1].guid, g, 16)) return &L->g[L->h[j] - 1];
  return NULL;
}

static int lazy_add(struct dec_lazy *L, const unsigned char g[16], uint32_t file, int native, int ps) {
  struct lazy_guid *e = lazy_find(L, g);
  if (!e) {
    if ((L->ng + 1) * 2 > L->hcap) {
      uint32_t nc = L->hcap ? L->hcap * 2 : 64;
      uint32_t *nh = calloc(nc, sizeof *nh);
      if (!nh) return -1;
      for (uint32_t i = 0; i < L->ng; i++) {
        uint32_t j = lazy_hash(L->g[i].guid) & (nc - 1);
        while (nh[j]) j = (j + 1) & (nc - 1);
        nh[j] = i + 1;
      }
      free(L->h);
      L->h = nh;
      L->hcap = nc;
    }
    GROW(L->g, L->ng, L->cg);
    e = &L->g[L->ng];
    memset(e, 0, sizeof *e);
    memcpy(e->guid, g, 16);
    uint32_t j = lazy_hash(g) & (L->hcap - 1);
    while (L->h[j]) j = (j + 1) & (L->hcap - 1);
    L->h[j] = ++L->ng;
  }
  if (e->nr && e->r[e->nr - 1].file == file) { /* files are added in order */
    e->r[e->nr - 1].native |= (uint8_t)native;
    e->r[e->nr - 1].ps |= (uint8_t)ps;
    return 0;
  }
  GROW(e->r, e->nr, e->cr);
  e->r[e->nr].file = file;
  e->r[e->nr].native = (uint8_t)native;
  e->r[e->nr].ps = (uint8_t)ps;
  e->nr++;
  L->f[file].refs++;
  return 0;
oom:
  return -1;
}

/* Every GUID a <provider> element of @s may give: a superset of what manifest_load finds. Every
 * tag the tokenizer returns starts at a '<' and its name is the run of name characters after it,
 * so each '<' whose name run ends in "provider" is parsed as a tag from there; a candidate that
 * the tokenizer does not reach from the document's start (inside a comment, …) loads nothing. */
static void prescan(struct dec_lazy *L, uint32_t file, const char *s, size_t n) {
  size_t i = 0;
  const char *lt;
  while (i < n && (lt = memchr(s + i, '<', n - i))) {
    size_t b = (size_t)(lt - s), e = b + 1;
    while (e < n && !(XC(s[e]) & XN)) e++;
    i = e;
    if (e - b - 1 < 8 || e >= n || memcmp(s + e - 8, "provider", 8)) continue;
    size_t pos = b;
    struct xtag t;
    if (!next_tag(s, n, &pos, &t) || t.name != s + e - 8 || t.nl != 8 || t.close || t.selfclose) continue;
    struct tval tv;
    const char *g = attr_t(&t, "guid", &tv);
    unsigned char pg[16];
    if (g && !etw_parse_guid(g, pg)) lazy_add(L, pg, file, 1, 0);
    tv_free(&tv);
  }
}

static void lazy_release(struct dec_lazy *L, struct lazy_guid *e) {
  for (uint32_t i = 0; i < e->nr; i++) {
    struct lazy_file *f = &L->f[e->r[i].file];
    if (f->refs && !--f->refs) {
      free(f->buf);
      f->buf = NULL;
      xdoc_free(&f->doc);
      f->tok = 0;
      mctx_free(&f->strs.m);
      memset(&f->strs, 0, sizeof f->strs);
    }
  }
  free(e->r);
  e->r = NULL;
  e->nr = e->cr = 0;
}

static int pscore_by(struct etw_decoder *d, long k);

int dec_lazy_load(struct etw_decoder *d, const unsigned char guid[16]) {
  struct dec_lazy *L = d->lazy;
  struct lazy_guid *e = lazy_find(L, guid);
  if (!e || e->done) return 0;
  e->done = 1; /* from here the registry answers for this GUID directly */
  unsigned char g[16];
  memcpy(g, guid, 16); /* e may move if the index grows (it does not after indexing) */
  int is_ps = !memcmp(g, PSCORE, 16), is_win = !memcmp(g, WINPS, 16);
  if (is_ps) {
    L->pscore_known = 1;
    L->pscore_first = dec_provider_get(d, g, 0) ? -1 : LONG_MAX;
  }
  for (uint32_t i = 0; i < e->nr; i++) {
    struct lazy_ref r = e->r[i];
    struct lazy_file *f = &L->f[r.file];
    if (r.native) manifest_load_doc(d, lazy_doc(f), &f->strs, NULL, g);
    if (is_ps && L->pscore_first == LONG_MAX && dec_provider_get(d, g, 0)) L->pscore_first = r.file;
    if (is_win && r.ps && !dec_provider_get(d, WINPS, 0) && pscore_by(d, r.file)) {
      manifest_load_doc(d, lazy_doc(f), &f->strs, WINPS, NULL);
      struct dec_provider *wp = dec_provider_get(d, WINPS, 0);
      if (wp) wp->name = etw_intern("Microsoft-Windows-PowerShell");
    }
  }
  lazy_release(L, e);
  if (!memcmp(g, CLR_RT, 16)) dec_builtin_supplements(d);
  return 1;
}

/* Did PSCORE exist after file @k's turn of the full scan? */
static int pscore_by(struct etw_decoder *d, long k) {
  struct dec_lazy *L = d->lazy;
  if (!L->pscore_known) dec_provider_get(d, PSCORE, 0); /* loads it, which sets pscore_first */
  return L->pscore_known && L->pscore_first <= k;
}

void dec_lazy_free(struct etw_decoder *d) {
  struct dec_lazy *L = d->lazy;
  if (!L) return;
  for (uint32_t i = 0; i < L->nf; i++) {
    free(L->f[i].buf);
    xdoc_free(&L->f[i].doc);
    mctx_free(&L->f[i].strs.m);
  }
  for (uint32_t i = 0; i < L->ng; i++) free(L->g[i].r);
  free(L->f);
  free(L->g);
  free(L->h);
  free(L);
  d->lazy = NULL;
}

void dec_manifest_index_dir(struct etw_decoder *d, const char *dir) {
  int n = 0;
  char **list = NULL;
  scan(dir, 0, &list, &n);
  if (list) qsort(list, (size_t)n, sizeof *list, cmp_str);
  struct dec_lazy *L = calloc(1, sizeof *L);
  if (L) L->f = calloc(n ? (size_t)n : 1, sizeof *L->f);
  if (!L || !L->f) { /* no memory for the index: load everything now */
    if (L) free(L);
    for (int i = 0; i < n; i++) free(list[i]);
    free(list);
    dec_manifest_scan_dir(d, dir);
    return;
  }
  for (int i = 0; i < n; i++) {
    L->f[i].buf = read_manifest(list[i], &L->f[i].n);
    if (L->f[i].buf) {
      prescan(L, (uint32_t)i, L->f[i].buf, L->f[i].n);
      if (strstr(list[i], PS_PATH)) lazy_add(L, WINPS, (uint32_t)i, 0, 1);
    }
    free(list[i]);
  }
  free(list);
  L->nf = (uint32_t)n;
  for (uint32_t i = 0; i < L->nf; i++)
    if (!L->f[i].refs) {
      free(L->f[i].buf);
      L->f[i].buf = NULL;
    }
  /* what exists now (d->lazy is not set yet: no loading) is loaded at once, as the scan would */
  unsigned char *now = calloc(L->ng ? L->ng : 1, 1);
  for (uint32_t i = 0; now && i < L->ng; i++) now[i] = dec_provider_get(d, L->g[i].guid, 0) != NULL;
  if (!lazy_find(L, PSCORE)) {
    L->pscore_known = 1;
    L->pscore_first = dec_provider_get(d, PSCORE, 0) ? -1 : LONG_MAX;
  }
  d->lazy = L;
  for (uint32_t i = 0; i < L->ng; i++)
    if (!now || now[i]) dec_lazy_load(d, L->g[i].guid);
  free(now);
  if (!lazy_find(L, CLR_RT)) dec_builtin_supplements(d);
}

/* ---- EventSource ManifestData (0xFFFE) */
void dec_eventsource_chunk(struct etw_decoder *d, const struct etw_rec *r) {
  if (r->user_len < 8) return;
  const unsigned char *p = r->user_data;
  if (p[0] != 1 || p[3] != 0x5B) return;
  static const unsigned char CLR[16] = {0x23, 0x0d, 0x3c, 0xe1, 0xbc, 0xcc, 0x12, 0x4e,
                                        0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4};
  if (!memcmp(r->provider_id, CLR, 16)) return;
  struct dec_provider *pr = dec_provider_get(d, r->provider_id, 1);
  if (!pr) return;
  uint16_t total = d_rd16(p + 4), chunk = d_rd16(p + 6);
  if (chunk == 0) {
    pr->es_len = 0;
    pr->es_next_chunk = 0;
  }
  if (chunk != pr->es_next_chunk || total == 0 || chunk >= total) return;
  size_t add = r->user_len - 8u;
  if (pr->es_len + add > DEC_MAX_MANIFEST) return;
  unsigned char *nb = realloc(pr->es_buf, pr->es_len + add + 1);
  if (!nb) return;
  pr->es_buf = nb;
  memcpy(nb + pr->es_len, p + 8, add);
  pr->es_len += add;
  pr->es_next_chunk++;
  if (pr->es_next_chunk == total) {
    /* EventSources send their manifest again at every session start and rundown: the same
     * bytes loaded again would add nothing (an event id/version already present keeps the
     * first schema of its quality), so a repeat of the last one is not parsed */
    if (pr->es_last && pr->es_last_len == pr->es_len && !memcmp(pr->es_last, pr->es_buf, pr->es_len)) {
      free(pr->es_buf);
    } else {
      dec_manifest_load(d, (const char *)pr->es_buf, pr->es_len, r->provider_id);
      free(pr->es_last);
      pr->es_last = pr->es_buf; /* kept for the comparison */
      pr->es_last_len = pr->es_len;
    }
    pr->source = "eventsource";
    pr->es_buf = NULL;
    pr->es_len = 0;
    pr->es_next_chunk = 0;
  }
}

#else /* DEC_MAN_RUNNER */
/* The plan of @e when it has one (and the writer is far from its maximum), else the walker. The
 * plan gives up with `goto bail`: the output is cut back and the walker renders the event. */
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
 * the op's slot (PL_FIXK: a count or length may refer to it) or not (PL_FIXN), its key, PUT's text;
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
#define PL_FIXN(T, RD, SZ, PUT)                                                                    \
  {                                                                                                \
    T x_ = RD;                                                                                     \
    q += SZ;                                                                                       \
    o = key_put(o, op);                                                                            \
    o = PUT(o, x_);                                                                                \
    PL_NEXT;                                                                                       \
  }
#define PL_PUTI64(o, x) fx_put_i64(o, (int64_t)(x))
/* A map op's value read by RD from q, q advanced by SZ, kept in the op's slot (PL_MAPK) or not. */
#define PL_MAPK(RD, SZ)                                                                            \
  {                                                                                                \
    uint64_t x_ = RD;                                                                              \
    q += SZ;                                                                                       \
    sv[op->slot] = x_;                                                                             \
    PL_MAP(x_);                                                                                    \
  }
#define PL_MAPN(RD, SZ)                                                                            \
  {                                                                                                \
    uint64_t x_ = RD;                                                                              \
    q += SZ;                                                                                       \
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
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push /* (srem) */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
PL_FNATTR PL_STATIC struct dec_eres PL_FN(struct dec_ecall *ec) {
  /* (the arguments read from @ec where they are used: gcc keeps no copies of them for the rare
   * paths, which it did of six register arguments) */
#define d (ec->d)
#define w (ec->w)
#define e (ec->e)
#define p (ec->p)
#define n (ec->n)
#define ptr_size (ec->ptr_size)
#define why (&ec->why)
#define mark (ec->mark)
#if defined(__GNUC__)
  static const void *const PL_L[] = {
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
  if (__builtin_expect(op != NULL, 1)) goto start; /* handed over (dec_ecall: tested by the caller) */
  int runs = e->runs;
  if (__builtin_expect(runs <= 1, 0)) {
#if defined(__GNUC__)
    if (e == &pl_label_ev) { /* plan_labels: each op's code address in this variant (p: the plan) */
      struct plan *m = (struct plan *)(uintptr_t)p;
      static const void *const PL_N[] = {[OP_U8] = &&n_OP_U8,   [OP_U16] = &&n_OP_U16, [OP_U32] = &&n_OP_U32,
                                         [OP_U64] = &&n_OP_U64, [OP_I16] = &&n_OP_I16, [OP_I32] = &&n_OP_I32,
                                         [OP_I64] = &&n_OP_I64, [OP_X8] = &&n_OP_X8,   [OP_X16] = &&n_OP_X16,
                                         [OP_X32] = &&n_OP_X32, [OP_X64] = &&n_OP_X64, [OP_M8] = &&n_OP_M8,
                                         [OP_M16] = &&n_OP_M16, [OP_M32] = &&n_OP_M32, [OP_M64] = &&n_OP_M64};
      for (uint32_t k = 0; k < 2 * m->off4; k++) {
        struct pop *x = &m->ops[k];
        x->lab = !x->slot && x->op >= OP_U8 && x->op <= OP_M64 ? PL_N[x->op] : PL_L[x->op];
      }
      return dec_eres_rc(0);
    }
#endif
    if (!runs) {
      compute_runs((struct dec_event *)e);
      runs = e->runs;
    }
    if (runs <= 1) return dec_eres_rc(walk_all(d, w, e, p, n, ptr_size, why));
  }
  if (__builtin_expect(((unsigned)ptr_size - 4u) & ~4u, 0)) /* not 4 nor 8 (w->err: 0, dec_ecall) */
    return dec_eres_rc(walk_all(d, w, e, p, n, ptr_size, why));
  const struct plan *pl = (const struct plan *)(const void *)(e->f[0].key + runs);
  /* the writer's maximum must be at least slack + (n + 1) × perbyte away (no overflow: n < 2^32,
   * perbyte < 2^26, slack < 2^32: no test of n needed); that much room in the buffer already
   * (the usual case) is enough for that and for the reservation below (8 n + room0 ≤ it) */
  uint64_t far = ((uint64_t)n + 1) * pl->perbyte + pl->slack;
  if (__builtin_expect(w->cap - mark <= far, 0)) {
    if (far > w->max - mark) return dec_eres_rc(walk_all(d, w, e, p, n, ptr_size, why)); /* near the maximum */
    if (etw_jw_grow(w, (size_t)far)) goto bail;
  }
  op = (const struct pop *)(const void *)((const char *)pl->ops + pl->opoff[(unsigned)ptr_size >> 3]);
  if (__builtin_expect(n < pl->gb0[(unsigned)ptr_size >> 3], 0)) op--; /* the payload ends in the first run: its OP_CHK */
start:;
  const unsigned char *q = p, *pe = p + n;
  uint64_t sv[PLAN_SLOTS];
  uint64_t v;
  long cnt, srem; /* (srem: set by OP_SARR before its OP_SEND) */
  char *o = w->buf + mark; /* room: n × PL_OBYTE + room0 (see plan_build) ≤ far */
  PL_START {
#if !defined(__GNUC__)
    PL_CASE(OP_END) goto l_end; /* (threaded: OP_END's code address is l_end's) */
#endif
    PL_CASE(OP_CHK) /* a fixed-size run: all of it in the payload, or nothing left (q ≤ pe) */
    if (__builtin_expect((size_t)(pe - q) < op->gb, 0)) {
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
#if defined(__GNUC__)
    /* the same for values no count or length refers to (not kept) */
  n_OP_U8: PL_FIXN(uint32_t, q[0], 1, fx_put_u32)
  n_OP_U16: PL_FIXN(uint32_t, d_rd16(q), 2, fx_put_u32)
  n_OP_U32: PL_FIXN(uint32_t, d_rd32(q), 4, fx_put_u32)
  n_OP_U64: PL_FIXN(uint64_t, pl_rd64(q), 8, fx_put_u64)
  n_OP_I16: PL_FIXN(uint64_t, (uint64_t)(int64_t)(int16_t)d_rd16(q), 2, PL_PUTI64)
  n_OP_I32: PL_FIXN(uint64_t, (uint64_t)(int64_t)(int32_t)d_rd32(q), 4, PL_PUTI64)
  n_OP_I64: PL_FIXN(uint64_t, pl_rd64(q), 8, PL_PUTI64)
  n_OP_X8: PL_FIXN(uint64_t, q[0], 1, fx_hex_tail)
  n_OP_X16: PL_FIXN(uint64_t, d_rd16(q), 2, fx_hex_tail)
  n_OP_X32: PL_FIXN(uint64_t, d_rd32(q), 4, fx_hex_tail)
  n_OP_X64: PL_FIXN(uint64_t, pl_rd64(q), 8, fx_hex_tail)
  n_OP_M8: PL_MAPN(q[0], 1)
  n_OP_M16: PL_MAPN(d_rd16(q), 2)
  n_OP_M32: PL_MAPN(d_rd32(q), 4)
  n_OP_M64: PL_MAPN(pl_rd64(q), 8)
#endif
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
    w->len = (size_t)(o - w->buf);
    size_t at = w->len;
    uint64_t iv;
    if (dec_value(w, f->in, f->out, q - wd, (size_t)(pe - q) + wd, -1, ptr_size, DV_MANIFEST, &iv) < 0) goto bail;
    dec_map_render(w, f->map, at, v);
    if (w->err) goto bail;
    if (w->len - at <= PMC_MAX) {
      c->v = v;
      c->len = (uint32_t)(w->len - at);
      memcpy(c->t, w->buf + at, c->len);
    }
    if (etw_jw_reserve(w, (size_t)(pe - q) * PL_OBYTE + op->room)) goto bail;
    o = w->buf + w->len;
    PL_NEXT;
  }
    PL_CASE(OP_S16) {
      if (q >= pe) goto done;
#if defined(__SSE2__)
      PLK_STR_BASE;
#endif
      o = key_put(o, op);
      size_t avail, units, got = 0; /* room: reserved at the start */
#if defined(__SSE2__)
      avail = (size_t)(pe - q);
      units = avail / 2;
      /* plain ASCII 16 units at a time here (as jw.c's converter does), the rest there */
      while (units - got >= 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(q + 2 * got));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(q + 2 * got + 16));
        __m128i x = _mm_packus_epi16(a, b);
        __m128i ok = _mm_cmplt_epi8(_mm_add_epi8(x, PLK(PLK_60)), PLK(PLK_DF));
        __m128i qb = _mm_or_si128(_mm_cmpeq_epi8(x, PLK(PLK_QT)), _mm_cmpeq_epi8(x, PLK(PLK_BS)));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_andnot_si128(qb, ok));
        _mm_storeu_si128((__m128i *)(void *)o, x);
        if (m == 0xFFFFu) {
          o += 16;
          got += 16;
          continue;
        }
        unsigned good = (unsigned)__builtin_ctz(~m);
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
      if (units - got < 16 && got < units && (size_t)(q - p) + 2 * units >= 32) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(q + 2 * units - 32));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(q + 2 * units - 16));
        __m128i x = _mm_packus_epi16(a, b);
        __m128i ok = _mm_cmplt_epi8(_mm_add_epi8(x, PLK(PLK_60)), PLK(PLK_DF));
        __m128i qb = _mm_or_si128(_mm_cmpeq_epi8(x, PLK(PLK_QT)), _mm_cmpeq_epi8(x, PLK(PLK_BS)));
        unsigned j = (unsigned)(got + 16 - units); /* this unit's place in the block, 1..15 */
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_andnot_si128(qb, ok)) >> j;
        unsigned char t[32];
        _mm_storeu_si128((__m128i *)(void *)t, x);
        _mm_storeu_si128((__m128i *)(void *)(t + 16), x);
        memcpy(o, t + j, 16);
        unsigned good = (unsigned)__builtin_ctz(~m); /* ≤ units - got */
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
#if PL_HEX_ARR
#define PL_HEX_CALL(W) hex_arr##W(o, q, q + (W / 8) * cnt)
#define PL_AX_ARR(W)                                                                               \
  if (cnt) {                                                                                       \
    memcpy(o, FX_XSEP + 2, 4);                                                                     \
    o += 3;                                                                                        \
    o = PL_HEX_CALL(W);                                                                            \
    q += (W / 8) * cnt;                                                                            \
    o -= 3;                                                                                        \
  }
    PL_CASE(OP_AX32) {
      PL_ARRAY(4);
      PL_AX_ARR(32);
      PL_ARRAY_END;
    }
    PL_CASE(OP_AX64) {
      PL_ARRAY(8);
      PL_AX_ARR(64);
      PL_ARRAY_END;
    }
#undef PL_AX_ARR
#undef PL_HEX_CALL
#else
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
#endif
#undef PL_ARRAY
#undef PL_ARRAY_END
#undef PL_AX_LOOP
    PL_CASE(OP_SARR) { /* '[', then the member ops and OP_SEND once per element */
      if (q >= pe) goto done;
      cnt = op->cslot ? ref_count(sv[op->cslot]) : (long)op->f->count;
      if (cnt < 0 || cnt > DEC_MAX_ARRAY || (uint64_t)cnt * op->eb > (uint64_t)(pe - q)) goto bail;
      o = key_put(o, op);
      uint64_t need = (uint64_t)cnt * op->eout + 2 + op->room + (uint64_t)(pe - q) * PL_OBYTE;
      if (__builtin_expect((uint64_t)(w->buf + w->cap - o) <= need, 0)) {
        w->len = (size_t)(o - w->buf);
        if (need > w->max || etw_jw_grow(w, (size_t)need)) goto bail;
        o = w->buf + w->len;
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
      long len = op->lslot ? ref_len(sv[op->lslot], n) : f->len;
      if (len > (long)n) goto bail;
      o = key_put(o, op);
      size_t avail = (size_t)(pe - q);
      w->len = (size_t)(o - w->buf);
      size_t at = w->len;
      long used = dec_value(w, f->in, f->out, q, avail, len, ptr_size, DV_MANIFEST, &v);
      if (used < 0) goto bail;
      const struct dec_map *mp = f->map;
      if (!mp && f->map_name && e->owner) mp = dec_trace_map(e->owner, f->map_name);
      if (mp) dec_map_render(w, mp, at, v);
      if (w->err) goto bail;
      sv[op->slot] = v;
      q += used;
      if (etw_jw_reserve(w, (size_t)(pe - q) * PL_OBYTE + op->room)) goto bail;
      o = w->buf + w->len;
      PL_NEXT;
    }
  }
l_end: /* the template's end: the payload's too, or a shorter template (the rest: "Unparsed") */
  if (__builtin_expect(q != pe, 0)) {
    w->len = (size_t)(o - w->buf);
    return dec_eres_rc((long)(q - p));
  }
done: /* (q = pe: every `goto done` has tested it) */
  return (struct dec_eres){o, (long)n}; /* (w->len: the caller's; w->err is 0 here) */
bail:
  __atomic_fetch_add(&plan_bails, 1, __ATOMIC_RELAXED);
  etw_jw_truncate(w, mark);
  return dec_eres_rc(walk_all(d, w, e, p, n, ptr_size, why));
}
#undef d
#undef w
#undef e
#undef p
#undef n
#undef ptr_size
#undef why
#undef mark
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef PL_XX
#undef PL_XX_TAIL
#undef PL_MAP
#undef PL_MAP_COPY
#undef key_put
#undef fx_hex_tail
#endif /* DEC_MAN_RUNNER */
