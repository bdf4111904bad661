/* test_etl_reader.c — the ETL reader against every real file in ../shared/corpus: record counts
 * to the last record, time order after the per-CPU merge, clocks and header facts, several
 * files merged, XPRESS round trips, and truncated / corrupted input (everything before the
 * damage is delivered, then an error naming the file and offset; never a crash or a hang).
 */
#include "t.h"
#include "test_etl_util.h"

#define PV "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/"
#define S4 "jtmoon79+super-speedy-syslog-searcher/logs/"

struct expect {
  const char *rel;
  size_t records;
  uint32_t ptr, clock;
};

/* @k random bytes of @c (n bytes) set to random values (a linear congruential sequence) */
static void flip_bytes(unsigned char *c, size_t n, int k, uint32_t *seed) {
  for (int i = 0; i < k; i++) {
    *seed = *seed * 1103515245u + 12345u;
    size_t pos = (*seed >> 8) % n;
    *seed = *seed * 1103515245u + 12345u;
    c[pos] = (unsigned char)(*seed >> 16);
  }
}

static const struct expect FILES[] = {
    {PV "inputs/primitive-types.etl.zip!*.etl", 7, 8, 1},
    {PV "inputs/gcevents.etl.zip!*.etl", 71, 8, 1},
    {PV "inputs/net.4.5.2.x64.etl.zip!*.etl", 179474, 8, 1},
    {PV "inputs/Regression/SelfDescribingSingleEvent.etl", 23, 8, 1},
    {PV "smallEtlFile.etl", 2, 4, 1},
    {"airbus-cert+etl-parser/tests/example/AMSITrace.etl", 21, 8, 1},
    {"airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl", 17078, 8, 1},
    {"airbus-cert+etl-parser/tests/example/lxcore_kernel.etl", 4, 8, 1},
    {"microsoft+krabsetw/examples/NativeExamples/powershell.etl", 114, 8, 1},
    {S4 "Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl", 12, 8, 1},
    {S4 "programs/Event_Trace_Log/waasmedic.20251005_113019_195.etl", 21, 8, 1},
    {S4 "programs/OneDrive/Local/Microsoft/OneDrive/logs/Personal/CldFlt0-2025-12-21-121418.etlgz", 17, 8, 2},
    {S4 "programs/OneDrive/Local/Microsoft/OneDrive/logs/Personal/CldFlt2-2025-12-21-121418.etlgz", 2, 8, 2},
};

/* Count records of an in-memory trace; returns the count, sets *rc and the status. */
static size_t walk(const unsigned char *b, size_t n, int *rc, struct etw_status *st, int *ordered) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  size_t cnt = 0;
  *ordered = 1;
  if (etw_etl_reader_add_mem(r, "mem.etl", b, n, st)) {
    *rc = -2;
    etw_etl_reader_free(r);
    return 0;
  }
  struct etw_rec rec;
  uint64_t last = 0;
  while ((*rc = etw_etl_reader_next(r, &rec, st)) == 1) {
    if (rec.filetime < last) *ordered = 0;
    last = rec.filetime;
    cnt++;
  }
  etw_etl_reader_free(r);
  return cnt;
}

static void test_corpus(void) {
  for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
    size_t n;
    unsigned char *b = tu_corpus_file(FILES[i].rel, &n);
    CHECK(b != NULL);
    if (!b) continue;
    struct etw_etl_reader *r = etw_etl_reader_new();
    struct etw_status st;
    etw_status_clear(&st);
    CHECK_EQ(etw_etl_reader_add_mem(r, FILES[i].rel, b, n, &st), ETW_E_OK);
    const struct etw_etl_info *in = etw_etl_reader_info(r, 0);
    CHECK(in != NULL);
    if (in) {
      CHECK_EQ(in->pointer_size, FILES[i].ptr);
      CHECK_EQ(in->clock_type, FILES[i].clock);
    }
    struct etw_rec rec;
    size_t cnt = 0;
    uint64_t last = 0;
    int ordered = 1, rc;
    while ((rc = etw_etl_reader_next(r, &rec, &st)) == 1) {
      if (rec.filetime < last) ordered = 0;
      last = rec.filetime;
      cnt++;
    }
    if (cnt != FILES[i].records || rc != 0) fprintf(stderr, "%s: %zu records rc=%d %s\n", FILES[i].rel, cnt, rc, st.msg);
    CHECK_EQ(cnt, FILES[i].records);
    CHECK_EQ(rc, 0);
    CHECK(ordered);
    etw_etl_reader_free(r);
    free(b);
  }
}

