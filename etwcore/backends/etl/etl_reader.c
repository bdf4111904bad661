/* etl_reader.c — the records of an ETL reader's loaded buffers (etl_file.c loads them): parsed a
 * batch at a time per stream, then merged by time and handed out one by one or in runs.
 *
 * Per file: the first buffer's first record (the logfile header) gives the clock; then every
 * buffer header is indexed (offset, processor, sequence number, compression). Buffers are
 * grouped into one stream per (file, processor), sorted by sequence number, and the streams
 * are merged by record time (a sorted list up to etw_etl_merge_list_max streams, a tournament
 * (loser) tree beyond). A stream holds one decoded buffer at a time,
 * so memory is O(streams × buffer size), whatever the file size.
 *
 * Damage (truncated file, bad buffer header, bad record, failed decompression) never stops
 * the other streams: everything readable is delivered, then etw_etl_reader_next returns -1
 * with the first damage (file and offset) in the status. Every size read from the file is
 * checked against the bytes actually there and against the limits in etl.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etl_int.h"


#if ETW_GNUC
#define ETL_INLINE static inline __attribute__((always_inline))
#define ETL_NOINLINE static ETW_NOINLINE
#define ETL_UNLIKELY(x) ETW_EXPECT(!!(x), 0)
#else
#define ETL_INLINE static inline
#define ETL_NOINLINE static
#define ETL_UNLIKELY(x) (x)
#endif

/* The head of struct etw_rec as the fast record paths below store it: whole 8- and 16-byte
 * words at these offsets, on a little-endian host (else the field-by-field path is used). */
#define REC_OFF(m) offsetof(struct etw_rec, m)
#define ETL_REC_LAYOUT                                                                              \
  (REC_OFF(kind) == 0 && REC_OFF(ptr_size) == 1 && REC_OFF(flags) == 2 &&                           \
   REC_OFF(event_property) == 4 && REC_OFF(hook_id) == 6 && REC_OFF(tid) == 8 &&                    \
   REC_OFF(pid) == 12 && REC_OFF(timestamp) == 16 && REC_OFF(provider_id) == 24 &&                  \
   REC_OFF(desc) == 40 && REC_OFF(desc.id) == 40 && REC_OFF(desc.version) == 42 &&                  \
   REC_OFF(desc.channel) == 43 && REC_OFF(desc.level) == 44 && REC_OFF(desc.opcode) == 45 &&        \
   REC_OFF(desc.task) == 46 && REC_OFF(desc.keyword) == 48 && REC_OFF(kernel_time) == 56 &&         \
   REC_OFF(user_time) == 60 && REC_OFF(activity_id) == 64 && REC_OFF(filetime) == 80 &&             \
   REC_OFF(cpu) == 88 && REC_OFF(n_ext) == 90 && REC_OFF(ext) == 96 &&                              \
   REC_OFF(wpp_flags) == REC_OFF(wpp_msg_number) + 2 &&                                             \
   REC_OFF(wpp_sequence) == REC_OFF(wpp_msg_number) + 4 && ETL_LITTLE_ENDIAN)
#if ETW_LE
#define ETL_LITTLE_ENDIAN 1
#else
#define ETL_LITTLE_ENDIAN 0
#endif

#if (defined(__x86_64__) || defined(__aarch64__)) && ETL_LITTLE_ENDIAN
/* (where the fast paths are meant to run: a layout change must not switch them off silently) */
_Static_assert(ETL_REC_LAYOUT, "struct etw_rec: the layout the fast record paths store");
#endif

static inline uint64_t ld64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static inline void st64(unsigned char *d, uint64_t v) { memcpy(d, &v, 8); }

/* The EVENT_HEADER's extended data items after the header at @p + *@hdr (record of @size bytes):
 * each bounded by the record; the first ETW_REC_MAX_EXT kept in @rec. *@hdr moves past them.
 * -1 on a malformed item. Shared by parse_generic and the fast path in next_ref. */
static inline int parse_ext(struct etw_rec *rec, const unsigned char *p, uint32_t size, uint32_t *hdr) {
  uint32_t h = *hdr;
  for (;;) {
    if (size - h < 8) return -1;
    const unsigned char *it = p + h;
    uint32_t isz = rd16(it), dsz = rd16(it + 6);
    if (isz < 8 || isz > size - h || dsz > isz - 8) return -1;
    if (rec->n_ext < ETW_REC_MAX_EXT) {
      struct etw_ext_item *x = &rec->ext[rec->n_ext++];
      x->type = rd16(it + 2);
      x->len = (uint16_t)dsz;
      x->data = it + 8;
    }
    h += isz;
    if (!(rd16(it + 4) & 1)) break;
  }
  *hdr = h;
  return 0;
}

/* A MESSAGE_TRACE_HEADER (WPP) record's head into @rec (parse_generic's part): its size, *@hdr
 * the size of its head; -1 if malformed. */
static int parse_wpp(const struct efile *f, struct etw_rec *rec, const unsigned char *p, uint32_t n,
                     int64_t last_ts, uint32_t *phdr) {
  uint32_t size = rd16(p);
  if (size < 8 || size > n) return -1;
  uint16_t of = rd16(p + 6);
  uint32_t hdr = 8;
  rec->kind = ETW_REC_WPP;
  rec->flags = ETW_EVH_TRACE_MESSAGE;
  rec->wpp_msg_number = rd16(p + 4);
  rec->wpp_flags = of;
  rec->ptr_size = (of & 0x40) ? 4 : (of & 0x80) ? 8 : (uint8_t)(f->info.pointer_size == 4 ? 4 : 8);
  rec->tid = rec->pid = 0xFFFFFFFFu;
  rec->timestamp = last_ts;
  rec->desc.id = rec->wpp_msg_number;
  if (of & 0x01) {
    if (size - hdr < 4) return -1;
    rec->wpp_sequence = rd32(p + hdr);
    hdr += 4;
  }
  if (of & 0x02) {
    if (size - hdr < 16) return -1;
    memcpy(rec->provider_id, p + hdr, 16);
    hdr += 16;
  } else if (of & 0x04) {
    if (size - hdr < 4) return -1;
    rec->desc.task = (uint16_t)rd32(p + hdr); /* component id */
    hdr += 4;
  }
  if (of & 0x18) {
    if (size - hdr < 8) return -1;
    rec->timestamp = (int64_t)rd64(p + hdr);
    hdr += 8;
  }
  if (of & 0x20) {
    if (size - hdr < 8) return -1;
    rec->tid = rd32(p + hdr);
    rec->pid = rd32(p + hdr + 4);
    hdr += 8;
  }
  *phdr = hdr;
  return (int)size;
}

