/* dec_fast.h — small inline writers for the compiled field plans of manifest events (the plan
 * runner, dec_plan_run.c; plans compiled by dec_plan.c). Not a public API.
 *
 * The writers put text at a pointer the caller has made room for (no reservation, no error
 * state); each gives the same text as decode.h's dec_put_hex / dec_put_u64.
 */
#ifndef ETWCORE_DEC_FAST_H
#define ETWCORE_DEC_FAST_H

#include <stdint.h>
#include <string.h>

#include "decode.h"

#if ETW_GNUC
#define FX_INLINE static inline __attribute__((always_inline))
#else
#define FX_INLINE static inline
#endif

/* Decimal digits, fewest instructions first: the length found by comparisons (no digit count),
 * then digit pairs from a table (divisions by constants). Same text as dec_put_u64. */
static const char FX_D2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                               "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                               "8081828384858687888990919293949596979899";
/* "v," and NULs to 4 bytes for v < 100 (the comma for array elements) */
static const char FX_N4[401] = "0,\000\0001,\000\0002,\000\0003,\000\0004,\000\0005,\000\0006,\000\0007,\000\000"
                               "8,\000\0009,\000\00010,\00011,\00012,\00013,\00014,\00015,\00016,\00017,\00018,\000"
                               "19,\00020,\00021,\00022,\00023,\00024,\00025,\00026,\00027,\00028,\00029,\00030,\000"
                               "31,\00032,\00033,\00034,\00035,\00036,\00037,\00038,\00039,\00040,\00041,\00042,\000"
                               "43,\00044,\00045,\00046,\00047,\00048,\00049,\00050,\00051,\00052,\00053,\00054,\000"
                               "55,\00056,\00057,\00058,\00059,\00060,\00061,\00062,\00063,\00064,\00065,\00066,\000"
                               "67,\00068,\00069,\00070,\00071,\00072,\00073,\00074,\00075,\00076,\00077,\00078,\000"
                               "79,\00080,\00081,\00082,\00083,\00084,\00085,\00086,\00087,\00088,\00089,\00090,\000"
                               "91,\00092,\00093,\00094,\00095,\00096,\00097,\00098,\00099,\000";
#if ETW_LE
#define FX_T3_OK 1
/* v < 1000 as one 8-byte store: its digits and a comma in the low bytes (first digit lowest), the
 * digit count + 1 (with the comma) in the top byte. Built by the preprocessor. */
#define FX_T3E(v)                                                                                  \
  ((v) < 10 ? ((uint64_t)('0' + (v)) | (uint64_t)',' << 8 | 2ull << 56)                          \
   : (v) < 100                                                                                     \
       ? ((uint64_t)('0' + (v) / 10) | (uint64_t)('0' + (v) % 10) << 8 | (uint64_t)',' << 16 | 3ull << 56) \
       : ((uint64_t)('0' + (v) / 100) | (uint64_t)('0' + (v) / 10 % 10) << 8 |                   \
          (uint64_t)('0' + (v) % 10) << 16 | (uint64_t)',' << 24 | 4ull << 56))
#define FX_T3_10(v) FX_T3E(v), FX_T3E(v + 1), FX_T3E(v + 2), FX_T3E(v + 3), FX_T3E(v + 4), FX_T3E(v + 5), \
                    FX_T3E(v + 6), FX_T3E(v + 7), FX_T3E(v + 8), FX_T3E(v + 9)
#define FX_T3_100(v) FX_T3_10(v), FX_T3_10(v + 10), FX_T3_10(v + 20), FX_T3_10(v + 30), FX_T3_10(v + 40), \
                     FX_T3_10(v + 50), FX_T3_10(v + 60), FX_T3_10(v + 70), FX_T3_10(v + 80), FX_T3_10(v + 90)
/* … and the same count (with the comma) as a whole word, 8000 bytes after its text: an array
 * element's end is one `add` from memory (one base register for both) */
#define FX_L3E(v) ((v) < 10 ? 2u : (v) < 100 ? 3u : 4u)
#define FX_L3_10(v) FX_L3E(v), FX_L3E(v + 1), FX_L3E(v + 2), FX_L3E(v + 3), FX_L3E(v + 4), FX_L3E(v + 5), \
                    FX_L3E(v + 6), FX_L3E(v + 7), FX_L3E(v + 8), FX_L3E(v + 9)
