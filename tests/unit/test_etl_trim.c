/* test_etl_trim.c — etw_etl_trim (etl_trim.c: the Windows flight recorder's "keep the last S
 * seconds") over real corpus traces: a compressed relogged kernel + user trace with 8 processors
 * and a 512-byte header buffer (net.4.5.2.x64), a 32-bit relogged one with a short first buffer
 * and a compressed second (smallEtlFile), a pure kernel trace (ShutdownPerfDiagLogger), a live
 * user trace of a 32-processor machine (powershell), a circular one (gcevents), AMSITrace and a
 * compressed one-event file (SelfDescribingSingleEvent). For cuts before the first record, at
 * the first quarter, the median, the third quarter and after the last:
 *  - the output is exactly the input's buffer 0 and the buffers this test expects (every
 *    buffer holding a record ≥ cut, and any non-GENERIC one), in order, byte for byte, but for
 *    BuffersWritten = their count;
 *  - it reads without damage; its records ≥ cut are the input's (multiset of every header field,
 *    extended item and payload byte; and of the decoded JSON without "seq", for the traces whose
 *    decoding needs no state from earlier records); every record it lost was < cut; its
 *    records < cut are in buffer 0 or in buffers that also hold records ≥ cut, at most one such
 *    buffer per processor; the stats add up.
 * Errors: a truncated copy and one with a damaged compressed buffer fail with ETW_E_CORRUPT and
 * leave no output (an older one at that path is removed too), an unwritable output fails with
 * ETW_E_IO (a missing directory; a write that fails half-way: the file size limit), in == out
 * (also through a hard link) is refused and the input left alone.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "t.h"
#include "test_etl_util.h"

#define PV "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/"
#define AB "airbus-cert+etl-parser/tests/example/"

static char dir[256];

/* One record of a trace: its time, buffer, processor and two hashes of everything it holds. */
struct ev {
  uint64_t ft, off, h1, h2, js;
  uint16_t cpu;
};
struct trace {
  struct ev *ev;
  size_t n;
  int rc;
  struct etw_status st;
};

static void mix(uint64_t *h1, uint64_t *h2, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    *h1 = (*h1 ^ b[i]) * 0x100000001b3ull;
    *h2 = (*h2 + b[i] + 1) * 0x9E3779B97F4A7C15ull;
    *h2 ^= *h2 >> 29;
  }
}
#define MIXV(v) mix(&h1, &h2, &(v), sizeof(v))

/* The hash of event JSON @s without its "ProcessName" members (derived from earlier records, the
 * process's start or rundown, which a trim may drop: etl.md "Process context"). */
static uint64_t hash_json(const char *s) {
  static const char pn[] = "\"ProcessName\":\"";
  uint64_t h = 0xcbf29ce484222325ull, h2 = 0;
  for (const char *p; (p = strstr(s, pn)) != NULL;) {
    mix(&h, &h2, s, (size_t)(p - s));
    p += sizeof pn - 1;
    while (*p && *p != '"') p += *p == '\\' && p[1] ? 2 : 1;
    s = *p ? p + 1 : p;
    if (*s == ',') s++;
  }
  mix(&h, &h2, s, strlen(s));
  return h ^ h2;
}