/* The size of a SYSTEM / COMPACT / PERFINFO record head @p (@n bytes left) whose fixed part is
 * *hdr bytes: *size (at p + 4, within @n), *ver (the version word) and *hdr grown by the 8 bytes
 * that version bit 15 adds and 8 for each of the items counted in bits 8..10. -1: a size or head
 * that does not fit. */
static int kernel_head(const unsigned char *p, uint32_t n, uint32_t *hdr, uint32_t *size, uint16_t *ver) {
  *size = rd16(p + 4);
  if (*size < *hdr || *size > n) return -1;
  *ver = rd16(p);
  if (*ver & 0x8000) *hdr += 8;
  *hdr += ((*ver >> 8) & 7) * 8;
  return *hdr > *size ? -1 : 0;
}

/* Every field of the record head, field by field (the other record kinds, and any layout). */
ETL_NOINLINE int parse_generic(const struct efile *f, const struct stream *s, struct etw_rec *rec,
                               const unsigned char *p, uint32_t n, uint32_t m, int64_t last_ts) {
  memset(rec, 0, offsetof(struct etw_rec, ext)); /* the record head up to ext[] */
  rec->n_ext = 0;
  rec->wpp_msg_number = rec->wpp_flags = 0;
  rec->wpp_sequence = 0;
  rec->cpu = s->cpu;
  uint32_t size, hdr;
  if ((m & 0xC0000000u) == 0xC0000000u) {
    unsigned type = (m >> 16) & 0xFF;
    switch (type) {
    case 0x01: case 0x02: case 0x03: case 0x04: { /* SYSTEM / COMPACT */
      uint16_t ver;
      hdr = type <= 2 ? 0x20 : 0x18;
      if (kernel_head(p, n, &hdr, &size, &ver)) return -1;
      rec->kind = ETW_REC_SYSTEM;
      rec->ptr_size = (type & 1) ? 4 : 8;
      rec->hook_id = rd16(p + 6);
      rec->tid = rd32(p + 8);
      rec->pid = rd32(p + 0xC);
      rec->timestamp = (int64_t)rd64(p + 0x10);
      if (type <= 2) {
        rec->kernel_time = rd32(p + 0x18);
        rec->user_time = rd32(p + 0x1C);
      }
      rec->desc.version = (uint8_t)ver;
      rec->desc.opcode = (uint8_t)rec->hook_id;
      rec->desc.task = (uint16_t)(rec->hook_id >> 8);
      break;
    }
    case 0x10: case 0x11: { /* PERFINFO */
      uint16_t ver;
      hdr = 0x10;
      if (kernel_head(p, n, &hdr, &size, &ver)) return -1;
      rec->kind = ETW_REC_PERFINFO;
      rec->ptr_size = type == 0x10 ? 4 : 8;
      rec->hook_id = rd16(p + 6);
      rec->tid = rec->pid = 0xFFFFFFFFu;
      rec->timestamp = (int64_t)rd64(p + 8);
      rec->desc.version = (uint8_t)ver;
      rec->desc.opcode = (uint8_t)rec->hook_id;
      rec->desc.task = (uint16_t)(rec->hook_id >> 8);
      break;
    }
    case 0x0A: case 0x14: case 0x0B: case 0x15: { /* FULL / INSTANCE */
      hdr = (type == 0x0A || type == 0x14) ? 0x30 : 0x48;
      size = rd16(p);
      if (size < hdr || size > n) return -1;
      rec->kind = ETW_REC_CLASSIC;
      rec->flags = ETW_EVH_CLASSIC_HEADER;
      rec->ptr_size = (type == 0x0A || type == 0x0B) ? 4 : 8;
      rec->desc.opcode = p[4];
      rec->desc.level = p[5];
      rec->desc.version = (uint8_t)rd16(p + 6);
      rec->tid = rd32(p + 8);
      rec->pid = rd32(p + 0xC);
      rec->timestamp = (int64_t)rd64(p + 0x10);
      memcpy(rec->provider_id, p + 0x18, 16);
      rec->kernel_time = rd32(p + 0x28);
      rec->user_time = rd32(p + 0x2C);
      break;
    }
    case 0x12: case 0x13: { /* EVENT_HEADER */
      hdr = 0x50;
      size = rd16(p);
      if (size < hdr || size > n) return -1;
      rec->kind = ETW_REC_EVENT;
      rec->ptr_size = type == 0x12 ? 4 : 8;
      rec->flags = (uint16_t)(rd16(p + 4) | (type == 0x12 ? ETW_EVH_32_BIT_HEADER : ETW_EVH_64_BIT_HEADER));
      rec->event_property = rd16(p + 6);
      rec->tid = rd32(p + 8);
      rec->pid = rd32(p + 0xC);
      rec->timestamp = (int64_t)rd64(p + 0x10);
      memcpy(rec->provider_id, p + 0x18, 16);
      rec->desc.id = rd16(p + 0x28);
      rec->desc.version = p[0x2A];
      rec->desc.channel = p[0x2B];
      rec->desc.level = p[0x2C];
      rec->desc.opcode = p[0x2D];
      rec->desc.task = rd16(p + 0x2E);
      rec->desc.keyword = rd64(p + 0x30);
      rec->kernel_time = rd32(p + 0x38);
      rec->user_time = rd32(p + 0x3C);
      memcpy(rec->activity_id, p + 0x40, 16);
      if ((rec->flags & ETW_EVH_EXTENDED_INFO) && parse_ext(rec, p, size, &hdr)) return -1;
      break;
    }
    default:
      return -1;
    }
  } else if ((m & 0xD0000000u) == 0x90000000u) { /* MESSAGE_TRACE_HEADER (WPP) */
    int k = parse_wpp(f, rec, p, n, last_ts, &hdr);
    if (k < 0) return -1;
    size = (uint32_t)k;
  } else {
    return -1;
  }
  rec->user_data = p + hdr;
  rec->user_len = size - hdr;
  return (int)size;
}