/* Header facts: the SIH file's clock math reproduces its published timestamps (QPC). */
static void test_header(void) {
  size_t n;
  unsigned char *b = tu_corpus_file(S4 "Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl", &n);
  if (!b) {
    CHECK(0);
    return;
  }
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  CHECK_EQ(etw_etl_reader_add_mem(r, "SIH", b, n, &st), ETW_E_OK);
  const struct etw_etl_info *in = etw_etl_reader_info(r, 0);
  CHECK_EQ(in->buffer_size, 4096);
  CHECK_EQ(in->version, 83951626);
  CHECK_EQ(in->provider_version, 22621);
  CHECK_EQ(in->end_time, 133266341204136027ULL);
  CHECK_EQ(in->log_file_mode, 0x11002009);
  CHECK_EQ(in->start_time, 133266340443632943ULL);
  CHECK_EQ(in->perf_freq, 10000000);
  CHECK_STR(in->logger_name, "SIH_trace_log");
  CHECK_STR(in->log_file_name, "C:\\Windows\\Logs\\SIH\\SIH.20230422.034724.362.1.etl");
  struct etw_rec rec;
  CHECK_EQ(etw_etl_reader_next(r, &rec, &st), 1);
  CHECK_EQ(rec.filetime, 133266340443632943ULL); /* header record = StartTime */
  CHECK_EQ(rec.pid, 6412);
  CHECK_EQ(rec.tid, 3240);
  CHECK_EQ(rec.kind, ETW_REC_SYSTEM);
  etw_etl_reader_free(r);
  free(b);
}

/* Two files merged into one time-ordered stream. */
static void test_merge(void) {
  size_t n1, n2;
  unsigned char *a = tu_corpus_file(S4 "Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl", &n1);
  unsigned char *b = tu_corpus_file("airbus-cert+etl-parser/tests/example/AMSITrace.etl", &n2);
  if (!a || !b) {
    CHECK(0);
    free(a);
    free(b);
    return;
  }
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  CHECK_EQ(etw_etl_reader_add_mem(r, "a", a, n1, &st), ETW_E_OK);
  CHECK_EQ(etw_etl_reader_add_mem(r, "b", b, n2, &st), ETW_E_OK);
  struct etw_rec rec;
  size_t cnt = 0, from[2] = {0, 0};
  uint64_t last = 0;
  int ordered = 1;
  while (etw_etl_reader_next(r, &rec, &st) == 1) {
    if (rec.filetime < last) ordered = 0;
    last = rec.filetime;
    from[rec.file_index]++;
    cnt++;
  }
  CHECK_EQ(cnt, 12 + 21);
  CHECK_EQ(from[0], 12);
  CHECK_EQ(from[1], 21);
  CHECK(ordered);
  etw_etl_reader_free(r);
  free(a);
  free(b);
}