/* Every record of @path, in the reader's order, with its decoded JSON's hash (without seq). */
static int load(const char *path, struct trace *t) {
  memset(t, 0, sizeof *t);
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_decoder *d = etw_decoder_new(tu_manifests());
  if (!r || !d || etw_etl_reader_add_file(r, path, &t->st)) {
    etw_etl_reader_free(r);
    etw_decoder_free(d);
    return t->rc = -2;
  }
  struct etw_jw w;
  etw_jw_init(&w, 0);
  struct etw_evref ref;
  const struct etw_rec *x;
  size_t cap = 0;
  while ((t->rc = etw_etl_reader_next_ref(r, &x, &t->st)) == 1) {
    if (t->n == cap) {
      cap = cap ? cap * 2 : 1024;
      t->ev = realloc(t->ev, cap * sizeof *t->ev);
      if (!t->ev) abort();
    }
    struct ev *e = &t->ev[t->n++];
    uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0;
    MIXV(x->kind), MIXV(x->ptr_size), MIXV(x->flags), MIXV(x->event_property), MIXV(x->hook_id);
    MIXV(x->tid), MIXV(x->pid), MIXV(x->timestamp), MIXV(x->provider_id), MIXV(x->desc.id);
    MIXV(x->desc.version), MIXV(x->desc.channel), MIXV(x->desc.level), MIXV(x->desc.opcode);
    MIXV(x->desc.task), MIXV(x->desc.keyword), MIXV(x->kernel_time), MIXV(x->user_time);
    MIXV(x->activity_id), MIXV(x->filetime), MIXV(x->cpu), MIXV(x->n_ext), MIXV(x->user_len);
    MIXV(x->wpp_msg_number), MIXV(x->wpp_flags), MIXV(x->wpp_sequence);
    for (unsigned i = 0; i < x->n_ext; i++) {
      MIXV(x->ext[i].type), MIXV(x->ext[i].len);
      mix(&h1, &h2, x->ext[i].data, x->ext[i].len);
    }
    if (x->file_offset == 0 && x->kind == ETW_REC_SYSTEM && x->hook_id == 0 && x->user_len >= 0x28) {
      /* the logfile header: but for BuffersWritten (check_bytes checks it) */
      mix(&h1, &h2, x->user_data, 0x24);
      mix(&h1, &h2, x->user_data + 0x28, x->user_len - 0x28);
    } else {
      mix(&h1, &h2, x->user_data, x->user_len);
    }
    e->ft = x->filetime;
    e->off = x->file_offset;
    e->cpu = x->cpu;
    e->h1 = h1;
    e->h2 = h2;
    w.len = 0;
    etw_decoder_write(d, x, &w, &ref);
    /* (the logfile header's JSON shows BuffersWritten) */
    e->js = x->file_offset == 0 && x->hook_id == 0 ? 0 : hash_json(etw_jw_cstr(&w));
  }
  etw_jw_free(&w);
  etw_decoder_free(d);
  etw_etl_reader_free(r);
  return t->rc;
}

static int cmp_ev(const void *a, const void *b) {
  const struct ev *x = a, *y = b;
  if (x->ft != y->ft) return x->ft < y->ft ? -1 : 1;
  if (x->h1 != y->h1) return x->h1 < y->h1 ? -1 : 1;
  return x->h2 < y->h2 ? -1 : x->h2 > y->h2;
}
static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint32_t rd32le(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int write_file(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(b, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}
static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}
/* Is anything but @keep1 and @keep2 in the test directory (a left-over temporary file)? */
static int stray_files(const char *keep1, const char *keep2) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
  size_t n;
  unsigned char *raw = tu_cmd(cmd, &n);
  char *b = raw ? malloc(n + 1) : NULL;
  if (!b) return 1;
  memcpy(b, raw, n);
  b[n] = 0;
  free(raw);
  int stray = 0;
  for (char *line = strtok(b, "\n"); line; line = strtok(NULL, "\n"))
    if (strcmp(line, keep1) && (!keep2 || strcmp(line, keep2))) {
      fprintf(stderr, "stray file %s\n", line);
      stray = 1;
    }
  free(b);
  return stray;
}

/* One buffer's records: its offset, processor, and how many are before / at or after a cut. */
struct grp {
  uint64_t off;
  uint16_t cpu;
  size_t before, after;
};
static int cmp_off(const void *a, const void *b) {
  const struct ev *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}
/* The buffers of @t's records (by offset, ascending) with their counts at @cut; their number. */
static size_t groups(const struct trace *t, uint64_t cut, struct grp **out) {
  struct ev *e = malloc((t->n + 1) * sizeof *e);
  memcpy(e, t->ev, t->n * sizeof *e);
  qsort(e, t->n, sizeof *e, cmp_off);
  struct grp *g = calloc(t->n + 1, sizeof *g);
  size_t n = 0;
  for (size_t k = 0; k < t->n; k++) {
    if (!n || g[n - 1].off != e[k].off) {
      g[n].off = e[k].off;
      g[n].cpu = e[k].cpu;
      n++;
    }
    if (e[k].ft < cut) g[n - 1].before++;
    else g[n - 1].after++;
  }
  free(e);
  *out = g;
  return n;
}
static const struct grp *group_at(const struct grp *g, size_t n, uint64_t off) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g[mid].off < off) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && g[lo].off == off ? &g[lo] : NULL;
}

