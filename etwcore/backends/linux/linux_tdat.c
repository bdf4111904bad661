/* linux_tdat.c — file mode of the Linux backend: raw ring-buffer pages → trace.dat (version 6).
 *
 * Format: trace-cmd.dat.v6(5). A v6 file keeps each CPU's pages contiguous and lists
 * (offset, size) per CPU in the header, so the data cannot be appended in place while several
 * CPUs record. Each reader thread therefore appends its raw pages (no decoding) to its own spool
 * (an anonymous O_TMPFILE beside the target, or a file unlinked at once), and lx_tdat_finish()
 * writes header + spools to `<path>.part` and renames it onto <path> — so <path> is always either
 * absent or a complete file. At open, <path> gets a valid trace.dat with no events; while
 * recording, the backend refreshes it the same way about every second (lx_tdat_snapshot) as long
 * as the recording is small (LX_SNAPSHOT_MAX in linux_sess.h), so a download during the
 * recording gets the events up to about a second ago and never a torn file.
 *
 * A failed spool write (disk full, EIO) freezes the recording: no page is spooled after it
 * (lx_tdat_error says why), and the final write (lx_tdat_final, by the backend's snapshot thread
 * at once, or lx_tdat_finish at stop) holds every page spooled before. The final write needs
 * no free space: a reserve file (anonymous, beside the spools) holds the room for its header plus
 * LX_TDAT_SLACK (lx_tdat_reserve, sized again when a system is added) and is emptied first; then
 * each spool is copied in chunks and every copied chunk punched out of the spool. If the disk is
 * still full it removes the last snapshot (<path>) to make room, and if even that is not enough
 * the file keeps the whole pages copied so far (its table rewritten to match) and the rest is
 * counted as lost.
 *
 * Threads: lx_tdat_page() for CPU n is called only by the reader thread of CPU n, under that
 * CPU's mutex (the final write takes every CPU's mutex to freeze the sizes); snapshot by one
 * thread at a time while readers append (it copies only the bytes counted, which are written
 * before they are counted); lx_tdat_final by one thread, once; finish/abort after the readers and
 * the snapshot thread were joined; the counters any time. Sizes are bounded by
 * LX_TDAT_MAX_PER_CPU: beyond it pages are counted as lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tracefs.h>

#include "linux/linux_int.h"

#define LX_TDAT_MAX_PER_CPU (64ull << 30) /* hard maximum of one CPU's spool */

#define LX_TDAT_CHUNK (4u << 20) /* final write: bytes copied (and punched out) at a time */
#define LX_TDAT_SLACK (256u << 10) /* reserved beyond the header: room for copying in chunks */

