/* test_etl_rectypes.c — the reader's record parsers on hand-built traces with random records of
 * every header type (SYSTEM / COMPACT 1..4, PERFINFO 0x10/0x11, FULL / INSTANCE 0x0A, 0x0B, 0x14,
 * 0x15, EVENT_HEADER 0x12/0x13 with and without extended items, WPP, garbage): random versions
 * (extension bits), sizes right, short or too long, random fields. The whole-word fast paths
 * (etl_reader.c parse_one) must give exactly what the field-by-field parse_generic gives
 * (a reader in reference mode, etw_decode_set_default): every field, the order, the result and the damage message; and
 * etw_etl_reader_next_batch the same as next_ref. Both clock kinds (10 MHz: filetime by
 * addition; 3.3 MHz: to_filetime).
 */
#include "t.h"
#include "test_etl_util.h"

extern unsigned etw_etl_batch_max;

#define NBUF 5
#define BSZ 8192

static uint32_t rnd(uint32_t *s) {
  *s = *s * 1103515245u + 12345u;
  return *s >> 8;
}

/* Logfile header record (SYSTEM64) at @p: clock type @clock, QPC frequency @freq. */
static size_t logfile_header(unsigned char *p, uint32_t clock, uint64_t freq) {
  size_t hl = 0x118, size = 0x20 + hl + 4;
  memset(p, 0, size);
  tu_w16(p, 2);
  p[2] = 2;
  p[3] = 0xC0;
  tu_w16(p + 4, (unsigned)size);
  tu_w64(p + 0x10, 1000000);
  unsigned char *h = p + 0x20;
  tu_w32(h, BSZ);
  tu_w32(h + 0x24, NBUF);
  tu_w32(h + 0x2C, 8);
  tu_w32(h + 0x34, 3000);
  size_t b = 0x48 + 176;
  tu_w64(h + b + 8, freq);
  tu_w64(h + b + 16, 132754283728578510ULL);
  tu_w32(h + b + 24, clock);
  return (size + 7) & ~(size_t)7;
}

/* One random record at @p (at most @room bytes); returns its length with padding, 0 if none
 * fits. The time grows by a random step (sometimes 0: ties across processors). With @bad, some
 * records are malformed (sizes, extension bits, extended items, garbage). */
/* With repeats on (test_repeated_perfinfo), the PERFINFO header (first 8 bytes) last written,
 * or none (prev_perf[2] = 0). */
static int repeats;
static unsigned char prev_perf[8];
static unsigned char prev_evh[8]; /* (likewise the last EVENT_HEADER's first 8 bytes) */
static int cut_here; /* the record just written ends the buffer's payload early */

