/* cc.h — the compiler-specific parts of the decode path (etwcore/decode, etwcore/backends/etl,
 * jw.c), each with a standard C11 twin, chosen here and nowhere else:
 *   ETW_GNUC  GNU C (gcc, clang): computed goto, attributes, builtins, GCC pragmas
 *   ETW_SSE2  SSE2 on x86: simd.h then takes the SSE2 kernels (simd_sse2.h, the only file with
 *             SSE2 intrinsics), else their plain C twins (simd_scalar.h)
 *   ETW_LE    a little-endian host that says so (__BYTE_ORDER__): whole-word loads and stores
 * The CMake option ETWD_STRICT_C11 sets all three to 0 — what MSVC sees — and compiles these
 * files with -pedantic-errors, so that every #else branch is compiled and its unit tests run
 * (scripts/test.sh builds and runs the decode unit tests that way). Not a public header.
 */
#ifndef ETWD_CC_H
#define ETWD_CC_H

#include <stdint.h>

#if defined(__GNUC__) && !defined(ETWD_STRICT_C11)
#define ETW_GNUC 1
#define ETW_NOINLINE __attribute__((noinline))
#define ETW_ALWAYS_INLINE __attribute__((always_inline))
#define ETW_COLD __attribute__((cold))
#define ETW_EXPECT(x, v) __builtin_expect((x), (v))
#define ETW_UNREACHABLE() __builtin_unreachable()
#else
#define ETW_GNUC 0
#define ETW_NOINLINE
#define ETW_ALWAYS_INLINE
#define ETW_COLD
#define ETW_EXPECT(x, v) (x)
#define ETW_UNREACHABLE() ((void)0)
#endif

#if defined(__SSE2__) && !defined(ETWD_STRICT_C11)
#define ETW_SSE2 1
#else
#define ETW_SSE2 0
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && !defined(ETWD_STRICT_C11)
#define ETW_LE 1
#else
#define ETW_LE 0
#endif

/* Bit counts of a non-zero value, and a byte swap. */
static inline unsigned etw_ctz32(uint32_t v) {
#if ETW_GNUC
  return (unsigned)__builtin_ctz(v);
#else
  unsigned n = 0;
  while (!(v & 1u)) v >>= 1, n++;
  return n;
#endif
}
static inline unsigned etw_ctz64(uint64_t v) {
#if ETW_GNUC
  return (unsigned)__builtin_ctzll(v);
#else
  unsigned n = 0;
  while (!(v & 1u)) v >>= 1, n++;
  return n;
#endif
}
static inline unsigned etw_clz32(uint32_t v) {
#if ETW_GNUC
  return (unsigned)__builtin_clz(v);
#else
  unsigned n = 0;
  while (!(v & 0x80000000u)) v <<= 1, n++;
  return n;
#endif
}
static inline unsigned etw_clz64(uint64_t v) {
#if ETW_GNUC
  return (unsigned)__builtin_clzll(v);
#else
  unsigned n = 0;
  while (!(v & 0x8000000000000000ull)) v <<= 1, n++;
  return n;
#endif
}
static inline uint64_t etw_bswap64(uint64_t v) {
#if ETW_GNUC
  return __builtin_bswap64(v);
#else
  uint64_t r = 0;
  for (int i = 0; i < 8; i++, v >>= 8) r = r << 8 | (v & 0xFF);
  return r;
#endif
}

#endif
