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

/* The text `PID,"ThreadID":TID,"ProcessorID":` of a (pid, tid) pair (≤ 10 + 12 + 10 + 15 = 47
 * bytes; copied as EXC_COPY bytes). */
#define EXC_N 256
#define EXC_COPY 48
struct exc {
  uint64_t key; /* pid << 32 | tid as the record has them (0xFFFFFFFF = none) */
  uint32_t len; /* 0 = empty */
  char txt[52]; /* 64-byte entries */
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
};

struct dec_kplan dec_kplan_none; /* (key 0: a record's key is never 0) */

void dec_plans_init(struct etw_decoder *d) {
  for (size_t i = 0; i < sizeof d->kplan / sizeof d->kplan[0]; i++) d->kplan[i] = &dec_kplan_none;
}

void dec_sys_free(struct etw_decoder *d) {
  free(d->sysc);
  d->sysc = NULL;
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
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
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
__attribute__((noinline)) static int new_day(struct dec_sysc *sc, int64_t day) {
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

/* `PID,"ThreadID":TID,"ProcessorID":CPU}}` at @p (≤ 96 bytes of room) for the record's @pid and
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

#if defined(__GNUC__)
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
  if (!sc || d->sys_plain) return 0;
  sc->victim[c->set] = (unsigned char)(c == &sc->e[2 * c->set]); /* the other way goes next */
  return emit(sc, c, w, ft, pid, tid, cpu) == 0;
}

void dec_write_system(struct etw_decoder *d, struct etw_jw *w, const struct etw_sys *s, void **hint,
                      const void *tag, uint64_t d8) {
  if (!d->sysc && (d->sysc = calloc(1, sizeof *d->sysc))) d->sysc->day = -1;
  if (s->activity_id || s->related_activity_id || !s->filetime || !d->sysc || d->sys_plain) {
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
  /* one reservation for the whole block: prefix, time (≤ 32), middle, execution (≤ 96) */
  if (etw_jw_reserve(w, (size_t)c->plen + c->mlen + 128)) return 0;
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


/* Every call in a function's body inlined where the callee's body is visible (gcc): the writers
 * whose value formatting (dec_put_u32 …) gcc may otherwise leave out of line as the file grows (a
 * call costs its arguments and spills, and gave the Sample writer a frame). */
#if defined(__GNUC__) && !defined(__clang__)
#define DEC_FLATTEN __attribute__((flatten))
#else
#define DEC_FLATTEN
#endif

/* ---- plan templates (struct dec_tpl)
 *
 * Copied to the output by one out-of-line run of straight-line chunk moves entered by a jump on
 * the chunk count (no loop; one `memcpy` of the ≈ 400 bytes takes glibc's loop path): 16-byte
 * SSE2 moves, else memcpy. The chunks are rounded up: up to 31 bytes more are read from the template (DEC_TPL_BYTES has the room) and written to
 * the output (the plans reserve for it). */
#if defined(__GNUC__)
#define TPL_INLINE static inline __attribute__((always_inline))
#define DEC_UNREACHABLE() __builtin_unreachable()
#else
#define TPL_INLINE static inline
#define DEC_UNREACHABLE() ((void)0)
#endif

/* @n bytes of template @t to @p, rounded up to whole 16-byte chunks. */
#if defined(__SSE2__)
#define C16(i) _mm_storeu_si128((__m128i *)(void *)(p + 16 * (i)), _mm_loadu_si128((const __m128i *)(const void *)(t + 16 * (i))))
#endif
TPL_INLINE void tpl_copy(char *p, const struct dec_tpl *tp) {
  const char *t = tp->txt;
#if defined(__SSE2__)
  switch (tp->n16) { /* (≤ 48: tpl_tail) */
  case 48: C16(47); /* fall through */
  case 47: C16(46); /* fall through */
  case 46: C16(45); /* fall through */
  case 45: C16(44); /* fall through */
  case 44: C16(43); /* fall through */
  case 43: C16(42); /* fall through */
  case 42: C16(41); /* fall through */
  case 41: C16(40); /* fall through */
  case 40: C16(39); /* fall through */
  case 39: C16(38); /* fall through */
  case 38: C16(37); /* fall through */
  case 37: C16(36); /* fall through */
  case 36: C16(35); /* fall through */
  case 35: C16(34); /* fall through */
  case 34: C16(33); /* fall through */
  case 33: C16(32); /* fall through */
  case 32: C16(31); /* fall through */
  case 31: C16(30); /* fall through */
  case 30: C16(29); /* fall through */
  case 29: C16(28); /* fall through */
  case 28: C16(27); /* fall through */
  case 27: C16(26); /* fall through */
  case 26: C16(25); /* fall through */
  case 25: C16(24); /* fall through */
  case 24: C16(23); /* fall through */
  case 23: C16(22); /* fall through */
  case 22: C16(21); /* fall through */
  case 21: C16(20); /* fall through */
  case 20: C16(19); /* fall through */
  case 19: C16(18); /* fall through */
  case 18: C16(17); /* fall through */
  case 17: C16(16); /* fall through */
  case 16: C16(15); /* fall through */
  case 15: C16(14); /* fall through */
  case 14: C16(13); /* fall through */
  case 13: C16(12); /* fall through */
  case 12: C16(11); /* fall through */
  case 11: C16(10); /* fall through */
  case 10: C16(9); /* fall through */
  case 9: C16(8); /* fall through */
  case 8: C16(7); /* fall through */
  case 7: C16(6); /* fall through */
  case 6: C16(5); /* fall through */
  case 5: C16(4); /* fall through */
  case 4: C16(3); /* fall through */
  case 3: C16(2); /* fall through */
  case 2: C16(1); /* fall through */
  case 1: C16(0); /* fall through */
  case 0: break;
  default: DEC_UNREACHABLE();
  }
#else
  memcpy(p, t, tp->n);
#endif
}

/* DEC_MEMO_COPY bytes of @t to @p (a kernel plan's memo, either way). */
TPL_INLINE void memo_copy(char *p, const char *t) {
#if defined(__SSE2__)
  C16(0);
  C16(1);
  C16(2);
  C16(3);
  C16(4);
  C16(5);
#else
  memcpy(p, t, DEC_MEMO_COPY);
#endif
}
#if DEC_MEMO_COPY != 96 || DEC_MEMO_MAX > DEC_MEMO_COPY
#error "memo_copy: DEC_MEMO_COPY"
#endif
#undef A32
#undef C16

#if DEC_TXT_MAX + 47 + 3 + 64 + 31 > DEC_TPL_BYTES || DEC_TPL_BYTES > 48 * 16 || DEC_TPL_BYTES > 24 * 32
#error "copy: DEC_TPL_BYTES"
#endif

/* "000" … "999" as the low 3 bytes of 32-bit words (filled by tpl_build, before any template is
 * written: put_frac_z's table) */
static uint32_t T3[1000], T4[10000]; /* T4: "0000" … "9999" */
static pthread_once_t t3_once = PTHREAD_ONCE_INIT;
static void t3_fill(void) {
  for (uint32_t n = 0; n < 1000; n++) T3[n] = ('0' + n / 100) | ('0' + n / 10 % 10) << 8 | ('0' + n % 10) << 16;
  for (uint32_t n = 0; n < 10000; n++) T4[n] = T3[n / 10] | ('0' + n % 10) << 24;
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
__attribute__((noinline)) static void tpl_exec(struct dec_sysc *sc, struct dec_tpl *t, uint64_t key) {
  char *p = put_pidtid(sc, t->txt + t->tlen, (uint32_t)(key >> 32), (uint32_t)key); /* ≤ 47 bytes */
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
__attribute__((noinline)) static int tpl_sec(struct dec_sysc *sc, struct dec_tpl *t, uint64_t ft, uint64_t sec) {
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

/* The reference image of template @t to @ref: three 16-byte SSE2 moves (gcc chose `rep movsl`, 13 instructions, where registers were short). */
TPL_INLINE void tpl_img(struct etw_evref *ref, const struct dec_tpl *t) {
  _Static_assert(sizeof *ref == 48, "etw_evref: 48 bytes");
#if defined(__SSE2__)
  const char *s = (const char *)&t->rimg;
  char *o = (char *)ref;
  __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
  __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
  __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
  _mm_storeu_si128((__m128i *)(void *)o, a);
  _mm_storeu_si128((__m128i *)(void *)(o + 16), b);
  _mm_storeu_si128((__m128i *)(void *)(o + 32), c);
#else
  memcpy(ref, &t->rimg, sizeof *ref);
#endif
}

/* tpl_copy of template @t to @p, and with @ref (not NULL) the event reference of record @r
 * written through @t (its FILETIME in the slot's block: @g = FILETIME - fb; its (pid, tid) the
 * slot's; its descriptor the plan's): what dec_fill_ref(@ref, @r, the plan's names) stores, its
 * image copied first. */
TPL_INLINE void tpl_copy_ref(char *p, const struct dec_tpl *t, struct etw_evref *ref, uint64_t g, unsigned cpu) {
  if (ref) {
    tpl_img(ref, t);
    tpl_copy(p, t);
    ref->ts_ns = (int64_t)(t->ts_fb + g * t->ts_mul);
    ref->cpu = (uint8_t)cpu;
  } else {
    tpl_copy(p, t);
  }
}


/* The names of @t's event reference image. */
static void tpl_names(struct dec_tpl *t, const char *prov, const char *name) {
  t->rimg.provider = prov;
  t->rimg.name = name;
}

/* A processor number of two or more digits at @p's processor slot, then the rest of the template
 * (after the placeholder digit) moved behind it; the end. */
__attribute__((noinline)) static char *tpl_cpu(const struct dec_tpl *t, char *p, unsigned cpu) {
  char *q = dec_put_u64(p + t->cpos, cpu);
  size_t k = (size_t)t->n - t->cpos - 1u;
  memcpy(q, t->txt + t->cpos + 1, k);
  return q + k;
}

/* The head @head (@hlen ≤ 64 bytes) after `}}`. */
static void tpl_head(struct dec_tpl *t, const char *head, unsigned hlen) {
  if (head != t->head) memcpy(t->head, head, hlen);
  t->hlen = (uint8_t)hlen;
  tpl_tail(t);
}

/* Template @t from the shared writer's text for @s, the (pid, tid) of @r, and @head; 0 = usable. */
static int tpl_build(struct dec_sysc *sc, struct dec_tpl *t, const struct etw_sys *s, const struct etw_rec *r,
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
  tpl_exec(sc, t, (uint64_t)r->pid << 32 | r->tid);
  return 0;
}

/* The fraction's digits 4-7 (@lo < 10^4) at @p: one 4-byte store from T4. */
static inline void put_lo4(char *p, unsigned lo) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(p, &T4[lo], 4);
#else
  dec_put4(p, lo);
#endif
}

/* The slot's fraction digits 1-3 of fraction @frac (< 10^7) of the slot's second, and the block of
 * FILETIMEs with them (fb, ts_fb). */
TPL_INLINE void tpl_block(struct dec_tpl *t, unsigned frac) {
  unsigned hi = frac / 10000u;
  char *d = t->txt + t->plen + 21;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(d, &T3[hi], 4); /* (its 4th byte over digit 4's place: every copy of the template rewrites it) */
#else
  d[0] = (char)('0' + hi / 100);
  d[1] = (char)('0' + hi / 10 % 10);
  d[2] = (char)('0' + hi % 10);
#endif
  t->fb = t->ft1 - 1u + hi * 10000u;
  t->ts_fb = t->ts_base + (t->fb - t->ft1) * t->ts_mul; /* (wrapping: fb - ft1 may be -1) */
}

/* The System block of record @r and the template's head at @p (reserved: the plan's room), its end
 * (after the head) in *@end, and the event reference in @ref (unless NULL; the plan's, as
 * dec_fill_ref's: a writer that gives up later calls dec_finish, which writes it again): 0, or -1
 * (nothing usable written, @ref untouched) when the time cannot be formatted. */
TPL_INLINE int tpl_emit(struct dec_sysc *sc, struct dec_tpl *t, char *p, const struct etw_rec *r,
                        char **end, struct etw_evref *ref) {
  uint64_t ft = r->filetime; /* (0, written as 1 by the general path: second 0 is never cached) */
  uint64_t g = ft - t->fb;   /* digits 4-7 when ft is in the slot's block, not its first */
  if (__builtin_expect(g - 1u >= 9999u, 0)) { /* another block (or its first 100 ns) */
    uint64_t f1 = ft - t->ft1; /* the fraction - 1 when ft is in the slot's second */
    if (f1 >= 9999999u) { /* another second, or a fraction of 0 */
      uint64_t sec = ft / 10000000u;
      if (sec != t->sec && tpl_sec(sc, t, ft, sec)) return -1;
      f1 = ft - t->ft1; /* (a fraction of 0: wraps to UINT64_MAX, + 1 below) */
    }
    tpl_block(t, (unsigned)f1 + 1u);
    g = ft - t->fb;
  }
  uint64_t key = (uint64_t)r->pid << 32 | r->tid;
  if (__builtin_expect(key != t->xkey, 0)) tpl_exec(sc, t, key);
  unsigned cpu = r->cpu;
  tpl_copy_ref(p, t, ref, g, cpu);
  put_lo4(p + t->plen + 24, (unsigned)g);
  if (__builtin_expect(cpu < 10, 1)) {
    p[t->cpos] = (char)('0' + cpu);
    *end = p + t->n;
  } else {
    *end = tpl_cpu(t, p, cpu);
  }
  return 0;
}

static inline int jw_err(const struct etw_jw *w) { return w->err != 0; }

/* tpl_emit's work at @w's end when the template applies as it is (the FILETIME in its second, its
 * (pid, tid), a processor < 10) and the writer has room for @room bytes (no error, no reservation to
 * make): 0 and the end (after the head; w->len unchanged) in *@end; -1 (nothing written) otherwise. No call: a
 * writer that takes the other case to an out-of-line copy of itself keeps nothing in callee-saved
 * registers. */
TPL_INLINE int tpl_fast(struct dec_tpl *t, struct etw_jw *w, const struct etw_rec *r, struct etw_evref *ref,
                        uint32_t room, char **end) {
  /* (one compare and branch each, the record's own first, the processor read again after them:
   * fewer live values, as in kplan_fix4) */
  if (__builtin_expect(r->cpu >= 10, 0)) return -1;
  if (__builtin_expect(jw_err(w), 0)) return -1;
  if (__builtin_expect(((uint64_t)r->pid << 32 | r->tid) != t->xkey, 0)) return -1;
  uint64_t ft = r->filetime;
  uint64_t g = ft - t->fb; /* digits 4-7 when in the slot's block, not its first 100 ns (tpl_emit) */
  int gm = g - 1u >= 9999u; /* another block of the second: its digits 1-3 first */
  if (__builtin_expect(gm && ft - t->ft1 >= 9999999u, 0)) return -1;
  if (__builtin_expect(w->cap - w->len <= room, 0)) return -1;
  if (__builtin_expect(gm, 0)) {
    tpl_block(t, (unsigned)(ft - t->ft1) + 1u);
    g = ft - t->fb;
  }
  char *p = w->buf + w->len;
  unsigned cpu = r->cpu;
  tpl_copy_ref(p, t, ref, g, cpu);
  put_lo4(p + t->plen + 24, (unsigned)g);
  p[t->cpos] = (char)('0' + cpu);
  *end = p + t->n;
  return 0;
}

static const char EVD[] = ",\"EventData\":{";

/* 0 … 999 as their digits (no leading zeros) in the low bytes of 32-bit words and the digit count
 * in the top byte (little-endian): one 4-byte store writes a small value (put_u32t). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define S3E(n)                                                                                          \
  ((n) < 10    ? (uint32_t)('0' + (n)) | 1u << 24                                                       \
   : (n) < 100 ? (uint32_t)('0' + (n) / 10) | (uint32_t)('0' + (n) % 10) << 8 | 2u << 24                \
               : (uint32_t)('0' + (n) / 100) | (uint32_t)('0' + (n) / 10 % 10) << 8 |                   \
                     (uint32_t)('0' + (n) % 10) << 16 | 3u << 24)
#define S3_10(b) S3E(b), S3E(b + 1), S3E(b + 2), S3E(b + 3), S3E(b + 4), S3E(b + 5), S3E(b + 6), S3E(b + 7), \
                 S3E(b + 8), S3E(b + 9)
#define S3_100(b) S3_10(b), S3_10(b + 10), S3_10(b + 20), S3_10(b + 30), S3_10(b + 40), S3_10(b + 50), \
                  S3_10(b + 60), S3_10(b + 70), S3_10(b + 80), S3_10(b + 90)
static const uint32_t S3[1000] = {S3_100(0),   S3_100(100), S3_100(200), S3_100(300), S3_100(400),
                                  S3_100(500), S3_100(600), S3_100(700), S3_100(800), S3_100(900)};
#undef S3_100
#undef S3_10
#undef S3E
#endif

/* dec_put_u32's text of @v at @p, which has room for 4 bytes more than that text needs (< 1000:
 * from S3, 4 bytes written; with @t4 (a constant), < 10^4: T4's four digits — only in plan
 * writers: T4 is filled before the first template is built). */
TPL_INLINE char *put_u32tx(char *p, uint32_t v, const int t4) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (__builtin_expect(v < 1000, 1)) {
    uint32_t e = S3[v];
    memcpy(p, &e, 4);
    return p + (e >> 24);
  }
  if (t4 && v < 10000) {
    memcpy(p, &T4[v], 4);
    return p + 4;
  }
#else
  (void)t4;
#endif
  return dec_put_u32(p, v);
}
/* (thread and process IDs, ports: 4 digits are common) */
TPL_INLINE char *put_u32t(char *p, uint32_t v) { return put_u32tx(p, v, 1); }

/* dec_put_u64's text of @v at @p, which has room for 4 bytes more than that text needs: below
 * 10^12 as a number below 10^4 (S3 or T4) and four-digit groups from T4 (plan writers only). */
TPL_INLINE char *put_u64t(char *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint32_t top, r;
  if (v < 100000000u) {
    if (v < 10000u) return put_u32tx(p, (uint32_t)v, 1);
    top = (uint32_t)v / 10000u; /* 1 … 9999, then 4 digits */
    r = (uint32_t)v - top * 10000u;
    p = put_u32tx(p, top, 1);
    memcpy(p, &T4[r], 4);
    return p + 4;
  }
  if (v < 1000000000000ull) {
    top = (uint32_t)(v / 100000000u); /* 1 … 9999, then 8 digits */
    r = (uint32_t)(v - (uint64_t)top * 100000000u);
    uint32_t hi = r / 10000u;
    p = put_u32tx(p, top, 1);
    memcpy(p, &T4[hi], 4);
    memcpy(p + 4, &T4[r - hi * 10000u], 4);
    return p + 8;
  }
#endif
  return dec_put_u64(p, v);
}

/* dec_put_hex's text of @v at @p (20 bytes of room), after a comma when @comma (a constant; 21
 * bytes of room). */
TPL_INLINE char *put_hex_vc(char *p, uint64_t v, const int comma) {
  if (comma) *p++ = ',';
  return dec_put_hex(p, v);
}
TPL_INLINE char *put_hex_v(char *p, uint64_t v) { return put_hex_vc(p, v, 0); }

/* The addresses @q … @qe (8 bytes each, at least one) as dec_put_hex's texts with a comma between
 * them at @p (21 bytes of room each); the end. */
TPL_INLINE char *put_stack64(char *p, const unsigned char *q, const unsigned char *qe) {
  p = put_hex_v(p, d_rd64(q)); /* the first, then a comma before each (no test per element) */
  for (q += 8; q < qe; q += 8) p = put_hex_vc(p, d_rd64(q), 1);
  return p;
}

/* (tests) put_u64t's and put_u32t's texts, NUL-terminated (@p: 32 bytes of room). */
char *dec_plan_u64(char *p, uint64_t v) {
  pthread_once(&t3_once, t3_fill);
  p = put_u64t(p, v);
  *p = 0;
  return p;
}
char *dec_plan_u32(char *p, uint32_t v) {
  pthread_once(&t3_once, t3_fill);
  p = put_u32t(p, v);
  *p = 0;
  return p;
}

/* The quoted text of IPv6 address @q at @p (≤ 42 bytes written); the end. */
static inline char *put_ipv6(char *p, const unsigned char *q) {
  *p = '"';
  p += 1 + dec_fmt_ipv6(p + 1, q);
  *p++ = '"';
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
  if (n) tpl_head(t, head, hlen);
  else tpl_head(t, EVD, sizeof EVD - 1);
  k->hlen = t->hlen;
  return (uint32_t)t->tlen + 224 + k->nops * 72u;
}

static void kplan_ops(struct dec_kplan *pl, const struct etw_rec *r) {
  pl->room = kops_build(&pl->k, &pl->t, r);
  pl->run = kplan_run(pl);
}

void dec_kplan_update(struct etw_decoder *d, uint32_t slot, uint64_t key, const struct etw_rec *r,
                      const struct etw_sys *s, uint64_t d8) {
  if (!d->sysc || d->sys_plain || s->activity_id || s->related_activity_id) return;
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
  if (tpl_build(d->sysc, &pl->t, s, r, EVD, sizeof EVD - 1)) return;
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
  tpl_names(&pl->t, pl->prov, pl->name);
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
  if (!d->sysc || d->sys_plain || s->activity_id || s->related_activity_id || !d->reg_gen) return;
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
  if (tpl_build(d->sysc, &pl->t, s, r, EVD, sizeof EVD - 1)) return;
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
  tpl_names(&pl->t, pl->prov, pl->name);
  pl->room = (uint32_t)pl->t.tlen + 128; /* ≤ tlen + 47 + 5 + 2 + 14, rounded up by 31 */
  if (pl->cls) pl->room = kops_build(&pl->k, &pl->t, r); /* the layout's ops and first key */
    pl->run = pl->cls ? eplan_cls_s : eplan_event_s;
  pl->gen = d->reg_gen;
}

/* dec_finish_fast for record @r written through a template (tpl_emit: the reference is written
 * already; dec_finish writes it again when the event is given up). */
TPL_INLINE int finish_t(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
                        const char *prov, const char *name, size_t mark, long rc, const char *why) {
  /* (rc -1 is SIZE_MAX as a size: never a payload length) */
  if (__builtin_expect((size_t)rc == r->user_len && !w->err, 1)) {
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
__attribute__((noinline)) DEC_FLATTEN static int kops_run(struct etw_decoder *d, struct etw_jw *w, const struct etw_rec *r,
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
#if defined(__GNUC__)
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
  if (__builtin_expect(tpl_fast(&pl->t, w, r, ref, pl->room, &p), 0)) return slow(d, r, w, ref, pl);
  return kops_run(d, w, r, ref, &pl->k, p);
}
TPL_INLINE int eplan_cls_fast(struct etw_decoder *d, struct etw_jw *w, struct dec_eplan *pl, const struct etw_rec *r,
                              struct etw_evref *ref, eplan_slow_fn slow) {
  char *p;
  if (__builtin_expect(tpl_fast(&pl->t, w, r, ref, pl->room, &p), 0)) return slow(d, r, w, ref, pl); /* (d8: the record's, rec_d8) */
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
__attribute__((noinline)) static void ememo_keep(struct dec_eplan *pl, const struct etw_rec *r, const char *txt,
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
__attribute__((noinline, cold)) static int eplan_fail(struct etw_decoder *d, const struct etw_rec *r,
                                                      struct etw_jw *w, struct etw_evref *ref,
                                                      const struct dec_eplan *pl, size_t mark, long rc,
                                                      const char *const *why) {
  return dec_finish(d, r, w, ref, pl->prov, pl->name, mark, rc, *why);
}

/* The EventData runner for a manifest plan's event (w->err 0: reserved): called directly when
 * plans are on (no dec_fields_write_c between). */
TPL_INLINE struct dec_eres eplan_run(struct dec_ecall *c) {
  int m = __atomic_load_n(&dec_pl_sel, __ATOMIC_RELAXED);
  if (__builtin_expect(m == 0, 1)) return dec_plan_run_sse2(c);
  return dec_fields_write_c(c);
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
__attribute__((noinline)) static int eplan_end(struct eplan_frame *f, struct dec_eres x, int keep) {
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
  if (__builtin_expect(x.o != NULL, 1)) { /* (the whole payload, w->err 0, room: dec_eres) */
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
  if (__builtin_expect(pl->hroom == UINT32_MAX, 0)) pl->hroom = pl->room + pl->hfar; /* (< 2^17 + 2^20; ememo_reset) */
  if (__builtin_expect(pl->memo_skip == 0, 0)) return memo(d, w, pl, r, ref, p); /* (a tail call) */
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
  if (__builtin_expect(tpl_fast(&pl->t, w, r, ref, pl->hroom, &p), 0))
    return slow(d, r, w, ref, pl); /* (d8: the record's, rec_d8) */
  w->len = (size_t)(p - w->buf);
  if (__builtin_expect(pl->memo_skip == 0, 0)) return memo(d, w, pl, r, ref, p); /* (a tail call) */
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
  if (__builtin_expect(r->user_len != need, 0)) return 1;
  if (__builtin_expect(r->ptr_size != 8u, 0)) return 1;
  if (__builtin_expect(r->cpu >= 10, 0)) return 1;
  if (__builtin_expect(jw_err(w), 0)) return 1;
  if (__builtin_expect(((uint64_t)r->pid << 32 | r->tid) != t->xkey, 0)) return 1;
  uint64_t g = r->filetime - t->fb; /* digits 4-7 when in the slot's block, not its first 100 ns (tpl_emit) */
  int gm = g - 1u >= 9999u; /* another block of the second: its digits 1-3 first */
  if (__builtin_expect(gm && r->filetime - t->ft1 >= 9999999u, 0)) return 1;
  /* (room < 2^62: no wrap; the same test as w->cap - w->len <= room, one instruction less) */
  if (__builtin_expect(w->len + room >= w->cap, 0)) return 1;
  /* nothing fails from here */
  if (__builtin_expect(gm, 0)) {
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
    if (__builtin_expect(((q0 ^ pl->memo_q[0]) | (q1 ^ pl->memo_q[1])) != 0, 0)) return miss(w, q, pl, p);
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
  if (__builtin_expect(kplan_chk4(w, pl, r, need, pl->room, &g), 0)) return kplan_gen_s(d, r, w, ref, pl);
  d->decoded++;
  char *p = w->buf + w->len;
  unsigned cpu = r->cpu;
  tpl_copy_ref(p, &pl->t, ref, g, cpu);
  return kplan_end4(w, pl, r, p, g, cpu, t0, t1, t2, t3, miss);
}


/* The writers the plans point at (the out-of-line entries, suffix _s, around the inline bodies
 * above). The Sample writer has every value's formatting inlined (DEC_FLATTEN). */
__attribute__((noinline)) static int kplan_genslow_s(struct etw_decoder *d, const struct etw_rec *r,
                                                     struct etw_jw *w, struct etw_evref *ref,
                                                     struct dec_kplan *pl) {
  return kplan_gen(d, w, pl, r, ref);
}
__attribute__((noinline)) static int kplan_gen_s(struct etw_decoder *d, const struct etw_rec *r,
                                                 struct etw_jw *w, struct etw_evref *ref,
                                                 struct dec_kplan *pl) {
  return kplan_fast(d, w, pl, r, ref, kplan_genslow_s);
}
__attribute__((noinline)) DEC_FLATTEN static int kplan_smiss_s(struct etw_jw *w, const unsigned char *q,
                                                               struct dec_kplan *pl, char *p) {
  return kplan_smiss(w, pl, q, p);
}
__attribute__((noinline)) static int eplan_miss_s(struct etw_decoder *d, struct etw_jw *w,
                                                  struct dec_eplan *pl, const struct etw_rec *r,
                                                  struct etw_evref *ref, char *p) {
  return eplan_miss(d, w, pl, r, ref, p);
}
__attribute__((noinline)) static int eplan_memo_s(struct etw_decoder *d, struct etw_jw *w,
                                                  struct dec_eplan *pl, const struct etw_rec *r,
                                                  struct etw_evref *ref, char *p) {
  return eplan_memo(d, w, pl, r, ref, p, eplan_miss_s);
}
__attribute__((noinline)) static int eplan_slow_s(struct etw_decoder *d, const struct etw_rec *r,
                                                  struct etw_jw *w, struct etw_evref *ref,
                                                  struct dec_eplan *pl) {
  return eplan_event(d, w, pl, r, ref, rec_d8(r), eplan_memo_s);
}
static int eplan_event_s(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                         struct etw_evref *ref, struct dec_eplan *pl, uint64_t d8) {
  (void)d8; /* (the record's: rec_d8) */
  return eplan_fast(d, w, pl, r, ref, eplan_memo_s, eplan_slow_s);
}
__attribute__((noinline)) static int eplan_clsslow_s(struct etw_decoder *d, const struct etw_rec *r,
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