/* A PERFINFO header's size by its version's high byte (bits 8..15 of the first word): 0x10,
 * plus 8 for bit 15 and 8 for each count in bits 8..10 (the extension items). */
#define PH4(b) 0x10 + 8 * (((b) >> 7) & 1) + 8 * ((b) & 7)
#define PH16(b) PH4(b), PH4(b + 1), PH4(b + 2), PH4(b + 3), PH4(b + 4), PH4(b + 5), PH4(b + 6), \
                PH4(b + 7), PH4(b + 8), PH4(b + 9), PH4(b + 10), PH4(b + 11), PH4(b + 12),   \
                PH4(b + 13), PH4(b + 14), PH4(b + 15)
static const uint8_t perf_hdr[256] = {PH16(0),   PH16(16),  PH16(32),  PH16(48),
                                      PH16(64),  PH16(80),  PH16(96),  PH16(112),
                                      PH16(128), PH16(144), PH16(160), PH16(176),
                                      PH16(192), PH16(208), PH16(224), PH16(240)};
#undef PH16
#undef PH4

/* Slot @rec of @s may get n_ext or WPP fields other than 0 (s->dirty). */
static inline void slot_dirty(struct stream *s, const struct etw_rec *rec) {
  size_t i = (size_t)(rec - s->slots);
  s->dirty[i >> 6] |= (uint64_t)1 << (i & 63);
}

/* The dirty slots' n_ext and WPP fields back to 0 (s->dirty). */
ETL_NOINLINE void slots_clean(struct stream *s) {
  for (unsigned w = 0; w < sizeof s->dirty / sizeof s->dirty[0]; w++)
    for (uint64_t m = s->dirty[w]; m; m &= m - 1) {
#if ETW_GNUC
      unsigned b = (unsigned)etw_ctz64(m);
#else
      unsigned b = 0;
      while (!(m >> b & 1)) b++;
#endif
      struct etw_rec *x = &s->slots[w * 64 + b];
      x->n_ext = 0;
      x->wpp_msg_number = x->wpp_flags = 0;
      x->wpp_sequence = 0;
      x->cpu = s->cpu;
    }
  memset(s->dirty, 0, sizeof s->dirty);
}

/* An EVENT_HEADER's extended data items (parse_ext) into slot @rec of @s (marked dirty): the
 * header size after them, 0 on a malformed item. Out of the record loop (gcc kept a register
 * less for the loop with it inline). */
ETL_NOINLINE uint32_t ext_items(struct stream *s, struct etw_rec *rec, const unsigned char *p, uint32_t size) {
  slot_dirty(s, rec);
  uint32_t hdr = 0x50;
  if (parse_ext(rec, p, size, &hdr)) return 0;
  return hdr;
}

/* Parse the record at the address *@pa (an integer: the last record's padding may take it up to
 * 7 past the payload's end @pe, which a pointer may not) into @rec (a slot of @s: the one before
 * it, or s->last_ts, has the previous record); 1 = got one (*@pa moves past it and its
 * padding), 0 = end of buffer, -1 = damage (nothing moves). @pe8 is @pe - 8. A record fits
 * when a + size ≤ pe (no wrap: a and size are small next to the address space's end). The fast
 * paths leave cpu, n_ext and the WPP fields as the slot holds them (0 but in dirty slots:
 * s->dirty); parse_generic and parse_ext mark the slot dirty. */
