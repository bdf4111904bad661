/* test_linux_symjunk.c — the user-stack junk rule of the symboliser (linux_sym.c lx_sym_uframes;
 * docs/linux.md "Stacks"), on this process's and a child's real /proc/PID/maps:
 *
 * - a return address outside every executable mapping (a heap block, a stack object, .data,
 *   .bss, a PAC-signed address that x86-64 does not strip) ends the stack: it and the entries
 *   after it are left out and counted (the return value), the frames before it are as
 *   lx_sym_frames writes them; the same again from the frame cache;
 * - [vdso] (no file) is code: kept, a bare address as before;
 * - an innermost frame outside the code means the maps are stale: nothing is dropped;
 * - a process never seen and gone, and one that exited after its maps were read (the re-read
 *   after the miss fails), keep every address. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etwcore/jw.h"
#include "linux/linux_sym.h"
#include "t.h"

int etwd_junk_probe_fn(int x);
int main(void);
__attribute__((noinline)) int etwd_junk_probe_fn(int x) { return x * 5 + 1; }

static char g_bss[64];
static char g_data[64] = {1};

/* lx_sym_uframes of @a[@n] in @pid: the frames' text into @out, the entries left out returned */
static uint32_t uframes(uint32_t pid, const uint64_t *a, uint32_t n, char *out, size_t cap) {
  struct etw_jw w;
  etw_jw_init(&w, 0);
  uint32_t j = lx_sym_uframes(&w, pid, a, n);
  snprintf(out, cap, "%s", etw_jw_cstr(&w));
  etw_jw_free(&w);
  return j;
}

static int count(const char *s, const char *needle) {
  int k = 0;
  for (; (s = strstr(s, needle)); s++) k++;
  return k;
}

static void junk_kinds(void) {
  char *heap = malloc(4096), local[32] = {3}, t[4096], want[4096];
  CHECK(heap != NULL);
  uint64_t code0 = (uint64_t)(uintptr_t)&etwd_junk_probe_fn + 2, code1 = (uint64_t)(uintptr_t)&main + 1;
  const uint64_t junk[] = {(uint64_t)(uintptr_t)heap + 8, (uint64_t)(uintptr_t)local + 8,
                           (uint64_t)(uintptr_t)&g_data[8], (uint64_t)(uintptr_t)&g_bss[8],
                           code1 | (0x5aull << 48)}; /* a PAC look-alike: not stripped on x86-64 */
  for (size_t k = 0; k < sizeof junk / sizeof junk[0]; k++)
    for (int round = 0; round < 2; round++) { /* the second from the frame cache */
      uint64_t a[4] = {code0, code1, junk[k], code1};
      uint32_t j = uframes((uint32_t)getpid(), a, 4, t, sizeof t);
      CHECK_EQ(j, 2);
      CHECK_EQ(count(t, "{\"Address\""), 2);
      CHECK(strstr(t, "\"Symbol\":\"etwd_junk_probe_fn\",\"Offset\":2}") != NULL);
      CHECK(strstr(t, "\"Symbol\":\"main\",\"Offset\":1}") != NULL);
      /* what is kept is exactly what lx_sym_frames writes for those frames */
      struct etw_jw w;
      etw_jw_init(&w, 0);
      lx_sym_frames(&w, (uint32_t)getpid(), a, 2, 0);
      snprintf(want, sizeof want, "%s", etw_jw_cstr(&w));
      etw_jw_free(&w);
      CHECK_STR(t, want);
    }
  /* nothing to drop: all of it */
  uint64_t ok[3] = {code0, code1, code1};
  CHECK_EQ(uframes((uint32_t)getpid(), ok, 3, t, sizeof t), 0);
  CHECK_EQ(count(t, "{\"Address\""), 3);
  /* the innermost frame (the instruction pointer) is no code: stale maps, nothing dropped */
  uint64_t stale[3] = {(uint64_t)(uintptr_t)heap, code1, (uint64_t)(uintptr_t)heap};
  CHECK_EQ(uframes((uint32_t)getpid(), stale, 3, t, sizeof t), 0);
  CHECK_EQ(count(t, "{\"Address\""), 3);
  free(heap);
}

static void vdso(void) {
  uint64_t v = getauxval(AT_SYSINFO_EHDR);
  CHECK(v != 0);
  if (!v) return;
  char t[2048], want[64];
  uint64_t a[3] = {v + 0x100, v + 0x200, (uint64_t)(uintptr_t)&main + 1};
  CHECK_EQ(uframes((uint32_t)getpid(), a, 3, t, sizeof t), 0);
  snprintf(want, sizeof want, "{\"Address\":\"0x%llx\"},", (unsigned long long)(v + 0x100));
  CHECK(strncmp(t, want, strlen(want)) == 0); /* a bare address, as before */
  CHECK(strstr(t, "\"Symbol\":\"main\"") != NULL);
}

static void unknown_maps(void) {
  char t[2048];
  uint64_t code0 = (uint64_t)(uintptr_t)&etwd_junk_probe_fn, heapish = (uint64_t)(uintptr_t)&g_bss[0];
  uint64_t a[3] = {code0, heapish, code0};
  /* never seen, gone: every address */
  CHECK_EQ(uframes(0x3ffffffe, a, 3, t, sizeof t), 0);
  CHECK_EQ(count(t, "{\"Address\""), 3);
  /* seen, then exited: the re-read after the miss fails, so the maps are not known to be current */
  pid_t c = fork();
  if (c == 0) {
    pause();
    _exit(0);
  }
  CHECK(c > 0);
  uint64_t first[1] = {code0};
  CHECK_EQ(uframes((uint32_t)c, first, 1, t, sizeof t), 0); /* its maps are read now */
  CHECK(strstr(t, "\"Symbol\":\"etwd_junk_probe_fn\"") != NULL);
  uint64_t b[3] = {code0, (uint64_t)(uintptr_t)&g_data[0], code0}; /* a miss while it lives */
  CHECK_EQ(uframes((uint32_t)c, b, 3, t, sizeof t), 2);
  kill(c, SIGKILL);
  waitpid(c, NULL, 0);
  usleep(150000); /* past the re-read interval */
  CHECK_EQ(uframes((uint32_t)c, a, 3, t, sizeof t), 0);
  CHECK_EQ(count(t, "{\"Address\""), 3);
}

int main(void) {
  junk_kinds();
  vdso();
  unknown_maps();
  T_DONE();
}
