/* linux_tdat.c — file mode of the Linux backend: raw ring-buffer pages → trace.dat (version 6).
 *
 * Format: trace-cmd.dat.v6(5). A v6 file keeps each CPU's pages contiguous and lists
 * (offset, size) per CPU in the header, so the data cannot be appended in place while several
 * CPUs record. Each reader thread therefore appends its raw pages (no decoding) to its own spool
 * (an anonymous O_TMPFILE beside the target, or a file unlinked at once), and lx_tdat_finish()
 * writes header + spools to `<path>.part` and renames it onto <path> — so <path> is always either
 * absent or a complete file. At open, <path> gets a valid trace.dat with no events; while
 * recording, the backend refreshes it the same way about every second (lx_tdat_snapshot) as long
 * as the recording is small (LX_SNAPSHOT_MAX in linux_backend.c), so a download during the
 * recording gets the events up to about a second ago and never a torn file.
 *
 * Threads: lx_tdat_page() for CPU n is called only by the reader thread of CPU n; snapshot by one
 * thread at a time while readers append (it copies only the bytes counted, which are written
 * before they are counted); finish/abort after the readers and the snapshot thread were joined;
 * bytes any time. Sizes are bounded by LX_TDAT_MAX_PER_CPU: beyond it pages are counted as lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tracefs.h>

#include "linux/linux_int.h"

#define LX_TDAT_MAX_PER_CPU (64ull << 30) /* hard maximum of one CPU's spool */

struct lx_tdat {
  char *path;
  int ncpu, page_size;
  int *fd;
  _Atomic uint64_t *bytes;
  _Atomic uint64_t lost_pages;
};

struct wbuf {
  int fd;
  uint64_t off;
  int err;
};

static void wr(struct wbuf *b, const void *p, size_t n) {
  const char *c = p;
  while (n && !b->err) {
    ssize_t k = write(b->fd, c, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      b->err = errno;
      return;
    }
    c += k;
    n -= (size_t)k;
    b->off += (uint64_t)k;
  }
}
static void wr_u16(struct wbuf *b, uint16_t v) { wr(b, &v, 2); }
static void wr_u32(struct wbuf *b, uint32_t v) { wr(b, &v, 4); }
static void wr_u64(struct wbuf *b, uint64_t v) { wr(b, &v, 8); }

static int open_spool(const char *path) {
  char *dup = strdup(path);
  if (!dup) return -1;
  const char *dir = dirname(dup);
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.spoolXXXXXX", path);
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd >= 0) unlink(tmp);
  }
  free(dup);
  return fd;
}

