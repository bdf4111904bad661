/* session.h — the session manager: a table of sessions, each a backend session + a hub.
 *
 * Ownership: the core owns the table; a `struct etw_session` is reference-counted — the table
 * holds one reference, every API handler or stream that uses it holds one (etw_session_get /
 * etw_session_put). Deleting removes it from the table, stops it and destroys its OS object at
 * once; the memory (and the hub) goes when the last stream lets go.
 * All functions are thread-safe.
 */
#ifndef ETWCORE_SESSION_H
#define ETWCORE_SESSION_H

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdint.h>

#include "etwcore/backend.h"
#include "etwcore/hub.h"

struct etw_core;
struct etw_session;

struct etw_core_config {
  uint32_t max_sessions;
  uint32_t max_subscribers;  /* per session */
  uint32_t sub_queue_events; /* per subscriber */
  size_t replay_bytes;       /* per session replay window */
  const char *state_dir;     /* recordings go to <state_dir>/recordings/<id>/ */
};

/** etw_core_new - initialise every compiled-in backend (mount tracefs, reap stale sessions).
 *  A backend whose init fails is reported in @st but does not fail the core; it is marked
 *  unavailable (etw_core_backend_error). Free with etw_core_free. */
struct etw_core *etw_core_new(const struct etw_core_config *cfg, struct etw_status *st);
/** etw_core_free - stop and destroy every session (removing OS objects), then free. */
void etw_core_free(struct etw_core *c);
/** etw_core_backend_error - NULL if @b initialised, else its error text. */
const char *etw_core_backend_error(struct etw_core *c, const struct etw_backend *b);

/** etw_session_create - parse @body, create and start the session; *out gets a reference. */
enum etw_err etw_session_create(struct etw_core *c, const cJSON *body, const char *const *files,
                                struct etw_session **out, struct etw_status *st);
/** etw_session_create_private - a session outside the table (a file decode): no --max-sessions
 *  slot, no replay window, one subscriber, not listed; *out gets the only reference: end it with
 *  etw_session_discard. Body and files as etw_session_create. */
enum etw_err etw_session_create_private(struct etw_core *c, const cJSON *body,
                                        const char *const *files, struct etw_session **out,
                                        struct etw_status *st);
/** etw_session_discard - stop and destroy a private session and drop the caller's reference. */
void etw_session_discard(struct etw_session *s);
/** etw_session_get - reference to session @id, or NULL. Release with etw_session_put. */
struct etw_session *etw_session_get(struct etw_core *c, uint64_t id);
void etw_session_put(struct etw_session *s);
uint64_t etw_session_id(const struct etw_session *s);
/** etw_session_backend - the session's backend (for its capabilities). */
const struct etw_backend *etw_session_backend(const struct etw_session *s);

/** etw_session_stop - stop consuming (the stream ends; stats and recording stay). */
enum etw_err etw_session_stop(struct etw_session *s, struct etw_status *st);
/** etw_session_marker - put a marker event with @text (@len bytes, no NUL, at most
 *  ETW_MARKER_MAX) into the running session's stream and recording (backends with
 *  ETW_CAP_MARKERS; others: ETW_E_UNSUPPORTED). */
enum etw_err etw_session_marker(struct etw_session *s, const char *text, size_t len,
                                struct etw_status *st);
/** etw_session_snapshot - a flight session (mode "flight") writes what its buffers hold to a new
 *  recording under <state_dir>/recordings (its name in @name, its size in *@bytes) and goes on. */
enum etw_err etw_session_snapshot(struct etw_session *s, char *name, size_t n, uint64_t *bytes,
                                  struct etw_status *st);
/** etw_session_delete - stop, destroy the OS object, remove the table entry. The recording
 *  stays (it is listed under /api/v1/recordings and deleted there). */
enum etw_err etw_session_delete(struct etw_core *c, uint64_t id, struct etw_status *st);
/** etw_session_patch - body {"enable":[provider spec…],"disable":["name"…]}. */
enum etw_err etw_session_patch(struct etw_session *s, const cJSON *body, struct etw_status *st);

/** etw_session_json - the session as JSON (id, name, state, spec, stats). */
void etw_session_json(struct etw_session *s, struct etw_jw *w);
/** etw_session_lost_before_hub - events lost before any subscriber could get them: in the
 *  kernel/OS buffers and by the hub (a trigger's rate rule counts them). */
uint64_t etw_session_lost_before_hub(struct etw_session *s);
/** etw_core_sessions_json - JSON array of every session. */
void etw_core_sessions_json(struct etw_core *c, struct etw_jw *w);
/** etw_core_metrics - Prometheus text exposition of every session and the process. */
void etw_core_metrics(struct etw_core *c, struct etw_jw *w);
uint32_t etw_core_session_count(struct etw_core *c);

/** etw_session_subscribe - subscribe to the session's hub (see etw_hub_subscribe). A replay
 *  (files) that is not stopped gives each subscriber its own lossless pass over the files from
 *  seq 1 (from=<seq>: from there), limited to max_subscribers passes. Release with
 *  etw_session_unsubscribe. */
struct etw_sub *etw_session_subscribe(struct etw_session *s, const struct etw_sub_filter *f,
                                      uint64_t from_seq, int *err);
/** etw_session_subscribe_why - etw_session_subscribe, and when a pass or consumer of its own
 *  cannot be opened, the backend's reason in @why (left as it was when there is none). */
struct etw_sub *etw_session_subscribe_why(struct etw_session *s, const struct etw_sub_filter *f,
                                          uint64_t from_seq, int *err, struct etw_status *why);
/** etw_session_unsubscribe - close @sub (what its queue held counts as its loss; final counters
 *  in @final if not NULL) and end its replay pass if it had one. */
void etw_session_unsubscribe(struct etw_session *s, struct etw_sub *sub, struct etw_sub_stats *final);
/** etw_session_record_path - recording file (exists once recording began) or NULL. */
const char *etw_session_record_path(struct etw_session *s);
/** etw_core_recording_owner - id of the session in the table that records into
 *  <state_dir>/recordings/@name or whose snapshot it is (mode flight), or 0 (a recording of an
 *  earlier run, or of a deleted session). */
uint64_t etw_core_recording_owner(struct etw_core *c, const char *name);
/** etw_core_file_change - unless a session in the table replays @path (one of its spec's files,
 *  which each of its passes opens again by path): rename @from over @path (@from NULL: unlink
 *  @path), under the table's lock, so no session can take the file meanwhile. Returns 0 (done:
 *  *@rc the rename/unlink result) or the id of such a session (its name in @name, or ""). */
uint64_t etw_core_file_change(struct etw_core *c, const char *path, const char *from, int *rc, char *name, size_t n);
/** etw_session_is_recording - 1 until the backend's stop() has completed the recording. */
int etw_session_is_recording(struct etw_session *s);
/** etw_session_remaining_ms - what is left of the spec's duration_s (all of it before the
 *  session starts consuming, 0 after), or -1 if the spec has none. */
int64_t etw_session_remaining_ms(struct etw_session *s);
/** etw_session_wait_stopped - block until the session is no longer running and its recording is
 *  complete (0), @timeout_ms passed (1) or *@cancel became non-zero (2; looked at every 200 ms).
 *  Any thread that holds a reference. */
int etw_session_wait_stopped(struct etw_session *s, int64_t timeout_ms, const atomic_int *cancel);

#endif
