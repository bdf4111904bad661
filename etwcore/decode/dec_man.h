/* dec_man.h — private to the manifest template's renderers: the walker (dec_walk.c), the plan
 * compiler (dec_plan.c) and the plan runner (dec_plan_run.c). Not a public API.
 *
 * A decoder owns its schemas (struct dec_event) and everything cached in them (keys, plans, map
 * texts); all of it is used by the decoder's thread only.
 */
#ifndef ETWCORE_DEC_MAN_H
#define ETWCORE_DEC_MAN_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "dec_fast.h"
#include "decode.h"

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
/* Build f->key (first use; the decoder owns its schemas). dec_walk.c */
void dec_build_key(struct dec_field *f);


/* A count or length taken from another field's value (any width, untrusted): values past the
 * limits map to one past them, so the range checks reject them (a plain cast to long made values
 * of 2^63 and more, and on Windows (32-bit long) 2^31 and more, negative — "no length" — or cut
 * them to their low bits). The walker and the plans use the same rule. */
static inline long ref_count(uint64_t v) { return v > DEC_MAX_ARRAY ? (long)DEC_MAX_ARRAY + 1 : (long)v; }
static inline long ref_len(uint64_t v, size_t n) { return v > (uint64_t)n ? (long)n + 1 : (long)v; }

/* Field classes with a fast path in walk_fields (cached in dec_field.kind). */
enum { FK_GENERAL = 1, FK_UINT, FK_HEX, FK_INT, FK_PTR, FK_STR16 };

static inline uint8_t classify(const struct dec_field *f) {
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

/* Copy an op's key text (klen bytes; 32-byte copies, the source is padded). */
static inline char *key_put(char *o, const struct pop *op) { /* klen ≤ 32 (else an OP_KEY before) */
  memcpy(o, op->key, 32);
  return o + op->klen;
}


static inline unsigned pmc_hash(uint64_t v) { return (unsigned)((uint32_t)(v ^ (v >> 32)) * 2654435761u >> 30); }


/* the walker over every field (dec_walk.c): the reference the plans are compared with */
long dec_walk_all(struct etw_decoder *d, struct etw_jw *w, const struct dec_event *e, const unsigned char *p,
                  size_t n, int ptr_size, const char **why);
/* field runs and the plan of @e, on first use (dec_plan.c) */
void dec_compute_runs(struct dec_event *e);
/* fill the runner's tables once, before any plan runs (dec_plan_build calls it) */
void dec_plan_tables(void);
/* each fixed-size op's payload bytes (dec_plan.c) */
extern const uint8_t dec_op_bytes[];
#define OP_BYTES dec_op_bytes
/* plans given up (tests; decoders in other threads count too) */
extern _Atomic uint64_t dec_plan_bail_count;

#endif
