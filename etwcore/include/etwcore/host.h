/* host.h — the name this etwd reports as its host (`System.Host` in every Linux event, the
 * `{host}` of sink subjects and message ids), so that events merged from many machines stay
 * attributable. Set once at start-up (--host-name, default the machine's name), before any
 * session exists; read by any thread afterwards (never changes after the first session). */
#ifndef ETWCORE_HOST_H
#define ETWCORE_HOST_H

#define ETW_HOST_MAX 63

/** etw_host_valid - 1 if @s is 1..63 characters of A-Z a-z 0-9 . _ - */
int etw_host_valid(const char *s);
/** etw_host_set - use @s (must be etw_host_valid); NULL = the machine's name (gethostname,
 *  other characters replaced by '-', "localhost" when it has none). Not thread-safe: call it
 *  before the core starts. Returns 0, -1 if @s is invalid. */
int etw_host_set(const char *s);
/** etw_host_name - the current name (the machine's name until etw_host_set was called). */
const char *etw_host_name(void);

#endif
