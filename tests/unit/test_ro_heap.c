/* test_ro_heap.c — the time-order heap (ro_heap.h) against a sort, on random input with many
 * equal timestamps: events leave by (time, the order their batches came in, their place in the
 * batch). First the heap alone (everything pushed, then drained; and pushes interleaved with
 * releases up to a horizon, as the hub does), then through the hub itself (etw_hub_set_order:
 * 8 simulated CPUs publishing bursts of batches, watermarks, the end) read back by a subscriber. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "etwcore/hub.h"
#include "ro_heap.h"
#include "t.h"

/* one event of the reference: its key, and the unique id its data carries */
struct ref {
  int64_t ts;
  uint64_t arrival;
  uint32_t pos, id;
};

static int cmp_ref(const void *a, const void *b) {
  const struct ref *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  if (x->arrival != y->arrival) return x->arrival < y->arrival ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* a batch of @n events at sorted random times in [t0, t0 + span) (few distinct values: ties),
 * on @cpu, data {"k":id}; appends them to @refs (arrival @arrival, ids from *id) */
static struct etw_batch *mk(int64_t t0, int span, int n, int cpu, uint64_t arrival, struct ref *refs,
                            uint32_t *nref, uint32_t *id) {
  struct etw_batch *b = etw_batch_new((uint32_t)n, 1 << 20);
  int64_t ts[64];
  for (int i = 0; i < n; i++) ts[i] = t0 + rand() % span;
  qsort(ts, (size_t)n, sizeof *ts, cmp_i64);
  for (int i = 0; i < n; i++) {
    size_t mark = b->data.len;
    etw_jw_lit(&b->data, "\"System\":{},\"EventData\":{\"k\":");
    etw_jw_u64(&b->data, *id);
    etw_jw_lit(&b->data, "}}");
    struct etw_evref r = {0};
    r.provider = etw_intern("sched");
    r.ts_ns = ts[i];
    r.cpu = (uint16_t)cpu;
    CHECK(etw_batch_commit(b, mark, &r) == 0);
    refs[(*nref)++] = (struct ref){ts[i], arrival, (uint32_t)i, (*id)++};
  }
  return b;
}

/* the number after "k": in [p, end), or UINT32_MAX (no strstr: the data has no NUL, and
 * ASan's strstr measures the whole haystack every time) */
static uint32_t k_of(const char *p, const char *end) {
  for (; p + 4 < end; p++)
    if (!memcmp(p, "\"k\":", 4)) return (uint32_t)strtoul(p + 4, NULL, 10);
  return UINT32_MAX;
}

/* the id of the heap's top event (its data: {"k":id}}) */
static uint32_t top_id(const struct ro_heap *h) {
  const struct ro_ent *t = &h->a[0];
  const char *p = t->b->data.buf + t->b->ev[t->pos].off;
  return k_of(p, p + t->b->ev[t->pos].len);
}

/* @rounds rounds of @per batches each; with @horizon, each round's batches start at the previous
 * round's end and the events up to its middle leave before the next round is pushed */
static void heap_vs_sort(int rounds, int per, int span, int horizon) {
  enum { MAXE = 40000 };
  static struct ref refs[MAXE];
  static uint32_t got[MAXE];
  uint32_t nref = 0, ngot = 0, id = 0;
  uint64_t arrival = 0;
  struct ro_heap h = {0};
  for (int r = 0; r < rounds; r++) {
    int64_t t0 = horizon ? (int64_t)r * span : 0;
    for (int j = 0; j < per; j++) {
      int n = 1 + rand() % 64;
      if (nref + (uint32_t)n > MAXE) break;
      struct etw_batch *b = mk(t0, span, n, j % 4, arrival, refs, &nref, &id);
      /* sometimes the first events are skipped, as the hub skips late ones */
      uint32_t k = (uint32_t)(rand() % 4 == 0 ? rand() % n : 0);
      for (uint32_t i = 0; i < k; i++) refs[nref - (uint32_t)n + i].id = UINT32_MAX; /* not expected */
      CHECK(ro_heap_push(&h, b, k, arrival++) == 0);
    }
    int64_t until = horizon ? t0 + span / 2 : INT64_MIN; /* some are left for the next round */
    while (h.n && h.a[0].ts <= until) {
      got[ngot++] = top_id(&h);
      struct etw_batch *done = ro_heap_next(&h);
      if (done) etw_batch_unref(done);
    }
  }
  while (h.n) {
    got[ngot++] = top_id(&h);
    struct etw_batch *done = ro_heap_next(&h);
    if (done) etw_batch_unref(done);
  }
  qsort(refs, nref, sizeof *refs, cmp_ref);
  uint32_t want = 0, bad = 0;
  for (uint32_t i = 0; i < nref; i++) {
    if (refs[i].id == UINT32_MAX) continue;
    if (want >= ngot || got[want] != refs[i].id) bad++;
    want++;
  }
  CHECK_EQ(ngot, want);
  CHECK_EQ(bad, 0);
  CHECK(ngot >= (uint32_t)rounds);
  ro_heap_free(&h);
}

/* through the hub: 8 CPUs, each round one burst of 1..6 batches per CPU (its events in its time
 * order, many equal times across CPUs and inside a batch), then its watermark; read back in
 * seq order, the ids must be the sorted order (no event late, none early), and each CPU's own
 * events in the order it published them */
static void hub_vs_sort(void) {
  enum { MAXE = 60000, NCPU = 8 };
  static struct ref refs[MAXE];
  static uint8_t cpu_of[MAXE]; /* by id */
  uint32_t nref = 0, id = 0;
  uint64_t arrival = 0;
  struct etw_hub_limits lim = {0, MAXE, 2, 0};
  struct etw_hub *hub = etw_hub_new(&lim);
  etw_hub_set_order(hub, ETW_ORDER_WINDOW_MS, MAXE);
  struct etw_sub *s = etw_hub_subscribe(hub, NULL, 0, NULL);
  for (int c = 0; c < NCPU; c++) etw_hub_tick(hub, (uint32_t)c, INT64_MIN);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t T = (int64_t)now.tv_sec * 1000000000LL + 3600000000000LL; /* +1 h: no window */
  for (int r = 0; r < 40; r++) {
    int64_t t0 = T + r * 1000;
    for (int c = 0; c < NCPU; c++) {
      int nb = 1 + rand() % 6;
      for (int j = 0; j < nb; j++) {
        int n = 1 + rand() % 16;
        /* this CPU's batches follow each other in time: each in its own slice of the round */
        for (int i = 0; i < n; i++) cpu_of[id + (uint32_t)i] = (uint8_t)c;
        etw_hub_publish(hub, mk(t0 + j * 1000 / nb, 1000 / nb, n, c, arrival++, refs, &nref, &id));
      }
      etw_hub_tick(hub, (uint32_t)c, t0 + 999);
    }
  }
  etw_hub_end(hub);
  qsort(refs, nref, sizeof *refs, cmp_ref);
  struct etw_jw w;
  etw_jw_init(&w, 1 << 26);
  while (etw_sub_read(s, &w, ETW_FMT_NDJSON, 1 << 20, 0) > 0) {
  }
  uint32_t n = 0, bad = 0, cpu_back = 0;
  uint64_t seq = 0;
  uint32_t last[NCPU] = {0}; /* 1 + the id of each CPU's last event read */
  const char *end = w.buf + w.len;
  for (const char *p = w.buf, *nl; p < end; p = nl + 1) { /* one event per line */
    nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) nl = end;
    if (strncmp(p, "{\"seq\":", 7)) {
      bad++;
      continue;
    }
    uint64_t q = strtoull(p + 7, NULL, 10);
    if (q != seq + 1) bad++;
    seq = q;
    uint32_t k = k_of(p, nl);
    if (n >= nref || k != refs[n].id) bad++;
    n++;
    /* ids grow in each CPU's publish order: a CPU's own events never change places */
    if (k < MAXE) {
      if (k + 1 < last[cpu_of[k]]) cpu_back++;
      last[cpu_of[k]] = k + 1;
    }
  }
  CHECK_EQ(n, nref);
  CHECK_EQ(bad, 0);
  CHECK_EQ(cpu_back, 0);
  struct etw_hub_stats hs;
  etw_hub_stats(hub, &hs);
  CHECK_EQ(hs.reorder_late, 0);
  CHECK_EQ(hs.reorder_early, 0);
  CHECK_EQ(hs.produced, nref);
  etw_jw_free(&w);
  etw_sub_close(s);
  etw_hub_free(hub);
}

