/* sink.h — forwarding a session's events to a distributed log (NATS JetStream).
 *
 * A sink is one more subscriber of the session's hub (etw_hub_subscribe, no filter) with its own
 * thread: it reads ndjson from its hub queue, keeps the events in a bounded spool (memory, then a
 * file under the state dir), publishes them in batches with asynchronous JetStream publishes and
 * removes them from the spool only when the broker acknowledged them (at-least-once; a retried
 * batch is de-duplicated by its `Nats-Msg-Id: HOST/SESSION@START/SEQ`). What fits in neither
 * spool is dropped and counted as loss layer "sink" — and the next message in the stream is a
 * gap record `{"Gap":{"Dropped":N,"Layer":"sink",…}}` so that consumers see it too. A sink never
 * slows the readers: a full hub queue drops for the sink only (loss.subscribers, and `hub_dropped`
 * in the sink's health).
 *
 * Ownership: the session spec owns the parsed etw_sink_spec array; the session owns the running
 * struct etw_sinks (started after the backend's open, before its start; stopped after the hub
 * ended). Builds without libnats (the MinGW build) refuse the `sinks` member with 400.
 *
 * A Kafka sink would implement the same three steps (connect, publish a batch and wait for its
 * acknowledgements, report health) behind this interface; see docs/fleet.md.
 */
#ifndef ETWCORE_SINK_H
#define ETWCORE_SINK_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "etwcore/err.h"
#include "etwcore/hub.h"
#include "etwcore/jw.h"

#define ETW_SINKS_MAX 4

struct etw_sink_spec {
  char *type;      /* "nats" */
  char *url;       /* nats://host:port[,nats://host:port…] (tls:// for TLS) */
  char *subject;   /* template: {host} {session} {provider} {event} */
  char *stream;    /* JetStream stream (created when missing at the sink's start: subjects from
                    * the template; one that exists must take them, or the session is refused) */
  char *creds;     /* optional NATS .creds file (resolved, inside the secrets directory) */
  char *tls_ca, *tls_cert, *tls_key; /* optional PEM files (client certificate: both); ditto */
  uint32_t replicas;       /* replicas of a stream the sink creates (1..5) */
  uint32_t batch;          /* messages per acknowledged batch */
  uint32_t ack_timeout_ms; /* a batch not acknowledged in this time is sent again */
  uint64_t spool_memory_kb, spool_disk_mb; /* the two spool bounds (0 = none of that kind) */
};

#define ETW_SINK_FLUSH_MS 2000 /* at stop, a sink publishes what it holds for this long at most */

/** etw_sinks_configure - server-wide settings (process-wide; call before sessions exist; copies
 *  @secrets_dir): the directory that creds/tls_* files must be in (NULL: none may be named),
 *  and the caps on the sum of all sinks' spools in memory and on disk (MiB). Without a call:
 *  no files allowed, no caps. */
void etw_sinks_configure(const char *secrets_dir, uint64_t total_memory_mb, uint64_t total_disk_mb);
/** etw_sink_secret_file - the optional string member @key of @o naming a regular file inside the
 *  secrets directory (relative names are taken relative to it; symlinks and .. may not lead out):
 *  *out = its resolved path (malloc'd) or NULL when absent; errors name @ptr/@key. Builds with
 *  libnats only (sinks and the nats backend's creds/tls_* files). */
/** etw_secret_hide - @text (e.g. a libnats error, which names the file it could not read or parse)
 *  into @out (@n bytes) with each occurrence of the secret file @path (may be NULL) replaced by its
 *  file name: problems and stats never show the secrets directory. Returns whether @path occurred. */
int etw_secret_hide(const char *text, const char *path, char *out, size_t n);
enum etw_err etw_sink_secret_file(const cJSON *o, const char *key, char **out, const char *ptr,
                                  struct etw_status *st);
/** etw_sinks_total_bytes - the server-wide spool cap in bytes: @disk 0 memory, 1 disk. */
uint64_t etw_sinks_total_bytes(int disk);

/** etw_sinks_parse - the spec's "sinks" member (@v) → *out (n entries). Errors name the JSON
 *  pointer (/sinks/I/member). Free with etw_sinks_spec_free in every case. */
enum etw_err etw_sinks_parse(const cJSON *v, struct etw_sink_spec **out, uint32_t *n,
                             struct etw_status *st);
void etw_sinks_spec_free(struct etw_sink_spec *v, uint32_t n);
/** etw_sinks_spec_json - `[{"type":…,…}]` (credentials and key file names are not shown). */
void etw_sinks_spec_json(const struct etw_sink_spec *v, uint32_t n, struct etw_jw *w);

struct etw_sinks;
struct etw_sink_ctx {
  const char *session;   /* {session}: the session's name, or its id */
  int64_t started_ns;    /* makes message ids unique across restarts of etwd */
  const char *spool_dir; /* where the disk spool goes (created; removed when empty at stop) */
};

/** etw_sinks_start - subscribe to @hub and start one thread per sink. NULL *out when n == 0. */
enum etw_err etw_sinks_start(const struct etw_sink_spec *v, uint32_t n, struct etw_hub *hub,
                             const struct etw_sink_ctx *ctx, struct etw_sinks **out,
                             struct etw_status *st);
/** etw_sinks_stop - after etw_hub_end: each sink publishes what it holds for up to
 *  ETW_SINK_FLUSH_MS more (whatever the broker does: the whole stop takes a few seconds at most),
 *  then counts the rest as loss, unsubscribes and ends; frees @s (NULL: nothing). Returns the
 *  sinks' final loss (etw_sinks_lost). */
uint64_t etw_sinks_stop(struct etw_sinks *s);
/** etw_sinks_lost - events dropped by all sinks (loss layer "sink"). */
uint64_t etw_sinks_lost(struct etw_sinks *s);
/** etw_sinks_json - `[{"type":"nats","state":"ok","error":null,"connected":…,"acked":…,…}]`,
 *  the sinks' health: state "error" (with `error`) while the stream cannot take the events. */
void etw_sinks_json(struct etw_sinks *s, struct etw_jw *w);
/** etw_sinks_ok - 1 while sink @i is connected and its stream takes its events (state "ok"),
 *  0 when not, -1 when there is no sink @i (or @s is NULL). */
int etw_sinks_ok(struct etw_sinks *s, uint32_t i);

#endif