/* The output @o (@on bytes) is exactly what a trim of @img at @cut must give (by @in's records). */
static void check_bytes(const unsigned char *img, size_t len, const struct trace *in, uint64_t cut,
                        const unsigned char *o, size_t on, uint64_t *kept_bufs) {
  struct grp *g;
  size_t ng = groups(in, cut, &g);
  size_t oo = 0, off = 0;
  uint64_t kept = 0;
  for (uint32_t i = 0; off + 0x48 <= len; i++) {
    uint32_t size = rd32le(img + off);
    if (size < 0x48 || size > len - off) break;
    const struct grp *b = group_at(g, ng, off);
    int keep = i == 0 || (img[off + 0x36] | img[off + 0x37] << 8) != 0 || (b && b->after);
    if (keep) {
      kept++;
      CHECK(oo + size <= on);
      if (oo + size > on) break;
      if (i == 0) { /* all but BuffersWritten */
        CHECK(!memcmp(o, img, 0x8C));
        CHECK(!memcmp(o + 0x90, img + 0x90, size - 0x90));
      } else if (memcmp(o + oo, img + off, size)) {
        fprintf(stderr, "buffer %u (offset %zu) differs in the output at %zu\n", i, off, oo);
        CHECK(0);
      }
      oo += size;
    }
    off += size;
  }
  free(g);
  CHECK_EQ(oo, on);
  CHECK(on >= 0x90 && rd32le(o + 0x8C) == kept);
  *kept_bufs = kept;
}

