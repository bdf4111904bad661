/* test_dec_mode.c — the decode mode (`--decode fast|reference`; etw_decode_set_default,
 * etw_decoder_set_mode, etw_etl_reader_set_mode): etw_decode_parse; new readers and decoders
 * take the process default; on corpus traces (with manifests) a decoder in fast mode builds
 * kernel and manifest plans and a System block cache, one in reference mode none of them (every
 * event on the plain walkers), and a reader in reference mode parses every record generically —
 * with byte-identical output and the same event references; a fast decoder switched to reference
 * after some events drops its plans and goes on with the same output. */
#include "decode.h"
#include "etl/etl_int.h"
#include "t.h"
#include "test_etl_util.h"

/* plans a decoder holds: kernel slots not the sentinel, manifest/classic plans */
static size_t plans(const struct etw_decoder *d) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof d->kplan / sizeof d->kplan[0]; i++) n += d->kplan[i] != &dec_kplan_none;
  for (size_t i = 0; i < DEC_EPLAN_N; i++) n += d->eplan[i] != NULL;
  return n;
}

struct run {
  uint64_t hash; /* FNV-1a over every event's text, result and reference, one after the other */
  size_t len, events, plans, sysc;
  int generic;
};

/* Decode @img in the current default mode; with @switch_at > 0 the decoder is set to reference
 * mode after that many events (its plans counted just before). */
static void decode(const unsigned char *img, size_t n, size_t switch_at, struct run *o) {
  memset(o, 0, sizeof *o);
  o->hash = 0xCBF29CE484222325ull;
  struct etw_etl_reader *r;
  struct etw_decoder *d;
  CHECK(tu_open(img, n, "t.etl", tu_manifests(), &r, &d) == 0);
  if (!r) return;
  o->generic = r->generic;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  struct etw_rec rec;
  struct etw_evref ref;
  struct etw_status st;
  while (etw_etl_reader_next(r, &rec, &st) == 1) {
    if (switch_at && o->events == switch_at) {
      o->plans = plans(d);
      etw_decoder_set_mode(d, ETW_DECODE_REFERENCE);
      CHECK(plans(d) == 0);
    }
    w.len = 0;
    int k = etw_decoder_write(d, &rec, &w, &ref);
    char tail[512];
    int tl = snprintf(tail, sizeof tail, "|%d|%s|%s|%lld|%u|%u|%u|%u\n", k, ref.provider, ref.name ? ref.name : "-",
                      (long long)ref.ts_ns, ref.pid, ref.tid, ref.event_id, ref.cpu);
    etw_jw_raw(&w, tail, tl < (int)sizeof tail ? (size_t)tl : sizeof tail - 1);
    CHECK(w.len > (size_t)tl && !w.err);
    for (size_t i = 0; i < w.len; i++) o->hash = (o->hash ^ (unsigned char)w.buf[i]) * 0x100000001B3ull;
    o->len += w.len;
    o->events++;
  }
  if (!switch_at) o->plans = plans(d);
  o->sysc = d->sysc != NULL;
  etw_jw_free(&w);
  etw_decoder_free(d);
  etw_etl_reader_free(r);
}

int main(void) {
  enum etw_decode_mode m = ETW_DECODE_REFERENCE;
  CHECK(etw_decode_parse("fast", &m) == 0 && m == ETW_DECODE_FAST);
  CHECK(etw_decode_parse("reference", &m) == 0 && m == ETW_DECODE_REFERENCE);
  CHECK(etw_decode_parse("Fast", &m) == -1 && m == ETW_DECODE_REFERENCE);
  CHECK(etw_decode_parse("", &m) == -1 && etw_decode_parse(NULL, &m) == -1);
  CHECK(etw_decode_default() == ETW_DECODE_FAST);

  static const char *const FILES[] = {
      "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl",
      "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl",
  };
  for (size_t fi = 0; fi < sizeof FILES / sizeof FILES[0]; fi++) {
    size_t n = 0;
    unsigned char *img = tu_corpus_file(FILES[fi], &n);
    CHECK(img != NULL);
    if (!img) continue;
    struct run fast, ref, sw;
    etw_decode_set_default(ETW_DECODE_FAST);
    decode(img, n, 0, &fast);
    etw_decode_set_default(ETW_DECODE_REFERENCE);
    decode(img, n, 0, &ref);
    etw_decode_set_default(ETW_DECODE_FAST);
    decode(img, n, fast.events / 2, &sw);
    fprintf(stderr, "%s: %zu events; plans fast %zu, reference %zu, before the switch %zu\n", FILES[fi],
            fast.events, fast.plans, ref.plans, sw.plans);
    CHECK(fast.events > 5);
    CHECK(!fast.generic && ref.generic && !sw.generic);
    CHECK((fi > 0 || fast.plans > 0) && fast.sysc);
    CHECK(ref.plans == 0 && !ref.sysc);
    CHECK(fi > 0 || sw.plans > 0); /* (net: plans before the middle) */
    CHECK(fast.len == ref.len && fast.hash == ref.hash);
    CHECK(fast.len == sw.len && fast.hash == sw.hash);
    free(img);
  }
  T_DONE();
}
