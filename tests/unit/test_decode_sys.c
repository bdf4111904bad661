/* test_decode_sys.c — the cached System-block writer (dec_sys.c) produces exactly the bytes of
 * the shared etw_event_write_system for every event of the corpus traces (all providers, kernel
 * and 32-bit records, day changes), compared event by event with a decoder that bypasses it.
 * That decoder (reference mode, etw_decoder_set_mode) also bypasses the kernel plans (dec_kplan_*: System text and fixed
 * EventData ops), so the plans are compared with the general path too, on the corpus records and
 * on mutated copies of records (short payloads, the other pointer size, other descriptor bytes,
 * keywords, pids, times, processors, activity IDs, the string-only flag), with the event refs,
 * return values and counters. The manifest event plans (dec_eplan_*) likewise. */
#include "decode.h"
#include "t.h"
#include "test_etl_util.h"

/* A corpus file's reader and two decoders: plans (fast) and the general path only (plain). */
/* A corpus file's reader, a plan decoder and a general-path one (reference mode), and a writer for each. */
struct pair {
  unsigned char *b;
  struct etw_etl_reader *r;
  struct etw_decoder *fast, *plain;
  struct etw_jw a, c;
};

static int pair_open(struct pair *p, const char *rel) {
  size_t n;
  p->b = tu_corpus_file(rel, &n);
  CHECK(p->b != NULL);
  if (!p->b) return 0;
  p->r = etw_etl_reader_new();
  struct etw_status st;
  CHECK_EQ(etw_etl_reader_add_mem(p->r, rel, p->b, n, &st), ETW_E_OK);
  p->fast = etw_decoder_new(tu_manifests());
  p->plain = etw_decoder_new(tu_manifests());
  etw_decoder_set_mode(p->plain, ETW_DECODE_REFERENCE);
  etw_jw_init(&p->a, 0);
  etw_jw_init(&p->c, 0);
  return 1;
}

static void pair_close(struct pair *p) {
  etw_jw_free(&p->a);
  etw_jw_free(&p->c);
  etw_decoder_free(p->fast);
  etw_decoder_free(p->plain);
  etw_etl_reader_free(p->r);
  free(p->b);
}

static void compare(const char *rel) {
  struct pair P;
  if (!pair_open(&P, rel)) return;
  struct etw_etl_reader *r = P.r;
  struct etw_decoder *fast = P.fast, *plain = P.plain;
  struct etw_status st;
  struct etw_jw *const a = &P.a, *const c = &P.c;
  struct etw_rec rec;
  struct etw_evref ra, rc;
  size_t events = 0, diff = 0;
  uint64_t rnd = 0x243F6A8885A308D3ull;
  while (etw_etl_reader_next(r, &rec, &st) == 1) {
    /* the record itself, then (every 5th record) 16 mutated copies, two of each kind (different
     * random values; the second often goes through a plan the first built) */
    int nv = events % 5 == 0 ? 17 : 1;
    for (int v = 0; v < nv; v++) {
      struct etw_rec m = rec;
      rnd ^= rnd << 13;
      rnd ^= rnd >> 7;
      rnd ^= rnd << 17;
      switch ((v + 1) / 2) {
      case 0: break;
      case 1: m.user_len = rec.user_len ? (uint32_t)(rnd % rec.user_len) : 0; break; /* short payload */
      case 2: m.ptr_size = rec.ptr_size == 8 ? 4 : 8; break;
      case 3: m.desc.level = (uint8_t)(rnd >> 8); m.desc.keyword ^= rnd & 3; break;
      case 4: m.pid = (uint32_t)(rnd >> 16) % 5 == 0 ? 0xFFFFFFFFu : (uint32_t)(rnd >> 20);
              m.tid = (uint32_t)rnd % 3 == 0 ? 0xFFFFFFFFu : (uint32_t)(rnd >> 40);
              m.cpu = (uint16_t)(rnd >> 50) % 40; break;
      case 5: m.filetime = (rnd & 1) ? 0 : (rnd & 2) ? UINT64_MAX - (rnd >> 60) : rec.filetime + (rnd >> 30); break;
      case 6: m.desc.version = (uint8_t)(rnd >> 24); m.user_len = rec.user_len ? (uint32_t)(rnd % (rec.user_len + 1)) : 0; break;
      case 7: if (rnd & 1) memcpy(m.activity_id, &rnd, 8); else m.flags ^= ETW_EVH_STRING_ONLY; break;
      default: m.desc.opcode ^= (uint8_t)(rnd >> 33) & 1; m.desc.task ^= (uint16_t)(rnd >> 34) & 1; break;
      }
      a->len = c->len = 0;
      int ka = etw_decoder_write(fast, &m, a, &ra);
      int kc = etw_decoder_write(plain, &m, c, &rc);
      events++;
      if (a->len != c->len || memcmp(a->buf, c->buf, a->len) || ka != kc || ra.provider != rc.provider || ra.name != rc.name ||
          ra.ts_ns != rc.ts_ns || ra.pid != rc.pid || ra.tid != rc.tid || ra.event_id != rc.event_id ||
          ra.level != rc.level || ra.cpu != rc.cpu || ra.off != rc.off || ra.len != rc.len) {
        if (diff++ < 3) fprintf(stderr, "%s #%zu (variant %d) differs:\n %s\n %s\n", rel, events, v, etw_jw_cstr(a), etw_jw_cstr(c));
      }
    }
  }
  CHECK_EQ(fast->undecoded, plain->undecoded);
  CHECK_EQ(fast->decoded, plain->decoded);
  CHECK_EQ(fast->unparsed, plain->unparsed);
  CHECK(events > 0);
  CHECK_EQ(diff, 0);
  pair_close(&P);
}

