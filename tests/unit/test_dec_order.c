/* test_dec_order.c — the plans' live state (a template's second and (pid, tid) text, the
 * processor digit; the manifest runner) against the general path on corpus records in a shuffled
 * order (time going backwards), with changed pids, tids, processors and times, and with mutated
 * payloads (the manifest runner against the walker), written one after the other into writers
 * that hold earlier events and have a maximum (an event that does not fit is dropped: truncated,
 * error cleared, as a batch does). An event both write is the same text; one that only one side
 * drops (the plans reserve more than they write, the walker its worst case) is only counted. */
#include "decode.h"
#include "t.h"
#include "test_etl_util.h"

struct crec {
  struct etw_rec r;
  unsigned char *data;
};

static uint64_t rnd = 0x9E3779B97F4A7C15ull;
static uint64_t next_rnd(void) {
  rnd ^= rnd << 13;
  rnd ^= rnd >> 7;
  rnd ^= rnd << 17;
  return rnd;
}

static struct etw_etl_reader *keep_r;
static unsigned char *keep_b;
static struct crec *load(const char *rel, size_t *cnt) {
  size_t n;
  unsigned char *b = tu_corpus_file(rel, &n);
  if (!b) return NULL;
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  if (etw_etl_reader_add_mem(r, rel, b, n, &st) != ETW_E_OK) return NULL;
  size_t cap = 1024, k = 0;
  struct crec *v = malloc(cap * sizeof *v);
  struct etw_rec rec;
  while (etw_etl_reader_next(r, &rec, &st) == 1 && k < 40000) {
    if (k == cap) v = realloc(v, (cap *= 2) * sizeof *v);
    size_t tot = rec.user_len;
    for (unsigned i = 0; i < rec.n_ext && i < ETW_REC_MAX_EXT; i++) tot += rec.ext[i].len;
    unsigned char *d = malloc(tot + 1), *o = d;
    memcpy(o, rec.user_data, rec.user_len);
    v[k].r = rec;
    v[k].r.user_data = o;
    o += rec.user_len;
    for (unsigned i = 0; i < rec.n_ext && i < ETW_REC_MAX_EXT; i++) {
      memcpy(o, rec.ext[i].data, rec.ext[i].len);
      v[k].r.ext[i].data = o;
      o += rec.ext[i].len;
    }
    v[k].data = d;
    k++;
  }
  keep_r = r; /* (the records' file info) */
  keep_b = b;
  *cnt = k;
  return v;
}

