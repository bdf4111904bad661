/* linux_decode.c — the hot path of the Linux backend: raw tracefs events → encoded JSON.
 *
 * One `struct lx_dec` per reader thread (libtraceevent handles are not thread-safe). For every
 * event id seen, a descriptor is built once from the tep format: the `System` block as a
 * template (rendered by the shared etw_event_write_system with marker values and cut at the
 * markers, so the shape is exactly the core's) and an array of {`,"key":` literal, offset, size,
 * kind}. The per-event loop then only copies literals and formats numbers: no tep list walks,
 * no strlen, no tep_print_event.
 *
 * Layout facts relied upon (checked at descriptor build, bounds-checked per event): host and
 * kernel share endianness (live tracing only); `__data_loc` is a u32 (len << 16 | offset),
 * `__rel_loc` the same with the offset relative to the end of the field.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include <event-parse.h>
#include <kbuffer.h>
#include <tracefs.h>

#include "linux/linux_int.h"

#define MARK_TS 1234567800LL /* renders as 1970-01-01T00:00:01.2345678Z */
#define MARK_PID 987654321
#define MARK_TID 987654322
#define LX_MAX_EVENT_ID 65535
#define LX_TGID_SLOTS 4096
#define LX_TGID_TTL 2000000000ULL  /* ns of trace time */
#define LX_TGID_LOOKUPS 2000       /* per second per reader: at most ~20 ms of /proc reads */

/* 8 decimal digits of x < 1e8, as byte values 0..9, most significant in the lowest byte
 * (SWAR: two 4-digit lanes, then four 2-digit lanes; checked exhaustively for all x < 1e8) */
static inline __attribute__((always_inline)) uint64_t dig8(uint32_t x) {
  uint64_t merged = (uint64_t)(x / 10000) | ((uint64_t)(x % 10000) << 32);
  uint64_t hundreds = ((merged * 10486) >> 20) & ((0x7FULL << 32) | 0x7FULL);
  uint64_t tens = merged - hundreds * 100;
  uint64_t m2 = hundreds | (tens << 16);
  uint64_t t2 = ((m2 * 103) >> 10) & 0x000F000F000F000FULL;
  uint64_t ones = m2 - t2 * 10;
  return t2 | (ones << 8);
}

#define ASCII0 0x3030303030303030ULL

/* exactly 8 digits */
static inline __attribute__((always_inline)) char *put8(char *p, uint32_t x) {
  uint64_t a = dig8(x) + ASCII0;
  memcpy(p, &a, 8);
  return p + 8;
}

/* x < 1e8 without leading zeros ("0" for 0); writes 8 bytes */
static inline __attribute__((always_inline)) char *put_lead(char *p, uint32_t x) {
  uint64_t d = dig8(x);
  int tz = d ? __builtin_ctzll(d) >> 3 : 7;
  d = (d >> (tz * 8)) + ASCII0;
  memcpy(p, &d, 8);
  return p + 8 - tz;
}

/* writes v in decimal at p, returns the end; p must have LX_NUM_MAX writable bytes */
#define LX_NUM_MAX 28
static inline __attribute__((always_inline)) char *put_u64(char *p, uint64_t v) {
  if (v < 10) { /* flags, fds, small args: the most common values by far */
    *p = (char)('0' + v);
    return p + 1;
  }
  if (v < 100000000ULL) return put_lead(p, (uint32_t)v);
  if (v < 10000000000000000ULL) {
    p = put_lead(p, (uint32_t)(v / 100000000ULL));
    return put8(p, (uint32_t)(v % 100000000ULL));
  }
  uint64_t rest = v % 10000000000000000ULL;
  p = put_lead(p, (uint32_t)(v / 10000000000000000ULL));
  p = put8(p, (uint32_t)(rest / 100000000ULL));
  return put8(p, (uint32_t)(rest % 100000000ULL));
}

static inline __attribute__((always_inline)) char *put_i64(char *p, int64_t v) {
  if (v < 0) {
    *p++ = '-';
    return put_u64(p, (uint64_t)0 - (uint64_t)v);
  }
  return put_u64(p, (uint64_t)v);
}

/* copy @n bytes in 16-byte blocks: dst and src must have 15 bytes of slack */
static inline void cp16(char *d, const char *s, size_t n) {
  for (size_t i = 0; i < n; i += 16) memcpy(d + i, s + i, 16);
}

/* same in 32-byte blocks: dst and src must have 31 bytes of slack */
static inline void cp32(char *d, const char *s, size_t n) {
  for (size_t i = 0; i < n; i += 32) memcpy(d + i, s + i, 32);
}

/* pointer to @n writable bytes at the end of @w, or NULL (w->err set) */
static inline char *res(struct etw_jw *w, size_t n) {
  if (etw_jw_reserve(w, n)) return NULL;
  return w->buf + w->len;
}