/* Truncation at many points and random corruption of a compressed multi-buffer file. */
static void test_damage(void) {
  size_t n;
  unsigned char *b = tu_corpus_file(PV "inputs/Regression/SelfDescribingSingleEvent.etl", &n);
  if (!b) {
    CHECK(0);
    return;
  }
  int rc, ordered;
  struct etw_status st;
  size_t full = walk(b, n, &rc, &st, &ordered);
  CHECK_EQ(full, 23);
  /* truncated: cut inside the last buffer and inside a buffer header */
  for (size_t cut = n - 1; cut > 0x48 + 0x200; cut -= (cut > 4096 ? 997 : 61)) {
    size_t got = walk(b, cut, &rc, &st, &ordered);
    CHECK(got <= full);
    if (rc == -1) {
      CHECK(strstr(st.msg, "mem.etl") != NULL);
      CHECK(strstr(st.msg, "offset") != NULL);
    } else {
      CHECK(rc == 0 || rc == -2);
    }
  }
  size_t got = walk(b, n - 7, &rc, &st, &ordered);
  CHECK_EQ(rc, -1);
  CHECK(got >= 1);
  /* random byte flips: must terminate without sanitizer reports */
  unsigned char *c = malloc(n);
  uint32_t seed = 12345;
  for (int it = 0; it < 300 && c; it++) {
    memcpy(c, b, n);
    flip_bytes(c, n, 8, &seed);
    (void)walk(c, n, &rc, &st, &ordered);
    CHECK(rc == 0 || rc == -1 || rc == -2);
  }
  free(c);
  /* not an ETL file at all */
  unsigned char junk[300] = {1, 2, 3};
  (void)walk(junk, sizeof junk, &rc, &st, &ordered);
  CHECK_EQ(rc, -2);
  CHECK(strstr(st.msg, "not an ETL file") != NULL);
  free(b);
}

/* XPRESS: literals, an overlapping match and the long-length encodings. */
static void test_xpress(void) {
  /* flags word: bit 31 (first item) literal 'a', bit 30 match (offset 1, length 3+7+15+b) */
  unsigned char in[64];
  size_t k = 0;
  uint32_t flags = 0x40000000u; /* item0 literal, item1 match, rest literals (ignored) */
  in[k++] = (unsigned char)flags;
  in[k++] = (unsigned char)(flags >> 8);
  in[k++] = (unsigned char)(flags >> 16);
  in[k++] = (unsigned char)(flags >> 24);
  in[k++] = 'a';
  uint16_t tok = (uint16_t)((0 << 3) | 7); /* offset 1, length 7 → extended */
  in[k++] = (unsigned char)tok;
  in[k++] = (unsigned char)(tok >> 8);
  in[k++] = 15;  /* nibble 15 → one more byte */
  in[k++] = 10;  /* length = 7 + 15 + 10 = 32, +3 = 35 */
  unsigned char out[64];
  long got = etw_xpress_decompress(in, k, out, 36);
  CHECK_EQ(got, 36);
  int allA = 1;
  for (int i = 0; i < 36; i++) allA &= out[i] == 'a';
  CHECK(allA);
  /* a match before any output is malformed */
  unsigned char bad[] = {0, 0, 0, 0x80, 0x08, 0x00};
  CHECK_EQ(etw_xpress_decompress(bad, sizeof bad, out, 10), -1);
  /* XPRESS Huffman: all 512 symbols with 9-bit codes (code = symbol number, MSB first in
   * 16-bit little-endian words): literal 'a' then match symbol 256 (offset 1, length 3). */
  {
    unsigned char hin[256 + 8];
    memset(hin, 0x99, 256);
    uint32_t bits = (0x61u << 23) | (0x100u << 14); /* 18 bits used, rest 0 */
    hin[256] = (unsigned char)(bits >> 16);
    hin[257] = (unsigned char)(bits >> 24);
    hin[258] = (unsigned char)bits;
    hin[259] = (unsigned char)(bits >> 8);
    memset(hin + 260, 0, 4);
    unsigned char hout[8];
    CHECK_EQ(etw_xpress_huff_decompress(hin, sizeof hin, hout, 4), 4);
    CHECK(!memcmp(hout, "aaaa", 4));
  }
  /* Huffman: garbage must not crash */
  unsigned char hb[400];
  for (int i = 0; i < 400; i++) hb[i] = (unsigned char)(i * 37);
  (void)etw_xpress_huff_decompress(hb, sizeof hb, out, sizeof out);
}

