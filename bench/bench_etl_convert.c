/* bench_etl_convert.c — events/s of the ETL pipeline (read + merge + decode + JSON encode),
 * in memory, single thread: what `etwd convert` does minus the output write.
 *
 *   bench_etl_convert FILE.etl [--manifests DIR] [--iter N] [--only PROVIDER/NAME | --types]
 *                     [--decode fast|reference]
 *
 * Prints events, seconds and events/s per iteration (best of N). The first iteration also
 * loads the manifests; for steady-state instructions per event run under callgrind with
 * --toggle-collect=bench_iter (only the iterations after the first are collected):
 *   valgrind --tool=callgrind --toggle-collect=bench_iter bench_etl_convert F --iter 2
 * (docs/etl.md "Benchmark" has the commands, docs/benchmarks.md the numbers).
 *
 * Per event type: `--only "Windows Kernel/PerfInfo/Sample"` (provider, '/', event name as in
 * the JSON) calls etw_decoder_write for the matching events of the iterations after the first
 * through the separate symbol bench_decode_hit (every other record still goes through the
 * decoder, in order, as usual), so
 *   valgrind --tool=callgrind --toggle-collect=bench_decode_hit bench_etl_convert F --iter 2 --only T
 * collects that type's decode + encode instructions alone (÷ its count, printed as hits=).
 * `--types` prints the event count per type after the first iteration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etwcore/etl.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct totals {
  unsigned long long events, bytes, undecoded, hits;
};

/* --only: which events (by position) are of the type, found in the first iteration */
static const char *only;
static unsigned char *is_hit;
static size_t n_hit_cap;
static int types;

__attribute__((noinline)) int bench_decode_hit(struct etw_decoder *d, const struct etw_rec *rec, struct etw_jw *w,
                                               struct etw_evref *ref);
__attribute__((noinline)) int bench_decode_hit(struct etw_decoder *d, const struct etw_rec *rec, struct etw_jw *w,
                                               struct etw_evref *ref) {
  return etw_decoder_write(d, rec, w, ref);
}

struct tcount {
  const char *prov, *name;
  unsigned long long n;
};
static struct tcount *tc;
static size_t n_tc, cap_tc;
static void count_type(const struct etw_evref *ref) {
  for (size_t i = 0; i < n_tc; i++)
    if (tc[i].prov == ref->provider && tc[i].name == ref->name) {
      tc[i].n++;
      return;
    }
  if (n_tc == cap_tc) {
    cap_tc = cap_tc ? 2 * cap_tc : 64;
    tc = realloc(tc, cap_tc * sizeof *tc);
    if (!tc) exit(1);
  }
  tc[n_tc++] = (struct tcount){ref->provider, ref->name, 1};
}
static int cmp_tc(const void *a, const void *b) {
  const struct tcount *x = a, *y = b;
  return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;
}

static int matches(const struct etw_evref *ref) {
  size_t pl = strlen(ref->provider);
  return !strncmp(only, ref->provider, pl) && only[pl] == '/' && ref->name && !strcmp(only + pl + 1, ref->name);
}

/* Records asked of the reader per call (etw_etl_reader_next_batch), and the writer's fill
 * level at which its text is dropped (etwd convert writes it out there: 256 KiB blocks). */
enum { BENCH_RECS = 512, BENCH_FLUSH = 256 << 10 }; /* (records a call: as etl_convert.c) */