/* 1 when none of the 8 bytes needs escaping in JSON (< 0x20, '"', '\\', >= 0x80) */
static inline int plain8(uint64_t v) {
  const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
  uint64_t lt20 = (v - ones * 0x20) & ~v;
  uint64_t q = v ^ (ones * 0x22), b = v ^ (ones * 0x5c);
  uint64_t zq = (q - ones) & ~q, zb = (b - ones) & ~b;
  return ((lt20 | zq | zb | v) & high) == 0;
}

static inline uint64_t zero_bytes(uint64_t v) {
  return (v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL;
}

/* JSON string of the C string in s[0..max) (up to the first NUL). Plain ASCII (the usual case:
 * comms, paths) is scanned 8 bytes at a time and copied without any libc call; anything that
 * needs escaping or UTF-8 checking goes through etw_jw_str. Never reads outside s[0..max). */
static void put_cstr(struct etw_jw *w, const unsigned char *s, size_t max) {
  size_t n = 0;
  int plain = 1;
  for (; n + 8 <= max; n += 8) {
    uint64_t v;
    memcpy(&v, s + n, 8);
    uint64_t z = zero_bytes(v);
    if (z) {
      size_t k = (size_t)__builtin_ctzll(z) >> 3;
      if (k) {
        uint64_t m = ~0ULL >> (64 - 8 * k); /* the k bytes before the NUL */
        if (!plain8((v & m) | (0x6161616161616161ULL & ~m))) plain = 0;
      }
      n += k;
      goto have_len;
    }
    if (!plain8(v)) plain = 0;
  }
  for (; n < max && s[n]; n++) {
    unsigned char c = s[n];
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) plain = 0;
  }
have_len:
  if (!plain) {
    etw_jw_str(w, (const char *)s, n);
    return;
  }
  char *q = res(w, n + 2);
  if (!q) return;
  *q++ = '"';
  if (n >= 8) {
    for (size_t i = 0; i + 8 <= n; i += 8) memcpy(q + i, s + i, 8);
    memcpy(q + n - 8, s + n - 8, 8); /* overlapping tail */
  } else {
    for (size_t i = 0; i < n; i++) q[i] = (char)s[i];
  }
  q[n] = '"';
  w->len += n + 2;
}

static inline uint64_t ld_u(const unsigned char *p, unsigned size) {
  switch (size) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}

static inline int64_t ld_s(const unsigned char *p, unsigned size) {
  switch (size) {
    case 1: return (int8_t)p[0];
    case 2: { int16_t v; memcpy(&v, p, 2); return v; }
    case 4: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
  }
}

/* ---- descriptors */

static void desc_free(struct lx_evdesc *e) {
  if (!e) return;
  free(e->f);
  free(e->tmpl);
  free(e);
}

static int find_sub(const char *hay, size_t n, size_t from, const char *needle) {
  size_t m = strlen(needle);
  for (size_t i = from; i + m <= n; i++)
    if (!memcmp(hay + i, needle, m)) return (int)i;
  return -1;
}

static void build_template(struct lx_dec *d, struct lx_evdesc *e) {
  struct etw_jw w;
  etw_jw_init(&w, 4096);
  struct etw_sys sys = {0};
  sys.provider = e->provider;
  sys.event_id = e->id;
  sys.level = 4;
  sys.ts_ns = MARK_TS;
  sys.event_name = e->name;
  sys.pid = MARK_PID;
  sys.tid = MARK_TID;
  sys.cpu = d->cpu;
  etw_event_write_system(&w, &sys);
  etw_jw_lit(&w, ",\"EventData\":{");
  e->tmpl_ok = 0;
  if (w.err) goto out;
  {
    const char *s = w.buf;
    size_t n = w.len;
    int a = find_sub(s, n, 0, "\"1970-01-01T00:00:01.2345678Z\"");
    int b = a < 0 ? -1 : find_sub(s, n, (size_t)a, "987654321");
    int c = b < 0 ? -1 : find_sub(s, n, (size_t)b + 9, "987654322");
    if (a < 0 || b < 0 || c < 0 || n > 65535) goto out;
    e->tmpl = calloc(1, n + 32);
    if (!e->tmpl) goto out;
    memcpy(e->tmpl, s, n);
    e->t_off[0] = 0;
    e->t_len[0] = (uint16_t)a;
    e->t_off[1] = (uint16_t)(a + 30);
    e->t_len[1] = (uint16_t)(b - (a + 30));
    e->t_off[2] = (uint16_t)(b + 9);
    e->t_len[2] = (uint16_t)(c - (b + 9));
    e->t_off[3] = (uint16_t)(c + 9);
    e->t_len[3] = (uint16_t)(n - (size_t)(c + 9));
    e->tmpl_ok = 1;
  }
out:
  etw_jw_free(&w);
}