ETL_INLINE int parse_one(struct stream *s, struct etw_rec *rec, uintptr_t *pa, uintptr_t pe,
                         uintptr_t pe8, int ft_unit, uint64_t ft_base, int generic,
                         struct pmemo *pm, int slack) {
  uintptr_t a = *pa;
  /* (fewer than 8 bytes left: the end. With @slack the 8 bytes are read anyway — a ≤ pe + 7, the
   * slack covers them — and the test waits for a failed path: every fast path needs at least 16
   * bytes, so it fails there, and PFAIL returns 0 instead of -1) */
  if (!slack && a > pe8) return 0;
#define PFAIL return slack && a + 8 > pe ? 0 : -1 /* (pe8 in no register) */
  const unsigned char *p = (const unsigned char *)a;
  uint64_t h0 = rd64(p);
  uint32_t m = (uint32_t)h0;
  unsigned char *rb = (unsigned char *)rec;
  uint32_t size, hdr;
  int64_t ts;
  /* (the header types 0x10/0x11 and 0x12/0x13: 32/64-bit by the type's low bit, bit 16) */
  if (ETL_REC_LAYOUT && h0 == pm->h0 && !generic) {
    /* a PERFINFO record with the memo's first 8 bytes: its header checks passed already */
    size = pm->size;
    if (a + size > pe) PFAIL;
  perf_memo:
    if (rec->kind != ETW_REC_PERFINFO) { /* else these are as a PERFINFO record leaves them */
      st64(rb + 8, UINT64_MAX); /* tid, pid */
      st64(rb + 24, 0);         /* provider */
      st64(rb + 32, 0);
      st64(rb + 48, 0);         /* keyword */
      st64(rb + 56, 0);         /* kernel, user time */
      st64(rb + 64, 0);         /* activity id */
      st64(rb + 72, 0);
    }
    st64(rb, pm->head);
    ts = (int64_t)ld64(p + 8);
    st64(rb + 16, (uint64_t)ts);
    st64(rb + 40, pm->desc);
    rec->user_data = p + pm->hdr;
    rec->user_len = pm->len;
    rec->filetime = ft_unit ? ft_base + (uint64_t)ts : etl_to_filetime(s->f, ts);
    *pa = a + pm->adv;
    return 1;
  } else if (ETL_REC_LAYOUT && (m & 0xC0FE0000u) == 0xC0120000u && !generic) {
    /* (tested before a PERFINFO memo miss: more frequent on net.etl, 68 K against 26 K a pass) */
    /* EVENT_HEADER: 0 size, 4 flags, 6 property, 8 tid, pid, timestamp, provider, descriptor,
     * kernel and user time, activity id: bytes 8..80 as the record head's (etl.h) */
    hdr = 0x50;
    size = m & 0xFFFF;
    if (size < hdr || a + size > pe) PFAIL;
    uint32_t flags = (uint32_t)(h0 >> 32) & 0xFFFF;
    /* kind, pointer size 4 or 8, flags | 32/64_BIT_HEADER, property */
    static const uint64_t ev_head[2] = {
        ETW_REC_EVENT | 4 << 8 | (uint64_t)ETW_EVH_32_BIT_HEADER << 16,
        ETW_REC_EVENT | 8 << 8 | (uint64_t)ETW_EVH_64_BIT_HEADER << 16};
    uint64_t h16 = h0 >> 16; /* type, marker, flags, property */
    uint64_t head = pm->ehead;
    if (ETL_UNLIKELY(h16 != pm->ekey)) { /* (a stream's EVENT_HEADER records mostly share them) */
      head = (h16 & ~(uint64_t)0xFFFF) | ev_head[h16 & 1];
      pm->ekey = h16;
      pm->ehead = head;
    }
    st64(rb, head);
    /* tid, pid, timestamp, provider, descriptor, kernel and user time, activity id: one block */
    memcpy(rb + 8, p + 8, 64);
    st64(rb + 72, ld64(p + 72));
    ts = (int64_t)ld64(p + 16);
    /* (cpu, n_ext = 0 and the WPP fields as the slot holds them: s->dirty) */
    if (flags & ETW_EVH_EXTENDED_INFO) {
      if (!(hdr = ext_items(s, rec, p, size))) PFAIL;
    } else {
      /* (the header's size a constant: gcc keeps no register for it) */
      rec->user_data = p + 0x50;
      rec->user_len = size - 0x50;
      goto done;
    }
  } else if (ETL_REC_LAYOUT && (m & 0xC0FE0000u) == 0xC0100000u && !generic) {
    /* PERFINFO: 2 version (high byte: extension bits), 4 size, 6 HookId, 8 timestamp */
    size = (uint32_t)(h0 >> 32) & 0xFFFF;
    hdr = perf_hdr[(m >> 8) & 0xFF]; /* 0x10 + 8 × (bit 15 + bits 8..10) */
    if (hdr > size || a + size > pe) PFAIL; /* (hdr ≥ 0x10) */
    uint64_t hk = h0 & 0xFFFF000000000000ull; /* HookId << 48 */
    pm->h0 = h0;
    pm->size = size;
    pm->hdr = hdr;
    /* kind, pointer size 4 or 8 (by bit 16), HookId */
    pm->head = hk + ((m >> 6) & 0x400) + (ETW_REC_PERFINFO | 4 << 8);
    pm->desc = (h0 & 0xFF) << 16 | hk >> 8; /* version (low byte); opcode, task = HookId */
    pm->len = size - hdr;
    pm->adv = (size + 7) & ~7u;
    goto perf_memo;
  } else if (ETL_REC_LAYOUT && (m & 0xC0000000u) == 0xC0000000u && ((m >> 16) & 0xFF) < 0x16 &&
             ((0x300C1Eu >> ((m >> 16) & 0xFF)) & 1) && !generic) {
    /* SYSTEM / COMPACT (types 1..4) and FULL / INSTANCE (0x0A, 0x0B, 0x14, 0x15): every field as
     * parse_generic sets it, the others zero */
    unsigned type = (m >> 16) & 0xFF;
    if (type <= 4) {
      /* 2 version (high byte: extension bits), 4 size, 6 HookId, 8 tid, pid, 0x10 timestamp,
       * SYSTEM (1, 2): 0x18 kernel and user time */
      size = (uint32_t)(h0 >> 32) & 0xFFFF;
      hdr = perf_hdr[(m >> 8) & 0xFF] + (type <= 2 ? 0x10 : 0x08); /* 0x20 / 0x18 + extensions */
      if (hdr > size || a + size > pe) PFAIL;
      uint64_t hk = h0 & 0xFFFF000000000000ull; /* HookId << 48 */
      st64(rb, hk | ETW_REC_SYSTEM | (uint64_t)((type & 1) ? 4 : 8) << 8);
      memcpy(rb + 8, p + 8, 16); /* tid, pid, timestamp */
      st64(rb + 24, 0);          /* provider */
      st64(rb + 32, 0);
      st64(rb + 40, (h0 & 0xFF) << 16 | hk >> 8); /* version (low byte); opcode, task = HookId */
      st64(rb + 56, type <= 2 ? ld64(p + 0x18) : 0); /* kernel, user time (hdr ≥ 0x20) */
    } else {
      /* 0 size, 4 class type, 5 level, 6 version, 8 tid, pid, 0x10 timestamp, 0x18 class GUID,
       * 0x28 kernel and user time */
      hdr = (type & 1) ? 0x48 : 0x30;
      size = m & 0xFFFF;
      if (size < hdr || a + size > pe) PFAIL;
      st64(rb, ETW_REC_CLASSIC | (uint64_t)(type < 0x10 ? 4 : 8) << 8 | (uint64_t)ETW_EVH_CLASSIC_HEADER << 16);
      memcpy(rb + 8, p + 8, 16);     /* tid, pid, timestamp */
      memcpy(rb + 24, p + 0x18, 16); /* class GUID */
      /* version (low byte), level, opcode = class type */
      st64(rb + 40, (h0 >> 48 & 0xFF) << 16 | (h0 >> 40 & 0xFF) << 32 | (h0 >> 32 & 0xFF) << 40);
      st64(rb + 56, ld64(p + 0x28)); /* kernel, user time */
    }
    ts = (int64_t)ld64(p + 16);
    st64(rb + 48, 0); /* keyword */
    st64(rb + 64, 0); /* activity id */
    st64(rb + 72, 0);
  } else {
    if (slack && a + 8 > pe) return 0;
    if (m == 0xFFFFFFFFu) return 0; /* no more records */
    slot_dirty(s, rec);
    /* (the time of the stream's previous record: a WPP record without its own takes it) */
    int k = parse_generic(s->f, s, rec, p, (uint32_t)(pe - a), m, rec > s->slots ? rec[-1].timestamp : s->last_ts);
    if (k < 0) return -1;
    size = (uint32_t)k;
    ts = rec->timestamp;
    goto done;
  }
  rec->user_data = p + hdr;
  rec->user_len = size - hdr;
done:
  rec->filetime = ft_unit ? ft_base + (uint64_t)ts : etl_to_filetime(s->f, ts);
  *pa = a + ((size + 7) & ~7u); /* (a + size ≤ pe) */
  return 1;
#undef PFAIL
}

