/* dec_kplan.c — the plans of the decoder's fast path: a kernel plan per HookId/version (a
 * template and a compiled op list for the MOF layout, dec_mof.c), a manifest plan per provider
 * GUID + descriptor + keywords (a template and the manifest's compiled plan, dec_plan.c), their
 * memos of the last payload's text, and the writers that run them. A plan belongs to its
 * decoder's thread; a decoder in reference mode never uses one.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dec_tpl.h"
#include "decode.h"


/* Every call in a function's body inlined where the callee's body is visible (gcc): the writers
 * whose value formatting (dec_put_u32 …) gcc may otherwise leave out of line as the file grows (a
 * call costs its arguments and spills, and gave the Sample writer a frame). */
#if ETW_GNUC && !defined(__clang__)
#define DEC_FLATTEN __attribute__((flatten))
#else
#define DEC_FLATTEN
#endif


static const char EVD[] = ",\"EventData\":{";

/* (tests) put_u64t's and put_u32t's texts, NUL-terminated (@p: 32 bytes of room). */
char *dec_plan_u64(char *p, uint64_t v) {
  dec_tpl_tables();
  p = put_u64t(p, v);
  *p = 0;
  return p;
}
char *dec_plan_u32(char *p, uint32_t v) {
  dec_tpl_tables();
  p = put_u32t(p, v);
  *p = 0;
  return p;
}



/* ---- kernel plans */
typedef int (*kplan_fn)(struct etw_decoder *, const struct etw_rec *, struct etw_jw *, struct etw_evref *,
                        struct dec_kplan *);
static int kplan_gen_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
                       struct dec_kplan *pl);
static int kplan_sample_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
                          struct dec_kplan *pl);
static int kplan_skey_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
                        struct dec_kplan *pl);

/* The memo of a Sample-shaped plan (X64 U32 U16 U16, keys ≤ 16 bytes): the text of a payload of
 * zeros (what kplan_fix4 writes after the head for it). */
static void memo_init(struct dec_kplan *pl) {
  char b[128], *p = dec_put_hex(b, 0);
  for (int i = 1; i < 4; i++) {
    memcpy(p, pl->k.ops[i].key, pl->k.ops[i].klen);
    p = dec_put_u32(p + pl->k.ops[i].klen, 0);
  }
  memcpy(p, "}}", 2);
  p += 2;
  memset(pl->memo, 0, sizeof pl->memo);
  memcpy(pl->memo, b, (size_t)(p - b)); /* (≤ 4 + 3 × (16 + 1) + 2) */
  pl->memo_len = (uint32_t)(p - b);
  pl->memo_q[0] = pl->memo_q[1] = 0;
}

/* The writer for @pl's ops and template copies. */
static kplan_fn kplan_run(struct dec_kplan *pl) {
  const struct dec_kop *o = pl->k.ops;
  int shape = 0; /* 1: X64 U32 U16 U16, 2: U64 U32 U32 X64 (keys ≤ 16 bytes, 8-byte pointers, no tail) */
  if (pl->k.nops == 4 && pl->k.ps == 8 && !pl->k.tail && o[1].klen <= 16 && o[2].klen <= 16 && o[3].klen <= 16) {
    int x0 = o[0].ty == DEC_KOP_X64, x3 = o[3].ty == DEC_KOP_X64;
    if (x0 && o[1].ty == DEC_KOP_U32 && o[2].ty == DEC_KOP_U16 && o[3].ty == DEC_KOP_U16) shape = 1;
    if (o[0].ty == DEC_KOP_U64 && o[1].ty == DEC_KOP_U32 && o[2].ty == DEC_KOP_U32 && x3) shape = 2;
  }
  if (shape == 1) memo_init(pl);
  return shape == 1 ? kplan_sample_s : shape == 2 ? kplan_skey_s : kplan_gen_s;
}

/* The layout ops of record @r into @k and its head into template @t; the bytes a plan with them
 * reserves: the template (≤ tlen + 47 + 5 + 2 + 64, rounded up by 31), then per op a key copy
 * (32 bytes) and a value (≤ 40 bytes: a GUID), `}}` (≥ what write_fixed reserves). */
static uint32_t kops_build(struct dec_kops *k, struct dec_tpl *t, const struct etw_rec *r) {
  uint32_t need = 0;
  uint8_t hlen = 0;
  char head[64];
  unsigned n = dec_mof_plan_ops(r, r->ptr_size, head, &hlen, k->ops, DEC_KOPS, &need);
  k->ps = n ? r->ptr_size : 0xFF; /* (no ops: never a record's pointer size, not even 0) */
  k->nops = (uint8_t)n;
  k->need = need;
  k->tail = n && k->ops[n - 1].ty >= DEC_KOP_STR16;
  k->t = t;
  memset(&k->ops[n], 0, sizeof k->ops[n]);
  k->ops[n].ty = DEC_KOP_END;
  if (n) dec_tpl_head(t, head, hlen);
  else dec_tpl_head(t, EVD, sizeof EVD - 1);
  k->hlen = t->hlen;
  return (uint32_t)t->tlen + 224 + DEC_PNAME_MAX + k->nops * 72u; /* (the process name: ≤ DEC_PNAME_MAX) */
}

static void kplan_ops(struct dec_kplan *pl, const struct etw_rec *r) {
  pl->room = kops_build(&pl->k, &pl->t, r);
  pl->run = kplan_run(pl);
}

