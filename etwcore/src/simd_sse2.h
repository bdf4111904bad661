/* simd_sse2.h — the SSE2 vector kernels (x86-64's baseline: selected at compile time by
 * simd.h). Every kernel has a plain C twin of the same signature in simd_scalar.h (prefix
 * scalar_ for sse2_) that returns the same bits and writes the same bytes; tests/unit/
 * test_dec_simd.c checks each pair. The only file with SSE2 intrinsics (tests/lint/
 * check_decode_shape.py). Not a public header. */
#ifndef ETWD_SIMD_SSE2_H
#define ETWD_SIMD_SSE2_H

#include <emmintrin.h>
#include <stdint.h>

#define SSE2_LD(s) _mm_loadu_si128((const __m128i *)(const void *)(s))
#define SSE2_ST(d, x) _mm_storeu_si128((__m128i *)(void *)(d), (x))

static inline void sse2_copy16(void *d, const void *s) { SSE2_ST(d, SSE2_LD(s)); }

/* nonplain: x + 0x60 above -34 as a signed byte (outside 0x20..0x7E), or '"' or '\\' */
static inline unsigned sse2_nonplain_x(__m128i x, unsigned *ctl) {
  __m128i bad = _mm_cmpgt_epi8(_mm_add_epi8(x, _mm_set1_epi8(0x60)), _mm_set1_epi8(-34));
  __m128i qb = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\')));
  if (ctl) *ctl = (unsigned)_mm_movemask_epi8(bad);
  return (unsigned)_mm_movemask_epi8(_mm_or_si128(qb, bad));
}
static inline unsigned sse2_nonplain16(const void *s, unsigned *ctl) { return sse2_nonplain_x(SSE2_LD(s), ctl); }
/* packus: signed 16-bit saturation to 0..255 */
static inline unsigned sse2_narrow16(void *d, const void *s, unsigned *ctl) {
  __m128i x = _mm_packus_epi16(SSE2_LD(s), SSE2_LD((const unsigned char *)s + 16));
  SSE2_ST(d, x);
  return sse2_nonplain_x(x, ctl);
}
static inline unsigned sse2_narrow8x2(void *d, const void *a, const void *b, unsigned *ctl) {
  __m128i x = _mm_packus_epi16(SSE2_LD(a), SSE2_LD(b));
  SSE2_ST(d, x);
  return sse2_nonplain_x(x, ctl);
}

/* one signed compare: below 0x20 or 0x80 and above */
static inline unsigned sse2_jsonbad_x(__m128i x) {
  __m128i c = _mm_cmplt_epi8(x, _mm_set1_epi8(0x20));
  c = _mm_or_si128(c, _mm_cmpeq_epi8(x, _mm_set1_epi8('"')));
  c = _mm_or_si128(c, _mm_cmpeq_epi8(x, _mm_set1_epi8('\\')));
  return (unsigned)_mm_movemask_epi8(c);
}
static inline unsigned sse2_jsonbad16(const void *s) { return sse2_jsonbad_x(SSE2_LD(s)); }
static inline unsigned sse2_copy_jsonbad16(void *d, const void *s) {
  __m128i x = SSE2_LD(s);
  SSE2_ST(d, x);
  return sse2_jsonbad_x(x);
}

#undef SSE2_LD
#undef SSE2_ST
#endif
