/* bench_etl_convert.c — events/s of the ETL pipeline (read + merge + decode + JSON encode),
 * in memory, single thread: what `etwd convert` does minus the output write.
 *
 *   bench_etl_convert FILE.etl [--manifests DIR] [--iter N]
 *
 * Prints events, seconds and events/s per iteration (best of N). The first iteration also
 * loads the manifests; for steady-state instructions per event run under callgrind with
 * --toggle-collect=bench_iter (only the iterations after the first are collected):
 *   valgrind --tool=callgrind --toggle-collect=bench_iter bench_etl_convert F --iter 2
 * (docs/etl.md has the commands and the numbers).
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
  unsigned long long events, bytes, undecoded;
};

static int run_iter(struct etw_decoder *d, const char *path, const unsigned char *data, size_t sz, struct etw_jw *w,
                    struct totals *tot) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  if (etw_etl_reader_add_mem(r, path, data, sz, &st)) {
    fprintf(stderr, "%s\n", st.msg);
    etw_etl_reader_free(r);
    return -1;
  }
  const struct etw_rec *rec;
  struct etw_evref ref;
  tot->events = tot->bytes = tot->undecoded = 0;
  while (etw_etl_reader_next_ref(r, &rec, &st) == 1) {
    w->len = 0;
    if (!etw_decoder_write(d, rec, w, &ref)) tot->undecoded++;
    tot->bytes += w->len;
    tot->events++;
  }
  etw_etl_reader_free(r);
  return 0;
}

/* Separate symbols so callgrind can collect the steady state only (the bodies differ so the
 * compiler cannot fold them into one function). */
static volatile unsigned long long warm_events;
__attribute__((noinline)) static int first_iter(struct etw_decoder *d, const char *path, const unsigned char *data,
                                                size_t sz, struct etw_jw *w, struct totals *tot) {
  int rc = run_iter(d, path, data, sz, w, tot);
  warm_events = tot->events;
  return rc;
}
__attribute__((noinline)) int bench_iter(struct etw_decoder *d, const char *path, const unsigned char *data, size_t sz,
                                         struct etw_jw *w, struct totals *tot);
__attribute__((noinline)) int bench_iter(struct etw_decoder *d, const char *path, const unsigned char *data, size_t sz,
                                         struct etw_jw *w, struct totals *tot) {
  return run_iter(d, path, data, sz, w, tot);
}

int main(int argc, char **argv) {
  const char *path = NULL, *mdir = NULL;
  int iter = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--manifests") && i + 1 < argc) mdir = argv[++i];
    else if (!strcmp(argv[i], "--iter") && i + 1 < argc) iter = atoi(argv[++i]);
    else path = argv[i];
  }
  if (!path) {
    fprintf(stderr, "usage: bench_etl_convert FILE.etl [--manifests DIR] [--iter N]\n");
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
  struct totals tot = {0, 0, 0};
  for (int it = 0; it < iter; it++) {
    double t0 = now();
    if ((it == 0 ? first_iter : bench_iter)(d, path, data, (size_t)sz, &w, &tot)) return 1;
    double t = now() - t0;
    if (t < best) best = t;
  }
  events = tot.events;
  bytes = tot.bytes;
  undecoded = tot.undecoded;
  printf("events=%llu undecoded=%llu json_bytes=%llu best=%.4fs events/s=%.0f MB/s(json)=%.1f\n", events,
         undecoded, bytes, best, (double)events / best, (double)bytes / best / 1e6);
  etw_jw_free(&w);
  etw_decoder_free(d);
  free(data);
  return 0;
}
