/* fuzz_etl.c — libFuzzer over the ETL reader and every decoder, from memory.
 * Input: an .etl image (seeded with ../shared/corpus by scripts/fuzz.sh). Inputs that start
 * with '<' are also fed to the manifest XML parser, and every record of the trace is decoded
 * with whatever schemas the trace itself carries (TraceLogging, EventSource manifests,
 * EventInfo blobs, kernel layouts, WPP). Each call is bounded: at most 100,000 records. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/etl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct etw_decoder *d = etw_decoder_new(NULL);
  if (!d) return 0;
  if (size && data[0] == '<') dec_manifest_load(d, (const char *)data, size, NULL);
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  etw_status_clear(&st);
  if (r && !etw_etl_reader_add_mem(r, "fuzz.etl", data, size, &st)) {
    struct etw_jw w;
    etw_jw_init(&w, 1u << 20);
    struct etw_rec rec;
    struct etw_evref ref;
    for (int n = 0; n < 100000 && etw_etl_reader_next(r, &rec, &st) == 1; n++) {
      w.len = 0;
      w.err = 0;
      etw_decoder_write(d, &rec, &w, &ref);
    }
    etw_jw_free(&w);
  }
  etw_etl_reader_free(r);
  etw_decoder_free(d);
  return 0;
}