static uint64_t xp_rnd = 0x2545F4914F6CDD1Dull;
static uint32_t xp_next(uint32_t n) {
  xp_rnd ^= xp_rnd << 13;
  xp_rnd ^= xp_rnd >> 7;
  xp_rnd ^= xp_rnd << 17;
  return (uint32_t)(xp_rnd >> 11) % n;
}

/* Encode random items (literal runs, matches of every length encoding and distance class) as
 * XPRESS; returns the compressed size, *plain the decompressed size. */
static size_t xp_gen(unsigned char *in, size_t cap, size_t *plain) {
  size_t k = 0, op = 0, fpos = 0, half = (size_t)-1;
  uint32_t flags = 0;
  int items = 32;
  while (k + 64 < cap && op < 4000000) {
    if (items == 32) {
      if (fpos || k) memcpy(in + fpos, &flags, 4); /* the previous word (little-endian host) */
      fpos = k;
      k += 4;
      flags = 0;
      items = 0;
    }
    uint32_t kind = xp_next(100);
    if (op == 0 || kind < 40) { /* literal */
      in[k++] = (unsigned char)("abcab\0\0xyz"[xp_next(10)]);
      op++;
    } else {
      flags |= 1u << (31 - items);
      size_t off = kind < 70 ? 1 + xp_next(20) : kind < 95 ? 16 + xp_next(200) : 1 + xp_next(8192);
      if (off > op) off = op;
      uint32_t lk = xp_next(100);
      size_t m = lk < 60 ? xp_next(7) : lk < 80 ? 7 + xp_next(15) : lk < 95 ? 22 + xp_next(255) :
                 lk < 99 || xp_next(10) ? 277 + xp_next(3000) : 65500 + xp_next(10000);
      tu_xpress_put_match(in, &k, &half, off, m);
      op += m + 3;
    }
    items++;
  }
  memcpy(in + fpos, &flags, 4);
  *plain = op;
  return k;
}

/* The decompressor against the reference on random streams: whole, with the output cut short
 * (every item can be the one that fills it), with the input cut short, and with random bytes. */
static void test_xpress_random(void) {
  size_t cap_in = 20000, cap_out = 4200000;
  unsigned char *in = malloc(cap_in), *a = malloc(cap_out), *b = malloc(cap_out);
  size_t cases = 0, bad = 0;
  for (int round = 0; round < 300; round++) {
    size_t plain, n = xp_gen(in, 200 + xp_next((uint32_t)cap_in - 200), &plain);
    size_t outs[4] = {plain, plain > 1 ? xp_next((uint32_t)plain) + 1 : 1, plain + 100, 65536 < plain ? 65536 : plain};
    for (int o = 0; o < 4; o++) {
      size_t no = outs[o] > cap_out ? cap_out : outs[o];
      size_t ni = o == 2 ? n - xp_next((uint32_t)(n > 400 ? 400 : n)) : n;
      long ga = etw_xpress_decompress(in, ni, a, no), gb = tu_xpress_ref(in, ni, b, no);
      cases++;
      if (ga != gb || (ga > 0 && memcmp(a, b, (size_t)ga))) {
        if (bad++ < 3) fprintf(stderr, "xpress round %d case %d: %ld vs %ld\n", round, o, ga, gb);
      }
    }
    if (round % 3 == 0) { /* garbage: the same answer, no access outside (ASan) */
      for (size_t i = 0; i < n; i++) in[i] = (unsigned char)xp_next(256);
      size_t no = 1 + xp_next(100000);
      long ga = etw_xpress_decompress(in, n, a, no), gb = tu_xpress_ref(in, n, b, no);
      cases++;
      if (ga != gb || (ga > 0 && memcmp(a, b, (size_t)ga))) {
        if (bad++ < 3) fprintf(stderr, "xpress garbage round %d: %ld vs %ld\n", round, ga, gb);
      }
    }
  }
  CHECK(cases >= 1300);
  CHECK_EQ(bad, 0);
  free(in);
  free(a);
  free(b);
}

