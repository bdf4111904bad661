/* dec_plan.c — the plan compiler: turns a schema whose fields are all at the top level (or
 * arrays of plain structs) into an op list (struct plan, dec_man.h) that dec_plan_run.c runs;
 * and the entries the decoder calls (dec_fields_write_d / _c), which choose the plan or the
 * walker. Plans are built and run on the decoder's thread.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dec_man.h"

_Atomic uint64_t dec_plan_bail_count;
uint64_t dec_plan_bails(void) { return atomic_load_explicit(&dec_plan_bail_count, memory_order_relaxed); }


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
    return 0; /* (arrays of characters among them: the walker's one string, dec_char_array) */
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

const uint8_t dec_op_bytes[] = {[OP_U8] = 1, [OP_U16] = 2, [OP_U32] = 4, [OP_U64] = 8, [OP_I16] = 2,
                                   [OP_I32] = 4, [OP_I64] = 8, [OP_X8] = 1, [OP_X16] = 2, [OP_X32] = 4,
                                   [OP_X64] = 8, [OP_M8] = 1, [OP_M16] = 2, [OP_M32] = 4, [OP_M64] = 8, [OP_AU8] = 1, [OP_AU16] = 2, [OP_AU32] = 4, [OP_AU64] = 8,
                                   [OP_AX8] = 1, [OP_AX16] = 2, [OP_AX32] = 4, [OP_AX64] = 8};
/* An OP_CHK's gb (≤ 8 bytes for each of ≤ DEC_MAX_FIELDS fields) and the struct-array op distances
 * (< a variant's op count, 2 * (3 * nf + 1)) are stored through uint16_t by plan_build. */
_Static_assert(DEC_MAX_FIELDS * 8 <= UINT16_MAX && 2 * (3 * DEC_MAX_FIELDS + 1) <= UINT16_MAX,
               "a plan's gb fits 16 bits");



/* What plan_build works with (one schema, nf fields). */
struct pbuild {
  struct dec_event *e;
  uint32_t nf;
  uint8_t *slot;  /* sv[] slot of a field a count or length refers to (0 = none) */
  uint8_t *inner; /* 1 = a struct member, 2 = its first member */
  char **kt;      /* key texts */
  size_t *kl;     /* their lengths */
  const char *kpos[DEC_MAX_FIELDS]; /* the key texts in the plan's block */
  struct pmc *mc;
};

/* Whether @e can have a plan: arrays of structs only of plain fixed-size scalars (no nesting,
 * maps, padding); every field an op; references pointing back at integer scalars outside
 * structs (their slots assigned). Counts the map ops in *@nmc. */
static int plan_check(struct pbuild *b, unsigned *nmc) {
  struct dec_event *e = b->e;
  uint32_t nf = b->nf;
  uint8_t *slot = b->slot, *inner = b->inner;
  int ok = 1;
  unsigned nslots = 1;
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
    if (OP_IS_MAP(op)) (*nmc)++;
  }
  return ok;
}

/* The key texts: `,"name":` (no comma for the first) and the value's opening text; their total
 * size in the plan's block in *@ktotal. */
static int plan_keys(struct pbuild *b, size_t *ktotal_out) {
  struct dec_event *e = b->e;
  uint32_t nf = b->nf;
  uint8_t *inner = b->inner;
  char **kt = b->kt;
  size_t *kl = b->kl;
  int ok = 1;
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
  *ktotal_out = ktotal;
  return ok;
}

/* The op list of plan @pl for pointer size 8 (@var 0) or 4 (1): an OP_CHK before each run of
 * fixed-size ops, the ops (OP_KEY before a long key; a struct array's members between its
 * OP_SARR and OP_SEND), pairs merged (OP_XX*, OP_AU32P), and each op's room. */
