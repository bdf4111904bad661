/* hub.h — per-session fan-out of encoded event batches to subscribers.
 *
 * Producers (backend reader threads) publish whole batches. The hub assigns sequence numbers,
 * keeps a bounded replay window (the last `replay_max_bytes` of batches, for `from=<seq>`),
 * and appends a reference to each subscriber's bounded queue. A full queue never blocks the
 * producer: the batch is dropped *for that subscriber*, the events in it that match the
 * subscriber's filter are counted, and the subscriber's next read starts with a gap record
 * carrying the count. Publishing costs O(subscribers) per batch, not per event; filters are
 * evaluated by the subscriber's own sender thread against the etw_evref headers (a process-name
 * filter reads the event's ProcessName from its System text).
 *
 * Invariant per subscriber: delivered + dropped = produced-matching-its-filter (counted from
 * its subscription on, plus whatever it asked to replay).
 *
 * Threads: publish from any number of producer threads; each subscriber is read by exactly one
 * sender thread; close/unsubscribe from any thread. The hub's mutex guards seq numbers, the
 * replay window and the subscriber list; each subscriber's queue is a lock-free
 * single-producer/single-consumer ring (publishers are serialised by the hub's mutex), so
 * senders never contend with each other nor with a publisher, and a publisher wakes only the
 * senders that sleep. A queue holds at most `sub_queue_events` events (or the subscriber's
 * smaller `queue_events`) and at most 4096 batches. When a hub has two or more unfiltered
 * subscribers, each batch's events are rendered ({"seq":N,…}) once per format by the first of
 * them that reads it, and the others copy that rendering whole (byte-identical output).
 *
 * Lossless hubs (limits.lossless: ETL replays and file decodes, never live sources): a publish
 * first waits (on a condition variable, the hub's mutex released) until every subscriber's
 * queue has room for the batch, so a client that keeps reading, however slowly, gets every
 * event. The wait ends early when a subscriber is closed (a cut or departed client stops
 * holding the publisher back) or on etw_hub_cancel (stop/delete: the producer must stop
 * promptly; what then finds no room is dropped and counted as usual).
 *
 * Whatever a subscriber's queue still holds when it is closed is counted as its loss
 * (dropped, and the hub's sub_dropped), on every hub: a client that went away lost it.
 */
#ifndef ETWCORE_HUB_H
#define ETWCORE_HUB_H

#include <stddef.h>
#include <stdint.h>

#include "etwcore/event.h"

struct etw_hub;
struct etw_sub;

struct etw_hub_limits {
  size_t replay_max_bytes;   /* replay window; 0 = no replay */
  uint32_t sub_queue_events; /* per-subscriber queue bound, in events */
  uint32_t max_subscribers;
  int lossless; /* a file, not a live source: publish waits for room instead of dropping */
};
#define ETW_ORDER_WINDOW_MS 500     /* "order": "time": how long an event waits at most */
#define ETW_ORDER_MAX_SRC 1024      /* producers (CPUs) with a watermark */
#define ETW_ORDER_MAX_EVENTS 65536  /* and how many may wait at most */

/** Per-subscriber server-side filter: all non-empty criteria must match. Names are copied
 *  (never interned: a client's filter must not fill the process-wide name table). */