static int field_kind(const struct tep_format_field *f, struct lx_field *o) {
  unsigned long fl = f->flags;
  unsigned elem = f->elementsize;
  o->esigned = (fl & TEP_FIELD_IS_SIGNED) ? 1 : 0;
  o->rel = (fl & TEP_FIELD_IS_RELATIVE) ? 1 : 0;
  if (fl & TEP_FIELD_IS_DYNAMIC) {
    if (f->size != 4) return LX_BYTES;
    if ((fl & TEP_FIELD_IS_STRING) || (f->type && strstr(f->type, "char") && elem <= 1))
      return LX_DSTR;
    if (elem == 1 || elem == 2 || elem == 4 || elem == 8) {
      o->elem = (uint8_t)elem;
      return LX_DARR;
    }
    return LX_BYTES;
  }
  if (fl & TEP_FIELD_IS_ARRAY) {
    if ((fl & TEP_FIELD_IS_STRING) || (f->type && strstr(f->type, "char") && elem <= 1))
      return LX_STR;
    if (!elem && f->arraylen) elem = (unsigned)f->size / f->arraylen;
    if ((elem == 1 || elem == 2 || elem == 4 || elem == 8) && f->size % (int)elem == 0) {
      o->elem = (uint8_t)elem;
      return LX_ARR;
    }
    return LX_BYTES;
  }
  if (fl & TEP_FIELD_IS_POINTER) return (f->size == 4 || f->size == 8) ? LX_PTR : LX_BYTES;
  switch (f->size) {
    case 1: return o->esigned ? LX_S8 : LX_U8;
    case 2: return o->esigned ? LX_S16 : LX_U16;
    case 4: return o->esigned ? LX_S32 : LX_U32;
    case 8: return o->esigned ? LX_S64 : LX_U64;
    default: return LX_BYTES;
  }
}

static struct lx_evdesc *desc_build(struct lx_dec *d, struct tep_event *ev) {
  struct lx_evdesc *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->provider = etw_intern(ev->system ? ev->system : "");
  e->name = etw_intern(ev->name ? ev->name : "");
  e->id = (uint16_t)ev->id;
  int nf = 0;
  for (struct tep_format_field *f = ev->format.fields; f; f = f->next) nf++;
  e->f = calloc((size_t)(nf ? nf : 1), sizeof *e->f);
  if (!e->f) {
    free(e);
    return NULL;
  }
  int i = 0;
  for (struct tep_format_field *f = ev->format.fields; f; f = f->next) {
    struct lx_field *o = &e->f[i];
    const char *nm = f->name ? f->name : "";
    if (!strncmp(nm, "common_", 7)) continue;
    size_t n = strlen(nm);
    if (n > LX_KEY_MAX - 32) n = LX_KEY_MAX - 32;
    size_t k = 0;
    if (i) o->key[k++] = ','; /* the first field of EventData has no comma */
    o->key[k++] = '"';
    for (size_t j = 0; j < n; j++) {
      char c = nm[j];
      o->key[k++] = (c == '"' || c == '\\' || (unsigned char)c < 0x20) ? '_' : c;
    }
    o->key[k++] = '"';
    o->key[k++] = ':';
    o->key_len = (uint16_t)k;
    o->off = (uint32_t)(f->offset < 0 ? 0 : f->offset);
    o->size = (uint32_t)(f->size < 0 ? 0 : f->size);
    o->kind = (uint8_t)field_kind(f, o);
    i++;
  }
  e->nf = (uint16_t)i;
  build_template(d, e);
  /* fast-path bounds: every fixed field inside records of at least min_size bytes; output of
   * at most max_out bytes plus, with __data_loc fields, 22 bytes per record byte */
  size_t out = (size_t)e->t_len[0] + e->t_len[1] + e->t_len[2] + e->t_len[3] + 30 +
               2 * LX_NUM_MAX + 128;
  for (int j = 0; j < i; j++) {
    const struct lx_field *o = &e->f[j];
    uint32_t end = o->off + o->size;
    if (end > e->min_size) e->min_size = end;
    out += o->key_len + 32u;
    switch (o->kind) {
      case LX_STR: out += 6u * o->size + 2; break;
      case LX_ARR: out += 2 + (size_t)(o->size / (o->elem ? o->elem : 1)) * 21 + LX_NUM_MAX; break;
      case LX_DSTR: case LX_DARR: e->dyn = 1; break;
      case LX_BYTES: out += 4u * o->size / 3 + 8; break;
      default: out += LX_NUM_MAX; break;
    }
  }
  e->max_out = out;
  return e;
}

int lx_tep_add_system(struct tep_handle *tep, const char *sys) {
  char **evs = tracefs_system_events(NULL, sys);
  if (!evs) return -1;
  for (int j = 0; evs[j]; j++) {
    int sz = 0;
    char *fmt = tracefs_event_file_read(NULL, sys, evs[j], "format", &sz);
    if (fmt && sz > 0) tep_parse_event(tep, fmt, (size_t)sz, sys);
    free(fmt);
  }
  tracefs_list_free(evs);
  return 0;
}

