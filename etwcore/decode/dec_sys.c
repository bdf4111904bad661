/* dec_sys.c — a cached writer for the "System" block (the hot path of every event).
 *
 * For a given (provider, GUID, id, version, level, task, opcode, keywords, names) the System
 * block is constant except TimeCreated, ProcessID, ThreadID and ProcessorID. The constant parts
 * are produced once by the shared etw_event_write_system (so the bytes stay identical to it),
 * split around the time and the execution fields, and kept in a small 2-way set-associative
 * cache per decoder (least recently used way replaced). Events with correlation IDs take the shared writer directly. TimeCreated is written
 * with a per-decoder cache of the current day. unit.test_decode_sys compares both writers on
 * every corpus event.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dec_tpl.h"
#include "decode.h"


#define SYSC_N 512
#define SYSC_BYTES 600

struct sysc {
  struct dec_sys_hint k; /* first: a hint slot points here (tag 0 = no schema's hint) */
  uint32_t set;          /* its set (index / 2) */
  uint64_t h;
  unsigned char guid[16];
  int has_guid;
  uint32_t id, ver, level, task, opcode;
  uint16_t plen, mlen; /* prefix (…"TimeCreated":) and middle (…"ProcessID":) */
  char buf[SYSC_BYTES];
};

/* The text `PID,"ProcessName":"…","ThreadID":TID,"ProcessorID":` of a (pid, tid) pair and the
 * pid's current name (≤ 10 + DEC_PNAME_MAX + 12 + 10 + 15 = 111 bytes; copied as EXC_COPY bytes).
 * dec_sys_pid_renamed empties the entries of a pid whose name changed. */
#define EXC_N 256
#define EXC_COPY 112
_Static_assert(10 + DEC_PNAME_MAX + 12 + 10 + 15 <= EXC_COPY, "EXC_COPY: the longest (pid, name, tid) text");
struct exc {
  uint64_t key; /* pid << 32 | tid as the record has them (0xFFFFFFFF = none) */
  uint32_t len; /* 0 = empty */
  char txt[116]; /* 128-byte entries */
};

struct dec_sysc {
  struct exc ex[EXC_N]; /* direct-mapped by tid */
  struct sysc e[SYSC_N]; /* SYSC_N / 2 sets of 2 ways (a direct-mapped cache thrashed when
                            two frequent events met in one slot) */
  unsigned char victim[SYSC_N / 2]; /* the way to replace next in each set */
  int64_t day;          /* cached day (FILETIME / 864e9), -1 = none */
  char date[12];        /* "\"YYYY-MM-DD" */
  uint64_t sec;         /* cached second (FILETIME / 10^7), valid when sec_ok */
  int sec_ok;
  char sectext[24];     /* "\"YYYY-MM-DDTHH:MM:SS." (21 bytes) */
  const struct etw_decoder *dec; /* its decoder (the process names: dec_proc_text) */
};

struct dec_kplan dec_kplan_none; /* (key 0: a record's key is never 0) */

void dec_plans_init(struct etw_decoder *d) {
  for (size_t i = 0; i < sizeof d->kplan / sizeof d->kplan[0]; i++) d->kplan[i] = &dec_kplan_none;
}

void dec_sys_free(struct etw_decoder *d) {
  free(d->sysc);
  d->sysc = NULL;
  dec_plans_free(d);
}

void dec_plans_free(struct etw_decoder *d) {
  for (size_t i = 0; i < sizeof d->kplan / sizeof d->kplan[0]; i++) {
    if (d->kplan[i] != &dec_kplan_none) free(d->kplan[i]);
    d->kplan[i] = &dec_kplan_none;
  }
  for (size_t i = 0; i < DEC_EPLAN_N; i++) {
    if (d->eplan[i]) free(d->eplan[i]->memo);
    free(d->eplan[i]);
    d->eplan[i] = NULL;
  }
}

static const char EXEC[] = ",\"Execution\":{\"ProcessID\":";

/* The constant text of @s's block with the shared writer, split around the time: the prefix
 * (…"TimeCreated":) then the middle (…"ProcessID":) into @buf (@cap bytes); 0 = usable. */
