/* simd_scalar.h — the plain C twins of the vector kernels (simd_sse2.h): same signatures, same
 * results, names prefixed scalar_ instead of sse2_. simd.h picks one set; tests/unit/
 * test_dec_simd.c runs both and compares. Standard C11 (what MSVC, arm64 and ETWD_STRICT_C11
 * build). Not a public header. */
#ifndef ETWD_SIMD_SCALAR_H
#define ETWD_SIMD_SCALAR_H

#include <stdint.h>
#include <string.h>

/* 16 bytes from @s to @d */
static inline void scalar_copy16(void *d, const void *s) { memcpy(d, s, 16); }

/* byte @c not plain JSON string text: outside 0x20..0x7E, or '"' or '\\' */
static inline unsigned scalar_nonplain_(unsigned c) { return c < 0x20 || c > 0x7E || c == '"' || c == '\\'; }

/* Bit i set when byte i of @s (16 bytes) is not plain JSON string text (outside 0x20..0x7E, '"'
 * or '\\'); *@ctl = the bits of those outside 0x20..0x7E alone (@ctl may be NULL). */
static inline unsigned scalar_nonplain16(const void *s, unsigned *ctl) {
  const unsigned char *b = (const unsigned char *)s;
  unsigned m = 0, c = 0;
  for (unsigned i = 0; i < 16; i++) {
    m |= scalar_nonplain_(b[i]) << i;
    c |= (unsigned)(b[i] < 0x20 || b[i] > 0x7E) << i;
  }
  if (ctl) *ctl = c;
  return m;
}

/* UTF-16LE unit @u narrowed to a byte, saturating as a signed 16-bit value: 0x8000..0xFFFF → 0,
 * 0x100..0x7FFF → 0xFF */
static inline unsigned char scalar_narrow_(const unsigned char *s) {
  unsigned u = (unsigned)s[0] | (unsigned)s[1] << 8;
  return (unsigned char)(u >= 0x8000 ? 0 : u > 0xFF ? 0xFF : u);
}
/* 16 UTF-16LE units at @s (32 bytes) narrowed (scalar_narrow_) to 16 bytes at @d; returns
 * nonplain16 of them (and *@ctl) */
static inline unsigned scalar_narrow16(void *d, const void *s, unsigned *ctl) {
  unsigned char *o = (unsigned char *)d;
  const unsigned char *b = (const unsigned char *)s;
  for (unsigned i = 0; i < 16; i++) o[i] = scalar_narrow_(b + 2 * i);
  return scalar_nonplain16(o, ctl);
}
/* as narrow16, the units of @a (8) to bytes 0–7 and those of @b (8) to bytes 8–15 */
static inline unsigned scalar_narrow8x2(void *d, const void *a, const void *b, unsigned *ctl) {
  unsigned char *o = (unsigned char *)d;
  for (unsigned i = 0; i < 8; i++) {
    o[i] = scalar_narrow_((const unsigned char *)a + 2 * i);
    o[8 + i] = scalar_narrow_((const unsigned char *)b + 2 * i);
  }
  return scalar_nonplain16(o, ctl);
}

/* Bit i set when byte i of @s (16 bytes) is below 0x20 or above 0x7F, '"' or '\\' (what the
 * Linux decoder hands to the core's writer; 0x7F passes) */
static inline unsigned scalar_jsonbad16(const void *s) {
  const unsigned char *b = (const unsigned char *)s;
  unsigned m = 0;
  for (unsigned i = 0; i < 16; i++) m |= (unsigned)(b[i] < 0x20 || b[i] >= 0x80 || b[i] == '"' || b[i] == '\\') << i;
  return m;
}
/* copy16 and jsonbad16 of the 16 bytes */
static inline unsigned scalar_copy_jsonbad16(void *d, const void *s) {
  scalar_copy16(d, s);
  return scalar_jsonbad16(s);
}

#endif
