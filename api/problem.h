/* problem.h — the one table of the API's errors: every problem+json body etwd sends names a row
 * here, which gives its HTTP status, its stable type (urn:etwd:problem:<name>) and its title;
 * the call passes only the detail (and the offending field). Two parts:
 *  - the core errors (etwcore/err.h: their names and titles) with the status each becomes
 *    (ETWD_CORE_STATUS; etwd_fail and etwd_prob_of use it): ETWD_P_<CORE NAME> == ETW_E_<...>;
 *  - the errors of the HTTP layer itself (ETWD_HTTP_PROBLEMS), numbered after them.
 * A new error is one row. tests/lint/check_layers.py keeps every call site on the table. */
#ifndef ETWD_PROBLEM_H
#define ETWD_PROBLEM_H

#include "etwcore/err.h"

/* X(CORE NAME, HTTP status) — every core error once (http.c checks it at compile time) */
#define ETWD_CORE_STATUS(X)                                                                        \
  X(OK, 200)                                                                                       \
  X(INVALID, 400)                                                                                  \
  X(BAD_JSON, 400)                                                                                 \
  X(NOT_FOUND, 404)                                                                                \
  X(EXISTS, 409)                                                                                   \
  X(STATE, 409)                                                                                    \
  X(LIMIT, 429)                                                                                    \
  X(TOO_LARGE, 413)                                                                                \
  X(NOMEM, 503)                                                                                    \
  X(IO, 500)                                                                                       \
  X(PERM, 403)                                                                                     \
  X(UNSUPPORTED, 422)                                                                              \
  X(KERNEL, 400)                                                                                   \
  X(CORRUPT, 422)                                                                                  \
  X(SINK_STREAM, 400)                                                                              \
  X(INTERNAL, 500)

/* X(NAME, HTTP status, "type name", "title") — errors only the HTTP layer has */
#define ETWD_HTTP_PROBLEMS(X)                                                                      \
  X(BAD_REQUEST, 400, "bad-request", "Bad request")                                                \
  X(INCOMPLETE_BODY, 400, "incomplete-body", "The request body ended early")                       \
  X(UNAUTHORIZED, 401, "unauthorized", "Unauthorized")                                             \
  X(FORBIDDEN, 403, "forbidden", "Forbidden")                                                      \
  X(FORBIDDEN_ORIGIN, 403, "forbidden-origin", "Cross-origin request refused")                     \
  X(METHOD, 405, "method-not-allowed", "Method not allowed")                                       \
  X(NOT_ACCEPTABLE, 406, "not-acceptable", "Not acceptable")                                       \
  X(LENGTH_REQUIRED, 411, "length-required", "Length required")                                    \
  X(PRECONDITION, 412, "precondition-failed", "Precondition failed")                               \
  X(MEDIA_TYPE, 415, "unsupported-media-type", "Unsupported media type")                           \
  X(NOT_ETL, 415, "not-etl", "Not an ETL file")                                                    \
  X(RANGE, 416, "range-not-satisfiable", "Range not satisfiable")                                  \
  X(EXPECTATION, 417, "expectation-failed", "Expectation failed")                                  \
  X(INVALID_MANIFEST, 422, "invalid-manifest", "Not a provider manifest")                          \
  X(UPGRADE_REQUIRED, 426, "upgrade-required", "Upgrade required")                                 \
  X(NOT_IMPLEMENTED, 501, "not-implemented", "Not implemented by this backend")                    \
  X(SHUTTING_DOWN, 503, "shutting-down", "The server is stopping")                                 \
  X(TIMEOUT, 504, "timeout", "Still running")                                                      \
  X(HTTP_VERSION, 505, "http-version-not-supported", "HTTP version not supported")

enum etwd_prob {
#define ETWD_P_CORE_(e, n, m) ETWD_P_##e = ETW_E_##e,
  ETW_ERR_MAP(ETWD_P_CORE_)
#undef ETWD_P_CORE_
  ETWD_P__CORE_LAST = ETW_E__COUNT - 1,
#define ETWD_P_HTTP_(e, s, n, t) ETWD_P_##e,
  ETWD_HTTP_PROBLEMS(ETWD_P_HTTP_)
#undef ETWD_P_HTTP_
  ETWD_P__COUNT
};

struct etwd_prob_info {
  int status;
  const char *name;  /* the type's suffix: urn:etwd:problem:<name> */
  const char *title; /* the same for every occurrence of the type (RFC 9457 3.1.3) */
};

/** etwd_prob_info - the row of @p (an unknown value: internal-error's). */
struct etwd_prob_info etwd_prob_info(enum etwd_prob p);
/** etwd_prob_of - the row of a core error. */
static inline enum etwd_prob etwd_prob_of(enum etw_err e) {
  return (unsigned)e < ETW_E__COUNT ? (enum etwd_prob)e : ETWD_P_INTERNAL;
}
/** etwd_prob_for_status - a row with HTTP status @status (for civetweb's own errors); else
 *  bad-request for a 4xx, internal-error for anything else. */
enum etwd_prob etwd_prob_for_status(int status);

#endif
