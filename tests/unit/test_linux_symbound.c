/* test_linux_symbound.c — the symboliser's bounds and file opening (linux_sym.c), on real ELF
 * files built here with the compiler and on this process's own mappings:
 * - a shared object with 8,000 generated functions and one function whose name is 100,000
 *   bytes long: with the cache's bounds every function is kept and the long name is cut to
 *   1024 bytes; with a bound of 1000 symbols, or of 128 KiB, the table read stays within it
 *   (count, bytes); each cut shows in /metrics (etwd_symcache_symbols_cut_total{reason=…});
 * - the non-root path (map_files unusable: a child process without CAP_SYS_ADMIN and
 *   CAP_CHECKPOINT_RESTORE): a mapped file is read through its path when it is still that
 *   inode (Symbol), but a symlink to the very same inode swapped in at the path is not
 *   followed, and a FIFO swapped in is neither waited on nor read (Module and Offset only),
 *   all within a 10 s alarm. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etwcore/jw.h"
#include "etwcore/linux.h"
#include "linux/linux_sym.h"
#include "t.h"

#define NFUNCS 8000
#define LONGNAME 100000

static char dir[64];
static char so[128];

/* the generated shared object: f0 … f7999 and the long-named one */
static int build_so(void) {
  char src[128], cmd[512];
  snprintf(src, sizeof src, "%s/gen.c", dir);
  snprintf(so, sizeof so, "%s/gen.so", dir);
  FILE *f = fopen(src, "w");
  if (!f) return -1;
  for (int i = 0; i < NFUNCS; i++) fprintf(f, "int f%d(int x) { return x + %d; }\n", i, i);
  fputs("int ", f); /* a C identifier of LONGNAME characters (C has no length limit; gcc none) */
  for (int i = 0; i < LONGNAME; i++) fputc('L', f);
  fputs("(int x) { return x * 7; }\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "cc -shared -fPIC -O0 -o %s %s", so, src);
  return system(cmd) == 0 ? 0 : -1;
}

/* the value of etwd_symcache_symbols_cut_total{reason=@why} in /metrics */
static long long cut_metric(const char *why) {
  struct etw_jw w;
  etw_jw_init(&w, 0);
  etw_linux_metrics(&w);
  char key[96];
  snprintf(key, sizeof key, "etwd_symcache_symbols_cut_total{reason=\"%s\"} ", why);
  const char *p = strstr(etw_jw_cstr(&w), key);
  long long v = p ? atoll(p + strlen(key)) : -1;
  etw_jw_free(&w);
  return v;
}

static void bounds(void) {
  long long c0 = cut_metric("count"), b0 = cut_metric("bytes"), n0 = cut_metric("name");
  CHECK(c0 >= 0 && b0 >= 0 && n0 >= 0);
  /* the cache's bounds: every function, the long name cut */
  struct lx_elf *e = lx_elf_load(so);
  CHECK(e != NULL);
  if (!e) return;
  CHECK(lx_elf_nsyms(e) >= NFUNCS + 1);
  CHECK_EQ(cut_metric("name"), n0 + 1);
  void *h = dlopen(so, RTLD_NOW);
  CHECK(h != NULL);
  char *ln = malloc(LONGNAME + 1);
  memset(ln, 'L', LONGNAME);
  ln[LONGNAME] = 0;
  void *fa = h ? dlsym(h, ln) : NULL;
  Dl_info di;
  CHECK(fa && dladdr(fa, &di) && di.dli_fbase);
  if (fa && di.dli_fbase) {
    uint64_t off = 9;
    const char *s = lx_elf_find(e, (uint64_t)((uintptr_t)fa - (uintptr_t)di.dli_fbase), &off);
    CHECK(s && strlen(s) == 1024 && !strncmp(s, ln, 1024));
    CHECK_EQ(off, 0);
  }
  free(ln);
  lx_elf_free(e);
  /* count: 1000 kept, the rest counted */
  e = lx_elf_load_max(so, 1000, (size_t)1 << 30);
  CHECK(e != NULL);
  if (e) CHECK_EQ(lx_elf_nsyms(e), 1000);
  long long c1 = cut_metric("count");
  CHECK(c1 - c0 >= NFUNCS + 1 - 1000);
  /* a cut table: an address past a kept unsized symbol is not put into it */
  lx_elf_free(e);
  /* bytes: the table read stays within 128 KiB */
  e = lx_elf_load_max(so, 1u << 20, 131072);
  CHECK(e != NULL);
  if (e) {
    CHECK(lx_elf_mem(e) <= 131072);
    CHECK(lx_elf_nsyms(e) > 100 && lx_elf_nsyms(e) < NFUNCS);
  }
  CHECK(cut_metric("bytes") - b0 >= NFUNCS / 4);
  lx_elf_free(e);
  fprintf(stderr, "bounds: cut count %lld, bytes %lld, name %lld\n", cut_metric("count") - c0,
          cut_metric("bytes") - b0, cut_metric("name") - n0);
  if (h) dlclose(h);
}

/* drop the capabilities /proc/PID/map_files needs (CAP_SYS_ADMIN, CAP_CHECKPOINT_RESTORE) */
static int drop_caps(void) {
  struct __user_cap_header_struct hd = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &hd, d)) return -1;
  const int caps[] = {21 /* CAP_SYS_ADMIN */, 40 /* CAP_CHECKPOINT_RESTORE */};
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    d[caps[i] / 32].effective &= ~(1u << (caps[i] % 32));
    d[caps[i] / 32].permitted &= ~(1u << (caps[i] % 32));
  }
  return (int)syscall(SYS_capset, &hd, d);
}