/* CPU 256 and CPU 0 are two producers: CPU 256's batch far ahead in time must not move CPU 0's
 * watermark (an 8-bit cpu in the event header did: CPU 0's older event then came late, dropped) */
static void cpu_over_255(void) {
  static struct ref refs[4];
  uint32_t nref = 0, id = 0;
  struct etw_hub_limits lim = {0, 1000, 2, 0};
  struct etw_hub *hub = etw_hub_new(&lim);
  etw_hub_set_order(hub, ETW_ORDER_WINDOW_MS, 1000);
  struct etw_sub *s = etw_hub_subscribe(hub, NULL, 0, NULL);
  etw_hub_tick(hub, 0, INT64_MIN);
  etw_hub_tick(hub, 256, INT64_MIN);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t T = (int64_t)now.tv_sec * 1000000000LL + 3600000000000LL; /* +1 h: no window */
  etw_hub_publish(hub, mk(T + 5000, 1, 1, 256, 0, refs, &nref, &id));
  etw_hub_tick(hub, 256, T + 5000);
  etw_hub_publish(hub, mk(T + 1000, 1, 1, 0, 1, refs, &nref, &id));
  etw_hub_tick(hub, 0, T + 6000);
  etw_hub_tick(hub, 256, T + 6000);
  etw_hub_end(hub);
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  while (etw_sub_read(s, &w, ETW_FMT_NDJSON, 1 << 20, 0) > 0) {
  }
  const char *k0 = memmem(w.buf, w.len, "\"k\":1}", 6), *k1 = memmem(w.buf, w.len, "\"k\":0}", 6);
  CHECK(k0 && k1 && k0 < k1); /* CPU 0's event (id 1, earlier) first, then CPU 256's */
  struct etw_hub_stats hs;
  etw_hub_stats(hub, &hs);
  CHECK_EQ(hs.reorder_late, 0);
  etw_jw_free(&w);
  etw_sub_close(s);
  etw_hub_free(hub);
}

int main(void) {
  srand(20261129);
  for (int i = 0; i < 20; i++) {
    heap_vs_sort(1, 200, 1 + rand() % 50, 0); /* all at once; spans down to 1: all times equal */
    heap_vs_sort(30, 1 + rand() % 20, 1 + rand() % 50, 1);
  }
  for (int i = 0; i < 5; i++) hub_vs_sort();
  cpu_over_255();
  T_DONE();
}
