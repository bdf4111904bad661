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

void dec_sys_free(struct etw_decoder *d) {
  free(d->sysc);
  d->sysc = NULL;
  for (size_t i = 0; i < sizeof d->kplan / sizeof d->kplan[0]; i++) {
    free(d->kplan[i]);
    d->kplan[i] = NULL;
  }
  for (size_t i = 0; i < DEC_EPLAN_N; i++) {
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

/* `PID,"ThreadID":TID,"ProcessorID":CPU}}` at @p (≤ 96 bytes of room) for the record's @pid and
 * @tid (0xFFFFFFFF = null): the (pid, tid) text from the per-thread-id cache. */
static inline char *put_exec(struct dec_sysc *sc, char *p, uint32_t pid, uint32_t tid, int cpu) {
  struct exc *x = &sc->ex[(tid * 2654435761u) >> 24];
  uint64_t key = (uint64_t)pid << 32 | tid;
  if (x->key == key && x->len) {
    /* fixed-size copy: EXC_COPY ≤ 96 bytes fit in the room */
    memcpy(p, x->txt, EXC_COPY);
    p += x->len;
  } else {
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
  }
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

/* Copy a plan's text (prefix, time slot, middle: @n ≤ DEC_TXT_MAX bytes) to @p: with SSE2, in
 * 16-byte chunks rounded up (up to 15 bytes more from @t, which has DEC_TXT_BYTES, and to @p,
 * whose reservation has ≥ 96 bytes past the text), entered through a jump into straight-line
 * code: no call, no loop (one `memcpy` of the ≈ 370 bytes took ≈ 64 instructions). */
#if defined(__SSE2__)
#include <emmintrin.h>
#define C16(i) _mm_storeu_si128((__m128i *)(void *)(p + 16 * (i)), _mm_loadu_si128((const __m128i *)(const void *)(t + 16 * (i))))
__attribute__((noinline)) static void copy_text(char *p, const char *t, size_t n) {
  switch ((n + 15) >> 4) {
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
  default: break;
  }
}
#undef C16
#if DEC_TXT_MAX > 38 * 16 || DEC_TXT_BYTES < DEC_TXT_MAX
#error "copy_text: DEC_TXT_MAX"
#endif
#else
static inline void copy_text(char *p, const char *t, size_t n) {
  memcpy(p, t, n);
}
#endif

/* ---- kernel plans */
void dec_kplan_update(struct etw_decoder *d, uint32_t slot, uint64_t key, const struct etw_rec *r,
                      const struct etw_sys *s, uint64_t d8) {
  if (!d->sysc || d->sys_plain || s->activity_id || s->related_activity_id) return;
  struct dec_kplan *pl = d->kplan[slot];
  uint32_t hv = ((uint32_t)r->hook_id << 8 | r->desc.version) + 1;
  if (pl && pl->hv == hv && pl->d8 == d8 && pl->kw == s->keywords && pl->prov == s->provider &&
      pl->name == s->event_name && pl->task == s->task_name && pl->opcode == s->opcode_name) {
    if (pl->key != key || pl->ps != r->ptr_size) { /* a new generation, or the other pointer size */
      uint32_t need = 0;
      unsigned n = dec_mof_plan_ops(r, r->ptr_size, pl->head, &pl->hlen, pl->ops, DEC_KOPS, &need);
      pl->ps = n ? r->ptr_size : 0;
      pl->nops = (uint8_t)n;
      pl->need = need;
      pl->tail = n && pl->ops[n - 1].ty >= DEC_KOP_STR16;
      pl->room = (uint32_t)pl->plen + pl->mlen + 128 + 64 + pl->nops * 64u;
      pl->key = key;
    }
    return;
  }
  if (!pl && !(pl = d->kplan[slot] = calloc(1, sizeof *pl))) return;
  pl->key = 0;
  if (pl->builds >= DEC_KPLAN_BUILDS) return;
  pl->builds++;
  if (sys_text(s, pl->txt, DEC_TXT_MAX, &pl->plen, &pl->mlen, 1)) return;
  pl->tlen = (uint16_t)(pl->plen + 30 + pl->mlen);
  uint32_t need = 0;
  unsigned n = dec_mof_plan_ops(r, r->ptr_size, pl->head, &pl->hlen, pl->ops, DEC_KOPS, &need);
  pl->ps = n ? r->ptr_size : 0;
  pl->nops = (uint8_t)n;
  pl->need = need;
  pl->tail = n && pl->ops[n - 1].ty >= DEC_KOP_STR16;
  pl->room = (uint32_t)pl->plen + pl->mlen + 128 + 64 + pl->nops * 64u;
  pl->hv = hv;
  pl->d8 = d8;
  pl->kw = s->keywords;
  pl->prov = s->provider;
  pl->name = s->event_name;
  pl->task = s->task_name;
  pl->opcode = s->opcode_name;
  pl->key = key;
}

void dec_eplan_update(struct etw_decoder *d, uint32_t slot, const struct etw_rec *r, const struct etw_sys *s,
                      uint64_t d8, struct dec_provider *p, struct dec_event *e, int cls) {
  if (!d->sysc || d->sys_plain || s->activity_id || s->related_activity_id || !d->reg_gen) return;
  /* the way of set @slot (slots slot and slot + 1) whose text applies; else one to (re)build: an
   * empty or expired one, else the one built less recently */
  struct dec_eplan *pl = NULL;
  for (uint32_t k = slot; k < slot + 2 && !pl; k++) {
    struct dec_eplan *c = d->eplan[k];
    if (c && c->plen && !memcmp(c->guid, r->provider_id, 16) && c->d8 == d8 && c->kw == s->keywords &&
        c->kind == r->kind && c->cls == (cls != 0) && c->prov == s->provider && c->name == s->event_name &&
        c->task == s->task_name && c->opcode == s->opcode_name)
      pl = c;
  }
  if (pl) {
    /* the text still applies (a new registry generation, or the schema replaced): revalidate */
    pl->p = p;
    pl->e = e;
    pl->pname = p ? p->name : NULL;
    pl->gen = d->reg_gen;
    return;
  }
  uint32_t k = slot;
  if (d->eplan[k] && d->eplan[k]->gen == d->reg_gen &&
      (!d->eplan[k + 1] || d->eplan[k + 1]->gen != d->reg_gen || d->eplan[k + 1]->seq < d->eplan[k]->seq))
    k++;
  if (!(pl = d->eplan[k]) && !(pl = d->eplan[k] = calloc(1, sizeof *pl))) return;
  pl->gen = 0;
  pl->plen = 0;
  pl->seq = ++d->eplan_seq;
  if (pl->builds >= DEC_KPLAN_BUILDS) return;
  pl->builds++;
  if (sys_text(s, pl->txt, DEC_TXT_MAX, &pl->plen, &pl->mlen, 1)) {
    pl->plen = 0;
    return;
  }
  pl->tlen = (uint16_t)(pl->plen + 30 + pl->mlen);
  memcpy(pl->guid, r->provider_id, 16);
  pl->d8 = d8;
  pl->kw = s->keywords;
  pl->kind = r->kind;
  pl->cls = cls != 0;
  pl->p = p;
  pl->e = e;
  pl->pname = p ? p->name : NULL;
  pl->prov = s->provider;
  pl->name = s->event_name;
  pl->task = s->task_name;
  pl->opcode = s->opcode_name;
  pl->room = (uint32_t)pl->plen + pl->mlen + 128 + 16;
  pl->gen = d->reg_gen;
}

static inline int eplan_write(struct etw_decoder *d, struct etw_jw *w, const struct dec_eplan *pl,
                              const struct etw_rec *r, size_t *mark) {
  struct dec_sysc *sc = d->sysc;
  if (etw_jw_reserve(w, pl->room)) return -2;
  uint64_t ft = r->filetime ? r->filetime : 1;
  char *p = w->buf + w->len;
  copy_text(p, pl->txt, pl->tlen);
  if (!put_time_p(sc, p + pl->plen, ft)) return -2;
  p = put_exec(sc, p + pl->tlen, r->pid, r->tid, r->cpu);
  *mark = (size_t)(p - w->buf);
  memcpy(p, ",\"EventData\":{", 14);
  w->len = (size_t)(p + 14 - w->buf);
  return 0;
}

/* Returns the payload bytes consumed (EventData open: payload bytes are left), -3 (every payload
 * byte consumed, the event closed with `}}`), -1 (System written and ended at *@mark: the caller
 * writes EventData), or -2 (nothing written: the general path). */
static inline long kplan_write(struct etw_decoder *d, struct etw_jw *w, const struct dec_kplan *pl,
                               const struct etw_rec *r, size_t *mark) {
  struct dec_sysc *sc = d->sysc;
  if (etw_jw_reserve(w, pl->room)) return -2;
  uint64_t ft = r->filetime ? r->filetime : 1;
  char *p = w->buf + w->len;
  copy_text(p, pl->txt, pl->tlen);
  if (!put_time_p(sc, p + pl->plen, ft)) return -2;
  p = put_exec(sc, p + pl->tlen, r->pid, r->tid, r->cpu);
  *mark = (size_t)(p - w->buf);
  if (pl->ps != r->ptr_size || r->user_len < pl->need) { /* no ops (ps 0), or a short payload */
    w->len = *mark;
    return -1;
  }
  const unsigned char *q = r->user_data;
  memcpy(p, pl->head, sizeof pl->head);
  p += pl->hlen;
  for (const struct dec_kop *o = pl->ops, *e = o + pl->nops - pl->tail;;) {
    switch (o->ty) {
    case DEC_KOP_U32: p = dec_put_u64(p, d_rd32(q)); q += 4; break;
    case DEC_KOP_I32: p = dec_put_i64(p, (int32_t)d_rd32(q)); q += 4; break;
    case DEC_KOP_X32: p = dec_put_hex(p, d_rd32(q)); q += 4; break;
    case DEC_KOP_U16: p = dec_put_u64(p, d_rd16(q)); q += 2; break;
    case DEC_KOP_U8: p = dec_put_u64(p, q[0]); q += 1; break;
    case DEC_KOP_I8: p = dec_put_i64(p, (int8_t)q[0]); q += 1; break;
    case DEC_KOP_U64: p = dec_put_u64(p, d_rd64(q)); q += 8; break;
    case DEC_KOP_I64: p = dec_put_i64(p, (int64_t)d_rd64(q)); q += 8; break;
    default: p = dec_put_hex(p, d_rd64(q)); q += 8; break; /* DEC_KOP_X64 */
    }
    if (++o == e) break;
    memcpy(p, o->key, sizeof o->key);
    p += o->klen;
  }
  if (pl->tail && r->user_len > pl->need) { /* the last field: the rest of the payload */
    const struct dec_kop *o = &pl->ops[pl->nops - 1];
    size_t avail = r->user_len - pl->need;
    long k;
    memcpy(p, o->key, sizeof o->key);
    w->len = (size_t)(p + o->klen - w->buf);
    if (o->ty == DEC_KOP_STR16) { /* as write_compiled's 'w' */
      size_t units = avail / 2, got = dec_str16(w, q, units);
      k = got < units ? (long)got * 2 + 2 : (long)avail;
    } else { /* as write_compiled's 'S' */
      unsigned ps = r->ptr_size;
      size_t m = avail / ps;
      k = (long)(m * ps);
      if (!etw_jw_reserve(w, m * 21 + 2)) {
        p = w->buf + w->len;
        *p++ = '[';
        for (size_t i = 0; i < m; i++) {
          if (i) *p++ = ',';
          p = dec_put_hex(p, ps == 4 ? d_rd32(q + i * 4) : d_rd64(q + i * 8));
        }
        *p++ = ']';
        w->len = (size_t)(p - w->buf);
      }
    }
    return (long)pl->need + k;
  }
  if (r->user_len == pl->need) { /* every payload byte used: EventData and the event closed */
    *p++ = '}';
    *p++ = '}';
    w->len = (size_t)(p - w->buf);
    return -3;
  }
  w->len = (size_t)(p - w->buf);
  return (long)pl->need;
}

int dec_kplan_event(struct etw_decoder *d, struct etw_jw *w, const struct dec_kplan *pl, const struct etw_rec *r,
                    struct etw_evref *ref, uint64_t d8, uint32_t kslot, uint64_t kkey) {
  size_t mark;
  long rc = kplan_write(d, w, pl, r, &mark);
  if (rc == -3) { /* the whole event written (the reservation succeeded: no writer error) */
    d->decoded++;
    if (ref) dec_fill_ref(ref, r, pl->prov, pl->name);
    return 1;
  }
  if (rc == -2) return dec_write_general(d, r, w, ref, d8, kslot, kkey);
  const char *why = "unknown event";
  if (rc == -1) {
    etw_jw_lit(w, ",\"EventData\":{");
    rc = dec_mof_write(w, r, &why);
  }
  return dec_finish_fast(d, r, w, ref, pl->prov, pl->name, mark, rc, why);
}

int dec_eplan_event(struct etw_decoder *d, struct etw_jw *w, const struct dec_eplan *pl, const struct etw_rec *r,
                    struct etw_evref *ref, uint64_t d8) {
  size_t mark;
  if (eplan_write(d, w, pl, r, &mark)) return dec_write_general(d, r, w, ref, d8, 0, 0);
  const char *why = "unknown event";
  long rc;
  if (pl->cls) {
    rc = dec_mof_write(w, r, &why);
  } else {
    rc = dec_fields_write_d(d, w, pl->e, r->user_data, r->user_len, r->ptr_size, &why);
    pl->p->seen++;
  }
  return dec_finish_fast(d, r, w, ref, pl->prov, pl->name, mark, rc, why);
}