void dec_kplan_update(struct etw_decoder *d, uint32_t slot, uint64_t key, const struct etw_rec *r,
                      const struct etw_sys *s, uint64_t d8) {
  if (!d->sysc || d->reference || s->activity_id || s->related_activity_id) return;
  struct dec_kplan *pl = d->kplan[slot] == &dec_kplan_none ? NULL : d->kplan[slot];
  uint32_t hv = ((uint32_t)r->hook_id << 8 | r->desc.version) + 1;
  if (pl && pl->hv == hv && pl->d8 == d8 && pl->kw == s->keywords && pl->prov == s->provider &&
      pl->name == s->event_name && pl->task == s->task_name && pl->opcode == s->opcode_name) {
    if (pl->key != key || pl->k.ps != r->ptr_size) { /* a new generation, or the other pointer size */
      kplan_ops(pl, r);
      pl->key = key;
    }
    return;
  }
  if (!pl) {
    if (!(pl = calloc(1, sizeof *pl))) return; /* (the slot keeps dec_kplan_none) */
    d->kplan[slot] = pl;
  }
  pl->key = 0;
  if (pl->builds >= DEC_KPLAN_BUILDS) return;
  pl->builds++;
  if (dec_tpl_build(d->sysc, &pl->t, s, r, EVD, sizeof EVD - 1)) return;
  kplan_ops(pl, r);
  pl->hv = hv;
  pl->d8 = d8;
  pl->kw = s->keywords;
  pl->prov = s->provider;
  pl->name = s->event_name;
  pl->task = s->task_name;
  pl->opcode = s->opcode_name;
  pl->k.prov = pl->prov;
  pl->k.name = pl->name;
  dec_tpl_names(&pl->t, pl->prov, pl->name);
  pl->key = key;
}

static int eplan_event_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
                         struct dec_eplan *pl, uint64_t d8);
static int eplan_cls_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
                       struct dec_eplan *pl, uint64_t d8);

/* A plan's memo emptied (its schema @e may have changed) and allowed when @e has no maps. */
static void ememo_reset(struct dec_eplan *pl, const struct dec_event *e, int cls) {
  if (pl->memo) {
    pl->memo->valid = 0;
    pl->memo->tries = pl->memo->hits = 0;
    pl->memo->back = 512;
  }
  pl->memo_skip = cls || !e ? UINT64_MAX : 0;
  for (uint32_t i = 0; e && i < e->nf; i++)
    if (e->f[i].map || e->f[i].map_name) pl->memo_skip = UINT64_MAX;
  /* the EventData runners' hand-over for the schema (none for a classic record) */
  pl->hfar = dec_plan_hand(cls ? NULL : e, &pl->hand);
  pl->hroom = UINT32_MAX; /* (eplan_event sets it) */
}

void dec_eplan_update(struct etw_decoder *d, uint32_t slot, const struct etw_rec *r, const struct etw_sys *s,
                      uint64_t d8, struct dec_provider *p, struct dec_event *e, int cls) {
  if (!d->sysc || d->reference || s->activity_id || s->related_activity_id || !d->reg_gen) return;
  /* the way of set @slot (slots slot and slot + 1) whose text applies; else one to (re)build: an
   * empty or expired one, else the one built less recently */
  struct dec_eplan *pl = NULL;
  for (uint32_t k = slot; k < slot + 2 && !pl; k++) {
    struct dec_eplan *c = d->eplan[k];
    if (c && c->ok && !memcmp(c->guid, r->provider_id, 16) && c->d8 == d8 && c->kw == s->keywords &&
        c->kind == r->kind && c->cls == (cls != 0) && c->prov == s->provider && c->name == s->event_name &&
        c->task == s->task_name && c->opcode == s->opcode_name)
      pl = c;
  }
  if (pl) {
    /* the text still applies (a new registry generation, or the schema replaced): revalidate */
    pl->p = p;
    pl->e = e;
    pl->pname = p ? p->name : NULL;
    pl->pnamep = p ? (const char *const *)&p->name : &pl->pname;
    pl->gen = d->reg_gen;
    ememo_reset(pl, e, cls);
    return;
  }
  uint32_t k = slot;
  if (d->eplan[k] && d->eplan[k]->gen == d->reg_gen &&
      (!d->eplan[k + 1] || d->eplan[k + 1]->gen != d->reg_gen || d->eplan[k + 1]->seq < d->eplan[k]->seq))
    k++;
  if (!(pl = d->eplan[k]) && !(pl = d->eplan[k] = calloc(1, sizeof *pl))) return;
  pl->gen = 0;
  pl->ok = 0;
  pl->pnamep = &dec_eplan_dead; /* expired until built: the one-word test fails (a new plan too) */
  pl->seq = ++d->eplan_seq;
  ememo_reset(pl, e, cls);
  if (pl->builds >= DEC_KPLAN_BUILDS) return;
  pl->builds++;
  if (dec_tpl_build(d->sysc, &pl->t, s, r, EVD, sizeof EVD - 1)) return;
  pl->ok = 1;
  memcpy(pl->guid, r->provider_id, 16);
  pl->d8 = d8;
  pl->kw = s->keywords;
  pl->kind = r->kind;
  pl->kindw = r->kind;
  pl->cls = cls != 0;
  pl->p = p;
  pl->e = e;
  pl->pname = p ? p->name : NULL;
  pl->pnamep = p ? (const char *const *)&p->name : &pl->pname;
  pl->prov = s->provider;
  pl->name = s->event_name;
  pl->task = s->task_name;
  pl->opcode = s->opcode_name;
  pl->k.prov = pl->prov;
  pl->k.name = pl->name;
  dec_tpl_names(&pl->t, pl->prov, pl->name);
  pl->room = (uint32_t)pl->t.tlen + 192; /* ≤ tlen + 111 + 5 + 2 + 14, rounded up by 31 */
  if (pl->cls) pl->room = kops_build(&pl->k, &pl->t, r); /* the layout's ops and first key */
    pl->run = pl->cls ? eplan_cls_s : eplan_event_s;
  pl->gen = d->reg_gen;
}