/* Parse the next batch of stream @s's records into its slots, loading its next buffers as
 * needed; 1 = s->cur is the first of them, 0 = exhausted (its memory given back). A batch ends
 * at the end of a buffer or before a bad record, which is found again (and reported) by the
 * next batch, when the records before it were delivered. */
ETL_NOINLINE int fill(struct etw_etl_reader *r, struct stream *s) {
  if (!s->slots) {
    size_t sz = (ETL_BATCH + 1) * sizeof *s->slots;
    /* (not zeroed: every field a record path reads is written below or by the parse — the
     * kind for the PERFINFO memo path's test; ext[] only below n_ext — and calloc's memset of
     * the 26 KB was 1.2 instructions per event on net.etl) */
    if (r->mem + sz > ETW_ETL_MAX_MEMORY || !(s->slots = malloc(sz))) {
      etl_set_damage(r, s->file, s->buf_off, "records over the memory limit");
      s->cur = s->lim = NULL;
      return s->has = 0;
    }
    r->mem += sz;
    for (uint32_t i = 0; i <= ETL_BATCH; i++) {
      s->slots[i].kind = ETW_REC_SYSTEM; /* (not PERFINFO: its memo path writes every field) */
      s->slots[i].n_ext = 0;
      s->slots[i].wpp_msg_number = s->slots[i].wpp_flags = 0;
      s->slots[i].wpp_sequence = 0;
      s->slots[i].file = &s->f->info;
      s->slots[i].file_index = s->file;
      s->slots[i].stream = (uint32_t)(s - r->st);
      s->slots[i].cpu = s->cpu;
      s->slots[i].file_offset = s->buf_off;
    }
    s->slots_off = s->buf_off;
    memset(s->dirty, 0, sizeof s->dirty);
  }
  for (;;) {
    /* (also after a batch that failed at its first record: that slot may be dirty) */
    if (ETL_UNLIKELY(s->dirty[0] | s->dirty[1] | s->dirty[2])) slots_clean(s);
    int k = 0;
    struct etw_rec *rec = s->slots;
    struct etw_rec *end = rec + (etw_etl_batch_max - 1 < ETL_BATCH ? etw_etl_batch_max : ETL_BATCH);
    if (s->pay_len) {
      /* (pos may lie up to 7 past pay_len) */
      uintptr_t a = (uintptr_t)s->data + s->pos, pe = (uintptr_t)s->data + s->pay_len, pe8 = pe - 8;
      uint64_t ft_base = s->ft_base;
      if (s->slots_off != s->buf_off) { /* a new buffer */
        s->slots_off = s->buf_off;
#if ETW_GNUC && !defined(__clang__)
#pragma GCC unroll 8
#endif
        for (uint32_t i = 0; i < ETL_BATCH; i++) s->slots[i].file_offset = s->buf_off;
      }
      /* (one loop per clock kind: the test is out of the loop) */
      if (r->generic) { /* reference mode: parse_generic for every record */
        int unit = s->ft_unit;
        while ((k = parse_one(s, rec, &a, pe, pe8, unit, ft_base, 1, &s->pm, 0)) == 1 && ++rec < end) {
        }
      } else if (s->ft_unit) { /* (ETL_SLACK bytes after every buffer's records: load_buffer) */
        while ((k = parse_one(s, rec, &a, pe, pe8, 1, ft_base, 0, &s->pm, 1)) == 1 && ++rec < end) {
        }
      } else {
        while ((k = parse_one(s, rec, &a, pe, pe8, 0, ft_base, 0, &s->pm, 1)) == 1 && ++rec < end) {
        }
      }
      s->pos = (uint32_t)(a - (uintptr_t)s->data);
      if (rec > s->slots) {
        s->last_ts = rec[-1].timestamp;
        s->cur = s->slots;
        s->lim = rec;
        rec->filetime = UINT64_MAX; /* the slot after the last: ends a run in next_batch */
        return s->has = 1;
      }
    }
    if (k < 0) {
      char msg[96];
      snprintf(msg, sizeof msg, "bad record at payload offset 0x%x of the buffer", (unsigned)s->pos + BH);
      etl_set_damage(r, s->file, s->buf_off, msg);
    }
    s->pay_len = 0;
    if (etl_load_buffer(r, s)) { /* exhausted: give its memory back */
      r->mem -= s->pay_cap + (ETL_BATCH + 1) * sizeof *s->slots;
      free(s->pay);
      s->pay = NULL;
      s->pay_cap = 0;
      free(s->slots);
      s->slots = s->cur = s->lim = NULL;
      return s->has = 0;
    }
  }
}

static int before(const struct etw_etl_reader *r, uint32_t a, uint32_t b) {
  const struct etw_rec *x = r->st[a].cur, *y = r->st[b].cur;
  if (x->filetime != y->filetime) return x->filetime < y->filetime;
  if (r->st[a].file == r->st[b].file && x->timestamp != y->timestamp) return x->timestamp < y->timestamp;
  return a < b;
}

/* @a before @b, an exhausted stream (LT_NONE) after every other. */
static inline int lt_before(const struct etw_etl_reader *r, uint32_t a, uint32_t b) {
  if (b == LT_NONE) return a != LT_NONE;
  if (a == LT_NONE) return 0;
  return before(r, a, b);
}

