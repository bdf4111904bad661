/* err.h — the one error space of etwcore.
 *
 * Every core and backend function that can fail returns an `enum etw_err` (0 = success) and,
 * where a caller needs the reason, fills a `struct etw_status` with a human-readable detail
 * (e.g. the kernel's own message for a rejected tracefs filter). The list below is the single
 * source: it produces the enum, the stable names (used as problem+json `type` suffixes) and
 * the default messages (used as problem titles). The HTTP status of each lives in the API's one
 * error table, api/problem.h (etwcore knows nothing of HTTP).
 */
#ifndef ETWCORE_ERR_H
#define ETWCORE_ERR_H

#include <stddef.h>

/* X(ENUM, "stable-name", "default message") */
#define ETW_ERR_MAP(X)                                                              \
  X(OK, "ok", "success")                                                            \
  X(INVALID, "invalid-argument", "invalid argument")                                \
  X(BAD_JSON, "malformed-json", "request body is not valid JSON")                   \
  X(NOT_FOUND, "not-found", "no such object")                                       \
  X(EXISTS, "already-exists", "object already exists")                              \
  X(STATE, "wrong-state", "operation not allowed in the object's current state")    \
  X(LIMIT, "limit-reached", "a configured limit was reached")                       \
  X(TOO_LARGE, "too-large", "input exceeds the configured maximum size")            \
  X(NOMEM, "out-of-memory", "out of memory")                                        \
  X(IO, "io-error", "input/output error")                                           \
  X(PERM, "permission-denied", "operation not permitted")                           \
  X(UNSUPPORTED, "unsupported", "not supported by this backend")                    \
  X(KERNEL, "kernel-rejected", "the kernel rejected the request")                   \
  X(CORRUPT, "corrupt-input", "input is corrupt or truncated")                      \
  X(SINK_STREAM, "sink-stream-mismatch", "the sink's JetStream stream cannot take its subject") \
  X(INTERNAL, "internal-error", "internal error")

enum etw_err {
#define ETW_ERR_ENUM_(e, n, m) ETW_E_##e,
  ETW_ERR_MAP(ETW_ERR_ENUM_)
#undef ETW_ERR_ENUM_
  ETW_E__COUNT
};

/* Detail that accompanies an error. `field` names the offending input (JSON pointer such as
 * "/providers/0/filter") when there is one; `msg` is a full sentence. Both are optional. */
struct etw_status {
  enum etw_err code;
  char field[96];
  char msg[512];
};

/** etw_err_name - stable machine name of @e ("not-found"); never NULL. */
const char *etw_err_name(enum etw_err e);
/** etw_err_msg - default message of @e; never NULL. */
const char *etw_err_msg(enum etw_err e);

/**
 * etw_fail - record an error in @st (may be NULL) and return @code.
 * @field: JSON pointer of the offending input or NULL. @fmt: printf format or NULL (default msg).
 */
enum etw_err etw_fail(struct etw_status *st, enum etw_err code, const char *field,
                      const char *fmt, ...)
#if defined(__MINGW32__) /* C99 printf via __USE_MINGW_ANSI_STDIO, not msvcrt's */
    __attribute__((format(gnu_printf, 4, 5)))
#elif defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/** etw_status_clear - reset @st to success. */
void etw_status_clear(struct etw_status *st);

#endif