/* dec_finish_fast for record @r written through a template (tpl_emit: the reference is written
 * already; dec_finish writes it again when the event is given up). */
TPL_INLINE int finish_t(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
                        const char *prov, const char *name, size_t mark, long rc, const char *why) {
  /* (rc -1 is SIZE_MAX as a size: never a payload length) */
  if (ETW_EXPECT((size_t)rc == r->user_len && !w->err, 1)) {
    etw_jw_raw(w, "}}", 2);
    d->decoded++; /* (the reference: tpl_emit's) */
    return 1;
  }
  return dec_finish(d, r, w, ref, prov, name, mark, rc, why);
}

/* The EventData of record @r by ops @k after the template's head (ending at @p; the System block
 * ends at @mark): every fixed-size op when the payload holds them, then the variable last one;
 * else (no ops for r's pointer size, a short payload) dec_mof_write. Returns as
 * etw_decoder_write. */
ETW_NOINLINE DEC_FLATTEN static int kops_run(struct etw_decoder *d, struct etw_jw *w, const struct etw_rec *r,
                                              struct etw_evref *ref, const struct dec_kops *kk, char *p) {
  /* (out of line, 6 arguments: its callers jump here; the names and head length from @kk, the
   * names read where they are used: not kept in the frame) */
  size_t mark = (size_t)(p - w->buf) - kk->hlen; /* the end of the System block */
  if (kk->ps != r->ptr_size || r->user_len < kk->need) { /* no ops (ps 0), or a short payload */
    const char *why = "unknown event";
    w->len = mark + sizeof EVD - 1;
    long rc = dec_mof_write(w, r, &why);
    return finish_t(d, r, w, ref, kk->prov, kk->name, mark, rc, why);
  }
  const unsigned char *q = r->user_data;
#if ETW_GNUC
  /* threaded: each op's code writes its value, then the next op's key (32 bytes copied, klen
   * kept) and jumps to the next op's code; the variable last op or DEC_KOP_END ends the run
   * (with its key written: taken back below when it is not there) */
  static const void *const L[] = {[DEC_KOP_U32] = &&op_u32, [DEC_KOP_I32] = &&op_i32, [DEC_KOP_X32] = &&op_x32,
                                  [DEC_KOP_U16] = &&op_u16, [DEC_KOP_U8] = &&op_u8,   [DEC_KOP_I8] = &&op_i8,
                                  [DEC_KOP_U64] = &&op_u64, [DEC_KOP_I64] = &&op_i64, [DEC_KOP_X64] = &&op_x64,
                                  [DEC_KOP_GUID] = &&op_guid, [DEC_KOP_PORT] = &&op_port,
                                  [DEC_KOP_IPV6] = &&op_ipv6,
                                  [DEC_KOP_STR16] = &&op_end,
                                  [DEC_KOP_STACK] = &&op_end, [DEC_KOP_ANSI] = &&op_end, [DEC_KOP_END] = &&op_end};
  const struct dec_kop *o = kk->ops;
#define KOP_NEXT                        \
  do {                                  \
    o++;                                \
    memcpy(p, o->key, sizeof o->key);   \
    p += o->klen;                       \
    goto *L[o->ty];                     \
  } while (0)
  goto *L[o->ty];
op_u32: p = put_u32t(p, d_rd32(q)); q += 4; KOP_NEXT;
op_i32: p = dec_put_i64(p, (int32_t)d_rd32(q)); q += 4; KOP_NEXT;
op_x32: p = dec_put_hex(p, d_rd32(q)); q += 4; KOP_NEXT;
op_u16: p = put_u32t(p, d_rd16(q)); q += 2; KOP_NEXT;
op_u8: p = put_u32t(p, q[0]); q += 1; KOP_NEXT;
op_i8: p = dec_put_i64(p, (int8_t)q[0]); q += 1; KOP_NEXT;
op_u64: p = put_u64t(p, d_rd64(q)); q += 8; KOP_NEXT;
op_i64: p = dec_put_i64(p, (int64_t)d_rd64(q)); q += 8; KOP_NEXT;
op_x64: p = dec_put_hex(p, d_rd64(q)); q += 8; KOP_NEXT;
op_guid: p = dec_put_guid(p, q); q += 16; KOP_NEXT;
op_port: p = put_u32t(p, (uint32_t)q[0] << 8 | q[1]); q += 2; KOP_NEXT;
op_ipv6: p = put_ipv6(p, q); q += 16; KOP_NEXT;
#undef KOP_NEXT
op_end:
  if (!(kk->tail && r->user_len > kk->need)) p -= o->klen; /* no variable last field: no key */
#else
  for (const struct dec_kop *o = kk->ops, *e = o + kk->nops - kk->tail;;) {
    switch (o->ty) {
    case DEC_KOP_U32: p = put_u32t(p, d_rd32(q)); q += 4; break;
    case DEC_KOP_I32: p = dec_put_i64(p, (int32_t)d_rd32(q)); q += 4; break;
    case DEC_KOP_X32: p = dec_put_hex(p, d_rd32(q)); q += 4; break;
    case DEC_KOP_U16: p = put_u32t(p, d_rd16(q)); q += 2; break;
    case DEC_KOP_U8: p = put_u32t(p, q[0]); q += 1; break;
    case DEC_KOP_I8: p = dec_put_i64(p, (int8_t)q[0]); q += 1; break;
    case DEC_KOP_U64: p = put_u64t(p, d_rd64(q)); q += 8; break;
    case DEC_KOP_I64: p = dec_put_i64(p, (int64_t)d_rd64(q)); q += 8; break;
    case DEC_KOP_GUID: p = dec_put_guid(p, q); q += 16; break;
    case DEC_KOP_PORT: p = put_u32t(p, (uint32_t)q[0] << 8 | q[1]); q += 2; break;
    case DEC_KOP_IPV6: p = put_ipv6(p, q); q += 16; break;
    default: p = dec_put_hex(p, d_rd64(q)); q += 8; break; /* DEC_KOP_X64 */
    }
    if (++o == e) break;
    memcpy(p, o->key, sizeof o->key);
    p += o->klen;
  }
  if (kk->tail && r->user_len > kk->need) { /* the variable last op's key */
    memcpy(p, kk->ops[kk->nops - 1].key, sizeof kk->ops[0].key);
    p += kk->ops[kk->nops - 1].klen;
  }
#endif
  if (kk->tail && r->user_len > kk->need) { /* the last field: the rest of the payload */
    const struct dec_kop *t = &kk->ops[kk->nops - 1];
    size_t avail = r->user_len - kk->need;
    long k;
    w->len = (size_t)(p - w->buf); /* (its key written) */
    if (t->ty == DEC_KOP_STR16) { /* as write_compiled's 'w' */
      size_t units = avail / 2, got = dec_str16(w, q, units);
      k = got < units ? (long)got * 2 + 2 : (long)avail;
    } else if (t->ty == DEC_KOP_ANSI) { /* as write_compiled's 'a' */
      const unsigned char *z = memchr(q, 0, avail);
      size_t sl = z ? (size_t)(z - q) : avail;
      etw_jw_str(w, (const char *)q, sl);
      k = z ? (long)sl + 1 : (long)avail;
    } else { /* as write_compiled's 'S' */
      unsigned ps = r->ptr_size;
      size_t m = avail / ps;
      k = (long)(m * ps);
      if (!etw_jw_reserve(w, m * 21 + 2)) {
        p = w->buf + w->len;
        *p++ = '[';
        if (m) { /* the first element, then a comma before each (no test per element) */
          const unsigned char *qe = q + m * ps;
          if (ps == 8) {
            p = put_stack64(p, q, qe);
          } else {
            p = dec_put_hex(p, d_rd32(q));
            for (q += 4; q < qe; q += 4) {
              *p++ = ',';
              p = dec_put_hex(p, d_rd32(q));
            }
          }
        }
        *p++ = ']';
        w->len = (size_t)(p - w->buf);
      }
    }
    return finish_t(d, r, w, ref, kk->prov, kk->name, mark, (long)kk->need + k, "unknown event");
  }
  if (r->user_len == kk->need) { /* every payload byte used: EventData and the event closed */
    *p++ = '}';
    *p++ = '}';
    w->len = (size_t)(p - w->buf);
    d->decoded++; /* (the reference: tpl_emit's) */
    return 1;
  }
  w->len = (size_t)(p - w->buf);
  return dec_finish(d, r, w, ref, kk->prov, kk->name, mark, (long)kk->need, "unknown event");
}

