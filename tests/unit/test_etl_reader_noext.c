/* test_etl_reader_noext.c — ETW_EVH_NO_EXT as the ETL reader sets it: on exactly the records
 * with no extended data items (n_ext 0), every kind, whatever the file's own bit 15 of an
 * EVENT_HEADER's flags. Every record of every corpus file, through the record
 * loop's fast paths (AVX2 where the CPU has it, and the SSE2 variant), through parse_generic
 * only, and through next_batch; then corrupted copies of the files (random bytes changed: flags
 * with bit 15 or EXTENDED_INFO set, damaged extended items), which must
 * hold to the rule too and give the same records by the fast and the generic paths.
 */
#include "t.h"
#include "test_etl_util.h"

#define PV "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/"
#define S4 "jtmoon79+super-speedy-syslog-searcher/logs/"

extern int etw_etl_generic_only;
extern int etw_etl_rec_sse2;

static const char *const FILES[] = {
    PV "inputs/primitive-types.etl.zip!*.etl",
    PV "inputs/gcevents.etl.zip!*.etl",
    PV "inputs/net.4.5.2.x64.etl.zip!*.etl",
    PV "inputs/Regression/SelfDescribingSingleEvent.etl",
    PV "smallEtlFile.etl",
    "airbus-cert+etl-parser/tests/example/AMSITrace.etl",
    "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl",
    "airbus-cert+etl-parser/tests/example/lxcore_kernel.etl",
    "microsoft+krabsetw/examples/NativeExamples/powershell.etl",
    S4 "Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl",
    S4 "programs/Event_Trace_Log/waasmedic.20251005_113019_195.etl",
};

struct counts {
  size_t recs, plain, ext, bad;
  uint64_t digest; /* of every record (tu_rec_digest), in order */
};

static int rule(const struct etw_rec *r) { return !r->n_ext; }

/* Every record of image @b by next_batch (@batch 0: by next), each checked against the rule. */
static void walk(const unsigned char *b, size_t n, size_t batch, struct counts *c, const char *what) {
  memset(c, 0, sizeof *c);
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  if (etw_etl_reader_add_mem(r, what, b, n, &st)) {
    etw_etl_reader_free(r);
    return;
  }
  c->digest = 14695981039346656037ull;
  const struct etw_rec *recs[512];
  struct etw_rec one;
  for (;;) {
    int k;
    if (batch) {
      k = etw_etl_reader_next_batch(r, recs, batch, &st);
    } else {
      k = etw_etl_reader_next(r, &one, &st);
      recs[0] = &one;
    }
    if (k <= 0) break;
    for (int i = 0; i < k; i++) {
      const struct etw_rec *x = recs[i];
      int want = rule(x), got = (x->flags & ETW_EVH_NO_EXT) != 0;
      if (want != got && c->bad++ < 3)
        fprintf(stderr, "%s record %zu: kind %u flags %#x n_ext %u: ETW_EVH_NO_EXT %d, want %d\n", what, c->recs,
                x->kind, x->flags, x->n_ext, got, want);
      c->recs++;
      c->plain += got;
      c->ext += x->n_ext != 0;
      TU_MIX(c->digest, tu_rec_digest(x));
    }
  }
  etw_etl_reader_free(r);
}

/* @b through the fast paths (AVX2 / SSE2 record loop, next and next_batch) and parse_generic:
 * the rule everywhere, the same records everywhere. */
static void modes(const unsigned char *b, size_t n, const char *what, struct counts *tot) {
  struct counts c[4];
  etw_etl_rec_sse2 = 0;
  walk(b, n, 512, &c[0], what);
  walk(b, n, 0, &c[1], what);
  etw_etl_rec_sse2 = 1;
  walk(b, n, 200, &c[2], what);
  etw_etl_rec_sse2 = 0;
  etw_etl_generic_only = 1;
  walk(b, n, 512, &c[3], what);
  etw_etl_generic_only = 0;
  for (int i = 0; i < 4; i++) {
    CHECK_EQ(c[i].bad, 0);
    CHECK_EQ(c[i].recs, c[0].recs);
    CHECK_EQ(c[i].plain, c[0].plain);
    CHECK(c[i].digest == c[0].digest);
  }
  tot->recs += c[0].recs;
  tot->plain += c[0].plain;
  tot->ext += c[0].ext;
}

int main(void) {
  struct counts tot = {0}, mut = {0};
  uint32_t seed = 12345;
  for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
    size_t n;
    unsigned char *b = tu_corpus_file(FILES[i], &n);
    CHECK(b != NULL);
    if (!b) continue;
    modes(b, n, FILES[i], &tot);
    /* corrupted copies: bytes changed at random (the file header's first 1 KB left alone, so
     * that most copies open); more for the small files */
    unsigned char *c = malloc(n);
    CHECK(c != NULL);
    int copies = n > (4u << 20) ? 2 : 12;
    for (int k = 0; c && k < copies && n > 2048; k++) {
      memcpy(c, b, n);
      int flips = (int)(n / 512) + 8;
      for (int j = 0; j < flips; j++) {
        seed = seed * 1103515245u + 12345u;
        size_t pos = 1024 + (size_t)(seed >> 4) % (n - 1024);
        seed = seed * 1103515245u + 12345u;
        /* often bit 15 of a would-be flags word, else any value */
        c[pos] = (seed >> 20) & 1 ? (unsigned char)(c[pos] | 0x80) : (unsigned char)(seed >> 12);
      }
      modes(c, n, FILES[i], &mut);
    }
    free(c);
    free(b);
  }
  fprintf(stderr, "corpus: %zu records, %zu with ETW_EVH_NO_EXT, %zu with extended data\n", tot.recs, tot.plain,
          tot.ext);
  fprintf(stderr, "corrupted copies: %zu records, %zu with ETW_EVH_NO_EXT, %zu with extended data\n", mut.recs,
          mut.plain, mut.ext);
  /* both cases occur */
  CHECK(tot.plain > 100000);
  CHECK(tot.ext > 0);
  CHECK(mut.ext > 0 && mut.plain > 0);
  T_DONE();
}
