/* etl_file.c — the files of an ETL reader: each file's logfile header (the clock) and the index
 * of its buffer headers (offset, processor, sequence number, compression), the streams (one per
 * file and processor, buffers by sequence number), and loading (decompressing) a stream's next
 * buffer. Every size read from a file is checked against the bytes there and the limits in
 * etl.h. Called on the reader's thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef _WIN32
#include <unistd.h> /* close */
#endif

#include "etl_int.h"


/* 64-bit file offsets on every platform (MinGW's off_t may be 32-bit). */
static int etl_fseek(FILE *fp, uint64_t off, int whence) {
#ifdef _WIN32
  return _fseeki64(fp, (long long)off, whence);
#else
  return fseeko(fp, (off_t)off, whence);
#endif
}


/* Test hook (not static so that the unit tests can set it): records per batch (1 .. ETL_BATCH). */
unsigned etw_etl_batch_max = ETL_BATCH;

void etl_set_damage(struct etw_etl_reader *r, uint32_t file, uint64_t off, const char *what) {
  if (r->err_set) return;
  r->err_set = 1;
  etw_fail(&r->err, ETW_E_CORRUPT, NULL, "%s: corrupt or truncated at offset %llu (0x%llx): %s",
           r->files[file].path, (unsigned long long)off, (unsigned long long)off, what);
}

struct etw_etl_reader *etw_etl_reader_new(void) {
  struct etw_etl_reader *r = calloc(1, sizeof *r);
  if (r) etw_etl_reader_set_mode(r, etw_decode_default());
  return r;
}

void etw_etl_reader_set_mode(struct etw_etl_reader *r, enum etw_decode_mode m) {
  r->generic = m == ETW_DECODE_REFERENCE;
}

void etw_etl_reader_set_nofollow(struct etw_etl_reader *r, int on) {
  r->nofollow = on != 0;
}

void etw_etl_reader_free(struct etw_etl_reader *r) {
  if (!r) return;
  for (uint32_t i = 0; i < r->n_files; i++) {
    if (r->files[i].fp) fclose(r->files[i].fp);
    free(r->files[i].path);
    free(r->files[i].bufs);
  }
  for (uint32_t i = 0; i < r->n_st; i++) {
    free(r->st[i].bi);
    free(r->st[i].pay);
    free(r->st[i].slots);
  }
  free(r->files);
  free(r->st);
  free(r->tree);
  free(r->tft);
  free(r->leaf);
  free(r->lst);
  free(r->raw);
  free(r);
}

/* Read @n bytes at @off of file @f into @dst; 0 on success. */
static int fread_at(struct efile *f, uint64_t off, void *dst, size_t n) {
  if (off > f->size || n > f->size - off) return -1;
  if (f->mem) {
    memcpy(dst, f->mem + off, n);
    return 0;
  }
  if (etl_fseek(f->fp, off, SEEK_SET)) return -1;
  return fread(dst, 1, n, f->fp) == n ? 0 : -1;
}


static int ensure(unsigned char **p, uint32_t *cap, uint32_t need) {
  if (need <= *cap) return 0;
  if (need > ETW_ETL_MAX_BUFFER + ETL_SLACK) return -1;
  uint32_t nc = *cap ? *cap : 65536;
  while (nc < need) nc = nc > ETW_ETL_MAX_BUFFER / 2 ? ETW_ETL_MAX_BUFFER + ETL_SLACK : nc * 2;
  unsigned char *np = realloc(*p, nc);
  if (!np) return -1;
  *p = np;
  *cap = nc;
  return 0;
}

/* ensure() for a stream's payload, within the reader's memory budget (all streams together). */
static int ensure_pay(struct etw_etl_reader *r, struct stream *s, uint32_t need) {
  if (need <= s->pay_cap) return 0;
  uint64_t before = s->pay_cap;
  if (r->mem + need > ETW_ETL_MAX_MEMORY) return -1;
  if (ensure(&s->pay, &s->pay_cap, need)) return -1;
  r->mem += s->pay_cap - before;
  return 0;
}