struct lx_tdat {
  char *path;
  int ncpu, page_size;
  int *fd;
  pthread_mutex_t *mu;        /* per CPU: held by lx_tdat_page; all of them freeze the sizes */
  int nmu;                    /* mutexes initialised */
  _Atomic uint64_t *bytes;
  _Atomic uint64_t lost_pages;
  _Atomic uint64_t events;    /* events in the pages spooled */
  atomic_int err;             /* errno of the first failed spool write (0 = none) */
  atomic_int frozen;          /* 1 = no more pages (failed, or the final write started) */
  atomic_int done;            /* 1 = the final file was written (final_rc says how) */
  int rfd;                    /* the reserve file (-1 = none), guarded by rmu */
  pthread_mutex_t rmu;
  int final_rc;               /* 0 = complete, 1 = kept what fitted, -1 = failed */
  int final_err;              /* errno of the final write when final_rc != 0 */
  uint64_t final_bytes;       /* page bytes in the final file */
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
                             const uint64_t *sizes, uint64_t *table_off) {
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
  /* ftrace event formats: the stack records (`stacks: true`, linux_stack.c), so that a
   * recording's stacks are shown by trace-cmd */
  {
    static const char *const fev[2] = {"kernel_stack", "user_stack"};
    char *ff[2] = {NULL, NULL};
    int fs[2] = {0, 0};
    uint32_t nf = 0;
    for (int i = 0; i < 2; i++) {
      ff[nf] = tracefs_event_file_read(NULL, "ftrace", fev[i], "format", &fs[nf]);
      if (ff[nf] && fs[nf] > 0) nf++;
      else free(ff[nf]), ff[nf] = NULL;
    }
    wr_u32(b, nf);
    for (uint32_t i = 0; i < nf; i++) {
      wr_u64(b, (uint64_t)fs[i]);
      wr(b, ff[i], (size_t)fs[i]);
      free(ff[i]);
    }
  }
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
  *table_off = b->off;
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

/* Copy up to @n bytes of @in (from *@off) to @out's position. Bytes copied, or -errno. */
static ssize_t copy_chunk(int in, loff_t *off, int out, size_t n) {
  ssize_t k = copy_file_range(in, off, out, NULL, n, 0);
  if (k >= 0 || (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP))
    return k < 0 ? -errno : k;
  char buf[65536]; /* fallback: plain read/write */
  ssize_t r = pread(in, buf, n > sizeof buf ? sizeof buf : n, *off);
  if (r <= 0) return r < 0 ? -errno : -EIO;
  ssize_t w;
  do w = write(out, buf, (size_t)r); while (w < 0 && errno == EINTR);
  if (w <= 0) return w < 0 ? -errno : -EIO;
  *off += w;
  return w;
}

static int no_space(int e) { return e == ENOSPC || e == EDQUOT; }

/* Make room on a full disk, once: remove <path> (the last snapshot; the new file replaces it). */
static int make_room(struct lx_tdat *t, int *freed) {
  if (*freed) return 0;
  *freed = unlink(t->path) == 0;
  return *freed;
}

/* Copy the first @n bytes of CPU @c's spool to @fd's position. @final: punch each copied chunk
 * out of the spool, and make room once when the disk is full. 0 or the errno; *@copied. */
static int copy_spool(struct lx_tdat *t, int c, int fd, uint64_t n, int final, int *freed,
                      uint64_t *copied) {
  loff_t in = 0;
  int e = 0;
  while ((uint64_t)in < n) {
    uint64_t left = n - (uint64_t)in;
    loff_t at = in;
    ssize_t k = copy_chunk(t->fd[c], &in, fd, left > LX_TDAT_CHUNK ? LX_TDAT_CHUNK : left);
    if (k < 0 && final && no_space((int)-k) && make_room(t, freed)) continue;
    if (k <= 0) {
      e = k < 0 ? (int)-k : EIO;
      break;
    }
    if (final) /* the copy is in the file now: give the spool's blocks back */
      fallocate(t->fd[c], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at, k);
  }
  *copied = (uint64_t)in;
  return e;
}

/* The disk could not hold CPU @c's data (it starts at @pos; @copied bytes made it): keep its
 * whole pages and no CPU after it: cut the file there and rewrite the table at @table (the data
 * begins at @data0) for the new @sizes. 0 or the errno. */
static int cut_file(struct lx_tdat *t, int fd, uint64_t table, uint64_t data0, uint64_t pos,
                    uint64_t *sizes, int c, uint64_t copied) {
  sizes[c] = copied / (uint64_t)t->page_size * (uint64_t)t->page_size;
  for (int k = c + 1; k < t->ncpu; k++) sizes[k] = 0;
  if (ftruncate(fd, (off_t)(pos + sizes[c])) != 0) return errno;
  uint64_t off = data0, ent[2];
  for (int k = 0; k < t->ncpu; k++) { /* overwrites bytes in place: needs no free space */
    ent[0] = sizes[k] ? off : 0;
    ent[1] = sizes[k];
    off += sizes[k];
    if (pwrite(fd, ent, sizeof ent, (off_t)(table + (uint64_t)k * 16)) != (ssize_t)sizeof ent)
      return errno ? errno : EIO;
  }
  return 0;
}

/* Write header + @sizes bytes of each spool (@copy) to <path>.part, then rename it onto <path>.
 * @final: the reserve is given back first, each copied chunk is punched out of its spool, on a
 * full disk <path> (the last snapshot) is removed for room, and if that is not enough the file
 * keeps the whole pages copied so far (@sizes is cut to them). Returns 0 (complete), 1 (@final:
 * cut), -1 (failed, <path> untouched unless @final removed it); *@err gets the errno. */
static int write_file(struct lx_tdat *t, const char *const *systems, uint64_t *sizes, int copy,
                      int final, int *err) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.part", t->path);
  int freed = 0, cut = 0;
  *err = 0;
  if (final) {
    pthread_mutex_lock(&t->rmu);
    if (t->rfd >= 0) close(t->rfd);
    t->rfd = -1;
    pthread_mutex_unlock(&t->rmu);
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0 && final && no_space(errno) && make_room(t, &freed))
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  struct wbuf b = {.fd = fd};
  uint64_t table = 0;
  uint64_t pos = write_header(t, &b, systems, sizes, &table), data0 = pos;
  if (final && no_space(b.err) && make_room(t, &freed) && ftruncate(fd, 0) == 0 &&
      lseek(fd, 0, SEEK_SET) == 0) {
    b = (struct wbuf){.fd = fd};
    pos = data0 = write_header(t, &b, systems, sizes, &table);
  }
  for (int c = 0; copy && c < t->ncpu && !b.err; c++) {
    uint64_t copied = 0;
    b.err = copy_spool(t, c, fd, sizes[c], final, &freed, &copied);
    if (b.err && final) {
      *err = b.err;
      cut = 1;
      b.err = cut_file(t, fd, table, data0, pos, sizes, c, copied);
      break;
    }
    pos += sizes[c];
  }
  if (close(fd) != 0 && !b.err) b.err = errno;
  if (!b.err && rename(tmp, t->path) != 0) b.err = errno;
  if (b.err) {
    *err = b.err;
    unlink(tmp);
    return -1;
  }
  return cut;
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
  t->mu = calloc((size_t)ncpu, sizeof *t->mu);
  if (!t->path || !t->fd || !t->bytes || !t->mu) {
    snprintf(err, errlen, "out of memory");
    lx_tdat_abort(t);
    return NULL;
  }
  t->rfd = -1;
  pthread_mutex_init(&t->rmu, NULL);
  for (; t->nmu < ncpu; t->nmu++) pthread_mutex_init(&t->mu[t->nmu], NULL);
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
  int e = 0;
  if (write_file(t, none, NULL, 0, 0, &e) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
    lx_tdat_abort(t);
    return NULL;
  }
  return t;
}

