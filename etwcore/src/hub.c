/* hub.c — per-session fan-out of encoded batches to bounded subscriber queues (see hub.h).
 *
 * Locking: one mutex per hub guards the replay ring, the subscriber list and every
 * subscriber's queue *tail* and counters. Only a subscriber's own reader advances its queue
 * head, so etw_sub_read formats bytes outside the lock (holding batch references) and takes the
 * lock again only to advance. Producers therefore never wait behind a slow client's copy.
 */
#include "etwcore/hub.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etwcore/err.h"

#define PROV_MAX 256

struct etw_sub {
  struct etw_hub *h;
  struct etw_sub *next, *prev;
  uint64_t id;
  struct etw_sub_filter f;
  int match_all;
  struct etw_batch **q; /* ring of batch references */
  uint32_t qhead, qcount, qcap;
  uint32_t pos; /* next event index within q[qhead] */
  uint32_t queued_events;
  uint32_t qmax; /* queue bound in events */
  uint64_t delivered, dropped;
  uint64_t pending_gap;   /* dropped events not yet reported in-band */
  uint64_t pending_older;  /* replay request older than the window */
  uint64_t pending_replay; /* replayed events that did not fit this subscriber's queue */
  pthread_cond_t cv;
  int woken;
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
};

struct etw_hub *etw_hub_new(const struct etw_hub_limits *lim) {
  struct etw_hub *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->lim = *lim;
  if (!h->lim.sub_queue_events) h->lim.sub_queue_events = 65536;
  if (!h->lim.max_subscribers) h->lim.max_subscribers = 128;
  h->next_seq = 1;
  pthread_mutex_init(&h->mu, NULL);
  return h;
}

void etw_hub_free(struct etw_hub *h) {
  if (!h) return;
  while (h->subs) etw_sub_close(h->subs); /* defensive: callers close their own */
  for (uint32_t i = 0; i < h->rp_count; i++) etw_batch_unref(h->rp[(h->rp_head + i) % h->rp_cap]);
  free(h->rp);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

static int match(const struct etw_sub *s, const struct etw_evref *e) {
  if (s->match_all) return 1;
  const struct etw_sub_filter *f = &s->f;
  if (f->max_level >= 0 && e->level > f->max_level) return 0;
  if (f->n_providers) {
    uint32_t i = 0;
    while (i < f->n_providers && strcmp(f->providers[i], e->provider)) i++;
    if (i == f->n_providers) return 0;
  }
  if (f->n_names || f->n_ids) {
    int ok = 0;
    for (uint32_t i = 0; i < f->n_names && !ok; i++) ok = e->name && !strcmp(f->names[i], e->name);
    for (uint32_t i = 0; i < f->n_ids && !ok; i++) ok = f->ids[i] == e->event_id;
    if (!ok) return 0;
  }
  if (f->n_pids) {
    uint32_t i = 0;
    while (i < f->n_pids && f->pids[i] != e->pid) i++;
    if (i == f->n_pids) return 0;
  }
  return 1;
}

static uint64_t count_matching(const struct etw_sub *s, const struct etw_batch *b, uint32_t from) {
  if (s->match_all) return b->n - from;
  uint64_t k = 0;
  for (uint32_t i = from; i < b->n; i++) k += (uint64_t)match(s, &b->ev[i]);
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

static void sub_offer(struct etw_sub *s, struct etw_batch *b, uint32_t from) {
  uint32_t n = b->n - from;
  /* an empty queue always takes one batch, so a batch larger than the bound still flows */
  if ((s->queued_events + n <= s->qmax || s->qcount == 0) &&
      ring_push(&s->q, &s->qhead, &s->qcount, &s->qcap, b) == 0) {
    etw_batch_ref(b);
    if (s->qcount == 1) s->pos = from;
    s->queued_events += n;
  } else {
    uint64_t k = count_matching(s, b, from);
    s->dropped += k;
    s->pending_gap += k;
  }
  pthread_cond_signal(&s->cv);
}

void etw_hub_publish(struct etw_hub *h, struct etw_batch *b) {
  if (!b) return;
  if (b->n == 0) {
    etw_batch_unref(b);
    return;
  }
  pthread_mutex_lock(&h->mu);
  if (h->ended) { /* late publish after end: count, never deliver out of order */
    h->hub_dropped += b->n;
    pthread_mutex_unlock(&h->mu);
    etw_batch_unref(b);
    return;
  }
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
      h->rp_bytes += b->data.len;
      while (h->rp_count > 1 && h->rp_bytes > h->lim.replay_max_bytes) {
        struct etw_batch *old = h->rp[h->rp_head];
        h->rp_head = (h->rp_head + 1) % h->rp_cap;
        h->rp_count--;
        h->rp_bytes -= old->data.len;
        etw_batch_unref(old);
      }
    }
  }
  for (struct etw_sub *s = h->subs; s; s = s->next) sub_offer(s, b, 0);
  pthread_mutex_unlock(&h->mu);
  etw_batch_unref(b);
}

