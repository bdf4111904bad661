/* log.h — one-line structured logs (logfmt: ts=… level=… msg=… key=value …) on stderr.
 * Three streams share the format: the main log, the access log (kind=access) and the audit log
 * of control actions (kind=audit: who — token id and role —, what, result). Secrets (tokens,
 * cookies) are never passed to these functions. Thread-safe: each line is one write(2). */
#ifndef ETWD_LOG_H
#define ETWD_LOG_H

enum etwd_log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

/** etwd_log_set_level - lines above @lvl are discarded. */
void etwd_log_set_level(enum etwd_log_level lvl);
/** etwd_log_parse_level - "error|warn|info|debug" → level, -1 if unknown. */
int etwd_log_parse_level(const char *s);
/** etwd_log_set_fd - where lines go (default 2). */
void etwd_log_set_fd(int fd);

/** etwd_log - @fmt is a logfmt tail: `key=%s key2=%d`; msg is quoted/escaped for you. */
void etwd_log(enum etwd_log_level lvl, const char *msg, const char *fmt, ...)
#if defined(__MINGW32__) /* C99 printf via __USE_MINGW_ANSI_STDIO, not msvcrt's */
    __attribute__((format(gnu_printf, 3, 4)))
#elif defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/** etwd_logq - escape @s as a logfmt value (quoted when needed) into @buf. Returns buf. */
const char *etwd_logq(char *buf, unsigned size, const char *s);

#endif
