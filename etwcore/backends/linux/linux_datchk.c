/* linux_datchk.c — is a trace.dat whole? For `etwd convert` (linux_dat.c), before libtracecmd
 * opens it: Debian's libtracecmd 3.1.6 refuses a file whose CPU data ends before the header's
 * table says ("File possibly truncated") and then crashes in its own clean-up (a NULL read in
 * tracecmd_close from tracecmd_open_fd's error path), so a truncated file must never reach it.
 *
 * A version 6 file (etwd's own, trace-cmd record's default; trace-cmd.dat.v6(5)) is read up to its
 * flyrecord table (the header page and event formats, the event systems, kallsyms, printk formats,
 * saved cmdlines, CPU count, options). When a CPU's data (offset, size) reaches beyond the end
 * of the file, the file is copied into an anonymous temporary file whose table says what is
 * really there: each cut CPU keeps its whole pages, and the page the cut went through keeps the
 * events that lie whole before the cut (its commit rewritten to the last whole event; a loss
 * count stored after the data is gone with it, so the page then says "events lost, number
 * unknown"). Other versions (v7: sections, compression) and buffer instances are not checked.
 *
 * One thread (the convert CLI). Allocates one page (the cut one) besides the copy.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* copy_file_range, O_TMPFILE */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "linux/linux_dat.h"

#define CHK_MAX_CPUS 4096
#define COMMIT_MASK ((1u << 27) - 1)
#define MISSED_STORED (1u << 30)

struct rd {
  FILE *f;
  int bad;
};

static uint64_t rd_n(struct rd *r, int n) {
  unsigned char b[8] = {0};
  if (r->bad || fread(b, 1, (size_t)n, r->f) != (size_t)n) {
    r->bad = 1;
    return 0;
  }
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i]; /* (little-endian files only: checked) */
  return v;
}

static void rd_skip(struct rd *r, uint64_t n) {
  if (!r->bad && (n > (1ull << 40) || fseeko(r->f, (off_t)n, SEEK_CUR))) r->bad = 1;
}

/* the next @n bytes equal @s */
static int rd_is(struct rd *r, const char *s, size_t n) {
  char b[16];
  if (r->bad || n > sizeof b || fread(b, 1, n, r->f) != n) return r->bad = 1, 0;
  return !memcmp(b, s, n);
}

static void rd_str(struct rd *r) { /* a NUL-terminated string (at most 4 KiB) */
  for (int i = 0; i < 4096 && !r->bad; i++) {
    int c = fgetc(r->f);
    if (c == EOF) r->bad = 1;
    if (c <= 0) return;
  }
  r->bad = 1;
}

/* The bytes of the page at @pg (@have of them in the file, fewer than a page) that hold whole
 * events: the new commit. @hdr: the page header's size (timestamp + commit word). */
static uint32_t whole_events(const unsigned char *pg, uint32_t have, uint32_t hdr, uint32_t commit) {
  uint32_t end = have - hdr < commit ? have - hdr : commit, pos = 0;
  const unsigned char *d = pg + hdr;
  while (pos + 4 <= end) {
    uint32_t h, a0 = 0, sz;
    memcpy(&h, d + pos, 4);
    uint32_t tl = h & 31;
    if (tl == 0 || tl == 29) {
      if (pos + 8 > end) break;
      memcpy(&a0, d + pos + 4, 4);
    }
    if (tl == 0) sz = a0 >= 4 ? 4 + ((a0 + 3) & ~3u) : 0;
    else if (tl == 29) sz = 4 + a0;
    else if (tl >= 30) sz = 8;
    else sz = 4 + 4 * tl;
    if (!sz || sz > end - pos) break;
    pos += sz;
  }
  return pos;
}

/* copy all of @in into a new anonymous file: its descriptor, or -1 */
static int copy_all(int in, uint64_t size) {
  const char *t = getenv("TMPDIR");
  const char *dir = t && *t ? t : "/tmp";
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/etwd-convert-XXXXXX", dir);
    if ((fd = mkstemp(tmpl)) < 0) return -1;
    unlink(tmpl);
  }
  loff_t off = 0;
  char buf[65536];
  while ((uint64_t)off < size) {
    ssize_t k = copy_file_range(in, &off, fd, NULL, (size_t)(size - (uint64_t)off), 0);
    if (k > 0) continue;
    if (k == 0) break;
    ssize_t r = pread(in, buf, sizeof buf, off), w = r > 0 ? write(fd, buf, (size_t)r) : -1;
    if (w != r || r <= 0) {
      close(fd);
      return -1;
    }
    off += r;
  }
  return (uint64_t)off == size ? fd : (close(fd), -1);
}