/* The descriptor's first 8 bytes of record @r (id, version, channel, level, opcode, task): the
 * @d8 etw_decoder_write gives the manifest and classic writers. */
static inline uint64_t rec_d8(const struct etw_rec *r) {
  uint64_t d8;
  memcpy(&d8, &r->desc, 8);
  return d8;
}
/* A writer's out-of-line case (d8 from the record: one register less to keep in the fast one). */
typedef int (*eplan_slow_fn)(struct etw_decoder *, const struct etw_rec *, struct etw_jw *, struct etw_evref *,
                             struct dec_eplan *);

/* kplan_gen's and eplan_cls's work when tpl_fast applies (else by @slow: themselves, out of line). */
TPL_INLINE int kplan_fast(struct etw_decoder *d, struct etw_jw *w, struct dec_kplan *pl, const struct etw_rec *r,
                          struct etw_evref *ref, kplan_fn slow) {
  char *p;
  if (ETW_EXPECT(tpl_fast(&pl->t, w, r, ref, pl->room, &p), 0)) return slow(d, r, w, ref, pl);
  return kops_run(d, w, r, ref, &pl->k, p);
}
TPL_INLINE int eplan_cls_fast(struct etw_decoder *d, struct etw_jw *w, struct dec_eplan *pl, const struct etw_rec *r,
                              struct etw_evref *ref, eplan_slow_fn slow) {
  char *p;
  if (ETW_EXPECT(tpl_fast(&pl->t, w, r, ref, pl->room, &p), 0)) return slow(d, r, w, ref, pl); /* (d8: the record's, rec_d8) */
  return kops_run(d, w, r, ref, &pl->k, p);
}

TPL_INLINE int kplan_gen(struct etw_decoder *d, struct etw_jw *w, struct dec_kplan *pl, const struct etw_rec *r,
                         struct etw_evref *ref) {
  if (etw_jw_reserve(w, pl->room)) return dec_kernel_general(d, r, w, ref);
  char *p;
  if (tpl_emit(d->sysc, &pl->t, w->buf + w->len, r, &p, ref)) return dec_kernel_general(d, r, w, ref);
  return kops_run(d, w, r, ref, &pl->k, p);
}

/* A classic record's plan (names from the built-in tables, EventData by its layout's ops). */
TPL_INLINE int eplan_cls(struct etw_decoder *d, struct etw_jw *w, struct dec_eplan *pl, const struct etw_rec *r,
                         struct etw_evref *ref, uint64_t d8) {
  if (etw_jw_reserve(w, pl->room)) return dec_write_general(d, r, w, ref, d8, 0, 0);
  char *p;
  if (tpl_emit(d->sysc, &pl->t, w->buf + w->len, r, &p, ref)) return dec_write_general(d, r, w, ref, d8, 0, 0);
  return kops_run(d, w, r, ref, &pl->k, p);
}