int lx_tdat_page(struct lx_tdat *t, int cpu, const void *page, uint64_t nev) {
  if (cpu < 0 || cpu >= t->ncpu) return -1;
  pthread_mutex_lock(&t->mu[cpu]);
  uint64_t have = atomic_load_explicit(&t->bytes[cpu], memory_order_relaxed);
  if (atomic_load(&t->frozen) || have + (uint64_t)t->page_size > LX_TDAT_MAX_PER_CPU) {
    pthread_mutex_unlock(&t->mu[cpu]);
    atomic_fetch_add(&t->lost_pages, 1);
    return -1;
  }
  const char *p = page;
  size_t left = (size_t)t->page_size;
  while (left) {
    ssize_t k = write(t->fd[cpu], p, left);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      int e = k < 0 ? errno : EIO, zero = 0;
      /* keep the spool page-aligned: roll back a partial page */
      if (ftruncate(t->fd[cpu], (off_t)have) == 0) lseek(t->fd[cpu], (off_t)have, SEEK_SET);
      atomic_compare_exchange_strong(&t->err, &zero, e);
      atomic_store(&t->frozen, 1); /* nothing after the failure: the file ends where it did */
      pthread_mutex_unlock(&t->mu[cpu]);
      atomic_fetch_add(&t->lost_pages, 1);
      return -1;
    }
    p += k;
    left -= (size_t)k;
  }
  atomic_fetch_add_explicit(&t->bytes[cpu], (uint64_t)t->page_size, memory_order_relaxed);
  atomic_fetch_add_explicit(&t->events, nev, memory_order_relaxed);
  pthread_mutex_unlock(&t->mu[cpu]);
  return 0;
}