/* The decompressor against the reference on every compressed buffer of net.4.5.2.x64 (real
 * item mix: the fast path over most of each buffer): whole, with the output cut at many points
 * (a long match near the end goes the checked way mid-word), and with the input cut short.
 * Output buffers are allocated at their exact size, so ASan sees any store past them. */
static void test_xpress_corpus(void) {
  size_t n;
  unsigned char *img = tu_corpus_file(PV "inputs/net.4.5.2.x64.etl.zip!*.etl", &n);
  CHECK(img != NULL);
  if (!img) return;
  size_t bufs = 0, cases = 0, bad = 0;
  for (size_t off = 0; off + 0x48 <= n;) {
    const unsigned char *h = img + off;
    uint32_t bsize = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    if (bsize < 0x48 || bsize > n - off) break;
    uint32_t saved = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
    if ((h[0x34] & 0x40) && saved > 0x48 && saved <= (1u << 24)) {
      size_t ni = bsize - 0x48, full = saved - 0x48;
      bufs++;
      for (int k = 0; k < 12; k++) {
        size_t no = k == 0 ? full : k < 4 ? full - (size_t)k * 97 : k < 8 ? 1 + xp_next((uint32_t)full) : 600 + (size_t)k;
        size_t nii = k == 8 ? ni - xp_next(ni < 500 ? (uint32_t)ni : 500) : k == 9 ? xp_next((uint32_t)ni) : ni;
        unsigned char *a = malloc(no), *b = malloc(no);
        long ga = etw_xpress_decompress(h + 0x48, nii, a, no), gb = tu_xpress_ref(h + 0x48, nii, b, no);
        cases++;
        if (ga != gb || (ga > 0 && memcmp(a, b, (size_t)ga))) {
          if (bad++ < 3) fprintf(stderr, "xpress corpus buffer at %zu case %d: %ld vs %ld\n", off, k, ga, gb);
        }
        if (k == 0) CHECK_EQ(ga, (long)full);
        free(a);
        free(b);
      }
    }
    off += bsize;
  }
  CHECK(bufs >= 300);
  CHECK_EQ(bad, 0);
  (void)cases;
  free(img);
}

/* The merge keeps a sorted list for few streams and the loser tree for many (the bound is
 * etw_etl_merge_list_max): both give the same sequence, here forced one way and the other on
 * several files merged (net.4.5.2.x64 twice: every record time tied), also truncated. */
extern unsigned etw_etl_merge_list_max;

/* How seq_walk and merge_walk take the records: 0 one etw_etl_reader_next_ref call each, n > 0
 * etw_etl_reader_next_batch with max n (each batch digested after the call: every pointer of
 * it must still be valid), -1 mixed: batches of a pseudo-random max (1..100, sometimes 0 = 1)
 * between next_ref and next calls. */
static int walk_batch;

