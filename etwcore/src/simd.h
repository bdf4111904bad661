/* simd.h — the one choice of vector kernels (issue 19 item 1): SSE2 (simd_sse2.h) where cc.h
 * says ETW_SSE2 (x86-64 with GNU C), else their plain C twins (simd_scalar.h; arm64, MSVC,
 * ETWD_STRICT_C11). Call sites use the simd_ names only; SIMD_VEC = 1 tells them the kernels
 * are vector ones (worth a block-at-a-time path). No kernel is chosen at run time (the AVX2
 * base64 and cpu.c's CPU check went: they bought nothing measurable). Not a public header. */
#ifndef ETWD_SIMD_H
#define ETWD_SIMD_H

#include "cc.h"

#if ETW_SSE2
#include "simd_sse2.h"
#define SIMD_VEC 1
#define SIMD_(name) sse2_##name
#else
#include "simd_scalar.h"
#define SIMD_VEC 0
#define SIMD_(name) scalar_##name
#endif

#define simd_copy16 SIMD_(copy16)
#define simd_nonplain16 SIMD_(nonplain16)
#define simd_narrow16 SIMD_(narrow16)
#define simd_narrow8x2 SIMD_(narrow8x2)
#define simd_jsonbad16 SIMD_(jsonbad16)
#define simd_copy_jsonbad16 SIMD_(copy_jsonbad16)

#endif