/* The memo of plan @pl after a miss: the record's payload and the text written for it at @txt
 * (@tlen bytes, `}}` included) kept, when they fit; the memo skipped for a while when it hits
 * fewer than 1 in 4 of 64 or more lookups. */
ETW_NOINLINE static void ememo_keep(struct dec_eplan *pl, const struct etw_rec *r, const char *txt,
                                                 size_t tlen) {
  struct dec_ememo *m = pl->memo;
  if (!m) {
    if (!(m = pl->memo = malloc(sizeof *m))) {
      pl->memo_skip = UINT64_MAX;
      return;
    }
    m->tries = m->hits = 0;
    m->back = 512;
  }
  m->valid = 0;
  if (++m->tries >= 64 && m->hits < m->tries / 4) {
    pl->memo_skip = m->back;
    if (m->back < 65536) m->back *= 2;
    m->tries = m->hits = 0;
    return;
  }
  if (m->tries >= 1024) { /* (the recent rate) */
    m->tries /= 2;
    m->hits /= 2;
  }
  if (r->user_len > DEC_EMEMO_PAY || tlen > DEC_EMEMO_TXT) return;
  if (r->user_len) memcpy(m->pay, r->user_data, r->user_len); /* (a record may carry no payload pointer) */
  memcpy(m->txt, txt, tlen);
  m->plen = r->user_len;
  m->tlen = (uint32_t)tlen;
  m->need = tlen + 32u * (size_t)r->user_len + 1400u * (size_t)pl->e->nf + 8192u;
  m->ps = r->ptr_size;
  m->valid = 1;
}

/* finish_t's other case for a manifest plan's event (out of line: its names and reason are not
 * loaded on the common path). */
ETW_NOINLINE ETW_COLD static int eplan_fail(struct etw_decoder *d, const struct etw_rec *r,
                                                      struct etw_jw *w, struct etw_evref *ref,
                                                      const struct dec_eplan *pl, size_t mark, long rc,
                                                      const char *const *why) {
  return dec_finish(d, r, w, ref, pl->prov, pl->name, mark, rc, *why);
}

/* The EventData runner for a manifest plan's event (w->err 0: reserved): called directly when
 * plans are on (no dec_fields_write_c between). */
TPL_INLINE struct dec_eres eplan_run(struct dec_ecall *c) {
  return dec_plan_run(c); /* (fast mode: a decoder in reference mode has no plans) */
}

/* The runners' first op for record @r of manifest plan @pl (dec_ecall.op), or NULL (the runner's
 * own tests): @room (tested by the caller) says the buffer has more than pl->hfar bytes past the System
 * block. */
TPL_INLINE const void *eplan_hand(const struct dec_eplan *pl, const struct etw_rec *r, int room) {
  unsigned i = r->ptr_size & 15;
  if (room && r->user_len - pl->hand.lo[i] < pl->hand.span[i]) return pl->hand.op[i];
  return NULL;
}

/* The runner's block and what a manifest plan's writer needs after the call, in the writer's
 * frame: read back from it after the call (the block's address escapes to the runner, so gcc
 * reloads them) instead of kept in callee-saved registers (no pushes and pops on the way). */
struct eplan_frame {
  struct dec_ecall c;
  struct dec_eplan *pl;
  const struct etw_rec *r;
  struct etw_evref *ref;
};

/* The rest of a manifest plan's event (frame @f) after its EventData when the plan did not write
 * it to the payload's end (@x.o NULL: the walker wrote it or gave up, or a shorter template; w->len
 * is the text's end): as finish_t, and the memo kept (@keep) when the event is written. */
ETW_NOINLINE static int eplan_end(struct eplan_frame *f, struct dec_eres x, int keep) {
  struct etw_jw *w = f->c.w;
  const struct etw_rec *r = f->r;
  size_t mark = f->c.mark - (sizeof EVD - 1); /* (the end of the System block) */
  if ((size_t)x.rc == r->user_len && !w->err) {
    etw_jw_raw(w, "}}", 2);
    f->c.d->decoded++; /* (the reference: tpl_emit's) */
    if (keep && !w->err) ememo_keep(f->pl, r, w->buf + mark + sizeof EVD - 1, w->len - mark - (sizeof EVD - 1));
    return 1;
  }
  return eplan_fail(f->c.d, r, w, f->ref, f->pl, mark, x.rc, &f->c.why);
}

/* The EventData of a manifest plan's event by the runner from its frame @f (the System block and
 * the head written, w->len after them), the event finished; the memo kept when @keep. */
TPL_INLINE int eplan_body(struct eplan_frame *f, const int keep) {
  f->pl->p->seen++; /* (before the call: pl still in a register; nothing the runner reads) */
  struct dec_eres x = eplan_run(&f->c);
  if (ETW_EXPECT(x.o != NULL, 1)) { /* (the whole payload, w->err 0, room: dec_eres) */
    struct etw_jw *w = f->c.w;
    memcpy(x.o, "}}", 2);
    w->len = (size_t)(x.o + 2 - w->buf);
    f->c.d->decoded++; /* (the reference: tpl_emit's) */
    if (keep) {
      size_t m = f->c.mark; /* (after the head) */
      ememo_keep(f->pl, f->r, w->buf + m, w->len - m);
    }
    return 1;
  }
  return eplan_end(f, x, keep);
}

/* 1 when the @n bytes at @a and @b are equal */
TPL_INLINE int memo_eq(const unsigned char *a, const unsigned char *b, size_t n) {
  return !memcmp(a, b, n);
}

