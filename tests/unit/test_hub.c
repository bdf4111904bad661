/* test_hub.c — the hub's contract: seq order, per-subscriber filters, bounded queues with
 * drop-and-count (delivered + dropped = produced for the filter), in-band gap records, the
 * replay window for from=<seq>, end of stream, concurrent producers; and, with real threads,
 * the lock-free queues: concurrent readers each with their own accounting, sleeping readers
 * woken promptly by a publish / etw_sub_wake / etw_hub_end, the queue's bound in batches,
 * and lingering (at most one frame per linger period at high publish rates); lossless hubs
 * (publish waits for room; close and cancel release it), and the loss counted at close. */
#include <pthread.h>
#include <stdatomic.h>
#if !defined(_WIN32)
#include <malloc.h>
#endif
#include <time.h>

#include "etwcore/err.h"
#include "etwcore/hub.h"
#include "t.h"

/* bytes the heap hands out now (ASan's allocator in the sanitizer build); 0 where this test
 * cannot tell (Windows builds, run under wine) */
#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void); /* libasan */
#endif
static size_t heap_bytes(void) {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#elif defined(_WIN32)
  return 0;
#else
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#endif
}

static struct etw_batch *mk(int n, const char *prov, uint32_t pid0) {
  struct etw_batch *b = etw_batch_new((uint32_t)n, 1 << 20);
  for (int i = 0; i < n; i++) {
    size_t mark = b->data.len;
    etw_jw_lit(&b->data, "\"System\":{},\"EventData\":{\"i\":");
    etw_jw_u64(&b->data, (uint64_t)i);
    etw_jw_lit(&b->data, "}}");
    struct etw_evref r = {0};
    r.provider = etw_intern(prov);
    r.name = etw_intern("ev");
    r.pid = pid0 + (uint32_t)i % 2;
    r.level = (uint8_t)(i % 6);
    r.event_id = (uint16_t)(i % 3);
    CHECK(etw_batch_commit(b, mark, &r) == 0);
  }
  return b;
}

/* read everything available: returns events; adds gap counts to *gaps */
static int drain(struct etw_sub *s, uint64_t *gaps, uint64_t *last_seq) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 24);
  int events = 0;
  for (;;) {
    w.len = 0;
    int n = etw_sub_read(s, &w, ETW_FMT_NDJSON, 1 << 16, 0);
    if (n <= 0) break;
    const char *p = etw_jw_cstr(&w);
    while (*p) {
      const char *nl = strchr(p, '\n');
      if (!strncmp(p, "{\"Gap\":{\"Dropped\":", 18)) {
        *gaps += strtoull(p + 18, NULL, 10);
      } else {
        CHECK(!strncmp(p, "{\"seq\":", 7));
        uint64_t seq = strtoull(p + 7, NULL, 10);
        CHECK(seq > *last_seq);
        *last_seq = seq;
        events++;
      }
      p = nl ? nl + 1 : p + strlen(p);
    }
  }
  etw_jw_free(&w);
  return events;
}

