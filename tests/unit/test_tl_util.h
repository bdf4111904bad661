/* test_tl_util.h — helpers shared by the decoder unit tests that build events byte for byte
 * (test_decode_tl.c, test_dec_chararray.c, test_dec_tdhchars.c): a little-endian byte buffer,
 * TraceLogging field metadata, an EVENT_RECORD mirror with the usual header, and one decode.
 */
#ifndef TEST_TL_UTIL_H
#define TEST_TL_UTIL_H

#include <stdint.h>
#include <string.h>

#include "decode.h"

/* a payload, metadata or TDH blob under construction (the tests' inputs are well below this) */
struct buf {
  unsigned char b[8192];
  size_t n;
};
static inline void put(struct buf *b, const void *p, size_t n) {
  memcpy(b->b + b->n, p, n);
  b->n += n;
}
static inline void u8(struct buf *b, unsigned v) { b->b[b->n++] = (unsigned char)v; }
static inline void u16(struct buf *b, unsigned v) {
  u8(b, v & 255);
  u8(b, v >> 8);
}
static inline void u32(struct buf *b, uint32_t v) {
  u16(b, v & 0xFFFF);
  u16(b, v >> 16);
}
static inline void u64(struct buf *b, uint64_t v) {
  u32(b, (uint32_t)v);
  u32(b, (uint32_t)(v >> 32));
}
/* @s with its NUL */
static inline void str(struct buf *b, const char *s) { put(b, s, strlen(s) + 1); }
/* ASCII @s as UTF-16 units (no terminator) */
static inline void w16(struct buf *b, const char *s) {
  for (; *s; s++) u16(b, (unsigned char)*s);
}
/* ASCII @s as UTF-16 units with a NUL */
static inline void wstr(struct buf *b, const char *s) {
  w16(b, s);
  u16(b, 0);
}
/* a TraceLogging field: name, InType byte (with the chain bit when @out ≥ 0), OutType */
static inline void field(struct buf *m, const char *name, unsigned in, int out) {
  str(m, name);
  if (out >= 0) {
    u8(m, in | 0x80);
    u8(m, (unsigned)out);
  } else {
    u8(m, in);
  }
}

/* an event record of pid 100 / tid 200, level 4, 64-bit header and pointers */
static inline void init_rec(struct etw_rec *r) {
  memset(r, 0, sizeof *r);
  r->kind = ETW_REC_EVENT;
  r->ptr_size = 8;
  r->flags = ETW_EVH_64_BIT_HEADER;
  r->pid = 100;
  r->tid = 200;
  r->filetime = 132754283728578510ULL;
  r->desc.level = 4;
}

/* @r decoded into @w (emptied first); *ok is etw_decoder_write's answer */
static inline const char *decode(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, int *ok) {
  w->len = 0;
  struct etw_evref ref;
  *ok = etw_decoder_write(d, r, w, &ref);
  return etw_jw_cstr(w);
}

#endif
