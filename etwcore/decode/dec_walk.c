/* dec_walk.c — the template walker: renders a manifest event's payload field by field from its
 * schema (struct dec_event), with valueMap/bitMap texts (dec_map_render). It is the reference
 * every compiled plan (dec_plan.c, dec_plan_run.c) is compared with, and what they fall back to.
 * Called on the decoder's thread only.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dec_man.h"

/* Build f->key (first use; the decoder owns its schemas). */
ETW_NOINLINE void dec_build_key(struct dec_field *f) {
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
  if (!f->key) dec_build_key(f);
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
ETW_NOINLINE static void map_prep(struct dec_map *m) {
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

/* A run of f->run_n fixed-size scalar fields from field *@i (walk_fields: f->run_n > 1, all of
 * them before its end): rendered one after the other after one room check when the payload holds
 * them all (*@i advanced past them, 1), else 0 (nothing written). */
static inline int walk_run(struct walk *k, uint32_t *pi, int *pfirst) {
  uint32_t i = *pi;
  const struct dec_field *f = &k->e->f[i];
  int first = *pfirst;
  size_t bytes = k->ptr_size == 4 ? f->run_b4 : f->run_b8;
  if (k->ptr_size != 4 && k->ptr_size != 8) bytes = (size_t)-1;
  if (bytes > k->n - k->pos || etw_jw_reserve(k->w, (size_t)f->run_n * (KEY_PAD + 24))) return 0;
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
  *pi = i;
  *pfirst = first;
  return 1;
}

/* Field @f (field @i, class @kind other than FK_GENERAL) as a plain scalar: no references, maps,
 * arrays or lengths (walk_fields' general path gives the same bytes; it also handles every short
 * payload). Returns the payload bytes used, -1 when the payload is too short for this path
 * (nothing written), -2 on an error (*k->why set). */
static inline long walk_scalar(struct walk *k, const struct dec_field *f, uint32_t i, uint8_t kind, int first) {
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
      return -2;
    }
  }
  return used;
}

/* Array field @f (field @i) of @reps > 0 plain integers or pointers: rendered with one
 * reservation and no per-element dispatch when the payload holds them all (0: done), else
 * @reps (nothing written: the element loop renders them). */
static inline long walk_int_array(struct walk *k, const struct dec_field *f, uint32_t i, long reps) {
  if (!(((f->in == 4 || f->in == 6 || f->in == 8 || f->in == 10) && (f->out == 0 || f->out == 18)) ||
        (f->in == 16 && f->out == 0)))
    return reps;
  unsigned wdt = f->in == 16 ? (unsigned)k->ptr_size : int_width(f->in);
  size_t bytes = (size_t)reps * wdt;
  if (bytes > k->n - k->pos || etw_jw_reserve(k->w, (size_t)reps * 24)) return reps;
  {
    const unsigned char *q = k->p + k->pos, *qe = q + bytes;
    char *o = k->w->buf + k->w->len; /* ≤ 24 bytes per element reserved */
    uint64_t v = 0;
#define DEC_INT_ARRAY(READ, PUT)                                                                   \
  for (; q < qe; q += wdt) {                                                                       \
    v = READ;                                                                                      \
    o = PUT(o, v);                                                                                 \
    *o++ = ',';                                                                                    \
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
    return 0;
  }
}

/* One element of field @f (field @i; not a struct; @len its length or -1): plain integers and
 * pointers directly, anything else by dec_value; a single value's map text. 0, or -1 with
 * *k->why set. */
static inline int walk_elem(struct walk *k, const struct dec_field *f, uint32_t i, long len) {
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
  return 0;
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
    if (f->run_n > 1 && i + f->run_n <= end && walk_run(k, &i, &first)) continue;
    uint8_t kind = f->kind ? f->kind : (((struct dec_field *)f)->kind = classify(f));
    if (kind != FK_GENERAL && k->pos < k->n) {
      long used = walk_scalar(k, f, i, kind, first);
      if (used == -2) return -1;
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
    int cw = f->is_array ? dec_char_width(f->in, f->out) : 0;
    if (cw) { /* an array of characters: one string (no plan has them: both modes come here) */
      long used = dec_char_array(k->w, cw, k->p + k->pos, k->n - k->pos, (size_t)cnt);
      if (used < 0) {
        *k->why = "payload shorter than the template";
        return -1;
      }
      k->pos += (size_t)used;
      i = next;
      continue;
    }
    long reps = f->is_array ? cnt : 1;
    if (f->is_array) etw_jw_ch(k->w, '[');
    if (f->is_array && reps > 0) reps = walk_int_array(k, f, i, reps);
    for (long r = 0; r < reps; r++) {
      if (r) etw_jw_ch(k->w, ',');
      if (f->in == 24) {
        size_t before = k->pos;
        etw_jw_ch(k->w, '{');
        if (walk_fields(k, i + 1, next, depth + 1, k->pos) < 0) return -1;
        etw_jw_ch(k->w, '}');
        if (k->pos == before && f->members) break; /* empty elements: stop (bounded) */
      } else if (walk_elem(k, f, i, len) < 0) {
        return -1;
      }
      if (k->w->err) return -1;
    }
    if (f->is_array) etw_jw_ch(k->w, ']');
    i = next;
  }
  return 0;
}

/* The walker over every field (kept out of the plan's path: its frame holds the 4 KiB vals). */
ETW_NOINLINE long dec_walk_all(struct etw_decoder *d, struct etw_jw *w, const struct dec_event *e,
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