/* UTF-16LE (NUL-terminated within n bytes) → UTF-8 into out; returns bytes consumed incl. NUL. */
static size_t utf16z_to_utf8(const unsigned char *s, size_t n, char *out, size_t cap) {
  size_t i = 0, o = 0;
  while (i + 1 < n) {
    uint32_t c = rd16(s + i);
    i += 2;
    if (!c) break;
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < n) {
      uint32_t c2 = rd16(s + i);
      if (c2 >= 0xDC00 && c2 < 0xE000) {
        c = 0x10000 + ((c - 0xD800) << 10) + (c2 - 0xDC00);
        i += 2;
      }
    }
    if (c >= 0xD800 && c < 0xE000) c = 0xFFFD;
    char tmp[4];
    size_t k;
    if (c < 0x80) {
      tmp[0] = (char)c;
      k = 1;
    } else if (c < 0x800) {
      tmp[0] = (char)(0xC0 | c >> 6);
      tmp[1] = (char)(0x80 | (c & 63));
      k = 2;
    } else if (c < 0x10000) {
      tmp[0] = (char)(0xE0 | c >> 12);
      tmp[1] = (char)(0x80 | ((c >> 6) & 63));
      tmp[2] = (char)(0x80 | (c & 63));
      k = 3;
    } else {
      tmp[0] = (char)(0xF0 | c >> 18);
      tmp[1] = (char)(0x80 | ((c >> 12) & 63));
      tmp[2] = (char)(0x80 | ((c >> 6) & 63));
      tmp[3] = (char)(0x80 | (c & 63));
      k = 4;
    }
    if (o + k < cap) {
      memcpy(out + o, tmp, k);
      o += k;
    }
  }
  if (cap) out[o < cap ? o : cap - 1] = 0;
  return i;
}

/* Raw clock → FILETIME (UTC 100 ns), exact integer arithmetic without 128-bit types, on the
 * clock reference of file @f (etl_align_clocks). */
uint64_t etl_to_filetime(const struct efile *f, int64_t ts) {
  const struct etw_etl_info *in = &f->info;
  int64_t t0 = f->clk_t0;
  uint64_t freq = in->perf_freq;
  if (in->clock_type == 2) freq = 10000000;
  else if (in->clock_type == 3) freq = (uint64_t)in->cpu_mhz * 1000000u;
  if (!freq) freq = 10000000;
  int neg = ts < t0;
  uint64_t d = neg ? (uint64_t)t0 - (uint64_t)ts : (uint64_t)ts - (uint64_t)t0;
  uint64_t q = d / freq, rem = d % freq, ticks;
  if (freq == 10000000) {
    ticks = d;
  } else if (rem <= UINT64_MAX / 10000000u) {
    ticks = q * 10000000u + rem * 10000000u / freq;
  } else {
    ticks = q * 10000000u + (uint64_t)((double)rem * 1e7 / (double)freq);
  }
  return neg ? f->clk_start - ticks : f->clk_start + ticks;
}

/* Do files @a and @b count one clock? Both QPC (clock type 1) at the same frequency, recorded in
 * the same boot (the same BootTime FILETIME): their raw timestamps are then values of the one
 * counter the OS reads for every session of that boot. */
static int same_clock(const struct etw_etl_info *a, const struct etw_etl_info *b) {
  return a->clock_type == 1 && b->clock_type == 1 && a->perf_freq && a->perf_freq == b->perf_freq && a->boot_time &&
         a->boot_time == b->boot_time;
}

/* Is file @a's session the earlier-started one of @a and @b (least header timestamp, then least
 * StartTime, then the first given)? A total order: the choice does not depend on the order of
 * the files but for identical headers. */
static int started_before(const struct etw_etl_reader *r, uint32_t a, uint32_t b) {
  const struct etw_etl_info *x = &r->files[a].info, *y = &r->files[b].info;
  if (x->t0 != y->t0) return x->t0 < y->t0;
  if (x->start_time != y->start_time) return x->start_time < y->start_time;
  return a < b;
}

