/* fuzz_etl.c — libFuzzer over the ETL reader and every decoder, from memory.
 * Input: an .etl image (seeded with ../shared/corpus by scripts/fuzz.sh). Inputs that start
 * with '<' are also fed to the manifest XML parser, and every record of the trace is decoded
 * with whatever schemas the trace itself carries (TraceLogging, EventSource manifests,
 * EventInfo blobs, kernel layouts, WPP). Each call is bounded: at most 100,000 records.
 * A second reader over the same image hands out the records through etw_etl_reader_next_batch
 * (batch sizes 2..256 taken from the input — above 130, ETL_BATCH + 2, next_batch's unbounded
 * loop runs — mixed with next_ref calls): every record (its header fields, payload, WPP fields
 * and origin), the end and its status must equal the first reader's (a mismatch aborts: a
 * finding). The input's last byte picks how the first reader parses (bit 1: through
 * parse_generic only, etw_etl_generic_only — so the whole-word fast paths and the per-stream
 * header memos are checked against the reference parse — or the same way as the second). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/etl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern int etw_etl_generic_only;

/* Record @a equals @b in everything a consumer reads (not the extended items' contents). */
static int same_rec(const struct etw_rec *a, const struct etw_rec *b) {
  return a->kind == b->kind && a->ptr_size == b->ptr_size && a->flags == b->flags &&
         a->event_property == b->event_property && a->hook_id == b->hook_id && a->tid == b->tid &&
         a->pid == b->pid && a->timestamp == b->timestamp && a->filetime == b->filetime &&
         !memcmp(a->provider_id, b->provider_id, 16) && a->desc.id == b->desc.id &&
         a->desc.version == b->desc.version && a->desc.channel == b->desc.channel &&
         a->desc.level == b->desc.level && a->desc.opcode == b->desc.opcode && a->desc.task == b->desc.task &&
         a->desc.keyword == b->desc.keyword && a->kernel_time == b->kernel_time &&
         a->user_time == b->user_time && !memcmp(a->activity_id, b->activity_id, 16) && a->cpu == b->cpu &&
         a->n_ext == b->n_ext && a->user_len == b->user_len &&
         (!a->user_len || !memcmp(a->user_data, b->user_data, a->user_len)) &&
         a->wpp_msg_number == b->wpp_msg_number && a->wpp_flags == b->wpp_flags &&
         a->wpp_sequence == b->wpp_sequence && a->file_index == b->file_index && a->file_offset == b->file_offset;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct etw_decoder *d = etw_decoder_new(NULL);
  if (!d) return 0;
  if (size && data[0] == '<') dec_manifest_load(d, (const char *)data, size, NULL);
  const int gen = size && (data[size - 1] & 2);
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
    while (n < 100000 && ((etw_etl_generic_only = gen), (rc = etw_etl_reader_next(r, &rec, &st))) == 1) {
      etw_etl_generic_only = 0;
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
        if (!o || !same_rec(o, &rec)) {
          fprintf(stderr, "fuzz_etl: record %d differs between next and next_batch\n", n);
          abort();
        }
      }
      n++;
    }
    etw_etl_generic_only = 0;
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
