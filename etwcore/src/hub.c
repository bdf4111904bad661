/* hub.c — per-session fan-out of encoded batches to bounded subscriber queues (see hub.h).
 *
 * Locking: the hub's mutex guards the sequence numbers, the replay ring, the provider counts and
 * the subscriber list. Each subscriber's queue is a fixed-size single-producer/single-consumer
 * ring of batch references: the producer is whoever publishes (publishers are serialised by the
 * hub's mutex), the consumer the subscriber's one reader. Neither takes a lock to push or pop,
 * so a publisher does O(1) lock-free work per subscriber (push a reference, or count a drop)
 * and 100 senders never contend on one mutex — nor with a publisher, which could otherwise be
 * stalled by a sender preempted while holding its lock. The ring entries stay valid until the
 * reader advances its head, so etw_sub_read formats straight from them, outside any lock.
 *
 * Wake-ups: the reader announces what it waits for in `waiting` (seq_cst, then re-checks its
 * condition before sleeping); a publisher that sees it waiting takes it back with a CAS (so one
 * wake per sleep) and wakes it. A reader that is not asleep is never signalled. On Linux the
 * reader sleeps on `waiting` itself (a futex: one syscall each side, no mutex to re-take after
 * the wake-up); elsewhere on a condition variable whose mutex is used for nothing else.
 * With etw_sub_set_linger, a reader that sees more than two batches per linger period
 * arriving (each CPU's reader publishes on its own, so that is a many-CPU or high-rate
 * session) waits until `linger` after its previous frame before reading (unless a frame's
 * worth of bytes is queued): one wake-up and one larger frame per period instead of one per
 * publish. At lower rates it does not linger: on a small machine the readers' publishes are
 * about as far apart as the linger, and waiting would only add latency or a second wake-up.
 *
 * Lossless hubs: a publisher that finds a queue without room sets `pub_waiting` (seq_cst) and
 * re-checks before it sleeps on `room` (timed, 50 ms, as a fallback only); a reader that
 * advanced its head (seq_cst) and then sees `pub_waiting` broadcasts `room` under the hub's
 * mutex, so the publisher either saw the freed slots or is woken. Close and cancel broadcast too.
 */
#include "etwcore/hub.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etwcore/err.h"
#include "etwcore/util.h"
#include "ro_heap.h"

#ifdef __linux__ /* readers sleep on a futex (no mutex to re-take after a wake-up) */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HUB_FUTEX 1
#endif

#define PROV_MAX 256
#define RING_MAX 4096u /* queue bound in batches (the bound in events is the limits') */
#define RATE_WINDOW_NS 50000000LL /* a lingering reader measures the publish rate over this */

enum { WAIT_NONE, WAIT_DATA, WAIT_LINGER };

/* A published batch as the subscriber queues hold it: beside the batch, its events rendered
 * once per format ({"seq":N,…} joined with ',' for arrays, lines for ndjson) by the first
 * unfiltered reader that needs them, for the other unfiltered readers to copy in one piece.
 * Freed, renderings included, when the last queue lets go of it (the replay window keeps
 * plain batches). */
struct hub_item {
  atomic_int refs;
  struct etw_batch *b;
  struct etw_jw *_Atomic frag[2]; /* index: enum etw_sub_fmt */
};

struct qent {
  struct hub_item *it;
  uint32_t from; /* first event of it->b queued for this subscriber (replay: from=<seq>) */
};

struct etw_sub {
  struct etw_hub *h;
  struct etw_sub *next, *prev; /* hub list: the hub's mutex */
  uint64_t id;
  struct etw_sub_filter f;
  int match_all;
  uint32_t qmax; /* queue bound in events */
  /* ring: entries [head, tail) are queued; the producer writes tail, the reader head */
  struct qent *q;
  uint32_t qmask;
  _Atomic uint64_t qtail, qhead;
  _Atomic uint64_t queued_events, queued_bytes; /* producer adds, reader subtracts */
  _Atomic uint64_t delivered, dropped;
  _Atomic uint64_t pending_gap; /* dropped events not yet reported in-band */
  uint32_t pos;                 /* reader only: next event index within q[head] */
  uint64_t pending_older;  /* replay request older than the window (set before publication) */
  uint64_t pending_replay; /* replayed events that did not fit this subscriber's queue */
  uint64_t skip_below;     /* lossless hubs: from=<seq> not yet published: events before it
                            * are not for this subscriber (set before publication) */
  int64_t linger_ns; /* reader's settings (etw_sub_set_linger, before the first read) */
  size_t linger_bytes;
  int64_t last_frame_ns; /* reader only: monotonic time of the last read that returned records */
  int64_t win_t0;        /* reader only: publish-rate window (start, tail then, verdict) */
  uint64_t win_tail0, win_off0;
  _Atomic uint64_t offered; /* events offered to this queue (queued or dropped): the producer's */
  int fast; /* 2 = the last window was fast, 1 = the one before it, 0 = neither */
  atomic_int waiting, woken, ended;
  pthread_mutex_t mu; /* only to sleep on cv */
  pthread_cond_t cv;
};

struct prov_count {
  const char *p;
  uint64_t n;
};