/* Writers whose maximum is about the size of the event (every 7th record: maxima of its size - 64
 * … size + 40, and 8 × size + 4096), for the plan decoder and the plain one: an event that does not
 * fit is dropped (0 with the writer error set: the batch truncates and counts it) or, when its
 * System block fits, written with the `Undecoded` member ("event too large"); never cut, never
 * partly written without the error. An event with room to spare is written whole, the same text
 * from both. */
static int edge_ok(struct etw_jw *x, int k, size_t max, const char *full, size_t len) {
  if (x->len > max) return 0;
  if (x->err) return 1; /* dropped by the caller (the general path may return 1 when only its closing
                          * `}}` did not fit) */
  if (x->len == len && !memcmp(x->buf, full, len)) return 1; /* whole (or Undecoded anyway) */
  if (k) return 0;
  const char *t = etw_jw_cstr(x), *u = strstr(t, ",\"Undecoded\":{\"Reason\":"), *e = strstr(full, ",\"EventData\":{");
  /* the System block as in the full text, then the reason: the event was decoded with room */
  return u && e && u - t == e - full && !memcmp(t, full, (size_t)(u - t)) && x->len >= 2 && !memcmp(t + x->len - 2, "}}", 2) &&
         !strncmp(u + 23, "\"event too large\"", 17);
}

static void writer_edges(const char *rel) {
  struct pair P;
  if (!pair_open(&P, rel)) return;
  struct etw_etl_reader *r = P.r;
  struct etw_decoder *fast = P.fast, *plain = P.plain;
  struct etw_status st;
  struct etw_jw big, big2;
  etw_jw_init(&big, 0);
  etw_jw_init(&big2, 0);
  struct etw_rec rec;
  struct etw_evref ra, rc;
  size_t events = 0, bad = 0, tried = 0, whole = 0, dropped = 0;
  while (etw_etl_reader_next(r, &rec, &st) == 1 && events < 60000) {
    big.len = big2.len = 0;
    int ka = etw_decoder_write(fast, &rec, &big, &ra); /* builds the plans */
    int kc = etw_decoder_write(plain, &rec, &big2, &rc);
    if (events++ % 7) continue;
    if (ka != kc || big.len != big2.len || memcmp(big.buf, big2.buf, big.len)) {
      bad++;
      continue;
    }
    size_t len = big.len;
    const char *full = etw_jw_cstr(&big);
    static const int delta[] = {-64, -20, -1, 0, 1, 2, 8, 31, 32, 40, 4096};
    for (size_t k = 0; k < sizeof delta / sizeof delta[0]; k++) {
      if (delta[k] < 0 && len <= (size_t)-delta[k]) continue;
      /* (4096: room to spare, also for the general path's worst-case string reservations) */
      size_t max = delta[k] == 4096 ? 8 * len + 4096 : len + (size_t)(long)delta[k];
      struct etw_decoder *ds[2] = {fast, plain};
      for (int j = 0; j < 2; j++) {
        struct etw_jw x;
        etw_jw_init(&x, max);
        int kx = etw_decoder_write(ds[j], &rec, &x, &ra);
        tried++;
        whole += kx == 1;
        dropped += x.err != 0;
        int ok = edge_ok(&x, kx, max, full, len);
        if (delta[k] < 0 && kx && !x.err) ok = 0;            /* it cannot fit */
        if (delta[k] == 4096 && (kx != ka || x.err)) ok = 0; /* it must */
        if (!ok && bad++ < 3)
          fprintf(stderr, "%s #%zu %s max %zu%+d: %d err %d len %zu\n %s\n %s\n", rel, events, j ? "plain" : "plans", len,
                  delta[k], kx, x.err, x.len, etw_jw_cstr(&x), full);
        etw_jw_free(&x);
      }
    }
  }
  CHECK(tried > 0);
  if (!(whole > tried / 16 && dropped > tried / 8)) fprintf(stderr, "%s: tried %zu whole %zu dropped %zu\n", rel, tried, whole, dropped);
  CHECK(whole > tried / 16 && dropped > tried / 8); /* both sides of the edge were met */
  CHECK_EQ(bad, 0);
  etw_jw_free(&big);
  etw_jw_free(&big2);
  pair_close(&P);
}

