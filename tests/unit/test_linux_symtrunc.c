/* test_linux_symtrunc.c — an ELF file that shrinks while the symboliser reads it (linux_sym.c).
 * A mapped file can be truncated and rewritten in place by anyone who can write it (a shared
 * library being reinstalled with `cp`, a build writing over its output). The symboliser reads
 * files of every traced process, so such a file must cost a failed or partial load, never the
 * server: a file read through a memory mapping raises SIGBUS at the first page beyond the new
 * end of file and would kill etwd.
 *
 * A copy of this test's own executable (symbols, several MB) is truncated to one page and
 * written back whole, over and over, by one thread, while the test loads it with lx_elf_load
 * for 3 s in a child process; the child must end normally (not by SIGBUS), having loaded the
 * file whole at least once, and a load of the intact file afterwards finds its symbols. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "linux/linux_sym.h"
#include "t.h"

static char path[64];
static char *img;
static size_t img_len;
static atomic_int quit;

static int read_self(void) {
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return -1;
  img_len = (size_t)st.st_size;
  img = malloc(img_len);
  size_t got = 0;
  while (img && got < img_len) {
    ssize_t n = read(fd, img + got, img_len - got);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  return img && got == img_len ? 0 : -1;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* the file at @path: cut to one page, then written back whole, in place (same inode) */
static void *shrinker(void *arg) {
  (void)arg;
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  while (fd >= 0 && !atomic_load(&quit)) {
    if (ftruncate(fd, 4096) != 0 || lseek(fd, 0, SEEK_SET) != 0) break;
    if (write_all(fd, img, img_len) != 0) break;
  }
  if (fd >= 0) close(fd);
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* the child: loads while the file shrinks and grows; exit 0 = survived, 2 = never loaded whole */
static int loader(void) {
  pthread_t th;
  if (pthread_create(&th, NULL, shrinker, NULL) != 0) return 3;
  unsigned loads = 0, whole = 0;
  uint32_t full = 0;
  struct lx_elf *ref = lx_elf_load("/proc/self/exe");
  if (ref) full = lx_elf_nsyms(ref);
  lx_elf_free(ref);
  for (double end = now_s() + 3; now_s() < end;) {
    struct lx_elf *e = lx_elf_load(path);
    loads++;
    if (e && full && lx_elf_nsyms(e) == full) whole++;
    lx_elf_free(e);
  }
  atomic_store(&quit, 1);
  pthread_join(th, NULL);
  fprintf(stderr, "loads %u, whole %u (of %u symbols)\n", loads, whole, full);
  return whole ? 0 : 2;
}

int main(void) {
  snprintf(path, sizeof path, "/tmp/etwd-symtrunc-%d", (int)getpid());
  CHECK(read_self() == 0);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CHECK(fd >= 0 && write_all(fd, img, img_len) == 0);
  if (fd >= 0) close(fd);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) _exit(loader());
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status))
    fprintf(stderr, "the loader died of signal %d (%s)\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* the intact file still loads with its symbols */
  fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  CHECK(fd >= 0 && write_all(fd, img, img_len) == 0);
  if (fd >= 0) close(fd);
  struct lx_elf *e = lx_elf_load(path), *ref = lx_elf_load("/proc/self/exe");
  CHECK(e && ref && lx_elf_nsyms(ref) > 0 && lx_elf_nsyms(e) == lx_elf_nsyms(ref));
  lx_elf_free(e);
  lx_elf_free(ref);
  unlink(path);
  free(img);
  T_DONE();
}