struct prod {
  struct etw_hub *h;
  int batches;
};
static void *producer(void *a) {
  struct prod *p = a;
  for (int i = 0; i < p->batches; i++) etw_hub_publish(p->h, mk(10, "sched", 100));
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* a sender-like reader thread: blocking reads until end of stream, checking order and counts */
struct rdr {
  struct etw_sub *s;
  int slow_ms;     /* sleep after each read (a slow client) */
  int linger_ms;   /* etw_sub_set_linger */
  uint64_t events, gaps, last_seq, frames;
  double min_gap_s, t_last; /* smallest time between two frames, from 150 ms to t_stop */
  uint64_t short_gaps;      /* ... and how many were shorter than 90 % of the linger */
  double t0;
  _Atomic double t_stop;    /* set when the producer is done (the end flushes at once) */
  int bad_order;
};
static void *reader(void *a) {
  struct rdr *r = a;
  struct etw_jw w;
  etw_jw_init(&w, 1 << 24);
  if (r->linger_ms) etw_sub_set_linger(r->s, r->linger_ms, 1 << 20);
  r->min_gap_s = 1e9;
  r->t0 = now_s();
  for (;;) {
    w.len = 0;
    int n = etw_sub_read(r->s, &w, ETW_FMT_JSON_ARRAY, 1 << 16, 1000);
    if (n < 0) break;
    if (n == 0) continue;
    double t = now_s();
    double stop = atomic_load(&r->t_stop);
    if (r->frames && t - r->t0 > 0.15 && (stop == 0 || t < stop)) {
      if (t - r->t_last < r->min_gap_s) r->min_gap_s = t - r->t_last;
      if (r->linger_ms && t - r->t_last < r->linger_ms * 0.0009) r->short_gaps++;
    }
    r->t_last = t;
    r->frames++;
    const char *p = etw_jw_cstr(&w);
    for (const char *q = p; (q = strstr(q, "{\"")); q++) {
      if (!strncmp(q, "{\"Gap\":{\"Dropped\":", 18)) {
        r->gaps += strtoull(q + 18, NULL, 10);
      } else if (!strncmp(q, "{\"seq\":", 7)) {
        uint64_t seq = strtoull(q + 7, NULL, 10);
        if (seq <= r->last_seq) r->bad_order++;
        r->last_seq = seq;
        r->events++;
      }
    }
    if (r->slow_ms) sleep_ms(r->slow_ms);
  }
  etw_jw_free(&w);
  return NULL;
}

struct waiter {
  struct etw_sub *s;
  int ret;
  double took;
  atomic_int started, done;
};
static void *wait_once(void *a) {
  struct waiter *wt = a;
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  double t = now_s();
  atomic_store(&wt->started, 1);
  wt->ret = etw_sub_read(wt->s, &w, ETW_FMT_NDJSON, 1 << 20, 5000);
  wt->took = now_s() - t;
  atomic_store(&wt->done, 1);
  etw_jw_free(&w);
  return NULL;
}

/* a reader asleep in etw_sub_read (5 s timeout) returns promptly after @poke */
static void check_wakes(struct etw_hub *h, struct etw_sub *s, void (*poke)(struct etw_hub *, struct etw_sub *),
                        int want_ret_positive, int want_end) {
  struct waiter wt = {s, 0, 0, 0, 0};
  pthread_t th;
  pthread_create(&th, NULL, wait_once, &wt);
  while (!atomic_load(&wt.started)) sleep_ms(1);
  sleep_ms(100); /* let it fall asleep: `took` then counts at least these 100 ms */
  poke(h, s);
  pthread_join(th, NULL);
  CHECK(wt.took < 2.0);
  CHECK(wt.took >= 0.09);
  if (want_ret_positive) CHECK(wt.ret > 0);
  if (want_end) CHECK_EQ(wt.ret, -1);
  if (!want_ret_positive && !want_end) CHECK_EQ(wt.ret, 0);
}
static void poke_publish(struct etw_hub *h, struct etw_sub *s) {
  (void)s;
  etw_hub_publish(h, mk(2, "sched", 100));
}
static void poke_wake(struct etw_hub *h, struct etw_sub *s) {
  (void)h;
  etw_sub_wake(s);
}
static void poke_end(struct etw_hub *h, struct etw_sub *s) {
  (void)s;
  etw_hub_end(h);
}

/* @per_tick 1-event batches every millisecond (sleeps of >= 1 ms: MinGW's nanosleep rounds
 * shorter ones down to nothing) */
/* a subscriber of @h with room for @queue events, lingering @linger_ms, that has read two
 * frames 60 ms apart: it has measured a publish rate (> 2 batches per linger period) */
static struct etw_sub *lingering_sub(struct etw_hub *h, uint32_t queue, int linger_ms) {
  struct etw_sub_filter sq = {0};
  sq.max_level = -1;
  sq.queue_events = queue;
  struct etw_sub *s = etw_hub_subscribe(h, &sq, 0, NULL);
  etw_sub_set_linger(s, linger_ms, 1 << 20);
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  for (int i = 0; i < 2; i++) {
    if (i) sleep_ms(60);
    etw_hub_publish(h, mk(1, "sched", 100));
    CHECK_EQ(etw_sub_read(s, &w, ETW_FMT_NDJSON, 1 << 20, 1000), 1);
  }
  etw_jw_free(&w);
  return s;
}

struct ticker {
  struct etw_hub *h;
  int batches, per_tick;
};
static void *ticking_producer(void *a) {
  struct ticker *t = a;
  for (int i = 0; i < t->batches; i++) {
    etw_hub_publish(t->h, mk(1, "sched", 100));
    if ((i + 1) % t->per_tick == 0) sleep_ms(1);
  }
  return NULL;
}

/* ?limit=N: exactly N events, then the end (-1) — also where whole batches are taken from a
 * rendering shared by several unfiltered readers, and for a filtered reader */
static void limits(void) {
  struct etw_hub_limits lim = {1 << 20, 100, 8, 0};
  struct etw_hub *h = etw_hub_new(&lim);
  struct etw_sub_filter fa = {0}, fo = {0};
  fa.max_level = -1;
  fa.limit = 13;
  fo = fa;
  fo.limit = 3;
  snprintf(fo.providers[fo.n_providers++], ETW_FILTER_NAME_MAX, "other");
  struct etw_sub *a1 = etw_hub_subscribe(h, &fa, 0, NULL), *a2 = etw_hub_subscribe(h, &fa, 0, NULL);
  struct etw_sub *o = etw_hub_subscribe(h, &fo, 0, NULL), *big = etw_hub_subscribe(h, &fa, 0, NULL);
  etw_hub_publish(h, mk(10, "sched", 100));
  etw_hub_publish(h, mk(10, "other", 100));
  etw_hub_publish(h, mk(10, "sched", 100));
  uint64_t g = 0, ls = 0;
  CHECK_EQ(drain(a1, &g, &ls), 13);
  g = 0, ls = 0;
  CHECK_EQ(drain(a2, &g, &ls), 13);
  CHECK_EQ(ls, 13); /* the first 13, in order */
  g = 0, ls = 0;
  CHECK_EQ(drain(o, &g, &ls), 3);
  CHECK_EQ(ls, 13); /* "other" starts at seq 11 */
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  CHECK_EQ(etw_sub_read(a1, &w, ETW_FMT_JSON_ARRAY, 1 << 16, 0), -1);
  CHECK_EQ(etw_sub_read(o, &w, ETW_FMT_NDJSON, 1 << 16, 1000), -1); /* at once, though more is queued */
  etw_jw_free(&w);
  /* at close, what is still queued counts as loss only up to the limit: nothing for a1 (it
   * got its 13), 13 of the 30 queued for big (it read nothing) */
  struct etw_sub_stats fin;
  etw_sub_close_final(big, &fin); /* read nothing: the limit does not touch what the hub queues */
  CHECK_EQ(fin.dropped, 13);
  etw_sub_close_final(a1, &fin);
  CHECK_EQ(fin.dropped, 0);
  etw_sub_close(a2);
  etw_sub_close(o);
  etw_hub_free(h);
}

/* a producer of @batches batches of 10 events, then the end of stream (lossless tests) */
struct lprod {
  struct etw_hub *h;
  int batches;
  atomic_int done;
};
static void *lproducer(void *a) {
  struct lprod *p = a;
  for (int i = 0; i < p->batches; i++) etw_hub_publish(p->h, mk(10, "sched", 100));
  etw_hub_end(p->h);
  atomic_store(&p->done, 1);
  return NULL;
}

/* wait up to @ms for *flag */
static int wait_flag(atomic_int *flag, int ms) {
  for (int i = 0; i < ms && !atomic_load(flag); i++) sleep_ms(1);
  return atomic_load(flag);
}

/* lossless hubs (a file is not a live source): a slow reader gets every event, the publisher
 * waits for it; closing it or etw_hub_cancel releases the publisher; from=<seq> ahead */
static void test_lossless(void) {
  struct etw_hub_limits ll = {0, 100, 8, 1};
  struct etw_hub *h = etw_hub_new(&ll);
  struct etw_sub *slow = etw_hub_subscribe(h, NULL, 0, NULL);
  struct etw_sub *fast = etw_hub_subscribe(h, NULL, 0, NULL);
  struct etw_sub_filter f = {0};
  f.max_level = -1;
  f.pids[f.n_pids++] = 101;
  struct etw_sub *filt = etw_hub_subscribe(h, &f, 0, NULL);
  struct rdr rs = {.s = slow, .slow_ms = 2}, rf = {.s = fast}, rp = {.s = filt, .slow_ms = 1};
  pthread_t ts, tf, tp, tpr;
  pthread_create(&ts, NULL, reader, &rs);
  pthread_create(&tf, NULL, reader, &rf);
  pthread_create(&tp, NULL, reader, &rp);
  struct lprod pr = {h, 300, 0};
  pthread_create(&tpr, NULL, lproducer, &pr);
  pthread_join(tpr, NULL);
  pthread_join(ts, NULL);
  pthread_join(tf, NULL);
  pthread_join(tp, NULL);
  CHECK_EQ(rs.events, 3000); /* queue bound 100 events, 3000 published: nothing dropped */
  CHECK_EQ(rs.gaps, 0);
  CHECK_EQ(rs.last_seq, 3000);
  CHECK_EQ(rs.bad_order, 0);
  CHECK_EQ(rf.events, 3000);
  CHECK_EQ(rp.events, 1500);
  CHECK_EQ(rp.gaps, 0);
  struct etw_hub_stats hs;
  etw_hub_stats(h, &hs);
  CHECK_EQ(hs.sub_dropped, 0);
  etw_sub_close(slow);
  etw_sub_close(fast);
  etw_sub_close(filt);
  etw_hub_free(h);

  /* a subscriber that reads nothing holds the publisher back until it is closed */
  h = etw_hub_new(&ll);
  struct etw_sub *stuck = etw_hub_subscribe(h, NULL, 0, NULL);
  struct lprod p2 = {h, 50, 0};
  pthread_create(&tpr, NULL, lproducer, &p2);
  sleep_ms(100);
  CHECK(!atomic_load(&p2.done));
  etw_hub_stats(h, &hs);
  CHECK_EQ(hs.produced, 100); /* the queue's bound */
  struct etw_sub_stats fin;
  etw_sub_close_final(stuck, &fin);
  CHECK(wait_flag(&p2.done, 5000));
  pthread_join(tpr, NULL);
  CHECK_EQ(fin.dropped, 100); /* what it held when it went away is its loss */
  CHECK_EQ(fin.delivered, 0);
  etw_hub_stats(h, &hs);
  CHECK_EQ(hs.produced, 500);
  CHECK_EQ(hs.sub_dropped, 100);
  etw_hub_free(h);

  /* etw_hub_cancel (stop/delete) releases a waiting publisher: the rest is dropped, counted */
  h = etw_hub_new(&ll);
  stuck = etw_hub_subscribe(h, NULL, 0, NULL);
  struct lprod p3 = {h, 50, 0};
  pthread_create(&tpr, NULL, lproducer, &p3);
  sleep_ms(100);
  CHECK(!atomic_load(&p3.done));
  etw_hub_cancel(h);
  CHECK(wait_flag(&p3.done, 5000));
  pthread_join(tpr, NULL);
  struct etw_sub_stats st3;
  etw_sub_stats(stuck, &st3);
  CHECK_EQ(st3.dropped, 400);
  uint64_t g = 0, ls = 0;
  CHECK_EQ(drain(stuck, &g, &ls), 100);
  CHECK_EQ(g, 400);
  etw_sub_close(stuck);
  etw_hub_free(h);

  /* from=<seq> not yet published (a replay pass subscribed before its reader starts) */
  h = etw_hub_new(&ll);
  struct etw_sub *from = etw_hub_subscribe(h, NULL, 15, NULL);
  etw_hub_publish(h, mk(10, "sched", 100));
  etw_hub_publish(h, mk(10, "sched", 100));
  g = 0, ls = 14;
  CHECK_EQ(drain(from, &g, &ls), 6); /* 15..20 */
  CHECK_EQ(g, 0);
  CHECK_EQ(ls, 20);
  etw_sub_close(from);
  etw_hub_free(h);
}

/* a live (lossy) hub too: what a closed subscriber's queue held is counted as its loss */
static void test_close_counts_queued(void) {
  struct etw_hub_limits lim = {0, 1000, 8, 0};
  struct etw_hub *h = etw_hub_new(&lim);
  struct etw_sub_filter f = {0};
  f.max_level = -1;
  f.pids[f.n_pids++] = 101;
  struct etw_sub *all = etw_hub_subscribe(h, NULL, 0, NULL);
  struct etw_sub *filt = etw_hub_subscribe(h, &f, 0, NULL);
  for (int i = 0; i < 3; i++) etw_hub_publish(h, mk(10, "sched", 100));
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  int got = etw_sub_read(all, &w, ETW_FMT_NDJSON, 200, 0); /* a few of the first batch */
  CHECK(got > 0 && got < 10);
  etw_jw_free(&w);
  struct etw_sub_stats a, b;
  etw_sub_close_final(all, &a);
  etw_sub_close_final(filt, &b);
  CHECK_EQ(a.delivered, got);
  CHECK_EQ(a.dropped, 30 - got);
  CHECK_EQ(b.dropped, 15);
  struct etw_hub_stats hs;
  etw_hub_stats(h, &hs);
  CHECK_EQ(hs.sub_dropped, 30 - got + 15);
  /* a frame whose write failed: its events were not delivered after all */
  struct etw_sub *u = etw_hub_subscribe(h, NULL, 0, NULL);
  etw_hub_publish(h, mk(10, "sched", 100));
  etw_jw_init(&w, 1 << 20);
  CHECK_EQ(etw_sub_read(u, &w, ETW_FMT_NDJSON, 1 << 20, 0), 10);
  etw_jw_free(&w);
  etw_sub_unsend(u, 10);
  struct etw_sub_stats us;
  etw_sub_close_final(u, &us);
  CHECK_EQ(us.delivered, 0);
  CHECK_EQ(us.dropped, 10);
  etw_hub_free(h);
}

/* a batch of one CPU's events at times t0 + k[i] (ns), its data {"t":k[i]} */
static struct etw_batch *mk_ts(int64_t t0, const int *k, int n, uint8_t cpu) {
  struct etw_batch *b = etw_batch_new((uint32_t)n, 1 << 20);
  for (int i = 0; i < n; i++) {
    size_t mark = b->data.len;
    etw_jw_lit(&b->data, "\"System\":{},\"EventData\":{\"t\":");
    etw_jw_u64(&b->data, (uint64_t)k[i]);
    etw_jw_lit(&b->data, "}}");
    struct etw_evref r = {0};
    r.provider = etw_intern("sched");
    r.name = etw_intern("ev");
    r.ts_ns = t0 + k[i];
    r.cpu = cpu;
    CHECK(etw_batch_commit(b, mark, &r) == 0);
  }
  return b;
}

/* the "t" of every event read now, in order, into t[] (at most 64); checks seq is +1 each time */
static int read_ts(struct etw_sub *s, int *t, uint64_t *seq) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  int n = 0;
  while (etw_sub_read(s, &w, ETW_FMT_NDJSON, 1 << 16, 0) > 0) {
  }
  for (const char *p = etw_jw_cstr(&w); (p = strstr(p, "{\"seq\":")) && n < 64; p++) {
    uint64_t q = strtoull(p + 7, NULL, 10);
    CHECK_EQ(q, *seq + 1);
    *seq = q;
    const char *tp = strstr(p, "\"t\":");
    t[n++] = tp ? atoi(tp + 4) : -1;
  }
  etw_jw_free(&w);
  return n;
}