void etw_hub_drop(struct etw_hub *h, uint64_t n) {
  pthread_mutex_lock(&h->mu);
  h->hub_dropped += n;
  pthread_mutex_unlock(&h->mu);
}

void etw_hub_end(struct etw_hub *h) {
  pthread_mutex_lock(&h->mu);
  h->ended = 1;
  for (struct etw_sub *s = h->subs; s; s = s->next) pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&h->mu);
}

void etw_hub_stats(struct etw_hub *h, struct etw_hub_stats *o) {
  pthread_mutex_lock(&h->mu);
  o->produced = h->produced;
  o->bytes = h->bytes;
  o->hub_dropped = h->hub_dropped;
  o->sub_dropped = h->sub_dropped_past;
  for (struct etw_sub *s = h->subs; s; s = s->next) o->sub_dropped += s->dropped;
  o->subscribers = h->nsubs;
  o->last_seq = h->next_seq - 1;
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
    s->match_all = !f->n_providers && !f->n_names && !f->n_ids && !f->n_pids && f->max_level < 0;
  } else {
    s->f.max_level = -1;
    s->match_all = 1;
  }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
#ifndef _WIN32
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
#endif
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  s->qmax = h->lim.sub_queue_events;
  if (f && f->queue_events && f->queue_events < s->qmax) s->qmax = f->queue_events;
  pthread_mutex_lock(&h->mu);
  if (h->nsubs >= h->lim.max_subscribers) {
    pthread_mutex_unlock(&h->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    if (err) *err = ETW_E_LIMIT;
    return NULL;
  }
  s->id = ++h->sub_ids;
  if (from_seq && from_seq < h->next_seq) {
    uint64_t oldest = h->rp_count ? h->rp[h->rp_head]->first_seq : h->next_seq;
    if (from_seq < oldest) s->pending_older = oldest - from_seq;
    for (uint32_t i = 0; i < h->rp_count; i++) {
      struct etw_batch *b = h->rp[(h->rp_head + i) % h->rp_cap];
      uint64_t end = b->first_seq + b->n;
      if (end <= from_seq) continue;
      uint32_t from = from_seq > b->first_seq ? (uint32_t)(from_seq - b->first_seq) : 0;
      uint64_t before = s->pending_gap;
      sub_offer(s, b, from);
      /* what did not fit is a replay limit, not a slow client: report it as such */
      s->pending_replay += s->pending_gap - before;
      s->pending_gap = before;
    }
  }
  s->next = h->subs;
  if (h->subs) h->subs->prev = s;
  h->subs = s;
  h->nsubs++;
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

#define SNAP_MAX 64

int etw_sub_read(struct etw_sub *s, struct etw_jw *out, enum etw_sub_fmt fmt, size_t max_bytes,
                 int timeout_ms) {
  struct etw_hub *h = s->h;
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&h->mu);
  while (!s->qcount && !s->pending_gap && !s->pending_older && !s->pending_replay && !h->ended &&
         !s->woken) {
    if (pthread_cond_timedwait(&s->cv, &h->mu, &dl) == ETIMEDOUT) break;
  }
  s->woken = 0;
  uint64_t gap = s->pending_gap, older = s->pending_older, replay = s->pending_replay;
  s->pending_gap = s->pending_older = s->pending_replay = 0;
  uint32_t nsnap = s->qcount < SNAP_MAX ? s->qcount : SNAP_MAX;
  struct etw_batch *snap[SNAP_MAX];
  for (uint32_t i = 0; i < nsnap; i++) {
    snap[i] = s->q[(s->qhead + i) % s->qcap];
    etw_batch_ref(snap[i]);
  }
  uint32_t pos = s->pos;
  int ended = h->ended;
  pthread_mutex_unlock(&h->mu);

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
  uint32_t done_batches = 0, end_pos = pos;
  uint64_t delivered = 0, consumed = 0;
  int full = 0;
  for (uint32_t i = 0; i < nsnap && !full; i++) {
    struct etw_batch *b = snap[i];
    uint32_t j = i == 0 ? pos : 0;
    for (; j < b->n; j++) {
      const struct etw_evref *e = &b->ev[j];
      if (!match(s, e)) continue;
      if (out->len - start_len + e->len + 32 > max_bytes && records > 0) {
        full = 1;
        break;
      }
      if (fmt == ETW_FMT_JSON_ARRAY && !first) etw_jw_ch(out, ',');
      first = 0;
      etw_jw_lit(out, "{\"seq\":");
      etw_jw_u64(out, b->first_seq + j);
      etw_jw_ch(out, ',');
      etw_jw_raw(out, b->data.buf + e->off, e->len);
      if (fmt == ETW_FMT_NDJSON) etw_jw_ch(out, '\n');
      delivered++;
      records++;
    }
    consumed += j - (i == 0 ? pos : 0);
    if (j >= b->n) {
      done_batches++;
      end_pos = 0;
    } else {
      end_pos = j;
    }
  }
  if (fmt == ETW_FMT_JSON_ARRAY) etw_jw_ch(out, ']');

  pthread_mutex_lock(&h->mu);
  for (uint32_t i = 0; i < done_batches; i++) {
    etw_batch_unref(s->q[s->qhead]);
    s->qhead = (s->qhead + 1) % s->qcap;
    s->qcount--;
  }
  s->pos = s->qcount ? end_pos : 0;
  s->queued_events -= (uint32_t)consumed;
  s->delivered += delivered;
  pthread_mutex_unlock(&h->mu);
  for (uint32_t i = 0; i < nsnap; i++) etw_batch_unref(snap[i]);
  if (records == 0) {
    out->len = start_len; /* nothing matched: no empty frame */
    return 0;
  }
  return records;
}