/* The record-level checks of a trim at @cut: @in the input's records, @out the output's. */
static void check_records(const struct trace *in, const struct trace *out, uint64_t cut, int json,
                          const struct etw_etl_trim_stats *ts, const unsigned char *o, size_t on) {
  CHECK_EQ(out->rc, 0);
  struct ev *a = malloc((in->n + 1) * sizeof *a), *b = malloc((out->n + 1) * sizeof *b);
  memcpy(a, in->ev, in->n * sizeof *a);
  memcpy(b, out->ev, out->n * sizeof *b);
  qsort(a, in->n, sizeof *a, cmp_ev);
  qsort(b, out->n, sizeof *b, cmp_ev);
  /* the output's records are input records; the ones missing are all < cut */
  size_t i = 0, j = 0, lost = 0, before = 0, after_in = 0;
  while (i < in->n || j < out->n) {
    int c = i == in->n ? 1 : j == out->n ? -1 : cmp_ev(&a[i], &b[j]);
    if (c == 0) {
      before += b[j].ft < cut;
      i++, j++;
    } else if (c < 0) {
      if (a[i].ft >= cut) {
        fprintf(stderr, "record at %llu (>= cut %llu) lost\n", (unsigned long long)a[i].ft, (unsigned long long)cut);
        CHECK(0);
      }
      lost++;
      i++;
    } else {
      fprintf(stderr, "record at %llu in the output is not in the input\n", (unsigned long long)b[j].ft);
      CHECK(0);
      j++;
    }
  }
  for (size_t k = 0; k < in->n; k++) after_in += in->ev[k].ft >= cut;
  CHECK_EQ(out->n - before, after_in); /* so the records >= cut are the same multiset */
  /* decoded: the same JSON multiset for the records >= cut */
  if (json) {
    uint64_t *x = malloc((in->n + 1) * sizeof *x), *y = malloc((out->n + 1) * sizeof *y);
    size_t nx = 0, ny = 0;
    for (size_t k = 0; k < in->n; k++)
      if (in->ev[k].ft >= cut) x[nx++] = in->ev[k].js;
    for (size_t k = 0; k < out->n; k++)
      if (out->ev[k].ft >= cut) y[ny++] = out->ev[k].js;
    qsort(x, nx, sizeof *x, cmp_u64);
    qsort(y, ny, sizeof *y, cmp_u64);
    CHECK_EQ(nx, ny);
    CHECK(nx == ny && !memcmp(x, y, nx * sizeof *x));
    free(x);
    free(y);
  }
  /* records < cut only in buffer 0 (or a non-GENERIC one: @rundown) or in a buffer with a
   * record >= cut; one such per processor */
  struct grp *g;
  size_t ng = groups(out, cut, &g);
  uint16_t *cpus = malloc((ng + 1) * sizeof *cpus);
  size_t nc = 0;
  for (size_t k = 0; k < ng; k++) {
    if (!g[k].before || g[k].off == 0) continue;
    if (g[k].off + 0x48 <= on && (o[g[k].off + 0x36] | o[g[k].off + 0x37] << 8) != 0) continue;
    if (!g[k].after) fprintf(stderr, "a kept buffer (output offset %llu) ends before the cut\n", (unsigned long long)g[k].off);
    CHECK(g[k].after > 0);
    for (size_t m = 0; m < nc; m++)
      if (cpus[m] == g[k].cpu) {
        fprintf(stderr, "two buffers of processor %u hold records before the cut\n", g[k].cpu);
        CHECK(0);
      }
    cpus[nc++] = g[k].cpu;
  }
  free(cpus);
  free(g);
  /* the stats */
  CHECK_EQ(ts->events_kept, out->n);
  CHECK_EQ(ts->events_dropped, lost);
  CHECK_EQ(ts->events_kept + ts->events_dropped, in->n);
  CHECK_EQ(ts->events_before_cut, before);
  free(a);
  free(b);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Trims of corpus file @rel at five cuts; @json: compare the decoded JSON too; @rundown: make
 * the input's buffer of that index (> 0) a RUNDOWN buffer (BufferType 1), which must be kept. */
static void run(const char *rel, int json, uint32_t rundown) {
  double t0 = now_s();
  size_t len;
  unsigned char *img = tu_corpus_file(rel, &len);
  CHECK(img != NULL);
  if (!img) return;
  for (size_t off = 0, i = 0; rundown && off + 0x48 <= len && rd32le(img + off) >= 0x48; off += rd32le(img + off), i++)
    if (i == rundown) img[off + 0x36] = 1;
  char in_path[300], out_path[300];
  snprintf(in_path, sizeof in_path, "%s/in.etl", dir);
  snprintf(out_path, sizeof out_path, "%s/out.etl", dir);
  CHECK_EQ(write_file(in_path, img, len), 0);
  struct trace in;
  CHECK_EQ(load(in_path, &in), 0);
  CHECK(in.n > 0);
  uint64_t *fts = malloc((in.n + 1) * sizeof *fts);
  for (size_t k = 0; k < in.n; k++) fts[k] = in.ev[k].ft;
  qsort(fts, in.n, sizeof *fts, cmp_u64);
  uint64_t cuts[5] = {fts[0], fts[in.n / 4], fts[in.n / 2], fts[in.n * 3 / 4], fts[in.n - 1] + 1};
  uint32_t n_bufs = 0;
  for (size_t off = 0; off + 0x48 <= len && rd32le(img + off) >= 0x48; off += rd32le(img + off)) n_bufs++;
  for (int c = 0; c < 5; c++) {
    struct etw_etl_trim_stats ts;
    struct etw_status st;
    enum etw_err e = etw_etl_trim(in_path, out_path, cuts[c], &ts, &st);
    CHECK_EQ(e, ETW_E_OK);
    if (e) {
      fprintf(stderr, "%s: %s\n", rel, st.msg);
      continue;
    }
    CHECK(!stray_files("in.etl", "out.etl"));
    size_t on = 0;
    unsigned char *o = tu_file(out_path, &on);
    CHECK(o != NULL);
    uint64_t kept = 0;
    if (o) check_bytes(img, len, &in, cuts[c], o, on, &kept);
    CHECK_EQ(ts.buffers_kept, kept);
    CHECK_EQ(ts.buffers_kept + ts.buffers_dropped, n_bufs);
    CHECK(ts.buffers_always >= 1 && ts.buffers_always <= ts.buffers_kept);
    CHECK_EQ(ts.bytes_in, len);
    CHECK_EQ(ts.bytes_out, on);
    struct trace out;
    load(out_path, &out);
    check_records(&in, &out, cuts[c], json, &ts, o, o ? on : 0);
    free(o);
    if (c == 0) { /* before (at) the first record: everything */
      CHECK_EQ(ts.buffers_dropped, 0);
      CHECK_EQ(ts.events_kept, in.n);
      CHECK_EQ(on, len);
    }
    CHECK_EQ(ts.buffers_always, rundown ? 2 : 1);
    if (c == 4) { /* after the last: no event buffer */
      CHECK_EQ(ts.buffers_kept, ts.buffers_always);
      CHECK_EQ(ts.events_kept, ts.events_before_cut);
      if (!rundown)
        for (size_t k = 0; k < out.n; k++) CHECK_EQ(out.ev[k].off, 0);
    }
    fprintf(stderr, "  cut %d: %llu of %u buffers, %llu records kept (%llu before the cut), %llu dropped\n", c,
            (unsigned long long)ts.buffers_kept, n_bufs, (unsigned long long)ts.events_kept,
            (unsigned long long)ts.events_before_cut, (unsigned long long)ts.events_dropped);
    free(out.ev);
  }
  free(fts);
  free(in.ev);
  free(img);
  remove(in_path);
  remove(out_path);
  fprintf(stderr, "%s: %zu records, %.2f s\n", rel, in.n, now_s() - t0);
}

/* A damaged input: no output, no temporary file, an older output removed. */
static void damaged(const char *rel, size_t cut_at, size_t flip_at, size_t flip_len) {
  size_t len;
  unsigned char *img = tu_corpus_file(rel, &len);
  CHECK(img != NULL);
  if (!img) return;
  char in_path[300], out_path[300];
  snprintf(in_path, sizeof in_path, "%s/bad.etl", dir);
  snprintf(out_path, sizeof out_path, "%s/out.etl", dir);
  if (flip_len) memset(img + flip_at, 0xA5, flip_len);
  CHECK_EQ(write_file(in_path, img, cut_at ? cut_at : len), 0);
  CHECK_EQ(write_file(out_path, (const unsigned char *)"old", 3), 0);
  struct etw_etl_trim_stats ts;
  struct etw_status st;
  memset(&st, 0, sizeof st);
  CHECK_EQ(etw_etl_trim(in_path, out_path, 0, &ts, &st), ETW_E_CORRUPT);
  fprintf(stderr, "damaged %s: %s\n", rel, st.msg);
  CHECK(strstr(st.msg, "bad.etl") != NULL);
  CHECK(strstr(st.msg, "corrupt or truncated") != NULL);
  CHECK(!exists(out_path));
  CHECK(!stray_files("bad.etl", NULL));
  remove(in_path);
  free(img);
}

/* A write that fails half-way (the process's file size limit, as a full disk): ETW_E_IO, no
 * output, no temporary file. */
static void write_error(void) {
  size_t len;
  unsigned char *img = tu_corpus_file(AB "ShutdownPerfDiagLogger.etl", &len);
  CHECK(img != NULL);
  if (!img) return;
  char in_path[300], out_path[300];
  snprintf(in_path, sizeof in_path, "%s/in.etl", dir);
  snprintf(out_path, sizeof out_path, "%s/out.etl", dir);
  CHECK_EQ(write_file(in_path, img, len), 0);
  struct rlimit old, lim;
  CHECK_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 1 << 20; /* the input is 3 MiB */
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  struct etw_etl_trim_stats ts;
  struct etw_status st;
  enum etw_err e = etw_etl_trim(in_path, out_path, 0, &ts, &st);
  CHECK_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, prev);
  CHECK_EQ(e, ETW_E_IO);
  fprintf(stderr, "write error: %s\n", st.msg);
  CHECK(strstr(st.msg, "out.etl") != NULL && strstr(st.msg, "cannot write") != NULL);
  CHECK(!exists(out_path));
  CHECK(!stray_files("in.etl", NULL));
  remove(in_path);
  free(img);
}