/* A manifest plan's event whose memo is looked up (memo_skip 0; out of line): System block and
 * head written (ending at @p), w->len after them. */
TPL_INLINE int eplan_memo(struct etw_decoder *d, struct etw_jw *w, struct dec_eplan *pl, const struct etw_rec *r,
                          struct etw_evref *ref, char *p,
                          int (*miss)(struct etw_decoder *, struct etw_jw *, struct dec_eplan *,
                                      const struct etw_rec *, struct etw_evref *, char *)) {
  const struct dec_ememo *m = pl->memo;
  /* the same payload as the memo's: its text, when the buffer has room for it and the writer's
   * maximum is far enough for the renderer not to have failed either (as the general path) */
  if (m && m->valid && m->plen == r->user_len && m->ps == r->ptr_size && w->cap - w->len > m->tlen &&
      w->max - w->len >= m->need && (!m->plen || memo_eq(m->pay, r->user_data, m->plen))) {
    pl->memo->tries++;
    pl->memo->hits++;
    w->len += m->tlen;
    pl->p->seen++;
    d->decoded++; /* (the reference: tpl_emit's) */
    memcpy(p, m->txt, m->tlen); /* (last: nothing kept across the call) */
    return 1;
  }
  return miss(d, w, pl, r, ref, p); /* (a tail call) */
}

/* The memo's miss: the runner, and the memo kept. */
TPL_INLINE int eplan_miss(struct etw_decoder *d, struct etw_jw *w, struct dec_eplan *pl, const struct etw_rec *r,
                          struct etw_evref *ref, char *p) {
  struct eplan_frame f = {.c = {.d = d, .w = w, .e = pl->e, .p = r->user_data, .mark = (size_t)(p - w->buf),
                                .n = r->user_len, .why = "unknown event", .ptr_size = r->ptr_size,
                                .op = eplan_hand(pl, r, w->cap - (size_t)(p - w->buf) > pl->hfar)},
                          .pl = pl, .r = r, .ref = ref};
  return eplan_body(&f, 1);
}

typedef int (*eplan_memo_fn)(struct etw_decoder *, struct etw_jw *, struct dec_eplan *, const struct etw_rec *,
                             struct etw_evref *, char *);

/* A manifest plan's event: the System block by tpl_emit (any FILETIME, (pid, tid), processor),
 * after the reservation; the memo looked up by @memo when memo_skip is 0. */
TPL_INLINE int eplan_event(struct etw_decoder *d, struct etw_jw *w, struct dec_eplan *pl, const struct etw_rec *r,
                           struct etw_evref *ref, uint64_t d8, eplan_memo_fn memo) {
  if (etw_jw_reserve(w, pl->room)) return dec_write_general(d, r, w, ref, d8, 0, 0);
  char *p;
  if (tpl_emit(d->sysc, &pl->t, w->buf + w->len, r, &p, ref)) return dec_write_general(d, r, w, ref, d8, 0, 0);
  w->len = (size_t)(p - w->buf);
  if (ETW_EXPECT(pl->hroom == UINT32_MAX, 0)) pl->hroom = pl->room + pl->hfar; /* (< 2^17 + 2^20; ememo_reset) */
  if (ETW_EXPECT(pl->memo_skip == 0, 0)) return memo(d, w, pl, r, ref, p); /* (a tail call) */
  pl->memo_skip--; /* (UINT64_MAX, "always", never gets to 0) */
  struct eplan_frame f = {.c = {.d = d, .w = w, .e = pl->e, .p = r->user_data, .mark = (size_t)(p - w->buf),
                                .n = r->user_len, .why = "unknown event", .ptr_size = r->ptr_size,
                                .op = eplan_hand(pl, r, w->cap - (size_t)(p - w->buf) > pl->hfar)},
                          .pl = pl, .r = r, .ref = ref};
  return eplan_body(&f, 0);
}

/* eplan_event's work when the template applies as it is (the FILETIME in its second, its (pid,
 * tid), a processor < 10) and the reservation is made already: no call before the runner's, so
 * nothing in callee-saved registers; everything else by @slow (eplan_event, out of line). */
TPL_INLINE int eplan_fast(struct etw_decoder *d, struct etw_jw *w, struct dec_eplan *pl, const struct etw_rec *r,
                          struct etw_evref *ref, eplan_memo_fn memo, eplan_slow_fn slow) {
  char *p;
  /* (the reservation with the runners' room: pl->room ≥ the System block and head, tpl_build) */
  if (ETW_EXPECT(tpl_fast(&pl->t, w, r, ref, pl->hroom, &p), 0))
    return slow(d, r, w, ref, pl); /* (d8: the record's, rec_d8) */
  w->len = (size_t)(p - w->buf);
  if (ETW_EXPECT(pl->memo_skip == 0, 0)) return memo(d, w, pl, r, ref, p); /* (a tail call) */
  pl->memo_skip--; /* (UINT64_MAX, "always", never gets to 0) */
  struct eplan_frame f = {.c = {.d = d, .w = w, .e = pl->e, .p = r->user_data, .mark = (size_t)(p - w->buf),
                                .n = r->user_len, .why = "unknown event", .ptr_size = r->ptr_size,
                                .op = eplan_hand(pl, r, 1)},
                          .pl = pl, .r = r, .ref = ref};
  return eplan_body(&f, 0);
}

/* Plans whose ops are X64 U32 U16 U16 with keys of ≤ 16 bytes (PerfInfo/Sample, 8-byte pointers):
 * dec_kplan_event's work for them without the op loop, when the payload is exactly the layout. */