struct etw_hub {
  pthread_mutex_t mu;
  struct etw_hub_limits lim;
  uint64_t next_seq;
  struct etw_batch **rp; /* replay ring */
  uint32_t rp_head, rp_count, rp_cap;
  size_t rp_bytes;
  struct etw_sub *subs;
  uint32_t nsubs;
  uint64_t sub_ids;
  uint64_t produced, bytes, hub_dropped, sub_dropped_past;
  struct prov_count prov[PROV_MAX];
  uint32_t nprov;
  uint64_t prov_other;
  int ended;
  char end_why[240];       /* etw_hub_end_why: why the stream ended (a client sees it) */
  int cancel;              /* etw_hub_cancel: lossless publishers stop waiting */
  pthread_cond_t room;     /* lossless: a publisher waits here for queue room (with mu) */
  atomic_int pub_waiting;  /* a lossless publisher sleeps on `room` */
  atomic_uint n_all; /* subscribers without a filter: renderings are shared when >= 2 */
  /* time order (etw_hub_set_order): published batches wait here, each with its next event,
   * until every producer has said (etw_hub_tick) that it has nothing older left, or the events
   * are reorder_ms old (UTC), or more than reorder_events are held; then they are merged by
   * time into new batches, which get their seq numbers (hub's mutex); a heap on each held
   * batch's next event (ro_heap.h) */
  struct ro_heap ro;
  uint64_t ro_arrivals; /* batches held so far: the heap's tie-break */
  uint64_t ro_events;
  int64_t ro_last;   /* time of the last event released */
  uint64_t ro_late, ro_early;
  uint32_t reorder_ms, reorder_events; /* etw_hub_set_order; 0 = off */
  /* each producer's (CPU's) watermark: it publishes nothing older (etw_hub_tick, and the last
   * event of its last batch: a CPU's events come in time order). INT64_MAX = no such producer,
   * INT64_MIN = registered (etw_hub_tick with INT64_MIN before it starts) but nothing said yet:
   * it holds everything back until the window ends */
  int64_t wm[ETW_ORDER_MAX_SRC];
  uint32_t nwm; /* wm[nwm..] are all INT64_MAX */
};

struct etw_hub *etw_hub_new(const struct etw_hub_limits *lim) {
  struct etw_hub *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->lim = *lim;
  if (!h->lim.sub_queue_events) h->lim.sub_queue_events = 65536;
  if (!h->lim.max_subscribers) h->lim.max_subscribers = 128;
  h->next_seq = 1;
  pthread_mutex_init(&h->mu, NULL);
  etw_cond_init_mono(&h->room);
  return h;
}

