/* simd_avx2.c — the one AVX2 kernel: base64 24 bytes at a time (jw.c's etw_jw_base64). Run
 * only where cpu.c's etw_cpu_avx2() (the one run-time CPU decision) says so; its plain C twin,
 * simd_scalar_base64 (simd.h), writes the same bytes (tests/unit/test_dec_simd.c). */
#include "simd.h"
#include "cpu.h"

#if ETW_CPU_X86_AVX2
#include <immintrin.h>
/* 24 bytes to 32 characters per step while 28 bytes can be read (the two 16-byte loads of a
 * step: bytes 0–15 and 12–27); returns the bytes done. Per 128-bit lane, 12 bytes: each group of
 * three (a, b, c) as the 32-bit word b a c b; a & 0xFC (bits 10–15) and b & 0x0F, c & 0xC0 (bits
 * 22–27) to bytes 0 and 2 by one high 16-bit multiplication, b & 0xF0, a & 3 (bits 4–9) and
 * c & 0x3F (bits 16–21) to bytes 1 and 3 by one low one: the four 6-bit values in order. Then
 * each value v plus an offset: 'A' for v < 26, 'a' - 26 to 51, '0' - 52 to 61, then '+' - 62 and
 * '/' - 63; the offset picked by a byte shuffle on (v saturating-minus 51, or 13 below 26). */
__attribute__((target("avx2"))) size_t simd_avx2_base64(char *p, const unsigned char *s, size_t n) {
  const __m256i shuf = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10, 1, 0, 2, 1, 4, 3, 5, 4, 7,
                                        6, 8, 7, 10, 9, 11, 10);
  const __m256i lut = _mm256_setr_epi8('a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                                       '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0, 'a' - 26, '0' - 52,
                                       '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                                       '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0);
  size_t i = 0;
  for (; i + 28 <= n; i += 24) {
    __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
    __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 12));
    __m256i in = _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1), shuf);
    __m256i t0 = _mm256_mulhi_epu16(_mm256_and_si256(in, _mm256_set1_epi32(0x0FC0FC00)), _mm256_set1_epi32(0x04000040));
    __m256i t1 = _mm256_mullo_epi16(_mm256_and_si256(in, _mm256_set1_epi32(0x003F03F0)), _mm256_set1_epi32(0x01000010));
    __m256i v = _mm256_or_si256(t0, t1);
    __m256i r = _mm256_subs_epu8(v, _mm256_set1_epi8(51));
    r = _mm256_or_si256(r, _mm256_and_si256(_mm256_cmpgt_epi8(_mm256_set1_epi8(26), v), _mm256_set1_epi8(13)));
    _mm256_storeu_si256((__m256i *)(void *)(p + i / 3 * 4), _mm256_add_epi8(v, _mm256_shuffle_epi8(lut, r)));
  }
  return i;
}
#endif
typedef int simd_avx2_iso_c; /* (ISO C: a translation unit is not empty) */