struct tep_handle *lx_tep_new(const char *const *systems) {
  struct tep_handle *tep = tep_alloc();
  if (!tep) return NULL;
  enum tep_endian e = tep_is_bigendian() ? TEP_BIG_ENDIAN : TEP_LITTLE_ENDIAN;
  tep_set_file_bigendian(tep, e);
  tep_set_local_bigendian(tep, e);
  tep_set_long_size(tep, (int)sizeof(long));
  tep_set_page_size(tep, getpagesize());
  int sz = 0;
  char *hp = tracefs_instance_file_read(NULL, "events/header_page", &sz);
  if (!hp || sz <= 0 || tep_parse_header_page(tep, hp, (unsigned long)sz, (int)sizeof(long))) {
    free(hp);
    tep_free(tep);
    return NULL;
  }
  free(hp);
  for (int i = 0; systems && systems[i]; i++) lx_tep_add_system(tep, systems[i]);
  return tep;
}

int lx_dec_init(struct lx_dec *d, struct tep_handle *tep, int cpu, int64_t mono_to_real) {
  memset(d, 0, sizeof *d);
  d->tep = tep;
  d->cpu = cpu;
  d->mono_to_real = mono_to_real;
  d->type_off = 0;
  d->type_size = 2;
  d->pid_off = 4;
  d->sec = INT64_MIN;
  d->resolve_tgid = 1;
  d->tg = calloc(LX_TGID_SLOTS, sizeof *d->tg); /* NULL: ProcessID = ThreadID */
  d->page_size = (uint32_t)getpagesize();
  /* the direct page walker assumes the 64-bit little-endian page header (u64 ts, u64 commit) */
  d->walk = (sizeof(long) == 8 && !tep_is_bigendian() && tep && d->page_size >= 64) ? 1 : 0;
  d->kbuf = tep ? tep_kbuffer(tep) : NULL;
  if (!d->kbuf) d->kbuf = kbuffer_alloc(KBUFFER_LSIZE_8, KBUFFER_ENDIAN_LITTLE);
  if (!d->kbuf) return -1;
  /* find the common header layout from any event */
  struct tep_event **evs = tep ? tep_list_events(tep, TEP_EVENT_SORT_ID) : NULL;
  if (evs && evs[0]) {
    struct tep_format_field *t = tep_find_common_field(evs[0], "common_type");
    struct tep_format_field *p = tep_find_common_field(evs[0], "common_pid");
    if (t && (t->size == 1 || t->size == 2 || t->size == 4)) {
      d->type_off = (uint32_t)t->offset;
      d->type_size = (uint32_t)t->size;
    }
    if (p && p->size == 4) d->pid_off = (uint32_t)p->offset;
  }
  return 0;
}

void lx_dec_reset(struct lx_dec *d) {
  for (uint32_t i = 0; i < d->cache_cap; i++) desc_free(d->cache[i]);
  free(d->cache);
  d->cache = NULL;
  d->cache_cap = 0;
}

void lx_dec_fini(struct lx_dec *d) {
  lx_dec_reset(d);
  if (d->kbuf) kbuffer_free(d->kbuf);
  if (d->tep) tep_free(d->tep);
  free(d->tg);
  d->tg = NULL;
  d->kbuf = NULL;
  d->tep = NULL;
}

static struct lx_evdesc *desc_get(struct lx_dec *d, uint32_t id) {
  if (id < d->cache_cap && d->cache[id]) return d->cache[id];
  if (id > LX_MAX_EVENT_ID || !d->tep) return NULL;
  struct tep_event *ev = tep_find_event(d->tep, (int)id);
  if (!ev) return NULL;
  if (id >= d->cache_cap) {
    uint32_t nc = d->cache_cap ? d->cache_cap : 64;
    while (nc <= id) nc *= 2;
    struct lx_evdesc **n = realloc(d->cache, nc * sizeof *n);
    if (!n) return NULL;
    memset(n + d->cache_cap, 0, (nc - d->cache_cap) * sizeof *n);
    d->cache = n;
    d->cache_cap = nc;
  }
  d->cache[id] = desc_build(d, ev);
  return d->cache[id];
}