/* In a child: map a copy of the object, drop the caps, let the symboliser read this process's
 * mappings, swap the path (0 none, 1 a symlink to the same inode, 2 a FIFO), then resolve an
 * address of f5. Exit 0 when the frame is as expected (symbol only with no swap), 2 when
 * map_files could still be opened (the test would not test the path), 1 otherwise. */
static int child(int variant) {
  char p[160], keep[170], cmd[400];
  snprintf(p, sizeof p, "%s/v%d.so", dir, variant);
  snprintf(keep, sizeof keep, "%s.keep", p);
  snprintf(cmd, sizeof cmd, "cp %s %s", so, p);
  if (system(cmd) != 0) return 1;
  void *h = dlopen(p, RTLD_NOW);
  void *fa = h ? dlsym(h, "f5") : NULL;
  if (!fa || drop_caps() != 0) return 1;
  char mf[96];
  FILE *m = fopen("/proc/self/maps", "r");
  char line[4096 + 128];
  mf[0] = 0;
  while (m && fgets(line, sizeof line, m)) {
    unsigned long long s, e;
    if (sscanf(line, "%llx-%llx", &s, &e) == 2 && (uintptr_t)fa >= s && (uintptr_t)fa < e)
      snprintf(mf, sizeof mf, "/proc/self/map_files/%llx-%llx", s, e);
  }
  if (m) fclose(m);
  int fd = mf[0] ? open(mf, O_RDONLY) : -1;
  if (fd >= 0) {
    close(fd);
    return 2;
  }
  /* the mappings are read now (an address in no file mapping: the stack's) */
  uint64_t a = (uint64_t)(uintptr_t)&a;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  lx_sym_frames(&w, (uint32_t)getpid(), &a, 1, 0);
  etw_jw_free(&w);
  if (variant) {
    if (rename(p, keep) != 0) return 1;
    if (variant == 1 ? symlink(keep, p) != 0 : mkfifo(p, 0600) != 0) return 1;
  }
  alarm(10); /* a hang on the FIFO ends the child: the parent sees the signal */
  a = (uint64_t)(uintptr_t)fa;
  etw_jw_init(&w, 0);
  lx_sym_frames(&w, (uint32_t)getpid(), &a, 1, 0);
  const char *t = etw_jw_cstr(&w);
  fprintf(stderr, "variant %d: %s\n", variant, t);
  int ok = strstr(t, "\"Module\":\"v") && strstr(t, "\"Offset\":") &&
           (variant == 0 ? strstr(t, "\"Symbol\":\"f5\",\"Offset\":0}") != NULL
                         : strstr(t, "\"Symbol\"") == NULL);
  etw_jw_free(&w);
  return ok ? 0 : 1;
}

static void swaps(void) {
  for (int v = 0; v < 3; v++) {
    pid_t c = fork();
    if (c == 0) _exit(child(v));
    int st = 0;
    CHECK(c > 0 && waitpid(c, &st, 0) == c);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fprintf(stderr, "variant %d: %s %d\n", v, WIFEXITED(st) ? "exit" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/etwd-symb-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  CHECK_EQ(build_so(), 0);
  bounds();
  swaps();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) CHECK(0);
  T_DONE();
}