#define FX_L3_100(v) FX_L3_10(v), FX_L3_10(v + 10), FX_L3_10(v + 20), FX_L3_10(v + 30), FX_L3_10(v + 40), \
                     FX_L3_10(v + 50), FX_L3_10(v + 60), FX_L3_10(v + 70), FX_L3_10(v + 80), FX_L3_10(v + 90)
static const struct {
  uint64_t t[1000], l[1000];
} FX_TL3 = {{FX_T3_100(0), FX_T3_100(100), FX_T3_100(200), FX_T3_100(300), FX_T3_100(400), FX_T3_100(500),
             FX_T3_100(600), FX_T3_100(700), FX_T3_100(800), FX_T3_100(900)},
            {FX_L3_100(0), FX_L3_100(100), FX_L3_100(200), FX_L3_100(300), FX_L3_100(400), FX_L3_100(500),
             FX_L3_100(600), FX_L3_100(700), FX_L3_100(800), FX_L3_100(900)}};
#define FX_T3 FX_TL3.t
#undef FX_T3E
#undef FX_T3_10
#undef FX_T3_100
#undef FX_L3E
#undef FX_L3_10
#undef FX_L3_100
#else
#define FX_T3_OK 0
#endif
/* UINT32 −96…−1 (4294967200 + i) with a comma, 16 bytes each (one 16-byte copy) */
#define FX_TNE(i) {'4', '2', '9', '4', '9', '6', '7', '2', (char)('0' + (i) / 10), (char)('0' + (i) % 10), ',', 0, 0, 0, 0, 0}
#define FX_TN_8(i) FX_TNE(i), FX_TNE(i + 1), FX_TNE(i + 2), FX_TNE(i + 3), FX_TNE(i + 4), FX_TNE(i + 5), FX_TNE(i + 6), FX_TNE(i + 7)
static const char FX_TN[96][16] = {FX_TN_8(0),  FX_TN_8(8),  FX_TN_8(16), FX_TN_8(24), FX_TN_8(32), FX_TN_8(40),
                                   FX_TN_8(48), FX_TN_8(56), FX_TN_8(64), FX_TN_8(72), FX_TN_8(80), FX_TN_8(88)};
#undef FX_TNE
#undef FX_TN_8
FX_INLINE char *fx_put_lt100(char *o, unsigned v) { /* v < 100 */
  if (v < 10) {
    *o = (char)('0' + v);
    return o + 1;
  }
  memcpy(o, FX_D2 + 2 * v, 2);
  return o + 2;
}
FX_INLINE char *fx_put_lt1e4(char *o, unsigned v) { /* v < 10000 */
  if (v < 100) return fx_put_lt100(o, v);
  unsigned h = v / 100;
  o = fx_put_lt100(o, h);
  memcpy(o, FX_D2 + 2 * (v - h * 100), 2);
  return o + 2;
}
static inline void fx_put4(char *o, unsigned v) { /* exactly 4 digits of v < 10000 */
  unsigned h = v / 100;
  memcpy(o, FX_D2 + 2 * h, 2);
  memcpy(o + 2, FX_D2 + 2 * (v - h * 100), 2);
}
#if ETW_LE
/* The 8 decimal digits of @v < 10^8 (leading zeros included) as values 0–9, the first digit in
 * the lowest byte: two 4-digit halves in 32-bit lanes, split into 2-digit and then 1-digit lanes
 * with multiplications by reciprocals (exact in these ranges) in one 64-bit register. */