void etw_sub_wake(struct etw_sub *s) {
  pthread_mutex_lock(&s->h->mu);
  s->woken = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->h->mu);
}

void etw_sub_stats(struct etw_sub *s, struct etw_sub_stats *o) {
  pthread_mutex_lock(&s->h->mu);
  o->delivered = s->delivered;
  o->dropped = s->dropped;
  o->matched_queued = 0;
  o->queued_events = s->queued_events;
  pthread_mutex_unlock(&s->h->mu);
}

void etw_sub_close(struct etw_sub *s) {
  if (!s) return;
  struct etw_hub *h = s->h;
  pthread_mutex_lock(&h->mu);
  if (s->prev)
    s->prev->next = s->next;
  else
    h->subs = s->next;
  if (s->next) s->next->prev = s->prev;
  h->nsubs--;
  h->sub_dropped_past += s->dropped;
  for (uint32_t i = 0; i < s->qcount; i++) etw_batch_unref(s->q[(s->qhead + i) % s->qcap]);
  pthread_mutex_unlock(&h->mu);
  free(s->q);
  pthread_cond_destroy(&s->cv);
  free(s);
}

void etw_hub_subs_json(struct etw_hub *h, struct etw_jw *w) {
  pthread_mutex_lock(&h->mu);
  etw_jw_ch(w, '[');
  for (struct etw_sub *s = h->subs; s; s = s->next) {
    if (s != h->subs) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"id\":");
    etw_jw_u64(w, s->id);
    etw_jw_lit(w, ",\"delivered\":");
    etw_jw_u64(w, s->delivered);
    etw_jw_lit(w, ",\"dropped\":");
    etw_jw_u64(w, s->dropped);
    etw_jw_lit(w, ",\"queued\":");
    etw_jw_u64(w, s->queued_events);
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
  pthread_mutex_unlock(&h->mu);
}
