/* etl_int.h — private to the ETL reader: its structs (files, streams, the merge), shared by
 * etl_file.c (files, buffer index, streams, loading a buffer) and etl_reader.c (records, the
 * merge by time, the batch API). A reader belongs to one thread at a time.
 */
#ifndef ETWCORE_ETL_INT_H
#define ETWCORE_ETL_INT_H

#include <stdint.h>
#include <stdio.h>

#include "cc.h"
#include "etwcore/etl.h"

#define BH 0x48 /* WMI_BUFFER_HEADER size */

static inline uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

#define LT_NONE UINT32_MAX /* no stream (loser tree) */

struct bufent {
  uint64_t off;
  uint64_t seq;
  uint32_t size;  /* on disk */
  uint16_t cpu;
  uint16_t flag;
};

struct efile {
  struct etw_etl_info info;
  char *path;
  FILE *fp;                  /* or NULL for memory images */
  const unsigned char *mem;
  uint64_t size;
  struct bufent *bufs;
  uint32_t n_bufs;
  uint32_t clk_ref;          /* the file whose header aligns this one's raw clock (etl_align_clocks) */
  int64_t clk_t0;            /* its raw timestamp of the logfile header record ... */
  uint64_t clk_start;        /* ... and its StartTime: filetime = clk_start + (ts - clk_t0) / freq */
  int damaged;               /* index stopped early */
  uint64_t damage_off;
  char damage_msg[160];
};

/* A stream's memos for its record loop (fill, parse_one). PERFINFO: what the fast path derives
 * from a record's first 8 bytes (@h0: marker, size, HookId), all a function of h0 alone, so a
 * record with the same 8 bytes (consecutive samples of a processor usually have them) takes them
 * from here; written only for a header that passed its checks, and starting as the values of a
 * real header (type 0x10, version 0, size and header 0x10, HookId 0), so it is right for every
 * input. EVENT_HEADER: the head word by the header's bytes 2..8. */
struct pmemo {
  uint64_t h0;
  uint64_t head;  /* the record's first 8 bytes: kind, pointer size, HookId */
  uint64_t desc;  /* bytes 48..56: version, opcode, task */
  uintptr_t hdr;  /* header size */
  uintptr_t adv;  /* record size rounded up to 8 */
  uint32_t size, len; /* record size, user data size */
  /* and the last EVENT_HEADER's bytes 2..8 (h0 >> 16: type, marker, flags, property) with the
   * head word they give (starting as the one of 0) */
  uint64_t ekey, ehead;
};
#define PMEMO_INIT                                                                              \
  {0xC0100000u | (uint64_t)0x10 << 32, ETW_REC_PERFINFO | 4 << 8, 0, 0x10, 0x10, 0x10, 0, 0, \
   ETW_REC_EVENT | 4 << 8 | (uint64_t)ETW_EVH_32_BIT_HEADER << 16}

struct stream {
  uint32_t file;
  uint16_t cpu;
  uint32_t *bi;              /* buffer indices in this file, sorted by sequence */
  uint32_t n_bi, next_bi;
  unsigned char *pay;        /* decompressed / copied record payload (owned) */
  uint32_t pay_len, pay_cap, pos;
  int has;                   /* cur is valid */
  uint64_t buf_off;
  int64_t last_ts;
  /* the records parsed ahead: slots[0, lim - slots) of the current buffer, cur the current one
   * (valid when has); pos is the payload offset of the first record not parsed yet; *lim (a
   * slot too) has filetime UINT64_MAX. A slot whose kind is PERFINFO has the fields that kind
   * leaves zero at zero and tid/pid at UINT64_MAX (only the reader writes the slots); file,
   * file_index and cpu are set once per slot, file_offset per buffer. */
  struct etw_rec *cur, *lim, *slots;
  uint64_t slots_off;        /* the file_offset the slots hold */
  const unsigned char *data; /* the current buffer's records: pay, or inside a memory image */
  const struct efile *f;     /* its file (r->files no longer moves once streams exist) */
  int ft_unit;               /* the file's clock counts 100 ns: filetime = ft_base + timestamp */
  uint64_t ft_base;          /* start_time - t0 (mod 2^64) */
  struct pmemo pm;           /* its memos (the last PERFINFO and EVENT_HEADER headers) */
  /* slots whose n_ext or WPP fields may be other than 0 (bit i: slots[i]): every other slot
   * has n_ext = 0, the WPP fields 0 and cpu = the stream's, so the fast record paths do not
   * store them. Set for a slot parse_generic or parse_ext writes (also when the record then
   * fails), cleared (the slot's fields reset) before the next batch is parsed into the slots */
  uint64_t dirty[3];
};