void etw_hub_free(struct etw_hub *h) {
  if (!h) return;
  for (uint32_t i = 0; i < h->ro.n; i++) etw_batch_unref(h->ro.a[i].b);
  ro_heap_free(&h->ro);
  while (h->subs) etw_sub_close(h->subs); /* defensive: callers close their own */
  for (uint32_t i = 0; i < h->rp_count; i++) etw_batch_unref(h->rp[(h->rp_head + i) % h->rp_cap]);
  free(h->rp);
  pthread_cond_destroy(&h->room);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

static struct timespec to_ts(int64_t ns) {
  struct timespec t = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
  return t;
}

/* whether the event's ProcessName matches one of the filter's patterns (read from its text) */
static int proc_match(const struct etw_sub_filter *f, const struct etw_batch *b, const struct etw_evref *e) {
  char nm[256];
  int n = etw_event_pname(b->data.buf + e->off, e->len, nm, sizeof nm);
  for (uint32_t i = 0; n >= 0 && i < f->n_procs; i++)
    if (etw_pname_match(nm, (size_t)n, f->procs[i])) return 1;
  return 0;
}

/* @a equals @b, ASCII letters compared without case (as etwd convert's --provider and --event) */
static int eq_nocase(const char *a, const char *b) {
  for (;; a++, b++) {
    unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
    if (x >= 'A' && x <= 'Z') x += 32;
    if (y >= 'A' && y <= 'Z') y += 32;
    if (x != y) return 0;
    if (!x) return 1;
  }
}

static int match(const struct etw_sub *s, const struct etw_batch *b, const struct etw_evref *e) {
  if (s->match_all) return 1;
  const struct etw_sub_filter *f = &s->f;
  if (f->max_level >= 0 && e->level > f->max_level) return 0;
  if (f->n_providers) {
    uint32_t i = 0;
    while (i < f->n_providers && !eq_nocase(f->providers[i], e->provider)) i++;
    if (i == f->n_providers) return 0;
  }
  if (f->n_names || f->n_ids) {
    int ok = 0;
    for (uint32_t i = 0; i < f->n_names && !ok; i++) ok = e->name && eq_nocase(f->names[i], e->name);
    for (uint32_t i = 0; i < f->n_ids && !ok; i++) ok = f->ids[i] == e->event_id;
    if (!ok) return 0;
  }
  if (f->n_pids) {
    uint32_t i = 0;
    while (i < f->n_pids && f->pids[i] != e->pid) i++;
    if (i == f->n_pids) return 0;
  }
  return !f->n_procs || proc_match(f, b, e);
}

static uint64_t count_matching(const struct etw_sub *s, const struct etw_batch *b, uint32_t from) {
  if (s->match_all) return b->n - from;
  uint64_t k = 0;
  for (uint32_t i = from; i < b->n; i++) k += (uint64_t)match(s, b, &b->ev[i]);
  return k;
}

/* grow a ring of batch pointers to hold one more; 0 on success */
static int ring_push(struct etw_batch ***ring, uint32_t *head, uint32_t *count, uint32_t *cap,
                     struct etw_batch *b) {
  if (*count == *cap) {
    uint32_t nc = *cap ? *cap * 2 : 16;
    struct etw_batch **nr = malloc(nc * sizeof *nr);
    if (!nr) return -1;
    for (uint32_t i = 0; i < *count; i++) nr[i] = (*ring)[(*head + i) % *cap];
    free(*ring);
    *ring = nr;
    *head = 0;
    *cap = nc;
  }
  (*ring)[(*head + *count) % *cap] = b;
  (*count)++;
  return 0;
}

/* wake the reader, whose `waiting` the caller has just taken from a sleeping state */
static void sub_kick(struct etw_sub *s) {
#ifdef HUB_FUTEX
  syscall(SYS_futex, &s->waiting, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
  /* the reader holds mu from setting `waiting` until cond_wait releases it: once we have had
   * the mutex, it waits, and the signal (given outside the lock, so that the woken reader does
   * not block on it again) reaches it */
  pthread_mutex_lock(&s->mu);
  pthread_mutex_unlock(&s->mu);
  pthread_cond_signal(&s->cv);
#endif
}

/* after setting a flag the reader's wait condition tests (woken, ended) */
static void sub_signal(struct etw_sub *s) {
  if (atomic_exchange(&s->waiting, WAIT_NONE) != WAIT_NONE) sub_kick(s);
}

static struct hub_item *item_new(struct etw_batch *b) {
  struct hub_item *it = calloc(1, sizeof *it);
  if (!it) return NULL;
  atomic_init(&it->refs, 1);
  it->b = b;
  etw_batch_ref(b);
  return it;
}

static void item_unref(struct hub_item *it) {
  if (atomic_fetch_sub_explicit(&it->refs, 1, memory_order_acq_rel) != 1) return;
  for (int i = 0; i < 2; i++) {
    struct etw_jw *f = atomic_load_explicit(&it->frag[i], memory_order_relaxed);
    if (f) {
      etw_jw_free(f);
      free(f);
    }
  }
  etw_batch_unref(it->b);
  free(it);
}

/* append event @j of @b as its format wants it (the caller writes the ',' between records) */
static void put_event(struct etw_jw *out, const struct etw_batch *b, uint32_t j, enum etw_sub_fmt fmt) {
  const struct etw_evref *e = &b->ev[j];
  etw_jw_lit(out, "{\"seq\":");
  etw_jw_u64(out, b->first_seq + j);
  etw_jw_ch(out, ',');
  etw_jw_raw(out, b->data.buf + e->off, e->len);
  if (fmt == ETW_FMT_NDJSON) etw_jw_ch(out, '\n');
}

/* the item's events rendered in @fmt, made by the first caller; NULL on ENOMEM */
static const struct etw_jw *item_frag(struct hub_item *it, enum etw_sub_fmt fmt) {
  struct etw_jw *f = atomic_load_explicit(&it->frag[fmt], memory_order_acquire);
  if (f) return f;
  const struct etw_batch *b = it->b;
  f = malloc(sizeof *f);
  if (!f) return NULL;
  etw_jw_init(f, 0);
  etw_jw_reserve(f, b->data.len + (size_t)b->n * 28);
  for (uint32_t j = 0; j < b->n; j++) {
    if (fmt == ETW_FMT_JSON_ARRAY && j) etw_jw_ch(f, ',');
    put_event(f, b, j, fmt);
  }
  struct etw_jw *prev = NULL;
  if (f->err || !atomic_compare_exchange_strong(&it->frag[fmt], &prev, f)) {
    etw_jw_free(f); /* another reader was first (or no memory): use theirs */
    free(f);
    return prev;
  }
  return f;
}

/* a lingering reader stops waiting when a frame's worth of bytes is queued, or when its queue
 * is half full (in events or in ring slots: waiting longer could make the next publish drop),
 * or when something was already dropped for it */
static int linger_pressed(struct etw_sub *s) {
  if (atomic_load(&s->queued_bytes) >= s->linger_bytes || atomic_load(&s->pending_gap)) return 1;
  uint64_t used = atomic_load(&s->qtail) - atomic_load(&s->qhead);
  return used * 2 > s->qmask || atomic_load(&s->queued_events) * 2 >= s->qmax;
}

/* the producer's side (the hub's mutex held, or s not yet published); @it NULL = could not
 * be allocated: a drop like a full queue */
static void sub_offer(struct etw_sub *s, struct hub_item *it, struct etw_batch *b, uint32_t from) {
  if (s->skip_below > b->first_seq) { /* from=<seq> ahead of this batch (lossless hubs only) */
    if (s->skip_below >= b->first_seq + b->n) return;
    uint32_t k = (uint32_t)(s->skip_below - b->first_seq);
    if (k > from) from = k;
  }
  uint32_t n = b->n - from;
  atomic_fetch_add_explicit(&s->offered, n, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&s->qtail, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&s->qhead, memory_order_acquire);
  /* an empty queue always takes one batch, so a batch larger than the bound still flows; a
   * stale (too high) queued_events only means a drop the reader just made room for */
  if (it && tail - head <= s->qmask &&
      (tail == head || atomic_load_explicit(&s->queued_events, memory_order_relaxed) + n <= s->qmax)) {
    atomic_fetch_add_explicit(&it->refs, 1, memory_order_relaxed);
    s->q[tail & s->qmask] = (struct qent){it, from};
    /* seq_cst (as the tail store): a lingering reader's check of these after its `waiting`
     * store either sees them or the publisher sees it waiting below */
    atomic_fetch_add(&s->queued_events, n);
    atomic_fetch_add(&s->queued_bytes, b->data.len);
    atomic_store(&s->qtail, tail + 1); /* seq_cst: pairs with the reader's `waiting` store */
  } else {
    uint64_t k = count_matching(s, b, from);
    atomic_fetch_add_explicit(&s->dropped, k, memory_order_relaxed);
    atomic_fetch_add(&s->pending_gap, k);
  }
  int w = atomic_load(&s->waiting);
  if ((w == WAIT_DATA || (w == WAIT_LINGER && linger_pressed(s))) &&
      atomic_compare_exchange_strong(&s->waiting, &w, WAIT_NONE))
    sub_kick(s);
}

/* would sub_offer queue @n events for @s now (the producer's view; stale counts only err on
 * the side of "no room") */
static int sub_has_room(struct etw_sub *s, uint32_t n) {
  uint64_t tail = atomic_load_explicit(&s->qtail, memory_order_relaxed);
  uint64_t head = atomic_load(&s->qhead);
  return tail - head <= s->qmask && (tail == head || atomic_load(&s->queued_events) + n <= s->qmax);
}

/* lossless hubs: wait (h->mu held, released while asleep) until every subscriber has room for
 * @n events, the hub is cancelled or ended. A closed subscriber leaves the list, so it no
 * longer counts. */
static void wait_room(struct etw_hub *h, uint32_t n) {
  for (;;) {
    if (h->cancel || h->ended) break;
    atomic_store(&h->pub_waiting, 1);
    struct etw_sub *s = h->subs;
    while (s && sub_has_room(s, n)) s = s->next;
    if (!s) break;
    struct timespec ts = to_ts(etw_mono_ns() + 50000000LL);
#ifdef _WIN32 /* winpthreads' timed waits take CLOCK_REALTIME deadlines */
    ts = to_ts(etw_real_ns() + 50000000LL);
#endif
    pthread_cond_timedwait(&h->room, &h->mu, &ts);
  }
  atomic_store(&h->pub_waiting, 0);
}

/* a reader freed slots: wake a lossless publisher that waits for them */
static void room_freed(struct etw_hub *h) {
  if (!atomic_load(&h->pub_waiting)) return;
  pthread_mutex_lock(&h->mu);
  pthread_cond_broadcast(&h->room);
  pthread_mutex_unlock(&h->mu);
}

void etw_hub_cancel(struct etw_hub *h) {
  pthread_mutex_lock(&h->mu);
  h->cancel = 1;
  pthread_cond_broadcast(&h->room);
  pthread_mutex_unlock(&h->mu);
}

static void deliver(struct etw_hub *h, struct etw_batch *b, size_t mem);
static void ro_publish(struct etw_hub *h, struct etw_batch *b);

void etw_hub_publish(struct etw_hub *h, struct etw_batch *b) {
  if (!b) return;
  if (b->n == 0) {
    etw_batch_unref(b);
    return;
  }
  if (h->reorder_ms) {
    ro_publish(h, b);
    return;
  }
  /* outside the lock: queues and the replay window then hold what the events use, not what the
   * producer reserved (at low rates that was 20-50x more: --replay-kb was not a bound on memory) */
  etw_batch_trim(b);
  size_t mem = etw_batch_mem(b);
  pthread_mutex_lock(&h->mu);
  if (h->ended) { /* late publish after end: count, never deliver out of order */
    h->hub_dropped += b->n;
    pthread_mutex_unlock(&h->mu);
    etw_batch_unref(b);
    return;
  }
  if (h->lim.lossless && h->subs) wait_room(h, b->n);
  if (h->ended) { /* ended while we waited */
    h->hub_dropped += b->n;
    pthread_mutex_unlock(&h->mu);
    etw_batch_unref(b);
    return;
  }
  deliver(h, b, mem);
  pthread_mutex_unlock(&h->mu);
  etw_batch_unref(b);
}

/* assign seq numbers to @b, count it, keep it in the replay window, queue it for every
 * subscriber (the hub's mutex held; the caller keeps its reference) */
static void deliver(struct etw_hub *h, struct etw_batch *b, size_t mem) {
  b->first_seq = h->next_seq;
  h->next_seq += b->n;
  h->produced += b->n;
  h->bytes += b->data.len;
  const char *last = NULL;
  struct prov_count *pc = NULL;
  for (uint32_t i = 0; i < b->n; i++) {
    const char *p = b->ev[i].provider;
    if (p != last) {
      last = p;
      pc = NULL;
      for (uint32_t j = 0; j < h->nprov; j++)
        if (h->prov[j].p == p) {
          pc = &h->prov[j];
          break;
        }
      if (!pc && h->nprov < PROV_MAX) {
        pc = &h->prov[h->nprov++];
        pc->p = p;
        pc->n = 0;
      }
    }
    if (pc)
      pc->n++;
    else
      h->prov_other++;
  }
  if (h->lim.replay_max_bytes) {
    if (ring_push(&h->rp, &h->rp_head, &h->rp_count, &h->rp_cap, b) == 0) {
      etw_batch_ref(b);
      h->rp_bytes += mem; /* memory held, not only the JSON bytes */
      while (h->rp_count > 1 && h->rp_bytes > h->lim.replay_max_bytes) {
        struct etw_batch *old = h->rp[h->rp_head];
        h->rp_head = (h->rp_head + 1) % h->rp_cap;
        h->rp_count--;
        h->rp_bytes -= etw_batch_mem(old);
        etw_batch_unref(old);
      }
    }
  }
  if (h->subs) {
    struct hub_item *it = item_new(b);
    for (struct etw_sub *s = h->subs; s; s = s->next) sub_offer(s, it, b, 0);
    if (it) item_unref(it);
  }
}

/* the held events up to @horizon (UTC ns; every one when more than reorder_events are held:
 * the oldest go early, counted) merged by time into batches, delivered (the hub's mutex held).
 * The held batches are a heap on their next events: O(log batches) per event (there are about
 * CPUs × batches per poll period of them: thousands on a busy many-CPU machine) */
static void ro_release(struct etw_hub *h, int64_t horizon) {
  struct etw_batch *out = NULL;
  while (h->ro.n) {
    const struct ro_ent *r = &h->ro.a[0];
    int64_t bt = r->ts;
    int over = h->ro_events > h->reorder_events;
    if (bt > horizon && !over) break;
    if (bt > horizon) h->ro_early++;
    const struct etw_evref *e = &r->b->ev[r->pos];
    if (!out && (out = etw_batch_new(1024, 1u << 20)) != NULL) etw_jw_reserve(&out->data, 64u << 10);
    if (out) {
      size_t mark = out->data.len;
      etw_jw_raw(&out->data, r->b->data.buf + e->off, e->len);
      if (etw_batch_commit(out, mark, e)) h->hub_dropped++;
    } else {
      h->hub_dropped++; /* no memory: counted like any loss before the hub */
    }
    h->ro_last = bt;
    h->ro_events--;
    struct etw_batch *done = ro_heap_next(&h->ro); /* r is stale from here on */
    if (done) etw_batch_unref(done);
    if (out && etw_batch_full(out)) {
      etw_batch_trim(out);
      deliver(h, out, etw_batch_mem(out));
      etw_batch_unref(out);
      out = NULL;
    }
  }
  if (out && out->n) {
    etw_batch_trim(out);
    deliver(h, out, etw_batch_mem(out));
  }
  if (out) etw_batch_unref(out);
}

/* the time up to which held events may go: the lowest producer watermark, but no earlier than
 * reorder_ms ago (a producer that stalls or never ticks delays the others by that much at most) */
static int64_t ro_horizon(const struct etw_hub *h) {
  int64_t t = etw_real_ns() - (int64_t)h->reorder_ms * 1000000LL;
  if (!h->nwm) return t;
  int64_t m = INT64_MAX;
  for (uint32_t i = 0; i < h->nwm; i++)
    if (h->wm[i] < m) m = h->wm[i];
  return m > t ? m : t;
}

/* producer @src will publish nothing older than @wm (the hub's mutex held) */
static void ro_mark(struct etw_hub *h, uint32_t src, int64_t wm) {
  if (src >= ETW_ORDER_MAX_SRC) return; /* it holds nothing back: the window bounds it */
  while (h->nwm <= src) h->wm[h->nwm++] = INT64_MAX;
  if (h->wm[src] == INT64_MAX || wm > h->wm[src]) h->wm[src] = wm;
}

/* time order: hold @b (consumed); an event older than one already released is late: dropped and
 * counted (hub_dropped: the loss a client sees in the session's stats), never delivered out of
 * order. A reader's batch is in its CPU's time order, so the late ones are its first events. */
static void ro_publish(struct etw_hub *h, struct etw_batch *b) {
  pthread_mutex_lock(&h->mu);
  uint32_t k = 0;
  while (k < b->n && b->ev[k].ts_ns < h->ro_last) k++;
  if (h->ended) k = b->n; /* late publish after end, as without order */
  h->hub_dropped += k;
  if (!h->ended) h->ro_late += k;
  if (!h->ended) ro_mark(h, b->ev[b->n - 1].cpu, b->ev[b->n - 1].ts_ns);
  if (k < b->n && ro_heap_push(&h->ro, b, k, h->ro_arrivals++) == 0) {
    h->ro_events += b->n - k;
    b = NULL;
  } else if (k < b->n) {
    h->hub_dropped += b->n - k; /* no memory for the list */
  }
  ro_release(h, ro_horizon(h));
  pthread_mutex_unlock(&h->mu);
  if (b) etw_batch_unref(b);
}

void etw_hub_set_order(struct etw_hub *h, uint32_t ms, uint32_t max_events) {
  h->reorder_ms = ms;
  h->reorder_events = max_events;
}

void etw_hub_tick(struct etw_hub *h, uint32_t src, int64_t wm) {
  if (!h->reorder_ms) return;
  pthread_mutex_lock(&h->mu);
  ro_mark(h, src, wm);
  if (h->ro.n && !h->ended) ro_release(h, ro_horizon(h));
  pthread_mutex_unlock(&h->mu);
}

void etw_hub_drop(struct etw_hub *h, uint64_t n) {
  pthread_mutex_lock(&h->mu);
  h->hub_dropped += n;
  pthread_mutex_unlock(&h->mu);
}

void etw_hub_end(struct etw_hub *h) {
  pthread_mutex_lock(&h->mu);
  if (!h->ended) ro_release(h, INT64_MAX); /* what is held goes out, in order, before the end */
  h->ended = 1;
  pthread_cond_broadcast(&h->room);
  for (struct etw_sub *s = h->subs; s; s = s->next) {
    atomic_store(&s->ended, 1);
    sub_signal(s);
  }
  pthread_mutex_unlock(&h->mu);
}

void etw_hub_end_why(struct etw_hub *h, const char *why) {
  pthread_mutex_lock(&h->mu);
  snprintf(h->end_why, sizeof h->end_why, "%s", why ? why : "");
  pthread_mutex_unlock(&h->mu);
  etw_hub_end(h);
}

int etw_sub_end_why(struct etw_sub *s, char *why, size_t n) {
  pthread_mutex_lock(&s->h->mu);
  int has = s->h->ended && s->h->end_why[0];
  if (has) snprintf(why, n, "%s", s->h->end_why);
  pthread_mutex_unlock(&s->h->mu);
  return has;
}

void etw_hub_stats(struct etw_hub *h, struct etw_hub_stats *o) {
  pthread_mutex_lock(&h->mu);
  o->produced = h->produced;
  o->bytes = h->bytes;
  o->hub_dropped = h->hub_dropped;
  o->sub_dropped = h->sub_dropped_past;
  for (struct etw_sub *s = h->subs; s; s = s->next) o->sub_dropped += atomic_load(&s->dropped);
  o->subscribers = h->nsubs;
  o->last_seq = h->next_seq - 1;
  o->reorder_late = h->ro_late;
  o->reorder_early = h->ro_early;
  o->reorder_held = h->ro_events;
  pthread_mutex_unlock(&h->mu);
}

void etw_hub_provider_counts(struct etw_hub *h, struct etw_jw *w) {
  pthread_mutex_lock(&h->mu);
  etw_jw_ch(w, '{');
  for (uint32_t j = 0; j < h->nprov; j++) {
    if (j) etw_jw_ch(w, ',');
    etw_jw_cs(w, h->prov[j].p);
    etw_jw_ch(w, ':');
    etw_jw_u64(w, h->prov[j].n);
  }
  if (h->prov_other) {
    if (h->nprov) etw_jw_ch(w, ',');
    etw_jw_lit(w, "\"(other)\":");
    etw_jw_u64(w, h->prov_other);
  }
  etw_jw_ch(w, '}');
  pthread_mutex_unlock(&h->mu);
}

struct etw_sub *etw_hub_subscribe(struct etw_hub *h, const struct etw_sub_filter *f,
                                  uint64_t from_seq, int *err) {
  struct etw_sub *s = calloc(1, sizeof *s);
  if (!s) {
    if (err) *err = ETW_E_NOMEM;
    return NULL;
  }
  s->h = h;
  if (f) {
    s->f = *f;
    s->match_all = !f->n_providers && !f->n_names && !f->n_ids && !f->n_pids && !f->n_procs && f->max_level < 0;
  } else {
    s->f.max_level = -1;
    s->match_all = 1;
  }
  s->qmax = h->lim.sub_queue_events;
  if (f && f->queue_events && f->queue_events < s->qmax) s->qmax = f->queue_events;
  uint32_t cap = 16;
  while (cap < s->qmax && cap < RING_MAX) cap *= 2;
  s->q = calloc(cap, sizeof *s->q);
  if (!s->q) {
    free(s);
    if (err) *err = ETW_E_NOMEM;
    return NULL;
  }
  s->qmask = cap - 1;
  etw_cond_init_mono(&s->cv);
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_lock(&h->mu);
  if (h->nsubs >= h->lim.max_subscribers) {
    pthread_mutex_unlock(&h->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->q);
    free(s);
    if (err) *err = ETW_E_LIMIT;
    return NULL;
  }
  s->id = ++h->sub_ids;
  atomic_store(&s->ended, h->ended);
  if (h->lim.lossless && from_seq > h->next_seq) s->skip_below = from_seq;
  if (from_seq && from_seq < h->next_seq) { /* s is private until linked below */
    uint64_t oldest = h->rp_count ? h->rp[h->rp_head]->first_seq : h->next_seq;
    if (from_seq < oldest) s->pending_older = oldest - from_seq;
    for (uint32_t i = 0; i < h->rp_count; i++) {
      struct etw_batch *b = h->rp[(h->rp_head + i) % h->rp_cap];
      uint64_t end = b->first_seq + b->n;
      if (end <= from_seq) continue;
      uint32_t from = from_seq > b->first_seq ? (uint32_t)(from_seq - b->first_seq) : 0;
      uint64_t before = atomic_load(&s->pending_gap);
      struct hub_item *it = item_new(b);
      sub_offer(s, it, b, from);
      if (it) item_unref(it);
      /* what did not fit is a replay limit, not a slow client: report it as such */
      s->pending_replay += atomic_load(&s->pending_gap) - before;
      atomic_store(&s->pending_gap, before);
    }
  }
  s->next = h->subs;
  if (h->subs) h->subs->prev = s;
  h->subs = s;
  h->nsubs++;
  if (s->match_all) atomic_fetch_add(&h->n_all, 1);
  pthread_mutex_unlock(&h->mu);
  return s;
}

static void write_gap(struct etw_jw *out, enum etw_sub_fmt fmt, int *first, uint64_t n,
                      const char *layer, const char *reason) {
  if (fmt == ETW_FMT_JSON_ARRAY && !*first) etw_jw_ch(out, ',');
  *first = 0;
  etw_jw_lit(out, "{\"Gap\":{\"Dropped\":");
  etw_jw_u64(out, n);
  etw_jw_lit(out, ",\"Layer\":");
  etw_jw_cs(out, layer);
  etw_jw_lit(out, ",\"Reason\":");
  etw_jw_cs(out, reason);
  etw_jw_lit(out, "}}");
  if (fmt == ETW_FMT_NDJSON) etw_jw_ch(out, '\n');
}

/* batches one read may take: all a ring holds (the frame size bounds a read anyway). A smaller
 * cap would let a lingering reader take only that many per linger period: at thousands of
 * batches per second its queue would sit half full and its events be 100-200 ms old. */
#define SNAP_MAX RING_MAX

static int has_work(struct etw_sub *s) {
  return atomic_load(&s->qtail) != atomic_load_explicit(&s->qhead, memory_order_relaxed) ||
         atomic_load(&s->pending_gap) || s->pending_older || s->pending_replay ||
         atomic_load(&s->ended) || atomic_load(&s->woken);
}

static int linger_done(struct etw_sub *s) {
  return linger_pressed(s) || atomic_load(&s->ended) || atomic_load(&s->woken);
}

/* sleep until cond(s) or @until (monotonic ns); `waiting` is set before cond is re-checked, so
 * a publisher either sees it and signals, or published before the re-check */
static void sub_sleep(struct etw_sub *s, int what, int (*cond)(struct etw_sub *), int64_t until) {
  struct timespec ts = to_ts(until);
#ifdef HUB_FUTEX
  /* a kick between our store and the wait changes `waiting`, so FUTEX_WAIT returns at once */
  for (;;) {
    atomic_store(&s->waiting, what);
    if (cond(s)) break;
    if (syscall(SYS_futex, &s->waiting, FUTEX_WAIT_BITSET_PRIVATE, what, &ts, NULL,
                FUTEX_BITSET_MATCH_ANY) == -1) {
      if (errno == ETIMEDOUT) break;
      if (errno != EAGAIN && errno != EINTR) { /* cannot happen; never spin if it does */
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
        if (etw_mono_ns() >= until) break;
      }
    }
  }
  atomic_store(&s->waiting, WAIT_NONE);
#else
#ifdef _WIN32 /* winpthreads' timed waits take CLOCK_REALTIME deadlines */
  int64_t rel = until - etw_mono_ns();
  ts = to_ts(etw_real_ns() + (rel > 0 ? rel : 0));
#endif
  pthread_mutex_lock(&s->mu);
  for (;;) {
    atomic_store(&s->waiting, what);
    if (cond(s)) break;
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) break;
  }
  atomic_store(&s->waiting, WAIT_NONE);
  pthread_mutex_unlock(&s->mu);
#endif
}

int etw_sub_read(struct etw_sub *s, struct etw_jw *out, enum etw_sub_fmt fmt, size_t max_bytes,
                 int timeout_ms) {
  /* ?limit=N: the N events went out, the stream ends (only this function adds to delivered) */
  uint64_t left = UINT64_MAX;
  if (s->f.limit) {
    uint64_t sent = atomic_load_explicit(&s->delivered, memory_order_relaxed);
    if (sent >= s->f.limit) return -1;
    left = s->f.limit - sent;
  }
  int64_t now = etw_mono_ns();
  int64_t dl = now + (int64_t)timeout_ms * 1000000LL;
  /* linger, at high publish rates only: let batches accumulate until `linger` after the
   * previous frame (a publisher signals early if a frame's worth of bytes is queued). At low
   * rates it would only delay events, or cost a second wake-up per frame. */
  if (s->fast && s->last_frame_ns) {
    int64_t ld = s->last_frame_ns + s->linger_ns;
    if (ld > dl) ld = dl;
    if (now < ld && !linger_done(s)) {
      sub_sleep(s, WAIT_LINGER, linger_done, ld);
      now = etw_mono_ns();
    }
  }
  if (!has_work(s) && timeout_ms > 0) {
    sub_sleep(s, WAIT_DATA, has_work, dl);
    now = etw_mono_ns();
  }
  atomic_store(&s->woken, 0);
  int ended = atomic_load(&s->ended); /* before the tail: after the end nothing is pushed */
  uint64_t gap = atomic_exchange(&s->pending_gap, 0);
  uint64_t older = s->pending_older, replay = s->pending_replay;
  s->pending_older = s->pending_replay = 0;
  uint64_t head = atomic_load_explicit(&s->qhead, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&s->qtail, memory_order_acquire);
  if (s->linger_ns && now - s->win_t0 >= RATE_WINDOW_NS) {
    /* fast = more than two batches queued per linger period over the last window */
    int64_t span = now - s->win_t0;
    int fast = s->win_t0 && (int64_t)(tail - s->win_tail0) * s->linger_ns > 2 * span;
    /* hysteresis: one slow window (a scheduling hiccup) does not end lingering; two do */
    s->fast = fast ? 2 : s->fast > 0 ? s->fast - 1 : 0;
    /* but never linger when a linger period brings a quarter of the queue or more: a small
     * queue= would leave too little headroom for a late wake-up */
    uint64_t off = atomic_load_explicit(&s->offered, memory_order_relaxed);
    if (s->win_t0 && (double)(off - s->win_off0) * (double)s->linger_ns * 4.0 >= (double)s->qmax * (double)span)
      s->fast = 0;
    s->win_t0 = now;
    s->win_tail0 = tail;
    s->win_off0 = off;
  }
  uint32_t nsnap = tail - head < SNAP_MAX ? (uint32_t)(tail - head) : SNAP_MAX;

  if (!nsnap && !gap && !older && !replay) return ended ? -1 : 0;

  int records = 0, first = 1;
  size_t start_len = out->len;
  if (fmt == ETW_FMT_JSON_ARRAY) etw_jw_ch(out, '[');
  if (older) {
    write_gap(out, fmt, &first, older, "hub", "requested events are older than the replay window");
    records++;
  }
  if (replay) {
    write_gap(out, fmt, &first, replay, "hub",
              "the requested replay is larger than this client's queue (ask for less, or a larger queue=)");
    records++;
  }
  if (gap) {
    write_gap(out, fmt, &first, gap, "subscriber", "subscriber queue full: client too slow");
    records++;
  }
  uint32_t done_batches = 0, end_pos = 0;
  uint64_t delivered = 0, consumed = 0, done_bytes = 0;
  int full = 0;
  /* unfiltered readers of a hub with several of them copy each whole batch's rendering, made
   * once for all of them, instead of formatting its events each */
  int share = s->match_all && atomic_load_explicit(&s->h->n_all, memory_order_relaxed) >= 2;
  for (uint32_t i = 0; i < nsnap && !full; i++) {
    const struct qent *qe = &s->q[(head + i) & s->qmask];
    const struct etw_batch *b = qe->it->b;
    uint32_t j0 = i == 0 && s->pos > qe->from ? s->pos : qe->from, j = j0;
    /* a rendering is made only for an item that another queue also holds (or already has one) */
    if (share && j0 == 0 &&
        (atomic_load_explicit(&qe->it->frag[fmt], memory_order_relaxed) ||
         atomic_load_explicit(&qe->it->refs, memory_order_relaxed) > 1)) {
      const struct etw_jw *fr = item_frag(qe->it, fmt);
      /* taken whole only where the event-by-event loop below would take every event too (each
       * event's rendering is at least e->len, and that loop wants e->len + 32 free before one,
       * the ',' included): frames are cut at the same places either way */
      if (fr && out->len - start_len + fr->len + 33 <= max_bytes && b->n <= left - delivered) {
        if (fmt == ETW_FMT_JSON_ARRAY && !first) etw_jw_ch(out, ',');
        first = 0;
        etw_jw_raw(out, fr->buf, fr->len);
        delivered += b->n;
        records += (int)b->n;
        j = b->n;
      }
      /* else (a frame's worth, or no memory): event by event, cut where the frame is full */
    }
    for (; j < b->n; j++) {
      const struct etw_evref *e = &b->ev[j];
      if (!match(s, b, e)) continue;
      if (delivered >= left || (out->len - start_len + e->len + 32 > max_bytes && records > 0)) {
        full = 1;
        break;
      }
      if (fmt == ETW_FMT_JSON_ARRAY && !first) etw_jw_ch(out, ',');
      first = 0;
      put_event(out, b, j, fmt);
      delivered++;
      records++;
    }
    consumed += j - j0;
    if (j >= b->n) {
      done_batches++;
      done_bytes += b->data.len;
      end_pos = 0;
    } else {
      end_pos = j;
    }
  }
  if (fmt == ETW_FMT_JSON_ARRAY) etw_jw_ch(out, ']');

  for (uint32_t i = 0; i < done_batches; i++) {
    struct qent *qe = &s->q[(head + i) & s->qmask];
    item_unref(qe->it);
    qe->it = NULL;
  }
  s->pos = end_pos;
  atomic_fetch_sub_explicit(&s->queued_events, consumed, memory_order_relaxed);
  atomic_fetch_sub_explicit(&s->queued_bytes, done_bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->delivered, delivered, memory_order_relaxed);
  atomic_store(&s->qhead, head + done_batches); /* slots free; seq_cst: pairs with pub_waiting */
  if (done_batches || consumed) room_freed(s->h);
  if (records == 0) {
    out->len = start_len; /* nothing matched: no empty frame */
    return 0;
  }
  s->last_frame_ns = now;
  return records;
}

void etw_sub_unsend(struct etw_sub *s, uint64_t n) {
  uint64_t d = atomic_load(&s->delivered);
  if (n > d) n = d;
  atomic_fetch_sub(&s->delivered, n);
  atomic_fetch_add(&s->dropped, n);
}

void etw_sub_wake(struct etw_sub *s) {
  atomic_store(&s->woken, 1);
  sub_signal(s);
}

void etw_sub_set_linger(struct etw_sub *s, int linger_ms, size_t linger_bytes) {
  s->linger_ns = linger_ms > 0 ? (int64_t)linger_ms * 1000000LL : 0;
  s->linger_bytes = linger_bytes;
}

void etw_sub_stats(struct etw_sub *s, struct etw_sub_stats *o) {
  o->delivered = atomic_load(&s->delivered);
  o->dropped = atomic_load(&s->dropped);
  o->matched_queued = 0;
  o->queued_events = (uint32_t)atomic_load(&s->queued_events);
}

/* events still queued for @s that match its filter (its reader is not running) */
static uint64_t queued_matching(struct etw_sub *s) {
  uint64_t k = 0, head = atomic_load(&s->qhead), tail = atomic_load(&s->qtail);
  for (uint64_t i = head; i != tail; i++) {
    const struct qent *qe = &s->q[i & s->qmask];
    uint32_t from = i == head && s->pos > qe->from ? s->pos : qe->from;
    k += count_matching(s, qe->it->b, from);
  }
  return k;
}

void etw_sub_close(struct etw_sub *s) { etw_sub_close_final(s, NULL); }

void etw_sub_close_final(struct etw_sub *s, struct etw_sub_stats *o) {
  if (!s) return;
  struct etw_hub *h = s->h;
  pthread_mutex_lock(&h->mu);
  /* what its queue still holds is lost to it (the client went away): counted as its loss —
   * but with ?limit=N only up to N: the rest was never its to get (a stream that ended at its
   * limit lost nothing). Under the hub's mutex, so that no publish adds to the queue meanwhile. */
  uint64_t lost = queued_matching(s), sent = atomic_load(&s->delivered);
  if (s->f.limit && lost > (sent < s->f.limit ? s->f.limit - sent : 0))
    lost = sent < s->f.limit ? s->f.limit - sent : 0;
  atomic_fetch_add(&s->dropped, lost);
  if (o) etw_sub_stats(s, o);
  pthread_cond_broadcast(&h->room); /* a lossless publisher no longer waits for s */
  if (s->prev)
    s->prev->next = s->next;
  else
    h->subs = s->next;
  if (s->next) s->next->prev = s->prev;
  h->nsubs--;
  if (s->match_all) atomic_fetch_sub(&h->n_all, 1);
  h->sub_dropped_past += atomic_load(&s->dropped);
  pthread_mutex_unlock(&h->mu);
  /* unlinked: no publisher can reach s any more, and its reader is not running */
  uint64_t tail = atomic_load(&s->qtail);
  for (uint64_t i = atomic_load(&s->qhead); i != tail; i++) item_unref(s->q[i & s->qmask].it);
  free(s->q);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

void etw_hub_subs_json(struct etw_hub *h, struct etw_jw *w) {
  int first = 1;
  etw_jw_ch(w, '[');
  etw_hub_subs_items(h, w, &first);
  etw_jw_ch(w, ']');
}

void etw_hub_add_provider_counts(struct etw_hub *dst, struct etw_hub *src) {
  struct prov_count pc[PROV_MAX];
  pthread_mutex_lock(&src->mu);
  uint32_t n = src->nprov;
  memcpy(pc, src->prov, n * sizeof pc[0]);
  uint64_t other = src->prov_other;
  pthread_mutex_unlock(&src->mu);
  pthread_mutex_lock(&dst->mu);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t j = 0;
    while (j < dst->nprov && dst->prov[j].p != pc[i].p) j++; /* interned: same name, same pointer */
    if (j < dst->nprov) {
      dst->prov[j].n += pc[i].n;
    } else if (dst->nprov < PROV_MAX) {
      dst->prov[dst->nprov++] = pc[i];
    } else {
      dst->prov_other += pc[i].n;
    }
  }
  dst->prov_other += other;
  pthread_mutex_unlock(&dst->mu);
}

void etw_hub_subs_items(struct etw_hub *h, struct etw_jw *w, int *first) {
  pthread_mutex_lock(&h->mu);
  for (struct etw_sub *s = h->subs; s; s = s->next) {
    if (!*first) etw_jw_ch(w, ',');
    *first = 0;
    etw_jw_lit(w, "{\"id\":");
    etw_jw_u64(w, s->id);
    etw_jw_lit(w, ",\"delivered\":");
    etw_jw_u64(w, atomic_load(&s->delivered));
    etw_jw_lit(w, ",\"dropped\":");
    etw_jw_u64(w, atomic_load(&s->dropped));
    etw_jw_lit(w, ",\"queued\":");
    etw_jw_u64(w, atomic_load(&s->queued_events));
    etw_jw_ch(w, '}');
  }
  pthread_mutex_unlock(&h->mu);
}
