/* test_decode_sys.c — the cached System-block writer (dec_sys.c) produces exactly the bytes of
 * the shared etw_event_write_system for every event of the corpus traces (all providers, kernel
 * and 32-bit records, day changes), compared event by event with a decoder that bypasses it. */
#include "decode.h"
#include "t.h"
#include "test_etl_util.h"

static void compare(const char *rel) {
  size_t n;
  unsigned char *b = tu_corpus_file(rel, &n);
  CHECK(b != NULL);
  if (!b) return;
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  CHECK_EQ(etw_etl_reader_add_mem(r, rel, b, n, &st), ETW_E_OK);
  struct etw_decoder *fast = etw_decoder_new(tu_manifests()), *plain = etw_decoder_new(tu_manifests());
  plain->sys_plain = 1;
  struct etw_jw a, c;
  etw_jw_init(&a, 0);
  etw_jw_init(&c, 0);
  struct etw_rec rec;
  struct etw_evref ra, rc;
  size_t events = 0, diff = 0;
  while (etw_etl_reader_next(r, &rec, &st) == 1) {
    a.len = c.len = 0;
    etw_decoder_write(fast, &rec, &a, &ra);
    etw_decoder_write(plain, &rec, &c, &rc);
    events++;
    if (a.len != c.len || memcmp(a.buf, c.buf, a.len)) {
      if (diff++ < 3) fprintf(stderr, "%s #%zu differs:\n %s\n %s\n", rel, events, etw_jw_cstr(&a), etw_jw_cstr(&c));
    }
  }
  CHECK(events > 0);
  CHECK_EQ(diff, 0);
  etw_jw_free(&a);
  etw_jw_free(&c);
  etw_decoder_free(fast);
  etw_decoder_free(plain);
  etw_etl_reader_free(r);
  free(b);
}

int main(void) {
  compare("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl");
  compare("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/smallEtlFile.etl");
  compare("airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl");
  compare("jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl");
  T_DONE();
}