/* time: `"YYYY-MM-DDTHH:MM:SS.fffffffZ"` with the date part cached per second */
static inline char *put_time(struct lx_dec *d, char *p, int64_t ns) {
  int64_t sec = ns >= 0 ? ns / 1000000000 : -((-ns + 999999999) / 1000000000);
  if (sec != d->sec) {
    struct etw_jw w;
    etw_jw_init(&w, 64);
    etw_jw_unix_ns(&w, sec * 1000000000);
    d->sec_ok = !w.err && w.len == 30 && w.buf[20] == '.';
    if (d->sec_ok) memcpy(d->secpfx, w.buf, 21);
    etw_jw_free(&w);
    d->sec = sec;
  }
  if (!d->sec_ok) {
    memcpy(p, "null", 4);
    return p + 4;
  }
  memcpy(p, d->secpfx, 21);
  p += 21;
  uint32_t frac = (uint32_t)((ns - sec * 1000000000) / 100); /* 0..9999999 */
  uint64_t a = (dig8(frac) >> 8) + ASCII0;                     /* 7 digits + 1 spare byte */
  memcpy(p, &a, 8);
  p[7] = 'Z';
  p[8] = '"';
  return p + 9;
}

static void write_undecoded(struct lx_dec *d, struct etw_jw *w, const unsigned char *data,
                            uint32_t size, uint64_t ts, uint32_t type, int32_t pid,
                            int32_t tid, const char *reason) {
  struct etw_sys sys = {0};
  sys.provider = "tracefs";
  sys.event_id = type;
  sys.level = 4;
  sys.ts_ns = (int64_t)ts + d->mono_to_real;
  sys.pid = pid;
  sys.tid = tid;
  sys.cpu = d->cpu;
  etw_event_write_system(w, &sys);
  etw_jw_lit(w, ",\"Undecoded\":{\"Reason\":");
  etw_jw_cs(w, reason);
  etw_jw_lit(w, ",\"Payload\":");
  etw_jw_base64(w, data, size);
  etw_jw_lit(w, "}}");
}

static void write_num_array(struct etw_jw *w, const unsigned char *p, uint32_t n, unsigned elem,
                            int sgn) {
  char *q = res(w, 2 + (size_t)n * 21 + LX_NUM_MAX);
  if (!q) return;
  char *s = q;
  *q++ = '[';
  if (elem == 8 && !sgn) { /* the common case: unsigned long arrays (syscall args) */
    for (uint32_t i = 0; i < n; i++) {
      uint64_t v;
      memcpy(&v, p + (size_t)i * 8, 8);
      *q = ',';
      q += i != 0;
      q = put_u64(q, v);
    }
    *q++ = ']';
    w->len += (size_t)(q - s);
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (i) *q++ = ',';
    if (sgn)
      q = put_i64(q, ld_s(p + (size_t)i * elem, elem));
    else
      q = put_u64(q, ld_u(p + (size_t)i * elem, elem));
  }
  *q++ = ']';
  w->len += (size_t)(q - s);
}


/* Tgid of @tid from /proc/<tid>/status, or 0 (gone, unreadable) */
static int32_t proc_tgid(int32_t tid) {
  char path[48], buf[512];
  snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *t = strstr(buf, "\nTgid:");
  return t ? (int32_t)atoi(t + 7) : 0;
}

static int32_t tgid_of(struct lx_dec *d, int32_t tid, uint64_t ts) {
  if (!d->resolve_tgid || tid <= 0 || !d->tg) return tid;
  struct lx_tgid *e = &d->tg[(uint32_t)tid & (LX_TGID_SLOTS - 1)];
  if (e->tid == tid && ts - e->t < LX_TGID_TTL) return e->tgid;
  if (ts - d->tg_win >= 1000000000ULL) {
    d->tg_win = ts;
    d->tg_left = LX_TGID_LOOKUPS;
  }
  int32_t tg = 0;
  uint64_t t = ts;
  if (d->tg_left > 0) {
    d->tg_left--;
    tg = proc_tgid(tid);
  } else {
    t = ts - LX_TGID_TTL + 100000000ULL; /* over budget: assume, retry in 100 ms */
  }
  if (tg <= 0) tg = tid; /* gone already: single-threaded processes have tgid == tid anyway */
  e->tid = tid;
  e->tgid = tg;
  e->t = t;
  return tg;
}

/* ProcessID / ThreadID text, cached while they repeat (bursts come from one task) */
static inline void id_texts(struct lx_dec *d, int32_t pid, int32_t tid) {
  if (pid != d->last_pid || !d->pid_len) {
    char *q = put_i64(d->pid_txt, pid);
    d->pid_len = (uint8_t)(q - d->pid_txt);
    d->last_pid = pid;
  }
  if (tid != d->last_tid || !d->tid_len) {
    if (tid == pid) { /* the common case: a process's main thread */
      memcpy(d->tid_txt, d->pid_txt, 24);
      d->tid_len = d->pid_len;
    } else {
      char *q = put_i64(d->tid_txt, tid);
      d->tid_len = (uint8_t)(q - d->tid_txt);
    }
    d->last_tid = tid;
  }
}

/* JSON string of the C string in s[0..max) written at p, space already reserved (6*max+2);
 * returns the new end. Non-plain text goes through etw_jw_str (which finds the room). */