static int sys_text(const struct etw_sys *s, char *buf, size_t cap, uint16_t *plen_out, uint16_t *mlen_out,
                    int whole) {
  struct etw_sys t = *s;
  t.filetime = 1; /* "1601-01-01T00:00:00.0000001Z" */
  t.pid = t.tid = -1;
  t.process_name = NULL; /* (the (pid, name, tid) text is put_pidtid's) */
  t.cpu = -1;
  t.activity_id = t.related_activity_id = NULL;
  struct etw_jw w;
  etw_jw_init(&w, SYSC_BYTES * 2);
  etw_event_write_system(&w, &t);
  int rc = -1;
  const char *b = etw_jw_cstr(&w);
  const char *tc = strstr(b, "\"TimeCreated\":\"1601-01-01T00:00:00.0000001Z\"");
  const char *ex = tc ? strstr(tc, EXEC) : NULL;
  if (!w.err && tc && ex) {
    size_t plen = (size_t)(tc - b) + 14, tlen = 30;
    size_t mstart = plen + tlen, mlen = (size_t)(ex - b) + sizeof EXEC - 1 - mstart;
    if (whole && mstart + mlen <= cap) { /* prefix, the 30-byte time (overwritten), middle */
      memcpy(buf, b, mstart + mlen);
      *plen_out = (uint16_t)plen;
      *mlen_out = (uint16_t)mlen;
      rc = 0;
    } else if (!whole && plen + mlen <= cap) {
      memcpy(buf, b, plen);
      memcpy(buf + plen, b + mstart, mlen);
      *plen_out = (uint16_t)plen;
      *mlen_out = (uint16_t)mlen;
      rc = 0;
    }
  }
  etw_jw_free(&w);
  return rc;
}

/* Build entry @c from @s with the shared writer; 0 = usable. */
static int build(struct sysc *c, const struct etw_sys *s) {
  return sys_text(s, c->buf, SYSC_BYTES, &c->plen, &c->mlen, 0);
}

