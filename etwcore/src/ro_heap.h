/* ro_heap.h — the batches that "order": "time" holds in the hub (hub.c), as a binary min-heap
 * on each batch's next event: (its time, then the order in which the batches arrived). Merging
 * k held batches then costs O(log k) per event instead of a scan of all k (docs/benchmarks.md
 * "Time order's merge": the scan grew with the CPU count).
 *
 * Ties: events with equal times leave in the order their batches were pushed (ro_heap_push's
 * @arrival, increasing), and within a batch in its own order; so one CPU's events, published in
 * its time order, keep that order even when their times are equal.
 * Not thread-safe: the hub's mutex guards it. The heap holds no reference of its own: the
 * caller's reference moves in with ro_heap_push and out with ro_heap_pop. */
#ifndef ETWD_RO_HEAP_H
#define ETWD_RO_HEAP_H

#include <stdint.h>

#include "etwcore/event.h"

struct ro_ent {
  int64_t ts;       /* b->ev[pos].ts_ns: the key, kept here so that comparing is no pointer chase */
  uint64_t arrival; /* the tie-break: the order of ro_heap_push calls */
  struct etw_batch *b;
  uint32_t pos; /* the next event of b to release */
};

struct ro_heap {
  struct ro_ent *a; /* a[0] is the least */
  uint32_t n, cap;
};

/** ro_heap_push - add batch @b from event @pos on (pos < b->n); 0, or -1 without memory (the
 *  heap is unchanged and the caller keeps @b). */
int ro_heap_push(struct ro_heap *h, struct etw_batch *b, uint32_t pos, uint64_t arrival);
/** ro_heap_next - the top's event was released: move the top to its next event, or remove it
 *  when its batch is done, returning that batch (the caller's reference now); else NULL. */
struct etw_batch *ro_heap_next(struct ro_heap *h);
/** ro_heap_free - the array only (the caller unrefs a[0..n) first). */
void ro_heap_free(struct ro_heap *h);

#endif