/* The next record by walk_batch's way; *@buf / *@nb / *@ib hold the batch being walked. */
static int walk_next(struct etw_etl_reader *r, const struct etw_rec **rec, struct etw_status *st,
                     const struct etw_rec **buf, int *nb, int *ib, uint32_t *seed, struct etw_rec *copy) {
  if (*ib < *nb) {
    *rec = buf[(*ib)++];
    return 1;
  }
  int max = walk_batch;
  if (max < 0) {
    *seed = *seed * 1103515245u + 12345u;
    unsigned v = (*seed >> 16) % 112;
    if (v >= 106) { /* etw_etl_reader_next (a copy) */
      int k = etw_etl_reader_next(r, copy, st);
      *rec = copy;
      return k;
    }
    if (v >= 100) return etw_etl_reader_next_ref(r, rec, st);
    max = (int)v + 1;
    if (v == 99) max = 0;
  }
  if (max == 0 && walk_batch >= 0) return etw_etl_reader_next_ref(r, rec, st);
  /* (a canary after max: next_batch must not write past it) */
  const struct etw_rec *canary = (const struct etw_rec *)(uintptr_t)0x5a5a;
  size_t m = max ? (size_t)max : 1;
  buf[m] = canary;
  int k = etw_etl_reader_next_batch(r, buf, (size_t)max, st);
  CHECK(buf[m] == canary);
  if (k > (int)m) CHECK(k <= (int)m);
  if (k <= 0) return k;
  *nb = k;
  *ib = 1;
  *rec = buf[0];
  return 1;
}


static uint64_t merge_walk(unsigned char **img, const size_t *len, int nf, size_t *cnt, int *rc) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  for (int i = 0; i < nf; i++) CHECK_EQ(etw_etl_reader_add_mem(r, "f", img[i], len[i], &st), ETW_E_OK);
  const struct etw_rec *rec, *buf[1001];
  struct etw_rec copy;
  int nb = 0, ib = 0;
  uint32_t seed = 7u;
  uint64_t h = 1469598103934665603ull;
  *cnt = 0;
  while ((*rc = walk_next(r, &rec, &st, buf, &nb, &ib, &seed, &copy)) == 1) {
    uint64_t v[4] = {rec->file_index, rec->file_offset, (uint64_t)rec->cpu << 32 | rec->user_len,
                     (uint64_t)rec->timestamp};
    for (int i = 0; i < 4; i++) h = (h ^ v[i]) * 1099511628211ull;
    (*cnt)++;
  }
  etw_etl_reader_free(r);
  return h;
}

static void test_merge_list_tree(void) {
  const char *rel[] = {PV "inputs/net.4.5.2.x64.etl.zip!*.etl", PV "inputs/net.4.5.2.x64.etl.zip!*.etl",
                       "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl",
                       PV "inputs/gcevents.etl.zip!*.etl", S4 "Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl"};
  unsigned char *img[5];
  size_t len[5];
  int ok = 1;
  for (int i = 0; i < 5; i++) {
    img[i] = tu_corpus_file(rel[i], &len[i]);
    if (!img[i]) ok = 0;
  }
  CHECK(ok);
  unsigned saved = etw_etl_merge_list_max;
  for (int c = 0; ok && c < 4; c++) {
    int nf = c == 0 ? 1 : c == 1 ? 2 : 5;
    if (c == 3) len[0] = len[0] / 3 + 1000; /* net.4.5.2.x64 cut mid-buffer */
    size_t n1, n2, n3;
    int rc1, rc2, rc3;
    etw_etl_merge_list_max = 0; /* tree */
    uint64_t h1 = merge_walk(img, len, nf, &n1, &rc1);
    etw_etl_merge_list_max = 1000; /* list */
    uint64_t h2 = merge_walk(img, len, nf, &n2, &rc2);
    etw_etl_merge_list_max = saved;
    uint64_t h3 = merge_walk(img, len, nf, &n3, &rc3);
    /* next_batch over the tree and the list (mixed sizes, and 64 a call) */
    for (int b = 0; b < 4; b++) {
      size_t n4;
      int rc4;
      walk_batch = b & 1 ? 64 : -1;
      etw_etl_merge_list_max = b & 2 ? 1000 : 0;
      uint64_t h4 = merge_walk(img, len, nf, &n4, &rc4);
      walk_batch = 0;
      etw_etl_merge_list_max = saved;
      CHECK_EQ(n4, n3);
      CHECK_EQ(rc4, rc3);
      CHECK(h4 == h3);
    }
    CHECK(n1 > 1000);
    CHECK_EQ(n1, n2);
    CHECK_EQ(n1, n3);
    CHECK_EQ(rc1, rc2);
    CHECK_EQ(rc1, rc3);
    CHECK_EQ(rc1, c == 3 ? -1 : 0);
    CHECK(h1 == h2 && h1 == h3);
  }
  for (int i = 0; i < 5; i++) free(img[i]);
}