/* header through the "flyrecord" table; @sizes NULL = all zero; returns the data offset */
static uint64_t write_header(struct lx_tdat *t, struct wbuf *b, const char *const *systems,
                             const uint64_t *sizes) {
  static const char magic[] = {0x17, 0x08, 0x44, 't', 'r', 'a', 'c', 'i', 'n', 'g', '6', 0};
  wr(b, magic, sizeof magic);
  uint8_t endian = 0, lsize = (uint8_t)sizeof(long);
  wr(b, &endian, 1);
  wr(b, &lsize, 1);
  wr_u32(b, (uint32_t)t->page_size);
  /* header info */
  static const char *const hdr[2][2] = {{"header_page", "events/header_page"},
                                        {"header_event", "events/header_event"}};
  for (int i = 0; i < 2; i++) {
    int sz = 0;
    char *txt = tracefs_instance_file_read(NULL, hdr[i][1], &sz);
    wr(b, hdr[i][0], strlen(hdr[i][0]) + 1);
    wr_u64(b, txt && sz > 0 ? (uint64_t)sz : 0);
    if (txt && sz > 0) wr(b, txt, (size_t)sz);
    free(txt);
  }
  /* ftrace event formats: none */
  wr_u32(b, 0);
  /* event formats of the recorded systems */
  uint32_t nsys = 0;
  while (systems && systems[nsys]) nsys++;
  wr_u32(b, nsys);
  for (uint32_t i = 0; i < nsys; i++) {
    char **evs = tracefs_system_events(NULL, systems[i]);
    uint32_t ne = 0, cap = 0;
    while (evs && evs[cap]) cap++;
    /* on the heap: this runs on the caller's thread (a server worker may have a small stack) */
    char **fmts = calloc(cap ? cap : 1, sizeof *fmts);
    int *fsz = calloc(cap ? cap : 1, sizeof *fsz);
    if (!fmts || !fsz) {
      free(fmts);
      free(fsz);
      tracefs_list_free(evs);
      b->err = ENOMEM;
      return 0;
    }
    for (uint32_t j = 0; j < cap; j++) {
      int sz = 0;
      char *f = tracefs_event_file_read(NULL, systems[i], evs[j], "format", &sz);
      if (!f || sz <= 0) {
        free(f);
        continue;
      }
      fmts[ne] = f;
      fsz[ne] = sz;
      ne++;
    }
    tracefs_list_free(evs);
    wr(b, systems[i], strlen(systems[i]) + 1);
    wr_u32(b, ne);
    for (uint32_t j = 0; j < ne; j++) {
      wr_u64(b, (uint64_t)fsz[j]);
      wr(b, fmts[j], (size_t)fsz[j]);
      free(fmts[j]);
    }
    free(fmts);
    free(fsz);
  }
  /* kallsyms, printk formats: none */
  wr_u32(b, 0);
  wr_u32(b, 0);
  /* saved cmdlines */
  {
    int sz = 0;
    char *txt = tracefs_instance_file_read(NULL, "saved_cmdlines", &sz);
    wr_u64(b, txt && sz > 0 ? (uint64_t)sz : 0);
    if (txt && sz > 0) wr(b, txt, (size_t)sz);
    free(txt);
  }
  wr_u32(b, (uint32_t)t->ncpu);
  /* options: trace clock, then end */
  wr(b, "options  ", 10);
  {
    static const char clk[] = "[mono]";
    wr_u16(b, 4); /* TRACECLOCK */
    wr_u32(b, sizeof clk);
    wr(b, clk, sizeof clk);
    wr_u16(b, 0);
  }
  wr(b, "flyrecord", 10);
  uint64_t table = b->off + (uint64_t)t->ncpu * 16;
  uint64_t data = (table + (uint64_t)t->page_size - 1) / (uint64_t)t->page_size * (uint64_t)t->page_size;
  uint64_t off = data;
  for (int c = 0; c < t->ncpu; c++) {
    uint64_t sz = sizes ? sizes[c] : 0;
    wr_u64(b, sz ? off : 0);
    wr_u64(b, sz);
    off += sz;
  }
  static const char zero[4096];
  while (b->off < data && !b->err) {
    uint64_t n = data - b->off;
    wr(b, zero, n > sizeof zero ? sizeof zero : (size_t)n);
  }
  return data;
}

