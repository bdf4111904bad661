/* cpu.c — the one CPU-feature decision (cpu.h): read once, then a relaxed atomic load. */
#include "cpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if ETW_CPU_X86_AVX2
#include <immintrin.h>
/* lzcnt executed as such: a CPU without it runs the encoding as bsr (lzcnt(1) would be 0), and
 * some virtual machines do not report the CPUID bit of a CPU that has it */
__attribute__((target("lzcnt"))) static int lzcnt_works(const volatile uint64_t *one) {
  return _lzcnt_u64(*one) == 63;
}
static int cpu_has_avx2(void) {
  static const volatile uint64_t one = 1;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
         lzcnt_works(&one);
}
#else
static int cpu_has_avx2(void) { return 0; }
#endif

static signed char cpu_avx2 = -1; /* -1 = not decided yet */

int etw_cpu_avx2(void) {
  int v = __atomic_load_n(&cpu_avx2, __ATOMIC_RELAXED);
  if (v < 0) {
    const char *no = getenv("ETWD_NO_AVX2");
    v = (no && *no && strcmp(no, "0")) ? 0 : cpu_has_avx2();
    __atomic_store_n(&cpu_avx2, (signed char)v, __ATOMIC_RELAXED);
  }
  return v;
}