/* The reader parses each stream's records ahead in batches (etw_etl_batch_max per batch, at
 * most ETL_BATCH = 64) and stores PERFINFO and EVENT_HEADER records by whole words; a reader in reference mode
 * (etw_decode_set_default) sends every record through the field-by-field parser. Every field of every record (ext items
 * and user data by content), the record order, the result and the damage message must be the
 * same with any batch size and either parser: on every corpus file, two files merged (every
 * time tied), and cut or corrupted copies. */
extern unsigned etw_etl_batch_max;


struct seq {
  uint64_t h;
  size_t n;
  int rc;
  char msg[256];
};

static void seq_walk(unsigned char **img, const size_t *len, int nf, struct seq *q) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  memset(q, 0, sizeof *q);
  q->h = 1469598103934665603ull;
  for (int i = 0; i < nf; i++) {
    if (etw_etl_reader_add_mem(r, "f.etl", img[i], len[i], &st)) {
      q->rc = -2;
      snprintf(q->msg, sizeof q->msg, "%s", st.msg);
      etw_etl_reader_free(r);
      return;
    }
  }
  const struct etw_rec *rec, *buf[1001];
  struct etw_rec copy;
  int nb = 0, ib = 0;
  uint32_t seed = 99u + (uint32_t)len[0];
  if (walk_batch > 0) { /* each batch digested after the call (its records all still valid) */
    int k;
    while ((k = etw_etl_reader_next_batch(r, buf, (size_t)walk_batch, &st)) > 0) {
      CHECK(k <= walk_batch);
      for (int i = 0; i < k; i++) TU_MIX(q->h, tu_rec_digest(buf[i]));
      q->n += (size_t)k;
    }
    q->rc = k;
  } else {
    while ((q->rc = walk_next(r, &rec, &st, buf, &nb, &ib, &seed, &copy)) == 1) {
      TU_MIX(q->h, tu_rec_digest(rec));
      q->n++;
    }
  }
  if (q->rc < 0) snprintf(q->msg, sizeof q->msg, "%s", st.msg);
  etw_etl_reader_free(r);
}

