/* folded.h — collapsed-stack ("folded") text from events that carry a "Stack": one line per
 * distinct stack, `root;…;leaf COUNT`, the format flamegraph.pl and speedscope read.
 *
 * A frame is named `Module!Symbol` (Symbol alone without a Module), else `Module+0xOFFSET`, else
 * its Address; `;`, spaces and control characters in a name become `_`. The event's "Stack" is
 * innermost first, so a line lists it reversed. An aggregator is owned by one thread.
 */
#ifndef ETWCORE_FOLDED_H
#define ETWCORE_FOLDED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct etw_folded;

/** etw_folded_new - an empty aggregator holding at most @max_stacks distinct stacks and
 *  @max_bytes of their text (0: 1 M stacks, 256 MiB); NULL on ENOMEM. */
struct etw_folded *etw_folded_new(uint32_t max_stacks, size_t max_bytes);
void etw_folded_free(struct etw_folded *f);
/** etw_folded_add - count the top-level "Stack" of one event (its JSON object text, @n bytes,
 *  from `{` or from `"System":`). 1 counted, 0 no stack (or an empty one), -1 dropped: a new
 *  stack beyond the bounds (counted in etw_folded_dropped). */
int etw_folded_add(struct etw_folded *f, const char *json, size_t n);
/** etw_folded_write - the lines, sorted by their stack text. 0, or -1 on a write error. */
int etw_folded_write(struct etw_folded *f, FILE *out);
/** etw_folded_stats - events counted, distinct stacks, events dropped by the bounds. */
void etw_folded_stats(const struct etw_folded *f, uint64_t *events, uint64_t *stacks,
                      uint64_t *dropped);

#endif