/* The least record time of the losers on the winner's path: a winner whose next record is
 * earlier than this stays the winner without a replay (equal times take the full rule). */
static void set_runner(struct etw_etl_reader *r) {
  uint64_t m = UINT64_MAX;
  uint32_t w = r->tree[0];
  if (w != LT_NONE)
    for (uint32_t n = r->leaf[w] >> 1; n >= 1; n >>= 1)
      if (r->tft[n] < m) m = r->tft[n];
  r->runner_ft = m;
}

/* Stream @w (the winner) has a new record, or is exhausted (@cur = LT_NONE): replay its matches
 * up to the root. The node times decide unless equal; equal times take the full rule. */
static void replay(struct etw_etl_reader *r, uint32_t w, uint32_t cur) {
  uint32_t *t = r->tree;
  uint64_t *tf = r->tft;
  uint64_t cf = cur == LT_NONE ? UINT64_MAX : r->st[cur].cur->filetime, m = UINT64_MAX;
  for (uint32_t n = r->leaf[w] >> 1; n >= 1; n >>= 1) {
    uint64_t xf = tf[n];
    if (xf < cf || (xf == cf && lt_before(r, t[n], cur))) {
      uint32_t x = t[n];
      t[n] = cur;
      tf[n] = cf;
      cur = x;
      cf = xf;
      xf = tf[n];
    }
    if (xf < m) m = xf;
  }
  t[0] = cur;
  if (cur == w) r->runner_ft = m; /* the same path */
  else set_runner(r);
}

/* Build the tree over the streams that have a record (leaves in stream order). */
static void build_tree(struct etw_etl_reader *r) {
  uint32_t P = r->lt_p, k = 0, *t = r->tree, *wn = r->tree + P; /* wn[n]: winner of node n (2P) */
  for (uint32_t i = 0; i < r->n_st; i++)
    if (r->st[i].has) {
      r->leaf[i] = P + k;
      wn[P + k++] = i;
    }
  while (k < P) wn[P + k++] = LT_NONE;
  for (uint32_t n = P; n-- > 1;) {
    uint32_t a = wn[2 * n], b = wn[2 * n + 1];
    if (lt_before(r, b, a)) {
      wn[n] = b;
      t[n] = a;
    } else {
      wn[n] = a;
      t[n] = b;
    }
    r->tft[n] = t[n] == LT_NONE ? UINT64_MAX : r->st[t[n]].cur->filetime;
  }
  t[0] = wn[1]; /* P == 1: the only leaf, wn[1] */
  set_runner(r);
}

/* The sorted list over the streams that have a record (ties by the full rule, stream order). */
static void build_list(struct etw_etl_reader *r) {
  struct lent *l = r->lst;
  uint32_t c = 1;
  l[0].c = NULL; /* the sentinels: before and after every record */
  l[0].key = 0;
  for (uint32_t i = 0; i < r->n_st; i++) {
    if (!r->st[i].has) continue;
    uint32_t j = c++;
    for (; j > 1 && before(r, i, l[j - 1].c->stream); j--) l[j] = l[j - 1];
    l[j].c = r->st[i].cur;
    l[j].key = r->st[i].cur->filetime;
  }
  l[c].c = NULL;
  l[c].key = UINT64_MAX;
  r->lh = l + 1;
  r->le = l + c;
  r->llast = l + r->ocap - 1;
  r->lkey = c > 1 ? l[2].key : UINT64_MAX; /* ([c] is the end sentinel) */
}

/* List: the front stream leaves (exhausted, or to be put back by list_sift). The entries slide
 * up by one per record that moves; near the end of the array they are moved back to 0. */
static inline void list_pop(struct etw_etl_reader *r) {
  struct lent *head = r->lh, *end = r->le;
  if (end >= r->llast) { /* (end + 2 > ocap) */
    size_t n = (size_t)(end + 1 - (head - 1));
    memmove(r->lst, head - 1, n * sizeof *r->lst);
    r->le = end - (head - 1 - r->lst);
    head = r->lst + 1;
  }
  head->c = NULL; /* the front sentinel */
  head->key = 0;
  r->lh = head + 1;
}

/* before() by the records (the list's entries: the streams' current records). */
static inline int before_rec(const struct etw_rec *x, const struct etw_rec *y) {
  if (x->filetime != y->filetime) return x->filetime < y->filetime;
  if (x->file_index == y->file_index && x->timestamp != y->timestamp) return x->timestamp < y->timestamp;
  return x->stream < y->stream;
}

/* List: the front entry's stream with its current record (an entry's; a stream's cur is kept
 * only while it is in front), or NULL when the list is empty. */
static inline struct stream *list_front(struct etw_etl_reader *r) {
  if (r->lh >= r->le) return NULL; /* (the end sentinel's c is not kept) */
  struct etw_rec *c = r->lh->c;
  struct stream *t = &r->st[c->stream];
  t->cur = c;
  return t;
}

/* List: put stream @w (just popped) back with its next record (key @k), searching from the
 * back (a stream's next record usually comes after most of the others'). */
static inline void list_sift(struct etw_etl_reader *r, struct stream *w, uint64_t k) {
  struct lent *l = r->lst;
  uint32_t end = (uint32_t)(r->le - l), i = end - 1;
  for (;; i--) {
    uint64_t x = l[i].key;
    if (x < k) break;
    if (x == k && (!l[i].c || before_rec(l[i].c, w->cur))) break;
    l[i + 1] = l[i];
  }
  l[i + 1].c = w->cur;
  l[i + 1].key = k;
  l[end + 1].c = NULL;
  l[end + 1].key = UINT64_MAX;
  r->le = l + end + 1;
}

/* next_ref when the last record's stream has no parsed record left or no longer comes first,
 * and the first and last calls. */
static int list_move(struct etw_etl_reader *r, struct stream *w, uint64_t k, const struct etw_rec **rec);