uint64_t lx_tdat_lost_pages(struct lx_tdat *t) { return atomic_load(&t->lost_pages); }
uint64_t lx_tdat_events(struct lx_tdat *t) { return atomic_load(&t->events); }
int lx_tdat_error(struct lx_tdat *t) { return atomic_load(&t->err); }

uint64_t lx_tdat_bytes(struct lx_tdat *t) {
  if (atomic_load(&t->done)) return t->final_bytes;
  uint64_t n = 0;
  for (int c = 0; c < t->ncpu; c++) n += atomic_load(&t->bytes[c]);
  return n;
}

void lx_tdat_abort(struct lx_tdat *t) {
  if (!t) return;
  for (int c = 0; t->fd && c < t->ncpu; c++)
    if (t->fd[c] >= 0) close(t->fd[c]);
  for (int c = 0; c < t->nmu; c++) pthread_mutex_destroy(&t->mu[c]);
  if (t->rfd >= 0) close(t->rfd);
  if (t->mu) pthread_mutex_destroy(&t->rmu);
  free(t->mu);
  free(t->fd);
  free((void *)t->bytes);
  free(t->path);
  free(t);
}

int lx_tdat_reserve(struct lx_tdat *t, const char *const *systems) {
  pthread_mutex_lock(&t->rmu);
  if (atomic_load(&t->done) || atomic_load(&t->frozen)) {
    pthread_mutex_unlock(&t->rmu);
    return 0;
  }
  int fd = t->rfd >= 0 ? t->rfd : open_spool(t->path), e = 0;
  struct wbuf b = {.fd = fd};
  uint64_t table;
  if (fd < 0 || ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) {
    e = errno;
  } else {
    write_header(t, &b, systems, NULL, &table); /* its size is the final header's, but for the table */
    e = b.err;
    if (!e && fallocate(fd, 0, 0, (off_t)(b.off + (uint64_t)t->ncpu * 16 + LX_TDAT_SLACK)) != 0)
      e = errno;
  }
  t->rfd = fd;
  pthread_mutex_unlock(&t->rmu);
  return e;
}

int lx_tdat_snapshot(struct lx_tdat *t, const char *const *systems, int *err) {
  uint64_t sizes[256] = {0};
  int n = t->ncpu > 256 ? 256 : t->ncpu;
  for (int c = 0; c < n; c++) sizes[c] = atomic_load(&t->bytes[c]);
  return write_file(t, systems, sizes, 1, 0, err);
}

int lx_tdat_final(struct lx_tdat *t, const char *const *systems, int *err) {
  if (atomic_load(&t->done)) {
    *err = t->final_err;
    return t->final_rc;
  }
  uint64_t sizes[256] = {0}, total = 0, cut = 0;
  int n = t->ncpu > 256 ? 256 : t->ncpu;
  for (int c = 0; c < t->ncpu; c++) pthread_mutex_lock(&t->mu[c]);
  atomic_store(&t->frozen, 1);
  for (int c = 0; c < n; c++) total += sizes[c] = atomic_load(&t->bytes[c]);
  for (int c = 0; c < t->ncpu; c++) pthread_mutex_unlock(&t->mu[c]);
  t->final_rc = write_file(t, systems, sizes, 1, 1, &t->final_err);
  for (int c = 0; c < n; c++) cut += sizes[c];
  t->final_bytes = t->final_rc < 0 ? 0 : cut;
  if (t->final_rc >= 0 && cut < total) atomic_fetch_add(&t->lost_pages, (total - cut) / (uint64_t)t->page_size);
  atomic_store(&t->done, 1);
  *err = t->final_err;
  return t->final_rc;
}

int lx_tdat_finish(struct lx_tdat *t, const char *const *systems, int *err) {
  int rc = lx_tdat_final(t, systems, err);
  lx_tdat_abort(t);
  return rc;
}
