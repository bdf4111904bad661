/* etl_trim.c — keep only the last seconds of an .etl file, in whole buffers (etw_etl_trim, etl.h).
 *
 * What: the Windows backend's flight recorder (mode "flight" with "flight_s"; the snapshot is
 * written by etwcore/backends/win/win_flight.c) has ETW write its in-memory buffering-mode
 * session to an .etl file, then calls etw_etl_trim with cut = now − flight_s so that the file
 * it serves holds the last flight_s seconds. The output is the input's logfile header buffer
 * and every event buffer that holds at least one record at or after the cut, in the input's
 * order and byte for byte (a compressed buffer stays compressed: it is judged by its
 * decompressed records, through the reader); the others are dropped whole. One field of the
 * copy changes: the logfile header's BuffersWritten (TRACE_LOGFILE_HEADER + 0x24, the number of
 * buffers in the file, which consumers read), set to the output's count. Nothing else needs to:
 * StartTime with the header record's timestamp is the clock's reference (not the first
 * event's), EndTime / EventsLost / BuffersLost describe the session, and buffers carry their own
 * sizes, processors and sequence numbers (gaps in those are normal in circular files).
 * Always kept, whatever their times: buffer 0 (its first record is the logfile header, which
 * every consumer needs; in relogged files it also holds PartitionInfoExtension and
 * LastDroppedTimes, in live ones BuildInfo and DbgIdRSDS) and any buffer whose BufferType is not
 * GENERIC (0): the header (4), rundown (1), reference-time (3) and debug-info (7) buffers carry
 * state that interprets the window (process and image lists, clock references, PDB ids), and
 * only GENERIC is known to hold nothing but a processor's ordinary events
 * (../shared/docs/etl-format.md §2).
 * Limits, as the Linux flight recorder with its ring-buffer pages (linux_flight.c): whole
 * buffers, and buffers are per processor, so up to one buffer per processor (plus the
 * always-kept ones) may hold records before the cut; every record at or after it is kept. What
 * a consumer derives from earlier records (process names, images for sample symbols, file names,
 * in-stream EventSource manifests) goes with the dropped buffers, as it goes out of ETW's ring.
 * How: pass 1 reads every record with the ETL reader (one buffer per processor at a time) and
 * counts, per buffer, its records and those at or after the cut; pass 2 copies the kept buffers
 * one at a time into "<out>.<pid>.tmp", patches BuffersWritten, and renames that to @out.
 * Damage anywhere in the input fails the whole trim, and no @out is left behind.
 * Threads: any; everything here is the caller's (no globals).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etl_int.h"

#define LFH_BUFFERS_WRITTEN (BH + 0x20 + 0x24) /* buffer header, SYSTEM header, then the field */
#define BUFTYPE_GENERIC 0

/* Pass 1's counts of one buffer of the input. */
struct tbuf {
  uint32_t n;     /* records */
  uint32_t after; /* of them at or after the cut */
};

/* The buffer of @f at offset @off (the index is in file order), or UINT32_MAX. */
static uint32_t buf_at(const struct efile *f, uint64_t off) {
  uint32_t lo = 0, hi = f->n_bufs;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (f->bufs[mid].off < off) lo = mid + 1;
    else hi = mid;
  }
  return lo < f->n_bufs && f->bufs[lo].off == off ? lo : UINT32_MAX;
}

/* Pass 1: every record of the reader's one file into @tb (by its buffer). */
static enum etw_err count_records(struct etw_etl_reader *r, struct tbuf *tb, uint64_t cut_ft,
                                  struct etw_status *st) {
  const struct efile *f = &r->files[0];
  const struct etw_rec *recs[256];
  uint64_t last_off = UINT64_MAX;
  uint32_t b = 0;
  int k;
  while ((k = etw_etl_reader_next_batch(r, recs, sizeof recs / sizeof recs[0], st)) > 0) {
    for (int i = 0; i < k; i++) {
      if (recs[i]->file_offset != last_off) {
        last_off = recs[i]->file_offset;
        b = buf_at(f, last_off);
        if (b == UINT32_MAX)
          return etw_fail(st, ETW_E_INTERNAL, NULL, "%s: a record of no indexed buffer (offset %llu)",
                          f->path, (unsigned long long)last_off);
      }
      tb[b].n++;
      tb[b].after += recs[i]->filetime >= cut_ft;
    }
  }
  return k < 0 ? (st->code ? st->code : ETW_E_CORRUPT) : ETW_E_OK;
}

static enum etw_err write_fail(struct etw_status *st, const char *out, const char *what) {
  return etw_fail(st, ETW_E_IO, NULL, "%s: cannot %s: %s", out, what, strerror(errno ? errno : EIO));
}