int lx_dat_check(const char *path, int *fd, char *msg, size_t msglen) {
  *fd = -1;
  FILE *f = fopen(path, "rb");
  if (!f) return 0; /* (libtracecmd says why) */
  struct stat st;
  struct rd r = {f, fstat(fileno(f), &st) != 0};
  uint64_t fsize = (uint64_t)st.st_size;
  int v6 = rd_is(&r, "\x17\x08\x44tracing", 10) && rd_is(&r, "6", 2);
  int ok = v6 && rd_n(&r, 1) == 0;
  int lsize = (int)rd_n(&r, 1);
  uint32_t page = (uint32_t)rd_n(&r, 4);
  ok = ok && !r.bad && (lsize == 4 || lsize == 8) && page >= 64 && page <= (1u << 20);
  if (ok && rd_is(&r, "header_page", 12)) rd_skip(&r, rd_n(&r, 8));
  else ok = 0;
  if (ok && rd_is(&r, "header_event", 13)) rd_skip(&r, rd_n(&r, 8));
  else ok = 0;
  for (uint32_t n = ok ? (uint32_t)rd_n(&r, 4) : 0; n-- && !r.bad;) rd_skip(&r, rd_n(&r, 8)); /* ftrace */
  for (uint32_t n = ok ? (uint32_t)rd_n(&r, 4) : 0; n-- && !r.bad;) {                          /* systems */
    rd_str(&r);
    for (uint32_t e = (uint32_t)rd_n(&r, 4); e-- && !r.bad;) rd_skip(&r, rd_n(&r, 8));
  }
  if (ok) rd_skip(&r, rd_n(&r, 4)); /* kallsyms */
  if (ok) rd_skip(&r, rd_n(&r, 4)); /* printk formats */
  if (ok) rd_skip(&r, rd_n(&r, 8)); /* saved cmdlines */
  uint32_t ncpu = ok ? (uint32_t)rd_n(&r, 4) : 0;
  char tag[10];
  ok = ok && !r.bad && ncpu && ncpu <= CHK_MAX_CPUS && fread(tag, 1, 10, f) == 10;
  if (ok && !memcmp(tag, "options  ", 10)) {
    for (int i = 0; i < 4096 && !r.bad; i++) {
      uint16_t id = (uint16_t)rd_n(&r, 2);
      if (!id) break;
      if (id == 3) ok = 0; /* a buffer instance: its tables are elsewhere (not checked) */
      rd_skip(&r, rd_n(&r, 4));
    }
    ok = ok && !r.bad && fread(tag, 1, 10, f) == 10;
  }
  ok = ok && !r.bad && !memcmp(tag, "flyrecord", 10);
  off_t table = ok ? ftello(f) : 0;
  uint64_t cut_bytes = 0, table_end = (uint64_t)table + 16ull * ncpu;
  int ncut = 0, first_cut = -1, inside = -1;
  for (uint32_t c = 0; ok && c < ncpu; c++) {
    uint64_t off = rd_n(&r, 8), size = rd_n(&r, 8);
    if (!r.bad && size && (size > fsize || off > fsize - size)) {
      cut_bytes += off < fsize ? size - (fsize - off) : size;
      if (!ncut++) first_cut = (int)c;
      if (off < table_end && inside < 0) inside = (int)c;
    }
  }
  if (ok && !r.bad && inside >= 0) { /* no writer puts data there: repairing it would write into the header */
    fclose(f);
    snprintf(msg, msglen, "%s: damaged trace.dat: the data of CPU %d begins inside the file's header and runs past "
             "its end: no events can be read", path, inside);
    return -1;
  }
  if (v6 && r.bad && feof(f)) { /* the cut went through the header or the table */
    fclose(f);
    snprintf(msg, msglen, "%s: damaged trace.dat: truncated inside its header (%llu bytes): no events can be read", path,
             (unsigned long long)fsize);
    return -1;
  }
  ok = ok && !r.bad;
  if (!ok || !ncut) {
    fclose(f);
    return 0;
  }
  int out = copy_all(fileno(f), fsize);
  unsigned char *pg = malloc(page);
  int bad = out < 0 || !pg;
  for (uint32_t c = 0; !bad && c < ncpu; c++) {
    unsigned char e[16];
    uint64_t off, size;
    if (pread(out, e, 16, table + 16 * (off_t)c) != 16) bad = 1;
    memcpy(&off, e, 8);
    memcpy(&size, e + 8, 8);
    if (bad || !size || (size <= fsize && off <= fsize - size)) continue;
    uint64_t have = off < fsize ? fsize - off : 0, whole = have / page * page, keep = whole;
    uint32_t part = (uint32_t)(have - whole), hdr = 8 + (uint32_t)lsize;
    if (part > hdr && pread(out, pg, part, (off_t)(off + whole)) == (ssize_t)part) {
      uint64_t cw = 0;
      memcpy(&cw, pg + 8, (size_t)lsize);
      uint32_t n = whole_events(pg, part, hdr, (uint32_t)cw & COMMIT_MASK);
      if (n) { /* the cut page, with its whole events: padded to a page */
        cw = (cw & ~(uint64_t)COMMIT_MASK & ~(uint64_t)MISSED_STORED) | n;
        memcpy(pg + 8, &cw, (size_t)lsize);
        memset(pg + part, 0, page - part);
        bad = pwrite(out, pg, page, (off_t)(off + whole)) != (ssize_t)page;
        keep += page;
      }
    }
    if (!keep) off = 0;
    memcpy(e, &off, 8);
    memcpy(e + 8, &keep, 8);
    bad = bad || pwrite(out, e, 16, table + 16 * (off_t)c) != 16;
  }
  fclose(f);
  free(pg);
  if (bad) {
    if (out >= 0) close(out);
    snprintf(msg, msglen, "%s: damaged trace.dat: truncated (its CPU data ends %llu bytes early), and no temporary copy "
             "could be made to read what it holds", path, (unsigned long long)cut_bytes);
    return -1;
  }
  snprintf(msg, msglen, "%s: damaged trace.dat: truncated inside the data of %d CPU%s (CPU %d first; %llu bytes missing): "
           "the events after the cut are lost", path, ncut, ncut > 1 ? "s" : "", first_cut,
           (unsigned long long)cut_bytes);
  lseek(out, 0, SEEK_SET); /* (libtracecmd reads from the descriptor's position) */
  *fd = out;
  return 1;
}
