/* nats_src.h — the spec of a session of backend "nats": a JetStream stream read through pull
 * consumers (etwcore/backends/nats/nats_backend.c), served like a live session — one central etwd
 * shows the events many agents' sinks published (docs/fleet.md).
 *   {"backend":"nats","subjects":["etwd.>"],"nats":{"url":"nats://broker:4222","stream":"ETWD"}}
 * and optionally where in the stream to begin: "start_seq": N (a stream sequence) or
 * "start_time": "2026-11-29T05:00:00Z" (RFC 3339, UTC); default: its first message. A secured
 * broker: "url":"tls://…" and/or "tls_ca", "tls_cert"+"tls_key", "creds" — files inside the sink
 * secrets directory (--sink-secrets-dir), as for sinks (sink.h).
 * Ownership: the session spec owns it (etw_nats_src_free from etw_spec_free). */
#ifndef ETWCORE_NATS_SRC_H
#define ETWCORE_NATS_SRC_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "etwcore/backend.h"

#define ETW_NATS_SUBJECTS_MAX 8

struct etw_nats_src {
  char *url, *stream;
  char *creds, *tls_ca, *tls_cert, *tls_key; /* resolved paths inside the secrets dir, or NULL */
  char *subjects[ETW_NATS_SUBJECTS_MAX];
  uint32_t n_subjects;
  uint64_t start_seq;    /* 0 = not given */
  int64_t start_time_ns; /* 0 = not given */
  int ephemeral;         /* a client's own pass (?from_stream_seq / ?from_time, session.c): an
                          * ephemeral consumer that the server also drops when left inactive */
};

/** etw_nats_src_parse - the members "subjects" and "nats" of @body into s->nats (required for
 *  backend "nats", refused for the others). */
enum etw_err etw_nats_src_parse(const cJSON *body, struct etw_session_spec *s, struct etw_status *st);
void etw_nats_src_free(struct etw_nats_src *n);
/** etw_nats_src_json - `,"subjects":[…],"nats":{…}` (with its leading comma) or nothing. */
void etw_nats_src_json(const struct etw_nats_src *n, struct etw_jw *w);

#endif