static inline char *fput_cstr(struct etw_jw *w, char *p, const unsigned char *s, size_t max) {
  size_t n = 0;
  int plain = 1;
  for (; n + 8 <= max; n += 8) {
    uint64_t v;
    memcpy(&v, s + n, 8);
    uint64_t z = zero_bytes(v);
    if (z) {
      size_t k = (size_t)__builtin_ctzll(z) >> 3;
      if (k) {
        uint64_t m = ~0ULL >> (64 - 8 * k);
        if (!plain8((v & m) | (0x6161616161616161ULL & ~m))) plain = 0;
      }
      n += k;
      goto have_len;
    }
    if (!plain8(v)) plain = 0;
  }
  for (; n < max && s[n]; n++) {
    unsigned char c = s[n];
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) plain = 0;
  }
have_len:
  if (!plain) {
    w->len = (size_t)(p - w->buf);
    etw_jw_str(w, (const char *)s, n);
    return w->buf + w->len;
  }
  *p++ = '"';
  if (n >= 8) {
    for (size_t i = 0; i + 8 <= n; i += 8) memcpy(p + i, s + i, 8);
    memcpy(p + n - 8, s + n - 8, 8);
  } else {
    for (size_t i = 0; i < n; i++) p[i] = (char)s[i];
  }
  p[n] = '"';
  return p + n + 1;
}

/* The whole event at p with room for e->max_out (+22/byte with __data_loc) already reserved and
 * every fixed field inside the record: no reserve or bounds checks per field. */
static char *encode_fast(struct lx_dec *d, const struct lx_evdesc *e, struct etw_jw *w, char *p,
                         const unsigned char *data, uint32_t size, int64_t tsr, int32_t pid,
                         int32_t tid) {
  const char *t = e->tmpl;
  cp32(p, t, e->t_len[0]);
  p += e->t_len[0];
  p = put_time(d, p, tsr);
  cp16(p, t + e->t_off[1], e->t_len[1]);
  p += e->t_len[1];
  id_texts(d, pid, tid);
  memcpy(p, d->pid_txt, 16);
  p += d->pid_len;
  cp16(p, t + e->t_off[2], e->t_len[2]);
  p += e->t_len[2];
  memcpy(p, d->tid_txt, 16);
  p += d->tid_len;
  cp16(p, t + e->t_off[3], e->t_len[3]);
  p += e->t_len[3];
  const struct lx_field *f = e->f, *fe = e->f + e->nf;
  for (; f < fe; f++) {
    memcpy(p, f->key, 16);
    if (f->key_len > 16) cp16(p + 16, f->key + 16, f->key_len - 16u);
    p += f->key_len;
    const unsigned char *fp = data + f->off;
    switch (f->kind) {
      case LX_U8: p = put_u64(p, fp[0]); break;
      case LX_U16: { uint16_t v; memcpy(&v, fp, 2); p = put_u64(p, v); break; }
      case LX_U32: { uint32_t v; memcpy(&v, fp, 4); p = put_u64(p, v); break; }
      case LX_U64: { uint64_t v; memcpy(&v, fp, 8); p = put_u64(p, v); break; }
      case LX_S8: p = put_i64(p, (int8_t)fp[0]); break;
      case LX_S16: { int16_t v; memcpy(&v, fp, 2); p = put_i64(p, v); break; }
      case LX_S32: { int32_t v; memcpy(&v, fp, 4); p = put_i64(p, v); break; }
      case LX_S64: { int64_t v; memcpy(&v, fp, 8); p = put_i64(p, v); break; }
      case LX_STR: p = fput_cstr(w, p, fp, f->size); break;
      case LX_DSTR: {
        uint32_t v;
        memcpy(&v, fp, 4);
        uint32_t off = (v & 0xffff) + (f->rel ? f->off + f->size : 0), len = v >> 16;
        if ((uint64_t)off + len > size) {
          memcpy(p, "null", 4);
          p += 4;
        } else {
          p = fput_cstr(w, p, data + off, len);
        }
        break;
      }
      case LX_ARR:
        if (f->elem == 8 && !f->esigned) { /* unsigned long args[6] and the like */
          uint32_t n = f->size / 8;
          *p++ = '[';
          for (uint32_t k = 0; k < n; k++) {
            uint64_t v;
            memcpy(&v, fp + (size_t)k * 8, 8);
            *p = ',';
            p += k != 0;
            p = put_u64(p, v);
          }
          *p++ = ']';
          break;
        }
        /* fall through */
      default: { /* other arrays, pointers, bytes: the checked writers (room is reserved) */
        w->len = (size_t)(p - w->buf);
        switch (f->kind) {
          case LX_PTR: etw_jw_hex(w, ld_u(fp, f->size)); break;
          case LX_ARR: write_num_array(w, fp, f->size / f->elem, f->elem, f->esigned); break;
          case LX_DARR: {
            uint32_t v = (uint32_t)ld_u(fp, 4);
            uint32_t off = (v & 0xffff) + (f->rel ? f->off + f->size : 0), len = v >> 16;
            if ((uint64_t)off + len > size)
              etw_jw_lit(w, "null");
            else
              write_num_array(w, data + off, len / f->elem, f->elem, f->esigned);
            break;
          }
          default: etw_jw_base64(w, fp, f->size); break;
        }
        p = w->buf + w->len;
        break;
      }
    }
  }
  p[0] = '}';
  p[1] = '}';
  return p + 2;
}

