/* bench_hub_order.c — the hub's time-order merge alone (etw_hub_set_order; docs/benchmarks.md
 * "Time order's merge"), with as many simulated CPUs as asked for: no kernel, no decoder.
 *
 * Each round stands for one 20 ms poll period: every simulated CPU has @k batches of @e events,
 * in its own time order (random times inside the batch's slice of the period, coarse enough to
 * give equal timestamps), published the way the Linux readers do at high rates: one CPU drains
 * its whole period (k batches), then the next ("burst"), so the hub holds up to about ncpu × k
 * batches when the last CPU's batches let the others' go; or one batch of every CPU in turn
 * ("interleave": about ncpu held). The batches are built before the clock runs; only
 * etw_hub_publish and etw_hub_tick are timed (this thread's CPU time). The hub has no subscriber and no replay window:
 * with order "none" a publish is seq numbers and counters only, so the difference is the merge
 * (scan or heap, plus copying each event into the merged batches). Times are in the future so
 * the 500 ms window never releases anything: only the watermarks do. Single-threaded.
 *
 * usage: bench_hub_order <order 0|1> <ncpu> [k=4] [e=512] [rounds=20] [burst 1|interleave 0]
 * prints one line of key=value pairs; ns_per_event is the timed calls' CPU time per event.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "etwcore/hub.h"

/* this thread's CPU time: other work on a shared machine does not count */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* one CPU's batch of @e events at sorted random times in [t0, t0 + span) (1 µs steps) */
static struct etw_batch *mk(int64_t t0, int64_t span, int e, int cpu, int64_t *tmp) {
  struct etw_batch *b = etw_batch_new((uint32_t)e, 1u << 20);
  if (!b) return NULL;
  for (int i = 0; i < e; i++) tmp[i] = t0 + (int64_t)(rand() % (int)(span / 1000)) * 1000;
  qsort(tmp, (size_t)e, sizeof *tmp, cmp_i64);
  const char *prov = etw_intern("sched"), *name = etw_intern("ev");
  for (int i = 0; i < e; i++) {
    size_t mark = b->data.len;
    etw_jw_lit(&b->data, "\"System\":{\"Provider\":\"sched\",\"EventID\":1},\"EventData\":{\"i\":");
    etw_jw_u64(&b->data, (uint64_t)i);
    etw_jw_lit(&b->data, "}}");
    struct etw_evref r = {0};
    r.provider = prov;
    r.name = name;
    r.ts_ns = tmp[i];
    r.cpu = (uint8_t)cpu;
    if (etw_batch_commit(b, mark, &r)) break;
  }
  etw_batch_trim(b);
  return b;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <order 0|1> <ncpu> [k=4] [e=512] [rounds=20] [burst=1]\n", argv[0]);
    return 2;
  }
  int order = atoi(argv[1]), ncpu = atoi(argv[2]);
  int k = argc > 3 ? atoi(argv[3]) : 4, e = argc > 4 ? atoi(argv[4]) : 512;
  int rounds = argc > 5 ? atoi(argv[5]) : 20, burst = argc > 6 ? atoi(argv[6]) : 1;
  if (ncpu < 1 || ncpu > 256 || k < 1 || e < 1 || e > 4096 || rounds < 1) return 2;
  srand(1);
  struct etw_hub_limits lim = {.replay_max_bytes = 0, .sub_queue_events = 1024, .max_subscribers = 1};
  struct etw_hub *h = etw_hub_new(&lim);
  /* the held bound above any round's events: only the watermarks release */
  if (order) etw_hub_set_order(h, ETW_ORDER_WINDOW_MS, (uint32_t)ncpu * (uint32_t)k * (uint32_t)e * 2);
  for (int c = 0; c < ncpu; c++) etw_hub_tick(h, (uint32_t)c, INT64_MIN);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t period = 20000000, base = (int64_t)ts.tv_sec * 1000000000LL + 3600000000000LL;
  struct etw_batch **bs = malloc((size_t)ncpu * (size_t)k * sizeof *bs);
  int64_t *tmp = malloc((size_t)e * sizeof *tmp);
  double timed = 0;
  for (int r = 0; r < rounds; r++) {
    int64_t t0 = base + r * period, slice = period / k;
    for (int c = 0; c < ncpu; c++)
      for (int j = 0; j < k; j++) bs[c * k + j] = mk(t0 + j * slice, slice, e, c, tmp);
    double a = now_s();
    if (burst) {
      for (int c = 0; c < ncpu; c++) {
        for (int j = 0; j < k; j++) etw_hub_publish(h, bs[c * k + j]);
        etw_hub_tick(h, (uint32_t)c, t0 + period - 1);
      }
    } else {
      for (int j = 0; j < k; j++)
        for (int c = 0; c < ncpu; c++) etw_hub_publish(h, bs[c * k + j]);
      for (int c = 0; c < ncpu; c++) etw_hub_tick(h, (uint32_t)c, t0 + period - 1);
    }
    timed += now_s() - a;
  }
  double a = now_s();
  etw_hub_end(h);
  timed += now_s() - a;
  struct etw_hub_stats hs;
  etw_hub_stats(h, &hs);
  uint64_t want = (uint64_t)rounds * (uint64_t)ncpu * (uint64_t)k * (uint64_t)e;
  printf("order=%d ncpu=%d k=%d e=%d rounds=%d %s events=%llu produced=%llu late=%llu early=%llu "
         "ns_per_event=%.1f\n",
         order, ncpu, k, e, rounds, burst ? "burst" : "interleave", (unsigned long long)want,
         (unsigned long long)hs.produced, (unsigned long long)hs.reorder_late,
         (unsigned long long)hs.reorder_early, timed * 1e9 / (double)want);
  etw_hub_free(h);
  free(bs);
  free(tmp);
  return hs.produced == want ? 0 : 1;
}
