/* test_linux_sym.c — the Linux stack symboliser (linux_sym.c): kallsyms parsing and lookup (a
 * written file and the real /proc/kallsyms), ELF symbol lookup and build-id of this very test
 * binary, and the whole user path (lx_sym_frames: /proc/self/maps → ELF → symbol) on addresses
 * of this process's own functions. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etwcore/linux.h"
#include "linux/linux_sym.h"
#include "t.h"

int etwd_sym_probe_fn(int x);
int main(void);
__attribute__((noinline)) int etwd_sym_probe_fn(int x) { return x * 3 + 1; }

static void kallsyms_file(void) {
  char path[] = "/tmp/etwd-ksyms-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  const char *text = "ffffffff81000000 T _text\n"
                     "ffffffff81000100 t helper_b\n"
                     "ffffffff81000080 T func_a\n"
                     "ffffffff81000200 D some_data\n"
                     "0000000000000000 A not_an_address\n"
                     "ffffffffc0001000 t mod_fn\t[ext4]\n";
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
  struct lx_ksyms *k = lx_ksyms_load(path);
  unlink(path);
  CHECK(k != NULL);
  if (!k) return;
  CHECK_EQ(lx_ksyms_count(k), 4); /* text symbols only */
  const char *mod = "x";
  uint64_t off = 0;
  CHECK_STR(lx_ksyms_find(k, 0xffffffff81000090ULL, &mod, &off), "func_a");
  CHECK(mod == NULL);
  CHECK_EQ(off, 0x10);
  CHECK_STR(lx_ksyms_find(k, 0xffffffff81000100ULL, &mod, &off), "helper_b"); /* sorted */
  CHECK_EQ(off, 0);
  CHECK_STR(lx_ksyms_find(k, 0xffffffffc0001004ULL, &mod, &off), "mod_fn");
  CHECK_STR(mod, "ext4");
  CHECK_EQ(off, 4);
  CHECK(lx_ksyms_find(k, 0xffffffff80000000ULL, &mod, &off) == NULL);
  lx_ksyms_free(k);
}

static void kallsyms_real(void) {
  struct lx_ksyms *k = lx_ksyms_load("/proc/kallsyms");
  CHECK(k != NULL && lx_ksyms_count(k) > 1000);
  /* the address of a known symbol, read from the file, resolves to it */
  FILE *f = fopen("/proc/kallsyms", "r");
  char line[512];
  unsigned long long a = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, " T do_syscall_64\n") || strstr(line, " t do_syscall_64\n")) {
      a = strtoull(line, NULL, 16);
      break;
    }
  if (f) fclose(f);
  CHECK(a != 0);
  const char *mod;
  uint64_t off;
  if (k && a) {
    CHECK_STR(lx_ksyms_find(k, a + 5, &mod, &off), "do_syscall_64");
    CHECK_EQ(off, 5);
  }
  lx_ksyms_free(k);
}

/* the test binary's own ELF: .symtab has this file's functions; the file offset of the code
 * comes from /proc/self/maps */
static void elf_self(void) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0);
  exe[n > 0 ? n : 0] = 0;
  struct lx_elf *e = lx_elf_load(exe);
  CHECK(e != NULL);
  if (!e) return;
  uint32_t bl = 0;
  lx_elf_build_id(e, &bl);
  CHECK(bl == 20); /* Debian's gcc links with --build-id (sha1) */
  uintptr_t a = (uintptr_t)&etwd_sym_probe_fn;
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096 + 128];
  uint64_t fo = 0;
  int found = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long long s, en, off;
    if (sscanf(line, "%llx-%llx %*s %llx", &s, &en, &off) == 3 && a >= s && a < en) {
      fo = a - s + off;
      found = 1;
      break;
    }
  }
  if (f) fclose(f);
  CHECK(found);
  uint64_t va = 0, so = 99;
  CHECK(lx_elf_vaddr(e, fo, &va) == 0);
  CHECK_STR(lx_elf_find(e, va + 2, &so), "etwd_sym_probe_fn");
  CHECK_EQ(so, 2);
  CHECK(lx_elf_find(e, 1, &so) == NULL);
  lx_elf_free(e);
  CHECK(lx_elf_load("/proc/self/status") == NULL); /* not ELF */
}

