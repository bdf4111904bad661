/* fuzz_etl.c — libFuzzer over the ETL reader and every decoder, from memory.
 * Input: an .etl image (seeded with ../shared/corpus by scripts/fuzz.sh). Inputs that start
 * with '<' are also fed to the manifest XML parser, and every record of the trace is decoded
 * with whatever schemas the trace itself carries (TraceLogging, EventSource manifests,
 * EventInfo blobs, kernel layouts, WPP). Each call is bounded: at most 100,000 records.
 * A second reader over the same image hands out the records through etw_etl_reader_next_batch
 * (batch sizes 2..256 taken from the input — above 66 next_batch's unbounded loop runs — mixed
 * with next_ref calls): every record, the end and its status must equal the first reader's (a
 * mismatch aborts: a finding). The input's last byte's low bit picks next_batch's run loop: the
 * C one (etw_etl_merge_c) or the x86-64 assembly where built. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/etl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern int etw_etl_merge_c;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct etw_decoder *d = etw_decoder_new(NULL);
  if (!d) return 0;
  if (size && data[0] == '<') dec_manifest_load(d, (const char *)data, size, NULL);
  etw_etl_merge_c = size && (data[size - 1] & 1);
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  etw_status_clear(&st);
  if (r && !etw_etl_reader_add_mem(r, "fuzz.etl", data, size, &st)) {
    struct etw_jw w;
    etw_jw_init(&w, 1u << 20);
    struct etw_rec rec;
    struct etw_evref ref;
    struct etw_etl_reader *b = etw_etl_reader_new();
    struct etw_status bst;
    etw_status_clear(&bst);
    if (b && etw_etl_reader_add_mem(b, "fuzz.etl", data, size, &bst)) {
      etw_etl_reader_free(b);
      b = NULL;
    }
    const struct etw_rec *batch[256];
    int bn = 0, bi = 0, brc = 1, n = 0, rc;
    while (n < 100000 && (rc = etw_etl_reader_next(r, &rec, &st)) == 1) {
      w.len = 0;
      w.err = 0;
      etw_decoder_write(d, &rec, &w, &ref);
      if (b) {
        const struct etw_rec *o = NULL;
        if (bi == bn && brc == 1) {
          unsigned char k = size ? data[(size_t)n % size] : 0;
          if (k % 5 == 0) {
            brc = etw_etl_reader_next_ref(b, &batch[0], &bst);
            bn = brc == 1;
          } else {
            brc = etw_etl_reader_next_batch(b, batch, 1 + (size_t)k, &bst);
            bn = brc > 0 ? brc : 0;
            if (brc > 0) brc = 1;
          }
          bi = 0;
        }
        if (bi < bn) o = batch[bi++];
        if (!o || o->filetime != rec.filetime || o->kind != rec.kind || o->cpu != rec.cpu ||
            o->user_len != rec.user_len || (rec.user_len && memcmp(o->user_data, rec.user_data, rec.user_len))) {
          fprintf(stderr, "fuzz_etl: record %d differs between next and next_batch\n", n);
          abort();
        }
      }
      n++;
    }
    if (b && n < 100000) { /* both at their end: the same outcome and status */
      if (bi == bn && brc == 1) brc = etw_etl_reader_next_batch(b, batch, 64, &bst);
      if (bi < bn || brc != rc || (rc < 0 && strcmp(bst.msg, st.msg))) {
        fprintf(stderr, "fuzz_etl: the end differs between next (%d: %s) and next_batch (%d: %s)\n", rc,
                rc < 0 ? st.msg : "", brc, brc < 0 ? bst.msg : "");
        abort();
      }
    }
    etw_etl_reader_free(b);
    etw_jw_free(&w);
  }
  etw_etl_reader_free(r);
  etw_decoder_free(d);
  return 0;
}
