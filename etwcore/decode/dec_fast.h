/* dec_fast.h — small inline writers for the compiled field plans of the template walker
 * (dec_man.c), and its test hooks. Not a public API.
 *
 * The writers put text at a pointer the caller has made room for (no reservation, no error
 * state); each gives the same text as decode.h's dec_put_hex / dec_put_u64.
 */
#ifndef ETWCORE_DEC_FAST_H
#define ETWCORE_DEC_FAST_H

#include <stdint.h>
#include <string.h>

#include "decode.h"

/* The hex digits of @v (lower case, no leading zeros, at least one) and a closing quote at @o,
 * which must have 24 bytes of room (16 digits are stored whatever the count); returns the end.
 * The `"0x` before is the caller's. */
static inline char *fx_hex_tail(char *o, uint64_t v) {
  unsigned c = (unsigned)__builtin_clzll(v | 1) & 60u; /* leading zero digits × 4 */
  unsigned nd = 16u - (c >> 2);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t t = v << c; /* the significant digits first */
#if defined(__SSE2__)
  uint64_t be = __builtin_bswap64(t);
  __m128i x = _mm_loadl_epi64((const __m128i *)(const void *)&be);
  const __m128i m = _mm_set1_epi8(0x0F);
  __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
  __m128i adj = _mm_and_si128(_mm_cmpgt_epi8(nib, _mm_set1_epi8(9)), _mm_set1_epi8('a' - '0' - 10));
  nib = _mm_add_epi8(nib, _mm_add_epi8(adj, _mm_set1_epi8('0')));
  _mm_storeu_si128((__m128i *)(void *)o, nib);
#else
  uint64_t a = dec_hex8((uint32_t)(t >> 32)), b = dec_hex8((uint32_t)t);
  memcpy(o, &a, 8);
  memcpy(o + 8, &b, 8);
#endif
#else
  static const char X[] = "0123456789abcdef";
  for (unsigned i = nd; i-- > 0; v >>= 4) o[i] = X[v & 15];
#endif
  o[nd] = '"';
  return o + nd + 1;
}

/* "0x…" with both quotes at @o (24 bytes of room); returns the end. */
static inline char *fx_hex(char *o, uint64_t v) {
  memcpy(o, "\"0x", 4); /* the 4th byte is overwritten */
  return fx_hex_tail(o + 3, v);
}

/* Test hook (dec_man.c): 0 = the walker only, 1 = compiled plans where a schema has one (the
 * default). Returns the previous setting. */
int dec_plan_enable(int on);
/* Test hook: how many times a plan gave the event back to the walker (process-wide count). */
uint64_t dec_plan_bails(void);

#endif
