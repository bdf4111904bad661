/* cpu.h — the one CPU-feature decision of the vector code (etwcore/src/cpu.c).
 *
 * The one AVX2 kernel (simd_avx2.c's base64, called by jw.c) has a plain C twin that writes the
 * same bytes (simd_scalar.h's scalar_base64: test_dec_simd; and jw.c's table path: test_jw);
 * which one runs is decided once, here, for the whole
 * process: AVX2 when the CPU has AVX2, BMI1, BMI2 and LZCNT, the build is GNU C on x86-64 and
 * not Windows (mingw does not align the stack for 32-byte spills), and the environment has no
 * ETWD_NO_AVX2 (any value but "" or "0"). Thread-safe; the first call decides.
 */
#ifndef ETWD_CPU_H
#define ETWD_CPU_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(_WIN32) && !defined(ETWD_STRICT_C11)
#define ETW_CPU_X86_AVX2 1 /* AVX2 kernels are compiled (target attributes, <immintrin.h>) */
#else
#define ETW_CPU_X86_AVX2 0
#endif

/* 1 = run the AVX2 kernels, 0 = their SSE2 / C twins */
int etw_cpu_avx2(void);

#endif
