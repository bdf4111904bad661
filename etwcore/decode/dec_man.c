/* dec_man.c — manifest-based events: instrumentation manifest XML (files in the manifests
 * directory, and .NET EventSource manifests carried in the stream as event 0xFFFE), and the
 * template walker that renders their payloads.
 *
 * The XML reader is a small bounded tokenizer (elements, attributes, comments, CDATA, PIs) —
 * enough for manifests, not a general XML parser. Names follow TraceEvent: an event's name is
 * "<task>/<opcode>" using the task/opcode message strings when present, else their names; the
 * Info opcode is omitted; without a task the event symbol is used.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dec_fast.h"
#include "decode.h"

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
    e = memchr(s + i, q, n - i);
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
/* A <task> or <opcode> element @t into @x: its name and message (in arena @a), its value, and
 * @task (an opcode's task's value, or -1). */
static void named_set(struct named *x, const struct xtag *t, struct arena *a, long task) {
  x->name = attr_a(t, "name", a);
  x->msg = attr_a(t, "message", a);
  struct tval tv;
  x->value = num(attr_t(t, "value", &tv));
  tv_free(&tv);
  x->task = task;
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

/* a manifest type's name ("win:UInt32", "xs:string") and its number */
struct type_name {
  const char *n;
  unsigned v;
};
/* the number of type @s (its "win:"/"xs:" prefix left out) in table @t[0..n); 0: none or unknown */
static unsigned type_value(const struct type_name *t, size_t n, const char *s) {
  if (!s) return 0;
  const char *c = strchr(s, ':');
  if (c) s = c + 1;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(t[i].n, s)) return t[i].v;
  return 0;
}

static unsigned in_type(const char *s) {
  static const struct type_name T[] = {
      {"UnicodeString", 1}, {"AnsiString", 2}, {"Int8", 3}, {"UInt8", 4}, {"Int16", 5},
      {"UInt16", 6}, {"Int32", 7}, {"UInt32", 8}, {"Int64", 9}, {"UInt64", 10}, {"Float", 11},
      {"Double", 12}, {"Boolean", 13}, {"Binary", 14}, {"GUID", 15}, {"Pointer", 16},
      {"FILETIME", 17}, {"SYSTEMTIME", 18}, {"SID", 19}, {"HexInt32", 20}, {"HexInt64", 21},
      {"CountedUnicodeString", 22}, {"CountedAnsiString", 23}, {"SizeT", 308},
      {"IPAddrV4", 8}, {"IPAddrV6", 14}, {"Port", 6}, {"WmiTime", 10}};
  return type_value(T, sizeof T / sizeof T[0], s);
}