static size_t record(unsigned char *p, size_t room, uint32_t *s, uint64_t *ts, int bad) {
  if (repeats && room >= 16 && rnd(s) % 2) {
    /* a PERFINFO record with the first 8 bytes of the last one (the reader's memo), or of the
     * memo's starting value (type 0x10, version 0, size 0x10, HookId 0); the rest random. With
     * @bad sometimes past the buffer's end. */
    if (prev_perf[2] == 0 || rnd(s) % 8 == 0) {
      memset(prev_perf, 0, 8);
      prev_perf[2] = 0x10;
      prev_perf[3] = 0xC0;
      prev_perf[4] = 0x10;
    }
    size_t len = prev_perf[4] | (size_t)prev_perf[5] << 8;
    *ts += rnd(s) % 3 ? rnd(s) % 5000 : 0;
    if (bad && len >= 16 && rnd(s) % 12 == 0) {
      /* the buffer's payload ends 1..12 bytes before the record's end */
      size_t cut = len - 1 - rnd(s) % 12;
      if (cut < 8) cut = 8;
      if (cut + 8 > room) return 0;
      memcpy(p, prev_perf, 8);
      for (size_t i = 8; i < cut; i++) p[i] = (unsigned char)rnd(s);
      if (cut >= 16) tu_w64(p + 8, *ts);
      cut_here = 1;
      return cut;
    }
    if (len + 8 > room) {
      if (!bad || rnd(s) % 2) return 0;
      len = room - 8; /* the size says more than there is */
      memcpy(p, prev_perf, 8);
      for (size_t i = 8; i < len; i++) p[i] = (unsigned char)rnd(s);
      tu_w64(p + 8, *ts);
      return len & ~(size_t)7;
    }
    memcpy(p, prev_perf, 8);
    for (size_t i = 8; i < len; i++) p[i] = (unsigned char)rnd(s);
    if (len >= 16) tu_w64(p + 8, *ts);
    return (len + 7) & ~(size_t)7;
  }
  static const unsigned types[] = {1, 2, 3, 4, 0x10, 0x11, 0x0A, 0x0B, 0x14, 0x15, 0x12, 0x13, 0x10, 0x11, 0x12, 0x13};
  unsigned kind = rnd(s) % (bad ? 20 : 19);
  size_t len = 0x18 + rnd(s) % 0x90;
  if (len + 8 > room) return 0;
  for (size_t i = 0; i < len; i++) p[i] = (unsigned char)rnd(s);
  *ts += rnd(s) % 3 ? rnd(s) % 5000 : 0;
  if (kind < 16) {
    unsigned type = types[kind];
    p[2] = (unsigned char)type;
    p[3] = (unsigned char)(0xC0 | (rnd(s) & 0x3F));
    int evh = type == 0x12 || type == 0x13, classic = type >= 0x0A && type <= 0x15 && !evh && type != 0x10 && type != 0x11;
    if (evh || classic) {
      size_t need = evh ? 0x50 : (type & 1) ? 0x48 : 0x30;
      if (len < need && (!bad || rnd(s) % 8)) len = need + rnd(s) % 0x20;
      if (len + 8 > room) return 0;
      for (size_t i = 0x18; i < len; i++) p[i] = (unsigned char)rnd(s);
      tu_w16(p, (unsigned)len);
      if (evh) {
        /* flags: sometimes extended items (then well-formed ones, mostly) */
        unsigned fl = rnd(s) & 0xFFFE;
        if (rnd(s) % 3 == 0 && len >= 0x50 + 8) {
          fl |= 1;
          size_t h = 0x50;
          for (;;) {
            size_t isz = 8 + (rnd(s) % 4) * 8;
            if (h + isz > len) isz = len - h;
            if (isz < 8) break;
            tu_w16(p + h, (unsigned)isz);
            tu_w16(p + h + 2, rnd(s) % 16);
            int more = h + isz + 8 <= len && rnd(s) % 2;
            tu_w16(p + h + 4, more ? 1 : 0);
            tu_w16(p + h + 6, (unsigned)(isz - 8 - (rnd(s) % 2 && isz > 8 ? 1 : 0) + (bad && rnd(s) % 16 == 0)));
            h += isz;
            if (!more) break;
          }
        }
        tu_w16(p + 4, fl);
        if (repeats) {
          /* mostly the last EVENT_HEADER's type, marker, flags and property (the reader's memo
           * of its head word), the extended-items bit as generated */
          if (prev_evh[2] && rnd(s) % 4) {
            p[2] = prev_evh[2];
            p[3] = prev_evh[3];
            tu_w16(p + 4, ((unsigned)prev_evh[4] | (unsigned)prev_evh[5] << 8 | 0u) & ~1u & 0xFFFF);
            p[4] |= (unsigned char)(fl & 1);
            p[6] = prev_evh[6];
            p[7] = prev_evh[7];
          }
          memcpy(prev_evh, p, 8);
        }
      }
      tu_w64(p + 0x10, *ts);
    } else {
      /* SYSTEM / COMPACT / PERFINFO: version with random extension bits (mostly few) */
      unsigned ver = rnd(s) & 0xFF;
      if (rnd(s) % 4 == 0) ver |= (rnd(s) & 0x87) << 8;
      size_t need = (type >= 0x10 ? 0x10 : type <= 2 ? 0x20 : 0x18) + 8 * ((ver >> 15) + ((ver >> 8) & 7));
      if (len < need && !bad) len = need + rnd(s) % 0x20;
      if (len + 8 > room) return 0;
      for (size_t i = 0x18; i < len; i++) p[i] = (unsigned char)rnd(s);
      tu_w16(p, ver);
      tu_w16(p + 4, (unsigned)len);
      if (bad && rnd(s) % 16 == 0) tu_w16(p + 4, rnd(s) % 0x100); /* a wrong size */
      tu_w64(p + (type >= 0x10 ? 8 : 0x10), *ts);
      if (repeats && type >= 0x10 && need <= len) memcpy(prev_perf, p, 8);
    }
    if (bad && rnd(s) % 64 == 0)
      tu_w16(p + ((type >= 1 && type <= 4) || type == 0x10 || type == 0x11 ? 4 : 0), rnd(s) % 0x60);
  } else if (kind < 19) { /* WPP: MESSAGE_TRACE_HEADER */
    if (len < 0x30 && !bad) len = 0x30;
    if (len + 8 > room) return 0;
    tu_w16(p, (unsigned)len);
    tu_w16(p + 2, 0x9000 | (rnd(s) & 0x0FFF));
    p[3] = (unsigned char)(0x90 | (rnd(s) & 0x2F));
    unsigned of = rnd(s) & 0xFF;
    tu_w16(p + 6, of);
    if ((of & 0x18) && len >= 8 + 4 + 16 + 8) tu_w64(p + 8 + ((of & 1) ? 4 : 0) + ((of & 2) ? 16 : (of & 4) ? 4 : 0), *ts);
  } /* else garbage */
  return (len + 7) & ~(size_t)7;
}