/* The decoder's number writers against the shared jw.c ones; its UTF-16 converter (jw.c's, SIMD
 * where available) against the scalar fallback. */
static void numbers_and_strings(void) {
  struct etw_jw a, c;
  etw_jw_init(&a, 0);
  etw_jw_init(&c, 0);
  uint64_t vals[900];
  size_t nv = 0;
  vals[nv++] = 0;
  vals[nv++] = UINT64_MAX;
  for (uint64_t p = 1, k = 0; k < 20; k++, p *= 10) {
    vals[nv++] = p - 1;
    vals[nv++] = p;
    vals[nv++] = p + 1;
  }
  for (uint64_t v = 0; v < 10100; v += v < 200 ? 1 : 37) vals[nv++] = v; /* every short length */
  for (int b = 0; b < 64; b++) {
    vals[nv++] = (uint64_t)1 << b;
    vals[nv++] = ((uint64_t)1 << b) - 1;
  }
  uint64_t rnd = 0x9E3779B97F4A7C15ull;
  while (nv < sizeof vals / sizeof vals[0]) { /* pseudo-random values of every length */
    rnd ^= rnd << 13;
    rnd ^= rnd >> 7;
    rnd ^= rnd << 17;
    vals[nv] = rnd >> (nv % 64);
    nv++;
  }
  for (size_t i = 0; i < nv; i++) {
    a.len = c.len = 0;
    dec_u64(&a, vals[i]);
    etw_jw_u64(&c, vals[i]);
    dec_hex(&a, vals[i]);
    etw_jw_hex(&c, vals[i]);
    dec_i64(&a, (int64_t)vals[i]);
    etw_jw_i64(&c, (int64_t)vals[i]);
    CHECK(!etw_jw_reserve(&a, 16));
    a.len = (size_t)(dec_put_u32(a.buf + a.len, (uint32_t)vals[i]) - a.buf);
    etw_jw_u64(&c, (uint32_t)vals[i]);
    CHECK(a.len == c.len && !memcmp(a.buf, c.buf, a.len));
  }
  /* GUIDs: dec_put_guid against etw_jw_guid (every byte position with every nibble value) */
  for (int i = 0; i < 16 * 17; i++) {
    unsigned char g[16];
    for (int k = 0; k < 16; k++) g[k] = (unsigned char)(vals[(i + k) % nv] >> (k * 3 % 56));
    if (i < 16 * 16) g[i / 16] = (unsigned char)((i % 16) * 0x11 ^ 0x0F * (i & 1));
    a.len = c.len = 0;
    CHECK(!etw_jw_reserve(&a, 40));
    a.len = (size_t)(dec_put_guid(a.buf, g) - a.buf);
    etw_jw_guid(&c, g);
    CHECK(a.len == c.len && !memcmp(a.buf, c.buf, a.len));
  }
  /* UTF-16: every unit class at every position of runs longer than one SIMD block */
  static const uint16_t units[] = {'a', 'Z', ' ', '~', 0x7F, '"', '\\', '\n', '\r', '\t', 1, 0x1F,
                                   0xE9, 0x20AC, 0xD83D, 0xDE00, 0xDC00, 0xFFFF, 0x80, 0x7FF, 0x800};
  const size_t nu = sizeof units / sizeof units[0];
  unsigned char buf[80];
  for (size_t len = 0; len <= 40; len++) {
    for (size_t pos = 0; pos < len || (len == 0 && pos == 0); pos++) {
      for (size_t u = 0; u < nu; u++) {
        for (size_t i = 0; i < len; i++) {
          uint16_t x = i == pos ? units[u] : (uint16_t)('A' + i % 26);
          if (i == pos + 1 && units[u] == 0xD83D) x = 0xDE00; /* a valid pair too */
          buf[2 * i] = (unsigned char)x;
          buf[2 * i + 1] = (unsigned char)(x >> 8);
        }
        a.len = c.len = 0;
        dec_str16(&a, buf, len);
        etw_jw_str16n_scalar(&c, buf, len);
        CHECK(a.len == c.len && !memcmp(a.buf, c.buf, a.len));
      }
    }
  }
  /* NUL stops both */
  memcpy(buf, "a\0b\0\0\0c\0d\0e\0f\0g\0h\0i\0j\0", 22);
  a.len = c.len = 0;
  CHECK_EQ(dec_str16(&a, buf, 11), 2);
  CHECK_EQ(etw_jw_str16n_scalar(&c, buf, 11), 2);
  CHECK(a.len == c.len && !memcmp(a.buf, c.buf, a.len));
  etw_jw_free(&a);
  etw_jw_free(&c);
}

