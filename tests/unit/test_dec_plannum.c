/* test_dec_plannum.c — the kernel plans' number texts (put_u64t: below 10^12 by a number below
 * 10^4 and T4's four-digit groups; put_u32t: S3 below 1000, T4 below 10^4) against dec_put_u64 and
 * dec_put_u32: every value around each power of ten and each group boundary, every value below
 * 20,000, and random values of every magnitude (bit length 0-64). */
#include "decode.h"
#include "t.h"

static unsigned long long rs = 88172645463325252ull;
static uint64_t next(void) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return rs;
}

static void one(uint64_t v) {
  char a[40], b[40];
  char *e = dec_put_u64(b, v);
  *e = 0;
  char *f = dec_plan_u64(a, v);
  CHECK_STR(a, b);
  CHECK_EQ(f - a, e - b);
  if (v <= UINT32_MAX) {
    e = dec_put_u32(b, (uint32_t)v);
    *e = 0;
    f = dec_plan_u32(a, (uint32_t)v);
    CHECK_STR(a, b);
    CHECK_EQ(f - a, e - b);
  }
}

int main(void) {
  for (uint64_t v = 0; v < 20000; v++) one(v);
  uint64_t p = 1;
  for (int k = 0; k <= 19; k++, p *= 10) /* around 10^k, and around m × 10^k */
    for (uint64_t m = 1; m <= 9; m++) {
      uint64_t c = p * m;
      for (int d = -3; d <= 3; d++) one(c + (uint64_t)(int64_t)d);
    }
  one(UINT64_MAX);
  one(UINT64_MAX - 1);
  one(UINT32_MAX);
  one((uint64_t)UINT32_MAX + 1);
  for (int i = 0; i < 400000; i++) {
    int bits = i % 65;
    uint64_t v = bits ? next() >> (64 - bits) : 0;
    one(v);
  }
  T_DONE();
}
