/* dec_tl.c — TraceLogging (and .NET EventSource self-describing) events.
 *
 * The schema travels with every event: extended item 12 (provider traits: name + traits) and
 * item 11 (event metadata: tags, name, fields). Field metadata is parsed into a bounded array,
 * then the payload is walked field by field (packed, no alignment), recursing into structs and
 * arrays. Format facts: etl-format.md §9.
 */
#include <string.h>

#include "decode.h"

struct tlf {
  const char *name;
  size_t name_len;
  uint8_t in, arity;     /* arity: 0 scalar, 0x20 const count, 0x40 var count, 0x60 custom */
  uint8_t out;
  uint16_t ccount;
  uint16_t members;      /* struct: direct member count (OutType) */
};

static const struct etw_ext_item *find_ext(const struct etw_rec *r, uint16_t type) {
  for (uint16_t i = 0; i < r->n_ext; i++)
    if (r->ext[i].type == type) return &r->ext[i];
  return NULL;
}

int dec_tl_names(const struct etw_rec *r, const char **prov, size_t *prov_len, const char **name,
                 size_t *name_len) {
  const struct etw_ext_item *pt = find_ext(r, ETW_EXT_PROV_TRAITS);
  const struct etw_ext_item *em = find_ext(r, ETW_EXT_EVENT_SCHEMA_TL);
  *prov = *name = NULL;
  *prov_len = *name_len = 0;
  if (pt && pt->len > 2) {
    const unsigned char *z = memchr(pt->data + 2, 0, pt->len - 2u);
    if (z) {
      *prov = (const char *)pt->data + 2;
      *prov_len = (size_t)(z - (pt->data + 2));
    }
  }
  if (!em || em->len < 3) return *prov ? 1 : 0;
  size_t sz = d_rd16(em->data);
  if (sz > em->len) sz = em->len;
  size_t i = 2;
  while (i < sz && (em->data[i] & 0x80)) i++; /* tags */
  i++;
  if (i >= sz) return 0;
  const unsigned char *z = memchr(em->data + i, 0, sz - i);
  if (!z) return 0;
  *name = (const char *)em->data + i;
  *name_len = (size_t)(z - (em->data + i));
  return 2;
}

/* Parse the field list of the event metadata into @f; returns the count or -1. */
static int parse_fields(const unsigned char *m, size_t sz, struct tlf *f, int max) {
  size_t i = 2;
  while (i < sz && (m[i] & 0x80)) i++;
  i++;
  const unsigned char *z = i < sz ? memchr(m + i, 0, sz - i) : NULL;
  if (!z) return -1;
  i = (size_t)(z - m) + 1;
  int n = 0;
  while (i < sz) {
    if (n >= max) return -1;
    struct tlf *x = &f[n++];
    z = memchr(m + i, 0, sz - i);
    if (!z) return -1;
    x->name = (const char *)m + i;
    x->name_len = (size_t)(z - (m + i));
    i = (size_t)(z - m) + 1;
    if (i >= sz) return -1;
    uint8_t inm = m[i++];
    x->in = inm & 0x1F;
    x->arity = inm & 0x60;
    x->out = 0;
    x->ccount = 1;
    if (inm & 0x80) {
      if (i >= sz) return -1;
      uint8_t outm = m[i++];
      x->out = outm & 0x7F;
      if (outm & 0x80) {
        while (i < sz && (m[i] & 0x80)) i++;
        i++;
        if (i > sz) return -1;
      }
    }
    if (x->arity == 0x20) {
      if (sz - i < 2) return -1;
      x->ccount = d_rd16(m + i);
      i += 2;
    } else if (x->arity == 0x60) {
      if (sz - i < 2) return -1;
      size_t k = d_rd16(m + i);
      i += 2;
      if (k > sz - i) return -1;
      i += k;
    }
    x->members = x->in == 24 ? x->out : 0;
  }
  return n;
}