/* SIDs, IPv4/IPv6 and SOCKADDRs against printf-built references. */
static void addresses(void) {
  struct etw_jw a;
  etw_jw_init(&a, 0);
  unsigned char b[80];
  char want[256];
  /* SID: 15 sub-authorities with large values, 48-bit authority */
  memset(b, 0, sizeof b);
  b[0] = 1;
  b[1] = 15;
  for (int i = 2; i < 8; i++) b[i] = 0xFF;
  for (int i = 0; i < 15; i++) memcpy(b + 8 + 4 * i, "\xff\xff\xff\xfe", 4);
  int k = snprintf(want, sizeof want, "\"S-1-%llu", 0xFFFFFFFFFFFFull);
  for (int i = 0; i < 15; i++) k += snprintf(want + k, sizeof want - (size_t)k, "-%u", 0xFEFFFFFFu);
  want[16 + 15 * 11] = 0; /* the writer cuts the text at 180 characters (+ the quote) */
  strcat(want, "\"");
  a.len = 0;
  CHECK_EQ(dec_value(&a, 19, 0, b, sizeof b, -1, 8, DV_MANIFEST, NULL), 68);
  CHECK(!strcmp(etw_jw_cstr(&a), want));
  b[1] = 1;
  a.len = 0;
  dec_value(&a, 19, 0, b, 12, -1, 8, DV_MANIFEST, NULL);
  CHECK(!strcmp(etw_jw_cstr(&a), "\"S-1-281474976710655-4278190079\""));
  /* IPv6 */
  static const struct {
    unsigned char g[16];
    const char *txt;
  } V6[] = {
      {{0}, "\"::\""},
      {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, "\"::1\""},
      {{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1}, "\"2001:db8::1:0:0:1\""},
      {{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0xab, 0xcd, 0x00, 0x0f, 0xff, 0xff}, "\"fe80::1234:abcd:f:ffff\""},
      {{0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0}, "\"1:0:2:0:3:0:4:0\""},
      {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
       "\"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff\""},
  };
  for (size_t i = 0; i < sizeof V6 / sizeof V6[0]; i++) {
    a.len = 0;
    CHECK_EQ(dec_value(&a, 14, 9, V6[i].g, 16, 16, 8, DV_MANIFEST, NULL), 16);
    CHECK(!strcmp(etw_jw_cstr(&a), V6[i].txt));
  }
  /* SOCKADDR_IN / _IN6 */
  unsigned char s4[16] = {2, 0, 0xFF, 0xFE, 10, 0, 255, 7};
  a.len = 0;
  dec_value(&a, 14, 10, s4, 16, 16, 8, DV_MANIFEST, NULL);
  CHECK(!strcmp(etw_jw_cstr(&a), "\"10.0.255.7:65534\""));
  unsigned char s6[28] = {23, 0, 0, 80};
  s6[8 + 15] = 1;
  a.len = 0;
  dec_value(&a, 14, 10, s6, 28, 28, 8, DV_MANIFEST, NULL);
  CHECK(!strcmp(etw_jw_cstr(&a), "\"[::1]:80\""));
  /* IPv4 (UInt32 with OutType IPv4) */
  unsigned char v4[4] = {192, 168, 0, 255};
  a.len = 0;
  dec_value(&a, 8, 8, v4, 4, -1, 8, DV_MANIFEST, NULL);
  CHECK(!strcmp(etw_jw_cstr(&a), "\"192.168.0.255\""));
  etw_jw_free(&a);
}

/* A writer whose maximum cannot hold an event's System block: the decoder returns 0 with the
 * writer error set (the caller drops and counts the event), on the plan paths and on the general
 * path alike, never a fragment without its System block. */