/* Pass 2: the kept buffers of @f (read through @in) into @o (the file @out); counts into @ts. */
static enum etw_err copy_kept(const struct efile *f, const struct tbuf *tb, FILE *in, FILE *o,
                              const char *out, struct etw_etl_trim_stats *ts, struct etw_status *st) {
  unsigned char *buf = NULL;
  uint32_t cap = 0;
  enum etw_err e = ETW_E_OK;
  for (uint32_t i = 0; i < f->n_bufs && !e; i++) {
    const struct bufent *b = &f->bufs[i];
    if (b->size > cap) {
      unsigned char *nb = realloc(buf, b->size);
      if (!nb) {
        e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
        break;
      }
      buf = nb;
      cap = b->size;
    }
    errno = 0;
#ifdef _WIN32
    int sk = _fseeki64(in, (long long)b->off, SEEK_SET);
#else
    int sk = fseeko(in, (off_t)b->off, SEEK_SET);
#endif
    if (sk || fread(buf, 1, b->size, in) != b->size || rd32(buf) != b->size) {
      e = etw_fail(st, ETW_E_IO, NULL, "%s: cannot read the buffer at offset %llu again (file changed?)",
                   f->path, (unsigned long long)b->off);
      break;
    }
    ts->bytes_in += b->size;
    int always = i == 0 || rd16(buf + 0x36) != BUFTYPE_GENERIC;
    if (!always && !tb[i].after) {
      ts->buffers_dropped++;
      ts->events_dropped += tb[i].n;
      continue;
    }
    ts->buffers_kept++;
    ts->buffers_always += always;
    ts->events_kept += tb[i].n;
    ts->events_before_cut += tb[i].n - tb[i].after;
    errno = 0;
    if (fwrite(buf, 1, b->size, o) != b->size) e = write_fail(st, out, "write");
    ts->bytes_out += b->size;
  }
  free(buf);
  if (e) return e;
  /* BuffersWritten: the count in this file (buffer 0 holds the logfile header: add_file) */
  unsigned char n[4];
  uint32_t v = (uint32_t)ts->buffers_kept;
  n[0] = (unsigned char)v;
  n[1] = (unsigned char)(v >> 8);
  n[2] = (unsigned char)(v >> 16);
  n[3] = (unsigned char)(v >> 24);
  errno = 0;
  if (fseek(o, LFH_BUFFERS_WRITTEN, SEEK_SET) || fwrite(n, 1, 4, o) != 4) return write_fail(st, out, "write");
  return ETW_E_OK;
}

/* Are @a and @b one file (the same name; on POSIX the same inode, on Windows the same full
 * path, case ignored)? */
static int same_file(const char *a, const char *b) {
  if (!strcmp(a, b)) return 1;
#ifdef _WIN32
  char fa[1024], fb[1024];
  if (_fullpath(fa, a, sizeof fa) && _fullpath(fb, b, sizeof fb) && !_stricmp(fa, fb)) return 1;
#else
  struct stat sa, sb;
  if (!stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) return 1;
#endif
  return 0;
}

/* The trim into the open temporary file @o (@tmp), renamed to @out when complete. */
static enum etw_err trim(const char *in, const char *out, const char *tmp, FILE *o, uint64_t cut_ft,
                         struct etw_etl_trim_stats *ts, struct etw_status *st) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  if (!r) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  struct tbuf *tb = NULL;
  enum etw_err e = etw_etl_reader_add_file(r, in, st);
  if (!e) {
    const struct efile *f = &r->files[0];
    if (!(tb = calloc(f->n_bufs ? f->n_bufs : 1, sizeof *tb))) e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    else e = count_records(r, tb, cut_ft, st);
    /* (the reader is done with its file: pass 2 reads it through the same handle) */
    if (!e) e = copy_kept(f, tb, f->fp, o, out, ts, st);
  }
  free(tb);
  etw_etl_reader_free(r);
  errno = 0;
  if (!e && fflush(o)) e = write_fail(st, tmp, "write");
  if (!e && fsync(fileno(o))) e = write_fail(st, tmp, "sync");
  errno = 0;
  if (fclose(o) && !e) e = write_fail(st, tmp, "write");
  errno = 0;
  if (!e && rename(tmp, out)) e = write_fail(st, out, "rename the temporary file to it");
  return e;
}

enum etw_err etw_etl_trim(const char *in, const char *out, uint64_t cut_ft,
                          struct etw_etl_trim_stats *ts, struct etw_status *st) {
  struct etw_etl_trim_stats local;
  struct etw_status lst;
  if (!ts) ts = &local;
  if (!st) st = &lst;
  memset(ts, 0, sizeof *ts);
  if (!in || !out || !*in || !*out) return etw_fail(st, ETW_E_INVALID, NULL, "etl trim: no input or output file");
  if (same_file(in, out))
    return etw_fail(st, ETW_E_INVALID, NULL, "etl trim: the output %s is the input file", out);
  size_t n = strlen(out) + 32;
  char *tmp = malloc(n);
  if (!tmp) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  snprintf(tmp, n, "%s.%ld.tmp", out, (long)getpid());
  enum etw_err e;
  FILE *o = fopen(tmp, "wb");
  if (!o) e = etw_fail(st, ETW_E_IO, NULL, "%s: cannot create its temporary file %s: %s", out, tmp, strerror(errno));
  else e = trim(in, out, tmp, o, cut_ft, ts, st);
  if (e) { /* never a half-written output, nor an older one that could pass for this one */
    struct stat sb;
    remove(tmp);
    if (!stat(out, &sb) && S_ISREG(sb.st_mode)) remove(out);
  }
  free(tmp);
  return e;
}