/* Records parsed per batch (one loop over a buffer's records; the slots of a stream, one more
 * than this: the slot after a batch's last record holds time UINT64_MAX for next_batch's runs,
 * are allocated on its first batch and freed when it is exhausted). */
#define ETL_BATCH 128
_Static_assert(ETL_BATCH < 64 * 3, "stream.dirty: a bit per slot");

/* Test hook (etl_file.c): records per batch (1 .. ETL_BATCH). */
extern unsigned etw_etl_batch_max;

struct lent { /* a sorted list entry: a stream's current record and its time */
  uint64_t key;
  struct etw_rec *c; /* (the stream: c->stream) */
};

struct etw_etl_reader {
  struct efile *files;
  uint32_t n_files;
  struct stream *st;
  uint32_t n_st;
  uint32_t *tree;            /* loser tree: [0] the winner, [1..lt_p) each match's loser (stream
                                indices; LT_NONE = an exhausted stream or an empty leaf) */
  uint64_t *tft;             /* [n]: the record time of tree[n] (UINT64_MAX for LT_NONE) */
  uint32_t *leaf;            /* per stream: its leaf, lt_p + k */
  uint32_t lt_p;             /* leaves (a power of two) */
  uint64_t runner_ft;        /* least record time of the losers on the winner's path (UINT64_MAX if none) */
  int list;                  /* merge by the sorted list below instead of the tree (few streams) */
  struct lent *lst;          /* list: [head, end) the streams with a record, earliest first,
                                with their record times ([head]'s not kept); sentinels: [head -
                                1] (NULL, 0) where a search needs it (written then) and [end]
                                (UINT64_MAX; its stream not kept: the list is empty when head
                                == end) */
  struct lent *lh, *le;      /* list: head and end: the live part of lst (entries slide up) */
  struct lent *llast;        /* list: &lst[ocap - 1], the last entry */
  uint32_t ocap;
  uint64_t lkey;             /* list: lh[1].key, the runner-up's record time; tree: 0 */
  int started;
  struct stream *last_s;     /* stream of the last returned record, or NULL */
  unsigned char *raw;        /* scratch for reading a buffer */
  uint32_t raw_cap;
  uint64_t done, total;
  uint64_t mem;              /* bytes of stream payload buffers */
  int generic;               /* ETW_DECODE_REFERENCE: every record through parse_generic */
  int nofollow;              /* add_file refuses a symbolic link (etw_etl_reader_set_nofollow) */
  int err_set;
  struct etw_status err;
};

/* Bytes a stream's payload buffer keeps readable (zeroed) after the records, so that the record
 * loop may read a record's first 8 bytes without testing for them (fill, parse_one). */
#define ETL_SLACK 16

/* etl_file.c */
void etl_set_damage(struct etw_etl_reader *r, uint32_t file, uint64_t off, const char *what);
uint64_t etl_to_filetime(const struct efile *f, int64_t ts);
void etl_align_clocks(struct etw_etl_reader *r);
enum etw_err etl_build_streams(struct etw_etl_reader *r, struct etw_status *st);
int etl_load_buffer(struct etw_etl_reader *r, struct stream *s);

#endif