/* The file whose header aligns file @i: of the files sharing @i's clock, the one whose session
 * started first on that clock (started_before); else @i. */
static uint32_t clock_ref(const struct etw_etl_reader *r, uint32_t i) {
  uint32_t best = i;
  for (uint32_t j = 0; j < r->n_files; j++)
    if (j != i && same_clock(&r->files[i].info, &r->files[j].info) && started_before(r, j, best)) best = j;
  return best;
}

/* Files of one boot and QPC clock are aligned on their raw timestamps, as the OS orders them:
 * every one is converted with one header's (StartTime, timestamp) pair, the first-started
 * file's, so the µs by which the headers' StartTimes disagree no longer shift whole files
 * against each other (and reorder near-ties). Any other file keeps its own header. */
void etl_align_clocks(struct etw_etl_reader *r) {
  for (uint32_t i = 0; i < r->n_files; i++) {
    struct efile *f = &r->files[i];
    f->clk_ref = clock_ref(r, i);
    f->clk_t0 = r->files[f->clk_ref].info.t0;
    f->clk_start = r->files[f->clk_ref].info.start_time;
  }
}

int etw_etl_reader_clock_ref(const struct etw_etl_reader *r, uint32_t i) {
  return i < r->n_files ? (int)clock_ref(r, i) : -1;
}

/* The clock frequency to_filetime uses. */
static uint64_t clock_freq(const struct etw_etl_info *in) {
  uint64_t freq = in->perf_freq;
  if (in->clock_type == 2) freq = 10000000;
  else if (in->clock_type == 3) freq = (uint64_t)in->cpu_mhz * 1000000u;
  if (!freq) freq = 10000000;
  return freq;
}

/* Parse the logfile header record at the start of buffer 0's payload. */
static int parse_logfile_header(struct efile *f, const unsigned char *p, uint32_t n) {
  if (n < 0x20) return -1;
  uint32_t m = rd32(p);
  unsigned type = (m >> 16) & 0xFF;
  if ((m & 0xC0000000u) != 0xC0000000u || (type != 1 && type != 2) || rd16(p + 6) != 0) return -1;
  uint32_t size = rd16(p + 4);
  if (size > n || size < 0x20) return -1;
  int is64 = type == 2;
  const unsigned char *h = p + 0x20;
  uint32_t hl = size - 0x20, need = is64 ? 0x118 : 0x110;
  if (hl < need) return -1;
  struct etw_etl_info *in = &f->info;
  in->t0 = (int64_t)rd64(p + 0x10);
  in->buffer_size = rd32(h);
  in->version = rd32(h + 4);
  in->provider_version = rd32(h + 8);
  in->n_cpus = rd32(h + 0xC);
  in->end_time = rd64(h + 0x10);
  in->timer_resolution = rd32(h + 0x18);
  in->max_file_size = rd32(h + 0x1C);
  in->log_file_mode = rd32(h + 0x20);
  in->buffers_written = rd32(h + 0x24);
  in->start_buffers = rd32(h + 0x28);
  in->pointer_size = rd32(h + 0x2C);
  in->events_lost = rd32(h + 0x30);
  in->cpu_mhz = rd32(h + 0x34);
  uint32_t b = is64 ? 0x48 : 0x40; /* TimeZone */
  in->tz_bias = (int32_t)rd32(h + b);
  b += 176;
  in->boot_time = rd64(h + b);
  in->perf_freq = rd64(h + b + 8);
  in->start_time = rd64(h + b + 16);
  in->clock_type = rd32(h + b + 24);
  in->buffers_lost = rd32(h + b + 28);
  uint32_t s = need;
  s += (uint32_t)utf16z_to_utf8(h + s, hl - s, in->logger_name, sizeof in->logger_name);
  if (s < hl) utf16z_to_utf8(h + s, hl - s, in->log_file_name, sizeof in->log_file_name);
  return 0;
}