static void errors(void) {
  size_t len;
  unsigned char *img = tu_corpus_file(AB "lxcore_kernel.etl", &len);
  CHECK(img != NULL);
  if (!img) return;
  char in_path[300], link_path[300], out_path[300];
  snprintf(in_path, sizeof in_path, "%s/in.etl", dir);
  snprintf(link_path, sizeof link_path, "%s/link.etl", dir);
  CHECK_EQ(write_file(in_path, img, len), 0);
  struct etw_etl_trim_stats ts;
  struct etw_status st;
  /* in == out, by name and through a hard link: refused, the input untouched */
  CHECK_EQ(etw_etl_trim(in_path, in_path, 0, &ts, &st), ETW_E_INVALID);
  CHECK(strstr(st.msg, "is the input") != NULL);
  CHECK_EQ(link(in_path, link_path), 0);
  CHECK_EQ(etw_etl_trim(in_path, link_path, 0, &ts, &st), ETW_E_INVALID);
  size_t n2;
  unsigned char *again = tu_file(in_path, &n2);
  CHECK(again && n2 == len && !memcmp(again, img, len));
  free(again);
  remove(link_path);
  /* an output in a directory that does not exist */
  snprintf(out_path, sizeof out_path, "%s/no/such/dir/out.etl", dir);
  CHECK_EQ(etw_etl_trim(in_path, out_path, 0, &ts, &st), ETW_E_IO);
  CHECK(strstr(st.msg, "no/such/dir/out.etl") != NULL);
  /* not an ETL file; a missing one */
  snprintf(out_path, sizeof out_path, "%s/out.etl", dir);
  CHECK_EQ(write_file(in_path, (const unsigned char *)"not an etl file at all, only text........................................", 72), 0);
  CHECK_EQ(etw_etl_trim(in_path, out_path, 0, &ts, &st), ETW_E_CORRUPT);
  CHECK(!exists(out_path));
  remove(in_path);
  CHECK_EQ(etw_etl_trim(in_path, out_path, 0, &ts, &st), ETW_E_NOT_FOUND);
  CHECK(!stray_files("", NULL));
  free(img);
}

