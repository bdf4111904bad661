/* winprov.h — Windows only: etwd's own TraceLogging provider (win_provider.c) and the few
 * backend facts `etwd selftest` needs beyond the backend interface (win_backend.c). */
#ifndef ETWCORE_WINPROV_H
#define ETWCORE_WINPROV_H
#ifdef _WIN32

#include <stdint.h>

#include "etwcore/err.h"
#include "etwcore/tlw.h"

/** etw_win_provider_register - EventRegister etwd's provider (ETW_TLW_PROVIDER_GUID) and set
 *  its traits (EventSetInformation); 0, or the Win32 error (message in @st). Counted and
 *  thread-safe: only the first call registers; each success wants one unregister. */
uint32_t etw_win_provider_register(struct etw_status *st);
/** etw_win_provider_write - EventWriteTransfer of the finished event @w (etw_tlw_end) with
 *  @level, channel ETW_TLW_CHANNEL; 0 or the Win32 error. *@enabled: EventEnabled before it. */
uint32_t etw_win_provider_write(const struct etw_tlw *w, uint8_t level, int *enabled);
/** etw_win_provider_write_kw - the same with the event's @keyword (win_marker.c's session bit). */
uint32_t etw_win_provider_write_kw(const struct etw_tlw *w, uint8_t level, uint64_t keyword, int *enabled);
/** etw_win_provider_unregister - drop one registration; the last one EventUnregisters (0 or
 *  the Win32 error). */
uint32_t etw_win_provider_unregister(void);

/** etw_win_wine_version - wine's version when running under wine, else NULL. */
const char *etw_win_wine_version(void);
/** etw_win_force_calls - under wine, make the backend issue its advapi32 calls anyway (as
 *  ETWD_WIN_UNDER_WINE=1 does; TDH stays refused): the self-test reports what they return.
 *  Before any session; no effect on Windows. */
void etw_win_force_calls(void);
/** etw_win_session_query - the Win32 result of ControlTraceW(QUERY) for the session @name
 *  (0: it exists; ERROR_WMI_INSTANCE_NOT_FOUND: it does not). */
uint32_t etw_win_session_query(const char *name);

#endif
#endif