/* A trace: buffer 0 (processor 0) with the logfile header, then NBUF - 1 buffers on processors
 * 0..2, each filled with random records (sometimes the rest of the buffer garbage). */
static unsigned char *image(uint32_t seed, size_t *n, uint32_t clock, uint64_t freq, int bad) {
  unsigned char *b = calloc(NBUF, BSZ);
  if (!b) return NULL;
  uint32_t s = seed;
  uint64_t ts[3] = {1000000, 1000000, 1000000};
  memset(prev_perf, 0, sizeof prev_perf);
  memset(prev_evh, 0, sizeof prev_evh);
  for (int i = 0; i < NBUF; i++) {
    unsigned char *h = b + (size_t)i * BSZ;
    unsigned cpu = i == 0 ? 0 : rnd(&s) % 3;
    size_t off = 0x48;
    if (i == 0) off += logfile_header(h + off, clock, freq);
    int cut = 0; /* (the payload ends inside the last record) */
    for (;;) {
      size_t k = record(h + off, BSZ - off, &s, &ts[cpu], bad);
      if (!k) break;
      off += k;
      if (cut_here) {
        cut_here = 0;
        cut = 1;
        break;
      }
      if (rnd(&s) % 400 == 0) break;
    }
    if (!cut && off + 4 <= BSZ && rnd(&s) % 2) tu_w32(h + off, 0xFFFFFFFFu); /* the end marker */
    tu_w32(h, BSZ);
    tu_w32(h + 4, (uint32_t)off);
    tu_w64(h + 0x18, (uint64_t)i);
    tu_w16(h + 0x28, cpu);
    tu_w32(h + 0x30, (uint32_t)(cut || !bad || rnd(&s) % 8 ? off : BSZ));
  }
  *n = (size_t)NBUF * BSZ;
  return b;
}


struct res {
  uint64_t h;
  size_t n;
  int rc;
  unsigned kinds; /* bit per record kind seen */
  char msg[256];
};

/* @batch 0: next_ref; else next_batch with that max */
static void run(const unsigned char *b, size_t n, int batch, struct res *q) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  memset(q, 0, sizeof *q);
  q->h = 1469598103934665603ull;
  if (etw_etl_reader_add_mem(r, "t.etl", b, n, &st)) {
    q->rc = -2;
    etw_etl_reader_free(r);
    return;
  }
  const struct etw_rec *recs[256];
  for (;;) {
    int k = batch ? etw_etl_reader_next_batch(r, recs, (size_t)batch, &st) : etw_etl_reader_next_ref(r, recs, &st);
    if (k <= 0) {
      q->rc = k;
      break;
    }
    for (int i = 0; i < k; i++) {
      TU_MIX(q->h, tu_rec_digest(recs[i]));
      q->kinds |= 1u << (recs[i]->kind & 31);
    }
    q->n += (size_t)k;
  }
  if (q->rc < 0) snprintf(q->msg, sizeof q->msg, "%s", st.msg);
  etw_etl_reader_free(r);
}