#define ETW_FILTER_MAX 16
#define ETW_FILTER_NAME_MAX 128
struct etw_sub_filter {
  char providers[ETW_FILTER_MAX][ETW_FILTER_NAME_MAX]; /* ASCII case ignored (as convert's) */
  uint32_t n_providers;
  char names[ETW_FILTER_MAX][ETW_FILTER_NAME_MAX]; /* event names, ASCII case ignored */
  uint32_t n_names;
  uint32_t ids[ETW_FILTER_MAX];
  uint32_t n_ids;
  uint32_t pids[ETW_FILTER_MAX];
  uint32_t n_pids;
  char procs[ETW_FILTER_MAX][ETW_PNAME_PAT_MAX]; /* process-name patterns (event.h) */
  uint32_t n_procs;
  int max_level; /* -1 = any; else Level <= max_level */
  uint32_t queue_events; /* this subscriber's queue bound; 0 = the hub's; never above it */
  uint64_t limit;        /* end the stream (etw_sub_read -1) after this many events; 0 = never */
  /* where a nats session's subscriber starts reading the stream, through a consumer of its own
   * (session.c): a stream sequence or a time; 0 = not given. The hub ignores them. */
  uint64_t from_stream_seq;
  int64_t from_time_ns;
  /* a replay subscriber's own pass (session.c): its stack walk rows delivered (2) or not (1),
   * whatever the session's spec says; 0 = as the spec says. The hub ignores it. */
  int stackwalk_events;
};

struct etw_hub_stats {
  uint64_t produced;    /* events published */
  uint64_t bytes;       /* encoded bytes published */
  uint64_t hub_dropped; /* events the producers could not publish (reported via etw_hub_drop) */
  uint64_t sub_dropped; /* sum over subscribers, current and past */
  uint32_t subscribers;
  uint64_t last_seq;
  uint64_t reorder_late, reorder_early, reorder_held; /* time order (limits.reorder_ms) */
};

struct etw_sub_stats {
  uint64_t delivered, dropped, matched_queued;
  uint32_t queued_events;
};

enum etw_sub_fmt { ETW_FMT_NDJSON, ETW_FMT_JSON_ARRAY };

/** etw_hub_new - allocate a hub; NULL on ENOMEM. Freed by etw_hub_free. */
struct etw_hub *etw_hub_new(const struct etw_hub_limits *lim);
/** etw_hub_free - free the hub; all subscribers must have been closed (etw_sub_close). */
void etw_hub_free(struct etw_hub *h);

/** etw_hub_publish - publish @b (consumes the caller's reference, even when n == 0). */
void etw_hub_publish(struct etw_hub *h, struct etw_batch *b);
/** etw_hub_set_order - time order (session spec "order": "time"; live sources; call before the
 *  first publish): published events wait until they are @ms old (UTC, their ts_ns) and are then
 *  merged by time before they get their seq numbers; at most @max_events are held (beyond: the
 *  oldest go early, counted in reorder_early); an event older than one already released is
 *  dropped and counted (reorder_late, and hub_dropped), never delivered out of order. */
void etw_hub_set_order(struct etw_hub *h, uint32_t ms, uint32_t max_events);
/** etw_hub_tick - time order: producer @src (a CPU: < ETW_ORDER_MAX_SRC) will publish nothing
 *  older than @wm (UTC ns) from now on; held events up to the lowest such watermark of all
 *  producers known (but at least those older than the window) are released. A producer calls
 *  it once with INT64_MIN before anyone publishes (so that the others' events wait for it),
 *  then after every poll, so a quiet session's events still go out. A publish counts as a tick
 *  at its last event's time. No-op without order. */
void etw_hub_tick(struct etw_hub *h, uint32_t src, int64_t wm);
/** etw_hub_drop - count @n events lost before reaching the hub (e.g. encoder overflow). */
void etw_hub_drop(struct etw_hub *h, uint64_t n);
/** etw_hub_cancel - a lossless hub's publishers stop waiting for room from now on (call before
 *  joining a producer that may be blocked in etw_hub_publish). No-op effect on other hubs. */
void etw_hub_cancel(struct etw_hub *h);
/** etw_hub_end - end of stream: subscribers drain what is queued, then get end-of-stream. */
void etw_hub_end(struct etw_hub *h);
/** etw_hub_end_why - etw_hub_end, with the reason a stream that cannot go on gives its
 *  subscribers (a client's own NATS pass whose consumer is gone: its {"End":…} record). */
