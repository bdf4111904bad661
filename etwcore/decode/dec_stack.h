/* dec_stack.h — call stacks of ETL / Windows events: the stack walks of a trace attached to the
 * events they belong to, their addresses resolved to module+offset (Image events) and managed
 * method names (CLR method load / rundown events). See dec_stack.c.
 *
 * Two phases over the same record stream:
 *  1. learn: every record of the input, in order (a file: one extra pass over it before the
 *     events are written; a live session: each record as it comes) — images, methods, stack
 *     walks (kernel StackWalk/Stack, the stack cache's KeyKernel/KeyUser references and their
 *     KeyDelete/KeyRundown/KeyCreate definitions, ClrStack/Walk) are indexed by the event they
 *     belong to: (file, raw timestamp, thread) — TraceEvent's rule.
 *  2. attach: for each event written, its stacks (the indexed ones and the stack-trace extended
 *     data item the event itself carries) become `,"Stack":[frames…]` before its closing brace.
 * Threads: one etw_stk per reader/consumer thread (no locks). Memory: bounded per index (counted
 * beyond) and, for all indexes of the process together, by one byte budget (etw_stk_budget_set:
 * atomics, any thread); an index whose reservation is refused grows no more (counted the same).
 */
#ifndef ETWCORE_DEC_STACK_H
#define ETWCORE_DEC_STACK_H
#include <stdint.h>

#include "etwcore/etl.h"
#include "etwcore/jw.h"

struct etw_stk;

struct etw_stk_counts {
  uint64_t walks;      /* stack walks indexed (Stack, KeyKernel, KeyUser, ClrStack/Walk, and the
                          events' stack-key extended items) */
  uint64_t attached;   /* of those, attached to an event */
  uint64_t unattached; /* of those, not attached: no event with their time and thread, a key
                          reference whose definition never came, or beyond the index's bounds */
  uint64_t in_event;   /* events with a stack-trace extended data item (their own stack) */
  uint64_t dropped;    /* of the walks, not kept by the index (its bounds, or the budget was
                          spent): their events go without that stack (counted unattached too) */
  uint64_t images_dropped; /* images and JIT methods not kept (same reasons): frames in them
                              show their Address only */
};

/* ---- the process-wide budget of all stack indexes (`--stack-index-mb`) */
#define ETW_STK_BUDGET_DEFAULT_MB 1024
struct etw_stk_budget {
  uint64_t limit, used, peak; /* bytes: the budget, reserved now, the most ever reserved */
  uint64_t refused;           /* reservations refused (each stopped one index growing) */
  uint64_t walks_dropped, images_dropped; /* of all indexes so far (etw_stk_counts' dropped) */
};
/** etw_stk_budget_set - the bytes all indexes together may reserve (default
 *  ETW_STK_BUDGET_DEFAULT_MB MiB); indexes made before keep what they hold. Any thread. */
void etw_stk_budget_set(uint64_t bytes);
void etw_stk_budget_get(struct etw_stk_budget *b);

/** etw_stk_new - @index_walks: 1 for a file (a learning pass before the events are written: the
 *  stack walks are indexed), 0 for a live consumer (only images, methods and the events' own
 *  stack-trace items: a walk record comes after its event was published). */
struct etw_stk *etw_stk_new(int index_walks);
void etw_stk_free(struct etw_stk *k);
/** etw_stk_learn - phase 1, one record (in stream order). */
void etw_stk_learn(struct etw_stk *k, const struct etw_rec *r);
/** etw_stk_learn_end - ends phase 1 (sorts the tables). Learning may go on afterwards (live). */
void etw_stk_learn_end(struct etw_stk *k);
/** etw_stk_is_walk - whether @r is a stack walk event (kernel StackWalk group, ClrStack/Walk):
 *  such rows are delivered only when asked for (`stackwalk_events`). */
int etw_stk_is_walk(const struct etw_rec *r);
/** etw_stk_attach - phase 2: @w holds @r's event text ending in its closing `}`; appends
 *  `,"Stack":[…]` before it when the event has a stack. Returns 1 if it did, 0 if none, -1 when
 *  the writer ran out of room (the event text is left as it was, the writer's error cleared). */
int etw_stk_attach(struct etw_stk *k, const struct etw_rec *r, struct etw_jw *w);
/** etw_stk_claim - phase 2 for an event that is not written (filtered out): marks its stacks as
 *  attached (they found their event) without rendering them. */
void etw_stk_claim(struct etw_stk *k, const struct etw_rec *r);
/** etw_stk_counts - the counts so far (unattached: final after the last event). */
void etw_stk_counts(const struct etw_stk *k, struct etw_stk_counts *c);
/** etw_stk_prepass - phase 1 over @files: a reader of its own reads every record once, then
 *  etw_stk_learn_end. 0, or -1 when a file cannot be opened (the caller's own reader reports it)
 *  or *@stop (may be NULL) was set meanwhile. @nofollow: its reader refuses symbolic links
 *  (etw_etl_reader_set_nofollow; the server's data-dir files). */
int etw_stk_prepass(struct etw_stk *k, const char *const *files, int nf, _Atomic int *stop, int nofollow);

#endif
