/* test_dec_simd.c — the vector kernels (etwcore/src/simd_sse2.h) against their plain C
 * twins (simd_scalar.h) and against the byte-by-byte definitions below: every kernel on random
 * blocks and on blocks of the edge bytes 0x00 0x1f 0x20 0x22 0x5c 0x7e 0x7f 0x80 0xff (and the
 * UTF-16 units around 0x00ff / 0x7fff / 0x8000), at all 16 alignments. Named test_dec_* so that
 * the standard-C11 run (scripts/test.sh, ETWD_STRICT_C11) and the arm64 run check the scalar
 * twins too; there the SSE2 set is not compiled and only the definitions are compared. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc.h"
#include "simd_scalar.h"
#if ETW_SSE2
#include "simd_sse2.h"
#endif
#include "simd.h"
#include "t.h"

static uint32_t rng = 12345;
static unsigned rnd(void) {
  rng = rng * 1103515245u + 12345u;
  return rng >> 16;
}
static const unsigned char EDGE[] = {0x00, 0x1f, 0x20, 0x22, 0x5c, 0x7e, 0x7f, 0x80, 0xff, 'a'};
static const uint16_t EDGE16[] = {0x0000, 0x001f, 0x0020, 0x0022, 0x005c, 0x007e, 0x007f, 0x0080, 0x00ff,
                                  0x0100, 0x7fff, 0x8000, 0xd800, 0xffff, 'a'};

/* the definitions, one byte at a time */
static unsigned def_nonplain(unsigned c) { return c < 0x20 || c > 0x7e || c == '"' || c == '\\'; }
static unsigned def_ctl(unsigned c) { return c < 0x20 || c > 0x7e; }
static unsigned def_jsonbad(unsigned c) { return c < 0x20 || c >= 0x80 || c == '"' || c == '\\'; }
static unsigned char def_narrow(unsigned u) { return (unsigned char)(u >= 0x8000 ? 0 : u > 0xff ? 0xff : u); }

static int mismatches;
#define SAME(a, b)                                                                                   \
  do {                                                                                               \
    if ((a) != (b) && mismatches++ < 10)                                                             \
      fprintf(stderr, "%s:%d: %s = %#x, want %#x\n", __FILE__, __LINE__, #a, (unsigned)(a), (unsigned)(b)); \
  } while (0)
#define SAME_MEM(a, b, n)                                                                          \
  do {                                                                                             \
    if (memcmp((a), (b), (n)) && mismatches++ < 10) fprintf(stderr, "%s:%d: %s differs\n", __FILE__, __LINE__, #a); \
  } while (0)

/* every 16-byte kernel on the 16 (or 32) bytes at @s, each twin against the definitions */
static void check_block(const unsigned char *s) {
  unsigned np = 0, ctl = 0, bad = 0;
  for (unsigned i = 0; i < 16; i++) {
    np |= def_nonplain(s[i]) << i;
    ctl |= def_ctl(s[i]) << i;
    bad |= def_jsonbad(s[i]) << i;
  }
  unsigned char nar[16], nar2[16];
  for (unsigned i = 0; i < 16; i++) nar[i] = def_narrow((unsigned)s[2 * i] | (unsigned)s[2 * i + 1] << 8);
  for (unsigned i = 0; i < 8; i++) {
    nar2[i] = def_narrow((unsigned)s[2 * i] | (unsigned)s[2 * i + 1] << 8);
    nar2[8 + i] = def_narrow((unsigned)s[2 * i + 16] | (unsigned)s[2 * i + 17] << 8);
  }
  unsigned np_n = 0, ctl_n = 0, np_n2 = 0, ctl_n2 = 0;
  for (unsigned i = 0; i < 16; i++) {
    np_n |= def_nonplain(nar[i]) << i;
    ctl_n |= def_ctl(nar[i]) << i;
    np_n2 |= def_nonplain(nar2[i]) << i;
    ctl_n2 |= def_ctl(nar2[i]) << i;
  }
  unsigned char out[48];
  unsigned c;
#define TWIN(P)                                                                                   \
  do {                                                                                            \
    SAME(P##nonplain16(s, &c), np);                                                               \
    SAME(c, ctl);                                                                                 \
    SAME(P##nonplain16(s, NULL), np);                                                             \
    SAME(P##jsonbad16(s), bad);                                                                   \
    memset(out, 0xAA, sizeof out);                                                                \
    SAME(P##copy_jsonbad16(out + 1, s), bad);                                                     \
    SAME_MEM(out + 1, s, 16);                                                                     \
    SAME(out[0] + out[17], 0xAA * 2);                                                             \
    memset(out, 0xAA, sizeof out);                                                                \
    SAME(P##narrow16(out + 1, s, &c), np_n);                                                      \
    SAME(c, ctl_n);                                                                               \
    SAME_MEM(out + 1, nar, 16);                                                                   \
    SAME(out[0] + out[17], 0xAA * 2);                                                             \
    SAME(P##narrow8x2(out, s, s + 16, &c), np_n2);                                                \
    SAME(c, ctl_n2);                                                                              \
    SAME_MEM(out, nar2, 16);                                                                      \
    memset(out, 0xAA, sizeof out);                                                                \
    P##copy16(out + 1, s);                                                                        \
    SAME_MEM(out + 1, s, 16);                                                                     \
    SAME(out[0] + out[17], 0xAA * 2);                                                             \
  } while (0)
  TWIN(scalar_);
#if ETW_SSE2
  TWIN(sse2_);
#endif
  TWIN(simd_); /* (the chosen set: simd.h's names) */
#undef TWIN
}

/* 16-byte kernels: random blocks, blocks of edge bytes and of edge units, at every alignment */
static void blocks(void) {
  _Alignas(16) unsigned char buf[64];
  for (int round = 0; round < 4000; round++) {
    for (unsigned i = 0; i < sizeof buf; i++) {
      switch (round % 4) {
      case 0: buf[i] = (unsigned char)rnd(); break;
      case 1: buf[i] = EDGE[rnd() % sizeof EDGE]; break;
      case 2: buf[i] = (unsigned char)(0x1c + rnd() % 8); break; /* around 0x20 */
      default: break;
      }
    }
    if (round % 4 == 3) /* UTF-16 units */
      for (unsigned i = 0; i < sizeof buf / 2; i++) {
        uint16_t u = EDGE16[rnd() % (sizeof EDGE16 / sizeof EDGE16[0])];
        buf[2 * i] = (unsigned char)u;
        buf[2 * i + 1] = (unsigned char)(u >> 8);
      }
    for (unsigned a = 0; a < 16; a++) check_block(buf + a);
  }
  /* each edge byte alone, everywhere in a block */
  for (unsigned e = 0; e < sizeof EDGE; e++)
    for (unsigned a = 0; a < 16; a++)
      for (unsigned k = 0; k < 16; k++) {
        memset(buf, 'x', sizeof buf);
        buf[a + k] = EDGE[e];
        check_block(buf + a);
      }
  /* every byte value in every lane */
  for (unsigned v = 0; v < 256; v++) {
    for (unsigned i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(v + i);
    check_block(buf + v % 16);
  }
}

int main(void) {
  blocks();
  CHECK_EQ(mismatches, 0);
  printf("simd kernels: %s set chosen, %d mismatches\n", SIMD_VEC ? "SSE2" : "scalar", mismatches);
  T_DONE();
}