void lx_dec_event(struct lx_dec *d, const unsigned char *data, uint32_t size, uint64_t ts,
                  struct lx_sink *s) {
  if (!s->b) {
    atomic_fetch_add_explicit(&d->enc_dropped, 1, memory_order_relaxed);
    return;
  }
  if (etw_batch_full(s->b)) {
    s->flush(s->ctx, s);
    if (!s->b) {
      atomic_fetch_add_explicit(&d->enc_dropped, 1, memory_order_relaxed);
      return;
    }
  }
  struct etw_jw *w = &s->b->data;
  size_t mark = w->len;
  uint32_t type = 0;
  int32_t pid = -1, tid = -1;
  if (size >= d->type_off + d->type_size) type = (uint32_t)ld_u(data + d->type_off, d->type_size);
  if (size >= d->pid_off + 4) tid = (int32_t)ld_s(data + d->pid_off, 4);
  pid = tgid_of(d, tid, ts);
  int64_t tsr = (int64_t)ts + d->mono_to_real;
  struct lx_evdesc *e = desc_get(d, type);
  struct etw_evref h;
  h.ts_ns = tsr;
  h.pid = (uint32_t)pid;
  h.tid = (uint32_t)tid;
  h.level = 4;
  h.cpu = (uint8_t)d->cpu;
  h.event_id = (uint16_t)type;
  if (!e || !e->tmpl_ok) {
    write_undecoded(d, w, data, size, ts, type, pid, tid, e ? "template" : "unknown event id");
    h.provider = etw_intern("tracefs");
    h.name = NULL;
    atomic_fetch_add_explicit(&d->undecoded, 1, memory_order_relaxed);
  } else {
    h.provider = e->provider;
    h.name = e->name;
    if (size >= e->min_size && size <= 65536) {
      size_t need = e->max_out + (e->dyn ? 22u * size : 0);
      /* never ask beyond the batch maximum: a failed reserve would poison the writer */
      char *p = w->len + need < w->max ? res(w, need) : NULL;
      if (p) {
        p = encode_fast(d, e, w, p, data, size, tsr, pid, tid);
        w->len = (size_t)(p - w->buf);
        goto commit;
      }
    }
    size_t fixed = (size_t)e->t_len[0] + e->t_len[1] + e->t_len[2] + e->t_len[3] + 30 +
                   2 * LX_NUM_MAX + 64;
    char *p = res(w, fixed);
    if (p) {
      char *p0 = p;
      const char *t = e->tmpl;
      cp32(p, t, e->t_len[0]);
      p += e->t_len[0];
      p = put_time(d, p, tsr);
      cp16(p, t + e->t_off[1], e->t_len[1]);
      p += e->t_len[1];
      id_texts(d, pid, tid);
      memcpy(p, d->pid_txt, 16);
      p += d->pid_len;
      cp16(p, t + e->t_off[2], e->t_len[2]);
      p += e->t_len[2];
      memcpy(p, d->tid_txt, 16);
      p += d->tid_len;
      cp16(p, t + e->t_off[3], e->t_len[3]);
      p += e->t_len[3];
      w->len += (size_t)(p - p0);
    }
    for (uint32_t i = 0; i < e->nf && !w->err; i++) {
      const struct lx_field *f = &e->f[i];
      const size_t koff = 0;
      const size_t klen = f->key_len;
      if (f->off + f->size > size) {
        char *q = res(w, klen + 4 + 16);
        if (!q) break;
        cp16(q, f->key + koff, klen);
        memcpy(q + klen, "null", 4);
        w->len += klen + 4;
        continue;
      }
      const unsigned char *fp = data + f->off;
      if (f->kind <= LX_S64) {
        char *q = res(w, klen + LX_NUM_MAX + 16);
        if (!q) break;
        char *q0 = q;
        cp16(q, f->key + koff, klen);
        q += klen;
        if (f->kind <= LX_U64)
          q = put_u64(q, ld_u(fp, f->size));
        else
          q = put_i64(q, ld_s(fp, f->size));
        w->len += (size_t)(q - q0);
        continue;
      }
      etw_jw_raw(w, f->key + koff, klen);
      switch (f->kind) {
        case LX_PTR:
          etw_jw_hex(w, ld_u(fp, f->size));
          break;
        case LX_STR:
          put_cstr(w, fp, f->size);
          break;
        case LX_ARR:
          write_num_array(w, fp, f->size / f->elem, f->elem, f->esigned);
          break;
        case LX_DSTR:
        case LX_DARR: {
          uint32_t v = (uint32_t)ld_u(fp, 4);
          uint32_t off = v & 0xffff, len = v >> 16;
          if (f->rel) off += f->off + f->size;
          if ((uint64_t)off + len > size) {
            etw_jw_lit(w, "null");
            break;
          }
          const unsigned char *dp = data + off;
          if (f->kind == LX_DSTR)
            put_cstr(w, dp, len);
          else
            write_num_array(w, dp, len / f->elem, f->elem, f->esigned);
          break;
        }
        default:
          etw_jw_base64(w, fp, f->size);
          break;
      }
    }
    etw_jw_raw(w, "}}", 2);
  }
commit:
  if (etw_batch_commit(s->b, mark, &h) == 0)
    atomic_fetch_add_explicit(&d->events, 1, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&d->enc_dropped, 1, memory_order_relaxed);
}