ETL_NOINLINE int next_slow(struct etw_etl_reader *r, const struct etw_rec **rec, struct etw_status *st) {
  struct stream *s = r->last_s, *top;
  if (s) {
    int more = 1;
    struct etw_rec *c = s->cur + 1;
    if (c < s->lim) s->cur = c;
    else more = fill(r, s);
    r->last_s = NULL;
    if (r->list) {
      if (!more) {
        list_pop(r);
        top = list_front(r);
      } else if (s->cur->filetime >= r->lh[1].key) {
        return list_move(r, s, s->cur->filetime, rec); /* (= list_pop + list_sift) */
      } else {
        top = s; /* (still in front) */
      }
      r->lkey = top ? r->lh[1].key : UINT64_MAX;
    } else {
      uint32_t w = (uint32_t)(s - r->st);
      if (!more) replay(r, w, LT_NONE);
      else if (s->cur->filetime >= r->runner_ft) replay(r, w, w);
      top = r->tree[0] == LT_NONE ? NULL : &r->st[r->tree[0]];
    }
  } else {
    if (!r->started) {
      r->started = 1;
      if (etl_build_streams(r, st)) return -1;
      for (uint32_t i = 0; i < r->n_st; i++) fill(r, &r->st[i]);
      if (r->list) build_list(r);
      else build_tree(r);
    }
    if (!r->tree) top = NULL;
    else if (r->list) top = list_front(r);
    else top = r->tree[0] == LT_NONE ? NULL : &r->st[r->tree[0]];
  }
  if (!top) {
    if (r->err_set) {
      if (st) *st = r->err;
      return -1;
    }
    return 0;
  }
  r->last_s = top;
  *rec = top->cur;
  return 1;
}

/* list_move's general case: ties (the full rule) and the arrays' compaction. */
ETL_NOINLINE int list_move_slow(struct etw_etl_reader *r, struct stream *w, uint64_t k,
                                const struct etw_rec **rec) {
  list_pop(r);
  list_sift(r, w, k);
  r->lkey = r->lh[1].key;
  struct stream *top = list_front(r);
  r->last_s = top;
  *rec = top->cur;
  return 1;
}

/* list_move's end: the entries from @q up slide one up, @w (key @k) goes to @q; the front
 * stream (the one after the sentinel at head) gives the next record. */
static inline int list_insert(struct etw_etl_reader *r, struct stream *w, uint64_t k,
                              const struct etw_rec **rec, struct lent *q) {
  struct lent *head = r->lh, *end = r->le, *e = end;
  for (; e > q; e--) e[0] = e[-1];
  q->key = k;
  q->c = w->cur;
  end[1].key = UINT64_MAX; /* (its c is not kept: next_slow tests lh < le) */
  r->le = end + 1;
  r->lh = head + 1;
  r->lkey = head[2].key;
  struct etw_rec *c = head[1].c;
  struct stream *top = &r->st[c->stream];
  top->cur = c;
  r->last_s = top;
  *rec = c;
  return 1;
}

/* list_move when @w's key @k equals the key before @q: the search goes on by the full rule
 * (as list_sift: past the entries of that key that @w comes before). */
#if ETW_GNUC && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
ETL_NOINLINE int list_move_tie(struct etw_etl_reader *r, struct stream *w, uint64_t k,
                               const struct etw_rec **rec, struct lent *q) {
  while (q[-1].key == k && q[-1].c && !before_rec(q[-1].c, w->cur)) q--;
  return list_insert(r, w, k, rec, q);
}

/* List: the front stream @w, whose next record (key @k) is not before the runner-up's, goes
 * back in its place (list_pop + list_sift); the new front stream's record is the next one
 * (*@rec, r->last_s; returns 1) and r->lkey its runner-up's time. A leaf: the place is
 * searched from the back first; an equal key goes on in list_move_tie, a full array to
 * list_move_slow, both before anything moved but the front sentinel. */
#if ETW_GNUC && !defined(__clang__)
/* (the shift loop moves ~1.3 entries: not a memmove call) */
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
ETL_NOINLINE int list_move(struct etw_etl_reader *r, struct stream *w, uint64_t k,
                           const struct etw_rec **rec) {
  struct lent *head = r->lh, *q = r->le;
  if (q >= r->llast) return list_move_slow(r, w, k, rec); /* (end + 2 > ocap) */
  head->c = NULL; /* the front sentinel (list_pop writes the same) */
  head->key = 0;
  uint64_t x;
  while ((x = q[-1].key) > k) q--; /* stops at the sentinel at the latest */
  if (x == k) return list_move_tie(r, w, k, rec, q);
  return list_insert(r, w, k, rec, q);
}

int etw_etl_reader_next_ref(struct etw_etl_reader *r, const struct etw_rec **rec, struct etw_status *st) {
  struct stream *s = r->last_s;
  if (s) {
    /* the same stream's next parsed record: it stays in front while before the runner-up's
     * (lkey; 0 with the tree, which next_slow runs); else the list moves it (equal times take
     * the full rule in list_move) */
    struct etw_rec *c = s->cur + 1;
    if (c < s->lim) {
      uint64_t k = c->filetime;
      if (k < r->lkey) {
        s->cur = c;
        *rec = c;
        return 1;
      }
      if (r->list) {
        s->cur = c;
        return list_move(r, s, k, rec);
      }
    }
  }
  return next_slow(r, rec, st);
}

/* next_batch's switch when @w's key @k equals the key before the hole @q (the entries after it
 * moved up): the search goes on by the full rule as in list_move_tie, moving the entries @w
 * comes before; returns @w's place. */
#if ETW_GNUC && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
ETL_NOINLINE struct lent *list_tie_hole(const struct etw_rec *wc, uint64_t k, struct lent *q) {
  for (const struct etw_rec *xc; q[-1].key == k && (xc = q[-1].c) != NULL; q--) {
    /* before_rec(xc, wc) with equal times (the keys are the records' times): the same file's
     * timestamps if they differ, else the stream order */
    if (xc->file_index == wc->file_index && xc->timestamp != wc->timestamp ? xc->timestamp < wc->timestamp
                                                                           : xc->stream < wc->stream)
      break;
    q[0] = q[-1];
  }
  return q;
}