static void writer_too_small(const char *rel) {
  struct pair P;
  if (!pair_open(&P, rel)) return;
  struct etw_etl_reader *r = P.r;
  struct etw_decoder *fast = P.fast, *plain = P.plain;
  struct etw_status st;
  struct etw_jw big, tiny;
  etw_jw_init(&big, 0);
  struct etw_rec rec;
  struct etw_evref ref;
  size_t events = 0, bad = 0;
  while (etw_etl_reader_next(r, &rec, &st) == 1 && events < 20000) {
    struct etw_decoder *ds[2] = {fast, plain};
    for (int k = 0; k < 2; k++) {
      big.len = 0;
      etw_decoder_write(ds[k], &rec, &big, &ref); /* builds the plans */
      etw_jw_init(&tiny, 96);
      tiny.len = 0;
      int ok = etw_decoder_write(ds[k], &rec, &tiny, &ref);
      /* whatever is left must be empty or the start of a System block */
      if (ok || !tiny.err || (tiny.len && strncmp(tiny.buf, "\"System\"", tiny.len < 8 ? tiny.len : 8))) bad++;
      etw_jw_free(&tiny);
    }
    events++;
  }
  CHECK(events > 0);
  CHECK_EQ(bad, 0);
  etw_jw_free(&big);
  pair_close(&P);
}

static int ref_eq(const struct etw_evref *a, const struct etw_evref *b) {
  return a->provider == b->provider && a->name == b->name && a->ts_ns == b->ts_ns && a->pid == b->pid &&
         a->tid == b->tid && a->event_id == b->event_id && a->level == b->level && a->cpu == b->cpu &&
         a->off == b->off && a->len == b->len;
}

/* Record @m written by decoder @fast into @a and by @plain (the general path) into @c: 1 when the
 * text, the return value or the event reference differ. */
static int plan_differs(struct etw_decoder *fast, struct etw_decoder *plain, const struct etw_rec *m,
                        struct etw_jw *a, struct etw_jw *c) {
  struct etw_evref ra, rc;
  a->len = c->len = 0;
  int ka = etw_decoder_write(fast, m, a, &ra);
  int kc = etw_decoder_write(plain, m, c, &rc);
  return a->len != c->len || memcmp(a->buf, c->buf, a->len) || ka != kc || !ref_eq(&ra, &rc);
}

/* Times at the edges of a template's second (dec_tpl ft1: fraction 0, the first and last 100 ns of
 * a second, second 0 and FILETIME 0 — second 0's text is in a new template's slot) and of the
 * reference's ts_ns (dec_tpl ts_base / ts_mul: before, at and after 1970, the second holding the
 * INT64_MAX / 100 limit, the seconds around it, 2^63 100-ns units after 1970, the largest
 * FILETIMEs; each met twice, so that the second copy takes the template's second): for every
 * record type of the first 3000 records, a new decoder pair; the record (builds the plan), then
 * copies at these times, each compared with the general path (text, return value, ref). */
static void time_edges(const char *rel) {
  struct pair P;
  if (!pair_open(&P, rel)) return;
  struct etw_status st;
  struct etw_jw *const a = &P.a, *const c = &P.c;
  struct etw_rec rec;
  size_t n = 0, diff = 0, tried = 0;
  static const uint64_t T[] = {0, 1, 2, 9999999, 0, 5, 10000000, 10000001, 19999999, 20000000, 9999999, 0, 1,
                               132404488206530625ull, 132404488200000000ull, 132404488209999999ull,
                               132404488210000000ull, 132404488200000001ull, 3, 0,
#define EP 116444736000000000ull
#define LIM 92233720368547758ull /* INT64_MAX / 100 */
                               EP - 10000000, EP - 1, EP - 2, EP, EP, EP + 1, EP + 2, EP + 9999999, EP + 10000000,
                               EP + 10000001, EP + LIM / 10000000 * 10000000 - 1, EP + LIM / 10000000 * 10000000 - 2,
                               EP + LIM / 10000000 * 10000000, EP + LIM - 1, EP + LIM, EP + LIM + 1, EP + LIM + 2,
                               EP + LIM / 10000000 * 10000000 + 9999999, EP + LIM / 10000000 * 10000000 + 10000000,
                               EP + LIM / 10000000 * 10000000 + 10000001, EP + (1ull << 63) - 1, EP + (1ull << 63),
                               EP + (1ull << 63) + 1, UINT64_MAX - 1, UINT64_MAX, UINT64_MAX - 10000000,
                               132404488206530625ull, 132404488206530626ull, EP + 5, EP + 6, 1, 2};
#undef EP
#undef LIM
  while (etw_etl_reader_next(P.r, &rec, &st) == 1 && n++ < 3000) {
    if (n % 3) continue;
    struct etw_decoder *fast = etw_decoder_new(tu_manifests()), *plain = etw_decoder_new(tu_manifests());
    etw_decoder_set_mode(plain, ETW_DECODE_REFERENCE);
    for (size_t k = 0; k <= sizeof T / sizeof T[0]; k++) {
      struct etw_rec m = rec;
      if (k) m.filetime = T[k - 1];
      tried++;
      if (plan_differs(fast, plain, &m, a, c)) {
        if (diff++ < 3) fprintf(stderr, "%s #%zu time %zu differs:\n %s\n %s\n", rel, n, k, etw_jw_cstr(a), etw_jw_cstr(c));
      }
    }
    etw_decoder_free(fast);
    etw_decoder_free(plain);
  }
  CHECK(tried > 1000);
  CHECK_EQ(diff, 0);
  pair_close(&P);
}