/* One input in every configuration against the default one; returns its record count. */
static size_t seq_check(unsigned char **img, const size_t *len, int nf, const char *what) {
  static const struct {
    unsigned batch;
    int generic;
  } cfg[] = {{1, 1}, {1, 0}, {2, 0}, {3, 1}, {7, 0}, {31, 1}, {32, 1}, {63, 0}, {1000, 0}};
  struct seq ref, q;
  unsigned dflt = etw_etl_batch_max;
  seq_walk(img, len, nf, &ref);
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    etw_etl_batch_max = cfg[c].batch;
    etw_decode_set_default(cfg[c].generic ? ETW_DECODE_REFERENCE : ETW_DECODE_FAST);
    seq_walk(img, len, nf, &q);
    etw_etl_batch_max = dflt;
    etw_decode_set_default(ETW_DECODE_FAST);
    int same = q.h == ref.h && q.n == ref.n && q.rc == ref.rc && !strcmp(q.msg, ref.msg);
    if (!same)
      fprintf(stderr, "%s: batch %u generic %d: %zu records rc %d (%s) vs %zu rc %d (%s)\n", what,
              cfg[c].batch, cfg[c].generic, q.n, q.rc, q.msg, ref.n, ref.rc, ref.msg);
    CHECK(same);
  }
  /* etw_etl_reader_next_batch: the same records, order, result and damage as next_ref, with
   * any max, mixed with next_ref / next, and with short parse batches (the stops at a stream's
   * last parsed record); the large inputs (net.4.5.2.x64) with the ones marked big */
  static const struct {
    int max;
    unsigned batch;
    int generic, big;
  } bcfg[] = {{1, 64, 0, 0},  {2, 64, 0, 0},  {7, 64, 0, 1}, {64, 64, 0, 0}, {1000, 64, 0, 1}, {-1, 64, 0, 1},
              {64, 3, 0, 0},  {-1, 1, 1, 0},  {5, 2, 0, 1},  {-1, 32, 0, 0}, {200, 7, 0, 1}};
  for (size_t c = 0; c < sizeof bcfg / sizeof bcfg[0]; c++) {
    if (ref.n > 50000 && !bcfg[c].big) continue;
    walk_batch = bcfg[c].max;
    etw_etl_batch_max = bcfg[c].batch;
    etw_decode_set_default(bcfg[c].generic ? ETW_DECODE_REFERENCE : ETW_DECODE_FAST);
    seq_walk(img, len, nf, &q);
    walk_batch = 0;
    etw_etl_batch_max = dflt;
    etw_decode_set_default(ETW_DECODE_FAST);
    int same = q.h == ref.h && q.n == ref.n && q.rc == ref.rc && !strcmp(q.msg, ref.msg);
    if (!same)
      fprintf(stderr, "%s: next_batch %d (parse batch %u generic %d): %zu records rc %d (%s) vs %zu rc %d (%s)\n",
              what, bcfg[c].max, bcfg[c].batch, bcfg[c].generic, q.n, q.rc, q.msg, ref.n, ref.rc, ref.msg);
    CHECK(same);
  }
  return ref.n;
}

static void test_batch_generic(void) {
  for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
    size_t n;
    unsigned char *b = tu_corpus_file(FILES[i].rel, &n);
    CHECK(b != NULL);
    if (!b) continue;
    CHECK_EQ(seq_check(&b, &n, 1, FILES[i].rel), FILES[i].records);
    if (i == 2) { /* net.4.5.2.x64: twice (ties), and cut inside buffers */
      unsigned char *two[2] = {b, b};
      size_t l2[2] = {n, n};
      CHECK_EQ(seq_check(two, l2, 2, "net twice"), 2 * FILES[i].records);
      for (size_t cut = n / 7; cut < n; cut += n / 5 + 4097) {
        size_t c = cut;
        (void)seq_check(&b, &c, 1, "net cut");
      }
    }
    free(b);
  }
  /* damaged: truncated and corrupted copies of a small compressed file and of one with
   * uncompressed buffers (records cut mid-batch: the records before the damage, then -1) */
  const char *dam[] = {PV "inputs/Regression/SelfDescribingSingleEvent.etl",
                       "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl"};
  for (int d = 0; d < 2; d++) {
    size_t n;
    unsigned char *b = tu_corpus_file(dam[d], &n);
    CHECK(b != NULL);
    if (!b) continue;
    for (size_t cut = n - 1; cut > 0x48 + 0x200; cut -= (cut > 65536 ? 40009 : cut > 4096 ? 997 : 61)) {
      size_t c = cut;
      (void)seq_check(&b, &c, 1, "cut");
    }
    unsigned char *c = malloc(n);
    uint32_t seed = 777u + (uint32_t)d;
    for (int it = 0; it < 40 && c; it++) {
      memcpy(c, b, n);
      flip_bytes(c, n, 6, &seed);
      (void)seq_check(&c, &n, 1, "flipped");
    }
    free(c);
    free(b);
  }
}
#undef MIX

int main(void) {
  test_xpress();
  test_xpress_random();
  test_xpress_corpus();
  test_header();
  test_corpus();
  test_merge();
  test_merge_list_tree();
  test_batch_generic();
  test_damage();
  T_DONE();
}
