/* test_dec_ipv6.c — dec_fmt_ipv6 (the IPv6 text of dec_value's binary/IPv6 field and of the kernel
 * plans' DEC_KOP_IPV6 op) against a plain RFC 5952 formatter written here: every pattern of zero
 * groups (256) with group values of every digit count, then random addresses biased to zero
 * groups; the text, its length and the terminating NUL, in a buffer of exactly 40 bytes (under
 * ASan: nothing written past it). */
#include "decode.h"
#include "t.h"

/* The reference: groups as numbers, the longest run of two or more zero groups (the first of
 * equal ones) as "::", lower-case hex without leading zeros. */
static int ref_ipv6(char *out, const unsigned char *p) {
  unsigned g[8];
  for (int i = 0; i < 8; i++) g[i] = (unsigned)p[2 * i] * 256u + p[2 * i + 1];
  int best = -1, bl = 0;
  for (int i = 0; i < 8; i++) {
    int j = i;
    while (j < 8 && g[j] == 0) j++;
    if (j - i >= 2 && j - i > bl) {
      best = i;
      bl = j - i;
    }
  }
  int k = 0;
  for (int i = 0; i < 8; i++) {
    if (i == best) {
      k += sprintf(out + k, "::");
      i += bl - 1;
      continue;
    }
    if (i > 0 && i != best + bl) out[k++] = ':';
    k += sprintf(out + k, "%x", g[i]);
  }
  out[k] = 0;
  return k;
}

static size_t bad;

static void one(const unsigned char a[16]) {
  char want[64], *got = malloc(40); /* (exactly the room dec_fmt_ipv6 may use) */
  if (!got) {
    CHECK(0);
    return;
  }
  int kw = ref_ipv6(want, a);
  int kg = dec_fmt_ipv6(got, a);
  if (kw != kg || strcmp(want, got)) {
    if (bad++ < 5) fprintf(stderr, "ipv6: got %s (%d), want %s (%d)\n", got, kg, want, kw);
  }
  free(got);
}

int main(void) {
  static const unsigned V[] = {1, 0xa, 0xf, 0x10, 0xab, 0xff, 0x100, 0xabc, 0xfff, 0x1000, 0xabcd, 0xffff};
  size_t n = 0;
  for (unsigned zm = 0; zm < 256; zm++)
    for (size_t v = 0; v < sizeof V / sizeof V[0]; v++) {
      unsigned char a[16];
      for (int i = 0; i < 8; i++) {
        unsigned x = zm >> i & 1 ? 0 : V[(v + (size_t)i * 5) % (sizeof V / sizeof V[0])];
        a[2 * i] = (unsigned char)(x >> 8);
        a[2 * i + 1] = (unsigned char)x;
      }
      one(a);
      n++;
    }
  uint64_t r = 0x9E3779B97F4A7C15ull;
  for (int t = 0; t < 200000; t++) {
    unsigned char a[16];
    for (int i = 0; i < 16; i++) {
      r ^= r << 13;
      r ^= r >> 7;
      r ^= r << 17;
      a[i] = (unsigned char)(r >> 24);
    }
    for (int i = 0; i < 8; i++) /* zero groups in about half of the places, small ones in some */
      if ((r >> (i * 3)) % 4 == 0) a[2 * i] = a[2 * i + 1] = 0;
      else if ((r >> (i * 3 + 1)) % 4 == 0) a[2 * i] = 0;
    one(a);
    n++;
  }
  CHECK(n > 200000);
  CHECK_EQ(bad, 0);
  T_DONE();
}