/* Up to @max records: the first as next_ref gives it (that call may parse, load, report the
 * end or the damage), then, while the front stream has parsed records left, its run of records
 * before the runner-up's time (lk: one compare each; the slot after a batch's last record holds
 * UINT64_MAX, which ends the run), a switch of streams as list_move does it (the list's head,
 * end and lk in registers; ties and the compaction through list_move_tie / list_move_slow with
 * the state written back), and the next run; the tree takes a record at a time as next_slow
 * does. It stops where next_ref would parse or load a buffer (that would overwrite records
 * already handed out), so the records handed out are exactly next_ref's, in the same order,
 * and the end or the damage comes in a later call. */

#if ETW_GNUC && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
ETL_INLINE int next_batch(struct etw_etl_reader *r, const struct etw_rec **recs, size_t max,
                          struct etw_status *st) {
  int k = etw_etl_reader_next_ref(r, recs, st);
  if (k != 1) return k;
  const struct etw_rec **o = recs + 1, **oe = recs + (max < 2 ? 1 : max < (1u << 30) ? max : 1u << 30);
  if (o == oe) return 1;
  struct stream *s = r->last_s;
  struct etw_rec *c = s->cur + 1;
  if (!r->list) {
    while (c < s->lim) {
      s->cur = c;
      if (c->filetime >= r->runner_ft) {
        uint32_t w = (uint32_t)(s - r->st);
        replay(r, w, w);
        s = &r->st[r->tree[0]]; /* (w has a record: not LT_NONE) */
        r->last_s = s;
      }
      *o++ = s->cur;
      if (o == oe) break;
      c = s->cur + 1;
    }
    return (int)(o - recs);
  }
  struct lent *head = r->lh, *end = r->le;
  /* (a switch moves end up by one; each needs end < llast, as list_move checks: the batch
   * ends before that. So that it need not, the live entries move back to the array's start
   * first when fewer places are left than records asked for, as list_pop does it — else
   * the batches before list_move_slow's compaction got ever shorter and took the bounded
   * loop below) */
  if (oe - o > r->llast - end && head - 1 > r->lst) {
    size_t n = (size_t)(end + 1 - (head - 1));
    memmove(r->lst, head - 1, n * sizeof *r->lst);
    end -= head - 1 - r->lst;
    head = r->lst + 1;
    r->lh = head;
    r->le = end;
  }
  if (oe - o > r->llast - end) oe = o + (r->llast - end);
  if (o == oe) return 1;
  uint64_t lk = r->lkey, kk;
  /* the switch: list_move with head, end and lk in registers, the entries after the new place
   * moved up while it is searched. It stops at head + 1 at the latest (its key is lk, ≤ kk), or
   * at end when that is head + 1 (lk = kk = UINT64_MAX), so the front sentinel is written only
   * for the tie rule's search. Then the new front stream's record is handed out. */
#define ETL_SWITCH(sent)                                     \
  do {                                                       \
    uint64_t x = end[-1].key;                                \
    if (x < kk) { /* (the last place: nothing moves) */      \
      end->key = kk;                                         \
      end->c = c;                                            \
    } else {                                                 \
      struct lent *q = end;                                  \
      if (x > kk) {                                          \
        ETL_SHIFT();                                         \
        x = q[-1].key;                                       \
      }                                                      \
      if (x == kk) {                                         \
        head->c = NULL; /* the front sentinel */             \
        head->key = 0;                                       \
        q = list_tie_hole(c, kk, q);                         \
      }                                                      \
      q->key = kk;                                           \
      q->c = c;                                              \
    }                                                        \
    if (sent) end[1].key = UINT64_MAX; /* (s not kept) */    \
    end++;                                                   \
    head++;                                                  \
    lk = head[1].key;                                        \
    c = head->c;                                             \
    *o = c;                                                  \
    o++;                                                     \
    c++;                                                     \
  } while (0)
  /* the entries from q down move up by one while the one below has a later key than kk (the
   * first one has) */
#define ETL_SHIFT()                                                                    \
  do {                                                                                 \
    q[0] = q[-1];                                                                      \
    q--;                                                                               \
  } while (q[-1].key > kk)
  /* c is its stream's s->lim (kk: its time; a record's own time may be UINT64_MAX too) */
#define ETL_AT_LIM() (kk == UINT64_MAX && c == r->st[c->stream].lim)
  /* While more than ETL_BATCH + 1 entries are left, a run and the switch's record need no
   * bound: a run ends at s->lim at the latest (its time is UINT64_MAX), at most ETL_BATCH
   * records on. */
  /* (with two streams or more in the list a switch leaves head + 1 before end, so lk never
   * reads the end sentinel: the unbounded loop writes it once, at out) */
  if (oe - o > ETL_BATCH + 1 && end - head >= 2) {
    const struct etw_rec **of = oe - (ETL_BATCH + 1);
    do {
      if ((kk = c->filetime) < lk) /* the run */
        do
          *o++ = c++;
        while ((kk = c->filetime) < lk);
      if (ETL_AT_LIM()) goto out;
      ETL_SWITCH(0);
    } while (o < of);
  }
  for (;;) {
    while ((kk = c->filetime) < lk) { /* the run, bounded */
      *o++ = c++;
      if (o == oe) goto out;
    }
    if (ETL_AT_LIM()) goto out;
    ETL_SWITCH(1);
    if (o == oe) goto out;
  }
#undef ETL_SWITCH
#undef ETL_SHIFT
#undef ETL_AT_LIM
out:
  end->key = UINT64_MAX; /* the end sentinel (its c not kept) */
  s = &r->st[c[-1].stream]; /* (c - 1: the front stream's record handed out last) */
  s->cur = c - 1;
  r->last_s = s;
  r->lh = head;
  r->le = end;
  r->lkey = lk;
  return (int)(o - recs);
}

int etw_etl_reader_next_batch(struct etw_etl_reader *r, const struct etw_rec **recs, size_t max,
                              struct etw_status *st) {
  return next_batch(r, recs, max, st);
}

int etw_etl_reader_next(struct etw_etl_reader *r, struct etw_rec *rec, struct etw_status *st) {
  const struct etw_rec *p;
  int k = etw_etl_reader_next_ref(r, &p, st);
  if (k == 1) *rec = *p;
  return k;
}

