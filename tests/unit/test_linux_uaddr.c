/* test_linux_uaddr.c — which entries of a Linux user stack record can be user code addresses
 * (linux_uaddr.h, used by linux_stack.c lx_stk_addrs; docs/linux.md "Stacks"), on both
 * architectures: built natively and for arm64 (scripts/test-arm64.sh runs it under qemu-user,
 * whose default CPU has pointer authentication).
 *
 * - both: the first page, the kernel half and a frame-pointer walk's usual junk
 *   (0x8010000000000000, 0x30) are no user address; an ordinary user address is one, unchanged;
 * - x86-64: user space reaches 2^56 (five-level paging) and the vsyscall page is code; nothing
 *   is stripped, so a value with bits 48..54 set stays as it is (it is a five-level user address:
 *   the process's executable mappings decide, lx_sym_uframes);
 * - arm64: a return address signed with pac-ret (PAC in bits 54..VA_BITS) is stripped back to
 *   the plain address on a CPU with pointer authentication (HWCAP_PACA) and is then in range;
 *   on one without, no address carries a PAC and the value is left as it is; the top byte is
 *   never stripped (TBI: a return address has none) and bit 55 marks the kernel half. */
#include <stdint.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "linux/linux_uaddr.h"
#include "t.h"

#define UA 0x0000aaaa12345678ull /* an arm64-looking and x86-64-valid user address */
#define UB 0x00007f1200005678ull

static int code(uint64_t v) { return lx_uaddr_code(lx_uaddr_strip(v)); }

static void common(void) {
  CHECK(code(UA) && code(UB) && code(4096));
  CHECK_EQ(lx_uaddr_strip(UA), UA);
  CHECK(!code(0) && !code(0x30) && !code(4095));
  CHECK(!code(0x8010000000000000ull));
  CHECK(!code(0xffffffff81234560ull)); /* a kernel address */
  CHECK(!code(0x0100000000000000ull)); /* 2^56: above every user space */
}

static void arch(void) {
  uint64_t pac = UA | (0x5aull << 48); /* bits 49..54: a PAC of a 48-bit VA */
#if defined(__aarch64__)
  int has_pac = !!(getauxval(AT_HWCAP) & HWCAP_PACA);
  fprintf(stderr, "arm64, pointer authentication: %s\n", has_pac ? "yes" : "no");
  if (has_pac) {
    CHECK_EQ(lx_uaddr_strip(pac), UA);
    CHECK(code(pac));
  } else {
    CHECK_EQ(lx_uaddr_strip(pac), pac);
  }
  CHECK(!code(UA | (0x3full << 56))); /* a top byte: no return address */
  CHECK(!code(1ull << 52));
  CHECK(code((1ull << 52) - 4096));        /* 52-bit user space */
  CHECK(!code(0xffffffffff600000ull));      /* no vsyscall page on arm64 */
  CHECK_EQ(lx_uaddr_strip(0xffff800012345678ull), 0xffff800012345678ull); /* kernel half */
#else
  CHECK_EQ(lx_uaddr_strip(pac), pac); /* nothing to strip */
  CHECK(code(pac));                   /* in five-level user space: the mappings decide */
  CHECK(code((1ull << 56) - 4096));
  CHECK(code(0xffffffffff600000ull) && code(0xffffffffff600400ull)); /* vsyscall */
  CHECK(!code(0xffffffffff601000ull));
#endif
}

int main(void) {
  common();
  arch();
  T_DONE();
}