static int write_file(struct lx_tdat *t, const char *const *systems, const uint64_t *sizes,
                      int copy) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.part", t->path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return -1;
  struct wbuf b = {.fd = fd};
  write_header(t, &b, systems, sizes);
  for (int c = 0; copy && c < t->ncpu && !b.err; c++) {
    loff_t in = 0;
    uint64_t left = sizes[c];
    while (left && !b.err) {
      ssize_t k = copy_file_range(t->fd[c], &in, fd, NULL, left > (1u << 30) ? (1u << 30) : left, 0);
      if (k <= 0) {
        /* fallback: plain read/write */
        char buf[65536];
        ssize_t r = pread(t->fd[c], buf, left > sizeof buf ? sizeof buf : left, in);
        if (r <= 0) {
          b.err = r < 0 ? errno : EIO;
          break;
        }
        wr(&b, buf, (size_t)r);
        in += r;
        left -= (uint64_t)r;
        continue;
      }
      left -= (uint64_t)k;
      b.off += (uint64_t)k;
    }
  }
  if (close(fd) != 0 && !b.err) b.err = errno;
  if (b.err || rename(tmp, t->path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

struct lx_tdat *lx_tdat_open(const char *path, int ncpu, int page_size, char *err, size_t errlen) {
  struct lx_tdat *t = calloc(1, sizeof *t);
  if (!t) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  t->path = strdup(path);
  t->ncpu = ncpu;
  t->page_size = page_size;
  t->fd = calloc((size_t)ncpu, sizeof *t->fd);
  t->bytes = calloc((size_t)ncpu, sizeof *t->bytes);
  if (!t->path || !t->fd || !t->bytes) {
    snprintf(err, errlen, "out of memory");
    lx_tdat_abort(t);
    return NULL;
  }
  for (int c = 0; c < ncpu; c++) t->fd[c] = -1;
  for (int c = 0; c < ncpu; c++) {
    t->fd[c] = open_spool(path);
    if (t->fd[c] < 0) {
      snprintf(err, errlen, "cannot create a spool beside %s: %s", path, strerror(errno));
      lx_tdat_abort(t);
      return NULL;
    }
  }
  /* a valid, empty recording until stop */
  static const char *const none[] = {NULL};
  if (write_file(t, none, NULL, 0) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    lx_tdat_abort(t);
    return NULL;
  }
  return t;
}

int lx_tdat_page(struct lx_tdat *t, int cpu, const void *page) {
  if (cpu < 0 || cpu >= t->ncpu) return -1;
  uint64_t have = atomic_load_explicit(&t->bytes[cpu], memory_order_relaxed);
  if (have + (uint64_t)t->page_size > LX_TDAT_MAX_PER_CPU) {
    atomic_fetch_add(&t->lost_pages, 1);
    return -1;
  }
  const char *p = page;
  size_t left = (size_t)t->page_size;
  while (left) {
    ssize_t k = write(t->fd[cpu], p, left);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      /* keep the spool page-aligned: roll back a partial page */
      if (ftruncate(t->fd[cpu], (off_t)have) == 0) lseek(t->fd[cpu], (off_t)have, SEEK_SET);
      atomic_fetch_add(&t->lost_pages, 1);
      return -1;
    }
    p += k;
    left -= (size_t)k;
  }
  atomic_fetch_add_explicit(&t->bytes[cpu], (uint64_t)t->page_size, memory_order_relaxed);
  return 0;
}

uint64_t lx_tdat_lost_pages(struct lx_tdat *t) { return atomic_load(&t->lost_pages); }

uint64_t lx_tdat_bytes(struct lx_tdat *t) {
  uint64_t n = 0;
  for (int c = 0; c < t->ncpu; c++) n += atomic_load(&t->bytes[c]);
  return n;
}

void lx_tdat_abort(struct lx_tdat *t) {
  if (!t) return;
  for (int c = 0; t->fd && c < t->ncpu; c++)
    if (t->fd[c] >= 0) close(t->fd[c]);
  free(t->fd);
  free((void *)t->bytes);
  free(t->path);
  free(t);
}

int lx_tdat_snapshot(struct lx_tdat *t, const char *const *systems) {
  uint64_t sizes[256] = {0};
  int n = t->ncpu > 256 ? 256 : t->ncpu;
  for (int c = 0; c < n; c++) sizes[c] = atomic_load(&t->bytes[c]);
  return write_file(t, systems, sizes, 1);
}

int lx_tdat_finish(struct lx_tdat *t, const char *const *systems, const char *clock) {
  (void)clock;
  uint64_t sizes[256] = {0};
  int n = t->ncpu > 256 ? 256 : t->ncpu;
  for (int c = 0; c < n; c++) sizes[c] = atomic_load(&t->bytes[c]);
  int rc = write_file(t, systems, sizes, 1);
  lx_tdat_abort(t);
  return rc;
}
