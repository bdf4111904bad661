/* folded.c — collapsed-stack aggregation (folded.h). One aggregator per thread (no locks): an
 * open-addressing table of stack texts with counts, bounded in entries and text bytes; events
 * beyond the bounds are counted as dropped. Events are scanned for `"Stack":[` first and only
 * those are parsed (cJSON), so the top-level member is told from a nested one. */
#include "etwcore/folded.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

struct fent {
  char *txt; /* NULL = empty slot */
  size_t len;
  uint64_t n, h;
};

struct etw_folded {
  struct fent *t;
  uint32_t cap, used, max;
  size_t bytes, max_bytes;
  uint64_t events, dropped;
  char *buf; /* the line being built */
  size_t blen, bcap;
};

struct etw_folded *etw_folded_new(uint32_t max_stacks, size_t max_bytes) {
  struct etw_folded *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->max = max_stacks ? max_stacks : 1u << 20;
  f->max_bytes = max_bytes ? max_bytes : (size_t)256 << 20;
  f->cap = 1024;
  f->t = calloc(f->cap, sizeof *f->t);
  if (!f->t) {
    free(f);
    return NULL;
  }
  return f;
}

void etw_folded_free(struct etw_folded *f) {
  if (!f) return;
  for (uint32_t i = 0; i < f->cap; i++) free(f->t[i].txt);
  free(f->t);
  free(f->buf);
  free(f);
}

static int put(struct etw_folded *f, const char *s, size_t n) {
  if (f->blen + n + 1 > f->bcap) {
    size_t nc = f->bcap ? f->bcap * 2 : 4096;
    while (nc < f->blen + n + 1) nc *= 2;
    char *nb = realloc(f->buf, nc);
    if (!nb) return -1;
    f->buf = nb;
    f->bcap = nc;
  }
  memcpy(f->buf + f->blen, s, n);
  f->blen += n;
  return 0;
}

/* a name, with the characters the format cannot hold replaced */
static int put_name(struct etw_folded *f, const char *s) {
  size_t at = f->blen, n = strlen(s);
  if (put(f, s, n)) return -1;
  for (size_t i = at; i < f->blen; i++)
    if (f->buf[i] == ';' || (unsigned char)f->buf[i] <= ' ') f->buf[i] = '_';
  return 0;
}

static int put_frame(struct etw_folded *f, const cJSON *fr) {
  const cJSON *mod = cJSON_GetObjectItemCaseSensitive(fr, "Module");
  const cJSON *sym = cJSON_GetObjectItemCaseSensitive(fr, "Symbol");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(fr, "Offset");
  const cJSON *adr = cJSON_GetObjectItemCaseSensitive(fr, "Address");
  int m = cJSON_IsString(mod) && *mod->valuestring;
  if (cJSON_IsString(fr)) return put_name(f, fr->valuestring); /* a bare address */
  if (cJSON_IsString(sym) && *sym->valuestring) {
    if (m && (put_name(f, mod->valuestring) || put(f, "!", 1))) return -1;
    return put_name(f, sym->valuestring);
  }
  if (m) {
    char hex[32];
    if (put_name(f, mod->valuestring)) return -1;
    if (!cJSON_IsNumber(off)) return 0;
    snprintf(hex, sizeof hex, "+0x%llx", (unsigned long long)off->valuedouble);
    return put(f, hex, strlen(hex));
  }
  return put_name(f, cJSON_IsString(adr) ? adr->valuestring : "?");
}

static uint64_t hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

static int grow(struct etw_folded *f) {
  uint32_t nc = f->cap * 2;
  struct fent *nt = calloc(nc, sizeof *nt);
  if (!nt) return -1;
  for (uint32_t i = 0; i < f->cap; i++) {
    if (!f->t[i].txt) continue;
    uint32_t j = (uint32_t)f->t[i].h & (nc - 1);
    while (nt[j].txt) j = (j + 1) & (nc - 1);
    nt[j] = f->t[i];
  }
  free(f->t);
  f->t = nt;
  f->cap = nc;
  return 0;
}

/* count the stack text in f->buf */
static int count(struct etw_folded *f) {
  uint64_t h = hash(f->buf, f->blen);
  uint32_t j = (uint32_t)h & (f->cap - 1);
  for (; f->t[j].txt; j = (j + 1) & (f->cap - 1))
    if (f->t[j].h == h && f->t[j].len == f->blen && !memcmp(f->t[j].txt, f->buf, f->blen)) {
      f->t[j].n++;
      f->events++;
      return 1;
    }
  if (f->used >= f->max || f->bytes + f->blen > f->max_bytes) {
    f->dropped++;
    return -1;
  }
  char *txt = malloc(f->blen);
  if (!txt) {
    f->dropped++;
    return -1;
  }
  memcpy(txt, f->buf, f->blen);
  f->t[j] = (struct fent){txt, f->blen, 1, h};
  f->used++;
  f->bytes += f->blen;
  f->events++;
  if (f->used * 2 > f->cap) grow(f); /* (failing to grow only makes the table fuller) */
  return 1;
}

/* `"Stack":[` somewhere in s (memmem is not portable: Windows builds this file too) */
static int has_stack(const char *s, size_t n) {
  const char *p = s, *e = s + n;
  while (e - p >= 9 && (p = memchr(p, '"', (size_t)(e - p - 8)))) {
    if (!memcmp(p, "\"Stack\":[", 9)) return 1;
    p++;
  }
  return 0;
}

int etw_folded_add(struct etw_folded *f, const char *json, size_t n) {
  if (!has_stack(json, n)) return 0;
  int wrap = n && json[0] != '{'; /* the text from "System": has no opening brace */
  cJSON *o = wrap ? NULL : cJSON_ParseWithLength(json, n);
  if (wrap) {
    char *t = malloc(n + 2);
    if (!t) return 0;
    t[0] = '{';
    memcpy(t + 1, json, n);
    o = cJSON_ParseWithLength(t, n + 1);
    free(t);
  }
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "Stack");
  int r = 0, nf = cJSON_GetArraySize(st);
  f->blen = 0;
  if (cJSON_IsArray(st) && nf > 0) {
    r = 1;
    for (int i = nf - 1; i >= 0 && r > 0; i--) /* root first */
      if ((i < nf - 1 && put(f, ";", 1)) || put_frame(f, cJSON_GetArrayItem(st, i))) r = -1;
    if (r > 0) r = count(f);
    else f->dropped++;
  }
  cJSON_Delete(o);
  return r;
}

static int cmp_ent(const void *a, const void *b) {
  const struct fent *x = *(const struct fent *const *)a, *y = *(const struct fent *const *)b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->txt, y->txt, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

int etw_folded_write(struct etw_folded *f, FILE *out) {
  const struct fent **v = malloc((f->used ? f->used : 1) * sizeof *v);
  if (!v) return -1;
  uint32_t k = 0;
  for (uint32_t i = 0; i < f->cap; i++)
    if (f->t[i].txt) v[k++] = &f->t[i];
  qsort(v, k, sizeof *v, cmp_ent);
  for (uint32_t i = 0; i < k; i++)
    fprintf(out, "%.*s %llu\n", (int)v[i]->len, v[i]->txt, (unsigned long long)v[i]->n);
  free(v);
  return ferror(out) ? -1 : 0;
}

void etw_folded_stats(const struct etw_folded *f, uint64_t *events, uint64_t *stacks,
                      uint64_t *dropped) {
  *events = f->events;
  *stacks = f->used;
  *dropped = f->dropped;
}