/* One fixed-size op's value (@ty a constant) at @p from @q. */
TPL_INLINE char *put_op(char *p, const unsigned char *q, const int ty, const int t4) {
  switch (ty) {
  case DEC_KOP_U32: return put_u32tx(p, d_rd32(q), t4);
  case DEC_KOP_U16: return put_u32tx(p, d_rd16(q), t4);
  case DEC_KOP_U64: return t4 ? put_u64t(p, d_rd64(q)) : dec_put_u64(p, d_rd64(q));
  default: return put_hex_v(p, d_rd64(q)); /* DEC_KOP_X64 */
  }
}
#define OP_SIZE(ty) ((ty) == DEC_KOP_U16 ? 2 : (ty) == DEC_KOP_U32 ? 4 : 8)

/* Plans of four fixed-size ops of types @t0..@t3 (constants), keys of ≤ 16 bytes, 8-byte
 * pointers (PerfInfo/Sample: X64 U32 U16 U16; StackWalk/KeyUser, KeyKernel: U64 U32 U32 X64):
 * kplan_gen's work without the op loop when the payload is exactly the layout and the template
 * applies as it is; everything else (a payload of another size, a new second or (pid, tid), a
 * processor ≥ 10, a reservation to make) by kplan_gen. No call here but tail calls, so no frame. */

/* The text of kplan_fix4's ops (types @t0 … @t3) of payload @q at @p, then `}}`; the end (with
 * @t4, put_op's T4 case; the Sample writer has none: fewer registers). */
TPL_INLINE char *kplan_ops4(const struct dec_kplan *pl, const unsigned char *q, char *p, const int t0,
                            const int t1, const int t2, const int t3, const int t4) {
  p = put_op(p, q, t0, t4);
  q += OP_SIZE(t0);
  memcpy(p, pl->k.ops[1].key, 16);
  p += pl->k.ops[1].klen;
  p = put_op(p, q, t1, t4);
  q += OP_SIZE(t1);
  memcpy(p, pl->k.ops[2].key, 16);
  p += pl->k.ops[2].klen;
  p = put_op(p, q, t2, t4);
  q += OP_SIZE(t2);
  memcpy(p, pl->k.ops[3].key, 16);
  p += pl->k.ops[3].klen;
  p = put_op(p, q, t3, t4);
  memcpy(p, "}}", 2);
  return p + 2;
}

/* The Sample writer's memo miss (out of line: the hit path keeps no callee-saved register): payload
 * @q's text at @p (after the head), the memo set to it, w->len; 1. */
TPL_INLINE int kplan_smiss(struct etw_jw *w, struct dec_kplan *pl, const unsigned char *q, char *p) {
  char *e = kplan_ops4(pl, q, p, DEC_KOP_X64, DEC_KOP_U32, DEC_KOP_U16, DEC_KOP_U16, 0);
  /* (≤ DEC_MEMO_MAX bytes from p; the copy's rest is inside the reservation) */
  memo_copy(pl->memo, p);
  memcpy(pl->memo_q, q, 16);
  pl->memo_len = (uint32_t)(e - p);
  w->len = (size_t)(e - w->buf);
  return 1;
}
/* The Sample writer's memo miss as kplan_end4 calls it: writer @w, payload @q, plan @pl, text @p */
typedef int (*kplan_miss_fn)(struct etw_jw *, const unsigned char *, struct dec_kplan *, char *);

/* kplan_fix4's tests (@need: the ops' payload bytes; @room: the writer's room): 0 when the fast case applies, with the FILETIME's digits 4-7 index in *@gp (the
 * template's block moved to it when needed); 1 for the out-of-line case (nothing changed). */
TPL_INLINE int kplan_chk4(struct etw_jw *w, struct dec_kplan *pl, const struct etw_rec *r, const unsigned need,
                          uint64_t room, uint64_t *gp) {
  struct dec_tpl *t = &pl->t;
  /* (one compare and branch each, no flags combined, the record's own first: fewer live values) */
  if (ETW_EXPECT(r->user_len != need, 0)) return 1;
  if (ETW_EXPECT(r->ptr_size != 8u, 0)) return 1;
  if (ETW_EXPECT(r->cpu >= 10, 0)) return 1;
  if (ETW_EXPECT(jw_err(w), 0)) return 1;
  if (ETW_EXPECT(((uint64_t)r->pid << 32 | r->tid) != t->xkey, 0)) return 1;
  uint64_t g = r->filetime - t->fb; /* digits 4-7 when in the slot's block, not its first 100 ns (tpl_emit) */
  int gm = g - 1u >= 9999u; /* another block of the second: its digits 1-3 first */
  if (ETW_EXPECT(gm && r->filetime - t->ft1 >= 9999999u, 0)) return 1;
  /* (room < 2^62: no wrap; the same test as w->cap - w->len <= room, one instruction less) */
  if (ETW_EXPECT(w->len + room >= w->cap, 0)) return 1;
  /* nothing fails from here */
  if (ETW_EXPECT(gm, 0)) {
    uint64_t ft = r->filetime;
    tpl_block(t, (unsigned)(ft - t->ft1) + 1u);
    g = ft - t->fb;
  }
  *gp = g;
  return 0;
}

/* kplan_fix4's work after the template's copy at @p (its digits 4-7 @g, processor @cpu): the
 * digits, the ops' text (with @miss, the Sample writer, a payload equal to the memo's (16 bytes) is
 * its text, and @miss renders another), w->len; 1. */
