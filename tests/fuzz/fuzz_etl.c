/* fuzz_etl.c — libFuzzer over the ETL reader and every decoder, from memory.
 * Input: an .etl image (seeded with ../shared/corpus by scripts/fuzz.sh). Inputs that start
 * with '<' are also fed to the manifest XML parser, and every record of the trace is decoded
 * with whatever schemas the trace itself carries (TraceLogging, EventSource manifests,
 * EventInfo blobs, kernel layouts, WPP). Each call is bounded: at most 100,000 records.
 * A second reader over the same image hands out the records through etw_etl_reader_next_batch
 * (batch sizes 2..256 taken from the input — above 130, ETL_BATCH + 2, next_batch's unbounded
 * loop runs — mixed with next_ref calls): every record (its header fields, payload, WPP fields
 * and origin), the end and its status must equal the first reader's (a mismatch aborts: a
 * finding). The input's last byte picks how the first reader parses (bit 1: in reference mode,
 * etw_etl_reader_set_mode — parse_generic only, so the whole-word fast paths and the per-stream
 * header memos are checked against the reference parse — or the same way as the second).
 * Every record is decoded twice, by a decoder in fast mode and one in reference mode
 * (etw_decoder_set_mode: plans, templates and memos against the plain walkers): the same bytes,
 * the same result and the same event reference, unless one of the two writers ran out of room
 * (a mismatch aborts). The records also go through dec_stack.c (learnt, then the fast
 * decoder's text gets its stack): an attached stack must leave a well-formed tail. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dec_stack.h"
#include "decode.h"
#include "etwcore/etl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

static int same_str(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* The fast decoder's event (@a, result @ka, reference @ra) against the reference decoder's. */
static void same_event(int n, const struct etw_jw *a, int ka, const struct etw_evref *ra, const struct etw_jw *b,
                       int kb, const struct etw_evref *rb) {
  if (a->err || b->err) return; /* (the plans reserve more than they write, the walker its worst case) */
  if (a->len != b->len || memcmp(a->buf, b->buf, a->len) || ka != kb || !same_str(ra->provider, rb->provider) ||
      !same_str(ra->name, rb->name) || ra->pid != rb->pid || ra->tid != rb->tid || ra->event_id != rb->event_id ||
      ra->level != rb->level || ra->ts_ns != rb->ts_ns || ra->cpu != rb->cpu) {
    fprintf(stderr, "fuzz_etl: record %d decodes differently in fast and reference mode\n fast: %.*s\n ref:  %.*s\n", n,
            (int)a->len, a->buf, (int)b->len, b->buf);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct etw_decoder *d = etw_decoder_new(NULL), *dr = etw_decoder_new(NULL);
  if (!d || !dr) {
    etw_decoder_free(d);
    etw_decoder_free(dr);
    return 0;
  }
  etw_decoder_set_mode(d, ETW_DECODE_FAST);
  etw_decoder_set_mode(dr, ETW_DECODE_REFERENCE);
  if (size && data[0] == '<') {
    dec_manifest_load(d, (const char *)data, size, NULL);
    dec_manifest_load(dr, (const char *)data, size, NULL);
  }
  const int gen = size && (data[size - 1] & 2);
  struct etw_etl_reader *r = etw_etl_reader_new();
  if (r) etw_etl_reader_set_mode(r, gen ? ETW_DECODE_REFERENCE : ETW_DECODE_FAST);
  struct etw_status st;
  etw_status_clear(&st);
  if (r && !etw_etl_reader_add_mem(r, "fuzz.etl", data, size, &st)) {
    struct etw_jw w, wr;
    etw_jw_init(&w, 1u << 20);
    etw_jw_init(&wr, 1u << 20);
    struct etw_rec rec;
    struct etw_evref ref, rref;
    struct etw_etl_reader *b = etw_etl_reader_new();
    if (b) etw_etl_reader_set_mode(b, ETW_DECODE_FAST);
    struct etw_status bst;
    etw_status_clear(&bst);
    if (b && etw_etl_reader_add_mem(b, "fuzz.etl", data, size, &bst)) {
      etw_etl_reader_free(b);
      b = NULL;
    }
    struct etw_stk *stk = etw_stk_new(1);
    const struct etw_rec *batch[256];
    int bn = 0, bi = 0, brc = 1, n = 0, rc;
    while (n < 100000 && (rc = etw_etl_reader_next(r, &rec, &st)) == 1) {
      w.len = wr.len = 0;
      w.err = wr.err = 0;
      int k1 = etw_decoder_write(d, &rec, &w, &ref);
      int k2 = etw_decoder_write(dr, &rec, &wr, &rref);
      same_event(n, &w, k1, &ref, &wr, k2, &rref);
      if (stk) { /* stacks: learnt and attached in the same pass (hostile walks, images, methods) */
        etw_stk_learn(stk, &rec);
        size_t before = w.len;
        int a = w.err ? 0 : etw_stk_attach(stk, &rec, &w);
        if ((a == 1 && (w.len <= before || w.buf[w.len - 1] != '}' || !strstr(etw_jw_cstr(&w), ",\"Stack\":["))) ||
            (a != 1 && w.len != before)) {
          fprintf(stderr, "fuzz_etl: record %d: a stack attached badly (%d)\n", n, a);
          abort();
        }
      }
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
    if (b && n < 100000) { /* both at their end: the same outcome and status */
      if (bi == bn && brc == 1) brc = etw_etl_reader_next_batch(b, batch, 64, &bst);
      if (bi < bn || brc != rc || (rc < 0 && strcmp(bst.msg, st.msg))) {
        fprintf(stderr, "fuzz_etl: the end differs between next (%d: %s) and next_batch (%d: %s)\n", rc,
                rc < 0 ? st.msg : "", brc, brc < 0 ? bst.msg : "");
        abort();
      }
    }
    etw_etl_reader_free(b);
    etw_stk_free(stk);
    etw_jw_free(&w);
    etw_jw_free(&wr);
  }
  etw_etl_reader_free(r);
  etw_decoder_free(d);
  etw_decoder_free(dr);
  return 0;
}