static const char D2[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                        "8081828384858687888990919293949596979899";

static inline char *put2(char *p, unsigned v) {
  memcpy(p, D2 + 2 * v, 2);
  return p + 2;
}

/* The 7 digits of @frac (< 10^7) at @p, which has 8 bytes of room. Little-endian: all digits at
 * once in a 64-bit word (two 4-digit lanes, split into 2-digit then 1-digit lanes with multiply-
 * shift divisions, exact for these ranges), one 8-byte store; else one division per group. */
static inline char *put_frac(char *p, unsigned frac) {
#if ETW_LE
  uint64_t hi = frac / 10000u, lo = frac - hi * 10000u;  /* the 8-digit text 0ddddddd: hi = 0ddd */
  uint64_t m = hi | lo << 32;                             /* lanes of 32 bits, each < 10000 */
  uint64_t t = (m * 10486u) >> 20 & 0x0000007F0000007Full; /* lane / 100 (exact below 43699) */
  m = t | (m - t * 100u) << 16;                           /* lanes of 16 bits, each < 100 */
  t = (m * 103u) >> 10 & 0x000F000F000F000Full;           /* lane / 10 (exact below 179) */
  m = t | (m - t * 10u) << 8;                             /* one digit per byte, first digit lowest */
  m = (m >> 8) + 0x0030303030303030ull;                   /* drop the leading 0 */
  memcpy(p, &m, 8);
  return p + 7;
#else
  unsigned a = frac / 100000, r = frac - a * 100000; /* digits 1-2, rest < 100000 */
  unsigned b = r / 1000, r2 = r - b * 1000;          /* digits 3-4, rest < 1000 */
  unsigned c = r2 / 10;                              /* digits 5-6 */
  p = put2(p, a);
  p = put2(p, b);
  p = put2(p, c);
  *p++ = (char)('0' + (r2 - c * 10));
  return p;
#endif
}

/* The day's text changed: "YYYY-MM-DD" of @day from the shared writer; 0 = cached. */
ETW_NOINLINE static int new_day(struct dec_sysc *sc, int64_t day) {
  const uint64_t DAY = 864000000000ULL;
  struct etw_jw t;
  etw_jw_init(&t, 64);
  etw_jw_filetime(&t, (uint64_t)day * DAY);
  const char *s = etw_jw_cstr(&t);
  int ok = t.len == 30 && s[11] == 'T';
  if (ok) {
    memcpy(sc->date, s, 11);
    sc->day = day;
  }
  etw_jw_free(&t);
  return ok ? 0 : -1;
}

/* "YYYY-MM-DDTHH:MM:SS.fffffffZ" (quoted, 30 bytes) for FILETIME @ft at @p, which has 32 bytes of
 * room, using the cached second / day; the end, or NULL (nothing usable written) when the day
 * cannot be formatted. */
static inline char *put_time_p(struct dec_sysc *sc, char *p, uint64_t ft) {
  uint64_t sec = ft / 10000000u;
  if (sc->sec_ok && sec == sc->sec) { /* same second as the previous event: the fraction only */
    unsigned frac = (unsigned)(ft - sec * 10000000u);
    memcpy(p, sc->sectext, 24); /* 21 used */
    p = put_frac(p + 21, frac);
    *p++ = 'Z';
    *p++ = '"';
    return p;
  }
  const uint64_t DAY = 864000000000ULL;
  int64_t day = (int64_t)(ft / DAY);
  if (day != sc->day && new_day(sc, day)) return NULL;
  char *b = p;
  uint64_t rem = ft - (uint64_t)day * DAY;
  unsigned sod = (unsigned)(rem / 10000000), frac = (unsigned)(rem % 10000000);
  memcpy(p, sc->date, 11);
  p += 11;
  *p++ = 'T';
  p = put2(p, sod / 3600);
  *p++ = ':';
  p = put2(p, sod / 60 % 60);
  *p++ = ':';
  p = put2(p, sod % 60);
  *p++ = '.';
  p = put_frac(p, frac);
  *p++ = 'Z';
  *p++ = '"';
  memcpy(sc->sectext, b, 21); /* "\"YYYY-MM-DDTHH:MM:SS." */
  sc->sec = sec;
  sc->sec_ok = 1;
  return p;
}

/* `PID,"ThreadID":TID,"ProcessorID":` at @p (room for EXC_COPY bytes) for the record's @pid and
 * @tid (0xFFFFFFFF = null), from the per-thread-id cache; the end. */
static inline char *put_pidtid(struct dec_sysc *sc, char *p, uint32_t pid, uint32_t tid) {
  struct exc *x = &sc->ex[(tid * 2654435761u) >> 24];
  uint64_t key = (uint64_t)pid << 32 | tid;
  if (x->key == key && x->len) {
    memcpy(p, x->txt, EXC_COPY); /* fixed-size copy */
    return p + x->len;
  }
  char *b = p;
  if (pid == 0xFFFFFFFFu) {
    memcpy(p, "null", 4);
    p += 4;
  } else {
    p = dec_put_u64(p, pid);
    const char *nt;
    unsigned nl = dec_proc_text(sc->dec, pid, &nt); /* `,"ProcessName":"…"` or nothing */
    memcpy(p, nt, nl);
    p += nl;
  }
  memcpy(p, ",\"ThreadID\":", 12);
  p += 12;
  if (tid == 0xFFFFFFFFu) {
    memcpy(p, "null", 4);
    p += 4;
  } else {
    p = dec_put_u64(p, tid);
  }
  memcpy(p, ",\"ProcessorID\":", 15);
  p += 15;
  x->key = key;
  x->len = (uint32_t)(p - b);
  memcpy(x->txt, b, x->len);
  return p;
}

/* `PID,"ProcessName":"…","ThreadID":TID,"ProcessorID":CPU}}` at @p (≤ 136 bytes of room) for the record's @pid and
 * @tid (0xFFFFFFFF = null): the (pid, tid) text from the per-thread-id cache. */
static inline char *put_exec(struct dec_sysc *sc, char *p, uint32_t pid, uint32_t tid, int cpu) {
  p = put_pidtid(sc, p, pid, tid);
  if ((uint32_t)cpu < 10) {
    *p++ = (char)('0' + cpu);
  } else if (cpu < 0) {
    memcpy(p, "null", 4);
    p += 4;
  } else {
    p = dec_put_u64(p, (uint64_t)cpu);
  }
  *p++ = '}';
  *p++ = '}';
  return p;
}

static inline int eq16(const unsigned char *a, const unsigned char *b) {
  uint64_t a0, a1, b0, b1;
  memcpy(&a0, a, 8);
  memcpy(&a1, a + 8, 8);
  memcpy(&b0, b, 8);
  memcpy(&b1, b + 8, 8);
  return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

#if ETW_GNUC
#define SYSC_INLINE static inline __attribute__((always_inline))
#else
#define SYSC_INLINE static inline
#endif

SYSC_INLINE int sysc_hit(const struct sysc *c, uint64_t h, const struct etw_sys *s) {
  return c->plen && c->h == h && c->k.prov == s->provider && c->k.name == s->event_name &&
         c->k.task_name == s->task_name && c->k.opcode_name == s->opcode_name && c->id == s->event_id &&
         c->ver == s->version && c->level == s->level && c->task == s->task && c->opcode == s->opcode &&
         c->k.kw == s->keywords && c->has_guid == (s->provider_guid != NULL) &&
         (!s->provider_guid || eq16(c->guid, s->provider_guid));
}

static struct sysc *lookup(struct dec_sysc *sc, const struct etw_sys *s);
static inline int emit(struct dec_sysc *sc, const struct sysc *c, struct etw_jw *w, uint64_t ft, int64_t pid,
                       int64_t tid, int cpu);

int dec_sys_emit_hint(struct etw_decoder *d, struct etw_jw *w, void *hint, uint64_t ft, int64_t pid, int64_t tid,
                      int cpu) {
  struct dec_sysc *sc = d->sysc;
  struct sysc *c = (struct sysc *)hint;
  if (!sc || d->reference) return 0;
  sc->victim[c->set] = (unsigned char)(c == &sc->e[2 * c->set]); /* the other way goes next */
  return emit(sc, c, w, ft, pid, tid, cpu) == 0;
}

void dec_write_system(struct etw_decoder *d, struct etw_jw *w, const struct etw_sys *s, void **hint,
                      const void *tag, uint64_t d8) {
  if (!d->reference && !d->sysc && (d->sysc = calloc(1, sizeof *d->sysc))) {
    d->sysc->day = -1;
    d->sysc->dec = d;
  }
  if (s->activity_id || s->related_activity_id || !s->filetime || !d->sysc || d->reference) {
    etw_event_write_system(w, s);
    return;
  }
  struct dec_sysc *sc = d->sysc;
  struct sysc *c = hint ? (struct sysc *)*hint : NULL;
  if (c && c->k.tag == tag && c->k.d8 == d8 && c->k.kw == s->keywords && c->k.prov == s->provider &&
      c->k.name == s->event_name && c->k.task_name == s->task_name && c->k.opcode_name == s->opcode_name) {
    sc->victim[c->set] = (unsigned char)(c == &sc->e[2 * c->set]); /* the other way goes next */
  } else {
    c = lookup(sc, s);
    if (!c) {
      etw_event_write_system(w, s);
      return;
    }
    if (hint) {
      c->k.tag = tag;
      c->k.d8 = d8;
      *hint = c;
    }
  }
  size_t mark = w->len;
  if (emit(sc, c, w, s->filetime, s->pid, s->tid, s->cpu)) {
    etw_jw_truncate(w, mark);
    etw_event_write_system(w, s);
  }
}

/* The entry for @s: found, or built in the set's least recently used way; NULL when the
 * shared writer's text could not be split. */
static struct sysc *lookup(struct dec_sysc *sc, const struct etw_sys *s) {
  uint64_t h = (uint64_t)(uintptr_t)s->provider ^ ((uint64_t)s->event_id << 32) ^ ((uint64_t)s->opcode << 24) ^
               ((uint64_t)s->version << 16) ^ ((uint64_t)s->level << 8) ^ s->task ^ s->keywords ^
               (uint64_t)(uintptr_t)s->event_name;
  h ^= h >> 29;
  h *= 0x9E3779B97F4A7C15ULL;
  unsigned set = (unsigned)(h >> 56);
  struct sysc *c = &sc->e[2 * set];
  int hit = sysc_hit(c, h, s);
  if (!hit && sysc_hit(c + 1, h, s)) {
    c++;
    hit = 1;
  }
  if (!hit) c = &sc->e[2 * set + sc->victim[set]];
  sc->victim[set] = (unsigned char)(c == &sc->e[2 * set]); /* the other way goes next */
  if (!hit) {
    c->plen = 0;
    c->k.tag = NULL;
    c->set = set;
    if (build(c, s)) return NULL;
    c->h = h;
    c->k.prov = s->provider;
    c->k.name = s->event_name;
    c->k.task_name = s->task_name;
    c->k.opcode_name = s->opcode_name;
    c->id = s->event_id;
    c->ver = s->version;
    c->level = s->level;
    c->task = s->task;
    c->opcode = s->opcode;
    c->k.kw = s->keywords;
    c->has_guid = s->provider_guid != NULL;
    if (s->provider_guid) memcpy(c->guid, s->provider_guid, 16);
  }
  return c;
}

/* The block from entry @c: prefix, time, middle, execution fields; -1 (nothing written) when
 * the time cannot be formatted (the shared writer is used then). */
static inline int emit(struct dec_sysc *sc, const struct sysc *c, struct etw_jw *w, uint64_t ft, int64_t pid,
                       int64_t tid, int cpu) {
  /* one reservation for the whole block: prefix, time (≤ 32), middle, execution (≤ 136) */
  if (etw_jw_reserve(w, (size_t)c->plen + c->mlen + 192)) return 0;
  char *p = w->buf + w->len;
  memcpy(p, c->buf, c->plen);
  p = put_time_p(sc, p + c->plen, ft);
  if (!p) return -1;
  memcpy(p, c->buf + c->plen, c->mlen);
  /* pid and tid come from the record's u32 fields (-1 = 0xFFFFFFFF: none) */
  p = put_exec(sc, p + c->mlen, (uint32_t)pid, (uint32_t)tid, cpu);
  w->len = (size_t)(p - w->buf);
  return 0;
}


/* "000" … "999" as the low 3 bytes of 32-bit words (filled by tpl_build, before any template is
 * written: put_frac_z's table) */
uint32_t dec_t3[1000], dec_t4[10000]; /* T4: "0000" … "9999" */
static pthread_once_t t3_once = PTHREAD_ONCE_INIT;
static void t3_fill(void) {
  for (uint32_t n = 0; n < 1000; n++) dec_t3[n] = ('0' + n / 100) | ('0' + n / 10 % 10) << 8 | ('0' + n % 10) << 16;
  for (uint32_t n = 0; n < 10000; n++) dec_t4[n] = dec_t3[n / 10] | ('0' + n % 10) << 24;
}

/* The template's tail from the processor digit on: a '0' placeholder, `}}`, the head. */
static void tpl_tail(struct dec_tpl *t) {
  char *p = t->txt + t->cpos;
  p[0] = '0';
  p[1] = '}';
  p[2] = '}';
  memcpy(p + 3, t->head, t->hlen);
  t->n = (uint16_t)(t->cpos + 3 + t->hlen);
  t->n32 = (uint8_t)((t->n + 31u) >> 5);
  t->n16 = (uint8_t)((t->n + 15u) >> 4);
}

/* The (pid, tid) text of @key (pid << 32 | tid) into the template, and the tail after it. */
ETW_NOINLINE void dec_tpl_exec(struct dec_sysc *sc, struct dec_tpl *t, uint64_t key) {
  char *p = put_pidtid(sc, t->txt + t->tlen, (uint32_t)(key >> 32), (uint32_t)key); /* ≤ 111 bytes */
  t->xkey = key;
  t->rimg.pid = (uint32_t)(key >> 32);
  t->rimg.tid = (uint32_t)key;
  t->cpos = (uint16_t)(p - t->txt);
  tpl_tail(t);
}

/* The second of FILETIME @ft (second @sec) into the template's time slot; -1 when the day
 * cannot be formatted or @sec is 0 (nothing changed: t->sec is never 0, so the hot path need not
 * turn FILETIME 0 into 1 as the general path does), or when dec_fill_ref's ts_ns is neither
 * linear in the FILETIME nor constant over the second (the one holding 1970 + INT64_MAX / 100
 * 100-ns units, in 2262). */
ETW_NOINLINE int dec_tpl_sec(struct dec_sysc *sc, struct dec_tpl *t, uint64_t ft, uint64_t sec) {
  char b[48];
  if (!sec) return -1; /* 1601-01-01T00:00:00 (and FILETIME 0, written as 1): the general path */
  /* dec_fill_ref's ts_ns over the second [s0, s0 + 10^7): (ft - epoch) * 100 while that fits
   * (1 ≤ ft - epoch ≤ INT64_MAX / 100; 0 at the epoch, which is a second's start), 0 before,
   * INT64_MAX after */
  const uint64_t epoch = 116444736000000000ULL, lim = (uint64_t)INT64_MAX / 100;
  uint64_t s0 = sec * 10000000u, base, mul;
  if (s0 < epoch) { /* (then the whole second is before it: 10^7 divides the epoch) */
    base = 0;
    mul = 0;
  } else if (s0 - epoch + 9999999u <= lim) {
    base = (s0 + 1u - epoch) * 100u; /* at ft1 */
    mul = 100;
  } else if (s0 - epoch > lim) {
    base = (uint64_t)INT64_MAX;
    mul = 0;
  } else {
    return -1;
  }
  if (!put_time_p(sc, b, ft)) return -1;
  memcpy(t->txt + t->plen, b, 21); /* "\"YYYY-MM-DDTHH:MM:SS." */
  t->sec = sec;
  t->ft1 = s0 + 1u;
  t->ts_base = base;
  t->ts_mul = mul;
  return 0;
}


/* The names of @t's event reference image. */
void dec_tpl_names(struct dec_tpl *t, const char *prov, const char *name) {
  t->rimg.provider = prov;
  t->rimg.name = name;
}

/* A processor number of two or more digits at @p's processor slot, then the rest of the template
 * (after the placeholder digit) moved behind it; the end. */
ETW_NOINLINE char *dec_tpl_cpu(const struct dec_tpl *t, char *p, unsigned cpu) {
  char *q = dec_put_u64(p + t->cpos, cpu);
  size_t k = (size_t)t->n - t->cpos - 1u;
  memcpy(q, t->txt + t->cpos + 1, k);
  return q + k;
}

/* The head @head (@hlen ≤ 64 bytes) after `}}`. */
void dec_tpl_head(struct dec_tpl *t, const char *head, unsigned hlen) {
  if (head != t->head) memcpy(t->head, head, hlen);
  t->hlen = (uint8_t)hlen;
  tpl_tail(t);
}

/* Template @t from the shared writer's text for @s, the (pid, tid) of @r, and @head; 0 = usable. */
int dec_tpl_build(struct dec_sysc *sc, struct dec_tpl *t, const struct etw_sys *s, const struct etw_rec *r,
                     const char *head, unsigned hlen) {
  uint16_t plen, mlen;
  pthread_once(&t3_once, t3_fill);
  if (sys_text(s, t->txt, DEC_TXT_MAX, &plen, &mlen, 1)) return -1;
  t->plen = plen;
  t->tlen = (uint16_t)(plen + 30 + mlen);
  t->sec = UINT64_MAX; /* the slot holds the 1601 text: the first event writes its second */
  t->ft1 = 1;          /* (FILETIMEs 1 … 10^7 - 1 have that text: no rewrite for them) */
  t->ts_base = 0;      /* (and ts_ns 0: before 1970) */
  t->ts_mul = 0;
  t->fb = 0;           /* (its digits 1-3 are 000; FILETIME 0 is not in the block: fb + 1 …) */
  t->ts_fb = 0;
  memset(&t->rimg, 0, sizeof t->rimg);
  t->rimg.event_id = r->desc.id;
  t->rimg.level = r->desc.level;
  if (head != t->head) memcpy(t->head, head, hlen);
  t->hlen = (uint8_t)hlen;
  dec_tpl_exec(sc, t, (uint64_t)r->pid << 32 | r->tid);
  return 0;
}


/* fill T3 and T4 once (before a plan writer uses them) */
void dec_tpl_tables(void) { pthread_once(&t3_once, t3_fill); }


/* Process @pid's name changed (@all: every pid's, or the host): the cached (pid, name, tid)
 * texts that hold it are dropped, and every plan template that shows it is written again for
 * its (pid, tid), so the fast paths keep writing what etw_event_write_system writes. */
void dec_sys_pid_renamed(struct etw_decoder *d, uint32_t pid, int all) {
  struct dec_sysc *sc = d->sysc;
  if (!sc) return;
  for (size_t i = 0; i < EXC_N; i++)
    if (all || (uint32_t)(sc->ex[i].key >> 32) == pid) sc->ex[i].len = 0;
  for (size_t i = 0; i < sizeof d->kplan / sizeof d->kplan[0]; i++) {
    struct dec_kplan *pl = d->kplan[i];
    if (pl != &dec_kplan_none && pl->t.tlen && (all || (uint32_t)(pl->t.xkey >> 32) == pid))
      dec_tpl_exec(sc, &pl->t, pl->t.xkey);
  }
  for (size_t i = 0; i < DEC_EPLAN_N; i++) {
    struct dec_eplan *pl = d->eplan[i];
    if (pl && pl->t.tlen && (all || (uint32_t)(pl->t.xkey >> 32) == pid)) dec_tpl_exec(sc, &pl->t, pl->t.xkey);
  }
}

/* The host text changed: every cached System text is dropped (the entries' hints no longer
 * match: lookup builds them again) and every plan goes. */
void dec_sys_reset(struct etw_decoder *d) {
  if (d->sysc) {
    for (size_t i = 0; i < SYSC_N; i++) {
      d->sysc->e[i].plen = 0;
      d->sysc->e[i].k.tag = NULL;
    }
    for (size_t i = 0; i < EXC_N; i++) d->sysc->ex[i].len = 0;
  }
  dec_plans_free(d);
}