/* Index the buffers of file @fi. */
static enum etw_err index_file(struct etw_etl_reader *r, uint32_t fi, struct etw_status *st) {
  struct efile *f = &r->files[fi];
  unsigned char h[BH];
  uint64_t off = 0;
  uint32_t cap = 0;
  while (off < f->size) {
    if (f->size - off < BH) {
      f->damaged = 1;
      f->damage_off = off;
      snprintf(f->damage_msg, sizeof f->damage_msg, "truncated buffer header (%llu bytes left)",
               (unsigned long long)(f->size - off));
      break;
    }
    if (fread_at(f, off, h, BH)) return etw_fail(st, ETW_E_IO, NULL, "%s: read error at %llu", f->path, (unsigned long long)off);
    uint32_t bsize = rd32(h);
    if (bsize == 0 && rd32(h + 0x30) == 0) break; /* preallocated, never written: end of data */
    if (bsize < BH || bsize > ETW_ETL_MAX_BUFFER) {
      f->damaged = 1;
      f->damage_off = off;
      snprintf(f->damage_msg, sizeof f->damage_msg, "bad buffer size %u", bsize);
      break;
    }
    if (bsize > f->size - off) {
      f->damaged = 1;
      f->damage_off = off;
      snprintf(f->damage_msg, sizeof f->damage_msg,
               "buffer of %u bytes truncated (%llu bytes left)", bsize,
               (unsigned long long)(f->size - off));
      break;
    }
    if (f->n_bufs >= ETW_ETL_MAX_BUFFERS)
      return etw_fail(st, ETW_E_LIMIT, NULL, "%s: more than %u buffers", f->path, ETW_ETL_MAX_BUFFERS);
    if (f->n_bufs == cap) {
      uint32_t nc = cap ? cap * 2 : 64;
      struct bufent *nb = realloc(f->bufs, (size_t)nc * sizeof *nb);
      if (!nb) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
      f->bufs = nb;
      cap = nc;
    }
    struct bufent *e = &f->bufs[f->n_bufs++];
    e->off = off;
    e->size = bsize;
    e->seq = rd64(h + 0x18);
    e->flag = rd16(h + 0x34);
    e->cpu = (e->flag & 0x20) ? (rd16(h + 0x28) & 0x7FF) : h[0x28];
    off += bsize;
  }
  r->total += f->size;
  return ETW_E_OK;
}