static unsigned out_type(const char *s, const char *in) {
  static const struct type_name T[] = {
      {"HexInt32", 4}, {"HexInt64", 4}, {"Hex", 4}, {"Boolean", 3}, {"IPv4", 8}, {"IPv6", 9},
      {"Port", 7}, {"Win32Error", 13}, {"NTSTATUS", 14}, {"HResult", 15}, {"SocketAddress", 10},
      {"String", 2}, {"string", 2} /* xs:string: a UInt8/UInt16 is a character */, {"DateTime", 16},
      {"PID", 5}, {"TID", 6}};
  if (in) {
    const char *c = strchr(in, ':');
    c = c ? c + 1 : in;
    if (!strcmp(c, "IPAddrV4")) return 8;
    if (!strcmp(c, "IPAddrV6")) return 9;
    if (!strcmp(c, "Port")) return 7;
  }
  return type_value(T, sizeof T / sizeof T[0], s);
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

/* an <event> while its provider is read (strings in the mctx arena) */
struct pev {
  long value, version, level, task_v, opcode_v;
  char *symbol, *task, *opcode, *tmpl, *msg, *keywords;
};

/* A template's <data> or <struct> @t as its next field (struct members counted in the open
 * structs @sstack[0..*@sdepth)): 0, or -1 when out of memory. */
static int read_field(struct mctx *m, struct tmpl *cur_tm, const struct xtag *t, int *sstack, int *psdepth) {
  int sdepth = *psdepth;
  if (cur_tm->nf >= DEC_MAX_FIELDS - 1) return 0;
  if (cur_tm->nf == cur_tm->cf) {
    uint32_t nc = cur_tm->cf ? cur_tm->cf * 2 : 16;
    struct dec_field *nf = realloc(cur_tm->f, nc * sizeof *nf);
    if (!nf) return -1;
    cur_tm->f = nf;
    cur_tm->cf = nc;
  }
  struct dec_field *f = &cur_tm->f[cur_tm->nf];
  memset(f, 0, sizeof *f);
  f->name = attr_a(t, "name", &m->ar);
  if (!f->name && (f->name = arena_alloc(&m->ar, 2))) memcpy(f->name, "_", 2);
  f->len = -1;
  f->count = 1;
  f->len_ref = f->count_ref = -1;
  struct tval t1, t2, t3, t4, t5;
  const char *in = attr_t(t, "inType", &t1), *out = attr_t(t, "outType", &t2),
             *len = attr_t(t, "length", &t3), *cnt = attr_t(t, "count", &t4), *map = attr_t(t, "map", &t5);
  f->in = (uint16_t)(tag_is(t, "struct") ? 24 : in_type(in));
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
  dec_char_length(f); /* win:UInt8/UInt16 xs:string with a length: that many characters */
  f->map = find_map(m, map);
  tv_free(&t1), tv_free(&t2), tv_free(&t3), tv_free(&t4), tv_free(&t5);
  for (int q = 0; q < sdepth; q++)
    if ((uint32_t)sstack[q] < cur_tm->nf) cur_tm->f[sstack[q]].members++;
  if (f->in == 24 && !t->selfclose && sdepth < DEC_MAX_DEPTH) sstack[sdepth++] = (int)cur_tm->nf;
  cur_tm->nf++;
  if (f->in == 0 && f->name) f->in = 1; /* unknown inType: read as string */
  *psdepth = sdepth;
  return 0;
}

/* A <map> entry @t of @cur_map (its text from the document's string table @docstr): 0, or -1
 * when out of memory. */
static int read_map_entry(struct dec_map *cur_map, const struct xtag *t, const struct mctx *docstr) {
  if (cur_map->n >= 4096) return 0;
  struct tval t1, t2;
  const char *v = attr_t(t, "value", &t1), *msg = attr_t(t, "message", &t2);
  uint32_t *nv = realloc(cur_map->val, (cur_map->n + 1) * sizeof *nv);
  char **ns = nv ? realloc(cur_map->str, (cur_map->n + 1) * sizeof *ns) : NULL;
  if (nv) cur_map->val = nv;
  if (ns) cur_map->str = ns;
  if (!nv || !ns) {
    tv_free(&t1), tv_free(&t2);
    return -1;
  }
  const char *txt = lookup_str(docstr, msg);
  cur_map->val[cur_map->n] = (uint32_t)num(v);
  cur_map->str[cur_map->n] = strdup(txt ? txt : (msg ? msg : ""));
  cur_map->n++;
  tv_free(&t1), tv_free(&t2);
  return 0;
}

/* Event @pe of provider @p as a schema: its name from the task and opcode (tasks and templates
 * found through the indexes @tix, @mix), its fields from its template. 0, or -1 when out of
 * memory. */
static int make_event(struct dec_provider *p, const struct pev *pe, const struct mctx *m, const struct mctx *docstr,
                      const struct nidx *tix, const struct nidx *mix) {
  if (pe->value < 0 || pe->value > 65535) return 0;
  struct dec_event *e = calloc(1, sizeof *e);
  if (!e) return -1;
  e->id = (uint16_t)pe->value;
  e->version = (uint8_t)pe->version;
  e->level = (uint8_t)pe->level;
  const char *tname = NULL, *oname = NULL;
  long tv = 0, ov = 0;
  int by_msg = 0;
  /* the first task of that name (a lookup; a linear scan when the index is missing) */
  uint32_t k0 = pe->task && tix->cap ? nidx_find(tix, pe->task, task_name_at, m->tasks) : 0;
  for (uint32_t k = k0; pe->task && k < m->nt; k++)
    if (m->tasks[k].name && !strcmp(m->tasks[k].name, pe->task)) {
      const char *msg = lookup_str(docstr, m->tasks[k].msg);
      if (!msg) msg = lookup_str(m, m->tasks[k].msg);
      by_msg = msg && m->tasks[k].msg && strncmp(m->tasks[k].msg, "$(string.string", 15);
      tname = msg ? msg : m->tasks[k].name;
      tv = m->tasks[k].value;
      break;
    }
  if (pe->opcode) {
    const char *sd = std_opcode(pe->opcode, &ov);
    if (sd) oname = sd;
    else
      for (int pass = 0; pass < 2 && !oname; pass++)
        for (uint32_t k = 0; k < m->no; k++)
          if (m->ops[k].name && !strcmp(m->ops[k].name, pe->opcode) && (pass || m->ops[k].task == tv)) {
            const char *msg = lookup_str(docstr, m->ops[k].msg);
            oname = msg ? msg : m->ops[k].name;
            ov = m->ops[k].value;
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
    for (uint32_t k = mix->cap ? nidx_find(mix, pe->tmpl, tmpl_tid_at, m->tm) : 0; k < m->ntm; k++) {
      if (!m->tm[k].tid || strcmp(m->tm[k].tid, pe->tmpl)) continue;
      e->f = calloc(m->tm[k].nf ? m->tm[k].nf : 1, sizeof *e->f);
      if (!e->f) {
        free(e);
        return -1;
      }
      for (uint32_t q = 0; q < m->tm[k].nf; q++) {
        e->f[q] = m->tm[k].f[q];
        e->f[q].name = strdup(m->tm[k].f[q].name);
        e->f[q].key = NULL;
        if (e->f[q].map) { /* maps now owned by the provider: find by name */
          struct dec_map *mm = NULL;
          for (uint32_t z = 0; z < p->n_maps; z++)
            if (p->maps[z] == e->f[q].map) mm = p->maps[z];
          e->f[q].map = mm;
        }
      }
      e->nf = m->tm[k].nf;
      e->has_template = 1;
      e->quality = by_msg ? 3 : 1;
      break;
    }
  }
  dec_event_add(p, e);
  return 0;
}

/* Parse one <provider> element's contents (from *pos to </provider>) plus the document's
 * string table. Events are collected in a second pass once tasks/opcodes/templates are known. */
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
      named_set(x, &t, &m.ar, -1);
      if (!t.selfclose) cur_task = x->value;
    } else if (tag_is(&t, "opcode")) {
      GROW(m.ops, m.no, m.co);
      named_set(&m.ops[m.no++], &t, &m.ar, cur_task);
    } else if (tag_is(&t, "template")) {
      GROW(m.tm, m.ntm, m.ctm);
      cur_tm = &m.tm[m.ntm++];
      memset(cur_tm, 0, sizeof *cur_tm);
      cur_tm->tid = attr_a(&t, "tid", &m.ar);
      sdepth = 0;
      if (t.selfclose) cur_tm = NULL;
    } else if ((tag_is(&t, "data") || tag_is(&t, "struct")) && cur_tm) {
      if (read_field(&m, cur_tm, &t, sstack, &sdepth)) goto oom;
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
      if (read_map_entry(cur_map, &t, docstr)) goto oom;
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
  for (uint32_t i = 0; i < ne; i++)
    if (make_event(p, &evs[i], &m, docstr, &tix, &mix)) goto oom;
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

/* Load every manifest of the search path @dir (dec_manifest_paths: DIR[:DIR...], each
 * directory's files in sorted path order, the directories in the order given). For the same
 * (provider, id, version) the first schema of the best quality wins (so list the newest, most
 * complete manifests first: ../shared/manifests-next before ../shared/manifests). */
void dec_manifest_scan_dir(struct etw_decoder *d, const char *dir) {
  int n = 0;
  char **list = NULL;
  dec_manifest_paths(dir, &list, &n);
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
  if (!memcmp(g, DEC_GUID_CLR_RUNTIME, 16)) dec_builtin_supplements(d);
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
  dec_manifest_paths(dir, &list, &n);
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
  if (!lazy_find(L, DEC_GUID_CLR_RUNTIME)) dec_builtin_supplements(d);
}

/* ---- EventSource ManifestData (0xFFFE) */
void dec_eventsource_chunk(struct etw_decoder *d, const struct etw_rec *r) {
  if (r->user_len < 8) return;
  const unsigned char *p = r->user_data;
  if (p[0] != 1 || p[3] != 0x5B) return;
  if (!memcmp(r->provider_id, DEC_GUID_CLR_RUNTIME, 16)) return;
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

