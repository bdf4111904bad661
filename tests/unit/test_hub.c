/* test_hub.c — the hub's contract: seq order, per-subscriber filters, bounded queues with
 * drop-and-count (delivered + dropped = produced for the filter), in-band gap records, the
 * replay window for from=<seq>, end of stream, and concurrent producers. */
#include <pthread.h>

#include "etwcore/err.h"
#include "etwcore/hub.h"
#include "t.h"

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

int main(void) {
  struct etw_hub_limits lim = {1 << 20, 100, 8};
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
  struct etw_hub_limits lim2 = {0, 1 << 20, 8};
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
  T_DONE();
}