/* The Sample writer's memo (dec_kplan.memo: the EventData text of the last payload, reused for the
 * same 16 bytes): PerfInfo/Sample records of the trace replayed with payloads that differ from the
 * previous one in one byte (every position, values that change a number's length), the same
 * payload again, and back; each compared with the general path (text, return value, ref). */
static void memo_edges(const char *rel) {
  struct pair P;
  if (!pair_open(&P, rel)) return;
  struct etw_status st;
  struct etw_jw *const a = &P.a, *const c = &P.c;
  struct etw_rec rec;
  size_t n = 0, diff = 0, tried = 0, samples = 0;
  uint64_t rnd = 0x9E3779B97F4A7C15ull;
  while (etw_etl_reader_next(P.r, &rec, &st) == 1 && n++ < 40000) {
    int sample = rec.hook_id == 0x0F2E && rec.user_len == 16 && rec.ptr_size == 8;
    unsigned char pay[16];
    if (sample) memcpy(pay, rec.user_data, 16);
    int nv = sample && samples++ % 50 == 0 ? 16 * 6 + 3 : 1;
    for (int v = 0; v < nv; v++) {
      struct etw_rec m = rec;
      unsigned char buf[16];
      if (v) {
        rnd ^= rnd << 13;
        rnd ^= rnd >> 7;
        rnd ^= rnd << 17;
        int i = (v - 1) / 6 % 16, k = (v - 1) % 6;
        memcpy(buf, pay, 16);
        if (v <= 96) {
          static const unsigned char B[] = {0, 1, 0x7F, 0xFF, 0x10};
          buf[i] = k < 5 ? B[k] : (unsigned char)rnd;
          if (k == 5) memcpy(pay, buf, 16); /* the next ones differ from this one */
        }
        m.user_data = buf;
      }
      tried++;
      if (plan_differs(P.fast, P.plain, &m, a, c)) {
        if (diff++ < 3) fprintf(stderr, "%s #%zu payload %d differs:\n %s\n %s\n", rel, n, v, etw_jw_cstr(a), etw_jw_cstr(c));
      }
    }
  }
  CHECK(samples > 1000);
  CHECK(tried > samples + 10000);
  CHECK_EQ(diff, 0);
  pair_close(&P);
}

/* The manifest plans' EventData memo (dec_eplan.memo: the text of the last payload, reused for the
 * same bytes and pointer size): every 7th manifest event of the trace replayed at once (a memo hit),
 * with one byte changed at its start, middle and end, the original again, the other pointer size,
 * one byte less; each compared with the general path (text, return value, ref). */
static void ememo_edges(const char *rel) {
  struct pair P;
  if (!pair_open(&P, rel)) return;
  struct etw_status st;
  struct etw_jw *const a = &P.a, *const c = &P.c;
  struct etw_rec rec;
  size_t n = 0, diff = 0, tried = 0, replayed = 0;
  unsigned char *buf = malloc(65536);
  CHECK(buf != NULL);
  while (buf && etw_etl_reader_next(P.r, &rec, &st) == 1) {
    int rp = rec.kind == ETW_REC_EVENT && rec.user_len > 0 && rec.user_len <= 65536 && n++ % 7 == 0;
    replayed += rp;
    for (int v = 0; v < (rp ? 9 : 1); v++) {
      struct etw_rec m = rec;
      if (v >= 2 && v <= 4) { /* one byte changed */
        memcpy(buf, rec.user_data, rec.user_len);
        size_t i = v == 2 ? 0 : v == 3 ? rec.user_len / 2 : rec.user_len - 1;
        buf[i] ^= (unsigned char)(1u << (n % 8));
        m.user_data = buf;
      }
      if (v == 6) m.ptr_size = rec.ptr_size == 8 ? 4 : 8;
      if (v == 7) m.user_len = rec.user_len - 1;
      tried++;
      if (plan_differs(P.fast, P.plain, &m, a, c)) {
        if (diff++ < 3) fprintf(stderr, "%s #%zu variant %d differs:\n %s\n %s\n", rel, n, v, etw_jw_cstr(a), etw_jw_cstr(c));
      }
    }
  }
  CHECK(replayed > 1000);
  CHECK_EQ(diff, 0);
  CHECK_EQ(P.fast->decoded, P.plain->decoded);
  CHECK_EQ(P.fast->undecoded, P.plain->undecoded);
  free(buf);
  pair_close(&P);
}