/* the whole path: this process's addresses → frames */
static void frames_self(void) {
  uint64_t a[2] = {(uint64_t)(uintptr_t)&etwd_sym_probe_fn + 3, (uint64_t)(uintptr_t)&main + 1};
  struct etw_jw w;
  for (int round = 0; round < 2; round++) { /* the second round comes from the frame cache */
    etw_jw_init(&w, 0);
    lx_sym_frames(&w, (uint32_t)getpid(), a, 2, 0);
    const char *s = etw_jw_cstr(&w);
    char want[256];
    snprintf(want, sizeof want, "{\"Address\":\"0x%llx\",\"Module\":\"test_linux_sym\",\"Symbol\":"
             "\"etwd_sym_probe_fn\",\"Offset\":3}", (unsigned long long)a[0]);
    CHECK(strncmp(s, want, strlen(want)) == 0);
    if (strncmp(s, want, strlen(want))) fprintf(stderr, "got %s\nwant %s\n", s, want);
    CHECK(strstr(s, "\"Symbol\":\"main\",\"Offset\":1}") != NULL);
    etw_jw_free(&w);
  }
  /* a process that does not exist (and was never seen): raw addresses */
  etw_jw_init(&w, 0);
  lx_sym_frames(&w, 0x3fffffff, a, 1, 1);
  char want[96];
  snprintf(want, sizeof want, ",{\"Address\":\"0x%llx\"}", (unsigned long long)a[0]);
  CHECK_STR(etw_jw_cstr(&w), want);
  etw_jw_free(&w);
  /* the metrics count what happened */
  etw_jw_init(&w, 0);
  etw_linux_metrics(&w);
  const char *m = etw_jw_cstr(&w);
  CHECK(strstr(m, "etwd_symcache_hits_total{cache=\"frames\"} 2\n") != NULL);
  CHECK(strstr(m, "etwd_symcache_misses_total{cache=\"frames\"} 2\n") != NULL);
  CHECK(strstr(m, "etwd_symcache_misses_total{cache=\"processes\"} 2\n") != NULL);
  CHECK(strstr(m, "etwd_symcache_misses_total{cache=\"files\"} 1\n") != NULL);
  etw_jw_free(&w);
}

/* a process that exits after its mappings were seen keeps module+symbol for its later stacks */
static void frames_exited(void) {
  pid_t c = fork();
  if (c == 0) {
    pause();
    _exit(0);
  }
  CHECK(c > 0);
  uint64_t a1 = (uint64_t)(uintptr_t)&etwd_sym_probe_fn + 1, a2 = (uint64_t)(uintptr_t)&main;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  lx_sym_frames(&w, (uint32_t)c, &a1, 1, 0); /* its mappings are read now */
  CHECK(strstr(etw_jw_cstr(&w), "\"Symbol\":\"etwd_sym_probe_fn\",\"Offset\":1}") != NULL);
  etw_jw_free(&w);
  kill(c, SIGKILL);
  waitpid(c, NULL, 0);
  usleep(150000); /* past the re-read interval: a miss tries /proc/PID/maps again, and fails */
  etw_jw_init(&w, 0);
  lx_sym_frames(&w, (uint32_t)c, &a2, 1, 0);
  CHECK(strstr(etw_jw_cstr(&w), "\"Module\":\"test_linux_sym\",\"Symbol\":\"main\",\"Offset\":0}") != NULL);
  etw_jw_free(&w);
  uint64_t nowhere = 0x1000;
  etw_jw_init(&w, 0);
  lx_sym_frames(&w, (uint32_t)c, &nowhere, 1, 0);
  CHECK_STR(etw_jw_cstr(&w), "{\"Address\":\"0x1000\"}");
  etw_jw_free(&w);
}

int main(void) {
  kallsyms_file();
  kallsyms_real();
  elf_self();
  frames_self();
  frames_exited();
  T_DONE();
}
