/* linux_uaddr.h — is an entry of a user stack record a user-space code address (the range check
 * of linux_stack.c lx_stk_addrs; docs/linux.md "Stacks"). Header only and without tracefs, so
 * that it is built and unit-tested on arm64 too (tests/unit/test_linux_uaddr.c, under qemu by
 * scripts/test-arm64.sh). Pure functions: any thread.
 *
 * x86-64: user space is [4 KiB, 2^47), or [4 KiB, 2^56) with five-level paging (the first page
 * is never mapped), plus the legacy vsyscall page; a return address carries no extra bits.
 *
 * arm64: user space is [4 KiB, 2^VA_BITS) with VA_BITS 48 or 52 (the kernel's configuration),
 * and code built with -mbranch-protection=pac-ret keeps SIGNED return addresses on its stack:
 * the pointer-authentication code sits in bits 54..VA_BITS (the top byte is left to TBI, so a
 * return address never has one; bit 55 selects the half, clear for user space). Which bits the
 * PAC takes depends on VA_BITS, so the strip is the CPU's own XPACLRI (`hint #7`, in the NOP
 * space: a NOP on a CPU without pointer authentication, where no address carries a PAC), through
 * GCC's builtin (the project has no inline assembly): the kernel configures the user VA size
 * once for every process, so stripping here in etwd removes exactly the traced process's PAC
 * bits (the kernel's own ptrauth_strip_user_insn_pac is the same instruction). A compiler
 * without the builtin clears bits 54..48 instead (right for the usual 48-bit user space; a
 * process that asked for mappings above 2^48 on a 52-bit kernel would lose them). A value that
 * still has bits at or above 2^52 after it is no user address. */
#ifndef ETWD_LINUX_UADDR_H
#define ETWD_LINUX_UADDR_H

#include <stdint.h>

#define LX_UADDR_MIN 4096ULL
#if defined(__aarch64__)
#define LX_UADDR_END (1ULL << 52)
#else
#define LX_UADDR_END (1ULL << 56)
#define LX_VSYSCALL_PAGE 0xffffffffff600000ULL
#endif

/** lx_uaddr_strip - @v without the pointer-authentication bits of a user return address
 *  (arm64, when the CPU has them; otherwise @v unchanged) */
static inline uint64_t lx_uaddr_strip(uint64_t v) {
#if defined(__aarch64__)
  if (v & (1ULL << 55)) return v; /* the kernel half: no user address, left as it is */
#if defined(__GNUC__) && !defined(__clang__)
  return (uint64_t)(uintptr_t)__builtin_aarch64_xpaclri((void *)(uintptr_t)v);
#else
  return v & ~(0x7fULL << 48);
#endif
#else
  return v;
#endif
}

/** lx_uaddr_code - 1 when @v (stripped: lx_uaddr_strip) can be a user code address */
static inline int lx_uaddr_code(uint64_t v) {
#if defined(LX_VSYSCALL_PAGE)
  if ((v & ~0xfffULL) == LX_VSYSCALL_PAGE) return 1;
#endif
  return v >= LX_UADDR_MIN && v < LX_UADDR_END;
}

#endif