/* time order (etw_hub_set_order): held until every producer's watermark passed (or the window),
 * merged by time before seq; a late event is dropped and counted, never delivered out of
 * order; beyond the held bound the oldest go early (counted); the end releases everything */
static void test_order(void) {
  struct etw_hub_limits lim = {1 << 20, 1000, 8, 0};
  struct etw_hub *h = etw_hub_new(&lim);
  etw_hub_set_order(h, 500, 8);
  struct etw_sub *s = etw_hub_subscribe(h, NULL, 0, NULL);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t T = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + 60000000000LL; /* +60 s */
  int t[64];
  uint64_t seq = 0;
  etw_hub_tick(h, 0, INT64_MIN); /* the two producers say they exist */
  etw_hub_tick(h, 1, INT64_MIN);
  etw_hub_publish(h, mk_ts(T, (const int[]){1, 3, 5}, 3, 0));
  CHECK_EQ(read_ts(s, t, &seq), 0); /* CPU 1 has not said anything; younger than the window */
  etw_hub_publish(h, mk_ts(T, (const int[]){2, 4}, 2, 1)); /* CPU 1 is at 4 now */
  CHECK_EQ(read_ts(s, t, &seq), 4);
  CHECK(t[0] == 1 && t[1] == 2 && t[2] == 3 && t[3] == 4);
  etw_hub_tick(h, 1, T + 10);
  CHECK_EQ(read_ts(s, t, &seq), 1);
  CHECK_EQ(t[0], 5);
  /* late: 4 is older than 5, already delivered */
  etw_hub_publish(h, mk_ts(T, (const int[]){4, 6}, 2, 1));
  struct etw_hub_stats hs;
  etw_hub_stats(h, &hs);
  CHECK_EQ(hs.reorder_late, 1);
  CHECK_EQ(hs.hub_dropped, 1);
  CHECK_EQ(hs.reorder_held, 1);
  CHECK_EQ(read_ts(s, t, &seq), 0); /* 6 is past CPU 0's watermark (5) */
  /* CPU 0 at 28 lets 6 go; then 9 held > 8: the oldest goes early, in order */
  etw_hub_publish(h, mk_ts(T, (const int[]){20, 21, 22, 23, 24, 25, 26, 27, 28}, 9, 0));
  CHECK_EQ(read_ts(s, t, &seq), 2);
  CHECK(t[0] == 6 && t[1] == 20);
  etw_hub_stats(h, &hs);
  CHECK_EQ(hs.reorder_early, 1);
  CHECK_EQ(hs.reorder_held, 8);
  etw_hub_end(h); /* the rest, in order, then the end */
  CHECK_EQ(read_ts(s, t, &seq), 8);
  for (int i = 0; i < 8; i++) CHECK_EQ(t[i], 21 + i);
  etw_hub_stats(h, &hs);
  CHECK_EQ(hs.produced, 15);
  etw_sub_close(s);
  etw_hub_free(h);
}