void etw_hub_end_why(struct etw_hub *h, const char *why);
/** etw_sub_end_why - 1 with etw_hub_end_why's reason in @why once @s's hub ended with one. */
int etw_sub_end_why(struct etw_sub *s, char *why, size_t n);
/** etw_hub_stats - snapshot. Per-provider counts: etw_hub_provider_counts. */
void etw_hub_stats(struct etw_hub *h, struct etw_hub_stats *out);
/** etw_hub_provider_counts - write `{"prov":count,…}` for events published per provider. */
void etw_hub_provider_counts(struct etw_hub *h, struct etw_jw *w);

/**
 * etw_hub_subscribe - new subscriber with @f (copied; NULL = everything).
 * @from_seq: 0 = live only; else replay from that seq out of the window (events older than the
 * window are reported as one gap record). On a lossless hub, a @from_seq not yet published
 * means "from that seq on" (earlier events are not offered to it); elsewhere it means live. Returns NULL with ETW_E_LIMIT when max_subscribers
 * is reached (@err set).
 */
struct etw_sub *etw_hub_subscribe(struct etw_hub *h, const struct etw_sub_filter *f,
                                  uint64_t from_seq, int *err);

/**
 * etw_sub_read - wait up to @timeout_ms for events, then append up to @max_bytes of them
 * (matching the filter, gap records first) to @out in format @fmt: ndjson lines, or one JSON
 * array `[…]` (a complete frame). Returns the number of records appended (events + gaps),
 * 0 on timeout, -1 at end of stream (after everything queued was read) or when closed.
 */
int etw_sub_read(struct etw_sub *s, struct etw_jw *out, enum etw_sub_fmt fmt, size_t max_bytes,
                 int timeout_ms);
/** etw_sub_wake - make a blocked etw_sub_read return (e.g. the client went away). */
void etw_sub_wake(struct etw_sub *s);
/**
 * etw_sub_set_linger - batch frames at high publish rates: while more than two batches per
 * @linger_ms are being queued (measured over 50 ms windows), etw_sub_read first waits until
 * @linger_ms after its previous read that returned records (bounded by its own timeout), so
 * batches published meanwhile go out in one frame — unless @linger_bytes of batches are
 * queued, or the stream ended, or etw_sub_wake. At lower rates reads return as soon as
 * anything is queued. 0 (the default) = never linger. Events wait at most @linger_ms longer.
 * Call before the first etw_sub_read (from the reading thread, or before it starts).
 */
void etw_sub_set_linger(struct etw_sub *s, int linger_ms, size_t linger_bytes);
/** etw_sub_stats - snapshot of one subscriber's counters. */
void etw_sub_stats(struct etw_sub *s, struct etw_sub_stats *out);
/** etw_sub_unsend - @n events read by the last etw_sub_read never reached the client (its write
 *  failed): move them from delivered to dropped (reader thread only). */
void etw_sub_unsend(struct etw_sub *s, uint64_t n);
/** etw_sub_close - unsubscribe and free; no etw_sub_read may be running on @s. Events still
 *  queued for it (matching its filter) are counted as dropped for it. */
void etw_sub_close(struct etw_sub *s);
/** etw_sub_close_final - etw_sub_close, and its final counters (queued loss included) in @o. */
void etw_sub_close_final(struct etw_sub *s, struct etw_sub_stats *o);
/** etw_hub_subs_json - write `[{"id":..,"delivered":..,"dropped":..,"queued":..},…]`. */
void etw_hub_subs_json(struct etw_hub *h, struct etw_jw *w);
/** etw_hub_subs_items - the same objects without the brackets, ',' before each unless *@first
 *  (cleared once anything is written): several hubs in one array. */
void etw_hub_subs_items(struct etw_hub *h, struct etw_jw *w, int *first);
/** etw_hub_add_provider_counts - add @src's per-provider counts to @dst's (summed stats). */
void etw_hub_add_provider_counts(struct etw_hub *dst, struct etw_hub *src);

#endif