static void test_random_records(void) {
  unsigned dflt = etw_etl_batch_max, kinds = 0;
  size_t total = 0, damaged = 0;
  for (uint32_t seed = 1; seed <= 1500; seed++) {
    size_t n;
    int qpc = seed % 3 == 0;
    unsigned char *b = image(seed, &n, qpc ? 1 : 2, qpc ? 3300000 : 10000000, seed % 4 == 0);
    CHECK(b != NULL);
    if (!b) return;
    struct res ref, q;
    etw_decode_set_default(ETW_DECODE_REFERENCE);
    run(b, n, 0, &ref);
    etw_decode_set_default(ETW_DECODE_FAST);
    static const struct {
      unsigned pb;
      int batch;
    } cfg[] = {{64, 0}, {64, 64}, {3, 0}, {7, 5}, {1, 1}, {64, 256}, {5, 200}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
      etw_etl_batch_max = cfg[c].pb;
      run(b, n, cfg[c].batch, &q);
      etw_etl_batch_max = dflt;
      int same = q.h == ref.h && q.n == ref.n && q.rc == ref.rc && !strcmp(q.msg, ref.msg);
      if (!same)
        fprintf(stderr, "seed %u cfg %zu: %zu records rc %d (%s) vs generic %zu rc %d (%s)\n", seed, c, q.n, q.rc,
                q.msg, ref.n, ref.rc, ref.msg);
      CHECK(same);
    }
    total += ref.n;
    damaged += ref.rc < 0;
    kinds |= ref.kinds;
    free(b);
  }
  if (getenv("T_VERBOSE")) fprintf(stderr, "%zu records, %zu damaged, kinds 0x%x\n", total, damaged, kinds);
  /* the inputs reach every kind, and both good and damaged ends */
  CHECK(total > 100000);
  CHECK(damaged >= 300);
  CHECK(damaged <= 375);
  CHECK_EQ(kinds & 0x3E, 0x3E);
}

/* PERFINFO records repeating the last one's first 8 bytes (fill's memo), EVENT_HEADER records
 * repeating the last one's type, flags and property (its head-word memo), with every other kind
 * in between (the slots' previous kinds), sizes that do not fit, the memo's starting header:
 * the fast paths equal parse_generic. */
static void test_repeated_perfinfo(void) {
  unsigned dflt = etw_etl_batch_max;
  size_t total = 0, damaged = 0;
  repeats = 1;
  for (uint32_t seed = 1; seed <= 600; seed++) {
    size_t n;
    unsigned char *b = image(seed * 7919u, &n, 2, 10000000, seed % 3 == 0);
    CHECK(b != NULL);
    if (!b) break;
    struct res ref, q;
    etw_decode_set_default(ETW_DECODE_REFERENCE);
    run(b, n, 0, &ref);
    etw_decode_set_default(ETW_DECODE_FAST);
    static const struct {
      unsigned pb;
      int batch;
    } cfg[] = {{64, 0}, {64, 64}, {3, 0}, {1, 1}, {64, 256}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
      etw_etl_batch_max = cfg[c].pb;
      run(b, n, cfg[c].batch, &q);
      etw_etl_batch_max = dflt;
      int same = q.h == ref.h && q.n == ref.n && q.rc == ref.rc && !strcmp(q.msg, ref.msg);
      if (!same)
        fprintf(stderr, "repeats seed %u cfg %zu: %zu records rc %d (%s) vs generic %zu rc %d (%s)\n", seed, c, q.n,
                q.rc, q.msg, ref.n, ref.rc, ref.msg);
      CHECK(same);
    }
    total += ref.n;
    damaged += ref.rc < 0;
    free(b);
  }
  repeats = 0;
  if (getenv("T_VERBOSE")) fprintf(stderr, "repeats: %zu records, %zu damaged\n", total, damaged);
  CHECK(total > 50000);
  CHECK(damaged >= 100);
}

/* A buffer whose records end 0..7 bytes before the end of the image (the reader reads a
 * record's first 8 bytes without a bound test: load_buffer copies such a buffer's records so
 * that ETL_SLACK bytes follow them; ASan catches a read past the image), the last record a
 * PERFINFO (after others of the same header: the memo), an EVENT_HEADER or a SYSTEM one, with
 * both clocks: the fast paths equal parse_generic. */
