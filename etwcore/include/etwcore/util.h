/* util.h — small portable helpers shared by the core and the server. */
#ifndef ETWCORE_UTIL_H
#define ETWCORE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

/** etw_mkdirs - create @path and its missing parents with mode 0700 (like mkdir -p).
 *  Returns 0, or -1 with errno set. */
int etw_mkdirs(const char *path);

/** etw_mem_trim - give free malloc memory back to the OS (glibc's malloc_trim; a no-op
 *  elsewhere). Called when a session is freed: its batches were spread over the threads'
 *  arenas and would otherwise stay in the process. */
void etw_mem_trim(void);

/** etw_rfc3339_ns - "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)" (a space instead of the
 *  '+', as form decoding of a query string gives it) → *@ns since 1970 UTC; 0 on success, -1
 *  if @s is not that. */
int etw_rfc3339_ns(const char *s, int64_t *ns);
/** etw_cond_init_mono - pthread_cond_init @cv to time its waits on CLOCK_MONOTONIC (the clock
 *  the callers' deadlines are taken on; Windows' pthreads have no choice of clock). */
void etw_cond_init_mono(pthread_cond_t *cv);
/** etw_mono_ns, etw_real_ns - now on CLOCK_MONOTONIC (deadlines, durations) and on
 *  CLOCK_REALTIME (timestamps users see), in nanoseconds. Any thread. */
int64_t etw_mono_ns(void);
int64_t etw_real_ns(void);
/** etw_url_hide_userinfo - @url (one URL, or several separated by commas) into @out without
 *  the credentials of each (the "user:password" before a host's @ becomes "***"). What a reader
 *  may see of a sink's or a nats source's URL (GET /api/v1/sessions). A URL that does not fit
 *  in @n bytes is left out (never cut inside its credentials). */
void etw_url_hide_userinfo(const char *url, char *out, size_t n);

#endif