/* kbuffer's general walker, kept as the reference and the fallback */
static uint64_t page_kbuffer(struct lx_dec *d, void *page, struct lx_sink *s) {
  unsigned long long ts;
  uint64_t n = 0;
  if (kbuffer_load_subbuffer(d->kbuf, page) < 0) return 0;
  for (void *ev = kbuffer_read_event(d->kbuf, &ts); ev; ev = kbuffer_next_event(d->kbuf, &ts)) {
    int sz = kbuffer_event_size(d->kbuf);
    if (sz <= 0) continue;
    if (s) lx_dec_event(d, ev, (uint32_t)sz, ts, s);
    n++;
  }
  return n;
}

/* The ring-buffer page walked directly (64-bit little-endian kernels; checked at init):
 * u64 timestamp, u64 commit (data size | RB_MISSED_* flags in bits 30..31), then events with a
 * u32 header {type_len:5, time_delta:27}: 1..28 = data of type_len*4 bytes; 0 = data whose
 * length (+4) is in the next u32; 29 = padding (delta 0: end of page); 30 = time extend;
 * 31 = absolute time stamp. Same results as kbuffer (tests/unit/test_linux_decode.c). */
#define RB_PADDING 29
#define RB_TIME_EXTEND 30
#define RB_TIME_STAMP 31
static uint64_t page_walk(struct lx_dec *d, const unsigned char *pg, struct lx_sink *s) {
  uint64_t ts, commit;
  memcpy(&ts, pg, 8);
  memcpy(&commit, pg + 8, 8);
  uint32_t size = (uint32_t)commit & 0x3fffffffu;
  if (size > d->page_size - 16) size = d->page_size - 16;
  const unsigned char *p = pg + 16, *end = p + size;
  uint64_t n = 0;
  while (p + 4 <= end) {
    uint32_t h;
    memcpy(&h, p, 4);
    uint32_t tl = h & 31, delta = h >> 5;
    if (tl >= 1 && tl <= 28) {
      ts += delta;
      uint32_t len = tl * 4;
      if (p + 4 + len > end) break;
      if (s) lx_dec_event(d, p + 4, len, ts, s);
      n++;
      p += 4 + len;
      continue;
    }
    if (p + 8 > end) break;
    uint32_t a0;
    memcpy(&a0, p + 4, 4);
    switch (tl) {
      case 0:
        if (a0 < 4 || p + 4 + (uint64_t)a0 > end) return n;
        ts += delta;
        if (s) lx_dec_event(d, p + 8, a0 - 4, ts, s);
        n++;
        p += 4 + ((a0 + 3) & ~3u);
        break;
      case RB_PADDING:
        if (!delta) return n; /* the rest of the page is empty */
        ts += delta;
        if (a0 < 4 || p + 4 + (uint64_t)a0 > end) return n;
        p += 4 + ((a0 + 3) & ~3u);
        break;
      case RB_TIME_EXTEND:
        ts += ((uint64_t)a0 << 27) + delta;
        p += 8;
        break;
      default: /* RB_TIME_STAMP */
        ts = (((uint64_t)a0 << 27) | delta) | (ts & 0xf800000000000000ULL);
        p += 8;
        break;
    }
  }
  return n;
}

uint64_t lx_dec_page(struct lx_dec *d, void *page, struct lx_sink *s) {
  if (d->walk == 1) return page_walk(d, page, s);
  return page_kbuffer(d, page, s);
}

uint64_t lx_count_page(struct lx_dec *d, void *page) {
  if (d->walk == 1) return page_walk(d, page, NULL);
  return page_kbuffer(d, page, NULL);
}