/* Index after field @i and all its (nested) members, or -1. */
static int span(const struct tlf *f, int n, int i, int depth) {
  if (i >= n || depth > DEC_MAX_DEPTH) return -1;
  int j = i + 1;
  if (f[i].in == 24)
    for (int k = 0; k < f[i].members; k++) {
      j = span(f, n, j, depth + 1);
      if (j < 0) return -1;
    }
  return j;
}

struct tlctx {
  struct etw_jw *w;
  const struct tlf *f;
  int n;
  const unsigned char *p;
  size_t len, pos;
  int ptr_size;
};

static int fields(struct tlctx *c, int i, int end, int depth);

static int one(struct tlctx *c, int i, int depth) {
  const struct tlf *x = &c->f[i];
  if (x->in == 24) {
    int e = span(c->f, c->n, i, depth);
    if (e < 0) return -1;
    etw_jw_ch(c->w, '{');
    if (fields(c, i + 1, e, depth + 1) < 0) return -1;
    etw_jw_ch(c->w, '}');
    return 0;
  }
  long k = dec_value(c->w, x->in, x->out, c->p + c->pos, c->len - c->pos, -1, c->ptr_size, DV_TL, NULL);
  if (k < 0) return -1;
  c->pos += (size_t)k;
  return 0;
}

static int fields(struct tlctx *c, int i, int end, int depth) {
  int first = 1;
  while (i < end) {
    const struct tlf *x = &c->f[i];
    int next = span(c->f, c->n, i, depth);
    if (next < 0) return -1;
    if (!first) etw_jw_ch(c->w, ',');
    first = 0;
    etw_jw_str(c->w, x->name, x->name_len);
    etw_jw_ch(c->w, ':');
    if (x->arity == 0x60) { /* custom-serialized: u16 byte count + bytes */
      if (c->len - c->pos < 2) return -1;
      size_t k = d_rd16(c->p + c->pos);
      if (k > c->len - c->pos - 2) return -1;
      etw_jw_base64(c->w, c->p + c->pos + 2, k);
      c->pos += 2 + k;
    } else if (x->arity) {
      size_t cnt = x->ccount;
      if (x->arity == 0x40) {
        if (c->len - c->pos < 2) return -1;
        cnt = d_rd16(c->p + c->pos);
        c->pos += 2;
      }
      int cw = dec_char_width(x->in, x->out);
      if (cw) { /* characters (TraceLoggingWCharArray, …): one string */
        long k = dec_char_array(c->w, cw, c->p + c->pos, c->len - c->pos, cnt);
        if (k < 0) return -1;
        c->pos += (size_t)k;
        i = next;
        continue;
      }
      etw_jw_ch(c->w, '[');
      for (size_t k = 0; k < cnt; k++) {
        if (k) etw_jw_ch(c->w, ',');
        if (one(c, i, depth) < 0) return -1;
        if (c->w->err) return -1;
      }
      etw_jw_ch(c->w, ']');
    } else if (one(c, i, depth) < 0) {
      return -1;
    }
    i = next;
  }
  return 0;
}

long dec_tl_write(struct etw_jw *w, const struct etw_rec *r, const char **why) {
  const struct etw_ext_item *em = find_ext(r, ETW_EXT_EVENT_SCHEMA_TL);
  if (!em || em->len < 3) {
    *why = "TraceLogging metadata missing";
    return -1;
  }
  size_t sz = d_rd16(em->data);
  if (sz > em->len || sz < 3) {
    *why = "TraceLogging metadata size out of range";
    return -1;
  }
  struct tlf f[DEC_MAX_FIELDS / 2];
  int n = parse_fields(em->data, sz, f, (int)(sizeof f / sizeof f[0]));
  if (n < 0) {
    *why = "malformed TraceLogging metadata";
    return -1;
  }
  struct tlctx c = {w, f, n, r->user_data, r->user_len, 0, r->ptr_size};
  if (fields(&c, 0, n, 0) < 0) {
    *why = "TraceLogging payload does not match its metadata";
    return -1;
  }
  return (long)c.pos;
}
