/* netguard.h — what a peer can hold before it has authenticated: connection caps (per address and
 * in all) checked when civetweb accepts, and the TLS handshake / request head deadline
 * (--head-timeout). The hooks live in etwd's patched civetweb.c (see CMakeLists.txt). */
#ifndef ETWD_NETGUARD_H
#define ETWD_NETGUARD_H

#include "etwcore/jw.h"

/**
 * etwd_netguard_start - set civetweb's hooks before mg_start2: at most @max_total connections
 * open at once (the worker pool, of which @prespawn threads start with the server and the rest
 * on demand), @max_per_address from one peer address, and the handshake and each request head
 * within @head_timeout_s seconds. Not thread-safe; once per server start.
 * Returns 0, or -1 when out of memory.
 */
int etwd_netguard_start(unsigned max_total, unsigned prespawn, unsigned max_per_address,
                        unsigned head_timeout_s);
/** etwd_netguard_stop - clear the hooks and free the table (after mg_stop). */
void etwd_netguard_stop(void);
/** etwd_netguard_metrics - open connections and refusals by reason, Prometheus text. */
void etwd_netguard_metrics(struct etw_jw *w);

#endif