/* The kernel plans' network ops (DEC_KOP_PORT, DEC_KOP_IPV6: TcpIp and UdpIp IPv6 records): each
 * such record of the trace replayed with its payload's bytes from offset 8 on (the addresses and
 * ports of the TCP6 layouts) set to patterns — zeros, one or two zero runs at every position (the
 * RFC 5952 "::" rule and its leftmost tie), groups of 1 to 4 digits, all groups ≥ 0x1000 (the
 * longest text), ports 0, 1, 0x1234, 0xFFFF —, random bytes, and one byte less, one more (a
 * payload the ops do not fit exactly); each compared with the general path (text, return value,
 * ref). */
static void net_edges(const char *rel) {
  struct pair P;
  if (!pair_open(&P, rel)) return;
  struct etw_status st;
  struct etw_jw *const a = &P.a, *const c = &P.c;
  struct etw_rec rec;
  size_t diff = 0, tried = 0, seen = 0;
  uint64_t rnd = 0x2545F4914F6CDD1Dull;
  unsigned char buf[512];
  memset(buf, 0, sizeof buf);
  while (etw_etl_reader_next(P.r, &rec, &st) == 1) {
    unsigned g = rec.hook_id >> 8;
    if ((rec.kind != ETW_REC_SYSTEM && rec.kind != ETW_REC_PERFINFO) || (g != 0x06 && g != 0x08) ||
        rec.user_len < 48 || rec.user_len > sizeof buf - 1)
      continue;
    if (seen++ % 3) continue; /* (a third of them: the plan is built by then) */
    for (int v = 0; v < 64; v++) {
      struct etw_rec m = rec;
      memcpy(buf, rec.user_data, rec.user_len);
      unsigned char *x = buf + 8; /* daddr, saddr (16 bytes each), dport, sport */
      if (v < 16) { /* zero runs: groups v/2 … of daddr zero, and of saddr from group v % 8 */
        for (int i = 0; i < 8; i++) {
          x[2 * i] = (unsigned char)(i + 1);
          x[2 * i + 1] = (unsigned char)(0x10 * i);
          x[16 + 2 * i] = 0x20;
          x[16 + 2 * i + 1] = (unsigned char)i;
        }
        for (int i = v / 2; i < 8 && i < v / 2 + 1 + v % 3; i++) x[2 * i] = x[2 * i + 1] = 0;
        for (int i = v % 8; i < 8 && i < v % 8 + 2; i++) x[16 + 2 * i] = x[16 + 2 * i + 1] = 0;
        if (v == 5) { /* two runs of two: the first is "::" */
          memset(x, 0xAB, 16);
          x[2] = x[3] = x[4] = x[5] = 0;
          x[10] = x[11] = x[12] = x[13] = 0;
        }
      } else if (v < 24) { /* all zero, all 0xFF, one-digit groups, four-digit groups */
        static const unsigned char F[] = {0, 0xFF, 0x01, 0x10};
        for (int i = 0; i < 32; i++) x[i] = (unsigned char)(i % 2 ? F[v % 4] : v < 20 ? F[v % 4] : 0x10 + i);
      } else if (v < 28) { /* ports */
        static const unsigned char PT[][2] = {{0, 0}, {0, 1}, {0x12, 0x34}, {0xFF, 0xFF}};
        memcpy(x + 32, PT[v - 24], 2);
        memcpy(x + 34, PT[(v + 1) % 4], 2);
      } else { /* random */
        for (unsigned i = 8; i < rec.user_len; i++) {
          rnd ^= rnd << 13;
          rnd ^= rnd >> 7;
          rnd ^= rnd << 17;
          buf[i] = (unsigned char)(v % 4 == 0 && (rnd >> 20) % 3 ? 0 : rnd);
        }
      }
      if (v == 62) m.user_len = rec.user_len - 1;
      if (v == 63) m.user_len = rec.user_len + 1; /* (buf holds one byte more) */
      m.user_data = buf;
      tried++;
      if (plan_differs(P.fast, P.plain, &m, a, c)) {
        if (diff++ < 3) fprintf(stderr, "%s net #%zu variant %d differs:\n %s\n %s\n", rel, seen, v, etw_jw_cstr(a), etw_jw_cstr(c));
      }
    }
  }
  CHECK(seen > 300);
  CHECK(tried > 6000);
  CHECK_EQ(diff, 0);
  pair_close(&P);
}

/* Kernel records replayed with (pid, tid) pairs whose texts have every length from 2 to 20 digits
 * (and none: 0xFFFFFFFF), each twice, with the record's descriptor and four others: the first rewrites the template's (pid, tid) text, which
 * moves its end over 16-byte chunk boundaries both ways, the second is written by the plan as it is
 * (the template copy must follow the chunk count); also
 * processors 9, 10 and 255; each compared with the general path (text, return value, ref). */