int main(void) {
  test_order();
  limits();
  struct etw_hub_limits lim = {1 << 20, 100, 8, 0};
  struct etw_hub *h = etw_hub_new(&lim);

  /* filters: provider, pid, level */
  struct etw_sub_filter f = {0};
  f.max_level = -1;
  snprintf(f.providers[f.n_providers++], ETW_FILTER_NAME_MAX, "sched");
  f.pids[f.n_pids++] = 101;
  struct etw_sub *sf = etw_hub_subscribe(h, &f, 0, NULL);
  struct etw_sub_filter fl = {0};
  fl.max_level = 2;
  struct etw_sub *sl = etw_hub_subscribe(h, &fl, 0, NULL);
  struct etw_sub *all = etw_hub_subscribe(h, NULL, 0, NULL);
  etw_hub_publish(h, mk(10, "sched", 100));
  etw_hub_publish(h, mk(10, "other", 100));
  uint64_t g = 0, ls = 0;
  CHECK_EQ(drain(sf, &g, &ls), 5); /* sched, pid 101: odd i */
  g = 0, ls = 0;
  CHECK_EQ(drain(sl, &g, &ls), 2 * 6); /* levels 0..2 of i%6 in 20 events: 0,1,2,6,7,8 ×2 */
  g = 0, ls = 0;
  CHECK_EQ(drain(all, &g, &ls), 20);
  CHECK_EQ(g, 0);
  CHECK_EQ(ls, 20);

  /* a stalled subscriber: bound 100 events, 25 batches of 10 → 10 kept (first batch always
   * fits), 15 dropped and reported in-band; a fast one gets everything */
  struct etw_sub *slow = etw_hub_subscribe(h, NULL, 0, NULL);
  uint64_t fg = 0, fls = 20, fast_n = 0;
  for (int i = 0; i < 25; i++) {
    etw_hub_publish(h, mk(10, "sched", 100));
    fast_n += (uint64_t)drain(all, &fg, &fls);
  }
  CHECK_EQ(fast_n, 250);
  CHECK_EQ(fg, 0);
  uint64_t sg = 0, sls = 0;
  int got = drain(slow, &sg, &sls);
  CHECK_EQ(got + (int64_t)sg, 250);
  CHECK_EQ(got, 100);
  struct etw_sub_stats ss;
  etw_sub_stats(slow, &ss);
  CHECK_EQ(ss.dropped, sg);
  CHECK_EQ(ss.delivered, 100);
  struct etw_hub_stats hs;
  etw_hub_stats(h, &hs);
  CHECK_EQ(hs.produced, 270);
  /* the two filtered subscribers were stalled too: each dropped the 15 batches it had no room
   * for, counting only its matching events (pid 101: 5 per batch; level <= 2: 6 per batch) */
  CHECK_EQ(hs.sub_dropped, 150 + 15 * 5 + 15 * 6);

  /* replay: from=seq inside the window starts exactly there */
  struct etw_sub *rp = etw_hub_subscribe(h, NULL, 265, NULL);
  uint64_t rg = 0, rls = 264;
  CHECK_EQ(drain(rp, &rg, &rls), 6); /* 265..270 */
  CHECK_EQ(rg, 0);
  etw_sub_close(rp);

  /* a replay larger than the subscriber's own queue: the excess is one "hub" gap, counted as
   * dropped, and delivered + dropped covers the whole replay */
  struct etw_sub_filter small = {0};
  small.max_level = -1;
  small.queue_events = 20;
  struct etw_sub *rq = etw_hub_subscribe(h, &small, 221, NULL); /* 221..270 = 50 events */
  struct etw_jw gw;
  etw_jw_init(&gw, 1 << 20);
  CHECK(etw_sub_read(rq, &gw, ETW_FMT_NDJSON, 1 << 20, 0) > 0);
  CHECK(strstr(etw_jw_cstr(&gw), "\"Layer\":\"hub\"") != NULL);
  CHECK(strstr(etw_jw_cstr(&gw), "larger than this client's queue") != NULL);
  etw_jw_free(&gw);
  struct etw_sub_stats rs;
  etw_sub_stats(rq, &rs);
  CHECK_EQ(rs.delivered + rs.dropped, 50);
  CHECK_EQ(rs.delivered, 20);
  etw_sub_close(rq);

  /* limit of subscribers */
  int err = 0;
  struct etw_sub *extra[8];
  int n_extra = 0;
  while (n_extra < 8 && (extra[n_extra] = etw_hub_subscribe(h, NULL, 0, &err))) n_extra++;
  CHECK_EQ(err, ETW_E_LIMIT);
  for (int i = 0; i < n_extra; i++) etw_sub_close(extra[i]);

  /* concurrent producers: order is seq order for every reader, nothing lost with room */
  struct etw_hub_limits lim2 = {0, 1 << 20, 8, 0};
  struct etw_hub *h2 = etw_hub_new(&lim2);
  struct etw_sub *c = etw_hub_subscribe(h2, NULL, 0, NULL);
  pthread_t th[2];
  struct prod pr = {h2, 200};
  pthread_create(&th[0], NULL, producer, &pr);
  pthread_create(&th[1], NULL, producer, &pr);
  pthread_join(th[0], NULL);
  pthread_join(th[1], NULL);
  etw_hub_end(h2);
  uint64_t cg = 0, cls = 0;
  CHECK_EQ(drain(c, &cg, &cls), 4000);
  struct etw_jw w;
  etw_jw_init(&w, 1024);
  CHECK_EQ(etw_sub_read(c, &w, ETW_FMT_JSON_ARRAY, 1024, 10), -1); /* end of stream */
  etw_jw_free(&w);
  etw_sub_close(c);
  etw_hub_free(h2);

  /* JSON array format is one valid frame */
  etw_hub_publish(h, mk(3, "sched", 100));
  etw_jw_init(&w, 1 << 20);
  CHECK_EQ(etw_sub_read(all, &w, ETW_FMT_JSON_ARRAY, 1 << 20, 0), 3);
  CHECK(w.len > 2 && w.buf[0] == '[' && w.buf[w.len - 1] == ']');
  etw_jw_free(&w);

  etw_sub_close(sf);
  etw_sub_close(sl);
  etw_sub_close(all);
  etw_sub_close(slow);
  etw_hub_free(h);

  /* shared renderings: two unfiltered subscribers copy each batch's events rendered once;
   * their frames are byte-identical to those of a subscriber that formats event by event (a
   * filter that passes everything), in both formats, also when a frame is cut mid-batch */
  for (int fmt = 0; fmt < 2; fmt++) {
    struct etw_hub_limits l7 = {0, 1 << 16, 8, 0};
    struct etw_hub *h7 = etw_hub_new(&l7);
    struct etw_sub_filter pass = {0};
    pass.max_level = 255;
    struct etw_sub *a7 = etw_hub_subscribe(h7, NULL, 0, NULL);
    struct etw_sub *b7 = etw_hub_subscribe(h7, NULL, 0, NULL);
    struct etw_sub *c7 = etw_hub_subscribe(h7, &pass, 0, NULL);
    struct etw_jw wa, wb, wc;
    etw_jw_init(&wa, 1 << 24);
    etw_jw_init(&wb, 1 << 24);
    etw_jw_init(&wc, 1 << 24);
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < 4; i++) etw_hub_publish(h7, mk(7 + i, "sched", 100));
      if (round == 2) etw_sub_close(b7), b7 = NULL; /* one unfiltered reader left: no sharing */
      /* round 1: frames of ~300 bytes, so batches (~400 bytes rendered) are cut */
      size_t maxb = round == 1 ? 300 : 1 << 20;
      for (;;) {
        wa.len = wb.len = wc.len = 0;
        int na = etw_sub_read(a7, &wa, (enum etw_sub_fmt)fmt, maxb, 0);
        int nb = b7 ? etw_sub_read(b7, &wb, (enum etw_sub_fmt)fmt, maxb, 0) : na;
        int nc = etw_sub_read(c7, &wc, (enum etw_sub_fmt)fmt, maxb, 0);
        CHECK_EQ(na, nc);
        CHECK_EQ(nb, nc);
        if (nc <= 0) break;
        CHECK_STR(etw_jw_cstr(&wa), etw_jw_cstr(&wc));
        if (b7) CHECK_STR(etw_jw_cstr(&wb), etw_jw_cstr(&wc));
      }
    }
    struct etw_sub_stats sa, sc;
    etw_sub_stats(a7, &sa);
    etw_sub_stats(c7, &sc);
    CHECK_EQ(sa.delivered, 3 * (7 + 8 + 9 + 10));
    CHECK_EQ(sc.delivered, sa.delivered);
    CHECK_EQ(sa.queued_events, 0);
    etw_jw_free(&wa);
    etw_jw_free(&wb);
    etw_jw_free(&wc);
    etw_sub_close(a7);
    etw_sub_close(c7);
    etw_hub_free(h7);
  }

  /* sleeping readers wake promptly: on a publish, on etw_sub_wake (returns 0), on the end */
  {
    struct etw_hub_limits l3 = {0, 1000, 8, 0};
    struct etw_hub *h3 = etw_hub_new(&l3);
    struct etw_sub *s3 = etw_hub_subscribe(h3, NULL, 0, NULL);
    check_wakes(h3, s3, poke_publish, 1, 0);
    check_wakes(h3, s3, poke_wake, 0, 0);
    check_wakes(h3, s3, poke_end, 0, 1);
    etw_sub_close(s3);
    etw_hub_free(h3);
  }

  /* real threads: 2 producers, 4 readers (one stalling with a small queue, one filtered, one
   * lingering); every reader sees seq order, and delivered + dropped = produced-for-its-filter */
  {
    struct etw_hub_limits l4 = {0, 1 << 16, 8, 0};
    struct etw_hub *h4 = etw_hub_new(&l4);
    struct etw_sub_filter sq = {0};
    sq.max_level = -1;
    sq.queue_events = 50;
    struct etw_sub_filter fp = {0};
    fp.max_level = -1;
    fp.pids[fp.n_pids++] = 101;
    struct rdr rd[4] = {{.s = etw_hub_subscribe(h4, NULL, 0, NULL)},
                        {.s = etw_hub_subscribe(h4, &sq, 0, NULL), .slow_ms = 5},
                        {.s = etw_hub_subscribe(h4, &fp, 0, NULL)},
                        {.s = etw_hub_subscribe(h4, NULL, 0, NULL), .linger_ms = 5}};
    pthread_t rt[4], pt[2];
    for (int i = 0; i < 4; i++) pthread_create(&rt[i], NULL, reader, &rd[i]);
    struct prod p4 = {h4, 300};
    pthread_create(&pt[0], NULL, producer, &p4);
    pthread_create(&pt[1], NULL, producer, &p4);
    pthread_join(pt[0], NULL);
    pthread_join(pt[1], NULL);
    etw_hub_end(h4);
    for (int i = 0; i < 4; i++) pthread_join(rt[i], NULL);
    uint64_t want[4] = {6000, 6000, 3000, 6000};
    for (int i = 0; i < 4; i++) {
      struct etw_sub_stats st;
      etw_sub_stats(rd[i].s, &st);
      CHECK_EQ(rd[i].bad_order, 0);
      CHECK_EQ(rd[i].events + rd[i].gaps, want[i]);
      CHECK_EQ(st.delivered, rd[i].events);
      CHECK_EQ(st.dropped, rd[i].gaps);
      CHECK_EQ(st.queued_events, 0);
    }
    CHECK_EQ(rd[0].gaps, 0);
    CHECK_EQ(rd[2].gaps, 0);
    CHECK_EQ(rd[3].gaps, 0);
    CHECK(rd[1].gaps > 0); /* 5 ms per read with 50 events of room cannot keep up */
    struct etw_hub_stats hs4;
    etw_hub_stats(h4, &hs4);
    CHECK_EQ(hs4.sub_dropped, rd[1].gaps);
    for (int i = 0; i < 4; i++) etw_sub_close(rd[i].s);
    etw_hub_free(h4);
  }

  /* the queue's bound in batches: a stalled reader with room for 1e6 events keeps 4096 tiny
   * batches, the rest is dropped, counted and reported */
  {
    struct etw_hub_limits l5 = {0, 1000000, 8, 0};
    struct etw_hub *h5 = etw_hub_new(&l5);
    struct etw_sub *s5 = etw_hub_subscribe(h5, NULL, 0, NULL);
    for (int i = 0; i < 5000; i++) etw_hub_publish(h5, mk(1, "sched", 100));
    struct etw_sub_stats st;
    etw_sub_stats(s5, &st);
    CHECK_EQ(st.queued_events, 4096);
    CHECK_EQ(st.dropped, 5000 - 4096);
    uint64_t g5 = 0, ls5 = 0;
    CHECK_EQ(drain(s5, &g5, &ls5), 4096);
    CHECK_EQ(g5, 5000 - 4096);
    etw_sub_close(s5);
    etw_hub_free(h5);
  }

  /* lingering: 1-event batches, 5 per ~1 ms, for ~0.6-1 s. A reader lingering 20 ms writes its
   * frames ~20 ms apart once it has measured the rate (after 50-100 ms; the hub's clock and
   * ours differ by scheduling delays, so a few short gaps are allowed), and far fewer frames
   * than one that does not linger; both get every event. */
  {
    struct etw_hub_limits l6 = {0, 1 << 16, 8, 0};
    struct etw_hub *h6 = etw_hub_new(&l6);
    struct rdr fast = {.s = etw_hub_subscribe(h6, NULL, 0, NULL)};
    struct rdr lin = {.s = etw_hub_subscribe(h6, NULL, 0, NULL), .linger_ms = 20};
    pthread_t t1, t2, tp;
    pthread_create(&t1, NULL, reader, &fast);
    pthread_create(&t2, NULL, reader, &lin);
    struct ticker tk = {h6, 3000, 5};
    pthread_create(&tp, NULL, ticking_producer, &tk);
    pthread_join(tp, NULL);
    atomic_store(&lin.t_stop, now_s());
    etw_hub_end(h6);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK_EQ(fast.events, 3000);
    CHECK_EQ(lin.events, 3000);
    CHECK(lin.short_gaps * 20 <= lin.frames); /* at most 5 % */
    CHECK(lin.frames < fast.frames / 2);
    fprintf(stderr, "linger: %llu frames (min gap %.1f ms, %llu under 18 ms) vs %llu without\n",
            (unsigned long long)lin.frames, lin.min_gap_s * 1000, (unsigned long long)lin.short_gaps,
            (unsigned long long)fast.frames);
    etw_sub_close(fast.s);
    etw_sub_close(lin.s);
    etw_hub_free(h6);
  }

  /* lingering ends when the queue is half full, whatever the linger: a reader lingering 3 s
   * with room for 512 events (at the measured ~17 events/s a linger period brings ~50, under a
   * quarter of the queue, so it does linger) is still asleep with 255 queued after a burst and
   * returns at the 256th */
  {
    struct etw_hub_limits l8 = {0, 1 << 16, 8, 0};
    struct etw_hub *h8 = etw_hub_new(&l8);
    struct etw_sub *s8 = lingering_sub(h8, 512, 3000);
    struct waiter wt = {s8, 0, 0, 0, 0};
    pthread_t th8;
    pthread_create(&th8, NULL, wait_once, &wt);
    while (!atomic_load(&wt.started)) sleep_ms(1);
    for (int i = 0; i < 255; i++) etw_hub_publish(h8, mk(1, "sched", 100));
    sleep_ms(200);
    CHECK_EQ(atomic_load(&wt.done), 0); /* 255 of 512: still lingering */
    etw_hub_publish(h8, mk(1, "sched", 100));
    pthread_join(th8, NULL);
    CHECK_EQ(wt.ret, 256);
    CHECK(wt.took < 2.5); /* not the 3 s linger */
    struct etw_sub_stats st8;
    etw_sub_stats(s8, &st8);
    CHECK_EQ(st8.dropped, 0);
    etw_sub_close(s8);
    etw_hub_free(h8);
  }

  /* ... and a reader does not linger at all when a linger period brings a quarter of its queue
   * or more: 1 event per 60 ms is 50 per 3 s, over a quarter of 16 — and still is when a loaded
   * machine sleeps up to 750 ms instead of 60 (CI under wine once measured a rate under a
   * quarter of 128 this way) */
  {
    struct etw_hub_limits l10 = {0, 1 << 16, 8, 0};
    struct etw_hub *h10 = etw_hub_new(&l10);
    struct etw_sub *s10 = lingering_sub(h10, 16, 3000);
    struct etw_jw w10;
    etw_jw_init(&w10, 1 << 20);
    etw_hub_publish(h10, mk(1, "sched", 100));
    double t10 = now_s();
    CHECK_EQ(etw_sub_read(s10, &w10, ETW_FMT_NDJSON, 1 << 20, 5000), 1); /* at once */
    CHECK(now_s() - t10 < 2.5);
    etw_jw_free(&w10);
    etw_sub_close(s10);
    etw_hub_free(h10);
  }

  /* memory held by the replay window and the queues is what the events use: a quiet producer's
   * batch (one event in room reserved for 128 KiB, as the Linux readers reserve) is trimmed at
   * publish, so 3,000 of them under a 256 KiB replay window hold well under 1 MiB (untrimmed:
   * ~2,500 of them fit the window's JSON bytes, ~370 MB); and they still read back whole */
  {
    struct etw_hub_limits l9 = {256 * 1024, 1 << 16, 8, 0};
    struct etw_hub *h9 = etw_hub_new(&l9);
    struct etw_sub *s9 = etw_hub_subscribe(h9, NULL, 0, NULL);
    size_t before = heap_bytes();
    for (int i = 0; i < 3000; i++) {
      struct etw_batch *b = etw_batch_new(512, 256 * 1024);
      etw_jw_reserve(&b->data, 128 * 1024);
      size_t mark = b->data.len;
      etw_jw_lit(&b->data, "\"System\":{},\"EventData\":{\"i\":");
      etw_jw_u64(&b->data, (uint64_t)i);
      etw_jw_lit(&b->data, "}}");
      struct etw_evref r = {0};
      r.provider = etw_intern("quiet");
      CHECK(etw_batch_commit(b, mark, &r) == 0);
      etw_hub_publish(h9, b);
      if (i == 999) { /* the subscriber's queue holds 1,000 of them too */
        size_t grown = heap_bytes() - before;
        CHECK(grown < (1u << 20));
        fprintf(stderr, "1,000 quiet batches queued + in the replay window: %zu KiB\n", grown >> 10);
      }
    }
    uint64_t g9 = 0, ls9 = 0;
    CHECK_EQ(drain(s9, &g9, &ls9), 3000);
    CHECK_EQ(g9, 0);
    CHECK_EQ(ls9, 3000);
    size_t grown = heap_bytes() - before;
    fprintf(stderr, "3,000 quiet batches published, 256 KiB replay window: %zu KiB held\n", grown >> 10);
    CHECK(grown < (1u << 20));
    struct etw_jw w9;
    etw_jw_init(&w9, 1 << 20);
    struct etw_sub *r9 = etw_hub_subscribe(h9, NULL, 2999, NULL); /* replay from the window */
    CHECK(etw_sub_read(r9, &w9, ETW_FMT_NDJSON, 1 << 20, 0) == 2);
    CHECK(strstr(etw_jw_cstr(&w9), "{\"seq\":3000,\"System\":{},\"EventData\":{\"i\":2999}}\n") != NULL);
    etw_jw_free(&w9);
    etw_sub_close(r9);
    etw_sub_close(s9);
    etw_hub_free(h9);
  }
  test_lossless();
  test_close_counts_queued();
  T_DONE();
}