static enum etw_err add_file(struct etw_etl_reader *r, const char *name, FILE *fp,
                             const unsigned char *mem, uint64_t size, struct etw_status *st) {
  if (r->started) {
    if (fp) fclose(fp);
    return etw_fail(st, ETW_E_STATE, NULL, "files must be added before reading");
  }
  if (r->n_files >= ETW_ETL_MAX_FILES) {
    if (fp) fclose(fp);
    return etw_fail(st, ETW_E_LIMIT, NULL, "at most %d files", ETW_ETL_MAX_FILES);
  }
  struct efile *nf = realloc(r->files, (r->n_files + 1) * sizeof *nf);
  if (!nf) {
    if (fp) fclose(fp);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  r->files = nf;
  struct efile *f = &r->files[r->n_files];
  memset(f, 0, sizeof *f);
  f->fp = fp;
  f->mem = mem;
  f->size = size;
  f->path = strdup(name ? name : "(memory)");
  if (!f->path) {
    if (fp) fclose(fp);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  f->info.path = f->path;
  r->n_files++;
  /* logfile header: first record of the first buffer (never compressed) */
  unsigned char h[BH];
  enum etw_err e = ETW_E_OK;
  if (size < BH || fread_at(f, 0, h, BH)) {
    e = etw_fail(st, ETW_E_CORRUPT, NULL, "%s: not an ETL file (shorter than a buffer header)", f->path);
  } else if (!memcmp(h, "\x17\x08\x44tracing", 10)) { /* etwd's own Linux recordings */
    e = etw_fail(st, ETW_E_CORRUPT, NULL,
                 "%s: not an ETL file but a trace-cmd file (a Linux recording): read it with "
                 "trace-cmd report -i FILE",
                 f->path);
  } else {
    uint32_t bsize = rd32(h), used = rd32(h + 0x30);
    if (bsize < BH || bsize > ETW_ETL_MAX_BUFFER || used > bsize) used = bsize;
    if (bsize < BH || bsize > ETW_ETL_MAX_BUFFER || bsize > size || used <= BH) {
      e = etw_fail(st, ETW_E_CORRUPT, NULL, "%s: not an ETL file (bad first buffer header at offset 0)", f->path);
    } else if (ensure(&r->raw, &r->raw_cap, bsize)) {
      e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    } else if (fread_at(f, 0, r->raw, bsize)) {
      e = etw_fail(st, ETW_E_IO, NULL, "%s: read error", f->path);
    } else if (parse_logfile_header(f, r->raw + BH, used - BH)) {
      e = etw_fail(st, ETW_E_CORRUPT, NULL, "%s: not an ETL file (no logfile header record at offset 0x48)", f->path);
    } else {
      f->info.compression = rd32(r->raw + 0x2C) & 0xFFFF;
    }
  }
  if (!e) e = index_file(r, r->n_files - 1, st);
  if (e) {
    if (f->fp) fclose(f->fp);
    free(f->path);
    free(f->bufs);
    r->n_files--;
  }
  return e;
}

/* fopen(@path, "rb"), without following a symbolic link when @nofollow and the OS can (POSIX
 * O_NOFOLLOW: the open itself fails on a link, ELOOP on Linux, EMLINK on FreeBSD) */
static FILE *open_rb(const char *path, int nofollow) {
#ifdef O_NOFOLLOW
  if (nofollow) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW);
    FILE *fp = fd < 0 ? NULL : fdopen(fd, "rb");
    if (fd >= 0 && !fp) {
      int e = errno;
      close(fd);
      errno = e;
    }
    return fp;
  }
#endif
  (void)nofollow;
  return fopen(path, "rb");
}

enum etw_err etw_etl_reader_add_file(struct etw_etl_reader *r, const char *path,
                                     struct etw_status *st) {
  FILE *fp = open_rb(path, r->nofollow);
#ifdef O_NOFOLLOW
  if (!fp && r->nofollow && (errno == ELOOP || errno == EMLINK))
    return etw_fail(st, ETW_E_PERM, NULL,
                    "%s: a symbolic link: refused (data-directory files are opened without following links)", path);
#endif
  if (!fp) return etw_fail(st, errno == ENOENT ? ETW_E_NOT_FOUND : ETW_E_IO, NULL, "%s: %s", path, strerror(errno));
  if (etl_fseek(fp, 0, SEEK_END)) {
    fclose(fp);
    return etw_fail(st, ETW_E_IO, NULL, "%s: cannot seek", path);
  }
#ifdef _WIN32
  long long sz = _ftelli64(fp);
#else
  long long sz = (long long)ftello(fp);
#endif
  if (sz < 0) {
    fclose(fp);
    return etw_fail(st, ETW_E_IO, NULL, "%s: cannot get size", path);
  }
  return add_file(r, path, fp, NULL, (uint64_t)sz, st);
}

enum etw_err etw_etl_reader_add_mem(struct etw_etl_reader *r, const char *name, const void *data,
                                    size_t len, struct etw_status *st) {
  return add_file(r, name, NULL, data, len, st);
}

const struct etw_etl_info *etw_etl_reader_info(const struct etw_etl_reader *r, uint32_t i) {
  return i < r->n_files ? &r->files[i].info : NULL;
}

void etw_etl_reader_progress(const struct etw_etl_reader *r, uint64_t *done, uint64_t *total) {
  *done = r->done;
  *total = r->total;
}