static void pidtid_edges(const char *rel) {
  struct pair P;
  if (!pair_open(&P, rel)) return;
  struct etw_status st;
  struct etw_jw *const a = &P.a, *const c = &P.c;
  struct etw_rec rec;
  size_t n = 0, diff = 0, tried = 0, samples = 0;
  static const uint32_t V[] = {0, 7, 42, 999, 1000, 65535, 123456, 9999999, 12345678, 999999999, 1000000000,
                               4294967294u, 4294967295u};
  const size_t nv = sizeof V / sizeof V[0];
  while (etw_etl_reader_next(P.r, &rec, &st) == 1 && n++ < 60000) {
    if (rec.kind != ETW_REC_SYSTEM && rec.kind != ETW_REC_PERFINFO) continue;
    int sample = rec.hook_id == 0x0F2E && rec.user_len == 16 && rec.ptr_size == 8;
    samples += sample;
    if (n % (sample ? 97 : 29)) continue;
    /* event IDs, levels and tasks of other lengths: other System texts (plans rebuilt), so that
     * some (pid, tid) changes move the template's end over a chunk boundary */
    static const uint16_t DI[][3] = {{0, 0, 0}, {10, 0, 0}, {1000, 25, 0}, {123, 4, 5678}, {65535, 255, 65535}};
    for (size_t k = 0; k < (2 * nv * 2 + 6) * 5; k++) {
      struct etw_rec m = rec;
      size_t j = k % (2 * nv * 2 + 6) / 2, u = k / (2 * nv * 2 + 6); /* (each pair twice) */
      if (u) {
        m.desc.id = DI[u][0];
        m.desc.level = (uint8_t)DI[u][1];
        m.desc.task = DI[u][2];
      }
      if (j < 2 * nv) { /* pid V[j % nv] with tid V[(j * 5 + 3) % nv]: lengths up and down */
        m.pid = V[j % nv];
        m.tid = V[(j * 5 + 3) % nv];
      } else {
        static const uint16_t CPU[] = {9, 10, 255};
        m.cpu = CPU[j - 2 * nv];
      }
      tried++;
      if (a->buf) memset(a->buf, 0xEE, a->cap); /* (no byte left from the last write: each is written) */
      if (plan_differs(P.fast, P.plain, &m, a, c)) {
        if (diff++ < 3) fprintf(stderr, "%s #%zu pid/tid %zu differs:\n %s\n %s\n", rel, n, k, etw_jw_cstr(a), etw_jw_cstr(c));
      }
    }
  }
  CHECK(samples > 1000);
  CHECK(tried > 10000);
  CHECK_EQ(diff, 0);
  pair_close(&P);
}

static void corpus(void) {
  pidtid_edges("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl");
  net_edges("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl");
  ememo_edges("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl");
  memo_edges("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl");
  time_edges("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl");
  compare("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl");
  compare("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/smallEtlFile.etl");
  compare("airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl");
  compare("jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl");
  writer_edges("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl");
  writer_edges("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/smallEtlFile.etl");
}

/* dec_fill_ref's ts_ns against its definition (ns since 1970 for times after 1970 that fit, 0
 * before, INT64_MAX after) at the edges. */
static void ref_times(void) {
  const uint64_t epoch = 116444736000000000ULL, lim = (uint64_t)INT64_MAX / 100;
  const uint64_t T[] = {0, 1, epoch - 1, epoch, epoch + 1, epoch + 2, epoch + lim - 1, epoch + lim, epoch + lim + 1,
                        epoch + lim + 2, epoch + (1ull << 62), epoch + (1ull << 63) - 1, epoch + (1ull << 63),
                        epoch + (1ull << 63) + 1, UINT64_MAX - 1, UINT64_MAX, 132404488206530625ull,
                        (uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1};
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
    struct etw_evref ref;
    r.filetime = T[i];
    dec_fill_ref(&ref, &r, "p", "n");
    int64_t want;
    if (T[i] <= epoch) want = 0;
    else if (T[i] - epoch <= lim) want = (int64_t)(T[i] - epoch) * 100;
    else want = INT64_MAX;
    if (ref.ts_ns != want) fprintf(stderr, "ts_ns of %llu: %lld\n", (unsigned long long)T[i], (long long)ref.ts_ns);
    CHECK(ref.ts_ns == want);
  }
}

int main(void) {
  ref_times();
  writer_too_small("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/smallEtlFile.etl");
  numbers_and_strings();
  addresses();
  corpus();
  T_DONE();
}