static void test_image_end(void) {
  unsigned dflt = etw_etl_batch_max;
  for (unsigned d = 0; d < 9; d++) /* (d 8: the records end 8 bytes before; the buffer's
                                      * payload 4 bytes later, with a PERFINFO marker there) */
    for (unsigned kind = 0; kind < 3; kind++)
      for (int qpc = 0; qpc < 2; qpc++) {
        unsigned char *b = calloc(2, BSZ); /* (the image ends at the allocation's end) */
        CHECK(b != NULL);
        if (!b) return;
        size_t off = 0x48 + logfile_header(b + 0x48, qpc ? 1 : 2, qpc ? 3300000 : 10000000);
        tu_w32(b, BSZ);
        tu_w32(b + 4, (uint32_t)off);
        tu_w32(b + 0x30, (uint32_t)off);
        unsigned char *h = b + BSZ;
        uint64_t ts = 2000000;
        off = 0x48;
        for (; BSZ - d - off > 0x80; off += 0x40) { /* PERFINFO records of one header */
          unsigned char *p = h + off;
          tu_w16(p, 2);
          p[2] = 0x11;
          p[3] = 0xC0;
          tu_w16(p + 4, 0x40);
          tu_w16(p + 6, 0x0F2E);
          tu_w64(p + 8, ts += 10);
          for (unsigned i = 0x10; i < 0x40; i++) p[i] = (unsigned char)(i * 7 + off);
        }
        unsigned char *p = h + off;
        size_t len = BSZ - d - off; /* (0x41 .. 0x80) */
        for (size_t i = 0; i < len; i++) p[i] = (unsigned char)(i * 13 + d);
        p[3] = 0xC0;
        if (kind == 0) {
          tu_w16(p, 2);
          p[2] = 0x11;
          tu_w16(p + 4, (unsigned)len);
          tu_w16(p + 6, 0x0F2E);
          tu_w64(p + 8, ts += 10);
        } else if (kind == 1) {
          tu_w16(p, (unsigned)(len < 0x50 ? 0x50 : len));
          if (len < 0x50) tu_w16(p, (unsigned)len); /* (too short: damage, as generic says) */
          p[2] = 0x13;
          tu_w16(p + 4, 0); /* no extended items */
          tu_w64(p + 0x10, ts += 10);
        } else {
          tu_w16(p, 2);
          p[2] = 0x02;
          tu_w16(p + 4, (unsigned)len);
          tu_w64(p + 0x10, ts += 10);
        }
        tu_w32(h, BSZ);
        tu_w32(h + 4, BSZ);
        tu_w64(h + 0x18, 1);
        tu_w32(h + 0x30, BSZ); /* the records fill the buffer */
        if (d == 8) { /* fewer than 8 bytes after the last record: the end, not damage */
          h[BSZ - 8] = h[BSZ - 7] = 0;
          h[BSZ - 6] = 0x11;
          h[BSZ - 5] = 0xC0;
          tu_w32(h + 0x30, BSZ - 4);
        }
        struct res ref, q;
        etw_decode_set_default(ETW_DECODE_REFERENCE);
        run(b, 2 * BSZ, 0, &ref);
        etw_decode_set_default(ETW_DECODE_FAST);
        static const unsigned pbs[] = {64, 3, 1};
        for (size_t c = 0; c < 3; c++) {
          etw_etl_batch_max = pbs[c];
          run(b, 2 * BSZ, c == 1 ? 0 : 64, &q);
          etw_etl_batch_max = dflt;
          int same = q.h == ref.h && q.n == ref.n && q.rc == ref.rc && !strcmp(q.msg, ref.msg);
          if (!same)
            fprintf(stderr, "image end d %u kind %u qpc %d cfg %zu: %zu records rc %d (%s) vs generic %zu rc %d (%s)\n",
                    d, kind, qpc, c, q.n, q.rc, q.msg, ref.n, ref.rc, ref.msg);
          CHECK(same);
        }
        CHECK(ref.n > 100);
        free(b);
      }
}

int main(void) {
  test_random_records();
  test_image_end();
  test_repeated_perfinfo();
  T_DONE();
}