/* ---- streams */
struct sortent {
  uint64_t seq, off;
  uint32_t idx;
};
static int cmp_sortent(const void *a, const void *b) {
  const struct sortent *x = a, *y = b;
  if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Sort a stream's buffer indices by (sequence number, file offset); thread-safe. */
static int sort_stream(const struct efile *f, struct stream *s) {
  struct sortent *t = malloc((s->n_bi ? s->n_bi : 1) * sizeof *t);
  if (!t) return -1;
  for (uint32_t i = 0; i < s->n_bi; i++) {
    t[i].seq = f->bufs[s->bi[i]].seq;
    t[i].off = f->bufs[s->bi[i]].off;
    t[i].idx = s->bi[i];
  }
  qsort(t, s->n_bi, sizeof *t, cmp_sortent);
  for (uint32_t i = 0; i < s->n_bi; i++) s->bi[i] = t[i].idx;
  free(t);
  return 0;
}

/* Streams up to which the merge keeps a sorted list (an insertion per record, usually at the
 * front) rather than the loser tree (log2 streams per record); not static so that the unit
 * tests can force either way. */
unsigned etw_etl_merge_list_max = 32;

enum etw_err etl_build_streams(struct etw_etl_reader *r, struct etw_status *st) {
  etl_align_clocks(r);
  for (uint32_t fi = 0; fi < r->n_files; fi++) {
    struct efile *f = &r->files[fi];
    uint32_t first = r->n_st;
    for (uint32_t b = 0; b < f->n_bufs; b++) {
      uint16_t cpu = f->bufs[b].cpu;
      struct stream *s = NULL;
      for (uint32_t k = first; k < r->n_st; k++)
        if (r->st[k].cpu == cpu) {
          s = &r->st[k];
          break;
        }
      if (!s) {
        if (r->n_st >= ETW_ETL_MAX_STREAMS) return etw_fail(st, ETW_E_LIMIT, NULL, "too many processors");
        struct stream *ns = realloc(r->st, (r->n_st + 1) * sizeof *ns);
        if (!ns) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
        r->st = ns;
        s = &r->st[r->n_st++];
        memset(s, 0, sizeof *s);
        s->file = fi;
        s->cpu = cpu;
        s->last_ts = f->info.t0;
        /* with 10^7 counts per second to_filetime is clk_start ± |ts - clk_t0|, which is
         * clk_start + (ts - clk_t0) modulo 2^64 either way */
        s->ft_unit = clock_freq(&f->info) == 10000000;
        s->ft_base = f->clk_start - (uint64_t)f->clk_t0;
        s->pm = (struct pmemo)PMEMO_INIT;
      }
      if ((s->n_bi & (s->n_bi - 1)) == 0 || s->n_bi == 0) {
        uint32_t nc = s->n_bi ? s->n_bi * 2 : 8;
        uint32_t *nb = realloc(s->bi, (size_t)nc * sizeof *nb);
        if (!nb) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
        s->bi = nb;
      }
      s->bi[s->n_bi++] = b;
    }
    for (uint32_t k = first; k < r->n_st; k++)
      if (sort_stream(f, &r->st[k])) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    if (f->damaged) etl_set_damage(r, fi, f->damage_off, f->damage_msg);
  }
  for (uint32_t k = 0; k < r->n_st; k++) r->st[k].f = &r->files[r->st[k].file];
  r->lt_p = 1;
  while (r->lt_p < r->n_st) r->lt_p *= 2;
  r->tree = malloc(3 * (size_t)r->lt_p * sizeof *r->tree); /* past lt_p: the winners while building */
  r->tft = malloc((size_t)r->lt_p * sizeof *r->tft);
  r->leaf = malloc((r->n_st ? r->n_st : 1) * sizeof *r->leaf);
  r->ocap = r->n_st + 2 + 1024;
  r->lst = malloc((size_t)r->ocap * sizeof *r->lst);
  r->list = r->n_st <= etw_etl_merge_list_max;
  if (r->tree) r->tree[0] = LT_NONE;
  if (!r->tree || !r->tft || !r->leaf || !r->lst) {
    free(r->tree);
    r->tree = NULL;
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  return ETW_E_OK;
}

/* Load the next buffer of stream @s; 0 = loaded, 1 = no more buffers. Damage is recorded. */
int etl_load_buffer(struct etw_etl_reader *r, struct stream *s) {
  struct efile *f = &r->files[s->file];
  while (s->next_bi < s->n_bi) {
    const struct bufent *b = &f->bufs[s->bi[s->next_bi++]];
    r->done += b->size;
    const unsigned char *h;
    if (f->mem) { /* a memory image: read in place */
      if (b->off > f->size || b->size > f->size - b->off) {
        etl_set_damage(r, s->file, b->off, "cannot read buffer");
        continue;
      }
      h = f->mem + b->off;
    } else if (!(b->flag & 0x40)) { /* not compressed: read straight into the payload buffer */
      if (ensure_pay(r, s, b->size + ETL_SLACK)) {
        etl_set_damage(r, s->file, b->off, "buffer over the memory limit");
        continue;
      }
      if (fread_at(f, b->off, s->pay, b->size)) {
        etl_set_damage(r, s->file, b->off, "cannot read buffer");
        continue;
      }
      h = s->pay;
    } else {
      if (ensure(&r->raw, &r->raw_cap, b->size) || fread_at(f, b->off, r->raw, b->size)) {
        etl_set_damage(r, s->file, b->off, "cannot read buffer");
        continue;
      }
      h = r->raw;
    }
    s->buf_off = b->off;
    s->pos = 0;
    uint32_t saved = rd32(h + 4), used = rd32(h + 0x30);
    if (b->flag & 0x40) {
      if (saved < BH || saved > ETW_ETL_MAX_BUFFER) {
        etl_set_damage(r, s->file, b->off, "bad uncompressed size of compressed buffer");
        continue;
      }
      uint32_t outn = saved - BH;
      if (ensure_pay(r, s, outn + ETL_SLACK)) {
        etl_set_damage(r, s->file, b->off, "decompressed size over the memory limit");
        continue;
      }
      long got;
      if (f->info.compression == 4)
        got = etw_xpress_huff_decompress(h + BH, b->size - BH, s->pay, outn);
      else if (f->info.compression == 3 || f->info.compression == 0)
        got = etw_xpress_decompress(h + BH, b->size - BH, s->pay, outn);
      else {
        etl_set_damage(r, s->file, b->off, "unsupported compression format (only XPRESS and XPRESS Huffman)");
        continue;
      }
      if (got < 0) {
        etl_set_damage(r, s->file, b->off, "malformed compressed buffer");
        continue;
      }
      s->data = s->pay;
      s->pay_len = (uint32_t)got; /* a short result still holds the records before the damage */
      memset(s->pay + got, 0, ETL_SLACK);
      if ((uint32_t)got < outn) etl_set_damage(r, s->file, b->off, "compressed buffer ends early");
    } else {
      if (used < BH || used > b->size) used = b->size; /* Offset is garbage: use everything */
      /* the records in place: in the memory image (it outlives the reader) or in the payload
       * buffer the file's buffer was read into */
      s->data = h + BH;
      s->pay_len = used - BH;
      if (h == s->pay) { /* (read from the file into the payload buffer) */
        memset(s->pay + b->size, 0, ETL_SLACK);
      } else if (f->size - b->off - used < ETL_SLACK) {
        /* the image ends within ETL_SLACK bytes after the records: they are copied */
        if (ensure_pay(r, s, used - BH + ETL_SLACK)) {
          etl_set_damage(r, s->file, b->off, "buffer over the memory limit");
          continue;
        }
        memcpy(s->pay, h + BH, used - BH);
        memset(s->pay + used - BH, 0, ETL_SLACK);
        s->data = s->pay;
      }
    }
    return 0;
  }
  return 1;
}