static int run_iter(struct etw_decoder *d, const char *path, const unsigned char *data, size_t sz, struct etw_jw *w,
                    struct totals *tot, int first) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  if (etw_etl_reader_add_mem(r, path, data, sz, &st)) {
    fprintf(stderr, "%s\n", st.msg);
    etw_etl_reader_free(r);
    return -1;
  }
  const struct etw_rec *recs[BENCH_RECS];
  struct etw_evref ref;
  int n;
  tot->events = tot->bytes = tot->undecoded = tot->hits = 0;
  w->len = 0;
  if (!first && !only) {
    /* the steady state: what etwd convert does per event minus the `{"seq":N,` prefix, the
     * newline and the write: the events appended to the writer, whose text is dropped (and
     * counted) once it holds BENCH_FLUSH bytes (checked once per batch) */
    unsigned long long decoded = 0, bytes = 0, events = 0;
    while ((n = etw_etl_reader_next_batch(r, recs, BENCH_RECS, &st)) > 0) {
      events += (unsigned)n;
      if (w->len >= BENCH_FLUSH) {
        bytes += w->len;
        w->len = 0;
      }
      /* (etw_decoder_write returns 1 or 0: the decoded ones are summed; four a turn) */
      int dn = 0, i = 0;
      for (; i + 3 < n; i += 4) {
        dn += etw_decoder_write(d, recs[i], w, &ref);
        dn += etw_decoder_write(d, recs[i + 1], w, &ref);
        dn += etw_decoder_write(d, recs[i + 2], w, &ref);
        dn += etw_decoder_write(d, recs[i + 3], w, &ref);
      }
      for (; i < n; i++) dn += etw_decoder_write(d, recs[i], w, &ref);
      decoded += (unsigned)dn;
      if (w->err) { /* (convert drops such an event and goes on; here the numbers would be wrong) */
        fprintf(stderr, "bench: the JSON writer failed (an event above its maximum?): numbers void\n");
        etw_etl_reader_free(r);
        return -1;
      }
    }
    tot->events = events;
    tot->bytes = bytes + w->len;
    tot->undecoded = events - decoded;
    w->len = 0;
    etw_etl_reader_free(r);
    return 0;
  }
  while ((n = etw_etl_reader_next_batch(r, recs, BENCH_RECS, &st)) > 0) {
    for (int i = 0; i < n; i++) {
      const struct etw_rec *rec = recs[i];
      w->len = 0;
      size_t k = (size_t)tot->events;
      if (only && !first && k < n_hit_cap && is_hit[k]) {
        if (!bench_decode_hit(d, rec, w, &ref)) tot->undecoded++;
        tot->hits++;
      } else {
        if (!etw_decoder_write(d, rec, w, &ref)) tot->undecoded++;
        if (first && only) {
          if (k >= n_hit_cap) {
            size_t nc = n_hit_cap ? 2 * n_hit_cap : 1 << 16;
            is_hit = realloc(is_hit, nc);
            if (!is_hit) return -1;
            memset(is_hit + n_hit_cap, 0, nc - n_hit_cap);
            n_hit_cap = nc;
          }
          is_hit[k] = (unsigned char)matches(&ref);
        }
        if (first && types) count_type(&ref);
      }
      tot->bytes += w->len;
      tot->events++;
    }
  }
  w->len = 0;
  etw_etl_reader_free(r);
  return 0;
}

/* Separate symbols so callgrind can collect the steady state only (the bodies differ so the
 * compiler cannot fold them into one function). */
static volatile unsigned long long warm_events;
__attribute__((noinline)) static int first_iter(struct etw_decoder *d, const char *path, const unsigned char *data,
                                                size_t sz, struct etw_jw *w, struct totals *tot) {
  int rc = run_iter(d, path, data, sz, w, tot, 1);
  warm_events = tot->events;
  return rc;
}
__attribute__((noinline)) int bench_iter(struct etw_decoder *d, const char *path, const unsigned char *data, size_t sz,
                                         struct etw_jw *w, struct totals *tot);
__attribute__((noinline)) int bench_iter(struct etw_decoder *d, const char *path, const unsigned char *data, size_t sz,
                                         struct etw_jw *w, struct totals *tot) {
  return run_iter(d, path, data, sz, w, tot, 0);
}

int main(int argc, char **argv) {
  const char *path = NULL, *mdir = NULL;
  int iter = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--manifests") && i + 1 < argc) mdir = argv[++i];
    else if (!strcmp(argv[i], "--iter") && i + 1 < argc) iter = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--types")) types = 1;
    else if (!strcmp(argv[i], "--decode") && i + 1 < argc) { /* the readers' and decoders' mode */
      enum etw_decode_mode m;
      if (etw_decode_parse(argv[++i], &m)) path = NULL, i = argc;
      else etw_decode_set_default(m);
    }
    else path = argv[i];
  }
  if (!path) {
    fprintf(stderr, "usage: bench_etl_convert FILE.etl [--manifests DIR] [--iter N] [--only PROVIDER/NAME | --types]\n"
                    "                         [--decode fast|reference]\n");
    return 2;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *data = malloc((size_t)sz);
  if (!data || fread(data, 1, (size_t)sz, f) != (size_t)sz) return 1;
  fclose(f);
  struct etw_decoder *d = etw_decoder_new(mdir);
  struct etw_jw w;
  etw_jw_init(&w, 64u << 20);
  double best = 1e9;
  unsigned long long events = 0, bytes = 0, undecoded = 0;
  struct totals tot = {0, 0, 0, 0};
  for (int it = 0; it < iter; it++) {
    double t0 = now();
    if ((it == 0 ? first_iter : bench_iter)(d, path, data, (size_t)sz, &w, &tot)) return 1;
    double t = now() - t0;
    if (t < best) best = t;
    if (it == 0 && types) {
      qsort(tc, n_tc, sizeof *tc, cmp_tc);
      for (size_t i = 0; i < n_tc; i++) printf("%10llu %s/%s\n", tc[i].n, tc[i].prov, tc[i].name ? tc[i].name : "");
    }
  }
  events = tot.events;
  bytes = tot.bytes;
  undecoded = tot.undecoded;
  if (only) printf("hits=%llu ", tot.hits);
  printf("events=%llu undecoded=%llu json_bytes=%llu best=%.4fs events/s=%.0f MB/s(json)=%.1f\n", events,
         undecoded, bytes, best, (double)events / best, (double)bytes / best / 1e6);
  etw_jw_free(&w);
  etw_decoder_free(d);
  free(data);
  return 0;
}