static void plan_variant(struct pbuild *bd, struct plan *pl, int var) {
  const struct dec_event *e = bd->e;
  uint32_t nf = bd->nf;
  const uint8_t *slot = bd->slot, *inner = bd->inner;
  const size_t *kl = bd->kl;
  const char *const *kpos = bd->kpos;
  struct pmc *mc = bd->mc;
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

/* Build @e's plan (fields' keys built, e->nf in 1..DEC_MAX_FIELDS); 0 = attached. */
ETW_NOINLINE static int plan_build(struct dec_event *e) {
  uint32_t nf = e->nf;
  if (!nf || nf > DEC_MAX_FIELDS) return -1;
  dec_plan_tables();
  struct pbuild b = {.e = e, .nf = nf};
  b.slot = calloc(nf, 1);
  b.kt = calloc(nf, sizeof *b.kt);
  b.kl = calloc(nf, sizeof *b.kl);
  b.inner = calloc(nf, 1);
  unsigned nmc = 0;
  size_t ktotal = 0;
  int ok = b.slot && b.kt && b.kl && b.inner && plan_check(&b, &nmc) && plan_keys(&b, &ktotal);
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
      b.mc = (struct pmc *)(void *)(blk + ka + psz);
      char *kp = blk + ka + psz + msz;
      for (uint32_t i = 0; i < nf; i++) {
        memcpy(kp, b.kt[i], b.kl[i]);
        b.kpos[i] = kp;
        kp += ((b.kl[i] + 31) & ~(size_t)31) + 32;
      }
      for (size_t m = 0; m < (size_t)nmc * PMC_N; m++) {
        b.mc[m].len = UINT32_MAX;
        b.mc[m].v = m % PMC_N ? 0 : 1; /* (pmc_hash: 0 → 0, 1 → 2) */
      }
      pl->off4 = 3 * nf + 1;
      pl->opoff[0] = pl->off4 * (uint32_t)sizeof(struct pop);
      pl->opoff[1] = 0;
      pl->perbyte = 32;
      pl->slack = 8192 + (size_t)nf * 1300;
      for (uint32_t i = 0; i < nf; i++) pl->slack += b.kl[i];
      for (int var = 0; var < 2; var++) plan_variant(&b, pl, var);
      free(e->f[0].key);
      e->f[0].key = blk;
      rc = 0;
    }
  }
  if (b.kt)
    for (uint32_t i = 0; i < nf; i++) free(b.kt[i]);
  free(b.kt);
  free(b.kl);
  free(b.slot);
  free(b.inner);
  return rc;
}





/* Runs of fixed-size scalar fields (plain/hex/signed integers, pointers) with short keys:
 * rendered one after the other after one room check when the payload holds them all. */
ETW_NOINLINE void dec_compute_runs(struct dec_event *e) {
  uint16_t n = 0, b4 = 0, b8 = 0;
  for (uint32_t i = e->nf; i-- > 0;) {
    struct dec_field *f = &e->f[i];
    if (!f->kind) f->kind = classify(f);
    int ok = f->kind == FK_UINT || f->kind == FK_HEX || f->kind == FK_INT || f->kind == FK_PTR;
    if (ok && !f->key) dec_build_key(f);
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
  if (e->nf && !e->f[0].key) dec_build_key(&e->f[0]);
  for (uint32_t i = 0; i < e->nf && i < DEC_MAX_FIELDS; i++)
    if (!e->f[i].key) dec_build_key(&e->f[i]);
  if (plan_build(e) == 0) {
    size_t ka = plan_key_area(e->f[0].key_len);
    e->runs = (int)ka; /* > 1: the plan's offset */
  }
}

/* reference mode (etw_decoder_set_mode; without a decoder, etw_decode_default) */
static inline int reference(const struct etw_decoder *d) {
  return d ? d->reference : etw_decode_default() == ETW_DECODE_REFERENCE;
}

/* the walker (reference mode, and the cases the runner would hand to it anyway) */
ETW_NOINLINE static long plans_off(struct etw_decoder *d, struct etw_jw *w, const struct dec_event *e,
                                                const unsigned char *p, size_t n, int ptr_size, const char **why) {
  if (!e->runs) dec_compute_runs((struct dec_event *)e);
  return dec_walk_all(d, w, e, p, n, ptr_size, why);
}

long dec_fields_write_d(struct etw_decoder *d, struct etw_jw *w, const struct dec_event *e,
                        const unsigned char *p, size_t n, int ptr_size, const char **why) {
  if (ETW_EXPECT(w->err || n >= ((size_t)1 << 24) || reference(d), 0)) /* (the runner's walker cases) */
    return plans_off(d, w, e, p, n, ptr_size, why);
  struct dec_ecall c = {.d = d, .w = w, .e = e, .p = p, .mark = w->len, .n = (uint32_t)n, .why = *why, .ptr_size = ptr_size};
  struct dec_eres x = dec_plan_run(&c);
  if (x.o) w->len = (size_t)(x.o - w->buf);
  *why = c.why;
  return x.rc;
}

uint32_t dec_plan_hand(const struct dec_event *e, struct dec_ehand *h) {
  memset(h, 0, sizeof *h);
  if (!e) return 0;
  if (!e->runs) dec_compute_runs((struct dec_event *)e);
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
  if (ETW_EXPECT(!c->w->err && !reference(c->d), 1)) return dec_plan_run(c);
  return dec_eres_rc(plans_off(c->d, c->w, c->e, c->p, c->n, c->ptr_size, &c->why));
}