TPL_INLINE int kplan_end4(struct etw_jw *w, struct dec_kplan *pl, const struct etw_rec *r, char *p, uint64_t g,
                          unsigned cpu, const int t0, const int t1, const int t2, const int t3, kplan_miss_fn miss) {
  const struct dec_tpl *t = &pl->t;
  const unsigned char *q = r->user_data;
  memcpy(p + t->plen + 24, &T4[g], 4); /* (put_lo4; g < 10^4 here, the 64-bit index as it is) */
  p[t->cpos] = (char)('0' + cpu);
  p += t->n;
  if (miss) { /* (need 16) the text of the last payload rendered when this one is the same */
    uint64_t q0, q1;
    memcpy(&q0, q, 8);
    memcpy(&q1, q + 8, 8);
    if (ETW_EXPECT(((q0 ^ pl->memo_q[0]) | (q1 ^ pl->memo_q[1])) != 0, 0)) return miss(w, q, pl, p);
    memo_copy(p, pl->memo);
    w->len = (size_t)(p + pl->memo_len - w->buf);
    return 1;
  }
  p = kplan_ops4(pl, q, p, t0, t1, t2, t3, 1);
  w->len = (size_t)(p - w->buf);
  return 1;
}

/* kplan_fix4 itself. */
TPL_INLINE int kplan_fix4(struct etw_decoder *d, struct etw_jw *w, struct dec_kplan *pl, const struct etw_rec *r,
                          struct etw_evref *ref, const int t0, const int t1, const int t2, const int t3,
                          kplan_miss_fn miss) {
  const unsigned need = OP_SIZE(t0) + OP_SIZE(t1) + OP_SIZE(t2) + OP_SIZE(t3);
  uint64_t g;
  if (ETW_EXPECT(kplan_chk4(w, pl, r, need, pl->room, &g), 0)) return kplan_gen_s(d, r, w, ref, pl);
  d->decoded++;
  char *p = w->buf + w->len;
  unsigned cpu = r->cpu;
  tpl_copy_ref(p, &pl->t, ref, g, cpu);
  return kplan_end4(w, pl, r, p, g, cpu, t0, t1, t2, t3, miss);
}


/* The writers the plans point at (the out-of-line entries, suffix _s, around the inline bodies
 * above). The Sample writer has every value's formatting inlined (DEC_FLATTEN). */
ETW_NOINLINE static int kplan_genslow_s(struct etw_decoder *d, const struct etw_rec *r,
                                                     struct etw_jw *w, struct etw_evref *ref,
                                                     struct dec_kplan *pl) {
  return kplan_gen(d, w, pl, r, ref);
}
ETW_NOINLINE static int kplan_gen_s(struct etw_decoder *d, const struct etw_rec *r,
                                                 struct etw_jw *w, struct etw_evref *ref,
                                                 struct dec_kplan *pl) {
  return kplan_fast(d, w, pl, r, ref, kplan_genslow_s);
}
ETW_NOINLINE DEC_FLATTEN static int kplan_smiss_s(struct etw_jw *w, const unsigned char *q,
                                                               struct dec_kplan *pl, char *p) {
  return kplan_smiss(w, pl, q, p);
}
ETW_NOINLINE static int eplan_miss_s(struct etw_decoder *d, struct etw_jw *w,
                                                  struct dec_eplan *pl, const struct etw_rec *r,
                                                  struct etw_evref *ref, char *p) {
  return eplan_miss(d, w, pl, r, ref, p);
}
ETW_NOINLINE static int eplan_memo_s(struct etw_decoder *d, struct etw_jw *w,
                                                  struct dec_eplan *pl, const struct etw_rec *r,
                                                  struct etw_evref *ref, char *p) {
  return eplan_memo(d, w, pl, r, ref, p, eplan_miss_s);
}
ETW_NOINLINE static int eplan_slow_s(struct etw_decoder *d, const struct etw_rec *r,
                                                  struct etw_jw *w, struct etw_evref *ref,
                                                  struct dec_eplan *pl) {
  return eplan_event(d, w, pl, r, ref, rec_d8(r), eplan_memo_s);
}
static int eplan_event_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                         struct etw_evref *ref, struct dec_eplan *pl, uint64_t d8) {
  (void)d8; /* (the record's: rec_d8) */
  return eplan_fast(d, w, pl, r, ref, eplan_memo_s, eplan_slow_s);
}
ETW_NOINLINE static int eplan_clsslow_s(struct etw_decoder *d, const struct etw_rec *r,
                                                     struct etw_jw *w, struct etw_evref *ref,
                                                     struct dec_eplan *pl) {
  return eplan_cls(d, w, pl, r, ref, rec_d8(r));
}
static int eplan_cls_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                       struct etw_evref *ref, struct dec_eplan *pl, uint64_t d8) {
  (void)d8; /* (the record's: rec_d8) */
  return eplan_cls_fast(d, w, pl, r, ref, eplan_clsslow_s);
}
DEC_FLATTEN static int kplan_sample_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                      struct etw_evref *ref, struct dec_kplan *pl) {
  return kplan_fix4(d, w, pl, r, ref, DEC_KOP_X64, DEC_KOP_U32, DEC_KOP_U16, DEC_KOP_U16, kplan_smiss_s);
}
static int kplan_skey_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
                        struct dec_kplan *pl) {
  return kplan_fix4(d, w, pl, r, ref, DEC_KOP_U64, DEC_KOP_U32, DEC_KOP_U32, DEC_KOP_X64, NULL);
}

int dec_kplan_event(struct etw_decoder *d, struct etw_jw *w, struct dec_kplan *pl, const struct etw_rec *r,
                    struct etw_evref *ref) {
  return pl->run(d, r, w, ref, pl);
}

int dec_eplan_event(struct etw_decoder *d, struct etw_jw *w, struct dec_eplan *pl, const struct etw_rec *r,
                    struct etw_evref *ref, uint64_t d8) {
  return pl->run(d, r, w, ref, pl, d8);
}