static void run(const char *rel, size_t max, int mode) {
  size_t n = 0;
  struct crec *v = load(rel, &n);
  CHECK(v != NULL);
  if (!v) return;
  /* mode 1: neighbours swapped (time backwards); 2: and pid/tid/cpu/time changes; 3: and payload
   * bytes changed, payloads cut (the manifest runner against the walker: the plain decoder is in
   * reference mode) */
  if (mode >= 1)
    for (size_t i = 0; i + 1 < n; i++)
      if (next_rnd() % 3 == 0) {
        struct crec t = v[i];
        v[i] = v[i + 1];
        v[i + 1] = t;
      }
  if (mode == 3)
    for (size_t i = 0; i < n; i++) {
      uint64_t x = next_rnd();
      unsigned char *d = (unsigned char *)(uintptr_t)v[i].r.user_data;
      if (!v[i].r.user_len) continue;
      int flips = 1 + (int)(x & 3);
      for (int j = 0; j < flips; j++) {
        uint64_t y = next_rnd();
        size_t pos = (size_t)(y >> 8) % v[i].r.user_len;
        switch (y & 3) {
        case 0: d[pos] ^= (unsigned char)(1u << ((y >> 4) & 7)); break;
        case 1: d[pos] = 0; break;
        case 2: d[pos] = 0xFF; break;
        default: d[pos] = (unsigned char)(y >> 40); break;
        }
      }
      if ((x >> 10) % 5 == 0) v[i].r.user_len = (uint32_t)((x >> 20) % (v[i].r.user_len + 1));
    }
  if (mode >= 2)
    for (size_t i = 0; i < n; i++) {
      uint64_t x = next_rnd();
      if (x % 4 == 0) v[i].r.cpu = (uint16_t)((x >> 8) % 70);
      if (x % 5 == 0) v[i].r.pid = (uint32_t)(x >> 20) % 7;
      if (x % 7 == 0) v[i].r.tid = (uint32_t)(x >> 30) % 9;
      if (x % 11 == 0) v[i].r.filetime -= (x >> 40) % 30000000u;
      if (x % 13 == 0) v[i].r.filetime = (x >> 40) % 20000000u;
    }
  struct etw_decoder *fast = etw_decoder_new(tu_manifests()), *plain = etw_decoder_new(tu_manifests());
  etw_decoder_set_mode(plain, ETW_DECODE_REFERENCE);
  struct etw_jw a, c;
  etw_jw_init(&a, max);
  etw_jw_init(&c, max);
  size_t diff = 0, drops = 0, room_drops = 0;
  for (size_t i = 0; i < n; i++) {
    if (a.len > max / 2 + (next_rnd() % (max / 2))) a.len = c.len = 0;
    size_t sa = a.len, sc = c.len;
    struct etw_evref ra, rc;
    int ka = etw_decoder_write(fast, &v[i].r, &a, &ra);
    int kc = etw_decoder_write(plain, &v[i].r, &c, &rc);
    int ea = a.err, ec = c.err;
    int same = ea || ec || (a.len - sa == c.len - sc && !memcmp(a.buf + sa, c.buf + sc, a.len - sa) && ka == kc);
    if (ea != ec) room_drops++;
    if (!ea && (a.len - sa < 2 || memcmp(a.buf + a.len - 2, "}}", 2))) same = 0; /* (cut) */
    if (ea) drops++;
    if (!ea && a.len > max) same = 0;
    if (!same && diff++ < 3)
      fprintf(stderr, "%s #%zu mode %d max %zu: fast k %d err %d, plain k %d err %d\n %.*s\n %.*s\n", rel, i, mode, max, ka,
              ea, kc, ec, ea ? 0 : (int)(a.len - sa), a.buf + sa, ec ? 0 : (int)(c.len - sc), c.buf + sc);
    if (ea) etw_jw_truncate(&a, sa);
    if (ec) etw_jw_truncate(&c, sc);
    if (ea != ec) { /* keep them in step */
      a.len = sa;
      c.len = sc;
    }
  }
  if (diff || getenv("T_VERBOSE")) fprintf(stderr, "%s mode %d max %zu: %zu of %zu differ (%zu dropped, %zu by one side only)\n", rel, mode, max, diff, n, drops, room_drops);
  CHECK_EQ(diff, 0);
  etw_jw_free(&a);
  etw_jw_free(&c);
  etw_decoder_free(fast);
  etw_decoder_free(plain);
  for (size_t i = 0; i < n; i++) free(v[i].data);
  free(v);
  etw_etl_reader_free(keep_r);
  free(keep_b);
}

int main(void) {
  static const char *files[] = {"microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl",
                                "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl",
                                "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/gcevents.etl.zip!*.etl",
                                "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/primitive-types.etl.zip!*.etl",
                                "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/Regression/SelfDescribingSingleEvent.etl",
                                "microsoft+krabsetw/examples/NativeExamples/powershell.etl",
                                "airbus-cert+etl-parser/tests/example/AMSITrace.etl",
                                "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl",
                                "jtmoon79+super-speedy-syslog-searcher/logs/programs/Event_Trace_Log/waasmedic.20251005_113019_195.etl"};
  static const size_t maxima[] = {1u << 22, 1500};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++)
    for (int mode = 1; mode < 4; mode++)
      for (size_t m = 0; m < sizeof maxima / sizeof maxima[0]; m++) run(files[f], maxima[m], mode);
  T_DONE();
}