int main(void) {
  snprintf(dir, sizeof dir, "%s/etwd_trim_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  /* (net.4.5.2.x64's JSON is not compared: its samples' symbols, file names and EventSource
   * events decode by images, file rundowns and manifests in records a trim drops) */
  run(PV "inputs/net.4.5.2.x64.etl.zip!net.4.5.2.x64.etl", 0, 0);
  run(PV "smallEtlFile.etl", 1, 0);
  run(AB "ShutdownPerfDiagLogger.etl", 1, 0);
  run("microsoft+krabsetw/examples/NativeExamples/powershell.etl", 1, 0);
  run(PV "inputs/gcevents.etl.zip!gcevents/PerfViewData.etl", 1, 0);
  run(AB "AMSITrace.etl", 1, 0);
  run(PV "inputs/Regression/SelfDescribingSingleEvent.etl", 1, 0);
  run("microsoft+krabsetw/examples/NativeExamples/powershell.etl", 1, 3); /* a rundown buffer */
  /* truncated in the middle of its 100th buffer (compressed); one with a damaged compressed
   * buffer (the 10th's payload overwritten); a truncated uncompressed kernel trace */
  damaged(PV "inputs/net.4.5.2.x64.etl.zip!net.4.5.2.x64.etl", 1500000, 0, 0);
  damaged(PV "inputs/net.4.5.2.x64.etl.zip!net.4.5.2.x64.etl", 0, 140000, 4000);
  damaged(AB "ShutdownPerfDiagLogger.etl", 65536 * 20 + 3000, 0, 0);
  write_error();
  errors();
  rmdir(dir);
  T_DONE();
}
