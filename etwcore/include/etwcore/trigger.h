/* trigger.h — start and stop triggers of a session ("start_when", "stop_when"; trigger.c).
 *
 * A trigger is an event match {"provider","event","filter":{field:value…},"after_s"} or a rate
 * rule {"provider","event"?, "rate_above"|"rate_below":N,"for_s":S,"after_s"}. Each trigger of a
 * session runs its own watcher: a private session (etw_session_create_private) of the same
 * backend with just the trigger's provider (and event), and one thread that reads the watcher's
 * stream and evaluates the condition. The watcher exists from the session's creation, so its
 * errors are the create's 4xx; the thread only fires once armed (etw_trigger_arm), calls
 * @fired once (after after_s), then discards its watcher and ends (so does etw_trigger_disarm).
 * Threads: etw_trigger_* by the session manager; @fired on the trigger's thread, which must not
 * be joined (etw_trigger_free) while @fired waits for something the joiner holds.
 */
#ifndef ETWCORE_TRIGGER_H
#define ETWCORE_TRIGGER_H

#include <cjson/cJSON.h>

#include "etwcore/err.h"

struct etw_core;
struct etw_trigger;
struct etw_jw;

/** etw_trigger_check - validate the trigger object @v at JSON pointer @ptr ("/stop_when"). */
enum etw_err etw_trigger_check(const cJSON *v, const char *ptr, struct etw_status *st);
/** etw_trigger_new - the watcher for @json (a checked trigger) on backend @backend; @fired is
 *  called once on the trigger's thread when it fires (after etw_trigger_arm). */
enum etw_err etw_trigger_new(struct etw_core *c, const char *backend, const char *json,
                             const char *ptr, void (*fired)(void *ctx), void *ctx,
                             struct etw_trigger **out, struct etw_status *st);
/** etw_trigger_arm - from now on the condition is evaluated (events seen before are ignored). */
void etw_trigger_arm(struct etw_trigger *t);
/** etw_trigger_disarm - never fire; the thread ends within 100 ms and discards its watcher.
 *  Non-blocking (the session calls it when it stops, with its lock held). NULL is fine. */
void etw_trigger_disarm(struct etw_trigger *t);
/** etw_trigger_json - {"armed","met",("rate","for_s_met",)"seen","matched","dropped"}: what the
 *  watcher saw (a rate rule's last 1-s window rate, estimated over the watcher's drops). */
void etw_trigger_json(struct etw_trigger *t, struct etw_jw *w);
/** etw_trigger_free - end the thread (joined), discard the watcher, free. NULL is fine. */
void etw_trigger_free(struct etw_trigger *t);

#endif