FX_INLINE uint64_t fx_swar8(uint32_t v) {
  uint64_t hi = v / 10000, x = hi | (uint64_t)(v - (uint32_t)hi * 10000) << 32;
  uint64_t h = (x * 10486) >> 20 & 0x0000007F0000007Full; /* /100 for ≤ 9999 */
  x = h | (x - h * 100) << 16;
  uint64_t t = (x * 103) >> 10 & 0x000F000F000F000Full; /* /10 for ≤ 99 */
  return t | (x - t * 10) << 8;
}
#endif
FX_INLINE char *fx_put_u32(char *o, uint32_t v) {
#if FX_T3_OK
  if (v < 1000) { /* 8 bytes stored (the count from the same load: one copy of v) */
    uint64_t t = FX_T3[v];
    memcpy(o, &t, 8);
    return o + (t >> 56) - 1;
  }
#endif
  if (v < 10000) return fx_put_lt1e4(o, v);
#if ETW_LE
  if (v < 100000000) { /* 5–8 digits: the leading zeros shifted out (8 bytes stored) */
    uint64_t d = fx_swar8(v);
    unsigned lz = (unsigned)etw_ctz64(d) >> 3;
    d = (d + 0x3030303030303030ull) >> (8 * lz);
    memcpy(o, &d, 8);
    return o + 8 - lz;
  }
  unsigned h = v / 100000000; /* 1–42 */
  o = fx_put_lt100(o, h);
  uint64_t d = fx_swar8(v - h * 100000000) + 0x3030303030303030ull;
  memcpy(o, &d, 8);
  return o + 8;
#else
  if (v < 100000000) {
    unsigned h = v / 10000;
    o = fx_put_lt1e4(o, h);
    fx_put4(o, v - h * 10000);
    return o + 4;
  }
  unsigned h = v / 100000000, r = v - h * 100000000, a = r / 10000; /* h < 43 */
  o = fx_put_lt100(o, h);
  fx_put4(o, a);
  fx_put4(o + 4, r - a * 10000);
  return o + 8;
#endif
}
/* the same followed by a comma (array elements) */
FX_INLINE char *fx_put_u32c(char *o, uint32_t v) {
#if FX_T3_OK
  if (v < 1000) { /* 8 bytes stored */
    memcpy(o, &FX_T3[v], 8);
    return o + FX_TL3.l[v];
  }
  if (v < 10000) { /* 4 digits */
    unsigned h = v / 100;
    memcpy(o, FX_D2 + 2 * h, 2);
    memcpy(o + 2, FX_D2 + 2 * (v - h * 100), 2);
    o[4] = ',';
    return o + 5;
  }
  if (v >= 4294967200u) { /* -96..-1 as UINT32 (IL map's -1/-2/-3): 16 bytes stored */
    memcpy(o, FX_TN[v - 4294967200u], 16);
    return o + 11;
  }
#else
  if (v < 100) {
    memcpy(o, FX_N4 + 4 * v, 4);
    return o + 2 + (v >= 10);
  }
#endif
  o = fx_put_u32(o, v);
  *o = ',';
  return o + 1;
}
static inline char *fx_put_u64(char *o, uint64_t v) {
  return v <= UINT32_MAX ? fx_put_u32(o, (uint32_t)v) : dec_put_u64(o, v);
}
static inline char *fx_put_i64(char *o, int64_t v) {
  if (v < 0) {
    *o++ = '-';
    return fx_put_u64(o, (uint64_t)0 - (uint64_t)v);
  }
  return fx_put_u64(o, (uint64_t)v);
}

/* The hex digits of @v (lower case, no leading zeros, at least one) and a closing quote at @o,
 * which must have 24 bytes of room (16 digits are stored whatever the count); returns the end.
 * The `"0x` before is the caller's. */
static inline char *fx_hex_digits(char *o, uint64_t v);
static inline char *fx_hex_tail(char *o, uint64_t v) {
  o = fx_hex_digits(o, v);
  *o = '"';
  return o + 1;
}

/* The hex digits alone (16 bytes stored); returns their end. */
static inline char *fx_hex_digits(char *o, uint64_t v) {
  unsigned c = (unsigned)etw_clz64(v | 1) & 60u; /* leading zero digits × 4 */
  unsigned nd = 16u - (c >> 2);
#if ETW_LE
  uint64_t t = v << c; /* the significant digits first */
  uint64_t a = dec_hex8((uint32_t)(t >> 32)), b = dec_hex8((uint32_t)t);
  memcpy(o, &a, 8);
  memcpy(o + 8, &b, 8);
#else
  static const char X[] = "0123456789abcdef";
  for (unsigned i = nd; i-- > 0; v >>= 4) o[i] = X[v & 15];
#endif
  return o + nd;
}

/* `","0x` and 3 more bytes: the end of one array element and the start of the next */
static const char FX_XSEP[8] = {'"', ',', '"', '0', 'x', 0, 0, 0};

/* "0x…" with both quotes at @o (24 bytes of room); returns the end. */
static inline char *fx_hex(char *o, uint64_t v) {
  memcpy(o, "\"0x", 4); /* the 4th byte is overwritten */
  return fx_hex_tail(o + 3, v);
}

/* Test hook: how many times a plan gave the event back to the walker (process-wide count). */
uint64_t dec_plan_bails(void);

#endif
